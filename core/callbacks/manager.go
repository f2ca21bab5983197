package callbacks

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/clara-lib/clara/core/callbacks/pattern"
	"github.com/clara-lib/clara/core/protocol"
)

// Options configure a Manager.
type Options struct {
	ProjectRoot string // absolute; changed files and cwd are relative to it
	StateDir    string // absolute; created only when something is stored
	// TestMode reports whether test mode is on (SPEC §6.7), with
	// CLARA_TEST_ALLOW already folded in: when it returns true no script
	// runs. Nil means never.
	TestMode func() bool
	// Log receives the Manager's own messages ("debug", "info", "warn",
	// "error"). Nil discards them.
	Log func(level, msg string)
	// OnBackground is called, on a goroutine of the run, when a background
	// run finishes (not after Close). Nil discards completions.
	OnBackground func(Completion)
	// Go starts the Manager's goroutines: the host's own guarded starter
	// (the engine's, which recovers and logs a panic). Nil: the Manager
	// recovers and logs panics itself.
	Go func(what string, f func())
	// RunModelScripts lets the scripts a model wrote run (ByModel): false
	// keeps them listed but never run (callback_tools.run_model_scripts).
	RunModelScripts bool
	// Configured are the callbacks the configuration declares
	// (ParseConfigured): listed first, active for every worker. A stored
	// callback of the same name is left out while they are.
	Configured []Definition
}

// Definition is one callback (SPEC §9.1). Definitions are global; which
// callbacks are active is stored per worker.
type Definition struct {
	ID             string   `json:"id"`
	Name           string   `json:"name"`
	Description    string   `json:"description"`
	Pattern        []string `json:"pattern"`
	Blocking       bool     `json:"blocking"`
	TimeoutSecs    int      `json:"timeout_secs"`
	SuccessMessage string   `json:"success_message"`
	Cwd            string   `json:"cwd"`
	OneAtATime     bool     `json:"one_at_a_time"`
	OncePerBatch   bool     `json:"once_per_batch"`
	// OnBusy: what a trigger does while a one_at_a_time callback runs:
	// OnBusyQueue (one more run, files merged) or OnBusySkip (nothing).
	OnBusy string `json:"on_busy"`
	// PassFiles: how the script gets its files besides the environment
	// and /dev/fd/3: PassFilesEnv (no more), PassFilesArgs (as its
	// arguments) or PassFilesStdin (a JSON object on its standard input).
	PassFiles string `json:"pass_files"`
	// Configured: declared in the configuration ([[callbacks]]), not
	// stored; its script is run, not a file.
	Configured bool `json:"configured,omitempty"`
	// ByModel: a model (a call made inside a chat, a rule or a tool) wrote
	// the script last; it runs only where the configuration lets such
	// scripts run (Options.RunModelScripts). The host's own edit of the
	// script clears it.
	ByModel bool `json:"by_model,omitempty"`
	run     string
}

// The values of on_busy and pass_files.
const (
	OnBusyQueue    = "queue"
	OnBusySkip     = "skip"
	PassFilesEnv   = "env"
	PassFilesArgs  = "args"
	PassFilesStdin = "stdin"
)

// normalize fills the defaults of fields older files lack.
func (d *Definition) normalize() {
	if d.OnBusy == "" {
		d.OnBusy = OnBusyQueue
	}
	if d.PassFiles == "" {
		d.PassFiles = PassFilesEnv
	}
}

func checkOnBusy(v string) error {
	if v != OnBusyQueue && v != OnBusySkip {
		return fmt.Errorf("on_busy must be %q or %q, not %q", OnBusyQueue, OnBusySkip, v)
	}
	return nil
}

func checkPassFiles(v string) error {
	if v != PassFilesEnv && v != PassFilesArgs && v != PassFilesStdin {
		return fmt.Errorf("pass_files must be %q, %q or %q, not %q", PassFilesEnv, PassFilesArgs, PassFilesStdin, v)
	}
	return nil
}

// Manager holds the callbacks of one project. Its methods are safe for
// concurrent use.
type Manager struct {
	opts atomic.Pointer[Options]

	storeMu sync.Mutex // serialises read-modify-write of the stored files

	mu      sync.Mutex // guards what follows
	defs    *snapshot  // callbacks.json as last read or written
	workers map[string]*workerSnap
	sets    map[string]*pattern.Set // compiled patterns by their joined lines
	slots   map[string]*slot        // one_at_a_time runs by callback id
	closed  bool

	baseCtx context.Context
	cancel  context.CancelFunc
	runs    sync.WaitGroup // background and blocking jobs
	running atomic.Int64   // scripts running now, for the clara.callbacks.running gauge
}

// Running is how many callback scripts are running now.
func (m *Manager) Running() int { return int(m.running.Load()) }

// snapshot is one version of callbacks.json with compiled patterns; it is
// never modified once built.
type snapshot struct {
	dir    string
	st     stamp
	doc    *defsDoc
	byID   map[string]*entry
	byName map[string]*entry
	list   []*entry // in file order
}

type entry struct {
	def *Definition
	set *pattern.Set
}

type workerSnap struct {
	dir    string
	st     stamp
	active map[string]bool
	order  []string
}

// New returns a Manager. Nothing is read or written until it is used.
func New(o Options) *Manager {
	m := &Manager{workers: map[string]*workerSnap{}, sets: map[string]*pattern.Set{}, slots: map[string]*slot{}}
	m.baseCtx, m.cancel = context.WithCancel(context.Background())
	m.Reconfigure(o)
	return m
}

// Reconfigure replaces the options (a configuration reload may move the
// project root or the state directory). Runs in flight finish with the
// paths they started with.
func (m *Manager) Reconfigure(o Options) {
	o.ProjectRoot = filepath.Clean(o.ProjectRoot)
	o.StateDir = filepath.Clean(o.StateDir)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.opts.Store(&o)
	m.defs = nil
	clear(m.workers)
}

func (m *Manager) options() *Options { return m.opts.Load() }

// configured returns the configured callback named (or with the id) key.
func (m *Manager) configured(key string) *Definition {
	for i, d := range m.options().Configured {
		if d.Name == key || d.ID == key {
			return &m.options().Configured[i]
		}
	}
	return nil
}

// isActive: a configured callback is active for every worker; a stored
// one for the workers that turned it on.
func (w *workerSnap) isActive(d *Definition) bool { return d.Configured || w.active[d.ID] }

// goSafe starts f on a goroutine of its own, through Options.Go when the
// host gave one: nothing the package starts may take the host down.
func (m *Manager) goSafe(what string, f func()) {
	if g := m.options().Go; g != nil {
		g(what, f)
		return
	}
	go func() {
		defer m.recoverInto(what, nil)
		f()
	}()
}

// recoverInto is deferred where a panic must not escape: it logs the panic
// with its stack and, when onPanic is not nil, lets it set the answer.
func (m *Manager) recoverInto(what string, onPanic func()) {
	if p := recover(); p != nil {
		m.logf("error", "%s: panic: %v\n%s", what, p, debug.Stack())
		if onPanic != nil {
			onPanic()
		}
	}
}

func (m *Manager) logf(level, format string, args ...any) {
	if l := m.options().Log; l != nil {
		l(level, "callbacks: "+fmt.Sprintf(format, args...))
	}
}

// workerOf is the worker a session stands for.
func workerOf(session string) string {
	if session == "" {
		return protocol.DefaultSession
	}
	return session
}

// current returns the definitions as they are on disk, reading the file
// again only when it changed (another Manager or process wrote it).
func (m *Manager) current() (*snapshot, error) {
	dir := m.options().StateDir
	st, ok, err := statStamp(filepath.Join(dir, defsFile))
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	s := m.defs
	m.mu.Unlock()
	if s != nil && s.dir == dir && (ok && s.st == st || !ok && s.st == stamp{}) {
		return s, nil
	}
	doc, st, err := readDefs(dir)
	if err != nil {
		return nil, err
	}
	return m.install(dir, doc, st)
}

// install builds a snapshot from doc, reusing compiled patterns, and makes
// it current.
func (m *Manager) install(dir string, doc *defsDoc, st stamp) (*snapshot, error) {
	s := &snapshot{dir: dir, st: st, doc: doc, byID: map[string]*entry{}, byName: map[string]*entry{}}
	m.mu.Lock()
	defer m.mu.Unlock()
	used := map[string]*pattern.Set{}
	for _, why := range doc.dropped {
		m.logfLocked("warn", "%s/%s: %s; left out", dir, defsFile, why)
	}
	all := make([]*Definition, 0, len(m.options().Configured)+len(doc.Callbacks))
	declared := map[string]bool{}
	for i := range m.options().Configured {
		d := m.options().Configured[i] // a copy: the snapshot's own
		all = append(all, &d)
		declared[d.Name] = true
	}
	for _, d := range doc.Callbacks {
		if declared[d.Name] {
			m.logfLocked("warn", "callback %q (%s) of %s/%s is left out: the configuration declares a callback of that name", d.Name, d.ID, dir, defsFile)
			continue
		}
		all = append(all, d)
	}
	for _, d := range all {
		key := strings.Join(d.Pattern, "\n")
		set := used[key]
		if set == nil {
			set = m.sets[key]
		}
		if set == nil {
			var err error
			if set, err = pattern.Compile(d.Pattern); err != nil {
				// A pattern that no longer compiles (edited by hand) matches nothing.
				m.logfLocked("warn", "callback %s: pattern: %v", d.Name, err)
				set = nil
			}
		}
		if set != nil {
			used[key] = set
		}
		e := &entry{def: d, set: set}
		s.byID[d.ID] = e
		s.byName[d.Name] = e
		s.list = append(s.list, e)
	}
	m.sets = used
	if m.options().StateDir == dir {
		m.defs = s
	}
	return s, nil
}

func (m *Manager) logfLocked(level, format string, args ...any) {
	if l := m.options().Log; l != nil {
		l(level, "callbacks: "+fmt.Sprintf(format, args...))
	}
}

// activeFor returns the ids active for a worker, reading its file again
// only when it changed.
func (m *Manager) activeFor(worker string) (*workerSnap, error) {
	dir := m.options().StateDir
	path := filepath.Join(dir, workersDir, workerFileName(worker))
	st, ok, err := statStamp(path)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	w := m.workers[worker]
	m.mu.Unlock()
	if w != nil && w.dir == dir && (ok && w.st == st || !ok && w.st == stamp{}) {
		return w, nil
	}
	ids, st, err := readWorker(dir, worker)
	if err != nil {
		return nil, err
	}
	return m.installWorker(dir, worker, ids, st), nil
}

func (m *Manager) installWorker(dir, worker string, ids []string, st stamp) *workerSnap {
	w := &workerSnap{dir: dir, st: st, active: make(map[string]bool, len(ids))}
	for _, id := range ids {
		if !w.active[id] {
			w.active[id] = true
			w.order = append(w.order, id)
		}
	}
	m.mu.Lock()
	if m.options().StateDir == dir {
		if len(m.workers) > 4096 {
			clear(m.workers) // a cache, not a registry
		}
		m.workers[worker] = w
	}
	m.mu.Unlock()
	return w
}

// txn is one read-modify-write of the stored files, under both locks,
// starting from what is on disk.
type txn struct {
	m    *Manager
	dir  string
	lock *storeLock
	doc  *defsDoc
}

func (m *Manager) begin() (*txn, error) {
	m.storeMu.Lock()
	dir := m.options().StateDir
	if !filepath.IsAbs(dir) {
		m.storeMu.Unlock()
		return nil, fmt.Errorf("callbacks: the state directory %q is not absolute", dir)
	}
	l, err := lockStore(dir)
	if err != nil {
		m.storeMu.Unlock()
		return nil, fmt.Errorf("callbacks: %w", err)
	}
	doc, _, err := readDefs(dir)
	if err != nil {
		l.unlock()
		m.storeMu.Unlock()
		return nil, fmt.Errorf("callbacks: %w", err)
	}
	return &txn{m: m, dir: dir, lock: l, doc: doc}, nil
}

func (t *txn) end() {
	t.lock.unlock()
	t.m.storeMu.Unlock()
}

// saveDefs writes callbacks.json and makes it current.
func (t *txn) saveDefs() error {
	data, err := encodeDefs(t.doc)
	if err != nil {
		return err
	}
	path := filepath.Join(t.dir, defsFile)
	if err := writeAtomic(path, data, 0o644); err != nil {
		return err
	}
	st, _, err := statStamp(path)
	if err != nil {
		return err
	}
	_, err = t.m.install(t.dir, t.doc, st)
	return err
}

// setActive turns ids on or off for a worker and writes its file.
func (t *txn) setActive(worker string, on bool, ids ...string) error {
	cur, _, err := readWorker(t.dir, worker)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, d := range t.doc.Callbacks {
		known[d.ID] = true
	}
	change := map[string]bool{}
	for _, id := range ids {
		change[id] = true
	}
	var next []string
	seen := map[string]bool{}
	for _, id := range cur {
		if known[id] && !seen[id] && !(change[id] && !on) {
			next = append(next, id)
			seen[id] = true
		}
	}
	if on {
		for _, id := range ids {
			if known[id] && !seen[id] {
				next = append(next, id)
				seen[id] = true
			}
		}
	}
	data, err := encodeWorker(worker, next)
	if err != nil {
		return err
	}
	path := filepath.Join(t.dir, workersDir, workerFileName(worker))
	if err := writeAtomic(path, data, 0o644); err != nil {
		return err
	}
	st, _, err := statStamp(path)
	if err != nil {
		return err
	}
	t.m.installWorker(t.dir, worker, next, st)
	return nil
}

func (t *txn) find(idOrName string) (int, *Definition) {
	for i, d := range t.doc.Callbacks {
		if d.ID == idOrName || d.Name == idOrName {
			return i, d
		}
	}
	return -1, nil
}

func (t *txn) scriptPath(name string) string { return filepath.Join(t.dir, scriptsDir, name+".sh") }

func idNumber(id string) (int, bool) {
	s, ok := strings.CutPrefix(id, "CB")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}

// Close stops accepting triggers, kills the runs in flight (SIGTERM to
// their process groups, SIGKILL 2 s later) and waits for them, at most
// about 5 s. Completions of runs Close stopped are not reported.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	done := make(chan struct{})
	m.goSafe("callbacks: close", func() { m.runs.Wait(); close(done) })
	select {
	case <-done:
	case <-timeAfter(closeWait):
		m.logf("warn", "close: runs still going after %s", closeWait)
	}
}

var errClosed = errors.New("callbacks: the manager is closed")

// errBusy: a one_at_a_time callback with on_busy = "skip" is running.
var errBusy = errors.New("callbacks: running, and on_busy is skip")
