"""Serving tools over MCP from Python: clara.mcp_listen, a Python tool
called by an MCP client speaking Streamable HTTP (JSON-RPC over HTTP with
server-sent events), clara.mcp_stop."""

import json
import unittest
import urllib.error
import urllib.request

import clara
from clara_testcase import ClaraTestCase


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
