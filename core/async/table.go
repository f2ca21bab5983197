package async

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
)

// Errors of the Table, for callers that map them to codes.
var (
	ErrBusy    = errors.New("async: too many calls running")
	ErrUnknown = errors.New("async: no such handle")
)

// Options configure a Table; zero fields take the defaults.
type Options struct {
	MaxRunning int                         // calls running at once; a submit beyond is refused (default 1000)
	MaxPending int                         // finished, uncollected answers kept; past it the oldest go (default 10,000)
	Log        *logging.Logger             // where dropped answers are reported; nil discards
	Go         func(what string, f func()) // starts a call's goroutine (tests hold them back); nil: a go statement (run recovers)
}

// Default limits (config async.max_running, async.max_pending).
const (
	DefaultMaxRunning = 1000
	DefaultMaxPending = 10000
)

// Finished is a call whose answer is ready.
type Finished struct {
	Handle int64
	Tool   string
	Status string // "success" or "error", read off the envelope
}

// Table holds the calls submitted and their answers.
type Table struct {
	mu        sync.Mutex
	o         Options
	next      int64
	jobs      map[int64]*job
	running   int
	finished  []int64 // finished, not yet taken (Take), oldest first
	pending   []int64 // finished, oldest first; some may be collected since (skipped when met)
	npending  int     // finished and not yet collected
	dropped   map[int64]bool
	signalled bool // the eventfd was written since the last Take
	ev        eventFD
}

// eventFD is the eventfd of FD. The host knows it by its number, fd, and
// must not close it; if it does anyway, the number may soon name a file of
// the host's, which Clara must never write into. So Clara writes to a
// duplicate of its own (own: the same eventfd, at a number the host never
// saw), and before each write checks that fd still names what it named
// (fstat's device, inode and type): when it does not, the host closed it,
// and signalling stops, with a warning, until FD is asked again. Another
// anonymous descriptor (an epoll, another eventfd) at the number looks the
// same to fstat; it is not written either, since writes go to own.
type eventFD struct {
	fd, own int    // -1 until asked for
	id      fileID // fd's identity when it was handed out
	lost    bool   // the host closed fd: nothing is signalled until FD is asked again
}

// signals: the eventfd may be written.
func (ev *eventFD) signals() bool { return ev.own >= 0 && !ev.lost }

// fileID is what identifies an open file to fstat.
type fileID struct {
	dev, ino uint64
	mode     uint32
}

func identify(fd int) (fileID, bool) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileID{}, false
	}
	return fileID{dev: st.Dev, ino: st.Ino, mode: st.Mode & unix.S_IFMT}, true
}

type job struct {
	// started: a goroutine, or a waiter, has taken the call to run it.
	started  atomic.Bool
	ctx      context.Context // the call's, which Cancel cancels (kept: Wait reads Err)
	run      Runner
	byWaiter bool // Call.ByWaiter
	tool     string
	cancel   context.CancelFunc
	// done is closed when the call finishes; made by the first Wait that
	// has to block (t.mu held), so that a call run by its waiter, or
	// collected once ready, never makes one.
	done     chan struct{}
	envelope []byte
	finished bool
}

// New returns an empty Table.
func New(o Options) *Table {
	t := &Table{jobs: map[int64]*job{}, dropped: map[int64]bool{}, ev: eventFD{fd: -1, own: -1}}
	t.SetOptions(o)
	return t
}

// SetOptions changes the limits (a new configuration); calls running keep
// going.
func (t *Table) SetOptions(o Options) {
	if o.MaxRunning <= 0 {
		o.MaxRunning = DefaultMaxRunning
	}
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.Log == nil {
		o.Log = &logging.Logger{}
	}
	t.mu.Lock()
	t.o = o
	t.mu.Unlock()
}

// Runner computes a call's envelope. It gets a context that Cancel
// cancels, and the call's handle. An interface rather than a func, so that
// a caller's own struct can be the runner without a closure to allocate.
type Runner interface {
	RunCall(ctx context.Context, handle int64) []byte
}

// RunFunc is a func as a Runner.
type RunFunc func(ctx context.Context, handle int64) []byte

// RunCall calls f.
func (f RunFunc) RunCall(ctx context.Context, handle int64) []byte { return f(ctx, handle) }

// Call is a call to run in the background.
type Call struct {
	Tool string // names the call in Finished
	Run  Runner
	// ByWaiter: a Wait without a time limit that finds the call not
	// started yet (and not cancelled) runs it itself, on the waiter's
	// goroutine. The goroutine Submit started then finds it taken and
	// ends. The waiter then returns when the call returns: a Cancel
	// meanwhile makes the answer ready at once for Ready and Take, but
	// this waiter collects it only once the call has stopped. So it is for
	// calls that stop soon once cancelled. What it saves is the hand-over
	// of the call to another thread and of the answer back, the better
	// part of a submit-and-wait (24-32 us against 5.5-8 us for the echo on
	// the bench's machine).
	ByWaiter bool
}

// Submit starts the call on a goroutine of its own and returns its handle
// at once. Past MaxRunning calls running, Submit refuses with ErrBusy
// rather than queue without bound.
func (t *Table) Submit(ctx context.Context, c Call) (int64, error) {
	t.mu.Lock()
	if t.running >= t.o.MaxRunning {
		t.mu.Unlock()
		return 0, fmt.Errorf("%w (async.max_running = %d)", ErrBusy, t.o.MaxRunning)
	}
	t.next++
	h := t.next
	ctx, cancel := context.WithCancel(ctx)
	j := &job{ctx: ctx, run: c.Run, byWaiter: c.ByWaiter, tool: c.Tool, cancel: cancel}
	t.jobs[h] = j
	t.running++
	launch := t.o.Go
	t.mu.Unlock()
	if launch != nil {
		launch("async call", func() { t.start(h, j) })
	} else {
		go t.start(h, j) // one allocation for the goroutine's arguments, none for a closure
	}
	return h, nil
}

// start runs the call h unless a waiter has taken it (Call.ByWaiter). It
// cannot panic outside run, which recovers and names the tool itself.
func (t *Table) start(h int64, j *job) {
	if j.started.CompareAndSwap(false, true) {
		t.run(h, j)
	}
}

// run runs the call h and records its answer, once j.started is taken.
func (t *Table) run(h int64, j *job) {
	var env []byte
	defer func() {
		if r := recover(); r != nil {
			logging.Panic(t.o.Log, "async call "+j.tool, r)
			env = protocol.AppendError(nil, nil, protocol.InternalError(nil))
		}
		t.finish(h, env)
	}()
	run, ctx := j.run, j.ctx
	j.run = nil // only the runner reads it: an answer kept for long does not keep the call's closure
	env = run.RunCall(ctx, h)
}

// cancelled is the answer of a call cancelled before it finished: the
// call's own late answer is dropped.
func cancelled(tool string) []byte {
	return protocol.AppendError(nil, nil, protocol.Errorf(protocol.ToolFailed, "the call of %q was cancelled", tool))
}

// finish records a call's answer, once (a cancelled call already has one).
func (t *Table) finish(h int64, env []byte) {
	t.mu.Lock()
	j := t.jobs[h]
	if j == nil || j.finished {
		if j != nil && j.cancel != nil {
			j.cancel()
		}
		t.mu.Unlock()
		return
	}
	j.finished, j.envelope = true, env
	j.cancel()
	t.running--
	t.finished = append(t.finished, h)
	t.pending = append(t.pending, h)
	t.npending++
	t.dropOldest()
	// One wake-up per batch: the eventfd is written when the first answer
	// since the last Take arrives, not for every answer (a write is a
	// system call, and the reader takes them all at once anyway).
	wake := !t.signalled && t.ev.signals()
	ev := t.ev
	t.signalled = t.signalled || wake
	if j.done != nil {
		close(j.done)
	}
	t.mu.Unlock()
	if wake {
		t.signal(ev)
	}
}

// dropOldest keeps at most MaxPending uncollected answers (t.mu held).
func (t *Table) dropOldest() {
	for t.npending > t.o.MaxPending && len(t.pending) > 0 {
		h := t.pending[0]
		t.pending = t.pending[1:]
		if j := t.jobs[h]; j != nil && j.finished {
			delete(t.jobs, h)
			t.npending--
			t.dropped[h] = true
			t.o.Log.Logf(logging.Warn, "async: the answer of call %d (%s) was dropped: more than %d answers waited to be collected (async.max_pending)", h, j.tool, t.o.MaxPending)
		}
	}
	// Collected answers leave their handles in pending; compact now and
	// then so that it stays about as long as what is really pending.
	if len(t.pending) > 64 && len(t.pending) > 2*t.npending {
		kept := make([]int64, 0, t.npending)
		for _, h := range t.pending {
			if j := t.jobs[h]; j != nil && j.finished {
				kept = append(kept, h)
			}
		}
		t.pending = kept
	}
	// The same for finished, which only Take trims: a host that collects
	// with Wait alone and never takes would otherwise grow it without end.
	if len(t.finished) > 64 && len(t.finished) > 2*t.npending {
		kept := make([]int64, 0, t.npending)
		for _, h := range t.finished {
			if t.jobs[h] != nil {
				kept = append(kept, h)
			}
		}
		t.finished = kept
	}
	if len(t.dropped) > 4*t.o.MaxPending { // remember recent drops only
		t.dropped = map[int64]bool{}
	}
}

// signal makes the eventfd readable, if the host's descriptor still names
// it (see eventFD). Called without t.mu.
func (t *Table) signal(ev eventFD) {
	if id, ok := identify(ev.fd); !ok || id != ev.id {
		t.mu.Lock()
		if t.ev.fd == ev.fd && t.ev.own == ev.own && !t.ev.lost {
			t.ev.lost = true
			t.o.Log.Logf(logging.Warn, "async: descriptor %d of clara_async_fd() was closed by the host (it names another "+
				"file now, or none): Clara stops signalling it, so as never to write into a file of someone else's; "+
				"clara_async_fd() hands out a new one", ev.fd)
		}
		t.mu.Unlock()
		return
	}
	var one = [8]byte{1}
	_, _ = unix.Write(ev.own, one[:])
}

// lookup explains an unknown handle (t.mu held).
func (t *Table) unknown(h int64) error {
	switch {
	case t.dropped[h]:
		return fmt.Errorf("%w: the answer of call %d was dropped (more than async.max_pending answers waited)", ErrUnknown, h)
	case h > 0 && h <= t.next:
		return fmt.Errorf("%w: call %d was already collected", ErrUnknown, h)
	}
	return fmt.Errorf("%w: %d is not a handle Clara gave", ErrUnknown, h)
}

// Ready reports whether the call's answer is ready.
func (t *Table) Ready(h int64) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	j := t.jobs[h]
	if j == nil {
		return false, t.unknown(h)
	}
	return j.finished, nil
}

// Wait waits at most timeout (negative: without limit) or until ctx ends
// for the call's answer. When it is ready it is returned and the handle
// is spent; otherwise done is false and the handle stays valid.
func (t *Table) Wait(ctx context.Context, h int64, timeout time.Duration) (envelope []byte, done bool, err error) {
	t.mu.Lock()
	j := t.jobs[h]
	if j == nil {
		err := t.unknown(h)
		t.mu.Unlock()
		return nil, false, err
	}
	t.mu.Unlock()
	// j.ctx ends when the call is cancelled or finished (finish cancels it):
	// a live one, not started yet, and a wait without limit run it here
	// (see Call.ByWaiter).
	if timeout < 0 && j.byWaiter && ctx.Done() == nil && j.ctx.Err() == nil && j.started.CompareAndSwap(false, true) {
		t.run(h, j)
	}
	t.mu.Lock()
	if timeout != 0 && !j.finished {
		if j.done == nil {
			j.done = make(chan struct{})
		}
		done := j.done
		t.mu.Unlock()
		var timer <-chan time.Time
		if timeout > 0 {
			tm := time.NewTimer(timeout)
			defer tm.Stop()
			timer = tm.C
		}
		select {
		case <-done:
		case <-timer:
		case <-ctx.Done():
		}
		t.mu.Lock()
	}
	defer t.mu.Unlock()
	if t.jobs[h] != j { // collected by another waiter meanwhile
		return nil, false, t.unknown(h)
	}
	if !j.finished {
		return nil, false, nil
	}
	delete(t.jobs, h)
	t.npending--
	return j.envelope, true, nil
}

// Cancel cancels the call's context: a call that watches it (an HTTP
// call, a chat) stops; one that cannot be stopped (a C tool already
// running) finishes on its own and its answer is dropped. Either way the
// call's answer is ready at once: tool_failed, cancelled.
func (t *Table) Cancel(h int64) error {
	t.mu.Lock()
	j := t.jobs[h]
	if j == nil {
		err := t.unknown(h)
		t.mu.Unlock()
		return err
	}
	finished := j.finished
	t.mu.Unlock()
	if !finished {
		t.finish(h, cancelled(j.tool))
	}
	return nil
}

// Take returns the calls finished since the last Take (each once), oldest
// first, at most max of them (max <= 0: all). Their answers stay until
// collected with Wait; a call collected (or dropped) before it was taken
// is not listed, and does not count against max.
func (t *Table) Take(max int) []Finished {
	t.mu.Lock()
	n := len(t.finished)
	if max > 0 && max < n {
		n = max
	}
	out := make([]Finished, 0, n)
	i := 0
	for ; i < len(t.finished) && len(out) < n; i++ {
		h := t.finished[i]
		j := t.jobs[h]
		if j == nil {
			continue // collected or dropped before it was taken
		}
		f := Finished{Handle: h, Tool: j.tool, Status: "error"}
		if statusSuccess(j.envelope) {
			f.Status = "success"
		}
		out = append(out, f)
	}
	for i < len(t.finished) && t.jobs[t.finished[i]] == nil {
		i++ // nothing left to take there either
	}
	t.finished = append(t.finished[:0], t.finished[i:]...)
	wake := false
	if len(t.finished) == 0 {
		t.signalled = false // the next answer wakes the reader again
	} else {
		wake = t.ev.signals() // more than max were waiting: come back for the rest
	}
	ev := t.ev
	t.mu.Unlock()
	if wake {
		t.signal(ev)
	}
	return out
}

// statusSuccess reads an envelope's status ("status" is always first).
func statusSuccess(env []byte) bool {
	const prefix = `{"status":"success"`
	return len(env) >= len(prefix) && string(env[:len(prefix)]) == prefix
}

// FD returns an eventfd that becomes readable whenever an answer is ready
// (read it to reset it, then Take). It is created on first use and lives
// as long as the Table; the same number is returned every time, unless the
// host closed it (see eventFD): then a new number for the same eventfd.
func (t *Table) FD() (int, error) {
	t.mu.Lock()
	if t.ev.signals() {
		defer t.mu.Unlock()
		return t.ev.fd, nil
	}
	if t.ev.own < 0 {
		own, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			t.mu.Unlock()
			return -1, fmt.Errorf("async: eventfd: %w", err)
		}
		t.ev.own = own
	}
	fd, err := unix.FcntlInt(uintptr(t.ev.own), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.mu.Unlock()
		return -1, fmt.Errorf("async: eventfd: %w", err)
	}
	id, _ := identify(fd)
	t.ev = eventFD{fd: fd, own: t.ev.own, id: id}
	wake := len(t.finished) > 0 // answers that arrived before anyone watched
	t.signalled = t.signalled || wake
	ev := t.ev
	t.mu.Unlock()
	if wake {
		t.signal(ev)
	}
	return fd, nil
}

// Running is the number of calls running.
func (t *Table) Running() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running
}

// Pending is the number of answers waiting to be collected.
func (t *Table) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.npending
}
