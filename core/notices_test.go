package core_test

import (
	"strings"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/llm/llmtest"
)

// The seed's accumulator (seed 004): the notices of a session's queue are
// batched until drained, three identical ones within the window are one
// with a count, and a notify_self may defer its delivery to an event or a
// time. The notice of the call that fired it is in that call's envelope
// only when it is not deferred.
func TestNotices_batchedDedupedDeferred(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	// The seed's rules/token_warning.toml, then a deferred twin.
	loadRuleText(t, e, "token_warning.toml", `
[rule]
id = "token-budget-warning"
trigger = "on_turn_start"

[condition]
expression = "context.turn.token_usage > 0.8"

[action]
type = "notify_self"
message = "Token budget at {{ context.turn.token_usage | percent }}. Consider wrapping up."
priority = "high"
`)
	turn := `{"event":"on_turn_start","session":"oracle","payload":{"turn":{"token_usage":0.85}}}`
	for i := 0; i < 3; i++ {
		if out := emitString(t, e, turn); !strings.Contains(out, `"notices":[{"rule":"token-budget-warning"`) {
			t.Fatalf("emission %d: %s", i, out)
		}
	}
	expectEq(t, "three identical notices are one", evalString(t, e, `{"tool":"notifications_drain","session":"oracle"}`),
		`{"status":"success","tool":"notifications_drain","result":{"notices":[{"rule":"token-budget-warning","message":"Token budget at 85%. Consider wrapping up.","priority":"high","event":"on_turn_start","count":3}],"dropped":0}}`)

	loadRuleText(t, e, "later.toml", `
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
deliver_after_ms = 150
`)
	out := emitString(t, e, `{"event":"task_done","session":"oracle","payload":{"task":"indexing"}}`)
	expectEq(t, "deferred notices are not in the answer", out,
		`{"status":"success","result":{"fired":[{"rule":"remind-next-turn","actions":[{"deliver_on":"on_turn_start","message":"indexing is done","priority":"normal","type":"notify_self"}]},`+
			`{"rule":"remind-in-a-while","actions":[{"deliver_after_ms":150,"message":"check on indexing","priority":"normal","type":"notify_self"}]}],"notices":[],"denied":null}}`)
	empty := `{"status":"success","tool":"notifications_drain","result":{"notices":[],"dropped":0}}`
	expectEq(t, "held", evalString(t, e, `{"tool":"notifications_drain","session":"oracle"}`), empty)
	emitString(t, e, `{"event":"on_turn_start","session":"other"}`) // another session's turn
	expectEq(t, "held still", evalString(t, e, `{"tool":"notifications_drain","session":"oracle"}`), empty)
	emitString(t, e, `{"event":"on_turn_start","session":"oracle","payload":{"turn":{"token_usage":0.1}}}`)
	expectEq(t, "delivered at the next turn", evalString(t, e, `{"tool":"notifications_drain","session":"oracle"}`),
		`{"status":"success","tool":"notifications_drain","result":{"notices":[{"rule":"remind-next-turn","message":"indexing is done","priority":"normal","event":"task_done"}],"dropped":0}}`)
	time.Sleep(200 * time.Millisecond)
	expectEq(t, "delivered after its time", evalString(t, e, `{"tool":"notifications_drain","session":"oracle"}`),
		`{"status":"success","tool":"notifications_drain","result":{"notices":[{"rule":"remind-in-a-while","message":"check on indexing","priority":"normal","event":"task_done"}],"dropped":0}}`)

	// A window of 0 keeps every notice.
	mustConfigure(t, e, "[notices]\ndedupe_window_ms = 0\n")
	emitString(t, e, turn)
	emitString(t, e, turn)
	if out := evalString(t, e, `{"tool":"notifications_drain","session":"oracle"}`); strings.Count(out, `"rule":"token-budget-warning"`) != 2 || strings.Contains(out, "count") {
		t.Errorf("without a window: %s", out)
	}
}

// deliver_on and deliver_after_ms are checked at load, and belong to
// notify_self alone; a Lua script's notify takes them as its third argument.
func TestNotices_deliveryChecked(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	for _, c := range []struct{ action, want string }{
		{`type = "notify_self"` + "\nmessage = \"m\"\ndeliver_on = \"on_tool_complete\"", `deliver_on \"on_tool_complete\": a notice cannot wait for a tool event`},
		{`type = "notify_self"` + "\nmessage = \"m\"\ndeliver_on = \"Bad\"", `deliver_on \"Bad\" is not an event name`},
		{`type = "notify_self"` + "\nmessage = \"m\"\ndeliver_after_ms = 0", `deliver_after_ms must be 1 to 86400000, not 0`},
		{`type = "log"` + "\nmessage = \"m\"\ndeliver_on = \"x\"", `log does not take deliver_on or deliver_after_ms`},
	} {
		rule := "[rule]\nid = \"r\"\ntrigger = \"x\"\n[action]\n" + c.action + "\n"
		out := evalString(t, e, `{"tool":"rules_load","arguments":{"name":"bad.toml","toml":`+jsonText(rule)+`}}`)
		if !strings.Contains(out, c.want) {
			t.Errorf("%s: %s", c.action, out)
		}
	}
	loadRuleText(t, e, "lua.toml", `
[rule]
id = "lua-later"
trigger = "x"
[action]
type = "lua"
lua = "notify('from Lua', 'low', {deliver_on = 'y'})"
`)
	if out := emitString(t, e, `{"event":"x","session":"l"}`); !strings.Contains(out, `"notices":[]`) {
		t.Fatalf("Lua's deferred notice in the answer: %s", out)
	}
	emitString(t, e, `{"event":"y","session":"l"}`)
	expectEq(t, "Lua's notice after y", evalString(t, e, `{"tool":"notifications_drain","session":"l"}`),
		`{"status":"success","tool":"notifications_drain","result":{"notices":[{"rule":"lua-later","message":"from Lua","priority":"low","event":"x"}],"dropped":0}}`)
	loadRuleText(t, e, "lua.toml", `
[rule]
id = "lua-later"
trigger = "x"
[action]
type = "lua"
lua = "notify('from Lua', 'low', {deliver_on = 'on_tool_call'})"
`)
	if out := emitString(t, e, `{"event":"x","session":"l"}`); !strings.Contains(out, `"fired":[]`) {
		t.Fatalf("a Lua notice waiting for a tool event: %s", out)
	}
}

// A chat hands the session's notices to its model at each turn: three
// identical ones raised by the turn's three tool calls reach it as one,
// with their count.
func TestNotices_countedInTheModelsTurn(t *testing.T) {
	sc, err := llmtest.ParseScript("counted", []byte(`
provider = "openai"
[[exchange]]
[exchange.reply]
json = '''{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",
 "message":{"role":"assistant","content":null,"tool_calls":[
  {"id":"call_1","type":"function","function":{"name":"get_current_weather","arguments":"{\"location\":\"Paris\"}"}},
  {"id":"call_2","type":"function","function":{"name":"get_current_weather","arguments":"{\"location\":\"Rome\"}"}},
  {"id":"call_3","type":"function","function":{"name":"get_current_weather","arguments":"{\"location\":\"Oslo\"}"}}]}}],
 "usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}'''
[[exchange]]
[exchange.expect]
system = "Looked up the weather (3 times)"
[exchange.reply]
json = '''{"id":"c2","object":"chat.completion","created":2,"model":"m","choices":[{"index":0,"finish_reason":"stop",
 "message":{"role":"assistant","content":"Mild everywhere."}}],"usage":{"prompt_tokens":20,"completion_tokens":3,"total_tokens":23}}'''
`))
	if err != nil {
		t.Fatal(err)
	}
	srv := scriptServer(t, sc)
	e := rulesEngine(t, `{"rules":{"builtin":false},"llm":{"base_url":`+jsonText(srv.BaseURL("counted"))+`,"model":"m"}}`)
	registerWeather(t, e)
	loadRuleText(t, e, "looked.toml", `
[rule]
id = "looked"
trigger = "on_tool_complete"
[action]
type = "notify_self"
message = "Looked up the weather"
`)
	out := evalString(t, e, `{"tool":"chat","session":"c","arguments":{"prompt":"Weather in three cities?","allow_tools":true,"max_tool_calls":3}}`)
	if !strings.Contains(out, `"content":"Mild everywhere."`) {
		t.Fatal(out)
	}
}
