package pattern

import "strings"

// A straightforward Go rendering of git's own algorithm (dir.c: add_pattern, match_basename,
// match_pathname, prep_exclude/last_matching_pattern; wildmatch.c: dowild), written for the tests
// only: the fuzz target checks the gobwas-based matcher against it on arbitrary input, and
// TestGitTable checks it against git itself.

const (
	wmMatch           = 0
	wmNoMatch         = 1
	wmAbortAll        = -1
	wmAbortToStarStar = -2
)

func byteAt(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

func isGlobSpecial(c byte) bool { return c == '*' || c == '?' || c == '[' || c == '\\' }

// dowild is wildmatch's dowild on NUL-free strings; pathname is WM_PATHNAME.
func dowild(pat string, p int, text string, t int, pathname bool) int {
	start := p
	for ; byteAt(pat, p) != 0; t, p = t+1, p+1 {
		pch := pat[p]
		tch := byteAt(text, t)
		if tch == 0 && pch != '*' {
			return wmAbortAll
		}
		switch pch {
		case '\\':
			p++
			pch = byteAt(pat, p)
			if tch != pch {
				return wmNoMatch
			}
			continue
		default:
			if tch != pch {
				return wmNoMatch
			}
			continue
		case '?':
			if pathname && tch == '/' {
				return wmNoMatch
			}
			continue
		case '*':
			var matchSlash bool
			p++
			if byteAt(pat, p) == '*' {
				prev := p - 2
				p++
				for byteAt(pat, p) == '*' {
					p++
				}
				if !pathname {
					matchSlash = true
				} else if (prev < start || pat[prev] == '/') &&
					(byteAt(pat, p) == 0 || byteAt(pat, p) == '/' || (byteAt(pat, p) == '\\' && byteAt(pat, p+1) == '/')) {
					if byteAt(pat, p) == '/' && dowild(pat, p+1, text, t, pathname) == wmMatch {
						return wmMatch
					}
					matchSlash = true
				} else {
					matchSlash = false
				}
			} else {
				matchSlash = !pathname
			}
			if byteAt(pat, p) == 0 {
				if !matchSlash && strings.IndexByte(text[t:], '/') >= 0 {
					return wmNoMatch
				}
				return wmMatch
			} else if !matchSlash && pat[p] == '/' {
				k := strings.IndexByte(text[t:], '/')
				if k < 0 {
					return wmNoMatch
				}
				t += k
				continue // the slash is consumed by the loop
			}
			for {
				if tch == 0 {
					break
				}
				if !isGlobSpecial(pat[p]) {
					pch = pat[p]
					for {
						tch = byteAt(text, t)
						if tch == 0 || (!matchSlash && tch == '/') {
							break
						}
						if tch == pch {
							break
						}
						t++
					}
					if tch != pch {
						return wmNoMatch
					}
				}
				m := dowild(pat, p, text, t, pathname)
				if m != wmNoMatch {
					if !matchSlash || m != wmAbortToStarStar {
						return m
					}
				} else if !matchSlash && tch == '/' {
					return wmAbortToStarStar
				}
				t++
				tch = byteAt(text, t)
			}
			return wmAbortAll
		case '[':
			p++
			pch = byteAt(pat, p)
			if pch == '^' {
				pch = '!'
			}
			negated := pch == '!'
			if negated {
				p++
				pch = byteAt(pat, p)
			}
			var prevCh byte
			matched := false
			for {
				if pch == 0 {
					return wmAbortAll
				}
				if pch == '\\' {
					p++
					pch = byteAt(pat, p)
					if pch == 0 {
						return wmAbortAll
					}
					if tch == pch {
						matched = true
					}
				} else if pch == '-' && prevCh != 0 && byteAt(pat, p+1) != 0 && byteAt(pat, p+1) != ']' {
					p++
					pch = pat[p]
					if pch == '\\' {
						p++
						pch = byteAt(pat, p)
						if pch == 0 {
							return wmAbortAll
						}
					}
					if tch <= pch && tch >= prevCh {
						matched = true
					}
					pch = 0
				} else if pch == '[' && byteAt(pat, p+1) == ':' {
					p += 2
					s := p
					for byteAt(pat, p) != 0 && pat[p] != ']' {
						p++
					}
					if byteAt(pat, p) == 0 {
						return wmAbortAll
					}
					i := p - s - 1
					if i < 0 || pat[p-1] != ':' {
						p = s - 2
						pch = '['
						if tch == pch {
							matched = true
						}
					} else {
						fn, ok := posixClasses[pat[s:s+i]]
						if !ok {
							return wmAbortAll
						}
						if tch < 128 && fn(tch) {
							matched = true
						}
						pch = 0
					}
				} else if tch == pch {
					matched = true
				}
				prevCh = pch
				p++
				pch = byteAt(pat, p)
				if pch == ']' {
					break
				}
			}
			if matched == negated || (pathname && tch == '/') {
				return wmNoMatch
			}
			continue
		}
	}
	if t < len(text) {
		return wmNoMatch
	}
	return wmMatch
}

func wildmatch(pat, text string, pathname bool) bool {
	return dowild(pat, 0, text, 0, pathname) == wmMatch
}

type refPattern struct {
	pat        string // after "!" and the trailing "/"
	neg, dir   bool
	nodir      bool
	endswith   bool
	nowildcard int
}

func refParse(lines []string) []refPattern {
	var out []refPattern
	for i, line := range lines {
		if i == 0 {
			line = strings.TrimPrefix(line, "\uFEFF")
		}
		if line == "" || line[0] == '#' {
			continue
		}
		line = strings.TrimSuffix(line, "\r")
		line = trimTrailingSpaces(line)
		var rp refPattern
		p := line
		if strings.HasPrefix(p, "!") {
			rp.neg = true
			p = p[1:]
		}
		if n := len(p); n > 0 && p[n-1] == '/' {
			rp.dir = true
			p = p[:n-1]
		}
		rp.nodir = strings.IndexByte(p, '/') < 0
		rp.nowildcard = simpleLength(p)
		if strings.HasPrefix(p, "*") && simpleLength(p[1:]) == len(p)-1 {
			rp.endswith = true
		}
		rp.pat = p
		out = append(out, rp)
	}
	return out
}

func refMatchBasename(base string, x *refPattern) bool {
	if x.nowildcard == len(x.pat) {
		return base == x.pat
	}
	if x.endswith {
		return strings.HasSuffix(base, x.pat[1:])
	}
	return wildmatch(x.pat, base, false)
}

func refMatchPathname(pathname string, x *refPattern) bool {
	pat := x.pat
	prefix := x.nowildcard
	if strings.HasPrefix(pat, "/") {
		pat = pat[1:]
		prefix--
	}
	name := pathname
	if prefix > 0 {
		if prefix > len(name) {
			return false
		}
		if pat[:prefix] != name[:prefix] {
			return false
		}
		pat = pat[prefix:]
		name = name[prefix:]
		if pat == "" && name == "" {
			return true
		}
	}
	return wildmatch(pat, name, true)
}

// refLast is last_matching_pattern_from_list for one path of the given type.
func refLast(pats []refPattern, pathname string, isDir bool) *refPattern {
	base := pathname[strings.LastIndexByte(pathname, '/')+1:]
	for i := len(pats) - 1; i >= 0; i-- {
		x := &pats[i]
		if x.dir && !isDir {
			continue
		}
		if x.nodir {
			if refMatchBasename(base, x) {
				return x
			}
			continue
		}
		if refMatchPathname(pathname, x) {
			return x
		}
	}
	return nil
}

// refIgnored is git check-ignore --no-index for a file path: the first excluded parent directory
// decides, else the last pattern matching the file.
func refIgnored(pats []refPattern, path string) bool {
	for i := 0; i < len(path); i++ {
		if path[i] == '/' {
			if x := refLast(pats, path[:i], true); x != nil && !x.neg {
				return true
			}
		}
	}
	x := refLast(pats, path, false)
	return x != nil && !x.neg
}
