package rules

import (
	"context"
	"testing"
)

// RuledOut never says "no rule matches" when Fire would fire one, and says
// it for the common case of simple conditions that do not hold.
func TestTriggerRuledOut(t *testing.T) {
	th := map[string]any{"big": 100.0}
	sets := map[string]*Set{
		"simple": mustLoad(t, th, rule("big", "e", "", "context.tool.result_bytes > thresholds.big", notify("x"))),
		"two": mustLoad(t, th,
			rule("a", "e", "", "context.tool.name == 'search' and context.tool.result_bytes > 10", notify("a")),
			rule("b", "e", "", "context.tool.duration_ms >= 1000", notify("b"))),
		"guarded":      mustLoad(t, th, rule("g", "e", "", "context.tool.name == 'x' and len(context.tool.arguments) > 0", notify("g"))),
		"vm only":      mustLoad(t, th, rule("v", "e", "", "len(context.tool.name) > 100", notify("v"))),
		"no condition": mustLoad(t, th, rule("n", "e", "", "", notify("n"))),
	}
	facts := []ToolFacts{
		{Name: "search", Done: true, ResultBytes: 5, DurationMS: 3},
		{Name: "search", Done: true, ResultBytes: 500, DurationMS: 3},
		{Name: "x", Done: true, ResultBytes: 5, DurationMS: 3000},
		{Name: "y"}, // not over yet: no result_bytes, no duration_ms
	}
	contexts := []map[string]any{
		{"tool": map[string]any{"name": "search", "result_bytes": 5.0, "duration_ms": 3.0, "error": nil, "arguments": map[string]any{}}},
		{"tool": map[string]any{"name": "search", "result_bytes": 500.0, "duration_ms": 3.0, "error": nil, "arguments": map[string]any{"q": 1.0}}},
		{"tool": map[string]any{"name": "x", "result_bytes": 5.0, "duration_ms": 3000.0, "error": nil, "arguments": map[string]any{"q": 1.0}}},
		{"tool": map[string]any{"name": "y"}},
	}
	wantRuledOut := map[string][]bool{
		"simple":       {true, false, true, false},
		"two":          {true, false, false, false},
		"guarded":      {true, true, false, true},
		"vm only":      {false, false, false, false},
		"no condition": {false, false, false, false},
	}
	for name, set := range sets {
		trig := set.Trigger("e")
		for i, c := range contexts {
			got := trig.RuledOut(&facts[i])
			if got != wantRuledOut[name][i] {
				t.Errorf("%s, context %d: RuledOut %v, want %v", name, i, got, !got)
			}
			fired := len(set.Fire(context.Background(), Event{Name: "e", Context: MapSource(c)}, benchHost{}).Fired)
			if got && fired != 0 {
				t.Errorf("%s, context %d: ruled out, but Fire fired %d rules", name, i, fired)
			}
		}
	}
	if set := mustLoad(t, th); set.Trigger("e") != nil {
		t.Error("a trigger no rule watches should be nil")
	}
}
