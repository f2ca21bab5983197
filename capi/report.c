/* report.c - what a C tool reports from the thread it runs on.
 *
 * clara_call_result and clara_call_error, called on the tool's own thread,
 * keep the report in C with the call (struct shim_result, shim.h): a worker
 * thread never enters Go to report. A JSON result is checked as it is
 * kept (shim_json_compact), so that Go need not scan it again. Nothing
 * here needs Go, so that tests/c/workers_sanitized.c builds this file and
 * workers.c alone under the sanitizers. */
#include <pthread.h>
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
        memcpy(copy, s, n);
        copy[n] = '\0';
    }
    free(*dst);
    *dst = copy;
    return 1;
}

/* The result into r, in its room when it fits (see struct shim_result). */
static int replace_result(struct shim_result *r, const char *s, size_t n) {
    if (s != NULL && r->room != NULL && n < r->room_cap) {
        if (r->result != r->room) free(r->result);
        memcpy(r->room, s, n);
        r->room[n] = '\0'; /* as C strings end (shim_json_compact reads up to it) */
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
    r->compact = r->check_json && r->result != NULL && shim_json_compact(r->result, n);
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
    r->has_result = r->has_error = r->compact = 0;
}

/* ---- Where each toolCall's shim_result lives --------------------------------
 *
 * A toolCall (capi/exports.go) is pooled by Go and keeps its shim_result
 * from call to call; Go gives the shim_result back with a runtime cleanup
 * when it collects the toolCall. If each were malloc'd and freed, the only
 * pointer to one would sit wherever Go keeps it at that moment, and
 * valgrind once reported one "definitely lost" when a process exited while
 * Go held it in none of the places valgrind scans. So they come from slabs
 * that are never freed, each reachable from `slabs`, and go back to a free
 * list: at most as many exist as toolCalls ever lived at once, and a new
 * toolCall allocates nothing once the list has some. */

#define RESULTS_PER_SLAB 32

union result_slot {
    struct shim_result res;
    union result_slot *next_free; /* while on free_results */
};

struct result_slab {
    struct result_slab *next;
    union result_slot slots[RESULTS_PER_SLAB];
};

static pthread_mutex_t results_mu = PTHREAD_MUTEX_INITIALIZER;
static struct result_slab *slabs;        /* every slab made; under results_mu */
static union result_slot *free_results;  /* under results_mu */
static size_t results_out;               /* slots handed out; under results_mu */

struct shim_result *shim_result_new(void) {
    union result_slot *slot;
    pthread_mutex_lock(&results_mu);
    if (free_results == NULL) {
        struct result_slab *slab = calloc(1, sizeof *slab);
        int i;
        if (slab == NULL) {
            pthread_mutex_unlock(&results_mu);
            return NULL;
        }
        slab->next = slabs;
        slabs = slab;
        for (i = RESULTS_PER_SLAB - 1; i >= 0; i--) {
            slab->slots[i].next_free = free_results;
            free_results = &slab->slots[i];
        }
    }
    slot = free_results;
    free_results = slot->next_free;
    results_out++;
    pthread_mutex_unlock(&results_mu);
    memset(&slot->res, 0, sizeof slot->res);
    return &slot->res;
}

void shim_result_release(struct shim_result *r) {
    union result_slot *slot = (union result_slot *)r;
    if (r == NULL) return;
    pthread_mutex_lock(&results_mu);
    slot->next_free = free_results;
    free_results = slot;
    results_out--;
    pthread_mutex_unlock(&results_mu);
}

void shim_result_counts(size_t *out, size_t *made) {
    struct result_slab *slab;
    size_t n = 0;
    pthread_mutex_lock(&results_mu);
    for (slab = slabs; slab != NULL; slab = slab->next) n += RESULTS_PER_SLAB;
    *out = results_out;
    *made = n;
    pthread_mutex_unlock(&results_mu);
}

/* ---- The check of a JSON result -------------------------------------------
 *
 * Go would scan a C tool's JSON result (protocol.Scan in the toolbox's
 * clamp) to refuse invalid JSON and to compact it. That scan cost about as
 * much as the rest of the Go side of a C tool's call, so the result is
 * checked here instead, on the tool's thread as it is kept: 1 when it is
 * exactly one JSON value (RFC 8259, strings in valid UTF-8, as
 * protocol.Scan reads it) written without whitespace between its tokens
 * and nested at most CHECK_MAX_DEPTH deep. Anything else, valid or not,
 * gets 0 and Go scans it as before, with its messages: this check only
 * vouches, it never refuses. capi/check_test.go compares it with
 * protocol.Scan. */

/* A bit per open container (1: an object) fits one word. */
#define CHECK_MAX_DEPTH 64

typedef const unsigned char *cursor;

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static int is_hex(unsigned char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static int is_cont(unsigned char c) { return c >= 0x80 && c <= 0xBF; }

/* The length of the UTF-8 sequence at p (its first byte >= 0x80), or 0
 * when invalid: Go's utf8.DecodeRune's rules (no overlong forms, no
 * surrogates, nothing past U+10FFFF). */
static size_t utf8_len(cursor p, cursor end) {
    unsigned char c = p[0];
    size_t left = (size_t)(end - p);
    unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
    size_t n;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        else if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if (left < n || p[1] < lo || p[1] > hi) return 0;
    if (n >= 3 && !is_cont(p[2])) return 0;
    if (n == 4 && !is_cont(p[3])) return 0;
    return n;
}

/* The bytes a string holds as they are: printable ASCII but the quote and
 * the backslash (protocol.Scan's plainByte). */
#define ROW(x) x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x
static const unsigned char plain[256] = {
    ROW(0), ROW(0),
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x22 '"' */
    ROW(1), ROW(1),
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, /* 0x5c '\\' */
    ROW(1), ROW(1),
    ROW(0), ROW(0), ROW(0), ROW(0), ROW(0), ROW(0), ROW(0), ROW(0),
};
#undef ROW

/* A string whose opening quote is at p: past its closing quote, or NULL.
 * *end is a NUL, which ends a run of plain bytes without a bounds check. */
static cursor check_string(cursor p, cursor end) {
    p++;
    for (;;) {
        unsigned char c;
        while (plain[*p]) p++;
        if (p >= end) return NULL;
        c = *p;
        if (c == '"') return p + 1;
        if (c == '\\') {
            if (end - p < 2) return NULL;
            switch (p[1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                p += 2;
                break;
            case 'u':
                if (end - p < 6 || !is_hex(p[2]) || !is_hex(p[3]) || !is_hex(p[4]) || !is_hex(p[5])) return NULL;
                p += 6;
                break;
            default:
                return NULL;
            }
        } else if (c < 0x20) {
            return NULL;
        } else {
            size_t n = utf8_len(p, end);
            if (n == 0) return NULL;
            p += n;
        }
    }
}

static cursor check_digits(cursor p, cursor end) {
    if (p >= end || !is_digit(*p)) return NULL;
    while (p < end && is_digit(*p)) p++;
    return p;
}

/* A number at p: past it, or NULL. */
static cursor check_number(cursor p, cursor end) {
    if (*p == '-') p++;
    if (p < end && *p == '0') p++;
    else if (p >= end || *p < '1' || *p > '9' || (p = check_digits(p, end)) == NULL) return NULL;
    if (p < end && *p == '.' && (p = check_digits(p + 1, end)) == NULL) return NULL;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        p = check_digits(p, end);
    }
    return p;
}

static cursor check_word(cursor p, cursor end, const char *word, size_t n) {
    return (size_t)(end - p) >= n && memcmp(p, word, n) == 0 ? p + n : NULL;
}

/* An object's key and its colon at p: past the colon, or NULL. */
static cursor check_key(cursor p, cursor end) {
    if (p >= end || *p != '"' || (p = check_string(p, end)) == NULL) return NULL;
    return p < end && *p == ':' ? p + 1 : NULL;
}

int shim_json_compact(const char *json, size_t n) {
    cursor p = (cursor)json, end = p + n;
    uint64_t objects = 0; /* bit i: the container opened at depth i+1 is an object */
    int depth = 0;
    for (;;) {
        /* A value at p. */
        if (p >= end) return 0;
        switch (*p) {
        case '{':
        case '[':
            if (depth == CHECK_MAX_DEPTH) return 0;
            if (end - p >= 2 && p[1] == (*p == '{' ? '}' : ']')) {
                p += 2; /* empty */
                break;
            }
            objects = objects << 1 | (*p == '{');
            depth++;
            p++;
            if ((objects & 1) && (p = check_key(p, end)) == NULL) return 0;
            continue; /* its first value */
        case '"':
            p = check_string(p, end);
            break;
        case 't':
            p = check_word(p, end, "true", 4);
            break;
        case 'f':
            p = check_word(p, end, "false", 5);
            break;
        case 'n':
            p = check_word(p, end, "null", 4);
            break;
        default:
            p = *p == '-' || is_digit(*p) ? check_number(p, end) : NULL;
        }
        if (p == NULL) return 0;
        /* After a value: the containers it ends, then a comma or the end. */
        for (;;) {
            if (depth == 0) return p == end;
            if (p >= end) return 0;
            if (*p == ((objects & 1) ? '}' : ']')) {
                p++;
                objects >>= 1;
                depth--;
                continue;
            }
            if (*p != ',') return 0;
            p++;
            if ((objects & 1) && (p = check_key(p, end)) == NULL) return 0;
            break;
        }
    }
}
