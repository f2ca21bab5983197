package core_test

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/llm/llmtest"
)

// The agent loop's rows of make bench (issue 11 §7): a chat with one tool
// call through the whole engine (policy, rules, validation, audit, turn
// events) against the scripted provider on loopback, beside the same two
// HTTP exchanges made by a bare net/http client; and chats from many
// goroutines at once.

const benchChatRequest = `{"tool":"chat","arguments":{"prompt":"Echo hi","allow_tools":true,"tools":["echo"]}}`

func benchChatEngine(b *testing.B) (*core.Engine, *llmtest.Server) {
	b.Helper()
	// By the source's own place: make bench runs the test binary from the
	// repository's root, go test from the package's folder.
	_, here, _, _ := runtime.Caller(0)
	sc, err := llmtest.LoadScript(filepath.Join(filepath.Dir(here), "..", "tests", "llm", "bench.toml"))
	if err != nil {
		b.Fatal(err)
	}
	srv, err := llmtest.NewServer("", sc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Close() })
	e := core.New(core.Options{})
	out := e.Configure([]byte(`{"state_dir":"","rules":{"paths":[]},"llm":{"base_url":"` + srv.BaseURL("bench") + `","model":"test-model"}}`))
	if !bytes.HasPrefix(out, []byte(`{"status":"success"`)) {
		b.Fatalf("%s", out)
	}
	return e, srv
}

func BenchmarkEvaluate_chatTurn(b *testing.B) {
	e, _ := benchChatEngine(b)
	var out []byte
	for b.Loop() {
		out = e.Evaluate([]byte(benchChatRequest))
	}
	if !strings.Contains(string(out), `"content":"The echo said hi."`) {
		b.Fatalf("%s", out)
	}
}

func BenchmarkEvaluate_chatBareHTTP(b *testing.B) {
	e, srv := benchChatEngine(b)
	e.Evaluate([]byte(benchChatRequest))
	var bodies [][]byte
	for _, r := range srv.Received("bench") {
		bodies = append(bodies, r.Body)
	}
	if len(bodies) != 2 {
		b.Fatalf("%d requests", len(bodies))
	}
	url := srv.BaseURL("bench") + "/chat/completions"
	client := &http.Client{}
	defer client.CloseIdleConnections()
	for b.Loop() {
		for _, body := range bodies {
			resp, err := client.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatal(resp.Status)
			}
		}
	}
}

// BenchmarkEvaluate_chatParallel runs chats from 8 goroutines per CPU at
// once: ns/op is the wall time per chat of the whole crowd.
func BenchmarkEvaluate_chatParallel(b *testing.B) {
	e, _ := benchChatEngine(b)
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if out := e.Evaluate([]byte(benchChatRequest)); !bytes.Contains(out, []byte(`"content":"The echo said hi."`)) {
				b.Errorf("%s", out)
				return
			}
		}
	})
}
