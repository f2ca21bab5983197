package toolbox

import (
	"sync"
	"time"
)

const rateSpan = time.Minute

// rateLimiter admits at most n calls in any rolling minute, for the whole
// tool or for each session. A window keeps the times of the last n
// admitted calls: a call is admitted when fewer than n are recorded or the
// oldest is a minute old. Only tools with rate_per_min have one, so other
// tools pay nothing.
type rateLimiter struct {
	n          int
	perSession bool
	mu         sync.Mutex
	windows    map[string]*rateWindow
	lastSweep  time.Time
}

type rateWindow struct {
	times []time.Time // ring of admitted call times, grown up to n
	next  int         // index of the oldest once the ring is full
	last  time.Time
}

func newRateLimiter(n int, perSession bool) *rateLimiter {
	return &rateLimiter{n: n, perSession: perSession, windows: map[string]*rateWindow{}}
}

// admit records a call at now, or refuses it and says how long until the
// oldest recorded call leaves the window.
func (r *rateLimiter) admit(session string, now time.Time) (bool, time.Duration) {
	key := ""
	if r.perSession {
		key = session
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.windows[key]
	if w == nil {
		r.sweep(now)
		w = &rateWindow{}
		r.windows[key] = w
	}
	if len(w.times) < r.n {
		w.times = append(w.times, now)
		w.last = now
		return true, 0
	}
	oldest := w.times[w.next]
	if wait := oldest.Add(rateSpan).Sub(now); wait > 0 {
		return false, wait
	}
	w.times[w.next] = now
	w.next = (w.next + 1) % r.n
	w.last = now
	return true, 0
}

// sweep drops the windows of sessions idle for a whole minute (at most
// once a minute), so per-session limits do not grow without bound.
func (r *rateLimiter) sweep(now time.Time) {
	if !r.perSession || now.Sub(r.lastSweep) < rateSpan {
		return
	}
	r.lastSweep = now
	for k, w := range r.windows {
		if now.Sub(w.last) >= rateSpan {
			delete(r.windows, k)
		}
	}
}
