/* The CPU kernels of the K-quant GEMV with Q8_K activations (contract and reference:
 * qgold/kquants_q8k_gemv.h). Each is compiled only for its architecture and entered only after
 * dispatch confirmed the CPU has its ISA. */
#ifndef QGOLD_KERNELS_KQ_Q8K_H
#define QGOLD_KERNELS_KQ_Q8K_H

#include "qgold/kquants_q8k_gemv.h"

#ifdef __cplusplus
extern "C" {
#endif

int qg_kq_gemv_q8k_avx2(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                        float *y_f32, uint16_t *y_f16);
int qg_kq_gemv_q8k_neon(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                        float *y_f32, uint16_t *y_f16);

#ifdef __cplusplus
}
#endif
#endif
