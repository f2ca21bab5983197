package core

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// A Lua tool's progress() reaches the MCP client that asked for progress,
// through the whole pipeline; without a listener it is ignored.
func TestMCPHost_luaProgress(t *testing.T) {
	e := New(Options{})
	out := e.Configure([]byte(`{"state_dir":"","rules":{"paths":[]},"tools":[{"name":"steps",` +
		`"lua":"return function(args) progress(1, 2, 'half way') progress(2, 2) return 'done' end","returns":"string"}]}`))
	if !strings.HasPrefix(string(out), `{"status":"success"`) {
		t.Fatal(string(out))
	}
	var mu sync.Mutex
	var seen []string
	progress := func(done, total float64, message string) {
		mu.Lock()
		seen = append(seen, strings.TrimSpace(strings.Join([]string{ftoa(done), ftoa(total), message}, " ")))
		mu.Unlock()
	}
	res, perr := mcpHost{e}.Call(context.Background(), "m1", "steps", []byte(`{}`), progress)
	if perr != nil || string(res) != `"done"` {
		t.Fatalf("%s %v", res, perr)
	}
	if got := strings.Join(seen, "|"); got != "1 2 half way|2 2" {
		t.Fatalf("progress seen: %q", got)
	}
	if _, perr := (mcpHost{e}).Call(context.Background(), "m1", "steps", []byte(`{}`), nil); perr != nil {
		t.Fatal(perr)
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
