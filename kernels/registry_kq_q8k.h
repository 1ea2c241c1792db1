/* Registry rows of the K-quant GEMV with Q8_K activations, path `gemv_q8k` (included by registry.c,
 * which defines QG_FN and QG_BUILT_*): Q4_K, Q5_K, Q6_K on the reference, AVX2 and NEON. The kernels
 * take the fused GEMV's signature (qg_kq_gemv_fn, the `kq_gemv` member). Numerics: those of the
 * K-quant x Q8_K dot each output is (float32 accumulation, d = K; the fp16 output rounded once), judged
 * against y* formed from the exact integers of the Q8_K-quantized activations
 * (qgold/kquants_q8k_gemv.h). */
#ifndef QGOLD_REGISTRY_KQ_Q8K_H
#define QGOLD_REGISTRY_KQ_Q8K_H

#include "qgold/kernels_kq_q8k.h"

#define QG_KQ_Q8K_ROW(fmt, be, sfx, built)                                                                   \
    {#fmt, "gemv_q8k", be, "qg_kq_gemv_q8k_" #sfx, QG_KIND_KQ_GEMV_Q8K, QG_ELEM_F16, QG_ELEM_F32, QG_NUMERICS_F32ACC_F32OUT, \
     QG_NUMERICS_F32ACC_F16OUT, {.kq_gemv = QG_FN(built, qg_kq_gemv_q8k_##sfx)}}
#define QG_KQ_Q8K_FMT_ROWS(fmt)                                                                              \
    QG_KQ_Q8K_ROW(fmt, QG_BACKEND_REF, ref, 1), QG_KQ_Q8K_ROW(fmt, QG_BACKEND_AVX2, avx2, QG_BUILT_AVX2),     \
    QG_KQ_Q8K_ROW(fmt, QG_BACKEND_NEON, neon, QG_BUILT_NEON)
#define QG_KQ_Q8K_ROWS QG_KQ_Q8K_FMT_ROWS(q4_k), QG_KQ_Q8K_FMT_ROWS(q5_k), QG_KQ_Q8K_FMT_ROWS(q6_k)

#endif
