// Package mcptest checks Clara's MCP against code nobody here wrote: the
// official TypeScript SDK's client drives testserver (core/mcp alone),
// bin/clara mcp (stdio) and a C host's clara_mcp_listen (Streamable HTTP);
// core/mcp's Manager and the engine consume the reference
// server-everything. The npm packages are installed into build/npm by
// npm-install.sh (pinned by package-lock.json) when missing; without node
// the tests fail (make test installs it). The engine tests need
// lib/libclara.so built (make test-mcp builds it).
package mcptest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/mcp"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

var (
	root        = mustAbs("../..")
	nodeModules = filepath.Join(root, "build", "npm", "node_modules")
	everything  = filepath.Join(nodeModules, "@modelcontextprotocol", "server-everything", "dist", "index.js")
)

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

var setup struct {
	once   sync.Once
	node   string
	server string // the built testserver
	err    error
}

// prepare finds node, installs the npm packages and builds
// testserver, once.
func prepare(t *testing.T) (node, server string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed (tests/setup-debian.sh installs nodejs and npm): the MCP tests against the TypeScript SDK and server-everything need it")
	}
	setup.once.Do(func() {
		setup.node = node
		if out, err := exec.Command("bash", filepath.Join(root, "tests", "mcp", "npm-install.sh")).CombinedOutput(); err != nil {
			setup.err = fmt.Errorf("npm-install.sh: %v\n%s", err, out)
			return
		}
		dir, err := os.MkdirTemp("", "clara-mcp-test")
		if err != nil {
			setup.err = err
			return
		}
		setup.server = filepath.Join(dir, "testserver")
		build := exec.Command(goTool(), "build", "-o", setup.server, "./testserver")
		if out, err := build.CombinedOutput(); err != nil {
			setup.err = fmt.Errorf("building testserver: %v\n%s", err, out)
		}
	})
	if setup.err != nil {
		t.Fatal(setup.err)
	}
	return setup.node, setup.server
}

// goTool is the go command of the toolchain running the tests.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if setup.server != "" {
		os.RemoveAll(filepath.Dir(setup.server))
	}
	os.Exit(code)
}

// runClient runs client.mjs with args and checks that every check passed.
func runClient(t *testing.T, node string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"client.mjs"}, args...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodeModules)
	out, err := cmd.CombinedOutput()
	t.Logf("client.mjs %s:\n%s", strings.Join(args, " "), out)
	if err != nil {
		t.Fatalf("client.mjs: %v", err)
	}
	if !strings.Contains(string(out), "ok close\n") {
		t.Fatalf("client.mjs did not run to the end")
	}
}

func TestTypeScriptClientOverStdio(t *testing.T) {
	node, server := prepare(t)
	runClient(t, node, "--stdio", server)
}

func TestTypeScriptClientOverHTTP(t *testing.T) {
	node, server := prepare(t)
	cmd := exec.Command(server, "--listen", "127.0.0.1:0", "--token", "tok-"+strconv.Itoa(os.Getpid()), "--max-sessions", "3")
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
		stdin.Close() // testserver stops when its stdin closes
		if err := cmd.Wait(); err != nil {
			t.Errorf("testserver: %v", err)
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "url ") {
		t.Fatalf("testserver said %q, %v", line, err)
	}
	url := strings.TrimSpace(strings.TrimPrefix(line, "url "))
	runClient(t, node, "--url", url, "--token", "tok-"+strconv.Itoa(os.Getpid()), "--max-sessions", "3")
}

// children lists the processes whose parent is this one and whose command
// line contains what.
func children(what string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[0] == "Z" || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cmdline), what) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 60 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// registered holds what the Manager hands over, as the engine would
// register it.
type registered struct {
	mu    sync.Mutex
	reg   *toolbox.Registry
	lists map[string][]string
}

func (r *registered) onToolsChanged(server string, specs []mcp.ToolSpec) {
	var names []string
	for _, s := range specs {
		t, err := toolbox.NewTool(s.Descriptor, toolbox.ToolOptions{Run: s.Run})
		if err != nil {
			panic(err) // the Manager checked every spec with NewTool
		}
		if err := r.reg.Register(t); err != nil {
			panic(err)
		}
		names = append(names, s.Descriptor.Name)
	}
	r.mu.Lock()
	r.lists[server] = names
	r.mu.Unlock()
}

func (r *registered) has(server, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.lists[server] {
		if n == name {
			return true
		}
	}
	return false
}

// call runs a registered tool as the pipeline does: validate, execute.
func (r *registered) call(name, args string) (string, *protocol.Error) {
	t, ok := r.reg.Lookup(name)
	if !ok {
		return "", protocol.Errorf(protocol.UnknownTool, "Tool not found: %s", name)
	}
	if perr := t.Validate([]byte(args)); perr != nil {
		return "", perr
	}
	out, _, perr := t.Execute(context.Background(), toolbox.Call{Session: "s", Arguments: []byte(args), Tool: t},
		toolbox.Defaults{TimeoutMS: 30000, MaxOutputBytes: 1 << 20})
	return string(out), perr
}

func TestConsumeServerEverythingOverStdio(t *testing.T) {
	node, _ := prepare(t)
	t.Setenv("CLARA_MCP_TEST_PROBE", "probe-value-42")
	t.Setenv("CLARA_MCP_TEST_NOT_PASSED", "should not reach the child")
	reg := &registered{reg: toolbox.NewRegistry(), lists: map[string][]string{}}
	var logMu sync.Mutex
	var logLines []string
	log := logging.New(func(l logging.Level, m string) {
		logMu.Lock()
		logLines = append(logLines, m)
		logMu.Unlock()
	}, logging.Debug)
	m, err := mcp.NewManager([]mcp.ServerConfig{{
		Name:    "everything",
		Command: node,
		Args:    []string{everything, "stdio"},
		EnvFrom: map[string]string{"CLARA_PROBE": "CLARA_MCP_TEST_PROBE"},
		Deny:    []string{"trigger-long-running-operation"},
		Eager:   true,
		Limits:  toolbox.Limits{TimeoutMS: 30000},
	}}, mcp.ManagerOptions{Logger: log, OnToolsChanged: reg.onToolsChanged})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			m.Close()
		}
	}()
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Its tools appear with the prefix, denied ones do not.
	waitFor(t, func() bool { return reg.has("everything", "everything__echo") }, "everything__echo")
	for _, name := range []string{"get-sum", "get-env", "get-structured-content", "get-tiny-image"} {
		if !reg.has("everything", "everything__"+name) {
			t.Errorf("everything__%s is not registered", name)
		}
	}
	if reg.has("everything", "everything__trigger-long-running-operation") {
		t.Errorf("a denied tool was registered")
	}
	echo, _ := reg.reg.Lookup("everything__echo")
	if echo.Capabilities[0] != toolbox.CapExec || echo.Returns != toolbox.ReturnsJSON {
		t.Errorf("everything__echo: %+v", echo.Descriptor)
	}

	if out, perr := reg.call("everything__echo", `{"message":"hello"}`); perr != nil || out != `"Echo: hello"` {
		t.Errorf("echo: %s %v", out, perr)
	}
	if _, perr := reg.call("everything__echo", `{"message":7}`); perr == nil || perr.Code != protocol.InvalidArgs {
		t.Errorf("echo with a bad argument (its schema, checked by Clara): %v", perr)
	}
	if out, perr := reg.call("everything__get-sum", `{"a":2,"b":3}`); perr != nil || out != `"The sum of 2 and 3 is 5."` {
		t.Errorf("get-sum: %s %v", out, perr)
	}
	// A tool with an output schema returns its structuredContent as JSON.
	out, perr := reg.call("everything__get-structured-content", `{"location":"New York"}`)
	var weather map[string]any
	if perr != nil || json.Unmarshal([]byte(out), &weather) != nil || weather["temperature"] == nil {
		t.Errorf("get-structured-content: %s %v", out, perr)
	}
	// env_from reaches the child, the rest of the environment does not. The
	// value is a secret: the child that sends it back has it cut out (that
	// it is cut says the child had it).
	out, perr = reg.call("everything__get-env", `{}`)
	var text string
	if perr != nil || json.Unmarshal([]byte(out), &text) != nil {
		t.Fatalf("get-env: %s %v", out, perr)
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(text), &env); err != nil {
		t.Fatalf("get-env: %v", err)
	}
	if env["CLARA_PROBE"] != "[redacted]" || env["CLARA_MCP_TEST_NOT_PASSED"] != "" || env["CLARA_MCP_TEST_PROBE"] != "" {
		t.Errorf("the child's environment: CLARA_PROBE=%q, others leaked: %v", env["CLARA_PROBE"],
			env["CLARA_MCP_TEST_NOT_PASSED"] != "" || env["CLARA_MCP_TEST_PROBE"] != "")
	}
	logMu.Lock()
	if joined := strings.Join(logLines, "\n"); strings.Contains(joined, "probe-value-42") {
		t.Errorf("the env_from value reached the log")
	}
	logMu.Unlock()

	// A crash of its process is recovered.
	pids := children("server-everything")
	if len(pids) != 1 {
		t.Fatalf("server-everything processes: %v", pids)
	}
	syscall.Kill(pids[0], syscall.SIGKILL)
	waitFor(t, func() bool {
		out, perr := reg.call("everything__echo", `{"message":"again"}`)
		return perr == nil && out == `"Echo: again"`
	}, "a call answered after the crash")
	if now := children("server-everything"); len(now) != 1 || now[0] == pids[0] {
		t.Errorf("after the restart: %v (was %v)", now, pids)
	}

	// Close leaves no process behind.
	t0 := time.Now()
	m.Close()
	t.Logf("Close took %s", time.Since(t0))
	closed = true
	waitFor(t, func() bool { return len(children("server-everything")) == 0 }, "the end of server-everything after Close")
}

// freePort is a port nothing listens on (for a server that takes PORT).
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestConsumeServerEverythingOverHTTP(t *testing.T) {
	node, _ := prepare(t)
	port := freePort(t)
	srv := exec.Command(node, everything, "streamableHttp")
	srv.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		srv.Process.Kill()
		srv.Wait()
	}()
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	waitFor(t, func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	}, "server-everything listening")

	// A client whose transport counts its requests stands for the engine's
	// allowlisted client: every request goes through it.
	var requests int64
	var mu sync.Mutex
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		requests++
		mu.Unlock()
		return http.DefaultTransport.RoundTrip(r)
	})}
	m, err := mcp.NewManager([]mcp.ServerConfig{{Name: "web", URL: url, Allow: []string{"echo", "get-sum"}}},
		mcp.ManagerOptions{HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	specs, err := m.Tools(context.Background(), "web")
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].Descriptor.Name != "web__echo" || specs[0].Descriptor.Capabilities[0] != toolbox.CapNetwork {
		t.Fatalf("tools: %+v", specs)
	}
	out, err := specs[1].Run(context.Background(), toolbox.Call{Arguments: []byte(`{"a":1,"b":41}`)})
	if err != nil || string(out) != `"The sum of 1 and 41 is 42."` {
		t.Errorf("get-sum over HTTP: %s %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if requests < 3 {
		t.Errorf("%d requests went through the given client", requests)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
