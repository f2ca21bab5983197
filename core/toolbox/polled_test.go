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
