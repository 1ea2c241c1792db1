/* Internal: the parts of the optimized INT8 kernels (qgold/kernels_int8.h) that are the same on every
 * CPU ISA: validation, the two passes of quantization, the block/segment walk of dequantization, the
 * output tiling of W8A8 and W8A16, and the thread split. Plain C, static inline; an ISA file defines
 *
 *   I8_SFX                      the backend suffix (avx2, neon): the entry points are qg_int8_*_<sfx>;
 *   uint32_t i8_absmax_bits_f32(const float *x, size_t n);
 *       max over i of (bits(x[i]) & 0x7FFFFFFF) (n >= 1): for non-negative floats the integer order of
 *       the bits is the value order, so this is amax's bits, and >= 0x7F800000 when any x is NaN/inf;
 *   uint32_t i8_absmax_bits_f16(const uint16_t *x, size_t n);   the same on fp16 bits (0x7FFF, 0x7C00);
 *   void i8_f16_to_f32(const uint16_t *h, size_t n, float *d);  exact conversion;
 *   void i8_quantize(const float *x, size_t n, float s, int8_t *q);
 *       q[i] = sat(rne(x[i] / s)) with an IEEE division (s > 0 finite, x finite);
 *   void i8_dequant(const int8_t *q, size_t n, float s, float *y32, uint16_t *y16);
 *       y = RN32((float) q * s) into y32 and/or RN16(y) into y16 (either may be NULL);
 *   void i8_dot_2x4(const int8_t *a0, const int8_t *a1, const int8_t *b, size_t K, int32_t out[8]);
 *       out[4r + j] = sum_k a_r[k] b[j * K + k] for 2 rows of A (they may be the same) and the 4
 *       consecutive rows of b (exact int32, K <= 131071);
 *   int32_t i8_dot(const int8_t *a, const int8_t *b, size_t K);   one row;
 *   void i8_epilogue(const int32_t *acc, size_t n, float sa, const float *sb, int sb_vec,
 *                    const void *bias, qg_int8_ftype bias_type, int relu, float *y32, uint16_t *y16);
 *       the pinned epilogue of intq.md on n consecutive outputs (sb[j] when sb_vec, else sb[0]; bias
 *       NULL or n values from the first output's; y32 / y16 either may be NULL);
 *   void i8_w8a16_dot4(const int8_t *b, const float *const x[4], int nr, size_t K, float out[4]);
 *       out[r] = sum_k b[k] x[r][k] in float32 for nr = 1 or 4 activation rows (they may repeat; always
 *       inlined, so each call site gets its own constant-nr code), each in the
 *       same fixed order that depends on K only (exact products; each term passes at most K - 1
 *       additions), so a row's result does not depend on the rows beside it;
 *   optionally, with I8_HAVE_W8A16_ROWS4 defined:
 *   void i8_w8a16_rows4(const int8_t *b, size_t ldb, const float *x, size_t K, float out[4]);
 *       out[r] = the i8_w8a16_dot4 result (same bits) of weight row b + r ldb against the one activation
 *       row x; used at batch 1;
 *
 * then includes this file.
 *
 * Exactness: quantize, dequant and every W8A8 output use only IEEE operations on the spec's operands
 * (division, round to nearest even, float32 multiply and add, fp16 round), and integer sums exact in
 * int32, so each output element is the reference's bits whatever the vector width, the thread split or
 * M. W8A16 computes each (m, n) output with the row order of i8_w8a16_dot4 over row n of B and row m of
 * X, then one multiplication by sb[n]: the same bits for a row alone or inside a batch, on any thread.
 *
 * Execution: quantization reads every block once to get its amax (nonfinite detection included), checks
 * all of them (int_nonfinite_input, then fp16 scale overflow) and only then writes codes and scales, so
 * nothing is written on an error. W8A8 splits its output into items of two A rows x NB B rows (items of
 * the same B block consecutive, so a thread reuses that block across A rows); W8A16 splits B rows, each
 * row used against every activation row while it is in cache.
 */
#ifndef QGOLD_INT8_ROWS_H
#define QGOLD_INT8_ROWS_H

#include "threads.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/intq.h"
#include "qgold/kernels_int8.h"

#include <stdlib.h>
#include <string.h>

#define I8_CAT_(a, b) a##_##b
#define I8_CAT(a, b) I8_CAT_(a, b)
#define I8_FN(name) I8_CAT(name, I8_SFX)

enum { I8_NB = 64, I8_CHUNK = 256, I8_MIN_WORK = 1 << 16 };

/* Elements per scale block and number of blocks (the tensor is one block per tensor). */
static inline void i8_geometry(const qg_int8_qshape *s, size_t *len, size_t *count)
{
    const size_t n = s->rows * s->cols;
    *len = s->gran == QG_INT8_PER_TENSOR ? n : s->gran == QG_INT8_PER_ROW ? s->cols : s->group;
    *count = n / *len;
}

static inline size_t i8_min_items(size_t work_per_item)
{
    return work_per_item >= I8_MIN_WORK ? 1 : I8_MIN_WORK / (work_per_item ? work_per_item : 1);
}

/* ---- quantize ---- */

typedef struct {
    const void *x;
    qg_int8_ftype src;
    size_t len;
    uint32_t *amax; /* per block, absmax bits of the source type */
    const float *sc;
    int8_t *q;
} i8_quant_ctx;

static void i8_amax_range(void *vc, size_t b0, size_t b1)
{
    i8_quant_ctx *c = vc;
    for (size_t b = b0; b < b1; b++)
        c->amax[b] = c->src == QG_INT8_F16 ? i8_absmax_bits_f16((const uint16_t *)c->x + b * c->len, c->len)
                                            : i8_absmax_bits_f32((const float *)c->x + b * c->len, c->len);
}

/* Codes of elements [i0, i1), block by block; fp16 sources go through a float32 chunk. */
static void i8_codes_range(void *vc, size_t i0, size_t i1)
{
    i8_quant_ctx *c = vc;
    float tmp[I8_CHUNK];
    for (size_t i = i0; i < i1;) {
        const size_t b = i / c->len, end = (b + 1) * c->len < i1 ? (b + 1) * c->len : i1;
        const float s = c->sc[b];
        if (s == 0.0f) {
            memset(c->q + i, 0, end - i);
            i = end;
            continue;
        }
        if (c->src == QG_INT8_F32) {
            i8_quantize((const float *)c->x + i, end - i, s, c->q + i);
            i = end;
            continue;
        }
        for (; i < end;) {
            const size_t n = end - i < I8_CHUNK ? end - i : I8_CHUNK;
            i8_f16_to_f32((const uint16_t *)c->x + i, n, tmp);
            i8_quantize(tmp, n, s, c->q + i);
            i += n;
        }
    }
}

int I8_FN(qg_int8_quantize)(const qg_int8_qshape *s, const void *x, qg_int8_ftype src_type, int8_t *q, void *scales)
{
    int st = qg_int8_quantize_check(s, x, src_type, q, scales);
    if (st != QG_ERR_ok) return st;
    size_t len, count;
    i8_geometry(s, &len, &count);
    uint32_t *amax = malloc(count * sizeof *amax);
    float *sc = malloc(count * sizeof *sc);
    if (amax == NULL || sc == NULL) {
        free(amax);
        free(sc);
        return QG_ERR_alloc_failed;
    }
    i8_quant_ctx c = {x, src_type, len, amax, sc, q};
    qg_parallel_for(count, 1, i8_min_items(len), i8_amax_range, &c);
    const uint32_t inf_bits = src_type == QG_INT8_F16 ? 0x7C00u : 0x7F800000u;
    for (size_t b = 0; b < count && st == QG_ERR_ok; b++)
        if (amax[b] >= inf_bits) st = QG_ERR_int_nonfinite_input;
    for (size_t b = 0; b < count && st == QG_ERR_ok; b++) {
        const float a = src_type == QG_INT8_F16 ? qg_f16_to_f32((uint16_t)amax[b]) : qg_f32_from_bits(amax[b]);
        st = qg_int8_scale_of(a, s->scale_type, &sc[b]);
    }
    if (st == QG_ERR_ok) {
        qg_parallel_for(count * len, 64, I8_MIN_WORK / 4, i8_codes_range, &c);
        for (size_t b = 0; b < count; b++) {
            if (s->scale_type == QG_INT8_F16)
                ((uint16_t *)scales)[b] = qg_f32_to_f16(sc[b]); /* exact: sc[b] is an fp16 value */
            else
                ((float *)scales)[b] = sc[b];
        }
    }
    free(amax);
    free(sc);
    return st;
}

/* ---- dequantize ---- */

typedef struct {
    const qg_int8_qshape *s;
    const int8_t *q;
    const void *scales;
    size_t len;
    float *y32;
    uint16_t *y16;
} i8_deq_ctx;

static void i8_deq_range(void *vc, size_t i0, size_t i1)
{
    i8_deq_ctx *c = vc;
    for (size_t i = i0; i < i1;) {
        const size_t b = i / c->len, end = (b + 1) * c->len < i1 ? (b + 1) * c->len : i1;
        const float s = c->s->scale_type == QG_INT8_F16 ? qg_f16_to_f32(((const uint16_t *)c->scales)[b])
                                                         : ((const float *)c->scales)[b];
        i8_dequant(c->q + i, end - i, s, c->y32 ? c->y32 + i : NULL, c->y16 ? c->y16 + i : NULL);
        i = end;
    }
}

int I8_FN(qg_int8_dequant)(const qg_int8_qshape *s, const int8_t *q, const void *scales, float *y_f32, uint16_t *y_f16)
{
    const int st = qg_int8_dequant_check(s, q, scales, y_f32, y_f16);
    if (st != QG_ERR_ok) return st;
    size_t len, count;
    i8_geometry(s, &len, &count);
    i8_deq_ctx c = {s, q, scales, len, y_f32, y_f16};
    qg_parallel_for(count * len, 64, I8_MIN_WORK / 4, i8_deq_range, &c);
    return QG_ERR_ok;
}

/* ---- W8A8 ---- */

typedef struct {
    const qg_int8_w8a8_args *p;
    size_t nblocks;
    int32_t *acc;
    float *y32;
    uint16_t *y16;
} i8_gemm_ctx;

/* The epilogue and the stores of one output row segment (A row m, B rows n0 .. n0 + nn - 1). */
static void i8_gemm_store(const i8_gemm_ctx *c, size_t m, size_t n0, size_t nn, const int32_t *t)
{
    const qg_int8_w8a8_args *p = c->p;
    const size_t o = m * p->N + n0;
    if (c->acc != NULL) memcpy(c->acc + o, t, nn * sizeof t[0]);
    if (c->y32 == NULL && c->y16 == NULL) return;
    const void *bias = NULL;
    if (p->bias != NULL) bias = (const unsigned char *)p->bias + n0 * (p->bias_type == QG_INT8_F16 ? 2u : 4u);
    const int sb_vec = p->sb_len != 1;
    i8_epilogue(t, nn, p->sa[p->sa_len == 1 ? 0 : m], p->sb + (sb_vec ? n0 : 0), sb_vec, bias, p->bias_type, p->relu,
                c->y32 ? c->y32 + o : NULL, c->y16 ? c->y16 + o : NULL);
}

/* Item i: A rows m0 = 2 (i % MP), m0 + 1 (when < M) against B rows [NB * (i / MP), + NB), MP = ceil(M / 2). */
static void i8_gemm_range(void *vc, size_t i0, size_t i1)
{
    const i8_gemm_ctx *c = vc;
    const qg_int8_w8a8_args *p = c->p;
    const size_t M = p->M, N = p->N, K = p->K, MP = (M + 1) / 2;
    int32_t t0[I8_NB], t1[I8_NB], d[8];
    for (size_t i = i0; i < i1; i++) {
        const size_t m0 = 2 * (i % MP), n0 = (i / MP) * I8_NB, nn = N - n0 < I8_NB ? N - n0 : I8_NB;
        const int two = m0 + 1 < M;
        const int8_t *a0 = p->A + m0 * K, *a1 = two ? a0 + K : a0;
        size_t j = 0;
        for (; j + 4 <= nn; j += 4) {
            i8_dot_2x4(a0, a1, p->B + (n0 + j) * K, K, d);
            memcpy(t0 + j, d, 4 * sizeof d[0]);
            memcpy(t1 + j, d + 4, 4 * sizeof d[0]);
        }
        for (; j < nn; j++) {
            t0[j] = i8_dot(a0, p->B + (n0 + j) * K, K);
            if (two) t1[j] = i8_dot(a1, p->B + (n0 + j) * K, K);
        }
        i8_gemm_store(c, m0, n0, nn, t0);
        if (two) i8_gemm_store(c, m0 + 1, n0, nn, t1);
    }
}

int I8_FN(qg_int8_w8a8)(const qg_int8_w8a8_args *p, int32_t *acc, float *y_f32, uint16_t *y_f16)
{
    const int st = qg_int8_w8a8_check(p, acc, y_f32, y_f16);
    if (st != QG_ERR_ok) return st;
    const size_t nblocks = (p->N + I8_NB - 1) / I8_NB;
    i8_gemm_ctx c = {p, nblocks, acc, y_f32, y_f16};
    qg_parallel_for(nblocks * ((p->M + 1) / 2), 1, i8_min_items(2 * I8_NB * p->K), i8_gemm_range, &c);
    return QG_ERR_ok;
}

/* ---- W8A16 ---- */

typedef struct {
    const int8_t *B;
    const void *sb;
    qg_int8_ftype sb_type;
    size_t N, K, M;
    const float *x; /* M x K activations as float32 (exact) */
    float *y32;
    uint16_t *y16;
} i8_w8a16_ctx;

static void i8_w8a16_range(void *vc, size_t n0, size_t n1)
{
    const i8_w8a16_ctx *c = vc;
#ifdef I8_HAVE_W8A16_ROWS4
    /* batch 1: four weight rows per step (each with dot4's bits for that row); the rest below */
    for (; c->M == 1 && n0 + 4 <= n1; n0 += 4) {
        float d[4];
        i8_w8a16_rows4(c->B + n0 * c->K, c->K, c->x, c->K, d);
        for (size_t r = 0; r < 4; r++) {
            const size_t n = n0 + r;
            const float s = c->sb_type == QG_INT8_F16 ? qg_f16_to_f32(((const uint16_t *)c->sb)[n]) : ((const float *)c->sb)[n];
            const float y = s * d[r];
            if (c->y32 != NULL) c->y32[n] = y;
            if (c->y16 != NULL) c->y16[n] = qg_f32_to_f16(y);
        }
    }
#endif
    for (size_t n = n0; n < n1; n++) {
        const float s = c->sb_type == QG_INT8_F16 ? qg_f16_to_f32(((const uint16_t *)c->sb)[n]) : ((const float *)c->sb)[n];
        for (size_t m0 = 0; m0 < c->M; m0 += 4) {
            const size_t rows = c->M - m0 < 4 ? c->M - m0 : 4;
            const float *x[4];
            float d[4];
            for (size_t r = 0; r < 4; r++) x[r] = c->x + (m0 + (r < rows ? r : 0)) * c->K; /* padding repeats row m0 */
            if (rows == 1)
                i8_w8a16_dot4(c->B + n * c->K, x, 1, c->K, d);
            else
                i8_w8a16_dot4(c->B + n * c->K, x, 4, c->K, d);
            for (size_t r = 0; r < rows; r++) {
                const size_t m = m0 + r;
                const float y = s * d[r];
                if (c->y32 != NULL) c->y32[m * c->N + n] = y;
                if (c->y16 != NULL) c->y16[m * c->N + n] = qg_f32_to_f16(y);
            }
        }
    }
}

int I8_FN(qg_int8_w8a16)(const int8_t *B, const void *sb, qg_int8_ftype sb_type, size_t N, size_t K, const uint16_t *X,
                         size_t M, float *y_f32, uint16_t *y_f16)
{
    const int st = qg_int8_w8a16_check(B, sb, sb_type, N, K, X, M, y_f32, y_f16);
    if (st != QG_ERR_ok) return st;
    if (M > SIZE_MAX / sizeof(float) / K) return QG_ERR_shape_invalid;
    float *x = malloc(M * K * sizeof *x);
    if (x == NULL) return QG_ERR_alloc_failed;
    i8_f16_to_f32(X, M * K, x);
    i8_w8a16_ctx c = {B, sb, sb_type, N, K, M, x, y_f32, y_f16};
    qg_parallel_for(N, 1, i8_min_items(M * K), i8_w8a16_range, &c);
    free(x);
    return QG_ERR_ok;
}

#endif
