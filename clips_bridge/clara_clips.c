/* SPDX-License-Identifier: MIT */
/*
 * clara_clips.c - Clara's user-defined functions for CLIPS 6.30 and 6.4x.
 *
 * The first block adapts the two CLIPS APIs to a handful of helpers (read a
 * string argument, return a string, a symbol, a number). Every function is
 * then written once against those helpers, and registered from one table.
 * Every string Clara returns is freed on every path.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clips.h"

#include "clara.h"
#include "clara_clips.h"

/* ---- Compatibility: CLIPS 6.4x or 6.30 ----------------------------------- */

#if defined(UNBOUNDED) && defined(UDFHasNextArgument)
#define CLARA_CLIPS_64 1

/* One call of a user-defined function. */
struct udf_call {
    Environment *env;
    UDFContext *context;
    UDFValue *ret;
    const char *name;
};

static int arg_string(struct udf_call *c, unsigned int n, const char **out) {
    UDFValue v;
    if (!UDFNthArgument(c->context, n, STRING_BIT, &v)) return 0;
    *out = v.lexemeValue->contents;
    return 1;
}

static void ret_string(struct udf_call *c, const char *s) { c->ret->lexemeValue = CreateString(c->env, s); }
static void ret_symbol(struct udf_call *c, const char *s) { c->ret->lexemeValue = CreateSymbol(c->env, s); }
static void ret_integer(struct udf_call *c, long long n) { c->ret->integerValue = CreateInteger(c->env, n); }
static void ret_float(struct udf_call *c, double d) { c->ret->floatValue = CreateFloat(c->env, d); }

/* Reports an error the CLIPS way; the command loop clears the error state
 * before the next command, so the next call works. */
static void fail(struct udf_call *c, const char *message) {
    PrintErrorID(c->env, "CLARA", 1, false);
    WriteString(c->env, STDERR, c->name);
    WriteString(c->env, STDERR, ": ");
    WriteString(c->env, STDERR, message);
    WriteString(c->env, STDERR, "\n");
    SetEvaluationError(c->env, true);
}

/* CLIPS 6.4 presets the result to void; FALSE matches 6.30 on errors. */
#define UDF_WRAPPER(fn, lisp_name)                                              \
    static void fn##_udf(Environment *env, UDFContext *context, UDFValue *ret) { \
        struct udf_call c = {env, context, ret, lisp_name};                     \
        ret->lexemeValue = FalseSymbol(env);                                    \
        fn(&c);                                                                 \
    }

#else /* CLIPS 6.30 */

struct udf_call {
    void *env;
    DATA_OBJECT_PTR ret;
    const char *name;
};

static int arg_string(struct udf_call *c, unsigned int n, const char **out) {
    DATA_OBJECT v;
    if (EnvArgTypeCheck(c->env, c->name, (int)n, STRING, &v) == FALSE) return 0;
    *out = DOToString(v);
    return 1;
}

static void set(struct udf_call *c, unsigned short type, void *value) {
    SetpType(c->ret, type);
    SetpValue(c->ret, value);
}

static void ret_string(struct udf_call *c, const char *s) { set(c, STRING, EnvAddSymbol(c->env, s)); }
static void ret_symbol(struct udf_call *c, const char *s) { set(c, SYMBOL, EnvAddSymbol(c->env, s)); }
static void ret_integer(struct udf_call *c, long long n) { set(c, INTEGER, EnvAddLong(c->env, n)); }
static void ret_float(struct udf_call *c, double d) { set(c, FLOAT, EnvAddDouble(c->env, d)); }

static void fail(struct udf_call *c, const char *message) {
    PrintErrorID(c->env, "CLARA", 1, FALSE);
    EnvPrintRouter(c->env, WERROR, c->name);
    EnvPrintRouter(c->env, WERROR, ": ");
    EnvPrintRouter(c->env, WERROR, message);
    EnvPrintRouter(c->env, WERROR, "\n");
    SetEvaluationError(c->env, TRUE);
}

/* 6.30 checks argument counts only when the function asks. */
static int arg_count(struct udf_call *c, int n) {
    return EnvArgCountCheck(c->env, c->name, EXACTLY, n) != -1;
}

#define UDF_WRAPPER(fn, lisp_name)                            \
    static void fn##_udf(void *env, DATA_OBJECT_PTR ret) {    \
        struct udf_call c = {env, ret, lisp_name};            \
        ret_symbol(&c, "FALSE");                              \
        if (arg_count(&c, fn##_args)) fn(&c);                 \
    }

#endif

/* ---- The functions ------------------------------------------------------ */

/* (clara-evaluate ?json) -> the envelope, a STRING. */
enum { clara_evaluate_fn_args = 1 };
static void clara_evaluate_fn(struct udf_call *c) {
    const char *request;
    char *response;
    if (!arg_string(c, 1, &request)) return;
    response = clara_evaluate(request);
    if (response == NULL) {
        fail(c, "out of memory");
        return;
    }
    ret_string(c, response);
    clara_free_string(response);
}

/* (clara-emit ?json) -> what the event fired, an envelope STRING. */
enum { clara_emit_fn_args = 1 };
static void clara_emit_fn(struct udf_call *c) {
    const char *event;
    char *response;
    if (!arg_string(c, 1, &event)) return;
    response = clara_emit(event);
    if (response == NULL) {
        fail(c, "out of memory");
        return;
    }
    ret_string(c, response);
    clara_free_string(response);
}

/* (json-get ?json ?path) -> the value at path, typed for CLIPS. */
enum { json_get_fn_args = 2 };
static void json_get_fn(struct udf_call *c) {
    const char *json, *path;
    char *text = NULL, *end;
    int kind;
    if (!arg_string(c, 1, &json) || !arg_string(c, 2, &path)) return;
    ret_symbol(c, "nil");
    kind = clara_json_get(json, path, &text, NULL);
    switch (kind) {
    case CLARA_JSON_MISSING:
    case CLARA_JSON_NULL:
        break;
    case CLARA_JSON_TRUE:
        ret_symbol(c, "TRUE");
        break;
    case CLARA_JSON_FALSE:
        ret_symbol(c, "FALSE");
        break;
    case CLARA_JSON_INTEGER:
        ret_integer(c, strtoll(text, &end, 10));
        break;
    case CLARA_JSON_FLOAT:
        ret_float(c, strtod(text, &end));
        break;
    case CLARA_JSON_STRING:
    case CLARA_JSON_ARRAY:
    case CLARA_JSON_OBJECT:
        ret_string(c, text);
        break;
    case -CLARA_EINVAL:
        fail(c, "invalid JSON, or a path with an @modifier (write a literal @ as \\@)");
        break;
    default:
        fail(c, clara_strerror(kind));
        break;
    }
    clara_free_string(text);
}

UDF_WRAPPER(clara_evaluate_fn, "clara-evaluate")
UDF_WRAPPER(clara_emit_fn, "clara-emit")
UDF_WRAPPER(json_get_fn, "json-get")

/* ---- Registration ------------------------------------------------------- */

struct udf_entry {
    const char *name;
    unsigned short args;    /* exact argument count */
    const char *returns;    /* 6.4x return types */
    const char *arg_types;  /* 6.4x argument types */
    const char *restrictions; /* 6.30: counts and types; CLIPS keeps the pointer */
#ifdef CLARA_CLIPS_64
    UserDefinedFunction *fn;
#else
    void (*fn)(void *, DATA_OBJECT_PTR);
#endif
    const char *c_name;
};

static const struct udf_entry udfs[] = {
    {"clara-evaluate", 1, "s", "s", "11s", clara_evaluate_fn_udf, "clara_evaluate_fn_udf"},
    {"clara-emit", 1, "s", "s", "11s", clara_emit_fn_udf, "clara_emit_fn_udf"},
    {"json-get", 2, "bdlsy", "s", "22s", json_get_fn_udf, "json_get_fn_udf"},
};

int clara_clips_register(void *environment) {
    size_t i;
    if (environment == NULL) return -CLARA_EINVAL;
    for (i = 0; i < sizeof udfs / sizeof udfs[0]; i++) {
        const struct udf_entry *u = &udfs[i];
#ifdef CLARA_CLIPS_64
        if (AddUDF((Environment *)environment, u->name, u->returns, u->args, u->args, u->arg_types, u->fn,
                   u->c_name, NULL) != AUE_NO_ERROR)
            return -CLARA_EINVAL;
#else
        /* CLIPS 6.30 stores every function as int (*)(void *); cast through
         * a generic function pointer type, as CLIPS's own PTIEF does. */
        if (EnvDefineFunction2(environment, u->name, 'u', (int (*)(void *))(void (*)(void))u->fn, u->c_name,
                               u->restrictions) == 0)
            return -CLARA_EINVAL;
#endif
    }
    return CLARA_OK;
}
