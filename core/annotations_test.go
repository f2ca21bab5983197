package core_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/mcp"
)

// Issue 26 §3: what MCP clients are told of each tool.

// TestBuiltins_declare_their_hints: kv_set, kv_delete and
// notifications_drain declare no capability and were served to MCP clients
// as read-only, and so was every Lua tool that declares none; a client
// that auto-approves read-only tools approved them. Every built-in now
// declares its hints; a tool that declares none gets MCP's defaults.
func TestBuiltins_declare_their_hints(t *testing.T) {
	e := core.New(core.Options{})
	t.Cleanup(e.Close)
	mustConfigure(t, e, "[[tools]]\nname = \"lua_writer\"\nlua = 'return function(a) return a end'\n")
	var clara struct {
		Result struct {
			Tools []struct {
				Name        string
				Builtin     bool
				Annotations map[string]any
			}
		}
	}
	if err := json.Unmarshal([]byte(evalString(t, e, `{"tool":"tools_list","arguments":{"llm_visible_only":false}}`)), &clara); err != nil {
		t.Fatal(err)
	}
	for _, tl := range clara.Result.Tools {
		if tl.Builtin && (tl.Annotations["readOnlyHint"] == nil || tl.Annotations["openWorldHint"] == nil) {
			t.Errorf("%s declares no hints: %v", tl.Name, tl.Annotations)
		}
	}
	var mcp struct {
		Result struct {
			Tools []struct {
				Name        string
				Annotations struct {
					ReadOnly    bool  `json:"readOnlyHint"`
					Destructive *bool `json:"destructiveHint"`
					OpenWorld   bool  `json:"openWorldHint"`
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(evalString(t, e, `{"tool":"tools_list","arguments":{"format":"mcp","llm_visible_only":false}}`)), &mcp); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tl := range mcp.Result.Tools {
		a := tl.Annotations
		switch {
		case a.ReadOnly:
			got[tl.Name] = "read-only"
		case a.Destructive != nil && *a.Destructive:
			got[tl.Name] = "destructive"
		default:
			got[tl.Name] = "writes"
		}
	}
	for name, want := range map[string]string{"kv_set": "destructive", "kv_delete": "destructive", "notifications_drain": "destructive",
		"lua_writer": "destructive", "rules_load": "writes", "echo": "read-only", "kv_get": "read-only", "get_time": "read-only"} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
}

// TestAskUser_is_offered_only_when_someone_can_answer: tools_list and
// clara mcp listed ask_user while it could never succeed (no input
// handler).
func TestAskUser_is_offered_only_when_someone_can_answer(t *testing.T) {
	e := core.New(core.Options{})
	t.Cleanup(e.Close)
	listed := func() bool {
		out := evalString(t, e, `{"tool":"tools_list","arguments":{"format":"mcp"}}`)
		return strings.Contains(out, `"name":"ask_user"`)
	}
	if listed() {
		t.Fatal("ask_user listed without an input handler")
	}
	e.SetInputHandler(func([]byte) (string, bool) { return "yes", true })
	if !listed() {
		t.Fatal("ask_user not listed with an input handler")
	}
	e.SetInputHandler(nil)
	if listed() {
		t.Fatal("ask_user still listed once the handler is gone")
	}
}

// TestChat_offers_ask_user_when_its_MCP_client_can_ask: a chat run in the
// call of an MCP client that can ask its user (elicitation) offers the
// model ask_user even without an input handler: that user answers it. It
// was left out, as if nobody could answer (issue 26 §3).
func TestChat_offers_ask_user_when_its_MCP_client_can_ask(t *testing.T) {
	srv := scriptServer(t, loadScript(t, "ask_user_answer"))
	e := rulesEngine(t, `{"llm":{"base_url":`+jsonText(srv.BaseURL("ask_user_answer"))+`,"model":"test-model"}}`)
	mustConfigure(t, e, `
[[tools]]
name = "which_city"
description = "Finds out which city the user means."
limits = { timeout_ms = 20000 }
lua = '''
return function()
  local r = call_tool("chat", {prompt = "Find out which city the user means.", allow_tools = true, tools = {"ask_user"},
    result_schema = {type = "object", properties = {city = {type = "string"}}, required = {"city"}}})
  return r.result
end
'''
`)
	addr, err := e.MCPListen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.MCPStop)
	var mu sync.Mutex
	var asked []string
	client := sdk.NewClient(&sdk.Implementation{Name: "asking", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Params.Message)
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"answer": "Boston"}}, nil
		},
	})
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, legacyMCPSession)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "which_city", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("%v %s (%v)", err, resultText(res), srv.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	if got := resultText(res); !strings.Contains(got, `"city":"Boston"`) || len(asked) != 1 || asked[0] != "Which city?" {
		t.Fatalf("%s, asked %v", got, asked)
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestApproval_asked_of_the_MCP_clients_user: a call an MCP client made
// that a rule holds for approval went to the host's approval handler, or
// was rejected at once without one, although the client could ask its
// user, the person behind the call (docs/mcp.md said it would). The user
// approves it, or rejects it with a reason, in the client's form;
// declining the form rejects it.
func TestApproval_asked_of_the_MCP_clients_user(t *testing.T) {
	e := rulesEngine(t, "")
	loadRules(t, e, "ask.toml", `
[rule]
id = "big"
trigger = "on_tool_call"
[condition]
expression = "context.tool.name == 'echo' and context.tool.arguments.amount > 100"
[action]
type = "ask"
reason = "{{ context.tool.arguments.amount }} is a lot"
`)
	// The host's handler approves everything: it decides the host's own
	// calls, not those of a client whose user can be asked.
	e.SetApprover(core.ApproverFunc(func(context.Context, *core.ApprovalRequest) (core.ApprovalDecision, bool) {
		return core.ApprovalDecision{Approve: true}, true
	}))
	if out := evalString(t, e, `{"tool":"echo","arguments":{"amount":5000}}`); out != `{"status":"success","tool":"echo","result":{"amount":5000}}` {
		t.Fatalf("the host's call: %s", out)
	}
	addr, err := e.MCPListen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.MCPStop)
	for _, version := range []string{mcp.ProtocolVersion, mcp.LegacyProtocolVersion} {
		t.Run(version, func(t *testing.T) { approvalAtTheClient(t, addr, version) })
	}
}

func approvalAtTheClient(t *testing.T, addr, version string) {
	var mu sync.Mutex
	var asked []string
	answers := []*sdk.ElicitResult{
		{Action: "accept", Content: map[string]any{"decision": "approve"}},
		{Action: "accept", Content: map[string]any{"decision": "reject", "reason": "not today"}},
		{Action: "decline"},
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "approving", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Params.Message)
			return answers[len(asked)-1], nil
		},
	})
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"},
		&sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, want := range []string{
		`{"amount":5000}`,
		`tool "echo" was not run: the approval was rejected: not today`,
		`tool "echo" was not run: the approval was rejected: the person at the MCP client declined to decide`,
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"amount": 5000}})
		cancel()
		if err != nil || resultText(res) != want {
			t.Errorf("%v %q, want %q", err, resultText(res), want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 3 || asked[0] != `Approve echo({"amount":5000})? rule big: 5000 is a lot` {
		t.Errorf("asked %q", asked)
	}
}
