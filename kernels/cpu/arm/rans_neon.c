/* rANS-compressed int8 tiles on aarch64 (Advanced SIMD): decoding, the fused decode + dequant + GEMV and
 * the plain int8 W8A16 GEMV (qgold/kernels_rans.h). Compiled with -ffp-contract=off. Validation, the
 * predictor undo, the checks, the thread split and the error order are shared with the AVX2 file
 * (../rans_lanes.h), and so is the warp decoder here: the portable 32-lane loop of that header, which
 * takes renormalization words lower lane first exactly as the spec reads.
 *
 * Product (both GEMVs): a 32-row x 256-column column-major block of int8 codes times the activations
 * converted once to float32, with vectors across 4 rows and never across c. For each (row, batch column)
 * the float32 sum over c = 0..255 ascending from 0.0f is the reference's; each product q * x is exact
 * (int8 times fp16 fits float32), so the fused multiply-add rounds exactly where the reference's add does.
 */
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/kernels_rans.h"

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

/* The portable decoder of rans_lanes.h (defined there; declared here for rl_decode_warp). */
static inline int rl_decode_warp_scalar(const uint32_t *tab, const uint8_t *init, const uint8_t *words, uint32_t nwords,
                                        uint8_t *S, uint32_t *used, int *final_ok);

static int rl_decode_warp(const uint32_t *tab, const uint8_t *init, const uint8_t *words, uint32_t nwords, const uint8_t *limit,
                          uint8_t *S, uint32_t *used, int *final_ok)
{
    (void)limit; /* the scalar loop reads exactly the words it takes */
    return rl_decode_warp_scalar(tab, init, words, nwords, S, used, final_ok);
}

static void rl_prefix_col(uint8_t *col, uint8_t carry)
{
    uint8_t s = carry;
    for (int l = 0; l < 32; l++) col[l] = s = (uint8_t)(s + col[l]);
}

/* 8 vectors of 4 rows: the block's column c as float32. */
static inline void codes32(const uint8_t *p, float32x4_t q[8])
{
    for (int h = 0; h < 2; h++) {
        const int8x16_t v = vld1q_s8((const int8_t *)p + 16 * h);
        const int16x8_t lo = vmovl_s8(vget_low_s8(v)), hi = vmovl_s8(vget_high_s8(v));
        q[4 * h + 0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
        q[4 * h + 1] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo)));
        q[4 * h + 2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
        q[4 * h + 3] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi)));
    }
}

/* G (1 or 2) batch columns from b0: 8 * G independent chains over c. */
static inline __attribute__((always_inline)) void product_group(const uint8_t *S, const float *xf, size_t B, size_t b0, const int G,
                                                                float *p, size_t ps)
{
    float32x4_t acc[2][8];
    for (int g = 0; g < 2; g++)
        for (int k = 0; k < 8; k++) acc[g][k] = vdupq_n_f32(0.0f);
    for (int c = 0; c < 256; c++) {
        float32x4_t q[8];
        codes32(S + 32 * c, q);
        for (int g = 0; g < G; g++) {
            const float32x4_t xb = vdupq_n_f32(xf[(size_t)c * B + b0 + (size_t)g]);
            for (int k = 0; k < 8; k++) acc[g][k] = vfmaq_f32(acc[g][k], q[k], xb);
        }
    }
    for (int g = 0; g < G; g++)
        for (int k = 0; k < 8; k++) vst1q_f32(p + (b0 + (size_t)g) * ps + 4 * k, acc[g][k]);
}

static void rl_block_product(const uint8_t *S, const float *xf, size_t batch, float *p, size_t ps)
{
    size_t b0 = 0;
    for (; b0 + 2 <= batch; b0 += 2) product_group(S, xf, batch, b0, 2, p, ps);
    if (b0 < batch) product_group(S, xf, batch, b0, 1, p, ps);
}

static void rl_transpose_out(const uint8_t *S, uint8_t *dst, size_t stride, size_t rows, size_t cols)
{
    for (size_t l = 0; l < rows; l++)
        for (size_t c = 0; c < cols; c++) dst[l * stride + c] = S[c * 32 + l];
}

static void rl_transpose_in(const uint8_t *src, size_t stride, size_t rows, size_t cols, uint8_t *S)
{
    memset(S, 0, 32 * 256);
    for (size_t l = 0; l < rows; l++)
        for (size_t c = 0; c < cols; c++) S[c * 32 + l] = src[l * stride + c];
}

static void rl_convert_x(const uint16_t *x, size_t K, size_t batch, size_t ncols, float *xf)
{
    for (size_t c = 0; c < ncols; c++)
        for (size_t b = 0; b < batch; b++) xf[c * batch + b] = c < K ? qg_f16_to_f32(x[b * K + c]) : 0.0f;
}

static uint16_t rl_f16(float y) { return qg_f32_to_f16(y); }

#include "../rans_lanes.h"

int qg_rans_decode_neon(const uint8_t *buf, size_t len, uint8_t *w, size_t w_len) { return rl_decode(buf, len, w, w_len); }

int qg_rans_gemv_neon(const uint8_t *buf, size_t len, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16)
{
    return rl_gemv(buf, len, x, batch, y_f32, y_f16);
}

int qg_int8_gemv_neon(const uint8_t *w, const float *scales, size_t M, size_t K, const uint16_t *x, size_t batch, float *y_f32,
                      uint16_t *y_f16)
{
    return rl_int8_gemv(w, scales, M, K, x, batch, y_f32, y_f16);
}
