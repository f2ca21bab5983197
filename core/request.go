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
// through the pipeline, write the envelope into dst.
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
		return e.fail(dst, r.ID, "", protocol.Errorf(protocol.InvalidRequest, "\"async\" is not supported by this version of Clara (%s)", Version))
	}
	name := r.Tool
	if r.Simple {
		name = s.config.DefaultEvaluator
	}
	c := &toolCall{name: name, session: r.Session, args: r.Arguments, id: r.ID, meta: r.Meta,
		scope: toolbox.Scope{Config: s.policy, Session: e.sessions.Policy(r.Session)},
		rep:   &report{wantTrace: r.Trace}}
	if r.Policy != nil {
		p, err := toolbox.ParsePolicy(r.Policy, "the request")
		if err != nil {
			return e.fail(dst, r.ID, name, protocol.Errorf(protocol.InvalidRequest, "%v", err))
		}
		c.scope.Request = p
	}
	result, truncated, perr := e.callTool(withEmissionBudget(ctx, s), s, c)
	extras := c.rep.extras()
	if perr != nil {
		e.logFailure(name, perr)
		return protocol.AppendErrorExtras(dst, r.ID, perr, extras)
	}
	env := protocol.Success{ID: r.ID, Tool: name, Result: result, Truncated: truncated, Extras: extras}
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
		x.Trace = appendTrace(nil, rep.policy, rep.trace)
	}
	return x
}

// appendTrace writes a call's trace: how each policy layer decided
// ({"policy", "allowed", "reason"}), then every rule evaluated around the
// call (SPEC §7.7).
func appendTrace(dst []byte, policy []toolbox.Verdict, entries []rules.TraceEntry) []byte {
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
	return append(dst, ']')
}
