/* GPU half of qgold bench for INT4 W4A16 (bench_gpu_int4.cu): the tensor-core GEMM against cuBLAS fp16 in
 * the same run. */
#ifndef QGOLD_BENCH_INT4_H
#define QGOLD_BENCH_INT4_H

#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CPU half (bench_int4.c): w4a16_g128 per batch, w4a16_decode, gemm_packed at M = each batch, every CPU
 * backend, against BW_read. 0, or 1 after a message (a failed call or a K that is not a multiple of 128). */
int qg_bench_cpu_int4(const qg_bench_opts *o, int threads, double bw_read);

#if QG_HAVE_CUDA
/* Rows w4a16_g128 / w4a16_g32 (and w4a16_g128_nosplit on 4096x14336) per shape and M; 0 or 1. */
int qg_bench_gpu_int4(const qg_bench_opts *o, double bw_copy);
#endif

#ifdef __cplusplus
}
#endif
#endif
