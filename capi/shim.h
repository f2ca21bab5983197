/* shim.h - C helpers that the Go exports in exports.go call.
 * Internal to libclara.so; hidden by clara.map. */
#ifndef CLARA_SHIM_H
#define CLARA_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include "clara.h"

/* Memory Go wrote (strings Clara returns, arguments copied from Go) is
 * written by code valgrind's memcheck cannot follow: it may believe some
 * bytes never written. DEFINED tells it they are (a few instructions when
 * not under valgrind, nothing when the header is absent). */
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define DEFINED(p, n) VALGRIND_MAKE_MEM_DEFINED((p), (n))
#endif
#endif
#ifndef DEFINED
#define DEFINED(p, n) ((void)(p), (void)(n))
#endif

/* Copies n bytes into a fresh malloc'd, NUL-terminated string; NULL if
 * malloc fails. Go's C.CString would abort the process instead. */
char *shim_copy_out(const char *p, size_t n);

/* Calls a log handler: Go cannot call a C function pointer itself.
 * userdata travels as an integer so that Go never holds it as a pointer. */
void shim_call_log(clara_log_fn fn, uintptr_t userdata, int level, const char *message);
void shim_call_event(clara_event_fn fn, uintptr_t userdata, const char *event_json);
char *shim_call_input(clara_input_fn fn, uintptr_t userdata, const char *request_json);
char *shim_call_approval(clara_approval_fn fn, uintptr_t userdata, const char *request_json);
int shim_call_rule_condition(clara_rule_condition_fn fn, uintptr_t userdata, const char *event_json);
char *shim_call_rule_action(clara_rule_action_fn fn, uintptr_t userdata, const char *event_json);

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
    /* Storage a result that fits is copied into instead of a malloc: a
     * worker's job carries some, so that a tool's thread allocates nothing
     * the caller's thread would free (glibc then locks the worker's arena
     * against it). result == room: not malloc'd. */
    char *room;
    size_t room_cap;
    /* shim_call_worker: the result (result_len bytes) was copied into the
     * caller's buffer `out` and result is NULL. */
    int result_in_out;
    /* check_json, set by the caller: the tool returns JSON, so a result it
     * reports from its thread is checked (shim_json_compact), and compact
     * says whether the last one passed: Go takes it as it is. */
    int check_json, compact;
};
void shim_result_clear(struct shim_result *r);
/* report.c: a zeroed shim_result for a toolCall, from slabs the library
 * keeps (NULL when there is no memory), and its return when Go collects
 * the toolCall. What it holds must have been cleared (shim_result_clear).
 * shim_result_counts: how many are handed out, and how many exist. */
struct shim_result *shim_result_new(void);
void shim_result_release(struct shim_result *r);
void shim_result_counts(size_t *out, size_t *made);

/* report.c: 1 when json (n bytes, then a NUL) is exactly one JSON value
 * that Go's protocol.Scan accepts, written compactly (no whitespace between
 * tokens, none around) and nested at most 64 deep; else 0, and Go scans
 * it. */
int shim_json_compact(const char *json, size_t n);

/* Calls a C tool on the calling thread (descriptor "on_caller_thread")
 * with a NUL-terminated copy of args (n bytes, which may be Go memory),
 * collecting its reports into *res (res->call set by the caller); sets
 * res->ran once the tool was called. */
int shim_call_here(clara_tool_fn fn, uintptr_t userdata, const char *args, size_t n, struct shim_result *res);

/* The worker pool of workers.c: runs C tools on threads of their own so
 * that a caller can stop waiting at the deadline. */

/* What shim_call_worker returns when it could not run the tool. */
#define SHIM_NO_MEMORY (-1) /* no memory for the job */
#define SHIM_NO_THREAD (-2) /* no worker free and none could be started */
#define SHIM_NO_MEMORY_RESULT (-3) /* the tool ran; no memory to keep its result */
/* Runs a C tool on a worker thread with a NUL-terminated copy of args (n
 * bytes, which may be Go memory) and waits at most timeout_ns (0: no
 * limit). Returns 1 when it finished: *status is what the tool returned and
 * *res holds what it reported from its own thread (the caller clears it);
 * 0 when the deadline passed (the job is abandoned: Go hears of its end
 * through claraGoJobAbandoned, with res->call); or SHIM_NO_MEMORY,
 * SHIM_NO_THREAD or SHIM_NO_MEMORY_RESULT. res->call is the call's id, set
 * by the caller. A result shorter than out_cap is copied into out (which
 * may be Go memory: it is written before this returns, never after), and
 * res->result_in_out set; a longer one is handed over malloc'd. */
int shim_call_worker(clara_tool_fn fn, uintptr_t userdata, const char *args, size_t n, long long timeout_ns,
                     struct shim_result *res, int *status, char *out, size_t out_cap);
/* report.c: runs fn with *res collecting what it reports from this
 * thread; a report (result_json or message, n bytes, NULL for null or the
 * default message) of call kept with it when it runs on this thread: 1,
 * or 0 when it is not this thread's (or no memory), for Go to take. */
int shim_run_reporting(clara_tool_fn fn, uintptr_t userdata, const char *args, struct shim_result *res);
int shim_report_result(uintptr_t call, const char *result_json, size_t n);
int shim_report_error(uintptr_t call, const char *message, size_t n);

#endif
