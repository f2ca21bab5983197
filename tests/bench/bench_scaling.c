/* SPDX-License-Identifier: MIT */
/*
 * bench_scaling.c - curves of the scaling section of `make bench` (issue
 * 33), from C through the library, as a host meets them:
 *
 *   bench_scaling rules       rules_load of n rules (n = 10 ... 10,000), and
 *                             clara_emit of an event that 10 of them match,
 *                             with rules the engine indexes (context.group
 *                             == G first) and with rules it must try one by
 *                             one (context.level > -i and context.group ==
 *                             G). Rule i belongs to group i / 10; each
 *                             renders a notice from a two-part template.
 *   bench_scaling async       n echoes outstanding at once (n = 1 ...
 *                             100,000): clara_submit of all, then clara_wait
 *                             of each in turn; completions per second from
 *                             the first submit to the last answer. (The
 *                             memory of calls outstanding is measured in
 *                             Go: core's BenchmarkScaling_asyncOutstanding.)
 *
 * Prints "curve KEY N VALUE" lines, one per repetition (tests/bench/table.py
 * keeps the best and fits the growth). Sizes are fixed; repetitions:
 * CLARA_BENCH_CURVE_REPS (default 3).
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_common.h"
#include "clara.h"

static int curve_reps(void) { return (int)bench_env_long("CLARA_BENCH_CURVE_REPS", 3, 1); }

static void check(const char *what, const char *s) {
    if (s == NULL || strncmp(s, "{\"status\":\"success\"", 19) != 0) {
        fprintf(stderr, "bench_scaling: %s -> %.300s\n", what, s ? s : "(NULL)");
        abort();
    }
}

/* ---- rules ---------------------------------------------------------------- */

/* Appends s to buf as the inside of a JSON string. */
static size_t append_escaped(char *buf, size_t len, const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') buf[len++] = '\\';
        if (*s == '\n') {
            buf[len++] = '\\';
            buf[len++] = 'n';
            continue;
        }
        buf[len++] = *s;
    }
    buf[len] = '\0';
    return len;
}

/* The rules_load request of n rules; the caller frees it. */
static char *rules_request(int n, int indexed) {
    size_t cap = (size_t)n * 600 + 256, len;
    char *req = malloc(cap), rule[512], expr[128];
    int i;
    if (req == NULL) abort();
    len = (size_t)sprintf(req, "{\"tool\":\"rules_load\",\"arguments\":{\"name\":\"scaling.toml\",\"toml\":\"");
    for (i = 0; i < n; i++) {
        if (indexed)
            snprintf(expr, sizeof expr, "context.group == %d and context.level > -%d", i / 10, i);
        else
            snprintf(expr, sizeof expr, "context.level > -%d and context.group == %d", i, i / 10);
        snprintf(rule, sizeof rule,
                 "[[rules]]\nid = \"r%05d\"\ntrigger = \"bench.tick\"\n[rules.condition]\nexpression = \"%s\"\n"
                 "[[rules.actions]]\ntype = \"notify_self\"\nmessage = \"rule %d: level {{ context.level }} "
                 "from {{ context.source | upper }}\"\n",
                 i, expr, i);
        len = append_escaped(req, len, rule);
    }
    strcpy(req + len, "\"}}");
    return req;
}

static const char *tick = "{\"event\":\"bench.tick\",\"session\":\"bench\",\"payload\":"
                          "{\"group\":0,\"level\":7,\"tags\":[\"a\",\"b\"],\"source\":\"sensor-12\"}}";

static void run_emit(void *ctx, long n) {
    long i;
    (void)ctx;
    for (i = 0; i < n; i++) {
        char *s = clara_emit(tick);
        check("clara_emit", s);
        clara_free_string(s);
    }
}

static void rules_curves(void) {
    static const int sizes[] = {10, 100, 1000, 10000};
    int reps = curve_reps(), k, v, r;
    char *s, *text = NULL;
    s = clara_configure("state_dir = \"\"\n[rules]\nbuiltin = false\npaths = []\n");
    check("clara_configure", s);
    clara_free_string(s);
    for (v = 0; v < 2; v++) {
        const char *load = v == 0 ? "rules_load" : "rules_load_scan";
        const char *emit = v == 0 ? "emit_indexed" : "emit_scan";
        for (k = 0; k < 4; k++) {
            int n = sizes[k];
            char *req = rules_request(n, v == 0);
            long calls;
            for (r = 0; r < reps; r++) {
                uint64_t t0 = bench_now_ns();
                s = clara_evaluate(req);
                printf("curve %s %d %.3f\n", load, n, (double)(bench_now_ns() - t0) / 1e6);
                check("rules_load", s);
                clara_free_string(s);
            }
            free(req);
            /* The rows are only meaningful if 10 rules fire. */
            s = clara_emit(tick);
            if (clara_json_get(s, "result.fired.#", &text, NULL) != CLARA_JSON_INTEGER || strcmp(text, "10") != 0) {
                fprintf(stderr, "bench_scaling: %d rules: want 10 fired, got %s: %.300s\n", n, text ? text : "?", s);
                exit(1);
            }
            clara_free_string(text);
            clara_free_string(s);
            calls = bench_calibrate(run_emit, NULL, 100000000u);
            for (r = 0; r < reps; r++) printf("curve %s %d %.3f\n", emit, n, bench_time(run_emit, NULL, calls) / 1000.0);
            fflush(stdout);
        }
    }
}

/* ---- async ---------------------------------------------------------------- */

static int64_t *handles;

static void submit_all(long n) {
    long i;
    for (i = 0; i < n; i++) {
        handles[i] = clara_submit(BENCH_REQUEST);
        if (handles[i] <= 0) {
            fprintf(stderr, "bench_scaling: clara_submit refused at %ld\n", i);
            exit(1);
        }
    }
}

static void collect_all(long n) {
    long i;
    for (i = 0; i < n; i++) {
        char *s = clara_wait(handles[i], -1);
        check("clara_wait", s);
        clara_free_string(s);
    }
}

static void configure_async(void) {
    char *s = clara_configure("[async]\nmax_running = 200000\nmax_pending = 200000\n");
    check("clara_configure", s);
    clara_free_string(s);
    handles = malloc(200000 * sizeof *handles);
    if (handles == NULL) abort();
    /* Warm-up: the runtime's threads, the table, the pools. */
    submit_all(1000);
    collect_all(1000);
}

static void async_curves(void) {
    static const long sizes[] = {1, 100, 10000, 100000};
    int reps = curve_reps(), k, r;
    configure_async();
    for (k = 0; k < 4; k++) {
        long n = sizes[k];
        for (r = 0; r < reps; r++) {
            /* Small sizes repeat until the sample lasts about 20 ms. */
            long rounds = n >= 10000 ? 1 : 2000000 / (n * 100) + 1, j;
            uint64_t t0 = bench_now_ns();
            for (j = 0; j < rounds; j++) {
                submit_all(n);
                collect_all(n);
            }
            printf("curve async_throughput %ld %.0f\n", n, (double)(n * rounds) / ((double)(bench_now_ns() - t0) / 1e9));
        }
        fflush(stdout);
    }
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "rules") == 0) {
        rules_curves();
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "async") == 0) {
        async_curves();
        return 0;
    }
    fprintf(stderr, "usage: bench_scaling rules | async\n");
    return 2;
}
