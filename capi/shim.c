/* shim.c - the public clara_* functions of clara.h.
 *
 * Each function that needs the Go core is a one-line call of a Go export
 * (claraGo*, see exports.go) that adds the const the cgo prototypes lack
 * and passes string lengths, so Go never calls strlen through cgo. The
 * functions that need no Go (version, free, strerror) are plain C. */
#include <stdlib.h>
#include <string.h>

#include "clara.h"
#include "shim.h"
#include "_cgo_export.h"

/* The version of the library itself (its Go core), which a program built
 * against another clara.h compares with the macros it saw. */
const char *clara_version(void) { return claraGoVersion(); }

int clara_version_number(void) { return (int)claraGoVersionNumber(); }

/* Most envelopes are a little longer than their request (echo adds about
 * 40 bytes). A buffer of that size is allocated here and handed to Go, which
 * writes the envelope straight into it when it fits: one crossing of cgo per
 * call instead of two. Larger envelopes are allocated by Go, and the guess is
 * freed. The guess is bounded so that no caller holds much unused memory. */
#define ENVELOPE_SLACK 128
#define ENVELOPE_GUESS_MAX 4096

char *clara_evaluate(const char *request_json) {
    size_t n = request_json ? strlen(request_json) : 0;
    size_t guess = n < ENVELOPE_GUESS_MAX - ENVELOPE_SLACK ? n + ENVELOPE_SLACK : ENVELOPE_GUESS_MAX;
    char *buf = malloc(guess);
    char *out = claraGoEvaluate((char *)request_json, n, buf, buf ? guess : 0);
    if (out != buf) free(buf);
    else if (out != NULL) DEFINED(out, guess);
    return out;
}

char *clara_call_evaluate(clara_call *call, const char *request_json) {
    size_t n = request_json ? strlen(request_json) : 0;
    size_t guess = n < ENVELOPE_GUESS_MAX - ENVELOPE_SLACK ? n + ENVELOPE_SLACK : ENVELOPE_GUESS_MAX;
    char *buf = malloc(guess);
    char *out = claraGoCallEvaluate((uintptr_t)call, (char *)request_json, n, buf, buf ? guess : 0);
    if (out != buf) free(buf);
    else if (out != NULL) DEFINED(out, guess);
    return out;
}

void clara_free_string(char *s) { free(s); }

char *clara_configure(const char *config) {
    return claraGoConfigure((char *)config, config ? strlen(config) : 0);
}

char *clara_reset(void) { return claraGoReset(); }

/* An emission's answer lists the rules fired and their notices: a few
 * hundred bytes to a few KiB. The same scheme as clara_evaluate, with a
 * fixed guess. */
#define EMIT_GUESS 4096

char *clara_emit(const char *event_json) {
    char *buf = malloc(EMIT_GUESS);
    char *out = claraGoEmit((char *)event_json, event_json ? strlen(event_json) : 0, buf, buf ? EMIT_GUESS : 0);
    if (out != buf) free(buf);
    else if (out != NULL) DEFINED(out, EMIT_GUESS);
    return out;
}

int clara_json_get(const char *json, const char *path, char **text, size_t *length) {
    if (text != NULL) *text = NULL;
    if (length != NULL) *length = 0;
    if (json == NULL || path == NULL || text == NULL) return -CLARA_EINVAL;
    return claraGoJSONGet((char *)json, strlen(json), (char *)path, strlen(path), text, length);
}

int clara_register_tool(const char *descriptor_json, clara_tool_fn fn, void *userdata, void (*free_userdata)(void *)) {
    return claraGoRegisterTool((char *)descriptor_json, descriptor_json ? strlen(descriptor_json) : 0, fn,
                               (uintptr_t)userdata, free_userdata);
}

int clara_unregister_tool(const char *name) {
    return claraGoUnregisterTool((char *)name, name ? strlen(name) : 0);
}

int clara_set_tool_limits(const char *name, const char *limits_json) {
    if (name == NULL || limits_json == NULL) return -CLARA_EINVAL;
    return claraGoSetToolLimits((char *)name, strlen(name), (char *)limits_json, strlen(limits_json));
}

int clara_register_rule(const char *descriptor_json, clara_rule_condition_fn condition, clara_rule_action_fn action,
                        void *userdata, void (*free_userdata)(void *)) {
    return claraGoRegisterRule((char *)descriptor_json, descriptor_json ? strlen(descriptor_json) : 0, condition, action,
                               (uintptr_t)userdata, free_userdata);
}

int clara_unregister_rule(const char *id) { return claraGoUnregisterRule((char *)id, id ? strlen(id) : 0); }

int clara_json5_to_json(const char *text, char **json) {
    if (json != NULL) *json = NULL;
    if (text == NULL || json == NULL) return -CLARA_EINVAL;
    return claraGoJSON5ToJSON((char *)text, strlen(text), json);
}

/* From the tool's own thread the report stays in C (see struct
 * shim_result); from anywhere else it goes to Go by the call's id, which
 * also ignores calls whose tool has returned. */
void clara_call_result(clara_call *call, const char *result_json) {
    size_t n = result_json ? strlen(result_json) : 0;
    if (!shim_report_result((uintptr_t)call, result_json, n)) claraGoCallResult((uintptr_t)call, (char *)result_json, n);
}

void clara_call_error(clara_call *call, const char *message) {
    size_t n = message ? strlen(message) : 0;
    if (!shim_report_error((uintptr_t)call, message, n)) claraGoCallError((uintptr_t)call, (char *)message, n);
}

void clara_set_log_handler(clara_log_fn fn, void *userdata, int min_level) {
    claraGoSetLogHandler(fn, (uintptr_t)userdata, min_level);
}

int clara_audit_reopen(void) { return claraGoAuditReopen(); }

int clara_telemetry_flush(int timeout_ms) { return claraGoTelemetryFlush(timeout_ms); }

void clara_call_progress(clara_call *call, double done, double total, const char *message) {
    claraGoCallProgress((uintptr_t)call, done, total, (char *)message, message ? strlen(message) : 0);
}

void clara_call_log(clara_call *call, int level, const char *message) {
    claraGoCallLog((uintptr_t)call, level, (char *)message, message ? strlen(message) : 0);
}

char *clara_call_session(clara_call *call) { return claraGoCallSession((uintptr_t)call); }

int clara_call_cancelled(clara_call *call) { return claraGoCallCancelled((uintptr_t)call); }

int clara_mcp_serve_stdio(int in_fd, int out_fd) { return claraGoMCPServeStdio(in_fd, out_fd); }

char *clara_mcp_listen(const char *addr) { return claraGoMCPListen((char *)addr, addr ? strlen(addr) : 0); }

void clara_mcp_stop(void) { claraGoMCPStop(); }

void clara_set_event_handler(clara_event_fn fn, void *userdata) {
    claraGoSetEventHandler(fn, (uintptr_t)userdata);
}

void clara_set_input_handler(clara_input_fn fn, void *userdata) {
    claraGoSetInputHandler(fn, (uintptr_t)userdata);
}

void clara_set_approval_handler(clara_approval_fn fn, void *userdata) {
    claraGoSetApprovalHandler(fn, (uintptr_t)userdata);
}

int64_t clara_submit(const char *request_json) {
    return claraGoSubmit((char *)request_json, request_json ? strlen(request_json) : 0);
}

int clara_ready(int64_t handle) { return claraGoReady(handle); }

char *clara_wait(int64_t handle, int timeout_ms) { return claraGoWait(handle, timeout_ms); }

int clara_cancel(int64_t handle) { return claraGoCancel(handle); }

int clara_async_fd(void) { return claraGoAsyncFD(); }

char *clara_async_take(int max) { return claraGoAsyncTake(max); }

const char *clara_strerror(int code) {
    /* long long: -INT_MIN does not fit an int. */
    switch (code < 0 ? -(long long)code : (long long)code) {
    case CLARA_OK: return "success";
    case CLARA_EINVAL: return "invalid argument";
    case CLARA_ENOMEM: return "out of memory";
    case CLARA_EINTERNAL: return "internal error (see the log)";
    case CLARA_ENOENT: return "no such tool or asynchronous call";
    case CLARA_EPERM: return "not allowed on a built-in tool";
    case CLARA_EBUSY: return "too many asynchronous calls running";
    default: return "unknown status code";
    }
}

char *shim_copy_out(const char *p, size_t n) {
    char *s = malloc(n + 1);
    if (s == NULL) return NULL;
    if (n > 0) memcpy(s, p, n);
    s[n] = '\0';
    DEFINED(s, n + 1);
    return s;
}

void shim_call_log(clara_log_fn fn, uintptr_t userdata, int level, const char *message) {
    fn((void *)userdata, level, message);
}

void shim_call_event(clara_event_fn fn, uintptr_t userdata, const char *event_json) {
    fn((void *)userdata, event_json);
}

char *shim_call_input(clara_input_fn fn, uintptr_t userdata, const char *request_json) {
    return fn((void *)userdata, request_json);
}

char *shim_call_approval(clara_approval_fn fn, uintptr_t userdata, const char *request_json) {
    return fn((void *)userdata, request_json);
}

int shim_call_rule_condition(clara_rule_condition_fn fn, uintptr_t userdata, const char *event_json) {
    return fn((void *)userdata, event_json);
}

char *shim_call_rule_action(clara_rule_action_fn fn, uintptr_t userdata, const char *event_json) {
    return fn((void *)userdata, event_json);
}

void shim_free_userdata(shim_free_fn free_userdata, uintptr_t userdata) {
    free_userdata((void *)userdata);
}

void shim_free(void *p) { free(p); }

/* Arguments up to this size are copied onto the stack for the call. */
#define HERE_ARGS_ON_STACK 1024

int shim_call_here(clara_tool_fn fn, uintptr_t userdata, const char *args, size_t n, struct shim_result *res) {
    char small[HERE_ARGS_ON_STACK];
    char *copy = n < sizeof small ? small : malloc(n + 1);
    int rc;
    if (copy == NULL) return 0;
    if (n > 0) memcpy(copy, args, n);
    copy[n] = '\0';
    DEFINED(copy, n + 1);
    rc = shim_run_reporting(fn, userdata, copy, res);
    res->ran = 1;
    if (copy != small) free(copy);
    return rc;
}
