package core

import (
	"context"
	"testing"
	"time"
)

// A question whose call has already ended is never handed to the handler
// (issue 25, finding 1): nobody would read its answer, and a handler that
// waits for its user would hold a thread for it.
func TestAskUser_an_ended_call_never_reaches_the_handler(t *testing.T) {
	e := New(Options{})
	asked := make(chan struct{}, 1)
	e.SetInputHandler(func([]byte) (string, bool) { asked <- struct{}{}; return "yes", true })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.askUser(ctx, "s", Question{Message: "Still there?"}); err != context.Canceled {
		t.Fatalf("err %v", err)
	}
	select {
	case <-asked:
		t.Fatal("the handler was asked a question whose call had ended")
	case <-time.After(200 * time.Millisecond):
	}
	if n := e.input.open.Load(); n != 0 {
		t.Fatalf("%d questions open", n)
	}
}
