/* The K-quant `gemm` path (batch 1..64) on the GPU: tensor-core products of exact integer codes and fp16
 * activations per sub-block, scales applied in float32 (reference/spec/numerics.md, "K-quant products on
 * tensor cores"). Checks and output layout: qgold/kquants_gemm.h. */
#ifndef QGOLD_KERNELS_KQUANTS_GEMM_H
#define QGOLD_KERNELS_KQUANTS_GEMM_H

#include "qgold/kquants_gemm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CUDA, host pointers: validate, copy in, run on canary-guarded device outputs, copy out. */
int qg_kq_gemm_cuda(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                    float *y_f32, uint16_t *y_f16);
/* CUDA, device pointers (x 16-byte aligned), asynchronous on `stream` (a cudaStream_t), no validation
 * beyond the batch range: for benchmarks. */
int qg_kq_gemm_cuda_async(qg_ktype t, const void *dw, size_t rows, size_t cols, const void *dx, size_t batch, float *dy_f32,
                          uint16_t *dy_f16, void *stream);

#ifdef __cplusplus
}
#endif
#endif
