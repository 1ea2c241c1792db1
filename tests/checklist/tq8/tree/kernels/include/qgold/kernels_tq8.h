/* Optimized kernels of the test-only format `tq8`. */
#ifndef QGOLD_KERNELS_TQ8_H
#define QGOLD_KERNELS_TQ8_H

#include <stddef.h>
#include <stdint.h>

int qg_tq8_dequant_avx2(const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y);

#endif
