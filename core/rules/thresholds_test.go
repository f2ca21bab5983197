package rules

import (
	"context"
	"testing"
)

// Thresholds are bound at load: simple conditions have them folded in,
// and expressions and templates read them.
func TestThresholds_boundAtLoad(t *testing.T) {
	set := mustLoad(t, map[string]any{"limit": 5.0},
		rule("simple", "on_x", "", "context.n > thresholds.limit", notify("simple {{ thresholds.limit }}")),
		rule("expr", "on_x", "", "context.n > thresholds.limit && true", notify("expr")))
	r := set.Rules()[0]
	if r.simple == nil || r.folded == nil || r.folded == r.simple {
		t.Fatalf("want a simple form with thresholds folded in: simple %v folded %v", r.simple, r.folded)
	}
	for _, tc := range []struct {
		n     float64
		fired []string
	}{{5, []string{}}, {6, []string{"simple", "expr"}}} {
		out := fire(set, &recHost{}, "on_x", map[string]any{"n": tc.n}, false)
		if got := firedIDs(out); !equal(got, tc.fired) {
			t.Errorf("n = %v: fired %q, want %q", tc.n, got, tc.fired)
		}
	}
	if got := messages(fire(set, &recHost{}, "on_x", map[string]any{"n": 6.0}, false)); !equal(got, []string{"simple 5", "expr"}) {
		t.Errorf("notices %q", got)
	}
	// Without thresholds, a threshold is absent: expr decides (an error, no match).
	bare := mustLoad(t, nil, rule("simple", "on_x", "", "context.n > thresholds.limit", notify("x")))
	if out := fire(bare, &recHost{}, "on_x", map[string]any{"n": 6.0}, true); len(out.Fired) != 0 || out.Trace[0].Error == "" {
		t.Errorf("no thresholds: %+v", out.Trace)
	}
}

// A set re-bound to other thresholds (a rule test's) decides with them, on
// every path (folded simple forms, guards, expr, templates, RuledOut), and
// the set it came from is unchanged.
func TestThresholds_rebound(t *testing.T) {
	set := mustLoad(t, map[string]any{"x": 5.0}, rule("over", "tick", "", "context.tool.result_bytes > thresholds.x and context.n < 100", notify("over {{ thresholds.x }}")),
		rule("guarded", "tick", "priority = -1", "context.tool.result_bytes > thresholds.x and len(context.s) > 0", notify("guarded")),
		rule("vm", "tick", "priority = -2", "context.tool.result_bytes + 0 > thresholds.x", notify("vm")))
	other := set.withThresholds(map[string]any{"x": 10.0})
	ctx := func(n float64) map[string]any {
		return map[string]any{"n": n, "s": "s", "tool": map[string]any{"name": "t", "result_bytes": n}}
	}
	for _, tc := range []struct {
		name   string
		set    *Set
		n      float64
		fired  []string
		notice string
	}{
		{"loaded, 6 > 5", set, 6, []string{"over", "guarded", "vm"}, "over 5"},
		{"loaded, 5 > 5", set, 5, []string{}, ""},
		{"rebound, 6 > 10", other, 6, []string{}, ""},
		{"rebound, 11 > 10", other, 11, []string{"over", "guarded", "vm"}, "over 10"},
	} {
		for _, trace := range []bool{false, true} {
			out := fire(tc.set, &recHost{}, "tick", ctx(tc.n), trace)
			if got := firedIDs(out); !equal(got, tc.fired) {
				t.Errorf("%s, trace %v: fired %q, want %q", tc.name, trace, got, tc.fired)
			}
			if tc.notice != "" && (len(out.Notices) == 0 || out.Notices[0].Message != tc.notice) {
				t.Errorf("%s: notices %+v", tc.name, out.Notices)
			}
		}
		facts := ToolFacts{Name: "t", Done: true, ResultBytes: tc.n}
		if got := tc.set.Trigger("tick").RuledOut(&facts); got && len(tc.fired) > 0 {
			t.Errorf("%s: ruled out, but rules fire", tc.name)
		}
	}
	if set.thresholds["x"] != 5.0 || set.Rules()[0].folded.terms[0].right.value != Number(5) {
		t.Errorf("the loaded set changed: %v", set.thresholds)
	}
	// Firing both at once shares nothing that is written (go test -race).
	done := make(chan bool)
	go func() {
		for i := 0; i < 100; i++ {
			set.Fire(context.Background(), Event{Name: "tick", Context: MapSource(ctx(6))}, benchHost{})
		}
		done <- true
	}()
	for i := 0; i < 100; i++ {
		set.withThresholds(map[string]any{"x": float64(i)}).Fire(context.Background(), Event{Name: "tick", Context: MapSource(ctx(6))}, benchHost{})
	}
	<-done
}
