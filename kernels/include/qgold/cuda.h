/* Host-side helpers of the CUDA backend (kernels/cuda/). Present only in builds with CUDA. */
#ifndef QGOLD_CUDA_H
#define QGOLD_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable devices (0 when none, with the reason in `why`). Cached after the first call. */
int qg_cuda_device_count(char *why, size_t why_len);
/* "NVIDIA H100 80GB HBM3, sm_90, driver 13.0" of device 0, or the error. */
void qg_cuda_describe(char *buf, size_t len);
/* The message of the last failed CUDA call made by a qgold wrapper in this thread: call and error. */
const char *qg_cuda_last_error(void);

/* Benchmark launchers on device pointers (stream is a cudaStream_t); asynchronous, no copies. */
int qg_fp16_convert_cuda_async(const char *path, const void *dx, void *dy, size_t n, void *stream);

#ifdef __cplusplus
}
#endif
#endif
