package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"

	"github.com/clara-lib/clara/core/llm"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
	"github.com/clara-lib/clara/core/toolbox"
	"github.com/clara-lib/clara/core/tools"
)

// chatHost is what one chat reaches of the engine (llm.Host): the tools
// its call's policy allows, run through the whole pipeline as nested calls
// of its session; turn events for the rules; progress for the host's event
// handler.
type chatHost struct {
	e       *Engine
	s       *snapshot
	session string
	scope   toolbox.Scope
	stack   *callFrame // the tools running above the chat: never offered
	handle  int64      // the async call the chat runs in, 0 when synchronous
	// elicits: the chat runs in a call of an MCP client that can ask its
	// user, who answers ask_user without an input handler.
	elicits bool
	// batch gathers the files the tool calls of one turn change; the next
	// turn's start (or the chat's end) fires their callbacks at once.
	batch callbackBatch
	// budgets count the calls the chat's model made of each tool
	// (max_calls_per_chat).
	budgets chatBudgets
}

// Catalog lists the llm_visible tools the chat's policy allows (never the
// chat tool itself, the administrative tools, the tools on the call stack
// (a chat run by a tool does not offer that tool), nor ask_user while
// nobody can answer it: no input handler, and no MCP client of the call
// that can ask its user).
func (h *chatHost) Catalog(names []string) []llm.ToolSpec {
	var only map[string]bool
	if names != nil {
		only = make(map[string]bool, len(names))
		for _, n := range names {
			only[n] = true
		}
	}
	var out []llm.ToolSpec
	modelCallbacks := h.s.config.CallbackTools.Models
	for _, t := range h.e.tools.List() {
		offered := t.LLMVisible && !t.Admin || modelCallbacks && modelCallbackTools[t.Name] // callback_tools.models
		if !offered || t.Name == chatTool || (only != nil && !only[t.Name]) || h.stack.has(t.Name) || !h.scope.Allows(t.Name) {
			continue
		}
		if !t.CanAnswer() && !(h.elicits && t.Name == "ask_user" && t.Builtin) {
			continue // ask_user with nobody to ask: the model is not offered what must fail
		}
		out = append(out, llm.ToolSpec{Name: t.Name, Description: t.Description, InputSchema: tools.LLMSchema(t),
			ReturnsContent: t.Returns == toolbox.ReturnsContent})
	}
	return out
}

// CallTool runs the model's tool call as a nested call of the chat.
func (h *chatHost) CallTool(ctx context.Context, name string, args []byte) ([]byte, *protocol.Error) {
	cs := scopeOf(ctx)
	cs.depth++
	cs.nestUnder(ctx) // the chat is the parent of the calls its model makes
	ctx = context.WithValue(ctx, callScopeKey{}, &cs)
	ctx = withCallbackBatch(ctx, &h.batch)
	c := &toolCall{name: name, session: h.session, args: args, scope: h.scope, nested: true, rep: &report{}, chat: &h.budgets}
	result, _, perr := h.e.callTool(ctx, h.s, c)
	return result, perr
}

// Turn fires on_turn_start or on_turn_end with context.turn, and hands the
// session's queued notices to the model.
func (h *chatHost) Turn(ctx context.Context, event string, t llm.Turn) []string {
	// A turn starts after the tool calls of the one before have all
	// answered: their callbacks fire now, once for the batch, and what the
	// blocking ones said reaches the model with this turn.
	var fired []protocol.Notice
	if event == llm.EventTurnStart {
		fired = h.endBatch(ctx)
	}
	payload := func() map[string]any { return map[string]any{"turn": t.Context()} }
	if perr := h.e.fireOnly(ctx, h.s, event, h.session, payload); perr != nil {
		h.e.log.Logf(logging.Warn, "chat: %s: %s", event, perr.Message)
	}
	notices, _, _ := h.e.sessions.Get(h.session).Drain() // a store that failed was logged
	out := make([]string, 0, len(fired)+len(notices))
	for _, n := range append(fired, notices...) {
		if n.Count > 1 { // identical notices the queue merged (notices.dedupe_window_ms)
			out = append(out, fmt.Sprintf("%s (%d times)", n.Message, n.Count))
			continue
		}
		out = append(out, n.Message)
	}
	return out
}

// GuardPrompt fires on_chat_start with the chat's prompt (llm.Guards):
// its rules may deny the chat, rewrite the prompt or redact it.
func (h *chatHost) GuardPrompt(ctx context.Context, prompt string) (string, *protocol.Error) {
	out, release := h.guard(ctx, rules.OnChatStart, prompt, map[string]any{"prompt": prompt})
	if out == nil {
		return prompt, nil
	}
	defer release()
	if d := out.Denied; d != nil {
		return "", protocol.Errorf(protocol.Denied, "chat denied by rule %q: %s", d.Rule, d.Reason)
	}
	if rw := out.Rewrite; rw != nil {
		if rw.Record != nil {
			rw.Record.Before, rw.Record.After = hashText(prompt), hashText(rw.Prompt)
		}
		prompt = rw.Prompt
	}
	red, err := rules.RedactText(prompt, out.Redactions)
	if err != nil {
		return "", protocol.Errorf(protocol.Denied, "chat denied: its prompt could not be redacted: %v", err)
	}
	return red, nil
}

// GuardAnswer fires on_answer with the chat's final answer (llm.Guards):
// its rules may block the answer or redact it.
func (h *chatHost) GuardAnswer(ctx context.Context, prompt, answer string) (string, *protocol.Error) {
	out, release := h.guard(ctx, rules.OnAnswer, answer, map[string]any{"answer": answer, "prompt": prompt})
	if out == nil {
		return answer, nil
	}
	defer release()
	if b := out.Blocked; b != nil {
		return "", blockedError("the chat's answer was blocked by rule "+strconv.Quote(b.Rule), b)
	}
	red, err := rules.RedactText(answer, out.Redactions)
	if err != nil {
		return "", blockedError("the chat's answer was blocked", &rules.Denial{Rule: out.Redactions[0].Rule, Reason: err.Error()})
	}
	return red, nil
}

// guard fires a chat's guard event about text (the prompt, the answer);
// nil when no rule watches it or none decided. What rules in shadow mode would have decided goes to the log
// and the counts of rules_list (a chat has no audit record of its own
// but the chat tool's).
func (h *chatHost) guard(ctx context.Context, event, text string, payload map[string]any) (*rules.Outcome, func()) {
	if !h.s.rules.Watches(event) {
		h.e.sessions.Release(h.session, event)
		return nil, nil
	}
	src := h.e.newEventSource(h.s, event, h.session, payload)
	out := h.e.fire(ctx, h.s, &report{outcomeOnly: true}, src)
	src.release()
	for _, sh := range out.Shadow {
		if !sh.WouldChange(protocol.AppendString(nil, text)) {
			continue
		}
		h.e.shadowCounts.add(sh.Rule, sh.Decision)
		h.e.log.Logf(logging.Info, "chat: %s by rule %q (shadow mode) on %s: %s", sh.Decision, sh.Rule, event, sh.Reason)
	}
	if !out.Decided() {
		out.Release()
		return nil, nil
	}
	return out, out.Release
}

// hashText is the SHA-256 of a text, in hex (a rewritten prompt's).
func hashText(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// endBatch fires the callbacks of the files the last turn's tool calls
// changed.
func (h *chatHost) endBatch(ctx context.Context) []protocol.Notice {
	return h.e.cb.fireBatch(ctx, "chat turn", &h.batch)
}

// Context is seed 001's callbacks panel, with callback_tools.models: the
// model sees it in its system prompt at each turn.
func (h *chatHost) Context() string {
	if !h.s.config.CallbackTools.Models {
		return ""
	}
	return h.e.cb.panel(h.session, h.s.config.CallbackTools.PanelBytes)
}

// Progress hands ev to the host's event handler, with the session and the
// async handle the chat runs in.
func (h *chatHost) Progress(ev llm.ProgressEvent) {
	sink := h.e.events.load()
	if sink == nil {
		return
	}
	b := ev.AppendJSON(make([]byte, 0, 128))
	extra := protocol.AppendString([]byte(`,"session":`), h.session)
	if h.handle != 0 {
		extra = strconv.AppendInt(append(extra, `,"handle":`...), h.handle, 10)
	}
	b = append(append(b[:len(b)-1], extra...), '}')
	sink(b)
}

// eventSink holds the host's event handler (clara_set_event_handler).
type eventSink struct {
	mu   sync.Mutex // serialises replacements: once SetEventSink returns, the old sink is not running
	run  sync.RWMutex
	sink func([]byte)
}

func (s *eventSink) load() func([]byte) {
	s.run.RLock()
	f := s.sink
	s.run.RUnlock()
	if f == nil {
		return nil
	}
	return func(b []byte) {
		s.run.RLock()
		defer s.run.RUnlock()
		if s.sink != nil {
			s.sink(b)
		}
	}
}

func (s *eventSink) set(f func([]byte)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.run.Lock() // waits for every running call of the old sink
	s.sink = f
	s.run.Unlock()
}

// SetEventSink sends the progress events of chats (token, tool_call,
// tool_result, answer; SPEC §10.2) to sink as JSON objects; nil stops them.
// When it returns, the previous sink is not running and will not be called
// again. sink may be called from any goroutine and must not keep the slice.
func (e *Engine) SetEventSink(sink func(event []byte)) { e.events.set(sink) }
