/* Registry rows of the K-quant `gemm` path (included by registry.c, which defines QG_FN, QG_BUILT_* and
 * QG_HAVE_CUDA): batch 1..64, one row per K-quant format and backend.
 *
 * The reference runs each column through the reference GEMV (float32 accumulation in index order,
 * d = K). The CUDA kernel multiplies exact integer codes by fp16 activations on tensor cores and applies
 * the scales in float32 (reference/spec/numerics.md, "K-quant products on tensor cores"): u_acc =
 * QG_MMA_U_ACC = 2^-21 (qgold's tensor-core block model, "Tensor-core accumulation", which also covers
 * the float32 roundings), d = K
 * (d_fixed 0; the longest chain is at most K/16 + K/256 + 5, never more than K for K >= 256).
 * The weight-representation terms (the scales applied after the sum, so each weight enters as a*q and
 * -b, and the float32 rounding of the decoded weight the kernel never forms) are given to the bound by
 * its audit runner and tests per output, from the weights (numerics spec). Which kernels exist: */
#ifndef QGOLD_REGISTRY_KQUANTS_GEMM_H
#define QGOLD_REGISTRY_KQUANTS_GEMM_H

#include "qgold/kquants_gemm.h"
#if QG_HAVE_CUDA
#include "qgold/kernels_kquants_gemm.h"
#endif

#define QG_KQ_GEMM_REF 1
#define QG_KQ_GEMM_CUDA QG_HAVE_CUDA

/* Tensor-core accumulation: QG_NUMERICS_MMA_* (u_acc = QG_MMA_U_ACC = 2^-21, d = K; float32 / fp16 outputs). */
#define QG_KQ_GEMM_ROW(fmt, be, sfx, built, nm32, nm16)                                                       \
    {#fmt, "gemm", be, "qg_kq_gemm_" #sfx, QG_KIND_KQ_GEMM, QG_ELEM_F16, QG_ELEM_F32, nm32, nm16,             \
     {.kq_gemm = QG_FN(built, qg_kq_gemm_##sfx)}}
#define QG_KQ_GEMM_FMT_ROWS(fmt)                                                                              \
    QG_KQ_GEMM_ROW(fmt, QG_BACKEND_REF, ref, QG_KQ_GEMM_REF, QG_NUMERICS_F32ACC_F32OUT, QG_NUMERICS_F32ACC_F16OUT), \
    QG_KQ_GEMM_ROW(fmt, QG_BACKEND_CUDA, cuda, QG_KQ_GEMM_CUDA, QG_NUMERICS_MMA_F32OUT, QG_NUMERICS_MMA_F16OUT)
#define QG_KQ_GEMM_ROWS                                                                                       \
    QG_KQ_GEMM_FMT_ROWS(q4_k), QG_KQ_GEMM_FMT_ROWS(q5_k), QG_KQ_GEMM_FMT_ROWS(q6_k), QG_KQ_GEMM_FMT_ROWS(q8_k)

#endif
