/* GPU half of qgold bench: what every format's GPU benchmark shares.
 *
 * BW_copy: cudaMemcpyAsync device-to-device of 1 GiB, bytes read + written, timed with events outside
 * any graph. Kernels: a CUDA graph of back-to-back calls is replayed and timed with events; the figure is
 * the median over repetitions of (graph time / calls), with min and max beside it. Each call streams far
 * more than the 50 MB L2 of an H100, so no figure measures the cache.
 */
#include "bench.h"
#include "bench_gpu.h"

#include "qgold/cuda.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#define CK QG_BENCH_CK

namespace {

int bw_copy(const qg_bench_opts *o, double *bw)
{
    size_t bytes = o->quick ? ((size_t)64 << 20) : ((size_t)1 << 30);
    void *a = nullptr, *b = nullptr;
    cudaStream_t s;
    cudaEvent_t e0, e1;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 1, bytes));
    CK(cudaStreamCreate(&s));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    double t[64];
    CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
    for (int r = 0; r < o->reps; r++) {
        CK(cudaEventRecord(e0, s));
        CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t[r] = 1e-3 * ms;
    }
    double med = qg_bench_median(t, o->reps, nullptr, nullptr);
    *bw = 2.0 * (double)bytes / med;
    cudaFree(a);
    cudaFree(b);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(s);
    return 0;
}


__global__ void k_fill_bytes(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t z = (uint32_t)i * 2654435761u ^ seed;
        z ^= z >> 15;
        z *= 2246822519u;
        z ^= z >> 13;
        p[i] = (uint8_t)z;
    }
}

/* fp16 values in [-1, 1): sign, exponent 0x0C..0x0E (2^-3..2^-1), random fraction. */
__global__ void k_fill_half(uint16_t *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t z = (uint32_t)i * 2654435761u;
        z ^= z >> 16;
        p[i] = (uint16_t)(((z & 1u) << 15) | ((12u + (z >> 1) % 3u) << 10) | ((z >> 4) & 0x3FFu));
    }
}


} // namespace


/* Times `calls` launches captured in one graph; per-call median/min/max over o->reps replays. */
extern "C" int qg_bench_time_graph(const qg_bench_opts *o, int calls, int (*launch)(void *ctx, int call, cudaStream_t s), void *ctx,
                                   double *med, double *lo, double *hi)
{
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    cudaEvent_t e0, e1;
    CK(cudaStreamCreate(&s));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    int rc = 0;
    for (int c = 0; c < calls && rc == 0; c++) rc = launch(ctx, c, s);
    CK(cudaStreamEndCapture(s, &g));
    if (rc != 0) return rc;
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, s)); /* warm-up */
    CK(cudaStreamSynchronize(s));
    double t[64];
    for (int r = 0; r < o->reps; r++) {
        CK(cudaEventRecord(e0, s));
        CK(cudaGraphLaunch(ge, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t[r] = 1e-3 * ms / calls;
    }
    *med = qg_bench_median(t, o->reps, lo, hi);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(s);
    return 0;
}

void qg_bench_fill_bytes(uint8_t *p, size_t n, uint32_t seed) { k_fill_bytes<<<1024, 256>>>(p, n, seed); }
void qg_bench_fill_half(uint16_t *p, size_t n) { k_fill_half<<<1024, 256>>>(p, n); }

/* Y (rows x batch, column-major) = W (rows x cols, row-major = cols x rows column-major)^T X. */
int qg_bench_blas_launch(void *vctx, int call, cudaStream_t s)
{
    qg_bench_blas_ctx *c = (qg_bench_blas_ctx *)vctx;
    const float one = 1.0f, zero = 0.0f;
    cublasSetStream(c->h, s);
    cublasStatus_t st = cublasGemmEx(c->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)c->rows, (int)c->batch, (int)c->cols, &one,
                                     c->w[call % c->ncopies], CUDA_R_16F, (int)c->cols, c->x, CUDA_R_16F, (int)c->cols, &zero,
                                     c->y, CUDA_R_16F, (int)c->rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "qgold bench: cublasGemmEx failed (%d)\n", (int)st);
        return 1;
    }
    return 0;
}

/* Enough copies that one pass streams >= 12 x the L2 size (bench spec), at least 2. */
int qg_bench_copies_for(size_t bytes, size_t l2)
{
    size_t want = 12 * l2;
    size_t n = (want + bytes - 1) / bytes;
    return (int)(n < 2 ? 2 : n > 256 ? 256 : n);
}

int qg_bench_device_fits(const char *label, double bytes)
{
    size_t fr = 0, total = 0;
    if (cudaMemGetInfo(&fr, &total) != cudaSuccess || bytes <= (double)fr) return 0; /* else cudaMalloc reports */
    fprintf(stderr, "qgold: bench %s: cannot allocate the device buffers: at least %.0f bytes (%zu free of %zu)\n", label, bytes, fr,
            total);
    return 1;
}

int qg_bench_cublas_open(cublasHandle_t *h, void **ws)
{
    if (cublasCreate(h) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "qgold bench: cublasCreate failed\n");
        return 1;
    }
    CK(cudaMalloc(ws, (size_t)32 << 20));
    cublasSetWorkspace(*h, *ws, (size_t)32 << 20); /* no allocation inside graph capture */
    return 0;
}

extern "C" int qg_bench_gpu_begin(const qg_bench_opts *o, double *bw)
{
    char dev[256];
    qg_cuda_describe(dev, sizeof dev);
    qg_bench_note(o, "gpu", "%s", dev);
    int clk = 0, memclk = 0;
    cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
    cudaDeviceGetAttribute(&memclk, cudaDevAttrMemoryClockRate, 0);
    qg_bench_note(o, "gpu_clocks", "sm max %d MHz, memory %d MHz (from device attributes)", clk / 1000, memclk / 1000);
    *bw = 0;
    if (bw_copy(o, bw) != 0) return 1;
    qg_bench_note(o, "BW_copy_GBps", "%.1f", *bw / 1e9);
    return 0;
}
