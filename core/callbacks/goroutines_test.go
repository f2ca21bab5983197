package callbacks

import (
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every goroutine the Manager starts goes through Options.Go when the host
// gives one, and a panic in the host's completion callback neither takes
// the process down nor stops the Manager.
func TestGoroutinesAreGuarded(t *testing.T) {
	e := newEnv(t)
	var started atomic.Int64
	var logMu sync.Mutex
	var logged strings.Builder
	o := e.options()
	o.Go = func(what string, f func()) {
		started.Add(1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("a panic reached the host's starter (%s): %v", what, p)
				}
			}()
			f()
		}()
	}
	o.Log = func(level, msg string) {
		logMu.Lock()
		logged.WriteString(level + " " + msg + "\n")
		logMu.Unlock()
	}
	calls := 0
	o.OnBackground = func(c Completion) {
		calls++
		if calls == 1 {
			panic("the host's completion handler broke")
		}
		e.bg <- c
	}
	e.m.Reconfigure(o)
	e.create(t, "w", map[string]any{"name": "bg", "pattern": "*.a", "once_per_batch": true, "script_content": "true"})
	e.trigger(t, "w", "x.a")
	deadline := time.Now().Add(10 * time.Second)
	for {
		logMu.Lock()
		text := logged.String()
		logMu.Unlock()
		if strings.Contains(text, "panic: the host's completion handler broke") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the panic was not logged:\n%s", text)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The Manager goes on: the next run completes and is reported.
	e.trigger(t, "w", "y.a")
	select {
	case c := <-e.bg:
		if !c.OK {
			t.Fatalf("%+v", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no completion after the panic")
	}
	if started.Load() == 0 {
		t.Fatal("Options.Go was never used")
	}
}

// The list file a script receives (CLARA_CHANGED_FILES_LIST) is removed
// once the run ends.
func TestChangedFilesListIsRemoved(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "list", "pattern": "*.a", "blocking": true, "timeout_secs": 10,
		"script_content": `test -s "$CLARA_CHANGED_FILES_LIST"`})
	o := e.trigger(t, "w", "x.a", "y.a")
	if len(o.Runs) == 0 || !o.Runs[0].OK {
		t.Fatalf("%+v", o)
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "clara-changed-files-*"))
	if len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}
