package rules

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
)

// indexedRules are rules on one trigger, most keyed on context.group, with
// every way a key can be decided, undecided or not a key at all.
func indexedRules() []string {
	var texts []string
	add := func(id, extra, cond string) {
		texts = append(texts, rule(id, "on_x", extra, cond, notify(id+" {{ context.level }}")))
	}
	for g := 0; g < 4; g++ {
		add(fmt.Sprintf("simple%d", g), "", fmt.Sprintf("context.group == %d and context.level >= 0", g))
		add(fmt.Sprintf("guarded%d", g), "", fmt.Sprintf("len(context.tags) > 0 and context.group == %d", g))
		add(fmt.Sprintf("literalLeft%d", g), "priority = 5", fmt.Sprintf("%d == context.group", g))
	}
	// A guard whose condition fails in expr when it is tried.
	add("erring", "", "context.group == 2 and context.missing.x > 1")
	// Keys of other kinds on the same path.
	add("str", "", `context.group == "2"`)
	add("bool", "", "context.group == true")
	// Not keys: the key is not the first term, or not equality, or in an or.
	add("second", "", "context.level >= 0 and context.group == 1")
	add("notEq", "", "context.group != 1")
	add("either", "", "context.group == 1 or context.level > 100")
	add("always", "priority = 1", "")
	// A threshold folded into a key, and one that is not there.
	add("threshold", "", "context.group == thresholds.g and context.level > 0")
	add("noThreshold", "", "context.group == thresholds.absent")
	// Stop after a keyed rule of high priority.
	add("stopper", "priority = 50\nstop = true", "context.group == 3 and context.level == 99")
	return texts
}

// TestIndex_sameAsTryingEveryRule fires events of every kind of key value
// through a set with its index and the same set without it: the same
// rules fire, in the same order, with the same notices and the same log.
func TestIndex_sameAsTryingEveryRule(t *testing.T) {
	thresholds := map[string]any{"g": 2.0}
	indexed := mustLoad(t, thresholds, indexedRules()...)
	plain := mustLoad(t, thresholds, indexedRules()...)
	if indexed.triggers["on_x"].index == nil {
		t.Fatal("on_x is not indexed")
	}
	for _, tr := range plain.triggers {
		tr.index = nil
	}
	values := []any{0.0, 1.0, 2.0, 3.0, -0.0, 7.0, "2", "x", true, false, nil, []any{1.0},
		map[string]any{"a": 1.0}, math.NaN(), math.Inf(1), "absent"}
	for _, group := range values {
		for _, level := range []any{7.0, 99.0, "high", nil} {
			c := map[string]any{"level": level, "tags": []any{"a"}}
			if group != "absent" {
				c["group"] = group
			}
			name := fmt.Sprintf("group=%v level=%v", group, level)
			hi, hp := &recHost{t: t}, &recHost{t: t}
			oi, op := fire(indexed, hi, "on_x", c, false), fire(plain, hp, "on_x", c, false)
			if !reflect.DeepEqual(firedIDs(oi), firedIDs(op)) || !reflect.DeepEqual(messages(oi), messages(op)) {
				t.Errorf("%s: fired %v %v with the index, %v %v without", name, firedIDs(oi), messages(oi), firedIDs(op), messages(op))
			}
			if !reflect.DeepEqual(hi.logs, hp.logs) {
				t.Errorf("%s: logged %v with the index, %v without", name, hi.logs, hp.logs)
			}
		}
	}
}

// TestIndex_leavesOutDecidedRules: a value of the key's kind leaves out
// the rules keyed on another value of that kind, and only those.
func TestIndex_leavesOutDecidedRules(t *testing.T) {
	set := mustLoad(t, map[string]any{"g": 2.0}, indexedRules()...)
	tr := set.triggers["on_x"]
	ids := func(v Value) (out []string) {
		rest, keyed := tr.index.candidates(v)
		for _, at := range append(append([]int32(nil), rest...), keyed...) {
			out = append(out, tr.rules[at].ID)
		}
		return out
	}
	got := map[string]bool{}
	for _, id := range ids(Number(2)) {
		got[id] = true
	}
	for _, want := range []string{"simple2", "guarded2", "literalLeft2", "erring", "threshold", "str", "bool",
		"second", "notEq", "either", "always", "noThreshold"} {
		if !got[want] {
			t.Errorf("group 2 leaves out %s", want)
		}
	}
	for _, out := range []string{"simple1", "guarded3", "literalLeft0", "stopper"} {
		if got[out] {
			t.Errorf("group 2 tries %s", out)
		}
	}
	if n := len(ids(String("x"))); n != len(tr.rules)-1 { // only "str" is keyed on a string, not "x"
		t.Errorf("group \"x\": %d candidates of %d, want all but one", n, len(tr.rules))
	}
}

// TestIndex_notWithTraceOrTooFewKeys: too few keyed rules make no index;
// with trace, every rule is tried and explained.
func TestIndex_notWithTraceOrTooFewKeys(t *testing.T) {
	few := mustLoad(t, nil, rule("a", "on_x", "", "context.group == 1", notify("a")),
		rule("b", "on_x", "", "context.group == 2", notify("b")))
	if few.triggers["on_x"].index != nil {
		t.Error("two keyed rules are indexed")
	}
	set := mustLoad(t, map[string]any{"g": 2.0}, indexedRules()...)
	out := fire(set, &recHost{t: t}, "on_x", map[string]any{"group": 1.0, "level": 7.0, "tags": []any{"a"}}, true)
	if len(out.Trace) != len(set.triggers["on_x"].rules) {
		t.Errorf("trace explains %d rules of %d", len(out.Trace), len(set.triggers["on_x"].rules))
	}
}

// TestRelease_reusedClean: an outcome released after use makes the next
// emission's, which holds nothing of the first (fewer rules, other
// messages, no stale record or notice), as an outcome made afresh.
func TestRelease_reusedClean(t *testing.T) {
	// A failed action's record has an error, which the next emission's
	// records, made where it was, must not show.
	texts := append(indexedRules(), rule("failing", "on_x", "", `context.group == "x"`, "type = \"call_tool\"\ntool = \"t\""))
	set := mustLoad(t, map[string]any{"g": 2.0}, texts...)
	fresh := mustLoad(t, map[string]any{"g": 2.0}, texts...)
	events := []map[string]any{
		{"group": 2.0, "level": 7.0, "tags": []any{"a"}},
		{"group": 1.0, "level": "high", "tags": []any{}},
		{"group": 3.0, "level": 99.0, "tags": []any{"a"}},
		{"group": "x"},
	}
	reused := false
	var last *Fired
	for i := 0; i < 40; i++ {
		c := events[i%len(events)]
		got := fire(set, &recHost{t: t, toolErr: errors.New("no such tool")}, "on_x", c, false)
		if len(got.Fired) > 0 && last != nil && &got.Fired[0] == last {
			reused = true
		}
		gotJSON := string(got.AppendJSON(nil, false))
		want := fire(fresh, &recHost{t: t, toolErr: errors.New("no such tool")}, "on_x", c, false)
		if wantJSON := string(want.AppendJSON(nil, false)); gotJSON != wantJSON {
			t.Fatalf("emission %d: %s\nwant %s", i, gotJSON, wantJSON)
		}
		last = nil
		if len(got.Fired) > 0 {
			last = &got.Fired[0]
		}
		got.Release()
	}
	if !reused {
		t.Error("no released outcome was reused")
	}
	noOutcome.Release() // shared: left alone
	(&Outcome{}).Release()
	if len(noOutcome.Fired) != 0 || noOutcome.Fired == nil || noOutcome.Notices == nil {
		t.Errorf("noOutcome changed: %+v", noOutcome)
	}
}

// nsSource is a context whose state differs by namespace, as a plugin's
// rules see their own.
type nsSource struct{ MapSource }

func (s nsSource) ContextIn(namespace string) map[string]any {
	c := map[string]any{}
	for k, v := range s.MapSource {
		c[k] = v
	}
	c["state"] = map[string]any{"owner": namespace}
	return c
}

// TestTemplates_pathsReadPerNamespace: template paths are read once per
// emission, and again for the rules of each plugin, whose context differs.
func TestTemplates_pathsReadPerNamespace(t *testing.T) {
	msg := notify("{{ context.state.owner }} {{ context.level }}")
	set, err := Load([]Source{
		{Name: "a.toml", Text: []byte(rule("a1", "on_x", "priority = 3", "", msg)), Namespace: "pa"},
		{Name: "b.toml", Text: []byte(rule("b1", "on_x", "priority = 2", "", msg)), Namespace: "pb"},
		{Name: "c.toml", Text: []byte(rule("c1", "on_x", "priority = 1", "", msg)), Namespace: "pa"},
		{Name: "d.toml", Text: []byte(rule("d1", "on_x", "", "", msg))},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // pooled runners hold nothing of the last emission
		c := nsSource{MapSource{"level": float64(i), "state": map[string]any{"owner": "none"}}}
		out := set.Fire(context.Background(), Event{Name: "on_x", Session: "s", Context: c}, &recHost{t: t})
		want := []string{fmt.Sprintf("pa %d", i), fmt.Sprintf("pb %d", i), fmt.Sprintf("pa %d", i), fmt.Sprintf("none %d", i)}
		if got := messages(out); !reflect.DeepEqual(got, want) {
			t.Errorf("emission %d: %q, want %q", i, got, want)
		}
		out.Release()
	}
}
