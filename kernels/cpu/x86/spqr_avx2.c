/* SpQR GEMV (dense 3-bit tiles + fp16 outliers + act-order permutation) with AVX2 + F16C + FMA.
 * Compiled with -mavx2 -mf16c -mfma -ffp-contract=off (every float operation below is the one written);
 * entered only after dispatch confirmed the CPU has them. Contract and validation: qgold/spqr.h, the
 * reference's checks in its order, before any output is touched.
 *
 * Dequantization, bit-exact with the spec. RN16(v) is vcvtps2ph (round to nearest even) then vcvtph2ps.
 * A float32 +, - or * of two fp16 values rounded to fp16 equals the fp16 operation (float32 has at least
 * 2*11 + 2 significand bits, so the double rounding is innocuous), so per tile and row
 *   s = RN16(s_s * RN16(s_q - s_z)),  z = RN16(z_s * RN16(z_q - z_z))
 * are computed for 8 rows at a time. A weight code is 0..7, so a row of a tile has only 8 possible
 * weights: the table lut[q] = RN16(s * RN16(q - z)), q = 0..7, is built once per (tile, row) and the 16
 * weights are lut[q_j], picked by vpermps (which reads the low 3 bits of each index lane, so a code
 * needs only a shift). Padded columns of the last column tile get weight +0 and x' = +0.
 *
 * Second-order word: byte b is taken from row 2b of the tile (a layer whose row 2b + 1 differs fails
 * validation).
 *
 * Validation (kernels/cpu/spqr_checks.h): the O(m + n) rules before the pass, the per-word and
 * per-outlier rules inside it on the words it loads anyway (reserved bits, fragment copies, padded codes,
 * outlier columns, PTCSR segment layout), so the layer is read once. Results go to a private buffer and
 * reach the caller's outputs only when every check passed; otherwise the call returns
 * qg_spqr_validate's code, so the error is the reference's and nothing is written.
 *
 * Product float order (the same for every batch size, thread count and chunking, so outputs are batch-
 * and thread-invariant): for output (r, b) one 8-lane float32 accumulator A starts at +0; for each
 * 8-column vector v = 0, 1, ... of the (permuted, padded) row, A = fma(w[8v..8v+7], x'_b[8v..8v+7], A).
 * Then t_l = A_l + A_{l+4} (l = 0..3), y = (t_0 + t_2) + (t_1 + t_3), then for each outlier of the row in
 * storage order y = fma(v, x'_b[c], y) (PTCSR 0 words skipped, so CSR and PTCSR built from the same
 * outliers give the same bits). The fp16 output is that float32 rounded once. A NaN result is written as
 * the quiet NaN 0x7FC00000 (fp16 0x7E00): which NaN a sum ends in depends on operand order inside each
 * instruction, which the compiler picks per call site, so only a canonical NaN keeps the invariances.
 *
 * Execution: x is gathered through perm into float32 x'_b (once per call). Tile rows are split over
 * qg_threads() threads. A tile row is walked in chunks of CHUNK column tiles: the chunk's 16 x 16*CHUNK
 * weights are dequantized into a float buffer, then swept by register blocks of rows x batch columns
 * whose accumulators live in a per-tile-row buffer between chunks.
 */
#include "qgold/errors.h"
#include "qgold/kernels_spqr.h"

#include "../spqr_checks.h"
#include "../threads.h"

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define QG_INLINE static inline __attribute__((always_inline))

enum { TILE = QG_SPQR_TILE, MAXB = QG_SPQR_MAX_BATCH, CHUNK = 16, CCOLS = CHUNK * TILE };

typedef struct {
    const qg_spqr_layer *L;
    size_t batch, T, npad; /* npad = 16 T: the length of each x'_b */
    const float *xp;       /* batch x npad gathered activations */
    float *y;              /* batch x m results, copied to the caller's outputs once the layer proved valid */
    uint8_t *bad;          /* per tile row: 1 when a check of spqr_checks.h failed there */
} spqr_ctx;

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

static float f16f(uint16_t h) { return _cvtsh_ss(h); }

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

static uint64_t second_order(const uint64_t *w, int parity)
{
    uint64_t v = 0;
    for (int b = 0; b < 8; b++) {
#ifdef QG_MUTATION_SPQR_AVX2_PARITY
        /* Mutant: each parity class rebuilds the word from its own rows, and the odd class maps row
         * 2b + 1 to byte ceil((2b + 1) / 2) = b + 1 instead of floor = b. */
        const int shift = parity ? 8 * (b + 1) : 8 * b;
        if (shift < 64) v |= ((w[2 * b + parity] >> 54) & 0xFFu) << shift;
#else
        (void)parity;
        v |= ((w[2 * b] >> 54) & 0xFFu) << (8 * b);
#endif
    }
    return v;
}

QG_INLINE stats8 stats_of(uint64_t v)
{
    stats8 s;
    s.ss = _mm256_set1_ps(f16f((uint16_t)v));
    s.zs = _mm256_set1_ps(f16f((uint16_t)(v >> 16)));
    s.sz = _mm256_set1_ps(f16f((uint16_t)(v >> 32)));
    s.zz = _mm256_set1_ps(f16f((uint16_t)(v >> 48)));
    return s;
}

#ifdef QG_MUTATION_SPQR_AVX2_PARITY
QG_INLINE stats8 stats_blend(stats8 e, stats8 o)
{
    stats8 s = {_mm256_blend_ps(e.ss, o.ss, 0xAA), _mm256_blend_ps(e.zs, o.zs, 0xAA), _mm256_blend_ps(e.sz, o.sz, 0xAA),
                _mm256_blend_ps(e.zz, o.zz, 0xAA)};
    return s;
}
#endif

/* Dequantizes tile column t of tile row R into wb (16 rows, row stride CCOLS, columns col0..col0+15);
 * `valid` columns are real (the rest get +0). */
QG_INLINE void dequant_tile(const uint64_t *w, size_t valid, float *wb, size_t col0)
{
    const uint64_t v = second_order(w, 0);
#ifdef QG_MUTATION_SPQR_AVX2_PARITY
    const stats8 st = stats_blend(stats_of(v), stats_of(second_order(w, 1)));
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

/* The dense rules of one tile as a nonzero vector when broken: reserved bits 62-63 of every word, the
 * fragment copies of rows 2b and 2b + 1 equal, and (pad != 0: the last column tile) padded codes 0. */
QG_INLINE __m256i tile_faults(const uint64_t *w, uint64_t pad)
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

/* Rows k0..k0+RK-1 against batch columns b0..b0+G-1 over nv vectors of the chunk starting at column
 * c0 of x'. acc[k][b] is the (k, b) accumulator of the order at the top of the file. */
QG_INLINE void sweep(const float *wb, size_t nv, const spqr_ctx *c, size_t c0, int k0, const int RK, size_t b0,
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

static float hsum_ps(__m256 s)
{
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1)); /* t_l = s_l + s_{l+4} */
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));                                       /* (t0 + t2, t1 + t3) */
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

static void put_y(const spqr_ctx *c, size_t r, size_t b, float y)
{
    if (y != y) { /* the canonical quiet NaN: see the top of the file */
        const uint32_t qnan = 0x7FC00000u;
        memcpy(&y, &qnan, 4);
    }
    c->y[b * c->L->m + r] = y;
}

/* y = fma(v, x'[c], y): one outlier word. */
QG_INLINE float add_outlier(float y, uint32_t cv, const float *xb)
{
    const __m128 p = _mm_fmadd_ss(_mm_set_ss(f16f((uint16_t)(cv >> 16))), _mm_set_ss(xb[cv & 0xFFFFu]), _mm_set_ss(y));
    return _mm_cvtss_f32(p);
}

static void tile_row(const spqr_ctx *c, size_t R, float *wb, __m256 acc[TILE][MAXB])
{
    const qg_spqr_layer *L = c->L;
    const size_t T = c->T, B = c->batch, n = L->n;
    for (int k = 0; k < TILE; k++)
        for (size_t b = 0; b < B; b++) acc[k][b] = _mm256_setzero_ps();
    const uint64_t pad = spqr_padding_mask(n);
    __m256i faults = _mm256_setzero_si256();
    for (size_t t0 = 0; t0 < T; t0 += CHUNK) {
        const size_t t1 = T - t0 < CHUNK ? T : t0 + CHUNK, nv = 2 * (t1 - t0), c0 = t0 * TILE;
        for (size_t t = t0; t < t1; t++) {
            const size_t valid = n - t * TILE < TILE ? n - t * TILE : TILE;
            const uint64_t *w = L->dense + (R * T + t) * TILE;
            faults = _mm256_or_si256(faults, tile_faults(w, t == T - 1 ? pad : 0));
            dequant_tile(w, valid, wb, (t - t0) * TILE);
        }
        /* Register blocks: 8 rows x 1 column, 4 rows x 2 columns. */
        size_t b = 0;
        for (; b + 2 <= B; b += 2)
            for (int k = 0; k < TILE; k += 4) sweep(wb, nv, c, c0, k, 4, b, 2, acc);
        if (b < B)
            for (int k = 0; k < TILE; k += 8) sweep(wb, nv, c, c0, k, 8, b, 1, acc);
    }
    int bad = !_mm256_testz_si256(faults, faults);
    if (L->outliers == QG_SPQR_OUTLIERS_PTCSR && !spqr_ptcsr_segment_ok(L, R)) bad = 1;
    for (int k = 0; k < TILE; k++) {
        const size_t r = R * TILE + (size_t)k;
        size_t o0, o1, stride;
        spqr_row_outliers(L, R, k, &o0, &o1, &stride);
        for (size_t b = 0; b < B; b++) {
            const float *xb = c->xp + b * c->npad;
            float y = hsum_ps(acc[k][b]);
            for (size_t o = o0; o < o1; o += stride) {
                const uint32_t cv = L->col_vals[o];
                if (L->outliers == QG_SPQR_OUTLIERS_PTCSR && cv == 0) continue; /* padding: contributes nothing */
                if ((cv & 0xFFFFu) >= n) {
                    bad = 1; /* a column >= n: the call fails, x' is not read there */
                    continue;
                }
                y = add_outlier(y, cv, xb);
            }
            put_y(c, r, b, y);
        }
    }
    c->bad[R] = (uint8_t)bad;
}

static void gemv_range(void *vc, size_t R0, size_t R1)
{
    const spqr_ctx *c = vc;
    _Alignas(32) float wb[TILE * CCOLS];
    __m256 acc[TILE][MAXB];
    for (size_t R = R0; R < R1; R++) tile_row(c, R, wb, acc);
}

int qg_spqr_gemv_avx2(const qg_spqr_layer *L, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16)
{
    if (x == NULL || (y_f32 == NULL && y_f16 == NULL)) return QG_ERR_argument_invalid;
    /* Validation (spqr_checks.h): the cheap rules now, the per-word ones inside the pass; whatever fails,
     * the error returned is qg_spqr_validate's, and the outputs are written only after the pass. */
    if (!spqr_precheck(L)) {
        const int rc = qg_spqr_validate(L);
        if (rc != QG_ERR_ok) return rc;
        if (!spqr_precheck(L)) return QG_ERR_argument_invalid; /* not reached: the rules are the same */
    }
    if (batch < 1 || batch > QG_SPQR_MAX_BATCH) {
        const int rc = qg_spqr_validate(L);
        return rc != QG_ERR_ok ? rc : QG_ERR_spqr_batch_out_of_range;
    }

    const size_t m = L->m, n = L->n, T = qg_spqr_tiles_c(n), npad = T * TILE, RT = m / TILE;
    float *xp = aligned_alloc(32, batch * npad * sizeof(float));
    float *y = malloc(batch * m * sizeof(float));
    uint8_t *bad = malloc(RT);
    if (xp == NULL || y == NULL || bad == NULL) {
        free(xp);
        free(y);
        free(bad);
        return QG_ERR_alloc_failed;
    }
    /* Gather (x'_b[i] = x_b[perm[i]], fp16 -> float32 exact); padded columns +0. */
    for (size_t b = 0; b < batch; b++) {
        const uint16_t *xb = x + b * n;
        float *d = xp + b * npad;
        size_t i = 0;
        if (L->perm == NULL) {
            for (; i + 8 <= n; i += 8) _mm256_store_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(xb + i))));
            for (; i < n; i++) d[i] = f16f(xb[i]);
        } else {
#ifdef QG_MUTATION_SPQR_AVX2_SCATTER
            /* Mutant: the permutation applied as a scatter, x'[perm[i]] = x[i]. */
            for (; i < n; i++) d[L->perm[i]] = f16f(xb[i]);
#else
            for (; i < n; i++) d[i] = f16f(xb[L->perm[i]]);
#endif
        }
        for (i = n; i < npad; i++) d[i] = 0.0f;
    }
    spqr_ctx c = {L, batch, T, npad, xp, y, bad};
    /* At least about 2^18 weight x column products per thread, so small calls stay on one thread. */
    const size_t per_tile_row = TILE * npad * batch, min_rows = ((size_t)1 << 18) / per_tile_row + 1;
    qg_parallel_for(RT, 1, min_rows, gemv_range, &c);
    int rc = QG_ERR_ok;
    for (size_t R = 0; R < RT && rc == QG_ERR_ok; R++)
        if (bad[R]) rc = qg_spqr_validate(L);
    if (rc == QG_ERR_ok) {
        const size_t N = batch * m;
        if (y_f32 != NULL) memcpy(y_f32, y, N * sizeof(float));
        if (y_f16 != NULL)
            for (size_t i = 0; i < N; i++) y_f16[i] = (uint16_t)_cvtss_sh(y[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    free(xp);
    free(y);
    free(bad);
    return rc;
}
