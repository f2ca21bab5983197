/* leak_canary.c - makes two mistakes on purpose, which valgrind.sh expects
 * memcheck to report: proof that the suppressions of go-runtime.supp hide
 * neither a leaked envelope nor a memory error in a C tool.
 *   1. forgets to free one envelope (definitely lost);
 *   2. registers a C tool that reads one byte past its arguments. */
#include <stdio.h>
#include <string.h>

#include "clara.h"

static volatile char sink;

static int overread_tool(void *userdata, const char *arguments_json, clara_call *call) {
    (void)userdata;
    sink = arguments_json[strlen(arguments_json) + 1]; /* past the NUL: invalid read */
    clara_call_result(call, "true");
    return 0;
}

/* Drops envelopes on the floor. Many, from a function of its own: a
 * pointer left in a register, a dead stack slot or a stale word of Go's
 * memory (which memcheck scans as it scans any mapping) makes one of them
 * only "possibly" lost or still reachable; they cannot all be. */
static void __attribute__((noinline)) leak(void) {
    int i;
    for (i = 0; i < 32; i++) printf("%s\n", clara_evaluate("{\"tool\":\"echo\",\"arguments\":{\"leak\":true}}"));
}

int main(void) {
    char *r;
    leak();
    if (clara_register_tool("{\"name\":\"overread\"}", overread_tool, NULL, NULL) != CLARA_OK) return 1;
    r = clara_evaluate("{\"tool\":\"overread\"}");
    printf("%s\n", r);
    clara_free_string(r);
    return 0;
}
