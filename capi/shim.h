/* shim.h - C helpers that the Go exports in exports.go call.
 * Internal to libclara.so; hidden by clara.map. */
#ifndef CLARA_SHIM_H
#define CLARA_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include "clara.h"

/* Copies n bytes into a fresh malloc'd, NUL-terminated string; NULL if
 * malloc fails. Go's C.CString would abort the process instead. */
char *shim_copy_out(const char *p, size_t n);

/* Calls a log handler: Go cannot call a C function pointer itself.
 * userdata travels as an integer so that Go never holds it as a pointer. */
void shim_call_log(clara_log_fn fn, uintptr_t userdata, int level, const char *message);
void shim_call_event(clara_event_fn fn, uintptr_t userdata, const char *event_json);
char *shim_call_input(clara_input_fn fn, uintptr_t userdata, const char *request_json);

/* Calls a tool's free_userdata for Go. */
typedef void (*shim_free_fn)(void *);
void shim_free_userdata(shim_free_fn free_userdata, uintptr_t userdata);
void shim_free(void *p);

/* What a C tool reports through clara_call_result and clara_call_error
 * from the thread it runs on, kept in C: the worker never enters Go to
 * report (entering Go needs one of Go's processors, which the callers
 * hold). Reports made from another thread go to Go by the call's id, as
 * before. The strings are malloc'd copies, freed by shim_result_clear. */
struct shim_result {
    uintptr_t call; /* the id the tool was given as its clara_call */
    char *result;   /* NULL with has_result: the result is null */
    size_t result_len;
    char *error; /* NULL with has_error: the default message */
    int has_result, has_error;
    int ran; /* shim_call_here: the tool was called (0: no memory for its arguments) */
};
void shim_result_clear(struct shim_result *r);

/* Calls a C tool on the calling thread (descriptor "on_caller_thread")
 * with a NUL-terminated copy of args (n bytes, which may be Go memory),
 * collecting its reports into *res (res->call set by the caller); sets
 * res->ran once the tool was called. */
int shim_call_here(clara_tool_fn fn, uintptr_t userdata, const char *args, size_t n, struct shim_result *res);

/* The worker pool of workers.c: runs C tools on threads of their own so
 * that a caller can stop waiting at the deadline. */

struct shim_job;
/* A job owns args (malloc'd). NULL if malloc fails. */
struct shim_job *shim_job_new(clara_tool_fn fn, uintptr_t userdata, char *args, uintptr_t call);
/* Runs the job and waits at most timeout_ns (0: no limit). Returns 1 when it
 * finished (read shim_job_status, then shim_job_free it), 0 when the
 * deadline passed (the job is abandoned: never touch it again; Go hears of
 * its end through claraGoJobAbandoned), or -CLARA_ENOMEM when no thread
 * could run it (free it). */
int shim_job_run(struct shim_job *job, long long timeout_ns);
int shim_job_status(const struct shim_job *job);
/* What the tool reported from its own thread (valid until shim_job_free). */
struct shim_result *shim_job_result(struct shim_job *job);
/* Runs fn with *res collecting what it reports from this thread. */
int shim_run_reporting(clara_tool_fn fn, uintptr_t userdata, const char *args, struct shim_result *res);
/* Drops the caller's reference; the job is freed once the worker has let
 * go of it too. */
void shim_job_free(struct shim_job *job);

#endif
