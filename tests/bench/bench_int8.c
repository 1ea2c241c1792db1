/* CPU half of qgold bench for INT8: W8A16 GEMV (per batch), W8A8 GEMM (M = each batch) and the per-row
 * quantizer, every CPU backend built and usable here, all threads, against BW_read of the same run.
 *
 * Data: float32 weights uniform in [-1, 1) quantized per row by the reference (int8 codes, float32
 * scales), fp16 activations uniform in [-1, 1) (and, for W8A8, those activations quantized per row by
 * the reference). Bytes per call are counted honestly: codes + scales + activations + outputs
 * (float32 outputs; the quantizer: float32 input + codes + scales).
 *
 * The SIMD kernels split their rows over qg_threads() threads themselves; the reference is single-threaded,
 * so the harness gives each thread a slice of output channels (rows are independent; a slice's outputs
 * land in a per-slice layout, which costs nothing to time). */
#include "bench.h"
#include "bench_int8.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/intq.h"
#include "qgold/registry.h"
#include "qgold/rng.h"
#include "qgold/threads.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const qg_kernel *k;
    size_t N, K, M; /* output channels, inputs, batch (activation rows) */
    const int8_t *B, *A;
    const float *sb, *sa, *wf;
    const uint16_t *X;
    float *y;
    int8_t *q;      /* quantizer output codes */
    float *qs;      /* quantizer output scales */
    atomic_int err; /* first non-zero return of any call */
} i8_ctx;

static void i8_note_err(i8_ctx *c, int rc)
{
    int zero = 0;
    if (rc != 0) atomic_compare_exchange_strong(&c->err, &zero, rc);
}

/* One call over output channels [lo, hi) (the whole range for the SIMD kernels). */
static void i8_w8a16_slice(void *vctx, size_t lo, size_t hi)
{
    i8_ctx *c = vctx;
    i8_note_err(c, c->k->fn.int8_w8a16(c->B + lo * c->K, c->sb + lo, QG_INT8_F32, hi - lo, c->K, c->X, c->M, c->y + lo * c->M, NULL));
}

static void i8_w8a8_slice(void *vctx, size_t lo, size_t hi)
{
    i8_ctx *c = vctx;
    const qg_int8_w8a8_args p = {c->M, hi - lo, c->K, c->A, c->B + lo * c->K, c->sa, c->M, c->sb + lo, hi - lo, NULL, QG_INT8_F32, 0};
    i8_note_err(c, c->k->fn.int8_w8a8(&p, NULL, c->y + lo * c->M, NULL));
}

static void i8_quantize_slice(void *vctx, size_t lo, size_t hi)
{
    i8_ctx *c = vctx;
    const qg_int8_qshape s = {hi - lo, c->K, QG_INT8_PER_ROW, 0, QG_INT8_F32};
    i8_note_err(c, c->k->fn.int8_quantize(&s, c->wf + lo * c->K, QG_INT8_F32, c->q + lo * c->K, c->qs + lo));
}

/* Median seconds per call (the reference rows split over the threads; the kernels thread themselves);
 * -1 when a call failed. */
static double i8_time(const qg_bench_opts *o, i8_ctx *c, void (*slice)(void *, size_t, size_t), int threads, double *lo, double *hi)
{
    const double t = qg_bench_time_pass(o, c->k->backend == QG_BACKEND_REF, threads, c->N, slice, c, lo, hi);
    return atomic_load(&c->err) != 0 ? -1 : t;
}

static int i8_measured_kind(qg_kind kind)
{
    return kind == QG_KIND_INT8_W8A16 || kind == QG_KIND_INT8_W8A8 || kind == QG_KIND_INT8_QUANTIZE;
}

int qg_bench_cpu_int8(const qg_bench_opts *o, int threads, double bw_read)
{
    static const size_t full[][2] = {{4096, 14336}, {14336, 4096}}, quick[][2] = {{256, 4096}};
    const size_t bmax = 16; /* batches are at most 16 */
    qg_bench_plan pl;
    if (qg_bench_plan_make(o, full, 2, quick, 1, &pl)) return 1;
    qg_set_threads(threads);
    int rc = 0;
    for (size_t si = 0; si < pl.nshapes && rc == 0; si++) {
        const size_t N = pl.shapes[si][0], K = pl.shapes[si][1];
        char label[80];
        snprintf(label, sizeof label, "%s %zux%zu", o->format, N, K);
        if (K > QG_INT8_MAX_K) {
            fprintf(stderr, "qgold: bench %s: K (columns) must be at most %d for the int32-accumulating W8A8 product\n", label,
                    QG_INT8_MAX_K);
            rc = 1;
            break;
        }
        /* The dimensions are at most 2^31 - 1 (qg_bench_check); N * K is bounded by what malloc grants. */
        float *wf = malloc(N * K * sizeof(float)), *sb = malloc(N * sizeof(float)), *sa = malloc(bmax * sizeof(float));
        float *y = malloc(N * bmax * sizeof(float)), *qs = malloc(N * sizeof(float));
        int8_t *B = malloc(N * K), *q = malloc(N * K), *A = malloc(bmax * K);
        uint16_t *X = malloc(bmax * K * sizeof(uint16_t));
        if (!wf || !sb || !sa || !y || !qs || !B || !q || !A || !X) {
            rc = qg_bench_alloc_error(label, "weights and vectors", (double)N * K * 6 + (double)N * (8 + 4 * bmax) + (double)bmax * K * 3);
            goto next;
        }
        qg_rng r;
        qg_rng_init(&r, 2026);
        for (size_t i = 0; i < N * K; i++) wf[i] = qg_rng_uniform(&r, -1.0f, 1.0f);
        for (size_t i = 0; i < bmax * K; i++) X[i] = qg_f32_to_f16(qg_rng_uniform(&r, -1.0f, 1.0f));
        const qg_int8_qshape wsh = {N, K, QG_INT8_PER_ROW, 0, QG_INT8_F32}, ash = {bmax, K, QG_INT8_PER_ROW, 0, QG_INT8_F32};
        if (qg_int8_quantize_ref(&wsh, wf, QG_INT8_F32, B, sb) != 0 || qg_int8_quantize_ref(&ash, X, QG_INT8_F16, A, sa) != 0) {
            fprintf(stderr, "qgold: bench %s: the reference quantizer refused the generated data\n", label);
            rc = 1;
            goto next;
        }
        for (size_t i = 0; i < qg_registry_count() && rc == 0; i++) {
            const qg_kernel *k = qg_registry_at(i);
            if (strcmp(k->format, "int8") || k->backend == QG_BACKEND_CUDA || !i8_measured_kind(k->kind)) continue;
            if ((o->backend >= 0 && (int)k->backend != o->backend) || !qg_kernel_available(k, NULL, 0)) continue;
            const size_t nb = k->kind == QG_KIND_INT8_QUANTIZE ? 1 : pl.nbatches;
            for (size_t bi = 0; bi < nb && rc == 0; bi++) {
                const size_t M = k->kind == QG_KIND_INT8_QUANTIZE ? 1 : pl.batches[bi];
                i8_ctx c = {.k = k, .N = N, .K = K, .M = M, .B = B, .A = A, .sb = sb, .sa = sa, .wf = wf, .X = X, .y = y, .q = q, .qs = qs};
                atomic_init(&c.err, 0);
                qg_bench_row row = {k->format, "", qg_backend_name(k->backend), "", (int)M, 0, 0, 0, 0, 0, "BW_read", 0, ""};
                snprintf(row.shape, sizeof row.shape, "%zux%zu", N, K);
                if (k->kind == QG_KIND_INT8_W8A16) {
                    row.path = "w8a16";
                    row.t_med = i8_time(o, &c, i8_w8a16_slice, threads, &row.t_lo, &row.t_hi);
                    row.bytes = (double)N * K + (double)N * 4 + (double)M * K * 2 + (double)M * N * 4;
                } else if (k->kind == QG_KIND_INT8_W8A8) {
                    row.path = "w8a8";
                    row.t_med = i8_time(o, &c, i8_w8a8_slice, threads, &row.t_lo, &row.t_hi);
                    row.bytes = (double)M * K + (double)N * K + (double)M * 4 + (double)N * 4 + (double)M * N * 4;
                } else {
                    row.path = "quantize_row";
                    row.t_med = i8_time(o, &c, i8_quantize_slice, threads, &row.t_lo, &row.t_hi);
                    row.bytes = (double)N * K * 4 + (double)N * K + (double)N * 4;
                    /* the quantizer is exact: its codes and scales must be the reference's */
                    if (row.t_med >= 0 && (memcmp(q, B, N * K) != 0 || memcmp(qs, sb, N * sizeof(float)) != 0)) {
                        fprintf(stderr, "qgold: bench %s: %s wrote codes or scales that differ from the reference\n", label, k->name);
                        rc = 1;
                        break;
                    }
                }
                if (qg_bench_emit_cpu(o, &row, bw_read, label, k->name, M, atomic_load(&c.err)) != 0) {
                    rc = 1;
                    break;
                }
            }
        }
    next:
        free(wf);
        free(sb);
        free(sa);
        free(y);
        free(qs);
        free(B);
        free(q);
        free(A);
        free(X);
    }
    qg_set_threads(0);
    return rc;
}
