/* GPU half of qgold bench.
 *
 * BW_copy: cudaMemcpyAsync device-to-device of 1 GiB, bytes read + written, timed with events outside
 * any graph. Kernels: a CUDA graph of back-to-back calls is replayed and timed with events; the figure is
 * the median over repetitions of (graph time / calls), with min and max beside it. Each call streams far
 * more than the 50 MB L2 of an H100, so no figure measures the cache.
 */
#include "bench.h"

#include "qgold/cuda.h"
#include "qgold/registry.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

namespace {

#define CK(call)                                                                                     \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) {                                                                     \
            fprintf(stderr, "qgold bench: %s: %s\n", #call, cudaGetErrorString(e_));                 \
            return 1;                                                                                \
        }                                                                                            \
    } while (0)

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

namespace {

struct conv_ctx {
    const char *path;
    const void *x;
    void *y;
    size_t n;
};

int conv_launch(void *vctx, int, cudaStream_t s)
{
    conv_ctx *c = (conv_ctx *)vctx;
    return qg_fp16_convert_cuda_async(c->path, c->x, c->y, c->n, s);
}

int bench_convert(const qg_bench_opts *o, double bw)
{
    size_t n = o->quick ? ((size_t)1 << 22) : ((size_t)1 << 28);
    void *x = nullptr, *y = nullptr;
    CK(cudaMalloc(&x, n * 4));
    CK(cudaMalloc(&y, n * 4));
    CK(cudaMemset(x, 0x3C, n * 4));
    for (size_t i = 0; i < qg_registry_count(); i++) {
        const qg_kernel *k = qg_registry_at(i);
        if (strcmp(k->format, o->format) != 0 || k->backend != QG_BACKEND_CUDA || k->kind != QG_KIND_CONVERT) continue;
        conv_ctx c = {k->path, x, y, n};
        qg_bench_row row = {k->format, k->path, "cuda", "", 1, 0, 0, 0, 0, 0, "BW_copy", 0, ""};
        snprintf(row.shape, sizeof row.shape, "%zu", n);
        if (qg_bench_time_graph(o, o->quick ? 2 : 5, conv_launch, &c, &row.t_med, &row.t_lo, &row.t_hi) != 0) return 1;
        row.bytes = (double)n * (double)(qg_elem_size(k->in_elem) + qg_elem_size(k->out_elem));
        row.eff = row.bytes / row.t_med / bw;
        qg_bench_emit(o, &row);
    }
    cudaFree(x);
    cudaFree(y);
    return 0;
}

} // namespace

extern "C" int qg_bench_gpu(const qg_bench_opts *o)
{
    char dev[256];
    qg_cuda_describe(dev, sizeof dev);
    qg_bench_note(o, "gpu", "%s", dev);
    int clk = 0, memclk = 0;
    cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
    cudaDeviceGetAttribute(&memclk, cudaDevAttrMemoryClockRate, 0);
    qg_bench_note(o, "gpu_clocks", "sm max %d MHz, memory %d MHz (from device attributes)", clk / 1000, memclk / 1000);
    double bw = 0;
    if (bw_copy(o, &bw) != 0) return 1;
    qg_bench_note(o, "BW_copy_GBps", "%.1f", bw / 1e9);
    if (!strcmp(o->format, "fp16")) return bench_convert(o, bw);
    return 0;
}
