"""clara.Session, clara.Clara as a context manager, configure() from a
file, tools()."""

import hashlib
import os
import pathlib
import tempfile
import unittest

import clara
from clara import _binding
from clara_testcase import ClaraTestCase


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def audit_tail(n):
    return clara.call("audit_tail", n=n)["records"]


class TestSession(ClaraTestCase):

    def test_calls_carry_the_session(self):
        a, b = clara.Session("alpha"), clara.Session("beta")
        self.assertEqual((a.name, repr(a)), ("alpha", "clara.Session('alpha')"))
        a.call("kv_set", key="k", value=[1, "é"])
        self.assertEqual(a.call("kv_get", key="k"), {"key": "k", "found": True, "value": [1, "é"]})
        self.assertFalse(b.call("kv_get", key="k")["found"])
        self.assertFalse(clara.call("kv_get", key="k")["found"])          # "default"
        self.assertEqual([(r["session"], r["tool"]) for r in audit_tail(4)],
                         [("alpha", "kv_set"), ("alpha", "kv_get"), ("beta", "kv_get"), ("default", "kv_get")])

    def test_errors_raise(self):
        with self.assertRaises(clara.UnknownTool):
            clara.Session("s").call("nope")

    def test_a_tool_argument_named_session(self):
        # Arguments are keywords after a positional-only tool name: any name
        # works, "session" and "tool" included.
        self.assertEqual(clara.Session("s").call("echo", session="arg", tool="t"), {"session": "arg", "tool": "t"})

    def test_evaluate_adds_the_session(self):
        s = clara.Session("ev")
        s.evaluate({"tool": "kv_set", "arguments": {"key": "a", "value": 1}})
        self.assertTrue(s.call("kv_get", key="a")["found"])
        env = s.evaluate({"tool": "kv_get", "session": "other", "arguments": {"key": "a"}})
        self.assertFalse(env["result"]["found"])          # the request's own session wins

    def test_emit(self):
        self.lib.configure({"state_dir": ""})
        rules = ('[[rules]]\nid = "seen"\ntrigger = "job.done"\n[[rules.actions]]\ntype = "notify_self"\n'
                 'message = "done {{ context.n }}"\n')
        loaded = clara.call("rules_load", name="r.toml", toml=rules)["rules"]
        self.assertIn("seen", [r["id"] for r in loaded])
        env = clara.Session("w1").emit("job.done", {"n": 3})
        self.assertEqual(env["status"], "success")
        self.assertEqual([f["rule"] for f in env["result"]["fired"]], ["seen"])
        self.assertEqual([n["message"] for n in env["result"]["notices"]], ["done 3"])
        # The notice went to w1's queue, not to the default session's.
        self.assertEqual(len(clara.Session("w1").call("notifications_drain")["notices"]), 1)
        self.assertEqual(clara.call("notifications_drain")["notices"], [])
        traced = clara.Session("w1").emit("job.done", {"n": 4}, trace=True)
        self.assertEqual([t["rule"] for t in traced["result"]["trace"]], ["seen"])

    def test_chat_carries_the_session(self):
        # The chat tool (SPEC §10.2) is not in this library yet (unknown_tool);
        # either way the call was made as chat, in the session, with these
        # arguments (the audit record holds the SHA-256 of their JSON).
        with self.assertRaises(clara.ClaraError):
            clara.Session("talk").chat("hello", max_tool_calls=2)
        with self.assertRaises(clara.ClaraError):
            clara.Session("talk").chat(messages=[{"role": "user", "content": "hi"}])
        first, second = audit_tail(2)
        self.assertEqual((first["session"], first["tool"], second["session"], second["tool"]),
                         ("talk", "chat", "talk", "chat"))
        self.assertEqual(first["args_sha256"], sha256(b'{"max_tool_calls":2,"prompt":"hello"}'))
        self.assertEqual(second["args_sha256"], sha256(b'{"messages":[{"role":"user","content":"hi"}]}'))

    def test_end_and_context_manager(self):
        with clara.Session("job") as s:
            s.call("kv_set", key="k", value=1)
            self.assertTrue(s.call("kv_get", key="k")["found"])
        # Ended on exit: its in-memory data is gone.
        self.assertFalse(clara.Session("job").call("kv_get", key="k")["found"])
        s = clara.Session("job2")
        ended = s.end()
        self.assertEqual(ended["session"], "job2")
        self.assertEqual(set(ended["emitted"]), {"fired", "notices", "denied"})
        (record,) = audit_tail(1)
        self.assertEqual((record["session"], record["tool"]), ("job2", "session_end"))

    def test_ended_even_when_the_block_raises(self):
        with self.assertRaises(KeyError):
            with clara.Session("boom") as s:
                s.call("kv_set", key="k", value=1)
                raise KeyError("x")
        self.assertFalse(clara.Session("boom").call("kv_get", key="k")["found"])

    def test_bad_names(self):
        for bad in ("", None, 5):
            with self.assertRaises(ValueError):
                clara.Session(bad)

    def test_explicit_client(self):
        c = clara.Clara(self.lib.path)
        self.assertEqual(clara.Session("c", client=c).call("echo", a=1), {"a": 1})


class TestClaraContextManager(ClaraTestCase):

    def test_with_clara(self):
        with clara.Clara() as c:
            self.assertIsInstance(c, clara.Clara)
            self.assertEqual(c.call("echo", a=1), {"a": 1})

    def test_tools_registered_through_it_are_unregistered(self):
        clara.register_tool({"name": "outside"}, lambda args: "o")
        with clara.Clara() as c:
            c.register_tool({"name": "inside"}, lambda args: "i")

            @c.tool
            def decorated() -> str:
                return "d"
            self.assertEqual((clara.call("inside"), clara.call("decorated")), ("i", "d"))
        for name in ("inside", "decorated"):
            with self.assertRaises(clara.UnknownTool):
                clara.call(name)
        self.assertEqual(clara.call("outside"), "o")       # not its own: kept

    def test_replaced_tools_are_not_its_own(self):
        with clara.Clara() as c:
            c.register_tool({"name": "shared"}, lambda args: "mine")
            clara.register_tool({"name": "shared"}, lambda args: "theirs")
        self.assertEqual(clara.call("shared"), "theirs")

    def test_already_gone(self):
        with clara.Clara() as c:
            c.register_tool({"name": "gone"}, lambda args: 1)
            c.unregister_tool("gone")
        with _binding._tool_lock:
            self.assertNotIn("gone", _binding._tool_current)


class TestConfigureFromFile(ClaraTestCase):

    def test_path(self):
        with tempfile.TemporaryDirectory() as tmp:
            toml = pathlib.Path(tmp, "clara.toml")
            toml.write_text('default_evaluator = "get_time"\n[limits]\nmax_depth = 64\n')
            env = clara.configure(toml)
            self.assertEqual(env["status"], "success", env)
            self.assertEqual(env["result"]["config"]["limits"]["max_depth"], 64)
            js = pathlib.Path(tmp, "clara.json")
            js.write_text('{"limits": {"max_depth": 0}}')
            env = clara.configure(js)
            self.assertEqual((env["status"], env["error"]), ("error", "invalid_request"))
            with self.assertRaises(FileNotFoundError):
                clara.configure(pathlib.Path(tmp, "missing.toml"))
        # A str is configuration text, never a file name.
        env = clara.configure(os.path.join("no", "such.toml"))
        self.assertEqual(env["status"], "error")


class TestTools(ClaraTestCase):

    def test_tools(self):
        names = [t["name"] for t in clara.tools()]
        for builtin in ("echo", "get_time", "kv_get", "tools_list", "session_end"):
            self.assertIn(builtin, names)
        self.assertNotIn("mine", names)

        @clara.tool
        def mine(x: int) -> int:
            return x
        (desc,) = [t for t in clara.tools() if t["name"] == "mine"]
        self.assertEqual(desc["input_schema"]["properties"], {"x": {"type": "integer"}})
        clara.unregister_tool("mine")
        self.assertNotIn("mine", [t["name"] for t in clara.tools()])


if __name__ == "__main__":
    unittest.main()
