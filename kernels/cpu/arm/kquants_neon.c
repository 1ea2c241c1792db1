/* GGUF K-quants Q4_K, Q5_K, Q6_K, Q8_K with aarch64 Advanced SIMD (baseline, no extra -m flags; compiled
 * with -ffp-contract=off, so every float operation below is the one written). Contracts and validation:
 * qgold/kquants.h, the same checks in the same order as the reference, before any output is touched.
 * The structure and the float orders are those of the AVX2 file (kernels/cpu/x86/kquants_avx2.c), with
 * an 8-lane vector held as two float32x4_t (lanes 0-3, 4-7), so on finite data the GEMV outputs and dot
 * results of both backends are the same bits.
 *
 * Blocks are bytes: every load is a byte-element load (vld1_u8/vld1q_u8) or memcpy, so any alignment
 * works (Q6_K rows are only 2-byte aligned).
 *
 * Decoding a block ("prep"): codes as int8 in element order (Q4_K is unpacked straight from qs, Q8_K's
 * qs used in place), the exact factors a = D*sc (per 32 elements for Q4_K/Q5_K, per 16 for Q6_K, a = d
 * for Q8_K) and for Q4_K/Q5_K b = Dm*m. The weight is
 *   Q4_K/Q5_K  w = vfmaq(-b, a, q), i.e. a*q - b rounded once (a*q is exact, -b an exact negation);
 *              (a*q) - b as two operations when d or dmin is inf/NaN, the reference's own sequence, so
 *              the NaN that comes out is the same;
 *   Q6_K/Q8_K  w = a*q.
 * Dequantization is therefore bit-identical to the reference, inf/NaN included.
 *
 * GEMV float order, for every batch size, row grouping and thread count: for output (m, b) two 8-lane
 * accumulators A0, A1 start at +0; for each block of row m, for vector v = 0..31 (elements 8v..8v+7)
 *   A[(v >> 2) & 1] = fma(w[8v..8v+7], x_b[8v..8v+7], A[(v >> 2) & 1]);
 * then s = A0 + A1, t_l = s_l + s_{l+4}, y = (t_0 + t_2) + (t_1 + t_3). fp16 output: y rounded once
 * (FCVT, round-to-nearest-even under the default FPCR). A NaN result is written as 0x7FC00000 (fp16
 * 0x7E00): which NaN a float sum ends in depends on operand order, so only a canonical NaN keeps the
 * results bitwise batch- and thread-invariant.
 *
 * Dot: exact int32 S, M per block (vmull_s8 + vpadalq_s16: products |q * q8| <= 32 * 128 fit int16);
 * float result, per block in order: sumS = fma(D*dy, (float)S, sumS), for Q4_K/Q5_K
 * sumM = fma(Dm*dy, (float)M, sumM); result = sumS - sumM.
 */
#include "qgold/errors.h"
#include "qgold/kernels_kquants.h"

#include "../threads.h"

#include <arm_neon.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define QG_INLINE static inline __attribute__((always_inline))

enum { QK = QG_QK_K, Q4K_QS = 16, Q5K_QH = 16, Q5K_QS = 48, Q6K_QH = 128, Q6K_SC = 192, Q6K_D = 208, Q8K_QS = 4,
       Q8K_BSUMS = 260, Q8K_BYTES = 292 };

/* ---- validation (the reference's checks, in its order) ------------------------------------------- */

static int known(qg_ktype t) { return (unsigned)t <= (unsigned)QG_Q8_K; }

static int dequant_args(qg_ktype t, const void *blocks, size_t nbytes, size_t rows, size_t cols, const void *y)
{
    if (!known(t)) return QG_ERR_kq_type_unknown;
    if (blocks == NULL || y == NULL) return QG_ERR_argument_invalid;
    return qg_kq_check_shape(t, rows, cols, nbytes);
}

/* ---- small helpers ------------------------------------------------------------------------------- */

typedef struct {
    float32x4_t lo, hi; /* lanes 0-3 and 4-7 of an 8-lane vector */
} f8;

static uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static float f16(uint16_t h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }

static uint16_t to_f16(float f) { return vget_lane_u16(vreinterpret_u16_f16(vcvt_f16_f32(vdupq_n_f32(f))), 0); }

static int as_i8(uint8_t b) { return b < 0x80u ? (int)b : (int)b - 256; }

static void unpack_scales(const uint8_t *q, uint64_t *sc, uint64_t *m)
{
    const uint32_t u0 = ld32(q), u1 = ld32(q + 4), u2 = ld32(q + 8);
    const uint32_t lo6 = 0x3F3F3F3Fu, nib = 0x0F0F0F0Fu, top2 = 0x30303030u;
    *sc = (uint64_t)(u0 & lo6) | ((uint64_t)((u2 & nib) | ((u0 >> 2) & top2)) << 32);
    *m = (uint64_t)(u1 & lo6) | ((uint64_t)(((u2 >> 4) & nib) | ((u1 >> 2) & top2)) << 32);
}

/* d * (float)byte_j for the 8 bytes of v (little-endian order), into out[0..7]. */
static void scale8(float d, uint64_t v, float *out)
{
    const uint16x8_t h = vmovl_u8(vcreate_u8(v));
    const float32x4_t dv = vdupq_n_f32(d);
    vst1q_f32(out, vmulq_f32(dv, vcvtq_f32_u32(vmovl_u16(vget_low_u16(h)))));
    vst1q_f32(out + 4, vmulq_f32(dv, vcvtq_f32_u32(vmovl_high_u16(h))));
}

/* ---- block decoding ------------------------------------------------------------------------------ */

typedef struct {
    int8_t codes[QK];
    float a[16];
    float nb[8]; /* -b = -(Dm*m): exact negation */
    float b[8];
    const uint8_t *q; /* codes, Q4_K's qs, or Q8_K's qs in the block itself */
    int special;
} kq_prep;

QG_INLINE void prep_q45(const uint8_t *blk, kq_prep *p, const int q5)
{
    const uint16_t dh = ld16(blk), mh = ld16(blk + 2);
    p->special = (dh & 0x7C00) == 0x7C00 || (mh & 0x7C00) == 0x7C00;
    uint64_t sc, m;
    unpack_scales(blk + 4, &sc, &m);
    scale8(f16(dh), sc, p->a);
    scale8(f16(mh), m, p->b);
    vst1q_f32(p->nb, vnegq_f32(vld1q_f32(p->b)));
    vst1q_f32(p->nb + 4, vnegq_f32(vld1q_f32(p->b + 4)));
    if (!q5) {
        p->q = blk + Q4K_QS;
        return;
    }
    const uint8x16_t m4 = vdupq_n_u8(0x0F), b4 = vdupq_n_u8(0x10);
    for (int half = 0; half < 2; half++) { /* l = 16 half .. 16 half + 15 */
        uint8x16_t hb = vld1q_u8(blk + Q5K_QH + 16 * half);
        for (int c = 0; c < 4; c++) {
            const uint8x16_t v = vld1q_u8(blk + Q5K_QS + 32 * c + 16 * half);
            /* bit 2c of qh[l] -> bit 4 of element 64c+l, bit 2c+1 -> bit 4 of element 64c+32+l */
            const uint8x16_t lo = vorrq_u8(vandq_u8(v, m4), vandq_u8(vshlq_n_u8(hb, 4), b4));
            const uint8x16_t hi = vorrq_u8(vshrq_n_u8(v, 4), vandq_u8(vshlq_n_u8(hb, 3), b4));
            hb = vshrq_n_u8(hb, 2);
            vst1q_s8(p->codes + 64 * c + 16 * half, vreinterpretq_s8_u8(lo));
            vst1q_s8(p->codes + 64 * c + 32 + 16 * half, vreinterpretq_s8_u8(hi));
        }
    }
    p->q = (const uint8_t *)p->codes;
}

QG_INLINE void prep_q6(const uint8_t *blk, kq_prep *p)
{
    const float32x4_t d = vdupq_n_f32(f16(ld16(blk + Q6K_D)));
    const int16x8_t s0 = vmovl_s8(vreinterpret_s8_u8(vld1_u8(blk + Q6K_SC)));
    const int16x8_t s1 = vmovl_s8(vreinterpret_s8_u8(vld1_u8(blk + Q6K_SC + 8)));
    vst1q_f32(p->a, vmulq_f32(d, vcvtq_f32_s32(vmovl_s16(vget_low_s16(s0)))));
    vst1q_f32(p->a + 4, vmulq_f32(d, vcvtq_f32_s32(vmovl_high_s16(s0))));
    vst1q_f32(p->a + 8, vmulq_f32(d, vcvtq_f32_s32(vmovl_s16(vget_low_s16(s1)))));
    vst1q_f32(p->a + 12, vmulq_f32(d, vcvtq_f32_s32(vmovl_high_s16(s1))));
    const uint8x16_t m4 = vdupq_n_u8(0x0F), k32 = vdupq_n_u8(32);
    for (int h = 0; h < 2; h++) {
        for (int part = 0; part < 2; part++) { /* l = 16 part .. 16 part + 15 */
            const uint8x16_t ql0 = vld1q_u8(blk + 64 * h + 16 * part);
            const uint8x16_t ql1 = vld1q_u8(blk + 64 * h + 32 + 16 * part);
            const uint8x16_t qh = vld1q_u8(blk + Q6K_QH + 32 * h + 16 * part);
            const uint8x16_t t0 = vorrq_u8(vandq_u8(ql0, m4), vshlq_n_u8(vandq_u8(qh, vdupq_n_u8(0x03)), 4));
            const uint8x16_t t1 = vorrq_u8(vandq_u8(ql1, m4), vshlq_n_u8(vandq_u8(qh, vdupq_n_u8(0x0C)), 2));
            const uint8x16_t t2 = vorrq_u8(vshrq_n_u8(ql0, 4), vandq_u8(qh, vdupq_n_u8(0x30)));
            const uint8x16_t t3 = vorrq_u8(vshrq_n_u8(ql1, 4), vshrq_n_u8(vandq_u8(qh, vdupq_n_u8(0xC0)), 2));
            int8_t *o = p->codes + 128 * h + 16 * part;
            vst1q_s8(o, vreinterpretq_s8_u8(vsubq_u8(t0, k32)));
            vst1q_s8(o + 32, vreinterpretq_s8_u8(vsubq_u8(t1, k32)));
            vst1q_s8(o + 64, vreinterpretq_s8_u8(vsubq_u8(t2, k32)));
            vst1q_s8(o + 96, vreinterpretq_s8_u8(vsubq_u8(t3, k32)));
        }
    }
    p->q = (const uint8_t *)p->codes;
    p->special = 0;
}

QG_INLINE void prep_q8(const uint8_t *blk, kq_prep *p)
{
    const uint32_t bits = ld32(blk);
    memcpy(&p->a[0], &bits, 4);
    p->q = blk + Q8K_QS;
    p->special = 0;
}

QG_INLINE void prep(const qg_ktype t, const uint8_t *blk, kq_prep *p)
{
    switch (t) {
    case QG_Q4_K: prep_q45(blk, p, 0); break;
    case QG_Q5_K: prep_q45(blk, p, 1); break;
    case QG_Q6_K: prep_q6(blk, p); break;
    default: prep_q8(blk, p); break;
    }
}

enum { OP_FMS = 0, OP_MS = 1, OP_MUL = 2 };

static inline int scale_shift(qg_ktype t) { return t == QG_Q6_K ? 1 : (t == QG_Q8_K ? 5 : 2); }

/* The 8 codes of vector v as floats (exact). Q4_K: bytes qs[32(v/8) + 8(v%4) ..], low nibbles for
 * v%8 < 4, high ones otherwise; the others: int8 codes[8v ..]. */
QG_INLINE f8 codes8(const kq_prep *p, const int v, const int q4)
{
    f8 r;
    if (q4) {
        uint8x8_t b = vld1_u8(p->q + 32 * (v >> 3) + 8 * (v & 3));
        b = (v & 4) ? vshr_n_u8(b, 4) : vand_u8(b, vdup_n_u8(15));
        const uint16x8_t h = vmovl_u8(b);
        r.lo = vcvtq_f32_u32(vmovl_u16(vget_low_u16(h)));
        r.hi = vcvtq_f32_u32(vmovl_high_u16(h));
    } else {
        const int16x8_t h = vmovl_s8(vreinterpret_s8_u8(vld1_u8(p->q + 8 * v)));
        r.lo = vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));
        r.hi = vcvtq_f32_s32(vmovl_high_s16(h));
    }
    return r;
}

QG_INLINE f8 weights(const kq_prep *p, const int v, const int op, const int sh, const int q4)
{
    const f8 q = codes8(p, v, q4);
    const float32x4_t a = vdupq_n_f32(p->a[v >> sh]);
    f8 w;
    if (op == OP_MUL) {
        w.lo = vmulq_f32(a, q.lo);
        w.hi = vmulq_f32(a, q.hi);
    } else if (op == OP_FMS) {
        const float32x4_t nb = vdupq_n_f32(p->nb[v >> 2]);
        w.lo = vfmaq_f32(nb, a, q.lo);
        w.hi = vfmaq_f32(nb, a, q.hi);
    } else {
        const float32x4_t b = vdupq_n_f32(p->b[v >> 2]);
        w.lo = vsubq_f32(vmulq_f32(a, q.lo), b);
        w.hi = vsubq_f32(vmulq_f32(a, q.hi), b);
    }
    return w;
}

/* ---- dequantization ------------------------------------------------------------------------------ */

typedef struct {
    qg_ktype t;
    const uint8_t *blocks;
    void *y;
    int f16out;
} deq_ctx;

QG_INLINE void deq_block(const kq_prep *p, const int op, const int sh, const int q4, void *y, const int f16out)
{
    for (int v = 0; v < 32; v++) {
        const f8 w = weights(p, v, op, sh, q4);
        if (f16out) {
            uint16_t *o = (uint16_t *)y + 8 * v;
            vst1_u16(o, vreinterpret_u16_f16(vcvt_f16_f32(w.lo)));
            vst1_u16(o + 4, vreinterpret_u16_f16(vcvt_f16_f32(w.hi)));
        } else {
            float *o = (float *)y + 8 * v;
            vst1q_f32(o, w.lo);
            vst1q_f32(o + 4, w.hi);
        }
    }
}

QG_INLINE void deq_range_t(const deq_ctx *c, size_t i0, size_t i1, const qg_ktype t, const int f16out)
{
    const size_t bsz = qg_kq_block_bytes(t), osz = f16out ? sizeof(uint16_t) : sizeof(float);
    const int sh = scale_shift(t), plain = t == QG_Q6_K || t == QG_Q8_K, q4 = t == QG_Q4_K;
    kq_prep p;
    for (size_t i = i0; i < i1; i++) {
        prep(t, c->blocks + i * bsz, &p);
        void *y = (unsigned char *)c->y + i * QK * osz;
        if (plain) deq_block(&p, OP_MUL, sh, 0, y, f16out);
        else if (p.special) deq_block(&p, OP_MS, sh, q4, y, f16out);
        else deq_block(&p, OP_FMS, sh, q4, y, f16out);
    }
}

static void deq_range(void *vc, size_t i0, size_t i1)
{
    const deq_ctx *c = vc;
    switch (c->t) {
    case QG_Q4_K: c->f16out ? deq_range_t(c, i0, i1, QG_Q4_K, 1) : deq_range_t(c, i0, i1, QG_Q4_K, 0); break;
    case QG_Q5_K: c->f16out ? deq_range_t(c, i0, i1, QG_Q5_K, 1) : deq_range_t(c, i0, i1, QG_Q5_K, 0); break;
    case QG_Q6_K: c->f16out ? deq_range_t(c, i0, i1, QG_Q6_K, 1) : deq_range_t(c, i0, i1, QG_Q6_K, 0); break;
    default: c->f16out ? deq_range_t(c, i0, i1, QG_Q8_K, 1) : deq_range_t(c, i0, i1, QG_Q8_K, 0); break;
    }
}

static void dequant(qg_ktype t, const uint8_t *blocks, size_t rows, size_t cols, void *y, int f16out)
{
    deq_ctx c = {t, blocks, y, f16out};
    qg_parallel_for(rows * (cols / QK), 1, 4096, deq_range, &c);
}

int qg_kq_dequant_f32_neon(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y)
{
    int rc = dequant_args(t, blocks, nbytes, rows, cols, y);
    if (rc != QG_ERR_ok) return rc;
    dequant(t, blocks, rows, cols, y, 0);
    return QG_ERR_ok;
}

int qg_kq_dequant_f16_neon(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, uint16_t *y)
{
    int rc = dequant_args(t, blocks, nbytes, rows, cols, y);
    if (rc != QG_ERR_ok) return rc;
    dequant(t, blocks, rows, cols, y, 1);
    return QG_ERR_ok;
}

/* ---- dot with Q8_K ------------------------------------------------------------------------------- */

/* Sum of code * q8 over the 16 elements at `codes` (signed int8 codes). */
static int32_t dot16(const int8_t *codes, const uint8_t *q8)
{
    const int8x16_t c = vld1q_s8(codes), y = vreinterpretq_s8_u8(vld1q_u8(q8));
    int32x4_t acc = vpaddlq_s16(vmull_s8(vget_low_s8(c), vget_low_s8(y)));
    acc = vpadalq_s16(acc, vmull_high_s8(c, y));
    return vaddvq_s32(acc);
}

static void dot_block_q45(const uint8_t *wb, const uint8_t *yb, int q5, int32_t *S, int32_t *M)
{
    kq_prep p;
    prep_q45(wb, &p, q5);
    int8_t q4codes[QK];
    if (!q5) { /* stage Q4_K's nibbles in element order too */
        for (int c = 0; c < 4; c++) {
            for (int half = 0; half < 2; half++) {
                const uint8x16_t v = vld1q_u8(wb + Q4K_QS + 32 * c + 16 * half);
                vst1q_s8(q4codes + 64 * c + 16 * half, vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))));
                vst1q_s8(q4codes + 64 * c + 32 + 16 * half, vreinterpretq_s8_u8(vshrq_n_u8(v, 4)));
            }
        }
    }
    const int8_t *codes = q5 ? p.codes : q4codes;
    uint64_t sc, m;
    unpack_scales(wb + 4, &sc, &m);
    int32_t s = 0, mm = 0;
    for (int j = 0; j < 8; j++) {
        const int32_t sub = dot16(codes + 32 * j, yb + Q8K_QS + 32 * j) + dot16(codes + 32 * j + 16, yb + Q8K_QS + 32 * j + 16);
        s += (int32_t)((sc >> (8 * j)) & 0xFF) * sub;
        const int32_t b2 = (int16_t)ld16(yb + Q8K_BSUMS + 4 * j) + (int16_t)ld16(yb + Q8K_BSUMS + 4 * j + 2);
        mm += (int32_t)((m >> (8 * j)) & 0xFF) * b2;
    }
    *S = s;
    *M = mm;
}

static void dot_block_q6(const uint8_t *wb, const uint8_t *yb, int32_t *S)
{
    kq_prep p;
    prep_q6(wb, &p);
    int32_t s = 0;
    for (int g = 0; g < 16; g++) s += as_i8(wb[Q6K_SC + g]) * dot16(p.codes + 16 * g, yb + Q8K_QS + 16 * g);
    *S = s;
}

int qg_kq_dot_q8k_neon(qg_ktype t, const uint8_t *wrow, const uint8_t *q8row, size_t cols, int32_t *S, int32_t *M, float *result)
{
    if (!known(t)) return QG_ERR_kq_type_unknown;
    if (t == QG_Q8_K) return QG_ERR_unsupported;
    if (wrow == NULL || q8row == NULL || result == NULL) return QG_ERR_argument_invalid;
    const size_t bsz = qg_kq_block_bytes(t);
    int rc = qg_kq_check_shape(t, 1, cols, cols / QK * bsz);
    if (rc != QG_ERR_ok) return rc;

    const size_t nb = cols / QK;
    float sumS = 0.0f, sumM = 0.0f;
    for (size_t i = 0; i < nb; i++) {
        const uint8_t *wb = wrow + i * bsz, *yb = q8row + i * Q8K_BYTES;
        float dy;
        const uint32_t bits = ld32(yb);
        memcpy(&dy, &bits, 4);
        int32_t Si, Mi = 0;
        if (t == QG_Q6_K) {
            dot_block_q6(wb, yb, &Si);
            const float d = f16(ld16(wb + Q6K_D)) * dy;
            sumS = fmaf(d, (float)Si, sumS);
        } else {
            dot_block_q45(wb, yb, t == QG_Q5_K, &Si, &Mi);
            const float d = f16(ld16(wb)) * dy, dm = f16(ld16(wb + 2)) * dy;
            sumS = fmaf(d, (float)Si, sumS);
            sumM = fmaf(dm, (float)Mi, sumM);
        }
        if (S != NULL) S[i] = Si;
        if (M != NULL) M[i] = Mi;
    }
    *result = sumS - sumM;
    return QG_ERR_ok;
}

/* ---- GEMV ---------------------------------------------------------------------------------------- */

enum { MAXG = 4 };

typedef struct {
    qg_ktype t;
    const uint8_t *w;
    size_t rows, cols, batch;
    const float *xf;
    float *y32;
    uint16_t *y16;
} gemv_ctx;

QG_INLINE void gemv_block(const kq_prep *p, const int R, const int G, const int op, const int sh, const int q4, const float *const *xb,
                          f8 acc[2][MAXG][2])
{
    for (int v = 0; v < 32; v++) {
        const int k = (v >> 2) & 1;
        f8 xv[MAXG];
        for (int g = 0; g < G; g++) {
            xv[g].lo = vld1q_f32(xb[g] + 8 * v);
            xv[g].hi = vld1q_f32(xb[g] + 8 * v + 4);
        }
        for (int r = 0; r < R; r++) {
            const f8 w = weights(p + r, v, op, sh, q4);
            for (int g = 0; g < G; g++) {
                acc[r][g][k].lo = vfmaq_f32(acc[r][g][k].lo, w.lo, xv[g].lo);
                acc[r][g][k].hi = vfmaq_f32(acc[r][g][k].hi, w.hi, xv[g].hi);
            }
        }
    }
}

static float hsum8(f8 a0, f8 a1)
{
    const float32x4_t t = vaddq_f32(vaddq_f32(a0.lo, a1.lo), vaddq_f32(a0.hi, a1.hi)); /* t_l = s_l + s_{l+4} */
    const float32x2_t u = vadd_f32(vget_low_f32(t), vget_high_f32(t));                /* (t0 + t2, t1 + t3) */
    return vget_lane_f32(u, 0) + vget_lane_f32(u, 1);
}

static void put_y(const gemv_ctx *c, size_t m, size_t b, float y)
{
    if (y != y) { /* the canonical quiet NaN: see the top of the file */
        const uint32_t qnan = 0x7FC00000u;
        memcpy(&y, &qnan, 4);
    }
    if (c->y32 != NULL) c->y32[b * c->rows + m] = y;
    if (c->y16 != NULL) c->y16[b * c->rows + m] = to_f16(y);
}

static f8 f8_zero(void)
{
    f8 z = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    return z;
}

#define QG_GEMV_BLOCK(R, G)                                                                 \
    do {                                                                                    \
        if (plain) gemv_block(p, R, G, OP_MUL, sh, 0, xb, acc);                             \
        else if (special) gemv_block(p, R, G, OP_MS, sh, q4, xb, acc);                      \
        else gemv_block(p, R, G, OP_FMS, sh, q4, xb, acc);                                  \
    } while (0)

/* batch 1: rows in pairs, a last odd row alone; blocks prepared one ahead. */
QG_INLINE void gemv_rows_b1(const gemv_ctx *c, size_t m0, size_t m1, const qg_ktype t)
{
    const size_t nb = c->cols / QK, bsz = qg_kq_block_bytes(t), rb = nb * bsz;
    const int sh = scale_shift(t), plain = t == QG_Q6_K || t == QG_Q8_K, q4 = t == QG_Q4_K;
    kq_prep pp[2][2];
    size_t m = m0;
    for (; m + 2 <= m1; m += 2) {
        f8 acc[2][MAXG][2];
        for (int r = 0; r < 2; r++) acc[r][0][0] = acc[r][0][1] = f8_zero();
        const uint8_t *w0 = c->w + m * rb;
        prep(t, w0, &pp[0][0]);
        prep(t, w0 + rb, &pp[0][1]);
        for (size_t i = 0; i < nb; i++) {
            const kq_prep *p = pp[i & 1];
            if (i + 1 < nb) {
                prep(t, w0 + (i + 1) * bsz, &pp[(i + 1) & 1][0]);
                prep(t, w0 + rb + (i + 1) * bsz, &pp[(i + 1) & 1][1]);
            }
            const float *xb[MAXG] = {c->xf + i * QK};
            const int special = p[0].special | p[1].special;
            QG_GEMV_BLOCK(2, 1);
        }
        put_y(c, m, 0, hsum8(acc[0][0][0], acc[0][0][1]));
        put_y(c, m + 1, 0, hsum8(acc[1][0][0], acc[1][0][1]));
    }
    if (m < m1) {
        f8 acc[2][MAXG][2];
        acc[0][0][0] = acc[0][0][1] = f8_zero();
        const uint8_t *w0 = c->w + m * rb;
        prep(t, w0, &pp[0][0]);
        for (size_t i = 0; i < nb; i++) {
            const kq_prep *p = pp[i & 1];
            if (i + 1 < nb) prep(t, w0 + (i + 1) * bsz, &pp[(i + 1) & 1][0]);
            const float *xb[MAXG] = {c->xf + i * QK};
            const int special = p[0].special;
            QG_GEMV_BLOCK(1, 1);
        }
        put_y(c, m, 0, hsum8(acc[0][0][0], acc[0][0][1]));
    }
}

/* batch 2 to 4: one row at a time, all columns in registers. */
QG_INLINE void gemv_rows_b234(const gemv_ctx *c, size_t m0, size_t m1, const qg_ktype t)
{
    const size_t nb = c->cols / QK, bsz = qg_kq_block_bytes(t), rb = nb * bsz;
    const int sh = scale_shift(t), plain = t == QG_Q6_K || t == QG_Q8_K, q4 = t == QG_Q4_K;
    kq_prep pp[2];
    for (size_t m = m0; m < m1; m++) {
        f8 acc[2][MAXG][2];
        for (int g = 0; g < MAXG; g++) acc[0][g][0] = acc[0][g][1] = f8_zero();
        const uint8_t *w0 = c->w + m * rb;
        prep(t, w0, &pp[0]);
        for (size_t i = 0; i < nb; i++) {
            const kq_prep *p = &pp[i & 1];
            if (i + 1 < nb) prep(t, w0 + (i + 1) * bsz, &pp[(i + 1) & 1]);
            const float *xb[MAXG] = {c->xf + i * QK, c->xf + c->cols + i * QK, c->xf + 2 * c->cols + i * QK,
                                     c->xf + 3 * c->cols + i * QK};
            const int special = p[0].special;
            if (c->batch == 2) QG_GEMV_BLOCK(1, 2);
            else if (c->batch == 3) QG_GEMV_BLOCK(1, 3);
            else QG_GEMV_BLOCK(1, 4);
        }
        for (size_t b = 0; b < c->batch; b++) put_y(c, m, b, hsum8(acc[0][b][0], acc[0][b][1]));
    }
}

/* The 32 weight vectors of a prepared block, stored in element order. */
QG_INLINE void weights_to(const kq_prep *p, const int op, const int sh, const int q4, float *wv)
{
    for (int v = 0; v < 32; v++) {
        const f8 w = weights(p, v, op, sh, q4);
        vst1q_f32(wv + 8 * v, w.lo);
        vst1q_f32(wv + 8 * v + 4, w.hi);
    }
}

/* One block of R rows (weights dequantized in wv[r]) against columns b0 .. b0+G-1, accumulators loaded
 * from accm and stored back. */
QG_INLINE void gemv_block_buf(const float *const *wv, const int R, const int G, const float *xf, size_t cols, size_t b0,
                              f8 accm[2][QG_KQ_MAX_BATCH][2])
{
    f8 acc[2][MAXG][2];
    const float *xb[MAXG];
    for (int g = 0; g < G; g++) {
        xb[g] = xf + (b0 + (size_t)g) * cols;
        for (int r = 0; r < R; r++) {
            acc[r][g][0] = accm[r][b0 + (size_t)g][0];
            acc[r][g][1] = accm[r][b0 + (size_t)g][1];
        }
    }
    for (int c = 0; c < 4; c++) {
        for (int j = 0; j < 8; j++) { /* A0 and A1 vectors alternate; each sees increasing v */
            const int k = j & 1, v = 8 * c + (j >> 1) + 4 * k;
            f8 w[2];
            for (int r = 0; r < R; r++) {
                w[r].lo = vld1q_f32(wv[r] + 8 * v);
                w[r].hi = vld1q_f32(wv[r] + 8 * v + 4);
            }
            for (int g = 0; g < G; g++) {
                const float32x4_t xlo = vld1q_f32(xb[g] + 8 * v), xhi = vld1q_f32(xb[g] + 8 * v + 4);
                for (int r = 0; r < R; r++) {
                    acc[r][g][k].lo = vfmaq_f32(acc[r][g][k].lo, w[r].lo, xlo);
                    acc[r][g][k].hi = vfmaq_f32(acc[r][g][k].hi, w[r].hi, xhi);
                }
            }
        }
    }
    for (int g = 0; g < G; g++) {
        for (int r = 0; r < R; r++) {
            accm[r][b0 + (size_t)g][0] = acc[r][g][0];
            accm[r][b0 + (size_t)g][1] = acc[r][g][1];
        }
    }
}

/* batch 5..16: rows in pairs (a last odd row alone), each block dequantized once into a float32
 * buffer, then the columns in pairs over both rows. */
QG_INLINE void gemv_rows_bn(const gemv_ctx *c, size_t m0, size_t m1, const qg_ktype t)
{
    const size_t nb = c->cols / QK, bsz = qg_kq_block_bytes(t), rb = nb * bsz, B = c->batch;
    const int sh = scale_shift(t), plain = t == QG_Q6_K || t == QG_Q8_K, q4 = t == QG_Q4_K;
    const size_t ngroups = (B + 1) / 2;
    kq_prep p;
    float wbuf[2][QK];
    const float *wv[2] = {wbuf[0], wbuf[1]};
    f8 accm[2][QG_KQ_MAX_BATCH][2];
    for (size_t m = m0; m < m1; m += 2) {
        const size_t R = m + 2 <= m1 ? 2 : 1;
        for (size_t r = 0; r < R; r++)
            for (size_t b = 0; b < B; b++) accm[r][b][0] = accm[r][b][1] = f8_zero();
        for (size_t i = 0; i < nb; i++) {
            for (size_t r = 0; r < R; r++) {
                prep(t, c->w + (m + r) * rb + i * bsz, &p);
                if (plain) weights_to(&p, OP_MUL, sh, 0, wbuf[r]);
                else if (p.special) weights_to(&p, OP_MS, sh, q4, wbuf[r]);
                else weights_to(&p, OP_FMS, sh, q4, wbuf[r]);
            }
            size_t b0 = 0;
            const float *xi = c->xf + i * QK;
            for (size_t gi = 0; gi < ngroups; gi++) {
                const size_t G = B / ngroups + (gi < B % ngroups);
                if (R == 2) {
                    if (G == 1) gemv_block_buf(wv, 2, 1, xi, c->cols, b0, accm);
                    else gemv_block_buf(wv, 2, 2, xi, c->cols, b0, accm);
                } else {
                    if (G == 1) gemv_block_buf(wv, 1, 1, xi, c->cols, b0, accm);
                    else gemv_block_buf(wv, 1, 2, xi, c->cols, b0, accm);
                }
                b0 += G;
            }
        }
        for (size_t r = 0; r < R; r++)
            for (size_t b = 0; b < B; b++) put_y(c, m + r, b, hsum8(accm[r][b][0], accm[r][b][1]));
    }
}

QG_INLINE void gemv_rows_t(const gemv_ctx *c, size_t m0, size_t m1, const qg_ktype t)
{
    if (c->batch == 1) gemv_rows_b1(c, m0, m1, t);
    else if (c->batch <= 4) gemv_rows_b234(c, m0, m1, t);
    else gemv_rows_bn(c, m0, m1, t);
}

static void gemv_range(void *vc, size_t m0, size_t m1)
{
    const gemv_ctx *c = vc;
    switch (c->t) {
    case QG_Q4_K: gemv_rows_t(c, m0, m1, QG_Q4_K); break;
    case QG_Q5_K: gemv_rows_t(c, m0, m1, QG_Q5_K); break;
    case QG_Q6_K: gemv_rows_t(c, m0, m1, QG_Q6_K); break;
    default: gemv_rows_t(c, m0, m1, QG_Q8_K); break;
    }
}

int qg_kq_gemv_neon(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                    float *y_f32, uint16_t *y_f16)
{
    int rc = qg_kq_check_gemv(t, w, nbytes, rows, cols, x, batch, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    if (cols > SIZE_MAX / sizeof(float) / batch) return QG_ERR_alloc_failed;

    const size_t n = batch * cols;
    float *xf = malloc(n * sizeof(float));
    if (xf == NULL) return QG_ERR_alloc_failed;
    for (size_t i = 0; i < n; i += 4) vst1q_f32(xf + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));

    gemv_ctx c = {t, w, rows, cols, batch, xf, y_f32, y_f16};
    const size_t per_row = cols * batch, min_rows = ((size_t)1 << 18) / per_row + 1;
    qg_parallel_for(rows, 1, min_rows, gemv_range, &c);
    free(xf);
    return QG_ERR_ok;
}
