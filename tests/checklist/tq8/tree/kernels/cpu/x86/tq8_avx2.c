/* `tq8` dequantization with AVX2: 8 codes widened to int32, converted exactly to float32, times the
 * broadcast scale (one rounding, as the reference). */
#include "qgold/kernels_tq8.h"
#include "qgold/tq8.h"

#include <immintrin.h>
#include <string.h>

int qg_tq8_dequant_avx2(const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y)
{
    const int rc = qg_tq8_check(blocks, nbytes, rows, cols, y);
    if (rc) return rc;
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *row = blocks + r * QG_TQ8_ROW_BYTES(cols);
        float s;
        memcpy(&s, row, 4);
        const __m256 vs = _mm256_set1_ps(s);
        float *out = y + r * cols;
        size_t c = 0;
        for (; c + 8 <= cols; c += 8) {
            __m128i q8 = _mm_loadl_epi64((const __m128i *)(row + 4 + c));
            _mm256_storeu_ps(out + c, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)), vs));
        }
        for (; c < cols; c++) out[c] = (float)(int8_t)row[4 + c] * s;
    }
    return 0;
}
