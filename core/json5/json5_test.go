package json5

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The JSON5 project's test suite (testdata/README.md): every valid
// document reads, every invalid one is refused, and what comes out of a
// valid one is JSON, equal to the value JSON itself reads from the .json
// files.
func TestToJSON_theJSON5TestSuite(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*"))
	if err != nil || len(files) < 100 {
		t.Fatalf("%d files: %v", len(files), err)
	}
	for _, f := range files {
		ext := filepath.Ext(f)
		if ext == ".md" {
			continue
		}
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out, err := ToJSON(text, 0)
		valid := ext == ".json" || ext == ".json5"
		switch {
		case valid && err != nil && !strings.Contains(err.Error(), "has no JSON form"):
			t.Errorf("%s: refused: %v", f, err)
		case !valid && err == nil:
			t.Errorf("%s: read as %s", f, out)
		case valid && err == nil && !json.Valid(out):
			t.Errorf("%s: wrote %s, not JSON", f, out)
		case ext == ".json" && err == nil:
			var want, got any
			if json.Unmarshal(text, &want) != nil || json.Unmarshal(out, &got) != nil || !equal(want, got) {
				t.Errorf("%s: %s reads as %v, not %v", f, out, got, want)
			}
		}
	}
}

func equal(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// The spec's own example (spec.json5.org, "Short Example") and seed 002's
// option strings, each feature written out.
func TestToJSON_theSpecExampleAndTheSeed(t *testing.T) {
	for text, want := range map[string]string{
		`{
  // comments
  unquoted: 'and you can quote me on that',
  singleQuotes: 'I can use "double quotes" here',
  lineBreaks: "Look, Mom! \
No \\n's!",
  hexadecimal: 0xdecaf,
  leadingDecimalPoint: .8675309, andTrailing: 8675309.,
  positiveSign: +1,
  trailingComma: 'in objects', andIn: ['arrays',],
  "backwardsCompatible": "with JSON",
}`: `{"andIn":["arrays"],"andTrailing":8675309,"backwardsCompatible":"with JSON","hexadecimal":912559,"leadingDecimalPoint":0.8675309,"lineBreaks":"Look, Mom! No \\n's!","positiveSign":1,"singleQuotes":"I can use \"double quotes\" here","trailingComma":"in objects","unquoted":"and you can quote me on that"}`,
		`{ system:'You can call tools to help answer.', allow_tools:true, max_tool_calls:3 }`: `{"allow_tools":true,"max_tool_calls":3,"system":"You can call tools to help answer."}`,
		`{ timeout_ms: 800, rate_per_min: 20 }`:                                               `{"rate_per_min":20,"timeout_ms":800}`,
		`{type:'object',properties:{k:{type:'string'},v:{type:'string'}},required:['k','v']}`: `{"properties":{"k":{"type":"string"},"v":{"type":"string"}},"required":["k","v"],"type":"object"}`,
		`{"tool":"echo","arguments":{"n":12345678901234567890123}}`:                           `{"arguments":{"n":12345678901234567890123},"tool":"echo"}`,
		`-0x10`:      `-16`,
		`5.e3`:       `5e3`,
		`'\u00e9\t'`: `"é\t"`,
		`{a:1,a:2}`:  `{"a":2}`,
	} {
		got, err := ToJSON([]byte(text), 0)
		if err != nil || string(got) != want {
			t.Errorf("%s:\n got %s %v\nwant %s", text, got, err, want)
		}
	}
}

func TestToJSON_refusals(t *testing.T) {
	for text, want := range map[string]string{
		`{a: Infinity}`: "Infinity has no JSON form",
		`-NaN`:          "JSON5:",
		"{a:'\xff'}":    "not valid UTF-8",
		strings.Repeat("[", 600) + strings.Repeat("]", 600): "nests 600 deep, more than 512",
		strings.Repeat("[", 1e6):                            "nests 1000000 deep",
		`{a:1} {b:2}`:                                       "JSON5:",
		``:                                                  "JSON5:",
		`{a:01}`:                                            "JSON5:",
	} {
		_, err := ToJSON([]byte(text), 0)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.40q: %v, want %q", text, err, want)
		}
	}
	if _, err := ToJSON([]byte(`[[[1]]]`), 2); err == nil {
		t.Error("max depth 2 let 3 through")
	}
	// Brackets inside strings and comments do not count.
	if out, err := ToJSON([]byte(`/* [[[ */ ['[[[', "]]]{{", // {{{
	]`), 1); err != nil || string(out) != `["[[[","]]]{{"]` {
		t.Errorf("%s %v", out, err)
	}
}

func FuzzToJSON(f *testing.F) {
	for _, s := range []string{`{a:1}`, `[1,2,]`, `'x'`, `0x1F`, `/*c*/null`, `{"a":[{b:'c'}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		out, err := ToJSON(text, 64)
		if err == nil && !json.Valid(out) {
			t.Fatalf("%q gave %q, not JSON", text, out)
		}
	})
}
