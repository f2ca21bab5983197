package core_test

import (
	"strings"
	"testing"
)

// session_end and a session's policy (issue 25, finding 10): ending a
// session frees its data but never its policy, which only clara_reset and
// clear = ["session_policies"] remove; and a call made inside another (a
// rule, a script, a tool, a model) ends only its own session.

const jailDenied = `{"status":"error","error":"denied","message":"tool \"kv_set\" denied by the policy of session \"jail\": its deny list names it"}`

func TestSessionEnd_keeps_the_sessions_policy(t *testing.T) {
	e := rulesEngine(t, "")
	narrow := func() {
		t.Helper()
		if out := evalString(t, e, `{"tool":"session_policy","session":"jail","arguments":{"deny":["kv_set"]}}`); !strings.HasPrefix(out, `{"status":"success"`) {
			t.Fatal(out)
		}
	}
	setInJail := func() string {
		return evalString(t, e, `{"tool":"kv_set","session":"jail","arguments":{"key":"k","value":1}}`)
	}
	narrow()
	evalString(t, e, `{"tool":"echo","session":"jail","arguments":{}}`) // some history to forget
	expectEq(t, "narrowed", setInJail(), jailDenied)
	// The session ends (by its own name, and by the host naming it): its
	// history goes, its policy stays.
	for _, req := range []string{
		`{"tool":"session_end","session":"jail"}`,
		`{"tool":"session_end","arguments":{"session":"jail"}}`,
	} {
		if out := evalString(t, e, req); !strings.HasPrefix(out, `{"status":"success","tool":"session_end","result":{"session":"jail"`) {
			t.Fatalf("%s: %s", req, out)
		}
		expectEq(t, "after "+req, setInJail(), jailDenied)
		expectEq(t, "the policy", evalString(t, e, `{"tool":"session_policy","session":"jail","arguments":{}}`),
			`{"status":"success","tool":"session_policy","result":{"session":"jail","allow":null,"deny":["kv_set"]}}`)
	}
	// The default session too.
	evalString(t, e, `{"tool":"session_policy","arguments":{"deny":["get_time"]}}`)
	evalString(t, e, `{"tool":"session_end"}`)
	if out := evalString(t, e, `{"tool":"get_time"}`); !strings.Contains(out, `"error":"denied"`) {
		t.Fatalf("the default session's policy after session_end: %s", out)
	}
	// What removes it: clear = ["session_policies"], and clara_reset.
	mustConfigure(t, e, `clear = ["session_policies"]`)
	expectEq(t, "cleared", setInJail(), `{"status":"success","tool":"kv_set","result":{"key":"k","created":true}}`)
	narrow()
	evalString(t, e, `{"tool":"session_end","session":"jail"}`)
	e.Reset()
	mustConfigure(t, e, "state_dir = \"\"\n[rules]\npaths = []\n")
	expectEq(t, "reset", setInJail(), `{"status":"success","tool":"kv_set","result":{"key":"k","created":true}}`)
}

func TestSessionEnd_a_nested_call_ends_only_its_own_session(t *testing.T) {
	e := rulesEngine(t, `
[[tools]]
name = "ender"
input_schema = { type = "object", properties = { session = { type = "string" } } }
lua = 'return function(args) return call_tool("session_end", { session = args.session }) end'

[[tools]]
name = "end_self"
lua = 'return function(args) return call_tool("session_end", {}) end'
`)
	evalString(t, e, `{"tool":"session_policy","session":"jail","arguments":{"deny":["kv_set"]}}`)
	evalString(t, e, `{"tool":"kv_set","session":"other","arguments":{"key":"k","value":1}}`)
	// A Lua tool, called in session w, names another session.
	for _, victim := range []string{"jail", "other", "default"} {
		out := evalString(t, e, `{"tool":"ender","session":"w","arguments":{"session":"`+victim+`"}}`)
		want := `session_end: a call made by a rule, a script, a tool or a model ends only its own session (\"w\"), not \"` + victim + `\"`
		if !strings.Contains(out, `"status":"error"`) || !strings.Contains(out, want) {
			t.Fatalf("ender %s: %s", victim, out)
		}
	}
	expectEq(t, "the other session's data", evalString(t, e, `{"tool":"kv_get","session":"other","arguments":{"key":"k"}}`),
		`{"status":"success","tool":"kv_get","result":{"key":"k","found":true,"value":1}}`)
	expectEq(t, "jail", evalString(t, e, `{"tool":"kv_set","session":"jail","arguments":{"key":"k","value":1}}`), jailDenied)
	// Its own session, named or not, it may end.
	for _, req := range []string{
		`{"tool":"ender","session":"other","arguments":{"session":"other"}}`,
		`{"tool":"end_self","session":"other","arguments":{}}`,
	} {
		evalString(t, e, `{"tool":"kv_set","session":"other","arguments":{"key":"k","value":1}}`)
		if out := evalString(t, e, req); !strings.HasPrefix(out, `{"status":"success"`) || !strings.Contains(out, `"session":"other"`) {
			t.Fatalf("%s: %s", req, out)
		}
		expectEq(t, "ended", evalString(t, e, `{"tool":"kv_get","session":"other","arguments":{"key":"k"}}`),
			`{"status":"success","tool":"kv_get","result":{"key":"k","found":false}}`)
	}
	// A rule's call_tool, fired in session w, cannot end jail either.
	mustLoad(t, e, "end.toml", `
[rule]
id = "end-jail"
trigger = "cleanup"
[action]
type = "call_tool"
tool = "session_end"
arguments = { session = "other" }
`)
	evalString(t, e, `{"tool":"kv_set","session":"other","arguments":{"key":"k","value":1}}`)
	out := evalString(t, e, `{"tool":"emit_event","session":"w","arguments":{"event":"cleanup"}}`)
	if !strings.Contains(out, `ends only its own session`) {
		t.Fatalf("rule: %s", out)
	}
	expectEq(t, "after the rule", evalString(t, e, `{"tool":"kv_get","session":"other","arguments":{"key":"k"}}`),
		`{"status":"success","tool":"kv_get","result":{"key":"k","found":true,"value":1}}`)
}
