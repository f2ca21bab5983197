package rules

// What the tests (rules_test included) reach that the package does not
// export.

// BuiltinThresholds are the thresholds the built-in rules are written for
// (the defaults of config rules.thresholds, which the configuration
// package declares): the tests' own.
var BuiltinThresholds = map[string]any{
	"token_budget":       0.8,
	"iteration_budget":   25.0,
	"large_result_bytes": 32768.0,
	"repeated_failures":  3.0,
}

// OptionalTests returns the rule tests of the shipped rules that load
// only when asked for, with the folder they are in.
func OptionalTests() []Source { return builtinFilesIn("builtin/optional", true) }
