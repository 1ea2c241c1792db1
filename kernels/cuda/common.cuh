/* Shared pieces of the CUDA backend: error capture (never a device assert; host calls return codes)
 * and device output buffers (guarded by a harness through the output hooks). */
#ifndef QGOLD_CUDA_COMMON_CUH
#define QGOLD_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "qgold/errors.h"

/* Records "<what>: <cudaGetErrorString>" for qg_cuda_last_error() and returns QG_ERR_device_failed. */
int qg_cuda_fail(const char *what, cudaError_t e);

/* Number of multiprocessors of the current device (0 when it cannot be read). */
int qg_cuda_sm_count();

#define QG_CUDA_TRY(call)                                                                           \
    do {                                                                                            \
        cudaError_t qg_e_ = (call);                                                                 \
        if (qg_e_ != cudaSuccess) { rc = qg_cuda_fail(#call, qg_e_); goto done; }                  \
    } while (0)

/* A device output of a host wrapper: allocated, finished (copied back) and released through the
 * output hooks of qgold/cuda.h, so a test harness can surround the payload with canaries. */
typedef struct {
    void *base;    /* device allocation */
    void *payload; /* what the kernel writes: base, or inside it */
    size_t bytes;
} qg_guarded_dev;

int qg_guarded_dev_alloc(qg_guarded_dev *g, const void *host_initial, size_t bytes);
/* Copies the payload back to `host`; the hooks may report an error (a touched canary). */
int qg_guarded_dev_finish(qg_guarded_dev *g, void *host);
void qg_guarded_dev_free(qg_guarded_dev *g);

#endif
