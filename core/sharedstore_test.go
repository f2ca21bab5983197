package core_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/llm/llmtest"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/pgstore/pgtest"
	"github.com/clara-lib/clara/core/toolbox"
)

// Engines sharing one PostgreSQL (issue 31): each engine here is what one
// process has (its own pool, listener and instance); tests/pg/ runs the
// same through the built library in separate processes.

// sharedEngine is an engine on store.backend = "postgres" with url, its
// log in logs when not nil.
func sharedEngine(t *testing.T, url, more string, logs *syncBuffer) *core.Engine {
	t.Helper()
	opts := core.Options{Getenv: func(k string) string {
		if k == "CLARA_TEST_DB" {
			return url
		}
		return ""
	}}
	if logs != nil {
		opts.Logger = logging.New(logging.WriterSink(logs), logging.Debug)
	}
	e := core.New(opts)
	t.Cleanup(e.Close)
	if more == "" {
		// Generous: the race detector and a loaded machine slow the first
		// connections of a pool (3 s once ran out for 30 calls at once).
		more = `,"statement_timeout_ms":10000`
	}
	cfg := `{"state_dir":"","rules":{"paths":[],"watch":false},"plugins":{"paths":[]},` +
		`"store":{"backend":"postgres","url_env":"CLARA_TEST_DB"` + more + `}}`
	mustConfigure(t, e, cfg)
	return e
}

// eventually retries f until it is true, for up to ten seconds.
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestShared_configuration_needs_the_url_in_the_environment(t *testing.T) {
	e := newEngine(t)
	out := string(e.Configure([]byte(`{"store":{"backend":"postgres","url_env":"CLARA_NOT_SET_ANYWHERE"}}`)))
	if !strings.Contains(out, `"error":"invalid_request"`) || !strings.Contains(out, "CLARA_NOT_SET_ANYWHERE (store.url_env) is empty") {
		t.Fatalf("%s", out)
	}
	out = string(e.Configure([]byte(`{"store":{"backend":"mysql"}}`)))
	if !strings.Contains(out, "not a store backend") {
		t.Fatalf("%s", out)
	}
}

func TestShared_state_set_in_one_read_by_another_and_its_rules(t *testing.T) {
	url := pgtest.URL(t)
	a := sharedEngine(t, url, "", nil)
	b := sharedEngine(t, url, "", nil)
	// b's rule reads context.state: its cached scope must follow a's writes.
	mustEval(t, b, `{"tool":"rules_load","arguments":{"name":"r.toml","toml":"[[rules]]\nid = \"stop\"\ntrigger = \"on_tool_call\"\n[rules.condition]\nexpression = \"context.state.stop == true\"\n[rules.action]\ntype = \"deny\"\nreason = \"stopped\"\n"}}`)
	expectSub(t, evalString(t, b, `{"tool":"echo","session":"s","arguments":{}}`), `"status":"success"`)
	expectSub(t, evalString(t, a, `{"tool":"state_set","session":"s","arguments":{"key":"stop","value":true}}`), `"stored":true`)
	expectSub(t, evalString(t, b, `{"tool":"state_get","session":"s","arguments":{"key":"stop"}}`), `"found":true,"value":true`)
	eventually(t, "b's rule sees a's state", func() bool {
		return strings.Contains(evalString(t, b, `{"tool":"echo","session":"s","arguments":{}}`), `"error":"denied"`)
	})
}

func TestShared_rate_limit_across_engines(t *testing.T) {
	url := pgtest.URL(t)
	var engines []*core.Engine
	for i := 0; i < 3; i++ {
		e := sharedEngine(t, url, "", nil)
		if err := e.RegisterTool([]byte(`{"name":"scarce","input_schema":{"type":"object"},"limits":{"rate_per_min":7}}`),
			toolbox.ToolOptions{Run: func(context.Context, toolbox.Call) ([]byte, error) { return []byte(`{}`), nil }}); err != nil {
			t.Fatal(err)
		}
		engines = append(engines, e)
	}
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := string(engines[i%3].Evaluate([]byte(`{"tool":"scarce","arguments":{}}`)))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case strings.Contains(out, `"status":"success"`):
				counts["ok"]++
			case strings.Contains(out, `"error":"rate_limited"`) && strings.Contains(out, `"retry_after_ms":`):
				counts["limited"]++
			default:
				t.Errorf("%s", out)
			}
		}()
	}
	wg.Wait()
	if counts["ok"] != 7 || counts["limited"] != 23 {
		t.Fatalf("three engines admitted %d calls of a tool allowing 7 a minute (%d limited)", counts["ok"], counts["limited"])
	}
}

func TestShared_budget_per_session_across_engines(t *testing.T) {
	url := pgtest.URL(t)
	a := sharedEngine(t, url, "", nil)
	b := sharedEngine(t, url, "", nil)
	for _, e := range []*core.Engine{a, b} {
		mustConfigure(t, e, `{"limits":{"max_calls_per_session":3}}`)
	}
	ok := 0
	for i := 0; i < 8; i++ {
		out := evalString(t, []*core.Engine{a, b}[i%2], `{"tool":"echo","session":"sb","arguments":{}}`)
		if strings.Contains(out, `"status":"success"`) {
			ok++
		} else {
			expectSub(t, out, `"error":"budget_exhausted"`)
		}
	}
	if ok != 3 {
		t.Fatalf("%d calls ran against a budget of 3 per session", ok)
	}
	mustEval(t, a, `{"tool":"session_end","session":"sb","arguments":{}}`)
	expectSub(t, evalString(t, b, `{"tool":"echo","session":"sb","arguments":{}}`), `"status":"success"`)
}

func TestShared_notices_queued_in_one_drained_in_another(t *testing.T) {
	url := pgtest.URL(t)
	a := sharedEngine(t, url, "", nil)
	b := sharedEngine(t, url, "", nil)
	mustEval(t, a, `{"tool":"rules_load","arguments":{"name":"n.toml","toml":"[[rules]]\nid = \"hello\"\ntrigger = \"ping\"\n[rules.action]\ntype = \"notify_self\"\nmessage = \"hello from a\"\n"}}`)
	out := string(a.Emit([]byte(`{"event":"ping","session":"sn"}`)))
	expectSub(t, out, `"status":"success"`)
	got := evalString(t, b, `{"tool":"notifications_drain","session":"sn","arguments":{}}`)
	expectSub(t, got, `"message":"hello from a"`)
	expectSub(t, evalString(t, a, `{"tool":"notifications_drain","session":"sn","arguments":{}}`), `"notices":[]`)
}

// The seed's accumulator on the shared store (seed 004, issue 32): repeats
// raised in two processes are one notice with a count, a notice held
// until an event is released by that event in another process, and one
// deferred by a time waits for it, wherever it is drained.
func TestShared_notices_deduped_and_deferred_across_engines(t *testing.T) {
	url := pgtest.URL(t)
	a := sharedEngine(t, url, "", nil)
	b := sharedEngine(t, url, "", nil)
	for _, e := range []*core.Engine{a, b} {
		mustConfigure(t, e, `{"rules":{"builtin":false}}`)
	}
	// The seed's rules/token_warning.toml and two deferred reminders.
	rule := `
[[rules]]
id = "token-budget-warning"
trigger = "on_turn_start"
[rules.condition]
expression = "context.turn.token_usage > 0.8"
[[rules.actions]]
type = "notify_self"
message = "Token budget at {{ context.turn.token_usage | percent }}. Consider wrapping up."
priority = "high"

[[rules]]
id = "remind-next-turn"
trigger = "task_done"
[[rules.actions]]
type = "notify_self"
message = "{{ context.task }} is done"
deliver_on = "on_turn_start"

[[rules]]
id = "remind-in-a-while"
trigger = "task_done"
[[rules.actions]]
type = "notify_self"
message = "check on {{ context.task }}"
deliver_after_ms = 300
`
	for _, e := range []*core.Engine{a, b} {
		mustEval(t, e, `{"tool":"rules_load","arguments":{"name":"oracle.toml","toml":`+jsonText(rule)+`}}`)
	}
	turn := `{"event":"on_turn_start","session":"oracle","payload":{"turn":{"token_usage":0.85}}}`
	for _, e := range []*core.Engine{a, b, a} {
		expectSub(t, string(e.Emit([]byte(turn))), `"notices":[{"rule":"token-budget-warning"`)
	}
	expectEq(t, "three identical notices of two processes are one", evalString(t, b, `{"tool":"notifications_drain","session":"oracle"}`),
		`{"status":"success","tool":"notifications_drain","result":{"notices":[{"rule":"token-budget-warning","message":"Token budget at 85%. Consider wrapping up.","priority":"high","event":"on_turn_start","count":3}],"dropped":0}}`)

	expectSub(t, string(a.Emit([]byte(`{"event":"task_done","session":"oracle","payload":{"task":"indexing"}}`))), `"notices":[]`)
	empty := `{"status":"success","tool":"notifications_drain","result":{"notices":[],"dropped":0}}`
	expectEq(t, "held", evalString(t, b, `{"tool":"notifications_drain","session":"oracle"}`), empty)
	b.Emit([]byte(`{"event":"on_turn_start","session":"other"}`)) // another session's turn
	expectEq(t, "held still", evalString(t, a, `{"tool":"notifications_drain","session":"oracle"}`), empty)
	b.Emit([]byte(`{"event":"on_turn_start","session":"oracle","payload":{"turn":{"token_usage":0.1}}}`))
	expectEq(t, "released by the other process's turn", evalString(t, a, `{"tool":"notifications_drain","session":"oracle"}`),
		`{"status":"success","tool":"notifications_drain","result":{"notices":[{"rule":"remind-next-turn","message":"indexing is done","priority":"normal","event":"task_done"}],"dropped":0}}`)
	time.Sleep(350 * time.Millisecond)
	expectEq(t, "delivered after its time", evalString(t, b, `{"tool":"notifications_drain","session":"oracle"}`),
		`{"status":"success","tool":"notifications_drain","result":{"notices":[{"rule":"remind-in-a-while","message":"check on indexing","priority":"normal","event":"task_done"}],"dropped":0}}`)
}

func TestShared_approval_asked_in_one_decided_in_another(t *testing.T) {
	url := pgtest.URL(t)
	a := sharedEngine(t, url, "", nil)
	b := sharedEngine(t, url, "", nil)
	a.SetApprover(core.ApproverFunc(func(context.Context, *core.ApprovalRequest) (core.ApprovalDecision, bool) {
		return core.ApprovalDecision{}, false // leaves it to approval_decide
	}))
	if err := a.RegisterTool([]byte(`{"name":"launch","input_schema":{"type":"object"},"needs_approval":true}`),
		toolbox.ToolOptions{Run: func(_ context.Context, c toolbox.Call) ([]byte, error) { return c.Arguments, nil }}); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() { done <- string(a.Evaluate([]byte(`{"tool":"launch","session":"sa","arguments":{"n":1}}`))) }()
	var id string
	eventually(t, "b lists a's approval", func() bool {
		out := evalString(t, b, `{"tool":"approvals_list","arguments":{}}`)
		if i := strings.Index(out, `{"id":`); i >= 0 && strings.Contains(out, `"tool":"launch"`) {
			id = out[i+6 : i+6+strings.IndexAny(out[i+6:], ",}")]
			return true
		}
		return false
	})
	expectSub(t, evalString(t, b, `{"tool":"approval_decide","arguments":{"id":`+id+`,"decision":"approve","arguments":{"n":2}}}`), `"status":"success"`)
	select {
	case out := <-done:
		expectSub(t, out, `"result":{"n":2}`)
	case <-time.After(10 * time.Second):
		t.Fatal("a's call did not learn of b's decision")
	}
	expectSub(t, evalString(t, b, `{"tool":"approval_decide","arguments":{"id":`+id+`,"decision":"reject"}}`), `"error":"invalid_args"`)
}

func TestShared_rules_load_reaches_the_others(t *testing.T) {
	url := pgtest.URL(t)
	a := sharedEngine(t, url, "", nil)
	b := sharedEngine(t, url, "", nil)
	mustEval(t, a, `{"tool":"rules_load","arguments":{"name":"deny.toml","toml":"[[rules]]\nid = \"no_echo\"\ntrigger = \"on_tool_call\"\n[rules.condition]\nexpression = \"context.tool.name == 'echo'\"\n[rules.action]\ntype = \"deny\"\nreason = \"closed\"\n"}}`)
	expectSub(t, evalString(t, a, `{"tool":"echo","arguments":{}}`), `denied by rule \"no_echo\"`)
	eventually(t, "b loads a's rule", func() bool {
		return strings.Contains(evalString(t, b, `{"tool":"echo","arguments":{}}`), `denied by rule \"no_echo\"`)
	})
	// A process that starts later applies the changes made before.
	c := sharedEngine(t, url, "", nil)
	eventually(t, "a later process loads the rule", func() bool {
		return strings.Contains(evalString(t, c, `{"tool":"echo","arguments":{}}`), `denied by rule \"no_echo\"`)
	})
}

func TestShared_conversation_continued_in_another_engine(t *testing.T) {
	sc, err := llmtest.ParseScript("conv", []byte(`
provider = "openai"
[[exchange]]
[exchange.expect]
messages = 1
last_user = "my name is Ada"
[exchange.reply]
json = '''{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop",
 "message":{"role":"assistant","content":"Hello Ada."}}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}'''
[[exchange]]
[exchange.expect]
messages = 3
last_user = "what is my name?"
contains = ["my name is Ada", "Hello Ada."]
[exchange.reply]
json = '''{"id":"c2","object":"chat.completion","created":2,"model":"m","choices":[{"index":0,"finish_reason":"stop",
 "message":{"role":"assistant","content":"Ada."}}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}'''
`))
	if err != nil {
		t.Fatal(err)
	}
	srv := scriptServer(t, sc)
	llm := `,"llm":{"base_url":` + jsonText(srv.BaseURL("conv")) + `,"model":"m"}`
	url := pgtest.URL(t)
	a := sharedEngine(t, url, "", nil)
	mustConfigure(t, a, `{`+llm[1:]+`}`)
	expectSub(t, evalString(t, a, `{"tool":"chat","session":"ada","arguments":{"prompt":"my name is Ada"}}`), `"content":"Hello Ada."`)
	a.Close() // the first process is gone
	b := sharedEngine(t, url, "", nil)
	mustConfigure(t, b, `{`+llm[1:]+`}`)
	expectSub(t, evalString(t, b, `{"tool":"chat","session":"ada","arguments":{"prompt":"what is my name?"}}`), `"content":"Ada."`)
	hist := evalString(t, b, `{"tool":"chat_history","session":"ada","arguments":{}}`)
	expectSub(t, hist, `"turns":2`)
	expectSub(t, hist, `{"role":"user","content":"my name is Ada"},{"role":"assistant","content":"Hello Ada."},{"role":"user","content":"what is my name?"},{"role":"assistant","content":"Ada."}`)
}

// TestShared_unavailable_fails_closed_in_time: the database is not there:
// a rate-limited call and state_set answer unavailable within the
// deadline, naming the store and never the password; on_unavailable =
// "local" carries on in the process.
func TestShared_unavailable_fails_closed_in_time(t *testing.T) {
	const password = "pw-that-must-not-show"
	url := "postgres://clara:" + password + "@127.0.0.1:1/clara"
	var logs syncBuffer
	e := sharedEngine(t, url, `,"statement_timeout_ms":300`, &logs)
	if err := e.RegisterTool([]byte(`{"name":"scarce","input_schema":{"type":"object"},"limits":{"rate_per_min":2}}`),
		toolbox.ToolOptions{Run: func(context.Context, toolbox.Call) ([]byte, error) { return []byte(`{}`), nil }}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out := evalString(t, e, `{"tool":"scarce","arguments":{}}`)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("took %v", took)
	}
	expectSub(t, out, `"error":"unavailable"`)
	expectSub(t, out, `its rate_per_min is kept in the shared store (PostgreSQL at 127.0.0.1:1, database clara) is unavailable`)
	out2 := evalString(t, e, `{"tool":"state_set","arguments":{"key":"k","value":1}}`)
	expectSub(t, out2, `"error":"unavailable"`)
	expectSub(t, out2, `"details":{"store":"postgres"}`)
	// The plain call needs no store.
	expectSub(t, evalString(t, e, `{"tool":"echo","arguments":{}}`), `"status":"success"`)

	mustConfigure(t, e, `{"store":{"on_unavailable":{"limits":"local","state":"local"}}}`)
	for i := 0; i < 2; i++ {
		expectSub(t, evalString(t, e, `{"tool":"scarce","arguments":{}}`), `"status":"success"`)
	}
	expectSub(t, evalString(t, e, `{"tool":"scarce","arguments":{}}`), `"error":"rate_limited"`) // this process's own window
	expectSub(t, evalString(t, e, `{"tool":"state_set","arguments":{"key":"k","value":1}}`), `"stored":true`)
	for _, text := range []string{out, out2, logs.String()} {
		if strings.Contains(text, password) {
			t.Fatalf("the password leaked: %s", text)
		}
	}
}

func mustEval(t *testing.T, e *core.Engine, req string) string {
	t.Helper()
	out := evalString(t, e, req)
	if !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatalf("%s: %s", req, out)
	}
	return out
}

func expectSub(t *testing.T, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Fatalf("%s\ndoes not hold\n%s", got, want)
	}
}

var _ = fmt.Sprint

// A rule the host registered (seed 004's Tier 1) is the process's own: a
// rules_load that another process announces reaches this one and leaves
// the host's rule in force beside it.
func TestShared_host_rule_stays_through_another_process_rules_load(t *testing.T) {
	url := pgtest.URL(t)
	a := sharedEngine(t, url, "", nil)
	b := sharedEngine(t, url, "", nil)
	var h hostFuncs
	if err := a.RegisterRule([]byte(`{id: 'big-echo', trigger: 'on_tool_call', priority: 10}`), h.funcs(func(ev map[string]any) (bool, error) {
		n, _ := argOf(ev, "n").(float64)
		return n > 5, nil
	}, func(map[string]any) ([]byte, error) { return []byte(`{"type":"deny","reason":"too big"}`), nil })); err != nil {
		t.Fatal(err)
	}
	mustEval(t, b, `{"tool":"rules_load","arguments":{"name":"b.toml","toml":"[[rules]]\nid = \"from-b\"\ntrigger = \"on_tool_call\"\n[rules.action]\ntype = \"notify_self\"\nmessage = \"b's rule\"\n"}}`)
	eventually(t, "a applies b's rules_load", func() bool {
		return strings.Contains(evalString(t, a, `{"tool":"echo","arguments":{"n":1}}`), `"message":"b's rule"`)
	})
	expectSub(t, evalString(t, a, `{"tool":"echo","arguments":{"n":9}}`), `denied by rule \"big-echo\": too big`)
	expectSub(t, evalString(t, b, `{"tool":"echo","arguments":{"n":9}}`), `"status":"success"`)
}
