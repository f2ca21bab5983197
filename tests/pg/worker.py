"""One Clara host process of the shared store's tests (tests/pg/test_shared.py):
the built library through the clara package, store.backend = "postgres" on the
database CLARA_DATABASE_URL names. Each mode prints what the test checks, as
one JSON line at the end (or a line per acknowledged write).

usage: worker.py MODE [ARGS]
  rate CALLS          call the tool "scarce" (rate_per_min = $RATE) CALLS times
                      once the file $GO exists ($BACKEND: sqlite keeps the window here)
  chat PROMPT         one chat in the session "shared" ($LLM_URL)
  history             chat_history of the session "shared"
  ask                 a call of "launch" (needs_approval), the handler leaving it pending
  decide              approve the first approval listed, its arguments edited
  write START         state_set k<i> from START on, printing "ack i" after each success
  check N             state_get k0..k<N-1>: prints the indices found
  load SECONDS        state_set and calls of "scarce" for SECONDS, timing each
  notify              seed 004's token warning three times and a notice held until the
                      next turn, in the session "oracle", then exit
  turn                an on_turn_start of the session "oracle" (a low token usage)
  drain               notifications_drain of the session "oracle"
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python"))
import clara  # noqa: E402


def setup(extra=None):
    cfg = {"state_dir": "", "rules": {"paths": [], "watch": False}, "plugins": {"paths": []},
           "store": {"backend": os.environ.get("BACKEND", "postgres"),
                     "statement_timeout_ms": int(os.environ.get("STATEMENT_TIMEOUT_MS", "3000"))}}
    if extra:
        cfg.update(extra)
    env = clara.configure(cfg)
    if env["status"] != "success":
        print(json.dumps({"configure": env}))
        sys.exit(2)


def scarce_tool():
    @clara.tool(name="scarce", limits={"rate_per_min": int(os.environ.get("RATE", "100"))})
    def scarce() -> dict:
        """A tool every process calls, under one rate limit."""
        return {"ok": True}


def rate(calls):
    setup()
    scarce_tool()
    go = os.environ.get("GO")
    while go and not os.path.exists(go):
        time.sleep(0.005)
    counts = {"success": 0}
    admitted = []
    start = time.monotonic()
    for _ in range(calls):
        env = clara.evaluate({"tool": "scarce", "arguments": {}})
        if env["status"] == "success":
            counts["success"] += 1
            admitted.append(time.time())
        else:
            counts[env["error"]] = counts.get(env["error"], 0) + 1
    took = time.monotonic() - start
    print(json.dumps({"counts": counts, "admitted": admitted, "seconds": took}))


def chat(prompt):
    setup({"llm": {"base_url": os.environ["LLM_URL"], "model": "m"}})
    env = clara.evaluate({"tool": "chat", "session": "shared", "arguments": {"prompt": prompt}})
    print(json.dumps(env))


def history():
    setup()
    print(json.dumps(clara.evaluate({"tool": "chat_history", "session": "shared", "arguments": {}})))


def ask():
    setup()
    clara.set_approval_handler(lambda request: None)  # left to approval_decide, wherever it is called

    @clara.tool(name="launch", needs_approval=True)
    def launch(count: int) -> dict:
        """A call a person must approve."""
        return {"launched": count, "pid": os.getpid()}

    print(json.dumps({"ready": True}), flush=True)
    print(json.dumps(clara.evaluate({"tool": "launch", "session": "s", "arguments": {"count": 1}})), flush=True)


def decide():
    setup()
    deadline = time.time() + 20
    while time.time() < deadline:
        env = clara.evaluate({"tool": "approvals_list", "arguments": {}})
        if env["status"] == "success" and env["result"]["approvals"]:
            a = env["result"]["approvals"][0]
            out = clara.evaluate({"tool": "approval_decide", "arguments": {
                "id": a["id"], "decision": "approve", "arguments": {"count": 2}}})
            print(json.dumps({"listed": a, "decided": out}))
            return
        time.sleep(0.05)
    print(json.dumps({"listed": None}))


def write(start):
    setup()
    i = start
    while True:
        env = clara.evaluate({"tool": "state_set", "session": "w", "arguments": {"key": "k%d" % i, "value": i}})
        if env["status"] == "success":
            sys.stdout.write("ack %d\n" % i)
            sys.stdout.flush()
        i += 1


def check(n):
    setup()
    found = []
    for i in range(n):
        env = clara.evaluate({"tool": "state_get", "session": "w", "arguments": {"key": "k%d" % i}})
        if env["status"] == "success" and env["result"]["found"] and env["result"]["value"] == i:
            found.append(i)
    print(json.dumps({"found": found}))


def load(seconds):
    setup()
    scarce_tool()
    end = time.monotonic() + seconds
    acked, codes, slowest, admitted, i = [], {}, 0.0, 0, 0
    tag = os.getpid()
    while time.monotonic() < end:
        for req in ({"tool": "state_set", "session": "load", "arguments": {"key": "p%d_%d" % (tag, i), "value": i}},
                    {"tool": "scarce", "arguments": {}}):
            t0 = time.monotonic()
            env = clara.evaluate(req)
            slowest = max(slowest, time.monotonic() - t0)
            code = "success" if env["status"] == "success" else env["error"]
            codes[code] = codes.get(code, 0) + 1
            if code == "success" and req["tool"] == "state_set":
                acked.append("p%d_%d" % (tag, i))
            elif code == "success":
                admitted += 1
            elif code == "unavailable" and "database" not in env["message"]:
                print(json.dumps({"bad_message": env}))
        i += 1
    print(json.dumps({"codes": codes, "acked": acked, "admitted": admitted, "slowest": slowest}))


ORACLE_RULES = """
[[rules]]
id = "token-budget-warning"
trigger = "on_turn_start"
[rules.condition]
expression = "context.turn.token_usage > 0.8"
[[rules.actions]]
type = "notify_self"
message = "Token budget at {{ context.turn.token_usage | percent }}. Consider wrapping up."
priority = "high"

[[rules]]
id = "remind-next-turn"
trigger = "task_done"
[[rules.actions]]
type = "notify_self"
message = "{{ context.task }} is done"
deliver_on = "on_turn_start"
"""


def notify():
    setup({"rules": {"paths": [], "watch": False, "builtin": False}})
    env = clara.evaluate({"tool": "rules_load", "arguments": {"name": "oracle.toml", "toml": ORACLE_RULES}})
    emitted = [clara.emit("on_turn_start", {"turn": {"token_usage": 0.85}}, session="oracle")["result"]["notices"]
               for _ in range(3)]
    emitted.append(clara.emit("task_done", {"task": "indexing"}, session="oracle")["result"]["notices"])
    print(json.dumps({"loaded": env["status"], "emitted": emitted}))


def turn():
    setup({"rules": {"paths": [], "watch": False, "builtin": False}})
    print(json.dumps(clara.emit("on_turn_start", {"turn": {"token_usage": 0.1}}, session="oracle")))


def drain():
    setup()
    print(json.dumps(clara.evaluate({"tool": "notifications_drain", "session": "oracle", "arguments": {}})))


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "rate":
        rate(int(args[0]))
    elif mode == "chat":
        chat(args[0])
    elif mode == "history":
        history()
    elif mode == "ask":
        ask()
    elif mode == "decide":
        decide()
    elif mode == "write":
        write(int(args[0]))
    elif mode == "check":
        check(int(args[0]))
    elif mode == "load":
        load(float(args[0]))
    elif mode == "notify":
        notify()
    elif mode == "turn":
        turn()
    elif mode == "drain":
        drain()
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
