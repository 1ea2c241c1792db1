/* CPU benchmark of the K-quant GEMV with Q8_K activations (qgold/kquants_q8k_gemv.h): the whole call
 * (activation quantization included) on all threads against BW_read, at the standard shapes and
 * batches (or --shapes/--batches), and one core in cache. The reference row is checked, not timed. */
#include "bench_kq_q8k.h"

#include "qgold/fp16.h"
#include "qgold/kquants.h"
#include "qgold/kquants_layout.h"
#include "qgold/rng.h"
#include "qgold/threads.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Random codes with ordinary scales (d = 2^-8, dmin = 2^-9 as fp16), as the K-quant benchmark. */
static void fill(qg_ktype t, uint8_t *w, size_t nbytes, qg_rng *r)
{
    const size_t bb = qg_kq_block_bytes(t);
    for (size_t i = 0; i < nbytes; i++) w[i] = (uint8_t)qg_rng_bits32(r);
    for (size_t b = 0; b < nbytes / bb; b++) {
        uint8_t *blk = w + b * bb;
        if (t == QG_Q6_K) blk[QG_Q6K_D] = 0x00, blk[QG_Q6K_D + 1] = 0x1C;
        else blk[QG_Q4K_D] = 0x00, blk[QG_Q4K_D + 1] = 0x1C, blk[QG_Q4K_DMIN] = 0x00, blk[QG_Q4K_DMIN + 1] = 0x18;
    }
}

static double time_call(const qg_bench_opts *o, const qg_kernel *k, qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows,
                        size_t cols, const uint16_t *x, size_t batch, float *y, double *lo, double *hi)
{
    double tm[64];
    for (int r = -1; r < o->reps; r++) { /* r = -1 warms up */
        const double t0 = qg_now();
        k->fn.kq_gemv(t, w, nbytes, rows, cols, x, batch, y, NULL);
        if (r >= 0) tm[r] = qg_now() - t0;
    }
    return qg_bench_median(tm, o->reps, lo, hi);
}

static int selected(const qg_bench_opts *o, const qg_kernel *k)
{
    return k->kind == QG_KIND_KQ_GEMV_Q8K && strcmp(k->format, o->format) == 0 && k->backend != QG_BACKEND_REF &&
           (o->backend < 0 || (int)k->backend == o->backend) && qg_kernel_available(k, NULL, 0);
}

int qg_bench_cpu_kq_q8k(const qg_bench_opts *o, int threads, double bw_read)
{
    const int ti = qg_kq_from_name(o->format);
    if (ti < 0 || ti == QG_Q8_K) return 0; /* Q8_K weights have no Q8_K dot */
    const qg_ktype t = (qg_ktype)ti;
    const size_t bb = qg_kq_block_bytes(t);
    static const size_t full[][2] = {{4096, 14336}, {14336, 4096}}, quick[][2] = {{256, 4096}};
    size_t custom[16][2], cbatches[16], batches[16] = {1, 16};
    const size_t(*shapes)[2] = o->quick ? quick : full;
    size_t nshapes = o->quick ? 1 : 2, nbatches = 2;
    const int ns = qg_bench_parse_shapes(o->shapes, custom, 16), nbt = qg_bench_parse_batches(o->batches, cbatches, 16);
    if (ns < 0 || nbt < 0) return 1;
    if (ns > 0) shapes = (const size_t(*)[2])custom, nshapes = (size_t)ns;
    if (nbt > 0) memcpy(batches, cbatches, sizeof cbatches), nbatches = (size_t)nbt;
    int rc = 0;
    qg_rng r;
    qg_rng_init(&r, 2026);
    for (size_t si = 0; si < nshapes && rc == 0; si++) {
        const size_t rows = shapes[si][0], cols = shapes[si][1], row_bytes = cols / QG_QK_K * bb;
        uint8_t *w = malloc(rows * row_bytes);
        uint16_t *x = malloc(cols * QG_KQ_MAX_BATCH * 2);
        float *y = malloc(rows * QG_KQ_MAX_BATCH * 4);
        if (!w || !x || !y) {
            rc = qg_bench_alloc_error(o->format, "gemv_q8k weights and vectors", (double)(rows * row_bytes) + (double)cols * 32 + (double)rows * 64);
        } else {
            fill(t, w, rows * row_bytes, &r);
            for (size_t i = 0; i < cols * QG_KQ_MAX_BATCH; i++) x[i] = qg_f32_to_f16(qg_rng_uniform(&r, -1.0f, 1.0f));
            qg_set_threads(threads);
            for (size_t i = 0; i < qg_registry_count(); i++) {
                const qg_kernel *k = qg_registry_at(i);
                if (!selected(o, k)) continue;
                for (size_t bi = 0; bi < nbatches; bi++) {
                    if (qg_bench_batch_skipped(o->format, k, batches[bi], QG_KQ_MAX_BATCH)) continue;
                    qg_bench_row row = {k->format, k->path, qg_backend_name(k->backend), "", (int)batches[bi], 0, 0, 0, 0, 0, "BW_read", 0, ""};
                    snprintf(row.shape, sizeof row.shape, "%zux%zu", rows, cols);
                    row.t_med = time_call(o, k, t, w, rows * row_bytes, rows, cols, x, batches[bi], y, &row.t_lo, &row.t_hi);
                    row.bytes = (double)(rows * row_bytes) + (double)(cols * batches[bi] * 2) + (double)(rows * batches[bi] * 4);
                    row.eff = row.bytes / row.t_med / bw_read;
                    qg_bench_emit(o, &row);
                }
            }
        }
        free(w);
        free(x);
        free(y);
    }
    /* One core, in cache: 64 x 4096, batch 1. */
    enum { ONE_ROWS = 64, ONE_COLS = 4096 };
    const size_t one_bytes = ONE_ROWS * (ONE_COLS / QG_QK_K) * bb;
    uint8_t *w = malloc(one_bytes);
    uint16_t *x = malloc(ONE_COLS * 2);
    float *y = malloc(ONE_ROWS * 4);
    if (rc == 0 && (!w || !x || !y)) rc = qg_bench_alloc_error(o->format, "one-core buffers (64x4096)", (double)one_bytes + ONE_COLS * 2 + ONE_ROWS * 4);
    if (rc == 0) {
        fill(t, w, one_bytes, &r);
        for (size_t i = 0; i < ONE_COLS; i++) x[i] = qg_f32_to_f16(qg_rng_uniform(&r, -1.0f, 1.0f));
        qg_set_threads(1);
        for (size_t i = 0; i < qg_registry_count(); i++) {
            const qg_kernel *k = qg_registry_at(i);
            if (!selected(o, k)) continue;
            const double tm = time_call(o, k, t, w, one_bytes, ONE_ROWS, ONE_COLS, x, 1, y, NULL, NULL);
            qg_bench_note(o, "one_core_in_cache_ns_per_32w_gemv_q8k", "%.3f (%s)", tm * 1e9 / ((double)ONE_ROWS * ONE_COLS / 32.0), k->name);
        }
    }
    free(w);
    free(x);
    free(y);
    qg_set_threads(0);
    return rc;
}
