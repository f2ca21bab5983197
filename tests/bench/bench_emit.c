/* SPDX-License-Identifier: MIT */
/*
 * bench_emit.c - row "emit" of SPEC §12: clara_emit + clara_free_string from
 * C, with 100 rules on the event's trigger of which 10 match.
 *
 * Rule i (0..99) watches "bench.tick" and belongs to group i / 10; the event
 * carries group 3, so rules 30..39 match. Even rules compare two fields
 * (`context.group == G and context.level >= 0`); odd rules call a function
 * first (`len(context.tags) > 0 and context.group == G`). The rule engine
 * evaluates both without expr's VM, and tries only the rules of the
 * event's group (the rules are indexed on context.group).
 * Each matching rule renders a notify_self message from a template. The
 * notices also go to the session's queue, which the bench never drains (the
 * queue keeps the newest 1000).
 *
 * Prints "sample emit clara NS" per repetition, and "sample emit_none clara
 * NS" for the same event matching no rule (group 99), for comparison.
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_common.h"
#include "clara.h"

static const char *matching = "{\"event\":\"bench.tick\",\"session\":\"bench\",\"payload\":"
                              "{\"group\":3,\"level\":7,\"tags\":[\"a\",\"b\"],\"source\":\"sensor-12\"}}";
static const char *quiet = "{\"event\":\"bench.tick\",\"session\":\"bench\",\"payload\":"
                           "{\"group\":99,\"level\":7,\"tags\":[\"a\",\"b\"],\"source\":\"sensor-12\"}}";

static void run_emit(void *ctx, long n) {
    const char *event = ctx;
    long i;
    for (i = 0; i < n; i++) {
        char *s = clara_emit(event);
        if (s == NULL || strncmp(s, "{\"status\":\"success\"", 19) != 0) {
            fprintf(stderr, "bench_emit: %s -> %s\n", event, s ? s : "(NULL)");
            abort();
        }
        clara_free_string(s);
    }
}

/* Appends s to the JSON string being built in buf, escaping quotes and
 * newlines (the rules' TOML is sent inside a JSON request). */
static size_t append_escaped(char *buf, size_t len, size_t cap, const char *s) {
    for (; *s && len + 3 < cap; s++) {
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

int main(void) {
    static char request[1 << 17];
    char rule[512], *r, *text = NULL;
    size_t len;
    int i, reps = bench_reps();
    uint64_t block = bench_block_ns();
    long n_match, n_quiet;

    r = clara_configure("state_dir = \"\"\n");
    clara_free_string(r);
    len = (size_t)snprintf(request, sizeof request,
                           "{\"tool\":\"rules_load\",\"arguments\":{\"name\":\"bench.toml\",\"toml\":\"");
    for (i = 0; i < 100; i++) {
        char expr[128];
        if (i % 2 == 0)
            snprintf(expr, sizeof expr, "context.group == %d and context.level >= 0", i / 10);
        else
            snprintf(expr, sizeof expr, "len(context.tags) > 0 and context.group == %d", i / 10);
        snprintf(rule, sizeof rule,
                 "[[rules]]\nid = \"r%02d\"\ntrigger = \"bench.tick\"\n[rules.condition]\nexpression = \"%s\"\n"
                 "[[rules.actions]]\ntype = \"notify_self\"\nmessage = \"rule %d: level {{ context.level }} "
                 "from {{ context.source | upper }}\"\n",
                 i, expr, i);
        len = append_escaped(request, len, sizeof request, rule);
    }
    snprintf(request + len, sizeof request - len, "\"}}");
    r = clara_evaluate(request);
    if (r == NULL || strncmp(r, "{\"status\":\"success\"", 19) != 0) {
        fprintf(stderr, "bench_emit: rules_load failed: %s\n", r ? r : "(NULL)");
        return 1;
    }
    clara_free_string(r);

    /* The rows are only meaningful if 10 rules fire. */
    r = clara_emit(matching);
    if (clara_json_get(r, "result.fired.#", &text, NULL) != CLARA_JSON_INTEGER || strcmp(text, "10") != 0) {
        fprintf(stderr, "bench_emit: want 10 rules fired, got %s: %.300s\n", text ? text : "?", r);
        return 1;
    }
    clara_free_string(text);
    clara_free_string(r);

    n_match = bench_calibrate(run_emit, (void *)matching, block);
    n_quiet = bench_calibrate(run_emit, (void *)quiet, block);
    for (i = 0; i < reps; i++) {
        bench_sample("emit", "clara", bench_time(run_emit, (void *)matching, n_match));
        bench_sample("emit_none", "clara", bench_time(run_emit, (void *)quiet, n_quiet));
    }
    return 0;
}
