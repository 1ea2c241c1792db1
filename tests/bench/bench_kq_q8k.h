/* CPU half of qgold bench for the K-quant GEMV with Q8_K activations (path gemv_q8k, bench_kq_q8k.c). */
#ifndef QGOLD_BENCH_KQ_Q8K_H
#define QGOLD_BENCH_KQ_Q8K_H

#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rows gemv_q8k (SIMD backends, all threads) per shape and batch against BW_read, and the one-core
 * in-cache note (64 x 4096, batch 1, ns per 32 weights); 0 or 1. */
int qg_bench_cpu_kq_q8k(const qg_bench_opts *o, int threads, double bw_read);

#ifdef __cplusplus
}
#endif
#endif
