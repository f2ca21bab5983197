package core_test

import (
	"strings"
	"testing"

	"github.com/clara-lib/clara/core"
)

// Issue 26 §1: what a configuration's paths mean, whoever starts Clara
// from wherever.

func logRule(id string) string {
	return "[rule]\nid = \"" + id + "\"\ntrigger = \"t\"\n[action]\ntype = \"log\"\nmessage = \"m\"\n"
}

// TestRulePaths_doublestar_syntax: rules.paths are doublestar patterns
// ({a,b} alternatives beside ** and the wildcards), walked inside
// project_root.
func TestRulePaths_doublestar_syntax(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a/x.toml": logRule("ax"), "b/deep/y.toml": logRule("by"), "c/z.toml": logRule("cz")})
	e := core.New(core.Options{})
	mustConfigure(t, e, `{"state_dir":"","project_root":`+jsonText(root)+`,"rules":{"builtin":false,"paths":["{a,b}/**/*.toml"]}}`)
	out := evalString(t, e, `{"tool":"rules_list"}`)
	for _, want := range []string{`"id":"ax"`, `"id":"by"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("%s missing from %s", want, out)
		}
	}
	if strings.Contains(out, `"id":"cz"`) {
		t.Fatalf("c/z.toml matched: %s", out)
	}
}
