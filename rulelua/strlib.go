package rulelua

import (
	"strings"

	lua "github.com/yuin/gopher-lua"
)

func strLen(L *lua.LState) int {
	L.Push(lua.LNumber(len(checkStr(L, 1, "len"))))
	return 1
}

// strSub is string.sub. A substring shares its source's memory in Go but is a new string to
// the script (a table key kept in a table's key list, say), so its length is charged.
func (st *lstate) strSub(L *lua.LState) int {
	s := checkStr(L, 1, "sub")
	l := len(s)
	i := posrelat(checkInt(L, 2, "sub"), l)
	j := posrelat(optInt(L, 3, "sub", -1), l)
	if i < 1 {
		i = 1
	}
	if j > l {
		j = l
	}
	if i > j {
		L.Push(lua.LString(""))
	} else {
		st.chargeTotal(L, j-i+1)
		L.Push(lua.LString(s[i-1 : j]))
	}
	return 1
}

func (st *lstate) strUpper(L *lua.LState) int {
	s := checkStr(L, 1, "upper")
	st.charge(L, len(s), "string.upper")
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	L.Push(lua.LString(b))
	return 1
}

func (st *lstate) strLower(L *lua.LState) int {
	s := checkStr(L, 1, "lower")
	st.charge(L, len(s), "string.lower")
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
	L.Push(lua.LString(b))
	return 1
}

func (st *lstate) strReverse(L *lua.LState) int {
	s := checkStr(L, 1, "reverse")
	st.charge(L, len(s), "string.reverse")
	b := make([]byte, len(s))
	for i := 0; i < len(s); i++ {
		b[len(s)-1-i] = s[i]
	}
	L.Push(lua.LString(string(b)))
	return 1
}

func (st *lstate) strRep(L *lua.LState) int {
	s := checkStr(L, 1, "rep")
	n := checkInt(L, 2, "rep")
	sep := optStr(L, 3, "rep", "")
	if n <= 0 || (s == "" && sep == "") {
		L.Push(lua.LString(""))
		return 1
	}
	max := st.lim.MaxStringBytes
	unit := len(s) + len(sep)
	if unit > 0 && n > (max+len(sep))/unit+1 {
		st.raiseLimit(L, "string.rep result over %d bytes", max)
	}
	total := len(s)*n + len(sep)*(n-1)
	st.charge(L, total, "string.rep")
	if sep == "" {
		L.Push(lua.LString(strings.Repeat(s, n)))
	} else {
		L.Push(lua.LString(strings.Repeat(s+sep, n-1) + s))
	}
	return 1
}

func (st *lstate) strByte(L *lua.LState) int {
	s := checkStr(L, 1, "byte")
	l := len(s)
	i := posrelat(optInt(L, 2, "byte", 1), l)
	j := posrelat(optInt(L, 3, "byte", i), l)
	if i < 1 {
		i = 1
	}
	if j > l {
		j = l
	}
	if i > j {
		return 0
	}
	n := j - i + 1
	if n > maxResults {
		st.raiseLimit(L, "string slice too long (%d bytes, limit %d)", n, maxResults)
	}
	for k := i; k <= j; k++ {
		L.Push(lua.LNumber(s[k-1]))
	}
	return n
}

func (st *lstate) strChar(L *lua.LState) int {
	n := L.GetTop()
	st.charge(L, n, "string.char")
	b := make([]byte, n)
	for i := 1; i <= n; i++ {
		c := checkInt(L, i, "char")
		if c < 0 || c > 255 {
			argError(L, i, "char", "invalid value")
		}
		b[i-1] = byte(c)
	}
	L.Push(lua.LString(string(b)))
	return 1
}

func (st *lstate) newMatcher(L *lua.LState, src, pat string) *matcher {
	return &matcher{st: st, L: L, src: src, pat: pat}
}

func (st *lstate) strFind(L *lua.LState) int { return st.findAux(L, true) }

func (st *lstate) strMatch(L *lua.LState) int { return st.findAux(L, false) }

func (st *lstate) findAux(L *lua.LState, find bool) int {
	fname := "match"
	if find {
		fname = "find"
	}
	s := checkStr(L, 1, fname)
	p := checkStr(L, 2, fname)
	init := posrelat(optInt(L, 3, fname, 1), len(s)) - 1
	if init < 0 {
		init = 0
	} else if init > len(s) {
		init = len(s)
	}
	if find && (lua.LVAsBool(L.Get(4)) || !strings.ContainsAny(p, specials)) {
		st.work(L, len(s)-init)
		if i := strings.Index(s[init:], p); i >= 0 {
			L.Push(lua.LNumber(init + i + 1))
			L.Push(lua.LNumber(init + i + len(p)))
			return 2
		}
		L.Push(lua.LNil)
		return 1
	}
	ms := st.newMatcher(L, s, p)
	pstart := 0
	anchor := len(p) > 0 && p[0] == '^'
	if anchor {
		pstart = 1
	}
	for s1 := init; ; s1++ {
		ms.level, ms.depth = 0, 0
		if e := ms.match(s1, pstart); e != -1 {
			if find {
				L.Push(lua.LNumber(s1 + 1))
				L.Push(lua.LNumber(e))
				return ms.pushCaptures(-1, -1, false) + 2
			}
			return ms.pushCaptures(s1, e, true)
		}
		if s1 >= len(s) || anchor {
			break
		}
	}
	L.Push(lua.LNil)
	return 1
}

func (st *lstate) strGmatch(L *lua.LState) int {
	s := checkStr(L, 1, "gmatch")
	p := checkStr(L, 2, "gmatch")
	ms := st.newMatcher(L, s, p)
	pos := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		ms.L = L
		for src := pos; src <= len(s); src++ {
			ms.level, ms.depth = 0, 0
			if e := ms.match(src, 0); e != -1 {
				pos = e
				if e == src {
					pos++ // empty match: move on at least one position
				}
				return ms.pushCaptures(src, e, true)
			}
		}
		pos = len(s) + 1
		return 0
	}))
	return 1
}

func (st *lstate) strGsub(L *lua.LState) int {
	src := checkStr(L, 1, "gsub")
	p := checkStr(L, 2, "gsub")
	repl := L.Get(3)
	switch repl.(type) {
	case lua.LNumber, lua.LString, *lua.LTable, *lua.LFunction:
	default:
		typeError(L, 3, "gsub", "string/function/table")
	}
	maxN := optInt(L, 4, "gsub", len(src)+1)
	anchor := len(p) > 0 && p[0] == '^'
	pstart := 0
	if anchor {
		pstart = 1
	}
	ms := st.newMatcher(L, src, p)
	limit := st.lim.MaxStringBytes
	var b strings.Builder
	add := func(s string) {
		if b.Len()+len(s) > limit {
			st.raiseLimit(L, "string.gsub result over %d bytes", limit)
		}
		b.WriteString(s)
	}
	n := 0
	s := 0
	for n < maxN {
		ms.level, ms.depth = 0, 0
		e := ms.match(s, pstart)
		if e != -1 {
			n++
			st.gsubValue(L, ms, repl, s, e, add)
		}
		if e != -1 && e > s {
			s = e
		} else if s < len(src) {
			add(src[s : s+1])
			s++
		} else {
			break
		}
		if anchor {
			break
		}
	}
	add(src[s:])
	st.charge(L, b.Len(), "string.gsub")
	L.Push(lua.LString(b.String()))
	L.Push(lua.LNumber(n))
	return 2
}

func (st *lstate) gsubValue(L *lua.LState, ms *matcher, repl lua.LValue, s, e int, add func(string)) {
	var v lua.LValue
	switch r := repl.(type) {
	case lua.LString, lua.LNumber:
		news := lua.LVAsString(r)
		for i := 0; i < len(news); i++ {
			c := news[i]
			if c != '%' {
				add(news[i : i+1])
				continue
			}
			i++
			if i >= len(news) {
				break
			}
			c = news[i]
			switch {
			case c == '0':
				add(ms.src[s:e])
			case c >= '1' && c <= '9':
				add(lua.LVAsString(ms.getCapture(int(c-'1'), s, e)))
			default:
				add(news[i : i+1])
			}
		}
		return
	case *lua.LTable:
		key := ms.getCapture(0, s, e)
		if k, ok := key.(lua.LString); ok {
			st.chargeTotal(L, len(k)) // __index may keep it
		}
		v = L.GetTable(r, key)
	case *lua.LFunction:
		top := L.GetTop()
		L.Push(r)
		n := ms.pushCaptures(s, e, true)
		L.Call(n, 1)
		v = L.Get(-1)
		L.SetTop(top)
	}
	switch x := v.(type) {
	case lua.LString, lua.LNumber:
		add(lua.LVAsString(x))
	case *lua.LNilType:
		add(ms.src[s:e])
	case lua.LBool:
		if x {
			L.RaiseError("invalid replacement value (a boolean)")
		}
		add(ms.src[s:e])
	default:
		L.RaiseError("invalid replacement value (a %s)", v.Type().String())
	}
}
