package core_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/jsonx"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/toolbox"
)

var fixed = time.Date(2026, 11, 21, 21, 15, 37, 123e6, time.UTC)

// defaultConfigJSON is the embedded default configuration as Configure and
// Reset report it.
const defaultConfigJSON = `{"async":{"max_pending":10000,"max_running":1000},"audit":{"compress":false,"decision_ids":false,"max_age_days":0,"max_backups":0,"max_size_mb":0,"path":""},"callback_tools":{"models":false,"panel_bytes":2048,"run_model_scripts":false},"callbacks":[],"default_evaluator":"echo","doc_search":{"max_file_bytes":1048576,"max_files":10000,"patterns":["**/*.md"],"watch":true},"evaluator":{"timeout_ms":30000,"url":""},"kv":{"max_bytes":16777216,"max_keys":10000,"max_total_bytes":67108864,"max_total_keys":100000},"limits":{"max_calls_per_chat":0,"max_calls_per_session":0,"max_depth":512,"max_open_approvals":64,"max_open_questions":64,"max_output_bytes":65536,"max_overdue_calls":64,"max_request_bytes":16777216,"max_tool_calls":20,"max_turns":10,"timeout_ms":1000},"llm":{"api_key_env":"","app_title":"Clara","app_url":"","base_url":"","context_window":0,"embedding_model":"","max_history_messages":100,"max_response_bytes":4194304,"max_retries":2,"max_tokens":0,"model":"","provider":"","timeout_ms":60000},"log":{"format":"text"},"mcp":{"allow_remote":false,"list_ttl_ms":5000,"max_calls":64,"max_sessions":100,"max_waiting_calls":256,"session_idle_timeout_ms":1800000,"task_after_ms":2000,"task_ttl_ms":3600000,"token_env":"","wait_timeout_ms":600000},"mcp_servers":[],"network":{"allow_hosts":[]},"notices":{"dedupe_window_ms":60000},"plugins":{"paths":[".clara/plugins/*"]},"policy":{"admin_in_nested_calls":false,"allow":[],"approval_timeout_ms":120000,"deny":[]},"project_root":".","prompts":[],"resources":[],"rules":{"builtin":true,"max_emissions":1000,"mode":"enforce","paths":[".clara/rules/*.toml"],"redact_secrets":false,"thresholds":{"iteration_budget":25,"large_result_bytes":32768,"repeated_failures":3,"token_budget":0.8},"watch":true,"watch_admin_tools":false},"state_dir":".clara","store":{"backend":"sqlite","conversation_retention_hours":720,"on_unavailable":{"approvals":"fail","conversations":"fail","limits":"fail","notices":"local","state":"fail"},"pool_size":8,"statement_timeout_ms":2000,"url_env":"CLARA_DATABASE_URL"},"telemetry":{"content":false,"enabled":false,"endpoint":"","logs":true,"metric_interval_ms":60000,"metrics":true,"service_name":"","traces":true},"test_mode":false,"tools":[]}`

func newEngine(t testing.TB) *core.Engine {
	t.Helper()
	e := core.New(core.Options{Now: func() time.Time { return fixed }})
	t.Cleanup(e.Close) // an engine with a project_root and a state_dir watches it
	return e
}

func TestEvaluate_envelopes(t *testing.T) {
	e := newEngine(t)
	cases := []struct{ in, want string }{
		// Simple form: the whole object goes to the default evaluator.
		{`{"question":"what is 2+2?"}`, `{"status":"success","tool":"echo","result":{"question":"what is 2+2?"}}`},
		{` {"a" : [1, 2, {"b" : null}]}  `, `{"status":"success","tool":"echo","result":{"a":[1,2,{"b":null}]}}`},
		{`{"id":5,"session":"x"}`, `{"status":"success","tool":"echo","result":{"id":5,"session":"x"}}`},
		// Explicit form.
		{`{"tool":"echo","arguments":{"message":"hello"}}`, `{"status":"success","tool":"echo","result":{"message":"hello"}}`},
		{`{"tool":"echo"}`, `{"status":"success","tool":"echo","result":{}}`},
		{`{"tool":"echo","arguments":{"s":"\u0000\"\\é🎉"},"id":"r1"}`, `{"status":"success","id":"r1","tool":"echo","result":{"s":"\u0000\"\\é🎉"}}`},
		{`{"id":7,"tool":"echo","session":"s1","arguments":{}}`, `{"status":"success","id":7,"tool":"echo","result":{}}`},
		{`{"tool":"get_time"}`, `{"status":"success","tool":"get_time","result":{"time":"2026-11-21T21:15:37.123+00:00","timezone":"UTC","unix":1795295737}}`},
		{`{"tool":"get_time","arguments":{"timezone":"Asia/Kolkata"}}`, `{"status":"success","tool":"get_time","result":{"time":"2026-11-22T02:45:37.123+05:30","timezone":"Asia/Kolkata","unix":1795295737}}`},
		// Errors.
		{``, `{"status":"error","error":"invalid_json","message":"Invalid JSON: empty input"}`},
		{`{"a":`, `{"status":"error","error":"invalid_json","message":"Invalid JSON: unexpected end of input at byte 5"}`},
		{`[1]`, `{"status":"error","error":"invalid_json","message":"Invalid JSON: the request must be an object, got an array"}`},
		{"{\"a\":\"\xc3\x28\"}", `{"status":"error","error":"invalid_json","message":"Invalid JSON: invalid UTF-8 at byte 6"}`},
		{`{"tool":"nonexistent"}`, `{"status":"error","error":"unknown_tool","message":"Tool not found: nonexistent"}`},
		{`{"tool":"nope","id":"q"}`, `{"status":"error","id":"q","error":"unknown_tool","message":"Tool not found: nope"}`},
		{`{"tool":["echo"]}`, `{"status":"error","error":"invalid_request","message":"\"tool\" must be a non-empty string, got an array"}`},
		{`{"tool":"echo","arguments":5}`, `{"status":"error","error":"invalid_request","message":"\"arguments\" must be an object, got a number"}`},
		{`{"tool":"get_time","arguments":{"timezone":"Mars/Base"}}`, `{"status":"error","error":"invalid_args","message":"get_time: unknown timezone \"Mars/Base\" (use an IANA name such as \"Europe/Paris\")"}`},
		{`{"tool":"get_time","arguments":{"tz":"UTC"}}`, `{"status":"error","error":"invalid_args","message":"tool \"get_time\": arguments do not match input_schema: at the top: additional properties 'tz' not allowed","details":[{"pointer":"","message":"additional properties 'tz' not allowed"}]}`},
	}
	for _, c := range cases {
		got := string(e.Evaluate([]byte(c.in)))
		if got != c.want {
			t.Errorf("Evaluate(%q)\n got %s\nwant %s", c.in, got, c.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("Evaluate(%q) is not JSON: %s", c.in, got)
		}
	}
	if got := string(e.Evaluate(nil)); got != `{"status":"error","error":"invalid_json","message":"Invalid JSON: NULL input"}` {
		t.Errorf("Evaluate(nil) = %s", got)
	}
}

func TestEvaluate_toolErrorsAndPanics(t *testing.T) {
	var logged bytes.Buffer
	var mu sync.Mutex
	log := logging.New(func(l logging.Level, m string) { mu.Lock(); fmt.Fprintf(&logged, "%s %s\n", l, m); mu.Unlock() }, logging.Debug)
	e := core.New(core.Options{Logger: log})
	reg := func(name, returns string, run toolbox.Func) {
		if returns == "" {
			returns = "json"
		}
		d := fmt.Sprintf(`{"name":%q,"returns":%q}`, name, returns)
		if err := e.RegisterTool([]byte(d), toolbox.ToolOptions{Run: run}); err != nil {
			t.Fatal(err)
		}
	}
	reg("fails", "", func(context.Context, toolbox.Call) ([]byte, error) { return nil, errors.New("disk on fire") })
	reg("panics", "", func(context.Context, toolbox.Call) ([]byte, error) { panic("boom") })
	reg("badjson", "", func(context.Context, toolbox.Call) ([]byte, error) { return []byte(`{"a":`), nil })
	reg("spaced", "", func(context.Context, toolbox.Call) ([]byte, error) { return []byte(` { "a" : 1 } `), nil })
	reg("text", "string", func(context.Context, toolbox.Call) ([]byte, error) { return []byte("line\n\"q\"\xff"), nil })
	reg("nothing", "", func(context.Context, toolbox.Call) ([]byte, error) { return nil, nil })
	cases := []struct{ in, want string }{
		{`{"tool":"fails"}`, `{"status":"error","error":"tool_failed","message":"disk on fire"}`},
		{`{"tool":"panics"}`, `{"status":"error","error":"internal","message":"internal error"}`},
		{`{"tool":"badjson"}`, `{"status":"error","error":"tool_failed","message":"tool \"badjson\" returned invalid JSON: unexpected end of input at byte 5"}`},
		{`{"tool":"spaced"}`, `{"status":"success","tool":"spaced","result":{"a":1}}`},
		{`{"tool":"text"}`, `{"status":"success","tool":"text","result":"line\n\"q\"` + jsonx.InvalidByte + `"}`},
		{`{"tool":"nothing"}`, `{"status":"success","tool":"nothing","result":null}`},
	}
	for _, c := range cases {
		if got := string(e.Evaluate([]byte(c.in))); got != c.want {
			t.Errorf("Evaluate(%q)\n got %s\nwant %s", c.in, got, c.want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logged.String(), `panic in tool "panics": boom`) {
		t.Errorf("the panic's cause is not in the log:\n%s", logged.String())
	}
}

func TestConfigure(t *testing.T) {
	e := newEngine(t)
	got := string(e.Configure([]byte("default_evaluator = \"get_time\"\n[limits]\nmax_depth = 3\n")))
	want := `{"status":"success","result":{"config":{"async":{"max_pending":10000,"max_running":1000},"audit":{"compress":false,"decision_ids":false,"max_age_days":0,"max_backups":0,"max_size_mb":0,"path":""},"callback_tools":{"models":false,"panel_bytes":2048,"run_model_scripts":false},"callbacks":[],"default_evaluator":"get_time","doc_search":{"max_file_bytes":1048576,"max_files":10000,"patterns":["**/*.md"],"watch":true},"evaluator":{"timeout_ms":30000,"url":""},"kv":{"max_bytes":16777216,"max_keys":10000,"max_total_bytes":67108864,"max_total_keys":100000},"limits":{"max_calls_per_chat":0,"max_calls_per_session":0,"max_depth":3,"max_open_approvals":64,"max_open_questions":64,"max_output_bytes":65536,"max_overdue_calls":64,"max_request_bytes":16777216,"max_tool_calls":20,"max_turns":10,"timeout_ms":1000},"llm":{"api_key_env":"","app_title":"Clara","app_url":"","base_url":"","context_window":0,"embedding_model":"","max_history_messages":100,"max_response_bytes":4194304,"max_retries":2,"max_tokens":0,"model":"","provider":"","timeout_ms":60000},"log":{"format":"text"},"mcp":{"allow_remote":false,"list_ttl_ms":5000,"max_calls":64,"max_sessions":100,"max_waiting_calls":256,"session_idle_timeout_ms":1800000,"task_after_ms":2000,"task_ttl_ms":3600000,"token_env":"","wait_timeout_ms":600000},"mcp_servers":[],"network":{"allow_hosts":[]},"notices":{"dedupe_window_ms":60000},"plugins":{"paths":[".clara/plugins/*"]},"policy":{"admin_in_nested_calls":false,"allow":[],"approval_timeout_ms":120000,"deny":[]},"project_root":".","prompts":[],"resources":[],"rules":{"builtin":true,"max_emissions":1000,"mode":"enforce","paths":[".clara/rules/*.toml"],"redact_secrets":false,"thresholds":{"iteration_budget":25,"large_result_bytes":32768,"repeated_failures":3,"token_budget":0.8},"watch":true,"watch_admin_tools":false},"state_dir":".clara","store":{"backend":"sqlite","conversation_retention_hours":720,"on_unavailable":{"approvals":"fail","conversations":"fail","limits":"fail","notices":"local","state":"fail"},"pool_size":8,"statement_timeout_ms":2000,"url_env":"CLARA_DATABASE_URL"},"telemetry":{"content":false,"enabled":false,"endpoint":"","logs":true,"metric_interval_ms":60000,"metrics":true,"service_name":"","traces":true},"test_mode":false,"tools":[]}}}`
	if got != want {
		t.Fatalf("Configure TOML\n got %s\nwant %s", got, want)
	}
	if got := string(e.Evaluate([]byte(`{}`))); !strings.HasPrefix(got, `{"status":"success","tool":"get_time"`) {
		t.Errorf("default evaluator not applied: %s", got)
	}
	if got := string(e.Evaluate([]byte(`{"a":[[[1]]]}`))); got != `{"status":"error","error":"invalid_request","message":"request nests deeper than limits.max_depth (3) at byte 7"}` {
		t.Errorf("max_depth not applied: %s", got)
	}
	// JSON merges key by key.
	got = string(e.Configure([]byte(`{"limits":{"max_request_bytes":10}}`)))
	want = `{"status":"success","result":{"config":{"async":{"max_pending":10000,"max_running":1000},"audit":{"compress":false,"decision_ids":false,"max_age_days":0,"max_backups":0,"max_size_mb":0,"path":""},"callback_tools":{"models":false,"panel_bytes":2048,"run_model_scripts":false},"callbacks":[],"default_evaluator":"get_time","doc_search":{"max_file_bytes":1048576,"max_files":10000,"patterns":["**/*.md"],"watch":true},"evaluator":{"timeout_ms":30000,"url":""},"kv":{"max_bytes":16777216,"max_keys":10000,"max_total_bytes":67108864,"max_total_keys":100000},"limits":{"max_calls_per_chat":0,"max_calls_per_session":0,"max_depth":3,"max_open_approvals":64,"max_open_questions":64,"max_output_bytes":65536,"max_overdue_calls":64,"max_request_bytes":10,"max_tool_calls":20,"max_turns":10,"timeout_ms":1000},"llm":{"api_key_env":"","app_title":"Clara","app_url":"","base_url":"","context_window":0,"embedding_model":"","max_history_messages":100,"max_response_bytes":4194304,"max_retries":2,"max_tokens":0,"model":"","provider":"","timeout_ms":60000},"log":{"format":"text"},"mcp":{"allow_remote":false,"list_ttl_ms":5000,"max_calls":64,"max_sessions":100,"max_waiting_calls":256,"session_idle_timeout_ms":1800000,"task_after_ms":2000,"task_ttl_ms":3600000,"token_env":"","wait_timeout_ms":600000},"mcp_servers":[],"network":{"allow_hosts":[]},"notices":{"dedupe_window_ms":60000},"plugins":{"paths":[".clara/plugins/*"]},"policy":{"admin_in_nested_calls":false,"allow":[],"approval_timeout_ms":120000,"deny":[]},"project_root":".","prompts":[],"resources":[],"rules":{"builtin":true,"max_emissions":1000,"mode":"enforce","paths":[".clara/rules/*.toml"],"redact_secrets":false,"thresholds":{"iteration_budget":25,"large_result_bytes":32768,"repeated_failures":3,"token_budget":0.8},"watch":true,"watch_admin_tools":false},"state_dir":".clara","store":{"backend":"sqlite","conversation_retention_hours":720,"on_unavailable":{"approvals":"fail","conversations":"fail","limits":"fail","notices":"local","state":"fail"},"pool_size":8,"statement_timeout_ms":2000,"url_env":"CLARA_DATABASE_URL"},"telemetry":{"content":false,"enabled":false,"endpoint":"","logs":true,"metric_interval_ms":60000,"metrics":true,"service_name":"","traces":true},"test_mode":false,"tools":[]}}}`
	if got != want {
		t.Fatalf("Configure JSON\n got %s\nwant %s", got, want)
	}
	// Errors apply nothing and list every problem.
	got = string(e.Configure([]byte("default_evaluator = 5\nbogus = 1\n[limits]\nmax_depth = 0\ntypo = true\n")))
	want = `{"status":"error","error":"invalid_request","message":"clara_configure: 4 problems: 1:1: default_evaluator must be a string; 2:1: unknown key \"bogus\"; 4:1: limits.max_depth must be an integer from 1 to 1048576; 5:1: unknown key \"limits.typo\"",` +
		`"details":[{"line":1,"col":1,"message":"default_evaluator must be a string"},{"line":2,"col":1,"message":"unknown key \"bogus\""},{"line":4,"col":1,"message":"limits.max_depth must be an integer from 1 to 1048576"},{"line":5,"col":1,"message":"unknown key \"limits.typo\""}]}`
	if got != want {
		t.Fatalf("Configure errors\n got %s\nwant %s", got, want)
	}
	if e.Config().Limits.MaxDepth != 3 || e.Config().DefaultEvaluator != "get_time" {
		t.Errorf("a failed configure changed the configuration: %+v", e.Config())
	}
	for _, bad := range []string{"a = ", `{"a":`, `{"default_evaluator":"get_time"}]]]`, `{"default_evaluator":"get_time"} }`, `{"default_evaluator":"has space"}`, `{"limits":5}`, `{"limits":{"max_calls_per_chat":0,"max_calls_per_session":0,"max_depth":1.5}}`, `{} {}`} {
		if got := string(e.Configure([]byte(bad))); !strings.HasPrefix(got, `{"status":"error","error":"invalid_request","message":"clara_configure: `) {
			t.Errorf("Configure(%q) = %s", bad, got)
		}
	}
	if got := string(e.Configure(nil)); got != `{"status":"error","error":"invalid_request","message":"clara_configure: NULL input"}` {
		t.Errorf("Configure(nil) = %s", got)
	}
	if got := string(e.Configure([]byte(""))); !strings.HasPrefix(got, `{"status":"success"`) {
		t.Errorf("empty configuration should change nothing: %s", got)
	}
	// Reset returns to the defaults and drops registered tools.
	if err := e.RegisterTool([]byte(`{"name":"mine"}`), toolbox.ToolOptions{Run: func(context.Context, toolbox.Call) ([]byte, error) { return nil, nil }}); err != nil {
		t.Fatal(err)
	}
	got = string(e.Reset())
	want = `{"status":"success","result":{"config":` + defaultConfigJSON + `}}`
	if got != want {
		t.Fatalf("Reset\n got %s\nwant %s", got, want)
	}
	if _, ok := e.Tools().Lookup("mine"); ok {
		t.Error("Reset kept a registered tool")
	}
	if _, ok := e.Tools().Lookup("echo"); !ok {
		t.Error("Reset dropped a built-in tool")
	}
}

// Projects' own rules read thresholds of their own: rules.thresholds takes
// any number under a name expressions can reach, and nothing else.
func TestConfigure_ownThresholds(t *testing.T) {
	e := newEngine(t)
	got := string(e.Configure([]byte("[rules.thresholds]\ntoo_warm = 30\n")))
	if !strings.Contains(got, `"thresholds":{"iteration_budget":25,"large_result_bytes":32768,"repeated_failures":3,"token_budget":0.8,"too_warm":30}`) {
		t.Fatalf("own threshold not kept: %s", got)
	}
	got = string(e.Configure([]byte(`{"rules":{"thresholds":{"too-warm":1,"name":"x"}}}`)))
	want := `{"status":"error","error":"invalid_request","message":"clara_configure: 2 problems: 1:25: unknown key \"rules.thresholds.too-warm\"; 1:38: rules.thresholds.name must be a number",` +
		`"details":[{"line":1,"col":25,"message":"unknown key \"rules.thresholds.too-warm\""},{"line":1,"col":38,"message":"rules.thresholds.name must be a number"}]}`
	if got != want {
		t.Fatalf("bad thresholds\n got %s\nwant %s", got, want)
	}
}

func TestConfigure_tomlErrorHasPosition(t *testing.T) {
	got := string(newEngine(t).Configure([]byte("[limits]\nmax_depth = = 3\n")))
	if !strings.Contains(got, `"message":"clara_configure: 2:13: unexpected character U+003D '=' at start of value","details":[{"line":2,"col":13,`) {
		t.Errorf("no position in %s", got)
	}
}

func TestFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/clara.toml"
	if err := writeFile(path, "default_evaluator = \"get_time\"\n"); err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	env := map[string]string{"CLARA_CONFIG": path, "CLARA_LOG": "info"}
	e := core.FromEnvironment(func(k string) string { return env[k] }, &stderr)
	t.Cleanup(e.Close) // it watches its project's rule folders: project_root is the file's
	if e.Config().DefaultEvaluator != "get_time" {
		t.Fatalf("CLARA_CONFIG not applied: %+v", e.Config())
	}
	e.Configure([]byte(`default_evaluator = "echo"`))
	e.Reset()
	if e.Config().DefaultEvaluator != "get_time" {
		t.Errorf("Reset did not return to CLARA_CONFIG: %+v", e.Config())
	}
	if !strings.Contains(stderr.String(), "clara info: configuration loaded from "+path) {
		t.Errorf("stderr: %q", stderr.String())
	}

	stderr = syncBuffer{}
	env = map[string]string{"CLARA_CONFIG": dir + "/missing.toml", "CLARA_LOG": "loud", "CLARA_CONFIG_ON_ERROR": "defaults"}
	e = core.FromEnvironment(func(k string) string { return env[k] }, &stderr)
	if e.Config().DefaultEvaluator != "echo" {
		t.Errorf("a missing CLARA_CONFIG changed the configuration")
	}
	out := stderr.String()
	if !strings.Contains(out, `CLARA_LOG="loud" is not one of`) || !strings.Contains(out, "CLARA_CONFIG ignored (CLARA_CONFIG_ON_ERROR=defaults): reading "+dir+"/missing.toml") {
		t.Errorf("stderr: %q", out)
	}
	// A host's sink replaces stderr; nil restores it.
	var got []string
	e.SetLogSink(func(l logging.Level, m string) { got = append(got, m) }, logging.Debug)
	e.Evaluate([]byte(`{"tool":"nope"}`))
	if len(got) != 2 || !strings.HasPrefix(got[0], `audit {"ts":`) || !strings.Contains(got[1], `call of "nope" failed: unknown_tool`) {
		t.Errorf("sink got %q", got)
	}
	e.SetLogSink(nil, 0)
	e.Evaluate([]byte(`{"tool":"nope"}`))
	if len(got) != 2 {
		t.Errorf("old sink still called")
	}
}

// TestEngine_concurrentUse runs calls while the configuration and the
// registry change under them (run with -race).
func TestEngine_concurrentUse(t *testing.T) {
	e := newEngine(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			req := []byte(fmt.Sprintf(`{"tool":"echo","arguments":{"g":%d}}`, g))
			want := fmt.Sprintf(`{"status":"success","tool":"echo","result":{"g":%d}}`, g)
			for i := 0; i < 2000; i++ {
				if got := string(e.Evaluate(req)); got != want {
					t.Errorf("got %s", got)
					return
				}
				if got := e.Evaluate([]byte(`{"tool":"churn"}`)); !bytes.Contains(got, []byte(`"status"`)) {
					t.Errorf("got %s", got)
					return
				}
			}
		}(g)
	}
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			e.RegisterTool([]byte(`{"name":"churn"}`), toolbox.ToolOptions{Run: func(context.Context, toolbox.Call) ([]byte, error) { return []byte(`1`), nil }})
			e.Configure([]byte(fmt.Sprintf(`{"limits":{"max_calls_per_chat":0,"max_calls_per_session":0,"max_depth":%d}}`, 100+i%10)))
			e.UnregisterTool("churn")
		}
	}()
	wg.Wait()
	close(stop)
	<-churned
}
