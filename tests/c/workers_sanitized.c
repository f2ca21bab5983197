/* workers_sanitized.c - capi/workers.c alone, built with ThreadSanitizer
 * and with AddressSanitizer (make test-c builds and runs both): the Go
 * library cannot be built with either, so the worker pool's handoffs are
 * checked here, with the three functions it needs from the rest of the
 * library replaced by small doubles.
 *
 * Three caller threads make 3000 calls each; one call in 50 runs a tool
 * that sleeps past its timeout (abandoned: the worker must report it once
 * and free the job), every 200 calls the caller pauses long enough for the
 * workers to stop spinning and sleep. Results alternate between the
 * caller's buffer and a malloc'd copy. Every answer must be the call's
 * own; every abandoned call must be reported exactly once. */
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

/* Doubles of what workers.c calls in the library (capi/shim.c, Go). */
void claraGoJobAbandoned(uintptr_t id);
void claraGoJobAbandoned(uintptr_t id) {
    (void)id;
    atomic_fetch_add(&abandoned_reported, 1);
}

static _Thread_local struct shim_result *reporting;

int shim_run_reporting(clara_tool_fn fn, uintptr_t userdata, const char *args, struct shim_result *res) {
    struct shim_result *outer = reporting;
    int rc;
    reporting = res;
    rc = fn((void *)userdata, args, (clara_call *)res->call);
    reporting = outer;
    return rc;
}

void shim_result_clear(struct shim_result *r) {
    if (r->result != r->room) free(r->result);
    free(r->error);
    r->result = r->error = NULL;
    r->has_result = r->has_error = 0;
}

/* The tool: sleeps userdata microseconds, then answers its arguments, in
 * the job's room when they fit (as clara_call_result does). */
static int echo_tool(void *userdata, const char *args, clara_call *call) {
    struct shim_result *r = reporting;
    size_t n = strlen(args);
    (void)call;
    if ((long)userdata > 0) usleep((useconds_t)(long)userdata);
    if (n < r->room_cap) {
        memcpy(r->room, args, n + 1);
        r->result = r->room;
    } else {
        r->result = malloc(n + 1);
        if (r->result == NULL) return 1;
        memcpy(r->result, args, n + 1);
    }
    r->result_len = n;
    r->has_result = 1;
    return 0;
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
        snprintf(args, sizeof args, "{\"t\":%ld,\"i\":%d}", id, i);
        rc = shim_call_worker(echo_tool, late ? 3000 : 0, args, strlen(args), late ? 500000LL : 10000000000LL, &r, &status,
                              i % 2 ? out : NULL, i % 2 ? sizeof out : 0);
        if (rc == 1) {
            const char *got = r.result_in_out ? out : r.result;
            if (status != 0 || got == NULL || r.result_len != strlen(args) || memcmp(got, args, r.result_len) != 0)
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

int main(void) {
    pthread_t t[CALLERS];
    long i;
    int waited;
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
