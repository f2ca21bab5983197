/* SPDX-License-Identifier: MIT */
/*
 * bench_echo.c - rows "C echo" and "C echo, 2 threads" of the bench table.
 *
 * C echo:            clara_evaluate + clara_free_string of the echo request on
 *                    one thread, against the same echo written with jansson
 *                    (bench_jansson_echo), the two alternating block by block.
 * C echo, 2 threads: two threads calling clara_evaluate at once (wall time of
 *                    the block divided by the calls of both threads) against
 *                    one thread, alternating. Both run on the same
 *                    long-lived worker threads, warmed up before timing, so
 *                    thread creation and Go's first-call set-up stay out.
 *                    The jansson echo is run the same way (1 vs 2 threads):
 *                    it shows how well this machine scales at that moment.
 * ..., a session per thread: the same, each thread naming a session of its
 *                    own in its requests (1 thread: its session too).
 * ..., 4 threads:    4 threads against 1, and the jansson echo the same way
 *                    (on a 2-core machine, 2x is the most either can reach).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "bench_common.h"
#include "clara.h"

/* Each block reads a byte of every response and stores the sum once, per
 * thread: a shared counter would bounce a cache line between the threads. */
static _Thread_local volatile unsigned long sink;

static void run_clara(void *ctx, long n) {
    unsigned long sum = 0;
    long i;
    (void)ctx;
    for (i = 0; i < n; i++) {
        char *s = clara_evaluate(BENCH_REQUEST);
        if (s == NULL) abort();
        sum += (unsigned char)s[2];
        clara_free_string(s);
    }
    sink = sum;
}

/* One crossing from C into Go and back that does nothing else
 * (clara_version_number returns a constant): the floor under the echo, which
 * crosses once, measured in the same run (issue 33). */
static void run_cgo(void *ctx, long n) {
    unsigned long sum = 0;
    long i;
    (void)ctx;
    for (i = 0; i < n; i++) sum += (unsigned long)clara_version_number();
    sink = sum;
}

/* One read of the monotonic clock (the vDSO's clock_gettime): the echo
 * reads it twice, for its audit record's duration. */
static void run_clock(void *ctx, long n) {
    unsigned long sum = 0;
    struct timespec t;
    long i;
    (void)ctx;
    for (i = 0; i < n; i++) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        sum += (unsigned long)t.tv_nsec;
    }
    sink = sum;
}

/* The echo request naming the calling worker's own session. */
static _Thread_local char session_request[128];

static void run_clara_session(void *ctx, long n) {
    unsigned long sum = 0;
    long i;
    (void)ctx;
    for (i = 0; i < n; i++) {
        char *s = clara_evaluate(session_request);
        if (s == NULL || strncmp(s, "{\"status\":\"success\"", 19) != 0) abort();
        sum += (unsigned char)s[2];
        clara_free_string(s);
    }
    sink = sum;
}

static void run_jansson(void *ctx, long n) {
    unsigned long sum = 0;
    long i;
    (void)ctx;
    for (i = 0; i < n; i++) {
        char *s = bench_jansson_echo(BENCH_REQUEST);
        if (s == NULL) abort();
        sum += (unsigned char)s[2];
        free(s);
    }
    sink = sum;
}

/* ---- Threads --------------------------------------------------------------- */

/* Long-lived workers; main hands them one phase at a time: run phase_fn
 * phase_n times on the first phase_threads workers. Barriers (main takes
 * part) start and end each phase and publish the variables. */
#define WORKERS 4
struct worker {
    pthread_t thread;
    int id;
    uint64_t start, end;
};

static pthread_barrier_t barrier;
static struct worker workers[WORKERS];
static bench_run_fn phase_fn;
static long phase_n;
static int phase_threads, quit;

static void *worker_main(void *arg) {
    struct worker *w = arg;
    snprintf(session_request, sizeof session_request,
             "{\"tool\":\"echo\",\"session\":\"bench%d\",\"arguments\":{\"message\":\"hello\",\"n\":42}}", w->id);
    run_clara(NULL, 20000); /* warm-up: Go's per-thread set-up happens here */
    run_clara_session(NULL, 20000);
    run_jansson(NULL, 5000);
    pthread_barrier_wait(&barrier);
    for (;;) {
        pthread_barrier_wait(&barrier);
        if (quit) break;
        if (w->id < phase_threads) {
            w->start = bench_now_ns();
            phase_fn(NULL, phase_n);
            w->end = bench_now_ns();
        }
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

/* Runs one phase; returns wall ns per call, over the calls of all threads. */
static double phase(bench_run_fn fn, long n, int threads) {
    uint64_t s, e;
    int i;
    phase_fn = fn;
    phase_n = n;
    phase_threads = threads;
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    s = workers[0].start;
    e = workers[0].end;
    for (i = 1; i < threads; i++) {
        if (workers[i].start < s) s = workers[i].start;
        if (workers[i].end > e) e = workers[i].end;
    }
    return (double)(e - s) / (double)(n * threads);
}

int main(void) {
    uint64_t block = bench_block_ns();
    long n_clara, n_jansson;
    char *a, *b;
    int reps = bench_reps(), r, i;

    /* Sanity: the reference produces Clara's envelope. */
    a = clara_evaluate(BENCH_REQUEST);
    b = bench_jansson_echo(BENCH_REQUEST);
    if (a == NULL || b == NULL) {
        fprintf(stderr, "bench_echo: an echo returned NULL\n");
        return 1;
    }
    printf("info clara_version %s\n", clara_version());
    printf("info response_bytes %zu\n", strlen(a));
    if (strcmp(a, b) != 0) printf("info note the jansson echo differs from Clara's: %s vs %s\n", b, a);
    clara_free_string(a);
    free(b);

    /* Row 1: C echo. */
    n_clara = bench_calibrate(run_clara, NULL, block);
    n_jansson = bench_calibrate(run_jansson, NULL, block);
    long n_cgo = bench_calibrate(run_cgo, NULL, block);
    long n_clock = bench_calibrate(run_clock, NULL, block);
    for (r = 0; r < reps; r++) {
        double jansson;
        /* Also the process CPU time of each block: Go's runtime may use the
         * other core (garbage collection) while the calling thread runs. */
        uint64_t cpu = bench_cpu_ns();
        bench_sample("c_echo", "clara", bench_time(run_clara, NULL, n_clara));
        bench_sample("c_echo_cpu", "clara", (double)(bench_cpu_ns() - cpu) / (double)n_clara);
        cpu = bench_cpu_ns();
        jansson = bench_time(run_jansson, NULL, n_jansson);
        bench_sample("c_echo", "ref", jansson);
        bench_sample("c_echo_cpu", "ref", (double)(bench_cpu_ns() - cpu) / (double)n_jansson);
        bench_sample("c_cgo", "clara", bench_time(run_cgo, NULL, n_cgo));
        bench_sample("c_cgo", "ref", jansson);
        bench_sample("c_clock", "clara", bench_time(run_clock, NULL, n_clock));
        bench_sample("c_clock", "ref", jansson);
    }

    /* Row 2: 2 threads against 1, on the same two workers. A two-thread block
     * makes as many calls in total as a one-thread block. The jansson echo
     * gets the same treatment: pure C with no shared state, it shows how far
     * two threads can scale on this machine right now (the cores are shared
     * with whatever else runs). */
    if (pthread_barrier_init(&barrier, NULL, WORKERS + 1) != 0) return 1;
    for (i = 0; i < WORKERS; i++) {
        workers[i].id = i;
        if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) != 0) {
            fprintf(stderr, "bench_echo: pthread_create failed\n");
            return 1;
        }
    }
    pthread_barrier_wait(&barrier); /* warm-up done */
    for (r = 0; r < reps; r++) {
        bench_sample("c_threads", "ref", phase(run_clara, n_clara, 1));
        bench_sample("c_threads", "clara", phase(run_clara, n_clara / 2 + 1, 2));
        bench_sample("c_threads_jansson", "ref", phase(run_jansson, n_jansson, 1));
        bench_sample("c_threads_jansson", "clara", phase(run_jansson, n_jansson / 2 + 1, 2));
        bench_sample("c_threads_sessions", "ref", phase(run_clara_session, n_clara, 1));
        bench_sample("c_threads_sessions", "clara", phase(run_clara_session, n_clara / 2 + 1, 2));
        bench_sample("c_threads4", "ref", phase(run_clara, n_clara, 1));
        bench_sample("c_threads4", "clara", phase(run_clara, n_clara / 4 + 1, 4));
        bench_sample("c_threads4_jansson", "ref", phase(run_jansson, n_jansson, 1));
        bench_sample("c_threads4_jansson", "clara", phase(run_jansson, n_jansson / 4 + 1, 4));
    }
    quit = 1;
    pthread_barrier_wait(&barrier);
    for (i = 0; i < WORKERS; i++) pthread_join(workers[i].thread, NULL);
    pthread_barrier_destroy(&barrier);
    return 0;
}
