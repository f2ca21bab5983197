package core

import (
	"context"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// Requests a running tool makes itself (clara_call_evaluate, the Python
// module's call.evaluate): they run inside the calling tool's scope, not as
// the host's. A host tool that called clara_evaluate would escape the
// policy of the request that called it; one that calls through its Caller
// cannot.

// Caller is the scope of one running tool's call, as the requests it makes
// inherit it: its context (deadline, depth, call stack, the event tree's
// budget), session, policy layers and name. Build it with CallerOf inside
// the tool's function; it is only meaningful while that call runs.
type Caller struct {
	ctx     context.Context
	session string
	scope   toolbox.Scope
	tool    string
}

// CallerOf captures the scope of the call a toolbox.Func was given.
func CallerOf(ctx context.Context, call toolbox.Call) *Caller {
	c := &Caller{ctx: ctx, session: call.Session, scope: call.Scope}
	if call.Tool != nil {
		c.tool = call.Tool.Name
	}
	return c
}

// AppendEvaluateWithin serves req, a request made by caller's tool while it
// runs, and appends the envelope to dst. The request runs in the caller's
// session (naming another is invalid_request), under the caller's policy
// layers narrowed by its own "policy" (never widened), one level deeper,
// as a nested call (the administrative tools are out of reach unless the
// configuration says otherwise), and with the caller on the call stack:
// it can never reach the calling tool, nor a tool that called it. It
// cannot be asynchronous. req is borrowed; a nil req stands for NULL.
func (e *Engine) AppendEvaluateWithin(caller *Caller, dst, req []byte) (out []byte) {
	mark := len(dst)
	defer e.guard("evaluating a request made inside a tool", func() { out = protocol.AppendError(dst[:mark], nil, protocol.InternalError(nil)) })
	if caller == nil {
		return protocol.AppendError(dst, nil, protocol.Errorf(protocol.InvalidRequest, "no running call: a nested request is made from inside a tool, while it runs"))
	}
	if req == nil {
		return protocol.AppendError(dst, nil, nullInput)
	}
	// What the request runs may keep the calling tool's context (rules,
	// callbacks): its request's state is not to be reused.
	HandOnContext(caller.ctx)
	s := e.current.Load()
	r, _, perr := protocol.Parse(req, s.limits, nil)
	if perr != nil {
		return e.fail(dst, nil, "", perr)
	}
	if r.Async {
		return e.fail(dst, r.ID, r.Tool, protocol.Errorf(protocol.InvalidRequest,
			"a request made inside a tool cannot be asynchronous: it would outlive the call that made it"))
	}
	if r.Session != protocol.DefaultSession && r.Session != caller.session {
		return e.fail(dst, r.ID, r.Tool, protocol.Errorf(protocol.InvalidRequest,
			"a request made inside a tool runs in the tool's session %q; it may not name another (%q)", caller.session, r.Session))
	}
	rep := &report{}
	c := toolCall{rep: rep}
	if perr := e.newToolCall(s, &r, &c); perr != nil {
		return e.fail(dst, r.ID, c.name, perr)
	}
	// The caller's layers, the request's own policy narrowing them.
	c.session, c.nested, c.host = caller.session, true, false
	own := c.scope.Request
	c.scope = caller.scope
	if own != nil {
		c.scope.Request = caller.scope.Request.Narrow(own, "the request")
		// The named tool: the caller's layer and the request's deny list.
		c.named, c.hasNamed = caller.scope.Request.Narrow(own.DenyOnly(), "the request"), true
	}
	ctx, err := enterNested(caller.ctx, caller.tool)
	if err != nil {
		return e.fail(dst, r.ID, c.name, protocol.Errorf(protocol.Denied, "tool %q denied: %v", c.name, err))
	}
	if err := spend(ctx, "the request for "+c.name); err != nil {
		return e.fail(dst, r.ID, c.name, protocol.Errorf(protocol.Denied, "%v", err))
	}
	return e.answerCall(ctx, dst, s, &c)
}
