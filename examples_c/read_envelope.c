/* read_envelope.c - call a tool, read the envelope with clara_json_get,
 * handle errors, and watch Clara's log.
 *
 *   cc read_envelope.c -o read_envelope $(pkg-config --cflags --libs clara)
 */
#include <stdio.h>
#include <string.h>

#include <clara.h>

static void print_log(void *userdata, int level, const char *message) {
    static const char *names[] = {"debug", "info", "warn", "error"};
    fprintf((FILE *)userdata, "[clara %s] %s\n", level >= 0 && level <= 3 ? names[level] : "?", message);
}

/* Calls a tool and prints either its result or its error. */
static void call(const char *request) {
    char *reply = clara_evaluate(request), *status = NULL, *text = NULL;
    if (reply == NULL) {
        fprintf(stderr, "out of memory\n");
        return;
    }
    clara_json_get(reply, "status", &status, NULL);
    if (status != NULL && strcmp(status, "success") == 0) {
        clara_json_get(reply, "result", &text, NULL);
        printf("ok:    %s\n", text);
    } else {
        clara_json_get(reply, "message", &text, NULL);
        printf("error: %s\n", text);
    }
    clara_free_string(text);
    clara_free_string(status);
    clara_free_string(reply);
}

int main(void) {
    char *zone = NULL, *reply;

    if (clara_version_number() != CLARA_VERSION_NUMBER) {
        fprintf(stderr, "built with clara.h %s but loaded libclara %s\n", CLARA_VERSION, clara_version());
        return 1;
    }
    /* Warnings and errors go to print_log from now on. */
    clara_set_log_handler(print_log, stdout, CLARA_LOG_WARN);
    clara_free_string(clara_configure("default_evaluator = \"weather\"")); /* not registered: a warning */
    clara_free_string(clara_reset());

    call("{\"tool\":\"echo\",\"arguments\":{\"n\":42}}");
    call("{\"tool\":\"no_such_tool\"}");
    call("{\"tool\":\"get_time\",\"arguments\":{\"timezone\":\"Atlantis/Lost\"}}");

    reply = clara_evaluate("{\"tool\":\"get_time\",\"arguments\":{\"timezone\":\"Europe/Paris\"}}");
    if (clara_json_get(reply, "result.timezone", &zone, NULL) == CLARA_JSON_STRING) printf("zone:  %s\n", zone);
    clara_free_string(zone);
    clara_free_string(reply);

    clara_set_log_handler(NULL, NULL, CLARA_LOG_DEBUG); /* back to stderr */
    return 0;
}
