package callbacks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clara-lib/clara/core/callbacks/pattern"
	"github.com/clara-lib/clara/core/protocol"
)

// RunResult is one run of a callback's script (or one run test mode
// skipped). JSON: {"id","name","ok","exit_code","timed_out","duration_ms",
// "output_tail","log"} plus, when set, "truncated", "error", "test_mode"
// and "skipped".
type RunResult struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	OK         bool   `json:"ok"`
	ExitCode   int    `json:"exit_code"` // 128+N when killed by signal N; -1 when it could not start
	TimedOut   bool   `json:"timed_out"`
	DurationMS int64  `json:"duration_ms"`
	OutputTail string `json:"output_tail"`         // the last 3 lines of output, "\n"-separated
	Log        string `json:"log"`                 // the kept log (failures only), else ""
	Truncated  bool   `json:"truncated,omitempty"` // the log stopped at 1 MiB
	Error      string `json:"error,omitempty"`     // why it did not start or finish
	TestMode   bool   `json:"test_mode,omitempty"` // test mode: nothing ran
	Skipped    string `json:"skipped,omitempty"`   // test mode: the callback's name

	Files  []string `json:"-"` // the files of the run
	Notice string   `json:"-"` // the §9.5 line for this run
	// StillRunning: the trigger stopped waiting (its context ended) while
	// the run goes on; the run's own result comes through OnBackground.
	// Not a finished run: no on_callback_* event is due for it.
	StillRunning bool   `json:"-"`
	success      string // the definition's success_message
	signal       int    // the signal that killed the script; 0 when it exited
}

// Completion is a background run that finished, for Options.OnBackground:
// the engine makes Notice a notice in Session's queue and emits
// on_callback_complete (OK) or on_callback_failure with the JSON of the
// Completion as payload: {"session","id","name","ok","exit_code",
// "timed_out","duration_ms","output_tail","log","files"} (plus
// "truncated"/"error" when set).
type Completion struct {
	Session string `json:"session"`
	RunResult
	Files  []string `json:"files"`
	Notice string   `json:"-"`
}

// Match is a callback a trigger fired (or would fire, in a dry run) and
// the files it matched: absolute, cleaned, in the order given.
type Match struct {
	ID    string   `json:"id"`
	Name  string   `json:"name"`
	Files []string `json:"files"`
}

// Outcome is what one trigger did.
type Outcome struct {
	DryRun     bool
	Matches    []Match     // dry run: what would fire
	Runs       []RunResult // blocking runs (and runs test mode skipped), in firing order
	Background []Match     // background jobs started (or merged into a pending one)
	Skipped    []Match     // one_at_a_time callbacks already running, on_busy = "skip"
	Refused    []Match     // callbacks whose script a model wrote, which the configuration does not let run
	Notices    []string    // the §9.5 lines, in order
}

// JSON is the callback_trigger result. A dry run:
// {"dry_run":true,"callbacks":[{"id","name","files"}...]}; otherwise
// {"callbacks":[RunResult...],"background":[{"id","name","files"}...],
// "notices":["..."]}, with "skipped":[{"id","name","files"}...] when
// on_busy = "skip" dropped triggers.
func (o *Outcome) JSON() []byte {
	var v any
	if o.DryRun {
		v = struct {
			DryRun    bool    `json:"dry_run"`
			Callbacks []Match `json:"callbacks"`
		}{true, nonNil(o.Matches)}
	} else {
		v = struct {
			Callbacks  []RunResult `json:"callbacks"`
			Background []Match     `json:"background"`
			Skipped    []Match     `json:"skipped,omitempty"`
			Refused    []Match     `json:"not_run,omitempty"`
			Notices    []string    `json:"notices"`
		}{nonNil(o.Runs), nonNil(o.Background), o.Skipped, o.Refused, nonNil(o.Notices)}
	}
	data, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings and numbers
	}
	return data
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ParseTriggerArgs reads callback_trigger's arguments:
// {"changed_files":[...],"dry_run":bool}.
func ParseTriggerArgs(args []byte) (files []string, dryRun bool, err error) {
	var a struct {
		ChangedFiles *[]string `json:"changed_files"`
		DryRun       bool      `json:"dry_run"`
	}
	if err := decodeArgs("callback_trigger", args, &a); err != nil {
		return nil, false, err
	}
	if a.ChangedFiles == nil {
		return nil, false, invalid("callback_trigger: changed_files is required")
	}
	return *a.ChangedFiles, a.DryRun, nil
}

// Trigger fires the callbacks active for the session's worker whose
// patterns match files (absolute, or relative to the project root; paths
// outside the root never match). A dry run only reports the matches.
// Otherwise background callbacks start and blocking ones run, Trigger
// waiting for each at most its timeout_secs (plus the 2 s between SIGTERM
// and SIGKILL). When ctx ends first, Trigger stops waiting: the runs go on
// and their completions come through OnBackground, and their RunResults
// say "error":"cancelled...". This is callback_trigger and what the
// pipeline calls for a tool whose result reports changed_files (§9.6).
func (m *Manager) Trigger(ctx context.Context, session string, files []string, dryRun bool) (*Outcome, error) {
	out := &Outcome{DryRun: dryRun}
	if len(files) == 0 {
		return out, nil
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed && !dryRun {
		return nil, protocol.Errorf(protocol.ToolFailed, "%v", errClosed)
	}
	worker := workerOf(session)
	o := m.options()
	matches, defs, err := m.match(ctx, o, worker, files)
	if err != nil {
		return nil, fmt.Errorf("callback_trigger: %w", err)
	}
	if dryRun {
		out.Matches = matches
		return out, nil
	}
	if !o.RunModelScripts {
		// A script a model wrote runs only where the configuration says so.
		kept, keptDefs := matches[:0], defs[:0]
		for i, mt := range matches {
			if defs[i].ByModel {
				out.Refused = append(out.Refused, mt)
				out.Notices = append(out.Notices, fmt.Sprintf("Callback '%s' not run: a model wrote its script, and callback_tools.run_model_scripts is false", mt.Name))
				continue
			}
			kept, keptDefs = append(kept, mt), append(keptDefs, defs[i])
		}
		matches, defs = kept, keptDefs
	}
	if len(matches) == 0 {
		return out, nil
	}
	if o.TestMode != nil && o.TestMode() {
		for i, mt := range matches {
			n := 1
			switch {
			case !defs[i].OncePerBatch:
				n = len(mt.Files)
			case defs[i].PassFiles == PassFilesArgs:
				n = len(splitArgs(mt.Files)) // the runs there would have been
			}
			for range n {
				r := RunResult{ID: mt.ID, Name: mt.Name, OK: true, TestMode: true, Skipped: mt.Name}
				r.Notice = fmt.Sprintf("Callback '%s' skipped (test mode)", mt.Name)
				out.Runs = append(out.Runs, r)
				out.Notices = append(out.Notices, r.Notice)
			}
		}
		return out, nil
	}
	env := runEnv{root: o.ProjectRoot, stateDir: o.StateDir}
	type wait struct {
		j        *job
		w        *waiter
		id, name string
	}
	var waits []wait
	for i, mt := range matches {
		d := defs[i]
		j, w, err := m.submit(env, d, mt.Files, worker, d.Blocking)
		if errors.Is(err, errBusy) {
			// on_busy = "skip": a run is going; this trigger is dropped.
			m.logf("info", "%s (%s) is running; on_busy = skip drops this trigger of %d files", d.Name, d.ID, len(mt.Files))
			out.Skipped = append(out.Skipped, mt)
			out.Notices = append(out.Notices, fmt.Sprintf("Callback '%s' skipped: a run is already going (on_busy = skip)", d.Name))
			continue
		}
		if err != nil {
			return nil, protocol.Errorf(protocol.ToolFailed, "%v", err)
		}
		if d.Blocking {
			waits = append(waits, wait{j, w, d.ID, d.Name})
		} else {
			out.Background = append(out.Background, mt)
			out.Notices = append(out.Notices, fmt.Sprintf("Callback '%s' activated in background", d.Name))
		}
	}
	for _, wt := range waits {
		select {
		case <-wt.j.done:
			for _, r := range wt.j.results {
				out.Runs = append(out.Runs, r)
				out.Notices = append(out.Notices, r.Notice)
			}
		case <-ctx.Done():
			// Stop waiting; the job reports to this worker in the background.
			m.mu.Lock()
			finished := wt.j.finished
			if !finished {
				wt.w.abandoned = true
			}
			m.mu.Unlock()
			if finished {
				<-wt.j.done
				for _, r := range wt.j.results {
					out.Runs = append(out.Runs, r)
					out.Notices = append(out.Notices, r.Notice)
				}
				continue
			}
			r := RunResult{ID: wt.id, Name: wt.name, ExitCode: -1, StillRunning: true,
				Error: "cancelled while waiting: the run goes on and reports in the background"}
			r.Notice = fmt.Sprintf("Callback '%s' still running: it reports in the background", wt.name)
			out.Runs = append(out.Runs, r)
			out.Notices = append(out.Notices, r.Notice)
		}
	}
	return out, nil
}

// matchDeadline bounds the matching of one trigger, whatever the caller's
// deadline: the work grows with files × patterns.
const matchDeadline = 10 * time.Second

// match returns, for each callback active for worker, in creation order,
// the files it matches (deduplicated, in the order given), with its
// definition. It stops at ctx's end or matchDeadline, with an error.
func (m *Manager) match(ctx context.Context, o *Options, worker string, files []string) ([]Match, []*Definition, error) {
	ctx, cancel := context.WithTimeout(ctx, matchDeadline)
	defer cancel()
	s, err := m.current()
	if err != nil {
		return nil, nil, err
	}
	w, err := m.activeFor(worker)
	if err != nil {
		return nil, nil, err
	}
	var active []*entry
	for _, e := range s.list {
		if w.isActive(e.def) && e.set != nil {
			active = append(active, e)
		}
	}
	if len(active) == 0 {
		return nil, nil, nil
	}
	root := o.ProjectRoot
	type item struct {
		abs string
		p   pattern.Path
	}
	items := make([]item, 0, len(files))
	seen := make(map[string]struct{}, len(files))
	for _, f := range files {
		// A name with a newline cannot be told apart in the newline-
		// separated lists scripts get: such paths never match.
		if f == "" || strings.ContainsRune(f, 0) || strings.ContainsRune(f, '\n') {
			continue
		}
		abs, rel, ok := locate(root, f)
		if !ok {
			continue
		}
		if _, dup := seen[abs]; dup {
			continue
		}
		seen[abs] = struct{}{}
		items = append(items, item{abs, pattern.Prepare(rel)})
	}
	// hits[c][i]: the files of chunk c that callback i matches. Large
	// batches are matched in chunks on several cores; the order of the
	// files is kept.
	chunks := 1
	if work := len(items) * len(active); work >= parallelMatchWork {
		chunks = min(runtime.GOMAXPROCS(0), maxMatchChunks, max(1, len(items)/256))
	}
	hits := make([][][]string, chunks)
	var failed atomic.Bool
	matchChunk := func(c int) {
		defer m.recoverInto("callback matching", func() { failed.Store(true) })
		h := make([][]string, len(active))
		lo, hi := c*len(items)/chunks, (c+1)*len(items)/chunks
		for _, it := range items[lo:hi] {
			if ctx.Err() != nil {
				return
			}
			for i, e := range active {
				if e.set.MatchPath(it.p) {
					h[i] = append(h[i], it.abs)
				}
			}
		}
		hits[c] = h
	}
	if chunks == 1 {
		matchChunk(0)
	} else {
		var wg sync.WaitGroup
		for c := range chunks {
			wg.Go(func() { matchChunk(c) })
		}
		wg.Wait()
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("matching %d files against %d callbacks stopped: %v", len(items), len(active), context.Cause(ctx))
	}
	if failed.Load() {
		return nil, nil, errors.New("matching failed (see the log)")
	}
	var out []Match
	var defs []*Definition
	for i, e := range active {
		var fs []string
		for c := range chunks {
			if fs == nil {
				fs = hits[c][i]
			} else {
				fs = append(fs, hits[c][i]...)
			}
		}
		if len(fs) > 0 {
			out = append(out, Match{ID: e.def.ID, Name: e.def.Name, Files: fs})
			defs = append(defs, e.def)
		}
	}
	return out, defs, nil
}

// Matching goes parallel from this many path×callback tests, on at most
// maxMatchChunks cores.
const (
	parallelMatchWork = 50_000
	maxMatchChunks    = 8
)

// locate returns the absolute (clean) form of a changed path and its
// slash form relative to root; ok is false for a path outside the root
// (or the root itself). Clean paths, the usual case, skip filepath's
// cleaning.
func locate(root, f string) (abs, rel string, ok bool) {
	if len(root) <= 1 {
		// the root "/" (or a bad one): the careful path
	} else if f[0] != '/' {
		if cleanRel(f) {
			return root + "/" + f, f, true
		}
	} else if len(f) > len(root)+1 && f[len(root)] == '/' && f[:len(root)] == root && cleanRel(f[len(root)+1:]) {
		return f, f[len(root)+1:], true
	}
	if !filepath.IsAbs(f) {
		abs = filepath.Join(root, f)
	} else {
		abs = filepath.Clean(f)
	}
	rel, ok = pattern.Relative(root, abs)
	if !ok || rel == "" || rel == "." {
		return "", "", false
	}
	return abs, rel, true
}

// cleanRel reports whether p is a clean relative slash path: no leading or
// trailing '/', no empty, "." or ".." component.
func cleanRel(p string) bool {
	if p == "" || p[0] == '/' || p[len(p)-1] == '/' {
		return false
	}
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			switch p[start:i] {
			case "", ".", "..":
				return false
			}
			start = i + 1
		}
	}
	return true
}

// runEnv is what a run needs of the options it was triggered under.
type runEnv struct {
	root, stateDir string
}

// job is the runs of one callback for one trigger (or for several merged
// triggers, one_at_a_time): one run with every file (once_per_batch) or
// one run per file, in order.
type job struct {
	env     runEnv
	def     Definition
	files   []string
	fileSet map[string]bool
	waiters []*waiter
	done    chan struct{}

	// Under Manager.mu:
	finished bool
	results  []RunResult // set before done is closed
}

// waiter is one trigger interested in a job: blocking (it waits, unless it
// gave up) or background (it gets a Completion).
type waiter struct {
	worker    string
	blocking  bool
	abandoned bool
}

// slot serialises the jobs of a one_at_a_time callback: the running one
// and at most one pending, into which later triggers merge.
type slot struct {
	running, pending *job
}

// submit starts a job for d and files, or merges them into the pending job
// of a one_at_a_time callback that is running.
func (m *Manager) submit(env runEnv, d *Definition, files []string, worker string, blocking bool) (*job, *waiter, error) {
	w := &waiter{worker: worker, blocking: blocking}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, nil, errClosed
	}
	if d.OneAtATime {
		if sl := m.slots[d.ID]; sl != nil {
			if d.OnBusy == OnBusySkip {
				return nil, nil, errBusy
			}
			if sl.pending == nil {
				sl.pending = newJob(env, d)
			}
			j := sl.pending
			j.env, j.def = env, *d // the newest definition runs
			j.add(files)
			j.waiters = append(j.waiters, w)
			return j, w, nil
		}
	}
	j := newJob(env, d)
	j.add(files)
	j.waiters = append(j.waiters, w)
	if d.OneAtATime {
		m.slots[d.ID] = &slot{running: j}
	}
	m.start(j)
	return j, w, nil
}

func newJob(env runEnv, d *Definition) *job {
	return &job{env: env, def: *d, fileSet: map[string]bool{}, done: make(chan struct{})}
}

func (j *job) add(files []string) {
	for _, f := range files {
		if !j.fileSet[f] {
			j.fileSet[f] = true
			j.files = append(j.files, f)
		}
	}
}

// start runs j on a goroutine of its own (m.mu held).
func (m *Manager) start(j *job) {
	m.runs.Add(1)
	m.goSafe("callback "+j.def.ID, func() {
		defer m.runs.Done()
		m.runJob(j)
	})
}

func (m *Manager) runJob(j *job) {
	var results []RunResult
	runOnce := func(files []string) {
		// A panic in a run is that run's failure: the job still finishes,
		// and its waiters hear of it.
		defer m.recoverInto("callback "+j.def.ID, func() {
			r := RunResult{ID: j.def.ID, Name: j.def.Name, ExitCode: -1, Files: files, Error: "internal error (see the log)"}
			r.Notice = r.notice(0)
			results = append(results, r)
		})
		// The callback as it is now: renamed since the trigger, its script
		// moved with it; deleted, nothing runs.
		d, ok := m.currentDef(j.env, &j.def)
		if !ok {
			r := RunResult{ID: j.def.ID, Name: j.def.Name, ExitCode: -1, Files: files, Error: "the callback was deleted before this run started"}
			r.Notice = r.notice(0)
			results = append(results, r)
			return
		}
		results = append(results, m.run(m.baseCtx, j.env, d, files))
	}
	if j.def.OncePerBatch {
		batches := [][]string{j.files}
		if j.def.PassFiles == PassFilesArgs {
			if batches = splitArgs(j.files); len(batches) > 1 {
				m.logf("info", "%s (%s): %d files passed as arguments in %d runs, each under %d KiB of arguments",
					j.def.Name, j.def.ID, len(j.files), len(batches), argsMax>>10)
			}
		}
		for _, b := range batches {
			runOnce(b)
			if m.baseCtx.Err() != nil {
				break
			}
		}
	} else {
		for _, f := range j.files {
			runOnce([]string{f})
			if m.baseCtx.Err() != nil {
				break // closing: the other files are not run
			}
		}
	}

	m.mu.Lock()
	j.finished = true
	j.results = results
	closed := m.closed
	notify := map[string]bool{}
	var order []string
	for _, w := range j.waiters {
		if (!w.blocking || w.abandoned) && !notify[w.worker] {
			notify[w.worker] = true
			order = append(order, w.worker)
		}
	}
	var dropped *job
	if sl := m.slots[j.def.ID]; sl != nil && sl.running == j {
		if sl.pending != nil && !closed {
			sl.running, sl.pending = sl.pending, nil
			m.start(sl.running)
		} else {
			// Closed: the pending job never runs; its waiters hear so.
			if dropped = sl.pending; dropped != nil {
				r := RunResult{ID: dropped.def.ID, Name: dropped.def.Name, ExitCode: -1, Files: dropped.files, Error: errClosed.Error()}
				r.Notice = r.notice(0)
				dropped.finished, dropped.results = true, []RunResult{r}
			}
			delete(m.slots, j.def.ID)
		}
	}
	m.mu.Unlock()
	close(j.done)
	if dropped != nil {
		close(dropped.done)
	}

	cb := m.options().OnBackground
	if closed || cb == nil {
		return
	}
	for _, worker := range order {
		for _, r := range results {
			func() {
				defer m.recoverInto("callbacks: OnBackground", nil)
				cb(Completion{Session: worker, RunResult: r, Files: r.Files, Notice: r.Notice})
			}()
		}
	}
}

// currentDef returns the definition of def's id as stored now, ok false
// when it was deleted. When the file cannot be read, def itself.
func (m *Manager) currentDef(env runEnv, def *Definition) (*Definition, bool) {
	if m.options().StateDir != env.stateDir {
		return def, true // reconfigured since: the run keeps the paths it started with
	}
	s, err := m.current()
	if err != nil {
		return def, true
	}
	e := s.byID[def.ID]
	if e == nil {
		return nil, false
	}
	d := *e.def
	return &d, true
}

// notice is the §9.5 line for a finished run.
func (r *RunResult) notice(timeoutSecs int) string {
	if r.OK {
		msg := r.success
		if msg == "" {
			msg = fmt.Sprintf("succeeded in %s", time.Duration(r.DurationMS)*time.Millisecond)
		}
		return fmt.Sprintf("Callback '%s' ✓: %s", r.Name, msg)
	}
	var why string
	switch {
	case r.TimedOut:
		why = fmt.Sprintf("timed out after %ds", timeoutSecs)
	case r.ExitCode == -1:
		why = "error: " + r.Error
	case r.signal > 0:
		why = fmt.Sprintf("exit %d, signal %d", r.ExitCode, r.signal)
	default:
		why = fmt.Sprintf("exit %d", r.ExitCode)
	}
	s := fmt.Sprintf("Callback '%s' ✗ (%s)", r.Name, why)
	if r.Log != "" {
		s += ": see " + r.Log
	}
	if r.OutputTail != "" {
		s += "\n" + r.OutputTail
	}
	return s
}

// timeAfter is time.After, a variable for nothing but readability.
var timeAfter = time.After

const closeWait = 5 * time.Second
