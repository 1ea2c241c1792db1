/* CPU benchmark of the fp16/bf16 conversions: every thread converts a slice of one large buffer;
 * efficiency is bytes read + written / time / BW_read. */
#include "bench.h"

#include "atomic_write.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/registry.h"
#include "qgold/rng.h"
#include "qgold/threads.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const qg_kernel *k;
    const unsigned char *x;
    unsigned char *y;
} conv_ctx;

static void conv_slice(void *vctx, size_t lo, size_t hi)
{
    conv_ctx *c = vctx;
    c->k->fn.convert(c->x + lo * qg_elem_size(c->k->in_elem), c->y + lo * qg_elem_size(c->k->out_elem), hi - lo);
}

int qg_bench_cpu_fp16(const qg_bench_opts *o, int threads, double bw_read)
{
    size_t n = o->quick ? ((size_t)1 << 22) : ((size_t)1 << 27);
    unsigned char *x = malloc(n * 4), *y = malloc(n * 4);
    if (!x || !y) {
        free(x);
        free(y);
        return qg_bench_alloc_error(o->format, "conversion buffers", 2.0 * (double)n * 4.0);
    }
    for (size_t i = 0; i < n * 4; i++) x[i] = (unsigned char)(i * 2654435761u >> 13);
    memset(y, 0, n * 4);
    for (size_t i = 0; i < qg_registry_count(); i++) {
        const qg_kernel *k = qg_registry_at(i);
        if (strcmp(k->format, o->format) != 0 || k->backend == QG_BACKEND_CUDA || k->kind != QG_KIND_CONVERT) continue;
        if (o->backend >= 0 && (int)k->backend != o->backend) continue;
        if (!qg_kernel_available(k, NULL, 0)) continue;
        conv_ctx c = {k, x, y};
        double t[64], lo, hi;
        qg_bench_parallel_for(threads, n, conv_slice, &c); /* warm */
        for (int r = 0; r < o->reps; r++) {
            double t0 = qg_now();
            qg_bench_parallel_for(threads, n, conv_slice, &c);
            t[r] = qg_now() - t0;
        }
        qg_bench_row row = {k->format, k->path, qg_backend_name(k->backend), "", 1, 0, 0, 0, 0, 0, "BW_read", 0, ""};
        snprintf(row.shape, sizeof row.shape, "%zu", n);
        row.t_med = qg_bench_median(t, o->reps, &lo, &hi);
        row.t_lo = lo;
        row.t_hi = hi;
        row.bytes = (double)n * (double)(qg_elem_size(k->in_elem) + qg_elem_size(k->out_elem));
        row.eff = row.bytes / row.t_med / bw_read;
        qg_bench_emit(o, &row);
    }
    free(x);
    free(y);
    return 0;
}

