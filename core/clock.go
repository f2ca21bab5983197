package core

import (
	"sync/atomic"
	"time"
)

// clock is the time of calls, the audit and get_time.
type clock struct {
	now  func() time.Time
	real bool // now is the real clock (fastNow)
	base atomic.Pointer[time.Time]
}

// setup makes the clock now, or the real clock when now is nil.
func (c *clock) setup(now func() time.Time) {
	if now != nil {
		c.now = now
		return
	}
	c.real = true
	t := time.Now()
	c.base.Store(&t)
	c.now = c.fastNow
}

// fastNow is the time of day for the call path: a base wall-clock reading
// advanced by the monotonic clock, which costs one clock read instead of
// time.Now's two. The base is renewed every second, so adjustments of the
// wall clock show within a second.
func (c *clock) fastNow() time.Time {
	base := c.base.Load()
	d := time.Since(*base)
	if d < 0 || d > time.Second {
		now := time.Now()
		c.base.Store(&now)
		return now
	}
	return base.Add(d)
}

// since is the time elapsed from start. With the real clock it reads only
// the monotonic clock (time.Now reads two clocks: this is on every call).
func (c *clock) since(start time.Time) time.Duration {
	if c.real {
		return time.Since(start)
	}
	return c.now().Sub(start)
}
