"""The chat tool from Python: a Python tool called by the model, the event
handler, the evaluator, against tests/llmserver (the scripted provider)
started as a process. The API key never appears in what comes back."""

import json
import os
import subprocess
import threading
import unittest
import urllib.request

import clara
from clara_testcase import ClaraTestCase

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVER = os.environ.get("CLARA_LLMSERVER", os.path.join(ROOT, "build", "llmserver"))


class TestChat(ClaraTestCase):

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(SERVER):
            raise RuntimeError("%s is missing: make build/llmserver (make test-python builds it)" % SERVER)
        cls.srv = subprocess.Popen([SERVER, os.path.join(ROOT, "tests", "llm")], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        cls.url = cls.srv.stdout.readline().strip()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stdin.close()
        cls.srv.wait(30)

    def setUp(self):
        super().setUp()
        urllib.request.urlopen(urllib.request.Request(self.url + "/_llmtest/reset", method="POST")).read()

    def report(self, script):
        (r,) = [r for r in json.load(urllib.request.urlopen(self.url + "/_llmtest/report")) if r["script"] == script]
        return r

    def test_a_python_tool_called_by_the_model(self):
        os.environ["CLARA_TEST_PY_KEY"] = "sk-python-secret"
        self.addCleanup(os.environ.pop, "CLARA_TEST_PY_KEY")
        clara.configure({"llm": {"base_url": self.url + "/openai_weather", "model": "gpt-4o-mini",
                                 "api_key_env": "CLARA_TEST_PY_KEY"}})

        @clara.tool
        def get_current_weather(location: str) -> dict:
            """Get the current weather in a given location"""
            return {"location": location, "temperature": "22", "unit": "celsius"}

        events = []
        clara.set_event_handler(events.append)
        try:
            result = clara.Session("py1").call("chat", prompt="What is the weather like in Boston today?",
                                               allow_tools=True, tools=["get_current_weather"], max_tool_calls=3)
        finally:
            clara.set_event_handler(None)
        self.assertEqual(result["content"], "It is 22 degrees Celsius and sunny in Boston today.")
        self.assertEqual([(c["name"], c["status"]) for c in result["tool_calls"]], [("get_current_weather", "success")])
        self.assertEqual([e["event"] for e in events], ["tool_call", "tool_result", "answer", "finished"])
        self.assertEqual({e["session"] for e in events}, {"py1"})
        self.assertNotIn("sk-python-secret", json.dumps(result) + json.dumps(events))
        self.assertEqual(self.report("openai_weather")["failures"], [])

    def test_a_sessions_system_prompt_is_not_carried_into_its_next_chat(self):
        # Seed 003 (issue 26 §5): system messages are each chat's own.
        clara.configure({"llm": {"base_url": self.url + "/session_system", "model": "test-model"}})
        s = clara.Session("sys1")
        self.assertEqual(s.call("chat", prompt="I am Ada.", system="You are a pirate.")["content"], "Arr, Ada.")
        self.assertEqual(s.call("chat", prompt="What is my name?")["content"], "Ada.")
        self.assertEqual(self.report("session_system")["failures"], [])

    def test_chat_async_carries_its_handle(self):
        os.environ["CLARA_TEST_PY_KEY"] = "sk-python-secret"
        self.addCleanup(os.environ.pop, "CLARA_TEST_PY_KEY")
        clara.configure({"llm": {"base_url": self.url + "/openai_weather", "model": "gpt-4o-mini",
                                 "api_key_env": "CLARA_TEST_PY_KEY"}})
        clara.register_tool({"name": "get_current_weather", "input_schema": {
            "type": "object", "properties": {"location": {"type": "string"}}}}, lambda args: {"temperature": "22"})
        events = []
        clara.set_event_handler(events.append)
        try:
            import asyncio
            result = asyncio.run(clara.call_async("chat", prompt="What is the weather like in Boston today?",
                                                  allow_tools=True, tools=["get_current_weather"], max_tool_calls=3))
        finally:
            clara.set_event_handler(None)
        self.assertIn("22 degrees", result["content"])
        handles = {e.get("handle") for e in events}
        self.assertEqual(len(handles), 1)
        self.assertIsInstance(handles.pop(), int)

    def test_the_evaluator(self):
        clara.configure({"default_evaluator": "evaluate", "evaluator": {"url": self.url + "/evaluator/evaluate"}})
        self.assertEqual(clara.evaluate({"question": "Is 7 prime?"}),
                         {"status": "success", "tool": "evaluate", "result": {"answer": True, "confidence": 0.99}})
        with self.assertRaises(clara.ToolFailed) as cm:
            clara.call("evaluate", question="again")
        self.assertIn("500", cm.exception.message)


    # ask_user answered by a Python input handler (issue 14).

    def test_the_handler_answers_and_the_chat_result_is_typed(self):
        clara.configure({"llm": {"base_url": self.url + "/ask_user_answer", "model": "test-model"}})
        asked, events = [], []
        clara.set_event_handler(events.append)
        clara.set_input_handler(lambda request: asked.append(request) or "Boston")
        try:
            result = clara.Session("py-ask").call(
                "chat", prompt="Find out which city the user means.", allow_tools=True, tools=["ask_user"],
                result_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
        finally:
            clara.set_input_handler(None)
            clara.set_event_handler(None)
        self.assertEqual(result["result"], {"city": "Boston"})
        self.assertEqual(result["finish_reason"], "finish")
        self.assertEqual([c["name"] for c in result["tool_calls"]], ["ask_user", "set_result", "finish"])
        (request,) = asked
        self.assertEqual((request["prompt"], request["session"]), ("Which city?", "py-ask"))
        (required,) = [e for e in events if e["event"] == "input_required"]
        self.assertEqual(required["id"], request["id"])
        self.assertEqual(self.report("ask_user_answer")["failures"], [])

    def test_none_and_exceptions_decline(self):
        clara.set_input_handler(lambda request: None)
        try:
            self.assertEqual(clara.call("ask_user", prompt="Sure?"), {"declined": True})

            def broken(request):
                raise RuntimeError("no terminal")
            clara.set_input_handler(broken)
            with self.assertLogs("clara", "WARNING"):
                self.assertEqual(clara.call("ask_user", prompt="Sure?"), {"declined": True})
            clara.set_input_handler(lambda request: "ja, gerne – 👍")
            self.assertEqual(clara.call("ask_user", prompt="Sure?"), {"answer": "ja, gerne – 👍"})
        finally:
            clara.set_input_handler(None)
        with self.assertRaises(clara.ClaraError) as cm:
            clara.call("ask_user", prompt="Anyone?")
        self.assertIn("no input handler is installed", str(cm.exception))

    def test_a_replaced_handler_finishes_its_open_question(self):
        entered, release = threading.Event(), threading.Event()

        def slow(request):
            entered.set()
            release.wait(60)
            return "from the old handler"
        clara.set_input_handler(slow)
        results = []
        t = threading.Thread(target=lambda: results.append(clara.call("ask_user", prompt="Slow?")))
        t.start()
        try:
            self.assertTrue(entered.wait(60))
            clara.set_input_handler(lambda request: "from the new handler")
            self.assertEqual(clara.call("ask_user", prompt="Quick?"), {"answer": "from the new handler"})
        finally:
            release.set()
            t.join(60)
            clara.set_input_handler(None)
        self.assertEqual(results, [{"answer": "from the old handler"}])


if __name__ == "__main__":
    unittest.main()
