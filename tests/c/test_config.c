/* test_config.c - clara_configure, clara_reset and the log handler. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clara.h"
#include "harness.h"

/* The configuration as Clara reports it; the parts tests change are macros. */
#define CONFIG(evaluator, depth)                                                                              \
    "{\"async\":{\"max_pending\":10000,\"max_running\":1000},\"audit\":{\"compress\":false,\"decision_ids\":false,\"max_age_days\":0,\"max_backups\":0,\"max_size_mb\":0,\"path\":\"\"},\"callback_tools\":{\"models\":false,\"panel_bytes\":2048,\"run_model_scripts\":false},\"callbacks\":[],\"default_evaluator\":\"" evaluator "\",\"doc_search\":{\"max_file_bytes\":1048576,\"max_files\":10000,\"patterns\":[\"**/*.md\"],\"watch\":true},\"evaluator\":{\"timeout_ms\":30000,\"url\":\"\"},\"kv\":{\"max_bytes\":16777216,\"max_keys\":10000,\"max_total_bytes\":67108864,\"max_total_keys\":100000},\"limits\":{\"max_calls_per_chat\":0,\"max_calls_per_session\":0,\"max_depth\":" depth                   \
    ",\"max_open_approvals\":64,\"max_open_questions\":64,\"max_output_bytes\":65536,\"max_overdue_calls\":64,\"max_request_bytes\":16777216,\"max_tool_calls\":20,\"max_turns\":10,\"timeout_ms\":1000},"  \
    "\"llm\":{\"api_key_env\":\"\",\"app_title\":\"Clara\",\"app_url\":\"\",\"base_url\":\"\",\"context_window\":0,\"embedding_model\":\"\",\"max_history_messages\":100,\"max_response_bytes\":4194304,\"max_retries\":2,\"max_tokens\":0,\"model\":\"\",\"provider\":\"\",\"timeout_ms\":60000},\"log\":{\"format\":\"text\"},\"mcp\":{\"allow_remote\":false,\"list_ttl_ms\":5000,\"max_calls\":64,\"max_sessions\":100,\"max_waiting_calls\":256,\"session_idle_timeout_ms\":1800000,\"task_after_ms\":2000,\"task_ttl_ms\":3600000,\"token_env\":\"\",\"wait_timeout_ms\":600000},\"mcp_servers\":[],\"network\":{\"allow_hosts\":[]},\"notices\":{\"dedupe_window_ms\":60000},"                                   \
    "\"plugins\":{\"paths\":[\".clara/plugins/*\"]},\"policy\":{\"admin_in_nested_calls\":false,\"allow\":[],\"approval_timeout_ms\":120000,\"deny\":[]},"                                             \
    "\"project_root\":\".\",\"prompts\":[],\"resources\":[],\"rules\":{\"builtin\":true,\"max_emissions\":1000,\"mode\":\"enforce\",\"paths\":[\".clara/rules/*.toml\"],\"redact_secrets\":false,"              \
    "\"thresholds\":{\"iteration_budget\":25,\"large_result_bytes\":32768,\"repeated_failures\":3,\"token_budget\":0.8},"   \
    "\"watch\":true,\"watch_admin_tools\":false},\"state_dir\":\".clara\"," \
    "\"store\":{\"backend\":\"sqlite\",\"conversation_retention_hours\":720,\"on_unavailable\":{\"approvals\":\"fail\",\"conversations\":\"fail\",\"limits\":\"fail\",\"notices\":\"local\",\"state\":\"fail\"},\"pool_size\":8,\"statement_timeout_ms\":2000,\"url_env\":\"CLARA_DATABASE_URL\"}," \
    "\"telemetry\":{\"content\":false,\"enabled\":false,\"endpoint\":\"\",\"logs\":true,\"metric_interval_ms\":60000,\"metrics\":true,\"service_name\":\"\",\"traces\":true},\"test_mode\":false,\"tools\":[]}"
#define DEFAULT_CONFIG CONFIG("echo", "512")

static void check_config_envelope(const char *test, int line, char *r, const char *want) {
    check_str(test, line, r, want);
    clara_free_string(r);
}
#define CHECK_CONFIG(call, want) check_config_envelope(__func__, __LINE__, (call), (want))

static void test_configure_toml_and_json(void) {
    CHECK_CONFIG(clara_configure("default_evaluator = \"get_time\"\n[limits]\nmax_depth = 4\n"),
                 "{\"status\":\"success\",\"result\":{\"config\":" CONFIG("get_time", "4") "}}");
    CHECK_ENVELOPE("{\"a\":[[[[1]]]]}",
                   "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"request nests deeper than "
                   "limits.max_depth (4) at byte 8\"}");
    CHECK_CONFIG(clara_configure("{\"default_evaluator\":\"echo\"}"),
                 "{\"status\":\"success\",\"result\":{\"config\":" CONFIG("echo", "4") "}}");
    CHECK_CONFIG(clara_reset(), "{\"status\":\"success\",\"result\":{\"config\":" DEFAULT_CONFIG "}}");
}

static void test_configure_errors_apply_nothing(void) {
    CHECK_CONFIG(clara_configure("default_evaluator = \"get_time\"\nlimts = {}\n"),
                 "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"clara_configure: 2:1: unknown key "
                 "\\\"limts\\\"\",\"details\":[{\"line\":2,\"col\":1,\"message\":\"unknown key \\\"limts\\\"\"}]}");
    CHECK_ENVELOPE("{\"q\":1}", "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{\"q\":1}}");
    CHECK_CONFIG(clara_configure(NULL),
                 "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"clara_configure: NULL input\"}");
    {
        char *r = clara_configure("[limits\n");
        CHECK_PREFIX(r, "{\"status\":\"error\",\"error\":\"invalid_request\",\"message\":\"clara_configure: 1:8: expected ']' to close table name\",\"details\":[{\"line\":1,\"col\":8,");
        clara_free_string(r);
    }
}

/* The log handler gets messages from any thread; this one keeps them. */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[4096];
static int log_calls;

static void keep_log(void *userdata, int level, const char *message) {
    pthread_mutex_lock(&log_mu);
    log_calls++;
    if (userdata == (void *)log_text && level == CLARA_LOG_DEBUG && strlen(log_text) + strlen(message) + 2 < sizeof log_text) {
        strcat(log_text, message);
        strcat(log_text, "\n");
    }
    pthread_mutex_unlock(&log_mu);
}

static void test_log_handler(void) {
    int calls;
    clara_set_log_handler(keep_log, log_text, CLARA_LOG_DEBUG);
    CHECK_ENVELOPE("{\"tool\":\"nope\"}", "{\"status\":\"error\",\"error\":\"unknown_tool\",\"message\":\"Tool not found: nope\"}");
    pthread_mutex_lock(&log_mu);
    /* The code, never the message: a message may quote the arguments. */
    CHECK(strstr(log_text, "call of \"nope\" failed: unknown_tool\n") != NULL || strstr(log_text, "call of \"nope\" failed: unknown_tool") != NULL);
    CHECK(strstr(log_text, "Tool not found") == NULL);
    pthread_mutex_unlock(&log_mu);

    /* Above the message's level: nothing. */
    clara_set_log_handler(keep_log, log_text, CLARA_LOG_WARN);
    pthread_mutex_lock(&log_mu);
    calls = log_calls;
    pthread_mutex_unlock(&log_mu);
    CHECK_ENVELOPE("{\"tool\":\"nope\"}", "{\"status\":\"error\",\"error\":\"unknown_tool\",\"message\":\"Tool not found: nope\"}");
    pthread_mutex_lock(&log_mu);
    CHECK_INT(log_calls, calls);
    pthread_mutex_unlock(&log_mu);

    /* NULL restores the default; the old handler is never called again. */
    clara_set_log_handler(NULL, NULL, CLARA_LOG_DEBUG);
    CHECK_ENVELOPE("{\"tool\":\"nope\"}", "{\"status\":\"error\",\"error\":\"unknown_tool\",\"message\":\"Tool not found: nope\"}");
    pthread_mutex_lock(&log_mu);
    CHECK_INT(log_calls, calls);
    pthread_mutex_unlock(&log_mu);
}

/* Runs this harness again as a child with CLARA_CONFIG=config (and
 * CLARA_CONFIG_ON_ERROR=on_error unless NULL), evaluating reqs in turn;
 * its answers, one a line, go into out. 0 when it ran. */
static int child_answers(const char *config, const char *on_error, const char *const *reqs, int n, char *out, size_t size) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        const char *argv[16] = {"harness", "--evaluate"};
        for (int i = 0; i < n && i < 13; i++) argv[2 + i] = reqs[i];
        dup2(fds[1], 1);
        close(fds[0]);
        setenv("CLARA_CONFIG", config, 1);
        if (on_error != NULL) setenv("CLARA_CONFIG_ON_ERROR", on_error, 1);
        else unsetenv("CLARA_CONFIG_ON_ERROR");
        unsetenv("CLARA_LOG");
        freopen("/dev/null", "w", stderr); /* the start-up configuration's error */
        execv(harness_self, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0;
    ssize_t got;
    while (len + 1 < size && (got = read(fds[0], out + len, size - 1 - len)) > 0) len += (size_t)got;
    out[len] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f == NULL) return;
    fputs(text, f);
    fclose(f);
}

/* Issue 26 §2: with CLARA_CONFIG naming a file whose policy denies echo,
 * a typo in one of its rule files made the library log "CLARA_CONFIG
 * ignored" and serve echo. Now every call is refused with invalid_config,
 * the rule file's problem positioned in details, clara_reset too while
 * the file stays broken; CLARA_CONFIG_ON_ERROR=defaults is the way back
 * to the old behaviour. */
static void test_broken_start_up_configuration_fails_closed(void) {
    char dir[] = "/tmp/clara-startup-XXXXXX", path[256], rules[256], config[256], out[16384];
    const char *reqs[] = {"{\"tool\":\"echo\",\"arguments\":{\"x\":1}}", "{\"tool\":\"get_time\"}", "reset",
                          "{\"tool\":\"echo\",\"arguments\":{\"x\":1}}"};
    if (mkdtemp(dir) == NULL) {
        CHECK(!"mkdtemp");
        return;
    }
    snprintf(rules, sizeof rules, "%s/rules", dir);
    mkdir(rules, 0755);
    snprintf(config, sizeof config, "%s/clara.toml", dir);
    {
        char text[512];
        snprintf(text, sizeof text, "[policy]\ndeny = [\"echo\"]\n[rules]\npaths = [\"%s/*.toml\"]\n", rules);
        write_text(config, text);
    }
    snprintf(path, sizeof path, "%s/rules/typo.toml", dir);
    write_text(path, "[rule]\nid = \"quiet\"\ntrigger = \"t\"\n[acton]\ntype = \"log\"\n");

    CHECK_INT(child_answers(config, NULL, reqs, 4, out, sizeof out), 0);
    /* Four answers, each the refusal, naming the rule file's line. */
    char want[512];
    snprintf(want, sizeof want, "\"details\":[{\"file\":\"%s\",\"line\":4,\"col\":2,\"message\":\"unknown key \\\"acton\\\"\"}]}", path);
    int refused = 0;
    for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        CHECK_PREFIX(line, "{\"status\":\"error\",\"error\":\"invalid_config\",\"message\":\"the start-up configuration (CLARA_CONFIG=");
        CHECK(strstr(line, want) != NULL);
        refused++;
    }
    CHECK_INT(refused, 4);

    /* The opt-out: the defaults, echo served. */
    CHECK_INT(child_answers(config, "defaults", reqs, 1, out, sizeof out), 0);
    CHECK_STR(out, "{\"status\":\"success\",\"tool\":\"echo\",\"result\":{\"x\":1}}\n");

    /* Fixed, the file's policy holds. */
    write_text(path, "[rule]\nid = \"quiet\"\ntrigger = \"t\"\n[action]\ntype = \"log\"\nmessage = \"m\"\n");
    CHECK_INT(child_answers(config, NULL, reqs, 1, out, sizeof out), 0);
    CHECK_PREFIX(out, "{\"status\":\"error\",\"error\":\"denied\",\"message\":\"tool \\\"echo\\\" denied by the policy of the configuration");
    remove(path);
    rmdir(rules);
    remove(config);
    rmdir(dir);
}

void tests_config(void) {
    test_broken_start_up_configuration_fails_closed();
    test_configure_toml_and_json();
    test_configure_errors_apply_nothing();
    test_log_handler();
    free(clara_reset());
}
