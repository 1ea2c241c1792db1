/* Shared pieces of the CUDA backend: error capture (never a device assert; host calls return codes)
 * and guarded device output buffers. */
#ifndef QGOLD_CUDA_COMMON_CUH
#define QGOLD_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "qgold/errors.h"

/* Records "<what>: <cudaGetErrorString>" for qg_cuda_last_error() and returns QG_ERR_device_failed. */
int qg_cuda_fail(const char *what, cudaError_t e);

#define QG_CUDA_TRY(call)                                                                           \
    do {                                                                                            \
        cudaError_t qg_e_ = (call);                                                                 \
        if (qg_e_ != cudaSuccess) { rc = qg_cuda_fail(#call, qg_e_); goto done; }                  \
    } while (0)

/* Device output with canary margins: [margin | payload | margin]. The margins are filled with a canary
 * byte, the payload with the caller's host bytes (the harness poisons them), so after the kernel both
 * "wrote outside" and "left unwritten" are visible to the host checks. */
enum { QG_CUDA_CANARY_BYTES = 256, QG_CUDA_CANARY = 0xC3 };

typedef struct {
    unsigned char *base; /* device allocation */
    void *payload;       /* base + margin */
    size_t bytes;
} qg_guarded_dev;

int qg_guarded_dev_alloc(qg_guarded_dev *g, const void *host_initial, size_t bytes);
/* Copies the payload back to `host` and verifies both margins; QG_ERR_canary_clobbered when touched. */
int qg_guarded_dev_finish(qg_guarded_dev *g, void *host);
void qg_guarded_dev_free(qg_guarded_dev *g);

#endif
