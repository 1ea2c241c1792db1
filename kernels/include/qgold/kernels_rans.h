/* Optimized rANS kernels. Same contracts and validation as the *_ref functions of qgold/rans.h: the
 * decoder and the fused product are bit-exact (the summation order is pinned by the format), so is the
 * plain int8 GEMV baseline. */
#ifndef QGOLD_KERNELS_RANS_H
#define QGOLD_KERNELS_RANS_H

#include "qgold/rans.h"

#ifdef __cplusplus
extern "C" {
#endif

int qg_rans_decode_avx2(const uint8_t *buf, size_t len, uint8_t *w, size_t w_len);
int qg_rans_gemv_avx2(const uint8_t *buf, size_t len, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16);
int qg_int8_gemv_avx2(const uint8_t *w, const float *scales, size_t M, size_t K, const uint16_t *x, size_t batch, float *y_f32,
                      uint16_t *y_f16);

int qg_rans_decode_neon(const uint8_t *buf, size_t len, uint8_t *w, size_t w_len);
int qg_rans_gemv_neon(const uint8_t *buf, size_t len, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16);
int qg_int8_gemv_neon(const uint8_t *w, const float *scales, size_t M, size_t K, const uint16_t *x, size_t batch, float *y_f32,
                      uint16_t *y_f16);

/* CUDA, host pointers: validate on the host, copy in, run, read the per-tile status words, copy out. */
int qg_rans_decode_cuda(const uint8_t *buf, size_t len, uint8_t *w, size_t w_len);
int qg_rans_gemv_cuda(const uint8_t *buf, size_t len, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16);
int qg_int8_gemv_cuda(const uint8_t *w, const float *scales, size_t M, size_t K, const uint16_t *x, size_t batch, float *y_f32,
                      uint16_t *y_f16);

/* CUDA benchmark launchers on device pointers (stream is a cudaStream_t); asynchronous, no copies, no
 * host-side checks beyond the batch range. A plan holds what the host learns from a container once
 * (qg_rans_check, the slot table on the device, whether every tile is predictor mode 0 or 1); it serves
 * every device copy of the same bytes. Status words: one uint32 per tile (0 = ok, else the tile's
 * error code). Scratch: qg_rans_cuda_scratch_bytes(M, K) bytes (activations as float, tile partials). */
typedef struct {
    uint32_t M, K, tiles_r, tiles_c, flags;
    int fast;
    uint64_t scales_offset, meta_offset, len;
    void *dtab;
} qg_rans_cuda_plan;
int qg_rans_cuda_plan_make(const uint8_t *buf, size_t len, qg_rans_cuda_plan *p);
void qg_rans_cuda_plan_free(qg_rans_cuda_plan *p);
size_t qg_rans_cuda_scratch_bytes(uint32_t M, uint32_t K);
int qg_rans_decode_cuda_async(const qg_rans_cuda_plan *p, const void *dbuf, uint8_t *dw, uint32_t *dstatus, void *stream);
int qg_rans_gemv_cuda_async(const qg_rans_cuda_plan *p, const void *dbuf, const void *dx, size_t batch, void *dscratch,
                            uint32_t *dstatus, float *dy32, uint16_t *dy16, void *stream);
/* The int8 baseline: dw M x K bytes, dscales M floats, dx batch x K fp16; scratch as above. */
int qg_int8_gemv_cuda_async(const void *dw, const float *dscales, size_t M, size_t K, const void *dx, size_t batch, void *dscratch,
                            float *dy32, uint16_t *dy16, void *stream);

#ifdef __cplusplus
}
#endif
#endif
