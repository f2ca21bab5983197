/* SPDX-License-Identifier: MIT */
/*
 * bench_mem.c - the "memory" line of the bench table.
 *
 * Makes CLARA_BENCH_MEM_CALLS calls of clara_evaluate (default 2,000,000;
 * SPEC §12 asks for 10,000,000) cycling through a mix of requests that end in
 * success and in error envelopes, freeing every response, and reports the
 * resident set size (RSS, from /proc/self/statm) after a warm-up of
 * CLARA_BENCH_MEM_WARMUP calls (default 500,000) of the same mix, and at 20
 * checkpoints up to the end. Flat is the goal: a leak of even one byte per
 * call would show as megabytes here. RSS breathes with Go's heap (a
 * megabyte or so between collections), so table.py judges the trend on the
 * checkpoints rather than on two single readings.
 */
#define _POSIX_C_SOURCE 200809L
#include <unistd.h>

#include "bench_common.h"
#include "clara.h"

static char big_request[4096];

/* The mix; expected[i] is 1 for a success envelope, 0 for an error. */
static const char *requests[] = {
    BENCH_REQUEST,
    "{\"question\":\"what is the weather like?\"}",
    "{\"tool\":\"no_such_tool\",\"arguments\":{}}",
    "{\"tool\":\"echo\",\"arguments\":{\"message\":\"hi\"},\"id\":7,\"session\":\"s1\"}",
    "{\"tool\":\"echo\",\"arguments\":",
    "[1,2,3]",
    big_request,
    "",
    NULL,
};
static const int expected[] = {1, 1, 0, 1, 0, 0, 1, 0, 0};
#define N_REQUESTS (sizeof requests / sizeof requests[0])

static long rss_kib(void) {
    long size, resident;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL) return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static unsigned long successes, errors, unexpected;

static void run_mix(long n, long offset) {
    long i;
    for (i = 0; i < n; i++) {
        size_t k = (size_t)(offset + i) % N_REQUESTS;
        char *s = clara_evaluate(requests[k]);
        int ok;
        if (s == NULL) {
            fprintf(stderr, "bench_mem: clara_evaluate returned NULL\n");
            exit(1);
        }
        ok = strncmp(s, "{\"status\":\"success\"", 19) == 0;
        if (ok) successes++; else errors++;
        if (ok != expected[k]) unexpected++;
        clara_free_string(s);
    }
}

int main(void) {
    long calls = bench_env_long("CLARA_BENCH_MEM_CALLS", 2000000, 1);
    long warmup = bench_env_long("CLARA_BENCH_MEM_WARMUP", 500000, 0);
    long done = 0, start_rss, max_rss, rss;
    uint64_t t0;
    int c;

    /* An echo with a 2 KiB string argument. */
    {
        char pad[2049];
        memset(pad, 'x', sizeof pad - 1);
        pad[sizeof pad - 1] = '\0';
        snprintf(big_request, sizeof big_request, "{\"tool\":\"echo\",\"arguments\":{\"text\":\"%s\"}}", pad);
    }

    run_mix(warmup, 0);
    start_rss = max_rss = rss_kib();
    successes = errors = unexpected = 0;
    printf("mem checkpoint 0 %ld\n", start_rss);
    t0 = bench_now_ns();
    for (c = 1; c <= 20; c++) {
        long upto = calls * c / 20;
        run_mix(upto - done, warmup + done);
        done = upto;
        rss = rss_kib();
        if (rss > max_rss) max_rss = rss;
        printf("mem checkpoint %ld %ld\n", done, rss);
    }
    printf("mem result %ld %ld %ld %ld %lu %lu %.3f\n", calls, start_rss, rss, max_rss, successes, errors,
           (double)(bench_now_ns() - t0) / (double)calls);
    if (unexpected > 0) printf("info note memory mix: %lu responses had an unexpected status\n", unexpected);
    return 0;
}
