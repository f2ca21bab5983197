package rules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
)

// A rule test file (TOML or JSON): events in, expected fired rules and
// actions out (SPEC §7.7).
//
//	rules = ["token_budget.toml"]   # optional: rule files, relative to the test file
//	[thresholds]                    # optional: overrides
//	token_budget = 0.8
//	[[cases]]
//	name = "warns above the budget"
//	event = "on_turn_start"
//	payload = { turn = { token_usage = 0.85 } }
//	fired = ["token_budget"]
//	notices = ["Token budget at 85%. Consider wrapping up."]
type TestFile struct {
	Name       string         `toml:"-" json:"-"`
	Rules      []string       `toml:"rules" json:"rules"`
	Thresholds map[string]any `toml:"thresholds" json:"thresholds"`
	Cases      []TestCase     `toml:"cases" json:"cases"`
}

// TestCase is one event and what it should do. Every expectation given is
// checked; those left out are not.
type TestCase struct {
	Name    string         `toml:"name" json:"name"`
	Event   string         `toml:"event" json:"event"`
	Session string         `toml:"session" json:"session"`
	Payload map[string]any `toml:"payload" json:"payload"`
	Tool    map[string]any `toml:"tool" json:"tool"`       // context.tool, for on_tool_* events
	History map[string]any `toml:"history" json:"history"` // context.history
	State   map[string]any `toml:"state" json:"state"`     // the session's state before the event

	Fired      *[]string      `toml:"fired" json:"fired"`             // exactly these rules, in order
	Notices    *[]string      `toml:"notices" json:"notices"`         // exactly these messages
	Denied     *string        `toml:"denied" json:"denied"`           // the deny reason; "" for not denied
	StateAfter map[string]any `toml:"state_after" json:"state_after"` // keys set_state wrote, with their values

	// The other decisions (decide.go).
	Asked     *string `toml:"asked" json:"asked"`         // the ask's reason; "" for not asked
	Blocked   *string `toml:"blocked" json:"blocked"`     // the block's reason; "" for not blocked
	Rewritten any     `toml:"rewritten" json:"rewritten"` // the new arguments (a table) or prompt (a string)
	// Redacted is the value after the redactions: of tool.result on
	// on_tool_complete, of payload.answer on on_answer, of payload.prompt
	// on on_chat_start.
	Redacted any `toml:"redacted" json:"redacted"`
	// Shadow: exactly these decisions of rules in shadow mode, in order
	// (a reason is compared only when given).
	Shadow *[]ShadowDecision `toml:"shadow" json:"shadow"`
}

// ParseTests reads a rule test file. Its error is a protocol.Problems,
// every problem of the file with its line.
func ParseTests(src Source) (*TestFile, error) {
	var tf TestFile
	isJSON := strings.HasSuffix(src.Name, ".json")
	if problems := decode(src.Name, src.Text, isJSON, &tf); problems != nil {
		return nil, problems
	}
	tf.Name = src.Name
	if len(tf.Cases) == 0 {
		return nil, protocol.Problems{{File: src.Name, Line: 1, Message: "no [[cases]]"}}
	}
	var problems protocol.Problems
	names := keyLines{text: src.Text, key: "name"}
	for i, c := range tf.Cases {
		at := 0
		if c.Name != "" {
			at = names.line(c.Name)
		}
		if c.Name == "" || !ValidEventName(c.Event) {
			problems = append(problems, protocol.Problem{File: src.Name, Line: at,
				Message: fmt.Sprintf("case %d: name and a valid event are required", i+1)})
			continue
		}
		if c.Fired == nil && c.Notices == nil && c.Denied == nil && c.StateAfter == nil && c.Asked == nil &&
			c.Blocked == nil && c.Rewritten == nil && c.Redacted == nil && c.Shadow == nil {
			problems = append(problems, protocol.Problem{File: src.Name, Line: at,
				Message: fmt.Sprintf("case %q expects nothing (give fired, notices, denied, asked, blocked, rewritten, redacted, shadow or state_after)", c.Name)})
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return &tf, nil
}

// CaseResult is one case's verdict; Problems says how it differed.
type CaseResult struct {
	Name     string   `json:"name"`
	Passed   bool     `json:"passed"`
	Problems []string `json:"problems,omitempty"`
}

// TestReport is a test file's verdict.
type TestReport struct {
	File   string       `json:"file"`
	Passed int          `json:"passed"`
	Failed int          `json:"failed"`
	Cases  []CaseResult `json:"cases"`
	// Coverage, when asked for (TestOptions.Coverage): what the cases
	// fired of the set.
	Coverage *Coverage `json:"coverage,omitempty"`
}

// Run fires every case against set, re-bound to thresholds (the
// configuration's) merged with the file's own. Nothing leaves the test:
// state lives in memory, and call_tool is recorded but not run.
func (tf *TestFile) Run(set *Set, thresholds map[string]any) TestReport {
	return tf.RunWith(set, thresholds, TestOptions{})
}

// RunWith is Run with options: only the cases opts.Run selects, and the
// coverage of set when opts.Coverage.
func (tf *TestFile) RunWith(set *Set, thresholds map[string]any, opts TestOptions) TestReport {
	th := map[string]any{}
	for k, v := range thresholds {
		th[k] = v
	}
	for k, v := range tf.Thresholds {
		th[k] = normalise(v)
	}
	set = set.withThresholds(th)
	rep := TestReport{File: tf.Name, Cases: []CaseResult{}}
	var cov *coverageCounter
	if opts.Coverage {
		cov = newCoverageCounter(set)
	}
	for _, c := range tf.Cases {
		if opts.Run != nil && !opts.Run.MatchString(c.Name) {
			continue
		}
		res, out := tf.runCase(set, c, cov != nil)
		cov.count(out)
		if res.Passed {
			rep.Passed++
		} else {
			rep.Failed++
		}
		rep.Cases = append(rep.Cases, res)
	}
	if cov != nil {
		rep.Coverage = cov.coverage()
	}
	return rep
}

// testHost is a rule test's host: state in memory, chained events fired on
// the test's set.
type testHost struct {
	set     *Set
	state   map[string]any
	history map[string]any
	written map[string]any
}

func (h *testHost) ApplyState(_ string, writes []StateWrite) error {
	for _, w := range writes {
		var v any
		if err := json.Unmarshal(w.Value, &v); err != nil {
			return err
		}
		h.written[w.Key] = v
		h.state[w.Key] = v
	}
	return nil
}

func (h *testHost) Chain(ctx context.Context, session, event string, payload map[string]any, depth int, trace bool) (*Outcome, error) {
	return h.set.Fire(ctx, Event{Name: event, Session: session, Depth: depth, Trace: trace,
		Context: MapSource(h.context(event, session, payload, nil))}, h), nil
}

func (h *testHost) CallTool(context.Context, string, string, []byte) ([]byte, error) {
	return nil, errors.New("call_tool is not run in rule tests")
}

func (h *testHost) Log(logging.Level, string) {}

func (h *testHost) StateGet(_, key string) (any, bool, error) {
	v, ok := h.state[key]
	return v, ok, nil
}

func (h *testHost) context(event, session string, payload, tool map[string]any) map[string]any {
	ctx := map[string]any{}
	for k, v := range payload {
		ctx[k] = v
	}
	ctx["event"] = map[string]any{"name": event, "session": session}
	ctx["history"] = h.history
	ctx["state"] = h.state
	if tool != nil {
		ctx["tool"] = tool
	}
	return ctx
}

// jsonish turns TOML values into what JSON decoding gives (float64
// numbers, []any, map[string]any), so that test data compares as events do.
func jsonish(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

func asMap(v any) map[string]any {
	m, _ := jsonish(v).(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

// runCase fires one case and judges its outcome; with trace, the outcome
// lists every rule tried (for coverage).
func (tf *TestFile) runCase(set *Set, c TestCase, trace bool) (CaseResult, *Outcome) {
	session := c.Session
	if session == "" {
		session = "test"
	}
	h := &testHost{set: set, state: asMap(c.State), history: asMap(c.History), written: map[string]any{}}
	var tool map[string]any
	if c.Tool != nil {
		tool = asMap(c.Tool)
	}
	out := set.Fire(context.Background(), Event{Name: c.Event, Session: session, Trace: trace,
		Context: MapSource(h.context(c.Event, session, asMap(c.Payload), tool))}, h)
	res := CaseResult{Name: c.Name}
	if c.Fired != nil {
		got := []string{}
		for _, f := range out.Fired {
			got = append(got, f.Rule)
		}
		if !equalStrings(got, *c.Fired) {
			res.Problems = append(res.Problems, fmt.Sprintf("fired: got %q, want %q", got, *c.Fired))
		}
	}
	if c.Notices != nil {
		got := []string{}
		for _, n := range out.Notices {
			got = append(got, n.Message)
		}
		if !equalStrings(got, *c.Notices) {
			res.Problems = append(res.Problems, fmt.Sprintf("notices: got %q, want %q", got, *c.Notices))
		}
	}
	if c.Denied != nil {
		got := ""
		if out.Denied != nil {
			got = out.Denied.Reason
		}
		if got != *c.Denied {
			res.Problems = append(res.Problems, fmt.Sprintf("denied: got %q, want %q", got, *c.Denied))
		}
	}
	res.Problems = append(res.Problems, checkDecisions(c, out)...)
	if c.StateAfter != nil {
		want := asMap(c.StateAfter)
		for _, k := range sortedKeys(want) {
			if got, ok := h.written[k]; !ok || !reflect.DeepEqual(got, want[k]) {
				res.Problems = append(res.Problems, fmt.Sprintf("state %q: got %s, want %s", k, text(h.written[k]), text(want[k])))
			}
		}
	}
	res.Passed = len(res.Problems) == 0
	return res, out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// reasonOf is a decision's reason, "" when there is none.
func reasonOf(d *Denial) string {
	if d == nil {
		return ""
	}
	return d.Reason
}

// checkDecisions compares what a case expects of the decisions beyond
// deny with the outcome.
func checkDecisions(c TestCase, out *Outcome) []string {
	var problems []string
	for _, d := range []struct {
		name string
		want *string
		got  *Denial
	}{{"asked", c.Asked, out.Asked}, {"blocked", c.Blocked, out.Blocked}} {
		if d.want != nil && reasonOf(d.got) != *d.want {
			problems = append(problems, fmt.Sprintf("%s: got %q, want %q", d.name, reasonOf(d.got), *d.want))
		}
	}
	if c.Rewritten != nil {
		want := jsonish(c.Rewritten)
		var got any
		switch rw := out.Rewrite; {
		case rw == nil:
		case rw.Arguments != nil:
			got = jsonish(rw.Arguments)
		default:
			got = rw.Prompt
		}
		if !reflect.DeepEqual(got, want) {
			problems = append(problems, fmt.Sprintf("rewritten: got %s, want %s", text(got), text(want)))
		}
	}
	if c.Redacted != nil {
		problems = append(problems, checkRedacted(c, out)...)
	}
	if c.Shadow != nil {
		// A would_redact counts when it would have changed the value, as
		// the engine counts it.
		var got []ShadowDecision
		value, _ := json.Marshal(guardedValue(c))
		for _, sh := range out.Shadow {
			if sh.WouldChange(value) {
				got = append(got, sh)
			}
		}
		want := *c.Shadow
		same := len(got) == len(want)
		for i := 0; same && i < len(got); i++ {
			same = got[i].Decision == want[i].Decision && got[i].Rule == want[i].Rule &&
				(want[i].Reason == "" || got[i].Reason == want[i].Reason)
		}
		if !same {
			problems = append(problems, fmt.Sprintf("shadow: got %s, want %s", shadowText(got), shadowText(want)))
		}
	}
	return problems
}

// checkRedacted applies the outcome's redactions to the value the case's
// event carries and compares the result.
func checkRedacted(c TestCase, out *Outcome) []string {
	before := guardedValue(c)
	if before == nil {
		return []string{fmt.Sprintf("redacted: nothing to redact on %s (tool.result, payload.answer or payload.prompt)", c.Event)}
	}
	raw, err := json.Marshal(before)
	if err != nil {
		return []string{"redacted: " + err.Error()}
	}
	after, _, err := Redact(raw, out.Redactions)
	if err != nil {
		return []string{err.Error()}
	}
	var got any
	if err := json.Unmarshal(after, &got); err != nil {
		return []string{"redacted: " + err.Error()}
	}
	if want := jsonish(c.Redacted); !reflect.DeepEqual(got, want) {
		return []string{fmt.Sprintf("redacted: got %s, want %s", text(got), text(want))}
	}
	return nil
}

func shadowText(ds []ShadowDecision) string {
	parts := make([]string, 0, len(ds))
	for _, d := range ds {
		p := d.Decision + " by " + d.Rule
		if d.Reason != "" {
			p += fmt.Sprintf(" (%q)", d.Reason)
		}
		parts = append(parts, p)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// guardedValue is what a case's event carries for guards to redact:
// tool.result on on_tool_complete, payload.answer on on_answer,
// payload.prompt on on_chat_start; nil otherwise.
func guardedValue(c TestCase) any {
	switch c.Event {
	case OnToolComplete:
		return asMap(c.Tool)["result"]
	case OnAnswer:
		return asMap(c.Payload)["answer"]
	case OnChatStart:
		return asMap(c.Payload)["prompt"]
	}
	return nil
}
