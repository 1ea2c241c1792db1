/* Format `tq8` (test-only, reference/spec/tq8.md): int8 codes with one float32 scale per row. */
#ifndef QGOLD_TQ8_H
#define QGOLD_TQ8_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of one row: the float32 scale, then cols codes. */
#define QG_TQ8_ROW_BYTES(cols) (4 + (size_t)(cols))

/* Validation every implementation shares: NULL pointers, the buffer size, a non-finite scale. */
int qg_tq8_check(const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, const float *y);

/* y[r][c] = RN32(q[r][c] * s[r]); status: size_mismatch, int_scale_invalid, argument_invalid. */
int qg_tq8_dequant_ref(const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y);

#endif
