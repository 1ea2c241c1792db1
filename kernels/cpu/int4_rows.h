/* Internal: the parts of the optimized INT4 kernels (qgold/kernels_int4.h) that are the same on every CPU
 * ISA: validation, the activation conversion, the row/batch/thread drivers and the output writes. Plain
 * C, static; an ISA file defines
 *
 *   typedef ... i4_v8;                      8 float32 lanes (lane l: column 8w + l of word w)
 *   i4_v8 i4_zero(void); i4_v8 i4_set1(float v); i4_v8 i4_load(const float *p); void i4_store(float *p, i4_v8 v);
 *   i4_v8 i4_codes(uint32_t word);          lane j = 2^23 + ((word >> 4j) & 15) as float32 (the bit pattern
 *                                           0x4B000000 | code: exact, no conversion instruction)
 *   i4_v8 i4_sub(i4_v8 a, i4_v8 b); i4_v8 i4_mul(i4_v8 a, i4_v8 b);    one IEEE operation per lane
 *   i4_v8 i4_fma(i4_v8 a, i4_v8 b, i4_v8 c); a * b + c rounded once per lane
 *   float i4_scale_f32(uint16_t h);         a finite fp16 value as float32 (exact; the hardware conversion)
 *   float i4_hsum(i4_v8 a);                 t_l = a_l + a_{l+4} (l = 0..3), then (t_0 + t_2) + (t_1 + t_3)
 *   int32_t i4_dots_packed1(const uint8_t *b, size_t nb, const int8_t *a);
 *   void i4_dots_packed4(const uint8_t *b, size_t nb, const int8_t *a, size_t kp, int32_t out[4]);
 *                                           over nb 16-byte blocks of a packed row b (32 codes each): the
 *                                           exact sum of a[32 i + j] u_j, u_j = (nibble j of the block) XOR 8,
 *                                           nibble j < 16 the low nibble of byte j, j >= 16 the high nibble of
 *                                           byte j - 16; packed4: rows r = 0..3 of a, kp bytes apart, into out[r]
 *
 * then includes this file.
 *
 * Decode: w = (code - z) * s per lane, both operations exact (small integers; a 5-bit integer times an
 * fp16 value), so the decode is bit-exact with the reference on every ISA. The subtraction is done as
 * (2^23 + code) - (2^23 + z): both operands are exact integers below 2^24, so the difference is code - z
 * exactly.
 *
 * GEMV float order (the same for every batch size, batch chunking and thread count, so outputs are batch-
 * and thread-invariant): for output (b, n) one 8-lane accumulator A starts at +0; for each word w = 0,
 * 1, ... of row n in order, A = fma(w[8w..8w+7], x_b[8w..8w+7], A); then y = i4_hsum(A). Each product
 * passes at most K/8 + 3 <= K roundings, within the declared d = K. A NaN result is written as the quiet
 * NaN 0x7FC00000 (fp16 0x7E00): which NaN a sum ends in may depend on operand order inside an
 * instruction, so only a canonical NaN keeps the invariances.
 *
 * GEMM: the nibbles of A are sign-extended once into int8 rows in block order (i4_unpack_a); B is read
 * packed and decoded in registers; each output is one exact integer dot product, then the reference's
 * epilogue (qg_int4_epilogue).
 *
 * Threads: output rows (GEMV, decode) or rows of B (GEMM) are split over qg_threads(); every item is
 * computed by the same code whichever range holds it.
 */
#ifndef QGOLD_INT4_ROWS_H
#define QGOLD_INT4_ROWS_H

#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/int4.h"
#include "qgold/kernels_int4.h"

#include "threads.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Batch columns sharing one decoded word; weight rows sharing one activation load; act-order columns whose
 * scales and zeros are gathered at once. */
enum { I4_BB = 8, I4_RB = 8, I4_KC = 512 };

typedef struct {
    const qg_w4a16 *L;
    size_t batch, G;
    const float *xf;  /* batch x K activations as float32 (exact) */
    float *w;         /* decode output */
    float *y_f32;
    uint16_t *y_f16;
} i4_ctx;

static inline float i4_canonical(float y)
{
    if (y != y) {
        const uint32_t qnan = 0x7FC00000u;
        memcpy(&y, &qnan, 4);
    }
    return y;
}

/* 2^23 + zero (exact) and scale of group j of row n as float32. */
static inline float i4_zero_of(const qg_w4a16 *L, size_t G, size_t n, size_t j)
{
    return 8388608.0f + (float)(L->zeros ? L->zeros[n * G + j] : QG_INT4_SYM_ZERO);
}
static inline float i4_scale_of(const qg_w4a16 *L, size_t G, size_t n, size_t j)
{
    return i4_scale_f32(L->scales[n * G + j]); /* scales are finite (validated) */
}

/* Act-order: per-column zeros and scales of row n for columns k0..k0+len-1. */
static inline void i4_gather_groups(const qg_w4a16 *L, size_t G, size_t n, size_t k0, size_t len, float *zc, float *sc)
{
    for (size_t i = 0; i < len; i++) {
        const size_t j = (size_t)L->g_idx[k0 + i];
        zc[i] = i4_zero_of(L, G, n, j);
        sc[i] = i4_scale_of(L, G, n, j);
    }
}

/* A decoded word: ((2^23 + code) - (2^23 + z)) * s = (code - z) * s per lane; z (biased) and s hold the group's values or the gathered per-column ones. */
static inline i4_v8 i4_word(uint32_t word, i4_v8 z, i4_v8 s) { return i4_mul(i4_sub(i4_codes(word), z), s); }

/* Rows n..n+RB-1 against batch columns b0..b0+NB-1: RB x NB accumulators, one per output, each updated
 * by exactly the operations of the order above for its own (b, n); only the interleaving of independent
 * chains differs, so every output has the same bits whatever RB and NB (and so whatever the batch or
 * the thread ranges). The RB x NB independent FMA chains hide the FMA latency a single chain waits on,
 * and one activation load serves RB rows. RB and NB are constants at every call (the loops unroll and
 * the accumulators stay in registers). */
static inline __attribute__((always_inline)) void i4_gemv_tile(const i4_ctx *c, size_t n, size_t b0, const size_t RB,
                                                               const size_t NB)
{
    const qg_w4a16 *L = c->L;
    const size_t K = L->K, W = K / 8, G = c->G;
    const uint32_t *q = L->qweight + n * W;
    const float *x = c->xf + b0 * K;
    i4_v8 acc[I4_RB][I4_BB];
#pragma GCC unroll 8
    for (size_t r = 0; r < RB; r++)
#pragma GCC unroll 8
        for (size_t b = 0; b < NB; b++) acc[r][b] = i4_zero();
    if (L->g_idx == NULL) {
        const size_t wpg = L->g / 8; /* words per group: g is a multiple of 8 */
        for (size_t j = 0; j < G; j++) {
            i4_v8 z[I4_RB], s[I4_RB];
#pragma GCC unroll 8
            for (size_t r = 0; r < RB; r++) {
                z[r] = i4_set1(i4_zero_of(L, G, n + r, j));
                s[r] = i4_set1(i4_scale_of(L, G, n + r, j));
            }
            for (size_t w = j * wpg; w < (j + 1) * wpg; w++) {
                i4_v8 xv[I4_BB];
#pragma GCC unroll 8
                for (size_t b = 0; b < NB; b++) xv[b] = i4_load(x + b * K + 8 * w);
#pragma GCC unroll 8
                for (size_t r = 0; r < RB; r++) {
                    const i4_v8 wv = i4_word(q[r * W + w], z[r], s[r]);
#pragma GCC unroll 8
                    for (size_t b = 0; b < NB; b++) acc[r][b] = i4_fma(wv, xv[b], acc[r][b]);
                }
            }
        }
    } else {
        float zc[I4_RB][I4_KC], sc[I4_RB][I4_KC];
        for (size_t k0 = 0; k0 < K; k0 += I4_KC) {
            const size_t len = K - k0 < I4_KC ? K - k0 : I4_KC;
            for (size_t r = 0; r < RB; r++) i4_gather_groups(L, G, n + r, k0, len, zc[r], sc[r]);
            for (size_t i = 0; i < len; i += 8) {
                const size_t w = (k0 + i) / 8;
                i4_v8 xv[I4_BB];
#pragma GCC unroll 8
                for (size_t b = 0; b < NB; b++) xv[b] = i4_load(x + b * K + 8 * w);
#pragma GCC unroll 8
                for (size_t r = 0; r < RB; r++) {
                    const i4_v8 wv = i4_word(q[r * W + w], i4_load(zc[r] + i), i4_load(sc[r] + i));
#pragma GCC unroll 8
                    for (size_t b = 0; b < NB; b++) acc[r][b] = i4_fma(wv, xv[b], acc[r][b]);
                }
            }
        }
    }
    for (size_t r = 0; r < RB; r++)
        for (size_t b = 0; b < NB; b++) {
            const float y = i4_canonical(i4_hsum(acc[r][b]));
            const size_t o = (b0 + b) * L->N + n + r;
            if (c->y_f32) c->y_f32[o] = y;
            if (c->y_f16) c->y_f16[o] = qg_f32_to_f16(y);
        }
}

/* The tiles, named i4_tile_<NB>x<RB>: a block of I4_RB rows takes the batch columns 4 at a time (2 rows
 * per tile; measured faster at batch 16 than 8 columns x 1 row, as each activation load serves 2 rows),
 * then 2 (4 rows) and 1 (8 rows): at most 8 accumulators. The rows left over (fewer than I4_RB) go one
 * at a time, 8 columns per tile. */
static void i4_tile_8x1(const i4_ctx *c, size_t n, size_t b0) { i4_gemv_tile(c, n, b0, 1, 8); }
static void i4_tile_4x2(const i4_ctx *c, size_t n, size_t b0) { i4_gemv_tile(c, n, b0, 2, 4); }
static void i4_tile_2x4(const i4_ctx *c, size_t n, size_t b0) { i4_gemv_tile(c, n, b0, 4, 2); }
static void i4_tile_1x8(const i4_ctx *c, size_t n, size_t b0) { i4_gemv_tile(c, n, b0, 8, 1); }
static void i4_tile_4x1(const i4_ctx *c, size_t n, size_t b0) { i4_gemv_tile(c, n, b0, 1, 4); }
static void i4_tile_2x1(const i4_ctx *c, size_t n, size_t b0) { i4_gemv_tile(c, n, b0, 1, 2); }
static void i4_tile_1x1(const i4_ctx *c, size_t n, size_t b0) { i4_gemv_tile(c, n, b0, 1, 1); }

_Static_assert(I4_RB == 8, "the row blocks below are 4 x 2, 2 x 4 and 1 x 8 tiles");

static void i4_gemv_range(void *vc, size_t n0, size_t n1)
{
    const i4_ctx *c = vc;
    const size_t B = c->batch;
    size_t n = n0;
    for (; n + I4_RB <= n1; n += I4_RB) {
        size_t b0 = 0;
        for (; b0 + 4 <= B; b0 += 4)
            for (size_t r = 0; r < I4_RB; r += 2) i4_tile_4x2(c, n + r, b0);
        if (b0 + 2 <= B) {
            for (size_t r = 0; r < I4_RB; r += 4) i4_tile_2x4(c, n + r, b0);
            b0 += 2;
        }
        if (b0 < B) i4_tile_1x8(c, n, b0);
    }
    for (; n < n1; n++) {
        size_t b0 = 0;
        for (; b0 + 8 <= B; b0 += 8) i4_tile_8x1(c, n, b0);
        if (b0 + 4 <= B) {
            i4_tile_4x1(c, n, b0);
            b0 += 4;
        }
        if (b0 + 2 <= B) {
            i4_tile_2x1(c, n, b0);
            b0 += 2;
        }
        if (b0 < B) i4_tile_1x1(c, n, b0);
    }
}

/* qg_w4a16_gemv_*. */
static inline int i4_gemv(const qg_w4a16 *L, const uint16_t *x, size_t x_len, size_t batch, float *y_f32, uint16_t *y_f16)
{
    if (!x || (!y_f32 && !y_f16)) return QG_ERR_argument_invalid;
    int rc = qg_w4a16_validate(L);
    if (rc) return rc;
    if (batch == 0 || batch > SIZE_MAX / L->K / sizeof(float) || batch > SIZE_MAX / L->N) return QG_ERR_batch_invalid;
    if (x_len != batch * L->K) return QG_ERR_size_mismatch;
    float *xf = malloc(batch * L->K * sizeof(float));
    if (!xf) return QG_ERR_alloc_failed;
    for (size_t i = 0; i < batch * L->K; i++) xf[i] = qg_f16_to_f32(x[i]);
    i4_ctx c = {L, batch, L->K / L->g, xf, NULL, y_f32, y_f16};
    /* At least about 2^16 weight x column products per range, so small calls stay on one thread. */
    qg_parallel_for(L->N, 1, ((size_t)1 << 16) / (L->K * batch) + 1, i4_gemv_range, &c);
    free(xf);
    return 0;
}

static void i4_decode_range(void *vc, size_t n0, size_t n1)
{
    const i4_ctx *c = vc;
    const qg_w4a16 *L = c->L;
    const size_t K = L->K, W = K / 8, G = c->G;
    float zc[I4_KC], sc[I4_KC];
    for (size_t n = n0; n < n1; n++) {
        const uint32_t *q = L->qweight + n * W;
        float *out = c->w + n * K;
        if (L->g_idx == NULL) {
            const size_t wpg = L->g / 8;
            for (size_t j = 0; j < G; j++) {
                const i4_v8 z = i4_set1(i4_zero_of(L, G, n, j)), s = i4_set1(i4_scale_of(L, G, n, j));
                for (size_t w = j * wpg; w < (j + 1) * wpg; w++) i4_store(out + 8 * w, i4_word(q[w], z, s));
            }
        } else {
            for (size_t k0 = 0; k0 < K; k0 += I4_KC) {
                const size_t len = K - k0 < I4_KC ? K - k0 : I4_KC;
                i4_gather_groups(L, G, n, k0, len, zc, sc);
                for (size_t i = 0; i < len; i += 8)
                    i4_store(out + k0 + i, i4_word(q[(k0 + i) / 8], i4_load(zc + i), i4_load(sc + i)));
            }
        }
    }
}

/* qg_w4a16_decode_*. */
static inline int i4_decode(const qg_w4a16 *L, float *w)
{
    if (!w) return QG_ERR_argument_invalid;
    int rc = qg_w4a16_validate(L);
    if (rc) return rc;
    i4_ctx c = {L, 1, L->K / L->g, NULL, w, NULL, NULL};
    qg_parallel_for(L->N, 1, ((size_t)1 << 16) / L->K + 1, i4_decode_range, &c);
    return 0;
}

/* ---- packed int4 x int4 GEMM ---- */

typedef struct {
    const qg_int4_gemm_args *p;
    const int8_t *a;     /* M x kp codes of A in block order (i4_unpack_a), zero padded */
    const int32_t *asum; /* per row of A: the sum of its codes */
    size_t kp, nb;       /* kp = 32 blocks; nb whole 16-byte blocks in a row of B */
    int32_t *acc;
    float *y_f32;
    uint16_t *y_f16;
} i4_gemm_ctx;

/* A's codes sign-extended to int8, each 32-code block k0 .. k0 + 31 stored as its 16 even codes then its 16
 * odd ones (the order i4_dots_packed meets B's nibbles in: byte j of a block holds codes 2j (low nibble)
 * and 2j + 1), zero past K; asum[m] = the sum of row m's codes. */
static void i4_unpack_a(const uint8_t *src, size_t rows, size_t K, size_t kp, int8_t *dst, int32_t *asum)
{
    const size_t rb = qg_int4_packed_row_bytes(K);
    for (size_t r = 0; r < rows; r++) {
        int8_t *d = dst + r * kp;
        memset(d, 0, kp);
        int32_t sum = 0;
        for (size_t k = 0; k < K; k++) {
            const int c = qg_int4_packed_get(src + r * rb, k);
            d[(k & ~(size_t)31) + ((k & 31) >> 1) + 16 * (k & 1)] = (int8_t)c;
            sum += c;
        }
        asum[r] = sum;
    }
}

/* Output (m, n) = sum_k a_k c_k with B's code c = u - 8, u = nibble XOR 8 in 0..15 (the nibble as a signed
 * 4-bit value, plus 8): i4_dots_packed sums a u exactly, and a c = a u - 8 a. Every step is an exact
 * integer (|sum a u| <= 120 K < 2^24), so the result equals the reference's whatever the grouping. B is
 * read packed, once per call: each thread takes rows of B and computes them against every row of A
 * (4 at a time), so a row of B is decoded in registers and never stored. The last partial block of a row
 * (K not a multiple of 32) is copied into a zeroed 16-byte block first: no read past the row. */
static void i4_gemm_range(void *vc, size_t n0, size_t n1)
{
    const i4_gemm_ctx *c = vc;
    const qg_int4_gemm_args *p = c->p;
    const size_t rb = qg_int4_packed_row_bytes(p->K);
    for (size_t n = n0; n < n1; n++) {
        const uint8_t *b = p->B + n * rb;
        uint8_t tail[16] = {0};
        const size_t tb = rb - 16 * c->nb; /* bytes of the partial block */
        if (tb) memcpy(tail, b + 16 * c->nb, tb);
        for (size_t m0 = 0; m0 < p->M;) {
            const int R = p->M - m0 >= 4 ? 4 : 1;
            int32_t s[4] = {0, 0, 0, 0}, st[4] = {0, 0, 0, 0};
            const int8_t *a = c->a + m0 * c->kp;
            if (R == 4) {
                i4_dots_packed4(b, c->nb, a, c->kp, s);
                if (tb) i4_dots_packed4(tail, 1, a + 32 * c->nb, c->kp, st);
            } else {
                s[0] = i4_dots_packed1(b, c->nb, a);
                if (tb) st[0] = i4_dots_packed1(tail, 1, a + 32 * c->nb);
            }
            for (int r = 0; r < R; r++)
                qg_int4_gemm_store(p, m0 + (size_t)r, n, s[r] + st[r] - 8 * c->asum[m0 + (size_t)r], c->acc, c->y_f32, c->y_f16);
            m0 += (size_t)R;
        }
    }
}

/* qg_int4_gemm_packed_*. */
static inline int i4_gemm(const qg_int4_gemm_args *p, int32_t *acc, float *y_f32, uint16_t *y_f16)
{
    int rc = qg_int4_gemm_check(p, acc, y_f32, y_f16);
    if (rc) return rc;
    const size_t kp = (p->K + 31) / 32 * 32;
    if (p->M > SIZE_MAX / kp) return QG_ERR_shape_invalid; /* kp >= 32: covers the M int32 sums too */
    int8_t *a = malloc(p->M * kp);
    int32_t *asum = malloc(p->M * sizeof(int32_t));
    if (!a || !asum) {
        free(a);
        free(asum);
        return QG_ERR_alloc_failed;
    }
    i4_unpack_a(p->A, p->M, p->K, kp, a, asum);
    i4_gemm_ctx c = {p, a, asum, kp, p->K / 32, acc, y_f32, y_f16};
    qg_parallel_for(p->N, 1, ((size_t)1 << 18) / (kp * p->M) + 1, i4_gemm_range, &c);
    free(a);
    free(asum);
    return 0;
}

#endif
