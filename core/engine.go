// Package core is Clara's engine: the wiring of the subsystems and the
// entry points a host calls. It knows nothing of C or CLIPS; capi/ is a thin
// shell that converts C strings to byte slices and back.
//
// The house (docs/development.md has the map): engine.go wires and exports;
// pipeline.go is one tool call (policy, rules, validation, run, audit);
// events.go and emit.go fire rules; rulehost.go is what rules and scripts
// reach; admin.go serves the administrative tools; configure.go installs a
// configuration; callbackhost.go, configtools.go, rulefiles.go and
// statestore.go wire callbacks, configured tools, rule files and state;
// plugins.go finds plugin folders; rulewatch.go runs the rule watcher's
// goroutine (rules.watch), which Close stops.
//
// An Engine is safe for concurrent use. The call path takes no lock: the
// configuration in force and the tool registry are immutable snapshots
// swapped atomically, so a call that started keeps the snapshot it started
// with.
package core

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/clara-lib/clara/core/async"
	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/json5"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/session"
	"github.com/clara-lib/clara/core/telemetry"
	"github.com/clara-lib/clara/core/toolbox"
	"github.com/clara-lib/clara/core/tools"
)

// Engine serves requests. Create it with New.
type Engine struct {
	log      *logging.Logger
	clock    clock
	tools    *toolbox.Registry
	audit    *toolbox.Audit
	kv       *tools.KV
	sessions session.Table
	state    stateStore
	shared   sharedStore // the PostgreSQL store of store.backend = "postgres" (issue 31)
	cb       callbackHost
	async    *async.Table  // calls submitted with clara_submit or "async": true
	tasks    *async.Table  // MCP clients' calls that became tasks (mcptasks.go)
	out      outbound      // the HTTP client and the conversations of chats
	events   eventSink     // the host's event handler (chat progress)
	input    inputHost     // the host's input handler (ask_user)
	mcp      mcpServing    // the MCP server while something serves
	remote   remoteServers // the remote MCP servers of the configuration
	watcher  ruleWatcher   // reloads the rules when their files change (rules.watch)
	docs     docSearchHost // doc_search's index
	env      Options       // TestMode and TestAllow from the environment
	tel      telemetry.T   // traces, metrics, OTLP logs (telemetryhost.go)
	telEnv   telemetryEnv  // what the OTEL_* variables asked for, read once

	current atomic.Pointer[snapshot] // the configuration in force

	// admin serialises what changes the configuration: Configure, Reset,
	// SetBase, rules_load. Nothing on the call path takes it.
	admin       sync.Mutex
	base        atomic.Pointer[config.Tree] // what Reset returns to: defaults plus the start-up file
	configTools []*toolbox.Tool             // registered from [[tools]]; under admin

	defaultSink logging.Sink // the sink SetLogSink(nil) restores
	defaultMin  logging.Level

	// approvals: the host's approver and the calls waiting for a decision
	// (approvals.go); shadowCounts: what rules in shadow mode would have
	// decided, per rule (decisions.go).
	approvals    approvalHost
	shadowCounts shadowCounts
}

// Options configures New. The zero value is valid.
type Options struct {
	Logger    *logging.Logger  // where messages go; nil discards them
	Now       func() time.Time // the clock of calls, audit and get_time; nil is the real clock
	TestMode  bool             // as CLARA_TEST_MODE=1: test mode whatever the configuration says
	TestAllow bool             // as CLARA_TEST_ALLOW=1: tools run even in test mode
	// Getenv reads the environment variables that hold secrets
	// (llm.api_key_env, headers_env), at each use; os.Getenv when nil.
	Getenv func(string) string
	// A Go host's own OpenTelemetry providers: each one given receives
	// what Clara records of its signal, whatever [telemetry] and the
	// OTEL_* variables say (docs/observability.md).
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	LoggerProvider otellog.LoggerProvider
}

// newEngine is an engine with its built-in tools and no configuration in
// force yet (New installs the defaults; Check needs none).
func newEngine(opts Options) *Engine {
	e := &Engine{log: opts.Logger, tools: toolbox.NewRegistry(), kv: tools.NewKV(), env: opts}
	if e.log == nil {
		e.log = &logging.Logger{}
	}
	e.clock.setup(opts.Now)
	e.audit = toolbox.NewAudit(e.log)
	e.state.log = e.log
	e.shared.e = e
	e.cb.engine = e
	e.watcher.e = e
	e.docs.e = e
	e.async = async.New(e.asyncOptions(nil))
	e.tasks = async.New(e.asyncOptions(nil))
	if e.env.Getenv == nil {
		e.env.Getenv = os.Getenv
	}
	e.out = newOutbound(e.log, e.env.Getenv)
	e.state.redact = e.out.secrets.String
	// No secret reaches a log line, whoever writes it.
	e.log.SetFilter(e.out.secrets.String)
	e.setupTelemetry()
	e.registerBuiltins() // first: configured tools may not take their names
	return e
}

// New returns an engine on the default configuration with the built-in
// tools registered.
func New(opts Options) *Engine {
	e := newEngine(opts)
	base := config.Defaults()
	if _, err := e.install(base, runtimeRules{}); err != nil {
		// Rule files found through the default rules.paths do not load:
		// report them and start without them rather than not at all.
		e.log.Logf(logging.Error, "%v; starting without rule files", err)
		base = config.Merge(base, config.Tree{"rules": config.Tree{"paths": []any{}}, "plugins": config.Tree{"paths": []any{}}})
		if _, err := e.install(base, runtimeRules{}); err != nil {
			panic("clara: the default configuration does not install: " + err.Error()) // caught by this package's tests
		}
	}
	e.base.Store(&base)
	e.firePluginEvents(nil, e.current.Load())
	return e
}

func (e *Engine) registerBuiltins() {
	deps := tools.Deps{Now: e.clock.now, Registry: e.tools, Audit: e.audit, KV: e.kv, Sessions: &e.sessions,
		Engine: adminTools{e}, Callbacks: &e.cb, Async: e.async, Models: modelTools{e}, Input: userInput{e}, Docs: &e.docs,
		Approvals: approvalTools{e}}
	for _, b := range tools.All(deps) {
		t, err := b.Tool()
		if err == nil {
			err = e.tools.Register(t)
		}
		if err != nil {
			panic("clara: built-in tool " + b.Name + ": " + err.Error()) // a bug, caught by this package's tests
		}
	}
}

// Config returns the configuration in force. Do not modify it.
func (e *Engine) Config() *config.Config { return e.current.Load().config }

// Logger returns the engine's logger.
func (e *Engine) Logger() *logging.Logger { return e.log }

// Evaluate serves one request and returns the response envelope.
func (e *Engine) Evaluate(req []byte) []byte { return e.AppendEvaluate(nil, req) }

// AppendEvaluate serves one request and appends the response envelope to
// dst (which may be C memory with room for a typical answer). A nil req
// stands for a NULL pointer from C. req is borrowed for the call. It never
// panics: any panic becomes an internal envelope, its details logged.
func (e *Engine) AppendEvaluate(dst, req []byte) (out []byte) {
	mark := len(dst)
	defer e.guard("evaluating a request", func() { out = protocol.AppendError(dst[:mark], nil, protocol.InternalError(nil)) })
	return e.serveRequest(context.Background(), dst, req)
}

// Emit fires an event given as JSON, {"event", "session", "payload",
// "trace"} (SPEC §7.3), and returns the envelope. A nil text stands for a
// NULL pointer from C.
func (e *Engine) Emit(text []byte) []byte { return e.AppendEmit(nil, text) }

// AppendEmit is Emit appending the envelope to dst.
func (e *Engine) AppendEmit(dst, text []byte) (out []byte) {
	mark := len(dst)
	defer e.guard("emit", func() { out = protocol.AppendError(dst[:mark], nil, protocol.InternalError(nil)) })
	return e.serveEmit(context.Background(), dst, text)
}

// Configure applies configuration text (JSON or TOML) on top of the
// configuration in force, entirely or not at all, and returns an envelope
// whose result is the configuration now in force. A nil text stands for a
// NULL pointer from C.
func (e *Engine) Configure(text []byte) (out []byte) {
	defer e.guard("configure", func() { out = protocol.AppendError(nil, nil, protocol.InternalError(nil)) })
	return e.configure(text)
}

// SetBase applies start-up configuration text (the CLARA_CONFIG file) on
// top of the defaults and makes the result what Reset returns to.
func (e *Engine) SetBase(text []byte, source string) error { return e.setBase(text, source) }

// Reset returns to the defaults plus the start-up file and drops every tool
// that is not built in, every session's data and the rules added at run
// time. The envelope's result is the configuration now in force.
func (e *Engine) Reset() (out []byte) {
	defer e.guard("reset", func() { out = protocol.AppendError(nil, nil, protocol.InternalError(nil)) })
	return e.reset()
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

// RegisterTool adds a host tool described by descriptor JSON (SPEC §6.1).
// It replaces a host tool of the same name (which is released once its
// running calls finish) but never a built-in one. On error, opts.OnRelease
// runs before RegisterTool returns: the host never has to guess who frees.
func (e *Engine) RegisterTool(descriptor []byte, opts toolbox.ToolOptions) (err error) {
	defer func() {
		if err != nil && opts.OnRelease != nil {
			opts.OnRelease()
		}
	}()
	d, err := toolbox.ParseDescriptor(descriptor)
	if err != nil && !json.Valid(descriptor) {
		// A descriptor is written by hand: JSON5 (docs/protocol.md).
		text, jerr := e.JSON5(descriptor)
		if jerr != nil {
			if strings.HasSuffix(err.Error(), strings.TrimPrefix(jerr.Error(), "JSON5: ")) {
				return err // the same mistake either way
			}
			return fmt.Errorf("%v (nor %v)", err, jerr)
		}
		d, err = toolbox.ParseDescriptor(text)
	}
	if err != nil {
		return err
	}
	opts.Builtin, opts.Host = false, true
	t, err := toolbox.NewTool(d, opts)
	if err != nil {
		return err
	}
	if err := e.tools.Register(t); err != nil {
		return err
	}
	e.log.Logf(logging.Info, "tool %q registered", d.Name)
	return nil
}

// SetToolLimits changes the limits of a host tool for the calls that
// start from now on (seed 002's AI.TOOL.LIMITS): limits is a JSON (or
// JSON5) object of the limits to change, as in a descriptor. It is a
// host's request of the tool_limits tool, so policy, rules and the audit
// see it as any call.
func (e *Engine) SetToolLimits(name string, limits []byte) *protocol.Error {
	if limits == nil {
		return protocol.Errorf(protocol.InvalidArgs, "tool_limits: no limits")
	}
	if !json.Valid(limits) {
		text, err := e.JSON5(limits)
		if err != nil {
			return protocol.Errorf(protocol.InvalidArgs, "tool_limits: the limits are neither JSON nor %v", err)
		}
		limits = text
	}
	req := append(protocol.AppendString([]byte(`{"tool":"tool_limits","arguments":{"name":`), name), `,"limits":`...)
	req = append(append(req, limits...), "}}"...)
	env := e.Evaluate(req)
	if gjson.GetBytes(env, "status").Str == "success" {
		return nil
	}
	return &protocol.Error{Code: protocol.Code(gjson.GetBytes(env, "error").Str), Message: gjson.GetBytes(env, "message").Str}
}

// JSON5 reads text as JSON5 and returns it as compact JSON, within the
// request limits in force (limits.max_request_bytes, limits.max_depth).
func (e *Engine) JSON5(text []byte) ([]byte, error) {
	lim := e.current.Load().limits
	if lim.MaxRequestBytes > 0 && len(text) > lim.MaxRequestBytes {
		return nil, fmt.Errorf("JSON5: the text is %d bytes, more than limits.max_request_bytes (%d)", len(text), lim.MaxRequestBytes)
	}
	return json5.ToJSON(text, lim.MaxDepth)
}

// UnregisterTool removes a host tool; it is released once its running
// calls finish.
func (e *Engine) UnregisterTool(name string) error {
	if err := e.tools.Unregister(name); err != nil {
		return err
	}
	e.log.Logf(logging.Info, "tool %q unregistered", name)
	return nil
}

// Close stops what the engine runs in the background of its own accord
// (the rule watcher, doc_search's file watcher) and waits for it. The
// engine still serves calls; a configuration change that watches starts
// the rule watcher again, the next doc_search its index.
func (e *Engine) Close() {
	e.watcher.close()
	e.docs.close()
	e.shared.close()
}

// Go runs f on a goroutine of its own that recovers a panic, logs it with
// what names the work, and carries on: nothing Clara starts may take the
// host process down.
func (e *Engine) Go(what string, f func()) {
	go func() {
		defer e.guard(what, nil)
		f()
	}()
}

// guard is deferred at every entry point and in every goroutine: a panic is
// logged with its stack, then onPanic (when not nil) turns it into the
// answer.
func (e *Engine) guard(what string, onPanic func()) {
	if r := recover(); r != nil {
		logging.Panic(e.log, what, r)
		if onPanic != nil {
			onPanic()
		}
	}
}
