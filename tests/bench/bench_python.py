# SPDX-License-Identifier: MIT
"""Rows "Python", "Python clara.call" and "Python tool" of the bench table.

python:      a ctypes call of clara_evaluate (restype c_void_p, so ctypes does
             not copy the result on its own) + ctypes.string_at +
             clara_free_string.
             Reference: the same pattern on libc: a ctypes call of strdup of a
             bytes object the size of Clara's response + ctypes.string_at + free.
python_call: clara.call("echo", message="hello") through the clara package of
             python/ (arguments encoded, the call, the envelope parsed, the
             result returned).
             Reference: the ctypes strdup pattern above, the size of that
             call's response.
python_tool: a Python tool (@clara.tool, one str parameter, returns a dict)
             called through clara_evaluate from ctypes, raw text in and out.
             Reference: the same Python function called directly. The
             difference is what calling Python code through Clara costs.
python_tool_c: the same Python tool through clara_evaluate from ctypes.
             Reference: a C tool (bench_ctool.c, a shared object given as
             the second argument) answering the same, called the same way.
             The difference is what a Python tool costs over a C one.
python_tool_here: the same Python tool registered with
             on_caller_thread=True (no hand-over of the call nor of the GIL
             to a worker thread), against the same C tool.

The two alternate block by block; each block is timed with
clock_gettime(CLOCK_MONOTONIC). Usage: bench_python.py PATH/TO/libclara.so [PATH/TO/bench_ctool.so]
Prints "sample ROW SIDE NS_PER_OP" lines (see bench_common.h).
"""
import ctypes
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

REQUEST = b'{"tool":"echo","arguments":{"message":"hello","n":42}}'


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def env_int(name, default):
    try:
        value = int(os.environ.get(name, ""))
        return value if value >= 1 else default
    except ValueError:
        return default


def main():
    # The package of this checkout, on the library given (the source tree
    # bundles none, so CLARA_LIBRARY is the one it loads).
    os.environ["CLARA_LIBRARY"] = sys.argv[1]
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import clara

    lib = ctypes.CDLL(sys.argv[1])
    lib.clara_evaluate.restype = ctypes.c_void_p
    lib.clara_evaluate.argtypes = [ctypes.c_char_p]
    lib.clara_free_string.restype = None
    lib.clara_free_string.argtypes = [ctypes.c_void_p]
    libc = ctypes.CDLL("libc.so.6")
    libc.strdup.restype = ctypes.c_void_p
    libc.strdup.argtypes = [ctypes.c_char_p]
    libc.free.restype = None
    libc.free.argtypes = [ctypes.c_void_p]

    p = lib.clara_evaluate(REQUEST)
    response = ctypes.string_at(p)
    lib.clara_free_string(p)
    source = b"x" * len(response)  # the same size as Clara's response

    def run_clara(n):
        evaluate, free_string, string_at, request = lib.clara_evaluate, lib.clara_free_string, ctypes.string_at, REQUEST
        for _ in range(n):
            p = evaluate(request)
            string_at(p)
            free_string(p)

    def run_ref(n):
        strdup, free, string_at, src = libc.strdup, libc.free, ctypes.string_at, source
        for _ in range(n):
            p = strdup(src)
            string_at(p)
            free(p)

    def timed(run, n):
        t0 = now_ns()
        run(n)
        return (now_ns() - t0) / n

    def calibrate(run, block_ns):
        n = 100
        while True:
            t0 = now_ns()
            run(n)
            dt = now_ns() - t0
            if dt >= 20_000_000:
                return max(1, int(block_ns * n / dt))
            n *= 4

    # python_call: clara.call against strdup of its response's size.
    c = clara.Clara()
    assert c.path == os.path.abspath(sys.argv[1]), c.path
    assert clara.call("echo", message="hello") == {"message": "hello"}
    call_source = b"x" * len(c.evaluate_raw('{"tool":"echo","arguments":{"message":"hello"}}').encode())

    def run_call(n):
        call = clara.call
        for _ in range(n):
            call("echo", message="hello")

    def run_call_ref(n):
        strdup, free, string_at, src = libc.strdup, libc.free, ctypes.string_at, call_source
        for _ in range(n):
            p = strdup(src)
            string_at(p)
            free(p)

    def evaluating(tool):
        """The timed loop of clara_evaluate calling tool (arguments
        {"message": "hello"}), after checking its answer once."""
        request = b'{"tool":"%s","arguments":{"message":"hello"}}' % tool
        p = lib.clara_evaluate(request)
        assert ctypes.string_at(p) == b'{"status":"success","tool":"%s","result":{"message":"hello"}}' % tool
        lib.clara_free_string(p)

        def run(n):
            evaluate, free_string, string_at = lib.clara_evaluate, lib.clara_free_string, ctypes.string_at
            for _ in range(n):
                p = evaluate(request)
                string_at(p)
                free_string(p)
        return run

    # python_tool: a Python tool through clara_evaluate against a direct call.
    @clara.tool
    def py_echo(message: str) -> dict:
        return {"message": message}

    run_tool = evaluating(b"py_echo")

    def run_tool_ref(n):
        f = py_echo
        for _ in range(n):
            f(message="hello")

    @clara.tool(on_caller_thread=True)
    def py_echo_here(message: str) -> dict:
        return {"message": message}

    run_tool_here = evaluating(b"py_echo_here")

    # python_tool_c: the Python tool against a C tool answering the same.
    rows_c = []
    if len(sys.argv) > 2:
        ctool = ctypes.CDLL(sys.argv[2])
        lib.clara_register_tool.restype = ctypes.c_int
        lib.clara_register_tool.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        fn = ctypes.cast(ctool.bench_c_echo, ctypes.c_void_p)
        assert lib.clara_register_tool(b'{"name":"c_echo"}', fn, None, None) == 0
        run_c_tool = evaluating(b"c_echo")
        rows_c = [("python_tool_c", run_tool, run_c_tool), ("python_tool_here", run_tool_here, run_c_tool)]

    reps = env_int("CLARA_BENCH_REPS", 7)
    block_ns = env_int("CLARA_BENCH_BLOCK_MS", 150) * 1_000_000
    rows = [("python", run_clara, run_ref), ("python_call", run_call, run_call_ref),
            ("python_tool", run_tool, run_tool_ref)] + rows_c
    counts = [(row, a, calibrate(a, block_ns), b, calibrate(b, block_ns)) for row, a, b in rows]
    print("info python %s" % sys.version.split()[0])
    for _ in range(reps):
        for row, a, na, b, nb in counts:
            print("sample %s clara %.3f" % (row, timed(a, na)))
            print("sample %s ref %.3f" % (row, timed(b, nb)), flush=True)


if __name__ == "__main__":
    main()
