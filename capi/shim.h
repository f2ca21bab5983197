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

/* Calls a C tool, and a tool's free_userdata, for Go. The clara_call handle
 * is an integer id that Go looks up when the tool reports its result. */
int shim_call_tool(clara_tool_fn fn, uintptr_t userdata, const char *arguments, uintptr_t call);
typedef void (*shim_free_fn)(void *);
void shim_free_userdata(shim_free_fn free_userdata, uintptr_t userdata);
void shim_free(void *p);

#endif
