/* INT4: symmetric int4 quantization, packed int4 x int4 GEMM, the W4A16 group-wise canonical layout
 * and the GPTQ / AWQ importers: the reference (spec: reference/spec/intq.md, arithmetic of
 * shared/specs/intq.md sections 1 and 3).
 *
 * Quantize (one scale per tensor, per row, or per group of `group` consecutive elements of a row):
 *   amax = max |v| over the block            (NaN or inf anywhere: int_nonfinite_input)
 *   s    = amax == 0 ? 0 : amax / 7           (float32 IEEE division)
 *   fp16 scales: s = RN16(s), and the codes are computed with that value (inf: int_scale_invalid)
 *   q    = s == 0 ? 0 : sat(rne(v / s))       (float32 IEEE division, ties to even, clamp [-8, 7])
 * Dequantize: y = RN32((float) q * s); fp16 output is RN16 of that float32 (two roundings, pinned).
 *
 * Packed int4 x int4: A M x ceil(K/2) bytes, B N x ceil(K/2) bytes; element 2i is the low nibble of
 * byte i, element 2i+1 the high nibble, two's complement (x >= 8 ? x - 16 : x); for odd K the last high
 * nibble of every row is padding and must be 0 (int4_bad_padding).
 *   acc[m][n] = sum_k A[m][k] B[n][k]          exact in int32 (|term| <= 64); K > 131071 is
 *                                              int_k_too_large, the contract's limit for every
 *                                              int32-accumulating product
 *   t = RN32(RN32((float) acc * sb[n]) * sa[m]); t = bias ? RN32(t + bias[n]) : t;
 *   t = relu ? (t > 0 ? t : +0.0) : t; y_f16 = RN16(t)
 *
 * W4A16 canonical layout (N output channels, K inputs, group size g, G = K / g):
 *   qweight N x K/8 uint32: nibble j (bits 4j..4j+3) of word w of row n is q[n][8w + j], 0..15
 *   scales  N x G fp16; zeros N x G uint8 0..15 or absent (z = 8); g_idx K int32 or absent (k / g)
 *   w[n][k] = (float)(q[n][k] - z[n][G_k]) * s[n][G_k]    exact in float32 (5-bit x 11-bit)
 * GEMV: y[b][n] = sum_k w[n][k] * x[b][k], x fp16, accumulated in float32 in index order from k = 0
 * (acc = RN32(acc + RN32(w x))); fp16 output RN16(y).
 *
 * Validation, before anything is written (outputs untouched on every error): NULL data pointers
 * argument_invalid; zero or inconsistent dimensions shape_invalid; a buffer length that is not the one
 * the shape implies size_mismatch; a group size not allowed int_group_invalid; scales NULL, negative,
 * NaN or infinite int_scale_invalid (product scales sa / sb NaN or infinite: int_nonfinite_input);
 * int4_bad_padding, int4_g_idx_invalid, int4_zero_out_of_range as named above.
 */
#ifndef QGOLD_INT4_H
#define QGOLD_INT4_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { QG_INT4_QMAX = 7, QG_INT4_QMIN = -8, QG_INT4_MAX_K = 131071, QG_INT4_SYM_ZERO = 8 };

/* Element type of a float array: float32 (float) or fp16 (bits as uint16). */
typedef enum { QG_INT4_F32 = 0, QG_INT4_F16 = 1 } qg_int4_ftype;

/* Scale granularity of quantize / dequantize. */
typedef enum { QG_INT4_PER_TENSOR = 0, QG_INT4_PER_ROW = 1, QG_INT4_PER_GROUP = 2 } qg_int4_gran;

/* A quantized matrix: rows x cols codes (int8 holding -8..7, unpacked), row-major, and its scales: 1,
 * rows, or rows * (cols / group) (groups of a row consecutive), all of scale_type. */
typedef struct {
    size_t rows, cols;
    qg_int4_gran gran;
    size_t group;             /* elements per group (QG_INT4_PER_GROUP); ignored otherwise */
    qg_int4_ftype scale_type; /* scales as float32 or fp16 bits */
} qg_int4_qshape;

/* 0, shape_invalid or int_group_invalid. */
int qg_int4_qshape_check(const qg_int4_qshape *s);
/* Number of scales of a valid shape (0 when invalid). */
size_t qg_int4_num_scales(const qg_int4_qshape *s);

/* x: rows * cols values of src_type; q: rows * cols codes -8..7; scales: the shape's count. */
int qg_int4_quantize_ref(const qg_int4_qshape *s, const void *x, qg_int4_ftype src_type, int8_t *q, void *scales);
/* q: codes -8..7 (others: argument_invalid); y_f32 and/or y_f16 rows * cols (either may be NULL). */
int qg_int4_dequant_ref(const qg_int4_qshape *s, const int8_t *q, const void *scales, float *y_f32, uint16_t *y_f16);

/* Packed int4 x int4 product. */
typedef struct {
    size_t M, N, K;
    const uint8_t *A;  /* M x ceil(K/2) bytes */
    size_t A_len;      /* bytes at A: must be M * ceil(K/2) */
    const uint8_t *B;  /* N x ceil(K/2) bytes */
    size_t B_len;      /* bytes at B: must be N * ceil(K/2) */
    const float *sa;   /* 1 or M */
    size_t sa_len;
    const float *sb;   /* 1 or N */
    size_t sb_len;
    const void *bias;  /* N of bias_type, or NULL */
    qg_int4_ftype bias_type;
    int relu;          /* 0 or 1 */
} qg_int4_gemm_args;

/* Bytes of one packed row of K elements. */
static inline size_t qg_int4_packed_row_bytes(size_t K) { return K / 2 + (K & 1); }
/* Element k of a packed row, sign-extended. */
static inline int qg_int4_packed_get(const uint8_t *row, size_t k)
{
    unsigned nib = (row[k >> 1] >> ((k & 1) * 4)) & 0xFu;
    return nib >= 8 ? (int)nib - 16 : (int)nib;
}
/* Validation shared by every backend: pointers, shapes, K limit, scales, padding nibbles. */
int qg_int4_gemm_check(const qg_int4_gemm_args *p, const int32_t *acc, const float *y_f32, const uint16_t *y_f16);
/* Outputs M x N row-major; any of acc, y_f32, y_f16 may be NULL, not all three. With only acc
 * requested, sa / sb may be NULL. */
int qg_int4_gemm_packed_ref(const qg_int4_gemm_args *p, int32_t *acc, float *y_f32, uint16_t *y_f16);
/* The scaled epilogue of one output (bias_n: pointer to bias[n] or NULL). */
float qg_int4_epilogue(int32_t acc, float sa, float sb, const void *bias_n, qg_int4_ftype bias_type, int relu);
/* Output (m, n) of a product with the exact sum s: acc[m N + n] = s and the epilogue into y_f32 / y_f16
 * (each where non-NULL). */
void qg_int4_gemm_store(const qg_int4_gemm_args *p, size_t m, size_t n, int32_t s, int32_t *acc, float *y_f32, uint16_t *y_f16);

/* W4A16 canonical layout, with the element counts of its buffers (checked against the shape). */
typedef struct {
    size_t N, K, g;
    const uint32_t *qweight; size_t qweight_len; /* N * K/8 */
    const uint16_t *scales;  size_t scales_len;  /* N * G (fp16 bits) */
    const uint8_t *zeros;    size_t zeros_len;   /* N * G, or NULL (symmetric, z = 8) */
    const int32_t *g_idx;    size_t g_idx_len;   /* K, or NULL (group of k is k / g) */
} qg_w4a16;

/* Full validation: shapes (N >= 1, K >= 8 a multiple of 8 and of g), g in {32, 64, 128, K}, buffer
 * lengths, scales finite and non-negative, zeros 0..15, g_idx a valid group assignment (every entry in
 * 0..G-1 and every group holding exactly g columns). */
int qg_w4a16_validate(const qg_w4a16 *L);
static inline unsigned qg_w4a16_code(const qg_w4a16 *L, size_t n, size_t k)
{
    return (L->qweight[n * (L->K / 8) + k / 8] >> (4 * (k % 8))) & 0xFu;
}
static inline size_t qg_w4a16_group(const qg_w4a16 *L, size_t k)
{
    return L->g_idx ? (size_t)L->g_idx[k] : k / L->g;
}
/* w: N x K float32, the exact decoded weights. */
int qg_w4a16_decode_ref(const qg_w4a16 *L, float *w);
/* x: batch x K fp16 bits (x_len must be batch * K; batch >= 1); y_f32 and/or y_f16 batch x N (either may
 * be NULL, not both). */
int qg_w4a16_gemv_ref(const qg_w4a16 *L, const uint16_t *x, size_t x_len, size_t batch, float *y_f32, uint16_t *y_f16);

/* Importer output: buffers of the canonical layout, sized N*K/8, N*G, N*G and (with g_idx) K. */
typedef struct {
    uint32_t *qweight;
    uint16_t *scales;
    uint8_t *zeros;   /* always written: the effective zero */
    int32_t *g_idx;   /* written when the source has one; may be NULL otherwise */
} qg_w4a16_out;

/* GPTQ checkpoint tensors: qweight K/8 x N int32 packed along K (row i holds k = 8i..8i+7, code j at
 * bits 4j), qzeros G x N/8 packed along N the same way, scales G x N fp16, optional g_idx K.
 * version 1 stores zero - 1 (effective = stored + 1), version 2 the zero itself. N a multiple of 8. */
typedef struct {
    size_t N, K, g;
    int version;
    const int32_t *qweight; size_t qweight_len;
    const int32_t *qzeros;  size_t qzeros_len;
    const uint16_t *scales; size_t scales_len;
    const int32_t *g_idx;   size_t g_idx_len;   /* NULL: none */
} qg_gptq_src;

/* AWQ checkpoint tensors: qweight K x N/8 int32 packed along N, nibble j of word w holding column
 * 8w + order[j] with order = [0, 2, 4, 6, 1, 3, 5, 7]; qzeros G x N/8 the same way; scales G x N. */
typedef struct {
    size_t N, K, g;
    const int32_t *qweight; size_t qweight_len;
    const int32_t *qzeros;  size_t qzeros_len;
    const uint16_t *scales; size_t scales_len;
} qg_awq_src;

/* The AWQ interleave: nibble j of a word holds column order[j] of its group of 8. */
extern const unsigned char qg_awq_order[8];

/* Bit-exact conversion into the canonical layout; the result passes qg_w4a16_validate. */
int qg_int4_import_gptq_ref(const qg_gptq_src *src, const qg_w4a16_out *out);
int qg_int4_import_awq_ref(const qg_awq_src *src, const qg_w4a16_out *out);

#ifdef __cplusplus
}
#endif
#endif
