package core_test

import (
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/clara-lib/clara/core/logging"
)

// Semantic rule conditions through the engine, against the scripted
// provider's embeddings endpoint (tests/llm/embeddings.toml: fixed
// vectors). The rule is the seed's example (core/rules/testdata/seed004/
// semantic.toml, byte for byte) with a rule and an action around it.

func semanticRule(t *testing.T) string {
	t.Helper()
	seed, err := os.ReadFile("rules/testdata/seed004/semantic.toml")
	if err != nil {
		t.Fatal(err)
	}
	return string(seed) + "\n[rule]\nid = \"auth-query\"\ntrigger = \"on_tool_call\"\n\n[action]\ntype = \"notify_self\"\nmessage = \"about authentication: {{ context.tool.arguments.query }}\"\n"
}

func rulesLoad(name, toml string) string {
	return `{"tool":"rules_load","arguments":{"name":` + jsonText(name) + `,"toml":` + jsonText(toml) + `}}`
}

func TestSemantic_condition_against_the_scripted_embeddings(t *testing.T) {
	srv := scriptServer(t, loadScript(t, "embeddings"))
	e := rulesEngine(t, `{"llm":{"base_url":`+jsonText(srv.BaseURL("embeddings"))+`,"embedding_model":"emb-test"}}`)
	if out := evalString(t, e, rulesLoad("auth.toml", semanticRule(t))); !strings.Contains(out, `"status":"success"`) {
		t.Fatalf("rules_load: %s", out)
	}
	embedded := func() int { return srv.Reports()[0].Embedded }
	if n := embedded(); n != 1 {
		t.Fatalf("%d embeddings requests at load, want 1 (the concept)", n)
	}
	call := func(session, query string) string {
		return evalString(t, e, `{"tool":"echo","session":`+jsonText(session)+`,"trace":true,"arguments":{"query":`+jsonText(query)+`}}`)
	}
	// Above the threshold (cosine 0.994): the rule fires.
	out := call("s1", "reset my login password")
	if !strings.Contains(out, `"message":"about authentication: reset my login password"`) || !strings.Contains(out, `"value":0.99`) {
		t.Fatalf("above the threshold: %s", out)
	}
	// Below (cosine 0.105): it does not.
	out = call("s1", "weather in Paris")
	if strings.Contains(out, `"notices":[{`) || !strings.Contains(out, `"matched":false,"value":0.10`) {
		t.Fatalf("below the threshold: %s", out)
	}
	if n := embedded(); n != 3 {
		t.Fatalf("%d embeddings requests, want 3", n)
	}
	// The same text again in the session: from the cache, no request.
	out = call("s1", "reset my login password")
	if !strings.Contains(out, `"message":"about authentication`) {
		t.Fatalf("cached: %s", out)
	}
	if n := embedded(); n != 3 {
		t.Fatalf("%d embeddings requests after a cache hit, want 3", n)
	}
	// Another session has its own cache.
	call("s2", "reset my login password")
	if n := embedded(); n != 4 {
		t.Fatalf("%d embeddings requests after another session, want 4", n)
	}
	// session_end forgets the session's vectors.
	evalString(t, e, `{"tool":"session_end","session":"s1"}`)
	call("s1", "reset my login password")
	if n := embedded(); n != 5 {
		t.Fatalf("%d embeddings requests after session_end, want 5", n)
	}
	// No query: nothing to compare, no request, no match, no error.
	out = evalString(t, e, `{"tool":"echo","session":"s1","trace":true,"arguments":{}}`)
	if !strings.Contains(out, `"rule":"auth-query","event":"on_tool_call","matched":false,"duration_us"`) || embedded() != 5 {
		t.Fatalf("no query: %s", out)
	}
	// Reloading the same rules reuses the concept's vector.
	evalString(t, e, rulesLoad("auth.toml", semanticRule(t)))
	if n := embedded(); n != 5 {
		t.Fatalf("%d embeddings requests after a reload, want 5", n)
	}
}

// A semantic condition whose text cannot be embedded (the provider
// refuses it, or is gone) cannot tell: on on_tool_call it denies the call
// (issue 25, finding 16: the provider could otherwise switch a semantic
// deny rule off); on any other event it does not match. Either way the
// reason is logged and traced.
func TestSemantic_a_failure_to_embed_denies_on_on_tool_call_and_is_no_match_elsewhere(t *testing.T) {
	srv := scriptServer(t, loadScript(t, "embeddings"))
	e := rulesEngine(t, `{"llm":{"base_url":`+jsonText(srv.BaseURL("embeddings"))+`,"embedding_model":"emb-test","max_retries":0}}`)
	mustLoad(t, e, "auth.toml", semanticRule(t))
	var mu sync.Mutex
	var logged []string
	e.SetLogSink(func(_ logging.Level, msg string) {
		mu.Lock()
		logged = append(logged, msg)
		mu.Unlock()
	}, logging.Warn)
	defer e.SetLogSink(nil, 0)
	// The script has no vector for this text: the server answers 400.
	out := evalString(t, e, `{"tool":"echo","session":"s1","trace":true,"arguments":{"query":"unknown text"}}`)
	srv.Reset() // the refusal was on purpose
	if !strings.HasPrefix(out, `{"status":"error","error":"denied","message":"tool \"echo\" denied by rule \"auth-query\": its condition could not be evaluated, and a rule on on_tool_call that cannot tell refuses the call: semantic: embedding context.tool.arguments.query: `) ||
		!strings.Contains(out, `"matched":false,"error":"condition: semantic: embedding context.tool.arguments.query: `) {
		t.Fatalf("%s", out)
	}
	mu.Lock()
	if len(logged) != 1 || !strings.Contains(logged[0], `rule "auth-query" (auth.toml:`) || !strings.Contains(logged[0], "status 400") {
		t.Fatalf("log: %q", logged)
	}
	logged = nil
	mu.Unlock()
	// A text the vectors are known for is decided as ever, before and after.
	out = evalString(t, e, `{"tool":"echo","session":"s1","arguments":{"query":"weather in Paris"}}`)
	expectEq(t, "decided", out, `{"status":"success","tool":"echo","result":{"query":"weather in Paris"}}`)
	// The provider gone: the call is denied.
	srv.Close()
	out = evalString(t, e, `{"tool":"echo","session":"s1","arguments":{"query":"reset my login password"}}`)
	if !strings.Contains(out, `"error":"denied","message":"tool \"echo\" denied by rule \"auth-query\": its condition could not be evaluated`) {
		t.Fatalf("provider gone: %s", out)
	}
	// The same failure after the call (on_tool_complete) does not match.
	mustLoad(t, e, "auth.toml", strings.Replace(semanticRule(t), `trigger = "on_tool_call"`, `trigger = "on_tool_complete"`, 1))
	out = evalString(t, e, `{"tool":"echo","session":"s1","trace":true,"arguments":{"query":"reset my login password"}}`)
	if !strings.HasPrefix(out, `{"status":"success","tool":"echo","result":{"query":"reset my login password"},"trace":[`) ||
		!strings.Contains(out, `{"rule":"auth-query","event":"on_tool_complete","matched":false,"error":"condition: semantic: embedding context.tool.arguments.query: `) {
		t.Fatalf("after the call: %s", out)
	}
}

func TestSemantic_load_errors_name_the_file_and_line(t *testing.T) {
	srv := scriptServer(t, loadScript(t, "embeddings"))
	// Without an embedding model.
	e := rulesEngine(t, "")
	out := evalString(t, e, rulesLoad("auth.toml", semanticRule(t)))
	if !strings.Contains(out, `auth.toml:5: rule \"auth-query\": semantic condition: no embedding model: set llm.base_url and llm.embedding_model`) {
		t.Fatalf("no model: %s", out)
	}
	// A concept the server cannot embed: the load fails, positioned.
	mustConfigure(t, e, `{"llm":{"base_url":`+jsonText(srv.BaseURL("embeddings"))+`,"embedding_model":"emb-test","max_retries":0}}`)
	other := strings.Replace(semanticRule(t), `concept = "authentication"`, `concept = "billing"`, 1)
	out = evalString(t, e, rulesLoad("billing.toml", other))
	srv.Reset()
	if !strings.Contains(out, `billing.toml:5: rule \"auth-query\": semantic condition: the concept's vector: `) || !strings.Contains(out, "no vector for") {
		t.Fatalf("concept without a vector: %s", out)
	}
	// A bad condition is a load error too.
	bad := strings.Replace(semanticRule(t), `threshold = 0.7`, `threshold = 7`, 1)
	out = evalString(t, e, rulesLoad("bad.toml", bad))
	if !strings.Contains(out, `bad.toml:2: rule \"auth-query\": semantic condition: threshold must be a number from -1 to 1`) {
		t.Fatalf("bad threshold: %s", out)
	}
}
