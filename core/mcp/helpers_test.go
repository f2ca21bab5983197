package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
)

// testTool is one tool of testHost: what it lists and what it does.
type testTool struct {
	info ToolInfo
	run  func(ctx context.Context, session string, args []byte, progress ProgressFunc) ([]byte, *protocol.Error)
}

// testHost is a Host whose tools the test sets and changes.
type testHost struct {
	mu        sync.Mutex
	tools     map[string]testTool
	order     []string
	listeners map[int]func()
	next      int
	panicList bool
	calls     []string // session/name of each call
}

func newTestHost(tools ...testTool) *testHost {
	h := &testHost{tools: map[string]testTool{}, listeners: map[int]func(){}}
	for _, t := range tools {
		h.tools[t.info.Name] = t
		h.order = append(h.order, t.info.Name)
	}
	return h
}

func (h *testHost) Tools() []ToolInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.panicList {
		panic("listing went wrong")
	}
	var out []ToolInfo
	for _, n := range h.order {
		out = append(out, h.tools[n].info)
	}
	return out
}

func (h *testHost) Call(ctx context.Context, session, name string, args []byte, progress ProgressFunc) ([]byte, *protocol.Error) {
	h.mu.Lock()
	t, ok := h.tools[name]
	h.calls = append(h.calls, session+"/"+name)
	h.mu.Unlock()
	if !ok {
		return nil, protocol.Errorf(protocol.UnknownTool, "Tool not found: %s", name)
	}
	return t.run(ctx, session, args, progress)
}

func (h *testHost) OnToolsChanged(fn func()) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := h.next
	h.next++
	h.listeners[id] = fn
	return func() {
		h.mu.Lock()
		delete(h.listeners, id)
		h.mu.Unlock()
	}
}

// set adds or replaces a tool and signals the change, as the engine does
// after a registration.
func (h *testHost) set(t testTool) {
	h.mu.Lock()
	if _, ok := h.tools[t.info.Name]; !ok {
		h.order = append(h.order, t.info.Name)
	}
	h.tools[t.info.Name] = t
	fns := h.snapshotLocked()
	h.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

func (h *testHost) remove(name string) {
	h.mu.Lock()
	delete(h.tools, name)
	for i, n := range h.order {
		if n == name {
			h.order = append(h.order[:i], h.order[i+1:]...)
			break
		}
	}
	fns := h.snapshotLocked()
	h.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

func (h *testHost) snapshotLocked() []func() {
	var fns []func()
	for _, fn := range h.listeners {
		fns = append(fns, fn)
	}
	return fns
}

func echoTool(name string, caps ...string) testTool {
	return testTool{
		info: ToolInfo{Name: name, Description: "returns its arguments", Capabilities: caps,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}}}`)},
		run: func(_ context.Context, _ string, args []byte, _ ProgressFunc) ([]byte, *protocol.Error) {
			return append([]byte(nil), args...), nil
		},
	}
}

// logSink collects log lines.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *logSink) logger() *logging.Logger {
	return logging.New(func(l logging.Level, m string) {
		s.mu.Lock()
		s.lines = append(s.lines, l.String()+": "+m)
		s.mu.Unlock()
	}, logging.Debug)
}

func (s *logSink) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// served is a Server serving one stdio session over an in-memory pipe to
// an SDK client.
type served struct {
	srv     *Server
	cs      *sdk.ClientSession
	serveRC chan error
}

func serveInMemory(t *testing.T, h Host, sopts ServerOptions, copts *sdk.ClientOptions) *served {
	t.Helper()
	return serveInMemoryVersion(t, h, sopts, copts, LegacyProtocolVersion)
}

// serveInMemoryVersion is serveInMemory with a client asking for version.
func serveInMemoryVersion(t *testing.T, h Host, sopts ServerOptions, copts *sdk.ClientOptions, version string) *served {
	t.Helper()
	srv := NewServer(h, sopts)
	a, b := net.Pipe()
	rc := make(chan error, 1)
	go func() { rc <- srv.ServeStdio(context.Background(), a, a) }()
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, copts)
	cs, err := client.Connect(context.Background(), &sdk.IOTransport{Reader: b, Writer: b}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	s := &served{srv: srv, cs: cs, serveRC: rc}
	t.Cleanup(func() {
		// As a host would: the streams close, then the server.
		a.Close()
		b.Close()
		cs.Close()
		srv.Close()
	})
	return s
}

func (s *served) call(t *testing.T, name string, args any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func text(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		} else {
			parts = append(parts, fmt.Sprintf("%T", c))
		}
	}
	return strings.Join(parts, "|")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// within fails the test if ch gives nothing within a generous bound: a
// hang guard, not a timing assertion.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s within 30 s", what)
		var zero T
		return zero
	}
}

// waitFor polls cond until it holds, failing after a generous bound.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 30 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// legacySession makes the SDK's client (which asks for 2026-07-28 first)
// speak the initialize handshake and sessions of 2025-11-25, what the
// tests written for it check.
var legacySession = &sdk.ClientSessionOptions{ProtocolVersion: LegacyProtocolVersion}
