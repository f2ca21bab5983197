// Package pattern matches project-relative file paths against gitignore-style patterns (SPEC §9.4).
//
// A callback's pattern is one gitignore line or a list of them, compiled once into a Set.
// Semantics are git's, with `git check-ignore --no-index` as the reference (testdata/git_table.json
// is generated from it, see TestGitTable):
//
//   - blank lines and lines starting with '#' are ignored; unescaped trailing spaces are dropped
//     ("\ " keeps one); a leading '!' negates the line ("\!" and "\#" are literal);
//   - a trailing '/' makes the line match directories only, that is, the files under them;
//   - a line without any other '/' matches the basename of the path or of any of its parent
//     directories, at any depth ("build" matches "a/build/x.o");
//   - a line with a leading or middle '/' is anchored to the root and matched against the whole
//     path and each parent directory ("a/b" matches "a/b" and "a/b/c");
//   - '*' and '?' never match '/'; "[...]", "[!...]" / "[^...]", ranges and "[:alpha:]"-style
//     classes match one byte but never '/'; '\' escapes the next byte;
//   - "**/" at the start or after a '/' matches zero or more directories, "/**" at the end matches
//     everything below; elsewhere "**" is a '*';
//   - the last line that matches decides; a negated line re-includes, except that once a parent
//     directory is matched (excluded) nothing below it can be re-included, as in git;
//   - matching is byte-wise and case-sensitive (core.ignoreCase=false), like git's wildmatch.
//
// The paths handed to Match are files (a directory itself is never a changed path); a path that
// is empty, the root itself, or leaves the root never matches.
//
// Patterns are translated to github.com/gobwas/glob globs (compiled with '/' as separator, "**" as
// its globstar) after literal fast paths (exact names, "*.ext" suffixes, literal prefixes) have been
// taken out. To test many paths against many sets, Prepare each path once and call MatchPath.
package pattern

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Set is a compiled list of gitignore lines. It is immutable and safe for concurrent use.
type Set struct {
	rules []rule
	neg   bool // some rule is negated: the order of the rules matters
}

// Compile translates gitignore lines to gobwas globs and compiles them once. An empty list, a list
// with nothing but blank lines and comments, or a line that cannot be compiled is an error naming
// the line. Lines that git accepts but can never match (an unterminated "[", an unknown
// "[:class:]", a trailing lone '\') are reported as errors too. Blank lines and # comments are
// allowed and ignored. A line may not contain a newline or NUL; one trailing "\r" is dropped.
func Compile(lines []string) (*Set, error) {
	if len(lines) == 0 {
		return nil, errors.New("pattern: empty pattern list")
	}
	s := &Set{rules: make([]rule, 0, len(lines))}
	for i, line := range lines {
		r, skip, err := parseLine(line, i == 0)
		if err != nil {
			return nil, fmt.Errorf("pattern: line %d: %w", i+1, err)
		}
		if skip {
			continue
		}
		s.rules = append(s.rules, r)
		if r.neg {
			s.neg = true
		}
	}
	if len(s.rules) == 0 {
		return nil, errors.New("pattern: no pattern in the list (only blank lines or comments)")
	}
	if !s.neg {
		// Without negation the order is irrelevant: test the cheap rules first.
		rs := make([]rule, 0, len(s.rules))
		for pass := 0; pass < 2; pass++ {
			for _, r := range s.rules {
				if r.never {
					continue
				}
				slow := r.nfaOnly
				for _, m := range r.alts {
					slow = slow || m.kind == kGlob
				}
				if slow == (pass == 1) {
					rs = append(rs, r)
				}
			}
		}
		s.rules = rs
	}
	return s, nil
}

// Path is a relative path prepared for matching against many sets: cleaned and split at its
// slashes once. The zero Path matches nothing.
type Path struct {
	s     string  // the cleaned path
	ends  []int32 // offsets in s of the '/' ending each parent directory
	bloom bloom   // the bytes and pairs of bytes in s
	ascii bool    // s is ASCII: gobwas may match it
	ok    bool
}

// bloom is a 256-bit summary of the bytes and the pairs of adjacent bytes of a path: a rule's
// needle can only be in the path if all of the needle's bits are set.
type bloom [4]uint64

func bloomByte(c byte) uint32    { return (uint32(c) * 0x9E3779B1) >> 24 }
func bloomPair(a, b byte) uint32 { return ((uint32(a)<<8 | uint32(b)) * 0x85EBCA77) >> 24 }

func (f *bloom) set(i uint32) { f[i>>6] |= 1 << (i & 63) }
func (f *bloom) covers(m *bloom) bool {
	return f[0]&m[0] == m[0] && f[1]&m[1] == m[1] && f[2]&m[2] == m[2] && f[3]&m[3] == m[3]
}

// needleBloom is the bits a path containing needle has.
func needleBloom(needle string) (m bloom) {
	if len(needle) == 1 {
		m.set(bloomByte(needle[0]))
	}
	for i := 1; i < len(needle); i++ {
		m.set(bloomPair(needle[i-1], needle[i]))
	}
	return m
}

// Prepare prepares rel (slash-separated, relative to the root) for MatchPath. A leading "/" or
// "./", doubled or trailing slashes and "." components are tolerated and cleaned away; a path that
// is empty, the root itself, leaves the root ("..") or holds a NUL byte gives a Path that matches
// nothing.
func Prepare(rel string) Path {
	var p Path
	s, ok := cleanRel(rel)
	if !ok {
		return p
	}
	var buf []int32
	if n := strings.Count(s, "/"); n > 0 {
		buf = make([]int32, 0, n)
	}
	p.s, p.ends, p.ascii, p.ok = prepare(s, buf, &p.bloom)
	return p
}

// prepare splits a clean path and fills its bloom; it returns the parts of a Path apart, for
// escape analysis (see match).
func prepare(s string, buf []int32, f *bloom) (string, []int32, bool, bool) {
	ends := buf[:0]
	var high, prev byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		high |= c
		switch c {
		case '/':
			ends = append(ends, int32(i))
		case 0:
			return "", nil, false, false // no file name holds NUL
		}
		f.set(bloomByte(c))
		if i > 0 {
			f.set(bloomPair(prev, c))
		}
		prev = c
	}
	return s, ends, high < utf8.RuneSelf, true
}

// String returns the path as given (cleaned).
func (p Path) String() string {
	return p.s
}

// Match reports whether rel (slash-separated, relative to the root, no leading "./" or "/") is
// matched by the set: the last matching line is not negated, or a parent directory of rel is
// matched. See Prepare for how unusual paths are treated. Match does not allocate for paths of
// up to 32 levels.
func (s *Set) Match(rel string) bool {
	rel, ok := cleanRel(rel)
	if !ok {
		return false
	}
	var buf [32]int32
	var f bloom
	str, ends, ascii, ok := prepare(rel, buf[:0], &f)
	if !ok {
		return false
	}
	return s.match(str, ends, &f, ascii)
}

// MatchPath is Match for a prepared path.
func (s *Set) MatchPath(p Path) bool {
	if !p.ok {
		return false
	}
	return s.match(p.s, p.ends, &p.bloom, p.ascii)
}

// match takes a Path's fields apart: a Path's ends must not escape along with its string (which
// goes to gobwas through an interface).
func (s *Set) match(str string, ends []int32, f *bloom, ascii bool) bool {
	// Rules whose needle is missing cannot match at any level. If no positive rule is left, the
	// set cannot match; if no negated rule is left, the order is irrelevant.
	var live uint64
	pos, neg := false, false
	for i := range s.rules {
		r := &s.rules[i]
		if i < 64 && !r.maybe(str, f) {
			continue
		}
		if i < 64 {
			live |= 1 << i
		}
		if r.neg {
			neg = true
		} else {
			pos = true
		}
	}
	if !pos {
		return false
	}
	if !neg {
		for i := range s.rules {
			if (i >= 64 || live&(1<<i) != 0) && !s.rules[i].neg && s.rules[i].matchAny(str, ends, ascii) {
				return true
			}
		}
		return false
	}
	start := 0
	for k, e := range ends {
		if s.decide(live, str[:e], str[start:e], k, true, ascii) > 0 {
			return true // an excluded directory: nothing below can be re-included
		}
		start = int(e) + 1
	}
	return s.decide(live, str, str[start:], len(ends), false, ascii) > 0
}

// maybe is the rule's quick filter on the whole path.
func (r *rule) maybe(s string, f *bloom) bool {
	if r.never {
		return false
	}
	if r.prefixNeedle {
		return strings.HasPrefix(s, r.needle)
	}
	return f.covers(&r.needleBloom) && strings.Contains(s, r.needle)
}

// decide returns 1 when the last rule matching one level (a parent directory or the file) is
// positive, -1 when it is negated, 0 when no rule matches. full has slashes '/' in it; ascii tells
// whether gobwas may be used; live has the rules that may match (beyond 64, all may).
func (s *Set) decide(live uint64, full, base string, slashes int, isDir, ascii bool) int {
	for i := len(s.rules) - 1; i >= 0; i-- {
		if i < 64 && live&(1<<i) == 0 {
			continue
		}
		r := &s.rules[i]
		if r.dirOnly && !isDir {
			continue
		}
		if r.matchLevel(full, base, slashes, ascii) {
			if r.neg {
				return -1
			}
			return 1
		}
	}
	return 0
}

// matchLevel tests one level: a parent directory or the file itself.
func (r *rule) matchLevel(full, base string, slashes int, ascii bool) bool {
	if r.nfaOnly || (r.fallback && !ascii) {
		if r.base {
			return r.nfa.match(base)
		}
		return r.nfa.match(full)
	}
	for i := range r.alts {
		m := &r.alts[i]
		if r.base {
			if m.match(base) {
				return true
			}
			continue
		}
		if slashes < m.minSlash || (m.maxSlash >= 0 && slashes > m.maxSlash) {
			continue
		}
		if m.match(full) {
			return true
		}
	}
	return false
}

// matchAny reports whether the rule matches the file or any of its parent directories.
func (r *rule) matchAny(s string, ends []int32, ascii bool) bool {
	if r.nfaOnly || (r.fallback && !ascii) {
		start := 0
		for k, e := range ends {
			if r.matchLevel(s[:e], s[start:e], k, false) {
				return true
			}
			start = int(e) + 1
		}
		return !r.dirOnly && r.matchLevel(s, s[start:], len(ends), false)
	}
	for i := range r.alts {
		m := &r.alts[i]
		if r.base {
			// the file's basename first: the usual match
			if !r.dirOnly {
				last := 0
				if len(ends) > 0 {
					last = int(ends[len(ends)-1]) + 1
				}
				if m.match(s[last:]) {
					return true
				}
			}
			start := 0
			for _, e := range ends {
				if m.match(s[start:e]) {
					return true
				}
				start = int(e) + 1
			}
			continue
		}
		if !strings.HasPrefix(s, m.lit) {
			continue // no parent starts with lit either
		}
		n := len(ends)
		hi := n
		if m.maxSlash >= 0 && m.maxSlash < hi {
			hi = m.maxSlash
		}
		for k := m.minSlash; k <= hi; k++ {
			if k == n {
				if !r.dirOnly && m.match(s) {
					return true
				}
				break
			}
			if m.match(s[:ends[k]]) {
				return true
			}
		}
	}
	return false
}

// match tests one candidate: a basename for basename rules, a root-relative path otherwise.
func (m *matcher) match(c string) bool {
	switch m.kind {
	case kLiteral:
		return c == m.lit
	case kPrefix:
		return strings.HasPrefix(c, m.lit)
	case kPrefixNoSep:
		return strings.HasPrefix(c, m.lit) && strings.IndexByte(c[len(m.lit):], '/') < 0
	case kPrefixSuffix:
		if len(c) < len(m.lit)+len(m.suf) || !strings.HasPrefix(c, m.lit) || !strings.HasSuffix(c, m.suf) {
			return false
		}
		return strings.IndexByte(c[len(m.lit):len(c)-len(m.suf)], '/') < 0
	case kGlob:
		if len(c) < len(m.lit)+len(m.suf)+m.minMid || !strings.HasPrefix(c, m.lit) || !strings.HasSuffix(c, m.suf) {
			return false
		}
		return m.g.Match(c[len(m.lit) : len(c)-len(m.suf)])
	}
	return false
}

// cleanRel cleans a relative path; ok is false for the root itself or a path leaving it.
func cleanRel(rel string) (string, bool) {
	if !needsClean(rel) {
		return rel, true
	}
	rel = path.Clean(strings.TrimLeft(rel, "/"))
	if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

// needsClean reports whether rel is not already a clean relative path without "." or "..".
func needsClean(rel string) bool {
	if rel == "" || rel[0] == '/' || rel[len(rel)-1] == '/' {
		return true
	}
	start := 0
	for i := 0; i <= len(rel); i++ {
		if i == len(rel) || rel[i] == '/' {
			switch rel[start:i] {
			case "", ".", "..":
				return true
			}
			start = i + 1
		}
	}
	return false
}

// Relative turns path (absolute, or relative to root) into the cleaned slash-separated path relative
// to root. ok is false when the path is outside root (after cleaning ".."), is root itself, or
// root is not absolute. It is purely lexical: it does not touch the file system, so symbolic links
// are not resolved (a link inside the root pointing elsewhere still counts as inside).
func Relative(root, p string) (rel string, ok bool) {
	if !filepath.IsAbs(root) {
		return "", false
	}
	root = filepath.Clean(root)
	if filepath.IsAbs(p) {
		p = filepath.Clean(p)
	} else {
		p = filepath.Join(root, p)
	}
	r, err := filepath.Rel(root, p)
	if err != nil || r == "." || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) || filepath.IsAbs(r) {
		return "", false
	}
	return filepath.ToSlash(r), true
}
