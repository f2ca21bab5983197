# SPDX-License-Identifier: MIT
"""Reference side of the bench row "Lua rule" (SPEC §12): Python + lupa
(LuaJIT, Debian's python3-lupa) evaluating the seed's rule

    function(ctx) return ctx.turn.token_usage > 0.8 and ctx.history.tool_count > 5 end

with the context converted from the event's Python dicts to Lua tables on
every call, as the seed's design does (lua.table_from per evaluation). The
function is compiled once, outside the timed loop. Clara's side is
BenchmarkFire_luaRule (core/rules/bench_lua_test.go): the same rule as a Lua
condition, fired through the rule engine with the context built from the
same event.

Runs one calibrated block of CLARA_BENCH_BLOCK_MS and prints
"sample ROW ref NS_PER_OP" for each ROW given. Run it with /usr/bin/python3.
Usage: bench_lua.py ROW...
"""
import os
import sys
import time

from lupa import LuaRuntime

RULE = "function(ctx) return ctx.turn.token_usage > 0.8 and ctx.history.tool_count > 5 end"

# The event's context, as the rule engine sees it (SPEC §7.2): the payload's
# fields at the top, plus event and history.
EVENT = {
    "event": {"name": "on_turn_start", "session": "bench"},
    "turn": {"token_usage": 0.85, "number": 3},
    "history": {"tool_count": 7, "failure_count": 0, "recent_tools": ["search", "read", "echo"],
                "consecutive_failures": {}},
}


def main():
    lua = LuaRuntime(unpack_returned_tuples=True)
    rule = lua.eval(RULE)
    table_from = lua.table_from

    def to_lua(v):
        if isinstance(v, dict):
            return table_from({k: to_lua(x) for k, x in v.items()})
        if isinstance(v, list):
            return table_from([to_lua(x) for x in v])
        return v

    if rule(to_lua(EVENT)) is not True:
        sys.exit("bench_lua.py: the rule should be true")

    def block(n):
        t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        for _ in range(n):
            rule(to_lua(EVENT))
        return time.clock_gettime_ns(time.CLOCK_MONOTONIC) - t0

    n = 100
    while block(n) < 20_000_000:  # warm-up and calibration
        n *= 4
    per_op = block(n) / n
    block_ns = int(os.environ.get("CLARA_BENCH_BLOCK_MS", "200")) * 1_000_000
    n = max(1, int(block_ns / per_op))
    ns = block(n) / n
    for row in sys.argv[1:]:
        print("sample %s ref %.1f" % (row, ns))


if __name__ == "__main__":
    main()
