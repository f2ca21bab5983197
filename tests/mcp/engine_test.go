package mcptest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The engine itself serving MCP, checked by the official TypeScript SDK:
// bin/clara mcp over stdio, and a C host's clara_mcp_listen over
// Streamable HTTP, both with tests/mcp/engine/clara.toml (a Lua tool, a
// policy, a deny rule).

var engineDir = filepath.Join(root, "tests", "mcp", "engine")

// buildEngineTools builds bin/clara and the C host into a temporary folder.
func buildEngineTools(t *testing.T) (claraBin, cHost string) {
	t.Helper()
	lib := filepath.Join(root, "lib", "libclara.so")
	if !fileExists(lib) {
		t.Fatalf("%s is missing: make lib first (make test builds it)", lib)
	}
	dir := t.TempDir()
	claraBin = filepath.Join(dir, "clara")
	build := exec.Command(goTool(), "build", "-o", claraBin, "./cmd/clara")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building bin/clara: %v\n%s", err, out)
	}
	cHost = filepath.Join(dir, "c_host")
	cc := exec.Command("cc", "-Wall", "-Wextra", "-Werror", "-I"+filepath.Join(root, "include"),
		"-pthread", filepath.Join(engineDir, "c_host.c"), "-o", cHost, "-L"+filepath.Join(root, "lib"), "-lclara",
		"-Wl,-rpath,"+filepath.Join(root, "lib"))
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("building the C host: %v\n%s", err, out)
	}
	return claraBin, cHost
}

func runEngineClient(t *testing.T, node string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"engine_client.mjs"}, args...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodeModules, "CLARA_CONFIG="+filepath.Join(engineDir, "clara.toml"))
	out, err := cmd.CombinedOutput()
	t.Logf("engine_client.mjs %s:\n%s", strings.Join(args, " "), out)
	if err != nil || !strings.Contains(string(out), "ok close\n") {
		t.Fatalf("engine_client.mjs: %v", err)
	}
}

func TestEngineServesOverStdio(t *testing.T) {
	node, _ := prepare(t)
	claraBin, _ := buildEngineTools(t)
	// bin/clara runs in engine/ (the configuration's rules are relative to
	// it), with --config: the SDK starts a server with a minimal environment.
	wrapper := filepath.Join(t.TempDir(), "clara-mcp.sh")
	script := "#!/bin/sh\ncd " + engineDir + " && exec " + claraBin + " --config clara.toml mcp\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	runEngineClient(t, node, "--stdio", wrapper)
}

func TestEngineServesACHostOverHTTP(t *testing.T) {
	node, _ := prepare(t)
	_, cHost := buildEngineTools(t)
	cmd := exec.Command(cHost)
	cmd.Dir = engineDir
	cmd.Env = append(os.Environ(), "CLARA_CONFIG="+filepath.Join(engineDir, "clara.toml"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close() // the C host stops serving when its stdin closes
		if err := cmd.Wait(); err != nil {
			t.Errorf("c_host: %v", err)
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "url ") {
		t.Fatalf("c_host said %q, %v", line, err)
	}
	runEngineClient(t, node, "--url", strings.TrimSpace(strings.TrimPrefix(line, "url ")))
}

// bin/clara mcp over stdio keeps a session after a line it cannot read,
// and answers what it was asked before its input ended (issue 25, finding
// 23: it ended the session at the first malformed line, and dropped the
// answers in flight at the end of input). Raw lines: a client library
// would not send a malformed one.
func TestEngineStdioBadLineAndEndOfInput(t *testing.T) {
	claraBin, _ := buildEngineTools(t)
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`this is not JSON`,
	}
	for i := 0; i < 5; i++ {
		lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"word_count","arguments":{"text":"%s"}}}`,
			10+i, strings.Repeat("word ", i+1)))
	}
	cmd := exec.Command(claraBin, "--config", "clara.toml", "mcp")
	cmd.Dir = engineDir
	cmd.Env = append(os.Environ(), "CLARA_LOG=off")
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bin/clara mcp: %v\n%s", err, out)
	}
	text := string(out)
	if !strings.Contains(text, `{"error":{"code":-32700,"message":"Parse error: invalid character 'h' in literal true (expecting 'r')"},"id":null,"jsonrpc":"2.0"}`) {
		t.Errorf("no parse error for the bad line:\n%s", text)
	}
	for i := 0; i < 5; i++ {
		if want := fmt.Sprintf(`"id":%d,"result":{"content":[{"type":"text","text":"{\"words\":%d}"}]`, 10+i, i+1); !strings.Contains(text, want) {
			t.Errorf("no answer %d (%s):\n%s", 10+i, want, text)
		}
	}
}
