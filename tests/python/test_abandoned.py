"""Python code that goes on running after its caller gave up on it (issue
25, finding 1): a tool past its deadline, a question of ask_user whose call
was cancelled. Each holds a thread until it returns; Clara bounds how many
may (limits.max_overdue_calls, limits.max_open_questions), refuses beyond,
and tells an input handler that its question was cancelled
(input_cancelled), so that it can return."""

import asyncio
import threading
import time
import unittest

import clara
from clara_testcase import ClaraTestCase


def threads_now():
    """The process's threads (Python's and every other), from /proc."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no Threads: line in /proc/self/status")


class TestOverdueTools(ClaraTestCase):

    def test_a_tool_that_never_returns_is_bounded(self):
        self.lib.configure({"limits": {"max_overdue_calls": 4}})
        gate = threading.Event()
        self.addCleanup(gate.set)
        inside = []

        def stuck(args):
            inside.append(1)
            try:
                return gate.wait(60)
            finally:
                inside.pop()
        self.lib.register_tool({"name": "stuck", "limits": {"timeout_ms": 5}}, stuck)
        self.lib.register_tool({"name": "quick"}, lambda args: "quick")
        before = threads_now()
        timeouts = refused = 0
        for _ in range(12):
            try:
                clara.call("stuck")
            except clara.Timeout:
                timeouts += 1
            except clara.ToolFailed as e:
                self.assertTrue(e.message.startswith(
                    'tool "stuck" was not started: 4 calls of C or Python tools ran past their deadline and have '
                    'not returned (limits.max_overdue_calls)'), e.message)
                refused += 1
        grown = threads_now() - before
        # A call abandoned before a thread started it never runs, and stops
        # counting once a worker sees it: on a busy machine more than 4
        # calls may time out, but never more than 4 run.
        self.assertEqual(timeouts + refused, 12)
        self.assertGreaterEqual(timeouts, 4)
        self.assertGreaterEqual(refused, 6)
        self.assertLessEqual(len(inside), 4)
        self.assertLessEqual(grown, 4 + 8, "12 calls past their deadline: +%d threads" % grown)
        # Every Python tool shares the bound: they share the threads.
        with self.assertRaises(clara.ToolFailed):
            clara.call("quick")
        # Once the tool returns, calls run again.
        gate.set()
        deadline = time.monotonic() + 30
        while True:
            try:
                self.assertEqual(clara.call("quick"), "quick")
                break
            except clara.ToolFailed:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.005)


class TestCancelledQuestions(ClaraTestCase):

    def tearDown(self):
        clara.set_input_handler(None)
        clara.set_event_handler(None)
        super().tearDown()

    def test_the_handler_hears_of_the_cancel_and_returns(self):
        self.lib.configure({"limits": {"max_open_questions": 4}})
        lock = threading.Lock()
        cancelled = {}          # id -> threading.Event, set by input_cancelled
        entered = []
        returned = []           # (id, whether it heard of the cancel)
        asked = threading.Condition(lock)

        def cancel_event(qid):
            return cancelled.setdefault(qid, threading.Event())

        def on_event(event):
            if event.get("event") == "input_cancelled":
                with lock:
                    ev = cancel_event(event["id"])
                ev.set()

        def handler(request):
            with lock:
                ev = cancel_event(request["id"])
                entered.append(request["id"])
                asked.notify_all()
            heard = ev.wait(10)
            with lock:
                returned.append((request["id"], heard))
            return None

        clara.set_event_handler(on_event)
        clara.set_input_handler(handler)
        n = 12

        async def ask_and_cancel(i):
            task = asyncio.ensure_future(clara.call_async("ask_user", prompt="Which city?"))
            while True:
                with lock:
                    if len(entered) > i:
                        break
                if task.done():
                    return task.result()    # refused: raises
                await asyncio.sleep(0.001)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        async def main():
            for i in range(n):
                await ask_and_cancel(i)

        asyncio.run(main())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with lock:
                if len(returned) == n:
                    break
            time.sleep(0.005)
        with lock:
            self.assertEqual(len(entered), n)
            self.assertEqual(sorted(returned), sorted((qid, True) for qid in entered))


if __name__ == "__main__":
    unittest.main()
