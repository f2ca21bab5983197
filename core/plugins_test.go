package core_test

// Plugins (issue 14, seed 004): folders found through plugins.paths, their
// rules and scripts, plugins_list and plugin_enable, state per plugin,
// on_plugin_load and on_plugin_unload; before_rule_eval.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/logging"
)

// writeTree writes files (path relative to dir -> text) under dir.
func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeFile(p, text); err != nil {
			t.Fatal(err)
		}
	}
}

// pluginProject is a project with two plugins: alpha (enabled, a rule and
// a Lua script) and beta (disabled in its plugin.toml), both counting
// visits in their own state, and a rule file of the project's own that
// watches the plugins' life.
func pluginProject(t testing.TB) string {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"plugins/alpha/plugin.toml": `name = "alpha"
version = "1.2.0"
description = "Counts visits"
priority = 5
`,
		"plugins/alpha/rules/count.toml": `[[rules]]
id = "alpha-count"
trigger = "visit"
[[rules.actions]]
type = "set_state"
key = "count"
value = "{{ (context.state.count ?? 0) + 1 }}"
[[rules.actions]]
type = "notify_self"
message = "alpha saw {{ (context.state.count ?? 0) + 1 }}"

[[rules]]
id = "alpha-lua"
trigger = "visit"
[rules.action]
type = "lua"
script = "scripts/hello.lua"
`,
		"plugins/alpha/scripts/hello.lua": `notify("alpha lua sees " .. tostring(state.get("count")))
`,
		"plugins/beta/plugin.toml": `name = "beta"
version = "0.1"
enabled = false
`,
		"plugins/beta/rules/count.toml": `[rule]
id = "beta-count"
trigger = "visit"
[action]
type = "set_state"
key = "count"
value = 100
`,
		"rules/life.toml": `[[rules]]
id = "seen-load"
trigger = "on_plugin_load"
[rules.action]
type = "log"
level = "info"
message = "plugin loaded: {{ context.plugin }} {{ context.version }}"

[[rules]]
id = "seen-unload"
trigger = "on_plugin_unload"
[rules.action]
type = "log"
level = "info"
message = "plugin unloaded: {{ context.plugin }}"

[[rules]]
id = "project-reads-count"
trigger = "visit"
[rules.action]
type = "notify_self"
message = "project sees {{ context.state.count ?? 'nothing' }}"
`,
	})
	return dir
}

// pluginEngine is an engine on dir with its state in memory (no watcher)
// and its log in buf.
func pluginEngine(t testing.TB, dir string, buf *syncBuffer) *core.Engine {
	t.Helper()
	log := logging.New(func(l logging.Level, m string) { buf.Write([]byte(l.String() + " " + m + "\n")) }, logging.Debug)
	e := core.New(core.Options{Logger: log})
	t.Cleanup(e.Close)
	// The project keeps its plugins (and rules, when it has them) where
	// its configuration says: plugins/ and rules/, not the defaults under
	// .clara/.
	rulePaths := "[]"
	if _, err := os.Stat(filepath.Join(dir, "rules")); err == nil {
		rulePaths = `["rules/*.toml"]`
	}
	mustConfigure(t, e, `state_dir = ""
project_root = `+jsonText(dir)+`
[rules]
builtin = false
paths = `+rulePaths+`
[plugins]
paths = ["plugins/*"]
`)
	return e
}

func notices(t testing.TB, out string) []string {
	t.Helper()
	var env struct {
		Result struct {
			Notices []struct{ Message string } `json:"notices"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var msgs []string
	for _, n := range env.Result.Notices {
		msgs = append(msgs, n.Message)
	}
	return msgs
}

func TestPlugins_discovered_listed_enabled(t *testing.T) {
	dir := pluginProject(t)
	var buf syncBuffer
	e := pluginEngine(t, dir, &buf)
	alpha, beta := filepath.Join(dir, "plugins", "alpha"), filepath.Join(dir, "plugins", "beta")
	expectEq(t, "plugins_list", evalString(t, e, `{"tool":"plugins_list"}`),
		`{"status":"success","tool":"plugins_list","result":{"plugins":[`+
			`{"name":"alpha","version":"1.2.0","description":"Counts visits","enabled":true,"enabled_by":"plugin.toml","priority":5,"path":`+jsonText(alpha)+`,"rules":["alpha-count","alpha-lua"]},`+
			`{"name":"beta","version":"0.1","description":"","enabled":false,"enabled_by":"plugin.toml","priority":0,"path":`+jsonText(beta)+`,"rules":[]}]}}`)
	if !strings.Contains(buf.String(), "plugin loaded: alpha 1.2.0") || strings.Contains(buf.String(), "plugin loaded: beta") {
		t.Fatalf("on_plugin_load: the log says\n%s", buf.String())
	}

	// alpha counts in its own state; the project's rule does not see it,
	// nor does Lua outside alpha.
	got := notices(t, emitString(t, e, `{"event":"visit"}`))
	expectEq(t, "first visit", strings.Join(got, " | "), "project sees nothing | alpha saw 1 | alpha lua sees nil")
	got = notices(t, emitString(t, e, `{"event":"visit"}`))
	expectEq(t, "second visit", strings.Join(got, " | "), "project sees nothing | alpha saw 2 | alpha lua sees 1")
	expectEq(t, "state_get outside the plugin", evalString(t, e, `{"tool":"state_get","arguments":{"key":"count"}}`),
		`{"status":"success","tool":"state_get","result":{"key":"count","found":false}}`)
	expectEq(t, "state_get of the plugin", evalString(t, e, `{"tool":"state_get","arguments":{"key":"count","plugin":"alpha"}}`),
		`{"status":"success","tool":"state_get","result":{"key":"count","found":true,"value":2}}`)
	evalString(t, e, `{"tool":"state_set","arguments":{"key":"count","plugin":"alpha","value":1}}`)

	// beta enabled: its set_state lands in beta's namespace, not alpha's.
	out := evalString(t, e, `{"tool":"plugin_enable","arguments":{"name":"beta","enabled":true}}`)
	if !strings.Contains(out, `"name":"beta","version":"0.1","description":"","enabled":true,"enabled_by":"plugin_enable"`) ||
		!strings.Contains(out, `"rules":["beta-count"]`) {
		t.Fatalf("plugin_enable beta: %s", out)
	}
	if !strings.Contains(buf.String(), "plugin loaded: beta 0.1") {
		t.Fatalf("on_plugin_load of beta: the log says\n%s", buf.String())
	}
	emitString(t, e, `{"event":"visit"}`)
	got = notices(t, emitString(t, e, `{"event":"visit"}`))
	expectEq(t, "with beta", strings.Join(got, " | "), "project sees nothing | alpha saw 3 | alpha lua sees 2")
	expectEq(t, "beta's state", evalString(t, e, `{"tool":"state_get","arguments":{"key":"count","plugin":"beta"}}`),
		`{"status":"success","tool":"state_get","result":{"key":"count","found":true,"value":100}}`)

	// alpha disabled: its rules leave, and it hears its own unload.
	out = evalString(t, e, `{"tool":"plugin_enable","arguments":{"name":"alpha","enabled":false}}`)
	if !strings.Contains(out, `"name":"alpha","version":"1.2.0","description":"Counts visits","enabled":false,"enabled_by":"plugin_enable","priority":5,"path":`+jsonText(alpha)+`,"rules":[]`) {
		t.Fatalf("plugin_enable alpha: %s", out)
	}
	if !strings.Contains(buf.String(), "plugin unloaded: alpha") {
		t.Fatalf("on_plugin_unload: the log says\n%s", buf.String())
	}
	got = notices(t, emitString(t, e, `{"event":"visit"}`))
	expectEq(t, "without alpha", strings.Join(got, " | "), "project sees nothing")

	// An unknown plugin is refused; a configuration change keeps the choices.
	expectEq(t, "unknown plugin", evalString(t, e, `{"tool":"plugin_enable","arguments":{"name":"gamma","enabled":true}}`),
		`{"status":"error","error":"invalid_args","message":"plugin_enable: no plugin \"gamma\" (plugins_list lists them)"}`)
	mustConfigure(t, e, "[limits]\ntimeout_ms = 2000\n")
	got = notices(t, emitString(t, e, `{"event":"visit"}`))
	expectEq(t, "after a configuration change", strings.Join(got, " | "), "project sees nothing")
}

func TestPlugins_brokenManifestIsPositioned(t *testing.T) {
	dir := pluginProject(t)
	var buf syncBuffer
	e := pluginEngine(t, dir, &buf)
	writeTree(t, dir, map[string]string{"plugins/gamma/plugin.toml": "name = \"gamma\"\nversoin = \"1\"\n"})
	manifest := filepath.Join(dir, "plugins", "gamma", "plugin.toml")
	out := evalString(t, e, `{"tool":"rules_load"}`)
	if !strings.Contains(out, `"error":"invalid_args"`) || !strings.Contains(out, manifest+`:2:1: unknown key \"versoin\"`) {
		t.Fatalf("rules_load with a broken plugin.toml: %s", out)
	}
	// The rules in force stay.
	got := notices(t, emitString(t, e, `{"event":"visit"}`))
	expectEq(t, "rules kept", strings.Join(got, " | "), "project sees nothing | alpha saw 1 | alpha lua sees nil")
}

func TestBeforeRuleEval(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	loadRuleText(t, e, "two.toml", `
[[rules]]
id = "first"
trigger = "order.placed"
priority = 2
[rules.action]
type = "notify_self"
message = "first"

[[rules]]
id = "second"
trigger = "order.placed"
[rules.condition]
expression = "context.total > 100"
[rules.action]
type = "notify_self"
message = "second"
`)
	quietSecond := emitString(t, e, `{"event":"order.placed","payload":{"total":5}}`)
	expectEq(t, "nobody watches before_rule_eval", quietSecond,
		`{"status":"success","result":{"fired":[{"rule":"first","actions":[{"message":"first","priority":"normal","type":"notify_self"}]}],"notices":[{"rule":"first","message":"first","priority":"normal","event":"order.placed"}],"denied":null}}`)
	loadRuleText(t, e, "hook.toml", `
[rule]
id = "hook"
trigger = "before_rule_eval"
[action]
type = "notify_self"
message = "evaluating {{ context.rule }} of {{ context.trigger }}"
priority = "low"
`)
	got := notices(t, emitString(t, e, `{"event":"order.placed","payload":{"total":5}}`))
	expectEq(t, "every rule evaluated, matched or not", strings.Join(got, " | "),
		"evaluating first of order.placed | first | evaluating second of order.placed")
}

func TestPlugins_tools(t *testing.T) {
	dir := pluginProject(t)
	writeTree(t, dir, map[string]string{
		"plugins/alpha/tools/greet.toml": `[[tools]]
name = "alpha_greet"
description = "Greets"
lua_file = "scripts/greet.lua"

[[tools]]
name = "alpha_shout"
lua = "return function(args) return string.upper(args.text) end"
`,
		"plugins/alpha/scripts/greet.lua": "return function(args) return \"hello, \" .. args.name end\n",
	})
	var buf syncBuffer
	e := pluginEngine(t, dir, &buf)
	expectEq(t, "a plugin's tool from a file", evalString(t, e, `{"tool":"alpha_greet","arguments":{"name":"Ada"}}`),
		`{"status":"success","tool":"alpha_greet","result":"hello, Ada"}`)
	expectEq(t, "a plugin's inline tool", evalString(t, e, `{"tool":"alpha_shout","arguments":{"text":"hi"}}`),
		`{"status":"success","tool":"alpha_shout","result":"HI"}`)
	evalString(t, e, `{"tool":"plugin_enable","arguments":{"name":"alpha","enabled":false}}`)
	if out := evalString(t, e, `{"tool":"alpha_greet","arguments":{"name":"Ada"}}`); !strings.Contains(out, `"error":"unknown_tool"`) {
		t.Fatalf("the tool of a disabled plugin: %s", out)
	}
	evalString(t, e, `{"tool":"plugin_enable","arguments":{"name":"alpha","enabled":true}}`)

	// A tool declared by the configuration and a plugin is refused.
	out := e.Configure([]byte("[[tools]]\nname = \"alpha_shout\"\nlua = \"return 1\"\n"))
	if !strings.Contains(string(out), `tool \"alpha_shout\" of plugin \"alpha\" is declared by the configuration too`) {
		t.Fatalf("a tool declared twice: %s", out)
	}
	// A pattern may not leave project_root.
	if out := string(e.Configure([]byte("[plugins]\npaths = [\"../*\"]\n"))); !strings.Contains(out, `plugins.paths: \"../*/plugin.toml\" leaves project_root`) {
		t.Fatalf("plugins.paths outside project_root: %s", out)
	}
	// A lua_file may not leave the plugin's folder.
	writeTree(t, dir, map[string]string{"plugins/alpha/tools/bad.toml": "[[tools]]\nname = \"x\"\nlua_file = \"../../rules/life.toml\"\n"})
	out = []byte(evalString(t, e, `{"tool":"rules_load"}`))
	if !strings.Contains(string(out), `bad.toml:1: tool \"x\": lua_file \"../../rules/life.toml\" leaves the plugin's folder`) {
		t.Fatalf("a lua_file outside the plugin: %s", out)
	}
}
