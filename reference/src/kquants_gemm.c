/* The reference of the K-quant `gemm` path (batch 1..64): each column through the reference GEMV. */
#include "qgold/kquants_gemm.h"

#include "qgold/errors.h"

#include <stdint.h>

int qg_kq_check_gemm(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                     const float *y_f32, const uint16_t *y_f16)
{
    /* type, pointers, shape and size as for one column */
    int rc = qg_kq_check_gemv(t, w, nbytes, rows, cols, x, 1, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    if (batch < 1 || batch > QG_KQ_GEMM_MAX_BATCH) return QG_ERR_batch_invalid;
    if (cols > SIZE_MAX / 2 / batch || rows > SIZE_MAX / 4 / batch) return QG_ERR_shape_invalid;
    return QG_ERR_ok;
}

int qg_kq_gemm_ref(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                   float *y_f32, uint16_t *y_f16)
{
    int rc = qg_kq_check_gemm(t, w, nbytes, rows, cols, x, batch, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    for (size_t b = 0; b < batch; b++) {
        rc = qg_kq_gemv_ref(t, w, nbytes, rows, cols, x + b * cols, 1, y_f32 ? y_f32 + b * rows : NULL,
                            y_f16 ? y_f16 + b * rows : NULL);
        if (rc != QG_ERR_ok) return rc; /* not reached: the arguments were checked above */
    }
    return QG_ERR_ok;
}
