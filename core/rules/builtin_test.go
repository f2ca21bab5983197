package rules_test

import (
	"testing"

	"github.com/clara-lib/clara/core/rules"
)

// TestBuiltinRules runs the shipped rules' own test files (make rules-test
// runs them through the library too).
// Run re-binds the set to the thresholds it is given (merged with the test
// file's own), whatever those the set was loaded with: the tests pass on a
// set loaded with others.
func TestBuiltinRules(t *testing.T) {
	others := map[string]any{"token_budget": 0.1, "iteration_budget": 2.0, "large_result_bytes": 1.0, "repeated_failures": 1.0}
	for _, loaded := range []map[string]any{rules.BuiltinThresholds, others, nil} {
		set, err := rules.Load(rules.BuiltinSources(), loaded)
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
					t.Errorf("loaded with %v: %s: %s: %v", loaded, src.Name, c.Name, c.Problems)
				}
			}
			if rep.Failed != 0 || rep.Passed != len(tf.Cases) {
				t.Errorf("%s: report %+v", src.Name, rep)
			}
		}
	}
	// With other thresholds, the same tests fail: they are read.
	tf, err := rules.ParseTests(rules.BuiltinTests()[0])
	if err != nil {
		t.Fatal(err)
	}
	set, _ := rules.Load(rules.BuiltinSources(), rules.BuiltinThresholds)
	if rep := tf.Run(set, others); rep.Failed == 0 {
		t.Errorf("%s passed with thresholds %v", tf.Name, others)
	}
}

// TestRedactSecretsRules runs the tests of the built-in rules that load
// only when asked for (rules.redact_secrets).
func TestRedactSecretsRules(t *testing.T) {
	set, err := rules.Load([]rules.Source{rules.RedactSecretsSource()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Rules()) != 2 {
		t.Fatalf("%d rules", len(set.Rules()))
	}
	tests := rules.OptionalTests()
	if len(tests) != 1 {
		t.Fatalf("%d test files", len(tests))
	}
	tf, err := rules.ParseTests(tests[0])
	if err != nil {
		t.Fatal(err)
	}
	rep := tf.Run(set, nil)
	for _, c := range rep.Cases {
		if !c.Passed {
			t.Errorf("%s: %v", c.Name, c.Problems)
		}
	}
	if rep.Passed != len(tf.Cases) {
		t.Errorf("%+v", rep)
	}
}
