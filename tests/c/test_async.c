/* test_async.c - asynchronous calls: submit, wait, cancel, the eventfd,
 * the limits of running and pending calls, many threads. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clara.h"
#include "harness.h"

/* ---- a C tool that waits until the test releases it ---------------------- */

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_started, gate_open;

static int gated_tool(void *userdata, const char *arguments_json, clara_call *call) {
    (void)userdata;
    (void)arguments_json;
    pthread_mutex_lock(&gate_mu);
    gate_started++;
    pthread_cond_broadcast(&gate_cv);
    while (!gate_open) pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
    clara_call_result(call, "\"released\"");
    return 0;
}

static void gate_reset(void) {
    pthread_mutex_lock(&gate_mu);
    gate_started = 0;
    gate_open = 0;
    pthread_mutex_unlock(&gate_mu);
}

static void gate_wait_started(int n) {
    pthread_mutex_lock(&gate_mu);
    while (gate_started < n) pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
}

static void gate_release(void) {
    pthread_mutex_lock(&gate_mu);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

static void register_gated(void) {
    gate_reset();
    CHECK_INT(clara_register_tool("{\"name\":\"gated\",\"limits\":{\"timeout_ms\":600000}}", gated_tool, NULL, NULL),
              CLARA_OK);
}

static void check_wait(const char *test, int line, int64_t h, int timeout_ms, const char *want) {
    char *got = clara_wait(h, timeout_ms);
    check_str(test, line, got, want);
    clara_free_string(got);
}
#define CHECK_WAIT(h, timeout, want) check_wait(__func__, __LINE__, (h), (timeout), (want))

static void configure(const char *text) {
    char *r = clara_configure(text);
    CHECK_PREFIX(r, "{\"status\":\"success\"");
    clara_free_string(r);
}

/* ---- tests ----------------------------------------------------------------- */

static void test_submit_and_wait(void) {
    char req[] = "{\"tool\":\"echo\",\"arguments\":{\"word\":\"kept\"},\"id\":3}";
    char buf[64];
    int64_t h = clara_submit(req);
    CHECK(h > 0);
    memset(req, 'Z', sizeof req - 1); /* Clara copied what the call needs */
    CHECK_WAIT(h, -1, "{\"status\":\"success\",\"id\":3,\"tool\":\"echo\",\"result\":{\"word\":\"kept\"}}");
    snprintf(buf, sizeof buf, "call %lld was already collected", (long long)h);
    {
        char *again = clara_wait(h, 0);
        CHECK_PREFIX(again, "{\"status\":\"error\",\"error\":\"invalid_request\"");
        CHECK(again != NULL && strstr(again, buf) != NULL);
        clara_free_string(again);
    }
    CHECK_INT(clara_ready(h), -CLARA_ENOENT);
    CHECK_INT(clara_cancel(h), -CLARA_ENOENT);
    CHECK_INT(clara_ready(0), -CLARA_ENOENT);
    CHECK_INT(clara_ready(-5), -CLARA_ENOENT);
    CHECK_INT(clara_submit(NULL), -CLARA_EINVAL);
    CHECK_INT(clara_submit("{\"tool\":"), -CLARA_EINVAL);
    CHECK_INT(clara_submit("{\"tool\":\"echo\",\"argumens\":{}}"), -CLARA_EINVAL);
    CHECK_STR(clara_strerror(-CLARA_EBUSY), "too many asynchronous calls running");
    /* A call that fails once running is submitted; its envelope says why. */
    h = clara_submit("{\"tool\":\"nope\"}");
    CHECK(h > 0);
    CHECK_WAIT(h, -1, "{\"status\":\"error\",\"error\":\"unknown_tool\",\"message\":\"Tool not found: nope\"}");
}

static void test_async_field(void) {
    char *r = clara_evaluate("{\"tool\":\"echo\",\"arguments\":{\"a\":[1]},\"async\":true,\"id\":\"x\"}");
    char *hs = NULL;
    CHECK_PREFIX(r, "{\"status\":\"accepted\",\"id\":\"x\",\"handle\":");
    CHECK_INT(clara_json_get(r, "handle", &hs, NULL), CLARA_JSON_INTEGER);
    if (hs != NULL) CHECK_WAIT(strtoll(hs, NULL, 10), -1, "{\"status\":\"success\",\"id\":\"x\",\"tool\":\"echo\",\"result\":{\"a\":[1]}}");
    clara_free_string(hs);
    clara_free_string(r);
}

static void test_cancel_in_flight(void) {
    int64_t h;
    char *pending, want[64];
    register_gated();
    h = clara_submit("{\"tool\":\"gated\"}");
    CHECK(h > 0);
    gate_wait_started(1);
    CHECK_INT(clara_ready(h), 0);
    snprintf(want, sizeof want, "{\"status\":\"pending\",\"handle\":%lld}", (long long)h);
    pending = clara_wait(h, 1);
    CHECK_STR(pending, want);
    clara_free_string(pending);
    CHECK_INT(clara_cancel(h), CLARA_OK);
    CHECK_INT(clara_ready(h), 1);
    CHECK_WAIT(h, 0, "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"the call of \\\"gated\\\" was cancelled\"}");
    gate_release(); /* the C tool finishes on its worker; its result is discarded */
    clara_free_string(clara_reset());
}

static void test_max_running(void) {
    int64_t h;
    register_gated();
    configure("[async]\nmax_running = 1\n");
    h = clara_submit("{\"tool\":\"gated\"}");
    CHECK(h > 0);
    gate_wait_started(1);
    CHECK_INT(clara_submit("{\"tool\":\"echo\"}"), -CLARA_EBUSY);
    {
        char *r = clara_evaluate("{\"tool\":\"echo\",\"async\":true}");
        CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"rate_limited\",\"message\":\"async: too many calls running (async.max_running = 1)");
        clara_free_string(r);
    }
    gate_release();
    CHECK_WAIT(h, -1, "{\"status\":\"success\",\"tool\":\"gated\",\"result\":\"released\"}");
    h = clara_submit("{\"tool\":\"echo\"}");
    CHECK(h > 0);
    CHECK_WAIT(h, -1, "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{}}");
    clara_free_string(clara_reset());
}

static void wait_ready(int64_t h) {
    struct timespec ms = {0, 1000000};
    while (clara_ready(h) == 0) nanosleep(&ms, NULL);
}

static void test_max_pending(void) {
    int64_t h[5];
    int i;
    char *r;
    configure("[async]\nmax_pending = 2\n");
    for (i = 0; i < 5; i++) {
        h[i] = clara_submit("{\"tool\":\"echo\",\"arguments\":{\"n\":1}}");
        CHECK(h[i] > 0);
        wait_ready(h[i]);
    }
    for (i = 0; i < 3; i++) {
        CHECK_INT(clara_ready(h[i]), -CLARA_ENOENT);
        r = clara_wait(h[i], 0);
        CHECK(r != NULL && strstr(r, "was dropped (more than async.max_pending answers waited)") != NULL);
        clara_free_string(r);
    }
    for (i = 3; i < 5; i++) CHECK_WAIT(h[i], 0, "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{\"n\":1}}");
    clara_free_string(clara_reset());
}

/* Four threads submit; the main thread waits on the eventfd with epoll and
 * collects every answer exactly once. */
struct submitter {
    int calls, refused;
    int64_t *handles;
};

static void *submit_many(void *arg) {
    struct submitter *s = arg;
    int i;
    for (i = 0; i < s->calls; i++) {
        int64_t h;
        while ((h = clara_submit("{\"tool\":\"echo\",\"arguments\":{\"k\":1}}")) == -CLARA_EBUSY) {
            struct timespec ms = {0, 1000000};
            s->refused++;
            nanosleep(&ms, NULL);
        }
        s->handles[i] = h;
    }
    return NULL;
}

static void test_eventfd_many_threads(void) {
    enum { THREADS = 4 };
    pthread_t t[THREADS];
    struct submitter s[THREADS];
    int per = scaled(2500), total = per * THREADS, collected = 0, bad = 0, dup = 0, i, j, ep, fd;
    int64_t lo = INT64_MAX, hi = 0;
    unsigned char *seen;
    struct epoll_event ev;

    configure("[async]\nmax_pending = 100000\n");
    fd = clara_async_fd();
    CHECK(fd >= 0);
    CHECK_INT(clara_async_fd(), fd);
    free(clara_async_take(0)); /* what earlier tests left */
    ep = epoll_create1(0);
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    CHECK_INT(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);

    for (i = 0; i < THREADS; i++) {
        s[i].calls = per;
        s[i].refused = 0;
        s[i].handles = calloc((size_t)per, sizeof(int64_t));
        CHECK_INT(pthread_create(&t[i], NULL, submit_many, &s[i]), 0);
    }
    for (i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    for (i = 0; i < THREADS; i++)
        for (j = 0; j < per; j++) {
            int64_t h = s[i].handles[j];
            if (h <= 0) bad++;
            if (h > 0 && h < lo) lo = h;
            if (h > hi) hi = h;
        }
    CHECK_INT(bad, 0);
    seen = calloc((size_t)(hi - lo + 1), 1);
    while (collected < total) {
        struct epoll_event got;
        uint64_t count;
        char *list, *p;
        int n = epoll_wait(ep, &got, 1, 60000);
        if (n <= 0) {
            CHECK(n > 0); /* a minute without an answer: something was lost */
            break;
        }
        if (read(fd, &count, sizeof count) != (ssize_t)sizeof count) CHECK(errno == EAGAIN);
        list = clara_async_take(0);
        for (p = list ? strstr(list, "\"handle\":") : NULL; p != NULL; p = strstr(p + 1, "\"handle\":")) {
            int64_t h = strtoll(p + 9, NULL, 10);
            char *env;
            if (h < lo || h > hi) {
                bad++;
                continue;
            }
            if (seen[h - lo]++) dup++;
            env = clara_wait(h, 0);
            if (env == NULL || strcmp(env, "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{\"k\":1}}") != 0) bad++;
            clara_free_string(env);
            collected++;
        }
        clara_free_string(list);
    }
    CHECK_INT(collected, total);
    CHECK_INT(dup, 0);
    CHECK_INT(bad, 0);
    CHECK_INT(hi - lo + 1, total); /* handles are never reused */
    for (i = 0; i < THREADS; i++) free(s[i].handles);
    free(seen);
    close(ep);
    clara_free_string(clara_reset());
}

/* Issue 25, finding 9: a call cancelled while its deny rule's condition is
 * still running was let through (the condition's "context canceled" read as
 * "no match"), and kv_set stored its key. Now the rule denies (the audit
 * says why) and nothing is stored. The condition runs until its 5 s
 * deadline unless the call is cancelled first. */
static int count_of(const char *text, const char *what) {
    int n = 0;
    for (const char *p = text; p != NULL && (p = strstr(p, what)) != NULL; p += strlen(what)) n++;
    return n;
}

static void test_cancel_while_a_deny_rule_evaluates(void) {
    enum { CALLS = 5 };
    char req[256], *r;
    int i, spins;
    struct timespec ms30 = {0, 30000000}, ms5 = {0, 5000000};
    configure("state_dir = \"\"\n[rules]\nbuiltin = false\n");
    r = clara_evaluate("{\"tool\":\"rules_load\",\"arguments\":{\"name\":\"guard.toml\",\"toml\":"
                       "\"[rule]\\nid = \\\"slow-guard\\\"\\ntrigger = \\\"on_tool_call\\\"\\ntimeout_ms = 5000\\n"
                       "[condition]\\nlua = 'if ctx.tool.name ~= \\\"kv_set\\\" then return false end "
                       "for i = 1, 1e12 do end deny(\\\"kv_set is read-only\\\") return true'\\n"
                       "[action]\\ntype = \\\"log\\\"\\nmessage = \\\"kv_set refused\\\"\\n\"}}");
    CHECK_PREFIX(r, "{\"status\":\"success\",\"tool\":\"rules_load\"");
    clara_free_string(r);
    for (i = 0; i < CALLS; i++) {
        int64_t h;
        snprintf(req, sizeof req, "{\"tool\":\"kv_set\",\"session\":\"c%d\",\"arguments\":{\"key\":\"k\",\"value\":%d}}", i, i);
        h = clara_submit(req);
        CHECK(h > 0);
        nanosleep(&ms30, NULL);
        CHECK_INT(clara_cancel(h), CLARA_OK);
        CHECK_WAIT(h, 0, "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"the call of \\\"kv_set\\\" was cancelled\"}");
    }
    /* The calls go on in the background until their rule gives up: the
     * audit has a record of each once they ended. */
    for (spins = 0; spins < 6000; spins++) {
        r = clara_evaluate("{\"tool\":\"audit_tail\",\"arguments\":{\"n\":50}}");
        i = count_of(r, "\"tool\":\"kv_set\"");
        if (i == CALLS) {
            CHECK_INT(count_of(r, "\"error\":\"denied\",\"reason\":\"tool \\\"kv_set\\\" denied by rule \\\"slow-guard\\\": "
                                  "its condition could not be evaluated"), CALLS);
            clara_free_string(r);
            break;
        }
        clara_free_string(r);
        nanosleep(&ms5, NULL);
    }
    CHECK_INT(i, CALLS);
    for (i = 0; i < CALLS; i++) {
        snprintf(req, sizeof req, "{\"tool\":\"kv_get\",\"session\":\"c%d\",\"arguments\":{\"key\":\"k\"}}", i);
        CHECK_ENVELOPE(req, "{\"status\":\"success\",\"tool\":\"kv_get\",\"result\":{\"key\":\"k\",\"found\":false}}");
    }
    clara_free_string(clara_reset());
}

/* Finished calls collected before they were taken are not listed, and do
 * not count against max: clara_async_take(5) lists the five that wait
 * (issue 25, finding 23: it answered [] while they waited). */
static void test_take_skips_collected_calls(void) {
    enum { N = 10 };
    int64_t h[N];
    int i;
    char *list, want[512], *w = want;
    free(clara_async_take(0)); /* what earlier tests left */
    for (i = 0; i < N; i++) {
        h[i] = clara_submit("{\"tool\":\"echo\"}");
        CHECK(h[i] > 0);
        wait_ready(h[i]);
    }
    for (i = 0; i < N / 2; i++) CHECK_WAIT(h[i], 0, "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{}}");
    w += sprintf(w, "[");
    for (i = N / 2; i < N; i++)
        w += sprintf(w, "%s{\"handle\":%lld,\"tool\":\"echo\",\"status\":\"success\"}", i > N / 2 ? "," : "", (long long)h[i]);
    sprintf(w, "]");
    list = clara_async_take(5);
    CHECK_STR(list, want);
    clara_free_string(list);
    list = clara_async_take(5);
    CHECK_STR(list, "[]");
    clara_free_string(list);
    for (i = N / 2; i < N; i++) CHECK_WAIT(h[i], 0, "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{}}");
}

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[4096];

static void on_log(void *userdata, int level, const char *message) {
    (void)userdata;
    (void)level;
    pthread_mutex_lock(&log_mu);
    if (strlen(log_text) + strlen(message) + 2 < sizeof log_text) {
        strcat(log_text, message);
        strcat(log_text, "\n");
    }
    pthread_mutex_unlock(&log_mu);
}

/* The host closes clara_async_fd()'s descriptor (which it must not) and
 * the number is reused by a file of its own: Clara writes nothing into
 * that file, says why on the log, and clara_async_fd() then gives a
 * descriptor that works (issue 25, finding 22: 8 bytes a batch went into
 * the host's file). */
static void test_closed_fd_is_not_written(void) {
    char path[] = "/tmp/clara_async_fd_XXXXXX";
    int fd = clara_async_fd(), file, i, again;
    struct stat st;
    struct pollfd p;
    uint64_t count;
    int64_t h;
    CHECK(fd >= 0);
    file = mkstemp(path);
    CHECK(file >= 0);
    if (fd < 0 || file < 0) return;
    unlink(path);
    log_text[0] = '\0';
    clara_set_log_handler(on_log, NULL, CLARA_LOG_WARN);
    free(clara_async_take(0)); /* the next answer signals */
    CHECK_INT(dup2(file, fd), fd); /* closes Clara's eventfd: the number now names the file */
    close(file);
    for (i = 0; i < 4; i++) {
        h = clara_submit("{\"tool\":\"echo\"}");
        CHECK(h > 0);
        wait_ready(h);
        free(clara_async_take(0));
        CHECK_WAIT(h, 0, "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{}}");
    }
    CHECK_INT(fstat(fd, &st), 0);
    CHECK_INT(st.st_size, 0);
    clara_set_log_handler(NULL, NULL, CLARA_LOG_ERROR);
    pthread_mutex_lock(&log_mu);
    CHECK(strstr(log_text, "clara_async_fd") != NULL && strstr(log_text, "closed") != NULL);
    if (strstr(log_text, "clara_async_fd") == NULL) fprintf(stderr, "  log: %s\n", log_text);
    pthread_mutex_unlock(&log_mu);
    /* A fresh descriptor, which an answer makes readable. */
    again = clara_async_fd();
    CHECK(again >= 0 && again != fd);
    CHECK_INT(clara_async_fd(), again);
    close(fd);
    if (again < 0) return;
    h = clara_submit("{\"tool\":\"echo\"}");
    CHECK(h > 0);
    p.fd = again;
    p.events = POLLIN;
    p.revents = 0;
    CHECK_INT(poll(&p, 1, 10000), 1);
    CHECK_INT(read(again, &count, sizeof count), (long long)sizeof count);
    free(clara_async_take(0));
    CHECK_WAIT(h, -1, "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{}}");
}

void tests_async(void) {
    test_submit_and_wait();
    test_async_field();
    test_cancel_in_flight();
    test_max_running();
    test_max_pending();
    test_eventfd_many_threads();
    test_cancel_while_a_deny_rule_evaluates();
    test_take_skips_collected_calls();
    test_closed_fd_is_not_written();
}
