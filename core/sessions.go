package core

import (
	"strings"
	"sync"

	"github.com/clara-lib/clara/core/rules"
)

// Limits of a session's in-memory data.
const (
	recentToolsKept = 20   // context.history.recent_tools
	noticesKept     = 1000 // notices waiting for notifications_drain
)

// session is what Clara keeps in memory per session (SPEC §5.2): the rule
// history and the notices not yet drained. Created on first use, freed by
// session_end. (Key-value data and session policy live with their tools.)
type session struct {
	mu           sync.Mutex
	toolCount    int
	failureCount int
	recent       [recentToolsKept]string // the last tool names, a ring: the oldest at recentNext once full
	recentNext   int
	recentLen    int
	consecutive  map[string]int
	notices      []rules.Notice
	dropped      int // notices dropped because the queue was full, reported by the next drain
}

// sessionFor returns the session named name, creating it.
func (e *Engine) sessionFor(name string) *session {
	if name == "default" {
		return e.defaultSession
	}
	if s, ok := e.sessions.Load(name); ok {
		return s.(*session)
	}
	s, _ := e.sessions.LoadOrStore(strings.Clone(name), &session{})
	return s.(*session)
}

// clear forgets everything the session holds.
func (s *session) clear() {
	s.mu.Lock()
	s.toolCount, s.failureCount, s.consecutive, s.notices, s.dropped = 0, 0, nil, nil, 0
	s.recent, s.recentNext, s.recentLen = [recentToolsKept]string{}, 0, 0
	s.mu.Unlock()
}

// recordCall updates the history after a tool call.
func (s *session) recordCall(tool string, failed bool) {
	s.mu.Lock()
	s.toolCount++
	// A ring, not a slice shifted on every call: this runs on every call.
	s.recent[s.recentNext] = tool
	s.recentNext = (s.recentNext + 1) % recentToolsKept
	if s.recentLen < recentToolsKept {
		s.recentLen++
	}
	if failed {
		s.failureCount++
		if s.consecutive == nil {
			s.consecutive = map[string]int{}
		}
		s.consecutive[tool]++
	} else if s.consecutive[tool] != 0 {
		delete(s.consecutive, tool)
	}
	s.mu.Unlock()
}

// historyView is context.history: {tool_count, failure_count,
// recent_tools, consecutive_failures}, a fresh copy.
func (s *session) historyView() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	recent := make([]any, s.recentLen)
	first := (s.recentNext - s.recentLen + recentToolsKept) % recentToolsKept
	for i := range recent {
		recent[i] = s.recent[(first+i)%recentToolsKept]
	}
	consecutive := make(map[string]any, len(s.consecutive))
	for t, n := range s.consecutive {
		consecutive[t] = float64(n)
	}
	return map[string]any{
		"tool_count":           float64(s.toolCount),
		"failure_count":        float64(s.failureCount),
		"recent_tools":         recent,
		"consecutive_failures": consecutive,
	}
}

// queue keeps notices for notifications_drain; when full, the oldest go
// and the next drain says how many.
func (s *session) queue(ns []rules.Notice) {
	if len(ns) == 0 {
		return
	}
	s.mu.Lock()
	s.notices = append(s.notices, ns...)
	// Only the newest noticesKept are kept. Dropping the oldest on every
	// queue would copy the whole queue each time a caller that never drains
	// gets a notice; letting it grow to twice that and cutting back in one
	// copy costs O(1) per notice. drain returns the newest noticesKept.
	if over := len(s.notices) - noticesKept; over >= noticesKept {
		s.notices = append(s.notices[:0], s.notices[over:]...)
		s.dropped += over
	}
	s.mu.Unlock()
}

// drain returns and forgets the queued notices.
func (s *session) drain() ([]rules.Notice, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns, dropped := s.notices, s.dropped
	if over := len(ns) - noticesKept; over > 0 {
		ns, dropped = ns[over:], dropped+over
	}
	s.notices, s.dropped = nil, 0
	if ns == nil {
		ns = []rules.Notice{}
	}
	return ns, dropped
}
