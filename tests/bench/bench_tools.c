/* SPDX-License-Identifier: MIT */
/*
 * bench_tools.c - rows of the toolbox (issue 3):
 *
 * C tool:     clara_evaluate of a tool written in C that echoes its
 *             arguments (clara_call_result), against the built-in echo with
 *             the same arguments. The difference is what a host tool costs
 *             over a built-in one: copying the arguments to C, handing the
 *             call to a worker thread and back, checking the JSON it returns.
 * C tool, on_caller_thread: the same C tool registered with
 *             "on_caller_thread": true: it runs on the calling thread, with
 *             no handoff to a worker thread.
 * Lua tool:   clara_evaluate of a tool written in Lua (configuration
 *             [[tools]], SPEC §8) that returns its arguments, against the
 *             built-in echo with the same arguments: what the sandbox costs
 *             (a pooled state, fresh globals, arguments decoded into Lua and
 *             the result encoded back).
 * C tool, one processor: `bench_tools one_cpu`, run by run.sh under
 *             tests/one-cpu.sh: the C tool row with the caller and the worker
 *             threads on one processor, as on a machine whose other
 *             processors are busy. Every handoff is then a switch of
 *             threads on that processor.
 * (The cost of validation is measured by Go benchmarks of the engine, see
 * run.sh: next to a tool call that hands off to another thread it would be
 * lost in the noise.)
 *
 * `bench_tools ROW N` makes N calls of one row's request (c_tool,
 * c_tool_caller, lua_tool or echo) untimed, for counting instructions:
 *   GOGC=off GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind bench_tools c_tool 3000
 * (Go's preemption signals can trip callgrind up; per call, take the
 * difference of two counts, N=3000 and N=1000, over 2000.)
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_common.h"
#include "clara.h"

#define TOOL_ARGS "{\"city\":\"Lyon\",\"country\":\"FR\",\"days\":3,\"units\":\"metric\",\"detailed\":false}"

static const char *echo_request = "{\"tool\":\"echo\",\"arguments\":" TOOL_ARGS "}";
static const char *tool_request = "{\"tool\":\"c_echo\",\"arguments\":" TOOL_ARGS "}";
static const char *caller_request = "{\"tool\":\"c_echo_here\",\"arguments\":" TOOL_ARGS "}";
static const char *lua_request = "{\"tool\":\"lua_echo\",\"arguments\":" TOOL_ARGS "}";

static volatile unsigned long sink;

static int c_echo(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    clara_call_result(call, args);
    return 0;
}

static void run_request(void *ctx, long n) {
    const char *req = ctx;
    unsigned long sum = 0;
    long i;
    for (i = 0; i < n; i++) {
        char *s = clara_evaluate(req);
        if (s == NULL || strncmp(s, "{\"status\":\"success\"", 19) != 0) {
            fprintf(stderr, "bench_tools: %s -> %s\n", req, s ? s : "(NULL)");
            abort();
        }
        sum += (unsigned char)s[2];
        clara_free_string(s);
    }
    sink = sum;
}

int main(int argc, char **argv) {
    uint64_t block = bench_block_ns();
    int reps = bench_reps(), r;
    long n_echo, n_tool, n_caller, n_lua;
    char *conf;
    const char *only = NULL;
    int one_cpu = argc == 2 && strcmp(argv[1], "one_cpu") == 0;
    if (argc == 2 && !one_cpu) {
        fprintf(stderr, "usage: bench_tools [one_cpu | c_tool|c_tool_caller|lua_tool|echo CALLS]\n");
        return 2;
    }
    if (argc == 3) {
        const char *rows[][2] = {{"c_tool", tool_request}, {"c_tool_caller", caller_request}, {"lua_tool", lua_request},
                                 {"echo", echo_request}};
        size_t i;
        for (i = 0; i < sizeof rows / sizeof rows[0]; i++)
            if (strcmp(argv[1], rows[i][0]) == 0) only = rows[i][1];
        if (only == NULL || atol(argv[2]) < 1) {
            fprintf(stderr, "usage: bench_tools [one_cpu | c_tool|c_tool_caller|lua_tool|echo CALLS]\n");
            return 2;
        }
    }
    if (clara_register_tool("{\"name\":\"c_echo\"}", c_echo, NULL, NULL) != CLARA_OK ||
        clara_register_tool("{\"name\":\"c_echo_here\",\"on_caller_thread\":true}", c_echo, NULL, NULL) != CLARA_OK) {
        fprintf(stderr, "bench_tools: registration failed\n");
        return 1;
    }
    conf = clara_configure("[[tools]]\nname = \"lua_echo\"\nlua = \"return function(args) return args end\"\n");
    if (conf == NULL || strncmp(conf, "{\"status\":\"success\"", 19) != 0) {
        fprintf(stderr, "bench_tools: configuring the Lua tool failed: %s\n", conf ? conf : "(NULL)");
        return 1;
    }
    clara_free_string(conf);
    if (only != NULL) {
        run_request((void *)only, atol(argv[2]));
        return 0;
    }
    n_echo = bench_calibrate(run_request, (void *)echo_request, block);
    n_tool = bench_calibrate(run_request, (void *)tool_request, block);
    if (one_cpu) {
        for (r = 0; r < reps; r++) {
            bench_sample("c_tool_one_cpu", "clara", bench_time(run_request, (void *)tool_request, n_tool));
            bench_sample("c_tool_one_cpu", "ref", bench_time(run_request, (void *)echo_request, n_echo));
        }
        return 0;
    }
    n_caller = bench_calibrate(run_request, (void *)caller_request, block);
    n_lua = bench_calibrate(run_request, (void *)lua_request, block);
    for (r = 0; r < reps; r++) {
        bench_sample("c_tool", "clara", bench_time(run_request, (void *)tool_request, n_tool));
        bench_sample("c_tool", "ref", bench_time(run_request, (void *)echo_request, n_echo));
        bench_sample("c_tool_caller", "clara", bench_time(run_request, (void *)caller_request, n_caller));
        bench_sample("c_tool_caller", "ref", bench_time(run_request, (void *)echo_request, n_echo));
        bench_sample("lua_tool", "clara", bench_time(run_request, (void *)lua_request, n_lua));
        bench_sample("lua_tool", "ref", bench_time(run_request, (void *)echo_request, n_echo));
    }
    return 0;
}
