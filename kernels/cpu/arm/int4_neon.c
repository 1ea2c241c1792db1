/* INT4 kernels with NEON (aarch64 Advanced SIMD): the vector primitives of ../int4_rows.h (the drivers,
 * validation, float order and output writes are shared with the AVX2 file). Compiled with
 * -ffp-contract=off: vfmaq_f32 is the one fused operation, written where the shared order wants it.
 *
 * An 8-lane value is a pair of 4-lane registers (lo: lanes 0-3, hi: lanes 4-7). Codes: the word is
 * shifted right by 4j in lane j (vshlq_u32 with negative counts), masked and or-ed into the exponent
 * of 2^23 (the float32 2^23 + code, exact). The packed GEMM's dot
 * multiplies B's nibbles XOR 8 (0..15) by A's int8 codes into int16 (vmull_s8, |p| <= 120) and
 * accumulates pairs of them into int32 (vpadalq_s16): every partial sum is exact.
 */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    float32x4_t lo, hi;
} i4_v8;

static inline i4_v8 i4_zero(void) { return (i4_v8){vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; }
static inline i4_v8 i4_set1(float v) { return (i4_v8){vdupq_n_f32(v), vdupq_n_f32(v)}; }
static inline i4_v8 i4_load(const float *p) { return (i4_v8){vld1q_f32(p), vld1q_f32(p + 4)}; }
static inline void i4_store(float *p, i4_v8 v)
{
    vst1q_f32(p, v.lo);
    vst1q_f32(p + 4, v.hi);
}
static inline i4_v8 i4_sub(i4_v8 a, i4_v8 b) { return (i4_v8){vsubq_f32(a.lo, b.lo), vsubq_f32(a.hi, b.hi)}; }
static inline i4_v8 i4_mul(i4_v8 a, i4_v8 b) { return (i4_v8){vmulq_f32(a.lo, b.lo), vmulq_f32(a.hi, b.hi)}; }
static inline i4_v8 i4_fma(i4_v8 a, i4_v8 b, i4_v8 c) { return (i4_v8){vfmaq_f32(c.lo, a.lo, b.lo), vfmaq_f32(c.hi, a.hi, b.hi)}; }

static inline float i4_scale_f32(uint16_t h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }

static inline i4_v8 i4_codes(uint32_t word)
{
    static const int32_t sh_lo[4] = {0, -4, -8, -12}, sh_hi[4] = {-16, -20, -24, -28};
    const uint32x4_t w = vdupq_n_u32(word), m = vdupq_n_u32(15), e = vdupq_n_u32(0x4B000000u); /* 2^23 + code */
    return (i4_v8){vreinterpretq_f32_u32(vorrq_u32(vandq_u32(vshlq_u32(w, vld1q_s32(sh_lo)), m), e)),
                   vreinterpretq_f32_u32(vorrq_u32(vandq_u32(vshlq_u32(w, vld1q_s32(sh_hi)), m), e))};
}

static inline float i4_hsum(i4_v8 a)
{
    const float32x4_t t = vaddq_f32(a.lo, a.hi); /* t_l = a_l + a_{l+4} */
    const float t02 = vgetq_lane_f32(t, 0) + vgetq_lane_f32(t, 2), t13 = vgetq_lane_f32(t, 1) + vgetq_lane_f32(t, 3);
    return t02 + t13;
}

/* Block i of a packed row as u = nibble XOR 8 (0..15, as int8): lo = the low nibbles of its 16 bytes, hi
 * the high ones; times a (-8..7) into int16 (|p| <= 120), pairs accumulated into int32: exact. */
static inline int32x4_t i4_madd_u(int32x4_t acc, int8x16_t lo, int8x16_t hi, const int8_t *a)
{
    const int8x16_t alo = vld1q_s8(a), ahi = vld1q_s8(a + 16);
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(lo), vget_low_s8(alo)));
    acc = vpadalq_s16(acc, vmull_s8(vget_high_s8(lo), vget_high_s8(alo)));
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(hi), vget_low_s8(ahi)));
    return vpadalq_s16(acc, vmull_s8(vget_high_s8(hi), vget_high_s8(ahi)));
}

static inline void i4_block_u(const uint8_t *b, int8x16_t *lo, int8x16_t *hi)
{
    const uint8x16_t v = vld1q_u8(b), e = vdupq_n_u8(8);
    *lo = vreinterpretq_s8_u8(veorq_u8(vandq_u8(v, vdupq_n_u8(0x0F)), e));
    *hi = vreinterpretq_s8_u8(veorq_u8(vshrq_n_u8(v, 4), e));
}

static inline int32_t i4_dots_packed1(const uint8_t *b, size_t nb, const int8_t *a)
{
    int32x4_t acc = vdupq_n_s32(0);
    for (size_t i = 0; i < nb; i++) {
        int8x16_t lo, hi;
        i4_block_u(b + 16 * i, &lo, &hi);
        acc = i4_madd_u(acc, lo, hi, a + 32 * i);
    }
    return vaddvq_s32(acc);
}

static inline void i4_dots_packed4(const uint8_t *b, size_t nb, const int8_t *a, size_t kp, int32_t out[4])
{
    int32x4_t a0 = vdupq_n_s32(0), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < nb; i++) {
        int8x16_t lo, hi;
        i4_block_u(b + 16 * i, &lo, &hi);
        a0 = i4_madd_u(a0, lo, hi, a + 32 * i);
        a1 = i4_madd_u(a1, lo, hi, a + kp + 32 * i);
        a2 = i4_madd_u(a2, lo, hi, a + 2 * kp + 32 * i);
        a3 = i4_madd_u(a3, lo, hi, a + 3 * kp + 32 * i);
    }
    out[0] = vaddvq_s32(a0);
    out[1] = vaddvq_s32(a1);
    out[2] = vaddvq_s32(a2);
    out[3] = vaddvq_s32(a3);
}

#include "../int4_rows.h"

int qg_w4a16_decode_neon(const qg_w4a16 *L, float *w) { return i4_decode(L, w); }
int qg_w4a16_gemv_neon(const qg_w4a16 *L, const uint16_t *x, size_t x_len, size_t batch, float *y_f32, uint16_t *y_f16)
{
    return i4_gemv(L, x, x_len, batch, y_f32, y_f16);
}
int qg_int4_gemm_packed_neon(const qg_int4_gemm_args *p, int32_t *acc, float *y_f32, uint16_t *y_f16)
{
    return i4_gemm(p, acc, y_f32, y_f16);
}
