/* test_ownership.c - nothing Clara keeps after a call may point into the
 * caller's memory. Every request and event here is written into a buffer of
 * its own that is overwritten and freed as soon as the call returns, the way
 * a hostile (or merely busy) host reuses its memory; some buffers are large
 * enough for malloc to map them, so that a stale pointer into one faults.
 * Then every place the call could have left something is read back: rate
 * windows, notices, rule state, key-value data, session policies, the
 * audit, callbacks and the session history. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clara.h"
#include "harness.h"

/* Large enough for glibc to serve it with mmap (and unmap it on free). */
#define MAPPED (512 * 1024)

/* Copies text into a buffer of at least min bytes, calls Clara, then
 * scribbles over the buffer and frees it. */
static char *call_and_scribble(char *(*fn)(const char *), const char *text, size_t min) {
    size_t n = strlen(text) + 1, size = n > min ? n : min;
    char *buf = malloc(size), *reply;
    memcpy(buf, text, n);
    reply = fn(buf);
    memset(buf, 'Z', size - 1);
    buf[size - 1] = '\0';
    free(buf);
    return reply;
}

static char *evaluate_borrowed(const char *request) { return call_and_scribble(clara_evaluate, request, 0); }

/* The same, with an id so long that the request is mapped. */
static char *evaluate_mapped(const char *tool, const char *session, const char *args_json) {
    char *req = malloc(MAPPED + 256), *reply;
    size_t pad = MAPPED - 64;
    int n = snprintf(req, 256, "{\"tool\":\"%s\",\"session\":\"%s\",\"arguments\":{%s},\"id\":\"", tool, session,
                     args_json);
    memset(req + n, 'p', pad);
    strcpy(req + n + pad, "\"}");
    reply = call_and_scribble(clara_evaluate, req, 0);
    free(req);
    return reply;
}

static void fresh(void) {
    char *r;
    clara_free_string(clara_reset());
    r = clara_configure("state_dir = \"\"\n[rules]\nbuiltin = false\n");
    CHECK_PREFIX(r, "{\"status\":\"success\"");
    clara_free_string(r);
}

static int quiet_tool(void *userdata, const char *arguments, clara_call *call) {
    (void)userdata;
    (void)arguments;
    clara_call_result(call, "{\"ok\":true}");
    return 0;
}

/* A per-session rate window is keyed by the session's name: two sessions
 * whose requests share one buffer must keep their own counts. */
static void test_rate_windows_keep_their_session(void) {
    static const char *order[] = {"alice", "carol", "alice", "carol", "alice", "carol"};
    static const char *want[] = {"success", "success", "success", "success", "rate_limited", "rate_limited"};
    char *buf = malloc(256), *reply, *status = NULL;
    int i;
    fresh();
    CHECK_INT(clara_register_tool("{\"name\":\"limited\",\"limits\":{\"rate_per_min\":2,\"rate_scope\":\"session\"}}",
                                  quiet_tool, NULL, NULL),
              CLARA_OK);
    for (i = 0; i < 6; i++) {
        /* One buffer for every request, rewritten each time. */
        snprintf(buf, 256, "{\"tool\":\"limited\",\"session\":\"%s\"}", order[i]);
        reply = clara_evaluate(buf);
        memset(buf, 'Z', 255);
        clara_json_get(reply, "status", &status, NULL);
        if (strcmp(want[i], "rate_limited") == 0) {
            char *code = NULL;
            clara_json_get(reply, "error", &code, NULL);
            CHECK_STR(code, "rate_limited");
            clara_free_string(code);
        } else {
            CHECK_STR(status, "success");
        }
        clara_free_string(status);
        clara_free_string(reply);
    }
    free(buf);
    /* Mapped requests, freed (unmapped) at once: a later sweep of the
     * windows must not read them. */
    reply = evaluate_mapped("limited", "dave", "");
    CHECK_PREFIX(reply, "{\"status\":\"success\"");
    clara_free_string(reply);
    reply = evaluate_mapped("limited", "erin", "");
    CHECK_PREFIX(reply, "{\"status\":\"success\"");
    clara_free_string(reply);
    reply = evaluate_borrowed("{\"tool\":\"limited\",\"session\":\"dave\"}");
    CHECK_PREFIX(reply, "{\"status\":\"success\"");
    clara_free_string(reply);
    reply = evaluate_borrowed("{\"tool\":\"limited\",\"session\":\"dave\"}");
    CHECK_PREFIX(reply, "{\"status\":\"error\",\"error\":\"rate_limited\"");
    clara_free_string(reply);
    clara_unregister_tool("limited");
}

/* A Lua rule that writes the session's name into a notice and into the
 * rule state: both must keep the name after the request is gone. */
static void test_lua_rule_values_are_copies(void) {
    char *r;
    fresh();
    r = clara_evaluate(
        "{\"tool\":\"rules_load\",\"arguments\":{\"name\":\"own.toml\",\"toml\":"
        "\"[rule]\\nid = \\\"who\\\"\\ntrigger = \\\"on_tool_complete\\\"\\n"
        "[condition]\\nexpression = \\\"context.tool.name == 'echo'\\\"\\n"
        "[action]\\ntype = \\\"lua\\\"\\nlua = \\\"notify('seen ' .. ctx.event.session, 'normal'); "
        "notify(ctx.event.session, 'low'); state.set(ctx.event.session, ctx.event.session)\\\"\\n\"}}");
    CHECK_PREFIX(r, "{\"status\":\"success\"");
    clara_free_string(r);
    r = evaluate_borrowed("{\"tool\":\"echo\",\"session\":\"sess-lua\",\"arguments\":{\"x\":1}}");
    CHECK_PREFIX(r, "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{\"x\":1},\"notices\":[");
    clara_free_string(r);
    r = evaluate_mapped("echo", "sess-map", "");
    CHECK_PREFIX(r, "{\"status\":\"success\"");
    clara_free_string(r);
    CHECK_ENVELOPE("{\"tool\":\"notifications_drain\",\"session\":\"sess-lua\"}",
                   "{\"status\":\"success\",\"tool\":\"notifications_drain\",\"result\":{\"notices\":["
                   "{\"rule\":\"who\",\"message\":\"seen sess-lua\",\"priority\":\"normal\",\"event\":\"on_tool_complete\"},"
                   "{\"rule\":\"who\",\"message\":\"sess-lua\",\"priority\":\"low\",\"event\":\"on_tool_complete\"}],"
                   "\"dropped\":0}}");
    CHECK_ENVELOPE("{\"tool\":\"state_get\",\"session\":\"sess-lua\",\"arguments\":{\"key\":\"sess-lua\"}}",
                   "{\"status\":\"success\",\"tool\":\"state_get\",\"result\":{\"key\":\"sess-lua\",\"found\":true,"
                   "\"value\":\"sess-lua\"}}");
    CHECK_ENVELOPE("{\"tool\":\"state_get\",\"session\":\"sess-map\",\"arguments\":{\"key\":\"sess-map\"}}",
                   "{\"status\":\"success\",\"tool\":\"state_get\",\"result\":{\"key\":\"sess-map\",\"found\":true,"
                   "\"value\":\"sess-map\"}}");
    /* Events emitted from a scribbled buffer too. */
    r = call_and_scribble(clara_emit, "{\"event\":\"custom.ping\",\"session\":\"sess-emit\"}", MAPPED);
    CHECK_PREFIX(r, "{\"status\":\"success\"");
    clara_free_string(r);
    clara_free_string(clara_reset());
}

/* Key-value data, a session policy and the audit keep their own copies. */
static void test_tool_data_are_copies(void) {
    char *r;
    fresh();
    r = evaluate_mapped("kv_set", "sess-kv", "\"key\":\"colour\",\"value\":\"teal\"");
    CHECK_PREFIX(r, "{\"status\":\"success\"");
    clara_free_string(r);
    CHECK_ENVELOPE("{\"tool\":\"kv_get\",\"session\":\"sess-kv\",\"arguments\":{\"key\":\"colour\"}}",
                   "{\"status\":\"success\",\"tool\":\"kv_get\",\"result\":{\"key\":\"colour\",\"found\":true,"
                   "\"value\":\"teal\"}}");
    r = evaluate_borrowed("{\"tool\":\"session_policy\",\"session\":\"sess-pol\",\"arguments\":{\"deny\":[\"get_time\"]}}");
    CHECK_PREFIX(r, "{\"status\":\"success\"");
    clara_free_string(r);
    CHECK_ENVELOPE("{\"tool\":\"get_time\",\"session\":\"sess-pol\"}",
                   "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"get_time\\\" denied by the policy "
                   "of session \\\"sess-pol\\\": its deny list names it\"}");
    r = evaluate_borrowed("{\"tool\":\"no_such_tool\",\"session\":\"sess-audit\"}");
    CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"unknown_tool\"");
    clara_free_string(r);
    r = clara_evaluate("{\"tool\":\"audit_tail\",\"arguments\":{\"n\":2}}");
    CHECK(r != NULL && strstr(r, "\"session\":\"sess-audit\",\"tool\":\"no_such_tool\"") != NULL);
    CHECK(r != NULL && strstr(r, "ZZZ") == NULL);
    clara_free_string(r);
    clara_free_string(clara_reset());
}

/* Session names are capped in requests as in events: a name of 200 KiB
 * would otherwise become a session, a rate window and an audit entry. */
static void test_session_names_are_capped(void) {
    size_t n = 200 * 1024;
    char *req = malloc(n + 64), *r;
    fresh();
    strcpy(req, "{\"tool\":\"echo\",\"session\":\"");
    memset(req + strlen(req), 's', n);
    strcpy(req + strlen("{\"tool\":\"echo\",\"session\":\"") + n, "\"}");
    r = clara_evaluate(req);
    CHECK_STR(r, "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"\\\"session\\\" is 204800 bytes; "
                 "a session name is at most 256 bytes\"}");
    clara_free_string(r);
    free(req);
}

void tests_ownership(void) {
    test_rate_windows_keep_their_session();
    test_lua_rule_values_are_copies();
    test_tool_data_are_copies();
    test_session_names_are_capped();
}
