package jsonx_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/clara-lib/clara/core/jsonx"
)

// seeds are the one corpus's starting points, for the scanner, the reader
// and the writer alike.
func seeds() []string {
	s := []string{`{}`, `[1,2]`, `{"a":"\u00e9"}`, "\"\xff\"", `1e5`, `-0.5`, `[[[]]]`, ` {"a" : [ true , null ] } `,
		`[]`, `""`, `0`, `-0.5e+10`, `true`, `null`, ` {"a" : [1, "x\u00e9\ud83d\ude00", {"b": null}] } `,
		`{"a":1,}`, `[1 2]`, `01`, `1.`, `"\x"`, `"\ud800"`, `"\ud800\u0041"`, `{"a"}`, `"tab	in"`, `[`, `{"a":`,
		strings.Repeat("[", 600) + strings.Repeat("]", 600), `"\/\b\f\n\r\t\\\""`, `1e`, `-`, `nul`, `{"x":1}{}`,
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, "\"\u2028\u2029\"", `"<>&"`}
	// Strings are read eight bytes at a time: every kind of byte that ends a run, at every
	// place in the first words and in later ones.
	long := strings.Repeat("0123456789abcdef", 3)
	for _, c := range []string{`"`, `\n`, `\u00e9`, "\x01", "\x7f", "\xc3\xa9", "\xff", "\xe2\x80\xa8"} {
		for at := 0; at < 26; at++ {
			s = append(s, `{"k":"`+long[:at]+c+long[at:]+`"}`)
		}
	}
	return s
}

// marshal is encoding/json's text of s with HTML escaping off: what
// AppendString must write.
func marshal(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// FuzzJSON holds the scanner, the reader and the writer to encoding/json
// on the same inputs: the scanner and the reader accept what json.Valid
// accepts (in valid UTF-8, within the depth bound), compacting keeps a
// document valid, the reader reads strings as encoding/json does, and
// AppendString writes any text, JSON or not, as encoding/json writes it.
func FuzzJSON(f *testing.F) {
	for _, s := range seeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkOne(t, data) })
}

func TestJSON_seeds(t *testing.T) {
	for _, s := range seeds() {
		checkOne(t, []byte(s))
	}
}

func checkOne(t *testing.T, data []byte) {
	t.Helper()
	valid := json.Valid(data)
	// The scanner.
	sc, serr := jsonx.Scan(data, 1<<20)
	if (serr == nil) != (valid && utf8.Valid(data)) {
		t.Fatalf("Scan(%q) err=%v, encoding/json says valid=%v", data, serr, valid)
	}
	if serr == nil {
		compact := jsonx.AppendCompact(nil, data[sc.Start:sc.End])
		if !json.Valid(compact) {
			t.Fatalf("compact of %q = %q is not JSON", data, compact)
		}
		if !sc.Spaced && string(compact) != string(data[sc.Start:sc.End]) {
			t.Fatalf("Spaced=false but compact changed %q", data)
		}
		// The strict scan differs only by refusing duplicate keys.
		if _, serr := jsonx.ScanStrict(data, 1<<20); serr != nil && !strings.HasPrefix(serr.Reason, "duplicate key") {
			t.Fatalf("ScanStrict(%q) = %v, but Scan accepted it", data, serr)
		}
		var sc2 jsonx.Scanner
		if _, serr := sc2.ScanObject(data, 1<<20); serr == nil && bytes.TrimSpace(data)[0] == '{' {
			var m map[string]json.RawMessage
			if json.Unmarshal(data, &m) == nil && len(m) != sc2.Members() {
				t.Fatalf("ScanObject(%q): %d members, encoding/json %d", data, sc2.Members(), len(m))
			}
		}
	}
	// The reader.
	r := jsonx.NewReader(data)
	r.Skip()
	err := r.End()
	if (err == nil) != valid && !strings.Contains(errString(err), "nested deeper") {
		t.Fatalf("%q: reader %v, json.Valid %v", data, err, valid)
	}
	if valid && utf8.Valid(data) {
		var want string
		if json.Unmarshal(data, &want) == nil {
			if got := jsonx.NewReader(data).Str(); got != want {
				t.Fatalf("%q: read %q, want %q", data, got, want)
			}
		}
	}
	// DecodeAny: what encoding/json decodes, whenever it says it can.
	if v, ok := jsonx.DecodeAny(data); ok {
		var want any
		if err := json.Unmarshal(data, &want); err != nil || !reflect.DeepEqual(v, want) {
			t.Fatalf("DecodeAny(%q) = %#v, encoding/json %#v (%v)", data, v, want, err)
		}
	} else if want := any(nil); valid && utf8.Valid(data) && json.Unmarshal(data, &want) == nil {
		// It gives up only past its depth; encoding/json read it.
		if r := jsonx.NewReader(data); func() error { r.Skip(); return r.End() }() == nil {
			t.Fatalf("DecodeAny(%q) gave up on what encoding/json reads", data)
		}
	}
	// The writer, on the input taken as text.
	got := string(jsonx.AppendString(nil, string(data)))
	if want := marshal(string(data)); got != want {
		t.Fatalf("AppendString(%q) = %s, encoding/json %s", data, got, want)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestReader_strings(t *testing.T) {
	if got := jsonx.NewReader([]byte(`"\ud83d\ude00 \ud800x \u00e9"`)).Str(); got != "😀 \uFFFDx é" {
		t.Errorf("%q", got)
	}
	r := jsonx.NewReader([]byte(`{"n": 3.0, "m": 2.5}`))
	var n, m int
	r.Object(func(k []byte) {
		if string(k) == "n" {
			n = r.Int()
		} else {
			m = r.Int()
		}
	})
	if n != 3 || r.Err() == nil || m != 0 {
		t.Errorf("int: %d %d %v", n, m, r.Err())
	}
}

// AppendValue and AppendFloat write what encoding/json writes; what JSON
// cannot hold is null.
func TestAppendValue(t *testing.T) {
	v := map[string]any{"b": []any{1.5, 1e21, 1e-7, -0.0, int64(3), "x\u2028<"}, "a": nil, "c": true, "d": map[string]any{}}
	want, _ := json.Marshal(v)
	want = bytes.ReplaceAll(want, []byte(`\u003c`), []byte("<"))
	if got := jsonx.AppendValue(nil, v); string(got) != string(want) {
		t.Errorf("AppendValue = %s, want %s", got, want)
	}
	if got := jsonx.AppendValue(nil, []string{"a"}); string(got) != `["a"]` {
		t.Errorf("other types through encoding/json: %s", got)
	}
	if got := jsonx.AppendFloat(nil, 0/zero()); string(got) != "null" {
		t.Errorf("NaN: %s", got)
	}
}

func zero() float64 { return 0 }
