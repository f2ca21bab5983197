"""File-change callbacks from Python (SPEC §9), each test in its own
temporary project root: a tool written in Python that reports
changed_files fires the session's callbacks (blocking ones enrich its
envelope, background ones report through notifications_drain and the
on_callback_* rule events), the callback tools, gitignore matching, the
scripts' environment, failures, timeouts, test mode and persistence."""

import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
import unittest

import clara
from clara_testcase import ClaraTestCase

CHECK = "\u2713"
CROSS = "\u2717"


class CallbackTestCase(ClaraTestCase):
    """A fresh project root with state_dir .clara, and the tool "edit"
    ({"files": [...]} -> {"changed_files": [...]}) that stands for any tool
    that writes files."""

    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(prefix="clara-callbacks-")
        self.configure({"project_root": self.root, "state_dir": ".clara"})
        self.edits = []

        def edit(args):
            self.edits.append(args["files"])
            return {"changed_files": args["files"]}

        self.lib.register_tool({"name": "edit", "reports_changed_files": True, "input_schema": {
            "type": "object", "properties": {"files": {"type": "array", "items": {"type": "string"}}},
            "required": ["files"]}}, edit)

    def tearDown(self):
        super().tearDown()  # reset: drops "edit"; background runs of these tests are over
        shutil.rmtree(self.root, ignore_errors=True)

    def configure(self, config):
        env = self.lib.configure(config)
        self.assertEqual(env["status"], "success", env)

    def call(self, tool, session=None, **arguments):
        request = {"tool": tool, "arguments": arguments}
        if session is not None:
            request["session"] = session
        return self.lib.evaluate(request)

    def ok(self, tool, session=None, **arguments):
        env = self.call(tool, session, **arguments)
        self.assertEqual(env["status"], "success", env)
        return env["result"]

    def create(self, name, script, pattern="*.rs", session=None, **fields):
        return self.ok("callback_upsert", session, action="create", name=name, pattern=pattern,
                       script_content=script, **fields)

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def drain_until(self, count, session=None, timeout=10.0):
        """Polls notifications_drain until count notices came (or timeout)."""
        got, deadline = [], time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            got += self.ok("notifications_drain", session)["notices"]
            if len(got) < count:
                time.sleep(0.05)
        return got


class TestBlocking(CallbackTestCase):

    def test_create_fire_from_python_tool(self):
        created = self.create("check", 'printf "%s\\n" "$CLARA_CHANGED_FILES" > "$CLARA_PROJECT_ROOT/ran.txt"\n'
                                       'echo "name=$CLARA_CALLBACK_NAME id=$CLARA_CALLBACK_ID"\n'
                                       'echo "cwd=$PWD"\n',
                              pattern=["*.rs", "!target/**"], blocking=True, timeout_secs=10,
                              success_message="Build passed")
        self.assertEqual(created, {
            "action": "created",
            "callback": {"id": "CB1", "name": "check", "description": "", "pattern": ["*.rs", "!target/**"],
                         "blocking": True, "timeout_secs": 10, "success_message": "Build passed", "cwd": "",
                         "one_at_a_time": False, "once_per_batch": False, "on_busy": "queue",
                         "pass_files": "env", "active": True},
            "script_path": self.path(".clara", "scripts", "check.sh")})
        mode = os.stat(created["script_path"]).st_mode
        self.assertEqual(stat.S_IMODE(mode), 0o755)
        with open(created["script_path"]) as f:
            self.assertTrue(f.read().startswith("#!/usr/bin/env bash\nset -euo pipefail\n"))

        env = self.call("edit", files=["src/main.rs", "target/debug/build.rs", "README.md"])
        self.assertEqual(self.edits, [["src/main.rs", "target/debug/build.rs", "README.md"]])
        self.assertEqual(env["result"], {"changed_files": ["src/main.rs", "target/debug/build.rs", "README.md"]})
        self.assertEqual(env["notices"], [{"callback": "check", "message": "Callback 'check' %s: Build passed" % CHECK,
                                           "priority": "normal", "event": "on_callback_complete"}])
        [run] = env["callbacks"]
        self.assertGreaterEqual(run.pop("duration_ms"), 0)
        self.assertEqual(run, {"id": "CB1", "name": "check", "ok": True, "exit_code": 0, "timed_out": False,
                               "output_tail": "name=check id=CB1\ncwd=%s" % self.root, "log": ""})
        # Files reach the script as absolute paths.
        with open(self.path("ran.txt")) as f:
            self.assertEqual(f.read(), self.path("src", "main.rs") + "\n")
        # The envelope's key order: result, notices, callbacks.
        text = self.lib.evaluate_raw('{"tool":"edit","arguments":{"files":["a.rs"]}}')
        self.assertTrue(text.startswith('{"status":"success","tool":"edit","result":{"changed_files":["a.rs"]},'
                                        '"notices":[{"callback":"check","message":"Callback \'check\' %s: Build '
                                        'passed","priority":"normal","event":"on_callback_complete"}],"callbacks":'
                                        '[{"id":"CB1","name":"check","ok":true,' % CHECK), text)

    def test_nothing_matches_nothing_added(self):
        self.create("check", "echo hi", blocking=True, timeout_secs=10)
        self.assertEnvelope('{"tool":"edit","arguments":{"files":["notes.txt","../outside.rs","/etc/x.rs"]}}',
                            '{"status":"success","tool":"edit","result":{"changed_files":["notes.txt",'
                            '"../outside.rs","/etc/x.rs"]}}')
        # Results without a proper changed_files fire nothing either.
        self.lib.register_tool({"name": "odd", "reports_changed_files": True}, lambda args: {"changed_files": "a.rs"})
        self.assertEnvelope('{"tool":"odd"}', '{"status":"success","tool":"odd","result":{"changed_files":"a.rs"}}')

    def test_failure_notice_and_log(self):
        self.create("check", "for i in 1 2 3 4 5; do echo \"line $i\"; done\necho oops >&2\nexit 2",
                    blocking=True, timeout_secs=10, success_message="Build passed")
        env = self.call("edit", files=["lib.rs"])
        [run] = env["callbacks"]
        self.assertEqual((run["ok"], run["exit_code"], run["timed_out"]), (False, 2, False))
        self.assertEqual(run["output_tail"], "line 4\nline 5\noops")
        log = run["log"]
        self.assertTrue(log.startswith(self.path(".clara", "logs", "check-")), log)
        with open(log) as f:
            self.assertEqual(f.read(), "".join("line %d\n" % i for i in range(1, 6)) + "oops\n")
        self.assertEqual(env["notices"], [{
            "callback": "check", "message": "Callback 'check' %s (exit 2): see %s\nline 4\nline 5\noops" % (CROSS, log),
            "priority": "high", "event": "on_callback_failure"}])
        # The tool itself succeeded.
        self.assertEqual(env["status"], "success")

    def test_timeout(self):
        self.create("slow", "echo started\nsleep 30", blocking=True, timeout_secs=1)
        t0 = time.monotonic()
        env = self.call("edit", files=["a.rs"])
        self.assertLess(time.monotonic() - t0, 8)
        [run] = env["callbacks"]
        self.assertEqual((run["ok"], run["timed_out"], run["output_tail"]), (False, True, "started"))
        self.assertGreaterEqual(run["duration_ms"], 900)
        self.assertTrue(env["notices"][0]["message"].startswith("Callback 'slow' %s (timed out after 1s): see "
                                                                % CROSS), env)

    def test_once_per_batch_and_environment(self):
        self.create("batch", 'echo "$CLARA_CHANGED_FILES_COUNT"\nwc -l < "$CLARA_CHANGED_FILES_LIST"',
                    pattern="*.txt", blocking=True, timeout_secs=10, once_per_batch=True)
        self.create("each", 'echo "$CLARA_CHANGED_FILES"', pattern="*.txt", blocking=True, timeout_secs=10)
        env = self.call("edit", files=["a.txt", "b/c.txt"])
        runs = [(r["name"], r["output_tail"].replace(self.root, "ROOT")) for r in env["callbacks"]]
        self.assertEqual(sorted(runs), [("batch", "2\n2"), ("each", "ROOT/a.txt"), ("each", "ROOT/b/c.txt")])

    def test_lua_tool_reporting_changed_files(self):
        # Any tool that declares it, a Lua one too (SPEC §9.6).
        self.configure({"tools": [{"name": "lua_edit", "reports_changed_files": True,
                                   "lua": "return function(a) return { changed_files = a.files } end"}]})
        self.create("check", "echo lua fired", blocking=True, timeout_secs=10)
        env = self.lib.evaluate({"tool": "lua_edit", "arguments": {"files": ["m.rs"]}})
        self.assertEqual(env["callbacks"][0]["output_tail"], "lua fired")


class TestTools(CallbackTestCase):

    def test_dry_run_gitignore_matching(self):
        self.create("rust", "true", pattern=["*.rs", "!target/**"])
        self.create("docs", "true", pattern="/docs/")
        self.create("makefile", "true", pattern=["src/**/Makefile", "build?.sh"])
        got = self.ok("callback_trigger", changed_files=[
            "main.rs", "src/deep/lib.rs", "target/x.rs", "docs/a.md", "sub/docs/b.md", "src/a/b/Makefile",
            "build1.sh", "build12.sh", self.path("abs.rs"), "../escape.rs"], dry_run=True)
        r = self.root + "/"
        self.assertEqual(got, {"dry_run": True, "callbacks": [
            {"id": "CB1", "name": "rust", "files": [r + "main.rs", r + "src/deep/lib.rs", r + "abs.rs"]},
            {"id": "CB2", "name": "docs", "files": [r + "docs/a.md"]},
            {"id": "CB3", "name": "makefile", "files": [r + "src/a/b/Makefile", r + "build1.sh"]}]})
        self.assertFalse(os.path.exists(self.path(".clara", "logs")))

    def test_trigger_runs(self):
        self.create("check", "echo checked", blocking=True, timeout_secs=10, success_message="fine")
        got = self.ok("callback_trigger", changed_files=["x.rs"])
        [run] = got["callbacks"]
        self.assertEqual((run["id"], run["name"], run["ok"], run["exit_code"], run["output_tail"]),
                         ("CB1", "check", True, 0, "checked"))
        self.assertEqual((got["background"], got["notices"]), ([], ["Callback 'check' %s: fine" % CHECK]))

    def test_upsert_takes_every_field_of_a_definition(self):
        """Issue 26 §6: callback_upsert refused on_busy and pass_files (only
        [[callbacks]] took them; docs/callbacks.md lists them) and seed
        001's timeout."""
        self.create("check", "echo \"$@\"", blocking=True, timeout=30, one_at_a_time=True,
                    on_busy="skip", pass_files="args")
        got = self.ok("callback_get", id="check")
        self.assertEqual((got["timeout_secs"], got["on_busy"], got["pass_files"]), (30, "skip", "args"))
        [run] = self.ok("callback_trigger", changed_files=["x.rs"])["callbacks"]
        self.assertEqual(run["output_tail"], self.path("x.rs"))
        env = self.call("callback_upsert", action="update", id="CB1", timeout=5, timeout_secs=6)
        self.assertEqual(env["error"], "invalid_args", env)

    def test_delete_leaves_no_worker_with_the_id(self):
        """Issue 26 §6: callback_delete left the id in other workers'
        active sets."""
        self.create("check", "true", session="w1")
        self.ok("callback_toggle", "w2", id="CB1", active=True)
        with open(self.path(".clara", "workers", "w2.json")) as f:
            self.assertEqual(json.load(f)["active"], ["CB1"])
        self.ok("callback_upsert", "w1", action="delete", id="CB1")
        for worker in ("w1", "w2"):
            with open(self.path(".clara", "workers", worker + ".json")) as f:
                self.assertEqual(json.load(f)["active"], [], worker)

    def test_update_toggle_delete(self):
        self.create("check", "echo one\necho two", blocking=True, timeout_secs=10)
        # old_string -> new_string edits the script.
        self.ok("callback_upsert", action="update", id="CB1", old_string="echo two", new_string="echo 2")
        self.assertEqual(self.ok("callback_get", id="check")["script"], "echo one\necho 2\n")
        self.assertEqual(self.call("callback_upsert", action="update", id="CB1", old_string="absent",
                                   new_string="x"),
                         {"status": "error", "error": "invalid_args",
                          "message": 'callback_upsert: old_string was not found in the script of "check"'})
        # script_content replaces it; other fields as given.
        got = self.ok("callback_upsert", action="update", id="CB1", script_content="echo three",
                      success_message="Three")
        self.assertEqual(got["callback"]["success_message"], "Three")
        self.assertEqual(self.call("edit", files=["a.rs"])["callbacks"][0]["output_tail"], "three")
        # A renamed callback moves its script.
        got = self.ok("callback_upsert", action="update", id="CB1", name="verify")
        self.assertEqual(got["script_path"], self.path(".clara", "scripts", "verify.sh"))
        self.assertFalse(os.path.exists(self.path(".clara", "scripts", "check.sh")))
        self.assertTrue(os.path.exists(got["script_path"]))

        # Toggle: per session (worker).
        self.assertEqual(self.ok("callback_toggle", id="CB1", active=False),
                         {"id": "CB1", "name": "verify", "active": False})
        self.assertEqual(self.call("edit", files=["a.rs"]),
                         {"status": "success", "tool": "edit", "result": {"changed_files": ["a.rs"]}})
        self.assertNotIn("callbacks", self.call("edit", session="w2", files=["a.rs"]))
        self.ok("callback_toggle", session="w2", id="verify", active=True)
        self.assertEqual(self.call("edit", session="w2", files=["a.rs"])["callbacks"][0]["name"], "verify")
        self.assertEqual([(c["id"], c["active"]) for c in self.ok("callback_list")["callbacks"]], [("CB1", False)])
        listed = self.ok("callback_list", session="w2")
        self.assertEqual((listed["worker"], [c["active"] for c in listed["callbacks"]]), ("w2", [True]))

        # Delete: definition and script gone.
        self.assertEqual(self.ok("callback_upsert", action="delete", id="CB1"),
                         {"action": "deleted", "id": "CB1", "name": "verify"})
        self.assertFalse(os.path.exists(self.path(".clara", "scripts", "verify.sh")))
        self.assertEqual(self.ok("callback_list")["callbacks"], [])
        self.assertNotIn("callbacks", self.call("edit", session="w2", files=["a.rs"]))
        self.assertEqual(self.call("callback_get", id="CB1")["error"], "invalid_args")

    def test_invalid_definitions(self):
        cases = [
            (dict(action="create", name="x", pattern="*.rs", blocking=True, script_content="true"),
             "callback_upsert: timeout_secs (1..3600) is required for a blocking callback"),
            (dict(action="create", name="x", pattern="*.rs", cwd="../up", script_content="true"),
             'callback_upsert: cwd "../up" leaves the project root'),
            (dict(action="update", id="CB9", script_content="true"), 'callback_upsert: no callback "CB9"'),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                self.assertEqual(self.call("callback_upsert", **args),
                                 {"status": "error", "error": "invalid_args", "message": message})
        env = self.call("callback_upsert", action="create", name="Bad Name", pattern="*", script_content="true")
        self.assertEqual((env["error"], env["details"][0]["pointer"]), ("invalid_args", "/name"))
        self.create("x", "true")
        self.assertEqual(self.call("callback_upsert", action="create", name="x", pattern="*", script_content="true"),
                         {"status": "error", "error": "invalid_args",
                          "message": 'callback_upsert: a callback named "x" exists (CB1); update it'})
        self.assertFalse(os.path.exists(self.path(".clara", "scripts", "Bad Name.sh")))

    def test_definitions_persist_across_reset(self):
        self.create("check", "echo kept", blocking=True, timeout_secs=10)
        self.lib.reset()
        self.configure({"rules": {"builtin": False}, "project_root": self.root, "state_dir": ".clara"})
        self.assertEqual([(c["id"], c["name"], c["active"]) for c in self.ok("callback_list")["callbacks"]],
                         [("CB1", "check", True)])
        got = self.ok("callback_trigger", changed_files=["a.rs"])
        self.assertEqual(got["callbacks"][0]["output_tail"], "kept")
        # The next id continues.
        self.assertEqual(self.create("other", "true")["callback"]["id"], "CB2")

    def test_off_without_state_dir(self):
        self.configure({"state_dir": ""})
        env = self.call("callback_list")
        self.assertEqual(env["error"], "invalid_args")
        self.assertIn("state_dir", env["message"])
        self.assertNotIn("callbacks", self.call("edit", files=["a.rs"]))

    def test_test_mode(self):
        self.create("check", 'touch "$CLARA_PROJECT_ROOT/ran"', blocking=True, timeout_secs=10)
        self.configure({"test_mode": True})
        env = self.call("edit", files=["a.rs"])
        self.assertEqual(env["callbacks"], [{"id": "CB1", "name": "check", "ok": True, "exit_code": 0,
                                             "timed_out": False, "duration_ms": 0, "output_tail": "", "log": "",
                                             "test_mode": True, "skipped": "check"}])
        self.assertEqual(env["notices"][0]["message"], "Callback 'check' skipped (test mode)")
        self.assertEqual(self.ok("callback_trigger", changed_files=["a.rs"])["callbacks"][0]["skipped"], "check")
        self.assertFalse(os.path.exists(self.path("ran")))
        self.configure({"test_mode": False})
        self.call("edit", files=["a.rs"])
        self.assertTrue(os.path.exists(self.path("ran")))


class TestBackground(CallbackTestCase):

    def test_completion_in_notifications_drain(self):
        self.create("docs", 'sleep 0.2\necho "built $CLARA_CHANGED_FILES_COUNT"', pattern="*.md", session="w1")
        t0 = time.monotonic()
        env = self.call("edit", session="w1", files=["README.md"])
        self.assertLess(time.monotonic() - t0, 2.0)  # it does not wait for the script
        self.assertNotIn("callbacks", env)
        self.assertEqual([(n["callback"], n["message"], n["priority"]) for n in env["notices"]],
                         [("docs", "Callback 'docs' activated in background", "low")])
        [notice] = self.drain_until(1, session="w1")
        self.assertEqual((notice["callback"], notice["priority"], notice["event"]),
                         ("docs", "normal", "on_callback_complete"))
        self.assertTrue(notice["message"].startswith("Callback 'docs' %s: succeeded in " % CHECK), notice)
        # Other sessions' queues stay empty.
        self.assertEqual(self.ok("notifications_drain")["notices"], [])

    def test_rule_events_with_callback_context(self):
        env = self.lib.evaluate({"tool": "rules_load", "arguments": {"name": "cb.toml", "toml": """
[[rules]]
id = "built"
trigger = "on_callback_complete"
[rules.action]
type = "notify_self"
message = "{{ context.callback.name }} ({{ context.callback.id }}) ok={{ context.callback.ok }} on {{ len(context.callback.files) }} file(s)"

[[rules]]
id = "broke"
trigger = "on_callback_failure"
[rules.condition]
lua = "return ctx.callback.exit_code == 4 and not ctx.callback.ok"
[rules.action]
type = "lua"
lua = '''notify("failed: " .. ctx.callback.name .. " exit " .. ctx.callback.exit_code, "high")'''
"""}})
        self.assertEqual(env["status"], "success", env)
        self.create("good", "echo fine", pattern="*.py")
        self.create("bad", "echo nope\nexit 4", pattern="*.c")
        self.call("edit", files=["a.py", "b.c"])
        notices = self.drain_until(4)
        by_source = sorted((n.get("rule") or n.get("callback"), n["event"], n["message"].split("\n")[0])
                           for n in notices)
        log_line = [m for s, e, m in by_source if s == "bad"][0]
        self.assertTrue(log_line.startswith("Callback 'bad' %s (exit 4): see %s" %
                                            (CROSS, self.path(".clara", "logs", "bad-"))), log_line)
        self.assertEqual([(s, e) for s, e, m in by_source],
                         [("bad", "on_callback_failure"), ("broke", "on_callback_failure"),
                          ("built", "on_callback_complete"), ("good", "on_callback_complete")])
        rule_messages = {s: m for s, e, m in by_source if s in ("built", "broke")}
        self.assertEqual(rule_messages, {"built": "good (CB1) ok=true on 1 file(s)", "broke": "failed: bad exit 4"})


if __name__ == "__main__":
    unittest.main()


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVER = os.environ.get("CLARA_LLMSERVER", os.path.join(ROOT, "build", "llmserver"))


class TestSeedTrigger(CallbackTestCase):
    """Seed 001's trigger through the built library: a Python tool whose
    descriptor names the argument holding the path (changes_files), a
    callback declared in the configuration, and a model's turn of three
    Edit/Write calls (tests/llm/seed_callbacks.toml) firing once."""

    def register_seed_tools(self):
        for name in ("Edit", "Write"):
            self.lib.register_tool({"name": name, "changes_files": ["file_path"], "input_schema": {
                "type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}},
                lambda args: {"ok": True})

    def test_changes_files_and_a_configured_callback(self):
        self.register_seed_tools()
        self.configure({"callbacks": [{
            "name": "record", "pattern": ["*.py", "!build/**"], "blocking": True, "timeout_secs": 10,
            "once_per_batch": True, "pass_files": "args",
            "run": 'printf "%s\\n" "$@" > "$CP_PROJECT_ROOT/args.txt"\necho "$CP_CALLBACK_NAME got $#"'}]})
        listed = self.ok("callback_list")["callbacks"]
        self.assertEqual([(c["id"], c["configured"], c["active"]) for c in listed], [("config:record", True, True)])

        env = self.call("Write", "anyone", file_path="pkg/mod.py", content="x = 1\n")
        self.assertEqual(env["result"], {"ok": True})
        [run] = env["callbacks"]
        self.assertEqual((run["name"], run["ok"], run["output_tail"]), ("record", True, "record got 1"))
        with open(self.path("args.txt")) as f:
            self.assertEqual(f.read(), self.path("pkg", "mod.py") + "\n")
        # Outside the project root, or excluded: nothing fires.
        for path in ("../elsewhere.py", "/tmp/x.py", "build/gen.py"):
            self.assertNotIn("callbacks", self.call("Edit", "anyone", file_path=path), path)
        # The configuration's callbacks are changed there, not by the tools.
        env = self.call("callback_upsert", action="delete", id="record")
        self.assertEqual(env["error"], "invalid_args", env)

    def test_a_chat_turn_fires_once(self):
        if not os.path.exists(SERVER):
            raise RuntimeError("%s is missing: make build/llmserver (make test-python builds it)" % SERVER)
        srv = subprocess.Popen([SERVER, "-complete", os.path.join(ROOT, "tests", "llm", "seed_callbacks.toml")],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        url = srv.stdout.readline().strip()
        try:
            self.register_seed_tools()
            self.configure({"llm": {"base_url": url + "/seed_callbacks", "model": "m"}})
            self.create("rust-check", 'echo $(echo "$CP_CHANGED_FILES" | tr "\\n" " ") >> "$CP_PROJECT_ROOT/runs.txt"',
                        session="agent", blocking=True, timeout_secs=30, once_per_batch=True,
                        success_message="Build passed")
            self.create("file-length", 'echo "$CP_CHANGED_FILES" >> "$CP_PROJECT_ROOT/lengths.txt"', pattern="*",
                        session="agent")
            result = self.ok("chat", "agent", prompt="Rename foo to bar in the crate.", allow_tools=True,
                             tools=["Edit", "Write"], max_tool_calls=5)
            self.assertEqual(result["content"], "Renamed foo to bar; the build passes.")
            with open(self.path("runs.txt")) as f:
                self.assertEqual(f.read(), " ".join(self.path("src", n) for n in ("bar.rs", "lib.rs", "main.rs")) + "\n")
            # file-length runs in the background, once per file.
            deadline = time.monotonic() + 30
            lines = []
            while len(lines) < 3 and time.monotonic() < deadline:
                time.sleep(0.02)
                if os.path.exists(self.path("lengths.txt")):
                    with open(self.path("lengths.txt")) as f:
                        lines = f.read().splitlines()
            self.assertEqual(sorted(lines), [self.path("src", n) for n in ("bar.rs", "lib.rs", "main.rs")])
        finally:
            srv.stdin.close()
            rc = srv.wait(30)
            err = srv.stderr.read()
            srv.stdout.close()
            srv.stderr.close()
        self.assertEqual(rc, 0, err)


class TestOnlyDeclaredResultsFire(CallbackTestCase):
    """Issue 25, finding 13: a model calling echo({"changed_files": [...]})
    ran the configured deploy script. A result's changed_files now counts
    only for a tool that declares reports_changed_files."""

    def setUp(self):
        ClaraTestCase.setUp(self)  # not the suite's edit tool: these tests register their own
        self.root = tempfile.mkdtemp(prefix="clara-callbacks-")
        self.configure({"project_root": self.root, "state_dir": ".clara", "callbacks": [{
            "name": "deploy", "pattern": "*", "blocking": True, "timeout_secs": 30,
            "run": 'touch "$CLARA_PROJECT_ROOT/deployed"'}]})

    def deployed(self):
        try:
            os.remove(self.path("deployed"))
            return True
        except FileNotFoundError:
            return False

    def test_echo_and_undeclared_tools_fire_nothing(self):
        for tool in ("echo", "lua_echo", "py_echo"):
            if tool == "lua_echo":
                self.configure({"tools": [{"name": "lua_echo", "lua": "return function(a) return a end"}]})
            if tool == "py_echo":
                self.lib.register_tool({"name": "py_echo"}, lambda args: args)
            env = self.lib.evaluate({"tool": tool, "arguments": {"changed_files": ["src/x.rs"]}})
            self.assertEqual(env["result"], {"changed_files": ["src/x.rs"]})
            self.assertNotIn("callbacks", env, tool)
            self.assertFalse(self.deployed(), tool)
        # A tool that declares it: its report fires.
        self.lib.register_tool({"name": "save", "reports_changed_files": True},
                               lambda args: {"changed_files": args["files"]})
        self.assertIn("callbacks", self.call("save", files=["src/x.rs"]))
        self.assertTrue(self.deployed())

    def test_the_decorator_declares_it(self):
        # @tool(reports_changed_files=True) is the decorator's way to the
        # descriptor key; the same function undeclared fires nothing.
        @self.lib.tool(name="save_undeclared")
        def save_undeclared(files: list) -> dict:
            return {"changed_files": files}

        @self.lib.tool(name="save_declared", reports_changed_files=True)
        def save_declared(files: list) -> dict:
            return {"changed_files": files}

        self.assertNotIn("callbacks", self.call("save_undeclared", files=["src/x.rs"]))
        self.assertFalse(self.deployed())
        self.assertIn("callbacks", self.call("save_declared", files=["src/x.rs"]))
        self.assertTrue(self.deployed())
        declared = {d["name"]: d for d in self.lib.tools()}
        self.assertTrue(declared["save_declared"].get("reports_changed_files"))
        self.assertFalse(declared["save_undeclared"].get("reports_changed_files", False))

    def test_a_model_calling_echo_fires_nothing(self):
        if not os.path.exists(SERVER):
            raise RuntimeError("%s is missing: make build/llmserver (make test-python builds it)" % SERVER)
        srv = subprocess.Popen([SERVER, "-complete", os.path.join(ROOT, "tests", "llm", "echo_changed_files.toml")],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        url = srv.stdout.readline().strip()
        try:
            self.configure({"llm": {"base_url": url + "/echo_changed_files", "model": "m"}})
            result = self.ok("chat", "agent", prompt="Deploy.", allow_tools=True, tools=["echo"], max_tool_calls=2)
            self.assertEqual(result["content"], "Done.")
            self.assertEqual([(c["name"], c["status"]) for c in result["tool_calls"]], [("echo", "success")])
            self.assertFalse(self.deployed())
        finally:
            srv.stdin.close()
            rc = srv.wait(30)
            err = srv.stderr.read()
            srv.stdout.close()
            srv.stderr.close()
        self.assertEqual(rc, 0, err)


class TestModelCallbacks(CallbackTestCase):
    """Seed 001's premise: the model creates and manages callbacks and sees
    them in a panel, where the configuration offers it the callback tools
    (callback_tools); scripts a model wrote run only where it says so."""

    def test_the_model_creates_a_callback_and_sees_the_panel(self):
        if not os.path.exists(SERVER):
            raise RuntimeError("%s is missing: make build/llmserver (make test-python builds it)" % SERVER)
        srv = subprocess.Popen([SERVER, "-complete", os.path.join(ROOT, "tests", "llm", "seed_callbacks_model.toml")],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        url = srv.stdout.readline().strip()

        def write(args):
            with open(self.path(args["file_path"]), "w") as f:
                f.write(args["content"])
            return {"ok": True}
        try:
            self.lib.register_tool({"name": "Write", "changes_files": ["file_path"], "input_schema": {
                "type": "object", "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["file_path", "content"]}}, write)
            tools = ["Write", "callback_upsert", "callback_toggle", "callback_list", "callback_get"]
            self.configure({"llm": {"base_url": url + "/seed_callbacks_model", "model": "m"}})
            # Off by default: the model is offered none of them.
            with self.assertRaises(clara.InvalidArgs):
                self.lib.call("chat", prompt="x", allow_tools=True, tools=tools, tool_choice={"name": "callback_upsert"})
            self.configure({"callback_tools": {"models": True, "run_model_scripts": True}})
            result = self.ok("chat", "agent", prompt="Count the lines of every text file I write, then write notes.txt.",
                             allow_tools=True, tools=tools, max_tool_calls=3)
            self.assertEqual(result["content"], "Created file-length; notes.txt has 2 lines.")
            self.assertTrue(os.path.exists(self.path(".clara", "scripts", "file-length.sh")))
            [cb] = self.ok("callback_list", "agent")["callbacks"]
            self.assertEqual((cb["name"], cb["by_model"], cb["active"]), ("file-length", True, True))
        finally:
            srv.stdin.close()
            rc = srv.wait(30)
            err = srv.stderr.read()
            srv.stdout.close()
            srv.stderr.close()
        self.assertEqual(rc, 0, err)

        # Where the configuration does not let a model's scripts run, the
        # callback matches but does not run.
        self.configure({"callback_tools": {"run_model_scripts": False}})
        env = self.call("Write", "agent", file_path="more.txt", content="x\n")
        self.assertNotIn("callbacks", env)
        self.assertIn("Callback 'file-length' not run: a model wrote its script, and callback_tools.run_model_scripts is false",
                      [n["message"] for n in env["notices"]])
        # The host's own edit of the script makes it the host's: it runs.
        self.ok("callback_upsert", "agent", action="update", id="CB1", script_content="echo host")
        env = self.call("Write", "agent", file_path="more.txt", content="x\n")
        self.assertEqual([(r["name"], r["ok"], r["output_tail"]) for r in env["callbacks"]], [("file-length", True, "host")])

    def test_policy_and_rules_govern_them(self):
        self.configure({"callback_tools": {"models": True}, "policy": {"deny": ["callback_upsert"]}})
        env = self.call("callback_upsert", action="create", name="x", pattern="*", script_content="true")
        self.assertEqual(env["error"], "denied", env)
        # on_tool_call rules see them as any tool once models may use them.
        self.configure({"policy": {"deny": []}})
        self.ok("rules_load", name="guard", toml='[[rules]]\nid = "no-toggle"\ntrigger = "on_tool_call"\n'
                '[rules.condition]\nexpression = \'context.tool.name == "callback_toggle"\'\n'
                '[[rules.actions]]\ntype = "deny"\nreason = "callbacks stay as they are"\n')
        env = self.call("callback_toggle", id="CB1", active=False)
        self.assertEqual(env["error"], "denied", env)
        self.assertIn("no-toggle", env["message"])
