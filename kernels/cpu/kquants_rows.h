/* Internal: the parts of the optimized K-quant kernels (qgold/kernels_kquants.h) that are the same on
 * every CPU ISA: argument checks (the reference's, in its order, before any output is touched; contracts
 * in qgold/kquants.h), the block-range and row-range drivers of dequantization and GEMV with their thread
 * split, the batch loops, the dot's per-block float sums, and the output writes. Plain C, static inline;
 * an ISA file includes kquants_blocks.h, defines
 *
 *   typedef ... kq_v8;
 *       an 8-lane float32 vector, lane l holding element 8v + l of vector v of a block;
 *   typedef struct { ...; int special; } kq_prep;
 *       a decoded block: its factors and codes, special = Q4_K/Q5_K with d or dmin inf or NaN;
 *   void kq_prep_q45(const uint8_t *blk, kq_prep *p, int q5), kq_prep_q6(blk, p), kq_prep_q8(blk, p);
 *       decode one block ("prep");
 *   kq_v8 kq_v8_zero(void);
 *   float kq_hsum(kq_v8 a0, kq_v8 a1);
 *       s = a0 + a1 (lane-wise), t_l = s_l + s_{l+4} (l = 0..3), (t_0 + t_2) + (t_1 + t_3);
 *   float kq_f16(uint16_t h);  uint16_t kq_to_f16(float y);
 *       fp16 -> float32 (exact), float32 -> fp16 rounded to nearest even;
 *   float kq_fma(float a, float b, float c);
 *       a*b + c rounded once; used by the scalar dot step below, so needed only without KQ_HAVE_DOT_SUMS;
 *   void kq_deq_block(const kq_prep *p, int op, int sh, int q4, void *y, int f16out);
 *       the 256 weights of a prepared block (op: OP_*, sh: kq_scale_shift, q4: Q4_K) into y, float32 or
 *       fp16 (rounded once);
 *   void kq_dot_block_q45(const uint8_t *wb, const uint8_t *yb, int q5, int32_t *S, int32_t *M);
 *   void kq_dot_block_q6(const uint8_t *wb, const uint8_t *yb, int32_t *S);
 *       the exact integer sums of one block against a Q8_K block (spec: S = sum sc q q8, M = sum m bsums);
 *       used by the scalar dot step below, so needed only without KQ_HAVE_DOT_SUMS;
 *   optionally, with KQ_HAVE_DOT_SUMS defined (otherwise the scalar ones below are used),
 *   typedef ... kq_dsum;  kq_dsum kq_dsum_zero(void);  float kq_dsum_result(kq_dsum a);
 *   kq_dsum kq_dot_q45(kq_dsum a, const uint8_t *wb, const uint8_t *yb, int q5, int32_t *S, int32_t *M);
 *   kq_dsum kq_dot_q6(kq_dsum a, const uint8_t *wb, const uint8_t *yb, int32_t *S);
 *       the dot's float sums (the four partial pairs), all +0 at the start, the step of one block (its
 *       exact S_i, M_i also written to *S, *M where not NULL) and the result, exactly as the dot float
 *       order below states;
 *   void kq_gemv_block(const kq_prep *p, int R, int G, int op, int sh, int q4, const float *const *xb,
 *                      kq_v8 acc[2][MAXG][2]);
 *       blocks p[0..R-1] (one per row) against the activation blocks xb[0..G-1]: for r < R, g < G,
 *       v = 0..31, acc[r][g][(v >> 2) & 1] = fma(w_r[8v..8v+7], xb[g][8v..8v+7], acc[r][g][(v >> 2) & 1]);
 *   void kq_weights_to(const kq_prep *p, int op, int sh, int q4, float *wv);
 *       the 256 float32 weights of a prepared block into wv (32-byte aligned);
 *   void kq_gemv_block_buf(const float *const *wv, int R, int G, const float *xf, size_t cols, size_t b0,
 *                          kq_v8 accm[2][QG_KQ_MAX_BATCH][2]);
 *       as kq_gemv_block for weights already in wv[r] and batch columns b0..b0+G-1 (activation block of
 *       column b at xf + b * cols), accumulators accm[r][b];
 *   void kq_convert_x(const uint16_t *x, size_t n, float *xf);
 *       n fp16 activations to float32 (exact), n a multiple of 256, xf 32-byte aligned;
 *   optionally, with KQ_HAVE_Q4_ROWS_B1 defined,
 *   void kq_q4_rows_b1(const uint8_t *w0, size_t rb, size_t nb, const float *xf, int R, float *y);
 *       Q4_K at batch 1: rows w0 and w0 + rb (R = 2) or w0 alone (R = 1), nb blocks each, into y[0..R-1]
 *       (the same float order as below, so the same bits as the generic path);
 *
 * then includes this file.
 *
 * GEMV float order (the same for every batch size, row grouping and thread count, so outputs are
 * batch- and thread-invariant): for output (m, b) two 8-lane float32 accumulators A0, A1 start at +0;
 * for each block of row m in order, for vector v = 0..31 of the block (elements 8v..8v+7),
 *   A[(v >> 2) & 1] = fma(w[8v..8v+7], x_b[8v..8v+7], A[(v >> 2) & 1])
 * (each accumulator sees its vectors in increasing v); then y = kq_hsum(A0, A1). The fp16 output is that
 * float32 rounded once. Activations are converted to float32 once per call (exact). A NaN result is
 * written as the quiet NaN 0x7FC00000 (fp16 0x7E00): which of several NaNs a float sum ends in depends
 * on operand order inside each instruction, which the compiler chooses per call site, so only the
 * canonical NaN keeps the invariances above bitwise.
 *
 * Execution (none of it changes the order above): batch 1 takes rows in pairs, blocks prepared one
 * ahead (or the ISA's own Q4_K path); batch 2-4 one row with all columns in registers; batch 5-16
 * dequantizes each block of a row pair once into a float32 buffer, then runs the columns in pairs over
 * both rows. Rows are split over qg_threads() threads (threads.h), each row computed whole by one thread.
 *
 * Dot float order: four partial pairs (sumS_p, sumM_p), p = 0..3, all +0 at the start; per block i in
 * order, with S_i, M_i the exact integers and p = i mod 4,
 *   sumS_p = fma(D_i*dy_i, (float)S_i, sumS_p), and for Q4_K/Q5_K sumM_p = fma(Dm_i*dy_i, (float)M_i, sumM_p);
 *   result = ((sumS_0 + sumS_1) + (sumS_2 + sumS_3)) - ((sumM_0 + sumM_1) + (sumM_2 + sumM_3)).
 * (float)S_i is exact up to 2^24 and rounded once above; a NaN result is written as 0x7FC00000. Four
 * independent chains instead of one: a vector unit takes four blocks' steps in one fma, where one chain
 * waits on each fma's latency.
 *
 * Every ISA file follows these orders, so on finite data the GEMV outputs and dot results of all CPU
 * backends are the same bits.
 */
#ifndef QGOLD_KQUANTS_ROWS_H
#define QGOLD_KQUANTS_ROWS_H

#include "kquants_blocks.h"
#include "threads.h"

#include "qgold/kernels_kq_q8k.h"

#include <stdlib.h>

QG_INLINE void kq_prep_block(const qg_ktype t, const uint8_t *blk, kq_prep *p)
{
    switch (t) {
    case QG_Q4_K: kq_prep_q45(blk, p, 0); break;
    case QG_Q5_K: kq_prep_q45(blk, p, 1); break;
    case QG_Q6_K: kq_prep_q6(blk, p); break;
    default: kq_prep_q8(blk, p); break;
    }
}

/* ---- dequantization ------------------------------------------------------------------------------ */

typedef struct {
    qg_ktype t;
    const uint8_t *blocks;
    void *y;
    int f16out;
} kq_deq_ctx;

QG_INLINE void kq_deq_range_t(const kq_deq_ctx *c, size_t i0, size_t i1, const qg_ktype t, const int f16out)
{
    const size_t bsz = qg_kq_block_bytes(t), osz = f16out ? sizeof(uint16_t) : sizeof(float);
    const int sh = kq_scale_shift(t), plain = t == QG_Q6_K || t == QG_Q8_K, q4 = t == QG_Q4_K;
    kq_prep p;
    for (size_t i = i0; i < i1; i++) {
        kq_prep_block(t, c->blocks + i * bsz, &p);
        void *y = (unsigned char *)c->y + i * QK * osz;
        if (plain) kq_deq_block(&p, OP_MUL, sh, 0, y, f16out);
        else if (p.special) kq_deq_block(&p, OP_MS, sh, q4, y, f16out);
        else kq_deq_block(&p, OP_FMS, sh, q4, y, f16out);
    }
}

static void kq_deq_range(void *vc, size_t i0, size_t i1)
{
    const kq_deq_ctx *c = vc;
    switch (c->t) {
    case QG_Q4_K: c->f16out ? kq_deq_range_t(c, i0, i1, QG_Q4_K, 1) : kq_deq_range_t(c, i0, i1, QG_Q4_K, 0); break;
    case QG_Q5_K: c->f16out ? kq_deq_range_t(c, i0, i1, QG_Q5_K, 1) : kq_deq_range_t(c, i0, i1, QG_Q5_K, 0); break;
    case QG_Q6_K: c->f16out ? kq_deq_range_t(c, i0, i1, QG_Q6_K, 1) : kq_deq_range_t(c, i0, i1, QG_Q6_K, 0); break;
    default: c->f16out ? kq_deq_range_t(c, i0, i1, QG_Q8_K, 1) : kq_deq_range_t(c, i0, i1, QG_Q8_K, 0); break;
    }
}

/* qg_kq_dequant_f32_* (f16out = 0) and qg_kq_dequant_f16_* (f16out = 1): blocks split over threads. */
static inline int kq_dequant(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, void *y, int f16out)
{
    int rc = kq_dequant_args(t, blocks, nbytes, rows, cols, y);
    if (rc != QG_ERR_ok) return rc;
    kq_deq_ctx c = {t, blocks, y, f16out};
    qg_parallel_for(rows * (cols / QK), 1, 4096, kq_deq_range, &c);
    return QG_ERR_ok;
}

/* ---- dot with Q8_K ------------------------------------------------------------------------------- */

#ifndef KQ_HAVE_DOT_SUMS
/* The dot's float sums (sumS, sumM) and one block's step of them, as scalars (an ISA file may keep them
 * in its registers instead: see the contract above). */
typedef struct {
    float s[4], m[4];
    size_t n;
} kq_dsum;

static inline kq_dsum kq_dsum_zero(void) { return (kq_dsum){{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}, 0}; }

static inline float kq_dsum_result(kq_dsum a)
{
    return kq_canon_nan(((a.s[0] + a.s[1]) + (a.s[2] + a.s[3])) - ((a.m[0] + a.m[1]) + (a.m[2] + a.m[3])));
}

static inline float kq_q8k_d(const uint8_t *yb)
{
    float dy;
    const uint32_t bits = kq_ld32(yb + QG_Q8K_D);
    memcpy(&dy, &bits, 4);
    return dy;
}

QG_INLINE kq_dsum kq_dot_q45(kq_dsum a, const uint8_t *wb, const uint8_t *yb, const int q5, int32_t *S, int32_t *M)
{
    const float dy = kq_q8k_d(yb);
    int32_t Si, Mi;
    kq_dot_block_q45(wb, yb, q5, &Si, &Mi);
    const size_t p = a.n++ & 3;
    a.s[p] = kq_fma(kq_f16(kq_ld16(wb + QG_Q4K_D)) * dy, (float)Si, a.s[p]);
    a.m[p] = kq_fma(kq_f16(kq_ld16(wb + QG_Q4K_DMIN)) * dy, (float)Mi, a.m[p]);
    if (S != NULL) *S = Si;
    if (M != NULL) *M = Mi;
    return a;
}

QG_INLINE kq_dsum kq_dot_q6(kq_dsum a, const uint8_t *wb, const uint8_t *yb, int32_t *S)
{
    const float dy = kq_q8k_d(yb);
    int32_t Si;
    kq_dot_block_q6(wb, yb, &Si);
    const size_t p = a.n++ & 3;
    a.s[p] = kq_fma(kq_f16(kq_ld16(wb + QG_Q6K_D)) * dy, (float)Si, a.s[p]);
    if (S != NULL) *S = Si;
    return a;
}
#endif

/* The blocks of one row, for a constant type t (so each type's block code is compiled on its own). */
QG_INLINE void kq_dot_row(const qg_ktype t, const uint8_t *wrow, const uint8_t *q8row, size_t nb, int32_t *S, int32_t *M, float *result)
{
    const size_t bsz = t == QG_Q6_K ? QG_Q6K_BYTES : (t == QG_Q5_K ? QG_Q5K_BYTES : QG_Q4K_BYTES);
    kq_dsum a = kq_dsum_zero();
    for (size_t i = 0; i < nb; i++) {
        const uint8_t *wb = wrow + i * bsz, *yb = q8row + i * QG_Q8K_BYTES;
        if (t == QG_Q6_K) {
            a = kq_dot_q6(a, wb, yb, S != NULL ? S + i : NULL);
            if (M != NULL) M[i] = 0;
        } else {
            a = kq_dot_q45(a, wb, yb, t == QG_Q5_K, S != NULL ? S + i : NULL, M != NULL ? M + i : NULL);
        }
    }
    *result = kq_dsum_result(a);
}

static inline int kq_dot_q8k(qg_ktype t, const uint8_t *wrow, const uint8_t *q8row, size_t cols, int32_t *S, int32_t *M,
                             float *result)
{
    if (!kq_known(t)) return QG_ERR_kq_type_unknown;
    if (t == QG_Q8_K) return QG_ERR_unsupported;
    if (wrow == NULL || q8row == NULL || result == NULL) return QG_ERR_argument_invalid;
    int rc = qg_kq_check_shape(t, 1, cols, cols / QK * qg_kq_block_bytes(t));
    if (rc != QG_ERR_ok) return rc;
    const size_t nb = cols / QK;
    if (t == QG_Q4_K) kq_dot_row(QG_Q4_K, wrow, q8row, nb, S, M, result);
    else if (t == QG_Q5_K) kq_dot_row(QG_Q5_K, wrow, q8row, nb, S, M, result);
    else kq_dot_row(QG_Q6_K, wrow, q8row, nb, S, M, result);
    return QG_ERR_ok;
}

/* ---- GEMV ---------------------------------------------------------------------------------------- */

typedef struct {
    qg_ktype t;
    const uint8_t *w;
    size_t rows, cols, batch;
    const float *xf; /* batch x cols float32 activations */
    float *y32;
    uint16_t *y16;
} kq_gemv_ctx;

static inline void kq_put_y(const kq_gemv_ctx *c, size_t m, size_t b, float y)
{
    y = kq_canon_nan(y); /* see the top of the file */
    if (c->y32 != NULL) c->y32[b * c->rows + m] = y;
    if (c->y16 != NULL) c->y16[b * c->rows + m] = kq_to_f16(y);
}

/* Dispatch on the weight operation for constant R, G (plain: Q6_K/Q8_K). */
#define KQ_GEMV_BLOCK(R, G)                                                                 \
    do {                                                                                    \
        if (plain) kq_gemv_block(p, R, G, OP_MUL, sh, 0, xb, acc);                          \
        else if (special) kq_gemv_block(p, R, G, OP_MS, sh, q4, xb, acc);                   \
        else kq_gemv_block(p, R, G, OP_FMS, sh, q4, xb, acc);                               \
    } while (0)

/* batch 1: rows in pairs (four independent accumulator chains), a last odd row alone. Each block is
 * prepared one block ahead, so the staged codes are in the cache, not still in the store queue, when
 * the vector loop reads them back. */
QG_INLINE void kq_gemv_rows_b1(const kq_gemv_ctx *c, size_t m0, size_t m1, const qg_ktype t)
{
    const size_t nb = c->cols / QK, bsz = qg_kq_block_bytes(t), rb = nb * bsz;
    const int sh = kq_scale_shift(t), plain = t == QG_Q6_K || t == QG_Q8_K, q4 = t == QG_Q4_K;
    kq_prep pp[2][2];
    size_t m = m0;
    for (; m + 2 <= m1; m += 2) {
        kq_v8 acc[2][MAXG][2];
        for (int r = 0; r < 2; r++) acc[r][0][0] = acc[r][0][1] = kq_v8_zero();
        const uint8_t *w0 = c->w + m * rb;
        kq_prep_block(t, w0, &pp[0][0]);
        kq_prep_block(t, w0 + rb, &pp[0][1]);
        for (size_t i = 0; i < nb; i++) {
            const kq_prep *p = pp[i & 1];
            if (i + 1 < nb) {
                kq_prep_block(t, w0 + (i + 1) * bsz, &pp[(i + 1) & 1][0]);
                kq_prep_block(t, w0 + rb + (i + 1) * bsz, &pp[(i + 1) & 1][1]);
            }
            const float *xb[MAXG] = {c->xf + i * QK};
            const int special = p[0].special | p[1].special;
            KQ_GEMV_BLOCK(2, 1);
        }
        kq_put_y(c, m, 0, kq_hsum(acc[0][0][0], acc[0][0][1]));
        kq_put_y(c, m + 1, 0, kq_hsum(acc[1][0][0], acc[1][0][1]));
    }
    if (m < m1) {
        kq_v8 acc[2][MAXG][2];
        acc[0][0][0] = acc[0][0][1] = kq_v8_zero();
        const uint8_t *w0 = c->w + m * rb;
        kq_prep_block(t, w0, &pp[0][0]);
        for (size_t i = 0; i < nb; i++) {
            const kq_prep *p = pp[i & 1];
            if (i + 1 < nb) kq_prep_block(t, w0 + (i + 1) * bsz, &pp[(i + 1) & 1][0]);
            const float *xb[MAXG] = {c->xf + i * QK};
            const int special = p[0].special;
            KQ_GEMV_BLOCK(1, 1);
        }
        kq_put_y(c, m, 0, kq_hsum(acc[0][0][0], acc[0][0][1]));
    }
}

/* batch 2 to 4: one row at a time, all columns in registers (4 to 8 accumulator chains). */
QG_INLINE void kq_gemv_rows_b234(const kq_gemv_ctx *c, size_t m0, size_t m1, const qg_ktype t)
{
    const size_t nb = c->cols / QK, bsz = qg_kq_block_bytes(t), rb = nb * bsz;
    const int sh = kq_scale_shift(t), plain = t == QG_Q6_K || t == QG_Q8_K, q4 = t == QG_Q4_K;
    kq_prep pp[2];
    for (size_t m = m0; m < m1; m++) {
        kq_v8 acc[2][MAXG][2];
        for (int g = 0; g < MAXG; g++) acc[0][g][0] = acc[0][g][1] = kq_v8_zero();
        const uint8_t *w0 = c->w + m * rb;
        kq_prep_block(t, w0, &pp[0]);
        for (size_t i = 0; i < nb; i++) {
            const kq_prep *p = &pp[i & 1];
            if (i + 1 < nb) kq_prep_block(t, w0 + (i + 1) * bsz, &pp[(i + 1) & 1]);
            const float *xb[MAXG] = {c->xf + i * QK, c->xf + c->cols + i * QK, c->xf + 2 * c->cols + i * QK,
                                     c->xf + 3 * c->cols + i * QK};
            const int special = p[0].special;
            if (c->batch == 2) KQ_GEMV_BLOCK(1, 2);
            else if (c->batch == 3) KQ_GEMV_BLOCK(1, 3);
            else KQ_GEMV_BLOCK(1, 4);
        }
        for (size_t b = 0; b < c->batch; b++) kq_put_y(c, m, b, kq_hsum(acc[0][b][0], acc[0][b][1]));
    }
}

/* batch 5..16: rows in pairs (a last odd row alone). Each block of a row is dequantized once into a
 * float32 buffer; then the columns go in pairs over both rows, so each activation vector load serves
 * two rows and each weight vector load two columns (8 accumulators, nothing spilled). The
 * accumulators live in registers for a block and in memory between blocks. */
QG_INLINE void kq_gemv_rows_bn(const kq_gemv_ctx *c, size_t m0, size_t m1, const qg_ktype t)
{
    const size_t nb = c->cols / QK, bsz = qg_kq_block_bytes(t), rb = nb * bsz, B = c->batch;
    const int sh = kq_scale_shift(t), plain = t == QG_Q6_K || t == QG_Q8_K, q4 = t == QG_Q4_K;
    const size_t ngroups = (B + 1) / 2;
    kq_prep p;
    _Alignas(32) float wbuf[2][QK];
    const float *wv[2] = {wbuf[0], wbuf[1]};
    kq_v8 accm[2][QG_KQ_MAX_BATCH][2];
    for (size_t m = m0; m < m1; m += 2) {
        const size_t R = m + 2 <= m1 ? 2 : 1;
        for (size_t r = 0; r < R; r++)
            for (size_t b = 0; b < B; b++) accm[r][b][0] = accm[r][b][1] = kq_v8_zero();
        for (size_t i = 0; i < nb; i++) {
            for (size_t r = 0; r < R; r++) {
                const uint8_t *blk = c->w + (m + r) * rb + i * bsz;
                kq_prep_block(t, blk, &p);
                if (plain) kq_weights_to(&p, OP_MUL, sh, 0, wbuf[r]);
                else if (p.special) kq_weights_to(&p, OP_MS, sh, q4, wbuf[r]);
                else kq_weights_to(&p, OP_FMS, sh, q4, wbuf[r]);
            }
            size_t b0 = 0;
            const float *xi = c->xf + i * QK;
            for (size_t gi = 0; gi < ngroups; gi++) {
                const size_t G = B / ngroups + (gi < B % ngroups);
                if (R == 2) {
                    if (G == 1) kq_gemv_block_buf(wv, 2, 1, xi, c->cols, b0, accm);
                    else kq_gemv_block_buf(wv, 2, 2, xi, c->cols, b0, accm);
                } else {
                    if (G == 1) kq_gemv_block_buf(wv, 1, 1, xi, c->cols, b0, accm);
                    else kq_gemv_block_buf(wv, 1, 2, xi, c->cols, b0, accm);
                }
                b0 += G;
            }
        }
        for (size_t r = 0; r < R; r++)
            for (size_t b = 0; b < B; b++) kq_put_y(c, m + r, b, kq_hsum(accm[r][b][0], accm[r][b][1]));
    }
}

QG_INLINE void kq_gemv_rows_t(const kq_gemv_ctx *c, size_t m0, size_t m1, const qg_ktype t)
{
#ifdef KQ_HAVE_Q4_ROWS_B1
    if (c->batch == 1 && t == QG_Q4_K) {
        const size_t nb = c->cols / QK, rb = nb * qg_kq_block_bytes(QG_Q4_K);
        float y[2];
        size_t m = m0;
        for (; m + 2 <= m1; m += 2) {
            kq_q4_rows_b1(c->w + m * rb, rb, nb, c->xf, 2, y);
            kq_put_y(c, m, 0, y[0]);
            kq_put_y(c, m + 1, 0, y[1]);
        }
        if (m < m1) {
            kq_q4_rows_b1(c->w + m * rb, rb, nb, c->xf, 1, y);
            kq_put_y(c, m, 0, y[0]);
        }
        return;
    }
#endif
    if (c->batch == 1) kq_gemv_rows_b1(c, m0, m1, t);
    else if (c->batch <= 4) kq_gemv_rows_b234(c, m0, m1, t);
    else kq_gemv_rows_bn(c, m0, m1, t);
}

static void kq_gemv_range(void *vc, size_t m0, size_t m1)
{
    const kq_gemv_ctx *c = vc;
    switch (c->t) {
    case QG_Q4_K: kq_gemv_rows_t(c, m0, m1, QG_Q4_K); break;
    case QG_Q5_K: kq_gemv_rows_t(c, m0, m1, QG_Q5_K); break;
    case QG_Q6_K: kq_gemv_rows_t(c, m0, m1, QG_Q6_K); break;
    default: kq_gemv_rows_t(c, m0, m1, QG_Q8_K); break;
    }
}

static inline int kq_gemv(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                          float *y_f32, uint16_t *y_f16)
{
    int rc = qg_kq_check_gemv(t, w, nbytes, rows, cols, x, batch, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    if (cols > SIZE_MAX / sizeof(float) / batch) return QG_ERR_alloc_failed;

    /* The activations as float32, once (exact); cols is a multiple of 256, so every block is 32-byte
     * aligned in this buffer. */
    const size_t n = batch * cols;
    float *xf = aligned_alloc(32, n * sizeof(float));
    if (xf == NULL) return QG_ERR_alloc_failed;
    kq_convert_x(x, n, xf);

    kq_gemv_ctx c = {t, w, rows, cols, batch, xf, y_f32, y_f16};
    /* At least about 2^18 weight x column products per thread, so small calls stay on one thread. */
    const size_t per_row = cols * batch, min_rows = ((size_t)1 << 18) / per_row + 1;
    qg_parallel_for(rows, 1, min_rows, kq_gemv_range, &c);
    free(xf);
    return QG_ERR_ok;
}

/* ---- GEMV with Q8_K activations (qgold/kquants_q8k_gemv.h) ---------------------------------------- */

/* Each activation vector is quantized once by the reference quantizer (so a Q8_K block's bsums are the
 * sums of its codes), then output (m, b) is the dot of weight row m with Q8_K row b in the dot float
 * order above: the same code whatever the batch size, the row split or the thread count, so outputs
 * are batch- and thread-count invariant. An ISA file defining KQ_HAVE_Q8K_QUANTIZE supplies
 * kq_q8k_quantize_block(x, xf, blk), 256 fp16 values to the reference quantizer's Q8_K bytes. Q6_K may take its -32 correction from the bsums here (an ISA
 * file defining KQ_HAVE_DOT_Q6_BSUMS supplies kq_dot_q6_bsums(a, wb, yb)): exact because these bsums
 * are the code sums by construction, which the dot entry point cannot assume of its input. */
#ifndef KQ_HAVE_DOT_Q6_BSUMS
QG_INLINE kq_dsum kq_dot_q6_bsums(kq_dsum a, const uint8_t *wb, const uint8_t *yb) { return kq_dot_q6(a, wb, yb, NULL); }
#endif

typedef struct {
    qg_ktype t;
    const uint8_t *w, *q8;
    size_t rows, cols, batch;
    const uint16_t *x;
    float *xf;
    float *y32;
    uint16_t *y16;
} kq_q8g_ctx;

/* Activation blocks [g0, g1) of all columns: block g is elements 256g .. 256g+255 of x (column g / nb),
 * fp16 -> float32 -> Q8_K by the reference quantizer. A Q8_K block depends on its own 256 values only,
 * so quantizing block by block gives the bytes of quantizing whole rows. */
static void kq_q8g_quantize_range(void *vc, size_t g0, size_t g1)
{
    const kq_q8g_ctx *c = vc;
#ifdef KQ_HAVE_Q8K_QUANTIZE /* the ISA's block quantizer, the reference's bytes */
    for (size_t g = g0; g < g1; g++) kq_q8k_quantize_block(c->x + g * QK, c->xf + g * QK, (uint8_t *)c->q8 + g * QG_Q8K_BYTES);
#else
    (void)qg_kq_q8k_activations(c->x + g0 * QK, g1 - g0, QK, c->xf + g0 * QK, (uint8_t *)c->q8 + g0 * QG_Q8K_BYTES);
#endif
}

/* One row's dot against one Q8_K row in the dot float order. The next Q8_K block is prefetched: a long
 * row's Q8_K vector (16 KB at K = 14336) does not stay in L1 while the weights stream through, and its
 * blocks come back from L2 (measured 5-10% at 4096x14336, one core). An ISA file defining
 * KQ_HAVE_Q8G_ROW supplies kq_q8g_row(t, wrow, q8row, nb) with the same float order and the same bits. */
#ifndef KQ_HAVE_Q8G_ROW
QG_INLINE float kq_q8g_row(const qg_ktype t, const uint8_t *wrow, const uint8_t *q8row, size_t nb)
{
    const size_t bsz = t == QG_Q6_K ? QG_Q6K_BYTES : (t == QG_Q5_K ? QG_Q5K_BYTES : QG_Q4K_BYTES);
    kq_dsum a = kq_dsum_zero();
    for (size_t i = 0; i < nb; i++) {
        const uint8_t *wb = wrow + i * bsz, *yb = q8row + i * QG_Q8K_BYTES;
        if (i + 1 < nb)
            for (size_t l = 0; l < QG_Q8K_BYTES; l += 64) __builtin_prefetch(yb + QG_Q8K_BYTES + l, 0, 3);
        if (t == QG_Q6_K) a = kq_dot_q6_bsums(a, wb, yb);
        else a = kq_dot_q45(a, wb, yb, t == QG_Q5_K, NULL, NULL);
    }
    return kq_dsum_result(a);
}
#endif

/* qg_kq_q8k_quantize_<isa>: n fp16 activations (n a positive multiple of 256) to n / 256 Q8_K blocks,
 * the bytes of qg_kq_q8k_activations; the GEMV's own quantizer, exposed so tests compare its bytes. */
static inline int kq_q8k_quantize(const uint16_t *x, size_t n, uint8_t *q8)
{
    if (x == NULL || q8 == NULL) return QG_ERR_argument_invalid;
    if (n == 0 || n % QK != 0) return QG_ERR_kq_cols_not_multiple;
    _Alignas(32) float xf[QK];
    for (size_t g = 0; g < n / QK; g++) {
#ifdef KQ_HAVE_Q8K_QUANTIZE
        kq_q8k_quantize_block(x + g * QK, xf, q8 + g * QG_Q8K_BYTES);
#else
        (void)qg_kq_q8k_activations(x + g * QK, 1, QK, xf, q8 + g * QG_Q8K_BYTES);
#endif
    }
    return QG_ERR_ok;
}

QG_INLINE void kq_q8g_rows_t(const kq_q8g_ctx *c, size_t m0, size_t m1, const qg_ktype t)
{
    const size_t nb = c->cols / QK, rb = nb * qg_kq_block_bytes(t), qb = nb * QG_Q8K_BYTES;
    for (size_t m = m0; m < m1; m++) {
        for (size_t b = 0; b < c->batch; b++) {
            const float y = kq_q8g_row(t, c->w + m * rb, c->q8 + b * qb, nb); /* a NaN already canonical (the dot's result) */
            if (c->y32 != NULL) c->y32[b * c->rows + m] = y;
            if (c->y16 != NULL) c->y16[b * c->rows + m] = kq_to_f16(y);
        }
    }
}

static void kq_q8g_range(void *vc, size_t m0, size_t m1)
{
    const kq_q8g_ctx *c = vc;
    if (c->t == QG_Q4_K) kq_q8g_rows_t(c, m0, m1, QG_Q4_K);
    else if (c->t == QG_Q5_K) kq_q8g_rows_t(c, m0, m1, QG_Q5_K);
    else kq_q8g_rows_t(c, m0, m1, QG_Q6_K);
}

static inline int kq_gemv_q8k(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                              float *y_f32, uint16_t *y_f16)
{
    int rc = qg_kq_check_gemv(t, w, nbytes, rows, cols, x, batch, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    if (t == QG_Q8_K) return QG_ERR_unsupported;
    if (cols > SIZE_MAX / sizeof(float) / batch) return QG_ERR_alloc_failed;
    float *xf = malloc(batch * cols * sizeof(float));
    uint8_t *q8 = malloc(batch * (cols / QK) * QG_Q8K_BYTES);
    if (xf == NULL || q8 == NULL) {
        free(xf);
        free(q8);
        return QG_ERR_alloc_failed;
    }
    kq_q8g_ctx c = {t, w, q8, rows, cols, batch, x, xf, y_f32, y_f16};
    qg_parallel_for(batch * (cols / QK), 1, 16, kq_q8g_quantize_range, &c);
    /* At least about 2^18 weight x column products per thread, so small calls stay on one thread. */
    const size_t min_rows = ((size_t)1 << 18) / (cols * batch) + 1;
    qg_parallel_for(rows, 1, min_rows, kq_q8g_range, &c);
    free(xf);
    free(q8);
    return QG_ERR_ok;
}

#endif
