"""Serving tools over MCP from Python: clara.mcp_listen, a Python tool
called by an MCP client speaking Streamable HTTP (JSON-RPC over HTTP with
server-sent events), clara.mcp_stop."""

import asyncio
import json
import threading
import time
import unittest
import urllib.error
import urllib.request

import clara
from clara_testcase import ClaraTestCase
from test_abandoned import threads_now


def rpc(url, body, session=None):
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"}
    if session:
        headers["Mcp-Session-Id"] = session
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
        sid = resp.headers.get("Mcp-Session-Id")
        text = resp.read().decode()
    if not text.strip():
        return None, sid
    if resp.headers.get_content_type() == "text/event-stream":
        data = [line[len("data:"):].strip() for line in text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1]), sid
    return json.loads(text), sid


class TestMCP(ClaraTestCase):

    def tearDown(self):
        clara.mcp_stop()
        super().tearDown()

    def test_a_python_tool_over_mcp(self):
        @clara.tool
        def shout(text: str) -> str:
            """Upper-cases a text."""
            return text.upper()

        url = clara.mcp_listen("127.0.0.1:0")
        self.assertRegex(url, r"^http://127\.0\.0\.1:\d+/mcp$")
        init, sid = rpc(url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "py", "version": "1"}}})
        self.assertEqual(init["result"]["serverInfo"]["name"], "clara")
        rpc(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
        listed, _ = rpc(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid)
        self.assertIn("shout", [t["name"] for t in listed["result"]["tools"]])
        called, _ = rpc(url, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                              "params": {"name": "shout", "arguments": {"text": "hi"}}}, sid)
        self.assertEqual(called["result"]["content"], [{"type": "text", "text": "HI"}])
        bad, _ = rpc(url, {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                           "params": {"name": "shout", "arguments": {"text": 5}}}, sid)
        self.assertTrue(bad["result"]["isError"])

    def session(self, url):
        """An initialized MCP session on url: its id."""
        _, sid = rpc(url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "py", "version": "1"}}})
        rpc(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
        return sid

    def test_arguments_must_be_an_object_within_the_limits(self):
        # Issue 25, findings 18 and 19: what a client sends as arguments is
        # scanned as a request is, and must be an object; echo would hand
        # anything back, and 600 levels made the envelope too deep for Python.
        url = clara.mcp_listen("127.0.0.1:0")
        sid = self.session(url)
        for i, args in enumerate([[1, 2], "text", 5, True]):
            res, _ = rpc(url, {"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                               "params": {"name": "echo", "arguments": args}}, sid)
            self.assertTrue(res["result"]["isError"], res)
            self.assertEqual(res["result"]["_meta"]["clara/error"], "invalid_args")
            self.assertIn("must be a JSON object", res["result"]["content"][0]["text"])
        deep = json.loads('{"a":' + "[" * 600 + "]" * 600 + "}")
        res, _ = rpc(url, {"jsonrpc": "2.0", "id": 20, "method": "tools/call",
                           "params": {"name": "echo", "arguments": deep}}, sid)
        self.assertTrue(res["result"]["isError"])
        self.assertEqual(res["result"]["_meta"]["clara/error"], "invalid_request")
        self.assertIn("limits.max_depth (512)", res["result"]["content"][0]["text"])
        res, _ = rpc(url, {"jsonrpc": "2.0", "id": 21, "method": "tools/call",
                           "params": {"name": "echo", "arguments": {"a": [1]}}}, sid)
        self.assertEqual(res["result"]["structuredContent"], {"a": [1]})

    def test_kv_is_bounded_across_mcp_sessions(self):
        # Issue 25, finding 4: each MCP session is a Clara session with a
        # store of its own; kv.max_total_bytes bounds them together, and a
        # session that ends gives its room back.
        clara.configure({"kv": {"max_total_bytes": 4096}})
        url = clara.mcp_listen("127.0.0.1:0")
        value = "v" * 1500
        sessions = [self.session(url) for _ in range(3)]

        def kv_set(sid, key):
            res, _ = rpc(url, {"jsonrpc": "2.0", "id": 30, "method": "tools/call",
                               "params": {"name": "kv_set", "arguments": {"key": key, "value": value}}}, sid)
            return res["result"]

        self.assertFalse(kv_set(sessions[0], "a").get("isError"))
        self.assertFalse(kv_set(sessions[1], "a").get("isError"))
        full = kv_set(sessions[2], "a")
        self.assertTrue(full["isError"])
        self.assertEqual(full["_meta"]["clara/error"], "tool_failed")
        self.assertEqual(full["content"][0]["text"],
                         "kv_set: the store holds 3006 bytes in all sessions; 1503 more would pass "
                         "kv.max_total_bytes (4096); delete keys or end sessions first")
        # The client ends its first session (DELETE): its key goes with it.
        req = urllib.request.Request(url, headers={"Mcp-Session-Id": sessions[0]}, method="DELETE")
        urllib.request.urlopen(req, timeout=30).close()
        for _ in range(500):  # the session ends on Clara's own goroutine
            if not kv_set(sessions[2], "a").get("isError"):
                break
            time.sleep(0.01)
        else:
            self.fail("the ended session's room never came back")

    def test_calls_in_flight_are_bounded(self):
        # Issue 25, finding 1, from an MCP client: calls of a Python tool
        # sent all at once each held a thread or two while they ran, and
        # every one of them went past its deadline before
        # limits.max_overdue_calls could count one (60 calls: +120
        # threads; some thousands end the process). mcp.max_calls bounds
        # the calls running at once; the others are refused at once.
        clara.configure({"mcp": {"max_calls": 4}, "limits": {"max_overdue_calls": 4}})
        gate = threading.Event()
        self.addCleanup(gate.set)
        lock = threading.Lock()
        inside = [0, 0]  # now, most at once

        def slow(args):
            with lock:
                inside[0] += 1
                inside[1] = max(inside[1], inside[0])
            try:
                gate.wait(20)
                return "done"
            finally:
                with lock:
                    inside[0] -= 1
        self.lib.register_tool({"name": "slow", "limits": {"timeout_ms": 20000}}, slow)
        url = clara.mcp_listen("127.0.0.1:0")
        sid = self.session(url)
        host, port = urllib.request.urlparse(url).netloc.split(":")
        n = 60

        async def call(i):
            body = json.dumps({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                               "params": {"name": "slow", "arguments": {}}}).encode()
            r, w = await asyncio.open_connection(host, int(port))
            w.write(("POST /mcp HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\n"
                     "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n"
                     "Mcp-Session-Id: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                     % (host, port, sid, len(body))).encode() + body)
            await w.drain()
            text = (await r.read()).decode()
            w.close()
            (data,) = [line[len("data:"):] for line in text.splitlines() if line.startswith("data:")]
            return json.loads(data)["result"]

        async def main():
            before = threads_now()
            tasks = [asyncio.ensure_future(call(i)) for i in range(n)]
            # The refused answer at once; those admitted wait for the gate.
            deadline = time.monotonic() + 20
            while sum(t.done() for t in tasks) < n - 4 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)
            grown = threads_now() - before
            gate.set()
            return await asyncio.gather(*tasks), grown

        results, grown = asyncio.run(main())
        done = [r for r in results if not r.get("isError")]
        refused = [r for r in results if r.get("isError")]
        self.assertLessEqual(inside[1], 4, "%d calls ran at once" % inside[1])
        self.assertEqual(len(done), 4)
        self.assertEqual(len(refused), n - 4)
        for r in refused:
            self.assertEqual(r["_meta"]["clara/error"], "tool_failed")
            self.assertEqual(r["content"][0]["text"], 'tool "slow" was not started: 4 calls of MCP clients are running, '
                             'the most mcp.max_calls allows; try again once one has ended')
        self.assertLessEqual(grown, 4 * 2 + 12, "%d calls at once: +%d threads" % (n, grown))
        # Once they ended, calls run again.
        res, _ = rpc(url, {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                           "params": {"name": "slow", "arguments": {}}}, sid)
        self.assertEqual(res["result"]["content"], [{"type": "text", "text": "done"}])

    def test_refusals(self):
        with self.assertRaises(clara.InvalidRequest) as cm:
            clara.mcp_listen("0.0.0.0:0")
        self.assertIn("allow_remote", cm.exception.message)
        url = clara.mcp_listen("127.0.0.1:0")
        clara.mcp_stop()
        with self.assertRaises(urllib.error.URLError):
            rpc(url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "py", "version": "1"}}})


if __name__ == "__main__":
    unittest.main()
