package core

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/clara-lib/clara/core/async"
	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// Asynchronous calls (SPEC §5.1): clara_submit and "async": true hand a
// request to e.async, which runs it on a goroutine of its own under the
// same pipeline, and keeps its envelope until the host collects it.

// asyncOptions are the table's limits under configuration c (nil: the
// defaults).
func (e *Engine) asyncOptions(c *config.Config) async.Options {
	o := async.Options{Log: e.log} // the table's goroutines recover on their own
	if c != nil {
		o.MaxRunning, o.MaxPending = c.Async.MaxRunning, c.Async.MaxPending
	}
	return o
}

type asyncHandleKey struct{}

// AsyncHandle is the handle of the asynchronous call ctx belongs to, or 0
// for a call made synchronously: progress reports carry it.
func AsyncHandle(ctx context.Context) int64 {
	h, _ := ctx.Value(asyncHandleKey{}).(int64)
	return h
}

// asyncCall is what a submitted call keeps until it has run, in one
// allocation: its request's state (the context of its event tree, its
// report: never pooled), the call, and its handle, which it answers as
// the context's AsyncHandle.
type asyncCall struct {
	requestState
	c      toolCall
	e      *Engine
	s      *snapshot
	handle int64
	out    []byte // room for the envelope, after the request's copy
}

func (a *asyncCall) Value(key any) any {
	if key == (asyncHandleKey{}) {
		return a.handle
	}
	return a.requestState.Value(key)
}

// RunCall is the call, on the goroutine Submit started or on its
// waiter's. The envelope goes into out, made with the request's copy.
func (a *asyncCall) RunCall(ctx context.Context, h int64) []byte {
	a.Context, a.handle = ctx, h
	out := a.out
	a.out = nil
	return a.e.answerCall(a, out, a.s, &a.c)
}

// submit starts the request req in the background and returns its handle.
// req is the caller's memory: the call runs on a copy, parsed again so that
// everything the call holds points into memory of its own.
func (e *Engine) submit(s *snapshot, req []byte) (int64, *protocol.Error) {
	// One allocation for the copy and for the envelope after it, whose
	// first guess is the request's size and some.
	buf := make([]byte, len(req), 2*len(req)+128)
	copy(buf, req)
	own := buf[:len(req):len(req)]
	r, _, perr := protocol.Parse(own, s.limits, nil)
	if perr != nil {
		return 0, perr
	}
	t, _ := e.tools.Lookup(toolName(s, &r))
	a := &asyncCall{e: e, s: s, out: buf[len(req):len(req)]}
	a.handedOn.Store(true) // its own, never pooled
	a.budget.max = s.config.Rules.MaxEmissions
	a.budget.left.Store(int64(a.budget.max))
	a.c = toolCall{rep: &a.rep, state: &a.requestState, tool: t}
	if perr := e.newToolCall(s, &r, &a.c); perr != nil {
		return 0, perr
	}
	h, err := e.async.Submit(context.Background(), async.Call{
		Tool: a.c.name,
		Run:  a,
		// A host's tool (C, Python) runs where cancelling cannot stop it:
		// a waiter running it would stay until it returns.
		ByWaiter: !isHostTool(t),
	})
	if errors.Is(err, async.ErrBusy) {
		return 0, protocol.Errorf(protocol.RateLimited, "%v: collect or cancel some first", err)
	}
	if err != nil {
		return 0, protocol.Errorf(protocol.Internal, "%v", err)
	}
	return h, nil
}

// isHostTool reports whether t (nil: no such tool) is a host's tool (C,
// Python).
func isHostTool(t *toolbox.Tool) bool { return t != nil && t.Host }

// submitAnswer answers a request that says "async": true:
// {"status":"accepted","id":…,"tool":…,"handle":N}, or the refusal.
func (e *Engine) submitAnswer(dst []byte, s *snapshot, req, id []byte) []byte {
	h, perr := e.submit(s, req)
	if perr != nil {
		return e.fail(dst, id, "", perr)
	}
	dst = append(dst, `{"status":"accepted"`...)
	if id != nil {
		dst = append(append(dst, `,"id":`...), id...)
	}
	dst = append(dst, `,"handle":`...)
	dst = strconv.AppendInt(dst, h, 10)
	return append(dst, '}')
}

// Submit starts a request in the background (clara_submit) and returns its
// handle; the request need not say "async": true. req is borrowed for the
// call. A request that does not parse, or a submit past
// async.max_running, is refused with the error the synchronous call would
// have had (rate_limited for the latter), and logged.
func (e *Engine) Submit(req []byte) (handle int64, perr *protocol.Error) {
	defer e.guard("submit", func() { handle, perr = 0, protocol.InternalError(nil) })
	if req == nil {
		return 0, nullInput
	}
	h, perr := e.submit(e.current.Load(), req)
	if perr != nil {
		e.log.Logf(logging.Warn, "clara_submit refused: %s: %s", perr.Code, perr.Message)
	}
	return h, perr
}

// unknownHandle is the error for a handle the table does not hold.
func unknownHandle(err error) *protocol.Error {
	return protocol.Errorf(protocol.InvalidRequest, "%v", err)
}

// Ready reports whether the call's answer is ready to collect.
func (e *Engine) Ready(handle int64) (ready bool, perr *protocol.Error) {
	defer e.guard("ready", func() { ready, perr = false, protocol.InternalError(nil) })
	ok, err := e.async.Ready(handle)
	if err != nil {
		return false, unknownHandle(err)
	}
	return ok, nil
}

// Wait waits at most timeout (negative: as long as it takes) for the
// call's answer and returns its envelope, the handle then spent; or
// {"status":"pending","handle":N} when it is not ready yet; or an
// invalid_request envelope for a handle that is unknown or spent.
func (e *Engine) Wait(ctx context.Context, handle int64, timeout time.Duration) (out []byte) {
	defer e.guard("wait", func() { out = protocol.AppendError(nil, nil, protocol.InternalError(nil)) })
	env, done, err := e.async.Wait(ctx, handle, timeout)
	switch {
	case err != nil:
		return protocol.AppendError(nil, nil, unknownHandle(err))
	case !done:
		return pendingAnswer(nil, handle)
	}
	return env
}

func pendingAnswer(dst []byte, handle int64) []byte {
	dst = append(dst, `{"status":"pending","handle":`...)
	return append(strconv.AppendInt(dst, handle, 10), '}')
}

// Cancel cancels the call's context; its answer is ready at once
// (tool_failed, cancelled). A C tool already running finishes on its
// worker and its result is discarded.
func (e *Engine) Cancel(handle int64) (perr *protocol.Error) {
	defer e.guard("cancel", func() { perr = protocol.InternalError(nil) })
	if err := e.async.Cancel(handle); err != nil {
		return unknownHandle(err)
	}
	return nil
}

// AsyncFD returns an eventfd that becomes readable whenever an answer is
// ready; it lives as long as the engine.
func (e *Engine) AsyncFD() (int, error) { return e.async.FD() }

// AsyncTake lists the calls finished since the last AsyncTake, each once,
// oldest first, at most max (max <= 0: all), as a JSON array of
// {"handle","tool","status"}. Their answers stay until collected by Wait.
func (e *Engine) AsyncTake(max int) (out []byte) {
	defer e.guard("async take", func() { out = []byte("[]") })
	out = append(out, '[')
	for i, f := range e.async.Take(max) {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(append(out, `{"handle":`...), f.Handle, 10)
		out = protocol.AppendString(append(out, `,"tool":`...), f.Tool)
		out = protocol.AppendString(append(out, `,"status":`...), f.Status)
		out = append(out, '}')
	}
	return append(out, ']')
}
