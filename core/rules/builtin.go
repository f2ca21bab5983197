package rules

import (
	"embed"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed builtin/*.toml
var builtinFS embed.FS

// DefaultThresholds are the built-in rules' thresholds (config
// rules.thresholds): what conditions and templates see as `thresholds`.
var DefaultThresholds = map[string]any{
	"token_budget":       0.8,
	"iteration_budget":   25.0,
	"large_result_bytes": 32768.0,
	"repeated_failures":  3.0,
}

// BuiltinSources returns the shipped rules (SPEC §7.6), named
// "builtin/NAME.toml" in errors and listings.
func BuiltinSources() []Source { return builtinFiles(false) }

// BuiltinTests returns the rule tests of the shipped rules.
func BuiltinTests() []Source { return builtinFiles(true) }

func builtinFiles(tests bool) []Source {
	names, _ := fs.Glob(builtinFS, "builtin/*.toml")
	sort.Strings(names)
	var out []Source
	for _, n := range names {
		if strings.HasSuffix(n, ".test.toml") != tests {
			continue
		}
		text, err := builtinFS.ReadFile(n)
		if err != nil {
			continue // embedded: cannot happen
		}
		out = append(out, Source{Name: path.Join("builtin", path.Base(n)), Text: text})
	}
	return out
}
