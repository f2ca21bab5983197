package rulelua

import (
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync/atomic"

	lua "github.com/yuin/gopher-lua"
)

const maxActions = 1000

func newState() *lstate {
	atomic.AddInt64(&statesCreated, 1)
	L := lua.NewState(lua.Options{
		SkipOpenLibs:     true,
		CallStackSize:    callStackSize,
		RegistrySize:     registrySize,
		RegistryMaxSize:  registryMaxSize,
		RegistryGrowStep: registryGrow,
	})
	st := &lstate{L: L}
	st.dctx.st = st
	// Open the gopher-lua libraries we borrow functions from; their tables stay in L.G.Global,
	// which no script can reach (each run's globals are a fresh table, and getfenv is gone).
	for _, open := range []lua.LGFunction{lua.OpenBase, lua.OpenMath, lua.OpenOs} {
		L.Push(L.NewFunction(open))
		L.Call(0, 0)
	}
	g := L.G.Global
	env := L.CreateTable(0, 64)
	st.env = env
	for _, name := range []string{"ipairs", "rawequal", "rawget", "select",
		"tonumber", "tostring", "type", "getmetatable"} {
		env.RawSetString(name, g.RawGetString(name))
	}
	// next is the only iterator over arbitrary tables scripts can reach (pairs returns it, and
	// it is what `__index = next` calls), so each call polls the deadline: one LTable.Next walks
	// every key ever set in the table, deleted ones included.
	st.next = L.NewFunction(st.nextFn)
	env.RawSetString("next", st.next)
	baseError := g.RawGetString("error").(*lua.LFunction).GFunction
	env.RawSetString("error", L.NewFunction(func(L *lua.LState) int {
		st.chargeMessage(L, L.Get(1))
		return baseError(L)
	}))
	baseAssert := g.RawGetString("assert").(*lua.LFunction).GFunction
	env.RawSetString("assert", L.NewFunction(func(L *lua.LState) int {
		if !lua.LVAsBool(L.Get(1)) {
			st.chargeMessage(L, L.Get(2))
		}
		return baseAssert(L)
	}))
	env.RawSetString("_VERSION", lua.LString("Lua 5.1"))
	fns := map[string]lua.LGFunction{
		"pairs": st.pairs, "pcall": st.pcall, "xpcall": st.xpcall, "print": st.print,
		"rawset": st.rawset, "setmetatable": st.setmetatable, "unpack": st.unpack,
		"notify": st.notify, "log": st.log, "emit": st.emit, "deny": st.deny, "ask": st.ask, "block": st.block,
		"call_tool": st.callTool, "progress": st.progress, concatName: st.concat,
		"context_above_threshold": st.aboveThreshold, "tool_completed": st.toolCompleted,
		"tool_failed": st.toolFailed,
	}
	for name, fn := range fns {
		env.RawSetString(name, L.NewFunction(fn))
	}

	st.ro = L.CreateTable(0, 0) // marker: tables whose metatable's __readonly is set
	strlib := st.lib(map[string]lua.LGFunction{
		"byte": st.strByte, "char": st.strChar, "find": st.strFind, "format": st.strFormat,
		"gmatch": st.strGmatch, "gsub": st.strGsub, "len": strLen, "lower": st.strLower,
		"match": st.strMatch, "rep": st.strRep, "reverse": st.strReverse, "sub": st.strSub,
		"upper": st.strUpper,
	})
	env.RawSetString("string", st.readOnly("string", strlib))
	// The string metatable: its __index is the real string table; __metatable hides both.
	strMT := L.CreateTable(0, 2)
	strMT.RawSetString("__index", strlib)
	strMT.RawSetString("__metatable", lua.LString("locked"))
	L.SetMetatable(lua.LString(""), strMT)

	env.RawSetString("table", st.readOnly("table", st.lib(map[string]lua.LGFunction{
		"concat": st.tabConcat, "insert": st.tabInsert, "remove": st.tabRemove, "sort": st.tabSort,
		"maxn": st.tabMaxn, "getn": tabGetn,
	})))

	mathlib := L.CreateTable(0, 32)
	g.RawGetString("math").(*lua.LTable).ForEach(func(k, v lua.LValue) { mathlib.RawSet(k, v) })
	mathlib.RawSetString("randomseed", L.NewFunction(func(*lua.LState) int { return 0 }))
	mathlib.RawSetString("random", L.NewFunction(mathRandom))
	env.RawSetString("math", st.readOnly("math", mathlib))

	gos := g.RawGetString("os").(*lua.LTable)
	osDate := gos.RawGetString("date").(*lua.LFunction).GFunction
	oslib := L.CreateTable(0, 3)
	oslib.RawSetString("time", gos.RawGetString("time"))
	oslib.RawSetString("clock", gos.RawGetString("clock"))
	oslib.RawSetString("date", L.NewFunction(func(L *lua.LState) int {
		if f := optStr(L, 1, "date", ""); len(f) > 256 {
			argError(L, 1, "date", "format longer than 256 bytes")
		}
		return osDate(L)
	}))
	env.RawSetString("os", st.readOnly("os", oslib))

	env.RawSetString("state", st.readOnly("state", st.lib(map[string]lua.LGFunction{
		"get": st.stateGet, "set": st.stateSet,
	})))
	env.RawSetString("json", st.readOnly("json", st.lib(map[string]lua.LGFunction{
		"encode": st.jsonEncode, "decode": st.jsonDecode,
	})))

	st.envMT = L.CreateTable(0, 2)
	st.envMT.RawSetString("__index", env)
	st.envMT.RawSetString("__metatable", lua.LString("locked"))

	st.ctxMT = L.CreateTable(0, 6)
	st.ctxMT.RawSetString("__index", L.NewFunction(st.ctxIndex))
	st.ctxMT.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("ctx is read-only")
		return 0
	}))
	st.ctxMT.RawSetString("__len", L.NewFunction(func(L *lua.LState) int { L.Push(lua.LNumber(0)); return 1 }))
	st.ctxMT.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int { L.Push(lua.LString("ctx (read-only)")); return 1 }))
	st.ctxMT.RawSetString("__metatable", lua.LString("locked"))
	st.ctxUD = L.NewUserData()
	st.ctxUD.Metatable = st.ctxMT
	// context.state: the state's values as fields, and the seed's get and set
	// (its PluginState(get=getter, set=setter)) as state.get and state.set.
	st.stateMT = L.CreateTable(0, 6)
	st.stateMT.RawSetString("__index", L.NewFunction(st.stateViewIndex))
	st.stateMT.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("context.state is read-only: write with context.state.set(key, value)")
		return 0
	}))
	st.stateMT.RawSetString("__len", L.NewFunction(func(L *lua.LState) int { L.Push(lua.LNumber(0)); return 1 }))
	st.stateMT.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int { L.Push(lua.LString("context.state (read-only)")); return 1 }))
	st.stateMT.RawSetString("__metatable", lua.LString("locked"))
	st.stateUD = L.NewUserData()
	st.stateUD.Metatable = st.stateMT
	st.stateGetFn = L.NewFunction(st.viewMethod(st.stateGet))
	st.stateSetFn = L.NewFunction(st.viewMethod(st.stateSet))
	env.RawSetString("ctx", st.ctxUD)
	env.RawSetString("context", st.ctxUD) // the seed's name for ctx
	// _G is the run's globals during a run, false between runs: never deleted, so that a run
	// sets it in place (setExisting).
	env.RawSetString("_G", lua.LFalse)

	// A tool run's environment: the same entries without ctx and context (nil in a tool), so
	// that a tool run does not delete and restore them in env (two map deletions and
	// insertions a call).
	st.toolEnv = L.CreateTable(0, 64)
	env.ForEach(func(k, v lua.LValue) {
		if k != lua.LString("ctx") && k != lua.LString("context") {
			st.toolEnv.RawSet(k, v)
		}
	})
	st.toolEnvMT = L.CreateTable(0, 2)
	st.toolEnvMT.RawSetString("__index", st.toolEnv)
	st.toolEnvMT.RawSetString("__metatable", lua.LString("locked"))
	return st
}

func (st *lstate) lib(fns map[string]lua.LGFunction) *lua.LTable {
	t := st.L.CreateTable(0, len(fns))
	for name, fn := range fns {
		t.RawSetString(name, st.L.NewFunction(fn))
	}
	return t
}

// readOnly returns an empty proxy table reading through to real. Writes by assignment hit
// __newindex; rawset and the table functions check isReadOnly.
func (st *lstate) readOnly(name string, real *lua.LTable) *lua.LTable {
	L := st.L
	mt := L.CreateTable(0, 4)
	mt.RawSetString("__index", real)
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("attempt to modify read-only table '%s'", name)
		return 0
	}))
	mt.RawSetString("__metatable", lua.LString("locked"))
	mt.RawSetString("__readonly", st.ro)
	proxy := L.CreateTable(0, 0)
	proxy.Metatable = mt
	return proxy
}

// readOnlyReal returns the table behind a read-only proxy, or nil.
func (st *lstate) readOnlyReal(t *lua.LTable) *lua.LTable {
	mt, ok := t.Metatable.(*lua.LTable)
	if !ok || mt.RawGetString("__readonly") != st.ro {
		return nil
	}
	real, _ := mt.RawGetString("__index").(*lua.LTable)
	return real
}

func (st *lstate) checkWritable(L *lua.LState, t *lua.LTable, fname string) {
	if st.readOnlyReal(t) != nil {
		L.RaiseError("%s: attempt to modify a read-only table", fname)
	}
}

// work accounts for Go-side work proportional to n and polls the deadline now and then.
func (st *lstate) work(L *lua.LState, n int) {
	st.workDone += n
	if st.workDone >= 4096 {
		st.workDone = 0
		st.checkDeadline(L)
	}
}

/* base functions */

// nextFn is Lua's next, polling the deadline on every call.
func (st *lstate) nextFn(L *lua.LState) int {
	t := checkTable(L, 1, "next")
	st.checkDeadline(L)
	k, v := t.Next(L.Get(2))
	if k == lua.LNil {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(k)
	L.Push(v)
	return 2
}

// chargeMessage charges an error message (error, assert) against the run's byte budget: a
// caught error with a position prefix is a fresh copy of it.
func (st *lstate) chargeMessage(L *lua.LState, v lua.LValue) {
	if s, ok := v.(lua.LString); ok {
		st.chargeTotal(L, len(s))
	}
}

func (st *lstate) rethrowIfFatal(L *lua.LState, err error) {
	if aerr, ok := err.(*lua.ApiError); ok && aerr.Type == lua.ApiErrorPanic && st.fatal == nil {
		st.fatal = newError(KindInternal, st.script.name, st.script.name+": internal error: "+aerr.Object.String(), nil)
	}
	if st.fatal == nil && st.dctx.done != nil {
		st.fatal = st.timeoutError()
	}
	if st.fatal != nil {
		L.Error(lua.LString(st.fatal.Message), 0)
	}
}

func (st *lstate) pcall(L *lua.LState) int {
	checkAny(L, 1, "pcall")
	if err := L.PCall(L.GetTop()-1, lua.MultRet, nil); err != nil {
		st.rethrowIfFatal(L, err)
		L.Push(lua.LFalse)
		if aerr, ok := err.(*lua.ApiError); ok {
			L.Push(aerr.Object)
		} else {
			L.Push(lua.LString(err.Error()))
		}
		return 2
	}
	L.Insert(lua.LTrue, 1)
	return L.GetTop()
}

func (st *lstate) xpcall(L *lua.LState) int {
	fn := checkAny(L, 1, "xpcall")
	handler, ok := L.Get(2).(*lua.LFunction)
	if !ok {
		typeError(L, 2, "xpcall", "function")
	}
	L.SetTop(0)
	L.Push(fn)
	if err := L.PCall(0, lua.MultRet, handler); err != nil {
		st.rethrowIfFatal(L, err)
		L.Push(lua.LFalse)
		if aerr, ok := err.(*lua.ApiError); ok {
			L.Push(aerr.Object)
		} else {
			L.Push(lua.LString(err.Error()))
		}
		return 2
	}
	L.Insert(lua.LTrue, 1)
	return L.GetTop()
}

func (st *lstate) pairs(L *lua.LState) int {
	switch x := L.Get(1).(type) {
	case *lua.LTable:
		if real := st.readOnlyReal(x); real != nil {
			// Iterate the library without handing out the real table.
			L.Push(L.NewFunction(func(L *lua.LState) int {
				k, v := real.Next(L.Get(2))
				if k == lua.LNil {
					return 0
				}
				L.Push(k)
				L.Push(v)
				return 2
			}))
			L.Push(lua.LNil)
			L.Push(lua.LNil)
			return 3
		}
		L.Push(st.next)
		L.Push(x)
		L.Push(lua.LNil)
		return 3
	case *lua.LUserData:
		if m, ok := x.Value.(map[string]any); ok {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			i := 0
			L.Push(L.NewFunction(func(L *lua.LState) int {
				if i >= len(keys) {
					return 0
				}
				k := keys[i]
				i++
				L.Push(lua.LString(k))
				L.Push(st.lazyLua(m[k]))
				return 2
			}))
			L.Push(x)
			L.Push(lua.LNil)
			return 3
		}
	}
	typeError(L, 1, "pairs", "table")
	return 0
}

func (st *lstate) print(L *lua.LState) int {
	var b strings.Builder
	room := st.lim.MaxLogBytes - st.logBytes
	for i := 1; i <= L.GetTop(); i++ {
		if i > 1 {
			b.WriteByte('\t')
		}
		b.WriteString(L.ToStringMeta(L.Get(i)).String())
		if b.Len() > room {
			break
		}
	}
	st.emitLog("info", b.String())
	return 0
}

func (st *lstate) emitLog(level, msg string) {
	if st.host == nil || st.logCapped {
		return
	}
	if st.logLines >= st.lim.MaxLogLines || st.logBytes+len(msg) > st.lim.MaxLogBytes {
		st.logCapped = true
		st.host.Log("warn", sprintf("%s: log limit of %d lines or %d bytes per run reached; further lines dropped",
			st.script.name, st.lim.MaxLogLines, st.lim.MaxLogBytes))
		return
	}
	st.logLines++
	st.logBytes += len(msg)
	st.host.Log(level, msg)
}

func (st *lstate) rawset(L *lua.LState) int {
	t := checkTable(L, 1, "rawset")
	k := checkAny(L, 2, "rawset")
	v := checkAny(L, 3, "rawset")
	st.checkWritable(L, t, "rawset")
	if k == lua.LNil {
		L.RaiseError("table index is nil")
	}
	if n, ok := k.(lua.LNumber); ok && math.IsNaN(float64(n)) {
		L.RaiseError("table index is NaN")
	}
	t.RawSet(k, v)
	L.SetTop(1)
	return 1
}

func (st *lstate) setmetatable(L *lua.LState) int {
	// Tables only: gopher-lua would otherwise set the metatable shared by every string, number,
	// boolean or function of the state.
	t := checkTable(L, 1, "setmetatable")
	mt := L.Get(2)
	switch mt.(type) {
	case *lua.LNilType, *lua.LTable:
	default:
		typeError(L, 2, "setmetatable", "nil or table")
	}
	if cur, ok := t.Metatable.(*lua.LTable); ok && cur.RawGetString("__metatable") != lua.LNil {
		L.RaiseError("cannot change a protected metatable")
	}
	t.Metatable = mt
	L.SetTop(1)
	return 1
}

func (st *lstate) unpack(L *lua.LState) int {
	t := checkTable(L, 1, "unpack")
	i := optInt(L, 2, "unpack", 1)
	var j int
	if L.Get(3) == lua.LNil {
		j = t.Len()
	} else {
		j = checkInt(L, 3, "unpack")
	}
	if i > j {
		return 0
	}
	n := j - i + 1
	if n > maxResults {
		st.raiseLimit(L, "too many results to unpack (%d, limit %d)", n, maxResults)
	}
	for k := i; k <= j; k++ {
		st.work(L, 1)
		L.Push(t.RawGetInt(k))
	}
	return n
}

// mathRandom is Lua 5.1's math.random; gopher-lua's panics on an empty interval.
func mathRandom(L *lua.LState) int {
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(rand.Float64()))
		return 1
	case 1, 2:
		lo, hi := 1, checkInt(L, 1, "random")
		if L.GetTop() == 2 {
			lo, hi = hi, checkInt(L, 2, "random")
		}
		if lo > hi {
			argError(L, L.GetTop(), "random", "interval is empty")
		}
		L.Push(lua.LNumber(lo + rand.IntN(hi-lo+1)))
		return 1
	}
	L.RaiseError("wrong number of arguments to 'random'")
	return 0
}

/* table library */

func tabGetn(L *lua.LState) int {
	L.Push(lua.LNumber(checkTable(L, 1, "getn").Len()))
	return 1
}

func (st *lstate) tabMaxn(L *lua.LState) int {
	t := checkTable(L, 1, "maxn")
	maxn := 0.0
	st.checkDeadline(L)
	t.ForEach(func(k, _ lua.LValue) {
		st.work(L, 1)
		if f, ok := k.(lua.LNumber); ok && float64(f) > maxn {
			maxn = float64(f)
		}
	})
	L.Push(lua.LNumber(maxn))
	return 1
}

func (st *lstate) tabInsert(L *lua.LState) int {
	t := checkTable(L, 1, "insert")
	st.checkWritable(L, t, "insert")
	e := t.Len() + 1 // first empty slot
	var pos int
	var v lua.LValue
	switch L.GetTop() {
	case 2:
		pos, v = e, L.Get(2)
	case 3:
		// Lua 5.2+: the position must be in [1, #t+1] (5.1 accepted any, and shifting
		// toward a far-away position made this loop run for as long as the script liked).
		pos, v = checkInt(L, 2, "insert"), L.Get(3)
		if pos < 1 || pos > e {
			argError(L, 2, "insert", "position out of bounds")
		}
		for i := e; i > pos; i-- {
			st.work(L, 1)
			t.RawSetInt(i, t.RawGetInt(i-1))
		}
	default:
		L.RaiseError("wrong number of arguments to 'insert'")
	}
	if pos >= 1 && pos < maxArrayIndex {
		t.RawSetInt(pos, v)
	} else {
		t.RawSet(lua.LNumber(pos), v)
	}
	return 0
}

func (st *lstate) tabRemove(L *lua.LState) int {
	t := checkTable(L, 1, "remove")
	st.checkWritable(L, t, "remove")
	e := t.Len()
	pos := optInt(L, 2, "remove", e)
	if e == 0 || pos < 1 || pos > e {
		return 0
	}
	L.Push(t.RawGetInt(pos))
	for ; pos < e; pos++ {
		st.work(L, 1)
		t.RawSetInt(pos, t.RawGetInt(pos+1))
	}
	t.RawSetInt(e, lua.LNil)
	return 1
}

func (st *lstate) tabConcat(L *lua.LState) int {
	t := checkTable(L, 1, "concat")
	sep := optStr(L, 2, "concat", "")
	i := optInt(L, 3, "concat", 1)
	var j int
	if L.Get(4) == lua.LNil {
		j = t.Len()
	} else {
		j = checkInt(L, 4, "concat")
	}
	if i > j {
		L.Push(lua.LString(""))
		return 1
	}
	var parts []string
	total := 0
	for k := i; k <= j; k++ {
		var s string
		switch v := t.RawGetInt(k).(type) {
		case lua.LString:
			s = string(v)
		case lua.LNumber:
			s = v.String()
		default:
			L.RaiseError("invalid value (at index %d) in table for 'concat'", k)
		}
		total += len(s)
		if k < j {
			total += len(sep)
		}
		if total > st.lim.MaxStringBytes {
			st.raiseLimit(L, "table.concat result over %d bytes", st.lim.MaxStringBytes)
		}
		st.work(L, 1)
		parts = append(parts, s)
	}
	st.charge(L, total, "table.concat")
	L.Push(lua.LString(strings.Join(parts, sep)))
	return 1
}

type luaSorter struct {
	st   *lstate
	L    *lua.LState
	vals []lua.LValue
	cmp  *lua.LFunction
	n    int
}

func (s *luaSorter) Len() int      { return len(s.vals) }
func (s *luaSorter) Swap(i, j int) { s.vals[i], s.vals[j] = s.vals[j], s.vals[i] }
func (s *luaSorter) Less(i, j int) bool {
	s.n++
	if s.n%256 == 0 {
		s.st.checkDeadline(s.L)
	}
	a, b := s.vals[i], s.vals[j]
	if s.cmp == nil {
		return s.L.LessThan(a, b)
	}
	L := s.L
	L.Push(s.cmp)
	L.Push(a)
	L.Push(b)
	L.Call(2, 1)
	r := L.Get(-1)
	L.Pop(1)
	return lua.LVAsBool(r)
}

func (st *lstate) tabSort(L *lua.LState) int {
	t := checkTable(L, 1, "sort")
	st.checkWritable(L, t, "sort")
	var cmp *lua.LFunction
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		f, ok := L.Get(2).(*lua.LFunction)
		if !ok {
			typeError(L, 2, "sort", "function")
		}
		cmp = f
	}
	n := t.Len()
	s := &luaSorter{st: st, L: L, vals: make([]lua.LValue, n), cmp: cmp}
	for i := range s.vals {
		st.work(L, 1)
		s.vals[i] = t.RawGetInt(i + 1)
	}
	sort.Sort(s)
	for i, v := range s.vals {
		st.work(L, 1)
		t.RawSetInt(i+1, v)
	}
	return 0
}
