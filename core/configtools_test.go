package core_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const wordCountTool = `
[[tools]]
name = "word_count"
description = "Count words"
input_schema = { type = "object", properties = { text = { type = "string" } }, required = ["text"] }
lua = """
return function(args)
  local n = 0
  for _ in string.gmatch(args.text, "%S+") do n = n + 1 end
  return { words = n }
end
"""
`

func TestLuaTool_endToEnd(t *testing.T) {
	e := rulesEngine(t, wordCountTool)
	expectEq(t, "word_count", evalString(t, e, `{"tool":"word_count","arguments":{"text":"one two  three"}}`),
		`{"status":"success","tool":"word_count","result":{"words":3}}`)
	// Validated like every tool.
	out := evalString(t, e, `{"tool":"word_count","arguments":{"text":7}}`)
	if !strings.HasPrefix(out, `{"status":"error","error":"invalid_args"`) {
		t.Errorf("a number for text: %s", out)
	}
	// Listed in the catalog.
	if out := evalString(t, e, `{"tool":"tools_list","arguments":{}}`); !strings.Contains(out, `"word_count"`) {
		t.Errorf("tools_list does not list word_count: %s", out)
	}
}

func TestLuaTool_timeoutAndErrors(t *testing.T) {
	e := rulesEngine(t, `
[[tools]]
name = "spin"
limits = { timeout_ms = 100 }
lua = "return function(args) while true do end end"

[[tools]]
name = "boom"
lua = "return function(args) error('it broke') end"
`)
	start := time.Now()
	out := evalString(t, e, `{"tool":"spin","arguments":{}}`)
	if !strings.HasPrefix(out, `{"status":"error","error":"timeout"`) {
		t.Errorf("spin: %s", out)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("spin took %v with a 100 ms timeout", took)
	}
	out = evalString(t, e, `{"tool":"boom","arguments":{}}`)
	if !strings.HasPrefix(out, `{"status":"error","error":"tool_failed"`) || !strings.Contains(out, "it broke") {
		t.Errorf("boom: %s", out)
	}
	// The engine carries on.
	expectEq(t, "echo", evalString(t, e, `{"tool":"echo","arguments":{"a":1}}`), `{"status":"success","tool":"echo","result":{"a":1}}`)
}

func TestLuaTool_callToolUnderPolicy(t *testing.T) {
	e := rulesEngine(t, `
[[tools]]
name = "relay"
lua = "return function(args) return call_tool(args.tool, {x = 1}) end"
`)
	expectEq(t, "relay echo", evalString(t, e, `{"tool":"relay","arguments":{"tool":"echo"}}`),
		`{"status":"success","tool":"relay","result":{"x":1}}`)
	// The request's policy narrows what the script may call.
	out := evalString(t, e, `{"tool":"relay","arguments":{"tool":"echo"},"policy":{"allow":["relay"]}}`)
	if !strings.HasPrefix(out, `{"status":"error","error":"tool_failed"`) || !strings.Contains(out, "denied") {
		t.Errorf("relay under a narrower policy: %s", out)
	}
	// Recursion is bounded.
	out = evalString(t, e, `{"tool":"relay","arguments":{"tool":"relay"}}`)
	if !strings.HasPrefix(out, `{"status":"error"`) {
		t.Errorf("relay of relay of ...: %s", out)
	}
}

func TestLuaTool_configErrorsKeepTheConfiguration(t *testing.T) {
	e := rulesEngine(t, wordCountTool)
	cases := map[string]string{
		"syntax":        "[[tools]]\nname = \"bad\"\nlua = \"return function(\"\n",
		"no lua":        "[[tools]]\nname = \"bad\"\n",
		"both":          "[[tools]]\nname = \"bad\"\nlua = \"x\"\nlua_file = \"x.lua\"\n",
		"missing file":  "[[tools]]\nname = \"bad\"\nlua_file = \"nope.lua\"\n",
		"builtin name":  "[[tools]]\nname = \"echo\"\nlua = \"return function() end\"\n",
		"unknown key":   "[[tools]]\nname = \"bad\"\nlua = \"return function() end\"\nflavour = 1\n",
		"bad name":      "[[tools]]\nname = \"no spaces\"\nlua = \"return function() end\"\n",
		"twice":         "[[tools]]\nname = \"a\"\nlua = \"return function() end\"\n[[tools]]\nname = \"a\"\nlua = \"return function() end\"\n",
		"not an array":  "tools = 3\n",
		"entry a value": "tools = [1]\n",
	}
	for name, cfg := range cases {
		out := e.Configure([]byte(cfg))
		if !strings.HasPrefix(string(out), `{"status":"error","error":"invalid_request"`) {
			t.Errorf("%s: %s", name, out)
		}
	}
	// word_count still there, bad not.
	expectEq(t, "word_count", evalString(t, e, `{"tool":"word_count","arguments":{"text":"a b"}}`),
		`{"status":"success","tool":"word_count","result":{"words":2}}`)
	if out := evalString(t, e, `{"tool":"bad","arguments":{}}`); !strings.Contains(out, "unknown_tool") {
		t.Errorf("bad: %s", out)
	}
}

func TestLuaTool_replacedAndRemovedByConfiguration(t *testing.T) {
	e := rulesEngine(t, wordCountTool)
	mustConfigure(t, e, "[[tools]]\nname = \"other\"\nlua = \"return function() return 'hi' end\"\n")
	if out := evalString(t, e, `{"tool":"word_count","arguments":{"text":"a"}}`); !strings.Contains(out, "unknown_tool") {
		t.Errorf("word_count should be gone: %s", out)
	}
	expectEq(t, "other", evalString(t, e, `{"tool":"other","arguments":{}}`), `{"status":"success","tool":"other","result":"hi"}`)
	e.Reset()
	if out := evalString(t, e, `{"tool":"other","arguments":{}}`); !strings.Contains(out, "unknown_tool") {
		t.Errorf("other should be gone after reset: %s", out)
	}
}

func TestLuaTool_luaFileRelativeToProjectRoot(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "twice.lua"), []byte("return function(args) return args.n * 2 end\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := rulesEngine(t, "project_root = "+jsonText(dir)+"\n[[tools]]\nname = \"twice\"\nlua_file = \"twice.lua\"\n")
	expectEq(t, "twice", evalString(t, e, `{"tool":"twice","arguments":{"n":21}}`), `{"status":"success","tool":"twice","result":42}`)
}

func TestLuaTool_actionsReachTheSession(t *testing.T) {
	e := rulesEngine(t, `
[rules]
builtin = false
[[tools]]
name = "counter"
lua = """
return function(args)
  local n = (state.get("n") or 0) + 1
  state.set("n", n)
  notify("counted " .. n)
  return n
end
"""
`)
	for i := 1; i <= 2; i++ {
		evalString(t, e, `{"tool":"counter","session":"c","arguments":{}}`)
	}
	expectEq(t, "state", evalString(t, e, `{"tool":"state_get","session":"c","arguments":{"key":"n"}}`),
		`{"status":"success","tool":"state_get","result":{"key":"n","found":true,"value":2}}`)
	out := evalString(t, e, `{"tool":"notifications_drain","session":"c","arguments":{}}`)
	if !strings.Contains(out, `"counted 1"`) || !strings.Contains(out, `"counted 2"`) {
		t.Errorf("drain: %s", out)
	}
}

func TestLuaRule_deniesAToolCall(t *testing.T) {
	e := rulesEngine(t, "[rules]\nbuiltin = false\n")
	loadRuleText(t, e, "deny.toml", `
[rule]
id = "no-secrets"
trigger = "on_tool_call"
[condition]
lua = '''
if ctx.tool.name == "kv_get" and string.find(ctx.tool.arguments.key, "^secret") then
  deny("secrets stay secret")
  return true
end
return false
'''
[action]
type = "log"
message = "denied a secret"
`)
	out := evalString(t, e, `{"tool":"kv_get","arguments":{"key":"secret.token"}}`)
	if !strings.HasPrefix(out, `{"status":"error","error":"denied"`) || !strings.Contains(out, "secrets stay secret") {
		t.Errorf("kv_get secret: %s", out)
	}
	out = evalString(t, e, `{"tool":"kv_get","arguments":{"key":"public"}}`)
	if !strings.HasPrefix(out, `{"status":"success"`) {
		t.Errorf("kv_get public: %s", out)
	}
}

func TestLuaTool_returnsString(t *testing.T) {
	e := rulesEngine(t, `
[[tools]]
name = "shout"
returns = "string"
lua = "return function(a) return string.upper(a.text) end"

[[tools]]
name = "wrong"
returns = "string"
lua = "return function(a) return {a = 1} end"
`)
	expectEq(t, "shout", evalString(t, e, `{"tool":"shout","arguments":{"text":"hi"}}`), `{"status":"success","tool":"shout","result":"HI"}`)
	out := evalString(t, e, `{"tool":"wrong","arguments":{}}`)
	if !strings.HasPrefix(out, `{"status":"error","error":"tool_failed"`) || !strings.Contains(out, "returned a table") {
		t.Errorf("wrong: %s", out)
	}
}
