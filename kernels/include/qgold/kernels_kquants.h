/* Optimized K-quant kernels. Same contracts and validation as the *_ref functions of qgold/kquants.h:
 * dequantization is bit-exact; GEMV is bounded (float32 accumulation in a kernel-specific order,
 * deterministic and batch-invariant); the integer dot outputs S and M are exact. */
#ifndef QGOLD_KERNELS_KQUANTS_H
#define QGOLD_KERNELS_KQUANTS_H

#include "qgold/kquants.h"

#ifdef __cplusplus
extern "C" {
#endif

int qg_kq_dequant_f32_avx2(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y);
int qg_kq_dequant_f16_avx2(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, uint16_t *y);
int qg_kq_dot_q8k_avx2(qg_ktype t, const uint8_t *wrow, const uint8_t *q8row, size_t cols, int32_t *S, int32_t *M, float *result);
int qg_kq_gemv_avx2(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                    float *y_f32, uint16_t *y_f16);

int qg_kq_dequant_f32_neon(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y);
int qg_kq_dequant_f16_neon(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, uint16_t *y);
int qg_kq_dot_q8k_neon(qg_ktype t, const uint8_t *wrow, const uint8_t *q8row, size_t cols, int32_t *S, int32_t *M, float *result);
int qg_kq_gemv_neon(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                    float *y_f32, uint16_t *y_f16);

/* CUDA, host pointers: validate, then one qg_cuda_run (copy in, outputs through the output hooks, copy out). */
int qg_kq_dequant_f32_cuda(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y);
int qg_kq_dequant_f16_cuda(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, uint16_t *y);
int qg_kq_gemv_cuda(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                    float *y_f32, uint16_t *y_f16);
/* CUDA, device pointers, asynchronous on `stream` (a cudaStream_t), no validation: for benchmarks. */
int qg_kq_gemv_cuda_async(qg_ktype t, const void *dw, size_t rows, size_t cols, const void *dx, size_t batch, float *dy_f32,
                          uint16_t *dy_f16, void *stream);
/* CUDA, device pointers: dequantize rows x cols weights (exactly one of dy_f32 / dy_f16), asynchronous on
 * `stream`, no validation beyond the type: for benchmarks. */
int qg_kq_dequant_cuda_async(qg_ktype t, const void *dblocks, size_t rows, size_t cols, float *dy_f32, uint16_t *dy_f16,
                             void *stream);

#ifdef __cplusplus
}
#endif
#endif
