package core

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// BenchmarkEvaluate_echo is the cheapest call as configured by default
// (built-in rules on). Beside it, _noRules measures what the built-in rules
// watching every call cost; toolbox's BenchmarkAudit_add what recording
// every call costs. make bench reports each pair as one row.
func BenchmarkEvaluate_echo(b *testing.B) { benchEcho(b, nil) }
func BenchmarkEvaluate_echo_noRules(b *testing.B) {
	benchEcho(b, func(e *Engine) { e.Configure([]byte("[rules]\nbuiltin = false\n")) })
}

// BenchmarkEvaluate_echo_ruleAllows and _ruleRewrites (issue 28) call the
// echo through one on_tool_call rule that reads the arguments and lets the
// call through, and through one that rewrites them (a template of the
// same two fields, merged), beside _noRules: what deciding on a call
// costs. The rules are the only ones in force.
func BenchmarkEvaluate_echo_ruleAllows(b *testing.B) { benchEchoRule(b, allowRule) }
func BenchmarkEvaluate_echo_ruleRewrites(b *testing.B) {
	benchEchoRule(b, rewriteRule)
}

const allowRule = `
[rule]
id = "allow-small"
trigger = "on_tool_call"
[condition]
expression = "context.tool.name == 'echo' and context.tool.arguments.n > 1000"
[action]
type = "deny"
reason = "too big"
`

const rewriteRule = `
[rule]
id = "shout"
trigger = "on_tool_call"
[condition]
expression = "context.tool.name == 'echo'"
[action]
type = "rewrite"
arguments = { message = "{{ context.tool.arguments.message | upper }}" }
merge = true
`

func benchEchoRule(b *testing.B, rule string) {
	benchEcho(b, func(e *Engine) {
		e.Configure([]byte("state_dir = \"\"\n[rules]\nbuiltin = false\npaths = []\n"))
		req := append(append([]byte(`{"tool":"rules_load","arguments":{"name":"bench.toml","toml":`), protocol.AppendString(nil, rule)...), "}}"...)
		if out := e.Evaluate(req); !bytes.HasPrefix(out, []byte(`{"status":"success"`)) {
			b.Fatal(string(out))
		}
	})
}

// BenchmarkEvaluate_schema5 and _noSchema call the same Go tool (run
// inline, as a built-in is) with the same 5 arguments, with and without a
// 5-property input_schema: the difference is the cost of validation.
func BenchmarkEvaluate_schema5(b *testing.B)  { benchSchema(b, true) }
func BenchmarkEvaluate_noSchema(b *testing.B) { benchSchema(b, false) }

const schema5 = `{"type":"object","properties":{"city":{"type":"string","minLength":1},` +
	`"country":{"type":"string","pattern":"^[A-Z]{2}$"},"days":{"type":"integer","minimum":1,"maximum":14},` +
	`"units":{"enum":["metric","imperial"]},"detailed":{"type":"boolean"}},` +
	`"required":["city","country"],"additionalProperties":false}`

func benchSchema(b *testing.B, withSchema bool) {
	benchRequest(b, `{"tool":"g","arguments":`+args5+`}`, func(e *Engine) {
		d := toolbox.Descriptor{Name: "g", Returns: toolbox.ReturnsJSON}
		if withSchema {
			d.InputSchema = []byte(schema5)
		}
		t, err := toolbox.NewTool(d, toolbox.ToolOptions{Inline: true, Builtin: true,
			Run: func(_ context.Context, c toolbox.Call) ([]byte, error) { return c.Arguments, nil }})
		if err != nil {
			b.Fatal(err)
		}
		e.tools.Register(t)
	})
}

func benchEcho(b *testing.B, setup func(*Engine)) {
	benchRequest(b, `{"tool":"echo","arguments":{"message":"hello","n":42}}`, setup)
}

// BenchmarkEvaluate_echo_parallel calls from every processor at once (run
// with -cpu 1,2 to see how the call path scales).
// _sessions does the same with a session of its own per goroutine.
func BenchmarkEvaluate_echo_parallel(b *testing.B)         { benchEchoParallel(b, false) }
func BenchmarkEvaluate_echo_parallelSessions(b *testing.B) { benchEchoParallel(b, true) }

func benchEchoParallel(b *testing.B, sessions bool) {
	e := New(Options{})
	var next atomic.Int32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := []byte(`{"tool":"echo","arguments":{"message":"hello","n":42}}`)
		if sessions {
			req = fmt.Appendf(nil, `{"tool":"echo","session":"s%d","arguments":{"message":"hello","n":42}}`, next.Add(1))
		}
		buf := make([]byte, 0, 256)
		for pb.Next() {
			buf = e.AppendEvaluate(buf[:0], req)
		}
		if len(buf) > 0 && !bytes.HasPrefix(buf, []byte(`{"status":"success"`)) { // a goroutine may get no call
			b.Error(string(buf))
		}
	})
}

// BenchmarkEvaluate_luaTool calls a [[tools]] Lua tool that returns its
// arguments, with the 5 arguments of the bench row "Lua tool"; beside it,
// BenchmarkEvaluate_echo5 the built-in echo with the same arguments. The
// difference is what the sandbox costs per call.
func BenchmarkEvaluate_luaTool(b *testing.B) {
	benchRequest(b, `{"tool":"lua_echo","arguments":`+args5+`}`, func(e *Engine) {
		if out := e.Configure([]byte("[[tools]]\nname = \"lua_echo\"\nlua = \"return function(args) return args end\"\n")); !bytes.HasPrefix(out, []byte(`{"status":"success"`)) {
			b.Fatal(string(out))
		}
	})
}
func BenchmarkEvaluate_echo5(b *testing.B) {
	benchRequest(b, `{"tool":"echo","arguments":`+args5+`}`, nil)
}

const args5 = `{"city":"Lyon","country":"FR","days":3,"units":"metric","detailed":false}`

func benchRequest(b *testing.B, request string, setup func(*Engine)) {
	e := New(Options{})
	if setup != nil {
		setup(e)
	}
	req := []byte(request)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf = e.AppendEvaluate(buf[:0], req)
	}
	b.StopTimer()
	if !bytes.HasPrefix(buf, []byte(`{"status":"success"`)) {
		b.Fatal(string(buf))
	}
}

// BenchmarkSubmitWait_echo is clara_submit then clara_wait(h, -1) of the echo, without cgo:
// the async row of make bench less its two crossings from C.
func BenchmarkSubmitWait_echo(b *testing.B) {
	e := New(Options{})
	defer e.Close()
	req := []byte(`{"tool":"echo","arguments":{"message":"hello","n":42}}`)
	b.ReportAllocs()
	for b.Loop() {
		h, perr := e.Submit(req)
		if perr != nil {
			b.Fatal(perr)
		}
		if out := e.Wait(context.Background(), h, -1); !bytes.HasPrefix(out, []byte(`{"status":"success"`)) {
			b.Fatalf("%s", out)
		}
	}
}
