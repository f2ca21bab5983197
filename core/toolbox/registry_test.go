package toolbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/toolbox"
)

// tool builds a host tool answering out; released counts its releases.
func tool(t testing.TB, name, out string, released *atomic.Int32) *toolbox.Tool {
	t.Helper()
	tl, err := toolbox.NewTool(toolbox.Descriptor{Name: name}, toolbox.ToolOptions{
		Run: func(context.Context, toolbox.Call) ([]byte, error) { return []byte(out), nil },
		OnRelease: func() {
			if released != nil {
				released.Add(1)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tl
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

func TestRegistry_replaceUnregisterRelease(t *testing.T) {
	r := toolbox.NewRegistry()
	var rel1, rel2 atomic.Int32
	first, second := tool(t, "a", "1", &rel1), tool(t, "a", "2", &rel2)
	if err := r.Register(first); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(second); err != nil {
		t.Fatal(err)
	}
	if rel1.Load() != 1 || rel2.Load() != 0 {
		t.Fatalf("after replace: released %d, %d", rel1.Load(), rel2.Load())
	}
	r.Register(tool(t, "b", "3", nil))
	var names []string
	for _, tl := range r.List() {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "a,b" {
		t.Errorf("List = %v", names)
	}
	if err := r.Unregister("a"); err != nil {
		t.Fatal(err)
	}
	if rel2.Load() != 1 {
		t.Error("unregistered tool not released")
	}
	if err := r.Unregister("a"); !errors.Is(err, toolbox.ErrNotFound) {
		t.Errorf("Unregister twice: %v", err)
	}
	left, err := r.Swap(func(*toolbox.Tool) bool { return true }, nil)
	if err != nil || len(r.List()) != 0 || len(left) != 1 {
		t.Errorf("%d left in the registry, %d out, %v", len(r.List()), len(left), err)
	}
}

// Swap retires nothing itself: the tools that left are released only when
// the caller retires them (outside its own locks: a release callback may
// call back into Clara).
func TestRegistry_swap_leaves_retiring_to_the_caller(t *testing.T) {
	r := toolbox.NewRegistry()
	var released atomic.Int32
	old, _ := toolbox.NewTool(toolbox.Descriptor{Name: "a"}, toolbox.ToolOptions{
		Run:       func(context.Context, toolbox.Call) ([]byte, error) { return nil, nil },
		OnRelease: func() { released.Add(1) }})
	r.Register(old)
	next := tool(t, "a", "2", nil)
	left, err := r.Swap(nil, []*toolbox.Tool{next})
	if err != nil || len(left) != 1 || left[0] != old {
		t.Fatalf("left %v, %v", left, err)
	}
	if released.Load() != 0 {
		t.Fatal("Swap released a tool itself")
	}
	for _, t := range left {
		t.Retire()
	}
	if released.Load() != 1 {
		t.Fatal("Retire did not release the idle tool")
	}
	if cur, _ := r.Lookup("a"); cur != next {
		t.Fatal("the new tool is not registered")
	}
	b, _ := toolbox.NewTool(toolbox.Descriptor{Name: "echo"}, toolbox.ToolOptions{Builtin: true,
		Run: func(context.Context, toolbox.Call) ([]byte, error) { return nil, nil }})
	r.Register(b)
	if _, err := r.Swap(nil, []*toolbox.Tool{tool(t, "echo", "x", nil)}); !errors.Is(err, toolbox.ErrBuiltin) && (err == nil || !strings.Contains(err.Error(), "built-in")) {
		t.Fatalf("replacing a built-in through Swap: %v", err)
	}
}

// SwapGuarded registers what the guard lets take a name that stays, and
// keeps the refused out, whatever their order.
func TestRegistry_swapGuarded(t *testing.T) {
	r := toolbox.NewRegistry()
	host := tool(t, "mine", "host", nil)
	r.Register(host)
	free, taken, again := tool(t, "free", "1", nil), tool(t, "mine", "2", nil), tool(t, "free2", "3", nil)
	var asked []string
	left, refused := r.SwapGuarded(nil, []*toolbox.Tool{free, taken, again}, func(prev, t *toolbox.Tool) error {
		asked = append(asked, prev.Name)
		return fmt.Errorf("%q is taken", t.Name)
	})
	if len(left) != 0 || len(refused) != 1 || refused[0].Error() != `"mine" is taken` || len(asked) != 1 {
		t.Fatalf("left %v, refused %v, asked %v", left, refused, asked)
	}
	for name, want := range map[string]*toolbox.Tool{"mine": host, "free": free, "free2": again} {
		if cur, _ := r.Lookup(name); cur != want {
			t.Errorf("%s: %v", name, cur)
		}
	}
	// A guard that lets it: the holder leaves, for the caller to retire.
	left, refused = r.SwapGuarded(nil, []*toolbox.Tool{taken}, func(prev, t *toolbox.Tool) error { return nil })
	if len(left) != 1 || left[0] != host || len(refused) != 0 {
		t.Fatalf("left %v, refused %v", left, refused)
	}
}

func TestRegistry_builtinsStay(t *testing.T) {
	r := toolbox.NewRegistry()
	b, _ := toolbox.NewTool(toolbox.Descriptor{Name: "echo"}, toolbox.ToolOptions{Builtin: true,
		Run: func(context.Context, toolbox.Call) ([]byte, error) { return nil, nil }})
	r.Register(b)
	if err := r.Register(tool(t, "echo", "1", nil)); !errors.Is(err, toolbox.ErrBuiltin) {
		t.Errorf("replacing a built-in: %v", err)
	}
	if err := r.Unregister("echo"); !errors.Is(err, toolbox.ErrBuiltin) {
		t.Errorf("unregistering a built-in: %v", err)
	}
}

// TestRelease_waitsForRunningCalls: a tool unregistered during a call is
// released only when the call returns.
func TestRelease_waitsForRunningCalls(t *testing.T) {
	r := toolbox.NewRegistry()
	var released atomic.Int32
	entered, leave := make(chan struct{}), make(chan struct{})
	tl, _ := toolbox.NewTool(toolbox.Descriptor{Name: "slow", Limits: toolbox.Limits{TimeoutMS: 10000}}, toolbox.ToolOptions{
		Run: func(context.Context, toolbox.Call) ([]byte, error) {
			close(entered)
			<-leave
			return []byte(`"done"`), nil
		},
		OnRelease: func() { released.Add(1) },
	})
	r.Register(tl)
	got := make(chan string)
	go func() {
		out, _, perr := tl.Execute(context.Background(), toolbox.Call{Arguments: []byte(`{}`)}, toolbox.Defaults{})
		got <- fmt.Sprintf("%s %v", out, perr)
	}()
	<-entered
	r.Unregister("slow")
	if released.Load() != 0 {
		t.Fatal("released while a call was running")
	}
	close(leave)
	if g := <-got; g != `"done" <nil>` {
		t.Errorf("call got %s", g)
	}
	// The goroutine that ran the call lets go of the tool just after the
	// call's answer is handed back: wait for it (a minute at most).
	for i := 0; i < 6000 && released.Load() == 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if released.Load() != 1 {
		t.Fatal("not released after the call returned")
	}
	if _, _, perr := tl.Execute(context.Background(), toolbox.Call{Arguments: []byte(`{}`)}, toolbox.Defaults{}); perr == nil || perr.Code != "unknown_tool" {
		t.Errorf("call of a released tool: %v", perr)
	}
}

// TestRegistry_churn registers and unregisters while readers look up and
// run tools: a reader always sees a complete tool (run with -race).
func TestRegistry_churn(t *testing.T) {
	r := toolbox.NewRegistry()
	r.Register(tool(t, "stable", `"s"`, nil))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			name := fmt.Sprintf("t%d", w)
			for i := 0; i < 300; i++ {
				r.Register(tool(t, name, fmt.Sprint(i), nil))
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
				if out, _, perr := tl.Execute(context.Background(), toolbox.Call{Arguments: []byte(`{}`)}, toolbox.Defaults{TimeoutMS: 1000}); perr != nil || string(out) != `"s"` {
					t.Errorf("Execute = %s, %v", out, perr)
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

// List is sorted by name after every kind of change, and hands out a slice
// the caller may change without touching the registry's.
func TestRegistry_List_sorted_and_owned(t *testing.T) {
	r := toolbox.NewRegistry()
	names := func() []string {
		var out []string
		for _, tl := range r.List() {
			out = append(out, tl.Name)
		}
		return out
	}
	for _, n := range []string{"kiwi", "apple", "mango", "banana"} {
		if err := r.Register(tool(t, n, "1", nil)); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(names(), ","); got != "apple,banana,kiwi,mango" {
		t.Fatalf("after Register: %s", got)
	}
	if err := r.Unregister("banana"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Swap(func(tl *toolbox.Tool) bool { return tl.Name == "kiwi" }, []*toolbox.Tool{tool(t, "cherry", "1", nil)}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(), ","); got != "apple,cherry,mango" {
		t.Fatalf("after Unregister and Swap: %s", got)
	}
	l := r.List()
	l[0] = nil
	if got := strings.Join(names(), ","); got != "apple,cherry,mango" {
		t.Fatalf("a caller's change reached the registry: %s", got)
	}
}
