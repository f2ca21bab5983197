/* test_envelopes.c - clara_evaluate: the envelopes of SPEC §2, bad input of
 * every kind, and the functions that need no request. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clara.h"
#include "harness.h"

static void test_version(void) {
    CHECK_STR(clara_version(), CLARA_VERSION);
    CHECK_INT(clara_version_number(), CLARA_VERSION_NUMBER);
}

static void test_strerror(void) {
    CHECK_STR(clara_strerror(CLARA_OK), "success");
    CHECK_STR(clara_strerror(CLARA_EINVAL), "invalid argument");
    CHECK_STR(clara_strerror(-CLARA_EINVAL), "invalid argument");
    CHECK_STR(clara_strerror(-CLARA_ENOMEM), "out of memory");
    CHECK_STR(clara_strerror(-CLARA_EINTERNAL), "internal error (see the log)");
    CHECK_STR(clara_strerror(12345), "unknown status code");
    CHECK_STR(clara_strerror(-2147483647 - 1), "unknown status code");
}

static void test_simple_form(void) {
    CHECK_ENVELOPE("{\"question\":\"what is 2+2?\"}",
                   "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{\"question\":\"what is 2+2?\"}}");
    CHECK_ENVELOPE(" {\n \"a\" : [1, 2] }\n", "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{\"a\":[1,2]}}");
    CHECK_ENVELOPE("{}", "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{}}");
}

static void test_explicit_form(void) {
    CHECK_ENVELOPE("{\"tool\":\"echo\",\"arguments\":{\"message\":\"hello\"}}",
                   "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{\"message\":\"hello\"}}");
    CHECK_ENVELOPE("{\"tool\":\"echo\",\"arguments\":{},\"id\":42,\"session\":\"s1\"}",
                   "{\"status\":\"success\",\"id\":42,\"tool\":\"echo\",\"result\":{}}");
    CHECK_ENVELOPE("{\"id\":\"req-7\",\"tool\":\"echo\"}",
                   "{\"status\":\"success\",\"id\":\"req-7\",\"tool\":\"echo\",\"result\":{}}");
}

static void test_unicode_survives(void) {
    /* Escapes, non-ASCII UTF-8 and \u0000 come back exactly as sent. */
    CHECK_ENVELOPE("{\"tool\":\"echo\",\"arguments\":{\"s\":\"\\u0000 \\\" \\\\ \\n \xc3\xa9 \xf0\x9f\x8e\x89 \\ud83c\\udf89\"}}",
                   "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{\"s\":\"\\u0000 \\\" \\\\ \\n \xc3\xa9 \xf0\x9f\x8e\x89 \\ud83c\\udf89\"}}");
}

static void test_get_time(void) {
    char *r = clara_evaluate("{\"tool\":\"get_time\",\"arguments\":{\"timezone\":\"Asia/Kolkata\"}}");
    char *time = NULL;
    CHECK_PREFIX(r, "{\"status\":\"success\",\"tool\":\"get_time\",\"result\":{\"time\":\"");
    CHECK_INT(clara_json_get(r, "result.time", &time, NULL), CLARA_JSON_STRING);
    CHECK(time != NULL && strlen(time) == 29 && strcmp(time + 23, "+05:30") == 0);
    clara_free_string(time);
    clara_free_string(r);
    CHECK_ENVELOPE("{\"tool\":\"get_time\",\"arguments\":{\"timezone\":\"Nowhere/Else\"}}",
                   "{\"status\":\"error\",\"error\":\"invalid_args\",\"message\":\"get_time: unknown timezone "
                   "\\\"Nowhere/Else\\\" (use an IANA name such as \\\"Europe/Paris\\\")\"}");
}

static void test_errors(void) {
    CHECK_ENVELOPE(NULL, "{\"status\":\"error\",\"error\":\"invalid_json\",\"message\":\"Invalid JSON: NULL input\"}");
    CHECK_ENVELOPE("", "{\"status\":\"error\",\"error\":\"invalid_json\",\"message\":\"Invalid JSON: empty input\"}");
    CHECK_ENVELOPE("not json",
                   "{\"status\":\"error\",\"error\":\"invalid_json\",\"message\":\"Invalid JSON: unexpected character 'n' at byte 0\"}");
    CHECK_ENVELOPE("[1,2]", "{\"status\":\"error\",\"error\":\"invalid_json\",\"message\":\"Invalid JSON: the request must be an object, got an array\"}");
    CHECK_ENVELOPE("{\"a\":\"\xff\"}", "{\"status\":\"error\",\"error\":\"invalid_json\",\"message\":\"Invalid JSON: invalid UTF-8 at byte 6\"}");
    CHECK_ENVELOPE("{\"tool\":\"nonexistent\"}",
                   "{\"status\":\"error\",\"error\":\"unknown_tool\",\"message\":\"Tool not found: nonexistent\"}");
    CHECK_ENVELOPE("{\"tool\":7}",
                   "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"\\\"tool\\\" must be a non-empty string, got a number\"}");
    CHECK_ENVELOPE("{\"tool\":\"echo\",\"arguments\":[]}",
                   "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"\\\"arguments\\\" must be an object, got an array\"}");
    CHECK_ENVELOPE("{\"tool\":\"echo\",\"session\":\"\"}",
                   "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"\\\"session\\\" must be a non-empty string, got an empty string\"}");
    CHECK_ENVELOPE("{\"tool\":\"echo\",\"argumens\":{}}",
                   "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"unknown field \\\"argumens\\\" in request "
                   "(known: tool, arguments, session, id, policy, async, trace, _meta)\"}");
}

static void test_huge_and_deep(void) {
    /* 64 MiB: refused by size before any parsing. */
    size_t big = 64u << 20;
    char *s = malloc(big + 1);
    int i, depth = 100000;
    CHECK(s != NULL);
    if (s == NULL) return;
    memset(s, ' ', big);
    s[0] = '{';
    s[big - 1] = '}';
    s[big] = '\0';
    CHECK_ENVELOPE(s, "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"request is 67108864 bytes, "
                      "more than limits.max_request_bytes (16777216)\"}");
    /* 100,000 levels deep: refused at level 513 without recursion. */
    strcpy(s, "{\"a\":");
    for (i = 0; i < depth; i++) s[5 + i] = '[';
    for (i = 0; i < depth; i++) s[5 + depth + i] = ']';
    strcpy(s + 5 + 2 * depth, "}");
    CHECK_ENVELOPE(s, "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"request nests deeper than "
                      "limits.max_depth (512) at byte 516\"}");
    free(s);
}

/* Random bytes and mutated requests: every answer is an envelope. */
static void test_garbage(void) {
    static const char seed[] = "{\"tool\":\"echo\",\"arguments\":{\"a\":[1,2.5e3,true,null,\"\\u00e9\"]},\"id\":1}";
    char buf[sizeof seed];
    int i, n = scaled(20000);
    unsigned int state = 12345;
    for (i = 0; i < n; i++) {
        char *r;
        size_t j, len = sizeof seed - 1;
        memcpy(buf, seed, sizeof seed);
        for (j = 0; j < 3; j++) {
            state = state * 1103515245u + 12345u;
            buf[(state >> 8) % len] = (char)((state >> 16) & 0xff);
        }
        buf[len] = '\0';
        r = clara_evaluate(buf);
        if (r == NULL || strncmp(r, "{\"status\":\"", 11) != 0 || r[strlen(r) - 1] != '}') {
            CHECK_STR(r, "an envelope");
            clara_free_string(r);
            return;
        }
        clara_free_string(r);
    }
    CHECK(1);
}

/* Envelopes on both sides of the size clara_evaluate guesses before calling
 * into Go (request + 128 bytes, at most 4096): each must come back whole. */
static void test_envelope_sizes(void) {
    static char req[12000], want[12100];
    int len;
    for (len = 3800; len < 4300; len++) {
        const char *head = "{\"tool\":\"echo\",\"arguments\":{\"s\":\"";
        char *got;
        int h = (int)strlen(head);
        memcpy(req, head, (size_t)h);
        memset(req + h, 'x', (size_t)len);
        strcpy(req + h + len, "\"}}");
        snprintf(want, sizeof want, "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{\"s\":\"%.*s\"}}", len, req + h);
        got = clara_evaluate(req);
        if (got == NULL || strcmp(got, want) != 0) {
            CHECK_STR(got, want);
            clara_free_string(got);
            return;
        }
        clara_free_string(got);
    }
    /* Short requests with longer answers (the first is past the guess). */
    CHECK_ENVELOPE("{\"tool\":\"e\",\"zz\":1}",
                   "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"unknown field \\\"zz\\\" in request "
                   "(known: tool, arguments, session, id, policy, async, trace, _meta)\"}");
    CHECK_ENVELOPE("{\"tool\":\"get_time\",\"arguments\":{\"extra\":1}}",
                   "{\"status\":\"error\",\"error\":\"invalid_args\",\"message\":\"tool \\\"get_time\\\": arguments do not match "
                   "input_schema: at the top: additional properties 'extra' not allowed\",\"details\":[{\"pointer\":\"\",\"message\":"
                   "\"additional properties 'extra' not allowed\"}]}");
}

static void test_free_null(void) {
    clara_free_string(NULL);
    CHECK(1);
}

void tests_envelopes(void) {
    test_version();
    test_strerror();
    test_simple_form();
    test_explicit_form();
    test_unicode_survives();
    test_get_time();
    test_errors();
    test_huge_and_deep();
    test_garbage();
    test_envelope_sizes();
    test_free_null();
}
