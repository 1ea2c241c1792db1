/* GPU half of the K-quant product benchmarks: the shared driver (bench_gpu_kquants.cu) and the `gemm`
 * path's entry (bench_gpu_kquants_gemm.cu). */
#ifndef QGOLD_BENCH_KQUANTS_GEMM_H
#define QGOLD_BENCH_KQUANTS_GEMM_H

#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#include "qgold/kquants.h"
#include <cuda_runtime.h>

/* A K-quant product path to time: its batches (full and --quick), the widest batch, the fill seed, the
 * note key of its baseline, whether to note the L2 size, and its device-pointer launcher. */
typedef struct {
    const char *path;
    const size_t *batches_full;
    size_t nbatches_full;
    const size_t *batches_quick;
    size_t nbatches_quick;
    size_t max_batch;
    uint32_t seed;
    const char *baseline_note;
    int note_l2;
    int (*launch)(qg_ktype t, const void *dw, size_t rows, size_t cols, const void *dx, size_t batch, float *dy_f32,
                  uint16_t *dy_f16, void *stream);
} qg_bench_kq_path;

/* Rows with path p->path against cuBLAS fp16 on the standard shapes (or --shapes / --batches). */
int qg_bench_gpu_kq_product(const qg_bench_opts *o, double bw_copy, const qg_bench_kq_path *p);
#endif

/* The tensor-core gemm path against cuBLAS fp16 at batch 1, 2, 4, 8, 16, 32, 64 (or --batches) on the
 * standard shapes, interleaved in the same run; rows with path "gemm". */
int qg_bench_gpu_kquants_gemm(const qg_bench_opts *o, double bw_copy);

#ifdef __cplusplus
}
#endif
#endif
