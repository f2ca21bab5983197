"""What goes wrong inside Python code that Clara calls: exceptions in
tools (the host survives, the caller gets tool_failed, the message goes to
the log) and in log handlers (swallowed)."""

import asyncio
import json
import logging
import threading
import unittest

import clara
from clara_testcase import ClaraTestCase


class Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.messages = []

    def __call__(self, level, message):
        with self.lock:
            self.messages.append((level, message))

    def failures(self):
        with self.lock:
            return [(lvl, m) for lvl, m in self.messages if not m.startswith("audit ")]


class TestExceptionsInTools(ClaraTestCase):

    def test_message_goes_to_the_log(self):
        @clara.tool
        def lookup(city: str) -> dict:
            raise LookupError("no weather for %s" % city)

        rec = Recorder()
        self.lib.set_log_handler(rec, clara.CLARA_LOG_DEBUG)

        with self.assertLogs("clara", logging.DEBUG) as logs:
            with self.assertRaises(clara.ToolFailed) as cm:
                clara.call("lookup", city="Atlantis")
        self.assertEqual(cm.exception.message, "LookupError: no weather for Atlantis")
        # Clara's log has the call's failure, by its code only: the tool's
        # own message may quote its arguments, so it goes to the caller ...
        ((level, line),) = rec.failures()
        self.assertEqual(level, clara.CLARA_LOG_DEBUG)
        self.assertRegex(line, r'^call of "lookup" failed: tool_failed tool=lookup session=default decision_id=[0-9a-f]{8}-\d+-\d+$')
        # ... and Python's logging the traceback, at debug level.
        (record,) = logs.records
        self.assertEqual((record.levelno, record.getMessage()), (logging.DEBUG, "tool 'lookup' raised LookupError"))
        self.assertIs(record.exc_info[0], LookupError)

    def test_host_survives_every_kind_of_exception(self):
        class Weird(BaseException):
            def __str__(self):
                raise RuntimeError("no str for you")

        raised = [SystemExit(2), KeyboardInterrupt(), GeneratorExit(), Weird(), RecursionError("deep"),
                  MemoryError(), ValueError("a\0b")]
        for exc in raised:
            with self.subTest(exception=type(exc).__name__):
                def bad(exc=exc):
                    raise exc
                clara.tool(name="bad")(bad)
                with self.assertRaises(clara.ToolFailed) as cm:
                    clara.call("bad")
                self.assertTrue(cm.exception.message.startswith(type(exc).__name__), cm.exception.message)
        self.assertEqual(clara.call("echo", still="alive"), {"still": "alive"})

    def test_async_tool_exception(self):
        rec = Recorder()
        self.lib.set_log_handler(rec, clara.CLARA_LOG_DEBUG)

        @clara.tool
        async def bad_async() -> None:
            await asyncio.sleep(0)
            raise ValueError("async boom")

        with self.assertRaises(clara.ToolFailed) as cm:
            clara.call("bad_async")
        self.assertEqual(cm.exception.message, "ValueError: async boom")
        self.assertTrue(rec.failures()[-1][1].startswith('call of "bad_async" failed: tool_failed '), rec.failures())

    def test_wrong_arguments_for_the_function(self):
        # An explicit schema that lets through what the signature refuses:
        # the TypeError of the call is the tool's failure.
        @clara.tool(input_schema={"type": "object"})
        def two(a: int, b: int) -> int:
            return a + b

        with self.assertRaises(clara.ToolFailed) as cm:
            clara.call("two", a=1)
        self.assertIn("TypeError", cm.exception.message)
        self.assertIn("'b'", cm.exception.message)

    def test_unencodable_results(self):
        @clara.tool
        def nan() -> float:
            return float("nan")

        @clara.tool
        def obj() -> object:
            return object()

        try:
            json.dumps(float("nan"), allow_nan=False)
        except ValueError as e:
            nan_message = "ValueError: %s" % e     # its wording changes with Python's version
        with self.assertRaises(clara.ToolFailed) as cm:
            clara.call("nan")
        self.assertEqual(cm.exception.message, nan_message)
        with self.assertRaises(clara.ToolFailed) as cm:
            clara.call("obj")
        self.assertEqual(cm.exception.message, "TypeError: Object of type object is not JSON serializable")


class TestExceptionsInHandlers(ClaraTestCase):

    def test_raising_handler_does_not_break_calls(self):
        seen = []

        def handler(level, message):
            seen.append(message)
            raise RuntimeError("handler bug")

        self.lib.set_log_handler(handler, clara.CLARA_LOG_DEBUG)

        @clara.tool
        def fails() -> None:
            raise ValueError("x")

        with self.assertRaises(clara.ToolFailed):
            clara.call("fails")
        with self.assertRaises(clara.UnknownTool):
            clara.call("nope")
        self.assertEqual(clara.call("echo", a=1), {"a": 1})
        self.assertTrue(any(m.startswith('call of "fails" failed: tool_failed ') for m in seen), seen)
        self.assertTrue(any(m.startswith('call of "nope" failed: unknown_tool ') for m in seen), seen)

    def test_exiting_handler_from_threads(self):
        def handler(level, message):
            raise SystemExit(1)

        self.lib.set_log_handler(handler, clara.CLARA_LOG_DEBUG)
        errors = []

        def work():
            try:
                for _ in range(200):
                    try:
                        clara.call("nope")
                    except clara.UnknownTool:
                        pass
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])


if __name__ == "__main__":
    unittest.main()
