/* workers.c - the threads that run tools written in C.
 *
 * A C tool runs on a thread of its own so that its caller gets `timeout` at
 * the deadline whatever the tool does. Handing a call to another thread
 * through the Go scheduler costs a few tens of microseconds here (the
 * goroutine serving a call from C is locked to the caller's thread, so
 * every wake-up is a thread handoff), which would dwarf most tools. So the
 * handoff happens in C, between a caller and a pool of worker threads.
 *
 * The fast path is a mailbox: a worker with nothing to do publishes itself
 * in a spinner slot and spins on its own mailbox for a while; a caller that
 * finds it there takes it (one exchange), puts the job in its mailbox (one
 * store) and spins on the job's state until the worker marks it done. Two
 * cache lines cross between the processors each way, which is about as
 * little as a handoff can cost (0.23 us for a bare ping-pong of one atomic
 * on the 2-processor machine of the bench; a mutex-and-queue handoff cost
 * 1.4 us there). When no worker spins, the job goes to a queue under
 * pool_mu, a sleeping worker is woken or a thread started, and the caller
 * spins, then sleeps, until its deadline.
 *
 * A job's life (shim_call_worker, one crossing from Go): the caller copies
 * the arguments into a new job, hands it over and waits. If it finishes in
 * time, the caller takes the status and the reports and drops the job. If
 * the deadline passes first, the caller marks it abandoned and returns; the
 * worker, after the tool returns (or without running it, if it had not
 * started it), tells Go with claraGoJobAbandoned so that Go can release the
 * tool.
 *
 * Who frees the job: both sides hold a reference from the moment it is
 * handed over, and the last one to let go frees it. The caller may see
 * JOB_DONE (spinning) while the worker is still waking a sleeper; a free on
 * that sight alone let the next allocation reuse the memory under the
 * worker (tests/c/stress_workers.c catches it). */
#define _GNU_SOURCE /* sched_getcpu */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clara.h"
#include "shim.h"
#include "_cgo_export.h"

enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE, JOB_ABANDONED };

struct shim_job {
    /* What the worker writes and the caller reads, together. */
    _Atomic int state;
    int rc;
    struct shim_result res; /* res.call: the call's id, the tool's clara_call */
    _Atomic int sleeping;   /* the caller waits on cv (set under mu); mu and cv exist from then on */
    _Atomic int refs;       /* the caller's, plus the worker's once handed over */
    clara_tool_fn fn;
    uintptr_t userdata;
    /* With cv: the caller sleeping until the job is done. Made only when
     * the caller is about to sleep: most jobs end while it spins. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct shim_job *next;
    /* The processor the caller ran on as it handed the job over, and
     * whether the worker it took was spinning on that same one (see
     * "Sharing a processor" below). */
    int caller_cpu;
    int shared_cpu;
    /* The result's room, then a NUL-terminated copy of the arguments, in
     * the job's own allocation. The arguments come last: a tool reading
     * past their end leaves the block, where valgrind and ASan see it. */
    char *args;
};

/* A worker's mailbox, on a cache line of its own: the caller that took the
 * worker from a spinner slot stores the job here, and reads which
 * processor the worker spins on. */
struct worker {
    _Alignas(64) _Atomic(struct shim_job *) mailbox;
    _Atomic int cpu;
};

/* Spinning before sleeping: long enough to catch a quick tool's answer or
 * the next call of a busy caller, short enough to cost little when idle. */
#define SPIN_NS 50000LL
/* A worker with nothing to do for this long exits. */
#define IDLE_EXIT_S 30
/* Taking pool_mu spins this many rounds before sleeping on it: it is held
 * for a few instructions, and a thread put to sleep on it pays a futex
 * wake-up of several microseconds. */
#define LOCK_SPINS 100
/* At most this many workers spin (half the processors, at least one: on a
 * machine of two, a second spinner would take the processor the caller
 * needs). */
#define MAX_SPINNERS 8

static _Atomic(struct worker *) spinners[MAX_SPINNERS];
static _Atomic int n_spinners; /* slots in use: set once, from the processors */

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cv = PTHREAD_COND_INITIALIZER;
static struct shim_job *queue_head, *queue_tail;
static int queue_len;        /* under pool_mu */
static int sleeping_workers; /* in pthread_cond_wait; under pool_mu */
static _Atomic int queued;   /* queue_len, readable without the lock */
/* Workers between the end of a job and their next wait (published as a
 * spinner, or under pool_mu): a caller finding no spinner counts them as
 * free rather than start a thread for a worker that is only finishing up. */
static _Atomic int finishing;

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

static void lock_pool(void) {
    int i;
    for (i = 0; i < LOCK_SPINS; i++) {
        if (pthread_mutex_trylock(&pool_mu) == 0) return;
        pause_cpu();
    }
    pthread_mutex_lock(&pool_mu);
}

static int spinner_slots(void) {
    int n = atomic_load_explicit(&n_spinners, memory_order_relaxed);
    if (n == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        n = cpus >= 4 ? (int)(cpus / 2) : 1;
        if (n > MAX_SPINNERS) n = MAX_SPINNERS;
        atomic_store_explicit(&n_spinners, n, memory_order_relaxed);
    }
    return n;
}

/* Spin loops read the clock only every SPIN_CHECK rounds (the clock costs
 * more than a round), and after SPIN_PURE_NS they yield the processor
 * between checks: on a busy machine the thread they wait for may be
 * waiting for this very processor, and a spinner would hold it to the end
 * of its time slice (tens of microseconds per call, seen on two
 * processors under load). */
#define SPIN_CHECK 8
#define SPIN_PURE_NS 3000LL

/* Sharing a processor. When the other processors are busy (another
 * program, or a caller pinned to one), the scheduler puts a caller and its
 * worker on the same one, and every microsecond either spins is one the
 * other cannot run in: a C tool call cost 11-12 us there, against 1.5 us
 * for the echo. A thread that knows the one it waits for is on its own
 * processor yields at once instead (4.4-5 us): the caller when the worker
 * it took last spun there, the worker when its caller handed the job over
 * from there. sched_getcpu reads the kernel's rseq area, a few
 * nanoseconds; a thread that moves between the reading and the yield costs
 * only a yield. */
static int current_cpu(void) {
    return sched_getcpu();
}

struct spin {
    long long pure_until, until;
    int rounds;
};

static void spin_start_at(struct spin *s, long long now, long long until) {
    s->pure_until = now + SPIN_PURE_NS;
    s->until = until;
    s->rounds = 0;
}

static void spin_start(struct spin *s, long long until) {
    spin_start_at(s, now_ns(), until);
}

/* A spin that yields from its first check: what it waits for needs this
 * processor. */
static void spin_shared(struct spin *s) {
    s->pure_until = 0;
}

/* One round of a spin loop; 0 once the clock reads s->until. */
static int spin_more(struct spin *s) {
    long long t;
    pause_cpu();
    if (++s->rounds < SPIN_CHECK) return 1;
    s->rounds = 0;
    t = now_ns();
    if (t >= s->until) return 0;
    if (t >= s->pure_until) sched_yield();
    return 1;
}

/* Drops one reference; the last frees the job. */
static void unref_job(struct shim_job *job) {
    if (atomic_fetch_sub_explicit(&job->refs, 1, memory_order_acq_rel) != 1) return;
    if (atomic_load_explicit(&job->sleeping, memory_order_relaxed)) {
        pthread_cond_destroy(&job->cv);
        pthread_mutex_destroy(&job->mu);
    }
    shim_result_clear(&job->res);
    free(job);
}

/* Takes the queue's first job; pool_mu held. */
static struct shim_job *pop_job(void) {
    struct shim_job *job = queue_head;
    queue_head = job->next;
    if (queue_head == NULL) queue_tail = NULL;
    queue_len--;
    atomic_fetch_sub_explicit(&queued, 1, memory_order_release);
    return job;
}

/* Publishes w in a free spinner slot; its index, or -1 when all are taken. */
static int publish(struct worker *w) {
    int i, n = spinner_slots();
    for (i = 0; i < n; i++) {
        struct worker *none = NULL;
        if (atomic_compare_exchange_strong(&spinners[i], &none, w)) return i;
    }
    return -1;
}

/* The next job of worker w, or NULL after IDLE_EXIT_S without one (the
 * worker then exits). Entered counted in `finishing`; leaves it. shared:
 * the last caller ran on this processor, so spin yielding. */
static struct shim_job *next_job(struct worker *w, int shared) {
    struct shim_job *job = NULL;
    int slot = -1;

    if (atomic_load_explicit(&queued, memory_order_acquire) == 0) {
        atomic_store_explicit(&w->cpu, current_cpu(), memory_order_relaxed);
        slot = publish(w);
    }
    atomic_fetch_sub_explicit(&finishing, 1, memory_order_relaxed);
    if (slot >= 0) {
        struct spin s;
        struct worker *self = w;
        spin_start(&s, now_ns() + SPIN_NS);
        if (shared) spin_shared(&s);
        for (;;) {
            job = atomic_load_explicit(&w->mailbox, memory_order_acquire);
            if (job != NULL || atomic_load_explicit(&queued, memory_order_relaxed) != 0) break;
            if (!spin_more(&s)) break;
            if (s.rounds == 0) {
                /* A check round: keep the processor current for callers
                 * (written only when it changes, the line stays shared). */
                int cpu = current_cpu();
                if (cpu != atomic_load_explicit(&w->cpu, memory_order_relaxed))
                    atomic_store_explicit(&w->cpu, cpu, memory_order_relaxed);
            }
        }
        if (job == NULL && !atomic_compare_exchange_strong(&spinners[slot], &self, NULL)) {
            /* A caller took this worker as the slot was given up: its job
             * is on the way. Yielding after a few rounds: that caller may
             * have been preempted between the two, on this processor. */
            int rounds = 0;
            while ((job = atomic_load_explicit(&w->mailbox, memory_order_acquire)) == NULL) {
                pause_cpu();
                if (++rounds >= SPIN_CHECK) sched_yield();
            }
        }
        if (job != NULL) {
            atomic_store_explicit(&w->mailbox, NULL, memory_order_relaxed);
            return job;
        }
        /* Retracted: nobody can hand this worker a job any more but
         * through the queue. */
    }

    lock_pool();
    while (queue_head == NULL) {
        struct timespec until;
        int rc;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += IDLE_EXIT_S;
        sleeping_workers++;
        rc = pthread_cond_timedwait(&pool_cv, &pool_mu, &until);
        sleeping_workers--;
        if (rc == ETIMEDOUT && queue_head == NULL) {
            pthread_mutex_unlock(&pool_mu);
            return NULL;
        }
    }
    job = pop_job();
    pthread_mutex_unlock(&pool_mu);
    return job;
}

static void *worker_main(void *arg) {
    struct worker w;
    int shared = 0;
    (void)arg;
    atomic_init(&w.mailbox, NULL);
    atomic_init(&w.cpu, -1);
    /* Started for a queued job: counted as finishing by its starter. */
    for (;;) {
        struct shim_job *job = next_job(&w, shared);
        int expected = JOB_QUEUED, caller_cpu;
        if (job == NULL) break;
        caller_cpu = job->caller_cpu;

        if (atomic_compare_exchange_strong(&job->state, &expected, JOB_RUNNING)) {
            job->rc = shim_run_reporting(job->fn, job->userdata, job->args, &job->res);
            expected = JOB_RUNNING;
            atomic_fetch_add_explicit(&finishing, 1, memory_order_relaxed);
            if (atomic_compare_exchange_strong(&job->state, &expected, JOB_DONE)) {
                /* The caller sets `sleeping` before it checks the state a
                 * last time under mu: if it is not set here, the caller
                 * will see JOB_DONE. */
                if (atomic_load(&job->sleeping)) {
                    pthread_mutex_lock(&job->mu);
                    pthread_cond_signal(&job->cv);
                    pthread_mutex_unlock(&job->mu);
                }
            } else {
                /* Abandoned by its caller while running: finish for it. */
                claraGoJobAbandoned(job->res.call);
            }
        } else {
            /* Abandoned before it started: never run. */
            claraGoJobAbandoned(job->res.call);
            atomic_fetch_add_explicit(&finishing, 1, memory_order_relaxed);
        }
        unref_job(job);
        /* The caller waits on this processor: the next spin yields it at
         * once, after publishing this worker for the caller's next call. */
        shared = caller_cpu >= 0 && caller_cpu == current_cpu();
    }
    return NULL;
}

/* Room in a job for the tool's result (struct shim_result): what a tool
 * that answers about as much as it was given needs, within bounds. */
#define RESULT_ROOM_MIN 256
#define RESULT_ROOM_MAX 16384

static struct shim_job *new_job(clara_tool_fn fn, uintptr_t userdata, const char *args, size_t n, uintptr_t call) {
    size_t room = n + 65 < RESULT_ROOM_MIN ? RESULT_ROOM_MIN : n + 65;
    struct shim_job *job;
    if (room > RESULT_ROOM_MAX) room = RESULT_ROOM_MAX;
    job = malloc(sizeof *job + room + n + 1);
    if (job == NULL) return NULL;
    memset(job, 0, sizeof *job);
    job->res.room = (char *)(job + 1);
    job->res.room_cap = room;
    job->args = job->res.room + room;
    if (n > 0) memcpy(job->args, args, n);
    job->args[n] = '\0';
    DEFINED(job->args, n + 1);
    job->fn = fn;
    job->userdata = userdata;
    job->res.call = call;
    atomic_init(&job->state, JOB_QUEUED);
    atomic_init(&job->sleeping, 0);
    atomic_init(&job->refs, 1);
    return job;
}

/* Hands the job to a worker: a spinning one's mailbox, else the queue,
 * starting a worker when none is free. Returns 0, or SHIM_NO_THREAD when
 * no thread could be started and none is free. */
static int submit(struct shim_job *job) {
    int i, n = spinner_slots(), rc = 0, awake;
    for (i = 0; i < n; i++) {
        struct worker *w;
        if (atomic_load_explicit(&spinners[i], memory_order_relaxed) == NULL) continue;
        w = atomic_exchange(&spinners[i], NULL);
        if (w != NULL) {
            job->shared_cpu = job->caller_cpu >= 0 && atomic_load_explicit(&w->cpu, memory_order_relaxed) == job->caller_cpu;
            atomic_fetch_add_explicit(&job->refs, 1, memory_order_relaxed); /* the worker's */
            atomic_store_explicit(&w->mailbox, job, memory_order_release);
            return 0;
        }
    }

    lock_pool();
    /* Workers that will look at the queue without being woken: those
     * finishing a job and those spinning. */
    awake = atomic_load_explicit(&finishing, memory_order_relaxed);
    for (i = 0; i < n; i++)
        if (atomic_load_explicit(&spinners[i], memory_order_relaxed) != NULL) awake++;
    if (queue_len >= sleeping_workers + awake) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        atomic_fetch_add_explicit(&finishing, 1, memory_order_relaxed); /* the new worker, until it waits */
        if (pthread_create(&t, &attr, worker_main, NULL) != 0) {
            atomic_fetch_sub_explicit(&finishing, 1, memory_order_relaxed);
            if (sleeping_workers + awake == 0) rc = SHIM_NO_THREAD;
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
        /* A sleeper is woken only for a job the awake ones leave over: the
         * wake-up costs more than waiting for a worker about to look. */
        if (sleeping_workers > 0 && queue_len > awake) pthread_cond_signal(&pool_cv);
    }
    pthread_mutex_unlock(&pool_mu);
    return rc;
}

/* Waits for the job until its deadline (0: none); the clock read t0 at
 * the start of the call. 1: done; 0: abandoned (the caller's reference is
 * gone with it). */
static int wait_job(struct shim_job *job, long long t0, long long deadline) {
    long long spin_until = t0 + SPIN_NS;
    struct spin s;
    int expected;
    if (deadline != 0 && deadline < spin_until) spin_until = deadline;
    spin_start_at(&s, t0, spin_until);
    if (job->shared_cpu) spin_shared(&s);
    do {
        if (atomic_load_explicit(&job->state, memory_order_acquire) == JOB_DONE) return 1;
    } while (spin_more(&s));

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
    pthread_mutex_lock(&job->mu);
    atomic_store(&job->sleeping, 1);
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

int shim_call_worker(clara_tool_fn fn, uintptr_t userdata, const char *args, size_t n, long long timeout_ns,
                     struct shim_result *res, int *status, char *out, size_t out_cap) {
    long long t0 = now_ns(), deadline = timeout_ns > 0 ? t0 + timeout_ns : 0;
    struct shim_job *job = new_job(fn, userdata, args, n, res->call);
    int rc;
    if (job == NULL) return SHIM_NO_MEMORY;
    job->res.check_json = res->check_json;
    job->caller_cpu = current_cpu();
    rc = submit(job);
    if (rc != 0) {
        unref_job(job);
        return rc;
    }
    if (wait_job(job, t0, deadline) == 0) return 0;
    /* Done: the reports move to the caller's res (a result in the job's
     * room copied out), and the job goes. The worker lets go of it just
     * after marking it done; waiting for that keeps the free on this
     * thread, whose arena the job came from. */
    *status = job->rc;
    *res = job->res;
    res->room = NULL;
    res->room_cap = 0;
    if (res->result != NULL && res->result_len < out_cap) {
        /* Straight into the caller's buffer: no malloc here, no free later. */
        memcpy(out, res->result, res->result_len);
        if (res->result != job->res.room) free(res->result);
        res->result = NULL;
        res->result_in_out = 1;
    } else if (res->result != NULL && res->result == job->res.room) {
        char *copy = malloc(res->result_len + 1);
        if (copy != NULL) memcpy(copy, res->result, res->result_len + 1);
        res->result = copy;
        if (copy == NULL) {
            shim_result_clear(res);
            rc = SHIM_NO_MEMORY_RESULT;
        }
    }
    memset(&job->res, 0, sizeof job->res);
    {
        struct spin s;
        spin_start(&s, now_ns() + SPIN_NS);
        while (atomic_load_explicit(&job->refs, memory_order_acquire) > 1 && spin_more(&s)) {
        }
    }
    unref_job(job);
    return rc == 0 ? 1 : rc;
}
