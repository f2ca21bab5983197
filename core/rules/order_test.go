package rules

import (
	"context"
	"testing"
)

// A rule comes before the rules that the events it emits fire, in Fired
// and in the trace; a skipped rule keeps its trace entry but is not fired.
func TestChainedRulesComeAfterTheirEmitter(t *testing.T) {
	set := mustLoad(t, nil,
		rule("parent", "first", "priority = 10", "", notify("p"), "type = \"emit_event\"\nevent = \"second\""),
		rule("broken", "first", "priority = 5", "", notify("{{ context.nothing.here }}")),
		rule("last", "first", "priority = 1", "", notify("l")),
		rule("child", "second", "", "", notify("c")),
	)
	h := &recHost{t: t, set: set}
	out := set.Fire(context.Background(), Event{Name: "first", Context: MapSource{}, Trace: true}, h)
	var fired, traced []string
	for _, f := range out.Fired {
		fired = append(fired, f.Rule)
	}
	for _, e := range out.Trace {
		traced = append(traced, e.Rule)
	}
	if want := []string{"parent", "child", "last"}; !equalStrings(fired, want) {
		t.Errorf("fired %q, want %q", fired, want)
	}
	if want := []string{"parent", "child", "broken", "last"}; !equalStrings(traced, want) {
		t.Errorf("traced %q, want %q", traced, want)
	}
	if out.Trace[2].Skipped == "" || len(out.Trace[0].Actions) != 2 {
		t.Errorf("trace entries: %+v", out.Trace)
	}
}
