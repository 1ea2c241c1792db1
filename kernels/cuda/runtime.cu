/* CUDA backend runtime helpers: device discovery, error capture, guarded output buffers. */
#include "common.cuh"
#include "qgold/cuda.h"

#include <stdio.h>
#include <string.h>

static thread_local char g_last_error[256];

extern "C" const char *qg_cuda_last_error(void) { return g_last_error; }

int qg_cuda_fail(const char *what, cudaError_t e)
{
    snprintf(g_last_error, sizeof g_last_error, "%s: %s", what, cudaGetErrorString(e));
    return QG_ERR_device_failed;
}

extern "C" int qg_cuda_device_count(char *why, size_t why_len)
{
    static int cached = -1;
    static char reason[200];
    if (cached < 0) {
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess) {
            snprintf(reason, sizeof reason, "no CUDA device (%s)", cudaGetErrorString(e));
            n = 0;
        } else if (n == 0) {
            snprintf(reason, sizeof reason, "no CUDA device");
        }
        cached = n;
    }
    if (cached == 0 && why != NULL && why_len > 0) snprintf(why, why_len, "%s", reason);
    return cached;
}

extern "C" void qg_cuda_describe(char *buf, size_t len)
{
    cudaDeviceProp p;
    int drv = 0, rt = 0;
    cudaError_t e = cudaGetDeviceProperties(&p, 0);
    if (e != cudaSuccess) {
        snprintf(buf, len, "no device (%s)", cudaGetErrorString(e));
        return;
    }
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    snprintf(buf, len, "%s, sm_%d%d, %d SMs, driver %d.%d, runtime %d.%d", p.name, p.major, p.minor,
             p.multiProcessorCount, drv / 1000, (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10);
}

int qg_guarded_dev_alloc(qg_guarded_dev *g, const void *host_initial, size_t bytes)
{
    int rc = QG_ERR_ok;
    g->base = NULL;
    g->payload = NULL;
    g->bytes = bytes;
    QG_CUDA_TRY(cudaMalloc((void **)&g->base, bytes + 2 * QG_CUDA_CANARY_BYTES));
    g->payload = g->base + QG_CUDA_CANARY_BYTES;
    QG_CUDA_TRY(cudaMemset(g->base, QG_CUDA_CANARY, bytes + 2 * QG_CUDA_CANARY_BYTES));
    if (bytes > 0) QG_CUDA_TRY(cudaMemcpy(g->payload, host_initial, bytes, cudaMemcpyHostToDevice));
done:
    return rc;
}

int qg_guarded_dev_finish(qg_guarded_dev *g, void *host)
{
    int rc = QG_ERR_ok;
    unsigned char margin[2][QG_CUDA_CANARY_BYTES];
    if (g->bytes > 0) QG_CUDA_TRY(cudaMemcpy(host, g->payload, g->bytes, cudaMemcpyDeviceToHost));
    QG_CUDA_TRY(cudaMemcpy(margin[0], g->base, QG_CUDA_CANARY_BYTES, cudaMemcpyDeviceToHost));
    QG_CUDA_TRY(cudaMemcpy(margin[1], g->base + QG_CUDA_CANARY_BYTES + g->bytes, QG_CUDA_CANARY_BYTES,
                           cudaMemcpyDeviceToHost));
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < QG_CUDA_CANARY_BYTES; i++)
            if (margin[s][i] != QG_CUDA_CANARY) return QG_ERR_canary_clobbered;
done:
    return rc;
}

void qg_guarded_dev_free(qg_guarded_dev *g)
{
    if (g->base != NULL) cudaFree(g->base);
    g->base = NULL;
}
