package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
	"github.com/clara-lib/clara/core/state"
	"github.com/clara-lib/clara/core/toolbox"
)

// report collects what rules said around one request, for its envelope.
type report struct {
	wantTrace bool
	notices   []rules.Notice
	trace     []rules.TraceEntry
	callbacks [][]byte // results of blocking callbacks (JSON objects)
}

// fire evaluates an event against the rules in force and keeps its notices
// (in the response's report and the session's queue). The event's context
// is built only as far as the rules need it.
func (e *Engine) fire(ctx context.Context, s *settings, rep *report, src *eventSource) *rules.Outcome {
	ev := rules.Event{Name: src.name, Session: src.session, Trace: rep.wantTrace, Context: src, Trigger: src.trigger}
	out := s.rules.Fire(ctx, ev, s.thresholds, s.host)
	if len(out.Notices) > 0 {
		e.sessionFor(src.session).queue(out.Notices)
		rep.notices = append(rep.notices, out.Notices...)
	}
	rep.trace = append(rep.trace, out.Trace...)
	return out
}

// eventSource is an event's `context` (SPEC §7.2): the payload's fields at
// the top, plus event, tool, history and state. Simple conditions read
// single values through Lookup; the map is built on first need, with only
// the parts the rules of the event read (history and state cost a copy and
// a lookup, and tool events come with every call).
type eventSource struct {
	e       *Engine
	s       *settings
	needs   rules.Needs
	name    string
	session string
	payload map[string]any
	built   map[string]any
	trigger *rules.Trigger // the tool events' rules, looked up at configuration
	// Of a tool event: its figures (Name "" when the event is not one; the
	// same facts the pipeline's quick test read) and its arguments.
	tool rules.ToolFacts
	args []byte
}

var eventSources = sync.Pool{New: func() any { return new(eventSource) }}

// newEventSource returns a pooled source; release it after Fire.
func (e *Engine) newEventSource(s *settings, name, session string, payload map[string]any) *eventSource {
	src := eventSources.Get().(*eventSource)
	*src = eventSource{e: e, s: s, needs: s.rules.NeedsFor(name), name: name, session: session, payload: payload}
	return src
}

// newToolEventSource is newEventSource for an event of the tool pipeline,
// whose rules the settings hold.
func (e *Engine) newToolEventSource(s *settings, t *rules.Trigger, name, session string, facts *rules.ToolFacts, args []byte) *eventSource {
	src := eventSources.Get().(*eventSource)
	*src = eventSource{e: e, s: s, needs: t.Needs(), trigger: t, name: name, session: session, tool: *facts, args: args}
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
	case "event", "tool", "history", "state":
		return rules.Value{}, false
	}
	return rules.MapSource(src.payload).Lookup(path)
}

// Context builds the map conditions see, once.
func (src *eventSource) Context() map[string]any {
	if src.built != nil {
		return src.built
	}
	ctx := make(map[string]any, len(src.payload)+4)
	for k, v := range src.payload {
		ctx[k] = v
	}
	if src.needs.Event {
		ctx["event"] = map[string]any{"name": src.name, "session": src.session}
	}
	if src.needs.History {
		ctx["history"] = src.e.sessionFor(src.session).historyView()
	}
	if src.needs.State {
		ctx["state"] = src.e.stateScope(src.s, src.session)
	}
	if src.tool.Name != "" && src.needs.Tool {
		ctx["tool"] = src.toolInfo()
	}
	src.built = ctx
	return ctx
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
			_ = json.Unmarshal(src.args, &decoded)
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

func durationMS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func toolError(perr *protocol.Error) string { return string(perr.Code) + ": " + perr.Message }

// ruleHost gives the rules what they may reach: state, chained events,
// tool calls through the pipeline, the log.
type ruleHost struct {
	e *Engine
	s *settings
}

var _ rules.Host = (*ruleHost)(nil)

func (h *ruleHost) ApplyState(session string, writes []rules.StateWrite) error {
	st, err := h.e.stateStore(h.s, true)
	if err != nil {
		return err
	}
	ws := make([]state.Write, len(writes))
	for i, w := range writes {
		ws[i] = state.Write{Scope: strings.Clone(session), Key: w.Key, Value: w.Value}
	}
	return st.Apply(ws)
}

func (h *ruleHost) Chain(ctx context.Context, session, event string, payload map[string]any, depth int, trace bool) *rules.Outcome {
	src := h.e.newEventSource(h.s, event, session, payload)
	defer src.release()
	ev := rules.Event{Name: event, Session: session, Depth: depth, Trace: trace, Context: src}
	return h.s.rules.Fire(ctx, ev, h.s.thresholds, h)
}

type depthKey struct{}

// requestPolicyKey carries a request's policy (a *toolbox.Policy) in the
// context of its call, to the rules the call fires and what they call.
type requestPolicyKey struct{}

// CallTool runs a rule's call_tool through the whole pipeline, in the
// session, under the configuration's and the session's policy, and the
// policy of the request whose call fired the rule, if any (SPEC §2: it
// narrows "this call and everything it calls"). Calls nest at most
// rules.MaxChainDepth deep (a rule on on_tool_complete that calls a tool
// would otherwise call itself forever).
func (h *ruleHost) CallTool(ctx context.Context, session, tool string, args []byte) ([]byte, error) {
	scope := toolbox.Scope{Config: h.s.policy, Session: h.e.sessionPolicy(session)}
	scope.Request, _ = ctx.Value(requestPolicyKey{}).(*toolbox.Policy)
	return h.e.nestedCall(ctx, h.s, tool, session, args, scope)
}

// nestedCall is a call made by a rule or a script (call_tool): through the
// whole pipeline under scope, one level deeper, at most MaxChainDepth.
func (e *Engine) nestedCall(ctx context.Context, s *settings, tool, session string, args []byte, scope toolbox.Scope) ([]byte, error) {
	depth, _ := ctx.Value(depthKey{}).(int)
	if depth+1 >= rules.MaxChainDepth {
		return nil, fmt.Errorf("call_tool: calls nested deeper than %d", rules.MaxChainDepth)
	}
	ctx = context.WithValue(ctx, depthKey{}, depth+1)
	result, _, perr := e.call(ctx, s, tool, session, args, scope, 0, &report{})
	if perr != nil {
		return nil, errors.New(string(perr.Code) + ": " + perr.Message)
	}
	return result, nil
}

func (h *ruleHost) Log(level logging.Level, message string) { h.e.log.Log(level, message) }

func (h *ruleHost) StateGet(session, key string) (any, bool, error) {
	st, err := h.e.stateStore(h.s, false)
	if err != nil || st == nil {
		return nil, false, err
	}
	raw, ok, err := st.Get(session, key)
	if err != nil || !ok {
		return nil, false, err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// ---- Emit -------------------------------------------------------------------

// Emit fires an event given as JSON, {"event", "session", "payload",
// "trace"} (SPEC §7.3), and returns the envelope
// {"status":"success","result":{"fired":[...],"notices":[...],"denied":null}}.
// A nil text stands for a NULL pointer from C. The request limits
// (limits.max_request_bytes, limits.max_depth) apply to events too.
func (e *Engine) Emit(text []byte) []byte { return e.AppendEmit(nil, text) }

// AppendEmit is Emit appending the envelope to dst (which may be C memory
// with room for a typical answer: then nothing else is allocated for it).
func (e *Engine) AppendEmit(dst, text []byte) (out []byte) {
	mark := len(dst)
	defer func() {
		if r := recover(); r != nil {
			e.log.Logf(logging.Error, "panic in emit: %v\n%s", r, debug.Stack())
			out = protocol.AppendError(dst[:mark], nil, protocol.InternalError(nil))
		}
	}()
	if text == nil {
		return protocol.AppendError(dst, nil, nullInput)
	}
	s := e.cfg.Load()
	ev, perr := parseEvent(text, s.limits)
	if perr != nil {
		return protocol.AppendError(dst, nil, perr)
	}
	// The answer is written once, into the envelope (as protocol.Success
	// would write it with only a result).
	out, perr = e.emit(context.Background(), s, ev.event, ev.session, ev.payload, ev.trace, append(dst, successPrefix...))
	if perr != nil {
		return protocol.AppendError(dst[:mark], nil, perr)
	}
	return append(out, '}')
}

// successPrefix starts a success envelope that has only a result.
const successPrefix = `{"status":"success","result":`

type eventRequest struct {
	event, session string
	payload        map[string]any
	trace          bool
}

const eventShape = `an event is {"event", "session", "payload", "trace"}: `

// parseEvent reads clara_emit's argument as strictly as a request: one
// JSON object (invalid_json otherwise) within the request limits, whose
// members are the four known ones, spelled exactly, each of its type or
// null (invalid_request otherwise).
func parseEvent(text []byte, lim protocol.Limits) (eventRequest, *protocol.Error) {
	ev := eventRequest{session: protocol.DefaultSession}
	if len(text) == 0 {
		return ev, &protocol.Error{Code: protocol.InvalidJSON, Message: "Invalid JSON: empty input"}
	}
	if lim.MaxRequestBytes > 0 && len(text) > lim.MaxRequestBytes {
		return ev, protocol.Errorf(protocol.InvalidRequest, "event is %d bytes, more than limits.max_request_bytes (%d)", len(text), lim.MaxRequestBytes)
	}
	sc, serr := protocol.ScanStrict(text, lim.MaxDepth)
	if serr != nil {
		if serr.TooDeep {
			return ev, protocol.Errorf(protocol.InvalidRequest, "event nests deeper than limits.max_depth (%d) at byte %d", serr.MaxDepth, serr.Offset)
		}
		return ev, &protocol.Error{Code: protocol.InvalidJSON, Message: "Invalid JSON: " + serr.Error()}
	}
	if text[sc.Start] != '{' {
		return ev, &protocol.Error{Code: protocol.InvalidJSON, Message: "Invalid JSON: an event must be an object, got " + protocol.KindOf(text[sc.Start])}
	}
	// Members by their exact names (encoding/json would match them without
	// regard to case). The scan checked the text: gjson reads it as is.
	doc := text[sc.Start:sc.End]
	var perr *protocol.Error
	gjson.ParseBytes(doc).ForEach(func(key, value gjson.Result) bool {
		var want string
		switch key.Str {
		case "event", "session":
			want = "a string"
		case "payload":
			want = "an object"
		case "trace":
			want = "a boolean"
		default:
			perr = protocol.Errorf(protocol.InvalidRequest, eventShape+"unknown field %q", key.Str)
			return false
		}
		if value.Type == gjson.Null {
			return true // null: absent
		}
		if got := protocol.KindOf(value.Raw[0]); got != want {
			perr = protocol.Errorf(protocol.InvalidRequest, eventShape+"%q must be %s, got %s", key.Str, want, got)
			return false
		}
		switch key.Str {
		case "event":
			ev.event = value.Str
		case "session":
			ev.session = value.Str
		case "trace":
			ev.trace = value.Type == gjson.True
		case "payload":
			// The scan checked it: gjson decodes it as encoding/json would
			// (float64 numbers, []any, map[string]any), at a fraction of
			// the cost.
			ev.payload, _ = value.Value().(map[string]any)
		}
		return true
	})
	if perr != nil {
		return ev, perr
	}
	if ev.session == "" {
		ev.session = protocol.DefaultSession
	}
	return ev, nil
}

// emit fires an event from a caller (clara_emit, emit_event, session_end)
// and renders the outcome as the result object of SPEC §7.3.
// The answer is appended to dst (an envelope's start, or nil for a tool).
func (e *Engine) emit(ctx context.Context, s *settings, event, session string, payload map[string]any, trace bool, dst []byte) ([]byte, *protocol.Error) {
	if !rules.ValidEventName(event) {
		return nil, protocol.Errorf(protocol.InvalidRequest, "event %q is not an event name ([a-z][a-z0-9_.]*)", event)
	}
	if strings.HasPrefix(event, "on_tool_") {
		return nil, protocol.Errorf(protocol.InvalidRequest, "%s is emitted by the tool pipeline itself, not by callers", event)
	}
	session, perr := protocol.SessionName(session)
	if perr != nil {
		return nil, perr
	}
	rep := &report{wantTrace: trace}
	src := e.newEventSource(s, event, session, payload)
	defer src.release()
	out := e.fire(ctx, s, rep, src)
	body := rules.Outcome{Fired: out.Fired, Notices: out.Notices, Denied: out.Denied, Trace: rep.trace}
	// Room for a typical answer: a rule fired with its actions is ~150 bytes.
	if need := len(dst) + 64 + 192*(len(out.Fired)+len(out.Notices)); cap(dst) < need {
		dst = append(make([]byte, 0, need), dst...)
	}
	return body.AppendJSON(dst, trace), nil // "trace" present, if empty, when asked for
}

// ---- Rule sets and state ------------------------------------------------------

// loadRules compiles the rule set a configuration asks for: the built-in
// rules, the files its paths match, and what rules_load added.
func (e *Engine) loadRules(c *Config) (*rules.Set, map[string]any, error) {
	th := map[string]any{}
	for k, v := range rules.DefaultThresholds {
		th[k] = v
	}
	for k, v := range c.Rules.Thresholds {
		th[k] = v
	}
	var sources []rules.Source
	if c.Rules.Builtin {
		sources = append(sources, rules.BuiltinSources()...)
	}
	files, err := ruleFiles(c.ProjectRoot, c.Rules.Paths)
	if err != nil {
		return nil, nil, err
	}
	sources = append(sources, files...)
	sources = append(sources, e.extraRules...)
	set, err := rules.Load(sources, th)
	if err != nil {
		return nil, nil, fmt.Errorf("rules: %w", err)
	}
	return set, th, nil
}

// ruleFiles reads the files matching patterns (relative to root), sorted.
// A wildcard does not match rule tests (NAME.test.toml), which may sit
// beside the rules they test.
func ruleFiles(root string, patterns []string) ([]rules.Source, error) {
	var names []string
	seen := map[string]bool{}
	for _, p := range patterns {
		wildcard := strings.ContainsAny(p, "*?[")
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		matches, err := filepath.Glob(p)
		if err != nil {
			return nil, fmt.Errorf("rules.paths %q: %v", p, err)
		}
		for _, m := range matches {
			if wildcard && isRuleTest(m) {
				continue // a test kept beside the rules, as the shipped ones are
			}
			if !seen[m] {
				seen[m] = true
				names = append(names, m)
			}
		}
	}
	sort.Strings(names)
	out := make([]rules.Source, 0, len(names))
	for _, n := range names {
		text, err := os.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("rules: %v", err)
		}
		out = append(out, rules.Source{Name: n, Text: text})
	}
	return out, nil
}

// isRuleTest reports whether a file is a rule test (NAME.test.toml or
// NAME.test.json) rather than a rule file.
func isRuleTest(name string) bool {
	base := strings.ToLower(filepath.Base(name))
	return strings.HasSuffix(base, ".test.toml") || strings.HasSuffix(base, ".test.json")
}

// statePath is where the state database lives: "" for memory.
func statePath(c *Config) string {
	if c.StateDir == "" {
		return ""
	}
	dir := c.StateDir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(c.ProjectRoot, dir)
	}
	return filepath.Join(dir, "state.db")
}

// stateStore returns the state database of the configuration in force,
// opening it on first use. Without create, a database file that does not
// exist yet is not created (nil, nil): the state directory appears only
// when something is stored.
func (e *Engine) stateStore(s *settings, create bool) (*state.Store, error) {
	path := statePath(s.config)
	e.storeMu.Lock()
	defer e.storeMu.Unlock()
	if e.store != nil && e.storeOpen && e.storePath == path {
		return e.store, nil
	}
	if path != "" && !create {
		if _, err := os.Stat(path); err != nil {
			return nil, nil
		}
	}
	st, err := state.Open(path)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if e.store != nil {
		_ = e.store.Close()
	}
	e.store, e.storePath, e.storeOpen = st, path, true
	return st, nil
}

var emptyState = map[string]any{}

// stateScope is context.state: the session's state (read-only).
func (e *Engine) stateScope(s *settings, session string) map[string]any {
	st, err := e.stateStore(s, false)
	if err != nil {
		e.log.Logf(logging.Error, "%v", err)
		return emptyState
	}
	if st == nil {
		return emptyState
	}
	m, err := st.Scope(session)
	if err != nil {
		e.log.Logf(logging.Error, "state of %q: %v", session, err)
		return emptyState
	}
	return m
}
