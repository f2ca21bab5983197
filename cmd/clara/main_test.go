package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/llm/llmtest"
)

func runClara(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestCall_tools_and_errors(t *testing.T) {
	t.Setenv("CLARA_CONFIG", "")
	code, out, _ := runClara(t, "call", "math_eval", `{"expression":"6*7"}`)
	if code != 0 || out != `{"status":"success","tool":"math_eval","result":{"expression":"6*7","value":42}}`+"\n" {
		t.Fatalf("%d %q", code, out)
	}
	if code, _, errs := runClara(t, "call", "nope"); code != 1 || !strings.Contains(errs, "unknown_tool: Tool not found: nope") {
		t.Fatalf("%d %q", code, errs)
	}
	if code, _, errs := runClara(t, "call", "echo", "{bad"); code != 2 || !strings.Contains(errs, "not JSON") {
		t.Fatalf("%d %q", code, errs)
	}
	if code, _, _ := runClara(t, "frobnicate"); code != 2 {
		t.Fatal(code)
	}
	code, out, _ = runClara(t, "tools", "--format", "openai")
	if code != 0 || !strings.Contains(out, `"name": "math_eval"`) || strings.Contains(out, `"rules_load"`) {
		t.Fatalf("%d %s", code, out)
	}
}

func TestChat_verbose_against_the_scripted_provider(t *testing.T) {
	t.Setenv("CLARA_CONFIG", "")
	sc, err := llmtest.LoadScript(filepath.Join("..", "..", "tests", "llm", "openai_weather.toml"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := llmtest.NewServer("", sc)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Setenv("CLARA_TEST_KEY", "sk-cli-secret")
	cfg := filepath.Join(t.TempDir(), "clara.toml")
	if err := os.WriteFile(cfg, []byte(`state_dir = ""
[llm]
base_url = "`+srv.BaseURL("openai_weather")+`"
model = "gpt-4o-mini"
api_key_env = "CLARA_TEST_KEY"

[[tools]]
name = "get_current_weather"
description = "Get the current weather in a given location"
input_schema = { type = "object", properties = { location = { type = "string" } }, required = ["location"] }
lua = 'return function(args) return { temperature = "22", location = args.location } end'
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runClara(t, "--config", cfg, "chat", "What is the weather like in Boston today?",
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
	t.Setenv("CLARA_CONFIG", "")
	sc, err := llmtest.LoadScript(filepath.Join("..", "..", "tests", "llm", "ask_user_answer.toml"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := llmtest.NewServer("", sc)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cfg := filepath.Join(t.TempDir(), "clara.toml")
	if err := os.WriteFile(cfg, []byte("state_dir = \"\"\n[llm]\nbase_url = \""+srv.BaseURL("ask_user_answer")+"\"\nmodel = \"test-model\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer func(r io.Reader) { stdin = r }(stdin)
	stdin = strings.NewReader("Boston\n")
	code, out, errs := runClara(t, "--config", cfg, "chat", "Find out which city the user means.", "--allow-tools", "--tools", "ask_user",
		"--ask", "--result-schema", `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)
	if code != 0 || out != `{"city":"Boston"}`+"\n" || errs != "? Which city?\n> " {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
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
			if want := "2 clara: " + path + " is " + what + ", not a regular file\n"; got != want {
				t.Errorf("--config %s: %q, want %q", path, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("--config %s hangs", path)
		}
	}
}
