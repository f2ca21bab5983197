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
// context ends first (a cancel, a deadline), ask_user returns without it
// and its answer is dropped. It must not keep request.
type InputHandler func(request []byte) (answer string, ok bool)

// inputHost holds the host's input handler and numbers the requests.
type inputHost struct {
	mu      sync.RWMutex
	handler InputHandler
	lastID  atomic.Int64
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
	e.input.handler = h
	e.input.mu.Unlock()
}

// inputAnswer is what a handler answered.
type inputAnswer struct {
	text string
	ok   bool
}

// askUser asks the host's input handler prompt, for a call of session:
// {"answer":"..."}, or {"declined":true}. The progress event input_required
// goes to the event handler first, with the same id.
func (e *Engine) askUser(ctx context.Context, session, prompt string) ([]byte, error) {
	h := e.input.load()
	if h == nil {
		return nil, protocol.Errorf(protocol.ToolFailed, "ask_user: no input handler is installed "+
			"(the host sets one with clara_set_input_handler in C, clara.set_input_handler in Python; clara-clips has one)")
	}
	id := e.input.lastID.Add(1)
	req := strconv.AppendInt([]byte(`{"id":`), id, 10)
	req = append(req, `,"prompt":`...)
	req = protocol.AppendString(req, prompt)
	req = append(req, `,"session":`...)
	req = protocol.AppendString(req, session)
	if handle := AsyncHandle(ctx); handle != 0 {
		req = strconv.AppendInt(append(req, `,"handle":`...), handle, 10)
	}
	req = append(req, '}')
	if sink := e.events.load(); sink != nil {
		sink(append([]byte(`{"event":"input_required",`), req[1:]...))
	}
	done := make(chan inputAnswer, 1) // the handler never waits for a reader that left
	e.Go("the input handler", func() {
		var a inputAnswer
		defer func() { done <- a }() // a panic in the handler is a decline
		a.text, a.ok = h(req)
	})
	select {
	case a := <-done:
		if !a.ok {
			return []byte(`{"declined":true}`), nil
		}
		return append(protocol.AppendString([]byte(`{"answer":`), a.text), '}'), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// userInput implements tools.Input.
type userInput struct{ e *Engine }

func (u userInput) Ask(ctx context.Context, session, prompt string) ([]byte, error) {
	return u.e.askUser(ctx, session, prompt)
}
