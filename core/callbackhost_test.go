package core_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/toolbox"
)

// callbackEngine returns an engine whose project root is a fresh directory
// with its state under .clara and no rules; cfg (top-level keys) comes first.
func callbackEngine(t *testing.T, cfg string) (*core.Engine, string) {
	t.Helper()
	root := t.TempDir()
	e := newEngine(t)
	mustConfigure(t, e, cfg+"project_root = "+jsonText(root)+"\nstate_dir = \".clara\"\n[rules]\npaths = []\nbuiltin = false\n")
	return e, root
}

func upsert(t *testing.T, e *core.Engine, session, args string) string {
	t.Helper()
	out := evalString(t, e, `{"tool":"callback_upsert","session":`+jsonText(session)+`,"arguments":`+args+`}`)
	if !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatalf("callback_upsert %s: %s", args, out)
	}
	return out
}

// editTool registers a tool that reports the files it was asked to change
// (and says so: reports_changed_files).
func editTool(t *testing.T, e *core.Engine) {
	t.Helper()
	err := e.RegisterTool([]byte(`{"name":"edit","reports_changed_files":true}`), toolbox.ToolOptions{Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
		return append([]byte(nil), call.Arguments...), nil // {"changed_files":[...]}
	}})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCallbacks_blockingRunEnrichesTheToolsResponse(t *testing.T) {
	e, root := callbackEngine(t, "")
	editTool(t, e)
	upsert(t, e, "w1", `{"action":"create","name":"rust-check","pattern":["*.rs","!target/**"],"blocking":true,"timeout_secs":10,
		"success_message":"Build passed","script_content":"echo \"checked $CLARA_CHANGED_FILES\""}`)
	out := evalString(t, e, `{"tool":"edit","session":"w1","arguments":{"changed_files":["src/main.rs","README.md"]}}`)
	m := decodeEnvelope(t, out)
	cbs, _ := m["callbacks"].([]any)
	if len(cbs) != 1 {
		t.Fatalf("want one callback result: %s", out)
	}
	run := cbs[0].(map[string]any)
	if run["name"] != "rust-check" || run["ok"] != true || !strings.Contains(run["output_tail"].(string), filepath.Join(root, "src/main.rs")) {
		t.Errorf("run = %v", run)
	}
	if !strings.Contains(out, `"notices":[{"callback":"rust-check","message":"Callback 'rust-check' ✓: Build passed"`) {
		t.Errorf("notice missing: %s", out)
	}
	// Not active for another worker until it turns it on.
	out = evalString(t, e, `{"tool":"edit","session":"w2","arguments":{"changed_files":["src/main.rs"]}}`)
	if strings.Contains(out, `"callbacks"`) {
		t.Errorf("w2 has not turned the callback on: %s", out)
	}
	// A file nobody watches fires nothing.
	out = evalString(t, e, `{"tool":"edit","session":"w1","arguments":{"changed_files":["target/x.rs"]}}`)
	if strings.Contains(out, `"callbacks"`) {
		t.Errorf("target/ is excluded: %s", out)
	}
}

func TestCallbacks_failureNoticeHasTheLastLines(t *testing.T) {
	e, _ := callbackEngine(t, "")
	editTool(t, e)
	upsert(t, e, "w", `{"action":"create","name":"check","pattern":"*.go","blocking":true,"timeout_secs":10,
		"script_content":"echo one; echo two; echo three; echo four; exit 2"}`)
	out := evalString(t, e, `{"tool":"edit","session":"w","arguments":{"changed_files":["a.go"]}}`)
	if !strings.Contains(out, `Callback 'check' ✗ (exit 2): see `) || !strings.Contains(out, `two\nthree\nfour`) {
		t.Errorf("failure notice: %s", out)
	}
	if !strings.HasPrefix(out, `{"status":"success","tool":"edit"`) {
		t.Errorf("the tool itself succeeded: %s", out)
	}
}

func TestCallbacks_backgroundCompletionNoticeAndEvent(t *testing.T) {
	e, _ := callbackEngine(t, "")
	loadRuleText(t, e, "cb.toml", `
[rule]
id = "after-callback"
trigger = "on_callback_failure"
[action]
type = "set_state"
key = "last_failure"
value = "{{ context.callback.name }}:{{ context.callback.exit_code }}"
`)
	editTool(t, e)
	upsert(t, e, "bg", `{"action":"create","name":"lint","pattern":"*.py","blocking":false,"script_content":"exit 3"}`)
	out := evalString(t, e, `{"tool":"edit","session":"bg","arguments":{"changed_files":["x.py"]}}`)
	if !strings.Contains(out, `Callback 'lint' activated in background`) {
		t.Fatalf("background notice: %s", out)
	}
	deadline := time.Now().Add(10 * time.Second)
	var drained string
	for time.Now().Before(deadline) {
		drained = evalString(t, e, `{"tool":"notifications_drain","session":"bg","arguments":{}}`)
		if strings.Contains(drained, "Callback 'lint' ✗ (exit 3)") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(drained, `"callback":"lint"`) || !strings.Contains(drained, "✗ (exit 3)") {
		t.Fatalf("completion never reached the queue: %s", drained)
	}
	for time.Now().Before(deadline) {
		out = evalString(t, e, `{"tool":"state_get","session":"bg","arguments":{"key":"last_failure"}}`)
		if strings.Contains(out, `"lint:3"`) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("on_callback_failure did not fire: %s", out)
}

func TestCallbacks_testModeRunsNothing(t *testing.T) {
	e, root := callbackEngine(t, "test_mode = true\n")
	editTool(t, e)
	upsert(t, e, "w", `{"action":"create","name":"touch","pattern":"*.c","blocking":true,"timeout_secs":5,"script_content":"touch ran.txt"}`)
	out := evalString(t, e, `{"tool":"edit","session":"w","arguments":{"changed_files":["a.c"]}}`)
	if !strings.Contains(out, `"test_mode":true`) || !strings.Contains(out, `"skipped":"touch"`) {
		t.Errorf("test mode: %s", out)
	}
	if _, err := os.Stat(filepath.Join(root, "ran.txt")); err == nil {
		t.Errorf("the script ran in test mode")
	}
	// A dry run still answers in test mode.
	out = evalString(t, e, `{"tool":"callback_trigger","session":"w","arguments":{"changed_files":["b.c"],"dry_run":true}}`)
	if !strings.Contains(out, `"dry_run":true`) || !strings.Contains(out, `"files":["b.c"]`) && !strings.Contains(out, "b.c") {
		t.Errorf("dry run in test mode: %s", out)
	}
}

func TestCallbacks_offWithoutAStateDir(t *testing.T) {
	e := rulesEngine(t, "") // state_dir = ""
	out := evalString(t, e, `{"tool":"callback_list","arguments":{}}`)
	if !strings.HasPrefix(out, `{"status":"error","error":"invalid_args"`) || !strings.Contains(out, "state_dir") {
		t.Errorf("callback_list without a state_dir: %s", out)
	}
}

func TestCallbacks_survivesResetAndNewEngine(t *testing.T) {
	e, root := callbackEngine(t, "")
	upsert(t, e, "w", `{"action":"create","name":"keep","pattern":"*.md","blocking":true,"timeout_secs":5,"script_content":"true"}`)
	e.Reset()
	e2 := newEngine(t)
	mustConfigure(t, e2, "project_root = "+jsonText(root)+"\nstate_dir = \".clara\"\n")
	out := evalString(t, e2, `{"tool":"callback_list","session":"w","arguments":{}}`)
	if !strings.Contains(out, `"name":"keep"`) || !strings.Contains(out, `"active":true`) {
		t.Errorf("after a restart: %s", out)
	}
	if _, err := os.Stat(filepath.Join(root, ".clara", "scripts", "keep.sh")); err != nil {
		t.Errorf("script file: %v", err)
	}
}

// A blocking callback that outlives the call waiting for it (the call's
// deadline ended first) is not a failure: no on_callback_failure fires for
// the placeholder; on_callback_complete fires once the run really ends.
func TestCallbacks_stillRunningIsNotAFailure(t *testing.T) {
	e, _ := callbackEngine(t, "")
	mustConfigure(t, e, `
[[tools]]
name = "relay"
limits = { timeout_ms = 300 }
lua = "return function(args) return call_tool('edit', {changed_files = {'a.go'}}) end"
`)
	loadRuleText(t, e, "cb.toml", `
[[rules]]
id = "failed"
trigger = "on_callback_failure"
[[rules.actions]]
type = "set_state"
key = "failure"
value = "{{ context.callback.name }}"

[[rules]]
id = "completed"
trigger = "on_callback_complete"
[[rules.actions]]
type = "set_state"
key = "complete"
value = "{{ context.callback.name }}"
`)
	editTool(t, e)
	upsert(t, e, "w", `{"action":"create","name":"slow","pattern":"*.go","blocking":true,"timeout_secs":10,"script_content":"sleep 1; echo fine"}`)
	evalString(t, e, `{"tool":"relay","session":"w","arguments":{}}`)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if out := evalString(t, e, `{"tool":"state_get","session":"w","arguments":{"key":"complete"}}`); strings.Contains(out, `"slow"`) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out := evalString(t, e, `{"tool":"state_get","session":"w","arguments":{"key":"complete"}}`); !strings.Contains(out, `"slow"`) {
		t.Fatalf("on_callback_complete never fired: %s", out)
	}
	if out := evalString(t, e, `{"tool":"state_get","session":"w","arguments":{"key":"failure"}}`); strings.Contains(out, `"slow"`) {
		t.Fatalf("on_callback_failure fired for a run that succeeded: %s", out)
	}
}
