package mcptest

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"

	"github.com/clara-lib/clara/core"
)

// The engine governing a remote MCP server's tools: [[mcp_servers]] with
// the reference server-everything over stdio; its tools are Clara tools,
// under Clara's policy and audit, gone when the configuration drops it.
func TestEngineGovernsServerEverything(t *testing.T) {
	node, _ := prepare(t)
	e := core.New(core.Options{})
	cfg, _ := json.Marshal(map[string]any{
		"state_dir": "",
		"policy":    map[string]any{"deny": []string{"everything__get-sum"}},
		"mcp_servers": []any{map[string]any{
			"name": "everything", "command": node, "args": []string{everything, "stdio"}, "eager": true,
			"timeout_ms": 30000, "tools": map[string]any{"deny": []string{"trigger-long-running-operation"}},
		}},
	})
	if out := string(e.Configure(cfg)); !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatal(out)
	}
	defer e.Configure([]byte(`{"mcp_servers":[]}`))
	eval := func(req string) string { return string(e.Evaluate([]byte(req))) }

	if out := eval(`{"tool":"everything__echo","arguments":{"message":"hi"},"session":"r1"}`); out != `{"status":"success","tool":"everything__echo","result":"Echo: hi"}` {
		t.Fatalf("echo: %s", out)
	}
	if out := eval(`{"tool":"everything__echo","arguments":{"message":7}}`); !strings.Contains(out, `"error":"invalid_args"`) {
		t.Fatalf("Clara validates the remote schema: %s", out)
	}
	if out := eval(`{"tool":"everything__get-sum","arguments":{"a":1,"b":2}}`); !strings.Contains(out, `"error":"denied"`) {
		t.Fatalf("the policy holds: %s", out)
	}
	if out := eval(`{"tool":"everything__trigger-long-running-operation"}`); !strings.Contains(out, `"error":"unknown_tool"`) {
		t.Fatalf("a tool the server entry denies is not there: %s", out)
	}
	if out := eval(`{"tool":"audit_tail","arguments":{"n":10}}`); !strings.Contains(out, `"session":"r1","tool":"everything__echo"`) {
		t.Fatalf("audit: %s", out)
	}
	list := eval(`{"tool":"tools_list","arguments":{"format":"clara"}}`)
	if !strings.Contains(list, `"name":"everything__echo"`) || !strings.Contains(list, `"capabilities":["exec"]`) {
		t.Fatalf("tools_list: %.600s", list)
	}
	// Test mode answers for a stdio server's tools (capability exec)
	// without calling them; the connection stays as it was.
	if out := string(e.Configure([]byte(`{"test_mode":true}`))); !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatal(out)
	}
	if out := eval(`{"tool":"everything__echo","arguments":{"message":"hi"}}`); out != `{"status":"success","tool":"everything__echo","result":{"test_mode":true,"skipped":"everything__echo"}}` {
		t.Errorf("test mode: %s", out)
	}
	if out := string(e.Configure([]byte(`{"test_mode":false}`))); !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatal(out)
	}

	// A crash of the server's process is recovered: a new one answers.
	pids := children("server-everything")
	if len(pids) != 1 {
		t.Fatalf("server-everything processes: %v", pids)
	}
	syscall.Kill(pids[0], syscall.SIGKILL)
	waitFor(t, func() bool {
		return eval(`{"tool":"everything__echo","arguments":{"message":"again"}}`) == `{"status":"success","tool":"everything__echo","result":"Echo: again"}`
	}, "a call answered after the crash")
	if now := children("server-everything"); len(now) != 1 || now[0] == pids[0] {
		t.Errorf("after the restart: %v (was %v)", now, pids)
	}

	// Dropped from the configuration, the server's tools go.
	if out := string(e.Configure([]byte(`{"mcp_servers":[]}`))); !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatal(out)
	}
	if out := eval(`{"tool":"everything__echo","arguments":{"message":"hi"}}`); !strings.Contains(out, `"error":"unknown_tool"`) {
		t.Fatalf("after the server was dropped: %s", out)
	}
	// ... and its process ends.
	waitFor(t, func() bool { return len(children("server-everything")) == 0 }, "the end of server-everything")
}

func TestEngineRefusesABrokenServerEntry(t *testing.T) {
	e := core.New(core.Options{})
	out := string(e.Configure([]byte(`{"mcp_servers":[{"name":"x","command":"/nonexistent/server","eager":true,"init_timeout_ms":2000}]}`)))
	if !strings.Contains(out, `"error":"invalid_request"`) || !strings.Contains(out, "mcp_servers") {
		t.Fatalf("%s", out)
	}
	out = string(e.Configure([]byte(`{"mcp_servers":[{"name":"x","comand":"typo"}]}`)))
	if !strings.Contains(out, `unknown key \"comand\"`) {
		t.Fatalf("%s", out)
	}
	out = string(e.Configure([]byte(`{"mcp_servers":[{"name":"x","command":"c","headers_env":{"Authorization":"TOKEN"}}]}`)))
	if !strings.Contains(out, `headers_env is for url servers`) {
		t.Fatalf("%s", out)
	}
	out = string(e.Configure([]byte(`{"mcp_servers":[{"name":"x","url":"http://127.0.0.1:1/mcp","headers_env":{"Authorization":7}}]}`)))
	if !strings.Contains(out, `headers_env.Authorization must be the name of a variable`) {
		t.Fatalf("%s", out)
	}
}
