package core

import (
	"bytes"
	"encoding/json"
	"fmt"
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
func (e *Engine) prepare(t config.Tree, runtime runtimeRules) (*prepared, error) {
	c := config.Build(t)
	set, unmatched, plugins, err := e.loadRules(c, runtime)
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

// install prepares and commits t. Called with e.admin held.
func (e *Engine) install(t config.Tree, runtime runtimeRules) ([]*toolbox.Tool, error) {
	p, err := e.prepare(t, runtime)
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
	for attempt := 0; attempt < 3; attempt++ {
		cur := e.current.Load()
		p, err := e.prepare(next(cur))
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
	p, err := e.prepare(next(cur))
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
		return protocol.AppendError(nil, nil, refusal(err, "clara_configure: "))
	}
	e.log.Logf(logging.Info, "configuration changed")
	if name := e.Config().DefaultEvaluator; !e.hasTool(name) {
		// Not an error: the host may register the tool next.
		e.log.Logf(logging.Warn, "default_evaluator %q is not a registered tool (yet): simple-form requests get unknown_tool until it is", name)
	}
	return configEnvelope(tree)
}

// applyChange merges a checked change into the configuration in force and
// installs it, applying its one-shot clear.
func (e *Engine) applyChange(over config.Tree) ([]*toolbox.Tool, config.Tree, error) {
	var clear []string
	left, err := e.change(func(cur *snapshot) (config.Tree, runtimeRules) {
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
	base := config.Merge(config.Defaults(), over)
	kept := config.WithoutOneShots(base)
	left, err := e.change(func(cur *snapshot) (config.Tree, runtimeRules) { return base, cur.runtime },
		func() { e.base.Store(&kept) })
	retire(left)
	if err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	return nil
}

// loadBaseFile reads and applies the start-up file.
func (e *Engine) loadBaseFile(path string) error {
	text, err := fsread.File(path, MaxConfigFile)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return e.SetBase(text, path)
}

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
// data and run-time rules.
func (e *Engine) reset() []byte {
	// Host tools go; the configuration's come back with the commit.
	left, _ := e.tools.Swap(func(t *toolbox.Tool) bool { return !t.Builtin }, nil)
	e.forgetRemote()
	var base config.Tree
	var hostRules []hostRule // the host's rules, released once the reset is in force
	more, err := e.change(func(cur *snapshot) (config.Tree, runtimeRules) {
		base, hostRules = *e.base.Load(), cur.runtime.host
		return base, runtimeRules{}
	}, e.forgetSessions)
	if err != nil {
		// The audit file or rule files on disk may have become unusable;
		// run without them rather than keep a configuration the caller
		// asked to leave.
		e.log.Logf(logging.Error, "reset: %v; without audit file and rule files", err)
		more, err = e.change(func(cur *snapshot) (config.Tree, runtimeRules) {
			base = config.Merge(*e.base.Load(), config.Tree{"audit": config.Tree{"path": ""}, "rules": config.Tree{"paths": []any{}}, "plugins": config.Tree{"paths": []any{}}})
			hostRules = cur.runtime.host
			return base, runtimeRules{}
		}, e.forgetSessions)
	}
	retire(append(left, more...))
	if err == nil {
		retireHostRules(hostRules)
	}
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
