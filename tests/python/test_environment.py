"""What the library reads from the environment when it is loaded:
CLARA_CONFIG and CLARA_LOG. Each case runs in a fresh interpreter, since
the variables are read once per process."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

from clara_testcase import child_env

CHILD = r"""
import clara
print(clara.evaluate({})["tool"])
clara.configure({"default_evaluator": "echo"})
print(clara.reset()["result"]["config"]["default_evaluator"])
"""


def run_child(**env):
    full = child_env(**env)
    p = subprocess.run([sys.executable, "-c", CHILD], env=full, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout.split(), p.stderr


class TestEnvironment(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_config_file_is_the_base_that_reset_returns_to(self):
        path = self.write("clara.toml", 'default_evaluator = "get_time"\n')
        rc, out, err = run_child(CLARA_CONFIG=path, CLARA_LOG="info")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, ["get_time", "get_time"])
        self.assertIn("clara info: configuration loaded from " + path, err)

    def test_json_config_file(self):
        path = self.write("clara.json", '{"default_evaluator": "get_time"}')
        rc, out, err = run_child(CLARA_CONFIG=path)
        self.assertEqual((rc, out, err), (0, ["get_time", "get_time"], ""))

    def test_bad_config_file_is_reported_and_ignored_with_on_error_defaults(self):
        path = self.write("bad.toml", "default_evaluator = 5\n")
        rc, out, err = run_child(CLARA_CONFIG=path, CLARA_CONFIG_ON_ERROR="defaults")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, ["echo", "echo"])
        self.assertIn("clara error: CLARA_CONFIG ignored (CLARA_CONFIG_ON_ERROR=defaults): %s:1:1: default_evaluator must be a string" % path, err)

    def test_missing_config_file_with_on_error_defaults(self):
        rc, out, err = run_child(CLARA_CONFIG=os.path.join(self.dir.name, "nope.toml"), CLARA_CONFIG_ON_ERROR="defaults")
        self.assertEqual(out, ["echo", "echo"])
        self.assertIn("CLARA_CONFIG ignored (CLARA_CONFIG_ON_ERROR=defaults): reading", err)

    def test_broken_config_file_refuses_every_call(self):
        """Issue 26 §2: with CLARA_CONFIG naming a file whose policy denies
        echo, a typo in one of its rule files made the library log
        "CLARA_CONFIG ignored" and serve echo. Now every call raises
        InvalidConfig (the rule file's problem in .details), clara.reset()
        too while the file stays broken, until a valid configure()."""
        os.mkdir(os.path.join(self.dir.name, "rules"))
        config = self.write("clara.toml", '[policy]\ndeny = ["echo"]\n[rules]\npaths = ["rules/*.toml"]\n')
        rule = self.write("rules/typo.toml", '[rule]\nid = "quiet"\ntrigger = "t"\n[acton]\ntype = "log"\n')
        fixed = '[rule]\nid = "quiet"\ntrigger = "t"\n[action]\ntype = "log"\nmessage = "m"\n'
        child = textwrap.dedent(r"""
            import json, sys, clara
            def outcome(thunk):
                try:
                    return ["ok", thunk()]
                except clara.ClaraError as e:
                    return [e.code, e.details]
            print(json.dumps(outcome(lambda: clara.call("echo", x=1))))
            print(json.dumps(outcome(lambda: clara.call("get_time"))))
            print(json.dumps(clara.reset().get("error")))
            print(json.dumps(outcome(lambda: clara.call("echo", x=1))))
            with open(sys.argv[1], "w") as f:
                f.write(sys.argv[2])
            print(json.dumps(clara.reset()["status"]))
            print(json.dumps(outcome(lambda: clara.call("echo", x=1))))
            """)
        p = subprocess.run([sys.executable, "-c", child, rule, fixed], env=child_env(CLARA_CONFIG=config),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [json.loads(line) for line in p.stdout.splitlines()]
        problem = [{"file": rule, "line": 4, "col": 2, "message": 'unknown key "acton"'}]
        self.assertEqual(lines[0], ["invalid_config", problem])
        self.assertEqual(lines[1], ["invalid_config", problem])
        self.assertEqual(lines[2], "invalid_config")
        self.assertEqual(lines[3], ["invalid_config", problem])
        self.assertEqual(lines[4], "success")
        self.assertEqual(lines[5][0], "denied")  # the file's policy, once it loads
        self.assertIn("every tool call is refused (invalid_config)", p.stderr)
        # A valid configure() ends the refusal (applied to the defaults).
        p = subprocess.run([sys.executable, "-c", "import clara\nclara.configure({'limits': {'timeout_ms': 2000}})\n"
                            "print(clara.call('echo', x=1))"], env=child_env(CLARA_CONFIG=self.write("bad.toml", "x = 1\n")),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual((p.returncode, p.stdout), (0, "{'x': 1}\n"), p.stderr)

    def test_log_off_silences_even_errors(self):
        rc, out, err = run_child(CLARA_CONFIG=os.path.join(self.dir.name, "nope.toml"), CLARA_LOG="off",
                                 CLARA_CONFIG_ON_ERROR="defaults")
        self.assertEqual((rc, out, err), (0, ["echo", "echo"], ""))

    def test_log_debug_shows_calls(self):
        rc, out, err = run_child(CLARA_LOG="debug")
        self.assertEqual(rc, 0, err)
        self.assertIn("clara info: configuration changed", err)

    def test_unknown_log_level_is_reported(self):
        rc, out, err = run_child(CLARA_LOG="chatty")
        self.assertEqual(out, ["echo", "echo"])
        self.assertIn('CLARA_LOG="chatty" is not one of debug, info, warn, error, off', err)


if __name__ == "__main__":
    unittest.main()
