package rulelua

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"
)

const (
	callStackSize   = 200        // Lua call frames; deeper recursion is "stack overflow"
	registrySize    = 4 * 1024   // initial value stack
	registryMaxSize = 128 * 1024 // the value stack never grows past this
	registryGrow    = 1024
	// maxResults bounds the values one library call may push (unpack, string.byte), like
	// Lua 5.1's LUAI_MAXCSTACK.
	maxResults = 8000
	// maxArrayIndex caps gopher-lua's array part, see init.
	maxArrayIndex = 1 << 18
	// pollEvery is how many VM instructions run between two looks at the clock.
	pollEvery = 128
)

func init() {
	// gopher-lua grows a table's array part up to any integer key below MaxArrayIndex
	// (64 Mi by default), so `t[67108863] = 1` allocates 1 GiB in one instruction that no
	// deadline can interrupt. Keys past the cap go to the hash part instead. This is a
	// package variable of gopher-lua; Clara is its only user in the process.
	if lua.MaxArrayIndex > maxArrayIndex {
		lua.MaxArrayIndex = maxArrayIndex
	}
}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// runCtx is the context.Context the VM polls before every instruction. Done is cheap: it returns
// nil (never ready) until it has seen the deadline pass or the caller's context end, and looks
// at the clock only every pollEvery calls. It is used by one goroutine only and never handed to
// code outside this package.
type runCtx struct {
	st         *lstate
	n          uint32
	deadline   time.Time
	parent     context.Context
	parentDone <-chan struct{}
	done       chan struct{}
	err        error
}

func (c *runCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *runCtx) Err() error                  { return c.err }
func (c *runCtx) Value(any) any               { return nil }

func (c *runCtx) Done() <-chan struct{} {
	c.n++
	if c.n%pollEvery != 0 || c.done != nil {
		return c.done
	}
	if c.n%memCheckEvery == 0 && !c.st.checkMemory() {
		c.err, c.done = ErrLimit, closedCh
		return c.done
	}
	return c.poll()
}

func (c *runCtx) poll() <-chan struct{} {
	if c.done != nil {
		return c.done
	}
	if c.parentDone != nil {
		select {
		case <-c.parentDone:
			c.err = c.parent.Err()
			if c.err == nil {
				c.err = context.Canceled
			}
			c.done = closedCh
			return c.done
		default:
		}
	}
	// Until reads only the monotonic clock (the deadline has a monotonic reading): half of Now.
	if time.Until(c.deadline) <= 0 {
		c.err = context.DeadlineExceeded
		c.done = closedCh
	}
	return c.done
}

func (c *runCtx) expired() bool { return c.poll() != nil }

// pool is a bounded free list of prepared states: a stack under a mutex (cheaper than a
// channel's send and receive, and the state handed out is the one used last, warm in cache).
var pool = struct {
	sync.Mutex
	free []*lstate
}{free: make([]*lstate, 0, max(8, 4*runtime.GOMAXPROCS(0)))}

// statesCreated counts newState calls (tests use it to see states being reused).
var statesCreated int64

func getState() *lstate {
	pool.Lock()
	if n := len(pool.free); n > 0 {
		st := pool.free[n-1]
		pool.free[n-1] = nil
		pool.free = pool.free[:n-1]
		pool.Unlock()
		return st
	}
	pool.Unlock()
	return newState()
}

func putState(st *lstate) {
	pool.Lock()
	if len(pool.free) < cap(pool.free) {
		pool.free = append(pool.free, st)
		pool.Unlock()
		return
	}
	pool.Unlock()
	st.close()
}

// lstate is one pooled LState with its environment and the data of the run in progress.
type lstate struct {
	L                      *lua.LState
	env                    *lua.LTable      // the state's environment: library proxies and API functions
	envMT                  *lua.LTable      // metatable of each run's fresh globals: {__index = env}
	toolEnv                *lua.LTable      // env without ctx and context, for tool runs
	toolEnvMT              *lua.LTable      // {__index = toolEnv}
	ctxMT                  *lua.LTable      // metatable of ctx userdata
	ro                     *lua.LTable      // marker of read-only library proxies
	ctxUD                  *lua.LUserData   // the top-level ctx, reused; Value is set per run
	stateMT                *lua.LTable      // metatable of stateUD
	stateUD                *lua.LUserData   // context.state: the state map, with get and set (api.go)
	stateGetFn, stateSetFn *lua.LFunction   // context.state.get and .set
	next                   *lua.LFunction   // the guarded next, also what pairs returns
	chunkFn                *lua.LFunction   // the last script's chunk, reused while the script is the same
	toolFn                 *lua.LFunction   // the last tool function made without its chunk (Script.toolProto)
	uds                    []*lua.LUserData // ctx userdata recycled from run to run
	nuds                   int

	jsonKeys []jsonKey    // scratch of appendJSON, kept empty between runs
	outBuf   []byte       // where CallJSON encodes a value (at most maxKeptOutBuf kept)
	decVals  []lua.LValue // scratch of the JSON decoder, kept empty between runs
	decKeys  []string

	dctx   runCtx
	mem    memWatch
	tables tablePool   // a tool's argument objects, recycled (see tablePool)
	G      *lua.LTable // the run's globals
	spareG *lua.LTable // the last run's globals, when that run set none: the next run's
	runEnv *lua.LTable // env or toolEnv: the one whose _G is G

	// the run in progress
	script    *Script
	lim       *Limits
	host      Host
	parent    context.Context
	started   time.Time
	budget    time.Duration
	actions   []Action
	sets      map[string]any
	bytes     int64
	logLines  int
	logBytes  int
	logCapped bool
	workDone  int
	lists     map[*any]*lua.LTable // ctx lists already converted in this run
	fatal     *Error               // a limit or timeout detected by Go code; pcall cannot catch it
	closed    bool
}

func (st *lstate) close() {
	if !st.closed {
		st.closed = true
		st.L.Close()
	}
}

func (st *lstate) endRun() {
	st.script, st.lim, st.host, st.parent = nil, nil, nil, nil
	st.actions, st.sets, st.fatal, st.lists = nil, nil, nil, nil
	st.dctx.parent, st.dctx.parentDone = nil, nil
	if !st.closed {
		st.ctxUD.Value, st.stateUD.Value = nil, nil
		for i := 0; i < st.nuds; i++ {
			st.uds[i].Value = nil
		}
		st.nuds = 0
		if st.runEnv != nil {
			// Not nil: that would delete the key, and the next run insert it again. No script
			// runs in between to see it.
			setExisting(st.runEnv, "_G", lua.LFalse)
			if untouched(st.G) {
				st.spareG = st.G
			}
			st.runEnv, st.G = nil, nil
		}
		if st.chunkFn != nil {
			st.chunkFn.Env = st.env // drop the run's globals
		}
		if st.toolFn != nil {
			st.toolFn.Env = st.env
		}
		st.L.SetTop(0)
	}
}

// budgeted is a context that knows the whole budget its deadline ends (toolbox gives a Lua tool
// one: its timeout): a run given it reads no clock to state it in a timeout's message.
type budgeted interface{ Budget() time.Duration }

func (st *lstate) begin(ctx context.Context, s *Script, host Host) {
	st.script, st.lim, st.host, st.parent = s, &s.lim, host, ctx
	st.bytes, st.logLines, st.logBytes, st.logCapped, st.workDone = 0, 0, 0, false, 0
	d, ok := ctx.Deadline()
	if b, known := ctx.(budgeted); ok && known && !s.lim.deadlineGiven {
		st.budget = b.Budget() // the context's deadline, as it is: no clock read
	} else {
		now := time.Now()
		if own := now.Add(s.lim.Deadline); !ok || s.lim.deadlineGiven && own.Before(d) {
			d = own
		}
		st.budget = d.Sub(now)
	}
	st.mem.begin(s.lim.MaxMemoryBytes)
	c := &st.dctx
	c.deadline, c.parent, c.parentDone = d, ctx, ctx.Done()
	if c.done != nil {
		c.done, c.err = nil, nil
	}
	st.L.SetContext(c)
}

// maxKeptOutBuf: a CallJSON value longer than this is handed on in the buffer it was encoded
// in, which the state then drops.
const maxKeptOutBuf = 4096

// run executes one Run, Call or CallJSON on this state.
func (st *lstate) run(ctx context.Context, s *Script, in runInput, host Host) (Result, error) {
	st.begin(ctx, s, host)
	L := st.L
	// Fresh globals, every run: a table that "looks empty" may still hold the keys an earlier
	// run set and cleared (gopher-lua never drops deleted keys from a table's key list), which
	// next() would reveal in its iteration order, and whose memory would pile up run after run.
	// A globals table no run ever wrote to is as fresh as a new one (see endRun).
	G := st.spareG
	if G == nil {
		G = L.CreateTable(0, 0)
	}
	st.spareG = nil
	if in.tool {
		G.Metatable, st.runEnv = st.toolEnvMT, st.toolEnv
	} else {
		G.Metatable, st.runEnv = st.envMT, st.env
	}
	setExisting(st.runEnv, "_G", G)
	st.G = G
	var argv lua.LValue
	switch {
	case in.json:
		v, err := st.argsFromJSON(in.argJSON)
		if err != nil {
			return Result{}, err
		}
		argv = v
	case in.tool:
		v, err := st.toLua(in.arg)
		if err != nil {
			if derr := st.deadError(); derr != nil {
				return Result{}, derr
			}
			return Result{}, newError(KindRuntime, s.name, s.name+": cannot convert arguments: "+err.Error(), nil)
		}
		argv = v
	default:
		st.ctxUD.Value = in.arg
		argv = st.ctxUD
	}
	// The chunk's function object is reused while the same script runs on this state: it has no
	// upvalues and scripts cannot change a function.
	var v lua.LValue
	if in.tool && s.toolProto != nil {
		// The chunk would only make this function: make it here (one function object per
		// state, as for the chunk; it has no upvalues and scripts cannot change a function).
		f := st.toolFn
		if f == nil || f.Proto != s.toolProto {
			f = L.NewFunctionFromProto(s.toolProto)
			st.toolFn = f
		}
		f.Env = G
		v = f
	} else {
		fn := st.chunkFn
		if fn == nil || fn.Proto != s.proto {
			fn = L.NewFunctionFromProto(s.proto)
			st.chunkFn = fn
		}
		fn.Env = G
		L.Push(fn)
		if err := L.PCall(0, 1, nil); err != nil {
			return Result{}, st.runError(err)
		}
		v = L.Get(-1)
		L.Pop(1)
	}
	if f, ok := v.(*lua.LFunction); ok {
		L.Push(f)
		L.Push(argv)
		if err := L.PCall(1, 1, nil); err != nil {
			return Result{}, st.runError(err)
		}
		v = L.Get(-1)
		L.Pop(1)
	} else if in.tool {
		return Result{}, newError(KindRuntime, s.name, s.name+": a Lua tool must return a function, got "+v.Type().String(), nil)
	}
	// A run that ended past its deadline or over a limit fails whatever it returned. CallJSON
	// looks once, after encoding (which polls the deadline as it goes): one clock read less.
	if !in.json {
		if err := st.deadError(); err != nil {
			return Result{}, err
		}
	}
	var res Result
	var err error
	if in.json {
		// Encoded into the caller's buffer (AppendCallJSON), or into the state's, then copied at
		// its size: the bytes go to the caller, and a guess of their size was mostly too large
		// (the collector's work follows bytes).
		var out []byte
		if in.appendTo {
			res.JSON, err = st.appendJSON(in.dst, v)
		} else if out, err = st.appendJSON(st.outBuf[:0], v); len(out) > maxKeptOutBuf {
			res.JSON, st.outBuf = out, nil // a large value: handed on without a copy
		} else {
			res.JSON, st.outBuf = append([]byte(nil), out...), out[:0]
		}
		switch x := v.(type) {
		case lua.LBool:
			res.Value = bool(x)
		case lua.LNumber:
			res.Value = float64(x)
		case lua.LString:
			res.Value = string(x)
		}
	} else {
		res.Value, err = st.toGo(v)
	}
	if err != nil {
		if derr := st.deadError(); derr != nil {
			return Result{}, derr
		}
		kind := KindRuntime
		if le, ok := err.(*Error); ok {
			kind = le.Kind
			err = errors.New(le.Message)
		}
		return Result{}, newError(kind, s.name, s.name+": cannot convert the returned value: "+err.Error(), nil)
	}
	if err := st.deadError(); err != nil {
		return Result{}, err
	}
	res.Actions = st.actions
	return res, nil
}

// argsFromJSON decodes a Lua tool's JSON arguments into a fresh table, charged to the run as
// json.decode's values are. The text is copied once: no Lua string points into the caller's
// bytes.
func (st *lstate) argsFromJSON(data []byte) (lua.LValue, error) {
	name := st.script.name
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return st.L.CreateTable(0, 0), nil
	}
	if data[0] != '{' {
		return nil, newError(KindRuntime, name, name+": cannot convert arguments: not a JSON object", nil)
	}
	d := jsonDecoder{st: st, L: st.L, data: string(data), quiet: true, vals: st.decVals, keys: st.decKeys, tables: &st.tables}
	// Keys and string values: about one of each per two pairs of quotes. The first chunk is
	// recycled with the arguments' tables.
	if lstringTab != nil {
		d.boxes.chunk, d.boxes.next = st.tables.boxesFor(min(max(bytes.Count(data, []byte{'"'})/2, 1), 64)), 64
	}
	if lnumberTab != nil {
		d.boxes.nums = st.tables.numbersFor()
	}
	v, err := d.value(0)
	st.decVals, st.decKeys = d.vals[:0], d.keys[:0]
	if err == nil {
		d.skipSpace()
		if d.pos < len(d.data) {
			err = fmt.Errorf("invalid character %s after top-level value", quoteChar(d.data[d.pos]))
		}
	}
	if err != nil {
		if derr := st.deadError(); derr != nil {
			return nil, derr
		}
		return nil, newError(KindRuntime, name, name+": cannot convert arguments: "+err.Error(), nil)
	}
	return v, nil
}

// fail records err as what ended the run (pcall cannot catch it) and returns it.
func (st *lstate) fail(err *Error) error {
	if st.fatal == nil {
		st.fatal = err
	}
	return st.fatal
}

// deadError reports a timeout or a limit that ended the run, whatever the script did after
// (a pcall that caught the timeout, a handler that returned normally). It reads the clock: a
// run that returns after its deadline is a timeout, whatever it returned.
func (st *lstate) deadError() error {
	if st.fatal != nil {
		return st.fatal
	}
	if st.dctx.expired() {
		return st.timeoutError()
	}
	return nil
}

func (st *lstate) timeoutError() *Error {
	name := st.script.name
	if st.dctx.err == context.Canceled {
		return newError(KindTimeout, name, name+": run canceled", context.Canceled)
	}
	e := newError(KindTimeout, name, deadlineMessage(st.budget), context.DeadlineExceeded)
	e.Script = name
	return e
}

// runError maps an error out of PCall.
func (st *lstate) runError(err error) error {
	if derr := st.deadError(); derr != nil {
		return derr
	}
	name := st.script.name
	if aerr, ok := err.(*lua.ApiError); ok {
		msg := aerr.Object.String()
		if aerr.Type == lua.ApiErrorPanic {
			return newError(KindInternal, name, name+": internal error: "+msg, nil)
		}
		if _, isStr := aerr.Object.(lua.LString); !isStr {
			if _, isNum := aerr.Object.(lua.LNumber); !isNum {
				msg = name + ": error object is a " + aerr.Object.Type().String() + " value"
			}
		}
		return newError(KindRuntime, name, msg, nil)
	}
	return newError(KindRuntime, name, name+": "+err.Error(), nil)
}

// raiseLimit ends the run with a limit error that pcall cannot catch.
func (st *lstate) raiseLimit(L *lua.LState, format string, args ...any) {
	msg := L.Where(1) + " " + sprintf(format, args...)
	if st.fatal == nil {
		st.fatal = newError(KindLimit, st.script.name, msg, nil)
	}
	L.Error(lua.LString(msg), 0)
}

// checkDeadline raises the timeout now if the deadline has passed; guarded Go functions call it
// while they work.
func (st *lstate) checkDeadline(L *lua.LState) {
	if st.dctx.expired() {
		if st.fatal == nil {
			st.fatal = st.timeoutError()
		}
		L.Error(lua.LString(st.fatal.Message), 0)
	}
}

// chargeTotal counts n bytes a function derived from existing strings (a substring, a capture,
// an error message) against the run's total only: such a string is never over the size of its
// source, which may be a large ctx value.
func (st *lstate) chargeTotal(L *lua.LState, n int) {
	st.bytes += int64(n)
	if st.bytes > st.lim.MaxAllocBytes {
		st.raiseLimit(L, "run built more than %d bytes of strings", st.lim.MaxAllocBytes)
	}
	if n >= 4096 {
		st.checkDeadline(L)
	}
}

// charge accounts for a string of n bytes a guarded function is about to build.
func (st *lstate) charge(L *lua.LState, n int, what string) {
	if n > st.lim.MaxStringBytes {
		st.raiseLimit(L, "%s result over %d bytes", what, st.lim.MaxStringBytes)
	}
	st.bytes += int64(n)
	if st.bytes > st.lim.MaxAllocBytes {
		st.raiseLimit(L, "run built more than %d bytes of strings", st.lim.MaxAllocBytes)
	}
	if n >= 4096 {
		st.checkDeadline(L)
	}
}
