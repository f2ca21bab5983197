package core_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/llm/llmtest"
	"github.com/clara-lib/clara/core/toolbox"
)

// Issue 32: what seeds 002 and 003 promise of the engine.

// Seed 002's AI.TOOL.LIMITS: a limit changed while a call runs holds for
// the calls that start after the change; the running one keeps its own.
// The tool's release runs once, when the last of both is done with.
func TestToolLimits_holdForCallsThatStartAfter(t *testing.T) {
	e := newEngine(t)
	started, release := make(chan struct{}, 4), make(chan struct{})
	var released atomic.Int32
	run := func(ctx context.Context, call toolbox.Call) ([]byte, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return []byte(`"done"`), nil
	}
	if err := e.RegisterTool([]byte(`{name: 'slow', limits: {timeout_ms: 5000}}`), toolbox.ToolOptions{Run: run, OnRelease: func() { released.Add(1) }}); err != nil {
		t.Fatal(err)
	}
	first := make(chan string)
	go func() { first <- string(e.Evaluate([]byte(`{"tool":"slow"}`))) }()
	<-started
	if perr := e.SetToolLimits("slow", []byte(`{timeout_ms: 50}`)); perr != nil {
		t.Fatal(perr)
	}
	// A call that starts now runs under 50 ms.
	out := string(e.Evaluate([]byte(`{"tool":"slow"}`)))
	if !strings.Contains(out, `"error":"timeout"`) {
		t.Fatalf("the new limit did not hold: %s", out)
	}
	<-started
	time.Sleep(100 * time.Millisecond) // the first call is past 50 ms: it keeps its 5 s
	close(release)
	if got := <-first; got != `{"status":"success","tool":"slow","result":"done"}` {
		t.Fatalf("the running call: %s", got)
	}
	out = string(e.Evaluate([]byte(`{"tool":"tool_limits","arguments":{"name":"slow","limits":{"max_concurrency":2}}}`)))
	if out != `{"status":"success","tool":"tool_limits","result":{"name":"slow","limits":{"timeout_ms":50,"rate_per_min":0,"rate_scope":"tool","max_output_bytes":0,"max_concurrency":2},"previous":{"timeout_ms":50,"rate_per_min":0,"rate_scope":"tool","max_output_bytes":0,"max_concurrency":0}}}` {
		t.Fatal(out)
	}
	if released.Load() != 0 {
		t.Fatal("released while registered")
	}
	if err := e.UnregisterTool("slow"); err != nil {
		t.Fatal(err)
	}
	if released.Load() != 1 {
		t.Fatalf("released %d times", released.Load())
	}
	// Nested calls (a model, a rule) may not change limits: tool_limits is
	// administrative.
	out = string(e.Evaluate([]byte(`{"tool":"tools_list","arguments":{"llm_visible_only":true}}`)))
	if strings.Contains(out, `"tool_limits"`) {
		t.Fatalf("tool_limits is offered to models: %s", out)
	}
}

// Seed 003's getMemory(): chat_history returns what a session's chats
// said, without their system messages; a nested call reads only its own
// session's.
func TestChatHistory(t *testing.T) {
	script, err := llmtest.ParseScript("hist", []byte(`provider = "openai"
order = "turn"
[[exchange]]
reply.json = '{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"echo","arguments":"{\"n\":1}"}}]},"finish_reason":"tool_calls"}]}'
[[exchange]]
reply.json = '{"choices":[{"index":0,"message":{"role":"assistant","content":"Done, Ada."},"finish_reason":"stop"}]}'
`))
	if err != nil {
		t.Fatal(err)
	}
	srv := scriptServer(t, script)
	e := rulesEngine(t, `{"llm":{"base_url":`+jsonText(srv.BaseURL("hist"))+`,"model":"m"}}`)
	out := evalString(t, e, `{"tool":"chat","session":"s1","arguments":{"system":"You are terse.","prompt":"I am Ada.","allow_tools":true,"tools":["echo"]}}`)
	if !strings.Contains(out, `"content":"Done, Ada."`) {
		t.Fatal(out)
	}
	want := `{"status":"success","tool":"chat_history","result":{"session":"s1","turns":2,"messages":[` +
		`{"role":"user","content":"I am Ada."},` +
		`{"role":"assistant","content":"","tool_calls":[{"id":"c1","name":"echo","arguments":{"n":1}}]},` +
		`{"role":"tool","content":"{\"n\":1}","tool_call_id":"c1","name":"echo"},` +
		`{"role":"assistant","content":"Done, Ada."}]}}`
	if got := evalString(t, e, `{"tool":"chat_history","session":"s1"}`); got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	if got := evalString(t, e, `{"tool":"chat_history","arguments":{"session":"s1"}}`); got != want {
		t.Fatalf("by name: %s", got)
	}
	if got := evalString(t, e, `{"tool":"chat_history","session":"other"}`); got != `{"status":"success","tool":"chat_history","result":{"session":"other","turns":0,"messages":[]}}` {
		t.Fatal(got)
	}
	if got := evalString(t, e, `{"tool":"chat_history"}`); got != `{"status":"success","tool":"chat_history","result":{"session":"default","turns":0,"messages":[]}}` {
		t.Fatal(got)
	}
	// A rule's call of another session's history is refused.
	loadRuleText(t, e, "peek", `
[[rules]]
id = "peek"
trigger = "on_custom"
[[rules.actions]]
type = "call_tool"
tool = "chat_history"
arguments = { session = "s1" }
`)
	out = string(e.Emit([]byte(`{"event":"on_custom","session":"s2"}`)))
	if strings.Contains(out, "Ada") || !strings.Contains(out, "reads its own session's conversation only") {
		t.Fatalf("a rule of s2 read s1's conversation: %s", out)
	}
	e.Reset()
	if got := evalString(t, e, `{"tool":"chat_history","session":"s1"}`); !strings.Contains(got, `"messages":[]`) {
		t.Fatalf("reset kept it: %s", got)
	}
	_ = core.Options{}
}
