"""clara_configure and clara_reset (SPEC §11)."""

import copy
import os
import unittest

from clara_testcase import DEFAULT_CONFIG, ClaraTestCase


def ok(config):
    return {"status": "success", "result": {"config": config}}


class TestConfigure(ClaraTestCase):

    def current(self):
        """The configuration in force (an empty change reports it)."""
        env = self.lib.configure({})
        self.assertEqual(env["status"], "success", env)
        return env["result"]["config"]

    @unittest.skipIf(os.environ.get("CLARA_CONFIG"), "CLARA_CONFIG changes the defaults")
    def test_reset_reports_defaults(self):
        self.assertEqual(self.lib.reset(), ok(DEFAULT_CONFIG))
        self.assertEqual(self.current(), DEFAULT_CONFIG)

    def test_dict(self):
        want = copy.deepcopy(self.current())
        want["default_evaluator"] = "get_time"
        self.assertEqual(self.lib.configure({"default_evaluator": "get_time"}), ok(want))
        # The simple form now goes to get_time.
        env = self.lib.evaluate({})
        self.assertEqual(env["tool"], "get_time")
        self.assertEqual(env["result"]["timezone"], "UTC")

    def test_toml(self):
        want = copy.deepcopy(self.current())
        want["default_evaluator"] = "get_time"
        want["limits"]["max_depth"] = 64
        env = self.lib.configure('default_evaluator = "get_time"\n\n[limits]\nmax_depth = 64\n')
        self.assertEqual(env, ok(want))
        self.assertEnvelope('{"tool":"echo","arguments":{"a":%s}}' % ("[" * 64 + "]" * 64),
                            '{"status":"error","error":"invalid_request","message":'
                            '"request nests deeper than limits.max_depth (64) at byte 94"}')

    def test_json_text(self):
        env = self.lib.configure('  {"limits": {"max_request_bytes": 100}}')
        self.assertEqual(env["result"]["config"]["limits"]["max_request_bytes"], 100)
        self.assertEnvelope('{"q":"%s"}' % ("x" * 93),
                            '{"status":"error","error":"invalid_request","message":'
                            '"request is 101 bytes, more than limits.max_request_bytes (100)"}')
        self.assertEqual(self.lib.evaluate('{"q":"%s"}' % ("x" * 92))["status"], "success")

    def test_table_merges_key_by_key(self):
        before = self.current()
        after = self.lib.configure({"limits": {"max_depth": 100}})["result"]["config"]
        self.assertEqual(after["limits"]["max_depth"], 100)
        self.assertEqual(after["limits"]["max_request_bytes"], before["limits"]["max_request_bytes"])
        self.assertEqual(after["default_evaluator"], before["default_evaluator"])

    def test_changes_accumulate(self):
        self.lib.configure({"default_evaluator": "get_time"})
        self.lib.configure('[limits]\nmax_depth = 10\n')
        cfg = self.current()
        self.assertEqual(cfg["default_evaluator"], "get_time")
        self.assertEqual(cfg["limits"]["max_depth"], 10)

    def assertProblems(self, env, problems):
        """env refuses a configuration with these problems, each placed at a
        line and column of the text, in the order of the text."""
        self.assertEqual((env["status"], env["error"]), ("error", "invalid_request"))
        self.assertEqual(sorted(d["message"] for d in env["details"]), sorted(problems))
        for d in env["details"]:
            self.assertEqual(sorted(d), ["col", "line", "message"])
        placed = ["%d:%d: %s" % (d["line"], d["col"], d["message"]) for d in env["details"]]
        self.assertEqual(env["message"], "clara_configure: %d problems: %s" % (len(problems), "; ".join(placed)))

    def test_invalid_keys(self):
        before = self.current()
        env = self.lib.configure({"bogus": 1, "default_evaluator": "get_time",
                                  "limits": {"max_depth": "x", "other": 2}})
        problems = [
            "limits.max_depth must be an integer from 1 to 1048576",
            'unknown key "bogus"',
            'unknown key "limits.other"',
        ]
        self.assertProblems(env, problems)
        # Nothing was applied, not even the valid default_evaluator.
        self.assertEqual(self.current(), before)
        self.assertEqual(self.lib.evaluate({"question": "hi"})["tool"], "echo")

    def test_single_problem(self):
        env = self.lib.configure({"default_evaluator": "bad name!"})
        problem = "default_evaluator: \"bad name!\" is not a tool name (1 to 64 letters, digits, '_' or '-')"
        self.assertEqual(env, {"status": "error", "error": "invalid_request",
                               "message": "clara_configure: 1:2: " + problem,
                               "details": [{"line": 1, "col": 2, "message": problem}]})

    def test_ill_typed_values(self):
        cases = [
            ({"limits": 5}, "limits must be a table"),
            ({"limits": {"max_depth": 0}}, "limits.max_depth must be an integer from 1 to 1048576"),
            ({"limits": {"max_request_bytes": 1.5}},
             "limits.max_request_bytes must be an integer from 1 to 1073741824"),
            ({"default_evaluator": 3}, "default_evaluator must be a string"),
        ]
        before = self.current()
        for cfg, problem in cases:
            with self.subTest(config=cfg):
                env = self.lib.configure(cfg)
                self.assertEqual(env["status"], "error")
                self.assertEqual(env["error"], "invalid_request")
                self.assertEqual([d["message"] for d in env["details"]], [problem])
        self.assertEqual(self.current(), before)

    def test_toolbox_keys(self):
        want = copy.deepcopy(self.current())
        want["test_mode"] = True
        want["limits"]["timeout_ms"] = 250
        want["limits"]["max_output_bytes"] = 100
        want["policy"].update({"allow": ["echo", "get_time"], "deny": ["get_time"]})
        env = self.lib.configure('test_mode = true\n[limits]\ntimeout_ms = 250\nmax_output_bytes = 100\n'
                                 '[policy]\nallow = ["echo", "get_time"]\ndeny = ["get_time"]\n')
        self.assertEqual(env, ok(want))
        # An array given replaces the array.
        want["policy"]["allow"] = []
        self.assertEqual(self.lib.configure({"policy": {"allow": []}}), ok(want))
        self.assertEnvelope('{"tool":"get_time"}',
                            '{"status":"error","error":"denied","message":"tool \\"get_time\\" denied by '
                            'the policy of the configuration: its deny list names it"}')

    def test_toolbox_keys_ill_typed(self):
        before = self.current()
        env = self.lib.configure({"policy": {"deny": [1]}, "test_mode": 1,
                                  "limits": {"timeout_ms": -1, "max_output_bytes": 0},
                                  "audit": {"path": 5}})
        problems = [
            "audit.path must be a string",
            "limits.max_output_bytes must be an integer from 1 to 1073741824",
            "limits.timeout_ms must be an integer from 1 to 86400000",
            "policy.deny[0] must be a string",
            "test_mode must be true or false",
        ]
        self.assertProblems(env, problems)
        self.assertEqual(self.current(), before)

    def test_invalid_toml(self):
        env = self.lib.configure("this is = = not toml")
        self.assertEqual(env["error"], "invalid_request")
        self.assertEqual(env["details"], [{"line": 1, "col": 6, "message": "expected '=' after key"}])

    def test_invalid_json_text(self):
        env = self.lib.configure('{"a":')
        self.assertEqual(env["error"], "invalid_request")
        self.assertEqual([d["message"] for d in env["details"]], ["invalid JSON: unexpected end of input at byte 5"])

    def test_null_config(self):
        self.assertEqual(self.lib.configure(None), {
            "status": "error", "error": "invalid_request", "message": "clara_configure: NULL input"})

    def test_reset_restores_echo(self):
        self.lib.configure({"default_evaluator": "get_time", "limits": {"max_depth": 8}})
        self.assertEqual(self.lib.evaluate({})["tool"], "get_time")
        env = self.lib.reset()
        self.assertEqual(env["status"], "success")
        self.assertEqual(env["result"]["config"]["default_evaluator"], "echo")
        self.assertEqual(self.lib.evaluate({"question": "hi"}),
                         {"status": "success", "tool": "echo", "result": {"question": "hi"}})
        if not os.environ.get("CLARA_CONFIG"):
            self.assertEqual(env, ok(DEFAULT_CONFIG))


if __name__ == "__main__":
    unittest.main()
