package core_test

// Engine-level tests of the rules integration (SPEC §5.2, §7): clara_emit,
// the rule tools, notices in envelopes, on_tool_call denials, traces, rule
// state, sessions, rule files, the context rules see, reloads under load,
// call_tool and chained events.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/toolbox"
)

// rulesEngine returns an engine whose state lives in memory and that reads
// no rule files, with cfg (TOML or JSON, may be "") applied on top. The
// built-in rules stay on unless cfg turns them off.
func rulesEngine(t testing.TB, cfg string) *core.Engine {
	t.Helper()
	e := newEngine(t)
	mustConfigure(t, e, "state_dir = \"\"\n[rules]\npaths = []\n")
	if cfg != "" {
		mustConfigure(t, e, cfg)
	}
	return e
}

func mustConfigure(t testing.TB, e *core.Engine, cfg string) {
	t.Helper()
	if out := e.Configure([]byte(cfg)); !strings.HasPrefix(string(out), `{"status":"success"`) {
		t.Fatalf("Configure(%q) = %s", cfg, out)
	}
}

// jsonText is s as a JSON string literal.
func jsonText(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// evalString runs one request and checks that the envelope is a JSON object.
func evalString(t testing.TB, e *core.Engine, req string) string {
	t.Helper()
	out := e.Evaluate([]byte(req))
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("Evaluate(%s): not a JSON object (%v): %s", req, err, out)
	}
	return string(out)
}

// emitString fires one event and checks that the envelope is a JSON object.
func emitString(t testing.TB, e *core.Engine, event string) string {
	t.Helper()
	out := e.Emit([]byte(event))
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("Emit(%s): not a JSON object (%v): %s", event, err, out)
	}
	return string(out)
}

// loadRuleText loads inline rules under name with rules_load and fails the
// test if they do not load.
func loadRuleText(t testing.TB, e *core.Engine, name, text string) {
	t.Helper()
	req := `{"tool":"rules_load","arguments":{"name":` + jsonText(name) + `,"toml":` + jsonText(text) + `}}`
	if out := evalString(t, e, req); !strings.HasPrefix(out, `{"status":"success","tool":"rules_load"`) {
		t.Fatalf("rules_load %s: %s", name, out)
	}
}

// decodeEnvelope decodes an envelope for the checks that cannot compare
// whole strings (durations in traces).
func decodeEnvelope(t testing.TB, env string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(env), &m); err != nil {
		t.Fatalf("not JSON (%v): %s", err, env)
	}
	return m
}

func expectEq(t testing.TB, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s\n got %s\nwant %s", what, got, want)
	}
}

// ---- clara_emit ---------------------------------------------------------------

func TestEmit_envelope(t *testing.T) {
	e := rulesEngine(t, "")
	cases := []struct{ in, want string }{
		// The built-in token_budget rule fires on on_turn_start.
		{`{"event":"on_turn_start","session":"s1","payload":{"turn":{"token_usage":0.85}}}`,
			`{"status":"success","result":{"fired":[{"rule":"token_budget","actions":[{"message":"Token budget at 85%. Consider wrapping up.","priority":"high","type":"notify_self"}]}],"notices":[{"rule":"token_budget","message":"Token budget at 85%. Consider wrapping up.","priority":"high","event":"on_turn_start"}],"denied":null}}`},
		// Both built-in on_turn_start rules, higher priority first.
		{`{"event":"on_turn_start","payload":{"turn":{"token_usage":0.9,"number":30}}}`,
			`{"status":"success","result":{"fired":[{"rule":"token_budget","actions":[{"message":"Token budget at 90%. Consider wrapping up.","priority":"high","type":"notify_self"}]},{"rule":"iteration_budget","actions":[{"message":"Turn 30 of a budget of 25. Consider wrapping up.","priority":"high","type":"notify_self"}]}],"notices":[{"rule":"token_budget","message":"Token budget at 90%. Consider wrapping up.","priority":"high","event":"on_turn_start"},{"rule":"iteration_budget","message":"Turn 30 of a budget of 25. Consider wrapping up.","priority":"high","event":"on_turn_start"}],"denied":null}}`},
		{`{"event":"on_turn_start","payload":{"turn":{"token_usage":0.5}}}`,
			`{"status":"success","result":{"fired":[],"notices":[],"denied":null}}`},
		{`{"event":"on_turn_start"}`, `{"status":"success","result":{"fired":[],"notices":[],"denied":null}}`},
		// A custom event nobody listens to; null members are absent ones.
		{`{"event":"my.custom_event","session":"s1","payload":{"a":1}}`, `{"status":"success","result":{"fired":[],"notices":[],"denied":null}}`},
		{`{"event":"x","session":null,"payload":null,"trace":null}`, `{"status":"success","result":{"fired":[],"notices":[],"denied":null}}`},
		{` {"event" : "x"} `, `{"status":"success","result":{"fired":[],"notices":[],"denied":null}}`},
		// Callers may emit on_session_end and the other non-tool hook points.
		{`{"event":"on_session_end","session":"s9"}`, `{"status":"success","result":{"fired":[],"notices":[],"denied":null}}`},
		// trace: true asks for the trace, even when no rule is a candidate.
		{`{"event":"nobody.listens","trace":true}`, `{"status":"success","result":{"fired":[],"notices":[],"denied":null,"trace":[]}}`},
		{`{"event":"on_turn_start","trace":false}`, `{"status":"success","result":{"fired":[],"notices":[],"denied":null}}`},
	}
	for _, c := range cases {
		expectEq(t, "Emit("+c.in+")", emitString(t, e, c.in), c.want)
	}
	// With candidates, the trace lists each one, matched or not.
	m := decodeEnvelope(t, emitString(t, e, `{"event":"on_turn_start","payload":{"turn":{"token_usage":0.85}},"trace":true}`))
	trace, _ := m["result"].(map[string]any)["trace"].([]any)
	if len(trace) != 2 {
		t.Fatalf("trace: %v", m)
	}
	first, second := trace[0].(map[string]any), trace[1].(map[string]any)
	if first["rule"] != "token_budget" || first["matched"] != true || first["value"] != true || first["event"] != "on_turn_start" || first["actions"] == nil {
		t.Errorf("first trace entry: %v", first)
	}
	if second["rule"] != "iteration_budget" || second["matched"] != false || second["value"] != false || second["actions"] != nil {
		t.Errorf("second trace entry: %v", second)
	}
	if _, ok := first["duration_us"].(float64); !ok {
		t.Errorf("no duration_us: %v", first)
	}
}

func TestEmit_errors(t *testing.T) {
	e := rulesEngine(t, "")
	long := strings.Repeat("s", 257)
	const shape = `an event is {\"event\", \"session\", \"payload\", \"trace\"}: `
	cases := []struct{ in, want string }{
		{``, `{"status":"error","error":"invalid_json","message":"Invalid JSON: empty input"}`},
		{`not json`, `{"status":"error","error":"invalid_json","message":"Invalid JSON: unexpected character 'n' at byte 0"}`},
		{`{"event":"x"`, `{"status":"error","error":"invalid_json","message":"Invalid JSON: unexpected end of input at byte 12"}`},
		{"{\"event\":\"\xff\"}", `{"status":"error","error":"invalid_json","message":"Invalid JSON: invalid UTF-8 at byte 10"}`},
		{`[{"event":"x"}]`, `{"status":"error","error":"invalid_json","message":"Invalid JSON: an event must be an object, got an array"}`},
		{`"x"`, `{"status":"error","error":"invalid_json","message":"Invalid JSON: an event must be an object, got a string"}`},
		{`{"event":"x","event":"y"}`, `{"status":"error","error":"invalid_json","message":"Invalid JSON: duplicate key \"event\" at byte 13"}`},
		// Members: only the four known ones, spelled exactly, of their types.
		{`{"event":"x","bogus":1}`, `{"status":"error","error":"invalid_request","message":"` + shape + `unknown field \"bogus\""}`},
		{`{"Event":"x"}`, `{"status":"error","error":"invalid_request","message":"` + shape + `unknown field \"Event\""}`},
		{`{"event":"x","SESSION":"s1"}`, `{"status":"error","error":"invalid_request","message":"` + shape + `unknown field \"SESSION\""}`},
		{`{"event":5}`, `{"status":"error","error":"invalid_request","message":"` + shape + `\"event\" must be a string, got a number"}`},
		{`{"event":"x","session":["s"]}`, `{"status":"error","error":"invalid_request","message":"` + shape + `\"session\" must be a string, got an array"}`},
		{`{"event":"x","payload":[1]}`, `{"status":"error","error":"invalid_request","message":"` + shape + `\"payload\" must be an object, got an array"}`},
		{`{"event":"x","trace":"yes"}`, `{"status":"error","error":"invalid_request","message":"` + shape + `\"trace\" must be a boolean, got a string"}`},
		// Event names.
		{`{}`, `{"status":"error","error":"invalid_request","message":"event \"\" is not an event name ([a-z][a-z0-9_.]*)"}`},
		{`{"event":""}`, `{"status":"error","error":"invalid_request","message":"event \"\" is not an event name ([a-z][a-z0-9_.]*)"}`},
		{`{"event":"Bad"}`, `{"status":"error","error":"invalid_request","message":"event \"Bad\" is not an event name ([a-z][a-z0-9_.]*)"}`},
		{`{"event":"9lives"}`, `{"status":"error","error":"invalid_request","message":"event \"9lives\" is not an event name ([a-z][a-z0-9_.]*)"}`},
		{`{"event":"has space"}`, `{"status":"error","error":"invalid_request","message":"event \"has space\" is not an event name ([a-z][a-z0-9_.]*)"}`},
		// The pipeline's own events.
		{`{"event":"on_tool_call"}`, `{"status":"error","error":"invalid_request","message":"on_tool_call is emitted by the tool pipeline itself, not by callers"}`},
		{`{"event":"on_tool_complete"}`, `{"status":"error","error":"invalid_request","message":"on_tool_complete is emitted by the tool pipeline itself, not by callers"}`},
		{`{"event":"on_tool_failure","payload":{}}`, `{"status":"error","error":"invalid_request","message":"on_tool_failure is emitted by the tool pipeline itself, not by callers"}`},
		// Sessions.
		{`{"event":"x","session":"` + long + `"}`, `{"status":"error","error":"invalid_request","message":"\"session\" is 257 bytes; a session name is at most 256 bytes"}`},
	}
	for _, c := range cases {
		expectEq(t, fmt.Sprintf("Emit(%.60q)", c.in), emitString(t, e, c.in), c.want)
	}
	expectEq(t, "Emit(nil)", string(e.Emit(nil)), `{"status":"error","error":"invalid_json","message":"Invalid JSON: NULL input"}`)
	// A session of exactly 256 bytes is fine.
	expectEq(t, "256-byte session", emitString(t, e, `{"event":"x","session":"`+long[:256]+`"}`),
		`{"status":"success","result":{"fired":[],"notices":[],"denied":null}}`)

	// The request limits apply to events too.
	mustConfigure(t, e, "[limits]\nmax_depth = 3\nmax_request_bytes = 100\n")
	expectEq(t, "too deep", emitString(t, e, `{"event":"x","payload":{"a":{"b":[1]}}}`),
		`{"status":"error","error":"invalid_request","message":"event nests deeper than limits.max_depth (3) at byte 33"}`)
	big := `{"event":"x","payload":{"a":"` + strings.Repeat("z", 100) + `"}}`
	expectEq(t, "too large", emitString(t, e, big),
		fmt.Sprintf(`{"status":"error","error":"invalid_request","message":"event is %d bytes, more than limits.max_request_bytes (100)"}`, len(big)))
}

// TestEmit_queuesNotices: an emission's notices are in its envelope and wait
// in its session for notifications_drain.
func TestEmit_queuesNotices(t *testing.T) {
	e := rulesEngine(t, "")
	emitString(t, e, `{"event":"on_turn_start","session":"s1","payload":{"turn":{"token_usage":0.85}}}`)
	emitString(t, e, `{"event":"on_turn_start","payload":{"turn":{"number":26}}}`)
	expectEq(t, "drain s1", evalString(t, e, `{"tool":"notifications_drain","session":"s1"}`),
		`{"status":"success","tool":"notifications_drain","result":{"notices":[{"rule":"token_budget","message":"Token budget at 85%. Consider wrapping up.","priority":"high","event":"on_turn_start"}],"dropped":0}}`)
	expectEq(t, "drain default", evalString(t, e, `{"tool":"notifications_drain"}`),
		`{"status":"success","tool":"notifications_drain","result":{"notices":[{"rule":"iteration_budget","message":"Turn 26 of a budget of 25. Consider wrapping up.","priority":"high","event":"on_turn_start"}],"dropped":0}}`)
}

// ---- rules_load, rules_list ---------------------------------------------------

const greetRules = `
[[rules]]
id = "greet"
description = "Greets who arrives"
trigger = "visitor.arrived"
priority = 5
[rules.condition]
expression = "context.name != 'nobody'"
[[rules.actions]]
type = "notify_self"
message = "Hello, {{ context.name }}!"
priority = "low"

[[rules]]
id = "count-visits"
trigger = "visitor.arrived"
[[rules.actions]]
type = "log"
level = "debug"
message = "visit by {{ context.name }}"
`

func TestRulesLoad_inlineThenEmit(t *testing.T) {
	e := rulesEngine(t, "")
	quiet := `{"status":"success","result":{"fired":[],"notices":[],"denied":null}}`
	expectEq(t, "before loading", emitString(t, e, `{"event":"visitor.arrived","payload":{"name":"Ada"}}`), quiet)

	loadRuleText(t, e, "visitors.toml", greetRules)
	expectEq(t, "after loading", emitString(t, e, `{"event":"visitor.arrived","payload":{"name":"Ada"}}`),
		`{"status":"success","result":{"fired":[{"rule":"greet","actions":[{"message":"Hello, Ada!","priority":"low","type":"notify_self"}]},{"rule":"count-visits","actions":[{"level":"debug","message":"visit by Ada","type":"log"}]}],"notices":[{"rule":"greet","message":"Hello, Ada!","priority":"low","event":"visitor.arrived"}],"denied":null}}`)
	expectEq(t, "condition false", emitString(t, e, `{"event":"visitor.arrived","payload":{"name":"nobody"}}`),
		`{"status":"success","result":{"fired":[{"rule":"count-visits","actions":[{"level":"debug","message":"visit by nobody","type":"log"}]}],"notices":[],"denied":null}}`)

	expectEq(t, "rules_list", evalString(t, e, `{"tool":"rules_list","arguments":{"trigger":"visitor.arrived"}}`),
		`{"status":"success","tool":"rules_list","result":{"rules":[{"id":"greet","description":"Greets who arrives","trigger":"visitor.arrived","priority":5,"stop":false,"condition":"context.name != 'nobody'","file":"visitors.toml","line":3},{"id":"count-visits","description":"","trigger":"visitor.arrived","priority":0,"stop":false,"condition":"","file":"visitors.toml","line":15}],"unmatched_paths":[]}}`)
	// The full listing has the built-in rules and the loaded ones.
	var listing struct {
		Result struct {
			Rules []struct{ ID, File string }
		}
	}
	if err := json.Unmarshal([]byte(evalString(t, e, `{"tool":"rules_list"}`)), &listing); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range listing.Result.Rules {
		ids = append(ids, r.ID+"@"+r.File)
	}
	expectEq(t, "all rules", strings.Join(ids, " "),
		"iteration_budget@builtin/iteration_budget.toml large_result@builtin/large_result.toml repeated_failure@builtin/repeated_failure.toml token_budget@builtin/token_budget.toml greet@visitors.toml count-visits@visitors.toml")
	expectEq(t, "rules_list, no such trigger", evalString(t, e, `{"tool":"rules_list","arguments":{"trigger":"nothing"}}`),
		`{"status":"success","tool":"rules_list","result":{"rules":[],"unmatched_paths":[]}}`)

	// Loading under the same name replaces; under another name adds.
	loadRuleText(t, e, "visitors.toml", "[rule]\nid = \"greet2\"\ntrigger = \"visitor.arrived\"\n[action]\ntype = \"notify_self\"\nmessage = \"Hi {{ context.name }}\"\n")
	loadRuleText(t, e, "inline", "[rule]\nid = \"bye\"\ntrigger = \"visitor.left\"\n[action]\ntype = \"notify_self\"\nmessage = \"Bye\"\n")
	expectEq(t, "replaced", emitString(t, e, `{"event":"visitor.arrived","payload":{"name":"Ada"}}`),
		`{"status":"success","result":{"fired":[{"rule":"greet2","actions":[{"message":"Hi Ada","priority":"normal","type":"notify_self"}]}],"notices":[{"rule":"greet2","message":"Hi Ada","priority":"normal","event":"visitor.arrived"}],"denied":null}}`)
	expectEq(t, "added", emitString(t, e, `{"event":"visitor.left"}`),
		`{"status":"success","result":{"fired":[{"rule":"bye","actions":[{"message":"Bye","priority":"normal","type":"notify_self"}]}],"notices":[{"rule":"bye","message":"Bye","priority":"normal","event":"visitor.left"}],"denied":null}}`)

	// Rules loaded with rules_load survive Configure; Reset drops them.
	mustConfigure(t, e, "[rules]\nbuiltin = false\n")
	if got := emitString(t, e, `{"event":"visitor.left"}`); !strings.Contains(got, `"rule":"bye"`) {
		t.Errorf("Configure dropped loaded rules: %s", got)
	}
	e.Reset()
	mustConfigure(t, e, "state_dir = \"\"\n[rules]\npaths = []\n")
	expectEq(t, "after Reset", emitString(t, e, `{"event":"visitor.left"}`), quiet)
}

func TestRulesLoad_failureKeepsRules(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	loadRuleText(t, e, "visitors.toml", greetRules)
	before := evalString(t, e, `{"tool":"rules_list"}`)
	fired := emitString(t, e, `{"event":"visitor.arrived","payload":{"name":"Ada"}}`)

	const unchanged = ` (the rules in force are unchanged)`
	cases := []struct{ name, text, want string }{
		{"syntax", "[rule]\nid = \"x\"\ntrigger = \"t\"\n[action]\ntype = = \"log\"\n",
			`{"status":"error","error":"invalid_args","message":"rules_load: bad.toml:5:8: unexpected character U+003D '=' at start of value` + unchanged + `","details":[{"file":"bad.toml","line":5,"col":8,"message":"unexpected character U+003D '=' at start of value"}]}`},
		{"unknown key", "[rule]\nid = \"x\"\ntrigger = \"t\"\nwhen = 1\n[action]\ntype = \"log\"\nmessage = \"m\"\n",
			`{"status":"error","error":"invalid_args","message":"rules_load: bad.toml:4:1: unknown key \"rule.when\"` + unchanged + `","details":[{"file":"bad.toml","line":4,"col":1,"message":"unknown key \"rule.when\""}]}`},
		{"several problems", "[[rules]]\nid = \"a\"\ntrigger = \"Bad\"\n[[rules.actions]]\ntype = \"log\"\nmessage = \"m\"\n\n[[rules]]\nid = \"b\"\ntrigger = \"t\"\n[[rules.actions]]\ntype = \"deny\"\nreason = \"no\"\n",
			`{"status":"error","error":"invalid_args","message":"rules_load: 2 problems: bad.toml:3: rule \"a\": trigger \"Bad\" is not an event name ([a-z][a-z0-9_.]*); bad.toml:12: rule \"b\": action 1 (deny): deny only acts on on_tool_call and on_chat_start, not t` + unchanged + `","details":[{"file":"bad.toml","line":3,"message":"rule \"a\": trigger \"Bad\" is not an event name ([a-z][a-z0-9_.]*)"},{"file":"bad.toml","line":12,"message":"rule \"b\": action 1 (deny): deny only acts on on_tool_call and on_chat_start, not t"}]}`},
		{"same id twice", "[rule]\nid = \"greet\"\ntrigger = \"t\"\n[action]\ntype = \"log\"\nmessage = \"m\"\n",
			`{"status":"error","error":"invalid_args","message":"rules_load: bad.toml:2: rule \"greet\" is defined twice (first at visitors.toml:3)` + unchanged + `","details":[{"file":"bad.toml","line":2,"message":"rule \"greet\" is defined twice (first at visitors.toml:3)"}]}`},
	}
	for _, c := range cases {
		req := `{"tool":"rules_load","arguments":{"name":"bad.toml","toml":` + jsonText(c.text) + `}}`
		expectEq(t, "rules_load "+c.name, evalString(t, e, req), c.want)
		expectEq(t, "listing after "+c.name, evalString(t, e, `{"tool":"rules_list"}`), before)
		expectEq(t, "emit after "+c.name, emitString(t, e, `{"event":"visitor.arrived","payload":{"name":"Ada"}}`), fired)
	}
	// A condition that does not compile, inline: file "inline", its line.
	req := `{"tool":"rules_load","arguments":{"toml":` + jsonText("[rule]\nid = \"c\"\ntrigger = \"t\"\n[condition]\nexpression = \"context.x >\"\n[action]\ntype = \"log\"\nmessage = \"m\"\n") + `}}`
	got := evalString(t, e, req)
	if !strings.HasPrefix(got, `{"status":"error","error":"invalid_args","message":"rules_load: inline:5: rule \"c\": condition: `) ||
		!strings.Contains(got, `"details":[{"file":"inline","line":5,"message":"rule \"c\": condition: `) {
		t.Errorf("bad condition: %s", got)
	}
	expectEq(t, "listing after a bad condition", evalString(t, e, `{"tool":"rules_list"}`), before)
	// Arguments are checked against the schema.
	expectEq(t, "rules_load bad arguments", evalString(t, e, `{"tool":"rules_load","arguments":{"toml":5}}`),
		`{"status":"error","error":"invalid_args","message":"tool \"rules_load\": arguments do not match input_schema: at /toml: got number, want string","details":[{"pointer":"/toml","message":"got number, want string"}]}`)
}

// ---- Notices in envelopes ----------------------------------------------------------

// flaky registers a tool that fails while *failing is true.
func flaky(t *testing.T, e *core.Engine, name string, failing *atomic.Bool) {
	t.Helper()
	register(t, e, `{"name":"`+name+`"}`, func(context.Context, toolbox.Call) ([]byte, error) {
		if failing.Load() {
			return nil, errors.New("upstream down")
		}
		return []byte(`"ok"`), nil
	})
}

func TestNotices_repeatedFailure(t *testing.T) {
	e := rulesEngine(t, "")
	var failing atomic.Bool
	failing.Store(true)
	flaky(t, e, "weather", &failing)
	plain := `{"status":"error","error":"tool_failed","message":"upstream down"}`
	noticed := `{"status":"error","error":"tool_failed","message":"upstream down","notices":[{"rule":"repeated_failure","message":"Tool weather failed 3 times in a row (last error: tool_failed: upstream down). Try something else.","priority":"high","event":"on_tool_failure"}]}`
	req := `{"tool":"weather","session":"w"}`
	for i, want := range []string{plain, plain, noticed, plain, plain} {
		expectEq(t, fmt.Sprintf("failure %d", i+1), evalString(t, e, req), want)
	}
	// Another session has its own history.
	expectEq(t, "other session", evalString(t, e, `{"tool":"weather","session":"v"}`), plain)
	// A success ends the streak; the next third failure warns again.
	failing.Store(false)
	expectEq(t, "success", evalString(t, e, req), `{"status":"success","tool":"weather","result":"ok"}`)
	failing.Store(true)
	for i, want := range []string{plain, plain, noticed} {
		expectEq(t, fmt.Sprintf("second streak, failure %d", i+1), evalString(t, e, req), want)
	}

	// The notices wait in their session until drained, oldest first; the
	// two identical ones are one, counted (notices.dedupe_window_ms).
	drained := evalString(t, e, `{"tool":"notifications_drain","session":"w"}`)
	expectEq(t, "drain w", drained, `{"status":"success","tool":"notifications_drain","result":{"notices":[`+
		`{"rule":"repeated_failure","message":"Tool weather failed 3 times in a row (last error: tool_failed: upstream down). Try something else.","priority":"high","event":"on_tool_failure","count":2}],"dropped":0}}`)
	expectEq(t, "drain w again", evalString(t, e, `{"tool":"notifications_drain","session":"w"}`),
		`{"status":"success","tool":"notifications_drain","result":{"notices":[],"dropped":0}}`)
	expectEq(t, "drain v", evalString(t, e, `{"tool":"notifications_drain","session":"v"}`),
		`{"status":"success","tool":"notifications_drain","result":{"notices":[],"dropped":0}}`)
	expectEq(t, "drain takes no arguments", evalString(t, e, `{"tool":"notifications_drain","arguments":{"session":"w"}}`),
		`{"status":"error","error":"invalid_args","message":"tool \"notifications_drain\": arguments do not match input_schema: at the top: additional properties 'session' not allowed","details":[{"pointer":"","message":"additional properties 'session' not allowed"}]}`)

	// The threshold is configuration.
	mustConfigure(t, e, "[rules.thresholds]\nrepeated_failures = 1\n")
	expectEq(t, "threshold 1", evalString(t, e, `{"tool":"weather","session":"u"}`),
		`{"status":"error","error":"tool_failed","message":"upstream down","notices":[{"rule":"repeated_failure","message":"Tool weather failed 1 times in a row (last error: tool_failed: upstream down). Try something else.","priority":"high","event":"on_tool_failure"}]}`)
}

func TestNotices_successAndErrorEnvelopes(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	loadRuleText(t, e, "notes", `
[[rules]]
id = "after-echo"
trigger = "on_tool_complete"
[rules.condition]
expression = "context.tool.name == 'echo'"
[[rules.actions]]
type = "notify_self"
message = "echoed {{ context.tool.result_bytes }} bytes"
priority = "low"

[[rules]]
id = "after-failure"
trigger = "on_tool_failure"
[[rules.actions]]
type = "notify_self"
message = "{{ context.tool.name }} failed: {{ context.tool.error }}"
priority = "critical"

[[rules]]
id = "before-any"
trigger = "on_tool_call"
priority = 10
[rules.condition]
expression = "context.tool.name != 'notifications_drain'"
[[rules.actions]]
type = "notify_self"
message = "calling {{ context.tool.name }}"
`)
	expectEq(t, "success", evalString(t, e, `{"tool":"echo","arguments":{"a":1},"id":3}`),
		`{"status":"success","id":3,"tool":"echo","result":{"a":1},"notices":[{"rule":"before-any","message":"calling echo","priority":"normal","event":"on_tool_call"},{"rule":"after-echo","message":"echoed 7 bytes","priority":"low","event":"on_tool_complete"}]}`)
	expectEq(t, "invalid arguments", evalString(t, e, `{"tool":"get_time","arguments":{"timezone":"Mars/Base"}}`),
		`{"status":"error","error":"invalid_args","message":"get_time: unknown timezone \"Mars/Base\" (use an IANA name such as \"Europe/Paris\")","notices":[{"rule":"before-any","message":"calling get_time","priority":"normal","event":"on_tool_call"},{"rule":"after-failure","message":"get_time failed: invalid_args: get_time: unknown timezone \"Mars/Base\" (use an IANA name such as \"Europe/Paris\")","priority":"critical","event":"on_tool_failure"}]}`)
	// No tool, no tool events.
	expectEq(t, "unknown tool", evalString(t, e, `{"tool":"nope"}`), `{"status":"error","error":"unknown_tool","message":"Tool not found: nope"}`)
	// A simple-form request goes through the same pipeline.
	expectEq(t, "simple form", evalString(t, e, `{"q":"?"}`),
		`{"status":"success","tool":"echo","result":{"q":"?"},"notices":[{"rule":"before-any","message":"calling echo","priority":"normal","event":"on_tool_call"},{"rule":"after-echo","message":"echoed 9 bytes","priority":"low","event":"on_tool_complete"}]}`)
	var drained struct {
		Result struct {
			Notices []struct{ Rule string }
		}
	}
	if err := json.Unmarshal([]byte(evalString(t, e, `{"tool":"notifications_drain"}`)), &drained); err != nil {
		t.Fatal(err)
	}
	// Six notices came; the second "calling echo" counts in the first.
	if n := len(drained.Result.Notices); n != 5 {
		t.Errorf("drained %d notices, want 5: %+v", n, drained)
	}
}

// ---- on_tool_call denials ------------------------------------------------------------

func TestOnToolCall_denyBeforeValidation(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	var runs atomic.Int32
	register(t, e, `{"name":"files","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}}`,
		func(_ context.Context, c toolbox.Call) ([]byte, error) { runs.Add(1); return c.Arguments, nil })
	loadRuleText(t, e, "guard", `
[[rules]]
id = "no-etc"
trigger = "on_tool_call"
priority = 10
[rules.condition]
expression = "context.tool.name == 'files' && (context.tool.arguments.path ?? '') startsWith '/etc'"
[[rules.actions]]
type = "deny"
reason = "{{ context.tool.arguments.path }} is off limits"

[[rules]]
id = "no-nothing"
trigger = "on_tool_call"
[rules.condition]
expression = "context.tool.name == 'files' && context.tool.arguments.path == nil"
[[rules.actions]]
type = "notify_self"
message = "files called without a path"
[[rules.actions]]
type = "deny"
reason = "give a path"
`)
	cases := []struct{ in, want string }{
		{`{"tool":"files","arguments":{"path":"/etc/passwd"}}`,
			`{"status":"error","error":"denied","message":"tool \"files\" denied by rule \"no-etc\": /etc/passwd is off limits"}`},
		// Denied before validation: these arguments would not validate.
		{`{"tool":"files","arguments":{"path":"/etc/x","extra":1}}`,
			`{"status":"error","error":"denied","message":"tool \"files\" denied by rule \"no-etc\": /etc/x is off limits"}`},
		{`{"tool":"files","arguments":{}}`,
			`{"status":"error","error":"denied","message":"tool \"files\" denied by rule \"no-nothing\": give a path","notices":[{"rule":"no-nothing","message":"files called without a path","priority":"normal","event":"on_tool_call"}]}`},
		{`{"tool":"files","arguments":{"path":"/tmp/x"}}`, `{"status":"success","tool":"files","result":{"path":"/tmp/x"}}`},
		{`{"tool":"files","arguments":{"path":"/tmp/x","extra":1}}`,
			`{"status":"error","error":"invalid_args","message":"tool \"files\": arguments do not match input_schema: at the top: additional properties 'extra' not allowed","details":[{"pointer":"","message":"additional properties 'extra' not allowed"}]}`},
		{`{"tool":"echo","arguments":{"path":"/etc/passwd"}}`, `{"status":"success","tool":"echo","result":{"path":"/etc/passwd"}}`},
		// Policy comes before the rules.
		{`{"tool":"files","arguments":{"path":"/etc/x"},"policy":{"deny":["files"]}}`,
			`{"status":"error","error":"denied","message":"tool \"files\" denied by the policy of the request: its deny list names it"}`},
	}
	for _, c := range cases {
		expectEq(t, c.in, evalString(t, e, c.in), c.want)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want 1 (only the allowed call)", n)
	}
	// Every call is audited, the denied ones as denied.
	codes := map[string]int{}
	for _, r := range e.Audit().Tail(100) {
		if r.Tool == "files" {
			codes[string(r.Code)]++
		}
	}
	if fmt.Sprint(codes) != "map[:1 denied:4 invalid_args:1]" {
		t.Errorf("audit of files: %v", codes)
	}
	// The denial is in the trace.
	m := decodeEnvelope(t, evalString(t, e, `{"tool":"files","arguments":{"path":"/etc/x"},"trace":true}`))
	trace, _ := m["trace"].([]any)
	if m["error"] != "denied" || len(trace) != 2 {
		t.Fatalf("trace of a denial: %v", m)
	}
	entry := trace[0].(map[string]any)
	actions, _ := entry["actions"].([]any)
	if entry["rule"] != "no-etc" || entry["matched"] != true || len(actions) != 1 || actions[0].(map[string]any)["reason"] != "/etc/x is off limits" {
		t.Errorf("trace entry: %v", entry)
	}
	if entry := trace[1].(map[string]any); entry["rule"] != "no-nothing" || entry["matched"] != false {
		t.Errorf("trace entry: %v", entry)
	}
}

// ---- trace ----------------------------------------------------------------------------

func TestTrace_evaluate(t *testing.T) {
	e := rulesEngine(t, "")
	// large_result (built in) is the one candidate of an echo's on_tool_complete.
	m := decodeEnvelope(t, evalString(t, e, `{"tool":"echo","arguments":{"a":1},"trace":true}`))
	trace, ok := m["trace"].([]any)
	if m["status"] != "success" || !ok || len(trace) != 1 {
		t.Fatalf("trace: %v", m)
	}
	entry := trace[0].(map[string]any)
	if entry["rule"] != "large_result" || entry["event"] != "on_tool_complete" || entry["matched"] != false || entry["value"] != false {
		t.Errorf("trace entry: %v", entry)
	}
	// Without trace, no trace; with trace and no candidate, an empty one.
	expectEq(t, "no trace", evalString(t, e, `{"tool":"echo","arguments":{"a":1}}`), `{"status":"success","tool":"echo","result":{"a":1}}`)
	mustConfigure(t, e, "[rules]\nbuiltin = false\n")
	expectEq(t, "empty trace", evalString(t, e, `{"tool":"echo","arguments":{"a":1},"trace":true}`), `{"status":"success","tool":"echo","result":{"a":1},"trace":[]}`)
	expectEq(t, "empty trace, error", evalString(t, e, `{"tool":"nope","trace":true}`), `{"status":"error","error":"unknown_tool","message":"Tool not found: nope","trace":[]}`)

	// A condition that fails at run time is in the trace with its error,
	// and the rule does not fire.
	loadRuleText(t, e, "broken", "[rule]\nid = \"broken\"\ntrigger = \"on_tool_complete\"\n[condition]\nexpression = \"context.tool.arguments.n > 2\"\n[action]\ntype = \"notify_self\"\nmessage = \"big n\"\n")
	m = decodeEnvelope(t, evalString(t, e, `{"tool":"echo","arguments":{"n":"text"},"trace":true}`))
	trace, _ = m["trace"].([]any)
	if m["status"] != "success" || m["notices"] != nil || len(trace) != 1 {
		t.Fatalf("trace: %v", m)
	}
	entry = trace[0].(map[string]any)
	if entry["rule"] != "broken" || entry["matched"] != false || !strings.HasPrefix(fmt.Sprint(entry["error"]), "condition: ") {
		t.Errorf("trace entry: %v", entry)
	}
	if got := evalString(t, e, `{"tool":"echo","arguments":{"n":3}}`); !strings.Contains(got, `"message":"big n"`) {
		t.Errorf("rule did not fire: %s", got)
	}
}

// ---- State ------------------------------------------------------------------------------

const stateRules = `
[[rules]]
id = "remember"
trigger = "remember"
[[rules.actions]]
type = "set_state"
key = "last"
value = "{{ context.n }}"
[[rules.actions]]
type = "set_state"
key = "label"
value = "n={{ context.n }}"

[[rules]]
id = "strict-mode"
trigger = "check"
[rules.condition]
expression = "context.state.mode == 'strict'"
[[rules.actions]]
type = "notify_self"
message = "strict; last was {{ context.state.last ?? 'unset' }}"
`

func TestState_rulesAndTools(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	loadRuleText(t, e, "state", stateRules)
	quiet := `{"status":"success","result":{"fired":[],"notices":[],"denied":null}}`

	expectEq(t, "state_get before", evalString(t, e, `{"tool":"state_get","session":"s1","arguments":{"key":"last"}}`),
		`{"status":"success","tool":"state_get","result":{"key":"last","found":false}}`)
	expectEq(t, "set_state", emitString(t, e, `{"event":"remember","session":"s1","payload":{"n":42}}`),
		`{"status":"success","result":{"fired":[{"rule":"remember","actions":[{"key":"last","type":"set_state","value":42},{"key":"label","type":"set_state","value":"n=42"}]}],"notices":[],"denied":null}}`)
	expectEq(t, "state_get after", evalString(t, e, `{"tool":"state_get","session":"s1","arguments":{"key":"last"}}`),
		`{"status":"success","tool":"state_get","result":{"key":"last","found":true,"value":42}}`)
	expectEq(t, "typed by the template", evalString(t, e, `{"tool":"state_get","session":"s1","arguments":{"key":"label"}}`),
		`{"status":"success","tool":"state_get","result":{"key":"label","found":true,"value":"n=42"}}`)
	expectEq(t, "other session", evalString(t, e, `{"tool":"state_get","session":"s2","arguments":{"key":"last"}}`),
		`{"status":"success","tool":"state_get","result":{"key":"last","found":false}}`)

	expectEq(t, "condition before state_set", emitString(t, e, `{"event":"check","session":"s1"}`), quiet)
	expectEq(t, "state_set", evalString(t, e, `{"tool":"state_set","session":"s1","arguments":{"key":"mode","value":"strict"}}`),
		`{"status":"success","tool":"state_set","result":{"key":"mode","stored":true}}`)
	expectEq(t, "condition after state_set", emitString(t, e, `{"event":"check","session":"s1"}`),
		`{"status":"success","result":{"fired":[{"rule":"strict-mode","actions":[{"message":"strict; last was 42","priority":"normal","type":"notify_self"}]}],"notices":[{"rule":"strict-mode","message":"strict; last was 42","priority":"normal","event":"check"}],"denied":null}}`)
	expectEq(t, "condition in another session", emitString(t, e, `{"event":"check","session":"s2"}`), quiet)
	// Values are any JSON; a new value replaces the old.
	evalString(t, e, `{"tool":"state_set","session":"s1","arguments":{"key":"mode","value":{"level":["a",1,null,true]}}}`)
	expectEq(t, "JSON value", evalString(t, e, `{"tool":"state_get","session":"s1","arguments":{"key":"mode"}}`),
		`{"status":"success","tool":"state_get","result":{"key":"mode","found":true,"value":{"level":["a",1,null,true]}}}`)
	expectEq(t, "condition after the change", emitString(t, e, `{"event":"check","session":"s1"}`), quiet)
	expectEq(t, "state_set without value", evalString(t, e, `{"tool":"state_set","arguments":{"key":"k"}}`),
		`{"status":"error","error":"invalid_args","message":"tool \"state_set\": arguments do not match input_schema: at the top: missing property 'value'","details":[{"pointer":"","message":"missing property 'value'"}]}`)
}

func TestState_fileOnlyAfterWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	db := filepath.Join(dir, "state.db")
	cfg := "state_dir = " + jsonText(dir) + "\n[rules]\nbuiltin = false\n"
	e := rulesEngine(t, cfg)
	loadRuleText(t, e, "state", stateRules)
	exists := func() bool { _, err := os.Stat(db); return err == nil }

	// Reads do not create the database (nor its directory).
	evalString(t, e, `{"tool":"state_get","arguments":{"key":"last"}}`)
	emitString(t, e, `{"event":"check"}`)
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("reading the state created %s", dir)
	}
	// A rule's write does.
	emitString(t, e, `{"event":"remember","payload":{"n":7}}`)
	if !exists() {
		t.Fatalf("no %s after a set_state", db)
	}
	evalString(t, e, `{"tool":"state_set","arguments":{"key":"mode","value":"strict"}}`)

	// A new engine on the same directory sees what the first one stored.
	e2 := rulesEngine(t, cfg)
	loadRuleText(t, e2, "state", stateRules)
	expectEq(t, "state_get, new engine", evalString(t, e2, `{"tool":"state_get","arguments":{"key":"last"}}`),
		`{"status":"success","tool":"state_get","result":{"key":"last","found":true,"value":7}}`)
	expectEq(t, "condition, new engine", emitString(t, e2, `{"event":"check"}`),
		`{"status":"success","result":{"fired":[{"rule":"strict-mode","actions":[{"message":"strict; last was 7","priority":"normal","type":"notify_self"}]}],"notices":[{"rule":"strict-mode","message":"strict; last was 7","priority":"normal","event":"check"}],"denied":null}}`)
}

func TestState_stateSetCreatesFile(t *testing.T) {
	dir := t.TempDir()
	e := rulesEngine(t, "state_dir = "+jsonText(dir))
	evalString(t, e, `{"tool":"state_get","arguments":{"key":"k"}}`)
	if _, err := os.Stat(filepath.Join(dir, "state.db")); err == nil {
		t.Fatal("state_get created the database")
	}
	expectEq(t, "state_set", evalString(t, e, `{"tool":"state_set","arguments":{"key":"k","value":[1]}}`),
		`{"status":"success","tool":"state_set","result":{"key":"k","stored":true}}`)
	if _, err := os.Stat(filepath.Join(dir, "state.db")); err != nil {
		t.Fatalf("state_set did not create the database: %v", err)
	}
}

// ---- Sessions ---------------------------------------------------------------------------

func TestSessionEnd(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	loadRuleText(t, e, "sessions", `
[[rules]]
id = "goodbye"
trigger = "on_session_end"
[[rules.actions]]
type = "notify_self"
message = "bye {{ context.event.session }} after {{ context.history.tool_count }} calls"

[[rules]]
id = "note-echo"
trigger = "on_tool_complete"
[rules.condition]
expression = "context.tool.name == 'echo'"
[[rules.actions]]
type = "notify_self"
message = "echo"

[[rules]]
id = "history"
trigger = "how.many"
[[rules.actions]]
type = "notify_self"
message = "{{ context.history.tool_count }} calls, {{ context.history.recent_tools | json }}"
`)
	for i := 0; i < 3; i++ {
		evalString(t, e, `{"tool":"echo","session":"s1"}`)
	}
	evalString(t, e, `{"tool":"echo","session":"s2"}`)
	evalString(t, e, `{"tool":"kv_set","session":"s1","arguments":{"key":"k","value":1}}`)
	evalString(t, e, `{"tool":"state_set","session":"s1","arguments":{"key":"k","value":2}}`)

	// Ended from another session, by name.
	expectEq(t, "session_end", evalString(t, e, `{"tool":"session_end","arguments":{"session":"s1"}}`),
		`{"status":"success","tool":"session_end","result":{"session":"s1","emitted":{"fired":[{"rule":"goodbye","actions":[{"message":"bye s1 after 5 calls","priority":"normal","type":"notify_self"}]}],"notices":[{"rule":"goodbye","message":"bye s1 after 5 calls","priority":"normal","event":"on_session_end"}],"denied":null}}}`)
	// Its history, notices and key-value data are gone; its state stays.
	expectEq(t, "history after", emitString(t, e, `{"event":"how.many","session":"s1"}`),
		`{"status":"success","result":{"fired":[{"rule":"history","actions":[{"message":"0 calls, []","priority":"normal","type":"notify_self"}]}],"notices":[{"rule":"history","message":"0 calls, []","priority":"normal","event":"how.many"}],"denied":null}}`)
	expectEq(t, "notices after", evalString(t, e, `{"tool":"notifications_drain","session":"s1"}`),
		`{"status":"success","tool":"notifications_drain","result":{"notices":[{"rule":"history","message":"0 calls, []","priority":"normal","event":"how.many"}],"dropped":0}}`)
	expectEq(t, "kv after", evalString(t, e, `{"tool":"kv_get","session":"s1","arguments":{"key":"k"}}`),
		`{"status":"success","tool":"kv_get","result":{"key":"k","found":false}}`)
	expectEq(t, "state after", evalString(t, e, `{"tool":"state_get","session":"s1","arguments":{"key":"k"}}`),
		`{"status":"success","tool":"state_get","result":{"key":"k","found":true,"value":2}}`)
	// Another session is untouched.
	expectEq(t, "other session", emitString(t, e, `{"event":"how.many","session":"s2"}`),
		`{"status":"success","result":{"fired":[{"rule":"history","actions":[{"message":"1 calls, [\"echo\"]","priority":"normal","type":"notify_self"}]}],"notices":[{"rule":"history","message":"1 calls, [\"echo\"]","priority":"normal","event":"how.many"}],"denied":null}}`)
	if got := evalString(t, e, `{"tool":"notifications_drain","session":"s2"}`); strings.Count(got, `"rule":`) != 2 {
		t.Errorf("s2 lost its notices: %s", got)
	}

	// Without arguments, the calling session ends; "default" too (it saw
	// rules_load, the session_end of s1 and an echo).
	evalString(t, e, `{"tool":"echo"}`)
	expectEq(t, "end default", evalString(t, e, `{"tool":"session_end"}`),
		`{"status":"success","tool":"session_end","result":{"session":"default","emitted":{"fired":[{"rule":"goodbye","actions":[{"message":"bye default after 3 calls","priority":"normal","type":"notify_self"}]}],"notices":[{"rule":"goodbye","message":"bye default after 3 calls","priority":"normal","event":"on_session_end"}],"denied":null}}}`)
	expectEq(t, "default drained", evalString(t, e, `{"tool":"notifications_drain"}`),
		`{"status":"success","tool":"notifications_drain","result":{"notices":[],"dropped":0}}`)

	// Errors.
	expectEq(t, "empty name", evalString(t, e, `{"tool":"session_end","arguments":{"session":""}}`),
		`{"status":"error","error":"invalid_args","message":"tool \"session_end\": arguments do not match input_schema: at /session: minLength: got 0, want 1","details":[{"pointer":"/session","message":"minLength: got 0, want 1"}]}`)
	expectEq(t, "long name", evalString(t, e, `{"tool":"session_end","arguments":{"session":"`+strings.Repeat("x", 257)+`"}}`),
		`{"status":"error","error":"invalid_args","message":"\"session\" is 257 bytes; a session name is at most 256 bytes"}`)
}

// ---- Rule files -------------------------------------------------------------------------

const pingRule = `[rule]
id = "pong"
trigger = "ping"
[condition]
expression = "context.n > 0"
[action]
type = "notify_self"
message = "pong {{ context.n }}"
`

const pingJSONRule = `{"rules":[{"id":"pong-json","trigger":"ping","priority":-1,"actions":[{"type":"log","message":"json rule"}]}]}`

const pingTests = `rules = ["pong.toml"]
[[cases]]
name = "pongs"
event = "ping"
payload = { n = 2 }
fired = ["pong"]
notices = ["pong 2"]

[[cases]]
name = "wrong on purpose"
event = "ping"
payload = { n = 0 }
fired = ["pong"]
`

// ruleProject writes a project with rule files, and a test file beside
// them as the shipped rules have.
func ruleProject(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for name, text := range map[string]string{
		"rules/pong.toml":       pingRule,
		"rules/pong.test.toml":  pingTests,
		"rules/more/pong.json":  pingJSONRule,
		"rules/notes.txt":       "not a rule file",
		"elsewhere/other.toml":  strings.ReplaceAll(pingRule, `"pong"`, `"other"`),
		"tests/pong_case.toml":  "rules = [\"../rules/pong.toml\"]\n[[cases]]\nname = \"relative to the test file\"\nevent = \"ping\"\npayload = { n = 1 }\nnotices = [\"pong 1\"]\n",
		"rules/broken/bad.toml": "[rule]\nid = \"bad\"\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeFile(p, text); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestRulesPaths(t *testing.T) {
	root := ruleProject(t)
	e := rulesEngine(t, `{"project_root":`+jsonText(root)+`,"rules":{"builtin":false,"paths":["rules/*.toml","rules/more/*.json"]}}`)
	expectEq(t, "rules_list", evalString(t, e, `{"tool":"rules_list"}`),
		`{"status":"success","tool":"rules_list","result":{"rules":[{"id":"pong-json","description":"","trigger":"ping","priority":-1,"stop":false,"condition":"","file":`+jsonText(filepath.Join(root, "rules/more/pong.json"))+`,"line":1},{"id":"pong","description":"","trigger":"ping","priority":0,"stop":false,"condition":"context.n \u003e 0","file":`+jsonText(filepath.Join(root, "rules/pong.toml"))+`,"line":2}],"unmatched_paths":[]}}`)
	// Files load in path order; rules fire in priority order.
	expectEq(t, "emit", emitString(t, e, `{"event":"ping","payload":{"n":3}}`),
		`{"status":"success","result":{"fired":[{"rule":"pong","actions":[{"message":"pong 3","priority":"normal","type":"notify_self"}]},{"rule":"pong-json","actions":[{"level":"info","message":"json rule","type":"log"}]}],"notices":[{"rule":"pong","message":"pong 3","priority":"normal","event":"ping"}],"denied":null}}`)

	// rules_load with no arguments reads the files again.
	if err := writeFile(filepath.Join(root, "rules/pong.toml"), strings.ReplaceAll(pingRule, "pong {{", "PONG {{")); err != nil {
		t.Fatal(err)
	}
	evalString(t, e, `{"tool":"rules_load"}`)
	if got := emitString(t, e, `{"event":"ping","payload":{"n":3}}`); !strings.Contains(got, `"message":"PONG 3"`) {
		t.Errorf("not reloaded: %s", got)
	}
	// rules_load paths adds files, relative to project_root.
	got := evalString(t, e, `{"tool":"rules_load","arguments":{"paths":["elsewhere/*.toml"]}}`)
	if !strings.Contains(got, `"id":"other"`) || !strings.Contains(got, `"id":"pong"`) {
		t.Errorf("rules_load paths: %s", got)
	}
	expectEq(t, "rules_load paths, no match", evalString(t, e, `{"tool":"rules_load","arguments":{"paths":["nowhere/*.toml"]}}`),
		`{"status":"error","error":"invalid_args","message":"rules_load: no file matches [\"nowhere/*.toml\"]"}`)

	// A file that does not load fails the configuration, which stays.
	before := e.Config().Rules.Paths
	out := string(e.Configure([]byte(`{"rules":{"paths":["rules/broken/*.toml"]}}`)))
	bad := filepath.Join(root, "rules/broken/bad.toml")
	if !strings.HasPrefix(out, `{"status":"error","error":"invalid_request","message":"clara_configure: 2 problems: `+bad+`:2: rule \"bad\": trigger is missing; `+bad+`:2: rule \"bad\": no action: give [action] or [[actions]]","details":[{"file":`+jsonText(bad)+`,"line":2,`) {
		t.Errorf("broken file: %s", out)
	}
	if after := e.Config().Rules.Paths; strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("paths changed to %v", after)
	}
}

// TestRulesPaths_defaultPatternSkipsTests: the default pattern rules/*.toml
// matches test files kept beside the rules (NAME.test.toml, as the shipped
// rules have them); they are not rule files.
func TestRulesPaths_defaultPatternSkipsTests(t *testing.T) {
	root := ruleProject(t)
	e := rulesEngine(t, `{"project_root":`+jsonText(root)+`,"rules":{"builtin":false,"paths":["rules/*.toml"]}}`)
	expectEq(t, "rules_list", evalString(t, e, `{"tool":"rules_list"}`),
		`{"status":"success","tool":"rules_list","result":{"rules":[{"id":"pong","description":"","trigger":"ping","priority":0,"stop":false,"condition":"context.n \u003e 0","file":`+jsonText(filepath.Join(root, "rules/pong.toml"))+`,"line":2}],"unmatched_paths":[]}}`)
}

func TestRulesTest(t *testing.T) {
	root := ruleProject(t)
	e := rulesEngine(t, `{"project_root":`+jsonText(root)+`,"rules":{"builtin":false,"paths":["rules/pong.toml"]}}`)
	report := `{"file":%s,"passed":1,"failed":1,"cases":[{"name":"pongs","passed":true},{"name":"wrong on purpose","passed":false,"problems":["fired: got [], want [\"pong\"]"]}]}`
	// A path relative to project_root; the rule files it names are relative
	// to the test file.
	expectEq(t, "relative path", evalString(t, e, `{"tool":"rules_test","arguments":{"path":"rules/pong.test.toml"}}`),
		`{"status":"success","tool":"rules_test","result":`+fmt.Sprintf(report, `"rules/pong.test.toml"`)+`}`)
	abs := filepath.Join(root, "rules/pong.test.toml")
	expectEq(t, "absolute path", evalString(t, e, `{"tool":"rules_test","arguments":{"path":`+jsonText(abs)+`}}`),
		`{"status":"success","tool":"rules_test","result":`+fmt.Sprintf(report, jsonText(abs))+`}`)
	expectEq(t, "rules in another folder", evalString(t, e, `{"tool":"rules_test","arguments":{"path":"tests/pong_case.toml"}}`),
		`{"status":"success","tool":"rules_test","result":{"file":"tests/pong_case.toml","passed":1,"failed":0,"cases":[{"name":"relative to the test file","passed":true}]}}`)
	// Inline, against the rules in force.
	inline := "[[cases]]\nname = \"in force\"\nevent = \"ping\"\npayload = { n = 5 }\nnotices = [\"pong 5\"]\n\n[[cases]]\nname = \"silent\"\nevent = \"ping\"\npayload = { n = 5 }\nnotices = []\n"
	expectEq(t, "inline", evalString(t, e, `{"tool":"rules_test","arguments":{"toml":`+jsonText(inline)+`}}`),
		`{"status":"success","tool":"rules_test","result":{"file":"inline","passed":1,"failed":1,"cases":[{"name":"in force","passed":true},{"name":"silent","passed":false,"problems":["notices: got [\"pong 5\"], want []"]}]}}`)
	// Errors.
	cases := []struct{ args, want string }{
		{`{}`, `{"status":"error","error":"invalid_args","message":"rules_test: give path or toml"}`},
		{`{"path":"a","toml":"b"}`, `{"status":"error","error":"invalid_args","message":"rules_test: give path or toml"}`},
		{`{"toml":"[[cases]]\nname = \"x\"\nevent = \"ping\"\n"}`, `{"status":"error","error":"invalid_args","message":"rules_test: inline:2: case \"x\" expects nothing (give fired, notices, denied, asked, blocked, rewritten, redacted, shadow or state_after)","details":[{"file":"inline","line":2,"message":"case \"x\" expects nothing (give fired, notices, denied, asked, blocked, rewritten, redacted, shadow or state_after)"}]}`},
		{`{"toml":"rules = [\"none/*.toml\"]\n[[cases]]\nname = \"x\"\nevent = \"ping\"\nfired = []\n"}`, `{"status":"error","error":"invalid_args","message":"rules_test: no rule file matches [\"none/*.toml\"]"}`},
	}
	for _, c := range cases {
		expectEq(t, "rules_test "+c.args, evalString(t, e, `{"tool":"rules_test","arguments":`+c.args+`}`), c.want)
	}
	if got := evalString(t, e, `{"tool":"rules_test","arguments":{"path":"missing.toml"}}`); got != `{"status":"error","error":"invalid_args","message":"rules_test: missing.toml: no such file (inside project_root)"}` {
		t.Errorf("missing file: %s", got)
	}
	// The shipped rules' tests pass against the built-in rules.
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	mustConfigure(t, e, "project_root = "+jsonText(here)+"\n[rules]\nbuiltin = true\n")
	for _, name := range []string{"token_budget", "iteration_budget", "large_result", "repeated_failure"} {
		path, err := filepath.Abs(filepath.Join("rules", "builtin", name+".test.toml"))
		if err != nil {
			t.Fatal(err)
		}
		if got := evalString(t, e, `{"tool":"rules_test","arguments":{"path":`+jsonText(path)+`}}`); !strings.Contains(got, `"failed":0,`) {
			t.Errorf("the shipped test of %s: %s", name, got)
		}
	}
}

// ---- The context rules see ------------------------------------------------------------------

func TestContext_toolEvents(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	register(t, e, `{"name":"broken"}`, func(context.Context, toolbox.Call) ([]byte, error) { return nil, errors.New("disk on fire") })
	loadRuleText(t, e, "context", `
[[rules]]
id = "call"
trigger = "on_tool_call"
[[rules.actions]]
type = "notify_self"
message = "tool={{ context.tool | json }} event={{ context.event | json }}"

[[rules]]
id = "complete"
trigger = "on_tool_complete"
[[rules.actions]]
type = "notify_self"
message = "tool={{ context.tool | json }} event={{ context.event | json }}"

[[rules]]
id = "failure"
trigger = "on_tool_failure"
[[rules.actions]]
type = "notify_self"
message = "tool={{ context.tool | json }} failures={{ context.history.consecutive_failures | json }} count={{ context.history.failure_count }}/{{ context.history.tool_count }}"
`)
	// The engine's clock is fixed: durations are 0.
	expectEq(t, "success", evalString(t, e, `{"tool":"echo","session":"c","arguments":{"b":[1,"x"]}}`),
		`{"status":"success","tool":"echo","result":{"b":[1,"x"]},"notices":[`+
			`{"rule":"call","message":"tool={\"arguments\":{\"b\":[1,\"x\"]},\"name\":\"echo\"} event={\"name\":\"on_tool_call\",\"session\":\"c\"}","priority":"normal","event":"on_tool_call"},`+
			`{"rule":"complete","message":"tool={\"arguments\":{\"b\":[1,\"x\"]},\"duration_ms\":0,\"error\":null,\"name\":\"echo\",\"result\":{\"b\":[1,\"x\"]},\"result_bytes\":13} event={\"name\":\"on_tool_complete\",\"session\":\"c\"}","priority":"normal","event":"on_tool_complete"}]}`)
	for i := 1; i <= 2; i++ {
		want := fmt.Sprintf(`{"status":"error","error":"tool_failed","message":"disk on fire","notices":[`+
			`{"rule":"call","message":"tool={\"arguments\":{},\"name\":\"broken\"} event={\"name\":\"on_tool_call\",\"session\":\"c\"}","priority":"normal","event":"on_tool_call"},`+
			`{"rule":"failure","message":"tool={\"arguments\":{},\"duration_ms\":0,\"error\":\"tool_failed: disk on fire\",\"name\":\"broken\",\"result_bytes\":0} failures={\"broken\":%d} count=%d/%d","priority":"normal","event":"on_tool_failure"}]}`, i, i, i+1)
		expectEq(t, fmt.Sprintf("failure %d", i), evalString(t, e, `{"tool":"broken","session":"c"}`), want)
	}
}

// TestContext_toolEventsSimpleConditions: conditions that compare one
// field (evaluated without building the context) see the same values.
func TestContext_toolEventsSimpleConditions(t *testing.T) {
	e := newEngine(t)
	mustConfigure(t, e, "state_dir = \"\"\n[rules]\npaths = []\nbuiltin = false\n")
	register(t, e, `{"name":"broken"}`, func(context.Context, toolbox.Call) ([]byte, error) { return nil, errors.New("x") })
	loadRuleText(t, e, "simple", `
[[rules]]
id = "name"
trigger = "on_tool_complete"
[rules.condition]
expression = "context.tool.name == 'echo'"
[[rules.actions]]
type = "notify_self"
message = "name"

[[rules]]
id = "bytes"
trigger = "on_tool_complete"
[rules.condition]
expression = "context.tool.result_bytes >= 7"
[[rules.actions]]
type = "notify_self"
message = "bytes"

[[rules]]
id = "duration"
trigger = "on_tool_complete"
[rules.condition]
expression = "context.tool.duration_ms == 0"
[[rules.actions]]
type = "notify_self"
message = "duration"

[[rules]]
id = "event"
trigger = "on_tool_complete"
[rules.condition]
expression = "context.event.session == 'c'"
[[rules.actions]]
type = "notify_self"
message = "event"

[[rules]]
id = "error"
trigger = "on_tool_failure"
[rules.condition]
expression = "context.tool.error == 'tool_failed: x'"
[[rules.actions]]
type = "notify_self"
message = "error"
`)
	names := func(env string) string {
		var m struct{ Notices []struct{ Message string } }
		if err := json.Unmarshal([]byte(env), &m); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range m.Notices {
			out = append(out, n.Message)
		}
		return strings.Join(out, ",")
	}
	expectEq(t, "echo in c", names(evalString(t, e, `{"tool":"echo","session":"c","arguments":{"a":1}}`)), "name,bytes,duration,event")
	expectEq(t, "echo in d, small", names(evalString(t, e, `{"tool":"echo","session":"d","arguments":{}}`)), "name,duration")
	expectEq(t, "broken", names(evalString(t, e, `{"tool":"broken"}`)), "error")
}

func TestContext_emitPayload(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	loadRuleText(t, e, "payload", `
[[rules]]
id = "whole"
trigger = "turn.done"
[rules.condition]
expression = "context.turn.number > 2 && context.user.name == 'ada'"
[[rules.actions]]
type = "notify_self"
message = "{{ context | json }}"

[[rules]]
id = "helper"
trigger = "turn.done"
[rules.condition]
expression = "context_above_threshold(0.5)"
[[rules.actions]]
type = "notify_self"
message = "usage {{ context.turn.token_usage | percent }}"
`)
	evalString(t, e, `{"tool":"echo","session":"p"}`)
	evalString(t, e, `{"tool":"state_set","session":"p","arguments":{"key":"k","value":"v"}}`)
	// Payload fields at the top, beside event, history and state.
	expectEq(t, "context", emitString(t, e, `{"event":"turn.done","session":"p","payload":{"turn":{"number":3,"token_usage":0.25},"user":{"name":"ada"}}}`),
		`{"status":"success","result":{"fired":[{"rule":"whole","actions":[{"message":"{\"event\":{\"name\":\"turn.done\",\"session\":\"p\"},\"history\":{\"consecutive_failures\":{},\"failure_count\":0,\"recent_tools\":[\"echo\",\"state_set\"],\"tool_count\":2},\"state\":{\"k\":\"v\"},\"turn\":{\"number\":3,\"token_usage\":0.25},\"user\":{\"name\":\"ada\"}}","priority":"normal","type":"notify_self"}]}],"notices":[{"rule":"whole","message":"{\"event\":{\"name\":\"turn.done\",\"session\":\"p\"},\"history\":{\"consecutive_failures\":{},\"failure_count\":0,\"recent_tools\":[\"echo\",\"state_set\"],\"tool_count\":2},\"state\":{\"k\":\"v\"},\"turn\":{\"number\":3,\"token_usage\":0.25},\"user\":{\"name\":\"ada\"}}","priority":"normal","event":"turn.done"}],"denied":null}}`)
	expectEq(t, "helper", emitString(t, e, `{"event":"turn.done","payload":{"turn":{"number":1,"token_usage":0.75}}}`),
		`{"status":"success","result":{"fired":[{"rule":"helper","actions":[{"message":"usage 75%","priority":"normal","type":"notify_self"}]}],"notices":[{"rule":"helper","message":"usage 75%","priority":"normal","event":"turn.done"}],"denied":null}}`)
	// A payload cannot pass itself off as the event: context.event is Clara's.
	if got := emitString(t, e, `{"event":"turn.done","session":"q","payload":{"turn":{"number":9},"user":{"name":"ada"},"event":{"name":"forged"}}}`); !strings.Contains(got, `{\"name\":\"turn.done\",\"session\":\"q\"}`) || strings.Contains(got, "forged") {
		t.Errorf("payload's event field: %s", got)
	}
}

// ---- Reloads under load (run with -race) ------------------------------------------------------

func TestRules_reloadUnderConcurrentCalls(t *testing.T) {
	e := rulesEngine(t, "")
	version := func(v string) string {
		return `
[[rules]]
id = "hit-` + v + `"
trigger = "hit"
[[rules.actions]]
type = "notify_self"
message = "` + v + ` {{ context.n }}"

[[rules]]
id = "echo-` + v + `"
trigger = "on_tool_complete"
[rules.condition]
expression = "context.tool.name == 'echo' && context.history.tool_count > 0"
[[rules.actions]]
type = "notify_self"
message = "` + v + `"
`
	}
	loadRuleText(t, e, "reloaded", version("a"))
	var failing atomic.Bool
	failing.Store(true)
	flaky(t, e, "flaky", &failing)

	stop := make(chan struct{})
	var reloads sync.WaitGroup
	reloads.Add(1)
	go func() {
		defer reloads.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := "a"
			if i%2 == 1 {
				v = "b"
			}
			req := `{"tool":"rules_load","arguments":{"name":"reloaded","toml":` + jsonText(version(v)) + `}}`
			if out := e.Evaluate([]byte(req)); !strings.HasPrefix(string(out), `{"status":"success"`) {
				t.Errorf("rules_load: %s", out)
				return
			}
			if out := e.Configure([]byte(fmt.Sprintf("[rules.thresholds]\nrepeated_failures = %d\n", 2+i%3))); !strings.HasPrefix(string(out), `{"status":"success"`) {
				t.Errorf("Configure: %s", out)
				return
			}
			// A failed load changes nothing.
			if out := e.Evaluate([]byte(`{"tool":"rules_load","arguments":{"name":"reloaded","toml":"[rule]\nid = 1"}}`)); !strings.HasPrefix(string(out), `{"status":"error","error":"invalid_args"`) {
				t.Errorf("bad rules_load: %s", out)
				return
			}
		}
	}()

	var calls sync.WaitGroup
	for g := 0; g < 4; g++ {
		calls.Add(1)
		go func(g int) {
			defer calls.Done()
			session := fmt.Sprintf("g%d", g)
			for i := 0; i < 150; i++ {
				out := e.Emit([]byte(fmt.Sprintf(`{"event":"hit","session":%q,"payload":{"n":%d},"trace":%v}`, session, i, i%2 == 0)))
				var env struct {
					Status string
					Result struct {
						Fired   []struct{ Rule string }
						Notices []struct{ Message string }
					}
				}
				if err := json.Unmarshal(out, &env); err != nil || env.Status != "success" {
					t.Errorf("Emit: %v %s", err, out)
					return
				}
				// Exactly one version of the rule set answered: never none, never both.
				if len(env.Result.Fired) != 1 || len(env.Result.Notices) != 1 ||
					env.Result.Notices[0].Message[2:] != fmt.Sprint(i) || env.Result.Fired[0].Rule != "hit-"+env.Result.Notices[0].Message[:1] {
					t.Errorf("Emit fired %s", out)
					return
				}
				for _, req := range []string{
					`{"tool":"echo","session":"` + session + `","arguments":{"i":1}}`,
					`{"tool":"notifications_drain","session":"` + session + `"}`,
				} {
					out := e.Evaluate([]byte(req))
					var m map[string]any
					if err := json.Unmarshal(out, &m); err != nil || m["status"] != "success" {
						t.Errorf("%s: %v %s", req, err, out)
						return
					}
				}
				out = e.Evaluate([]byte(`{"tool":"flaky","session":"` + session + `"}`))
				if !json.Valid(out) || !strings.HasPrefix(string(out), `{"status":"error","error":"tool_failed"`) {
					t.Errorf("flaky: %s", out)
					return
				}
			}
		}(g)
	}
	calls.Wait()
	close(stop)
	reloads.Wait()
}

// ---- call_tool ------------------------------------------------------------------------------

func TestCallTool_action(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	var runs atomic.Int32
	var lastSession atomic.Value
	register(t, e, `{"name":"record","input_schema":{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}}`,
		func(_ context.Context, c toolbox.Call) ([]byte, error) {
			runs.Add(1)
			lastSession.Store(c.Session)
			return c.Arguments, nil
		})
	loadRuleText(t, e, "calls", `
[[rules]]
id = "records"
trigger = "go"
[[rules.actions]]
type = "call_tool"
tool = "record"
arguments = { n = "{{ context.n * 2 }}", from = "rule" }

[[rules]]
id = "bad-args"
trigger = "go.bad"
[[rules.actions]]
type = "call_tool"
tool = "record"
arguments = { n = "text" }

[[rules]]
id = "missing"
trigger = "go.missing"
[[rules.actions]]
type = "call_tool"
tool = "nope"
`)
	expectEq(t, "call_tool", emitString(t, e, `{"event":"go","session":"s1","payload":{"n":21}}`),
		`{"status":"success","result":{"fired":[{"rule":"records","actions":[{"result":{"from":"rule","n":42},"tool":"record","type":"call_tool"}]}],"notices":[],"denied":null}}`)
	if runs.Load() != 1 || lastSession.Load() != "s1" {
		t.Errorf("runs %d, session %v", runs.Load(), lastSession.Load())
	}
	// The arguments are validated; errors are the action's, not the event's.
	expectEq(t, "invalid arguments", emitString(t, e, `{"event":"go.bad"}`),
		`{"status":"success","result":{"fired":[{"rule":"bad-args","actions":[{"error":"invalid_args: tool \"record\": arguments do not match input_schema: at /n: got string, want number","tool":"record","type":"call_tool"}]}],"notices":[],"denied":null}}`)
	expectEq(t, "unknown tool", emitString(t, e, `{"event":"go.missing"}`),
		`{"status":"success","result":{"fired":[{"rule":"missing","actions":[{"error":"unknown_tool: Tool not found: nope","tool":"nope","type":"call_tool"}]}],"notices":[],"denied":null}}`)
	if runs.Load() != 1 {
		t.Errorf("runs %d", runs.Load())
	}
	// The calls are audited like any other, in the event's session.
	var audited []string
	for _, r := range e.Audit().Tail(100) {
		if r.Tool != "rules_load" {
			audited = append(audited, r.Session+"/"+r.Tool+"/"+string(r.Code))
		}
	}
	sort.Strings(audited)
	expectEq(t, "audit", strings.Join(audited, " "), "default/nope/unknown_tool default/record/invalid_args s1/record/")

	// Policy: the configuration's, the session's, the request's.
	denied := `{"status":"success","result":{"fired":[{"rule":"records","actions":[{"error":"denied: tool \"record\" denied by the policy of %s: its deny list names it","tool":"record","type":"call_tool"}]}],"notices":[],"denied":null}}`
	mustConfigure(t, e, `{"policy":{"deny":["record"]}}`)
	expectEq(t, "configuration policy", emitString(t, e, `{"event":"go","payload":{"n":1}}`), fmt.Sprintf(denied, "the configuration"))
	mustConfigure(t, e, `{"policy":{"deny":[]}}`)
	evalString(t, e, `{"tool":"session_policy","session":"locked","arguments":{"deny":["record"]}}`)
	expectEq(t, "session policy", emitString(t, e, `{"event":"go","session":"locked","payload":{"n":1}}`), fmt.Sprintf(denied, `session \"locked\"`))
	got := evalString(t, e, `{"tool":"emit_event","arguments":{"event":"go","payload":{"n":1}},"policy":{"deny":["record"]}}`)
	expectEq(t, "request policy", got, `{"status":"success","tool":"emit_event","result":`+
		`{"fired":[{"rule":"records","actions":[{"error":"denied: tool \"record\" denied by the policy of the request: its deny list names it","tool":"record","type":"call_tool"}]}],"notices":[],"denied":null}}`)
	if runs.Load() != 1 {
		t.Errorf("a denied call_tool ran the tool: runs %d", runs.Load())
	}
	// Allowed again without the narrowing.
	evalString(t, e, `{"tool":"emit_event","arguments":{"event":"go","payload":{"n":1}}}`)
	if runs.Load() != 2 {
		t.Errorf("runs %d, want 2", runs.Load())
	}
}

// TestCallTool_requestPolicyReachesRules: a request's policy narrows what
// the rules fired by its call may call (SPEC §2: "this call and everything
// it calls").
func TestCallTool_requestPolicyReachesRules(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	var runs atomic.Int32
	register(t, e, `{"name":"side_effect"}`, func(context.Context, toolbox.Call) ([]byte, error) { runs.Add(1); return []byte("1"), nil })
	loadRuleText(t, e, "after", `
[[rules]]
id = "after-echo"
trigger = "on_tool_complete"
[rules.condition]
expression = "context.tool.name == 'echo'"
[[rules.actions]]
type = "call_tool"
tool = "side_effect"
[[rules.actions]]
type = "notify_self"
message = "called"
`)
	evalString(t, e, `{"tool":"echo","policy":{"deny":["side_effect"]}}`)
	if runs.Load() != 0 {
		t.Errorf("the request denied side_effect, yet a rule of its call ran it")
	}
	evalString(t, e, `{"tool":"echo","policy":{"allow":["echo"]}}`)
	if runs.Load() != 0 {
		t.Errorf("the request allowed only echo, yet a rule of its call ran side_effect")
	}
	evalString(t, e, `{"tool":"echo"}`)
	if runs.Load() != 1 {
		t.Errorf("runs %d, want 1", runs.Load())
	}
}

// TestCallTool_noEndlessRecursion: a rule on on_tool_complete that calls
// the tool that completed stops at the chain depth.
func TestCallTool_noEndlessRecursion(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	var runs atomic.Int32
	register(t, e, `{"name":"again"}`, func(_ context.Context, c toolbox.Call) ([]byte, error) { runs.Add(1); return []byte(`"ok"`), nil })
	loadRuleText(t, e, "loop", `
[[rules]]
id = "loop"
trigger = "on_tool_complete"
[rules.condition]
expression = "context.tool.name == 'again'"
[[rules.actions]]
type = "call_tool"
tool = "again"
`)
	done := make(chan string, 1)
	go func() { done <- string(e.Evaluate([]byte(`{"tool":"again","trace":true}`))) }()
	var out string
	select {
	case out = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a rule calling its own tool did not stop")
	}
	if !strings.HasPrefix(out, `{"status":"success","tool":"again","result":"ok","trace":[`) {
		t.Fatalf("got %s", out)
	}
	if n := runs.Load(); n != 8 {
		t.Errorf("the tool ran %d times, want 8 (the call and 7 nested ones)", n)
	}
	// The outer call's rule got the nested call's result.
	m := decodeEnvelope(t, out)
	trace, _ := m["trace"].([]any)
	if len(trace) != 1 {
		t.Fatalf("trace: %v", m)
	}
	actions, _ := trace[0].(map[string]any)["actions"].([]any)
	if len(actions) != 1 || actions[0].(map[string]any)["result"] != "ok" {
		t.Errorf("outer rule's actions: %v", actions)
	}
	n := 0
	for _, r := range e.Audit().Tail(20) {
		if r.Tool == "again" {
			n++
		}
	}
	if n != 8 {
		t.Errorf("audit has %d records of again, want 8", n)
	}
}

// ---- emit_event -------------------------------------------------------------------------------

const chainRules = `
[[rules]]
id = "first"
trigger = "first"
[[rules.actions]]
type = "notify_self"
message = "first {{ context.n }} in {{ context.event.session }}"
[[rules.actions]]
type = "emit_event"
event = "second"
payload = { n = "{{ context.n + 1 }}" }

[[rules]]
id = "second"
trigger = "second"
[[rules.actions]]
type = "notify_self"
message = "second {{ context.n }} in {{ context.event.session }}"

[[rules]]
id = "loop"
trigger = "loop"
[[rules.actions]]
type = "emit_event"
event = "loop"
`

func TestEmitEvent_chaining(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	loadRuleText(t, e, "chain", chainRules)
	// A rule comes before the rules its events fire.
	const result = `{"fired":[{"rule":"first","actions":[{"message":"first 1 in %[1]s","priority":"normal","type":"notify_self"},{"event":"second","fired":1,"type":"emit_event"}]},{"rule":"second","event":"second","actions":[{"message":"second 2 in %[1]s","priority":"normal","type":"notify_self"}]}],"notices":[{"rule":"first","message":"first 1 in %[1]s","priority":"normal","event":"first"},{"rule":"second","message":"second 2 in %[1]s","priority":"normal","event":"second"}],"denied":null}`
	expectEq(t, "Emit", emitString(t, e, `{"event":"first","session":"c1","payload":{"n":1}}`),
		`{"status":"success","result":`+fmt.Sprintf(result, "c1")+`}`)
	// The emit_event tool emits in the calling session.
	expectEq(t, "emit_event tool", evalString(t, e, `{"tool":"emit_event","session":"c2","arguments":{"event":"first","payload":{"n":1}}}`),
		`{"status":"success","tool":"emit_event","result":`+fmt.Sprintf(result, "c2")+`}`)
	if got := evalString(t, e, `{"tool":"notifications_drain","session":"c2"}`); strings.Count(got, `"rule":`) != 2 {
		t.Errorf("notices of emit_event not queued: %s", got)
	}
	// A rule that emits its own event stops at the chain depth.
	m := decodeEnvelope(t, emitString(t, e, `{"event":"loop"}`))
	fired, _ := m["result"].(map[string]any)["fired"].([]any)
	if len(fired) != 8 {
		t.Fatalf("loop fired %d rules, want 8: %v", len(fired), m)
	}
	innermost := fired[7].(map[string]any)["actions"].([]any)[0].(map[string]any)
	if innermost["error"] != "emit_event: chain deeper than 8 events" {
		t.Errorf("innermost: %v", innermost)
	}
	// emit_event's own errors are argument errors.
	cases := []struct{ args, want string }{
		{`{"event":"on_tool_complete"}`, `{"status":"error","error":"invalid_args","message":"on_tool_complete is emitted by the tool pipeline itself, not by callers"}`},
		{`{"event":"Bad"}`, `{"status":"error","error":"invalid_args","message":"event \"Bad\" is not an event name ([a-z][a-z0-9_.]*)"}`},
		{`{}`, `{"status":"error","error":"invalid_args","message":"tool \"emit_event\": arguments do not match input_schema: at the top: missing property 'event'","details":[{"pointer":"","message":"missing property 'event'"}]}`},
		{`{"event":"x","session":"other"}`, `{"status":"error","error":"invalid_args","message":"tool \"emit_event\": arguments do not match input_schema: at the top: additional properties 'session' not allowed","details":[{"pointer":"","message":"additional properties 'session' not allowed"}]}`},
	}
	for _, c := range cases {
		expectEq(t, "emit_event "+c.args, evalString(t, e, `{"tool":"emit_event","arguments":`+c.args+`}`), c.want)
	}
	// trace: true in the arguments traces the emission.
	expectEq(t, "emit_event trace, no candidates", evalString(t, e, `{"tool":"emit_event","arguments":{"event":"quiet","trace":true}}`),
		`{"status":"success","tool":"emit_event","result":{"fired":[],"notices":[],"denied":null,"trace":[]}}`)
}

// TestEmitEvent_fromToolRule: a rule on a tool event chains to a custom
// event, whose rules see the chained payload.
func TestEmitEvent_fromToolRule(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	loadRuleText(t, e, "chain", chainRules)
	loadRuleText(t, e, "from-tool", `
[rule]
id = "echo-starts-chain"
trigger = "on_tool_complete"
[condition]
expression = "context.tool.name == 'echo'"
[action]
type = "emit_event"
event = "first"
payload = { n = "{{ context.tool.arguments.n }}" }
`)
	expectEq(t, "chained from a tool event", evalString(t, e, `{"tool":"echo","session":"t","arguments":{"n":10}}`),
		`{"status":"success","tool":"echo","result":{"n":10},"notices":[{"rule":"first","message":"first 10 in t","priority":"normal","event":"first"},{"rule":"second","message":"second 11 in t","priority":"normal","event":"second"}]}`)
}
