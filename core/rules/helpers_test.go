package rules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
)

// src makes a rule source named name from text.
func src(name, text string) Source { return Source{Name: name, Text: []byte(text)} }

// mustLoad loads TOML texts named r0.toml, r1.toml, ... and fails the test
// on any problem.
func mustLoad(t testing.TB, thresholds map[string]any, texts ...string) *Set {
	t.Helper()
	var sources []Source
	for i, text := range texts {
		sources = append(sources, src(fmt.Sprintf("r%d.toml", i), text))
	}
	set, err := Load(sources, thresholds)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return set
}

// loadProblems loads sources that must fail and returns the problems,
// checked to have a file and a line, and a message without them.
func loadProblems(t testing.TB, sources ...Source) protocol.Problems {
	t.Helper()
	set, err := Load(sources, nil)
	if err == nil {
		t.Fatalf("Load succeeded (%d rules), want an error", len(set.Rules()))
	}
	if set != nil {
		t.Errorf("Load returned a set with its error")
	}
	var ps protocol.Problems
	if !errors.As(err, &ps) || len(ps) == 0 {
		t.Fatalf("error %T %v is not protocol.Problems", err, err)
	}
	for _, p := range ps {
		if p.File == "" || p.Line <= 0 || strings.HasPrefix(p.Message, p.File) || p.Message == "" {
			t.Errorf("problem %#v: want a file, a line and a message without them", p)
		}
	}
	return ps
}

// loadErr loads sources that must fail and returns their problems as
// "file:line: message" (columns left out), joined by "; ".
func loadErr(t testing.TB, sources ...Source) string {
	t.Helper()
	var parts []string
	for _, p := range loadProblems(t, sources...) {
		parts = append(parts, fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Message))
	}
	return strings.Join(parts, "; ")
}

// rule builds a one-rule TOML file.
func rule(id, trigger, extra, condition string, actions ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[rule]\nid = %q\ntrigger = %q\n%s\n", id, trigger, extra)
	if condition != "" {
		fmt.Fprintf(&b, "[condition]\nexpression = %q\n", condition)
	}
	for _, a := range actions {
		fmt.Fprintf(&b, "[[actions]]\n%s\n", a)
	}
	return b.String()
}

// notify is a notify_self action's body.
func notify(message string) string {
	return fmt.Sprintf("type = \"notify_self\"\nmessage = %q", message)
}

// logEntry is one Host.Log call.
type logEntry struct {
	level   logging.Level
	message string
}

// recHost is a Host that records what Fire asks of it. Chain fires the
// chained event on set, as the engine does, with the payload as context,
// or refuses it with chainErr.
type recHost struct {
	t          testing.TB
	set        *Set
	stateErr   error
	stateFails func([]StateWrite) bool // nil: every ApplyState returns stateErr
	chainErr   error
	toolResult []byte
	toolErr    error
	state      map[string]any // what StateGet reads

	mu       sync.Mutex
	applied  [][]StateWrite
	sessions []string
	logs     []logEntry
	chained  []chainCall
	tools    []toolCall
}

type chainCall struct {
	session, event string
	payload        map[string]any
	depth          int
	trace          bool
}

type toolCall struct {
	session, tool string
	args          string
}

func (h *recHost) ApplyState(session string, writes []StateWrite) error {
	h.mu.Lock()
	h.applied = append(h.applied, append([]StateWrite(nil), writes...))
	h.sessions = append(h.sessions, session)
	h.mu.Unlock()
	if h.stateFails != nil && !h.stateFails(writes) {
		return nil
	}
	return h.stateErr
}

func (h *recHost) Chain(ctx context.Context, session, event string, payload map[string]any, depth int, trace bool) (*Outcome, error) {
	h.mu.Lock()
	h.chained = append(h.chained, chainCall{session, event, payload, depth, trace})
	h.mu.Unlock()
	if h.chainErr != nil {
		return nil, h.chainErr
	}
	c := map[string]any{}
	for k, v := range payload {
		c[k] = v
	}
	c["event"] = map[string]any{"name": event, "session": session, "depth": float64(depth)}
	return h.set.Fire(ctx, Event{Name: event, Session: session, Depth: depth, Trace: trace, Context: MapSource(c)}, h), nil
}

func (h *recHost) CallTool(_ context.Context, session, tool string, args []byte) ([]byte, error) {
	h.mu.Lock()
	h.tools = append(h.tools, toolCall{session, tool, string(args)})
	h.mu.Unlock()
	return h.toolResult, h.toolErr
}

func (h *recHost) StateGet(session, key string) (any, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.state[key]
	return v, ok, nil
}

func (h *recHost) Log(level logging.Level, message string) {
	h.mu.Lock()
	h.logs = append(h.logs, logEntry{level, message})
	h.mu.Unlock()
}

// logged reports whether a message containing sub was logged at level.
func (h *recHost) logged(level logging.Level, sub string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range h.logs {
		if l.level == level && strings.Contains(l.message, sub) {
			return true
		}
	}
	return false
}

// fire fires event name with context c on set through h.
func fire(set *Set, h *recHost, name string, c map[string]any, trace bool) *Outcome {
	if h.set == nil {
		h.set = set
	}
	return set.Fire(context.Background(), Event{Name: name, Session: "s1", Context: MapSource(c), Trace: trace}, h)
}

// firedIDs lists the rules of an outcome's Fired, in order.
func firedIDs(out *Outcome) []string {
	ids := []string{}
	for _, f := range out.Fired {
		ids = append(ids, f.Rule)
	}
	return ids
}

// messages lists the notices' messages, in order.
func messages(out *Outcome) []string {
	ms := []string{}
	for _, n := range out.Notices {
		ms = append(ms, n.Message)
	}
	return ms
}

// unmarshal decodes JSON text for comparisons (numbers are float64).
func unmarshal(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("bad JSON %q: %v", b, err)
	}
	return v
}

func equal(a, b []string) bool { return equalStrings(a, b) }
