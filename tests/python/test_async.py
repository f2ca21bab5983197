"""asyncio: async def tools (on the package's own event loop), and
call_async / evaluate_async (submitted to Clara, completed through its
eventfd), cancellation included."""

import asyncio
import threading
import unittest

import clara
from clara_testcase import ClaraTestCase


class TestAsyncTools(ClaraTestCase):

    def test_async_tool_runs_on_the_package_loop(self):
        seen = []

        @clara.tool
        async def wait_and_add(a: int, b: int = 1) -> int:
            """Adds after yielding to the loop."""
            await asyncio.sleep(0)
            loop = asyncio.get_running_loop()
            seen.append((threading.current_thread().name, loop))
            return a + b

        self.assertEqual(clara.call("wait_and_add", a=2), 3)
        self.assertEqual(clara.call("wait_and_add", a=2, b=5), 7)
        (name1, loop1), (name2, loop2) = seen
        self.assertEqual((name1, name2), ("clara-asyncio", "clara-asyncio"))
        self.assertIs(loop1, loop2)         # one loop, kept
        # The schema came from the hints, as for def.
        (desc,) = [t for t in clara.tools() if t["name"] == "wait_and_add"]
        self.assertEqual(desc["input_schema"]["required"], ["a"])
        self.assertEqual(desc["description"], "Adds after yielding to the loop.")

    def test_async_tool_errors(self):
        @clara.tool
        async def fails(why: str) -> None:
            await asyncio.sleep(0)
            raise LookupError(why)

        with self.assertRaises(clara.ToolFailed) as cm:
            clara.call("fails", why="no such city")
        self.assertEqual(cm.exception.message, "LookupError: no such city")
        with self.assertRaises(clara.InvalidArgs):
            clara.call("fails")

    def test_calls_overlap_on_the_loop(self):
        # Two calls of an async tool are on the loop at the same time: the
        # first waits for an event the second sets. (Sequential running
        # would time out.)
        gate = {}

        @clara.tool(limits={"timeout_ms": 20000})
        async def rendezvous(role: str) -> str:
            event = gate.setdefault("e", asyncio.Event())
            if role == "waiter":
                await event.wait()
                return "released"
            event.set()
            return "set"

        out = []
        t = threading.Thread(target=lambda: out.append(clara.call("rendezvous", role="waiter")))
        t.start()
        while "e" not in gate:          # the waiter is on the loop
            threading.Event().wait(0.01)
        self.assertEqual(clara.call("rendezvous", role="setter"), "set")
        t.join()
        self.assertEqual(out, ["released"])

    def test_async_tool_calls_clara_async(self):
        @clara.tool
        async def outer(x: int) -> dict:
            inner = await clara.call_async("echo", x=x)
            env = await clara.evaluate_async({"tool": "nope"})
            return {"inner": inner, "error": env["error"]}

        self.assertEqual(clara.call("outer", x=3), {"inner": {"x": 3}, "error": "unknown_tool"})

    def test_def_returning_an_awaitable(self):
        async def later(n: int) -> int:
            await asyncio.sleep(0)
            return n * 10

        def wrapper(n: int):
            return later(n)

        clara.tool(wrapper)
        self.assertEqual(clara.call("wrapper", n=4), 40)


class TestAsyncCalls(ClaraTestCase):

    def test_call_and_evaluate(self):
        async def main():
            a = await clara.call_async("echo", message="hi")
            b = await clara.evaluate_async({"tool": "echo", "arguments": {"n": 1}})
            c = await self.lib.call_async("echo", k=True)
            d = await self.lib.evaluate_async('{"tool":"nope"}')
            return a, b, c, d

        a, b, c, d = asyncio.run(main())
        self.assertEqual(a, {"message": "hi"})
        self.assertEqual(b, {"status": "success", "tool": "echo", "result": {"n": 1}})
        self.assertEqual(c, {"k": True})
        self.assertEqual(d["error"], "unknown_tool")

    def test_errors_raise_in_the_awaiting_task(self):
        async def main():
            with self.assertRaises(clara.UnknownTool):
                await clara.call_async("nope")
            with self.assertRaises(clara.InvalidArgs):
                await clara.call_async("get_time", timezone=1)
            with self.assertRaises(TypeError):
                await clara.call_async("echo", x=object())

        asyncio.run(main())

    def test_loop_stays_free_while_a_call_waits(self):
        # A call blocked in a tool does not block the loop: another task
        # runs meanwhile and releases it.
        go = threading.Event()
        self.addCleanup(go.set)
        self.lib.register_tool({"name": "gate", "limits": {"timeout_ms": 20000}}, lambda args: go.wait(20))

        async def main():
            waiting = asyncio.ensure_future(clara.call_async("gate"))
            await asyncio.sleep(0)
            ticks = 0
            while not go.is_set():
                ticks += 1          # the loop runs this while the call waits
                await asyncio.sleep(0.001)
                if ticks == 5:
                    go.set()
            return await waiting, ticks

        result, ticks = asyncio.run(main())
        self.assertTrue(result)
        self.assertGreaterEqual(ticks, 5)

    def test_many_at_once(self):
        @clara.tool(limits={"timeout_ms": 20000})
        async def twice(n: int) -> int:
            await asyncio.sleep(0)
            return 2 * n

        async def main():
            return await asyncio.gather(*(clara.call_async("twice", n=i) for i in range(100)))

        self.assertEqual(asyncio.run(main()), [2 * i for i in range(100)])

    def test_session_call_async(self):
        async def main():
            s = clara.Session("async-s")
            await s.call_async("kv_set", key="k", value="v")
            return await s.call_async("kv_get", key="k")

        self.assertEqual(asyncio.run(main())["value"], "v")
        self.assertFalse(clara.Session("other").call("kv_get", key="k")["found"])

    def test_cancellation(self):
        # Cancelling the awaiting task raises CancelledError in it at once;
        # the call already running in Clara runs to its end (the tool cannot
        # be interrupted), and its result is dropped.
        started, go, finished = threading.Event(), threading.Event(), threading.Event()
        self.addCleanup(go.set)

        def slow(args):
            started.set()
            go.wait(20)
            finished.set()
            return "late"

        self.lib.register_tool({"name": "slow", "limits": {"timeout_ms": 20000}}, slow)

        async def main():
            task = asyncio.ensure_future(clara.call_async("slow"))
            while not started.is_set():
                await asyncio.sleep(0.001)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                return "cancelled", finished.is_set()
            return "not cancelled", finished.is_set()

        self.assertEqual(asyncio.run(main()), ("cancelled", False))
        go.set()
        self.assertTrue(finished.wait(10))   # it ran to its end

    def test_completion_comes_through_the_eventfd(self):
        # No thread waits for a call: the pool of the old design is never
        # made, and the loop watches Clara's eventfd.
        from clara import _aio

        async def main():
            return await asyncio.gather(*(clara.call_async("echo", i=i) for i in range(50)))

        self.assertEqual(asyncio.run(main()), [{"i": i} for i in range(50)])
        self.assertIsNone(_aio._pool)
        self.assertEqual(_aio._waiting, {})

    def test_refusals_before_any_tool_runs(self):
        async def main():
            bad = await clara.evaluate_async('{"tool":"echo","argumens":{}}')
            broken = await clara.evaluate_async('{"tool":')
            return bad, broken

        bad, broken = asyncio.run(main())
        self.assertEqual((bad["error"], broken["error"]), ("invalid_request", "invalid_json"))

    def test_past_max_running(self):
        go = threading.Event()
        self.addCleanup(go.set)
        self.lib.register_tool({"name": "held", "limits": {"timeout_ms": 20000}}, lambda args: go.wait(20))
        self.lib.configure({"async": {"max_running": 1}})

        async def main():
            first = asyncio.ensure_future(clara.call_async("held"))
            await asyncio.sleep(0.05)
            with self.assertRaises(clara.RateLimited) as cm:
                await clara.call_async("echo")
            go.set()
            return await first, cm.exception.message

        held, message = asyncio.run(main())
        self.assertTrue(held)
        self.assertIn("async.max_running", message)

    def test_cancelling_cancels_the_call_in_clara(self):
        # The call is cancelled inside Clara and its (cancelled) answer is
        # collected: nothing is left waiting in the package or in Clara.
        from clara import _aio
        started, go = threading.Event(), threading.Event()
        self.addCleanup(go.set)

        def held(args):
            started.set()
            go.wait(20)
            return 1

        self.lib.register_tool({"name": "held2", "limits": {"timeout_ms": 20000}}, held)

        async def main():
            task = asyncio.ensure_future(clara.call_async("held2"))
            while not started.is_set():
                await asyncio.sleep(0.001)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        self.assertEqual(_aio._waiting, {})
        go.set()
        took = self.lib._take_string(self.lib._lib.clara_async_take(0), "take")
        self.assertNotIn(b'"tool":"held2"', took)    # collected at cancellation


if __name__ == "__main__":
    unittest.main()
