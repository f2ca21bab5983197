/* test_lua.c - Lua seen from C: a tool declared in configuration (inline
 * and from a file) called end to end, a Lua tool calling a C tool, script
 * errors and timeouts, configuration errors that keep the configuration in
 * force, and Lua rules (a condition and an action) denying a C tool before
 * it runs. */
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

static void configure_ok(const char *test, int line, const char *config) {
    char *r = clara_configure(config);
    check_prefix(test, line, r, "{\"status\":\"success\"");
    clara_free_string(r);
}
#define CONFIGURE(config) configure_ok(__func__, __LINE__, (config))

/* clara_configure must fail with exactly this envelope. */
static void configure_fails(const char *test, int line, const char *config, const char *want) {
    char *r = clara_configure(config);
    check_str(test, line, r, want);
    clara_free_string(r);
}
#define CONFIGURE_FAILS(config, want) configure_fails(__func__, __LINE__, (config), (want))

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

/* A fresh start for each test: defaults, state in memory, no built-in rules
 * (their notices would join the error envelopes compared below). */
static void fresh(void) {
    clara_free_string(clara_reset());
    CONFIGURE("state_dir = \"\"\n[rules]\nbuiltin = false\n");
}

/* The example of SPEC §8, as a clara_configure TOML text. */
static const char word_count_toml[] =
    "[[tools]]\n"
    "name = \"word_count\"\n"
    "timeout_ms = 5000\n"
    "description = \"Count words\"\n"
    "input_schema = { type = \"object\", properties = { text = { type = \"string\" } }, required = [\"text\"] }\n"
    "lua = \"\"\"\n"
    "return function(args)\n"
    "  local n = 0\n"
    "  for _ in string.gmatch(args.text, \"%S+\") do n = n + 1 end\n"
    "  return { words = n }\n"
    "end\n"
    "\"\"\"\n";

static void test_lua_tool_end_to_end(void) {
    fresh();
    CONFIGURE(word_count_toml);
    CHECK_ENVELOPE("{\"tool\":\"word_count\",\"arguments\":{\"text\":\"a b c\"}}",
                   "{\"status\":\"success\",\"tool\":\"word_count\",\"result\":{\"words\":3}}");
    CHECK_ENVELOPE("{\"tool\":\"word_count\",\"id\":7,\"arguments\":{\"text\":\"  one\\ttwo\\n\"}}",
                   "{\"status\":\"success\",\"id\":7,\"tool\":\"word_count\",\"result\":{\"words\":2}}");
    /* The descriptor's schema is enforced before the script runs. */
    CHECK_ENVELOPE("{\"tool\":\"word_count\",\"arguments\":{\"text\":5}}",
                   "{\"status\":\"error\",\"error\":\"invalid_args\",\"message\":\"tool \\\"word_count\\\": arguments do "
                   "not match input_schema: at /text: got number, want string\",\"details\":[{\"pointer\":\"/text\","
                   "\"message\":\"got number, want string\"}]}");
    /* It is in the catalog like any other tool. */
    {
        char *r = clara_evaluate("{\"tool\":\"tools_list\"}");
        char *text = NULL;
        CHECK_INT(clara_json_get(r, "result.tools.#(name==\"word_count\").description", &text, NULL), CLARA_JSON_STRING);
        CHECK_STR(text, "Count words");
        clara_free_string(text);
        CHECK_INT(clara_json_get(r, "result.tools.#(name==\"word_count\").builtin", &text, NULL), CLARA_JSON_FALSE);
        clara_free_string(text);
        clara_free_string(r);
    }
    /* JSON configuration too; [[tools]] is an array: given again, it replaces. */
    CONFIGURE("{\"tools\":[{\"name\":\"reverse\",\"lua\":\"return function(a) return {text = string.reverse(a.text)} "
              "end\"}]}");
    CHECK_ENVELOPE("{\"tool\":\"reverse\",\"arguments\":{\"text\":\"abc\"}}",
                   "{\"status\":\"success\",\"tool\":\"reverse\",\"result\":{\"text\":\"cba\"}}");
    CHECK_ENVELOPE("{\"tool\":\"word_count\",\"arguments\":{\"text\":\"a\"}}",
                   "{\"status\":\"error\",\"error\":\"unknown_tool\",\"message\":\"Tool not found: word_count\"}");
    /* Reset drops Lua tools with the rest of the configuration. */
    fresh();
    CHECK_ENVELOPE("{\"tool\":\"reverse\",\"arguments\":{\"text\":\"abc\"}}",
                   "{\"status\":\"error\",\"error\":\"unknown_tool\",\"message\":\"Tool not found: reverse\"}");
}

static void test_lua_file_tool(void) {
    char dir[] = "/tmp/clara-lua-XXXXXX", path[256], config[512];
    FILE *f;
    fresh();
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/greet.lua", dir);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (f == NULL) return;
    fputs("-- a Lua tool in a file, relative to project_root\n"
          "return function(args)\n"
          "  return { greeting = \"hello \" .. args.name, n = #args.name }\n"
          "end\n",
          f);
    fclose(f);
    snprintf(config, sizeof config,
             "project_root = \"%s\"\n[[tools]]\nname = \"greet\"\nlua_file = \"greet.lua\"\n", dir);
    CONFIGURE(config);
    CHECK_ENVELOPE("{\"tool\":\"greet\",\"arguments\":{\"name\":\"Ada\"}}",
                   "{\"status\":\"success\",\"tool\":\"greet\",\"result\":{\"greeting\":\"hello Ada\",\"n\":3}}");
    /* A missing file is a configuration error; greet stays. */
    {
        char *r = clara_configure("[[tools]]\nname = \"greet\"\nlua_file = \"nope.lua\"\n");
        CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"clara_configure: 1:3: tools[0] "
                        "(greet): lua_file: open ");
        CHECK(r != NULL && strstr(r, "nope.lua: no such file or directory") != NULL);
        clara_free_string(r);
    }
    CHECK_ENVELOPE("{\"tool\":\"greet\",\"arguments\":{\"name\":\"Bo\"}}",
                   "{\"status\":\"success\",\"tool\":\"greet\",\"result\":{\"greeting\":\"hello Bo\",\"n\":2}}");
    fresh();
    CHECK_INT(unlink(path), 0);
    CHECK_INT(rmdir(dir), 0);
}

/* double_it: {"n": number} -> {"twice": 2n}; counts its calls. */
static int double_runs;

static int double_it(void *userdata, const char *args, clara_call *call) {
    char *n = NULL, out[64];
    (void)userdata;
    clara_json_get(args, "n", &n, NULL);
    snprintf(out, sizeof out, "{\"twice\":%g}", 2 * strtod(n ? n : "0", NULL));
    clara_free_string(n);
    __atomic_add_fetch(&double_runs, 1, __ATOMIC_SEQ_CST);
    clara_call_result(call, out);
    return 0;
}

static void test_lua_tool_calls_c_tool(void) {
    fresh();
    CHECK_INT(clara_register_tool("{\"name\":\"double_it\",\"input_schema\":{\"type\":\"object\",\"properties\":"
                                  "{\"n\":{\"type\":\"number\"}},\"required\":[\"n\"]}}",
                                  double_it, NULL, NULL),
              CLARA_OK);
    /* The C tool survives clara_configure; the Lua tool reaches it through
     * call_tool, the whole pipeline included (its schema here). */
    CONFIGURE("[[tools]]\nname = \"quadruple\"\nlua = '''\nreturn function(args)\n"
              "  local a = call_tool(\"double_it\", { n = args.n })\n"
              "  local b = call_tool(\"double_it\", { n = a.twice })\n"
              "  local ok, err = pcall(call_tool, \"double_it\", { n = \"x\" })\n"
              "  return { result = b.twice, bad_call_refused = not ok, encoded = json.encode({ b.twice }) }\n"
              "end\n'''\n");
    CHECK_ENVELOPE("{\"tool\":\"quadruple\",\"arguments\":{\"n\":5}}",
                   "{\"status\":\"success\",\"tool\":\"quadruple\",\"result\":{\"bad_call_refused\":true,"
                   "\"encoded\":\"[20]\",\"result\":20}}");
    CHECK_INT(__atomic_load_n(&double_runs, __ATOMIC_SEQ_CST), 2);
    /* A request's policy binds the calls the script makes. */
    {
        char *r = clara_evaluate("{\"tool\":\"quadruple\",\"arguments\":{\"n\":5},\"policy\":{\"deny\":[\"double_it\"]}}");
        CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"");
        CHECK(r != NULL && strstr(r, "denied") != NULL);
        clara_free_string(r);
    }
    CHECK_INT(__atomic_load_n(&double_runs, __ATOMIC_SEQ_CST), 2);
    CHECK_INT(clara_unregister_tool("double_it"), CLARA_OK);
    fresh();
}

static void test_lua_tool_errors_and_timeout(void) {
    double t0, elapsed;
    fresh();
    /* timeout_ms = 5000 where the test is not about the timeout: a run after
     * a failed one makes a new Lua state, which under valgrind on a busy
     * machine took more than the default 1000 ms. */
    CONFIGURE("[[tools]]\nname = \"boom\"\nlimits = { timeout_ms = 5000 }\nlua = 'return function(args) error(\"kaboom\") end'\n"
              "[[tools]]\nname = \"spin\"\nlimits = { timeout_ms = 100 }\n"
              "lua = 'return function(args) while true do end end'\n"
              "[[tools]]\nname = \"sneaky\"\nlimits = { timeout_ms = 100 }\n"
              "lua = 'return function(args) pcall(function() while true do end end) return \"escaped\" end'\n"
              "[[tools]]\nname = \"no_io\"\nlimits = { timeout_ms = 5000 }\nlua = 'return function(args) return io.open(\"/etc/passwd\") end'\n"
              "[[tools]]\nname = \"not_a_function\"\nlimits = { timeout_ms = 5000 }\nlua = 'return 42'\n"
              "[[tools]]\nname = \"ok\"\nlimits = { timeout_ms = 5000 }\nlua = 'return function(args) return { fine = true } end'\n");
    /* A script error is tool_failed with Lua's message. */
    CHECK_ENVELOPE("{\"tool\":\"boom\"}",
                   "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"lua: tool boom:1: kaboom\"}");
    CHECK_ENVELOPE("{\"tool\":\"not_a_function\"}",
                   "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"lua: tool not_a_function: a Lua tool "
                   "must return a function, got number\"}");
    /* The sandbox has no io. */
    CHECK_ENVELOPE("{\"tool\":\"no_io\"}",
                   "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"lua: tool no_io:1: attempt to index a "
                   "non-table object(nil) with key 'open'\"}");
    /* An endless loop ends at the tool's timeout_ms, and pcall cannot swallow it. */
    t0 = now_ms();
    CHECK_ENVELOPE("{\"tool\":\"spin\"}",
                   "{\"status\":\"error\",\"error\":\"timeout\",\"message\":\"tool \\\"spin\\\" ran past its deadline\"}");
    elapsed = now_ms() - t0;
    CHECK(elapsed >= 95 && elapsed < 3000);
    if (!(elapsed >= 95 && elapsed < 3000)) fprintf(stderr, "  timeout answered after %.0f ms\n", elapsed);
    CHECK_ENVELOPE("{\"tool\":\"sneaky\"}",
                   "{\"status\":\"error\",\"error\":\"timeout\",\"message\":\"tool \\\"sneaky\\\" ran past its deadline\"}");
    /* The host carries on: the same and other tools still work. */
    CHECK_ENVELOPE("{\"tool\":\"ok\"}", "{\"status\":\"success\",\"tool\":\"ok\",\"result\":{\"fine\":true}}");
    CHECK_ENVELOPE("{\"tool\":\"boom\"}",
                   "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"lua: tool boom:1: kaboom\"}");
    fresh();
}

static void test_config_errors_keep_old_config(void) {
    fresh();
    CONFIGURE(word_count_toml);
    /* A syntax error in the script. */
    {
        char *r = clara_configure("[[tools]]\nname = \"broken\"\nlua = 'return function( end'\n");
        CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"clara_configure: 1:3: tools[0] "
                        "(broken): lua line 1: syntax error");
        clara_free_string(r);
    }
    /* Neither lua nor lua_file, and both. */
    CONFIGURE_FAILS("[[tools]]\nname = \"empty\"\n",
                    "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"clara_configure: 1:3: tools[0]: give "
                    "one of lua (the script), lua_file (a file relative to project_root) or http (a table with url)\",\"details\":[{\"line\":1,\"col\":3,"
                    "\"message\":\"tools[0]: give one of lua (the script), lua_file (a file relative to project_root) or http (a "
                    "table with url)\"}]}");
    CONFIGURE_FAILS("[[tools]]\nname = \"both\"\nlua = 'return function() end'\nlua_file = \"x.lua\"\n",
                    "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"clara_configure: 1:3: tools[0]: give "
                    "one of lua (the script), lua_file (a file relative to project_root) or http (a table with url)\",\"details\":[{\"line\":1,\"col\":3,"
                    "\"message\":\"tools[0]: give one of lua (the script), lua_file (a file relative to project_root) or http (a "
                    "table with url)\"}]}");
    /* A built-in tool's name. */
    CONFIGURE_FAILS("[[tools]]\nname = \"echo\"\nlua = 'return function() return 1 end'\n",
                    "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"clara_configure: 1:3: tools[0] (echo): "
                    "\\\"echo\\\" is a built-in tool\",\"details\":[{\"line\":1,\"col\":3,\"message\":\"tools[0] (echo): \\\"echo\\\" is a built-in tool\"}]}");
    /* A bad entry spoils the whole call, the good keys with it. */
    {
        char *r = clara_configure("default_evaluator = \"get_time\"\n[[tools]]\nname = \"x\"\nlua = 'return ('\n");
        CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"invalid_request\"");
        clara_free_string(r);
    }
    /* Everything as before: word_count, the built-in echo, the evaluator. */
    CHECK_ENVELOPE("{\"tool\":\"word_count\",\"arguments\":{\"text\":\"still here\"}}",
                   "{\"status\":\"success\",\"tool\":\"word_count\",\"result\":{\"words\":2}}");
    CHECK_ENVELOPE("{\"tool\":\"echo\",\"arguments\":{\"a\":1}}",
                   "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{\"a\":1}}");
    CHECK_ENVELOPE("{\"q\":1}", "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{\"q\":1}}");
    CHECK_ENVELOPE("{\"tool\":\"broken\"}",
                   "{\"status\":\"error\",\"error\":\"unknown_tool\",\"message\":\"Tool not found: broken\"}");
    fresh();
}

/* sensor: records that it ran. */
static int sensor_runs;

static int sensor(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    (void)args;
    __atomic_add_fetch(&sensor_runs, 1, __ATOMIC_SEQ_CST);
    clara_call_result(call, "{\"celsius\":21}");
    return 0;
}

static void test_lua_rule_denies_c_tool(void) {
    fresh();
    CHECK_INT(clara_register_tool("{\"name\":\"sensor\",\"input_schema\":{\"type\":\"object\",\"properties\":"
                                  "{\"id\":{\"type\":\"integer\"}}}}",
                                  sensor, NULL, NULL),
              CLARA_OK);
    /* A Lua condition that denies. */
    LOAD_RULES("\"[rule]\\nid = \\\"maintenance\\\"\\ntrigger = \\\"on_tool_call\\\"\\ntimeout_ms = 5000\\n[condition]\\n"
               "lua = '''if ctx.tool.name == \\\"sensor\\\" and ctx.tool.arguments.id == 9 then "
               "deny(\\\"sensor \\\" .. ctx.tool.arguments.id .. \\\" is in maintenance\\\") return true end "
               "return false'''\\n[action]\\ntype = \\\"log\\\"\\nmessage = \\\"x\\\"\\n\"");
    CHECK_ENVELOPE("{\"tool\":\"sensor\",\"arguments\":{\"id\":1}}",
                   "{\"status\":\"success\",\"tool\":\"sensor\",\"result\":{\"celsius\":21}}");
    CHECK_INT(__atomic_load_n(&sensor_runs, __ATOMIC_SEQ_CST), 1);
    CHECK_ENVELOPE("{\"tool\":\"sensor\",\"arguments\":{\"id\":9}}",
                   "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"sensor\\\" denied by rule "
                   "\\\"maintenance\\\": sensor 9 is in maintenance\"}");
    CHECK_INT(__atomic_load_n(&sensor_runs, __ATOMIC_SEQ_CST), 1);
    /* Other tools pass. */
    CHECK_ENVELOPE("{\"tool\":\"echo\",\"arguments\":{\"id\":9}}",
                   "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{\"id\":9}}");

    /* A Lua action that denies (no condition: it decides itself). */
    LOAD_RULES("\"[rule]\\nid = \\\"lua_gate\\\"\\ntrigger = \\\"on_tool_call\\\"\\ntimeout_ms = 5000\\n[action]\\ntype = \\\"lua\\\"\\n"
               "lua = '''if ctx.tool.name == \\\"sensor\\\" then deny(\\\"maintenance\\\") end'''\\n\"");
    CHECK_ENVELOPE("{\"tool\":\"sensor\",\"arguments\":{\"id\":1}}",
                   "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"sensor\\\" denied by rule "
                   "\\\"lua_gate\\\": maintenance\"}");
    CHECK_INT(__atomic_load_n(&sensor_runs, __ATOMIC_SEQ_CST), 1);

    /* A Lua condition that fails (here: runs past its deadline) cannot
     * tell whether the call may go on: on on_tool_call its rule denies,
     * with the error, and the tool does not run (issue 25, finding 9). */
    LOAD_RULES("\"[rule]\\nid = \\\"stuck\\\"\\ntrigger = \\\"on_tool_call\\\"\\n[condition]\\n"
               "lua = '''while true do end'''\\n[action]\\ntype = \\\"deny\\\"\\nreason = \\\"never\\\"\\n\"");
    CHECK_ENVELOPE("{\"tool\":\"sensor\",\"arguments\":{\"id\":9}}",
                   "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"sensor\\\" denied by rule "
                   "\\\"stuck\\\": its condition could not be evaluated, and a rule on on_tool_call that cannot tell "
                   "refuses the call: lua: deadline of 50ms exceeded\"}");
    CHECK_INT(__atomic_load_n(&sensor_runs, __ATOMIC_SEQ_CST), 1);
    CHECK_INT(clara_unregister_tool("sensor"), CLARA_OK);
    fresh();
}

static void test_lua_rule_action_state_and_notice(void) {
    fresh();
    LOAD_RULES("\"[rule]\\nid = \\\"count\\\"\\ntrigger = \\\"order.placed\\\"\\ntimeout_ms = 5000\\n[condition]\\n"
               "lua = \\\"return ctx.order.total > 100\\\"\\n[action]\\ntype = \\\"lua\\\"\\n"
               "lua = '''local n = (state.get(\\\"big\\\") or 0) + 1\\nstate.set(\\\"big\\\", n)\\n"
               "notify(\\\"big order #\\\" .. n .. \\\": \\\" .. ctx.order.total, \\\"high\\\")'''\\n\"");
    char *r = clara_emit("{\"event\":\"order.placed\",\"session\":\"shop\",\"payload\":{\"order\":{\"total\":250}}}");
    /* The actions, in the order the script asked for them. */
    CHECK_STR(r, "{\"status\":\"success\",\"result\":{\"fired\":[{\"rule\":\"count\",\"actions\":[{\"key\":\"big\","
                 "\"type\":\"set_state\",\"value\":1},{\"message\":\"big order #1: 250\",\"priority\":\"high\","
                 "\"type\":\"notify_self\"}]}],\"notices\":[{\"rule\":\"count\",\"message\":\"big order #1: 250\","
                 "\"priority\":\"high\",\"event\":\"order.placed\"}],\"denied\":null}}");
    clara_free_string(r);
    r = clara_emit("{\"event\":\"order.placed\",\"session\":\"shop\",\"payload\":{\"order\":{\"total\":5}}}");
    CHECK_STR(r, "{\"status\":\"success\",\"result\":{\"fired\":[],\"notices\":[],\"denied\":null}}");
    clara_free_string(r);
    CHECK_ENVELOPE("{\"tool\":\"state_get\",\"session\":\"shop\",\"arguments\":{\"key\":\"big\"}}",
                   "{\"status\":\"success\",\"tool\":\"state_get\",\"result\":{\"key\":\"big\",\"found\":true,"
                   "\"value\":1}}");
    fresh();
}

/* Issue 25, finding 10: a Lua tool's call_tool("session_end", {session =
 * "jail"}) ended another session, and ending a session erased the policy
 * the host had narrowed it with. Now a nested call ends only its own
 * session, and a session's policy outlives its end (until clara_reset or
 * clear = ["session_policies"]). */
static void test_session_end_keeps_policy_and_nested_calls_end_only_their_own(void) {
    static const char jail_denied[] =
        "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"kv_set\\\" denied by the policy of session "
        "\\\"jail\\\": its deny list names it\"}";
    fresh();
    CONFIGURE("[[tools]]\nname = \"ender\"\n"
              "input_schema = { type = \"object\", properties = { session = { type = \"string\" } } }\n"
              "lua = 'return function(args) return call_tool(\"session_end\", { session = args.session }) end'\n");
    CHECK_ENVELOPE("{\"tool\":\"session_policy\",\"session\":\"jail\",\"arguments\":{\"deny\":[\"kv_set\"]}}",
                   "{\"status\":\"success\",\"tool\":\"session_policy\",\"result\":{\"session\":\"jail\",\"allow\":null,"
                   "\"deny\":[\"kv_set\"]}}");
    CHECK_ENVELOPE("{\"tool\":\"kv_set\",\"session\":\"jail\",\"arguments\":{\"key\":\"k\",\"value\":1}}", jail_denied);
    CHECK_ENVELOPE("{\"tool\":\"ender\",\"session\":\"w\",\"arguments\":{\"session\":\"jail\"}}",
                   "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"lua: tool ender:1: call_tool('session_end'): denied: "
                   "session_end: a call made by a rule, a script, a tool or a model ends only its own session "
                   "(\\\"w\\\"), not \\\"jail\\\"\"}");
    CHECK_ENVELOPE("{\"tool\":\"kv_set\",\"session\":\"jail\",\"arguments\":{\"key\":\"k\",\"value\":1}}", jail_denied);
    /* The host ends it: its data goes, its policy stays. */
    CHECK_ENVELOPE("{\"tool\":\"session_end\",\"arguments\":{\"session\":\"jail\"}}",
                   "{\"status\":\"success\",\"tool\":\"session_end\",\"result\":{\"session\":\"jail\",\"emitted\":"
                   "{\"fired\":[],\"notices\":[],\"denied\":null}}}");
    CHECK_ENVELOPE("{\"tool\":\"kv_set\",\"session\":\"jail\",\"arguments\":{\"key\":\"k\",\"value\":1}}", jail_denied);
    CONFIGURE("clear = [\"session_policies\"]\n");
    CHECK_ENVELOPE("{\"tool\":\"kv_set\",\"session\":\"jail\",\"arguments\":{\"key\":\"k\",\"value\":1}}",
                   "{\"status\":\"success\",\"tool\":\"kv_set\",\"result\":{\"key\":\"k\",\"created\":true}}");
    fresh();
}

void tests_lua(void) {
    test_lua_tool_end_to_end();
    test_lua_file_tool();
    test_lua_tool_calls_c_tool();
    test_lua_tool_errors_and_timeout();
    test_config_errors_keep_old_config();
    test_lua_rule_denies_c_tool();
    test_lua_rule_action_state_and_notice();
    test_session_end_keeps_policy_and_nested_calls_end_only_their_own();
}
