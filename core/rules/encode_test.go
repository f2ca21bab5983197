package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/clara-lib/clara/core/jsonx"
	"github.com/clara-lib/clara/core/protocol"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The hand-written JSON of outcomes is byte for byte encoding/json's, with
// HTML escaping off as in the rest of Clara's envelopes.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	values := []any{nil, true, false, "", "a\"b\\c\n\u0000<>&é", 0.0, -0.0, 1.5, 1e20, 1e21, 123456789012.0,
		1e-6, 1e-7, -3.25e-9, 1.7976931348623157e308, 5e-324, 42, int64(-7), json.RawMessage(`{"x":[1,2]}`),
		[]string{"<b>", "&"}, map[string]int{"<": 1}, // types expr results may have
		map[string]any{"b": 1.0, "a": []any{"x", nil, map[string]any{}}, "": "empty"}, []any{},
		[]any{1.0, "two", []any{false}}}
	records := []ActionRecord{{Type: "notify_self", Message: "m", Priority: "high"}}
	for _, v := range values {
		records = append(records, ActionRecord{Type: "set_state", Key: "k", Value: v})
	}
	for _, c := range recordCases {
		records = append(records, c.rec)
	}
	out := &Outcome{
		Fired:   []Fired{{Rule: "r1", Actions: records}, {Rule: "r2", Event: "chained", Actions: []ActionRecord{}}, {Rule: "r3"}},
		Notices: []protocol.Notice{{Rule: "r1", Message: "héllo \"you\"", Priority: "high", Event: "e"}},
		Denied:  &Denial{Rule: "r9", Reason: "no <way>"},
		Trace: []TraceEntry{
			{Rule: "r1", Event: "e", Matched: true, Value: true, DurationUS: 12, Actions: records},
			{Rule: "r2", Event: "e", Value: false, Error: "condition: boom", Skipped: "x"},
			{Rule: "r3", Event: "e", Value: 2.5},
		},
	}
	// The reference: the outcome with its records as maps (recordMap), all
	// written by encoding/json (ActionRecord.MarshalJSON is appendRecord).
	type refFired struct {
		Rule    string           `json:"rule"`
		Event   string           `json:"event,omitempty"`
		Actions []map[string]any `json:"actions"`
	}
	type refEntry struct {
		Rule       string           `json:"rule"`
		Event      string           `json:"event"`
		Matched    bool             `json:"matched"`
		Value      any              `json:"value,omitempty"`
		Error      string           `json:"error,omitempty"`
		DurationUS int64            `json:"duration_us"`
		Actions    []map[string]any `json:"actions,omitempty"`
		Skipped    string           `json:"skipped,omitempty"`
	}
	maps := func(records []ActionRecord) []map[string]any {
		if records == nil {
			return nil
		}
		out := []map[string]any{}
		for i := range records {
			out = append(out, recordMap(&records[i]))
		}
		return out
	}
	for _, withTrace := range []bool{false, true} {
		body := struct {
			Fired   []refFired        `json:"fired"`
			Notices []protocol.Notice `json:"notices"`
			Denied  *Denial           `json:"denied"`
			Trace   []refEntry        `json:"trace,omitempty"`
		}{Notices: out.Notices, Denied: out.Denied}
		for _, f := range out.Fired {
			body.Fired = append(body.Fired, refFired{f.Rule, f.Event, maps(f.Actions)})
		}
		if withTrace {
			for _, e := range out.Trace {
				body.Trace = append(body.Trace, refEntry{e.Rule, e.Event, e.Matched, e.Value, e.Error, e.DurationUS, maps(e.Actions), e.Skipped})
			}
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
	if got := jsonx.AppendValue(nil, []any{math.NaN(), math.Inf(1), 1.0}); string(got) != `[null,null,1]` {
		t.Errorf("non-finite numbers: %s", got)
	}
}

// recordCases are records of every action kind, with the map each was
// before ActionRecord (what its JSON must stay).
var recordCases = []struct {
	rec ActionRecord
	was map[string]any
}{
	{ActionRecord{Type: ActNotify, Message: "hi <b>&</b> é", Priority: "high"},
		map[string]any{"type": "notify_self", "message": "hi <b>&</b> é", "priority": "high"}},
	{ActionRecord{Type: ActNotify}, map[string]any{"type": "notify_self", "message": "", "priority": ""}},
	{ActionRecord{Type: ActLog, Level: "warn", Message: "m\n\"q\""},
		map[string]any{"type": "log", "level": "warn", "message": "m\n\"q\""}},
	{ActionRecord{Type: ActSetState, Key: "k", Value: map[string]any{"z": 1.0, "a": []any{nil, "x"}}},
		map[string]any{"type": "set_state", "key": "k", "value": map[string]any{"z": 1.0, "a": []any{nil, "x"}}}},
	{ActionRecord{Type: ActSetState, Key: "k"}, map[string]any{"type": "set_state", "key": "k", "value": nil}},
	{ActionRecord{Type: ActSetState, Key: "k", Error: "json: unsupported value: NaN"},
		map[string]any{"type": "set_state", "error": "json: unsupported value: NaN"}},
	{ActionRecord{Type: ActDeny, Reason: "no <way>"}, map[string]any{"type": "deny", "reason": "no <way>"}},
	{ActionRecord{Type: ActEmit, Event: "on_child", Fired: 3},
		map[string]any{"type": "emit_event", "event": "on_child", "fired": 3}},
	{ActionRecord{Type: ActEmit, Event: "on_child"}, map[string]any{"type": "emit_event", "event": "on_child", "fired": 0}},
	{ActionRecord{Type: ActEmit, Event: "deep", Error: "emit_event: chain deeper than 8 events"},
		map[string]any{"type": "emit_event", "event": "deep", "error": "emit_event: chain deeper than 8 events"}},
	{ActionRecord{Type: ActCallTool, Tool: "search", Result: json.RawMessage(`{"hits":2}`)},
		map[string]any{"type": "call_tool", "tool": "search", "result": json.RawMessage(`{"hits":2}`)}},
	{ActionRecord{Type: ActCallTool, Tool: "search"},
		map[string]any{"type": "call_tool", "tool": "search", "result": json.RawMessage(nil)}},
	{ActionRecord{Type: ActCallTool, Tool: "nope", Error: "no such tool"},
		map[string]any{"type": "call_tool", "tool": "nope", "error": "no such tool"}},
	{ActionRecord{Type: ActSetState, Key: "k", Value: []string{"<b>", "&"}},
		map[string]any{"type": "set_state", "key": "k", "value": []string{"<b>", "&"}}},
	{ActionRecord{Type: "other"}, map[string]any{"type": "other"}},
}

// An ActionRecord is written, by hand and by encoding/json, as the map it
// replaced was.
func TestActionRecordJSONIsTheMaps(t *testing.T) {
	for _, c := range recordCases {
		if got, want := appendRecord(nil, &c.rec), jsonx.AppendValue(nil, c.was); string(got) != string(want) {
			t.Errorf("appendRecord:\n got %s\nwant %s", got, want)
		}
		got, err := json.Marshal(c.rec)
		want, err2 := json.Marshal(c.was)
		if err != nil || err2 != nil || string(got) != string(want) {
			t.Errorf("json.Marshal: got %s (%v), want %s (%v)", got, err, want, err2)
		}
		var b1, b2 bytes.Buffer
		e1, e2 := json.NewEncoder(&b1), json.NewEncoder(&b2)
		e1.SetEscapeHTML(false)
		e2.SetEscapeHTML(false)
		if e1.Encode([]ActionRecord{c.rec}) != nil || e2.Encode([]map[string]any{c.was}) != nil || b1.String() != b2.String() {
			t.Errorf("encoder without HTML escaping: got %s, want %s", b1.String(), b2.String())
		}
		if m := recordMap(&c.rec); !reflect.DeepEqual(m, c.was) {
			t.Errorf("recordMap: got %v, want %v", m, c.was)
		}
	}
	// A value encoding/json cannot write is null, as in every answer
	// (appendValue), rather than failing the record.
	if b, err := json.Marshal(ActionRecord{Type: ActSetState, Key: "k", Value: math.NaN()}); err != nil || string(b) != `{"key":"k","type":"set_state","value":null}` {
		t.Errorf("NaN value: %s, %v", b, err)
	}
}

// recordMap is the record as the object its JSON is: the keys its Type
// has (fields), with their values. The map is what records were before
// ActionRecord, and what their JSON is checked against.
func recordMap(r *ActionRecord) map[string]any {
	m := map[string]any{"type": r.Type}
	f := r.fields()
	if r.Error != "" {
		m["error"] = r.Error
	}
	for _, kv := range []struct {
		bit int
		key string
		v   any
	}{{recMessage, "message", r.Message}, {recPriority, "priority", r.Priority}, {recLevel, "level", r.Level},
		{recKey, "key", r.Key}, {recValue, "value", r.Value}, {recReason, "reason", r.Reason}, {recEvent, "event", r.Event},
		{recFired, "fired", r.Fired}, {recTool, "tool", r.Tool}, {recResult, "result", r.Result}} {
		if f&kv.bit != 0 {
			m[kv.key] = kv.v
		}
	}
	return m
}

// appendText writes numbers as text does, whole ones by a shorter path.
func TestAppendTextNumbers(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1, 7, 42.5, -3.25, 1e15, -1e15, 1e15 + 2, 1e16, 1e21, 1e-7,
		123456789, 0.1, math.MaxInt64, math.NaN(), math.Inf(1), math.Inf(-1), 4503599627370496.5, 9007199254740993} {
		if got, want := string(appendText(nil, f)), text(f); got != want {
			t.Errorf("%v: got %q, want %q", f, got, want)
		}
		if got, want := string(appendText(nil, f)), strconv.FormatFloat(f, 'f', -1, 64); got != want {
			t.Errorf("%v: got %q, want %q", f, got, want)
		}
	}
}

// upper and lower write into the buffer what strings.ToUpper and ToLower return.
func TestAppendCase(t *testing.T) {
	cases := []string{"", "sensor-12", "MiXeD 123 _-", "héllo wörld", "ǅ", "ß", "İstanbul", "\xff\xfeab",
		"abcdefghé-xyz", "ABCDEFGHIJKLMNOPqrstuvwxyz@[`{", "12345678\xff"}
	var ascii []byte // every ASCII byte at every place of an eight-byte word
	for c := 0; c < 128; c++ {
		ascii = append(ascii, byte(c))
	}
	for i := 0; i < 8; i++ {
		cases = append(cases, string(ascii[i:]))
	}
	for _, s := range cases {
		if got := string(appendCase([]byte("x"), s, true)); got != "x"+strings.ToUpper(s) {
			t.Errorf("upper %q: %q", s, got)
		}
		if got := string(appendCase([]byte("x"), s, false)); got != "x"+strings.ToLower(s) {
			t.Errorf("lower %q: %q", s, got)
		}
	}
}

// TestAppendJSON_sharedStrings: strings written again (the same string in
// a record and its notice, a priority, an event's name) are copied from
// where they were first written, byte for byte what escaping them again
// writes; so are strings of equal bytes held apart, and substrings.
func TestAppendJSON_sharedStrings(t *testing.T) {
	msg := "a \"quoted\" <message>\n\u0001é"
	long := strings.Repeat("x\"", 40)
	var fired []Fired
	var notices []protocol.Notice
	for i := 0; i < 70; i++ { // more strings than the table has room for
		id := fmt.Sprintf("r%d", i)
		m := msg
		switch i % 3 {
		case 1:
			m = string([]byte(msg)) // the same bytes elsewhere
		case 2:
			m = long[i%7 : 40+i%5] // substrings of one string
		}
		if i%10 == 0 { // substrings of one start, their lengths apart by powers of two
			m = long[:1<<(i/10)]
		}
		fired = append(fired, Fired{Rule: id, Actions: []ActionRecord{{Type: ActNotify, Message: m, Priority: "high"},
			{Type: ActLog, Level: "warn", Message: id}}})
		notices = append(notices, protocol.Notice{Rule: id, Message: m, Priority: "high", Event: "on_x"})
	}
	notices = append(notices, protocol.Notice{Callback: "cb", Message: msg, Priority: "low"})
	out := &Outcome{Fired: fired, Notices: notices}
	got := out.AppendJSON(nil, false)
	// The reference: every string escaped where it is written.
	want := []byte(`{"fired":[`)
	for i := range fired {
		if i > 0 {
			want = append(want, ',')
		}
		want = append(want, `{"rule":`...)
		want = protocol.AppendString(want, fired[i].Rule)
		want = append(want, `,"actions":`...)
		want = appendRecords(want, fired[i].Actions)
		want = append(want, '}')
	}
	want = append(want, `],"notices":`...)
	want = protocol.AppendNotices(want, notices)
	want = append(want, `,"denied":null}`...)
	if !bytes.Equal(got, want) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
