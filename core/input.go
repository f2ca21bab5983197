package core

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/clara-lib/clara/core/protocol"
)

// InputHandler answers the ask_user tool for the host (issue 14, seed 003):
// request is one JSON object, {"id":N,"prompt":"...","session":"s"} with
// "handle":H when the call runs asynchronously. It returns the user's
// answer, or ok false when the user declined. It runs on a goroutine of
// its own and may block as long as the user takes; when the call's
// context ends first (a cancel, a deadline), ask_user returns without it,
// its answer is dropped, and the event sink gets input_cancelled with the
// question's id: the handler should then return soon, since until it does
// the question counts against limits.max_open_questions (a C handler holds
// a thread for it). It must not keep request.
type InputHandler func(request []byte) (answer string, ok bool)

// inputHost holds the host's input handler and numbers the requests.
type inputHost struct {
	mu      sync.RWMutex
	handler InputHandler
	lastID  atomic.Int64
	// open counts the questions handed to a handler that has not returned
	// from them yet, abandoned ones included: each may hold a thread (a C
	// or Python handler blocks in cgo), so their number is bounded
	// (limits.max_open_questions) or cancelling could exhaust the threads.
	open atomic.Int64
}

func (in *inputHost) load() InputHandler {
	in.mu.RLock()
	defer in.mu.RUnlock()
	return in.handler
}

// SetInputHandler installs the handler ask_user asks; nil removes it, and
// ask_user then fails with tool_failed and is no longer offered to models.
// Requests already handed to the previous handler go on with it.
func (e *Engine) SetInputHandler(h InputHandler) {
	e.input.mu.Lock()
	had := e.input.handler != nil
	e.input.handler = h
	e.input.mu.Unlock()
	if had != (h != nil) {
		e.tools.Touch() // ask_user comes or goes: MCP clients hear list_changed
	}
}

// inputAnswer is what a handler answered.
type inputAnswer struct {
	text string
	ok   bool
}

// A question's handler goroutine and its asker race to move it out of
// questionWaiting: the goroutine to call the handler, the asker (whose call
// ended) to abandon it. A question abandoned first is never handed to the
// handler.
const (
	questionWaiting int32 = iota
	questionAsked
	questionAbandoned
)

// askUser asks the host's input handler prompt, for a call of session:
// {"answer":"..."}, or {"declined":true}. The progress event input_required
// goes to the event handler first, with the same id; input_cancelled
// follows when the call ends before the answer.
func (e *Engine) askUser(ctx context.Context, session, prompt string) ([]byte, error) {
	h := e.input.load()
	if h == nil {
		return nil, protocol.Errorf(protocol.ToolFailed, "ask_user: no input handler is installed "+
			"(the host sets one with clara_set_input_handler in C, clara.set_input_handler in Python; clara-clips has one)")
	}
	if err := ctx.Err(); err != nil {
		return nil, err // a call already ended: nobody would read the answer
	}
	if max := int64(e.current.Load().config.Limits.MaxOpenQuestions); e.input.open.Add(1) > max {
		e.input.open.Add(-1)
		return nil, protocol.Errorf(protocol.ToolFailed, "ask_user: %d questions are already open in the input handler "+
			"(limits.max_open_questions), those whose call was cancelled or timed out counted until the handler returns "+
			"from them; it was not asked (a handler returns from a cancelled question when it hears input_cancelled)", max)
	}
	id := e.input.lastID.Add(1)
	// {"id":N,"prompt":"...","session":"s","handle":H}: input_cancelled
	// names the question with the same fields but the prompt.
	req := strconv.AppendInt([]byte(`{"id":`), id, 10)
	req = append(req, `,"prompt":`...)
	req = protocol.AppendString(req, prompt)
	tail := len(req)
	req = append(req, `,"session":`...)
	req = protocol.AppendString(req, session)
	if handle := AsyncHandle(ctx); handle != 0 {
		req = strconv.AppendInt(append(req, `,"handle":`...), handle, 10)
	}
	req = append(req, '}')
	if sink := e.events.load(); sink != nil {
		sink(append([]byte(`{"event":"input_required",`), req[1:]...))
	}
	var state atomic.Int32
	done := make(chan inputAnswer, 1) // the handler never waits for a reader that left
	e.Go("the input handler", func() {
		var a inputAnswer
		defer func() { // a panic in the handler is a decline
			e.input.open.Add(-1)
			done <- a
		}()
		if state.CompareAndSwap(questionWaiting, questionAsked) {
			a.text, a.ok = h(req)
		}
	})
	select {
	case a := <-done:
		if !a.ok {
			return []byte(`{"declined":true}`), nil
		}
		return append(protocol.AppendString([]byte(`{"answer":`), a.text), '}'), nil
	case <-ctx.Done():
		state.CompareAndSwap(questionWaiting, questionAbandoned)
		if sink := e.events.load(); sink != nil {
			ev := strconv.AppendInt([]byte(`{"event":"input_cancelled","id":`), id, 10)
			sink(append(ev, req[tail:]...))
		}
		return nil, ctx.Err()
	}
}

// userInput implements tools.Input.
type userInput struct{ e *Engine }

// CanAsk: an input handler is installed. This is where MCP elicitation
// (issue 30) comes in: a client that can elicit answers too.
func (u userInput) CanAsk() bool { return u.e.input.load() != nil }

func (u userInput) Ask(ctx context.Context, session, prompt string) ([]byte, error) {
	return u.e.askUser(ctx, session, prompt)
}
