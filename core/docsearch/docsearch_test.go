package docsearch

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func read(path string, max int64) ([]byte, error) { return os.ReadFile(path) }

func write(t *testing.T, root, rel, text string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func open(t *testing.T, root string, watch bool, patterns ...string) *Index {
	t.Helper()
	ix, err := Open(Options{Root: root, Patterns: patterns, MaxFiles: 100, MaxFileBytes: 1 << 20, Watch: watch, Read: read})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ix.Close)
	return ix
}

func paths(hits []Hit) string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Path+":"+strconv.Itoa(h.Line))
	}
	return strings.Join(out, " ")
}

func TestIndex_searchWhereAndWhat(t *testing.T) {
	root := t.TempDir()
	write(t, root, "README.md", "# Clara\n\nClara governs tool calls.\n\nCallbacks run scripts\nwhen files change.\n")
	write(t, root, "docs/callbacks.md", "# Callbacks\n\nA callback has a pattern\nand a timeout.\nThe timeout_secs bounds a blocking run.\n")
	write(t, root, "docs/deep/more.md", "Nothing about that here.\n")
	write(t, root, ".hidden/secret.md", "callback in a hidden folder\n")
	write(t, root, "notes.txt", "callback in a text file\n")
	if err := os.Symlink(filepath.Join(root, "docs"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	ix := open(t, root, false, "*.md", "docs/**/*.md")
	if ix.Files() != 3 {
		t.Fatalf("%d files indexed", ix.Files())
	}
	hits, err := ix.Search(context.Background(), "callback timeout", 10)
	if err != nil || paths(hits) != "docs/callbacks.md:3" {
		t.Fatalf("%v %v", hits, err)
	}
	if !strings.Contains(hits[0].Snippet, "[timeout]") {
		t.Fatalf("snippet %q", hits[0].Snippet)
	}
	// No piece holds every word: those that hold any.
	hits, _ = ix.Search(context.Background(), "scripts pattern", 10)
	if len(hits) != 2 {
		t.Fatalf("%v", hits)
	}
	if _, err := ix.Search(context.Background(), " ?! ", 10); err != ErrNoWords {
		t.Fatal(err)
	}
	// FTS5's own syntax in a query is words, nothing more.
	if _, err := ix.Search(context.Background(), `"unbalanced AND (OR NEAR callback*`, 10); err != nil {
		t.Fatal(err)
	}
}

func TestIndex_keptCurrentByTheWatcher(t *testing.T) {
	root := t.TempDir()
	write(t, root, "docs/a.md", "alpha\n")
	ix := open(t, root, true, "docs/**/*.md")
	eventually := func(query, want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			hits, _ := ix.Search(context.Background(), query, 10)
			if paths(hits) == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q: %q, want %q", query, paths(hits), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	eventually("alpha", "docs/a.md:1")
	write(t, root, "docs/a.md", "beta\n\nalpha again\n")
	eventually("alpha", "docs/a.md:3")
	write(t, root, "docs/new/b.md", "gamma\n") // a new folder
	eventually("gamma", "docs/new/b.md:1")
	os.Remove(filepath.Join(root, "docs", "a.md"))
	eventually("alpha", "")
	os.RemoveAll(filepath.Join(root, "docs", "new"))
	eventually("gamma", "")
}

func TestCheckPatterns(t *testing.T) {
	for _, p := range []string{"/etc/*.md", "../x/*.md", "a/../../b", "[", ""} {
		if _, err := CheckPatterns([]string{p}); err == nil {
			t.Errorf("%q accepted", p)
		}
	}
	for _, c := range []struct {
		pattern, path string
		want          bool
	}{{"**/*.md", "a/b/c.md", true}, {"**/*.md", "c.md", true}, {"**/*.md", ".git/c.md", false},
		{".github/**/*.md", ".github/x/y.md", true}, {"*.md", "a/b.md", false}, {"docs/*.md", "docs/a.md", true}} {
		pats, _ := CheckPatterns([]string{c.pattern})
		if got := matches(pats[0], split(c.path)); got != c.want {
			t.Errorf("%s %s: %v", c.pattern, c.path, got)
		}
	}
}
