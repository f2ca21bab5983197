package async_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clara-lib/clara/core/async"
	"github.com/clara-lib/clara/core/logging"
)

func envelope(s string) []byte { return []byte(`{"status":"success","result":"` + s + `"}`) }

func TestTable_submit_then_wait_spends_the_handle(t *testing.T) {
	tab := async.New(async.Options{})
	h, err := tab.Submit(context.Background(), async.Call{Tool: "echo", Run: async.RunFunc(func(context.Context, int64) []byte { return envelope("a") })})
	if err != nil || h != 1 {
		t.Fatalf("handle %d, %v", h, err)
	}
	env, done, err := tab.Wait(context.Background(), h, -1)
	if err != nil || !done || string(env) != string(envelope("a")) {
		t.Fatalf("%s %v %v", env, done, err)
	}
	if _, _, err := tab.Wait(context.Background(), h, 0); !errors.Is(err, async.ErrUnknown) || !strings.Contains(err.Error(), "already collected") {
		t.Fatalf("a spent handle: %v", err)
	}
	if _, err := tab.Ready(99); !errors.Is(err, async.ErrUnknown) || !strings.Contains(err.Error(), "not a handle") {
		t.Fatalf("an unknown handle: %v", err)
	}
}

func TestTable_wait_with_a_timeout_answers_pending(t *testing.T) {
	tab := async.New(async.Options{})
	release := make(chan struct{})
	h, _ := tab.Submit(context.Background(), async.Call{Tool: "slow", Run: async.RunFunc(func(context.Context, int64) []byte { <-release; return envelope("late") })})
	if _, done, err := tab.Wait(context.Background(), h, time.Millisecond); done || err != nil {
		t.Fatalf("done %v, %v", done, err)
	}
	if ready, _ := tab.Ready(h); ready {
		t.Fatal("ready before the call returned")
	}
	close(release)
	if env, done, _ := tab.Wait(context.Background(), h, -1); !done || !strings.Contains(string(env), "late") {
		t.Fatalf("%s", env)
	}
}

// Waiters blocked on one call all wake when it finishes (its done channel
// is made by the first waiter that blocks, not at submit): one collects the
// answer, the others learn it was collected.
func TestTable_waiters_blocked_on_one_call_all_wake(t *testing.T) {
	tab := async.New(async.Options{})
	release := make(chan struct{})
	h, _ := tab.Submit(context.Background(), async.Call{Tool: "slow", Run: async.RunFunc(func(context.Context, int64) []byte { <-release; return envelope("late") })})
	const waiters = 4
	results := make(chan bool, waiters)
	for i := 0; i < waiters; i++ {
		go func() {
			_, done, err := tab.Wait(context.Background(), h, time.Minute)
			results <- done && err == nil
		}()
	}
	time.Sleep(20 * time.Millisecond) // let them block; the test holds either way
	close(release)
	collected := 0
	for i := 0; i < waiters; i++ {
		select {
		case ok := <-results:
			if ok {
				collected++
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("a waiter did not wake when the call finished (%d of %d back)", i, waiters)
		}
	}
	if collected != 1 {
		t.Fatalf("%d waiters collected the answer, want 1", collected)
	}
	// A wait with a time limit on a call already finished answers at once.
	h2, _ := tab.Submit(context.Background(), async.Call{Tool: "quick", Run: async.RunFunc(func(context.Context, int64) []byte { return envelope("soon") })})
	for ready := false; !ready; ready, _ = tab.Ready(h2) {
		time.Sleep(time.Millisecond)
	}
	if env, done, _ := tab.Wait(context.Background(), h2, time.Hour); !done || !strings.Contains(string(env), "soon") {
		t.Fatalf("%s", env)
	}
}

// Cancel stops a call that watches its context, and answers at once for
// one that does not (its late answer is dropped).
func TestTable_cancel(t *testing.T) {
	tab := async.New(async.Options{})
	stopped := make(chan struct{})
	h, _ := tab.Submit(context.Background(), async.Call{Tool: "watcher", Run: async.RunFunc(func(ctx context.Context, _ int64) []byte {
		<-ctx.Done()
		close(stopped)
		return envelope("after cancel")
	})})
	stubborn := make(chan struct{})
	h2, _ := tab.Submit(context.Background(), async.Call{Tool: "c_tool", Run: async.RunFunc(func(context.Context, int64) []byte { <-stubborn; return envelope("ignored") })})
	if err := tab.Cancel(h); err != nil {
		t.Fatal(err)
	}
	<-stopped
	if err := tab.Cancel(h2); err != nil {
		t.Fatal(err)
	}
	for _, x := range []int64{h, h2} {
		env, done, err := tab.Wait(context.Background(), x, 0)
		if err != nil || !done || !strings.Contains(string(env), `"error":"tool_failed"`) || !strings.Contains(string(env), "cancelled") {
			t.Fatalf("handle %d: %s %v %v", x, env, done, err)
		}
	}
	close(stubborn)
	if tab.Running() != 0 || tab.Pending() != 0 {
		t.Fatalf("running %d, pending %d", tab.Running(), tab.Pending())
	}
}

func TestTable_max_running_refuses(t *testing.T) {
	tab := async.New(async.Options{MaxRunning: 2})
	block := make(chan struct{})
	for i := 0; i < 2; i++ {
		if _, err := tab.Submit(context.Background(), async.Call{Tool: "x", Run: async.RunFunc(func(context.Context, int64) []byte { <-block; return envelope("") })}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tab.Submit(context.Background(), async.Call{Tool: "x", Run: async.RunFunc(func(context.Context, int64) []byte { return nil })}); !errors.Is(err, async.ErrBusy) {
		t.Fatalf("third submit: %v", err)
	}
	close(block)
}

func TestTable_max_pending_drops_the_oldest(t *testing.T) {
	tab := async.New(async.Options{MaxPending: 3})
	var hs []int64
	for i := 0; i < 5; i++ {
		h, _ := tab.Submit(context.Background(), async.Call{Tool: "x", Run: async.RunFunc(func(context.Context, int64) []byte { return envelope(fmt.Sprint(i)) })})
		for ready, _ := tab.Ready(h); !ready; ready, _ = tab.Ready(h) {
			time.Sleep(time.Millisecond)
		}
		hs = append(hs, h)
	}
	for _, h := range hs[:2] {
		if _, _, err := tab.Wait(context.Background(), h, 0); err == nil || !strings.Contains(err.Error(), "dropped") {
			t.Fatalf("handle %d: %v", h, err)
		}
	}
	for _, h := range hs[2:] {
		if _, done, err := tab.Wait(context.Background(), h, 0); !done || err != nil {
			t.Fatalf("handle %d: %v", h, err)
		}
	}
}

// The eventfd becomes readable when answers are ready; Take hands each
// finished call out once; a panic in a call is an internal error envelope.
func TestTable_eventfd_take_and_panics(t *testing.T) {
	tab := async.New(async.Options{})
	fd, err := tab.FD()
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	var wg sync.WaitGroup
	seen := map[int64]bool{}
	var mu sync.Mutex
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			h, err := tab.Submit(context.Background(), async.Call{Tool: "x", Run: async.RunFunc(func(context.Context, int64) []byte {
				if i%50 == 0 {
					panic("boom")
				}
				return envelope("ok")
			})})
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			if seen[h] {
				t.Errorf("handle %d given twice", h)
			}
			seen[h] = true
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	got := map[int64]bool{}
	errorsSeen := 0
	for len(got) < n {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, 5000); err != nil && err != unix.EINTR {
			t.Fatal(err)
		}
		var buf [8]byte
		_, _ = unix.Read(fd, buf[:])
		for _, f := range tab.Take(0) {
			if got[f.Handle] {
				t.Fatalf("handle %d taken twice", f.Handle)
			}
			got[f.Handle] = true
			env, done, err := tab.Wait(context.Background(), f.Handle, 0)
			if !done || err != nil {
				t.Fatal(err)
			}
			if f.Status == "error" {
				errorsSeen++
				if !strings.Contains(string(env), `"error":"internal"`) {
					t.Fatalf("%s", env)
				}
			}
		}
	}
	if errorsSeen != n/50 {
		t.Fatalf("%d internal errors, want %d", errorsSeen, n/50)
	}
}

// TestTable_eventfd_once_per_batch: the eventfd is written when the first
// answer since the last Take arrives (its counter says how many writes),
// and again after a Take emptied the list.
func TestTable_eventfd_once_per_batch(t *testing.T) {
	tab := async.New(async.Options{})
	fd, err := tab.FD()
	if err != nil {
		t.Fatal(err)
	}
	counter := func() uint64 {
		var buf [8]byte
		if n, err := unix.Read(fd, buf[:]); n != 8 || err != nil {
			return 0 // EAGAIN: not readable
		}
		return uint64(buf[0]) | uint64(buf[1])<<8
	}
	submitAndWait := func() int64 {
		h, err := tab.Submit(context.Background(), async.Call{Tool: "x", Run: async.RunFunc(func(context.Context, int64) []byte { return envelope("ok") })})
		if err != nil {
			t.Fatal(err)
		}
		for ready := false; !ready; ready, _ = tab.Ready(h) {
			time.Sleep(time.Millisecond)
		}
		return h
	}
	for i := 0; i < 3; i++ {
		submitAndWait()
	}
	if got := counter(); got != 1 {
		t.Fatalf("three answers wrote the eventfd %d times, want once", got)
	}
	if got := len(tab.Take(2)); got != 2 {
		t.Fatalf("took %d", got)
	}
	if got := counter(); got != 1 {
		t.Fatalf("a Take that left an answer behind must wake the reader again (counter %d)", got)
	}
	if got := len(tab.Take(0)); got != 1 {
		t.Fatalf("took %d", got)
	}
	submitAndWait()
	if got := counter(); got != 1 {
		t.Fatalf("the first answer after an emptying Take must wake the reader (counter %d)", got)
	}
}

// heldLauncher is an Options.Go that keeps the goroutines Submit starts
// until release runs them: the calls are then not started when Wait comes.
type heldLauncher struct {
	mu     sync.Mutex
	bodies []func()
}

func (l *heldLauncher) launch(_ string, f func()) {
	l.mu.Lock()
	l.bodies = append(l.bodies, f)
	l.mu.Unlock()
}

func (l *heldLauncher) release() {
	l.mu.Lock()
	bodies := l.bodies
	l.bodies = nil
	l.mu.Unlock()
	for _, f := range bodies {
		go f()
	}
}

// waitOrFail waits without limit in a goroutine, failing the test rather
// than hanging when no answer comes within a few seconds.
func waitOrFail(t *testing.T, tab *async.Table, h int64) []byte {
	t.Helper()
	type answer struct {
		env  []byte
		done bool
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		env, done, err := tab.Wait(context.Background(), h, -1)
		got <- answer{env, done, err}
	}()
	select {
	case a := <-got:
		if !a.done || a.err != nil {
			t.Fatalf("Wait: done %v, %v", a.done, a.err)
		}
		return a.env
	case <-time.After(5 * time.Second):
		t.Fatal("Wait without limit did not return")
	}
	return nil
}

// A Wait without limit runs a ByWaiter call that no goroutine has started,
// once: the goroutine that starts late finds it taken.
func TestTable_waiter_runs_a_call_not_started(t *testing.T) {
	var l heldLauncher
	tab := async.New(async.Options{Go: l.launch})
	var n int
	var mu sync.Mutex
	run := func(context.Context, int64) []byte {
		mu.Lock()
		n++
		mu.Unlock()
		return envelope("here")
	}
	h, err := tab.Submit(context.Background(), async.Call{Tool: "quick", Run: async.RunFunc(run), ByWaiter: true})
	if err != nil {
		t.Fatal(err)
	}
	if env := waitOrFail(t, tab, h); string(env) != string(envelope("here")) {
		t.Fatalf("%s", env)
	}
	l.mu.Lock()
	body := l.bodies[0]
	l.bodies = nil
	l.mu.Unlock()
	body() // the goroutine Submit started, late: finds the call taken
	if n != 1 {
		t.Fatalf("the call ran %d times", n)
	}
	if tab.Running() != 0 || tab.Pending() != 0 {
		t.Fatalf("running %d, pending %d", tab.Running(), tab.Pending())
	}
}

// A call without ByWaiter, a Wait with a time limit and a call cancelled
// before it started are never run by the waiter.
func TestTable_waiter_leaves_calls_to_their_goroutine(t *testing.T) {
	var l heldLauncher
	tab := async.New(async.Options{Go: l.launch})
	var waiterRan bool
	var mu sync.Mutex
	onWaiter := make(chan struct{})
	run := func(context.Context, int64) []byte {
		select {
		case <-onWaiter:
			mu.Lock()
			waiterRan = true
			mu.Unlock()
		default:
		}
		return envelope("there")
	}
	// Not ByWaiter: the waiter waits for the goroutine.
	h1, _ := tab.Submit(context.Background(), async.Call{Tool: "host", Run: async.RunFunc(run)})
	got := make(chan []byte, 1)
	go func() {
		env, _, _ := tab.Wait(context.Background(), h1, -1)
		got <- env
	}()
	select {
	case env := <-got:
		t.Fatalf("Wait answered %s before the call's goroutine ran", env)
	case <-time.After(50 * time.Millisecond):
	}
	l.release()
	if env := <-got; string(env) != string(envelope("there")) {
		t.Fatalf("%s", env)
	}
	// ByWaiter, but a Wait with a time limit: pending, not run.
	close(onWaiter)
	h2, _ := tab.Submit(context.Background(), async.Call{Tool: "quick", Run: async.RunFunc(run), ByWaiter: true})
	if _, done, err := tab.Wait(context.Background(), h2, time.Millisecond); done || err != nil {
		t.Fatalf("done %v, %v", done, err)
	}
	if _, done, err := tab.Wait(context.Background(), h2, 0); done || err != nil {
		t.Fatalf("done %v, %v", done, err)
	}
	// ByWaiter, cancelled before it started: the waiter collects the
	// cancellation and runs nothing.
	h3, _ := tab.Submit(context.Background(), async.Call{Tool: "quick", Run: async.RunFunc(run), ByWaiter: true})
	if err := tab.Cancel(h3); err != nil {
		t.Fatal(err)
	}
	if env := waitOrFail(t, tab, h3); !strings.Contains(string(env), "cancelled") {
		t.Fatalf("%s", env)
	}
	mu.Lock()
	ran := waiterRan
	mu.Unlock()
	if ran {
		t.Fatal("a waiter ran a call it should have left to its goroutine")
	}
	l.release()
	if env := waitOrFail(t, tab, h2); string(env) != string(envelope("there")) {
		t.Fatalf("%s", env)
	}
}

// finishedCalls submits n calls that answer at once and waits until all
// are ready; their handles, in order.
func finishedCalls(t *testing.T, tab *async.Table, n int) []int64 {
	t.Helper()
	hs := make([]int64, n)
	for i := range hs {
		h, err := tab.Submit(context.Background(), async.Call{Tool: "x", Run: async.RunFunc(func(context.Context, int64) []byte { return envelope("ok") })})
		if err != nil {
			t.Fatal(err)
		}
		for ready := false; !ready; ready, _ = tab.Ready(h) {
			time.Sleep(100 * time.Microsecond)
		}
		hs[i] = h
	}
	return hs
}

// Calls collected before they were taken neither appear in Take nor count
// against its max (issue 25, finding 23: Take(5) answered nothing while
// five calls waited behind five collected ones).
func TestTable_take_skips_collected_calls(t *testing.T) {
	tab := async.New(async.Options{})
	hs := finishedCalls(t, tab, 10)
	for _, h := range hs[:5] {
		if _, done, err := tab.Wait(context.Background(), h, 0); !done || err != nil {
			t.Fatal(err)
		}
	}
	got := tab.Take(5)
	if len(got) != 5 {
		t.Fatalf("Take(5) = %v, want the 5 calls that wait", got)
	}
	for i, f := range got {
		if f.Handle != hs[5+i] || f.Tool != "x" || f.Status != "success" {
			t.Fatalf("Take(5)[%d] = %+v, want handle %d", i, f, hs[5+i])
		}
	}
	if got := tab.Take(0); len(got) != 0 {
		t.Fatalf("taken again: %v", got)
	}
}

// A host that collects with Wait alone, and never takes, does not make the
// list of calls to take grow without end.
func TestTable_never_taking_keeps_nothing(t *testing.T) {
	tab := async.New(async.Options{})
	for i := 0; i < 300; i++ {
		h := finishedCalls(t, tab, 1)[0]
		if _, done, err := tab.Wait(context.Background(), h, 0); !done || err != nil {
			t.Fatal(err)
		}
	}
	if n := async.Untaken(tab); n > 70 {
		t.Fatalf("%d handles kept for Take after 300 collected calls", n)
	}
	h := finishedCalls(t, tab, 1)[0]
	if got := tab.Take(0); len(got) != 1 || got[0].Handle != h {
		t.Fatalf("Take = %v, want only %d", got, h)
	}
}

// The host closes the eventfd and the number comes to name a file of its
// own: Clara writes nothing into it, says why at warn level, and FD then
// hands out a new descriptor of the eventfd, which works (issue 25,
// finding 22).
func TestTable_eventfd_closed_by_the_host_is_not_written(t *testing.T) {
	var logged strings.Builder
	var logMu sync.Mutex
	log := &logging.Logger{}
	log.SetSink(func(_ logging.Level, msg string) { logMu.Lock(); logged.WriteString(msg + "\n"); logMu.Unlock() }, logging.Warn)
	tab := async.New(async.Options{Log: log})
	fd, err := tab.FD()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "host")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Dup2(int(f.Fd()), fd); err != nil { // the eventfd closed, the number reused
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for i := 0; i < 3; i++ {
		finishedCalls(t, tab, 1)
		tab.Take(0)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Size != 0 {
		t.Fatalf("the host's file holds %d bytes (%v)", st.Size, err)
	}
	logMu.Lock()
	if !strings.Contains(logged.String(), fmt.Sprintf("descriptor %d of clara_async_fd() was closed by the host", fd)) {
		t.Errorf("log: %q", logged.String())
	}
	logMu.Unlock()
	again, err := tab.FD()
	if err != nil || again == fd {
		t.Fatalf("FD again: %d, %v", again, err)
	}
	if same, _ := tab.FD(); same != again {
		t.Fatalf("FD: %d, then %d", again, same)
	}
	finishedCalls(t, tab, 1)
	pfd := []unix.PollFd{{Fd: int32(again), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, 5000); n != 1 || err != nil {
		t.Fatalf("the new descriptor: poll %d, %v", n, err)
	}
}
