/* report.c - what a C tool reports from the thread it runs on.
 *
 * clara_call_result and clara_call_error, called on the tool's own thread,
 * keep the report in C with the call (struct shim_result, shim.h): a worker
 * thread never enters Go to report. Nothing here needs Go, so that
 * tests/c/workers_sanitized.c builds this file and workers.c alone under
 * the sanitizers. */
#include <stdlib.h>
#include <string.h>

#include "clara.h"
#include "shim.h"

/* The report of the tool running on this thread, if any: a tool may call
 * clara_evaluate, which may run a tool on this same thread, so the outer
 * report is saved and restored around each call. */
static _Thread_local struct shim_result *reporting;

int shim_run_reporting(clara_tool_fn fn, uintptr_t userdata, const char *args, struct shim_result *res) {
    struct shim_result *outer = reporting;
    int rc;
    reporting = res;
    rc = fn((void *)userdata, args, (clara_call *)res->call);
    reporting = outer;
    return rc;
}

/* A copy of s (n bytes) into *dst, replacing what was there; 0 when
 * malloc failed (the old value is kept). */
static int replace_copy(char **dst, const char *s, size_t n) {
    char *copy = NULL;
    if (s != NULL) {
        copy = malloc(n + 1);
        if (copy == NULL) return 0;
        memcpy(copy, s, n + 1);
    }
    free(*dst);
    *dst = copy;
    return 1;
}

/* The result into r, in its room when it fits (see struct shim_result). */
static int replace_result(struct shim_result *r, const char *s, size_t n) {
    if (s != NULL && r->room != NULL && n < r->room_cap) {
        if (r->result != r->room) free(r->result);
        memcpy(r->room, s, n + 1);
        r->result = r->room;
        return 1;
    }
    if (r->result == r->room) r->result = NULL; /* not malloc'd */
    return replace_copy(&r->result, s, n);
}

/* The report of call, if it runs on this thread. */
static struct shim_result *own(uintptr_t call) {
    struct shim_result *r = reporting;
    return r != NULL && call != 0 && r->call == call ? r : NULL;
}

int shim_report_result(uintptr_t call, const char *result_json, size_t n) {
    struct shim_result *r = own(call);
    if (r == NULL || !replace_result(r, result_json, n)) return 0;
    r->result_len = n;
    r->has_result = 1;
    return 1;
}

int shim_report_error(uintptr_t call, const char *message, size_t n) {
    struct shim_result *r = own(call);
    if (r == NULL || !replace_copy(&r->error, message, n)) return 0;
    r->has_error = 1;
    return 1;
}

void shim_result_clear(struct shim_result *r) {
    if (r->result != r->room) free(r->result);
    free(r->error);
    r->result = r->error = NULL;
    r->result_len = 0;
    r->has_result = r->has_error = 0;
}
