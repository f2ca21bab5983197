package core

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/clara-lib/clara/core/llm"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/telemetry"
	"github.com/clara-lib/clara/core/toolbox"
)

// What an operator sees of a call (issue 29): its decision id and its
// parent's in the audit and the envelope, its span and metrics when
// telemetry is on. The call path pays for none of it while telemetry is
// off and the audit stays in the process: a ticket reserved in the audit
// (which the record took anyway) and, for a host's request, its id kept in
// the request's state.

// enterCall links c into the tree of calls (its parent, the request's id)
// and, with telemetry on, starts its span. It returns the context the call
// runs in. t is the tool being called.
func (e *Engine) enterCall(ctx context.Context, c *toolCall, t *toolbox.Tool) context.Context {
	if t.Name == chatTool {
		ctx = e.chatStats(ctx, c)
	}
	switch {
	case c.state != nil && !c.nested:
		c.state.enter(c)
	case c.nested:
		if cs, ok := ctx.Value(callScopeKey{}).(*callScope); ok && !cs.self.Valid() {
			c.parent = cs.parent
			if c.id == nil {
				c.id = cs.requestID
			}
			cs.self = c.ticket
			break
		}
		ctx = withCallIdentity(ctx, c)
	default:
		// A call of its own (MCP, async): off the hot path.
		ctx = withCallIdentity(ctx, c)
	}
	if !e.tel.On() {
		return ctx
	}
	if !c.nested && c.meta != nil {
		ctx = e.tel.Extract(ctx, c.meta) // the request's _meta.traceparent is the parent
	}
	ctx = telemetry.WithT(ctx, &e.tel)
	if !e.tel.Tracing() {
		c.obsCtx = ctx
		return ctx
	}
	name, op := "execute_tool "+t.Name, telemetry.OpExecuteTool
	if t.Name == chatTool {
		name, op = "invoke_agent "+telemetry.AgentName, telemetry.OpInvokeAgent
	}
	attrs := []attribute.KeyValue{
		attribute.String(telemetry.AttrOperationName, op),
		attribute.String(telemetry.AttrToolName, t.Name),
		attribute.String(telemetry.AttrToolType, toolType(t)),
		attribute.String(telemetry.AttrSession, c.session),
		attribute.String(telemetry.AttrDecisionID, c.ticket.String()),
	}
	if c.parent.Valid() {
		attrs = append(attrs, attribute.String(telemetry.AttrParentDecision, c.parent.String()))
	}
	if id := llm.ToolCallIDOf(ctx); id != "" && c.nested {
		attrs = append(attrs, attribute.String(telemetry.AttrToolCallID, id))
	}
	if t.Name == chatTool {
		attrs = append(attrs, attribute.String(telemetry.AttrAgentName, telemetry.AgentName),
			attribute.String(telemetry.AttrConversationID, c.session))
	}
	if e.tel.Content() {
		attrs = append(attrs, attribute.String(telemetry.AttrToolCallArguments, e.tel.RedactedContent(string(c.args))))
	}
	ctx, c.span = e.tel.Start(ctx, name, trace.SpanKindInternal, attrs...)
	c.obsCtx = ctx
	return ctx
}

// enter names c, a host's request's call, in the request's state, where
// the calls it makes find their parent and request id. The id is copied
// into memory the state keeps (a request's bytes are borrowed).
func (st *requestState) enter(c *toolCall) {
	st.ticket = c.ticket
	if c.id != nil {
		st.reqID = append(st.reqID[:0], c.id...)
	}
}

// withCallIdentity gives a call that has no scope of its own yet one that
// names it, for the calls it makes.
func withCallIdentity(ctx context.Context, c *toolCall) context.Context {
	cs := scopeOf(ctx)
	if cs.self.Valid() { // the scope of the call above: this call is its child
		c.parent = cs.self
		if c.id == nil {
			c.id = cs.requestID
		}
	}
	cs.self, cs.parent = c.ticket, c.parent
	cs.requestID = append([]byte(nil), c.id...)
	return context.WithValue(ctx, callScopeKey{}, &cs)
}

// callerOf is the call a nested call is made from, as its parent: the
// innermost call of ctx, and the id of the host's request it serves.
func callerOf(ctx context.Context) (toolbox.Ticket, []byte) {
	if cs, ok := ctx.Value(callScopeKey{}).(*callScope); ok && cs.self.Valid() {
		return cs.self, cs.requestID
	}
	if st, ok := ctx.Value(requestStateKey{}).(*requestState); ok {
		if len(st.reqID) == 0 {
			return st.ticket, nil // a request without an id (its state's buffer is kept, empty)
		}
		return st.ticket, st.reqID
	}
	return toolbox.Ticket{}, nil
}

// nestUnder makes cs, a copy of the scope of the call that makes a nested
// call, the scope of that nested call: its parent is the caller.
func (cs *callScope) nestUnder(ctx context.Context) {
	cs.parent, cs.requestID = callerOf(ctx)
	cs.self = toolbox.Ticket{}
}

func toolType(t *toolbox.Tool) string {
	if t.SelfTimed && !t.Builtin && !t.Host && strings.Contains(t.Name, "__") {
		return telemetry.ToolTypeExtension // a remote MCP server's tool (NAME__TOOL)
	}
	return telemetry.ToolTypeFunction
}

// leaveCall ends what enterCall started with telemetry on (c.obsCtx):
// the decisions, the span, the metrics. Called once the call is recorded.
func (e *Engine) leaveCall(c *toolCall, t *toolbox.Tool, took time.Duration, result []byte, perr *protocol.Error) {
	ctx := c.obsCtx
	if !e.tel.On() {
		if c.span != nil {
			c.span.End()
		}
		return
	}
	status := "success"
	if perr != nil {
		status = string(perr.Code)
	}
	if t != nil {
		e.recordDecisions(ctx, c, t, perr)
		e.tel.ToolCall(ctx, t.Name, status, took)
	}
	span := c.span
	if span == nil {
		return
	}
	if perr != nil {
		telemetry.Fail(span, string(perr.Code), perr.Message)
	} else if e.tel.Content() {
		span.SetAttributes(attribute.String(telemetry.AttrToolCallResult, e.tel.RedactedContent(string(result))))
	}
	span.SetAttributes(attribute.String(telemetry.AttrStatus, status))
	if ch := c.chatRec; ch != nil {
		span.SetAttributes(attribute.String(telemetry.AttrProviderName, ch.Provider), attribute.String(telemetry.AttrRequestModel, ch.Model),
			attribute.Int64(telemetry.AttrInputTokens, ch.InputTokens), attribute.Int64(telemetry.AttrOutputTokens, ch.OutputTokens))
	}
	span.End()
}

// recordDecisions records how the call was admitted: with tracing, every
// policy layer's verdict as an event; the denial, whoever made it, as an
// event and in clara.decisions.
func (e *Engine) recordDecisions(ctx context.Context, c *toolCall, t *toolbox.Tool, perr *protocol.Error) {
	denied := perr != nil && perr.Code == protocol.Denied
	if c.dec != nil {
		recordDecided(ctx, t.Name, c.dec)
		if c.dec.Budget != "" && c.denial.layer == "" {
			c.denial.layer = "budget: " + c.dec.Budget
		}
	}
	if !denied && c.span == nil {
		return
	}
	var verdicts []toolbox.Verdict
	if c.span != nil || (denied && c.denial.layer == "") {
		verdicts = c.scope.Explain(t.Name)
	}
	policyDenied := false
	for _, v := range verdicts {
		outcome := telemetry.OutcomeAllow
		if !v.Allowed {
			outcome, policyDenied = telemetry.OutcomeDeny, true
		}
		if outcome == telemetry.OutcomeAllow && c.span == nil {
			continue
		}
		telemetry.RecordDecision(ctx, telemetry.Decision{Tool: t.Name, Layer: v.Layer, Outcome: outcome, Reason: v.Reason})
	}
	if denied && !policyDenied {
		d := telemetry.Decision{Tool: t.Name, Layer: c.denial.layer, Rule: c.denial.rule, Outcome: telemetry.OutcomeDeny, Reason: perr.Message}
		if d.Layer == "" {
			d.Layer = "pipeline"
		}
		telemetry.RecordDecision(ctx, d)
	}
}

// recordDecided records what the decisions beyond allow and deny did to
// a call (issue 28: decisions.go), as the audit keeps them: a rewrite, a
// person's approval, a result blocked or redacted, what rules in shadow
// mode would have decided.
func recordDecided(ctx context.Context, tool string, d *toolbox.Decided) {
	if rw := d.Rewrite; rw != nil {
		telemetry.RecordDecision(ctx, telemetry.Decision{Tool: tool, Layer: "rule", Rule: rw.Rule, Outcome: "rewrite"})
	}
	if a := d.Approval; a != nil {
		telemetry.RecordDecision(ctx, telemetry.Decision{Tool: tool, Layer: "approval", Rule: a.Rule, Outcome: a.Decision, Reason: "by " + a.By})
	}
	if d.BlockedBy != "" {
		telemetry.RecordDecision(ctx, telemetry.Decision{Tool: tool, Layer: "rule", Rule: d.BlockedBy, Outcome: "block_result"})
	}
	for _, r := range d.Redacted {
		telemetry.RecordDecision(ctx, telemetry.Decision{Tool: tool, Layer: "rule", Rule: r, Outcome: "redact_result"})
	}
	for _, sh := range d.Shadow {
		telemetry.RecordDecision(ctx, telemetry.Decision{Tool: tool, Layer: "rule (shadow)", Rule: sh.Rule, Outcome: "shadow_" + sh.Decision, Reason: sh.Reason})
	}
}

// denial says who denied a call, where the pipeline knows it: the layer
// ("rule", "the call stack", "nested calls") and the rule's name.
type denial struct{ layer, rule string }

// recordIDs adds the call's ids, trace and chat figures to its audit
// record (inlined: the plain call has only its ids).
func (c *toolCall) recordIDs(r *toolbox.Record) {
	r.Decision, r.Parent = c.ticket, c.parent
	if c.span != nil || c.chatRec != nil {
		c.recordObserved(r)
	}
}

func (c *toolCall) recordObserved(r *toolbox.Record) {
	if c.span != nil {
		if sc := c.span.SpanContext(); sc.IsValid() {
			r.TraceID, r.SpanID = sc.TraceID(), sc.SpanID()
		}
	}
	r.Chat = c.chatRec
}

// showDecision says whether the envelope of c carries its decision id:
// when the audit leaves the process (audit.path, OTLP logs), when
// telemetry is on, and when asked (audit.decision_ids). Not otherwise:
// the id differs from run to run, and an envelope that nobody can quote
// against a shipped record stays the same bytes for the same call.
func (e *Engine) showDecision(s *snapshot, c *toolCall) bool {
	return c.ticket.Valid() && (s.config.Audit.DecisionIDs || e.audit.Shipped() || e.tel.On())
}

// logCallFailure is logFailure for a call the pipeline ran, with its
// session and decision id as attributes (call of "t" failed: code
// session=s decision_id=...; or one JSON object with log.format = json).
func (e *Engine) logCallFailure(c *toolCall, perr *protocol.Error) {
	if perr.Code == protocol.Internal || !e.log.Enabled(logging.Debug) {
		e.logFailure(c.name, perr)
		return
	}
	e.log.LogAttrs(logging.Debug, fmt.Sprintf("call of %q failed: %s", c.name, perr.Code),
		slog.String("tool", c.name), slog.String("session", c.session), slog.String("decision_id", c.ticket.String()))
}

// chatStats hands a chat call's figures holder to the chat loop.
func (e *Engine) chatStats(ctx context.Context, c *toolCall) context.Context {
	st := &llm.RunStats{}
	c.chatStats = st
	return llm.WithRunStats(ctx, st)
}

// chatRecord turns what the chat loop reported into the audit's figures.
func (c *toolCall) chatRecord() {
	if c.chatStats == nil {
		return
	}
	st := c.chatStats.Snapshot()
	if st.ModelCalls == 0 {
		return
	}
	c.chatRec = &toolbox.ChatRecord{Provider: st.Provider, Model: st.Model, InputTokens: st.InputTokens, OutputTokens: st.OutputTokens,
		Turns: st.Turns, ModelCalls: st.ModelCalls, ModelMS: durationMS(st.ModelTime)}
}
