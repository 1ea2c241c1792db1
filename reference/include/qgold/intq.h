/* INT8 symmetric quantization and integer products: the reference (spec: reference/spec/intq.md,
 * arithmetic of shared/specs/intq.md sections 1 and 2).
 *
 * Quantize (one scale per tensor, per row, or per group of `group` consecutive elements of a row):
 *   amax = max |v| over the block            (NaN or inf anywhere: int_nonfinite_input)
 *   s    = amax == 0 ? 0 : amax / 127         (float32 IEEE division)
 *   fp16 scales: s = RN16(s), and the codes are computed with that value (inf: int_scale_invalid)
 *   q    = s == 0 ? 0 : sat(rne(v / s))       (float32 IEEE division, ties to even, clamp [-128, 127])
 * Dequantize: y = RN32((float) q * s); fp16 output is RN16 of that float32 (two roundings, pinned).
 *
 * W8A8 GEMM: A M x K int8 (row-major), B N x K int8 (one row per output channel),
 *   acc[m][n] = sum_k A[m][k] B[n][k]          exact in int32 for K <= 131071 (else int_k_too_large)
 *   t = RN32(RN32((float) acc * sb[n]) * sa[m])
 *   t = bias ? RN32(t + bias[n]) : t
 *   t = relu ? (t > 0 ? t : +0.0) : t          (NaN stays NaN)
 *   y_f16 = RN16(t)
 * Every step is pinned: the outputs are bit-exact on every backend (a NaN made by the epilogue, from a
 * NaN bias or inf * 0, matches any NaN).
 *
 * W8A16: y[m][n] = sum_k (sb[n] B[n][k]) X[m][k] with X fp16 (M x K, M the batch); bounded tier with
 * chain length K. The reference sums the exact products B[n][k] * X[m][k] (an 8-bit times an 11-bit
 * significand fits float32) in float32 in index order from the first term, then multiplies by sb[n]
 * once: each term passes at most K roundings.
 *
 * Validation, in this order, before anything is written: NULL data pointers argument_invalid; zero
 * dimensions shape_invalid; a W8A8 scale count (sa_len, sb_len) other than 1 or M / N size_mismatch;
 * a group size not in {32, 64, 128} or not dividing cols int_group_invalid; K > 131071 int_k_too_large (int32-accumulating products
 * only); NULL scales int_scale_invalid; then the values: a quantizer input NaN or infinite
 * int_nonfinite_input; a dequantization scale negative, NaN or infinite int_scale_invalid; a product
 * scale (sa, sb) NaN or infinite int_nonfinite_input, negative int_scale_invalid. Bias and activation
 * values are not validated (NaN and inf propagate). Outputs are untouched on every error.
 */
#ifndef QGOLD_INTQ_H
#define QGOLD_INTQ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { QG_INT8_QMAX = 127, QG_INT8_MAX_K = 131071 };

/* Element type of a float array: float32 (float, or its bits as uint32) or fp16 (bits as uint16). */
typedef enum { QG_INT8_F32 = 0, QG_INT8_F16 = 1 } qg_int8_ftype;

/* Scale granularity of quantize / dequantize. */
typedef enum { QG_INT8_PER_TENSOR = 0, QG_INT8_PER_ROW = 1, QG_INT8_PER_GROUP = 2 } qg_int8_gran;

/* The shape of a quantized matrix: rows x cols codes, row-major, and its scales: 1 (per tensor), rows
 * (per row) or rows * (cols / group) (per group, the groups of a row consecutive), all of scale_type. */
typedef struct {
    size_t rows, cols;
    qg_int8_gran gran;
    size_t group;             /* elements per group (QG_INT8_PER_GROUP: 32, 64 or 128); ignored otherwise */
    qg_int8_ftype scale_type; /* scales as float32 or fp16 */
} qg_int8_qshape;

/* Number of scales of a shape; 0 when the shape is invalid (use qg_int8_qshape_check for the code). */
size_t qg_int8_num_scales(const qg_int8_qshape *s);
/* 0, or shape_invalid (zero rows/cols, unknown granularity or type, rows * cols overflow) or
 * int_group_invalid (group not 32, 64 or 128, or not dividing cols). */
int qg_int8_qshape_check(const qg_int8_qshape *s);

/* x: rows * cols of src_type (float32 or fp16 bits); q: rows * cols codes; scales: the shape's scale
 * count of s->scale_type. */
int qg_int8_quantize_ref(const qg_int8_qshape *s, const void *x, qg_int8_ftype src_type, int8_t *q, void *scales);

/* q and scales as quantize writes them; y_f32 and/or y_f16 rows * cols (either may be NULL, not both). */
int qg_int8_dequant_ref(const qg_int8_qshape *s, const int8_t *q, const void *scales, float *y_f32, uint16_t *y_f16);

/* Inputs of a W8A8 product. Scales and bias are read only for the scaled outputs. */
typedef struct {
    size_t M, N, K;
    const int8_t *A;          /* M x K */
    const int8_t *B;          /* N x K */
    const float *sa;          /* sa_len floats: 1 (per tensor) or M (per token) */
    size_t sa_len;
    const float *sb;          /* sb_len floats: 1 (per tensor) or N (per output channel) */
    size_t sb_len;
    const void *bias;         /* N values of bias_type; NULL: no bias */
    qg_int8_ftype bias_type;
    int relu;                 /* 0 or 1 */
} qg_int8_w8a8_args;

/* Outputs M x N row-major: acc (raw int32 sums), y_f32, y_f16; any may be NULL, not all three. With
 * only acc requested, sa / sb may be NULL. */
int qg_int8_w8a8_ref(const qg_int8_w8a8_args *p, int32_t *acc, float *y_f32, uint16_t *y_f16);

/* W8A16: B N x K int8, sb N scales of sb_type, X M x K fp16 bits; y_f32 and/or y_f16 M x N row-major
 * (either may be NULL, not both). */
int qg_int8_w8a16_ref(const int8_t *B, const void *sb, qg_int8_ftype sb_type, size_t N, size_t K, const uint16_t *X,
                      size_t M, float *y_f32, uint16_t *y_f16);

/* The validation every backend shares, so that all of them name the same error for the same input:
 * each returns the first failing rule of the list above, or 0.
 * quantize: every rule up to the NULL scales (the input values are checked by the caller, which reads
 * them anyway; then qg_int8_scale_of for each block); dequant, w8a8 and w8a16: every rule, scale
 * values included. */
int qg_int8_quantize_check(const qg_int8_qshape *s, const void *x, qg_int8_ftype src_type, const int8_t *q,
                           const void *scales);
int qg_int8_dequant_check(const qg_int8_qshape *s, const int8_t *q, const void *scales, const float *y_f32,
                          const uint16_t *y_f16);
int qg_int8_w8a8_check(const qg_int8_w8a8_args *p, const int32_t *acc, const float *y_f32, const uint16_t *y_f16);
int qg_int8_w8a16_check(const int8_t *B, const void *sb, qg_int8_ftype sb_type, size_t N, size_t K, const uint16_t *X,
                        size_t M, const float *y_f32, const uint16_t *y_f16);
/* The scale of a block whose amax (finite, >= 0) is given: amax / 127 (0 when amax is 0), as float32 or
 * as RN16 of it (its value returned as float32); int_scale_invalid when the fp16 scale is infinite. */
int qg_int8_scale_of(float amax, qg_int8_ftype scale_type, float *s);

/* Building blocks (total functions, no validation; kernels and tests use them so that the scalar
 * steps cannot drift): the code of v for scale s (s > 0 finite, v finite): sat(rne(v / s)); the W8A8
 * epilogue of one output (bias: pointer to bias[n] or NULL). */
int8_t qg_int8_quantize_value(float v, float s);
float qg_int8_epilogue(int32_t acc, float sa, float sb, const void *bias_n, qg_int8_ftype bias_type, int relu);

#ifdef __cplusplus
}
#endif
#endif
