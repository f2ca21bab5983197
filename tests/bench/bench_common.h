/* SPDX-License-Identifier: MIT */
/*
 * bench_common.h - helpers shared by the C programs of tests/bench/.
 *
 * Every program prints its measurements as lines that tests/bench/table.py
 * turns into the table:
 *
 *   sample ROW SIDE NS_PER_OP     one repetition of one side of a row
 *   info KEY VALUE...             anything else worth showing under the table
 *
 * Knobs (environment): CLARA_BENCH_REPS (repetitions per row, default 7),
 * CLARA_BENCH_BLOCK_MS (wall time of one timed block, default 150).
 */
#ifndef CLARA_BENCH_COMMON_H
#define CLARA_BENCH_COMMON_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The request of every echo row, and of the references. */
#define BENCH_REQUEST "{\"tool\":\"echo\",\"arguments\":{\"message\":\"hello\",\"n\":42}}"

static inline uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPU time of the whole process, all threads (Go's included). */
static inline uint64_t bench_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline long bench_env_long(const char *name, long fallback, long min) {
    const char *s = getenv(name);
    char *end;
    long v;
    if (s == NULL || *s == '\0') return fallback;
    v = strtol(s, &end, 10);
    if (*end != '\0' || v < min) {
        fprintf(stderr, "bench: ignoring %s=%s (want an integer >= %ld)\n", name, s, min);
        return fallback;
    }
    return v;
}

static inline int bench_reps(void) { return (int)bench_env_long("CLARA_BENCH_REPS", 7, 1); }
static inline uint64_t bench_block_ns(void) {
    return (uint64_t)bench_env_long("CLARA_BENCH_BLOCK_MS", 150, 1) * 1000000u;
}

/* A timed block: run(ctx, n) performs n operations. */
typedef void (*bench_run_fn)(void *ctx, long n);

/* Runs the block with growing counts until it lasts at least 20 ms (this is
 * also the warm-up), then returns the count that should last block_ns. */
static inline long bench_calibrate(bench_run_fn run, void *ctx, uint64_t block_ns) {
    long n = 100;
    for (;;) {
        uint64_t t0 = bench_now_ns(), dt;
        run(ctx, n);
        dt = bench_now_ns() - t0;
        if (dt >= 20000000u || n > (1L << 40)) {
            double per_op = (double)dt / (double)n;
            long want = (long)((double)block_ns / (per_op > 0 ? per_op : 1));
            return want < 1 ? 1 : want;
        }
        n *= 4;
    }
}

/* Times one block of n operations; returns ns per operation. */
static inline double bench_time(bench_run_fn run, void *ctx, long n) {
    uint64_t t0 = bench_now_ns();
    run(ctx, n);
    return (double)(bench_now_ns() - t0) / (double)n;
}

static inline void bench_sample(const char *row, const char *side, double ns_per_op) {
    printf("sample %s %s %.3f\n", row, side, ns_per_op);
    fflush(stdout);
}

/*
 * The reference echo written with jansson: parse the request, check that it
 * names the echo tool, build {"status":"success","tool":"echo","result":
 * <arguments>}, serialise it compactly and free everything but the result,
 * which the caller frees with free(). Returns NULL on a bad request.
 * jansson keeps object keys in insertion order, so the text is byte for byte
 * the envelope Clara returns.
 */
static inline char *bench_jansson_echo(const char *request) {
    json_error_t error;
    json_t *in, *tool, *args, *out;
    char *text;
    in = json_loads(request, 0, &error);
    if (in == NULL) return NULL;
    tool = json_object_get(in, "tool");
    args = json_object_get(in, "arguments");
    if (!json_is_string(tool) || strcmp(json_string_value(tool), "echo") != 0 || !json_is_object(args)) {
        json_decref(in);
        return NULL;
    }
    out = json_object();
    json_object_set_new(out, "status", json_string("success"));
    json_object_set(out, "tool", tool);
    json_object_set(out, "result", args);
    text = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    json_decref(in);
    return text;
}

#endif /* CLARA_BENCH_COMMON_H */
