package rulelua

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// The Lua of seed 004 ("Research: Oracle Plugin System"), byte for byte in testdata/seed: its
// sandbox's whitelisted environment (the text its Python hands to lupa's lua.eval) and its rule
// conditions, which are Lua expressions as they stand. An expression is a chunk here as it is
// to lupa's eval; context is ctx; context_above_threshold and tool_completed are the seed's
// functions.

func seedFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "seed", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSeed004_restrictedEnvironment(t *testing.T) {
	s := mustCompile(t, "004_restricted_env.lua", seedFixture(t, "004_restricted_env.lua"))
	// Run the chunk on a state by hand to look at the functions it returns (Run would have to
	// convert them to Go, which it refuses).
	st := newState()
	defer st.close()
	st.begin(context.Background(), s, nil)
	defer st.endRun()
	G := st.L.CreateTable(0, 0)
	G.Metatable = st.envMT
	st.env.RawSetString("_G", G)
	fn := st.L.NewFunctionFromProto(s.proto)
	fn.Env = G
	st.L.Push(fn)
	if err := st.L.PCall(0, 1, nil); err != nil {
		t.Fatal(err)
	}
	env, ok := st.L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("the seed's environment is a %s", st.L.Get(-1).Type())
	}
	for _, name := range []string{"print", "type", "tostring", "tonumber"} {
		if f, ok := env.RawGetString(name).(*lua.LFunction); !ok || f != st.env.RawGetString(name) {
			t.Errorf("%s: %v, want the sandbox's own", name, env.RawGetString(name))
		}
	}
	if env.RawGetString("math") != st.env.RawGetString("math") {
		t.Errorf("math is not the sandbox's math")
	}
	for lib, names := range map[string][]string{"table": {"insert", "concat"}, "string": {"sub", "len"}} {
		sub, ok := env.RawGetString(lib).(*lua.LTable)
		if !ok {
			t.Fatalf("%s: %v", lib, env.RawGetString(lib))
		}
		for _, name := range names {
			if _, ok := sub.RawGetString(name).(*lua.LFunction); !ok {
				t.Errorf("%s.%s: %v", lib, name, sub.RawGetString(name))
			}
		}
	}
	// "NO: os, io, debug, dofile, loadfile, require": the sandbox has none of them but os's
	// time, clock and date (SPEC §8).
	for _, name := range []string{"io", "debug", "dofile", "loadfile", "require"} {
		if v := st.env.RawGetString(name); v != lua.LNil {
			t.Errorf("the sandbox has %s: %v", name, v)
		}
	}
}

func TestSeed004_conditions(t *testing.T) {
	turn := func(usage float64) map[string]any { return map[string]any{"token_usage": usage} }
	for _, c := range []struct {
		file string
		ctx  map[string]any
		want bool
	}{
		{"004_condition_threshold.lua", map[string]any{"turn": turn(0.85)}, true},
		{"004_condition_threshold.lua", map[string]any{"turn": turn(0.5)}, false},
		{"004_condition_compound.lua", map[string]any{"turn": turn(0.85), "history": map[string]any{"tool_count": 6.0}}, true},
		{"004_condition_compound.lua", map[string]any{"turn": turn(0.85), "history": map[string]any{"tool_count": 5.0}}, false},
		{"004_condition_functions.lua", map[string]any{"turn": turn(0.8)}, true},
		{"004_condition_functions.lua", map[string]any{"turn": turn(0.1),
			"event": map[string]any{"name": "on_tool_complete"}, "tool": map[string]any{"name": "vault_search"}}, true},
		{"004_condition_functions.lua", map[string]any{"turn": turn(0.1),
			"event": map[string]any{"name": "on_tool_failure"}, "tool": map[string]any{"name": "vault_search"}}, false},
	} {
		s := mustCompile(t, c.file, seedFixture(t, c.file))
		res, err := s.Run(context.Background(), c.ctx, nil)
		if err != nil || res.Value != c.want {
			t.Errorf("%s on %v: got %#v, %v; want %v", c.file, c.ctx, res.Value, err, c.want)
		}
	}
}

// An expression chunk keeps its lines: an error points at the script's own line.
func TestExpressionChunk_lines(t *testing.T) {
	s := mustCompile(t, "e.lua", "context.turn.token_usage >\nerror('two')")
	_, err := s.Run(context.Background(), map[string]any{"turn": map[string]any{"token_usage": 1.0}}, nil)
	le, ok := err.(*Error)
	if !ok || le.Line != 2 {
		t.Fatalf("got %v, want an error at line 2", err)
	}
	if _, err := Compile("bad.lua", "x = = 1"); err == nil {
		t.Fatal("a syntax error compiled")
	}
}

// A tool run sees no ctx or context; a rule run on the same pooled state after it sees both.
func TestCtxHiddenInToolsOnly(t *testing.T) {
	drainPool()
	tool := mustCompile(t, "tool", `return function(args) return ctx == nil and context == nil end`)
	rule := mustCompile(t, "rule", `return ctx ~= nil and context == ctx and ctx.x == 1`)
	for i := 0; i < 3; i++ {
		if res, err := tool.CallJSON(context.Background(), nil, nil); err != nil || res.Value != true {
			t.Fatalf("tool: %#v, %v", res.Value, err)
		}
		if res, err := rule.Run(context.Background(), map[string]any{"x": 1.0}, nil); err != nil || res.Value != true {
			t.Fatalf("rule: %#v, %v", res.Value, err)
		}
	}
}

// A tool whose chunk only returns a function is run without its chunk; it behaves the same:
// fresh globals every run, errors at their lines, and a chunk with more in it runs as before.
func TestTool_returnedFunctionDirect(t *testing.T) {
	drainPool()
	pure := mustCompile(t, "pure", "return function(args)\n  local seen = leaked\n  leaked = args.v\n  if args.boom then error('boom') end\n  return {seen = seen or 'none'}\nend")
	if pure.toolProto == nil {
		t.Fatal("the pure tool was not recognised")
	}
	for _, v := range []string{"a", "b"} {
		res, err := pure.CallJSON(context.Background(), []byte(`{"v":"`+v+`"}`), nil)
		if err != nil || string(res.JSON) != `{"seen":"none"}` {
			t.Fatalf("run %s: %s, %v", v, res.JSON, err)
		}
	}
	_, err := pure.CallJSON(context.Background(), []byte(`{"boom":true}`), nil)
	if le, ok := err.(*Error); !ok || le.Line != 4 {
		t.Fatalf("got %v, want an error at line 4", err)
	}
	for _, src := range []string{"local x = 1\nreturn function(args) return x end", `return function(args) return args.a .. "!" end`, `return 1`} {
		if mustCompile(t, "other", src).toolProto != nil {
			t.Errorf("%q taken for a bare function", src)
		}
	}
	withLocal := mustCompile(t, "local", "local x = 41\nreturn function(args) x = x + 1 return x end")
	for i := 0; i < 2; i++ {
		if res, err := withLocal.CallJSON(context.Background(), nil, nil); err != nil || res.Value != 42.0 {
			t.Fatalf("with a local: %#v, %v", res.Value, err)
		}
	}
}

// The seed's state idiom: context.state is its PluginState(get=getter,
// set=setter), so a script calls context.state.get('k') and
// context.state.set('k', v). They are state.get and state.set (the get
// sees the run's own set); the state's values stay readable as fields.
func TestSeed004_contextStateGetSet(t *testing.T) {
	s := mustCompile(t, "004_state_idiom.lua", seedFixture(t, "004_state_idiom.lua"))
	host := &testHost{state: map[string]any{"warnings": 2.0}}
	ctx := map[string]any{"turn": map[string]any{"number": 5.0, "token_usage": 0.85},
		"state": map[string]any{"warnings": 2.0}}
	res, err := s.Run(context.Background(), ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if res.Value != true {
		t.Errorf("returned %#v, want true (the get saw the set)", res.Value)
	}
	want := []Action{{Type: "set_state", Key: "warnings", Value: 3.0},
		{Type: "notify_self", Message: "Token budget at 85% (warning 3)", Priority: "high"}}
	if !reflect.DeepEqual(res.Actions, want) {
		t.Errorf("actions %#v\nwant %#v", res.Actions, want)
	}
	for _, c := range []struct{ src, want string }{
		{`return context.state.warnings`, "2"},
		{`return context.state:get('warnings')`, "2"}, // as a method, too
		{`context.state:set('k', 'v') return state.get('k')`, "v"},
		{`local n = 0 for k, v in pairs(context.state) do n = n + 1 end return n`, "1"},
		{`return json.encode(context.state)`, `{"warnings":2}`},
		{`return type(context.state.get) == 'function' and context.state.get == ctx.state.get`, "true"},
		{`return tostring(context.state)`, "context.state (read-only)"},
	} {
		res, err := run(t, c.src, ctx, host)
		if err != nil || fmt.Sprint(res.Value) != c.want {
			t.Errorf("%s: %#v, %v; want %s", c.src, res.Value, err, c.want)
		}
	}
	// Without a state in the context (a Lua test's own), get and set still work.
	res, err = run(t, `context.state.set('x', 1) return context.state.get('x')`, map[string]any{}, nil)
	if err != nil || res.Value != 1.0 {
		t.Errorf("no state: %#v, %v", res.Value, err)
	}
	if _, err := run(t, `context.state.x = 1`, ctx, host); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("assigning to context.state: %v", err)
	}
}
