package rules

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkFire_100rules10match is the rule engine's share of the bench row
// "emit" (core's BenchmarkEmit_100rules10match, tests/bench/bench_emit.c):
// 100 rules on the trigger, 10 matching, each rendering a notice, the
// context already built. _0match: the same event, matching none.
// _trace: the 10 matching with trace on, every candidate explained.
func BenchmarkFire_100rules10match(b *testing.B)      { benchFire100(b, 3, false) }
func BenchmarkFire_100rules0match(b *testing.B)       { benchFire100(b, 99, false) }
func BenchmarkFire_100rules10matchTrace(b *testing.B) { benchFire100(b, 3, true) }

func benchFire100(b *testing.B, group int, trace bool) {
	var text strings.Builder
	for i := 0; i < 100; i++ {
		cond := fmt.Sprintf("context.group == %d and context.level >= 0", i/10)
		if i%2 == 1 {
			cond = fmt.Sprintf("len(context.tags) > 0 and context.group == %d", i/10)
		}
		fmt.Fprintf(&text, "[[rules]]\nid = \"r%02d\"\ntrigger = \"bench.tick\"\n[rules.condition]\nexpression = %q\n"+
			"[[rules.actions]]\ntype = \"notify_self\"\nmessage = \"rule %d: level {{ context.level }} from {{ context.source | upper }}\"\n", i, cond, i)
	}
	set, err := Load([]Source{{Name: "bench.toml", Text: []byte(text.String())}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ev := Event{Name: "bench.tick", Session: "bench", Trace: trace, Context: MapSource{
		"event": map[string]any{"name": "bench.tick", "session": "bench"},
		"group": float64(group), "level": 7.0, "tags": []any{"a", "b"}, "source": "sensor-12"}}
	want := 0
	if group < 10 {
		want = 10
	}
	var host benchHost
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if out := set.Fire(context.Background(), ev, host); len(out.Fired) != want {
			b.Fatalf("fired %d", len(out.Fired))
		}
	}
}

// BenchmarkFire_actions fires one rule with one action of every kind but
// deny (the actions' records, a state write, a chained event, a tool call).
func BenchmarkFire_actions(b *testing.B) {
	set := mustLoad(b, nil, rule("all", "on_x", "", "context.n > 1",
		notify("n is {{ context.n }}"),
		"type = \"log\"\nmessage = \"n={{ context.n }}\"",
		"type = \"set_state\"\nkey = \"n\"\nvalue = \"{{ context.n }}\"",
		"type = \"emit_event\"\nevent = \"on_y\"\npayload = { m = \"{{ context.n }}\" }",
		"type = \"call_tool\"\ntool = \"t\"\narguments = { q = \"x\" }"))
	ev := Event{Name: "on_x", Session: "bench", Context: MapSource{"n": 2.0}}
	var host benchHost
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if out := set.Fire(context.Background(), ev, host); len(out.Fired) != 1 || len(out.Fired[0].Actions) != 5 {
			b.Fatalf("fired %+v", out.Fired)
		}
	}
}
