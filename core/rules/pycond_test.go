package rules

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The files of testdata/seed004 are copied byte for byte from the seed
// document 004 (the Oracle plugin system's research): token_warning.toml
// from its section 4 (lines 237-248), conditions.toml from the example
// conditions of its section 3 (lines 159-166), semantic.toml from its
// section 6 (lines 306-307). They must load as they are.

func readSeed(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/seed004/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSeed004_tokenWarning(t *testing.T) {
	text := readSeed(t, "token_warning.toml")
	for _, variant := range []struct{ name, text string }{
		{"as written", string(text)},
		{"as python", "syntax = \"python\"\n" + string(text)},
	} {
		set, err := Load([]Source{{Name: "rules/token_warning.toml", Text: []byte(variant.text)}}, nil)
		if err != nil {
			t.Fatalf("%s: %v", variant.name, err)
		}
		if r := set.Rules()[0]; r.simple == nil {
			t.Errorf("%s: the condition %q has no fast form", variant.name, r.condExpr)
		}
		h := &recHost{t: t}
		out := fire(set, h, "on_turn_start", map[string]any{"turn": map[string]any{"token_usage": 0.85}}, false)
		if len(out.Notices) != 1 || out.Notices[0].Message != "Token budget at 85%. Consider wrapping up." || out.Notices[0].Priority != "high" {
			t.Errorf("%s: 0.85: notices %+v", variant.name, out.Notices)
		}
		out = fire(set, h, "on_turn_start", map[string]any{"turn": map[string]any{"token_usage": 0.5}}, false)
		if len(out.Fired) != 0 {
			t.Errorf("%s: 0.5 fired %v", variant.name, firedIDs(out))
		}
	}
}

// TestSeed004_conditionExamples loads each example condition of the seed,
// its lines unchanged, at the top of a rule file (where `condition = "..."`
// is the rule's condition), read both as expr and as Python.
func TestSeed004_conditionExamples(t *testing.T) {
	chunks := strings.Split(string(readSeed(t, "conditions.toml")), "\n\n")
	if len(chunks) != 3 {
		t.Fatalf("%d examples, want 3", len(chunks))
	}
	turn := func(usage float64, tools float64, event, tool string) map[string]any {
		return map[string]any{"turn": map[string]any{"token_usage": usage}, "history": map[string]any{"tool_count": tools},
			"event": map[string]any{"name": event}, "tool": map[string]any{"name": tool}}
	}
	cases := [][]struct {
		ctx  map[string]any
		want bool
	}{
		{{turn(0.85, 0, "on_tool_complete", "x"), true}, {turn(0.8, 0, "on_tool_complete", "x"), false}},
		{{turn(0.85, 6, "on_tool_complete", "x"), true}, {turn(0.85, 5, "on_tool_complete", "x"), false}, {turn(0.5, 9, "on_tool_complete", "x"), false}},
		{{turn(0.8, 0, "on_tool_complete", "x"), true}, {turn(0.1, 0, "on_tool_complete", "vault_search"), true},
			{turn(0.1, 0, "on_tool_failure", "vault_search"), false}, {turn(0.1, 0, "on_tool_complete", "x"), false}},
	}
	for i, chunk := range chunks {
		chunk = strings.TrimSuffix(chunk, "\n") + "\n"
		for _, prefix := range []string{"", "syntax = \"python\"\n"} {
			text := prefix + chunk + "\n[rule]\nid = \"example\"\ntrigger = \"on_tool_complete\"\n\n[action]\ntype = \"log\"\nmessage = \"matched\"\n"
			set, err := Load([]Source{src("example.toml", text)}, nil)
			if err != nil {
				t.Fatalf("example %d %q: %v", i+1, prefix, err)
			}
			for _, c := range cases[i] {
				out := fire(set, &recHost{t: t}, "on_tool_complete", c.ctx, true)
				if got := len(out.Fired) == 1; got != c.want || out.Trace[0].Error != "" {
					t.Errorf("example %d %q (read as %s) on %v: matched %v, want %v (%s)", i+1, prefix, set.Rules()[0].condExpr, c.ctx, got, c.want, out.Trace[0].Error)
				}
			}
		}
	}
}

// pyRule is a one-rule file whose condition is Python.
func pyRule(condition string) string {
	return fmt.Sprintf("[rule]\nid = \"p\"\ntrigger = \"on_x\"\n\n[condition]\nsyntax = \"python\"\nexpression = %q\n\n[action]\ntype = \"log\"\nmessage = \"m\"\n", condition)
}

func TestPython_translation(t *testing.T) {
	for _, c := range []struct{ py, expr string }{
		{"token_usage > 0.8", "context.turn.token_usage > 0.8"},
		{"turn_number >= 25 and context['history']['tool_count'] > 5", "context.turn.number >= 25 and context.history.tool_count > 5"},
		{"token_usage > thresholds.token_budget or turn_number > -3", "context.turn.token_usage > thresholds.token_budget or context.turn.number > -3"},
		{"0.5 < token_usage <= 0.9", "0.5 < context.turn.token_usage and context.turn.token_usage <= 0.9"},
		{"0 < len(context.xs) < 3", "(let __py1 = len(context.xs); 0 < __py1 and __py1 < 3)"},
		{"context.x is None", "context.x == nil"},
		{"context.x is not True", "context.x != true"},
		{"'a' in context.s", `__py_in("a", context.s)`},
		{"any(context.xs)", "any(context.xs, __py_truthy(#))"},
		{"not context.xs", "!__py_truthy(context.xs)"},
		{"context.n == 1_000 and context.f == 1e3", "context.n == 1000 and context.f == 1000.0"},
		{`context.s == 'it\'s "x"'`, `context.s == "it's \"x\""`},
		{"any([t == 'search' for t in context.history.recent_tools])", `any(map(context.history.recent_tools, let _t = #; _t == "search"), __py_truthy(#))`},
	} {
		got, err := translatePython(c.py)
		if err != nil || got != c.expr {
			t.Errorf("%s: got %q, %v; want %q", c.py, got, err, c.expr)
		}
	}
}

// TestPython_semantics checks translated conditions against what
// simpleeval answers: each expectation was checked with simpleeval 0.9.12
// (Debian's python3-simpleeval, the bench's reference), EvalWithCompoundTypes
// with the seed's names and functions, on the same context.
func TestPython_semantics(t *testing.T) {
	ctx := map[string]any{
		"turn":    map[string]any{"number": float64(3), "token_usage": 0.85},
		"history": map[string]any{"tool_count": float64(6), "recent_tools": []any{"search", "read"}},
		"s":       "hello world", "empty": "", "zero": float64(0), "none": nil,
		"xs": []any{float64(1), float64(2), float64(3)}, "ys": []any{float64(0), ""}, "d": map[string]any{"k": float64(1)},
		"tool": map[string]any{"args": map[string]any{"query": "login password"}},
	}
	for _, c := range []struct {
		py   string
		want bool
	}{
		{"token_usage > 0.8", true},
		{"turn_number == 3", true},
		{"1 < turn_number < 3", false},
		{"1 < turn_number < 4 < 5", true},
		{"1 < len(context.xs) < 4", true},
		{"'world' in context.s", true},
		{"'World' in context.s", false},
		{"2 in context.xs", true},
		{"2.0 in context.xs and 4 not in context.xs", true},
		{"'k' in context.d and 'j' not in context.d", true},
		{"'search' in context.history.recent_tools", true},
		{"any(context.xs)", true},
		{"any(context.ys)", false},
		{"all(context.xs)", true},
		{"all(context.ys)", false},
		{"all([])", true},
		{"any(x > 2 for x in context.xs)", true},
		{"all([x > 2 for x in context.xs])", false},
		{"len([x for x in context.xs if x % 2 == 1]) == 2", true},
		{"context.none is None", true},
		{"context.none is not None", false},
		{"context.empty", false},
		{"context.s", true},
		{"not context.zero", true},
		{"context.xs", true},
		{"(context.zero or 5) == 5", true},
		{"(context.s and 7) == 7", true},
		{"(context.empty and 7) == ''", true},
		{"True and not False", true},
		{"-7 // 2 == -4", true},
		{"-7 % 3 == 2", true},
		{"2 ** 3 ** 2 == 512", true},
		{"-2 ** 2 == -4", true},
		{"7 / 2 == 3.5", true},
		{"('yes' if token_usage > 0.5 else 'no') == 'yes'", true},
		{"str(True) == 'True' and str(None) == 'None'", true},
		{"context.s.startswith('hello') and context.s.upper() == 'HELLO WORLD'", true},
		{"context.d.get('k') == 1 and context.d.get('j', 9) == 9", true},
		{"context.s[0:5] == 'hello' and context.xs[-1] == 3", true},
		{"[1, 2] == [1, 2] and (1, 2)[1] == 2 and {'a': 1}['a'] == 1", true},
		{"'pass' in context.tool.args.query", true},
		{"int('3') + float('0.5') == 3.5 and len(context.s) == 11", true},
		{"context_above_threshold(0.8)", true},
		{"'a' 'b' == 'ab'", true},
	} {
		set, err := Load([]Source{src("p.toml", pyRule(c.py))}, nil)
		if err != nil {
			t.Errorf("%s: %v", c.py, err)
			continue
		}
		out := fire(set, &recHost{t: t}, "on_x", ctx, true)
		if got := len(out.Fired) == 1; got != c.want || out.Trace[0].Error != "" {
			t.Errorf("%s (read as %s): %v, want %v %s", c.py, set.Rules()[0].condExpr, got, c.want, out.Trace[0].Error)
		}
	}
}

func TestPython_runtimeErrors(t *testing.T) {
	for _, c := range []struct{ py, err string }{
		{"1 in context.s", "'in <string>' requires a string as left operand, not float"},
		{"'a' in context.none", "argument of type 'NoneType' is not iterable"},
		{"context.xs // 0 == 1", "unsupported operand types for //"},
		{"1 // 0 == 1", "division by zero"},
	} {
		set := mustLoad(t, nil, pyRule(c.py))
		out := fire(set, &recHost{t: t}, "on_x", map[string]any{"s": "x", "xs": []any{}}, true)
		if len(out.Fired) != 0 || !strings.Contains(out.Trace[0].Error, c.err) {
			t.Errorf("%s: fired %v, error %q; want %q", c.py, firedIDs(out), out.Trace[0].Error, c.err)
		}
	}
}

func TestPython_loadErrors(t *testing.T) {
	for _, c := range []struct {
		name, text, want string
	}{
		{"syntax error", pyRule("token_usage > > 0.8"), `p.toml:7:29: rule "p": condition (python): unexpected ">" (expected a value)`},
		{"unknown name", pyRule("token_usage > 0.8 and true"), `p.toml:7:37: rule "p": condition (python): name "true" is not defined (Python writes True)`},
		{"unknown function", pyRule("max(1, 2) > 1"), `p.toml:7:15: rule "p": condition (python): function "max" is not defined`},
		{"unterminated string", pyRule("context.s == 'abc"), `p.toml:7:28: rule "p": condition (python): unterminated string`},
		{"bitwise", pyRule("1 | 2"), `p.toml:7:17: rule "p": condition (python): the bitwise operator | is not supported`},
		{"is with a number", pyRule("turn_number is 3"), `p.toml:7:27: rule "p": condition (python): "is" compares with None, True or False only`},
		{"multi-line", "syntax = \"python\"\n[rule]\nid = \"m\"\ntrigger = \"on_x\"\n[condition]\nexpression = '''\ntoken_usage > 0.8 and\n  turn_number >>> 3'''\n[action]\ntype = \"log\"\nmessage = \"m\"\n",
			`p.toml:8:15: rule "m": condition (python): the bitwise operator >> is not supported`},
		{"does not compile", pyRule("1 + 'a' > 0"), `p.toml:7: rule "p": condition (python, read as (1 + "a") > 0): invalid operation`},
		{"too long", pyRule(strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000)), `p.toml:7: rule "p": condition (python): 10001 bytes, more than the 4096 allowed`},
		{"unknown syntax", strings.Replace(pyRule("1"), `"python"`, `"lisp"`, 1), `p.toml:6: rule "p": syntax "lisp": use "expr" or "python"`},
	} {
		ps := loadProblems(t, src("p.toml", c.text))
		got := ps[0].String()
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: got %q, want %q...", c.name, got, c.want)
		}
	}
}

func TestPython_detected(t *testing.T) {
	for _, c := range []struct {
		src    string
		python bool
	}{
		{"context.x is None", true},
		{"context.flag == True", true},
		{"any(context.xs)", true},
		{"all([x > 1 for x in context.xs])", true},
		{"context.a // 2 == 1", true},
		{"any(context.xs, # > 1)", false},
		{"all(context.xs, {.ok})", false},
		{"context.turn.token_usage > 0.8", false},
		{"context.a ?? 1 > 0", false},
		{"context_above_threshold(0.8) or tool_completed('vault_search')", false},
		{"context.x == nil && context.y", false},
	} {
		if got := looksPython(c.src); got != c.python {
			t.Errorf("%s: python %v, want %v", c.src, got, c.python)
		}
	}
	// Detected without syntax: a Python condition loads and works.
	set := mustLoad(t, nil, rule("d", "on_x", "", "context.x is None and any(context.xs)", "type = \"log\"\nmessage = \"m\""))
	if out := fire(set, &recHost{t: t}, "on_x", map[string]any{"xs": []any{0.0, 1.0}}, false); len(out.Fired) != 1 {
		t.Errorf("detected Python condition did not fire")
	}
	// syntax = "expr" keeps expr's reading, where True is an unknown name.
	text := strings.Replace(pyRule("context.flag == True"), `"python"`, `"expr"`, 1)
	if ps := loadProblems(t, src("e.toml", text)); !strings.Contains(ps[0].Message, "unknown name True") {
		t.Errorf("syntax expr: %v", ps)
	}
}

func TestPython_JSONRuleFile(t *testing.T) {
	text := `{"syntax": "python", "rule": {"id": "j", "trigger": "on_x"}, "condition": "token_usage > 0.8 and context.x is None",
 "action": {"type": "log", "message": "m"}}`
	set, err := Load([]Source{src("j.json", text)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out := fire(set, &recHost{t: t}, "on_x", map[string]any{"turn": map[string]any{"token_usage": 0.9}}, false); len(out.Fired) != 1 {
		t.Errorf("JSON rule with a string condition did not fire")
	}
	// An object condition keeps refusing unknown keys.
	bad := `{"rule": {"id": "j", "trigger": "on_x"}, "condition": {"expresion": "true"}, "action": {"type": "log", "message": "m"}}`
	if ps := loadProblems(t, src("j.json", bad)); !strings.Contains(ps[0].Message, "expresion") {
		t.Errorf("unknown key in a JSON condition: %v", ps)
	}
}

// The condition's needs come from its translation: a Python condition on
// context.history gets the history built.
func TestPython_needs(t *testing.T) {
	set := mustLoad(t, nil, pyRule("context['history']['tool_count'] > 5 and turn_number > 1"))
	n := set.NeedsFor("on_x")
	if !n.History || n.All {
		t.Errorf("needs %+v", n)
	}
	if !bytes.Contains([]byte(set.Rules()[0].CondSource), []byte("context['history']")) {
		t.Errorf("CondSource is not the condition as written: %q", set.Rules()[0].CondSource)
	}
}
