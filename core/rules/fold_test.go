package rules

import (
	"context"
	"testing"
)

// Simple conditions read thresholds folded in at load only when Fire gets
// the very map Load was given; rule tests pass their own thresholds, which
// must win.
func TestFoldedThresholdsOnlyForTheLoadMap(t *testing.T) {
	loadTh := map[string]any{"x": float64(5)}
	set, err := Load([]Source{{Name: "f.toml", Text: []byte(`[rule]
id = "over"
trigger = "tick"
[condition]
expression = "context.n > thresholds.x and context.n < 100"
[action]
type = "log"
message = "over"
`)}}, loadTh)
	if err != nil {
		t.Fatal(err)
	}
	r := set.Rules()[0]
	if r.simple == nil || r.folded == nil || r.folded == r.simple {
		t.Fatalf("want a simple form with thresholds folded in: simple %v folded %v", r.simple, r.folded)
	}
	fire := func(th map[string]any, n float64) bool {
		out := set.Fire(context.Background(), Event{Name: "tick", Context: MapSource{"n": n}}, th, benchHost{})
		return len(out.Fired) == 1
	}
	if !fire(loadTh, 6) || fire(loadTh, 5) {
		t.Error("with the load map: 6 > 5 should fire, 5 > 5 should not")
	}
	other := map[string]any{"x": float64(10)}
	if fire(other, 6) || !fire(other, 11) {
		t.Error("with another map, its threshold (10) must be used")
	}
	if fire(map[string]any{}, 6) {
		t.Error("a missing threshold must leave the decision to expr (an error: no match)")
	}
}
