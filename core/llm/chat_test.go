package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/llm/llmtest"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// fakeHost is the engine's side of a chat, in memory: the provider is the
// real scripted server, the tools are these functions.
type fakeHost struct {
	specs   []ToolSpec
	tools   map[string]func(ctx context.Context, args []byte) ([]byte, *protocol.Error)
	notices map[string][]string // "on_turn_start/1" → what Turn answers then

	mu         sync.Mutex
	turns      []string
	turnVals   []Turn
	events     []ProgressEvent
	called     []string // "name args"
	running    int
	maxRunning int
	inProgress int // Progress calls running at once (must stay 1)
	context    string
}

const weatherSchema = `{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}`

func newFakeHost(names ...string) *fakeHost {
	h := &fakeHost{tools: map[string]func(context.Context, []byte) ([]byte, *protocol.Error){}, notices: map[string][]string{}}
	all := map[string]struct {
		desc, schema string
		run          func(ctx context.Context, args []byte) ([]byte, *protocol.Error)
	}{
		"get_current_weather": {"Get the current weather in a given location", weatherSchema, func(_ context.Context, args []byte) ([]byte, *protocol.Error) {
			var a struct{ Location string }
			json.Unmarshal(args, &a)
			return []byte(fmt.Sprintf(`{"location":%q,"temperature":"22","unit":"celsius"}`, a.Location)), nil
		}},
		"get_weather": {"Get the current weather in a given location", weatherSchema, func(context.Context, []byte) ([]byte, *protocol.Error) {
			return []byte(`"15 degrees"`), nil
		}},
		"get_time": {"The time in a time zone", `{"type":"object","properties":{"tz":{"type":"string"}},"required":["tz"]}`, func(_ context.Context, args []byte) ([]byte, *protocol.Error) {
			var a struct{ Tz string }
			json.Unmarshal(args, &a)
			return []byte(fmt.Sprintf(`{"tz":%q,"time":"12:00"}`, a.Tz)), nil
		}},
		"lookup": {"Look something up", "", func(context.Context, []byte) ([]byte, *protocol.Error) { return []byte(`[]`), nil }},
		"echo":   {"Echo the arguments", "", func(_ context.Context, args []byte) ([]byte, *protocol.Error) { return args, nil }},
		"fail": {"A tool that fails", "", func(context.Context, []byte) ([]byte, *protocol.Error) {
			return nil, protocol.Errorf(protocol.ToolFailed, "connection to the database password hunter2 rejected")
		}},
		"slow": {"A tool past its deadline", "", func(context.Context, []byte) ([]byte, *protocol.Error) {
			return nil, protocol.Errorf(protocol.Timeout, "tool \"slow\" ran past its timeout of 10 ms (running)")
		}},
		"forbidden": {"A tool policy refuses", "", func(context.Context, []byte) ([]byte, *protocol.Error) {
			return nil, protocol.Errorf(protocol.Denied, "forbidden is denied by the session policy")
		}},
		"explode": {"A tool whose call panics", "", func(context.Context, []byte) ([]byte, *protocol.Error) {
			panic("kaboom")
		}},
	}
	sort.Strings(names)
	for _, n := range names {
		t := all[n]
		h.specs = append(h.specs, ToolSpec{Name: n, Description: t.desc, InputSchema: json.RawMessage(t.schema)})
		h.tools[n] = t.run
	}
	return h
}

func (h *fakeHost) Catalog(names []string) []ToolSpec {
	if names == nil {
		return h.specs
	}
	var out []ToolSpec
	for _, s := range h.specs {
		for _, n := range names {
			if s.Name == n {
				out = append(out, s)
			}
		}
	}
	return out
}

func (h *fakeHost) CallTool(ctx context.Context, name string, args []byte) ([]byte, *protocol.Error) {
	h.mu.Lock()
	h.called = append(h.called, name+" "+string(args))
	h.running++
	h.maxRunning = max(h.maxRunning, h.running)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.running--
		h.mu.Unlock()
	}()
	run := h.tools[name]
	if run == nil {
		return nil, protocol.Errorf(protocol.UnknownTool, "Tool not found: %s", name)
	}
	return run(ctx, args)
}

func (h *fakeHost) Turn(ctx context.Context, event string, t Turn) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.turns = append(h.turns, fmt.Sprintf("%s %d", event, t.Number))
	h.turnVals = append(h.turnVals, t)
	return h.notices[fmt.Sprintf("%s/%d", event, t.Number)]
}

func (h *fakeHost) Progress(ev ProgressEvent) {
	h.mu.Lock()
	h.inProgress++
	if h.inProgress > 1 {
		panic("Progress called concurrently")
	}
	h.events = append(h.events, ev)
	h.mu.Unlock()
	h.mu.Lock()
	h.inProgress--
	h.mu.Unlock()
}

func (h *fakeHost) Context() string { return h.context }

func (h *fakeHost) eventLines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, ev := range h.events {
		if ev.Kind == ProgressToolResult {
			ev.DurationMS = 0
		}
		out = append(out, string(ev.AppendJSON(nil)))
	}
	return out
}

// chatFor builds a Chat for a script of srv.
func chatFor(t testing.TB, srv *llmtest.Server, script string, cfg Config, env map[string]string, logs *logLines) *Chat {
	t.Helper()
	o := ClientOptions{ImplicitHosts: []string{srv.URL()}, Getenv: func(k string) string { return env[k] }}
	if logs != nil {
		o.Logger = logging.New(logs.sink, logging.Debug)
	}
	c, err := NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg.BaseURL = srv.BaseURL(script)
	ch, err := NewChat(c, cfg, NewConversations(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// decodeResult reads a chat result, with arguments and durations
// normalised for comparison.
func decodeResult(t testing.TB, out []byte) chatResult {
	t.Helper()
	var r chatResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("result %s: %v", out, err)
	}
	for i := range r.ToolCalls {
		if r.ToolCalls[i].DurationMS < 0 {
			t.Errorf("negative duration in %s", out)
		}
		r.ToolCalls[i].DurationMS = 0
	}
	return r
}

func recordsString(recs []toolRecord) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s %s %s", r.Name, r.Arguments, r.Status)
		if r.Error != "" {
			fmt.Fprintf(&b, " (%s)", r.Error)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestChat_openAIDocumentedExample(t *testing.T) {
	srv := serveScripts(t, "openai_weather")
	var logs logLines
	env := map[string]string{"OPENAI_API_KEY": testKey}
	ch := chatFor(t, srv, "openai_weather", Config{Provider: ProviderOpenAI, Model: "gpt-4o-mini", APIKeyEnv: "OPENAI_API_KEY",
		ContextWindow: 1000, MaxToolCalls: 3}, env, &logs)
	h := newFakeHost("get_current_weather")
	out, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"What is the weather like in Boston today?","allow_tools":true}`))
	if err != nil {
		t.Fatal(err)
	}
	r := decodeResult(t, out)
	if r.Content != "It is 22 degrees Celsius and sunny in Boston today." || r.FinishReason != "stop" || r.Turns != 2 ||
		r.Usage != (Usage{PromptTokens: 203, CompletionTokens: 30, TotalTokens: 233}) {
		t.Fatalf("%s", out)
	}
	if got := recordsString(r.ToolCalls); got != "get_current_weather {\"location\":\"Boston, MA\"} success\n" {
		t.Fatalf("tool calls:\n%s", got)
	}
	if strings.Join(h.called, "|") != `get_current_weather {"location":"Boston, MA"}` {
		t.Fatalf("called %v", h.called)
	}
	if got := strings.Join(h.turns, ", "); got != "on_turn_start 1, on_turn_end 1, on_turn_start 2, on_turn_end 2" {
		t.Fatalf("turns: %s", got)
	}
	end1, end2 := h.turnVals[1], h.turnVals[3]
	if end1.TokenUsage != 0.099 || end1.Tokens.TotalTokens != 99 || end1.ToolCalls != 0 ||
		end2.TokenUsage != 0.134 || end2.Tokens.TotalTokens != 233 || end2.ToolCalls != 1 || h.turnVals[2].ToolCalls != 1 {
		t.Fatalf("turn values %+v", h.turnVals)
	}
	got := end2.Context()
	if got["number"] != 2 || got["tokens"].(map[string]any)["total"] != 233 || got["tool_calls"] != 1 {
		t.Fatalf("context.turn %v", got)
	}
	// The catalog went out in OpenAI's documented shape, with the key.
	rec := srv.Received("openai_weather")
	if !strings.Contains(string(rec[0].Body), `"tools":[{"type":"function","function":{"name":"get_current_weather","description":"Get the current weather in a given location","parameters":`+weatherSchema+`}}]`) {
		t.Errorf("first request: %s", rec[0].Body)
	}
	if !strings.Contains(string(rec[1].Body), `{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc123","type":"function","function":{"name":"get_current_weather","arguments":"{\n\"location\": \"Boston, MA\"\n}"}}]},{"role":"tool","content":"{\"location\":\"Boston, MA\",\"temperature\":\"22\",\"unit\":\"celsius\"}","tool_call_id":"call_abc123"}`) {
		t.Errorf("second request: %s", rec[1].Body)
	}
	if rec[0].Header.Get("Authorization") != "Bearer "+testKey {
		t.Errorf("Authorization %q", rec[0].Header.Get("Authorization"))
	}
	if text := string(out) + logs.all() + strings.Join(h.eventLines(), ""); strings.Contains(text, testKey) {
		t.Fatalf("the key shows: %s", text)
	}
}

func TestChat_anthropicDocumentedExample(t *testing.T) {
	srv := serveScripts(t, "anthropic_weather")
	env := map[string]string{"ANTHROPIC_API_KEY": testKey}
	ch := chatFor(t, srv, "anthropic_weather", Config{Provider: ProviderAnthropic, Model: "claude-3-opus-20240229",
		APIKeyEnv: "ANTHROPIC_API_KEY"}, env, nil)
	h := newFakeHost("get_weather")
	out, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"What is the weather like in San Francisco?","allow_tools":true,"max_tokens":1024}`))
	if err != nil {
		t.Fatal(err)
	}
	r := decodeResult(t, out)
	if r.Content != "The current weather in San Francisco is 15 degrees Celsius (59 degrees Fahrenheit). It's a cool day in the city by the bay!" ||
		r.FinishReason != "stop" || r.Turns != 2 || r.Usage != (Usage{PromptTokens: 436, CompletionTokens: 32, TotalTokens: 468}) {
		t.Fatalf("%s", out)
	}
	if got := recordsString(r.ToolCalls); got != "get_weather {\"location\":\"San Francisco, CA\",\"unit\":\"celsius\"} success\n" {
		t.Fatalf("tool calls:\n%s", got)
	}
	rec := srv.Received("anthropic_weather")
	if !strings.Contains(string(rec[0].Body), `"messages":[{"role":"user","content":"What is the weather like in San Francisco?"}],"tools":[{"name":"get_weather","description":"Get the current weather in a given location","input_schema":`+weatherSchema+`}]`) {
		t.Errorf("first request: %s", rec[0].Body)
	}
	if !strings.Contains(string(rec[1].Body), `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A09q90qw90lq917835lq9","content":"15 degrees"}]}`) {
		t.Errorf("second request: %s", rec[1].Body)
	}
	if rec[0].Header.Get("x-api-key") != testKey || rec[0].Header.Get("Authorization") != "" {
		t.Errorf("headers %v", rec[0].Header)
	}
}

func TestChat_streamingOpenAI(t *testing.T) {
	srv := serveScripts(t, "openai_stream_parallel")
	ch := chatFor(t, srv, "openai_stream_parallel", Config{Model: "test-model"}, nil, nil)
	h := newFakeHost("get_time", "lookup")
	// Both calls of the message must be running at once for either to end.
	var barrier sync.WaitGroup
	barrier.Add(2)
	h.tools["get_time"] = func(ctx context.Context, args []byte) ([]byte, *protocol.Error) {
		barrier.Done()
		barrier.Wait()
		var a struct{ Tz string }
		json.Unmarshal(args, &a)
		return []byte(fmt.Sprintf(`{"tz":%q}`, a.Tz)), nil
	}
	out, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"What time is it in Paris and in Tokyo?","allow_tools":true,"max_tool_calls":5,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	r := decodeResult(t, out)
	if r.Content != "It is 10:00 in Paris and 17:00 in Tokyo." || r.Usage != (Usage{190, 52, 242}) || r.Turns != 2 {
		t.Fatalf("%s", out)
	}
	if got := recordsString(r.ToolCalls); got != "get_time {\"tz\":\"Europe/Paris\"} success\nget_time {\"tz\":\"Asia/Tokyo\"} success\n" {
		t.Fatalf("tool calls:\n%s", got)
	}
	ev := h.eventLines()
	calls, results := ev[:2], ev[2:4]
	sort.Strings(results)
	want := []string{
		`{"event":"tool_call","tool":"get_time","arguments":{"tz":"Europe/Paris"}}`,
		`{"event":"tool_call","tool":"get_time","arguments":{"tz":"Asia/Tokyo"}}`,
		`{"event":"tool_result","tool":"get_time","status":"success","duration_ms":0,"result":{"tz":"Asia/Tokyo"}}`,
		`{"event":"tool_result","tool":"get_time","status":"success","duration_ms":0,"result":{"tz":"Europe/Paris"}}`,
		`{"event":"token","text":"It is 10:00 in Paris"}`,
		`{"event":"token","text":" and 17:00 in Tokyo."}`,
		`{"event":"answer","text":"It is 10:00 in Paris and 17:00 in Tokyo."}`,
		`{"event":"finished","status":"success","finish_reason":"stop","turns":2,"usage":{"prompt_tokens":190,"completion_tokens":52,"total_tokens":242}}`,
	}
	got := append(append(calls, results...), ev[4:]...)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s", strings.Join(ev, "\n"))
	}
	if h.maxRunning != 2 {
		t.Fatalf("%d calls ran at once", h.maxRunning)
	}
}

func TestChat_streamingAnthropic(t *testing.T) {
	srv := serveScripts(t, "anthropic_stream_tools")
	ch := chatFor(t, srv, "anthropic_stream_tools", Config{Provider: ProviderAnthropic, Model: "claude-test", ContextWindow: 2000}, nil, nil)
	h := newFakeHost("get_time", "lookup")
	out, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"What time is it in Paris and in Tokyo?","system":"You are terse.","allow_tools":true,"max_tool_calls":2,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	r := decodeResult(t, out)
	if r.Content != "10:00 in Paris, 17:00 in Tokyo." || r.Usage != (Usage{1092, 104, 1196}) || r.Turns != 2 {
		t.Fatalf("%s", out)
	}
	if got := recordsString(r.ToolCalls); got != "get_time {\"tz\":\"Europe/Paris\"} success\nget_time {\"tz\":\"Asia/Tokyo\"} success\n" {
		t.Fatalf("tool calls:\n%s", got)
	}
	var tokens []string
	for _, e := range h.events {
		if e.Kind == ProgressToken {
			tokens = append(tokens, e.Text)
		}
	}
	if strings.Join(tokens, "|") != "Checking |both clocks.|10:00 in Paris, |17:00 in Tokyo." {
		t.Fatalf("tokens %q", tokens)
	}
	if u := h.turnVals[1].TokenUsage; u != float64(561)/2000 {
		t.Fatalf("token_usage %v", u)
	}
}

func TestChat_badToolCalls(t *testing.T) {
	srv := serveScripts(t, "openai_bad_calls")
	ch := chatFor(t, srv, "openai_bad_calls", Config{Model: "test-model", MaxToolCalls: 3}, nil, nil)
	h := newFakeHost("get_time", "lookup")
	out, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"Time?","allow_tools":true}`))
	if err != nil {
		t.Fatal(err)
	}
	r := decodeResult(t, out)
	want := "get_time \"{tz: Paris\" invalid_args (the arguments are not JSON: expected a string key, got character 't' at byte 1)\n" +
		"launch_missiles {} unknown_tool (no tool named \"launch_missiles\" is available; continue without it)\n" +
		"get_time {\"tz\":\"UTC\"} success\n"
	if got := recordsString(r.ToolCalls); got != want || r.Content != "It is noon UTC." {
		t.Fatalf("%s\n%s", got, out)
	}
	if strings.Join(h.called, "|") != `get_time {"tz":"UTC"}` {
		t.Fatalf("called %v", h.called)
	}
}

func TestChat_toolFailuresAndFallback(t *testing.T) {
	srv := serveScripts(t, "openai_tool_failures")
	var logs logLines
	ch := chatFor(t, srv, "openai_tool_failures", Config{Model: "test-model"}, nil, &logs)
	h := newFakeHost("fail", "slow", "forbidden")
	out, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"Try the tools.","allow_tools":true,"max_tool_calls":4}`))
	if err != nil {
		t.Fatal(err)
	}
	r := decodeResult(t, out)
	want := "fail {} tool_failed (connection to the database password hunter2 rejected)\n" +
		"slow {} timeout (tool \"slow\" ran past its timeout of 10 ms (running))\n" +
		"forbidden {} denied (forbidden is denied by the session policy)\n" +
		"fail {} tool_failed (connection to the database password hunter2 rejected)\n"
	if got := recordsString(r.ToolCalls); got != want {
		t.Fatalf("%s", got)
	}
	if r.Content != "I could not reach any tool; from memory, it is about noon." || r.Turns != 3 {
		t.Fatalf("%s", out)
	}
}

func TestChat_budgetAnthropic(t *testing.T) {
	srv := serveScripts(t, "anthropic_budget")
	ch := chatFor(t, srv, "anthropic_budget", Config{Provider: ProviderAnthropic, Model: "claude-test", MaxToolCalls: 1}, nil, nil)
	h := newFakeHost("get_time")
	out, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"Time?","allow_tools":true}`))
	if err != nil {
		t.Fatal(err)
	}
	r := decodeResult(t, out)
	want := "get_time {\"tz\":\"UTC\"} success\n" +
		"get_time {\"tz\":\"Europe/Oslo\"} limit_exceeded (the chat's budget of tool calls is spent (max_tool_calls = 1); answer without more tool calls)\n"
	if got := recordsString(r.ToolCalls); got != want || r.Content != "It is noon UTC." {
		t.Fatalf("%s\n%s", got, out)
	}
}

func TestChat_retriesAndReset(t *testing.T) {
	srv := serveScripts(t, "retry", "reset_then_ok")
	ch := chatFor(t, srv, "retry", Config{Model: "test-model"}, nil, nil)
	out, err := ch.Run(context.Background(), newFakeHost(), "", []byte(`{"prompt":"Hello?"}`))
	if err != nil || decodeResult(t, out).Content != "Hello." {
		t.Fatalf("%s %v", out, err)
	}
	ch = chatFor(t, srv, "reset_then_ok", Config{Provider: ProviderAnthropic, Model: "claude-test"}, nil, nil)
	out, err = ch.Run(context.Background(), newFakeHost(), "", []byte(`{"prompt":"Are you there?"}`))
	if err != nil || decodeResult(t, out).Content != "Still here." {
		t.Fatalf("%s %v", out, err)
	}
}

func TestChat_modelFailures(t *testing.T) {
	srv := serveScripts(t, "error_500", "slow", "dropped_stream")
	env := map[string]string{"OPENAI_API_KEY": testKey}
	var logs logLines

	ch := chatFor(t, srv, "error_500", Config{Model: "m", APIKeyEnv: "OPENAI_API_KEY"}, env, &logs)
	_, err := ch.Run(context.Background(), newFakeHost(), "", []byte(`{"prompt":"Hi"}`))
	pe := protoErr(t, err, protocol.ToolFailed)
	if !strings.HasPrefix(pe.Message, "model: POST "+srv.BaseURL("error_500")+"/chat/completions answered status 500 Internal Server Error: ") ||
		!strings.Contains(pe.Message, "checking key [redacted]") || strings.Contains(pe.Message+logs.all(), testKey) {
		t.Fatalf("message %q", pe.Message)
	}

	ch = chatFor(t, srv, "slow", Config{Model: "m", Timeout: 100 * time.Millisecond}, nil, nil)
	_, err = ch.Run(context.Background(), newFakeHost(), "", []byte(`{"prompt":"Hi"}`))
	pe = protoErr(t, err, protocol.Timeout)
	if !strings.Contains(pe.Message, "no complete answer within 100 ms") {
		t.Fatalf("message %q", pe.Message)
	}

	ch = chatFor(t, srv, "dropped_stream", Config{Model: "m"}, nil, nil)
	h := newFakeHost()
	_, err = ch.Run(context.Background(), h, "", []byte(`{"prompt":"Tell me a story","stream":true}`))
	pe = protoErr(t, err, protocol.ToolFailed)
	if !strings.Contains(pe.Message, "the connection dropped while reading the answer") {
		t.Fatalf("message %q", pe.Message)
	}
}

// A server that ignores "stream": true and answers JSON is read anyway.
func TestChat_streamAnsweredWithJSON(t *testing.T) {
	script, err := llmtest.ParseScript("nostream", []byte(`provider = "anthropic"
[[exchange]]
expect.stream = true
reply.json = '{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"Whole."}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":2}}'
`))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := llmtest.NewServer("", script)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ch := chatFor(t, srv, "nostream", Config{Provider: ProviderAnthropic, Model: "c"}, nil, nil)
	h := newFakeHost()
	out, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"hi","stream":true}`))
	if err != nil || decodeResult(t, out).Content != "Whole." || decodeResult(t, out).Usage.TotalTokens != 5 {
		t.Fatalf("%s %v", out, err)
	}
	if got := h.eventLines(); strings.Join(got, "") != `{"event":"token","text":"Whole."}{"event":"answer","text":"Whole."}`+
		`{"event":"finished","status":"success","finish_reason":"stop","turns":1,"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}` {
		t.Fatalf("%v", got)
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestChat_noticesReachTheModel(t *testing.T) {
	srv := serveScripts(t, "notices")
	ch := chatFor(t, srv, "notices", Config{Model: "m", ContextWindow: 1000}, nil, nil)
	h := newFakeHost("get_time")
	h.notices["on_turn_start/1"] = []string{"Notice at the start of turn 1."}
	h.notices["on_turn_end/1"] = []string{"Token budget: 90% of the context is used."}
	out, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"Time?","allow_tools":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if decodeResult(t, out).Content != "Wrapping up: it is noon." {
		t.Fatalf("%s", out)
	}
	if u := []float64{h.turnVals[0].TokenUsage, h.turnVals[1].TokenUsage, h.turnVals[2].TokenUsage, h.turnVals[3].TokenUsage}; fmt.Sprint(u) != "[0 0.9 0.9 0.97]" {
		t.Fatalf("token_usage %v", u)
	}
	body := string(srv.Received("notices")[1].Body)
	if !strings.Contains(body, `{"role":"tool","content":"{\"tz\":\"UTC\",\"time\":\"12:00\"}","tool_call_id":"call_n"},{"role":"system","content":"Token budget: 90% of the context is used."}`) {
		t.Fatalf("second request: %s", body)
	}
}

func TestChat_sessionConversation(t *testing.T) {
	srv := serveScripts(t, "session")
	ch := chatFor(t, srv, "session", Config{Provider: ProviderAnthropic, Model: "claude-test"}, nil, nil)
	h := newFakeHost()
	if _, err := ch.Run(context.Background(), h, "s1", []byte(`{"prompt":"My name is Ada."}`)); err != nil {
		t.Fatal(err)
	}
	out, err := ch.Run(context.Background(), h, "s1", []byte(`{"prompt":"What is my name?"}`))
	if err != nil || decodeResult(t, out).Content != "Your name is Ada." {
		t.Fatalf("%s %v", out, err)
	}
	if got := h.turns[len(h.turns)-1]; got != "on_turn_end 2" {
		t.Fatalf("the turn number does not go on across the session's chats: %s", got)
	}
	if ch.convs.Len() != 1 {
		t.Fatalf("%d conversations", ch.convs.Len())
	}
	ch.convs.Forget("s1")
	if ch.convs.Len() != 0 {
		t.Fatal("Forget kept the conversation")
	}
}

// A session whose history holds tool calls, continued by a chat without
// tools: Anthropic refuses tool blocks without tools described, so the
// earlier calls go as text.
func TestChat_sessionToolHistoryWithoutTools(t *testing.T) {
	script, err := llmtest.ParseScript("hist", []byte(`provider = "anthropic"
[[exchange]]
expect.tools = ["get_time"]
reply.json = '{"id":"m1","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_h","name":"get_time","input":{"tz":"UTC"}}],"stop_reason":"tool_use"}'
[[exchange]]
expect.tool_results = [{ id = "toolu_h", contains = "12:00" }]
reply.json = '{"id":"m2","type":"message","role":"assistant","content":[{"type":"text","text":"Noon."}],"stop_reason":"end_turn"}'
[[exchange]]
expect.no_tools = true
expect.messages = 5
expect.contains = ['[called tool get_time with {\"tz\":\"UTC\"}]', '[tool get_time answered: {\"tz\":\"UTC\",\"time\":\"12:00\"}]']
expect.not_contains = ["tool_use", "tool_result"]
expect.last_user = "And in an hour?"
reply.json = '{"id":"m3","type":"message","role":"assistant","content":[{"type":"text","text":"One."}],"stop_reason":"end_turn"}'
`))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := llmtest.NewServer("", script)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ch := chatFor(t, srv, "hist", Config{Provider: ProviderAnthropic, Model: "c"}, nil, nil)
	h := newFakeHost("get_time")
	if _, err := ch.Run(context.Background(), h, "s", []byte(`{"prompt":"Time?","allow_tools":true}`)); err != nil {
		t.Fatal(err)
	}
	out, err := ch.Run(context.Background(), h, "s", []byte(`{"prompt":"And in an hour?"}`))
	if err != nil || decodeResult(t, out).Content != "One." {
		t.Fatalf("%s %v", out, err)
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestChat_badArguments(t *testing.T) {
	srv := serveScripts(t)
	ch := chatFor(t, srv, "none", Config{}, nil, nil)
	for args, want := range map[string]string{
		`{"prompt":"x","colour":"red"}`:                           `chat: unknown field "colour"`,
		`{"system":"x"}`:                                          "chat: give a prompt or messages",
		`{"messages":[{"role":"tool","content":"x"}]}`:            `chat: messages[0].role must be system, user or assistant, not "tool"`,
		`{"prompt":"x","max_tool_calls":-1}`:                      "chat: max_tool_calls must be between 0 and 256",
		`{"prompt":"x","temperature":3}`:                          "chat: temperature must be between 0 and 2",
		`{"prompt":"x","max_tokens":0}`:                           "chat: max_tokens must be 1 or more",
		`{"prompt":"x"}`:                                          "chat: no model: set llm.model or give model",
		`{"prompt":3}`:                                            "chat: prompt must be a string",
		`[1]`:                                                     "chat: the arguments must be a JSON object",
		`{"prompt":"x","model":"m","messages":"not list"}`:        "chat: messages must be an array of {role, content}",
		`{"prompt":"x","prompt":"y"}`:                             `chat: "prompt" is given twice`,
		`{"messages":[{"role":"user"}]}`:                          "chat: messages[0].content is missing",
		`{"messages":[{"role":"user","content":"x","name":"n"}]}`: `chat: messages[0]: unknown field "name"`,
		`{"prompt":"x","max_tool_calls":1.5}`:                     "chat: max_tool_calls must be an integer",
		`{"prompt":"x","tools":["a",2]}`:                          "chat: tools[1] must be a string",
		`{"prompt":"x","stream":"yes"}`:                           "chat: stream must be true or false",
		`{"prompt":"x"`:                                           "chat: the arguments are not JSON: offset 13: expected ',' or '}', found the end",
	} {
		_, err := ch.Run(context.Background(), newFakeHost(), "", []byte(args))
		pe := protoErr(t, err, protocol.InvalidArgs)
		if pe.Message != want {
			t.Errorf("%s: %q, want %q", args, pe.Message, want)
		}
	}
	an := chatFor(t, srv, "none", Config{Provider: ProviderAnthropic, Model: "c"}, nil, nil)
	_, err := an.Run(context.Background(), newFakeHost(), "", []byte(`{"prompt":"x","temperature":1.5}`))
	if pe := protoErr(t, err, protocol.InvalidArgs); pe.Message != "chat: temperature must be between 0 and 1 for Anthropic" {
		t.Errorf("%q", pe.Message)
	}
	if _, err := NewChat(newTestClient(t, ClientOptions{}), Config{Provider: "cohere", BaseURL: "http://x"}, nil); err == nil {
		t.Error("provider cohere accepted")
	}
	if _, err := NewChat(newTestClient(t, ClientOptions{}), Config{BaseURL: "localhost:8080"}, nil); err == nil {
		t.Error("a base_url without a scheme accepted")
	}
}

// The chat tool's schema compiles, and agrees with the loop's own checks.
func TestChatInputSchema(t *testing.T) {
	tool, err := toolbox.NewTool(toolbox.Descriptor{Name: "chat", InputSchema: json.RawMessage(ChatInputSchema)},
		toolbox.ToolOptions{Run: func(context.Context, toolbox.Call) ([]byte, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	for args, ok := range map[string]bool{
		`{"prompt":"hi","allow_tools":true,"tools":["a"],"max_tool_calls":3,"stream":true,"temperature":0.2,"max_tokens":10}`: true,
		`{"messages":[{"role":"user","content":"hi"}],"system":"s","model":"m"}`:                                              true,
		`{"system":"s"}`:                               false,
		`{"prompt":"hi","colour":"red"}`:               false,
		`{"prompt":"hi","max_tool_calls":1000}`:        false,
		`{"messages":[{"role":"tool","content":"x"}]}`: false,
	} {
		perr := tool.Validate([]byte(args))
		_, aerr := parseChatArgs([]byte(args))
		if (perr == nil) != ok || (aerr == nil) != ok {
			t.Errorf("%s: schema %v, loop %v", args, perr, aerr)
		}
	}
}

func TestChat_toolPanicIsInternal(t *testing.T) {
	script, err := llmtest.ParseScript("panic", []byte(`provider = "openai"
[[exchange]]
reply.json = '{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_x","type":"function","function":{"name":"explode","arguments":"{}"}}]}}]}'
[[exchange]]
expect.tool_results = [{ id = "call_x", content = '{"error":"internal"}', is_error = true }]
expect.not_contains = ["kaboom"]
reply.json = '{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"The tool broke."}}]}'
`))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := llmtest.NewServer("", script)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var logs logLines
	ch := chatFor(t, srv, "panic", Config{Model: "m"}, nil, &logs)
	out, err := ch.Run(context.Background(), newFakeHost("explode"), "", []byte(`{"prompt":"Go","allow_tools":true}`))
	if err != nil || decodeResult(t, out).ToolCalls[0].Status != "internal" {
		t.Fatalf("%s %v", out, err)
	}
	if !strings.Contains(logs.all(), "kaboom") {
		t.Errorf("the panic was not logged: %s", logs.all())
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
	}
}

// 64 chats from 8 goroutines, each one tool call and an answer.
func TestChat_concurrentChats(t *testing.T) {
	srv := serveScripts(t, "bench")
	ch := chatFor(t, srv, "bench", Config{Model: "test-model"}, nil, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				session := ""
				if i%2 == 1 {
					session = fmt.Sprintf("g%d-%d", g, i) // a fresh conversation each time: turn 0 of the script
				}
				out, err := ch.Run(context.Background(), newFakeHost("echo"), session, []byte(`{"prompt":"Echo hi","allow_tools":true}`))
				if err == nil && !strings.Contains(string(out), `"content":"The echo said hi."`) {
					err = errors.New(string(out))
				}
				if err != nil {
					errs <- err
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

func TestConversations_boundsAndOrder(t *testing.T) {
	msgs := []message{{Role: roleUser}, {Role: roleAssistant}, {Role: roleUser}, {Role: roleAssistant, ToolCalls: []toolCall{{}}},
		{Role: roleTool}, {Role: roleAssistant}}
	if got := trimHistory(msgs, 3); len(got) != 0 {
		t.Fatalf("kept %v: the tail starts with a tool answer and holds no user message", got)
	}
	if got := trimHistory(msgs, 4); len(got) != 4 || got[0].Role != roleUser {
		t.Fatalf("kept %v", got)
	}
	c := NewConversations(10, 2)
	for _, s := range []string{"a", "b", "c"} {
		conv, err := c.acquire(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		c.release(conv)
	}
	if c.Len() != 2 || c.m["a"] != nil {
		t.Fatalf("the least recently used conversation was kept: %v", c.m)
	}
	// A second chat of a session waits for the first.
	conv, _ := c.acquire(context.Background(), "b")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.acquire(ctx, "b"); err == nil {
		t.Fatal("two chats of one session held it at once")
	}
	c.release(conv)
}

func TestSSEReader(t *testing.T) {
	in := ": a comment\r\nevent: one\r\ndata: {\"a\":\r\ndata:1}\r\n\r\n" +
		"data: two\rid: 7\r\r" +
		"event: ignored-without-data\n\n" +
		"data:three\n\ndata: cut at the end"
	r := newSSEReader(strings.NewReader(in), 1024)
	var got []string
	for {
		ev, err := r.next()
		if err != nil {
			break
		}
		got = append(got, ev.name+"="+string(ev.data))
	}
	if strings.Join(got, "|") != "one={\"a\":\n1}|=two|=three" {
		t.Fatalf("%q", got)
	}
}

func TestChat_resultSchemaSetResultAndFinish(t *testing.T) {
	srv := serveScripts(t, "openai_result")
	ch := chatFor(t, srv, "openai_result", Config{Provider: ProviderOpenAI, Model: "test-model", MaxToolCalls: 6}, nil, nil)
	// A tool of the catalog named like an own tool is not offered beside it.
	h := newFakeHost("get_current_weather", "echo")
	h.specs[0].Name = "finish"
	out, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"Weather in Boston?","allow_tools":true,`+
		`"tools":["get_current_weather","finish"],`+
		`"result_schema":{"type":"object","properties":{"city":{"type":"string"},"temp":{"type":"integer"}},"required":["city","temp"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	r := decodeResult(t, out)
	if string(r.Result) != `{"city":"Boston","temp":22}` || r.FinishReason != "finish" || r.Content != "Boston: 22 degrees." || r.Turns != 4 {
		t.Fatalf("%s", out)
	}
	want := `get_current_weather {"location":"Boston, MA"} success
set_result {"value":{"city":"Boston","temp":"22"}} invalid_args (the value does not match result_schema: at /temp: got string, want integer)
finish {} invalid_args (the result is not set: call set_result with a value that matches its schema, then finish)
set_result {"value":{"city":"Boston","temp":22}} success
finish {} success
`
	if got := recordsString(r.ToolCalls); got != want {
		t.Fatalf("tool calls:\n%s", got)
	}
	if strings.Join(h.called, "|") != `get_current_weather {"location":"Boston, MA"}` {
		t.Fatalf("the host ran %v: the own tools are the loop's", h.called)
	}
	if !strings.Contains(string(out), `"result":{"city":"Boston","temp":22},"tool_calls"`) {
		t.Fatalf("the envelope's shape: %s", out)
	}
	lines := h.eventLines()
	if lines[len(lines)-2] != `{"event":"answer","text":"Boston: 22 degrees."}` ||
		lines[len(lines)-1] != `{"event":"finished","status":"success","finish_reason":"finish","turns":4,"usage":{"prompt_tokens":600,"completion_tokens":58,"total_tokens":658}}` ||
		!strings.Contains(strings.Join(lines, "\n"), `{"event":"tool_result","tool":"set_result","status":"invalid_args","duration_ms":0,"message":"the value does not match result_schema: at /temp: got string, want integer"}`) {
		t.Fatalf("events:\n%s", strings.Join(lines, "\n"))
	}
}

func TestChat_resultSchemaReminderAnthropic(t *testing.T) {
	srv := serveScripts(t, "anthropic_result")
	ch := chatFor(t, srv, "anthropic_result", Config{Provider: ProviderAnthropic, Model: "claude-test", MaxToolCalls: 3}, nil, nil)
	h := newFakeHost("get_time")
	// allow_tools is off: the model gets the own tools only.
	out, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"Pick a prime number below 10.","result_schema":{"enum":[2,3,5,7]}}`))
	if err != nil {
		t.Fatal(err)
	}
	r := decodeResult(t, out)
	if string(r.Result) != `7` || r.FinishReason != "stop" || r.Content != "Seven." || r.Turns != 3 {
		t.Fatalf("%s", out)
	}
	if len(h.called) != 0 {
		t.Fatalf("host called: %v", h.called)
	}
}

func TestChat_resultSchemaNoResultFails(t *testing.T) {
	srv := serveScripts(t, "openai_no_result")
	ch := chatFor(t, srv, "openai_no_result", Config{Provider: ProviderOpenAI, Model: "test-model", MaxToolCalls: 3}, nil, nil)
	_, err := ch.Run(context.Background(), newFakeHost(), "", []byte(`{"prompt":"A prime below 10?","max_tool_calls":1,"result_schema":{"enum":[2,3,5,7]}}`))
	var perr *protocol.Error
	if !errors.As(err, &perr) || perr.Code != protocol.ToolFailed || !strings.Contains(perr.Message, "without setting a result that matches result_schema") {
		t.Fatalf("%v", err)
	}
}

func TestChat_resultSchemaBadSchemas(t *testing.T) {
	ch, err := NewChat(&Client{}, Config{Provider: ProviderOpenAI, BaseURL: "http://127.0.0.1:9", Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]string{
		`{"prompt":"x","result_schema":"string"}`:                   "result_schema must be a JSON Schema object",
		`{"prompt":"x","result_schema":{"type":"wat"}}`:             "invalid result_schema: at /type",
		`{"prompt":"x","result_schema":{"$ref":"http://x.test/s"}}`: "external $ref",
		`{"prompt":"x","result_schema":{"minimum":"three"}}`:        "invalid result_schema",
		`{"prompt":"x","result_schema":{},"result_schema":{}}`:      `"result_schema" is given twice`,
	} {
		_, err := ch.Run(context.Background(), newFakeHost(), "", []byte(args))
		var perr *protocol.Error
		if !errors.As(err, &perr) || perr.Code != protocol.InvalidArgs || !strings.Contains(perr.Message, want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}

func TestOwnTools_setResult(t *testing.T) {
	o, specs, perr := newOwnTools([]byte(`{"$defs":{"n":{"type":"integer"}},"type":"array","items":{"$ref":"#/$defs/n"}}`))
	if perr != nil {
		t.Fatal(perr)
	}
	// $defs are lifted so that the model's schema still resolves.
	if got := string(specs[1].InputSchema); got != `{"$defs":{"n":{"type":"integer"}},"additionalProperties":false,"properties":{"value":{"items":{"$ref":"#/$defs/n"},"type":"array"}},"required":["value"],"type":"object"}` {
		t.Fatalf("set_result schema %s", got)
	}
	for args, want := range map[string]string{
		`{"value":[1,"2"]}`:          "at /1: got string, want integer",
		`{}`:                         "set_result takes one argument, value",
		`{"value":[1],"extra":true}`: "set_result takes one argument, value; not extra",
		`{"value":[1],"value":[2]}`:  "duplicate key",
	} {
		if _, perr := o.call(ToolSetResult, []byte(args)); perr == nil || perr.Code != protocol.InvalidArgs || !strings.Contains(perr.Message, want) {
			t.Errorf("%s: %v, want %q", args, perr, want)
		}
	}
	if o.result != nil {
		t.Fatalf("a bad value was kept: %s", o.result)
	}
	if _, perr := o.call(ToolSetResult, []byte(`{"value":[1, 2]}`)); perr != nil || string(o.result) != `[1,2]` {
		t.Fatalf("%v %s", perr, o.result)
	}
	if _, perr := o.call(ToolFinish, []byte(`{}`)); perr != nil || !o.finished {
		t.Fatalf("%v", perr)
	}
}

func TestChat_resultSchemaOwnCallsAreCapped(t *testing.T) {
	srv := serveScripts(t, "openai_result_cap")
	ch := chatFor(t, srv, "openai_result_cap", Config{Provider: ProviderOpenAI, Model: "test-model", MaxToolCalls: 1}, nil, nil)
	_, err := ch.Run(context.Background(), newFakeHost(), "", []byte(`{"prompt":"A prime?","result_schema":{"type":"integer"}}`))
	var perr *protocol.Error
	if !errors.As(err, &perr) || perr.Code != protocol.ToolFailed {
		t.Fatalf("%v", err)
	}
	rec := srv.Received("openai_result_cap")
	if len(rec) != ownCallsCap+1 {
		t.Fatalf("%d model calls, want %d", len(rec), ownCallsCap+1)
	}
	if last := string(rec[len(rec)-1].Body); strings.Contains(last, `"tools"`) {
		t.Fatalf("the last call offers tools: %s", last)
	}
}

// scriptServer serves one script given as text.
func scriptServer(t *testing.T, name, text string) *llmtest.Server {
	t.Helper()
	script, err := llmtest.ParseScript(name, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := llmtest.NewServer("", script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// Tool call arguments deeper than limits.max_depth are refused before any
// tool sees them, and the result carries them as a string (issue 25,
// finding 18).
func TestChat_argumentsPastMaxDepth(t *testing.T) {
	deep := strings.Repeat(`{\"a\":`, 600) + "1" + strings.Repeat("}", 600)
	srv := scriptServer(t, "deep", `provider = "openai"
[[exchange]]
reply.json = '''{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,
 "tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_time","arguments":"`+deep+`"}}]},"finish_reason":"tool_calls"}]}'''
[[exchange]]
reply.json = '''{"id":"c2","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}'''
`)
	ch := chatFor(t, srv, "deep", Config{Model: "m", MaxToolCalls: 2, MaxDepth: 512}, nil, nil)
	h := newFakeHost("get_time")
	out, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"x","allow_tools":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.called) != 0 {
		t.Errorf("the tool ran: %.80s", h.called)
	}
	r := decodeResult(t, out)
	if len(r.ToolCalls) != 1 || r.ToolCalls[0].Status != "invalid_args" || r.ToolCalls[0].Error != "the arguments nest deeper than limits.max_depth (512)" ||
		r.ToolCalls[0].Arguments[0] != '"' {
		t.Errorf("%.300s", out)
	}
	if _, serr := protocol.Scan(out, 16); serr != nil {
		t.Errorf("the result nests: %v", serr)
	}
}

// Over-long SSE lines and too many streamed tool calls say what they are
// (issue 25, finding 23).
func TestChat_streamLimitsSaySo(t *testing.T) {
	long := `data: {"id":"s","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"` + strings.Repeat("a", 5000) + `"}}]}` + "\n\n"
	srv := scriptServer(t, "long", "provider = \"openai\"\n[[exchange]]\nreply.sse = '''\n"+long+"'''\n")
	ch := chatFor(t, srv, "long", Config{Model: "m", MaxResponseBytes: 4096}, nil, nil)
	_, err := ch.Run(context.Background(), newFakeHost(), "", []byte(`{"prompt":"x","stream":true}`))
	pe := protoErr(t, err, protocol.ToolFailed)
	if pe.Message != "model: a line of the event stream is longer than 4096 bytes (llm.max_response_bytes)" {
		t.Errorf("long line: %q", pe.Message)
	}

	var calls strings.Builder
	for i := 0; i < 130; i++ {
		fmt.Fprintf(&calls, `data: {"id":"s","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"c%d","type":"function","function":{"name":"get_time","arguments":"{}"}}]}}]}`+"\n\n", i, i)
	}
	srv = scriptServer(t, "many", "provider = \"openai\"\n[[exchange]]\nreply.sse = '''\n"+calls.String()+"'''\n")
	ch = chatFor(t, srv, "many", Config{Model: "m", MaxToolCalls: 200}, nil, nil)
	_, err = ch.Run(context.Background(), newFakeHost("get_time"), "", []byte(`{"prompt":"x","stream":true,"allow_tools":true}`))
	pe = protoErr(t, err, protocol.ToolFailed)
	if pe.Message != "model: the model asked for more than 128 tool calls in one message, more than Clara takes" {
		t.Errorf("many calls: %q", pe.Message)
	}
}

// TestChat_still_asking_for_tools_is_limit_exceeded: when max_tool_calls
// (or max_turns) was spent and the model still asked for tools, the chat
// answered success with empty content and finish_reason "tool_calls"
// (issue 26 §5). Now it fails with limit_exceeded, what it got in details.
func TestChat_still_asking_for_tools_is_limit_exceeded(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		args string
		want string
	}{
		{Config{Provider: ProviderOpenAI, Model: "test-model", MaxToolCalls: 1}, `{"prompt":"Time?","allow_tools":true}`, "after max_tool_calls (1) was spent"},
		{Config{Provider: ProviderOpenAI, Model: "test-model", MaxToolCalls: 5}, `{"prompt":"Time?","allow_tools":true,"max_turns":2}`, "after its last turn came (max_turns 2)"},
	} {
		srv := serveScripts(t, "openai_still_asks")
		ch := chatFor(t, srv, "openai_still_asks", c.cfg, nil, nil)
		_, err := ch.Run(context.Background(), newFakeHost("get_time"), "", []byte(c.args))
		var perr *protocol.Error
		if !errors.As(err, &perr) || perr.Code != protocol.LimitExceeded || !strings.Contains(perr.Message, c.want) {
			t.Fatalf("%v", err)
		}
		var partial struct {
			Content      string                          `json:"content"`
			FinishReason string                          `json:"finish_reason"`
			ToolCalls    []struct{ Name, Status string } `json:"tool_calls"`
			Turns        int                             `json:"turns"`
		}
		if err := json.Unmarshal(perr.Details, &partial); err != nil || partial.Content != "Let me check once more." || partial.FinishReason != "tool_calls" ||
			len(partial.ToolCalls) != 1 || partial.ToolCalls[0].Status != "success" || partial.Turns != 2 {
			t.Fatalf("details %s (%v)", perr.Details, err)
		}
		if err := srv.Err(); err != nil {
			t.Fatal(err)
		}
	}
}
