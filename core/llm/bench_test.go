package llm

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/protocol"
)

// benchHost is a Host that costs nothing: the engine's own cost is
// measured by the engine's benchmarks.
type benchHost struct{ specs []ToolSpec }

func (h benchHost) Catalog([]string) []ToolSpec { return h.specs }
func (benchHost) CallTool(_ context.Context, _ string, args []byte) ([]byte, *protocol.Error) {
	return args, nil
}
func (benchHost) Turn(context.Context, string, Turn) []string { return nil }
func (benchHost) Context() string                             { return "" }
func (benchHost) Progress(ProgressEvent)                      {}

var benchArgs = []byte(`{"prompt":"Echo hi","allow_tools":true}`)

func benchChat(b *testing.B) (*Chat, benchHost, func() [][]byte) {
	srv := serveScripts(b, "bench")
	ch := chatFor(b, srv, "bench", Config{Model: "test-model"}, nil, nil)
	h := benchHost{specs: []ToolSpec{{Name: "echo", Description: "Echo the arguments"}}}
	bodies := func() [][]byte {
		var out [][]byte
		for _, r := range srv.Received("bench") {
			out = append(out, r.Body)
		}
		return out
	}
	return ch, h, bodies
}

// BenchmarkChatTurn_oneToolCall is a whole chat: the model asks for a
// tool call, the tool runs, the model answers; two HTTP exchanges with
// the scripted server on loopback.
func BenchmarkChatTurn_oneToolCall(b *testing.B) {
	ch, h, _ := benchChat(b)
	ctx := context.Background()
	var out []byte
	var err error
	for b.Loop() {
		if out, err = ch.Run(ctx, h, "", benchArgs); err != nil {
			b.Fatal(err)
		}
	}
	if !strings.Contains(string(out), `"content":"The echo said hi."`) {
		b.Fatalf("%s", out)
	}
}

// BenchmarkChatTurn_bareHTTP makes the same two exchanges, the very
// bodies Clara sends, with a bare net/http client: the floor Clara's
// chat is compared with.
func BenchmarkChatTurn_bareHTTP(b *testing.B) {
	ch, h, bodies := benchChat(b)
	if _, err := ch.Run(context.Background(), h, "", benchArgs); err != nil {
		b.Fatal(err)
	}
	reqs := bodies()
	if len(reqs) != 2 {
		b.Fatalf("%d requests", len(reqs))
	}
	url := ch.cfg.BaseURL + "/chat/completions"
	client := &http.Client{}
	defer client.CloseIdleConnections()
	var last []byte
	for b.Loop() {
		for _, body := range reqs {
			resp, err := client.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			last, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("%d %v", resp.StatusCode, err)
			}
		}
	}
	if !bytes.Contains(last, []byte("The echo said hi.")) {
		b.Fatalf("%s", last)
	}
}

// BenchmarkChatTurn_vsBareHTTP alternates a chat turn and the bare
// exchanges, so that both see the same load on a shared machine, and
// reports the median of each (ns per turn) and their ratio.
func BenchmarkChatTurn_vsBareHTTP(b *testing.B) {
	ch, h, bodies := benchChat(b)
	ctx := context.Background()
	if _, err := ch.Run(ctx, h, "", benchArgs); err != nil {
		b.Fatal(err)
	}
	reqs := bodies()
	url := ch.cfg.BaseURL + "/chat/completions"
	client := &http.Client{}
	defer client.CloseIdleConnections()
	bare := func() {
		for _, body := range reqs {
			resp, err := client.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	clara := func() {
		if _, err := ch.Run(ctx, h, "", benchArgs); err != nil {
			b.Fatal(err)
		}
	}
	var tc, tb []time.Duration
	i := 0
	for b.Loop() {
		first, second, ft, st := clara, bare, &tc, &tb
		if i%2 == 1 {
			first, second, ft, st = bare, clara, &tb, &tc
		}
		i++
		t0 := time.Now()
		first()
		t1 := time.Now()
		second()
		*ft = append(*ft, t1.Sub(t0))
		*st = append(*st, time.Since(t1))
	}
	mc, mb := median(tc), median(tb)
	b.ReportMetric(float64(mc.Nanoseconds()), "clara-ns/turn")
	b.ReportMetric(float64(mb.Nanoseconds()), "bare-ns/turn")
	b.ReportMetric(float64(mc)/float64(mb), "ratio")
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkChatTurn_parallel runs chats from 4 goroutines per core at
// once; ns/op is the inverse of the throughput.
func BenchmarkChatTurn_parallel(b *testing.B) {
	ch, h, _ := benchChat(b)
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := ch.Run(context.Background(), h, "", benchArgs); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
