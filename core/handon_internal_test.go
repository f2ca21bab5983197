package core

import (
	"context"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core/toolbox"
)

// A Lua tool keeps nothing of its request unless it passes its context on:
// its request's state may then be reused (the echo's way), and must not be
// when the script calls a tool or leaves actions that fire rules.
func TestLuaTool_handsOnItsRequestOnlyWhenItPassesItOn(t *testing.T) {
	e := New(Options{})
	out := e.Configure([]byte(`
[[tools]]
name = "pure"
lua = "return function(args) return args end"
[[tools]]
name = "caller"
lua = "return function(args) return call_tool('echo', args) end"
[[tools]]
name = "actor"
lua = "return function(args) notify('done') return args end"
`))
	if !strings.Contains(string(out), `"status":"success"`) {
		t.Fatalf("configure: %s", out)
	}
	s := e.current.Load()
	for _, tc := range []struct {
		tool     string
		handedOn bool
	}{{"pure", false}, {"caller", true}, {"actor", true}} {
		tool, ok := e.tools.Lookup(tc.tool)
		if !ok || !tool.KeepsNothing {
			t.Fatalf("%s: registered %v, keeps nothing %v", tc.tool, ok, ok && tool.KeepsNothing)
		}
		st := newRequestState(context.Background(), s, true)
		c := toolCall{name: tc.tool, args: []byte(`{"a":1}`), scope: toolbox.Scope{Config: s.policy},
			rep: &st.rep, state: st, tool: tool, scanned: true}
		res, _, perr := e.callTool(st, s, &c)
		if perr != nil || string(res) != `{"a":1}` {
			t.Fatalf("%s: %s %v", tc.tool, res, perr)
		}
		if st.handedOn.Load() != tc.handedOn {
			t.Errorf("%s: handed on %v, want %v", tc.tool, st.handedOn.Load(), tc.handedOn)
		}
		st.done()
	}
}

// A request made inside a running tool's call (clara_call_evaluate, a
// Python tool's current_call()) may leave the tool's context with rules and
// callbacks: the calling request's state is handed on. A tool that makes
// none leaves it reusable.
func TestAppendEvaluateWithin_handsOnTheCallersRequest(t *testing.T) {
	e := New(Options{})
	s := e.current.Load()
	st := newRequestState(context.Background(), s, true)
	ctx := withCallScope(st, &toolCall{scope: toolbox.Scope{Config: s.policy}})
	caller := CallerOf(ctx, toolbox.Call{Scope: toolbox.Scope{Config: s.policy}})
	if st.handedOn.Load() {
		t.Fatal("handed on before any request")
	}
	out := e.AppendEvaluateWithin(caller, nil, []byte(`{"tool":"echo","arguments":{"a":1}}`))
	if string(out) != `{"status":"success","tool":"echo","result":{"a":1}}` {
		t.Fatalf("nested echo: %s", out)
	}
	if !st.handedOn.Load() {
		t.Error("a request made inside the call left the caller's request state reusable")
	}
	// Through a context that is not a request's (a chat's own, say): nothing to note.
	HandOnContext(context.Background())
}
