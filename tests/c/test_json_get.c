/* test_json_get.c - clara_json_get: every kind, lengths, bad input. */
#include <string.h>

#include "clara.h"
#include "harness.h"

static const char doc[] =
    "{\"s\":\"h\\u00e9\\\"llo\",\"nul\":\"a\\u0000b\",\"i\":-42,\"big\":123456789012345678901,\"f\":1.5,"
    "\"t\":true,\"fa\":false,\"n\":null,\"arr\":[1, {\"x\" : 2}],\"o\":{\"k\":\"v\"}}";

static void expect(const char *test, int line, const char *path, int kind, const char *text) {
    char *got = (char *)"untouched";
    int k = clara_json_get(doc, path, &got, NULL);
    check_int(test, line, k, kind, path);
    check_str(test, line, got, text);
    clara_free_string(got);
}
#define EXPECT(path, kind, text) expect(__func__, __LINE__, path, kind, text)

static void test_kinds(void) {
    EXPECT("s", CLARA_JSON_STRING, "h\xc3\xa9\"llo");
    EXPECT("i", CLARA_JSON_INTEGER, "-42");
    EXPECT("big", CLARA_JSON_FLOAT, "123456789012345678901");
    EXPECT("f", CLARA_JSON_FLOAT, "1.5");
    EXPECT("t", CLARA_JSON_TRUE, "true");
    EXPECT("fa", CLARA_JSON_FALSE, "false");
    EXPECT("n", CLARA_JSON_NULL, "null");
    EXPECT("missing", CLARA_JSON_MISSING, NULL);
    EXPECT("arr", CLARA_JSON_ARRAY, "[1,{\"x\":2}]");
    EXPECT("arr.1.x", CLARA_JSON_INTEGER, "2");
    EXPECT("arr.#", CLARA_JSON_INTEGER, "2");
    EXPECT("o", CLARA_JSON_OBJECT, "{\"k\":\"v\"}");
}

static void test_embedded_nul(void) {
    char *got = NULL;
    size_t len = 0;
    CHECK_INT(clara_json_get(doc, "nul", &got, &len), CLARA_JSON_STRING);
    CHECK_INT((long long)len, 3);
    CHECK(got != NULL && memcmp(got, "a\0b", 4) == 0);
    clara_free_string(got);
}

static void test_bad_input(void) {
    char *got = (char *)"untouched";
    size_t len = 99;
    CHECK_INT(clara_json_get("{\"a\":", "a", &got, &len), -CLARA_EINVAL);
    CHECK(got == NULL && len == 0);
    CHECK_INT(clara_json_get(NULL, "a", &got, NULL), -CLARA_EINVAL);
    CHECK_INT(clara_json_get(doc, NULL, &got, NULL), -CLARA_EINVAL);
    CHECK_INT(clara_json_get(doc, "a", NULL, NULL), -CLARA_EINVAL);
    CHECK_INT(clara_json_get("", "a", &got, NULL), -CLARA_EINVAL);
    /* @modifiers transform documents without bound: refused. */
    CHECK_INT(clara_json_get("[[[[1]]]]", "@pretty", &got, NULL), -CLARA_EINVAL);
    CHECK_INT(clara_json_get(doc, "arr|@reverse", &got, NULL), -CLARA_EINVAL);
    CHECK_INT(clara_json_get("{\"a@b\":true}", "a\\@b", &got, NULL), CLARA_JSON_TRUE);
    clara_free_string(got);
}

static void test_reads_envelopes(void) {
    char *r = clara_evaluate("{\"tool\":\"nope\"}"), *code = NULL;
    CHECK_INT(clara_json_get(r, "error", &code, NULL), CLARA_JSON_STRING);
    CHECK_STR(code, "unknown_tool");
    clara_free_string(code);
    clara_free_string(r);
}

void tests_json_get(void) {
    test_kinds();
    test_embedded_nul();
    test_bad_input();
    test_reads_envelopes();
}
