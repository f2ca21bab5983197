package core

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/callbacks"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
	"github.com/clara-lib/clara/core/toolbox"
)

// File-change callbacks (SPEC §9): the engine owns one callbacks.Manager,
// keeps its paths in step with the configuration, exposes its tools, fires
// it for tools that report changed_files, and turns background completions
// into notices and on_callback_* events.

// callbackOptions are the Manager's options for a configuration. ok is
// false when callbacks have nowhere to live (state_dir = "").
func (e *Engine) callbackOptions(c *Config) (o callbacks.Options, ok bool) {
	root, err := filepath.Abs(c.ProjectRoot)
	if err != nil {
		root = filepath.Clean(c.ProjectRoot)
	}
	o = callbacks.Options{
		ProjectRoot:  root,
		TestMode:     e.callbackTestMode,
		Log:          e.callbackLog,
		OnBackground: e.callbackDone,
	}
	if c.StateDir == "" {
		return o, false
	}
	o.StateDir = c.StateDir
	if !filepath.IsAbs(o.StateDir) {
		o.StateDir = filepath.Join(root, o.StateDir)
	}
	return o, true
}

// syncCallbacks points the Manager at the configuration's paths.
func (e *Engine) syncCallbacks(c *Config) {
	o, ok := e.callbackOptions(c)
	e.cbMu.Lock()
	defer e.cbMu.Unlock()
	e.cbOn = ok
	if !ok {
		return
	}
	if e.cb == nil {
		e.cb = callbacks.New(o)
	} else if o.ProjectRoot != e.cbRoot || o.StateDir != e.cbDir {
		e.cb.Reconfigure(o)
	}
	e.cbRoot, e.cbDir = o.ProjectRoot, o.StateDir
}

// callbackManager returns the Manager, or an error saying why callbacks
// are off.
func (e *Engine) callbackManager() (*callbacks.Manager, *protocol.Error) {
	e.cbMu.Lock()
	defer e.cbMu.Unlock()
	if !e.cbOn || e.cb == nil {
		return nil, protocol.Errorf(protocol.InvalidArgs, "callbacks are stored under state_dir, which the configuration sets to \"\": set a state_dir to use them")
	}
	return e.cb, nil
}

// callbackTestMode: callbacks are exec (SPEC §9.5): test mode stops them
// unless CLARA_TEST_ALLOW=1.
func (e *Engine) callbackTestMode() bool {
	s := e.cfg.Load()
	return (s.config.TestMode || e.envTestMode) && !e.envTestAllow
}

func (e *Engine) callbackLog(level, msg string) { e.log.Log(logging.MessageLevel(level), msg) }

// callbackDone receives a background run's end: a notice in the worker's
// queue and an on_callback_complete / on_callback_failure event.
func (e *Engine) callbackDone(c callbacks.Completion) {
	defer func() {
		if r := recover(); r != nil {
			e.log.Logf(logging.Error, "panic after callback %q: %v", c.Name, r)
		}
	}()
	e.sessionFor(c.Session).queue([]rules.Notice{{Callback: c.Name, Message: c.Notice, Priority: callbackPriority(c.OK), Event: callbackEvent(c.OK)}})
	e.fireCallbackEvent(context.Background(), &report{}, c)
}

// fireCallbackEvent fires on_callback_complete or on_callback_failure for
// a run, with the payload {"callback": {id, name, ok, exit_code, ...,
// files}}, when a rule watches it.
func (e *Engine) fireCallbackEvent(ctx context.Context, rep *report, c callbacks.Completion) {
	s := e.cfg.Load()
	event := callbackEvent(c.OK)
	if !s.rules.Watches(event) {
		return
	}
	var run map[string]any
	raw, err := json.Marshal(c)
	if err == nil {
		err = json.Unmarshal(raw, &run)
	}
	if err != nil {
		e.log.Logf(logging.Error, "callback %q: event payload: %v", c.Name, err)
		return
	}
	src := e.newEventSource(s, event, c.Session, map[string]any{"callback": run})
	e.fire(ctx, s, rep, src)
	src.release()
}

func callbackEvent(ok bool) string {
	if ok {
		return "on_callback_complete"
	}
	return "on_callback_failure"
}

func callbackPriority(ok bool) string {
	if ok {
		return "normal"
	}
	return "high"
}

// callbackTools are the callback_* tools (SPEC §9.2). They run inline: a
// blocking trigger waits for its callbacks' own timeouts, not the default
// tool deadline.
func (e *Engine) callbackTools() []struct {
	name, description, schema string
	caps                      []string
	run                       toolbox.Func
} {
	wrap := func(f func(m *callbacks.Manager, session string, args []byte) ([]byte, error)) toolbox.Func {
		return func(_ context.Context, call toolbox.Call) ([]byte, error) {
			m, perr := e.callbackManager()
			if perr != nil {
				return nil, perr
			}
			return f(m, strings.Clone(call.Session), call.Arguments) // the Manager may keep the session
		}
	}
	return []struct {
		name, description, schema string
		caps                      []string
		run                       toolbox.Func
	}{
		{"callback_upsert", callbacks.UpsertDescription, callbacks.UpsertSchema, nil, wrap((*callbacks.Manager).Upsert)},
		{"callback_toggle", callbacks.ToggleDescription, callbacks.ToggleSchema, nil, wrap((*callbacks.Manager).Toggle)},
		{"callback_list", callbacks.ListDescription, callbacks.ListSchema, nil, wrap((*callbacks.Manager).List)},
		{"callback_get", callbacks.GetDescription, callbacks.GetSchema, nil, wrap((*callbacks.Manager).Get)},
		{"callback_trigger", callbacks.TriggerDescription, callbacks.TriggerSchema, []string{toolbox.CapExec}, e.toolCallbackTrigger},
	}
}

func (e *Engine) toolCallbackTrigger(ctx context.Context, call toolbox.Call) ([]byte, error) {
	m, perr := e.callbackManager()
	if perr != nil {
		return nil, perr
	}
	files, dry, err := callbacks.ParseTriggerArgs(call.Arguments)
	if err != nil {
		return nil, err
	}
	session := strings.Clone(call.Session) // background runs keep it
	out, err := m.Trigger(ctx, session, files, dry)
	if err != nil {
		return nil, err
	}
	for _, r := range out.Runs {
		if r.StillRunning {
			continue // it reports when it ends, through callbackDone
		}
		// The rules' notices reach the session's queue.
		e.fireCallbackEvent(ctx, &report{}, callbacks.Completion{Session: session, RunResult: r, Files: r.Files})
	}
	return out.JSON(), nil
}

// changedFiles reads a tool result's "changed_files" (SPEC §9.6): an array
// of strings; anything else is ignored with a log line.
func (e *Engine) changedFiles(tool string, result []byte) []string {
	if !bytes.Contains(result, []byte(`"changed_files"`)) {
		return nil // the common case: one scan, no parse
	}
	v := gjson.GetBytes(result, "changed_files")
	if !v.IsArray() {
		if v.Exists() {
			e.log.Logf(logging.Warn, "tool %q: changed_files is not an array; no callbacks fired", tool)
		}
		return nil
	}
	var files []string
	for _, f := range v.Array() {
		if f.Type != gjson.String {
			e.log.Logf(logging.Warn, "tool %q: changed_files holds a non-string; no callbacks fired", tool)
			return nil
		}
		files = append(files, f.String())
	}
	return files
}

// fireCallbacks runs the session's callbacks matching a tool's changed
// files: blocking ones add their results and notices to the call's report.
func (e *Engine) fireCallbacks(ctx context.Context, tool, session string, files []string, rep *report) {
	m, perr := e.callbackManager()
	if perr != nil {
		e.log.Logf(logging.Debug, "tool %q changed %d files; callbacks are off (state_dir is \"\")", tool, len(files))
		return
	}
	session = strings.Clone(session) // borrowed from the request; background runs keep it
	out, err := m.Trigger(ctx, session, files, false)
	if err != nil {
		e.log.Logf(logging.Warn, "tool %q: callbacks: %v", tool, err)
		return
	}
	for _, r := range out.Runs {
		b, err := json.Marshal(r)
		if err != nil {
			continue
		}
		rep.callbacks = append(rep.callbacks, b)
		if r.StillRunning {
			rep.notices = append(rep.notices, rules.Notice{Callback: r.Name, Message: r.Notice, Priority: "low"})
			continue // it reports when it ends, through callbackDone
		}
		rep.notices = append(rep.notices, rules.Notice{Callback: r.Name, Message: r.Notice, Priority: callbackPriority(r.OK), Event: callbackEvent(r.OK)})
		// Blocking runs fire the same events as background ones; the rules'
		// notices join this call's.
		e.fireCallbackEvent(ctx, rep, callbacks.Completion{Session: session, RunResult: r, Files: r.Files})
	}
	for _, b := range out.Background {
		rep.notices = append(rep.notices, rules.Notice{Callback: b.Name, Message: fmt.Sprintf("Callback '%s' activated in background", b.Name), Priority: "low"})
	}
}
