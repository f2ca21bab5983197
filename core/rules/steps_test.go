package rules

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Predicates nested over the same data run no more than maxSteps steps (or
// stop sooner on the memory budget, when they build ranges as they go):
// without the budget, all(a, all(a, all(a, true))) on 5,000 elements runs
// for about half an hour without allocating.
func TestIterationBudget(t *testing.T) {
	for _, cond := range []string{
		"let a = 1..5000; all(a, all(a, all(a, true)))",
		"all([1,2,3,4,5,6,7,8,9,10], all(1..9000, all(1..9000, # > 0)))",
		"any(context.items, any(context.items, any(context.items, # == -1)))",
		"count(1..5000, count(1..5000, true) > 0) > 0",
	} {
		set, err := Load([]Source{{Name: "s.toml", Text: []byte("[rule]\nid = \"s\"\ntrigger = \"e\"\n[condition]\nexpression = '" + cond + "'\n[action]\ntype = \"log\"\nmessage = \"m\"\n")}}, nil)
		if err != nil {
			t.Fatalf("%s: %v", cond, err)
		}
		items := make([]any, 3000)
		for i := range items {
			items[i] = float64(i)
		}
		start := time.Now()
		out := set.Fire(context.Background(), Event{Name: "e", Context: MapSource{"items": items}, Trace: true}, benchHost{})
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: took %v", cond, took)
		}
		if len(out.Fired) != 0 || !strings.Contains(out.Trace[0].Error, "budget exceeded") {
			t.Errorf("%s: want a budget error, got %+v", cond, out.Trace[0])
		}
	}
	// Ordinary predicates are unaffected.
	set, err := Load([]Source{{Name: "ok.toml", Text: []byte("[rule]\nid = \"ok\"\ntrigger = \"e\"\n[condition]\nexpression = 'all(context.items, # >= 0) and count(context.items, # > 10) == 2 and map(context.items, # * 2)[2] == 4'\n[action]\ntype = \"log\"\nmessage = \"m\"\n")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := set.Fire(context.Background(), Event{Name: "e", Context: MapSource{"items": []any{1.0, 5.0, 2.0, 11.0, 12.0}}, Trace: true}, benchHost{})
	if len(out.Fired) != 1 {
		t.Errorf("ordinary predicates: %+v", out.Trace)
	}
}
