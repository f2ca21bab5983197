package callbacks

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A script's processes that moved to a process group of their own
// (timeout(1) does, so does every job under set -m) stay in the run's
// session and go with it at the timeout.
func TestTimeoutKillsProcessesThatLeftTheGroup(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "escape", "pattern": "*.a", "blocking": true, "timeout_secs": 1, "once_per_batch": true,
		"script_content": `echo $$ > "$CLARA_PROJECT_ROOT/pid"
set -m
sleep 301 &
echo started
timeout 300 sleep 302`})
	o := e.trigger(t, "w", "x.a")
	if r := o.Runs[0]; !r.TimedOut {
		t.Fatalf("%+v", r)
	}
	sid := readPid(t, filepath.Join(e.root, "pid"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		live := sessionMembers(sid, true)
		if len(live) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the run's session outlive it: %v", live)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A callback renamed while a run of it is pending runs under its new name
// (its script moved); one deleted does not run at all.
func TestRenamedOrDeletedBeforeTheRun(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "slow", "pattern": "*.a", "one_at_a_time": true, "once_per_batch": true,
		"script_content": "sleep 0.4; echo ran"})
	e.trigger(t, "w", "1.a") // runs
	e.trigger(t, "w", "2.a") // pending
	time.Sleep(100 * time.Millisecond)
	call(t, e.m.Upsert, "w", map[string]any{"action": "update", "id": "CB1", "name": "slower"})
	for i := range 2 {
		select {
		case c := <-e.bg:
			if !c.OK || c.OutputTail != "ran" {
				t.Fatalf("run %d: %+v", i, c)
			}
			if strings.HasSuffix(c.Files[0], "2.a") && c.Name != "slower" {
				t.Fatalf("the pending run should run as renamed: %+v", c)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no completion")
		}
	}

	e.trigger(t, "w", "3.a") // runs
	e.trigger(t, "w", "4.a") // pending
	time.Sleep(100 * time.Millisecond)
	call(t, e.m.Upsert, "w", map[string]any{"action": "delete", "id": "CB1"})
	var got []Completion
	for range 2 {
		select {
		case c := <-e.bg:
			got = append(got, c)
		case <-time.After(10 * time.Second):
			t.Fatal("no completion")
		}
	}
	// The two completions may arrive in either order: the pending job
	// starts (and ends at once) before the running one reports.
	for _, c := range got {
		pending := len(c.Files) == 1 && strings.HasSuffix(c.Files[0], "4.a")
		if pending && (c.OK || !strings.Contains(c.Error, "deleted")) {
			t.Fatalf("the pending run of a deleted callback must not run: %+v", c)
		}
		if !pending && !c.OK {
			t.Fatalf("the run going on when the callback was deleted ends normally: %+v", c)
		}
	}
}

// A hand-edited callbacks.json whose name would reach outside scripts/ is
// left out: not listed, not run, not deleted through.
func TestInvalidStoredNamesAreLeftOut(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "good", "pattern": "*.a", "blocking": true, "timeout_secs": 5, "script_content": "echo good"})
	path := filepath.Join(e.state, "callbacks.json")
	var doc map[string]any
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(data, &doc)
	evil := map[string]any{"id": "CB7", "name": "../../evil", "pattern": []any{"*.a"}, "blocking": true, "timeout_secs": 5}
	doc["callbacks"] = append(doc["callbacks"].([]any), evil)
	data, _ = json.Marshal(doc)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(filepath.Dir(filepath.Dir(e.state)), "evil.sh")
	os.WriteFile(outside, []byte("#!/bin/sh\ntouch \"$CLARA_PROJECT_ROOT/owned\"\n"), 0o755)
	defer os.Remove(outside)
	list := call(t, e.m.List, "w", map[string]any{})
	if n := len(list["callbacks"].([]any)); n != 1 {
		t.Fatalf("listed %d callbacks: %v", n, list)
	}
	o := e.trigger(t, "w", "x.a")
	if len(o.Runs) != 1 || o.Runs[0].Name != "good" {
		t.Fatalf("%+v", o)
	}
	if _, err := os.Stat(filepath.Join(e.root, "owned")); err == nil {
		t.Fatal("a script outside scripts/ ran")
	}
}

// A callback that keeps failing keeps its newest 20 logs, not all of them.
func TestFailureLogsArePruned(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "fail", "pattern": "*.a", "blocking": true, "timeout_secs": 5, "script_content": "exit 1"})
	e.create(t, "w", map[string]any{"name": "fail-2", "pattern": "*.b", "blocking": true, "timeout_secs": 5, "script_content": "exit 1"})
	e.trigger(t, "w", "x.b")
	for range keptLogs + 3 {
		e.trigger(t, "w", "x.a")
	}
	ents, err := os.ReadDir(filepath.Join(e.state, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	mine, other := 0, 0
	for _, en := range ents {
		if strings.HasPrefix(en.Name(), "fail-2-") {
			other++
		} else if strings.HasPrefix(en.Name(), "fail-") {
			mine++
		}
	}
	if mine != keptLogs || other != 1 {
		t.Fatalf("%d logs of fail (want %d), %d of fail-2 (want 1)", mine, keptLogs, other)
	}
}

// "exit 130" is an exit status, not a signal; a script killed by a signal
// says which.
func TestExitStatusIsNotASignal(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "code", "pattern": "*.a", "blocking": true, "timeout_secs": 5, "script_content": "exit 130"})
	e.create(t, "w", map[string]any{"name": "killed", "pattern": "*.b", "blocking": true, "timeout_secs": 5, "script_content": "kill -TERM $$"})
	o := e.trigger(t, "w", "x.a")
	if !strings.HasPrefix(o.Notices[0], "Callback 'code' ✗ (exit 130): see ") {
		t.Fatalf("notice %q", o.Notices[0])
	}
	o = e.trigger(t, "w", "x.b")
	if !strings.HasPrefix(o.Notices[0], "Callback 'killed' ✗ (exit 143, signal 15): see ") {
		t.Fatalf("notice %q", o.Notices[0])
	}
}

// A path with a newline would be two lines of CLARA_CHANGED_FILES: it
// never matches.
func TestNewlineInAPathNeverMatches(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "n", "pattern": "*.a", "blocking": true, "timeout_secs": 5, "once_per_batch": true,
		"script_content": `echo "$CLARA_CHANGED_FILES_COUNT"`})
	o := e.trigger(t, "w", "x\ny.a", "z.a")
	if len(o.Runs) != 1 || o.Runs[0].OutputTail != "1" {
		t.Fatalf("%+v", o.Runs)
	}
}
