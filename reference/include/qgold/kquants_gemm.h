/* K-quant products for batch 1..64 (the `gemm` path; spec: reference/spec/numerics.md, "K-quant products
 * on tensor cores").
 *
 * Same arguments and output layout as qg_kq_gemv_ref (qgold/kquants.h), with batch 1..QG_KQ_GEMM_MAX_BATCH.
 * Validation, in order: the GEMV's checks for type, pointers, shape and size (as for one column), then
 * batch outside 1..64 -> QG_ERR_batch_invalid, then batch*cols fp16 or batch*rows floats not addressable
 * -> QG_ERR_shape_invalid. On an error nothing is written.
 */
#ifndef QGOLD_KQUANTS_GEMM_H
#define QGOLD_KQUANTS_GEMM_H

#include "qgold/kquants.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { QG_KQ_GEMM_MAX_BATCH = 64 };

/* The argument checks above; every gemm implementation calls it, so all reject alike. */
int qg_kq_check_gemm(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                     const float *y_f32, const uint16_t *y_f16);

/* The reference: column b is qg_kq_gemv_ref of column b alone (float32 accumulation in index order), so
 * every column is independent of the batch. */
int qg_kq_gemm_ref(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                   float *y_f32, uint16_t *y_f16);

#ifdef __cplusplus
}
#endif
#endif
