package core_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/toolbox"
)

// registerBlocker registers "block", a tool that waits until release is
// closed or its context ends, and says which.
func registerBlocker(t *testing.T, e *core.Engine, started chan<- struct{}, release <-chan struct{}, stopped chan<- error) {
	t.Helper()
	run := func(ctx context.Context, _ toolbox.Call) ([]byte, error) {
		started <- struct{}{}
		select {
		case <-release:
			return []byte(`"released"`), nil
		case <-ctx.Done():
			stopped <- ctx.Err()
			return nil, ctx.Err()
		}
	}
	if err := e.RegisterTool([]byte(`{"name":"block","limits":{"timeout_ms":60000}}`), toolbox.ToolOptions{Run: run}); err != nil {
		t.Fatal(err)
	}
}

func handleOf(t *testing.T, accepted string) int64 {
	t.Helper()
	i := strings.Index(accepted, `"handle":`)
	if !strings.HasPrefix(accepted, `{"status":"accepted"`) || i < 0 {
		t.Fatalf("not accepted: %s", accepted)
	}
	h, err := strconv.ParseInt(strings.TrimSuffix(accepted[i+len(`"handle":`):], "}"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestAsync_a_request_runs_in_the_background_and_is_collected_once(t *testing.T) {
	e := rulesEngine(t, "")
	req := []byte(`{"tool":"echo","arguments":{"word":"kept"},"async":true,"id":9}`)
	out := string(e.Evaluate(req))
	h := handleOf(t, out)
	expectEq(t, "accepted", out, `{"status":"accepted","id":9,"handle":`+strconv.FormatInt(h, 10)+`}`)
	copy(req, strings.Repeat("Z", len(req))) // the host reuses its buffer
	expectEq(t, "answer", string(e.Wait(context.Background(), h, -1)), `{"status":"success","id":9,"tool":"echo","result":{"word":"kept"}}`)
	expectEq(t, "spent", string(e.Wait(context.Background(), h, 0)),
		`{"status":"error","error":"invalid_request","message":"async: no such handle: call `+strconv.FormatInt(h, 10)+` was already collected"}`)
	expectEq(t, "never given", string(e.Wait(context.Background(), 999, 0)),
		`{"status":"error","error":"invalid_request","message":"async: no such handle: 999 is not a handle Clara gave"}`)
}

func TestAsync_submit_refuses_what_the_call_would_refuse(t *testing.T) {
	e := rulesEngine(t, "")
	if _, perr := e.Submit([]byte(`{"tool":"echo","policy":{"allow":"echo"}}`)); perr == nil || perr.Code != "invalid_request" {
		t.Fatalf("a bad policy was submitted: %v", perr)
	}
	if _, perr := e.Submit([]byte(`{"tool":`)); perr == nil {
		t.Fatal("broken JSON was submitted")
	}
	if _, perr := e.Submit(nil); perr == nil {
		t.Fatal("NULL was submitted")
	}
	// An unknown tool is the call's answer, as it would be synchronously.
	h, perr := e.Submit([]byte(`{"tool":"nope"}`))
	if perr != nil {
		t.Fatal(perr)
	}
	if got := string(e.Wait(context.Background(), h, -1)); !strings.Contains(got, `"error":"unknown_tool"`) {
		t.Fatal(got)
	}
}

func TestAsync_cancel_stops_the_call_and_answers_at_once(t *testing.T) {
	e := rulesEngine(t, "")
	started, release, stopped := make(chan struct{}, 1), make(chan struct{}), make(chan error, 1)
	registerBlocker(t, e, started, release, stopped)
	h, perr := e.Submit([]byte(`{"tool":"block"}`))
	if perr != nil {
		t.Fatal(perr)
	}
	<-started
	if ready, _ := e.Ready(h); ready {
		t.Fatal("ready before it finished")
	}
	if perr := e.Cancel(h); perr != nil {
		t.Fatal(perr)
	}
	if err := <-stopped; err != context.Canceled {
		t.Fatalf("the tool's context ended with %v", err)
	}
	expectEq(t, "cancelled", string(e.Wait(context.Background(), h, -1)),
		`{"status":"error","error":"tool_failed","message":"the call of \"block\" was cancelled"}`)
}

func TestAsync_max_running_refuses_rather_than_queues(t *testing.T) {
	e := rulesEngine(t, "[async]\nmax_running = 1\n")
	started, release, stopped := make(chan struct{}, 1), make(chan struct{}), make(chan error, 1)
	registerBlocker(t, e, started, release, stopped)
	h, perr := e.Submit([]byte(`{"tool":"block"}`))
	if perr != nil {
		t.Fatal(perr)
	}
	<-started
	out := evalString(t, e, `{"tool":"echo","async":true}`)
	expectEq(t, "busy", out, `{"status":"error","error":"rate_limited","message":"async: too many calls running (async.max_running = 1): collect or cancel some first"}`)
	close(release)
	expectEq(t, "released", string(e.Wait(context.Background(), h, -1)), `{"status":"success","tool":"block","result":"released"}`)
	if _, perr := e.Submit([]byte(`{"tool":"echo"}`)); perr != nil {
		t.Fatalf("a slot freed is not usable: %v", perr)
	}
}

func TestAsync_tools_and_take(t *testing.T) {
	e := rulesEngine(t, "")
	started, release, stopped := make(chan struct{}, 1), make(chan struct{}), make(chan error, 1)
	registerBlocker(t, e, started, release, stopped)
	slow := handleOf(t, evalString(t, e, `{"tool":"block","async":true}`))
	<-started
	fast := handleOf(t, evalString(t, e, `{"tool":"echo","arguments":{"n":1},"async":true}`))
	hs := strconv.FormatInt(slow, 10)
	expectEq(t, "pending", evalString(t, e, `{"tool":"async_result","arguments":{"handle":`+hs+`,"wait_ms":1}}`),
		`{"status":"success","tool":"async_result","result":{"status":"pending","handle":`+hs+`}}`)
	fs := strconv.FormatInt(fast, 10)
	expectEq(t, "done", evalString(t, e, `{"tool":"async_result","arguments":{"handle":`+fs+`,"wait_ms":60000}}`),
		`{"status":"success","tool":"async_result","result":{"status":"success","tool":"echo","result":{"n":1}}}`)
	expectEq(t, "cancel", evalString(t, e, `{"tool":"async_cancel","arguments":{"handle":`+hs+`}}`),
		`{"status":"success","tool":"async_cancel","result":{"handle":`+hs+`,"cancelled":true}}`)
	<-stopped
	// The echo was collected before it was taken; the cancelled call was not.
	expectEq(t, "take", string(e.AsyncTake(0)), `[{"handle":`+hs+`,"tool":"block","status":"error"}]`)
	expectEq(t, "take again", string(e.AsyncTake(0)), `[]`)
	expectEq(t, "unknown", evalString(t, e, `{"tool":"async_cancel","arguments":{"handle":424242}}`),
		`{"status":"error","error":"invalid_args","message":"async_cancel: async: no such handle: 424242 is not a handle Clara gave"}`)
}

func TestAsync_progress_knows_its_handle(t *testing.T) {
	e := rulesEngine(t, "")
	seen := make(chan int64, 1)
	run := func(ctx context.Context, _ toolbox.Call) ([]byte, error) {
		seen <- core.AsyncHandle(ctx)
		return []byte(`1`), nil
	}
	if err := e.RegisterTool([]byte(`{"name":"which"}`), toolbox.ToolOptions{Run: run}); err != nil {
		t.Fatal(err)
	}
	h, _ := e.Submit([]byte(`{"tool":"which"}`))
	if got := <-seen; got != h {
		t.Fatalf("the call saw handle %d, submitted as %d", got, h)
	}
	e.Wait(context.Background(), h, time.Minute)
	evalString(t, e, `{"tool":"which"}`)
	if got := <-seen; got != 0 {
		t.Fatalf("a synchronous call saw handle %d", got)
	}
}
