/* harness.c - runs every group of C tests against the built libclara.so. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clara.h"

int harness_failures;
int harness_checks;
static double scale = 1.0;

int scaled(int n) {
    int s = (int)(n * scale);
    return s < 1 ? 1 : s;
}

static void failed(const char *test, int line) {
    harness_failures++;
    fprintf(stderr, "FAIL %s (tests/c line %d)\n", test, line);
}

void check_true(const char *test, int line, int ok, const char *what) {
    harness_checks++;
    if (!ok) {
        failed(test, line);
        fprintf(stderr, "  expected true: %s\n", what);
    }
}

void check_str(const char *test, int line, const char *got, const char *want) {
    harness_checks++;
    if (got == NULL || want == NULL ? got != want : strcmp(got, want) != 0) {
        failed(test, line);
        fprintf(stderr, "  want: %s\n  got:  %s\n", want ? want : "(NULL)", got ? got : "(NULL)");
    }
}

void check_int(const char *test, int line, long long got, long long want, const char *what) {
    harness_checks++;
    if (got != want) {
        failed(test, line);
        fprintf(stderr, "  %s: want %lld, got %lld\n", what, want, got);
    }
}

void check_prefix(const char *test, int line, const char *got, const char *prefix) {
    harness_checks++;
    if (got == NULL || strncmp(got, prefix, strlen(prefix)) != 0) {
        failed(test, line);
        fprintf(stderr, "  want prefix: %s\n  got:         %s\n", prefix, got ? got : "(NULL)");
    }
}

void check_envelope(const char *test, int line, const char *request, const char *want) {
    char *got = clara_evaluate(request);
    check_str(test, line, got, want);
    clara_free_string(got);
}

int main(void) {
    const char *s = getenv("CLARA_HARNESS_SCALE");
    if (s != NULL && atof(s) > 0) scale = atof(s);
    tests_envelopes();
    tests_config();
    tests_json_get();
    tests_threads();
    tests_tools();
    tests_rules();
    tests_lua();
    tests_callbacks();
    tests_ownership();
    tests_async();
    tests_chat();
    tests_nested();
    tests_declared();
    tests_abandoned();
    tests_mcp();
    tests_seeds();
    tests_approvals();
    tests_audit();
    if (harness_failures > 0) {
        fprintf(stderr, "harness: %d of %d checks FAILED\n", harness_failures, harness_checks);
        return 1;
    }
    printf("harness: all %d checks passed\n", harness_checks);
    return 0;
}
