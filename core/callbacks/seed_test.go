//go:build unix

package callbacks

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// What issue 14 added for seed 001's fidelity: the seed's environment
// names, on_busy, pass_files, callbacks declared in the configuration.

// waitFor polls cond until it holds; the test fails after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSeedEnvironmentNames(t *testing.T) {
	e := newEnv(t)
	t.Setenv("CP_CALLBACK_NAME", "from-the-host") // replaced, never inherited
	e.create(t, "w", map[string]any{"name": "rust-check", "pattern": "*.rs", "blocking": true, "timeout_secs": 10, "once_per_batch": true,
		"script_content": `printf '%s|%s|%s\n' "$CP_CALLBACK_NAME" "$CP_PROJECT_ROOT" "$(echo "$CP_CHANGED_FILES" | tr '\n' ' ')"`})
	o := e.trigger(t, "w", "src/main.rs", "src/lib.rs")
	want := fmt.Sprintf("rust-check|%[1]s|%[1]s/src/main.rs %[1]s/src/lib.rs ", e.root)
	if len(o.Runs) != 1 || o.Runs[0].OutputTail != want {
		t.Fatalf("%+v\nwant %q", o.Runs, want)
	}
	file, _ := os.ReadFile(filepath.Join(e.state, "scripts", "rust-check.sh"))
	if !strings.Contains(string(file), "CP_CHANGED_FILES, CP_PROJECT_ROOT, CP_CALLBACK_NAME") {
		t.Fatalf("the script's header does not name the seed's variables:\n%s", file)
	}
}

// slowCallback is a one_at_a_time background callback whose runs each
// write "start FILES" to runs, then wait until the file "go" exists.
func slowCallback(t *testing.T, e *env, onBusy string) {
	e.create(t, "w", map[string]any{"name": "slow", "pattern": "*.a", "once_per_batch": true, "one_at_a_time": true, "on_busy": onBusy,
		"script_content": `echo "start $(tr '\n' ' ' < "$CLARA_CHANGED_FILES_LIST")" >> "$CLARA_PROJECT_ROOT/runs"
while [ ! -e "$CLARA_PROJECT_ROOT/go" ]; do sleep 0.01; done`})
}

func (e *env) runsFile() string {
	b, _ := os.ReadFile(filepath.Join(e.root, "runs"))
	return string(b)
}

func TestOnBusySkipDropsTriggersWhileRunning(t *testing.T) {
	e := newEnv(t)
	slowCallback(t, e, "skip")
	if v := call(t, e.m.Get, "w", map[string]any{"id": "slow"}); v["on_busy"] != "skip" || v["pass_files"] != "env" {
		t.Fatalf("definition: %v", v)
	}
	e.trigger(t, "w", "1.a")
	waitFor(t, "the first run", func() bool { return strings.Contains(e.runsFile(), "1.a") })
	o := e.trigger(t, "w", "2.a", "3.a")
	if len(o.Skipped) != 1 || len(o.Background) != 0 || len(o.Skipped[0].Files) != 2 ||
		o.Notices[0] != "Callback 'slow' skipped: a run is already going (on_busy = skip)" {
		t.Fatalf("%+v", o)
	}
	if js := string(o.JSON()); !strings.Contains(js, `"skipped":[{"id":"CB1","name":"slow","files":[`) {
		t.Fatalf("JSON: %s", js)
	}
	e.write(t, "go", "")
	c := <-e.bg
	if !c.OK || len(c.Files) != 1 {
		t.Fatalf("%+v", c)
	}
	// Once the run is over, a trigger runs again.
	waitFor(t, "the slot to be free", func() bool {
		e.m.mu.Lock()
		defer e.m.mu.Unlock()
		return e.m.slots["CB1"] == nil
	})
	e.trigger(t, "w", "4.a")
	if c := <-e.bg; !c.OK || !strings.HasSuffix(c.Files[0], "/4.a") {
		t.Fatalf("%+v", c)
	}
	if got, want := e.runsFile(), fmt.Sprintf("start %[1]s/1.a \nstart %[1]s/4.a \n", e.root); got != want {
		t.Fatalf("runs:\n%s\nwant:\n%s", got, want)
	}
}

func TestOnBusyQueueMergesWhileRunning(t *testing.T) {
	e := newEnv(t)
	slowCallback(t, e, "queue")
	e.trigger(t, "w", "1.a")
	waitFor(t, "the first run", func() bool { return strings.Contains(e.runsFile(), "1.a") })
	for _, o := range []*Outcome{e.trigger(t, "w", "2.a"), e.trigger(t, "w", "2.a", "3.a")} {
		if len(o.Skipped) != 0 || len(o.Background) != 1 {
			t.Fatalf("%+v", o)
		}
	}
	e.write(t, "go", "")
	<-e.bg
	c := <-e.bg
	if got, want := e.runsFile(), fmt.Sprintf("start %[1]s/1.a \nstart %[1]s/2.a %[1]s/3.a \n", e.root); got != want || len(c.Files) != 2 {
		t.Fatalf("runs:\n%s\nwant:\n%s", got, want)
	}
}

func TestOnBusyAndPassFilesAreChecked(t *testing.T) {
	e := newEnv(t)
	if pe := callErr(t, e.m.Upsert, "w", map[string]any{"action": "create", "name": "x", "pattern": "*", "script_content": "true", "on_busy": "restart"}); !strings.Contains(pe.Message, `on_busy must be "queue" or "skip", not "restart"`) {
		t.Fatal(pe.Message)
	}
	if pe := callErr(t, e.m.Upsert, "w", map[string]any{"action": "create", "name": "x", "pattern": "*", "script_content": "true", "pass_files": "argv"}); !strings.Contains(pe.Message, `pass_files must be "env", "args" or "stdin", not "argv"`) {
		t.Fatal(pe.Message)
	}
}

func TestPassFilesArgs(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "fmt", "pattern": "*.go", "blocking": true, "timeout_secs": 10, "once_per_batch": true, "pass_files": "args",
		"script_content": `printf '[%s]' "$#" "$@"`})
	o := e.trigger(t, "w", "a.go", "dir with space/b.go", "c.txt")
	want := fmt.Sprintf("[2][%[1]s/a.go][%[1]s/dir with space/b.go]", e.root)
	if len(o.Runs) != 1 || o.Runs[0].OutputTail != want {
		t.Fatalf("%+v\nwant %q", o.Runs, want)
	}
}

// A batch too long for one command line is split into runs, each under
// argsMax, every file passed once and in order.
func TestPassFilesArgsSplitsLongBatches(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "many", "pattern": "*.go", "blocking": true, "timeout_secs": 30, "once_per_batch": true, "pass_files": "args",
		"script_content": `printf '%s\n' "$@" >> "$CLARA_PROJECT_ROOT/args.out"
echo "$# $CLARA_CHANGED_FILES_COUNT $(printf '%s\n' "$CP_CHANGED_FILES" | wc -l)"`})
	var files []string
	for i := range 3000 {
		files = append(files, fmt.Sprintf("src/a_rather_long_directory_name/and_another/file_%05d.go", i))
	}
	o := e.trigger(t, "w", files...)
	if len(o.Runs) < 2 {
		t.Fatalf("%d runs for %d files", len(o.Runs), len(files))
	}
	total := 0
	for _, r := range o.Runs {
		var n, count, lines int
		fmt.Sscan(r.OutputTail, &n, &count, &lines)
		if !r.OK || n != count || n != lines {
			t.Fatalf("%+v", r)
		}
		size := 0
		for _, f := range r.Files {
			size += len(f) + 1
		}
		if size > argsMax {
			t.Fatalf("a run got %d bytes of arguments", size)
		}
		total += n
	}
	b, _ := os.ReadFile(filepath.Join(e.root, "args.out"))
	if total != len(files) || strings.Count(string(b), "\n") != len(files) || !strings.HasSuffix(string(b), "file_02999.go\n") {
		t.Fatalf("%d files passed, %d lines", total, strings.Count(string(b), "\n"))
	}
}

func TestPassFilesStdin(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "hook", "pattern": "*.py", "blocking": true, "timeout_secs": 10, "once_per_batch": true, "pass_files": "stdin",
		"script_content": `cat > "$CLARA_PROJECT_ROOT/stdin.json"`})
	o := e.trigger(t, "w", "a.py", "b/c.py")
	if len(o.Runs) != 1 || !o.Runs[0].OK {
		t.Fatalf("%+v", o.Runs)
	}
	b, _ := os.ReadFile(filepath.Join(e.root, "stdin.json"))
	want := fmt.Sprintf(`{"callback_id":"CB1","callback_name":"hook","project_root":%q,"changed_files":[%q,%q]}`+"\n",
		e.root, e.root+"/a.py", e.root+"/b/c.py")
	if string(b) != want {
		t.Fatalf("stdin:\n%s\nwant:\n%s", b, want)
	}
	// Without pass_files = "stdin" the script reads nothing there.
	call(t, e.m.Upsert, "w", map[string]any{"action": "update", "id": "hook", "pass_files": "env"})
	e.trigger(t, "w", "a.py")
	if b, _ := os.ReadFile(filepath.Join(e.root, "stdin.json")); len(b) != 0 {
		t.Fatalf("stdin without pass_files: %q", b)
	}
}

func TestConfiguredCallbacks(t *testing.T) {
	e := newEnv(t)
	// Created by the tools before the configuration declared its own
	// "lint": left out while the configuration declares it.
	e.create(t, "w", map[string]any{"name": "lint", "pattern": "*", "script_content": "exit 9"})
	e.create(t, "w", map[string]any{"name": "mine", "pattern": "*.txt", "blocking": true, "timeout_secs": 5, "script_content": "echo mine"})
	defs, err := ParseConfigured([]map[string]any{
		{"name": "lint", "pattern": []any{"*.go", "!vendor/**"}, "blocking": true, "timeout_secs": int64(10), "success_message": "lint clean",
			"run": `echo "lint $CP_CALLBACK_NAME $# $(basename "$1")"`, "pass_files": "args", "once_per_batch": true},
	}, e.root)
	if err != nil {
		t.Fatal(err)
	}
	o := e.options()
	o.Configured = defs
	e.m.Reconfigure(o)

	l := call(t, e.m.List, "other-worker", map[string]any{})
	cbs := l["callbacks"].([]any)
	if len(cbs) != 2 {
		t.Fatalf("%v", l)
	}
	first, second := cbs[0].(map[string]any), cbs[1].(map[string]any)
	if first["id"] != "config:lint" || first["configured"] != true || first["active"] != true || second["name"] != "mine" || second["active"] != false {
		t.Fatalf("%v", cbs)
	}
	o2 := e.trigger(t, "w", "main.go", "vendor/x.go", "notes.txt")
	if len(o2.Runs) != 2 || o2.Runs[0].OutputTail != "lint lint 1 main.go" || o2.Notices[0] != "Callback 'lint' ✓: lint clean" ||
		o2.Runs[1].OutputTail != "mine" {
		t.Fatalf("%+v", o2)
	}
	// Another worker gets the configured one without turning it on.
	if o3 := e.trigger(t, "w2", "x.go", "y.txt"); len(o3.Runs) != 1 || o3.Runs[0].Name != "lint" {
		t.Fatalf("%+v", o3)
	}
	got := call(t, e.m.Get, "w", map[string]any{"id": "config:lint"})
	if got["script"] != `echo "lint $CP_CALLBACK_NAME $# $(basename "$1")"` || got["script_path"] != "" {
		t.Fatalf("%v", got)
	}
	for _, args := range []map[string]any{
		{"action": "create", "name": "lint", "pattern": "*", "script_content": "true"},
		{"action": "update", "id": "lint", "blocking": false},
		{"action": "delete", "id": "config:lint"},
	} {
		if pe := callErr(t, e.m.Upsert, "w", args); !strings.Contains(pe.Message, "configuration") {
			t.Fatalf("%v: %s", args, pe.Message)
		}
	}
	if pe := callErr(t, e.m.Toggle, "w", map[string]any{"id": "lint", "active": false}); !strings.Contains(pe.Message, "declared in the configuration") {
		t.Fatal(pe.Message)
	}
	// Without the declaration, the stored "lint" is back.
	o.Configured = nil
	e.m.Reconfigure(o)
	if o4 := e.trigger(t, "w", "x.go"); len(o4.Background) != 1 || o4.Background[0].ID != "CB1" {
		t.Fatalf("%+v", o4)
	}
	<-e.bg
}

func TestConfiguredCallbacksAreChecked(t *testing.T) {
	root := t.TempDir()
	for _, c := range []struct {
		table map[string]any
		want  string
	}{
		{map[string]any{"pattern": "*", "run": "true"}, "callbacks[0]: name is missing"},
		{map[string]any{"name": "a", "pattern": "*"}, `callbacks[0]: callback "a": run (the script, for bash) is missing`},
		{map[string]any{"name": "a", "run": "true"}, `callbacks[0]: callback "a": pattern is required`},
		{map[string]any{"name": "a", "pattern": "*", "run": "true", "blocking": true}, `callbacks[0]: callback "a": timeout_secs (1..3600) is required for a blocking callback`},
		{map[string]any{"name": "a", "pattern": "*", "run": "true", "script": "x.sh"}, `callbacks[0]: unknown key "script"`},
		{map[string]any{"name": "a", "pattern": "*", "run": "true", "blocking": "yes"}, "callbacks[0]: blocking must be true or false"},
		{map[string]any{"name": "a", "pattern": "*", "run": "true", "cwd": "../out"}, `cwd "../out" leaves the project root`},
		{map[string]any{"name": "A b", "pattern": "*", "run": "true"}, `name "A b" must match`},
		{map[string]any{"name": "a", "pattern": "*", "run": "true", "on_busy": "restart"}, `on_busy must be "queue" or "skip"`},
	} {
		_, err := ParseConfigured([]map[string]any{c.table}, root)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.table, err, c.want)
		}
	}
	two := []map[string]any{{"name": "a", "pattern": "*", "run": "true"}, {"name": "a", "pattern": "*", "run": "true"}}
	if _, err := ParseConfigured(two, root); err == nil || !strings.Contains(err.Error(), `callbacks[1]: callback "a" is declared twice`) {
		t.Errorf("%v", err)
	}
}

// The examples of seed 001, as it gives them: the panel of step 3, the
// matching of step 5, the runs of step 6.
func TestSeedExamples(t *testing.T) {
	e := newEnv(t)
	// Step 3's panel: CB1 rust-check *.rs blocking, CB2 file-length * not.
	e.create(t, "w", map[string]any{"name": "rust-check", "pattern": "*.rs", "blocking": true, "timeout_secs": 60, "script_content": "cargo check"})
	e.create(t, "w", map[string]any{"name": "file-length", "pattern": "*", "script_content": "wc -l $CP_CHANGED_FILES"})
	var panel []string
	for _, c := range call(t, e.m.List, "w", map[string]any{})["callbacks"].([]any) {
		c := c.(map[string]any)
		panel = append(panel, fmt.Sprintf("%s | %s | %s | %v | %v", c["id"], c["name"], c["pattern"].([]any)[0], c["blocking"], c["active"]))
	}
	if want := []string{"CB1 | rust-check | *.rs | true | true", "CB2 | file-length | * | false | true"}; fmt.Sprint(panel) != fmt.Sprint(want) {
		t.Fatalf("%q", panel)
	}
	call(t, e.m.Upsert, "w", map[string]any{"action": "delete", "id": "CB2"})

	// Step 5: `*.rs` matches src/main.rs but not README.md; `src/**/*.ts`
	// matches src/foo/bar.ts but not lib/baz.ts; an inactive callback
	// does not match; several callbacks can match one file.
	e.create(t, "w", map[string]any{"name": "ts", "pattern": "src/**/*.ts", "script_content": "true"})
	e.create(t, "w", map[string]any{"name": "all-src", "pattern": "src/", "script_content": "true"})
	e.create(t, "other", map[string]any{"name": "inactive", "pattern": "*", "script_content": "true"})
	dry := func(files ...string) string {
		o, err := e.m.Trigger(t.Context(), "w", files, true)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, m := range o.Matches {
			for _, f := range m.Files {
				s = append(s, m.Name+":"+strings.TrimPrefix(f, e.root+"/"))
			}
		}
		return strings.Join(s, " ")
	}
	if got, want := dry("src/main.rs", "README.md", "src/foo/bar.ts", "lib/baz.ts"), "rust-check:src/main.rs ts:src/foo/bar.ts all-src:src/main.rs all-src:src/foo/bar.ts"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}

	// Step 6: a background `echo "hello"` succeeds and leaves no log; an
	// `exit 1` fails and its log stays.
	e.create(t, "w", map[string]any{"name": "hello", "pattern": "*.txt", "script_content": `echo "hello"`})
	e.trigger(t, "w", "a.txt")
	if c := <-e.bg; !c.OK || c.Notice != "Callback 'hello' ✓: succeeded in "+(time.Duration(c.DurationMS)*time.Millisecond).String() || c.Log != "" || c.OutputTail != "hello" {
		t.Fatalf("%+v", c)
	}
	call(t, e.m.Upsert, "w", map[string]any{"action": "update", "id": "hello", "script_content": "exit 1"})
	e.trigger(t, "w", "a.txt")
	c := <-e.bg
	if c.OK || c.ExitCode != 1 || c.Log == "" || !strings.HasPrefix(c.Notice, "Callback 'hello' ✗ (exit 1): see "+c.Log) || !fileExists(c.Log) {
		t.Fatalf("%+v", c)
	}
}
