"""clara.call() and its exceptions: one class per error code of the
protocol, each raised by a real call where one can provoke it, and check()
for envelopes."""

import pickle
import threading
import unittest

import clara
from clara_testcase import ClaraTestCase

# code -> class, as SPEC §2 lists the codes.
CLASSES = {
    "invalid_json": clara.InvalidJSON,
    "invalid_request": clara.InvalidRequest,
    "unknown_tool": clara.UnknownTool,
    "invalid_args": clara.InvalidArgs,
    "denied": clara.Denied,
    "rate_limited": clara.RateLimited,
    "timeout": clara.Timeout,
    "output_too_large": clara.OutputTooLarge,
    "tool_failed": clara.ToolFailed,
    "internal": clara.InternalError,
    "budget_exhausted": clara.BudgetExhausted,  # issue 28
    "blocked": clara.Blocked,
    "unavailable": clara.Unavailable,  # issue 31
}


class TestClasses(unittest.TestCase):

    def test_one_class_per_code(self):
        self.assertEqual(len(set(CLASSES.values())), len(CLASSES))
        for code, klass in CLASSES.items():
            with self.subTest(code=code):
                self.assertTrue(issubclass(klass, clara.ClaraError))
                self.assertEqual(klass.code, code)
                self.assertIn(klass.__name__, clara.__all__)

    def test_from_envelope(self):
        for code, klass in CLASSES.items():
            with self.subTest(code=code):
                env = {"status": "error", "id": 7, "error": code, "message": "m " + code, "details": [code]}
                e = clara.ClaraError.from_envelope(env)
                self.assertIs(type(e), klass)
                self.assertEqual((e.code, e.message, e.details, e.envelope, str(e)),
                                 (code, "m " + code, [code], env, "m " + code))
                self.assertIsNot(e.envelope, env)    # a copy
                self.assertEqual(repr(e), "%s(%r, code=%r)" % (klass.__name__, "m " + code, code))
                with self.assertRaises(klass):
                    clara.check(env)

    def test_unknown_code_is_the_base_class(self):
        env = {"status": "error", "error": "from_the_future", "message": "new"}
        e = clara.ClaraError.from_envelope(env)
        self.assertIs(type(e), clara.ClaraError)
        self.assertEqual((e.code, e.message, e.details), ("from_the_future", "new", None))

    def test_malformed_envelope(self):
        e = clara.ClaraError.from_envelope({"status": "error"})
        self.assertEqual((type(e), e.code, e.message), (clara.ClaraError, "error", "error"))

    def test_check(self):
        self.assertEqual(clara.check({"status": "success", "tool": "echo", "result": {"a": 1}}), {"a": 1})
        self.assertIsNone(clara.check({"status": "success", "result": None}))

    def test_retry_after_ms(self):
        e = clara.ClaraError.from_envelope({"status": "error", "error": "rate_limited", "message": "m",
                                            "details": {"retry_after_ms": 1500, "rate_per_min": 2}})
        self.assertEqual(e.retry_after_ms, 1500)
        for details in (None, [], {"retry_after_ms": "soon"}, {"retry_after_ms": True}):
            e = clara.RateLimited("m", details=details)
            self.assertIsNone(e.retry_after_ms)

    def test_pickle_keeps_everything(self):
        env = {"status": "error", "error": "rate_limited", "message": "slow down",
               "details": {"retry_after_ms": 9}}
        for e in (clara.ClaraError.from_envelope(env),
                  clara.RegistrationError(clara.CLARA_EPERM, "no", "echo")):
            with self.subTest(error=type(e).__name__):
                back = pickle.loads(pickle.dumps(e))
                self.assertIs(type(back), type(e))
                self.assertEqual(back.__dict__, e.__dict__)
                self.assertEqual(str(back), str(e))

    def test_registration_error(self):
        self.assertIs(clara.ToolError, clara.RegistrationError)
        e = clara.RegistrationError(clara.CLARA_EINVAL, "bad", "x")
        self.assertEqual((e.errno, e.code, e.name, e.message), (clara.CLARA_EINVAL, "einval", "x", "bad"))
        self.assertIsInstance(e, clara.ClaraError)


class TestRaisedByCalls(ClaraTestCase):
    """Each class, raised by clara.call() for a real call ("internal" has no
    trigger from outside, being a bug: TestClasses covers its class)."""

    def test_success(self):
        self.assertEqual(clara.call("echo", message="hello"), {"message": "hello"})
        self.assertEqual(clara.call("echo"), {})
        self.assertEqual(self.lib.call("echo", tool="x", session="s"), {"tool": "x", "session": "s"})

    def test_unknown_tool(self):
        with self.assertRaises(clara.UnknownTool) as cm:
            clara.call("nonexistent", a=1)
        e = cm.exception
        self.assertEqual((e.code, e.message, e.details), ("unknown_tool", "Tool not found: nonexistent", None))
        self.assertEqual(e.envelope, {"status": "error", "error": "unknown_tool",
                                      "message": "Tool not found: nonexistent"})

    def test_invalid_args(self):
        with self.assertRaises(clara.InvalidArgs) as cm:
            clara.call("get_time", timezone=5)
        self.assertEqual(cm.exception.details, [{"pointer": "/timezone", "message": "got number, want string"}])

    def test_denied(self):
        self.lib.configure({"policy": {"deny": ["get_time"]}})
        with self.assertRaises(clara.Denied) as cm:
            clara.call("get_time")
        self.assertEqual(cm.exception.code, "denied")
        self.assertIn("get_time", cm.exception.message)

    def test_rate_limited(self):
        self.lib.register_tool({"name": "once", "limits": {"rate_per_min": 1}}, lambda args: "ok")
        self.assertEqual(clara.call("once"), "ok")
        with self.assertRaises(clara.RateLimited) as cm:
            clara.call("once")
        e = cm.exception
        self.assertIsInstance(e.retry_after_ms, int)
        self.assertGreater(e.retry_after_ms, 0)
        self.assertEqual(e.details["retry_after_ms"], e.retry_after_ms)

    def test_timeout(self):
        go = threading.Event()
        self.addCleanup(go.set)
        self.lib.register_tool({"name": "stuck", "limits": {"timeout_ms": 50}}, lambda args: go.wait(20))
        with self.assertRaises(clara.Timeout) as cm:
            clara.call("stuck")
        self.assertEqual(cm.exception.message, 'tool "stuck" ran past its timeout of 50 ms (running)')

    def test_output_too_large(self):
        self.lib.register_tool({"name": "big", "limits": {"max_output_bytes": 10}}, lambda args: ["x" * 20])
        with self.assertRaises(clara.OutputTooLarge) as cm:
            clara.call("big")
        self.assertEqual(cm.exception.details, {"bytes": 24, "max_output_bytes": 10})

    def test_tool_failed(self):
        def broken(args):
            raise KeyError("city")
        self.lib.register_tool({"name": "broken"}, broken)
        with self.assertRaises(clara.ToolFailed) as cm:
            clara.call("broken")
        self.assertEqual(cm.exception.message, "KeyError: 'city'")

    def test_invalid_request(self):
        self.lib.configure({"limits": {"max_request_bytes": 64}})
        with self.assertRaises(clara.InvalidRequest) as cm:
            clara.call("echo", text="x" * 100)
        self.assertEqual(cm.exception.code, "invalid_request")

    def test_invalid_json(self):
        # call() always writes valid JSON; evaluate() passes text as it is.
        with self.assertRaises(clara.InvalidJSON) as cm:
            clara.check(clara.evaluate('{"tool":'))
        self.assertTrue(cm.exception.message.startswith("Invalid JSON: "))

    def test_arguments_python_cannot_send(self):
        with self.assertRaises(TypeError):
            clara.call(5)
        with self.assertRaises(TypeError):
            clara.call(b"echo")
        with self.assertRaises(ValueError):
            clara.call("echo", x=float("nan"))
        with self.assertRaises(TypeError):
            clara.call("echo", x=object())
        with self.assertRaises(TypeError):
            clara.call("echo", x={(1, 2): 3})

    def test_arguments_are_json(self):
        import dataclasses

        @dataclasses.dataclass
        class P:
            x: int
            tags: tuple

        self.assertEqual(clara.call("echo", p=P(1, ("a", "b")), n=None, t=True, f=1.5, s="é\0", u=[{}]),
                         {"p": {"x": 1, "tags": ["a", "b"]}, "n": None, "t": True, "f": 1.5, "s": "é\0", "u": [{}]})


if __name__ == "__main__":
    unittest.main()
