package session

import (
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// spreadHistory keeps the history of the default session, which every
// call without a session records into: one lock and one counter for all of
// them made threads calling at once pass that cache line back and forth
// (two threads were slower than one). So each processor records into a
// shard of its own (sync.Pool hands out a shard index per processor, as
// the audit ring does), and reading sums the counts and merges the shards'
// rings by the time of each call.
type spreadHistory struct {
	shards []historyShard
	picker sync.Pool // *int: a shard index
	next   atomic.Uint32
	// failing: some tool has a consecutive-failure count, which the next
	// success of that tool must end (see Session.RecordCall). Written only
	// when a failure starts or ends such a count.
	failing atomic.Bool
}

type historyShard struct {
	mu           sync.Mutex
	toolCount    int
	failureCount int
	recent       [RecentToolsKept]stampedTool // a ring
	next, n      int
	_            [64]byte // keep the next shard's lock off this one's last line
}

type stampedTool struct {
	at   time.Duration // since spreadEpoch, on the monotonic clock
	tool string
}

// maxHistoryShards bounds the memory of a spread history.
const maxHistoryShards = 8

var spreadEpoch = time.Now()

func newSpreadHistory() *spreadHistory {
	n := min(runtime.GOMAXPROCS(0), maxHistoryShards)
	h := &spreadHistory{shards: make([]historyShard, n)}
	h.picker.New = func() any {
		i := int(h.next.Add(1)-1) % len(h.shards)
		return &i
	}
	return h
}

// record keeps a call that ended at end, a time from the real clock (with
// its monotonic reading: no clock read here), or zero to read the clock now.
func (h *spreadHistory) record(tool string, failed bool, end time.Time) {
	var at time.Duration
	if end.IsZero() {
		at = time.Since(spreadEpoch)
	} else {
		at = end.Sub(spreadEpoch)
	}
	pick := h.picker.Get().(*int)
	sh := &h.shards[*pick]
	h.picker.Put(pick)
	sh.mu.Lock()
	sh.toolCount++
	if failed {
		sh.failureCount++
	}
	sh.recent[sh.next] = stampedTool{at: at, tool: tool}
	sh.next = (sh.next + 1) % RecentToolsKept
	if sh.n < RecentToolsKept {
		sh.n++
	}
	sh.mu.Unlock()
}

// read sums the shards' counts and returns the last RecentToolsKept tools
// of all shards, oldest first.
func (h *spreadHistory) read() (toolCount, failureCount int, recent []any) {
	var all []stampedTool
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.Lock()
		toolCount += sh.toolCount
		failureCount += sh.failureCount
		first := (sh.next - sh.n + RecentToolsKept) % RecentToolsKept
		for j := 0; j < sh.n; j++ {
			all = append(all, sh.recent[(first+j)%RecentToolsKept])
		}
		sh.mu.Unlock()
	}
	// Stable: calls of one shard stamped alike keep their order.
	sort.SliceStable(all, func(a, b int) bool { return all[a].at < all[b].at })
	all = all[max(0, len(all)-RecentToolsKept):]
	recent = make([]any, len(all))
	for i, st := range all {
		recent[i] = st.tool
	}
	return toolCount, failureCount, recent
}

func (h *spreadHistory) clear() {
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.Lock()
		sh.toolCount, sh.failureCount, sh.next, sh.n = 0, 0, 0, 0
		sh.recent = [RecentToolsKept]stampedTool{}
		sh.mu.Unlock()
	}
	h.failing.Store(false)
}
