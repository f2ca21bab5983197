"""Several Clara processes sharing one PostgreSQL (issue 31), through the
built library: each worker (tests/pg/worker.py) is a Python host process of
its own. tests/pg/run.sh starts the server and gives its URL in PG_URL and
its folder in PG_DIR; each test gets a fresh database."""
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WORKER = os.path.join(HERE, "worker.py")
_seq = itertools.count(1)


def psql(url, sql):
    subprocess.run(["psql", url, "-v", "ON_ERROR_STOP=1", "-qAtc", sql], check=True, capture_output=True, timeout=60)


def fresh_database():
    """The URL of a new, empty database on the test server."""
    name = "t%d_%d" % (os.getpid(), next(_seq))
    psql(os.environ["PG_URL"], "CREATE DATABASE " + name)
    u = urllib.parse.urlsplit(os.environ["PG_URL"])
    return urllib.parse.urlunsplit((u.scheme, u.netloc, "/" + name, u.query, ""))


def worker_env(url, **more):
    env = dict(os.environ, CLARA_DATABASE_URL=url)
    env.update({k: str(v) for k, v in more.items()})
    return env


def spawn(url, *args, **more):
    return subprocess.Popen([sys.executable, WORKER] + [str(a) for a in args], env=worker_env(url, **more),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run(url, *args, timeout=60, **more):
    p = spawn(url, *args, **more)
    out, err = p.communicate(timeout=timeout)
    if p.returncode != 0:
        raise AssertionError("worker %s exited %d: %s %s" % (args, p.returncode, out, err))
    return json.loads(out.strip().splitlines()[-1])


def last_json(text):
    return json.loads(text.strip().splitlines()[-1])


class SharedStore(unittest.TestCase):

    def test_rate_limit_four_processes_2000_calls(self):
        """4 processes x 500 calls of one tool with rate_per_min = 100: the
        processes together admit exactly 100, the rest are rate_limited."""
        url = fresh_database()
        go = os.path.join(os.environ["PG_DIR"], "go-%d" % os.getpid())
        procs = [spawn(url, "rate", 500, RATE=100, GO=go) for _ in range(4)]
        time.sleep(1.5)  # the four load the library and connect
        open(go, "w").close()
        results = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            self.assertEqual(p.returncode, 0, err)
            results.append(last_json(out))
        os.unlink(go)
        counts = {}
        admitted = []
        for r in results:
            for k, v in r["counts"].items():
                counts[k] = counts.get(k, 0) + v
            admitted += r["admitted"]
        self.assertEqual(counts, {"success": 100, "rate_limited": 1900}, results)
        admitted.sort()
        # All within one minute: no window of a minute held more than 100.
        self.assertLess(admitted[-1] - admitted[0], 60)
        slowest = max(r["seconds"] for r in results)
        print("\n  4 processes x 500 calls: %d admitted of 2000 in %.2f s (%.0f calls/s together)"
              % (counts["success"], slowest, 2000 / slowest), file=sys.stderr)

    def test_conversation_started_in_one_continued_in_another(self):
        url = fresh_database()
        server = subprocess.Popen([os.environ["LLMSERVER"], "-complete", os.path.join(HERE, "conversation.toml")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            base = server.stdout.readline().strip() + "/conversation"
            first = run(url, "chat", "my name is Ada", LLM_URL=base)
            self.assertEqual(first["result"]["content"], "Hello Ada.", first)
            second = run(url, "chat", "what is my name?", LLM_URL=base)  # another process
            self.assertEqual(second["result"]["content"], "Ada.", second)
            hist = run(url, "history")
            self.assertEqual(hist["result"]["turns"], 2)
            self.assertEqual([m["content"] for m in hist["result"]["messages"]],
                             ["my name is Ada", "Hello Ada.", "what is my name?", "Ada."])
        finally:
            _, err = server.communicate(timeout=30)  # closes its stdin: it stops and reports
        self.assertEqual(server.returncode, 0, "the model saw requests against its script: " + err)

    def test_approval_asked_in_one_decided_in_another(self):
        url = fresh_database()
        asker = spawn(url, "ask")
        self.assertEqual(json.loads(asker.stdout.readline()), {"ready": True})
        decided = run(url, "decide")
        self.assertIsNotNone(decided["listed"], decided)
        self.assertEqual(decided["listed"]["tool"], "launch")
        self.assertEqual(decided["listed"]["arguments"], {"count": 1})
        self.assertEqual(decided["decided"]["status"], "success", decided)
        out, err = asker.communicate(timeout=30)
        env = last_json(out)
        self.assertEqual(env["status"], "success", (env, err))
        self.assertEqual(env["result"]["launched"], 2)   # the arguments the other process gave
        self.assertEqual(env["result"]["pid"], asker.pid)

    def test_notices_outlive_their_process_counted_and_held(self):
        """Seed 004's accumulator on the shared store (issue 32): a process
        raises the same notice three times and one held until the next
        turn, and exits; another drains one notice with its count; a third's
        turn releases the held one, which a fourth drains."""
        url = fresh_database()
        raised = run(url, "notify")
        self.assertEqual(raised["loaded"], "success", raised)
        self.assertEqual([len(n) for n in raised["emitted"]], [1, 1, 1, 0], raised)  # the held one is in no answer
        warning = {"rule": "token-budget-warning", "message": "Token budget at 85%. Consider wrapping up.",
                   "priority": "high", "event": "on_turn_start"}
        first = run(url, "drain")
        self.assertEqual(first["result"], {"notices": [dict(warning, count=3)], "dropped": 0}, first)
        self.assertEqual(run(url, "turn")["status"], "success")
        second = run(url, "drain")
        self.assertEqual(second["result"], {"notices": [{"rule": "remind-next-turn", "message": "indexing is done",
                                                         "priority": "normal", "event": "task_done"}],
                                            "dropped": 0}, second)
        self.assertEqual(run(url, "drain")["result"], {"notices": [], "dropped": 0})

    def test_kill_9_of_a_writer_loses_no_acknowledged_write(self):
        url = fresh_database()
        writer = spawn(url, "write", 0)
        acked = []
        deadline = time.time() + 30
        while len(acked) < 300 and time.time() < deadline:
            line = writer.stdout.readline()
            if line.startswith("ack "):
                acked.append(int(line.split()[1]))
        writer.send_signal(signal.SIGKILL)   # mid-stream
        rest, _ = writer.communicate(timeout=30)
        acked += [int(l.split()[1]) for l in rest.splitlines() if l.startswith("ack ")]
        self.assertGreaterEqual(len(acked), 300)
        found = set(run(url, "check", max(acked) + 2)["found"])
        lost = [i for i in acked if i not in found]
        self.assertEqual(lost, [], "acknowledged writes lost")
        print("\n  kill -9 after %d acknowledged writes: all %d there" % (len(acked), len(acked)), file=sys.stderr)

    def test_postgres_restarted_under_load(self):
        """Two processes write state and call a rate-limited tool while the
        server is restarted: calls during the restart answer unavailable in
        time (none hangs, no other error), both carry on once it is back,
        no acknowledged write is lost, the limit holds."""
        url = fresh_database()
        procs = [spawn(url, "load", 6, RATE=50, STATEMENT_TIMEOUT_MS=1000) for _ in range(2)]
        time.sleep(2)
        restart = subprocess.run(["bash", os.path.join(ROOT, "tests", "pg.sh"), "restart", os.environ["PG_DIR"]],
                                 capture_output=True, text=True, timeout=60)
        self.assertEqual(restart.returncode, 0, restart.stderr)
        results = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)
            self.assertNotIn("bad_message", out)
            results.append(last_json(out))
        acked = []
        admitted = 0
        for r in results:
            self.assertEqual(set(r["codes"]) - {"success", "unavailable", "rate_limited"}, set(), r["codes"])
            self.assertLess(r["slowest"], 3.0, "a call took %.2f s" % r["slowest"])
            acked += r["acked"]
            admitted += r["admitted"]
        self.assertLessEqual(admitted, 50)
        self.assertTrue(any(r["codes"].get("unavailable") for r in results), "the restart went unseen: %s" % results)
        keys = ",".join("'%s'" % k for k in acked)
        # On stdin: thousands of keys outgrow one argument (execve's 128 KiB).
        out = subprocess.run(["psql", url, "-qAt"],
                             input="SELECT count(*) FROM clara_state WHERE scope = 'load' AND key IN (%s);\n" % keys,
                             capture_output=True, text=True, check=True).stdout.strip()
        self.assertEqual(int(out), len(acked), "acknowledged writes lost across the restart")
        print("\n  restart under load: %s; %d writes acknowledged, all there"
              % ([r["codes"] for r in results], len(acked)), file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
