package rules_test

import (
	"testing"

	"github.com/clara-lib/clara/core/rules"
)

// TestBuiltinRules runs the shipped rules' own test files (make rules-test
// runs them through the library too).
func TestBuiltinRules(t *testing.T) {
	set, err := rules.Load(rules.BuiltinSources(), rules.BuiltinThresholds)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Rules()) != 4 {
		t.Fatalf("%d built-in rules", len(set.Rules()))
	}
	for _, src := range rules.BuiltinTests() {
		tf, err := rules.ParseTests(src)
		if err != nil {
			t.Fatal(err)
		}
		rep := tf.Run(set, rules.BuiltinThresholds)
		for _, c := range rep.Cases {
			if !c.Passed {
				t.Errorf("%s: %s: %v", src.Name, c.Name, c.Problems)
			}
		}
	}
}
