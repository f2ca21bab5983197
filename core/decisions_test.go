package core_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/toolbox"
)

// The decisions beyond allow and deny through the engine (issue 28): ask
// and the approvals, rewrite, budgets, guards on results and chats,
// shadow mode, and what the trace and the audit keep of them.

// registerPay registers "pay" {to, amount}: it answers what it paid,
// counting its runs.
func registerPay(t *testing.T, e *core.Engine, extra string) *int64 {
	t.Helper()
	var mu sync.Mutex
	var runs int64
	run := func(_ context.Context, call toolbox.Call) ([]byte, error) {
		mu.Lock()
		runs++
		mu.Unlock()
		return []byte(`{"paid":` + gjson.GetBytes(call.Arguments, "amount").Raw + `,"to":` + gjson.GetBytes(call.Arguments, "to").Raw + `}`), nil
	}
	d := `{"name":"pay","description":"Pays someone","input_schema":{"type":"object","properties":{"to":{"type":"string"},` +
		`"amount":{"type":"integer","minimum":1,"maximum":10000}},"required":["to","amount"],"additionalProperties":false}` + extra + `}`
	if err := e.RegisterTool([]byte(d), toolbox.ToolOptions{Run: run}); err != nil {
		t.Fatal(err)
	}
	return &runs
}

// loadRules loads inline rules, failing the test when they do not load.
func loadRules(t *testing.T, e *core.Engine, name, toml string) {
	t.Helper()
	out := evalString(t, e, `{"tool":"rules_load","arguments":{"name":`+jsonText(name)+`,"toml":`+jsonText(toml)+`}}`)
	if !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatalf("rules_load: %s", out)
	}
}

// approverRecorder is an approver that records what it was shown and
// answers with decide (ok false: leaves the approval pending).
type approverRecorder struct {
	mu     sync.Mutex
	seen   []core.ApprovalRequest
	decide func(req *core.ApprovalRequest) (core.ApprovalDecision, bool)
	ctxs   []context.Context
}

func (a *approverRecorder) Approve(ctx context.Context, req *core.ApprovalRequest) (core.ApprovalDecision, bool) {
	a.mu.Lock()
	a.seen = append(a.seen, *req)
	a.ctxs = append(a.ctxs, ctx)
	a.mu.Unlock()
	return a.decide(req)
}

func (a *approverRecorder) last(t *testing.T) core.ApprovalRequest {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) == 0 {
		t.Fatal("the approver was not asked")
	}
	return a.seen[len(a.seen)-1]
}

const askBigPayments = `
[[rules]]
id = "big-payments"
trigger = "on_tool_call"
[rules.condition]
expression = "context.tool.name == 'pay' and context.tool.arguments.amount > 100"
[[rules.actions]]
type = "ask"
reason = "{{ context.tool.arguments.amount }} is a lot"
`

// Precedence: deny > ask > rewrite > allow. A denial wins whatever else
// matched; an ask holds the call with the rewrite applied (the approver
// sees, and approves, what will run); a rewrite alone runs at once.
func TestDecisions_precedence(t *testing.T) {
	e := rulesEngine(t, "")
	runs := registerPay(t, e, "")
	a := &approverRecorder{decide: func(*core.ApprovalRequest) (core.ApprovalDecision, bool) {
		return core.ApprovalDecision{Approve: true}, true
	}}
	e.SetApprover(a)
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

[[rules]]
id = "no-mallory"
trigger = "on_tool_call"
priority = -5
[rules.condition]
expression = "context.tool.name == 'pay' and context.tool.arguments.to == 'mallory'"
[[rules.actions]]
type = "deny"
reason = "not mallory"
`)
	// deny > ask > rewrite: all three match; nothing is asked, nothing runs.
	out := evalString(t, e, `{"tool":"pay","arguments":{"to":"mallory","amount":5000}}`)
	if out != `{"status":"error","error":"denied","message":"tool \"pay\" denied by rule \"no-mallory\": not mallory"}` || *runs != 0 || len(a.seen) != 0 {
		t.Fatalf("%s (runs %d, asked %d)", out, *runs, len(a.seen))
	}
	// ask > rewrite: the approver sees the rewritten arguments, and they run.
	out = evalString(t, e, `{"tool":"pay","arguments":{"to":"bob","amount":5000}}`)
	if out != `{"status":"success","tool":"pay","result":{"paid":1000,"to":"bob"}}` {
		t.Fatal(out)
	}
	if req := a.last(t); string(req.Arguments) != `{"amount":1000,"to":"bob"}` || req.Rule != "big-payments" || req.Reason != "5000 is a lot" || req.Tool != "pay" {
		t.Errorf("the approver saw %+v", req)
	}
	// ask alone.
	out = evalString(t, e, `{"tool":"pay","arguments":{"to":"bob","amount":500}}`)
	if out != `{"status":"success","tool":"pay","result":{"paid":500,"to":"bob"}}` || len(a.seen) != 2 {
		t.Fatal(out)
	}
	// allow: nothing matches, nothing is asked.
	out = evalString(t, e, `{"tool":"pay","arguments":{"to":"bob","amount":5}}`)
	if out != `{"status":"success","tool":"pay","result":{"paid":5,"to":"bob"}}` || len(a.seen) != 2 || *runs != 3 {
		t.Fatal(out)
	}
}

// A rewrite alone runs at once with the new arguments, validated again:
// one that breaks the schema is a denial naming the rule. The trace shows
// the hashes before and after in the rule's record, the audit both.
func TestDecisions_rewrite(t *testing.T) {
	e := rulesEngine(t, "")
	registerPay(t, e, "")
	loadRules(t, e, "r.toml", `
[[rules]]
id = "lower-case"
trigger = "on_tool_call"
[rules.condition]
expression = "context.tool.name == 'pay'"
[[rules.actions]]
type = "rewrite"
lua = """
local a = {}
for k, v in pairs(ctx.tool.arguments) do a[k] = v end
a.to = string.lower(a.to)
return a
"""

[[rules]]
id = "too-much"
trigger = "on_tool_call"
priority = 5
[rules.condition]
expression = "context.tool.name == 'pay' and context.tool.arguments.to == 'Eve'"
[[rules.actions]]
type = "rewrite"
arguments = { to = "eve", amount = 1000000 }
`)
	out := evalString(t, e, `{"tool":"pay","trace":true,"arguments":{"to":"BOB","amount":7}}`)
	if gjson.Get(out, "result").Raw != `{"paid":7,"to":"bob"}` {
		t.Fatal(out)
	}
	rec := gjson.Get(out, `trace.#(rule=="lower-case").actions.0`)
	before, after := sha(`{"to":"BOB","amount":7}`), sha(`{"amount":7,"to":"bob"}`)
	if rec.Get("type").Str != "rewrite" || rec.Get("before_sha256").Str != before || rec.Get("after_sha256").Str != after {
		t.Errorf("the rewrite's record %s", rec.Raw)
	}
	tail := evalString(t, e, `{"tool":"audit_tail","arguments":{"n":2}}`)
	r := gjson.Get(tail, `result.records.#(tool=="pay")`)
	if r.Get("args_sha256").Str != after || r.Get("rewrite.rule").Str != "lower-case" || r.Get("rewrite.before_sha256").Str != before ||
		r.Get("rewrite.after_sha256").Str != after {
		t.Errorf("audit %s", r.Raw)
	}
	out = evalString(t, e, `{"tool":"pay","arguments":{"to":"Eve","amount":7}}`)
	if !strings.HasPrefix(out, `{"status":"error","error":"denied","message":"tool \"pay\" denied: the arguments rule \"too-much\" rewrote do not match its input_schema: `) {
		t.Fatal(out)
	}
}

// The approval mechanism: no handler, approve, reject with a reason, edit
// (validated again), time out, the call cancelled while it waits, a
// decision from another goroutine (approval_decide), approvals_list.
func TestApprovals(t *testing.T) {
	e := rulesEngine(t, `{"policy":{"approval_timeout_ms":60000}}`)
	runs := registerPay(t, e, "")
	loadRules(t, e, "ask.toml", askBigPayments)
	req := `{"tool":"pay","session":"desk","arguments":{"to":"bob","amount":500}}`

	// No handler: rejected at once, never run.
	out := evalString(t, e, req)
	if out != `{"status":"error","error":"denied","message":"tool \"pay\" was not run: rule \"big-payments\" asks for a person's approval (500 is a lot), and no approval handler is installed (clara_set_approval_handler in C, clara.set_approval_handler in Python; clara-clips has one)"}` {
		t.Fatal(out)
	}

	var decision core.ApprovalDecision
	var pending bool
	a := &approverRecorder{decide: func(*core.ApprovalRequest) (core.ApprovalDecision, bool) { return decision, !pending }}
	e.SetApprover(a)
	events := logEvents(e)
	defer e.SetEventSink(nil)

	decision = core.ApprovalDecision{Approve: false, Reason: "not today"}
	out = evalString(t, e, req)
	if !strings.HasPrefix(out, `{"status":"error","error":"denied","message":"tool \"pay\" was not run: the approval was rejected: not today"}`) {
		t.Fatal(out)
	}
	seen := a.last(t)
	if seen.Session != "desk" || string(seen.Arguments) != `{"to":"bob","amount":500}` || seen.TimeoutMS != 60000 || seen.ID == 0 {
		t.Errorf("seen %+v", seen)
	}
	events.waitForWithin(t, `{"event":"approval_required","id":`+strconv.FormatInt(seen.ID, 10)+`,"tool":"pay"`, time.Second)

	decision = core.ApprovalDecision{Approve: true, Arguments: json.RawMessage(`{"to":"bob","amount": 50}`)}
	out = evalString(t, e, `{"tool":"pay","session":"desk","trace":true,"arguments":{"to":"bob","amount":500}}`)
	if gjson.Get(out, "result").Raw != `{"paid":50,"to":"bob"}` {
		t.Fatal(out)
	}
	if tr := gjson.Get(out, `trace.#(approval>0)`); tr.Get("decision").Str != "approved" || tr.Get("by").Str != "handler" || !tr.Get("edited").Bool() || tr.Get("rule").Str != "big-payments" {
		t.Errorf("trace %s", tr.Raw)
	}
	decision = core.ApprovalDecision{Approve: true, Arguments: json.RawMessage(`{"to":"bob","amount":"lots"}`)}
	out = evalString(t, e, req)
	if !strings.Contains(out, `"error":"denied","message":"tool \"pay\" was not run: rule \"big-payments\" asks for a person's approval (500 is a lot), and the edited arguments do not match: tool \"pay\": arguments do not match input_schema: at /amount:`) {
		t.Fatal(out)
	}
	if *runs != 1 {
		t.Fatalf("%d runs", *runs)
	}

	// Pending: decided from another goroutine through approval_decide,
	// after an edit that does not match (it stays pending).
	pending = true
	done := make(chan string)
	go func() { done <- string(e.Evaluate([]byte(req))) }()
	id := waitPending(t, e)
	list := evalString(t, e, `{"tool":"approvals_list"}`)
	if gjson.Get(list, "result.approvals.0.tool").Str != "pay" || gjson.Get(list, "result.approvals.0.id").Int() != id ||
		gjson.Get(list, "result.approvals.0.reason").Str != "500 is a lot" || !gjson.Get(list, "result.approvals.0.waiting_ms").Exists() {
		t.Errorf("approvals_list %s", list)
	}
	bad := evalString(t, e, `{"tool":"approval_decide","arguments":{"id":`+strconv.FormatInt(id, 10)+`,"decision":"approve","arguments":{"to":"bob"}}}`)
	if !strings.Contains(bad, `"error":"invalid_args","message":"the edited arguments do not match: tool \"pay\": arguments do not match input_schema: at the top: missing property 'amount'"`) {
		t.Errorf("a bad edit: %s", bad)
	}
	ok := evalString(t, e, `{"tool":"approval_decide","arguments":{"id":`+strconv.FormatInt(id, 10)+`,"decision":"approve","arguments":{"to":"bob","amount":7}}}`)
	if ok != `{"status":"success","tool":"approval_decide","result":{"id":`+strconv.FormatInt(id, 10)+`,"decision":"approve"}}` {
		t.Errorf("approval_decide: %s", ok)
	}
	if out := <-done; out != `{"status":"success","tool":"pay","result":{"paid":7,"to":"bob"}}` {
		t.Fatal(out)
	}
	again := evalString(t, e, `{"tool":"approval_decide","arguments":{"id":`+strconv.FormatInt(id, 10)+`,"decision":"reject"}}`)
	if !strings.Contains(again, `"error":"invalid_args","message":"approval_decide: no approval of that id is waiting (`+strconv.FormatInt(id, 10)+`)`) {
		t.Errorf("decided twice: %s", again)
	}

	// The call cancelled while it waits: it never runs, the approver's
	// context ends, and approval_cancelled tells the handler.
	h, perr := e.Submit([]byte(req))
	if perr != nil {
		t.Fatal(perr)
	}
	id = waitPending(t, e)
	if perr := e.Cancel(h); perr != nil {
		t.Fatal(perr)
	}
	out = string(e.Wait(context.Background(), h, 10*time.Second))
	if !strings.Contains(out, `"error":"tool_failed"`) || !strings.Contains(out, "cancelled") {
		t.Fatal(out)
	}
	events.waitForWithin(t, `{"event":"approval_cancelled","id":`+strconv.FormatInt(id, 10)+`,"reason":"cancelled"`, 5*time.Second)
	a.mu.Lock()
	actx := a.ctxs[len(a.ctxs)-1]
	a.mu.Unlock()
	select {
	case <-actx.Done():
	case <-time.After(5 * time.Second):
		t.Error("the approver's context did not end")
	}
	if err := e.DecideApproval(id, core.ApprovalDecision{Approve: true}); !errors.Is(err, core.ErrNoApproval) {
		t.Errorf("deciding a cancelled approval: %v", err)
	}

	// No decision in time: rejected, never run.
	mustConfigure(t, e, `{"policy":{"approval_timeout_ms":50}}`)
	out = evalString(t, e, req)
	if out != `{"status":"error","error":"denied","message":"tool \"pay\" was not run: rule \"big-payments\" asks for a person's approval (500 is a lot), and none came within 50ms (policy.approval_timeout_ms)"}` {
		t.Fatal(out)
	}
	if *runs != 2 {
		t.Fatalf("%d runs", *runs)
	}
	// The audit says how each was decided, and how long it waited.
	tail := evalString(t, e, `{"tool":"audit_tail","arguments":{"n":20}}`)
	var decisions []string
	for _, r := range gjson.Get(tail, `result.records.#(tool=="pay")#`).Array() {
		if a := r.Get("approval"); a.Exists() {
			if !a.Get("waited_ms").Exists() || a.Get("id").Int() == 0 && a.Get("by").Str != "no handler" {
				t.Errorf("approval %s", a.Raw)
			}
			decisions = append(decisions, a.Get("decision").Str+"/"+a.Get("by").Str)
		}
	}
	// (The ring's order is not the calls' when the clock stands still.)
	sort.Strings(decisions)
	want := "approved/approval_decide approved/handler cancelled/cancelled rejected/handler rejected/handler rejected/no handler timed_out/timeout"
	if got := strings.Join(decisions, " "); got != want {
		t.Errorf("audit decisions\n got %s\nwant %s", got, want)
	}
}

// waitPending waits for one approval to be pending and returns its id.
func waitPending(t *testing.T, e *core.Engine) int64 {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if p := e.PendingApprovals(); len(p) == 1 {
			return p[0].ID
		}
	}
	t.Fatal("no approval pending")
	return 0
}

// The approver is shown the validated arguments without the values of
// the secrets the configuration names.
func TestApprovals_secretsNeverShown(t *testing.T) {
	t.Setenv("CLARA_DECIDE_KEY", "sk-decide-0123456789")
	t.Setenv("CLARA_DECIDE_HEADER", "hdr-secret-value")
	e := rulesEngine(t, `{"llm":{"api_key_env":"CLARA_DECIDE_KEY"},
		"tools":[{"name":"fetch_it","http":{"url":"http://127.0.0.1:1/x","headers_env":{"X-Key":"CLARA_DECIDE_HEADER"}}}]}`)
	loadRules(t, e, "quote.toml", `
[rule]
id = "quote"
trigger = "on_tool_call"
[condition]
expression = "context.tool.name == 'quote'"
[action]
type = "ask"
reason = "quoting {{ context.tool.arguments.text }}"
`)
	if err := e.RegisterTool([]byte(`{"name":"quote","input_schema":{"type":"object"}}`), toolbox.ToolOptions{Run: func(_ context.Context, c toolbox.Call) ([]byte, error) { return c.Arguments, nil }}); err != nil {
		t.Fatal(err)
	}
	d := `{"name":"note","input_schema":{"type":"object"},"needs_approval":true}`
	if err := e.RegisterTool([]byte(d), toolbox.ToolOptions{Run: func(_ context.Context, c toolbox.Call) ([]byte, error) { return c.Arguments, nil }}); err != nil {
		t.Fatal(err)
	}
	a := &approverRecorder{decide: func(*core.ApprovalRequest) (core.ApprovalDecision, bool) {
		return core.ApprovalDecision{Approve: true}, true
	}}
	e.SetApprover(a)
	out := evalString(t, e, `{"tool":"note","arguments":{"text":"key sk-decide-0123456789 and hdr-secret-value","sk-decide-0123456789":1}}`)
	// The call itself runs with its own arguments.
	if gjson.Get(out, "result.text").Str != "key sk-decide-0123456789 and hdr-secret-value" {
		t.Fatal(out)
	}
	seen := a.last(t)
	if string(seen.Arguments) != `{"text":"key [redacted] and [redacted]","[redacted]":1}` || seen.Reason != `tool "note" needs approval (needs_approval)` || seen.Rule != "" {
		t.Errorf("the approver saw %+v", seen)
	}
	// A reason a rule wrote from the arguments is cut too.
	evalString(t, e, `{"tool":"quote","arguments":{"text":"sk-decide-0123456789"}}`)
	if seen := a.last(t); seen.Reason != "quoting [redacted]" || string(seen.Arguments) != `{"text":"[redacted]"}` {
		t.Errorf("the approver saw %+v", seen)
	}
}

// needs_approval names a rule: calls its condition matches wait, the
// others run; a rule that is not loaded holds every call.
func TestApprovals_needsApprovalRule(t *testing.T) {
	e := rulesEngine(t, "")
	runs := registerPay(t, e, `,"needs_approval":"big"`)
	a := &approverRecorder{decide: func(*core.ApprovalRequest) (core.ApprovalDecision, bool) {
		return core.ApprovalDecision{Approve: false, Reason: "no"}, true
	}}
	e.SetApprover(a)
	out := evalString(t, e, `{"tool":"pay","arguments":{"to":"bob","amount":5}}`)
	if out != `{"status":"error","error":"denied","message":"tool \"pay\" was not run: the approval was rejected: no"}` {
		t.Fatal(out)
	}
	if req := a.last(t); req.Reason != `needs_approval names rule "big", which cannot tell: no rule "big" is loaded` {
		t.Errorf("reason %q", req.Reason)
	}
	loadRules(t, e, "big.toml", `
[rule]
id = "big"
trigger = "on_tool_call"
priority = -1
[condition]
expression = "context.tool.arguments.amount > 100"
[action]
type = "log"
message = "a big one"
`)
	loadRules(t, e, "stop.toml", `
[rule]
id = "stopper"
trigger = "on_tool_call"
priority = 10
stop = true
[action]
type = "log"
message = "stops the rules below"
`)
	out = evalString(t, e, `{"tool":"pay","arguments":{"to":"bob","amount":5}}`)
	if out != `{"status":"success","tool":"pay","result":{"paid":5,"to":"bob"}}` {
		t.Fatal(out)
	}
	out = evalString(t, e, `{"tool":"pay","arguments":{"to":"bob","amount":500}}`)
	if out != `{"status":"error","error":"denied","message":"tool \"pay\" was not run: the approval was rejected: no"}` {
		t.Fatal(out)
	}
	if req := a.last(t); req.Rule != "big" || req.Reason != `rule "big" matched (needs_approval)` {
		t.Errorf("asked %+v", req)
	}
	if *runs != 1 {
		t.Errorf("%d runs", *runs)
	}
	tools := evalString(t, e, `{"tool":"tools_list"}`)
	if gjson.Get(tools, `result.tools.#(name=="pay").needs_approval`).Str != "big" {
		t.Errorf("tools_list: %s", gjson.Get(tools, `result.tools.#(name=="pay")`).Raw)
	}
}

// Budgets per session: past the tool's max_calls_per_session, calls fail
// with budget_exhausted (not denied), on_budget_exhausted fires, and the
// audit says which budget; session_end starts afresh. The configuration's
// default covers every tool but the administrative ones.
func TestBudgets_perSession(t *testing.T) {
	e := rulesEngine(t, "")
	registerPay(t, e, `,"limits":{"max_calls_per_session":2}`)
	loadRules(t, e, "b.toml", `
[rule]
id = "spent"
trigger = "on_budget_exhausted"
[action]
type = "notify_self"
message = "{{ context.tool }}: {{ context.budget }} budget of {{ context.limit }} spent"
`)
	req := `{"tool":"pay","session":"s","arguments":{"to":"bob","amount":5}}`
	for i := 0; i < 2; i++ {
		if out := evalString(t, e, req); !strings.HasPrefix(out, `{"status":"success"`) {
			t.Fatal(out)
		}
	}
	out := evalString(t, e, req)
	want := `{"status":"error","error":"budget_exhausted","message":"tool \"pay\" was not run: its budget of 2 calls per session (until session_end)",` +
		`"details":{"tool":"pay","budget":"session","limit":2},"notices":[{"rule":"spent","message":"pay: session budget of 2 spent","priority":"normal","event":"on_budget_exhausted"}]}`
	if out != want {
		t.Fatalf("\n got %s\nwant %s", out, want)
	}
	if out := evalString(t, e, `{"tool":"pay","session":"other","arguments":{"to":"bob","amount":5}}`); !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatal(out)
	}
	// Every record of the test: the test clock gives them one timestamp,
	// and audit_tail orders records of one time by shard, not by call.
	tail := evalString(t, e, `{"tool":"audit_tail","arguments":{"n":10}}`)
	if gjson.Get(tail, `result.records.#(budget=="session").error`).Str != "budget_exhausted" {
		t.Errorf("audit %s", tail)
	}
	evalString(t, e, `{"tool":"session_end","session":"s"}`)
	if out := evalString(t, e, req); !strings.HasPrefix(out, `{"status":"success"`) {
		t.Fatal(out)
	}
	mustConfigure(t, e, `{"limits":{"max_calls_per_session":1}}`)
	evalString(t, e, `{"tool":"echo","session":"e","arguments":{}}`)
	if out := evalString(t, e, `{"tool":"echo","session":"e","arguments":{}}`); !strings.Contains(out, `"error":"budget_exhausted"`) {
		t.Fatal(out)
	}
	for i := 0; i < 3; i++ {
		if out := evalString(t, e, `{"tool":"rules_list","session":"e"}`); !strings.HasPrefix(out, `{"status":"success"`) {
			t.Fatalf("an administrative tool: %s", out)
		}
	}
}

// Guards on results: block replaces a result by the error blocked; redact
// cuts out of it, for the host and the audit alike; rules.redact_secrets
// loads the built-in redaction of keys and tokens.
func TestGuards_results(t *testing.T) {
	e := rulesEngine(t, "")
	loadRules(t, e, "g.toml", `
[[rules]]
id = "no-vault"
trigger = "on_tool_complete"
[rules.condition]
expression = "context.tool.name == 'echo' and context.tool.result.vault == true"
[[rules.actions]]
type = "block"
reason = "vault contents stay inside"

[[rules]]
id = "pins"
trigger = "on_tool_complete"
[rules.condition]
expression = "context.tool.name == 'echo'"
[[rules.actions]]
type = "redact"
patterns = ['\b\d{4}\b']
replacement = "####"
`)
	out := evalString(t, e, `{"tool":"echo","arguments":{"vault":true,"pin":"1234"}}`)
	if out != `{"status":"error","error":"blocked","message":"tool \"echo\"'s result was blocked by rule \"no-vault\": vault contents stay inside","details":{"rule":"no-vault","reason":"vault contents stay inside"}}` {
		t.Fatal(out)
	}
	out = evalString(t, e, `{"tool":"echo","arguments":{"note":"pin 1234, year 20245","n":1234}}`)
	if out != `{"status":"success","tool":"echo","result":{"n":1234,"note":"pin ####, year 20245"}}` {
		t.Fatal(out)
	}
	tail := evalString(t, e, `{"tool":"audit_tail","arguments":{"n":2}}`)
	if gjson.Get(tail, `result.records.#(error=="blocked").blocked_by`).Str != "no-vault" || gjson.Get(tail, `result.records.#(status=="success").redacted_by.0`).Str != "pins" {
		t.Errorf("audit %s", tail)
	}
	mustConfigure(t, e, `{"rules":{"redact_secrets":true}}`)
	out = evalString(t, e, `{"tool":"echo","arguments":{"k":"token ghp_0123456789abcdefghijABCDEFGHIJ012345"}}`)
	if out != `{"status":"success","tool":"echo","result":{"k":"token [redacted]"}}` {
		t.Fatal(out)
	}
}

// Shadow mode: the same rules in shadow mode (rules.mode = "shadow")
// decide nothing, record would_* in the audit and the counts of
// rules_list, and trace as the enforcing ones do but for their mode.
func TestShadow_besideEnforcing(t *testing.T) {
	rulesText := askBigPayments + `
[[rules]]
id = "no-mallory"
trigger = "on_tool_call"
[rules.condition]
expression = "context.tool.name == 'pay' and context.tool.arguments.to == 'mallory'"
[[rules.actions]]
type = "deny"
reason = "not mallory"
[[rules.actions]]
type = "notify_self"
message = "mallory tried"

[[rules]]
id = "pins"
trigger = "on_tool_complete"
[[rules.actions]]
type = "redact"
patterns = ['mallory']
`
	enforce := rulesEngine(t, "")
	shadow := rulesEngine(t, `{"rules":{"mode":"shadow"}}`)
	for _, e := range []*core.Engine{enforce, shadow} {
		registerPay(t, e, "")
		loadRules(t, e, "r.toml", rulesText)
	}
	reqs := []string{
		`{"tool":"pay","trace":true,"arguments":{"to":"mallory","amount":5}}`,
		`{"tool":"pay","trace":true,"arguments":{"to":"bob","amount":500}}`,
	}
	for _, req := range reqs {
		en, sh := evalString(t, enforce, req), evalString(t, shadow, req)
		if gjson.Get(sh, "status").Str != "success" {
			t.Fatalf("shadow enforced: %s", sh)
		}
		// The rules' trace entries are the same, but for their mode.
		enTrace, shTrace := gjson.Get(en, "trace").Array(), gjson.Get(sh, "trace").Array()
		var ruleEntries [2][]string
		for i, tr := range [][]gjson.Result{enTrace, shTrace} {
			for _, x := range tr {
				if !x.Get("rule").Exists() || x.Get("event").Str != "on_tool_call" {
					continue
				}
				if (i == 1) != (x.Get("mode").Str == "shadow") {
					t.Errorf("entry %s", x.Raw)
				}
				m := map[string]any{}
				_ = json.Unmarshal([]byte(x.Raw), &m)
				delete(m, "mode")
				delete(m, "duration_us")
				b, _ := json.Marshal(m)
				ruleEntries[i] = append(ruleEntries[i], string(b))
			}
		}
		if strings.Join(ruleEntries[0], "\n") != strings.Join(ruleEntries[1], "\n") {
			t.Errorf("traces differ:\n%s\n---\n%s", strings.Join(ruleEntries[0], "\n"), strings.Join(ruleEntries[1], "\n"))
		}
		if gjson.Get(en, "notices").Raw != gjson.Get(sh, "notices").Raw {
			t.Errorf("notices %s / %s", gjson.Get(en, "notices").Raw, gjson.Get(sh, "notices").Raw)
		}
	}
	// The test's clock stands still: records of the ring's shards tie on
	// their time, so audit_tail may list the two in either order.
	tail := evalString(t, shadow, `{"tool":"audit_tail","arguments":{"n":2}}`)
	var got []string
	for _, r := range gjson.Get(tail, "result.records.#.shadow").Array() {
		got = append(got, r.Raw)
	}
	sort.Strings(got)
	want := []string{`[{"decision":"would_ask","rule":"big-payments","reason":"500 is a lot"}]`,
		`[{"decision":"would_deny","rule":"no-mallory","reason":"not mallory"},{"decision":"would_redact","rule":"pins"}]`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit shadow\n got %s\nwant %s", got, want)
	}
	list := evalString(t, shadow, `{"tool":"rules_list"}`)
	if r := gjson.Get(list, `result.rules.#(id=="no-mallory")`); r.Get("mode").Str != "shadow" || r.Get("would.would_deny").Int() != 1 {
		t.Errorf("rules_list %s", r.Raw)
	}
	if r := gjson.Get(evalString(t, enforce, `{"tool":"rules_list"}`), `result.rules.#(id=="no-mallory")`); r.Get("mode").Exists() || r.Get("would").Exists() {
		t.Errorf("an enforcing rule: %s", r.Raw)
	}
}

// A chat against the scripted provider: a rule on on_chat_start rewrites
// the prompt, a rule asks about the model's transfer, the person edits
// its amount, the model reads the edited call's result, and the answer is
// redacted on its way out.
func TestChat_approvalWithEditedArguments(t *testing.T) {
	e := chatEngine(t, "approval_edit")
	mustConfigure(t, e, `{"rules":{"redact_secrets":true}}`)
	registerTransfer(t, e)
	loadRules(t, e, "chat.toml", `
[[rules]]
id = "spell-it-out"
trigger = "on_chat_start"
[rules.condition]
expression = "context.prompt == 'pay bob'"
[[rules.actions]]
type = "rewrite"
prompt = "Pay Bob what we owe him."

[[rules]]
id = "big-transfers"
trigger = "on_tool_call"
[rules.condition]
expression = "context.tool.name == 'transfer' and context.tool.arguments.amount > 1000"
[[rules.actions]]
type = "ask"
reason = "transfer of {{ context.tool.arguments.amount }}"
`)
	a := &approverRecorder{decide: func(req *core.ApprovalRequest) (core.ApprovalDecision, bool) {
		return core.ApprovalDecision{Approve: true, Arguments: json.RawMessage(`{"to":"bob","amount":100}`), By: "the test"}, true
	}}
	e.SetApprover(a)
	out := evalString(t, e, `{"tool":"chat","session":"pay","arguments":{"prompt":"pay bob","allow_tools":true,"tools":["transfer"],"max_tool_calls":2}}`)
	if gjson.Get(out, "status").Str != "success" || gjson.Get(out, "result.content").Str != "Paid Bob 100 with key [redacted]." {
		t.Fatal(out)
	}
	if req := a.last(t); string(req.Arguments) != `{"to":"bob","amount":5000}` || req.Reason != "transfer of 5000" {
		t.Errorf("the person saw %+v", req)
	}
	tail := evalString(t, e, `{"tool":"audit_tail","arguments":{"n":5}}`)
	r := gjson.Get(tail, `result.records.#(tool=="transfer")`)
	if r.Get("approval.by").Str != "the test" || !r.Get("approval.edited").Bool() || r.Get("args_sha256").Str != sha(`{"to":"bob","amount":100}`) ||
		r.Get("approval.shown_sha256").Str != sha(`{"to":"bob","amount":5000}`) {
		t.Errorf("audit %s", r.Raw)
	}
}

// A person rejects the model's call: the model reads the reason.
func TestChat_approvalRejected(t *testing.T) {
	e := chatEngine(t, "approval_rejected")
	registerTransfer(t, e)
	loadRules(t, e, "chat.toml", `
[rule]
id = "all-transfers"
trigger = "on_tool_call"
[condition]
expression = "context.tool.name == 'transfer'"
[action]
type = "ask"
reason = "every transfer"
`)
	e.SetApprover(core.ApproverFunc(func(context.Context, *core.ApprovalRequest) (core.ApprovalDecision, bool) {
		return core.ApprovalDecision{Reason: "not to mallory"}, true
	}))
	out := evalString(t, e, `{"tool":"chat","arguments":{"prompt":"Pay Mallory.","allow_tools":true,"tools":["transfer"]}}`)
	if gjson.Get(out, "result.content").Str != "The transfer was refused." ||
		gjson.Get(out, "result.tool_calls.0.error").Str != `tool "transfer" was not run: the approval was rejected: not to mallory` {
		t.Fatal(out)
	}
}

func registerTransfer(t *testing.T, e *core.Engine) {
	t.Helper()
	d := `{"name":"transfer","description":"Transfers money","input_schema":{"type":"object","properties":{"to":{"type":"string"},` +
		`"amount":{"type":"integer","minimum":1}},"required":["to","amount"],"additionalProperties":false}}`
	run := func(_ context.Context, call toolbox.Call) ([]byte, error) {
		return []byte(`{"paid":` + gjson.GetBytes(call.Arguments, "amount").Raw + `,"to":` + gjson.GetBytes(call.Arguments, "to").Raw + `}`), nil
	}
	if err := e.RegisterTool([]byte(d), toolbox.ToolOptions{Run: run}); err != nil {
		t.Fatal(err)
	}
}

// sha is the SHA-256 of s in hex, as the audit writes it.
func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// A budget of calls per chat: the model's call past it is answered
// budget_exhausted (the script checks what the model reads), not run, and
// on_budget_exhausted fires.
func TestChat_budgetPerChat(t *testing.T) {
	e := chatEngine(t, "budget_per_chat")
	d := `{"name":"transfer","input_schema":{"type":"object","properties":{"to":{"type":"string"},"amount":{"type":"integer"}}},` +
		`"limits":{"max_calls_per_chat":1}}`
	var runs int
	if err := e.RegisterTool([]byte(d), toolbox.ToolOptions{Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
		runs++
		return []byte(`{"paid":` + gjson.GetBytes(call.Arguments, "amount").Raw + `,"to":` + gjson.GetBytes(call.Arguments, "to").Raw + `}`), nil
	}}); err != nil {
		t.Fatal(err)
	}
	loadRules(t, e, "b.toml", `
[rule]
id = "spent"
trigger = "on_budget_exhausted"
[action]
type = "set_state"
key = "spent"
value = "{{ context.tool }}/{{ context.budget }}"
`)
	out := evalString(t, e, `{"tool":"chat","session":"b","arguments":{"prompt":"Pay Bob twice.","allow_tools":true,"tools":["transfer"],"max_tool_calls":5}}`)
	if gjson.Get(out, "result.content").Str != "Paid Bob once; the budget is spent." || gjson.Get(out, "result.tool_calls.1.status").Str != "budget_exhausted" {
		t.Fatal(out)
	}
	if runs != 1 {
		t.Errorf("%d runs", runs)
	}
	if st := evalString(t, e, `{"tool":"state_get","session":"b","arguments":{"key":"spent"}}`); gjson.Get(st, "result.value").Str != "transfer/chat" {
		t.Errorf("on_budget_exhausted: %s", st)
	}
}

// max_turns: the last turn goes without tools.
func TestChat_maxTurns(t *testing.T) {
	e := chatEngine(t, "max_turns")
	registerTransfer(t, e)
	out := evalString(t, e, `{"tool":"chat","arguments":{"prompt":"Pay Bob.","allow_tools":true,"tools":["transfer"],"max_turns":1,"max_tool_calls":5}}`)
	if gjson.Get(out, "result.content").Str != "I cannot pay anyone in one turn." || gjson.Get(out, "result.turns").Int() != 1 {
		t.Fatal(out)
	}
	bad := evalString(t, e, `{"tool":"chat","arguments":{"prompt":"x","max_turns":0}}`)
	if !strings.Contains(bad, `"error":"invalid_args"`) {
		t.Errorf("max_turns 0: %s", bad)
	}
}

// Guards on a chat: on_chat_start denies a prompt (the model is never
// called), on_answer blocks an answer (the chat fails with blocked).
func TestChat_guards(t *testing.T) {
	e := chatEngine(t, "max_turns")
	loadRules(t, e, "g.toml", `
[[rules]]
id = "no-secrets-asked"
trigger = "on_chat_start"
[rules.condition]
expression = "context.prompt contains 'password'"
[[rules.actions]]
type = "deny"
reason = "prompts about passwords are not sent"

[[rules]]
id = "no-refusals"
trigger = "on_answer"
[rules.condition]
expression = "context.answer contains 'cannot' and context.prompt == 'Pay Bob.'"
[[rules.actions]]
type = "block"
reason = "the answer refuses"
`)
	out := evalString(t, e, `{"tool":"chat","arguments":{"prompt":"What is the admin password?"}}`)
	if out != `{"status":"error","error":"denied","message":"chat denied by rule \"no-secrets-asked\": prompts about passwords are not sent"}` {
		t.Fatal(out)
	}
	out = evalString(t, e, `{"tool":"chat","arguments":{"prompt":"Pay Bob.","max_turns":1}}`)
	if out != `{"status":"error","error":"blocked","message":"the chat's answer was blocked by rule \"no-refusals\": the answer refuses","details":{"rule":"no-refusals","reason":"the answer refuses"}}` {
		t.Fatal(out)
	}
}
