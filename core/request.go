package core

import (
	"bytes"
	"context"
	"strconv"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
	"github.com/clara-lib/clara/core/toolbox"
)

// serveRequest answers one request (clara_evaluate): parse it, run its call
// through the pipeline, write the envelope into dst. A request with
// "async": true is submitted instead (asynccalls.go).
func (e *Engine) serveRequest(ctx context.Context, dst, req []byte) []byte {
	if req == nil {
		return protocol.AppendError(dst, nil, nullInput)
	}
	s := e.current.Load()
	r, _, perr := protocol.Parse(req, s.limits, nil)
	if perr != nil {
		return e.fail(dst, nil, "", perr)
	}
	if r.Async {
		return e.submitAnswer(dst, s, req, r.ID)
	}
	// One allocation for the request: its event tree's budget (as its
	// context) and the report the rules and callbacks fill.
	t, _ := e.tools.Lookup(toolName(s, &r)) // once: callTool uses it too
	st := newRequestState(ctx, s, mayReuseState(t, &r))
	c := toolCall{rep: &st.rep, state: st, tool: t}
	if perr := e.newToolCall(s, &r, &c); perr != nil {
		st.done()
		return e.fail(dst, r.ID, c.name, perr)
	}
	dst = e.answerCall(st, dst, s, &c)
	st.done()
	return dst
}

// mayReuseState: the request's state may come from the pool (see
// requestState), its tool being one that keeps nothing. Other requests
// allocate theirs: their state is handed on, so the pool would be empty
// for them and asking it would cost more than allocating.
func mayReuseState(t *toolbox.Tool, r *protocol.Request) bool {
	return t != nil && t.KeepsNothing && !r.Trace
}

// toolName is the tool a parsed request calls: the default evaluator for
// the simple form.
func toolName(s *snapshot, r *protocol.Request) string {
	if r.Simple {
		return s.config.DefaultEvaluator
	}
	return r.Tool
}

// newToolCall fills c (whose rep is set) with the call a parsed request
// asks for: the tool (the default evaluator for the simple form) and its
// policy layers. c.name is set even on failure, so that it can be named.
func (e *Engine) newToolCall(s *snapshot, r *protocol.Request, c *toolCall) *protocol.Error {
	name := toolName(s, r)
	c.name, c.session, c.args, c.id, c.meta = name, r.Session, r.Arguments, r.ID, r.Meta
	c.scanned = true // protocol.Parse refused duplicate keys in the arguments too
	c.scope = toolbox.Scope{Config: s.policy, Session: e.sessions.Policy(r.Session)}
	c.rep.wantTrace = r.Trace
	if r.Policy != nil {
		p, err := toolbox.ParsePolicy(r.Policy, "the request")
		if err != nil {
			return protocol.Errorf(protocol.InvalidRequest, "%v", err)
		}
		c.scope.Request = p
	}
	return nil
}

// answerCall runs c through the pipeline and appends its envelope to dst.
func (e *Engine) answerCall(ctx context.Context, dst []byte, s *snapshot, c *toolCall) []byte {
	result, truncated, perr := e.callTool(withEmissionBudget(ctx, s), s, c)
	extras := c.rep.extras()
	var idBuf [40]byte
	if e.showDecision(s, c) {
		extras.DecisionID = c.ticket.AppendText(idBuf[:0])
	}
	if perr != nil {
		e.logCallFailure(c, perr)
		return protocol.AppendErrorExtras(dst, c.id, perr, extras)
	}
	env := protocol.Success{ID: c.id, Tool: c.name, Result: result, Truncated: truncated, Extras: extras}
	return env.Append(dst)
}

// fail writes an error envelope and logs it.
func (e *Engine) fail(dst, id []byte, tool string, perr *protocol.Error) []byte {
	e.logFailure(tool, perr)
	return protocol.AppendError(dst, id, perr)
}

// extras renders a report's notices, callbacks and trace for the envelope.
func (rep *report) extras() protocol.Extras {
	var x protocol.Extras
	if len(rep.notices) > 0 {
		x.Notices = protocol.AppendNotices(nil, rep.notices)
	}
	if len(rep.callbacks) > 0 {
		x.Callbacks = append(append([]byte{'['}, bytes.Join(rep.callbacks, []byte{','})...), ']')
	}
	if rep.wantTrace {
		x.Trace = appendTrace(nil, rep.policy, rep.trace, rep.extraTrace)
	}
	return x
}

// appendTrace writes a call's trace: how each policy layer decided
// ({"policy", "allowed", "reason"}), then every rule evaluated around the
// call (SPEC §7.7), then extra: how an approval was decided, a budget
// spent (JSON objects).
func appendTrace(dst []byte, policy []toolbox.Verdict, entries []rules.TraceEntry, extra [][]byte) []byte {
	ruleTrace := rules.AppendTrace(nil, entries) // [...]
	dst = append(dst, '[')
	for i, v := range policy {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"policy":`...)
		dst = protocol.AppendString(dst, v.Layer)
		dst = append(dst, `,"allowed":`...)
		dst = strconv.AppendBool(dst, v.Allowed)
		if v.Reason != "" {
			dst = append(dst, `,"reason":`...)
			dst = protocol.AppendString(dst, v.Reason)
		}
		dst = append(dst, '}')
	}
	if len(entries) > 0 {
		if len(policy) > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, ruleTrace[1:len(ruleTrace)-1]...)
	}
	for _, x := range extra {
		if len(dst) > 0 && dst[len(dst)-1] != '[' {
			dst = append(dst, ',')
		}
		dst = append(dst, x...)
	}
	return append(dst, ']')
}
