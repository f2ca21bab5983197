package core

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/pgstore"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// Approvals (issue 28): a call that a rule's ask, or its tool's
// needs_approval, holds waits here for a person's decision before it
// runs. One mechanism serves every surface: the host's Approver (C's
// clara_set_approval_handler, Python's clara.set_approval_handler, the
// CLIPS bridge, a terminal prompt of the CLI, MCP elicitation when Clara
// serves) is asked on a goroutine of its own and may answer at once or
// leave the approval pending; approval_decide (DecideApproval) decides a
// pending one from any thread. Nothing runs without a decision: no
// approver, an approver that fails, no answer within
// policy.approval_timeout_ms, and the call is rejected with the reason.

// ApprovalRequest is what the approver is shown of a call held for
// approval. Arguments are the call's validated arguments, with the values
// of the secrets the configuration names cut out.
type ApprovalRequest struct {
	ID        int64           `json:"id"`
	Tool      string          `json:"tool"`
	Session   string          `json:"session"`
	Arguments json.RawMessage `json:"arguments"`
	Reason    string          `json:"reason"`
	Rule      string          `json:"rule,omitempty"`   // the rule that asked; "" for needs_approval: true
	Handle    int64           `json:"handle,omitempty"` // the asynchronous call it belongs to
	TimeoutMS int64           `json:"timeout_ms"`       // how long the call waits (policy.approval_timeout_ms)
}

// JSON is the request as an approval handler gets it: {"id", "tool",
// "session", "arguments", "reason", "rule"?, "handle"?, "timeout_ms"}.
func (r *ApprovalRequest) JSON() []byte {
	b, _ := json.Marshal(r) // strings and raw JSON that was validated: cannot fail
	return b
}

// ParseApprovalDecision reads a decision as a handler writes it:
// {"decision": "approve"}, {"decision": "approve", "arguments": {...}}
// (the call runs with those), or {"decision": "reject", "reason": "..."}.
func ParseApprovalDecision(text []byte) (ApprovalDecision, error) {
	var raw struct {
		Decision  *string         `json:"decision"`
		Reason    *string         `json:"reason"`
		Arguments json.RawMessage `json:"arguments"`
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return ApprovalDecision{}, fmt.Errorf("not a decision (%v): give {\"decision\": \"approve\" or \"reject\", \"reason\", \"arguments\"}", err)
	}
	var d ApprovalDecision
	switch {
	case raw.Decision == nil:
		return d, errors.New(`"decision" is missing: "approve" or "reject"`)
	case *raw.Decision == "approve":
		d.Approve = true
	case *raw.Decision == "reject":
		if raw.Arguments != nil {
			return d, errors.New(`"arguments" go with "approve"`)
		}
	default:
		return d, fmt.Errorf(`"decision" is %q: "approve" or "reject"`, *raw.Decision)
	}
	if raw.Reason != nil {
		d.Reason = *raw.Reason
	}
	if len(raw.Arguments) > 0 && string(raw.Arguments) != "null" {
		d.Arguments = raw.Arguments
	}
	return d, nil
}

// ApprovalDecision is a decision on a held call: approve it (with
// Arguments, its arguments replaced by those, validated again against
// the tool's schema), or reject it with a reason the model (or the
// caller) is told.
type ApprovalDecision struct {
	Approve   bool
	Reason    string
	Arguments json.RawMessage // nil: the call's own
	// By says who decided, for the audit and the trace ("handler" when
	// the approver answered, "approval_decide" for the tool).
	By string
}

// Approver decides calls held for approval. Approve is called on a
// goroutine of its own, once per approval, and may block until a person
// answered (ctx then ends when the approval no longer waits: decided
// elsewhere, timed out, its call cancelled); it returns the decision, or
// ok false to leave the approval pending for DecideApproval or the
// timeout. It must not keep req after it returns.
//
// This is the seam every surface plugs into: the C and Python handlers
// (capi), the CLIPS bridge (through capi), a terminal prompt
// (clara chat --ask), and, when Clara serves MCP, an approver that asks
// the client through elicitation (issue 30) and answers with the user's
// choice.
type Approver interface {
	Approve(ctx context.Context, req *ApprovalRequest) (d ApprovalDecision, ok bool)
}

// ApproverFunc is a function that is an Approver.
type ApproverFunc func(ctx context.Context, req *ApprovalRequest) (ApprovalDecision, bool)

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, req *ApprovalRequest) (ApprovalDecision, bool) {
	return f(ctx, req)
}

// approvalHost holds the approver and the approvals waiting for a
// decision.
type approvalHost struct {
	mu       sync.RWMutex
	approver Approver
	lastID   atomic.Int64
	// open counts the approvals handed to an approver that has not
	// returned from them yet, those whose call ended included: each may
	// hold a thread (a C or Python handler blocks in cgo), so their number
	// is bounded (limits.max_open_approvals).
	open    atomic.Int64
	pmu     sync.Mutex
	pending map[int64]*pendingApproval
}

// pendingApproval is one call waiting for its decision.
type pendingApproval struct {
	req     ApprovalRequest
	since   time.Time
	tool    *toolbox.Tool
	decided chan ApprovalDecision // buffered: the one decision, whoever gives it
	taken   atomic.Bool           // a decision was given (the first wins)
	// answered: the decision is the approver's own answer (not one made
	// through DecideApproval while the approver held it).
	answered atomic.Bool
	// store is the shared store the approval is recorded in (issue 31),
	// nil when it is this process's own (sharedapprovals.go).
	store *pgstore.Store
}

// decide gives the approval its decision; false when it had one.
func (p *pendingApproval) decide(d ApprovalDecision) bool {
	if !p.taken.CompareAndSwap(false, true) {
		return false
	}
	p.decided <- d
	return true
}

// SetApprover installs the approver of calls held for approval; nil
// removes it, and such calls are then rejected at once. Approvals already
// handed to the previous one go on with it.
func (e *Engine) SetApprover(a Approver) {
	e.approvals.mu.Lock()
	e.approvals.approver = a
	e.approvals.mu.Unlock()
}

func (e *Engine) approver() Approver {
	e.approvals.mu.RLock()
	defer e.approvals.mu.RUnlock()
	return e.approvals.approver
}

// ErrNoApproval is DecideApproval's error for an id that waits for no
// decision: decided already, timed out, its call ended, or never asked.
var ErrNoApproval = errors.New("no approval of that id is waiting")

// DecideApproval decides the pending approval id, from any goroutine.
// Edited arguments are checked against the tool's schema first: when they
// do not match, the approval stays pending and the error (invalid_args)
// says why.
func (e *Engine) DecideApproval(id int64, d ApprovalDecision) error {
	e.approvals.pmu.Lock()
	p := e.approvals.pending[id]
	e.approvals.pmu.Unlock()
	if p == nil {
		if s := e.current.Load(); s.shared != nil && id < localApprovalBase {
			if d.By == "" {
				d.By = "approval_decide"
			}
			return e.decideElsewhere(s, id, d) // asked in another process, which checks edited arguments
		}
		return fmt.Errorf("%w (%d): decided already, timed out, or its call ended", ErrNoApproval, id)
	}
	if d.Approve && d.Arguments != nil {
		args, perr := editedArguments(p.tool, d.Arguments)
		if perr != nil {
			return perr
		}
		d.Arguments = args
	}
	if d.By == "" {
		d.By = "approval_decide"
	}
	ok, err := e.settle(p, d)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w (%d): decided already", ErrNoApproval, id)
	}
	return nil
}

// PendingApprovals lists the approvals waiting for a decision, oldest
// first, with how long each has waited.
func (e *Engine) PendingApprovals() []PendingApproval {
	out, err := e.pendingApprovals()
	if err != nil {
		e.log.Logf(logging.Warn, "approvals: %s", err.Error())
	}
	return out
}

// pendingApprovals lists the approvals waiting: every process's with the
// shared store.
func (e *Engine) pendingApprovals() ([]PendingApproval, error) {
	if s := e.current.Load(); s.shared != nil {
		return e.sharedPending(s)
	}
	e.approvals.pmu.Lock()
	out := make([]PendingApproval, 0, len(e.approvals.pending))
	for _, p := range e.approvals.pending {
		if !p.taken.Load() {
			out = append(out, PendingApproval{ApprovalRequest: p.req, WaitingMS: e.clock.since(p.since).Milliseconds()})
		}
	}
	e.approvals.pmu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// PendingApproval is an approval approvals_list shows.
type PendingApproval struct {
	ApprovalRequest
	WaitingMS int64 `json:"waiting_ms"`
}

// editedArguments checks arguments an approver gave: one compact JSON
// object that matches the tool's input_schema.
func editedArguments(t *toolbox.Tool, raw json.RawMessage) ([]byte, *protocol.Error) {
	args := protocol.AppendCompact(nil, bytes.TrimSpace(raw))
	if len(args) == 0 || args[0] != '{' || !json.Valid(args) {
		return nil, protocol.Errorf(protocol.InvalidArgs, "tool %q: the edited arguments must be a JSON object", t.Name)
	}
	if perr := t.Validate(args); perr != nil {
		perr.Message = "the edited arguments do not match: " + perr.Message
		return nil, perr
	}
	return args, nil
}

// askFor is why a call waits for approval.
type askFor struct {
	rule   string // "" for needs_approval: true
	reason string
}

// awaitApproval holds the call c for a person's decision. It returns nil
// when the call may run (c.args replaced by edited arguments), or the
// error the call fails with: denied when rejected (by a person, for want
// of an approver, a timeout), the context's error when the call was
// cancelled meanwhile. The audit and the trace learn how it was decided.
func (e *Engine) awaitApproval(ctx context.Context, s *snapshot, t *toolbox.Tool, c *toolCall, ask askFor) *protocol.Error {
	c.handOn()
	start := e.clock.now()
	rec := &toolbox.Approval{Rule: ask.rule}
	c.decided().Approval = rec
	finish := func(decision, by string) {
		rec.Decision, rec.By, rec.Waited = decision, by, e.clock.since(start)
		if c.rep.wantTrace {
			c.rep.extraTrace = append(c.rep.extraTrace, approvalTrace(t.Name, rec))
		}
	}
	reject := func(by, why string) *protocol.Error {
		finish("rejected", by)
		return protocol.Errorf(protocol.Denied, "tool %q was not run: %s, and %s", t.Name, asked(ask), why)
	}
	a := e.approver()
	if a == nil {
		return reject("no handler", "no approval handler is installed (clara_set_approval_handler in C, "+
			"clara.set_approval_handler in Python; clara-clips has one)")
	}
	if err := ctx.Err(); err != nil {
		finish("cancelled", "cancelled")
		return notRun(t.Name, err)
	}
	if max := int64(s.config.Limits.MaxOpenApprovals); e.approvals.open.Add(1) > max {
		e.approvals.open.Add(-1)
		return reject("limit", fmt.Sprintf("%d approvals are already open in the approval handler (limits.max_open_approvals)", max))
	}
	timeout := time.Duration(s.config.Policy.ApprovalTimeoutMS) * time.Millisecond
	p := &pendingApproval{since: start, tool: t, decided: make(chan ApprovalDecision, 1)}
	p.req = ApprovalRequest{Tool: t.Name, Session: c.session, Reason: e.out.secrets.String(ask.reason),
		Rule: ask.rule, Handle: AsyncHandle(ctx), TimeoutMS: timeout.Milliseconds()}
	// The values of the secrets the configuration names never reach the
	// approver (the engine's one redactor knows them all).
	p.req.Arguments = bytes.Clone(e.out.secrets.JSON(c.args))
	id, store, perr := e.approvalID(ctx, s, &p.req, timeout)
	if perr != nil {
		e.approvals.open.Add(-1)
		finish("rejected", "store")
		return perr
	}
	p.req.ID, p.store = id, store
	rec.ID = p.req.ID
	e.approvals.pmu.Lock()
	if e.approvals.pending == nil {
		e.approvals.pending = map[int64]*pendingApproval{}
	}
	e.approvals.pending[p.req.ID] = p
	e.approvals.pmu.Unlock()
	defer func() {
		e.approvals.pmu.Lock()
		delete(e.approvals.pending, p.req.ID)
		e.approvals.pmu.Unlock()
	}()
	reqJSON, _ := json.Marshal(&p.req)
	if sink := e.events.load(); sink != nil {
		sink(append([]byte(`{"event":"approval_required",`), reqJSON[1:]...))
	}
	// The approver's context ends when the approval no longer waits.
	actx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	e.Go("the approval handler", func() {
		defer e.approvals.open.Add(-1)
		req := p.req // its own copy: the approver may not keep it, nor change ours
		d, ok := a.Approve(actx, &req)
		if ok {
			if d.By == "" {
				d.By = "handler"
			}
			if !p.taken.Load() {
				p.answered.Store(true) // read only by who receives the decision, after it
			}
			if _, err := e.settle(p, d); err != nil {
				// the store could not keep it: the call is not approved by a decision nobody else can see
				p.decide(ApprovalDecision{Reason: err.Error(), By: "store"})
			}
		}
	})
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	// approval_cancelled tells a handler that still shows the approval,
	// or one that left it to approval_decide, that it no longer waits.
	cancelled := func(why string) {
		if sink := e.events.load(); sink != nil {
			ev := strconv.AppendInt([]byte(`{"event":"approval_cancelled","id":`), p.req.ID, 10)
			ev = append(ev, `,"reason":`...)
			ev = protocol.AppendString(ev, why)
			ev = append(ev, `,"session":`...)
			ev = protocol.AppendString(ev, c.session)
			sink(append(ev, '}'))
		}
	}
	select {
	case d := <-p.decided:
		return e.decided(t, c, p, d, stop, cancelled, finish, reject)
	case <-timer.C:
		if !p.taken.CompareAndSwap(false, true) {
			return e.decided(t, c, p, <-p.decided, stop, cancelled, finish, reject) // it came in time after all
		}
		if d, ok := e.endStoredApproval(p, "timed_out"); ok {
			return e.decided(t, c, p, d, stop, cancelled, finish, reject) // the store kept a decision first
		}
		stop()
		cancelled("timed out")
		finish("timed_out", "timeout")
		return protocol.Errorf(protocol.Denied, "tool %q was not run: %s, and none came within %s (policy.approval_timeout_ms)",
			t.Name, asked(ask), timeout)
	case <-ctx.Done():
		p.taken.Store(true)
		e.endStoredApproval(p, "cancelled")
		stop()
		cancelled("cancelled")
		finish("cancelled", "cancelled")
		return notRun(t.Name, ctx.Err())
	}
}

// decided applies the decision d on the approval p of call c.
func (e *Engine) decided(t *toolbox.Tool, c *toolCall, p *pendingApproval, d ApprovalDecision, stop func(),
	cancelled func(string), finish func(string, string), reject func(string, string) *protocol.Error) *protocol.Error {
	stop()
	if !p.answered.Load() {
		cancelled("decided") // the approver may still show it
	}
	if !d.Approve {
		why := d.Reason
		if why == "" {
			why = "no reason given"
		}
		finish("rejected", d.By)
		return protocol.Errorf(protocol.Denied, "tool %q was not run: the approval was rejected: %s", t.Name, why)
	}
	if d.Arguments != nil {
		args, perr := editedArguments(t, d.Arguments)
		if perr != nil {
			return reject(d.By, perr.Message)
		}
		rec := c.decided().Approval
		rec.Edited, rec.Before = true, sha256.Sum256(c.args)
		c.args, c.scanned = args, true // compacted, scanned and validated here
	}
	finish("approved", d.By)
	return nil
}

// asked names who asked for the approval, for messages.
func asked(ask askFor) string {
	if ask.rule == "" {
		return "its needs_approval asks for a person's approval"
	}
	return fmt.Sprintf("rule %q asks for a person's approval (%s)", ask.rule, ask.reason)
}

// approvalTrace is an approval's entry in the trace.
func approvalTrace(tool string, a *toolbox.Approval) []byte {
	b := strconv.AppendInt([]byte(`{"approval":`), a.ID, 10)
	b = append(b, `,"tool":`...)
	b = protocol.AppendString(b, tool)
	if a.Rule != "" {
		b = append(b, `,"rule":`...)
		b = protocol.AppendString(b, a.Rule)
	}
	b = append(b, `,"decision":`...)
	b = protocol.AppendString(b, a.Decision)
	b = append(b, `,"by":`...)
	b = protocol.AppendString(b, a.By)
	b = append(b, `,"waited_ms":`...)
	b = strconv.AppendFloat(b, float64(a.Waited.Microseconds())/1000, 'f', -1, 64)
	if a.Edited {
		b = append(b, `,"edited":true`...)
	}
	return append(b, '}')
}

// approvalTools is the engine as approvals_list and approval_decide reach
// it (tools.Approvals).
type approvalTools struct{ e *Engine }

func (a approvalTools) List() ([]byte, error) {
	list, err := a.e.pendingApprovals()
	if err != nil {
		return nil, err
	}
	return json.Marshal(list)
}

func (a approvalTools) Decide(id int64, approve bool, reason string, arguments json.RawMessage) error {
	err := a.e.DecideApproval(id, ApprovalDecision{Approve: approve, Reason: reason, Arguments: arguments})
	if err != nil && errors.Is(err, ErrNoApproval) {
		return protocol.Errorf(protocol.InvalidArgs, "approval_decide: %v", err)
	}
	return err
}
