/* What capi/workers.c includes from cgo's generated header, for
 * tests/c/workers_sanitized.c, which builds workers.c without Go. */
#include <stdint.h>
void claraGoJobAbandoned(uintptr_t id);
