/* Optimized SpQR kernels. Same contract and validation as qg_spqr_gemv_ref (qgold/spqr.h): every
 * kernel validates the whole layer first; the GEMV is bounded (float32 accumulation in a
 * kernel-specific order, deterministic and batch-invariant, result independent of the thread count). */
#ifndef QGOLD_KERNELS_SPQR_H
#define QGOLD_KERNELS_SPQR_H

#include "qgold/spqr.h"

#ifdef __cplusplus
extern "C" {
#endif

int qg_spqr_gemv_avx2(const qg_spqr_layer *L, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16);
int qg_spqr_gemv_neon(const qg_spqr_layer *L, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16);
/* CUDA, host pointers: validate, copy in, run on canary-guarded device outputs, copy out. */
int qg_spqr_gemv_cuda(const qg_spqr_layer *L, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16);

/* A layer whose arrays live in device memory (same meaning and lengths as qg_spqr_layer; it must be
 * valid: qg_spqr_validate its host copy first). Nothing is owned. */
typedef struct {
    size_t m, n;
    const uint64_t *dense;
    qg_spqr_outlier_kind outliers; /* NONE: row_offsets and col_vals are ignored */
    const int32_t *row_offsets;
    const uint32_t *col_vals;
    const uint16_t *perm;          /* NULL: identity */
} qg_spqr_dev_layer;
/* Bytes of device work area qg_spqr_gemv_cuda_async needs for n columns at this batch (x' gathered once:
 * at every batch above 1, and at batch 1 where n is too wide for a shared-memory copy of x); 0: none
 * (dwork may be NULL). */
size_t qg_spqr_cuda_work_bytes(size_t n, size_t batch);
/* CUDA, device pointers, asynchronous on `stream` (a cudaStream_t), for benchmarks: dx is batch x n fp16
 * (original column order), dy_f32 / dy_f16 batch x m (either may be NULL, not both), dwork a device
 * area of qg_spqr_cuda_work_bytes(n, batch) bytes (contents need not be set). Checks only the shape and
 * the batch; the layer's contents are trusted. Same arithmetic as qg_spqr_gemv_cuda. */
int qg_spqr_gemv_cuda_async(const qg_spqr_dev_layer *L, const void *dx, size_t batch, float *dy_f32, uint16_t *dy_f16,
                            void *dwork, void *stream);

#ifdef __cplusplus
}
#endif
#endif
