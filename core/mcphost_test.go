package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/mcp"
	"github.com/clara-lib/clara/core/toolbox"
)

// The engine as an MCP server (mcphost.go), driven by the Go SDK's client
// over an in-memory pipe: what is listed, the pipeline around tools/call,
// Lua progress, cancellation and list_changed. tests/mcp drives the built
// library and bin/clara with the TypeScript SDK.

const mcpTestConfig = `
[policy]
deny = ["kv_delete"]

[[tools]]
name = "lua_steps"
description = "Reports three steps of progress"
lua = 'return function(args) for i = 1, 3 do progress(i, 3, "step " .. i) end return { steps = 3 } end'

[[tools]]
name = "lua_slow"
description = "Reports that it started, then runs until cancelled"
limits = { timeout_ms = 600000 }
lua = 'return function(args) progress(1, 0, "started") while true do end end'

[[tools]]
name = "lua_hidden"
llm_visible = false
lua = 'return function(args) return {} end'
`

// mcpClient is an SDK client session on the engine's stdio server, with
// what the server sent it besides answers.
type mcpClient struct {
	cs      *sdk.ClientSession
	mu      sync.Mutex
	reports []string // progress notifications: "done/total message"
	changed chan struct{}
}

func serveEngine(t *testing.T, e *core.Engine) *mcpClient {
	t.Helper()
	a, b := net.Pipe()
	served := make(chan error, 1)
	go func() { served <- e.MCPServeStdio(a, a) }()
	c := &mcpClient{changed: make(chan struct{}, 16)}
	client := sdk.NewClient(&sdk.Implementation{Name: "core-test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.reports = append(c.reports, strings.TrimSpace(jsonNum(req.Params.Progress)+"/"+jsonNum(req.Params.Total)+" "+req.Params.Message))
			c.mu.Unlock()
		},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { c.changed <- struct{}{} },
	})
	cs, err := client.Connect(context.Background(), &sdk.IOTransport{Reader: b, Writer: b}, legacyMCPSession)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	c.cs = cs
	t.Cleanup(func() {
		cs.Close()
		e.MCPStop()
		if err := waitChan(t, served, "the end of MCPServeStdio"); err != nil {
			t.Errorf("MCPServeStdio: %v", err)
		}
		a.Close()
		b.Close()
	})
	return c
}

func jsonNum(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}

// waitChan is a hang guard, not a timing assertion.
func waitChan[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(60 * time.Second):
		t.Fatalf("no %s within 60 s", what)
		var zero T
		return zero
	}
}

func (c *mcpClient) call(t *testing.T, name string, args any, progress bool) *sdk.CallToolResult {
	t.Helper()
	p := &sdk.CallToolParams{Name: name, Arguments: args}
	if progress {
		p.SetProgressToken("tok-" + name)
	}
	res, err := c.cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func resultText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "|")
}

func (c *mcpClient) toolNames(t *testing.T) map[string]*sdk.Tool {
	t.Helper()
	res, err := c.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*sdk.Tool{}
	for _, tool := range res.Tools {
		out[tool.Name] = tool
	}
	return out
}

func TestMCP_lists_what_the_policy_allows(t *testing.T) {
	e := rulesEngine(t, mcpTestConfig)
	c := serveEngine(t, e)
	tools := c.toolNames(t)
	for _, name := range []string{"echo", "math_eval", "kv_get", "lua_steps", "lua_slow"} {
		if tools[name] == nil {
			t.Errorf("%s is not listed", name)
		}
	}
	// Denied by policy, not llm_visible, administrative: not listed.
	for _, name := range []string{"kv_delete", "lua_hidden", "audit_tail", "rules_load", "session_policy", "state_set"} {
		if tools[name] != nil {
			t.Errorf("%s is listed", name)
		}
	}
	if a := tools["echo"].Annotations; a == nil || !a.ReadOnlyHint {
		t.Errorf("echo's annotations: %+v", a)
	}
}

func TestMCP_calls_go_through_the_pipeline(t *testing.T) {
	e := rulesEngine(t, mcpTestConfig)
	c := serveEngine(t, e)
	res := c.call(t, "math_eval", map[string]any{"expression": "6*7"}, false)
	if res.IsError || mustJSONText(t, res.StructuredContent) != `{"expression":"6*7","value":42}` {
		t.Errorf("math_eval: %+v", res)
	}
	res = c.call(t, "math_eval", map[string]any{"expression": 7}, false)
	if !res.IsError || res.Meta["clara/error"] != "invalid_args" {
		t.Errorf("bad arguments: %+v", res)
	}
	// A tool the policy denies is not served at all.
	if _, err := c.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "kv_delete", Arguments: map[string]any{"key": "k"}}); err == nil {
		t.Errorf("kv_delete was called")
	}
	// Denied by the session's own policy: the pipeline's answer, as isError.
	c.call(t, "kv_set", map[string]any{"key": "k", "value": 1}, false)
	session := lastAuditSession(t, e, "kv_set")
	if !strings.HasPrefix(session, "mcp-") {
		t.Fatalf("the MCP session's Clara session is %q", session)
	}
	out := evalString(t, e, `{"tool":"session_policy","session":`+jsonText(session)+`,"arguments":{"deny":["kv_get"]}}`)
	if !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatal(out)
	}
	res = c.call(t, "kv_get", map[string]any{"key": "k"}, false)
	if !res.IsError || res.Meta["clara/error"] != "denied" {
		t.Errorf("a call the session's policy denies: %+v", res)
	}
}

// lastAuditSession is the session of the latest audit record of tool.
func lastAuditSession(t *testing.T, e *core.Engine, tool string) string {
	t.Helper()
	var tail struct {
		Result struct {
			Records []struct{ Session, Tool, Status string } `json:"records"`
		} `json:"result"`
	}
	out := evalString(t, e, `{"tool":"audit_tail","arguments":{"n":50}}`)
	if err := json.Unmarshal([]byte(out), &tail); err != nil {
		t.Fatal(err)
	}
	for i := len(tail.Result.Records) - 1; i >= 0; i-- {
		if r := tail.Result.Records[i]; r.Tool == tool {
			return r.Session
		}
	}
	t.Fatalf("no audit record of %s in %s", tool, out)
	return ""
}

func mustJSONText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMCP_lua_progress_reaches_the_client(t *testing.T) {
	e := rulesEngine(t, mcpTestConfig)
	c := serveEngine(t, e)
	res := c.call(t, "lua_steps", map[string]any{}, true)
	if res.IsError || mustJSONText(t, res.StructuredContent) != `{"steps":3}` {
		t.Fatalf("lua_steps: %+v", res)
	}
	want := []string{"1/3 step 1", "2/3 step 2", "3/3 step 3"}
	deadline := time.Now().Add(60 * time.Second)
	for {
		c.mu.Lock()
		got := append([]string(nil), c.reports...)
		c.mu.Unlock()
		if strings.Join(got, ",") == strings.Join(want, ",") {
			break
		}
		if len(got) > len(want) || time.Now().After(deadline) {
			t.Fatalf("progress: %q, want %q", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Without a progress token nothing is sent.
	c.mu.Lock()
	c.reports = nil
	c.mu.Unlock()
	c.call(t, "lua_steps", map[string]any{}, false)
	c.call(t, "echo", map[string]any{}, false) // answered after any stray notification
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.reports) != 0 {
		t.Errorf("progress without a token: %q", c.reports)
	}
}

func TestMCP_cancel_reaches_a_lua_tool(t *testing.T) {
	e := rulesEngine(t, mcpTestConfig)
	c := serveEngine(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &sdk.CallToolParams{Name: "lua_slow", Arguments: map[string]any{}}
	p.SetProgressToken("slow")
	returned := make(chan error, 1)
	go func() {
		_, err := c.cs.CallTool(ctx, p)
		returned <- err
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c.mu.Lock()
		started := len(c.reports) > 0
		c.mu.Unlock()
		if started {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lua_slow did not report that it started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel() // the SDK client sends notifications/cancelled
	if err := waitChan(t, returned, "the cancelled call's return"); err == nil {
		t.Fatal("the cancelled call returned no error")
	}
	// The script stops (its timeout is ten minutes): its audit record shows
	// the cancelled call.
	for deadline := time.Now().Add(60 * time.Second); ; {
		out := evalString(t, e, `{"tool":"audit_tail","arguments":{"n":5}}`)
		if strings.Contains(out, `"tool":"lua_slow"`) {
			if !strings.Contains(out, `"status":"error","error":"tool_failed"`) {
				t.Errorf("the cancelled call's record: %s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lua_slow is still running after its cancellation: %s", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMCP_list_changed_after_registration_and_policy(t *testing.T) {
	e := rulesEngine(t, mcpTestConfig)
	c := serveEngine(t, e)
	c.toolNames(t) // the client has listed once
	if out := evalString(t, e, `{"tool":"echo","arguments":{}}`); !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatal(out)
	}
	drain(c.changed)
	if err := e.RegisterTool([]byte(`{"name":"host_tool","description":"registered while serving"}`),
		toolRun(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	waitChan(t, c.changed, "list_changed after a registration")
	if c.toolNames(t)["host_tool"] == nil {
		t.Error("host_tool is not listed after its registration")
	}
	drain(c.changed)
	if err := e.UnregisterTool("host_tool"); err != nil {
		t.Fatal(err)
	}
	waitChan(t, c.changed, "list_changed after a removal")
	drain(c.changed)
	mustConfigure(t, e, `policy = { deny = ["kv_delete", "kv_list"] }`)
	waitChan(t, c.changed, "list_changed after a policy change")
	if c.toolNames(t)["kv_list"] != nil {
		t.Error("kv_list is listed after the policy denied it")
	}
}

// toolRun is a host tool's options: it answers result.
func toolRun(result string) toolbox.ToolOptions {
	return toolbox.ToolOptions{Run: func(context.Context, toolbox.Call) ([]byte, error) { return []byte(result), nil }}
}

func drain(ch chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// A client's arguments go through the request scanner and its limits,
// and must be an object (issue 25, findings 18 and 19): echo would hand
// anything back.
func TestMCP_arguments_are_an_object_within_the_limits(t *testing.T) {
	e := rulesEngine(t, mcpTestConfig)
	c := serveEngine(t, e)
	for _, args := range []any{[]any{1, 2}, "text", 5, true} {
		res := c.call(t, "echo", args, false)
		if !res.IsError || res.Meta["clara/error"] != "invalid_args" || !strings.Contains(resultText(res), "must be a JSON object") {
			t.Errorf("arguments %v: %+v %s", args, res.Meta, resultText(res))
		}
	}
	deep := json.RawMessage(`{"a":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`)
	res := c.call(t, "echo", deep, false)
	if !res.IsError || res.Meta["clara/error"] != "invalid_request" || !strings.Contains(resultText(res), "limits.max_depth (512)") {
		t.Errorf("600 deep: %+v %.200s", res.Meta, resultText(res))
	}
	res = c.call(t, "echo", json.RawMessage(`{"a":1,"a":2}`), false)
	if !res.IsError || res.Meta["clara/error"] != "invalid_args" || !strings.Contains(resultText(res), "duplicate") {
		t.Errorf("a key twice: %+v %s", res.Meta, resultText(res))
	}
	// What does pass reaches the tool compact; no arguments are {}.
	res = c.call(t, "echo", json.RawMessage(`{ "a" : [ 1 , 2 ] }`), false)
	if res.IsError || mustJSONText(t, res.StructuredContent) != `{"a":[1,2]}` {
		t.Errorf("spaced: %+v %s", res, resultText(res))
	}
	res = c.call(t, "echo", nil, false)
	if res.IsError || mustJSONText(t, res.StructuredContent) != `{}` {
		t.Errorf("none: %+v %s", res, resultText(res))
	}
}

// legacyMCPSession makes the SDK's client speak 2025-11-25's handshake and
// sessions, what these tests check.
var legacyMCPSession = &sdk.ClientSessionOptions{ProtocolVersion: mcp.LegacyProtocolVersion}

// The configuration's resources and prompts are served under the policy
// that governs tools, by name: a deny hides one from the lists, and
// reading it answers "not found" (issue 30).
func TestMCPResourcesUnderPolicy(t *testing.T) {
	e := newEngine(t)
	defer e.Close()
	mustConfigure(t, e, `
state_dir = ""
[policy]
deny = ["secret-note", "hidden_prompt"]

[[resources]]
name = "note"
uri = "notes://note"
text = "open"

[[resources]]
name = "secret-note"
uri = "notes://secret"
text = "closed"

[[prompts]]
name = "hidden_prompt"
description = "denied"
messages = [{ role = "user", text = "no" }]

[[prompts]]
name = "shown_prompt"
description = "allowed"
arguments = [{ name = "who", required = true }]
messages = [{ role = "user", text = "Hello {who}" }]
`)
	c := serveEngine(t, e)
	ctx := context.Background()
	res, err := c.cs.ListResources(ctx, nil)
	if err != nil || len(res.Resources) != 1 || res.Resources[0].URI != "notes://note" {
		t.Fatalf("resources/list: %v %+v", err, res)
	}
	if read, err := c.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "notes://note"}); err != nil || read.Contents[0].Text != "open" {
		t.Errorf("resources/read: %v %+v", err, read)
	}
	if _, err := c.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "notes://secret"}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("a denied resource was read: %v", err)
	}
	prompts, err := c.cs.ListPrompts(ctx, nil)
	if err != nil || len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "shown_prompt" {
		t.Fatalf("prompts/list: %v %+v", err, prompts)
	}
	got, err := c.cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "shown_prompt", Arguments: map[string]string{"who": "Ada"}})
	if err != nil || got.Messages[0].Content.(*sdk.TextContent).Text != "Hello Ada" {
		t.Errorf("prompts/get: %v %+v", err, got)
	}
	if _, err := c.cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "shown_prompt"}); err == nil {
		t.Errorf("a prompt without its required argument rendered")
	}
	if _, err := c.cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "hidden_prompt"}); err == nil {
		t.Errorf("a denied prompt rendered")
	}
}

// A remote server's resources and prompts are listed through Clara, under
// their prefixed names and the policy, and read and rendered by the
// server (issue 30, §4).
func TestMCPRemoteResourcesAndPrompts(t *testing.T) {
	remote := sdk.NewServer(&sdk.Implementation{Name: "remote", Version: "1"}, nil)
	remote.AddResource(&sdk.Resource{URI: "notes://today", Name: "today", MIMEType: "text/plain"},
		func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "rain"}}}, nil
		})
	remote.AddPrompt(&sdk.Prompt{Name: "greet", Description: "greets", Arguments: []*sdk.PromptArgument{{Name: "who", Required: true}}},
		func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: "Hello " + req.Params.Arguments["who"]}}}}, nil
		})
	remote.AddPrompt(&sdk.Prompt{Name: "hidden", Description: "denied"},
		func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: "no"}}}}, nil
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return remote }, nil))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() }) // after the engine's session ends

	e := newEngine(t)
	defer e.Close()
	mustConfigure(t, e, fmt.Sprintf("state_dir = \"\"\n[policy]\ndeny = [\"r__hidden\"]\n[[mcp_servers]]\nname = \"r\"\nurl = %q\neager = true\n", srv.URL))
	c := serveEngine(t, e)
	ctx := context.Background()
	var res *sdk.ListResourcesResult
	waitForCond(t, func() bool {
		var err error
		res, err = c.cs.ListResources(ctx, nil)
		return err == nil && len(res.Resources) == 1
	}, "the remote resource in resources/list")
	if r := res.Resources[0]; r.URI != "notes://today" || r.Name != "r__today" {
		t.Errorf("resource: %+v", r)
	}
	if read, err := c.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "notes://today"}); err != nil || read.Contents[0].Text != "rain" {
		t.Errorf("read: %v %+v", err, read)
	}
	prompts, err := c.cs.ListPrompts(ctx, nil)
	if err != nil || len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "r__greet" {
		t.Fatalf("prompts/list: %v %+v", err, prompts)
	}
	got, err := c.cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "r__greet", Arguments: map[string]string{"who": "Ada"}})
	if err != nil || got.Messages[0].Content.(*sdk.TextContent).Text != "Hello Ada" {
		t.Errorf("prompts/get: %v %+v", err, got)
	}
	if _, err := c.cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "r__hidden"}); err == nil {
		t.Errorf("a denied remote prompt rendered")
	}
}

func waitForCond(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
