/* INT4 kernels with AVX2 + FMA: the vector primitives of ../int4_rows.h (the drivers, validation, float
 * order and output writes are shared with the NEON file). Compiled with -mavx2 -mf16c -mfma
 * -ffp-contract=off (every float operation below is the one written); entered only after dispatch
 * confirmed the CPU has them.
 *
 * Codes: the word is broadcast to 8 lanes and shifted right by 4j in lane j (vpsrlvd), masked to 4
 * bits and or-ed into the bit pattern of 2^23: the float32 2^23 + code, exact. The integer dot product sign-extends 16 int8 to int16 and
 * sums pairs of products into int32 (vpmaddwd): every partial sum is exact.
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

typedef __m256 i4_v8;

static inline i4_v8 i4_zero(void) { return _mm256_setzero_ps(); }
static inline i4_v8 i4_set1(float v) { return _mm256_set1_ps(v); }
static inline i4_v8 i4_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void i4_store(float *p, i4_v8 v) { _mm256_storeu_ps(p, v); }
static inline i4_v8 i4_sub(i4_v8 a, i4_v8 b) { return _mm256_sub_ps(a, b); }
static inline i4_v8 i4_mul(i4_v8 a, i4_v8 b) { return _mm256_mul_ps(a, b); }
static inline i4_v8 i4_fma(i4_v8 a, i4_v8 b, i4_v8 c) { return _mm256_fmadd_ps(a, b, c); }

static inline float i4_scale_f32(uint16_t h) { return _cvtsh_ss(h); }

static inline i4_v8 i4_codes(uint32_t word)
{
    const __m256i sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const __m256i v = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)word), sh), _mm256_set1_epi32(15));
    return _mm256_castsi256_ps(_mm256_or_si256(v, _mm256_set1_epi32(0x4B000000))); /* 2^23 + code */
}

static inline float i4_hsum(i4_v8 a)
{
    const __m128 t = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1)); /* t_l = a_l + a_{l+4} */
    const float t02 = _mm_cvtss_f32(t) + _mm_cvtss_f32(_mm_movehl_ps(t, t));
    const float t13 = _mm_cvtss_f32(_mm_shuffle_ps(t, t, 1)) + _mm_cvtss_f32(_mm_shuffle_ps(t, t, 3));
    return t02 + t13;
}

static inline int32_t i4_dot_i8(const int8_t *a, const int8_t *b, size_t n)
{
    __m256i acc = _mm256_setzero_si256();
    for (size_t i = 0; i < n; i += 32) {
        const __m256i va = _mm256_loadu_si256((const __m256i *)(a + i)), vb = _mm256_loadu_si256((const __m256i *)(b + i));
        const __m256i a0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(va)), a1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(va, 1));
        const __m256i b0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(vb)), b1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(vb, 1));
        acc = _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(a0, b0), _mm256_madd_epi16(a1, b1)));
    }
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

#include "../int4_rows.h"

int qg_w4a16_decode_avx2(const qg_w4a16 *L, float *w) { return i4_decode(L, w); }
int qg_w4a16_gemv_avx2(const qg_w4a16 *L, const uint16_t *x, size_t x_len, size_t batch, float *y_f32, uint16_t *y_f16)
{
    return i4_gemv(L, x, x_len, batch, y_f32, y_f16);
}
int qg_int4_gemm_packed_avx2(const qg_int4_gemm_args *p, int32_t *acc, float *y_f32, uint16_t *y_f16)
{
    return i4_gemm(p, acc, y_f32, y_f16);
}
