/* The reference of the K-quant GEMV with Q8_K activations (contract: qgold/kquants_q8k_gemv.h): the
 * reference quantizer, then the reference dot per row and column. Plain C11. */
#include "qgold/kquants_q8k_gemv.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/kquants_layout.h"

#include <stdlib.h>
#include <string.h>

int qg_kq_q8k_activations(const uint16_t *x, size_t batch, size_t cols, float *xf, uint8_t *q8)
{
    const size_t rb = cols / QG_QK_K * QG_Q8K_BYTES;
    for (size_t b = 0; b < batch; b++) {
        for (size_t k = 0; k < cols; k++) xf[k] = qg_f16_to_f32(x[b * cols + k]);
        const int rc = qg_kq_quantize_ref(QG_Q8_K, xf, 1, cols, q8 + b * rb, rb);
        if (rc != QG_ERR_ok) return rc;
    }
    return QG_ERR_ok;
}

int qg_kq_gemv_q8k_ref(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                       float *y_f32, uint16_t *y_f16)
{
    int rc = qg_kq_check_gemv(t, w, nbytes, rows, cols, x, batch, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;
    if (t == QG_Q8_K) return QG_ERR_unsupported;
    const size_t nb = cols / QG_QK_K, rb = nb * QG_Q8K_BYTES, wb = nb * qg_kq_block_bytes(t);
    float *xf = malloc(cols * sizeof *xf);
    uint8_t *q8 = malloc(batch * rb);
    if (xf == NULL || q8 == NULL) {
        free(xf);
        free(q8);
        return QG_ERR_alloc_failed;
    }
    rc = qg_kq_q8k_activations(x, batch, cols, xf, q8);
    for (size_t b = 0; b < batch && rc == QG_ERR_ok; b++) {
        for (size_t m = 0; m < rows && rc == QG_ERR_ok; m++) {
            float y;
            rc = qg_kq_dot_q8k_ref(t, w + m * wb, q8 + b * rb, cols, NULL, NULL, &y);
            if (y_f32 != NULL) y_f32[b * rows + m] = y;
            if (y_f16 != NULL) y_f16[b * rows + m] = qg_f32_to_f16(y);
        }
    }
    free(xf);
    free(q8);
    return rc;
}
