package core_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/toolbox"
)

func register(t *testing.T, e *core.Engine, descriptor string, run toolbox.Func) {
	t.Helper()
	if err := e.RegisterTool([]byte(descriptor), toolbox.ToolOptions{Run: run}); err != nil {
		t.Fatal(err)
	}
}

func answer(out string) toolbox.Func {
	return func(context.Context, toolbox.Call) ([]byte, error) { return []byte(out), nil }
}

func TestPipeline_testMode(t *testing.T) {
	cases := []struct {
		name         string
		opts         core.Options
		config       string
		fetchSkipped bool
	}{
		{"off", core.Options{}, "", false},
		{"config", core.Options{}, "test_mode = true", true},
		{"environment", core.Options{TestMode: true}, "", true},
		{"allowed", core.Options{TestMode: true, TestAllow: true}, "test_mode = true", false},
	}
	for _, c := range cases {
		e := core.New(c.opts)
		if c.config != "" {
			e.Configure([]byte(c.config))
		}
		register(t, e, `{"name":"fetch","capabilities":["network"]}`, answer(`"fetched"`))
		register(t, e, `{"name":"write","capabilities":["fs_write"]}`, answer(`"written"`))
		register(t, e, `{"name":"run","capabilities":["exec"]}`, answer(`"ran"`))
		register(t, e, `{"name":"read","capabilities":["fs_read"]}`, answer(`"read"`))
		for _, tool := range []string{"fetch", "write", "run"} {
			got := string(e.Evaluate([]byte(`{"tool":"` + tool + `"}`)))
			skipped := `{"status":"success","tool":"` + tool + `","result":{"test_mode":true,"skipped":"` + tool + `"}}`
			if (got == skipped) != c.fetchSkipped {
				t.Errorf("%s: %s -> %s", c.name, tool, got)
			}
		}
		if got := string(e.Evaluate([]byte(`{"tool":"read"}`))); got != `{"status":"success","tool":"read","result":"read"}` {
			t.Errorf("%s: fs_read must always run: %s", c.name, got)
		}
	}
}

func TestPipeline_policyLayers(t *testing.T) {
	e := newEngine(t)
	register(t, e, `{"name":"a"}`, answer("1"))
	register(t, e, `{"name":"b"}`, answer("2"))
	cases := []struct{ in, want string }{
		{`{"tool":"a","policy":{"deny":["a"]}}`, `{"status":"error","error":"denied","message":"tool \"a\" denied by the policy of the request: its deny list names it"}`},
		// The request's allow list is what b may call, not b (issue 26 §4).
		{`{"tool":"b","policy":{"allow":["a"]}}`, `{"status":"success","tool":"b","result":2}`},
		{`{"tool":"a","policy":{"allow":["a"]}}`, `{"status":"success","tool":"a","result":1}`},
		{`{"tool":"a","policy":{"allow":"a"}}`, `{"status":"error","error":"invalid_request","message":"\"policy\" must be {\"allow\": [names], \"deny\": [names]}: \"allow\" must not be string"}`},
		{`{"tool":"a","policy":{"only":["a"]}}`, `{"status":"error","error":"invalid_request","message":"\"policy\" must be {\"allow\": [names], \"deny\": [names]}: unknown key \"only\""}`},
	}
	for _, c := range cases {
		if got := string(e.Evaluate([]byte(c.in))); got != c.want {
			t.Errorf("%s\n got %s\nwant %s", c.in, got, c.want)
		}
	}
	// A session narrows itself; it can never widen again.
	if got := string(e.Evaluate([]byte(`{"tool":"session_policy","session":"w1","arguments":{"deny":["b"]}}`))); got !=
		`{"status":"success","tool":"session_policy","result":{"session":"w1","allow":null,"deny":["b"]}}` {
		t.Errorf("session_policy: %s", got)
	}
	e.Evaluate([]byte(`{"tool":"session_policy","session":"w1","arguments":{"allow":["a","b","echo"]}}`))
	if got := string(e.Evaluate([]byte(`{"tool":"b","session":"w1"}`))); got !=
		`{"status":"error","error":"denied","message":"tool \"b\" denied by the policy of session \"w1\": its deny list names it"}` {
		t.Errorf("session policy not applied: %s", got)
	}
	if got := string(e.Evaluate([]byte(`{"tool":"b","session":"w2"}`))); got != `{"status":"success","tool":"b","result":2}` {
		t.Errorf("another session is affected: %s", got)
	}
	// The host's own session_policy is not a use of a tool the session's
	// allow list governs (issue 26 §4); it only ever narrows.
	if got := string(e.Evaluate([]byte(`{"tool":"session_policy","session":"w1","arguments":{"allow":["a","b","c","echo","session_policy"]}}`))); got !=
		`{"status":"success","tool":"session_policy","result":{"session":"w1","allow":["a","b","echo"],"deny":["b"]}}` {
		t.Errorf("the session could still widen itself: %s", got)
	}
	// Reset forgets session policies.
	e.Reset()
	register(t, e, `{"name":"b"}`, answer("2"))
	if got := string(e.Evaluate([]byte(`{"tool":"b","session":"w1"}`))); got != `{"status":"success","tool":"b","result":2}` {
		t.Errorf("after Reset: %s", got)
	}
}

// TestPipeline_auditEveryCall: every call leaves one record, whatever its
// outcome, and never the argument values.
func TestPipeline_auditEveryCall(t *testing.T) {
	// The ring orders records by time: give each call its own instant.
	var tick atomic.Int64
	e := core.New(core.Options{Now: func() time.Time { return fixed.Add(time.Duration(tick.Add(1)) * time.Microsecond) }})
	register(t, e, `{"name":"strict","input_schema":{"type":"object","required":["x"]}}`, answer("1"))
	e.Configure([]byte(`[policy]` + "\n" + `deny = ["get_time"]`))
	reqs := []string{
		`{"tool":"echo","arguments":{"secret":"hunter2"},"session":"s1"}`,
		`{"tool":"nope"}`,
		`{"tool":"get_time"}`,
		`{"tool":"strict","arguments":{}}`,
		`not json`,
	}
	for _, r := range reqs {
		e.Evaluate([]byte(r))
	}
	recs := e.Audit().Tail(10)
	var got []string
	for _, r := range recs {
		got = append(got, r.Session+"/"+r.Tool+"/"+string(r.Code))
		if strings.Contains(string(r.AppendJSON(nil)), "hunter2") {
			t.Error("an argument value reached the audit")
		}
	}
	want := "s1/echo/,default/nope/unknown_tool,default/get_time/denied,default/strict/invalid_args"
	if strings.Join(got, ",") != want {
		t.Errorf("audit:\n got %s\nwant %s", strings.Join(got, ","), want)
	}
	var line map[string]any
	if err := json.Unmarshal(recs[0].AppendJSON(nil), &line); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(`{"secret":"hunter2"}`))
	if line["args_sha256"] != hex.EncodeToString(sum[:]) || line["status"] != "success" || line["error"] != nil {
		t.Errorf("record %v", line)
	}
}

func TestPipeline_timeoutFromConfig(t *testing.T) {
	e := newEngine(t)
	e.Configure([]byte("[limits]\ntimeout_ms = 50"))
	register(t, e, `{"name":"slow"}`, func(ctx context.Context, _ toolbox.Call) ([]byte, error) {
		select {
		case <-time.After(2 * time.Second):
		case <-ctx.Done(): // a Go tool sees the deadline through its context
		}
		return []byte("1"), nil
	})
	start := time.Now()
	got := string(e.Evaluate([]byte(`{"tool":"slow"}`)))
	if got != `{"status":"error","error":"timeout","message":"tool \"slow\" ran past its timeout of 50 ms (running)"}` {
		t.Errorf("got %s", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("timeout answered after %v", d)
	}
}

// The built-in large_result rule notices a large result through the
// pipeline (past the quick test that skips building events for small ones).
func TestPipeline_large_result_notice(t *testing.T) {
	e := core.New(core.Options{})
	e.Configure([]byte(`state_dir = ""`))
	small := string(e.Evaluate([]byte(`{"tool":"echo","arguments":{"s":"x"}}`)))
	if strings.Contains(small, "notices") {
		t.Fatalf("small result got notices: %s", small)
	}
	big := string(e.Evaluate([]byte(`{"tool":"echo","arguments":{"s":"` + strings.Repeat("x", 40000) + `"}}`)))
	if !strings.Contains(big, `"notices":[{"rule":"large_result","message":"Tool echo returned 40008 bytes (more than 32768); consider narrowing the request.","priority":"normal","event":"on_tool_complete"}]`) {
		t.Fatalf("no large_result notice: %.200s ... %s", big, big[len(big)-300:])
	}
}

// A Lua tool's call reuses its request's state, its deadline context, the
// buffer its result is encoded in, and its arguments' tables and boxes:
// what it allocates is the copy of its arguments (no Lua string points into
// the caller's memory).
func TestEvaluate_luaTool_allocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under -race")
	}
	// One processor: the audit then has one shard, whose slots the warm-up
	// below fills (a slot's first record allocates its copies).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	e := core.New(core.Options{})
	if out := e.Configure([]byte("[[tools]]\nname = \"lua_echo\"\nlua = \"return function(args) return args end\"\n")); !bytes.HasPrefix(out, []byte(`{"status":"success"`)) {
		t.Fatal(string(out))
	}
	req := []byte(`{"tool":"lua_echo","arguments":{"city":"Lyon","country":"FR","days":3,"units":"metric","detailed":false}}`)
	buf := make([]byte, 0, 512)
	for range toolbox.AuditRingSize + 1 {
		buf = e.AppendEvaluate(buf[:0], req)
	}
	if n := testing.AllocsPerRun(2000, func() { buf = e.AppendEvaluate(buf[:0], req) }); n > 1.5 {
		t.Errorf("%.2f allocations per call, want 1", n)
	}
	if want := `{"status":"success","tool":"lua_echo","result":{"city":"Lyon","country":"FR","days":3,"detailed":false,"units":"metric"}}`; string(buf) != want {
		t.Fatalf("got %s, want %s", buf, want)
	}
}

// The echo reuses its request's state and a live session's name: a call
// allocates nothing on the Go heap, with or without a session. (An
// allocation per call made the collector run tens of times a second on the
// callers' cores.)
func TestEvaluate_echo_allocates_nothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under -race")
	}
	e := core.New(core.Options{})
	buf := make([]byte, 0, 512)
	for _, req := range [][]byte{
		[]byte(`{"tool":"echo","arguments":{"message":"hello","n":42}}`),
		[]byte(`{"tool":"echo","session":"s1","arguments":{"message":"hello","n":42}}`),
	} {
		buf = e.AppendEvaluate(buf[:0], req) // creates the session
		// A collection may empty the pool once in a while: well under one
		// allocation per call on average.
		if n := testing.AllocsPerRun(2000, func() { buf = e.AppendEvaluate(buf[:0], req) }); n >= 0.5 {
			t.Errorf("%s: %.2f allocations per call", req, n)
		}
		if !bytes.HasPrefix(buf, []byte(`{"status":"success","tool":"echo"`)) {
			t.Fatalf("%s: %s", req, buf)
		}
	}
}
