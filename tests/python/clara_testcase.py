"""Shared set-up for the Python package's tests (not a test module itself).

Every test runs against the real library, through the clara package that
`import clara` finds: `make test-python` installs the wheel into a fresh
venv and runs these tests with the venv's interpreter, so that is the
installed package and its bundled library (CLARA_EXPECT_INSTALLED=1 makes
test_package check it). Run by hand from a checkout, PYTHONPATH=python and
CLARA_LIBRARY=lib/libclara.so work as well.

Clara's state is process-wide, so each test starts and ends with the
default configuration and no log handler.
"""

import os
import re
import unittest

import clara

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
HEADER = os.path.join(REPO, "include", "clara.h")
# The directory of the clara package under test, and the one it sits in.
PACKAGE = os.path.dirname(os.path.abspath(clara.__file__))
PACKAGE_PARENT = os.path.dirname(PACKAGE)
INSTALLED = os.environ.get("CLARA_EXPECT_INSTALLED") == "1"

# One instance for the whole run; the library is loaded once per process.
LIB = clara.Clara()


def header_version():
    """CLARA_VERSION of include/clara.h (the C side's version)."""
    with open(HEADER, encoding="utf-8") as f:
        return re.search(r'^#define CLARA_VERSION "([^"]+)"', f.read(), re.M).group(1)


def child_env(**extra):
    """The environment for a child interpreter that must import the same
    clara package and library as this process."""
    env = {k: v for k, v in os.environ.items() if k not in ("CLARA_CONFIG", "CLARA_LOG")}
    env["PYTHONPATH"] = PACKAGE_PARENT
    env["CLARA_LIBRARY"] = LIB.path
    env.update(extra)
    return env


# The default configuration, as clara_reset() reports it (without
# CLARA_CONFIG, which the Makefile unsets).
DEFAULT_CONFIG = {
    "async": {"max_pending": 10000, "max_running": 1000},
    "audit": {"compress": False, "decision_ids": False, "max_age_days": 0, "max_backups": 0,
              "max_size_mb": 0, "path": ""},
    "callback_tools": {"models": False, "panel_bytes": 2048, "run_model_scripts": False},
    "callbacks": [],
    "default_evaluator": "echo",
    "doc_search": {"max_file_bytes": 1048576, "max_files": 10000, "patterns": ["**/*.md"], "watch": True},
    "evaluator": {"timeout_ms": 30000, "url": ""},
    "limits": {"max_calls_per_chat": 0, "max_calls_per_session": 0,
               "max_depth": 512, "max_open_approvals": 64, "max_open_questions": 64, "max_output_bytes": 65536,
               "max_overdue_calls": 64,
               "max_request_bytes": 16777216, "max_tool_calls": 20, "max_turns": 10, "timeout_ms": 1000},
    "llm": {"api_key_env": "", "app_title": "Clara", "app_url": "", "base_url": "", "context_window": 0, "embedding_model": "",
            "max_history_messages": 100,
            "max_response_bytes": 4194304, "max_retries": 2, "max_tokens": 0, "model": "",
            "provider": "", "timeout_ms": 60000},
    "kv": {"max_bytes": 16777216, "max_keys": 10000, "max_total_bytes": 67108864, "max_total_keys": 100000},
    "log": {"format": "text"},
    "mcp": {"allow_remote": False, "list_ttl_ms": 5000, "max_calls": 64, "max_sessions": 100, "max_waiting_calls": 256,
            "session_idle_timeout_ms": 1800000, "task_after_ms": 2000, "task_ttl_ms": 3600000, "token_env": "",
            "wait_timeout_ms": 600000},
    "mcp_servers": [],
    "network": {"allow_hosts": []},
    "notices": {"dedupe_window_ms": 60000},
    "plugins": {"paths": [".clara/plugins/*"]},
    "policy": {"admin_in_nested_calls": False, "allow": [], "approval_timeout_ms": 120000, "deny": []},
    "project_root": ".",
    "prompts": [],
    "resources": [],
    "rules": {"builtin": True, "max_emissions": 1000, "mode": "enforce", "paths": [".clara/rules/*.toml"],
              "redact_secrets": False,
              "thresholds": {"iteration_budget": 25, "large_result_bytes": 32768,
                             "repeated_failures": 3, "token_budget": 0.8},
              "watch": True, "watch_admin_tools": False},
    "state_dir": ".clara",
    "store": {"backend": "sqlite", "conversation_retention_hours": 720, "pool_size": 8, "statement_timeout_ms": 2000,
              "url_env": "CLARA_DATABASE_URL",
              "on_unavailable": {"approvals": "fail", "conversations": "fail", "limits": "fail", "notices": "local",
                                 "state": "fail"}},
    "telemetry": {"content": False, "enabled": False, "endpoint": "", "logs": True,
                  "metric_interval_ms": 60000, "metrics": True, "service_name": "", "traces": True},
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
