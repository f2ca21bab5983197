package rulelua

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// DefaultRuleDeadline is the run deadline used when the context passed to Run or Call has none.
const DefaultRuleDeadline = 50 * time.Millisecond

// Limits bound one script's runs. A zero field means its default.
type Limits struct {
	// Deadline applies when the context passed to Run or Call has no deadline, or an earlier
	// one than the context's when it was given (a rule's timeout_ms). Default
	// DefaultRuleDeadline (50 ms).
	Deadline time.Duration
	// deadlineGiven: Deadline was set by the caller, not defaulted.
	deadlineGiven bool
	// MaxSourceBytes refuses larger sources before parsing. Default 256 KiB.
	MaxSourceBytes int
	// MaxStringBytes is the largest string a guarded function (.., string.rep, gsub, format,
	// table.concat, json.encode, ...) may build. Default 1 MiB.
	MaxStringBytes int
	// MaxAllocBytes is the total of bytes guarded functions may build in one run. Default 32 MiB,
	// or MaxMemoryBytes when that was given and is larger.
	MaxAllocBytes int64
	// MaxMemoryBytes caps what a run holds: the tables, strings and functions it can reach,
	// measured as memory.go describes. Default DefaultMaxMemoryBytes (50 MiB, the seed's).
	MaxMemoryBytes int64
	// MaxLogLines and MaxLogBytes cap what log and print send to Host.Log in one run; lines past
	// the cap are dropped after one warning. Defaults 100 lines and 64 KiB.
	MaxLogLines int
	MaxLogBytes int
}

// DefaultMaxMemoryBytes is the default of Limits.MaxMemoryBytes.
const DefaultMaxMemoryBytes = 50 << 20

func (l Limits) withDefaults() Limits {
	l.deadlineGiven = l.Deadline > 0
	if l.MaxAllocBytes <= 0 && l.MaxMemoryBytes > 32<<20 {
		l.MaxAllocBytes = l.MaxMemoryBytes // a script allowed to hold more may build more
	}
	if l.Deadline <= 0 {
		l.Deadline = DefaultRuleDeadline
	}
	if l.MaxMemoryBytes <= 0 {
		l.MaxMemoryBytes = DefaultMaxMemoryBytes
	}
	if l.MaxSourceBytes <= 0 {
		l.MaxSourceBytes = 256 << 10
	}
	if l.MaxStringBytes <= 0 {
		l.MaxStringBytes = 1 << 20
	}
	if l.MaxAllocBytes <= 0 {
		l.MaxAllocBytes = 32 << 20
	}
	if l.MaxLogLines <= 0 {
		l.MaxLogLines = 100
	}
	if l.MaxLogBytes <= 0 {
		l.MaxLogBytes = 64 << 10
	}
	return l
}

// Host is what a script's API reaches outside the sandbox. Its methods are called on the goroutine
// running the script, during Run or Call. A nil Host is allowed: state.get then sees only the
// run's own writes, log and print are dropped and call_tool raises an error.
type Host interface {
	// StateGet reads the session's rule state (a JSON-like Go value).
	StateGet(key string) (value any, ok bool, err error)
	// CallTool calls a tool through the full pipeline; the host checks policy and depth.
	// ctx carries the run's deadline.
	CallTool(ctx context.Context, name string, args []byte) (result []byte, err error)
	// Log receives log and print output; level is debug, info, warn or error.
	Log(level, message string)
}

// ProgressHost is a Host that takes progress reports (a Lua tool's
// progress(done, total, message), sent on to an MCP client that asked).
// Hosts without it ignore progress.
type ProgressHost interface {
	Progress(done, total float64, message string)
}

// Action is something a script asked for. The host applies actions only when the run returned
// no error.
type Action struct {
	Type string // "notify_self", "set_state", "emit_event", "deny", "ask", "block"

	Message  string // notify_self
	Priority string // notify_self: low, normal (unless given), high or critical
	// notify_self delivered later: notify's third argument {deliver_on =
	// EVENT, deliver_after_ms = N}; the host checks them.
	DeliverOn      string
	DeliverAfterMS int

	Key   string // set_state
	Value any    // set_state; JSON-like: nil, bool, float64, string, []any, map[string]any

	Event   string         // emit_event
	Payload map[string]any // emit_event; never nil

	Reason string // deny, ask, block
}

// Result is what a completed run produced.
type Result struct {
	// Value is the first value returned, as a JSON-like Go value: Lua tables become []any when
	// their keys are exactly 1..n, map[string]any otherwise (number keys formatted as strings, an
	// empty table is an empty map); nil stays nil.
	Value any
	// JSON is the first value returned, encoded as EncodeJSON would; set by CallJSON only.
	JSON    []byte
	Actions []Action
}

// ErrorKind tells what kind of failure an *Error is.
type ErrorKind int

const (
	// KindSyntax: the source did not parse or compile, or nests too deeply.
	KindSyntax ErrorKind = iota + 1
	// KindRuntime: the script raised an error, or returned something that cannot be converted.
	KindRuntime
	// KindTimeout: the deadline passed or the caller's context was canceled. The error unwraps
	// to context.DeadlineExceeded or context.Canceled.
	KindTimeout
	// KindLimit: a sandbox limit was exceeded (source size, string size, memory, results). The
	// error unwraps to ErrLimit.
	KindLimit
	// KindInternal: a Go panic inside the sandbox (a bug); the run is discarded.
	KindInternal
)

func (k ErrorKind) String() string {
	switch k {
	case KindSyntax:
		return "syntax"
	case KindRuntime:
		return "runtime"
	case KindTimeout:
		return "timeout"
	case KindLimit:
		return "limit"
	case KindInternal:
		return "internal"
	}
	return "unknown"
}

// ErrLimit is what errors of KindLimit unwrap to.
var ErrLimit = errors.New("lua: sandbox limit exceeded")

// Error is the error type of Compile, Run and Call.
type Error struct {
	Kind   ErrorKind
	Script string // the chunk name given to Compile
	// Line is the script line the error points at, 0 when unknown.
	Line int
	// Message is the text for the rule author, e.g. "rules/x.lua:3: attempt to call a nil value".
	Message string
	cause   error
}

func (e *Error) Error() string { return "lua: " + e.Message }

// Unwrap returns context.DeadlineExceeded or context.Canceled for timeouts, ErrLimit for limits.
func (e *Error) Unwrap() error { return e.cause }

func newError(kind ErrorKind, script, msg string, cause error) *Error {
	e := &Error{Kind: kind, Script: script, Message: strings.TrimRight(msg, "\n"), cause: cause}
	if kind == KindLimit && cause == nil {
		e.cause = ErrLimit
	}
	e.Line = lineOf(script, e.Message)
	return e
}

// lineOf finds "script:N:" in msg.
func lineOf(script, msg string) int {
	i := strings.Index(msg, script+":")
	if script == "" || i < 0 {
		return 0
	}
	rest := msg[i+len(script)+1:]
	j := strings.IndexByte(rest, ':')
	if j <= 0 {
		return 0
	}
	n, err := strconv.Atoi(rest[:j])
	if err != nil {
		return 0
	}
	return n
}

// Script is a compiled Lua chunk. It is immutable and safe for concurrent use.
type Script struct {
	name  string
	proto *lua.FunctionProto
	// toolProto: the chunk does nothing but return a function without upvalues (the usual Lua
	// tool); a tool run makes that function directly instead of running the chunk.
	toolProto *lua.FunctionProto
	lim       Limits
}

// Name returns the chunk name given to Compile.
func (s *Script) Name() string { return s.name }

// Compile parses and compiles Lua source once with default Limits. Prototypes are cached by name
// and source text (a bounded cache), so compiling the same source twice is cheap. Syntax errors
// carry the chunk name and line. Source over Limits.MaxSourceBytes (256 KiB) is refused before
// parsing.
func Compile(name, source string) (*Script, error) {
	return CompileWithLimits(name, source, Limits{})
}

// CompileWithLimits is Compile with explicit limits (zero fields mean defaults).
func CompileWithLimits(name, source string, lim Limits) (s *Script, err error) {
	lim = lim.withDefaults()
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, newError(KindInternal, name, fmt.Sprintf("%s: internal error while compiling: %v", name, r), nil)
		}
	}()
	if len(source) > lim.MaxSourceBytes {
		return nil, newError(KindLimit, name, fmt.Sprintf("%s: source is %d bytes, over the limit of %d", name, len(source), lim.MaxSourceBytes), nil)
	}
	proto, err := compileCached(name, source)
	if err != nil {
		return nil, err
	}
	return &Script{name: name, proto: proto, toolProto: returnedFunction(proto), lim: lim}, nil
}

// Run runs a rule condition or rule script. ctxValue is what the script sees as the global ctx
// (read-only; context is the same value). If the chunk returns a function, that function is
// called with ctx and its first result is the Value. The deadline comes from ctx; without one,
// Limits.Deadline applies.
func (s *Script) Run(ctx context.Context, ctxValue map[string]any, host Host) (Result, error) {
	return s.exec(ctx, runInput{arg: ctxValue}, host)
}

// Call runs a Lua tool: the chunk must return a function, which is called with args (the tool's
// decoded JSON arguments, as a fresh Lua table); its first result is the Value (encode it with
// EncodeJSON). The globals ctx and context are nil. The deadline comes from ctx; without one,
// Limits.Deadline applies.
func (s *Script) Call(ctx context.Context, args map[string]any, host Host) (Result, error) {
	if args == nil {
		args = map[string]any{}
	}
	return s.exec(ctx, runInput{tool: true, arg: args}, host)
}

// CallJSON is Call with the arguments as JSON text (an object, or empty for none), decoded
// straight into Lua tables, and the function's first result encoded straight to JSON in
// Result.JSON (the text EncodeJSON would give for Result.Value). Result.Value holds the result
// only when it is not a table (nil, a boolean, a number or a string). No Go maps are built on
// the way, which makes it the cheaper door for Lua tools. Nothing of args is kept after it
// returns.
func (s *Script) CallJSON(ctx context.Context, args []byte, host Host) (Result, error) {
	return s.exec(ctx, runInput{tool: true, json: true, argJSON: args}, host)
}

// AppendCallJSON is CallJSON with the result's JSON appended to dst: Result.JSON is dst
// extended, for a caller that reuses its buffer from call to call. On error, what dst holds
// past its length is undefined.
func (s *Script) AppendCallJSON(dst []byte, ctx context.Context, args []byte, host Host) (Result, error) {
	return s.exec(ctx, runInput{tool: true, json: true, argJSON: args, appendTo: true, dst: dst}, host)
}

// runInput is what one run is given.
type runInput struct {
	tool    bool           // a tool call: the chunk returns the function to call
	arg     map[string]any // ctx of a rule run, the arguments of Call
	json    bool           // CallJSON: arguments from argJSON, the result as JSON
	argJSON []byte
	// appendTo: the result's JSON is appended to dst (AppendCallJSON).
	appendTo bool
	dst      []byte
}

func (s *Script) exec(ctx context.Context, in runInput, host Host) (res Result, err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if cerr := ctx.Err(); cerr != nil {
		return Result{}, newError(KindTimeout, s.name, s.name+": "+cerr.Error()+" before the run started", cerr)
	}
	st := getState()
	ok := false
	defer func() {
		if r := recover(); r != nil {
			res, err, ok = Result{}, newError(KindInternal, s.name, fmt.Sprintf("%s: internal error: %v", s.name, r), nil), false
		}
		st.endRun()
		if ok {
			st.tables.recycle() // the run is over and succeeded: nothing reaches them now
			putState(st)
		} else {
			st.tables.forget()
			st.close()
		}
	}()
	res, err = st.run(ctx, s, in, host)
	ok = err == nil
	return res, err
}

// deadlineMessage renders the deadline of a timed-out run.
func deadlineMessage(d time.Duration) string {
	if d >= time.Millisecond {
		d = d.Round(time.Millisecond)
	}
	return fmt.Sprintf("deadline of %v exceeded", d)
}
