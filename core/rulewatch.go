package core

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/fsnotify/fsnotify"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/rules"
)

// Hot reload (rules.watch): the folders of the rule files, Lua scripts and
// plugins in force are watched, and a change there reloads them through
// the same prepare and commit as rules_load, so a request in flight keeps
// the rules it started with and a broken file keeps the rules in force.

// reloadDelay is how long the watcher waits after a change for the next
// one before it reloads: an editor's save (write, rename, chmod) is one
// reload.
const reloadDelay = 150 * time.Millisecond

// watchList is what a snapshot's rules came from: the folders to watch.
type watchList struct {
	dirs []string // sorted, each once: a change to a rule file, script or folder in them reloads
	// parents are watched for the folders of awaited only: the parent of
	// each folder of dirs, so that one deleted and made again (a
	// checkout, rsync --delete) is seen, and the nearest existing folder
	// above one that rules.paths or plugins.paths starts from but that
	// does not exist yet.
	parents []string
	awaited map[string]bool
}

// watchedBy lists the folders of configuration c's rule files (and where
// rules.paths and plugins.paths look for more), of its rules' scripts, of
// rules_load's files and of the plugins, and the folders above them.
// Empty when c watches nothing. An engine left at the default
// project_root (the process's working directory) watches only once a
// rule came from a file: a program that uses Clara without rules does not
// watch the folder it was started in. A project_root the configuration
// names is watched for rule folders even while they are empty or missing.
func watchedBy(c *config.Config, set *rules.Set, runtime runtimeRules, plugins []*plugin) watchList {
	if !c.Rules.Watch || c.StateDir == "" {
		return watchList{}
	}
	watch := len(plugins) > 0 || len(runtime.files) > 0 || filepath.Clean(c.ProjectRoot) != "."
	for _, r := range set.Rules() {
		watch = watch || filepath.IsAbs(r.File)
	}
	if !watch {
		return watchList{}
	}
	out := watchList{awaited: map[string]bool{}}
	seen := map[string]bool{}
	add := func(dir string) {
		if dir == "" || seen[dir] {
			return
		}
		if info, err := os.Stat(dir); err == nil && info.IsDir() {
			seen[dir] = true
		}
	}
	// await watches the nearest existing folder above dir for the one
	// below it on the way to dir.
	parents := map[string]bool{}
	await := func(dir string) {
		for p := filepath.Dir(dir); p != dir; dir, p = p, filepath.Dir(p) {
			if info, err := os.Stat(p); err == nil && info.IsDir() {
				parents[p] = true
				out.awaited[dir] = true
				return
			}
		}
	}
	for _, p := range append(append([]string(nil), c.Rules.Paths...), c.Plugins.Paths...) {
		base := patternBase(c.ProjectRoot, p)
		add(base)
		if base != "" && !seen[base] {
			await(base)
		}
	}
	for _, r := range set.Rules() {
		if filepath.IsAbs(r.File) {
			add(filepath.Dir(r.File))
		}
		for _, s := range r.ScriptFiles() {
			add(filepath.Dir(s))
		}
	}
	for name := range runtime.files {
		add(filepath.Dir(name))
	}
	for _, p := range plugins {
		add(p.dir)
		add(filepath.Join(p.dir, "rules"))
		add(filepath.Join(p.dir, "scripts"))
		add(filepath.Join(p.dir, "tools"))
	}
	for d := range seen {
		out.dirs = append(out.dirs, d)
		// A folder below a watched one is seen coming back by that one.
		if up := filepath.Dir(d); up != d && !seen[up] {
			parents[up] = true
			out.awaited[d] = true
		}
	}
	for p := range parents {
		if !seen[p] {
			out.parents = append(out.parents, p)
		}
	}
	sort.Strings(out.dirs)
	sort.Strings(out.parents)
	return out
}

// patternBase is the folder a glob pattern starts from (the part before
// its first wildcard), absolute.
func patternBase(root, pattern string) string {
	p := filepath.FromSlash(pattern)
	if !filepath.IsAbs(p) {
		abs, err := filepath.Abs(root)
		if err != nil {
			return ""
		}
		p = filepath.Join(abs, p)
	}
	slashed := filepath.ToSlash(filepath.Clean(p))
	if !hasWildcard(slashed) { // one file
		return filepath.Dir(p)
	}
	from, _ := doublestar.SplitPattern(slashed)
	return filepath.FromSlash(from)
}

// relevant reports whether a change to name can change the rules: a rule
// file, a script, a manifest, or a folder (a plugin arriving). Editors'
// swap and backup files are not.
func relevant(ev fsnotify.Event) bool {
	base := filepath.Base(ev.Name)
	if strings.HasPrefix(base, ".") {
		return false
	}
	switch strings.ToLower(filepath.Ext(base)) {
	case ".toml", ".json", ".lua":
		return true
	case "":
		return ev.Has(fsnotify.Create) || ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)
	}
	return false
}

// ruleWatcher runs the watching goroutine while the configuration in
// force watches something.
type ruleWatcher struct {
	e       *Engine
	mu      sync.Mutex
	w       *fsnotify.Watcher // nil when not watching
	dirs    map[string]bool   // watchList.dirs in force
	awaited map[string]bool   // watchList.awaited in force
	stop    chan struct{}
	done    chan struct{}
	rearm   chan struct{} // a folder came to be watched: read again once it settles
}

// sync makes the watcher watch what s's rules came from, starting or
// stopping it. Called under e.admin, so it never waits for the goroutine
// (whose reload takes e.admin). Every folder is added again each time:
// inotify drops the watch of a folder that is deleted, and one made again
// in its place is a new folder. When a folder comes to be watched while
// the watcher runs (it appeared, or came back), the goroutine is told to
// reload once more, for what was written in it before it was watched.
func (rw *ruleWatcher) sync(s *snapshot) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if len(s.watched.dirs) == 0 && len(s.watched.parents) == 0 {
		rw.stopLocked()
		return
	}
	fresh := rw.w == nil
	if fresh {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			rw.e.log.Logf(logging.Warn, "rules.watch: %v; rule files are not watched", err)
			return
		}
		rw.w = w
		rw.stop, rw.done, rw.rearm = make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
		stop, done, rearm := rw.stop, rw.done, rw.rearm
		rw.e.Go("rule watcher", func() {
			defer close(done)
			defer w.Close()
			timer := time.NewTimer(time.Hour)
			timer.Stop()
			defer timer.Stop()
			debounce(w.Events, w.Errors, stop, rearm, realTimer{timer}, rw.wanted, rw.e.reloadRules,
				func(err error) { rw.e.log.Logf(logging.Warn, "rules.watch: %v", err) })
		})
	}
	have := map[string]bool{}
	for _, d := range rw.w.WatchList() {
		have[d] = true
	}
	want := map[string]bool{}
	armed := false
	for _, d := range append(append([]string(nil), s.watched.dirs...), s.watched.parents...) {
		want[d] = true
		if err := rw.w.Add(d); err != nil {
			rw.e.log.Logf(logging.Warn, "rules.watch: %s: %v", d, err)
			continue
		}
		armed = armed || !have[d]
	}
	for d := range have {
		if !want[d] {
			_ = rw.w.Remove(d)
		}
	}
	rw.dirs = map[string]bool{}
	for _, d := range s.watched.dirs {
		rw.dirs[d] = true
	}
	rw.awaited = s.watched.awaited
	if armed && !fresh {
		select {
		case rw.rearm <- struct{}{}:
		default: // one is pending already
		}
	}
}

// wanted reports whether a change can change the rules: a relevant change
// in a watched folder or to it, or a folder awaited appearing or going.
func (rw *ruleWatcher) wanted(ev fsnotify.Event) bool {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.awaited[ev.Name] || rw.dirs[ev.Name] {
		return true
	}
	return rw.dirs[filepath.Dir(ev.Name)] && relevant(ev)
}

// stopLocked tells the goroutine to end; it closes the fsnotify watcher
// on its way out.
func (rw *ruleWatcher) stopLocked() {
	if rw.w == nil {
		return
	}
	close(rw.stop)
	rw.w, rw.dirs, rw.awaited = nil, nil, nil
}

// close stops the watcher and waits for its goroutine.
func (rw *ruleWatcher) close() {
	rw.mu.Lock()
	done := rw.done
	rw.stopLocked()
	rw.mu.Unlock()
	if done != nil {
		<-done
	}
}

// debounce waits for changes, lets them settle (each change wanted, and
// each rearm, restarts the timer), and reloads once the timer fires,
// until stop.
func debounce(events <-chan fsnotify.Event, errs <-chan error, stop <-chan struct{}, rearm <-chan struct{},
	timer debounceTimer, wanted func(fsnotify.Event) bool, reload func(), warn func(error)) {
	for {
		select {
		case <-stop:
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if wanted(ev) {
				timer.Reset(reloadDelay) // a later change restarts the wait
			}
		case <-rearm:
			timer.Reset(reloadDelay)
		case err, ok := <-errs:
			if !ok {
				return
			}
			warn(err)
		case <-timer.C():
			select {
			case <-stop:
				return
			default:
			}
			reload()
		}
	}
}

// debounceTimer is the wait between a change and its reload: a
// time.Timer, or a test's.
type debounceTimer interface {
	Reset(d time.Duration)
	C() <-chan time.Time
}

type realTimer struct{ t *time.Timer }

func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }
func (r realTimer) C() <-chan time.Time   { return r.t.C }

// reloadRules reads the rule files, scripts and plugins of the
// configuration in force again, as rules_load with no argument does, and
// keeps the rules in force when they do not load, logging where.
func (e *Engine) reloadRules() {
	left, err := e.change(func(cur *snapshot) (config.Tree, runtimeRules) {
		rt, err := cur.runtime.reread()
		if err != nil {
			e.log.Logf(logging.Warn, "rules reload: %v (its rules stay as they were read)", err)
		}
		return cur.tree, rt
	}, nil)
	retire(left)
	if err != nil {
		e.log.Logf(logging.Error, "rules reload: %v (the rules in force are unchanged)", err)
		return
	}
	e.log.Logf(logging.Info, "rules reloaded: %d rules", len(e.current.Load().rules.Rules()))
}
