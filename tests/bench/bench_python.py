# SPDX-License-Identifier: MIT
"""Row "Python" of the bench table.

Clara:     a ctypes call of clara_evaluate (restype c_void_p, so ctypes does not
           copy the result on its own) + ctypes.string_at + clara_free_string.
Reference: the same pattern on libc: a ctypes call of strdup of a bytes object
           the size of Clara's response + ctypes.string_at + free.

The two alternate block by block; each block is timed with
clock_gettime(CLOCK_MONOTONIC). Usage: bench_python.py PATH/TO/libclara.so
Prints "sample ROW SIDE NS_PER_OP" lines (see bench_common.h).
"""
import ctypes
import os
import sys
import time

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

    reps = env_int("CLARA_BENCH_REPS", 7)
    block_ns = env_int("CLARA_BENCH_BLOCK_MS", 150) * 1_000_000
    n_clara = calibrate(run_clara, block_ns)
    n_ref = calibrate(run_ref, block_ns)
    print("info python %s" % sys.version.split()[0])
    for _ in range(reps):
        print("sample python clara %.3f" % timed(run_clara, n_clara))
        print("sample python ref %.3f" % timed(run_ref, n_ref), flush=True)


if __name__ == "__main__":
    main()
