package core

import (
	"bytes"
	"context"
	"testing"

	"github.com/clara-lib/clara/core/toolbox"
)

// A host's tool is left to its goroutine by a waiter (cancelling cannot
// stop it there); the others may run on the waiter (async.Call.ByWaiter).
func TestAsync_host_tools_are_not_run_by_waiters(t *testing.T) {
	e := New(Options{})
	if out := e.Configure([]byte("[[tools]]\nname = \"lua_echo\"\nlua = \"return function(args) return args end\"\n")); !bytes.HasPrefix(out, []byte(`{"status":"success"`)) {
		t.Fatal(string(out))
	}
	run := func(context.Context, toolbox.Call) ([]byte, error) { return []byte(`1`), nil }
	if err := e.RegisterTool([]byte(`{"name":"host_tool"}`), toolbox.ToolOptions{Run: run}); err != nil {
		t.Fatal(err)
	}
	for name, host := range map[string]bool{"host_tool": true, "echo": false, "lua_echo": false, "nope": false} {
		if got := e.isHostTool(name); got != host {
			t.Errorf("isHostTool(%q) = %v, want %v", name, got, host)
		}
	}
}
