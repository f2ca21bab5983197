package rules

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core/protocol"
)

// Every problem of every file is reported, not only the first, each with
// its file and line apart from its message.
func TestLoad_allProblems(t *testing.T) {
	ps := loadProblems(t,
		src("a.toml", rule("a", "on_x", "", "1", notify("x"))),
		src("b.toml", "[rule]\nid = \"b\"\ntrigger = \"Bad\"\n"),
		src("c.toml", okRule),
	)
	want := []protocol.Problem{
		{File: "a.toml", Line: 6, Message: `rule "a": condition: expected bool`},
		{File: "b.toml", Line: 3, Message: `rule "b": trigger "Bad"`},
		{File: "b.toml", Line: 2, Message: `rule "b": no action`},
	}
	if len(ps) != len(want) {
		t.Fatalf("problems %q, want %d", ps, len(want))
	}
	for i, w := range want {
		if p := ps[i]; p.File != w.File || p.Line != w.Line || p.Col != 0 || !strings.HasPrefix(p.Message, w.Message) {
			t.Errorf("problem %d = %#v, want %#v", i, p, w)
		}
	}
	if msg := ps.Error(); !strings.HasPrefix(msg, "3 problems: a.toml:6: rule ") || !strings.Contains(msg, "; b.toml:3: ") {
		t.Errorf("Error() = %q", msg)
	}
	// A duplicate names where the first one is.
	ps = loadProblems(t, src("one.toml", rule("a", "on_x", "", "", notify("x"))), src("two.toml", "\n"+rule("a", "on_y", "", "", notify("y"))))
	if len(ps) != 1 || ps[0] != (protocol.Problem{File: "two.toml", Line: 3, Message: `rule "a" is defined twice (first at one.toml:2)`}) {
		t.Errorf("duplicate: %#v", ps)
	}
}

// Decoding errors have the column the decoder gives.
func TestLoad_problemColumns(t *testing.T) {
	for _, tc := range []struct {
		src  Source
		want protocol.Problem
	}{
		{src("bad.toml", "[rule]\nid = \"a\"\ntrigger = on_turn_start\n"), protocol.Problem{File: "bad.toml", Line: 3, Col: 11}},
		{src("u.toml", "[rule]\nid = \"a\"\n  prio = 3\n"), protocol.Problem{File: "u.toml", Line: 3, Col: 3, Message: `unknown key "rule.prio"`}},
		{src("j.json", "{\"rule\": {\"id\": \"a\",\n \"trigger\": }}"), protocol.Problem{File: "j.json", Line: 2, Col: 13}},
		{src("j.json", "{}\n  x"), protocol.Problem{File: "j.json", Line: 2, Col: 3, Message: "data after the JSON value"}},
		{src("j.json", "{\"rule\": {\"id\": \"a\",\n\"trigger\": \"on_x\",\n\"bogus\": 1}}"), protocol.Problem{File: "j.json", Line: 3, Message: `unknown field "bogus"`}},
	} {
		p := loadProblems(t, tc.src)[0]
		if p.File != tc.want.File || p.Line != tc.want.Line || p.Col != tc.want.Col || (tc.want.Message != "" && p.Message != tc.want.Message) {
			t.Errorf("%q: got %#v, want %#v", tc.src.Text, p, tc.want)
		}
	}
}

// A Lua compile error is a problem at the script's line: in the script
// file, or in the rule file for inline Lua.
func TestLoad_luaProblemsAtTheirLine(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cond.lua"), []byte("-- a condition\nlocal x = 1\nreturn x ==\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "act.lua"), []byte("notify('x')\nnotify(\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inline := "[rule]\nid = \"in\"\ntrigger = \"e\"\n[condition]\nlua = '''\nlocal a = 1\nlocal b = 2\nreturn a = b\n'''\n[action]\ntype = \"log\"\nmessage = \"m\"\n"
	oneLine := "[rule]\nid = \"one\"\ntrigger = \"e\"\n[[actions]]\ntype = \"log\"\nmessage = \"m\"\n[[actions]]\ntype = \"lua\"\nlua = \"local a = 1\\nreturn (\"\n"
	files := "[rule]\nid = \"f\"\ntrigger = \"e\"\n[condition]\nscript = \"cond.lua\"\n[action]\ntype = \"lua\"\nscript = \"act.lua\"\n"
	missing := "[rule]\nid = \"m\"\ntrigger = \"e\"\n[condition]\nscript = \"nope.lua\"\n[action]\ntype = \"log\"\nmessage = \"m\"\n"
	for _, tc := range []struct {
		name, text string
		want       []protocol.Problem // messages: prefixes
	}{
		{"inline", inline, []protocol.Problem{{File: "r.toml", Line: 8, Message: `rule "in": condition: `}}},
		{"one line", oneLine, []protocol.Problem{{File: "r.toml", Line: 9, Message: `rule "one": action 2 (lua): `}}},
		{"files", files, []protocol.Problem{
			{File: filepath.Join(dir, "cond.lua"), Line: 3, Message: `rule "f": condition: `},
			{File: filepath.Join(dir, "act.lua"), Line: 2, Message: `rule "f": action 1 (lua): `}}},
		{"missing file", missing, []protocol.Problem{{File: "r.toml", Line: 5, Message: `rule "m": condition: script: open `}}},
	} {
		ps := loadProblems(t, Source{Name: "r.toml", Text: []byte(tc.text), Dir: dir})
		if len(ps) != len(tc.want) {
			t.Errorf("%s: problems %q", tc.name, ps)
			continue
		}
		for i, w := range tc.want {
			p := ps[i]
			if p.File != w.File || p.Line != w.Line || !strings.HasPrefix(p.Message, w.Message) || len(p.Message) == len(w.Message) ||
				strings.Contains(p.Message, w.File+":") || strings.Contains(p.Message, "(condition):") || strings.Contains(p.Message, "(action):") {
				t.Errorf("%s: got %#v, want %#v and a message without the script's name and line", tc.name, p, w)
			}
		}
	}
}

// A rule test file's problems are protocol.Problems too, every one of them.
func TestParseTests_problems(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []protocol.Problem
	}{
		{"unknown key", "[[cases]]\nname = \"a\"\nevent = \"e\"\nfired = []\nfird = []\n",
			[]protocol.Problem{{File: "t.test.toml", Line: 5, Col: 1, Message: `unknown key "cases.fird"`}}},
		{"no cases", "rules = []\n", []protocol.Problem{{File: "t.test.toml", Line: 1, Message: "no [[cases]]"}}},
		{"two bad cases", "[[cases]]\nname = \"a\"\nevent = \"Bad\"\nfired = []\n\n[[cases]]\nname = \"b\"\nevent = \"e\"\n",
			[]protocol.Problem{
				{File: "t.test.toml", Line: 2, Message: "case 1: name and a valid event are required"},
				{File: "t.test.toml", Line: 7, Message: `case "b" expects nothing (give fired, notices, denied, asked, blocked, rewritten, redacted, shadow or state_after)`}}},
	} {
		_, err := ParseTests(Source{Name: "t.test.toml", Text: []byte(tc.text)})
		var ps protocol.Problems
		if !errors.As(err, &ps) || len(ps) != len(tc.want) {
			t.Errorf("%s: error %v", tc.name, err)
			continue
		}
		for i := range ps {
			if ps[i] != tc.want[i] {
				t.Errorf("%s: got %#v, want %#v", tc.name, ps[i], tc.want[i])
			}
		}
	}
}

// The seed's flattened names (turn_number, token_usage) are Python's: a
// condition read as expr that uses one is told so, and how to ask for
// Python; read as Python, the same condition loads.
func TestLoad_flattenedNamesSayPython(t *testing.T) {
	seed := "[rule]\nid = \"t\"\ntrigger = \"on_turn_start\"\n[condition]\nexpression = \"token_usage > 0.8\"\n[action]\ntype = \"notify_self\"\nmessage = \"m\"\n"
	ps := loadProblems(t, src("t.toml", seed))
	if len(ps) != 1 || ps[0].Line != 5 || !strings.Contains(ps[0].Message, "unknown name token_usage") ||
		!strings.Contains(ps[0].Message, `token_usage is one of the names the seed's Python conditions flatten: write context.turn.token_usage, or have the condition read as Python with syntax = "python"`) {
		t.Fatalf("problems %#v", ps)
	}
	ps = loadProblems(t, src("n.toml", strings.Replace(seed, "token_usage > 0.8", "turn_number >= 3 and other > 1", 1)))
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "turn_number is one of the names") || !strings.Contains(ps[0].Message, "write context.turn.number") {
		t.Fatalf("turn_number: %#v", ps)
	}
	// Another unknown name gets expr's message alone.
	ps = loadProblems(t, src("o.toml", strings.Replace(seed, "token_usage", "usage", 1)))
	if len(ps) != 1 || strings.Contains(ps[0].Message, "flatten") {
		t.Fatalf("usage: %#v", ps)
	}
	for _, text := range []string{
		strings.Replace(seed, "[condition]\n", "[condition]\nsyntax = \"python\"\n", 1),
		"syntax = \"python\"\n" + seed,
	} {
		if _, err := Load([]Source{src("p.toml", text)}, nil); err != nil {
			t.Errorf("with syntax = \"python\": %v", err)
		}
	}
}

// The seed's context is a dict, so its conditions call dict methods:
// context.state.get('visits', 0). Such a call is Python's (expr has no
// methods on maps): the condition is read as Python without being told.
func TestLoad_dictMethodsReadAsPython(t *testing.T) {
	for _, c := range []struct {
		cond  string
		ctx   map[string]any
		match bool
	}{
		{"context.state.get('visits', 0) > 2", map[string]any{"state": map[string]any{"visits": 3.0}}, true},
		{"context.state.get('visits', 0) > 2", map[string]any{"state": map[string]any{}}, false},
		{"context.tool.name.startswith('vault_')", map[string]any{"tool": map[string]any{"name": "vault_search"}}, true},
		{"context.note == 'x.get(1)'", map[string]any{"note": "x.get(1)"}, true}, // in a string: expr
	} {
		text := "[rule]\nid = \"r\"\ntrigger = \"x\"\n[condition]\nexpression = " + strconv.Quote(c.cond) + "\n[action]\ntype = \"log\"\nmessage = \"m\"\n"
		set, err := Load([]Source{src("r.toml", text)}, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.cond, err)
		}
		out := set.Fire(context.Background(), Event{Name: "x", Context: MapSource(c.ctx)}, &recHost{})
		if got := len(out.Fired) == 1; got != c.match {
			t.Errorf("%s on %v: fired %v", c.cond, c.ctx, out.Fired)
		}
	}
}
