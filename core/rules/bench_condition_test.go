package rules

import (
	"context"
	"testing"

	"github.com/clara-lib/clara/core/logging"
)

// benchCondition is the condition of the bench rows "condition" (SPEC §12):
// tests/bench/bench_condition.py evaluates the same text with simpleeval.
const benchCondition = `context.tool.result_bytes > thresholds.large_result_bytes and context.tool.name != "echo"`

type benchHost struct{}

func (benchHost) ApplyState(string, []StateWrite) error { return nil }
func (benchHost) Chain(context.Context, string, string, map[string]any, int, bool) (*Outcome, error) {
	return noOutcome, nil
}
func (benchHost) CallTool(context.Context, string, string, []byte) ([]byte, error) { return nil, nil }
func (benchHost) Log(logging.Level, string)                                        {}
func (benchHost) StateGet(string, string) (any, bool, error)                       { return nil, false, nil }

// BenchmarkFire_condition fires an event at a set holding one rule with
// benchCondition: the condition's cost through the rule engine, context
// already built (as simpleeval's SimpleNamespace is). The condition is two
// comparisons joined by `and`, which Fire evaluates without expr's VM;
// BenchmarkFire_conditionVM times the same rule through the VM.
// BenchmarkFire_conditionPython times the same condition written in
// Python (syntax = "python"), translated at load: the same cost.
func BenchmarkFire_condition(b *testing.B)       { benchFireCondition(b, true, "") }
func BenchmarkFire_conditionVM(b *testing.B)     { benchFireCondition(b, false, "") }
func BenchmarkFire_conditionPython(b *testing.B) { benchFireCondition(b, true, "python") }

func benchFireCondition(b *testing.B, fast bool, syntax string) {
	cond := benchCondition
	if syntax == "python" {
		cond = `context.tool.result_bytes > thresholds.large_result_bytes and context.tool.name != "echo"`
	}
	set, err := Load([]Source{{Name: "bench.toml", Text: []byte(`[rule]
id = "big"
trigger = "on_tool_complete"
[condition]
syntax = "` + map[string]string{"": "expr"}[syntax] + syntax + `"
expression = '` + cond + `'
[action]
type = "notify_self"
message = "big result"
`)}}, BuiltinThresholds)
	if err != nil {
		b.Fatal(err)
	}
	if set.Rules()[0].simple == nil {
		b.Fatal("the bench condition should have a simple form")
	}
	if !fast {
		set.Rules()[0].simple, set.Rules()[0].folded = nil, nil
	}
	ctx := MapSource{"tool": map[string]any{"name": "search", "result_bytes": float64(120)}}
	ev := Event{Name: "on_tool_complete", Session: "bench", Context: ctx}
	var host benchHost
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if out := set.Fire(context.Background(), ev, host); len(out.Fired) != 0 {
			b.Fatal("fired")
		}
	}
}
