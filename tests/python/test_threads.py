"""Concurrent calls from Python threads (ctypes releases the GIL)."""

import asyncio
import json
import threading
import unittest

import clara
from clara_testcase import ClaraTestCase

THREADS = 8
CALLS = 3000


class TestThreads(ClaraTestCase):

    def run_threads(self, target, n=THREADS):
        errors = []

        def wrap(i):
            try:
                target(i, errors)
            except BaseException as e:  # pragma: no cover - reported below
                errors.append("thread %d: %r" % (i, e))

        threads = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors[:5], [])

    def test_distinct_payloads(self):
        lib = self.lib

        def work(i, errors):
            for j in range(CALLS):
                k = j % 4
                if k == 0:      # simple form
                    req = '{"thread":%d,"call":%d,"text":"t%d-c%d é"}' % (i, j, i, j)
                    want = '{"status":"success","tool":"echo","result":%s}' % req
                elif k == 1:    # explicit, with id
                    args = '{"n":%d,"list":[%d,%d]}' % (j, i, j)
                    req = '{"tool":"echo","id":"%d-%d","arguments":%s}' % (i, j, args)
                    want = '{"status":"success","id":"%d-%d","tool":"echo","result":%s}' % (i, j, args)
                elif k == 2:    # unknown tool
                    req = '{"tool":"t%d_%d","id":%d}' % (i, j, j)
                    want = ('{"status":"error","id":%d,"error":"unknown_tool",'
                            '"message":"Tool not found: t%d_%d"}' % (j, i, j))
                else:           # invalid JSON
                    req = '{"thread":%d,' % i
                    want = ('{"status":"error","error":"invalid_json","message":'
                            '"Invalid JSON: unexpected end of input at byte %d"}' % len(req))
                got = lib.evaluate_raw(req)
                if got != want:
                    errors.append("thread %d call %d: %s != %s" % (i, j, got, want))
                    return

        self.run_threads(work)

    def test_parsed_and_get_time(self):
        lib = self.lib

        def work(i, errors):
            for j in range(CALLS // 4):
                payload = {"thread": i, "call": j, "s": "✓" * (j % 7)}
                env = lib.evaluate(payload)
                if env != {"status": "success", "tool": "echo", "result": payload}:
                    errors.append("thread %d: %r" % (i, env))
                    return
                if j % 50 == 0:
                    env = lib.evaluate({"tool": "get_time", "arguments": {"timezone": "Asia/Kolkata"}})
                    if env["status"] != "success" or not env["result"]["time"].endswith("+05:30"):
                        errors.append("thread %d: %r" % (i, env))
                        return
                if lib.json_get(json.dumps(payload), "call") != j:
                    errors.append("thread %d: json_get" % i)
                    return

        self.run_threads(work)

    def test_configure_while_calling(self):
        # Explicit requests do not depend on the settings being changed, so
        # every answer is known while another thread reconfigures.
        lib = self.lib
        stop = threading.Event()

        def reconfigure():
            n = 0
            while not stop.is_set():
                env = lib.configure({"limits": {"max_depth": 256 + n % 256}})
                assert env["status"] == "success", env
                n += 1

        rc = threading.Thread(target=reconfigure)
        rc.start()
        try:
            def work(i, errors):
                for j in range(CALLS // 3):
                    req = '{"tool":"echo","arguments":{"i":%d,"j":%d}}' % (i, j)
                    got = lib.evaluate_raw(req)
                    want = '{"status":"success","tool":"echo","result":{"i":%d,"j":%d}}' % (i, j)
                    if got != want:
                        errors.append(got)
                        return
            self.run_threads(work, n=THREADS - 1)
        finally:
            stop.set()
            rc.join()



class TestToolsFromThreads(TestThreads):
    """A Python tool called through clara.call from 8 threads at once."""

    def test_decorated_tool_from_8_threads(self):
        lock = threading.Lock()
        counts = {}
        running = [0, 0]     # now, most at once

        @clara.tool(limits={"timeout_ms": 60000})
        def tag(thread: int, call: int, text: str = "") -> dict:
            with lock:
                running[0] += 1
                running[1] = max(running[1], running[0])
                counts[thread] = counts.get(thread, 0) + 1
            try:
                return {"thread": thread, "call": call, "text": text[::-1]}
            finally:
                with lock:
                    running[0] -= 1

        n = 500

        def work(i, errors):
            for j in range(n):
                text = "t%d-%dé" % (i, j)
                got = clara.call("tag", thread=i, call=j, text=text)
                if got != {"thread": i, "call": j, "text": text[::-1]}:
                    errors.append("thread %d call %d: %r" % (i, j, got))
                    return
                if j % 100 == 0:   # errors from threads too
                    try:
                        clara.call("tag", thread=i)
                        errors.append("thread %d: no InvalidArgs" % i)
                    except clara.InvalidArgs:
                        pass

        self.run_threads(work, n=THREADS)
        self.assertEqual(counts, {i: n for i in range(THREADS)})
        self.assertEqual(running[0], 0)

    def test_async_tool_from_8_threads(self):
        @clara.tool(limits={"timeout_ms": 60000})
        async def later(i: int, j: int) -> list:
            await asyncio.sleep(0)
            return [i, j]

        def work(i, errors):
            for j in range(200):
                got = clara.call("later", i=i, j=j)
                if got != [i, j]:
                    errors.append("thread %d call %d: %r" % (i, j, got))
                    return

        self.run_threads(work, n=THREADS)

    def test_call_async_from_8_threads(self):
        # Each thread runs its own event loop and awaits Clara on it.
        @clara.tool(limits={"timeout_ms": 60000})
        def square(n: int) -> int:
            return n * n

        def work(i, errors):
            async def main():
                return await asyncio.gather(*(clara.call_async("square", n=i * 1000 + j) for j in range(50)))
            got = asyncio.run(main())
            if got != [(i * 1000 + j) ** 2 for j in range(50)]:
                errors.append("thread %d: %r" % (i, got[:3]))

        self.run_threads(work, n=THREADS)


if __name__ == "__main__":
    unittest.main()
