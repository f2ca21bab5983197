/* harness.h - a tiny test harness for Clara's C ABI.
 *
 * Each test is a function; a failed check prints the test's name, the line,
 * what was expected and what came back, and the run continues. main() in
 * harness.c runs every group and exits non-zero if any check failed.
 * CLARA_HARNESS_SCALE (default 1.0) scales loop counts, so the valgrind run
 * can be shorter. */
#ifndef CLARA_HARNESS_H
#define CLARA_HARNESS_H

#include <stddef.h>

extern int harness_failures;
extern int harness_checks;

/* Scaled iteration count, at least 1. */
int scaled(int n);

void check_true(const char *test, int line, int ok, const char *what);
void check_str(const char *test, int line, const char *got, const char *want);
void check_int(const char *test, int line, long long got, long long want, const char *what);
/* Evaluates request and checks the whole envelope; frees it. */
void check_envelope(const char *test, int line, const char *request, const char *want);
/* Checks that s starts with prefix. */
void check_prefix(const char *test, int line, const char *got, const char *prefix);

#define CHECK(cond) check_true(__func__, __LINE__, (cond), #cond)
#define CHECK_STR(got, want) check_str(__func__, __LINE__, (got), (want))
#define CHECK_INT(got, want) check_int(__func__, __LINE__, (got), (want), #got)
#define CHECK_ENVELOPE(req, want) check_envelope(__func__, __LINE__, (req), (want))
#define CHECK_PREFIX(got, prefix) check_prefix(__func__, __LINE__, (got), (prefix))

/* The groups, one per tests/c/test_<area>.c. */
void tests_envelopes(void);
void tests_config(void);
void tests_json_get(void);
void tests_threads(void);
void tests_tools(void);
void tests_rules(void);
void tests_lua(void);
void tests_callbacks(void);
void tests_ownership(void);
void tests_async(void);
void tests_chat(void);
void tests_nested(void);
void tests_audit(void);
void tests_declared(void);
void tests_abandoned(void);
void tests_mcp(void);
void tests_seeds(void);
void tests_approvals(void);

#endif
