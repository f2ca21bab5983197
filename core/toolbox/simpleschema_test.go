package toolbox

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/clara-lib/clara/core/protocol"
)

// suiteGroup is one group of a JSON-Schema-Test-Suite case file: a schema
// and instances with the answer every draft 2020-12 validator must give.
type suiteGroup struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Tests       []struct {
		Description string          `json:"description"`
		Data        json.RawMessage `json:"data"`
		Valid       bool            `json:"valid"`
	} `json:"tests"`
}

// TestSimpleSchema_suite runs the official test suite's cases for the
// keywords the direct check compiles through both the direct check and the
// full validator: both must give the expected answer. The direct check may
// leave an instance to the full validator (unsure) only for the exotic
// values it declines to judge, listed below; a schema it declines is shown
// as declined.
func TestSimpleSchema_suite(t *testing.T) {
	files, err := filepath.Glob("testdata/JSON-Schema-Test-Suite/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no case files: %v", err)
	}
	var compiled, declined, cases, unsure int
	var unsureCases []string
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var groups []suiteGroup
		if err := json.Unmarshal(raw, &groups); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, g := range groups {
			name := filepath.Base(file) + ": " + g.Description
			full, simple, err := compileSchema("suite", g.Schema)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if simple == nil {
				declined++
				t.Logf("declined (full validator only): %s: %s", name, g.Schema)
			} else {
				compiled++
			}
			for _, tc := range g.Tests {
				cases++
				what := name + " / " + tc.Description
				if got := fullValid(t, full, tc.Data); got != tc.Valid {
					t.Errorf("%s: full validator says valid=%v, want %v", what, got, tc.Valid)
				}
				if simple == nil {
					continue
				}
				var data bytes.Buffer
				if err := json.Compact(&data, tc.Data); err != nil {
					t.Fatal(err)
				}
				switch simple.check(data.Bytes()) {
				case verdictValid:
					if !tc.Valid {
						t.Errorf("%s: direct check says valid, want invalid (%s)", what, tc.Data)
					}
				case verdictInvalid:
					if tc.Valid {
						t.Errorf("%s: direct check says invalid, want valid (%s)", what, tc.Data)
					}
				case verdictUnsure:
					unsure++
					unsureCases = append(unsureCases, what)
				}
				// Whatever the direct check says, the call's answer is
				// the expected one.
				if perr := validate("suite", full, simple, data.Bytes(), false); (perr == nil) != tc.Valid {
					t.Errorf("%s: validate says %v, want valid=%v", what, perr, tc.Valid)
				}
			}
		}
	}
	t.Logf("%d schemas compiled to the direct check, %d declined; %d cases, %d left to the full validator", compiled, declined, cases, unsure)
	// The values the direct check does not judge (numbers beyond 15
	// significant digits or float64's normal range, lone escaped
	// surrogates) are not in these files: it judges every case.
	for _, c := range unsureCases {
		t.Errorf("the direct check left %s to the full validator", c)
	}
	if compiled < 90 || declined > 25 {
		t.Errorf("the direct check compiled %d schemas and declined %d: fewer than expected", compiled, declined)
	}
}

func fullValid(t *testing.T, s *jsonschema.Schema, data []byte) bool {
	if s == nil {
		return true
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return s.Validate(inst) == nil
}

// TestSimpleSchema_compiles: the keywords of the subset compile; a schema
// with anything else is left to the full validator.
func TestSimpleSchema_compiles(t *testing.T) {
	for _, tc := range []struct {
		schema string
		simple bool
	}{
		{benchSchema5, true},
		{`{"type":"object","properties":{"q":{"type":"string","description":"query","format":"uri","default":"x"}}}`, true},
		{`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`, true},
		{`{"type":["string","null"],"const":"a"}`, true},
		{`{"type":"object","properties":{"n":{"type":"object","properties":{"m":{"maxLength":3}},"additionalProperties":{"type":"integer"}}}}`, true},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`, false},
		{`{"type":"object","properties":{"t":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":4}}}`, true},
		{`{"type":"object","anyOf":[{"required":["a"]},{"required":["b"]}]}`, true},
		{`{"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"}}`, false},
		{`{"type":"object","anyOf":[{"required":["a"]},{"$ref":"#"}]}`, false},
		{`{"type":"array","items":{"type":"object","properties":{"x":{"$ref":"#"}}}}`, false},
		{`{"type":"object","properties":{"t":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`, false},
		{`{"type":"object","properties":{"e":{"enum":[[1],{"a":1}]}}}`, false},
		{`{"type":"object","properties":{"n":{"type":"number","multipleOf":0.5}}}`, false},
		{`{"type":"object","properties":{"n":{"type":"number","maximum":12345678901234567}}}`, false},
		{`{"type":"object","properties":{"s":{"properties":{"$schema":{}}, "$schema":"https://json-schema.org/draft/2020-12/schema"}}}`, false},
		{`{"type":"object","patternProperties":{"^x":{}}}`, false},
	} {
		_, simple, err := compileSchema("t", []byte(tc.schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		if (simple != nil) != tc.simple {
			t.Errorf("%s: compiled to the direct check: %v, want %v", tc.schema, simple != nil, tc.simple)
		}
	}
}

// benchSchema5 is the schema of core's BenchmarkEvaluate_schema5.
const benchSchema5 = `{"type":"object","properties":{"city":{"type":"string","minLength":1},` +
	`"country":{"type":"string","pattern":"^[A-Z]{2}$"},"days":{"type":"integer","minimum":1,"maximum":14},` +
	`"units":{"enum":["metric","imperial"]},"detailed":{"type":"boolean"}},` +
	`"required":["city","country"],"additionalProperties":false}`

// TestSimpleSchema_agrees: arguments near every edge of a schema of the
// subset get the same answer, message and details with and without the
// direct check, and the direct check is sure of the ordinary ones.
func TestSimpleSchema_agrees(t *testing.T) {
	full, simple, err := compileSchema("g", []byte(benchSchema5))
	if err != nil || simple == nil {
		t.Fatalf("%v %v", simple, err)
	}
	for _, tc := range []struct {
		args    string
		verdict verdict
	}{
		{`{"city":"Lyon","country":"FR","days":3,"units":"metric","detailed":false}`, verdictValid},
		{`{"city":"Lyon","country":"FR"}`, verdictValid},
		{`{"city":"L","country":"FR","days":14}`, verdictValid},
		{`{"city":"L","country":"FR","days":14.0}`, verdictValid},
		{`{"city":"L","country":"FR","days":1e1}`, verdictValid},
		{`{"city":"L","country":"FR","days":0.1e1}`, verdictValid},
		{`{"city":"\u00e9","country":"\u0046R"}`, verdictValid},
		{`{"city":"Lyon","country":"FR","units":"imperial","detailed":true}`, verdictValid},
		{`{"country":"FR","city":"Lyon"}`, verdictValid},
		{`{"city":"","country":"FR"}`, verdictInvalid},
		{`{"city":"Lyon"}`, verdictInvalid},
		{`{"country":"FR"}`, verdictInvalid},
		{`{"city":"Lyon","country":"fr"}`, verdictInvalid},
		{`{"city":"Lyon","country":"FRA"}`, verdictInvalid},
		{`{"city":"Lyon","country":"FR\n"}`, verdictInvalid},
		{`{"city":"Lyon","country":"FR","days":0}`, verdictInvalid},
		{`{"city":"Lyon","country":"FR","days":15}`, verdictInvalid},
		{`{"city":"Lyon","country":"FR","days":14.5}`, verdictInvalid},
		{`{"city":"Lyon","country":"FR","days":"3"}`, verdictInvalid},
		{`{"city":"Lyon","country":"FR","days":null}`, verdictInvalid},
		{`{"city":"Lyon","country":"FR","units":"kelvin"}`, verdictInvalid},
		{`{"city":"Lyon","country":"FR","units":1}`, verdictInvalid},
		{`{"city":"Lyon","country":"FR","detailed":"no"}`, verdictInvalid},
		{`{"city":"Lyon","country":"FR","extra":1}`, verdictInvalid},
		{`{"city":["Lyon"],"country":"FR"}`, verdictInvalid},
		{`{"city":{"name":"Lyon"},"country":"FR"}`, verdictInvalid},
		{`{"city":1,"country":2,"days":3.5,"extra":true}`, verdictInvalid},
		{`["Lyon","FR"]`, verdictInvalid},
		{`{"city":"Lyon","country":"FR","days":14.0000000000000001}`, verdictUnsure},
		{`{"city":"Lyon","country":"FR","days":1e400}`, verdictUnsure},
		{`{"city":"\ud83d\ude00","country":"FR"}`, verdictValid},
		{`{"city":"\ud83d","country":"FR"}`, verdictUnsure},
		{`{"city":"\ude00\ud83d","country":"FR"}`, verdictUnsure},
		{`{"city":"a\\ud800","country":"FR"}`, verdictUnsure},
	} {
		checkAgreement(t, full, simple, tc.args, tc.verdict)
	}
}

// chatLikeSchema has the keywords of the chat tool's schema that the direct
// check took on last: items (of objects and of strings) and anyOf.
const chatLikeSchema = `{"type":"object","properties":{"prompt":{"type":"string"},` +
	`"messages":{"type":"array","items":{"type":"object","properties":{"role":{"enum":["system","user","assistant"]},` +
	`"content":{"type":"string"}},"required":["role","content"],"additionalProperties":false}},` +
	`"tools":{"type":"array","items":{"type":"string"},"maxItems":3},"stop":{"type":"array","minItems":1},` +
	`"max_tokens":{"type":"integer","minimum":1}},` +
	`"anyOf":[{"required":["prompt"]},{"required":["messages"]}],"additionalProperties":false}`

// TestSimpleSchema_agrees_items_anyOf: the same for arrays and anyOf.
func TestSimpleSchema_agrees_items_anyOf(t *testing.T) {
	full, simple, err := compileSchema("c", []byte(chatLikeSchema))
	if err != nil || simple == nil {
		t.Fatalf("%v %v", simple, err)
	}
	for _, tc := range []struct {
		args    string
		verdict verdict
	}{
		{`{"prompt":"Echo hi","tools":["echo"]}`, verdictValid},
		{`{"prompt":"hi","tools":[]}`, verdictValid},
		{`{"messages":[]}`, verdictValid},
		{`{"messages":[{"role":"user","content":"hi"},{"content":"ok","role":"assistant"}]}`, verdictValid},
		{`{"prompt":"a","messages":[{"role":"system","content":""}],"stop":[1,"x",null]}`, verdictValid},
		{`{"prompt":"a","tools":["a","b","c"],"max_tokens":1}`, verdictValid},
		{`{}`, verdictInvalid},
		{`{"tools":["echo"]}`, verdictInvalid},
		{`{"prompt":"a","tools":["a","b","c","d"]}`, verdictInvalid},
		{`{"prompt":"a","tools":[1]}`, verdictInvalid},
		{`{"prompt":"a","tools":"echo"}`, verdictInvalid},
		{`{"prompt":"a","stop":[]}`, verdictInvalid},
		{`{"messages":[{"role":"robot","content":"hi"}]}`, verdictInvalid},
		{`{"messages":[{"role":"user"}]}`, verdictInvalid},
		{`{"messages":[{"role":"user","content":"hi","name":"x"}]}`, verdictInvalid},
		{`{"messages":[{"role":"user","content":"hi"},"second"]}`, verdictInvalid},
		{`{"messages":{"role":"user","content":"hi"}}`, verdictInvalid},
		{`{"prompt":"a","max_tokens":0}`, verdictInvalid},
		{`["prompt"]`, verdictInvalid},
		{`{"prompt":"a","stop":[1e400]}`, verdictValid},
		{`{"messages":[{"role":"\ud83d","content":"x"}]}`, verdictUnsure},
	} {
		checkAgreement(t, full, simple, tc.args, tc.verdict)
	}
}

// checkAgreement: the direct check gives want for args, and validate gives
// the same answer, message and details with and without it.
func checkAgreement(t *testing.T, full *jsonschema.Schema, simple *simpleSchema, args string, want verdict) {
	t.Helper()
	if got := simple.check([]byte(args)); got != want {
		t.Errorf("%s: direct check %d, want %d", args, got, want)
	}
	with, without := validate("t", full, simple, []byte(args), false), validate("t", full, nil, []byte(args), false)
	if errText(with) != errText(without) {
		t.Errorf("%s:\n with the direct check: %s\n without:               %s", args, errText(with), errText(without))
	}
	if (with == nil) != (want == verdictValid) && want != verdictUnsure {
		t.Errorf("%s: validate says %s", args, errText(with))
	}
}

func errText(e *protocol.Error) string {
	if e == nil {
		return "valid"
	}
	return e.Error() + " | " + string(e.Details)
}

// BenchmarkValidate_schema5 validates the arguments of core's
// BenchmarkEvaluate_schema5 (direct: the direct check; full: the full
// validator alone, as before it).
func BenchmarkValidate_schema5(b *testing.B) {
	full, simple, err := compileSchema("g", []byte(benchSchema5))
	if err != nil {
		b.Fatal(err)
	}
	args := []byte(`{"city":"Lyon","country":"FR","days":3,"units":"metric","detailed":false}`)
	for _, bc := range []struct {
		name   string
		simple *simpleSchema
	}{{"direct", simple}, {"full", nil}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if perr := validate("g", full, bc.simple, args, true); perr != nil {
					b.Fatal(perr)
				}
			}
		})
	}
	b.Run("check", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if simple.check(args) != verdictValid {
				b.Fatal("invalid")
			}
		}
	})
}

// FuzzSimpleSchema holds the direct check to the full validator on
// arbitrary arguments: where it is sure, it must agree.
func FuzzSimpleSchema(f *testing.F) {
	schemas := []string{benchSchema5, chatLikeSchema,
		`{"type":"array","items":{"anyOf":[{"type":"integer","maximum":3},{"type":"string","maxLength":2}]},"maxItems":4}`,
		`{"anyOf":[{"type":"null"},{"type":"object","properties":{"a":{"items":false}},"required":["a"]}]}`,
		`{"type":"object","properties":{"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":{"type":"string"}}`}
	type pair struct {
		full   *jsonschema.Schema
		simple *simpleSchema
	}
	var compiled []pair
	for _, s := range schemas {
		full, simple, err := compileSchema("f", []byte(s))
		if err != nil || simple == nil {
			f.Fatalf("%s: %v %v", s, simple, err)
		}
		compiled = append(compiled, pair{full, simple})
	}
	for _, seed := range []string{`{"prompt":"a","tools":["x"]}`, `{"messages":[{"role":"user","content":"hi"}]}`,
		`[1,"ab",3]`, `null`, `{"a":[]}`, `{"city":"Lyon","country":"FR","days":3}`, `[4,"abc"]`, `{"a":[1]}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		if _, serr := protocol.ScanStrict(args, 64); serr != nil {
			return // the direct check judges only what the strict scan let through
		}
		var data bytes.Buffer
		if json.Compact(&data, args) != nil {
			return
		}
		for i, p := range compiled {
			v := p.simple.check(data.Bytes())
			if v == verdictUnsure {
				continue
			}
			if got := fullValid(t, p.full, data.Bytes()); got != (v == verdictValid) {
				t.Fatalf("schema %d, %s: direct check %d, full validator valid=%v", i, data.Bytes(), v, got)
			}
		}
	})
}

// A name only listed in required is not a declared property: under
// additionalProperties false, that property is still an additional one.
// (The direct check took it for declared and said valid; found in review.)
func TestSimpleSchema_required_is_not_declared(t *testing.T) {
	for _, tc := range []struct{ schema, args string }{
		{`{"type":"object","required":["a"],"additionalProperties":false}`, `{"a":1}`},
		{`{"type":"object","required":["a"],"additionalProperties":{"type":"string"}}`, `{"a":1}`},
		{`{"properties":{"a":{}},"anyOf":[{"required":["a"],"additionalProperties":false}]}`, `{"a":1}`},
	} {
		full, simple, err := compileSchema("r", []byte(tc.schema))
		if err != nil || simple == nil {
			t.Fatalf("%s: %v %v", tc.schema, simple, err)
		}
		if fullValid(t, full, []byte(tc.args)) {
			t.Fatalf("%s %s: the full validator says valid", tc.schema, tc.args)
		}
		if v := simple.check([]byte(tc.args)); v == verdictValid {
			t.Errorf("%s %s: direct check says valid", tc.schema, tc.args)
		}
		if validate("r", full, simple, []byte(tc.args), false) == nil {
			t.Errorf("%s %s: validate accepts", tc.schema, tc.args)
		}
	}
}
