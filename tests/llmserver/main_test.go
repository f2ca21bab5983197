package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The test binary runs main when asked to, so that the tests start the
// program as C and Python tests do: a process printing its address.
func TestMain(m *testing.M) {
	if os.Getenv("LLMSERVER_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type running struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer
	url    string
}

func start(t *testing.T, args ...string) *running {
	t.Helper()
	r := &running{cmd: exec.Command(os.Args[0], args...)}
	r.cmd.Env = append(os.Environ(), "LLMSERVER_RUN_MAIN=1")
	r.cmd.Stderr = &r.stderr
	var err error
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
		t.Fatalf("no address: %v; stderr: %s", err, r.stderr.String())
	}
	r.url = strings.TrimSpace(line)
	if !strings.HasPrefix(r.url, "http://127.0.0.1:") {
		t.Fatalf("first line %q", line)
	}
	return r
}

// stop closes stdin, as a test that ends does, and returns the exit code.
func (r *running) stop(t *testing.T) int {
	t.Helper()
	r.stdin.Close()
	err := r.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func TestLLMServer_servesScriptsAndReports(t *testing.T) {
	r := start(t, "../llm/evaluator.toml", "../llm/openai_weather.toml")
	resp, err := http.Post(r.url+"/evaluator/evaluate", "application/json", strings.NewReader(`{"question":"Is 7 prime?"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"answer":true,"confidence":0.99}` {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	resp, err = http.Get(r.url + "/_llmtest/report")
	if err != nil {
		t.Fatal(err)
	}
	var reps []map[string]any
	json.NewDecoder(resp.Body).Decode(&reps)
	resp.Body.Close()
	if len(reps) != 2 || reps[0]["script"] != "evaluator" || reps[0]["served"] != 1.0 {
		t.Fatalf("%v", reps)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d: %s", code, r.stderr.String())
	}
	if !strings.Contains(r.stderr.String(), `{"script":"evaluator","exchanges":3,"served":1,"failures":[],"complete":false}`) {
		t.Fatalf("stderr: %s", r.stderr.String())
	}
}

func TestLLMServer_failuresSetTheExitCode(t *testing.T) {
	r := start(t, "../llm/openai_weather.toml")
	resp, err := http.Post(r.url+"/openai_weather/chat/completions", "application/json", strings.NewReader(`{"model":"gpt-4o-mini"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if code := r.stop(t); code != 1 || !strings.Contains(r.stderr.String(), "messages must be a non-empty array") {
		t.Fatalf("exit %d: %s", code, r.stderr.String())
	}

	r = start(t, "-complete", "../llm/evaluator.toml")
	if code := r.stop(t); code != 1 {
		t.Fatalf("-complete with nothing served: exit %d", code)
	}
}

func TestLLMServer_badArguments(t *testing.T) {
	cmd := exec.Command(os.Args[0], "no-such-file.toml")
	cmd.Env = append(os.Environ(), "LLMSERVER_RUN_MAIN=1")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "no-such-file.toml") {
		t.Fatalf("%v: %s", err, out)
	}
}
