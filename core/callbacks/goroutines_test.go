package callbacks

import (
	"context"
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

// The list a script receives (CLARA_CHANGED_FILES_LIST) has no name on
// disk: nothing is left behind, even by a host that exits during a run.
func TestChangedFilesListIsRemoved(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "list", "pattern": "*.a", "blocking": true, "timeout_secs": 10, "once_per_batch": true,
		"script_content": `test -s "$CLARA_CHANGED_FILES_LIST" && test "$(wc -l < "$CLARA_CHANGED_FILES_LIST")" = 2 && ! ls "$TMPDIR"/clara-changed-files-* 2>/dev/null`})
	o := e.trigger(t, "w", "x.a", "y.a")
	if len(o.Runs) == 0 || !o.Runs[0].OK {
		t.Fatalf("%+v", o)
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "clara-changed-files-*"))
	if len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// A trigger's matching ends at its caller's deadline with an error, rather
// than running on for as long as files × patterns take.
func TestMatchingStopsAtTheDeadline(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "deep", "pattern": strings.Repeat("a/**/", 6) + "x", "script_content": "true"})
	files := make([]string, 20000)
	for i := range files {
		files[i] = strings.Repeat("a/", 200) + "y" + strings.Repeat("b", i%50)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	time.Sleep(2 * time.Millisecond)
	if _, err := e.m.Trigger(ctx, "w", files, true); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("%v", err)
	}
}
