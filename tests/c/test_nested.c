/* test_nested.c - clara_call_evaluate: a C tool's own requests run inside
 * its call (policy, session, depth, call stack), and a handle used after
 * its tool returned gets an error envelope, not a crash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clara.h"
#include "harness.h"

/* nester runs the request in its arguments' "request" inside its call and
 * answers with the envelope it got. */
static int nester(void *userdata, const char *arguments_json, clara_call *call) {
    char *request = NULL, *envelope;
    (void)userdata;
    if (clara_json_get(arguments_json, "request", &request, NULL) != CLARA_JSON_STRING) {
        clara_free_string(request);
        clara_call_error(call, "no request");
        return 1;
    }
    envelope = clara_call_evaluate(call, request);
    clara_free_string(request);
    clara_call_result(call, envelope);
    clara_free_string(envelope);
    return 0;
}

/* keeper keeps its handle past its return. */
static clara_call *kept_call;

static int keeper(void *userdata, const char *arguments_json, clara_call *call) {
    (void)userdata;
    (void)arguments_json;
    kept_call = call;
    clara_call_result(call, "true");
    return 0;
}

/* Evaluates {"tool":"nester","session":"n1","arguments":{"request":inner}}
 * with outer appended (",\"policy\":{...}" or ""), checks that the answer
 * contains want, frees it. */
static void nest(const char *test, int line, const char *outer, const char *inner, const char *want) {
    char request[1024], escaped[512], *r;
    size_t j = 0;
    for (size_t i = 0; inner[i] != '\0' && j + 2 < sizeof escaped; i++) {
        if (inner[i] == '"' || inner[i] == '\\') escaped[j++] = '\\';
        escaped[j++] = inner[i];
    }
    escaped[j] = '\0';
    snprintf(request, sizeof request, "{\"tool\":\"nester\",\"session\":\"n1\",\"arguments\":{\"request\":\"%s\"}%s}",
             escaped, outer);
    r = clara_evaluate(request);
    check_true(test, line, r != NULL && strstr(r, want) != NULL, want);
    if (r == NULL || strstr(r, want) == NULL) fprintf(stderr, "    got %s\n", r ? r : "NULL");
    clara_free_string(r);
}

#define NEST(outer, inner, want) nest(__func__, __LINE__, (outer), (inner), (want))

static void test_a_nested_request_inherits_the_calls_scope(void) {
    CHECK_INT(clara_register_tool("{\"name\":\"nester\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"request\":"
                                  "{\"type\":\"string\"}},\"required\":[\"request\"]},\"limits\":{\"timeout_ms\":30000}}",
                                  nester, NULL, NULL),
              CLARA_OK);
    NEST("", "{\"tool\":\"echo\",\"arguments\":{\"a\":1}}",
         "{\"status\":\"success\",\"tool\":\"nester\",\"result\":{\"status\":\"success\",\"tool\":\"echo\",\"result\":{\"a\":1}}}");
    /* The request that called the tool denies echo: so does the nested one.
     * With clara_evaluate the tool would have escaped that policy. */
    NEST(",\"policy\":{\"deny\":[\"echo\"]}", "{\"tool\":\"echo\",\"arguments\":{\"a\":1}}",
         "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"echo\\\" denied by the policy of the request: its "
         "deny list names it\"}");
    /* Its own policy narrows, never widens. */
    NEST(",\"policy\":{\"allow\":[\"nester\"]}", "{\"tool\":\"echo\",\"arguments\":{},\"policy\":{\"allow\":[\"echo\"]}}",
         "\"error\":\"denied\"");
    /* The calling tool is on the call stack: denied at once. */
    NEST("", "{\"tool\":\"nester\",\"arguments\":{\"request\":\"{}\"}}",
         "it is already running on this call stack (nester → nester)");
    /* The tool's session, no other. */
    NEST("", "{\"tool\":\"echo\",\"session\":\"elsewhere\",\"arguments\":{}}", "\"error\":\"invalid_request\"");
    /* Nor may it end another (issue 25, finding 10). */
    NEST("", "{\"tool\":\"session_end\",\"arguments\":{\"session\":\"elsewhere\"}}",
         "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"session_end: a call made by a rule, a script, a tool or "
         "a model ends only its own session (\\\"n1\\\"), not \\\"elsewhere\\\"\"}");
    NEST("", "{\"tool\":\"echo\",\"async\":true,\"arguments\":{}}", "\"error\":\"invalid_request\"");
    NEST("", "{\"tool\":", "\"error\":\"invalid_json\"");
    CHECK_INT(clara_unregister_tool("nester"), CLARA_OK);
}

static void test_a_handle_after_its_call_gets_an_error(void) {
    char *r;
    CHECK_INT(clara_register_tool("{\"name\":\"keeper\"}", keeper, NULL, NULL), CLARA_OK);
    CHECK_ENVELOPE("{\"tool\":\"keeper\",\"arguments\":{}}", "{\"status\":\"success\",\"tool\":\"keeper\",\"result\":true}");
    CHECK(kept_call != NULL);
    r = clara_call_evaluate(kept_call, "{\"tool\":\"echo\",\"arguments\":{}}");
    CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"clara_call_evaluate: the clara_call "
                    "is not running");
    clara_free_string(r);
    r = clara_call_evaluate(NULL, "{\"tool\":\"echo\",\"arguments\":{}}");
    CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"invalid_request\"");
    clara_free_string(r);
    CHECK_INT(clara_unregister_tool("keeper"), CLARA_OK);
}

void tests_nested(void) {
    test_a_nested_request_inherits_the_calls_scope();
    test_a_handle_after_its_call_gets_an_error();
}
