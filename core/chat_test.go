package core_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/llm/llmtest"
	"github.com/clara-lib/clara/core/toolbox"
)

// The chat tool through the engine, against the scripted provider on
// loopback (core/llm/llmtest): the model's tool calls go through the
// whole pipeline, rules see the turns, notices reach the model.

func scriptServer(t *testing.T, scripts ...*llmtest.Script) *llmtest.Server {
	t.Helper()
	srv, err := llmtest.NewServer("", scripts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Close()
		if err := srv.Err(); err != nil {
			t.Errorf("the provider saw a request against its script: %v", err)
		}
	})
	return srv
}

func loadScript(t *testing.T, name string) *llmtest.Script {
	t.Helper()
	sc, err := llmtest.LoadScript(filepath.Join("..", "tests", "llm", name+".toml"))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func registerWeather(t *testing.T, e *core.Engine) {
	t.Helper()
	run := func(_ context.Context, call toolbox.Call) ([]byte, error) {
		return []byte(`{"location":"Boston, MA","temperature":"22","unit":"celsius"}`), nil
	}
	d := `{"name":"get_current_weather","description":"Get the current weather in a given location",` +
		`"input_schema":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}`
	if err := e.RegisterTool([]byte(d), toolbox.ToolOptions{Run: run}); err != nil {
		t.Fatal(err)
	}
}

func TestChat_the_documented_openai_example_through_the_pipeline(t *testing.T) {
	srv := scriptServer(t, loadScript(t, "openai_weather"))
	t.Setenv("CLARA_TEST_KEY", "sk-never-shown")
	e := rulesEngine(t, `{"llm":{"base_url":`+jsonText(srv.BaseURL("openai_weather"))+`,"model":"gpt-4o-mini","api_key_env":"CLARA_TEST_KEY"}}`)
	registerWeather(t, e)
	var events []string
	var mu sync.Mutex
	e.SetEventSink(func(ev []byte) {
		mu.Lock()
		events = append(events, string(ev))
		mu.Unlock()
	})
	defer e.SetEventSink(nil)
	out := evalString(t, e, `{"tool":"chat","session":"w1","arguments":{"prompt":"What is the weather like in Boston today?","allow_tools":true,"tools":["get_current_weather"],"max_tool_calls":3}}`)
	var env struct {
		Status string
		Result struct {
			Content   string
			ToolCalls []struct{ Name, Status string } `json:"tool_calls"`
			Turns     int
			Usage     struct {
				Total int `json:"total_tokens"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil || env.Status != "success" {
		t.Fatalf("%v: %s", err, out)
	}
	if env.Result.Content != "It is 22 degrees Celsius and sunny in Boston today." || env.Result.Turns != 2 ||
		len(env.Result.ToolCalls) != 1 || env.Result.ToolCalls[0].Name != "get_current_weather" ||
		env.Result.ToolCalls[0].Status != "success" || env.Result.Usage.Total != 233 {
		t.Fatalf("result: %s", out)
	}
	// The tool call is audited in the chat's session.
	tail := evalString(t, e, `{"tool":"audit_tail","arguments":{"n":5}}`)
	if !strings.Contains(tail, `"session":"w1","tool":"get_current_weather"`) {
		t.Fatalf("audit: %s", tail)
	}
	mu.Lock()
	got := strings.Join(events, "\n")
	mu.Unlock()
	for _, want := range []string{`{"event":"tool_call","tool":"get_current_weather"`, `{"event":"tool_result","tool":"get_current_weather","status":"success"`, `{"event":"answer","text":"It is 22`, `"session":"w1"`} {
		if !strings.Contains(got, want) {
			t.Errorf("no %s in the events:\n%s", want, got)
		}
	}
	if strings.Contains(out+tail+got, "sk-never-shown") {
		t.Fatal("the API key leaked")
	}
}

func TestChat_rules_deny_a_tool_call_and_the_budget_reaches_the_model(t *testing.T) {
	sc, err := llmtest.ParseScript("budget", []byte(`
provider = "openai"
[[exchange]]
[exchange.expect]
tools = ["get_current_weather"]
[exchange.reply]
json = '''{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",
 "message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_current_weather","arguments":"{\"location\":\"Paris\"}"}}]}}],
 "usage":{"prompt_tokens":850,"completion_tokens":50,"total_tokens":900}}'''
[[exchange]]
[exchange.expect]
system = "Token budget at 90%. Consider wrapping up."
tool_results = [{ id = "call_1", contains = "denied" }]
[exchange.reply]
json = '''{"id":"c2","object":"chat.completion","created":2,"model":"m","choices":[{"index":0,"finish_reason":"stop",
 "message":{"role":"assistant","content":"I may not look that up."}}],"usage":{"prompt_tokens":950,"completion_tokens":10,"total_tokens":960}}'''
`))
	if err != nil {
		t.Fatal(err)
	}
	srv := scriptServer(t, sc)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "no_paris.toml"), []byte(`
[rule]
id = "no_paris"
trigger = "on_tool_call"
[condition]
expression = 'context.tool.name == "get_current_weather"'
[action]
type = "deny"
reason = "weather lookups are closed today"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	e := rulesEngine(t, `{"project_root":`+jsonText(root)+`,"rules":{"paths":["*.toml"],"builtin":true},`+
		`"llm":{"base_url":`+jsonText(srv.BaseURL("budget"))+`,"model":"m","context_window":1000},"limits":{"max_tool_calls":3}}`)
	registerWeather(t, e)
	out := evalString(t, e, `{"tool":"chat","arguments":{"prompt":"Weather in Paris?","allow_tools":true,"tools":["get_current_weather"],"max_tool_calls":3}}`)
	if !strings.Contains(out, `"content":"I may not look that up."`) || !strings.Contains(out, `"status":"denied"`) {
		t.Fatalf("%s", out)
	}
}

func TestChat_without_a_model_and_in_test_mode(t *testing.T) {
	e := rulesEngine(t, "")
	expectEq(t, "no model", evalString(t, e, `{"tool":"chat","arguments":{"prompt":"hi"}}`),
		`{"status":"error","error":"tool_failed","message":"chat: no model is configured (set llm.model, and llm.base_url for a server other than OpenAI's or Anthropic's)"}`)
	expectEq(t, "no evaluator", evalString(t, e, `{"tool":"evaluate","arguments":{"question":"hi"}}`),
		`{"status":"error","error":"tool_failed","message":"evaluate: no evaluator is configured (set evaluator.url)"}`)
	mustConfigure(t, e, "test_mode = true\n")
	expectEq(t, "test mode", evalString(t, e, `{"tool":"chat","arguments":{"prompt":"hi"}}`),
		`{"status":"success","tool":"chat","result":{"test_mode":true,"skipped":"chat"}}`)
}

func TestChat_the_evaluator_and_http_tools(t *testing.T) {
	srv := scriptServer(t, loadScript(t, "evaluator"), loadScript(t, "http_tool"))
	t.Setenv("LOOKUP_TOKEN", "Bearer lookup-token")
	e := rulesEngine(t, `{"evaluator":{"url":`+jsonText(srv.BaseURL("evaluator")+"/evaluate")+`},"default_evaluator":"evaluate",`+
		`"tools":[{"name":"lookup_get","returns":"string","http":{"url":`+jsonText(srv.BaseURL("http_tool")+"/lookup")+`,"method":"GET","headers_env":{"Authorization":"LOOKUP_TOKEN"}}},`+
		`{"name":"lookup_post","http":{"url":`+jsonText(srv.BaseURL("http_tool")+"/lookup")+`}}]}`)
	// Seed 000's simple form goes to the evaluator.
	expectEq(t, "answered", evalString(t, e, `{"question":"Is 7 prime?"}`),
		`{"status":"success","tool":"evaluate","result":{"answer":true,"confidence":0.99}}`)
	failed := evalString(t, e, `{"question":"x"}`)
	if !strings.Contains(failed, `"error":"tool_failed"`) || !strings.Contains(failed, "500") {
		t.Fatalf("a 500 answer: %s", failed)
	}
	if notJSON := evalString(t, e, `{"question":"y"}`); !strings.Contains(notJSON, "not JSON") {
		t.Fatalf("an answer that is not JSON: %s", notJSON)
	}
	expectEq(t, "GET", evalString(t, e, `{"tool":"lookup_get","arguments":{"city":"Paris","tag":["old","river"],"limit":3}}`),
		`{"status":"success","tool":"lookup_get","result":"Paris: 12 results"}`)
	expectEq(t, "POST", evalString(t, e, `{"tool":"lookup_post","arguments":{"city":"Oslo"}}`),
		`{"status":"success","tool":"lookup_post","result":{"results":["fjord","museum"]}}`)
	// HTTP tools declare the network capability: test mode skips them.
	list := evalString(t, e, `{"tool":"tools_list","arguments":{"format":"clara"}}`)
	if !strings.Contains(list, `"name":"lookup_post"`) || !strings.Contains(list, `"capabilities":["network"]`) {
		t.Fatalf("%s", list)
	}
}

func TestChat_hosts_off_the_allowlist_are_denied(t *testing.T) {
	srv := scriptServer(t)
	e := rulesEngine(t, `{"network":{"allow_hosts":["api.example.com"]},"llm":{"base_url":`+jsonText(srv.BaseURL("none"))+`,"model":"m"}}`)
	out := evalString(t, e, `{"tool":"chat","arguments":{"prompt":"hi"}}`)
	if !strings.Contains(out, `"error":"denied"`) {
		t.Fatalf("%s", out)
	}
}

// With llm.provider and llm.base_url empty, a known model's name picks its
// provider's own endpoint; with network.allow_hosts naming only loopback,
// the call is denied before any connection, naming the host it chose.
func TestChat_the_provider_and_endpoint_come_from_the_model_name(t *testing.T) {
	e := rulesEngine(t, `{"network":{"allow_hosts":["127.0.0.1"]},"llm":{"model":"gpt-4o-mini","max_retries":0}}`)
	for model, host := range map[string]string{"gpt-4o-mini": "api.openai.com", "o3-mini": "api.openai.com", "claude-3-5-haiku-latest": "api.anthropic.com"} {
		out := evalString(t, e, `{"tool":"chat","arguments":{"prompt":"hi","model":`+jsonText(model)+`}}`)
		if !strings.Contains(out, `"error":"denied"`) || !strings.Contains(out, host) {
			t.Errorf("%s: %s", model, out)
		}
	}
	out := evalString(t, e, `{"tool":"chat","arguments":{"prompt":"hi","model":"llama3.1"}}`)
	if !strings.Contains(out, `"error":"tool_failed"`) || !strings.Contains(out, "set llm.base_url") {
		t.Errorf("llama3.1: %s", out)
	}
}

// TestChat_emits_on_query_start: seed 004's on_query_start could only be
// emitted by a host (issue 26 §5); the chat emits it as it starts, with
// context.question, and its rules' notices reach the model's first call.
func TestChat_emits_on_query_start(t *testing.T) {
	srv := scriptServer(t, loadScript(t, "query_start"))
	e := rulesEngine(t, `{"rules":{"builtin":false},"llm":{"base_url":`+jsonText(srv.BaseURL("query_start"))+`,"model":"test-model"}}`)
	loadRuleText(t, e, "query.toml", "[rule]\nid = \"query\"\ntrigger = \"on_query_start\"\n[action]\ntype = \"notify_self\"\n"+
		"message = \"Query seen: {{ context.question }}\"\n")
	out := evalString(t, e, `{"tool":"chat","session":"q1","arguments":{"prompt":"What time is it?"}}`)
	if !strings.Contains(out, `"content":"Noon."`) {
		t.Fatalf("%s", out)
	}
}
