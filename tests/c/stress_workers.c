/* stress_workers.c - C tools called back to back, from one thread and from
 * several, for as long as the run is asked to last. The worker pool hands a
 * finished job back to its caller at the moment the caller may be spinning
 * on it: a hand-off that touches the job after the caller freed it shows up
 * here as an invalid write under valgrind, or as a glibc mutex assertion
 * natively. Run by tests/c/valgrind.sh (under --fair-sched=yes) and by
 * `make test-c`.
 *
 * Usage: stress_workers [CALLS_PER_THREAD [THREADS]] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clara.h"

static int trivial(void *userdata, const char *arguments, clara_call *call) {
    (void)userdata;
    clara_call_result(call, arguments);
    return 0;
}

static long calls_per_thread = 2000;
static int failures;
static pthread_mutex_t failures_mu = PTHREAD_MUTEX_INITIALIZER;

static void *caller(void *arg) {
    long i;
    (void)arg;
    for (i = 0; i < calls_per_thread; i++) {
        char *reply = clara_evaluate("{\"tool\":\"trivial\",\"arguments\":{\"n\":1}}");
        if (reply == NULL || strcmp(reply, "{\"status\":\"success\",\"tool\":\"trivial\",\"result\":{\"n\":1}}") != 0) {
            pthread_mutex_lock(&failures_mu);
            if (failures++ == 0) fprintf(stderr, "stress_workers: unexpected reply: %s\n", reply ? reply : "(NULL)");
            pthread_mutex_unlock(&failures_mu);
        }
        clara_free_string(reply);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = 4, i, rc;
    pthread_t t[64];
    if (argc > 1) calls_per_thread = atol(argv[1]);
    if (argc > 2) threads = atoi(argv[2]);
    if (threads < 1 || threads > 64 || calls_per_thread < 1) {
        fprintf(stderr, "usage: stress_workers [CALLS_PER_THREAD [THREADS (1-64)]]\n");
        return 2;
    }
    rc = clara_register_tool("{\"name\":\"trivial\",\"limits\":{\"timeout_ms\":60000}}", trivial, NULL, NULL);
    if (rc != CLARA_OK) {
        fprintf(stderr, "stress_workers: register: %s\n", clara_strerror(rc));
        return 1;
    }
    /* One thread in a loop first (the case that aborted a host natively),
     * then several at once. */
    caller(NULL);
    for (i = 0; i < threads; i++) pthread_create(&t[i], NULL, caller, NULL);
    for (i = 0; i < threads; i++) pthread_join(t[i], NULL);
    clara_unregister_tool("trivial");
    if (failures > 0) {
        fprintf(stderr, "stress_workers: %d calls went wrong\n", failures);
        return 1;
    }
    printf("stress_workers: %ld calls on 1 thread, then %d threads x %ld: all answered\n", calls_per_thread, threads,
           calls_per_thread);
    return 0;
}
