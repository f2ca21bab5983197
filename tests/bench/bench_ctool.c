/* SPDX-License-Identifier: MIT */
/*
 * bench_ctool.c - a C tool in a shared object, for bench_python.py's row
 * "Python tool vs C": Python registers it with clara_register_tool through
 * ctypes and calls it as it calls its own Python tool. It answers what the
 * Python tool answers ({"message": ...}: here, its arguments).
 */
#include "clara.h"

int bench_c_echo(void *userdata, const char *arguments_json, clara_call *call);

int bench_c_echo(void *userdata, const char *arguments_json, clara_call *call) {
    (void)userdata;
    clara_call_result(call, arguments_json);
    return 0;
}
