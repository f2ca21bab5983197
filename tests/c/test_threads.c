/* test_threads.c - 8 threads calling every export at once. */
#include <pthread.h>
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

void tests_threads(void) { test_eight_threads(); }
