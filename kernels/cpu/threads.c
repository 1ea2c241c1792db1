/* CPU threads for the multi-threaded kernels (qgold/kernels_kquants.h) and the range splitter of
 * threads.h. Threads are started per call and joined before it returns: no pool, no state between
 * calls beyond the chosen count. Determinism does not rest on this file: every item a kernel computes
 * is computed by one thread with the same code, whichever range it lands in.
 */
#include "threads.h"

#include "qgold/kernels_kquants.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

enum { QG_MAX_THREADS = 256 };

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

typedef struct {
    qg_range_fn fn;
    void *ctx;
    size_t begin, end;
} range_job;

static void *run_job(void *p)
{
    range_job *j = p;
    j->fn(j->ctx, j->begin, j->end);
    return NULL;
}

void qg_parallel_for(size_t n, size_t align, size_t min_items, qg_range_fn fn, void *ctx)
{
    if (n == 0) return;
    if (align == 0) align = 1;
    if (min_items == 0) min_items = 1;
    size_t parts = (size_t)qg_threads();
    if (parts > n / min_items) parts = n / min_items;
    if (parts <= 1) {
        fn(ctx, 0, n);
        return;
    }
    /* Range length: ceil(n / parts) rounded up to a multiple of align; the last ranges may be shorter
     * or absent. */
    size_t per = (n + parts - 1) / parts;
    per = (per + align - 1) / align * align;
    range_job jobs[QG_MAX_THREADS];
    pthread_t tid[QG_MAX_THREADS];
    int started[QG_MAX_THREADS];
    size_t count = 0;
    for (size_t b = 0; b < n && count < QG_MAX_THREADS; b += per, count++) {
        jobs[count] = (range_job){fn, ctx, b, n - b > per ? b + per : n};
        started[count] = 0;
    }
    jobs[count - 1].end = n; /* only matters if the cap cut the loop short */
    for (size_t i = 1; i < count; i++) started[i] = pthread_create(&tid[i], NULL, run_job, &jobs[i]) == 0;
    run_job(&jobs[0]);
    for (size_t i = 1; i < count; i++) {
        if (started[i]) pthread_join(tid[i], NULL);
        else run_job(&jobs[i]);
    }
}
