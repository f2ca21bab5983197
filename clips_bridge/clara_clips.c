/* SPDX-License-Identifier: MIT */
/*
 * clara_clips.c - Clara's user-defined functions for CLIPS 6.30 and 6.4x.
 *
 * The first block adapts the two CLIPS APIs to a handful of helpers (read an
 * argument, return a string, a symbol, a number, report an error). Every
 * function is then written once against those helpers, and registered from
 * one table (CLARA_UDFS) by one loop. Every string Clara returns is freed on
 * every path.
 *
 * Per environment, registration keeps a small state (struct clara_env) in
 * CLIPS's environment data at position CLARA_CLIPS_DATA_POSITION; CLIPS frees
 * it when the environment is destroyed. It holds the live (clara-json ...)
 * values: an external address type of ours, which no string can forge, so
 * that an ordinary string that looks like JSON always stays a JSON string.
 */
#include <locale.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clips.h"

#include "clara.h"
#include "clara_clips.h"

/* Per environment: the clara-json values alive in it. */
struct json_value {
    struct json_value *prev, *next;
    char text[]; /* one valid JSON value, NUL-terminated */
};

/* CLARA_CLIPS_DATA_POSITION (clara_clips.h) must be one of the positions
 * CLIPS leaves to extensions. */
#if CLARA_CLIPS_DATA_POSITION < USER_ENVIRONMENT_DATA || CLARA_CLIPS_DATA_POSITION >= MAXIMUM_ENVIRONMENT_POSITIONS
#error "CLARA_CLIPS_DATA_POSITION must be from USER_ENVIRONMENT_DATA to MAXIMUM_ENVIRONMENT_POSITIONS - 1"
#endif

#define CLARA_ENV_MAGIC 0x434c5231u /* "CLR1": the layout below */

struct clara_env {
    unsigned magic;
    unsigned short json_type; /* our external address type in this environment */
    struct json_value values; /* sentinel of a circular list */

    /* The tools that read and change this environment (clips_facts, ...)
     * run on Clara's threads, but only while the environment's own thread
     * waits inside a call to Clara (in_clara), one at a time (tool_busy):
     * never concurrently with its rules. */
    void *env;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int in_clara, tool_busy, exposed_eval;
};

#define CLARA_ENV(env) ((struct clara_env *)GetEnvironmentData(env, CLARA_CLIPS_DATA_POSITION))

/* The kinds of CLIPS value the JSON encoder knows. */
enum value_kind {
    V_STRING,
    V_SYMBOL,
    V_INSTANCE_NAME,
    V_INTEGER,
    V_FLOAT,
    V_MULTIFIELD,
    V_JSON, /* a (clara-json ...) value */
    V_OTHER /* fact and instance addresses, other external addresses, void */
};

/* A CLIPS value read from an argument or a multifield item (not CLIPS's own
 * struct field); text and mf point into CLIPS and are valid until the
 * function returns. */
struct cvalue {
    enum value_kind kind;
    const char *text; /* STRING, SYMBOL, INSTANCE_NAME; the JSON text of V_JSON */
    long long integer;
    double real;
    size_t length; /* V_MULTIFIELD: the number of items */
    void *mf;      /* V_MULTIFIELD: the multifield */
    size_t begin;  /* V_MULTIFIELD: index of the first item in mf */
};

static struct json_value *json_value_new(struct clara_env *state, const char *text) {
    size_t n = strlen(text);
    struct json_value *v = malloc(sizeof *v + n + 1);
    if (v == NULL) return NULL;
    memcpy(v->text, text, n + 1);
    v->next = state->values.next;
    v->prev = &state->values;
    v->next->prev = v;
    state->values.next = v;
    return v;
}

static void json_value_free(struct json_value *v) {
    v->prev->next = v->next;
    v->next->prev = v->prev;
    free(v);
}

/* Frees the clara-json values still alive when the environment is
 * destroyed: CLIPS then frees its external addresses without discarding
 * them. CLIPS frees the state itself. */
static void unregister_facts_tools(struct clara_env *st);
static void stream_stop(struct clara_env *st);

static void clara_env_free(struct clara_env *state) {
    if (state == NULL || state->values.next == NULL) return;
    stream_stop(state);
    unregister_facts_tools(state);
    while (state->values.next != &state->values) json_value_free(state->values.next);
}

/* ---- Compatibility: CLIPS 6.4x or 6.30 ----------------------------------- */

#if defined(UNBOUNDED) && defined(UDFHasNextArgument)
#define CLARA_CLIPS_64 1
#define ANY_COUNT UNBOUNDED

/* One call of a user-defined function. */
struct udf_call {
    Environment *env;
    UDFContext *context;
    UDFValue *ret;
    const char *name;
    struct clara_env *state;
};

static unsigned arg_count(struct udf_call *c) { return UDFArgumentCount(c->context); }

static int arg_string(struct udf_call *c, unsigned int n, const char **out) {
    UDFValue v;
    if (!UDFNthArgument(c->context, n, STRING_BIT, &v)) return 0;
    *out = v.lexemeValue->contents;
    return 1;
}

/* Reads one CLIPS value; items of a multifield are never multifields. */
static void read_value(struct udf_call *c, TypeHeader *header, void *value, struct cvalue *f) {
    memset(f, 0, sizeof *f);
    switch (header->type) {
    case STRING_TYPE:
        f->kind = V_STRING;
        f->text = ((CLIPSLexeme *)value)->contents;
        break;
    case SYMBOL_TYPE:
        f->kind = V_SYMBOL;
        f->text = ((CLIPSLexeme *)value)->contents;
        break;
    case INSTANCE_NAME_TYPE:
        f->kind = V_INSTANCE_NAME;
        f->text = ((CLIPSLexeme *)value)->contents;
        break;
    case INTEGER_TYPE:
        f->kind = V_INTEGER;
        f->integer = ((CLIPSInteger *)value)->contents;
        break;
    case FLOAT_TYPE:
        f->kind = V_FLOAT;
        f->real = ((CLIPSFloat *)value)->contents;
        break;
    case EXTERNAL_ADDRESS_TYPE:
        f->kind = V_OTHER;
        if (((CLIPSExternalAddress *)value)->type == c->state->json_type) {
            f->kind = V_JSON;
            f->text = ((struct json_value *)((CLIPSExternalAddress *)value)->contents)->text;
        }
        break;
    default:
        f->kind = V_OTHER;
        break;
    }
}

/* Evaluates argument n (any type); 0 when its evaluation failed. */
static int arg_value(struct udf_call *c, unsigned int n, struct cvalue *f) {
    UDFValue v;
    if (!UDFNthArgument(c->context, n, ANY_TYPE_BITS, &v)) return 0;
    if (v.header->type == MULTIFIELD_TYPE) {
        memset(f, 0, sizeof *f);
        f->kind = V_MULTIFIELD;
        f->mf = v.multifieldValue;
        f->begin = v.begin;
        f->length = v.range;
        return 1;
    }
    read_value(c, v.header, v.value, f);
    return 1;
}

static void multifield_item(struct udf_call *c, const struct cvalue *mf, size_t i, struct cvalue *out) {
    CLIPSValue *item = &((Multifield *)mf->mf)->contents[mf->begin + i];
    read_value(c, item->header, item->value, out);
}

static void ret_string(struct udf_call *c, const char *s) { c->ret->lexemeValue = CreateString(c->env, s); }
static void ret_symbol(struct udf_call *c, const char *s) { c->ret->lexemeValue = CreateSymbol(c->env, s); }
static void ret_integer(struct udf_call *c, long long n) { c->ret->integerValue = CreateInteger(c->env, n); }
static void ret_float(struct udf_call *c, double d) { c->ret->floatValue = CreateFloat(c->env, d); }
static void ret_json(struct udf_call *c, struct json_value *v) {
    c->ret->externalAddressValue = CreateExternalAddress(c->env, v, c->state->json_type);
}

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

/* CLIPS's own "expected argument #n to be of type ..." error. */
static void fail_type(struct udf_call *c, unsigned int n, const char *expected) {
    ExpectedTypeError1(c->env, c->name, n, expected);
    SetEvaluationError(c->env, true);
}

/* CLIPS 6.4 checks argument counts itself and presets the result to void;
 * FALSE matches 6.30 on errors (and the "b" first in every return type makes
 * CLIPS's own argument errors return FALSE too). */
#define UDF_TRAMPOLINE(fn, lisp_name, min, max, returns, arg_types, restrictions)  \
    static void fn##_udf(Environment *env, UDFContext *context, UDFValue *ret) { \
        struct udf_call c = {env, context, ret, lisp_name, CLARA_ENV(env)};      \
        ret->lexemeValue = FalseSymbol(env);                                    \
        fn##_fn(&c);                                                            \
    }

typedef UserDefinedFunction *udf_pointer;

/* External address type callbacks. */
static bool json_discard(Environment *env, void *p) {
    (void)env;
    json_value_free(p);
    return true;
}
static void json_print(Environment *env, const char *logical_name, void *address) {
    WriteString(env, logical_name, "<clara-json ");
    WriteString(env, logical_name, ((struct json_value *)((CLIPSExternalAddress *)address)->contents)->text);
    WriteString(env, logical_name, ">");
}
static void env_cleanup(Environment *env) { clara_env_free(CLARA_ENV(env)); }
#define ENV(e) ((Environment *)(e))

static int assert_text(struct udf_call *c, const char *fact) { return AssertString(c->env, fact) != NULL; }

/* For the facts tools: facts, their templates and slots, evaluation. */
static void *next_fact(void *env, void *fact) { return GetNextFact(ENV(env), fact); }
static const char *fact_template(void *env, void *fact, void **tmpl) {
    (void)env;
    *tmpl = FactDeftemplate(fact);
    return DeftemplateName(*tmpl);
}
static long long fact_index(void *env, void *fact) {
    (void)env;
    return FactIndex(fact);
}
static void *assert_fact(void *env, const char *text) { return AssertString(ENV(env), text); }
static void value_of(struct udf_call *c, CLIPSValue *v, struct cvalue *f) {
    if (v->header->type == MULTIFIELD_TYPE) {
        memset(f, 0, sizeof *f);
        f->kind = V_MULTIFIELD;
        f->mf = v->multifieldValue;
        f->length = v->multifieldValue->length;
        return;
    }
    read_value(c, v->header, v->value, f);
}
/* The slot names of tmpl; an ordered fact's template has one, "implied". */
static void slot_names(struct udf_call *c, void *tmpl, struct cvalue *names) {
    CLIPSValue v;
    DeftemplateSlotNames(tmpl, &v);
    value_of(c, &v, names);
}
static int fact_slot(struct udf_call *c, void *fact, const char *slot, struct cvalue *f) {
    CLIPSValue v;
    if (GetFactSlot(fact, strcmp(slot, "implied") == 0 ? NULL : slot, &v) != GSE_NO_ERROR) return 0;
    value_of(c, &v, f);
    return 1;
}
static int eval_text(struct udf_call *c, const char *expr, struct cvalue *f) {
    CLIPSValue v;
    if (Eval(c->env, expr, &v) != EE_NO_ERROR) return 0;
    value_of(c, &v, f);
    return 1;
}
static int build_text(void *env, const char *construct) { return Build(ENV(env), construct) == BE_NO_ERROR; }
static void print_to(void *env, const char *router, const char *text) { WriteString(ENV(env), router, text); }
static int template_exists(void *env, const char *name) { return FindDeftemplate(ENV(env), name) != NULL; }
static void *find_template(void *env, const char *name) { return FindDeftemplate(ENV(env), name); }
static void on_clear_rebuild(Environment *env, void *context);
static int add_clear_hook(void *env) {
    return AddClearFunction(ENV(env), "clara-reply-template", on_clear_rebuild, -30000, NULL);
}

#else /* CLIPS 6.30 */

#define ANY_COUNT (-1)

struct udf_call {
    void *env;
    DATA_OBJECT_PTR ret;
    const char *name;
    struct clara_env *state;
};

static unsigned arg_count(struct udf_call *c) { return (unsigned)EnvRtnArgCount(c->env); }

static int arg_string(struct udf_call *c, unsigned int n, const char **out) {
    DATA_OBJECT v;
    if (EnvArgTypeCheck(c->env, c->name, (int)n, STRING, &v) == FALSE) return 0;
    *out = DOToString(v);
    return 1;
}

static void read_value(struct udf_call *c, int type, void *value, struct cvalue *f) {
    memset(f, 0, sizeof *f);
    switch (type) {
    case STRING:
        f->kind = V_STRING;
        f->text = ValueToString(value);
        break;
    case SYMBOL:
        f->kind = V_SYMBOL;
        f->text = ValueToString(value);
        break;
    case INSTANCE_NAME:
        f->kind = V_INSTANCE_NAME;
        f->text = ValueToString(value);
        break;
    case INTEGER:
        f->kind = V_INTEGER;
        f->integer = ValueToLong(value);
        break;
    case FLOAT:
        f->kind = V_FLOAT;
        f->real = ValueToDouble(value);
        break;
    case EXTERNAL_ADDRESS:
        f->kind = V_OTHER;
        if (((struct externalAddressHashNode *)value)->type == c->state->json_type) {
            f->kind = V_JSON;
            f->text = ((struct json_value *)ValueToExternalAddress(value))->text;
        }
        break;
    default:
        f->kind = V_OTHER;
        break;
    }
}

static int arg_value(struct udf_call *c, unsigned int n, struct cvalue *f) {
    DATA_OBJECT v;
    EnvRtnUnknown(c->env, (int)n, &v);
    if (GetEvaluationError(c->env)) return 0;
    if (GetType(v) == MULTIFIELD) {
        memset(f, 0, sizeof *f);
        f->kind = V_MULTIFIELD;
        f->mf = GetValue(v);
        f->begin = (size_t)GetDOBegin(v); /* 1-based, as GetMFType counts */
        f->length = (size_t)GetDOLength(v);
        return 1;
    }
    read_value(c, GetType(v), GetValue(v), f);
    return 1;
}

static void multifield_item(struct udf_call *c, const struct cvalue *mf, size_t i, struct cvalue *out) {
    long index = (long)(mf->begin + i);
    read_value(c, GetMFType(mf->mf, index), GetMFValue(mf->mf, index), out);
}

static void set(struct udf_call *c, unsigned short type, void *value) {
    SetpType(c->ret, type);
    SetpValue(c->ret, value);
}

static void ret_string(struct udf_call *c, const char *s) { set(c, STRING, EnvAddSymbol(c->env, s)); }
static void ret_symbol(struct udf_call *c, const char *s) { set(c, SYMBOL, EnvAddSymbol(c->env, s)); }
static void ret_integer(struct udf_call *c, long long n) { set(c, INTEGER, EnvAddLong(c->env, n)); }
static void ret_float(struct udf_call *c, double d) { set(c, FLOAT, EnvAddDouble(c->env, d)); }
static void ret_json(struct udf_call *c, struct json_value *v) {
    set(c, EXTERNAL_ADDRESS, EnvAddExternalAddress(c->env, v, c->state->json_type));
}

static void fail(struct udf_call *c, const char *message) {
    PrintErrorID(c->env, "CLARA", 1, FALSE);
    EnvPrintRouter(c->env, WERROR, c->name);
    EnvPrintRouter(c->env, WERROR, ": ");
    EnvPrintRouter(c->env, WERROR, message);
    EnvPrintRouter(c->env, WERROR, "\n");
    SetEvaluationError(c->env, TRUE);
}

static void fail_type(struct udf_call *c, unsigned int n, const char *expected) {
    ExpectedTypeError1(c->env, c->name, (int)n, expected);
    SetEvaluationError(c->env, TRUE);
}

/* 6.30 checks argument counts only when the function asks. */
static int arg_count_ok(struct udf_call *c, int min, int max) {
    if (min == max) return EnvArgCountCheck(c->env, c->name, EXACTLY, min) != -1;
    if (EnvArgCountCheck(c->env, c->name, AT_LEAST, min) == -1) return 0;
    return max == ANY_COUNT || EnvArgCountCheck(c->env, c->name, NO_MORE_THAN, max) != -1;
}

#define UDF_TRAMPOLINE(fn, lisp_name, min, max, returns, arg_types, restrictions)              \
    static void fn##_udf(void *env, DATA_OBJECT_PTR ret) {                                      \
        struct udf_call c = {env, ret, lisp_name, CLARA_ENV(env)};                              \
        ret_symbol(&c, "FALSE");                                                                \
        if (arg_count_ok(&c, min, max)) fn##_fn(&c);                                            \
    }

typedef void (*udf_pointer)(void *, DATA_OBJECT_PTR);

static intBool json_discard(void *env, void *p) {
    (void)env;
    json_value_free(p);
    return TRUE;
}
static void json_print(void *env, const char *logical_name, void *address) {
    EnvPrintRouter(env, logical_name, "<clara-json ");
    EnvPrintRouter(env, logical_name, ((struct json_value *)ValueToExternalAddress(address))->text);
    EnvPrintRouter(env, logical_name, ">");
}
static void env_cleanup(void *env) { clara_env_free(CLARA_ENV(env)); }
#define ENV(e) (e)

static int assert_text(struct udf_call *c, const char *fact) { return EnvAssertString(c->env, fact) != NULL; }

/* For the facts tools: facts, their templates and slots, evaluation. The
 * DATA_OBJECTs are kept in the udf_call's scratch so that a multifield's
 * items stay reachable while they are read. */
static void *next_fact(void *env, void *fact) { return EnvGetNextFact(env, fact); }
static const char *fact_template(void *env, void *fact, void **tmpl) {
    *tmpl = EnvFactDeftemplate(env, fact);
    return EnvGetDeftemplateName(env, *tmpl);
}
static long long fact_index(void *env, void *fact) { return EnvFactIndex(env, fact); }
static void *assert_fact(void *env, const char *text) { return EnvAssertString(env, text); }
static void value_of(struct udf_call *c, DATA_OBJECT *v, struct cvalue *f) {
    if (GetpType(v) == MULTIFIELD) {
        memset(f, 0, sizeof *f);
        f->kind = V_MULTIFIELD;
        f->mf = GetpValue(v);
        f->begin = (size_t)GetpDOBegin(v);
        f->length = (size_t)GetpDOLength(v);
        return;
    }
    read_value(c, GetpType(v), GetpValue(v), f);
}
static void slot_names(struct udf_call *c, void *tmpl, struct cvalue *names) {
    DATA_OBJECT v;
    EnvDeftemplateSlotNames(c->env, tmpl, &v);
    value_of(c, &v, names);
}
static int fact_slot(struct udf_call *c, void *fact, const char *slot, struct cvalue *f) {
    DATA_OBJECT v;
    if (!EnvGetFactSlot(c->env, fact, strcmp(slot, "implied") == 0 ? NULL : slot, &v)) return 0;
    value_of(c, &v, f);
    return 1;
}
static int eval_text(struct udf_call *c, const char *expr, struct cvalue *f) {
    DATA_OBJECT v;
    if (!EnvEval(c->env, expr, &v)) return 0;
    value_of(c, &v, f);
    return 1;
}
static int build_text(void *env, const char *construct) { return EnvBuild(env, construct) != 0; }
static void print_to(void *env, const char *router, const char *text) { EnvPrintRouter(env, router, text); }
static int template_exists(void *env, const char *name) { return EnvFindDeftemplate(env, name) != NULL; }
static void *find_template(void *env, const char *name) { return EnvFindDeftemplate(env, name); }
static void on_clear_rebuild(void *env);
static int add_clear_hook(void *env) { return EnvAddClearFunction(env, "clara-reply-template", on_clear_rebuild, -30000) != 0; }
typedef struct FunctionDefinition FunctionDefinition;

#endif

/* ---- JSON text ---------------------------------------------------------- */

/* A growing malloc'd buffer; failed is set once malloc fails. */
struct buf {
    char *data;
    size_t len, cap;
    int failed;
};

static void buf_put(struct buf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->cap - b->len <= n) {
        size_t cap = b->cap ? b->cap : 256;
        char *grown;
        while (cap - b->len <= n) {
            if (cap > SIZE_MAX / 2) {
                b->failed = 1;
                return;
            }
            cap *= 2;
        }
        grown = realloc(b->data, cap);
        if (grown == NULL) {
            b->failed = 1;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void buf_str(struct buf *b, const char *s) { buf_put(b, s, strlen(s)); }

/* Length of the UTF-8 sequence starting at s (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF), or 0 if it is not one. */
static size_t utf8_sequence(const unsigned char *s) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) return (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80) return 0;
        if (c == 0xe0 && s[1] < 0xa0) return 0; /* overlong */
        if (c == 0xed && s[1] > 0x9f) return 0; /* surrogate */
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80) return 0;
        if (c == 0xf0 && s[1] < 0x90) return 0; /* overlong */
        if (c == 0xf4 && s[1] > 0x8f) return 0; /* above U+10FFFF */
        return 4;
    }
    return 0;
}

/* Appends s as a JSON string; 0 if s is not valid UTF-8. */
static int buf_json_string(struct buf *b, const char *s) {
    const unsigned char *p = (const unsigned char *)s, *run = p;
    buf_put(b, "\"", 1);
    while (*p != '\0') {
        const char *escape = NULL;
        char hex[8];
        size_t n;
        switch (*p) {
        case '"': escape = "\\\""; break;
        case '\\': escape = "\\\\"; break;
        case '\n': escape = "\\n"; break;
        case '\r': escape = "\\r"; break;
        case '\t': escape = "\\t"; break;
        case '\b': escape = "\\b"; break;
        case '\f': escape = "\\f"; break;
        default:
            if (*p < 0x20) {
                snprintf(hex, sizeof hex, "\\u%04x", *p);
                escape = hex;
            }
        }
        if (escape != NULL) {
            buf_put(b, (const char *)run, (size_t)(p - run));
            buf_str(b, escape);
            run = ++p;
            continue;
        }
        n = utf8_sequence(p);
        if (n == 0) return 0;
        p += n;
    }
    buf_put(b, (const char *)run, (size_t)(p - run));
    buf_put(b, "\"", 1);
    return 1;
}

/* Appends a finite double so that it reads back as the same double and as a
 * float (1.0, not 1), whatever LC_NUMERIC the program set. */
static void buf_float(struct buf *b, double d) {
    char text[40];
    const char *point = localeconv()->decimal_point;
    int precision;
    for (precision = 15; precision <= 17; precision++) {
        snprintf(text, sizeof text, "%.*g", precision, d);
        if (strtod(text, NULL) == d) break;
    }
    if (point != NULL && point[0] != '\0' && strcmp(point, ".") != 0) {
        char *at = strstr(text, point);
        if (at != NULL) {
            size_t pl = strlen(point);
            *at = '.';
            memmove(at + 1, at + pl, strlen(at + pl) + 1);
        }
    }
    if (strpbrk(text, ".eE") == NULL) strcat(text, ".0");
    buf_str(b, text);
}

/* fail() with a printf-style message. */
static void failf(struct udf_call *c, const char *format, ...) {
    char message[512];
    va_list ap;
    va_start(ap, format);
    vsnprintf(message, sizeof message, format, ap);
    va_end(ap);
    fail(c, message);
}

/* Appends the JSON form of one value (argument n, or an item of it); on a
 * value JSON cannot hold, reports the error and returns 0. */
static int buf_value(struct udf_call *c, struct buf *b, const struct cvalue *f, unsigned int n, int item) {
    char number[32];
    if (f->kind == V_SYMBOL) {
        const char *literal = strcmp(f->text, "TRUE") == 0    ? "true"
                              : strcmp(f->text, "FALSE") == 0 ? "false"
                              : strcmp(f->text, "nil") == 0   ? "null"
                                                              : NULL;
        if (literal != NULL) {
            buf_str(b, literal);
            return 1;
        }
    }
    switch (f->kind) {
    case V_SYMBOL: /* any other symbol is a string */
    case V_STRING:
    case V_INSTANCE_NAME:
        if (buf_json_string(b, f->text)) return 1;
        failf(c, "argument #%u: a string that is not valid UTF-8", n);
        return 0;
    case V_INTEGER:
        snprintf(number, sizeof number, "%lld", f->integer);
        buf_str(b, number);
        return 1;
    case V_FLOAT:
        if (!isfinite(f->real)) {
            failf(c, "argument #%u: an infinite or NaN float, which JSON cannot represent", n);
            return 0;
        }
        buf_float(b, f->real);
        return 1;
    case V_JSON:
        buf_str(b, f->text);
        return 1;
    case V_MULTIFIELD: {
        size_t i;
        buf_put(b, "[", 1);
        for (i = 0; i < f->length; i++) {
            struct cvalue it;
            multifield_item(c, f, i, &it);
            if (i > 0) buf_put(b, ",", 1);
            if (!buf_value(c, b, &it, n, 1)) return 0;
        }
        buf_put(b, "]", 1);
        return 1;
    }
    default:
        fail_type(c, n,
                  item ? "multifield of strings, symbols, numbers or clara-json values"
                       : "string, symbol, number, multifield or clara-json value");
        return 0;
    }
}

/* ---- The environment's own thread and Clara's --------------------------- */

/* The environment's thread is about to wait inside Clara: the facts tools
 * may run now. */
static void enter_clara(struct clara_env *st) {
    if (st == NULL || st->env == NULL) return;
    pthread_mutex_lock(&st->mu);
    st->in_clara++;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

/* Back from Clara: wait for a facts tool still working, then own the
 * environment again. */
static void leave_clara(struct clara_env *st) {
    if (st == NULL || st->env == NULL) return;
    pthread_mutex_lock(&st->mu);
    while (st->tool_busy) pthread_cond_wait(&st->cv, &st->mu);
    st->in_clara--;
    pthread_mutex_unlock(&st->mu);
}

static char *evaluate_serving(struct clara_env *st, const char *request) {
    char *r;
    enter_clara(st);
    r = clara_evaluate(request);
    leave_clara(st);
    return r;
}

/* A facts tool (on a Clara thread) takes the environment: only while its
 * thread waits inside Clara, one tool at a time; it waits at most
 * wait_secs for that. 0: it never came. */
static int env_acquire(struct clara_env *st, int wait_secs) {
    struct timespec until;
    int ok = 1;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += wait_secs;
    pthread_mutex_lock(&st->mu);
    while (!(st->in_clara > 0 && !st->tool_busy)) {
        if (pthread_cond_timedwait(&st->cv, &st->mu, &until) == ETIMEDOUT) {
            ok = 0;
            break;
        }
    }
    if (ok) st->tool_busy = 1;
    pthread_mutex_unlock(&st->mu);
    return ok;
}

static void env_release(struct clara_env *st) {
    pthread_mutex_lock(&st->mu);
    st->tool_busy = 0;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

/* ---- The functions ------------------------------------------------------ */

/* Returns Clara's envelope as a STRING, freeing it. */
static void ret_envelope(struct udf_call *c, char *response) {
    if (response == NULL) {
        fail(c, "out of memory");
        return;
    }
    ret_string(c, response);
    clara_free_string(response);
}

/* The request as JSON when it is not JSON but JSON5, as people write it
 * by hand ({tool:'echo', arguments:{n:1}}); NULL otherwise. Asked only
 * once Clara refused the text as JSON: strict requests never come here. */
static char *json5_request(const char *request) {
    char *json = NULL;
    if (clara_json5_to_json(request, &json) == CLARA_OK) return json;
    clara_free_string(json);
    return NULL;
}

/* Whether an envelope is Clara's refusal of a request that is not JSON.
 * An envelope's status comes first: a success is told by its first bytes,
 * without asking Clara to read it (which cost every call a second trip
 * into Go, about as much as the call itself). */
static int not_json(const char *envelope) {
    char *code = NULL;
    int yes;
    if (envelope == NULL || strncmp(envelope, "{\"status\":\"error\"", 17) != 0) return 0;
    yes = clara_json_get(envelope, "error", &code, NULL) == CLARA_JSON_STRING && strcmp(code, "invalid_json") == 0;
    clara_free_string(code);
    return yes;
}

/* Evaluates a request written by hand: JSON, or failing that JSON5. */
static char *evaluate_relaxed(struct clara_env *st, const char *request) {
    char *r = evaluate_serving(st, request), *json;
    if (not_json(r) && (json = json5_request(request)) != NULL) {
        clara_free_string(r);
        r = evaluate_serving(st, json);
        clara_free_string(json);
    }
    return r;
}

/* (clara-evaluate ?json) -> the envelope, a STRING. */
static void clara_evaluate_fn(struct udf_call *c) {
    const char *request;
    if (arg_string(c, 1, &request)) ret_envelope(c, evaluate_relaxed(c->state, request));
}

/* (clara-evaluate-json ?json) -> the envelope as a clara-json value, which
 * get-field reads and clara-call passes on as JSON (seed 000's proposed
 * API). */
static void clara_evaluate_json_fn(struct udf_call *c) {
    const char *request;
    char *r;
    struct json_value *v;
    if (!arg_string(c, 1, &request)) return;
    r = evaluate_relaxed(c->state, request);
    if (r == NULL) {
        fail(c, "out of memory");
        return;
    }
    v = json_value_new(c->state, r);
    clara_free_string(r);
    if (v == NULL) {
        fail(c, "out of memory");
        return;
    }
    ret_json(c, v);
}

/* (clara-emit ?json) -> what the event fired, an envelope STRING. */
static void clara_emit_fn(struct udf_call *c) {
    const char *event;
    if (arg_string(c, 1, &event)) {
        char *r;
        enter_clara(c->state);
        r = clara_emit(event);
        leave_clara(c->state);
        ret_envelope(c, r);
    }
}

/* Returns the value at path in json, typed for CLIPS; the kind found (a
 * negative code once it reported an error). */
static int ret_json_at(struct udf_call *c, const char *json, const char *path);

/* (json-get ?json ?path) -> the value at path, typed for CLIPS. */
static void json_get_fn(struct udf_call *c) {
    const char *json, *path;
    if (!arg_string(c, 1, &json) || !arg_string(c, 2, &path)) return;
    ret_json_at(c, json, path);
}

/* (get-field ?response "field") -> a field of a response (a clara-json
 * value of clara-evaluate-json, or an envelope STRING): the envelope's own
 * (status, tool, error, message) or else its result's, as seed 000's flat
 * responses had them; the path is json-get's. */
static void get_field_fn(struct udf_call *c) {
    struct cvalue f;
    const char *path;
    char *result_path;
    size_t n;
    if (!arg_value(c, 1, &f) || !arg_string(c, 2, &path)) return;
    if (f.kind != V_JSON && f.kind != V_STRING) {
        fail_type(c, 1, "clara-json value or string");
        return;
    }
    if (ret_json_at(c, f.text, path) != CLARA_JSON_MISSING || path[0] == '\0') return;
    n = strlen(path) + sizeof "result.";
    result_path = malloc(n);
    if (result_path == NULL) {
        fail(c, "out of memory");
        return;
    }
    snprintf(result_path, n, "result.%s", path);
    ret_json_at(c, f.text, result_path);
    free(result_path);
}

static int ret_json_at(struct udf_call *c, const char *json, const char *path) {
    char *text = NULL, *end;
    size_t length = 0;
    int kind;
    ret_symbol(c, "nil");
    kind = clara_json_get(json, path, &text, &length);
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
        /* A CLIPS string ends at its first NUL: say so rather than hand
         * back a shorter string as if it were the value. */
        if (text != NULL && strlen(text) != length) {
            fail(c, "the string at this path holds a NUL character (\\u0000), which a CLIPS string cannot; "
                    "read the JSON of its parent instead");
            break;
        }
        ret_string(c, text);
        break;
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
    return kind;
}

/* (clara-json ?text) -> a value that clara-call sends as the JSON it holds.
 * The text must be exactly one JSON value, so it cannot reach outside its
 * place in the request. */
static void clara_json_fn(struct udf_call *c) {
    const char *text;
    char *ignored = NULL;
    struct json_value *v;
    int kind;
    if (!arg_string(c, 1, &text)) return;
    kind = clara_json_get(text, "", &ignored, NULL);
    clara_free_string(ignored);
    if (kind == -CLARA_EINVAL) {
        fail(c, "the argument is not one valid JSON value");
        return;
    }
    if (kind < 0) {
        fail(c, clara_strerror(kind));
        return;
    }
    v = json_value_new(c->state, text);
    if (v == NULL) {
        fail(c, "out of memory");
        return;
    }
    ret_json(c, v);
}

/* The keywords of clara-call: the request fields they set. */
static const struct {
    const char *keyword, *field;
} call_keywords[] = {
    {":session", "session"},
    {":policy", "policy"},
    {":id", "id"},
    {":trace", "trace"},
};
#define N_CALL_KEYWORDS (sizeof call_keywords / sizeof call_keywords[0])

/* A key of clara-call's arguments, as it stands escaped in the buffer. */
struct key_span {
    size_t start, len;
};

/* (clara-call TOOL [key value]... [:session S] [:policy P] [:id X] [:trace B])
 * -> the envelope, a STRING. */
static void clara_call_fn(struct udf_call *c) {
    unsigned int n = arg_count(c), i;
    struct buf request = {0}, fields = {0};
    struct key_span *keys = NULL;
    size_t nkeys = 0, k;
    unsigned seen = 0;
    struct cvalue f;
    int ok = 0;

    keys = malloc(sizeof *keys * (n / 2 + 1));
    if (keys == NULL) {
        fail(c, "out of memory");
        return;
    }
    if (!arg_value(c, 1, &f)) goto done;
    if (f.kind != V_SYMBOL && f.kind != V_STRING) {
        fail_type(c, 1, "symbol or string");
        goto done;
    }
    buf_str(&request, "{\"tool\":");
    if (!buf_json_string(&request, f.text)) {
        failf(c, "argument #1: a string that is not valid UTF-8");
        goto done;
    }
    buf_str(&request, ",\"arguments\":{");
    for (i = 2; i <= n; i += 2) {
        struct buf *out = &request;
        if (!arg_value(c, i, &f)) goto done;
        if (f.kind != V_SYMBOL && f.kind != V_STRING) {
            fail_type(c, i, "symbol or string");
            goto done;
        }
        if (i + 1 > n) {
            failf(c, "%s has no value (arguments come as key value pairs)", f.text);
            goto done;
        }
        if (f.kind == V_SYMBOL && f.text[0] == ':') {
            for (k = 0; k < N_CALL_KEYWORDS && strcmp(f.text, call_keywords[k].keyword) != 0; k++) continue;
            if (k == N_CALL_KEYWORDS) {
                failf(c, "unknown keyword %s (the keywords are :session, :policy, :id and :trace)", f.text);
                goto done;
            }
            if (seen & (1u << k)) {
                failf(c, "%s is given twice", f.text);
                goto done;
            }
            seen |= 1u << k;
            out = &fields;
            buf_str(out, ",\"");
            buf_str(out, call_keywords[k].field);
            buf_str(out, "\":");
        } else {
            struct key_span span;
            if (nkeys > 0) buf_put(out, ",", 1);
            span.start = request.len;
            if (!buf_json_string(out, f.text)) {
                failf(c, "argument #%u: a string that is not valid UTF-8", i);
                goto done;
            }
            span.len = request.len - span.start;
            for (k = 0; k < nkeys && !request.failed; k++) {
                if (keys[k].len == span.len &&
                    memcmp(request.data + keys[k].start, request.data + span.start, span.len) == 0) {
                    failf(c, "the argument %s is given twice", f.text);
                    goto done;
                }
            }
            keys[nkeys++] = span;
            buf_put(out, ":", 1);
        }
        if (!arg_value(c, i + 1, &f)) goto done;
        if (!buf_value(c, out, &f, i + 1, 0)) goto done;
    }
    buf_put(&request, "}", 1);
    if (fields.len > 0) buf_put(&request, fields.data, fields.len);
    buf_put(&request, "}", 1);
    if (request.failed || fields.failed) {
        fail(c, "out of memory");
        goto done;
    }
    ok = 1;
done:
    if (ok) ret_envelope(c, evaluate_serving(c->state, request.data));
    free(request.data);
    free(fields.data);
    free(keys);
}

/* ---- Questions of ask_user ---------------------------------------------- */

/*
 * The bridge is the input handler of Clara (clara_set_input_handler) while
 * an environment owns the facts tools. A question arrives on a Clara
 * thread, which waits here until the program answers with (clara-answer
 * ?id "text"), or until the question can no longer be answered: its call
 * finished (clara-poll collected it) or was cancelled, or the environment
 * goes. (clara-poll) asserts a (clara-input-required ...) fact for each
 * new question. A question of a call the program cannot answer because it
 * waits for that very call is declined at once: a synchronous chat
 * (clara-evaluate, no handle) and the call (clara-eval-result ?h) waits
 * for.
 */
struct input_question {
    struct input_question *next;
    long long id, handle;
    char *prompt, *session;
    int announced, done;
    char *answer; /* malloc'd, handed to Clara; NULL declines */
};

static pthread_mutex_t input_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t input_cv = PTHREAD_COND_INITIALIZER;
static struct input_question *input_open; /* the questions waiting */
static long long input_awaited;           /* the handle clara-eval-result waits for; 0: none */
static int input_installed;

/* Reads a field of the handler's request; NULL when missing. */
static char *request_field(const char *request, const char *path) {
    char *text = NULL;
    if (clara_json_get(request, path, &text, NULL) <= 0) return NULL;
    return text;
}

/* Marks the questions of handle (every one when 0) declined. Under input_mu. */
static void release_locked(long long handle) {
    struct input_question *q;
    for (q = input_open; q != NULL; q = q->next) {
        if (!q->done && (handle == 0 || q->handle == handle)) q->done = 1;
    }
    pthread_cond_broadcast(&input_cv);
}

static void input_release(long long handle) {
    pthread_mutex_lock(&input_mu);
    release_locked(handle);
    pthread_mutex_unlock(&input_mu);
}

static void input_waiting_on(long long handle) {
    pthread_mutex_lock(&input_mu);
    input_awaited = handle;
    if (handle != 0) release_locked(handle);
    pthread_mutex_unlock(&input_mu);
}

static char *clips_input_handler(void *userdata, const char *request) {
    struct input_question q, **p;
    char *id = request_field(request, "id"), *handle = request_field(request, "handle");
    char *answer = NULL;
    (void)userdata;
    memset(&q, 0, sizeof q);
    q.id = id != NULL ? strtoll(id, NULL, 10) : 0;
    q.handle = handle != NULL ? strtoll(handle, NULL, 10) : 0;
    clara_free_string(id);
    clara_free_string(handle);
    if (q.handle == 0) return NULL; /* a synchronous call: the program waits for it and cannot answer */
    q.prompt = request_field(request, "prompt");
    q.session = request_field(request, "session");
    pthread_mutex_lock(&input_mu);
    if (input_installed && q.prompt != NULL && q.handle != input_awaited) {
        q.next = input_open;
        input_open = &q;
        while (!q.done) pthread_cond_wait(&input_cv, &input_mu);
        for (p = &input_open; *p != &q; p = &(*p)->next) {
        }
        *p = q.next;
        answer = q.answer;
    }
    pthread_mutex_unlock(&input_mu);
    clara_free_string(q.prompt);
    clara_free_string(q.session);
    return answer;
}

static char *clips_approval_handler(void *userdata, const char *request);
static void approvals_reject(long long handle, const char *why);

static void input_install(void) {
    pthread_mutex_lock(&input_mu);
    input_installed = 1;
    pthread_mutex_unlock(&input_mu);
    clara_set_input_handler(clips_input_handler, NULL);
    clara_set_approval_handler(clips_approval_handler, NULL);
}

/* The environment goes: no question can be answered any more. */
static void input_uninstall(void) {
    clara_set_input_handler(NULL, NULL);
    clara_set_approval_handler(NULL, NULL);
    pthread_mutex_lock(&input_mu);
    input_installed = 0;
    release_locked(0);
    pthread_mutex_unlock(&input_mu);
    approvals_reject(0, "the CLIPS environment that would decide it is gone");
}

static void buf_clips_string(struct buf *b, const char *s);

/* Asserts (clara-input-required ...) for each question not yet announced;
 * returns how many. */
static long long input_announce(struct udf_call *c) {
    struct input_question *q;
    long long n = 0;
    pthread_mutex_lock(&input_mu);
    for (q = input_open; q != NULL; q = q->next) {
        struct buf fact = {0};
        char num[64];
        if (q->announced || q->done) continue;
        q->announced = 1;
        snprintf(num, sizeof num, "%lld) (handle %lld", q->id, q->handle);
        buf_str(&fact, "(clara-input-required (id ");
        buf_str(&fact, num);
        buf_str(&fact, ") (session ");
        buf_clips_string(&fact, q->session != NULL ? q->session : "");
        buf_str(&fact, ") (prompt ");
        buf_clips_string(&fact, q->prompt);
        buf_str(&fact, "))");
        if (!fact.failed && assert_text(c, fact.data)) n++;
        free(fact.data);
    }
    pthread_mutex_unlock(&input_mu);
    return n;
}

/* (clara-answer ?id "text") -> TRUE: answers the question ?id of a
 * (clara-input-required) fact; (clara-answer ?id FALSE) declines it. FALSE
 * with an error when no such question is open (answered already, or its
 * call ended). */
static void clara_answer_fn(struct udf_call *c) {
    struct cvalue idv, text;
    struct input_question *q;
    char *answer = NULL;
    if (!arg_value(c, 1, &idv)) return;
    if (idv.kind != V_INTEGER) {
        fail_type(c, 1, "integer");
        return;
    }
    if (!arg_value(c, 2, &text)) return;
    if (text.kind == V_STRING) {
        if ((answer = strdup(text.text)) == NULL) {
            fail(c, "out of memory");
            return;
        }
    } else if (!(text.kind == V_SYMBOL && strcmp(text.text, "FALSE") == 0)) {
        fail_type(c, 2, "string, or FALSE to decline");
        return;
    }
    pthread_mutex_lock(&input_mu);
    for (q = input_open; q != NULL && (q->id != idv.integer || q->done); q = q->next) {
    }
    if (q != NULL) {
        q->answer = answer;
        q->done = 1;
        pthread_cond_broadcast(&input_cv);
    }
    pthread_mutex_unlock(&input_mu);
    if (q == NULL) {
        free(answer);
        failf(c, "no open question %lld: answered already, or its call ended", idv.integer);
        return;
    }
    ret_symbol(c, "TRUE");
}

/* ---- Approvals ---------------------------------------------------------- */

/*
 * The bridge is Clara's approval handler too (clara_set_approval_handler)
 * while an environment owns the facts tools. A tool call that a rule's ask
 * or a tool's needs_approval holds is left pending (the handler returns
 * NULL) and becomes a (clara-approval-required ...) fact at (clara-poll);
 * a rule decides it with (clara-approve ?id) or (clara-reject ?id "why"),
 * through the approval_decide tool. An approval of a call the program
 * waits for, and so cannot decide (a synchronous clara-evaluate, the call
 * clara-eval-result waits for), is rejected at once, saying why. The list
 * shares input_mu with the questions of ask_user.
 */
struct approval {
    struct approval *next;
    long long id, handle;
    char *tool, *reason, *rule, *session, *arguments;
    int announced;
};

static struct approval *approvals_open; /* waiting for a decision, under input_mu */

static void approval_free(struct approval *a) {
    clara_free_string(a->tool);
    clara_free_string(a->reason);
    clara_free_string(a->rule);
    clara_free_string(a->session);
    clara_free_string(a->arguments);
    free(a);
}

/* A rejection as the handler answers it: malloc'd JSON. */
static char *approval_rejection(const char *why) {
    struct buf b = {0};
    buf_str(&b, "{\"decision\":\"reject\",\"reason\":");
    buf_json_string(&b, why);
    buf_str(&b, "}");
    if (b.failed) {
        free(b.data);
        return NULL;
    }
    return b.data;
}

static char *clips_approval_handler(void *userdata, const char *request) {
    struct approval *a;
    char *id = request_field(request, "id"), *handle = request_field(request, "handle");
    long long h = handle != NULL ? strtoll(handle, NULL, 10) : 0;
    (void)userdata;
    if (h == 0) {
        clara_free_string(id);
        return approval_rejection("the CLIPS program waits for this call (clara-evaluate), so no rule can approve it; "
                                  "make the call with clara-evaluate-async");
    }
    a = calloc(1, sizeof *a);
    if (a == NULL) {
        clara_free_string(id);
        clara_free_string(handle);
        return approval_rejection("out of memory");
    }
    a->id = id != NULL ? strtoll(id, NULL, 10) : 0;
    a->handle = h;
    clara_free_string(id);
    clara_free_string(handle);
    a->tool = request_field(request, "tool");
    a->reason = request_field(request, "reason");
    a->rule = request_field(request, "rule");
    a->session = request_field(request, "session");
    a->arguments = request_field(request, "arguments");
    pthread_mutex_lock(&input_mu);
    if (!input_installed || h == input_awaited) {
        pthread_mutex_unlock(&input_mu);
        approval_free(a);
        return approval_rejection("the CLIPS program waits for this call (clara-eval-result), so no rule can approve it");
    }
    a->next = approvals_open;
    approvals_open = a;
    pthread_mutex_unlock(&input_mu);
    return NULL; /* decided by a rule, through approval_decide */
}

/* Takes the approvals of handle (every one when 0) off the list and
 * returns them. Under input_mu. */
static struct approval *approvals_take_locked(long long handle) {
    struct approval *taken = NULL, **p = &approvals_open;
    while (*p != NULL) {
        struct approval *a = *p;
        if (handle == 0 || a->handle == handle) {
            *p = a->next;
            a->next = taken;
            taken = a;
        } else {
            p = &a->next;
        }
    }
    return taken;
}

/* Asks approval_decide; NULL when it decided, else the reason it did not
 * (malloc'd). arguments, when not NULL, is the JSON of edited arguments. */
static char *approval_decide(long long id, int approve, const char *reason, const char *arguments) {
    struct buf req = {0};
    char num[32], *env, *message = NULL;
    snprintf(num, sizeof num, "%lld", id);
    buf_str(&req, "{\"tool\":\"approval_decide\",\"arguments\":{\"id\":");
    buf_str(&req, num);
    buf_str(&req, approve ? ",\"decision\":\"approve\"" : ",\"decision\":\"reject\"");
    if (reason != NULL) {
        buf_str(&req, ",\"reason\":");
        if (!buf_json_string(&req, reason)) req.failed = 1;
    }
    if (arguments != NULL) {
        buf_str(&req, ",\"arguments\":");
        buf_str(&req, arguments);
    }
    buf_str(&req, "}}");
    if (req.failed) {
        free(req.data);
        return strdup("the decision is not valid UTF-8, or out of memory");
    }
    env = clara_evaluate(req.data);
    free(req.data);
    if (env == NULL) return strdup("out of memory");
    if (strncmp(env, "{\"status\":\"success\"", strlen("{\"status\":\"success\"")) == 0) {
        clara_free_string(env);
        return NULL;
    }
    if (clara_json_get(env, "message", &message, NULL) != CLARA_JSON_STRING) message = strdup(env);
    clara_free_string(env);
    return message;
}

/* Rejects every approval of handle (every one when 0) with why: the
 * program can no longer decide them. */
static void approvals_reject(long long handle, const char *why) {
    struct approval *a, *next;
    pthread_mutex_lock(&input_mu);
    a = approvals_take_locked(handle);
    pthread_mutex_unlock(&input_mu);
    for (; a != NULL; a = next) {
        next = a->next;
        clara_free_string(approval_decide(a->id, 0, why, NULL));
        approval_free(a);
    }
}

/* Forgets the approvals of a call that ended. */
static void approvals_drop(long long handle) {
    struct approval *a, *next;
    pthread_mutex_lock(&input_mu);
    a = approvals_take_locked(handle);
    pthread_mutex_unlock(&input_mu);
    for (; a != NULL; a = next) {
        next = a->next;
        approval_free(a);
    }
}

/* Asserts (clara-approval-required ...) for each approval not yet
 * announced; returns how many. */
static long long approvals_announce(struct udf_call *c) {
    struct approval *a;
    long long n = 0;
    pthread_mutex_lock(&input_mu);
    for (a = approvals_open; a != NULL; a = a->next) {
        struct buf fact = {0};
        char num[64];
        if (a->announced) continue;
        a->announced = 1;
        snprintf(num, sizeof num, "%lld) (handle %lld", a->id, a->handle);
        buf_str(&fact, "(clara-approval-required (id ");
        buf_str(&fact, num);
        buf_str(&fact, ") (tool ");
        buf_clips_string(&fact, a->tool != NULL ? a->tool : "");
        buf_str(&fact, ") (reason ");
        buf_clips_string(&fact, a->reason != NULL ? a->reason : "");
        buf_str(&fact, ") (rule ");
        buf_clips_string(&fact, a->rule != NULL ? a->rule : "");
        buf_str(&fact, ") (session ");
        buf_clips_string(&fact, a->session != NULL ? a->session : "");
        buf_str(&fact, ") (arguments ");
        buf_clips_string(&fact, a->arguments != NULL ? a->arguments : "{}");
        buf_str(&fact, "))");
        if (!fact.failed && assert_text(c, fact.data)) n++;
        free(fact.data);
    }
    pthread_mutex_unlock(&input_mu);
    return n;
}

/* Takes approval id off the list once decided. */
static void approval_decided(long long id) {
    struct approval *a, **p;
    pthread_mutex_lock(&input_mu);
    for (p = &approvals_open; *p != NULL && (*p)->id != id; p = &(*p)->next) {
    }
    a = *p;
    if (a != NULL) *p = a->next;
    pthread_mutex_unlock(&input_mu);
    if (a != NULL) approval_free(a);
}

/* approval_udf decides the approval whose id is the first argument: with
 * approve, the optional second argument is the arguments to run with;
 * without, it is the reason the caller is told. */
static void approval_udf(struct udf_call *c, int approve) {
    struct cvalue idv;
    const char *text = NULL;
    char *why;
    if (!arg_value(c, 1, &idv)) return;
    if (idv.kind != V_INTEGER) {
        fail_type(c, 1, "integer");
        return;
    }
    if (arg_count(c) > 1 && !arg_string(c, 2, &text)) return;
    why = approve ? approval_decide(idv.integer, 1, NULL, text) : approval_decide(idv.integer, 0, text, NULL);
    if (why != NULL) {
        failf(c, "approval %lld: %s", idv.integer, why);
        free(why);
        return;
    }
    approval_decided(idv.integer);
    ret_symbol(c, "TRUE");
}

/* (clara-approve ?id) -> TRUE: approves the call of a
 * (clara-approval-required) fact; (clara-approve ?id "{json}") approves it
 * with those arguments instead. FALSE with an error when Clara refuses
 * (no such approval waits, arguments that do not match the tool's
 * schema: then it waits on). */
static void clara_approve_fn(struct udf_call *c) { approval_udf(c, 1); }

/* (clara-reject ?id "why") -> TRUE: rejects the call of a
 * (clara-approval-required) fact; the model (or the caller) is told why.
 * FALSE with an error when no such approval waits. */
static void clara_reject_fn(struct udf_call *c) { approval_udf(c, 0); }

/* ---- Asynchronous calls ------------------------------------------------- */

/* The template of the facts (clara-poll) asserts, one per finished call. */
#define CLARA_REPLY_TEMPLATE                                                                          \
    "(deftemplate clara-reply \"An asynchronous call of Clara that finished (clara-poll).\""            \
    " (slot handle (type INTEGER)) (slot status (type SYMBOL)) (slot tool (type STRING))"             \
    " (slot json (type STRING)))"

static int constructs_ready(void *env) {
    return GetEnvironmentData(ENV(env), CONSTRUCT_DATA) != NULL && GetEnvironmentData(ENV(env), DEFTEMPLATE_DATA) != NULL;
}

/* The template of the questions of ask_user that (clara-poll) asserts. */
#define CLARA_INPUT_TEMPLATE                                                                               \
    "(deftemplate clara-input-required \"A question of ask_user: answer with (clara-answer ?id \\\"text\\\").\""  \
    " (slot id (type INTEGER)) (slot handle (type INTEGER)) (slot session (type STRING))"                  \
    " (slot prompt (type STRING)))"

/* The template of the streamed tokens that (clara-poll) asserts while
 * (clara-stream facts) is on: seq makes two equal pieces two facts. */
#define CLARA_TOKEN_TEMPLATE                                                                            \
    "(deftemplate clara-token \"A piece of a streamed answer of a chat (clara-stream facts).\""          \
    " (slot seq (type INTEGER)) (slot handle (type INTEGER)) (slot session (type STRING))"             \
    " (slot text (type STRING)))"

/* The template of the tool calls waiting for approval that (clara-poll)
 * asserts. */
#define CLARA_APPROVAL_TEMPLATE                                                                             \
    "(deftemplate clara-approval-required \"A tool call waiting for approval: decide with (clara-approve ?id)" \
    " or (clara-reject ?id \\\"why\\\").\" (slot id (type INTEGER)) (slot handle (type INTEGER))"                \
    " (slot tool (type STRING)) (slot reason (type STRING)) (slot rule (type STRING))"                      \
    " (slot session (type STRING)) (slot arguments (type STRING)))"

static int define_reply_template(void *env) {
    return (template_exists(env, "clara-reply") || build_text(env, CLARA_REPLY_TEMPLATE)) &&
           (template_exists(env, "clara-input-required") || build_text(env, CLARA_INPUT_TEMPLATE)) &&
           (template_exists(env, "clara-token") || build_text(env, CLARA_TOKEN_TEMPLATE)) &&
           (template_exists(env, "clara-approval-required") || build_text(env, CLARA_APPROVAL_TEMPLATE));
}

/* (clear) removes every construct: the template comes back after it. */
#ifdef CLARA_CLIPS_64
static void on_clear_rebuild(Environment *env, void *context) {
    (void)context;
    define_reply_template(env);
}
#else
static void on_clear_rebuild(void *env) { define_reply_template(env); }
#endif

/* Reads argument n as a handle (an INTEGER). */
static int arg_handle(struct udf_call *c, unsigned int n, int64_t *out) {
    struct cvalue f;
    if (!arg_value(c, n, &f)) return 0;
    if (f.kind != V_INTEGER) {
        fail_type(c, n, "integer");
        return 0;
    }
    *out = (int64_t)f.integer;
    return 1;
}

/* (clara-evaluate-async ?json) -> the call's handle, an INTEGER; FALSE
 * (with an error) when Clara refuses the request. */
static void clara_evaluate_async_fn(struct udf_call *c) {
    const char *request;
    int64_t h;
    if (!arg_string(c, 1, &request)) return;
    h = clara_submit(request);
    if (h == -CLARA_EINVAL) {
        char *json = json5_request(request); /* written by hand: JSON5 too */
        if (json != NULL) {
            h = clara_submit(json);
            clara_free_string(json);
        }
    }
    if (h > 0) {
        ret_integer(c, (long long)h);
        return;
    }
    failf(c, "the request was refused: %s (Clara logs the reason at warn level)", clara_strerror((int)h));
}

/* (clara-eval-complete ?h) -> TRUE when the call's answer is ready. */
static void clara_eval_complete_fn(struct udf_call *c) {
    int64_t h;
    int ready;
    if (!arg_handle(c, 1, &h)) return;
    ready = clara_ready(h);
    if (ready < 0) {
        failf(c, "no call %lld: never submitted, or already collected", (long long)h);
        return;
    }
    ret_symbol(c, ready ? "TRUE" : "FALSE");
}

/* (clara-eval-result ?h) -> the envelope, waiting for it; the handle is
 * then spent. */
static void clara_eval_result_fn(struct udf_call *c) {
    int64_t h;
    if (arg_handle(c, 1, &h)) {
        char *r;
        input_waiting_on(h);
        approvals_reject(h, "the CLIPS program waits for this call (clara-eval-result), so no rule can approve it");
        enter_clara(c->state);
        r = clara_wait(h, -1);
        leave_clara(c->state);
        input_waiting_on(0);
        ret_envelope(c, r);
    }
}

/* (clara-eval-cancel ?h) -> TRUE; the answer is then a tool_failed
 * envelope, ready at once. */
static void clara_eval_cancel_fn(struct udf_call *c) {
    int64_t h;
    if (!arg_handle(c, 1, &h)) return;
    if (clara_cancel(h) != CLARA_OK) {
        failf(c, "no call %lld: never submitted, or already collected", (long long)h);
        return;
    }
    input_release(h);
    approvals_drop(h);
    ret_symbol(c, "TRUE");
}

/* Appends s to b as the body of a CLIPS string literal. */
static void buf_clips_string(struct buf *b, const char *s) {
    buf_put(b, "\"", 1);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') buf_put(b, "\\", 1);
        buf_put(b, s, 1);
    }
    buf_put(b, "\"", 1);
}

/* Asserts (clara-reply ...) for one finished call, collecting its answer. */
static int assert_reply(struct udf_call *c, int64_t h, const char *tool, const char *status) {
    struct buf fact = {0};
    char num[32];
    int ok;
    char *env = clara_wait(h, 0);
    if (env == NULL) return 0;
    snprintf(num, sizeof num, "%lld", (long long)h);
    buf_str(&fact, "(clara-reply (handle ");
    buf_str(&fact, num);
    buf_str(&fact, ") (status ");
    buf_str(&fact, strcmp(status, "success") == 0 ? "success" : "error");
    buf_str(&fact, ") (tool ");
    buf_clips_string(&fact, tool);
    buf_str(&fact, ") (json ");
    buf_clips_string(&fact, env);
    buf_str(&fact, "))");
    ok = !fact.failed && assert_text(c, fact.data);
    clara_free_string(env);
    free(fact.data);
    return ok;
}

/* ---- Streamed tokens ---------------------------------------------------- */

/*
 * (clara-stream facts) or (clara-stream ROUTER) makes the bridge Clara's
 * event handler: the text pieces of streamed chats (the "token" events of
 * chats with "stream": true) are queued as they come, on Clara's threads,
 * which never wait for the rules; each (clara-poll) hands the queue to the
 * program, as (clara-token (seq) (handle) (session) (text)) facts or
 * printed to the router, before the clara-reply facts of the calls that
 * ended. (clara-stream FALSE) stops. The host's own handler
 * (clara_clips_forward_events) still gets every event.
 */
#define STREAM_MAX_PIECES 65536   /* pieces queued at most; past it the oldest go */
#define STREAM_ROUTER_MAX 64

struct token_piece {
    struct token_piece *next;
    long long handle;
    char *session, *text;
};

static pthread_mutex_t stream_mu = PTHREAD_MUTEX_INITIALIZER;
static struct clara_env *stream_owner;            /* the environment that streams; NULL: none */
static char stream_router[STREAM_ROUTER_MAX + 1]; /* "" for facts */
static struct token_piece *stream_head, *stream_tail;
static long stream_count, stream_dropped;
static long long stream_seq;
static clara_event_fn forward_fn;
static void *forward_userdata;

static void piece_free(struct token_piece *p) {
    clara_free_string(p->session);
    clara_free_string(p->text);
    free(p);
}

/* Clara's event handler while a program streams: queue tokens, forward
 * everything, return at once. */
static void stream_handler(void *userdata, const char *event) {
    char *kind = NULL, *handle = NULL;
    clara_event_fn fwd;
    void *fwd_ud;
    (void)userdata;
    if (clara_json_get(event, "event", &kind, NULL) == CLARA_JSON_STRING && strcmp(kind, "token") == 0) {
        struct token_piece *p = calloc(1, sizeof *p);
        if (p != NULL && clara_json_get(event, "text", &p->text, NULL) == CLARA_JSON_STRING) {
            clara_json_get(event, "session", &p->session, NULL);
            if (clara_json_get(event, "handle", &handle, NULL) == CLARA_JSON_INTEGER) p->handle = strtoll(handle, NULL, 10);
            pthread_mutex_lock(&stream_mu);
            if (stream_owner != NULL) {
                if (stream_tail != NULL) stream_tail->next = p;
                else stream_head = p;
                stream_tail = p;
                p = NULL;
                if (++stream_count > STREAM_MAX_PIECES) { /* nobody polls: the oldest go */
                    struct token_piece *old = stream_head;
                    stream_head = old->next;
                    stream_count--;
                    stream_dropped++;
                    piece_free(old);
                }
            }
            pthread_mutex_unlock(&stream_mu);
        }
        if (p != NULL) piece_free(p);
    }
    clara_free_string(kind);
    clara_free_string(handle);
    pthread_mutex_lock(&stream_mu);
    fwd = forward_fn;
    fwd_ud = forward_userdata;
    pthread_mutex_unlock(&stream_mu);
    if (fwd != NULL) fwd(fwd_ud, event);
}

void clara_clips_forward_events(clara_event_fn fn, void *userdata) {
    int streaming;
    pthread_mutex_lock(&stream_mu);
    forward_fn = fn;
    forward_userdata = userdata;
    streaming = stream_owner != NULL;
    pthread_mutex_unlock(&stream_mu);
    if (!streaming) clara_set_event_handler(fn, userdata);
}

/* Stops streaming for st (the environment goes, or asked it). */
static void stream_stop(struct clara_env *st) {
    struct token_piece *p;
    clara_event_fn fwd;
    void *fwd_ud;
    pthread_mutex_lock(&stream_mu);
    if (stream_owner != st || st == NULL) {
        pthread_mutex_unlock(&stream_mu);
        return;
    }
    stream_owner = NULL;
    p = stream_head;
    stream_head = stream_tail = NULL;
    stream_count = 0;
    fwd = forward_fn;
    fwd_ud = forward_userdata;
    pthread_mutex_unlock(&stream_mu);
    clara_set_event_handler(fwd, fwd_ud); /* returns once stream_handler is not running */
    while (p != NULL) {
        struct token_piece *next = p->next;
        piece_free(p);
        p = next;
    }
}

/* (clara-stream facts | ROUTER | FALSE) -> TRUE. */
static void clara_stream_fn(struct udf_call *c) {
    const char *where;
    struct cvalue f;
    if (!arg_value(c, 1, &f)) return;
    if (f.kind != V_SYMBOL && f.kind != V_STRING) {
        fail_type(c, 1, "symbol or string");
        return;
    }
    where = f.text;
    if (strcmp(where, "FALSE") == 0 || strcmp(where, "off") == 0) {
        stream_stop(c->state);
        ret_symbol(c, "TRUE");
        return;
    }
    if (strlen(where) > STREAM_ROUTER_MAX) {
        failf(c, "the router name is longer than %d characters", STREAM_ROUTER_MAX);
        return;
    }
    if (strcmp(where, "facts") == 0 && !define_reply_template(c->env)) {
        fail(c, "cannot define the clara-token template");
        return;
    }
    pthread_mutex_lock(&stream_mu);
    if (stream_owner != NULL && stream_owner != c->state) {
        pthread_mutex_unlock(&stream_mu);
        fail(c, "another CLIPS environment streams: it must (clara-stream FALSE) first");
        return;
    }
    /* t stands for standard output, as in printout. */
    snprintf(stream_router, sizeof stream_router, "%s", strcmp(where, "facts") == 0 ? "" : strcmp(where, "t") == 0 ? "stdout" : where);
    stream_owner = c->state;
    pthread_mutex_unlock(&stream_mu);
    clara_set_event_handler(stream_handler, NULL);
    ret_symbol(c, "TRUE");
}

/* Hands the queued pieces to the program: facts, or text on the router.
 * Returns how many facts it asserted. */
static long long stream_deliver(struct udf_call *c) {
    struct token_piece *p;
    char router[STREAM_ROUTER_MAX + 1];
    long dropped;
    long long n = 0;
    pthread_mutex_lock(&stream_mu);
    if (stream_owner != c->state) {
        pthread_mutex_unlock(&stream_mu);
        return 0;
    }
    p = stream_head;
    stream_head = stream_tail = NULL;
    stream_count = 0;
    dropped = stream_dropped;
    stream_dropped = 0;
    memcpy(router, stream_router, sizeof router);
    pthread_mutex_unlock(&stream_mu);
    if (dropped > 0) {
        char message[128];
        snprintf(message, sizeof message, "[clara-stream: %ld pieces dropped: nothing polled]\n", dropped);
        print_to(c->env, router[0] ? router : "t", message);
    }
    while (p != NULL) {
        struct token_piece *next = p->next;
        if (router[0]) {
            print_to(c->env, router, p->text);
        } else {
            struct buf fact = {0};
            char num[64];
            snprintf(num, sizeof num, "%lld) (handle %lld", ++stream_seq, p->handle);
            buf_str(&fact, "(clara-token (seq ");
            buf_str(&fact, num);
            buf_str(&fact, ") (session ");
            buf_clips_string(&fact, p->session ? p->session : "");
            buf_str(&fact, ") (text ");
            buf_clips_string(&fact, p->text);
            buf_str(&fact, "))");
            if (!fact.failed && assert_text(c, fact.data)) n++;
            free(fact.data);
        }
        piece_free(p);
        p = next;
    }
    return n;
}

/* Reads item i's field of clara_async_take's list; NULL when missing. */
static char *take_field(const char *list, long long i, const char *field) {
    char path[64], *text = NULL;
    snprintf(path, sizeof path, "%lld.%s", i, field);
    if (clara_json_get(list, path, &text, NULL) < 0) return NULL;
    return text;
}

/* (clara-poll) -> how many (clara-reply (handle) (status) (tool) (json))
 * facts it asserted: one per call finished since the last poll. Each call's
 * answer is collected into its fact (the handle is then spent). */
static void clara_poll_fn(struct udf_call *c) {
    char *list, *handle;
    long long i, asserted = 0;
    /* A point where the facts tools may run, while the rules wait. */
    enter_clara(c->state);
    list = clara_async_take(0);
    leave_clara(c->state);
    if (list == NULL) {
        fail(c, "out of memory");
        return;
    }
    if (!define_reply_template(c->env)) {
        clara_free_string(list);
        fail(c, "cannot define the clara-reply template");
        return;
    }
    /* The pieces first: those of a call that ended (in list) were all
     * queued before it ended, so they come before its clara-reply. */
    asserted += stream_deliver(c);
    for (i = 0; (handle = take_field(list, i, "handle")) != NULL; i++) {
        char *tool = take_field(list, i, "tool"), *status = take_field(list, i, "status");
        int64_t h = strtoll(handle, NULL, 10);
        input_release(h); /* the call ended: nothing waits for its questions */
        approvals_drop(h);
        if (assert_reply(c, h, tool ? tool : "", status ? status : "error")) asserted++;
        clara_free_string(handle);
        clara_free_string(tool);
        clara_free_string(status);
    }
    clara_free_string(list);
    asserted += input_announce(c);
    asserted += approvals_announce(c);
    ret_integer(c, asserted);
}

/* ---- MCP ----------------------------------------------------------------- */

/* (clara-mcp-listen "127.0.0.1:8765") -> the URL the tools are served at
 * (MCP's Streamable HTTP), a STRING; FALSE with an error when it cannot
 * listen. Serving goes on on Clara's threads while CLIPS runs. */
static void clara_mcp_listen_fn(struct udf_call *c) {
    const char *addr;
    char *env, *url = NULL, *message = NULL;
    if (!arg_string(c, 1, &addr)) return;
    env = clara_mcp_listen(addr);
    if (env == NULL) {
        fail(c, "out of memory");
        return;
    }
    if (clara_json_get(env, "result.url", &url, NULL) == CLARA_JSON_STRING) {
        ret_string(c, url);
    } else {
        clara_json_get(env, "message", &message, NULL);
        fail(c, message ? message : env);
    }
    clara_free_string(url);
    clara_free_string(message);
    clara_free_string(env);
}

/* (clara-mcp-stop) -> TRUE: every MCP session and listener ends. */
static void clara_mcp_stop_fn(struct udf_call *c) {
    clara_mcp_stop();
    ret_symbol(c, "TRUE");
}

/* ---- Facts for the model ------------------------------------------------ */

/* clips_facts, clips_assert and clips_eval: tools that read and change an
 * environment, registered by clara_clips_register for the environment that
 * registered last (their names are process-wide). A model's chat started
 * by the environment reaches them while the environment waits for it. */

#define FACTS_WAIT_SECS 30
#define FACTS_MAX 1000

static pthread_mutex_t facts_owner_mu = PTHREAD_MUTEX_INITIALIZER;
static struct clara_env *facts_owner; /* the environment the tools serve */

static const char busy_message[] =
    "the CLIPS environment is running its rules: it serves this tool only while it waits for Clara (waited 30 s)";

/* Appends one CLIPS value as JSON; what JSON cannot hold (fact addresses,
 * NaN) becomes null. */
static void buf_cvalue(struct udf_call *c, struct buf *b, const struct cvalue *f) {
    if (f->kind == V_MULTIFIELD) {
        size_t i;
        buf_put(b, "[", 1);
        for (i = 0; i < f->length; i++) {
            struct cvalue it;
            multifield_item(c, f, i, &it);
            if (i > 0) buf_put(b, ",", 1);
            buf_cvalue(c, b, &it);
        }
        buf_put(b, "]", 1);
        return;
    }
    if (f->kind == V_OTHER || (f->kind == V_FLOAT && !isfinite(f->real)) ||
        ((f->kind == V_STRING || f->kind == V_SYMBOL) && !buf_json_string(&(struct buf){0}, f->text))) {
        buf_str(b, "null");
        return;
    }
    if (!buf_value(c, b, f, 0, 1)) buf_str(b, "null");
}

/* Reads a string argument of a tool; NULL when absent. Free it. */
static char *tool_string(const char *args, const char *path) {
    char *text = NULL;
    if (clara_json_get(args, path, &text, NULL) != CLARA_JSON_STRING) {
        clara_free_string(text);
        return NULL;
    }
    return text;
}

/* clips_facts {template?, limit?}: the facts, as JSON. */
static int clips_facts_tool(void *userdata, const char *args, clara_call *call) {
    struct clara_env *st = userdata;
    struct udf_call c = {0};
    struct buf b = {0};
    char *want = tool_string(args, "template"), *limit_text = NULL;
    long long limit = 100, n = 0, total = 0;
    void *fact;
    if (clara_json_get(args, "limit", &limit_text, NULL) == CLARA_JSON_INTEGER) limit = strtoll(limit_text, NULL, 10);
    clara_free_string(limit_text);
    if (limit < 1 || limit > FACTS_MAX) limit = limit < 1 ? 1 : FACTS_MAX;
    if (!env_acquire(st, FACTS_WAIT_SECS)) {
        clara_free_string(want);
        clara_call_error(call, busy_message);
        return 0;
    }
    c.env = st->env;
    c.name = "clips_facts";
    c.state = st;
    buf_str(&b, "{\"facts\":[");
    for (fact = next_fact(st->env, NULL); fact != NULL; fact = next_fact(st->env, fact)) {
        void *tmpl;
        const char *name = fact_template(st->env, fact, &tmpl);
        struct cvalue names;
        size_t i;
        char index[32];
        if (want != NULL && strcmp(want, name) != 0) continue;
        total++;
        if (n >= limit) continue;
        if (n++ > 0) buf_put(&b, ",", 1);
        snprintf(index, sizeof index, "%lld", fact_index(st->env, fact));
        buf_str(&b, "{\"index\":");
        buf_str(&b, index);
        buf_str(&b, ",\"template\":");
        buf_json_string(&b, name);
        slot_names(&c, tmpl, &names);
        if (names.length == 1) {
            struct cvalue only, value;
            multifield_item(&c, &names, 0, &only);
            if (strcmp(only.text, "implied") == 0) { /* an ordered fact: its values */
                buf_str(&b, ",\"values\":");
                if (fact_slot(&c, fact, "implied", &value))
                    buf_cvalue(&c, &b, &value);
                else
                    buf_str(&b, "[]");
                buf_str(&b, "}");
                continue;
            }
        }
        buf_str(&b, ",\"slots\":{");
        for (i = 0; i < names.length; i++) {
            struct cvalue slot, value;
            multifield_item(&c, &names, i, &slot);
            if (i > 0) buf_put(&b, ",", 1);
            buf_json_string(&b, slot.text);
            buf_put(&b, ":", 1);
            if (fact_slot(&c, fact, slot.text, &value))
                buf_cvalue(&c, &b, &value);
            else
                buf_str(&b, "null");
        }
        buf_str(&b, "}}");
    }
    env_release(st);
    {
        char tail[96];
        snprintf(tail, sizeof tail, "],\"count\":%lld,\"total\":%lld}", n, total);
        buf_str(&b, tail);
    }
    clara_free_string(want);
    if (b.failed)
        clara_call_error(call, "out of memory");
    else
        clara_call_result(call, b.data);
    free(b.data);
    return 0;
}

/* Appends a JSON value (a slot's value given to clips_assert) as a CLIPS
 * literal: strings as strings, numbers, true/false as TRUE/FALSE, null as
 * nil, an array as the values of a multislot. */
static int buf_clips_literal(struct buf *b, const char *args, const char *path, int in_array) {
    char *text = NULL;
    int kind = clara_json_get(args, path, &text, NULL), ok = 1;
    switch (kind) {
    case CLARA_JSON_STRING:
        buf_clips_string(b, text);
        break;
    case CLARA_JSON_INTEGER:
    case CLARA_JSON_FLOAT:
        buf_str(b, text);
        break;
    case CLARA_JSON_TRUE: buf_str(b, "TRUE"); break;
    case CLARA_JSON_FALSE: buf_str(b, "FALSE"); break;
    case CLARA_JSON_NULL: buf_str(b, "nil"); break;
    case CLARA_JSON_ARRAY: {
        char sub[512], *count = NULL;
        long long i, n = 0;
        if (in_array) {
            ok = 0;
            break;
        }
        snprintf(sub, sizeof sub, "%s.#", path);
        if (clara_json_get(args, sub, &count, NULL) == CLARA_JSON_INTEGER) n = strtoll(count, NULL, 10);
        clara_free_string(count);
        for (i = 0; i < n && ok; i++) {
            if (i > 0) buf_put(b, " ", 1);
            snprintf(sub, sizeof sub, "%s.%lld", path, i);
            ok = buf_clips_literal(b, args, sub, 1);
        }
        break;
    }
    default:
        ok = 0;
    }
    clara_free_string(text);
    return ok;
}

/* clips_assert {template, slots}: asserts one fact of a deftemplate. */
static int clips_assert_tool(void *userdata, const char *args, clara_call *call) {
    struct clara_env *st = userdata;
    struct udf_call c = {0};
    struct buf fact = {0};
    char *tmpl_name = tool_string(args, "template"), *error = NULL;
    void *asserted = NULL;
    if (tmpl_name == NULL) {
        clara_call_error(call, "template is missing");
        return 0;
    }
    if (!env_acquire(st, FACTS_WAIT_SECS)) {
        clara_free_string(tmpl_name);
        clara_call_error(call, busy_message);
        return 0;
    }
    c.env = st->env;
    c.name = "clips_assert";
    c.state = st;
    {
        void *tmpl = find_template(st->env, tmpl_name);
        struct cvalue names;
        size_t i;
        if (tmpl == NULL) {
            error = "no such deftemplate";
        } else {
            buf_put(&fact, "(", 1);
            buf_str(&fact, tmpl_name);
            {
                slot_names(&c, tmpl, &names);
                for (i = 0; i < names.length && error == NULL; i++) {
                    struct cvalue slot;
                    char path[300], *probe = NULL;
                    multifield_item(&c, &names, i, &slot);
                    snprintf(path, sizeof path, "slots.%s", slot.text);
                    if (clara_json_get(args, path, &probe, NULL) <= 0) {
                        clara_free_string(probe);
                        continue; /* not given: the slot's default */
                    }
                    clara_free_string(probe);
                    buf_str(&fact, " (");
                    buf_str(&fact, slot.text);
                    buf_put(&fact, " ", 1);
                    if (!buf_clips_literal(&fact, args, path, 0)) error = "a slot's value is an object or a nested array";
                    buf_put(&fact, ")", 1);
                }
            }
            buf_put(&fact, ")", 1);
            if (error == NULL && !fact.failed) {
                asserted = assert_fact(st->env, fact.data);
                if (asserted == NULL) error = "CLIPS refused the fact (see the slots' types)";
            }
        }
    }
    {
        long long index = asserted ? fact_index(st->env, asserted) : 0;
        env_release(st);
        if (error != NULL || fact.failed) {
            clara_call_error(call, error ? error : "out of memory");
        } else {
            struct buf out = {0};
            char num[32];
            snprintf(num, sizeof num, "%lld", index);
            buf_str(&out, "{\"asserted\":true,\"index\":");
            buf_str(&out, num);
            buf_str(&out, ",\"fact\":");
            buf_json_string(&out, fact.data);
            buf_str(&out, "}");
            clara_call_result(call, out.data);
            free(out.data);
        }
    }
    clara_free_string(tmpl_name);
    free(fact.data);
    return 0;
}

/* clips_eval {expression}: evaluates a CLIPS expression; only after the
 * environment said (clara-expose "clips_eval"). */
static int clips_eval_tool(void *userdata, const char *args, clara_call *call) {
    struct clara_env *st = userdata;
    struct udf_call c = {0};
    struct buf b = {0};
    struct cvalue v;
    char *expr = tool_string(args, "expression");
    int ok;
    if (expr == NULL) {
        clara_call_error(call, "expression is missing");
        return 0;
    }
    if (!env_acquire(st, FACTS_WAIT_SECS)) {
        clara_free_string(expr);
        clara_call_error(call, busy_message);
        return 0;
    }
    c.env = st->env;
    c.name = "clips_eval";
    c.state = st;
    ok = eval_text(&c, expr, &v);
    if (ok) {
        buf_str(&b, "{\"value\":");
        buf_cvalue(&c, &b, &v);
        buf_str(&b, "}");
    }
    env_release(st);
    if (!ok)
        clara_call_error(call, "CLIPS could not evaluate the expression");
    else if (b.failed)
        clara_call_error(call, "out of memory");
    else
        clara_call_result(call, b.data);
    clara_free_string(expr);
    free(b.data);
    return 0;
}

static const char facts_desc[] =
    "{\"name\":\"clips_facts\",\"description\":\"The facts of the CLIPS program, with their slots; of one deftemplate when "
    "template is given.\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"template\":{\"type\":\"string\"},"
    "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000}},\"additionalProperties\":false}}";
static const char assert_desc[] =
    "{\"name\":\"clips_assert\",\"description\":\"Asserts a fact of a deftemplate of the CLIPS program; slots not given take "
    "their defaults. Strings stay strings, true/false/null become TRUE/FALSE/nil, arrays fill multislots.\","
    "\"capabilities\":[\"clips_write\"],\"input_schema\":{\"type\":\"object\",\"properties\":{\"template\":{\"type\":"
    "\"string\",\"minLength\":1},\"slots\":{\"type\":\"object\"}},\"required\":[\"template\"],\"additionalProperties\":false}}";
static const char eval_desc[] =
    "{\"name\":\"clips_eval\",\"description\":\"Evaluates a CLIPS expression in the program and returns its value.\","
    "\"capabilities\":[\"exec\"],\"input_schema\":{\"type\":\"object\",\"properties\":{\"expression\":{\"type\":\"string\","
    "\"minLength\":1}},\"required\":[\"expression\"],\"additionalProperties\":false}}";

/* Registers clips_facts and clips_assert for st's environment. */
static int register_facts_tools(struct clara_env *st) {
    int ok;
    pthread_mutex_lock(&facts_owner_mu);
    ok = clara_register_tool(facts_desc, clips_facts_tool, st, NULL) == CLARA_OK &&
         clara_register_tool(assert_desc, clips_assert_tool, st, NULL) == CLARA_OK;
    if (ok) {
        facts_owner = st;
        input_install();
    }
    pthread_mutex_unlock(&facts_owner_mu);
    return ok;
}

/* The environment goes: its tools go with it. */
static void unregister_facts_tools(struct clara_env *st) {
    pthread_mutex_lock(&facts_owner_mu);
    if (facts_owner == st) {
        clara_unregister_tool("clips_facts");
        clara_unregister_tool("clips_assert");
        if (st->exposed_eval) clara_unregister_tool("clips_eval");
        input_uninstall();
        facts_owner = NULL;
    }
    pthread_mutex_unlock(&facts_owner_mu);
}

/* (clara-expose "clips_eval") -> TRUE: lets the model evaluate CLIPS
 * expressions in this program (off by default). */
static void clara_expose_fn(struct udf_call *c) {
    const char *what;
    if (!arg_string(c, 1, &what)) return;
    if (strcmp(what, "clips_eval") != 0) {
        failf(c, "%s cannot be exposed (only clips_eval)", what);
        return;
    }
    if (clara_register_tool(eval_desc, clips_eval_tool, c->state, NULL) != CLARA_OK) {
        fail(c, "clips_eval could not be registered");
        return;
    }
    c->state->exposed_eval = 1;
    ret_symbol(c, "TRUE");
}

/* ---- Registration ------------------------------------------------------- */

/*
 * The functions: C name, CLIPS name, argument counts (min, max), then the
 * types as CLIPS 6.4x wants them (return types; argument types, the first
 * for every argument, then one per position) and as 6.30 wants them
 * (restrictions: counts, default type, one per position).
 */
#define CLARA_UDFS(X)                                                                   \
    X(clara_evaluate, "clara-evaluate", 1, 1, "bs", "s", "11s")                       \
    X(clara_evaluate_json, "clara-evaluate-json", 1, 1, "be", "s", "11s")             \
    X(get_field, "get-field", 2, 2, "bdlsy", "*;es;s", "22uus")                      \
    X(clara_stream, "clara-stream", 1, 1, "b", "sy", "11k")                           \
    X(clara_emit, "clara-emit", 1, 1, "bs", "s", "11s")                               \
    X(json_get, "json-get", 2, 2, "bdlsy", "s", "22s")                                \
    X(clara_call, "clara-call", 1, ANY_COUNT, "bs", "*;sy", "1*uk")                   \
    X(clara_json, "clara-json", 1, 1, "be", "s", "11s")                               \
    X(clara_evaluate_async, "clara-evaluate-async", 1, 1, "bl", "s", "11s")           \
    X(clara_eval_complete, "clara-eval-complete", 1, 1, "b", "l", "11i")              \
    X(clara_eval_result, "clara-eval-result", 1, 1, "bs", "l", "11i")                 \
    X(clara_eval_cancel, "clara-eval-cancel", 1, 1, "b", "l", "11i")                  \
    X(clara_poll, "clara-poll", 0, 0, "bl", NULL, "00")                               \
    X(clara_answer, "clara-answer", 2, 2, "b", "*;l;sy", "22uik")                     \
    X(clara_approve, "clara-approve", 1, 2, "b", "*;l;s", "12uis")                    \
    X(clara_reject, "clara-reject", 1, 2, "b", "*;l;s", "12uis")                      \
    X(clara_mcp_listen, "clara-mcp-listen", 1, 1, "bs", "s", "11s")                  \
    X(clara_mcp_stop, "clara-mcp-stop", 0, 0, "b", NULL, "00")                         \
    X(clara_expose, "clara-expose", 1, 1, "b", "s", "11s")

CLARA_UDFS(UDF_TRAMPOLINE)

struct udf_entry {
    const char *name;
    int min, max;
    const char *returns;      /* 6.4x */
    const char *arg_types;    /* 6.4x */
    const char *restrictions; /* 6.30; CLIPS keeps the pointer */
    udf_pointer fn;
    const char *c_name; /* also how registration recognises its own functions */
};

#define UDF_ENTRY(fn, lisp_name, min, max, returns, arg_types, restrictions) \
    {lisp_name, min, max, returns, arg_types, restrictions, fn##_udf, "clara_clips_" #fn},

static const struct udf_entry udfs[] = {CLARA_UDFS(UDF_ENTRY)};
#define N_UDFS (sizeof udfs / sizeof udfs[0])

/* The state of an environment, made on first registration: the data block,
 * the clara-json type. NULL when the position holds something else. */
static struct clara_env *clara_env_get(void *environment) {
    static struct externalAddressType json_type = {"clara-json", json_print, json_print, json_discard, NULL, NULL};
    struct clara_env *state = CLARA_ENV(environment);
    if (state != NULL) return state->magic == CLARA_ENV_MAGIC ? state : NULL;
    /* InstallExternalAddressType exits the process when the table is full. */
    if (EvaluationData(ENV(environment))->numberOfAddressTypes >= MAXIMUM_EXTERNAL_ADDRESS_TYPES) return NULL;
    if (!AllocateEnvironmentData(ENV(environment), CLARA_CLIPS_DATA_POSITION, sizeof *state, env_cleanup))
        return NULL;
    state = CLARA_ENV(environment);
    state->magic = CLARA_ENV_MAGIC;
    state->values.next = state->values.prev = &state->values;
    state->env = environment;
    pthread_mutex_init(&state->mu, NULL);
    pthread_cond_init(&state->cv, NULL);
    state->json_type = (unsigned short)InstallExternalAddressType(ENV(environment), &json_type);
    return state;
}

int clara_clips_register(void *environment) {
    int defined[N_UDFS];
    size_t i;
    if (environment == NULL) return -CLARA_EINVAL;
    /* Registering twice (userfunctions.c, then the program) is harmless: a
     * function of ours already there is kept. A function of the same name
     * that is not ours is a conflict, found before anything is defined. */
    for (i = 0; i < N_UDFS; i++) {
        FunctionDefinition *fd = FindFunction(ENV(environment), udfs[i].name);
        defined[i] = fd != NULL;
        if (fd != NULL && (fd->actualFunctionName == NULL || strcmp(fd->actualFunctionName, udfs[i].c_name) != 0))
            return -CLARA_EINVAL;
    }
    if (clara_env_get(environment) == NULL) return -CLARA_EINVAL;
    if (facts_owner != CLARA_ENV(environment) && !register_facts_tools(CLARA_ENV(environment))) return -CLARA_EINVAL;
    /* The template of clara-poll's facts, before any rule that matches
     * them is parsed, and again after every (clear). CLIPS 6.4 calls
     * UserFunctions before it sets up constructs: then the template waits
     * for the program's own clara_clips_register (or the first poll). */
    if (constructs_ready(environment) && !template_exists(environment, "clara-reply")) {
        if (!define_reply_template(environment) || !add_clear_hook(environment)) return -CLARA_EINVAL;
    }
    for (i = 0; i < N_UDFS; i++) {
        const struct udf_entry *u = &udfs[i];
        if (defined[i]) continue;
#ifdef CLARA_CLIPS_64
        if (AddUDF(environment, u->name, u->returns, (unsigned short)u->min, (unsigned short)u->max, u->arg_types,
                   u->fn, u->c_name, NULL) != AUE_NO_ERROR)
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
