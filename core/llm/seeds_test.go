package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core/llm/llmtest"
	"github.com/clara-lib/clara/core/protocol"
)

// Issue 32: what seeds 002 and 003 promise of the chat loop.

// withTool adds a tool to a fake host.
func (h *fakeHost) withTool(name, schema string, run func(args []byte) ([]byte, *protocol.Error)) *fakeHost {
	h.specs = append(h.specs, ToolSpec{Name: name, Description: "the " + name + " tool", InputSchema: json.RawMessage(schema)})
	h.tools[name] = func(_ context.Context, args []byte) ([]byte, *protocol.Error) { return run(args) }
	return h
}

func inlineScript(t *testing.T, name, text string) *llmtest.Server {
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

// Seed 003: the provider is read from a gemini-* model name, and the chat
// speaks Gemini's generateContent with its function calling.
func TestChat_geminiDocumentedExample(t *testing.T) {
	srv := serveScripts(t, "gemini_lights")
	ch := chatFor(t, srv, "gemini_lights", Config{Model: "gemini-2.5-flash", APIKeyEnv: "GKEY"}, map[string]string{"GKEY": "AIza-test-secret"}, nil)
	var got []string
	h := newFakeHost().withTool("set_light_values",
		`{"type":"object","properties":{"brightness":{"type":"integer","minimum":0,"maximum":100},"color_temp":{"type":"string","enum":["daylight","cool","warm"]}},"required":["brightness","color_temp"]}`,
		func(args []byte) ([]byte, *protocol.Error) {
			got = append(got, string(args))
			return []byte(`{"brightness":25,"colorTemperature":"warm"}`), nil
		})
	out, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"Dim the lights so the room feels cozy and warm.","allow_tools":true}`))
	if err != nil {
		t.Fatalf("%v (%v)", err, srv.Err())
	}
	r := decodeResult(t, out)
	if r.Content != "I've dimmed the lights to 25% with a warm color temperature." || r.Usage != (Usage{298, 37, 335}) || r.Turns != 2 || r.FinishReason != "stop" {
		t.Fatalf("%s", out)
	}
	if strings.Join(got, "|") != `{"color_temp":"warm","brightness":25}` {
		t.Fatalf("the tool got %v", got)
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
	}
	recv := srv.Received("gemini_lights")
	if recv[0].Path != "/v1beta/models/gemini-2.5-flash:generateContent" || recv[0].Header.Get("x-goog-api-key") != "AIza-test-secret" {
		t.Fatalf("%s %v", recv[0].Path, recv[0].Header)
	}
	for _, want := range []string{`"parametersJsonSchema":{"type":"object"`, `{"role":"model","parts":[{"functionCall":{"name":"set_light_values","args":{"color_temp":"warm","brightness":25}}}]}`,
		`{"role":"user","parts":[{"functionResponse":{"name":"set_light_values","response":{"brightness":25,"colorTemperature":"warm"}}}]}`} {
		if !strings.Contains(string(recv[1].Body), want) {
			t.Errorf("the second request lacks %s:\n%s", want, recv[1].Body)
		}
	}
}

// Gemini streamed: text deltas become token events (the model's thoughts
// do not), the whole function call is run, its id and thoughtSignature
// go back with it.
func TestChat_geminiStreaming(t *testing.T) {
	srv := serveScripts(t, "gemini_stream")
	ch := chatFor(t, srv, "gemini_stream", Config{Provider: ProviderGemini, Model: "gemini-2.5-pro"}, nil, nil)
	h := newFakeHost("get_time")
	out, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"Time in Paris?","system":"You are terse.","allow_tools":true,"stream":true}`))
	if err != nil {
		t.Fatalf("%v (%v)", err, srv.Err())
	}
	r := decodeResult(t, out)
	if r.Content != "It is noon in Paris." || r.Usage != (Usage{110, 26, 136}) {
		t.Fatalf("%s", out)
	}
	var tokens []string
	for _, ev := range h.eventLines() {
		if strings.HasPrefix(ev, `{"event":"token"`) {
			tokens = append(tokens, ev)
		}
	}
	if strings.Join(tokens, "") != `{"event":"token","text":"Checking the clock."}{"event":"token","text":"It is noon"}{"event":"token","text":" in Paris."}` {
		t.Fatalf("tokens %v", tokens)
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
	}
}

// A Gemini stream cut before its finishReason fails, as a dropped one.
func TestChat_geminiStreamCut(t *testing.T) {
	srv := inlineScript(t, "gcut", `provider = "gemini"
[[exchange]]
reply.sse = '''
data: {"candidates":[{"content":{"parts":[{"text":"half"}],"role":"model"},"index":0}]}

'''
`)
	ch := chatFor(t, srv, "gcut", Config{Model: "gemini-x", MaxRetries: NoRetries}, nil, nil)
	_, err := ch.Run(context.Background(), newFakeHost(), "", []byte(`{"prompt":"hi","stream":true}`))
	if err == nil || !strings.Contains(err.Error(), "the connection dropped") {
		t.Fatalf("%v", err)
	}
}

// Seed 002: tool_choice reaches the model in each provider's words, for
// the first call; the calls after it leave the choice to the model.
func TestChat_toolChoiceInEachFormat(t *testing.T) {
	cases := []struct {
		provider, choice, first, firstWant, later string
	}{
		{"openai", `"required"`, `"tool_choice":"required"`, "required", `"tool_choice":"auto"`},
		{"openai", `{"name":"get_time"}`, `"tool_choice":{"type":"function","function":{"name":"get_time"}}`, "function", `"tool_choice":"auto"`},
		{"anthropic", `"required"`, `"tool_choice":{"type":"any"}`, "any", `"tool_choice":{"type":"auto"}`},
		{"anthropic", `{"name":"get_time"}`, `"tool_choice":{"type":"tool","name":"get_time"}`, "tool", `"tool_choice":{"type":"auto"}`},
		{"gemini", `"required"`, `"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}`, "any", `"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}}`},
		{"gemini", `{"name":"get_time"}`, `"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["get_time"]}}`, "any", `"mode":"AUTO"`},
	}
	replies := map[string][2]string{
		"openai": {`{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"UTC\"}"}}]},"finish_reason":"tool_calls"}]}`,
			`{"choices":[{"index":0,"message":{"role":"assistant","content":"Noon."},"finish_reason":"stop"}]}`},
		"anthropic": {`{"type":"message","role":"assistant","content":[{"type":"tool_use","id":"c1","name":"get_time","input":{"tz":"UTC"}}],"stop_reason":"tool_use"}`,
			`{"type":"message","role":"assistant","content":[{"type":"text","text":"Noon."}],"stop_reason":"end_turn"}`},
		"gemini": {`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"get_time","args":{"tz":"UTC"}}}]},"finishReason":"STOP"}]}`,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"Noon."}]},"finishReason":"STOP"}]}`},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%s %s", c.provider, c.choice), func(t *testing.T) {
			name := fmt.Sprintf("choice%d", i)
			srv := inlineScript(t, name, fmt.Sprintf(`provider = %q
[[exchange]]
expect.tool_choice = %q
expect.contains = [%q]
reply.json = '%s'
[[exchange]]
expect.contains = [%q]
reply.json = '%s'
`, c.provider, c.firstWant, c.first, replies[c.provider][0], c.later, replies[c.provider][1]))
			ch := chatFor(t, srv, name, Config{Provider: c.provider, Model: "m"}, nil, nil)
			out, err := ch.Run(context.Background(), newFakeHost("get_time", "echo"), "",
				[]byte(`{"prompt":"Time?","allow_tools":true,"max_tool_calls":2,"tool_choice":`+c.choice+`}`))
			if err != nil || decodeResult(t, out).Content != "Noon." {
				t.Fatalf("%s %v (%v)", out, err, srv.Err())
			}
			if err := srv.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// tool_choice "none": tools are described but the model may call none;
// bad choices are refused before any request.
func TestChat_toolChoiceNoneAndMistakes(t *testing.T) {
	srv := inlineScript(t, "cnone", `provider = "openai"
[[exchange]]
expect.tool_choice = "none"
expect.tools = ["get_time"]
reply.json = '{"choices":[{"index":0,"message":{"role":"assistant","content":"I will not call tools."},"finish_reason":"stop"}]}'
`)
	ch := chatFor(t, srv, "cnone", Config{Model: "m"}, nil, nil)
	out, err := ch.Run(context.Background(), newFakeHost("get_time"), "", []byte(`{"prompt":"Time?","allow_tools":true,"tool_choice":"none"}`))
	if err != nil || decodeResult(t, out).Content != "I will not call tools." {
		t.Fatalf("%s %v (%v)", out, err, srv.Err())
	}
	for args, want := range map[string]string{
		`{"prompt":"x","tool_choice":"always"}`:                                          `tool_choice must be "auto", "none", "required" or {"name": TOOL}, not "always"`,
		`{"prompt":"x","tool_choice":{"tool":"get_time"}}`:                               `tool_choice must be`,
		`{"prompt":"x","tool_choice":3}`:                                                 `tool_choice must be`,
		`{"prompt":"x","tool_choice":"required"}`:                                        `tool_choice "required" needs tools the model may call`,
		`{"prompt":"x","allow_tools":true,"tool_choice":{"name":"delete_all"}}`:          `tool_choice names "delete_all", which is not among the tools offered`,
		`{"prompt":"x","tool_choice":"none","result_schema":{"type":"object"}}`:          `tool_choice "none" cannot stand with a result_schema`,
		`{"prompt":"x","allow_tools":true,"tools":[],"tool_choice":{"name":"get_time"}}`: `needs tools the model may call`,
	} {
		_, err := ch.Run(context.Background(), newFakeHost("get_time"), "", []byte(args))
		var pe *protocol.Error
		if err == nil || !errors.As(err, &pe) || pe.Code != protocol.InvalidArgs || !strings.Contains(pe.Message, want) {
			t.Errorf("%s: %v, want invalid_args with %q", args, err, want)
		}
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
	}
}

// Seed 003: system messages are the task's own; only the user's and the
// model's messages carry on to the session's next chat.
func TestChat_systemMessagesAreNotKept(t *testing.T) {
	srv := inlineScript(t, "nosys", `provider = "openai"
[[exchange]]
expect.system = "You are a pirate."
expect.messages = 3
reply.json = '{"choices":[{"index":0,"message":{"role":"assistant","content":"Arr, Ada."},"finish_reason":"stop"}]}'
[[exchange]]
expect.messages = 3
expect.not_contains = ["pirate", "Remember the budget", "\"role\":\"system\""]
expect.last_user = "What is my name?"
reply.json = '{"choices":[{"index":0,"message":{"role":"assistant","content":"Ada."},"finish_reason":"stop"}]}'
`)
	ch := chatFor(t, srv, "nosys", Config{Model: "m"}, nil, nil)
	h := newFakeHost()
	if _, err := ch.Run(context.Background(), h, "s", []byte(`{"system":"You are a pirate.","messages":[{"role":"system","content":"Remember the budget."}],"prompt":"I am Ada."}`)); err != nil {
		t.Fatalf("%v (%v)", err, srv.Err())
	}
	out, err := ch.Run(context.Background(), h, "s", []byte(`{"prompt":"What is my name?"}`))
	if err != nil || decodeResult(t, out).Content != "Ada." {
		t.Fatalf("%s %v (%v)", out, err, srv.Err())
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
	}
}

// Seed 003's events: a failed chat ends with error then finished; a tool
// result carries the result, with the configuration's secrets cut out.
func TestChat_errorAndFinishedEvents(t *testing.T) {
	srv := inlineScript(t, "evfail", `provider = "openai"
[[exchange]]
reply.json = '{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"echo","arguments":"{\"token\":\"sk-live-123\"}"}}]},"finish_reason":"tool_calls"}]}'
[[exchange]]
reply.status = 400
reply.json = '{"error":{"message":"the key sk-live-123 is refused","type":"invalid_request_error"}}'
`)
	ch := chatFor(t, srv, "evfail", Config{Model: "m", APIKeyEnv: "KEY", MaxRetries: NoRetries}, map[string]string{"KEY": "sk-live-123"}, nil)
	h := newFakeHost("echo")
	_, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"hi","allow_tools":true}`))
	if err == nil {
		t.Fatal("the chat did not fail")
	}
	ev := h.eventLines()
	all := strings.Join(ev, "\n")
	if strings.Contains(all, "sk-live-123") {
		t.Fatalf("a secret in the events:\n%s", all)
	}
	if len(ev) != 4 || ev[1] != `{"event":"tool_result","tool":"echo","status":"success","duration_ms":0,"result":{"token":"[redacted]"}}` ||
		!strings.HasPrefix(ev[2], `{"event":"error","error":"tool_failed","message":"model: `) ||
		ev[3] != `{"event":"finished","status":"tool_failed","turns":2,"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}` {
		t.Fatalf("events:\n%s", all)
	}
}

// OpenRouter's own headers go to openrouter.ai only, with its key
// variable when api_key_env is empty.
func TestChat_openRouterHeaders(t *testing.T) {
	reply := `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
	srv := inlineScript(t, "or", `provider = "openai"
[[exchange]]
expect.headers = { HTTP-Referer = "https://example.org/app", X-Title = "My App", Authorization = "Bearer sk-or-1" }
reply.json = '`+reply+`'
[[exchange]]
expect.headers_absent = ["HTTP-Referer", "X-Title", "Authorization"]
reply.json = '`+reply+`'
`)
	port := strings.TrimPrefix(srv.URL(), "http://127.0.0.1:")
	lookup := func(ctx context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	env := map[string]string{"OPENROUTER_API_KEY": "sk-or-1"}
	client, err := NewClient(ClientOptions{AllowHosts: []string{"openrouter.ai", "127.0.0.1"}, LookupAddrs: lookup, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for _, base := range []string{"http://openrouter.ai:" + port + "/or", srv.BaseURL("or")} {
		ch, err := NewChat(client, Config{BaseURL: base, Model: "meta-llama/llama-3-8b", AppURL: "https://example.org/app", AppTitle: "My App"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.Run(context.Background(), newFakeHost(), "", []byte(`{"prompt":"hi"}`)); err != nil {
			t.Fatalf("%s: %v (%v)", base, err, srv.Err())
		}
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewChat(client, Config{BaseURL: "https://openrouter.ai/api/v1", AppTitle: "a\nb"}, nil); err == nil {
		t.Fatal("a newline in app_title was taken")
	}
}
