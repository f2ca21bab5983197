/* c_host.c - a C host that serves its tools over MCP with
 * clara_mcp_listen, for tests/mcp (the TypeScript SDK's client drives it).
 * Its tools: c_add (C), report_steps (C, reports progress),
 * register_more (C, registers another C tool while serving), and the
 * configuration's (CLARA_CONFIG). Prints "url URL" and serves until its
 * stdin closes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clara.h"

static int c_add(void *userdata, const char *args, clara_call *call) {
    char *a = NULL, *b = NULL, out[64];
    (void)userdata;
    if (clara_json_get(args, "a", &a, NULL) < 0 || clara_json_get(args, "b", &b, NULL) < 0 || !a || !b) {
        clara_call_error(call, "a and b are needed");
    } else {
        snprintf(out, sizeof out, "{\"sum\":%g}", strtod(a, NULL) + strtod(b, NULL));
        clara_call_result(call, out);
    }
    clara_free_string(a);
    clara_free_string(b);
    return 0;
}

static int report_steps(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    (void)args;
    clara_call_progress(call, 1, 2, "half way");
    clara_call_progress(call, 2, 2, "done");
    clara_call_result(call, "\"stepped\"");
    return 0;
}

static int fresh(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    clara_call_result(call, args);
    return 0;
}

static int register_more(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    (void)args;
    if (clara_register_tool("{\"name\":\"c_fresh\",\"description\":\"Registered while serving\"}", fresh, NULL, NULL) == CLARA_OK)
        clara_call_result(call, "\"registered c_fresh\"");
    else
        clara_call_error(call, "registration failed");
    return 0;
}

int main(void) {
    char *r, *url = NULL, line[16];
    if (clara_register_tool("{\"name\":\"c_add\",\"description\":\"Adds two numbers, in C\",\"input_schema\":{\"type\":\"object\","
                            "\"properties\":{\"a\":{\"type\":\"number\"},\"b\":{\"type\":\"number\"}},\"required\":[\"a\",\"b\"]}}",
                            c_add, NULL, NULL) != CLARA_OK ||
        clara_register_tool("{\"name\":\"report_steps\",\"description\":\"Reports two steps of progress\"}", report_steps, NULL,
                            NULL) != CLARA_OK ||
        clara_register_tool("{\"name\":\"register_more\",\"description\":\"Registers c_fresh\"}", register_more, NULL, NULL) !=
            CLARA_OK)
        return 1;
    r = clara_mcp_listen("127.0.0.1:0");
    if (r == NULL || clara_json_get(r, "result.url", &url, NULL) != CLARA_JSON_STRING) {
        fprintf(stderr, "c_host: %s\n", r ? r : "(NULL)");
        return 1;
    }
    printf("url %s\n", url);
    fflush(stdout);
    clara_free_string(url);
    clara_free_string(r);
    while (fgets(line, sizeof line, stdin) != NULL) {
    }
    clara_mcp_stop();
    return 0;
}
