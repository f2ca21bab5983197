package rules_test

import (
	"reflect"
	"regexp"
	"testing"

	"github.com/clara-lib/clara/core/rules"
)

// TestRunWith_coverage: which rules the cases fired (chained events
// included), which matched but were skipped, which never matched, and
// each action's count; --run's filter leaves cases out of both.
func TestRunWith_coverage(t *testing.T) {
	set, err := rules.Load([]rules.Source{{Name: "r.toml", Text: []byte(`
[[rules]]
id = "big"
trigger = "order"
[rules.condition]
expression = "context.n > 1"
[[rules.actions]]
type = "notify_self"
message = "big"
[[rules.actions]]
type = "emit_event"
event = "order.big"

[[rules]]
id = "broken"
trigger = "order"
[rules.condition]
expression = "context.n > 5"
[rules.action]
type = "notify_self"
message = "{{ context.missing.field }}"

[[rules]]
id = "chained"
trigger = "order.big"
[rules.action]
type = "log"
message = "chained"

[[rules]]
id = "never"
trigger = "on_tool_call"
[rules.action]
type = "deny"
reason = "no"
`)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tf, err := rules.ParseTests(rules.Source{Name: "r.test.toml", Text: []byte(`
[[cases]]
name = "small"
event = "order"
payload = { n = 1 }
fired = []

[[cases]]
name = "big"
event = "order"
payload = { n = 2 }
fired = ["big", "chained"]

[[cases]]
name = "huge"
event = "order"
payload = { n = 9 }
fired = ["big", "chained"]

[[cases]]
name = "left out by run"
event = "on_tool_call"
tool = { name = "x" }
fired = ["never"]
`)})
	if err != nil {
		t.Fatal(err)
	}
	rep := tf.RunWith(set, nil, rules.TestOptions{Run: regexp.MustCompile(`^(small|big|huge)$`), Coverage: true})
	if rep.Passed != 3 || rep.Failed != 0 || len(rep.Cases) != 3 {
		t.Fatalf("report %+v", rep)
	}
	want := []rules.RuleCoverage{
		{ID: "big", File: "r.toml", Line: 3, Trigger: "order", Matched: 2, Fired: 2, Actions: []rules.ActionCoverage{{1, "notify_self", 2}, {2, "emit_event", 2}}},
		{ID: "broken", File: "r.toml", Line: 15, Trigger: "order", Matched: 1, Fired: 0, Actions: []rules.ActionCoverage{{1, "notify_self", 0}}},
		{ID: "chained", File: "r.toml", Line: 24, Trigger: "order.big", Matched: 2, Fired: 2, Actions: []rules.ActionCoverage{{1, "log", 2}}},
		{ID: "never", File: "r.toml", Line: 31, Trigger: "on_tool_call", Actions: []rules.ActionCoverage{{1, "deny", 0}}},
	}
	if rep.Coverage == nil || !reflect.DeepEqual(rep.Coverage.Rules, want) {
		t.Fatalf("coverage\n got %+v\nwant %+v", rep.Coverage, want)
	}
	// Without the filter the last case runs and fires "never"; without
	// Coverage there is none.
	rep = tf.RunWith(set, nil, rules.TestOptions{})
	if rep.Passed != 4 || rep.Coverage != nil {
		t.Fatalf("report %+v", rep)
	}
}
