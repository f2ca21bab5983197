package core

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// The Go side of make bench's scaling section (issue 33). The curves of
// rules are measured from C (tests/bench/bench_scaling.c);
// BenchmarkScaling_rulesLoad and _emit are the same rules without cgo, to
// profile (-cpuprofile). Sessions and asynchronous calls outstanding are
// measured here: live heap after a collection, per item.

// scalingRules is the TOML of n rules on one trigger, as bench_scaling.c
// writes them: rule i belongs to group i/10, so an event of group 0
// matches 10 of them. indexed rules compare context.group first (the rule
// engine indexes them on it); the others compare it second, so every rule
// is tried.
func scalingRules(n int, indexed bool) string {
	var toml strings.Builder
	for i := 0; i < n; i++ {
		cond := fmt.Sprintf("context.group == %d and context.level > -%d", i/10, i)
		if !indexed {
			cond = fmt.Sprintf("context.level > -%d and context.group == %d", i, i/10)
		}
		fmt.Fprintf(&toml, "[[rules]]\nid = \"r%05d\"\ntrigger = \"bench.tick\"\n[rules.condition]\nexpression = %q\n"+
			"[[rules.actions]]\ntype = \"notify_self\"\nmessage = \"rule %d: level {{ context.level }} from {{ context.source | upper }}\"\n", i, cond, i)
	}
	return toml.String()
}

func rulesLoadRequest(n int, indexed bool) []byte {
	req, _ := json.Marshal(map[string]any{"tool": "rules_load", "arguments": map[string]any{"name": "bench.toml", "toml": scalingRules(n, indexed)}})
	return req
}

// BenchmarkScaling_rulesLoad: rules_load of n rules, replacing those of
// the last load.
func BenchmarkScaling_rulesLoad(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			e := New(Options{})
			e.Configure([]byte(`state_dir = ""`))
			req := rulesLoadRequest(n, true)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if got := e.Evaluate(req); !bytes.HasPrefix(got, []byte(`{"status":"success"`)) {
					b.Fatal(string(got[:200]))
				}
			}
		})
	}
}

// BenchmarkScaling_emit: an emission that 10 of n rules match.
func BenchmarkScaling_emit(b *testing.B) {
	for _, indexed := range []bool{true, false} {
		for _, n := range []int{10, 100, 1000, 10000} {
			b.Run(fmt.Sprintf("indexed=%v/%d", indexed, n), func(b *testing.B) {
				e := New(Options{})
				e.Configure([]byte(`state_dir = ""`))
				if got := e.Evaluate(rulesLoadRequest(n, indexed)); !bytes.HasPrefix(got, []byte(`{"status":"success"`)) {
					b.Fatal(string(got[:200]))
				}
				event := []byte(`{"event":"bench.tick","session":"bench","payload":{"group":0,"level":7,"tags":["a","b"],"source":"sensor-12"}}`)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if out := e.Emit(event); !bytes.HasPrefix(out, []byte(`{"status":"success"`)) {
						b.Fatal(string(out))
					}
				}
			})
		}
	}
}

// BenchmarkScaling_sessions is a curve of make bench's scaling section:
// the memory each session takes, for 1,000 to 100,000 sessions, each
// named by one echo call (its history of one call).
func BenchmarkScaling_sessions(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				e := New(Options{})
				e.Configure([]byte(`state_dir = ""`))
				req := []byte(`{"tool":"echo","session":"session-0000000","arguments":{"message":"hello"}}`)
				name := bytes.Index(req, []byte("session-")) + len("session-")
				before := liveHeap()
				for i := range n {
					copy(req[name:], fmt.Sprintf("%07d", i))
					if got := e.Evaluate(req); !bytes.HasPrefix(got, []byte(`{"status":"success"`)) {
						b.Fatal(string(got))
					}
				}
				after := liveHeap()
				b.ReportMetric(float64(after-before)/float64(n), "B/session")
				runtime.KeepAlive(e)
			}
		})
	}
}

// liveHeap is the heap's live bytes after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkScaling_asyncOutstanding is a curve of make bench's scaling
// section: the memory each asynchronous call takes while its answer
// waits to be collected, for 100 to 100,000 calls outstanding at once
// (echoes: each has run when it is measured, none collected yet).
func BenchmarkScaling_asyncOutstanding(b *testing.B) {
	for _, n := range []int{100, 1000, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				e := New(Options{})
				e.Configure([]byte("state_dir = \"\"\n[async]\nmax_running = 200000\nmax_pending = 200000\n"))
				req := []byte(`{"tool":"echo","arguments":{"message":"hello","n":42}}`)
				handles := make([]int64, n)
				before := liveHeap()
				for i := range handles {
					h, perr := e.Submit(req)
					if perr != nil {
						b.Fatal(perr)
					}
					handles[i] = h
				}
				for _, h := range handles {
					for {
						ready, perr := e.Ready(h)
						if perr != nil {
							b.Fatal(perr)
						}
						if ready {
							break
						}
						runtime.Gosched()
					}
				}
				after := liveHeap()
				b.ReportMetric(float64(after-before)/float64(n), "B/outstanding")
				for _, h := range handles {
					if out := e.Wait(context.Background(), h, -1); !bytes.HasPrefix(out, []byte(`{"status":"success"`)) {
						b.Fatal(string(out))
					}
				}
			}
		})
	}
}
