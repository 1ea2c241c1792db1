/* unit.threads: the range splitter and its worker pool (kernels/cpu/threads.h).
 *
 *   split        every call covers [0, n) exactly once, in the documented ranges (ceil(n / parts)
 *                rounded up to `align`, at most qg_threads() of them, none shorter than min_items
 *                except the last), for many n, align, min_items and thread counts, the thread count
 *                going up and down between calls (the pool grows and shrinks);
 *   back to back thousands of small pooled calls in a row (a lost wake-up hangs here);
 *   nested       a range function that itself calls qg_parallel_for, on workers and on the caller;
 *   concurrent   several threads calling at once (one owns the pool, the others run inline);
 *   fork         a child process can still use it.
 * A hang is a failure too (ctest's timeout).
 */
#include "qg_test.h"
#include "qgold/threads.h"
#include "threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

enum { MAXN = 5000, MAXR = 300 };

typedef struct {
    size_t n;
    _Atomic unsigned char hits[MAXN];
    atomic_size_t nranges;
    size_t begin[MAXR], end[MAXR];
    int nested; /* each item also runs an inner qg_parallel_for */
    atomic_size_t inner_items;
} cover_ctx;

static void inner_fn(void *vc, size_t b, size_t e)
{
    atomic_size_t *items = vc;
    atomic_fetch_add(items, e - b);
}

static void cover_fn(void *vc, size_t b, size_t e)
{
    cover_ctx *c = vc;
    size_t r = atomic_fetch_add(&c->nranges, 1);
    if (r < MAXR) c->begin[r] = b, c->end[r] = e;
    for (size_t i = b; i < e && i < MAXN; i++) atomic_fetch_add(&c->hits[i], 1);
    if (c->nested) {
        atomic_size_t items = 0;
        qg_parallel_for(1000, 1, 10, inner_fn, &items);
        atomic_fetch_add(&c->inner_items, atomic_load(&items));
    }
}

/* The ranges the splitter is documented to make. */
static size_t expected_ranges(size_t n, size_t align, size_t min_items, size_t threads, size_t *per_out)
{
    if (align == 0) align = 1;
    if (min_items == 0) min_items = 1;
    size_t parts = threads;
    if (parts > n / min_items) parts = n / min_items;
    if (parts <= 1) {
        *per_out = n;
        return 1;
    }
    size_t per = (n + parts - 1) / parts;
    per = (per + align - 1) / align * align;
    *per_out = per;
    return (n + per - 1) / per;
}

static int cmp_size(const void *a, const void *b)
{
    const size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static cover_ctx g_c;

static void check_call(size_t n, size_t align, size_t min_items, int threads, int nested)
{
    cover_ctx *c = &g_c;
    memset(c, 0, sizeof *c);
    c->n = n;
    c->nested = nested;
    qg_set_threads(threads);
    qg_parallel_for(n, align, min_items, cover_fn, c);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += atomic_load(&c->hits[i]) != 1;
    QG_CHECK(bad == 0, "n=%zu align=%zu min=%zu threads=%d: %zu items not covered exactly once", n, align, min_items, threads, bad);
    size_t per, want = n == 0 ? 0 : expected_ranges(n, align, min_items, (size_t)threads, &per);
    const size_t got = atomic_load(&c->nranges);
    QG_CHECK(got == want, "n=%zu align=%zu min=%zu threads=%d: %zu ranges, expected %zu", n, align, min_items, threads, got, want);
    if (got == want && want > 0) {
        size_t b[MAXR];
        memcpy(b, c->begin, want * sizeof *b);
        qsort(b, want, sizeof *b, cmp_size);
        int ok = 1;
        for (size_t r = 0; r < want; r++) ok &= b[r] == r * per;
        for (size_t r = 0; r < want; r++) {
            const size_t e = c->end[r], s = c->begin[r];
            ok &= e == (n - s > per ? s + per : n);
        }
        QG_CHECK(ok, "n=%zu align=%zu min=%zu threads=%d: ranges are not the documented split", n, align, min_items, threads);
    }
    if (nested) {
        const size_t inner = atomic_load(&c->inner_items);
        QG_CHECK(inner == 1000 * got, "nested: %zu inner items, expected %zu", inner, 1000 * got);
    }
}

static void test_split(void)
{
    static const size_t ns[] = {0, 1, 2, 3, 7, 64, 100, 255, 256, 301, 1000, 4097};
    static const size_t aligns[] = {0, 1, 4, 16};
    static const size_t mins[] = {0, 1, 5, 64};
    static const int threads[] = {1, 2, 3, 5, 8, 2, 17, 1, 4, 256, 3};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
        for (size_t a = 0; a < sizeof aligns / sizeof *aligns; a++)
            for (size_t m = 0; m < sizeof mins / sizeof *mins; m++)
                for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) check_call(ns[k], aligns[a], mins[m], threads[t], 0);
}

static void add_fn(void *vc, size_t b, size_t e)
{
    atomic_size_t *sum = vc;
    size_t s = 0;
    for (size_t i = b; i < e; i++) s += i;
    atomic_fetch_add(sum, s);
}

static void test_back_to_back(void)
{
    static const int threads[] = {2, 3, 4};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        qg_set_threads(threads[t]);
        size_t bad = 0;
        for (int r = 0; r < 3000; r++) {
            atomic_size_t sum = 0;
            const size_t n = 16 + (size_t)(r % 50);
            qg_parallel_for(n, 1, 1, add_fn, &sum);
            bad += atomic_load(&sum) != n * (n - 1) / 2;
            if (r % 500 == 499) usleep(2000); /* let the workers park, so wake-ups from sleep are exercised too */
        }
        QG_CHECK(bad == 0, "threads=%d: %zu of 3000 back-to-back calls summed wrong", threads[t], bad);
    }
}

static void test_nested(void)
{
    static const int threads[] = {2, 3, 5};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) check_call(40, 1, 1, threads[t], 1);
}

typedef struct {
    int id;
    size_t bad;
} caller_arg;

static void *caller_main(void *p)
{
    caller_arg *a = p;
    for (int r = 0; r < 400; r++) {
        atomic_size_t sum = 0;
        const size_t n = 1000 + (size_t)a->id * 7 + (size_t)r;
        qg_parallel_for(n, 4, 8, add_fn, &sum);
        a->bad += atomic_load(&sum) != n * (n - 1) / 2;
    }
    return NULL;
}

static void test_concurrent(void)
{
    qg_set_threads(3);
    enum { NC = 4 };
    pthread_t tid[NC];
    caller_arg args[NC];
    int started[NC];
    for (int i = 0; i < NC; i++) {
        args[i] = (caller_arg){i, 0};
        started[i] = pthread_create(&tid[i], NULL, caller_main, &args[i]) == 0;
    }
    for (int i = 0; i < NC; i++) {
        if (started[i]) pthread_join(tid[i], NULL);
        else caller_main(&args[i]);
        QG_CHECK(args[i].bad == 0, "concurrent caller %d: %zu of 400 calls summed wrong", i, args[i].bad);
    }
}

static void test_fork(void)
{
    /* qemu user mode aborts inside itself in a child forked from a multi-threaded process, whatever the
     * program does; the cross-built suite sets QG_EMULATED (CMakePresets.json), native runs check this. */
    if (getenv("QG_EMULATED") != NULL) {
        printf("unit.threads: fork check skipped under emulation (QG_EMULATED)\n");
        return;
    }
    qg_set_threads(3);
    check_call(1000, 1, 1, 3, 0); /* workers exist in the parent */
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) {
        atomic_size_t sum = 0;
        qg_parallel_for(1000, 1, 1, add_fn, &sum);
        _exit(atomic_load(&sum) == 1000 * 999 / 2 ? 0 : 1);
    }
    QG_CHECK(pid > 0, "fork failed");
    if (pid > 0) {
        int st = 0;
        QG_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the forked child's call failed (status %d)", st);
    }
    check_call(1000, 1, 1, 3, 0); /* and still in the parent */
}

int main(void)
{
    test_split();
    test_back_to_back();
    test_nested();
    test_concurrent();
    test_fork();
    qg_set_threads(0);
    return qg_test_end("unit.threads");
}
