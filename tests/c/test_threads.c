/* test_threads.c - 8 threads calling every export at once; reports from
 * other threads racing with the end of the call they name. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "clara.h"
#include "harness.h"

#define THREADS 8

struct worker {
    int id, calls, failures;
    char first_failure[256];
};

static void *work(void *arg) {
    struct worker *w = arg;
    char req[128], want[160];
    int i;
    for (i = 0; i < w->calls; i++) {
        char *r, *v = NULL;
        snprintf(req, sizeof req, "{\"tool\":\"echo\",\"arguments\":{\"t\":%d,\"i\":%d},\"id\":%d}", w->id, i, i);
        snprintf(want, sizeof want, "{\"status\":\"success\",\"id\":%d,\"tool\":\"echo\",\"result\":{\"t\":%d,\"i\":%d}}", i,
                 w->id, i);
        r = clara_evaluate(req);
        if (r == NULL || strcmp(r, want) != 0) {
            if (w->failures++ == 0) snprintf(w->first_failure, sizeof w->first_failure, "%s", r ? r : "(NULL)");
        }
        if (clara_json_get(r, "result.t", &v, NULL) != CLARA_JSON_INTEGER) w->failures++;
        clara_free_string(v);
        clara_free_string(r);
        if (i % 64 == 0) {
            /* Errors and configuration changes race with the calls. */
            clara_free_string(clara_evaluate("{\"tool\":\"nope\"}"));
            clara_free_string(clara_configure("{\"limits\":{\"max_request_bytes\":1048576}}"));
        }
    }
    return NULL;
}

static void test_eight_threads(void) {
    pthread_t t[THREADS];
    struct worker w[THREADS];
    int i;
    for (i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].id = i;
        w[i].calls = scaled(5000);
        CHECK_INT(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        CHECK_INT(w[i].failures, 0);
        if (w[i].failures) fprintf(stderr, "  thread %d, first bad answer: %s\n", i, w[i].first_failure);
    }
    clara_free_string(clara_reset());
}

/* A tool's clara_call may be used from another thread, and such a report
 * can race with the tool's return. Clara reuses what it keeps of a call
 * that ended for the next one: a report naming the old call must never
 * land in the new one. The "early" tool publishes its handle; a thread
 * reports an error on whatever handle was published last, over and over;
 * between two calls of "early" the main thread calls "late", which must
 * always answer its own arguments. (The reports may or may not reach the
 * "early" calls they name, which is why those answers are not checked.) */
static _Atomic(clara_call *) published;
static _Atomic int stop_reporting;

static int early_tool(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    atomic_store(&published, call);
    clara_call_result(call, args);
    return 0;
}

static int late_tool(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    clara_call_result(call, args);
    return 0;
}

static void ignore_log(void *userdata, int level, const char *message) {
    (void)userdata;
    (void)level;
    (void)message;
}

/* Reports as fast as it can, yielding between reports: natively that is
 * still several reports per call, and under valgrind, which runs one
 * thread at a time, a thread that never blocks would take a whole time
 * slice at each of the calls' hand-overs between threads (a make test run
 * spent 400 s of CPU in this loop). */
static void *report_late(void *arg) {
    (void)arg;
    while (!atomic_load(&stop_reporting)) {
        clara_call *c = atomic_load(&published);
        if (c != NULL) clara_call_error(c, "a late report of another call");
        sched_yield();
    }
    return NULL;
}

static void test_late_reports(void) {
    pthread_t t;
    int i, n = scaled(4000), wrong = 0;
    char first_wrong[256] = "";
    CHECK_INT(clara_register_tool("{\"name\":\"early\",\"description\":\"publishes its call\"}", early_tool, NULL, NULL),
              CLARA_OK);
    CHECK_INT(clara_register_tool("{\"name\":\"late\",\"description\":\"echoes\"}", late_tool, NULL, NULL), CLARA_OK);
    /* Reports on calls that ended are warned about: expected here. */
    clara_set_log_handler(ignore_log, NULL, CLARA_LOG_ERROR);
    atomic_store(&stop_reporting, 0);
    atomic_store(&published, NULL);
    CHECK_INT(pthread_create(&t, NULL, report_late, NULL), 0);
    for (i = 0; i < n; i++) {
        char req[96], want[160], *r;
        clara_free_string(clara_evaluate("{\"tool\":\"early\",\"arguments\":{}}"));
        snprintf(req, sizeof req, "{\"tool\":\"late\",\"arguments\":{\"i\":%d}}", i);
        snprintf(want, sizeof want, "{\"status\":\"success\",\"tool\":\"late\",\"result\":{\"i\":%d}}", i);
        r = clara_evaluate(req);
        if (r == NULL || strcmp(r, want) != 0) {
            if (wrong++ == 0) snprintf(first_wrong, sizeof first_wrong, "%s", r ? r : "(NULL)");
        }
        clara_free_string(r);
    }
    atomic_store(&stop_reporting, 1);
    pthread_join(t, NULL);
    clara_set_log_handler(NULL, NULL, 0);
    CHECK_INT(wrong, 0);
    if (wrong) fprintf(stderr, "  first bad answer of \"late\": %s\n", first_wrong);
    clara_free_string(clara_reset());
}

void tests_threads(void) {
    test_eight_threads();
    test_late_reports();
}
