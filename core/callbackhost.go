package core

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/callbacks"
	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
	"github.com/clara-lib/clara/core/tools"
)

// File-change callbacks (SPEC §9): the engine owns one callbacks.Manager,
// keeps its paths in step with the configuration, serves the callback_*
// tools with it, fires it for tools that report changed_files, and turns
// background completions into notices and on_callback_* events.

// callbackHost holds the Manager.
type callbackHost struct {
	engine *Engine
	mu     sync.Mutex         // guards what follows
	mgr    *callbacks.Manager // made when first configured with a state_dir
	on     bool               // the configuration in force has a state_dir
	root   string             // the Manager's paths, to see when they change
	dir    string
	decl   string // the [[callbacks]] tables in force, as JSON, to see when they change
	models bool   // callback_tools.run_model_scripts in force

	lastMu sync.Mutex
	last   map[string]map[string]lastRun // by session, then callback name: the panel's last results
}

// lastRun is a callback's last result in a session, for the panel.
type lastRun struct {
	ok       bool
	exitCode int
	timedOut bool
	at       time.Time
}

// maxPanelSessions bounds the sessions whose last results are kept.
const maxPanelSessions = 1024

// modelCallbackTools are the tools callback_tools.models offers to models:
// seed 001's Callback_upsert, Callback_toggle and its panel's reads.
var modelCallbackTools = map[string]bool{"callback_upsert": true, "callback_toggle": true, "callback_list": true, "callback_get": true}

// admin reports whether t is administrative under configuration s: the
// callback tools are not once callback_tools.models offers them.
func (s *snapshot) admin(t *toolbox.Tool) bool {
	return t.Admin && !(s.config.CallbackTools.Models && modelCallbackTools[t.Name])
}

// configuredCallbacks reads the configuration's [[callbacks]] tables.
func configuredCallbacks(c *config.Config) ([]callbacks.Definition, error) {
	if len(c.Callbacks) == 0 {
		return nil, nil
	}
	defs, err := callbacks.ParseConfigured(c.Callbacks, projectRoot(c))
	if err != nil {
		return nil, protocol.Errorf(protocol.InvalidArgs, "configuration: %v", err)
	}
	return defs, nil
}

func projectRoot(c *config.Config) string {
	root, err := filepath.Abs(c.ProjectRoot)
	if err != nil {
		return filepath.Clean(c.ProjectRoot)
	}
	return root
}

var _ tools.Callbacks = (*callbackHost)(nil)

// options are the Manager's options for a configuration. ok is false when
// callbacks have nowhere to live (state_dir = "").
func (h *callbackHost) options(c *config.Config) (o callbacks.Options, ok bool) {
	e := h.engine
	root := projectRoot(c)
	o = callbacks.Options{
		ProjectRoot:  root,
		TestMode:     func() bool { return e.testMode(e.current.Load()) },
		Log:          func(level, msg string) { e.log.Log(logging.MessageLevel(level), msg) },
		OnBackground: h.done,
		Go:           e.Go,
	}
	if c.StateDir == "" {
		return o, false
	}
	// prepare checked the tables: an error here cannot happen.
	if defs, err := configuredCallbacks(c); err == nil {
		o.Configured = defs
	} else {
		e.log.Logf(logging.Error, "callbacks: %v", err)
	}
	o.RunModelScripts = c.CallbackTools.RunModelScripts
	o.StateDir = c.StateDir
	if !filepath.IsAbs(o.StateDir) {
		o.StateDir = filepath.Join(root, o.StateDir)
	}
	return o, true
}

// sync points the Manager at the configuration's paths.
func (h *callbackHost) sync(c *config.Config) {
	o, ok := h.options(c)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.on = ok
	if !ok {
		return
	}
	decl, _ := json.Marshal(c.Callbacks)
	if h.mgr == nil {
		h.mgr = callbacks.New(o)
	} else if o.ProjectRoot != h.root || o.StateDir != h.dir || string(decl) != h.decl || o.RunModelScripts != h.models {
		h.mgr.Reconfigure(o)
	}
	h.root, h.dir, h.decl, h.models = o.ProjectRoot, o.StateDir, string(decl), o.RunModelScripts
}

// running is how many callback scripts are running now (0 before any
// configuration made the Manager).
func (h *callbackHost) running() int {
	h.mu.Lock()
	m := h.mgr
	h.mu.Unlock()
	if m == nil {
		return 0
	}
	return m.Running()
}

// manager returns the Manager, or an error saying why callbacks are off.
func (h *callbackHost) manager() (*callbacks.Manager, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.on || h.mgr == nil {
		return nil, protocol.Errorf(protocol.InvalidArgs, "callbacks are stored under state_dir, which the configuration sets to \"\": set a state_dir to use them")
	}
	return h.mgr, nil
}

// The callback_* tools.

// Upsert serves callback_upsert: a script written by a call made inside
// another (a model's, a rule's, a tool's) is the model's (ByModel).
func (h *callbackHost) Upsert(ctx context.Context, session string, args []byte) ([]byte, error) {
	byModel := scopeOf(ctx).depth > 0
	return h.with(func(m *callbacks.Manager) ([]byte, error) { return m.UpsertBy(session, args, byModel) })
}

func (h *callbackHost) Toggle(session string, args []byte) ([]byte, error) {
	return h.with(func(m *callbacks.Manager) ([]byte, error) { return m.Toggle(session, args) })
}

func (h *callbackHost) List(session string, args []byte) ([]byte, error) {
	return h.with(func(m *callbacks.Manager) ([]byte, error) { return m.List(session, args) })
}

func (h *callbackHost) Get(session string, args []byte) ([]byte, error) {
	return h.with(func(m *callbacks.Manager) ([]byte, error) { return m.Get(session, args) })
}

func (h *callbackHost) with(f func(*callbacks.Manager) ([]byte, error)) ([]byte, error) {
	m, err := h.manager()
	if err != nil {
		return nil, err
	}
	return f(m)
}

// Trigger serves callback_trigger: the matching callbacks of the session
// run (or, with dry_run, are listed); runs that ended fire their
// on_callback_* events now, background ones when they end.
func (h *callbackHost) Trigger(ctx context.Context, session string, args []byte) ([]byte, error) {
	m, err := h.manager()
	if err != nil {
		return nil, err
	}
	files, dry, err := callbacks.ParseTriggerArgs(args)
	if err != nil {
		return nil, err
	}
	out, err := m.Trigger(ctx, session, files, dry)
	if err != nil {
		return nil, err
	}
	h.refused(session, out, nil)
	for _, r := range out.Runs {
		if r.StillRunning {
			continue // it reports when it ends, through done
		}
		h.record(session, r)
		// The rules' notices reach the session's queue.
		h.fireEvent(ctx, &report{}, callbacks.Completion{Session: session, RunResult: r, Files: r.Files})
	}
	return out.JSON(), nil
}

// done receives a background run's end: a notice in the worker's queue and
// an on_callback_complete / on_callback_failure event.
func (h *callbackHost) done(c callbacks.Completion) {
	e := h.engine
	defer e.guard("the completion of callback "+c.Name, nil)
	h.record(c.Session, c.RunResult)
	e.sessions.Get(c.Session).Queue([]protocol.Notice{{Callback: c.Name, Message: c.Notice, Priority: callbackPriority(c.OK), Event: callbackEvent(c.OK)}})
	h.fireEvent(context.Background(), &report{}, c)
}

// fireEvent fires on_callback_complete or on_callback_failure for a run,
// with the payload {"callback": {id, name, ok, exit_code, ..., files}},
// when a rule watches it.
func (h *callbackHost) fireEvent(ctx context.Context, rep *report, c callbacks.Completion) {
	e := h.engine
	s := e.current.Load()
	event := callbackEvent(c.OK)
	if !s.rules.Watches(event) {
		e.sessions.Release(c.Session, event)
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
	e.fire(withEmissionBudget(ctx, s), s, rep, src)
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

// changedFiles reads a tool result's "changed_files" (SPEC §9.6): an array
// of strings; anything else is ignored with a log line. Only for tools
// whose descriptor says reports_changed_files.
func (e *Engine) changedFiles(tool string, result []byte) []string {
	// The common case: no such key, found without a parse. The scan looks
	// for '_' first: bytes.Index skips to its pattern's first byte, and a
	// '"' would stop it at every string of the result (a quarter of a
	// microsecond on a result of 5 short fields).
	if !bytes.Contains(result, []byte(`_files"`)) || !bytes.Contains(result, []byte(`"changed_files"`)) {
		return nil
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

// fire runs the session's callbacks matching a tool's changed files:
// blocking ones add their results and notices to the call's report.
func (h *callbackHost) fire(ctx context.Context, tool, session string, files []string, rep *report) {
	e := h.engine
	m, err := h.manager()
	if err != nil {
		e.log.Logf(logging.Debug, "tool %q changed %d files; callbacks are off (state_dir is \"\")", tool, len(files))
		return
	}
	out, err := m.Trigger(ctx, session, files, false)
	if err != nil {
		e.log.Logf(logging.Warn, "tool %q: callbacks: %v", tool, err)
		return
	}
	e.callbackSpans(ctx, out.Runs)
	for _, r := range out.Runs {
		b, err := json.Marshal(r)
		if err != nil {
			continue
		}
		rep.callbacks = append(rep.callbacks, b)
		if r.StillRunning {
			rep.notices = append(rep.notices, protocol.Notice{Callback: r.Name, Message: r.Notice, Priority: "low"})
			continue // it reports when it ends, through done
		}
		h.record(session, r)
		rep.notices = append(rep.notices, protocol.Notice{Callback: r.Name, Message: r.Notice, Priority: callbackPriority(r.OK), Event: callbackEvent(r.OK)})
		// Blocking runs fire the same events as background ones; the rules'
		// notices join this call's.
		h.fireEvent(ctx, rep, callbacks.Completion{Session: session, RunResult: r, Files: r.Files})
	}
	for _, b := range out.Background {
		rep.notices = append(rep.notices, protocol.Notice{Callback: b.Name, Message: fmt.Sprintf("Callback '%s' activated in background", b.Name), Priority: "low"})
	}
	for _, b := range out.Skipped {
		rep.notices = append(rep.notices, protocol.Notice{Callback: b.Name, Message: fmt.Sprintf("Callback '%s' skipped: a run is already going (on_busy = skip)", b.Name), Priority: "low"})
	}
	h.refused(session, out, rep)
}

// refused records the callbacks a trigger did not run because a model
// wrote their scripts: in the panel, and as notices of the call (rep).
func (h *callbackHost) refused(session string, out *callbacks.Outcome, rep *report) {
	for _, b := range out.Refused {
		h.record(session, callbacks.RunResult{Name: b.Name, ExitCode: -1, Skipped: "not run: a model wrote its script"})
		if rep != nil {
			rep.notices = append(rep.notices, protocol.Notice{Callback: b.Name, Priority: "normal",
				Message: fmt.Sprintf("Callback '%s' not run: a model wrote its script, and callback_tools.run_model_scripts is false", b.Name)})
		}
	}
}

// record keeps a run's outcome as its callback's last result in session.
func (h *callbackHost) record(session string, r callbacks.RunResult) {
	h.lastMu.Lock()
	defer h.lastMu.Unlock()
	if h.last == nil {
		h.last = map[string]map[string]lastRun{}
	}
	runs := h.last[session]
	if runs == nil {
		if len(h.last) >= maxPanelSessions {
			for k := range h.last { // forget one: the panel is a summary, not a record
				delete(h.last, k)
				break
			}
		}
		runs = map[string]lastRun{}
		h.last[strings.Clone(session)] = runs
	}
	runs[r.Name] = lastRun{ok: r.OK && r.Skipped == "", exitCode: r.ExitCode, timedOut: r.TimedOut, at: time.Now()}
}

// panel is seed 001's callbacks panel as a chat's model sees it at each
// turn: the callbacks of the session, whether each is active, its
// pattern and whether it blocks, and its last result; at most max bytes.
// "" when callbacks are off or there are none.
func (h *callbackHost) panel(session string, max int) string {
	if max <= 0 {
		return ""
	}
	m, err := h.manager()
	if err != nil {
		return ""
	}
	raw, err := m.List(session, nil)
	if err != nil {
		return ""
	}
	var list struct {
		Callbacks []struct {
			ID, Name string
			Pattern  []string
			Blocking bool
			Active   bool
			ByModel  bool `json:"by_model"`
		}
	}
	if json.Unmarshal(raw, &list) != nil || len(list.Callbacks) == 0 {
		return ""
	}
	h.lastMu.Lock()
	runs := h.last[session]
	h.lastMu.Unlock()
	var b strings.Builder
	b.WriteString("Callbacks (scripts run when files matching their pattern change; manage them with callback_upsert and callback_toggle):\n")
	b.WriteString("ID | Name | Pattern | Blocking | Active | Last result\n")
	for i, c := range list.Callbacks {
		line := fmt.Sprintf("%s | %s | %s | %s | %s | %s\n", c.ID, c.Name, strings.Join(c.Pattern, " "), yesNo(c.Blocking), yesNo(c.Active), lastResult(runs, c.Name, c.ByModel, h.models))
		if b.Len()+len(line) > max {
			fmt.Fprintf(&b, "… %d more (callback_list)\n", len(list.Callbacks)-i)
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

func lastResult(runs map[string]lastRun, name string, byModel, modelScriptsRun bool) string {
	r, ok := runs[name]
	switch {
	case byModel && !modelScriptsRun:
		return "not run: a model wrote its script (callback_tools.run_model_scripts is false)"
	case !ok:
		return "not run yet"
	case r.ok:
		return "✓ passed " + r.at.UTC().Format(time.RFC3339)
	case r.timedOut:
		return "✗ timed out " + r.at.UTC().Format(time.RFC3339)
	case r.exitCode == -1:
		return "✗ did not run " + r.at.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("✗ exit %d %s", r.exitCode, r.at.UTC().Format(time.RFC3339))
}

// callbackBatch gathers the files changed by the tool calls of one batch
// (the calls a model asked for in one turn of a chat, SPEC §9.6): the
// session's callbacks fire once for all of them when the batch ends, so
// once_per_batch means once per turn, as in the seed.
type callbackBatch struct {
	mu    sync.Mutex
	files map[string][]string // by session
	order []string            // sessions in the order they first changed files
}

type callbackBatchKey struct{}

// withCallbackBatch makes the calls made under ctx add their changed files
// to b instead of firing the callbacks at once.
func withCallbackBatch(ctx context.Context, b *callbackBatch) context.Context {
	return context.WithValue(ctx, callbackBatchKey{}, b)
}

func callbackBatchOf(ctx context.Context) *callbackBatch {
	b, _ := ctx.Value(callbackBatchKey{}).(*callbackBatch)
	return b
}

func (b *callbackBatch) add(session string, files []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.files == nil {
		b.files = map[string][]string{}
	}
	if _, ok := b.files[session]; !ok {
		b.order = append(b.order, session)
	}
	b.files[session] = append(b.files[session], files...)
}

// take empties the batch, returning what it held. The calls of a batch
// run at once and finish in any order: each session's files are sorted,
// so that a script sees the same list whatever the order was.
func (b *callbackBatch) take() (order []string, files map[string][]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	order, files = b.order, b.files
	b.order, b.files = nil, nil
	for _, fs := range files {
		sort.Strings(fs)
	}
	return order, files
}

// fireBatch fires the callbacks for the files a batch gathered, once per
// session, and returns the notices of the runs (blocking ones finished,
// background ones started). what names the batch in the log.
func (h *callbackHost) fireBatch(ctx context.Context, what string, b *callbackBatch) []protocol.Notice {
	order, files := b.take()
	var notices []protocol.Notice
	for _, session := range order {
		rep := &report{}
		h.fire(ctx, what, session, files[session], rep)
		notices = append(notices, rep.notices...)
	}
	return notices
}
