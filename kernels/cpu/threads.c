/* CPU threads for the multi-threaded kernels (qgold/threads.h) and the range splitter of
 * threads.h, on a persistent pool.
 *
 * The pool. Workers are started lazily, the first time a call needs them, and only as many as that call
 * needs (at most qg_threads() - 1); between calls they spin briefly, then park on a condition variable.
 * Worker k has its own job slot: the calling thread writes range k + 1 into slot k, publishes it by
 * bumping the slot's sequence number (release) and wakes the workers; worker k runs the range and
 * decrements the call's pending count, and the worker that brings it to 0 signals the caller. A slot is
 * only rewritten after its previous range finished (the caller waits for pending == 0 before it
 * returns), so a worker never reads a half-written job. When qg_threads() drops below the pool size,
 * the next call that finds the pool free retires the workers above it (an exit job, then a join).
 * Workers that are never retired live until the process exits; all of the pool's storage is static.
 *
 * One call at a time owns the pool (an atomic flag). A call that finds it owned (another thread's
 * call, or a kernel called from inside a range, on a worker or on the owning caller itself) runs its
 * ranges on its own thread, in order: it never waits for the pool, so nesting and concurrent callers
 * cannot deadlock. After fork() the child starts with an empty pool.
 *
 * Determinism does not rest on this file: the range split is the same for every path above, and each
 * item a kernel computes is computed by one thread with the same code, whichever range and thread it
 * lands in.
 */
#include "threads.h"

#include "qgold/threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { QG_MAX_THREADS = 256 };

/* How long a worker waiting for a job, and a caller waiting for its workers, spin before they sleep. */
static const long k_spin_ns = 30000;

static atomic_int g_threads_set; /* 0: the default (environment, else online CPUs) */

void qg_set_threads(int n) { atomic_store(&g_threads_set, n > 0 ? (n < QG_MAX_THREADS ? n : QG_MAX_THREADS) : 0); }

/* QG_THREADS as a positive decimal integer; 0 when unset or not one. */
static int env_threads(void)
{
    const char *s = getenv("QG_THREADS");
    if (s == NULL || *s == '\0') return 0;
    long v = 0;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9') return 0;
        v = v * 10 + (*s - '0');
        if (v > QG_MAX_THREADS) return QG_MAX_THREADS;
    }
    return (int)v;
}

int qg_threads(void)
{
    int n = atomic_load(&g_threads_set);
    if (n > 0) return n;
    n = env_threads();
    if (n > 0) return n;
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    if (c < 1) return 1;
    return c < QG_MAX_THREADS ? (int)c : QG_MAX_THREADS;
}

/* ---- the pool ------------------------------------------------------------------------------------ */

typedef struct {
    /* the job, written by the owning caller before seq is bumped; fn == NULL: exit */
    qg_range_fn fn;
    void *ctx;
    size_t begin, end;
    atomic_uint seq;
    unsigned seq0; /* seq when the worker was started: it waits for the next one */
    pthread_t tid;
} worker_slot;

static struct {
    pthread_mutex_t mu; /* guards the sleeping side of wake and done */
    pthread_cond_t wake, done;
    atomic_flag owned;      /* set while one call uses the pool */
    atomic_size_t nworkers; /* started and not retired; changed by the owner only */
    atomic_size_t pending;  /* ranges of the current call not yet finished by workers */
    int atfork_set;         /* owner only */
    worker_slot slot[QG_MAX_THREADS - 1];
} g_pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER, .owned = ATOMIC_FLAG_INIT};

/* Set on pool workers, and on the owning caller while it runs its own ranges: calls made there run inline. */
static _Thread_local int tl_in_pool;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)t.tv_sec * 1000000000L + t.tv_nsec;
}

/* Spins until *v != seen (returns the new value) or k_spin_ns passed (returns seen). */
static unsigned spin_while_eq(const atomic_uint *v, unsigned seen)
{
    const long t0 = now_ns();
    for (;;) {
        for (int i = 0; i < 64; i++) {
            const unsigned now = atomic_load_explicit(v, memory_order_acquire);
            if (now != seen) return now;
            cpu_relax();
        }
        if (now_ns() - t0 > k_spin_ns) return seen;
    }
}

static int spin_until_zero(const atomic_size_t *v)
{
    const long t0 = now_ns();
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (atomic_load_explicit(v, memory_order_acquire) == 0) return 1;
            cpu_relax();
        }
        if (now_ns() - t0 > k_spin_ns) return 0;
    }
}

static void *worker_main(void *arg)
{
    worker_slot *s = arg;
    tl_in_pool = 1;
    unsigned seen = s->seq0;
    for (;;) {
        /* wait for the next job: spin a little (back-to-back calls), then park */
        unsigned now = spin_while_eq(&s->seq, seen);
        if (now == seen) {
            pthread_mutex_lock(&g_pool.mu);
            while ((now = atomic_load_explicit(&s->seq, memory_order_acquire)) == seen) pthread_cond_wait(&g_pool.wake, &g_pool.mu);
            pthread_mutex_unlock(&g_pool.mu);
        }
        seen = now;
        if (s->fn == NULL) return NULL;
        s->fn(s->ctx, s->begin, s->end);
        if (atomic_fetch_sub_explicit(&g_pool.pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&g_pool.mu);
            pthread_cond_signal(&g_pool.done);
            pthread_mutex_unlock(&g_pool.mu);
        }
    }
}

/* In a child after fork() only the forking thread exists: forget the workers, fresh primitives. */
static void pool_atfork_child(void)
{
    pthread_mutex_init(&g_pool.mu, NULL);
    pthread_cond_init(&g_pool.wake, NULL);
    pthread_cond_init(&g_pool.done, NULL);
    atomic_store(&g_pool.nworkers, 0);
    atomic_store(&g_pool.pending, 0);
    atomic_flag_clear(&g_pool.owned);
}

/* Publishes slot k's job (the caller owns the pool); wake_all() then wakes a parked worker. */
static void post(size_t k)
{
    atomic_fetch_add_explicit(&g_pool.slot[k].seq, 1, memory_order_release);
}

static void wake_all(void)
{
    pthread_mutex_lock(&g_pool.mu);
    pthread_cond_broadcast(&g_pool.wake);
    pthread_mutex_unlock(&g_pool.mu);
}

/* Retires workers k >= keep: an exit job each, then joins them (the caller owns the pool; they are idle). */
static void retire(size_t keep)
{
    const size_t nw = atomic_load_explicit(&g_pool.nworkers, memory_order_relaxed);
    if (nw <= keep) return;
    for (size_t k = keep; k < nw; k++) {
        g_pool.slot[k].fn = NULL;
        post(k);
    }
    wake_all();
    for (size_t k = keep; k < nw; k++) pthread_join(g_pool.slot[k].tid, NULL);
    atomic_store_explicit(&g_pool.nworkers, keep, memory_order_relaxed);
}

/* Starts workers up to `want` (fewer if a thread cannot be created); returns how many there are. */
static size_t grow(size_t want)
{
    if (!g_pool.atfork_set) {
        g_pool.atfork_set = pthread_atfork(NULL, NULL, pool_atfork_child) == 0 ? 1 : -1;
    }
    size_t nw = atomic_load_explicit(&g_pool.nworkers, memory_order_relaxed);
    for (; nw < want; nw++) {
        worker_slot *s = &g_pool.slot[nw];
        s->seq0 = atomic_load_explicit(&s->seq, memory_order_relaxed);
        if (pthread_create(&s->tid, NULL, worker_main, s) != 0) break;
    }
    atomic_store_explicit(&g_pool.nworkers, nw, memory_order_relaxed);
    return nw;
}

void qg_parallel_for(size_t n, size_t align, size_t min_items, qg_range_fn fn, void *ctx)
{
    if (n == 0) return;
    if (align == 0) align = 1;
    if (min_items == 0) min_items = 1;
    const size_t threads = (size_t)qg_threads();
    size_t parts = threads;
    if (parts > n / min_items) parts = n / min_items;
    if (parts <= 1) {
        /* a pool larger than the thread count now allows shrinks here too, when it is free */
        if (atomic_load_explicit(&g_pool.nworkers, memory_order_relaxed) > threads - 1 && !tl_in_pool &&
            !atomic_flag_test_and_set_explicit(&g_pool.owned, memory_order_acquire)) {
            retire(threads - 1);
            atomic_flag_clear_explicit(&g_pool.owned, memory_order_release);
        }
        fn(ctx, 0, n);
        return;
    }
    /* Range length: ceil(n / parts) rounded up to a multiple of align; the last ranges may be shorter
     * or absent. Range i is [i * per, min((i + 1) * per, n)). */
    size_t per = (n + parts - 1) / parts;
    per = (per + align - 1) / align * align;
    const size_t count = (n + per - 1) / per; /* <= parts <= QG_MAX_THREADS */
    if (count == 1) { /* align made one range of everything */
        fn(ctx, 0, n);
        return;
    }

    if (tl_in_pool || atomic_flag_test_and_set_explicit(&g_pool.owned, memory_order_acquire)) {
        /* the pool is busy (or this is a nested call): the same ranges, in order, on this thread */
        for (size_t i = 0; i < count; i++) fn(ctx, i * per, n - i * per > per ? (i + 1) * per : n);
        return;
    }
    retire(threads - 1);
    size_t nw = grow(count - 1); /* the pool may be larger than this call needs */
    if (nw > count - 1) nw = count - 1;
    atomic_store_explicit(&g_pool.pending, nw, memory_order_relaxed);
    for (size_t k = 0; k < nw; k++) { /* worker k: range k + 1 */
        worker_slot *s = &g_pool.slot[k];
        const size_t b = (k + 1) * per;
        s->fn = fn;
        s->ctx = ctx;
        s->begin = b;
        s->end = n - b > per ? b + per : n;
        post(k);
    }
    if (nw > 0) wake_all();

    /* range 0, and the ranges of workers that could not be started, here */
    tl_in_pool = 1;
    fn(ctx, 0, per);
    for (size_t i = nw + 1; i < count; i++) fn(ctx, i * per, n - i * per > per ? (i + 1) * per : n);
    tl_in_pool = 0;

    if (!spin_until_zero(&g_pool.pending)) {
        pthread_mutex_lock(&g_pool.mu);
        while (atomic_load_explicit(&g_pool.pending, memory_order_acquire) != 0) pthread_cond_wait(&g_pool.done, &g_pool.mu);
        pthread_mutex_unlock(&g_pool.mu);
    }
    atomic_flag_clear_explicit(&g_pool.owned, memory_order_release);
}
