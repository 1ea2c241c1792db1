/* INT8 kernels, AVX2 + F16C (qgold/kernels_int8.h); the driver is shared with NEON (../int8_rows.h).
 *
 * Integer dot products. Without VNNI: a and b are sign-extended to int16 and vpmaddwd adds pairs of
 * int16 products into int32 lanes: |a b| <= 2^14, so a pair never saturates and every partial sum is
 * bounded by the exact total's bound K 2^14 < 2^31 (vpmaddubsw is not used: an unsigned x signed byte
 * pair can saturate its int16 sum). With AVX512-VNNI (vpdpbusd on ymm, detected at run time; QG_INT8_VNNI=0
 * disables it): vpdpbusd needs an unsigned operand, so a is biased to a + 128 (a xor 0x80) and
 *   sum (a + 128) b = sum a b + 128 sum b,
 * with sum b accumulated by a second vpdpbusd against bytes of 1; the difference is taken modulo 2^32,
 * which gives the exact int32 result because that result fits int32 (K <= 131071).
 *
 * Float steps are single IEEE operations (vdivps, vroundps to nearest even, vcvtdq2ps, vmulps, vaddps,
 * vcvtps2ph round to nearest even), the same the reference performs, so quantize, dequant and the W8A8
 * epilogue are bit-exact. In the W8A16 dot the products b x are exact in float32, so an FMA on them
 * rounds exactly like a multiply then an add.
 */
#include "qgold/fp16.h"
#include "qgold/intq.h"
#include "qgold/kernels_int8.h"

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define I8_SFX avx2

static uint32_t i8_absmax_bits_f32(const float *x, size_t n)
{
    const __m256i mask = _mm256_set1_epi32(0x7FFFFFFF);
    __m256i m = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), mask));
    uint32_t lanes[8], r = 0;
    _mm256_storeu_si256((__m256i *)lanes, m);
    for (int l = 0; l < 8; l++) r = lanes[l] > r ? lanes[l] : r;
    for (; i < n; i++) {
        uint32_t b;
        memcpy(&b, x + i, 4);
        b &= 0x7FFFFFFFu;
        r = b > r ? b : r;
    }
    return r;
}

static uint32_t i8_absmax_bits_f16(const uint16_t *x, size_t n)
{
    const __m256i mask = _mm256_set1_epi16(0x7FFF);
    __m256i m = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) m = _mm256_max_epu16(m, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), mask));
    uint16_t lanes[16];
    uint32_t r = 0;
    _mm256_storeu_si256((__m256i *)lanes, m);
    for (int l = 0; l < 16; l++) r = lanes[l] > r ? lanes[l] : r;
    for (; i < n; i++) r = (uint32_t)(x[i] & 0x7FFFu) > r ? (uint32_t)(x[i] & 0x7FFFu) : r;
    return r;
}

static void i8_f16_to_f32(const uint16_t *h, size_t n, float *d)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) d[i] = qg_f16_to_f32(h[i]);
}

/* sat(rne(x / s)) of 8 floats as int32 lanes. */
static inline __m256i i8_codes8(__m256 x, __m256 s)
{
    __m256 r = _mm256_round_ps(_mm256_div_ps(x, s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-128.0f)), _mm256_set1_ps(127.0f));
    return _mm256_cvtps_epi32(r);
}

static void i8_quantize(const float *x, size_t n, float s, int8_t *q)
{
    const __m256 vs = _mm256_set1_ps(s);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i c0 = i8_codes8(_mm256_loadu_ps(x + i), vs), c1 = i8_codes8(_mm256_loadu_ps(x + i + 8), vs);
        const __m256i c2 = i8_codes8(_mm256_loadu_ps(x + i + 16), vs), c3 = i8_codes8(_mm256_loadu_ps(x + i + 24), vs);
        /* packs work per 128-bit lane: the bytes come out in 4-element pieces 0,2,4,6,1,3,5,7 (of c0 lo,
         * c1 lo, c2 lo, c3 lo, c0 hi, ...); the permutation puts them back in order. */
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(c0, c1), _mm256_packs_epi32(c2, c3));
        _mm256_storeu_si256((__m256i *)(q + i), _mm256_permutevar8x32_epi32(p, order));
    }
    for (; i < n; i++) q[i] = qg_int8_quantize_value(x[i], s);
}

static void i8_dequant(const int8_t *q, size_t n, float s, float *y32, uint16_t *y16)
{
    const __m256 vs = _mm256_set1_ps(s);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 y = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + i)))), vs);
        if (y32 != NULL) _mm256_storeu_ps(y32 + i, y);
        if (y16 != NULL) _mm_storeu_si128((__m128i *)(y16 + i), _mm256_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) {
        const float y = (float)q[i] * s;
        if (y32 != NULL) y32[i] = y;
        if (y16 != NULL) y16[i] = qg_f32_to_f16(y);
    }
}

static inline uint32_t i8_hsum_u32(__m256i v)
{
    uint32_t l[8], r = 0;
    _mm256_storeu_si256((__m256i *)l, v);
    for (int i = 0; i < 8; i++) r += l[i]; /* modulo 2^32 */
    return r;
}

static int32_t i8_dot_tail(const int8_t *a, const int8_t *b, size_t k0, size_t K)
{
    int32_t s = 0;
    for (size_t k = k0; k < K; k++) s += (int32_t)a[k] * (int32_t)b[k];
    return s;
}

/* ---- plain AVX2: vpmovsxbw + vpmaddwd ---- */

/* Two A rows against four B rows: each B vector is loaded and widened once for both A rows. */
static void i8_dot_2x4_madd(const int8_t *a0, const int8_t *a1, const int8_t *b, size_t K, int32_t out[8])
{
    __m256i acc[8];
    for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_si256();
    size_t k = 0;
    for (; k + 16 <= K; k += 16) {
        const __m256i va0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(a0 + k)));
        const __m256i va1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(a1 + k)));
        for (int j = 0; j < 4; j++) {
            const __m256i vb = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + (size_t)j * K + k)));
            acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(va0, vb));
            acc[4 + j] = _mm256_add_epi32(acc[4 + j], _mm256_madd_epi16(va1, vb));
        }
    }
    for (int j = 0; j < 4; j++) {
        out[j] = (int32_t)i8_hsum_u32(acc[j]) + i8_dot_tail(a0, b + (size_t)j * K, k, K);
        out[4 + j] = (int32_t)i8_hsum_u32(acc[4 + j]) + i8_dot_tail(a1, b + (size_t)j * K, k, K);
    }
}

/* ---- AVX512-VNNI on ymm: vpdpbusd with the a + 128 bias ---- */

/* The correction sum b of a B row is accumulated once for both A rows. */
__attribute__((target("avx2,avx512vnni,avx512vl"))) static void i8_dot_2x4_vnni(const int8_t *a0, const int8_t *a1, const int8_t *b,
                                                                                 size_t K, int32_t out[8])
{
    const __m256i bias = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi8(1);
    __m256i acc[8], bs[4];
    for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) bs[j] = _mm256_setzero_si256();
    size_t k = 0;
    for (; k + 32 <= K; k += 32) {
        const __m256i au0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(a0 + k)), bias);
        const __m256i au1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(a1 + k)), bias);
        for (int j = 0; j < 4; j++) {
            const __m256i vb = _mm256_loadu_si256((const __m256i *)(b + (size_t)j * K + k));
            acc[j] = _mm256_dpbusd_epi32(acc[j], au0, vb);
            acc[4 + j] = _mm256_dpbusd_epi32(acc[4 + j], au1, vb);
            bs[j] = _mm256_dpbusd_epi32(bs[j], ones, vb);
        }
    }
    for (int j = 0; j < 4; j++) {
        const uint32_t corr = 128u * i8_hsum_u32(bs[j]);
        for (int r = 0; r < 2; r++) {
            const uint32_t d = i8_hsum_u32(acc[4 * r + j]) - corr; /* exact modulo 2^32 */
            int32_t v;
            memcpy(&v, &d, 4);
            out[4 * r + j] = v + i8_dot_tail(r ? a1 : a0, b + (size_t)j * K, k, K);
        }
    }
}

/* 1: use vpdpbusd. Decided once (CPU support and QG_INT8_VNNI); racing first calls agree. */
static int i8_use_vnni(void)
{
    static int state = -1;
    int s = __atomic_load_n(&state, __ATOMIC_RELAXED);
    if (s < 0) {
        const char *env = getenv("QG_INT8_VNNI");
        s = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") && !(env && strcmp(env, "0") == 0);
        __atomic_store_n(&state, s, __ATOMIC_RELAXED);
    }
    return s;
}

static void i8_dot_2x4(const int8_t *a0, const int8_t *a1, const int8_t *b, size_t K, int32_t out[8])
{
    if (i8_use_vnni())
        i8_dot_2x4_vnni(a0, a1, b, K, out);
    else
        i8_dot_2x4_madd(a0, a1, b, K, out);
}

static int32_t i8_dot(const int8_t *a, const int8_t *b, size_t K)
{
    __m256i acc = _mm256_setzero_si256();
    size_t k = 0;
    for (; k + 16 <= K; k += 16) {
        const __m256i va = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(a + k)));
        const __m256i vb = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + k)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(va, vb));
    }
    return (int32_t)i8_hsum_u32(acc) + i8_dot_tail(a, b, k, K);
}

static void i8_epilogue(const int32_t *acc, size_t n, float sa, const float *sb, int sb_vec, const void *bias,
                        qg_int8_ftype bias_type, int relu, float *y32, uint16_t *y16)
{
    const __m256 vsa = _mm256_set1_ps(sa), zero = _mm256_setzero_ps();
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 vsb = sb_vec ? _mm256_loadu_ps(sb + j) : _mm256_set1_ps(sb[0]);
        __m256 t = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(acc + j))); /* RNE above 2^24 */
#ifdef QG_MUTATION_INT8_AVX2_EPILOGUE
        t = _mm256_mul_ps(_mm256_mul_ps(t, vsa), vsb); /* deliberately wrong: sa before sb */
#else
        t = _mm256_mul_ps(_mm256_mul_ps(t, vsb), vsa);
#endif
        if (bias != NULL) {
            const __m256 vb = bias_type == QG_INT8_F16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)bias + j)))
                                                       : _mm256_loadu_ps((const float *)bias + j);
            t = _mm256_add_ps(t, vb);
        }
        /* ReLU: keep t where t > 0 or t is NaN (not-less-or-equal, unordered true), else +0.0. */
        if (relu) t = _mm256_and_ps(t, _mm256_cmp_ps(t, zero, _CMP_NLE_UQ));
        if (y32 != NULL) _mm256_storeu_ps(y32 + j, t);
        if (y16 != NULL) _mm_storeu_si128((__m128i *)(y16 + j), _mm256_cvtps_ph(t, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; j < n; j++) {
        const void *bj = bias == NULL ? NULL : (const unsigned char *)bias + j * (bias_type == QG_INT8_F16 ? 2u : 4u);
        const float t = qg_int8_epilogue(acc[j], sa, sb[sb_vec ? j : 0], bj, bias_type, relu);
        if (y32 != NULL) y32[j] = t;
        if (y16 != NULL) y16[j] = qg_f32_to_f16(t);
    }
}

/* Row order, the same for each of the nr (1 or 4) rows: lanes l of two accumulators over 16-element
 * steps (acc0: k = 16i + l, acc1: k = 16i + 8 + l), then acc0 + acc1, then the lanes pairwise (l, l + 4),
 * (0, 2) + (1, 3), then the tail in index order. The weights of a step are converted once for the nr
 * rows. i8_w8a16_finish is that order's end, shared by both dot kernels so they cannot drift. */
static inline __attribute__((always_inline)) float i8_w8a16_finish(__m256 acc0, __m256 acc1, const int8_t *b, const float *x,
                                                                     size_t k, size_t K)
{
    const __m256 a = _mm256_add_ps(acc0, acc1);
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    float l[4];
    _mm_storeu_ps(l, h);
    float s = (l[0] + l[2]) + (l[1] + l[3]);
    for (size_t j = k; j < K; j++) s = s + (float)b[j] * x[j];
    return s;
}

static inline __attribute__((always_inline)) void i8_w8a16_dot4(const int8_t *b, const float *const x[4], int nr, size_t K,
                                                                 float out[4])
{
    __m256 acc0[4], acc1[4];
    for (int r = 0; r < nr; r++) acc0[r] = acc1[r] = _mm256_setzero_ps();
    size_t k = 0;
    for (; k + 16 <= K; k += 16) {
        const __m128i vb = _mm_loadu_si128((const __m128i *)(b + k));
        const __m256 b0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(vb));
        const __m256 b1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(vb, 8)));
        for (int r = 0; r < nr; r++) {
            acc0[r] = _mm256_fmadd_ps(b0, _mm256_loadu_ps(x[r] + k), acc0[r]); /* exact product: fma == mul + add */
            acc1[r] = _mm256_fmadd_ps(b1, _mm256_loadu_ps(x[r] + k + 8), acc1[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = i8_w8a16_finish(acc0[r], acc1[r], b, x[r], k, K);
}

/* Four weight rows (b + r ldb) against one activation row, each in i8_w8a16_dot4's order, so each result
 * has the bits dot4 gives that row: the activations of a step are loaded once for the four rows (at
 * batch 1 dot4 would re-read the whole float32 activation row, 4 bytes per weight byte, for every
 * weight row; eight independent accumulators also hide the FMA latency). The next four rows are
 * prefetched at the same offset: the four short streams (4 KB each at K = 4096) restart every group
 * and one core's hardware prefetch alone left it at about 12 GB/s; with the hint 15-17 GB/s on one
 * core, 2.5 -> 2.0 ms for 14336x4096 on two. */
#define I8_HAVE_W8A16_ROWS4 1
static inline __attribute__((always_inline)) void i8_w8a16_rows4(const int8_t *b, size_t ldb, const float *x, size_t K, float out[4])
{
    __m256 acc0[4], acc1[4];
    for (int r = 0; r < 4; r++) acc0[r] = acc1[r] = _mm256_setzero_ps();
    size_t k = 0;
    for (; k + 16 <= K; k += 16) {
        const __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
        if ((k & 63) == 0) /* the same 64 bytes of the next four rows (a hint: never faults, changes no result) */
            for (int r = 0; r < 4; r++) _mm_prefetch((const char *)((uintptr_t)b + (4 + r) * ldb + k), _MM_HINT_T0);
        for (int r = 0; r < 4; r++) {
            const __m128i vb = _mm_loadu_si128((const __m128i *)(b + r * ldb + k));
            acc0[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(vb)), x0, acc0[r]);
            acc1[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(vb, 8))), x1, acc1[r]);
        }
    }
    for (int r = 0; r < 4; r++) out[r] = i8_w8a16_finish(acc0[r], acc1[r], b + r * ldb, x, k, K);
}

#include "../int8_rows.h"
