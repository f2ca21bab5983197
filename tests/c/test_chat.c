/* test_chat.c - the chat tool from C: a C tool called by the model, the
 * event handler, the evaluator, against tests/llmserver (the scripted
 * provider) started as a process. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clara.h"
#include "harness.h"

struct server {
    pid_t pid;
    int in; /* the child's stdin: closing it stops the server */
    char url[128];
};

/* Starts build/llmserver on tests/llm; 0 when it runs. */
static int server_start(struct server *s) {
    int to_child[2], from_child[2];
    FILE *out;
    if (pipe(to_child) != 0 || pipe(from_child) != 0) return -1;
    s->pid = fork();
    if (s->pid < 0) return -1;
    if (s->pid == 0) {
        dup2(to_child[0], 0);
        dup2(from_child[1], 1);
        freopen("build/llmserver-harness.log", "w", stderr); /* its reports; the exit status judges */
        close(to_child[1]);
        close(from_child[0]);
        execl("build/llmserver", "llmserver", "tests/llm", (char *)NULL);
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    s->in = to_child[1];
    out = fdopen(from_child[0], "r");
    if (out == NULL || fgets(s->url, sizeof s->url, out) == NULL) return -1;
    s->url[strcspn(s->url, "\n")] = '\0';
    fclose(out);
    return strncmp(s->url, "http://127.0.0.1:", 17) == 0 ? 0 : -1;
}

/* Stops the server; its exit status says whether every request met its
 * script. */
static int server_stop(struct server *s) {
    int status = 0;
    close(s->in);
    if (waitpid(s->pid, &status, 0) != s->pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int weather(void *userdata, const char *arguments_json, clara_call *call) {
    (void)userdata;
    if (strstr(arguments_json, "Boston") == NULL) {
        clara_call_error(call, "unknown place");
        return 0;
    }
    clara_call_result(call, "{\"location\":\"Boston, MA\",\"temperature\":\"22\",\"unit\":\"celsius\"}");
    return 0;
}

static pthread_mutex_t events_mu = PTHREAD_MUTEX_INITIALIZER;
static char events[4096];

static void on_event(void *userdata, const char *event_json) {
    (void)userdata;
    pthread_mutex_lock(&events_mu);
    if (strlen(events) + strlen(event_json) + 2 < sizeof events) {
        strcat(events, event_json);
        strcat(events, "\n");
    }
    pthread_mutex_unlock(&events_mu);
}

static void configure_ok(const char *text) {
    char *r = clara_configure(text);
    CHECK_PREFIX(r, "{\"status\":\"success\"");
    clara_free_string(r);
}

static void test_chat_calls_a_c_tool(struct server *s) {
    char config[512], *r;
    setenv("CLARA_TEST_OPENAI_KEY", "sk-from-the-environment", 1);
    snprintf(config, sizeof config,
             "[llm]\nprovider = \"openai\"\nbase_url = \"%s/openai_weather\"\nmodel = \"gpt-4o-mini\"\n"
             "api_key_env = \"CLARA_TEST_OPENAI_KEY\"\n",
             s->url);
    configure_ok(config);
    CHECK_INT(clara_register_tool("{\"name\":\"get_current_weather\",\"description\":\"Get the current weather in a given "
                                  "location\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"location\":{\"type\":"
                                  "\"string\"}},\"required\":[\"location\"]}}",
                                  weather, NULL, NULL),
              CLARA_OK);
    events[0] = '\0';
    clara_set_event_handler(on_event, NULL);
    r = clara_evaluate("{\"tool\":\"chat\",\"session\":\"c1\",\"arguments\":{\"prompt\":\"What is the weather like in "
                       "Boston today?\",\"allow_tools\":true,\"tools\":[\"get_current_weather\"],\"max_tool_calls\":3}}");
    clara_set_event_handler(NULL, NULL);
    CHECK_PREFIX(r, "{\"status\":\"success\",\"tool\":\"chat\",\"result\":{\"content\":\"It is 22 degrees Celsius and "
                    "sunny in Boston today.\",\"tool_calls\":[{\"name\":\"get_current_weather\",\"arguments\":{\"location\":"
                    "\"Boston, MA\"},\"status\":\"success\"");
    CHECK(r != NULL && strstr(r, "sk-from-the-environment") == NULL);
    clara_free_string(r);
    CHECK(strstr(events, "{\"event\":\"tool_call\",\"tool\":\"get_current_weather\"") != NULL);
    CHECK(strstr(events, "{\"event\":\"answer\",\"text\":\"It is 22 degrees") != NULL);
    CHECK(strstr(events, "\"session\":\"c1\"") != NULL);
}

/* The input handler: answers from userdata (NULL declines), keeps the
 * request it got. */
static char input_request[512];

static char *on_input(void *userdata, const char *request_json) {
    snprintf(input_request, sizeof input_request, "%s", request_json);
    return userdata != NULL ? strdup((const char *)userdata) : NULL;
}

static void test_ask_user(struct server *s) {
    char config[512], *r, *id = NULL;
    snprintf(config, sizeof config, "[llm]\nprovider = \"openai\"\nbase_url = \"%s/ask_user_answer\"\nmodel = \"test-model\"\n",
             s->url);
    configure_ok(config);
    /* No handler: a clear error. */
    r = clara_evaluate("{\"tool\":\"ask_user\",\"arguments\":{\"prompt\":\"Which city?\"}}");
    CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"tool_failed\",\"message\":\"ask_user: no input handler is installed");
    clara_free_string(r);

    events[0] = '\0';
    input_request[0] = '\0';
    clara_set_event_handler(on_event, NULL);
    clara_set_input_handler(on_input, "Boston");
    r = clara_evaluate("{\"tool\":\"chat\",\"session\":\"c2\",\"arguments\":{\"prompt\":\"Find out which city the user "
                       "means.\",\"allow_tools\":true,\"tools\":[\"ask_user\"],\"result_schema\":{\"type\":\"object\","
                       "\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}");
    clara_set_event_handler(NULL, NULL);
    CHECK_PREFIX(r, "{\"status\":\"success\",\"tool\":\"chat\",\"result\":{\"content\":\"The user means Boston.\","
                    "\"result\":{\"city\":\"Boston\"},\"tool_calls\":[{\"name\":\"ask_user\"");
    clara_free_string(r);
    CHECK(strstr(input_request, "\"prompt\":\"Which city?\",\"session\":\"c2\"}") != NULL);
    CHECK_INT(clara_json_get(input_request, "id", &id, NULL), CLARA_JSON_INTEGER);
    if (id != NULL) {
        char want[64];
        snprintf(want, sizeof want, "{\"event\":\"input_required\",\"id\":%s,", id);
        CHECK(strstr(events, want) != NULL);
        clara_free_string(id);
    }
    /* NULL declines. */
    clara_set_input_handler(on_input, NULL);
    CHECK_ENVELOPE("{\"tool\":\"ask_user\",\"arguments\":{\"prompt\":\"Sure?\"}}",
                   "{\"status\":\"success\",\"tool\":\"ask_user\",\"result\":{\"declined\":true}}");
    clara_set_input_handler(NULL, NULL);
}

/* explain_weather runs a nested chat inside its call (seed 003's task()
 * inside a tool) and answers with the model's content. */
static int explain_weather(void *userdata, const char *arguments_json, clara_call *call) {
    char *envelope, *content = NULL;
    (void)userdata;
    (void)arguments_json;
    envelope = clara_call_evaluate(call, "{\"tool\":\"chat\",\"arguments\":{\"prompt\":\"Explain the weather in Boston "
                                         "to a child.\",\"allow_tools\":true,\"tools\":[\"get_current_weather\","
                                         "\"explain_weather\"],\"max_tool_calls\":2}}");
    if (clara_json_get(envelope, "result.content", &content, NULL) != CLARA_JSON_STRING) {
        clara_call_error(call, envelope);
    } else {
        clara_call_result(call, content);
    }
    clara_free_string(content);
    clara_free_string(envelope);
    return 0;
}

/* The nested chat never offers the calling tool (the model asks for it and
 * is told it does not exist); under a request that denies the weather, it
 * offers nothing (tests/llm/nested_chat.toml checks both). */
static void test_a_c_tool_runs_a_nested_chat(struct server *s) {
    char config[512];
    snprintf(config, sizeof config, "[llm]\nbase_url = \"%s/nested_chat\"\nmodel = \"gpt-4o-mini\"\n", s->url);
    configure_ok(config);
    CHECK_INT(clara_register_tool("{\"name\":\"explain_weather\",\"returns\":\"string\",\"limits\":{\"timeout_ms\":30000}}",
                                  explain_weather, NULL, NULL),
              CLARA_OK);
    CHECK_ENVELOPE("{\"tool\":\"explain_weather\",\"arguments\":{}}",
                   "{\"status\":\"success\",\"tool\":\"explain_weather\",\"result\":\"It is warm and sunny in Boston.\"}");
    CHECK_ENVELOPE("{\"tool\":\"explain_weather\",\"arguments\":{},\"policy\":{\"deny\":[\"get_current_weather\"]}}",
                   "{\"status\":\"success\",\"tool\":\"explain_weather\",\"result\":\"I cannot look the weather up.\"}");
    CHECK_INT(clara_unregister_tool("explain_weather"), CLARA_OK);
}

static void test_evaluator_from_the_simple_form(struct server *s) {
    char config[512];
    snprintf(config, sizeof config, "default_evaluator = \"evaluate\"\n[evaluator]\nurl = \"%s/evaluator/evaluate\"\n",
             s->url);
    configure_ok(config);
    CHECK_ENVELOPE("{\"question\":\"Is 7 prime?\"}",
                   "{\"status\":\"success\",\"tool\":\"evaluate\",\"result\":{\"answer\":true,\"confidence\":0.99}}");
}

void tests_chat(void) {
    struct server s;
    if (server_start(&s) != 0) {
        CHECK(!"build/llmserver started and printed its URL");
        return;
    }
    test_chat_calls_a_c_tool(&s);
    test_ask_user(&s);
    test_a_c_tool_runs_a_nested_chat(&s);
    test_evaluator_from_the_simple_form(&s);
    clara_free_string(clara_reset());
    /* openai_weather served in full and as scripted; the other scripts
     * only as far as they were used (no -complete). */
    CHECK_INT(server_stop(&s), 0);
}
