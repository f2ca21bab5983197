package core_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/toolbox"
)

// Which results may fire file-change callbacks (issue 25, finding 13): a
// result's "changed_files" counts only for a tool that declares it
// reports them (reports_changed_files); arguments count only where a
// descriptor's changes_files points. So echo, or any tool that hands back
// what a model or an MCP client wrote, never runs the host's scripts.

// deployEngine has a configured callback, deploy, that leaves a file named
// deployed in the project root when it runs.
func deployEngine(t *testing.T, cfg string) (*core.Engine, string) {
	t.Helper()
	e, root := callbackEngine(t, "")
	mustConfigure(t, e, cfg+`
[[callbacks]]
name = "deploy"
pattern = "*"
blocking = true
timeout_secs = 30
run = 'touch "$CLARA_PROJECT_ROOT/deployed"'
`)
	return e, root
}

// deployed reports whether deploy ran, and forgets that it did.
func deployed(t *testing.T, root string) bool {
	t.Helper()
	err := os.Remove(filepath.Join(root, "deployed"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

func TestChangedFiles_only_a_tool_that_declares_it_reports_changed_files(t *testing.T) {
	e, root := deployEngine(t, `
[[tools]]
name = "lua_echo"
lua = 'return function(args) return args end'

[[tools]]
name = "lua_writer"
reports_changed_files = true
lua = 'return function(args) return { changed_files = args.files } end'
`)
	relay := func(_ context.Context, call toolbox.Call) ([]byte, error) {
		return append([]byte(nil), call.Arguments...), nil
	}
	register(t, e, `{"name":"host_echo"}`, relay)
	register(t, e, `{"name":"host_writer","reports_changed_files":true}`, relay)
	register(t, e, `{"name":"host_editor","changes_files":["path"]}`, answer(`{"edited":true}`))

	for _, c := range []struct {
		req   string
		fires bool
	}{
		// Tools that hand back what the caller wrote: nothing runs.
		{`{"tool":"echo","session":"s","arguments":{"changed_files":["src/x.rs"]}}`, false},
		{`{"tool":"lua_echo","session":"s","arguments":{"changed_files":["src/x.rs"]}}`, false},
		{`{"tool":"host_echo","session":"s","arguments":{"changed_files":["src/x.rs"]}}`, false},
		// Tools that say they report the files they change.
		{`{"tool":"lua_writer","session":"s","arguments":{"files":["src/x.rs"]}}`, true},
		{`{"tool":"host_writer","session":"s","arguments":{"changed_files":["src/x.rs"]}}`, true},
		// A descriptor's changes_files: where it points, nowhere else.
		{`{"tool":"host_editor","session":"s","arguments":{"path":"src/x.rs"}}`, true},
		{`{"tool":"host_editor","session":"s","arguments":{"changed_files":["src/x.rs"]}}`, false},
	} {
		out := evalString(t, e, c.req)
		if !strings.HasPrefix(out, `{"status":"success"`) {
			t.Fatalf("%s: %s", c.req, out)
		}
		if ran := deployed(t, root); ran != c.fires || strings.Contains(out, `"callbacks":[`) != c.fires {
			t.Errorf("%s: deploy ran %v, want %v: %s", c.req, ran, c.fires, out)
		}
	}
	// The descriptor says so where descriptors are listed.
	if out := evalString(t, e, `{"tool":"tools_list","arguments":{}}`); !strings.Contains(out, `"reports_changed_files":true`) {
		t.Errorf("tools_list: %s", out)
	}
	if err := e.RegisterTool([]byte(`{"name":"bad","reports_changed_files":"yes"}`), toolbox.ToolOptions{Run: relay}); err == nil ||
		!strings.Contains(err.Error(), `"reports_changed_files"`) {
		t.Errorf("a bad reports_changed_files: %v", err)
	}
}

// An MCP client calling echo with changed_files (the attack, from an MCP
// peer) runs nothing.
func TestChangedFiles_an_mcp_client_cannot_fire_callbacks_through_echo(t *testing.T) {
	e, root := deployEngine(t, "")
	c := serveEngine(t, e)
	res := c.call(t, "echo", map[string]any{"changed_files": []string{"src/x.rs"}}, false)
	if res.IsError {
		t.Fatalf("echo: %s", resultText(res))
	}
	if deployed(t, root) {
		t.Fatal("an MCP client's echo ran the deploy callback")
	}
}
