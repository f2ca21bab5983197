package rules

import (
	"strings"
	"testing"
)

// semanticRuleText is the seed's semantic condition (testdata/seed004/
// semantic.toml, byte for byte) with a rule and an action around it.
func semanticRuleText(t *testing.T, seed string) string {
	return seed + "\n[rule]\nid = \"auth\"\ntrigger = \"on_tool_call\"\n\n[action]\ntype = \"log\"\nmessage = \"m\"\n"
}

func TestSemantic_seedCondition(t *testing.T) {
	set := mustLoad(t, nil, semanticRuleText(t, string(readSeed(t, "semantic.toml"))))
	r := set.Rules()[0]
	if r.semantic == nil || r.semantic.field != "context.tool.arguments.query" || r.semantic.threshold != 0.7 || r.semantic.concept != "authentication" {
		t.Fatalf("compiled %+v", r.semantic)
	}
	if n := set.NeedsFor("on_tool_call"); !n.ToolField("arguments") || n.All {
		t.Errorf("needs %+v", n)
	}
	if got := set.Concepts(); len(got) != 1 || got[0].Text != "authentication" || got[0].File != "r0.toml" || got[0].Line != 5 {
		t.Errorf("concepts %+v", got)
	}
	// Not bound: the condition fails (and does not match), saying why.
	ctx := map[string]any{"tool": map[string]any{"name": "search", "arguments": map[string]any{"query": "login"}}}
	out := fire(set, &recHost{t: t}, "on_tool_call", ctx, true)
	if len(out.Fired) != 0 || !strings.Contains(out.Trace[0].Error, `concept "authentication" has no vector`) {
		t.Errorf("unbound: %+v", out.Trace)
	}
	// Bound, but a host that cannot embed: no match, an error.
	set.BindConcepts(map[string][]float32{"authentication": {1, 0}})
	out = fire(set, &recHost{t: t}, "on_tool_call", ctx, true)
	if len(out.Fired) != 0 || !strings.Contains(out.Trace[0].Error, "no embedding model here") {
		t.Errorf("no embedder: %+v", out.Trace)
	}
	// A field that is not text is an error; absent is no match, no error.
	out = fire(set, &recHost{t: t}, "on_tool_call", map[string]any{"tool": map[string]any{"arguments": map[string]any{"query": 3.0}}}, true)
	if !strings.Contains(out.Trace[0].Error, "context.tool.arguments.query is float, not a text") {
		t.Errorf("number: %+v", out.Trace)
	}
	out = fire(set, &recHost{t: t}, "on_tool_call", map[string]any{"tool": map[string]any{"arguments": map[string]any{}}}, true)
	if out.Trace[0].Error != "" || out.Trace[0].Matched {
		t.Errorf("absent: %+v", out.Trace)
	}
}

func TestSemantic_cosine(t *testing.T) {
	u := normalised([]float32{3, 4})
	for _, c := range []struct {
		v    []float32
		want float64
	}{{[]float32{3, 4}, 1}, {[]float32{-3, -4}, -1}, {[]float32{4, -3}, 0}, {[]float32{6, 8}, 1}} {
		got, err := cosine(u, c.v)
		if err != nil || got < c.want-1e-6 || got > c.want+1e-6 {
			t.Errorf("%v: %v %v, want %v", c.v, got, err, c.want)
		}
	}
	if _, err := cosine(u, []float32{1}); err == nil {
		t.Error("dimensions differ: no error")
	}
	if _, err := cosine(u, []float32{0, 0}); err == nil {
		t.Error("zero vector: no error")
	}
	if normalised([]float32{0, 0}) != nil {
		t.Error("a zero concept vector is not nil")
	}
}

func TestSemantic_loadErrors(t *testing.T) {
	cond := func(s string) string {
		return "[condition]\n" + s + "\n[rule]\nid = \"s\"\ntrigger = \"on_x\"\n[action]\ntype = \"log\"\nmessage = \"m\"\n"
	}
	for _, c := range []struct{ text, want string }{
		{cond(`semantic = { concept = "", field = "tool.args.q", threshold = 0.5 }`), `r.toml:2: rule "s": semantic condition: concept must be a text of 1 to 1024 bytes`},
		{cond(`semantic = { concept = "x", field = "tool.args.q" }`), `r.toml:2: rule "s": semantic condition: threshold must be a number from -1 to 1`},
		{cond(`semantic = { concept = "x", field = "tool..q", threshold = 0.5 }`), `r.toml:2: rule "s": semantic condition: field "tool..q" must be a path under context`},
		{cond(`semantic = { concept = "x", field = "q", threshold = 0.5, model = "m" }`), `r.toml:2: unknown key "condition.model"` /* go-toml names an inline table's key so */},
		{cond("expression = \"true\"\nsemantic = { concept = \"x\", field = \"q\", threshold = 0.5 }"), `r.toml:5: rule "s": condition: give one of expression, lua, script or semantic`},
	} {
		if got := loadErr(t, src("r.toml", c.text)); !strings.HasPrefix(got, c.want) {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}
