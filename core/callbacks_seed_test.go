package core_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/toolbox"
)

// Seed 001's trigger: tools whose descriptors name the arguments holding
// the paths they change (changes_files), a chat turn as one batch, and
// callbacks declared in the configuration.

// seedTools registers the seed's Edit and Write: they write nothing, their
// descriptors say where the path is.
func seedTools(t *testing.T, e *core.Engine) {
	t.Helper()
	ok := func(context.Context, toolbox.Call) ([]byte, error) { return []byte(`{"ok":true}`), nil }
	for _, d := range []string{
		`{"name":"Edit","description":"Replace old_string by new_string in a file","changes_files":["file_path"],
		  "input_schema":{"type":"object","properties":{"file_path":{"type":"string"},"old_string":{"type":"string"},"new_string":{"type":"string"}},"required":["file_path"]}}`,
		`{"name":"Write","description":"Write a file","changes_files":["file_path"],
		  "input_schema":{"type":"object","properties":{"file_path":{"type":"string"},"content":{"type":"string"}},"required":["file_path"]}}`,
		`{"name":"MultiEdit","changes_files":["/edits/0/path","/also"]}`,
	} {
		if err := e.RegisterTool([]byte(d), toolbox.ToolOptions{Run: ok}); err != nil {
			t.Fatal(err)
		}
	}
	fail := func(context.Context, toolbox.Call) ([]byte, error) { return nil, fmt.Errorf("disk full") }
	if err := e.RegisterTool([]byte(`{"name":"BrokenEdit","changes_files":["file_path"]}`), toolbox.ToolOptions{Run: fail}); err != nil {
		t.Fatal(err)
	}
}

// The seed's rust-check, recording each run's files as one line of .runs.
const rustCheck = `{"action":"create","name":"rust-check","description":"cargo check after Rust edits","pattern":"*.rs",
	"blocking":true,"timeout_secs":30,"once_per_batch":true,"success_message":"Build passed",
	"script_content":"echo $(echo \"$CP_CHANGED_FILES\" | tr '\\n' ' ') >> \"$CP_PROJECT_ROOT/.runs\"\necho \"checked $CP_CHANGED_FILES\""}`

func runsOf(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, ".runs"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func TestCallbacks_changesFilesFiresWithoutChangedFilesInTheResult(t *testing.T) {
	e, root := callbackEngine(t, "")
	seedTools(t, e)
	upsert(t, e, "w", rustCheck)
	out := evalString(t, e, `{"tool":"Edit","session":"w","arguments":{"file_path":"src/main.rs","old_string":"a","new_string":"b"}}`)
	if !strings.Contains(out, `"result":{"ok":true}`) || !strings.Contains(out, `"notices":[{"callback":"rust-check","message":"Callback 'rust-check' ✓: Build passed"`) {
		t.Fatalf("%s", out)
	}
	// A JSON pointer and an array of paths; README.md matches nothing.
	out = evalString(t, e, `{"tool":"MultiEdit","session":"w","arguments":{"edits":[{"path":"`+root+`/src/a.rs"}],"also":["src/b.rs","README.md"]}}`)
	if !strings.Contains(out, "✓: Build passed") {
		t.Fatalf("%s", out)
	}
	// Outside the project root, or a failed call: nothing fires.
	for _, req := range []string{
		`{"tool":"Edit","session":"w","arguments":{"file_path":"../elsewhere/x.rs"}}`,
		`{"tool":"Edit","session":"w","arguments":{"file_path":"/etc/x.rs"}}`,
		`{"tool":"Edit","session":"w","arguments":{"file_path":"src/../../x.rs"}}`,
		`{"tool":"BrokenEdit","session":"w","arguments":{"file_path":"src/c.rs"}}`,
	} {
		if out := evalString(t, e, req); strings.Contains(out, `"callbacks"`) || strings.Contains(out, "rust-check") {
			t.Errorf("%s fired: %s", req, out)
		}
	}
	want := []string{root + "/src/main.rs", root + "/src/a.rs " + root + "/src/b.rs"}
	if got := runsOf(t, root); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("runs %q, want %q", got, want)
	}
}

// The seed's integration test 8: a batch of three Edit/Write calls fires a
// once_per_batch callback once with all three paths; what the blocking
// run said, and that the background one started, reach the model.
func TestCallbacks_aChatTurnIsOneBatch(t *testing.T) {
	srv := scriptServer(t, loadScript(t, "seed_callbacks"))
	e, root := callbackEngine(t, `llm = { base_url = `+jsonText(srv.BaseURL("seed_callbacks"))+`, model = "m" }`+"\n")
	seedTools(t, e)
	upsert(t, e, "agent", rustCheck)
	upsert(t, e, "agent", `{"action":"create","name":"file-length","description":"warn about long files","pattern":"*",
		"script_content":"echo \"$CP_CHANGED_FILES\" >> \"$CP_PROJECT_ROOT/.lengths\""}`)
	out := evalString(t, e, `{"tool":"chat","session":"agent","arguments":{"prompt":"Rename foo to bar in the crate.","allow_tools":true,"tools":["Edit","Write"],"max_tool_calls":5}}`)
	m := decodeEnvelope(t, out)
	res, _ := m["result"].(map[string]any)
	if m["status"] != "success" || res["content"] != "Renamed foo to bar; the build passes." || res["turns"] != 2.0 {
		t.Fatalf("%s", out)
	}
	// The calls ran at once; the batch's files are sorted.
	want := []string{fmt.Sprintf("%[1]s/src/bar.rs %[1]s/src/lib.rs %[1]s/src/main.rs", root)}
	if got := runsOf(t, root); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("runs %q, want one run with the three files %q", got, want)
	}
	// The background runs, one per file.
	deadline := time.Now().Add(time.Minute)
	var lengths []byte
	for strings.Count(string(lengths), "\n") < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		lengths, _ = os.ReadFile(filepath.Join(root, ".lengths"))
	}
	for _, f := range []string{"/src/main.rs\n", "/src/lib.rs\n", "/src/bar.rs\n"} {
		if strings.Count(string(lengths), f) != 1 {
			t.Fatalf("background runs: %q", lengths)
		}
	}
}

func TestCallbacks_declaredInTheConfiguration(t *testing.T) {
	e, root := callbackEngine(t, "")
	seedTools(t, e)
	upsert(t, e, "w", rustCheck)
	mustConfigure(t, e, `
[[callbacks]]
name = "record"
description = "the files, as a Claude Code hook reads them"
pattern = ["*.md", "!drafts/**"]
blocking = true
timeout_secs = 10
pass_files = "stdin"
run = 'cat > "$CP_PROJECT_ROOT/hook.json"; echo "$CP_CALLBACK_NAME"'
`)
	list := evalString(t, e, `{"tool":"callback_list","session":"w","arguments":{}}`)
	if !strings.Contains(list, `"callbacks":[{"id":"config:record","name":"record"`) || !strings.Contains(list, `"configured":true,"active":true},{"id":"CB1","name":"rust-check"`) {
		t.Fatalf("%s", list)
	}
	out := evalString(t, e, `{"tool":"MultiEdit","session":"someone-else","arguments":{"also":["docs/a.md","drafts/b.md","src/x.rs"]}}`)
	if !strings.Contains(out, `"notices":[{"callback":"record","message":"Callback 'record' ✓: succeeded in `) || strings.Contains(out, "rust-check") {
		t.Fatalf("%s", out)
	}
	b, _ := os.ReadFile(filepath.Join(root, "hook.json"))
	if want := `{"callback_id":"config:record","callback_name":"record","project_root":` + jsonText(root) + `,"changed_files":[` + jsonText(root+"/docs/a.md") + `]}` + "\n"; string(b) != want {
		t.Fatalf("stdin %s, want %s", b, want)
	}
	// A table with a mistake: the configuration is refused, and the one in
	// force stays.
	bad := e.Configure([]byte("[[callbacks]]\nname = \"x\"\npattern = \"*\"\nrun = \"true\"\non_busy = \"later\"\n"))
	if !strings.Contains(string(bad), `callbacks[0]: callback \"x\": on_busy must be \"queue\" or \"skip\", not \"later\"`) {
		t.Fatalf("%s", bad)
	}
	if list2 := evalString(t, e, `{"tool":"callback_list","session":"w","arguments":{}}`); list2 != list {
		t.Fatalf("%s", list2)
	}
	mustConfigure(t, e, `{"callbacks":[]}`)
	if list3 := evalString(t, e, `{"tool":"callback_list","session":"w","arguments":{}}`); strings.Contains(list3, "record") {
		t.Fatalf("%s", list3)
	}
}

// changes_files in a [[tools]] table of the configuration.
func TestCallbacks_changesFilesOfAConfiguredTool(t *testing.T) {
	e, root := callbackEngine(t, "")
	upsert(t, e, "w", rustCheck)
	mustConfigure(t, e, `
[[tools]]
name = "rename"
changes_files = ["from", "to"]
lua = "return function(args) return {renamed = true} end"
`)
	out := evalString(t, e, `{"tool":"rename","session":"w","arguments":{"from":"src/old.rs","to":"src/new.rs"}}`)
	if !strings.Contains(out, `"result":{"renamed":true}`) || !strings.Contains(out, "✓: Build passed") {
		t.Fatalf("%s", out)
	}
	if got, want := runsOf(t, root), []string{root + "/src/old.rs " + root + "/src/new.rs"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("runs %q, want %q", got, want)
	}
	bad := e.Configure([]byte("[[tools]]\nname = \"x\"\nchanges_files = [\"/a~2\"]\nlua = \"return function() end\"\n"))
	if !strings.Contains(string(bad), `is not a JSON pointer`) {
		t.Fatalf("%s", bad)
	}
}
