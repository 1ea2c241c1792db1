/* INT8 kernels, aarch64 Advanced SIMD (qgold/kernels_int8.h); the driver is shared with AVX2
 * (../int8_rows.h).
 *
 * Integer dot products: with the dot-product extension (sdot, HWCAP_ASIMDDP at run time; QG_INT8_SDOT=0
 * disables it) four int8 x int8 products go into each int32 lane; without it smull / smull2 make int16
 * products (|a b| <= 2^14 fits) and sadalp adds their pairs into int32 lanes. Every partial sum is bounded
 * by the exact total's bound K 2^14 < 2^31, so both are exact.
 *
 * Float steps are single IEEE operations (fdiv, frintn ties to even, scvtf, fmul, fadd, fcvtn to fp16
 * with the default round-to-nearest-even mode), the same the reference performs, so quantize, dequant and
 * the W8A8 epilogue are bit-exact. In the W8A16 dot the products b x are exact in float32, so fmla rounds
 * exactly like a multiply then an add.
 */
#include "qgold/fp16.h"
#include "qgold/intq.h"
#include "qgold/kernels_int8.h"

#include <arm_neon.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif

#define I8_SFX neon

static uint32_t i8_absmax_bits_f32(const float *x, size_t n)
{
    const uint32x4_t mask = vdupq_n_u32(0x7FFFFFFFu);
    uint32x4_t m = vdupq_n_u32(0);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) m = vmaxq_u32(m, vandq_u32(vld1q_u32((const uint32_t *)(const void *)(x + i)), mask));
    uint32_t r = vmaxvq_u32(m);
    for (; i < n; i++) {
        uint32_t b;
        memcpy(&b, x + i, 4);
        b &= 0x7FFFFFFFu;
        r = b > r ? b : r;
    }
    return r;
}

static uint32_t i8_absmax_bits_f16(const uint16_t *x, size_t n)
{
    const uint16x8_t mask = vdupq_n_u16(0x7FFF);
    uint16x8_t m = vdupq_n_u16(0);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) m = vmaxq_u16(m, vandq_u16(vld1q_u16(x + i), mask));
    uint32_t r = vmaxvq_u16(m);
    for (; i < n; i++) r = (uint32_t)(x[i] & 0x7FFFu) > r ? (uint32_t)(x[i] & 0x7FFFu) : r;
    return r;
}

static void i8_f16_to_f32(const uint16_t *h, size_t n, float *d)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(d + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h + i))));
    for (; i < n; i++) d[i] = qg_f16_to_f32(h[i]);
}

/* sat(rne(x / s)) of 4 floats as int32 lanes. */
static inline int32x4_t i8_codes4(float32x4_t x, float32x4_t s)
{
    float32x4_t r = vrndnq_f32(vdivq_f32(x, s));
    r = vminq_f32(vmaxq_f32(r, vdupq_n_f32(-128.0f)), vdupq_n_f32(127.0f));
    return vcvtq_s32_f32(r);
}

static void i8_quantize(const float *x, size_t n, float s, int8_t *q)
{
    const float32x4_t vs = vdupq_n_f32(s);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const int16x8_t h = vcombine_s16(vqmovn_s32(i8_codes4(vld1q_f32(x + i), vs)), vqmovn_s32(i8_codes4(vld1q_f32(x + i + 4), vs)));
        vst1_s8(q + i, vqmovn_s16(h));
    }
    for (; i < n; i++) q[i] = qg_int8_quantize_value(x[i], s);
}

static inline void i8_store_f16x4(uint16_t *d, float32x4_t y) { vst1_u16(d, vreinterpret_u16_f16(vcvt_f16_f32(y))); }

static void i8_dequant(const int8_t *q, size_t n, float s, float *y32, uint16_t *y16)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const int16x8_t w = vmovl_s8(vld1_s8(q + i));
        const float32x4_t lo = vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(w))), s);
        const float32x4_t hi = vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(w))), s);
        if (y32 != NULL) {
            vst1q_f32(y32 + i, lo);
            vst1q_f32(y32 + i + 4, hi);
        }
        if (y16 != NULL) {
            i8_store_f16x4(y16 + i, lo);
            i8_store_f16x4(y16 + i + 4, hi);
        }
    }
    for (; i < n; i++) {
        const float y = (float)q[i] * s;
        if (y32 != NULL) y32[i] = y;
        if (y16 != NULL) y16[i] = qg_f32_to_f16(y);
    }
}

static int32_t i8_dot_tail(const int8_t *a, const int8_t *b, size_t k0, size_t K)
{
    int32_t s = 0;
    for (size_t k = k0; k < K; k++) s += (int32_t)a[k] * (int32_t)b[k];
    return s;
}

/* ---- smull + sadalp ---- */

static inline int32x4_t i8_mac16(int32x4_t acc, int8x16_t a, int8x16_t b)
{
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
}

/* Two A rows against four B rows: each B vector is loaded once for both A rows. */
static void i8_dot_2x4_smull(const int8_t *a0, const int8_t *a1, const int8_t *b, size_t K, int32_t out[8])
{
    int32x4_t acc[8];
    for (int j = 0; j < 8; j++) acc[j] = vdupq_n_s32(0);
    size_t k = 0;
    for (; k + 16 <= K; k += 16) {
        const int8x16_t va0 = vld1q_s8(a0 + k), va1 = vld1q_s8(a1 + k);
        for (int j = 0; j < 4; j++) {
            const int8x16_t vb = vld1q_s8(b + (size_t)j * K + k);
            acc[j] = i8_mac16(acc[j], va0, vb);
            acc[4 + j] = i8_mac16(acc[4 + j], va1, vb);
        }
    }
    for (int j = 0; j < 4; j++) {
        out[j] = vaddvq_s32(acc[j]) + i8_dot_tail(a0, b + (size_t)j * K, k, K);
        out[4 + j] = vaddvq_s32(acc[4 + j]) + i8_dot_tail(a1, b + (size_t)j * K, k, K);
    }
}

/* ---- sdot ---- */

__attribute__((target("arch=armv8.2-a+dotprod"))) static void i8_dot_2x4_sdot(const int8_t *a0, const int8_t *a1, const int8_t *b,
                                                                               size_t K, int32_t out[8])
{
    int32x4_t acc[8];
    for (int j = 0; j < 8; j++) acc[j] = vdupq_n_s32(0);
    size_t k = 0;
    for (; k + 16 <= K; k += 16) {
        const int8x16_t va0 = vld1q_s8(a0 + k), va1 = vld1q_s8(a1 + k);
        for (int j = 0; j < 4; j++) {
            const int8x16_t vb = vld1q_s8(b + (size_t)j * K + k);
            acc[j] = vdotq_s32(acc[j], va0, vb);
            acc[4 + j] = vdotq_s32(acc[4 + j], va1, vb);
        }
    }
    for (int j = 0; j < 4; j++) {
        out[j] = vaddvq_s32(acc[j]) + i8_dot_tail(a0, b + (size_t)j * K, k, K);
        out[4 + j] = vaddvq_s32(acc[4 + j]) + i8_dot_tail(a1, b + (size_t)j * K, k, K);
    }
}

/* 1: use sdot. Decided once (HWCAP and QG_INT8_SDOT); racing first calls agree. */
static int i8_use_sdot(void)
{
    static int state = -1;
    int s = __atomic_load_n(&state, __ATOMIC_RELAXED);
    if (s < 0) {
        const char *env = getenv("QG_INT8_SDOT");
        s = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0 && !(env && strcmp(env, "0") == 0);
        __atomic_store_n(&state, s, __ATOMIC_RELAXED);
    }
    return s;
}

static void i8_dot_2x4(const int8_t *a0, const int8_t *a1, const int8_t *b, size_t K, int32_t out[8])
{
    if (i8_use_sdot())
        i8_dot_2x4_sdot(a0, a1, b, K, out);
    else
        i8_dot_2x4_smull(a0, a1, b, K, out);
}

static int32_t i8_dot(const int8_t *a, const int8_t *b, size_t K)
{
    int32x4_t acc = vdupq_n_s32(0);
    size_t k = 0;
    for (; k + 16 <= K; k += 16) acc = i8_mac16(acc, vld1q_s8(a + k), vld1q_s8(b + k));
    return vaddvq_s32(acc) + i8_dot_tail(a, b, k, K);
}

static void i8_epilogue(const int32_t *acc, size_t n, float sa, const float *sb, int sb_vec, const void *bias,
                        qg_int8_ftype bias_type, int relu, float *y32, uint16_t *y16)
{
    const float32x4_t zero = vdupq_n_f32(0.0f);
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const float32x4_t vsb = sb_vec ? vld1q_f32(sb + j) : vdupq_n_f32(sb[0]);
        float32x4_t t = vcvtq_f32_s32(vld1q_s32(acc + j)); /* RNE above 2^24 */
        t = vmulq_n_f32(vmulq_f32(t, vsb), sa);
        if (bias != NULL) {
            const float32x4_t vb = bias_type == QG_INT8_F16 ? vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)bias + j)))
                                                            : vld1q_f32((const float *)bias + j);
            t = vaddq_f32(t, vb);
        }
        if (relu) {
            /* keep t where t > 0 or t is NaN (t != t), else +0.0 */
            const uint32x4_t keep = vorrq_u32(vcgtq_f32(t, zero), vmvnq_u32(vceqq_f32(t, t)));
            t = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(t), keep));
        }
        if (y32 != NULL) vst1q_f32(y32 + j, t);
        if (y16 != NULL) i8_store_f16x4(y16 + j, t);
    }
    for (; j < n; j++) {
        const void *bj = bias == NULL ? NULL : (const unsigned char *)bias + j * (bias_type == QG_INT8_F16 ? 2u : 4u);
        const float t = qg_int8_epilogue(acc[j], sa, sb[sb_vec ? j : 0], bj, bias_type, relu);
        if (y32 != NULL) y32[j] = t;
        if (y16 != NULL) y16[j] = qg_f32_to_f16(t);
    }
}

/* Row order, the same for each of the nr (1 or 4) rows: four 4-lane accumulators over 16-element steps
 * (acc_j: k = 16i + 4j + l), then (acc0 + acc1) + (acc2 + acc3), then the lanes (0 + 2) + (1 + 3), then
 * the tail in index order. The weights of a step are converted once for the nr rows. */
static inline __attribute__((always_inline)) void i8_w8a16_dot4(const int8_t *b, const float *const x[4], int nr, size_t K,
                                                                 float out[4])
{
    float32x4_t acc[4][4];
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < 4; j++) acc[r][j] = vdupq_n_f32(0.0f);
    size_t k = 0;
    for (; k + 16 <= K; k += 16) {
        const int8x16_t vb = vld1q_s8(b + k);
        const int16x8_t lo = vmovl_s8(vget_low_s8(vb)), hi = vmovl_high_s8(vb);
        const float32x4_t w[4] = {vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), vcvtq_f32_s32(vmovl_high_s16(lo)),
                                  vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), vcvtq_f32_s32(vmovl_high_s16(hi))};
        for (int r = 0; r < nr; r++)
            for (int j = 0; j < 4; j++) acc[r][j] = vfmaq_f32(acc[r][j], w[j], vld1q_f32(x[r] + k + 4 * j)); /* exact products */
    }
    for (int r = 0; r < nr; r++) {
        const float32x4_t a = vaddq_f32(vaddq_f32(acc[r][0], acc[r][1]), vaddq_f32(acc[r][2], acc[r][3]));
        float s = (vgetq_lane_f32(a, 0) + vgetq_lane_f32(a, 2)) + (vgetq_lane_f32(a, 1) + vgetq_lane_f32(a, 3));
        for (size_t j = k; j < K; j++) s = s + (float)b[j] * x[r][j];
        out[r] = s;
    }
}

#include "../int8_rows.h"
