/* SpQR GEMV (dense 3-bit tiles + fp16 outliers + act-order permutation) with AVX2 + F16C + FMA: the
 * vector primitives of the SpQR kernel (qgold/kernels_spqr.h); validation, the gather, the tile-row
 * driver, the float order of the product and the output writes are shared with the NEON file
 * (../spqr_rows.h). Compiled with -mavx2 -mf16c -mfma -ffp-contract=off (every float operation below is
 * the one written); entered only after dispatch confirmed the CPU has them.
 *
 * Dequantization, bit-exact with the spec. RN16(v) is vcvtps2ph (round to nearest even) then vcvtph2ps.
 * A float32 +, - or * of two fp16 values rounded to fp16 equals the fp16 operation (float32 has at least
 * 2*11 + 2 significand bits, so the double rounding is innocuous), so per tile and row
 *   s = RN16(s_s * RN16(s_q - s_z)),  z = RN16(z_s * RN16(z_q - z_z))
 * are computed for 8 rows at a time. A weight code is 0..7, so a row of a tile has only 8 possible
 * weights: the table lut[q] = RN16(s * RN16(q - z)), q = 0..7, is built once per (tile, row) and the 16
 * weights are lut[q_j], picked by vpermps (which reads the low 3 bits of each index lane, so a code
 * needs only a shift). Padded columns of the last column tile get weight +0 and x' = +0.
 */
#include "../spqr_tiles.h"

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- dequantization ------------------------------------------------------------------------------ */

/* RN16 through memory: VCVTPH2PS with a memory source needs no shuffle-port uop (the register form
 * does), and the shuffle port is what the dequantization is bound by. */
QG_INLINE __m256 rn16(__m256 v)
{
    __m128i h[1];
    _mm_storeu_si128(h, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m256 r;
    __asm__("vcvtph2ps %1, %0" : "=x"(r) : "m"(h[0]));
    return r;
}

static float spqr_f16(uint16_t h) { return _cvtsh_ss(h); }

/* Low 32 bits of words w[0..7] as 8 int32 lanes in row order. */
QG_INLINE __m256i low32x8(const uint64_t *w)
{
    const __m256 a = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)w));
    const __m256 b = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(w + 4)));
    /* per 128-bit lane: [a0L a1L b0L b1L | a2L a3L b2L b3L] -> reorder the 64-bit pairs */
    const __m256 s = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_permute4x64_epi64(_mm256_castps_si256(s), _MM_SHUFFLE(3, 1, 2, 0));
}

/* The tile's four second-order statistics for the 8 rows 8h..8h+7 (lane l = row 8h + l). */
typedef struct {
    __m256 ss, zs, sz, zz;
} stats8;

QG_INLINE stats8 stats_of(uint64_t v)
{
    stats8 s;
    s.ss = _mm256_set1_ps(spqr_f16((uint16_t)v));
    s.zs = _mm256_set1_ps(spqr_f16((uint16_t)(v >> 16)));
    s.sz = _mm256_set1_ps(spqr_f16((uint16_t)(v >> 32)));
    s.zz = _mm256_set1_ps(spqr_f16((uint16_t)(v >> 48)));
    return s;
}

#ifdef QG_MUTATION_SPQR_AVX2_PARITY
/* Mutant: each parity class rebuilds the word from its own rows, and the odd class maps row 2b + 1 to
 * byte ceil((2b + 1) / 2) = b + 1 instead of floor = b (the even class is spqr_second_order). */
static uint64_t second_order_odd(const uint64_t *w)
{
    uint64_t v = 0;
    for (int b = 0; b < 8; b++) {
        const int shift = 8 * (b + 1);
        if (shift < 64) v |= ((w[2 * b + 1] >> 54) & 0xFFu) << shift;
    }
    return v;
}

QG_INLINE stats8 stats_blend(stats8 e, stats8 o)
{
    stats8 s = {_mm256_blend_ps(e.ss, o.ss, 0xAA), _mm256_blend_ps(e.zs, o.zs, 0xAA), _mm256_blend_ps(e.sz, o.sz, 0xAA),
                _mm256_blend_ps(e.zz, o.zz, 0xAA)};
    return s;
}
#endif

/* Dequantizes tile column t of tile row R into wb (16 rows, row stride CCOLS, columns col0..col0+15);
 * `valid` columns are real (the rest get +0). */
QG_INLINE void spqr_dequant_tile(const uint64_t *w, size_t valid, float *wb, size_t col0)
{
    const uint64_t v = spqr_second_order(w);
#ifdef QG_MUTATION_SPQR_AVX2_PARITY
    const stats8 st = stats_blend(stats_of(v), stats_of(second_order_odd(w)));
#else
    const stats8 st = stats_of(v);
#endif
    _Alignas(32) float sv[TILE], zv[TILE];
    const __m256i seven = _mm256_set1_epi32(7);
    for (int h = 0; h < 2; h++) {
        const __m256i lo = low32x8(w + 8 * h);
        const __m256 sq = _mm256_cvtepi32_ps(_mm256_and_si256(lo, seven));
        const __m256 zq = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(lo, 3), seven));
        _mm256_store_ps(sv + 8 * h, rn16(_mm256_mul_ps(st.ss, rn16(_mm256_sub_ps(sq, st.sz)))));
        _mm256_store_ps(zv + 8 * h, rn16(_mm256_mul_ps(st.zs, rn16(_mm256_sub_ps(zq, st.zz)))));
    }
    const __m256 iota = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    /* Codes 0-7 sit at bits 6 + 3j of the word's low 32 bits, codes 8-15 at bits 6 + 3(j - 8) of the 32
     * bits from byte 3 (bits 24-55): each half is one broadcast 32-bit load and one shift per lane. */
    const __m256i shifts = _mm256_setr_epi32(6, 9, 12, 15, 18, 21, 24, 27);
    if (valid == TILE) {
        for (int k = 0; k < TILE; k++) {
            const __m256 lut = rn16(_mm256_mul_ps(_mm256_broadcast_ss(sv + k), rn16(_mm256_sub_ps(iota, _mm256_broadcast_ss(zv + k)))));
            const unsigned char *p = (const unsigned char *)(w + k);
            int32_t lo, hi;
            memcpy(&lo, p, 4);
            memcpy(&hi, p + 3, 4);
            float *dst = wb + (size_t)k * CCOLS + col0;
            _mm256_store_ps(dst, _mm256_permutevar8x32_ps(lut, _mm256_srlv_epi32(_mm256_set1_epi32(lo), shifts)));
            _mm256_store_ps(dst + 8, _mm256_permutevar8x32_ps(lut, _mm256_srlv_epi32(_mm256_set1_epi32(hi), shifts)));
        }
        return;
    }
    const __m256i j = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), vv = _mm256_set1_epi32((int)valid);
    const __m256 mlo = _mm256_castsi256_ps(_mm256_cmpgt_epi32(vv, j));
    const __m256 mhi = _mm256_castsi256_ps(_mm256_cmpgt_epi32(vv, _mm256_add_epi32(j, _mm256_set1_epi32(8))));
    for (int k = 0; k < TILE; k++) {
        const __m256 lut = rn16(_mm256_mul_ps(_mm256_broadcast_ss(sv + k), rn16(_mm256_sub_ps(iota, _mm256_broadcast_ss(zv + k)))));
        const unsigned char *p = (const unsigned char *)(w + k);
        int32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 3, 4);
        float *dst = wb + (size_t)k * CCOLS + col0;
        _mm256_store_ps(dst, _mm256_and_ps(_mm256_permutevar8x32_ps(lut, _mm256_srlv_epi32(_mm256_set1_epi32(lo), shifts)), mlo));
        _mm256_store_ps(dst + 8, _mm256_and_ps(_mm256_permutevar8x32_ps(lut, _mm256_srlv_epi32(_mm256_set1_epi32(hi), shifts)), mhi));
    }
}

/* ---- validation on the loaded words (spqr_checks.h) ---------------------------------------------- */

typedef __m256i spqr_faults; /* nonzero bits: a rule is broken */

QG_INLINE spqr_faults spqr_faults_zero(void) { return _mm256_setzero_si256(); }

QG_INLINE spqr_faults spqr_faults_or(spqr_faults a, spqr_faults b) { return _mm256_or_si256(a, b); }

QG_INLINE int spqr_faults_any(spqr_faults f) { return !_mm256_testz_si256(f, f); }

/* The dense rules of one tile as a nonzero vector when broken: reserved bits 62-63 of every word, the
 * fragment copies of rows 2b and 2b + 1 equal, and (pad != 0: the last column tile) padded codes 0. */
QG_INLINE __m256i spqr_tile_faults(const uint64_t *w, uint64_t pad)
{
    const __m256i res = _mm256_set1_epi64x((long long)QG_SPQR_RESERVED_MASK), frag = _mm256_set1_epi64x((long long)QG_SPQR_FRAGMENT_MASK);
    const __m256i padm = _mm256_set1_epi64x((long long)pad);
    __m256i f = _mm256_setzero_si256();
    for (int i = 0; i < 4; i++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(w + 4 * i));
        const __m256i sw = _mm256_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)); /* rows 2b <-> 2b + 1 */
        f = _mm256_or_si256(f, _mm256_and_si256(v, _mm256_or_si256(res, padm)));
        f = _mm256_or_si256(f, _mm256_and_si256(_mm256_xor_si256(v, sw), frag));
    }
    return f;
}

/* ---- the product --------------------------------------------------------------------------------- */

typedef __m256 spqr_v8;

QG_INLINE spqr_v8 spqr_v8_zero(void) { return _mm256_setzero_ps(); }

/* Rows k0..k0+RK-1 against batch columns b0..b0+G-1 over nv vectors of the chunk starting at column
 * c0 of x'. acc[k][b] is the (k, b) accumulator of the order of spqr_rows.h. */
QG_INLINE void spqr_sweep(const float *wb, size_t nv, const spqr_ctx *c, size_t c0, int k0, const int RK, size_t b0,
                          const int G, __m256 acc[TILE][MAXB])
{
    __m256 a[8][2];
    const float *xb[2];
    for (int g = 0; g < G; g++) xb[g] = c->xp + (b0 + (size_t)g) * c->npad + c0;
#pragma GCC unroll 8
    for (int r = 0; r < RK; r++)
#pragma GCC unroll 2
        for (int g = 0; g < G; g++) a[r][g] = acc[k0 + r][b0 + (size_t)g];
    for (size_t v = 0; v < nv; v++) {
        __m256 xv[2];
#pragma GCC unroll 2
        for (int g = 0; g < G; g++) xv[g] = _mm256_load_ps(xb[g] + 8 * v);
#pragma GCC unroll 8
        for (int r = 0; r < RK; r++) {
            const __m256 wv = _mm256_load_ps(wb + (size_t)(k0 + r) * CCOLS + 8 * v);
#pragma GCC unroll 2
            for (int g = 0; g < G; g++) a[r][g] = _mm256_fmadd_ps(wv, xv[g], a[r][g]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < RK; r++)
#pragma GCC unroll 2
        for (int g = 0; g < G; g++) acc[k0 + r][b0 + (size_t)g] = a[r][g];
}

static float spqr_hsum(__m256 s)
{
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1)); /* t_l = s_l + s_{l+4} */
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));                                       /* (t0 + t2, t1 + t3) */
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

/* y = fma(v, x'[c], y): one outlier word. */
QG_INLINE float spqr_add_outlier(float y, uint32_t cv, const float *xb)
{
    const __m128 p = _mm_fmadd_ss(_mm_set_ss(spqr_f16((uint16_t)(cv >> 16))), _mm_set_ss(xb[cv & 0xFFFFu]), _mm_set_ss(y));
    return _mm_cvtss_f32(p);
}

QG_INLINE uint16_t spqr_to_f16(float y) { return (uint16_t)_cvtss_sh(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

/* ---- activations --------------------------------------------------------------------------------- */

static void spqr_convert_x(const uint16_t *x, size_t n, float *d)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_store_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) d[i] = spqr_f16(x[i]);
}

#ifdef QG_MUTATION_SPQR_AVX2_SCATTER
/* Mutant: the permutation applied as a scatter, x'[perm[i]] = x[i]. */
#define SPQR_HAVE_GATHER_PERM 1
static void spqr_gather_perm(const uint16_t *x, const uint16_t *perm, size_t n, float *d)
{
    for (size_t i = 0; i < n; i++) d[perm[i]] = spqr_f16(x[i]);
}
#endif

#include "../spqr_rows.h"

int qg_spqr_gemv_avx2(const qg_spqr_layer *L, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16)
{
    return spqr_gemv(L, x, batch, y_f32, y_f16);
}
