"""Lua from Python (SPEC §8): tools declared in configuration (inline and
lua_file), the script API, the sandbox, script errors and timeouts,
configuration errors that keep the configuration in force, and Lua rules
(conditions inline and from a file, lua actions) denying a tool written in
Python before it runs."""

import json
import os
import tempfile
import threading
import time
import unittest

import clara
from clara_testcase import ClaraTestCase

WORD_COUNT = '''
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
'''

ONE_OF = "give one of lua (the script), lua_file (a file relative to project_root) or http (a table with url)"


def lua_tool(name, lua, **descriptor):
    return dict(descriptor, name=name, lua=lua)


class TestLuaTools(ClaraTestCase):

    def configure_ok(self, config):
        env = self.lib.configure(config)
        self.assertEqual(env["status"], "success", env)
        return env["result"]["config"]

    def current(self):
        return self.configure_ok({})

    def test_word_count_end_to_end(self):
        config = self.configure_ok(WORD_COUNT)
        self.assertEqual([t["name"] for t in config["tools"]], ["word_count"])
        self.assertEnvelope('{"tool":"word_count","arguments":{"text":"a b c"}}',
                            '{"status":"success","tool":"word_count","result":{"words":3}}')
        self.assertEnvelope('{"tool":"word_count","arguments":{"text":""}}',
                            '{"status":"success","tool":"word_count","result":{"words":0}}')
        # The input_schema is checked before the script runs.
        env = self.lib.evaluate({"tool": "word_count", "arguments": {}})
        self.assertEqual(env["error"], "invalid_args")
        self.assertEqual(env["details"], [{"pointer": "", "message": "missing property 'text'"}])
        # In the catalog, as a tool like any other.
        tools = self.lib.evaluate({"tool": "tools_list"})["result"]["tools"]
        [wc] = [t for t in tools if t["name"] == "word_count"]
        self.assertEqual((wc["description"], wc["builtin"], wc["llm_visible"]), ("Count words", False, True))

    def test_json_configuration_and_replacement(self):
        self.configure_ok({"tools": [lua_tool("upper", "return function(a) return {s = string.upper(a.s)} end")]})
        self.assertEqual(self.lib.evaluate({"tool": "upper", "arguments": {"s": "abc"}})["result"], {"s": "ABC"})
        # An array given again replaces the whole list.
        self.configure_ok(WORD_COUNT)
        self.assertEqual(self.lib.evaluate({"tool": "upper", "arguments": {"s": "x"}})["error"], "unknown_tool")
        self.configure_ok({"tools": []})
        self.assertEqual(self.lib.evaluate({"tool": "word_count", "arguments": {"text": "x"}})["error"],
                         "unknown_tool")

    def test_lua_file_relative_to_project_root(self):
        with tempfile.TemporaryDirectory() as d:
            os.mkdir(os.path.join(d, "tools"))
            with open(os.path.join(d, "tools", "stats.lua"), "w") as f:
                f.write("return function(args)\n"
                        "  local sum = 0\n"
                        "  for _, x in ipairs(args.xs) do sum = sum + x end\n"
                        "  return { n = #args.xs, sum = sum, mean = sum / #args.xs }\n"
                        "end\n")
            self.configure_ok({"project_root": d, "tools": [{"name": "stats", "lua_file": "tools/stats.lua"}]})
            self.assertEnvelope('{"tool":"stats","arguments":{"xs":[1,2,3,6]}}',
                                '{"status":"success","tool":"stats","result":{"mean":3,"n":4,"sum":12}}')
            env = self.lib.configure({"tools": [{"name": "stats", "lua_file": "tools/missing.lua"}]})
            self.assertEqual(env["error"], "invalid_request")
            self.assertIn("tools[0] (stats): lua_file: open ", env["message"])
            self.assertIn("missing.lua: no such file or directory", env["message"])
            self.assertEqual(self.lib.evaluate({"tool": "stats", "arguments": {"xs": [2]}})["result"],
                             {"mean": 2, "n": 1, "sum": 2})

    def test_script_api(self):
        seen = []
        self.lib.register_tool({"name": "py_square"}, lambda args: {"sq": args["x"] * args["x"]})
        self.lib.set_log_handler(lambda level, msg: seen.append((level, msg)), clara.CLARA_LOG_DEBUG)
        try:
            self.assertEqual(self.lib.evaluate({"tool": "rules_load", "arguments": {"name": "t.toml", "toml": """
[rule]
id = "on-stored"
trigger = "tool.stored"
[action]
type = "notify_self"
message = "stored {{ context.key }}"
"""}})["status"], "success")
            self.configure_ok({"tools": [lua_tool("api", """
return function(args)
  local before = state.get("visits")
  state.set("visits", (before or 0) + 1)
  notify("visit from " .. args.who, "high")
  log("warn", "lua says hi to " .. args.who)
  emit("tool.stored", { key = "visits" })
  local sq = call_tool("py_square", { x = 7 })
  local decoded = json.decode('{"a":[1,2,{"b":null}]}')
  return { before = before, square = sq.sq, decoded_len = #decoded.a,
           encoded = json.encode({ k = "v" }) }
end
""")]})
            self.assertEqual(self.lib.evaluate({"tool": "api", "session": "s1", "arguments": {"who": "ada"}}),
                             {"status": "success", "tool": "api",
                              "result": {"square": 49, "decoded_len": 3, "encoded": '{"k":"v"}'}})
            self.assertEqual(self.lib.evaluate({"tool": "api", "session": "s1", "arguments": {"who": "bo"}})
                             ["result"]["before"], 1)
            # State is the session's rule state.
            self.assertEqual(self.lib.evaluate({"tool": "state_get", "session": "s1", "arguments": {"key": "visits"}})
                             ["result"], {"key": "visits", "found": True, "value": 2})
            # notify() and the rule the emitted event fired reach the session's queue
            # (the second "stored visits" counted in the first: notices.dedupe_window_ms).
            notices = self.lib.evaluate({"tool": "notifications_drain", "session": "s1"})["result"]["notices"]
            self.assertEqual([(n["message"], n["priority"], n.get("count")) for n in notices],
                             [("visit from ada", "high", None), ("stored visits", "normal", 2),
                              ("visit from bo", "high", None)])
            self.assertEqual(self.lib.evaluate({"tool": "notifications_drain"})["result"]["notices"], [])
            # log() goes to the log at its level.
            self.assertIn((clara.CLARA_LOG_WARN, "lua says hi to ada"), seen)
        finally:
            self.lib.set_log_handler(None, clara.CLARA_LOG_OFF)
            self.lib.unregister_tool("py_square")

    def test_call_tool_is_policy_checked(self):
        runs = []
        self.lib.register_tool({"name": "py_secret"}, lambda args: runs.append(1) or {"secret": 42})
        try:
            self.configure_ok({"tools": [lua_tool("peek", """
return function(args)
  local ok, err = pcall(call_tool, "py_secret", {})
  return { ok = ok, err = ok and "" or tostring(err) }
end
""")]})
            self.assertEqual(self.lib.evaluate({"tool": "peek"})["result"], {"ok": True, "err": ""})
            got = self.lib.evaluate({"tool": "peek", "policy": {"deny": ["py_secret"]}})["result"]
            self.assertIs(got["ok"], False)
            self.assertIn("denied", got["err"])
            self.assertEqual(runs, [1])
        finally:
            self.lib.unregister_tool("py_secret")

    def test_sandbox(self):
        self.configure_ok({"tools": [lua_tool("probe", """
return function(args)
  return { io = io == nil, require = require == nil, load = load == nil, dofile = dofile == nil,
           loadstring = loadstring == nil, debug = debug == nil, package = package == nil,
           os_execute = os.execute == nil, os_getenv = os.getenv == nil,
           os_time = type(os.time()) == "number", string_dump = string.dump == nil }
end
"""), lua_tool("leak", "return function(args) leaked = (leaked or 0) + 1 return { n = leaked } end")]})
        got = self.lib.evaluate({"tool": "probe"})["result"]
        self.assertEqual(got, {k: True for k in got})
        self.assertEqual(len(got), 11)
        # Fresh globals every run.
        for _ in range(3):
            self.assertEqual(self.lib.evaluate({"tool": "leak"})["result"], {"n": 1})

    def test_script_errors(self):
        self.configure_ok({"tools": [
            lua_tool("boom", 'return function(args) error("kaboom") end'),
            lua_tool("nil_index", "return function(args) return args.missing.field end"),
            lua_tool("not_a_function", "return 42"),
            lua_tool("denies", 'return function(args) deny("no") return 1 end'),
        ]})
        self.assertEnvelope('{"tool":"boom"}',
                            '{"status":"error","error":"tool_failed","message":"lua: tool boom:1: kaboom"}')
        env = self.lib.evaluate({"tool": "nil_index"})
        self.assertEqual(env["error"], "tool_failed")
        self.assertTrue(env["message"].startswith("lua: tool nil_index:1: "), env)
        self.assertEnvelope('{"tool":"not_a_function"}',
                            '{"status":"error","error":"tool_failed","message":"lua: tool not_a_function: a Lua tool '
                            'must return a function, got number"}')
        self.assertEnvelope('{"tool":"denies"}',
                            '{"status":"error","error":"tool_failed","message":"deny() acts only in on_tool_call '
                            'rules, not in a tool"}')

    def test_timeout_then_recovery(self):
        self.configure_ok({"tools": [
            lua_tool("spin", "return function(args) while true do end end", limits={"timeout_ms": 100}),
            lua_tool("swallow", "return function(args) pcall(function() while true do end end) return 1 end",
                     limits={"timeout_ms": 100}),
            lua_tool("quick", "return function(args) return { ok = true } end"),
        ]})
        t0 = time.monotonic()
        self.assertEnvelope('{"tool":"spin"}',
                            '{"status":"error","error":"timeout","message":"tool \\"spin\\" ran past its deadline"}')
        self.assertLess(time.monotonic() - t0, 2.0)
        self.assertEqual(self.lib.evaluate({"tool": "swallow"})["error"], "timeout")
        # Several at once, from threads: each gets its timeout; the host carries on.
        envs = []
        threads = [threading.Thread(target=lambda: envs.append(self.lib.evaluate({"tool": "spin"})))
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual([e["error"] for e in envs], ["timeout"] * 4)
        self.assertEqual(self.lib.evaluate({"tool": "quick"})["result"], {"ok": True})

    def test_config_errors_keep_previous_configuration(self):
        before = self.configure_ok(WORD_COUNT)
        bad = [
            ({"tools": [lua_tool("broken", "return function( end")]},
             "clara_configure: 1:11: tools[0] (broken): lua line 1: syntax error near 'end'"),
            ({"tools": [{"name": "neither"}]}, "clara_configure: 1:11: tools[0]: " + ONE_OF),
            ({"tools": [{"name": "both", "lua": "return function() end", "lua_file": "x.lua"}]},
             "clara_configure: 1:11: tools[0]: " + ONE_OF),
            ({"tools": [lua_tool("echo", "return function() return 1 end")]},
             'clara_configure: 1:11: tools[0] (echo): "echo" is a built-in tool'),
            ({"tools": [lua_tool("twice", "return function() end"), lua_tool("twice", "return function() end")]},
             'tool "twice" is declared twice'),
            ({"tools": [lua_tool("bad name!", "return function() end")]}, "tools[0]"),
            ({"default_evaluator": "get_time", "tools": [lua_tool("x", "return (")]}, "tools[0] (x)"),
        ]
        for config, message in bad:
            with self.subTest(config=config):
                env = self.lib.configure(config)
                self.assertEqual(env["status"], "error", env)
                self.assertEqual(env["error"], "invalid_request")
                self.assertIn(message, env["message"])
                self.assertEqual(self.current(), before)
        self.assertEnvelope('{"tool":"word_count","arguments":{"text":"still here"}}',
                            '{"status":"success","tool":"word_count","result":{"words":2}}')
        self.assertEnvelope('{"q":1}', '{"status":"success","tool":"echo","result":{"q":1}}')

    def test_lua_tool_survives_nothing_but_configuration(self):
        # Lua tools belong to the configuration: reset drops them, while
        # clara_configure calls that do not touch [[tools]] keep them.
        self.configure_ok(WORD_COUNT)
        self.configure_ok({"default_evaluator": "word_count"})
        self.assertEqual(self.lib.evaluate({"text": "simple form"}),
                         {"status": "success", "tool": "word_count", "result": {"words": 2}})
        self.lib.reset()
        self.assertEqual(self.lib.evaluate({"tool": "word_count", "arguments": {"text": "x"}})["error"],
                         "unknown_tool")

    def test_returns_string(self):
        # A Lua tool declared with "returns": "string" answers its string as
        # the result text, as C and Python tools do (it was JSON-encoded a
        # second time before the fix).
        self.configure_ok({"tools": [lua_tool("shout", "return function(a) return string.upper(a.text) end",
                                              returns="string")]})
        self.assertEnvelope('{"tool":"shout","arguments":{"text":"hi"}}',
                            '{"status":"success","tool":"shout","result":"HI"}')


LOCK_SENSOR = """
[rule]
id = "maintenance"
trigger = "on_tool_call"

[condition]
lua = '''if ctx.tool.name == "sensor" then deny("maintenance") return true end return false'''

[action]
type = "log"
message = "sensor call refused"
"""


class TestLuaRules(ClaraTestCase):

    def load(self, toml, name="t.toml"):
        env = self.lib.evaluate({"tool": "rules_load", "arguments": {"name": name, "toml": toml}})
        self.assertEqual(env["status"], "success", env)
        return env["result"]["rules"]

    def register_sensor(self):
        runs = []

        def sensor(args):
            runs.append(args.get("id"))
            return {"id": args.get("id"), "celsius": 21}

        self.lib.register_tool({"name": "sensor", "input_schema": {
            "type": "object", "properties": {"id": {"type": "integer"}}}}, sensor)
        return runs  # tearDown's reset drops the tool

    def test_lua_condition_denies_python_tool(self):
        runs = self.register_sensor()
        self.assertEqual(self.lib.evaluate({"tool": "sensor", "arguments": {"id": 1}})["result"],
                         {"id": 1, "celsius": 21})
        [rule] = self.load(LOCK_SENSOR)
        self.assertEqual(rule["condition"],
                         'if ctx.tool.name == "sensor" then deny("maintenance") return true end return false')
        self.assertEnvelope('{"tool":"sensor","arguments":{"id":2}}',
                            '{"status":"error","error":"denied","message":"tool \\"sensor\\" denied by rule '
                            '\\"maintenance\\": maintenance"}')
        # Before validation too: the verdict comes first.
        self.assertEqual(self.lib.evaluate({"tool": "sensor", "arguments": {"id": "two"}})["error"], "denied")
        self.assertEqual(runs, [1])
        self.assertEqual(self.lib.evaluate({"tool": "echo", "arguments": {"id": 2}})["result"], {"id": 2})

    def test_script_condition_from_file(self):
        runs = self.register_sensor()
        with tempfile.TemporaryDirectory() as d:
            os.mkdir(os.path.join(d, "scripts"))
            with open(os.path.join(d, "scripts", "odd.lua"), "w") as f:
                f.write("local id = ctx.tool.arguments.id\n"
                        "if ctx.tool.name == 'sensor' and id % 2 == 1 then\n"
                        "  deny('odd sensor ' .. id .. ' is off')\n"
                        "  return true\n"
                        "end\n"
                        "return false\n")
            self.assertEqual(self.lib.configure({"project_root": d})["status"], "success")
            self.load('[rule]\nid = "odd"\ntrigger = "on_tool_call"\n[condition]\nscript = "scripts/odd.lua"\n'
                      '[action]\ntype = "log"\nmessage = "x"\n')
            self.assertEqual(self.lib.evaluate({"tool": "sensor", "arguments": {"id": 3}}),
                             {"status": "error", "error": "denied",
                              "message": 'tool "sensor" denied by rule "odd": odd sensor 3 is off'})
            self.assertEqual(self.lib.evaluate({"tool": "sensor", "arguments": {"id": 4}})["status"], "success")
            self.assertEqual(runs, [4])
            # A missing script fails the load and keeps the rules in force.
            env = self.lib.evaluate({"tool": "rules_load", "arguments": {"name": "t.toml", "toml":
                                     '[rule]\nid = "gone"\ntrigger = "x"\n[condition]\nscript = "scripts/gone.lua"\n'
                                     '[action]\ntype = "log"\nmessage = "x"\n'}})
            self.assertEqual(env["error"], "invalid_args")
            self.assertIn("gone.lua: no such file or directory", env["message"])
            self.assertEqual([r["id"] for r in self.lib.evaluate({"tool": "rules_list"})["result"]["rules"]],
                             ["odd"])

    def test_lua_action_denies(self):
        runs = self.register_sensor()
        self.load('[rule]\nid = "gate"\ntrigger = "on_tool_call"\n[action]\ntype = "lua"\n'
                  'lua = """\nif ctx.tool.name == "sensor" and ctx.tool.arguments.id == 13 then\n'
                  '  deny("unlucky")\nend\n"""\n')
        self.assertEqual(self.lib.evaluate({"tool": "sensor", "arguments": {"id": 13}})["message"],
                         'tool "sensor" denied by rule "gate": unlucky')
        self.assertEqual(self.lib.evaluate({"tool": "sensor", "arguments": {"id": 12}})["status"], "success")
        self.assertEqual(runs, [12])

    def test_lua_action_state_notify_emit(self):
        self.load("""
[[rules]]
id = "tally"
trigger = "order.placed"
[rules.condition]
lua = "return ctx.order.total >= 100"
[[rules.actions]]
type = "lua"
lua = '''
local n = (state.get("big_orders") or 0) + 1
state.set("big_orders", n)
notify("big order " .. ctx.order.id .. " (" .. n .. " so far)", "high")
if n == 2 then emit("orders.milestone", { count = n }) end
'''

[[rules]]
id = "milestone"
trigger = "orders.milestone"
[rules.action]
type = "notify_self"
message = "milestone: {{ context.count }} big orders"
""")
        first = self.lib.emit("order.placed", {"order": {"id": "A", "total": 150}}, session="shop")
        self.assertEqual(first["result"]["notices"],
                         [{"rule": "tally", "message": "big order A (1 so far)", "priority": "high",
                           "event": "order.placed"}])
        self.assertEqual(self.lib.emit("order.placed", {"order": {"id": "B", "total": 5}}, session="shop")
                         ["result"]["fired"], [])
        second = self.lib.emit("order.placed", {"order": {"id": "C", "total": 300}}, session="shop")
        self.assertEqual([n["message"] for n in second["result"]["notices"]],
                         ["big order C (2 so far)", "milestone: 2 big orders"])
        self.assertEqual(self.lib.evaluate({"tool": "state_get", "session": "shop",
                                            "arguments": {"key": "big_orders"}})["result"]["value"], 2)

    def test_lua_condition_errors_are_traced_not_fatal(self):
        self.load('[rule]\nid = "slow"\ntrigger = "x.y"\n[condition]\nlua = "while true do end"\n'
                  '[action]\ntype = "notify_self"\nmessage = "never"\n')
        t0 = time.monotonic()
        env = self.lib.emit("x.y", trace=True)
        self.assertLess(time.monotonic() - t0, 2.0)
        [entry] = env["result"]["trace"]
        self.assertIs(entry["matched"], False)
        self.assertIn("deadline", entry["error"])
        self.assertEqual(env["result"]["notices"], [])
        # A syntax error is refused at load, with file and line.
        env = self.lib.evaluate({"tool": "rules_load", "arguments": {"name": "bad.toml", "toml":
                                 '[rule]\nid = "bad"\ntrigger = "x.y"\n[condition]\nlua = "return ("\n'
                                 '[action]\ntype = "log"\nmessage = "x"\n'}})
        self.assertEqual(env["error"], "invalid_args")
        self.assertEqual((env["details"][0]["file"], env["details"][0]["line"]), ("bad.toml", 5))


if __name__ == "__main__":
    unittest.main()
