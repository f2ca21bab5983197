package toolbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/toolbox"
)

// A tool that polls its deadline (a Lua tool) gets the call's deadline without a timer: Done is
// the caller's, Err turns to DeadlineExceeded once the clock passes the deadline, and a run that
// returns it is a timeout. The caller cancelling still reaches it.
func TestExecute_pollsDeadline(t *testing.T) {
	var sawDone <-chan struct{}
	var sawDeadline bool
	tl, err := toolbox.NewTool(toolbox.Descriptor{Name: "poller", Limits: toolbox.Limits{TimeoutMS: 20}}, toolbox.ToolOptions{
		SelfTimed: true, PollsDeadline: true,
		Run: func(ctx context.Context, c toolbox.Call) ([]byte, error) {
			sawDone = ctx.Done()
			d, ok := ctx.Deadline()
			sawDeadline = ok && time.Until(d) <= 20*time.Millisecond
			for ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			return nil, ctx.Err()
		}})
	if err != nil {
		t.Fatal(err)
	}
	_, _, perr := tl.Execute(context.Background(), toolbox.Call{Arguments: []byte(`{}`)}, toolbox.Defaults{TimeoutMS: 1000})
	if perr == nil || perr.Code != "timeout" {
		t.Fatalf("got %v, want a timeout", perr)
	}
	if sawDone != nil || !sawDeadline {
		t.Errorf("Done %v (want the Background's nil), deadline within 20 ms %v", sawDone, sawDeadline)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, perr = tl.Execute(ctx, toolbox.Call{Arguments: []byte(`{}`)}, toolbox.Defaults{})
	if perr == nil || perr.Code != "tool_failed" || !errors.Is(perr, context.Canceled) {
		t.Fatalf("cancelled caller: got %v", perr)
	}
}

// A tool that returns compact JSON (a Lua tool) has its result taken as it is, not scanned: its
// bytes come back untouched; the size limit and a string tool's quoting still apply.
func TestExecute_compactJSON(t *testing.T) {
	run := func(out string) toolbox.Func {
		return func(context.Context, toolbox.Call) ([]byte, error) { return []byte(out), nil }
	}
	for _, c := range []struct {
		compact bool
		returns string
		max     int
		out     string
		want    string
	}{
		{false, "", 0, `{"a": 1}`, `{"a":1}`}, // scanned, compacted
		{true, "", 0, `{"a": 1}`, `{"a": 1}`}, // taken as it is
		{true, "", 0, ``, `null`},
		{true, "", 5, `[1,2,3]`, ""},         // over max_output_bytes
		{true, "string", 0, `a"b`, `"a\"b"`}, // quoted as ever
	} {
		tl, err := toolbox.NewTool(toolbox.Descriptor{Name: "lua", Returns: c.returns, Limits: toolbox.Limits{MaxOutputBytes: c.max}},
			toolbox.ToolOptions{SelfTimed: true, PollsDeadline: true, CompactJSON: c.compact, Run: run(c.out)})
		if err != nil {
			t.Fatal(err)
		}
		out, _, perr := tl.Execute(context.Background(), toolbox.Call{Arguments: []byte(`{}`)}, toolbox.Defaults{TimeoutMS: 1000})
		if c.want == "" {
			if perr == nil || perr.Code != "output_too_large" {
				t.Errorf("%+v: got %s, %v; want output_too_large", c, out, perr)
			}
			continue
		}
		if perr != nil || string(out) != c.want {
			t.Errorf("%+v: got %s, %v; want %s", c, out, perr, c.want)
		}
	}
}

// The context of a tool that polls its deadline states its whole budget (the tool's timeout), so
// that a Lua run need not read the clock to say it.
func TestExecute_pollsDeadlineBudget(t *testing.T) {
	var budget time.Duration
	tl, err := toolbox.NewTool(toolbox.Descriptor{Name: "poller", Limits: toolbox.Limits{TimeoutMS: 250}}, toolbox.ToolOptions{
		SelfTimed: true, PollsDeadline: true,
		Run: func(ctx context.Context, c toolbox.Call) ([]byte, error) {
			if b, ok := ctx.(interface{ Budget() time.Duration }); ok {
				budget = b.Budget()
			}
			return []byte(`{}`), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, perr := tl.Execute(context.Background(), toolbox.Call{Arguments: []byte(`{}`)}, toolbox.Defaults{}); perr != nil {
		t.Fatal(perr)
	}
	if budget != 250*time.Millisecond {
		t.Errorf("budget %v, want 250ms", budget)
	}
}

// The context of a tool that polls its deadline lives in Call.Room once: a second call with the
// same room (its first context may still be held) gets a context of its own, and the first is
// left as it was.
func TestExecute_pollsDeadlineRoom(t *testing.T) {
	var ctxs []context.Context
	var seen []time.Time // each context's deadline during its call
	tl, err := toolbox.NewTool(toolbox.Descriptor{Name: "poller", Limits: toolbox.Limits{TimeoutMS: 250}}, toolbox.ToolOptions{
		SelfTimed: true, PollsDeadline: true,
		Run: func(ctx context.Context, c toolbox.Call) ([]byte, error) {
			d, _ := ctx.Deadline()
			ctxs, seen = append(ctxs, ctx), append(seen, d)
			time.Sleep(2 * time.Millisecond) // the next call's deadline is later
			return []byte(`{}`), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	var room toolbox.CallRoom
	started := time.Now()
	for range 2 {
		call := toolbox.Call{Arguments: []byte(`{}`), Room: &room}
		if _, _, perr := tl.Execute(context.Background(), call, toolbox.Defaults{}); perr != nil {
			t.Fatal(perr)
		}
	}
	if len(ctxs) != 2 || ctxs[0] == ctxs[1] {
		t.Fatalf("the second call shares the first's context: %v", ctxs)
	}
	for i, ctx := range ctxs {
		d, ok := ctx.Deadline()
		if !ok || !d.Equal(seen[i]) || d.Before(started.Add(250*time.Millisecond)) || d.After(time.Now().Add(250*time.Millisecond)) {
			t.Errorf("call %d: deadline %v %v (during the call %v), want 250 ms from its start", i, d, ok, seen[i])
		}
	}
}
