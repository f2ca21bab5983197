package toolbox

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Call is one invocation of a tool. Arguments may point into the caller's
// request (C memory): they are borrowed until the tool returns, and
// anything that keeps them must copy them. Session is always Clara's own
// string (protocol.SessionName made it at the boundary).
type Call struct {
	Session   string // owned; may be kept
	Arguments []byte // a compact JSON object; borrowed
	Scope     Scope  // the policy the call runs under (tools that call or list tools use it)
	Tool      *Tool  // the tool being called (its name for nested calls; self-timed runners release it, see ToolOptions.SelfTimed)
	// Room: memory the call may use (its deadline context, its result).
	// Its owner must not reuse it while the call's context or result may
	// still be in use: the call's tool keeps nothing of its call, or says
	// so when it hands its context on (core.HandOnContext). Nil: allocated.
	Room *CallRoom
}

// Func runs a tool. It returns a JSON value (or text, for ReturnsString)
// that may alias call.Arguments, or an error: a *protocol.Error keeps its
// code, any other error becomes tool_failed with its message.
type Func func(ctx context.Context, call Call) ([]byte, error)

// Tool is a registered tool: its descriptor, compiled schema, limits state
// and function. Build one with NewTool; it must not be modified afterwards.
type Tool struct {
	Descriptor
	Run     Func
	Builtin bool // shipped with Clara: cannot be replaced or unregistered by hosts
	// Inline tools run on the caller's goroutine with no timer: trusted Go
	// functions that return promptly. Self-timed tools run on the caller's
	// goroutine too but enforce the deadline themselves (see
	// ToolOptions.SelfTimed). Others run on their own goroutine so that
	// timeout_ms holds at the deadline whatever they do.
	Inline    bool
	SelfTimed bool
	// Host: registered by the host program (clara_register_tool): Run
	// hands the call to C or Python code, which cancelling cannot stop.
	Host          bool
	pollsDeadline bool // see ToolOptions.PollsDeadline
	compactJSON   bool // see ToolOptions.CompactJSON
	// Admin: an administrative built-in (see Builtin.Admin).
	Admin bool
	// KeepsNothing: an inline built-in that keeps nothing of its call
	// (see Builtin.KeepsNothing), or a tool that says what it hands on
	// (ToolOptions.KeepsNothing).
	KeepsNothing bool
	// Origin: who brought the tool (see Origin).
	Origin Origin
	// Offered, when set, says whether the tool can answer now: one that
	// cannot (ask_user while nobody is there to ask) is left out of the
	// catalogs (tools_list, MCP's tools/list, a chat's tools); a call of
	// it still gets its own error.
	Offered func() bool

	schema       *jsonschema.Schema
	simple       *simpleSchema      // the direct check of schema; nil when it uses more
	output       *jsonschema.Schema // OutputSchema compiled; nil: results are not checked
	outputSimple *simpleSchema
	changes      [][]string    // ChangesFiles as pointer tokens
	slots        chan struct{} // max_concurrency; nil when unlimited
	rate         *rateLimiter  // nil when no rate_per_min

	// refs counts the registry's reference plus one per call running the
	// tool. When it drops to zero the tool is gone for good and onRelease
	// runs, exactly once: a C tool's free_userdata never races a call.
	refs      atomic.Int64
	onRelease func()
	released  sync.Once
}

// ToolOptions are the parts of a tool that are not its descriptor.
type ToolOptions struct {
	Run     Func
	Builtin bool
	Inline  bool
	Host    bool // see Tool.Host
	// SelfTimed: Run gets a context whose deadline is the call's timeout
	// and must return by then. When the tool itself goes on running past
	// it, Run returns ErrStillRunning at the deadline and calls
	// call.Tool.Finished() once the tool has really stopped; the tool (and
	// its concurrency slot) stays held until then. This is how C tools
	// run: on a thread of their own, handed over without the Go scheduler.
	SelfTimed bool
	// PollsDeadline (with SelfTimed): Run watches its context's Deadline
	// itself (a Lua tool's VM looks at the clock as it runs), so no timer
	// is armed for the call unless it may wait for a concurrency slot:
	// its context's Done closes only when the caller's does, and Err
	// reports the deadline once it has passed.
	PollsDeadline bool
	// CompactJSON: what Run returns is compact, valid JSON nested less than
	// 10000 deep (a Lua tool's encoder writes nothing else), so it is not
	// scanned again; a returns="string" tool's text is quoted as ever.
	CompactJSON bool
	// KeepsNothing: Run keeps nothing of its call once it returns, and
	// reports (to core) whatever it passes on that may outlive the call: a
	// nested call, actions applied with the call's context. Core may then
	// reuse the call's state for the next request, as for the echo.
	KeepsNothing bool
	Origin       Origin // see Tool.Origin
	OnRelease    func() // runs once when the tool is unregistered or replaced and no call is running it
}

// Origin is who brought a tool into the registry, for the rule of whose
// name it may take (Registry.SwapGuarded's guard, which the engine
// writes). The zero value is the host program's.
type Origin struct {
	Rank     int    // the engine's order of owners: higher ranks keep their names
	Name     string // who, for messages
	Replaces bool   // its configuration says it may take the name of a higher rank
}

// CanAnswer reports whether the tool can answer now (Offered).
func (t *Tool) CanAnswer() bool { return t.Offered == nil || t.Offered() }

// NewTool checks the descriptor, compiles its schema once, and returns a
// tool ready to register. On error, OnRelease is not called: the caller
// still owns what it would release.
func NewTool(d Descriptor, o ToolOptions) (*Tool, error) {
	if o.Run == nil {
		return nil, fmt.Errorf("tool %q has no function", d.Name)
	}
	if d.Returns == "" {
		d.Returns = ReturnsJSON
	}
	// The tool keeps its own copies: check sorts the capabilities.
	d.Capabilities = append([]string(nil), d.Capabilities...)
	d.InputSchema = bytes.Clone(d.InputSchema)
	d.ChangesFiles = append([]string(nil), d.ChangesFiles...)
	d.OutputSchema = bytes.Clone(d.OutputSchema)
	if d.Annotations != nil {
		a := *d.Annotations
		d.Annotations = &a
	}
	if d.NeedsApproval != nil {
		n := *d.NeedsApproval
		d.NeedsApproval = &n
	}
	if err := d.check(); err != nil {
		return nil, err
	}
	changes, _ := compileChangesFiles(d.ChangesFiles) // check accepted them
	s, simple, err := compileSchema(d.Name, d.InputSchema)
	if err != nil {
		return nil, err
	}
	out, outSimple, err := compileSchemaOf(d.Name, "output_schema", d.OutputSchema)
	if err != nil {
		return nil, &OutputSchemaError{err}
	}
	t := &Tool{Descriptor: d, Run: o.Run, Builtin: o.Builtin, Inline: o.Inline, SelfTimed: o.SelfTimed, Host: o.Host, schema: s,
		simple: simple, output: out, outputSimple: outSimple, pollsDeadline: o.PollsDeadline, compactJSON: o.CompactJSON, changes: changes, onRelease: o.OnRelease,
		KeepsNothing: o.KeepsNothing, Origin: o.Origin}
	if d.Limits.MaxConcurrency > 0 {
		t.slots = make(chan struct{}, d.Limits.MaxConcurrency)
	}
	if d.Limits.RatePerMin > 0 {
		t.rate = newRateLimiter(d.Limits.RatePerMin, d.Limits.RateScope == RateScopeSession)
	}
	t.refs.Store(1)
	return t, nil
}

// OutputSchemaError is NewTool's error for an output_schema that does not
// compile (a remote MCP server's tool is then served without it).
type OutputSchemaError struct{ Err error }

func (e *OutputSchemaError) Error() string { return e.Err.Error() }
func (e *OutputSchemaError) Unwrap() error { return e.Err }

// acquire takes a reference for one call; false when the tool is already
// gone (unregistered and idle). Built-in tools are never released, so they
// skip the count: an atomic shared by every call would pass its cache line
// between the threads calling at once.
func (t *Tool) acquire() bool {
	if t.Builtin {
		return true
	}
	for {
		n := t.refs.Load()
		if n <= 0 {
			return false
		}
		if t.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference; the last one runs onRelease.
func (t *Tool) release() {
	if t.Builtin {
		return
	}
	if t.refs.Add(-1) == 0 && t.onRelease != nil {
		t.released.Do(t.onRelease)
	}
}

// retire drops the registry's reference: the tool finishes the calls it is
// running, then is released.
func (t *Tool) retire() { t.release() }

// HasSchema reports whether arguments are validated against a schema.
func (t *Tool) HasSchema() bool { return t.schema != nil }

// WithLimits returns a tool that is t with limits l: the same function,
// schema and everything else, for the calls that start once it is
// registered in t's place (Registry.SetLimits). Calls already running
// keep t's limits. A rate limit or concurrency bound that stays the same
// carries on with its count; one that changes starts afresh. The new tool
// holds a reference on t, so that t (and what it releases, such as a C
// tool's userdata) lives as long as either is in use. It fails when l is
// out of bounds, or when t is already gone.
func (t *Tool) WithLimits(l Limits) (*Tool, error) {
	d := t.Descriptor
	d.Limits = l
	if err := d.check(); err != nil {
		return nil, err
	}
	n := &Tool{Descriptor: d, Run: t.Run, Builtin: t.Builtin, Inline: t.Inline, SelfTimed: t.SelfTimed, Host: t.Host,
		pollsDeadline: t.pollsDeadline, compactJSON: t.compactJSON, Admin: t.Admin, KeepsNothing: t.KeepsNothing,
		Origin: t.Origin, schema: t.schema, simple: t.simple, output: t.output, outputSimple: t.outputSimple, changes: t.changes}
	if l.MaxConcurrency == t.Limits.MaxConcurrency {
		n.slots = t.slots
	} else if l.MaxConcurrency > 0 {
		n.slots = make(chan struct{}, l.MaxConcurrency)
	}
	if l.RatePerMin == t.Limits.RatePerMin && l.RateScope == t.Limits.RateScope {
		n.rate = t.rate
	} else if l.RatePerMin > 0 {
		n.rate = newRateLimiter(l.RatePerMin, l.RateScope == RateScopeSession)
	}
	if !t.Builtin {
		if !t.acquire() {
			return nil, fmt.Errorf("tool %q: %w", t.Name, ErrNotFound)
		}
		n.onRelease = t.release
	}
	n.refs.Store(1)
	return n, nil
}
