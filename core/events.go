package core

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/clara-lib/clara/core/jsonx"
	"github.com/clara-lib/clara/core/rules"
)

// fire evaluates an event against the rules in force and keeps its notices
// (in the call's report and the session's queue). The event's context is
// built only as far as the rules need it.
func (e *Engine) fire(ctx context.Context, s *snapshot, rep *report, src *eventSource) *rules.Outcome {
	ev := rules.Event{Name: src.name, Session: src.session, Trace: rep.wantTrace, Context: src, Trigger: src.trigger}
	if src.tool.Name == "" {
		// The notices the session holds until this event (deliver_on): not
		// for the tool pipeline's events, which no notice may wait for.
		e.sessions.Release(src.session, src.name)
	}
	out := s.rules.Fire(ctx, ev, s.host)
	if len(out.Deferred) > 0 {
		e.sessions.Get(src.session).Queue(out.Deferred) // for the queue alone: their delivery waits
	}
	if len(out.Notices) > 0 {
		e.sessions.Get(src.session).Queue(out.Notices)
		if !rep.outcomeOnly {
			rep.notices = append(rep.notices, out.Notices...)
		}
	}
	rep.trace = append(rep.trace, out.Trace...)
	return out
}

// eventSource is an event's `context` (SPEC §7.2): the payload's fields at
// the top, plus event, tool, history, state and meta. Simple conditions
// read single values through Lookup; the map is built on first need, with
// only the parts the rules of the event read (history and state cost a
// copy and a lookup, and tool events come with every call).
type eventSource struct {
	e       *Engine
	s       *snapshot
	needs   rules.Needs
	name    string
	session string
	payload map[string]any
	built   map[string]any
	inNS    map[string]map[string]any // the context as each plugin's rules see it
	trigger *rules.Trigger            // the tool events' rules, looked up at configuration
	// Of a tool event: its figures (Name "" when the event is not one; the
	// same facts the pipeline's quick test read), its arguments and the
	// request's _meta (both borrowed for the call).
	tool   rules.ToolFacts
	args   []byte
	meta   []byte
	result []byte // on_tool_complete: the result, decoded only when a rule reads context.tool.result
}

var eventSources = sync.Pool{New: func() any { return new(eventSource) }}

// newEventSource returns a pooled source; release it after firing.
func (e *Engine) newEventSource(s *snapshot, name, session string, payload map[string]any) *eventSource {
	src := eventSources.Get().(*eventSource)
	*src = eventSource{e: e, s: s, needs: s.rules.NeedsFor(name), name: name, session: session, payload: payload}
	return src
}

// newToolEventSource is newEventSource for an event of the tool pipeline,
// whose rules the snapshot holds.
func (e *Engine) newToolEventSource(s *snapshot, t *rules.Trigger, name string, c *toolCall, facts *rules.ToolFacts) *eventSource {
	src := eventSources.Get().(*eventSource)
	*src = eventSource{e: e, s: s, needs: t.Needs(), trigger: t, name: name, session: c.session, tool: *facts,
		args: c.args, meta: c.meta}
	return src
}

func (src *eventSource) release() {
	*src = eventSource{}
	eventSources.Put(src)
}

// Lookup reads event.*, tool.* (but arguments) and scalar payload fields
// without building anything.
func (src *eventSource) Lookup(path []string) (rules.Value, bool) {
	if len(path) == 2 {
		switch path[0] {
		case "event":
			if !src.needs.Event {
				break
			}
			switch path[1] {
			case "name":
				return rules.String(src.name), true
			case "session":
				return rules.String(src.session), true
			}
			return rules.Value{}, false
		case "tool":
			if src.tool.Name == "" || !src.needs.Tool {
				break
			}
			return src.tool.Field(path[1])
		}
	}
	switch path[0] {
	case "event", "tool", "history", "state", "meta":
		return rules.Value{}, false
	}
	return rules.MapSource(src.payload).Lookup(path)
}

// Context builds the map conditions see, once. Everything in it is a copy:
// a script may keep what it reads (a notice, a state key) after the call.
func (src *eventSource) Context() map[string]any {
	if src.built != nil {
		return src.built
	}
	// With nothing to add, the payload itself is the context: it is
	// already Clara's own (decoded from the event, or made by a rule), and
	// nothing writes to a context.
	if src.payload != nil && !src.needs.Event && !src.needs.History && !src.needs.State &&
		(src.tool.Name == "" || !src.needs.Tool) && len(src.meta) == 0 {
		src.built = src.payload
		return src.built
	}
	ctx := make(map[string]any, len(src.payload)+5)
	for k, v := range src.payload {
		ctx[k] = v
	}
	if src.needs.Event {
		ctx["event"] = map[string]any{"name": src.name, "session": src.session}
	}
	if src.needs.History {
		ctx["history"] = src.e.sessions.Get(src.session).History()
	}
	if src.needs.State {
		ctx["state"] = src.e.state.scope(src.s, src.session)
	}
	if src.tool.Name != "" && src.needs.Tool {
		ctx["tool"] = src.toolInfo()
	}
	if len(src.meta) > 0 {
		var meta any
		if json.Unmarshal(src.meta, &meta) == nil {
			ctx["meta"] = meta
		}
	}
	src.built = ctx
	return ctx
}

// ContextIn is the context a plugin's rules see: context.state is the
// plugin's own state in the session.
func (src *eventSource) ContextIn(namespace string) map[string]any {
	base := src.Context()
	if !src.needs.State {
		return base
	}
	if c, ok := src.inNS[namespace]; ok {
		return c
	}
	c := make(map[string]any, len(base))
	for k, v := range base {
		c[k] = v
	}
	c["state"] = src.e.state.scope(src.s, rules.StateScope(src.session, namespace))
	if src.inNS == nil {
		src.inNS = map[string]map[string]any{}
	}
	src.inNS[namespace] = c
	return c
}

// toolInfo is context.tool for the on_tool_* events; the arguments are
// decoded only when a rule reads them.
func (src *eventSource) toolInfo() map[string]any {
	needs := src.needs
	info := make(map[string]any, 5)
	if needs.ToolField("name") {
		info["name"] = src.tool.Name
	}
	if needs.ToolField("arguments") {
		var decoded any = map[string]any{}
		if len(src.args) > 0 {
			decoded = decodeAny(src.args, decoded)
		}
		info["arguments"] = decoded
	}
	if src.tool.Done {
		if needs.ToolField("result_bytes") {
			info["result_bytes"] = src.tool.ResultBytes
		}
		if needs.ToolField("duration_ms") {
			info["duration_ms"] = src.tool.DurationMS
		}
		if needs.ToolField("result") && len(src.result) > 0 {
			if decoded, ok := jsonx.DecodeAny(src.result); ok {
				info["result"] = decoded
			} else if json.Unmarshal(src.result, &decoded) == nil {
				info["result"] = decoded
			}
		}
		if needs.ToolField("error") {
			if src.tool.Error != "" {
				info["error"] = src.tool.Error
			} else {
				info["error"] = nil
			}
		}
	}
	return info
}

// decodeAny decodes b as encoding/json would into an any holding def,
// without reflection when it can (DecodeAny): what a rule reads of a
// call's arguments is decoded on every call it decides.
func decodeAny(b []byte, def any) any {
	if v, ok := jsonx.DecodeAny(b); ok {
		return v
	}
	_ = json.Unmarshal(b, &def)
	return def
}
