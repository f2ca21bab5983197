package rules

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// luaRule builds a one-rule file whose condition is inline Lua.
func luaRule(id, trigger, lua string, actions ...string) string {
	var b strings.Builder
	b.WriteString("[rule]\nid = \"" + id + "\"\ntrigger = \"" + trigger + "\"\n")
	if lua != "" {
		b.WriteString("[condition]\nlua = '''\n" + lua + "\n'''\n")
	}
	for _, a := range actions {
		b.WriteString("[[actions]]\n" + a + "\n")
	}
	return b.String()
}

func fireMap(t *testing.T, set *Set, h *recHost, name string, ctx map[string]any, trace bool) *Outcome {
	t.Helper()
	ctx["event"] = map[string]any{"name": name, "session": "s1"}
	return set.Fire(context.Background(), Event{Name: name, Session: "s1", Context: MapSource(ctx), Trace: trace}, h)
}

func TestLua_condition_seesContext(t *testing.T) {
	set := mustLoad(t, nil, luaRule("budget", "on_turn_start",
		`return ctx.turn.token_usage > 0.8 and ctx.history.tool_count > 5`, notify("wrap up")))
	h := &recHost{t: t, set: set}
	out := fireMap(t, set, h, "on_turn_start", map[string]any{
		"turn": map[string]any{"token_usage": 0.85}, "history": map[string]any{"tool_count": float64(6)}}, false)
	if len(out.Fired) != 1 || len(out.Notices) != 1 || out.Notices[0].Message != "wrap up" {
		t.Fatalf("want the rule fired with its notice, got %+v", out)
	}
	out = fireMap(t, set, h, "on_turn_start", map[string]any{
		"turn": map[string]any{"token_usage": 0.5}, "history": map[string]any{"tool_count": float64(6)}}, false)
	if len(out.Fired) != 0 {
		t.Fatalf("want nothing fired under the threshold, got %+v", out)
	}
}

func TestLua_condition_returningAFunction(t *testing.T) {
	set := mustLoad(t, nil, luaRule("f", "on_turn_start",
		`return function(ctx) return ctx.turn.token_usage > 0.8 end`, notify("hit")))
	h := &recHost{t: t, set: set}
	out := fireMap(t, set, h, "on_turn_start", map[string]any{"turn": map[string]any{"token_usage": 0.9}}, false)
	if len(out.Fired) != 1 {
		t.Fatalf("want fired, got %+v", out)
	}
}

func TestLua_condition_errorIsInTheTraceAndSkipsTheRule(t *testing.T) {
	set := mustLoad(t, nil, luaRule("bad", "on_turn_start", `return ctx.missing.field > 1`, notify("never")))
	h := &recHost{t: t, set: set}
	out := fireMap(t, set, h, "on_turn_start", map[string]any{}, true)
	if len(out.Fired) != 0 || len(out.Trace) != 1 || out.Trace[0].Matched {
		t.Fatalf("want one unmatched trace entry, got %+v", out)
	}
	if !strings.Contains(out.Trace[0].Error, "condition:") {
		t.Errorf("trace error %q should name the condition", out.Trace[0].Error)
	}
}

func TestLua_condition_timeoutIsAnError(t *testing.T) {
	set := mustLoad(t, nil, luaRule("loop", "on_turn_start", `while true do end`, notify("never")))
	h := &recHost{t: t, set: set}
	// Without the deadline, Fire would not return (and the test would time
	// out); the error says the deadline stopped it.
	out := fireMap(t, set, h, "on_turn_start", map[string]any{}, true)
	if len(out.Fired) != 0 || len(out.Trace) != 1 || !strings.Contains(out.Trace[0].Error, "deadline") {
		t.Fatalf("want a deadline error in the trace, got %+v", out)
	}
}

func TestLua_scriptActions_applyWithTheRule(t *testing.T) {
	set := mustLoad(t, nil, luaRule("acts", "on_turn_start", "", `type = "lua"
lua = '''
local n = (state.get("count") or 0) + 1
state.set("count", n)
notify("count is " .. n, "high")
emit("count.changed", {count = n})
'''`))
	h := &recHost{t: t, set: set, state: map[string]any{"count": float64(4)}}
	out := fireMap(t, set, h, "on_turn_start", map[string]any{}, false)
	if len(out.Fired) != 1 {
		t.Fatalf("want fired, got %+v", out)
	}
	if len(out.Notices) != 1 || out.Notices[0].Message != "count is 5" || out.Notices[0].Priority != "high" {
		t.Errorf("notices = %+v", out.Notices)
	}
	if len(h.applied) != 1 || len(h.applied[0]) != 1 || h.applied[0][0].Key != "count" || string(h.applied[0][0].Value) != "5" {
		t.Errorf("state writes = %+v", h.applied)
	}
	if len(h.chained) != 1 || h.chained[0].event != "count.changed" {
		t.Fatalf("chained = %+v", h.chained)
	}
	if c, _ := json.Marshal(h.chained[0].payload); string(c) != `{"count":5}` {
		t.Errorf("chained payload = %s", c)
	}
}

func TestLua_scriptActions_allOrNone(t *testing.T) {
	set := mustLoad(t, nil, luaRule("half", "on_turn_start", "", `type = "lua"
lua = '''
notify("first")
state.set("k", 1)
error("then it fails")
'''`, notify("plain")))
	h := &recHost{t: t, set: set}
	out := fireMap(t, set, h, "on_turn_start", map[string]any{}, true)
	if len(out.Fired) != 0 || len(out.Notices) != 0 || len(h.applied) != 0 {
		t.Fatalf("a failed script must apply nothing of its rule: %+v, writes %+v", out, h.applied)
	}
	if len(out.Trace) != 1 || !strings.Contains(out.Trace[0].Skipped, "then it fails") {
		t.Errorf("trace should say why: %+v", out.Trace)
	}
}

func TestLua_conditionActions_applyOnlyWhenItMatches(t *testing.T) {
	set := mustLoad(t, nil, luaRule("cond", "on_turn_start",
		`notify("from the condition") return ctx.go == true`, notify("from the action")))
	h := &recHost{t: t, set: set}
	out := fireMap(t, set, h, "on_turn_start", map[string]any{"go": false}, false)
	if len(out.Notices) != 0 {
		t.Fatalf("an unmatched condition's notify must not apply: %+v", out.Notices)
	}
	out = fireMap(t, set, h, "on_turn_start", map[string]any{"go": true}, false)
	if len(out.Notices) != 2 || out.Notices[0].Message != "from the condition" || out.Notices[1].Message != "from the action" {
		t.Fatalf("notices = %+v", out.Notices)
	}
}

func TestLua_deny_onToolCall(t *testing.T) {
	set := mustLoad(t, nil, luaRule("no-rm", "on_tool_call",
		`if ctx.tool.name == "rm" then deny("no deleting") return true end return false`, `type = "log"
message = "denied"`))
	h := &recHost{t: t, set: set}
	out := fireMap(t, set, h, "on_tool_call", map[string]any{"tool": map[string]any{"name": "rm"}}, false)
	if out.Denied == nil || out.Denied.Reason != "no deleting" || out.Denied.Rule != "no-rm" {
		t.Fatalf("want denied by no-rm, got %+v", out)
	}
	out = fireMap(t, set, h, "on_tool_call", map[string]any{"tool": map[string]any{"name": "ls"}}, false)
	if out.Denied != nil {
		t.Fatalf("ls must pass: %+v", out.Denied)
	}
}

func TestLua_deny_elsewhereSkipsTheRule(t *testing.T) {
	set := mustLoad(t, nil, luaRule("d", "on_turn_start", "", `type = "lua"
lua = 'deny("no")'`))
	h := &recHost{t: t, set: set}
	out := fireMap(t, set, h, "on_turn_start", map[string]any{}, true)
	if len(out.Fired) != 0 || out.Denied != nil || !strings.Contains(out.Trace[0].Skipped, "on_tool_call") {
		t.Fatalf("want the rule skipped, got %+v", out)
	}
}

func TestLua_scriptFile_relativeToTheRuleFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "return function(ctx) return ctx.turn.token_usage > 0.8 and ctx.history.tool_count > 5 end\n"
	if err := os.WriteFile(filepath.Join(dir, "scripts", "research.lua"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	text := "[rule]\nid = \"r\"\ntrigger = \"on_turn_start\"\n[condition]\nscript = \"scripts/research.lua\"\n[action]\ntype = \"notify_self\"\nmessage = \"m\"\n"
	set, err := Load([]Source{{Name: filepath.Join(dir, "r.toml"), Text: []byte(text)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &recHost{t: t, set: set}
	out := fireMap(t, set, h, "on_turn_start", map[string]any{
		"turn": map[string]any{"token_usage": 0.9}, "history": map[string]any{"tool_count": float64(9)}}, false)
	if len(out.Fired) != 1 {
		t.Fatalf("want fired, got %+v", out)
	}
}

func TestLua_loadErrors(t *testing.T) {
	cases := []struct{ name, text, want string }{
		{"syntax", luaRule("x", "on_turn_start", "return (", notify("m")), "r.toml:"},
		{"missing file", "[rule]\nid = \"x\"\ntrigger = \"e\"\n[condition]\nscript = \"nope.lua\"\n[action]\ntype = \"log\"\nmessage = \"m\"\n", "nope.lua"},
		{"action without source", "[rule]\nid = \"x\"\ntrigger = \"e\"\n[action]\ntype = \"lua\"\n", "give one of lua"},
		{"action with both", "[rule]\nid = \"x\"\ntrigger = \"e\"\n[action]\ntype = \"lua\"\nlua = \"x=1\"\nscript = \"a.lua\"\n", "give one of lua"},
		{"both in condition", "[rule]\nid = \"x\"\ntrigger = \"e\"\n[condition]\nlua = \"return true\"\nexpression = \"true\"\n[action]\ntype = \"log\"\nmessage = \"m\"\n", "give one of"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := loadErr(t, src(filepath.Join(t.TempDir(), "r.toml"), c.text))
			if !strings.Contains(msg, c.want) {
				t.Errorf("error %q should contain %q", msg, c.want)
			}
		})
	}
}

func TestLua_ruleTraceValue(t *testing.T) {
	set := mustLoad(t, nil, luaRule("v", "on_turn_start", `return 42`, notify("m")))
	h := &recHost{t: t, set: set}
	out := fireMap(t, set, h, "on_turn_start", map[string]any{}, true)
	if len(out.Trace) != 1 || !out.Trace[0].Matched {
		t.Fatalf("a non-nil, non-false value matches (Lua truth): %+v", out.Trace)
	}
	if v, _ := json.Marshal(out.Trace[0].Value); string(v) != "42" {
		t.Errorf("trace value = %s", v)
	}
}
