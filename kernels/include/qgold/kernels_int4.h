/* Optimized INT4 CPU kernels. Same contract, validation and error codes as the reference functions of
 * qgold/int4.h: every kernel validates its whole input first and writes nothing on an error.
 *   w4a16_decode  exact (the decoded weight (q - z) * s is exact in float32)
 *   w4a16_gemv    bounded: float32 accumulation in a kernel-specific order (8 lanes, FMA), deterministic,
 *                 batch-invariant and independent of the thread count; any batch >= 1
 *   gemm_packed   exact: the int32 sums are exact in any order, the epilogue is the reference's
 */
#ifndef QGOLD_KERNELS_INT4_H
#define QGOLD_KERNELS_INT4_H

#include "qgold/int4.h"

#ifdef __cplusplus
extern "C" {
#endif

int qg_w4a16_decode_avx2(const qg_w4a16 *L, float *w);
int qg_w4a16_gemv_avx2(const qg_w4a16 *L, const uint16_t *x, size_t x_len, size_t batch, float *y_f32, uint16_t *y_f16);
int qg_int4_gemm_packed_avx2(const qg_int4_gemm_args *p, int32_t *acc, float *y_f32, uint16_t *y_f16);

int qg_w4a16_decode_neon(const qg_w4a16 *L, float *w);
int qg_w4a16_gemv_neon(const qg_w4a16 *L, const uint16_t *x, size_t x_len, size_t batch, float *y_f32, uint16_t *y_f16);
int qg_int4_gemm_packed_neon(const qg_int4_gemm_args *p, int32_t *acc, float *y_f32, uint16_t *y_f16);

#ifdef __cplusplus
}
#endif
#endif
