package toolbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clara-lib/clara/core/protocol"
)

// maxResultDepth bounds the nesting of a JSON result a tool hands back
// when no limits.max_depth is given (Defaults.MaxDepth 0).
const maxResultDepth = 10000

// ErrStillRunning is what a self-timed tool's Run returns when the call's
// deadline passed while the tool goes on running (see ToolOptions).
var ErrStillRunning = errors.New("the tool is still running past its deadline")

// ErrAnsweredLate is what a self-timed tool's Run returns when the tool
// answered after it had been told its call ended (a C tool that read
// clara_call_cancelled as 1): the answer is dropped and the call ends as
// one still running at its deadline would, whichever thread woke first.
var ErrAnsweredLate = errors.New("the tool answered after it was told its call had ended")

// Defaults fill in the limits a descriptor leaves at zero (config [limits]).
type Defaults struct {
	TimeoutMS      int
	MaxOutputBytes int
	// MaxDepth bounds the nesting of a JSON result of a tool that is not
	// built in (limits.max_depth), as requests are bounded: a result comes
	// from outside as much as a request (a remote server, an HTTP answer)
	// and goes back to a host whose parser may recurse (Python's json
	// raises RecursionError past about 1,000).
	MaxDepth int
}

// Validate checks arguments against the tool's input_schema; the error
// lists every violation with its JSON pointer.
func (t *Tool) Validate(args []byte) *protocol.Error {
	return validate(t.Name, t.schema, t.simple, args, false)
}

// ValidateScanned is Validate for arguments that protocol.Parse already
// scanned strictly (duplicate keys refused): the scan is not done twice.
func (t *Tool) ValidateScanned(args []byte) *protocol.Error {
	return validate(t.Name, t.schema, t.simple, args, true)
}

// Admit applies rate_per_min at now: nil, or rate_limited with
// details.retry_after_ms.
func (t *Tool) Admit(session string, now time.Time) *protocol.Error {
	if t.rate == nil {
		return nil
	}
	ok, wait := t.rate.admit(session, now)
	if ok {
		return nil
	}
	return RateLimitedError(t.Name, t.rate.n, t.rate.perSession, wait)
}

// RateLimitedError is the error of a call refused by a rate_per_min of n
// (per session or for the whole tool), which may be retried after wait.
// The shared store's windows (core, issue 31) answer with it too.
func RateLimitedError(tool string, n int, perSession bool, wait time.Duration) *protocol.Error {
	ms := wait.Milliseconds()
	if wait%time.Millisecond != 0 {
		ms++
	}
	scope := "tool"
	if perSession {
		scope = "session"
	}
	return &protocol.Error{
		Code:    protocol.RateLimited,
		Message: fmt.Sprintf("tool %q allows %d call%s a minute per %s; retry in %d ms", tool, n, plural(n), scope, ms),
		Details: []byte(fmt.Sprintf(`{"retry_after_ms":%d,"rate_per_min":%d}`, ms, n)),
	}
}

// RateSpan is the window of rate_per_min.
const RateSpan = rateSpan

// Execute runs one call under the tool's concurrency cap and timeout and
// clamps its output. truncated is set when a string result was cut to
// max_output_bytes.
func (t *Tool) Execute(ctx context.Context, call Call, d Defaults) (result []byte, truncated bool, perr *protocol.Error) {
	if !t.acquire() {
		return nil, false, protocol.Errorf(protocol.UnknownTool, "Tool not found: %s (unregistered while the call started)", t.Name)
	}
	call.Tool = t
	var out []byte
	switch {
	case t.Inline:
		out, perr = t.runInline(ctx, call)
	case t.SelfTimed:
		out, perr = t.runSelfTimed(ctx, call, d) // releases the reference, now or when the tool stops
	default:
		out, perr = t.runGuarded(ctx, call, d) // releases the reference itself
	}
	if perr != nil {
		return nil, false, perr
	}
	result, truncated, perr = t.clamp(out, d)
	if t.output != nil && perr == nil {
		// A tool that declares its result's schema is held to it: a client
		// that reads structuredContent relies on it (docs/tools.md).
		if perr = checkSchema(t.Name, t.output, t.outputSimple, result, protocol.ToolFailed,
			"its result is not JSON", "its result does not match output_schema"); perr != nil {
			return nil, false, perr
		}
	}
	return result, truncated, perr
}

// runSelfTimed calls a tool that keeps its own deadline (a C tool) on the
// caller's goroutine, with the concurrency slot taken here.
func (t *Tool) runSelfTimed(ctx context.Context, call Call, d Defaults) (out []byte, perr *protocol.Error) {
	ctx, cancel, timeout := t.withDeadline(ctx, call, d)
	defer cancel()
	if perr := t.takeSlot(ctx, timeout); perr != nil {
		return nil, perr
	}
	stillRunning := false
	defer func() {
		if r := recover(); r != nil {
			out, perr = nil, protocol.InternalError(fmt.Errorf("panic in tool %q: %v\n%s", t.Name, r, debug.Stack()))
		}
		if !stillRunning {
			t.Finished()
		}
	}()
	call.Tool = t
	res, err := t.Run(ctx, call)
	if errors.Is(err, ErrStillRunning) || errors.Is(err, ErrAnsweredLate) {
		stillRunning = errors.Is(err, ErrStillRunning)
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil, t.deadlineError(ctx, timeout, "running")
		}
		// The runner's clock may reach the deadline a hair before ctx's.
		return nil, protocol.Errorf(protocol.Timeout, "tool %q ran past its timeout of %d ms (running)", t.Name, timeout)
	}
	if err != nil {
		return nil, classify(ctx, t, err)
	}
	return res, nil
}

// withDeadline gives ctx the call's timeout (the tool's timeout_ms, or the
// configured default; none when both are 0) and returns it in ms.
func (t *Tool) withDeadline(ctx context.Context, call Call, d Defaults) (context.Context, context.CancelFunc, int) {
	timeout := t.Limits.TimeoutMS
	if timeout == 0 {
		timeout = d.TimeoutMS
	}
	if timeout > 0 && t.pollsDeadline && t.slots == nil {
		// From now, not from when the call was taken: timeout_ms is what the
		// tool itself may take (validation and rules before it do not count).
		budget := time.Duration(timeout) * time.Millisecond
		d := time.Now().Add(budget)
		if pd, ok := ctx.Deadline(); ok && !d.Before(pd) {
			return ctx, func() {}, timeout
		}
		var c *polledDeadline
		if r := call.Room; r != nil && !r.taken {
			c, r.taken = &r.deadline, true
		} else {
			c = new(polledDeadline)
		}
		*c = polledDeadline{Context: ctx, deadline: d, budget: budget}
		return c, func() {}, timeout
	}
	if timeout > 0 {
		ctx, cancel := context.WithTimeout(ctx, time.Duration(timeout)*time.Millisecond)
		return ctx, cancel, timeout
	}
	ctx, cancel := context.WithCancel(ctx)
	return ctx, cancel, timeout
}

// polledDeadline is the context of a tool that watches its deadline itself
// (ToolOptions.PollsDeadline): the caller's context with an earlier
// deadline and no timer. Done is the caller's (a nested WithDeadline finds
// the caller's cancelCtx through Value and arms its own timer); Err reads
// the clock.
type polledDeadline struct {
	context.Context
	deadline time.Time
	budget   time.Duration // the timeout the deadline ends
}

func (c *polledDeadline) Deadline() (time.Time, bool) { return c.deadline, true }

// CallRoom is memory for one call (see Call.Room), kept by a caller that
// reuses it from call to call: without it, a tool that polls its deadline
// allocates that context, and a tool that encodes its result allocates the
// result, on every call.
type CallRoom struct {
	deadline polledDeadline
	taken    bool // the deadline used once already: a second call allocates its own
	// Out is a buffer a tool may append its result to (from Out[:0]) and
	// keep for the next call (Out = result[:0]): the result then aliases
	// it, and is read until the call's answer is written.
	Out []byte
}

// maxRoomOut: a larger buffer is not kept from call to call.
const maxRoomOut = 4096

// Reset makes the room ready for the next call, keeping a small Out.
func (r *CallRoom) Reset() {
	out := r.Out
	*r = CallRoom{}
	if cap(out) <= maxRoomOut {
		r.Out = out[:0]
	}
}

// Budget is the whole time the deadline gives (rulelua states it in a
// timeout's message without reading the clock again).
func (c *polledDeadline) Budget() time.Duration { return c.budget }

func (c *polledDeadline) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if time.Until(c.deadline) <= 0 { // the monotonic clock alone: half of time.Now
		return context.DeadlineExceeded
	}
	return nil
}

// takeSlot waits for one of the tool's max_concurrency slots until ctx's
// deadline; on failure it drops the call's reference to the tool.
func (t *Tool) takeSlot(ctx context.Context, timeout int) *protocol.Error {
	if t.slots == nil {
		return nil
	}
	select {
	case t.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		t.release()
		return t.deadlineError(ctx, timeout, "waiting for one of its %d concurrent slots", t.Limits.MaxConcurrency)
	}
}

// Finished ends a call of a self-timed tool: it frees the call's
// concurrency slot and its reference to the tool. The toolbox calls it
// when Run returns; a self-timed runner calls it itself for a call it gave
// up on (Run returned ErrStillRunning), once the tool has really stopped.
func (t *Tool) Finished() {
	if t.slots != nil {
		<-t.slots
	}
	t.release()
}

// runInline calls a trusted Go tool on the caller's goroutine.
func (t *Tool) runInline(ctx context.Context, call Call) (out []byte, perr *protocol.Error) {
	defer t.release()
	defer func() {
		if r := recover(); r != nil {
			out, perr = nil, protocol.InternalError(fmt.Errorf("panic in tool %q: %v\n%s", t.Name, r, debug.Stack()))
		}
	}()
	res, err := t.Run(ctx, call)
	if err != nil {
		return nil, classify(ctx, t, err)
	}
	return res, nil
}

type runResult struct {
	out  []byte
	perr *protocol.Error
}

// runGuarded runs the tool on its own goroutine: the caller gets timeout at
// the deadline even if the tool never returns, and a late result is
// dropped. A concurrency slot is held until the tool really returns.
func (t *Tool) runGuarded(ctx context.Context, call Call, d Defaults) ([]byte, *protocol.Error) {
	ctx, cancel, timeout := t.withDeadline(ctx, call, d)
	defer cancel()
	if perr := t.takeSlot(ctx, timeout); perr != nil {
		return nil, perr
	}
	// The tool may outlive this call (past a timeout): it gets its own copies
	// of what points into the request.
	call.Arguments = bytes.Clone(call.Arguments)
	call.Session = strings.Clone(call.Session)
	done := make(chan runResult, 1)
	go func() {
		// Deferred calls run last first: the reference goes before the slot,
		// so a caller that finds the slot free finds this call finished.
		if t.slots != nil {
			defer func() { <-t.slots }()
		}
		defer t.release()
		var res runResult
		defer func() {
			if r := recover(); r != nil {
				res = runResult{perr: protocol.InternalError(fmt.Errorf("panic in tool %q: %v\n%s", t.Name, r, debug.Stack()))}
			}
			done <- res
		}()
		out, err := t.Run(ctx, call)
		if err != nil {
			res.perr = classify(ctx, t, err)
		} else {
			res.out = out
		}
	}()
	select {
	case r := <-done:
		return r.out, r.perr
	case <-ctx.Done():
		return nil, t.deadlineError(ctx, timeout, "running")
	}
}

func (t *Tool) deadlineError(ctx context.Context, timeoutMS int, doing string, args ...any) *protocol.Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return protocol.Errorf(protocol.Timeout, "tool %q ran past its timeout of %d ms (%s)", t.Name, timeoutMS, fmt.Sprintf(doing, args...))
	}
	return protocol.Errorf(protocol.ToolFailed, "tool %q: call cancelled (%s)", t.Name, fmt.Sprintf(doing, args...))
}

// clamp encodes and checks a tool's output: text becomes a JSON string cut
// at a UTF-8 boundary to max_output_bytes; JSON from a tool that is not
// built in is checked and compacted, and refused when larger than
// max_output_bytes.
func (t *Tool) clamp(out []byte, d Defaults) ([]byte, bool, *protocol.Error) {
	max := t.Limits.MaxOutputBytes
	if max == 0 {
		max = d.MaxOutputBytes
	}
	if t.Returns == ReturnsString {
		truncated := false
		if max > 0 && len(out) > max {
			cut := max
			for cut > 0 && !utf8.RuneStart(out[cut]) {
				cut--
			}
			out, truncated = out[:cut], true
		}
		return protocol.AppendString(make([]byte, 0, len(out)+2), string(out)), truncated, nil
	}
	if len(out) == 0 {
		return []byte("null"), false, nil
	}
	if !t.Builtin && !t.compactJSON {
		var perr *protocol.Error
		if out, perr = CheckJSON(t.Name, out, d.MaxDepth); perr != nil {
			return nil, false, perr
		}
	}
	if max > 0 && len(out) > max {
		return nil, false, &protocol.Error{
			Code:    protocol.OutputTooLarge,
			Message: fmt.Sprintf("tool %q returned %d bytes of JSON, more than its max_output_bytes (%d)", t.Name, len(out), max),
			Details: []byte(fmt.Sprintf(`{"bytes":%d,"max_output_bytes":%d}`, len(out), max)),
		}
	}
	if t.Returns == ReturnsContent {
		if err := CheckContent(out); err != nil {
			return nil, false, protocol.Errorf(protocol.ToolFailed, "tool %q: %v", t.Name, err)
		}
	}
	return out, false, nil
}

// CheckJSON is clamp's check of a JSON result from a tool that is not built
// in: one JSON value, nested at most maxDepth deep (limits.max_depth; 0:
// 10000), returned compacted (a copy only when it had whitespace to
// remove). A tool that checks its own
// results (ToolOptions.CompactJSON) calls it for those it cannot vouch for.
func CheckJSON(tool string, out []byte, maxDepth int) ([]byte, *protocol.Error) {
	if maxDepth <= 0 {
		maxDepth = maxResultDepth
	}
	sc, serr := protocol.Scan(out, maxDepth)
	if serr != nil && serr.TooDeep {
		return nil, protocol.Errorf(protocol.ToolFailed, "tool %q returned JSON nested deeper than limits.max_depth (%d)", tool, maxDepth)
	}
	if serr != nil {
		return nil, protocol.Errorf(protocol.ToolFailed, "tool %q returned invalid JSON: %v", tool, serr)
	}
	if sc.Spaced {
		return protocol.AppendCompact(nil, out[sc.Start:sc.End]), nil
	}
	return out[sc.Start:sc.End], nil
}

// classify maps a tool's error to the protocol: a *protocol.Error keeps
// its code, a missed deadline is timeout, anything else is tool_failed.
func classify(ctx context.Context, t *Tool, err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &protocol.Error{Code: protocol.Timeout, Message: fmt.Sprintf("tool %q ran past its deadline", t.Name), Cause: err}
	}
	return &protocol.Error{Code: protocol.ToolFailed, Message: err.Error(), Cause: err}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
