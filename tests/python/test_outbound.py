"""Issue 25 from the outside: hostile model providers and MCP servers against
the built library and bin/clara.

A scripted model (build/llmserver, scripts written here with the secrets in
them) and tests/python/hostile_mcp.py (over HTTP and stdio) send back every
secret Clara gave them, plain, with JSON escapes and cut across streamed
pieces, answer 1.5 GiB, ask for a wait of 1e300 ms, and nest tool arguments
9,000 deep. What Clara writes must hold none of it, its memory must stay
flat, and network.allow_hosts must hold for MCP servers too."""

import json
import os
import re
import resource
import secrets as pysecrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

import clara
from clara_testcase import ClaraTestCase

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SERVER = os.environ.get("CLARA_LLMSERVER", os.path.join(ROOT, "build", "llmserver"))
CLI = os.environ.get("CLARA_CLI", os.path.join(ROOT, "bin", "clara"))
HOSTILE = os.path.join(HERE, "hostile_mcp.py")

# The secrets of a run, each with a random part no other text holds.
SECRETS = {
    "CLARA_T25_MODEL_KEY": "sk-t25-" + pysecrets.token_hex(12),
    "CLARA_T25_MCP_AUTH": "Bearer mcp-t25-" + pysecrets.token_hex(12),
    "CLARA_T25_ENV_FROM": "envfrom-t25-" + pysecrets.token_hex(12),
    "CLARA_T25_HTTP_KEY": "httpkey-t25-" + pysecrets.token_hex(12),
    "CLARA_T25_MCP_TOKEN": "mcptoken-t25-" + pysecrets.token_hex(12),
}


def escaped(s):
    return "".join("\\u%04x" % ord(c) for c in s)


def decode_escapes(text):
    """text with every JSON \\uXXXX escape (and \\/) decoded, wherever it is."""
    def one(m):
        return chr(int(m.group(1), 16))
    text = re.sub(r"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})",
                  lambda m: (chr(int(m.group(1), 16)) + chr(int(m.group(2), 16))).encode("utf-16", "surrogatepass").decode("utf-16"),
                  text)
    return re.sub(r"\\u([0-9a-fA-F]{4})", one, text).replace("\\/", "/")


def leaks(text):
    """The names of the secrets text holds ten characters of, in a row,
    plain or once its JSON escapes are decoded (twice: a JSON text inside
    a JSON string)."""
    found = []
    forms = [text, decode_escapes(text), decode_escapes(decode_escapes(text.replace("\\\\", "\\")))]
    for name, value in SECRETS.items():
        for i in range(len(value) - 9):
            window = value[i:i + 10]
            if any(window in f for f in forms):
                found.append(name)
                break
    return found


def sse(chunks):
    return "".join("data: %s\n\n" % c for c in chunks) + "data: [DONE]\n\n"


def delta(content=None, calls=None, finish=None):
    d = {}
    if content is not None:
        d["content"] = "@C@"
    if calls is not None:
        d["tool_calls"] = calls
    body = json.dumps({"id": "c", "object": "chat.completion.chunk", "model": "m",
                       "choices": [{"index": 0, "delta": d, "finish_reason": finish}]})
    # The content is written by hand so that its escapes stay as they are.
    return body.replace('"@C@"', '"%s"' % content) if content is not None else body


def scripts(dirname):
    """The scripted model's conversations, with the secrets in them."""
    key = SECRETS["CLARA_T25_MODEL_KEY"]
    others = [SECRETS[n] for n in ("CLARA_T25_MCP_AUTH", "CLARA_T25_ENV_FROM", "CLARA_T25_HTTP_KEY", "CLARA_T25_MCP_TOKEN")]
    esc = escaped(key)
    calls = []
    for i, (tool, args) in enumerate([("h__echo", {}), ("h__rpc_error", {}), ("h__status_401", {}),
                                       ("h__tool_error", {}), ("s__echo", {}), ("s__rpc_error", {}),
                                       ("s__tool_error", {}), ("lookup", {"q": "@ESC@"})]):
        a = json.dumps(args).replace("@ESC@", esc)  # the arguments' JSON escapes the key
        calls.append({"index": i, "id": "call_%d" % i, "type": "function",
                      "function": {"name": tool, "arguments": a}})
    first = [delta("the key is " + key[:9]), delta(key[9:20]), delta(key[20:] + "; escaped " + esc[:42]),
             delta(esc[42:] + ".")] + [delta(calls=[c]) for c in calls] + [delta(finish="tool_calls")]
    second = [delta("and again " + key[:5]), delta(key[5:] + " " + " ".join(escaped(o) for o in others)),
              delta(" " + " ".join(others)), delta(finish="stop")]
    files = {
        "t25_chat": 'provider = "openai"\n[[exchange]]\nreply.chunk = 11\nreply.sse = \'\'\'\n%s\'\'\'\n'
                    '[[exchange]]\nreply.chunk = 7\nreply.sse = \'\'\'\n%s\'\'\'\n' % (sse(first), sse(second)),
        "t25_plain": 'provider = "openai"\n[[exchange]]\nreply.json = \'\'\'{"id":"c","object":"chat.completion","model":"m",'
                     '"choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"%s"},'
                     '{"type":"text","text":"%s"}]},"finish_reason":"stop"}]}\'\'\'\n' % (esc[:60], esc[60:] + " " + key),
        "t25_error": 'provider = "openai"\n[[exchange]]\nreply.json = \'\'\'{"error":{"message":"bad key %s (%s)",'
                     '"type":"invalid_request_error"}}\'\'\'\n' % (esc, key),
        "t25_401": 'provider = "openai"\n[[exchange]]\nreply.status = 401\nreply.body = \'\'\'{"error":"%s %s %s"}\'\'\'\n'
                   % ("x" * 150, esc, key),
        "t25_http": 'provider = "http"\nrepeat = true\n[[exchange]]\nreply.json = \'\'\'{"echo":"%s","escaped":"%s"}\'\'\'\n'
                    % (SECRETS["CLARA_T25_HTTP_KEY"], escaped(SECRETS["CLARA_T25_HTTP_KEY"])),
        "t25_retry": 'provider = "openai"\nrepeat = true\n[[exchange]]\nreply.status = 429\n'
                     'reply.headers = { "Retry-After-Ms" = "1e300" }\nreply.body = "slow down"\n',
        "t25_deep": 'provider = "openai"\n[[exchange]]\nreply.json = \'\'\'{"id":"c","object":"chat.completion","model":"m",'
                    '"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1",'
                    '"type":"function","function":{"name":"echo","arguments":"%s"}}]},"finish_reason":"tool_calls"}]}\'\'\'\n'
                    '[[exchange]]\nreply.json = \'\'\'{"id":"c2","object":"chat.completion","model":"m","choices":[{"index":0,'
                    '"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}\'\'\'\n'
                    % ('[' * 9000 + ']' * 9000),
        "t25_deep_answer": 'provider = "http"\nrepeat = true\n[[exchange]]\nreply.json = \'\'\'%s\'\'\'\n'
                           % ('{"d":' + '[' * 2000 + ']' * 2000 + '}'),
        "t25_longline": 'provider = "openai"\n[[exchange]]\nreply.sse = \'\'\'\n%s\'\'\'\n' % sse([delta("a" * 5000)]),
        "t25_manycalls": 'provider = "openai"\n[[exchange]]\nreply.sse = \'\'\'\n%s\'\'\'\n' % sse(
            [delta(calls=[{"index": i, "id": "c%d" % i, "type": "function",
                           "function": {"name": "echo", "arguments": "{}"}}]) for i in range(130)]),
    }
    for name, text in files.items():
        with open(os.path.join(dirname, name + ".toml"), "w") as f:
            f.write(text)


class Process:
    """A child that prints its address on its first line and ends when its
    stdin closes."""

    def __init__(self, argv, env=None):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, env=env)
        self.first = self.p.stdout.readline().strip()

    def close(self):
        self.p.stdin.close()
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()


def max_rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class TestOutbound(ClaraTestCase):

    @classmethod
    def setUpClass(cls):
        for path in (SERVER, CLI):
            if not os.path.exists(path):
                raise RuntimeError("%s is missing: make build/llmserver bin/clara (make test-python builds them)" % path)
        cls.tmp = tempfile.mkdtemp(prefix="clara-t25-")
        scripts(cls.tmp)
        cls.llm = Process([SERVER, cls.tmp])
        cls.mcp = Process([sys.executable, HOSTILE, "http"])
        cls.mcp_url = cls.mcp.first.split()[1]
        for name, value in SECRETS.items():
            os.environ[name] = value

    @classmethod
    def tearDownClass(cls):
        for name in SECRETS:
            os.environ.pop(name, None)
        cls.llm.close()
        cls.mcp.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        super().setUp()
        urllib.request.urlopen(urllib.request.Request(self.llm.first + "/_llmtest/reset", method="POST")).read()
        self.addCleanup(clara.configure, {"mcp_servers": []})

    def configure(self, config):
        out = clara.configure(config)
        self.assertEqual(out["status"], "success", out)
        return out

    def served(self, script):
        (r,) = [r for r in json.load(urllib.request.urlopen(self.llm.first + "/_llmtest/report")) if r["script"] == script]
        return r["served"]

    def wait_tool(self, name):
        deadline = time.time() + 15
        while name not in [t["name"] for t in clara.call("tools_list", format="clara")["tools"]]:
            if time.time() > deadline:
                self.fail("%s never came" % name)
            time.sleep(0.02)

    # Finding 3: a URL server answering 1.5 GiB took the host to 12 GB.
    def test_a_huge_mcp_answer_is_refused_under_the_cap(self):
        self.configure({"network": {"allow_hosts": ["127.0.0.1"]},
                        "mcp_servers": [{"name": "h", "url": self.mcp_url, "timeout_ms": 30000}]})
        self.wait_tool("h__huge")
        before = max_rss()
        start = time.monotonic()
        out = json.loads(clara.evaluate_raw('{"tool":"h__huge"}'))
        took = time.monotonic() - start
        self.assertEqual(out.get("error"), "tool_failed", str(out)[:300])
        self.assertIn("llm.max_response_bytes (4194304)", out["message"])
        self.assertLess(took, 10, "%.1f s to refuse it" % took)
        grown = max_rss() - before
        self.assertLess(grown, 200 << 20, "peak RSS grew by %d MiB" % (grown >> 20))

    # Finding 11: network.allow_hosts did not apply to [[mcp_servers]] urls.
    def test_allow_hosts_applies_to_mcp_urls(self):
        out = clara.configure({"network": {"allow_hosts": ["localhost"]},
                               "mcp_servers": [{"name": "h", "url": self.mcp_url, "eager": False}]})
        self.assertEqual(out.get("error"), "invalid_request", str(out)[:300])
        self.assertIn('mcp_servers: server "h": url %s: host "127.0.0.1" is not in network.allow_hosts' % self.mcp_url,
                      out["message"])
        time.sleep(0.3)
        out = json.loads(clara.evaluate_raw('{"tool":"h__echo"}'))
        self.assertEqual(out["error"], "unknown_tool", out)
        self.configure({"network": {"allow_hosts": ["127.0.0.1"]},
                        "mcp_servers": [{"name": "h", "url": self.mcp_url, "eager": True}]})
        self.assertEqual(clara.evaluate({"tool": "h__echo"})["status"], "success")

    # Finding 21: Retry-After-Ms: 1e300 overflowed to a negative wait, and
    # every retry went out at once.
    def test_a_huge_retry_after_ends_the_call(self):
        self.configure({"llm": {"base_url": self.llm.first + "/t25_retry", "model": "m", "max_retries": 10}})
        start = time.monotonic()
        with self.assertRaises(clara.ToolFailed) as cm:
            clara.call("chat", prompt="hi")
        self.assertLess(time.monotonic() - start, 5)
        self.assertIn("asked to retry after more than a day, longer than Clara waits (1m0s)", str(cm.exception))
        self.assertEqual(self.served("t25_retry"), 1)

    # Finding 18: a model's tool arguments 9,000 deep reached the tool, and
    # the envelope made clara.evaluate raise RecursionError.
    def test_deep_tool_arguments_are_refused(self):
        self.configure({"llm": {"base_url": self.llm.first + "/t25_deep", "model": "m"}})
        result = clara.call("chat", prompt="x", allow_tools=True, tools=["echo"], max_tool_calls=2)
        (call,) = result["tool_calls"]
        self.assertEqual(call["status"], "invalid_args")
        self.assertEqual(call["error"], "the arguments nest deeper than limits.max_depth (512)")
        self.assertIsInstance(call["arguments"], str)
        self.assertEqual(result["content"], "done")

    # Finding 18, review: a result nested deeper than Python's json reads
    # from outside (an HTTP tool's answer and the evaluator's, 2,000 deep; a
    # remote MCP tool's structured result, 990) reached the envelope, and
    # clara.evaluate raised RecursionError on it. Results are held to
    # limits.max_depth too.
    def test_deep_results_are_refused(self):
        self.configure({"network": {"allow_hosts": ["127.0.0.1"]},
                        "evaluator": {"url": self.llm.first + "/t25_deep_answer/evaluate"},
                        "tools": [{"name": "deep_http", "description": "Answers deep.", "input_schema": {"type": "object"},
                                   "http": {"url": self.llm.first + "/t25_deep_answer/x"}}],
                        "mcp_servers": [{"name": "h", "url": self.mcp_url, "timeout_ms": 30000}]})
        self.wait_tool("h__deep")
        for tool, message in [
                ("deep_http", 'tool "deep_http" returned JSON nested deeper than limits.max_depth (512)'),
                ("evaluate", "POST %s/t25_deep_answer/evaluate answered JSON nested deeper than limits.max_depth (512)"
                 % self.llm.first),
                ("h__deep", 'tool "h__deep" returned JSON nested deeper than limits.max_depth (512)')]:
            self.assertEqual(clara.evaluate({"tool": tool, "arguments": {}}),
                             {"status": "error", "error": "tool_failed", "message": message})

    # Finding 23: an over-long event-stream line was "the connection
    # dropped", 129 streamed tool calls "a streamed chunk is not JSON".
    def test_stream_limits_say_what_they_are(self):
        self.configure({"llm": {"base_url": self.llm.first + "/t25_longline", "model": "m", "max_response_bytes": 4096}})
        with self.assertRaises(clara.ToolFailed) as cm:
            clara.call("chat", prompt="x", stream=True)
        self.assertEqual(str(cm.exception), "model: a line of the event stream is longer than 4096 bytes (llm.max_response_bytes)")
        self.configure({"llm": {"base_url": self.llm.first + "/t25_manycalls", "max_response_bytes": 4194304}})
        with self.assertRaises(clara.ToolFailed) as cm:
            clara.call("chat", prompt="x", stream=True, allow_tools=True, tools=["echo"], max_tool_calls=200)
        self.assertEqual(str(cm.exception), "model: the model asked for more than 128 tool calls in one message, more than Clara takes")

    # Findings 6, 7 and 8: every secret, sent back every way, in every output
    # of a full run. (There are no traces yet: OpenTelemetry is a later
    # issue; when there are, they belong in this list.)
    def test_no_secret_in_any_output(self):
        audit = os.path.join(self.tmp, "audit.jsonl")
        config = {
            "state_dir": "",
            "audit": {"path": audit},
            "network": {"allow_hosts": ["127.0.0.1"]},
            "llm": {"base_url": self.llm.first + "/t25_chat", "model": "m", "api_key_env": "CLARA_T25_MODEL_KEY"},
            "mcp": {"token_env": "CLARA_T25_MCP_TOKEN"},
            "tools": [{"name": "lookup", "description": "Looks up.", "input_schema": {"type": "object"},
                       "http": {"url": self.llm.first + "/t25_http/lookup",
                                "headers_env": {"X-Api-Key": "CLARA_T25_HTTP_KEY"}}}],
            "mcp_servers": [
                {"name": "h", "url": self.mcp_url, "headers_env": {"Authorization": "CLARA_T25_MCP_AUTH"}},
                {"name": "s", "command": sys.executable, "args": [HOSTILE, "stdio"],
                 "env_from": {"LEAK": "CLARA_T25_ENV_FROM"}},
            ],
        }
        outputs = {}

        def keep(name, text):
            outputs.setdefault(name, []).append(text)

        clara.set_log_handler(lambda level, message: keep("log", message), clara.CLARA_LOG_DEBUG)
        clara.set_event_handler(lambda ev: keep("event", json.dumps(ev)))
        try:
            keep("configure", json.dumps(self.configure(config)))
            self.wait_tool("h__echo")
            self.wait_tool("s__echo")
            keep("envelope", clara.evaluate_raw(json.dumps({"tool": "chat", "session": "t25", "arguments": {
                "prompt": "Tell me your key", "allow_tools": True, "max_tool_calls": 10, "stream": True}})))
            for script in ("t25_plain", "t25_error", "t25_401"):
                self.configure({"llm": {"base_url": self.llm.first + "/" + script}})
                keep("envelope", clara.evaluate_raw('{"tool":"chat","arguments":{"prompt":"again"}}'))
            for tool in ("h__echo", "h__rpc_error", "h__status_401", "h__tool_error",
                         "s__echo", "s__rpc_error", "s__tool_error", "lookup"):
                keep("envelope", clara.evaluate_raw(json.dumps({"tool": tool, "arguments": {}})))
            keep("envelope", clara.evaluate_raw('{"tool":"tools_list","arguments":{"format":"mcp"}}'))
            keep("envelope", clara.evaluate_raw('{"tool":"audit_tail","arguments":{"n":50}}'))
            # MCP responses: Clara serving the remote tools on to a client.
            url = clara.mcp_listen("127.0.0.1:0")
            try:
                for text in self.mcp_client(url):
                    keep("mcp", text)
            finally:
                clara.mcp_stop()
        finally:
            clara.set_log_handler(None)
            clara.set_event_handler(None)
        with open(audit) as f:
            keep("audit", f.read())
        tokens = "".join(json.loads(e)["text"] for e in outputs["event"] if json.loads(e)["event"] == "token")
        keep("tokens joined", tokens)

        # bin/clara, the same configuration, the log at debug.
        path = os.path.join(self.tmp, "t25.json")
        config["llm"]["base_url"] = self.llm.first + "/t25_chat"
        config["audit"]["path"] = ""
        for server in config["mcp_servers"]:
            server["eager"] = True  # there when the command runs
        with open(path, "w") as f:
            json.dump(config, f)
        urllib.request.urlopen(urllib.request.Request(self.llm.first + "/_llmtest/reset", method="POST")).read()
        env = dict(os.environ, CLARA_LOG="debug")
        env.pop("CLARA_CONFIG", None)
        for argv in (["chat", "Tell me your key", "--allow-tools", "--max-tool-calls", "10", "--stream", "--verbose"],
                     ["call", "h__echo"], ["call", "s__rpc_error"], ["call", "lookup"], ["tools", "--format", "mcp"]):
            run = subprocess.run([CLI, "--config", path] + argv, capture_output=True, text=True, env=env, timeout=60)
            keep("cli stdout", run.stdout)
            keep("cli stderr", run.stderr)

        found = {name: leaks("\n".join(texts)) for name, texts in outputs.items()}
        self.maxDiff = None
        self.assertEqual({k: v for k, v in found.items() if v}, {}, "secrets in the outputs")
        self.assertIn("the key is [redacted]; escaped [redacted].", tokens)
        self.assertIn("[redacted]", "".join(outputs["cli stdout"]))
        # The run did reach every place the secrets were sent back from.
        everything = "\n".join("\n".join(t) for t in outputs.values())
        for marker in ("plain [redacted], escaped [redacted]", "credentials [redacted] refused", "refused [redacted]",
                       "[redacted] is not valid", "starting with [redacted]", '"echo":"[redacted]"',
                       "bad key [redacted] ([redacted])", "answers with [redacted]"):
            self.assertIn(marker, everything)

    def mcp_client(self, url):
        """Raw answers of an MCP client calling the remote tools through Clara."""
        token = SECRETS["CLARA_T25_MCP_TOKEN"]
        texts = []

        def rpc(body, session=None):
            headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                       "MCP-Protocol-Version": "2025-11-25", "Authorization": "Bearer " + token}
            if session:
                headers["Mcp-Session-Id"] = session
            req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
            with urllib.request.urlopen(req, timeout=30) as resp:
                texts.append(resp.read().decode())
                return resp.headers.get("Mcp-Session-Id")

        sid = rpc({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t25", "version": "1"}}})
        rpc({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
        rpc({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid)
        for i, tool in enumerate(("h__echo", "h__rpc_error", "s__echo", "s__tool_error")):
            rpc({"jsonrpc": "2.0", "id": 3 + i, "method": "tools/call", "params": {"name": tool, "arguments": {}}}, sid)
        return texts


if __name__ == "__main__":
    unittest.main()
