# SPDX-License-Identifier: MIT
"""Turns the lines printed by the bench programs into the bench table.

Usage: table.py SAMPLES_FILE MARKDOWN_OUT
Reads "sample ROW SIDE NS", "info KEY VALUE...", "mem ..." and
"failed PROGRAM LOGFILE" lines; prints the table as text on stdout and
writes it as markdown to MARKDOWN_OUT. It reports; it never judges by
exiting non-zero.
"""
import statistics
import sys

# key, row, Clara side, reference side, kind, goal operator, goal value.
# kind "time": ratio = Clara median / reference median (lower is better).
# kind "throughput": ratio = reference median / Clara median, i.e. how many
# times more calls per second the Clara side makes (higher is better).
ROWS = [
    ("c_echo", "C echo", "jansson echo", "time", "<=", 0.35),
    ("c_threads", "C echo, 2 threads", "Clara, 1 thread", "throughput", "machine", 0.9),
    ("c_threads_sessions", "C echo, 2 threads, a session per thread", "Clara, 1 thread, a session",
     "throughput", "machine", 0.9),
    ("c_threads_jansson", "(machine check)", "jansson, 1 thread", "throughput", None, None),
    ("c_threads4", "C echo, 4 threads", "Clara, 1 thread", "throughput", "machine4", 0.9),
    ("c_threads4_jansson", "(machine check, 4 threads)", "jansson, 1 thread", "throughput", None, None),
    ("python", "Python", "ctypes strdup", "time", "<=", 2.5),
    ("python_call", "Python clara.call", "ctypes strdup", "time", "<=", 3.0),
    ("python_tool", "Python tool (through clara_evaluate)", "the function called directly", "time", None, None),
    ("clips_bare", "CLIPS", "bare C UDF", "time", "<=", 5.0),
    ("clips_jansson", "CLIPS vs jansson UDF", "jansson C UDF", "time", "<", 1.0),
    ("c_tool", "C tool (echoes in C)", "built-in echo", "time", None, None),
    ("c_tool_caller", "C tool, on_caller_thread", "built-in echo", "time", None, None),
    ("c_tool_one_cpu", "C tool, all threads on one processor", "built-in echo, same processor", "time", None, None),
    ("python_tool_c", "Python tool (through clara_evaluate)", "the same tool in C", "time", None, None),
    ("python_tool_here", "Python tool, on_caller_thread", "the same tool in C", "time", None, None),
    ("lua_tool", "Lua tool (returns its arguments)", "built-in echo", "time", None, None),
    ("chat", "chat, one tool call (Go, loopback)", "the same 2 exchanges, bare net/http", "time", "<=", 1.2),
    ("chat_parallel", "chats from 16 goroutines, wall time per chat", "one chat at a time", "time", None, None),
    ("mcp", "MCP tools/call of echo over stdio through the engine (Go SDK client)", "the SDK's bare server", "time", "<=", 1.3),
    ("async_wait", "async echo: clara_submit + clara_wait", "clara_evaluate", "time", "<=", 3.0),
    ("async_batch", "10,000 async echoes through the eventfd, per call", "the same called one by one", "time", None, None),
    ("validation", "5-property schema (Go)", "same tool, no schema", "time", None, None),
    ("audit", "one audit record (Go)", "echo, whole call (Go)", "time", None, None),
    ("rules_watch", "echo, built-in rules on (Go)", "echo, built-in rules off (Go)", "time", None, None),
    ("rule_allows", "echo through an on_tool_call rule that allows it (Go)", "echo, no rule (Go)", "time", None, None),
    ("rule_rewrites", "echo through an on_tool_call rule that rewrites it (Go)", "echo, no rule (Go)", "time", None, None),
    ("telemetry", "echo, telemetry on: batches to OTLP on loopback (Go)", "echo, telemetry off (Go)", "time", None, None),
    ("state_set_pg", "state_set in PostgreSQL, loopback (Go)", "state_set in SQLite (Go)", "time", None, None),
    ("state_get_pg", "state_get in PostgreSQL, loopback (Go)", "state_get in SQLite (Go)", "time", None, None),
    ("rate_shared", "rate-limited call, window in PostgreSQL (Go)", "window in the process (Go)", "time", None, None),
    ("procs4", "4 processes × rate-limited tool, window shared, per call", "each process its own window", "time", None, None),
    ("condition", "condition", "simpleeval, pre-parsed", "throughput", ">=", 50.0),
    ("condition_vm", "condition, through expr's VM", "simpleeval, pre-parsed", "throughput", None, None),
    ("lua_rule", "Lua rule", "lupa (LuaJIT), context converted", "throughput", ">=", 2.5),
]

# Rows with an absolute goal and no reference: key, row, goal in µs.
ABSOLUTE = [
    ("emit", "emit (100 rules, 10 match)", 20.0),
    ("emit_none", "emit (100 rules, 0 match)", None),
    ("globs", "globs (10,000 paths × 50 callbacks, dry run)", 20000.0),
    ("callback_true", "one blocking callback running `true`", None),
]

# What each row measures, printed under the table.
LEGEND = [
    "C echo: clara_evaluate + clara_free_string of the echo request, 1 thread; reference: the same echo in C "
    "with jansson (json_loads, build the envelope, json_dumps JSON_COMPACT, free).",
    "C echo, 2 threads: Clara on 2 threads, wall time of a block / calls of both threads; reference: Clara "
    "on 1 thread. Machine check: the same with the jansson echo (pure C, nothing shared): what 2 threads "
    "could gain on this machine during this run; the goal is a share of it. A session per thread: each "
    "thread's requests name a session of its own. 4 threads: the same with 4 threads against 1 (on 2 cores, "
    "2× at most), beside its own machine check.",
    "Python: ctypes call of clara_evaluate (restype c_void_p) + string_at + clara_free_string; reference: "
    "ctypes call of libc strdup of a string of the response's size + string_at + free.",
    "Python clara.call: clara.call(\"echo\", message=\"hello\") of the clara package (arguments encoded, "
    "the call, the envelope parsed, the result returned or the error raised); reference: ctypes strdup of a "
    "string of that response's size + string_at + free.",
    "Python tool: a @clara.tool function (one str parameter, returns a dict) called through clara_evaluate "
    "from ctypes, raw text in and out; reference: the same function called directly from Python.",
    "CLIPS: (loop-for-count (?i 1 N) do (clara-evaluate \"<request>\")) timed around EnvEval; references: "
    "a bare C UDF returning a fresh STRING of the response's size (malloc+memcpy+EnvAddSymbol+free), and a "
    "C UDF doing the jansson echo. All three return the same text, so EnvAddSymbol finds the same symbol.",
    "C tool: a tool written in C that returns its arguments, through clara_evaluate; reference: the built-in "
    "echo with the same 5 arguments. The difference is the cost of a host tool (arguments copied to C, the "
    "call handed to a worker thread and back, its JSON checked).",
    "C tool, on_caller_thread: the same C tool registered with \"on_caller_thread\": true, which runs on "
    "the calling thread (no handoff; its timeout cannot cut it short).",
    "C tool, all threads on one processor: the C tool row run pinned to one processor (tests/one-cpu.sh), as when the other "
    "processors are busy: the caller and the worker thread take turns on one processor.",
    "Python tool vs C: from ctypes, clara_evaluate of a Python tool (@clara.tool) and of a C tool (in a "
    "shared object the bench builds), both returning {\"message\": \"hello\"} for the same arguments: what "
    "a Python tool costs over a C one. Python tool, on_caller_thread: the same Python function registered "
    "with on_caller_thread=True, against the same C tool.",
    "5-property schema: Go benchmarks of the engine calling one Go tool (run inline, like a built-in) with "
    "the same 5 arguments, registered with a 5-property input_schema (types, enum, pattern, bounds, required, "
    "additionalProperties) vs without: the cost of validating the arguments.",
    "audit: Go benchmark of recording one call in the audit ring (toolbox.Audit.Add), beside the engine's "
    "whole echo call (no cgo), which includes it; alternated one run each.",
    "echo, telemetry on: Go benchmark of the engine's echo with [telemetry] enabled (a span per call with its "
    "decision events, the metrics, the audit record as an OTLP log), the SDK's batch processors exporting to a "
    "receiver on loopback that decodes every batch; beside the same echo with telemetry off (the default).",
    "echo, built-in rules on: Go benchmarks of the engine's echo with the default rules (large_result "
    "watches every completed call) and with rules.builtin = false: what a rule on every call costs.",
    "echo through a rule that allows / rewrites: Go benchmarks of the engine's echo with one on_tool_call rule in "
    "force (no built-in rules): one whose condition reads the arguments (context.tool.arguments.n > 1000) and "
    "does not match, so the call goes through; one that matches and rewrites the arguments (a template of one "
    "field, merged: the arguments decoded for the rule, the rule fired, the new arguments written and hashed "
    "before and after for the audit); reference: the same echo with no rule.",
    "condition: one rule whose condition is `context.tool.result_bytes > thresholds.large_result_bytes and "
    "context.tool.name != \"echo\"`, fired through the rule engine (Set.Fire, Go benchmark, context built) vs "
    "simpleeval evaluating the same text, parsed once, on SimpleNamespace objects (/usr/bin/python3). "
    "Clara evaluates comparisons joined by and/or without expr's VM; the second row forces the VM "
    "for the same rule. Ratio: how many times faster Clara is.",
    "Lua tool: a tool declared in configuration whose Lua returns its arguments, through clara_evaluate from C; "
    "reference: the built-in echo with the same 5 arguments.",
    "Lua rule: the seed's rule `function(ctx) return ctx.turn.token_usage > 0.8 and ctx.history.tool_count > 5 end` "
    "as a Lua condition fired through the rule engine (Set.Fire, Go benchmark; ctx read from the event's context, "
    "one log action) vs Python + lupa (LuaJIT) calling the same function, compiled once, with the event's dicts "
    "converted to Lua tables on every call (/usr/bin/python3). Ratio: how many times faster Clara is.",
    "globs: Go benchmark of callbacks.Manager.Trigger, dry run: 10,000 changed paths against 50 active callbacks "
    "with gitignore patterns (SPEC §12: ≤ 20 ms, so the goal column reads 20000 µs). "
    "One blocking callback running `true`: a whole run (script written by Clara, bash started in its own process "
    "group, reaped, group checked) for orientation.",
    "emit: clara_emit + clara_free_string from C; 100 rules on the trigger, half with conditions of "
    "comparisons only, half calling len() first, 10 matching, each rendering a notice from a "
    "two-part template; the answer lists the 10 rules fired and their notices.",
    "Shared store (issue 31): Go benchmarks of the engine's state_set (key among 100, value a number) and state_get "
    "through the whole pipeline with store.backend = \"postgres\" (PostgreSQL 15 on loopback started by the bench, default "
    "settings: each commit flushed to disk) vs SQLite (a WAL file under a temporary state_dir). Rate-limited call: a host "
    "Go tool with rate_per_min = 1000 per session (sessions changing every 900 calls, none refused), its window in "
    "PostgreSQL (one statement that locks the key's row) vs in the process. 4 processes: four Python hosts calling "
    "one tool with rate_per_min = 1000 at once, 2,000 calls each; wall time of the slowest divided by the 8,000 calls, "
    "window shared vs each process its own; how many calls the four admitted together is printed below.",
    "MCP: Go benchmark, the Go SDK's client calling echo over stdio on a child process: the engine (default "
    "configuration, built-in rules on) serving its built-in echo through the whole pipeline (policy, rules, "
    "validation, limits, audit, structuredContent), vs the SDK's bare server whose echo handler does nothing "
    "else; same client, same pipes, protocol 2025-11-25.",
]

NOT_BUILT = []

MEM_TOLERANCE_KIB = 1024  # RSS wobbles by a few hundred KiB as Go's heap breathes

HEADERS = ["row", "Clara: median [min–max]", "reference", "reference: median [min–max]", "ratio", "goal",
           "met"]


def us(ns):
    v = ns / 1000.0
    if v < 1:
        return "%.3f" % v
    if v < 10:
        return "%.2f" % v
    return "%.1f" % v


def figure(values):
    return "%s µs [%s–%s]" % (us(statistics.median(values)), us(min(values)), us(max(values)))


def fmt_ratio(r):
    return "%.2f×" % r


# Goals relative to the machine check of the same run: the ratio over the
# machine check's (how much of what the machine gave the pure C echo).
MACHINE = {"machine": "c_threads_jansson", "machine4": "c_threads4_jansson"}


def goal_text(op, value, kind):
    if op is None:
        return "— (shows the machine)"
    if op in MACHINE:
        return "≥ %g× the machine check's" % value
    sym = {"<=": "≤", ">=": "≥", "<": "<"}[op]
    return "%s %g× (%s)" % (sym, value, "time" if kind == "time" else "throughput")


def met_text(op, value, ratio):
    if op is None or op in MACHINE:
        return "—"  # machine goals are judged in main(), once every ratio is known
    ok = {"<=": ratio <= value, ">=": ratio >= value, "<": ratio < value}[op]
    if ok:
        return "yes"
    if op == ">=":
        return "NO (%.0f%% short)" % ((1 - ratio / value) * 100)
    return "NO (%.0f%% over)" % ((ratio / value - 1) * 100)


def kib(v):
    return "%.1f MiB" % (v / 1024.0)


def main():
    samples, info, notes, mem, checkpoints, failed = {}, {}, [], None, [], []
    with open(sys.argv[1]) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "sample":
                samples.setdefault(parts[1], {}).setdefault(parts[2], []).append(float(parts[3]))
            elif parts[0] == "info" and len(parts) >= 2:
                if parts[1] == "note":
                    notes.append(" ".join(parts[2:]))
                else:
                    info[parts[1]] = " ".join(parts[2:])
            elif parts[0] == "mem" and parts[1] == "result":
                mem = [float(x) for x in parts[2:]]
            elif parts[0] == "mem" and parts[1] == "checkpoint":
                checkpoints.append((int(parts[2]), int(parts[3])))
            elif parts[0] == "failed":
                failed.append((parts[1], parts[2]))

    table = []
    ratios = {}
    for key, row, ref_side, kind, op, value in ROWS:
        s = samples.get(key, {})
        if not s.get("clara") or not s.get("ref"):
            table.append([row, "no samples (failed to run)", ref_side, "", "", goal_text(op, value, kind), "—"])
            continue
        mc, mr = statistics.median(s["clara"]), statistics.median(s["ref"])
        ratio = ratios[key] = mc / mr if kind == "time" else mr / mc
        table.append([row, figure(s["clara"]), ref_side, figure(s["ref"]), fmt_ratio(ratio),
                      goal_text(op, value, kind), met_text(op, value, ratio)])
    # Goals relative to the machine check: the machine rows come later in
    # ROWS, so these are judged once every ratio is known.
    for r, (key, _, _, _, op, value) in zip(table, ROWS):
        if op in MACHINE:
            if key not in ratios or MACHINE[op] not in ratios:
                r[-1] = "—"
                continue
            share = ratios[key] / ratios[MACHINE[op]]
            r[-1] = ("yes" if share >= value else "NO") + " (%.2f of the machine's %s)" % (
                share, fmt_ratio(ratios[MACHINE[op]]))

    for key, row, goal in ABSOLUTE:
        s = samples.get(key, {}).get("clara")
        if not s:
            table.append([row, "no samples (failed to run)", "—", "", "", "", "—"])
            continue
        m = statistics.median(s)
        if goal is None:
            table.append([row, figure(s), "—", "", "", "—", "—"])
            continue
        met = "yes" if m / 1000.0 <= goal else "NO (%.0f%% over)" % ((m / 1000.0 / goal - 1) * 100)
        table.append([row, figure(s), "—", "", "", "≤ %g µs" % goal, met])

    if mem is not None:
        calls, start, end, peak, ok, err, per_call = mem
        growth = end - start
        # RSS breathes with Go's heap; a leak is a trend. Compare the median
        # RSS of the second half of the checkpoints with the first half's
        # (the reading after warm-up included).
        rss = [r for _, r in checkpoints]
        half = len(rss) // 2
        trend = statistics.median(rss[half:]) - statistics.median(rss[:half]) if half else growth
        table.append(["memory", "%s at end (peak %s)" % (kib(end), kib(peak)), "after warm-up", kib(start),
                      "%+.2f MiB" % (growth / 1024.0),
                      "flat (trend ≤ %s)" % kib(MEM_TOLERANCE_KIB),
                      ("yes" if trend <= MEM_TOLERANCE_KIB else "NO") + " (trend %+.2f MiB)" % (trend / 1024.0)])
    else:
        table.append(["memory", "no result (failed to run)", "after warm-up", "", "", "flat", "—"])

    for row, ref_side, goal in NOT_BUILT:
        table.append([row, "not built yet", ref_side, "not built yet", "", goal, "—"])

    header_lines = [
        "Clara %s bench, %s; %s CPUs (%s); load average %s at start, %s at end; "
        "%s repetitions of %s ms blocks per row, Clara and reference interleaved; "
        "figures are per call: median [min–max]." % (
            info.get("clara_version", "?"), info.get("date", "?"), info.get("cpus", "?"),
            info.get("cpu_model", "?"), info.get("load_start", "?"), info.get("load_end", "?"),
            info.get("reps", "?"), info.get("block_ms", "?")),
    ]
    footer = list(LEGEND)
    cpu = samples.get("c_echo_cpu", {})
    if cpu.get("clara") and cpu.get("ref"):
        footer.append("C echo, process CPU time per call (all threads, Go's runtime included): Clara %s, "
                      "jansson echo %s." % (figure(cpu["clara"]), figure(cpu["ref"])))
    loop = samples.get("clips_loop", {}).get("ref")
    if loop:
        footer.append("CLIPS: the empty loop (loop-for-count ... do TRUE) costs %s per iteration; it is "
                      "included in all three CLIPS figures." % figure(loop))
    if "procs4_admitted_clara" in info:
        footer.append("4 processes × rate_per_min = 1000: admitted together %s with the window shared in PostgreSQL, "
                      "%s with a window per process." % (info["procs4_admitted_clara"], info.get("procs4_admitted_ref", "?")))
    if "response_bytes" in info:
        footer.append("Echo response: %s bytes, the same for Clara and every reference." % info["response_bytes"])
    if mem is not None:
        footer.append("Memory: %s calls (%.0f%% error envelopes), %.2f µs per call; ratio column = RSS growth "
                      "from after warm-up to the end; trend = median RSS of the second half of the checkpoints "
                      "minus the first half's. RSS in MiB at each 1/%d of the calls: %s."
                      % (format(int(mem[0]), ","), 100.0 * mem[5] / max(1, mem[4] + mem[5]), mem[6] / 1000,
                         max(1, len(checkpoints) - 1), " ".join("%.1f" % (r / 1024.0) for _, r in checkpoints)))
    for key, what in (("c_tool", "a C tool costs over the built-in echo"),
                      ("c_tool_caller", "a C tool on the caller's thread costs over the built-in echo"),
                      ("c_tool_one_cpu", "a C tool costs over the built-in echo, all on one processor"),
                      ("python_tool_c", "a Python tool costs over the same tool in C"),
                      ("python_tool_here", "a Python tool on the caller's thread costs over the same tool in C"),
                      ("python_tool", "calling a Python tool through Clara costs over calling it directly"),
                      ("lua_tool", "a Lua tool costs over the built-in echo"),
                      ("validation", "validating 5 arguments against a schema costs"),
                      ("rules_watch", "a rule watching every completed call costs"),
                      ("rule_allows", "an on_tool_call rule that lets the call through costs"),
                      ("rule_rewrites", "an on_tool_call rule that rewrites the arguments costs"),
                      ("telemetry", "telemetry on (traces, metrics, OTLP logs) costs")):
        s = samples.get(key, {})
        if s.get("clara") and s.get("ref"):
            diff = statistics.median(s["clara"]) - statistics.median(s["ref"])
            footer.append("Difference of the medians: %s %+.3f µs per call." % (what, diff / 1000.0))
    footer.extend("Note: " + n for n in notes)
    for prog, log in failed:
        footer.append("FAILED: %s did not run to completion, see %s" % (prog, log))

    # Text.
    widths = [max(len(r[i]) for r in [HEADERS] + table) for i in range(len(HEADERS))]

    def line(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    out = header_lines + ["", line(HEADERS), line(["-" * w for w in widths])]
    out += [line(r) for r in table]
    out += [""] + footer
    print("\n".join(out))

    # Markdown.
    md = header_lines + ["", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    md += ["| " + " | ".join(c.strip().replace("|", "\\|") for c in r) + " |" for r in table]
    md += [""] + ["- " + f for f in footer]
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
