"""Requests a Python tool makes inside its own call (clara.current_call()):
they inherit the call's policy, session and depth, never reach the tool
itself, and a nested chat never offers it (tests/llm/nested_chat.toml,
served by tests/llmserver started as a process)."""

import asyncio
import json
import os
import subprocess
import urllib.request

import clara
from clara_testcase import ClaraTestCase

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVER = os.environ.get("CLARA_LLMSERVER", os.path.join(ROOT, "build", "llmserver"))


class TestNestedRequests(ClaraTestCase):

    def test_a_nested_call_inherits_the_requests_policy(self):
        @clara.tool
        def relay(tool: str) -> dict:
            """Calls another tool inside its own call."""
            return clara.current_call().call(tool, said="hi")

        self.assertEqual(clara.call("relay", tool="echo"), {"said": "hi"})
        # The request that called relay denies echo: so does relay's call.
        # clara.call() inside the tool would have escaped that policy.
        envelope = clara.evaluate({"tool": "relay", "arguments": {"tool": "echo"}, "policy": {"deny": ["echo"]}})
        self.assertEqual(envelope["error"], "tool_failed")
        self.assertIn('tool "echo" denied by the policy of the request', envelope["message"])
        # The tool itself is on the call stack: refused at once.
        with self.assertRaises(clara.ToolFailed) as cm:
            clara.call("relay", tool="relay")
        self.assertIn("already running on this call stack (relay → relay)", str(cm.exception))

    def test_the_session_is_the_tools(self):
        @clara.tool
        def where() -> dict:
            """Runs echo in its own session and reports the audit's session."""
            clara.current_call().call("echo")
            return clara.current_call().evaluate({"tool": "echo", "session": "elsewhere", "arguments": {}})

        envelope = clara.Session("py-nested").call("where")
        self.assertEqual(envelope["error"], "invalid_request")
        tail = clara.call("audit_tail", n=100)["records"]
        self.assertIn(("py-nested", "echo"), [(r["session"], r["tool"]) for r in tail])

    def test_an_async_tool_has_its_call_too(self):
        @clara.tool
        async def later(text: str) -> dict:
            """Echoes its text through a nested call, without blocking the loop."""
            await asyncio.sleep(0)
            return await clara.current_call().call_async("echo", text=text)

        self.assertEqual(clara.call("later", text="t"), {"text": "t"})

    def test_outside_a_tool_and_after_it_returned(self):
        with self.assertRaises(RuntimeError):
            clara.current_call()
        kept = []

        @clara.tool
        def keeper() -> bool:
            """Keeps its call past its return."""
            kept.append(clara.current_call())
            return True

        self.assertTrue(clara.call("keeper"))
        with self.assertRaises(clara.InvalidRequest) as cm:
            kept[0].call("echo")
        self.assertIn("not running", str(cm.exception))


class TestNestedChat(ClaraTestCase):

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(SERVER):
            raise RuntimeError("%s is missing: make build/llmserver (make test-python builds it)" % SERVER)
        cls.srv = subprocess.Popen([SERVER, os.path.join(ROOT, "tests", "llm", "nested_chat.toml")],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        cls.url = cls.srv.stdout.readline().strip()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stdin.close()
        cls.srv.wait(30)

    def setUp(self):
        super().setUp()
        urllib.request.urlopen(urllib.request.Request(self.url + "/_llmtest/reset", method="POST")).read()

    def served_as_scripted(self):
        (report,) = [r for r in json.load(urllib.request.urlopen(self.url + "/_llmtest/report"))
                     if r["script"] == "nested_chat"]
        self.assertEqual(report["failures"], [])

    def test_a_lua_tool_runs_a_chat_that_never_offers_it(self):
        clara.configure({"llm": {"base_url": self.url + "/nested_chat", "model": "gpt-4o-mini"},
                         "tools": [{"name": "explain_weather", "limits": {"timeout_ms": 30000},
                                    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
                                    "returns": "string",
                                    "lua": "return function(args)\n"
                                           "  local r = call_tool('chat', {prompt = 'Explain the weather in ' .. args.city"
                                           " .. ' to a child.', allow_tools = true,"
                                           " tools = {'get_current_weather', 'explain_weather'}, max_tool_calls = 2})\n"
                                           "  return r.content\n"
                                           "end"}]})
        clara.register_tool({"name": "get_current_weather", "input_schema": {
            "type": "object", "properties": {"location": {"type": "string"}}}},
            lambda args: {"temperature": "22"})
        self.assertEqual(clara.call("explain_weather", city="Boston"), "It is warm and sunny in Boston.")
        envelope = clara.evaluate({"tool": "explain_weather", "arguments": {"city": "Boston"},
                                   "policy": {"deny": ["get_current_weather"]}})
        self.assertEqual(envelope["result"], "I cannot look the weather up.")
        self.served_as_scripted()

    def test_a_python_tool_runs_a_chat_that_never_offers_it(self):
        clara.configure({"llm": {"base_url": self.url + "/nested_chat", "model": "gpt-4o-mini"}})

        @clara.tool
        def get_current_weather(location: str) -> dict:
            """Get the current weather in a given location"""
            return {"location": location, "temperature": "22", "unit": "celsius"}

        @clara.tool(limits={"timeout_ms": 30000})
        def explain_weather(city: str) -> str:
            """Explains a city's weather to a child."""
            answer = clara.current_call().call("chat", prompt="Explain the weather in %s to a child." % city,
                                               allow_tools=True, tools=["get_current_weather", "explain_weather"],
                                               max_tool_calls=2)
            return answer["content"]

        self.assertEqual(clara.call("explain_weather", city="Boston"), "It is warm and sunny in Boston.")
        envelope = clara.evaluate({"tool": "explain_weather", "arguments": {"city": "Boston"},
                                   "policy": {"deny": ["get_current_weather"]}})
        self.assertEqual(envelope["result"], "I cannot look the weather up.")
        self.served_as_scripted()


class TestWithTools(ClaraTestCase):
    """Seed 003's three scoping examples as docs/llm.md writes them (issue
    26 §4): {"tool": "chat", ..., "policy": {"allow": [...]}} was refused,
    'tool "chat" denied by the policy of the request: it is not in its
    allow list'. A request's allow list narrows what the tool it names may
    call, never that tool; its deny list applies to both."""

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(SERVER):
            raise RuntimeError("%s is missing: make build/llmserver (make test-python builds it)" % SERVER)
        cls.srv = subprocess.Popen([SERVER, os.path.join(ROOT, "tests", "llm", "with_tools.toml")],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        cls.url = cls.srv.stdout.readline().strip()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stdin.close()
        cls.srv.wait(30)

    def test_the_seeds_three_examples(self):
        clara.configure({"llm": {"base_url": self.url + "/with_tools", "model": "gpt-4o-mini"},
                         "policy": {"allow": ["chat", "tool_a", "tool_b", "dangerous_tool", "safe_tool",
                                              "restricted_task", "safe_task"]}})
        for name in ("tool_a", "tool_b", "dangerous_tool", "safe_tool"):
            clara.register_tool({"name": name, "description": name}, lambda args: {"ok": True})

        @clara.tool(limits={"timeout_ms": 30000})
        def restricted_task(input: str) -> str:
            """Runs with limited tools."""
            envelope = clara.current_call().evaluate(
                {"tool": "chat", "arguments": {"prompt": "Process '%s'" % input, "allow_tools": True},
                 "policy": {"allow": ["tool_a", "tool_b"]}})
            return envelope["result"]["content"] if envelope["status"] == "success" else envelope["message"]

        @clara.tool(limits={"timeout_ms": 30000})
        def safe_task(input: str) -> str:
            """Excludes dangerous tools."""
            envelope = clara.current_call().evaluate(
                {"tool": "chat", "arguments": {"prompt": "Process '%s' safely" % input, "allow_tools": True},
                 "policy": {"deny": ["dangerous_tool"]}})
            return envelope["result"]["content"] if envelope["status"] == "success" else envelope["message"]

        self.assertEqual(clara.call("restricted_task", input="input"), "restricted done")
        self.assertEqual(clara.call("safe_task", input="input"), "safe done")
        envelope = clara.evaluate({"tool": "chat", "arguments": {"prompt": "Do something with only safe tools",
                                                                 "allow_tools": True},
                                   "policy": {"allow": ["safe_tool"]}})
        self.assertEqual(envelope.get("result", {}).get("content"), "main done", envelope)
        (report,) = [r for r in json.load(urllib.request.urlopen(self.url + "/_llmtest/report"))
                     if r["script"] == "with_tools"]
        self.assertEqual(report["failures"], [])
        # The deny list still holds the named tool: without_tools([chat]).
        envelope = clara.evaluate({"tool": "chat", "arguments": {"prompt": "x"}, "policy": {"deny": ["chat"]}})
        self.assertEqual(envelope["error"], "denied")
        self.assertIn("its deny list names it", envelope["message"])

    def test_a_configuration_allow_list_leaves_the_host_its_administrative_tools(self):
        """A configuration allow-list also locked the host out of rules_load
        and session_policy. The host's own administrative calls follow the
        deny lists only; models, rules and tools still never reach them."""
        clara.configure({"policy": {"allow": ["echo"]}})
        self.assertEqual(clara.call("echo", x=1), {"x": 1})
        with self.assertRaises(clara.Denied):
            clara.call("get_time")
        self.assertIn("rules", clara.call("rules_load", toml='[rule]\nid = "r"\ntrigger = "t"\n[action]\ntype = "log"\n'
                                                                 'message = "m"\n', name="r.toml"))
        self.assertEqual(clara.call("session_policy", deny=["echo"])["deny"], ["echo"])
        clara.configure({"policy": {"allow": ["echo"], "deny": ["rules_load"]}})
        with self.assertRaises(clara.Denied):
            clara.call("rules_load")

        @clara.tool
        def sneaky() -> dict:
            """Tries an administrative tool from inside a call."""
            return clara.current_call().call("rules_list")

        clara.configure({"policy": {"allow": ["echo", "sneaky"], "deny": []}})
        with self.assertRaises(clara.ToolFailed) as cm:
            clara.call("sneaky")
        self.assertIn('tool "rules_list" denied', str(cm.exception))
