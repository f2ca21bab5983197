package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core/protocol"
)

// askingTool asks its client two questions (ElicitorOf), one after the
// other, and returns both answers: a tool that blocks where it asks, as
// ask_user does.
func askingTool() testTool {
	return testTool{
		info: ToolInfo{Name: "ask_twice", Description: "asks two questions"},
		run: func(ctx context.Context, _ string, _ []byte, _ ProgressFunc) ([]byte, *protocol.Error) {
			ask := ElicitorOf(ctx)
			if ask == nil {
				return nil, protocol.Errorf(protocol.ToolFailed, "nobody to ask")
			}
			var answers []string
			for _, q := range []string{"first?", "second?"} {
				action, content, err := ask(ctx, q, json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}}}`))
				if err != nil {
					return nil, protocol.Errorf(protocol.ToolFailed, "%v", err)
				}
				answers = append(answers, action+" "+string(content))
			}
			b, _ := json.Marshal(strings.Join(answers, " | "))
			return b, nil
		},
	}
}

// samplingTool asks the client's model once.
func samplingTool() testTool {
	return testTool{
		info: ToolInfo{Name: "sample", Description: "asks the client's model"},
		run: func(ctx context.Context, _ string, _ []byte, _ ProgressFunc) ([]byte, *protocol.Error) {
			sample := SamplerOf(ctx)
			if sample == nil {
				return nil, protocol.Errorf(protocol.ToolFailed, "no model")
			}
			out, err := sample(ctx, []byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"maxTokens":10}`))
			if err != nil {
				return nil, protocol.Errorf(protocol.ToolFailed, "%v", err)
			}
			b, _ := json.Marshal(string(out))
			return b, nil
		},
	}
}

// answeringClient answers every question with its text, numbered, and
// every sampling request with "sampled".
func answeringClient() (*sdk.ClientOptions, *[]string) {
	var mu sync.Mutex
	var asked []string
	return &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params.Message)
			n := len(asked)
			mu.Unlock()
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"answer": req.Params.Message + string(rune('0'+n))}}, nil
		},
		CreateMessageWithToolsHandler: func(context.Context, *sdk.CreateMessageWithToolsRequest) (*sdk.CreateMessageWithToolsResult, error) {
			return &sdk.CreateMessageWithToolsResult{Role: "assistant", Model: "m", Content: []sdk.Content{&sdk.TextContent{Text: "sampled"}}}, nil
		},
	}, &asked
}

func callText(t *testing.T, cs *sdk.ClientSession, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content blocks", name, len(res.Content))
	}
	text := res.Content[0].(*sdk.TextContent).Text
	if res.IsError {
		t.Fatalf("%s failed: %s", name, text)
	}
	return text
}

// Both revisions are served on one HTTP endpoint, each client on its own:
// the SDK's client asks for 2026-07-28 (server/discover, no session) and
// gets it; one that asks for 2025-11-25 gets the handshake and a session.
// A tool's questions reach either: as elicitation/create under 2025-11-25,
// as input_required results (the call parked between the rounds) under
// 2026-07-28; so do its sampling requests.
func TestBothRevisions_HTTP(t *testing.T) {
	h := newTestHost(echoTool("echo"), askingTool(), samplingTool())
	srv := NewServer(h, ServerOptions{})
	defer srv.Close()
	addr, err := srv.Listen("127.0.0.1:0", ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + addr.String() + HTTPPath
	for _, version := range []string{ProtocolVersion, LegacyProtocolVersion} {
		t.Run(version, func(t *testing.T) {
			opts, asked := answeringClient()
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, opts).Connect(context.Background(),
				&sdk.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &sdk.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Errorf("negotiated %s, want %s", got, version)
			}
			if (cs.ID() == "") != (version == ProtocolVersion) {
				t.Errorf("session id %q under %s", cs.ID(), version)
			}
			if got := callText(t, cs, "echo"); got != "{}" {
				t.Errorf("echo: %s", got)
			}
			want := `accept {"answer":"first?1"} | accept {"answer":"second?2"}`
			if got := callText(t, cs, "ask_twice"); got != want {
				t.Errorf("ask_twice: %s, want %s", got, want)
			}
			if len(*asked) != 2 {
				t.Errorf("asked %v", *asked)
			}
			if got := callText(t, cs, "sample"); !strings.Contains(got, `"text":"sampled"`) {
				t.Errorf("sample: %s", got)
			}
		})
	}
	if n := len(srv.parking.calls); n != 0 {
		t.Errorf("%d calls still parked", n)
	}
}

// A 2026-07-28 client over stdio: the same rounds on a connection.
func TestInputRequired_stdio(t *testing.T) {
	opts, _ := answeringClient()
	h := newTestHost(askingTool())
	s := serveInMemoryVersion(t, h, ServerOptions{}, opts, ProtocolVersion)
	want := `accept {"answer":"first?1"} | accept {"answer":"second?2"}`
	if got := callText(t, s.cs, "ask_twice"); got != want {
		t.Errorf("ask_twice: %s, want %s", got, want)
	}
}

// A retry naming no parked call, and a parked call whose client never
// comes back, end cleanly: the first is an error result, the second is
// cancelled after the wait.
func TestInputRequired_unknownAndAbandoned(t *testing.T) {
	cancelled := make(chan struct{})
	h := newTestHost(testTool{
		info: ToolInfo{Name: "ask"},
		run: func(ctx context.Context, _ string, _ []byte, _ ProgressFunc) ([]byte, *protocol.Error) {
			_, _, err := ElicitorOf(ctx)(ctx, "anyone?", nil)
			if err != nil {
				close(cancelled)
				return nil, protocol.Errorf(protocol.ToolFailed, "%v", err)
			}
			return []byte(`"answered"`), nil
		},
	})
	srv := NewServer(h, ServerOptions{WaitTimeout: 300 * time.Millisecond})
	defer srv.Close()
	addr, err := srv.Listen("127.0.0.1:0", ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) { return nil, nil },
		MultiRoundTrip:     &sdk.MultiRoundTripOptions{Disabled: true}, // this test makes the rounds itself
	})
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: "http://" + addr.String() + HTTPPath, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "ask", Arguments: map[string]any{}, RequestState: "nothing-parked-here"})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "requestState names no call") {
		t.Errorf("a retry of nothing: %v %+v", err, res)
	}
	res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "ask", Arguments: map[string]any{}})
	if err != nil || !res.NeedsInput() || res.RequestState == "" || len(res.InputRequests) != 1 {
		t.Fatalf("the first round: %v %+v", err, res)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the abandoned call was not cancelled")
	}
	res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "ask", Arguments: map[string]any{}, RequestState: res.RequestState})
	if err != nil || !res.IsError {
		t.Errorf("a retry after the wait: %v %+v", err, res)
	}
}

// tools/list is in the same order whatever order the host lists its tools
// in, and carries the cache hints of ListTTL.
func TestToolsList_orderAndCacheHints(t *testing.T) {
	h := newTestHost(echoTool("zeta"), echoTool("alpha"), echoTool("mid"))
	srv := NewServer(h, ServerOptions{ListTTL: 1500 * time.Millisecond})
	defer srv.Close()
	addr, err := srv.Listen("127.0.0.1:0", ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: "http://" + addr.String() + HTTPPath, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "alpha,mid,zeta" {
		t.Errorf("order: %v", names)
	}
	if res.TTLMs != 1500 || res.CacheScope != "private" {
		t.Errorf("cache hints: ttlMs %d, cacheScope %q", res.TTLMs, res.CacheScope)
	}
}
