package core

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

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
	dirs []string // sorted, each once
}

// watchedBy lists the folders of configuration c's rule files (and where
// rules.paths and plugins.paths look for more), of its rules' scripts, of
// rules_load's files and of the plugins. Empty when c watches nothing, and
// when no rule came from a file: an engine without rule files of its own
// runs no watcher.
func watchedBy(c *config.Config, set *rules.Set, runtime runtimeRules, plugins []*plugin) watchList {
	if !c.Rules.Watch || c.StateDir == "" {
		return watchList{}
	}
	fromFiles := len(plugins) > 0 || len(runtime.files) > 0
	for _, r := range set.Rules() {
		fromFiles = fromFiles || filepath.IsAbs(r.File)
	}
	if !fromFiles {
		return watchList{}
	}
	seen := map[string]bool{}
	add := func(dir string) {
		if dir == "" || seen[dir] {
			return
		}
		if info, err := os.Stat(dir); err == nil && info.IsDir() {
			seen[dir] = true
		}
	}
	for _, p := range c.Rules.Paths {
		add(patternBase(c.ProjectRoot, p))
	}
	for _, p := range c.Plugins.Paths {
		add(patternBase(c.ProjectRoot, p))
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
	var out watchList
	for d := range seen {
		out.dirs = append(out.dirs, d)
	}
	sort.Strings(out.dirs)
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
	parts := strings.Split(filepath.ToSlash(filepath.Clean(p)), "/")
	i := 0
	for i < len(parts) && !strings.ContainsAny(parts[i], "*?[") {
		i++
	}
	if i == len(parts) { // one file
		return filepath.Dir(p)
	}
	return filepath.FromSlash(strings.Join(parts[:i], "/"))
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
	e    *Engine
	mu   sync.Mutex
	w    *fsnotify.Watcher // nil when not watching
	dirs map[string]bool
	stop chan struct{}
	done chan struct{}
}

// sync makes the watcher watch what s's rules came from, starting or
// stopping it. Called under e.admin, so it never waits for the goroutine
// (whose reload takes e.admin).
func (rw *ruleWatcher) sync(s *snapshot) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if len(s.watched.dirs) == 0 {
		rw.stopLocked()
		return
	}
	if rw.w == nil {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			rw.e.log.Logf(logging.Warn, "rules.watch: %v; rule files are not watched", err)
			return
		}
		rw.w, rw.dirs = w, map[string]bool{}
		rw.stop, rw.done = make(chan struct{}), make(chan struct{})
		stop, done := rw.stop, rw.done
		rw.e.Go("rule watcher", func() {
			defer close(done)
			defer w.Close()
			timer := time.NewTimer(time.Hour)
			timer.Stop()
			defer timer.Stop()
			debounce(w.Events, w.Errors, stop, realTimer{timer}, rw.e.reloadRules,
				func(err error) { rw.e.log.Logf(logging.Warn, "rules.watch: %v", err) })
		})
	}
	want := map[string]bool{}
	for _, d := range s.watched.dirs {
		want[d] = true
		if !rw.dirs[d] {
			if err := rw.w.Add(d); err != nil {
				rw.e.log.Logf(logging.Warn, "rules.watch: %s: %v", d, err)
				continue
			}
			rw.dirs[d] = true
		}
	}
	for d := range rw.dirs {
		if !want[d] {
			_ = rw.w.Remove(d)
			delete(rw.dirs, d)
		}
	}
}

// stopLocked tells the goroutine to end; it closes the fsnotify watcher
// on its way out.
func (rw *ruleWatcher) stopLocked() {
	if rw.w == nil {
		return
	}
	close(rw.stop)
	rw.w, rw.dirs = nil, nil
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

// debounce waits for changes, lets them settle (each relevant change
// restarts the timer), and reloads once the timer fires, until stop.
func debounce(events <-chan fsnotify.Event, errs <-chan error, stop <-chan struct{}, timer debounceTimer, reload func(), warn func(error)) {
	for {
		select {
		case <-stop:
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if relevant(ev) {
				timer.Reset(reloadDelay) // a later change restarts the wait
			}
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
