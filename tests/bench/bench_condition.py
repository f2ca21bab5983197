# SPDX-License-Identifier: MIT
"""Reference side of the bench rows "condition" (SPEC §12): simpleeval, best
case, evaluating the condition Clara's BenchmarkFire_condition fires
(core/rules/bench_condition_test.go) on a context of SimpleNamespace objects.

Best case means: the expression is parsed once, outside the timed loop
(simpleeval 0.9 has no public pre-parse, so the loop calls what
SimpleEval.eval calls after ast.parse), and the names are set up once.

Runs one calibrated block of CLARA_BENCH_BLOCK_MS and prints
"sample ROW ref NS_PER_OP" for each ROW given. Run it with /usr/bin/python3
(Debian's python3-simpleeval). Usage: bench_condition.py ROW...
"""
import ast
import os
import sys
import time
from types import SimpleNamespace

import simpleeval

CONDITION = 'context.tool.result_bytes > thresholds.large_result_bytes and context.tool.name != "echo"'


def main():
    evaluator = simpleeval.SimpleEval(names={
        "context": SimpleNamespace(tool=SimpleNamespace(name="search", result_bytes=120.0)),
        "thresholds": SimpleNamespace(large_result_bytes=32768),
    })
    evaluator.expr = CONDITION
    tree = ast.parse(CONDITION.strip()).body[0]
    if evaluator._eval(tree) is not False or evaluator.eval(CONDITION) is not False:
        sys.exit("bench_condition.py: the condition should be false")
    run = evaluator._eval

    def block(n):
        t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        for _ in range(n):
            run(tree)
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
