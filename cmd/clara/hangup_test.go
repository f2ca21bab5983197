package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMCP_hangup_reopens_the_audit: after logrotate renamed audit.path,
// SIGHUP to `clara mcp` sends the next records to a new file at the path
// (before, they went on into the renamed one until the server stopped).
func TestMCP_hangup_reopens_the_audit(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "[audit]\npath = \"audit.jsonl\"\n")
	cmd := invocation{dir: dir}.command(t, "--config", cfg, "mcp")
	cmd.Stdin = nil
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	answers := bufio.NewReader(stdout)
	ask := func(id, method, params string) string {
		t.Helper()
		if _, err := stdin.Write([]byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + "}\n")); err != nil {
			t.Fatal(err)
		}
		line, err := answers.ReadString('\n')
		if err != nil || !strings.Contains(line, `"id":`+id) {
			t.Fatalf("%s: %q %v", method, line, err)
		}
		return line
	}
	ask("1", "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	stdin.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
	ask("2", "tools/call", `{"name":"echo","arguments":{"n":1}}`)

	path := filepath.Join(dir, "audit.jsonl")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	// The signal is handled on its own goroutine: the new file appears
	// once the audit is reopened.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("SIGHUP did not reopen the audit file")
		}
	}
	ask("3", "tools/call", `{"name":"echo","arguments":{"n":2}}`)
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{path + ".1": 1, path: 1} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), `"tool":"echo"`); n != want {
			t.Errorf("%s: %d echo records, want %d:\n%s", filepath.Base(name), n, want, b)
		}
	}
}
