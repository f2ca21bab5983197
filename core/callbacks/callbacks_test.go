//go:build unix

package callbacks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/protocol"
)

type env struct {
	t     *testing.T
	root  string
	state string
	m     *Manager
	bg    chan Completion
	test  bool
	mu    sync.Mutex
}

func newEnv(t testing.TB) *env {
	t.Helper()
	root := t.TempDir()
	e := &env{root: root, state: filepath.Join(root, ".clara"), bg: make(chan Completion, 1000)}
	if tt, ok := t.(*testing.T); ok {
		e.t = tt
	}
	e.m = New(e.options())
	t.Cleanup(e.m.Close)
	return e
}

func (e *env) options() Options {
	return Options{
		ProjectRoot:  e.root,
		StateDir:     e.state,
		TestMode:     func() bool { e.mu.Lock(); defer e.mu.Unlock(); return e.test },
		OnBackground: func(c Completion) { e.bg <- c },
	}
}

// call runs a tool function and decodes its JSON result.
func call(t testing.TB, f func(string, []byte) ([]byte, error), session string, args any) map[string]any {
	t.Helper()
	data, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	out, err := f(session, data)
	if err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("result %s: %v", out, err)
	}
	return v
}

func callErr(t testing.TB, f func(string, []byte) ([]byte, error), session string, args any) *protocol.Error {
	t.Helper()
	data, _ := json.Marshal(args)
	out, err := f(session, data)
	if err == nil {
		t.Fatalf("%s: no error, result %s", data, out)
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("%s: error %v is not a protocol error", data, err)
	}
	return pe
}

func (e *env) create(t testing.TB, session string, args map[string]any) string {
	t.Helper()
	args["action"] = "create"
	v := call(t, e.m.Upsert, session, args)
	return v["callback"].(map[string]any)["id"].(string)
}

func (e *env) trigger(t testing.TB, session string, files ...string) *Outcome {
	t.Helper()
	o, err := e.m.Trigger(context.Background(), session, files, false)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (e *env) write(t testing.TB, rel, content string) string {
	t.Helper()
	p := filepath.Join(e.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readJSON(t testing.TB, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
	return v
}

func TestLifecycle(t *testing.T) {
	e := newEnv(t)
	if _, err := os.Stat(e.state); !os.IsNotExist(err) {
		t.Fatalf("state dir exists before anything is stored: %v", err)
	}
	// Reading with nothing stored is fine and creates nothing.
	if v := call(t, e.m.List, "w1", map[string]any{}); len(v["callbacks"].([]any)) != 0 {
		t.Fatalf("list: %v", v)
	}
	if o, err := e.m.Trigger(context.Background(), "w1", []string{"a.go"}, false); err != nil || len(o.Runs) != 0 {
		t.Fatalf("trigger: %v %v", o, err)
	}
	if _, err := os.Stat(e.state); !os.IsNotExist(err) {
		t.Fatalf("state dir created by reading: %v", err)
	}

	v := call(t, e.m.Upsert, "w1", map[string]any{"action": "create", "name": "go-check", "description": "checks",
		"pattern": "*.go", "blocking": true, "timeout_secs": 30, "success_message": "Build passed",
		"script_content": "echo checking\necho one two\n"})
	if v["action"] != "created" {
		t.Fatalf("create: %v", v)
	}
	cb := v["callback"].(map[string]any)
	if cb["id"] != "CB1" || cb["name"] != "go-check" || cb["active"] != true || cb["blocking"] != true ||
		cb["timeout_secs"] != 30.0 || fmt.Sprint(cb["pattern"]) != "[*.go]" {
		t.Fatalf("create: %v", cb)
	}
	script := filepath.Join(e.state, "scripts", "go-check.sh")
	if v["script_path"] != script {
		t.Fatalf("script_path %v", v["script_path"])
	}
	st, err := os.Stat(script)
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("script: %v %v", st, err)
	}
	text, _ := os.ReadFile(script)
	if !strings.HasPrefix(string(text), "#!/usr/bin/env bash\nset -euo pipefail\n") ||
		!strings.Contains(string(text), "CLARA_CHANGED_FILES_LIST") || !strings.HasSuffix(string(text), "echo checking\necho one two\n") {
		t.Fatalf("script text:\n%s", text)
	}

	// Another worker sees it, inactive; toggling is per worker.
	v = call(t, e.m.List, "w2", map[string]any{})
	if cbs := v["callbacks"].([]any); len(cbs) != 1 || cbs[0].(map[string]any)["active"] != false || v["worker"] != "w2" {
		t.Fatalf("list w2: %v", v)
	}
	if o := e.trigger(t, "w2", "main.go"); len(o.Runs) != 0 {
		t.Fatalf("inactive callback ran: %+v", o)
	}
	o := e.trigger(t, "w1", "main.go")
	if len(o.Runs) != 1 || !o.Runs[0].OK || o.Runs[0].OutputTail != "checking\none two" {
		t.Fatalf("run: %+v", o)
	}
	if o.Notices[0] != "Callback 'go-check' ✓: Build passed" {
		t.Fatalf("notice %q", o.Notices[0])
	}

	// Update: replace the script.
	v = call(t, e.m.Upsert, "w1", map[string]any{"action": "update", "id": "CB1", "script_content": "echo v2 alpha\nexit 0"})
	if v["action"] != "updated" || v["callback"].(map[string]any)["success_message"] != "Build passed" {
		t.Fatalf("update: %v", v)
	}
	v = call(t, e.m.Get, "w1", map[string]any{"id": "CB1"})
	if v["script"] != "echo v2 alpha\nexit 0\n" || v["active"] != true || v["script_path"] != script {
		t.Fatalf("get: %v", v)
	}
	// An old_string -> new_string edit, by name.
	call(t, e.m.Upsert, "w1", map[string]any{"action": "update", "name": "go-check", "old_string": "alpha", "new_string": "beta"})
	if v = call(t, e.m.Get, "w1", map[string]any{"id": "go-check"}); v["script"] != "echo v2 beta\nexit 0\n" {
		t.Fatalf("edit: %v", v["script"])
	}
	// Fields: only those given change.
	call(t, e.m.Upsert, "w1", map[string]any{"action": "update", "id": "CB1", "pattern": []string{"*.go", "!gen/**"}, "timeout_secs": 5})
	v = call(t, e.m.Get, "w1", map[string]any{"id": "CB1"})
	if fmt.Sprint(v["pattern"]) != "[*.go !gen/**]" || v["timeout_secs"] != 5.0 || v["description"] != "checks" {
		t.Fatalf("update fields: %v", v)
	}
	if o := e.trigger(t, "w1", "gen/x.go", "cmd/y.go"); len(o.Runs) != 1 || o.Runs[0].OutputTail != "v2 beta" ||
		len(o.Runs[0].Files) != 1 || o.Runs[0].Files[0] != filepath.Join(e.root, "cmd/y.go") {
		t.Fatalf("after pattern change: %+v", o)
	}
	// Rename moves the script.
	v = call(t, e.m.Upsert, "w1", map[string]any{"action": "update", "id": "CB1", "name": "go-vet"})
	newScript := filepath.Join(e.state, "scripts", "go-vet.sh")
	if v["script_path"] != newScript || v["callback"].(map[string]any)["name"] != "go-vet" {
		t.Fatalf("rename: %v", v)
	}
	if _, err := os.Stat(script); !os.IsNotExist(err) {
		t.Fatalf("old script still there: %v", err)
	}
	if text, _ := os.ReadFile(newScript); !strings.Contains(string(text), `"go-vet"`) || !strings.HasSuffix(string(text), "echo v2 beta\nexit 0\n") {
		t.Fatalf("renamed script:\n%s", text)
	}

	// Toggle off and on.
	if v = call(t, e.m.Toggle, "w1", map[string]any{"id": "CB1", "active": false}); v["active"] != false || v["name"] != "go-vet" {
		t.Fatalf("toggle: %v", v)
	}
	if o := e.trigger(t, "w1", "main.go"); len(o.Runs) != 0 {
		t.Fatalf("ran while off: %+v", o)
	}
	call(t, e.m.Toggle, "w2", map[string]any{"id": "go-vet", "active": true})

	// A second callback, then a restart: a new Manager on the same dir.
	e.create(t, "w1", map[string]any{"name": "bg", "pattern": []string{"docs/"}, "script_content": "true"})
	m2 := New(e.options())
	defer m2.Close()
	v = call(t, m2.List, "w1", map[string]any{})
	cbs := v["callbacks"].([]any)
	if len(cbs) != 2 || cbs[0].(map[string]any)["name"] != "go-vet" || cbs[0].(map[string]any)["active"] != false ||
		cbs[1].(map[string]any)["id"] != "CB2" || cbs[1].(map[string]any)["active"] != true {
		t.Fatalf("after restart, w1: %v", v)
	}
	v = call(t, m2.List, "w2", map[string]any{})
	if cbs := v["callbacks"].([]any); cbs[0].(map[string]any)["active"] != true || cbs[1].(map[string]any)["active"] != false {
		t.Fatalf("after restart, w2: %v", v)
	}
	if o, err := m2.Trigger(context.Background(), "w2", []string{"main.go"}, false); err != nil || len(o.Runs) != 1 || !o.Runs[0].OK {
		t.Fatalf("after restart, run: %+v %v", o, err)
	}
	// The first Manager sees what the second writes.
	call(t, m2.Toggle, "w1", map[string]any{"id": "CB1", "active": true})
	if o := e.trigger(t, "w1", "main.go"); len(o.Runs) != 1 {
		t.Fatalf("first manager did not see the toggle: %+v", o)
	}

	// Delete: the script goes, the id is never given again.
	v = call(t, m2.Upsert, "w1", map[string]any{"action": "delete", "id": "CB1"})
	if v["action"] != "deleted" || v["id"] != "CB1" || v["name"] != "go-vet" {
		t.Fatalf("delete: %v", v)
	}
	if _, err := os.Stat(newScript); !os.IsNotExist(err) {
		t.Fatalf("script survives delete: %v", err)
	}
	if id := e.create(t, "w1", map[string]any{"name": "go-vet", "pattern": "*.go", "script_content": "true"}); id != "CB3" {
		t.Fatalf("id after delete: %s", id)
	}
	call(t, e.m.Upsert, "w1", map[string]any{"action": "delete", "id": "CB3"})
	call(t, e.m.Upsert, "w1", map[string]any{"action": "delete", "id": "CB2"})
	if id := e.create(t, "w1", map[string]any{"name": "x", "pattern": "*.go", "script_content": "true"}); id != "CB4" {
		t.Fatalf("id after deleting all: %s", id)
	}
	doc := readJSON(t, filepath.Join(e.state, "callbacks.json"))
	if doc["next_id"] != 5.0 || len(doc["callbacks"].([]any)) != 1 {
		t.Fatalf("callbacks.json: %v", doc)
	}
	w := readJSON(t, filepath.Join(e.state, "workers", "w1.json"))
	if fmt.Sprint(w["active"]) != "[CB4]" || w["worker"] != "w1" {
		t.Fatalf("worker file: %v", w)
	}
}

func TestValidation(t *testing.T) {
	e := newEnv(t)
	if err := os.Symlink("/", filepath.Join(e.root, "out")); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(e.root, "sub"), 0o755)
	base := func(kv ...any) map[string]any {
		a := map[string]any{"action": "create", "name": "ok", "pattern": "*.go", "script_content": "true"}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(a, kv[i].(string))
			} else {
				a[kv[i].(string)] = kv[i+1]
			}
		}
		return a
	}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{base("name", "Bad"), "name"},
		{base("name", "-x"), "name"},
		{base("name", "../x"), "name"},
		{base("name", strings.Repeat("a", 65)), "name"},
		{base("name", nil), "name is required"},
		{base("blocking", true), "timeout_secs"},
		{base("blocking", true, "timeout_secs", 0), "timeout_secs"},
		{base("blocking", true, "timeout_secs", 3601), "timeout_secs"},
		{base("cwd", "/tmp"), "absolute"},
		{base("cwd", "../x"), "leaves"},
		{base("cwd", "sub/../../x"), "leaves"},
		{base("cwd", "out"), "outside"},
		{base("cwd", "out/tmp/new"), "outside"},
		{base("pattern", nil), "pattern"},
		{base("pattern", []string{}), "pattern"},
		{base("pattern", 3), "pattern"},
		{base("script_content", nil), "script_content is required"},
		{base("id", "CB9"), "id"},
		{base("bogus", 1), "bogus"},
		{base("action", "upsert"), "action"},
		{map[string]any{"name": "x"}, "action is required"},
	} {
		pe := callErr(t, e.m.Upsert, "w", c.args)
		if pe.Code != protocol.InvalidArgs || !strings.Contains(pe.Message, c.want) {
			t.Errorf("%v: %s %q, want invalid_args mentioning %q", c.args, pe.Code, pe.Message, c.want)
		}
	}
	if fileExists(e.state) {
		t.Fatalf("a refused create stored something")
	}
	e.create(t, "w", base("cwd", "sub/new/deeper"))
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{base(), "exists"},
		{map[string]any{"action": "update", "id": "CB1", "old_string": "nope", "new_string": "x"}, "not found"},
		{map[string]any{"action": "update", "id": "CB1", "script_content": "a a a"}, ""},
		{map[string]any{"action": "update", "id": "CB1", "old_string": "a", "new_string": "b"}, "occurs 3 times"},
		{map[string]any{"action": "update", "id": "CB1", "old_string": "a"}, "together"},
		{map[string]any{"action": "update", "id": "CB1", "blocking": true}, "timeout_secs"},
		{map[string]any{"action": "update", "id": "CB7"}, "no callback"},
		{map[string]any{"action": "update"}, "id"},
		{map[string]any{"action": "delete", "id": "CB7"}, "no callback"},
		{map[string]any{"action": "update", "id": "CB1", "cwd": "../.."}, "leaves"},
	} {
		if c.want == "" {
			call(t, e.m.Upsert, "w", c.args)
			continue
		}
		pe := callErr(t, e.m.Upsert, "w", c.args)
		if pe.Code != protocol.InvalidArgs || !strings.Contains(pe.Message, c.want) {
			t.Errorf("%v: %s %q, want invalid_args mentioning %q", c.args, pe.Code, pe.Message, c.want)
		}
	}
	e.create(t, "w", base("name", "two"))
	pe := callErr(t, e.m.Upsert, "w", map[string]any{"action": "update", "id": "CB1", "name": "two"})
	if !strings.Contains(pe.Message, "exists") {
		t.Errorf("rename onto another: %v", pe)
	}
	for _, c := range []struct {
		f    func(string, []byte) ([]byte, error)
		args map[string]any
	}{
		{e.m.Toggle, map[string]any{"id": "CB1"}},
		{e.m.Toggle, map[string]any{"id": "nope", "active": true}},
		{e.m.Get, map[string]any{}},
		{e.m.Get, map[string]any{"id": "nope"}},
		{e.m.List, map[string]any{"x": 1}},
	} {
		if pe := callErr(t, c.f, "w", c.args); pe.Code != protocol.InvalidArgs {
			t.Errorf("%v: %v", c.args, pe)
		}
	}
	if _, _, err := ParseTriggerArgs([]byte(`{"dry_run":true}`)); err == nil {
		t.Error("trigger without changed_files accepted")
	}
	if files, dry, err := ParseTriggerArgs([]byte(`{"changed_files":["a"],"dry_run":true}`)); err != nil || !dry || len(files) != 1 {
		t.Errorf("trigger args: %v %v %v", files, dry, err)
	}
}

func TestWorkerFileName(t *testing.T) {
	seen := map[string]string{}
	for _, s := range []string{"default", "w1", "../x", "..", ".", "a/b", "a%2Fb", "a.b", "", "é", "x\x00y",
		strings.Repeat("a", 300), strings.Repeat("a", 299) + "b", strings.Repeat("/", 200), strings.Repeat("é", 100)} {
		n := workerFileName(s)
		if strings.ContainsAny(strings.TrimSuffix(n, ".json"), "/.\x00") || len(n) > 255 || n != filepath.Base(n) {
			t.Errorf("%q -> unsafe %q", s, n)
		}
		if o, dup := seen[n]; dup {
			t.Errorf("%q and %q both -> %q", s, o, n)
		}
		seen[n] = s
	}
	if workerFileName("default") != "default.json" || workerFileName("a/b") != "a%2Fb.json" {
		t.Error("plain names are not kept plain")
	}
	// A hostile session stays inside workers/.
	e := newEnv(t)
	e.create(t, "../../escape", map[string]any{"name": "a", "pattern": "*", "script_content": "true"})
	ents, _ := os.ReadDir(filepath.Join(e.state, "workers"))
	if len(ents) != 1 || !strings.HasPrefix(ents[0].Name(), "%2E%2E%2F") {
		t.Fatalf("workers: %v", ents)
	}
	if v := call(t, e.m.List, "../../escape", map[string]any{}); v["callbacks"].([]any)[0].(map[string]any)["active"] != true {
		t.Fatalf("list: %v", v)
	}
}

func TestConcurrentUpserts(t *testing.T) {
	e := newEnv(t)
	m2 := New(e.options()) // a second Manager on the same directory, as another process would be
	defer m2.Close()
	const n = 50
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := e.m
			if i%2 == 1 {
				m = m2
			}
			args, _ := json.Marshal(map[string]any{"action": "create", "name": fmt.Sprintf("cb-%d", i), "pattern": "*.x",
				"script_content": "true"})
			out, err := m.Upsert(fmt.Sprintf("w%d", i%3), args)
			if err != nil {
				errs <- err
				return
			}
			var v struct{ Callback Definition }
			json.Unmarshal(out, &v)
			ids[i] = v.Callback.ID
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if id == "" || seen[id] {
			t.Fatalf("ids: %v", ids)
		}
		seen[id] = true
	}
	v := call(t, e.m.List, "w0", map[string]any{})
	if cbs := v["callbacks"].([]any); len(cbs) != n {
		t.Fatalf("%d callbacks listed", len(cbs))
	}
	active := 0
	for w := range 3 {
		active += len(readJSON(t, filepath.Join(e.state, "workers", fmt.Sprintf("w%d.json", w)))["active"].([]any))
	}
	if active != n {
		t.Fatalf("%d activations stored, want %d", active, n)
	}
	ents, _ := os.ReadDir(filepath.Join(e.state, "scripts"))
	if len(ents) != n {
		t.Fatalf("%d scripts", len(ents))
	}
}

func TestBlockingSuccessAndFailure(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "ok", "pattern": "*.a", "blocking": true, "timeout_secs": 10, "once_per_batch": true,
		"script_content": `echo "root=$CLARA_PROJECT_ROOT name=$CLARA_CALLBACK_NAME id=$CLARA_CALLBACK_ID"
echo "files=$(echo "$CLARA_CHANGED_FILES" | tr '\n' ,)"
echo "list=$(tr '\n' , < "$CLARA_CHANGED_FILES_LIST") count=$CLARA_CHANGED_FILES_COUNT pwd=$PWD"`})
	e.create(t, "w", map[string]any{"name": "bad", "pattern": "*.b", "blocking": true, "timeout_secs": 10,
		"script_content": "for i in 1 2 3 4 5; do echo line$i; done\necho err >&2\nexit 3"})
	o := e.trigger(t, "w", "x.a", "sub/y.a", "/elsewhere/z.a", "../w.a", "x.a")
	if len(o.Runs) != 1 {
		t.Fatalf("%+v", o)
	}
	r := o.Runs[0]
	lines := strings.Split(r.OutputTail, "\n")
	want := []string{
		fmt.Sprintf("root=%s name=ok id=CB1", e.root),
		fmt.Sprintf("files=%s/x.a,%s/sub/y.a,", e.root, e.root),
		fmt.Sprintf("list=%s/x.a,%s/sub/y.a, count=2 pwd=%s", e.root, e.root, e.root),
	}
	if !r.OK || r.ExitCode != 0 || r.TimedOut || r.Log != "" || fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Fatalf("got %+v\nwant tail %q", r, want)
	}
	if o.Notices[0] != "Callback 'ok' ✓: succeeded in "+(time.Duration(r.DurationMS)*time.Millisecond).String() {
		t.Fatalf("notice %q", o.Notices[0])
	}

	o = e.trigger(t, "w", "q.b")
	r = o.Runs[0]
	if r.OK || r.ExitCode != 3 || r.TimedOut || r.OutputTail != "line4\nline5\nerr" || r.Log == "" {
		t.Fatalf("failure: %+v", r)
	}
	if log, err := os.ReadFile(r.Log); err != nil || string(log) != "line1\nline2\nline3\nline4\nline5\nerr\n" {
		t.Fatalf("log %q %v", log, err)
	}
	if want := "Callback 'bad' ✗ (exit 3): see " + r.Log + "\nline4\nline5\nerr"; o.Notices[0] != want {
		t.Fatalf("notice %q, want %q", o.Notices[0], want)
	}
	if !strings.HasPrefix(r.Log, filepath.Join(e.state, "logs", "bad-")) || !strings.HasSuffix(r.Log, ".log") {
		t.Fatalf("log path %s", r.Log)
	}
	js := o.JSON()
	var back struct{ Callbacks []map[string]any }
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	got := back.Callbacks[0]
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if fmt.Sprint(keys) != "[duration_ms exit_code id log name ok output_tail timed_out]" {
		t.Fatalf("result keys %v in %s", keys, js)
	}
}

// groupGone reports whether no process of group pgid is alive (a /proc
// scan), and then waits for kill(-pgid, 0) to say ESRCH: killed daemons
// are zombies until init reaps them, and this sandbox's init takes up to
// 2 s.
func groupGone(t *testing.T, pgid int) bool {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, en := range ents {
		if _, err := strconv.Atoi(en.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + en.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			t.Logf("live process %s of group %d: %s", en.Name(), pgid, s)
			return false
		}
	}
	start := time.Now()
	for {
		err := syscall.Kill(-pgid, 0)
		if errors.Is(err, syscall.ESRCH) {
			if d := time.Since(start); d > 10*time.Millisecond {
				t.Logf("group %d: zombies reaped by init after %s", pgid, d)
			}
			return true
		}
		if time.Since(start) > 10*time.Second {
			t.Logf("kill(-%d, 0) = %v after %s", pgid, err, time.Since(start))
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestTimeoutKillsTheGroup(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "slow", "pattern": "*.a", "blocking": true, "timeout_secs": 1, "once_per_batch": true,
		"script_content": `echo $$ > "$CLARA_PROJECT_ROOT/pid"
sleep 300 &
(sleep 300 &)
bash -c 'trap "" TERM; sleep 300' &
echo started
sleep 300`})
	start := time.Now()
	o := e.trigger(t, "w", "x.a")
	took := time.Since(start)
	r := o.Runs[0]
	if r.OK || !r.TimedOut || r.OutputTail != "started" || r.Log == "" {
		t.Fatalf("%+v", r)
	}
	if !strings.HasPrefix(o.Notices[0], "Callback 'slow' ✗ (timed out after 1s): see ") {
		t.Fatalf("notice %q", o.Notices[0])
	}
	if took < time.Second || took > 2500*time.Millisecond {
		t.Fatalf("took %s for a 1 s timeout", took)
	}
	if !groupGone(t, readPid(t, filepath.Join(e.root, "pid"))) {
		t.Fatal("processes of the group survive the timeout")
	}

	// A script that ignores SIGTERM gets SIGKILL 2 s later.
	call(t, e.m.Upsert, "w", map[string]any{"action": "update", "id": "CB1", "script_content": `echo $$ > "$CLARA_PROJECT_ROOT/pid"
trap "" TERM
sleep 300 &
while :; do sleep 0.05; done`})
	start = time.Now()
	o = e.trigger(t, "w", "x.a")
	took = time.Since(start)
	if r := o.Runs[0]; !r.TimedOut || r.ExitCode != 128+int(syscall.SIGKILL) {
		t.Fatalf("%+v", r)
	}
	if took < 3*time.Second || took > 4500*time.Millisecond {
		t.Fatalf("took %s for a 1 s timeout and a 2 s grace", took)
	}
	if !groupGone(t, readPid(t, filepath.Join(e.root, "pid"))) {
		t.Fatal("processes of the group survive SIGKILL")
	}
}

// A script that exits at once but leaves daemons behind: they go with
// their group, and the trigger does not wait for the pipes they hold.
func TestDaemonsLeftBehindAreKilled(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "d", "pattern": "*.a", "blocking": true, "timeout_secs": 30,
		"script_content": `echo $$ > "$CLARA_PROJECT_ROOT/pid"
(sleep 300 &)
nohup sleep 300 &
echo done`})
	start := time.Now()
	o := e.trigger(t, "w", "x.a")
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("took %s", took)
	}
	if r := o.Runs[0]; !r.OK || r.OutputTail != "done" {
		t.Fatalf("%+v", r)
	}
	if !groupGone(t, readPid(t, filepath.Join(e.root, "pid"))) {
		t.Fatal("daemons survive")
	}

	// One that leaves the group (setsid) cannot be killed with it, but does
	// not hold the trigger up for long either.
	call(t, e.m.Upsert, "w", map[string]any{"action": "update", "id": "CB1", "script_content": `setsid bash -c 'echo $$ > "$CLARA_PROJECT_ROOT/daemon"; exec sleep 300' &
sleep 0.2
echo done`})
	start = time.Now()
	o = e.trigger(t, "w", "x.a")
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("took %s with a setsid daemon holding the pipe", took)
	}
	pid := readPid(t, filepath.Join(e.root, "daemon"))
	syscall.Kill(pid, syscall.SIGKILL)
	if r := o.Runs[0]; !r.OK || !strings.Contains(r.OutputTail, "done") {
		t.Fatalf("%+v", r)
	}
}

func TestBackground(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "bg", "pattern": "*.a", "once_per_batch": true, "success_message": "all good",
		"script_content": "sleep 0.3; echo hi"})
	e.create(t, "w", map[string]any{"name": "bgfail", "pattern": "*.a", "once_per_batch": true, "script_content": "echo no; exit 2"})
	start := time.Now()
	o := e.trigger(t, "w", "x.a")
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Fatalf("background trigger took %s", took)
	}
	if len(o.Runs) != 0 || len(o.Background) != 2 || fmt.Sprint(o.Notices) != "[Callback 'bg' activated in background Callback 'bgfail' activated in background]" {
		t.Fatalf("%+v", o)
	}
	got := map[string]Completion{}
	for range 2 {
		select {
		case c := <-e.bg:
			got[c.Name] = c
		case <-time.After(10 * time.Second):
			t.Fatal("no completion")
		}
	}
	c := got["bg"]
	if c.Session != "w" || !c.OK || c.OutputTail != "hi" || c.Notice != "Callback 'bg' ✓: all good" ||
		fmt.Sprint(c.Files) != "["+filepath.Join(e.root, "x.a")+"]" || c.DurationMS < 300 {
		t.Fatalf("%+v", c)
	}
	c = got["bgfail"]
	if c.OK || c.ExitCode != 2 || c.Log == "" || !strings.HasPrefix(c.Notice, "Callback 'bgfail' ✗ (exit 2): see ") {
		t.Fatalf("%+v", c)
	}
	data, _ := json.Marshal(c)
	var v map[string]any
	json.Unmarshal(data, &v)
	if v["session"] != "w" || v["exit_code"] != 2.0 || len(v["files"].([]any)) != 1 || v["id"] != "CB2" {
		t.Fatalf("completion JSON %s", data)
	}
}

func TestOncePerBatchAndPerFile(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "batch", "pattern": "*.a", "blocking": true, "timeout_secs": 10, "once_per_batch": true,
		"script_content": `echo "$CLARA_CHANGED_FILES_COUNT" >> "$CLARA_PROJECT_ROOT/batch.out"`})
	e.create(t, "w", map[string]any{"name": "each", "pattern": "*.a", "blocking": true, "timeout_secs": 10,
		"script_content": `echo "$CLARA_CHANGED_FILES" >> "$CLARA_PROJECT_ROOT/each.out"`})
	o := e.trigger(t, "w", "1.a", "2.a", "3.b", "4.a")
	if len(o.Runs) != 4 || o.Runs[0].Name != "batch" || o.Runs[1].Name != "each" || len(o.Notices) != 4 {
		t.Fatalf("%+v", o)
	}
	if b, _ := os.ReadFile(filepath.Join(e.root, "batch.out")); string(b) != "3\n" {
		t.Fatalf("batch: %q", b)
	}
	b, _ := os.ReadFile(filepath.Join(e.root, "each.out"))
	if want := fmt.Sprintf("%[1]s/1.a\n%[1]s/2.a\n%[1]s/4.a\n", e.root); string(b) != want {
		t.Fatalf("each: %q, want %q", b, want)
	}
}

func TestOneAtATimeMerges(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "slow", "pattern": "*.a", "once_per_batch": true, "one_at_a_time": true,
		"script_content": `echo "start $(tr '\n' ' ' < "$CLARA_CHANGED_FILES_LIST")" >> "$CLARA_PROJECT_ROOT/runs"
sleep 0.6`})
	e.trigger(t, "w", "1.a")
	time.Sleep(100 * time.Millisecond)
	e.trigger(t, "w", "2.a", "3.a")
	e.trigger(t, "w", "3.a", "4.a")
	e.trigger(t, "w2", "5.a") // not active there
	var cs []Completion
	for range 2 {
		select {
		case c := <-e.bg:
			cs = append(cs, c)
		case <-time.After(10 * time.Second):
			t.Fatal("no completion")
		}
	}
	select {
	case c := <-e.bg:
		t.Fatalf("a third completion: %+v", c)
	case <-time.After(300 * time.Millisecond):
	}
	b, _ := os.ReadFile(filepath.Join(e.root, "runs"))
	want := fmt.Sprintf("start %[1]s/1.a \nstart %[1]s/2.a %[1]s/3.a %[1]s/4.a \n", e.root)
	if string(b) != want {
		t.Fatalf("runs:\n%s\nwant:\n%s", b, want)
	}
	if len(cs[1].Files) != 3 {
		t.Fatalf("merged completion: %+v", cs[1])
	}

	// A blocking trigger that merges into the pending run waits for it.
	call(t, e.m.Upsert, "w", map[string]any{"action": "update", "id": "CB1", "blocking": true, "timeout_secs": 10})
	os.Remove(filepath.Join(e.root, "runs"))
	var wg sync.WaitGroup
	outs := make([]*Outcome, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 150 * time.Millisecond)
			outs[i] = e.trigger(t, "w", fmt.Sprintf("b%d.a", i))
		}()
	}
	wg.Wait()
	b, _ = os.ReadFile(filepath.Join(e.root, "runs"))
	if n := strings.Count(string(b), "start"); n != 2 || !strings.Contains(string(b), "b1.a "+e.root+"/b2.a") {
		t.Fatalf("runs:\n%s", b)
	}
	for i, o := range outs {
		if len(o.Runs) != 1 || !o.Runs[0].OK {
			t.Fatalf("trigger %d: %+v", i, o)
		}
	}
}

func TestCwd(t *testing.T) {
	e := newEnv(t)
	os.MkdirAll(filepath.Join(e.root, "sub", "dir"), 0o755)
	e.create(t, "w", map[string]any{"name": "c", "pattern": "*.a", "blocking": true, "timeout_secs": 5, "cwd": "./sub/dir/",
		"script_content": "pwd"})
	o := e.trigger(t, "w", "x.a")
	if r := o.Runs[0]; !r.OK || r.OutputTail != filepath.Join(e.root, "sub", "dir") {
		t.Fatalf("%+v", r)
	}
	if v := call(t, e.m.Get, "w", map[string]any{"id": "c"}); v["cwd"] != "sub/dir" {
		t.Fatalf("cwd stored as %v", v["cwd"])
	}
	// Replaced by a link out of the root after the definition: refused at run time.
	os.RemoveAll(filepath.Join(e.root, "sub", "dir"))
	os.Symlink(t.TempDir(), filepath.Join(e.root, "sub", "dir"))
	o = e.trigger(t, "w", "x.a")
	if r := o.Runs[0]; r.OK || r.ExitCode != -1 || !strings.Contains(r.Error, "outside") {
		t.Fatalf("%+v", r)
	}
	os.Remove(filepath.Join(e.root, "sub", "dir"))
	o = e.trigger(t, "w", "x.a")
	if r := o.Runs[0]; r.OK || !strings.Contains(r.Error, "not a directory") || !strings.Contains(o.Notices[0], "✗ (error: ") {
		t.Fatalf("%+v %q", r, o.Notices)
	}
}

func TestLongFileList(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "long", "pattern": "src/**/*.go", "blocking": true, "timeout_secs": 30, "once_per_batch": true,
		"script_content": `echo "env=${#CLARA_CHANGED_FILES} count=$CLARA_CHANGED_FILES_COUNT lines=$(wc -l < "$CLARA_CHANGED_FILES_LIST")"
tail -n 1 "$CLARA_CHANGED_FILES_LIST"`})
	var files []string
	for i := range 20000 {
		files = append(files, fmt.Sprintf("src/pkg%d/deeper/file_%05d.go", i%37, i))
	}
	files = append(files, "other/x.go")
	o := e.trigger(t, "w", files...)
	r := o.Runs[0]
	want := fmt.Sprintf("env=0 count=20000 lines=20000\n%s/src/pkg19/deeper/file_19999.go", e.root)
	if !r.OK || r.OutputTail != want {
		t.Fatalf("%+v\nwant %q", r, want)
	}
	// The list file is gone afterwards.
	if m, _ := filepath.Glob(filepath.Join(os.TempDir(), "clara-changed-files-*")); len(m) > 0 {
		for _, p := range m {
			if st, err := os.Stat(p); err == nil && time.Since(st.ModTime()) < 5*time.Second {
				t.Errorf("list file left: %s", p)
			}
		}
	}
}

func TestDryRunAndMatching(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "a", "pattern": "*.go", "blocking": true, "timeout_secs": 5, "script_content": "exit 1"})
	e.create(t, "w", map[string]any{"name": "b", "pattern": []string{"/docs/**", "!docs/skip.md"}, "script_content": "exit 1"})
	e.create(t, "other", map[string]any{"name": "c", "pattern": "*", "script_content": "exit 1"})
	o, err := e.m.Trigger(context.Background(), "w", []string{"x.go", "docs/y.md", "docs/skip.md", "docs/z/x.go",
		e.root + "/abs.go", "/elsewhere/q.go", "../up.go", e.root + "/../sibling.go", "x.go"}, true)
	if err != nil {
		t.Fatal(err)
	}
	js := string(o.JSON())
	want := fmt.Sprintf(`{"dry_run":true,"callbacks":[{"id":"CB1","name":"a","files":["%[1]s/x.go","%[1]s/docs/z/x.go","%[1]s/abs.go"]},`+
		`{"id":"CB2","name":"b","files":["%[1]s/docs/y.md","%[1]s/docs/z/x.go"]}]}`, e.root)
	if js != want {
		t.Fatalf("dry run:\n%s\nwant\n%s", js, want)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.state, "logs")); len(ents) != 0 {
		t.Fatal("a dry run ran something")
	}
	if o, _ := e.m.Trigger(context.Background(), "w", []string{"nothing.txt"}, true); string(o.JSON()) != `{"dry_run":true,"callbacks":[]}` {
		t.Fatalf("%s", o.JSON())
	}
	if o, _ := e.m.Trigger(context.Background(), "w", nil, false); string(o.JSON()) != `{"callbacks":[],"background":[],"notices":[]}` {
		t.Fatalf("%s", o.JSON())
	}
}

func TestTestModeSkips(t *testing.T) {
	e := newEnv(t)
	e.mu.Lock()
	e.test = true
	e.mu.Unlock()
	e.create(t, "w", map[string]any{"name": "blk", "pattern": "*.a", "blocking": true, "timeout_secs": 5,
		"script_content": `touch "$CLARA_PROJECT_ROOT/ran"`})
	e.create(t, "w", map[string]any{"name": "bg", "pattern": "*.a", "once_per_batch": true, "script_content": `touch "$CLARA_PROJECT_ROOT/ran"`})
	o := e.trigger(t, "w", "1.a", "2.a")
	js := string(o.JSON())
	want := `{"callbacks":[` +
		`{"id":"CB1","name":"blk","ok":true,"exit_code":0,"timed_out":false,"duration_ms":0,"output_tail":"","log":"","test_mode":true,"skipped":"blk"},` +
		`{"id":"CB1","name":"blk","ok":true,"exit_code":0,"timed_out":false,"duration_ms":0,"output_tail":"","log":"","test_mode":true,"skipped":"blk"},` +
		`{"id":"CB2","name":"bg","ok":true,"exit_code":0,"timed_out":false,"duration_ms":0,"output_tail":"","log":"","test_mode":true,"skipped":"bg"}],` +
		`"background":[],"notices":["Callback 'blk' skipped (test mode)","Callback 'blk' skipped (test mode)","Callback 'bg' skipped (test mode)"]}`
	if js != want {
		t.Fatalf("%s\nwant\n%s", js, want)
	}
	time.Sleep(200 * time.Millisecond)
	if fileExists(filepath.Join(e.root, "ran")) || len(e.bg) != 0 {
		t.Fatal("something ran in test mode")
	}
}

func TestLogs(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "big", "pattern": "*.a", "blocking": true, "timeout_secs": 30,
		"script_content": `head -c 3000000 /dev/zero | tr '\0' x; echo; echo last line; exit ${CODE:-0}`})
	logs := filepath.Join(e.state, "logs")
	o := e.trigger(t, "w", "x.a")
	if r := o.Runs[0]; !r.OK || r.Log != "" || !r.Truncated || !strings.HasSuffix(r.OutputTail, "last line") {
		t.Fatalf("%+v", r)
	}
	if ents, _ := os.ReadDir(logs); len(ents) != 0 {
		t.Fatalf("log kept on success: %v", ents)
	}
	call(t, e.m.Upsert, "w", map[string]any{"action": "update", "id": "CB1", "old_string": "${CODE:-0}", "new_string": "4"})
	o = e.trigger(t, "w", "x.a")
	r := o.Runs[0]
	if r.OK || r.Log == "" || !r.Truncated {
		t.Fatalf("%+v", r)
	}
	st, err := os.Stat(r.Log)
	if err != nil || st.Size() > logCap || st.Size() < logCap-100 {
		t.Fatalf("log size %v %v", st.Size(), err)
	}
	data, _ := os.ReadFile(r.Log)
	if !strings.HasPrefix(string(data), "xxxx") || !strings.HasSuffix(string(data), truncMarker) {
		t.Fatalf("log ends %q", data[len(data)-80:])
	}
	if ents, _ := os.ReadDir(logs); len(ents) != 1 {
		t.Fatalf("logs: %v", ents)
	}
}

func TestCloseStopsRuns(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "s", "pattern": "*.a", "script_content": `echo $$ > "$CLARA_PROJECT_ROOT/pid"; sleep 300`})
	e.trigger(t, "w", "x.a")
	pidFile := filepath.Join(e.root, "pid")
	for i := 0; !fileExists(pidFile) || func() bool { b, _ := os.ReadFile(pidFile); return len(b) == 0 }(); i++ {
		if i > 500 {
			t.Fatal("script did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	e.m.Close()
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Close took %s", took)
	}
	if !groupGone(t, readPid(t, pidFile)) {
		t.Fatal("run survives Close")
	}
	if _, err := e.m.Trigger(context.Background(), "w", []string{"x.a"}, false); err == nil {
		t.Fatal("trigger after Close")
	}
	if len(e.bg) != 0 {
		t.Fatal("a completion after Close")
	}
}

func TestCancelledWaitReportsInBackground(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "s", "pattern": "*.a", "blocking": true, "timeout_secs": 10, "script_content": "sleep 0.5; echo fin"})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	o, err := e.m.Trigger(ctx, "w", []string{"x.a"}, false)
	if err != nil || len(o.Runs) != 1 || o.Runs[0].OK || !strings.Contains(o.Runs[0].Error, "cancelled") {
		t.Fatalf("%+v %v", o, err)
	}
	select {
	case c := <-e.bg:
		if !c.OK || c.OutputTail != "fin" || c.Session != "w" {
			t.Fatalf("%+v", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no background completion")
	}
}

func TestReconfigure(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "a", "pattern": "*.a", "blocking": true, "timeout_secs": 5, "script_content": "pwd"})
	root2 := t.TempDir()
	o := e.options()
	o.ProjectRoot, o.StateDir = root2, filepath.Join(root2, "state")
	e.m.Reconfigure(o)
	if v := call(t, e.m.List, "w", nil); len(v["callbacks"].([]any)) != 0 {
		t.Fatalf("new state dir: %v", v)
	}
	if id := e.create(t, "w", map[string]any{"name": "b", "pattern": "*.a", "blocking": true, "timeout_secs": 5, "script_content": "pwd"}); id != "CB1" {
		t.Fatalf("id %s", id)
	}
	if r := e.trigger(t, "w", "x.a").Runs; len(r) != 1 || r[0].Name != "b" || r[0].OutputTail != root2 {
		t.Fatalf("%+v", r)
	}
	if !fileExists(filepath.Join(root2, "state", "scripts", "b.sh")) || fileExists(filepath.Join(e.state, "scripts", "b.sh")) {
		t.Fatal("script in the wrong directory")
	}
}

// Close while a one_at_a_time callback has a pending run that a blocking
// trigger waits for: the trigger returns.
func TestClosePendingWaiter(t *testing.T) {
	e := newEnv(t)
	e.create(t, "w", map[string]any{"name": "s", "pattern": "*.a", "blocking": true, "timeout_secs": 60, "one_at_a_time": true,
		"once_per_batch": true, "script_content": "sleep 300"})
	res := make(chan *Outcome, 2)
	for range 2 {
		go func() {
			o, _ := e.m.Trigger(context.Background(), "w", []string{"x.a"}, false)
			res <- o
		}()
		time.Sleep(200 * time.Millisecond)
	}
	e.m.Close()
	for range 2 {
		select {
		case o := <-res:
			if len(o.Runs) != 1 || o.Runs[0].OK || o.Runs[0].Error == "" {
				t.Fatalf("%+v", o)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a trigger still waits after Close")
		}
	}
}

// fileExists reports whether path names something (no error otherwise).
func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
