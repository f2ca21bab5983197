package core_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/logging"
)

// The hardening of issue 10: each test failed before its fix.

// TestIssue10_trace_explains_a_policy_denial: "trace": true on a call
// denied by policy answered trace: []; it names the layer that decided.
func TestIssue10_trace_explains_a_policy_denial(t *testing.T) {
	e := rulesEngine(t, "[policy]\ndeny = [\"math_eval\"]\n[rules]\nbuiltin = false\n")
	expectEq(t, "config layer", evalString(t, e, `{"tool":"math_eval","trace":true,"arguments":{"expression":"1"}}`),
		`{"status":"error","error":"denied","message":"tool \"math_eval\" denied by the policy of the configuration: its deny list names it",`+
			`"trace":[{"policy":"the configuration","allowed":false,"reason":"its deny list names it"}]}`)
	evalString(t, e, `{"tool":"session_policy","session":"s1","arguments":{"deny":["get_time"]}}`)
	expectEq(t, "session layer", evalString(t, e, `{"tool":"get_time","session":"s1","trace":true,"policy":{"allow":["get_time"]}}`),
		`{"status":"error","error":"denied","message":"tool \"get_time\" denied by the policy of session \"s1\": its deny list names it",`+
			`"trace":[{"policy":"the configuration","allowed":true},{"policy":"session \"s1\"","allowed":false,"reason":"its deny list names it"}]}`)
	// (A request's allow list is what the tool it names may call, not that
	// tool (issue 26 §4): its deny list is what refuses the tool itself.)
	expectEq(t, "request layer", evalString(t, e, `{"tool":"echo","trace":true,"policy":{"allow":["get_time"],"deny":["echo"]},"id":7}`),
		`{"status":"error","id":7,"error":"denied","message":"tool \"echo\" denied by the policy of the request: its deny list names it",`+
			`"trace":[{"policy":"the configuration","allowed":true},{"policy":"the request","allowed":false,"reason":"its deny list names it"}]}`)
	// The audit keeps the request's id and why the call was denied.
	// (n: 5, not 2: with the fixed clock of the tests every record has the
	// same time, and the ring's shards give ties in any order.)
	tail := evalString(t, e, `{"tool":"audit_tail","arguments":{"n":5}}`)
	if !strings.Contains(tail, `"id":7,`) || !strings.Contains(tail, `"reason":"tool \"echo\" denied by the policy of the request: its deny list names it"`) {
		t.Fatalf("audit: %s", tail)
	}
}

// TestIssue10_meta_reaches_the_audit_and_the_rules: a request carrying
// MCP's _meta was refused as an unknown field.
func TestIssue10_meta_reaches_the_audit_and_the_rules(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	loadRuleText(t, e, "meta.toml", `
[rule]
id = "traced"
trigger = "on_tool_complete"
[condition]
expression = "context.meta.traceparent == '00-ab-01'"
[action]
type = "notify_self"
message = "seen {{ context.meta.traceparent }}"
`)
	expectEq(t, "meta", evalString(t, e, `{"tool":"echo","arguments":{"a":1},"_meta":{"traceparent":"00-ab-01"}}`),
		`{"status":"success","tool":"echo","result":{"a":1},"notices":[{"rule":"traced","message":"seen 00-ab-01","priority":"normal","event":"on_tool_complete"}]}`)
	// (n: 5, not 2: with the fixed clock of the tests every record has the
	// same time, and the ring's shards give ties in any order.)
	tail := evalString(t, e, `{"tool":"audit_tail","arguments":{"n":5}}`)
	if !strings.Contains(tail, `"meta":{"traceparent":"00-ab-01"}`) {
		t.Fatalf("audit: %s", tail)
	}
}

// TestIssue10_argument_values_never_reach_the_log: a pattern mismatch logged
// the value it refused, get_time the timezone it was given.
func TestIssue10_argument_values_never_reach_the_log(t *testing.T) {
	var logged syncBuffer
	e := core.New(core.Options{Logger: logging.New(logging.WriterSink(&logged), logging.Debug)})
	mustConfigure(t, e, "state_dir = \"\"\n")
	register(t, e, `{"name":"login","input_schema":{"type":"object","properties":{"pw":{"type":"string","pattern":"^[a-z]+$"}}}}`, answer(`1`))
	for _, req := range []string{
		`{"tool":"login","arguments":{"pw":"hunter2-SECRET-1"}}`,
		`{"tool":"get_time","arguments":{"timezone":"Mars/SECRET-2"}}`,
	} {
		if out := evalString(t, e, req); !strings.Contains(out, `"status":"error"`) {
			t.Fatalf("%s: %s", req, out)
		}
	}
	if log := logged.String(); strings.Contains(log, "SECRET") || !strings.Contains(log, `call of "login" failed: invalid_args`) {
		t.Fatalf("the log:\n%s", log)
	}
}

// TestIssue10_host_gets_back_in: a deny rule added at run time, or a session
// policy on the default session, survived clara_configure; clear drops them,
// and rules cannot deny the administrative tools unless configured so.
func TestIssue10_host_gets_back_in(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	loadRuleText(t, e, "lockout.toml", "[rule]\nid = \"no\"\ntrigger = \"on_tool_call\"\n[action]\ntype = \"deny\"\nreason = \"locked\"\n")
	if out := evalString(t, e, `{"tool":"echo"}`); !strings.Contains(out, `"error":"denied"`) {
		t.Fatalf("the deny rule does not deny: %s", out)
	}
	// The rule cannot reach rules_load, so the host could remove it...
	if out := evalString(t, e, `{"tool":"rules_list"}`); !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatalf("an administrative tool was denied by a rule: %s", out)
	}
	// ... unless the configuration lets rules govern those too.
	mustConfigure(t, e, "[rules]\nwatch_admin_tools = true\n")
	if out := evalString(t, e, `{"tool":"rules_list"}`); !strings.Contains(out, `"error":"denied"`) {
		t.Fatalf("watch_admin_tools = true: %s", out)
	}
	mustConfigure(t, e, "clear = [\"rules\"]\n[rules]\nwatch_admin_tools = false\n")
	expectEq(t, "after clear rules", evalString(t, e, `{"tool":"echo","arguments":{"x":1}}`),
		`{"status":"success","tool":"echo","result":{"x":1}}`)
	// clear is not kept: the next configuration does not clear again.
	if strings.Contains(string(e.Configure([]byte(""))), `"clear"`) {
		t.Fatal("clear was kept in the configuration")
	}
	evalString(t, e, `{"tool":"session_policy","arguments":{"deny":["echo","session_policy"]}}`)
	if out := evalString(t, e, `{"tool":"echo"}`); !strings.Contains(out, `"error":"denied"`) {
		t.Fatalf("the session policy does not deny: %s", out)
	}
	mustConfigure(t, e, "clear = [\"session_policies\"]\n")
	expectEq(t, "after clear session_policies", evalString(t, e, `{"tool":"echo"}`), `{"status":"success","tool":"echo","result":{}}`)
}

// TestIssue10_nested_calls_cannot_reach_admin_tools: a Lua tool, or a
// rule's call_tool, could call rules_load and install a deny-everything rule.
func TestIssue10_nested_calls_cannot_reach_admin_tools(t *testing.T) {
	e := rulesEngine(t, `
[rules]
builtin = false
[[tools]]
name = "sneaky"
lua = "return function() return call_tool('rules_load', {toml = '', name = 'x.toml'}) end"
`)
	out := evalString(t, e, `{"tool":"sneaky"}`)
	if !strings.Contains(out, `"error":"tool_failed"`) || !strings.Contains(out, `denied: tool \"rules_load\" denied: it is an administrative tool`) {
		t.Fatalf("a Lua tool reached rules_load: %s", out)
	}
	loadRuleText(t, e, "caller.toml", `
[rule]
id = "caller"
trigger = "poke"
[action]
type = "call_tool"
tool = "state_set"
arguments = { key = "k", value = 1 }
`)
	if out := emitString(t, e, `{"event":"poke"}`); !strings.Contains(out, `"error":"denied: tool \"state_set\" denied: it is an administrative tool`) {
		t.Fatalf("a rule reached state_set: %s", out)
	}
	mustConfigure(t, e, "[policy]\nadmin_in_nested_calls = true\n")
	if out := emitString(t, e, `{"event":"poke"}`); strings.Contains(out, `"error"`) {
		t.Fatalf("admin_in_nested_calls = true: %s", out)
	}
}

// TestIssue10_configuration_texts_are_bounded_and_strict: a 64 MiB TOML was
// read whole before being refused; JSON configuration accepted duplicate
// keys that requests refuse; rules.paths could read outside project_root.
func TestIssue10_configuration_texts_are_bounded_and_strict(t *testing.T) {
	e := newEngine(t)
	huge := make([]byte, 17<<20)
	for i := range huge {
		huge[i] = '#'
	}
	if out := string(e.Configure(huge)); !strings.Contains(out, `"message":"clara_configure: the configuration is 17825792 bytes, more than limits.max_request_bytes (16777216)"`) {
		t.Fatalf("huge: %.300s", out)
	}
	if out := string(e.Configure([]byte(`{"test_mode":true,"test_mode":false}`))); !strings.Contains(out, `duplicate key \"test_mode\"`) {
		t.Fatalf("duplicate keys: %s", out)
	}
	root := t.TempDir()
	outside := filepath.Join(filepath.Dir(root), "outside-"+filepath.Base(root)+".toml")
	if err := os.WriteFile(outside, []byte("[rule]\nid = \"o\"\ntrigger = \"t\"\n[action]\ntype = \"log\"\nmessage = \"m\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(outside)
	out := string(e.Configure([]byte(`{"project_root":` + jsonText(root) + `,"rules":{"paths":["../` + filepath.Base(outside) + `"]}}`)))
	if !strings.Contains(out, `leaves project_root`) {
		t.Fatalf("a relative path outside the root: %s", out)
	}
	// An absolute path in the configuration is taken as given.
	out = string(e.Configure([]byte(`{"project_root":` + jsonText(root) + `,"rules":{"paths":[` + jsonText(outside) + `]}}`)))
	if !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatalf("an absolute path: %s", out)
	}
	// The audit file must be a regular file.
	if out := string(e.Configure([]byte(`audit = { path = "/proc/self/mem" }`))); !strings.Contains(out, `is not a regular file`) {
		t.Fatalf("audit.path = /proc/self/mem: %s", out)
	}
}

// TestIssue10_rules_load_reads_only_regular_files_inside_the_root:
// rules_load {"paths":["/dev/zero"]} read without bound, and a named pipe
// hung forever while holding the configuration lock.
func TestIssue10_rules_load_reads_only_regular_files_inside_the_root(t *testing.T) {
	root := t.TempDir()
	e := rulesEngine(t, `{"project_root":`+jsonText(root)+`,"rules":{"builtin":false}}`)
	fifo := filepath.Join(root, "pipe.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() { done <- evalString(t, e, `{"tool":"rules_load","arguments":{"paths":["pipe.toml"]}}`) }()
	select {
	case out := <-done:
		if !strings.Contains(out, `"error":"invalid_args"`) {
			t.Fatalf("a named pipe: %s", out)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("rules_load of a named pipe hangs")
	}
	// clara_configure is not stuck behind it.
	mustConfigure(t, e, "[limits]\ntimeout_ms = 900\n")
	for _, p := range []string{"/dev/zero", "../../../../etc/passwd"} {
		out := evalString(t, e, `{"tool":"rules_load","arguments":{"paths":[`+jsonText(p)+`]}}`)
		if !strings.Contains(out, `"error":"invalid_args"`) || strings.Contains(out, "root:") {
			t.Fatalf("rules_load %s: %s", p, out)
		}
	}
	out := evalString(t, e, `{"tool":"rules_test","arguments":{"path":"/etc/passwd"}}`)
	if !strings.Contains(out, `"error":"invalid_args"`) || strings.Contains(out, "root:") {
		t.Fatalf("rules_test /etc/passwd: %s", out)
	}
}

// TestIssue10_rule_paths_recurse_and_report_what_matches_nothing:
// rules.paths = ["plugins/**/*.toml"] silently matched nothing.
func TestIssue10_rule_paths_recurse_and_report_what_matches_nothing(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"plugins/a.toml", "plugins/x/b.toml", "plugins/x/y/c.toml"} {
		p := filepath.Join(root, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		id := strings.TrimSuffix(filepath.Base(f), ".toml")
		if err := os.WriteFile(p, []byte("[rule]\nid = \""+id+"\"\ntrigger = \"t\"\n[action]\ntype = \"log\"\nmessage = \"m\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := core.New(core.Options{})
	// A pattern the configuration gives that matches nothing is an error
	// of the configuration, positioned at rules.paths (issue 26 §1).
	cfg := `{"state_dir":"","project_root":` + jsonText(root) + `,"rules":{"builtin":false,"paths":["plugins/**/*.toml","nothing/*.toml"]}}`
	out := string(e.Configure([]byte(cfg)))
	if want := `"message":"rules.paths: \"nothing/*.toml\" matches no file under ` + root + `"`; !strings.Contains(out, `"error":"invalid_request"`) || !strings.Contains(out, want) ||
		!strings.Contains(out, `"line":1,"col":`) {
		t.Fatalf("want %s in %s", want, out)
	}
	mustConfigure(t, e, `{"state_dir":"","project_root":`+jsonText(root)+`,"rules":{"builtin":false,"paths":["plugins/**/*.toml"]}}`)
	out = evalString(t, e, `{"tool":"rules_list"}`)
	for _, id := range []string{`"id":"a"`, `"id":"b"`, `"id":"c"`, `"unmatched_paths":[]`} {
		if !strings.Contains(out, id) {
			t.Fatalf("%s missing from %s", id, out)
		}
	}
}

// TestIssue10_emission_trees_are_bounded: emit_event was capped in depth
// (8) but not in breadth: a rule with N actions re-emitting its own event
// made N^7 emissions from one clara_emit.
func TestIssue10_emission_trees_are_bounded(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\nmax_emissions = 50\n")
	var actions strings.Builder
	for i := 0; i < 6; i++ {
		actions.WriteString("[[actions]]\ntype = \"emit_event\"\nevent = \"boom\"\n")
	}
	loadRuleText(t, e, "boom.toml", "[rule]\nid = \"boom\"\ntrigger = \"boom\"\n"+actions.String())
	out := emitString(t, e, `{"event":"boom"}`)
	if n := strings.Count(out, `"rule":"boom"`); n > 51 {
		t.Fatalf("%d emissions", n)
	}
	if !strings.Contains(out, `"emit_event: event \"boom\" refused: this event tree already set off 50 events and calls (rules.max_emissions)"`) {
		t.Fatalf("no refusal in the answer: %.400s", out)
	}
}

// TestIssue10_a_failed_state_write_is_not_silent: clara_emit answered
// success with the set_state action listed when the write failed.
func TestIssue10_a_failed_state_write_is_not_silent(t *testing.T) {
	root := t.TempDir()
	blocker := filepath.Join(root, "not-a-dir")
	if err := os.WriteFile(blocker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := rulesEngine(t, `{"project_root":`+jsonText(root)+`,"state_dir":"not-a-dir/state","rules":{"builtin":false}}`)
	loadRuleText(t, e, "w.toml", "[rule]\nid = \"w\"\ntrigger = \"t\"\n[action]\ntype = \"set_state\"\nkey = \"k\"\nvalue = 1\n")
	out := emitString(t, e, `{"event":"t"}`)
	if !strings.Contains(out, `{"error":"set_state: `) || strings.Contains(out, `"key":"k"`) {
		t.Fatalf("the failed write is not in the answer: %s", out)
	}
}
