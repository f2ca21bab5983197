package rules

import (
	"fmt"
	"reflect"
	"testing"
)

// TestCounted_sameAsExpr: conditions simple but for len() of a context
// path are decided without expr's VM whenever they can be, and then say
// what expr says; otherwise expr decides (and fails where it fails), so
// the verdicts, the trace's values and errors and the log are those of a
// set with no such form.
func TestCounted_sameAsExpr(t *testing.T) {
	conds := []string{
		"len(context.tags) > 0",
		"len(context.tags) > 0 and context.group == 3",
		"context.group == 3 and len(context.tags) >= 2",
		"len(context.tags) == 0 or context.group == 3",
		"len(context.a.b) != thresholds.n",
		"len(context.tags) < len(context.name)",
		"len(context.name) == 4",
	}
	var texts []string
	for i, c := range conds {
		texts = append(texts, rule(fmt.Sprintf("c%d", i), "on_x", "", c, notify(fmt.Sprintf("c%d", i))))
	}
	thresholds := map[string]any{"n": 2.0}
	counted := mustLoad(t, thresholds, texts...)
	plain := mustLoad(t, thresholds, texts...)
	n := 0
	for _, r := range plain.all {
		if r.foldedCounted != nil {
			n++
		}
		r.counted, r.foldedCounted = nil, nil
	}
	if n != len(conds) {
		t.Fatalf("%d of %d conditions have a counted form", n, len(conds))
	}
	values := []any{[]any{}, []any{"a"}, []any{"a", "b"}, map[string]any{}, map[string]any{"x": 1.0, "y": 2.0},
		"", "éèà!", "abcd", 3.0, true, nil, "absent"}
	for _, v := range values {
		for _, group := range []any{3.0, 4.0} {
			c := map[string]any{"group": group, "a": map[string]any{"b": v}}
			if v != "absent" {
				c["tags"], c["name"] = v, v
			}
			for _, trace := range []bool{false, true} {
				hc, hp := &recHost{t: t}, &recHost{t: t}
				oc, op := fire(counted, hc, "on_x", c, trace), fire(plain, hp, "on_x", c, trace)
				name := fmt.Sprintf("%#v group %v trace %v", v, group, trace)
				if !reflect.DeepEqual(firedIDs(oc), firedIDs(op)) {
					t.Errorf("%s: fired %v, expr fires %v", name, firedIDs(oc), firedIDs(op))
				}
				if !reflect.DeepEqual(hc.logs, hp.logs) {
					t.Errorf("%s: logged %v, expr logs %v", name, hc.logs, hp.logs)
				}
				if len(oc.Trace) != len(op.Trace) {
					t.Fatalf("%s: %d trace entries, expr's %d", name, len(oc.Trace), len(op.Trace))
				}
				for i := range oc.Trace {
					a, b := oc.Trace[i], op.Trace[i]
					a.DurationUS, b.DurationUS = 0, 0
					if !reflect.DeepEqual(a, b) {
						t.Errorf("%s: trace %+v, expr's %+v", name, a, b)
					}
				}
			}
		}
	}
}

// TestCounted_onlyContextPaths: len() of anything but a plain context
// path is left to expr.
func TestCounted_onlyContextPaths(t *testing.T) {
	for _, c := range []string{"len(thresholds.x) > 0", "len(context.tags[0]) > 0", "len(\"ab\") > 1",
		"len( context.tags ) > 0", "len(context) > 0", "count(context.tags) > 0"} {
		if parseCounted(c) != nil {
			t.Errorf("%s has a counted form", c)
		}
	}
	if f := parseCounted("len(context.tags) > 0 and context.x == 1"); f == nil || !f.terms[0].left.count {
		t.Errorf("no counted form: %+v", f)
	}
}
