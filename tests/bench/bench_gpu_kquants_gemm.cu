/* GPU benchmark of the K-quant gemm path (tensor cores, batch 1..64) against cuBLAS fp16 GEMM at the
 * same shape and batch: the K-quant product driver of bench_gpu_kquants.cu with the gemm launcher. */
#include "bench_kquants_gemm.h"

#include "qgold/kernels_kquants_gemm.h"

extern "C" int qg_bench_gpu_kquants_gemm(const qg_bench_opts *o, double bw)
{
    static const size_t full[] = {1, 2, 4, 8, 16, 32, 64}, quick[] = {1, 16, 64};
    static const qg_bench_kq_path gemm = {"gemm", full, 7, quick, 3, QG_KQ_GEMM_MAX_BATCH, 177u, "gemm_baseline", 0, qg_kq_gemm_cuda_async};
    return qg_bench_gpu_kq_product(o, bw, &gemm);
}
