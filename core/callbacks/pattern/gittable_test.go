package pattern

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The git reference table: testdata/git_table.json holds, for every pattern set in tableSets and
// every path in tablePaths, whether `git check-ignore --no-index` ignores the path (a file that
// does not exist) under a .gitignore made of the set. Regenerate it after changing the lists with
//
//	go test ./core/callbacks/pattern -run TestGitTable -update
//
// TestGitTable checks the matcher (and the reference implementation of the tests) against every
// row; when git is installed it also regenerates the table in a temporary directory and compares,
// so a drift between the stored table, the lists below and git is caught.

var update = flag.Bool("update", false, "regenerate testdata/git_table.json with git")

const tableFile = "testdata/git_table.json"

type gitTable struct {
	Note  string     `json:"note"`
	Git   string     `json:"git"`
	Paths []string   `json:"paths"`
	Sets  []tableSet `json:"sets"`
}

type tableSet struct {
	Patterns []string `json:"patterns"`
	// CompileError: Compile must refuse the set (a line git accepts but can never match).
	CompileError bool     `json:"compile_error,omitempty"`
	Matched      []string `json:"matched"`
}

var tablePaths = []string{
	// sources
	"main.rs", "src/main.rs", "src/lib/mod.rs", "src/main.go", "src/pkg/util/x.go",
	"cmd/tool/main.go", "a.go", "vendor/x.go", "vendor/lib/y.go", "src/vendor/z.go",
	"a.c", "src/a.c", "a.h", "lib.o", "lib.a", "x.tar.gz", "notes.txt~", "file.swp", "file.swo",
	"Cargo.toml", "build.rs", "src/build.rs",
	// build dirs and anchoring
	"build", "build/out.o", "build/keep.txt", "build/sub/keep.txt", "a/build", "a/build/x.o",
	"src/build", "src/build/x", "builds/x",
	"Makefile", "sub/Makefile", "makefile",
	// foo / bar family
	"foo", "foo/bar.c", "foo/bar/baz.c", "foo/bar", "a/foo", "a/foo/bar", "x/a/foo/bar/y", "x/foo",
	"foox/y", "foobar/bar", "foo/x/y/bar", "src/foobar/x", "src/foo/a/b", "src/foo",
	// a / b family
	"a", "b", "a/b", "a/x/b", "a/x/y/b", "a/b/c", "a/x/c", "a/xy/c", "a/bx/c", "a/xzzy/b",
	"x/a/b", "a/b/c/d/e/f.txt", "a/keep/x", "a/other/x", "ab", "a/b/c/x", "a/x/b/y/c",
	// docs
	"doc/a.md", "doc/sub/b.md", "x/doc/a.md", "docs/a.md", "README.md", "docs/README.md",
	"doc/x.txt",
	// texts and classes
	"a.txt", "ab.txt", "b.txt", "d.txt", "].txt", "-.txt", "!.txt", "1.txt", "A.txt", "^.txt",
	"keep.txt", "sub/keep.txt", "x1", "X9", "9lives", "_x",
	// dotfiles
	".env", "sub/.env", "src/.hidden/x", ".config/app.toml", ".a.txt",
	// logs, node_modules, tests
	"logs/x.log", "logs/keep/x.tmp", "logs/keep/a.log", "node_modules/pkg/index.js",
	"web/node_modules/pkg/index.js", "tests/test_x.py", "tests/unit/test_y.py", "test_z.py",
	"tests/x_test.py",
	// special characters
	"name with space.txt", "dir with space/file.txt", "foo ", " lead.txt", "*star*.txt",
	"!bang", "#hash", " #notcomment", "[brackets].txt", "back\\slash", "a{b,c}",
	// unicode
	"café.txt", "é.txt", "日本/語.md", "ü", "x/ü/y", "über.txt",
}

var tableSets = [][]string{
	// basenames and extensions
	{"*.rs"},
	{"*.go"},
	{"Makefile"},
	{"build"},
	{"*.tar.gz"},
	{"*~"},
	{"*.[oa]"},
	{"*.sw[op]"},
	{"*"},
	{"*.rs", "Cargo.toml", "/build.rs"},
	// anchoring
	{"/build"},
	{"/Makefile"},
	{"/*.c"},
	{"src/build"},
	{"doc/*.md"},
	{"a/b"},
	{"a/*/c"},
	{"a/?/c"},
	{"/a/b/"},
	{"a/b/c/d/e/f.txt"},
	// trailing slash
	{"build/"},
	{"/build/"},
	{"foo/"},
	{"*/"},
	{"dir with space/"},
	{"日本/"},
	// globstar
	{"**/foo"},
	{"**/foo/bar"},
	{"foo/**"},
	{"a/**/b"},
	{"a/**/**/b"},
	{"a/**/b/**/c"},
	{"**"},
	{"/**"},
	{"**/"},
	{"src/**/*.go"},
	{"src/**/"},
	{"doc/**/*.md"},
	{"**/test_*.py"},
	{"**/node_modules/"},
	{"node_modules"},
	{"**/**/x"},
	{"a/**/**"},
	{"**/*.md", "!README.md"},
	// "**" not next to a slash, and git's literal-prefix quirk
	{"foo**/bar"},
	{"src/foo**"},
	{"a/b**/c"},
	{"**foo"},
	{"foo**"},
	{"a/**b"},
	{"a/x**y/b"},
	{"a*/**"},
	// wildcards
	{"?.txt"},
	{"??.txt"},
	{"*/*"},
	{"a/*"},
	{"x?"},
	// classes
	{"[abc].txt"},
	{"[!abc].txt"},
	{"[^abc].txt"},
	{"[a-c]*.txt"},
	{"[]a].txt"},
	{"[!]a].txt"},
	{"[a-].txt"},
	{"[-a].txt"},
	{"[!-].txt"},
	{"[[:digit:]]*"},
	{"[[:upper:]]*"},
	{"[[:alpha:]][[:alnum:]]*"},
	{"[[:punct:]].txt"},
	{"[[:space:]]*"},
	{"[[:x].txt"},
	{"[!.]*"},
	{"[a-z]/[a-z]*"},
	{"[z-a].txt"},
	{"a/[!x]/c"},
	{"[\\]].txt"},
	{"[a\\-c].txt"},
	// escapes, comments, spaces
	{"\\*star\\*.txt"},
	{"\\!bang"},
	{"\\#hash"},
	{"#hash"},
	{" #notcomment"},
	{"\\[brackets].txt"},
	{"a\\b"},
	{"back\\\\slash"},
	{"foo\\ "},
	{"foo  "},
	{"foo \\ "},
	{" lead.txt"},
	{"name with space.txt"},
	{"*space*"},
	{"a{b,c}"},
	{"# comment", "", "*.md", "   "},
	{"*.md\r"},
	{"\\/a"},
	{"a/\\*"},
	// negation
	{"!foo"},
	{"*.txt", "!keep.txt"},
	{"*.txt", "!*.txt", "*.txt"},
	{"build/", "!build/keep.txt"},
	{"/build/*", "!/build/keep.txt"},
	{"build/**", "!build/keep.txt"},
	{"*.go", "!vendor/"},
	{"*.go", "!vendor/**"},
	{"*.go", "!/vendor/"},
	{"*", "!*/", "!*.go"},
	{"*", "!*.go"},
	{"a/b/", "!a/b/c/"},
	{"a/*/", "!a/keep/"},
	{"logs/**", "!logs/keep/", "logs/keep/*.tmp"},
	{"logs/", "!logs/keep/"},
	{"foo", "!foo/"},
	{"foo/", "!foo"},
	{"*.txt", "!a.txt", "a.*"},
	{".*"},
	{".env"},
	{"*.env", "!.env"},
	// unicode (git matches bytes)
	{"café.txt"},
	{"caf?.txt"},
	{"caf??.txt"},
	{"*.md", "!日本/*"},
	{"[ü]"},
	{"?"},
	{"??"},
	{"x/?/y"},
	{"x/??/y"},
	// odd slashes
	{"//a"},
	{"a//b"},
	{"a/"},
	{"/"},
	{"!"},
	// lines git accepts but never matches: Compile refuses them
	{"[abc"},
	{"foo\\"},
	{"[[:foo:]]"},
	{"ok.txt", "[bad"},
}

// compileErrorSets are the sets whose Compile must fail.
func expectCompileError(set []string) bool {
	_, err := Compile(set)
	return err != nil
}

func generateGitTable(t *testing.T) *gitTable {
	t.Helper()
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return nil
	}
	dir := t.TempDir()
	env := append(os.Environ(),
		"HOME="+dir, "XDG_CONFIG_HOME="+dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"LC_ALL=C", "LANG=C")
	repo := filepath.Join(dir, "repo")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(stdin []byte, args ...string) ([]byte, error) {
		cmd := exec.Command(gitPath, args...)
		cmd.Dir = repo
		cmd.Env = env
		cmd.Stdin = bytes.NewReader(stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
				return out, nil // check-ignore: no path ignored
			}
			return out, fmt.Errorf("git %v: %v: %s", args, err, stderr.String())
		}
		return out, nil
	}
	if _, err := run(nil, "init", "-q"); err != nil {
		t.Fatal(err)
	}
	version, err := run(nil, "--version")
	if err != nil {
		t.Fatal(err)
	}
	tab := &gitTable{
		Note:  "generated by `go test ./core/callbacks/pattern -run TestGitTable -update` from git check-ignore --no-index",
		Git:   strings.TrimSpace(string(version)),
		Paths: tablePaths,
	}
	var stdin []byte
	for _, p := range tablePaths {
		stdin = append(append(stdin, p...), 0)
	}
	for _, set := range tableSets {
		content := strings.Join(set, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(repo, ".gitignore"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := run(stdin, "-c", "core.ignorecase=false", "check-ignore", "--no-index", "-v", "-n", "-z", "--stdin")
		if err != nil {
			t.Fatal(err)
		}
		fields := strings.Split(string(out), "\x00")
		if len(fields) > 0 && fields[len(fields)-1] == "" {
			fields = fields[:len(fields)-1]
		}
		if len(fields) != 4*len(tablePaths) {
			t.Fatalf("set %q: git printed %d fields for %d paths", set, len(fields), len(tablePaths))
		}
		ts := tableSet{Patterns: set, CompileError: expectCompileError(set), Matched: []string{}}
		for i := 0; i < len(fields); i += 4 {
			source, pat, path := fields[i], fields[i+2], fields[i+3]
			if path != tablePaths[i/4] {
				t.Fatalf("set %q: git answered for %q, expected %q", set, path, tablePaths[i/4])
			}
			if source != "" && source != ".gitignore" {
				t.Fatalf("set %q: pattern from %q: the environment leaks ignore files", set, source)
			}
			if source != "" && !strings.HasPrefix(pat, "!") {
				ts.Matched = append(ts.Matched, path)
			}
		}
		tab.Sets = append(tab.Sets, ts)
	}
	return tab
}

func loadGitTable(t *testing.T) *gitTable {
	t.Helper()
	data, err := os.ReadFile(tableFile)
	if err != nil {
		t.Fatalf("%v (regenerate with -update where git is installed)", err)
	}
	var tab gitTable
	if err := json.Unmarshal(data, &tab); err != nil {
		t.Fatal(err)
	}
	return &tab
}

func TestGitTable(t *testing.T) {
	if *update {
		tab := generateGitTable(t)
		if tab == nil {
			t.Fatal("-update needs git")
		}
		data, err := json.MarshalIndent(tab, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(tableFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(tableFile, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tab := loadGitTable(t)
	if fresh := generateGitTable(t); fresh != nil {
		// drift: the stored table must be what this git says about the lists above
		if !reflect.DeepEqual(fresh.Paths, tab.Paths) || !reflect.DeepEqual(fresh.Sets, tab.Sets) {
			for i := range fresh.Sets {
				if i >= len(tab.Sets) || !reflect.DeepEqual(fresh.Sets[i], tab.Sets[i]) {
					t.Errorf("stored table differs from %s at set %d %q", fresh.Git, i, fresh.Sets[i].Patterns)
					break
				}
			}
			t.Fatalf("stored %s is stale (stored from %s): regenerate with -update", tableFile, tab.Git)
		}
	} else {
		t.Logf("git not found: using the stored table only (%s)", tab.Git)
	}
	rows, failures := 0, 0
	for _, ts := range tab.Sets {
		matched := map[string]bool{}
		for _, p := range ts.Matched {
			matched[p] = true
		}
		set, err := Compile(ts.Patterns)
		if ts.CompileError != (err != nil) {
			t.Errorf("Compile(%q): error %v, table says compile_error=%v", ts.Patterns, err, ts.CompileError)
		}
		ref := refParse(ts.Patterns)
		for _, p := range tab.Paths {
			rows++
			want := matched[p]
			if got := refIgnored(ref, p); got != want {
				t.Errorf("reference implementation: %q %q = %v, git says %v", ts.Patterns, p, got, want)
			}
			if set == nil {
				continue // a refused set: only the reference implementation is checked
			}
			if got := set.Match(p); got != want {
				failures++
				t.Errorf("Match: %q %q = %v, git says %v", ts.Patterns, p, got, want)
			}
			if got := set.MatchPath(Prepare(p)); got != want {
				t.Errorf("MatchPath: %q %q = %v, git says %v", ts.Patterns, p, got, want)
			}
			if got := nfaOnly(set).Match(p); got != want {
				t.Errorf("automaton only: %q %q = %v, git says %v", ts.Patterns, p, got, want)
			}
		}
	}
	t.Logf("%d sets × %d paths = %d rows, %d failures", len(tab.Sets), len(tab.Paths), rows, failures)
}

// nfaOnly returns a copy of s matching with the automaton of nfa.go only (no literal fast paths,
// no gobwas), to check it on every row too.
func nfaOnly(s *Set) *Set {
	c := *s
	c.rules = append([]rule(nil), s.rules...)
	for i := range c.rules {
		if !c.rules[i].never {
			c.rules[i].nfaOnly = true
		}
	}
	return &c
}
