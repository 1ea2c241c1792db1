/* CPU half of qgold bench for INT4: the W4A16 GEMV (group 128, per batch), the W4A16 decode and the packed
 * int4 x int4 GEMM (M = each batch), every CPU backend built and usable here, all threads, against BW_read
 * of the same run.
 *
 * Data: float32 weights uniform in [-1, 1) quantized by the reference per group of 128 with fp16 scales
 * (codes -8..7, stored as q + 8 in the canonical layout with no zeros: z = 8, as uint4b8 checkpoints);
 * the same codes, packed two per byte, are the GEMM's B (scale per row: the row's first group scale);
 * fp16 activations uniform in [-1, 1), and for the GEMM those activations quantized per row by the
 * reference. Bytes per call: packed codes + scales + activations + outputs (float32); the decode reads
 * codes + scales and writes N x K float32.
 *
 * The SIMD kernels split their rows over qg_threads() threads themselves; the reference is single-threaded,
 * so the harness gives each thread a slice of output channels (per-slice output layout, free to time). */
#include "bench.h"
#include "bench_int4.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/int4.h"
#include "qgold/registry.h"
#include "qgold/rng.h"
#include "qgold/threads.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { I4_G = 128 };

typedef struct {
    const qg_kernel *k;
    size_t N, K, M; /* output channels, inputs, batch (activation rows) */
    const qg_w4a16 *L;
    const uint8_t *Ap, *Bp; /* packed GEMM operands */
    const float *sa, *sb;
    const uint16_t *X;
    float *y;
    atomic_int err; /* first non-zero return of any call */
} i4_ctx;

static void i4_note_err(i4_ctx *c, int rc)
{
    int zero = 0;
    if (rc != 0) atomic_compare_exchange_strong(&c->err, &zero, rc);
}

/* The layout restricted to output channels [lo, hi). */
static qg_w4a16 i4_rows(const qg_w4a16 *L, size_t lo, size_t hi)
{
    const size_t G = L->K / L->g;
    qg_w4a16 s = *L;
    s.N = hi - lo;
    s.qweight = L->qweight + lo * (L->K / 8), s.qweight_len = (hi - lo) * (L->K / 8);
    s.scales = L->scales + lo * G, s.scales_len = (hi - lo) * G;
    return s;
}

static void i4_gemv_slice(void *vctx, size_t lo, size_t hi)
{
    i4_ctx *c = vctx;
    const qg_w4a16 s = i4_rows(c->L, lo, hi);
    i4_note_err(c, c->k->fn.int4_w4a16_gemv(&s, c->X, c->M * c->K, c->M, c->y + lo * c->M, NULL));
}

static void i4_decode_slice(void *vctx, size_t lo, size_t hi)
{
    i4_ctx *c = vctx;
    const qg_w4a16 s = i4_rows(c->L, lo, hi);
    i4_note_err(c, c->k->fn.int4_w4a16_decode(&s, c->y + lo * c->K));
}

static void i4_gemm_slice(void *vctx, size_t lo, size_t hi)
{
    i4_ctx *c = vctx;
    const size_t rb = qg_int4_packed_row_bytes(c->K);
    const qg_int4_gemm_args p = {c->M, hi - lo, c->K, c->Ap, c->M * rb, c->Bp + lo * rb, (hi - lo) * rb, c->sa, c->M, c->sb + lo,
                                 hi - lo, NULL, QG_INT4_F32, 0};
    i4_note_err(c, c->k->fn.int4_gemm_packed(&p, NULL, c->y + lo * c->M, NULL));
}

/* Median seconds per call (the reference rows split over the threads; the kernels thread themselves);
 * -1 when a call failed. */
static double i4_time(const qg_bench_opts *o, i4_ctx *c, void (*slice)(void *, size_t, size_t), int threads, double *lo, double *hi)
{
    const double t = qg_bench_time_pass(o, c->k->backend == QG_BACKEND_REF, threads, c->N, slice, c, lo, hi);
    return atomic_load(&c->err) != 0 ? -1 : t;
}

static int i4_measured_kind(qg_kind kind)
{
    return kind == QG_KIND_INT4_W4A16_GEMV || kind == QG_KIND_INT4_W4A16_DECODE || kind == QG_KIND_INT4_GEMM_PACKED;
}

/* Codes -8..7 (rows x K, K even) into packed rows: element 2i the low nibble of byte i. */
static void i4_pack_pairs(const int8_t *q, size_t rows, size_t K, uint8_t *out)
{
    for (size_t i = 0; i < rows * K / 2; i++) out[i] = (uint8_t)(((unsigned)q[2 * i] & 0xFu) | (((unsigned)q[2 * i + 1] & 0xFu) << 4));
}

int qg_bench_cpu_int4(const qg_bench_opts *o, int threads, double bw_read)
{
    static const size_t full[][2] = {{4096, 14336}, {14336, 4096}}, quick[][2] = {{256, 4096}};
    const size_t bmax = 16; /* batches are at most 16 */
    qg_bench_plan pl;
    if (qg_bench_plan_make(o, full, 2, quick, 1, &pl)) return 1;
    qg_set_threads(threads);
    int rc = 0;
    for (size_t si = 0; si < pl.nshapes && rc == 0; si++) {
        const size_t N = pl.shapes[si][0], K = pl.shapes[si][1], G = K / I4_G;
        char label[80];
        snprintf(label, sizeof label, "%s %zux%zu", o->format, N, K);
        if (K % I4_G != 0 || K > QG_INT4_MAX_K) {
            fprintf(stderr, "qgold: bench %s: K (columns) must be a multiple of %d (the W4A16 group) and at most %d\n", label, I4_G,
                    QG_INT4_MAX_K);
            rc = 1;
            break;
        }
        /* float32 source, then decode output: N x K float32 either way */
        float *wf = malloc(N * K * sizeof(float)), *sb = malloc(N * sizeof(float)), *sa = malloc(bmax * sizeof(float));
        float *y = malloc(N * bmax * sizeof(float));
        int8_t *q = malloc(N * K), *qa = malloc(bmax * K);
        uint32_t *qw = malloc(N * K / 2);
        uint16_t *sc = malloc(N * G * sizeof(uint16_t)), *X = malloc(bmax * K * sizeof(uint16_t));
        uint8_t *Bp = malloc(N * K / 2), *Ap = malloc(bmax * K / 2);
        if (!wf || !sb || !sa || !y || !q || !qa || !qw || !sc || !X || !Bp || !Ap) {
            rc = qg_bench_alloc_error(label, "weights and vectors", (double)N * K * 6 + (double)N * (4 + 4 * bmax + 2 * G) + (double)bmax * K * 4);
            goto next;
        }
        qg_rng r;
        qg_rng_init(&r, 2026);
        for (size_t i = 0; i < N * K; i++) wf[i] = qg_rng_uniform(&r, -1.0f, 1.0f);
        for (size_t i = 0; i < bmax * K; i++) X[i] = qg_f32_to_f16(qg_rng_uniform(&r, -1.0f, 1.0f));
        const qg_int4_qshape wsh = {N, K, QG_INT4_PER_GROUP, I4_G, QG_INT4_F16}, ash = {bmax, K, QG_INT4_PER_ROW, 0, QG_INT4_F32};
        if (qg_int4_quantize_ref(&wsh, wf, QG_INT4_F32, q, sc) != 0 || qg_int4_quantize_ref(&ash, X, QG_INT4_F16, qa, sa) != 0) {
            fprintf(stderr, "qgold: bench %s: the reference quantizer refused the generated data\n", label);
            rc = 1;
            goto next;
        }
        /* canonical layout: nibble j of word w of row n is q[n][8w + j] + 8 */
        for (size_t w = 0; w < N * K / 8; w++) {
            uint32_t v = 0;
            for (unsigned j = 0; j < 8; j++) v |= (uint32_t)(q[8 * w + j] + QG_INT4_SYM_ZERO) << (4 * j);
            qw[w] = v;
        }
        i4_pack_pairs(q, N, K, Bp);
        i4_pack_pairs(qa, bmax, K, Ap);
        for (size_t n = 0; n < N; n++) sb[n] = qg_f16_to_f32(sc[n * G]);
        const qg_w4a16 L = {N, K, I4_G, qw, N * K / 8, sc, N * G, NULL, 0, NULL, 0};
        for (size_t i = 0; i < qg_registry_count() && rc == 0; i++) {
            const qg_kernel *k = qg_registry_at(i);
            if (strcmp(k->format, "int4") || k->backend == QG_BACKEND_CUDA || !i4_measured_kind(k->kind)) continue;
            if ((o->backend >= 0 && (int)k->backend != o->backend) || !qg_kernel_available(k, NULL, 0)) continue;
            const int decode = k->kind == QG_KIND_INT4_W4A16_DECODE;
            for (size_t bi = 0; bi < (decode ? 1 : pl.nbatches) && rc == 0; bi++) {
                const size_t M = decode ? 1 : pl.batches[bi];
                if (qg_bench_batch_skipped(label, k, M, bmax)) continue;
                i4_ctx c = {.k = k, .N = N, .K = K, .M = M, .L = &L, .Ap = Ap, .Bp = Bp, .sa = sa, .sb = sb, .X = X};
                atomic_init(&c.err, 0);
                qg_bench_row row = {k->format, "", qg_backend_name(k->backend), "", (int)M, 0, 0, 0, 0, 0, "BW_read", 0, ""};
                snprintf(row.shape, sizeof row.shape, "%zux%zu", N, K);
                if (k->kind == QG_KIND_INT4_W4A16_GEMV) {
                    row.path = "w4a16_g128";
                    c.y = y;
                    row.t_med = i4_time(o, &c, i4_gemv_slice, threads, &row.t_lo, &row.t_hi);
                    row.bytes = (double)N * K / 2 + (double)N * G * 2 + (double)M * K * 2 + (double)M * N * 4;
                } else if (decode) {
                    row.path = "w4a16_decode";
                    c.y = wf; /* the source is no longer needed */
                    row.t_med = i4_time(o, &c, i4_decode_slice, threads, &row.t_lo, &row.t_hi);
                    row.bytes = (double)N * K / 2 + (double)N * G * 2 + (double)N * K * 4;
                } else {
                    row.path = "gemm_packed";
                    c.y = y;
                    row.t_med = i4_time(o, &c, i4_gemm_slice, threads, &row.t_lo, &row.t_hi);
                    row.bytes = (double)M * K / 2 + (double)N * K / 2 + (double)M * 4 + (double)N * 4 + (double)M * N * 4;
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
        free(q);
        free(qa);
        free(qw);
        free(sc);
        free(X);
        free(Bp);
        free(Ap);
    }
    qg_set_threads(0);
    return rc;
}
