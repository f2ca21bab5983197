/* test_rules.c - rules seen from C: clara_emit end to end, notices in
 * tool-call envelopes, a deny rule blocking a C tool before it runs, and
 * rule state through the tools. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clara.h"
#include "harness.h"

/* Loads inline rules through the rules_load tool; checks it worked. */
static void load_rules(const char *test, int line, const char *toml_json_string) {
    char req[4096];
    snprintf(req, sizeof req, "{\"tool\":\"rules_load\",\"arguments\":{\"name\":\"t.toml\",\"toml\":%s}}",
             toml_json_string);
    char *r = clara_evaluate(req);
    check_prefix(test, line, r, "{\"status\":\"success\",\"tool\":\"rules_load\"");
    clara_free_string(r);
}
#define LOAD_RULES(toml) load_rules(__func__, __LINE__, (toml))

static void configure_ok(const char *test, int line, const char *config) {
    char *r = clara_configure(config);
    check_prefix(test, line, r, "{\"status\":\"success\"");
    clara_free_string(r);
}
#define CONFIGURE(config) configure_ok(__func__, __LINE__, (config))

/* A fresh start for each test: defaults, state in memory. */
static void fresh(void) {
    clara_free_string(clara_reset());
    CONFIGURE("state_dir = \"\"\n");
}

static void test_emit_end_to_end(void) {
    fresh();
    LOAD_RULES("\"[rule]\\nid = \\\"hot\\\"\\ntrigger = \\\"sensor.reading\\\"\\n"
               "[condition]\\nexpression = \\\"context.celsius > 30\\\"\\n"
               "[action]\\ntype = \\\"notify_self\\\"\\n"
               "message = \\\"{{ context.room | upper }} is at {{ context.celsius }} C\\\"\\n\"");
    char *r = clara_emit("{\"event\":\"sensor.reading\",\"session\":\"lab\",\"payload\":{\"room\":\"lab\",\"celsius\":31.5}}");
    CHECK_STR(r, "{\"status\":\"success\",\"result\":{\"fired\":[{\"rule\":\"hot\",\"actions\":[{\"message\":"
                 "\"LAB is at 31.5 C\",\"priority\":\"normal\",\"type\":\"notify_self\"}]}],\"notices\":[{\"rule\":"
                 "\"hot\",\"message\":\"LAB is at 31.5 C\",\"priority\":\"normal\",\"event\":\"sensor.reading\"}],"
                 "\"denied\":null}}");
    clara_free_string(r);

    /* Below the threshold nothing fires. */
    r = clara_emit("{\"event\":\"sensor.reading\",\"session\":\"lab\",\"payload\":{\"room\":\"lab\",\"celsius\":12}}");
    CHECK_STR(r, "{\"status\":\"success\",\"result\":{\"fired\":[],\"notices\":[],\"denied\":null}}");
    clara_free_string(r);

    /* The notice also waits in the session's queue, read once. */
    CHECK_ENVELOPE("{\"tool\":\"notifications_drain\",\"session\":\"lab\"}",
                   "{\"status\":\"success\",\"tool\":\"notifications_drain\",\"result\":{\"notices\":[{\"rule\":"
                   "\"hot\",\"message\":\"LAB is at 31.5 C\",\"priority\":\"normal\",\"event\":\"sensor.reading\"}],"
                   "\"dropped\":0}}");
    CHECK_ENVELOPE("{\"tool\":\"notifications_drain\",\"session\":\"lab\"}",
                   "{\"status\":\"success\",\"tool\":\"notifications_drain\",\"result\":{\"notices\":[],\"dropped\":0}}");

    /* trace: every candidate rule explained. */
    r = clara_emit("{\"event\":\"sensor.reading\",\"payload\":{\"celsius\":1},\"trace\":true}");
    char *text = NULL;
    size_t n = 0;
    CHECK_INT(clara_json_get(r, "result.trace.0.rule", &text, &n), CLARA_JSON_STRING);
    CHECK_STR(text, "hot");
    clara_free_string(text);
    CHECK_INT(clara_json_get(r, "result.trace.0.matched", &text, &n), CLARA_JSON_FALSE);
    clara_free_string(text);
    clara_free_string(r);
    fresh();
}

static void test_emit_errors(void) {
    fresh();
    char *r = clara_emit(NULL);
    CHECK_STR(r, "{\"status\":\"error\",\"error\":\"invalid_json\",\"message\":\"Invalid JSON: NULL input\"}");
    clara_free_string(r);
    r = clara_emit("{\"event\":");
    CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"invalid_json\"");
    clara_free_string(r);
    r = clara_emit("{\"event\":\"Bad Name\"}");
    CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"event \\\"Bad Name\\\"");
    clara_free_string(r);
    r = clara_emit("{\"event\":\"on_tool_complete\"}");
    CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"on_tool_complete is emitted");
    clara_free_string(r);
    r = clara_emit("{\"event\":\"x\",\"colour\":1}");
    CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"invalid_request\"");
    clara_free_string(r);
    /* An event nobody watches is fine. */
    r = clara_emit("{\"event\":\"nobody.listens\"}");
    CHECK_STR(r, "{\"status\":\"success\",\"result\":{\"fired\":[],\"notices\":[],\"denied\":null}}");
    clara_free_string(r);
}

static int guarded_runs;

static int guarded(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    (void)args;
    __atomic_add_fetch(&guarded_runs, 1, __ATOMIC_SEQ_CST);
    clara_call_result(call, "{\"opened\":true}");
    return 0;
}

static void test_deny_blocks_c_tool(void) {
    fresh();
    CHECK_INT(clara_register_tool("{\"name\":\"open_valve\",\"input_schema\":{\"type\":\"object\","
                                  "\"properties\":{\"valve\":{\"type\":\"integer\"}},\"required\":[\"valve\"]}}",
                                  guarded, NULL, NULL),
              CLARA_OK);
    LOAD_RULES("\"[rule]\\nid = \\\"no_valve_7\\\"\\ntrigger = \\\"on_tool_call\\\"\\n"
               "[condition]\\nexpression = \\\"context.tool.name == 'open_valve' and "
               "context.tool.arguments.valve == 7\\\"\\n"
               "[action]\\ntype = \\\"deny\\\"\\nreason = \\\"valve {{ context.tool.arguments.valve }} is "
               "locked\\\"\\n\"");
    CHECK_ENVELOPE("{\"tool\":\"open_valve\",\"arguments\":{\"valve\":3}}",
                   "{\"status\":\"success\",\"tool\":\"open_valve\",\"result\":{\"opened\":true}}");
    CHECK_INT(__atomic_load_n(&guarded_runs, __ATOMIC_SEQ_CST), 1);
    CHECK_ENVELOPE("{\"tool\":\"open_valve\",\"arguments\":{\"valve\":7}}",
                   "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"open_valve\\\" denied by "
                   "rule \\\"no_valve_7\\\": valve 7 is locked\"}");
    /* Deny comes before validation: even bad arguments get the rule's verdict
     * when the rule matches them... */
    LOAD_RULES("\"[rule]\\nid = \\\"no_valve_7\\\"\\ntrigger = \\\"on_tool_call\\\"\\n"
               "[condition]\\nexpression = \\\"context.tool.name == 'open_valve'\\\"\\n"
               "[action]\\ntype = \\\"deny\\\"\\nreason = \\\"maintenance\\\"\\n\"");
    CHECK_ENVELOPE("{\"tool\":\"open_valve\",\"arguments\":{\"valve\":\"seven\"}}",
                   "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"open_valve\\\" denied by "
                   "rule \\\"no_valve_7\\\": maintenance\"}");
    /* ...and the tool never ran. */
    CHECK_INT(__atomic_load_n(&guarded_runs, __ATOMIC_SEQ_CST), 1);
    CHECK_INT(clara_unregister_tool("open_valve"), CLARA_OK);
    fresh();
}

static int always_fails(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    (void)args;
    clara_call_error(call, "sensor offline");
    return 1;
}

static void test_repeated_failure_notice(void) {
    fresh();
    CHECK_INT(clara_register_tool("{\"name\":\"probe\"}", always_fails, NULL, NULL), CLARA_OK);
    const char *failed = "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"sensor offline\"}";
    CHECK_ENVELOPE("{\"tool\":\"probe\"}", failed);
    CHECK_ENVELOPE("{\"tool\":\"probe\"}", failed);
    /* The third failure in a row carries the built-in rule's notice. */
    CHECK_ENVELOPE("{\"tool\":\"probe\"}",
                   "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"sensor offline\",\"notices\":"
                   "[{\"rule\":\"repeated_failure\",\"message\":\"Tool probe failed 3 times in a row (last error: "
                   "tool_failed: sensor offline). Try something else.\",\"priority\":\"high\",\"event\":"
                   "\"on_tool_failure\"}]}");
    CHECK_ENVELOPE("{\"tool\":\"probe\"}", failed);
    CHECK_INT(clara_unregister_tool("probe"), CLARA_OK);
    fresh();
}

static void test_state_through_rules(void) {
    fresh();
    LOAD_RULES("\"[rule]\\nid = \\\"remember\\\"\\ntrigger = \\\"order.placed\\\"\\n"
               "[action]\\ntype = \\\"set_state\\\"\\nkey = \\\"last_order\\\"\\n"
               "value = \\\"{{ context.order }}\\\"\\n\"");
    char *r = clara_emit("{\"event\":\"order.placed\",\"session\":\"shop\",\"payload\":{\"order\":{\"id\":42}}}");
    CHECK_PREFIX(r, "{\"status\":\"success\",\"result\":{\"fired\":[{\"rule\":\"remember\"");
    clara_free_string(r);
    CHECK_ENVELOPE("{\"tool\":\"state_get\",\"session\":\"shop\",\"arguments\":{\"key\":\"last_order\"}}",
                   "{\"status\":\"success\",\"tool\":\"state_get\",\"result\":{\"key\":\"last_order\",\"found\":true,"
                   "\"value\":{\"id\":42}}}");
    CHECK_ENVELOPE("{\"tool\":\"state_get\",\"session\":\"other\",\"arguments\":{\"key\":\"last_order\"}}",
                   "{\"status\":\"success\",\"tool\":\"state_get\",\"result\":{\"key\":\"last_order\",\"found\":false}}");
    fresh();
}

void tests_rules(void) {
    test_emit_end_to_end();
    test_emit_errors();
    test_deny_blocks_c_tool();
    test_repeated_failure_notice();
    test_state_through_rules();
}
