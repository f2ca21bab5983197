package core

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
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
	e.input.handler = h
	e.input.mu.Unlock()
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

// askInputHandler asks the host's input handler q, for a call of session.
// The progress event input_required goes to the event handler first,
// with the same id; input_cancelled follows when the call ends before the
// answer. A form (q.Schema) is in the request as "schema", and the
// handler's answer must then be a JSON object that the schema accepts.
func (e *Engine) askInputHandler(ctx context.Context, session string, q Question) (Reply, error) {
	h := e.input.load()
	if h == nil {
		return Reply{}, protocol.Errorf(protocol.ToolFailed, "ask_user: no input handler is installed "+
			"(the host sets one with clara_set_input_handler in C, clara.set_input_handler in Python; clara-clips has one)")
	}
	if err := ctx.Err(); err != nil {
		return Reply{}, err // a call already ended: nobody would read the answer
	}
	var form *toolbox.ValueSchema
	if len(q.Schema) > 0 {
		var err error
		if form, err = toolbox.CompileValueSchema("schema", q.Schema); err != nil {
			return Reply{}, protocol.Errorf(protocol.InvalidArgs, "ask_user: %v", err)
		}
	}
	if max := int64(e.current.Load().config.Limits.MaxOpenQuestions); e.input.open.Add(1) > max {
		e.input.open.Add(-1)
		return Reply{}, protocol.Errorf(protocol.ToolFailed, "ask_user: %d questions are already open in the input handler "+
			"(limits.max_open_questions), those whose call was cancelled or timed out counted until the handler returns "+
			"from them; it was not asked (a handler returns from a cancelled question when it hears input_cancelled)", max)
	}
	id := e.input.lastID.Add(1)
	// {"id":N,"prompt":"...","schema":{...},"session":"s","handle":H}:
	// input_cancelled names the question with the same fields but the
	// prompt and the schema.
	req := strconv.AppendInt([]byte(`{"id":`), id, 10)
	req = append(req, `,"prompt":`...)
	req = protocol.AppendString(req, q.Message)
	if len(q.Schema) > 0 {
		req = append(append(req, `,"schema":`...), protocol.AppendCompact(nil, q.Schema)...)
	}
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
			return Reply{Action: ReplyDecline}, nil
		}
		if form == nil && len(q.Schema) == 0 {
			return Reply{Action: ReplyAccept, Content: protocol.AppendString(nil, a.text)}, nil
		}
		answer := []byte(strings.TrimSpace(a.text))
		if len(answer) == 0 || answer[0] != '{' || !json.Valid(answer) {
			return Reply{}, protocol.Errorf(protocol.ToolFailed, "ask_user: the input handler's answer to a form must be a JSON object")
		}
		if perr := form.Check(answer); perr != nil {
			return Reply{}, protocol.Errorf(protocol.ToolFailed, "ask_user: the input handler's answer does not fit the form: %s", perr.Message)
		}
		return Reply{Action: ReplyAccept, Content: protocol.AppendCompact(nil, answer)}, nil
	case <-ctx.Done():
		state.CompareAndSwap(questionWaiting, questionAbandoned)
		if sink := e.events.load(); sink != nil {
			ev := strconv.AppendInt([]byte(`{"event":"input_cancelled","id":`), id, 10)
			sink(append(ev, req[tail:]...))
		}
		return Reply{}, ctx.Err()
	}
}

// askUser is the ask_user tool: q asked of the person behind the call
// (AskPerson), the reply as the tool's result: {"answer": TEXT} (or the
// form's object), {"declined": true}, or {"declined": true, "cancelled":
// true} when the person dismissed the question.
func (e *Engine) askUser(ctx context.Context, session string, q Question) ([]byte, error) {
	r, err := e.AskPerson(ctx, session, q)
	if err != nil {
		return nil, err
	}
	switch r.Action {
	case ReplyAccept:
		return append(append([]byte(`{"answer":`), r.Content...), '}'), nil
	case ReplyCancel:
		return []byte(`{"declined":true,"cancelled":true}`), nil
	}
	return []byte(`{"declined":true}`), nil
}

// userInput implements tools.Input.
type userInput struct{ e *Engine }

func (u userInput) Ask(ctx context.Context, session, prompt string, schema json.RawMessage) ([]byte, error) {
	return u.e.askUser(ctx, session, Question{Message: prompt, Schema: schema})
}
