package session

import (
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// The queue keeps the newest NoticesKept notices, in order, and counts the
// rest as dropped, however the notices arrive.
func TestSession_queue_keeps_the_newest_notices(t *testing.T) {
	for _, batch := range []int{1, 7, 999, 1000, 2500} {
		s := &Session{}
		total := 2*NoticesKept + 345
		for i := 0; i < total; {
			var ns []protocol.Notice
			for j := 0; j < batch && i < total; j, i = j+1, i+1 {
				ns = append(ns, protocol.Notice{Message: fmt.Sprint(i)})
			}
			s.Queue(ns)
			if len(s.notices) > 2*NoticesKept+batch {
				t.Fatalf("batch %d: queue holds %d notices", batch, len(s.notices))
			}
		}
		got, dropped, _ := s.Drain()
		if len(got) != NoticesKept || dropped != total-NoticesKept {
			t.Fatalf("batch %d: drained %d, dropped %d; want %d, %d", batch, len(got), dropped, NoticesKept, total-NoticesKept)
		}
		for i, n := range got {
			if want := fmt.Sprint(total - NoticesKept + i); n.Message != want {
				t.Fatalf("batch %d: notice %d is %s, want %s", batch, i, n.Message, want)
			}
		}
		if got, dropped, _ := s.Drain(); len(got) != 0 || dropped != 0 {
			t.Fatalf("batch %d: second drain gave %d notices, %d dropped", batch, len(got), dropped)
		}
	}
}

// recent_tools holds the last 20 names, oldest first, however many calls.
func TestSession_recent_tools_ring(t *testing.T) {
	for _, n := range []int{0, 1, 19, 20, 21, 45} {
		s := &Session{}
		for i := 0; i < n; i++ {
			s.RecordCall(fmt.Sprint("t", i), false, time.Time{})
		}
		got := s.History()["recent_tools"].([]any)
		want := []any{}
		for i := max(0, n-RecentToolsKept); i < n; i++ {
			want = append(want, fmt.Sprint("t", i))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || s.History()["tool_count"] != float64(n) {
			t.Errorf("after %d calls: recent %v, want %v", n, got, want)
		}
	}
}

// A session's policy only narrows; the table answers without creating
// sessions, and DropPolicies and Reset forget the layers.
func TestTable_policy_narrows_and_drops(t *testing.T) {
	var tab Table
	if tab.Policy("s1") != nil {
		t.Fatal("a policy before any narrowing")
	}
	tab.NarrowPolicy("s1", toolbox.NewPolicy("", nil, []string{"a"}))
	tab.NarrowPolicy("s1", toolbox.NewPolicy("", []string{"a", "b"}, nil))
	p := tab.Policy("s1")
	if (toolbox.Scope{Session: p}).Allows("a") || !(toolbox.Scope{Session: p}).Allows("b") || (toolbox.Scope{Session: p}).Allows("c") {
		t.Fatalf("narrowed policy: %v", toolbox.Scope{Session: p})
	}
	tab.NarrowPolicy(protocol.DefaultSession, toolbox.NewPolicy("", nil, []string{"x"}))
	if tab.Policy(protocol.DefaultSession) == nil || tab.Policy("s2") != nil {
		t.Fatal("default session's policy missing, or another session got one")
	}
	tab.DropPolicies()
	if tab.Policy("s1") != nil || tab.Policy(protocol.DefaultSession) != nil {
		t.Fatal("DropPolicies kept a layer")
	}
	// End forgets the session's data, never its policy (issue 25); Reset
	// forgets both.
	tab.NarrowPolicy("s1", toolbox.NewPolicy("", nil, []string{"a"}))
	tab.NarrowPolicy(protocol.DefaultSession, toolbox.NewPolicy("", nil, []string{"x"}))
	tab.Get("s1").Queue([]protocol.Notice{{Message: "kept?"}})
	tab.End("s1")
	tab.End(protocol.DefaultSession)
	if tab.Policy("s1") == nil || tab.Policy(protocol.DefaultSession) == nil {
		t.Fatal("End dropped a session's policy")
	}
	if ns, _, _ := tab.Get("s1").Drain(); len(ns) != 0 {
		t.Fatalf("End kept the notices: %v", ns)
	}
	tab.End("s2") // a session with no policy goes altogether
	tab.Get("s2")
	tab.End("s2")
	if _, ok := tab.byName.Load("s2"); ok {
		t.Fatal("End kept a session without a policy")
	}
	tab.Reset()
	if tab.Policy("s1") != nil || tab.Policy(protocol.DefaultSession) != nil {
		t.Fatal("Reset kept a layer")
	}
}

// The default session's history is kept per processor; read back, it is
// the same history: every call counted, the last 20 tools oldest first,
// each goroutine's calls in the order it made them, and consecutive
// failures counted and ended across processors.
func TestTable_default_session_history_from_many_goroutines(t *testing.T) {
	var tab Table
	s := tab.Get(protocol.DefaultSession)
	const goroutines, calls = 4, 500
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				s.RecordCall(fmt.Sprintf("g%d_%04d", g, i), i%10 == 0, time.Time{})
			}
		}()
	}
	wg.Wait()
	h := s.History()
	if h["tool_count"] != float64(goroutines*calls) || h["failure_count"] != float64(goroutines*calls/10) {
		t.Fatalf("counts: %v %v", h["tool_count"], h["failure_count"])
	}
	recent := h["recent_tools"].([]any)
	if len(recent) != RecentToolsKept {
		t.Fatalf("recent_tools has %d names: %v", len(recent), recent)
	}
	last := map[byte]string{}
	for _, name := range recent {
		n := name.(string)
		if prev, ok := last[n[1]]; ok && prev >= n {
			t.Fatalf("recent_tools out of order for one goroutine: %v", recent)
		}
		last[n[1]] = n
	}
	// After all goroutines, the most recent names are the last of some goroutine.
	found := false
	for _, n := range last {
		if n[3:] == fmt.Sprintf("%04d", calls-1) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no goroutine's last call among recent_tools: %v", recent)
	}

	// Sequential calls keep their order exactly, whatever processor runs them.
	tab.End(protocol.DefaultSession)
	for i := 0; i < 30; i++ {
		s.RecordCall(fmt.Sprint("t", i), false, time.Time{})
		runtime.Gosched()
	}
	got := s.History()["recent_tools"].([]any)
	if fmt.Sprint(got) != fmt.Sprint([]any{"t10", "t11", "t12", "t13", "t14", "t15", "t16", "t17", "t18", "t19",
		"t20", "t21", "t22", "t23", "t24", "t25", "t26", "t27", "t28", "t29"}) {
		t.Fatalf("after End and 30 calls: %v", got)
	}

	// Two failures of x count 2; a success of x (from any goroutine) ends it.
	s.RecordCall("x", true, time.Time{})
	s.RecordCall("x", true, time.Time{})
	if c := s.History()["consecutive_failures"].(map[string]any); c["x"] != float64(2) {
		t.Fatalf("consecutive failures: %v", c)
	}
	done := make(chan struct{})
	go func() { s.RecordCall("x", false, time.Time{}); close(done) }()
	<-done
	if c := s.History()["consecutive_failures"].(map[string]any); len(c) != 0 {
		t.Fatalf("consecutive failures after a success: %v", c)
	}
}

// Identical notices within the window are one, counted (the seed's
// accumulator); a different one, or one past the window, is its own.
func TestQueue_dedupes(t *testing.T) {
	var tab Table
	tab.SetNoticeWindow(time.Minute)
	s := tab.Get("s")
	warn := protocol.Notice{Rule: "token-budget-warning", Message: "Token budget at 85%", Priority: "high", Event: "on_turn_start"}
	s.Queue([]protocol.Notice{warn, warn})
	s.Queue([]protocol.Notice{warn, {Rule: "other", Message: warn.Message, Priority: "high", Event: "on_turn_start"}})
	high := warn
	high.Priority = "critical"
	s.Queue([]protocol.Notice{high})
	got, _, _ := s.Drain()
	want := []protocol.Notice{{Rule: "token-budget-warning", Message: "Token budget at 85%", Priority: "high", Event: "on_turn_start", Count: 3},
		{Rule: "other", Message: warn.Message, Priority: "high", Event: "on_turn_start"}, high}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("drained %+v\nwant %+v", got, want)
	}
	// Drained, a notice is no longer counted into: the next one is new.
	s.Queue([]protocol.Notice{warn})
	if got, _, _ := s.Drain(); len(got) != 1 || got[0].Count != 0 {
		t.Fatalf("after a drain: %+v", got)
	}
	// Past the window, a repeat is its own notice.
	s.Queue([]protocol.Notice{warn})
	s.mu.Lock()
	s.notices[0].First = s.notices[0].First.Add(-2 * time.Minute)
	s.mu.Unlock()
	s.Queue([]protocol.Notice{warn})
	if got, _, _ := s.Drain(); len(got) != 2 {
		t.Fatalf("past the window: %+v", got)
	}
	// A window of 0 keeps every notice.
	tab.SetNoticeWindow(0)
	s.Queue([]protocol.Notice{warn, warn})
	if got, _, _ := s.Drain(); len(got) != 2 {
		t.Fatalf("no window: %+v", got)
	}
}

// A deferred notice waits: for its event (Release in its session), for its
// time; the others go by.
func TestQueue_defers(t *testing.T) {
	var tab Table
	tab.SetNoticeWindow(time.Minute)
	s := tab.Get("s")
	later := protocol.Notice{Rule: "r", Message: "at the next turn", Priority: "normal", DeliverOn: "on_turn_start"}
	soon := protocol.Notice{Rule: "r", Message: "in a while", Priority: "normal", DeliverAfterMS: 60}
	now := protocol.Notice{Rule: "r", Message: "now", Priority: "normal"}
	s.Queue([]protocol.Notice{later, soon, now, later})
	if got, _, _ := s.Drain(); len(got) != 1 || got[0].Message != "now" {
		t.Fatalf("first drain: %+v", got)
	}
	tab.Release("s", "on_turn_end")   // not its event
	tab.Release("t", "on_turn_start") // not its session
	tab.Get("t")
	tab.Release("t", "on_turn_start")
	if got, _, _ := s.Drain(); len(got) != 0 {
		t.Fatalf("released by another event or session: %+v", got)
	}
	tab.Release("s", "on_turn_start")
	// A repeat after the release is held for the next one, not merged
	// into the notice already free to go.
	s.Queue([]protocol.Notice{later})
	got, _, _ := s.Drain()
	if len(got) != 1 || got[0].Message != "at the next turn" || got[0].Count != 2 {
		t.Fatalf("after its event: %+v", got)
	}
	time.Sleep(80 * time.Millisecond)
	if got, _, _ := s.Drain(); len(got) != 1 || got[0].Message != "in a while" {
		t.Fatalf("after its time: %+v", got)
	}
	tab.Release("s", "on_turn_start")
	if got, _, _ := s.Drain(); len(got) != 1 || got[0].Message != "at the next turn" || got[0].Count != 0 {
		t.Fatalf("the one held for the next turn: %+v", got)
	}
	// Held notices dropped with a full queue are no longer counted as held.
	for i := 0; i < 2*NoticesKept; i++ {
		s.Queue([]protocol.Notice{{Message: fmt.Sprint(i), DeliverOn: "x"}})
	}
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	if held != NoticesKept {
		t.Fatalf("held %d, want %d", held, NoticesKept)
	}
	tab.Release("s", "x")
	if got, dropped, _ := s.Drain(); len(got) != NoticesKept || dropped != NoticesKept {
		t.Fatalf("drained %d, dropped %d", len(got), dropped)
	}
}
