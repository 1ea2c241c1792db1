/* GPU half of qgold bench, the pieces every format's GPU benchmark shares (bench_gpu.cu). C++ only. */
#ifndef QGOLD_BENCH_GPU_H
#define QGOLD_BENCH_GPU_H

#include "bench.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A failed CUDA runtime call: "qgold bench: <call>: <error>" on stderr, and the function returns 1. */
#define QG_BENCH_CK(call)                                                                            \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) {                                                                     \
            fprintf(stderr, "qgold bench: %s: %s\n", #call, cudaGetErrorString(e_));                 \
            return 1;                                                                                \
        }                                                                                            \
    } while (0)

/* Times `calls` launches captured in one CUDA graph; per-call median/min/max over o->reps replays. */
extern "C" int qg_bench_time_graph(const qg_bench_opts *o, int calls, int (*launch)(void *ctx, int call, cudaStream_t s), void *ctx,
                                   double *med, double *lo, double *hi);
/* How many copies of a `bytes`-sized weight set make one pass stream >= 12 x the L2 size (>= 2). */
int qg_bench_copies_for(size_t bytes, size_t l2);
/* 0 when at least `bytes` of device memory are free; else 1 after "qgold: bench LABEL: cannot allocate
 * the device buffers: N bytes (F free of T)". */
int qg_bench_device_fits(const char *label, double bytes);
/* A cuBLAS handle with a fixed 32 MiB workspace (so graph capture never allocates). */
int qg_bench_cublas_open(cublasHandle_t *h, void **ws);
/* Deterministic device fills: arbitrary bytes; fp16 values in [-1, 1) (never inf/NaN). Asynchronous. */
void qg_bench_fill_bytes(uint8_t *p, size_t n, uint32_t seed);
void qg_bench_fill_half(uint16_t *p, size_t n);

/* The cuBLAS fp16 baseline: Y[rows x batch] = W[rows x cols, row-major] X[cols x batch], fp16 in and
 * out, float32 compute (cublasGemmEx), weights rotating through `ncopies` copies. */
struct qg_bench_blas_ctx {
    cublasHandle_t h;
    __half **w;
    int ncopies;
    size_t rows, cols, batch;
    const __half *x;
    __half *y;
};
int qg_bench_blas_launch(void *ctx, int call, cudaStream_t s);

#endif
