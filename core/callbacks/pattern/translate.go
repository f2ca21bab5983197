package pattern

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/gobwas/glob"
)

// This file turns one gitignore line into a rule: git's parsing (dir.c: trim_trailing_spaces,
// parse_path_pattern, match_basename, match_pathname) and git's wildmatch semantics, expressed as
// literal fast paths and, where needed, a gobwas glob compiled with '/' as separator.
//
// Byte semantics. git's wildmatch works on bytes ('?' matches one byte of a UTF-8 name), gobwas on
// runes (and its fixed-length Row matcher mis-measures multi-byte runes). Literal fast paths
// compare bytes and are exact for any input; a gobwas glob only ever sees ASCII candidates (it is
// compiled for them: non-ASCII pattern bytes cannot match there), and a candidate that is not ASCII
// goes to the byte-exact wildmatch of wildmatch.go.

type kind uint8

const (
	kLiteral      kind = iota // candidate == lit
	kPrefix                   // HasPrefix(candidate, lit); rest free (trailing "**", or "*" in a basename)
	kPrefixNoSep              // HasPrefix(candidate, lit) and no '/' after it (trailing "*", anchored)
	kPrefixSuffix             // lit + "*" + suf (no '/' in between)
	kGlob                     // HasPrefix(candidate, lit), HasSuffix(candidate, suf), g matches the rest
)

// rule is one compiled gitignore line.
type rule struct {
	neg     bool // "!" line
	dirOnly bool // trailing "/": matches directories only
	base    bool // no '/' in the pattern: matched against the basename at any depth
	never   bool // cannot match anything (e.g. an empty bracket set)
	alts    []matcher
	// fallback: some alternative needs gobwas, which is only exact for ASCII candidates; other
	// candidates go to the byte-exact automaton. nfaOnly: the pattern is too complex for gobwas
	// (see gobwasMaxStars), the automaton does all the matching.
	fallback, nfaOnly bool
	nfa               *nfa
	// needle is a quick necessary condition on the whole path: it starts with needle (anchored
	// rules, prefixNeedle) or contains it (basename rules).
	needle       string
	prefixNeedle bool
	needleBloom  bloom
	line         string // the line as given
}

// Limits beyond which a line is matched by the automaton of nfa.go rather than by gobwas:
// gobwas' backtracking grows like len(path)^stars, its compile time like tokens², and each "**/"
// doubles the alternatives.
const (
	gobwasMaxStars      = 4
	gobwasMaxTokens     = 64
	gobwasMaxSuperSlash = 2
)

// matcher is one alternative of a rule: "**/" is compiled as two alternatives, without it and
// with gobwas' "**/" (gobwas' own {,...} alternatives mis-match inside longer patterns).
type matcher struct {
	kind kind
	// anchored rules only: the number of '/' a matching candidate has at least, and at most
	// (maxSlash < 0: unbounded, the pattern holds a "**" that may cross '/').
	minSlash, maxSlash int
	lit, suf           string // mapped
	g                  glob.Glob
	// kGlob: the least number of bytes the part matched by g has (its '?' and classes). gobwas'
	// single-character matchers accept the empty string, so this is a correctness guard too.
	minMid int
}

// errTranslate marks a gobwas compile error: a bug of the translation, never the user's fault.
var errTranslate = errors.New("internal error translating to gobwas")

type tokKind uint8

const (
	tLit        tokKind = iota // one byte
	tStar                      // "*": any run of bytes but '/'
	tAny1                      // "?": one byte but '/'
	tClass                     // "[...]": one byte of set (never '/')
	tSuper                     // "**" at the end, or before an escaped slash: anything
	tSuperSlash                // "**/" : empty, or anything ending in '/'
)

type token struct {
	kind tokKind
	b    byte
	set  *[256]bool
}

// trimTrailingSpaces is git's trim_trailing_spaces: unescaped trailing spaces go; a line ending in
// a lone backslash is left alone.
func trimTrailingSpaces(s string) string {
	lastSpace := -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			if lastSpace < 0 {
				lastSpace = i
			}
		case '\\':
			i++
			if i >= len(s) {
				return s
			}
			lastSpace = -1
		default:
			lastSpace = -1
		}
	}
	if lastSpace >= 0 {
		return s[:lastSpace]
	}
	return s
}

// simpleLength is git's simple_length: the bytes before the first of *?[\.
func simpleLength(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', '\\':
			return i
		}
	}
	return len(s)
}

// parseLine parses one gitignore line. skip is true for blank lines, comments and lines that are
// empty after git's processing (git keeps them but they can never match).
// MaxWildcards is the most '*' one pattern line may hold.
const MaxWildcards = 32

func parseLine(line string, first bool) (r rule, skip bool, err error) {
	r.line = line
	s := line
	if first {
		s = strings.TrimPrefix(s, "\uFEFF") // git skips a UTF-8 BOM at the start of the file
	}
	if strings.ContainsAny(s, "\n\x00") {
		return r, false, fmt.Errorf("pattern %q: contains a newline or NUL byte", line)
	}
	if s == "" || s[0] == '#' {
		return r, true, nil
	}
	// Wildcards make matching cost grow with their number: a bound keeps
	// one line from costing a trigger seconds per path.
	if n := strings.Count(s, "*"); n > MaxWildcards {
		return r, false, fmt.Errorf("pattern %q: %d wildcards, more than the %d allowed", line, n, MaxWildcards)
	}
	s = strings.TrimSuffix(s, "\r") // a CRLF file
	s = trimTrailingSpaces(s)
	if s != "" && s[0] == '!' {
		r.neg = true
		s = s[1:]
	}
	if n := len(s); n > 0 && s[n-1] == '/' {
		r.dirOnly = true
		s = s[:n-1]
	}
	if s == "" {
		return r, true, nil
	}
	r.base = strings.IndexByte(s, '/') < 0
	start := 0
	if !r.base {
		if s[0] == '/' {
			s = s[1:]
		}
		// git compares the literal prefix, then wildmatches the rest as a pattern of its own:
		// a "**" right after that prefix counts as being at the start of the pattern.
		start = simpleLength(s)
	}
	toks, never, err := tokenize(s, !r.base, start)
	if err != nil {
		return r, false, fmt.Errorf("pattern %q: %v", line, err)
	}
	if never {
		r.never = true
		return r, false, nil
	}
	if err := r.build(toks); err != nil {
		return r, false, fmt.Errorf("pattern %q: %w", line, err)
	}
	return r, false, nil
}

// build compiles the alternatives of a token list: each "**/" is either dropped or kept.
func (r *rule) build(toks []token) error {
	// "**/**/" is "**/", "**/" followed by a final "**" is that "**"
	var merged []token
	n := 0
	for i, t := range toks {
		if t.kind == tSuperSlash && i+1 < len(toks) && (toks[i+1].kind == tSuperSlash || toks[i+1].kind == tSuper) {
			continue
		}
		if t.kind == tSuperSlash {
			n++
		}
		merged = append(merged, t)
	}
	r.nfa = newNFA(merged)
	r.setNeedle(merged)
	r.needleBloom = needleBloom(r.needle)
	stars := 0
	for _, t := range merged {
		switch t.kind {
		case tStar, tSuper, tSuperSlash:
			stars++
		}
	}
	if n > gobwasMaxSuperSlash || stars > gobwasMaxStars || len(merged) > gobwasMaxTokens {
		r.nfaOnly = true
		return nil
	}
	seen := map[string]bool{}
	for mask := 0; mask < 1<<n; mask++ {
		var v []token
		k := 0
		for _, t := range merged {
			if t.kind == tSuperSlash {
				keep := mask&(1<<k) != 0
				k++
				if !keep {
					continue
				}
			}
			v = append(v, t)
		}
		m, key, err := buildMatcher(v, r.base)
		if err != nil {
			return err
		}
		if m.kind == kGlob || key == "" {
			r.fallback = true
		}
		if key != "" && !seen[key] {
			seen[key] = true
			r.alts = append(r.alts, m)
		}
	}
	return nil
}

// tokenize splits a wildmatch pattern. pathname selects WM_PATHNAME semantics (anchored patterns);
// without it (basename patterns, whose text never holds '/'), every run of stars is one "*".
// start is where git's wildmatch pattern begins (after the literal prefix), for the "**" rule.
func tokenize(p string, pathname bool, start int) (toks []token, never bool, err error) {
	for i := 0; i < len(p); {
		c := p[i]
		switch c {
		case '*':
			j := i
			for j < len(p) && p[j] == '*' {
				j++
			}
			if pathname && j-i >= 2 && (i == start || (i > 0 && p[i-1] == '/')) {
				switch {
				case j == len(p):
					toks = append(toks, token{kind: tSuper})
					i = j
					continue
				case p[j] == '/':
					toks = append(toks, token{kind: tSuperSlash})
					i = j + 1
					continue
				case p[j] == '\\' && j+1 < len(p) && p[j+1] == '/':
					toks = append(toks, token{kind: tSuper})
					i = j
					continue
				}
			}
			toks = append(toks, token{kind: tStar})
			i = j
		case '?':
			toks = append(toks, token{kind: tAny1})
			i++
		case '\\':
			if i+1 >= len(p) {
				return nil, false, fmt.Errorf("trailing backslash (git never matches it)")
			}
			toks = append(toks, token{kind: tLit, b: p[i+1]})
			i += 2
		case '[':
			set, n, err := parseClass(p[i:])
			if err != nil {
				return nil, false, err
			}
			set['/'] = false // with WM_PATHNAME a class never matches '/'; a basename has none
			count, only := 0, byte(0)
			for b := 0; b < 256; b++ {
				if set[b] {
					count++
					only = byte(b)
				}
			}
			switch count {
			case 0:
				never = true
			case 1:
				toks = append(toks, token{kind: tLit, b: only})
			default:
				toks = append(toks, token{kind: tClass, set: set})
			}
			i += n
		default:
			toks = append(toks, token{kind: tLit, b: c})
			i++
		}
	}
	return toks, never, nil
}

// parseClass parses a bracket expression at the start of p as git's wildmatch does and returns the
// set of bytes it matches and its length.
func parseClass(p string) (*[256]bool, int, error) {
	var set [256]bool
	i := 1
	at := func(k int) byte {
		if k < len(p) {
			return p[k]
		}
		return 0
	}
	negated := false
	if c := at(i); c == '!' || c == '^' {
		negated = true
		i++
	}
	var prev byte
	for first := true; ; first = false {
		c := at(i)
		if !first && c == ']' {
			i++
			break
		}
		if i >= len(p) {
			return nil, 0, fmt.Errorf("unterminated [ (git never matches it)")
		}
		switch {
		case c == '\\':
			i++
			if i >= len(p) {
				return nil, 0, fmt.Errorf("unterminated [ (git never matches it)")
			}
			c = p[i]
			set[c] = true
		case c == '-' && prev != 0 && i+1 < len(p) && p[i+1] != ']':
			i++
			hi := p[i]
			if hi == '\\' {
				i++
				if i >= len(p) {
					return nil, 0, fmt.Errorf("unterminated [ (git never matches it)")
				}
				hi = p[i]
			}
			for b := int(prev); b <= int(hi); b++ {
				set[b] = true
			}
			c = 0 // prev becomes 0
		case c == '[' && at(i+1) == ':':
			s := i + 2
			e := s
			for e < len(p) && p[e] != ']' {
				e++
			}
			if e >= len(p) {
				return nil, 0, fmt.Errorf("unterminated [ (git never matches it)")
			}
			if e-s-1 < 0 || p[e-1] != ':' {
				// no ":]": a plain '[' (git goes on at the ':')
				set['['] = true
				break
			}
			name := p[s : e-1]
			fn, ok := posixClasses[name]
			if !ok {
				return nil, 0, fmt.Errorf("unknown character class [:%s:] (git never matches it)", name)
			}
			for b := 0; b < 128; b++ {
				if fn(byte(b)) {
					set[b] = true
				}
			}
			i = e
			c = 0
		default:
			set[c] = true
		}
		prev = c
		i++
	}
	if negated {
		for b := range set {
			set[b] = !set[b]
		}
	}
	return &set, i, nil
}

// posixClasses are wildmatch's [:name:] classes, ASCII only, with git's ctype (sane_ctype: space
// is \t \n \r and ' ').
var posixClasses = map[string]func(c byte) bool{
	"alnum":  func(c byte) bool { return isAlpha(c) || isDigit(c) },
	"alpha":  isAlpha,
	"blank":  func(c byte) bool { return c == ' ' || c == '\t' },
	"cntrl":  func(c byte) bool { return c < 0x20 || c == 0x7f },
	"digit":  isDigit,
	"graph":  func(c byte) bool { return c > 0x20 && c < 0x7f },
	"lower":  func(c byte) bool { return c >= 'a' && c <= 'z' },
	"print":  func(c byte) bool { return c >= 0x20 && c < 0x7f },
	"punct":  func(c byte) bool { return c > 0x20 && c < 0x7f && !isAlpha(c) && !isDigit(c) },
	"space":  func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' },
	"upper":  func(c byte) bool { return c >= 'A' && c <= 'Z' },
	"xdigit": func(c byte) bool { return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') },
}

func isAlpha(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func litString(toks []token) string {
	b := make([]byte, len(toks))
	for i, t := range toks {
		b[i] = t.b
	}
	return string(b)
}

// setNeedle derives the rule's quick filter from its leading and trailing literal bytes.
func (r *rule) setNeedle(toks []token) {
	n := 0
	for n < len(toks) && toks[n].kind == tLit {
		n++
	}
	lead := litString(toks[:n])
	if !r.base {
		r.needle, r.prefixNeedle = lead, true
		return
	}
	m := len(toks)
	for m > n && toks[m-1].kind == tLit {
		m--
	}
	trail := litString(toks[m:])
	if n == len(toks) || len(trail) >= len(lead) {
		// the end of a basename is followed by '/' when it is a directory's
		r.needle = trail
		if r.dirOnly {
			r.needle += "/"
		}
		return
	}
	r.needle = lead
}

// buildMatcher chooses the fast path for a token list without alternatives, or compiles the
// gobwas glob. key identifies the matcher, to drop duplicates; it is "" for a glob that cannot
// match any ASCII candidate (then only the byte-exact fallback can match).
func buildMatcher(toks []token, base bool) (m matcher, key string, err error) {
	r := &m
	// literal prefix and suffix
	n := 0
	for n < len(toks) && toks[n].kind == tLit {
		n++
	}
	r.lit = litString(toks[:n])
	rest := toks[n:]
	end := len(rest)
	for end > 0 && rest[end-1].kind == tLit {
		end--
	}
	r.suf = litString(rest[end:])
	mid := rest[:end]

	// bounds on the number of '/' of a matching candidate (anchored rules)
	unbounded := false
	for _, t := range toks {
		switch t.kind {
		case tLit:
			if t.b == '/' {
				r.minSlash++
			}
		case tSuper, tSuperSlash:
			unbounded = true
		}
	}
	r.maxSlash = r.minSlash
	if unbounded {
		r.maxSlash = -1
	}

	switch {
	case len(mid) == 0:
		r.kind = kLiteral
		return m, "L" + r.lit, nil
	case len(mid) == 1 && mid[0].kind == tStar && base:
		if r.suf == "" {
			r.kind = kPrefix
			return m, "P" + r.lit, nil
		}
		r.kind = kPrefixSuffix
		return m, "PS" + r.lit + "\x00" + r.suf, nil
	case len(mid) == 1 && mid[0].kind == tStar:
		if r.suf == "" {
			r.kind = kPrefixNoSep
			return m, "PN" + r.lit, nil
		}
		if !strings.Contains(r.suf, "/") {
			r.kind = kPrefixSuffix
			return m, "PS" + r.lit + "\x00" + r.suf, nil
		}
	case len(mid) == 1 && mid[0].kind == tSuper && r.suf == "":
		r.kind = kPrefix
		return m, "P" + r.lit, nil
	}
	// gobwas for the middle part (the candidate minus lit and suf), for ASCII candidates
	var b []byte
	for _, t := range mid {
		switch t.kind {
		case tLit, tAny1, tClass:
			r.minMid++
		}
		if t.kind == tClass {
			var ascii [256]bool
			count, only := 0, byte(0)
			for c := 1; c < utf8.RuneSelf; c++ { // not NUL, gobwas' end of input (paths hold none)
				if t.set[c] {
					ascii[c] = true
					count++
					only = byte(c)
				}
			}
			switch count {
			case 0:
				return m, "", nil
			case 1:
				t = token{kind: tLit, b: only}
			default:
				t.set = &ascii
			}
		}
		switch t.kind {
		case tLit:
			if t.b >= utf8.RuneSelf {
				return m, "", nil
			}
			if strings.IndexByte(`*?\[]{},!-`, t.b) >= 0 {
				b = append(b, '\\')
			}
			b = append(b, t.b)
		case tStar:
			b = append(b, '*')
		case tAny1:
			b = append(b, '?')
		case tSuper:
			b = append(b, "**"...)
		case tSuperSlash:
			b = append(b, "**/"...)
		case tClass:
			b = appendClass(b, t.set)
		}
	}
	g, err := glob.Compile(string(b), '/')
	if err != nil {
		return m, "", fmt.Errorf("%w: glob %q: %v", errTranslate, b, err)
	}
	r.kind = kGlob
	r.g = g
	return m, "G" + r.lit + "\x00" + r.suf + "\x00" + string(b), nil
}

// appendClass writes a set of at least two ASCII bytes in gobwas syntax: a plain range when it is
// one, else an escaped list, '-' never first (gobwas would read a range). Never a negated list:
// gobwas glues a run of identical negated lists into a "does not contain the string of the list"
// matcher, which is wrong for lists of more than one character.
func appendClass(b []byte, set *[256]bool) []byte {
	lo, hi := -1, -1
	contiguous := true
	for c := 0; c < utf8.RuneSelf; c++ {
		if set[c] {
			if lo < 0 {
				lo = c
			} else if hi != c-1 {
				contiguous = false
			}
			hi = c
		}
	}
	if contiguous && lo != '!' && lo != '\\' && lo != '-' {
		return append(b, '[', byte(lo), '-', byte(hi), ']')
	}
	b = append(b, '[')
	dash := false
	for c := 0; c < utf8.RuneSelf; c++ {
		if !set[c] {
			continue
		}
		if c == '-' {
			dash = true
			continue
		}
		b = append(b, '\\', byte(c))
	}
	if dash {
		b = append(b, '\\', '-')
	}
	return append(b, ']')
}
