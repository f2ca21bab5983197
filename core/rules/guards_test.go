package rules

import (
	"context"
	"reflect"
	"testing"
)

func TestTopLevelAnds(t *testing.T) {
	for _, c := range []struct {
		src    string
		pieces []string // nil: not splittable
	}{
		{`a == 1 and b == 2`, []string{"a == 1 ", " b == 2"}},
		{`a == 1 && len(b) > 2`, []string{"a == 1 ", " len(b) > 2"}},
		{`x`, []string{"x"}},
		{`f(a and b == 2 and c)`, []string{"f(a and b == 2 and c)"}},
		{`a == "x and y" and b`, []string{`a == "x and y" `, " b"}},
		{`a == 'it\'s and' and b`, []string{`a == 'it\'s and' `, " b"}},
		{"a == `raw and` and b", []string{"a == `raw and` ", " b"}},
		{`brand == 1 and android`, []string{"brand == 1 ", " android"}},
		{`a?.b ?? 0 > 1 and c`, []string{"a?.b ?? 0 > 1 ", " c"}},
		{`a and b or c`, nil},
		{`a and (b or c)`, []string{"a ", " (b or c)"}},
		{`a || b && c`, nil},
		{`a and b ? c : d`, nil},
		{`a and b | upper()`, nil},
		{`let x = 1; x > 0 and y`, nil},
		{`a and (b`, nil},
		{`a and b)`, nil},
		{`a == "unterminated and b`, nil},
	} {
		got, ok := topLevelAnds(c.src)
		if !ok {
			got = nil
		}
		if !reflect.DeepEqual(got, c.pieces) {
			t.Errorf("topLevelAnds(%q) = %q, want %q", c.src, got, c.pieces)
		}
	}
}

// A rule with guards matches exactly when expr says so, whenever expr gives
// a verdict without error.
func TestGuardsAgreeWithExpr(t *testing.T) {
	conds := []string{
		`context.kind == "probe" and len(context.tags) > 1`,
		`len(context.tags) > 0 and context.group == 3 and context.level >= thresholds.min`,
		`context.group != 3 && any(context.tags, # == "b")`,
		`f(1) == 1 and context.group == 3`, // f is unknown: a load error, skipped below
	}
	contexts := []map[string]any{
		{"kind": "probe", "group": 3.0, "level": 7.0, "tags": []any{"a", "b"}},
		{"kind": "probe", "group": 2.0, "level": 1.0, "tags": []any{}},
		{"kind": "other", "group": 3.0, "level": 9.0, "tags": []any{"b"}},
		{"kind": "probe", "group": "3", "level": 9.0, "tags": []any{"a", "b"}},
	}
	th := map[string]any{"min": 5.0}
	for _, src := range conds {
		set, err := Load([]Source{{Name: "g.toml", Text: []byte("[rule]\nid = \"g\"\ntrigger = \"e\"\n[condition]\nexpression = '" + src + "'\n[action]\ntype = \"log\"\nmessage = \"m\"\n")}}, th)
		if err != nil {
			continue
		}
		r := set.Rules()[0]
		if r.simple != nil || r.guards == nil {
			t.Fatalf("%s: want guards, not a simple form", src)
		}
		for i, ctx := range contexts {
			fast := set.Fire(context.Background(), Event{Name: "e", Context: MapSource(ctx)}, benchHost{})
			traced := set.Fire(context.Background(), Event{Name: "e", Context: MapSource(ctx), Trace: true}, benchHost{})
			if traced.Trace[0].Error != "" {
				continue // expr fails: guards may say "not matched" earlier
			}
			if len(fast.Fired) != len(traced.Fired) {
				t.Errorf("%s, context %d: with guards fired %d, expr alone %d", src, i, len(fast.Fired), len(traced.Fired))
			}
		}
	}
}
