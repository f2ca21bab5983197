package core_test

import (
	"strings"
	"testing"
)

// A [[tools]] Lua tool's timeout_ms (at most 5000) is its deadline and its memory_mb caps what
// its script holds.
func TestLuaTool_timeoutAndMemoryOfTheEntry(t *testing.T) {
	e := rulesEngine(t, `
[[tools]]
name = "spin"
timeout_ms = 30
lua = "return function(args) while true do end end"

[[tools]]
name = "hoard"
timeout_ms = 5000
memory_mb = 4
lua = "return function(args) local t = {} for i = 1, 1e8 do t[i] = {i} end return #t end"

[[tools]]
name = "modest"
memory_mb = 4
lua = "return function(args) local t = {} for i = 1, 1000 do t[i] = {i} end return #t end"
`)
	out := evalString(t, e, `{"tool":"spin","arguments":{}}`)
	if !strings.HasPrefix(out, `{"status":"error","error":"timeout"`) || !strings.Contains(out, "ran past its deadline") {
		t.Errorf("spin: %s", out)
	}
	out = evalString(t, e, `{"tool":"hoard","arguments":{}}`)
	if !strings.HasPrefix(out, `{"status":"error"`) || !strings.Contains(out, "over its memory limit of 4 MiB (memory_mb)") {
		t.Errorf("hoard: %s", out)
	}
	expectEq(t, "modest", evalString(t, e, `{"tool":"modest","arguments":{}}`), `{"status":"success","tool":"modest","result":1000}`)
	if out := evalString(t, e, `{"tool":"tools_list","arguments":{}}`); !strings.Contains(out, `"timeout_ms":30`) {
		t.Errorf("tools_list does not show spin's timeout: %s", out)
	}
}

// Invalid values are configuration problems at the entry's line; the configuration in force stays.
func TestLuaTool_limitsConfigErrors(t *testing.T) {
	e := rulesEngine(t, wordCountTool)
	for name, c := range map[string]struct{ cfg, want string }{
		"over 5 s":   {"[[tools]]\nname = \"x\"\ntimeout_ms = 5001\nlua = \"return function() end\"\n", `tools[0]: timeout_ms must be from 1 to 5000, not 5001`},
		"zero":       {"[[tools]]\nname = \"x\"\ntimeout_ms = 0\nlua = \"return function() end\"\n", `timeout_ms must be from 1 to 5000, not 0`},
		"string":     {"[[tools]]\nname = \"x\"\nmemory_mb = \"50MB\"\nlua = \"return function() end\"\n", `memory_mb must be a whole number from 1 to 1024`},
		"memory":     {"[[tools]]\nname = \"x\"\nmemory_mb = 4096\nlua = \"return function() end\"\n", `memory_mb must be from 1 to 1024, not 4096`},
		"both":       {"[[tools]]\nname = \"x\"\ntimeout_ms = 10\nlimits = { timeout_ms = 10 }\nlua = \"return function() end\"\n", `give timeout_ms or limits.timeout_ms, not both`},
		"http":       {"[[tools]]\nname = \"x\"\ntimeout_ms = 10\nhttp = { url = \"http://127.0.0.1:1/\" }\n", `timeout_ms and memory_mb are a Lua tool's limits`},
		"second one": {"[[tools]]\nname = \"ok\"\nlua = \"return function() end\"\n\n[[tools]]\nname = \"x\"\ntimeout_ms = -1\nlua = \"return function() end\"\n", `"line":5`},
	} {
		out := string(e.Configure([]byte(c.cfg)))
		if !strings.HasPrefix(out, `{"status":"error","error":"invalid_request"`) || !strings.Contains(out, c.want) {
			t.Errorf("%s: %s\nwant %s", name, out, c.want)
		}
	}
	expectEq(t, "word_count", evalString(t, e, `{"tool":"word_count","arguments":{"text":"a b"}}`),
		`{"status":"success","tool":"word_count","result":{"words":2}}`)
}

// Arguments that are not an object are refused: from a request by the parser, from a nested
// call_tool by call_tool itself (and, should another path bring them, by the tool as
// invalid_args).
func TestLuaTool_argumentsNotAnObject(t *testing.T) {
	e := rulesEngine(t, wordCountTool+`
[[tools]]
name = "any"
lua = "return function(args) return args end"

[[tools]]
name = "caller"
lua = "return function(args) local ok, err = pcall(call_tool, 'any', {1, 2}) return {ok = ok, err = tostring(err)} end"
`)
	out := evalString(t, e, `{"tool":"any","arguments":[1,2]}`)
	if !strings.HasPrefix(out, `{"status":"error","error":"invalid_request"`) {
		t.Errorf("an array: %s", out)
	}
	expectEq(t, "no arguments", evalString(t, e, `{"tool":"any"}`), `{"status":"success","tool":"any","result":{}}`)
	out = evalString(t, e, `{"tool":"caller","arguments":{}}`)
	if !strings.Contains(out, `"ok":false`) || !strings.Contains(out, "table with string keys expected") {
		t.Errorf("call_tool with an array: %s", out)
	}
}
