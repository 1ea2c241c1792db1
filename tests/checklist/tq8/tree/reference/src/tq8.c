/* Format `tq8` (test-only): the reference dequantizer, one IEEE multiplication per weight. */
#include "qgold/tq8.h"

#include "qgold/errors.h"

#include <math.h>
#include <string.h>

int qg_tq8_check(const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, const float *y)
{
    if (blocks == NULL || y == NULL) return QG_ERR_argument_invalid;
    if (cols > SIZE_MAX / 2 || rows > SIZE_MAX / QG_TQ8_ROW_BYTES(cols) || nbytes != rows * QG_TQ8_ROW_BYTES(cols))
        return QG_ERR_size_mismatch;
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *row = blocks + r * QG_TQ8_ROW_BYTES(cols);
        float s;
        memcpy(&s, row, 4);
        if (!isfinite(s)) return QG_ERR_int_scale_invalid;
    }
    return QG_ERR_ok;
}

int qg_tq8_dequant_ref(const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y)
{
    const int rc = qg_tq8_check(blocks, nbytes, rows, cols, y);
    if (rc) return rc;
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *row = blocks + r * QG_TQ8_ROW_BYTES(cols);
        float s;
        memcpy(&s, row, 4);
        for (size_t c = 0; c < cols; c++) y[r * cols + c] = (float)(int8_t)row[4 + c] * s;
    }
    return QG_ERR_ok;
}
