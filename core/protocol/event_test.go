package protocol_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/clara-lib/clara/core/protocol"
)

// Event payloads are decoded by gjson; what rules see must be what
// encoding/json would give, for every kind of JSON value.
func TestParseEvent_payload_decodes_as_encoding_json(t *testing.T) {
	for _, payload := range []string{
		`{}`,
		`{"a":1,"b":-2.5e-3,"c":1e400,"d":123456789012345678901234567890,"e":0}`,
		`{"s":"plain","u":"\u00e9\u4e2d\ud83d\ude00","esc":"\"\\\/\b\f\n\r\t","lone":"\ud800x","nul":"a\u0000b"}`,
		`{"t":true,"f":false,"n":null,"arr":[1,"two",[3,[4]],{"five":5}],"obj":{"x":{"y":{"z":[]}}}}`,
		`{"emoji":"😀","mixed":["é",{"k":"v"}],"empty":"","sp":" \t "}`,
	} {
		ev, perr := protocol.ParseEvent([]byte(`{"event":"x","payload":`+payload+`}`), protocol.Limits{MaxRequestBytes: 1 << 20, MaxDepth: 64})
		if perr != nil {
			t.Fatalf("%s: %v", payload, perr)
		}
		var want map[string]any
		if err := json.Unmarshal([]byte(payload), &want); err != nil {
			// 1e400 does not fit a float64: encoding/json refuses it (gjson
			// gives +Inf), so compare without it.
			want = nil
			var m map[string]json.RawMessage
			_ = json.Unmarshal([]byte(payload), &m)
			delete(m, "c")
			b, _ := json.Marshal(m)
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatalf("%s: %v", payload, err)
			}
			delete(ev.Payload, "c")
		}
		if !reflect.DeepEqual(ev.Payload, want) {
			t.Errorf("payload %s\n got %#v\nwant %#v", payload, ev.Payload, want)
		}
	}
}
