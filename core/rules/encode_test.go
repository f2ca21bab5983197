package rules

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// The hand-written JSON of outcomes is byte for byte encoding/json's, with
// HTML escaping off as in the rest of Clara's envelopes.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	values := []any{nil, true, false, "", "a\"b\\c\n\u0000<>&é", 0.0, -0.0, 1.5, 1e20, 1e21, 123456789012.0,
		1e-6, 1e-7, -3.25e-9, 1.7976931348623157e308, 5e-324, 42, int64(-7), json.RawMessage(`{"x":[1,2]}`),
		map[string]any{"b": 1.0, "a": []any{"x", nil, map[string]any{}}, "": "empty"}, []any{},
		[]any{1.0, "two", []any{false}}}
	records := []map[string]any{{"type": "notify_self", "message": "m", "priority": "high"}}
	for _, v := range values {
		records = append(records, map[string]any{"type": "set_state", "key": "k", "value": v})
	}
	out := &Outcome{
		Fired:   []Fired{{Rule: "r1", Actions: records}, {Rule: "r2", Event: "chained", Actions: []map[string]any{}}, {Rule: "r3"}},
		Notices: []Notice{{Rule: "r1", Message: "héllo \"you\"", Priority: "high", Event: "e"}},
		Denied:  &Denial{Rule: "r9", Reason: "no <way>"},
		Trace: []TraceEntry{
			{Rule: "r1", Event: "e", Matched: true, Value: true, DurationUS: 12, Actions: records},
			{Rule: "r2", Event: "e", Value: false, Error: "condition: boom", Skipped: "x"},
			{Rule: "r3", Event: "e", Value: 2.5},
		},
	}
	for _, withTrace := range []bool{false, true} {
		body := struct {
			Fired   []Fired      `json:"fired"`
			Notices []Notice     `json:"notices"`
			Denied  *Denial      `json:"denied"`
			Trace   []TraceEntry `json:"trace,omitempty"`
		}{out.Fired, out.Notices, out.Denied, nil}
		if withTrace {
			body.Trace = out.Trace
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(body); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if got := out.AppendJSON(nil, withTrace); string(got) != string(want) {
			t.Errorf("trace %v:\n got %s\nwant %s", withTrace, got, want)
		}
	}
	empty := noOutcome.AppendJSON(nil, true)
	if string(empty) != `{"fired":[],"notices":[],"denied":null,"trace":[]}` {
		t.Errorf("empty outcome: %s", empty)
	}
	// What encoding/json cannot write becomes null, not a failed answer.
	if got := appendValue(nil, []any{math.NaN(), math.Inf(1), 1.0}); string(got) != `[null,null,1]` {
		t.Errorf("non-finite numbers: %s", got)
	}
}
