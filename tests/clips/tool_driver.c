/* tool_driver.c - a CLIPS program with tools written in C: registers
 * "weather" and "sensor" (a tool that always fails) with Clara, adds Clara's
 * functions to a CLIPS environment and runs a batch file silently (batch*).
 * Used by tests/clips/run.sh for the programs whose names start with tool_.
 * It registers Clara's functions twice, as a program that links
 * clips_bridge/userfunctions.c and also calls clara_clips_register() does:
 * the second registration must change nothing. Builds with CLIPS 6.30 and
 * 6.4x.
 *
 * usage: tool_driver FILE.clp */
#include <stdio.h>
#include <string.h>

#include "clips.h"

#include "clara.h"
#include "clara_clips.h"

#if defined(UNBOUNDED) && defined(UDFHasNextArgument) /* CLIPS 6.4x */
#define BATCH_STAR(env, path) BatchStar(env, path)
#else
#define BATCH_STAR(env, path) EnvBatchStar(env, path)
#endif

/* weather: {"city": string, "units": "metric"|"imperial"} -> a fixed forecast. */
static int weather(void *userdata, const char *args, clara_call *call) {
    char *city = NULL, out[256];
    (void)userdata;
    clara_json_get(args, "city", &city, NULL);
    snprintf(out, sizeof out, "{\"city\":\"%s\",\"forecast\":\"sunny\",\"celsius\":21}", city ? city : "?");
    clara_free_string(city);
    clara_call_result(call, out);
    return 0;
}

/* sensor: always fails, as a device that went offline. */
static int sensor(void *userdata, const char *args, clara_call *call) {
    (void)userdata;
    (void)args;
    clara_call_error(call, "sensor offline");
    return 1;
}

int main(int argc, char *argv[]) {
    void *env;
    if (argc != 2) {
        fprintf(stderr, "usage: tool_driver FILE.clp\n");
        return 2;
    }
    if (clara_register_tool("{\"name\":\"weather\",\"description\":\"Forecast for a city.\",\"input_schema\":"
                            "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"minLength\":1},"
                            "\"units\":{\"enum\":[\"metric\",\"imperial\"]}},\"required\":[\"city\"],"
                            "\"additionalProperties\":false}}",
                            weather, NULL, NULL) != CLARA_OK) {
        fprintf(stderr, "tool_driver: cannot register weather\n");
        return 2;
    }
    if (clara_register_tool("{\"name\":\"sensor\",\"description\":\"Reads a sensor.\"}", sensor, NULL, NULL) !=
        CLARA_OK) {
        fprintf(stderr, "tool_driver: cannot register sensor\n");
        return 2;
    }
    env = CreateEnvironment();
    if (env == NULL || clara_clips_register(env) != CLARA_OK || clara_clips_register(env) != CLARA_OK) {
        fprintf(stderr, "tool_driver: cannot register Clara's functions\n");
        return 2;
    }
    if (!BATCH_STAR(env, argv[1])) {
        fprintf(stderr, "tool_driver: cannot run %s\n", argv[1]);
        return 2;
    }
    DestroyEnvironment(env);
    return 0;
}
