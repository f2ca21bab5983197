package rules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/clara-lib/clara/core/logging"
)

func TestFire_emptyOutcome(t *testing.T) {
	check := func(name string, out *Outcome) {
		t.Helper()
		if out == nil || out.Fired == nil || out.Notices == nil || len(out.Fired) != 0 || len(out.Notices) != 0 || out.Denied != nil || out.Trace != nil {
			t.Fatalf("%s: outcome %+v, want empty with non-nil slices", name, out)
		}
		b, err := json.Marshal(out)
		if err != nil || string(b) != `{"fired":[],"notices":[],"denied":null}` {
			t.Errorf("%s: JSON %s, %v", name, b, err)
		}
	}
	var none *Set
	check("nil set", none.Fire(context.Background(), Event{Name: "on_turn_start", Trace: true}, nil))
	if none.Rules() != nil || none.Watches("on_turn_start") || !reflect.DeepEqual(none.NeedsFor("on_turn_start"), Needs{}) {
		t.Error("a nil set has rules")
	}

	set := mustLoad(t, nil, rule("a", "on_turn_start", "", "context.n > 1", notify("x")))
	h := &recHost{}
	check("no rule of the event", fire(set, h, "on_turn_end", map[string]any{"n": 5.0}, true))
	check("nothing matched", fire(set, h, "on_turn_start", map[string]any{"n": 0.0}, false))
	empty := mustLoad(t, nil)
	check("empty set", fire(empty, h, "on_turn_start", nil, true))
	if len(h.applied) != 0 || len(h.logs) != 0 {
		t.Errorf("host used: %v %v", h.applied, h.logs)
	}
	// The empty outcome is one shared value, never written to: callers
	// must not modify it.
	if out := fire(set, h, "on_turn_end", nil, false); out != noOutcome || len(noOutcome.Fired) != 0 || len(noOutcome.Notices) != 0 || noOutcome.Denied != nil || noOutcome.Trace != nil {
		t.Errorf("shared empty outcome %p %+v", out, noOutcome)
	}
}

func TestFire_priorityAndLoadOrder(t *testing.T) {
	set := mustLoad(t, nil,
		rule("low", "on_x", "priority = 10", "", notify("low"))+"\n",
		`[[rules]]
id = "high1"
trigger = "on_x"
priority = 100
[[rules.actions]]
type = "notify_self"
message = "high1"

[[rules]]
id = "other-trigger"
trigger = "on_y"
priority = 1000
[[rules.actions]]
type = "notify_self"
message = "other"

[[rules]]
id = "high2"
trigger = "on_x"
priority = 100
[[rules.actions]]
type = "notify_self"
message = "high2"
`,
		rule("neg", "on_x", "priority = -5", "", notify("neg")),
		rule("mid", "on_x", "priority = 50", "", notify("mid")),
		rule("high3", "on_x", "priority = 100", "", notify("high3")),
		rule("zero", "on_x", "", "", notify("zero")),
	)
	h := &recHost{}
	out := fire(set, h, "on_x", nil, true)
	want := []string{"high1", "high2", "high3", "mid", "low", "zero", "neg"}
	if got := firedIDs(out); !equal(got, want) {
		t.Errorf("fired %q, want %q", got, want)
	}
	if got := messages(out); !equal(got, want) {
		t.Errorf("notices %q, want %q", got, want)
	}
	var traced []string
	for _, e := range out.Trace {
		traced = append(traced, e.Rule)
	}
	if !equal(traced, want) {
		t.Errorf("trace %q, want %q", traced, want)
	}
	// Rules() keeps load order.
	var loaded []string
	for _, r := range set.Rules() {
		loaded = append(loaded, r.ID)
	}
	if !equal(loaded, []string{"low", "high1", "other-trigger", "high2", "neg", "mid", "high3", "zero"}) {
		t.Errorf("load order %q", loaded)
	}
}

func TestFire_stop(t *testing.T) {
	set := mustLoad(t, nil,
		rule("a", "on_x", "priority = 30", "", notify("a")),
		rule("b", "on_x", "priority = 20\nstop = true", "context.stop == true", notify("b {{ context.m.n }}")),
		rule("c", "on_x", "priority = 10", "", notify("c")),
	)
	tests := []struct {
		name  string
		ctx   map[string]any
		fired []string
		trace []string
	}{
		{"stop rule fires", map[string]any{"stop": true, "m": map[string]any{"n": 1.0}}, []string{"a", "b"}, []string{"a", "b"}},
		{"stop rule does not match", map[string]any{"stop": false, "m": map[string]any{"n": 1.0}}, []string{"a", "c"}, []string{"a", "b", "c"}},
		{"stop rule's actions skipped", map[string]any{"stop": true}, []string{"a", "c"}, []string{"a", "b", "c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, trace := range []bool{false, true} {
				out := fire(set, &recHost{}, "on_x", tc.ctx, trace)
				if got := firedIDs(out); !equal(got, tc.fired) {
					t.Errorf("trace=%v: fired %q, want %q", trace, got, tc.fired)
				}
				if !trace {
					continue
				}
				var traced []string
				for _, e := range out.Trace {
					traced = append(traced, e.Rule)
				}
				if !equal(traced, tc.trace) {
					t.Errorf("trace %q, want %q", traced, tc.trace)
				}
			}
		})
	}
	// A stopping rule stops only rules below it in its own emission.
	set = mustLoad(t, nil,
		rule("s", "on_x", "priority = 5\nstop = true", "", notify("s")),
		rule("t", "on_x", "priority = 5", "", notify("t")),
	)
	if got := firedIDs(fire(set, &recHost{}, "on_x", nil, false)); !equal(got, []string{"s"}) {
		t.Errorf("equal priority after a stop rule: fired %q", got)
	}
}

func TestFire_allOrNone(t *testing.T) {
	set := mustLoad(t, nil,
		rule("two", "on_tool_call", "priority = 10", "",
			"type = \"deny\"\nreason = \"no\"",
			notify("first"),
			"type = \"set_state\"\nkey = \"k\"\nvalue = 1",
			"type = \"emit_event\"\nevent = \"on_child\"",
			"type = \"call_tool\"\ntool = \"t\"",
			notify("second {{ context.missing.field }}"),
		),
		rule("other", "on_tool_call", "", "", "type = \"set_state\"\nkey = \"o\"\nvalue = \"{{ context.v }}\""),
		rule("child", "on_child", "", "", notify("child")),
	)
	for _, trace := range []bool{false, true} {
		h := &recHost{}
		out := fire(set, h, "on_tool_call", map[string]any{"v": 2.0}, trace)
		if got := firedIDs(out); !equal(got, []string{"other"}) {
			t.Errorf("fired %q", got)
		}
		if len(out.Notices) != 0 {
			t.Errorf("a skipped rule acted: notices %v", out.Notices)
		}
		// Its deny did not apply; but a rule on on_tool_call that could not
		// be evaluated to the end refuses the call, with why.
		if d := out.Denied; d == nil || d.Rule != "two" || !strings.HasPrefix(d.Reason, "it matched, but its actions could not be prepared, and a rule on on_tool_call that cannot tell refuses the call: action 6 (notify_self): ") {
			t.Errorf("denied %+v", d)
		}
		if len(h.chained) != 0 || len(h.tools) != 0 {
			t.Errorf("a skipped rule chained %v or called %v", h.chained, h.tools)
		}
		if len(h.applied) != 1 || len(h.applied[0]) != 1 || h.applied[0][0].Key != "o" || string(h.applied[0][0].Value) != "2" {
			t.Errorf("state writes %+v, want only o = 2", h.applied)
		}
		if !h.logged(logging.Warn, `rule "two"`) || !h.logged(logging.Warn, "skipped") {
			t.Errorf("skip not logged: %v", h.logs)
		}
		if !trace {
			if out.Trace != nil {
				t.Errorf("trace without trace: %v", out.Trace)
			}
			continue
		}
		if len(out.Trace) != 2 {
			t.Fatalf("trace %+v", out.Trace)
		}
		e := out.Trace[0]
		if e.Rule != "two" || !e.Matched || e.Actions != nil || e.Error != "" ||
			!strings.HasPrefix(e.Skipped, "action 6 (notify_self): ") || !strings.Contains(e.Skipped, "cannot fetch field") {
			t.Errorf("skipped entry %+v", e)
		}
	}
}

// chainHost fires chained events on the same set, as the engine does;
// recHost.Chain does that.
func TestFire_chainDepth(t *testing.T) {
	set := mustLoad(t, nil, rule("loop", "loop.event", "", "",
		notify("depth {{ context.event?.depth ?? 0 }}"),
		"type = \"emit_event\"\nevent = \"loop.event\"\npayload = { n = \"{{ (context.n ?? 0) + 1 }}\" }"))
	for _, trace := range []bool{false, true} {
		h := &recHost{set: set}
		out := fire(set, h, "loop.event", map[string]any{}, trace)
		var want []string
		for d := 0; d < MaxChainDepth; d++ {
			want = append(want, fmt.Sprintf("depth %d", d))
		}
		if got := messages(out); !equal(got, want) {
			t.Fatalf("notices %q, want %q", got, want)
		}
		if len(out.Fired) != MaxChainDepth {
			t.Fatalf("fired %d rules, want %d", len(out.Fired), MaxChainDepth)
		}
		if len(h.chained) != MaxChainDepth-1 {
			t.Fatalf("%d chained emissions, want %d", len(h.chained), MaxChainDepth-1)
		}
		for i, c := range h.chained {
			if c.depth != i+1 || c.event != "loop.event" || c.session != "s1" || c.trace != trace || text(c.payload["n"]) != fmt.Sprint(i+1) {
				t.Errorf("chain %d: %+v", i, c)
			}
		}
		errs := 0
		for _, f := range out.Fired {
			for _, a := range f.Actions {
				if a.Type != ActEmit {
					continue
				}
				if e := a.Error; e != "" {
					errs++
					if e != "emit_event: chain deeper than 8 events" {
						t.Errorf("error %q", e)
					}
				}
			}
		}
		if errs != 1 {
			t.Errorf("%d depth errors, want 1: %+v", errs, out.Fired)
		}
		if !h.logged(logging.Warn, "chain deeper than 8") {
			t.Errorf("depth error not logged")
		}
		if trace && len(out.Trace) != MaxChainDepth {
			t.Errorf("%d trace entries, want %d", len(out.Trace), MaxChainDepth)
		}
	}
	// An event emitted at the last depth allowed does not chain further.
	h := &recHost{set: set}
	out := set.Fire(context.Background(), Event{Name: "loop.event", Session: "s", Depth: MaxChainDepth - 1, Context: MapSource{}}, h)
	if len(out.Fired) != 1 || len(h.chained) != 0 {
		t.Errorf("at depth %d: fired %v, chained %v", MaxChainDepth-1, out.Fired, h.chained)
	}
}

func TestFire_chainResults(t *testing.T) {
	set := mustLoad(t, nil,
		rule("parent", "on_x", "", "",
			notify("parent"),
			`type = "emit_event"
event = "on_child"
payload = { n = "{{ context.x + 1 }}", s = "x={{ context.x }}", list = ["{{ context.x }}", 2] }`),
		rule("child", "on_child", "", "context.n == 4", notify("child {{ context.s }} {{ context.list | json }}")),
		rule("grandchild-emitter", "on_child", "priority = -1", "", "type = \"emit_event\"\nevent = \"on_grandchild\""),
		rule("grandchild", "on_grandchild", "", "", notify("grandchild")),
	)
	h := &recHost{set: set}
	out := fire(set, h, "on_x", map[string]any{"x": 3.0}, true)
	if got := messages(out); !equal(got, []string{"parent", "child x=3 [3,2]", "grandchild"}) {
		t.Errorf("notices %q", got)
	}
	events := map[string]string{}
	for _, f := range out.Fired {
		events[f.Rule] = f.Event
	}
	want := map[string]string{"parent": "", "child": "on_child", "grandchild-emitter": "on_child", "grandchild": "on_grandchild"}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("fired events %v, want %v", events, want)
	}
	if len(h.chained) != 2 || !reflect.DeepEqual(h.chained[0].payload, map[string]any{"n": 4.0, "s": "x=3", "list": []any{3.0, 2.0}}) || h.chained[1].payload != nil {
		t.Errorf("chained %+v", h.chained)
	}
	for _, f := range out.Fired {
		if f.Rule != "parent" {
			continue
		}
		if f.Actions[1].Fired != 3 || f.Actions[1].Event != "on_child" {
			t.Errorf("emit record %v", f.Actions[1])
		}
	}
	for _, n := range out.Notices {
		wantEvent := map[string]string{"parent": "on_x", "child": "on_child", "grandchild": "on_grandchild"}[n.Rule]
		if n.Event != wantEvent {
			t.Errorf("notice %+v: event %q", n, wantEvent)
		}
	}
	// Trace entries of the chained emissions are merged into the parent's.
	seen := map[string]string{}
	for _, e := range out.Trace {
		seen[e.Rule] = e.Event
	}
	if !reflect.DeepEqual(seen, map[string]string{"parent": "on_x", "child": "on_child", "grandchild-emitter": "on_child", "grandchild": "on_grandchild"}) {
		t.Errorf("trace %v", seen)
	}
}

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

func TestFire_deny(t *testing.T) {
	set := mustLoad(t, nil,
		rule("d1", "on_tool_call", "priority = 10", "context.tool.name == 'rm'", "type = \"deny\"\nreason = \"{{ context.tool.name | upper }} is not allowed\""),
		rule("d2", "on_tool_call", "priority = 5", "", "type = \"deny\"\nreason = \"second\""),
		rule("d0", "on_tool_call", "priority = 20", "context.tool.name == 'never'", "type = \"deny\"\nreason = \"never\""),
	)
	out := fire(set, &recHost{}, "on_tool_call", map[string]any{"tool": map[string]any{"name": "rm"}}, false)
	if out.Denied == nil || *out.Denied != (Denial{Rule: "d1", Reason: "RM is not allowed"}) {
		t.Errorf("denied %+v", out.Denied)
	}
	if got := firedIDs(out); !equal(got, []string{"d1", "d2"}) {
		t.Errorf("fired %q", got)
	}
	if r := out.Fired[1].Actions[0]; r.Type != "deny" || r.Reason != "second" {
		t.Errorf("second deny record %v", r)
	}
	out = fire(set, &recHost{}, "on_tool_call", map[string]any{"tool": map[string]any{"name": "ls"}}, false)
	if out.Denied == nil || out.Denied.Rule != "d2" || out.Denied.Reason != "second" {
		t.Errorf("denied %+v", out.Denied)
	}
	b, _ := json.Marshal(out)
	if !strings.Contains(string(b), `"denied":{"rule":"d2","reason":"second"}`) {
		t.Errorf("JSON %s", b)
	}
}

func TestFire_templates(t *testing.T) {
	ctx := map[string]any{
		"u": 0.85, "small": 0.123, "half": 2.5, "neg": -2.5, "low": 2.4, "three": 3.0, "int": 7, "int64": int64(8),
		"s": "MiXed", "t": true, "f": false, "list": []any{1.0, "x"}, "obj": map[string]any{"b": 1.0, "a": []any{1.0, "x"}},
		"nested": map[string]any{"name": "n"},
	}
	tests := []struct {
		tmpl, want, skip string
	}{
		{"plain text", "plain text", ""},
		{"{{ context.u | percent }}", "85%", ""},
		{"{{ context.small | percent }}", "12%", ""},
		{"{{ 1 | percent }}", "100%", ""},
		{"{{ context.half | round }}", "3", ""},
		{"{{ context.neg | round }}", "-3", ""},
		{"{{ context.low | round }}", "2", ""},
		{"{{ context.int | round }}", "7", ""},
		{"{{ context.s | upper }}", "MIXED", ""},
		{"{{ context.s | lower }}", "mixed", ""},
		{"{{ context.three | upper }}", "3", ""},
		{"{{ context.obj | json }}", `{"a":[1,"x"],"b":1}`, ""},
		{"{{ context.s | json }}", `"MiXed"`, ""},
		{"{{ context.s | lower | json }}", `"mixed"`, ""},
		{"{{ context.u | percent | lower }}", "85%", ""},
		{"{{context.nested.name}}", "n", ""},
		{"{{ context.three }} {{ context.half }} {{ 1 + 2 }} {{ context.int }} {{ context.int64 }}", "3 2.5 3 7 8", ""},
		{"{{ context.t }}/{{ context.f }}/{{ context.list }}/{{ context.obj }}", `true/false/[1,"x"]/{"a":[1,"x"],"b":1}`, ""},
		{"a{{ 1 }}b{{ 2 }}c", "a1b2c", ""},
		{"{{ context.f || context.t }}", "true", ""},
		{"{{ context.f ||context.t }}", "true", ""},
		{"{{ context.s | lower() }}", "mixed", ""}, // expr's own pipe
		{"{{ thresholds.limit }}", "42", ""},
		{"{{ context.nested.missing ?? 'none' }}", "none", ""},
		{"{{ context.missing.field }}", "", "cannot fetch field"},
		{"ok {{ context.s | percent }}", "", "percent needs a number"},
		{"{{ context.s | round }}", "", "round needs a number"},
		{"{{ context.s + 1 }}", "", "invalid operation"},
		{"{{ context.list[5] }}", "", "out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.tmpl, func(t *testing.T) {
			set := mustLoad(t, map[string]any{"limit": 42.0}, rule("t", "on_x", "", "", notify(tc.tmpl)))
			h := &recHost{}
			out := fire(set, h, "on_x", ctx, true)
			if tc.skip != "" {
				if len(out.Notices) != 0 || len(out.Trace) != 1 || !strings.Contains(out.Trace[0].Skipped, tc.skip) {
					t.Errorf("notices %v, trace %+v; want skipped with %q", out.Notices, out.Trace, tc.skip)
				}
				return
			}
			if got := messages(out); len(got) != 1 || got[0] != tc.want {
				t.Errorf("got %q, want %q (trace %+v)", got, tc.want, out.Trace)
			}
		})
	}
}

// A field missing at the top of context renders as null rather than
// failing (only a field under a missing object fails).
func TestFire_templateMissingTopField(t *testing.T) {
	set := mustLoad(t, nil, rule("t", "on_x", "", "", notify("[{{ context.missing }}]")))
	if got := messages(fire(set, &recHost{}, "on_x", map[string]any{}, false)); !equal(got, []string{"[null]"}) {
		t.Errorf("got %q", got)
	}
}

func TestFire_setState(t *testing.T) {
	set := mustLoad(t, nil,
		rule("a", "on_x", "priority = 2", "",
			"type = \"set_state\"\nkey = \"n\"\nvalue = \"{{ context.n }}\"",
			"type = \"set_state\"\nkey = \"text\"\nvalue = \"n={{ context.n }}\"",
			"type = \"emit_event\"\nevent = \"on_y\""),
		rule("b", "on_x", "priority = 1", "",
			"type = \"set_state\"\nkey = \"obj\"\nvalue = { list = [\"{{ context.n * 2 }}\", \"lit\"], flag = true, none = \"{{ nil }}\" }"),
		rule("c", "on_y", "", "", "type = \"set_state\"\nkey = \"child\"\nvalue = 1.5"),
		rule("quiet", "on_z", "", "", notify("no state")),
	)
	h := &recHost{set: set}
	out := fire(set, h, "on_x", map[string]any{"n": 5.0}, true)
	if len(h.applied) != 2 {
		t.Fatalf("ApplyState called %d times, want 2 (one per emission): %+v", len(h.applied), h.applied)
	}
	// The chained emission's writes are applied when it ends, before its parent's.
	if len(h.applied[0]) != 1 || h.applied[0][0].Key != "child" || string(h.applied[0][0].Value) != "1.5" {
		t.Errorf("child writes %+v", h.applied[0])
	}
	var got []string
	for _, w := range h.applied[1] {
		got = append(got, w.Key+"="+string(w.Value))
	}
	want := []string{"n=5", `text="n=5"`, `obj={"flag":true,"list":[10,"lit"],"none":null}`}
	if !equal(got, want) {
		t.Errorf("writes %q, want %q", got, want)
	}
	if !equal(h.sessions, []string{"s1", "s1"}) {
		t.Errorf("sessions %q", h.sessions)
	}
	for _, f := range out.Fired {
		if r := f.Actions[0]; f.Rule == "a" && (r.Key != "n" || r.Value != 5.0) {
			t.Errorf("set_state record %v", r)
		}
	}
	for _, e := range out.Trace {
		if e.Error != "" {
			t.Errorf("trace error %+v", e)
		}
	}
	// No writes, no ApplyState.
	h = &recHost{set: set}
	fire(set, h, "on_z", nil, false)
	if len(h.applied) != 0 {
		t.Errorf("ApplyState called without writes: %+v", h.applied)
	}
}

// A failed state write is not silent: every set_state record of the
// emission says it failed (its JSON then has type and error only), besides
// the log and the trace; the rules' other actions stand.
func TestFire_setStateError(t *testing.T) {
	set := mustLoad(t, nil, rule("a", "on_x", "", "",
		"type = \"set_state\"\nkey = \"k\"\nvalue = 1", notify("hi"), "type = \"set_state\"\nkey = \"j\"\nvalue = 2"))
	for _, trace := range []bool{false, true} {
		h := &recHost{stateErr: errors.New("disk full")}
		out := fire(set, h, "on_x", nil, trace)
		if len(h.applied) != 1 {
			t.Fatalf("ApplyState called %d times", len(h.applied))
		}
		if !h.logged(logging.Error, "disk full") {
			t.Errorf("error not logged: %v", h.logs)
		}
		if got := firedIDs(out); !equal(got, []string{"a"}) || len(out.Notices) != 1 {
			t.Fatalf("fired %q, notices %v", got, out.Notices)
		}
		recs := out.Fired[0].Actions
		if recs[0].Error != "set_state: disk full" || recs[2].Error != "set_state: disk full" || recs[1].Error != "" {
			t.Errorf("records %+v", recs)
		}
		if got := string(appendRecords(nil, recs)); got != `[{"error":"set_state: disk full","type":"set_state"},{"message":"hi","priority":"normal","type":"notify_self"},{"error":"set_state: disk full","type":"set_state"}]` {
			t.Errorf("JSON %s", got)
		}
		if !trace {
			if len(out.Trace) != 0 {
				t.Errorf("trace without trace: %+v", out.Trace)
			}
			continue
		}
		if len(out.Trace) != 2 {
			t.Fatalf("trace %+v", out.Trace)
		}
		if e := out.Trace[0]; len(e.Actions) != 3 || e.Actions[0].Error != "set_state: disk full" {
			t.Errorf("traced records %+v", e.Actions)
		}
		if e := out.Trace[1]; e.Rule != "" || e.Event != "on_x" || e.Error != "set_state: disk full" {
			t.Errorf("state error entry %+v", e)
		}
	}
}

// Only the writes that failed are marked: a chained emission commits its
// own, before its parent's.
func TestFire_setStateErrorOfOneEmission(t *testing.T) {
	set := mustLoad(t, nil,
		rule("parent", "on_x", "", "", "type = \"set_state\"\nkey = \"p\"\nvalue = 1", "type = \"emit_event\"\nevent = \"on_y\""),
		rule("child", "on_y", "", "", "type = \"set_state\"\nkey = \"c\"\nvalue = 2"))
	for _, failing := range []string{"p", "c"} {
		h := &recHost{set: set, stateFails: func(ws []StateWrite) bool { return ws[0].Key == failing }, stateErr: errors.New("closed")}
		out := fire(set, h, "on_x", nil, false)
		got := map[string]string{}
		for _, f := range out.Fired {
			for _, a := range f.Actions {
				if a.Type == ActSetState {
					got[f.Rule] = a.Error
				}
			}
		}
		want := map[string]string{"parent": "", "child": ""}
		want[map[string]string{"p": "parent", "c": "child"}[failing]] = "set_state: closed"
		if !reflect.DeepEqual(got, want) {
			t.Errorf("failing %q: record errors %v, want %v", failing, got, want)
		}
	}
}

// When the host refuses a chained emission, the emit_event record says
// why, the event's rules do not fire, and the rule's other actions apply.
func TestFire_chainRefused(t *testing.T) {
	set := mustLoad(t, nil,
		rule("parent", "on_x", "", "", "type = \"emit_event\"\nevent = \"on_y\"", notify("after"), "type = \"set_state\"\nkey = \"k\"\nvalue = 1"),
		rule("child", "on_y", "", "", notify("child")))
	for _, trace := range []bool{false, true} {
		h := &recHost{set: set, chainErr: errors.New("event tree over 1000 emissions")}
		out := fire(set, h, "on_x", nil, trace)
		if got := firedIDs(out); !equal(got, []string{"parent"}) {
			t.Fatalf("fired %q", got)
		}
		recs := out.Fired[0].Actions
		if recs[0].Error != "emit_event: event tree over 1000 emissions" || recs[0].Event != "on_y" || recs[0].Fired != 0 {
			t.Errorf("emit record %+v", recs[0])
		}
		if got := messages(out); !equal(got, []string{"after"}) || len(h.applied) != 1 || len(h.chained) != 1 {
			t.Errorf("notices %q, writes %v, chained %v", got, h.applied, h.chained)
		}
		if !h.logged(logging.Warn, "event tree over 1000 emissions") {
			t.Errorf("refusal not logged: %v", h.logs)
		}
		if got := string(appendRecord(nil, &recs[0])); got != `{"error":"emit_event: event tree over 1000 emissions","event":"on_y","type":"emit_event"}` {
			t.Errorf("JSON %s", got)
		}
		if trace && (len(out.Trace) != 1 || len(out.Trace[0].Actions) != 3) {
			t.Errorf("trace %+v", out.Trace)
		}
	}
}

func TestFire_callToolAndLog(t *testing.T) {
	set := mustLoad(t, nil,
		rule("c", "on_x", "", "",
			"type = \"call_tool\"\ntool = \"search\"\narguments = { q = \"{{ context.q }}\", n = 3, deep = { v = \"{{ context.n }}\" } }",
			"type = \"call_tool\"\ntool = \"noargs\"",
			"type = \"log\"\nlevel = \"warn\"\nmessage = \"searched {{ context.q }}\"",
			"type = \"log\"\nmessage = \"info by default\""),
	)
	h := &recHost{toolResult: []byte(`{"hits":2}`)}
	out := fire(set, h, "on_x", map[string]any{"q": "go", "n": 1.5}, false)
	if len(h.tools) != 2 {
		t.Fatalf("tools %+v", h.tools)
	}
	if !reflect.DeepEqual(unmarshal(t, []byte(h.tools[0].args)), map[string]any{"q": "go", "n": 3.0, "deep": map[string]any{"v": 1.5}}) || h.tools[0].tool != "search" || h.tools[0].session != "s1" {
		t.Errorf("call %+v", h.tools[0])
	}
	if h.tools[1].args != "{}" {
		t.Errorf("no arguments: %q", h.tools[1].args)
	}
	rec := out.Fired[0].Actions
	if b, _ := json.Marshal(rec[0].Result); string(b) != `{"hits":2}` || rec[0].Tool != "search" {
		t.Errorf("record %v", rec[0])
	}
	if !h.logged(logging.Warn, `rule "c": searched go`) || !h.logged(logging.Info, `rule "c": info by default`) {
		t.Errorf("logs %v", h.logs)
	}
	if rec[2].Level != "warn" || rec[2].Message != "searched go" || rec[3].Level != "info" {
		t.Errorf("log records %v", rec)
	}
	h = &recHost{toolErr: errors.New("no such tool")}
	out = fire(set, h, "on_x", map[string]any{"q": "go", "n": 1.0}, false)
	if out.Fired[0].Actions[0].Error != "no such tool" {
		t.Errorf("record %v", out.Fired[0].Actions[0])
	}
}

func TestFire_trace(t *testing.T) {
	set := mustLoad(t, nil,
		rule("yes", "on_x", "priority = 6", "context.n > 1", notify("yes")),
		rule("no", "on_x", "priority = 5", "context.n > 100", notify("no")),
		rule("err", "on_x", "priority = 4", "context.s > 1", notify("err")),
		rule("always", "on_x", "priority = 3", "", notify("always")),
		rule("expr", "on_x", "priority = 2", "context.n > 1 && context.s == 'a'", notify("expr")),
		rule("flag", "on_x", "priority = 1", "context.flag", notify("flag")),
	)
	h := &recHost{}
	out := fire(set, h, "on_x", map[string]any{"n": 2.0, "s": "a"}, true)
	if len(out.Trace) != 6 {
		t.Fatalf("trace %+v", out.Trace)
	}
	type entry struct {
		rule    string
		matched bool
		value   any
		err     string
		actions int
	}
	want := []entry{
		{"yes", true, true, "", 1},
		{"no", false, false, "", 0},
		{"err", false, nil, "condition: ", 0},
		{"always", true, nil, "", 1},
		{"expr", true, true, "", 1},
		{"flag", false, false, "", 0}, // a missing field: expr reads nil as false
	}
	for i, e := range out.Trace {
		w := want[i]
		if e.Rule != w.rule || e.Event != "on_x" || e.Matched != w.matched || !reflect.DeepEqual(e.Value, w.value) ||
			!strings.HasPrefix(e.Error, w.err) || (w.err == "" && e.Error != "") || len(e.Actions) != w.actions || e.DurationUS < 0 || e.Skipped != "" {
			t.Errorf("entry %d = %+v, want %+v", i, e, w)
		}
	}
	if !strings.Contains(out.Trace[2].Error, "invalid operation") {
		t.Errorf("condition error %q", out.Trace[2].Error)
	}
	if !h.logged(logging.Warn, `rule "err" (r2.toml:2): condition: `) {
		t.Errorf("condition error not logged: %v", h.logs)
	}
	if a := out.Trace[0].Actions[0]; a.Type != "notify_self" || a.Message != "yes" || a.Priority != "normal" {
		t.Errorf("actions %v", a)
	}
	// The same emission without trace: no trace, the same rules.
	out2 := fire(set, &recHost{}, "on_x", map[string]any{"n": 2.0, "s": "a"}, false)
	if out2.Trace != nil || !equal(firedIDs(out2), firedIDs(out)) || !equal(firedIDs(out), []string{"yes", "always", "expr"}) {
		t.Errorf("without trace: %+v; with: %q", out2, firedIDs(out))
	}
	b, err := json.Marshal(out.Trace[1])
	if err != nil || !strings.Contains(string(b), `"matched":false`) || !strings.Contains(string(b), `"value":false`) || !strings.Contains(string(b), `"duration_us":`) {
		t.Errorf("JSON %s %v", b, err)
	}
}

func TestFire_helpers(t *testing.T) {
	set := mustLoad(t, BuiltinThresholds,
		rule("budget", "on_turn_start", "", "context_above_threshold(thresholds.token_budget)", notify("budget")),
		rule("done", "on_tool_complete", "", "tool_completed('grep')", notify("done")),
		rule("failed", "on_tool_failure", "", "tool_failed(\"grep\")", notify("failed")),
		rule("failed-any", "on_tool_complete", "priority = -1", "tool_failed('grep')", notify("never")),
		rule("arity", "on_arity", "", "tool_failed('a', 'b')", notify("arity")),
		rule("type", "on_type", "", "context_above_threshold('high')", notify("type")),
		rule("name-type", "on_name", "", "tool_completed(1)", notify("name")),
	)
	tests := []struct {
		event string
		ctx   map[string]any
		fired []string
		err   string
	}{
		{"on_turn_start", map[string]any{"turn": map[string]any{"token_usage": 0.85}}, []string{"budget"}, ""},
		{"on_turn_start", map[string]any{"turn": map[string]any{"token_usage": 0.8}}, []string{"budget"}, ""},
		{"on_turn_start", map[string]any{"turn": map[string]any{"token_usage": 0.5}}, []string{}, ""},
		{"on_turn_start", map[string]any{}, []string{}, ""},
		{"on_tool_complete", map[string]any{"event": map[string]any{"name": "on_tool_complete"}, "tool": map[string]any{"name": "grep"}}, []string{"done"}, ""},
		{"on_tool_complete", map[string]any{"event": map[string]any{"name": "on_tool_complete"}, "tool": map[string]any{"name": "ls"}}, []string{}, ""},
		{"on_tool_failure", map[string]any{"event": map[string]any{"name": "on_tool_failure"}, "tool": map[string]any{"name": "grep"}}, []string{"failed"}, ""},
		{"on_arity", map[string]any{}, []string{}, "takes one argument"},
		{"on_type", map[string]any{}, []string{}, "needs a number"},
		{"on_name", map[string]any{}, []string{}, "needs a tool name"},
	}
	for _, tc := range tests {
		h := &recHost{}
		out := fire(set, h, tc.event, tc.ctx, true)
		if got := firedIDs(out); !equal(got, tc.fired) {
			t.Errorf("%s %v: fired %q, want %q", tc.event, tc.ctx, got, tc.fired)
		}
		if tc.err != "" && (len(out.Trace) == 0 || !strings.Contains(out.Trace[0].Error, tc.err)) {
			t.Errorf("%s: trace %+v, want error %q", tc.event, out.Trace, tc.err)
		}
	}
}

func TestFire_concurrent(t *testing.T) {
	set := mustLoad(t, BuiltinThresholds,
		rule("simple", "on_x", "priority = 3", "context.n > 10", notify("n={{ context.n }}")),
		rule("expr", "on_x", "priority = 2", "int(context.n) % 2 == 0 && len(context.s) > 0", "type = \"set_state\"\nkey = \"even\"\nvalue = \"{{ context.n }}\""),
		rule("chain", "on_x", "priority = 1", "int(context.n) % 3 == 0", "type = \"emit_event\"\nevent = \"on_y\"\npayload = { m = \"{{ context.n }}\" }"),
		rule("child", "on_y", "", "", notify("m={{ context.m | round }}")),
	)
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				n := float64(g*1000 + i)
				h := &recHost{set: set}
				out := fire(set, h, "on_x", map[string]any{"n": n, "s": "x"}, i%2 == 0)
				var want []string
				if n > 10 {
					want = append(want, fmt.Sprintf("n=%g", n))
				}
				if int(n)%3 == 0 {
					want = append(want, fmt.Sprintf("m=%g", n))
				}
				if got := messages(out); !equal(got, want) {
					errs <- fmt.Sprintf("n=%g: notices %q, want %q", n, got, want)
					return
				}
				if (int(n)%2 == 0) != (len(h.applied) == 1) {
					errs <- fmt.Sprintf("n=%g: applied %v", n, h.applied)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestNeeds(t *testing.T) {
	set := mustLoad(t, nil,
		rule("a", "on_tool_complete", "", "context.tool.result_bytes > 10", notify("{{ context.tool.name }}")),
		rule("b", "on_tool_complete", "", "context.history.tool_count > 1", notify("x")),
		rule("c", "on_tool_failure", "", "tool_failed('x')", notify("x")),
		rule("d", "on_turn_start", "", "", notify("{{ context | json }}")),
		rule("e", "on_turn_end", "", "context.state.k == 1", notify("{{ context.tool }}")),
		rule("f", "on_query_start", "", "context.turn.n > 1", notify("x")),
	)
	tests := map[string]Needs{
		"on_tool_complete": {Tool: true, ToolFields: map[string]bool{"result_bytes": true, "name": true}, History: true},
		"on_tool_failure":  {Event: true, Tool: true, ToolFields: map[string]bool{"name": true}},
		"on_turn_start":    {All: true, Event: true, Tool: true, History: true, State: true},
		"on_turn_end":      {Tool: true, State: true},
		"on_query_start":   {},
		"on_session_end":   {},
	}
	for trigger, want := range tests {
		if got := set.NeedsFor(trigger); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, want %+v", trigger, got, want)
		}
	}
	n := set.NeedsFor("on_tool_complete")
	if !n.ToolField("name") || n.ToolField("error") {
		t.Error("ToolField")
	}
	if all := set.NeedsFor("on_turn_end"); !all.ToolField("anything") {
		t.Error("a bare context.tool reads every field")
	}
}
