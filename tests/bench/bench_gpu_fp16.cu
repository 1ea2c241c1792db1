/* GPU benchmark of the fp16/bf16 conversions against BW_copy. */
#include "bench.h"
#include "bench_gpu.h"

#include "qgold/cuda.h"
#include "qgold/kernels_kquants.h"
#include "qgold/registry.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#define CK QG_BENCH_CK

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

extern "C" int qg_bench_gpu_fp16(const qg_bench_opts *o, double bw) { return bench_convert(o, bw); }
