/* fp16 / bf16 conversions with aarch64 Advanced SIMD (baseline on aarch64, so no extra flags).
 *
 * float32 -> fp16 is FCVTN, which rounds by FPCR.RMode: round-to-nearest-even unless a caller changed
 * it (Linux starts every thread in RNE with flush-to-zero off). It produces subnormals, overflows to
 * inf, and quiets NaNs keeping their sign. fp16 -> float32 (FCVTL) is exact. bf16 is integer arithmetic
 * as in the reference: adding 0x7FFF + lsb carries exactly when round-to-nearest-even rounds up.
 * Tails go through a scratch buffer so every element takes the vector path.
 */
#include "qgold/errors.h"
#include "qgold/kernels_fp16.h"

#include <arm_neon.h>
#include <string.h>

static inline void cvt4_f32_f16(const uint32_t *x, qg_f16 *y)
{
    float16x4_t h = vcvt_f16_f32(vreinterpretq_f32_u32(vld1q_u32(x)));
    vst1_u16(y, vreinterpret_u16_f16(h));
}

int qg_fp16_f32_to_f16_neon(const uint32_t *x, qg_f16 *y, size_t n)
{
    if (n > 0 && (x == NULL || y == NULL)) return QG_ERR_argument_invalid;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) cvt4_f32_f16(x + i, y + i);
    if (i < n) {
        uint32_t xs[4] = {0};
        uint16_t ys[4];
        memcpy(xs, x + i, (n - i) * sizeof *x);
        cvt4_f32_f16(xs, ys);
        memcpy(y + i, ys, (n - i) * sizeof *y);
    }
    return QG_ERR_ok;
}

static inline void cvt4_f16_f32(const qg_f16 *x, uint32_t *y)
{
    float32x4_t f = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x)));
    vst1q_u32(y, vreinterpretq_u32_f32(f));
}

int qg_fp16_f16_to_f32_neon(const qg_f16 *x, uint32_t *y, size_t n)
{
    if (n > 0 && (x == NULL || y == NULL)) return QG_ERR_argument_invalid;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) cvt4_f16_f32(x + i, y + i);
    if (i < n) {
        uint16_t xs[4] = {0};
        uint32_t ys[4];
        memcpy(xs, x + i, (n - i) * sizeof *x);
        cvt4_f16_f32(xs, ys);
        memcpy(y + i, ys, (n - i) * sizeof *y);
    }
    return QG_ERR_ok;
}

static inline void cvt4_f32_bf16(const uint32_t *x, qg_bf16 *y)
{
    uint32x4_t v = vld1q_u32(x);
    uint32x4_t lsb = vandq_u32(vshrq_n_u32(v, 16), vdupq_n_u32(1));
    uint32x4_t rounded = vshrq_n_u32(vaddq_u32(vaddq_u32(v, vdupq_n_u32(0x7FFF)), lsb), 16);
    /* NaN: keep sign and high payload, set the quiet bit (a low-only payload must stay NaN). */
    uint32x4_t isnan = vcgtq_u32(vandq_u32(v, vdupq_n_u32(0x7FFFFFFF)), vdupq_n_u32(0x7F800000));
    uint32x4_t quiet = vorrq_u32(vshrq_n_u32(v, 16), vdupq_n_u32(0x0040));
    vst1_u16(y, vmovn_u32(vbslq_u32(isnan, quiet, rounded)));
}

int qg_fp16_f32_to_bf16_neon(const uint32_t *x, qg_bf16 *y, size_t n)
{
    if (n > 0 && (x == NULL || y == NULL)) return QG_ERR_argument_invalid;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) cvt4_f32_bf16(x + i, y + i);
    if (i < n) {
        uint32_t xs[4] = {0};
        uint16_t ys[4];
        memcpy(xs, x + i, (n - i) * sizeof *x);
        cvt4_f32_bf16(xs, ys);
        memcpy(y + i, ys, (n - i) * sizeof *y);
    }
    return QG_ERR_ok;
}

static inline void cvt4_bf16_f32(const qg_bf16 *x, uint32_t *y)
{
    vst1q_u32(y, vshlq_n_u32(vmovl_u16(vld1_u16(x)), 16));
}

int qg_fp16_bf16_to_f32_neon(const qg_bf16 *x, uint32_t *y, size_t n)
{
    if (n > 0 && (x == NULL || y == NULL)) return QG_ERR_argument_invalid;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) cvt4_bf16_f32(x + i, y + i);
    if (i < n) {
        uint16_t xs[4] = {0};
        uint32_t ys[4];
        memcpy(xs, x + i, (n - i) * sizeof *x);
        cvt4_bf16_f32(xs, ys);
        memcpy(y + i, ys, (n - i) * sizeof *y);
    }
    return QG_ERR_ok;
}
