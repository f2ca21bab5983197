"""Rules from Python: clara_emit end to end, notices, a deny rule blocking a
tool written in Python, rule state, and rule tests."""
import json
import os
import tempfile
import unittest

from clara_testcase import ClaraTestCase

HOT = """
[rule]
id = "hot"
description = "A room is too warm"
trigger = "sensor.reading"
priority = 10

[condition]
expression = "context.celsius > thresholds.too_warm"

[action]
type = "notify_self"
message = "{{ context.room | upper }}: {{ context.celsius | round }} C"
priority = "high"
"""

LOCK = """
[rule]
id = "locked"
trigger = "on_tool_call"

[condition]
expression = "context.tool.name == 'open_valve' and context.tool.arguments?.valve == 7"

[action]
type = "deny"
reason = "valve {{ context.tool.arguments.valve }} is locked"
"""


class TestEmit(ClaraTestCase):
    builtin_rules = True

    def load(self, toml, name="t.toml"):
        env = self.lib.evaluate({"tool": "rules_load", "arguments": {"name": name, "toml": toml}})
        self.assertEqual(env["status"], "success", env)
        return env["result"]["rules"]

    def test_emit_fires_matching_rules(self):
        self.assertEqual(self.lib.configure({"rules": {"thresholds": {"too_warm": 30}}})["status"], "success")
        rules = self.load(HOT)
        self.assertIn({"id": "hot", "description": "A room is too warm", "trigger": "sensor.reading",
                       "priority": 10, "stop": False, "condition": "context.celsius > thresholds.too_warm",
                       "file": "t.toml", "line": 3}, rules)
        env = self.lib.emit("sensor.reading", {"room": "lab", "celsius": 31.6}, session="s1")
        self.assertEqual(env, {"status": "success", "result": {
            "fired": [{"rule": "hot", "actions": [{"type": "notify_self", "message": "LAB: 32 C",
                                                   "priority": "high"}]}],
            "notices": [{"rule": "hot", "message": "LAB: 32 C", "priority": "high", "event": "sensor.reading"}],
            "denied": None}})
        self.assertEqual(self.lib.emit("sensor.reading", {"room": "lab", "celsius": 20})["result"]["fired"], [])
        # The notice waits in session s1's queue, not elsewhere.
        drained = self.lib.evaluate({"tool": "notifications_drain", "session": "s1"})["result"]
        self.assertEqual([n["message"] for n in drained["notices"]], ["LAB: 32 C"])
        self.assertEqual(self.lib.evaluate({"tool": "notifications_drain"})["result"]["notices"], [])

    def test_trace_explains_each_candidate(self):
        self.assertEqual(self.lib.configure({"rules": {"thresholds": {"too_warm": 30}}})["status"], "success")
        self.load(HOT)
        env = self.lib.emit("sensor.reading", {"room": "lab", "celsius": 3}, trace=True)
        [entry] = env["result"]["trace"]
        self.assertEqual(entry["rule"], "hot")
        self.assertIs(entry["matched"], False)
        self.assertIs(entry["value"], False)
        self.assertGreaterEqual(entry["duration_us"], 0)
        # A condition that cannot be evaluated says why.
        env = self.lib.emit("sensor.reading", {"room": "lab", "celsius": "warm"}, trace=True)
        self.assertIn("error", env["result"]["trace"][0])

    def test_emit_errors(self):
        self.assertEqual(json.loads(self.lib.emit_raw(None))["error"], "invalid_json")
        self.assertEqual(self.lib.emit({"event": "Bad"})["error"], "invalid_request")
        self.assertEqual(self.lib.emit({"event": "on_tool_call"})["error"], "invalid_request")
        self.assertEqual(self.lib.emit({"event": "x", "payload": [1]})["error"], "invalid_request")
        self.assertEqual(self.lib.emit({})["error"], "invalid_request")

    def test_failed_load_keeps_rules(self):
        self.load(HOT)
        env = self.lib.evaluate({"tool": "rules_load", "arguments": {
            "name": "t.toml", "toml": "[rule]\nid = \"broken\"\ntrigger = \"x\"\n[condition]\nexpression = \"1 +\"\n"}})
        self.assertEqual(env["error"], "invalid_args")
        self.assertEqual((env["details"][0]["file"], env["details"][0]["line"]), ("t.toml", 5))
        ids = [r["id"] for r in self.lib.evaluate({"tool": "rules_list"})["result"]["rules"]]
        self.assertIn("hot", ids)

    def test_deny_blocks_python_tool(self):
        runs = []

        def open_valve(args):
            runs.append(args["valve"])
            return {"opened": args["valve"]}

        self.lib.register_tool({"name": "open_valve", "input_schema": {
            "type": "object", "properties": {"valve": {"type": "integer"}}, "required": ["valve"]}}, open_valve)
        try:
            self.load(LOCK)
            self.assertEqual(self.lib.evaluate({"tool": "open_valve", "arguments": {"valve": 3}})["result"],
                             {"opened": 3})
            env = self.lib.evaluate({"tool": "open_valve", "arguments": {"valve": 7}})
            self.assertEqual(env, {"status": "error", "error": "denied",
                                   "message": 'tool "open_valve" denied by rule "locked": valve 7 is locked'})
            self.assertEqual(runs, [3])
        finally:
            self.lib.unregister_tool("open_valve")

    def test_repeated_failure_notice_in_error_envelope(self):
        def flaky(args):
            raise RuntimeError("no signal")

        self.lib.register_tool({"name": "flaky"}, flaky)
        try:
            envs = [self.lib.evaluate({"tool": "flaky", "session": "f"}) for _ in range(4)]
        finally:
            self.lib.unregister_tool("flaky")
        self.assertEqual([e["error"] for e in envs], ["tool_failed"] * 4)
        self.assertEqual(["notices" in e for e in envs], [False, False, True, False])
        self.assertEqual(envs[2]["notices"][0]["rule"], "repeated_failure")
        self.assertIn("Tool flaky failed 3 times in a row", envs[2]["notices"][0]["message"])

    def test_state_from_rules_and_tools(self):
        self.load("""
[rule]
id = "count_orders"
trigger = "order.placed"
[action]
type = "set_state"
key = "orders"
value = "{{ (context.state.orders ?? 0) + 1 }}"
""")
        for _ in range(3):
            self.lib.emit("order.placed", session="shop")
        got = self.lib.evaluate({"tool": "state_get", "session": "shop", "arguments": {"key": "orders"}})
        self.assertEqual(got["result"], {"key": "orders", "found": True, "value": 3})
        self.lib.evaluate({"tool": "state_set", "session": "shop", "arguments": {"key": "orders", "value": 10}})
        self.lib.emit("order.placed", session="shop")
        got = self.lib.evaluate({"tool": "state_get", "session": "shop", "arguments": {"key": "orders"}})
        self.assertEqual(got["result"]["value"], 11)

    def test_state_survives_in_state_dir(self):
        with tempfile.TemporaryDirectory() as d:
            self.lib.configure({"state_dir": d})
            self.lib.evaluate({"tool": "state_set", "session": "p", "arguments": {"key": "k", "value": [1, "two"]}})
            self.assertTrue(os.path.exists(os.path.join(d, "state.db")))
            self.lib.configure({"state_dir": ""})
            self.assertFalse(self.lib.evaluate({"tool": "state_get", "session": "p",
                                                "arguments": {"key": "k"}})["result"]["found"])
            self.lib.configure({"state_dir": d})
            self.assertEqual(self.lib.evaluate({"tool": "state_get", "session": "p",
                                                "arguments": {"key": "k"}})["result"]["value"], [1, "two"])
            self.lib.configure({"state_dir": ""})

    def test_rules_test_tool(self):
        self.assertEqual(self.lib.configure({"rules": {"thresholds": {"too_warm": 30}}})["status"], "success")
        self.load(HOT)
        tests = """
[[cases]]
name = "warm"
event = "sensor.reading"
payload = { room = "hall", celsius = 35 }
fired = ["hot"]
notices = ["HALL: 35 C"]

[[cases]]
name = "wrong on purpose"
event = "sensor.reading"
payload = { room = "hall", celsius = 10 }
fired = ["hot"]
"""
        rep = self.lib.evaluate({"tool": "rules_test", "arguments": {"toml": tests}})["result"]
        self.assertEqual((rep["passed"], rep["failed"]), (1, 1))
        self.assertEqual(rep["cases"][1]["problems"], ['fired: got [], want ["hot"]'])

        # run and coverage, as `clara rules test --run --coverage` (the tool
        # refused them as unknown keys before).
        rep = self.lib.evaluate({"tool": "rules_test", "arguments": {"toml": tests, "run": "^warm$", "coverage": True}})["result"]
        self.assertEqual([c["name"] for c in rep["cases"]], ["warm"])
        hot = [r for r in rep["coverage"]["rules"] if r["id"] == "hot"]
        self.assertEqual((hot[0]["matched"], hot[0]["fired"]), (1, 1))
        self.assertEqual([a["applied"] for a in hot[0]["actions"]], [1] * len(hot[0]["actions"]))
        self.assertNotIn("coverage", self.lib.evaluate({"tool": "rules_test", "arguments": {"toml": tests}})["result"])
        bad = self.lib.evaluate({"tool": "rules_test", "arguments": {"toml": tests, "run": "("}})
        self.assertEqual(bad["error"], "invalid_args")
        self.assertIn("rules_test: run:", bad["message"])


if __name__ == "__main__":
    unittest.main()
