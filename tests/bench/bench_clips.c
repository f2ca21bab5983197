/* SPDX-License-Identifier: MIT */
/*
 * bench_clips.c - row "CLIPS" of the bench table (CLIPS 6.30 API).
 *
 * One CLIPS environment gets Clara's functions (clara_clips_register, the
 * bridge compiled into this program) and two reference UDFs of its own:
 *
 *   (ref-bare ?json)     reads its string argument like any UDF and returns a
 *                        fresh STRING of the size of Clara's response
 *                        (malloc + memcpy + EnvAddSymbol + free): the floor of
 *                        a UDF that returns a string built in C;
 *   (ref-jansson ?json)  the jansson echo of bench_common.h, its text returned
 *                        as a STRING.
 *
 * Each is timed from C around one EnvEval of
 *   (loop-for-count (?i 1 N) do (FUNCTION "<the echo request>"))
 * the three alternating, plus the same loop calling nothing (a bare TRUE) to
 * show how much of each figure is CLIPS's own loop.
 *
 * Fairness of the symbol table: EnvAddSymbol interns every string it is given.
 * Clara's echo response is the same text on every iteration, so after the
 * first call EnvAddSymbol only hashes it and finds it. The references
 * therefore return that very same text (ref-bare copies Clara's response;
 * the jansson echo produces it byte for byte), so all three pay the same
 * lookup and none pays for creating and collecting new symbols.
 */
#include <stdint.h>

#include "clips.h"

#include "bench_common.h"
#include "clara.h"
#include "clara_clips.h"

static char *response;  /* Clara's echo response, copied */
static size_t response_len;

static void ref_bare(void *env, DATA_OBJECT_PTR ret) {
    DATA_OBJECT arg;
    char *copy;
    SetpType(ret, SYMBOL);
    SetpValue(ret, EnvFalseSymbol(env));
    if (EnvArgCountCheck(env, "ref-bare", EXACTLY, 1) == -1) return;
    if (EnvArgTypeCheck(env, "ref-bare", 1, STRING, &arg) == FALSE) return;
    copy = malloc(response_len + 1);
    if (copy == NULL) abort();
    memcpy(copy, response, response_len + 1);
    SetpType(ret, STRING);
    SetpValue(ret, EnvAddSymbol(env, copy));
    free(copy);
}

static void ref_jansson(void *env, DATA_OBJECT_PTR ret) {
    DATA_OBJECT arg;
    char *text;
    SetpType(ret, SYMBOL);
    SetpValue(ret, EnvFalseSymbol(env));
    if (EnvArgCountCheck(env, "ref-jansson", EXACTLY, 1) == -1) return;
    if (EnvArgTypeCheck(env, "ref-jansson", 1, STRING, &arg) == FALSE) return;
    text = bench_jansson_echo(DOToString(arg));
    if (text == NULL) abort();
    SetpType(ret, STRING);
    SetpValue(ret, EnvAddSymbol(env, text));
    free(text);
}

/* CLIPS 6.30 stores every function as int (*)(void *): cast through a generic
 * function pointer type, as the bridge does. */
#define AS_CLIPS_FN(f) ((int (*)(void *))(void (*)(void))(f))

struct loop {
    void *env;
    const char *function; /* NULL: the empty loop */
};

static char escaped_request[256];
static char expr[512];

static void run_loop(void *ctx, long n) {
    struct loop *l = ctx;
    DATA_OBJECT result;
    if (l->function != NULL)
        snprintf(expr, sizeof expr, "(loop-for-count (?i 1 %ld) do (%s \"%s\"))", n, l->function, escaped_request);
    else
        snprintf(expr, sizeof expr, "(loop-for-count (?i 1 %ld) do TRUE)", n);
    if (EnvEval(l->env, expr, &result) == FALSE || GetEvaluationError(l->env)) {
        fprintf(stderr, "bench_clips: EnvEval failed: %s\n", expr);
        exit(1);
    }
}

/* Evaluates (FUNCTION "<request>") once and checks it returns Clara's text. */
static void check_once(void *env, const char *function) {
    DATA_OBJECT result;
    snprintf(expr, sizeof expr, "(%s \"%s\")", function, escaped_request);
    if (EnvEval(env, expr, &result) == FALSE || GetType(result) != STRING) {
        fprintf(stderr, "bench_clips: %s did not return a STRING\n", expr);
        exit(1);
    }
    if (strcmp(DOToString(result), response) != 0)
        printf("info note %s returns %s, not Clara's %s\n", function, DOToString(result), response);
}

int main(void) {
    uint64_t block = bench_block_ns();
    int reps = bench_reps(), r;
    struct loop clara, bare, jansson, empty;
    long n_clara, n_bare, n_jansson, n_empty;
    const char *p;
    char *q;
    char *first;
    void *env;

    first = clara_evaluate(BENCH_REQUEST);
    if (first == NULL) return 1;
    response_len = strlen(first);
    response = malloc(response_len + 1);
    if (response == NULL) return 1;
    memcpy(response, first, response_len + 1);
    clara_free_string(first);

    /* The request as a CLIPS string literal. */
    for (p = BENCH_REQUEST, q = escaped_request; *p; p++) {
        if (*p == '"' || *p == '\\') *q++ = '\\';
        *q++ = *p;
    }
    *q = '\0';

    env = CreateEnvironment();
    if (env == NULL) return 1;
    if (clara_clips_register(env) != 0) {
        fprintf(stderr, "bench_clips: clara_clips_register failed\n");
        return 1;
    }
    if (EnvDefineFunction2(env, "ref-bare", 'u', AS_CLIPS_FN(ref_bare), "ref_bare", "11s") == 0 ||
        EnvDefineFunction2(env, "ref-jansson", 'u', AS_CLIPS_FN(ref_jansson), "ref_jansson", "11s") == 0) {
        fprintf(stderr, "bench_clips: EnvDefineFunction2 failed\n");
        return 1;
    }
    check_once(env, "clara-evaluate");
    check_once(env, "ref-bare");
    check_once(env, "ref-jansson");

    clara.env = bare.env = jansson.env = empty.env = env;
    clara.function = "clara-evaluate";
    bare.function = "ref-bare";
    jansson.function = "ref-jansson";
    empty.function = NULL;

    n_clara = bench_calibrate(run_loop, &clara, block);
    n_bare = bench_calibrate(run_loop, &bare, block);
    n_jansson = bench_calibrate(run_loop, &jansson, block);
    n_empty = bench_calibrate(run_loop, &empty, block / 4);
    for (r = 0; r < reps; r++) {
        double c = bench_time(run_loop, &clara, n_clara);
        bench_sample("clips_bare", "clara", c);
        bench_sample("clips_jansson", "clara", c);
        bench_sample("clips_bare", "ref", bench_time(run_loop, &bare, n_bare));
        bench_sample("clips_jansson", "ref", bench_time(run_loop, &jansson, n_jansson));
        bench_sample("clips_loop", "ref", bench_time(run_loop, &empty, n_empty));
    }
    DestroyEnvironment(env);
    free(response);
    return 0;
}
