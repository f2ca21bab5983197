"""Issue 29 from Python: the audit's decision ids and parent links, the
sinks (a rotation, a reopen, size rotation, standard output), and
telemetry a Python host gets from the environment alone, exported over
OTLP/HTTP to a receiver on loopback when the interpreter exits."""

import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading

import clara
from clara_testcase import ClaraTestCase, child_env


def records(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


class TestAuditIds(ClaraTestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.path = os.path.join(self.dir.name, "audit.jsonl")

    def test_a_nested_calls_record_names_its_caller(self):
        @clara.tool
        def relay(tool: str) -> dict:
            """Calls another tool inside its own call."""
            return clara.current_call().call(tool, said="hi")

        # No sink: the envelope is as it always was.
        self.assertNotIn("decision_id", clara.evaluate({"tool": "echo", "arguments": {}}))
        clara.configure({"audit": {"path": self.path}})
        self.addCleanup(clara.configure, {"audit": {"path": ""}})
        envelope = clara.evaluate({"tool": "relay", "id": "py-1", "arguments": {"tool": "echo"}})
        self.assertEqual(envelope["status"], "success", envelope)
        outer = envelope["decision_id"]
        by_tool = {r["tool"]: r for r in records(self.path)}
        self.assertEqual(by_tool["relay"]["decision_id"], outer)
        self.assertEqual(by_tool["relay"]["id"], "py-1")
        self.assertNotIn("parent_id", by_tool["relay"])
        self.assertEqual(by_tool["echo"]["parent_id"], outer)   # the nested call names its caller
        self.assertEqual(by_tool["echo"]["id"], "py-1")         # and the host's request
        self.assertNotEqual(by_tool["echo"]["decision_id"], outer)
        # Argument values never reach the file.
        with open(self.path, encoding="utf-8") as f:
            self.assertNotIn('"hi"', f.read())

    def test_decision_ids_on_request(self):
        clara.configure({"audit": {"decision_ids": True}})
        a = clara.evaluate({"tool": "echo", "arguments": {}})["decision_id"]
        b = clara.evaluate({"tool": "echo", "arguments": {}})["decision_id"]
        self.assertNotEqual(a, b)
        tail = clara.call("audit_tail", n=2)["records"]
        self.assertEqual([r["decision_id"] for r in tail], [a, b])

    def test_reopen_after_a_rotation(self):
        clara.configure({"audit": {"path": self.path}})
        self.addCleanup(clara.configure, {"audit": {"path": ""}})
        clara.call("echo", n=1)
        os.rename(self.path, self.path + ".1")
        clara.call("echo", n=2)          # still the renamed file
        clara.audit_reopen()
        clara.call("echo", n=3)          # a new file at audit.path
        self.assertEqual(len(records(self.path + ".1")), 2)
        self.assertEqual(len(records(self.path)), 1)

    def test_size_rotation(self):
        clara.configure({"audit": {"path": self.path, "max_size_mb": 1, "max_backups": 1}})
        self.addCleanup(clara.configure, {"audit": {"path": ""}})
        meta = {"pad": "x" * 1000}    # kept in each record: 1,200 records pass 1 MiB
        for _ in range(1200):
            clara.evaluate({"tool": "echo", "_meta": meta, "arguments": {}})
        names = sorted(os.listdir(self.dir.name))
        self.assertEqual(len(names), 2, names)   # the file and one backup
        for name in names:
            path = os.path.join(self.dir.name, name)
            self.assertLessEqual(os.path.getsize(path), 1 << 20)
            records(path)                        # every line whole

    def test_standard_output_in_a_child(self):
        code = ("import clara\n"
                "clara.configure({'audit': {'path': '-'}})\n"
                "clara.call('echo', x=1)\n")
        p = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        line = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(line["tool"], "echo")
        self.assertIn("decision_id", line)


class _Receiver(http.server.BaseHTTPRequestHandler):
    bodies = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).bodies.append((self.path, self.headers.get("Content-Type"), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class TestTelemetryFromTheEnvironment(ClaraTestCase):

    def test_a_python_host_needs_no_code(self):
        _Receiver.bodies = []
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
        code = ("import clara\n"
                "e = clara.evaluate({'tool': 'echo', 'arguments': {'x': 1},\n"
                "    '_meta': {'traceparent': '00-%s-00f067aa0ba902b7-01'}})\n"
                "print(e['decision_id'])\n" % trace_id)
        env = child_env(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:%d" % server.server_address[1],
                        OTEL_SERVICE_NAME="py-host")
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        decision = p.stdout.strip()
        # The interpreter's exit flushed the batches: a span of the call in
        # the request's trace, the audit record as a log, metrics.
        paths = {path for path, _, _ in _Receiver.bodies}
        self.assertIn("/v1/traces", paths)
        self.assertIn("/v1/logs", paths)
        self.assertIn("/v1/metrics", paths)
        traces = b"".join(b for path, _, b in _Receiver.bodies if path == "/v1/traces")
        self.assertIn(b"execute_tool echo", traces)
        self.assertIn(bytes.fromhex(trace_id), traces)
        self.assertIn(b"py-host", traces)
        self.assertIn(decision.encode(), traces)
        logs = b"".join(b for path, _, b in _Receiver.bodies if path == "/v1/logs")
        self.assertIn(decision.encode(), logs)
        self.assertTrue(all(ct == "application/x-protobuf" for _, ct, _ in _Receiver.bodies))
