/* c_host.c - a C host that serves its tools over MCP with
 * clara_mcp_listen, for tests/mcp (the TypeScript SDK's client drives it).
 * Its tools: c_add (C), report_steps (C, reports progress, then waits),
 * c_wait (waits), release_steps (lets one waiting tool return),
 * register_more (C, registers another C tool while serving), log_steps
 * (C, logs to the client with clara_call_log, then waits and answers its
 * clara_call_session), and the
 * configuration's (CLARA_CONFIG). Prints "url URL" and serves until its
 * stdin closes. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clara.h"

static int c_add(void *userdata, const char *args, clara_call *call) {
    char *a = NULL, *b = NULL, out[64];
    (void)userdata;
    if (clara_json_get(args, "a", &a, NULL) < 0 || clara_json_get(args, "b", &b, NULL) < 0 || !a || !b) {
        clara_call_error(call, "a and b are needed");
    } else {
        snprintf(out, sizeof out, "{\"sum\":%g}", strtod(a, NULL) + strtod(b, NULL));
        clara_call_result(call, out);
    }
    clara_free_string(a);
    clara_free_string(b);
    return 0;
}

/* The release of a waiting tool: the TypeScript SDK drops progress that
 * arrives together with the call's answer, so the tools that report
 * progress wait for the client to say it saw it (release_steps). */
static pthread_mutex_t release_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t release_cv = PTHREAD_COND_INITIALIZER;
static int releases;

/* Waits for one release; 0, or -1 after 50 s without one. */
static int wait_release(void) {
    struct timespec until;
    int rc = 0;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 50;
    pthread_mutex_lock(&release_mu);
    while (releases == 0 && rc == 0) rc = pthread_cond_timedwait(&release_cv, &release_mu, &until);
    if (releases > 0) {
        releases--;
        rc = 0;
    }
    pthread_mutex_unlock(&release_mu);
    return rc == 0 ? 0 : -1;
}

static int report_steps(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    (void)args;
    clara_call_progress(call, 1, 2, "half way");
    clara_call_progress(call, 2, 2, "done");
    if (wait_release() == 0) clara_call_result(call, "\"stepped\"");
    else clara_call_error(call, "no release_steps within 50 s");
    return 0;
}

static int log_steps(void *userdata, const char *args, clara_call *call) {
    char out[320];
    char *session = clara_call_session(call);
    (void)userdata;
    (void)args;
    clara_call_log(call, CLARA_LOG_DEBUG, "below the client's level");
    clara_call_log(call, CLARA_LOG_INFO, "starting");
    clara_call_log(call, CLARA_LOG_WARN, "half way");
    if (wait_release() == 0 && session != NULL) {
        snprintf(out, sizeof out, "{\"session\":\"%s\",\"cancelled\":%d}", session, clara_call_cancelled(call));
        clara_call_result(call, out);
    } else {
        clara_call_error(call, "no release_steps within 50 s");
    }
    clara_free_string(session);
    return 0;
}

static int c_wait(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    (void)args;
    if (wait_release() == 0) clara_call_result(call, "\"released\"");
    else clara_call_error(call, "no release_steps within 50 s");
    return 0;
}

static int release_steps(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    (void)args;
    pthread_mutex_lock(&release_mu);
    releases++;
    pthread_cond_signal(&release_cv);
    pthread_mutex_unlock(&release_mu);
    clara_call_result(call, "\"released\"");
    return 0;
}

static int fresh(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    clara_call_result(call, args);
    return 0;
}

static int register_more(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    (void)args;
    if (clara_register_tool("{\"name\":\"c_fresh\",\"description\":\"Registered while serving\"}", fresh, NULL, NULL) == CLARA_OK)
        clara_call_result(call, "\"registered c_fresh\"");
    else
        clara_call_error(call, "registration failed");
    return 0;
}

int main(void) {
    char *r, *url = NULL, line[16];
    if (clara_register_tool("{\"name\":\"c_add\",\"description\":\"Adds two numbers, in C\",\"input_schema\":{\"type\":\"object\","
                            "\"properties\":{\"a\":{\"type\":\"number\"},\"b\":{\"type\":\"number\"}},\"required\":[\"a\",\"b\"]}}",
                            c_add, NULL, NULL) != CLARA_OK ||
        clara_register_tool("{\"name\":\"report_steps\",\"description\":\"Reports two steps of progress, then waits for "
                            "release_steps\",\"limits\":{\"timeout_ms\":60000}}",
                            report_steps, NULL, NULL) != CLARA_OK ||
        clara_register_tool("{\"name\":\"log_steps\",\"description\":\"Logs to the client, then waits for release_steps\","
                            "\"limits\":{\"timeout_ms\":60000}}",
                            log_steps, NULL, NULL) != CLARA_OK ||
        clara_register_tool("{\"name\":\"c_wait\",\"description\":\"Waits for release_steps\",\"limits\":{\"timeout_ms\":60000}}",
                            c_wait, NULL, NULL) != CLARA_OK ||
        clara_register_tool("{\"name\":\"release_steps\",\"description\":\"Lets one waiting tool return\"}", release_steps, NULL,
                            NULL) != CLARA_OK ||
        clara_register_tool("{\"name\":\"register_more\",\"description\":\"Registers c_fresh\"}", register_more, NULL, NULL) !=
            CLARA_OK)
        return 1;
    r = clara_mcp_listen("127.0.0.1:0");
    if (r == NULL || clara_json_get(r, "result.url", &url, NULL) != CLARA_JSON_STRING) {
        fprintf(stderr, "c_host: %s\n", r ? r : "(NULL)");
        return 1;
    }
    printf("url %s\n", url);
    fflush(stdout);
    clara_free_string(url);
    clara_free_string(r);
    while (fgets(line, sizeof line, stdin) != NULL) {
    }
    clara_mcp_stop();
    return 0;
}
