package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkEmit_100rules10match is the Go side of the bench row "emit"
// (tests/bench/bench_emit.c has the same rules and event): 100 rules on the
// trigger, 10 matching, each rendering a notice.
func BenchmarkEmit_100rules10match(b *testing.B) { benchEmit(b, 3) }

// BenchmarkEmit_100rules0match: the same event, matching none.
func BenchmarkEmit_100rules0match(b *testing.B) { benchEmit(b, 99) }

func benchEmit(b *testing.B, group int) {
	e := New(Options{})
	if got := string(e.Configure([]byte(`state_dir = ""`))); !strings.HasPrefix(got, `{"status":"success"`) {
		b.Fatal(got)
	}
	var toml strings.Builder
	for i := 0; i < 100; i++ {
		cond := fmt.Sprintf("context.group == %d and context.level >= 0", i/10)
		if i%2 == 1 {
			cond = fmt.Sprintf("len(context.tags) > 0 and context.group == %d", i/10)
		}
		fmt.Fprintf(&toml, "[[rules]]\nid = \"r%02d\"\ntrigger = \"bench.tick\"\n[rules.condition]\nexpression = %q\n"+
			"[[rules.actions]]\ntype = \"notify_self\"\nmessage = \"rule %d: level {{ context.level }} from {{ context.source | upper }}\"\n", i, cond, i)
	}
	req, _ := json.Marshal(map[string]any{"tool": "rules_load", "arguments": map[string]any{"name": "bench.toml", "toml": toml.String()}})
	if got := e.Evaluate(req); !bytes.HasPrefix(got, []byte(`{"status":"success"`)) {
		b.Fatal(string(got))
	}
	event := []byte(fmt.Sprintf(`{"event":"bench.tick","session":"bench","payload":{"group":%d,"level":7,"tags":["a","b"],"source":"sensor-12"}}`, group))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if out := e.Emit(event); !bytes.HasPrefix(out, []byte(`{"status":"success"`)) {
			b.Fatal(string(out))
		}
	}
}
