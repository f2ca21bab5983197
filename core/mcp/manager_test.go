package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// helperEnv makes the test binary an MCP server on its stdio (TestMain).
const helperEnv = "CLARA_MCP_TEST_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperServer(mode))
	}
	os.Exit(m.Run())
}

// helperServer is a stdio MCP server of a few tools, in a child process:
//
//	tools   echo, pid, env (SECRET_CHILD), grandchild (its sleeping child's pid),
//	        leak_error and leak_tool_error (SECRET_CHILD in a JSON-RPC error, in
//	        an isError result), and writes the secret to stderr at start
//	hang    reads stdin and never answers
//	clara   core/mcp's Server over a Host whose only tool is echo (bench)
//	sdk     the SDK's bare server whose echo handler does nothing else (bench)
func helperServer(mode string) int {
	ctx := context.Background()
	switch mode {
	case "hang":
		io.Copy(io.Discard, os.Stdin)
		return 0
	case "clara":
		echo := testTool{info: ToolInfo{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
			run: func(_ context.Context, _ string, args []byte, _ ProgressFunc) ([]byte, *protocol.Error) {
				return append([]byte(nil), args...), nil
			}}
		srv := NewServer(newTestHost(echo), ServerOptions{})
		defer srv.Close()
		if err := srv.ServeStdio(ctx, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "sdk":
		s := sdk.NewServer(&sdk.Implementation{Name: "bare"}, nil)
		s.AddTool(&sdk.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(req.Params.Arguments)}},
					StructuredContent: req.Params.Arguments}, nil
			})
		if err := s.Run(ctx, &sdk.StdioTransport{}); err != nil && !errors.Is(err, io.EOF) {
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "starting with secret %s\n", os.Getenv("SECRET_CHILD"))
	// A line longer than the log keeps, the secret across the cut.
	fmt.Fprintf(os.Stderr, "%s%s and more\n", strings.Repeat("x", 500), os.Getenv("SECRET_CHILD"))
	s := sdk.NewServer(&sdk.Implementation{Name: "helper"}, nil)
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	obj := json.RawMessage(`{"type":"object"}`)
	s.AddTool(&sdk.Tool{Name: "echo", InputSchema: obj}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return text(string(req.Params.Arguments)), nil
	})
	s.AddTool(&sdk.Tool{Name: "pid", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return text(strconv.Itoa(os.Getpid())), nil
	})
	s.AddTool(&sdk.Tool{Name: "env", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		_, hasOther := os.LookupEnv("CLARA_MCP_TEST_OTHER")
		return text(fmt.Sprintf("%s %d %v", os.Getenv("SECRET_CHILD"), len(os.Getenv("SECRET_CHILD")), hasOther)), nil
	})
	s.AddTool(&sdk.Tool{Name: "leak_error", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32000, Message: "cannot use " + os.Getenv("SECRET_CHILD")}
	})
	s.AddTool(&sdk.Tool{Name: "leak_tool_error", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "refused " + os.Getenv("SECRET_CHILD")}}}, nil
	})
	var mu sync.Mutex
	var sleeper *os.Process
	s.AddTool(&sdk.Tool{Name: "grandchild", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if sleeper == nil {
			p, err := os.StartProcess("/bin/sleep", []string{"sleep", "1000"}, &os.ProcAttr{})
			if err != nil {
				return nil, err
			}
			sleeper = p
		}
		return text(strconv.Itoa(sleeper.Pid)), nil
	})
	if err := s.Run(ctx, &sdk.StdioTransport{}); err != nil && !errors.Is(err, io.EOF) {
		return 1
	}
	return 0
}

// helperConfig is a stdio server running the test binary in mode.
func helperConfig(name, mode string) ServerConfig {
	return ServerConfig{Name: name, Command: os.Args[0], Args: []string{"-test.run=^$"},
		EnvFrom: map[string]string{helperEnv: "CLARA_MCP_TEST_MODE_" + mode}}
}

func init() {
	for _, m := range []string{"tools", "hang", "clara", "sdk"} {
		os.Setenv("CLARA_MCP_TEST_MODE_"+m, m)
	}
}

// alive reports whether pid is a process that has not exited (a zombie
// has).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// remoteServer is an SDK server the Manager reaches through in-memory
// transports; each dial is a new session, as a restarted process would be.
type remoteServer struct {
	srv      *sdk.Server
	mu       sync.Mutex
	sessions []*sdk.ServerSession
	dials    int
	hang     bool // the next dials get a peer that never answers
}

func newRemoteServer() *remoteServer {
	s := sdk.NewServer(&sdk.Implementation{Name: "remote"}, nil)
	obj := json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`)
	s.AddTool(&sdk.Tool{Name: "echo", Description: "echoes", InputSchema: obj,
		Annotations: &sdk.ToolAnnotations{IdempotentHint: true, Title: "Echo"}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var a struct{ Message string }
			json.Unmarshal(req.Params.Arguments, &a)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: a.Message}, &sdk.TextContent{Text: "second line"}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "fails", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "disk on fire"}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "weather", Title: "Weather", InputSchema: json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"temp":{"type":"number"}}}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: `{"temp":21.5}`}},
				StructuredContent: map[string]any{"temp": 21.5}}, nil
		})
	closed, notDestructive := false, false
	s.AddTool(&sdk.Tool{Name: "stats", InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &closed, DestructiveHint: &notDestructive}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "3 files"}},
				StructuredContent: map[string]any{"files": 3}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "blocked", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
	return &remoteServer{srv: s}
}

func (r *remoteServer) dial(ctx context.Context) (sdk.Transport, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dials++
	if r.hang {
		a, b := net.Pipe()
		go io.Copy(io.Discard, a) // reads everything, answers nothing
		go func() { <-ctx.Done(); a.Close() }()
		return &sdk.IOTransport{Reader: b, Writer: b}, nil
	}
	t1, t2 := sdk.NewInMemoryTransports()
	ss, err := r.srv.Connect(ctx, t1, nil)
	if err != nil {
		return nil, err
	}
	r.sessions = append(r.sessions, ss)
	return t2, nil
}

// crash ends the server side of the live session, as a dying process would.
func (r *remoteServer) crash() {
	r.mu.Lock()
	ss := r.sessions[len(r.sessions)-1]
	r.mu.Unlock()
	ss.Close()
}

func (r *remoteServer) dialCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dials
}

type changes struct {
	mu   sync.Mutex
	got  []string
	wake chan struct{}
}

func newChanges() *changes { return &changes{wake: make(chan struct{}, 100)} }

func (c *changes) record(server string, tools []ToolSpec) {
	var names []string
	for _, t := range tools {
		names = append(names, t.Descriptor.Name)
	}
	c.mu.Lock()
	c.got = append(c.got, server+":"+strings.Join(names, ","))
	c.mu.Unlock()
	c.wake <- struct{}{}
}

func (c *changes) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

func byName(specs []ToolSpec) map[string]ToolSpec {
	m := map[string]ToolSpec{}
	for _, s := range specs {
		m[s.Descriptor.Name] = s
	}
	return m
}

func TestManagerToolsAndCalls(t *testing.T) {
	rs := newRemoteServer()
	ch := newChanges()
	m, err := NewManager([]ServerConfig{{Name: "files", dial: rs.dial, Deny: []string{"blocked", "stats"},
		Limits: toolbox.Limits{TimeoutMS: 5000}}},
		ManagerOptions{OnToolsChanged: ch.record})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if rs.dialCount() != 0 {
		t.Fatalf("a lazy server was started by NewManager")
	}
	specs, err := m.Tools(context.Background(), "files")
	if err != nil {
		t.Fatal(err)
	}
	tools := byName(specs)
	if len(tools) != 3 || tools["files__echo"].RemoteName != "echo" {
		t.Fatalf("tools: %v", mustJSON(t, specs))
	}
	echo := tools["files__echo"]
	if got := mustJSON(t, echo.Descriptor); got != `{"name":"files__echo","description":"echoes",`+
		`"input_schema":{"properties":{"message":{"type":"string"}},"required":["message"],"type":"object"},`+
		`"returns":"json","capabilities":["exec"],"limits":{"timeout_ms":5000},"llm_visible":true,"idempotent":true}` {
		t.Errorf("echo descriptor: %s", got)
	}
	if echo.Title != "Echo" || !echo.Idempotent || echo.OutputSchema != nil {
		t.Errorf("echo extras: %+v", echo)
	}
	weather := tools["files__weather"]
	if weather.Descriptor.Returns != toolbox.ReturnsJSON || string(weather.OutputSchema) != `{"properties":{"temp":{"type":"number"}},"type":"object"}` {
		t.Errorf("weather: %s", mustJSON(t, weather))
	}
	if info := weather.Info(); info.Title != "Weather" || info.Name != "files__weather" || info.OutputSchema == nil {
		t.Errorf("weather info: %+v", info)
	}

	// Calls through the toolbox, as the engine runs them.
	run := func(spec ToolSpec, args string) (string, *protocol.Error) {
		tool, err := toolbox.NewTool(spec.Descriptor, toolbox.ToolOptions{Run: spec.Run})
		if err != nil {
			t.Fatal(err)
		}
		if perr := tool.Validate([]byte(args)); perr != nil {
			return "", perr
		}
		out, _, perr := tool.Execute(context.Background(), toolbox.Call{Session: "s", Arguments: []byte(args), Tool: tool},
			toolbox.Defaults{TimeoutMS: 5000, MaxOutputBytes: 1 << 20})
		return string(out), perr
	}
	if out, perr := run(echo, `{"message":"hello"}`); perr != nil || out != `"hello\nsecond line"` {
		t.Errorf("echo: %s %v", out, perr)
	}
	if _, perr := run(echo, `{}`); perr == nil || perr.Code != protocol.InvalidArgs {
		t.Errorf("echo without its required argument: %v", perr)
	}
	if out, perr := run(weather, `{}`); perr != nil || out != `{"temp":21.5}` {
		t.Errorf("weather: %s %v", out, perr)
	}
	if _, perr := run(tools["files__fails"], `{}`); perr == nil || perr.Code != protocol.ToolFailed || perr.Message != "disk on fire" {
		t.Errorf("fails: %v", perr)
	}
	if got := ch.list(); len(got) != 1 || got[0] != "files:files__echo,files__fails,files__weather" {
		t.Errorf("OnToolsChanged: %q", got)
	}

	// list_changed: the remote gains a tool, the owner hears of it.
	rs.srv.AddTool(&sdk.Tool{Name: "fresh", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{}, nil
		})
	within(t, ch.wake, "OnToolsChanged after list_changed")
	within(t, ch.wake, "OnToolsChanged after list_changed")
	if got := ch.list(); got[1] != "files:files__echo,files__fails,files__fresh,files__weather" {
		t.Errorf("after list_changed: %q", got)
	}
	if specs, _ := m.Tools(context.Background(), "files"); len(specs) != 4 {
		t.Errorf("Tools after list_changed: %d tools", len(specs))
	}
	if _, err := m.Tools(context.Background(), "nope"); err == nil {
		t.Errorf("an unknown server has tools")
	}
}

func TestManagerCancelledCall(t *testing.T) {
	rs := newRemoteServer()
	m, err := NewManager([]ServerConfig{{Name: "r", dial: rs.dial, Prefix: new(string)}}, ManagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	specs, err := m.Tools(context.Background(), "r")
	if err != nil {
		t.Fatal(err)
	}
	blocked := byName(specs)["blocked"] // the empty prefix
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := blocked.Run(ctx, toolbox.Call{Arguments: []byte(`{}`)})
		done <- err
	}()
	cancel()
	if err := within(t, done, "the cancelled remote call"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
}

func TestManagerRestartsAfterCrash(t *testing.T) {
	rs := newRemoteServer()
	ch := newChanges()
	sink := &logSink{}
	m, err := NewManager([]ServerConfig{{Name: "r", dial: rs.dial}}, ManagerOptions{OnToolsChanged: ch.record, Logger: sink.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	specs, err := m.Tools(context.Background(), "r")
	if err != nil {
		t.Fatal(err)
	}
	echo := byName(specs)["r__echo"]
	rs.crash()
	// A call made now waits for the restart (or fails while the connection
	// is noticed to be gone): it comes back within a few tries.
	waitFor(t, func() bool {
		out, err := echo.Run(context.Background(), toolbox.Call{Arguments: []byte(`{"message":"back"}`)})
		return err == nil && textOf(out) == "back\nsecond line"
	}, "a call after the crash")
	if n := rs.dialCount(); n != 2 {
		t.Errorf("%d dials, want 2", n)
	}
	// The watcher or the call that met the dead connection, whichever came
	// first, logs it.
	if !strings.Contains(sink.text(), `mcp server "r" stopped: `) && !strings.Contains(sink.text(), `mcp server "r" closed the connection during the call`) ||
		!strings.Contains(sink.text(), `; restarting in 250ms`) {
		t.Errorf("the crash is not in the log:\n%s", sink.text())
	}
	// Same tools after the restart: the owner is not told again.
	if got := ch.list(); len(got) != 1 {
		t.Errorf("OnToolsChanged: %q", got)
	}
}

func TestManagerInitializeTimeout(t *testing.T) {
	rs := newRemoteServer()
	rs.hang = true
	m, err := NewManager([]ServerConfig{{Name: "slowpoke", dial: rs.dial, Eager: true, InitTimeout: 200 * time.Millisecond}}, ManagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	err = m.Start(context.Background())
	if err == nil || err.Error() != `mcp server "slowpoke" did not answer initialize within 200ms` {
		t.Fatalf("Start: %v", err)
	}
	// Right after, a use fails at once with the same reason, until the backoff passed.
	_, err = m.Tools(context.Background(), "slowpoke")
	if err == nil || !strings.Contains(err.Error(), "did not answer initialize") || !strings.Contains(err.Error(), "next attempt in") {
		t.Errorf("Tools right after: %v", err)
	}
	if n := rs.dialCount(); n != 1 {
		t.Errorf("%d dials, want 1", n)
	}
	// Once it answers, the next use after the backoff connects.
	rs.mu.Lock()
	rs.hang = false
	rs.mu.Unlock()
	waitFor(t, func() bool {
		_, err := m.Tools(context.Background(), "slowpoke")
		return err == nil
	}, "a connection once the server answers")
}

func TestManagerPanicInOwner(t *testing.T) {
	rs := newRemoteServer()
	sink := &logSink{}
	calls := make(chan struct{}, 10)
	m, err := NewManager([]ServerConfig{{Name: "r", dial: rs.dial}}, ManagerOptions{Logger: sink.logger(),
		OnToolsChanged: func(string, []ToolSpec) { calls <- struct{}{}; panic("owner fell over") }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Tools(context.Background(), "r"); err != nil {
		t.Fatal(err)
	}
	within(t, calls, "the first OnToolsChanged")
	rs.srv.RemoveTools("fails")
	within(t, calls, "OnToolsChanged after the panic")
	if !strings.Contains(sink.text(), "panic in OnToolsChanged: owner fell over") {
		t.Errorf("the panic is not in the log:\n%s", sink.text())
	}
}

func TestManagerConfigErrors(t *testing.T) {
	bad := "bad prefix!"
	for _, c := range []struct {
		cfg  ServerConfig
		want string
	}{
		{ServerConfig{Name: "a b", Command: "x"}, `mcp_servers: invalid name "a b"`},
		{ServerConfig{Name: "a"}, `mcp_servers "a": give command (stdio) or url (Streamable HTTP)`},
		{ServerConfig{Name: "a", Command: "x", URL: "http://h/mcp"}, `mcp_servers "a": give command or url, not both`},
		{ServerConfig{Name: "a", URL: "ftp://h/mcp"}, `mcp_servers "a": url must be an http or https URL, not "ftp://h/mcp"`},
		{ServerConfig{Name: "a", URL: "http://h/mcp", EnvFrom: map[string]string{"A": "B"}}, `mcp_servers "a": env_from is for command servers`},
		{ServerConfig{Name: "a", Command: "x", EnvFrom: map[string]string{"A": "B=C"}}, `mcp_servers "a": env_from: "A" = "B=C" is not a pair`},
		{ServerConfig{Name: "a", Command: "x", Prefix: &bad}, `mcp_servers "a": invalid prefix "bad prefix!"`},
		{ServerConfig{Name: "a", Command: "x", HeadersEnv: map[string]string{"Authorization": "T"}}, `mcp_servers "a": headers_env is for url servers`},
		{ServerConfig{Name: "a", URL: "http://h/mcp", HeadersEnv: map[string]string{"Bad Header": "T"}}, `mcp_servers "a": headers_env: "Bad Header" = "T" is not a header name`},
		{ServerConfig{Name: "a", Command: "x", Limits: toolbox.Limits{TimeoutMS: -1}}, `mcp_servers "a": limits.timeout_ms must be from 0`},
	} {
		_, err := NewManager([]ServerConfig{c.cfg}, ManagerOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %s", c.cfg, err, c.want)
		}
	}
	_, err := NewManager([]ServerConfig{{Name: "a", Command: "x"}, {Name: "a", Command: "y"}}, ManagerOptions{})
	if err == nil || !strings.Contains(err.Error(), `"a" is configured twice`) {
		t.Errorf("twice: %v", err)
	}
}

func TestManagerStdioProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Setenv("CLARA_MCP_TEST_SECRET", "hunter2-very-secret")
	t.Setenv("CLARA_MCP_TEST_OTHER", "not inherited")
	cfg := helperConfig("helper", "tools")
	cfg.EnvFrom["SECRET_CHILD"] = "CLARA_MCP_TEST_SECRET"
	sink := &logSink{}
	m, err := NewManager([]ServerConfig{cfg}, ManagerOptions{Logger: sink.logger()})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			m.Close()
		}
	}()
	specs, err := m.Tools(context.Background(), "helper")
	if err != nil {
		t.Fatal(err)
	}
	tools := byName(specs)
	call := func(name string) string {
		t.Helper()
		out, err := tools[name].Run(context.Background(), toolbox.Call{Arguments: []byte(`{}`)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return textOf(out)
	}
	if tools["helper__pid"].Descriptor.Capabilities[0] != toolbox.CapExec {
		t.Errorf("capabilities: %v", tools["helper__pid"].Descriptor.Capabilities)
	}
	// env_from reaches the child (its value, a secret, is cut out of the
	// result); the rest of the environment does not.
	if got := call("helper__env"); got != "[redacted] 19 false" {
		t.Errorf("env: %q", got)
	}
	// The secret the server wrote to stderr is blotted out of the log,
	// the long line's too, which is cut after it is redacted (issue 25,
	// finding 7: the log kept the key's first 12 characters).
	waitFor(t, func() bool { return strings.Contains(sink.text(), "starting with secret [redacted]") }, "the stderr line in the log")
	waitFor(t, func() bool { return strings.Contains(sink.text(), "xxxx[redacted]") }, "the long stderr line in the log")
	// A server's errors do not bring it back either.
	for _, tool := range []string{"helper__leak_error", "helper__leak_tool_error"} {
		_, err := tools[tool].Run(context.Background(), toolbox.Call{Arguments: []byte(`{}`)})
		if err == nil || !strings.Contains(err.Error(), "[redacted]") || strings.Contains(err.Error(), "hunter") {
			t.Errorf("%s: %v", tool, err)
		}
	}
	if strings.Contains(sink.text(), "hunter") {
		t.Errorf("the secret reached the log:\n%s", sink.text())
	}

	// A crash (SIGKILL) is recovered: a new process answers.
	pid, _ := strconv.Atoi(call("helper__pid"))
	grandchild, _ := strconv.Atoi(call("helper__grandchild"))
	if pid == 0 || !alive(grandchild) {
		t.Fatalf("pid %d, grandchild %d", pid, grandchild)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	var newPid int
	waitFor(t, func() bool {
		out, err := tools["helper__pid"].Run(context.Background(), toolbox.Call{Arguments: []byte(`{}`)})
		if err != nil {
			return false
		}
		newPid, _ = strconv.Atoi(textOf(out))
		return newPid != pid
	}, "a new process after the crash")
	// What the crashed one started went with it.
	waitFor(t, func() bool { return !alive(grandchild) }, "the end of the crashed server's child")

	// Close leaves nothing behind: the server and what it started.
	grandchild, _ = strconv.Atoi(call("helper__grandchild"))
	m.Close()
	closed = true
	// SIGKILL is delivered asynchronously: wait for it, bounded.
	waitFor(t, func() bool { return !alive(newPid) && !alive(grandchild) }, "the end of the server and its child after Close")
}

func TestManagerStdioHangAndBadCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	hang := helperConfig("hang", "hang")
	hang.InitTimeout = 300 * time.Millisecond
	missing := ServerConfig{Name: "missing", Command: "/nonexistent/mcp-server"}
	noEnv := helperConfig("noenv", "tools")
	noEnv.EnvFrom["TOKEN"] = "CLARA_MCP_TEST_UNSET_VARIABLE"
	m, err := NewManager([]ServerConfig{hang, missing, noEnv}, ManagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for name, want := range map[string]string{
		"hang":    `mcp server "hang" did not answer initialize within 300ms`,
		"missing": `mcp server "missing": cannot start "/nonexistent/mcp-server": no such file or directory`,
		"noenv":   `mcp server "noenv": env_from: CLARA_MCP_TEST_UNSET_VARIABLE is not set (it gives TOKEN)`,
	} {
		_, err := m.Tools(context.Background(), name)
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v\nwant %s", name, err, want)
		}
	}
}

// A URL server that wants a bearer token gets it from headers_env, read
// through ManagerOptions.Getenv at each connection; the token reaches
// neither a log nor an error, nor a host a request is redirected to.
func TestManagerHeadersEnv(t *testing.T) {
	const secret = "Bearer s3cret-token"
	srv := sdk.NewServer(&sdk.Implementation{Name: "web"}, nil)
	srv.AddTool(&sdk.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	var elsewhere sync.Map // Authorization headers seen by the other host
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Store(r.Header.Get("Authorization"), true)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer other.Close()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != secret {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, other.URL+"/x", http.StatusFound)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	defer web.Close()

	var env sync.Map
	getenv := func(k string) string {
		v, _ := env.Load(k)
		s, _ := v.(string)
		return s
	}
	var logs logSink
	m, err := NewManager([]ServerConfig{{Name: "web", URL: web.URL + "/mcp",
		HeadersEnv: map[string]string{"Authorization": "WEB_TOKEN"}}},
		ManagerOptions{Getenv: getenv, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = m.Tools(context.Background(), "web")
	if err == nil || err.Error() != `mcp server "web": headers_env: WEB_TOKEN is not set (it gives the Authorization header)` {
		t.Fatalf("without the variable: %v", err)
	}
	env.Store("WEB_TOKEN", secret)
	// The failed attempt's backoff: the next listing connects.
	waitFor(t, func() bool { _, err := m.Tools(context.Background(), "web"); return err == nil }, "a connection with the token")
	specs, _ := m.Tools(context.Background(), "web")
	out, err := specs[0].Run(context.Background(), toolbox.Call{Arguments: []byte(`{"x":1}`)})
	if err != nil || textOf(out) != `{"x":1}` {
		t.Errorf("echo: %s %v", out, err)
	}
	if strings.Contains(logs.text(), "s3cret") {
		t.Errorf("the token reached the log")
	}

	// The headers go to the server's host only.
	r := m.remotes["web"]
	client, err := r.httpClient()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(web.URL + "/redirect")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("redirected request: %s", resp.Status)
	}
	elsewhere.Range(func(k, _ any) bool {
		if k != "" {
			t.Errorf("the other host received Authorization %q", k)
		}
		return true
	})
}

// A server's list is bounded (issue 25, finding 5: 100,000 tools held 370
// MB and filled every catalog): the first MaxTools after allow and deny,
// the listing stopped there; long descriptions cut; big schemas left out.
func TestManagerBoundsWhatAServerLists(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "many"}, &sdk.ServerOptions{PageSize: 10})
	obj := json.RawMessage(`{"type":"object"}`)
	var listed sync.Map // pages the server was asked for
	s.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method == "tools/list" {
				listed.Store(req.GetParams().(*sdk.ListToolsParams).Cursor, true)
			}
			return next(ctx, method, req)
		}
	})
	noop := func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{}, nil
	}
	s.AddTool(&sdk.Tool{Name: "a_long", Description: strings.Repeat("é", 100), Title: strings.Repeat("t", 300), InputSchema: obj}, noop)
	s.AddTool(&sdk.Tool{Name: "a_schema", InputSchema: json.RawMessage(`{"type":"object","description":"` + strings.Repeat("s", 400) + `"}`)}, noop)
	s.AddTool(&sdk.Tool{Name: "a_denied", InputSchema: obj}, noop)
	for i := 0; i < 1000; i++ {
		s.AddTool(&sdk.Tool{Name: fmt.Sprintf("t%04d", i), InputSchema: obj}, noop)
	}
	sink := &logSink{}
	m, err := NewManager([]ServerConfig{{Name: "many", Deny: []string{"a_denied"}, MaxTools: 25, MaxDescriptionBytes: 101, MaxSchemaBytes: 300,
		dial: func(ctx context.Context) (sdk.Transport, error) {
			t1, t2 := sdk.NewInMemoryTransports()
			if _, err := s.Connect(ctx, t1, nil); err != nil {
				return nil, err
			}
			return t2, nil
		}}}, ManagerOptions{Logger: sink.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	specs, err := m.Tools(context.Background(), "many")
	if err != nil {
		t.Fatal(err)
	}
	// 25 kept: a_long, a_schema (then left out for its schema), t0000..t0022.
	tools := byName(specs)
	if len(specs) != 24 || tools["many__t0022"].RemoteName != "t0022" || tools["many__t0023"].RemoteName != "" || tools["many__a_schema"].RemoteName != "" {
		t.Errorf("%d tools: %v", len(specs), mustJSON(t, specs))
	}
	long := tools["many__a_long"]
	if d := long.Descriptor.Description; d != strings.Repeat("é", 50) || len(long.Title) != 101 {
		t.Errorf("the long description (%d bytes, valid %v) and title (%d bytes)", len(d), utf8.ValidString(d), len(long.Title))
	}
	n := 0
	listed.Range(func(any, any) bool { n++; return true })
	if n != 3 {
		t.Errorf("%d pages were fetched, for 25 tools of pages of 10", n)
	}
	for _, want := range []string{
		`mcp server "many" lists more than 25 tools (its max_tools): the first 25 are kept`,
		`mcp server "many": tool "a_long": description of 300 bytes cut to the 101 of max_description_bytes`,
		`mcp server "many": tool "a_schema" left out: its schema is 434 bytes, over the 300 of max_schema_bytes`,
	} {
		if !strings.Contains(sink.text(), want) {
			t.Errorf("the log lacks %q:\n%s", want, sink.text())
		}
	}
}

// A call made while the server waits out its restart backoff says so at
// once when the restart comes after its deadline (issue 25, finding 23: it
// ran into the deadline and read "ran past its deadline").
func TestManagerCallDuringRestartBackoff(t *testing.T) {
	rs := newRemoteServer()
	m, err := NewManager([]ServerConfig{{Name: "r", dial: rs.dial}}, ManagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	specs, err := m.Tools(context.Background(), "r")
	if err != nil {
		t.Fatal(err)
	}
	echo := byName(specs)["r__echo"]
	rs.mu.Lock()
	rs.hang = true // the restarts never come up: the backoff grows
	rs.mu.Unlock()
	rs.crash()
	var last error
	waitFor(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		_, last = echo.Run(ctx, toolbox.Call{Arguments: []byte(`{"message":"x"}`)})
		return last != nil && time.Since(t0) < 50*time.Millisecond && strings.Contains(last.Error(), "after this call's deadline")
	}, "a call refused at once during the backoff")
	var perr *protocol.Error
	if !errors.As(last, &perr) || perr.Code != protocol.ToolFailed ||
		!strings.HasPrefix(perr.Message, `mcp server "r" `) || !strings.Contains(perr.Message, "; it restarts in ") ||
		!strings.HasSuffix(perr.Message, ", after this call's deadline") {
		t.Errorf("%v", last)
	}
}

// textOf is the text of a remote tool's result: a JSON string (a result
// of text only), or the JSON as it is.
func textOf(out []byte) string {
	var s string
	if json.Unmarshal(out, &s) == nil {
		return s
	}
	return string(out)
}

// A result's structuredContent is used whenever the server sends one, with
// an output schema or not, and the tool's own hints are kept where Clara's
// capabilities allow them (issue 30, §4).
func TestManagerStructuredContentAndHints(t *testing.T) {
	rs := newRemoteServer()
	m, err := NewManager([]ServerConfig{{Name: "files", dial: rs.dial, Allow: []string{"stats"}}}, ManagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	specs, err := m.Tools(context.Background(), "files")
	if err != nil || len(specs) != 1 {
		t.Fatalf("tools: %v %v", specs, err)
	}
	out, err := specs[0].Run(context.Background(), toolbox.Call{Arguments: []byte(`{}`)})
	if err != nil || string(out) != `{"files":3}` {
		t.Errorf("stats: %s %v", out, err)
	}
	// Read-only is Clara's to deny (a stdio server's tool is exec here);
	// the closed world and the harmlessness are the server's word.
	h := specs[0].Descriptor.Hints()
	if a := specs[0].Descriptor.Annotations; a == nil || a.OpenWorld == nil || *a.OpenWorld || h.OpenWorld || h.Destructive {
		t.Errorf("hints: %+v (annotations %s)", h, mustJSON(t, specs[0].Descriptor.Annotations))
	}
}
