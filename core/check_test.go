package core_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core"
)

// TestCheck_finds_every_problem_positioned_and_runs_nothing: a
// configuration whose rule files, plugin, Lua, tools, server entries and
// audit path are all wrong in some way gets every problem at once, each
// with its file and line; the eager MCP server it names is not started.
func TestCheck_finds_every_problem_positioned_and_runs_nothing(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range map[string]string{
		".clara/rules/expr.toml":              "[rule]\nid = \"bad_expr\"\ntrigger = \"on_tool_call\"\n[condition]\nexpression = \"context.tool.name ==\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n",
		".clara/rules/lua.toml":               "[rule]\nid = \"bad_lua\"\ntrigger = \"on_tool_call\"\n[condition]\nlua = \"return (\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n",
		".clara/rules/semantic.toml":          "[rule]\nid = \"near\"\ntrigger = \"on_tool_call\"\n[condition]\nsemantic = { concept = \"auth\", field = \"tool.name\", threshold = 0.7 }\n[action]\ntype = \"log\"\nmessage = \"x\"\n",
		".clara/plugins/broken/plugin.toml":   "name = \"broken\"\nbogus = 1\n",
		".clara/plugins/fine/plugin.toml":     "name = \"fine\"\n",
		".clara/plugins/fine/rules/fine.toml": "[rule]\nid = \"fine_rule\"\ntrigger = \"on_tool_call\"\n[action]\ntype = \"nope\"\n",
		"tools/bad.lua":                       "return function(args)\n  return (\nend\n",
	} {
		must(os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755))
		must(os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	started := filepath.Join(dir, "started")
	cfg := `
project_root = "` + dir + `"

[audit]
path = "` + dir + `/no/such/dir/audit.jsonl"

[[tools]]
name = "inline_lua"
lua = "return function(args) return ( end"

[[tools]]
name = "echo"
lua = "return function(args) return args end"

[[tools]]
name = "file_lua"
lua_file = "tools/bad.lua"

[[mcp_servers]]
name = "srv"
command = "sh"
args = ["-c", "touch ` + started + `"]
eager = true

[[mcp_servers]]
name = "other"
bogus_key = 1
`
	ps := core.Check([]byte(cfg), "clara.toml")
	text := ps.Error()
	for _, want := range []string{
		"clara.toml:5:1: audit.path:",
		"clara.toml:7:3: tools[0] (inline_lua): lua",
		`clara.toml:11:3: tools[1] (echo): "echo" is a built-in tool`,
		"clara.toml:25:3: mcp_servers[1]:",
		filepath.Join(dir, "tools/bad.lua") + ":3",
		filepath.Join(dir, ".clara/rules/expr.toml") + `:5: rule "bad_expr": condition: unexpected token EOF`,
		filepath.Join(dir, ".clara/rules/lua.toml") + `:5: rule "bad_lua": condition: syntax error`,
		filepath.Join(dir, ".clara/rules/semantic.toml") + `:2: rule "near": semantic condition: no embedding model`,
		filepath.Join(dir, ".clara/plugins/broken/plugin.toml") + `:2:1: unknown key "bogus"`,
		filepath.Join(dir, ".clara/plugins/fine/rules/fine.toml") + ":5",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, strings.ReplaceAll(text, "; ", "\n"))
		}
	}
	for _, p := range ps {
		if p.File == "" || p.Line == 0 {
			t.Errorf("unpositioned: %+v", p)
		}
	}
	if _, err := os.Stat(started); err == nil {
		t.Error("check started the MCP server")
	}
	// A configuration without problems has none; one that does not parse
	// has its syntax error, positioned.
	if ps := core.Check([]byte("[limits]\ntimeout_ms = 5000\n"), "ok.toml"); len(ps) != 0 {
		t.Errorf("problems in a good configuration: %v", ps)
	}
	if ps := core.Check([]byte("\n[limits\n"), "bad.toml"); len(ps) != 1 || ps[0].File != "bad.toml" || ps[0].Line != 2 {
		t.Errorf("syntax: %#v", ps)
	}
}
