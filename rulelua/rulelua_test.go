package rulelua

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

type testHost struct {
	mu    sync.Mutex
	state map[string]any
	logs  []string
	calls []string
	tool  func(name string, args []byte) ([]byte, error)
}

func (h *testHost) StateGet(key string) (any, bool, error) {
	v, ok := h.state[key]
	return v, ok, nil
}

func (h *testHost) CallTool(ctx context.Context, name string, args []byte) ([]byte, error) {
	h.mu.Lock()
	h.calls = append(h.calls, name+" "+string(args))
	h.mu.Unlock()
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("no deadline on the tool context")
	}
	if h.tool != nil {
		return h.tool(name, args)
	}
	return []byte(`{"ok":true}`), nil
}

func (h *testHost) Log(level, message string) {
	h.mu.Lock()
	h.logs = append(h.logs, level+": "+message)
	h.mu.Unlock()
}

func mustCompile(t testing.TB, name, src string) *Script {
	t.Helper()
	s, err := Compile(name, src)
	if err != nil {
		t.Fatalf("Compile(%s): %v", name, err)
	}
	return s
}

func run(t testing.TB, src string, ctxValue map[string]any, host Host) (Result, error) {
	t.Helper()
	s := mustCompile(t, "test.lua", src)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // room for -race
	defer cancel()
	return s.Run(ctx, ctxValue, host)
}

func mustRun(t testing.TB, src string, ctxValue map[string]any, host Host) Result {
	t.Helper()
	res, err := run(t, src, ctxValue, host)
	if err != nil {
		t.Fatalf("Run(%q): %v", src, err)
	}
	return res
}

var seedCtx = map[string]any{
	"turn":    map[string]any{"token_usage": 0.85},
	"history": map[string]any{"tool_count": 7, "recent_tools": []any{"a", "b", "c"}},
	"event":   map[string]any{"name": "on_turn_start", "session": "s1"},
}

const seedRule = `return function(ctx) return ctx.turn.token_usage > 0.8 and ctx.history.tool_count > 5 end`

func TestRun_seedRule_bothForms(t *testing.T) {
	for _, src := range []string{seedRule, `return ctx.turn.token_usage > 0.8 and ctx.history.tool_count > 5`} {
		res := mustRun(t, src, seedCtx, nil)
		if res.Value != true {
			t.Errorf("%s: got %#v, want true", src, res.Value)
		}
		low := map[string]any{"turn": map[string]any{"token_usage": 0.5}, "history": map[string]any{"tool_count": 7}}
		if res := mustRun(t, src, low, nil); res.Value != false {
			t.Errorf("%s with low usage: got %#v, want false", src, res.Value)
		}
	}
}

func TestRun_valueConversion(t *testing.T) {
	cases := []struct {
		src  string
		want any
	}{
		{`return nil`, nil},
		{`return 1.5`, 1.5},
		{`return "x"`, "x"},
		{`return {1, 2, "three"}`, []any{1.0, 2.0, "three"}},
		{`return {a = 1, b = {true, false}}`, map[string]any{"a": 1.0, "b": []any{true, false}}},
		{`return {}`, map[string]any{}},
		{`return {[1] = "a", [3] = "c"}`, map[string]any{"1": "a", "3": "c"}},
		{`return ctx.turn`, map[string]any{"token_usage": 0.85}},
		{`return ctx.history.recent_tools`, []any{"a", "b", "c"}},
		{`return #ctx.history.recent_tools`, 3.0},
		{`local n = 0 for k, v in pairs(ctx.history) do n = n + 1 end return n`, 2.0},
		{`return ctx.missing`, nil},
		{`return type(ctx), ctx.event.name`, "userdata"},
	}
	for _, c := range cases {
		res := mustRun(t, c.src, seedCtx, nil)
		if !reflect.DeepEqual(res.Value, c.want) {
			t.Errorf("%s: got %#v, want %#v", c.src, res.Value, c.want)
		}
	}
}

func TestRun_ctxIsReadOnly(t *testing.T) {
	for _, src := range []string{
		`ctx.turn = 1`,
		`ctx.turn.token_usage = 1`,
		`rawset(ctx, "x", 1)`,
		`setmetatable(ctx, {})`,
	} {
		if _, err := run(t, src, seedCtx, nil); err == nil {
			t.Errorf("%s: no error", src)
		}
	}
	if seedCtx["turn"].(map[string]any)["token_usage"] != 0.85 {
		t.Fatal("ctx changed")
	}
	res := mustRun(t, `return getmetatable(ctx)`, seedCtx, nil)
	if res.Value != "locked" {
		t.Errorf("getmetatable(ctx) = %#v", res.Value)
	}
}

func TestRun_actions(t *testing.T) {
	h := &testHost{state: map[string]any{"count": 2.0}}
	res := mustRun(t, `
		notify("hello")
		notify("urgent", "high")
		state.set("count", state.get("count") + 1)
		state.set("seen", {a = {1, 2}})
		emit("custom.event", {x = 1})
		deny("nope")
		return state.get("count")`, nil, h)
	if res.Value != 3.0 {
		t.Errorf("state.get after state.set = %#v, want 3", res.Value)
	}
	want := []Action{
		{Type: "notify_self", Message: "hello", Priority: "normal"},
		{Type: "notify_self", Message: "urgent", Priority: "high"},
		{Type: "set_state", Key: "count", Value: 3.0},
		{Type: "set_state", Key: "seen", Value: map[string]any{"a": []any{1.0, 2.0}}},
		{Type: "emit_event", Event: "custom.event", Payload: map[string]any{"x": 1.0}},
		{Type: "deny", Reason: "nope"},
	}
	if !reflect.DeepEqual(res.Actions, want) {
		t.Errorf("actions:\n got %#v\nwant %#v", res.Actions, want)
	}
}

func TestRun_errorDiscardsActions(t *testing.T) {
	res, err := run(t, `notify("x") state.set("k", 1) error("boom")`, nil, &testHost{})
	if err == nil || len(res.Actions) != 0 {
		t.Fatalf("got %#v, %v; want no actions and an error", res, err)
	}
	var le *Error
	if !errors.As(err, &le) || le.Kind != KindRuntime || !strings.Contains(err.Error(), "test.lua:1: boom") || le.Line != 1 {
		t.Errorf("error = %v (%#v)", err, le)
	}
}

func TestRun_argumentErrors(t *testing.T) {
	cases := map[string]string{
		`notify()`:                  "bad argument #1 to 'notify' (string expected, got no value)",
		`notify({})`:                "bad argument #1 to 'notify' (string expected, got table)",
		`log("loud", "x")`:          "bad argument #1 to 'log'",
		`notify("x", "urgent")`:     "bad argument #2 to 'notify' (priority must be low, normal, high or critical, got 'urgent')",
		`emit("Bad Name")`:          "bad argument #1 to 'emit' (invalid event name",
		`emit("ok", {1, 2})`:        "bad argument #2 to 'emit'",
		`state.set("k", print)`:     "bad argument #2 to 'state.set' (cannot convert a function value)",
		`string.rep()`:              "bad argument #1 to 'rep'",
		`("x"):rep("y")`:            "bad argument #2 to 'rep' (number expected, got string)",
		`string.char(300)`:          "bad argument #1 to 'char' (invalid value)",
		`local x = nil .. "a"`:      "attempt to concatenate a nil value",
		`local t = {} t.x.y = 1`:    "test.lua:1:",
		`json.decode("{")`:          "json.decode:",
		`call_tool("x", "notatbl")`: "bad argument #2 to 'call_tool' (table expected, got string)",
	}
	for src, want := range cases {
		_, err := run(t, src, nil, &testHost{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to contain %q", src, err, want)
		}
	}
}

func TestRun_logAndPrint(t *testing.T) {
	h := &testHost{}
	mustRun(t, `print("a", 1, nil) log("warn", "careful")`, nil, h)
	want := []string{"info: a\t1\tnil", "warn: careful"}
	if !reflect.DeepEqual(h.logs, want) {
		t.Errorf("logs = %q, want %q", h.logs, want)
	}
	h = &testHost{}
	mustRun(t, `for i = 1, 1000 do log("info", "line " .. i) end`, nil, h)
	if len(h.logs) != 101 || !strings.Contains(h.logs[100], "log limit") {
		t.Errorf("got %d log lines (last %q), want 100 and a warning", len(h.logs), h.logs[len(h.logs)-1])
	}
}

func TestRun_callTool(t *testing.T) {
	h := &testHost{tool: func(name string, args []byte) ([]byte, error) {
		if name == "fail" {
			return nil, errors.New("tool exploded")
		}
		return []byte(`{"echo":` + string(args) + `}`), nil
	}}
	res := mustRun(t, `local r = call_tool("echo", {text = "hi", n = 2}) return r.echo.text .. r.echo.n`, nil, h)
	if res.Value != "hi2" {
		t.Errorf("got %#v", res.Value)
	}
	if len(h.calls) != 1 || h.calls[0] != `echo {"n":2,"text":"hi"}` {
		t.Errorf("calls = %q", h.calls)
	}
	_, err := run(t, `call_tool("fail", {})`, nil, h)
	if err == nil || !strings.Contains(err.Error(), "tool exploded") {
		t.Errorf("error = %v", err)
	}
	res = mustRun(t, `local ok, e = pcall(call_tool, "fail") return e`, nil, h)
	if s, _ := res.Value.(string); !strings.Contains(s, "tool exploded") {
		t.Errorf("pcall(call_tool) error = %#v", res.Value)
	}
	if _, err := run(t, `call_tool("x")`, nil, nil); err == nil || !strings.Contains(err.Error(), "no host") {
		t.Errorf("nil host: %v", err)
	}
}

func TestJSON_roundTrip(t *testing.T) {
	res := mustRun(t, `
		local s = json.encode({b = {1, 2, {c = "x<y>"}}, a = true, n = 1.5})
		local v = json.decode(s)
		return {s = s, back = v, again = json.encode(v) == s}`, nil, nil)
	m := res.Value.(map[string]any)
	if m["s"] != `{"a":true,"b":[1,2,{"c":"x<y>"}],"n":1.5}` || m["again"] != true {
		t.Errorf("got %#v", m)
	}
	data, err := EncodeJSON(m["back"])
	if err != nil || string(data) != m["s"] {
		t.Errorf("EncodeJSON = %s, %v", data, err)
	}
}

const wordCount = `
return function(args)
  local n = 0
  for _ in string.gmatch(args.text, "%S+") do n = n + 1 end
  return { words = n }
end
`

func TestCall_wordCount(t *testing.T) {
	s := mustCompile(t, "word_count", wordCount)
	res, err := s.Call(context.Background(), map[string]any{"text": "the quick  brown\tfox "}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Value, map[string]any{"words": 4.0}) {
		t.Errorf("got %#v", res.Value)
	}
	if _, err := mustCompile(t, "x", `return 1`).Call(context.Background(), nil, nil); err == nil {
		t.Error("Call of a chunk returning a number: no error")
	}
}

func TestCompile_errors(t *testing.T) {
	_, err := Compile("rules/x.lua", "local x = 1\nreturn x +")
	var le *Error
	if !errors.As(err, &le) || le.Kind != KindSyntax || !strings.HasPrefix(err.Error(), "lua: rules/x.lua:") {
		t.Errorf("syntax error = %v", err)
	}
	_, err = Compile("big.lua", "return "+strings.Repeat(" ", 300<<10)+"1")
	if !errors.Is(err, ErrLimit) {
		t.Errorf("big source: %v", err)
	}
	_, err = Compile("deep.lua", "return "+strings.Repeat("{", 1000)+"1"+strings.Repeat("}", 1000))
	if !errors.As(err, &le) || le.Kind != KindSyntax || !strings.Contains(err.Error(), "too many syntax levels") {
		t.Errorf("deep source: %v", err)
	}
	_, err = Compile("parens.lua", "return "+strings.Repeat("(", 1000)+"1"+strings.Repeat(")", 1000))
	if !errors.As(err, &le) || le.Kind != KindSyntax {
		t.Errorf("deep parentheses: %v", err)
	}
	mustCompile(t, "ok.lua", "return "+strings.Repeat("(", 150)+"1"+strings.Repeat(")", 150))
	a := mustCompile(t, "same.lua", "return 1")
	b := mustCompile(t, "same.lua", "return 1")
	if a.proto != b.proto {
		t.Error("prototype not cached")
	}
}

func TestRun_timeout(t *testing.T) {
	s := mustCompile(t, "loop.lua", `while true do end`)
	start := time.Now()
	_, err := s.Run(context.Background(), nil, nil)
	el := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || err.Error() != "lua: deadline of 50ms exceeded" {
		t.Errorf("err = %v", err)
	}
	if el < 50*time.Millisecond || el > 300*time.Millisecond {
		t.Errorf("took %v", el)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = s.Run(ctx, nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 250*time.Millisecond {
		t.Errorf("ctx deadline: %v after %v", err, time.Since(start))
	}
	ctx, cancel = context.WithCancel(context.Background())
	go func() { time.Sleep(5 * time.Millisecond); cancel() }()
	_, err = s.Run(ctx, nil, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancel: %v", err)
	}
}

func TestRun_isolation(t *testing.T) {
	s1 := mustCompile(t, "a.lua", `leaked = 42; _G.other = 1; string_x = string; return 1`)
	s2 := mustCompile(t, "b.lua", `return {leaked, other, rawget(_G, "leaked")}`)
	for i := 0; i < 20; i++ {
		if _, err := s1.Run(context.Background(), nil, nil); err != nil {
			t.Fatal(err)
		}
		res, err := s2.Run(context.Background(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res.Value, map[string]any{}) {
			t.Fatalf("second script sees %#v", res.Value)
		}
	}
}

func TestRun_concurrent(t *testing.T) {
	s := mustCompile(t, "seed", seedRule)
	// Eight goroutines on two cores under -race: a run may wait past the
	// 50 ms default for a core. This test is about sharing, not time.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				res, err := s.Run(ctx, seedCtx, nil)
				if err != nil || res.Value != true {
					errs <- fmt.Errorf("%v %v", res.Value, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// progressHost is a testHost that takes progress reports.
type progressHost struct {
	testHost
	reports []string
}

func (h *progressHost) Progress(done, total float64, message string) {
	h.reports = append(h.reports, fmt.Sprintf("%g/%g %s", done, total, message))
}

func TestRun_progress(t *testing.T) {
	h := &progressHost{}
	mustRun(t, `progress(1, 3, "one") progress(2, 3) progress(2.5) progress("3", 3, "three")`, nil, h)
	want := []string{"1/3 one", "2/3 ", "2.5/0 ", "3/3 three"}
	if !reflect.DeepEqual(h.reports, want) {
		t.Errorf("reports = %q, want %q", h.reports, want)
	}
	// A host that does not take progress, or none: the reports are dropped.
	mustRun(t, `progress(1, 2, "x") return true`, nil, &testHost{})
	mustRun(t, `progress(1, 2, "x") return true`, nil, nil)
	for src, msg := range map[string]string{
		`progress()`:                            "bad argument #1 to 'progress' (number expected, got no value)",
		`progress("x")`:                         "bad argument #1 to 'progress' (number expected, got string)",
		`progress(1, {})`:                       "bad argument #2 to 'progress' (number expected, got table)",
		`progress(1, 2, {})`:                    "bad argument #3 to 'progress' (string expected, got table)",
		`progress(0/0)`:                         "finite numbers",
		`progress(1, -1)`:                       "total not negative",
		`progress(1, 2, string.rep("x", 1025))`: "message longer than 1024 bytes",
	} {
		if _, err := run(t, src, nil, h); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: error %v, want %q", src, err, msg)
		}
	}
}
