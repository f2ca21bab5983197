/* test_declared.c - what a C tool declares of itself and learns of its
 * call: output_schema held to its results, annotations checked against its
 * capabilities, and clara_call_session, clara_call_cancelled and
 * clara_call_log (issue 27 §4). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clara.h"
#include "harness.h"

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* answer: returns its userdata as the result. */
static int answer(void *userdata, const char *args, clara_call *call) {
    (void)args;
    clara_call_result(call, userdata);
    return 0;
}

static const char movie_schema[] =
    "{\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\"},\"year\":{\"type\":\"integer\"}},"
    "\"required\":[\"title\",\"year\"]}";

static void test_output_schema_holds_results(void) {
    char desc[512];
    snprintf(desc, sizeof desc, "{\"name\":\"movie_ok\",\"output_schema\":%s}", movie_schema);
    CHECK_INT(clara_register_tool(desc, answer, (void *)"{\"title\":\"Alien\",\"year\":1979}", NULL), CLARA_OK);
    CHECK_ENVELOPE("{\"tool\":\"movie_ok\"}",
                   "{\"status\":\"success\",\"tool\":\"movie_ok\",\"result\":{\"title\":\"Alien\",\"year\":1979}}");
    snprintf(desc, sizeof desc, "{\"name\":\"movie_bad\",\"output_schema\":%s}", movie_schema);
    CHECK_INT(clara_register_tool(desc, answer, (void *)"{\"title\":\"Alien\",\"year\":\"1979\"}", NULL), CLARA_OK);
    CHECK_ENVELOPE("{\"tool\":\"movie_bad\"}",
                   "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"tool \\\"movie_bad\\\": its result does not match "
                   "output_schema: at /year: got string, want integer\",\"details\":[{\"pointer\":\"/year\",\"message\":\"got string, "
                   "want integer\"}]}");
    /* A schema that is not one fails the registration. */
    CHECK_INT(clara_register_tool("{\"name\":\"movie_x\",\"output_schema\":{\"type\":\"film\"}}", answer, (void *)"{}", NULL),
              -CLARA_EINVAL);
    free(clara_reset());
}

static void test_annotations(void) {
    CHECK_INT(clara_register_tool("{\"name\":\"fetch_page\",\"title\":\"Fetch a page\",\"capabilities\":[\"network\"],"
                                  "\"idempotent\":true,\"annotations\":{\"readOnlyHint\":true}}",
                                  answer, (void *)"{}", NULL),
              CLARA_OK);
    {
        char *list = clara_evaluate("{\"tool\":\"tools_list\",\"arguments\":{\"format\":\"mcp\"}}");
        CHECK(list != NULL && strstr(list, "{\"name\":\"fetch_page\",\"title\":\"Fetch a page\",\"description\":\"\","
                                           "\"inputSchema\":{\"type\":\"object\",\"properties\":{}},\"annotations\":{\"readOnlyHint\":true,"
                                           "\"idempotentHint\":true,\"openWorldHint\":true}}") != NULL);
        if (list != NULL && strstr(list, "fetch_page") == NULL) fprintf(stderr, "  %s\n", list);
        clara_free_string(list);
    }
    /* What the capabilities contradict is refused. */
    CHECK_INT(clara_register_tool("{\"name\":\"rm_file\",\"capabilities\":[\"fs_write\"],\"annotations\":{\"readOnlyHint\":true}}",
                                  answer, (void *)"{}", NULL),
              -CLARA_EINVAL);
    free(clara_reset());
}

/* describe: {"session": clara_call_session, "cancelled": clara_call_cancelled};
 * keeps its call in kept_call for the checks after it returned. */
static clara_call *kept_call;

static int describe(void *userdata, const char *args, clara_call *call) {
    char out[512];
    char *session = clara_call_session(call);
    (void)userdata;
    (void)args;
    snprintf(out, sizeof out, "{\"session\":\"%s\",\"cancelled\":%d}", session ? session : "(NULL)", clara_call_cancelled(call));
    clara_free_string(session);
    clara_call_log(call, CLARA_LOG_INFO, "no MCP client: nothing happens");
    clara_call_log(call, 17, "dropped, with a warning");
    kept_call = call;
    clara_call_result(call, out);
    return 0;
}

static void test_session(void) {
    int i;
    for (i = 0; i < 2; i++) {
        const char *desc = i ? "{\"name\":\"describe\",\"on_caller_thread\":true}" : "{\"name\":\"describe\"}";
        CHECK_INT(clara_register_tool(desc, describe, NULL, NULL), CLARA_OK);
        CHECK_ENVELOPE("{\"tool\":\"describe\",\"session\":\"s-1\"}",
                       "{\"status\":\"success\",\"tool\":\"describe\",\"result\":{\"session\":\"s-1\",\"cancelled\":0}}");
        CHECK_ENVELOPE("{\"tool\":\"describe\"}",
                       "{\"status\":\"success\",\"tool\":\"describe\",\"result\":{\"session\":\"default\",\"cancelled\":0}}");
        /* The call has ended: no session, and it is over. */
        CHECK(clara_call_session(kept_call) == NULL);
        CHECK_INT(clara_call_cancelled(kept_call), 1);
        clara_call_log(kept_call, CLARA_LOG_ERROR, "ignored");
    }
    free(clara_reset());
}

/* poller: runs until clara_call_cancelled says stop (at most 3 s), then
 * records when it stopped (now_ms). */
static pthread_mutex_t poll_mu = PTHREAD_MUTEX_INITIALIZER;
static double polled_ms = -1;

static int poller(void *userdata, const char *args, clara_call *call) {
    double t0 = now_ms();
    (void)userdata;
    (void)args;
    while (!clara_call_cancelled(call) && now_ms() - t0 < 3000) sleep_ms(2);
    pthread_mutex_lock(&poll_mu);
    polled_ms = now_ms();
    pthread_mutex_unlock(&poll_mu);
    clara_call_result(call, "\"stopped\"");
    return 0;
}

static double wait_polled(void) {
    double t0 = now_ms(), got;
    for (;;) {
        pthread_mutex_lock(&poll_mu);
        got = polled_ms;
        polled_ms = -1;
        pthread_mutex_unlock(&poll_mu);
        if (got >= 0 || now_ms() - t0 > 5000) return got;
        sleep_ms(5);
    }
}

static void test_cancelled(void) {
    double ran, start;
    /* Past its timeout: the caller gets timeout, the tool learns it should stop. */
    CHECK_INT(clara_register_tool("{\"name\":\"poller\",\"limits\":{\"timeout_ms\":60}}", poller, NULL, NULL), CLARA_OK);
    /* How long from the call's start: a worker may start the tool late
     * (under valgrind), but it must not stop before the deadline. */
    start = now_ms();
    CHECK_ENVELOPE("{\"tool\":\"poller\"}",
                   "{\"status\":\"error\",\"error\":\"timeout\",\"message\":\"tool \\\"poller\\\" ran past its timeout of 60 ms (running)\"}");
    ran = wait_polled() - start;
    CHECK(ran >= 58 && ran < 1500);
    if (!(ran >= 58 && ran < 1500)) fprintf(stderr, "  the poller ran %.0f ms\n", ran);
    /* Cancelled by its caller (clara_cancel of an asynchronous call). */
    CHECK_INT(clara_register_tool("{\"name\":\"poller\",\"limits\":{\"timeout_ms\":10000}}", poller, NULL, NULL), CLARA_OK);
    {
        int64_t h;
        char *out;
        start = now_ms();
        h = clara_submit("{\"tool\":\"poller\"}");
        CHECK(h > 0);
        sleep_ms(50);
        CHECK_INT(clara_cancel(h), CLARA_OK);
        out = clara_wait(h, -1);
        CHECK_PREFIX(out, "{\"status\":\"error\"");
        clara_free_string(out);
        ran = wait_polled() - start;
        CHECK(ran >= 48 && ran < 1500);
        if (!(ran >= 48 && ran < 1500)) fprintf(stderr, "  the poller ran %.0f ms\n", ran);
    }
    free(clara_reset());
}

void tests_declared(void) {
    test_output_schema_holds_results();
    test_annotations();
    test_session();
    test_cancelled();
}
