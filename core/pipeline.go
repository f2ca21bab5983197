package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/clara-lib/clara/core/llm"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
	"github.com/clara-lib/clara/core/telemetry"
	"github.com/clara-lib/clara/core/toolbox"
)

// One tool call, SPEC §6.3: resolve the tool → policy → on_tool_call rules
// → validate → rate limit → run under its timeout and concurrency cap →
// clamp the output → audit → on_tool_complete / on_tool_failure rules →
// callbacks for the files it changed. Every call comes through here: the
// host's requests, and the nested ones that rules, scripts and models make.

// toolCall is one call on its way through the pipeline.
type toolCall struct {
	name    string        // as the caller wrote it; borrowed
	session string        // Clara's own (protocol.SessionName)
	args    []byte        // a compact JSON object; borrowed for the call
	scope   toolbox.Scope // the policy layers it runs under
	id      []byte        // the request's id, for the audit; borrowed
	meta    []byte        // the request's _meta object, for the audit and the rules; borrowed
	nested  bool          // made by a rule, a script or a tool, not by the host
	scanned bool          // args come from a request protocol.Parse scanned strictly
	tool    *toolbox.Tool // looked up already (a host's request), or nil
	rep     *report       // what the rules and callbacks say, for the envelope
	state   *requestState // the host's request this call answers; nil for nested calls

	// What an operator sees of it (observe.go).
	ticket, parent toolbox.Ticket  // its decision id, reserved as it starts; its caller's
	denial         denial          // who denied it, where the pipeline knows
	span           trace.Span      // nil unless tracing
	obsCtx         context.Context // the call's context when telemetry was on as it started: leaveCall's
	chatStats      *llm.RunStats   // a chat's figures, filled by its loop
	chatRec        *toolbox.ChatRecord
	// The decisions beyond allow and deny (issue 28; decisions.go).
	chat      *chatBudgets     // the chat whose model made the call (max_calls_per_chat); nil otherwise
	ask       *askFor          // the call waits for a person's approval before it runs
	rewritten string           // the rule that rewrote the arguments
	dec       *toolbox.Decided // what the audit keeps of them; nil when none
}

// decided is what the audit keeps of the call's decisions, made on first
// need.
func (c *toolCall) decided() *toolbox.Decided {
	if c.dec == nil {
		c.dec = &toolbox.Decided{}
	}
	return c.dec
}

// handOn notes that the call's context or report goes where it may outlive
// the request, so that the request's state is not reused (requestState).
func (c *toolCall) handOn() {
	if c.state != nil {
		c.state.handedOn.Store(true)
	}
}

// report collects what rules and callbacks said around one request, for its
// envelope.
type report struct {
	wantTrace bool
	notices   []protocol.Notice
	policy    []toolbox.Verdict // how the policy layers decided (trace)
	trace     []rules.TraceEntry
	callbacks [][]byte // results of blocking callbacks (JSON objects)
	// extraTrace are the trace's entries of approvals and spent budgets
	// (JSON objects), after the rules'.
	extraTrace [][]byte

	// outcomeOnly: the answer is the emission's outcome, which lists its
	// notices itself (clara_emit), so fire need not gather them here.
	outcomeOnly bool
}

// callTool runs one call through the pipeline.
func (e *Engine) callTool(ctx context.Context, s *snapshot, c *toolCall) (result []byte, truncated bool, perr *protocol.Error) {
	start := e.clock.now()
	c.ticket = e.audit.Reserve()
	t, ok := c.tool, c.tool != nil
	if !ok {
		t, ok = e.tools.Lookup(c.name)
	}
	if !ok {
		perr = &protocol.Error{Code: protocol.UnknownTool, Message: "Tool not found: " + c.name}
		e.record(start, e.clock.since(start), c, strings.Clone(c.name), perr)
		if e.tel.On() {
			c.obsCtx = ctx
			e.leaveCall(c, nil, 0, nil, perr)
		}
		return nil, false, perr
	}
	var took time.Duration // measured once, for the rules and the audit
	defer func() {
		if took == 0 {
			took = e.clock.since(start)
		}
		if c.chatStats != nil {
			c.chatRecord()
		}
		e.record(start, took, c, t.Name, perr)
		if c.obsCtx != nil {
			e.leaveCall(c, t, took, result, perr)
		}
	}()
	// The request's policy also narrows what the rules this call fires may
	// call (call_tool), directly or through the tools they call.
	ctx = withCallScope(ctx, c)
	if c.state != nil && !c.nested && t.Name != chatTool && !e.tel.On() {
		c.state.enter(c) // the plain call: its request's state names it (observe.go)
	} else {
		ctx = e.enterCall(ctx, c, t)
	}
	if perr = e.admit(ctx, s, t, c); perr != nil {
		return nil, false, perr
	}
	result, truncated, perr = e.execute(ctx, s, t, c, start)
	result, perr, took = e.afterCall(ctx, s, t, c, result, perr, start)
	return result, truncated, perr
}

// admit decides whether the call may run: the policy layers, the
// administrative tools' reach, then the on_tool_call rules.
func (e *Engine) admit(ctx context.Context, s *snapshot, t *toolbox.Tool, c *toolCall) *protocol.Error {
	if c.rep.wantTrace {
		c.handOn()
		c.rep.policy = append(c.rep.policy, c.scope.Explain(t.Name)...)
	}
	if perr := c.scope.Check(t.Name); perr != nil {
		return perr
	}
	if c.nested {
		if perr := onCallStack(ctx, t.Name); perr != nil {
			c.denial.layer = callStackLayer
			if c.rep.wantTrace {
				c.rep.policy = append(c.rep.policy, toolbox.Verdict{Layer: callStackLayer, Reason: "it is already running above this call"})
			}
			return perr
		}
	}
	if s.admin(t) && c.nested && !s.config.Policy.AdminInNestedCalls {
		c.denial.layer = "nested calls"
		if c.rep.wantTrace {
			c.rep.policy = append(c.rep.policy, toolbox.Verdict{Layer: "nested calls", Reason: adminOutOfReach})
		}
		return protocol.Errorf(protocol.Denied, "tool %q denied: %s", t.Name, adminOutOfReach)
	}
	if s.onToolCall == nil || (s.admin(t) && !s.config.Rules.WatchAdminTools) {
		if t.NeedsApproval != nil {
			return e.needsApproval(ctx, s, t, c)
		}
		return nil // no rule watches calls, or none may deny this one
	}
	c.handOn()
	src := e.newToolEventSource(s, s.onToolCall, "on_tool_call", c, &rules.ToolFacts{Name: t.Name})
	out := e.fire(ctx, s, c.rep, src)
	src.release()
	if out.Decided() {
		// deny > ask > rewrite > allow: a denial wins; an ask holds the
		// call with the rewrite applied, so that the person approves what
		// will run.
		e.noteShadow(c, out.Shadow)
		if out.Denied != nil {
			c.denial = denial{layer: "rule", rule: out.Denied.Rule}
			return protocol.Errorf(protocol.Denied, "tool %q denied by rule %q: %s", t.Name, out.Denied.Rule, out.Denied.Reason)
		}
		if out.Rewrite != nil {
			if perr := e.applyRewrite(t, c, out.Rewrite); perr != nil {
				return perr
			}
		}
		if out.Asked != nil {
			c.ask = &askFor{rule: out.Asked.Rule, reason: out.Asked.Reason}
			telemetry.RecordDecision(ctx, telemetry.Decision{Tool: t.Name, Layer: "rule", Rule: out.Asked.Rule, Outcome: telemetry.OutcomeAsk, Reason: out.Asked.Reason})
		}
	}
	if t.NeedsApproval != nil && c.ask == nil {
		return e.needsApproval(ctx, s, t, c)
	}
	return nil
}

const adminOutOfReach = "it is an administrative tool, which calls made by rules, scripts and tools may not use (policy.admin_in_nested_calls)"

// execute validates, rate-limits and runs the call (or answers for it in
// test mode).
func (e *Engine) execute(ctx context.Context, s *snapshot, t *toolbox.Tool, c *toolCall, start time.Time) ([]byte, bool, *protocol.Error) {
	var perr *protocol.Error
	if c.scanned {
		perr = t.ValidateScanned(c.args)
	} else {
		perr = t.Validate(c.args)
	}
	if perr != nil {
		if c.rewritten != "" {
			return nil, false, protocol.Errorf(protocol.Denied, "tool %q denied: the arguments rule %q rewrote do not match its input_schema: %s",
				t.Name, c.rewritten, perr.Message)
		}
		return nil, false, perr
	}
	if perr := e.takeBudgets(ctx, s, t, c); perr != nil {
		return nil, false, perr
	}
	if c.ask != nil {
		if perr := e.awaitApproval(ctx, s, t, c, *c.ask); perr != nil {
			e.giveBackBudgets(s, t, c)
			return nil, false, perr
		}
	}
	if s.shared != nil && t.Limits.RatePerMin > 0 {
		if perr := e.sharedAdmit(ctx, s, t, c, start); perr != nil { // every process's calls in one window
			return nil, false, perr
		}
	} else if perr := t.Admit(c.session, start); perr != nil {
		return nil, false, perr
	}
	// The call may have been cancelled (clara_cancel, MCP's
	// notifications/cancelled) or run out of time while the rules decided:
	// a call cancelled before its tool runs does not run.
	if err := ctx.Err(); err != nil {
		return nil, false, notRun(t.Name, err)
	}
	if e.skippedByTestMode(s, t) {
		return testModeResult(t.Name), false, nil
	}
	if !t.KeepsNothing {
		c.handOn()
	}
	call := toolbox.Call{Session: c.session, Arguments: c.args, Scope: c.scope}
	if c.state != nil {
		call.Room = &c.state.room // reused with the state: never while handed on
	}
	return t.Execute(ctx, call, s.defaults)
}

// notRun is the error of a call whose context ended before its tool ran.
func notRun(tool string, err error) *protocol.Error {
	if errors.Is(err, context.DeadlineExceeded) {
		return protocol.Errorf(protocol.Timeout, "tool %q did not run: the call's deadline passed before it started", tool)
	}
	return protocol.Errorf(protocol.ToolFailed, "tool %q did not run: the call was cancelled before it started", tool)
}

// afterCall keeps the session's history, fires on_tool_complete or
// on_tool_failure, then the callbacks for the files the tool says it
// changed (reports_changed_files, changes_files). It returns the result
// as the rules left it (blocked: an error instead; redacted), and how long
// the call took, measured once.
func (e *Engine) afterCall(ctx context.Context, s *snapshot, t *toolbox.Tool, c *toolCall, result []byte, perr *protocol.Error, start time.Time) ([]byte, *protocol.Error, time.Duration) {
	// Measured here, once: the history, the rules and the audit see the
	// same end of the call, and the clock is read once for all three.
	took := e.clock.since(start)
	var end time.Time // zero: the history reads the clock (a test's clock may stand still)
	if e.clock.real {
		end = start.Add(took)
	}
	e.sessions.Get(c.session).RecordCall(t.Name, perr != nil, end)
	ran, ranResult := perr == nil, result // what the tool did, whatever the guards show of it
	event, trigger := "on_tool_complete", s.onToolComplete
	if perr != nil {
		event, trigger = "on_tool_failure", s.onToolFailure
	}
	if trigger != nil {
		// Most calls match no rule, and the rules watching every call
		// usually say so from the call's own figures: test that first,
		// without building an event.
		facts := rules.ToolFacts{Name: t.Name, Done: true, ResultBytes: float64(len(result)), DurationMS: durationMS(took)}
		if perr != nil {
			facts.Error = toolError(perr)
		}
		if c.rep.wantTrace || !trigger.RuledOut(&facts) {
			c.handOn()
			src := e.newToolEventSource(s, trigger, event, c, &facts)
			src.result = result
			out := e.fire(ctx, s, c.rep, src)
			src.release()
			if out.Decided() {
				result, perr = e.guardResult(t, c, out, result, perr)
			}
		}
	}
	if ran { // a result blocked or redacted still changed what it changed
		var files []string
		if t.ReportsChangedFiles { // only a tool that says so: echo would hand back what the caller wrote
			files = e.changedFiles(t.Name, ranResult)
		}
		if t.ChangesFiles() {
			files = append(files, t.ChangedPaths(c.args)...)
		}
		if len(files) > 0 {
			c.handOn()
			if b := callbackBatchOf(ctx); b != nil {
				b.add(c.session, files) // fired once for the whole batch (a chat's turn)
			} else {
				e.cb.fire(ctx, t.Name, c.session, files, c.rep)
			}
		}
	}
	return result, perr, took
}

// skippedByTestMode: in test mode, tools that reach outside the process
// (network, fs_write, exec) answer without running, unless allowed.
func (e *Engine) skippedByTestMode(s *snapshot, t *toolbox.Tool) bool {
	if !e.testMode(s) {
		return false
	}
	if t.Builtin && t.Name == "callback_trigger" {
		return false // applies test mode to each run itself, so dry runs still answer
	}
	return t.HasCapability(toolbox.CapNetwork) || t.HasCapability(toolbox.CapFSWrite) || t.HasCapability(toolbox.CapExec)
}

// testMode: tools and callbacks that reach outside the process do not run.
func (e *Engine) testMode(s *snapshot) bool {
	return (s.config.TestMode || e.env.TestMode) && !e.env.TestAllow
}

// testModeResult is what a tool skipped by test mode answers.
func testModeResult(name string) []byte {
	return append(protocol.AppendString([]byte(`{"test_mode":true,"skipped":`), name), '}')
}

// record adds the call to the audit. tool must be a string Clara owns (the
// registered name, or a clone); the audit copies what else it keeps.
func (e *Engine) record(start time.Time, took time.Duration, c *toolCall, tool string, perr *protocol.Error) {
	r := toolbox.Record{Time: start, Session: c.session, Tool: tool, Duration: took, ID: c.id, Meta: c.meta, Decided: c.dec}
	c.recordIDs(&r)
	if perr != nil {
		r.Code = perr.Code
		if perr.Code == protocol.Denied {
			r.Reason = perr.Message // policy and rules wrote it, not the caller
		}
	}
	e.audit.AddRecord(&r, c.args)
}

// logFailure logs a failed call: internal errors at error level with their
// cause, the others at debug level with their code only (a message may
// quote the caller's arguments, which never reach the log).
func (e *Engine) logFailure(tool string, perr *protocol.Error) {
	if perr.Code == protocol.Internal {
		e.log.Logf(logging.Error, "internal error in tool %q: %v", tool, perr.Cause)
	} else if e.log.Enabled(logging.Debug) {
		e.log.Logf(logging.Debug, "call of %q failed: %s", tool, perr.Code)
	}
}

func durationMS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func toolError(perr *protocol.Error) string { return string(perr.Code) + ": " + perr.Message }

// callScope is what a call passes down to the calls made inside it (a
// rule's call_tool, a script's, a chat's, a C tool's clara_call_evaluate):
// the request's policy layer, which narrows "this call and everything it
// calls" (SPEC §2), the depth of nesting, and the tools running above.
type callScope struct {
	request *toolbox.Policy
	depth   int
	stack   *callFrame // the innermost running tool that made a nested call; nil at the top

	// The calls' tree, for the audit (observe.go): the call this scope is
	// of, the call that made it, the host's request's id (a copy).
	self, parent toolbox.Ticket
	requestID    []byte
}

// callFrame is one tool on the call stack: a tool that is running and made
// a nested call. The chat tool is never on it: it is the loop that offers
// tools, not a tool a model could recurse into by itself (the depth bounds
// chats inside chats).
type callFrame struct {
	tool string
	up   *callFrame
}

// has reports whether tool is on the stack from f up.
func (f *callFrame) has(tool string) bool {
	for ; f != nil; f = f.up {
		if f.tool == tool {
			return true
		}
	}
	return false
}

// path writes the stack outermost first, then tool: "a → b → a".
func (f *callFrame) path(tool string) string {
	var names []string
	for ; f != nil; f = f.up {
		names = append(names, f.tool)
	}
	var b strings.Builder
	for i := len(names) - 1; i >= 0; i-- {
		b.WriteString(names[i])
		b.WriteString(" → ")
	}
	b.WriteString(tool)
	return b.String()
}

type callScopeKey struct{}

// withCallScope passes the call's request policy to what it calls.
func withCallScope(ctx context.Context, c *toolCall) context.Context {
	cur, _ := ctx.Value(callScopeKey{}).(*callScope)
	if c.scope.Request == nil || (cur != nil && cur.request == c.scope.Request) {
		return ctx
	}
	next := &callScope{request: c.scope.Request}
	if cur != nil {
		*next = *cur
		next.request = c.scope.Request
	}
	return context.WithValue(ctx, callScopeKey{}, next)
}

// scopeOf reads the call scope of ctx (zero outside any call).
func scopeOf(ctx context.Context) callScope {
	if cs, ok := ctx.Value(callScopeKey{}).(*callScope); ok {
		return *cs
	}
	return callScope{}
}

// enterNested is the way into every call made from inside another (a
// rule's or a script's call_tool, clara_call_evaluate): one level deeper,
// at most rules.MaxChainDepth, with caller, the running tool that makes
// the call ("" for a rule), pushed on the call stack.
func enterNested(ctx context.Context, caller string) (context.Context, error) {
	cs := scopeOf(ctx)
	if cs.depth+1 >= rules.MaxChainDepth {
		return nil, fmt.Errorf("calls nested deeper than %d", rules.MaxChainDepth)
	}
	cs.depth++
	cs.nestUnder(ctx)
	if caller != "" && caller != chatTool {
		cs.stack = &callFrame{tool: caller, up: cs.stack}
	}
	return context.WithValue(ctx, callScopeKey{}, &cs), nil
}

// chatTool is the built-in chat tool's name.
const chatTool = "chat"

// onCallStack refuses a nested call of a tool that is running above it
// (seed 003: a nested loop reaches every tool "except the calling tool"):
// a tool that calls itself, directly or through others, stops at once.
func onCallStack(ctx context.Context, tool string) *protocol.Error {
	stack := scopeOf(ctx).stack
	if !stack.has(tool) {
		return nil
	}
	return protocol.Errorf(protocol.Denied, "tool %q denied: it is already running on this call stack (%s); a tool never calls itself, directly or through other tools",
		tool, stack.path(tool))
}

const callStackLayer = "the call stack"
