/* SpQR GEMV (dense 3-bit tiles + fp16 outliers + act-order permutation) with aarch64 Advanced SIMD: the
 * vector primitives of the SpQR kernel (qgold/kernels_spqr.h); validation, the gather, the tile-row
 * driver, the float order of the product and the output writes are shared with the AVX2 file
 * (../spqr_rows.h), so both backends perform the same float operations in the same order. Baseline, no
 * extra -m flags; compiled with -ffp-contract=off, so every float operation below is the one written.
 * An 8-lane vector is held as two float32x4_t (lanes 0-3, 4-7).
 *
 * Dequantization, bit-exact with the spec: RN16(v) is FCVTN to fp16 then FCVTL back (round to nearest
 * even under the default FPCR); a float32 +, - or * of two fp16 values rounded to fp16 is the fp16
 * operation (float32 has at least 2*11 + 2 significand bits). Per tile and row,
 *   s = RN16(s_s * RN16(s_q - s_z)),  z = RN16(z_s * RN16(z_q - z_z)),
 * then the 8 possible weights lut[q] = RN16(s * RN16(q - z)), q = 0..7, and each weight is lut[q_j],
 * picked by TBL over the table's 32 bytes (byte index 4 q + 0..3). Padded columns of the last column
 * tile get weight +0 and x' = +0.
 */
#include "../spqr_tiles.h"

#include <arm_neon.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float32x4_t lo, hi; /* lanes 0-3, 4-7 */
} spqr_v8;

/* ---- dequantization ------------------------------------------------------------------------------ */

static float spqr_f16(uint16_t h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }

static uint16_t spqr_to_f16(float f) { return vget_lane_u16(vreinterpret_u16_f16(vcvt_f16_f32(vdupq_n_f32(f))), 0); }

QG_INLINE float32x4_t rn16(float32x4_t v) { return vcvt_f32_f16(vcvt_f16_f32(v)); }

/* 4 weights: lut[(bits >> sh_l) & 7] per lane l. */
QG_INLINE float32x4_t pick(uint8x16x2_t lut, uint32_t bits, int32x4_t neg_sh, float32x4_t mask)
{
    const uint32x4_t q = vandq_u32(vshlq_u32(vdupq_n_u32(bits), neg_sh), vdupq_n_u32(7));
    const uint32x4_t idx = vaddq_u32(vmulq_u32(q, vdupq_n_u32(0x04040404u)), vdupq_n_u32(0x03020100u));
    const uint8x16_t w = vqtbl2q_u8(lut, vreinterpretq_u8_u32(idx));
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_u8(w), vreinterpretq_u32_f32(mask)));
}

/* Dequantizes one tile (16 words) into wb (row stride CCOLS) at column col0; `valid` columns are real. */
QG_INLINE void spqr_dequant_tile(const uint64_t *w, size_t valid, float *wb, size_t col0)
{
    const uint64_t v = spqr_second_order(w);
    const float32x4_t ss = vdupq_n_f32(spqr_f16((uint16_t)v)), zs = vdupq_n_f32(spqr_f16((uint16_t)(v >> 16)));
    const float32x4_t sz = vdupq_n_f32(spqr_f16((uint16_t)(v >> 32))), zz = vdupq_n_f32(spqr_f16((uint16_t)(v >> 48)));
    float sv[TILE], zv[TILE];
    const uint32x4_t seven = vdupq_n_u32(7);
    for (int h = 0; h < 4; h++) {
        const uint32x4_t lo = vcombine_u32(vmovn_u64(vld1q_u64(w + 4 * h)), vmovn_u64(vld1q_u64(w + 4 * h + 2)));
        const float32x4_t sq = vcvtq_f32_u32(vandq_u32(lo, seven));
        const float32x4_t zq = vcvtq_f32_u32(vandq_u32(vshrq_n_u32(lo, 3), seven));
        vst1q_f32(sv + 4 * h, rn16(vmulq_f32(ss, rn16(vsubq_f32(sq, sz)))));
        vst1q_f32(zv + 4 * h, rn16(vmulq_f32(zs, rn16(vsubq_f32(zq, zz)))));
    }
    static const float k_iota[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    static const int32_t k_sh[8] = {0, -3, -6, -9, -12, -15, -18, -21};
    const float32x4_t iota0 = vld1q_f32(k_iota), iota1 = vld1q_f32(k_iota + 4);
    const int32x4_t sh0 = vld1q_s32(k_sh), sh1 = vld1q_s32(k_sh + 4);
    float32x4_t mask[4];
    for (int g = 0; g < 4; g++) {
        uint32_t mb[4];
        for (int l = 0; l < 4; l++) mb[l] = (size_t)(4 * g + l) < valid ? 0xFFFFFFFFu : 0u;
        mask[g] = vreinterpretq_f32_u32(vld1q_u32(mb));
    }
    for (int k = 0; k < TILE; k++) {
        const float32x4_t s = vdupq_n_f32(sv[k]), z = vdupq_n_f32(zv[k]);
        const float32x4_t l0 = rn16(vmulq_f32(s, rn16(vsubq_f32(iota0, z))));
        const float32x4_t l1 = rn16(vmulq_f32(s, rn16(vsubq_f32(iota1, z))));
        const uint8x16x2_t lut = {{vreinterpretq_u8_f32(l0), vreinterpretq_u8_f32(l1)}};
        const uint32_t lo = (uint32_t)(w[k] >> 6), hi = (uint32_t)(w[k] >> 30);
        float *dst = wb + (size_t)k * CCOLS + col0;
        vst1q_f32(dst, pick(lut, lo, sh0, mask[0]));
        vst1q_f32(dst + 4, pick(lut, lo, sh1, mask[1]));
        vst1q_f32(dst + 8, pick(lut, hi, sh0, mask[2]));
        vst1q_f32(dst + 12, pick(lut, hi, sh1, mask[3]));
    }
}

/* ---- validation on the loaded words (spqr_checks.h) ---------------------------------------------- */

typedef uint64x2_t spqr_faults; /* nonzero bits: a rule is broken */

QG_INLINE spqr_faults spqr_faults_zero(void) { return vdupq_n_u64(0); }

QG_INLINE spqr_faults spqr_faults_or(spqr_faults a, spqr_faults b) { return vorrq_u64(a, b); }

QG_INLINE int spqr_faults_any(spqr_faults f) { return (vgetq_lane_u64(f, 0) | vgetq_lane_u64(f, 1)) != 0; }

/* The dense rules of one tile, nonzero when broken: reserved bits, fragment copies of rows 2b and 2b + 1,
 * and (pad != 0: the last column tile) padded codes. */
QG_INLINE uint64x2_t spqr_tile_faults(const uint64_t *w, uint64_t pad)
{
    const uint64x2_t res = vdupq_n_u64(QG_SPQR_RESERVED_MASK | pad), frag = vdupq_n_u64(QG_SPQR_FRAGMENT_MASK);
    uint64x2_t f = vdupq_n_u64(0);
    for (int b = 0; b < 8; b++) {
        const uint64x2_t v = vld1q_u64(w + 2 * b);                   /* rows 2b, 2b + 1 */
        const uint64x2_t sw = vextq_u64(v, v, 1);                     /* rows 2b + 1, 2b */
        f = vorrq_u64(f, vorrq_u64(vandq_u64(v, res), vandq_u64(veorq_u64(v, sw), frag)));
    }
    return f;
}

/* ---- the product --------------------------------------------------------------------------------- */

QG_INLINE spqr_v8 spqr_v8_zero(void)
{
    const spqr_v8 z = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    return z;
}

/* Rows k0..k0+RK-1 against batch columns b0..b0+G-1 over nv 8-column vectors from column c0 of x'. */
QG_INLINE void spqr_sweep(const float *wb, size_t nv, const spqr_ctx *c, size_t c0, int k0, const int RK, size_t b0, const int G,
                          spqr_v8 acc[TILE][MAXB])
{
    spqr_v8 a[8][2];
    const float *xb[2];
    for (int g = 0; g < G; g++) xb[g] = c->xp + (b0 + (size_t)g) * c->npad + c0;
#pragma GCC unroll 8
    for (int r = 0; r < RK; r++)
#pragma GCC unroll 2
        for (int g = 0; g < G; g++) a[r][g] = acc[k0 + r][b0 + (size_t)g];
    for (size_t v = 0; v < nv; v++) {
        float32x4_t x0[2], x1[2];
#pragma GCC unroll 2
        for (int g = 0; g < G; g++) {
            x0[g] = vld1q_f32(xb[g] + 8 * v);
            x1[g] = vld1q_f32(xb[g] + 8 * v + 4);
        }
#pragma GCC unroll 8
        for (int r = 0; r < RK; r++) {
            const float *wr = wb + (size_t)(k0 + r) * CCOLS + 8 * v;
            const float32x4_t w0 = vld1q_f32(wr), w1 = vld1q_f32(wr + 4);
#pragma GCC unroll 2
            for (int g = 0; g < G; g++) {
                a[r][g].lo = vfmaq_f32(a[r][g].lo, w0, x0[g]);
                a[r][g].hi = vfmaq_f32(a[r][g].hi, w1, x1[g]);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < RK; r++)
#pragma GCC unroll 2
        for (int g = 0; g < G; g++) acc[k0 + r][b0 + (size_t)g] = a[r][g];
}

static float spqr_hsum(spqr_v8 a)
{
    const float32x4_t t = vaddq_f32(a.lo, a.hi); /* t_l = A_l + A_{l+4} */
    const float t02 = vgetq_lane_f32(t, 0) + vgetq_lane_f32(t, 2), t13 = vgetq_lane_f32(t, 1) + vgetq_lane_f32(t, 3);
    return t02 + t13;
}

/* y = fma(v, x'[c], y): one outlier word. */
QG_INLINE float spqr_add_outlier(float y, uint32_t cv, const float *xb)
{
    const float32x4_t p = vfmaq_f32(vdupq_n_f32(y), vdupq_n_f32(spqr_f16((uint16_t)(cv >> 16))), vdupq_n_f32(xb[cv & 0xFFFFu]));
    return vgetq_lane_f32(p, 0);
}

/* ---- activations --------------------------------------------------------------------------------- */

static void spqr_convert_x(const uint16_t *x, size_t n, float *d)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(d + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));
    for (; i < n; i++) d[i] = spqr_f16(x[i]);
}

#include "../spqr_rows.h"

int qg_spqr_gemv_neon(const qg_spqr_layer *L, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16)
{
    return spqr_gemv(L, x, batch, y_f32, y_f16);
}
