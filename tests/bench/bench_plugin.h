/* The GPU half of `qgold bench --plugin` (bench_gpu_plugin.cu): a verified CUDA plugin kernel timed on
 * device pointers beside qgold's own CUDA kernel of its format and path and cuBLAS fp16, same run. */
#ifndef QGOLD_BENCH_PLUGIN_H
#define QGOLD_BENCH_PLUGIN_H

#include "bench.h"
#include "qgold/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#if QG_HAVE_CUDA
/* One CUDA plugin kernel (kq_dequant or kq_gemv; other kinds: 0, nothing timed), against BW_copy of the
 * run (qg_bench_gpu_begin). Rows go through qg_bench_emit; 0, or 1 after a message on stderr. */
int qg_bench_gpu_plugin(const qg_bench_opts *o, const qgold_plugin_kernel *d, double bw_copy);
#endif

#ifdef __cplusplus
}
#endif
#endif
