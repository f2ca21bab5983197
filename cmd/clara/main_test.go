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
	"regexp"
	"runtime"
	"strconv"
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
	cfg := writeConfig(t, dir, "state_dir = \"\"\n[policy]\ndeny = [\"get_time\"]\n[rules]\npaths = [\"rules/*.toml\"]\n")
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
	if !strings.Contains(errs, "↪ tool: get_current_weather({\"location\":\"Boston, MA\"})") || !strings.Contains(errs, "✔ tool result received: get_current_weather (") {
		t.Fatalf("no status lines: %q", errs)
	}
	// Issue 26 §6: the ✔ line names its tool (parallel calls are told
	// apart), and a call under a millisecond says how long, not "(0s)".
	if !regexp.MustCompile(`✔ tool result received: get_current_weather \([0-9]+(µs|ms)\)\n`).MatchString(errs) || strings.Contains(errs, "(0s)") {
		t.Fatalf("durations: %q", errs)
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
		".clara/rules/bad.toml":        "[rule]\nid = \"bad\"\ntrigger = \"on_tool_call\"\n[condition]\nexpression = \"1 +\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n",
		".clara/plugins/p/plugin.toml": "name = \"p\"\nbogus = true\n",
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
		filepath.Join(".clara", "plugins", "p", "plugin.toml") + `:2:1: unknown key "bogus"`,
		filepath.Join(".clara", "rules", "bad.toml") + `:5: rule "bad": condition:`,
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
		".clara/rules/bad.toml":        "[rule]\nid = \"bad\"\ntrigger = \"on_tool_call\"\n[condition]\nexpression = \"1 + 1 == 2\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n",
		".clara/plugins/p/plugin.toml": "name = \"p\"\n",
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
	cfg := writeConfig(t, dir, "state_dir = \"\"\n[rules]\nbuiltin = false\npaths = [\"rules/*.toml\"]\n")
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
// audit.path as from --file. The runs are bounded: 4 GiB of address
// space (1.5 GB was too tight for the runtime of a loaded machine now and
// then) and 10 s each.
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
		cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", `ulimit -v 4194304 && exec "$0" "$@"`, claraBin}, c.args...)...)
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

// TestConfig_means_the_same_from_any_directory (issue 26 §1): bin/clara
// --config /path/clara.toml started from / did not load its
// paths = ["rules/*.toml"], and a denied tool ran; so did a Clara started
// as another Clara's [[mcp_servers]] child. A configuration file's paths
// are now its own folder's, whoever starts it from wherever.
func TestConfig_means_the_same_from_any_directory(t *testing.T) {
	project := t.TempDir()
	deny := "[rule]\nid = \"no-echo\"\ntrigger = \"on_tool_call\"\n[condition]\nexpression = \"context.tool.name == 'echo'\"\n" +
		"[action]\ntype = \"deny\"\nreason = \"no echo here\"\n"
	writeFiles(t, project, map[string]string{
		"clara.toml":            "state_dir = \"\"\n[rules]\npaths = [\"rules/*.toml\"]\n",
		"rules/deny.toml":       deny,
		"child/clara.toml":      "state_dir = \"\"\n[rules]\npaths = [\"rules/*.toml\"]\n",
		"child/rules/deny.toml": deny,
		"parent.toml": "state_dir = \"\"\n[[mcp_servers]]\nname = \"child\"\ncommand = " + strconv.Quote(claraBin) +
			"\nargs = [\"--config\", \"child/clara.toml\", \"mcp\"]\neager = true\n",
	})
	cfg := filepath.Join(project, "clara.toml")
	elsewhere := t.TempDir()
	for _, c := range []struct {
		what string
		in   invocation
		args []string
	}{
		{"--config from /", invocation{dir: "/"}, []string{"--config", cfg, "call", "echo", `{"x":1}`}},
		{"--config from elsewhere", invocation{dir: elsewhere}, []string{"--config", cfg, "call", "echo", `{"x":1}`}},
		{"CLARA_CONFIG from /", invocation{dir: "/", env: []string{"CLARA_CONFIG=" + cfg}}, []string{"call", "echo", `{"x":1}`}},
		{"an [[mcp_servers]] child", invocation{dir: "/"}, []string{"--config", filepath.Join(project, "parent.toml"), "call", "child__echo", `{"x":1}`}},
	} {
		code, out, errs := c.in.run(t, c.args...)
		if code != 1 || out != "" || !strings.Contains(errs, "no echo here") {
			t.Errorf("%s: %d %q %q", c.what, code, out, errs)
		}
	}
}

// TestConfig_a_file_over_another_keeps_its_own_paths (issue 26 §1): with
// CLARA_CONFIG a file in one folder (say the user's own), bin/clara
// --config PROJECT/clara.toml resolved the project file's rules/*.toml
// against the first file's folder: its deny rule was not found. Each
// file's paths are its own folder's.
func TestConfig_a_file_over_another_keeps_its_own_paths(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	writeFiles(t, home, map[string]string{"clara.toml": "[limits]\ntimeout_ms = 2000\n"})
	writeFiles(t, project, map[string]string{
		"clara.toml": "state_dir = \"\"\n[rules]\npaths = [\"rules/*.toml\"]\n\n[[tools]]\nname = \"shout\"\nlua_file = \"tools/shout.lua\"\n",
		"rules/deny.toml": "[rule]\nid = \"no-echo\"\ntrigger = \"on_tool_call\"\n[condition]\nexpression = \"context.tool.name == 'echo'\"\n" +
			"[action]\ntype = \"deny\"\nreason = \"no echo here\"\n",
		"tools/shout.lua": "return function(a) return {loud = true} end\n",
	})
	in := invocation{dir: "/", env: []string{"CLARA_CONFIG=" + filepath.Join(home, "clara.toml")}}
	code, out, errs := in.run(t, "--config", filepath.Join(project, "clara.toml"), "call", "echo", `{"x":1}`)
	if code != 1 || out != "" || !strings.Contains(errs, "no echo here") {
		t.Fatalf("echo: %d %q %q", code, out, errs)
	}
	code, out, errs = in.run(t, "--config", filepath.Join(project, "clara.toml"), "call", "shout")
	if code != 0 || out != "{\"loud\":true}\n" {
		t.Fatalf("shout: %d %q %q", code, out, errs)
	}
}

// TestDefault_rules_leave_an_unrelated_rules_folder_alone (issue 26 §1):
// the default rules.paths was rules/*.toml of the working directory, so a
// project whose rules/ holds a linter's configuration logged "unknown
// key" on every start and ran without rule files. The default lives under
// .clara/ now: such a folder neither breaks nor pollutes a start, and the
// default still loads what .clara/rules/ holds.
func TestDefault_rules_leave_an_unrelated_rules_folder_alone(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"rules/lint.toml": "[lint]\nmax_line = 80\nselect = [\"E\", \"F\"]\n"})
	code, out, errs := invocation{dir: dir, env: []string{"CLARA_LOG=warn"}}.run(t, "call", "echo", `{"x":1}`)
	if code != 0 || out != "{\"x\":1}\n" || errs != "" {
		t.Fatalf("a linter's rules/: %d %q %q", code, out, errs)
	}
	writeFiles(t, dir, map[string]string{".clara/rules/deny.toml": "[rule]\nid = \"no-echo\"\ntrigger = \"on_tool_call\"\n[condition]\n" +
		"expression = \"context.tool.name == 'echo'\"\n[action]\ntype = \"deny\"\nreason = \"no echo here\"\n"})
	code, out, errs = invocation{dir: dir, env: []string{"CLARA_LOG=warn"}}.run(t, "call", "echo", `{"x":1}`)
	if code != 1 || out != "" || !strings.Contains(errs, "no echo here") {
		t.Fatalf(".clara/rules/: %d %q %q", code, out, errs)
	}
}

// TestChat_first_conversation_parallel_calls_under_the_defaults (issue 26
// §5, §6): the default limits.max_tool_calls = 1 denied the second of two
// parallel calls of a first conversation, and the ✔ lines did not say
// which call had answered. Under the defaults both run, and each ✔ line
// names its tool.
func TestChat_first_conversation_parallel_calls_under_the_defaults(t *testing.T) {
	srv := scriptedModel(t, "first_parallel")
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "state_dir = \"\"\n[llm]\nbase_url = \""+srv.BaseURL("first_parallel")+"\"\nmodel = \"test-model\"\n")
	code, out, errs := invocation{dir: dir}.run(t, "--config", cfg, "chat", "What time is it in Paris and in Tokyo?",
		"--allow-tools", "--tools", "get_time", "--verbose")
	if code != 0 || out != "Paris and Tokyo, both read.\n" || strings.Contains(errs, "✗") {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	if n := regexp.MustCompile(`✔ tool result received: get_time \([0-9]+(µs|ms)\)\n`).FindAllString(errs, -1); len(n) != 2 {
		t.Errorf("two ✔ lines naming get_time: %q", errs)
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestChat_cut_off_by_its_limits_exits_1 (issue 26 §5): a model that still
// asked for tools once max_tool_calls was spent made `clara chat` print an
// empty line and exit 0.
func TestChat_cut_off_by_its_limits_exits_1(t *testing.T) {
	srv := scriptedModel(t, "openai_still_asks")
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "state_dir = \"\"\n[llm]\nbase_url = \""+srv.BaseURL("openai_still_asks")+"\"\nmodel = \"gpt-4o-mini\"\n")
	code, out, errs := invocation{dir: dir}.run(t, "--config", cfg, "chat", "Time?", "--allow-tools", "--tools", "get_time", "--max-tool-calls", "1")
	if code != 1 || out != "" || !strings.HasPrefix(errs, "clara: limit_exceeded: chat: the model still asked for tools after max_tool_calls (1) was spent") {
		t.Fatalf("%d %q %q", code, out, errs)
	}
}

// TestAsk_approvals_at_the_terminal (issue 28's leftover): a call a rule
// holds for approval was rejected by bin/clara, no one being there to ask.
// With --ask, the person at the terminal approves it (y), rejects it
// (n REASON) or edits its arguments (e ARGUMENTS; a bad edit is said and
// asked again); end of input rejects.
func TestAsk_approvals_at_the_terminal(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"rules/ask.toml": "[rule]\nid = \"big\"\ntrigger = \"on_tool_call\"\n[condition]\n" +
		"expression = \"context.tool.name == 'echo' and context.tool.arguments.amount > 100\"\n[action]\ntype = \"ask\"\n" +
		"reason = \"{{ context.tool.arguments.amount }} is a lot\"\n"})
	cfg := writeConfig(t, dir, "state_dir = \"\"\n[rules]\npaths = [\"rules/*.toml\"]\n")
	prompt := "? approve echo({\"amount\":5000})? rule big: 5000 is a lot\n  y: run it  n [REASON]: do not  e ARGUMENTS: run it with these arguments\n> "
	for _, c := range []struct {
		what, stdin string
		code        int
		out, errs   string
	}{
		{"approved", "y\n", 0, "{\"amount\":5000}\n", prompt},
		{"rejected", "n not today\n", 1, "", prompt + "clara: denied: tool \"echo\" was not run: the approval was rejected: not today\n"},
		{"edited, after a bad edit", "e {amount: 'x'\ne {amount: 100}\n", 0, "{\"amount\":100}\n", ""},
		{"end of input", "", 1, "", ""},
	} {
		code, out, errs := invocation{dir: dir, stdin: c.stdin}.run(t, "--config", cfg, "call", "echo", `{"amount":5000}`, "--ask")
		if code != c.code || out != c.out || (c.errs != "" && errs != c.errs) || !strings.HasPrefix(errs, prompt) {
			t.Errorf("%s: %d %q %q", c.what, code, out, errs)
		}
		if c.what == "edited, after a bad edit" && !strings.Contains(errs, "the arguments are not JSON") {
			t.Errorf("%s: the bad edit was not said: %q", c.what, errs)
		}
		if c.what == "end of input" && !strings.Contains(errs, "no answer at the terminal (end of input)") {
			t.Errorf("%s: %q", c.what, errs)
		}
	}
	// Without --ask, nobody is there: the call is rejected, saying why.
	code, _, errs := invocation{dir: dir}.run(t, "--config", cfg, "call", "echo", `{"amount":5000}`)
	if code != 1 || !strings.Contains(errs, "no approval handler is installed") {
		t.Errorf("without --ask: %d %q", code, errs)
	}
	// A small amount is not held.
	code, out, _ := invocation{dir: dir}.run(t, "--config", cfg, "call", "echo", `{"amount":5}`, "--ask")
	if code != 0 || out != "{\"amount\":5}\n" {
		t.Errorf("not held: %d %q", code, out)
	}
}

// TestAsk_a_form_at_the_terminal: ask_user with a schema (a form) asked
// at the terminal takes one JSON or JSON5 object; an answer that is not
// one, or does not fit the form, is said and asked again (the engine
// would otherwise fail the call); end of input declines.
func TestAsk_a_form_at_the_terminal(t *testing.T) {
	args := `{"prompt":"Who are you?","schema":{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]}}`
	in := invocation{stdin: "Ada\n{name: 'Ada'}\n{name: 'Ada', age: 36}\n"}
	code, out, errs := in.run(t, "call", "ask_user", args, "--ask")
	if code != 0 || out != "{\"answer\":{\"age\":36,\"name\":\"Ada\"}}\n" ||
		!strings.HasPrefix(errs, "? Who are you?\n  answer with a JSON object: {age (integer, required), name (string, required)}\n> ") ||
		strings.Count(errs, "\n> ") != 3 || !strings.Contains(errs, "missing property 'age'") {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	code, out, _ = invocation{}.run(t, "call", "ask_user", args, "--ask")
	if code != 0 || out != "{\"declined\":true}\n" {
		t.Fatalf("end of input: %d %q", code, out)
	}
}

// TestAsk_chat_approves_the_models_call: the model's transfer is held by a
// rule; clara chat --ask shows it and the person edits the amount down.
func TestAsk_chat_approves_the_models_call(t *testing.T) {
	srv := scriptedModel(t, "approval_edit")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"rules/ask.toml": "[rule]\nid = \"big-payments\"\ntrigger = \"on_tool_call\"\n[condition]\n" +
		"expression = \"context.tool.name == 'transfer' and context.tool.arguments.amount > 100\"\n[action]\ntype = \"ask\"\n" +
		"reason = \"{{ context.tool.arguments.amount }} is a lot\"\n"})
	cfg := writeConfig(t, dir, "state_dir = \"\"\n[rules]\npaths = [\"rules/*.toml\"]\nredact_secrets = true\n[llm]\nbase_url = \""+
		srv.BaseURL("approval_edit")+"\"\nmodel = \"test-model\"\n\n[[tools]]\nname = \"transfer\"\n"+
		"input_schema = { type = \"object\", properties = { to = { type = \"string\" }, amount = { type = \"integer\" } }, required = [\"to\", \"amount\"] }\n"+
		"lua = 'return function(a) return { paid = a.amount, to = a.to } end'\n")
	code, out, errs := invocation{dir: dir, stdin: "e {\"to\":\"bob\",\"amount\":100}\n"}.run(t, "--config", cfg, "chat",
		"Pay Bob what we owe him.", "--allow-tools", "--tools", "transfer", "--ask")
	if code != 0 || !strings.HasPrefix(out, "Paid Bob 100") ||
		!strings.HasPrefix(errs, "? approve transfer({\"to\":\"bob\",\"amount\":5000})? rule big-payments: 5000 is a lot\n") {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestAsk_chat_rejections: the person at the terminal rejects the model's
// call with a reason (the model reads it as the call's denial), after a
// bad edit that is said and asked again; end of input rejects too.
func TestAsk_chat_rejections(t *testing.T) {
	srv := scriptedModel(t, "approval_rejected")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"rules/ask.toml": "[rule]\nid = \"payments\"\ntrigger = \"on_tool_call\"\n[condition]\n" +
		"expression = \"context.tool.name == 'transfer'\"\n[action]\ntype = \"ask\"\nreason = \"a payment\"\n"})
	cfg := writeConfig(t, dir, "state_dir = \"\"\n[rules]\npaths = [\"rules/*.toml\"]\n[llm]\nbase_url = \""+
		srv.BaseURL("approval_rejected")+"\"\nmodel = \"test-model\"\n\n[[tools]]\nname = \"transfer\"\n"+
		"input_schema = { type = \"object\", properties = { to = { type = \"string\" }, amount = { type = \"integer\" } }, required = [\"to\", \"amount\"] }\n"+
		"lua = 'return function(a) return { paid = a.amount, to = a.to } end'\n")
	prompt := "? approve transfer({\"to\":\"mallory\",\"amount\":9})? rule payments: a payment\n" +
		"  y: run it  n [REASON]: do not  e ARGUMENTS: run it with these arguments\n> "
	for _, c := range []struct{ what, stdin, said, reason string }{
		{"n with a reason, after a bad edit", "e {to: 'mallory', amount: 'nine'}\nn not to mallory\n", "bad edit", "not to mallory"},
		{"end of input", "", "", "no answer at the terminal (end of input)"},
	} {
		code, out, errs := invocation{dir: dir, stdin: c.stdin}.run(t, "--config", cfg, "--json", "chat",
			"Pay Mallory.", "--allow-tools", "--tools", "transfer", "--ask")
		var env struct {
			Status string
			Result struct {
				Content   string
				ToolCalls []struct{ Name, Status, Error string } `json:"tool_calls"`
			}
		}
		if code != 0 || json.Unmarshal([]byte(out), &env) != nil || env.Result.Content != "The transfer was refused." || !strings.HasPrefix(errs, prompt) {
			t.Errorf("%s: %d %q %q", c.what, code, out, errs)
		}
		if c.said != "" && (strings.Count(errs, "\n> ") != 2 || !strings.Contains(errs, "the edited arguments do not match")) {
			t.Errorf("%s: the bad edit was not said and asked again: %q", c.what, errs)
		}
		// The model was told the call was denied, and why.
		if tc := env.Result.ToolCalls; len(tc) != 1 || tc[0].Status != "denied" || !strings.HasSuffix(tc[0].Error, "the approval was rejected: "+c.reason) {
			t.Errorf("%s: the reason is not the call's denial: %+v", c.what, tc)
		}
		if err := srv.Err(); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
	}
}
