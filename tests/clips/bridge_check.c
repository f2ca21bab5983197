/* bridge_check.c - checks of clips_bridge/clara_clips.c that a CLIPS program
 * cannot make: what the functions return to C on an argument error, that
 * registering twice is harmless and a name conflict defines nothing, and
 * that (clara-json ...) values are freed, both when CLIPS discards them and
 * when their environment is destroyed (run under valgrind by run.sh). Builds
 * with CLIPS 6.30 and 6.4x. Prints one line per check; exits 1 if any fails.
 *
 * usage: bridge_check */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "clips.h"

#include "clara.h"
#include "clara_clips.h"

static int failures;

static void check(int ok, const char *what) {
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) failures++;
}

#if defined(UNBOUNDED) && defined(UDFHasNextArgument) /* CLIPS 6.4x */
static int eval_is(void *env, const char *expr, int type, const char *text) {
    CLIPSValue v;
    Eval(env, expr, &v);
    if (v.header->type != type) return 0;
    return text == NULL || strstr(v.lexemeValue->contents, text) != NULL;
}
#define T_SYMBOL SYMBOL_TYPE
#define T_STRING STRING_TYPE
#define T_EXTERNAL EXTERNAL_ADDRESS_TYPE
static void other_json_get(Environment *env, UDFContext *context, UDFValue *ret) {
    (void)context;
    ret->lexemeValue = CreateSymbol(env, "mine");
}
static int define_other_json_get(void *env) {
    return AddUDF(env, "json-get", "y", 0, 0, NULL, other_json_get, "other_json_get", NULL) == AUE_NO_ERROR;
}
static void build(void *env, const char *construct) { Build(env, construct); }
#else /* CLIPS 6.30 */
static int eval_is(void *env, const char *expr, int type, const char *text) {
    DATA_OBJECT v;
    /* 6.30's EnvEval keeps the error state of the previous call. */
    SetEvaluationError(env, FALSE);
    SetHaltExecution(env, FALSE);
    EnvEval(env, expr, &v);
    if (GetType(v) != type) return 0;
    return text == NULL || strstr(DOToString(v), text) != NULL;
}
#define T_SYMBOL SYMBOL
#define T_STRING STRING
#define T_EXTERNAL EXTERNAL_ADDRESS
static void other_json_get(void *env, DATA_OBJECT_PTR ret) {
    SetpType(ret, SYMBOL);
    SetpValue(ret, EnvAddSymbol(env, "mine"));
}
static int define_other_json_get(void *env) {
    return EnvDefineFunction2(env, "json-get", 'u', (int (*)(void *))(void (*)(void))other_json_get,
                              "other_json_get", "00") != 0;
}
static void build(void *env, const char *construct) { EnvBuild(env, construct); }
#endif

/* Bytes malloc'd and not freed (Go's heap is not malloc's). */
static size_t in_use(void) { return mallinfo2().uordblks; }

int main(void) {
    void *env;
    size_t before, after;
    int i, ok;

    check(clara_clips_register(NULL) == -CLARA_EINVAL, "register(NULL) is -CLARA_EINVAL");

    /* Twice, three times (a CLIPS built with userfunctions.c did it once). */
    env = CreateEnvironment();
    check(env != NULL && clara_clips_register(env) == CLARA_OK && clara_clips_register(env) == CLARA_OK &&
              clara_clips_register(env) == CLARA_OK,
          "registering again is harmless");
    check(eval_is(env, "(clara-call echo n 1 s \"x\")", T_STRING, "\"result\":{\"n\":1,\"s\":\"x\"}"),
          "the functions work after registering again");

    /* An argument error returns FALSE, as in CLIPS 6.30, from every function. */
    check(eval_is(env, "(clara-evaluate 42)", T_SYMBOL, "FALSE"), "(clara-evaluate 42) returns FALSE");
    check(eval_is(env, "(clara-emit 42)", T_SYMBOL, "FALSE"), "(clara-emit 42) returns FALSE");
    check(eval_is(env, "(json-get 1.5 \"a\")", T_SYMBOL, "FALSE"), "(json-get 1.5 \"a\") returns FALSE");
    check(eval_is(env, "(json-get \"{x\" \"a\")", T_SYMBOL, "nil"), "(json-get \"{x\" \"a\") returns nil");
    check(eval_is(env, "(clara-json 5)", T_SYMBOL, "FALSE"), "(clara-json 5) returns FALSE");
    check(eval_is(env, "(clara-json \"{x\")", T_SYMBOL, "FALSE"), "(clara-json \"{x\") returns FALSE");
    check(eval_is(env, "(clara-call echo x)", T_SYMBOL, "FALSE"), "(clara-call echo x) returns FALSE");
    check(eval_is(env, "(clara-call echo x (assert (f)))", T_SYMBOL, "FALSE"),
          "(clara-call echo x <fact>) returns FALSE");
    check(eval_is(env, "(clara-json \"[1]\")", T_EXTERNAL, NULL), "(clara-json \"[1]\") is an external address");

    /* clara-json values: discarded by CLIPS's garbage collection, kept while
     * a global or a fact holds them. */
    build(env, "(defglobal ?*keep* = FALSE ?*fact* = FALSE)");
    build(env, "(deftemplate holder (slot j))");
    eval_is(env, "(bind ?*keep* (clara-json \"{\\\"kept\\\":true}\"))", T_EXTERNAL, NULL);
    eval_is(env, "(bind ?*fact* (assert (holder (j (clara-json \"[\\\"in a fact\\\"]\")))))", T_SYMBOL, NULL);
    for (i = 0; i < 1000; i++) eval_is(env, "(clara-json \"[1,2,3,4,5,6,7,8,9,10]\")", T_EXTERNAL, NULL);
    before = in_use();
    for (i = 0; i < 20000; i++) eval_is(env, "(clara-json \"[1,2,3,4,5,6,7,8,9,10]\")", T_EXTERNAL, NULL);
    after = in_use();
    check(after < before + 20000, "20000 clara-json values are freed once CLIPS discards them");
    check(eval_is(env, "(clara-call echo k ?*keep*)", T_STRING, "\"result\":{\"k\":{\"kept\":true}}"),
          "a clara-json value in a global survives");
    check(eval_is(env, "(clara-call echo f (fact-slot-value ?*fact* j))", T_STRING, "\"result\":{\"f\":[\"in a fact\"]}"),
          "a clara-json value in a fact survives");
    DestroyEnvironment(env); /* frees the kept values: valgrind says if not */

    /* A function of one of Clara's names that is not Clara's: nothing is
     * defined, and that function stays. */
    env = CreateEnvironment();
#if defined(UNBOUNDED) && defined(UDFHasNextArgument)
    /* A CLIPS built with userfunctions.c has Clara's functions already. */
    ok = FindFunction(env, "json-get") != NULL || define_other_json_get(env);
#else
    ok = define_other_json_get(env);
#endif
    if (FindFunction(env, "clara-evaluate") == NULL) {
        check(ok && clara_clips_register(env) == -CLARA_EINVAL, "a json-get of another is a conflict");
        check(FindFunction(env, "clara-evaluate") == NULL && eval_is(env, "(json-get)", T_SYMBOL, "mine"),
              "after a conflict nothing is defined and the other json-get stays");
    } else {
        printf("skip the name conflict (this CLIPS defines Clara's functions in every environment)\n");
    }
    DestroyEnvironment(env);

    /* Environments come and go, each with values alive at its end. */
    for (i = 0; i < 20; i++) {
        env = CreateEnvironment();
        ok = env != NULL && clara_clips_register(env) == CLARA_OK;
        build(env, "(defglobal ?*j* = FALSE)");
        eval_is(env, "(bind ?*j* (create$ (clara-json \"1\") (clara-json \"[2]\")))", T_SYMBOL, NULL);
        DestroyEnvironment(env);
        if (!ok) break;
    }
    check(ok, "20 environments created, registered and destroyed with live clara-json values");

    printf(failures ? "bridge_check: %d FAILED\n" : "bridge_check: all passed\n", failures);
    return failures ? 1 : 0;
}
