/* GGUF K-quants Q4_K, Q5_K, Q6_K, Q8_K with aarch64 Advanced SIMD: the vector primitives of the K-quant
 * kernels (qgold/kernels_kquants.h); the argument checks, the drivers, the thread split, the float orders
 * of GEMV and dot and the output writes are shared with the AVX2 file (../kquants_rows.h), so on finite
 * data the GEMV outputs and dot results of both backends are the same bits. Baseline, no extra -m flags;
 * compiled with -ffp-contract=off, so every float operation below is the one written. An 8-lane vector
 * is held as two float32x4_t (lanes 0-3, 4-7).
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
 * Dequantization is therefore bit-identical to the reference, inf/NaN included. fp16 outputs: FCVT,
 * round-to-nearest-even under the default FPCR.
 *
 * Dot: exact int32 S, M per block (vmull_s8 + vpadalq_s16: products |q * q8| <= 32 * 128 fit int16).
 */
#include "../kquants_blocks.h"

#include <arm_neon.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ------------------------------------------------------------------------------- */

typedef struct {
    float32x4_t lo, hi; /* lanes 0-3 and 4-7 of an 8-lane vector (element 8v + l in lane l) */
} kq_v8;

static float kq_f16(uint16_t h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }

static uint16_t kq_to_f16(float f) { return vget_lane_u16(vreinterpret_u16_f16(vcvt_f16_f32(vdupq_n_f32(f))), 0); }

static int as_i8(uint8_t b) { return b < 0x80u ? (int)b : (int)b - 256; }

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

QG_INLINE void kq_prep_q45(const uint8_t *blk, kq_prep *p, const int q5)
{
    const uint16_t dh = kq_ld16(blk + QG_Q4K_D), mh = kq_ld16(blk + QG_Q4K_DMIN);
    p->special = (dh & 0x7C00) == 0x7C00 || (mh & 0x7C00) == 0x7C00;
    uint64_t sc, m;
    kq_unpack_scales(blk + QG_Q4K_SCALES, &sc, &m);
    scale8(kq_f16(dh), sc, p->a);
    scale8(kq_f16(mh), m, p->b);
    vst1q_f32(p->nb, vnegq_f32(vld1q_f32(p->b)));
    vst1q_f32(p->nb + 4, vnegq_f32(vld1q_f32(p->b + 4)));
    if (!q5) {
        p->q = blk + QG_Q4K_QS;
        return;
    }
    const uint8x16_t m4 = vdupq_n_u8(0x0F), b4 = vdupq_n_u8(0x10);
    for (int half = 0; half < 2; half++) { /* l = 16 half .. 16 half + 15 */
        uint8x16_t hb = vld1q_u8(blk + QG_Q5K_QH + 16 * half);
        for (int c = 0; c < 4; c++) {
            const uint8x16_t v = vld1q_u8(blk + QG_Q5K_QS + 32 * c + 16 * half);
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

QG_INLINE void kq_prep_q6(const uint8_t *blk, kq_prep *p)
{
    const float32x4_t d = vdupq_n_f32(kq_f16(kq_ld16(blk + QG_Q6K_D)));
    const int16x8_t s0 = vmovl_s8(vreinterpret_s8_u8(vld1_u8(blk + QG_Q6K_SCALES)));
    const int16x8_t s1 = vmovl_s8(vreinterpret_s8_u8(vld1_u8(blk + QG_Q6K_SCALES + 8)));
    vst1q_f32(p->a, vmulq_f32(d, vcvtq_f32_s32(vmovl_s16(vget_low_s16(s0)))));
    vst1q_f32(p->a + 4, vmulq_f32(d, vcvtq_f32_s32(vmovl_high_s16(s0))));
    vst1q_f32(p->a + 8, vmulq_f32(d, vcvtq_f32_s32(vmovl_s16(vget_low_s16(s1)))));
    vst1q_f32(p->a + 12, vmulq_f32(d, vcvtq_f32_s32(vmovl_high_s16(s1))));
    const uint8x16_t m4 = vdupq_n_u8(0x0F), k32 = vdupq_n_u8(32);
    for (int h = 0; h < 2; h++) {
        for (int part = 0; part < 2; part++) { /* l = 16 part .. 16 part + 15 */
            const uint8x16_t ql0 = vld1q_u8(blk + QG_Q6K_QL + 64 * h + 16 * part);
            const uint8x16_t ql1 = vld1q_u8(blk + QG_Q6K_QL + 64 * h + 32 + 16 * part);
            const uint8x16_t qh = vld1q_u8(blk + QG_Q6K_QH + 32 * h + 16 * part);
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

QG_INLINE void kq_prep_q8(const uint8_t *blk, kq_prep *p)
{
    const uint32_t bits = kq_ld32(blk + QG_Q8K_D);
    memcpy(&p->a[0], &bits, 4);
    p->q = blk + QG_Q8K_QS;
    p->special = 0;
}

/* The 8 codes of vector v as floats (exact). Q4_K: bytes qs[32(v/8) + 8(v%4) ..], low nibbles for
 * v%8 < 4, high ones otherwise; the others: int8 codes[8v ..]. */
QG_INLINE kq_v8 codes8(const kq_prep *p, const int v, const int q4)
{
    kq_v8 r;
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

QG_INLINE kq_v8 weights(const kq_prep *p, const int v, const int op, const int sh, const int q4)
{
    const kq_v8 q = codes8(p, v, q4);
    const float32x4_t a = vdupq_n_f32(p->a[v >> sh]);
    kq_v8 w;
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

QG_INLINE void kq_deq_block(const kq_prep *p, const int op, const int sh, const int q4, void *y, const int f16out)
{
    for (int v = 0; v < 32; v++) {
        const kq_v8 w = weights(p, v, op, sh, q4);
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

/* ---- dot with Q8_K ------------------------------------------------------------------------------- */

/* Sum of code * q8 over the 16 elements at `codes` (signed int8 codes). */
static int32_t dot16(const int8_t *codes, const uint8_t *q8)
{
    const int8x16_t c = vld1q_s8(codes), y = vreinterpretq_s8_u8(vld1q_u8(q8));
    int32x4_t acc = vpaddlq_s16(vmull_s8(vget_low_s8(c), vget_low_s8(y)));
    acc = vpadalq_s16(acc, vmull_high_s8(c, y));
    return vaddvq_s32(acc);
}

static void kq_dot_block_q45(const uint8_t *wb, const uint8_t *yb, int q5, int32_t *S, int32_t *M)
{
    kq_prep p;
    kq_prep_q45(wb, &p, q5);
    int8_t q4codes[QK];
    if (!q5) { /* stage Q4_K's nibbles in element order too */
        for (int c = 0; c < 4; c++) {
            for (int half = 0; half < 2; half++) {
                const uint8x16_t v = vld1q_u8(wb + QG_Q4K_QS + 32 * c + 16 * half);
                vst1q_s8(q4codes + 64 * c + 16 * half, vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))));
                vst1q_s8(q4codes + 64 * c + 32 + 16 * half, vreinterpretq_s8_u8(vshrq_n_u8(v, 4)));
            }
        }
    }
    const int8_t *codes = q5 ? p.codes : q4codes;
    uint64_t sc, m;
    kq_unpack_scales(wb + QG_Q4K_SCALES, &sc, &m);
    int32_t s = 0, mm = 0;
    for (int j = 0; j < 8; j++) {
        const int32_t sub = dot16(codes + 32 * j, yb + QG_Q8K_QS + 32 * j) + dot16(codes + 32 * j + 16, yb + QG_Q8K_QS + 32 * j + 16);
        s += (int32_t)((sc >> (8 * j)) & 0xFF) * sub;
        const int32_t b2 = (int16_t)kq_ld16(yb + QG_Q8K_BSUMS + 4 * j) + (int16_t)kq_ld16(yb + QG_Q8K_BSUMS + 4 * j + 2);
        mm += (int32_t)((m >> (8 * j)) & 0xFF) * b2;
    }
    *S = s;
    *M = mm;
}

static void kq_dot_block_q6(const uint8_t *wb, const uint8_t *yb, int32_t *S)
{
    kq_prep p;
    kq_prep_q6(wb, &p);
    int32_t s = 0;
    for (int g = 0; g < 16; g++) s += as_i8(wb[QG_Q6K_SCALES + g]) * dot16(p.codes + 16 * g, yb + QG_Q8K_QS + 16 * g);
    *S = s;
}

/* ---- GEMV ---------------------------------------------------------------------------------------- */

QG_INLINE void kq_gemv_block(const kq_prep *p, const int R, const int G, const int op, const int sh, const int q4,
                             const float *const *xb, kq_v8 acc[2][MAXG][2])
{
    for (int v = 0; v < 32; v++) {
        const int k = (v >> 2) & 1;
        kq_v8 xv[MAXG];
        for (int g = 0; g < G; g++) {
            xv[g].lo = vld1q_f32(xb[g] + 8 * v);
            xv[g].hi = vld1q_f32(xb[g] + 8 * v + 4);
        }
        for (int r = 0; r < R; r++) {
            const kq_v8 w = weights(p + r, v, op, sh, q4);
            for (int g = 0; g < G; g++) {
                acc[r][g][k].lo = vfmaq_f32(acc[r][g][k].lo, w.lo, xv[g].lo);
                acc[r][g][k].hi = vfmaq_f32(acc[r][g][k].hi, w.hi, xv[g].hi);
            }
        }
    }
}

static float kq_hsum(kq_v8 a0, kq_v8 a1)
{
    const float32x4_t t = vaddq_f32(vaddq_f32(a0.lo, a1.lo), vaddq_f32(a0.hi, a1.hi)); /* t_l = s_l + s_{l+4} */
    const float32x2_t u = vadd_f32(vget_low_f32(t), vget_high_f32(t));                /* (t0 + t2, t1 + t3) */
    return vget_lane_f32(u, 0) + vget_lane_f32(u, 1);
}

QG_INLINE kq_v8 kq_v8_zero(void)
{
    kq_v8 z = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    return z;
}

/* The 32 weight vectors of a prepared block, stored in element order. */
QG_INLINE void kq_weights_to(const kq_prep *p, const int op, const int sh, const int q4, float *wv)
{
    for (int v = 0; v < 32; v++) {
        const kq_v8 w = weights(p, v, op, sh, q4);
        vst1q_f32(wv + 8 * v, w.lo);
        vst1q_f32(wv + 8 * v + 4, w.hi);
    }
}

/* One block of R rows (weights dequantized in wv[r]) against columns b0 .. b0+G-1, accumulators loaded
 * from accm and stored back. */
QG_INLINE void kq_gemv_block_buf(const float *const *wv, const int R, const int G, const float *xf, size_t cols, size_t b0,
                                 kq_v8 accm[2][QG_KQ_MAX_BATCH][2])
{
    kq_v8 acc[2][MAXG][2];
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
            kq_v8 w[2];
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

QG_INLINE float kq_fma(float a, float b, float c) { return fmaf(a, b, c); }

/* n fp16 activations (n a multiple of 256) to float32, exact. */
static void kq_convert_x(const uint16_t *x, size_t n, float *xf)
{
    for (size_t i = 0; i < n; i += 4) vst1q_f32(xf + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));
}

#include "../kquants_rows.h"

int qg_kq_dequant_f32_neon(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y)
{
    return kq_dequant(t, blocks, nbytes, rows, cols, y, 0);
}

int qg_kq_dequant_f16_neon(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, uint16_t *y)
{
    return kq_dequant(t, blocks, nbytes, rows, cols, y, 1);
}

int qg_kq_dot_q8k_neon(qg_ktype t, const uint8_t *wrow, const uint8_t *q8row, size_t cols, int32_t *S, int32_t *M, float *result)
{
    return kq_dot_q8k(t, wrow, q8row, cols, S, M, result);
}

int qg_kq_gemv_neon(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                    float *y_f32, uint16_t *y_f16)
{
    return kq_gemv(t, w, nbytes, rows, cols, x, batch, y_f32, y_f16);
}

int qg_kq_gemv_q8k_neon(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                        float *y_f32, uint16_t *y_f16)
{
    return kq_gemv_q8k(t, w, nbytes, rows, cols, x, batch, y_f32, y_f16);
}

int qg_kq_q8k_quantize_neon(const uint16_t *x, size_t n, uint8_t *q8) { return kq_q8k_quantize(x, n, q8); }
