package core_test

import (
	"fmt"
	"os"
	"path/filepath"
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

// TestConfigFile_means_the_same_from_any_directory: started from another
// working directory, CLARA_CONFIG's rules.paths = ["rules/*.toml"]
// matched nothing, its deny rule was gone and echo ran (issue 26 §1).
// Now a configuration file's relative paths are its own folder's: rules,
// the audit file, state_dir; through CLARA_CONFIG (also named by a
// relative path) and through ConfigureFile (bin/clara --config).
func TestConfigFile_means_the_same_from_any_directory(t *testing.T) {
	project := t.TempDir()
	writeTree(t, project, map[string]string{
		"conf/clara.toml":      "[rules]\nbuiltin = false\npaths = [\"rules/*.toml\"]\n[audit]\npath = \"audit.jsonl\"\n",
		"conf/rules/deny.toml": denyEcho,
	})
	config := filepath.Join(project, "conf", "clara.toml")
	for _, c := range []struct{ what, cwd, path string }{
		{"absolute, from elsewhere", t.TempDir(), config},
		{"absolute, from /", "/", config},
		{"relative, from the project", project, filepath.Join("conf", "clara.toml")},
	} {
		t.Run(c.what, func(t *testing.T) {
			t.Chdir(c.cwd)
			var stderr syncBuffer
			e := core.FromEnvironment(func(k string) string { return map[string]string{"CLARA_CONFIG": c.path}[k] }, &stderr)
			t.Cleanup(e.Close)
			if !echoDenied(t, e) {
				t.Fatalf("echo ran: %s\n%s", evalString(t, e, `{"tool":"echo","arguments":{"x":1}}`), stderr.String())
			}
			if got, want := e.Config().ProjectRoot, filepath.Join(project, "conf"); got != want {
				t.Errorf("project_root %q, want %q", got, want)
			}
			if _, err := os.Stat(filepath.Join(project, "conf", "audit.jsonl")); err != nil {
				t.Errorf("the audit file is not beside the configuration: %v", err)
			}
			e2 := core.New(core.Options{})
			t.Cleanup(e2.Close)
			if err := e2.ConfigureFile(c.path); err != nil {
				t.Fatal(err)
			}
			if !echoDenied(t, e2) {
				t.Fatalf("ConfigureFile: echo ran")
			}
		})
	}
	// A project_root the file gives is relative to the file too, and the
	// other paths to it.
	writeTree(t, project, map[string]string{"conf/up.toml": "project_root = \"..\"\n[rules]\nbuiltin = false\npaths = [\"conf/rules/*.toml\"]\n"})
	t.Chdir(t.TempDir())
	e := core.New(core.Options{})
	t.Cleanup(e.Close)
	if err := e.ConfigureFile(filepath.Join(project, "conf", "up.toml")); err != nil {
		t.Fatal(err)
	}
	if !echoDenied(t, e) || e.Config().ProjectRoot != project {
		t.Fatalf("project_root = \"..\": %q, echo denied %v", e.Config().ProjectRoot, echoDenied(t, e))
	}
	// clara_configure's text has no folder: its paths are the working
	// directory's, through project_root.
	out := string(e.Configure([]byte(`{"project_root":".","rules":{"paths":["conf/rules/*.toml"]}}`)))
	if !strings.Contains(out, `"error":"invalid_request"`) || !strings.Contains(out, `matches no file`) {
		t.Fatalf("a clara_configure text's paths are not the working directory's: %s", out)
	}
}

// TestConfig_a_pattern_it_gives_must_match: a rule or plugin pattern a
// configuration gives that matches nothing is a positioned problem of
// that configuration, not a warning; the defaults may match nothing.
func TestConfig_a_pattern_it_gives_must_match(t *testing.T) {
	project := t.TempDir()
	writeTree(t, project, map[string]string{
		"clara.toml": "[rules]\nbuiltin = false\npaths = [\"rules/*.toml\"]\n\n[plugins]\npaths = [\"extensions/*\"]\n",
		"README":     "",
	})
	e := core.New(core.Options{})
	t.Cleanup(e.Close)
	err := e.LoadBaseFile(filepath.Join(project, "clara.toml"))
	text := fmt.Sprint(err)
	for _, want := range []string{
		filepath.Join(project, "clara.toml") + `:3:1: rules.paths: "rules/*.toml" matches no file under ` + project,
		filepath.Join(project, "clara.toml") + `:6:1: plugins.paths: "extensions/*" matches no plugin folder`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in %s", want, text)
		}
	}
	// The default patterns match nothing here, and that is no problem.
	if err := e.SetBase([]byte("project_root = "+jsonText(project)+"\n"), "base.toml"); err != nil {
		t.Fatal(err)
	}
	// clara check finds the same.
	ps := core.CheckFile([]byte("[rules]\npaths = [\"rules/*.toml\"]\n"), filepath.Join(project, "clara.toml"))
	if len(ps) != 1 || ps[0].Line != 2 || !strings.Contains(ps[0].Message, `rules.paths: "rules/*.toml" matches no file`) {
		t.Errorf("check: %v", ps)
	}
}
