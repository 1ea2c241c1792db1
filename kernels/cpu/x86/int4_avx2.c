/* INT4 kernels with AVX2 + FMA: the vector primitives of ../int4_rows.h (the drivers, validation, float
 * order and output writes are shared with the NEON file). Compiled with -mavx2 -mf16c -mfma
 * -ffp-contract=off (every float operation below is the one written); entered only after dispatch
 * confirmed the CPU has them.
 *
 * Codes: the word is broadcast to 8 lanes and shifted right by 4j in lane j (vpsrlvd), masked to 4
 * bits and or-ed into the bit pattern of 2^23: the float32 2^23 + code, exact. The packed GEMM's dot
 * takes B's nibbles XOR 8 as unsigned bytes against A's int8 codes (vpmaddubsw: pairs of products, at
 * most 240 in magnitude, no saturation), then pairs of those into int32 (vpmaddwd with ones): exact.
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

/* Block i of a packed row as 32 unsigned bytes u = nibble XOR 8: low nibbles of its 16 bytes, then high. */
static inline __m256i i4_block_u(const uint8_t *b)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)b), m = _mm_set1_epi8(0x0F);
    const __m256i lh = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
    return _mm256_xor_si256(lh, _mm256_set1_epi8(8));
}

/* u (0..15) times a (-8..7) in pairs: |pair| <= 240, no saturation; then pairs of pairs into int32 */
static inline __m256i i4_madd_u(__m256i acc, __m256i u, const int8_t *a)
{
    const __m256i p = _mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)a));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

static inline int32_t i4_hsum_i32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

static inline int32_t i4_dots_packed1(const uint8_t *b, size_t nb, const int8_t *a)
{
    __m256i acc = _mm256_setzero_si256();
    for (size_t i = 0; i < nb; i++) acc = i4_madd_u(acc, i4_block_u(b + 16 * i), a + 32 * i);
    return i4_hsum_i32(acc);
}

static inline void i4_dots_packed4(const uint8_t *b, size_t nb, const int8_t *a, size_t kp, int32_t out[4])
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < nb; i++) {
        const __m256i u = i4_block_u(b + 16 * i);
        a0 = i4_madd_u(a0, u, a + 32 * i);
        a1 = i4_madd_u(a1, u, a + kp + 32 * i);
        a2 = i4_madd_u(a2, u, a + 2 * kp + 32 * i);
        a3 = i4_madd_u(a3, u, a + 3 * kp + 32 * i);
    }
    out[0] = i4_hsum_i32(a0);
    out[1] = i4_hsum_i32(a1);
    out[2] = i4_hsum_i32(a2);
    out[3] = i4_hsum_i32(a3);
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
