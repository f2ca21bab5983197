package llmtest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

func serve(t *testing.T, name, text string) *Server {
	t.Helper()
	s, err := ParseScript(name, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer("", s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func post(t *testing.T, url string, header map[string]string, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const okOpenAI = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}]}`

// Requests the real APIs refuse are refused, and recorded as failures.
func TestServer_openAIWireChecks(t *testing.T) {
	srv := serve(t, "o", `provider = "openai"
repeat = true
[[exchange]]
reply.json = '`+okOpenAI+`'`)
	url := srv.BaseURL("o") + "/chat/completions"
	good := `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"1"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`
	if code, body := post(t, url, nil, good); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	for body, want := range map[string]string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"foo":1}`:             "unrecognized request argument supplied: foo",
		`{"messages":[{"role":"user","content":"hi"}]}`:                                 "model: Field required",
		`{"model":"m","messages":[]}`:                                                   "messages must be a non-empty array",
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream_options":{}}`: "stream_options is only allowed when stream is true",
		`{"model":"m","messages":[{"role":"tool","tool_call_id":"x","content":"1"}]}`:   `is not one`,
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"hi"}]}`: "must be followed by tool messages",
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":{}}}]}]}`:                                  "arguments must be a string",
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"get time"}}]}`:                                              "does not match",
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":"auto"}`:                                                                                      "tool_choice is only allowed when tools are specified",
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":2.5}`:                                                                                         "temperature must be a number between 0 and 2",
		`not json`: "the body is not JSON",
	} {
		code, got := post(t, url, nil, body)
		if code != 400 || !strings.Contains(got, want) || !strings.Contains(got, `"type":"invalid_request_error"`) {
			t.Errorf("%s: %d %s", body, code, got)
		}
	}
	code, got := post(t, url, map[string]string{"Content-Type": "text/plain"}, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if code != 400 || !strings.Contains(got, "not application/json") {
		t.Errorf("%d %s", code, got)
	}
	if r := srv.Reports()[0]; len(r.Failures) != 12 || srv.Err() == nil {
		t.Fatalf("%+v", r)
	}
}

func TestServer_anthropicWireChecks(t *testing.T) {
	srv := serve(t, "a", `provider = "anthropic"
repeat = true
[[exchange]]
reply.json = '{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}'`)
	url := srv.BaseURL("a") + "/v1/messages"
	v := map[string]string{"anthropic-version": "2023-06-01"}
	tools := `"tools":[{"name":"f","input_schema":{"type":"object"}}]`
	good := `{"model":"c","max_tokens":10,"system":"be brief","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"1"},{"type":"text","text":"and?"}]}],` + tools + `}`
	if code, body := post(t, url, v, good); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if code, body := post(t, url, nil, good); code != 400 || !strings.Contains(body, "anthropic-version: header is required") {
		t.Errorf("%d %s", code, body)
	}
	for body, want := range map[string]string{
		`{"model":"c","messages":[{"role":"user","content":"hi"}]}`:                                            "max_tokens: Field required",
		`{"model":"c","max_tokens":10,"messages":[{"role":"system","content":"hi"}]}`:                          `Input should be 'user' or 'assistant'`,
		`{"model":"c","max_tokens":10,"messages":[{"role":"assistant","content":"hi"}]}`:                       "the first message must use the",
		`{"model":"c","max_tokens":10,"messages":[{"role":"user","content":""}]}`:                              "text content blocks must be non-empty",
		`{"model":"c","max_tokens":10,"temperature":1.5,"messages":[{"role":"user","content":"hi"}]}`:          "temperature must be a number between 0 and 1",
		`{"model":"c","max_tokens":10,"stop":["x"],"messages":[{"role":"user","content":"hi"}]}`:               "stop: Extra inputs are not permitted",
		`{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"x"}}`: "tool_choice.type must be",
		`{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"text","text":"first"},{"type":"tool_result","tool_use_id":"t1"}]}],` + tools + `}`: "tool_result blocks must come first",
		`{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2"}]}],` + tools + `}`:                                "unexpected `tool_use_id`",
		`{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":"no result"}],` + tools + `}`:                                                                "without `tool_result` blocks immediately after",
		`{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"}]}]}`:                                              "must define tools",
		`{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f"}]}`:                                                                                                                                                                                  "input_schema: Field required",
	} {
		code, got := post(t, url, v, body)
		if code != 400 || !strings.Contains(got, want) || !strings.Contains(got, `"type":"error"`) {
			t.Errorf("%s: %d %s", body, code, got)
		}
	}
}

func TestServer_geminiWireChecks(t *testing.T) {
	srv := serve(t, "g", `provider = "gemini"
repeat = true
[[exchange]]
reply.json = '{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP"}]}'`)
	url := srv.BaseURL("g") + "/v1beta/models/gemini-2.5-flash:generateContent"
	tools := `"tools":[{"functionDeclarations":[{"name":"f","parametersJsonSchema":{"type":"object"}}]}]`
	call := `{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]}`
	good := `{"contents":[{"role":"user","parts":[{"text":"hi"}]},` + call + `,{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"output":1}}},{"text":"and?"}]}],"systemInstruction":{"parts":[{"text":"be brief"}]},` + tools + `,"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f"]}},"generationConfig":{"temperature":0.5,"maxOutputTokens":9}}`
	if code, body := post(t, url, nil, good); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if code, body := post(t, srv.BaseURL("g")+"/v1beta/models/gemini-2.5-flash:streamGenerateContent", nil, good); code != 400 || !strings.Contains(body, "alt=sse") {
		t.Errorf("%d %s", code, body)
	}
	if code, body := post(t, srv.BaseURL("g")+"/v1/chat/completions", nil, good); code != 400 || !strings.Contains(body, "is not /v1beta/models/MODEL") {
		t.Errorf("%d %s", code, body)
	}
	user := `{"role":"user","parts":[{"text":"hi"}]}`
	for body, want := range map[string]string{
		`{"contents":[]}`: "contents must be a non-empty array",
		`{"contents":[` + user + `],"messages":[]}`:                                                                                              `Unknown name \"messages\"`,
		`{"contents":[{"role":"assistant","parts":[{"text":"hi"}]}]}`:                                                                            `must be \"user\" or \"model\"`,
		`{"contents":[{"role":"user","parts":[]}]}`:                                                                                              "parts must be a non-empty array",
		`{"contents":[{"role":"user","parts":[{"text":"a","functionCall":{"name":"f"}}]}]}`:                                                      "exactly one of",
		`{"contents":[` + user + `,` + call + `,{"role":"user","parts":[{"text":"no answer"}]}],` + tools + `}`:                                  "number of function response parts",
		`{"contents":[` + user + `,` + call + `,{"role":"user","parts":[{"functionResponse":{"name":"g","response":{}}}]}],` + tools + `}`:       "number of function response parts",
		`{"contents":[` + user + `,` + call + `,{"role":"user","parts":[{"functionResponse":{"name":"f","response":"1"}}]}],` + tools + `}`:      "needs a name and a response object",
		`{"contents":[` + user + `,` + call + `,{"role":"user","parts":[{"functionResponse":{"name":"f","response":{}}}]}]}`:                     "need function declarations",
		`{"contents":[` + user + `,` + call + `]` + `,` + tools + `}`:                                                                            "have no function responses",
		`{"contents":[` + user + `],"tools":[{"functionDeclarations":[{"name":"9f"}]}]}`:                                                         "letters, digits",
		`{"contents":[` + user + `],"tools":[{"functionDeclarations":[{"name":"f","parameters":{},"parametersJsonSchema":{"type":"object"}}]}]}`: "mutually exclusive",
		`{"contents":[` + user + `],` + tools + `,"toolConfig":{"functionCallingConfig":{"mode":"SOMETIMES"}}}`:                                  "mode must be AUTO, ANY, NONE",
		`{"contents":[` + user + `],` + tools + `,"toolConfig":{"functionCallingConfig":{"mode":"AUTO","allowedFunctionNames":["f"]}}}`:          "only be set when the mode is ANY",
		`{"contents":[` + user + `],"generationConfig":{"temperature":3}}`:                                                                       "temperature must be a number between 0 and 2",
	} {
		code, got := post(t, url, nil, body)
		if code != 400 || !strings.Contains(got, want) || !strings.Contains(got, `"status":"INVALID_ARGUMENT"`) {
			t.Errorf("%s: %d %s", body, code, got)
		}
	}
}

func TestServer_expectationsAndOrder(t *testing.T) {
	srv := serve(t, "x", `provider = "openai"
[[exchange]]
name = "first"
expect.model = "right-model"
reply.json = '`+okOpenAI+`'
[[exchange]]
name = "second"
reply.status = 429
`)
	url := srv.BaseURL("x") + "/chat/completions"
	code, body := post(t, url, nil, `{"model":"wrong-model","messages":[{"role":"user","content":"hi"}]}`)
	if code != 400 || !strings.Contains(body, `first: model is \"wrong-model\", expected \"right-model\"`) {
		t.Fatalf("%d %s", code, body)
	}
	if code, _ := post(t, url, nil, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); code != 429 {
		t.Fatalf("the second request got %d", code)
	}
	if code, body := post(t, url, nil, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); code != 410 || !strings.Contains(body, "every exchange of script x was served") {
		t.Fatalf("%d %s", code, body)
	}
	err := srv.Err()
	if err == nil || !strings.Contains(err.Error(), "x: first: model is") || !strings.Contains(err.Error(), "was not expected") {
		t.Fatalf("%v", err)
	}
	srv.Reset()
	if r := srv.Reports()[0]; r.Served != 0 || len(r.Failures) != 0 || r.Complete {
		t.Fatalf("after reset: %+v", r)
	}

	turn := serve(t, "t", `provider = "openai"
order = "turn"
[[exchange]]
reply.json = '{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"turn 0"}}]}'
[[exchange]]
reply.json = '{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"turn 1"}}]}'
`)
	for _, tc := range []struct{ body, want string }{
		{`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`, "turn 1"},
		{`{"model":"m","messages":[{"role":"user","content":"a"}]}`, "turn 0"},
	} {
		if _, got := post(t, turn.BaseURL("t")+"/chat/completions", nil, tc.body); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %s", tc.body, got)
		}
	}
	if err := turn.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestServer_replies(t *testing.T) {
	sse := "data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n"
	srv := serve(t, "r", `provider = "http"
[[exchange]]
reply.chunk = 3
reply.sse = '''
`+sse+`'''
[[exchange]]
reply.drop_after = 10
reply.sse = '''
`+sse+`'''
[[exchange]]
reply.drop = "reset"
[[exchange]]
reply.delay_ms = 60000
reply.body = "late"
[[exchange]]
reply.status = 503
reply.headers = { Retry-After = "7" }
reply.json = '{"error":"busy"}'
`)
	url := srv.BaseURL("r") + "/anything"
	resp, err := http.Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != sse || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%q %v", b, err)
	}

	resp, err = http.Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != sse[:10] || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("drop_after: %q %v", b, err)
	}

	tr := &http.Transport{DisableKeepAlives: true}
	_, err = (&http.Client{Transport: tr}).Post(url, "application/json", strings.NewReader("{}"))
	if err == nil || !(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF)) {
		t.Fatalf("drop reset: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
	if _, err := http.DefaultClient.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("delay: %v", err)
	}

	resp, err = http.Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
	}
	if got := srv.Received("r"); len(got) != 5 || got[0].Path != "/anything" {
		t.Fatalf("%+v", got)
	}
}

func TestServer_reportEndpoints(t *testing.T) {
	srv := serve(t, "e", `provider = "http"
[[exchange]]
expect.json = '{"q":1}'
expect.method = "POST"
reply.json = '{"a":2}'
`)
	if code, body := post(t, srv.BaseURL("e")+"/x", nil, `{"q":1}`); code != 200 || body != `{"a":2}` {
		t.Fatalf("%d %s", code, body)
	}
	resp, err := http.Get(srv.URL() + "/_llmtest/report")
	if err != nil {
		t.Fatal(err)
	}
	var reps []Report
	json.NewDecoder(resp.Body).Decode(&reps)
	resp.Body.Close()
	if len(reps) != 1 || reps[0].Served != 1 || !reps[0].Complete {
		t.Fatalf("%+v", reps)
	}
	if code, _ := post(t, srv.URL()+"/_llmtest/reset", nil, ""); code != 204 || srv.Reports()[0].Served != 0 {
		t.Fatal("reset")
	}
	if code, body := post(t, srv.URL()+"/nope/x", nil, "{}"); code != 404 || !strings.Contains(body, `no script named "nope"`) {
		t.Fatalf("%d %s", code, body)
	}
}

func TestParseScript_errors(t *testing.T) {
	for text, want := range map[string]string{
		`provider = "openai"
[[exchange]]
expect.modle = "m"
reply.json = '{}'`: "modle",
		`provider = "cohere"`: `provider must be`,
		`provider = "openai"`: "no [[exchange]]",
		`provider = "openai"
[[exchange]]
reply.json = '{not json'`: "reply.json is not JSON",
		`provider = "openai"
[[exchange]]
reply.json = '{}'
reply.sse = 'data: x'`: "give one of json, sse and body",
		`provider = "http"
[[exchange]]
expect.model = "m"
reply.json = '{}'`: "model expectations need",
		`provider = "openai"
[[exchange]]
reply.drop = "explode"`: "reply.drop must be",
		`provider = "http"
order = "turn"
[[exchange]]
reply.status = 200`: "needs a model provider",
		`provider = "openai"
[[exchange]]
expect.tool_results = [{ contains = "x" }]
reply.status = 200`: "each needs an id",
		"provider = \n": "script s:1",
	} {
		_, err := ParseScript("s", []byte(text))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s\n→ %v, want %q", text, err, want)
		}
	}
	if _, err := ParseScript("../x", []byte(`provider = "http"`)); err == nil {
		t.Error("a script name with a slash was accepted")
	}
	if _, err := LoadScripts("../../../tests/llm"); err != nil {
		t.Fatalf("the shared scripts do not load: %v", err)
	}
}
