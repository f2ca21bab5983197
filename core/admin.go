package core

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/fsread"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
	"github.com/clara-lib/clara/core/state"
	"github.com/clara-lib/clara/core/tools"
)

// adminTools is the engine as the event, session, state and rule tools
// reach it (tools.Engine).
type adminTools struct{ e *Engine }

var _ tools.Engine = adminTools{}

func (a adminTools) Emit(ctx context.Context, session, event string, payload map[string]any, trace bool) ([]byte, error) {
	s := a.e.current.Load()
	out, perr := a.e.emit(withEmissionBudget(ctx, s), s, event, session, payload, trace, nil)
	if perr != nil {
		return nil, perr
	}
	return out, nil
}

// Nested reports whether ctx is a call made inside another (a rule's or a
// script's call_tool, a tool's clara_call_evaluate, a model's tool call).
func (a adminTools) Nested(ctx context.Context) bool { return scopeOf(ctx).depth > 0 }

// EndSession emits on_session_end, then frees what the session holds in
// memory (its rule state in SQLite and its policy stay).
func (a adminTools) EndSession(ctx context.Context, session string) ([]byte, error) {
	s := a.e.current.Load()
	name, perr := protocol.SessionName(session)
	if perr != nil {
		return nil, perr
	}
	out, perr := a.e.emit(withEmissionBudget(ctx, s), s, "on_session_end", name, nil, false, nil)
	if perr != nil {
		return nil, perr
	}
	a.e.kv.DropSession(name)
	a.e.sessions.End(name)
	a.e.out.convs.Forget(name)
	a.e.endSharedSession(name)
	a.e.out.vectors.Forget(name)
	return out, nil
}

func (a adminTools) StateGet(session, plugin, key string) ([]byte, bool, error) {
	v, ok, err := a.e.state.get(a.e.current.Load(), rules.StateScope(session, plugin), key)
	return v, ok, a.e.stateErr(err)
}

func (a adminTools) StateSet(session, plugin, key string, value []byte) error {
	return a.e.stateErr(a.e.state.apply(a.e.current.Load(), []state.Write{{Scope: rules.StateScope(session, plugin), Key: key, Value: value}}))
}

// LoadRules serves rules_load: inline rules, more files (inside
// project_root), or the configured ones again. The files are read before
// the configuration lock is taken; a failed load keeps the rules in force.
func (a adminTools) LoadRules(_ context.Context, r tools.RulesLoad) ([]byte, error) {
	e := a.e
	root := e.current.Load().config.ProjectRoot
	var added []ruleSource
	var files []string // the sources read from files, which a reload reads again
	if r.TOML != nil {
		name := r.Name
		if name == "" {
			name = "inline"
		}
		// Script paths of inline rules are relative to the project root.
		added = append(added, ruleSource{Name: name, Text: []byte(*r.TOML), Dir: root, Root: root})
	}
	if len(r.Paths) > 0 {
		read, unmatched, err := readRuleFiles(root, root, r.Paths, true)
		if err != nil {
			return nil, loadRefusal(err, "rules_load: ", "")
		}
		if len(unmatched) > 0 {
			return nil, protocol.Errorf(protocol.InvalidArgs, "rules_load: no file matches %q", unmatched)
		}
		added = append(added, read...)
		for _, f := range read {
			files = append(files, f.Name)
		}
	}
	left, err := e.change(func(cur *snapshot) (config.Tree, runtimeRules) {
		return cur.tree, cur.runtime.withSources(added, files)
	}, nil)
	retire(left)
	if err != nil {
		return nil, loadRefusal(err, "rules_load: ", " (the rules in force are unchanged)")
	}
	e.announceRules(e.current.Load(), ruleChange{Sources: announcedSources(added), Files: files, Root: root})
	return a.ListRules("")
}

// runtimeRules is what was added at run time: rules_load's sources and
// plugin_enable's choices. Immutable: each change makes a new one.
type runtimeRules struct {
	sources []ruleSource
	files   map[string]bool // the sources read from files (a reload reads them again)
	enabled map[string]bool // plugin name -> enabled, as plugin_enable said
	host    []hostRule      // the rules the host registered (hostrules.go)
}

// withSources is r with each of added put in place of the source of the
// same name, or after the others; files are the names of those read from
// files.
func (r runtimeRules) withSources(added []ruleSource, files []string) runtimeRules {
	out := runtimeRules{sources: append([]ruleSource(nil), r.sources...), files: map[string]bool{}, enabled: r.enabled, host: r.host}
	for k := range r.files {
		out.files[k] = true
	}
next:
	for _, src := range added {
		delete(out.files, src.Name)
		for i := range out.sources {
			if out.sources[i].Name == src.Name {
				out.sources[i] = src
				continue next
			}
		}
		out.sources = append(out.sources, src)
	}
	for _, f := range files {
		out.files[f] = true
	}
	return out
}

// withEnabled is r with plugin name enabled or not.
func (r runtimeRules) withEnabled(name string, on bool) runtimeRules {
	out := r
	out.enabled = map[string]bool{name: on}
	for k, v := range r.enabled {
		if k != name {
			out.enabled[k] = v
		}
	}
	return out
}

// reread is r with the sources read from files read again, for a reload.
func (r runtimeRules) reread() (runtimeRules, error) {
	out := r
	out.sources = append([]ruleSource(nil), r.sources...)
	for i, src := range out.sources {
		if !r.files[src.Name] {
			continue
		}
		text, err := fsread.In(src.Root, src.Name, maxRuleFile) // rules_load read it inside the root
		if err != nil {
			return r, protocol.Problems{{File: src.Name, Message: err.Error()}}
		}
		out.sources[i].Text = text
	}
	return out, nil
}

// loadRefusal is rules_load's and rules_test's invalid_args error, with
// every problem in details.
func loadRefusal(err error, prefix, suffix string) error {
	if pe, ok := err.(*protocol.Error); ok {
		return pe
	}
	if ps, ok := asProblems(err); ok {
		perr := ps.Refusal(protocol.InvalidArgs, prefix)
		perr.Message += suffix
		return perr
	}
	return protocol.Errorf(protocol.InvalidArgs, "%s%v%s", prefix, err, suffix)
}

// ruleInfo is one rule of rules_list.
type ruleInfo struct {
	ID          string `json:"id"`
	Description string `json:"description"`
	Trigger     string `json:"trigger"`
	Priority    int    `json:"priority"`
	Stop        bool   `json:"stop"`
	Condition   string `json:"condition"`
	File        string `json:"file"`
	Line        int    `json:"line"`
	// Mode is "shadow" for a rule in shadow mode ("" otherwise); Would
	// counts what the rule decided in shadow mode (would_deny, would_ask,
	// ...) since the last reset.
	Mode  string           `json:"mode,omitempty"`
	Would map[string]int64 `json:"would,omitempty"`
}

// ListRules serves rules_list: the rules in force (of one trigger), and
// the configured rule paths that match no file.
func (a adminTools) ListRules(trigger string) ([]byte, error) {
	s := a.e.current.Load()
	list := []ruleInfo{}
	for _, r := range s.rules.Rules() {
		if trigger != "" && r.Trigger != trigger {
			continue
		}
		info := ruleInfo{r.ID, r.Description, r.Trigger, r.Priority, r.Stop, r.CondSource, r.File, r.Line, "", a.e.shadowCounts.of(r.ID)}
		if r.Mode == rules.ModeShadow {
			info.Mode = rules.ModeShadow
		}
		list = append(list, info)
	}
	unmatched := s.unmatched
	if unmatched == nil {
		unmatched = []string{}
	}
	return json.Marshal(struct {
		Rules     []ruleInfo `json:"rules"`
		Unmatched []string   `json:"unmatched_paths"`
	}{list, unmatched})
}

// TestRules serves rules_test: a test file (inside project_root) or inline
// TOML, against the rules in force or the rule files the test names.
func (a adminTools) TestRules(_ context.Context, path string, toml *string, run string, coverage bool) ([]byte, error) {
	opts := rules.TestOptions{Coverage: coverage}
	if run != "" {
		re, err := regexp.Compile(run)
		if err != nil {
			return nil, protocol.Errorf(protocol.InvalidArgs, "rules_test: run: %v", err)
		}
		opts.Run = re
	}
	rep, err := a.e.testRules(path, toml, opts)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(rep)
	if err != nil {
		return nil, fmt.Errorf("rules_test: %v", err)
	}
	return out, nil
}

// TestRules runs a rule test file as the rules_test tool does (path inside
// project_root, against the rules in force or the rule files it names),
// with opts: the cases it selects, and coverage. `clara rules test` runs
// it.
func (e *Engine) TestRules(path string, opts rules.TestOptions) (rules.TestReport, error) {
	return e.testRules(path, nil, opts)
}

func (e *Engine) testRules(path string, toml *string, opts rules.TestOptions) (rules.TestReport, error) {
	var none rules.TestReport
	s := e.current.Load()
	root := s.config.ProjectRoot
	var src rules.Source
	dir := root // where the rule files a test names are looked for
	switch {
	case toml != nil && path == "":
		src = rules.Source{Name: "inline", Text: []byte(*toml)}
	case path != "" && toml == nil:
		files, _, err := readRuleFiles(root, root, []string{path}, true)
		if err != nil {
			return none, loadRefusal(err, "rules_test: ", "")
		}
		if len(files) == 0 {
			return none, protocol.Errorf(protocol.InvalidArgs, "rules_test: %s: no such file (inside project_root)", path)
		}
		src = rules.Source{Name: path, Text: files[0].Text}
		dir = filepath.Dir(files[0].Name)
	default:
		return none, protocol.Errorf(protocol.InvalidArgs, "rules_test: give path or toml")
	}
	tf, err := rules.ParseTests(src)
	if err != nil {
		return none, loadRefusal(err, "rules_test: ", "")
	}
	set := s.rules
	thresholds := s.config.Rules.Thresholds.Map()
	if len(tf.Rules) > 0 {
		// The rule files the test names, relative to the test file.
		files, unmatched, err := readRuleFiles(dir, root, tf.Rules, true)
		if err != nil {
			return none, loadRefusal(err, "rules_test: ", "")
		}
		if len(files) == 0 || len(unmatched) > 0 {
			return none, protocol.Errorf(protocol.InvalidArgs, "rules_test: no rule file matches %q", unmatched)
		}
		if set, err = rules.Load(files, thresholds); err != nil {
			return none, loadRefusal(err, "rules_test: ", "")
		}
	}
	return tf.RunWith(set, thresholds, opts), nil
}
