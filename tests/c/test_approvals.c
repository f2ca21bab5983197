/* test_approvals.c - a person approves tool calls (issue 28), from C:
 * clara_set_approval_handler approving, rejecting, editing the arguments,
 * answering what cannot be read, leaving the decision to approval_decide
 * on another thread, letting the timeout pass, and the call cancelled
 * while the handler holds it; no handler at all. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clara.h"
#include "harness.h"

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void ok(const char *request) {
    char *r = clara_evaluate(request);
    check_prefix("approvals setup", __LINE__, r, "{\"status\":\"success\"");
    clara_free_string(r);
}

static void configure_ok(const char *text) {
    char *r = clara_configure(text);
    check_prefix("approvals configure", __LINE__, r, "{\"status\":\"success\"");
    clara_free_string(r);
}

/* pay answers what it paid, counting its runs. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int runs;

static int pay(void *userdata, const char *arguments_json, clara_call *call) {
    char *amount = NULL, *to = NULL, out[256];
    (void)userdata;
    pthread_mutex_lock(&mu);
    runs++;
    pthread_mutex_unlock(&mu);
    clara_json_get(arguments_json, "amount", &amount, NULL);
    clara_json_get(arguments_json, "to", &to, NULL);
    snprintf(out, sizeof out, "{\"paid\":%s,\"to\":\"%s\"}", amount ? amount : "null", to ? to : "");
    clara_free_string(amount);
    clara_free_string(to);
    clara_call_result(call, out);
    return 0;
}

static int runs_now(void) {
    int n;
    pthread_mutex_lock(&mu);
    n = runs;
    pthread_mutex_unlock(&mu);
    return n;
}

/* The handler answers what the test put in `answer` (NULL: decides
 * nothing now) and keeps the request it was shown. With `hold`, it waits
 * until the event handler hears that its approval was cancelled. */
static const char *answer;
static int hold, held, cancelled_heard;
static char seen[1024];
static long long seen_id;

static char *approver(void *userdata, const char *request_json) {
    const char *p = strstr(request_json, "\"id\":");
    (void)userdata;
    pthread_mutex_lock(&mu);
    snprintf(seen, sizeof seen, "%s", request_json);
    seen_id = p != NULL ? strtoll(p + 5, NULL, 10) : 0;
    held++;
    pthread_cond_broadcast(&cv);
    while (hold && !cancelled_heard) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return answer != NULL ? strdup(answer) : NULL;
}

/* Only what it may: reading the event. */
static char events[4096];

static void on_event(void *userdata, const char *event_json) {
    (void)userdata;
    pthread_mutex_lock(&mu);
    if (strlen(events) + strlen(event_json) + 2 < sizeof events) {
        strcat(events, event_json);
        strcat(events, "\n");
    }
    if (strncmp(event_json, "{\"event\":\"approval_cancelled\",", 30) == 0) cancelled_heard = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void reset_handler(const char *a, int h) {
    pthread_mutex_lock(&mu);
    answer = a;
    hold = h;
    held = cancelled_heard = 0;
    seen[0] = events[0] = '\0';
    seen_id = 0;
    pthread_mutex_unlock(&mu);
}

/* Waits until the handler was given an approval; its id. */
static long long wait_held(void) {
    long long id;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&mu);
    while (held == 0 && pthread_cond_timedwait(&cv, &mu, &until) == 0) {
    }
    id = seen_id;
    pthread_mutex_unlock(&mu);
    return id;
}

static const char rules[] =
    "{\"tool\":\"rules_load\",\"arguments\":{\"name\":\"approvals.toml\",\"toml\":\"[rule]\\nid = \\\"big\\\"\\n"
    "trigger = \\\"on_tool_call\\\"\\n[condition]\\nexpression = \\\"context.tool.name == 'pay' and "
    "context.tool.arguments.amount > 100\\\"\\n[action]\\ntype = \\\"ask\\\"\\nreason = \\\"{{ context.tool.arguments.amount }} "
    "is a lot\\\"\\n\"}}";

static const char big[] = "{\"tool\":\"pay\",\"session\":\"desk\",\"arguments\":{\"to\":\"bob\",\"amount\":500}}";

static void test_decisions_of_the_handler(void) {
    char *r;
    int before = runs_now();
    /* No handler: rejected at once, never run. */
    CHECK_ENVELOPE(big, "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"pay\\\" was not run: rule \\\"big\\\" "
                        "asks for a person's approval (500 is a lot), and no approval handler is installed "
                        "(clara_set_approval_handler in C, clara.set_approval_handler in Python; clara-clips has one)\"}");
    clara_set_event_handler(on_event, NULL);
    clara_set_approval_handler(approver, NULL);

    reset_handler("{\"decision\":\"approve\"}", 0);
    CHECK_ENVELOPE(big, "{\"status\":\"success\",\"tool\":\"pay\",\"result\":{\"paid\":500,\"to\":\"bob\"}}");
    CHECK_PREFIX(seen, "{\"id\":");
    CHECK(strstr(seen, ",\"tool\":\"pay\",\"session\":\"desk\",\"arguments\":{\"to\":\"bob\",\"amount\":500},"
                       "\"reason\":\"500 is a lot\",\"rule\":\"big\",\"timeout_ms\":120000}") != NULL);
    CHECK(strstr(events, "{\"event\":\"approval_required\",\"id\":") != NULL);

    reset_handler("{\"decision\":\"reject\",\"reason\":\"not today\"}", 0);
    CHECK_ENVELOPE(big, "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"pay\\\" was not run: the approval "
                        "was rejected: not today\"}");

    reset_handler("{\"decision\":\"approve\",\"arguments\":{\"to\":\"bob\",\"amount\":50}}", 0);
    CHECK_ENVELOPE(big, "{\"status\":\"success\",\"tool\":\"pay\",\"result\":{\"paid\":50,\"to\":\"bob\"}}");

    /* Edited arguments are checked again. */
    reset_handler("{\"decision\":\"approve\",\"arguments\":{\"to\":\"bob\"}}", 0);
    r = clara_evaluate(big);
    CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"pay\\\" was not run: rule \\\"big\\\" "
                    "asks for a person's approval (500 is a lot), and the edited arguments do not match:");
    clara_free_string(r);

    /* An answer Clara cannot read rejects. */
    reset_handler("yes please", 0);
    r = clara_evaluate(big);
    CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"pay\\\" was not run: the approval was "
                    "rejected: the approval handler's answer could not be read: not a decision");
    clara_free_string(r);
    CHECK_INT(runs_now() - before, 2);
}

/* A decision from another thread: the handler leaves it (NULL), a thread
 * calls approval_decide. */
static void *decide_later(void *arg) {
    char req[256], *r;
    (void)arg;
    snprintf(req, sizeof req,
             "{\"tool\":\"approval_decide\",\"arguments\":{\"id\":%lld,\"decision\":\"approve\",\"arguments\":{\"to\":\"bob\","
             "\"amount\":7}}}",
             wait_held());
    r = clara_evaluate(req);
    check_prefix("decide_later", __LINE__, r, "{\"status\":\"success\",\"tool\":\"approval_decide\",\"result\":{\"id\":");
    clara_free_string(r);
    return NULL;
}

static void test_decided_on_another_thread(void) {
    pthread_t t;
    reset_handler(NULL, 0);
    pthread_create(&t, NULL, decide_later, NULL);
    CHECK_ENVELOPE(big, "{\"status\":\"success\",\"tool\":\"pay\",\"result\":{\"paid\":7,\"to\":\"bob\"}}");
    pthread_join(t, NULL);
    CHECK(strstr(events, "\"reason\":\"decided\"") != NULL);
}

static void test_timeout(void) {
    int before = runs_now();
    configure_ok("[policy]\napproval_timeout_ms = 100\n");
    reset_handler(NULL, 0);
    CHECK_ENVELOPE(big, "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"pay\\\" was not run: rule \\\"big\\\" "
                        "asks for a person's approval (500 is a lot), and none came within 100ms (policy.approval_timeout_ms)\"}");
    CHECK(strstr(events, "\"reason\":\"timed out\"") != NULL);
    CHECK_INT(runs_now() - before, 0);
    configure_ok("[policy]\napproval_timeout_ms = 120000\n");
}

/* The call cancelled while the handler holds its approval: it ends at
 * once, never runs; the handler hears approval_cancelled and returns, and
 * its late approval is dropped. */
static void test_cancelled_while_waiting(void) {
    int before = runs_now(), i;
    char *r;
    int64_t h;
    reset_handler("{\"decision\":\"approve\"}", 1);
    h = clara_submit(big);
    CHECK(h > 0);
    CHECK(wait_held() > 0);
    CHECK_INT(clara_cancel(h), CLARA_OK);
    r = clara_wait(h, -1);
    CHECK_STR(r, "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"the call of \\\"pay\\\" was cancelled\"}");
    clara_free_string(r);
    for (i = 0; i < 5000; i++) {
        int heard;
        pthread_mutex_lock(&mu);
        heard = cancelled_heard;
        pthread_mutex_unlock(&mu);
        if (heard) break;
        sleep_ms(1);
    }
    CHECK(strstr(events, "\"reason\":\"cancelled\"") != NULL);
    sleep_ms(50); /* the handler's late answer has come and gone */
    CHECK_INT(runs_now() - before, 0);
}

/* What the approver sees has no secret of the configuration in it. */
static void test_secrets_are_cut_out(void) {
    setenv("CLARA_APPROVAL_TEST_KEY", "sk-approval-test-0123456789", 1);
    configure_ok("[llm]\napi_key_env = \"CLARA_APPROVAL_TEST_KEY\"\n");
    reset_handler("{\"decision\":\"reject\",\"reason\":\"no\"}", 0);
    clara_free_string(clara_evaluate("{\"tool\":\"pay\",\"arguments\":{\"to\":\"sk-approval-test-0123456789\",\"amount\":500}}"));
    CHECK(strstr(seen, "\"to\":\"[redacted]\"") != NULL);
    CHECK(strstr(seen, "sk-approval-test") == NULL);
}

void tests_approvals(void) {
    configure_ok("state_dir = \"\"\n[rules]\nbuiltin = false\npaths = []\n");
    CHECK_INT(clara_register_tool("{\"name\":\"pay\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"to\":{\"type\":"
                                  "\"string\"},\"amount\":{\"type\":\"integer\"}},\"required\":[\"to\",\"amount\"]}}",
                                  pay, NULL, NULL),
              CLARA_OK);
    ok(rules);
    test_decisions_of_the_handler();
    test_decided_on_another_thread();
    test_timeout();
    test_cancelled_while_waiting();
    test_secrets_are_cut_out();
    clara_set_approval_handler(NULL, NULL);
    clara_set_event_handler(NULL, NULL);
    CHECK_INT(clara_unregister_tool("pay"), CLARA_OK);
    clara_free_string(clara_reset());
}
