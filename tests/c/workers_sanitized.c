/* workers_sanitized.c - capi/workers.c alone, built with ThreadSanitizer
 * and with AddressSanitizer (make test-c builds and runs both): the Go
 * library cannot be built with either, so the worker pool's handoffs and
 * capi/report.c's reports are checked here, with the one function they
 * need from Go replaced by a double.
 *
 * Three caller threads make 3000 calls each; one call in 50 runs a tool
 * that sleeps past its timeout (abandoned: the worker must report it once
 * and free the job), every 200 calls the caller pauses long enough for the
 * workers to stop spinning and sleep. Results alternate between the
 * caller's buffer and a malloc'd copy. Every answer must be the call's
 * own, checked as compact JSON on the tool's thread (shim_json_compact,
 * which is also run over every prefix of a few documents, each in a block
 * of its own size, for ASan to see any read past its end); every
 * abandoned call must be reported exactly once. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clara.h"
#include "shim.h"

#define CALLERS 3
#define CALLS 3000

static _Atomic long abandoned_reported;

/* A double of the one function workers.c calls in Go. */
void claraGoJobAbandoned(uintptr_t id);
void claraGoJobAbandoned(uintptr_t id) {
    (void)id;
    atomic_fetch_add(&abandoned_reported, 1);
}

/* The tool: sleeps userdata microseconds, then answers its arguments
 * through report.c, as clara_call_result does from the tool's thread
 * (into the job's room when they fit); now and then a larger answer
 * first (malloc'd), replaced, takes the room's other paths. */
static int echo_tool(void *userdata, const char *args, clara_call *call) {
    static const char large[] = "[\"0123456789012345678901234567890123456789012345678901234567890123456789"
                                "0123456789012345678901234567890123456789012345678901234567890123456789"
                                "0123456789012345678901234567890123456789012345678901234567890123456789"
                                "0123456789012345678901234567890123456789012345678901234567890123456789\"]";
    if ((long)userdata > 0) usleep((useconds_t)(long)userdata);
    char last = args[strlen(args) - 2];
    if (last == '3' && !shim_report_result((uintptr_t)call, args, strlen(args))) return 1; /* room, then malloc'd */
    if ((last == '3' || last == '7') && !shim_report_result((uintptr_t)call, large, sizeof large - 1)) return 1;
    return shim_report_result((uintptr_t)call, args, strlen(args)) ? 0 : 1; /* back in the room */
}

static _Atomic long timed_out, wrong;

static void *caller(void *arg) {
    long id = (long)arg;
    char out[256], args[64];
    int i;
    for (i = 0; i < CALLS; i++) {
        struct shim_result r;
        int status = -1, rc;
        int late = i % 50 == 0;
        memset(&r, 0, sizeof r);
        r.call = (uintptr_t)(id * CALLS + i + 1);
        r.check_json = 1;
        snprintf(args, sizeof args, "{\"t\":%ld,\"i\":%d}", id, i);
        rc = shim_call_worker(echo_tool, late ? 3000 : 0, args, strlen(args), late ? 500000LL : 10000000000LL, &r, &status,
                              i % 2 ? out : NULL, i % 2 ? sizeof out : 0);
        if (rc == 1) {
            const char *got = r.result_in_out ? out : r.result;
            if (status != 0 || got == NULL || r.result_len != strlen(args) || memcmp(got, args, r.result_len) != 0 || !r.compact)
                atomic_fetch_add(&wrong, 1);
            shim_result_clear(&r);
        } else if (rc == 0) {
            atomic_fetch_add(&timed_out, 1);
        } else {
            fprintf(stderr, "workers_sanitized: shim_call_worker returned %d\n", rc);
            atomic_fetch_add(&wrong, 1);
        }
        if (i % 200 == 199) usleep(60000); /* longer than a worker spins */
    }
    return NULL;
}

/* Each prefix of each document in a block of exactly its size and its NUL:
 * only the whole documents are compact JSON. */
static int check_compact_bounds(void) {
    static const char *docs[] = {
        "{\"a\":[1,-2.5e+3,true,false,null,\"\\u00e9\\n\\\"\"],\"b\":{}}",
        "\"caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80\"",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
        "0",
    };
    size_t d, k;
    int bad = 0;
    for (d = 0; d < sizeof docs / sizeof docs[0]; d++) {
        size_t n = strlen(docs[d]);
        for (k = 0; k <= n; k++) {
            char *b = malloc(k + 1);
            if (b == NULL) return 1;
            memcpy(b, docs[d], k);
            b[k] = '\0';
            if (shim_json_compact(b, k) != (k == n)) {
                fprintf(stderr, "workers_sanitized: shim_json_compact of %zu bytes of document %zu: wrong verdict\n", k, d);
                bad = 1;
            }
            free(b);
        }
    }
    return bad;
}

int main(void) {
    pthread_t t[CALLERS];
    long i;
    int waited;
    if (check_compact_bounds()) return 1;
    for (i = 0; i < CALLERS; i++)
        if (pthread_create(&t[i], NULL, caller, (void *)i) != 0) return 2;
    for (i = 0; i < CALLERS; i++) pthread_join(t[i], NULL);
    /* The abandoned tools finish 3 ms after their callers gave up. */
    for (waited = 0; waited < 500 && atomic_load(&abandoned_reported) < atomic_load(&timed_out); waited++) usleep(10000);
    printf("workers_sanitized: %d calls, %ld past their timeout, %ld reported abandoned, %ld wrong\n", CALLERS * CALLS,
           atomic_load(&timed_out), atomic_load(&abandoned_reported), atomic_load(&wrong));
    if (atomic_load(&wrong) != 0 || atomic_load(&timed_out) == 0 || atomic_load(&abandoned_reported) != atomic_load(&timed_out))
        return 1;
    return 0;
}
