package core_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/llm/llmtest"
	"github.com/clara-lib/clara/core/telemetry"
	"github.com/clara-lib/clara/core/telemetry/otlptest"
	"github.com/clara-lib/clara/core/toolbox"
)

// Issue 29: what an operator sees of Clara through an OTLP backend. A
// loopback receiver decodes what the real exporters send.

const (
	parentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	parentSpan  = "00f067aa0ba902b7"
	traceparent = "00-" + parentTrace + "-" + parentSpan + "-01"
	otelSecret  = "sk-otel-secret-4242"
)

// telemetryEngine is an engine whose environment points the exporters at
// rcv (and holds the secrets env names).
func telemetryEngine(t *testing.T, rcv *otlptest.Receiver, env map[string]string) *core.Engine {
	t.Helper()
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_SERVICE_NAME": "clara-test"}
	for k, v := range env {
		vars[k] = v
	}
	e := core.New(core.Options{Getenv: func(k string) string { return vars[k] }})
	t.Cleanup(e.Close)
	mustConfigure(t, e, "state_dir = \"\"\n[rules]\npaths = []\n")
	return e
}

func flush(t *testing.T, e *core.Engine) {
	t.Helper()
	if err := e.FlushTelemetry(10 * time.Second); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

func spanNamed(t *testing.T, spans []otlptest.Span, name string) otlptest.Span {
	t.Helper()
	var found []otlptest.Span
	for _, s := range spans {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		var names []string
		for _, s := range spans {
			names = append(names, s.Name)
		}
		t.Fatalf("%d spans named %q among %q", len(found), name, names)
	}
	return found[0]
}

func childrenOf(spans []otlptest.Span, parent otlptest.Span, name string) []otlptest.Span {
	var out []otlptest.Span
	for _, s := range spans {
		if s.ParentID == parent.SpanID && s.TraceID == parent.TraceID && s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func wantAttr(t *testing.T, s otlptest.Span, key string, want any) {
	t.Helper()
	if got := s.Attrs[key]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("span %q: %s = %v, want %v (attrs %v)", s.Name, key, got, want, s.Attrs)
	}
}

const twoCallsScript = `
provider = "openai"
[[exchange]]
[exchange.expect]
tools = ["get_current_weather", "forbidden_tool"]
headers = { traceparent = "*", Authorization = "Bearer ` + otelSecret + `" }
[exchange.reply]
json = '''{"id":"resp-1","object":"chat.completion","created":1,"model":"m-2026","choices":[{"index":0,"finish_reason":"tool_calls",
 "message":{"role":"assistant","content":null,"tool_calls":[
  {"id":"call_1","type":"function","function":{"name":"get_current_weather","arguments":"{\"location\":\"Paris\"}"}},
  {"id":"call_2","type":"function","function":{"name":"forbidden_tool","arguments":"{}"}}]}}],
 "usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120}}'''
[[exchange]]
[exchange.expect]
headers = { traceparent = "*" }
tool_results = [{ id = "call_1", contains = "22" }, { id = "call_2", contains = "denied" }]
[exchange.reply]
json = '''{"id":"resp-2","object":"chat.completion","created":2,"model":"m-2026","choices":[{"index":0,"finish_reason":"stop",
 "message":{"role":"assistant","content":"It is 22 in Paris; the other tool is closed."}}],"usage":{"prompt_tokens":150,"completion_tokens":12,"total_tokens":162}}'''
`

// TestTelemetry_a_chat_with_two_tool_calls_one_denied: the request's
// _meta.traceparent is the parent of the chat's invoke_agent span; each
// model call is a "chat m" span, each tool call an execute_tool span of
// the chat; the denial is an event naming the rule, and counted; the
// model server saw traceparent; no secret reaches the backend, content
// included; the audit links the tool calls to the chat.
func TestTelemetry_a_chat_with_two_tool_calls_one_denied(t *testing.T) {
	rcv := otlptest.Start(t)
	sc, err := llmtest.ParseScript("two", []byte(twoCallsScript))
	if err != nil {
		t.Fatal(err)
	}
	srv := scriptServer(t, sc)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "closed.toml"), []byte(`
[rule]
id = "forbidden_closed"
trigger = "on_tool_call"
[condition]
expression = 'context.tool.name == "forbidden_tool"'
[action]
type = "deny"
reason = "that tool is closed"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	e := telemetryEngine(t, rcv, map[string]string{"CLARA_TEST_KEY": otelSecret})
	mustConfigure(t, e, `{"project_root":`+jsonText(root)+`,"rules":{"paths":["*.toml"],"builtin":false},"telemetry":{"content":true},`+
		`"llm":{"base_url":`+jsonText(srv.BaseURL("two"))+`,"model":"m","api_key_env":"CLARA_TEST_KEY"}}`)
	if !e.TelemetryOn() {
		t.Fatal("OTEL_EXPORTER_OTLP_ENDPOINT did not turn telemetry on")
	}
	// The weather tool answers with the key in its text: the content
	// recorded on spans must have it cut out.
	run := func(_ context.Context, call toolbox.Call) ([]byte, error) {
		return []byte(`{"temperature":"22","note":"fetched with ` + otelSecret + `"}`), nil
	}
	for _, name := range []string{"get_current_weather", "forbidden_tool"} {
		d := `{"name":"` + name + `","description":"d","input_schema":{"type":"object"}}`
		if err := e.RegisterTool([]byte(d), toolbox.ToolOptions{Run: run}); err != nil {
			t.Fatal(err)
		}
	}
	out := evalString(t, e, `{"tool":"chat","id":"req-1","session":"conv-7","_meta":{"traceparent":"`+traceparent+`"},`+
		`"arguments":{"prompt":"Weather in Paris?","allow_tools":true,"tools":["get_current_weather","forbidden_tool"],"max_tool_calls":3}}`)
	var env struct {
		Status     string
		DecisionID string `json:"decision_id"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil || env.Status != "success" || env.DecisionID == "" {
		t.Fatalf("%v: %s", err, out)
	}
	flush(t, e)
	spans := rcv.Spans()

	agent := spanNamed(t, spans, "invoke_agent clara")
	if agent.TraceID != parentTrace || agent.ParentID != parentSpan {
		t.Fatalf("invoke_agent is not the child of _meta.traceparent: %+v", agent)
	}
	wantAttr(t, agent, telemetry.AttrOperationName, "invoke_agent")
	wantAttr(t, agent, telemetry.AttrConversationID, "conv-7")
	wantAttr(t, agent, telemetry.AttrDecisionID, env.DecisionID)
	wantAttr(t, agent, telemetry.AttrProviderName, "openai")
	wantAttr(t, agent, telemetry.AttrInputTokens, 250)
	if agent.Resource["service.name"] != "clara-test" {
		t.Errorf("resource %v", agent.Resource)
	}

	chats := childrenOf(spans, agent, "chat m")
	if len(chats) != 2 {
		t.Fatalf("%d chat spans under invoke_agent", len(chats))
	}
	for _, c := range chats {
		wantAttr(t, c, telemetry.AttrOperationName, "chat")
		wantAttr(t, c, telemetry.AttrProviderName, "openai")
		wantAttr(t, c, telemetry.AttrRequestModel, "m")
		wantAttr(t, c, telemetry.AttrResponseModel, "m-2026")
		wantAttr(t, c, telemetry.AttrServerAddress, "127.0.0.1")
		if c.Kind != 3 { // SPAN_KIND_CLIENT
			t.Errorf("chat span kind %d", c.Kind)
		}
	}
	ids := fmt.Sprint(chats[0].Attrs[telemetry.AttrResponseID], chats[1].Attrs[telemetry.AttrResponseID])
	if ids != "resp-1resp-2" && ids != "resp-2resp-1" {
		t.Errorf("response ids %s", ids)
	}

	weather := childrenOf(spans, agent, "execute_tool get_current_weather")
	denied := childrenOf(spans, agent, "execute_tool forbidden_tool")
	if len(weather) != 1 || len(denied) != 1 {
		t.Fatalf("tool spans under the chat: %d weather, %d forbidden", len(weather), len(denied))
	}
	wantAttr(t, weather[0], telemetry.AttrToolCallID, "call_1")
	wantAttr(t, weather[0], telemetry.AttrToolType, "function")
	wantAttr(t, weather[0], telemetry.AttrParentDecision, env.DecisionID)
	if weather[0].StatusError {
		t.Errorf("weather failed: %+v", weather[0])
	}
	wantAttr(t, denied[0], telemetry.AttrToolCallID, "call_2")
	wantAttr(t, denied[0], telemetry.AttrErrorType, "denied")
	if !denied[0].StatusError {
		t.Errorf("the denied call's span is not an error")
	}
	var ruleEvent bool
	for _, ev := range denied[0].Events {
		if ev.Name == telemetry.EventDecision && ev.Attrs[telemetry.AttrDecisionRule] == "forbidden_closed" &&
			ev.Attrs[telemetry.AttrDecisionOutcome] == "deny" && ev.Attrs[telemetry.AttrDecisionLayer] == "rule" {
			ruleEvent = true
		}
	}
	if !ruleEvent {
		t.Errorf("no decision event naming the rule: %+v", denied[0].Events)
	}
	// Content was asked for: it is there, without the secret.
	if res, _ := weather[0].Attrs[telemetry.AttrToolCallResult].(string); !strings.Contains(res, `"temperature":"22"`) {
		t.Errorf("no redacted result on the span: %q", res)
	}
	for _, b := range rcv.Bodies() {
		if bytes.Contains(b, []byte(otelSecret)) {
			t.Fatalf("the secret reached the backend: %q", b)
		}
	}

	// Metrics: model latency and tokens, calls, denials by rule.
	if !rcv.Wait(5*time.Second, func() bool { return len(rcv.Metrics()) > 0 }) {
		t.Fatal("no metrics")
	}
	names := strings.Join(rcv.MetricNames(), " ")
	for _, want := range []string{telemetry.MetricOperationDuration, telemetry.MetricTokenUsage, telemetry.MetricToolCalls, telemetry.MetricDecisions, telemetry.MetricToolDuration} {
		if !strings.Contains(names, want) {
			t.Errorf("metric %s missing from %s", want, names)
		}
	}
	var counted bool
	for _, m := range rcv.Metrics() {
		if m.Name == telemetry.MetricDecisions && m.Attrs[telemetry.AttrDecisionRule] == "forbidden_closed" && m.Value == 1 {
			counted = true
		}
	}
	if !counted {
		t.Errorf("the denial is not counted by rule: %+v", rcv.Metrics())
	}

	// The audit: the tool calls name the chat as their parent and carry
	// the request's id; the chat's record has the model's figures; the
	// records went out as OTLP logs in the chat's trace.
	tail := evalString(t, e, `{"tool":"audit_tail","arguments":{"n":3}}`)
	var audit struct {
		Result struct {
			Records []map[string]any
		}
	}
	if err := json.Unmarshal([]byte(tail), &audit); err != nil {
		t.Fatal(err)
	}
	byTool := map[string]map[string]any{}
	for _, r := range audit.Result.Records {
		byTool[r["tool"].(string)] = r
	}
	for _, tool := range []string{"get_current_weather", "forbidden_tool"} {
		r := byTool[tool]
		if r == nil || r["parent_id"] != env.DecisionID || r["id"] != "req-1" || r["trace_id"] != parentTrace {
			t.Errorf("%s's record: %v", tool, r)
		}
	}
	chat, _ := byTool["chat"]["chat"].(map[string]any)
	if chat == nil || chat["provider"] != "openai" || chat["model"] != "m" || chat["input_tokens"] != 250.0 ||
		chat["output_tokens"] != 32.0 || chat["turns"] != 2.0 || byTool["chat"]["decision_id"] != env.DecisionID {
		t.Errorf("the chat's record: %v", byTool["chat"])
	}
	if !rcv.Wait(5*time.Second, func() bool { return len(rcv.Logs()) >= 3 }) {
		t.Fatalf("audit logs: %+v", rcv.Logs())
	}
	for _, l := range rcv.Logs() {
		if l.EventName != "clara.audit" || l.TraceID != parentTrace || !strings.Contains(l.Body, `"decision_id"`) {
			t.Errorf("log record %+v", l)
		}
	}
}

// TestTelemetry_traceparent_out: the evaluator (an HTTP tool) gets
// traceparent in its headers, a remote MCP server in the _meta of its
// tools/call, both in the trace of the request.
func TestTelemetry_traceparent_out(t *testing.T) {
	rcv := otlptest.Start(t)
	var mu sync.Mutex
	var evalHeader, mcpMeta string
	eval := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		evalHeader = r.Header.Get("traceparent")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"answer":42}`))
	}))
	t.Cleanup(eval.Close)
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "no stream", http.StatusMethodNotAllowed)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		reply := func(result string) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "s1")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, result)
		}
		switch req.Method {
		case "initialize":
			reply(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"r","version":"1"}}`)
		case "tools/list":
			reply(`{"tools":[{"name":"ping","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			mu.Lock()
			mcpMeta, _ = req.Params.Meta["traceparent"].(string)
			mu.Unlock()
			reply(`{"content":[{"type":"text","text":"pong"}]}`)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(remote.Close)
	e := telemetryEngine(t, rcv, nil)
	mustConfigure(t, e, `{"evaluator":{"url":`+jsonText(eval.URL+"/evaluate")+`},`+
		`"mcp_servers":[{"name":"r","url":`+jsonText(remote.URL+"/mcp")+`}]}`)
	waitTool(t, e, "r__ping")
	meta := `"_meta":{"traceparent":"` + traceparent + `"}`
	if out := evalString(t, e, `{"tool":"evaluate",`+meta+`,"arguments":{"question":"?"}}`); !strings.Contains(out, `"answer":42`) {
		t.Fatal(out)
	}
	if out := evalString(t, e, `{"tool":"r__ping",`+meta+`,"arguments":{}}`); !strings.Contains(out, `pong`) {
		t.Fatal(out)
	}
	mu.Lock()
	h, m := evalHeader, mcpMeta
	mu.Unlock()
	if !strings.HasPrefix(h, "00-"+parentTrace+"-") || strings.Contains(h, parentSpan) {
		t.Errorf("the evaluator got traceparent %q", h)
	}
	if !strings.HasPrefix(m, "00-"+parentTrace+"-") || strings.Contains(m, parentSpan) {
		t.Errorf("the remote MCP server got _meta.traceparent %q", m)
	}
	flush(t, e)
	spans := rcv.Spans()
	tool := spanNamed(t, spans, "execute_tool r__ping")
	wantAttr(t, tool, telemetry.AttrToolType, "extension")
	client := childrenOf(spans, tool, "tools/call ping")
	if len(client) != 1 || client[0].Kind != 3 {
		t.Fatalf("no client span under the tool's: %+v", spans)
	}
	wantAttr(t, client[0], telemetry.AttrMCPMethodName, "tools/call")
	if !strings.Contains(m, client[0].SpanID) {
		t.Errorf("the server's parent %q is not the client span %s", m, client[0].SpanID)
	}
}

// TestTelemetry_mcp_server_spans_and_log: a client's tools/call with
// _meta.traceparent becomes a server span in that trace, the tool's span
// its child; isError is error.type tool_error; a client that set a level
// receives Clara's own log.
func TestTelemetry_mcp_server_spans_and_log(t *testing.T) {
	rcv := otlptest.Start(t)
	e := telemetryEngine(t, rcv, nil)
	c := serveEngine(t, e)
	res, err := c.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"x": 1},
		Meta: sdk.Meta{"traceparent": traceparent}})
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	res, err = c.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "math_eval", Arguments: map[string]any{"expression": "1/"}})
	if err != nil || !res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	flush(t, e)
	spans := rcv.Spans()
	var server otlptest.Span
	for _, s := range spans {
		if s.Name == "tools/call echo" {
			server = s
		}
	}
	if server.TraceID != parentTrace || server.ParentID != parentSpan || server.Kind != 2 {
		t.Fatalf("server span %+v", server)
	}
	wantAttr(t, server, telemetry.AttrMCPMethodName, "tools/call")
	wantAttr(t, server, telemetry.AttrNetworkTransport, "pipe")
	if s := server.Attrs[telemetry.AttrMCPSessionID]; !strings.HasPrefix(fmt.Sprint(s), "mcp-") {
		t.Errorf("mcp.session.id %v", s)
	}
	if len(childrenOf(spans, server, "execute_tool echo")) != 1 {
		t.Errorf("the tool's span is not the server span's child")
	}
	failed := spanNamed(t, spans, "tools/call math_eval")
	wantAttr(t, failed, telemetry.AttrErrorType, "tool_error")

	// Clara's log, to a client that asked for it.
	got := make(chan string, 16)
	c2 := serveEngineWithLog(t, e, got)
	if err := c2.SetLoggingLevel(context.Background(), &sdk.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	e.Logger().Logf(1, "a message for MCP clients")
	select {
	case m := <-got:
		if !strings.Contains(m, "a message for MCP clients") {
			t.Fatalf("got %q", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client that set a level got no log")
	}
}

// serveEngineWithLog is a second client session on e whose log
// notifications go to got.
func serveEngineWithLog(t *testing.T, e *core.Engine, got chan<- string) *sdk.ClientSession {
	t.Helper()
	addr, err := e.MCPListen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "log-test", Version: "1"}, &sdk.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *sdk.LoggingMessageRequest) {
			select {
			case got <- fmt.Sprint(req.Params.Data):
			default:
			}
		},
	})
	// Clara's log reaches clients of 2025-11-25's sessions (logging is
	// deprecated in 2026-07-28, whose requests carry no session to send to).
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, legacyMCPSession)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestTelemetry_off: without the variables or [telemetry], nothing is
// exported, and the envelope is what it was (no decision id) unless the
// audit leaves the process or audit.decision_ids asks.
func TestTelemetry_off(t *testing.T) {
	e := rulesEngine(t, "")
	if e.TelemetryOn() {
		t.Fatal("on without being asked")
	}
	expectEq(t, "echo", evalString(t, e, `{"tool":"echo","arguments":{"a":1}}`), `{"status":"success","tool":"echo","result":{"a":1}}`)
	mustConfigure(t, e, `{"audit":{"decision_ids":true}}`)
	if out := evalString(t, e, `{"tool":"echo","arguments":{"a":1}}`); !strings.Contains(out, `"decision_id":"`) {
		t.Fatalf("audit.decision_ids: %s", out)
	}
	// OTEL_SDK_DISABLED wins over [telemetry] enabled.
	rcv := otlptest.Start(t)
	off := telemetryEngine(t, rcv, map[string]string{"OTEL_SDK_DISABLED": "true"})
	mustConfigure(t, off, `{"telemetry":{"enabled":true,"endpoint":`+jsonText(rcv.URL)+`}}`)
	if off.TelemetryOn() {
		t.Fatal("OTEL_SDK_DISABLED=true ignored")
	}
	if out := off.Configure([]byte(`{"telemetry":{"endpoint":"ftp://x"}}`)); !strings.Contains(string(out), "telemetry.endpoint") {
		t.Fatalf("a bad endpoint: %s", out)
	}
}

// TestTelemetry_a_go_hosts_own_provider: spans go to the TracerProvider a
// Go host hands in, with no exporter of Clara's and nothing in the
// environment.
func TestTelemetry_a_go_hosts_own_provider(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	e := core.New(core.Options{TracerProvider: tp, Getenv: func(string) string { return "" }})
	t.Cleanup(e.Close)
	mustConfigure(t, e, "state_dir = \"\"\n[rules]\npaths = []\n")
	if !e.TelemetryOn() {
		t.Fatal("a host's provider did not turn tracing on")
	}
	evalString(t, e, `{"tool":"echo","arguments":{}}`)
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "execute_tool echo" {
		t.Fatalf("%+v", spans)
	}
}

// TestTelemetry_asks_approvals_and_rewrites: the decisions of issue 28 are
// events on the call's span (the ask, the person's approval, the rewrite)
// and counted in clara.decisions by rule.
func TestTelemetry_asks_approvals_and_rewrites(t *testing.T) {
	rcv := otlptest.Start(t)
	e := telemetryEngine(t, rcv, nil)
	registerPay(t, e, "")
	e.SetApprover(&approverRecorder{decide: func(*core.ApprovalRequest) (core.ApprovalDecision, bool) {
		return core.ApprovalDecision{Approve: true}, true
	}})
	loadRules(t, e, "p.toml", askBigPayments+`
[[rules]]
id = "cap"
trigger = "on_tool_call"
priority = 5
[rules.condition]
expression = "context.tool.name == 'pay' and context.tool.arguments.amount > 1000"
[[rules.actions]]
type = "rewrite"
arguments = { amount = 1000 }
merge = true
`)
	if out := evalString(t, e, `{"tool":"pay","arguments":{"to":"bob","amount":5000}}`); !strings.Contains(out, `"paid":1000`) {
		t.Fatal(out)
	}
	flush(t, e)
	span := spanNamed(t, rcv.Spans(), "execute_tool pay")
	got := map[string]string{}
	for _, ev := range span.Events {
		if ev.Name == telemetry.EventDecision {
			got[fmt.Sprint(ev.Attrs[telemetry.AttrDecisionOutcome])] = fmt.Sprint(ev.Attrs[telemetry.AttrDecisionRule])
		}
	}
	if got["ask"] != "big-payments" || got["rewrite"] != "cap" || got["approved"] != "big-payments" {
		t.Fatalf("decision events %v", got)
	}
	if !rcv.Wait(5*time.Second, func() bool {
		for _, m := range rcv.Metrics() {
			if m.Name == telemetry.MetricDecisions && m.Attrs[telemetry.AttrDecisionOutcome] == "ask" && m.Attrs[telemetry.AttrDecisionRule] == "big-payments" {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("the ask is not counted: %+v", rcv.Metrics())
	}
}
