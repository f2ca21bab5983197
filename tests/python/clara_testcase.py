"""Shared set-up for the Clara ctypes tests (not a test module itself).

Every test runs against the real library, found the way clara.py finds it
(CLARA_LIBRARY first). Clara's state is process-wide, so each test starts
and ends with the default configuration and no log handler.
"""

import os
import unittest

import clara

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
HEADER = os.path.join(REPO, "include", "clara.h")

# One instance for the whole run; the library is loaded once per process.
LIB = clara.Clara()

# The default configuration, as clara_reset() reports it (without
# CLARA_CONFIG, which the Makefile unsets).
DEFAULT_CONFIG = {
    "audit": {"path": ""},
    "default_evaluator": "echo",
    "limits": {"max_depth": 512, "max_output_bytes": 65536,
               "max_request_bytes": 16777216, "timeout_ms": 1000},
    "policy": {"allow": [], "deny": []},
    "project_root": ".",
    "rules": {"builtin": True, "paths": ["rules/*.toml"],
              "thresholds": {"iteration_budget": 25, "large_result_bytes": 32768,
                             "repeated_failures": 3, "token_budget": 0.8}},
    "state_dir": ".clara",
    "test_mode": False,
    "tools": [],
}


class ClaraTestCase(unittest.TestCase):
    """Resets configuration and log handler around every test."""

    lib = LIB
    # Most tests compare whole envelopes of calls that may fail again and
    # again; the built-in rules would add notices to them (repeated_failure).
    # Rule tests turn them on. State stays in memory: tests write no files.
    builtin_rules = False

    def setUp(self):
        self.lib.set_log_handler(None, clara.CLARA_LOG_OFF)
        self.assertEqual(self.lib.reset()["status"], "success")
        env = self.lib.configure({"rules": {"builtin": self.builtin_rules}, "state_dir": ""})
        self.assertEqual(env["status"], "success", env)

    def tearDown(self):
        self.lib.set_log_handler(None, clara.CLARA_LOG_OFF)
        self.lib.reset()

    def assertEnvelope(self, request, expected):
        """Send request (bytes/str verbatim) and compare the WHOLE envelope
        text."""
        self.assertEqual(self.lib.evaluate_raw(request), expected)
