/* The K-quant GEMV with Q8_K activations (the integer path): each activation vector is quantized once
 * to Q8_K, then every weight row is multiplied with it by the K-quant x Q8_K dot.
 *
 * qg_kq_gemv_q8k_<backend>(t, w, nbytes, rows, cols, x, batch, y_f32, y_f16) takes the arguments of
 * qg_kq_gemv_ref (qgold/kquants.h) and checks them in the same order with the same errors
 * (qg_kq_check_gemv); then a Q8_K weight type (which has no Q8_K dot) returns QG_ERR_unsupported. For
 * each column b:
 *   X_b = the exact float32 values of x[b*cols ..], quantized by qg_kq_quantize_ref to Q8_K (bit-exact:
 *         the reference quantizer itself, so bsums are the sums of the codes);
 *   y[b*rows + m] = the K-quant x Q8_K dot of weight row m with X_b: exact integers S_i, M_i per block
 *         and their float combination, bounded as the dot's (the registry row's numerics, d = cols).
 * The reference runs qg_kq_dot_q8k_ref (its float order: ggml's generic C dot); the CPU kernels the
 * "Dot float order" of kernels/cpu/kquants_rows.h, the same for every batch size, row split and thread
 * count, so their outputs are batch- and thread-count invariant bitwise. y_f16 is the float32 result
 * rounded once to fp16; either output may be NULL, not both.
 *
 * Note what the result approximates: W times the Q8_K-rounded activations, not W times x. The
 * quantization error of the activations is part of the path's definition (as in ggml), so the audit
 * compares with y* = sum_i dy_i (D_i S_i - Dm_i M_i) formed from the exact integers. */
#ifndef QGOLD_KQUANTS_Q8K_GEMV_H
#define QGOLD_KQUANTS_Q8K_GEMV_H

#include "qgold/kquants.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int qg_kq_gemv_q8k_ref(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                       float *y_f32, uint16_t *y_f16);

/* The activations of a Q8_K GEMV: batch vectors of cols fp16 values to batch Q8_K rows (cols / 256
 * blocks each) in q8, through qg_kq_quantize_ref; xf is scratch for one row (cols floats). */
int qg_kq_q8k_activations(const uint16_t *x, size_t batch, size_t cols, float *xf, uint8_t *q8);

#ifdef __cplusplus
}
#endif
#endif
