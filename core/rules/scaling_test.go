package rules

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// manyRules is a [[rules]] file of n rules, each behind a comment of about
// pad bytes, quoted words (the descriptions and comments of real rule
// files).
func manyRules(n, pad int) Source {
	var b strings.Builder
	comment := "# " + strings.Repeat(`"word" `, pad/7) + "\n"
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%s[[rules]]\nid = \"r%05d\"\ntrigger = \"bench.tick\"\n[rules.condition]\nexpression = \"context.group == %d and context.level > -%d\"\n"+
			"[[rules.actions]]\ntype = \"notify_self\"\nmessage = \"rule %d: level {{ context.level }}\"\n", comment, i, i/10, i, i)
	}
	return src("many.toml", b.String())
}

// Loading rules costs in proportion to their number: ten times the rules
// take about ten times as long (the best of three loads each). Each rule's
// line was found by searching the file from its start, which made a load
// quadratic in the file's size (10,000 rules took seconds).
func TestLoad_linear(t *testing.T) {
	const small, large, pad = 100, 1000, 8192
	best := func(s Source) time.Duration {
		var min time.Duration
		for i := 0; i < 3; i++ {
			start := time.Now()
			set, err := Load([]Source{s}, nil)
			d := time.Since(start)
			if err != nil || len(set.Rules()) == 0 {
				t.Fatalf("load: %v", err)
			}
			if i == 0 || d < min {
				min = d
			}
		}
		return min
	}
	a, b := best(manyRules(small, pad)), best(manyRules(large, pad))
	t.Logf("%d rules: %v, %d: %v", small, a, large, b)
	if ratio := float64(b) / float64(a); ratio > 25 {
		t.Errorf("%d rules loaded in %v, %d in %v: %.0f× for 10× the rules", small, a, large, b, ratio)
	}
}

// A rule's line is the line of its own id, found in one pass: the second
// of two rules is at its line even when its id appears earlier as another
// key's value.
func TestLoad_ruleLines(t *testing.T) {
	text := `[[rules]]
id = "a"
trigger = "on_x"
[[rules.actions]]
type = "emit_event"
event = "b"

[[rules]]
id = "b"
trigger = "on_y"
[[rules.actions]]
type = "log"
message = "y"
`
	set, err := Load([]Source{src("l.toml", text)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]int{}
	for _, r := range set.Rules() {
		lines[r.ID] = r.Line
	}
	if lines["a"] != 2 || lines["b"] != 9 {
		t.Errorf("lines %v, want a at 2 and b at 9", lines)
	}
}
