package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/fsread"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/pgstore"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/resources"
	"github.com/clara-lib/clara/core/rules"
	"github.com/clara-lib/clara/core/toolbox"
	"github.com/clara-lib/clara/core/tools"
)

// snapshot is one configuration in force, immutable: the tree it came
// from, the typed Config, and what the call path precomputes from them.
type snapshot struct {
	tree     config.Tree
	config   *config.Config
	limits   protocol.Limits
	defaults toolbox.Defaults
	policy   *toolbox.Policy // the configuration's layer
	rules    *rules.Set      // with the configuration's thresholds bound
	host     *ruleHost       // what the rules of this configuration reach
	// The rules of the tool pipeline's events, nil when none watch them.
	onToolCall, onToolComplete, onToolFailure *rules.Trigger
	// What rules_load and plugin_enable added at run time, kept across
	// changes.
	runtime runtimeRules
	// The plugins plugins.paths found, enabled or not, in load order.
	plugins []*plugin
	// The files and folders the rules in force came from, for the watcher.
	watched watchList
	// Configured rule paths that matched no file, for rules_list.
	unmatched []string
	// The outbound side: the model, the evaluator, the client's allowlist.
	models *models
	// The resources and prompts MCP clients are offered ([[resources]],
	// [[prompts]]).
	catalog *resources.Set
	// The shared store (store.backend = "postgres"; sharedstore.go), nil
	// for the embedded default. Set by commit.
	shared *pgstore.Store
	// refused, when set, is the answer of every tool call: the start-up
	// configuration is broken (issue 26 §2), and nothing runs until a
	// valid clara_configure replaces it (or clara_reset finds the file
	// fixed).
	refused *protocol.Error
}

// changeHow is what a change is beyond its tree.
type changeHow struct {
	// strict: the rule and plugin patterns the change's own text gave,
	// each of which must match something (only the defaults may match
	// nothing).
	strict strictPaths
	// refusal is the new configuration's refusal of every call; with
	// keepRefusal, the one in force is carried over instead (a reload,
	// rules_load and plugin_enable leave a broken start as they found it).
	refusal     *protocol.Error
	keepRefusal bool
}

// strictPaths says which configured patterns must match something.
type strictPaths struct{ rules, plugins bool }

// strictFor is what a configuration text gave itself of rules.paths and
// plugins.paths.
func strictFor(over config.Tree) strictPaths {
	has := func(table string) bool {
		t, ok := over[table].(config.Tree)
		if !ok {
			m, ok := over[table].(map[string]any)
			if !ok {
				return false
			}
			t = m
		}
		_, ok = t["paths"]
		return ok
	}
	return strictPaths{rules: has("rules"), plugins: has("plugins")}
}

// prepared is a configuration read and compiled, ready to commit: rule
// files are read and compiled, Lua tools compiled, before the
// configuration lock is taken (a slow disk must not stall other changes).
type prepared struct {
	snap       *snapshot
	configured []*toolbox.Tool
	remote     *preparedRemote
}

// prepare reads and compiles what configuration t needs, with runtime as
// the rules added at run time. It changes nothing.
func (e *Engine) prepare(t config.Tree, runtime runtimeRules, how changeHow) (*prepared, error) {
	c := config.Build(t)
	set, unmatched, plugins, err := e.loadRules(c, runtime, how.strict)
	if err != nil {
		return nil, err
	}
	withTools, origins, pluginLua, err := withPluginTools(c, plugins, e.tools.Lookup)
	if err != nil {
		return nil, err
	}
	configured, httpURLs, err := e.compileConfigTools(withTools, origins, pluginLua)
	if err != nil {
		return nil, err
	}
	if _, err := configuredCallbacks(c); err != nil {
		return nil, err
	}
	// A resource's file is read inside project_root (fsread.In: a symbolic
	// link that leads out is refused), regular files only, bounded.
	root := projectRoot(c)
	catalog, err := resources.Compile(c.Resources, c.Prompts, root, func(path string, max int64) ([]byte, error) {
		return fsread.In(root, path, max)
	})
	if err != nil {
		return nil, protocol.Errorf(protocol.InvalidArgs, "configuration: %v", err)
	}
	if err := e.checkStore(c); err != nil {
		return nil, err
	}
	m, err := e.prepareModels(c, httpURLs)
	if err != nil {
		return nil, err
	}
	if err := checkTelemetry(c); err != nil {
		return nil, err
	}
	if err := e.prepareConcepts(c, m, set); err != nil {
		return nil, err
	}
	s := &snapshot{
		tree: config.WithoutOneShots(t), config: c,
		limits:    protocol.Limits{MaxRequestBytes: c.Limits.MaxRequestBytes, MaxDepth: c.Limits.MaxDepth, OwnSession: e.sessions.Own},
		defaults:  toolbox.Defaults{TimeoutMS: c.Limits.TimeoutMS, MaxOutputBytes: c.Limits.MaxOutputBytes, MaxDepth: c.Limits.MaxDepth},
		policy:    toolbox.NewPolicy("the configuration", c.Policy.Allow, c.Policy.Deny),
		rules:     set,
		runtime:   runtime,
		unmatched: unmatched,
		plugins:   plugins,
		models:    m,
		catalog:   catalog,
		refused:   how.refusal,
	}
	s.watched = watchedBy(c, set, runtime, plugins)
	s.host = &ruleHost{e: e, s: s}
	s.onToolCall, s.onToolComplete, s.onToolFailure = set.Trigger("on_tool_call"), set.Trigger("on_tool_complete"), set.Trigger("on_tool_failure")
	remote, err := e.prepareRemote(c, m.clientOptions) // last: it may start servers
	if err != nil {
		return nil, err
	}
	if err := e.checkEagerNames(remote, c.MCPServers, configured); err != nil {
		e.discard(&prepared{remote: remote})
		return nil, err
	}
	return &prepared{snap: s, configured: configured, remote: remote}, nil
}

// commit makes a prepared configuration the one in force. Its only step
// that can fail (opening the audit file) comes first, so on error nothing
// changes. It returns the tools that left the registry, for the caller to
// retire once it has let go of e.admin. Called with e.admin held.
func (e *Engine) commit(p *prepared) ([]*toolbox.Tool, error) {
	if err := e.audit.SetSink(auditSink(p.snap.config)); err != nil {
		e.discard(p)
		return nil, err
	}
	e.commitModels(p.snap.config, p.snap.models)
	e.commitObservability(p.snap.config)
	p.snap.shared = e.shared.sync(p.snap.config)
	e.current.Store(p.snap)
	left := append(e.swapConfigTools(p.configured), e.commitRemote(p.remote)...)
	e.cb.sync(p.snap.config)
	e.async.SetOptions(e.asyncOptions(p.snap.config))
	e.tasks.SetOptions(e.asyncOptions(p.snap.config))
	kv := p.snap.config.KV
	e.kv.SetLimits(tools.KVLimits{MaxKeys: kv.MaxKeys, MaxBytes: kv.MaxBytes, MaxTotalKeys: int64(kv.MaxTotalKeys), MaxTotalBytes: int64(kv.MaxTotalBytes)})
	e.sessions.SetNoticeWindow(time.Duration(p.snap.config.Notices.DedupeWindowMS) * time.Millisecond)
	e.watcher.sync(p.snap)
	// The default pattern matching nothing is a project without rules, not
	// a mistake; a pattern someone wrote that matches nothing may be one.
	if !sameStrings(p.snap.config.Rules.Paths, defaultRulePaths()) {
		for _, u := range p.snap.unmatched {
			e.log.Logf(logging.Warn, "rules.paths %q matches no file", u)
		}
	}
	return left, nil
}

// AuditPath is the audit file of c: audit.path, relative to
// project_root ("" for none).
func AuditPath(c *config.Config) string { return auditPath(c) }

// ConfigFileTree reads a configuration file's text as CLARA_CONFIG and
// bin/clara --config are read, over inForce: its relative paths anchored
// to the file's folder (fileTree).
func ConfigFileTree(text []byte, path string, inForce config.Tree) (config.Tree, error) {
	return fileTree(text, path, inForce, MaxConfigFile)
}

// auditPath is audit.path, relative to project_root ("" for none).
func auditPath(c *config.Config) string {
	switch c.Audit.Path {
	case "-":
		// standard output, not a file named "-"
		return c.Audit.Path
	}
	if c.Audit.Path == "" || filepath.IsAbs(c.Audit.Path) {
		return c.Audit.Path
	}
	return filepath.Join(projectRoot(c), c.Audit.Path)
}

// install prepares and commits t. Called with e.admin held.
func (e *Engine) install(t config.Tree, runtime runtimeRules, how changeHow) ([]*toolbox.Tool, error) {
	p, err := e.prepare(t, runtime, how)
	if err != nil {
		return nil, err
	}
	return e.commit(p)
}

// change builds the next configuration from the one in force, prepares it
// without the lock, and commits it under the lock if nothing changed
// meanwhile (next is then called again on the newer configuration). After a
// few collisions with other changes it prepares under the lock. after, when
// not nil, runs under the lock once the change is in force. Once the lock
// is let go, the plugins that left or came fire their events.
func (e *Engine) change(next func(cur *snapshot) (config.Tree, runtimeRules), after func()) ([]*toolbox.Tool, error) {
	return e.changeWith(changeHow{keepRefusal: true}, next, after)
}

// changeWith is change with how the change is made: strict about the
// patterns its text gave, and what it does to a refusal in force.
func (e *Engine) changeWith(how changeHow, next func(cur *snapshot) (config.Tree, runtimeRules), after func()) ([]*toolbox.Tool, error) {
	prepare := func(cur *snapshot) (*prepared, error) {
		t, runtime := next(cur)
		h := how
		if h.keepRefusal {
			h.refusal = cur.refused
		}
		return e.prepare(t, runtime, h)
	}
	for attempt := 0; attempt < 3; attempt++ {
		cur := e.current.Load()
		p, err := prepare(cur)
		if err != nil {
			return nil, err
		}
		e.admin.Lock()
		if e.current.Load() == cur {
			left, err := e.commitThen(p, after)
			e.admin.Unlock()
			if err == nil {
				e.firePluginEvents(cur, p.snap)
			}
			return left, err
		}
		e.admin.Unlock()
		e.discard(p)
	}
	e.admin.Lock()
	cur := e.current.Load()
	p, err := prepare(cur)
	if err != nil {
		e.admin.Unlock()
		return nil, err
	}
	left, err := e.commitThen(p, after)
	e.admin.Unlock()
	if err == nil {
		e.firePluginEvents(cur, p.snap)
	}
	return left, err
}

// discard lets go of what a prepared configuration started but that will
// not be committed (the remote servers it connected).
func (e *Engine) discard(p *prepared) {
	if p.remote != nil && p.remote.manager != nil {
		e.dropEarly(p.remote.manager)
		p.remote.manager.Close()
	}
}

func (e *Engine) commitThen(p *prepared, after func()) ([]*toolbox.Tool, error) {
	left, err := e.commit(p)
	if err == nil && after != nil {
		after()
	}
	return left, err
}

// retire lets go of tools that left the registry. Called without e.admin:
// an idle host tool is released at once, and its release callback may call
// back into Clara (clara_configure from a finaliser).
func retire(tools []*toolbox.Tool) {
	for _, t := range tools {
		t.Retire()
	}
}

// configure applies a clara_configure text.
func (e *Engine) configure(text []byte) []byte {
	if text == nil {
		return protocol.AppendError(nil, nil, protocol.Errorf(protocol.InvalidRequest, "clara_configure: NULL input"))
	}
	// The text has no name: its problems are "line:col: message", and the
	// envelope's message says what refused them.
	over, err := config.Parse(text, "", configCap(e.current.Load()))
	if err != nil {
		return protocol.AppendError(nil, nil, refusal(err, "clara_configure: "))
	}
	left, tree, err := e.applyChange(over)
	retire(left)
	if err != nil {
		return protocol.AppendError(nil, nil, refusal(positionIn(err, text, ""), "clara_configure: "))
	}
	e.afterChange()
	return configEnvelope(tree)
}

// afterChange logs a configuration change that came into force.
func (e *Engine) afterChange() {
	e.log.Logf(logging.Info, "configuration changed")
	if name := e.Config().DefaultEvaluator; !e.hasTool(name) {
		// Not an error: the host may register the tool next.
		e.log.Logf(logging.Warn, "default_evaluator %q is not a registered tool (yet): simple-form requests get unknown_tool until it is", name)
	}
}

// ConfigureFile applies a configuration file on top of the configuration
// in force, as clara_configure applies a text, but with its relative
// paths anchored to the file's folder (fileTree): bin/clara --config. Its
// problems are positioned in path.
func (e *Engine) ConfigureFile(path string) error {
	text, err := fsread.File(path, MaxConfigFile) // its errors name the path
	if err != nil {
		return err
	}
	over, err := fileTree(text, path, e.current.Load().tree, MaxConfigFile)
	if err != nil {
		return err
	}
	left, _, err := e.applyChange(over)
	retire(left)
	if err != nil {
		return positionIn(err, text, path)
	}
	e.afterChange()
	return nil
}

// fileTree reads a configuration file's text and anchors it to the file's
// folder, so that the file means the same from any working directory
// (issue 26 §1): a relative project_root is relative to that folder, and
// a file that names none makes that folder the project root, unless the
// configuration in force (inForce) already has one other than ".". Every
// other relative path is relative to project_root, as in any
// configuration.
func fileTree(text []byte, path string, inForce config.Tree, cap int) (config.Tree, error) {
	over, err := config.Parse(text, path, cap)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, protocol.Problems{{File: path, Message: err.Error()}}
	}
	if root, ok := over["project_root"].(string); ok {
		if !filepath.IsAbs(root) {
			over["project_root"] = filepath.Join(dir, root)
		}
	} else if root, _ := inForce["project_root"].(string); root == "" || filepath.Clean(root) == "." {
		over["project_root"] = dir
	} else if abs, err := filepath.Abs(root); err != nil || abs != dir {
		// A file applied over another's configuration (bin/clara --config
		// over CLARA_CONFIG) keeps that project_root, but its own paths
		// are still its folder's.
		anchorPaths(over, dir)
	}
	return over, nil
}

// anchorPaths makes the relative paths a configuration file gives
// absolute, against its folder dir, where project_root is another file's
// folder. The callbacks' cwd and the resources' files stay project_root's:
// they must lie inside it.
func anchorPaths(over config.Tree, dir string) {
	abs := func(v any) any {
		if p, ok := v.(string); ok && p != "" && !filepath.IsAbs(p) {
			return filepath.Join(dir, p)
		}
		return v
	}
	table := func(name string) map[string]any {
		t, _ := over[name].(map[string]any)
		return t
	}
	entries := func(name string) []map[string]any {
		list, _ := over[name].([]any)
		var out []map[string]any
		for _, e := range list {
			if m, ok := e.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	}
	for _, name := range []string{"rules", "plugins"} {
		if t := table(name); t != nil {
			if list, ok := t["paths"].([]any); ok {
				for i := range list {
					list[i] = abs(list[i])
				}
			}
		}
	}
	if _, ok := over["state_dir"]; ok {
		over["state_dir"] = abs(over["state_dir"])
	}
	if t := table("audit"); t != nil && t["path"] != "-" {
		if _, ok := t["path"]; ok {
			t["path"] = abs(t["path"])
		}
	}
	anchor := func(m map[string]any, key string) {
		if _, ok := m[key]; ok {
			m[key] = abs(m[key])
		}
	}
	for _, m := range entries("tools") {
		anchor(m, "lua_file")
	}
	for _, m := range entries("mcp_servers") {
		anchor(m, "cwd")
		if c, ok := m["command"].(string); ok && strings.ContainsRune(c, '/') {
			anchor(m, "command") // a path, not a name looked up in PATH
		}
	}
}

// applyChange merges a checked change into the configuration in force and
// installs it, applying its one-shot clear. The change's own rule and
// plugin patterns must match something, and a refusal in force (a broken
// start-up configuration) ends with it.
func (e *Engine) applyChange(over config.Tree) ([]*toolbox.Tool, config.Tree, error) {
	var clear []string
	left, err := e.changeWith(changeHow{strict: strictFor(over)}, func(cur *snapshot) (config.Tree, runtimeRules) {
		merged := config.Merge(cur.tree, over)
		clear = config.Build(merged).Clear
		if contains(clear, config.ClearRules) {
			return merged, runtimeRules{host: cur.runtime.host} // the host's own rules stay
		}
		return merged, cur.runtime
	}, func() {
		if contains(clear, config.ClearSessionPolicies) {
			e.sessions.DropPolicies()
		}
	})
	if err != nil {
		return left, nil, err
	}
	return left, e.current.Load().tree, nil
}

func defaultRulePaths() []string { return config.Build(config.Defaults()).Rules.Paths }

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// refusal turns a configuration problem into an invalid_request error whose
// details list every problem, positioned.
func refusal(err error, prefix string) *protocol.Error {
	if pe, ok := err.(*protocol.Error); ok {
		return pe
	}
	if ps, ok := asProblems(err); ok {
		return ps.Refusal(protocol.InvalidRequest, prefix)
	}
	return protocol.Errorf(protocol.InvalidRequest, "%s%v", prefix, err)
}

func (e *Engine) hasTool(name string) bool {
	_, ok := e.tools.Lookup(name)
	return ok
}

// setBase applies start-up configuration text (the CLARA_CONFIG file) on
// top of the defaults and makes the result what Reset returns to.
func (e *Engine) setBase(text []byte, source string) error {
	over, err := config.Parse(text, source, configCap(e.current.Load()))
	if err != nil {
		return err
	}
	return e.setBaseTree(over, text, source)
}

// setBaseTree applies a start-up configuration read from text: over on
// top of the defaults, what Reset returns to. It ends a refusal in force.
func (e *Engine) setBaseTree(over config.Tree, text []byte, source string) error {
	base := config.Merge(config.Defaults(), over)
	kept := config.WithoutOneShots(base)
	left, err := e.changeWith(changeHow{strict: strictFor(over)}, func(cur *snapshot) (config.Tree, runtimeRules) { return base, cur.runtime },
		func() { e.base.Store(&kept); e.start.broken.Store(false) })
	retire(left)
	if err != nil {
		return fmt.Errorf("%s: %w", source, positionIn(err, text, source))
	}
	return nil
}

// loadBaseFile reads and applies the start-up file, its relative paths
// anchored to its folder (fileTree).
func (e *Engine) loadBaseFile(path string) error {
	text, err := fsread.File(path, MaxConfigFile)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	over, err := fileTree(text, path, config.Defaults(), configCap(e.current.Load()))
	if err != nil {
		return err
	}
	return e.setBaseTree(over, text, path)
}

// startup is what the engine started from (issue 26 §2): the CLARA_CONFIG
// file, and what a start-up configuration that does not load leads to.
type startup struct {
	path string // CLARA_CONFIG; "" when none
	// onDefaults: CLARA_CONFIG_ON_ERROR=defaults, the engine runs on the
	// defaults when the start-up configuration does not load (the
	// behaviour before issue 26). Otherwise it refuses every tool call.
	onDefaults bool
	// broken: the start-up configuration did not load; Reset tries it
	// again.
	broken atomic.Bool
}

// ConfigOnErrorDefaults is the value of Options.ConfigOnError (and of
// CLARA_CONFIG_ON_ERROR) that runs the engine on the defaults when its
// start-up configuration does not load, instead of refusing every call.
const ConfigOnErrorDefaults = "defaults"

// startRefusal is the answer of every tool call while the start-up
// configuration (what) is broken: invalid_config, its problems in
// details.
func startRefusal(what string, err error) *protocol.Error {
	ps := problemsIn(err, what)
	return &protocol.Error{Code: protocol.InvalidConfig, Details: ps.AppendJSON(nil), Cause: ps,
		Message: fmt.Sprintf("the start-up configuration (%s) does not load, so no tool runs until clara_configure applies a valid configuration: %s", what, ps.Error())}
}

// refuse puts in force a configuration that answers every tool call with
// perr: the defaults without any file (nothing of a broken configuration
// runs), shown as want, the configuration the host meant, which
// clara_configure changes then apply to. after runs under the lock.
func (e *Engine) refuse(want config.Tree, perr *protocol.Error, after func()) []*toolbox.Tool {
	e.start.broken.Store(true)
	e.log.Logf(logging.Error, "%s; every tool call is refused (invalid_config) until then, or until the file is fixed and clara_reset called (CLARA_CONFIG_ON_ERROR=defaults runs on the defaults instead)", perr.Message)
	e.admin.Lock()
	defer e.admin.Unlock()
	p, err := e.prepare(withoutFiles(config.Defaults()), runtimeRules{}, changeHow{refusal: perr})
	if err != nil {
		panic("clara: the default configuration without files does not install: " + err.Error()) // caught by this package's tests
	}
	p.snap.tree = config.WithoutOneShots(want)
	left, err := e.commitThen(p, after)
	if err != nil {
		panic("clara: the default configuration without files does not commit: " + err.Error())
	}
	return left
}

// withoutFiles is t reading no file and starting nothing: no rule files,
// plugins, audit file, [[tools]], [[callbacks]] or [[mcp_servers]].
func withoutFiles(t config.Tree) config.Tree {
	return config.Merge(t, config.Tree{"audit": config.Tree{"path": ""}, "rules": config.Tree{"paths": []any{}},
		"plugins": config.Tree{"paths": []any{}}, "tools": []any{}, "callbacks": []any{}, "mcp_servers": []any{}})
}

// Refusal is the answer every tool call gets while the start-up
// configuration does not load (invalid_config), nil when calls run.
// bin/clara refuses to start on it.
func (e *Engine) Refusal() *protocol.Error { return e.current.Load().refused }

// configCap bounds a configuration text like a request
// (limits.max_request_bytes), but never below minConfigCap: a small
// request limit must not lock the host out of its own configuration.
func configCap(s *snapshot) int {
	return max(s.config.Limits.MaxRequestBytes, minConfigCap)
}

const minConfigCap = 1 << 20

// MaxConfigFile bounds a configuration file (CLARA_CONFIG, bin/clara
// --config), as limits.max_request_bytes does a clara_configure text by
// default.
const MaxConfigFile = 16 << 20

// reset returns to the base configuration, dropping host tools, session
// data and run-time rules. A start-up file that did not load is read
// again: while it stays broken (or the base's files no longer load),
// every call stays refused and the answer is that refusal.
func (e *Engine) reset() []byte {
	// Host tools go; the configuration's come back with the commit.
	left, _ := e.tools.Swap(func(t *toolbox.Tool) bool { return !t.Builtin }, nil)
	e.forgetRemote()
	what := "the defaults"
	if e.start.path != "" {
		what = "CLARA_CONFIG=" + e.start.path
	}
	var err error
	if e.start.broken.Load() && e.start.path != "" {
		err = e.loadBaseFile(e.start.path)
	}
	var base config.Tree
	var more []*toolbox.Tool
	var hostRules []hostRule // the host's rules, released once the reset is in force
	if err == nil {
		more, err = e.changeWith(changeHow{}, func(cur *snapshot) (config.Tree, runtimeRules) {
			base, hostRules = *e.base.Load(), cur.runtime.host
			return base, runtimeRules{}
		}, func() { e.start.broken.Store(false); e.forgetSessions() })
	}
	if err != nil && e.start.onDefaults {
		// CLARA_CONFIG_ON_ERROR=defaults: run without the audit file and
		// the rule files rather than keep a configuration the caller asked
		// to leave.
		e.log.Logf(logging.Error, "reset: %v; without audit file and rule files", err)
		var derr error
		more, derr = e.change(func(cur *snapshot) (config.Tree, runtimeRules) {
			base = config.Merge(*e.base.Load(), config.Tree{"audit": config.Tree{"path": ""}, "rules": config.Tree{"paths": []any{}}, "plugins": config.Tree{"paths": []any{}}})
			hostRules = cur.runtime.host
			return base, runtimeRules{}
		}, e.forgetSessions)
		if derr != nil {
			hostRules = nil // still in force
		}
		err = nil
	}
	if err != nil {
		// The refusal installs no rules: the host's go with the rest.
		hostRules = e.current.Load().runtime.host
		perr := startRefusal(what, err)
		retire(append(left, e.refuse(*e.base.Load(), perr, e.forgetSessions)...))
		retireHostRules(hostRules)
		return protocol.AppendError(nil, nil, perr)
	}
	retire(append(left, more...))
	retireHostRules(hostRules)
	return configEnvelope(config.WithoutOneShots(base))
}

// forgetSessions drops what every session holds in memory.
func (e *Engine) forgetSessions() {
	e.sessions.Reset()
	e.kv.Reset()
	e.out.convs.ForgetAll()
	e.shadowCounts.reset()
}

// configEnvelope is the answer of a configuration change: the whole
// configuration now in force.
func configEnvelope(t config.Tree) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(t); err != nil {
		panic(fmt.Sprintf("encoding the configuration: %v", err))
	}
	result := bytes.TrimRight(buf.Bytes(), "\n")
	env := protocol.Success{Result: []byte(`{"config":` + string(result) + `}`)}
	return env.Append(nil)
}
