package rulelua

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// CallJSON writes the text Call's value gives through EncodeJSON, for every shape of table
// (arrays, holes, mixed keys, a number key and a string key of the same name, nesting), every
// kind of number and every byte and awkward rune in strings.
func TestCallJSON_sameAsEncodeJSON(t *testing.T) {
	cases := []string{
		`nil`, `true`, `false`, `0`, `-0`, `1`, `-1.5`, `1e21`, `1e20`, `123456789012345678`,
		`1e-6`, `1e-7`, `-2.5e-9`, `0.1`, `1/3`, `2^53`, `2^63`, `1e300`,
		`""`, `"plain"`, `"\"\\\b\f\n\r\t\1\31\127"`, `"caf\195\169 \226\128\168 \226\128\169 <&>"`,
		`"\255\254 bad utf-8 \192\128"`, `"\237\160\128 surrogate"`,
		`{}`, `{1, 2, 3}`, `{1, nil, 3}`, `{nil, 2}`, `{[2] = "b", [1] = "a"}`, `{[3] = 1}`,
		`{a = 1, b = {c = {d = {}}}}`, `{1, 2, x = 3}`, `{[1.5] = "x", [-1] = "y", [0] = "z"}`,
		`{["1"] = "string", [1] = "number"}`, `{[1] = "number", ["1"] = "string"}`,
		`{["1.5"] = "s", [1.5] = "n"}`, `(function() local t = {} for i = 1, 100 do t[i] = i * 1.5 end return t end)()`,
		`(function() local t = {} for i = 1, 100 do t[i] = i end t[50] = nil return t end)()`,
		`(function() local t = {} t[100] = 1 for i = 1, 99 do t[i] = i end return t end)()`,
		`(function() local t = {} for i = 1, 40 do t["k" .. i] = {i, tostring(i)} end return t end)()`,
		`{{{{{}}}}, {x = {y = {}}}}`,
		`(function() local t = {a = 1, b = 2, c = 3} t.b = nil t.d = 4 return t end)()`,
		`(function() local t = {1, 2, a = 1} t.a = nil return t end)()`,
		`(function() local t = {x = 1} t[1.5] = 2 t[true] = 3 t[true] = nil return t end)()`,
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 200; i++ {
		cases = append(cases, randomLuaValue(r, 0))
	}
	for _, c := range cases {
		src := "return function() return " + c + " end"
		s := mustCompile(t, "enc", src)
		want, werr := s.Call(context.Background(), nil, nil)
		got, gerr := s.CallJSON(context.Background(), nil, nil)
		if werr != nil || gerr != nil {
			t.Fatalf("%s: Call %v, CallJSON %v", c, werr, gerr)
		}
		text, err := EncodeJSON(want.Value)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if string(got.JSON) != string(text) {
			t.Errorf("%s:\n CallJSON %s\n EncodeJSON %s", c, got.JSON, text)
		}
		if _, isMap := want.Value.(map[string]any); isMap || func() bool { _, ok := want.Value.([]any); return ok }() {
			if got.Value != nil {
				t.Errorf("%s: Value %#v for a table", c, got.Value)
			}
		} else if got.Value != want.Value {
			t.Errorf("%s: Value %#v, want %#v", c, got.Value, want.Value)
		}
	}
}

func randomLuaValue(r *rand.Rand, depth int) string {
	switch k := r.Intn(8); {
	case k == 0 || depth > 3 && k < 4:
		return fmt.Sprint(r.Intn(2000) - 1000)
	case k == 1 || depth > 3:
		return fmt.Sprintf("%q", randomString(r))
	case k == 2:
		return fmt.Sprintf("%g", r.NormFloat64()*1e6)
	case k == 3:
		return []string{"true", "false", "nil"}[r.Intn(3)]
	case k < 6:
		var parts []string
		for i := r.Intn(6); i > 0; i-- {
			parts = append(parts, randomLuaValue(r, depth+1))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	default:
		var parts []string
		for i := r.Intn(6); i > 0; i-- {
			key := fmt.Sprintf("[%q]", randomString(r))
			if r.Intn(3) == 0 {
				key = fmt.Sprintf("[%d]", r.Intn(8))
			}
			parts = append(parts, key+" = "+randomLuaValue(r, depth+1))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
}

func randomString(r *rand.Rand) string {
	const alphabet = "ab\"\\\n\x01\x7f<>&é\u2028\xff"
	var b strings.Builder
	for i := r.Intn(6); i > 0; i-- {
		j := r.Intn(len(alphabet))
		b.WriteByte(alphabet[j])
	}
	return b.String()
}

// CallJSON's errors are Call's: a value that cannot be JSON is an error naming it.
func TestCallJSON_errors(t *testing.T) {
	for _, c := range []struct{ value, want string }{
		{`function() end`, "cannot convert a function value"},
		{`{f = print}`, "cannot convert a function value"},
		{`{[true] = 1}`, "cannot convert a table with a boolean key"},
		{`0/0`, "unsupported value: NaN"},
		{`{x = 1/0}`, "unsupported value: +Inf"},
		{`(function() local t = {} t.t = t return t end)()`, "nested more than 100 levels"},
	} {
		s := mustCompile(t, "enc", "return function() return "+c.value+" end")
		_, err := s.CallJSON(context.Background(), nil, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.value, err, c.want)
		}
	}
}

// The arguments arrive as Call's do; text that is not a JSON object is refused.
func TestCallJSON_arguments(t *testing.T) {
	s := mustCompile(t, "args", `return function(args) return {n = #args.list, v = args.list[2].v, s = args.s, e = next(args.empty)} end`)
	res, err := s.CallJSON(context.Background(), []byte(` {"list":[1,{"v":"x"},null,3],"s":"caf\u00e9 \"q\"","empty":{}} `), nil)
	if err != nil || string(res.JSON) != `{"n":4,"s":"café \"q\"","v":"x"}` {
		t.Fatalf("got %s, %v", res.JSON, err)
	}
	empty := mustCompile(t, "empty", `return function(args) return type(args) == "table" and next(args) == nil end`)
	for _, none := range []string{"", " ", "{}"} {
		if res, err := empty.CallJSON(context.Background(), []byte(none), nil); err != nil || res.Value != true {
			t.Fatalf("arguments %q: got %s, %v", none, res.JSON, err)
		}
	}
	for _, bad := range []string{`[1]`, `"x"`, `{"a":}`, `{"a":1} x`} {
		if _, err := s.CallJSON(context.Background(), []byte(bad), nil); err == nil || !strings.Contains(err.Error(), "cannot convert arguments") {
			t.Errorf("%s: got %v", bad, err)
		}
	}
}
