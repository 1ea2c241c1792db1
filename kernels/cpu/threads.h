/* Internal: splitting a kernel's independent items (output rows, blocks) over CPU threads.
 *
 * qg_parallel_for(n, align, min_items, fn, ctx) calls fn(ctx, begin, end) on disjoint contiguous ranges
 * that cover [0, n) exactly once. Range boundaries are multiples of `align` (except the end, n). At most
 * qg_threads() ranges are made, and fewer when that would leave a range with fewer than `min_items`
 * items, so small calls run on the calling thread alone. The calling thread runs the first range itself,
 * workers of a persistent pool (threads.c) the others; a worker that cannot be started has its range run
 * on the calling thread too, and so does a call made while the pool is busy (from a range function, or
 * from another thread at the same time): it runs all its ranges itself, in order, and never waits for the
 * pool. Nothing else depends on the split: a kernel computes each item with the same code whichever
 * range holds it, so its results never depend on the thread count.
 */
#ifndef QGOLD_KERNELS_THREADS_H
#define QGOLD_KERNELS_THREADS_H

#include <stddef.h>

typedef void (*qg_range_fn)(void *ctx, size_t begin, size_t end);

void qg_parallel_for(size_t n, size_t align, size_t min_items, qg_range_fn fn, void *ctx);

#endif
