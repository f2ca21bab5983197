/* test_callbacks.c - file-change callbacks seen from C, in a temporary
 * project root: a blocking callback created with callback_upsert, fired by
 * a C tool whose result reports changed_files (the envelope carries the
 * run and its notice), the script's environment, a failure and its log,
 * dry runs, activation per session, test mode, a background run reported
 * through notifications_drain, and deletion. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clara.h"
#include "harness.h"

#define CHECK_MARK "\xe2\x9c\x93" /* ✓ */
#define CROSS_MARK "\xe2\x9c\x97" /* ✗ */

static void configure_ok(const char *test, int line, const char *config) {
    char *r = clara_configure(config);
    check_prefix(test, line, r, "{\"status\":\"success\"");
    clara_free_string(r);
}
#define CONFIGURE(config) configure_ok(__func__, __LINE__, (config))

/* Checks the kind and text of the value at path in doc. */
static void check_json(const char *test, int line, const char *doc, const char *path, int kind, const char *want) {
    char *text = NULL;
    check_int(test, line, clara_json_get(doc, path, &text, NULL), kind, path);
    check_str(test, line, text, want);
    clara_free_string(text);
}
#define CHECK_JSON(doc, path, kind, want) check_json(__func__, __LINE__, (doc), (path), (kind), (want))

/* s as a JSON string literal (quotes, backslashes and newlines escaped);
 * malloc'd. */
static char *json_quote(const char *s) {
    char *out = malloc(2 * strlen(s) + 3), *p = out;
    *p++ = '"';
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') {
            *p++ = '\\';
            *p++ = *s;
        } else if (*s == '\n') {
            *p++ = '\\';
            *p++ = 'n';
        } else {
            *p++ = *s;
        }
    }
    *p++ = '"';
    *p = '\0';
    return out;
}

static char root[64];

static int exists(const char *rel) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    return access(path, F_OK) == 0;
}

static void remove_file(const char *rel) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    unlink(path);
}

/* The contents of root/rel, up to 4 KiB, NUL-terminated, in buf. */
static const char *read_file(const char *rel, char *buf, size_t size) {
    char path[512];
    size_t n = 0;
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", root, rel);
    buf[0] = '\0';
    f = fopen(path, "r");
    if (f == NULL) return "(missing)";
    n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* write_files: {"files": [...]} -> {"changed_files": [...]}, as an editor
 * tool reports what it wrote (SPEC §9.6; registered with
 * "reports_changed_files": true, which says it does). Counts its runs. */
static int write_runs;

static int write_files(void *userdata, const char *args, clara_call *call) {
    char *files = NULL, *out;
    (void)userdata;
    if (clara_json_get(args, "files", &files, NULL) != CLARA_JSON_ARRAY) {
        clara_free_string(files);
        clara_call_error(call, "files must be an array");
        return 1;
    }
    out = malloc(strlen(files) + 32);
    sprintf(out, "{\"changed_files\":%s}", files);
    clara_free_string(files);
    __atomic_add_fetch(&write_runs, 1, __ATOMIC_SEQ_CST);
    clara_call_result(call, out);
    free(out);
    return 0;
}

static const char check_script[] =
    "printf '%s\\n' \"$CLARA_CHANGED_FILES\" > \"$CLARA_PROJECT_ROOT/ran.txt\"\n"
    "echo \"checked by $CLARA_CALLBACK_NAME ($CLARA_CALLBACK_ID)\"\n"
    "[ \"$PWD\" = \"$CLARA_PROJECT_ROOT\" ] && echo \"in the project root\"\n"
    "exit 0\n";

/* The definition of "check" as the callback tools report it. */
#define CHECK_DEF(active)                                                                                          \
    "{\"id\":\"CB1\",\"name\":\"check\",\"description\":\"\",\"pattern\":[\"*.rs\",\"!target/**\"],\"blocking\":true," \
    "\"timeout_secs\":10,\"success_message\":\"Build passed\",\"cwd\":\"\",\"one_at_a_time\":false,"                 \
    "\"once_per_batch\":false,\"on_busy\":\"queue\",\"pass_files\":\"env\",\"active\":" active "}"

static void test_callbacks_off_without_state_dir(void) {
    clara_free_string(clara_reset());
    CONFIGURE("state_dir = \"\"\n[rules]\nbuiltin = false\n");
    CHECK_ENVELOPE("{\"tool\":\"callback_list\"}",
                   "{\"status\":\"error\",\"error\":\"invalid_args\",\"message\":\"callbacks are stored under "
                   "state_dir, which the configuration sets to \\\"\\\": set a state_dir to use them\"}");
    /* A tool reporting changed files still just succeeds. */
    CHECK_INT(clara_register_tool("{\"name\":\"write_files\",\"reports_changed_files\":true}", write_files, NULL, NULL), CLARA_OK);
    CHECK_ENVELOPE("{\"tool\":\"write_files\",\"arguments\":{\"files\":[\"a.rs\"]}}",
                   "{\"status\":\"success\",\"tool\":\"write_files\",\"result\":{\"changed_files\":[\"a.rs\"]}}");
    CHECK_INT(clara_unregister_tool("write_files"), CLARA_OK);
}

static void test_blocking_callback_lifecycle(void) {
    char config[256], want[2048], buf[4096], *script, *req, *r;
    struct stat st;
    int runs;

    clara_free_string(clara_reset());
    snprintf(config, sizeof config, "project_root = \"%s\"\nstate_dir = \".clara\"\n[rules]\nbuiltin = false\n", root);
    CONFIGURE(config);
    CHECK_INT(clara_register_tool("{\"name\":\"write_files\",\"reports_changed_files\":true,\"input_schema\":{\"type\":\"object\",\"properties\":"
                                  "{\"files\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},"
                                  "\"required\":[\"files\"]}}",
                                  write_files, NULL, NULL),
              CLARA_OK);
    CHECK(!exists(".clara")); /* created only when something is stored */

    /* Create: active for the session that created it; the script is stored. */
    script = json_quote(check_script);
    req = malloc(strlen(script) + 512);
    sprintf(req,
            "{\"tool\":\"callback_upsert\",\"arguments\":{\"action\":\"create\",\"name\":\"check\",\"pattern\":"
            "[\"*.rs\",\"!target/**\"],\"blocking\":true,\"timeout_secs\":10,\"success_message\":\"Build passed\","
            "\"script_content\":%s}}",
            script);
    snprintf(want, sizeof want,
             "{\"status\":\"success\",\"tool\":\"callback_upsert\",\"result\":{\"action\":\"created\",\"callback\":"
             CHECK_DEF("true") ",\"script_path\":\"%s/.clara/scripts/check.sh\"}}",
             root);
    CHECK_ENVELOPE(req, want);
    free(req);
    free(script);
    CHECK(exists(".clara/callbacks.json"));
    CHECK_PREFIX(read_file(".clara/scripts/check.sh", buf, sizeof buf), "#!/usr/bin/env bash\nset -euo pipefail\n");
    CHECK(strstr(buf, check_script) != NULL);
    {
        char path[512];
        snprintf(path, sizeof path, "%s/.clara/scripts/check.sh", root);
        CHECK_INT(stat(path, &st), 0);
        CHECK_INT(st.st_mode & 0777, 0755);
    }
    snprintf(want, sizeof want, "{\"status\":\"success\",\"tool\":\"callback_list\",\"result\":{\"worker\":\"default\","
                                "\"callbacks\":[" CHECK_DEF("true") "]}}");
    CHECK_ENVELOPE("{\"tool\":\"callback_list\"}", want);

    /* A tool that changed a matching file fires it; the envelope carries
     * the run and its notice. The exclusion line drops target/debug/x.rs, README.md does not
     * match, and a path outside the root never matches. */
    remove_file("ran.txt");
    runs = __atomic_load_n(&write_runs, __ATOMIC_SEQ_CST);
    r = clara_evaluate("{\"tool\":\"write_files\",\"arguments\":{\"files\":[\"src/main.rs\",\"target/debug/x.rs\","
                       "\"README.md\",\"../outside.rs\"]}}");
    CHECK_PREFIX(r, "{\"status\":\"success\",\"tool\":\"write_files\",\"result\":{\"changed_files\":[\"src/main.rs\","
                    "\"target/debug/x.rs\",\"README.md\",\"../outside.rs\"]},\"notices\":[{\"callback\":\"check\","
                    "\"message\":\"Callback 'check' " CHECK_MARK ": Build passed\",\"priority\":\"normal\",\"event\":"
                    "\"on_callback_complete\"}],\"callbacks\":[{\"id\":\"CB1\",\"name\":\"check\",\"ok\":true,"
                    "\"exit_code\":0,\"timed_out\":false,\"duration_ms\":");
    CHECK_JSON(r, "callbacks.#", CLARA_JSON_INTEGER, "1");
    CHECK_JSON(r, "callbacks.0.output_tail", CLARA_JSON_STRING, "checked by check (CB1)\nin the project root");
    CHECK_JSON(r, "callbacks.0.log", CLARA_JSON_STRING, "");
    clara_free_string(r);
    CHECK_INT(__atomic_load_n(&write_runs, __ATOMIC_SEQ_CST), runs + 1);
    /* The script got the matched file, as an absolute path. */
    snprintf(want, sizeof want, "%s/src/main.rs\n", root);
    CHECK_STR(read_file("ran.txt", buf, sizeof buf), want);

    /* Dry run: which callbacks would fire, with the files; nothing runs. */
    remove_file("ran.txt");
    snprintf(want, sizeof want,
             "{\"status\":\"success\",\"tool\":\"callback_trigger\",\"result\":{\"dry_run\":true,\"callbacks\":"
             "[{\"id\":\"CB1\",\"name\":\"check\",\"files\":[\"%s/src/lib.rs\",\"%s/deep/er/mod.rs\"]}]}}",
             root, root);
    CHECK_ENVELOPE("{\"tool\":\"callback_trigger\",\"arguments\":{\"changed_files\":[\"src/lib.rs\",\"target/x.rs\","
                   "\"docs/a.md\",\"deep/er/mod.rs\"],\"dry_run\":true}}",
                   want);
    CHECK(!exists("ran.txt"));
    /* callback_trigger without dry_run runs it. */
    r = clara_evaluate("{\"tool\":\"callback_trigger\",\"arguments\":{\"changed_files\":[\"lib.rs\"]}}");
    CHECK_JSON(r, "result.callbacks.0.id", CLARA_JSON_STRING, "CB1");
    CHECK_JSON(r, "result.callbacks.0.ok", CLARA_JSON_TRUE, "true");
    CHECK_JSON(r, "result.callbacks.0.exit_code", CLARA_JSON_INTEGER, "0");
    CHECK_JSON(r, "result.background", CLARA_JSON_ARRAY, "[]");
    CHECK_JSON(r, "result.notices", CLARA_JSON_ARRAY, "[\"Callback 'check' " CHECK_MARK ": Build passed\"]");
    clara_free_string(r);
    snprintf(want, sizeof want, "%s/lib.rs\n", root);
    CHECK_STR(read_file("ran.txt", buf, sizeof buf), want);

    /* Update by an old_string -> new_string edit: now it fails; the notice
     * names the kept log and the last lines of output. */
    r = clara_evaluate("{\"tool\":\"callback_upsert\",\"arguments\":{\"action\":\"update\",\"id\":\"CB1\","
                       "\"old_string\":\"exit 0\",\"new_string\":\"echo 'broken build' >&2\\nexit 3\"}}");
    snprintf(want, sizeof want,
             "{\"status\":\"success\",\"tool\":\"callback_upsert\",\"result\":{\"action\":\"updated\",\"callback\":"
             CHECK_DEF("true") ",\"script_path\":\"%s/.clara/scripts/check.sh\"}}",
             root);
    CHECK_STR(r, want);
    clara_free_string(r);
    CHECK(strstr(read_file(".clara/scripts/check.sh", buf, sizeof buf), "echo 'broken build' >&2\nexit 3\n") != NULL);
    r = clara_evaluate("{\"tool\":\"write_files\",\"arguments\":{\"files\":[\"src/main.rs\"]}}");
    CHECK_JSON(r, "callbacks.0.ok", CLARA_JSON_FALSE, "false");
    CHECK_JSON(r, "callbacks.0.exit_code", CLARA_JSON_INTEGER, "3");
    CHECK_JSON(r, "callbacks.0.timed_out", CLARA_JSON_FALSE, "false");
    CHECK_JSON(r, "callbacks.0.output_tail", CLARA_JSON_STRING,
               "checked by check (CB1)\nin the project root\nbroken build");
    CHECK_JSON(r, "notices.0.priority", CLARA_JSON_STRING, "high");
    CHECK_JSON(r, "notices.0.event", CLARA_JSON_STRING, "on_callback_failure");
    {
        char *log = NULL, *msg = NULL, prefix[256];
        CHECK_INT(clara_json_get(r, "callbacks.0.log", &log, NULL), CLARA_JSON_STRING);
        snprintf(prefix, sizeof prefix, "%s/.clara/logs/check-", root);
        CHECK_PREFIX(log, prefix);
        CHECK(log != NULL && access(log, R_OK) == 0); /* kept on failure */
        CHECK_INT(clara_json_get(r, "notices.0.message", &msg, NULL), CLARA_JSON_STRING);
        snprintf(want, sizeof want,
                 "Callback 'check' " CROSS_MARK " (exit 3): see %s\nchecked by check (CB1)\nin the project root\n"
                 "broken build",
                 log ? log : "?");
        CHECK_STR(msg, want);
        clara_free_string(msg);
        clara_free_string(log);
    }
    clara_free_string(r);

    /* Update by replacing the script. */
    r = clara_evaluate("{\"tool\":\"callback_upsert\",\"arguments\":{\"action\":\"update\",\"id\":\"CB1\","
                       "\"script_content\":\"echo fixed\"}}");
    CHECK_JSON(r, "result.action", CLARA_JSON_STRING, "updated");
    clara_free_string(r);
    r = clara_evaluate("{\"tool\":\"callback_get\",\"arguments\":{\"id\":\"check\"}}");
    CHECK_JSON(r, "result.script", CLARA_JSON_STRING, "echo fixed\n");
    clara_free_string(r);
    r = clara_evaluate("{\"tool\":\"write_files\",\"arguments\":{\"files\":[\"src/main.rs\"]}}");
    CHECK_JSON(r, "callbacks.0.ok", CLARA_JSON_TRUE, "true");
    CHECK_JSON(r, "callbacks.0.output_tail", CLARA_JSON_STRING, "fixed");
    clara_free_string(r);

    /* Toggle off for this session: the tool runs, nothing fires. */
    CHECK_ENVELOPE("{\"tool\":\"callback_toggle\",\"arguments\":{\"id\":\"CB1\",\"active\":false}}",
                   "{\"status\":\"success\",\"tool\":\"callback_toggle\",\"result\":{\"id\":\"CB1\",\"name\":\"check\","
                   "\"active\":false}}");
    runs = __atomic_load_n(&write_runs, __ATOMIC_SEQ_CST);
    CHECK_ENVELOPE("{\"tool\":\"write_files\",\"arguments\":{\"files\":[\"src/main.rs\"]}}",
                   "{\"status\":\"success\",\"tool\":\"write_files\",\"result\":{\"changed_files\":[\"src/main.rs\"]}}");
    CHECK_INT(__atomic_load_n(&write_runs, __ATOMIC_SEQ_CST), runs + 1);
    CHECK_ENVELOPE("{\"tool\":\"callback_trigger\",\"arguments\":{\"changed_files\":[\"src/main.rs\"],\"dry_run\":true}}",
                   "{\"status\":\"success\",\"tool\":\"callback_trigger\",\"result\":{\"dry_run\":true,\"callbacks\":[]}}");
    snprintf(want, sizeof want, "{\"status\":\"success\",\"tool\":\"callback_list\",\"result\":{\"worker\":\"default\","
                                "\"callbacks\":[" CHECK_DEF("false") "]}}");
    CHECK_ENVELOPE("{\"tool\":\"callback_list\"}", want);

    /* Activation is per session: "ci" turns it on for itself only. */
    CHECK_ENVELOPE("{\"tool\":\"write_files\",\"session\":\"ci\",\"arguments\":{\"files\":[\"a.rs\"]}}",
                   "{\"status\":\"success\",\"tool\":\"write_files\",\"result\":{\"changed_files\":[\"a.rs\"]}}");
    CHECK_ENVELOPE("{\"tool\":\"callback_toggle\",\"session\":\"ci\",\"arguments\":{\"id\":\"CB1\",\"active\":true}}",
                   "{\"status\":\"success\",\"tool\":\"callback_toggle\",\"result\":{\"id\":\"CB1\",\"name\":\"check\","
                   "\"active\":true}}");
    r = clara_evaluate("{\"tool\":\"write_files\",\"session\":\"ci\",\"arguments\":{\"files\":[\"a.rs\"]}}");
    CHECK_JSON(r, "callbacks.0.name", CLARA_JSON_STRING, "check");
    CHECK_JSON(r, "callbacks.0.ok", CLARA_JSON_TRUE, "true");
    clara_free_string(r);
    CHECK_ENVELOPE("{\"tool\":\"write_files\",\"arguments\":{\"files\":[\"a.rs\"]}}",
                   "{\"status\":\"success\",\"tool\":\"write_files\",\"result\":{\"changed_files\":[\"a.rs\"]}}");

    /* Test mode: callbacks are exec; nothing runs, the result says so. */
    remove_file("ran.txt");
    r = clara_evaluate("{\"tool\":\"callback_upsert\",\"arguments\":{\"action\":\"update\",\"id\":\"CB1\","
                       "\"script_content\":\"touch \\\"$CLARA_PROJECT_ROOT/ran.txt\\\"\"}}");
    CHECK_JSON(r, "result.action", CLARA_JSON_STRING, "updated");
    clara_free_string(r);
    CONFIGURE("test_mode = true");
    r = clara_evaluate("{\"tool\":\"write_files\",\"session\":\"ci\",\"arguments\":{\"files\":[\"a.rs\"]}}");
    CHECK_JSON(r, "callbacks.0.test_mode", CLARA_JSON_TRUE, "true");
    CHECK_JSON(r, "callbacks.0.skipped", CLARA_JSON_STRING, "check");
    CHECK_JSON(r, "notices.0.message", CLARA_JSON_STRING, "Callback 'check' skipped (test mode)");
    clara_free_string(r);
    CHECK(!exists("ran.txt"));
    CONFIGURE("test_mode = false");
    r = clara_evaluate("{\"tool\":\"write_files\",\"session\":\"ci\",\"arguments\":{\"files\":[\"a.rs\"]}}");
    CHECK_JSON(r, "callbacks.0.ok", CLARA_JSON_TRUE, "true");
    clara_free_string(r);
    CHECK(exists("ran.txt"));

    /* Delete: the definition and its script go; nothing fires any more. */
    CHECK_ENVELOPE("{\"tool\":\"callback_upsert\",\"arguments\":{\"action\":\"delete\",\"id\":\"CB1\"}}",
                   "{\"status\":\"success\",\"tool\":\"callback_upsert\",\"result\":{\"action\":\"deleted\",\"id\":"
                   "\"CB1\",\"name\":\"check\"}}");
    CHECK(!exists(".clara/scripts/check.sh"));
    CHECK_ENVELOPE("{\"tool\":\"callback_list\"}",
                   "{\"status\":\"success\",\"tool\":\"callback_list\",\"result\":{\"worker\":\"default\",\"callbacks\":[]}}");
    CHECK_ENVELOPE("{\"tool\":\"write_files\",\"session\":\"ci\",\"arguments\":{\"files\":[\"a.rs\"]}}",
                   "{\"status\":\"success\",\"tool\":\"write_files\",\"result\":{\"changed_files\":[\"a.rs\"]}}");
    CHECK_ENVELOPE("{\"tool\":\"callback_get\",\"arguments\":{\"id\":\"CB1\"}}",
                   "{\"status\":\"error\",\"error\":\"invalid_args\",\"message\":\"callback_get: no callback \\\"CB1\\\"\"}");
    CHECK_INT(clara_unregister_tool("write_files"), CLARA_OK);
}

static void test_background_callback(void) {
    char config[256], *r;
    int i, n = 0;
    clara_free_string(clara_reset());
    snprintf(config, sizeof config, "project_root = \"%s\"\nstate_dir = \".clara\"\n[rules]\nbuiltin = false\n", root);
    CONFIGURE(config);
    CHECK_INT(clara_register_tool("{\"name\":\"write_files\",\"reports_changed_files\":true}", write_files, NULL, NULL), CLARA_OK);
    r = clara_evaluate("{\"tool\":\"callback_upsert\",\"session\":\"bg\",\"arguments\":{\"action\":\"create\","
                       "\"name\":\"docs\",\"pattern\":\"/docs/\",\"script_content\":\"echo built\"}}");
    CHECK_JSON(r, "result.callback.blocking", CLARA_JSON_FALSE, "false");
    CHECK_JSON(r, "result.callback.active", CLARA_JSON_TRUE, "true");
    clara_free_string(r);
    /* The call does not wait: it says the callback went to the background. */
    r = clara_evaluate("{\"tool\":\"write_files\",\"session\":\"bg\",\"arguments\":{\"files\":[\"docs/index.md\"]}}");
    CHECK_JSON(r, "callbacks", CLARA_JSON_MISSING, NULL);
    CHECK_JSON(r, "notices.#", CLARA_JSON_INTEGER, "1");
    CHECK_JSON(r, "notices.0.callback", CLARA_JSON_STRING, "docs");
    CHECK_JSON(r, "notices.0.message", CLARA_JSON_STRING, "Callback 'docs' activated in background");
    clara_free_string(r);
    /* Its completion arrives in the session's queue. */
    for (i = 0; i < 200 && n == 0; i++) {
        char *count = NULL;
        r = clara_evaluate("{\"tool\":\"notifications_drain\",\"session\":\"bg\"}");
        if (clara_json_get(r, "result.notices.#", &count, NULL) == CLARA_JSON_INTEGER) n = atoi(count);
        clara_free_string(count);
        if (n > 0) {
            char *msg = NULL;
            CHECK_INT(n, 1);
            CHECK_JSON(r, "result.notices.0.callback", CLARA_JSON_STRING, "docs");
            CHECK_JSON(r, "result.notices.0.event", CLARA_JSON_STRING, "on_callback_complete");
            CHECK_INT(clara_json_get(r, "result.notices.0.message", &msg, NULL), CLARA_JSON_STRING);
            CHECK_PREFIX(msg, "Callback 'docs' " CHECK_MARK ": succeeded in ");
            clara_free_string(msg);
        }
        clara_free_string(r);
        if (n == 0) sleep_ms(50);
    }
    CHECK(n > 0);
    CHECK_ENVELOPE("{\"tool\":\"callback_upsert\",\"session\":\"bg\",\"arguments\":{\"action\":\"delete\",\"id\":"
                   "\"docs\"}}",
                   "{\"status\":\"success\",\"tool\":\"callback_upsert\",\"result\":{\"action\":\"deleted\",\"id\":"
                   "\"CB1\",\"name\":\"docs\"}}");
    CHECK_INT(clara_unregister_tool("write_files"), CLARA_OK);
}

void tests_callbacks(void) {
    snprintf(root, sizeof root, "/tmp/clara-callbacks-XXXXXX");
    CHECK(mkdtemp(root) != NULL);
    test_callbacks_off_without_state_dir();
    test_blocking_callback_lifecycle();
    /* A fresh project root for the next test. */
    CHECK_INT(nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
    CHECK(mkdtemp(strcpy(root, "/tmp/clara-callbacks-XXXXXX")) != NULL);
    test_background_callback();
    free(clara_reset());
    CHECK_INT(nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
}
