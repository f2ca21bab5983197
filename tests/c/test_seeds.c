/* test_seeds.c - what the seeds promise of the C API (issue 32): seed
 * 002's AI.TOOL.LIMITS (clara_set_tool_limits), descriptors and limits
 * written as JSON5 as the seed writes them, clara_json5_to_json; seed
 * 004's Tier 1, rules whose condition and action are C functions
 * (clara_register_rule). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clara.h"
#include "harness.h"

static int get_time_calls;
static int freed_times;

/* get_time$ of the seed: the time, as a string. */
static int get_time(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    (void)args;
    __atomic_add_fetch(&get_time_calls, 1, __ATOMIC_SEQ_CST);
    clara_call_result(call, "\"2025-01-01T12:00:00\"");
    return 0;
}

static void free_time(void *p) {
    (void)p;
    __atomic_add_fetch(&freed_times, 1, __ATOMIC_SEQ_CST);
}

static char *call_get_time(void) { return clara_evaluate("{\"tool\":\"get_time_of_seed\"}"); }

/* AI.TOOL.REGISTER then AI.TOOL.LIMITS "get_time", "{ timeout_ms: 800,
 * rate_per_min: 20 }": the seed's option string as written; the limits
 * hold for the calls after the change, the others stay; the change is in
 * the audit; the tool's userdata is freed once, when it is unregistered. */
static void test_limits_after_registration(void) {
    char *r, *text = NULL;
    int i, limited = 0;
    int freed_before = freed_times;
    CHECK_INT(clara_register_tool("{\"name\":\"get_time_of_seed\",\"description\":\"Returns the current local time.\","
                                  "\"returns\":\"json\",\"limits\":{\"max_output_bytes\":4096}}",
                                  get_time, NULL, free_time),
              CLARA_OK);
    for (i = 0; i < 30; i++) {
        r = call_get_time();
        CHECK_PREFIX(r, "{\"status\":\"success\"");
        clara_free_string(r);
    }
    CHECK_INT(clara_set_tool_limits("get_time_of_seed", "{ timeout_ms: 800, rate_per_min: 20 }"), CLARA_OK);
    for (i = 0; i < 25; i++) {
        r = call_get_time();
        if (r != NULL && strstr(r, "\"error\":\"rate_limited\"") != NULL) limited++;
        clara_free_string(r);
    }
    CHECK_INT(limited, 5);
    /* What the tool says of itself now: the limits given, the one left out kept. */
    r = clara_evaluate("{\"tool\":\"tools_list\",\"arguments\":{\"llm_visible_only\":false}}");
    CHECK(r != NULL && strstr(r, "\"name\":\"get_time_of_seed\"") != NULL);
    CHECK(r != NULL && strstr(r, "\"limits\":{\"timeout_ms\":800,\"rate_per_min\":20,\"rate_scope\":\"tool\",\"max_output_bytes\":4096}") != NULL);
    clara_free_string(r);
    r = clara_evaluate("{\"tool\":\"audit_tail\",\"arguments\":{\"n\":30}}");
    CHECK(r != NULL && strstr(r, "\"tool\":\"tool_limits\"") != NULL);
    clara_free_string(r);
    CHECK_INT(freed_times, freed_before);
    CHECK_INT(clara_unregister_tool("get_time_of_seed"), CLARA_OK);
    CHECK_INT(freed_times, freed_before + 1);

    /* Bad limits change nothing; unknown tools and Clara's own are refused. */
    CHECK_INT(clara_register_tool("{name: 'get_time_of_seed', limits: {rate_per_min: 1}}", get_time, NULL, free_time), CLARA_OK);
    CHECK_INT(clara_set_tool_limits("get_time_of_seed", "{timeout_ms: -1}"), -CLARA_EINVAL);
    CHECK_INT(clara_set_tool_limits("get_time_of_seed", "{rate_per_minute: 5}"), -CLARA_EINVAL);
    CHECK_INT(clara_set_tool_limits("get_time_of_seed", "{timeout_ms: 800"), -CLARA_EINVAL);
    CHECK_INT(clara_set_tool_limits("get_time_of_seed", NULL), -CLARA_EINVAL);
    CHECK_INT(clara_set_tool_limits(NULL, "{}"), -CLARA_EINVAL);
    CHECK_INT(clara_set_tool_limits("no_such_tool", "{timeout_ms: 5}"), -CLARA_ENOENT);
    CHECK_INT(clara_set_tool_limits("echo", "{rate_per_min: 1}"), -CLARA_EPERM);
    r = call_get_time();
    CHECK_PREFIX(r, "{\"status\":\"success\"");
    clara_free_string(r);
    r = call_get_time();
    CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"rate_limited\"");
    clara_free_string(r);
    /* A policy that denies tool_limits stops the C call too. */
    clara_free_string(clara_configure("{\"policy\":{\"deny\":[\"tool_limits\"]}}"));
    CHECK_INT(clara_set_tool_limits("get_time_of_seed", "{rate_per_min: 100}"), -CLARA_EPERM);
    clara_free_string(clara_reset());
    CHECK_INT(freed_times, freed_before + 2);
    (void)text;
}

/* The seed's insert_clip descriptor, its schema written as the seed writes
 * it: bare keys, single quotes. */
static int insert_clip(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    (void)args;
    clara_call_result(call, "{\"ok\":true,\"clip_id\":7}");
    return 0;
}

static void test_json5_descriptor(void) {
    CHECK_INT(clara_register_tool("{\n"
                                  "  name: 'insert_clip', // the DAWG tool of seed 002\n"
                                  "  description: 'Insert a validated ClipSpec into the DAWG timeline.',\n"
                                  "  input_schema: {\n"
                                  "     type:'object',\n"
                                  "     properties:{\n"
                                  "       track:{type:'string'},\n"
                                  "       start_bar:{type:'integer', minimum:1},\n"
                                  "       spec:{type:'object'}\n"
                                  "     },\n"
                                  "     required:['track','start_bar','spec'],\n"
                                  "     additionalProperties:false\n"
                                  "   },\n"
                                  "  returns: 'json',\n"
                                  "}",
                                  insert_clip, NULL, NULL),
              CLARA_OK);
    CHECK_ENVELOPE("{\"tool\":\"insert_clip\",\"arguments\":{\"track\":\"Drums\",\"start_bar\":1,\"spec\":{}}}",
                   "{\"status\":\"success\",\"tool\":\"insert_clip\",\"result\":{\"ok\":true,\"clip_id\":7}}");
    CHECK_ENVELOPE("{\"tool\":\"insert_clip\",\"arguments\":{\"track\":\"Drums\",\"start_bar\":0,\"spec\":{}}}",
                   "{\"status\":\"error\",\"error\":\"invalid_args\",\"message\":\"tool \\\"insert_clip\\\": arguments do not match input_schema: at /start_bar: minimum: got 0, want 1\","
                   "\"details\":[{\"pointer\":\"/start_bar\",\"message\":\"minimum: got 0, want 1\"}]}");
    /* Neither JSON nor JSON5: refused, as before. */
    CHECK_INT(clara_register_tool("{name: 'broken',", insert_clip, NULL, NULL), -CLARA_EINVAL);
    CHECK_INT(clara_register_tool("{name: 'nan', limits: {timeout_ms: NaN}}", insert_clip, NULL, NULL), -CLARA_EINVAL);
    CHECK_INT(clara_unregister_tool("insert_clip"), CLARA_OK);
}

static void test_json5_to_json(void) {
    char *json = (char *)1;
    CHECK_INT(clara_json5_to_json("{ allow_tools:true, max_tool_calls:3, system:'You can call tools.', }", &json), CLARA_OK);
    CHECK_STR(json, "{\"allow_tools\":true,\"max_tool_calls\":3,\"system\":\"You can call tools.\"}");
    clara_free_string(json);
    CHECK_INT(clara_json5_to_json("[0x1F, +1, .5, 'it\\'s'] // done", &json), CLARA_OK);
    CHECK_STR(json, "[31,1,0.5,\"it's\"]");
    clara_free_string(json);
    CHECK_INT(clara_json5_to_json("{a: Infinity}", &json), -CLARA_EINVAL);
    CHECK_STR(json, "JSON5: Infinity has no JSON form");
    clara_free_string(json);
    CHECK_INT(clara_json5_to_json("{a:", &json), -CLARA_EINVAL);
    CHECK(json != NULL && strncmp(json, "JSON5: ", 7) == 0);
    clara_free_string(json);
    CHECK_INT(clara_json5_to_json(NULL, &json), -CLARA_EINVAL);
    CHECK(json == NULL);
    CHECK_INT(clara_json5_to_json("{}", NULL), -CLARA_EINVAL);
}

/* Seed 004's Tier 1:
 *   plugin.registerRule({ condition: () => true, action: () => console.log('Hello!') });
 * in C: a condition that says yes, an action that does its own thing. */
static int hellos, rule_frees;

static int always(void *userdata, const char *event_json) {
    (void)userdata;
    (void)event_json;
    return 1;
}

static char *say_hello(void *userdata, const char *event_json) {
    (void)event_json;
    __atomic_add_fetch((int *)userdata, 1, __ATOMIC_SEQ_CST); /* console.log('Hello!') */
    return NULL;
}

static void free_rule(void *userdata) {
    (void)userdata;
    __atomic_add_fetch(&rule_frees, 1, __ATOMIC_SEQ_CST);
}

/* A guard: payments over 100 are denied, the amount read from the event. */
static int over_limit(void *userdata, const char *event_json) {
    char *amount = NULL;
    int kind = clara_json_get(event_json, "context.tool.arguments.amount", &amount, NULL);
    int over = (kind == CLARA_JSON_INTEGER || kind == CLARA_JSON_FLOAT) && atof(amount) > *(double *)userdata;
    clara_free_string(amount);
    if (kind == CLARA_JSON_STRING) return -1; /* cannot tell */
    return over;
}

static char *deny_payment(void *userdata, const char *event_json) {
    char *session = NULL, out[256];
    (void)userdata;
    clara_json_get(event_json, "session", &session, NULL);
    snprintf(out, sizeof out, "[{\"type\":\"deny\",\"reason\":\"over the limit\"},"
             "{\"type\":\"notify_self\",\"message\":\"payment refused in %s\",\"priority\":\"high\"}]", session);
    clara_free_string(session);
    return strdup(out);
}

static int echo_pay(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    clara_call_result(call, args);
    return 0;
}

static void *pay_from_thread(void *arg) {
    int *denied = arg;
    for (int i = 0; i < scaled(200); i++) {
        char *r = clara_evaluate(i % 2 ? "{\"tool\":\"pay\",\"arguments\":{\"amount\":500}}"
                                       : "{\"tool\":\"pay\",\"arguments\":{\"amount\":5}}");
        if (r != NULL && strstr(r, "\"error\":\"denied\"") != NULL) (*denied)++;
        clara_free_string(r);
    }
    return NULL;
}

static void test_register_rule(void) {
    char *r;
    clara_free_string(clara_reset());
    clara_free_string(clara_configure("state_dir = \"\"\n[rules]\nbuiltin = true\n"));
    hellos = rule_frees = 0;
    CHECK_INT(clara_register_rule("{\"id\":\"hello\",\"trigger\":\"on_turn_start\"}", always, say_hello, &hellos, free_rule),
              CLARA_OK);
    r = clara_emit("{\"event\":\"on_turn_start\",\"payload\":{\"turn\":{\"token_usage\":0.1}}}");
    CHECK_STR(r, "{\"status\":\"success\",\"result\":{\"fired\":[{\"rule\":\"hello\",\"actions\":[]}],\"notices\":[],\"denied\":null}}");
    clara_free_string(r);
    CHECK_INT(hellos, 1);

    static double limit = 100;
    CHECK_INT(clara_register_tool("{\"name\":\"pay\",\"input_schema\":{\"type\":\"object\"}}", echo_pay, NULL, NULL), CLARA_OK);
    CHECK_INT(clara_register_rule("{id: 'big-payments', trigger: 'on_tool_call', priority: 10}", over_limit, deny_payment, &limit,
                                  free_rule),
              CLARA_OK);
    CHECK_ENVELOPE("{\"tool\":\"pay\",\"arguments\":{\"amount\":5}}",
                   "{\"status\":\"success\",\"tool\":\"pay\",\"result\":{\"amount\":5}}");
    CHECK_ENVELOPE("{\"tool\":\"pay\",\"session\":\"shop\",\"arguments\":{\"amount\":500}}",
                   "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"pay\\\" denied by rule \\\"big-payments\\\": over the limit\","
                   "\"notices\":[{\"rule\":\"big-payments\",\"message\":\"payment refused in shop\",\"priority\":\"high\",\"event\":\"on_tool_call\"}]}");
    /* A condition that cannot tell denies the call (on_tool_call fails closed). */
    r = clara_evaluate("{\"tool\":\"pay\",\"arguments\":{\"amount\":\"lots\"}}");
    CHECK(r != NULL && strstr(r, "\"error\":\"denied\"") != NULL &&
          strstr(r, "the host's condition could not tell (it returned -1)") != NULL);
    clara_free_string(r);

    /* From several threads at once. */
    pthread_t th[4];
    int denied[4] = {0};
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, pay_from_thread, &denied[i]);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) CHECK_INT(denied[i], scaled(200) / 2);

    /* The rules of the configuration's ids are not the host's. */
    CHECK_INT(clara_register_rule("{\"id\":\"token_budget\",\"trigger\":\"x\"}", always, say_hello, &hellos, free_rule),
              -CLARA_EPERM);
    CHECK_INT(clara_register_rule("{\"id\":\"no-action\",\"trigger\":\"x\"}", always, NULL, NULL, free_rule), -CLARA_EINVAL);
    CHECK_INT(clara_register_rule(NULL, always, say_hello, NULL, free_rule), -CLARA_EINVAL);
    CHECK_INT(rule_frees, 3); /* a refused registration frees too */
    CHECK_INT(clara_unregister_rule("token_budget"), -CLARA_EPERM);
    CHECK_INT(clara_unregister_rule(NULL), -CLARA_EINVAL);

    /* Replacing, unregistering and clara_reset free once each. */
    CHECK_INT(clara_register_rule("{\"id\":\"hello\",\"trigger\":\"on_turn_end\"}", NULL, say_hello, &hellos, free_rule),
              CLARA_OK);
    CHECK_INT(rule_frees, 4);
    CHECK_INT(clara_unregister_rule("hello"), CLARA_OK);
    CHECK_INT(rule_frees, 5);
    CHECK_INT(clara_unregister_rule("hello"), -CLARA_ENOENT);
    clara_free_string(clara_reset());
    CHECK_INT(rule_frees, 6);
    r = clara_evaluate("{\"tool\":\"rules_list\",\"arguments\":{\"trigger\":\"on_tool_call\"}}");
    CHECK(r != NULL && strstr(r, "\"result\":{\"rules\":[]") != NULL);
    clara_free_string(r);
    clara_unregister_tool("pay");
}

void tests_seeds(void) {
    test_limits_after_registration();
    test_json5_descriptor();
    test_json5_to_json();
    test_register_rule();
}
