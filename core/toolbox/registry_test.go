package toolbox_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/clara-lib/clara/core/toolbox"
)

func tool(name string, out string) *toolbox.Tool {
	return &toolbox.Tool{Descriptor: toolbox.Descriptor{Name: name}, Run: func(context.Context, toolbox.Call) ([]byte, error) {
		return []byte(out), nil
	}}
}

func TestValidName(t *testing.T) {
	for _, ok := range []string{"a", "get_weather", "A-9_z", strings.Repeat("x", 64)} {
		if !toolbox.ValidName(ok) {
			t.Errorf("ValidName(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", "has space", "dot.name", "é", strings.Repeat("x", 65), "semi;colon"} {
		if toolbox.ValidName(bad) {
			t.Errorf("ValidName(%q) = true", bad)
		}
	}
}

func TestRegister_errors(t *testing.T) {
	r := toolbox.NewRegistry()
	if _, err := r.Register(&toolbox.Tool{Descriptor: toolbox.Descriptor{Name: "x"}}); err == nil || err.Error() != "tool has no function" {
		t.Errorf("nil Run: %v", err)
	}
	if _, err := r.Register(tool("bad name", "1")); err == nil || !strings.Contains(err.Error(), `invalid tool name "bad name"`) {
		t.Errorf("bad name: %v", err)
	}
	bad := tool("t", "1")
	bad.Returns = "xml"
	if _, err := r.Register(bad); err == nil || err.Error() != `tool "t": returns must be "json" or "string", not "xml"` {
		t.Errorf("bad returns: %v", err)
	}
}

func TestRegistry_replaceUnregisterList(t *testing.T) {
	r := toolbox.NewRegistry()
	first, second := tool("a", "1"), tool("a", "2")
	if prev, _ := r.Register(first); prev != nil {
		t.Fatal("replaced something in an empty registry")
	}
	if prev, _ := r.Register(second); prev != first {
		t.Fatal("Register did not return the replaced tool")
	}
	r.Register(tool("b", "3"))
	var names []string
	for _, tl := range r.List() {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "a,b" {
		t.Errorf("List = %v", names)
	}
	if got, ok := r.Unregister("a"); !ok || got != second {
		t.Error("Unregister did not return the tool")
	}
	if _, ok := r.Unregister("a"); ok {
		t.Error("Unregister twice succeeded")
	}
	removed := r.RemoveIf(func(*toolbox.Tool) bool { return true })
	if len(removed) != 1 || len(r.List()) != 0 {
		t.Errorf("RemoveIf removed %d, %d left", len(removed), len(r.List()))
	}
}

// TestRegistry_churn registers and unregisters while readers look up and
// run tools: a reader always sees a complete tool (run with -race).
func TestRegistry_churn(t *testing.T) {
	r := toolbox.NewRegistry()
	r.Register(tool("stable", `"s"`))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			name := fmt.Sprintf("t%d", w)
			for i := 0; i < 500; i++ {
				r.Register(tool(name, fmt.Sprint(i)))
				r.Unregister(name)
			}
		}(w)
	}
	readers := sync.WaitGroup{}
	for g := 0; g < 4; g++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				tl, ok := r.Lookup("stable")
				if !ok {
					t.Error("stable tool vanished")
					return
				}
				if out, perr := toolbox.Invoke(context.Background(), tl, toolbox.Call{Arguments: []byte(`{}`)}); perr != nil || string(out) != `"s"` {
					t.Errorf("Invoke = %s, %v", out, perr)
					return
				}
				for _, x := range r.List() {
					if x.Run == nil || x.Name == "" {
						t.Error("List returned an incomplete tool")
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
}
