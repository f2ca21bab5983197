package mcp

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// TestDeclaredAnnotations: the hints a descriptor declares reach
// tools/list; those it does not declare are MCP's defaults (issue 26 §3),
// never derived from its capabilities.
func TestDeclaredAnnotations(t *testing.T) {
	yes, no := true, false
	d, err := toolbox.ParseDescriptor([]byte(`{"name":"fetch","capabilities":["network"],"annotations":{"readOnlyHint":true,"idempotentHint":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	fetch := echoTool("fetch")
	fetch.info = InfoFromDescriptor(&d)
	writer := echoTool("append_line", toolbox.CapFSWrite)
	writer.info.Annotations = &toolbox.Annotations{Destructive: &no}
	closed := echoTool("memory")
	closed.info.Annotations = &toolbox.Annotations{ReadOnly: &no, OpenWorld: &yes}
	s := serveInMemory(t, newTestHost(fetch, writer, closed), ServerOptions{}, nil)
	res, err := s.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"fetch":       `{"idempotentHint":true,"openWorldHint":true,"readOnlyHint":true}`,
		"append_line": `{"destructiveHint":false,"idempotentHint":false,"openWorldHint":true,"readOnlyHint":false}`,
		"memory":      `{"destructiveHint":true,"idempotentHint":false,"openWorldHint":true,"readOnlyHint":false}`,
	}
	for _, tool := range res.Tools {
		var m map[string]any
		_ = json.Unmarshal([]byte(mustJSON(t, tool.Annotations)), &m)
		if got := mustJSON(t, m); got != want[tool.Name] {
			t.Errorf("%s: annotations %s, want %s", tool.Name, got, want[tool.Name])
		}
	}
}

// TestClientLog: ClientLogOf in a call's context sends notifications/message
// at and above the client's level, the tool's name as logger; a call that
// did not come from a client has none.
func TestClientLog(t *testing.T) {
	if ClientLogOf(context.Background()) != nil {
		t.Error("a context outside any tools/call has a client log")
	}
	var mu sync.Mutex
	var got []string
	copts := &sdk.ClientOptions{LoggingMessageHandler: func(_ context.Context, r *sdk.LoggingMessageRequest) {
		mu.Lock()
		got = append(got, string(r.Params.Level)+" "+r.Params.Logger+" "+mustJSON(t, r.Params.Data))
		mu.Unlock()
	}}
	chatty := testTool{info: ToolInfo{Name: "chatty"}, run: func(ctx context.Context, _ string, _ []byte, _ ProgressFunc) ([]byte, *protocol.Error) {
		log := ClientLogOf(ctx)
		if log == nil {
			return nil, protocol.Errorf(protocol.ToolFailed, "no client log")
		}
		log("debug", "detail")
		log("info", "starting")
		log("error", "trouble")
		return []byte(`"done"`), nil
	}}
	s := serveInMemory(t, newTestHost(chatty), ServerOptions{}, copts)
	if caps := s.cs.InitializeResult().Capabilities; caps.Logging == nil {
		t.Error("the server does not declare logging")
	}
	// No level set: nothing is sent.
	if res := s.call(t, "chatty", nil); res.IsError {
		t.Fatalf("chatty: %s", text(res))
	}
	if err := s.cs.SetLoggingLevel(context.Background(), &sdk.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	s.call(t, "chatty", nil)
	want := []string{`info chatty "starting"`, `error chatty "trouble"`}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= len(want) }, "the log notifications")
	mu.Lock()
	defer mu.Unlock()
	if mustJSON(t, got) != mustJSON(t, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}
