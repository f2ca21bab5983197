//go:build unix

package callbacks

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	helperDirEnv   = "CLARA_CALLBACKS_HELPER_DIR"
	helperRoundEnv = "CLARA_CALLBACKS_HELPER_ROUND"
)

// TestHelperProcessUpserter is the child of TestKilledWriterLeavesFilesReadable:
// it creates, edits, renames, toggles and deletes callbacks until it is
// killed, printing "done <i>" after each round of operations.
func TestHelperProcessUpserter(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("helper process for TestKilledWriterLeavesFilesReadable")
	}
	round := os.Getenv(helperRoundEnv)
	m := New(Options{ProjectRoot: filepath.Dir(dir), StateDir: dir})
	do := func(f func(string, []byte) ([]byte, error), session string, args map[string]any) []byte {
		data, _ := json.Marshal(args)
		out, err := f(session, data)
		if err != nil {
			fmt.Fprintln(os.Stderr, "op:", err)
			os.Exit(2)
		}
		return out
	}
	for i := 0; i < 1_000_000; i++ {
		name := fmt.Sprintf("r%s-cb%d", round, i)
		w := fmt.Sprintf("w%d", i%3)
		var created struct{ Callback Definition }
		json.Unmarshal(do(m.Upsert, w, map[string]any{"action": "create", "name": name, "pattern": []string{"*.go", "!vendor/"},
			"blocking": i%2 == 0, "timeout_secs": 10, "script_content": strings.Repeat("echo step\n", 1+i%50) + "echo last\n"}), &created)
		do(m.Upsert, w, map[string]any{"action": "update", "name": name, "old_string": "echo last\n", "new_string": "echo final\n",
			"description": strings.Repeat("d", i%500)})
		do(m.Toggle, fmt.Sprintf("w%d", (i+1)%3), map[string]any{"id": name, "active": true})
		do(m.Upsert, w, map[string]any{"action": "update", "id": created.Callback.ID, "name": name + "-renamed"})
		if i%3 == 2 {
			do(m.Upsert, w, map[string]any{"action": "delete", "name": fmt.Sprintf("r%s-cb%d-renamed", round, i-1)})
		}
		// os.Stdout is unbuffered: the line is in the pipe when this returns.
		if _, err := fmt.Fprintf(os.Stdout, "done %d\n", i); err != nil {
			os.Exit(3)
		}
	}
	os.Exit(4)
}

// TestKilledWriterLeavesFilesReadable kills a process that writes
// callbacks with SIGKILL at random moments and checks, each time, that
// callbacks.json and the worker files parse, that every callback has its
// script, and that a new Manager carries on from there (SPEC §9.3, §13).
func TestKilledWriterLeavesFilesReadable(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := filepath.Join(t.TempDir(), ".clara")
	for round := range 6 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcessUpserter$")
		cmd.Env = append(os.Environ(), helperDirEnv+"="+dir, helperRoundEnv+"="+strconv.Itoa(round))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
		// Kill after a random number of rounds, then a random delay, so the
		// kill lands anywhere in an operation.
		killAfter := 3 + rand.IntN(20)
		done, killed := 0, false
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if !strings.HasPrefix(sc.Text(), "done ") {
				continue
			}
			done++
			if !killed && done >= killAfter {
				time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
				if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
		werr := cmd.Wait()
		timer.Stop()
		if !killed {
			t.Fatalf("round %d: child stopped after %d: %v\n%s", round, done, werr, stderr.String())
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child did not die of SIGKILL: %v\n%s", round, werr, stderr.String())
		}
		checkStore(t, dir, round)
	}
}

func checkStore(t *testing.T, dir string, round int) {
	t.Helper()
	doc := readJSON(t, filepath.Join(dir, "callbacks.json"))
	next := int(doc["next_id"].(float64))
	ids := map[string]bool{}
	for _, c := range doc["callbacks"].([]any) {
		d := c.(map[string]any)
		id, name := d["id"].(string), d["name"].(string)
		n, ok := idNumber(id)
		if !ok || n >= next || ids[id] {
			t.Fatalf("round %d: id %s (next %d) bad or repeated", round, id, next)
		}
		ids[id] = true
		text, err := os.ReadFile(filepath.Join(dir, "scripts", name+".sh"))
		if err != nil {
			t.Fatalf("round %d: %s has no script: %v", round, name, err)
		}
		if !strings.HasPrefix(string(text), "#!/usr/bin/env bash\n") || !strings.Contains(string(text), "echo step\n") {
			t.Fatalf("round %d: script of %s:\n%s", round, name, text)
		}
	}
	ents, err := os.ReadDir(filepath.Join(dir, "workers"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue // a temporary file the killed writer left; the next writer removes it
		}
		readJSON(t, filepath.Join(dir, "workers", e.Name()))
	}
	// A new Manager reads it all and can write again.
	m := New(Options{ProjectRoot: filepath.Dir(dir), StateDir: dir})
	defer m.Close()
	var v struct{ Callbacks []listed }
	out, err := m.List("w0", nil)
	if err != nil {
		t.Fatalf("round %d: list: %v", round, err)
	}
	json.Unmarshal(out, &v)
	if len(v.Callbacks) != len(ids) {
		t.Fatalf("round %d: list has %d, file %d", round, len(v.Callbacks), len(ids))
	}
	t.Logf("round %d: %d callbacks, next id %d", round, len(ids), next)
}
