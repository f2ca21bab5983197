"""What the seeds promise, from Python (issue 32): seed 002's tool limits
changed after registration, JSON5 where people write JSON, tool_choice;
seed 003's memory (chat_history, system messages not kept), events
(tool_result's result, error, finished) and Google's Gemini format, each
against tests/llmserver (the scripted provider) started as a process."""

import json
import os
import subprocess
import urllib.request

import clara
from clara_testcase import ClaraTestCase

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVER = os.environ.get("CLARA_LLMSERVER", os.path.join(ROOT, "build", "llmserver"))


class TestSeeds(ClaraTestCase):

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

    # Seed 002: AI.TOOL.REGISTER, then AI.TOOL.LIMITS "get_time", "{ timeout_ms: 800, rate_per_min: 20 }".

    def test_limits_after_registration(self):
        clara.register_tool('{name: "seed_time", description: "Returns the current local time."}',
                            lambda args: "12:00")
        for _ in range(25):
            self.assertEqual(clara.call("seed_time"), "12:00")
        result = clara.set_tool_limits("seed_time", "{ timeout_ms: 800, rate_per_min: 20 }")
        self.assertEqual(result["limits"], {"timeout_ms": 800, "rate_per_min": 20, "rate_scope": "tool",
                                            "max_output_bytes": 0, "max_concurrency": 0})
        self.assertEqual(result["previous"]["rate_per_min"], 0)
        outcomes = []
        for _ in range(21):
            try:
                outcomes.append(clara.call("seed_time"))
            except clara.RateLimited:
                outcomes.append("limited")
        self.assertEqual(outcomes, ["12:00"] * 20 + ["limited"])
        # A dict works too; the limits left out stay.
        self.assertEqual(clara.set_tool_limits("seed_time", {"max_output_bytes": 100})["limits"]["rate_per_min"], 20)
        with self.assertRaises(clara.InvalidArgs):
            clara.set_tool_limits("seed_time", {"timeout_ms": -5})
        with self.assertRaises(clara.UnknownTool):
            clara.set_tool_limits("no_such_tool", {"timeout_ms": 5})
        with self.assertRaises(clara.Denied):
            clara.set_tool_limits("chat", {"rate_per_min": 1})
        with self.assertRaises(ValueError):
            clara.set_tool_limits("seed_time", "{timeout_ms: ")
        audit = clara.call("audit_tail", n=40)["records"]
        self.assertIn("tool_limits", [r["tool"] for r in audit])

    def test_json5(self):
        self.assertEqual(clara.json5_to_json("{ allow_tools:true, max_tool_calls:3 }"),
                         '{"allow_tools":true,"max_tool_calls":3}')
        with self.assertRaisesRegex(ValueError, "Infinity has no JSON form"):
            clara.json5_to_json("[Infinity]")
        # 03_kv_store.basil's schemas, as the seed writes them, in descriptors given as text.
        store = {}
        clara.register_tool("{name:'seed_kv_set', description:'Set a small key/value', returns:'json', "
                            "input_schema:{type:'object',properties:{k:{type:'string'},v:{type:'string'}},required:['k','v']}}",
                            lambda args: store.update({args["k"]: args["v"]}) or {"ok": True})
        self.assertEqual(clara.call("seed_kv_set", k="name", v="Erik"), {"ok": True})
        self.assertEqual(store, {"name": "Erik"})
        with self.assertRaises(clara.InvalidArgs):
            clara.call("seed_kv_set", k="name")

    # Seed 002: tool_choice reaches the model.

    def test_tool_choice(self):
        clara.configure({"llm": {"base_url": self.url + "/seed_time_tool", "model": "m"}})
        result = clara.call("chat", prompt="What's the time? Use tools if needed.", allow_tools=True,
                            tools=["get_time"], tool_choice="required", max_tool_calls=1)
        self.assertEqual(result["content"], "It is noon, UTC.")
        self.assertEqual(self.report("seed_time_tool")["failures"], [])
        with self.assertRaises(clara.InvalidArgs):
            clara.call("chat", prompt="x", tool_choice="sometimes")

    # Seed 003: memory between task()s; getMemory(); the events.

    def test_memory_and_events(self):
        clara.configure({"llm": {"base_url": self.url + "/seed_memory", "model": "claude-test", "provider": "anthropic"}})
        events = []
        clara.set_event_handler(events.append)
        try:
            dml = clara.Session("dml")
            dml.call("chat", system="You are a research analyst with web search capabilities",
                     prompt="Search for information about: AI trends")
            report = dml.call("chat", prompt="Write a comprehensive report based on your research")
        finally:
            clara.set_event_handler(None)
        self.assertEqual(report["content"], "Report: agents, small models and evaluation lead.")
        self.assertEqual(self.report("seed_memory")["failures"], [])
        memory = dml.call("chat_history")
        self.assertEqual([(m["role"], m["content"]) for m in memory["messages"]], [
            ("user", "Search for information about: AI trends"),
            ("assistant", "Found three trends: agents, small models, evaluation."),
            ("user", "Write a comprehensive report based on your research"),
            ("assistant", "Report: agents, small models and evaluation lead.")])
        self.assertEqual([e["event"] for e in events], ["answer", "finished", "answer", "finished"])
        self.assertEqual(events[-1]["status"], "success")
        self.assertEqual(events[-1]["usage"], {"prompt_tokens": 40, "completion_tokens": 10, "total_tokens": 50})

        # A chat that fails ends with error, then finished; no key in them.
        os.environ["CLARA_TEST_SEED_KEY"] = "sk-test-0123456789abcdef"
        self.addCleanup(os.environ.pop, "CLARA_TEST_SEED_KEY")
        clara.configure({"llm": {"base_url": self.url + "/error_500", "model": "m", "provider": "openai",
                                 "api_key_env": "CLARA_TEST_SEED_KEY", "max_retries": 0}})
        events.clear()
        clara.set_event_handler(events.append)
        try:
            with self.assertRaises(clara.ToolFailed):
                clara.call("chat", prompt="hi")
        finally:
            clara.set_event_handler(None)
        self.assertEqual([e["event"] for e in events], ["error", "finished"])
        self.assertEqual(events[0]["error"], "tool_failed")
        self.assertEqual((events[1]["status"], events[1]["turns"]), ("tool_failed", 1))
        self.assertNotIn("sk-test-0123456789abcdef", json.dumps(events))

    # Seed 003: Google's models by their names, tool calling included.

    def test_gemini(self):
        os.environ["CLARA_TEST_GEMINI_KEY"] = "AIza-python-secret"
        self.addCleanup(os.environ.pop, "CLARA_TEST_GEMINI_KEY")
        clara.configure({"llm": {"base_url": self.url + "/gemini_lights", "model": "gemini-2.5-flash",
                                 "api_key_env": "CLARA_TEST_GEMINI_KEY"}})

        @clara.tool
        def set_light_values(brightness: int, color_temp: str) -> dict:
            """Set the brightness and color temperature of a room light."""
            return {"brightness": brightness, "colorTemperature": color_temp}

        events = []
        clara.set_event_handler(events.append)
        try:
            result = clara.call("chat", prompt="Dim the lights so the room feels cozy and warm.", allow_tools=True,
                                tools=["set_light_values"])
        finally:
            clara.set_event_handler(None)
        self.assertEqual(result["content"], "I've dimmed the lights to 25% with a warm color temperature.")
        self.assertEqual(result["tool_calls"][0]["arguments"], {"color_temp": "warm", "brightness": 25})
        (tool_result,) = [e for e in events if e["event"] == "tool_result"]
        self.assertEqual(tool_result["result"], {"brightness": 25, "colorTemperature": "warm"})
        self.assertEqual(self.report("gemini_lights")["failures"], [])
        self.assertNotIn("AIza-python-secret", json.dumps(result) + json.dumps(events))

    # Seed 002's starter tool doc_search: the project's documents, found by
    # word, the index kept current by the file watcher.

    def test_doc_search(self):
        import tempfile
        import time
        import shutil
        root = tempfile.mkdtemp(prefix="clara-docs-")
        self.addCleanup(shutil.rmtree, root, True)
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(root, "README.md"), "w") as f:
            f.write("# Basil\n\nBasil is a BASIC dialect.\n\nAI.TOOL.REGISTER adds a tool\nthat the model may call.\n")
        with open(os.path.join(root, "docs", "tools.md"), "w") as f:
            f.write("# Tools\n\nLimits: timeout_ms bounds\na tool call.\n")
        with open(os.path.join(root, "docs", "notes.txt"), "w") as f:
            f.write("a tool call in a text file\n")
        clara.configure({"project_root": root, "doc_search": {"patterns": ["*.md", "docs/**/*.md"]}})
        results = clara.call("doc_search", query="tool call", limit=5)["results"]
        self.assertEqual([(r["path"], r["line"]) for r in results], [("docs/tools.md", 4), ("README.md", 5)])
        self.assertIn("[tool]", results[0]["snippet"])
        with open(os.path.join(root, "docs", "limits.md"), "w") as f:
            f.write("rate_per_min counts the calls of a minute\n")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            found = clara.call("doc_search", query="rate_per_min")["results"]
            if found:
                break
            time.sleep(0.05)
        self.assertEqual([(r["path"], r["line"]) for r in found], [("docs/limits.md", 1)])
        with self.assertRaises(clara.InvalidArgs):
            clara.call("doc_search", query="?!")
        tool = [t for t in clara.tools() if t["name"] == "doc_search"][0]
        self.assertEqual((tool["capabilities"], tool["llm_visible"]), (["fs_read"], True))
        clara.configure({"doc_search": {"patterns": ["../*.md"]}})
        with self.assertRaisesRegex(clara.ToolFailed, "leaves project_root"):
            clara.call("doc_search", query="tool")
