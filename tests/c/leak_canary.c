/* leak_canary.c - forgets to free one envelope on purpose. valgrind.sh
 * expects memcheck to report it as definitely lost: proof that the leak
 * check of the harness run can fail. */
#include <stdio.h>

#include "clara.h"

int main(void) {
    char *r = clara_evaluate("{\"tool\":\"echo\",\"arguments\":{\"leak\":true}}");
    printf("%s\n", r);
    r = NULL; /* the only pointer is gone: definitely lost */
    return 0;
}
