package pattern

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestRelative(t *testing.T) {
	cases := []struct {
		root, path string
		rel        string
		ok         bool
	}{
		{"/proj", "/proj/src/a.go", "src/a.go", true},
		{"/proj", "src/a.go", "src/a.go", true},
		{"/proj", "./src/a.go", "src/a.go", true},
		{"/proj", "src//a.go", "src/a.go", true},
		{"/proj", "src/../a.go", "a.go", true},
		{"/proj", "/proj/src/../b/./c.go", "b/c.go", true},
		{"/proj", "/proj/src/", "src", true},
		{"/proj", "src/x/", "src/x", true},
		{"/proj/", "/proj/a", "a", true},       // root with a trailing slash
		{"/proj/./x/..", "/proj/a", "a", true}, // root cleaned
		{"/", "/etc/passwd", "etc/passwd", true},
		{"/proj", "/proj", "", false},     // root itself
		{"/proj", "/proj/", "", false},    // root itself
		{"/proj", ".", "", false},         // root itself
		{"/proj", "", "", false},          // root itself
		{"/proj", "a/..", "", false},      // root itself
		{"/proj", "..", "", false},        // outside
		{"/proj", "../x", "", false},      // outside
		{"/proj", "a/../../x", "", false}, // outside after cleaning
		{"/proj", "/proj/../x", "", false},
		{"/proj", "/projx/a", "", false}, // a sibling sharing the prefix
		{"/proj", "/other/a", "", false},
		{"/proj", "/", "", false},
		{"relative/root", "a", "", false}, // root must be absolute
		{"/proj", "/proj/a b/ü.txt", "a b/ü.txt", true},
		{"/proj", "/proj/..x/a", "..x/a", true}, // a name starting with ".." is inside
	}
	for _, c := range cases {
		rel, ok := Relative(c.root, c.path)
		if rel != c.rel || ok != c.ok {
			t.Errorf("Relative(%q, %q) = %q, %v; want %q, %v", c.root, c.path, rel, ok, c.rel, c.ok)
		}
	}
}

func TestPrepareCleans(t *testing.T) {
	s := MustCompile("/a/b.txt", "c/")
	for _, p := range []string{"a/b.txt", "./a/b.txt", "/a/b.txt", "a//b.txt", "a/./b.txt", "x/../a/b.txt", "c/d", "./c/d"} {
		if !s.Match(p) {
			t.Errorf("Match(%q) = false", p)
		}
	}
	for _, p := range []string{"", ".", "/", "..", "../a/b.txt", "a/../../a/b.txt", "a/b.txt\x00", "c"} {
		if s.Match(p) {
			t.Errorf("Match(%q) = true", p)
		}
	}
	if got := Prepare("./a//b").String(); got != "a/b" {
		t.Errorf("Prepare(./a//b).String() = %q", got)
	}
	var zero Path
	if s.MatchPath(zero) || zero.String() != "" {
		t.Error("the zero Path matches")
	}
}

func TestCompileErrors(t *testing.T) {
	for _, lines := range [][]string{
		nil,
		{},
		{""},
		{"# only a comment", "", "   "},
		{"/"},
		{"!"},
		{"*.go", "[abc"},
		{"foo\\"},
		{"[[:nope:]]"},
		{"a\nb"},
		{"a\x00b"},
	} {
		s, err := Compile(lines)
		if err == nil {
			t.Errorf("Compile(%q) = %v, want an error", lines, s)
			continue
		}
		if errors.Is(err, errTranslate) {
			t.Errorf("Compile(%q): %v", lines, err)
		}
	}
	_, err := Compile([]string{"*.go", "ok/", "[abc"})
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), `"[abc"`) {
		t.Errorf("the error does not name the line: %v", err)
	}
}

func TestNonASCIIAndComplexPatterns(t *testing.T) {
	cases := []struct {
		lines []string
		path  string
		want  bool
	}{
		{[]string{"caf?.txt"}, "café.txt", false}, // é is two bytes, as in git
		{[]string{"caf??.txt"}, "café.txt", true},
		{[]string{"*.txt"}, "日本/語.txt", true},
		{[]string{"日本/**/*.md"}, "日本/a/b/語.md", true},
		{[]string{"a*b*c*d*e*f"}, "x/aXbXcXdXeXf", true}, // more stars than gobwas gets
		{[]string{"a*b*c*d*e*f"}, "x/aXbXcXdXeX", false},
		{[]string{"**/a/**/b/**/c/**/d"}, "a/x/b/c/y/z/d", true},
		{[]string{"**/a/**/b/**/c/**/d"}, "a/x/b/c/y/z/e", false},
		{[]string{strings.Repeat("?", 100)}, "d/" + strings.Repeat("x", 100), true},
		{[]string{strings.Repeat("?", 100)}, "d/" + strings.Repeat("x", 99), false},
	}
	for _, c := range cases {
		if got := MustCompile(c.lines...).Match(c.path); got != c.want {
			t.Errorf("%q %q = %v, want %v", c.lines, c.path, got, c.want)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	sets := compileBenchSets(t)
	paths := benchPaths(500)
	want := make([][]bool, len(paths))
	for i, p := range paths {
		for _, s := range sets {
			want[i] = append(want[i], s.Match(p))
		}
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, p := range paths {
				pp := Prepare(p)
				for j, s := range sets {
					if s.MatchPath(pp) != want[i][j] {
						t.Errorf("concurrent mismatch %q", p)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

func TestMatchDoesNotAllocate(t *testing.T) {
	s := MustCompile("src/**/*.go", "!vendor/**", "*.rs")
	p := "src/a/b/c/d/e.go"
	if n := testing.AllocsPerRun(100, func() { s.Match(p) }); n != 0 {
		t.Errorf("Match allocates %v times", n)
	}
	pp := Prepare(p)
	if n := testing.AllocsPerRun(100, func() { s.MatchPath(pp) }); n != 0 {
		t.Errorf("MatchPath allocates %v times", n)
	}
}

// MustCompile is Compile that panics on error, for tests.
func MustCompile(lines ...string) *Set {
	s, err := Compile(lines)
	if err != nil {
		panic(err)
	}
	return s
}

func TestTooManyWildcards(t *testing.T) {
	if _, err := Compile([]string{strings.Repeat("*a", MaxWildcards+1)}); err == nil || !strings.Contains(err.Error(), "wildcards, more than") {
		t.Fatalf("%v", err)
	}
	if _, err := Compile([]string{strings.Repeat("*a", MaxWildcards)}); err != nil {
		t.Fatal(err)
	}
}
