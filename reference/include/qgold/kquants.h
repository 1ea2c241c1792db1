/* GGUF K-quants Q4_K, Q5_K, Q6_K, Q8_K: the reference (spec: reference/spec/kquants.md).
 *
 * Blocks travel as raw bytes in the GGUF layout (little-endian, no alignment beyond 1 byte assumed).
 * A row of `cols` elements is cols/256 consecutive blocks; a matrix is `rows` such rows, row-major.
 * Every function validates its arguments and returns a qg_status (qgold/errors.h), 0 on success:
 *   an unknown type                       -> QG_ERR_kq_type_unknown
 *   a NULL pointer                        -> QG_ERR_argument_invalid
 *   cols zero or not a multiple of 256    -> QG_ERR_kq_cols_not_multiple
 *   rows zero, or rows*cols*4 bytes not addressable in size_t -> QG_ERR_shape_invalid
 *   nbytes != rows * cols/256 * block bytes -> QG_ERR_kq_size_mismatch
 *   batch outside 1..QG_KQ_MAX_BATCH      -> QG_ERR_kq_batch_out_of_range
 *   batch*cols fp16 or batch*rows floats not addressable -> QG_ERR_shape_invalid
 * Checks run in that order; on an error nothing is written to any output.
 */
#ifndef QGOLD_KQUANTS_H
#define QGOLD_KQUANTS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { QG_Q4_K = 0, QG_Q5_K = 1, QG_Q6_K = 2, QG_Q8_K = 3 } qg_ktype;
enum { QG_QK_K = 256, QG_KQ_MAX_BATCH = 16 };

/* Bytes per 256-element block: 144, 176, 210, 292; 0 for an unknown type. */
size_t qg_kq_block_bytes(qg_ktype t);

/* "q4_k", "q5_k", "q6_k", "q8_k"; "unknown" for an unknown type. */
const char *qg_kq_name(qg_ktype t);

/* The type of a name (ASCII case-insensitive, so ggml's "q4_K" works too), or -1. */
int qg_kq_from_name(const char *name);

/* Validates a matrix of `rows` rows of `cols` elements stored in `nbytes` bytes:
 * rows >= 1, cols a positive multiple of 256, nbytes == rows * cols/256 * block bytes. */
int qg_kq_check_shape(qg_ktype t, size_t rows, size_t cols, size_t nbytes);

/* Dequantize: blocks -> float32, y[r*cols + k] (rows*cols values). Bit-exact by construction: the
 * value is the correctly rounded float32 of the exact formula (see the spec). */
int qg_kq_dequant_f32_ref(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y);

/* Dequantize to fp16 bits: the float32 value above rounded once to fp16 (RNE). */
int qg_kq_dequant_f16_ref(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, uint16_t *y);

/* Quantize float32 rows -> blocks with ggml's non-imatrix reference algorithm
 * (quantize_row_q{4,5,6,8}_K_ref), bit for bit; every type, Q8_K included. x holds rows*cols floats,
 * blocks receives nbytes = rows * cols/256 * block bytes. Compatibility with ggml is claimed for finite x;
 * non-finite x still gives deterministic bytes (the same IEEE float32 operations), but garbage-in. */
int qg_kq_quantize_ref(qg_ktype t, const float *x, size_t rows, size_t cols, uint8_t *blocks, size_t nbytes);

/* Whether each block of x lies in the quantizer's valid domain: in_domain[i] (rows * cols/256 entries)
 * receives 1 when the 256 inputs of block i are finite, every round-to-nearest of the algorithm above
 * sees |v| <= 4194303 (where ggml's magic-number rounding is exact), every fitted scale and min is
 * finite (the fits' float32 sums did not overflow) and the stored d/dmin are finite (no fp16
 * overflow); 0 otherwise. Huge values, subnormal block ranges and scales far apart leave the domain;
 * small values whose d underflows to 0 do not (that is ordinary precision loss). qg_kq_quantize_ref
 * still writes ggml's bytes for a block outside, but they do not approximate x. *outside (may be NULL)
 * receives the number of 0 entries. blocks, when not NULL, receives the same bytes qg_kq_quantize_ref
 * writes (rows * cols/256 * block bytes), so one pass both quantizes and reports. Same argument checks
 * as qg_kq_quantize_ref. */
int qg_kq_quantize_domain_ref(qg_ktype t, const float *x, size_t rows, size_t cols, uint8_t *blocks, uint8_t *in_domain,
                              size_t *outside);

/* One weight row (cols/256 blocks of t in {Q4_K, Q5_K, Q6_K}) dotted with one Q8_K row (cols/256 blocks).
 * S[i], M[i] (i = 0..cols/256-1; either pointer may be NULL) receive the exact per-block integers:
 *   Q4_K/Q5_K  S = sum_s sc[s] * sum_{l<32} q[32s+l] * q8[32s+l],   M = sum_s m[s] * (bsums[2s] + bsums[2s+1])
 *   Q6_K       S = sum_g sc[g] * sum_{l<16} (q[16g+l] - 32) * q8[16g+l],   M = 0
 * (M uses the Q8_K block's stored bsums, as ggml does.) *result receives
 *   sum_i (D_i*dy_i*S_i - Dm_i*dy_i*M_i)
 * in float32, in the order of ggml's generic C dot (ggml_vec_dot_q*_K_q8_K_generic), every operation a
 * separate float32 rounding: S_i is split into 8 exact integer lanes, lane L = the terms of elements
 * e with e % 8 == L; per block d = D*dy, then for L = 0..7 sums[L] += d * (float)lane[L]; for Q4_K/Q5_K
 * also dmin = Dm*dy, sumf -= dmin * (float)M; after the last block sumf += sums[0], ..., sums[7]
 * (sumf and sums[] start at +0.0f). t == QG_Q8_K returns QG_ERR_unsupported. */
int qg_kq_dot_q8k_ref(qg_ktype t, const uint8_t *wrow, const uint8_t *q8row, size_t cols, int32_t *S, int32_t *M,
                      float *result);

/* The argument checks of every GEMV implementation, in the order of the table above (type, pointers,
 * shape and size, batch, addressable batch buffers): kernels call it so that all backends reject the
 * same input with the same error. */
int qg_kq_check_gemv(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                     const float *y_f32, const uint16_t *y_f16);

/* Fused GEMV with fp16 activations. w: rows x cols weights of type t (any of the four) in nbytes bytes;
 * x: batch vectors of cols fp16 values, x[b*cols + k]; batch 1..QG_KQ_MAX_BATCH.
 *   y[b*rows + m] = sum_k W[m][k] * X[b][k]
 * with W the float32 dequantized weight and X the exact float32 value of the fp16 input, accumulated in
 * float32 in index order k = 0..cols-1 starting from +0.0f, each product and each sum a separate
 * float32 rounding (so every output column is independent of the batch). y_f32 receives the float32
 * result, y_f16 (fp16 bits) that result rounded once; either may be NULL, not both. */
int qg_kq_gemv_ref(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                   float *y_f32, uint16_t *y_f16);

#ifdef __cplusplus
}
#endif
#endif
