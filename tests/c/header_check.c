/* Compiled as C99 and as C++ with -Wall -Wextra -Werror -pedantic by
 * `make check-header`: clara.h must be clean in both, and declare what the
 * documentation promises. */
#include "clara.h"
#include "clara.h" /* the include guard works */

#if CLARA_VERSION_NUMBER != CLARA_VERSION_MAJOR * 1000000 + CLARA_VERSION_MINOR * 1000 + CLARA_VERSION_PATCH
#error "CLARA_VERSION_NUMBER does not match the version parts"
#endif

/* Every declaration, taken by address with its exact type. */
const char *(*check_version)(void) = clara_version;
int (*check_version_number)(void) = clara_version_number;
char *(*check_evaluate)(const char *) = clara_evaluate;
void (*check_free_string)(char *) = clara_free_string;
char *(*check_configure)(const char *) = clara_configure;
char *(*check_reset)(void) = clara_reset;
int (*check_json_get)(const char *, const char *, char **, size_t *) = clara_json_get;
void (*check_set_log_handler)(clara_log_fn, void *, int) = clara_set_log_handler;
const char *(*check_strerror)(int) = clara_strerror;
int (*check_register_tool)(const char *, clara_tool_fn, void *, void (*)(void *)) = clara_register_tool;
int (*check_unregister_tool)(const char *) = clara_unregister_tool;
void (*check_call_result)(clara_call *, const char *) = clara_call_result;
void (*check_call_error)(clara_call *, const char *) = clara_call_error;
