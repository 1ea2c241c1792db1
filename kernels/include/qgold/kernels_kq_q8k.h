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
/* The path's activation quantizer: n fp16 values (n a positive multiple of 256) to n / 256 Q8_K blocks
 * in q8, the bytes of qg_kq_q8k_activations (the reference quantizer); QG_ERR_argument_invalid,
 * QG_ERR_kq_cols_not_multiple. */
int qg_kq_q8k_quantize_avx2(const uint16_t *x, size_t n, uint8_t *q8);
int qg_kq_q8k_quantize_neon(const uint16_t *x, size_t n, uint8_t *q8);
int qg_kq_gemv_q8k_neon(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                        float *y_f32, uint16_t *y_f16);

#ifdef __cplusplus
}
#endif
#endif
