package core

import (
	"context"
	"strings"
	"time"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
	"github.com/clara-lib/clara/core/toolbox"
)

// testModeResult is what a tool skipped by test mode answers.
func testModeResult(name string) []byte {
	return append(protocol.AppendString([]byte(`{"test_mode":true,"skipped":`), name), '}')
}

// call runs one tool call through the pipeline of SPEC §6.3: resolve,
// policy, (on_tool_call rules), validation, rate limit, run with timeout
// and concurrency cap, output clamp, audit, (on_tool_complete/failure
// rules, callbacks). Nested calls (a chat loop, a Lua call_tool) come
// through here too, with their caller's scope.
func (e *Engine) call(ctx context.Context, s *settings, name, session string, args []byte, scope toolbox.Scope, thread uint32, rep *report) (result []byte, truncated bool, perr *protocol.Error) {
	start := e.now()
	t, ok := e.tools.Lookup(name)
	if !ok {
		perr = &protocol.Error{Code: protocol.UnknownTool, Message: "Tool not found: " + name}
		e.record(start, e.since(start), session, strings.Clone(name), args, perr, thread)
		return nil, false, perr
	}
	var took time.Duration // measured once, for the rules and the audit
	defer func() {
		if took == 0 && !e.auditOff {
			took = e.since(start)
		}
		e.record(start, took, session, t.Name, args, perr, thread)
	}()
	if perr = scope.Check(t.Name); perr != nil {
		return nil, false, perr
	}
	if scope.Request != nil && ctx.Value(requestPolicyKey{}) != any(scope.Request) {
		// The request's policy also narrows what the rules this call fires
		// may call (call_tool), directly or through the tools they call.
		ctx = context.WithValue(ctx, requestPolicyKey{}, scope.Request)
	}
	if s.onToolCall != nil {
		src := e.newToolEventSource(s, s.onToolCall, "on_tool_call", session, &rules.ToolFacts{Name: t.Name}, args)
		out := e.fire(ctx, s, rep, src)
		src.release()
		if out.Denied != nil {
			perr = protocol.Errorf(protocol.Denied, "tool %q denied by rule %q: %s", t.Name, out.Denied.Rule, out.Denied.Reason)
			return nil, false, perr
		}
	}
	result, truncated, perr = e.run(ctx, s, t, session, args, scope, start)
	// History, then the on_tool_complete / on_tool_failure rules, then
	// callbacks for the files the tool says it changed.
	e.sessionFor(session).recordCall(t.Name, perr != nil)
	event, trigger := "on_tool_complete", s.onToolComplete
	if perr != nil {
		event, trigger = "on_tool_failure", s.onToolFailure
	}
	if trigger != nil {
		took = e.since(start)
		// Most calls match no rule, and the rules watching every call
		// usually say so from the call's own figures: test that first,
		// without building an event.
		facts := rules.ToolFacts{Name: t.Name, Done: true, ResultBytes: float64(len(result)), DurationMS: durationMS(took)}
		if perr != nil {
			facts.Error = toolError(perr)
		}
		if rep.wantTrace || !trigger.RuledOut(&facts, s.thresholds) {
			src := e.newToolEventSource(s, trigger, event, session, &facts, args)
			e.fire(ctx, s, rep, src)
			src.release()
		}
	}
	if perr == nil {
		if files := e.changedFiles(t.Name, result); len(files) > 0 {
			e.fireCallbacks(ctx, t.Name, session, files, rep)
		}
	}
	return result, truncated, perr
}

// run is the part of a call after policy and on_tool_call rules:
// validation, rate limit, test mode, execution.
func (e *Engine) run(ctx context.Context, s *settings, t *toolbox.Tool, session string, args []byte, scope toolbox.Scope, start time.Time) ([]byte, bool, *protocol.Error) {
	if perr := t.Validate(args); perr != nil {
		return nil, false, perr
	}
	if perr := t.Admit(session, start); perr != nil {
		return nil, false, perr
	}
	if e.skippedByTestMode(s, t) {
		return testModeResult(t.Name), false, nil
	}
	return t.Execute(ctx, toolbox.Call{Session: session, Arguments: args, Scope: scope}, s.defaults)
}

// skippedByTestMode: in test mode, tools that reach outside the process
// (network, fs_write, exec) answer without running, unless allowed.
func (e *Engine) skippedByTestMode(s *settings, t *toolbox.Tool) bool {
	if !(s.config.TestMode || e.envTestMode) || e.envTestAllow {
		return false
	}
	if t.Builtin && t.Name == "callback_trigger" {
		return false // applies test mode to each run itself, so dry runs still answer
	}
	return t.HasCapability(toolbox.CapNetwork) || t.HasCapability(toolbox.CapFSWrite) || t.HasCapability(toolbox.CapExec)
}

// record adds the call to the audit. tool must be a string Clara owns (the
// registered name, or a clone); the audit copies the session and args.
func (e *Engine) record(start time.Time, took time.Duration, session, tool string, args []byte, perr *protocol.Error, thread uint32) {
	if e.auditOff {
		return
	}
	r := toolbox.Record{Time: start, Session: session, Tool: tool, Duration: took}
	if perr != nil {
		r.Code = perr.Code
	}
	e.audit.AddFrom(r, args, thread)
}

// fastNow is the time of day for the call path: a base wall-clock reading
// advanced by the monotonic clock, which costs one clock read instead of
// time.Now's two. The base is renewed every second, so adjustments of the
// wall clock show within a second.
func (e *Engine) fastNow() time.Time {
	base := e.clockBase.Load()
	d := time.Since(*base)
	if d < 0 || d > time.Second {
		now := time.Now()
		e.clockBase.Store(&now)
		return now
	}
	return base.Add(d)
}

// since is the time elapsed from start. With the real clock it reads only
// the monotonic clock (time.Now reads two clocks: this is on every call).
func (e *Engine) since(start time.Time) time.Duration {
	if e.realClock {
		return time.Since(start)
	}
	return e.now().Sub(start)
}

// sessionPolicy returns the session's policy layer (nil when none).
func (e *Engine) sessionPolicy(session string) *toolbox.Policy {
	if !e.anySessionPolicy.Load() {
		return nil // the common case costs one atomic load
	}
	if p, ok := e.sessionPolicies.Load(session); ok {
		return p.(*toolbox.Policy)
	}
	return nil
}

// NarrowSessionPolicy narrows a session's policy layer by p (it can only
// shrink) and returns the new layer.
func (e *Engine) NarrowSessionPolicy(session string, p *toolbox.Policy) *toolbox.Policy {
	e.sessionPolicyMu.Lock()
	defer e.sessionPolicyMu.Unlock()
	next := e.sessionPolicy(session).Narrow(p, "session \""+session+"\"")
	if next == nil {
		return nil
	}
	e.sessionPolicies.Store(strings.Clone(session), next)
	e.anySessionPolicy.Store(true)
	return next
}

// RegisterTool adds a host tool described by descriptor JSON (SPEC §6.1).
// It replaces a host tool of the same name (which is released once its
// running calls finish) but never a built-in one. On error, opts.OnRelease
// runs before RegisterTool returns: the host never has to guess who frees.
func (e *Engine) RegisterTool(descriptor []byte, opts toolbox.ToolOptions) (err error) {
	defer func() {
		if err != nil && opts.OnRelease != nil {
			opts.OnRelease()
		}
	}()
	d, err := toolbox.ParseDescriptor(descriptor)
	if err != nil {
		return err
	}
	opts.Builtin = false
	t, err := toolbox.NewTool(d, opts)
	if err != nil {
		return err
	}
	if err := e.tools.Register(t); err != nil {
		return err
	}
	e.log.Logf(logging.Info, "tool %q registered", d.Name)
	return nil
}

// UnregisterTool removes a host tool; it is released once its running
// calls finish.
func (e *Engine) UnregisterTool(name string) error {
	if err := e.tools.Unregister(name); err != nil {
		return err
	}
	e.log.Logf(logging.Info, "tool %q unregistered", name)
	return nil
}
