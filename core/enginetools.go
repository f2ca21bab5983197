package core

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
	"github.com/clara-lib/clara/core/state"
	"github.com/clara-lib/clara/core/toolbox"
)

// engineTools are the built-in tools that need the engine itself: events,
// notices, sessions, rule state and the rule set.
func (e *Engine) engineTools() ([]*toolbox.Tool, error) {
	defs := []struct {
		name, description, schema string
		llmVisible                bool
		run                       toolbox.Func
	}{
		{"emit_event", "Emits an event to the rule engine in the calling session and returns what fired.",
			`{"type":"object","properties":{"event":{"type":"string"},"payload":{"type":"object"},"trace":{"type":"boolean"}},"required":["event"],"additionalProperties":false}`,
			false, e.toolEmit},
		{"notifications_drain", "Returns and forgets the notices waiting for the calling session.",
			`{"type":"object","additionalProperties":false}`, true, e.toolDrain},
		{"session_end", "Ends a session: emits on_session_end, then frees its in-memory data (its rule state stays).",
			`{"type":"object","properties":{"session":{"type":"string","minLength":1}},"additionalProperties":false}`,
			false, e.toolSessionEnd},
		{"state_get", "Reads a value of the calling session's rule state.",
			`{"type":"object","properties":{"key":{"type":"string","minLength":1,"maxLength":1024}},"required":["key"],"additionalProperties":false}`,
			false, e.toolStateGet},
		{"state_set", "Stores a JSON value in the calling session's rule state.",
			`{"type":"object","properties":{"key":{"type":"string","minLength":1,"maxLength":1024},"value":{}},"required":["key","value"],"additionalProperties":false}`,
			false, e.toolStateSet},
		{"rules_load", "Loads rules: inline TOML (toml, with a name), more rule files (paths), or, with no argument, the configured files again. A failed load keeps the rules in force.",
			`{"type":"object","properties":{"toml":{"type":"string"},"name":{"type":"string","minLength":1},"paths":{"type":"array","items":{"type":"string"}}},"additionalProperties":false}`,
			false, e.toolRulesLoad},
		{"rules_list", "Lists the rules in force.", `{"type":"object","properties":{"trigger":{"type":"string"}},"additionalProperties":false}`,
			false, e.toolRulesList},
		{"rules_test", "Runs a rule test file (path, or inline toml) against the rules in force, or against the rule files it names.",
			`{"type":"object","properties":{"path":{"type":"string"},"toml":{"type":"string"}},"additionalProperties":false}`,
			false, e.toolRulesTest},
	}
	out := make([]*toolbox.Tool, 0, len(defs)+5)
	for _, d := range defs {
		t, err := toolbox.NewTool(toolbox.Descriptor{Name: d.name, Description: d.description, Returns: toolbox.ReturnsJSON,
			InputSchema: []byte(d.schema), LLMVisible: d.llmVisible, Limits: toolbox.Limits{MaxOutputBytes: 16 << 20}},
			toolbox.ToolOptions{Run: d.run, Builtin: true, Inline: true})
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	for _, d := range e.callbackTools() {
		t, err := toolbox.NewTool(toolbox.Descriptor{Name: d.name, Description: d.description, Returns: toolbox.ReturnsJSON,
			InputSchema: []byte(d.schema), Capabilities: d.caps, Limits: toolbox.Limits{MaxOutputBytes: 16 << 20}},
			toolbox.ToolOptions{Run: d.run, Builtin: true, Inline: true})
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func (e *Engine) toolEmit(ctx context.Context, call toolbox.Call) ([]byte, error) {
	var a struct {
		Event   string         `json:"event"`
		Payload map[string]any `json:"payload"`
		Trace   bool           `json:"trace"`
	}
	if err := json.Unmarshal(call.Arguments, &a); err != nil {
		return nil, protocol.Errorf(protocol.InvalidArgs, "emit_event: %v", err)
	}
	result, perr := e.emit(ctx, e.cfg.Load(), a.Event, call.Session, a.Payload, a.Trace, nil)
	if perr != nil {
		perr.Code = protocol.InvalidArgs
		return nil, perr
	}
	return result, nil
}

func (e *Engine) toolDrain(_ context.Context, call toolbox.Call) ([]byte, error) {
	ns, dropped := e.sessionFor(call.Session).drain()
	return json.Marshal(struct {
		Notices []rules.Notice `json:"notices"`
		Dropped int            `json:"dropped"`
	}{ns, dropped})
}

func (e *Engine) toolSessionEnd(ctx context.Context, call toolbox.Call) ([]byte, error) {
	name := call.Session
	if v := gjson.GetBytes(call.Arguments, "session"); v.Exists() {
		name = v.Str
	}
	name = strings.Clone(name)
	result, perr := e.emit(ctx, e.cfg.Load(), "on_session_end", name, nil, false, nil)
	if perr != nil {
		perr.Code = protocol.InvalidArgs // the session named in the arguments
		return nil, perr
	}
	// Free what lives in memory; the rule state in SQLite stays.
	e.kv.DropSession(name)
	if name == protocol.DefaultSession {
		e.defaultSession.clear()
	} else {
		e.sessions.Delete(name)
	}
	e.sessionPolicyMu.Lock()
	e.sessionPolicies.Delete(name)
	e.sessionPolicyMu.Unlock()
	return append(append([]byte(`{"session":`), protocol.AppendString(nil, name)...), append([]byte(`,"emitted":`), append(result, '}')...)...), nil
}

func (e *Engine) toolStateGet(_ context.Context, call toolbox.Call) ([]byte, error) {
	key := gjson.GetBytes(call.Arguments, "key").Str
	out := append([]byte(`{"key":`), protocol.AppendString(nil, key)...)
	st, err := e.stateStore(e.cfg.Load(), false)
	if err != nil {
		return nil, err
	}
	if st != nil {
		v, ok, err := st.Get(call.Session, key)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, `,"found":true,"value":`...)
			return append(append(out, v...), '}'), nil
		}
	}
	return append(out, `,"found":false}`...), nil
}

func (e *Engine) toolStateSet(_ context.Context, call toolbox.Call) ([]byte, error) {
	key := gjson.GetBytes(call.Arguments, "key").Str
	value := gjson.GetBytes(call.Arguments, "value").Raw
	st, err := e.stateStore(e.cfg.Load(), true)
	if err != nil {
		return nil, err
	}
	if err := st.Apply([]state.Write{{Scope: strings.Clone(call.Session), Key: key, Value: []byte(value)}}); err != nil {
		return nil, err
	}
	return append(append([]byte(`{"key":`), protocol.AppendString(nil, key)...), `,"stored":true}`...), nil
}

func (e *Engine) toolRulesLoad(_ context.Context, call toolbox.Call) ([]byte, error) {
	var a struct {
		TOML  *string  `json:"toml"`
		Name  string   `json:"name"`
		Paths []string `json:"paths"`
	}
	if err := json.Unmarshal(call.Arguments, &a); err != nil {
		return nil, protocol.Errorf(protocol.InvalidArgs, "rules_load: %v", err)
	}
	e.cfgMu.Lock()
	defer e.cfgMu.Unlock()
	extra := append([]rules.Source(nil), e.extraRules...)
	put := func(src rules.Source) {
		for i := range extra {
			if extra[i].Name == src.Name {
				extra[i] = src
				return
			}
		}
		extra = append(extra, src)
	}
	if a.TOML != nil {
		name := a.Name
		if name == "" {
			name = "inline"
		}
		// Script paths of inline rules are relative to the project root.
		put(rules.Source{Name: name, Text: []byte(*a.TOML), Dir: e.cfg.Load().config.ProjectRoot})
	}
	if len(a.Paths) > 0 {
		files, err := ruleFiles(e.cfg.Load().config.ProjectRoot, a.Paths)
		if err != nil {
			return nil, protocol.Errorf(protocol.InvalidArgs, "rules_load: %v", err)
		}
		if len(files) == 0 {
			return nil, protocol.Errorf(protocol.InvalidArgs, "rules_load: no file matches %q", a.Paths)
		}
		for _, f := range files {
			put(f)
		}
	}
	old := e.extraRules
	e.extraRules = extra
	if err := e.install(e.cfg.Load().tree); err != nil {
		e.extraRules = old
		perr := protocol.Errorf(protocol.InvalidArgs, "rules_load: %v (the rules in force are unchanged)", err)
		var le *rules.LoadError
		if asLoadError(err, &le) {
			perr.Details, _ = json.Marshal(le.Problems)
		}
		return nil, perr
	}
	return e.ruleListing(e.cfg.Load().rules, "")
}

func asLoadError(err error, target **rules.LoadError) bool {
	for err != nil {
		if le, ok := err.(*rules.LoadError); ok {
			*target = le
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

func (e *Engine) toolRulesList(_ context.Context, call toolbox.Call) ([]byte, error) {
	return e.ruleListing(e.cfg.Load().rules, gjson.GetBytes(call.Arguments, "trigger").Str)
}

type ruleInfo struct {
	ID          string `json:"id"`
	Description string `json:"description"`
	Trigger     string `json:"trigger"`
	Priority    int    `json:"priority"`
	Stop        bool   `json:"stop"`
	Condition   string `json:"condition"`
	File        string `json:"file"`
	Line        int    `json:"line"`
}

func (e *Engine) ruleListing(set *rules.Set, trigger string) ([]byte, error) {
	list := []ruleInfo{}
	for _, r := range set.Rules() {
		if trigger != "" && r.Trigger != trigger {
			continue
		}
		list = append(list, ruleInfo{r.ID, r.Description, r.Trigger, r.Priority, r.Stop, r.CondSource, r.File, r.Line})
	}
	return json.Marshal(struct {
		Rules []ruleInfo `json:"rules"`
	}{list})
}

func (e *Engine) toolRulesTest(_ context.Context, call toolbox.Call) ([]byte, error) {
	var a struct {
		Path string  `json:"path"`
		TOML *string `json:"toml"`
	}
	if err := json.Unmarshal(call.Arguments, &a); err != nil {
		return nil, protocol.Errorf(protocol.InvalidArgs, "rules_test: %v", err)
	}
	s := e.cfg.Load()
	var src rules.Source
	var p string // the test file, resolved
	switch {
	case a.TOML != nil && a.Path == "":
		src = rules.Source{Name: "inline", Text: []byte(*a.TOML)}
	case a.Path != "" && a.TOML == nil:
		p = a.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(s.config.ProjectRoot, p)
		}
		text, err := os.ReadFile(p)
		if err != nil {
			return nil, protocol.Errorf(protocol.InvalidArgs, "rules_test: %v", err)
		}
		src = rules.Source{Name: a.Path, Text: text}
	default:
		return nil, protocol.Errorf(protocol.InvalidArgs, "rules_test: give path or toml")
	}
	tf, err := rules.ParseTests(src)
	if err != nil {
		return nil, protocol.Errorf(protocol.InvalidArgs, "rules_test: %v", err)
	}
	set := s.rules
	if len(tf.Rules) > 0 {
		// The rule files the test names, relative to the test file.
		dir := s.config.ProjectRoot
		if p != "" {
			dir = filepath.Dir(p)
		}
		files, err := ruleFiles(dir, tf.Rules)
		if err != nil {
			return nil, protocol.Errorf(protocol.InvalidArgs, "rules_test: %v", err)
		}
		if len(files) == 0 {
			return nil, protocol.Errorf(protocol.InvalidArgs, "rules_test: no rule file matches %q", tf.Rules)
		}
		if set, err = rules.Load(files, s.thresholds); err != nil {
			return nil, protocol.Errorf(protocol.InvalidArgs, "rules_test: %v", err)
		}
	}
	rep := tf.Run(set, s.thresholds)
	out, err := json.Marshal(rep)
	if err != nil {
		return nil, fmt.Errorf("rules_test: %v", err)
	}
	return out, nil
}
