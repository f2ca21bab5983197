package core_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/pgstore/pgtest"
	"github.com/clara-lib/clara/core/toolbox"
)

// The shared store's rows of the bench (issue 31; tests/bench/run.sh
// gives them a PostgreSQL on loopback through CLARA_TEST_PG_URL): rule
// state set and read through the whole pipeline, in PostgreSQL beside
// SQLite (a WAL file under a temporary state_dir); a rate-limited call
// whose window is in PostgreSQL beside the same call with the window in
// the process.

// benchEngine is an engine whose rule state and limits are in backend.
func benchEngine(b *testing.B, backend string) *core.Engine {
	b.Helper()
	var e *core.Engine
	if backend == "postgres" {
		url := pgtest.URL(b)
		e = core.New(core.Options{Getenv: func(k string) string {
			if k == "CLARA_BENCH_DB" {
				return url
			}
			return ""
		}})
		mustConfigure(b, e, `{"state_dir":"","rules":{"paths":[],"watch":false},"plugins":{"paths":[]},"store":{"backend":"postgres","url_env":"CLARA_BENCH_DB"}}`)
	} else {
		e = core.New(core.Options{})
		mustConfigure(b, e, `{"state_dir":`+jsonText(b.TempDir())+`,"rules":{"paths":[],"watch":false},"plugins":{"paths":[]}}`)
	}
	b.Cleanup(e.Close)
	return e
}

func benchCall(b *testing.B, e *core.Engine, req []byte) {
	out := e.Evaluate(req)
	if len(out) < 20 || string(out[:20]) != `{"status":"success",` {
		b.Fatalf("%s", out)
	}
}

func BenchmarkShared_stateSet(b *testing.B) {
	for _, backend := range []string{"postgres", "sqlite"} {
		b.Run(backend, func(b *testing.B) {
			e := benchEngine(b, backend)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				benchCall(b, e, []byte(`{"tool":"state_set","session":"bench","arguments":{"key":"k`+strconv.Itoa(i%100)+`","value":`+strconv.Itoa(i)+`}}`))
			}
		})
	}
}

func BenchmarkShared_stateGet(b *testing.B) {
	for _, backend := range []string{"postgres", "sqlite"} {
		b.Run(backend, func(b *testing.B) {
			e := benchEngine(b, backend)
			req := []byte(`{"tool":"state_get","session":"bench","arguments":{"key":"k"}}`)
			benchCall(b, e, []byte(`{"tool":"state_set","session":"bench","arguments":{"key":"k","value":{"n":1}}}`))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				benchCall(b, e, req)
			}
		})
	}
}

// BenchmarkShared_rateLimited: a host tool with rate_per_min = 1000 per
// session, the session changing every 900 calls so that no call is
// refused: "shared" decides each admission in PostgreSQL (its window
// holds up to 900 times), "local" in the process.
func BenchmarkShared_rateLimited(b *testing.B) {
	for _, backend := range []string{"shared", "local"} {
		b.Run(backend, func(b *testing.B) {
			e := benchEngine(b, map[string]string{"shared": "postgres", "local": "sqlite"}[backend])
			if err := e.RegisterTool([]byte(`{"name":"scarce","input_schema":{"type":"object"},"limits":{"rate_per_min":1000,"rate_scope":"session"}}`),
				toolbox.ToolOptions{Run: func(context.Context, toolbox.Call) ([]byte, error) { return []byte(`{}`), nil }}); err != nil {
				b.Fatal(err)
			}
			run := strconv.Itoa(b.N) // each run of the benchmark its own sessions
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				benchCall(b, e, []byte(`{"tool":"scarce","session":"r`+run+`_`+strconv.Itoa(i/900)+`","arguments":{}}`))
			}
		})
	}
}
