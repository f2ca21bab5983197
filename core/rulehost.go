package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/rules"
	"github.com/clara-lib/clara/core/state"
	"github.com/clara-lib/clara/core/toolbox"
	"github.com/clara-lib/clara/rulelua"
)

// What rules and scripts reach outside themselves: the rules of a
// configuration reach the engine through a ruleHost, a Lua tool's script
// through a toolScriptHost. Both call tools as nested calls (one level
// deeper, never the administrative tools unless configured so, drawing on
// the event tree's emission budget).

// ruleHost is what the rules of one configuration reach: state, chained
// events, tool calls through the pipeline, the log.
type ruleHost struct {
	e *Engine
	s *snapshot
}

var _ rules.Host = (*ruleHost)(nil)

func (h *ruleHost) ApplyState(session string, writes []rules.StateWrite) error {
	ws := make([]state.Write, len(writes))
	for i, w := range writes {
		ws[i] = state.Write{Scope: rules.StateScope(session, w.Namespace), Key: w.Key, Value: w.Value}
	}
	return h.e.stateErr(h.e.state.apply(h.s, ws))
}

func (h *ruleHost) Chain(ctx context.Context, session, event string, payload map[string]any, depth int, trace bool) (*rules.Outcome, error) {
	if err := spend(ctx, "event "+strconv.Quote(event)); err != nil {
		return nil, err
	}
	h.e.sessions.Release(session, event) // the notices held until this event
	src := h.e.newEventSource(h.s, event, session, payload)
	defer src.release()
	ev := rules.Event{Name: event, Session: session, Depth: depth, Trace: trace, Context: src}
	return h.s.rules.Fire(ctx, ev, h), nil
}

// CallTool runs a rule's call_tool through the whole pipeline, in the
// session, under the configuration's and the session's policy, and the
// policy of the request whose call fired the rule, if any (SPEC §2: it
// narrows "this call and everything it calls").
func (h *ruleHost) CallTool(ctx context.Context, session, tool string, args []byte) ([]byte, error) {
	scope := toolbox.Scope{Config: h.s.policy, Session: h.e.sessions.Policy(session), Request: scopeOf(ctx).request}
	return h.e.nestedCall(ctx, h.s, "", tool, session, args, scope)
}

func (h *ruleHost) Log(level logging.Level, message string) { h.e.log.Log(level, message) }

func (h *ruleHost) StateGet(session, key string) (any, bool, error) {
	raw, ok, err := h.e.state.get(h.s, session, key)
	if err != nil || !ok {
		return nil, false, h.e.stateErr(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// toolScriptHost is what a Lua tool's script reaches.
type toolScriptHost struct {
	e        *Engine
	s        *snapshot
	tool     string // the Lua tool's name: on the call stack of what it calls
	session  string
	scope    toolbox.Scope
	progress ProgressFunc // the MCP client's, when it asked for progress
	// clientLog is the MCP client's log, when the call came from one: a
	// Lua tool's log() and print() reach it too.
	clientLog ClientLogFunc
}

var (
	_ rulelua.Host         = (*toolScriptHost)(nil)
	_ rulelua.ProgressHost = (*toolScriptHost)(nil)
)

// Progress passes a Lua tool's progress() on to whoever asked for it.
func (h *toolScriptHost) Progress(done, total float64, message string) {
	if h.progress != nil {
		h.progress(done, total, message)
	}
}

func (h *toolScriptHost) StateGet(key string) (any, bool, error) {
	return h.s.host.StateGet(h.session, key)
}

// CallTool runs a tool under the calling tool's policy, one level deeper,
// with the calling tool on the call stack. call_tool("chat", ...) runs a
// nested chat in that scope.
func (h *toolScriptHost) CallTool(ctx context.Context, name string, args []byte) ([]byte, error) {
	HandOnContext(ctx) // the tool keeps nothing but what it passes on here
	return h.e.nestedCall(ctx, h.s, h.tool, name, h.session, args, h.scope)
}

func (h *toolScriptHost) Log(level, message string) {
	h.e.log.Log(logging.MessageLevel(level), message)
	if h.clientLog != nil {
		if level == "warn" {
			level = "warning" // MCP's name of it
		}
		h.clientLog(level, message)
	}
}

// nestedCall is a call made by a rule or a script (call_tool): through the
// whole pipeline under scope, one level deeper (at most MaxChainDepth), as a
// nested call (the administrative tools and the tools on the call stack are
// out of reach), drawing on the event tree's budget. caller is the running
// tool that makes it ("" for a rule).
func (e *Engine) nestedCall(ctx context.Context, s *snapshot, caller, tool, session string, args []byte, scope toolbox.Scope) ([]byte, error) {
	ctx, err := enterNested(ctx, caller)
	if err != nil {
		return nil, fmt.Errorf("call_tool: %v", err)
	}
	if err := spend(ctx, "call_tool "+strconv.Quote(tool)); err != nil {
		return nil, err
	}
	c := &toolCall{name: tool, session: session, args: args, scope: scope, nested: true, rep: &report{}}
	result, _, perr := e.callTool(ctx, s, c)
	if perr != nil {
		return nil, errors.New(string(perr.Code) + ": " + perr.Message)
	}
	return result, nil
}
