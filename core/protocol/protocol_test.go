package protocol_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/clara-lib/clara/core/jsonx"
	"github.com/clara-lib/clara/core/protocol"
)

var lim = protocol.Limits{MaxRequestBytes: 1 << 20, MaxDepth: 512}

func TestParse_errors(t *testing.T) {
	cases := []struct {
		in   string
		code protocol.Code
		msg  string
	}{
		{"", protocol.InvalidJSON, "Invalid JSON: empty input"},
		{"   ", protocol.InvalidJSON, "Invalid JSON: no value at byte 3"},
		{"{", protocol.InvalidJSON, "Invalid JSON: unexpected end of input at byte 1"},
		{"{\"a\":1,}", protocol.InvalidJSON, "Invalid JSON: expected a string key, got character '}' at byte 7"},
		{"{\"a\" 1}", protocol.InvalidJSON, "Invalid JSON: expected ':' after an object key at byte 5"},
		{"{\"a\":tru}", protocol.InvalidJSON, "Invalid JSON: unexpected character 't' at byte 5"},
		{"{\"a\":01}", protocol.InvalidJSON, "Invalid JSON: unexpected character '1' at byte 6"},
		{"{\"a\":\"\x01\"}", protocol.InvalidJSON, "Invalid JSON: control character in string at byte 6"},
		{"{\"a\":\"\xff\"}", protocol.InvalidJSON, "Invalid JSON: invalid UTF-8 at byte 6"},
		{"{\"a\":\"\xed\xa0\x80\"}", protocol.InvalidJSON, "Invalid JSON: invalid UTF-8 at byte 6"},
		{"{\"a\":\"\\x\"}", protocol.InvalidJSON, "Invalid JSON: invalid escape at byte 7"},
		{"{\"a\":\"\\u12g4\"}", protocol.InvalidJSON, "Invalid JSON: invalid \\u escape at byte 7"},
		{"{\"a\":\"abc", protocol.InvalidJSON, "Invalid JSON: unterminated string at byte 9"},
		{"{} {}", protocol.InvalidJSON, "Invalid JSON: unexpected data after the value at byte 3"},
		{"[1,2]", protocol.InvalidJSON, "Invalid JSON: the request must be an object, got an array"},
		{"\"hi\"", protocol.InvalidJSON, "Invalid JSON: the request must be an object, got a string"},
		{"42", protocol.InvalidJSON, "Invalid JSON: the request must be an object, got a number"},
		{"null", protocol.InvalidJSON, "Invalid JSON: the request must be an object, got null"},
		{"\x00", protocol.InvalidJSON, "Invalid JSON: unexpected byte 0x00 at byte 0"},
		{`{"tool":1}`, protocol.InvalidRequest, `"tool" must be a non-empty string, got a number`},
		{`{"tool":""}`, protocol.InvalidRequest, `"tool" must be a non-empty string, got an empty string`},
		{`{"tool":"echo","arguments":[1]}`, protocol.InvalidRequest, `"arguments" must be an object, got an array`},
		{`{"tool":"echo","arguments":"x"}`, protocol.InvalidRequest, `"arguments" must be an object, got a string`},
		{`{"tool":"echo","session":5}`, protocol.InvalidRequest, `"session" must be a non-empty string, got a number`},
		{`{"tool":"echo","id":null}`, protocol.InvalidRequest, `"id" must be a string or a number, got null`},
		{`{"tool":"echo","id":{}}`, protocol.InvalidRequest, `"id" must be a string or a number, got an object`},
		{`{"tool":"echo","policy":true}`, protocol.InvalidRequest, `"policy" must be an object, got a boolean`},
		{`{"tool":"echo","async":"yes"}`, protocol.InvalidRequest, `"async" must be a boolean, got a string`},
		{`{"tool":"echo","trace":1}`, protocol.InvalidRequest, `"trace" must be a boolean, got a number`},
		{`{"tool":"echo","args":{}}`, protocol.InvalidRequest, `unknown field "args" in request (known: tool, arguments, session, id, policy, async, trace, _meta)`},
		{`{"tool":"echo","tool":"kv_get"}`, protocol.InvalidJSON, `Invalid JSON: duplicate key "tool" at byte 15`},
		{`{"tool":"kv_set","arguments":{"key":"","key":"a","value":1}}`, protocol.InvalidJSON, `Invalid JSON: duplicate key "key" at byte 39`},
		{`{"a":{"x":1,"x":2}}`, protocol.InvalidJSON, `Invalid JSON: duplicate key "x" at byte 12`},
		{`{"a":[{"k":1},{"k":2}],"b":{"k":{"k":1}},"k":0}`, "", ""},
		{strings.Repeat("[", 600) + strings.Repeat("]", 600), protocol.InvalidRequest, "request nests deeper than limits.max_depth (512) at byte 512"},
	}
	for _, c := range cases {
		_, _, err := protocol.Parse([]byte(c.in), lim, nil)
		if c.code == "" {
			if err != nil {
				t.Errorf("Parse(%q): %v", c.in, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("Parse(%q): no error, want %s %q", c.in, c.code, c.msg)
			continue
		}
		if err.Code != c.code || err.Message != c.msg {
			t.Errorf("Parse(%q):\n got %s %q\nwant %s %q", c.in, err.Code, err.Message, c.code, c.msg)
		}
	}
}

func TestParse_sizeLimitComesFirst(t *testing.T) {
	_, _, err := protocol.Parse([]byte("not json at all"), protocol.Limits{MaxRequestBytes: 4}, nil)
	if err == nil || err.Code != protocol.InvalidRequest ||
		err.Message != "request is 15 bytes, more than limits.max_request_bytes (4)" {
		t.Fatalf("got %v", err)
	}
}

func TestParse_forms(t *testing.T) {
	cases := []struct {
		in                  string
		simple              bool
		tool, args, session string
		id                  string
		policy              string
		async, trace        bool
	}{
		{in: `{"question":"2+2?"}`, simple: true, args: `{"question":"2+2?"}`, session: "default"},
		{in: ` { "q" : [1, 2] , "s":"a b" } `, simple: true, args: `{"q":[1,2],"s":"a b"}`, session: "default"},
		{in: `{}`, simple: true, args: `{}`, session: "default"},
		{in: `{"session":"x","id":3}`, simple: true, args: `{"session":"x","id":3}`, session: "default"},
		{in: `{"tool":"echo"}`, tool: "echo", args: `{}`, session: "default"},
		{in: `{"tool":"ec\u0068o","arguments":{"a":"\u0000"}}`, tool: "echo", args: `{"a":"\u0000"}`, session: "default"},
		{in: `{"tool":"echo","arguments":{"a":1},"session":"s1","id":"r-1","policy":{"deny":["x"]},"async":false,"trace":true}`,
			tool: "echo", args: `{"a":1}`, session: "s1", id: `"r-1"`, policy: `{"deny":["x"]}`, trace: true},
		{in: "{\"tool\":\"echo\",\n\t\"arguments\": {\"text\": \"a  b\"},\"id\": -1.5e3}", tool: "echo",
			args: `{"text":"a  b"}`, session: "default", id: `-1.5e3`},
	}
	for _, c := range cases {
		r, _, err := protocol.Parse([]byte(c.in), lim, nil)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if r.Simple != c.simple || r.Tool != c.tool || string(r.Arguments) != c.args || r.Session != c.session ||
			string(r.ID) != c.id || string(r.Policy) != c.policy || r.Async != c.async || r.Trace != c.trace {
			t.Errorf("Parse(%q) = %+v (args %s)", c.in, r, r.Arguments)
		}
	}
}

func TestScan_deepNestingDoesNotRecurse(t *testing.T) {
	doc := strings.Repeat(`{"a":[`, 100000) + "1" + strings.Repeat("]}", 100000)
	sc, err := protocol.Scan([]byte(doc), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Depth != 200000 {
		t.Fatalf("depth %d", sc.Depth)
	}
	if _, err := protocol.Scan([]byte(doc), 199999); err == nil || !err.TooDeep {
		t.Fatalf("want TooDeep, got %v", err)
	}
}

func TestAppendString_everyRuneSurvives(t *testing.T) {
	cases := map[string]string{
		"plain":            `"plain"`,
		"q\"b\\s/":         `"q\"b\\s/"`,
		"\x00\x01\x1f\x7f": `"\u0000\u0001\u001f` + "\x7f" + `"`,
		"\n\r\t\b\f":       `"\n\r\t\b\f"`,
		"é世界🎉":             `"é世界🎉"`,
		"bad\xffbyte\xc3":  `"bad` + jsonx.InvalidByte + `byte` + jsonx.InvalidByte + `"`,
		"\u2028\u2029<>&'": `"\u2028\u2029<>&'"`, // escaped, as encoding/json does
	}
	for in, want := range cases {
		got := string(protocol.AppendString(nil, in))
		if got != want {
			t.Errorf("AppendString(%q) = %s, want %s", in, got, want)
		}
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Errorf("AppendString(%q) is not JSON: %v", in, err)
		}
		if utf8.ValidString(in) && back != in {
			t.Errorf("round trip of %q gave %q", in, back)
		}
	}
}

func TestEnvelopes(t *testing.T) {
	s := protocol.Success{ID: []byte(`7`), Tool: "echo", Result: []byte(`{"a":1}`)}
	if got := string(s.Append(nil)); got != `{"status":"success","id":7,"tool":"echo","result":{"a":1}}` {
		t.Error(got)
	}
	s = protocol.Success{Tool: "t", Truncated: true, Result: []byte(`"abc"`)}
	if got := string(s.Append(nil)); got != `{"status":"success","tool":"t","result":"abc","truncated":true}` {
		t.Error(got)
	}
	e := &protocol.Error{Code: protocol.UnknownTool, Message: "Tool not found: x\"y", Details: []byte(`[1]`)}
	if got := string(protocol.AppendError(nil, []byte(`"r1"`), e)); got !=
		`{"status":"error","id":"r1","error":"unknown_tool","message":"Tool not found: x\"y","details":[1]}` {
		t.Error(got)
	}
}

func TestGet_kinds(t *testing.T) {
	doc := []byte(`{"s":"a\"b\u00e9","i":-42,"big":123456789012345678901,"f":1.5,"e":2e3,
		"t":true,"f2":false,"n":null,"arr":[1, {"x":2}],"o":{"k" : "v"}}`)
	cases := []struct {
		path string
		kind protocol.Kind
		text string
	}{
		{"s", protocol.KindString, "a\"bé"},
		{"i", protocol.KindInteger, "-42"},
		{"big", protocol.KindFloat, "123456789012345678901"},
		{"f", protocol.KindFloat, "1.5"},
		{"e", protocol.KindFloat, "2e3"},
		{"t", protocol.KindTrue, "true"},
		{"f2", protocol.KindFalse, "false"},
		{"n", protocol.KindNull, "null"},
		{"missing", protocol.KindMissing, ""},
		{"arr", protocol.KindArray, `[1,{"x":2}]`},
		{"arr.1.x", protocol.KindInteger, "2"},
		{"o", protocol.KindObject, `{"k":"v"}`},
	}
	for _, c := range cases {
		k, text, err := protocol.Get(doc, c.path, 512)
		if err != nil || k != c.kind || text != c.text {
			t.Errorf("Get(%q) = %v %q %v, want %v %q", c.path, k, text, err, c.kind, c.text)
		}
	}
	if _, _, err := protocol.Get([]byte(`{"a":`), "a", 512); err == nil {
		t.Error("Get on invalid JSON: no error")
	}
}

// FuzzParseRequest: any input yields a request or a protocol error, and an
// envelope built from either is valid JSON.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{`{"tool":"echo","arguments":{"a":1}}`, `{"q":1}`, `{"tool":1}`, `[]`, ``, "{\"tool\":\"\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, _, err := protocol.Parse(data, lim, nil)
		if err != nil && err.Code == protocol.Internal {
			t.Fatalf("Parse(%q): internal error %v", data, err)
		}
		var out []byte
		if err != nil {
			out = protocol.AppendError(nil, r.ID, err)
		} else {
			s := protocol.Success{ID: r.ID, Tool: r.Tool, Result: r.Arguments}
			out = s.Append(nil)
		}
		if !json.Valid(out) {
			t.Fatalf("envelope for %q is not JSON: %s", data, out)
		}
	})
}

// TestScan_bitStackBeyondOneWord checks container matching past the first
// 64 levels, where the scanner's stack spills from one word to a slice.
func TestScan_bitStackBeyondOneWord(t *testing.T) {
	const depth = 200
	var open strings.Builder
	closers := make([]byte, 0, depth)
	for i := 0; i < depth; i++ {
		if i%3 == 0 {
			open.WriteString(`{"k":`)
			closers = append(closers, '}')
		} else {
			open.WriteString("[")
			closers = append(closers, ']')
		}
	}
	var closing strings.Builder
	for i := depth - 1; i >= 0; i-- {
		closing.WriteByte(closers[i])
	}
	good := open.String() + "1" + closing.String()
	if _, err := protocol.Scan([]byte(good), 1000); err != nil {
		t.Fatalf("valid %d-deep document refused: %v", depth, err)
	}
	if !json.Valid([]byte(good)) {
		t.Fatal("test document is not valid JSON")
	}
	// Swap one closer deep inside (level 150): the scanner must notice.
	bad := []byte(good)
	pos := len(open.String()) + 1 + (depth - 1 - 150)
	if bad[pos] == '}' {
		bad[pos] = ']'
	} else {
		bad[pos] = '}'
	}
	if _, err := protocol.Scan(bad, 1000); err == nil {
		t.Fatal("mismatched closer at level 150 accepted")
	}
}

// TestGet_modifiersAreDisabled: a path cannot transform the document (a
// deep document with @pretty once overflowed the stack or ran for minutes).
func TestGet_modifiersAreDisabled(t *testing.T) {
	deep := []byte(strings.Repeat("[", 5000) + "1" + strings.Repeat("]", 5000))
	for _, path := range []string{"@pretty", "@flatten", "@dig:x", `@flatten:{"deep":true}`, "@reverse", "@this"} {
		k, text, err := protocol.Get(deep, path, 10000)
		if err != protocol.ErrModifier || k != protocol.KindMissing || text != "" {
			t.Errorf("Get(deep, %q) = %v %d bytes %v, want ErrModifier", path, k, len(text), err)
		}
	}
	// A literal @ in a key is written escaped.
	if k, text, err := protocol.Get([]byte(`{"user@host":1}`), `user\@host`, 10); err != nil || k != protocol.KindInteger || text != "1" {
		t.Errorf("escaped @: %v %q %v", k, text, err)
	}
}

// TestScanStrict_manyKeys: duplicate detection stays linear in an object
// with very many keys, and finds a duplicate far apart.
func TestScanStrict_manyKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < 100000; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	ok := b.String() + "}"
	if _, err := protocol.ScanStrict([]byte(ok), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := protocol.ScanStrict([]byte(b.String()+`,"k5":1}`), 10); err == nil || !strings.Contains(err.Reason, `duplicate key "k5"`) {
		t.Fatalf("got %v", err)
	}
	// Nested objects past the eighth level keep their own keys.
	deep := strings.Repeat(`{"a":1,"n":`, 20) + "1" + strings.Repeat("}", 20)
	if _, err := protocol.ScanStrict([]byte(deep), 100); err != nil {
		t.Fatal(err)
	}
	deepDup := strings.Repeat(`{"a":1,"n":`, 20) + `{"z":1,"z":2}` + strings.Repeat("}", 20)
	if _, err := protocol.ScanStrict([]byte(deepDup), 100); err == nil {
		t.Fatal("duplicate at depth 21 accepted")
	}
}

// TestParse_session_is_owned: the session a request names outlives the
// call (map keys, rate windows, notices), so Parse returns Clara's own copy
// and caps its length; overwriting the request afterwards changes nothing.
func TestParse_session_is_owned(t *testing.T) {
	req := []byte(`{"tool":"echo","session":"alice"}`)
	r, _, perr := protocol.Parse(req, protocol.Limits{}, nil)
	if perr != nil {
		t.Fatal(perr)
	}
	copy(req, strings.Repeat("Z", len(req)))
	if r.Session != "alice" {
		t.Fatalf("session = %q after the request was overwritten", r.Session)
	}
	long := `{"tool":"echo","session":"` + strings.Repeat("s", protocol.MaxSessionBytes+1) + `"}`
	if _, _, perr := protocol.Parse([]byte(long), protocol.Limits{}, nil); perr == nil || perr.Code != protocol.InvalidRequest {
		t.Fatalf("a %d-byte session name: %v", protocol.MaxSessionBytes+1, perr)
	}
	ok := `{"tool":"echo","session":"` + strings.Repeat("s", protocol.MaxSessionBytes) + `"}`
	if _, _, perr := protocol.Parse([]byte(ok), protocol.Limits{}, nil); perr != nil {
		t.Fatalf("a %d-byte session name: %v", protocol.MaxSessionBytes, perr)
	}
}

// TestParse_meta: MCP's _meta is accepted as an opaque object (it used to
// be refused as an unknown field) and must be an object.
func TestParse_meta(t *testing.T) {
	r, _, perr := protocol.Parse([]byte(`{"tool":"echo","_meta":{"traceparent":"00-ab-cd-01"}}`), protocol.Limits{}, nil)
	if perr != nil || string(r.Meta) != `{"traceparent":"00-ab-cd-01"}` {
		t.Fatalf("%v %s", perr, r.Meta)
	}
	_, _, perr = protocol.Parse([]byte(`{"tool":"echo","_meta":"x"}`), protocol.Limits{}, nil)
	if perr == nil || perr.Message != `"_meta" must be an object, got a string` {
		t.Fatalf("%v", perr)
	}
}
