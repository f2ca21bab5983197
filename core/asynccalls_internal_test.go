package core

import (
	"bytes"
	"context"
	"strconv"
	"sync"
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
		tool, _ := e.tools.Lookup(name)
		if got := isHostTool(tool); got != host {
			t.Errorf("isHostTool(%q) = %v, want %v", name, got, host)
		}
	}
}

// A call cancelled before its goroutine started still runs that goroutine,
// which must not run the tool (issue 25, finding 9: 1,999 of 1,999 kv_set
// calls cancelled this way stored their key). The goroutines are held
// until every call is cancelled.
func TestAsync_a_call_cancelled_before_it_starts_never_runs_its_tool(t *testing.T) {
	e := New(Options{})
	if out := e.Configure([]byte("state_dir = \"\"\n")); !bytes.HasPrefix(out, []byte(`{"status":"success"`)) {
		t.Fatal(string(out))
	}
	release := make(chan struct{})
	var launched sync.WaitGroup
	o := e.asyncOptions(e.current.Load().config)
	o.Go = func(_ string, f func()) {
		launched.Add(1)
		go func() {
			defer launched.Done()
			<-release
			f()
		}()
	}
	e.async.SetOptions(o)
	const calls = 200
	for i := 0; i < calls; i++ {
		h, perr := e.Submit([]byte(`{"tool":"kv_set","session":"s","arguments":{"key":"k` + strconv.Itoa(i) + `","value":1}}`))
		if perr != nil {
			t.Fatal(perr)
		}
		if perr := e.Cancel(h); perr != nil {
			t.Fatal(perr)
		}
	}
	close(release)
	launched.Wait()
	if out := string(e.Evaluate([]byte(`{"tool":"kv_list","session":"s","arguments":{}}`))); out != `{"status":"success","tool":"kv_list","result":{"keys":[],"count":0}}` {
		t.Fatalf("cancelled calls ran: %s", out)
	}
}
