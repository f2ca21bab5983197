package rules

import (
	"context"
	"testing"
)

// benchLuaRule is the seed's rule of the bench row "Lua rule" (SPEC §12);
// tests/bench/bench_lua.py runs the same function under lupa (LuaJIT).
const benchLuaRule = `return function(ctx) return ctx.turn.token_usage > 0.8 and ctx.history.tool_count > 5 end`

// benchLuaEvent is the event's context both sides use.
func benchLuaEvent() map[string]any {
	return map[string]any{
		"event": map[string]any{"name": "on_turn_start", "session": "bench"},
		"turn":  map[string]any{"token_usage": 0.85, "number": float64(3)},
		"history": map[string]any{"tool_count": float64(7), "failure_count": float64(0),
			"recent_tools": []any{"search", "read", "echo"}, "consecutive_failures": map[string]any{}},
	}
}

// BenchmarkFire_luaRule fires an event at a set holding one rule whose
// condition is benchLuaRule: the Lua sandbox's cost through the rule
// engine (a pooled state, fresh globals, ctx read field by field from the
// event's context), plus the rule's one log action.
func BenchmarkFire_luaRule(b *testing.B) {
	set, err := Load([]Source{{Name: "bench.toml", Text: []byte(`[rule]
id = "budget"
trigger = "on_turn_start"
[condition]
lua = '` + benchLuaRule + `'
[action]
type = "log"
level = "debug"
message = "budget"
`)}}, BuiltinThresholds)
	if err != nil {
		b.Fatal(err)
	}
	ev := Event{Name: "on_turn_start", Session: "bench", Context: MapSource(benchLuaEvent())}
	var host benchHost
	if out := set.Fire(context.Background(), ev, host); len(out.Fired) != 1 {
		b.Fatalf("the rule should fire: %+v", out)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if out := set.Fire(context.Background(), ev, host); len(out.Fired) != 1 {
			b.Fatal("not fired")
		}
	}
}
