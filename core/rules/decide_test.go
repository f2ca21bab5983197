package rules

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// toolCtx is the context of an on_tool_call event of tool with args.
func toolCtx(tool string, args map[string]any) map[string]any {
	return map[string]any{"tool": map[string]any{"name": tool, "arguments": args}}
}

// Every decision of a rule on on_tool_call lands in its field of the
// outcome, the first rule's winning; they are independent of each other
// there (the engine applies deny > ask > rewrite > allow).
func TestDecide_eachDecisionOnToolCall(t *testing.T) {
	set := mustLoad(t, nil,
		rule("ask-big", "on_tool_call", "priority = 10", "context.tool.arguments.amount > 100",
			"type = \"ask\"\nreason = \"{{ context.tool.arguments.amount }} is a lot\""),
		rule("ask-second", "on_tool_call", "priority = 5", "context.tool.arguments.amount > 100",
			"type = \"ask\"\nreason = \"second\""),
		rule("cap", "on_tool_call", "priority = 8", "context.tool.arguments.amount > 1000",
			"type = \"rewrite\"\narguments = { amount = 1000 }\nmerge = true"),
		rule("whole", "on_tool_call", "priority = 1", "context.tool.arguments.amount > 1000",
			"type = \"rewrite\"\narguments = { other = true }"),
	)
	out := fire(set, &recHost{}, "on_tool_call", toolCtx("pay", map[string]any{"amount": 50.0, "to": "bob"}), false)
	if out.Decided() {
		t.Fatalf("a small payment decided: %+v", out)
	}
	out = fire(set, &recHost{}, "on_tool_call", toolCtx("pay", map[string]any{"amount": 500.0, "to": "bob"}), false)
	if out.Asked == nil || *out.Asked != (Denial{Rule: "ask-big", Reason: "500 is a lot"}) || out.Denied != nil || out.Rewrite != nil {
		t.Fatalf("asked %+v denied %+v rewrite %+v", out.Asked, out.Denied, out.Rewrite)
	}
	out = fire(set, &recHost{}, "on_tool_call", toolCtx("pay", map[string]any{"amount": 5000.0, "to": "bob"}), false)
	if out.Rewrite == nil || out.Rewrite.Rule != "cap" {
		t.Fatalf("rewrite %+v", out.Rewrite)
	}
	if want := map[string]any{"amount": 1000.0, "to": "bob"}; !reflect.DeepEqual(out.Rewrite.Arguments, want) {
		t.Errorf("merged arguments %v, want %v", out.Rewrite.Arguments, want)
	}
	if out.Asked == nil || out.Asked.Rule != "ask-big" {
		t.Errorf("asked %+v", out.Asked)
	}
	if out.Rewrite.Record == nil || out.Rewrite.Record.Type != ActRewrite {
		t.Errorf("the rewrite's record %+v", out.Rewrite.Record)
	}
	if got := firedIDs(out); !equal(got, []string{"ask-big", "cap", "ask-second", "whole"}) {
		t.Errorf("fired %q", got)
	}
}

// A rewrite written in Lua returns the new arguments; one that returns
// anything else is a rule that cannot be prepared, which denies the call.
func TestDecide_luaRewrite(t *testing.T) {
	set := mustLoad(t, nil, `
[rule]
id = "lower"
trigger = "on_tool_call"
[action]
type = "rewrite"
lua = """
local a = {}
for k, v in pairs(ctx.tool.arguments) do a[k] = v end
a.query = string.lower(a.query)
notify("lowered")
return a
"""`, `
[rule]
id = "broken"
trigger = "on_tool_call"
[condition]
expression = "context.tool.name == 'other'"
[action]
type = "rewrite"
lua = "return 'not a table'"
`)
	out := fire(set, &recHost{}, "on_tool_call", toolCtx("search", map[string]any{"query": "HeLLo", "n": 3.0}), false)
	if out.Rewrite == nil || !reflect.DeepEqual(out.Rewrite.Arguments, map[string]any{"query": "hello", "n": 3.0}) {
		t.Fatalf("rewrite %+v", out.Rewrite)
	}
	if got := messages(out); !equal(got, []string{"lowered"}) {
		t.Errorf("the script's notice: %q", got)
	}
	out = fire(set, &recHost{}, "on_tool_call", toolCtx("other", map[string]any{"query": "x"}), false)
	if out.Denied == nil || out.Denied.Rule != "broken" || !strings.Contains(out.Denied.Reason, "the script returned a string; a rewrite returns a table of arguments") {
		t.Errorf("denied %+v", out.Denied)
	}
}

// Block and redact on on_tool_complete and on_answer; redactions apply
// in order, a script's value first.
func TestDecide_blockAndRedact(t *testing.T) {
	set := mustLoad(t, nil,
		rule("no-secrets", "on_tool_complete", "priority = 5", "context.tool.name == 'vault'",
			"type = \"block\"\nreason = \"the vault's answers stay inside\""),
		rule("keys", "on_tool_complete", "", "",
			"type = \"redact\"\npatterns = [\"sk-[A-Za-z0-9]{8,}\", \"(?i)password=\\\\S+\"]"),
		rule("mail", "on_tool_complete", "", "",
			"type = \"redact\"\npatterns = [\"[a-z]+@example\\\\.com\"]\nreplacement = \"<mail>\""),
		rule("answer", "on_answer", "", "", "type = \"redact\"\nlua = \"return string.gsub(ctx.answer, '%d%d%d%d', '####')\""),
	)
	result := map[string]any{"name": "search", "result": map[string]any{"text": "key sk-abcdefghij, password=hunter2, ann@example.com", "n": 1.5}}
	out := fire(set, &recHost{}, "on_tool_complete", map[string]any{"tool": result}, false)
	if out.Blocked != nil || len(out.Redactions) != 2 {
		t.Fatalf("blocked %+v, redactions %d", out.Blocked, len(out.Redactions))
	}
	raw, _ := json.Marshal(result["result"])
	red, changed, err := Redact(raw, out.Redactions)
	if err != nil || !changed || string(red) != `{"n":1.5,"text":"key [redacted], [redacted] <mail>"}` {
		t.Errorf("redacted %s, %v, %v", red, changed, err)
	}
	same, changed, err := Redact([]byte(`{"n": 10000000000000000000001}`), out.Redactions)
	if err != nil || changed || string(same) != `{"n": 10000000000000000000001}` {
		t.Errorf("nothing to redact: %s, %v, %v", same, changed, err)
	}
	out = fire(set, &recHost{}, "on_tool_complete", map[string]any{"tool": map[string]any{"name": "vault"}}, false)
	if out.Blocked == nil || *out.Blocked != (Denial{Rule: "no-secrets", Reason: "the vault's answers stay inside"}) {
		t.Errorf("blocked %+v", out.Blocked)
	}
	out = fire(set, &recHost{}, "on_answer", map[string]any{"answer": "pin 1234 ok"}, false)
	text, err := RedactText("pin 1234 ok", out.Redactions)
	if err != nil || text != "pin #### ok" {
		t.Errorf("answer redacted %q, %v", text, err)
	}
}

// A decision where it does not act is a load error; so is a mode that is
// neither enforce nor shadow.
func TestDecide_loadErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{rule("a", "on_tool_complete", "", "", "type = \"ask\"\nreason = \"x\""), "ask only acts on on_tool_call, not on_tool_complete"},
		{rule("a", "on_tool_call", "", "", "type = \"block\"\nreason = \"x\""), "block only acts on on_tool_complete and on_answer, not on_tool_call"},
		{rule("a", "on_turn_start", "", "", "type = \"redact\"\npatterns = [\"x\"]"), "redact only acts on on_tool_complete and on_answer and on_chat_start, not on_turn_start"},
		{rule("a", "on_tool_call", "", "", "type = \"rewrite\"\nprompt = \"x\""), "on on_tool_call a rewrite gives the arguments, not a prompt"},
		{rule("a", "on_chat_start", "", "", "type = \"rewrite\"\narguments = {}"), "on on_chat_start a rewrite gives the prompt, not arguments"},
		{rule("a", "on_tool_call", "", "", "type = \"rewrite\""), "give one of arguments, lua or script"},
		{rule("a", "on_tool_call", "", "", "type = \"rewrite\"\nlua = \"return {}\"\nmerge = true"), "merge goes with arguments"},
		{rule("a", "on_answer", "", "", "type = \"redact\"\npatterns = [\"(\"]"), "pattern \"(\": error parsing regexp"},
		{rule("a", "on_answer", "", "", "type = \"redact\""), "give patterns, or one of lua and script"},
		{rule("a", "on_answer", "", "", "type = \"redact\"\npatterns = []"), "patterns: give 1 to 256 regular expressions"},
		{rule("a", "on_answer", "mode = \"watch\"", "", "type = \"block\"\nreason = \"x\""), "mode must be \"enforce\" or \"shadow\", not \"watch\""},
	} {
		if got := loadErr(t, src("a.toml", c.text)); !strings.Contains(got, c.want) {
			t.Errorf("%s\n got %s\nwant %s", c.text, got, c.want)
		}
	}
}

// A rule in shadow mode (by itself, by its file, or every rule of a
// source) records what it would decide, and enforces nothing; its trace
// is the enforcing rule's but for its mode.
func TestDecide_shadow(t *testing.T) {
	enforcing := []string{
		rule("no-rm", "on_tool_call", "priority = 9", "context.tool.name == 'rm'", "type = \"deny\"\nreason = \"never rm\"", notify("saw rm")),
		rule("ask-pay", "on_tool_call", "", "context.tool.name == 'pay'", "type = \"ask\"\nreason = \"money\""),
		rule("clip", "on_tool_call", "", "context.tool.name == 'pay'", "type = \"rewrite\"\narguments = { amount = 1 }"),
	}
	var shadowSources []Source
	for i, text := range enforcing {
		shadowSources = append(shadowSources, Source{Name: "s" + string(rune('0'+i)), Text: []byte(text), Shadow: true})
	}
	shadowSet, err := Load(shadowSources, nil)
	if err != nil {
		t.Fatal(err)
	}
	enforceSet := mustLoad(t, nil, enforcing...)
	for _, tool := range []string{"rm", "pay", "ls"} {
		c := toolCtx(tool, map[string]any{"amount": 5.0})
		en := fire(enforceSet, &recHost{}, "on_tool_call", c, true)
		sh := fire(shadowSet, &recHost{}, "on_tool_call", c, true)
		if sh.Denied != nil || sh.Asked != nil || sh.Rewrite != nil {
			t.Errorf("%s: shadow rules enforced: %+v", tool, sh)
		}
		var want []ShadowDecision
		if en.Denied != nil {
			want = append(want, ShadowDecision{Decision: "would_deny", Rule: en.Denied.Rule, Reason: en.Denied.Reason})
		}
		if en.Asked != nil {
			want = append(want, ShadowDecision{Decision: "would_ask", Rule: en.Asked.Rule, Reason: en.Asked.Reason})
		}
		if en.Rewrite != nil {
			want = append(want, ShadowDecision{Decision: "would_rewrite", Rule: en.Rewrite.Rule})
		}
		if !reflect.DeepEqual(sh.Shadow, want) {
			t.Errorf("%s: shadow %+v, want %+v", tool, sh.Shadow, want)
		}
		if !reflect.DeepEqual(messages(sh), messages(en)) || !reflect.DeepEqual(firedIDs(sh), firedIDs(en)) {
			t.Errorf("%s: the other actions differ: %q %q / %q %q", tool, messages(sh), firedIDs(sh), messages(en), firedIDs(en))
		}
		// The traces are the same but for the mode.
		if len(sh.Trace) != len(en.Trace) {
			t.Fatalf("%s: traces of %d and %d entries", tool, len(sh.Trace), len(en.Trace))
		}
		for i := range sh.Trace {
			s, e := sh.Trace[i], en.Trace[i]
			if s.Mode != ModeShadow || e.Mode != "" {
				t.Errorf("%s: modes %q and %q", tool, s.Mode, e.Mode)
			}
			s.Mode, s.DurationUS, e.DurationUS = "", 0, 0
			if !reflect.DeepEqual(json.RawMessage(AppendTrace(nil, []TraceEntry{s})), json.RawMessage(AppendTrace(nil, []TraceEntry{e}))) {
				t.Errorf("%s: trace entries differ:\n%s\n%s", tool, AppendTrace(nil, []TraceEntry{s}), AppendTrace(nil, []TraceEntry{e}))
			}
		}
	}
	// mode in the file, and a rule's own mode over it.
	set := mustLoad(t, nil, "mode = \"shadow\"\n"+`
[[rules]]
id = "a"
trigger = "on_tool_call"
[[rules.actions]]
type = "deny"
reason = "a"
[[rules]]
id = "b"
trigger = "on_tool_call"
mode = "enforce"
[[rules.actions]]
type = "deny"
reason = "b"
`)
	out := fire(set, &recHost{}, "on_tool_call", toolCtx("x", nil), false)
	if out.Denied == nil || out.Denied.Rule != "b" || len(out.Shadow) != 1 || out.Shadow[0].Rule != "a" {
		t.Errorf("denied %+v, shadow %+v", out.Denied, out.Shadow)
	}
	if set.Rule("a").Mode != ModeShadow || set.Rule("b").Mode != ModeEnforce {
		t.Errorf("modes %q %q", set.Rule("a").Mode, set.Rule("b").Mode)
	}
}

// Guards fail closed: a rule on on_tool_call that cannot be evaluated
// denies (every rule there), a guard on on_chat_start denies the chat, a
// guard on on_tool_complete or on_answer blocks; other rules there simply
// do not act. In shadow mode the failure is recorded, not enforced.
func TestDecide_guardsFailClosed(t *testing.T) {
	bad := "context.missing > 1"
	set := mustLoad(t, nil,
		rule("block-guard", "on_tool_complete", "", bad, "type = \"block\"\nreason = \"x\""),
		rule("notice", "on_tool_complete", "", bad, notify("n")),
		rule("chat-guard", "on_chat_start", "", bad, "type = \"redact\"\npatterns = [\"x\"]"),
		rule("answer-guard", "on_answer", "", bad, "type = \"redact\"\npatterns = [\"x\"]"),
	)
	out := fire(set, &recHost{}, "on_tool_complete", map[string]any{"tool": map[string]any{"name": "t"}}, false)
	if out.Blocked == nil || out.Blocked.Rule != "block-guard" || !strings.Contains(out.Blocked.Reason, "a guard that cannot tell blocks what it guards") {
		t.Errorf("blocked %+v", out.Blocked)
	}
	out = fire(set, &recHost{}, "on_chat_start", map[string]any{"prompt": "p"}, false)
	if out.Denied == nil || !strings.Contains(out.Denied.Reason, "a guard that cannot tell refuses the chat") {
		t.Errorf("chat denied %+v", out.Denied)
	}
	out = fire(set, &recHost{}, "on_answer", map[string]any{"answer": "a"}, false)
	if out.Blocked == nil || out.Blocked.Rule != "answer-guard" {
		t.Errorf("answer blocked %+v", out.Blocked)
	}
	shadow, err := Load([]Source{{Name: "s.toml", Text: []byte(rule("g", "on_tool_complete", "", bad, "type = \"block\"\nreason = \"x\"")), Shadow: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out = fire(shadow, &recHost{}, "on_tool_complete", map[string]any{"tool": map[string]any{"name": "t"}}, false)
	if out.Blocked != nil || len(out.Shadow) != 1 || out.Shadow[0].Decision != "would_block" {
		t.Errorf("shadow guard: blocked %+v, shadow %+v", out.Blocked, out.Shadow)
	}
}

// Lua scripts decide with ask() and block(), where those act.
func TestDecide_luaAskAndBlock(t *testing.T) {
	set := mustLoad(t, nil,
		rule("lua-ask", "on_tool_call", "", "", "type = \"lua\"\nlua = \"if ctx.tool.name == 'pay' then ask('pay needs a person') end\""),
		rule("lua-block", "on_tool_complete", "", "", "type = \"lua\"\nlua = \"block('no')\""),
		rule("lua-misplaced", "on_turn_start", "", "", "type = \"lua\"\nlua = \"ask('?')\""),
	)
	out := fire(set, &recHost{}, "on_tool_call", toolCtx("pay", nil), false)
	if out.Asked == nil || out.Asked.Reason != "pay needs a person" {
		t.Errorf("asked %+v", out.Asked)
	}
	out = fire(set, &recHost{}, "on_tool_complete", map[string]any{"tool": map[string]any{"name": "x"}}, false)
	if out.Blocked == nil || out.Blocked.Reason != "no" {
		t.Errorf("blocked %+v", out.Blocked)
	}
	out = fire(set, &recHost{}, "on_turn_start", map[string]any{}, true)
	if out.Asked != nil || len(out.Trace) != 1 || !strings.Contains(out.Trace[0].Skipped, "ask only acts on on_tool_call, not on_turn_start") {
		t.Errorf("misplaced ask: %+v %+v", out.Asked, out.Trace)
	}
}

// Matches evaluates one rule's condition for needs_approval, whatever
// stops the rules above it; a rule that is missing or watches another
// event is an error.
func TestDecide_matches(t *testing.T) {
	set := mustLoad(t, nil,
		rule("stopper", "on_tool_call", "priority = 9\nstop = true", "", notify("stop")),
		rule("big", "on_tool_call", "", "context.tool.arguments.amount > 100", notify("big")),
		rule("turns", "on_turn_start", "", "", notify("t")),
	)
	ev := func(amount float64) Event {
		return Event{Name: OnToolCall, Session: "s", Context: MapSource(toolCtx("pay", map[string]any{"amount": amount}))}
	}
	for _, c := range []struct {
		id     string
		amount float64
		want   bool
		err    string
	}{{"big", 500, true, ""}, {"big", 5, false, ""}, {"nope", 5, false, `no rule "nope" is loaded`},
		{"turns", 5, false, `rule "turns" watches on_turn_start, not on_tool_call`}} {
		got, err := set.Matches(context.Background(), c.id, ev(c.amount), &recHost{})
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("%s %v: %v, %v", c.id, c.amount, got, err)
		}
	}
	_, err := set.Matches(context.Background(), "big", Event{Name: OnToolCall, Context: MapSource(map[string]any{})}, &recHost{})
	if err == nil {
		t.Errorf("a condition that fails: no error")
	}
}

// Rule test files assert every decision, shadow ones included.
func TestDecide_ruleTests(t *testing.T) {
	set := mustLoad(t, nil,
		rule("ask-pay", "on_tool_call", "mode = \"shadow\"", "context.tool.name == 'pay'", "type = \"ask\"\nreason = \"money\""),
		rule("clip", "on_tool_call", "", "context.tool.name == 'pay'", "type = \"rewrite\"\narguments = { amount = 1 }\nmerge = true"),
		rule("keys", "on_tool_complete", "", "", "type = \"redact\"\npatterns = [\"sk-\\\\w+\"]"),
		rule("vault", "on_answer", "", "context.answer contains 'vault'", "type = \"block\"\nreason = \"no vault talk\""),
		rule("polite", "on_chat_start", "", "", "type = \"rewrite\"\nprompt = \"Please: {{ context.prompt }}\""),
	)
	tf, err := ParseTests(src("t.test.toml", `
[[cases]]
name = "pay is rewritten, and would be asked"
event = "on_tool_call"
tool = { name = "pay", arguments = { amount = 500, to = "bob" } }
rewritten = { amount = 1, to = "bob" }
asked = ""
shadow = [{ decision = "would_ask", rule = "ask-pay", reason = "money" }]

[[cases]]
name = "keys are cut out"
event = "on_tool_complete"
tool = { name = "x", result = { text = "use sk-abc please" } }
redacted = { text = "use [redacted] please" }
blocked = ""

[[cases]]
name = "the vault is not spoken of"
event = "on_answer"
payload = { answer = "the vault is open" }
blocked = "no vault talk"

[[cases]]
name = "prompts are polite"
event = "on_chat_start"
payload = { prompt = "go" }
rewritten = "Please: go"

[[cases]]
name = "wrong on purpose"
event = "on_tool_call"
tool = { name = "pay", arguments = { amount = 2 } }
rewritten = { amount = 2 }
shadow = []
`))
	if err != nil {
		t.Fatal(err)
	}
	rep := tf.Run(set, nil)
	if rep.Passed != 4 || rep.Failed != 1 {
		t.Fatalf("%+v", rep)
	}
	got := rep.Cases[4].Problems
	want := []string{`rewritten: got {"amount":1}, want {"amount":2}`, `shadow: got [would_ask by ask-pay ("money")], want []`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems\n got %q\nwant %q", got, want)
	}
}

// A rule in shadow mode with stop = true stops the rules in shadow mode
// below it, never the enforcing ones.
func TestDecide_shadowStop(t *testing.T) {
	set := mustLoad(t, nil,
		rule("shadow-stop", "on_tool_call", "priority = 9\nstop = true\nmode = \"shadow\"", "", "type = \"deny\"\nreason = \"s\""),
		rule("shadow-below", "on_tool_call", "priority = 5\nmode = \"shadow\"", "", "type = \"ask\"\nreason = \"b\""),
		rule("enforced-below", "on_tool_call", "priority = 1", "", "type = \"deny\"\nreason = \"e\""),
	)
	out := fire(set, &recHost{}, "on_tool_call", toolCtx("x", nil), false)
	if got := firedIDs(out); !equal(got, []string{"shadow-stop", "enforced-below"}) {
		t.Errorf("fired %q", got)
	}
	if out.Denied == nil || out.Denied.Rule != "enforced-below" || len(out.Shadow) != 1 {
		t.Errorf("denied %+v, shadow %+v", out.Denied, out.Shadow)
	}
}
