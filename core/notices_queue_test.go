package core

import (
	"fmt"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core/rules"
)

// The queue keeps the newest noticesKept notices, in order, and counts the
// rest as dropped, however the notices arrive.
func TestNoticeQueueKeepsTheNewest(t *testing.T) {
	for _, batch := range []int{1, 7, 999, 1000, 2500} {
		s := &session{}
		total := 2*noticesKept + 345
		for i := 0; i < total; {
			var ns []protocol.Notice
			for j := 0; j < batch && i < total; j, i = j+1, i+1 {
				ns = append(ns, protocol.Notice{Message: fmt.Sprint(i)})
			}
			s.queue(ns)
			if len(s.notices) > 2*noticesKept+batch {
				t.Fatalf("batch %d: queue holds %d notices", batch, len(s.notices))
			}
		}
		got, dropped := s.drain()
		if len(got) != noticesKept || dropped != total-noticesKept {
			t.Fatalf("batch %d: drained %d, dropped %d; want %d, %d", batch, len(got), dropped, noticesKept, total-noticesKept)
		}
		for i, n := range got {
			if want := fmt.Sprint(total - noticesKept + i); n.Message != want {
				t.Fatalf("batch %d: notice %d is %s, want %s", batch, i, n.Message, want)
			}
		}
		if got, dropped := s.drain(); len(got) != 0 || dropped != 0 {
			t.Fatalf("batch %d: second drain gave %d notices, %d dropped", batch, len(got), dropped)
		}
	}
}

// recent_tools holds the last 20 names, oldest first, however many calls.
func TestRecentToolsRing(t *testing.T) {
	for _, n := range []int{0, 1, 19, 20, 21, 45} {
		s := &session{}
		for i := 0; i < n; i++ {
			s.recordCall(fmt.Sprint("t", i), false)
		}
		got := s.historyView()["recent_tools"].([]any)
		want := []any{}
		for i := max(0, n-recentToolsKept); i < n; i++ {
			want = append(want, fmt.Sprint("t", i))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || s.historyView()["tool_count"] != float64(n) {
			t.Errorf("after %d calls: recent %v, want %v", n, got, want)
		}
	}
}

// The built-in large_result rule notices a large result through the
// pipeline (past the quick test that skips building events for small ones).
func TestLargeResultNoticeThroughThePipeline(t *testing.T) {
	e := New(Options{})
	e.Configure([]byte(`state_dir = ""`))
	small := string(e.Evaluate([]byte(`{"tool":"echo","arguments":{"s":"x"}}`)))
	if strings.Contains(small, "notices") {
		t.Fatalf("small result got notices: %s", small)
	}
	big := string(e.Evaluate([]byte(`{"tool":"echo","arguments":{"s":"` + strings.Repeat("x", 40000) + `"}}`)))
	if !strings.Contains(big, `"notices":[{"rule":"large_result","message":"Tool echo returned 40008 bytes (more than 32768); consider narrowing the request.","priority":"normal","event":"on_tool_complete"}]`) {
		t.Fatalf("no large_result notice: %.200s ... %s", big, big[len(big)-300:])
	}
}
