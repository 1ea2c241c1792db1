/* GPU half of the K-quant `gemm` path's benchmark (bench_gpu_kquants_gemm.cu). */
#ifndef QGOLD_BENCH_KQUANTS_GEMM_H
#define QGOLD_BENCH_KQUANTS_GEMM_H

#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The tensor-core gemm path against cuBLAS fp16 at batch 1, 2, 4, 8, 16, 32, 64 (or --batches) on the
 * standard shapes, interleaved in the same run; rows with path "gemm". */
int qg_bench_gpu_kquants_gemm(const qg_bench_opts *o, double bw_copy);

#ifdef __cplusplus
}
#endif
#endif
