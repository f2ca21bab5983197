package core_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/toolbox"
)

// Nested agent loops and tool scoping (issue 14, seed 003): a tool runs a
// nested chat or request inside its own call's scope (policy, session,
// depth), and nothing nested ever reaches a tool on the call stack.

const explainWeatherTool = `
[[tools]]
name = "explain_weather"
description = "Explains a city's weather to a child"
input_schema = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
limits = { timeout_ms = 60000 }
lua = """
return function(args)
  local r = call_tool("chat", {
    prompt = "Explain the weather in " .. args.city .. " to a child.",
    allow_tools = true, tools = {"get_current_weather", "explain_weather"}, max_tool_calls = 2 })
  return { explanation = r.content }
end
"""
`

func TestNested_a_lua_tool_runs_a_chat_that_never_offers_it(t *testing.T) {
	srv := scriptServer(t, loadScript(t, "nested_chat"))
	e := rulesEngine(t, explainWeatherTool+"\n[llm]\nbase_url = "+jsonText(srv.BaseURL("nested_chat"))+"\nmodel = \"gpt-4o-mini\"\n")
	registerWeather(t, e)
	expectEq(t, "nested chat", evalString(t, e, `{"tool":"explain_weather","arguments":{"city":"Boston"}}`),
		`{"status":"success","tool":"explain_weather","result":{"explanation":"It is warm and sunny in Boston."}}`)
	// The request's policy reaches the nested chat: its catalog is empty.
	expectEq(t, "nested chat under a policy", evalString(t, e, `{"tool":"explain_weather","arguments":{"city":"Boston"},"policy":{"deny":["get_current_weather"]}}`),
		`{"status":"success","tool":"explain_weather","result":{"explanation":"I cannot look the weather up."}}`)
}

func TestNested_a_self_recursive_tool_is_denied_at_once(t *testing.T) {
	e := rulesEngine(t, `
[[tools]]
name = "relay"
lua = "return function(args) return call_tool(args.tool, {tool = args.next or 'echo'}) end"

[[tools]]
name = "ping"
lua = "return function(args) return call_tool('pong', {}) end"

[[tools]]
name = "pong"
lua = "return function(args) return call_tool('ping', {}) end"
`)
	out := evalString(t, e, `{"tool":"relay","arguments":{"tool":"relay"},"trace":true}`)
	for _, want := range []string{`"error":"tool_failed"`, `denied: tool \"relay\" denied: it is already running on this call stack (relay → relay)`} {
		if !strings.Contains(out, want) {
			t.Errorf("relay calling itself: no %s in\n%s", want, out)
		}
	}
	// Through another tool: the second call of ping is refused, one level
	// down, not at the depth limit.
	out = evalString(t, e, `{"tool":"ping","arguments":{}}`)
	if !strings.Contains(out, `(ping → pong → ping)`) || strings.Contains(out, "nested deeper") {
		t.Errorf("ping → pong → ping: %s", out)
	}
	// The refusal is audited as denied, in the nested call.
	tail := evalString(t, e, `{"tool":"audit_tail","arguments":{"n":100}}`)
	if !strings.Contains(tail, `"tool":"ping",`) || !strings.Contains(tail, `"status":"error","error":"denied","reason":"tool \"ping\" denied: it is already running`) {
		t.Errorf("audit: %s", tail)
	}
	// A tool may still call another tool of the same kind.
	expectEq(t, "relay of echo", evalString(t, e, `{"tool":"relay","arguments":{"tool":"echo"}}`),
		`{"status":"success","tool":"relay","result":{"tool":"echo"}}`)
}

// nester is a host tool (a Go Func, as capi builds around a C tool) that
// runs the request given in its arguments inside its own call.
func registerNester(t *testing.T, e *core.Engine) {
	t.Helper()
	run := func(ctx context.Context, call toolbox.Call) ([]byte, error) {
		req := []byte(gjson.GetBytes(call.Arguments, "request").Str)
		return e.AppendEvaluateWithin(core.CallerOf(ctx, call), nil, req), nil
	}
	d := `{"name":"nester","input_schema":{"type":"object","properties":{"request":{"type":"string"}},"required":["request"]}}`
	if err := e.RegisterTool([]byte(d), toolbox.ToolOptions{Run: run}); err != nil {
		t.Fatal(err)
	}
}

func TestNested_a_host_tools_request_inherits_its_scope(t *testing.T) {
	e := rulesEngine(t, "")
	registerNester(t, e)
	nest := func(outer, inner string) string {
		return evalString(t, e, `{"tool":"nester","session":"s1","arguments":{"request":`+jsonText(inner)+`}`+outer+`}`)
	}
	cases := []struct{ what, outer, inner, want string }{
		{"inside no policy", ``, `{"tool":"echo","arguments":{"a":1}}`,
			`{"status":"success","tool":"nester","result":{"status":"success","tool":"echo","result":{"a":1}}}`},
		{"the request's deny reaches the nested request", `,"policy":{"deny":["echo"]}`, `{"tool":"echo","arguments":{"a":1}}`,
			`"error":"denied","message":"tool \"echo\" denied by the policy of the request: its deny list names it"`},
		{"the nested request may narrow", ``, `{"tool":"echo","arguments":{},"policy":{"deny":["echo"]}}`,
			`"error":"denied"`},
		{"but never widen", `,"policy":{"allow":["nester"]}`, `{"tool":"echo","arguments":{},"policy":{"allow":["echo"]}}`,
			`"error":"denied"`},
		{"the calling tool is on the stack", ``, `{"tool":"nester","arguments":{"request":"{}"}}`,
			`it is already running on this call stack (nester → nester)`},
		{"its session", ``, `{"tool":"echo","session":"other","arguments":{}}`,
			`"error":"invalid_request","message":"a request made inside a tool runs in the tool's session \"s1\"; it may not name another (\"other\")"`},
		{"not async", ``, `{"tool":"echo","async":true,"arguments":{}}`,
			`"error":"invalid_request","message":"a request made inside a tool cannot be asynchronous`},
		{"administrative tools out of reach", ``, `{"tool":"state_get","arguments":{"key":"k"}}`,
			`administrative tool`},
		{"bad JSON", ``, `{"tool":`, `"error":"invalid_json"`},
	}
	for _, c := range cases {
		if out := nest(c.outer, c.inner); !strings.Contains(out, c.want) {
			t.Errorf("%s: no %s in\n%s", c.what, c.want, out)
		}
	}
	// The nested call runs in the caller's session: the audit says so.
	nest(``, `{"tool":"echo","arguments":{"b":2}}`)
	if tail := evalString(t, e, `{"tool":"audit_tail","arguments":{"n":100}}`); !strings.Contains(tail, `"session":"s1","tool":"echo"`) {
		t.Errorf("audit: %s", tail)
	}
	// Without a running call there is nothing to inherit.
	if out := string(e.AppendEvaluateWithin(nil, nil, []byte(`{"tool":"echo"}`))); !strings.Contains(out, `"error":"invalid_request"`) {
		t.Errorf("no caller: %s", out)
	}
}

// Embeddings speak OpenAI's format at llm.base_url: with llm.provider left
// empty they are refused only when llm.model names a Claude model.
func TestEmbeddings_with_the_provider_read_from_the_model(t *testing.T) {
	e := rulesEngine(t, "")
	out := string(e.Configure([]byte(`{"llm":{"base_url":"http://127.0.0.1:9/v1","model":"claude-3-5-haiku-latest","embedding_model":"emb"}}`)))
	if !strings.Contains(out, `embeddings are requested in OpenAI's format; llm.provider is \"anthropic\"`) {
		t.Errorf("claude model: %s", out)
	}
	mustConfigure(t, e, `{"llm":{"base_url":"http://127.0.0.1:9/v1","model":"llama3.1","embedding_model":"emb"}}`)
}
