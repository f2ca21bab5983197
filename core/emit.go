package core

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
	"github.com/clara-lib/clara/core/toolbox"
)

// successPrefix starts a success envelope that has only a result.
const successPrefix = `{"status":"success","result":`

// maxEmitAnswer bounds the answer of one emission (its fired rules and
// notices); a larger one is refused rather than handed to the host.
const maxEmitAnswer = 16 << 20

// serveEmit answers clara_emit: the event parsed as strictly as a request,
// fired, and its outcome written once, into the envelope.
func (e *Engine) serveEmit(ctx context.Context, dst, text []byte) []byte {
	mark := len(dst)
	if text == nil {
		return protocol.AppendError(dst, nil, nullInput)
	}
	s := e.current.Load()
	ev, perr := protocol.ParseEvent(text, s.limits)
	if perr != nil {
		return protocol.AppendError(dst, nil, perr)
	}
	ctx = withEmissionBudget(ctx, s)
	out, perr := e.emit(ctx, s, ev.Name, ev.Session, ev.Payload, ev.Trace, append(dst, successPrefix...))
	if perr == nil && len(out)-mark > maxEmitAnswer {
		perr = protocol.Errorf(protocol.OutputTooLarge, "the answer of event %q is %d bytes, more than %d", ev.Name, len(out)-mark, maxEmitAnswer)
	}
	if perr != nil {
		return protocol.AppendError(dst[:mark], nil, perr)
	}
	return append(out, '}')
}

var nullInput = &protocol.Error{Code: protocol.InvalidJSON, Message: "Invalid JSON: NULL input"}

// emit fires an event from a caller (clara_emit, emit_event, session_end)
// and renders the outcome as the result object of SPEC §7.3, appended to
// dst (an envelope's start, or nil for a tool).
func (e *Engine) emit(ctx context.Context, s *snapshot, event, session string, payload map[string]any, trace bool, dst []byte) ([]byte, *protocol.Error) {
	session, perr := emittable(event, session)
	if perr != nil {
		return nil, perr
	}
	rep := &report{wantTrace: trace, outcomeOnly: true}
	src := e.newEventSource(s, event, session, payload)
	defer src.release()
	out := e.fire(ctx, s, rep, src)
	body := rules.Outcome{Fired: out.Fired, Notices: out.Notices, Denied: out.Denied, Trace: rep.trace}
	// Room for a typical answer: a fired rule or a notice is ~80 bytes
	// besides its message, which a notify_self writes twice (its record,
	// its notice). A close guess matters: the host's buffer takes an
	// answer that fits, and one guessed larger than it goes through Go.
	need := len(dst) + 64 + 96*(len(out.Fired)+len(out.Notices))
	for i := range out.Notices {
		need += 2 * len(out.Notices[i].Message)
	}
	if cap(dst) < need {
		dst = append(make([]byte, 0, need), dst...)
	}
	dst = body.AppendJSON(dst, trace) // "trace" present, if empty, when asked for
	// Written, the outcome is dropped: its memory serves the next
	// emission (the session's queue holds copies of its notices).
	out.Release()
	return dst, nil
}

// emittable checks an event's name and returns its session's name.
func emittable(event, session string) (string, *protocol.Error) {
	if !rules.ValidEventName(event) {
		return "", protocol.Errorf(protocol.InvalidRequest, "event %q is not an event name ([a-z][a-z0-9_.]*)", event)
	}
	if strings.HasPrefix(event, "on_tool_") {
		return "", protocol.Errorf(protocol.InvalidRequest, "%s is emitted by the tool pipeline itself, not by callers", event)
	}
	return protocol.SessionName(session)
}

// fireOnly fires an event the engine raises itself (a chat's turn, a
// plugin's load) for what its rules do: their notices go to the session's
// queue, and no answer is written. An event no rule watches costs a
// lookup: payload is called only when a rule will read it.
func (e *Engine) fireOnly(ctx context.Context, s *snapshot, event, session string, payload func() map[string]any) *protocol.Error {
	if !s.rules.Watches(event) {
		e.sessions.Release(session, event) // the notices held until it (fire releases them otherwise)
		return nil
	}
	session, perr := emittable(event, session)
	if perr != nil {
		return perr
	}
	src := e.newEventSource(s, event, session, payload())
	e.fire(ctx, s, &report{outcomeOnly: true}, src).Release()
	src.release()
	return nil
}

// emissionBudget bounds the work one event tree may set off: every event a
// rule emits (emit_event, however deep) and every tool a rule or script
// calls draws on it. Depth alone (rules.MaxChainDepth) bounds nothing when
// each level fans out: N actions re-emitting their own event made N^7
// emissions from one clara_emit.
type emissionBudget struct {
	left atomic.Int64
	max  int
}

type emissionBudgetKey struct{}

// withEmissionBudget starts the budget of an event tree at its root (a
// request, an emission, a background completion); a ctx that has one keeps
// it.
func withEmissionBudget(ctx context.Context, s *snapshot) context.Context {
	if _, ok := ctx.Value(emissionBudgetKey{}).(*emissionBudget); ok {
		return ctx
	}
	// One allocation per request (every call starts a tree): the context
	// and its budget together.
	bc := &budgetContext{Context: ctx}
	bc.budget.max = s.config.Rules.MaxEmissions
	bc.budget.left.Store(int64(bc.budget.max))
	return bc
}

// budgetContext is a context carrying an emission budget.
type budgetContext struct {
	context.Context
	budget emissionBudget
}

// requestState is what one request needs beyond its stack: the budget of
// its event tree, as its context, and its report.
//
// It is the only allocation of the cheapest calls, and allocating on every
// call made the garbage collector run tens of times a second, on the same
// cores as the callers: two threads calling at once lost a good part of
// the second core to it. So a request whose call handed its context to no
// one (no rule fired, no callback ran, the tool keeps nothing: see
// toolCall.handOn) gives its state back to a pool for the next request.
type requestState struct {
	budgetContext
	rep report
	// room: memory for the call's deadline context and its result
	// (toolbox.Call.Room).
	room toolbox.CallRoom
	// handedOn: the context or the report went where it may outlive the
	// request (a rule, a callback, a tool that may keep it): never reused.
	// Atomic: a C tool's nested request may set it from the tool's thread
	// (AppendEvaluateWithin), which Go sees as another goroutine.
	handedOn atomic.Bool
	// The call's decision id and the request's id (a copy, into memory the
	// state keeps): the parent and request of the calls it makes.
	ticket toolbox.Ticket
	reqID  []byte
}

var requestStates = sync.Pool{New: func() any { return new(requestState) }}

type requestStateKey struct{}

// Value: a tool that keeps nothing finds its request's state through its
// context, to say when it hands it on (HandOnContext).
func (st *requestState) Value(key any) any {
	if key == (requestStateKey{}) {
		return st
	}
	return st.budgetContext.Value(key)
}

// HandOnContext notes that ctx, the context a tool registered with
// toolbox.ToolOptions.KeepsNothing was called with, goes where it may
// outlive the call (a nested call, actions that fire rules, a C tool
// abandoned at its deadline that still runs with it): the request's state
// is then not reused.
func HandOnContext(ctx context.Context) {
	if st, ok := ctx.Value(requestStateKey{}).(*requestState); ok {
		st.handedOn.Store(true)
	}
}

func newRequestState(ctx context.Context, s *snapshot, fromPool bool) *requestState {
	var st *requestState
	if fromPool {
		st = requestStates.Get().(*requestState)
	} else {
		st = &requestState{} // never pooled
		st.handedOn.Store(true)
	}
	st.Context = ctx
	st.budget.max = s.config.Rules.MaxEmissions
	st.budget.left.Store(int64(st.budget.max))
	return st
}

// done ends the request: its state goes back to the pool unless it was
// handed on.
func (st *requestState) done() {
	if st.handedOn.Load() {
		return
	}
	st.budgetContext = budgetContext{}
	st.rep = report{}
	st.room.Reset()
	st.ticket, st.reqID = toolbox.Ticket{}, st.reqID[:0]
	requestStates.Put(st)
}

func (c *budgetContext) Value(key any) any {
	if key == (emissionBudgetKey{}) {
		return &c.budget
	}
	return c.Context.Value(key)
}

// spend draws one emission or nested call from ctx's budget.
func spend(ctx context.Context, what string) error {
	b, ok := ctx.Value(emissionBudgetKey{}).(*emissionBudget)
	if !ok || b.left.Add(-1) >= 0 {
		return nil
	}
	return fmt.Errorf("%s refused: this event tree already set off %d events and calls (rules.max_emissions)", what, b.max)
}
