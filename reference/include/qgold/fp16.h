/* fp16 and bf16 conversions and RN16 arithmetic: the reference (spec: reference/spec/fp16.md).
 *
 * Half-precision values travel as their bit patterns (qg_f16, qg_bf16) so that no compiler's
 * _Float16 semantics (excess precision, flush-to-zero) can leak in.
 */
#ifndef QGOLD_FP16_H
#define QGOLD_FP16_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t qg_f16;  /* IEEE binary16 bits */
typedef uint16_t qg_bf16; /* top half of a float32 */

/* Scalar conversions on bit patterns. */
qg_f16 qg_f32bits_to_f16(uint32_t x);
uint32_t qg_f16_to_f32bits(qg_f16 h);
qg_bf16 qg_f32bits_to_bf16(uint32_t x);
uint32_t qg_bf16_to_f32bits(qg_bf16 h);

/* The same on float values. */
qg_f16 qg_f32_to_f16(float x);
float qg_f16_to_f32(qg_f16 h);
qg_bf16 qg_f32_to_bf16(float x);
float qg_bf16_to_f32(qg_bf16 h);

uint32_t qg_f32_bits(float x);
float qg_f32_from_bits(uint32_t b);

/* True when h is a NaN (exponent all ones, fraction non-zero). */
int qg_f16_isnan(qg_f16 h);
int qg_bf16_isnan(qg_bf16 h);

/* RN16 arithmetic: compute in float32, round once to fp16 (exact for +,-,x: see fp16.md). */
qg_f16 qg_rn16_add(qg_f16 a, qg_f16 b);
qg_f16 qg_rn16_sub(qg_f16 a, qg_f16 b);
qg_f16 qg_rn16_mul(qg_f16 a, qg_f16 b);

/* Array forms: the reference kernels of the four `fp16` paths. n may be 0; pointers may then be NULL.
 * They cannot fail on valid pointers; they return QG_ERR_argument_invalid for NULL with n > 0. */
int qg_fp16_f32_to_f16_ref(const uint32_t *x, qg_f16 *y, size_t n);
int qg_fp16_f16_to_f32_ref(const qg_f16 *x, uint32_t *y, size_t n);
int qg_fp16_f32_to_bf16_ref(const uint32_t *x, qg_bf16 *y, size_t n);
int qg_fp16_bf16_to_f32_ref(const qg_bf16 *x, uint32_t *y, size_t n);

#ifdef __cplusplus
}
#endif
#endif
