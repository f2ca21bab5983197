# SPDX-License-Identifier: MIT
"""The bench row "4 processes x a rate-limited tool" (issue 31): four Python
host processes (tests/pg/worker.py, the library under test) each call the
tool "scarce" (rate_per_min = 1000) CALLS times at once, its window shared
in PostgreSQL (side clara) or kept by each process (side ref, the embedded
default). Prints "sample procs4 SIDE NS" (wall time of the slowest process
divided by all the calls) per repetition, and "info procs4_admitted_SIDE N"
(the calls the four admitted together, last repetition).

usage: bench_shared_procs.py LIBRARY DATABASE_URL REPS CALLS"""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER = os.path.join(ROOT, "tests", "pg", "worker.py")


def fresh_database(url, tag):
    """A new database for one side of one repetition: its window starts empty."""
    name = "procs4_%d_%s" % (os.getpid(), tag)
    made = subprocess.run(["psql", url, "-qAtc", "CREATE DATABASE " + name], capture_output=True, text=True)
    if made.returncode != 0:
        sys.exit("CREATE DATABASE %s: %s" % (name, made.stderr.strip()))  # never the URL: it holds the password
    u = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((u.scheme, u.netloc, "/" + name, u.query, ""))


def side(lib, url, backend, calls):
    with tempfile.TemporaryDirectory() as tmp:
        go = os.path.join(tmp, "go")
        env = dict(os.environ, CLARA_LIBRARY=lib, CLARA_DATABASE_URL=url, RATE="1000", GO=go, BACKEND=backend)
        procs = [subprocess.Popen([sys.executable, WORKER, "rate", str(calls)], env=env, stdout=subprocess.PIPE, text=True)
                 for _ in range(4)]
        time.sleep(1.5)  # the four load the library and connect
        open(go, "w").close()
        results = []
        for p in procs:
            out, _ = p.communicate(timeout=600)
            if p.returncode != 0:
                sys.exit("worker failed: %s" % out)
            results.append(json.loads(out.strip().splitlines()[-1]))
    seconds = max(r["seconds"] for r in results)
    admitted = sum(r["counts"].get("success", 0) for r in results)
    return seconds * 1e9 / (4 * calls), admitted


def main():
    lib, url, reps, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    admitted = {}
    for rep in range(reps):
        for name, backend in (("clara", "postgres"), ("ref", "sqlite")):
            ns, admitted[name] = side(lib, fresh_database(url, "%d_%s" % (rep, name)), backend, calls)
            print("sample procs4 %s %.0f" % (name, ns), flush=True)
    for name, n in admitted.items():
        print("info procs4_admitted_%s %d" % (name, n))


if __name__ == "__main__":
    main()
