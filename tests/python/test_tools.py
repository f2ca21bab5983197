"""Tools through the binding (SPEC §6): Python callables registered with
register_tool, their release, limits, policy, test mode, audit and the
built-in tools, driven through clara_evaluate."""

import ctypes
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import clara
from clara import _binding, _library
from clara_testcase import ClaraTestCase, child_env

EMPTY_ARGS_SHA256 = hashlib.sha256(b"{}").hexdigest()

ADD = {
    "name": "add",
    "description": "Adds two numbers.",
    "input_schema": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
}


def add(args):
    return {"sum": args["a"] + args["b"]}


def err(code, message, id_json=None, details=None):
    """The exact text of an error envelope."""
    idpart = ',"id":%s' % id_json if id_json is not None else ""
    detpart = ',"details":%s' % json.dumps(details, ensure_ascii=False, separators=(",", ":")) \
        if details is not None else ""
    return '{"status":"error"%s,"error":%s,"message":%s%s}' % (
        idpart, json.dumps(code), json.dumps(message, ensure_ascii=False), detpart)


def ok(tool, result_json, id_json=None):
    idpart = ',"id":%s' % id_json if id_json is not None else ""
    return '{"status":"success"%s,"tool":"%s","result":%s}' % (idpart, tool, result_json)


def live():
    """How many Python tools the binding keeps alive."""
    with _binding._tool_lock:
        return len(_binding._tool_keepalive)


def wait_until(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


class Recorder:
    """A thread-safe log handler keeping the messages."""

    def __init__(self):
        self.lock = threading.Lock()
        self.messages = []

    def __call__(self, level, message):
        with self.lock:
            self.messages.append((level, message))

    def texts(self):
        with self.lock:
            return [m for _, m in self.messages]


class ToolTestCase(ClaraTestCase):
    """Every test starts with no Python tool alive and ends (after the
    reset of tearDown and the test's own clean-ups) with every callback
    released by Clara."""

    def setUp(self):
        super().setUp()
        self.assertTrue(wait_until(lambda: live() == 0), "a Python tool of an earlier test is still alive")
        # Registered first, so it runs last, after the test's clean-ups
        # (which unblock tools still running).
        self.addCleanup(self.assertAllReleased)

    def assertAllReleased(self):
        self.lib.reset()
        self.assertTrue(wait_until(lambda: live() == 0),
                        "callbacks never released: %r" % _binding._tool_keepalive)

    def register(self, descriptor, func):
        return self.lib.register_tool(descriptor, func)


class TestPythonTools(ToolTestCase):

    def test_module_interface(self):
        for name in ("register_tool", "unregister_tool", "ToolError", "CLARA_ENOENT", "CLARA_EPERM"):
            self.assertIn(name, clara.__all__)
            self.assertTrue(hasattr(clara, name))
        self.assertTrue(issubclass(clara.ToolError, clara.ClaraError))

    def test_content_blocks(self):
        # "returns": "content": MCP content blocks, as the specification
        # writes them (issue 30); anything else is tool_failed, naming the
        # block at fault.
        pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
        blocks = [{"type": "text", "text": "a red pixel:"},
                  {"type": "image", "data": pixel, "mimeType": "image/png"}]
        self.register({"name": "pixel", "returns": "content"}, lambda args: blocks)
        self.assertEqual(self.lib.evaluate({"tool": "pixel"}),
                         {"status": "success", "tool": "pixel", "result": blocks})
        self.register({"name": "bad_blocks", "returns": "content"},
                      lambda args: [{"type": "image", "mimeType": "image/png"}])
        env = self.lib.evaluate({"tool": "bad_blocks"})
        self.assertEqual(env["error"], "tool_failed")
        self.assertEqual(env["message"], 'tool "bad_blocks": content block 0: the image block needs "data"')

    def test_end_to_end_with_schema(self):
        seen = []

        def tool(args):
            seen.append((args, threading.get_ident()))
            return add(args)

        self.assertEqual(self.register(ADD, tool), "add")
        self.assertEqual(live(), 1)
        self.assertEnvelope('{"tool":"add","id":"r1","arguments":{"a":1,"b":2.5}}',
                            ok("add", '{"sum":3.5}', '"r1"'))
        self.assertEqual(self.lib.evaluate({"tool": "add", "arguments": {"a": 2, "b": 3}}),
                         {"status": "success", "tool": "add", "result": {"sum": 5}})
        self.assertEqual([a for a, _ in seen], [{"a": 1, "b": 2.5}, {"a": 2, "b": 3}])
        # The tool runs on one of Clara's threads, not the caller's.
        self.assertNotIn(threading.get_ident(), [t for _, t in seen])

        # Arguments are validated before the tool runs; every violation is
        # listed with its JSON pointer.
        # (Sorted by pointer, then message.)
        self.assertEnvelope('{"tool":"add","arguments":{"a":"x","c":3}}', err(
            "invalid_args",
            "tool \"add\": arguments do not match input_schema: at the top: additional properties 'c' not allowed "
            "(and 2 more)",
            details=[{"pointer": "", "message": "additional properties 'c' not allowed"},
                     {"pointer": "", "message": "missing property 'b'"},
                     {"pointer": "/a", "message": "got string, want number"}]))
        self.assertEnvelope('{"tool":"add","id":4}', err(
            "invalid_args",
            "tool \"add\": arguments do not match input_schema: at the top: missing properties 'a', 'b'",
            "4", [{"pointer": "", "message": "missing properties 'a', 'b'"}]))
        self.assertEqual(len(seen), 2)

    def test_nested_pointer_in_details(self):
        desc = {"name": "nested", "input_schema": {
            "type": "object",
            "properties": {"items": {"type": "array", "items": {
                "type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}},
                "a~b": {"type": "string"}}}}
        self.register(desc, lambda args: "never")
        self.assertEnvelope('{"tool":"nested","arguments":{"items":[{"n":1},{"n":-2}]}}', err(
            "invalid_args",
            "tool \"nested\": arguments do not match input_schema: at /items/1/n: minimum: got -2, want 0",
            details=[{"pointer": "/items/1/n", "message": "minimum: got -2, want 0"}]))
        self.assertEnvelope('{"tool":"nested","arguments":{"a~b":5}}', err(
            "invalid_args",
            "tool \"nested\": arguments do not match input_schema: at /a~0b: got number, want string",
            details=[{"pointer": "/a~0b", "message": "got number, want string"}]))

    def test_details_order_is_stable(self):
        # The validator visits an object's properties in Go map order; Clara
        # sorts the violations (by pointer, then message) so that the same
        # request always gets the same envelope.
        desc = {"name": "multi", "input_schema": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b/c": {"type": "string"},
                           "d": {"type": "array", "items": {"type": "integer", "minimum": 0}}}}}
        self.register(desc, lambda args: "never")
        request = '{"tool":"multi","arguments":{"a":"x","b/c":5,"d":[1,-2]}}'
        answers = {self.lib.evaluate_raw(request) for _ in range(200)}
        # Every violation is listed, with its JSON pointer...
        for env in answers:
            parsed = json.loads(env)
            self.assertEqual(parsed["error"], "invalid_args")
            self.assertCountEqual(parsed["details"], [
                {"pointer": "/a", "message": "got string, want number"},
                {"pointer": "/b~1c", "message": "got number, want string"},
                {"pointer": "/d/1", "message": "minimum: got -2, want 0"}])
            first = parsed["details"][0]
            self.assertEqual(parsed["message"], 'tool "multi": arguments do not match input_schema: at %s: %s '
                                                '(and 2 more)' % (first["pointer"], first["message"]))
        # ...and always in the same order.
        self.assertEqual(len(answers), 1, sorted(answers))
        self.assertEqual(answers.pop(), err(
            "invalid_args", 'tool "multi": arguments do not match input_schema: at /a: got string, want number '
                            '(and 2 more)',
            details=[{"pointer": "/a", "message": "got string, want number"},
                     {"pointer": "/b~1c", "message": "got number, want string"},
                     {"pointer": "/d/1", "message": "minimum: got -2, want 0"}]))

    def test_arguments_and_result_round_trip(self):
        self.register({"name": "mirror"}, lambda args: {"got": args, "é": "☃ 𝄞"})
        args = {"text": "héllo 日本", "nul": "a\x00b", "quote": 'say "hi" \\', "n": [1, 2.5, None, True],
                "big": 2**63}
        env = self.lib.evaluate({"tool": "mirror", "arguments": args})
        self.assertEqual(env, {"status": "success", "tool": "mirror", "result": {"got": args, "é": "☃ 𝄞"}})
        # The binding sends compact JSON; non-ASCII stays as is.
        self.assertEnvelope('{"tool":"mirror","arguments":{"k":"é"}}',
                            ok("mirror", '{"got":{"k":"é"},"é":"☃ 𝄞"}'))

    def test_descriptor_as_text(self):
        self.register(json.dumps(ADD), add)
        self.assertEnvelope('{"tool":"add","arguments":{"a":1,"b":1}}', ok("add", '{"sum":2}'))
        self.register(b'{"name":"bytes_tool","returns":"string"}', lambda args: "b")
        self.assertEnvelope('{"tool":"bytes_tool"}', ok("bytes_tool", '"b"'))

    def test_null_and_scalar_results(self):
        for name, value, text in (("n", None, "null"), ("t", True, "true"), ("i", -7, "-7"),
                                  ("s", "x\ny", '"x\\ny"'), ("l", [], "[]")):
            with self.subTest(result=value):
                self.register({"name": name}, lambda args, v=value: v)
                self.assertEnvelope('{"tool":"%s"}' % name, ok(name, text))

    def test_string_tool(self):
        text = 'héllo "world"\n\t\\ ☃'
        self.register({"name": "greet", "returns": "string"}, lambda args: text)
        self.assertEnvelope('{"tool":"greet"}', ok("greet", json.dumps(text, ensure_ascii=False)))
        self.assertEqual(self.lib.evaluate({"tool": "greet"})["result"], text)
        # Text that looks like JSON stays text.
        self.register({"name": "jsonish", "returns": "string"}, lambda args: '{"a":1}')
        self.assertEnvelope('{"tool":"jsonish"}', ok("jsonish", '"{\\"a\\":1}"'))

    def test_string_tool_wrong_results(self):
        self.register({"name": "num", "returns": "string"}, lambda args: 5)
        self.assertEnvelope('{"tool":"num"}', err(
            "tool_failed", 'TypeError: a "returns": "string" tool must return str, not int'))
        self.register({"name": "nul", "returns": "string"}, lambda args: "a\x00b")
        self.assertEnvelope('{"tool":"nul"}', err(
            "tool_failed", "ValueError: the tool's result contains a NUL byte, which the C interface "
                           "cannot carry (write it as \\u0000 inside a JSON string)"))

    def test_string_truncated_at_utf8_boundary(self):
        self.register({"name": "long", "returns": "string", "limits": {"max_output_bytes": 10}},
                      lambda args: "é" * 8)
        self.assertEnvelope('{"tool":"long","id":2}',
                            '{"status":"success","id":2,"tool":"long","result":"ééééé","truncated":true}')

    def test_json_output_too_large(self):
        self.register({"name": "big", "limits": {"max_output_bytes": 10}}, lambda args: ["x" * 20])
        self.assertEnvelope('{"tool":"big"}', err(
            "output_too_large", 'tool "big" returned 24 bytes of JSON, more than its max_output_bytes (10)',
            details={"bytes": 24, "max_output_bytes": 10}))

    def test_exception_becomes_tool_failed(self):
        def boom(args):
            raise ValueError("bad input é: %s" % args["x"])

        self.register({"name": "boom"}, boom)
        self.assertEnvelope('{"tool":"boom","id":1,"arguments":{"x":"y"}}',
                            err("tool_failed", "ValueError: bad input é: y", "1"))
        # A KeyError, raised by the tool's own bug.
        self.assertEnvelope('{"tool":"boom"}', err("tool_failed", "KeyError: 'x'"))

    def test_every_exception_is_caught(self):
        class Custom(Exception):
            pass

        cases = [
            ("runtime_empty", RuntimeError(), "RuntimeError"),
            ("custom", Custom("mine"), "Custom: mine"),
            ("sysexit", SystemExit(3), "SystemExit: 3"),
            ("interrupt", KeyboardInterrupt(), "KeyboardInterrupt"),
            ("nul_message", ValueError("a\x00b"), "ValueError: a\\0b"),
        ]
        for name, exc, message in cases:
            with self.subTest(exception=name):
                def raiser(args, exc=exc):
                    raise exc
                self.register({"name": name}, raiser)
                self.assertEnvelope('{"tool":"%s"}' % name, err("tool_failed", message))
        # The interpreter is fine afterwards.
        self.register({"name": "fine"}, lambda args: 1)
        self.assertEnvelope('{"tool":"fine"}', ok("fine", "1"))

    def test_non_serialisable_result(self):
        for name, value in (("obj", object()), ("setv", {1, 2}), ("nan", float("nan")),
                            ("inf", [float("inf")]), ("badkey", {(1, 2): 3})):
            with self.subTest(result=name):
                try:
                    json.dumps(value, allow_nan=False)
                except (TypeError, ValueError) as e:
                    message = "%s: %s" % (type(e).__name__, e)
                self.register({"name": name}, lambda args, v=value: v)
                self.assertEnvelope('{"tool":"%s"}' % name, err("tool_failed", message))
        self.assertEnvelope('{"tool":"obj"}',
                            err("tool_failed", "TypeError: Object of type object is not JSON serializable"))

    def test_tool_may_call_clara(self):
        self.register({"name": "outer"},
                      lambda args: self.lib.evaluate({"tool": "echo", "arguments": args})["result"])
        self.assertEnvelope('{"tool":"outer","arguments":{"k":[1]}}', ok("outer", '{"k":[1]}'))

    def test_interpreter_exits_cleanly_with_tools_registered(self):
        child = ("import clara\n"
                 "clara.register_tool({'name': 'a'}, lambda args: 1)\n"
                 "clara.register_tool({'name': 'b', 'returns': 'string'}, lambda args: 'x')\n"
                 "print(clara.evaluate_raw('{\"tool\":\"a\"}'))\n")
        env = child_env(CLARA_LOG="info")
        p = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual((p.returncode, p.stdout), (0, ok("a", "1") + "\n"))
        # At exit the binding unregistered its tools (and nothing crashed).
        logged = [line.split(" ", 1)[1] for line in p.stderr.splitlines()]
        self.assertEqual(sorted(logged), ['clara info: tool "a" registered', 'clara info: tool "a" unregistered',
                                          'clara info: tool "b" registered', 'clara info: tool "b" unregistered'])

    def test_module_level_functions(self):
        self.assertEqual(clara.register_tool({"name": "mod"}, lambda args: "m"), "mod")
        self.assertEqual(clara.evaluate({"tool": "mod"})["result"], "m")
        clara.unregister_tool("mod")
        self.assertEqual(clara.evaluate({"tool": "mod"})["error"], "unknown_tool")
        self.assertEqual(live(), 0)


class TestRegistrationErrors(ToolTestCase):

    def test_errors_raise_and_release(self):
        rec = Recorder()
        self.lib.set_log_handler(rec, clara.CLARA_LOG_ERROR)
        cases = [
            ({"name": "echo"}, clara.CLARA_EPERM, "echo",
             'clara_register_tool: cannot replace "echo": it is a built-in tool'),
            ({"name": "get_time", "returns": "string"}, clara.CLARA_EPERM, "get_time",
             'clara_register_tool: cannot replace "get_time": it is a built-in tool'),
            ({"nam": "x"}, clara.CLARA_EINVAL, None,
             'clara_register_tool: descriptor: unknown key "nam"'),
            ({"description": "no name"}, clara.CLARA_EINVAL, None,
             'clara_register_tool: descriptor: "name" is missing'),
            ({"name": "bad name"}, clara.CLARA_EINVAL, "bad name",
             "clara_register_tool: invalid tool name \"bad name\": use 1 to 64 letters, digits, '_' or '-'"),
            ({"name": "x", "returns": "xml"}, clara.CLARA_EINVAL, "x",
             'clara_register_tool: tool "x": returns must be "json", "string" or "content", not "xml"'),
            ({"name": "x", "capabilities": ["teleport"]}, clara.CLARA_EINVAL, "x",
             'clara_register_tool: tool "x": unknown capability "teleport" (known: exec, fs_read, fs_write, network)'),
            ({"name": "x", "limits": {"timeout_ms": -1}}, clara.CLARA_EINVAL, "x",
             'clara_register_tool: tool "x": limits.timeout_ms must be from 0 to 86400000, not -1'),
            ({"name": "x", "input_schema": {"type": "nope"}}, clara.CLARA_EINVAL, "x",
             "clara_register_tool: tool \"x\": invalid input_schema: at /type: got string, want array; "
             "at /type: value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'"),
            ({"name": "x", "input_schema": {"properties": {"b": {"minimum": "x"}, "a": {"type": 5}}}},
             clara.CLARA_EINVAL, "x",
             "clara_register_tool: tool \"x\": invalid input_schema: at /properties/a/type: got number, want array; "
             "at /properties/a/type: value must be one of 'array', 'boolean', 'integer', 'null', 'number', "
             "'object', 'string'; at /properties/b/minimum: got string, want number"),
            ({"name": "x", "input_schema": {"$ref": "https://example.com/s.json"}}, clara.CLARA_EINVAL, "x",
             None),
            ("not json", clara.CLARA_EINVAL, None, None),
        ]
        for desc, code, name, logged in cases:
            with self.subTest(descriptor=desc):
                before = len(rec.texts())
                with self.assertRaises(clara.ToolError) as cm:
                    self.register(desc, add)
                e = cm.exception
                self.assertEqual(e.errno, code)
                self.assertEqual(e.name, name)
                self.assertEqual(str(e), "clara_register_tool(%r): %s" % (name, self.lib.strerror(code)))
                # Clara released the callback of the failed registration.
                self.assertEqual(live(), 0)
                new = rec.texts()[before:]
                self.assertEqual(len(new), 1, new)
                if logged is not None:
                    self.assertEqual(new[0], logged)
        self.assertTrue(rec.texts()[-2].startswith('clara_register_tool: tool "x": invalid input_schema: '))
        self.assertIn('external $ref "https://example.com/s.json" is not allowed', rec.texts()[-2])
        # The built-in tools were not touched.
        self.assertEnvelope('{"tool":"echo","arguments":{"a":1}}', ok("echo", '{"a":1}'))

    def test_python_side_errors(self):
        with self.assertRaises(TypeError):
            self.register({"name": "x"}, "not callable")
        with self.assertRaises(TypeError):
            self.register(None, add)
        with self.assertRaises(TypeError):
            self.register(42, add)
        with self.assertRaises(ValueError):
            self.register('{"name":"x\0"}', add)
        self.assertEqual(live(), 0)

    def test_unregister_errors(self):
        with self.assertRaises(clara.ToolError) as cm:
            self.lib.unregister_tool("nope")
        self.assertEqual((cm.exception.errno, cm.exception.code, str(cm.exception)),
                         (clara.CLARA_ENOENT, "enoent", "clara_unregister_tool('nope'): no such tool or asynchronous call"))
        for name in ("echo", "kv_get", "tools_list"):
            with self.assertRaises(clara.ToolError) as cm:
                self.lib.unregister_tool(name)
            self.assertEqual((cm.exception.errno, cm.exception.code), (clara.CLARA_EPERM, "eperm"))
            self.assertEqual(cm.exception.name, name)
        with self.assertRaises(TypeError):
            self.lib.unregister_tool(None)
        # Twice: the second time it is gone.
        self.register({"name": "once"}, add)
        self.lib.unregister_tool("once")
        with self.assertRaises(clara.ToolError) as cm:
            self.lib.unregister_tool(b"once")
        self.assertEqual(cm.exception.errno, clara.CLARA_ENOENT)
        # At the C level, NULL is EINVAL.
        self.assertEqual(self.lib._lib.clara_unregister_tool(None), -clara.CLARA_EINVAL)


class TestRelease(ToolTestCase):

    def test_unregister_releases(self):
        self.register(ADD, add)
        self.assertEqual(live(), 1)
        self.lib.unregister_tool("add")
        self.assertEqual(live(), 0)
        self.assertEnvelope('{"tool":"add","arguments":{"a":1,"b":2}}',
                            err("unknown_tool", "Tool not found: add"))

    def test_replace_releases_old(self):
        self.register({"name": "v"}, lambda args: 1)
        (first_id,) = list(_binding._tool_keepalive)
        self.register({"name": "v", "returns": "string"}, lambda args: "two")
        # The old one was idle: released at once.
        self.assertEqual(list(_binding._tool_keepalive), [first_id + 1])
        self.assertEnvelope('{"tool":"v"}', ok("v", '"two"'))
        self.lib.unregister_tool("v")
        self.assertEqual(live(), 0)

    def test_reset_releases_every_tool(self):
        for i in range(5):
            self.register({"name": "t%d" % i}, lambda args: 1)
        self.assertEqual(live(), 5)
        self.lib.reset()
        self.assertEqual(live(), 0)
        self.assertEqual(self.lib.evaluate({"tool": "t0"})["error"], "unknown_tool")

    def blocking_tool(self, name, result, descriptor=None):
        """Register a tool that signals `started` and waits for `go`."""
        started, go, finished = threading.Event(), threading.Event(), threading.Event()

        def tool(args):
            started.set()
            go.wait(20)
            finished.set()
            return result

        self.addCleanup(go.set)     # never leave a Clara thread blocked
        desc = {"name": name, "limits": {"timeout_ms": 20000}}
        desc.update(descriptor or {})
        self.register(desc, tool)
        return started, go, finished

    def call_in_thread(self, request):
        out = []
        t = threading.Thread(target=lambda: out.append(self.lib.evaluate_raw(request)))
        t.start()
        return t, out

    def test_free_only_after_running_call_returns(self):
        started, go, finished = self.blocking_tool("blk", {"ok": True})
        t, out = self.call_in_thread('{"tool":"blk"}')
        self.assertTrue(started.wait(10))
        # Another thread unregisters while the call runs.
        u = threading.Thread(target=self.lib.unregister_tool, args=("blk",))
        u.start()
        u.join()
        self.assertEnvelope('{"tool":"blk"}', err("unknown_tool", "Tool not found: blk"))
        # The running call still holds the callback.
        self.assertEqual(live(), 1)
        go.set()
        t.join()
        # It finished with the tool it started with, then the callback went.
        self.assertEqual(out, [ok("blk", '{"ok":true}')])
        self.assertTrue(wait_until(lambda: live() == 0))

    def test_replace_while_running(self):
        started, go, _ = self.blocking_tool("rep", "old")
        t, out = self.call_in_thread('{"tool":"rep"}')
        self.assertTrue(started.wait(10))
        self.register({"name": "rep"}, lambda args: "new")
        self.assertEqual(live(), 2)
        self.assertEnvelope('{"tool":"rep"}', ok("rep", '"new"'))
        go.set()
        t.join()
        self.assertEqual(out, [ok("rep", '"old"')])
        self.assertTrue(wait_until(lambda: live() == 1))
        self.assertEnvelope('{"tool":"rep"}', ok("rep", '"new"'))

    def test_reset_while_running(self):
        started, go, _ = self.blocking_tool("rst", 1)
        t, out = self.call_in_thread('{"tool":"rst"}')
        self.assertTrue(started.wait(10))
        self.lib.reset()
        self.assertEqual(live(), 1)
        go.set()
        t.join()
        self.assertEqual(out, [ok("rst", "1")])
        self.assertTrue(wait_until(lambda: live() == 0))

    def test_unregister_while_threads_call(self):
        calls = []
        self.register({"name": "busy"}, lambda args: calls.append(1) or args["n"])
        stop = threading.Event()
        unexpected, counts, lock = [], {"success": 0, "unknown_tool": 0}, threading.Lock()
        allowed_errors = (err("unknown_tool", "Tool not found: busy"),
                          err("unknown_tool", "Tool not found: busy (unregistered while the call started)"))

        def worker(i):
            n = 0
            while not stop.is_set():
                n += 1
                env = self.lib.evaluate_raw('{"tool":"busy","arguments":{"n":%d}}' % n)
                with lock:
                    if env == ok("busy", str(n)):
                        counts["success"] += 1
                    elif env in allowed_errors:
                        counts["unknown_tool"] += 1
                    else:
                        unexpected.append(env)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        try:
            self.assertTrue(wait_until(lambda: counts["success"] >= 200))
            self.lib.unregister_tool("busy")
            self.assertTrue(wait_until(lambda: counts["unknown_tool"] >= 200))
        finally:
            stop.set()
            for t in threads:
                t.join()
        self.assertEqual(unexpected, [])
        self.assertEqual(counts["success"], len(calls))
        self.assertTrue(wait_until(lambda: live() == 0))

    def test_c_contract_free_userdata_once(self):
        # The C interface directly, with a counting free_userdata: exactly
        # one call per userdata, for failed, replaced and unregistered tools.
        freed = {}
        lock = threading.Lock()

        def free(userdata):
            with lock:
                freed[userdata] = freed.get(userdata, 0) + 1

        def tool(_userdata, arguments, call):
            self.lib._lib.clara_call_result(call, arguments)
            return 0

        free_cb, tool_cb = _library.FREE_FN(free), _library.TOOL_FN(tool)
        rec = Recorder()
        self.lib.set_log_handler(rec, clara.CLARA_LOG_ERROR)   # the refusals are logged
        reg = self.lib._lib.clara_register_tool
        self.assertEqual(reg(b'{"name":"c1"}', tool_cb, 101, free_cb), clara.CLARA_OK)
        self.assertEqual(reg(b'{"name":"c1"}', tool_cb, 102, free_cb), clara.CLARA_OK)    # replaces 101
        self.assertEqual(reg(b'{"name":"echo"}', tool_cb, 103, free_cb), -clara.CLARA_EPERM)
        self.assertEqual(reg(b'{"name":"bad name"}', tool_cb, 104, free_cb), -clara.CLARA_EINVAL)
        self.assertEqual(reg(None, tool_cb, 105, free_cb), -clara.CLARA_EINVAL)
        self.assertEqual(reg(b'{"name":"c2"}', _library.TOOL_FN(), 106, free_cb), -clara.CLARA_EINVAL)
        self.assertEqual(reg(b'{"name":"c3"}', tool_cb, 107, _library.FREE_FN()), clara.CLARA_OK)  # no free
        self.assertEnvelope('{"tool":"c1","arguments":{"x":1}}', ok("c1", '{"x":1}'))
        self.assertEqual(freed, {101: 1, 103: 1, 104: 1, 105: 1, 106: 1})
        self.assertEqual(rec.texts(), [
            'clara_register_tool: cannot replace "echo": it is a built-in tool',
            "clara_register_tool: invalid tool name \"bad name\": use 1 to 64 letters, digits, '_' or '-'",
            "clara_register_tool: the descriptor and the function must not be NULL",
            "clara_register_tool: the descriptor and the function must not be NULL"])
        self.assertEqual(self.lib._lib.clara_unregister_tool(b"c1"), clara.CLARA_OK)
        self.lib.reset()
        self.assertEqual(freed, {101: 1, 102: 1, 103: 1, 104: 1, 105: 1, 106: 1})

    def test_call_outside_a_call_is_ignored(self):
        rec = Recorder()
        self.lib.set_log_handler(rec, clara.CLARA_LOG_WARN)
        self.lib._lib.clara_call_result(ctypes.c_void_p(987654321), b"1")
        self.lib._lib.clara_call_error(ctypes.c_void_p(987654321), b"x")
        self.assertEqual(rec.texts(),
                         ["clara_call_result/clara_call_error with a call that is not running (ignored)"] * 2)


class TestLimits(ToolTestCase):

    def test_timeout_on_slow_python_tool(self):
        go, finished = threading.Event(), threading.Event()
        ran_to_end = []

        def slow(args):
            go.wait(20)
            ran_to_end.append(True)
            finished.set()
            return "late"

        self.addCleanup(go.set)
        self.register({"name": "slow", "limits": {"timeout_ms": 300}}, slow)
        t0 = time.monotonic()
        env = self.lib.evaluate_raw('{"tool":"slow","id":1}')
        elapsed = time.monotonic() - t0
        self.assertEqual(env, err("timeout", 'tool "slow" ran past its timeout of 300 ms (running)', "1"))
        # At the deadline, not when the tool returns (generous margin).
        self.assertGreaterEqual(elapsed, 0.29)
        self.assertLess(elapsed, 5.0)
        # The tool is still running: its callback is alive.
        self.assertFalse(finished.is_set())
        self.lib.unregister_tool("slow")
        self.assertEqual(live(), 1)
        go.set()
        self.assertTrue(finished.wait(10))
        self.assertEqual(ran_to_end, [True])
        self.assertTrue(wait_until(lambda: live() == 0))

    def test_configured_default_timeout(self):
        go = threading.Event()
        self.addCleanup(go.set)
        self.register({"name": "slow2"}, lambda args: go.wait(20))
        self.lib.configure({"limits": {"timeout_ms": 100}})
        self.assertEnvelope('{"tool":"slow2"}', err("timeout", 'tool "slow2" ran past its timeout of 100 ms (running)'))

    def test_max_concurrency_one(self):
        lock = threading.Lock()
        state = {"active": 0, "peak": 0}

        def one(args):
            with lock:
                state["active"] += 1
                state["peak"] = max(state["peak"], state["active"])
            time.sleep(0.002)
            with lock:
                state["active"] -= 1
            return args["i"]

        self.register({"name": "one", "limits": {"max_concurrency": 1, "timeout_ms": 30000}}, one)
        errors = []

        def worker(i):
            for j in range(10):
                n = i * 100 + j
                env = self.lib.evaluate_raw('{"tool":"one","arguments":{"i":%d}}' % n)
                if env != ok("one", str(n)):
                    errors.append(env)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(state["peak"], 1)

    def test_waiting_for_a_slot_is_bounded_by_the_timeout(self):
        started, go = threading.Event(), threading.Event()
        self.addCleanup(go.set)

        def hold(args):
            if args.get("hold"):
                started.set()
                go.wait(20)
            return "done"

        self.register({"name": "single", "limits": {"max_concurrency": 1, "timeout_ms": 300}}, hold)
        out = []
        t = threading.Thread(target=lambda: out.append(
            self.lib.evaluate_raw('{"tool":"single","arguments":{"hold":true}}')))
        t.start()
        self.assertTrue(started.wait(10))
        self.assertEnvelope('{"tool":"single"}', err(
            "timeout", 'tool "single" ran past its timeout of 300 ms (waiting for one of its 1 concurrent slots)'))
        t.join()
        self.assertEqual(out, [err("timeout", 'tool "single" ran past its timeout of 300 ms (running)')])
        go.set()
        # The slot is held until the tool really returns; then calls pass.
        self.assertTrue(wait_until(lambda: self.lib.evaluate_raw('{"tool":"single"}') == ok("single", '"done"')))

    def test_calls_run_concurrently_without_cap(self):
        # All 8 calls must be inside the tool at once to pass the barrier.
        barrier = threading.Barrier(8, timeout=20)
        self.addCleanup(barrier.abort)

        def meet(args):
            barrier.wait()
            return threading.get_ident()

        self.register({"name": "meet", "limits": {"timeout_ms": 30000}}, meet)
        out = []
        threads = [threading.Thread(target=lambda: out.append(self.lib.evaluate({"tool": "meet"})))
                   for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual([e["status"] for e in out], ["success"] * 8)
        self.assertEqual(len({e["result"] for e in out}), 8)

    def rate_limited(self, env, tool, n, scope):
        """Check a rate_limited envelope whole, with retry_after_ms in
        (0, 60000]."""
        wait = json.loads(env).get("details", {}).get("retry_after_ms")
        self.assertIsInstance(wait, int, env)
        self.assertTrue(0 < wait <= 60000, env)
        self.assertEqual(env, err("rate_limited", 'tool "%s" allows %d call%s a minute per %s; retry in %d ms'
                                  % (tool, n, "" if n == 1 else "s", scope, wait),
                                  details={"retry_after_ms": wait, "rate_per_min": n}))

    def test_rate_per_min(self):
        runs = []
        self.register({"name": "r", "limits": {"rate_per_min": 3}}, lambda args: runs.append(1) or len(runs))
        for i in range(3):
            self.assertEnvelope('{"tool":"r","session":"s%d"}' % i, ok("r", str(i + 1)))
        for _ in range(2):
            self.rate_limited(self.lib.evaluate_raw('{"tool":"r"}'), "r", 3, "tool")
        self.assertEqual(len(runs), 3)     # refused calls never ran

    def test_rate_per_min_per_session(self):
        self.register({"name": "rs", "limits": {"rate_per_min": 1, "rate_scope": "session"}}, lambda args: 1)
        self.assertEnvelope('{"tool":"rs","session":"a"}', ok("rs", "1"))
        self.rate_limited(self.lib.evaluate_raw('{"tool":"rs","session":"a"}'), "rs", 1, "session")
        self.assertEnvelope('{"tool":"rs","session":"b"}', ok("rs", "1"))
        self.assertEnvelope('{"tool":"rs"}', ok("rs", "1"))


class TestPolicyAndTestMode(ToolTestCase):

    def test_config_deny(self):
        runs = []
        self.register({"name": "secret"}, lambda args: runs.append(1) or "s")
        self.lib.configure({"policy": {"deny": ["secret"]}})
        self.assertEnvelope('{"tool":"secret","id":"p"}', err(
            "denied", 'tool "secret" denied by the policy of the configuration: its deny list names it', '"p"'))
        # A request cannot widen what the configuration denies.
        self.assertEnvelope('{"tool":"secret","policy":{"allow":["secret"]}}', err(
            "denied", 'tool "secret" denied by the policy of the configuration: its deny list names it'))
        self.assertEqual(runs, [])
        names = [t["name"] for t in self.lib.evaluate({"tool": "tools_list"})["result"]["tools"]]
        self.assertNotIn("secret", names)
        self.lib.configure({"policy": {"deny": []}})
        self.assertEnvelope('{"tool":"secret"}', ok("secret", '"s"'))

    def test_config_allow_and_request_narrowing(self):
        self.register({"name": "mine"}, lambda args: "m")
        self.lib.configure('[policy]\nallow = ["mine", "echo"]\n')
        self.assertEnvelope('{"tool":"mine"}', ok("mine", '"m"'))
        self.assertEnvelope('{"tool":"get_time"}', err(
            "denied", 'tool "get_time" denied by the policy of the configuration: it is not in its allow list'))
        self.assertEnvelope('{"tool":"mine","policy":{"allow":["echo"]}}', err(
            "denied", 'tool "mine" denied by the policy of the request: it is not in its allow list'))
        self.assertEnvelope('{"tool":"mine","policy":{"deny":["mine"]}}', err(
            "denied", 'tool "mine" denied by the policy of the request: its deny list names it'))
        self.assertEnvelope('{"tool":"mine","policy":{"allow":["mine"],"deny":["echo"]}}', ok("mine", '"m"'))

    def test_request_policy_reaches_nested_listing(self):
        self.register({"name": "mine", "description": "d"}, lambda args: "m")
        env = self.lib.evaluate({"tool": "tools_list", "arguments": {"format": "mcp", "llm_visible_only": False},
                                 "policy": {"allow": ["tools_list", "mine"]}})
        self.assertEqual(env["result"], {"format": "mcp", "tools": [
            {"name": "mine", "description": "d", "inputSchema": {"type": "object", "properties": {}},
             "annotations": {"readOnlyHint": True, "idempotentHint": False, "openWorldHint": False}},
            {"name": "tools_list", "description": env["result"]["tools"][1]["description"],
             "inputSchema": {"type": "object", "properties": {
                 "format": {"enum": ["clara", "openai", "anthropic", "mcp"]},
                 "llm_visible_only": {"type": "boolean"}}, "additionalProperties": False},
             "annotations": {"readOnlyHint": True, "idempotentHint": False, "openWorldHint": False}}]})

    def test_session_policy(self):
        self.register({"name": "mine"}, lambda args: "m")
        self.assertEnvelope('{"tool":"session_policy","session":"s1","arguments":{"deny":["mine"]}}',
                            ok("session_policy", '{"session":"s1","allow":null,"deny":["mine"]}'))
        self.assertEnvelope('{"tool":"mine","session":"s1"}', err(
            "denied", 'tool "mine" denied by the policy of session "s1": its deny list names it'))
        self.assertEnvelope('{"tool":"mine","session":"s2"}', ok("mine", '"m"'))
        self.assertEnvelope('{"tool":"mine"}', ok("mine", '"m"'))
        # Narrowing again keeps the earlier deny, and the allow list then
        # shuts out even session_policy itself.
        self.assertEnvelope('{"tool":"session_policy","session":"s1","arguments":{"allow":["echo","mine"]}}',
                            ok("session_policy", '{"session":"s1","allow":["echo","mine"],"deny":["mine"]}'))
        self.assertEnvelope('{"tool":"mine","session":"s1"}', err(
            "denied", 'tool "mine" denied by the policy of session "s1": its deny list names it'))
        self.assertEnvelope('{"tool":"session_policy","session":"s1","arguments":{"allow":["mine"]}}', err(
            "denied", 'tool "session_policy" denied by the policy of session "s1": it is not in its allow list'))
        # reset() forgets session policies.
        self.lib.reset()
        self.assertEnvelope('{"tool":"echo","session":"s1"}', ok("echo", "{}"))

    @unittest.skipIf(os.environ.get("CLARA_TEST_MODE") or os.environ.get("CLARA_TEST_ALLOW"),
                     "CLARA_TEST_MODE/CLARA_TEST_ALLOW set in the environment")
    def test_test_mode(self):
        runs = []
        for name, caps in (("net", ["network"]), ("writer", ["fs_read", "fs_write"]), ("runner", ["exec"]),
                           ("reader", ["fs_read"]), ("plain", [])):
            self.register({"name": name, "capabilities": caps}, lambda args, n=name: runs.append(n) or n)
        self.assertEnvelope('{"tool":"net"}', ok("net", '"net"'))
        self.assertEqual(self.lib.configure({"test_mode": True})["result"]["config"]["test_mode"], True)
        for name in ("net", "writer", "runner"):
            self.assertEnvelope('{"tool":"%s","id":"t"}' % name,
                                ok(name, '{"test_mode":true,"skipped":"%s"}' % name, '"t"'))
        self.assertEnvelope('{"tool":"reader"}', ok("reader", '"reader"'))
        self.assertEnvelope('{"tool":"plain"}', ok("plain", '"plain"'))
        self.assertEqual(runs, ["net", "reader", "plain"])
        # Skipped calls are still validated first.
        self.register({"name": "net2", "capabilities": ["network"],
                       "input_schema": {"type": "object", "required": ["url"]}}, lambda args: 1)
        self.assertEnvelope('{"tool":"net2"}', err(
            "invalid_args", "tool \"net2\": arguments do not match input_schema: at the top: missing property 'url'",
            details=[{"pointer": "", "message": "missing property 'url'"}]))
        self.lib.configure({"test_mode": False})
        self.assertEnvelope('{"tool":"net"}', ok("net", '"net"'))

    def test_test_mode_from_environment(self):
        # CLARA_TEST_MODE / CLARA_TEST_ALLOW are read when the library loads:
        # a fresh interpreter each.
        child = ("import clara\n"
                 "clara.register_tool({'name': 'net', 'capabilities': ['network']}, lambda a: 'ran')\n"
                 "print(clara.evaluate_raw('{\"tool\":\"net\"}'))\n"
                 "print(clara.configure({})['result']['config']['test_mode'])\n"
                 "clara.configure({'test_mode': True})\n"
                 "print(clara.evaluate_raw('{\"tool\":\"net\"}'))\n")
        skipped = '{"status":"success","tool":"net","result":{"test_mode":true,"skipped":"net"}}'
        ran = '{"status":"success","tool":"net","result":"ran"}'
        for env_extra, want in (({}, [ran, "False", skipped]),
                                ({"CLARA_TEST_MODE": "1"}, [skipped, "False", skipped]),
                                ({"CLARA_TEST_MODE": "1", "CLARA_TEST_ALLOW": "1"}, [ran, "False", ran])):
            with self.subTest(env=env_extra):
                env = child_env(**env_extra)
                if "CLARA_TEST_MODE" not in env_extra:
                    env.pop("CLARA_TEST_MODE", None)
                if "CLARA_TEST_ALLOW" not in env_extra:
                    env.pop("CLARA_TEST_ALLOW", None)
                p = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True,
                                   text=True, timeout=60)
                self.assertEqual((p.returncode, p.stderr), (0, ""))
                self.assertEqual(p.stdout.split("\n")[:-1], want)


class TestBuiltins(ToolTestCase):

    def test_kv(self):
        cases = [
            ('{"tool":"kv_set","session":"a","arguments":{"key":"k","value":{"x":[1,"é"]}}}',
             ok("kv_set", '{"key":"k","created":true}')),
            ('{"tool":"kv_set","session":"a","arguments":{"key":"k2","value":2}}',
             ok("kv_set", '{"key":"k2","created":true}')),
            ('{"tool":"kv_set","session":"a","arguments":{"key":"k2","value":3}}',
             ok("kv_set", '{"key":"k2","created":false}')),
            ('{"tool":"kv_get","session":"a","arguments":{"key":"k"}}',
             ok("kv_get", '{"key":"k","found":true,"value":{"x":[1,"é"]}}')),
            ('{"tool":"kv_get","session":"b","arguments":{"key":"k"}}',
             ok("kv_get", '{"key":"k","found":false}')),
            ('{"tool":"kv_list","session":"a"}', ok("kv_list", '{"keys":["k","k2"],"count":2}')),
            ('{"tool":"kv_list","session":"a","arguments":{"prefix":"k2"}}',
             ok("kv_list", '{"keys":["k2"],"count":1}')),
            ('{"tool":"kv_list"}', ok("kv_list", '{"keys":[],"count":0}')),
            ('{"tool":"kv_delete","session":"a","arguments":{"key":"k"}}',
             ok("kv_delete", '{"key":"k","deleted":true}')),
            ('{"tool":"kv_delete","session":"a","arguments":{"key":"k"}}',
             ok("kv_delete", '{"key":"k","deleted":false}')),
            ('{"tool":"kv_get","session":"a","arguments":{"key":"k2"}}',
             ok("kv_get", '{"key":"k2","found":true,"value":3}')),
            ('{"tool":"kv_set","arguments":{"key":""}}', err(
                "invalid_args", "tool \"kv_set\": arguments do not match input_schema: at the top: "
                                "missing property 'value' (and 1 more)",
                details=[{"pointer": "", "message": "missing property 'value'"},
                         {"pointer": "/key", "message": "minLength: got 0, want 1"}])),
            ('{"tool":"kv_get","arguments":{"key":"%s"}}' % ("k" * 257),
             err("invalid_args", "kv_get: key is 257 bytes, more than the 256 allowed")),
        ]
        for request, want in cases:
            with self.subTest(request=request[:80]):
                self.assertEnvelope(request, want)

    def test_kv_value_limit(self):
        big = "x" * (64 * 1024)
        env = self.lib.evaluate({"tool": "kv_set", "arguments": {"key": "big", "value": big}})
        self.assertEqual(env, {"status": "error", "error": "invalid_args",
                               "message": "kv_set: value is 65538 bytes, more than the 65536 allowed"})
        # The largest value accepted can be read back, although the answer
        # is larger than the default limits.max_output_bytes.
        largest = "y" * (64 * 1024 - 2)
        self.assertEnvelope(json.dumps({"tool": "kv_set", "arguments": {"key": "big", "value": largest}}),
                            ok("kv_set", '{"key":"big","created":true}'))
        self.assertEnvelope('{"tool":"kv_get","arguments":{"key":"big"}}',
                            ok("kv_get", '{"key":"big","found":true,"value":"%s"}' % largest))

    def test_math_eval(self):
        cases = [
            ("1+2*3", ok("math_eval", '{"expression":"1+2*3","value":7}')),
            ("7 % 3 + 2**10", ok("math_eval", '{"expression":"7 % 3 + 2**10","value":1025}')),
            ("sqrt(2)", ok("math_eval", '{"expression":"sqrt(2)","value":1.4142135623730951}')),
            ("max(1, 5, 3) / 2", ok("math_eval", '{"expression":"max(1, 5, 3) / 2","value":2.5}')),
            ("2 > 1", ok("math_eval", '{"expression":"2 > 1","value":true}')),
            ("1/0", err("invalid_args", "math_eval: the result is not a finite number (+Inf)")),
            ("foo(1)", err("invalid_args",
                           'math_eval: not allowed in an arithmetic expression: unknown name "foo" (only pi and e)')),
            ('"a"', err("invalid_args", "math_eval: not allowed in an arithmetic expression: strings")),
        ]
        for expression, want in cases:
            with self.subTest(expression=expression):
                self.assertEnvelope(json.dumps({"tool": "math_eval", "arguments": {"expression": expression}}),
                                    want)
        self.assertEnvelope('{"tool":"math_eval","arguments":{}}', err(
            "invalid_args", "tool \"math_eval\": arguments do not match input_schema: at the top: "
                            "missing property 'expression'",
            details=[{"pointer": "", "message": "missing property 'expression'"}]))
        env = self.lib.evaluate({"tool": "math_eval", "arguments": {"expression": "1+" * 600 + "1"}})
        self.assertEqual(env["error"], "invalid_args")

    def catalog(self, fmt, **extra):
        args = {"format": fmt}
        args.update(extra)
        env = self.lib.evaluate({"tool": "tools_list", "arguments": args})
        self.assertEqual(env["status"], "success", env)
        self.assertEqual(env["result"]["format"], fmt)
        return env["result"]["tools"]

    def test_tools_list_formats(self):
        self.register(ADD, add)
        self.register({"name": "bare", "returns": "string"}, lambda args: "")
        self.register({"name": "hidden", "llm_visible": False}, lambda args: 1)
        schema = ADD["input_schema"]
        empty = {"type": "object", "properties": {}}
        callbacks = ["callback_get", "callback_list", "callback_toggle", "callback_trigger", "callback_upsert"]
        approvals = ["approval_decide", "approvals_list"]  # issue 28
        builtins = sorted(["ask_user", "async_cancel", "async_result", "audit_reopen", "audit_tail", "chat", "chat_history", "chat_reset", "doc_search", "echo", "evaluate", "emit_event", "get_time", "kv_delete", "kv_get", "kv_list",
                           "kv_set", "math_eval", "notifications_drain", "plugin_enable", "plugins_list", "rules_list", "rules_load", "rules_test",
                           "session_end", "session_policy", "state_get", "state_set", "tool_limits", "tools_list"] + callbacks + approvals)
        admin = ("async_cancel", "async_result", "audit_reopen", "audit_tail", "chat", "chat_history", "chat_reset", "emit_event", "evaluate", "plugin_enable", "plugins_list", "rules_list", "rules_load", "rules_test", "session_end",
                 "session_policy", "state_get", "state_set", "tool_limits", "tools_list") + tuple(callbacks) + tuple(approvals)
        every = sorted(builtins + ["add", "bare", "hidden"])

        # LLM formats list only llm_visible tools unless told otherwise.
        visible = [n for n in every if n not in admin + ("hidden",)]
        self.assertEqual([t["function"]["name"] for t in self.catalog("openai")], visible)
        openai = self.catalog("openai", llm_visible_only=False)
        self.assertEqual([t["function"]["name"] for t in openai], every)
        by_name = {t["function"]["name"]: t for t in openai}
        self.assertEqual(by_name["add"], {"type": "function", "function": {
            "name": "add", "description": "Adds two numbers.", "parameters": schema, "strict": True}})
        self.assertEqual(by_name["bare"], {"type": "function", "function": {
            "name": "bare", "description": "", "parameters": empty}})
        self.assertEqual(by_name["echo"], {"type": "function", "function": {
            "name": "echo", "description": "Returns its arguments unchanged.", "parameters": empty}})

        self.assertEqual([t["name"] for t in self.catalog("anthropic")], visible)
        anthropic = self.catalog("anthropic", llm_visible_only=False)
        self.assertEqual([t["name"] for t in anthropic], every)
        by_name = {t["name"]: t for t in anthropic}
        self.assertEqual(by_name["add"], {"name": "add", "description": "Adds two numbers.", "input_schema": schema})
        self.assertEqual(by_name["bare"], {"name": "bare", "description": "", "input_schema": empty})

        self.assertEqual([t["name"] for t in self.catalog("mcp")], visible)
        mcp = self.catalog("mcp", llm_visible_only=False)
        self.assertEqual([t["name"] for t in mcp], every)
        by_name = {t["name"]: t for t in mcp}
        self.assertEqual(by_name["add"], {"name": "add", "description": "Adds two numbers.", "inputSchema": schema,
                                          "annotations": {"readOnlyHint": True, "idempotentHint": False, "openWorldHint": False}})
        self.assertEqual(by_name["bare"], {"name": "bare", "description": "", "inputSchema": empty,
                                           "annotations": {"readOnlyHint": True, "idempotentHint": False, "openWorldHint": False}})
        self.assertEqual(by_name["get_time"], {
            "name": "get_time", "description": "Current date and time in ISO 8601 with offset; optional IANA timezone.",
            "inputSchema": {"type": "object", "properties": {"timezone": {
                "type": "string", "description": "IANA time zone name such as Europe/Paris; default UTC"}},
                "additionalProperties": False},
            "annotations": {"readOnlyHint": True, "idempotentHint": False, "openWorldHint": False}})

        clara_fmt = self.catalog("clara")
        self.assertEqual(clara_fmt, self.lib.evaluate({"tool": "tools_list"})["result"]["tools"])
        by_name = {t["name"]: t for t in clara_fmt}
        self.assertEqual(by_name["add"], {
            "name": "add", "description": "Adds two numbers.", "input_schema": schema, "returns": "json",
            "capabilities": [], "limits": {"rate_scope": "tool"}, "llm_visible": True, "builtin": False})
        self.assertEqual(by_name["bare"], {
            "name": "bare", "description": "", "returns": "string", "capabilities": [],
            "limits": {"rate_scope": "tool"}, "llm_visible": True, "builtin": False})
        self.assertEqual(by_name["hidden"]["llm_visible"], False)
        self.assertEqual([n for n in every if by_name[n]["builtin"]], builtins)

        # What an LLM may see: llm_visible tools only (no admin tools).
        visible = [t["function"]["name"] for t in self.catalog("openai", llm_visible_only=True)]
        self.assertEqual(visible, ["add", "ask_user", "bare", "doc_search", "echo", "get_time", "kv_delete", "kv_get", "kv_list",
                                   "kv_set", "math_eval", "notifications_drain"])
        self.assertEnvelope('{"tool":"tools_list","arguments":{"format":"xml"}}', err(
            "invalid_args", "tool \"tools_list\": arguments do not match input_schema: at /format: "
                            "value must be one of 'clara', 'openai', 'anthropic', 'mcp'",
            details=[{"pointer": "/format", "message": "value must be one of 'clara', 'openai', 'anthropic', 'mcp'"}]))

    def test_audit_tail_has_no_argument_values(self):
        secret = "hunter2-секрет"
        self.register({"name": "login", "input_schema": {
            "type": "object", "properties": {"user": {"type": "string"}, "password": {"type": "string"}}}},
            lambda args: "welcome " + args["user"])
        rec = Recorder()
        self.lib.set_log_handler(rec, clara.CLARA_LOG_DEBUG)
        args_text = json.dumps({"user": "ann", "password": secret}, ensure_ascii=False, separators=(",", ":"))
        self.assertEnvelope('{"tool":"login","session":"u1","arguments":%s}' % args_text,
                            ok("login", '"welcome ann"'))
        self.assertEqual(self.lib.evaluate({"tool": "login", "arguments": {"password": 5}})["error"],
                         "invalid_args")
        raw = self.lib.evaluate_raw('{"tool":"audit_tail","arguments":{"n":2}}')
        self.lib.set_log_handler(None, clara.CLARA_LOG_OFF)
        self.assertNotIn("hunter2", raw)
        self.assertNotIn("секрет", raw)
        records = json.loads(raw)["result"]["records"]
        self.assertEqual(len(records), 2)
        first, second = records
        self.assertEqual(list(first), ["ts", "session", "tool", "args_sha256", "duration_us", "status", "error", "decision_id"])
        self.assertRegex(first["decision_id"], r"^[0-9a-f]{8}-\d+-\d+$")
        self.assertEqual({k: v for k, v in first.items() if k not in ("ts", "duration_us", "decision_id")}, {
            "session": "u1", "tool": "login",
            "args_sha256": hashlib.sha256(args_text.encode("utf-8")).hexdigest(),
            "status": "success", "error": None})
        self.assertRegex(first["ts"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
        self.assertIsInstance(first["duration_us"], int)
        self.assertEqual({k: v for k, v in second.items() if k not in ("ts", "duration_us", "decision_id")}, {
            "session": "default", "tool": "login",
            "args_sha256": hashlib.sha256(b'{"password":5}').hexdigest(),
            "status": "error", "error": "invalid_args"})
        # Nor does the log carry the values: only audit lines and messages.
        logged = "\n".join(rec.texts())
        self.assertNotIn("hunter2", logged)
        self.assertIn('"args_sha256":"%s"' % first["args_sha256"], logged)
        # audit_tail's own record is added once it has run.
        last = self.lib.evaluate({"tool": "audit_tail", "arguments": {"n": 1}})["result"]["records"]
        self.assertEqual([(r["tool"], r["args_sha256"]) for r in last],
                         [("audit_tail", hashlib.sha256(b'{"n":2}').hexdigest())])
        many = self.lib.evaluate({"tool": "audit_tail", "arguments": {"n": 50}})["result"]["records"]
        self.assertTrue(4 <= len(many) <= 50)
        self.assertNotIn("hunter2", json.dumps(many, ensure_ascii=False))
        self.assertEqual(self.lib.evaluate({"tool": "audit_tail", "arguments": {"n": 1001}})["error"],
                         "invalid_args")

    def test_audit_tail_whole_ring(self):
        # 1000 records are about 200 KB, more than the default
        # limits.max_output_bytes: audit_tail has a limit of its own.
        for i in range(1000):
            self.lib.evaluate_raw('{"tool":"echo","arguments":{"i":%d}}' % i)
        env = self.lib.evaluate({"tool": "audit_tail", "arguments": {"n": 1000}})
        self.assertEqual(env["status"], "success", str(env)[:300])
        records = env["result"]["records"]
        self.assertEqual(len(records), 1000)
        self.assertEqual(records[-1]["tool"], "echo")
        self.assertEqual(records[-1]["args_sha256"], hashlib.sha256(b'{"i":999}').hexdigest())

    def test_audit_file(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "audit.jsonl")
            self.lib.configure({"audit": {"path": path}})
            self.register({"name": "login"}, lambda args: "ok")
            self.lib.evaluate({"tool": "login", "arguments": {"password": "hunter2"}})
            self.lib.evaluate({"tool": "nope", "arguments": {"password": "hunter2"}})
            self.lib.configure({"audit": {"path": ""}})    # closes the file
            with open(path, encoding="utf-8") as f:
                text = f.read()
        self.assertNotIn("hunter2", text)
        lines = [json.loads(line) for line in text.splitlines()]
        self.assertEqual([(r["tool"], r["status"], r["error"]) for r in lines],
                         [("login", "success", None), ("nope", "error", "unknown_tool")])
        digest = hashlib.sha256(b'{"password":"hunter2"}').hexdigest()
        self.assertEqual([r["args_sha256"] for r in lines], [digest, digest])


if __name__ == "__main__":
    unittest.main()
