package rulelua

import (
	lua "github.com/yuin/gopher-lua"
)

// A port of Lua 5.1's pattern matcher (lstrlib.c) that counts its steps and polls the run's
// deadline every few thousand of them, and bounds its recursion like Lua 5.2 (MAXCCALLS), so a
// pathological pattern ends with the run's deadline instead of running unbounded inside one call.

const (
	maxCaptures   = 32
	capUnfinished = -1
	capPosition   = -2
	maxMatchDepth = 200
	specials      = "^$*+?.([%-"
)

type capture struct{ init, len int }

type matcher struct {
	st      *lstate
	L       *lua.LState
	src     string
	pat     string
	level   int
	depth   int
	steps   int
	capture [maxCaptures]capture
}

func (ms *matcher) step(n int) {
	ms.steps += n
	if ms.steps >= 2048 {
		ms.st.work(ms.L, ms.steps)
		ms.steps = 0
	}
}

func (ms *matcher) fail(msg string) { ms.L.RaiseError("%s", msg) }

func (ms *matcher) match(s, p int) int {
	ms.depth++
	if ms.depth > maxMatchDepth {
		ms.fail("pattern too complex")
	}
	r := ms.doMatch(s, p)
	ms.depth--
	return r
}

func (ms *matcher) doMatch(s, p int) int {
	src, pat := ms.src, ms.pat
	for {
		ms.step(1)
		if p == len(pat) {
			return s
		}
		switch pat[p] {
		case '(':
			if p+1 < len(pat) && pat[p+1] == ')' {
				return ms.startCapture(s, p+2, capPosition)
			}
			return ms.startCapture(s, p+1, capUnfinished)
		case ')':
			return ms.endCapture(s, p+1)
		case '$':
			if p+1 == len(pat) {
				if s == len(src) {
					return s
				}
				return -1
			}
		case '%':
			if p+1 < len(pat) {
				switch c := pat[p+1]; {
				case c == 'b':
					s = ms.matchBalance(s, p+2)
					if s == -1 {
						return -1
					}
					p += 4
					continue
				case c == 'f':
					p += 2
					if p >= len(pat) || pat[p] != '[' {
						ms.fail("missing '[' after '%f' in pattern")
					}
					ep := ms.classEnd(p)
					var prev, cur byte
					if s > 0 {
						prev = src[s-1]
					}
					if s < len(src) {
						cur = src[s]
					}
					if ms.matchBracketClass(prev, p, ep-1) || !ms.matchBracketClass(cur, p, ep-1) {
						return -1
					}
					p = ep
					continue
				case c >= '0' && c <= '9':
					s = ms.matchCapture(s, c)
					if s == -1 {
						return -1
					}
					p += 2
					continue
				}
			}
		}
		// a single pattern item, possibly followed by a quantifier
		ep := ms.classEnd(p)
		m := s < len(src) && ms.singleMatch(src[s], p, ep)
		if ep < len(pat) {
			switch pat[ep] {
			case '?':
				if m {
					if r := ms.match(s+1, ep+1); r != -1 {
						return r
					}
				}
				p = ep + 1
				continue
			case '*':
				return ms.maxExpand(s, p, ep)
			case '+':
				if m {
					return ms.maxExpand(s+1, p, ep)
				}
				return -1
			case '-':
				return ms.minExpand(s, p, ep)
			}
		}
		if !m {
			return -1
		}
		s++
		p = ep
	}
}

func (ms *matcher) classEnd(p int) int {
	pat := ms.pat
	c := pat[p]
	p++
	if c == '%' {
		if p >= len(pat) {
			ms.fail("malformed pattern (ends with '%')")
		}
		return p + 1
	}
	if c == '[' {
		if p < len(pat) && pat[p] == '^' {
			p++
		}
		for {
			if p >= len(pat) {
				ms.fail("malformed pattern (missing ']')")
			}
			c := pat[p]
			p++
			if c == '%' && p < len(pat) {
				p++
			}
			if p >= len(pat) {
				ms.fail("malformed pattern (missing ']')")
			}
			if pat[p] == ']' {
				break
			}
		}
		return p + 1
	}
	return p
}

func (ms *matcher) singleMatch(c byte, p, ep int) bool {
	switch ms.pat[p] {
	case '.':
		return true
	case '%':
		return matchClass(c, ms.pat[p+1])
	case '[':
		return ms.matchBracketClass(c, p, ep-1)
	}
	return ms.pat[p] == c
}

// matchBracketClass: p is at '[', ec at the closing ']'.
func (ms *matcher) matchBracketClass(c byte, p, ec int) bool {
	pat := ms.pat
	sig := true
	p++
	if pat[p] == '^' {
		sig = false
		p++
	}
	for ; p < ec; p++ {
		switch {
		case pat[p] == '%':
			p++
			if matchClass(c, pat[p]) {
				return sig
			}
		case p+2 < ec && pat[p+1] == '-':
			if pat[p] <= c && c <= pat[p+2] {
				return sig
			}
			p += 2
		case pat[p] == c:
			return sig
		}
	}
	return !sig
}

func matchClass(c, cl byte) bool {
	var res bool
	lower := cl | 0x20
	switch lower {
	case 'a':
		res = isAlpha(c)
	case 'c':
		res = c < 32 || c == 127
	case 'd':
		res = c >= '0' && c <= '9'
	case 'l':
		res = c >= 'a' && c <= 'z'
	case 'p':
		res = isPunct(c)
	case 's':
		res = c == ' ' || (c >= '\t' && c <= '\r')
	case 'u':
		res = c >= 'A' && c <= 'Z'
	case 'w':
		res = isAlpha(c) || (c >= '0' && c <= '9')
	case 'x':
		res = (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'f')
	case 'z':
		res = c == 0
	default:
		return cl == c
	}
	if cl >= 'A' && cl <= 'Z' {
		return !res
	}
	return res
}

func isAlpha(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }

func isPunct(c byte) bool {
	return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)
}

func (ms *matcher) maxExpand(s, p, ep int) int {
	i := 0
	for s+i < len(ms.src) && ms.singleMatch(ms.src[s+i], p, ep) {
		i++
	}
	ms.step(i)
	for ; i >= 0; i-- {
		ms.step(1)
		if r := ms.match(s+i, ep+1); r != -1 {
			return r
		}
	}
	return -1
}

func (ms *matcher) minExpand(s, p, ep int) int {
	for {
		ms.step(1)
		if r := ms.match(s, ep+1); r != -1 {
			return r
		}
		if s < len(ms.src) && ms.singleMatch(ms.src[s], p, ep) {
			s++
		} else {
			return -1
		}
	}
}

func (ms *matcher) startCapture(s, p, what int) int {
	if ms.level >= maxCaptures {
		ms.fail("too many captures")
	}
	ms.capture[ms.level] = capture{s, what}
	ms.level++
	r := ms.match(s, p)
	if r == -1 {
		ms.level--
	}
	return r
}

func (ms *matcher) endCapture(s, p int) int {
	l := -1
	for i := ms.level - 1; i >= 0; i-- {
		if ms.capture[i].len == capUnfinished {
			l = i
			break
		}
	}
	if l < 0 {
		ms.fail("invalid pattern capture")
	}
	ms.capture[l].len = s - ms.capture[l].init
	r := ms.match(s, p)
	if r == -1 {
		ms.capture[l].len = capUnfinished
	}
	return r
}

func (ms *matcher) matchBalance(s, p int) int {
	if p+1 >= len(ms.pat) {
		ms.fail("missing arguments to '%b'")
	}
	src := ms.src
	if s >= len(src) || src[s] != ms.pat[p] {
		return -1
	}
	b, e := ms.pat[p], ms.pat[p+1]
	cont := 1
	start := s
	for s++; s < len(src); s++ {
		if src[s] == e {
			cont--
			if cont == 0 {
				ms.step(s - start)
				return s + 1
			}
		} else if src[s] == b {
			cont++
		}
	}
	ms.step(s - start)
	return -1
}

func (ms *matcher) matchCapture(s int, c byte) int {
	l := int(c) - '1'
	if l < 0 || l >= ms.level || ms.capture[l].len == capUnfinished {
		ms.fail("invalid capture index")
	}
	cp := ms.capture[l]
	n := cp.len
	if n < 0 {
		n = 0 // a position capture matches the empty string
	}
	ms.step(n)
	if len(ms.src)-s >= n && ms.src[cp.init:cp.init+n] == ms.src[s:s+n] {
		return s + n
	}
	return -1
}

// getCapture returns capture i of a match [s, e).
func (ms *matcher) getCapture(i, s, e int) lua.LValue {
	if i >= ms.level {
		if i == 0 {
			return lua.LString(ms.src[s:e])
		}
		ms.fail("invalid capture index")
	}
	c := ms.capture[i]
	switch c.len {
	case capUnfinished:
		ms.fail("unfinished capture")
	case capPosition:
		return lua.LNumber(c.init + 1)
	}
	return lua.LString(ms.src[c.init : c.init+c.len])
}

// pushCaptures pushes the captures of a match [s, e) (the whole match when there are none and
// whole is true) and returns how many.
func (ms *matcher) pushCaptures(s, e int, whole bool) int {
	n := ms.level
	if n == 0 && whole {
		n = 1
	}
	for i := 0; i < n; i++ {
		c := ms.getCapture(i, s, e)
		if str, ok := c.(lua.LString); ok {
			ms.st.chargeTotal(ms.L, len(str)) // substrings are new strings to the script
		}
		ms.L.Push(c)
	}
	return n
}
