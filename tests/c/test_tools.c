/* test_tools.c - tools written in C: registration, userdata and its
 * release, results and errors, schemas, timeouts, concurrency, limits,
 * policy, test mode and audit. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clara.h"
#include "harness.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* userdata of the adder: counts its calls; freed by free_counter. */
struct counter {
    pthread_mutex_t mu;
    int calls, freed;
};

static struct counter *new_counter(void) {
    struct counter *c = calloc(1, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

static int freed_counters;
static pthread_mutex_t freed_mu = PTHREAD_MUTEX_INITIALIZER;

static void free_counter(void *p) {
    struct counter *c = p;
    pthread_mutex_lock(&freed_mu);
    freed_counters++;
    pthread_mutex_unlock(&freed_mu);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static int freed(void) {
    int n;
    pthread_mutex_lock(&freed_mu);
    n = freed_counters;
    pthread_mutex_unlock(&freed_mu);
    return n;
}

/* adder: {"a": number, "b": number} -> {"sum": a+b, "calls": n} */
static int adder(void *userdata, const char *args, clara_call *call) {
    struct counter *c = userdata;
    char *a = NULL, *b = NULL, out[128];
    int calls;
    clara_json_get(args, "a", &a, NULL);
    clara_json_get(args, "b", &b, NULL);
    pthread_mutex_lock(&c->mu);
    calls = ++c->calls;
    pthread_mutex_unlock(&c->mu);
    snprintf(out, sizeof out, "{\"sum\":%g,\"calls\":%d}", strtod(a, NULL) + strtod(b, NULL), calls);
    clara_free_string(a);
    clara_free_string(b);
    clara_call_result(call, out);
    return 0;
}

static const char adder_desc[] =
    "{\"name\":\"adder\",\"description\":\"Adds two numbers.\","
    "\"input_schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},\"b\":{\"type\":\"number\"}},"
    "\"required\":[\"a\",\"b\"],\"additionalProperties\":false}}";

static void test_register_call_unregister(void) {
    struct counter *c = new_counter();
    int before = freed();
    CHECK_INT(clara_register_tool(adder_desc, adder, c, free_counter), CLARA_OK);
    CHECK_ENVELOPE("{\"tool\":\"adder\",\"arguments\":{\"a\":2,\"b\":40}}",
                   "{\"status\":\"success\",\"tool\":\"adder\",\"result\":{\"sum\":42,\"calls\":1}}");
    CHECK_ENVELOPE("{\"tool\":\"adder\",\"arguments\":{\"a\":\"x\",\"c\":1}}",
                   "{\"status\":\"error\",\"error\":\"invalid_args\",\"message\":\"tool \\\"adder\\\": arguments do not match "
                   "input_schema: at the top: additional properties 'c' not allowed (and 2 more)\",\"details\":["
                   "{\"pointer\":\"\",\"message\":\"additional properties 'c' not allowed\"},"
                   "{\"pointer\":\"\",\"message\":\"missing property 'b'\"},"
                   "{\"pointer\":\"/a\",\"message\":\"got string, want number\"}]}");
    CHECK_INT(c->calls, 1); /* invalid arguments never reach the tool */
    CHECK_INT(clara_unregister_tool("adder"), CLARA_OK);
    CHECK_INT(freed(), before + 1);
    CHECK_INT(clara_unregister_tool("adder"), -CLARA_ENOENT);
    CHECK_ENVELOPE("{\"tool\":\"adder\",\"arguments\":{\"a\":1,\"b\":1}}",
                   "{\"status\":\"error\",\"error\":\"unknown_tool\",\"message\":\"Tool not found: adder\"}");
}

static void test_replace_releases_the_old_tool(void) {
    int before = freed();
    CHECK_INT(clara_register_tool(adder_desc, adder, new_counter(), free_counter), CLARA_OK);
    CHECK_INT(clara_register_tool(adder_desc, adder, new_counter(), free_counter), CLARA_OK);
    CHECK_INT(freed(), before + 1);
    CHECK_ENVELOPE("{\"tool\":\"adder\",\"arguments\":{\"a\":1,\"b\":1}}",
                   "{\"status\":\"success\",\"tool\":\"adder\",\"result\":{\"sum\":2,\"calls\":1}}");
    free(clara_reset()); /* reset drops C tools and releases them */
    CHECK_INT(freed(), before + 2);
}

/* Registration errors are logged: collect them instead of printing. */
static char reg_log[4096];
static void keep_errors(void *userdata, int level, const char *message) {
    (void)userdata;
    if (level == CLARA_LOG_ERROR && strlen(reg_log) + strlen(message) + 2 < sizeof reg_log) {
        strcat(reg_log, message);
        strcat(reg_log, "\n");
    }
}

static void test_registration_errors_release_userdata(void) {
    int before = freed();
    reg_log[0] = '\0';
    clara_set_log_handler(keep_errors, NULL, CLARA_LOG_ERROR);
    CHECK_INT(clara_register_tool("{\"name\":\"echo\"}", adder, new_counter(), free_counter), -CLARA_EPERM);
    CHECK_INT(clara_register_tool("{\"name\":\"bad name\"}", adder, new_counter(), free_counter), -CLARA_EINVAL);
    CHECK_INT(clara_register_tool("{\"name\":\"x\",\"input_schema\":{\"type\":\"strang\"}}", adder, new_counter(), free_counter),
              -CLARA_EINVAL);
    CHECK_INT(clara_register_tool("{\"name\":\"x\",\"colour\":1}", adder, new_counter(), free_counter), -CLARA_EINVAL);
    CHECK_INT(clara_register_tool("not json", adder, new_counter(), free_counter), -CLARA_EINVAL);
    CHECK_INT(clara_register_tool("{\"name\":\"x\"}", NULL, new_counter(), free_counter), -CLARA_EINVAL);
    CHECK_INT(clara_register_tool(NULL, adder, new_counter(), free_counter), -CLARA_EINVAL);
    CHECK_INT(freed(), before + 7);
    clara_set_log_handler(NULL, NULL, 0);
    CHECK_STR(reg_log,
              "clara_register_tool: cannot replace \"echo\": it is a built-in tool\n"
              "clara_register_tool: invalid tool name \"bad name\": use 1 to 64 letters, digits, '_' or '-'\n"
              "clara_register_tool: tool \"x\": invalid input_schema: at /type: got string, want array; at /type: value "
              "must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'\n"
              "clara_register_tool: descriptor: unknown key \"colour\"\n"
              "clara_register_tool: descriptor: invalid character 'o' in literal null (expecting 'u')\n"
              "clara_register_tool: the descriptor and the function must not be NULL\n"
              "clara_register_tool: the descriptor and the function must not be NULL\n");
    CHECK_INT(clara_register_tool("{\"name\":\"nofree\"}", adder, NULL, NULL), CLARA_OK); /* NULL free_userdata is fine */
    CHECK_INT(clara_unregister_tool("nofree"), CLARA_OK);
    CHECK_INT(clara_unregister_tool("echo"), -CLARA_EPERM);
    CHECK_INT(clara_unregister_tool(NULL), -CLARA_EINVAL);
}

/* Modes of scripted() that set one result and return 0. Among them,
 * results C vouches for as compact JSON (taken as they are), and ones it
 * leaves to Go's scan: whitespace, invalid UTF-8 (deep nesting is "deep"
 * below). */
static const struct {
    const char *mode, *result;
} scripted_results[] = {
    {"text", "line one\n\"quoted\" \xc3\xa9"},
    {"badjson", "{\"a\":"},
    {"big", "\"0123456789abcdef\""},
    {"utf8", "{\"caf\xc3\xa9\":[\"\xe2\x9c\x93\",\"\xf0\x9f\x98\x80\",\"\\u00e9\"],\"n\":-1.5e3}"},
    {"padded", " {\"a\":1}\n"},
    {"badutf8", "[\"\xed\xa0\x80\"]"}, /* a surrogate, encoded */
    {"jsontext", "{\"a\":1}"},
};

/* Tools whose userdata is the behaviour to show. */
static int scripted(void *userdata, const char *args, clara_call *call) {
    const char *mode = userdata;
    size_t i;
    (void)args;
    for (i = 0; i < sizeof scripted_results / sizeof scripted_results[0]; i++) {
        if (strcmp(mode, scripted_results[i].mode) == 0) {
            clara_call_result(call, scripted_results[i].result);
            return 0;
        }
    }
    if (strcmp(mode, "code") == 0) return 7;
    if (strcmp(mode, "message") == 0) {
        clara_call_error(call, "the disk is full");
        return 1;
    }
    if (strcmp(mode, "error-but-zero") == 0) {
        clara_call_error(call, "reported an error");
        return 0;
    }
    if (strcmp(mode, "nothing") == 0) return 0;
    if (strcmp(mode, "twice") == 0) {
        clara_call_result(call, "1");
        clara_call_result(call, "[2, 3]");
        return 0;
    }
    /* A result replaced by one larger or smaller than the room a worker's
     * job keeps for it (256 bytes for these arguments), or by null. */
    if (strcmp(mode, "grow") == 0 || strcmp(mode, "shrink") == 0) {
        char large[1003];
        memset(large, 'x', sizeof large);
        large[0] = large[sizeof large - 2] = '"';
        large[sizeof large - 1] = '\0';
        clara_call_result(call, mode[0] == 'g' ? "[2, 3]" : large);
        clara_call_result(call, mode[0] == 'g' ? large : "[2, 3]");
        return 0;
    }
    if (strcmp(mode, "tonull") == 0) {
        clara_call_result(call, "[2, 3]");
        clara_call_result(call, NULL);
        return 0;
    }
    if (strcmp(mode, "deep") == 0) {
        char deep[2 * 70 + 2];
        memset(deep, '[', 70);
        deep[70] = '1';
        memset(deep + 71, ']', 70);
        deep[141] = '\0';
        clara_call_result(call, deep);
        return 0;
    }
    return 99;
}

static void reg(const char *desc, const char *mode) {
    if (clara_register_tool(desc, scripted, (void *)mode, NULL) != CLARA_OK) CHECK_STR(desc, "registered");
}

static void test_results_and_errors(void) {
    reg("{\"name\":\"text\",\"returns\":\"string\"}", "text");
    reg("{\"name\":\"code\"}", "code");
    reg("{\"name\":\"message\"}", "message");
    reg("{\"name\":\"zero_error\"}", "error-but-zero");
    reg("{\"name\":\"badjson\"}", "badjson");
    reg("{\"name\":\"nothing\"}", "nothing");
    reg("{\"name\":\"twice\"}", "twice");
    reg("{\"name\":\"big\",\"limits\":{\"max_output_bytes\":10}}", "big");
    reg("{\"name\":\"cut\",\"returns\":\"string\",\"limits\":{\"max_output_bytes\":14}}", "text");
    CHECK_ENVELOPE("{\"tool\":\"text\"}", "{\"status\":\"success\",\"tool\":\"text\",\"result\":\"line one\\n\\\"quoted\\\" \xc3\xa9\"}");
    CHECK_ENVELOPE("{\"tool\":\"code\"}", "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"tool failed (code 7)\"}");
    CHECK_ENVELOPE("{\"tool\":\"message\"}", "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"the disk is full\"}");
    CHECK_ENVELOPE("{\"tool\":\"zero_error\"}", "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"reported an error\"}");
    CHECK_ENVELOPE("{\"tool\":\"badjson\"}",
                   "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"tool \\\"badjson\\\" returned invalid JSON: "
                   "unexpected end of input at byte 5\"}");
    CHECK_ENVELOPE("{\"tool\":\"nothing\"}", "{\"status\":\"success\",\"tool\":\"nothing\",\"result\":null}");
    CHECK_ENVELOPE("{\"tool\":\"twice\"}", "{\"status\":\"success\",\"tool\":\"twice\",\"result\":[2,3]}");
    reg("{\"name\":\"grow\"}", "grow");
    reg("{\"name\":\"shrink\"}", "shrink");
    reg("{\"name\":\"tonull\"}", "tonull");
    {
        char want[1100];
        memset(want, 0, sizeof want);
        strcpy(want, "{\"status\":\"success\",\"tool\":\"grow\",\"result\":\"");
        memset(want + strlen(want), 'x', 1000);
        strcat(want, "\"}");
        CHECK_ENVELOPE("{\"tool\":\"grow\"}", want);
    }
    CHECK_ENVELOPE("{\"tool\":\"shrink\"}", "{\"status\":\"success\",\"tool\":\"shrink\",\"result\":[2,3]}");
    CHECK_ENVELOPE("{\"tool\":\"tonull\"}", "{\"status\":\"success\",\"tool\":\"tonull\",\"result\":null}");
    CHECK_ENVELOPE("{\"tool\":\"big\"}",
                   "{\"status\":\"error\",\"error\":\"output_too_large\",\"message\":\"tool \\\"big\\\" returned 18 bytes of JSON, "
                   "more than its max_output_bytes (10)\",\"details\":{\"bytes\":18,\"max_output_bytes\":10}}");
    /* 14 bytes would cut the two-byte é in half: the cut moves back. */
    CHECK_ENVELOPE("{\"tool\":\"cut\"}", "{\"status\":\"success\",\"tool\":\"cut\",\"result\":\"line one\\n\\\"quot\",\"truncated\":true}");
    /* JSON results checked in C, or left to Go's scan; on a worker thread
     * and on the caller's. */
    {
        int i;
        for (i = 0; i < 2; i++) {
            const char *here = i ? ",\"on_caller_thread\":true" : "";
            char desc[128];
            static const char *modes[] = {"utf8", "padded", "badutf8", "deep", "jsontext"};
            size_t m;
            for (m = 0; m < sizeof modes / sizeof modes[0]; m++) {
                snprintf(desc, sizeof desc, "{\"name\":\"%s\"%s%s}", modes[m], here,
                         strcmp(modes[m], "jsontext") == 0 ? ",\"returns\":\"string\"" : "");
                reg(desc, modes[m]);
            }
            CHECK_ENVELOPE("{\"tool\":\"utf8\"}", "{\"status\":\"success\",\"tool\":\"utf8\",\"result\":{\"caf\xc3\xa9\":[\"\xe2\x9c\x93\","
                                                "\"\xf0\x9f\x98\x80\",\"\\u00e9\"],\"n\":-1.5e3}}");
            CHECK_ENVELOPE("{\"tool\":\"padded\"}", "{\"status\":\"success\",\"tool\":\"padded\",\"result\":{\"a\":1}}");
            CHECK_ENVELOPE("{\"tool\":\"badutf8\"}",
                           "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"tool \\\"badutf8\\\" returned invalid JSON: "
                           "invalid UTF-8 at byte 2\"}");
            {
                char want[256];
                snprintf(want, sizeof want, "{\"status\":\"success\",\"tool\":\"deep\",\"result\":%.70s1%.70s}",
                         "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
                         "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]");
                CHECK_ENVELOPE("{\"tool\":\"deep\"}", want);
            }
            CHECK_ENVELOPE("{\"tool\":\"jsontext\"}", "{\"status\":\"success\",\"tool\":\"jsontext\",\"result\":\"{\\\"a\\\":1}\"}");
        }
    }
    free(clara_reset());
}

/* sleeper: sleeps as long as its userdata says, then answers; counts how
 * many run at once. */
static pthread_mutex_t sleep_mu = PTHREAD_MUTEX_INITIALIZER;
static int running, max_running, finished;

static int sleeper(void *userdata, const char *args, clara_call *call) {
    int ms = (int)(size_t)userdata;
    (void)args;
    pthread_mutex_lock(&sleep_mu);
    if (++running > max_running) max_running = running;
    pthread_mutex_unlock(&sleep_mu);
    sleep_ms(ms);
    clara_call_result(call, "{\"slept\":true}");
    pthread_mutex_lock(&sleep_mu);
    running--;
    finished++;
    pthread_mutex_unlock(&sleep_mu);
    return 0;
}

/* Waits until value() reaches want, up to 60 s: how long abandoned tools
 * take to return depends on the machine (valgrind is slow), and no check
 * here may depend on time. Returns the last value seen. */
static int wait_for(int (*value)(void), int want) {
    int i, v = value();
    for (i = 0; i < 6000 && v < want; i++) {
        sleep_ms(10);
        v = value();
    }
    return v;
}

static int finished_count(void) {
    int n;
    pthread_mutex_lock(&sleep_mu);
    n = finished;
    pthread_mutex_unlock(&sleep_mu);
    return n;
}

static void test_timeout(void) {
    double t0, elapsed;
    int before_free = freed(), before_finished = finished_count();
    CHECK_INT(clara_register_tool("{\"name\":\"slow\",\"limits\":{\"timeout_ms\":100}}", sleeper, (void *)400, NULL), CLARA_OK);
    t0 = now_ms();
    CHECK_ENVELOPE("{\"tool\":\"slow\"}",
                   "{\"status\":\"error\",\"error\":\"timeout\",\"message\":\"tool \\\"slow\\\" ran past its timeout of 100 ms (running)\"}");
    elapsed = now_ms() - t0;
    /* At the deadline, not when the tool returns (400 ms): a generous margin for a loaded machine. */
    CHECK(elapsed >= 95 && elapsed < 350);
    if (!(elapsed >= 95 && elapsed < 350)) fprintf(stderr, "  timeout answered after %.0f ms\n", elapsed);
    /* The tool is still running: its userdata must outlive it. */
    {
        struct counter *c = new_counter();
        CHECK_INT(clara_register_tool("{\"name\":\"slow2\",\"limits\":{\"timeout_ms\":50}}", sleeper, (void *)300, NULL), CLARA_OK);
        CHECK_INT(clara_register_tool(adder_desc, adder, c, free_counter), CLARA_OK);
        char *r = clara_evaluate("{\"tool\":\"slow2\"}");
        CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"timeout\"");
        clara_free_string(r);
    }
    /* The late tools return; their results are discarded, nothing leaks. */
    CHECK_INT(wait_for(finished_count, before_finished + 2), before_finished + 2);
    free(clara_reset());
    CHECK_INT(freed(), before_free + 1);
}

/* slow_with_counter: a slow tool whose userdata must stay alive until it
 * returns, even when its caller timed out and the tool was unregistered. */
static int slow_with_counter(void *userdata, const char *args, clara_call *call) {
    struct counter *c = userdata;
    (void)args;
    sleep_ms(300);
    pthread_mutex_lock(&c->mu); /* would crash under valgrind if c were freed */
    c->calls++;
    pthread_mutex_unlock(&c->mu);
    clara_call_result(call, "\"late\"");
    return 0;
}

static void test_userdata_outlives_an_abandoned_call(void) {
    int before = freed();
    char *r;
    CHECK_INT(clara_register_tool("{\"name\":\"lingers\",\"limits\":{\"timeout_ms\":30}}", slow_with_counter, new_counter(),
                                  free_counter),
              CLARA_OK);
    r = clara_evaluate("{\"tool\":\"lingers\"}");
    CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"timeout\"");
    clara_free_string(r);
    CHECK_INT(clara_unregister_tool("lingers"), CLARA_OK);
    CHECK_INT(freed(), before); /* still running (300 ms): not released yet */
    CHECK_INT(wait_for(freed, before + 1), before + 1); /* released once the tool returned */
}

struct caller {
    const char *request;
    int calls, bad;
};

static void *call_many(void *arg) {
    struct caller *c = arg;
    int i;
    for (i = 0; i < c->calls; i++) {
        char *r = clara_evaluate(c->request);
        if (r == NULL || strncmp(r, "{\"status\":\"success\"", 19) != 0) c->bad++;
        clara_free_string(r);
    }
    return NULL;
}

static void test_max_concurrency_one(void) {
    pthread_t t[8];
    struct caller c[8];
    int i, bad = 0;
    max_running = 0;
    CHECK_INT(clara_register_tool("{\"name\":\"single\",\"limits\":{\"max_concurrency\":1,\"timeout_ms\":10000}}", sleeper,
                                  (void *)5, NULL),
              CLARA_OK);
    for (i = 0; i < 8; i++) {
        c[i].request = "{\"tool\":\"single\"}";
        c[i].calls = scaled(4) < 2 ? 2 : scaled(4);
        c[i].bad = 0;
        pthread_create(&t[i], NULL, call_many, &c[i]);
    }
    for (i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        bad += c[i].bad;
    }
    CHECK_INT(bad, 0);
    CHECK_INT(max_running, 1);
    free(clara_reset());
}

static void test_rate_limit(void) {
    char *r, *retry = NULL;
    CHECK_INT(clara_register_tool("{\"name\":\"rare\",\"limits\":{\"rate_per_min\":2}}", scripted, (void *)"nothing", NULL), CLARA_OK);
    CHECK_ENVELOPE("{\"tool\":\"rare\"}", "{\"status\":\"success\",\"tool\":\"rare\",\"result\":null}");
    CHECK_ENVELOPE("{\"tool\":\"rare\"}", "{\"status\":\"success\",\"tool\":\"rare\",\"result\":null}");
    r = clara_evaluate("{\"tool\":\"rare\"}");
    CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"rate_limited\",\"message\":\"tool \\\"rare\\\" allows 2 calls a minute per tool; retry in ");
    CHECK_INT(clara_json_get(r, "details.retry_after_ms", &retry, NULL), CLARA_JSON_INTEGER);
    CHECK(retry != NULL && atoi(retry) > 55000 && atoi(retry) <= 60000);
    clara_free_string(retry);
    clara_free_string(r);
    free(clara_reset());
}

static void test_policy(void) {
    reg("{\"name\":\"secret\"}", "nothing");
    free(clara_configure("[policy]\ndeny = [\"secret\"]\n"));
    CHECK_ENVELOPE("{\"tool\":\"secret\"}",
                   "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"secret\\\" denied by the policy of the "
                   "configuration: its deny list names it\"}");
    free(clara_configure("[policy]\ndeny = []\n"));
    CHECK_ENVELOPE("{\"tool\":\"secret\"}", "{\"status\":\"success\",\"tool\":\"secret\",\"result\":null}");
    /* A request narrows what its tool may call (its allow list is not about
     * the tool itself, issue 26 §4); its deny list refuses the tool. */
    CHECK_ENVELOPE("{\"tool\":\"secret\",\"policy\":{\"allow\":[\"echo\"]}}", "{\"status\":\"success\",\"tool\":\"secret\",\"result\":null}");
    CHECK_ENVELOPE("{\"tool\":\"secret\",\"policy\":{\"deny\":[\"secret\"]}}",
                   "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"secret\\\" denied by the policy of the "
                   "request: its deny list names it\"}");
    free(clara_configure("[policy]\nallow = [\"echo\"]\n"));
    CHECK_ENVELOPE("{\"tool\":\"secret\",\"policy\":{\"allow\":[\"secret\"]}}",
                   "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"secret\\\" denied by the policy of the "
                   "configuration: it is not in its allow list\"}");
    free(clara_reset());
}

static void test_test_mode(void) {
    reg("{\"name\":\"fetch\",\"capabilities\":[\"network\"]}", "text");
    free(clara_configure("test_mode = true"));
    CHECK_ENVELOPE("{\"tool\":\"fetch\"}", "{\"status\":\"success\",\"tool\":\"fetch\",\"result\":{\"test_mode\":true,\"skipped\":\"fetch\"}}");
    CHECK_ENVELOPE("{\"q\":1}", "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{\"q\":1}}");
    free(clara_reset());
}

static void test_audit_keeps_no_values(void) {
    char *r, *tool = NULL, *hash = NULL;
    reg("{\"name\":\"audited\"}", "nothing");
    clara_free_string(clara_evaluate("{\"tool\":\"audited\",\"arguments\":{\"password\":\"hunter2\"}}"));
    r = clara_evaluate("{\"tool\":\"audit_tail\",\"arguments\":{\"n\":1}}");
    CHECK(r != NULL && strstr(r, "hunter2") == NULL);
    CHECK_INT(clara_json_get(r, "result.records.0.tool", &tool, NULL), CLARA_JSON_STRING);
    CHECK_STR(tool, "audited");
    CHECK_INT(clara_json_get(r, "result.records.0.args_sha256", &hash, NULL), CLARA_JSON_STRING);
    CHECK(hash != NULL && strlen(hash) == 64);
    clara_free_string(tool);
    clara_free_string(hash);
    clara_free_string(r);
    free(clara_reset());
}

/* A finaliser that calls back into Clara, as the Python module allows: it
 * used to deadlock when Clara released the tool from inside clara_reset()
 * or clara_configure() (both held the configuration lock). An alarm turns
 * a hang into a failure instead of a stuck run. */
static int reentrant_finalisers;

static void reentrant_free(void *userdata) {
    char *r;
    (void)userdata;
    r = clara_configure("[limits]\ntimeout_ms = 1500\n");
    CHECK_PREFIX(r, "{\"status\":\"success\"");
    clara_free_string(r);
    r = clara_evaluate("{\"tool\":\"rules_load\",\"arguments\":{\"name\":\"fin.toml\",\"toml\":\"\"}}");
    CHECK_PREFIX(r, "{\"status\":\"success\"");
    clara_free_string(r);
    reentrant_finalisers++;
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "FAIL test_finaliser_may_call_clara: a finaliser calling Clara hung (deadlock)\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
    _exit(3);
}

static void test_finaliser_may_call_clara(void) {
    void (*old)(int) = signal(SIGALRM, on_alarm);
    reentrant_finalisers = 0;
    alarm(60);
    /* Released by clara_reset. */
    CHECK_INT(clara_register_tool("{\"name\":\"fin_a\"}", scripted, (void *)"nothing", reentrant_free), CLARA_OK);
    free(clara_reset());
    CHECK_INT(reentrant_finalisers, 1);
    /* Released by a clara_configure whose [[tools]] replaces it (which it
     * must say: replace = true). */
    CHECK_INT(clara_register_tool("{\"name\":\"fin_b\"}", scripted, (void *)"nothing", reentrant_free), CLARA_OK);
    char *r = clara_configure("[[tools]]\nname = \"fin_b\"\nreplace = true\nlua = \"return function() return 1 end\"\n");
    CHECK_PREFIX(r, "{\"status\":\"success\"");
    clara_free_string(r);
    CHECK_INT(reentrant_finalisers, 2);
    /* Released by clara_unregister_tool (this always worked). */
    CHECK_INT(clara_register_tool("{\"name\":\"fin_c\"}", scripted, (void *)"nothing", reentrant_free), CLARA_OK);
    CHECK_INT(clara_unregister_tool("fin_c"), CLARA_OK);
    CHECK_INT(reentrant_finalisers, 3);
    alarm(0);
    signal(SIGALRM, old);
    free(clara_reset());
}

/* on_caller_thread: the tool runs on the thread that called clara_evaluate
 * (no handoff); results and errors as usual; a call past its timeout_ms is a
 * timeout once the tool returns, its answer dropped. Without the flag the
 * tool runs on a worker thread. */
static pthread_t seen_thread;

static int where_am_i(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    seen_thread = pthread_self();
    clara_call_result(call, args);
    return 0;
}

static void test_on_caller_thread(void) {
    int before_finished = finished_count();
    char *r;
    CHECK_INT(clara_register_tool("{\"name\":\"here\",\"on_caller_thread\":true}", where_am_i, NULL, NULL), CLARA_OK);
    CHECK_INT(clara_register_tool("{\"name\":\"there\"}", where_am_i, NULL, NULL), CLARA_OK);
    CHECK_ENVELOPE("{\"tool\":\"here\",\"arguments\":{\"a\":1}}", "{\"status\":\"success\",\"tool\":\"here\",\"result\":{\"a\":1}}");
    CHECK(pthread_equal(seen_thread, pthread_self()));
    {
        /* Arguments too large for the copy on the stack. */
        char req[3000], want[3100];
        char big[2049];
        memset(big, 'x', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        snprintf(req, sizeof req, "{\"tool\":\"here\",\"arguments\":{\"s\":\"%s\"}}", big);
        snprintf(want, sizeof want, "{\"status\":\"success\",\"tool\":\"here\",\"result\":{\"s\":\"%s\"}}", big);
        CHECK_ENVELOPE(req, want);
    }
    CHECK_ENVELOPE("{\"tool\":\"there\",\"arguments\":{\"a\":1}}", "{\"status\":\"success\",\"tool\":\"there\",\"result\":{\"a\":1}}");
    CHECK(!pthread_equal(seen_thread, pthread_self()));
    reg("{\"name\":\"here_msg\",\"on_caller_thread\":true}", "message");
    CHECK_ENVELOPE("{\"tool\":\"here_msg\"}", "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"the disk is full\"}");
    reg("{\"name\":\"here_twice\",\"on_caller_thread\":true}", "twice");
    CHECK_ENVELOPE("{\"tool\":\"here_twice\"}", "{\"status\":\"success\",\"tool\":\"here_twice\",\"result\":[2,3]}");
    reg("{\"name\":\"here_bad\",\"on_caller_thread\":true}", "badjson");
    r = clara_evaluate("{\"tool\":\"here_bad\"}");
    CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"tool_failed\"");
    clara_free_string(r);
    CHECK_INT(clara_register_tool("{\"name\":\"here_slow\",\"on_caller_thread\":true,\"limits\":{\"timeout_ms\":20}}", sleeper,
                                  (void *)200, NULL),
              CLARA_OK);
    CHECK_ENVELOPE("{\"tool\":\"here_slow\"}",
                   "{\"status\":\"error\",\"error\":\"timeout\",\"message\":\"tool \\\"here_slow\\\" ran past its timeout (on the "
                   "caller's thread, where it cannot be cut short; its answer was dropped)\"}");
    /* The tool ran to its end before the answer came back. */
    CHECK_INT(finished_count(), before_finished + 1);
    CHECK_INT(clara_register_tool("{\"name\":\"here_bool\",\"on_caller_thread\":1}", where_am_i, NULL, NULL), -CLARA_EINVAL);
    free(clara_reset());
}

/* Reports kept in C on the tool's own thread, and the ones that go
 * through Go: from a thread the tool starts (and joins), and after the tool
 * returned (ignored). A tool that calls clara_evaluate of another tool on
 * its own thread keeps its own report. */
struct report_job {
    clara_call *call;
    const char *result;
};

static void *report_from_thread(void *arg) {
    struct report_job *j = arg;
    clara_call_result(j->call, j->result);
    return NULL;
}

static clara_call *kept_call;

static int reporter(void *userdata, const char *args, clara_call *call) {
    const char *mode = userdata;
    (void)args;
    if (strncmp(mode, "helper", 6) == 0) {
        /* Reports through Go are checked there: compacted, or refused. */
        struct report_job j = {call, strcmp(mode, "helper") == 0           ? "{\"from\":\"helper thread\"}"
                                     : strcmp(mode, "helper_spaced") == 0 ? "{\"from\": \"helper thread\"}"
                                                                          : "{\"from\":"};
        pthread_t t;
        if (pthread_create(&t, NULL, report_from_thread, &j) != 0) return 1;
        pthread_join(t, NULL);
        return 0;
    }
    if (strcmp(mode, "keep") == 0) {
        kept_call = call;
        clara_call_result(call, "\"kept\"");
        return 0;
    }
    if (strcmp(mode, "nested") == 0) {
        char *inner;
        clara_call_result(call, "\"outer before\"");
        inner = clara_evaluate("{\"tool\":\"rep_keep_here\"}");
        clara_free_string(inner);
        clara_call_error(call, NULL); /* then replaced by nothing: the default message */
        return 0;
    }
    return 1;
}

static void test_reports_from_other_threads(void) {
    int i;
    for (i = 0; i < 2; i++) {
        const char *here = i ? ",\"on_caller_thread\":true" : "";
        char desc[128];
        snprintf(desc, sizeof desc, "{\"name\":\"rep_helper\"%s}", here);
        CHECK_INT(clara_register_tool(desc, reporter, (void *)"helper", NULL), CLARA_OK);
        CHECK_ENVELOPE("{\"tool\":\"rep_helper\"}", "{\"status\":\"success\",\"tool\":\"rep_helper\",\"result\":{\"from\":\"helper thread\"}}");
        snprintf(desc, sizeof desc, "{\"name\":\"rep_spaced\"%s}", here);
        CHECK_INT(clara_register_tool(desc, reporter, (void *)"helper_spaced", NULL), CLARA_OK);
        CHECK_ENVELOPE("{\"tool\":\"rep_spaced\"}", "{\"status\":\"success\",\"tool\":\"rep_spaced\",\"result\":{\"from\":\"helper thread\"}}");
        snprintf(desc, sizeof desc, "{\"name\":\"rep_bad\"%s}", here);
        CHECK_INT(clara_register_tool(desc, reporter, (void *)"helper_bad", NULL), CLARA_OK);
        CHECK_ENVELOPE("{\"tool\":\"rep_bad\"}", "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"tool \\\"rep_bad\\\" "
                                                   "returned invalid JSON: unexpected end of input at byte 8\"}");
        snprintf(desc, sizeof desc, "{\"name\":\"rep_keep\"%s}", here);
        CHECK_INT(clara_register_tool(desc, reporter, (void *)"keep", NULL), CLARA_OK);
        CHECK_ENVELOPE("{\"tool\":\"rep_keep\"}", "{\"status\":\"success\",\"tool\":\"rep_keep\",\"result\":\"kept\"}");
        /* The tool returned: a report with its call now is ignored. */
        clara_call_result(kept_call, "\"late\"");
        clara_call_error(kept_call, "late");
        CHECK_ENVELOPE("{\"tool\":\"rep_keep\"}", "{\"status\":\"success\",\"tool\":\"rep_keep\",\"result\":\"kept\"}");
    }
    CHECK_INT(clara_register_tool("{\"name\":\"rep_keep_here\",\"on_caller_thread\":true}", reporter, (void *)"keep", NULL),
              CLARA_OK);
    CHECK_INT(clara_register_tool("{\"name\":\"rep_nested\"}", reporter, (void *)"nested", NULL), CLARA_OK);
    CHECK_ENVELOPE("{\"tool\":\"rep_nested\"}", "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"tool failed (code 0)\"}");
    free(clara_reset());
}

void tests_tools(void) {
    test_register_call_unregister();
    test_replace_releases_the_old_tool();
    test_registration_errors_release_userdata();
    test_results_and_errors();
    test_timeout();
    test_on_caller_thread();
    test_reports_from_other_threads();
    test_userdata_outlives_an_abandoned_call();
    test_max_concurrency_one();
    test_rate_limit();
    test_policy();
    test_test_mode();
    test_audit_keeps_no_values();
    test_finaliser_may_call_clara();
}
