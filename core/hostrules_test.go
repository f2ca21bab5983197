package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/rules"
)

// hostFuncs are a host rule's functions that record what they were given.
type hostFuncs struct {
	events   atomic.Int64
	released atomic.Int64
	last     atomic.Value // the last event, decoded
}

func (h *hostFuncs) funcs(cond func(ev map[string]any) (bool, error), act func(ev map[string]any) ([]byte, error)) *rules.HostFuncs {
	f := &rules.HostFuncs{Release: func() { h.released.Add(1) }}
	decode := func(b []byte) map[string]any {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			panic(err)
		}
		h.events.Add(1)
		h.last.Store(m)
		return m
	}
	if cond != nil {
		f.Condition = func(_ context.Context, ev []byte) (bool, error) { return cond(decode(ev)) }
	}
	if act != nil {
		f.Action = func(_ context.Context, ev []byte) ([]byte, error) { return act(decode(ev)) }
	}
	return f
}

func argOf(ev map[string]any, name string) any {
	tool, _ := ev["context"].(map[string]any)["tool"].(map[string]any)
	args, _ := tool["arguments"].(map[string]any)
	return args[name]
}

// Seed 004's Tier 1: registerRule({condition: () => ..., action}). A rule of
// the host sits beside the rules of files: the same hooks, priorities,
// trace, listing and rule tests; its condition and action are its own.
func TestHostRules_besideFileRules(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	loadRuleText(t, e, "file.toml", `
[rule]
id = "file-rule"
trigger = "on_tool_call"
priority = 5
[condition]
expression = "context.tool.name == 'echo'"
[action]
type = "notify_self"
message = "echo called"
`)
	var h hostFuncs
	err := e.RegisterRule([]byte(`{"id":"big-echo","trigger":"on_tool_call","priority":10,"description":"no echo of more than 5"}`),
		h.funcs(func(ev map[string]any) (bool, error) {
			n, _ := argOf(ev, "n").(float64)
			return n > 5, nil
		}, func(ev map[string]any) ([]byte, error) {
			return []byte(`[{"type":"deny","reason":"too big"},{"type":"notify_self","message":"denied ` + ev["session"].(string) + `","priority":"high"}]`), nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	expectEq(t, "small", evalString(t, e, `{"tool":"echo","session":"s","arguments":{"n":1}}`),
		`{"status":"success","tool":"echo","result":{"n":1},"notices":[{"rule":"file-rule","message":"echo called","priority":"normal","event":"on_tool_call"}]}`)
	expectEq(t, "big", evalString(t, e, `{"tool":"echo","session":"s","arguments":{"n":9}}`),
		`{"status":"error","error":"denied","message":"tool \"echo\" denied by rule \"big-echo\": too big","notices":[{"rule":"big-echo","message":"denied s","priority":"high","event":"on_tool_call"},{"rule":"file-rule","message":"echo called","priority":"normal","event":"on_tool_call"}]}`)
	ev := h.last.Load().(map[string]any)
	if ev["rule"] != "big-echo" || ev["event"] != "on_tool_call" || ev["session"] != "s" || argOf(ev, "n") != 9.0 {
		t.Errorf("the host's functions got %v", ev)
	}
	// The trace explains it as any rule, in priority order.
	traced := decodeEnvelope(t, evalString(t, e, `{"tool":"echo","arguments":{"n":9},"trace":true}`))
	trace, _ := traced["trace"].([]any)
	if len(trace) < 2 || trace[0].(map[string]any)["rule"] != "big-echo" || trace[0].(map[string]any)["value"] != true {
		t.Errorf("trace %v", traced["trace"])
	}
	list := evalString(t, e, `{"tool":"rules_list"}`)
	if !strings.Contains(list, `{"id":"big-echo","description":"no echo of more than 5","trigger":"on_tool_call","priority":10,"stop":false,"condition":"(a function of the host)","file":"host","line":1}`) {
		t.Errorf("rules_list: %s", list)
	}
	// Rule tests run it too.
	out := evalString(t, e, `{"tool":"rules_test","arguments":{"toml":`+jsonText(`
[[cases]]
name = "big"
event = "on_tool_call"
tool = { name = "echo", arguments = { n = 7 } }
fired = ["big-echo", "file-rule"]
denied = "too big"
`)+`}}`)
	if !strings.Contains(out, `"passed":1,"failed":0`) {
		t.Errorf("rules_test: %s", out)
	}
	// Shadow mode holds for it as for the others.
	mustConfigure(t, e, "[rules]\nmode = \"shadow\"\n")
	if out := evalString(t, e, `{"tool":"echo","arguments":{"n":9}}`); !strings.HasPrefix(out, `{"status":"success"`) {
		t.Errorf("shadow: %s", out)
	}
	mustConfigure(t, e, "[rules]\nmode = \"enforce\"\n")
	// It stays through clara_configure, clear = ["rules"] included.
	mustConfigure(t, e, "clear = [\"rules\"]\n")
	if out := evalString(t, e, `{"tool":"echo","arguments":{"n":9}}`); !strings.Contains(out, `"error":"denied"`) {
		t.Errorf("after clear: %s", out)
	}
	if h.released.Load() != 0 {
		t.Fatal("released while in force")
	}
	if err := e.UnregisterRule("big-echo"); err != nil {
		t.Fatal(err)
	}
	if h.released.Load() != 1 {
		t.Errorf("released %d times after unregistering", h.released.Load())
	}
	if out := evalString(t, e, `{"tool":"echo","arguments":{"n":9}}`); !strings.HasPrefix(out, `{"status":"success"`) {
		t.Errorf("unregistered: %s", out)
	}
	if err := e.UnregisterRule("big-echo"); !errors.Is(err, core.ErrRuleNotFound) {
		t.Errorf("again: %v", err)
	}
	loadRuleText(t, e, "file.toml", "[rule]\nid = \"file-rule\"\ntrigger = \"x\"\n[action]\ntype = \"log\"\nmessage = \"m\"\n")
	if err := e.UnregisterRule("file-rule"); !errors.Is(err, core.ErrRuleTaken) {
		t.Errorf("a file's rule: %v", err)
	}
}

// A condition that cannot tell, an action that fails or answers what is
// not actions: on on_tool_call the call is denied; elsewhere the rule does
// not act. The functions run on no rule of a set that left (released once).
func TestHostRules_failClosedAndReleased(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	var h hostFuncs
	must := func(desc string, f *rules.HostFuncs) {
		t.Helper()
		if err := e.RegisterRule([]byte(desc), f); err != nil {
			t.Fatal(err)
		}
	}
	must(`{id: 'cannot-tell', trigger: 'on_tool_call', actions: [{type: 'log', message: 'm'}]}`, // JSON5, as people write it
		h.funcs(func(map[string]any) (bool, error) { return false, errors.New("the host could not tell") }, nil))
	if out := evalString(t, e, `{"tool":"echo"}`); !strings.Contains(out, `"error":"denied","message":"tool \"echo\" denied by rule \"cannot-tell\": its condition could not be evaluated, and a rule on on_tool_call that cannot tell refuses the call: the host could not tell"`) {
		t.Errorf("condition error: %s", out)
	}
	for _, c := range []struct{ answer, want string }{
		{`{"error":"lost the database"}`, `the host's action failed: lost the database`},
		{`[{"type":"call_tool"}]`, `a host's action may ask for notify_self, log, set_state, emit_event, deny, ask or block`},
		{`[{"type":"notify_self","message":"m","colour":"red"}]`, `unknown field`},
		{`not json`, `the host's action returned what is not actions`},
	} {
		answer := c.answer
		must(`{"id":"cannot-tell","trigger":"on_tool_call"}`, h.funcs(nil, func(map[string]any) ([]byte, error) { return []byte(answer), nil }))
		if out := evalString(t, e, `{"tool":"echo"}`); !strings.Contains(out, `"error":"denied"`) || !strings.Contains(out, c.want) {
			t.Errorf("%s: %s", c.answer, out)
		}
	}
	// Each replacement released the functions it replaced.
	if n := h.released.Load(); n != 4 {
		t.Errorf("released %d, want 4", n)
	}
	// On another event, the rule does not act.
	must(`{"id":"cannot-tell","trigger":"x","action":{"type":"log","message":"m"}}`, h.funcs(func(map[string]any) (bool, error) { return false, errors.New("no") }, nil))
	must(`{"id":"acts","trigger":"x","priority":-1}`, h.funcs(nil, func(map[string]any) ([]byte, error) {
		return []byte(`{"type":"set_state","key":"seen","value":1}`), nil
	}))
	expectEq(t, "x", emitString(t, e, `{"event":"x"}`),
		`{"status":"success","result":{"fired":[{"rule":"acts","actions":[{"key":"seen","type":"set_state","value":1}]}],"notices":[],"denied":null}}`)
	// clara_reset lets go of them all.
	before := h.released.Load()
	e.Reset()
	if n := h.released.Load() - before; n != 2 {
		t.Errorf("reset released %d, want 2", n)
	}
	expectEq(t, "after reset", emitString(t, e, `{"event":"x"}`), `{"status":"success","result":{"fired":[],"notices":[],"denied":null}}`)
}

// What a registration refuses, releasing the functions it was given.
func TestHostRules_refused(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = true\n")
	var h hostFuncs
	always := func(map[string]any) (bool, error) { return true, nil }
	nothing := func(map[string]any) ([]byte, error) { return nil, nil }
	for _, c := range []struct {
		desc string
		f    *rules.HostFuncs
		want string
	}{
		{`{"id":"token_budget","trigger":"x"}`, h.funcs(always, nothing), `rule "token_budget": a rule of the configuration has that id`},
		{`{"id":"a b","trigger":"x"}`, h.funcs(always, nothing), `rule id "a b"`},
		{`{"id":"r","trigger":"Bad"}`, h.funcs(always, nothing), `trigger "Bad" is not an event name`},
		{`{"id":"r","trigger":"x"}`, &rules.HostFuncs{Release: func() { h.released.Add(1) }}, `a host rule needs an action: a function, or actions in its descriptor`},
		{`{"id":"r","trigger":"x","condition":"true"}`, h.funcs(always, nothing), `give the condition as a function or in the descriptor, not both`},
		{`{"id":"r","trigger":"x","colour":"red"}`, h.funcs(always, nothing), `unknown field "colour"`},
		{`{"id":"r","trigger":"x",`, h.funcs(always, nothing), `descriptor`},
	} {
		err := e.RegisterRule([]byte(c.desc), c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %s", c.desc, err, c.want)
		}
	}
	if n := h.released.Load(); n != 7 {
		t.Errorf("released %d of 7", n)
	}
	// A descriptor may carry its own condition and actions; the host's action runs after them.
	err := e.RegisterRule([]byte(`{"id":"r","trigger":"x","condition":"context.n > 1","actions":[{"type":"notify_self","message":"n is {{ context.n }}"}]}`),
		h.funcs(nil, func(ev map[string]any) ([]byte, error) {
			return []byte(`{"type":"notify_self","message":"and the host agrees","deliver_on":"y"}`), nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	expectEq(t, "descriptor's own", emitString(t, e, `{"event":"x","payload":{"n":2}}`),
		`{"status":"success","result":{"fired":[{"rule":"r","actions":[{"message":"n is 2","priority":"normal","type":"notify_self"},{"deliver_on":"y","message":"and the host agrees","priority":"normal","type":"notify_self"}]}],"notices":[{"rule":"r","message":"n is 2","priority":"normal","event":"x"}],"denied":null}}`)
}
