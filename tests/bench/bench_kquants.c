/* CPU benchmark of the K-quant kernels: the fused GEMV on all threads against BW_read, the Q8_K dot
 * on one core in cache. */
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
#include "qgold/kquants.h"
#include "qgold/kquants_layout.h"

/* ---- K-quant GEMV on the CPU ---- */

typedef struct {
    const qg_kernel *k;
    qg_ktype t;
    const uint8_t *w;
    size_t row_bytes, cols, batch;
    const uint16_t *x;
    float *y;
} kq_cpu_ctx;

/* The reference is single-threaded: the harness gives each thread a slice of rows (rows are
 * independent; the slice's outputs land in a per-slice layout, which costs nothing to time). */
static void kq_ref_slice(void *vctx, size_t lo, size_t hi)
{
    kq_cpu_ctx *c = vctx;
    c->k->fn.kq_gemv(c->t, c->w + lo * c->row_bytes, (hi - lo) * c->row_bytes, hi - lo, c->cols, c->x, c->batch, c->y + lo * c->batch,
                     NULL);
}

static double time_kq_cpu(const qg_bench_opts *o, kq_cpu_ctx *c, size_t rows, int threads, double *lo, double *hi)
{
    double t[64];
    for (int r = -1; r < o->reps; r++) { /* r = -1 warms up */
        double t0 = qg_now();
        if (c->k->backend == QG_BACKEND_REF) qg_bench_parallel_for(threads, rows, kq_ref_slice, c);
        else c->k->fn.kq_gemv(c->t, c->w, rows * c->row_bytes, rows, c->cols, c->x, c->batch, c->y, NULL);
        if (r >= 0) t[r] = qg_now() - t0;
    }
    return qg_bench_median(t, o->reps, lo, hi);
}

/* GEMV the way ggml runs it on CPUs: activations quantized once to Q8_K (not timed), then one integer
 * dot per row, rows split across threads. */
typedef struct {
    const qg_kernel *k;
    qg_ktype t;
    const uint8_t *w, *q8;
    size_t row_bytes, cols;
    float *y;
} kq_dot_ctx;

static void kq_dot_slice(void *vctx, size_t lo, size_t hi)
{
    kq_dot_ctx *c = vctx;
    for (size_t r = lo; r < hi; r++) c->k->fn.kq_dot(c->t, c->w + r * c->row_bytes, c->q8, c->cols, NULL, NULL, &c->y[r]);
}

/* Random bytes are valid blocks; scale fields set to ordinary values (see the GPU half). */
static void fill_kq(qg_ktype t, uint8_t *w, size_t nbytes, qg_rng *r)
{
    const size_t bb = qg_kq_block_bytes(t);
    for (size_t i = 0; i < nbytes; i++) w[i] = (uint8_t)qg_rng_bits32(r);
    for (size_t b = 0; b < nbytes / bb; b++) {
        uint8_t *blk = w + b * bb;
        if (t == QG_Q6_K) blk[208] = 0x00, blk[209] = 0x1C;
        else if (t == QG_Q8_K) memset(blk, 0, 3), blk[3] = 0x3C;
        else blk[0] = 0x00, blk[1] = 0x1C, blk[2] = 0x00, blk[3] = 0x18;
    }
}

/* One core, in cache: 64 rows x 4096 (about 150 KB of Q4_K), batch 1, in ns per 32 weights, on its own
 * buffers whatever the measured shapes are. */
enum { ONE_ROWS = 64, ONE_COLS = 4096 };

static int one_core_kq(const qg_bench_opts *o, qg_ktype t, int threads)
{
    const size_t row_bytes = ONE_COLS / QG_QK_K * qg_kq_block_bytes(t), q8_bytes = ONE_COLS / QG_QK_K * qg_kq_block_bytes(QG_Q8_K);
    uint8_t *w = malloc(ONE_ROWS * row_bytes), *q8 = malloc(q8_bytes);
    uint16_t *x = malloc(ONE_COLS * sizeof *x);
    float *xf = malloc(ONE_COLS * sizeof *xf), *y = malloc(ONE_ROWS * sizeof *y);
    int rc = 0;
    if (!w || !q8 || !x || !xf || !y) {
        rc = qg_bench_alloc_error(o->format, "one-core buffers (64x4096)", (double)(ONE_ROWS * row_bytes + q8_bytes + ONE_COLS * 6 + 256));
        goto out;
    }
    qg_rng r;
    qg_rng_init(&r, 2027);
    fill_kq(t, w, ONE_ROWS * row_bytes, &r);
    for (size_t i = 0; i < ONE_COLS; i++) x[i] = qg_f32_to_f16(qg_rng_uniform(&r, -1.0f, 1.0f));
    for (size_t i = 0; i < ONE_COLS; i++) xf[i] = qg_f16_to_f32(x[i]);
    qg_kq_quantize_ref(QG_Q8_K, xf, 1, ONE_COLS, q8, q8_bytes);
    const double per32 = 1e9 / ((double)ONE_ROWS * ONE_COLS / 32.0);
    qg_set_threads(1);
    for (size_t i = 0; i < qg_registry_count(); i++) {
        const qg_kernel *k = qg_registry_at(i);
        if (strcmp(k->format, o->format) || k->backend == QG_BACKEND_CUDA || !qg_kernel_available(k, NULL, 0)) continue;
        if (o->backend >= 0 && (int)k->backend != o->backend) continue;
        const int ref = k->backend == QG_BACKEND_REF;
        if (k->kind == QG_KIND_KQ_DOT) {
            kq_dot_ctx c = {k, t, w, q8, row_bytes, ONE_COLS, y};
            double tm[64];
            for (int rep = -1; rep < o->reps; rep++) {
                double t0 = qg_now();
                kq_dot_slice(&c, 0, ONE_ROWS);
                if (rep >= 0) tm[rep] = qg_now() - t0;
            }
            qg_bench_note(o, ref ? "one_core_in_cache_ns_per_32w_dot_ref" : "one_core_in_cache_ns_per_32w_dot_simd", "%.3f (%s)",
                          qg_bench_median(tm, o->reps, NULL, NULL) * per32, k->name);
        } else if (k->kind == QG_KIND_KQ_GEMV) {
            kq_cpu_ctx c = {k, t, w, row_bytes, ONE_COLS, 1, x, y};
            double lo, hi;
            const double tm = time_kq_cpu(o, &c, ONE_ROWS, 1, &lo, &hi);
            qg_bench_note(o, ref ? "one_core_in_cache_ns_per_32w_ref" : "one_core_in_cache_ns_per_32w_simd", "%.3f (%s)", tm * per32,
                          k->name);
        }
    }
    qg_set_threads(threads);
out:
    free(w);
    free(q8);
    free(x);
    free(xf);
    free(y);
    return rc;
}

int qg_bench_cpu_kquants(const qg_bench_opts *o, int threads, double bw_read)
{
    const qg_ktype t = (qg_ktype)qg_kq_from_name(o->format);
    const size_t bb = qg_kq_block_bytes(t);
    static const size_t full[][2] = {{4096, 14336}, {14336, 4096}}, quick[][2] = {{256, 4096}};
    size_t custom[16][2], cbatches[16], batches[16] = {1, 16};
    const size_t (*shapes)[2] = o->quick ? quick : full;
    size_t nshapes = o->quick ? 1 : 2, nbatches = 2;
    int ns = qg_bench_parse_shapes(o->shapes, custom, 16), nbt = qg_bench_parse_batches(o->batches, cbatches, 16);
    if (ns < 0 || nbt < 0) return 1;
    if (ns > 0) shapes = (const size_t(*)[2])custom, nshapes = (size_t)ns;
    if (nbt > 0) memcpy(batches, cbatches, sizeof cbatches), nbatches = (size_t)nbt;
    qg_set_threads(threads);
    int rc = 0;
    for (size_t si = 0; si < nshapes && rc == 0; si++) {
        const size_t rows = shapes[si][0], cols = shapes[si][1], row_bytes = cols / QG_QK_K * bb;
        const size_t q8_bytes = cols / QG_QK_K * qg_kq_block_bytes(QG_Q8_K);
        char label[80];
        snprintf(label, sizeof label, "%s %zux%zu", o->format, rows, cols);
        /* The dimensions are at most 2^31 - 1 (qg_bench_check), so no size below overflows. */
        uint8_t *w = malloc(rows * row_bytes), *q8 = malloc(q8_bytes);
        uint16_t *x = malloc(cols * 16 * 2);
        float *y = malloc(rows * 16 * 4), *xf = malloc(cols * sizeof(float));
        if (!w || !x || !y || !xf || !q8) {
            rc = qg_bench_alloc_error(label, "weights and vectors",
                                      (double)rows * row_bytes + (double)q8_bytes + (double)cols * 36 + (double)rows * 64);
            goto next;
        }
        qg_rng r;
        qg_rng_init(&r, 2026);
        fill_kq(t, w, rows * row_bytes, &r);
        for (size_t i = 0; i < cols * 16; i++) x[i] = qg_f32_to_f16(qg_rng_uniform(&r, -1.0f, 1.0f));
        /* ggml-style: Q8_K activations and the integer dot, rows across threads */
        if (t != QG_Q8_K) {
            for (size_t k = 0; k < cols; k++) xf[k] = qg_f16_to_f32(x[k]);
            qg_kq_quantize_ref(QG_Q8_K, xf, 1, cols, q8, q8_bytes);
            for (size_t i = 0; i < qg_registry_count(); i++) {
                const qg_kernel *k = qg_registry_at(i);
                if (strcmp(k->format, o->format) || k->kind != QG_KIND_KQ_DOT || !qg_kernel_available(k, NULL, 0)) continue;
                if (o->backend >= 0 && (int)k->backend != o->backend) continue;
                kq_dot_ctx c = {k, t, w, q8, row_bytes, cols, y};
                double tm[64];
                for (int rep = -1; rep < o->reps; rep++) {
                    double t0 = qg_now();
                    qg_bench_parallel_for(threads, rows, kq_dot_slice, &c);
                    if (rep >= 0) tm[rep] = qg_now() - t0;
                }
                qg_bench_row row = {k->format, "dot_q8k", qg_backend_name(k->backend), "", 1, 0, 0, 0, 0, 0, "BW_read", 0, ""};
                snprintf(row.shape, sizeof row.shape, "%zux%zu", rows, cols);
                row.t_med = qg_bench_median(tm, o->reps, &row.t_lo, &row.t_hi);
                row.bytes = (double)(rows * row_bytes) + (double)q8_bytes + (double)(rows * 4);
                row.eff = row.bytes / row.t_med / bw_read;
                qg_bench_emit(o, &row);
            }
        }
        for (size_t i = 0; i < qg_registry_count(); i++) {
            const qg_kernel *k = qg_registry_at(i);
            if (strcmp(k->format, o->format) || k->kind != QG_KIND_KQ_GEMV || k->backend == QG_BACKEND_CUDA) continue;
            if ((o->backend >= 0 && (int)k->backend != o->backend) || !qg_kernel_available(k, NULL, 0)) continue;
            for (size_t bi = 0; bi < nbatches; bi++) {
                if (qg_bench_batch_skipped(label, k, batches[bi], QG_KQ_MAX_BATCH)) continue;
                kq_cpu_ctx c = {k, t, w, row_bytes, cols, batches[bi], x, y};
                qg_bench_row row = {k->format, "gemv", qg_backend_name(k->backend), "", (int)batches[bi], 0, 0, 0, 0, 0, "BW_read", 0, ""};
                snprintf(row.shape, sizeof row.shape, "%zux%zu", rows, cols);
                row.t_med = time_kq_cpu(o, &c, rows, threads, &row.t_lo, &row.t_hi);
                row.bytes = (double)(rows * row_bytes) + (double)(cols * batches[bi] * 2) + (double)(rows * batches[bi] * 4);
                row.eff = row.bytes / row.t_med / bw_read;
                qg_bench_emit(o, &row);
            }
        }
    next:
        free(w);
        free(q8);
        free(x);
        free(xf);
        free(y);
    }
    if (rc == 0) rc = one_core_kq(o, t, threads);
    qg_set_threads(0);
    return rc;
}

