// Package core is Clara's engine: configuration, the request pipeline and
// the wiring of the subsystems. It knows nothing of C or CLIPS; capi/ is a
// thin shell that converts C strings to byte slices and back.
//
// An Engine is safe for concurrent use. The call path takes no lock: the
// configuration in force and the tool registry are immutable snapshots
// swapped atomically, so a call that started keeps the snapshot it started
// with.
package core

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clara-lib/clara/core/callbacks"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
	"github.com/clara-lib/clara/core/state"
	"github.com/clara-lib/clara/core/toolbox"
	"github.com/clara-lib/clara/core/tools"
)

// The library's version; include/clara.h carries the same numbers.
const (
	Version       = "0.1.0"
	VersionNumber = 1000 // major*1000000 + minor*1000 + patch
)

// Engine serves requests. Create it with New.
type Engine struct {
	log       *logging.Logger
	tools     *toolbox.Registry
	now       func() time.Time
	realClock bool // now is the real clock (fastNow)
	clockBase atomic.Pointer[time.Time]
	audit     *toolbox.Audit
	auditOff  bool // set only by a benchmark, to measure what the audit costs
	kv        *tools.KV

	cfg   atomic.Pointer[settings]
	cfgMu sync.Mutex // serialises Configure, Reset and SetBase
	base  tree       // what Reset returns to: defaults plus the start-up file

	sessions         sync.Map // session name -> *session (rule history, notices)
	defaultSession   *session
	extraRules       []rules.Source  // added by rules_load; under cfgMu
	configTools      []*toolbox.Tool // registered from [[tools]]; under cfgMu
	storeMu          sync.Mutex
	store            *state.Store // the rule state, opened on first use
	storePath        string
	storeOpen        bool
	sessionPolicies  sync.Map    // session name -> *toolbox.Policy
	sessionPolicyMu  sync.Mutex  // serialises narrowing (read-modify-write)
	anySessionPolicy atomic.Bool // false until a session is given a policy

	cbMu   sync.Mutex         // guards what follows
	cb     *callbacks.Manager // file-change callbacks, made when first configured with a state_dir
	cbOn   bool               // the configuration in force has a state_dir
	cbRoot string             // the Manager's paths, to see when they change
	cbDir  string

	envTestMode  bool // CLARA_TEST_MODE=1
	envTestAllow bool // CLARA_TEST_ALLOW=1

	defaultSink logging.Sink // the sink SetLogSink(nil) restores
	defaultMin  logging.Level
}

// settings is one immutable configuration snapshot, with what the call
// path needs precomputed.
type settings struct {
	tree       tree
	config     *Config
	limits     protocol.Limits
	defaults   toolbox.Defaults
	policy     *toolbox.Policy // the configuration's layer
	rules      *rules.Set
	thresholds map[string]any
	host       *ruleHost // what the rules of this configuration reach
	// The rules of the tool pipeline's events, nil when none watch them.
	onToolCall, onToolComplete, onToolFailure *rules.Trigger
}

// Options configures New. The zero value is valid.
type Options struct {
	Logger    *logging.Logger  // where messages go; nil discards them
	Now       func() time.Time // the clock of calls, audit and get_time; nil is time.Now
	TestMode  bool             // as CLARA_TEST_MODE=1: test mode whatever the configuration says
	TestAllow bool             // as CLARA_TEST_ALLOW=1: tools run even in test mode
}

// New returns an engine on the embedded default configuration with the
// built-in tools registered.
func New(opts Options) *Engine {
	e := &Engine{log: opts.Logger, tools: toolbox.NewRegistry(), now: opts.Now, kv: tools.NewKV(),
		envTestMode: opts.TestMode, envTestAllow: opts.TestAllow, defaultSession: &session{}}
	if e.log == nil {
		e.log = &logging.Logger{}
	}
	if e.now == nil {
		e.now, e.realClock = e.fastNow, true
		base := time.Now()
		e.clockBase.Store(&base)
	}
	e.audit = toolbox.NewAudit(e.log)
	e.base = defaultTree()
	e.registerBuiltins() // first: configured tools may not take their names
	if err := e.install(e.base); err != nil {
		// Rule files found through the default rules.paths do not load:
		// report them and start without them rather than not at all.
		e.log.Logf(logging.Error, "%v; starting without rule files", err)
		e.base = merge(e.base, tree{"rules": tree{"paths": []any{}}})
		if err := e.install(e.base); err != nil {
			panic("clara: the default configuration does not install: " + err.Error()) // caught by this package's tests
		}
	}
	return e
}

func (e *Engine) registerBuiltins() {
	list, err := tools.Builtins(tools.Deps{Now: e.now, Registry: e.tools, Audit: e.audit, KV: e.kv, Sessions: e})
	if err == nil {
		var more []*toolbox.Tool
		more, err = e.engineTools()
		list = append(list, more...)
	}
	if err == nil {
		for _, t := range list {
			if err = e.tools.Register(t); err != nil {
				break
			}
		}
	}
	if err != nil {
		panic("clara: built-in tool: " + err.Error()) // a bug in this package, caught by its tests
	}
}

// install makes t the configuration in force. Its only side effect that
// can fail (opening the audit file) happens first, so on error nothing
// changes.
func (e *Engine) install(t tree) error {
	c := build(t)
	set, thresholds, err := e.loadRules(c)
	if err != nil {
		return err
	}
	luaTools, err := e.luaTools(c)
	if err != nil {
		return err
	}
	if err := e.audit.SetFile(c.Audit.Path); err != nil {
		return err
	}
	s := &settings{
		tree: t, config: c,
		limits:     protocol.Limits{MaxRequestBytes: c.Limits.MaxRequestBytes, MaxDepth: c.Limits.MaxDepth},
		defaults:   toolbox.Defaults{TimeoutMS: c.Limits.TimeoutMS, MaxOutputBytes: c.Limits.MaxOutputBytes},
		policy:     toolbox.NewPolicy("the configuration", c.Policy.Allow, c.Policy.Deny),
		rules:      set,
		thresholds: thresholds,
	}
	s.host = &ruleHost{e: e, s: s}
	s.onToolCall, s.onToolComplete, s.onToolFailure = set.Trigger("on_tool_call"), set.Trigger("on_tool_complete"), set.Trigger("on_tool_failure")
	e.cfg.Store(s)
	e.swapConfigTools(luaTools)
	e.syncCallbacks(c)
	return nil
}

// swapConfigTools registers the configuration's tools in place of the
// previous configuration's (those a host has since replaced stay).
func (e *Engine) swapConfigTools(next []*toolbox.Tool) {
	keep := map[string]bool{}
	for _, t := range next {
		keep[t.Name] = true
	}
	for _, old := range e.configTools {
		if cur, ok := e.tools.Lookup(old.Name); ok && cur == old && !keep[old.Name] {
			_ = e.tools.Unregister(old.Name)
		}
	}
	for _, t := range next {
		if err := e.tools.Register(t); err != nil {
			e.log.Logf(logging.Error, "configured tool %q: %v", t.Name, err)
		}
	}
	e.configTools = next
}

// Config returns the configuration in force. Do not modify it.
func (e *Engine) Config() *Config { return e.cfg.Load().config }

// Tools returns the engine's tool registry.
func (e *Engine) Tools() *toolbox.Registry { return e.tools }

// Logger returns the engine's logger.
func (e *Engine) Logger() *logging.Logger { return e.log }

// Audit returns the engine's audit.
func (e *Engine) Audit() *toolbox.Audit { return e.audit }

// Evaluate serves one request and returns the response envelope.
func (e *Engine) Evaluate(req []byte) []byte { return e.AppendEvaluate(nil, req) }

var nullInput = &protocol.Error{Code: protocol.InvalidJSON, Message: "Invalid JSON: NULL input"}

// AppendEvaluate serves one request and appends the response envelope to
// dst. A nil req stands for a NULL pointer from C. It never panics: any
// panic becomes an internal envelope, its details logged.
func (e *Engine) AppendEvaluate(dst, req []byte) []byte { return e.AppendEvaluateFrom(dst, req, 0) }

// AppendEvaluateFrom is AppendEvaluate for a caller that numbers its
// threads (1, 2, ...; 0 for unknown): calls from one thread then keep to
// the same per-thread structures, which matters when threads call at once.
func (e *Engine) AppendEvaluateFrom(dst, req []byte, thread uint32) (out []byte) {
	mark := len(dst)
	defer func() {
		if r := recover(); r != nil {
			e.log.Logf(logging.Error, "panic while evaluating a request: %v\n%s", r, debug.Stack())
			out = protocol.AppendError(dst[:mark], nil, protocol.InternalError(nil))
		}
	}()
	if req == nil {
		return protocol.AppendError(dst, nil, nullInput)
	}
	s := e.cfg.Load()
	r, _, perr := protocol.Parse(req, s.limits, nil)
	if perr != nil {
		return e.fail(dst, nil, "", perr)
	}
	if perr := unsupported(&r); perr != nil {
		return e.fail(dst, r.ID, "", perr)
	}
	name := r.Tool
	if r.Simple {
		name = s.config.DefaultEvaluator
	}
	scope := toolbox.Scope{Config: s.policy, Session: e.sessionPolicy(r.Session)}
	if r.Policy != nil {
		p, err := toolbox.ParsePolicy(r.Policy, "the request")
		if err != nil {
			return e.fail(dst, r.ID, name, protocol.Errorf(protocol.InvalidRequest, "%v", err))
		}
		scope.Request = p
	}
	rep := report{wantTrace: r.Trace}
	result, truncated, perr := e.call(context.Background(), s, name, r.Session, r.Arguments, scope, thread, &rep)
	extras := e.extras(&rep)
	if perr != nil {
		e.logFailure(name, perr)
		return protocol.AppendErrorExtras(dst, r.ID, perr, extras)
	}
	env := protocol.Success{ID: r.ID, Tool: name, Result: result, Truncated: truncated, Extras: extras}
	return env.Append(dst)
}

// extras renders a report's notices and trace for the envelope.
func (e *Engine) extras(rep *report) protocol.Extras {
	var x protocol.Extras
	if len(rep.notices) > 0 {
		x.Notices = rules.AppendNotices(nil, rep.notices)
	}
	if len(rep.callbacks) > 0 {
		x.Callbacks = append(append([]byte{'['}, bytes.Join(rep.callbacks, []byte{','})...), ']')
	}
	if rep.wantTrace {
		x.Trace = rules.AppendTrace(nil, rep.trace)
	}
	return x
}

// unsupported refuses request fields whose subsystems this build does not
// have yet, rather than ignoring them silently.
func unsupported(r *protocol.Request) *protocol.Error {
	if r.Async {
		return protocol.Errorf(protocol.InvalidRequest, "\"async\" is not supported by this version of Clara (%s)", Version)
	}
	return nil
}

// fail writes an error envelope and logs it: internal errors at error level
// with their cause, the others at debug level.
func (e *Engine) fail(dst, id []byte, tool string, perr *protocol.Error) []byte {
	e.logFailure(tool, perr)
	return protocol.AppendError(dst, id, perr)
}

func (e *Engine) logFailure(tool string, perr *protocol.Error) {
	if perr.Code == protocol.Internal {
		e.log.Logf(logging.Error, "internal error in tool %q: %v", tool, perr.Cause)
	} else if e.log.Enabled(logging.Debug) {
		e.log.Logf(logging.Debug, "call of %q failed: %s: %s", tool, perr.Code, perr.Message)
	}
}

// Configure applies configuration text (JSON or TOML) on top of the
// configuration in force, entirely or not at all, and returns an envelope
// whose result is the configuration now in force. A nil text stands for a
// NULL pointer from C.
func (e *Engine) Configure(text []byte) (out []byte) {
	defer e.recoverTo(&out, "configure")
	if text == nil {
		return protocol.AppendError(nil, nil, protocol.Errorf(protocol.InvalidRequest, "clara_configure: NULL input"))
	}
	over, err := parseConfig(text, "clara_configure")
	if err != nil {
		return protocol.AppendError(nil, nil, err.(*ConfigError).protocolError())
	}
	e.cfgMu.Lock()
	defer e.cfgMu.Unlock()
	merged := merge(e.cfg.Load().tree, over)
	if err := e.install(merged); err != nil {
		return protocol.AppendError(nil, nil, protocol.Errorf(protocol.InvalidRequest, "clara_configure: %v", err))
	}
	e.log.Logf(logging.Info, "configuration changed")
	if name := e.Config().DefaultEvaluator; !e.hasTool(name) {
		// Not an error: the host may register the tool next.
		e.log.Logf(logging.Warn, "default_evaluator %q is not a registered tool (yet): simple-form requests get unknown_tool until it is", name)
	}
	return e.configEnvelope(merged)
}

func (e *Engine) hasTool(name string) bool {
	_, ok := e.tools.Lookup(name)
	return ok
}

// SetBase applies start-up configuration text (the CLARA_CONFIG file) on
// top of the embedded defaults and makes the result what Reset returns to.
func (e *Engine) SetBase(text []byte, source string) error {
	over, err := parseConfig(text, source)
	if err != nil {
		return err
	}
	e.cfgMu.Lock()
	defer e.cfgMu.Unlock()
	base := merge(defaultTree(), over)
	if err := e.install(base); err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	e.base = base
	return nil
}

// Reset returns to the embedded defaults plus the start-up file and drops
// every tool that is not built in. The envelope's result is the
// configuration now in force.
func (e *Engine) Reset() (out []byte) {
	defer e.recoverTo(&out, "reset")
	e.cfgMu.Lock()
	defer e.cfgMu.Unlock()
	e.extraRules = nil
	// Host tools go; the configuration's come back with install.
	e.tools.RemoveIf(func(t *toolbox.Tool) bool { return !t.Builtin })
	e.configTools = nil
	if err := e.install(e.base); err != nil {
		// The audit file or rule files on disk may have become unusable;
		// run without them rather than keep a configuration the caller
		// asked to leave.
		e.log.Logf(logging.Error, "reset: %v; without audit file and rule files", err)
		b := merge(e.base, tree{"audit": tree{"path": ""}, "rules": tree{"paths": []any{}}})
		_ = e.install(b)
	}
	e.sessions.Range(func(k, _ any) bool { e.sessions.Delete(k); return true })
	e.defaultSession.clear()
	e.kv.Reset()
	e.sessionPolicyMu.Lock()
	e.sessionPolicies.Range(func(k, _ any) bool { e.sessionPolicies.Delete(k); return true })
	e.anySessionPolicy.Store(false)
	e.sessionPolicyMu.Unlock()
	return e.configEnvelope(e.base)
}

func (e *Engine) configEnvelope(t tree) []byte {
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

func (e *Engine) recoverTo(out *[]byte, what string) {
	if r := recover(); r != nil {
		e.log.Logf(logging.Error, "panic in %s: %v\n%s", what, r, debug.Stack())
		*out = protocol.AppendError(nil, nil, protocol.InternalError(nil))
	}
}

// SetLogSink sends the engine's messages at min and above to sink. A nil
// sink restores the default chosen at start-up (stderr at CLARA_LOG's
// level). When it returns, the previous sink is not running and will not be
// called again.
func (e *Engine) SetLogSink(sink logging.Sink, min logging.Level) {
	if sink == nil {
		e.log.SetSink(e.defaultSink, e.defaultMin)
		return
	}
	e.log.SetSink(sink, min)
}
