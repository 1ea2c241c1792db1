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

/* Device output buffers of the host wrappers (qg_*_cuda). By default an output is a plain device
 * allocation holding the caller's initial bytes and copied back after the kernel. A test harness may
 * install hooks that lay the buffer out its own way (canary margins around the payload, checked after
 * the kernel: tests/harness/guard_cuda.c), so the kernels carry no test machinery. `alloc` returns the
 * allocation and the payload pointer the kernel writes; `finish` copies the payload to `host` and
 * returns 0 or an error code (qgold/errors.h); `release` frees. */
typedef struct {
    int (*alloc)(void **base, void **payload, const void *host_initial, size_t bytes);
    int (*finish)(void *base, void *payload, void *host, size_t bytes);
    void (*release)(void *base);
} qg_cuda_output_hooks;
/* Installs the hooks for every later wrapper call (NULL restores the default). Not thread-safe. */
void qg_cuda_set_output_hooks(const qg_cuda_output_hooks *hooks);
/* The hooks in force (the default ones when none were installed). */
const qg_cuda_output_hooks *qg_cuda_output_hooks_in_force(void);

/* One buffer of a call through qg_cuda_run. */
typedef enum {
    QG_CUDA_IN = 0,      /* `host` (read only) is uploaded; the launcher reads it */
    QG_CUDA_OUT = 1,     /* allocated through the output hooks holding `host`'s initial bytes, copied back to
                            `host` after the launch (the hooks may report an error, e.g. a touched canary) */
    QG_CUDA_SCRATCH = 2, /* zeroed device memory for the launcher's own use (a workspace); not copied back */
} qg_cuda_role;

typedef struct {
    qg_cuda_role role;
    void *host;   /* IN: source; OUT: destination; SCRATCH: unused */
    size_t bytes; /* 0: the buffer is absent and the launcher gets NULL for it */
} qg_cuda_buf;

/* Enqueues the kernel(s) of one call on `stream` (a cudaStream_t) reading and writing the device buffers
 * dev[0..n) (in the order of the qg_cuda_buf array); returns 0 or an error code. */
typedef int (*qg_cuda_launch_fn)(const void *ctx, void *const *dev, void *stream);

/* The one host wrapper of every CUDA kernel: upload the IN buffers, allocate the OUT buffers through the
 * output hooks and the SCRATCH buffers zeroed, launch, synchronize, copy the OUT buffers back, free
 * everything. Returns the first error (0: ok). Argument validation happens before, in the caller, with
 * the reference's checks, so a rejected call never touches the device. At most 16 buffers. */
int qg_cuda_run(const qg_cuda_buf *bufs, size_t n, qg_cuda_launch_fn launch, const void *ctx);

/* The CUDA runtime calls the hooks need, for callers that do not compile CUDA themselves; each
 * returns 0 or QG_ERR_device_failed (the message in qg_cuda_last_error()). */
int qg_cuda_alloc(void **p, size_t bytes);
void qg_cuda_free(void *p);
int qg_cuda_fill(void *dev, int byte, size_t bytes);
int qg_cuda_to_device(void *dev, const void *host, size_t bytes);
int qg_cuda_to_host(void *host, const void *dev, size_t bytes);

/* Benchmark launchers on device pointers (stream is a cudaStream_t); asynchronous, no copies. */
int qg_fp16_convert_cuda_async(const char *path, const void *dx, void *dy, size_t n, void *stream);

#ifdef __cplusplus
}
#endif
#endif
