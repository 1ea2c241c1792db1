/* The terms of the K-quant gemm path's bound (reference/spec/numerics.md, "K-quant products on tensor
 * cores"), per output y[b][r], from the weight bytes and the activations, all in double:
 *   ystar   = sum_k w_k x_k, w_k the exact float32 decode (the reference's), x_k the fp16 value;
 *   sum_abs = sum_k m_k |x_k|, m_k = |a q_k| + |b| (Q4_K/Q5_K), |a q_k| (Q6_K), |d q_k| (Q8_K): the
 *             magnitudes of the terms the kernel actually sums (scale applied after the integer sum);
 *   sum_e   = sum_k e_k |x_k|, e_k = 2^-24 m_k + 2^-149 where the decode rounds (Q4_K/Q5_K: a q - b,
 *             Q8_K: d q) and 0 for Q6_K (a q is exact): the distance between the weight the reference
 *             decodes and a q - b, which the kernel never rounds; plus (K/16 + K/256) 2^-150 for the
 *             float32 scale products that may underflow.
 * Arrays are [batch][rows]. Non-finite scales or activations make the sums follow IEEE (the comparison
 * then checks the NaN/inf class only). */
#ifndef QGOLD_KQ_GEMM_BOUND_H
#define QGOLD_KQ_GEMM_BOUND_H

#include "qgold/kquants.h"

#include <stddef.h>
#include <stdint.h>

/* 0, or QG_ERR_alloc_failed / the dequantization's error. */
int qg_kq_gemm_bound_terms(qg_ktype t, const uint8_t *w, size_t rows, size_t cols, const uint16_t *x, size_t batch, double *ystar,
                           double *sum_abs, double *sum_e);

#endif
