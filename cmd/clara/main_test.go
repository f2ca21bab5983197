package main

// Every test here runs the built program: TestMain builds it with the Go
// that runs the tests, and each test runs it in a directory of its own,
// with no CLARA_* variable but those it sets, and reads its exit status,
// stdout and stderr.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/llm/llmtest"
)

var claraBin string

func TestMain(m *testing.M) {
	// CLARA_CLI_BIN runs the tests against another build (an older one,
	// to see them fail).
	if claraBin = os.Getenv("CLARA_CLI_BIN"); claraBin != "" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "clara-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	claraBin = filepath.Join(dir, "clara")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", claraBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building clara:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// invocation is one run of the program.
type invocation struct {
	dir   string   // working directory; a fresh one when ""
	env   []string // NAME=VALUE added to the environment (CLARA_* removed)
	stdin string
}

func (in invocation) command(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	// A run that does not end (an unknown flag taken for --listen) fails
	// its test rather than hangs it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, claraBin, args...)
	cmd.Dir = in.dir
	if cmd.Dir == "" {
		cmd.Dir = t.TempDir()
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CLARA_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, in.env...)
	cmd.Stdin = strings.NewReader(in.stdin)
	return cmd
}

// run runs the program to its end and returns its exit status, stdout and
// stderr.
func (in invocation) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := in.command(t, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

func runClara(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return invocation{}.run(t, args...)
}

// writeConfig writes a configuration file into dir and returns its path.
func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	path := filepath.Join(dir, "clara.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHelp_on_every_command: -h and --help print the command's help with
// examples on stdout and exit 0 (chat -h used to become the prompt, call
// --help a call of a tool named --help); --version and version print the
// version; no command is a mistake whose usage goes to stderr.
func TestHelp_on_every_command(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"}, {"chat", "-h"}, {"chat", "--help"}, {"call", "--help"}, {"call", "-h", "echo"},
		{"tools", "--help"}, {"rules", "test", "--help"}, {"rules", "--help"}, {"check", "--help"},
		{"audit", "tail", "--help"}, {"mcp", "--help"}, {"help", "chat"},
	} {
		code, out, errs := runClara(t, args...)
		if code != 0 || !strings.Contains(out, "Usage:") || errs != "" {
			t.Errorf("%q: %d, stdout %q, stderr %q", args, code, out, errs)
		}
		if args[0] != "rules" || len(args) > 2 {
			if !strings.Contains(out, "Example") {
				t.Errorf("%q: no examples in\n%s", args, out)
			}
		}
	}
	for _, args := range [][]string{{"--version"}, {"version"}} {
		if code, out, errs := runClara(t, args...); code != 0 || out != "clara "+core.Version+"\n" || errs != "" {
			t.Errorf("%q: %d %q %q", args, code, out, errs)
		}
	}
	code, out, errs := runClara(t)
	if code != 2 || out != "" || !strings.Contains(errs, "Usage:") || !strings.Contains(errs, "a command is needed") {
		t.Errorf("no command: %d %q %q", code, out, errs)
	}
}

// TestFlags_are_exact_and_go_anywhere: a flag is its whole name (no
// --sessionXYZ for --session, no unknown flag taken for --listen), before
// or after the positionals.
func TestFlags_are_exact_and_go_anywhere(t *testing.T) {
	code, out, errs := runClara(t, "call", "echo", "--sessionXYZ", "s1")
	if code != 2 || out != "" || !strings.Contains(errs, "unknown flag: --sessionXYZ") {
		t.Errorf("--sessionXYZ: %d %q %q", code, out, errs)
	}
	start := time.Now()
	code, out, errs = runClara(t, "mcp", "--listenXYZW", "127.0.0.1:0")
	if code != 2 || out != "" || !strings.Contains(errs, "unknown flag: --listenXYZW") || time.Since(start) > 30*time.Second {
		t.Errorf("mcp --listenXYZW: %d %q %q", code, out, errs)
	}
	for _, args := range [][]string{
		{"call", "--session", "s1", "echo", `{"a":1}`},
		{"call", "echo", `{"a":1}`, "--session", "s1"},
		{"--json", "call", "echo", `{"a":1}`, "--session=s1"},
	} {
		code, out, errs := runClara(t, args...)
		want := `{"a":1}` + "\n"
		if args[0] == "--json" {
			want = `{"status":"success","tool":"echo","result":{"a":1}}` + "\n"
		}
		if code != 0 || out != want || errs != "" {
			t.Errorf("%q: %d %q %q", args, code, out, errs)
		}
	}
}

// TestCall_result_on_stdout_errors_on_stderr: a call prints its result;
// an error envelope puts nothing on stdout (so `> answer.txt` stays
// clean) but its message on stderr, exit 1; --json prints the envelope
// either way; bad arguments and unknown commands exit 2.
func TestCall_result_on_stdout_errors_on_stderr(t *testing.T) {
	code, out, errs := runClara(t, "call", "math_eval", `{"expression":"6*7"}`)
	if code != 0 || out != `{"expression":"6*7","value":42}`+"\n" || errs != "" {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	code, out, errs = runClara(t, "call", "nope")
	if code != 1 || out != "" || errs != "clara: unknown_tool: Tool not found: nope\n" {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	code, out, _ = runClara(t, "call", "nope", "--json")
	if code != 1 || out != `{"status":"error","error":"unknown_tool","message":"Tool not found: nope"}`+"\n" {
		t.Fatalf("--json: %d %q", code, out)
	}
	if code, out, errs := runClara(t, "call", "echo", "{bad"); code != 2 || out != "" || !strings.Contains(errs, "not JSON") {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	if code, _, errs := runClara(t, "frobnicate"); code != 2 || !strings.Contains(errs, `unknown command "frobnicate"`) {
		t.Fatalf("%d %q", code, errs)
	}
	if code, _, errs := runClara(t, "call"); code != 2 || !strings.Contains(errs, "accepts between 1 and 2 arg(s)") {
		t.Fatalf("%d %q", code, errs)
	}
}

// TestCall_json5_arguments: ARGUMENTS written by hand as JSON5 (seed
// 002's option strings) are read as JSON5 once they are not JSON.
func TestCall_json5_arguments(t *testing.T) {
	code, out, errs := runClara(t, "call", "math_eval", "{expression: '6*7'}")
	if code != 0 || out != `{"expression":"6*7","value":42}`+"\n" || errs != "" {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	code, out, errs = runClara(t, "call", "echo", `{ // a comment
		hex: 0x10, quote: 'say "hi"', list: [1, 2,], }`)
	if code != 0 || out != `{"hex":16,"list":[1,2],"quote":"say \"hi\""}`+"\n" || errs != "" {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	if code, out, errs := runClara(t, "call", "echo", "{n: Infinity}"); code != 2 || out != "" || !strings.Contains(errs, "nor JSON5: Infinity has no JSON form") {
		t.Fatalf("%d %q %q", code, out, errs)
	}
}

// TestCall_trace prints how the policy layers and the rules decided, with
// the rules' times in µs, on stderr.
func TestCall_trace(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"rules/watch.toml": `
[rule]
id = "watch_echo"
trigger = "on_tool_call"
[condition]
expression = "context.tool.name == 'echo'"
[action]
type = "notify_self"
message = "echo called"
`})
	cfg := writeConfig(t, dir, "state_dir = \"\"\n[policy]\ndeny = [\"get_time\"]\n")
	in := invocation{dir: dir}
	code, out, errs := in.run(t, "--config", cfg, "call", "echo", `{"m":1}`, "--trace")
	if code != 0 || out != `{"m":1}`+"\n" {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	for _, want := range []string{"notice (normal, watch_echo): echo called\n", "trace:\n", "  policy  the configuration: allowed\n",
		"  rule    watch_echo on on_tool_call: matched (true), ", " µs\n", "notify_self: message \"echo called\", priority \"normal\""} {
		if !strings.Contains(errs, want) {
			t.Errorf("no %q in stderr:\n%s", want, errs)
		}
	}
	code, out, errs = in.run(t, "--config", cfg, "call", "get_time", "--trace")
	if code != 1 || out != "" || !strings.Contains(errs, "policy  the configuration: denied (its deny list names it)") {
		t.Errorf("denied: %d %q %q", code, out, errs)
	}
	code, out, _ = in.run(t, "--config", cfg, "call", "echo", "--trace", "--json")
	if code != 0 || !strings.Contains(out, `"trace":[`) {
		t.Errorf("--json --trace: %d %q", code, out)
	}
}

// TestTools_format names its choices instead of the schema validator's
// message.
func TestTools_format(t *testing.T) {
	code, out, _ := runClara(t, "tools", "--format", "openai")
	if code != 0 || !strings.Contains(out, `"name": "math_eval"`) || strings.Contains(out, `"rules_load"`) {
		t.Fatalf("%d %s", code, out)
	}
	code, out, _ = runClara(t, "tools", "--format", "mcp", "--all")
	if code != 0 || !strings.Contains(out, `"name": "rules_load"`) {
		t.Fatalf("--all: %d %s", code, out)
	}
	code, out, errs := runClara(t, "tools", "--format", "bogus")
	if code != 2 || out != "" || !strings.Contains(errs, `--format "bogus": choose one of clara, openai, anthropic, mcp`) ||
		strings.Contains(errs, "value must be one of") {
		t.Fatalf("%d %q %q", code, out, errs)
	}
}

// TestConfig_problems_exit_2_positioned: a bad --config or CLARA_CONFIG
// stops the command with every problem at its file and line.
func TestConfig_problems_exit_2_positioned(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "\n[limits]\nbogus = 1\n")
	code, out, errs := runClara(t, "--config", cfg, "call", "echo")
	if code != 2 || out != "" || !strings.Contains(errs, cfg+`:3:1: unknown key "limits.bogus"`) {
		t.Errorf("--config: %d %q %q", code, out, errs)
	}
	code, out, errs = invocation{env: []string{"CLARA_CONFIG=" + cfg}}.run(t, "call", "echo")
	if code != 2 || out != "" || !strings.Contains(errs, cfg+`:3:1: unknown key "limits.bogus"`) {
		t.Errorf("CLARA_CONFIG: %d %q %q", code, out, errs)
	}
	code, _, errs = runClara(t, "--config", filepath.Join(dir, "missing.toml"), "call", "echo")
	if code != 2 || !strings.Contains(errs, "no such file") {
		t.Errorf("missing: %d %q", code, errs)
	}
}

func scriptedModel(t *testing.T, script string) *llmtest.Server {
	t.Helper()
	sc, err := llmtest.LoadScript(filepath.Join("..", "..", "tests", "llm", script+".toml"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := llmtest.NewServer("", sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func TestChat_verbose_against_the_scripted_provider(t *testing.T) {
	srv := scriptedModel(t, "openai_weather")
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `state_dir = ""
[llm]
base_url = "`+srv.BaseURL("openai_weather")+`"
model = "gpt-4o-mini"
api_key_env = "CLARA_TEST_KEY"

[[tools]]
name = "get_current_weather"
description = "Get the current weather in a given location"
input_schema = { type = "object", properties = { location = { type = "string" } }, required = ["location"] }
lua = 'return function(args) return { temperature = "22", location = args.location } end'
`)
	// The prompt's words, the flags after them.
	code, out, errs := invocation{dir: dir, env: []string{"CLARA_TEST_KEY=sk-cli-secret"}}.run(t, "--config", cfg, "chat",
		"What", "is", "the", "weather", "like", "in", "Boston", "today?",
		"--allow-tools", "--tools", "get_current_weather", "--max-tool-calls", "3", "--verbose")
	if code != 0 || out != "It is 22 degrees Celsius and sunny in Boston today.\n" {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	if !strings.Contains(errs, "↪ tool: get_current_weather({\"location\":\"Boston, MA\"})") || !strings.Contains(errs, "✔ tool result received (") {
		t.Fatalf("no status lines: %q", errs)
	}
	if strings.Contains(out+errs, "sk-cli-secret") {
		t.Fatal("the key leaked")
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestChat_ask_reads_the_user_from_stdin(t *testing.T) {
	srv := scriptedModel(t, "ask_user_answer")
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "state_dir = \"\"\n[llm]\nbase_url = \""+srv.BaseURL("ask_user_answer")+"\"\nmodel = \"test-model\"\n")
	code, out, errs := invocation{dir: dir, stdin: "Boston\n"}.run(t, "--config", cfg, "chat", "Find out which city the user means.",
		"--allow-tools", "--tools", "ask_user", "--ask",
		"--result-schema", `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)
	if code != 0 || out != `{"city":"Boston"}`+"\n" || errs != "? Which city?\n> " {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestChat_failure_leaves_stdout_empty: `clara chat ... > answer.txt`
// must not write the error into the answer; --json prints the envelope.
func TestChat_failure_leaves_stdout_empty(t *testing.T) {
	srv := scriptedModel(t, "error_500")
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "state_dir = \"\"\n[llm]\nbase_url = \""+srv.BaseURL("error_500")+"\"\nmodel = \"gpt-4o-mini\"\nmax_retries = 0\n")
	code, out, errs := invocation{dir: dir}.run(t, "--config", cfg, "chat", "hello")
	if code != 1 || out != "" || !strings.HasPrefix(errs, "clara: ") {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	srv2 := scriptedModel(t, "error_500")
	cfg = writeConfig(t, dir, "state_dir = \"\"\n[llm]\nbase_url = \""+srv2.BaseURL("error_500")+"\"\nmodel = \"gpt-4o-mini\"\nmax_retries = 0\n")
	code, out, _ = invocation{dir: dir}.run(t, "--config", cfg, "--json", "chat", "hello")
	var env struct{ Status, Error string }
	if code != 1 || json.Unmarshal([]byte(out), &env) != nil || env.Status != "error" || env.Error == "" {
		t.Fatalf("--json: %d %q", code, out)
	}
}

// TestCheck reports every problem of a configuration and the files it
// names, positioned, and starts nothing; a good one passes.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	writeFiles(t, dir, map[string]string{
		"rules/bad.toml":        "[rule]\nid = \"bad\"\ntrigger = \"on_tool_call\"\n[condition]\nexpression = \"1 +\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n",
		"plugins/p/plugin.toml": "name = \"p\"\nbogus = true\n",
	})
	cfg := writeConfig(t, dir, `state_dir = ""

[[tools]]
name = "broken"
lua = "return function( end"

[[mcp_servers]]
name = "srv"
command = "sh"
args = ["-c", "touch `+started+`"]
eager = true
`)
	in := invocation{dir: dir}
	code, out, errs := in.run(t, "check", "--config", cfg)
	want := []string{
		"clara.toml:3:3: tools[0] (broken): lua",
		filepath.Join("plugins", "p", "plugin.toml") + `:2:1: unknown key "bogus"`,
		filepath.Join("rules", "bad.toml") + `:5: rule "bad": condition:`,
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || len(lines) != len(want) || !strings.Contains(errs, "3 problems") {
		t.Fatalf("%d\n%s\n%s", code, out, errs)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want it to start %q", i+1, lines[i], w)
		}
	}
	if _, err := os.Stat(started); err == nil {
		t.Error("check started the MCP server")
	}
	code, out, _ = in.run(t, "--json", "check", "--config", cfg)
	var report struct {
		Source   string
		Problems []struct {
			File    string
			Line    int
			Message string
		}
	}
	if code != 1 || json.Unmarshal([]byte(out), &report) != nil || report.Source != cfg || len(report.Problems) != 3 || report.Problems[0].Line != 3 {
		t.Fatalf("--json: %d %s", code, out)
	}
	// Fixed, it passes; CLARA_CONFIG is checked when --config is not given.
	writeFiles(t, dir, map[string]string{
		"rules/bad.toml":        "[rule]\nid = \"bad\"\ntrigger = \"on_tool_call\"\n[condition]\nexpression = \"1 + 1 == 2\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n",
		"plugins/p/plugin.toml": "name = \"p\"\n",
	})
	good := writeConfig(t, dir, "state_dir = \"\"\n[[tools]]\nname = \"fine\"\nlua = \"return function(a) return a end\"\n")
	code, out, errs = invocation{dir: dir, env: []string{"CLARA_CONFIG=" + good}}.run(t, "check")
	if code != 0 || out != good+": no problems\n" || errs != "" {
		t.Fatalf("good: %d %q %q", code, out, errs)
	}
}

// TestRulesTest: without files, the built-in rules' own tests (as the
// help promises); -v, --run, --coverage and --format json; a failing case
// exits 1; a bad --run exits 2.
func TestRulesTest(t *testing.T) {
	code, out, errs := runClara(t, "rules", "test")
	if code != 0 || !strings.Contains(out, "ok   builtin/token_budget.test.toml: 4 passed, 0 failed\n") ||
		!strings.HasSuffix(out, "rules test: 4 files, 14 passed, 0 failed\n") || errs != "" {
		t.Fatalf("built-in: %d %q %q", code, out, errs)
	}
	code, out, _ = runClara(t, "rules", "test", "-v", "--run", "^warns at", "--coverage")
	for _, want := range []string{"  ok   warns at 85%\n", "  ok   warns at turn 30\n", "rules test: 4 files, 3 passed, 0 failed\n",
		"coverage: 3 of 4 rules fired, 3 of 4 actions applied\n",
		"rules no case fired:\n  builtin/large_result.toml:4 large_result (on_tool_complete)\n",
		"actions no case applied:\n  builtin/large_result.toml:4 large_result action 1 (notify_self)\n"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("-v --run --coverage: %d, no %q in\n%s", code, want, out)
		}
	}
	if strings.Contains(out, "quiet at") {
		t.Errorf("--run ran other cases:\n%s", out)
	}

	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"rules/valve.toml": `
[[rules]]
id = "valve_locked"
trigger = "on_tool_call"
[rules.condition]
expression = "context.tool.name == 'open_valve' && context.tool.arguments.valve_id == 7"
[rules.action]
type = "deny"
reason = "valve 7 is locked"

[[rules]]
id = "valve_logged"
trigger = "on_tool_complete"
[rules.condition]
expression = "context.tool.name == 'open_valve'"
[[rules.actions]]
type = "log"
message = "opened"
[[rules.actions]]
type = "set_state"
key = "opened"
value = true
`,
		"rules/valve.test.toml": `
[[cases]]
name = "valve 7 is denied"
event = "on_tool_call"
tool = { name = "open_valve", arguments = { valve_id = 7 } }
denied = "valve 7 is locked"

[[cases]]
name = "valve 3 is not"
event = "on_tool_call"
tool = { name = "open_valve", arguments = { valve_id = 3 } }
denied = ""
`,
		"rules/wrong.test.toml": `
[[cases]]
name = "wrong on purpose"
event = "on_tool_call"
tool = { name = "open_valve", arguments = { valve_id = 3 } }
denied = "valve 7 is locked"
`,
	})
	cfg := writeConfig(t, dir, "state_dir = \"\"\n[rules]\nbuiltin = false\n")
	in := invocation{dir: dir}
	code, out, _ = in.run(t, "--config", cfg, "rules", "test", "rules/valve.test.toml", "--coverage")
	if code != 0 || !strings.Contains(out, "ok   rules/valve.test.toml: 2 passed, 0 failed\n") ||
		!strings.Contains(out, "coverage: 1 of 2 rules fired, 1 of 3 actions applied\n") ||
		!strings.Contains(out, "rules/valve.toml:12 valve_logged (on_tool_complete)\n") ||
		!strings.Contains(out, "rules/valve.toml:12 valve_logged action 2 (set_state)\n") {
		t.Fatalf("coverage: %d\n%s", code, out)
	}
	code, out, _ = in.run(t, "--config", cfg, "rules", "test", "rules/valve.test.toml", "rules/wrong.test.toml", "rules/missing.test.toml")
	for _, want := range []string{"FAIL rules/wrong.test.toml: 0 passed, 1 failed\n", "  FAIL wrong on purpose\n",
		`         denied: got "", want "valve 7 is locked"` + "\n", "FAIL rules/missing.test.toml: ", "rules test: 3 files, 2 passed, 1 failed, 1 not run\n"} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("failing: %d, no %q in\n%s", code, want, out)
		}
	}
	code, out, _ = in.run(t, "--config", cfg, "rules", "test", "--format", "json", "--coverage", "rules/valve.test.toml")
	var run testRun
	if code != 0 || json.Unmarshal([]byte(out), &run) != nil || run.Passed != 2 || len(run.Files) != 1 || run.Coverage == nil || len(run.Coverage.Rules) != 2 {
		t.Fatalf("json: %d %s", code, out)
	}
	if code, _, errs := runClara(t, "rules", "test", "--run", "("); code != 2 || !strings.Contains(errs, "--run: error parsing regexp") {
		t.Fatalf("bad --run: %d %q", code, errs)
	}
	if code, _, errs := runClara(t, "rules", "test", "--format", "xml"); code != 2 || !strings.Contains(errs, "choose one of text, json") {
		t.Fatalf("bad --format: %d %q", code, errs)
	}
}

// TestAuditTail reads the audit file of the configuration: the last
// records, as JSONL with --json, and with -f those appended until
// interrupted.
func TestAuditTail(t *testing.T) {
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit.jsonl")
	cfg := writeConfig(t, dir, "state_dir = \"\"\n[audit]\npath = \""+audit+"\"\n")
	in := invocation{dir: dir}
	for _, args := range [][]string{{"call", "echo"}, {"call", "nope"}, {"call", "math_eval", `{"expression":"1"}`, "--session", "s1"}} {
		in.run(t, append([]string{"--config", cfg}, args...)...)
	}
	code, out, errs := in.run(t, "--config", cfg, "audit", "tail", "-n", "2")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], "  default  nope  error unknown_tool  ") ||
		!strings.Contains(lines[1], "  s1  math_eval  success  ") || errs != "" {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	code, out, _ = in.run(t, "--config", cfg, "--json", "audit", "tail")
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.HasPrefix(out, `{"ts":"`) || !strings.Contains(out, `"tool":"echo"`) {
		t.Fatalf("--json: %d %q", code, out)
	}
	if code, _, errs := runClara(t, "audit", "tail"); code != 2 || !strings.Contains(errs, "no audit.path") {
		t.Fatalf("without audit.path: %d %q", code, errs)
	}

	// -f: the last record, then what another process appends.
	follow := in.command(t, "--config", cfg, "audit", "tail", "-f", "-n", "1")
	stdout, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	read := bufio.NewReader(stdout)
	first, _ := read.ReadString('\n')
	in.run(t, "--config", cfg, "call", "get_time", "--session", "later")
	got := make(chan string, 1)
	go func() { line, _ := read.ReadString('\n'); got <- line }()
	var second string
	select {
	case second = <-got:
	case <-time.After(20 * time.Second):
	}
	follow.Process.Signal(syscall.SIGINT)
	rest, _ := io.ReadAll(read)
	err = follow.Wait()
	if !strings.Contains(first, "math_eval") || !strings.Contains(second, "  later  get_time  success  ") || err != nil || len(rest) != 0 {
		t.Fatalf("-f: first %q, second %q, then %q, %v", first, second, rest, err)
	}
}

// TestAuditTail_reads_regular_files_only (issue 25, finding 2, review):
// audit tail opened a named pipe the ordinary way and hung there, where
// even SIGTERM could not end it, and read /dev/zero until memory ran out;
// both are refused at once, saying what they are, from the configuration's
// audit.path as from --file. The runs are bounded: 1.5 GB of address
// space and 10 s each.
func TestAuditTail_reads_regular_files_only(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "audit.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, dir, "state_dir = \"\"\n[audit]\npath = \""+fifo+"\"\n")
	for _, c := range []struct {
		args []string
		path string
		what string
	}{
		{[]string{"--config", cfg, "audit", "tail"}, fifo, "a named pipe"},
		{[]string{"audit", "tail", "-f", "--file", fifo}, fifo, "a named pipe"},
		{[]string{"audit", "tail", "--file", "/dev/zero"}, "/dev/zero", "a device"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", `ulimit -v 1500000 && exec "$0" "$@"`, claraBin}, c.args...)...)
		cmd.Dir, cmd.Env = dir, []string{"PATH=" + os.Getenv("PATH")}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		cancel()
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if want := "clara: audit: " + c.path + " is " + c.what + ", not a regular file\n"; code != 1 || stderr.String() != want {
			t.Errorf("%s: exit %d (%v), %q; want exit 1, %q", strings.Join(c.args, " "), code, err, stderr.String(), want)
		}
	}
}

// TestMCP_listen prints the URL it serves and stops on SIGTERM, exit 0.
func TestMCP_listen(t *testing.T) {
	cmd := invocation{}.command(t, "mcp", "--listen", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil || !strings.HasPrefix(line, "url http://127.0.0.1:") || !strings.HasSuffix(line, "/mcp\n") {
		t.Fatalf("%q %v", line, err)
	}
}

// TestCompletion comes from cobra: a script per shell, and the tools and
// formats completed.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		if code, out, _ := runClara(t, "completion", shell); code != 0 || !strings.Contains(out, "clara") {
			t.Errorf("%s: %d", shell, code)
		}
	}
	if code, out, _ := runClara(t, "__complete", "tools", "--format", ""); code != 0 || !strings.HasPrefix(out, "clara\nopenai\nanthropic\nmcp\n") {
		t.Errorf("--format: %d %q", code, out)
	}
	if code, out, _ := runClara(t, "__complete", "call", "math"); code != 0 || !strings.Contains(out, "math_eval\t") {
		t.Errorf("call: %d %q", code, out)
	}
}

// TestConfig_is_a_regular_file (issue 25, finding 2): --config naming a
// named pipe hung bin/clara for ever, and /dev/zero was read until memory
// ran out; both are refused at once, saying what they are.
func TestConfig_is_a_regular_file(t *testing.T) {
	t.Setenv("CLARA_CONFIG", "")
	fifo := filepath.Join(t.TempDir(), "config.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // should the read hang (the bug), a writer lets it end
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	for path, what := range map[string]string{fifo: "a named pipe", "/dev/zero": "a device"} {
		done := make(chan string, 1)
		go func() {
			code, _, errs := runClara(t, "--config", path, "call", "echo", "{}")
			done <- fmt.Sprint(code, " ", errs)
		}()
		select {
		case got := <-done:
			if want := "2 clara: --config: " + path + " is " + what + ", not a regular file\n"; got != want {
				t.Errorf("--config %s: %q, want %q", path, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("--config %s hangs", path)
		}
	}
}
