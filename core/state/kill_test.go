//go:build unix

package state_test

import (
	"bufio"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/state"
)

const (
	helperDBEnv    = "CLARA_STATE_HELPER_DB"
	helperStartEnv = "CLARA_STATE_HELPER_START"
)

// TestHelperProcessWriter is the child of TestKilledWriterLosesNoCommit: it
// writes state until it is killed, printing "committed <i>" after each Apply
// that returned.
func TestHelperProcessWriter(t *testing.T) {
	path := os.Getenv(helperDBEnv)
	if path == "" {
		t.Skip("helper process for TestKilledWriterLosesNoCommit")
	}
	start, err := strconv.Atoi(os.Getenv(helperStartEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad start:", err)
		os.Exit(2)
	}
	s, err := state.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	for i := start; i < start+1_000_000; i++ {
		err := s.Apply([]state.Write{
			set("s", fmt.Sprint("k", i), strconv.Itoa(i)),
			set("s", fmt.Sprintf("k%d-obj", i), fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("p", i%300))),
			set("s", "last", strconv.Itoa(i)),
			set(fmt.Sprint("other", i%7), "i", strconv.Itoa(i)),
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "apply:", err)
			os.Exit(2)
		}
		// os.Stdout is unbuffered: the line is in the pipe when this returns.
		if _, err := fmt.Fprintf(os.Stdout, "committed %d\n", i); err != nil {
			os.Exit(3)
		}
	}
	os.Exit(4) // never reached in the test: the parent kills first
}

// TestKilledWriterLosesNoCommit kills a writing process with SIGKILL at
// several points and checks that the database opens, is intact, and holds
// every write the process reported committed (SPEC §7.5, §13 "Files").
func TestKilledWriterLosesNoCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "state", "state.db")
	next := 0
	for round, killAfter := range []int{200, 333, 517} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcessWriter$")
		cmd.Env = append(os.Environ(), helperDBEnv+"="+path, helperStartEnv+"="+strconv.Itoa(next))
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

		committed := map[int]bool{}
		maxI, killed := -1, false
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			rest, ok := strings.CutPrefix(sc.Text(), "committed ")
			if !ok {
				continue // the testing package's own output
			}
			i, err := strconv.Atoi(rest)
			if err != nil {
				t.Fatalf("round %d: bad line %q", round, sc.Text())
			}
			committed[i] = true
			maxI = max(maxI, i)
			if !killed && len(committed) >= killAfter {
				// Keep reading after the kill: lines already in the pipe
				// are commits too.
				if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
		werr := cmd.Wait()
		timer.Stop()
		if !killed || len(committed) < killAfter {
			t.Fatalf("round %d: child stopped after %d commits: %v\n%s", round, len(committed), werr, stderr.String())
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child did not die of SIGKILL: %v\n%s", round, werr, stderr.String())
		}
		for i := next; i <= maxI; i++ {
			if !committed[i] {
				t.Fatalf("round %d: commit %d missing from the child's report", round, i)
			}
		}

		// The database opens and holds every reported commit, this round's
		// and the earlier rounds'.
		s, err := state.Open(path)
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		m, err := s.Scope("s")
		if err != nil {
			t.Fatalf("round %d: Scope: %v", round, err)
		}
		for i := 0; i <= maxI; i++ {
			if m[fmt.Sprint("k", i)] != float64(i) {
				t.Fatalf("round %d: k%d = %v, want %d", round, i, m[fmt.Sprint("k", i)], i)
			}
			if obj, _ := m[fmt.Sprintf("k%d-obj", i)].(map[string]any); obj["i"] != float64(i) || len(obj["pad"].(string)) != i%300 {
				t.Fatalf("round %d: k%d-obj = %v", round, i, obj)
			}
			if got, ok, err := s.Get(fmt.Sprint("other", i%7), "i"); err != nil || !ok {
				t.Fatalf("round %d: other%d: %s %v %v", round, i%7, got, ok, err)
			}
		}
		// The write in flight when the child died may or may not be there,
		// but nothing past it.
		last, _ := m["last"].(float64)
		if int(last) != maxI && int(last) != maxI+1 {
			t.Errorf("round %d: last = %v, reported up to %d", round, m["last"], maxI)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		checkIntegrity(t, path)
		t.Logf("round %d: killed after %d reported commits (up to %d); last in db %v", round, len(committed), maxI, last)
		next = int(last) + 1
	}
}

func checkIntegrity(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil {
		t.Fatal(err)
	}
	if res != "ok" {
		t.Fatalf("integrity_check: %s", res)
	}
}
