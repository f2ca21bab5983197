package protocol

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestDecodeValue: decodeValue gives what gjson's Result.Value gives (the
// decoder ParseEvent used before), on hand-picked values and on random
// ones, whitespace included.
func TestDecodeValue(t *testing.T) {
	texts := []string{
		`{}`, `[]`, `{"a":{}}`, `{"a":[]}`, `{"a":[[],[{}]]}`,
		`{"group":3,"level":7,"tags":["a","b"],"source":"sensor-12"}`,
		`{ "a" : 1 , "b" : [ 1 , 2.5 , -3e2 , true , false , null ] , "c" : { "d" : "e" } }`,
		"{\n\t\"a\":\r\n 1\n}",
		`{"n":-0,"big":1e400,"small":-1e400,"tiny":1e-400,"long":123456789012345678901234567890,"x":0.1}`,
		`{"s":"\"quoted\" \\ back\/slash \b\f\n\r\t","u":"\u00e9\u4e2d\ud83d\ude00","lone":"\ud800 x","k\u00e9y":"v","":""}`,
		`{"esc\"key":{"in\\ner":["\\",""]}}`,
		`{"é":"ünïcödé","emoji":"😀"}`,
		`"top"`, `12`, `true`, `null`, `[1,"a",{"b":null}]`,
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		texts = append(texts, randomJSON(r, 0))
	}
	for _, text := range texts {
		if _, serr := ScanStrict([]byte(text), 64); serr != nil {
			continue // duplicate keys from the generator
		}
		want := gjson.Parse(text).Value()
		got, rest := decodeValue(text)
		if !reflect.DeepEqual(got, want) || strings.TrimSpace(rest) != "" {
			t.Errorf("%s:\n got  %#v (rest %q)\n want %#v", text, got, rest, want)
		}
	}
}

func randomJSON(r *rand.Rand, depth int) string {
	ws := func() string { return []string{"", "", " ", "\n\t"}[r.Intn(4)] }
	switch k := r.Intn(10); {
	case k < 2 && depth < 5:
		var parts []string
		for i := r.Intn(4); i > 0; i-- {
			parts = append(parts, ws()+randomString(r)+ws()+":"+ws()+randomJSON(r, depth+1)+ws())
		}
		return "{" + strings.Join(parts, ",") + ws() + "}"
	case k < 4 && depth < 5:
		var parts []string
		for i := r.Intn(4); i > 0; i-- {
			parts = append(parts, ws()+randomJSON(r, depth+1)+ws())
		}
		return "[" + strings.Join(parts, ",") + ws() + "]"
	case k < 6:
		return randomString(r)
	case k < 8:
		return []string{"0", "-1", "3.25", "1e3", "-2.5E-3", "9007199254740993", "1e999", "0.000001"}[r.Intn(8)]
	}
	return []string{"true", "false", "null"}[r.Intn(3)]
}

func randomString(r *rand.Rand) string {
	pieces := []string{"a", "key", "é", `\"`, `\\`, `\n`, `\u00e9`, `\ud83d\ude00`, `\ud800`, " ", "😀", `\/`}
	var b strings.Builder
	for i := r.Intn(4); i > 0; i-- {
		b.WriteString(pieces[r.Intn(len(pieces))])
	}
	return fmt.Sprintf(`"%s"`, b.String())
}
