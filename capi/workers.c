/* workers.c - the threads that run tools written in C.
 *
 * A C tool runs on a thread of its own so that its caller gets `timeout` at
 * the deadline whatever the tool does. Handing a call to another thread
 * through the Go scheduler costs a few tens of microseconds here (the
 * goroutine serving a call from C is locked to the caller's thread, so
 * every wake-up is a thread handoff), which would dwarf most tools. So the
 * handoff happens in C: a pool of worker threads, a queue, and on both
 * sides a short spin before sleeping, which makes back-to-back calls cost
 * well under a microsecond of handoff while an idle pool costs nothing.
 *
 * A job's life: the caller creates it (shim_job_new), submits it and waits
 * (shim_job_run). If it finishes in time, the caller reads the status and
 * drops it (shim_job_free). If the deadline passes first, the caller marks
 * it abandoned and returns; the worker, after the tool returns (or without
 * running it, if it was still queued), tells Go with claraGoJobAbandoned so
 * that Go can release the tool.
 *
 * Who frees the job: both sides hold a reference from the moment it is
 * queued, and the last one to let go frees it. The caller may see JOB_DONE
 * (spinning) while the worker is still inside the job's mutex waking a
 * sleeper; a free on that sight alone let the next allocation reuse the
 * memory under the worker (tests/c/stress_workers.c catches it). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "clara.h"
#include "shim.h"
#include "_cgo_export.h"

enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE, JOB_ABANDONED };

struct shim_job {
    clara_tool_fn fn;
    uintptr_t userdata;
    char *args; /* malloc'd; freed with the job */
    struct shim_result res; /* res.call: the call's id, the tool's clara_call */
    int rc;
    _Atomic int state;
    pthread_mutex_t mu; /* with cv: the caller sleeping until the job is done */
    pthread_cond_t cv;
    int sleeping;
    _Atomic int refs; /* the caller's, plus the worker's while queued or running */
    struct shim_job *next;
};

/* Spinning before sleeping: long enough to catch a quick tool's answer or
 * the next call of a busy caller, short enough to cost little when idle. */
#define SPIN_NS 50000LL
/* A worker with nothing to do for this long exits. */
#define IDLE_EXIT_S 30

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cv = PTHREAD_COND_INITIALIZER;
static struct shim_job *queue_head, *queue_tail;
static int queue_len;        /* under pool_mu */
static int idle_workers;     /* waiting for a job (spinning or sleeping); under pool_mu */
static int sleeping_workers; /* in pthread_cond_wait; under pool_mu */
static _Atomic int queued;   /* queue_len, readable without the lock by spinning workers */

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void pause_cpu(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Spin loops read the clock only every SPIN_CHECK rounds: the clock costs
 * more than a round. */
#define SPIN_CHECK 64

static void spin_while_zero(_Atomic int *v, long long until) {
    for (;;) {
        int i;
        for (i = 0; i < SPIN_CHECK; i++) {
            if (atomic_load_explicit(v, memory_order_acquire) != 0) return;
            pause_cpu();
        }
        if (now_ns() >= until) return;
    }
}

static void spin_until_equal(_Atomic int *v, int want, long long until) {
    for (;;) {
        int i;
        for (i = 0; i < SPIN_CHECK; i++) {
            if (atomic_load_explicit(v, memory_order_acquire) == want) return;
            pause_cpu();
        }
        if (now_ns() >= until) return;
    }
}

/* Drops one reference; the last frees the job. */
static void unref_job(struct shim_job *job) {
    if (atomic_fetch_sub_explicit(&job->refs, 1, memory_order_acq_rel) != 1) return;
    pthread_cond_destroy(&job->cv);
    pthread_mutex_destroy(&job->mu);
    free(job->args);
    shim_result_clear(&job->res);
    free(job);
}

/* Takes the next job, or NULL after IDLE_EXIT_S without one (the worker
 * then exits). Called with pool_mu held; returns with it held. */
static struct shim_job *take_job(void) {
    struct shim_job *job;
    while (queue_head == NULL) {
        long long spin_until = now_ns() + SPIN_NS;
        pthread_mutex_unlock(&pool_mu);
        spin_while_zero(&queued, spin_until);
        pthread_mutex_lock(&pool_mu);
        if (queue_head != NULL) break;
        {
            struct timespec until;
            int rc;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += IDLE_EXIT_S;
            sleeping_workers++;
            rc = pthread_cond_timedwait(&pool_cv, &pool_mu, &until);
            sleeping_workers--;
            if (rc == ETIMEDOUT && queue_head == NULL) return NULL;
        }
    }
    job = queue_head;
    queue_head = job->next;
    if (queue_head == NULL) queue_tail = NULL;
    queue_len--;
    atomic_fetch_sub_explicit(&queued, 1, memory_order_release);
    return job;
}

static void *worker_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&pool_mu);
    for (;;) {
        struct shim_job *job = take_job();
        int expected = JOB_QUEUED;
        if (job == NULL) break;
        idle_workers--;
        pthread_mutex_unlock(&pool_mu);

        if (atomic_compare_exchange_strong(&job->state, &expected, JOB_RUNNING)) {
            job->rc = shim_run_reporting(job->fn, job->userdata, job->args, &job->res);
            expected = JOB_RUNNING;
            if (atomic_compare_exchange_strong(&job->state, &expected, JOB_DONE)) {
                pthread_mutex_lock(&job->mu);
                if (job->sleeping) pthread_cond_signal(&job->cv);
                pthread_mutex_unlock(&job->mu);
            } else {
                /* Abandoned by its caller while running: finish for it. */
                claraGoJobAbandoned(job->res.call);
            }
        } else {
            /* Abandoned while still queued: never run. */
            claraGoJobAbandoned(job->res.call);
        }
        unref_job(job);

        pthread_mutex_lock(&pool_mu);
        idle_workers++;
    }
    idle_workers--;
    pthread_mutex_unlock(&pool_mu);
    return NULL;
}

struct shim_job *shim_job_new(clara_tool_fn fn, uintptr_t userdata, char *args, uintptr_t call) {
    struct shim_job *job = calloc(1, sizeof *job);
    if (job == NULL) return NULL;
    job->fn = fn;
    job->userdata = userdata;
    job->args = args;
    job->res.call = call;
    atomic_init(&job->state, JOB_QUEUED);
    atomic_init(&job->refs, 1);
    pthread_mutex_init(&job->mu, NULL);
    {
        /* The deadline is on the monotonic clock: a change of the wall clock
         * must not stretch or cut a tool's time. */
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&job->cv, &attr);
        pthread_condattr_destroy(&attr);
    }
    return job;
}

/* Queues the job, starting a worker when none is free. Returns 0, or
 * -CLARA_ENOMEM when no thread could be started and none is free. */
static int submit(struct shim_job *job) {
    int rc = 0;
    pthread_mutex_lock(&pool_mu);
    if (queue_len >= idle_workers) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, worker_main, NULL) == 0) {
            idle_workers++;
        } else if (idle_workers == 0) {
            rc = -CLARA_ENOMEM;
        }
        pthread_attr_destroy(&attr);
    }
    if (rc == 0) {
        atomic_fetch_add_explicit(&job->refs, 1, memory_order_relaxed); /* the worker's */
        job->next = NULL;
        if (queue_tail != NULL) queue_tail->next = job;
        else queue_head = job;
        queue_tail = job;
        queue_len++;
        atomic_fetch_add_explicit(&queued, 1, memory_order_release);
        if (sleeping_workers > 0) pthread_cond_signal(&pool_cv);
    }
    pthread_mutex_unlock(&pool_mu);
    return rc;
}

int shim_job_run(struct shim_job *job, long long timeout_ns) {
    long long deadline = timeout_ns > 0 ? now_ns() + timeout_ns : 0, spin_until;
    int expected, rc = submit(job);
    if (rc != 0) return rc;

    spin_until = now_ns() + SPIN_NS;
    if (deadline != 0 && deadline < spin_until) spin_until = deadline;
    spin_until_equal(&job->state, JOB_DONE, spin_until);
    if (atomic_load_explicit(&job->state, memory_order_acquire) == JOB_DONE) return 1;

    pthread_mutex_lock(&job->mu);
    job->sleeping = 1;
    while (atomic_load(&job->state) != JOB_DONE) {
        if (deadline == 0) {
            pthread_cond_wait(&job->cv, &job->mu);
        } else {
            struct timespec until;
            if (deadline - now_ns() <= 0) break;
            until.tv_sec = (time_t)(deadline / 1000000000LL);
            until.tv_nsec = (long)(deadline % 1000000000LL);
            if (pthread_cond_timedwait(&job->cv, &job->mu, &until) == ETIMEDOUT && atomic_load(&job->state) != JOB_DONE &&
                now_ns() >= deadline)
                break;
        }
    }
    job->sleeping = 0;
    pthread_mutex_unlock(&job->mu);
    if (atomic_load(&job->state) == JOB_DONE) return 1;

    /* Past the deadline: give the job up, unless it finished just now. The
     * caller's reference goes with it; the worker frees the job. */
    expected = JOB_QUEUED;
    if (!atomic_compare_exchange_strong(&job->state, &expected, JOB_ABANDONED)) {
        expected = JOB_RUNNING;
        if (!atomic_compare_exchange_strong(&job->state, &expected, JOB_ABANDONED)) return 1; /* JOB_DONE after all */
    }
    unref_job(job);
    return 0;
}

int shim_job_status(const struct shim_job *job) { return job->rc; }

struct shim_result *shim_job_result(struct shim_job *job) { return &job->res; }

void shim_job_free(struct shim_job *job) { unref_job(job); }
