package rules

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core/protocol"
)

// A minimal valid rule, to build error cases from.
const okRule = `[rule]
id = "ok"
trigger = "on_turn_start"

[action]
type = "log"
message = "hello"
`

func TestLoad_errors(t *testing.T) {
	long := strings.Repeat("1 + ", maxExpressionBytes/4) + "1 > 0"
	nodes := strings.Repeat("1+", 700) + "1 > 0" // about 1400 nodes in fewer than 4096 bytes
	if len(nodes) > maxExpressionBytes {
		t.Fatal("the node-cap expression is too long to test the node cap")
	}
	tests := []struct {
		name  string
		files []Source
		want  []string // substrings of the error, the first one with file:line
	}{
		{"invalid TOML", []Source{src("bad.toml", "[rule]\nid = \"a\"\ntrigger = on_turn_start\n")},
			[]string{"bad.toml:3: ", "unexpected character"}},
		{"unclosed table header", []Source{src("bad.toml", "# comment\n[rule\nid = \"a\"\n")},
			[]string{"bad.toml:2: "}},
		{"duplicate TOML key", []Source{src("bad.toml", "[rule]\nid = \"a\"\nid = \"b\"\n")},
			[]string{"bad.toml:3: "}},
		{"unknown top-level key", []Source{src("u.toml", "idd = \"a\"\n"+okRule)},
			[]string{"u.toml:1: unknown key \"idd\""}},
		{"unknown key in [rule]", []Source{src("u.toml", "[rule]\nid = \"a\"\ntrigger = \"on_x\"\nprio = 3\n[action]\ntype = \"log\"\nmessage = \"x\"\n")},
			[]string{"u.toml:4: unknown key \"rule.prio\""}},
		{"unknown keys, each reported", []Source{src("u.toml", "[rule]\nid = \"a\"\ntrigger = \"on_x\"\nprio = 3\n[action]\ntype = \"log\"\nmessge = \"x\"\n")},
			[]string{"u.toml:4: unknown key \"rule.prio\"", "7: unknown key \"action.messge\""}},
		{"unknown key in [condition]", []Source{src("u.toml", "[rule]\nid = \"a\"\ntrigger = \"on_x\"\n[condition]\nexpr = \"true\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n")},
			[]string{"u.toml:5: unknown key \"condition.expr\""}},
		{"wrong value type", []Source{src("u.toml", "[rule]\nid = \"a\"\ntrigger = \"on_x\"\npriority = \"high\"\n")},
			[]string{"u.toml:4: "}},
		{"missing id", []Source{src("m.toml", "[rule]\ntrigger = \"on_turn_start\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n")},
			[]string{"m.toml:1: rule id \"\": use 1 to 128"}},
		{"invalid id", []Source{src("m.toml", "[rule]\nid = \"no spaces\"\ntrigger = \"on_turn_start\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n")},
			[]string{"m.toml:2: rule id \"no spaces\": use 1 to 128"}},
		{"id too long", []Source{src("m.toml", rule(strings.Repeat("a", 129), "on_x", "", "", notify("x")))},
			[]string{"m.toml:2: rule id"}},
		{"missing trigger", []Source{src("m.toml", "# x\n[rule]\nid = \"a\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n")},
			[]string{"m.toml:3: rule \"a\": trigger is missing"}},
		{"invalid trigger", []Source{src("m.toml", rule("a", "On-Turn", "", "", notify("x")))},
			[]string{"m.toml:3: rule \"a\": trigger \"On-Turn\" is not an event name"}},
		{"trigger too long", []Source{src("m.toml", rule("a", "x"+strings.Repeat("y", 128), "", "", notify("x")))},
			[]string{"m.toml:3: rule \"a\": trigger \"xyy", "is not an event name"}},
		{"trigger starting with a digit", []Source{src("m.toml", rule("a", "1st", "", "", notify("x")))},
			[]string{"m.toml:3: ", "is not an event name"}},
		{"duplicate id in one file", []Source{src("d.toml", `[[rules]]
id = "a"
trigger = "on_x"
[[rules.actions]]
type = "log"
message = "x"

[[rules]]
id = "a"
trigger = "on_y"
[[rules.actions]]
type = "log"
message = "y"
`)}, []string{"d.toml:9: rule \"a\" is defined twice (first at d.toml:2)"}},
		{"duplicate id across files", []Source{
			src("one.toml", rule("a", "on_x", "", "", notify("x"))),
			src("two.toml", "# another\n"+rule("a", "on_y", "", "", notify("y"))),
		}, []string{"two.toml:3: rule \"a\" is defined twice (first at one.toml:2)"}},
		{"condition not boolean", []Source{src("c.toml", rule("a", "on_x", "", "1 + 2", notify("x")))},
			[]string{"c.toml:6: rule \"a\": condition: expected bool, but got int"}},
		{"condition string not boolean", []Source{src("c.toml", rule("a", "on_x", "", `"yes"`, notify("x")))},
			[]string{"c.toml:6: rule \"a\": condition: expected bool"}},
		{"condition syntax error", []Source{src("c.toml", rule("a", "on_x", "", "context.x >", notify("x")))},
			[]string{"c.toml:6: rule \"a\": condition: "}},
		{"condition unknown name", []Source{src("c.toml", rule("a", "on_x", "", "contxt.x > 1", notify("x")))},
			[]string{"c.toml:6: rule \"a\": condition: unknown name contxt"}},
		{"condition unknown function", []Source{src("c.toml", rule("a", "on_x", "", "shout(context.x)", notify("x")))},
			[]string{"c.toml:6: rule \"a\": condition: "}},
		{"empty condition", []Source{src("c.toml", rule("a", "on_x", "", "  ", notify("x")))},
			[]string{"c.toml:6: rule \"a\": condition: empty expression"}},
		{"condition too long", []Source{src("c.toml", rule("a", "on_x", "", long, notify("x")))},
			[]string{"c.toml:6: rule \"a\": condition: expression is 4101 bytes, more than the 4096 allowed"}},
		{"node cap", []Source{src("c.toml", rule("a", "on_x", "", nodes, notify("x")))},
			[]string{"c.toml:6: rule \"a\": condition: ", "exceeds maximum allowed nodes"}},
		{"lua syntax error", []Source{src("l.toml", "[rule]\nid = \"a\"\ntrigger = \"on_x\"\n[condition]\nlua = \"return (\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n")},
			[]string{"l.toml:5: rule \"a\": condition: "}},
		{"lua script", []Source{src("l.toml", "[rule]\nid = \"a\"\ntrigger = \"on_x\"\n[condition]\nscript = \"x.lua\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n")},
			[]string{"l.toml:5: rule \"a\": condition: script: open x.lua: no such file"}},
		{"expression and lua", []Source{src("l.toml", "[rule]\nid = \"a\"\ntrigger = \"on_x\"\n[condition]\nexpression = \"true\"\nlua = \"return true\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n")},
			[]string{"l.toml:2: rule \"a\": condition: give one of expression, lua, script or semantic"}},
		{"empty condition table", []Source{src("l.toml", "[rule]\nid = \"a\"\ntrigger = \"on_x\"\n[condition]\n[action]\ntype = \"log\"\nmessage = \"x\"\n")},
			[]string{"l.toml:2: rule \"a\": condition: give one of expression, lua, script or semantic"}},
		{"action and actions", []Source{src("a.toml", "[rule]\nid = \"a\"\ntrigger = \"on_x\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n[[actions]]\ntype = \"log\"\nmessage = \"y\"\n")},
			[]string{"a.toml:2: rule \"a\": give [action] or [[actions]], not both"}},
		{"no action", []Source{src("a.toml", "[rule]\nid = \"a\"\ntrigger = \"on_x\"\n")},
			[]string{"a.toml:2: rule \"a\": no action: give [action] or [[actions]]"}},
		{"unknown action type", []Source{src("a.toml", "[rule]\nid = \"a\"\ntrigger = \"on_x\"\n[action]\ntype = \"shout\"\nmessage = \"x\"\n")},
			[]string{"a.toml:5: rule \"a\": action 1 (shout): unknown action type \"shout\""}},
		{"action without type", []Source{src("a.toml", "[rule]\nid = \"a\"\ntrigger = \"on_x\"\n[action]\nmessage = \"x\"\n")},
			[]string{"a.toml:", "unknown action type \"\""}},
		{"second action bad", []Source{src("a.toml", rule("a", "on_x", "", "", notify("x"), "type = \"log\"\nlevel = \"loud\"\nmessage = \"y\""))},
			[]string{"a.toml:", "rule \"a\": action 2 (log): level \"loud\": use debug, info, warn or error"}},
		{"field the action does not take", []Source{src("a.toml", rule("a", "on_x", "", "", "type = \"notify_self\"\nmessage = \"x\"\nlevel = \"info\""))},
			[]string{"a.toml:6: rule \"a\": action 1 (notify_self): notify_self does not take \"level\""}},
		{"notify without message", []Source{src("a.toml", rule("a", "on_x", "", "", "type = \"notify_self\""))},
			[]string{"a.toml:6: ", "action 1 (notify_self): message is missing"}},
		{"notify priority", []Source{src("a.toml", rule("a", "on_x", "", "", "type = \"notify_self\"\nmessage = \"x\"\npriority = \"urgent\""))},
			[]string{"a.toml:6: ", "priority \"urgent\": use low, normal, high or critical"}},
		{"log without message", []Source{src("a.toml", rule("a", "on_x", "", "", "type = \"log\""))},
			[]string{"a.toml:6: ", "action 1 (log): message is missing"}},
		{"set_state without value", []Source{src("a.toml", rule("a", "on_x", "", "", "type = \"set_state\"\nkey = \"k\""))},
			[]string{"a.toml:6: ", "action 1 (set_state): key and value are required"}},
		{"set_state with empty key", []Source{src("a.toml", rule("a", "on_x", "", "", "type = \"set_state\"\nkey = \"\"\nvalue = 1"))},
			[]string{"a.toml:6: ", "key and value are required"}},
		{"emit_event without event", []Source{src("a.toml", rule("a", "on_x", "", "", "type = \"emit_event\""))},
			[]string{"a.toml:6: ", "action 1 (emit_event): event must be an event name"}},
		{"emit_event bad name", []Source{src("a.toml", rule("a", "on_x", "", "", "type = \"emit_event\"\nevent = \"Bad Name\""))},
			[]string{"a.toml:6: ", "event must be an event name"}},
		{"deny on another trigger", []Source{src("a.toml", rule("a", "on_tool_complete", "", "", "type = \"deny\"\nreason = \"no\""))},
			[]string{"a.toml:6: rule \"a\": action 1 (deny): deny only acts on on_tool_call and on_chat_start, not on_tool_complete"}},
		{"deny without reason", []Source{src("a.toml", rule("a", "on_tool_call", "", "", "type = \"deny\""))},
			[]string{"a.toml:6: ", "action 1 (deny): reason is missing"}},
		{"call_tool without tool", []Source{src("a.toml", rule("a", "on_x", "", "", "type = \"call_tool\"\narguments = { a = 1 }"))},
			[]string{"a.toml:6: ", "action 1 (call_tool): tool is missing"}},
		{"template without }}", []Source{src("t.toml", rule("a", "on_x", "", "", notify("at {{ context.x")))},
			[]string{"t.toml:6: rule \"a\": action 1 (notify_self): template \"at {{ context.x\": {{ without }}"}},
		{"template expression error", []Source{src("t.toml", rule("a", "on_x", "", "", notify("at {{ context.x > }}")))},
			[]string{"t.toml:6: rule \"a\": action 1 (notify_self): template \"at {{ context.x > }}\": "}},
		{"empty template expression", []Source{src("t.toml", rule("a", "on_x", "", "", notify("at {{ }}")))},
			[]string{"t.toml:6: ", "empty expression"}},
		{"template unknown name", []Source{src("t.toml", rule("a", "on_x", "", "", notify("{{ contxt.x }}")))},
			[]string{"t.toml:6: ", "unknown name contxt"}},
		{"unknown filter", []Source{src("t.toml", rule("a", "on_x", "", "", notify("{{ context.x | shout }}")))},
			[]string{"t.toml:6: rule \"a\": action 1 (notify_self): template \"{{ context.x | shout }}\": "}},
		{"template in a deny reason", []Source{src("t.toml", rule("a", "on_tool_call", "", "", "type = \"deny\"\nreason = \"{{ ) }}\""))},
			[]string{"t.toml:6: ", "action 1 (deny): template"}},
		{"template in a set_state value", []Source{src("t.toml", rule("a", "on_x", "", "", "type = \"set_state\"\nkey = \"k\"\nvalue = [1, { b = \"{{ ) }}\" }]"))},
			[]string{"t.toml:6: ", "action 1 (set_state): template"}},
		{"template in an emit_event payload", []Source{src("t.toml", rule("a", "on_x", "", "", "type = \"emit_event\"\nevent = \"on_y\"\npayload = { a = { b = \"{{ 1 + }}\" } }"))},
			[]string{"t.toml:6: ", "action 1 (emit_event): template"}},
		{"template in call_tool arguments", []Source{src("t.toml", rule("a", "on_x", "", "", "type = \"call_tool\"\ntool = \"t\"\narguments = { a = [\"{{ nope }}\"] }"))},
			[]string{"t.toml:6: ", "action 1 (call_tool): template", "unknown name nope"}},
		{"template too long", []Source{src("t.toml", rule("a", "on_x", "", "", notify("{{ "+long+" }}")))},
			[]string{"t.toml:6: ", "more than the 4096 allowed"}},
		{"[rule] and [[rules]]", []Source{src("r.toml", okRule+"\n[[rules]]\nid = \"b\"\ntrigger = \"on_x\"\n")},
			[]string{"r.toml:1: use either [rule] or [[rules]], not both"}},
		{"[rule] with its own condition", []Source{src("r.toml", "[rule]\nid = \"a\"\ntrigger = \"on_x\"\n[rule.condition]\nexpression = \"true\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n")},
			[]string{"r.toml:2: with [rule], condition and action(s) are top-level tables"}},
		{"[rule] with its own action", []Source{src("r.toml", "\n[rule]\nid = \"a\"\ntrigger = \"on_x\"\n[rule.action]\ntype = \"log\"\nmessage = \"x\"\n")},
			[]string{"r.toml:3: with [rule], condition and action(s) are top-level tables"}},
		{"[[rules]] with a top-level condition", []Source{src("r.toml", "[condition]\nexpression = \"true\"\n[[rules]]\nid = \"a\"\ntrigger = \"on_x\"\n[[rules.actions]]\ntype = \"log\"\nmessage = \"x\"\n")},
			[]string{"r.toml:1: with [[rules]], each rule has its own condition and action(s)"}},
		{"[[rules]] with top-level actions", []Source{src("r.toml", "[[rules]]\nid = \"a\"\ntrigger = \"on_x\"\n[[actions]]\ntype = \"log\"\nmessage = \"x\"\n")},
			[]string{"r.toml:1: with [[rules]]"}},
		{"[condition] and [action] without [rule]", []Source{src("r.toml", "[condition]\nexpression = \"true\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n")},
			[]string{"r.toml:1: ", "[rule]"}},
		{"JSON syntax error", []Source{src("j.json", "{\"rule\": {\"id\": \"a\",\n \"trigger\": }}")},
			[]string{"j.json:2: invalid character"}},
		{"JSON unknown field", []Source{src("j.json", `{"rule": {"id": "a", "trigger": "on_x", "bogus": 1}, "action": {"type": "log", "message": "x"}}`)},
			[]string{"j.json:1: unknown field \"bogus\""}},
		{"JSON wrong type", []Source{src("j.json", "{\"rule\": {\"id\": \"a\",\n \"trigger\": 5}}")},
			[]string{"j.json:2: cannot unmarshal number"}},
		{"JSON detected by its first brace", []Source{src("inline", "  {\"rule\": {\"id\": \"a\", \"trigger\": 5}}")},
			[]string{"inline:1: cannot unmarshal"}},
		{"JSON truncated", []Source{src("j.json", "{\"rule\": {\"id\": \"a\"")},
			[]string{"j.json:1: "}},
		{"JSON with trailing data", []Source{src("j.json", "{\"rule\": {\"id\": \"a\", \"trigger\": \"on_x\"}, \"action\": {\"type\": \"log\", \"message\": \"x\"}}\n{\"rule\": {\"id\": \"b\"}}")},
			[]string{"j.json:2: "}},
		{"JSON rule error", []Source{src("j.json", "{\"rule\": {\"id\": \"a\",\n\"trigger\": \"on_x\"},\n\"action\": {\"type\": \"deny\", \"reason\": \"x\"}}")},
			[]string{"j.json:3: rule \"a\": action 1 (deny): deny only acts on on_tool_call"}},
		{"JSON [[rules]] shape", []Source{src("j.json", "{\"rules\": [{\"id\": \"a\", \"trigger\": \"on_x\",\n\"condition\": {\"expression\": \"1\"},\n\"actions\": [{\"type\": \"log\", \"message\": \"x\"}]}]}")},
			[]string{"j.json:2: rule \"a\": condition: expected bool"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := loadErr(t, tc.files...)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q\n does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestLoad_repeatUnavailable(t *testing.T) {
	for _, e := range []string{`repeat("x", 3) == "xxx"`, `len(repeat(repeat("x", 1000), 1000)) > 0`, `"x" | repeat(3) == "xxx"`} {
		msg := loadErr(t, src("r.toml", rule("a", "on_x", "", e, notify("x"))))
		if !strings.Contains(msg, "r.toml:6: ") || !strings.Contains(msg, "repeat") {
			t.Errorf("%s: %q", e, msg)
		}
	}
	msg := loadErr(t, src("r.toml", rule("a", "on_x", "", "", notify(`{{ repeat("x", 3) }}`))))
	if !strings.Contains(msg, "r.toml:6: ") || !strings.Contains(msg, "repeat") {
		t.Errorf("template: %q", msg)
	}
}

func TestLoad_shapes(t *testing.T) {
	single := `# one rule
[rule]
id = "single"
description = "one rule"
trigger = "on_turn_start"
priority = 7
stop = true

[condition]
expression = "context.turn.token_usage > 0.5"

[action]
type = "notify_self"
message = "hi"
`
	many := `[[rules]]
id = "first"
trigger = "on_tool_call"

[rules.condition]
expression = "context.tool.name == 'rm'"

[[rules.actions]]
type = "deny"
reason = "no"

[[rules]]
id = "second"
trigger = "custom.event_1"
priority = -3

[[rules.actions]]
type = "log"
message = "a"

[[rules.actions]]
type = "set_state"
key = "k"
value = 1
`
	js := `{"rules": [
  {"id": "json-rule", "trigger": "on_turn_end", "priority": 2,
   "condition": {"expression": "true"},
   "actions": [{"type": "notify_self", "message": "j"}]}
]}`
	jsSingle := `{"rule": {"id": "json.single", "trigger": "on_turn_end"},
 "action": {"type": "log", "message": "j", "level": "warn"}}`
	set, err := Load([]Source{src("single.toml", single), src("many.toml", many), src("rules.json", js), src("inline", jsSingle), src("empty.toml", "# nothing\n"), src("blank", "")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID, Description, Trigger string
		Priority                 int
		Stop                     bool
		File                     string
		Line                     int
		Cond                     string
		Actions                  int
	}
	var got []row
	for _, r := range set.Rules() {
		got = append(got, row{r.ID, r.Description, r.Trigger, r.Priority, r.Stop, r.File, r.Line, r.CondSource, len(r.actions)})
	}
	want := []row{
		{"single", "one rule", "on_turn_start", 7, true, "single.toml", 3, "context.turn.token_usage > 0.5", 1},
		{"first", "", "on_tool_call", 0, false, "many.toml", 2, "context.tool.name == 'rm'", 1},
		{"second", "", "custom.event_1", -3, false, "many.toml", 13, "", 2},
		{"json-rule", "", "on_turn_end", 2, false, "rules.json", 2, "true", 1},
		{"json.single", "", "on_turn_end", 0, false, "inline", 1, "", 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rules:\n got %+v\nwant %+v", got, want)
	}
	for _, tr := range []string{"on_turn_start", "on_tool_call", "custom.event_1", "on_turn_end"} {
		if !set.Watches(tr) {
			t.Errorf("Watches(%q) = false", tr)
		}
	}
	if set.Watches("on_session_end") {
		t.Error("Watches(on_session_end) = true")
	}
}

func TestLoad_empty(t *testing.T) {
	for _, sources := range [][]Source{nil, {}, {src("a.toml", "")}, {src("a.toml", "# only a comment\n")}, {src("a.json", "{}")}, {src("a.toml", "rules = []")}} {
		set, err := Load(sources, nil)
		if err != nil || set == nil {
			t.Fatalf("%v: set %v, err %v", sources, set, err)
		}
		if len(set.Rules()) != 0 || set.Watches("on_turn_start") {
			t.Errorf("%v: rules in an empty set", sources)
		}
	}
}

func TestLoad_actionValues(t *testing.T) {
	set := mustLoad(t, nil, `[rule]
id = "v"
trigger = "on_x"
[[actions]]
type = "set_state"
key = "int"
value = 3
[[actions]]
type = "set_state"
key = "mixed"
value = [1, 2.5, "s", true, { a = "{{ 1 + 1 }}", b = "n={{ 2 }}" }]
[[actions]]
type = "set_state"
key = "date"
value = 1979-05-27
`)
	h := &recHost{}
	out := fire(set, h, "on_x", map[string]any{}, false)
	if len(out.Fired) != 1 || len(h.applied) != 1 {
		t.Fatalf("fired %v, applied %v", out.Fired, h.applied)
	}
	got := map[string]string{}
	for _, w := range h.applied[0] {
		got[w.Key] = string(w.Value)
	}
	want := map[string]string{"int": "3", "mixed": `[1,2.5,"s",true,{"a":2,"b":"n=2"}]`, "date": `"1979-05-27"`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("writes %v, want %v", got, want)
	}
}

func TestValidEventName(t *testing.T) {
	for name, want := range map[string]bool{
		"on_turn_start": true, "custom.event_2": true, "a": true, strings.Repeat("a", 128): true,
		"": false, "On": false, "1a": false, "a-b": false, "a b": false, strings.Repeat("a", 129): false, "_a": false,
	} {
		if ValidEventName(name) != want {
			t.Errorf("ValidEventName(%q) = %v", name, !want)
		}
	}
	// The built-in hook points of SPEC §7.2.
	for _, tr := range []string{"on_query_start", "on_turn_start", "on_turn_end", "on_tool_call", "on_tool_complete",
		"on_tool_failure", "on_callback_complete", "on_callback_failure", "on_session_end"} {
		if !ValidEventName(tr) {
			t.Errorf("built-in trigger %q is not a valid name", tr)
		}
	}
}

// FuzzLoad feeds arbitrary text to Load, as TOML and as JSON: it must
// never panic, and must give a set or its problems, never both.
func FuzzLoad(f *testing.F) {
	for _, s := range BuiltinSources() {
		f.Add(string(s.Text), false)
	}
	f.Add(okRule, false)
	f.Add(rule("a", "on_x", "", "context.x > 1 && tool_failed('t')", notify("{{ context.x | percent }} {{ context | json }}"), "type = \"set_state\"\nkey = \"k\"\nvalue = [\"{{ context.x }}\"]"), false)
	f.Add("[[rules]]\nid = \"a\"\ntrigger = \"on_tool_call\"\n[[rules.actions]]\ntype = \"deny\"\nreason = \"{{ \"\n", false)
	f.Add(`{"rules": [{"id": "a", "trigger": "on_x", "actions": [{"type": "emit_event", "event": "on_y", "payload": {"a": "{{ 1 }}"}}]}]}`, true)
	f.Add(`{"rule": {"id": "a", "trigger": "on_x"}, "action": {"type": "log", "message": "x"}} trailing`, true)
	f.Add("[rule]\nid = 'x'\ntrigger = \"on_x\"\n[condition]\nexpression = \"let a = 1; a > 0\"\n[action]\ntype = \"log\"\nmessage = \"{{ a | round | upper }}\"\n", false)
	f.Fuzz(func(t *testing.T, text string, asJSON bool) {
		name := "fuzz.toml"
		if asJSON {
			name = "fuzz.json"
		}
		set, err := Load([]Source{{Name: name, Text: []byte(text)}}, BuiltinThresholds)
		if (set == nil) == (err == nil) {
			t.Fatalf("set %v with err %v", set, err)
		}
		if err != nil {
			var ps protocol.Problems
			if !errors.As(err, &ps) || len(ps) == 0 {
				t.Fatalf("error %T", err)
			}
			for _, p := range ps {
				if p.File != name || p.Line <= 0 || p.Message == "" {
					t.Fatalf("problem without file, line or message: %#v", p)
				}
			}
		}
	})
}
