package rules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A rule's timeout_ms and memory_mb bound its Lua (condition and script actions); without them
// the defaults hold (50 ms, 50 MiB).
func TestLua_ruleLimits(t *testing.T) {
	withLimits := func(id, limits, lua string) string {
		return "[rule]\nid = \"" + id + "\"\ntrigger = \"on_turn_start\"\n" + limits +
			"[condition]\nlua = '''\n" + lua + "\n'''\n[action]\n" + notify("never") + "\n"
	}
	for _, c := range []struct{ name, text, want string }{
		{"timeout", withLimits("t", "timeout_ms = 7\n", `while true do end`), "deadline of 7ms exceeded"},
		{"default timeout", withLimits("d", "", `while true do end`), "deadline of 50ms exceeded"},
		{"memory", withLimits("m", "timeout_ms = 5000\nmemory_mb = 4\n", `local t = {} for i = 1, 1e8 do t[i] = {i} end return true`),
			"over its memory limit of 4 MiB (memory_mb)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			set := mustLoad(t, nil, c.text)
			out := fireMap(t, set, &recHost{t: t, set: set}, "on_turn_start", map[string]any{}, true)
			if len(out.Fired) != 0 || len(out.Trace) != 1 || !strings.Contains(out.Trace[0].Error, c.want) {
				t.Fatalf("want %q in the trace, got %+v", c.want, out)
			}
		})
	}
}

// Invalid limits are problems at their line.
func TestLua_ruleLimits_loadErrors(t *testing.T) {
	rule := "[rule]\nid = \"x\"\ntrigger = \"e\"\n%s\n[condition]\nlua = \"return true\"\n[action]\ntype = \"log\"\nmessage = \"m\"\n"
	for _, c := range []struct{ name, limits, want string }{
		{"over the ceiling", "timeout_ms = 5001", "r.toml:4: rule \"x\": timeout_ms must be a whole number from 1 to 5000, not 5001"},
		{"zero", "timeout_ms = 0", "r.toml:4: rule \"x\": timeout_ms must be a whole number from 1 to 5000, not 0"},
		{"a string", "timeout_ms = \"5s\"", "r.toml:4: rule \"x\": timeout_ms must be a whole number from 1 to 5000, not 5s"},
		{"memory", "memory_mb = 2048", "r.toml:4: rule \"x\": memory_mb must be a whole number from 1 to 1024, not 2048"},
		{"fraction", "memory_mb = 1.5", "r.toml:4: rule \"x\": memory_mb must be a whole number from 1 to 1024, not 1.5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := loadErr(t, src("r.toml", strings.Replace(rule, "%s", c.limits, 1)))
			if msg != c.want {
				t.Errorf("got  %q\nwant %q", msg, c.want)
			}
		})
	}
	noLua := "[rule]\nid = \"x\"\ntrigger = \"e\"\ntimeout_ms = 100\n[condition]\nexpression = \"true\"\n[action]\ntype = \"log\"\nmessage = \"m\"\n"
	if msg := loadErr(t, src("r.toml", noLua)); msg != `r.toml:4: rule "x": timeout_ms and memory_mb apply to a rule's Lua, and this rule has none` {
		t.Errorf("no Lua: %q", msg)
	}
}

// context is the seed's name for ctx.
func TestLua_contextIsCtx(t *testing.T) {
	set := mustLoad(t, nil, luaRule("budget", "on_turn_start",
		`return context.turn.token_usage > 0.8 and context == ctx`, notify("wrap up")))
	out := fireMap(t, set, &recHost{t: t, set: set}, "on_turn_start", map[string]any{"turn": map[string]any{"token_usage": 0.85}}, false)
	if len(out.Fired) != 1 {
		t.Fatalf("want the rule fired, got %+v", out)
	}
}

// The seed's conditions, byte for byte (rulelua/testdata/seed), as a rule's lua.
func TestLua_seedConditionsAsRules(t *testing.T) {
	for _, name := range []string{"004_condition_threshold.lua", "004_condition_compound.lua", "004_condition_functions.lua"} {
		text, err := os.ReadFile(filepath.Join("..", "..", "rulelua", "testdata", "seed", name))
		if err != nil {
			t.Fatal(err)
		}
		set := mustLoad(t, nil, luaRule("seed", "on_turn_start", string(text), notify("wrap up")))
		out := fireMap(t, set, &recHost{t: t, set: set}, "on_turn_start", map[string]any{
			"turn": map[string]any{"token_usage": 0.85}, "history": map[string]any{"tool_count": float64(6)}}, true)
		if len(out.Fired) != 1 || len(out.Notices) != 1 {
			t.Errorf("%s: want the rule fired, got %+v", name, out)
		}
	}
}
