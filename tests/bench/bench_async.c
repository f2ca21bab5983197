/* SPDX-License-Identifier: MIT */
/*
 * bench_async.c - rows of asynchronous calls (issue 12):
 *
 * async submit+wait: clara_submit of the echo, then clara_wait for it,
 *                    against a synchronous clara_evaluate of the same
 *                    request: what the background goroutine, the table and
 *                    the wake-up cost (goal <= 3x).
 * async batch:       10,000 echoes submitted at once and collected through
 *                    the eventfd (poll, clara_async_take, clara_wait(h, 0)),
 *                    per call, against the same 10,000 called synchronously
 *                    one after the other: the throughput of an event loop.
 */
#define _POSIX_C_SOURCE 200809L
#include <poll.h>
#include <unistd.h>

#include "bench_common.h"
#include "clara.h"

#define BATCH 10000

static volatile unsigned long sink;

static void check(const char *what, const char *s) {
    if (s == NULL || strncmp(s, "{\"status\":\"success\"", 19) != 0) {
        fprintf(stderr, "bench_async: %s -> %s\n", what, s ? s : "(NULL)");
        abort();
    }
}

static void run_sync(void *ctx, long n) {
    unsigned long sum = 0;
    long i;
    (void)ctx;
    for (i = 0; i < n; i++) {
        char *s = clara_evaluate(BENCH_REQUEST);
        check("clara_evaluate", s);
        sum += (unsigned char)s[2];
        clara_free_string(s);
    }
    sink = sum;
}

static void run_submit_wait(void *ctx, long n) {
    unsigned long sum = 0;
    long i;
    (void)ctx;
    for (i = 0; i < n; i++) {
        int64_t h = clara_submit(BENCH_REQUEST);
        char *s = clara_wait(h, -1);
        check("clara_wait", s);
        sum += (unsigned char)s[2];
        clara_free_string(s);
    }
    sink = sum;
}

/* One batch: BATCH submits, then collect them all through the eventfd. */
static void run_batch(void *ctx, long n) {
    int fd = clara_async_fd();
    long b;
    (void)ctx;
    for (b = 0; b < n; b++) {
        int i, left = BATCH;
        for (i = 0; i < BATCH; i++) {
            if (clara_submit(BENCH_REQUEST) <= 0) {
                fprintf(stderr, "bench_async: clara_submit refused\n");
                abort();
            }
        }
        while (left > 0) {
            struct pollfd pfd = {fd, POLLIN, 0};
            uint64_t count;
            char *list, *p;
            if (poll(&pfd, 1, 60000) != 1) {
                fprintf(stderr, "bench_async: no answer in a minute\n");
                abort();
            }
            if (read(fd, &count, sizeof count) < 0) { /* reset by an earlier read */
            }
            list = clara_async_take(0);
            for (p = strstr(list, "\"handle\":"); p != NULL; p = strstr(p + 1, "\"handle\":")) {
                char *s = clara_wait(strtoll(p + 9, NULL, 10), 0);
                check("batch clara_wait", s);
                clara_free_string(s);
                left--;
            }
            clara_free_string(list);
        }
    }
}

static void run_sync_batch(void *ctx, long n) { run_sync(ctx, n * BATCH); }

int main(void) {
    uint64_t block = bench_block_ns();
    int reps = bench_reps(), r;
    long n_sync, n_async;
    char *conf = clara_configure("[async]\nmax_running = 20000\nmax_pending = 20000\n");
    check("clara_configure", conf);
    clara_free_string(conf);
    n_sync = bench_calibrate(run_sync, NULL, block);
    n_async = bench_calibrate(run_submit_wait, NULL, block);
    for (r = 0; r < reps; r++) {
        bench_sample("async_wait", "clara", bench_time(run_submit_wait, NULL, n_async));
        bench_sample("async_wait", "ref", bench_time(run_sync, NULL, n_sync));
        bench_sample("async_batch", "clara", bench_time(run_batch, NULL, 1) / BATCH);
        bench_sample("async_batch", "ref", bench_time(run_sync_batch, NULL, 1) / BATCH);
    }
    return 0;
}
