package llm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

var readerSeeds = []string{
	`{}`, `[]`, `""`, `0`, `-0.5e+10`, `true`, `null`, ` {"a" : [1, "x\u00e9\ud83d\ude00", {"b": null}] } `,
	`{"a":1,}`, `[1 2]`, `01`, `1.`, `"\x"`, `"\ud800"`, `"\ud800\u0041"`, `{"a"}`, `"tab	in"`, `[`, `{"a":`,
	strings.Repeat("[", 600) + strings.Repeat("]", 600), `"\/\b\f\n\r\t\\\""`, `1e`, `-`, `nul`, `{"x":1}{}`,
}

// The reader accepts exactly what encoding/json accepts (within the depth
// bound), and reads strings as it does.
func FuzzJSONReader(f *testing.F) {
	for _, s := range readerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newJSONReader(data)
		r.skip()
		err := r.end()
		valid := json.Valid(data)
		if (err == nil) != valid && !strings.Contains(errString(err), "nested deeper") {
			t.Fatalf("%q: reader %v, json.Valid %v", data, err, valid)
		}
		if valid && utf8.Valid(data) {
			var want string
			if json.Unmarshal(data, &want) == nil {
				if got := newJSONReader(data).str(); got != want {
					t.Fatalf("%q: read %q, want %q", data, got, want)
				}
			}
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestJSONReader_seeds(t *testing.T) {
	for _, s := range readerSeeds {
		r := newJSONReader([]byte(s))
		r.skip()
		err := r.end()
		if (err == nil) != json.Valid([]byte(s)) && !strings.Contains(errString(err), "nested deeper") {
			t.Errorf("%q: %v", s, err)
		}
	}
	if got := newJSONReader([]byte(`"\ud83d\ude00 \ud800x \u00e9"`)).str(); got != "😀 \uFFFDx é" {
		t.Errorf("%q", got)
	}
	r := newJSONReader([]byte(`{"n": 3.0, "m": 2.5}`))
	var n, m int
	r.object(func(k []byte) {
		if string(k) == "n" {
			n = r.int()
		} else {
			m = r.int()
		}
	})
	if n != 3 || r.err == nil || m != 0 {
		t.Errorf("int: %d %d %v", n, m, r.err)
	}
}

// No answer, however broken, panics a decoder.
func FuzzDecoders(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(scriptDir, "*.toml"))
	for _, file := range files {
		text, _ := os.ReadFile(file)
		f.Add(text)
	}
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":99999999999}]}}]}\n\n"))
	f.Add([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"input_json_delta\"}}\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, p := range []provider{openAI{}, anthropic{}} {
			p.decode(data)
			p.decodeStream(newSSEReader(strings.NewReader(string(data)), 1<<20), func(string) {})
		}
		parseChatArgs(data)
	})
}
