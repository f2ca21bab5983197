package pattern

import (
	"errors"
	"strings"
	"testing"
)

// FuzzCompile fuzzes the glob translator (SPEC §13): an arbitrary list of lines (split at '\n')
// and an arbitrary path never panic, and whenever Compile accepts the lines, Match agrees with
// the reference implementation of git's algorithm (ref_test.go, itself checked against git by
// TestGitTable). Compile errors are fine.
func FuzzCompile(f *testing.F) {
	for _, set := range tableSets {
		f.Add(strings.Join(set, "\n"), "a/b/c.txt")
	}
	for i, p := range tablePaths {
		f.Add(strings.Join(tableSets[i%len(tableSets)], "\n"), p)
	}
	f.Add("**/x/**/y", "x/y")
	f.Add("a/**/b\n!a/**/c/", "a/c/b")
	f.Add("[\xff-\xff]", "\xff")
	f.Add("\xc3?", "\xc3\xa9")
	f.Fuzz(func(t *testing.T, lines, path string) {
		set, err := Compile(strings.Split(lines, "\n"))
		if errors.Is(err, errTranslate) {
			t.Fatal(err)
		}
		if err != nil {
			return
		}
		got := set.Match(path)
		if gotP := set.MatchPath(Prepare(path)); gotP != got {
			t.Fatalf("Match %v != MatchPath %v", got, gotP)
		}
		clean, ok := cleanRel(path)
		if !ok || strings.IndexByte(clean, 0) >= 0 {
			if got {
				t.Fatalf("%q matched a path outside the root: %q", lines, path)
			}
			return
		}
		if gotN := nfaOnly(set).Match(path); gotN != got {
			t.Fatalf("lines %q path %q: Match = %v, automaton only = %v", lines, clean, got, gotN)
		}
		// git's backtracking (the reference) is exponential in the number of stars
		if strings.Count(lines, "*") > 6 || len(clean) > 200 {
			return
		}
		if want := refIgnored(refParse(strings.Split(lines, "\n")), clean); got != want {
			t.Fatalf("lines %q path %q: Match = %v, git's algorithm says %v", lines, clean, got, want)
		}
	})
}
