package session

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// Limits of a session's in-memory data.
const (
	RecentToolsKept = 20   // context.history.recent_tools
	NoticesKept     = 1000 // notices waiting for notifications_drain
)

// Table holds the sessions of one engine.
type Table struct {
	byName       sync.Map // name -> *Session; the default session is not in it
	fallback     Session  // the default session
	fallbackOnce sync.Once
	anyPolicy    atomic.Bool
	// dedupe is notices.dedupe_window_ms, as a duration (SetNoticeWindow).
	dedupe atomic.Int64
	// mayHold: a deferred notice was queued since the last Reset, so
	// Release looks for sessions holding some.
	mayHold atomic.Bool
	// notices, when set, keeps the sessions' notices outside the process
	// (the shared store, issue 31) instead of in their queues.
	notices atomic.Pointer[noticeBacking]
}

// NoticeStore keeps queued notices outside the process, where every
// process that shares it drains them (each notice once).
type NoticeStore interface {
	// QueueNotices keeps ns; a notice identical to one the store holds
	// for the session, queued less than window before and not delivered
	// yet, is counted in it instead (see Session.Queue); a deferred one
	// is held as Session.Queue holds it.
	QueueNotices(session string, ns []protocol.Notice, window time.Duration) error
	// ReleaseNotices lets the next drain take the session's notices held
	// until event (deliver_on).
	ReleaseNotices(session, event string) error
	// DrainNotices takes the notices that may be delivered now, at most
	// keep (the newest), and says how many older ones it dropped.
	DrainNotices(session string, keep int) ([]protocol.Notice, int, error)
}

type noticeBacking struct {
	store NoticeStore
	local bool // on a failure, keep the notices in the process (else drop them, and a drain fails)
	log   func(error)
}

// SetNoticeStore keeps the notices of every session in store from now on
// (nil: in the process again). When store fails, local keeps notices in
// the session's own queue (a drain takes those too); otherwise they are
// dropped, reported to log, and a drain fails.
func (t *Table) SetNoticeStore(store NoticeStore, local bool, log func(error)) {
	if store == nil {
		t.notices.Store(nil)
		return
	}
	t.notices.Store(&noticeBacking{store: store, local: local, log: log})
}

// defaultSession returns the default session, its history spread over
// processors (see spreadHistory) from the first use on.
func (t *Table) defaultSession() *Session {
	t.fallbackOnce.Do(func() {
		t.fallback.table = t
		t.fallback.spread.Store(newSpreadHistory())
	})
	return &t.fallback
}

// SetNoticeWindow sets how long after a notice identical ones queued in
// its session are merged into it (notices.dedupe_window_ms); 0 merges
// none.
func (t *Table) SetNoticeWindow(d time.Duration) { t.dedupe.Store(int64(d)) }

// Release delivers the notices the session holds until event fires
// (deliver_on): the next Drain returns them. Without a notice store it
// costs one atomic load while no deferred notice was ever queued; with
// one, it asks the store (which another process may have queued held
// notices in), and a failure is logged: the notices stay held.
func (t *Table) Release(name, event string) {
	if nb := t.notices.Load(); nb != nil {
		stored := name
		if name == protocol.DefaultSession {
			stored = "" // the default session's name in the store, as Queue writes it
		}
		if err := nb.store.ReleaseNotices(stored, event); err != nil {
			nb.log(err)
		}
	}
	if !t.mayHold.Load() {
		return
	}
	var s *Session
	if name == protocol.DefaultSession {
		s = t.defaultSession()
	} else if v, ok := t.byName.Load(name); ok {
		s = v.(*Session)
	} else {
		return
	}
	s.release(event)
}

// Get returns the session named name, creating it. name must be Clara's
// own string (protocol.SessionName), as the table keeps it.
func (t *Table) Get(name string) *Session {
	if name == protocol.DefaultSession {
		return t.defaultSession()
	}
	if s, ok := t.byName.Load(name); ok {
		return s.(*Session)
	}
	s, _ := t.byName.LoadOrStore(name, &Session{name: name, table: t})
	return s.(*Session)
}

// Own returns Clara's own copy of a session name the caller lent (it may
// point into a request's bytes): the name the table already keeps when
// the session exists, so that calls naming a live session allocate
// nothing; a fresh copy otherwise.
func (t *Table) Own(borrowed string) string {
	if borrowed == protocol.DefaultSession {
		return protocol.DefaultSession
	}
	if s, ok := t.byName.Load(borrowed); ok {
		return s.(*Session).name
	}
	return strings.Clone(borrowed)
}

// Policy is the session's layer of policy, nil when it has none, without
// creating the session: the common case (no session was ever narrowed)
// costs one atomic load.
func (t *Table) Policy(name string) *toolbox.Policy {
	if !t.anyPolicy.Load() {
		return nil
	}
	if name == protocol.DefaultSession {
		return t.fallback.policy.Load()
	}
	if s, ok := t.byName.Load(name); ok {
		return s.(*Session).policy.Load()
	}
	return nil
}

// End forgets what the session holds in memory: history and notices. Its
// policy stays: a session narrowed by the host is never widened by ending
// it (a model or a client could end it and start afresh under the same
// name). Reset and DropPolicies are what remove a policy.
func (t *Table) End(name string) {
	if name == protocol.DefaultSession {
		t.defaultSession().clear()
		return
	}
	v, ok := t.byName.Load(name)
	if !ok {
		return
	}
	s := v.(*Session)
	s.mu.Lock()
	if s.policy.Load() == nil {
		// Under s.mu: a NarrowPolicy that took s meanwhile finds it gone
		// and narrows the table's session instead.
		t.byName.CompareAndDelete(name, s)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.clear()
}

// Reset forgets every session, their policies included.
func (t *Table) Reset() {
	t.byName.Range(func(k, _ any) bool { t.byName.Delete(k); return true })
	t.defaultSession().clear()
	t.fallback.policy.Store(nil)
	t.anyPolicy.Store(false)
	t.mayHold.Store(false)
}

// DropPolicies forgets every session's policy layer: the host's way back in
// when a session policy locked it out (clear = ["session_policies"] in a
// clara_configure).
func (t *Table) DropPolicies() {
	t.byName.Range(func(_, v any) bool { v.(*Session).policy.Store(nil); return true })
	t.fallback.policy.Store(nil)
}

// Session is what Clara keeps in memory for one session.
type Session struct {
	name  string // as the table keeps it ("" for the default session)
	table *Table
	mu    sync.Mutex
	// history
	toolCount    int
	failureCount int
	recent       [RecentToolsKept]string // the last tool names, a ring: the oldest at recentNext once full
	recentNext   int
	recentLen    int
	consecutive  map[string]int
	// spread, when set, keeps toolCount, failureCount and recent instead
	// of the fields above (the default session: see spreadHistory);
	// consecutive stays here, under mu.
	spread atomic.Pointer[spreadHistory]
	// notices not yet drained, oldest first
	notices []Queued
	dropped int // notices dropped because the queue was full, reported by the next drain
	held    int // how many of notices are Held
	// policy is narrowed under mu and read without it.
	policy atomic.Pointer[toolbox.Policy]
	// budget counts the calls of each tool that has a budget of calls per
	// session (max_calls_per_session), under mu.
	budget map[string]int
}

// clear forgets the session's history and notices (not its policy).
func (s *Session) clear() {
	s.mu.Lock()
	s.toolCount, s.failureCount, s.consecutive, s.notices, s.dropped, s.held = 0, 0, nil, nil, 0, 0
	s.budget = nil
	s.recent, s.recentNext, s.recentLen = [RecentToolsKept]string{}, 0, 0
	if sp := s.spread.Load(); sp != nil {
		sp.clear()
	}
	s.mu.Unlock()
}

// RecordCall updates the history after a tool call that ended at end (a
// time of the real clock; zero: now). tool must be a string Clara owns (a
// registered tool's name).
func (s *Session) RecordCall(tool string, failed bool, end time.Time) {
	if sp := s.spread.Load(); sp != nil {
		sp.record(tool, failed, end)
		// Consecutive failures need the session's lock only when there is
		// a failure to count or a count to end.
		if failed || sp.failing.Load() {
			s.mu.Lock()
			s.countConsecutive(tool, failed)
			sp.failing.Store(len(s.consecutive) > 0)
			s.mu.Unlock()
		}
		return
	}
	s.mu.Lock()
	s.toolCount++
	// A ring, not a slice shifted on every call: this runs on every call.
	s.recent[s.recentNext] = tool
	s.recentNext = (s.recentNext + 1) % RecentToolsKept
	if s.recentLen < RecentToolsKept {
		s.recentLen++
	}
	if failed {
		s.failureCount++
	}
	s.countConsecutive(tool, failed)
	s.mu.Unlock()
}

// TakeBudget counts a call of tool against its budget of max calls in
// the session; false, counting nothing, when the budget is spent. tool
// must be a string Clara owns.
func (s *Session) TakeBudget(tool string, max int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.budget[tool] >= max {
		return false
	}
	if s.budget == nil {
		s.budget = map[string]int{}
	}
	s.budget[tool]++
	return true
}

// GiveBackBudget returns a call TakeBudget counted, for a call that did
// not run after all (its approval was rejected).
func (s *Session) GiveBackBudget(tool string) {
	s.mu.Lock()
	if s.budget[tool] > 0 {
		s.budget[tool]--
	}
	s.mu.Unlock()
}

// countConsecutive keeps consecutive_failures; under s.mu.
func (s *Session) countConsecutive(tool string, failed bool) {
	if failed {
		if s.consecutive == nil {
			s.consecutive = map[string]int{}
		}
		s.consecutive[tool]++
	} else if s.consecutive[tool] != 0 {
		delete(s.consecutive, tool)
	}
}

// History is context.history: {tool_count, failure_count, recent_tools,
// consecutive_failures}, a fresh copy.
func (s *Session) History() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	toolCount, failureCount := s.toolCount, s.failureCount
	var recent []any
	if sp := s.spread.Load(); sp != nil {
		toolCount, failureCount, recent = sp.read()
	} else {
		recent = make([]any, s.recentLen)
		first := (s.recentNext - s.recentLen + RecentToolsKept) % RecentToolsKept
		for i := range recent {
			recent[i] = s.recent[(first+i)%RecentToolsKept]
		}
	}
	consecutive := make(map[string]any, len(s.consecutive))
	for t, n := range s.consecutive {
		consecutive[t] = float64(n)
	}
	return map[string]any{
		"tool_count":           float64(toolCount),
		"failure_count":        float64(failureCount),
		"recent_tools":         recent,
		"consecutive_failures": consecutive,
	}
}

// Queued is a notice in a session's queue, with what the queue knows of
// it: a store that keeps the queue outside the process keeps these.
type Queued struct {
	protocol.Notice // Count: the identical notices merged into it (0 or 1: none)
	// First is when it was queued: identical notices queued within
	// notices.dedupe_window_ms of it are merged into it.
	First time.Time
	// Held: it waits for its DeliverOn event (Release); NotBefore: it is
	// not delivered before then (zero: no wait).
	Held      bool
	NotBefore time.Time
}

// deliverable reports whether Drain hands q out at now.
func (q *Queued) deliverable(now time.Time) bool {
	return !q.Held && (q.NotBefore.IsZero() || !now.Before(q.NotBefore))
}

// sameAs reports whether n is a repeat of q's notice: the same source,
// message, priority, event and delivery.
func (q *Queued) sameAs(n *protocol.Notice) bool {
	return q.Message == n.Message && q.Rule == n.Rule && q.Callback == n.Callback && q.Priority == n.Priority &&
		q.Event == n.Event && q.DeliverOn == n.DeliverOn && q.DeliverAfterMS == n.DeliverAfterMS
}

// Queue keeps notices for Drain; when full, the oldest go and the next
// drain says how many. A notice identical to one queued within the
// table's window (SetNoticeWindow) and not delivered yet is not added: the
// queued one counts it. A deferred notice (DeliverOn, DeliverAfterMS) is
// held until it may be delivered.
func (s *Session) Queue(ns []protocol.Notice) {
	if len(ns) == 0 {
		return
	}
	if nb := s.backing(); nb != nil {
		err := nb.store.QueueNotices(s.name, ns, s.table.window())
		if err == nil {
			return
		}
		nb.log(err)
		if !nb.local {
			return
		}
	}
	s.queueHere(ns)
}

// window is notices.dedupe_window_ms (SetNoticeWindow); 0 without a table.
func (t *Table) window() time.Duration {
	if t == nil {
		return 0
	}
	return time.Duration(t.dedupe.Load())
}

// queueHere keeps notices in the session's own queue, merging repeats
// and holding deferred ones.
func (s *Session) queueHere(ns []protocol.Notice) {
	window := s.table.window()
	var now time.Time
	s.mu.Lock()
	for i := range ns {
		n := &ns[i]
		if window > 0 || n.Deferred() {
			if now.IsZero() {
				now = time.Now()
			}
			if window > 0 && s.merge(n, now, window) {
				continue
			}
		}
		q := Queued{Notice: *n, First: now}
		if n.DeliverOn != "" {
			q.Held = true
			s.held++
			s.table.holding()
		}
		if n.DeliverAfterMS > 0 {
			q.NotBefore = now.Add(time.Duration(n.DeliverAfterMS) * time.Millisecond)
		}
		s.notices = append(s.notices, q)
	}
	// Only the newest NoticesKept are kept. Dropping the oldest on every
	// queue would copy the whole queue each time a caller that never drains
	// gets a notice; letting it grow to twice that and cutting back in one
	// copy costs O(1) per notice. Drain returns the newest NoticesKept.
	if over := len(s.notices) - NoticesKept; over >= NoticesKept {
		s.cut(over)
	}
	s.mu.Unlock()
}

// holding notes that a session of t holds a deferred notice.
func (t *Table) holding() {
	if t != nil && !t.mayHold.Load() {
		t.mayHold.Store(true)
	}
}

// merge counts n in the newest queued notice it repeats, queued within
// window of now and still waiting in the same way; under s.mu. The scan
// runs from the newest and stops at the first notice older than the
// window (the queue is in the order notices came).
func (s *Session) merge(n *protocol.Notice, now time.Time, window time.Duration) bool {
	for i := len(s.notices) - 1; i >= 0; i-- {
		q := &s.notices[i]
		if now.Sub(q.First) > window {
			return false
		}
		if q.sameAs(n) && q.Held == (n.DeliverOn != "") {
			q.Count = max(q.Count, 1) + max(n.Count, 1)
			return true
		}
	}
	return false
}

// cut drops the n oldest notices; under s.mu.
func (s *Session) cut(n int) {
	for i := range s.notices[:n] {
		if s.notices[i].Held {
			s.held--
		}
	}
	s.notices = append(s.notices[:0], s.notices[n:]...)
	s.dropped += n
}

// release delivers the notices held until event; see Table.Release.
func (s *Session) release(event string) {
	s.mu.Lock()
	if s.held > 0 {
		for i := range s.notices {
			if q := &s.notices[i]; q.Held && q.DeliverOn == event {
				q.Held = false
				s.held--
			}
		}
	}
	s.mu.Unlock()
}

// backing is the table's notice store, nil when notices stay here.
func (s *Session) backing() *noticeBacking {
	if s.table == nil {
		return nil
	}
	return s.table.notices.Load()
}

// Drain returns and forgets the notices that may be delivered (those held
// or not due yet stay queued), and how many were dropped since the last
// drain because the queue was full. With a notice store,
// it takes the store's (those this process kept while the store failed
// first); it fails only when the store does and on_unavailable says fail.
func (s *Session) Drain() ([]protocol.Notice, int, error) {
	ns, dropped := s.drainHere()
	nb := s.backing()
	if nb == nil {
		return ns, dropped, nil
	}
	shared, more, err := nb.store.DrainNotices(s.name, NoticesKept)
	if err != nil {
		nb.log(err)
		if !nb.local {
			for i := range ns { // what was kept here is not lost to a failed drain: due already
				ns[i].DeliverOn, ns[i].DeliverAfterMS = "", 0
			}
			s.queueHere(ns)
			return nil, 0, err
		}
		return ns, dropped, nil
	}
	if len(ns) == 0 {
		return shared, more, nil
	}
	all := append(ns, shared...)
	if over := len(all) - NoticesKept; over > 0 {
		all, more = all[over:], more+over
	}
	return all, dropped + more, nil
}

// drainHere takes the deliverable notices queued in the process.
func (s *Session) drainHere() ([]protocol.Notice, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if over := len(s.notices) - NoticesKept; over > 0 {
		s.cut(over)
	}
	dropped := s.dropped
	s.dropped = 0
	if len(s.notices) == 0 {
		return []protocol.Notice{}, dropped
	}
	out := make([]protocol.Notice, 0, len(s.notices))
	var now time.Time
	kept := s.notices[:0]
	for i := range s.notices {
		q := &s.notices[i]
		if !q.NotBefore.IsZero() && now.IsZero() {
			now = time.Now()
		}
		if q.deliverable(now) {
			out = append(out, q.Notice)
		} else {
			kept = append(kept, *q)
		}
	}
	clear(s.notices[len(kept):])
	s.notices = kept
	if len(kept) == 0 {
		s.notices = nil
	}
	return out, dropped
}

// Policy is the session's layer of policy, nil when it has none.
func (s *Session) Policy() *toolbox.Policy { return s.policy.Load() }

// NarrowPolicy narrows the session's policy by p (it can only shrink) and
// returns the new layer, which denials name as `session "NAME"`.
func (t *Table) NarrowPolicy(name string, p *toolbox.Policy) *toolbox.Policy {
	s := t.Get(name)
	s.mu.Lock()
	for name != protocol.DefaultSession && !t.holds(name, s) { // ended meanwhile (End)
		s.mu.Unlock()
		s = t.Get(name)
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	next := s.policy.Load().Narrow(p, "session \""+name+"\"")
	if next == nil {
		return nil
	}
	s.policy.Store(next)
	t.anyPolicy.Store(true)
	return next
}

// holds reports whether s is the table's session of that name.
func (t *Table) holds(name string, s *Session) bool {
	v, ok := t.byName.Load(name)
	return ok && v.(*Session) == s
}
