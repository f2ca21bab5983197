package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/toolbox"
)

// Governance fails closed (issue 25, findings 9 and 16): a rule on
// on_tool_call that cannot be evaluated denies the call with its reason,
// and a call cancelled before its tool runs does not run.

// slowGuard is a deny rule on kv_set whose Lua condition runs until its
// deadline or the call's cancellation, whichever comes first.
const slowGuard = `
[rule]
id = "slow-guard"
trigger = "on_tool_call"
timeout_ms = 5000
[condition]
lua = """
if ctx.tool.name ~= "kv_set" then return false end
while true do end
"""
[action]
type = "deny"
reason = "kv_set is not for this session"
`

// auditedCall waits until the audit holds a record with the text what
// (the background call ended) and returns the audit's text.
func auditedCall(t *testing.T, e *core.Engine, what string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tail := evalString(t, e, `{"tool":"audit_tail","arguments":{"n":50}}`)
		if strings.Contains(tail, what) {
			return tail
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit record with %s within 30 s: %s", what, tail)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mustLoad loads rules with rules_load.
func mustLoad(t *testing.T, e *core.Engine, name, toml string) {
	t.Helper()
	if out := evalString(t, e, rulesLoad(name, toml)); !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatalf("rules_load %s: %s", name, out)
	}
}

func TestFailClosed_an_async_call_cancelled_while_its_deny_rule_evaluates_does_not_run(t *testing.T) {
	e := rulesEngine(t, "")
	mustLoad(t, e, "guard.toml", slowGuard)
	for _, session := range []string{"s1", "s2", "s3"} {
		h := handleOf(t, evalString(t, e, `{"tool":"kv_set","session":"`+session+`","async":true,"arguments":{"key":"k","value":1}}`))
		time.Sleep(30 * time.Millisecond) // the condition is running
		if perr := e.Cancel(h); perr != nil {
			t.Fatal(perr)
		}
		expectEq(t, "cancelled", string(e.Wait(context.Background(), h, -1)),
			`{"status":"error","error":"tool_failed","message":"the call of \"kv_set\" was cancelled"}`)
		tail := auditedCall(t, e, `"session":"`+session+`","tool":"kv_set"`)
		if !strings.Contains(tail, `"error":"denied","reason":"tool \"kv_set\" denied by rule \"slow-guard\": its condition could not be evaluated`) {
			t.Fatalf("the audit does not show the denial: %s", tail)
		}
		expectEq(t, "the key", evalString(t, e, `{"tool":"kv_get","session":"`+session+`","arguments":{"key":"k"}}`),
			`{"status":"success","tool":"kv_get","result":{"key":"k","found":false}}`)
	}
}

func TestFailClosed_a_condition_that_fails_on_on_tool_call_denies_with_its_reason(t *testing.T) {
	e := rulesEngine(t, "")
	rule := func(id, condition string) string {
		return "\n[rule]\nid = \"" + id + "\"\ntrigger = \"on_tool_call\"\n[condition]\n" + condition +
			"\n[action]\ntype = \"notify_self\"\nmessage = \"" + id + " matched\"\n"
	}
	for id, condition := range map[string]string{
		"expr-broken": `expression = 'context.tool.name == "kv_set" and context.tool.arguments.value > 3'`,
		"py-broken":   `expression = 'context.tool.name == "kv_get" and context.tool.arguments.key // 2 == 1'`,
		"lua-broken":  `lua = 'if ctx.tool.name == "kv_delete" then error("no such field") end return false'`,
	} {
		mustLoad(t, e, id+".toml", rule(id, condition))
	}
	for _, c := range []struct{ req, rule, err string }{
		{`{"tool":"kv_set","arguments":{"key":"k","value":"text"}}`, "expr-broken", "invalid operation"},
		{`{"tool":"kv_get","arguments":{"key":"k"}}`, "py-broken", "unsupported operand types for //"},
		{`{"tool":"kv_delete","arguments":{"key":"k"}}`, "lua-broken", "no such field"},
	} {
		out := evalString(t, e, c.req)
		want := `{"status":"error","error":"denied","message":"tool \"` + strings.SplitN(c.req[9:], `"`, 2)[0] + `\" denied by rule \"` + c.rule +
			`\": its condition could not be evaluated, and a rule on on_tool_call that cannot tell refuses the call: `
		if !strings.HasPrefix(out, want) || !strings.Contains(out, c.err) {
			t.Errorf("%s: %s", c.req, out)
		}
	}
	// Calls the conditions decide run as ever.
	expectEq(t, "decided", evalString(t, e, `{"tool":"kv_set","arguments":{"key":"k","value":1}}`),
		`{"status":"success","tool":"kv_set","result":{"key":"k","created":true}}`)
	// On another trigger a failing condition does not match, as before.
	e2 := rulesEngine(t, "")
	mustLoad(t, e2, "after.toml", strings.ReplaceAll(rule("expr-broken", `expression = 'context.tool.arguments.value > 3'`), "on_tool_call", "on_tool_complete"))
	expectEq(t, "after the call", evalString(t, e2, `{"tool":"kv_set","arguments":{"key":"k","value":"text"}}`),
		`{"status":"success","tool":"kv_set","result":{"key":"k","created":true}}`)
}

func TestFailClosed_a_deny_rule_whose_reason_cannot_be_written_still_denies(t *testing.T) {
	e := rulesEngine(t, "")
	mustLoad(t, e, "reason.toml", `
[rule]
id = "bad-reason"
trigger = "on_tool_call"
[condition]
expression = 'context.tool.name == "kv_set"'
[action]
type = "deny"
reason = "{{ context.tool.arguments.value.missing.deeper + 1 }}"
`)
	out := evalString(t, e, `{"tool":"kv_set","arguments":{"key":"k","value":1}}`)
	if !strings.HasPrefix(out, `{"status":"error","error":"denied","message":"tool \"kv_set\" denied by rule \"bad-reason\": it matched, but its actions could not be prepared, and a rule on on_tool_call that cannot tell refuses the call: action 1 (deny): `) {
		t.Fatal(out)
	}
	expectEq(t, "the key", evalString(t, e, `{"tool":"kv_get","arguments":{"key":"k"}}`),
		`{"status":"success","tool":"kv_get","result":{"key":"k","found":false}}`)
}

// A call whose context ends after its rules admitted it, before its tool
// runs: an on_tool_call rule's call_tool holds the call until it is
// cancelled, and its tool reports success all the same.
func TestFailClosed_a_call_cancelled_before_its_tool_runs_does_not_run(t *testing.T) {
	e := rulesEngine(t, "")
	started := make(chan struct{}, 1)
	register(t, e, `{"name":"hold","limits":{"timeout_ms":60000}}`, func(ctx context.Context, _ toolbox.Call) ([]byte, error) {
		started <- struct{}{}
		<-ctx.Done()
		return []byte(`"held"`), nil
	})
	mustLoad(t, e, "hold.toml", `
[rule]
id = "hold-kv-set"
trigger = "on_tool_call"
[condition]
expression = 'context.tool.name == "kv_set"'
[action]
type = "call_tool"
tool = "hold"
`)
	h := handleOf(t, evalString(t, e, `{"tool":"kv_set","session":"s","async":true,"arguments":{"key":"k","value":1}}`))
	waitChan(t, started, "the rule's call")
	if perr := e.Cancel(h); perr != nil {
		t.Fatal(perr)
	}
	tail := auditedCall(t, e, `"session":"s","tool":"kv_set"`)
	if !strings.Contains(tail, `"error":"tool_failed"`) {
		t.Fatalf("audit: %s", tail)
	}
	expectEq(t, "the key", evalString(t, e, `{"tool":"kv_get","session":"s","arguments":{"key":"k"}}`),
		`{"status":"success","tool":"kv_get","result":{"key":"k","found":false}}`)
}

// The same from two other places (review of finding 9): a rule whose Lua
// action, not its condition, is running when the call is cancelled, and a
// deny rule evaluating for a call a Lua tool makes (call_tool) when the
// outer call is cancelled. Neither call's kv_set runs.
func TestFailClosed_a_cancelled_action_or_nested_call_does_not_run(t *testing.T) {
	e := rulesEngine(t, "[[tools]]\nname = \"setter\"\nlua = \"return function(args) return call_tool('kv_set', {key='k', value=1}) end\"\n[tools.limits]\ntimeout_ms = 10000\n")
	mustLoad(t, e, "action.toml", `
[rule]
id = "slow-action"
trigger = "on_tool_call"
timeout_ms = 5000
[condition]
expression = 'context.tool.name == "kv_set" and context.event.session == "a"'
[action]
type = "lua"
lua = "while true do end"
`)
	mustLoad(t, e, "guard.toml", strings.Replace(slowGuard, `if ctx.tool.name ~= "kv_set" then`, `if ctx.tool.name ~= "kv_set" or ctx.event.session ~= "n" then`, 1))
	for _, c := range []struct{ session, tool, args string }{
		{"a", "kv_set", `{"key":"k","value":1}`},
		{"n", "setter", `{}`},
	} {
		h := handleOf(t, evalString(t, e, `{"tool":"`+c.tool+`","session":"`+c.session+`","async":true,"arguments":`+c.args+`}`))
		time.Sleep(30 * time.Millisecond) // the rule is running
		if perr := e.Cancel(h); perr != nil {
			t.Fatal(perr)
		}
		e.Wait(context.Background(), h, -1)
		auditedCall(t, e, `"session":"`+c.session+`","tool":"kv_set"`)
		expectEq(t, c.session+": the key", evalString(t, e, `{"tool":"kv_get","session":"`+c.session+`","arguments":{"key":"k"}}`),
			`{"status":"success","tool":"kv_get","result":{"key":"k","found":false}}`)
	}
}
