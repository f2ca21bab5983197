"""What the library reads from the environment when it is loaded:
CLARA_CONFIG and CLARA_LOG. Each case runs in a fresh interpreter, since
the variables are read once per process."""

import os
import subprocess
import sys
import tempfile
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

    def test_bad_config_file_is_reported_and_ignored(self):
        path = self.write("bad.toml", "default_evaluator = 5\n")
        rc, out, err = run_child(CLARA_CONFIG=path)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, ["echo", "echo"])
        self.assertIn("clara error: CLARA_CONFIG ignored: %s:1:1: default_evaluator must be a string" % path, err)

    def test_missing_config_file(self):
        rc, out, err = run_child(CLARA_CONFIG=os.path.join(self.dir.name, "nope.toml"))
        self.assertEqual(out, ["echo", "echo"])
        self.assertIn("CLARA_CONFIG ignored: reading", err)

    def test_log_off_silences_even_errors(self):
        rc, out, err = run_child(CLARA_CONFIG=os.path.join(self.dir.name, "nope.toml"), CLARA_LOG="off")
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
