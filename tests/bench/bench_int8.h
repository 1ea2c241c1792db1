/* GPU half of qgold bench for INT8 (bench_gpu_int8.cu): W8A8 against cuBLAS fp16 and cuBLASLt int8, W8A16
 * against cuBLAS fp16, the quantize kernel against BW_copy, all in the same run. */
#ifndef QGOLD_BENCH_INT8_H
#define QGOLD_BENCH_INT8_H

#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CPU half (bench_int8.c): w8a16 per batch, w8a8 at M = each batch, quantize_row, every CPU backend,
 * against BW_read. 0, or 1 after a message (a failed call, or quantizer codes unlike the reference's). */
int qg_bench_cpu_int8(const qg_bench_opts *o, int threads, double bw_read);

#if QG_HAVE_CUDA
/* Rows per shape: cublas_fp16 / cublaslt_int8 / w8a8 / w8a8_vs_lt at M = 1, 16, 128, 1024, 4096; w8a16 per
 * batch; quantize_row. 0, or 1 after a message (a failed call or a wrong result). */
int qg_bench_gpu_int8(const qg_bench_opts *o, double bw_copy);
#endif

#ifdef __cplusplus
}
#endif
#endif
