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

/* The Q4_K/Q5_K min term's split of a float32 sub-block sum into three bf16 (hi, mid, lo), as the kernels
 * run it: x holds n floats (n even), parts gets 3 words a pair (words 3i + p: part p of x[2i] in the low
 * half, of x[2i + 1] in the high half). gpu.tc_probe.cuda checks hi + mid + lo == x exactly. */
int qg_cuda_kq_xsplit_probe(const float *x, uint32_t *parts, size_t n);

#ifdef __cplusplus
}
#endif
#endif
