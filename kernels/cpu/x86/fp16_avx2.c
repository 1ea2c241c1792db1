/* fp16 / bf16 conversions with AVX2 + F16C. Compiled with -mavx2 -mf16c -mfma; entered only after
 * dispatch confirmed the CPU has them.
 *
 * float32 -> fp16 is VCVTPS2PH with an explicit round-to-nearest-even immediate (independent of MXCSR):
 * it rounds the exact value once, produces subnormals, overflows to inf, and quiets NaNs keeping their
 * sign. fp16 -> float32 (VCVTPH2PS) is exact. bf16 has no instruction here, so it is integer arithmetic:
 * adding 0x7FFF + lsb carries into the kept half exactly when round-to-nearest-even rounds up.
 * Tails go through an 8- or 16-lane scratch buffer so every element takes the vector path.
 */
#include "qgold/errors.h"
#include "qgold/kernels_fp16.h"

#include <immintrin.h>
#include <string.h>

#ifdef QG_MUTATION_FP16_AVX2_TRUNC
/* Deliberately wrong (truncation): the mutation check builds this to prove the tests notice. */
#define QG_F16_ROUNDING (_MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)
#else
#define QG_F16_ROUNDING (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#endif

static inline __m128i cvt8_f32_f16(const uint32_t *x)
{
    return _mm256_cvtps_ph(_mm256_loadu_ps((const float *)x), QG_F16_ROUNDING);
}

int qg_fp16_f32_to_f16_avx2(const uint32_t *x, qg_f16 *y, size_t n)
{
    if (n > 0 && (x == NULL || y == NULL)) return QG_ERR_argument_invalid;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i *)(y + i), cvt8_f32_f16(x + i));
    if (i < n) {
        uint32_t xs[8] = {0};
        uint16_t ys[8];
        memcpy(xs, x + i, (n - i) * sizeof *x);
        _mm_storeu_si128((__m128i *)ys, cvt8_f32_f16(xs));
        memcpy(y + i, ys, (n - i) * sizeof *y);
    }
    return QG_ERR_ok;
}

static inline __m256i cvt8_f16_f32(const qg_f16 *x)
{
    return _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x)));
}

int qg_fp16_f16_to_f32_avx2(const qg_f16 *x, uint32_t *y, size_t n)
{
    if (n > 0 && (x == NULL || y == NULL)) return QG_ERR_argument_invalid;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_si256((__m256i *)(y + i), cvt8_f16_f32(x + i));
    if (i < n) {
        uint16_t xs[8] = {0};
        uint32_t ys[8];
        memcpy(xs, x + i, (n - i) * sizeof *x);
        _mm256_storeu_si256((__m256i *)ys, cvt8_f16_f32(xs));
        memcpy(y + i, ys, (n - i) * sizeof *y);
    }
    return QG_ERR_ok;
}

/* 8 float32 bit patterns -> 8 bf16 in the low 16 bits of each 32-bit lane. */
static inline __m256i round8_bf16(__m256i v)
{
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(v, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(v, _mm256_set1_epi32(0x7FFF)), lsb), 16);
    /* NaN: |v| > 0x7F800000 as signed 32-bit (both sides are non-negative). Keep the sign and the high
     * payload and set the quiet bit, so a payload held only in the dropped half still reads as NaN. */
    const __m256i mag = _mm256_and_si256(v, _mm256_set1_epi32(0x7FFFFFFF));
    const __m256i isnan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7F800000));
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(v, 16), _mm256_set1_epi32(0x0040));
    return _mm256_blendv_epi8(rounded, quiet, isnan);
}

/* 16 float32 -> 16 bf16. packus works per 128-bit lane, so the 64-bit quarters are put back in order. */
static inline __m256i cvt16_f32_bf16(const uint32_t *x)
{
    __m256i a = round8_bf16(_mm256_loadu_si256((const __m256i *)x));
    __m256i b = round8_bf16(_mm256_loadu_si256((const __m256i *)(x + 8)));
    return _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
}

int qg_fp16_f32_to_bf16_avx2(const uint32_t *x, qg_bf16 *y, size_t n)
{
    if (n > 0 && (x == NULL || y == NULL)) return QG_ERR_argument_invalid;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm256_storeu_si256((__m256i *)(y + i), cvt16_f32_bf16(x + i));
    if (i < n) {
        uint32_t xs[16] = {0};
        uint16_t ys[16];
        memcpy(xs, x + i, (n - i) * sizeof *x);
        _mm256_storeu_si256((__m256i *)ys, cvt16_f32_bf16(xs));
        memcpy(y + i, ys, (n - i) * sizeof *y);
    }
    return QG_ERR_ok;
}

static inline __m256i cvt8_bf16_f32(const qg_bf16 *x)
{
    return _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)x)), 16);
}

int qg_fp16_bf16_to_f32_avx2(const qg_bf16 *x, uint32_t *y, size_t n)
{
    if (n > 0 && (x == NULL || y == NULL)) return QG_ERR_argument_invalid;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_si256((__m256i *)(y + i), cvt8_bf16_f32(x + i));
    if (i < n) {
        uint16_t xs[8] = {0};
        uint32_t ys[8];
        memcpy(xs, x + i, (n - i) * sizeof *x);
        _mm256_storeu_si256((__m256i *)ys, cvt8_bf16_f32(xs));
        memcpy(y + i, ys, (n - i) * sizeof *y);
    }
    return QG_ERR_ok;
}
