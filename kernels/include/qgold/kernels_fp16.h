/* Optimized kernels of the `fp16` format. Same contracts as the *_ref functions in qgold/fp16.h:
 * bit-exact (NaNs: same sign), n may be 0, NULL with n > 0 gives QG_ERR_argument_invalid. Only call a
 * SIMD kernel when qg_backend_available() says its backend is available. */
#ifndef QGOLD_KERNELS_FP16_H
#define QGOLD_KERNELS_FP16_H

#include "qgold/fp16.h"

#ifdef __cplusplus
extern "C" {
#endif

int qg_fp16_f32_to_f16_avx2(const uint32_t *x, qg_f16 *y, size_t n);
int qg_fp16_f16_to_f32_avx2(const qg_f16 *x, uint32_t *y, size_t n);
int qg_fp16_f32_to_bf16_avx2(const uint32_t *x, qg_bf16 *y, size_t n);
int qg_fp16_bf16_to_f32_avx2(const qg_bf16 *x, uint32_t *y, size_t n);

int qg_fp16_f32_to_f16_neon(const uint32_t *x, qg_f16 *y, size_t n);
int qg_fp16_f16_to_f32_neon(const qg_f16 *x, uint32_t *y, size_t n);
int qg_fp16_f32_to_bf16_neon(const uint32_t *x, qg_bf16 *y, size_t n);
int qg_fp16_bf16_to_f32_neon(const qg_bf16 *x, uint32_t *y, size_t n);

/* CUDA: host pointers; the wrapper copies to the device, runs, checks device-side canaries around the
 * output and copies back. Returns QG_ERR_device_failed (see qg_cuda_last_error) on a CUDA failure. */
int qg_fp16_f32_to_f16_cuda(const uint32_t *x, qg_f16 *y, size_t n);
int qg_fp16_f16_to_f32_cuda(const qg_f16 *x, uint32_t *y, size_t n);
int qg_fp16_f32_to_bf16_cuda(const uint32_t *x, qg_bf16 *y, size_t n);
int qg_fp16_bf16_to_f32_cuda(const qg_bf16 *x, uint32_t *y, size_t n);

#ifdef __cplusplus
}
#endif
#endif
