/* SpQR GEMV (dense 3-bit tiles + fp16 outliers + act-order permutation) with aarch64 Advanced SIMD
 * (baseline, no extra -m flags; compiled with -ffp-contract=off, so every float operation below is the
 * one written). Contract and validation: qgold/spqr.h, the reference's checks in its order, before any
 * output is touched. The structure and the float order are those of the AVX2 file
 * (kernels/cpu/x86/spqr_avx2.c), with an 8-lane vector held as two float32x4_t (lanes 0-3, 4-7): both
 * backends perform the same float operations in the same order.
 *
 * Dequantization, bit-exact with the spec: RN16(v) is FCVTN to fp16 then FCVTL back (round to nearest
 * even under the default FPCR); a float32 +, - or * of two fp16 values rounded to fp16 is the fp16
 * operation (float32 has at least 2*11 + 2 significand bits). Per tile and row,
 *   s = RN16(s_s * RN16(s_q - s_z)),  z = RN16(z_s * RN16(z_q - z_z)),
 * then the 8 possible weights lut[q] = RN16(s * RN16(q - z)), q = 0..7, and each weight is lut[q_j],
 * picked by TBL over the table's 32 bytes (byte index 4 q + 0..3). Padded columns of the last column
 * tile get weight +0 and x' = +0. Byte b of the second-order word is read from row 2b (a layer whose row
 * 2b + 1 differs fails validation).
 *
 * Validation as in the AVX2 file (kernels/cpu/spqr_checks.h): the O(m + n) rules first, the per-word and
 * per-outlier rules inside the pass; results reach the caller's outputs only when every check passed,
 * else the call returns qg_spqr_validate's code and writes nothing.
 *
 * Product float order (every batch size, thread count and chunking): for output (r, b) an 8-lane
 * accumulator A (+0) over the 8-column vectors v of the permuted row: A = fma(w[8v..8v+7], x'_b[..], A);
 * t_l = A_l + A_{l+4}, y = (t_0 + t_2) + (t_1 + t_3); then y = fma(v, x'_b[c], y) per outlier of the row in
 * storage order (PTCSR 0 words skipped). fp16 output: y rounded once. A NaN result is written as
 * 0x7FC00000 (fp16 0x7E00), the only NaN that keeps the results bitwise batch- and thread-invariant.
 *
 * Execution: x gathered through perm into float32 x'_b once per call; tile rows split over qg_threads()
 * threads; a tile row walked in chunks of CHUNK column tiles dequantized into a float buffer, swept by
 * register blocks of rows x batch columns.
 */
#include "qgold/errors.h"
#include "qgold/kernels_spqr.h"

#include "../spqr_checks.h"
#include "../threads.h"

#include <arm_neon.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define QG_INLINE static inline __attribute__((always_inline))

enum { TILE = QG_SPQR_TILE, MAXB = QG_SPQR_MAX_BATCH, CHUNK = 16, CCOLS = CHUNK * TILE };

typedef struct {
    float32x4_t lo, hi; /* lanes 0-3, 4-7 */
} f32x8;

typedef struct {
    const qg_spqr_layer *L;
    size_t batch, T, npad;
    const float *xp; /* batch x npad gathered activations */
    float *y;        /* batch x m results, copied out once the layer proved valid */
    uint8_t *bad;    /* per tile row: 1 when a check of spqr_checks.h failed there */
} spqr_ctx;

static float f16f(uint16_t h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }

static uint16_t to_f16(float f) { return vget_lane_u16(vreinterpret_u16_f16(vcvt_f16_f32(vdupq_n_f32(f))), 0); }

QG_INLINE float32x4_t rn16(float32x4_t v) { return vcvt_f32_f16(vcvt_f16_f32(v)); }

static uint64_t second_order(const uint64_t *w)
{
    uint64_t v = 0;
    for (int b = 0; b < 8; b++) v |= ((w[2 * b] >> 54) & 0xFFu) << (8 * b);
    return v;
}

/* 4 weights: lut[(bits >> sh_l) & 7] per lane l. */
QG_INLINE float32x4_t pick(uint8x16x2_t lut, uint32_t bits, int32x4_t neg_sh, float32x4_t mask)
{
    const uint32x4_t q = vandq_u32(vshlq_u32(vdupq_n_u32(bits), neg_sh), vdupq_n_u32(7));
    const uint32x4_t idx = vaddq_u32(vmulq_u32(q, vdupq_n_u32(0x04040404u)), vdupq_n_u32(0x03020100u));
    const uint8x16_t w = vqtbl2q_u8(lut, vreinterpretq_u8_u32(idx));
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_u8(w), vreinterpretq_u32_f32(mask)));
}

/* Dequantizes one tile (16 words) into wb (row stride CCOLS) at column col0; `valid` columns are real. */
QG_INLINE void dequant_tile(const uint64_t *w, size_t valid, float *wb, size_t col0)
{
    const uint64_t v = second_order(w);
    const float32x4_t ss = vdupq_n_f32(f16f((uint16_t)v)), zs = vdupq_n_f32(f16f((uint16_t)(v >> 16)));
    const float32x4_t sz = vdupq_n_f32(f16f((uint16_t)(v >> 32))), zz = vdupq_n_f32(f16f((uint16_t)(v >> 48)));
    float sv[TILE], zv[TILE];
    const uint32x4_t seven = vdupq_n_u32(7);
    for (int h = 0; h < 4; h++) {
        const uint32x4_t lo = vcombine_u32(vmovn_u64(vld1q_u64(w + 4 * h)), vmovn_u64(vld1q_u64(w + 4 * h + 2)));
        const float32x4_t sq = vcvtq_f32_u32(vandq_u32(lo, seven));
        const float32x4_t zq = vcvtq_f32_u32(vandq_u32(vshrq_n_u32(lo, 3), seven));
        vst1q_f32(sv + 4 * h, rn16(vmulq_f32(ss, rn16(vsubq_f32(sq, sz)))));
        vst1q_f32(zv + 4 * h, rn16(vmulq_f32(zs, rn16(vsubq_f32(zq, zz)))));
    }
    static const float k_iota[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    static const int32_t k_sh[8] = {0, -3, -6, -9, -12, -15, -18, -21};
    const float32x4_t iota0 = vld1q_f32(k_iota), iota1 = vld1q_f32(k_iota + 4);
    const int32x4_t sh0 = vld1q_s32(k_sh), sh1 = vld1q_s32(k_sh + 4);
    float32x4_t mask[4];
    for (int g = 0; g < 4; g++) {
        uint32_t mb[4];
        for (int l = 0; l < 4; l++) mb[l] = (size_t)(4 * g + l) < valid ? 0xFFFFFFFFu : 0u;
        mask[g] = vreinterpretq_f32_u32(vld1q_u32(mb));
    }
    for (int k = 0; k < TILE; k++) {
        const float32x4_t s = vdupq_n_f32(sv[k]), z = vdupq_n_f32(zv[k]);
        const float32x4_t l0 = rn16(vmulq_f32(s, rn16(vsubq_f32(iota0, z))));
        const float32x4_t l1 = rn16(vmulq_f32(s, rn16(vsubq_f32(iota1, z))));
        const uint8x16x2_t lut = {{vreinterpretq_u8_f32(l0), vreinterpretq_u8_f32(l1)}};
        const uint32_t lo = (uint32_t)(w[k] >> 6), hi = (uint32_t)(w[k] >> 30);
        float *dst = wb + (size_t)k * CCOLS + col0;
        vst1q_f32(dst, pick(lut, lo, sh0, mask[0]));
        vst1q_f32(dst + 4, pick(lut, lo, sh1, mask[1]));
        vst1q_f32(dst + 8, pick(lut, hi, sh0, mask[2]));
        vst1q_f32(dst + 12, pick(lut, hi, sh1, mask[3]));
    }
}

/* The dense rules of one tile, nonzero when broken: reserved bits, fragment copies of rows 2b and 2b + 1,
 * and (pad != 0: the last column tile) padded codes. */
QG_INLINE uint64x2_t tile_faults(const uint64_t *w, uint64_t pad)
{
    const uint64x2_t res = vdupq_n_u64(QG_SPQR_RESERVED_MASK | pad), frag = vdupq_n_u64(QG_SPQR_FRAGMENT_MASK);
    uint64x2_t f = vdupq_n_u64(0);
    for (int b = 0; b < 8; b++) {
        const uint64x2_t v = vld1q_u64(w + 2 * b);                   /* rows 2b, 2b + 1 */
        const uint64x2_t sw = vextq_u64(v, v, 1);                     /* rows 2b + 1, 2b */
        f = vorrq_u64(f, vorrq_u64(vandq_u64(v, res), vandq_u64(veorq_u64(v, sw), frag)));
    }
    return f;
}

/* Rows k0..k0+RK-1 against batch columns b0..b0+G-1 over nv 8-column vectors from column c0 of x'. */
QG_INLINE void sweep(const float *wb, size_t nv, const spqr_ctx *c, size_t c0, int k0, const int RK, size_t b0, const int G,
                     f32x8 acc[TILE][MAXB])
{
    f32x8 a[8][2];
    const float *xb[2];
    for (int g = 0; g < G; g++) xb[g] = c->xp + (b0 + (size_t)g) * c->npad + c0;
#pragma GCC unroll 8
    for (int r = 0; r < RK; r++)
#pragma GCC unroll 2
        for (int g = 0; g < G; g++) a[r][g] = acc[k0 + r][b0 + (size_t)g];
    for (size_t v = 0; v < nv; v++) {
        float32x4_t x0[2], x1[2];
#pragma GCC unroll 2
        for (int g = 0; g < G; g++) {
            x0[g] = vld1q_f32(xb[g] + 8 * v);
            x1[g] = vld1q_f32(xb[g] + 8 * v + 4);
        }
#pragma GCC unroll 8
        for (int r = 0; r < RK; r++) {
            const float *wr = wb + (size_t)(k0 + r) * CCOLS + 8 * v;
            const float32x4_t w0 = vld1q_f32(wr), w1 = vld1q_f32(wr + 4);
#pragma GCC unroll 2
            for (int g = 0; g < G; g++) {
                a[r][g].lo = vfmaq_f32(a[r][g].lo, w0, x0[g]);
                a[r][g].hi = vfmaq_f32(a[r][g].hi, w1, x1[g]);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < RK; r++)
#pragma GCC unroll 2
        for (int g = 0; g < G; g++) acc[k0 + r][b0 + (size_t)g] = a[r][g];
}

static float hsum(f32x8 a)
{
    const float32x4_t t = vaddq_f32(a.lo, a.hi); /* t_l = A_l + A_{l+4} */
    const float t02 = vgetq_lane_f32(t, 0) + vgetq_lane_f32(t, 2), t13 = vgetq_lane_f32(t, 1) + vgetq_lane_f32(t, 3);
    return t02 + t13;
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
    const float32x4_t p = vfmaq_f32(vdupq_n_f32(y), vdupq_n_f32(f16f((uint16_t)(cv >> 16))), vdupq_n_f32(xb[cv & 0xFFFFu]));
    return vgetq_lane_f32(p, 0);
}

static void tile_row(const spqr_ctx *c, size_t R, float *wb, f32x8 acc[TILE][MAXB])
{
    const qg_spqr_layer *L = c->L;
    const size_t T = c->T, B = c->batch, n = L->n;
    const f32x8 zero = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int k = 0; k < TILE; k++)
        for (size_t b = 0; b < B; b++) acc[k][b] = zero;
    const uint64_t pad = spqr_padding_mask(n);
    uint64x2_t faults = vdupq_n_u64(0);
    for (size_t t0 = 0; t0 < T; t0 += CHUNK) {
        const size_t t1 = T - t0 < CHUNK ? T : t0 + CHUNK, nv = 2 * (t1 - t0), c0 = t0 * TILE;
        for (size_t t = t0; t < t1; t++) {
            const size_t valid = n - t * TILE < TILE ? n - t * TILE : TILE;
            const uint64_t *w = L->dense + (R * T + t) * TILE;
            faults = vorrq_u64(faults, tile_faults(w, t == T - 1 ? pad : 0));
            dequant_tile(w, valid, wb, (t - t0) * TILE);
        }
        /* Register blocks: 4 rows x 2 columns, 8 rows x 1 column. */
        size_t b = 0;
        for (; b + 2 <= B; b += 2)
            for (int k = 0; k < TILE; k += 4) sweep(wb, nv, c, c0, k, 4, b, 2, acc);
        if (b < B)
            for (int k = 0; k < TILE; k += 8) sweep(wb, nv, c, c0, k, 8, b, 1, acc);
    }
    int bad = (vgetq_lane_u64(faults, 0) | vgetq_lane_u64(faults, 1)) != 0;
    if (L->outliers == QG_SPQR_OUTLIERS_PTCSR && !spqr_ptcsr_segment_ok(L, R)) bad = 1;
    for (int k = 0; k < TILE; k++) {
        const size_t r = R * TILE + (size_t)k;
        size_t o0, o1, stride;
        spqr_row_outliers(L, R, k, &o0, &o1, &stride);
        for (size_t b = 0; b < B; b++) {
            const float *xb = c->xp + b * c->npad;
            float y = hsum(acc[k][b]);
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
    float wb[TILE * CCOLS];
    f32x8 acc[TILE][MAXB];
    for (size_t R = R0; R < R1; R++) tile_row(c, R, wb, acc);
}

int qg_spqr_gemv_neon(const qg_spqr_layer *L, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16)
{
    if (x == NULL || (y_f32 == NULL && y_f16 == NULL)) return QG_ERR_argument_invalid;
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
    float *xp = malloc(batch * npad * sizeof(float));
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
            for (; i + 4 <= n; i += 4) vst1q_f32(d + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(xb + i))));
            for (; i < n; i++) d[i] = f16f(xb[i]);
        } else {
            for (; i < n; i++) d[i] = f16f(xb[L->perm[i]]);
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
            for (size_t i = 0; i < N; i++) y_f16[i] = to_f16(y[i]);
    }
    free(xp);
    free(y);
    free(bad);
    return rc;
}
