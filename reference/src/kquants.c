/* READ ME FIRST: GGUF K-quants Q4_K, Q5_K, Q6_K, Q8_K, the reference (spec: reference/spec/kquants.md).
 *
 * What the formats are. Each block holds 256 consecutive elements of a row (a row is K/256 blocks):
 *   Q4_K (144 bytes)  fp16 d, fp16 dmin, 8 packed 6-bit scales sc[s] and mins m[s] (one per 32-element
 *                     sub-block s), 4-bit codes q:           y = (d*sc[s])*q - dmin*m[s]
 *   Q5_K (176 bytes)  as Q4_K plus a fifth code bit per element in qh[32]
 *   Q6_K (210 bytes)  6-bit codes (4 low bits in ql, 2 high bits in qh), int8 scales sc[g] per 16-element
 *                     group, fp16 d last:                     y = (d*sc[g])*(q - 32)
 *   Q8_K (292 bytes)  float32 d, int8 codes, int16 sums of each 16 codes (bsums): y = d*q
 * All fields are little-endian; a block is just bytes (Q6_K blocks are only 2-byte aligned in a row), so
 * every multi-byte field is assembled from single bytes here, never read through a wider pointer.
 *
 * Invariants. 256 elements per block, cols a multiple of 256. Decoding is total: any bytes are a valid
 * block (inf/NaN in d or dmin included; the outputs then follow IEEE, e.g. inf*0 = NaN).
 *
 * Why dequant is exact. fp16 -> float32 is exact. d has an 11-bit significand, sc at most 7 bits and q at
 * most 6 bits, so d*sc (<= 18 bits) and (d*sc)*q (<= 23 bits) are exact float32 products; their range
 * (2^-24 .. 2^16 * 2^7 * 2^5) stays far from float32 under/overflow. Q6_K dequant therefore rounds nowhere,
 * and Q4_K/Q5_K round exactly once, in the final subtraction. Any correct float32 implementation (with or
 * without FMA, in any order) gives these bits. Q8_K's d is a full float32, so d*q is one correctly rounded
 * product. fp16 outputs add one more rounding (RNE) of that float32 value.
 *
 * Where rounding happens otherwise. The quantizers (ggml's non-imatrix quantize_row_*_K_ref, followed
 * operation for operation: each float32 operation is its own statement, the file is compiled with
 * -ffp-contract=off -fno-fast-math and needs FLT_EVAL_METHOD == 0) and the float parts of the dot and
 * GEMV, whose orders are pinned in qgold/kquants.h. Integer parts (codes, S, M, bsums) are exact.
 */
#include "qgold/kquants.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/kquants_layout.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* 0: float evaluated as float. 16 (TS 18661-3, targets with _Float16 arithmetic) means the same for float. */
#if !defined(FLT_EVAL_METHOD) || (FLT_EVAL_METHOD != 0 && FLT_EVAL_METHOD != 16)
#error "the K-quant reference needs float32 expressions evaluated in float32 (FLT_EVAL_METHOD == 0)"
#endif

/* ---- byte-level field access ------------------------------------------------------------------- */

static uint16_t ld_u16(const uint8_t *p) { return (uint16_t)((unsigned)p[0] | ((unsigned)p[1] << 8)); }

static uint32_t ld_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void st_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)(v >> 8);
}

static void st_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)((v >> 8) & 0xFFu);
    p[2] = (uint8_t)((v >> 16) & 0xFFu);
    p[3] = (uint8_t)(v >> 24);
}

/* Two's complement reinterpretation without implementation-defined conversions. */
static int as_i8(uint8_t b) { return b < 0x80u ? (int)b : (int)b - 256; }
static int as_i16(uint16_t h) { return h < 0x8000u ? (int)h : (int)h - 65536; }
/* The low 8 bits of an int, as C's conversion to int8_t/uint8_t stores them on two's complement machines. */
static uint8_t low8(int v) { return (uint8_t)((unsigned)v & 0xFFu); }

static float ld_f16(const uint8_t *p) { return qg_f16_to_f32(ld_u16(p)); }
static float ld_f32(const uint8_t *p) { return qg_f32_from_bits(ld_u32(p)); }

/* ---- element <-> field mapping ----------------------------------------------------------------- */

/* Q4_K/Q5_K scale sc and min m of sub-block j (0..7) from the 12 packed bytes q. */
static void scale_min_k4(const uint8_t *q, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K code (0..15) of element e: 64-element chunk c = e/64 uses qs[32c .. 32c+31]; the low nibble of
 * qs[32c+l] is element 64c+l, the high nibble element 64c+32+l. */
static int q4k_code(const uint8_t *qs, int e)
{
    int c = e / 64, r = e % 64;
    uint8_t b = qs[32 * c + r % 32];
    return r < 32 ? (b & 15) : (b >> 4);
}

/* Q5_K code (0..31): the Q4_K nibble plus bit e/32 of qh[e%32] as bit 4. */
static int q5k_code(const uint8_t *blk, int e)
{
    int hi = (blk[QG_Q5K_QH + e % 32] >> (e / 32)) & 1;
    return q4k_code(blk + QG_Q5K_QS, e) | (hi << 4);
}

/* Q6_K unsigned code (0..63) of element e. Half h = e/128 uses ql[64h..], qh[32h..]; inside a half,
 * quarter t = (e%128)/32 and l = e%32: the low nibble of ql[64h + 32(t%2) + l] for t < 2, its high nibble
 * for t >= 2; the high two bits are bits 2t, 2t+1 of qh[32h + l]. */
static int q6k_code(const uint8_t *blk, int e)
{
    int h = e / 128, t = (e % 128) / 32, l = e % 32;
    uint8_t lb = blk[QG_Q6K_QL + 64 * h + 32 * (t % 2) + l];
    int low = t < 2 ? (lb & 15) : (lb >> 4);
    int high = (blk[QG_Q6K_QH + 32 * h + l] >> (2 * t)) & 3;
    return low | (high << 4);
}

/* ---- type table and validation ----------------------------------------------------------------- */

static int known(qg_ktype t) { return (unsigned)t <= (unsigned)QG_Q8_K; }

size_t qg_kq_block_bytes(qg_ktype t)
{
    switch (t) {
    case QG_Q4_K: return QG_Q4K_BYTES;
    case QG_Q5_K: return QG_Q5K_BYTES;
    case QG_Q6_K: return QG_Q6K_BYTES;
    case QG_Q8_K: return QG_Q8K_BYTES;
    default: return 0;
    }
}

static const char *const k_names[] = {"q4_k", "q5_k", "q6_k", "q8_k"};

const char *qg_kq_name(qg_ktype t) { return known(t) ? k_names[t] : "unknown"; }

int qg_kq_from_name(const char *name)
{
    if (name == NULL) return -1;
    for (int t = 0; t < 4; t++) {
        const char *a = name, *b = k_names[t];
        while (*a != '\0' && *b != '\0') {
            char c = *a;
            if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
            if (c != *b) break;
            a++;
            b++;
        }
        if (*a == '\0' && *b == '\0') return t;
    }
    return -1;
}

/* cols, rows and the size_t range; on success *expect = rows * cols/256 * block bytes. The float32 output
 * of rows*cols elements must be addressable, which also bounds the (smaller) block buffer. */
static int check_dims(qg_ktype t, size_t rows, size_t cols, size_t *expect)
{
    if (cols == 0 || cols % QG_QK_K != 0) return QG_ERR_kq_cols_not_multiple;
    if (rows == 0) return QG_ERR_shape_invalid;
    if (rows > SIZE_MAX / cols || rows * cols > SIZE_MAX / sizeof(float)) return QG_ERR_shape_invalid;
    *expect = rows * (cols / QG_QK_K) * qg_kq_block_bytes(t);
    return QG_ERR_ok;
}

int qg_kq_check_shape(qg_ktype t, size_t rows, size_t cols, size_t nbytes)
{
    if (!known(t)) return QG_ERR_kq_type_unknown;
    size_t expect = 0;
    int rc = check_dims(t, rows, cols, &expect);
    if (rc != QG_ERR_ok) return rc;
    return nbytes == expect ? QG_ERR_ok : QG_ERR_kq_size_mismatch;
}

/* ---- dequantization ---------------------------------------------------------------------------- */

/* One block -> 256 float32 values, in element order. */
static void dequant_block(qg_ktype t, const uint8_t *blk, float *y)
{
    switch (t) {
    case QG_Q4_K:
    case QG_Q5_K: { /* one header layout for both (qgold/kquants_layout.h) */
        const float d = ld_f16(blk + QG_Q4K_D);
        const float dmin = ld_f16(blk + QG_Q4K_DMIN);
        for (int s = 0; s < 8; s++) {
            int sc, m;
            scale_min_k4(blk + QG_Q4K_SCALES, s, &sc, &m);
            const float ds = d * (float)sc;    /* exact */
            const float dm = dmin * (float)m;  /* exact */
            for (int l = 0; l < 32; l++) {
                int e = 32 * s + l;
                int q = t == QG_Q4_K ? q4k_code(blk + QG_Q4K_QS, e) : q5k_code(blk, e);
                const float p = ds * (float)q; /* exact */
                y[e] = p - dm;                 /* the one rounding */
            }
        }
        break;
    }
    case QG_Q6_K: {
        const float d = ld_f16(blk + QG_Q6K_D);
        for (int e = 0; e < QG_QK_K; e++) {
            const float ds = d * (float)as_i8(blk[QG_Q6K_SCALES + e / 16]); /* exact */
            y[e] = ds * (float)(q6k_code(blk, e) - 32);                   /* exact */
        }
        break;
    }
    case QG_Q8_K: {
        const float d = ld_f32(blk + QG_Q8K_D);
        for (int e = 0; e < QG_QK_K; e++) y[e] = d * (float)as_i8(blk[QG_Q8K_QS + e]); /* one rounding */
        break;
    }
    }
}

static int dequant_args(qg_ktype t, const void *blocks, size_t nbytes, size_t rows, size_t cols, const void *y)
{
    if (!known(t)) return QG_ERR_kq_type_unknown;
    if (blocks == NULL || y == NULL) return QG_ERR_argument_invalid;
    return qg_kq_check_shape(t, rows, cols, nbytes);
}

int qg_kq_dequant_f32_ref(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y)
{
    int rc = dequant_args(t, blocks, nbytes, rows, cols, y);
    if (rc != QG_ERR_ok) return rc;
    const size_t nblocks = rows * (cols / QG_QK_K), bsz = qg_kq_block_bytes(t);
    for (size_t i = 0; i < nblocks; i++) dequant_block(t, blocks + i * bsz, y + i * QG_QK_K);
    return QG_ERR_ok;
}

int qg_kq_dequant_f16_ref(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, uint16_t *y)
{
    int rc = dequant_args(t, blocks, nbytes, rows, cols, y);
    if (rc != QG_ERR_ok) return rc;
    const size_t nblocks = rows * (cols / QG_QK_K), bsz = qg_kq_block_bytes(t);
    float tmp[QG_QK_K];
    for (size_t i = 0; i < nblocks; i++) {
        dequant_block(t, blocks + i * bsz, tmp);
        for (int e = 0; e < QG_QK_K; e++) y[i * QG_QK_K + (size_t)e] = qg_f32_to_f16(tmp[e]);
    }
    return QG_ERR_ok;
}

/* ---- quantization (ggml's non-imatrix reference, operation for operation) --------------------- */

/* Round to nearest, ties to even, for |f| <= 4194303: adding 1.5 * 2^23 puts the sum in [2^23, 2^24),
 * where float32's spacing is 1, so the (RNE) addition itself rounds f to an integer, which then sits in
 * the low 23 bits offset by 2^22. Outside that range (and for inf/NaN) the result is whatever these
 * same bits give, exactly as in ggml, because the quantizers clamp it afterwards and so depend on it;
 * such a call sets *outside (the block is then outside the quantizer's domain, qg_kq_quantize_domain_ref). */
static int nearest_int(float f, int *outside)
{
    if (!(fabsf(f) <= 4194303.0f)) *outside = 1; /* NaN fails the comparison too */
    const float v = f + 12582912.0f;
    const uint32_t b = qg_f32_bits(v);
    return (int)(b & 0x7FFFFFu) - 0x400000;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* Asymmetric weighted least-squares fit x ~ scale*L + min, L in 0..nmax, min <= 0 (ggml make_qkx2_quants
 * with use_mad = false). Returns scale; *neg_min = -min. L gets the codes of the best candidate. */
static float fit_qkx2(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, float rmin,
                      float rdelta, int nstep, int *outside)
{
    uint8_t Laux[32];
    float min = x[0];
    float max = x[0];
    float sum_w = w[0];
    float sum_x = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w = sum_w + w[i];
        const float wx = w[i] * x[i];
        sum_x = sum_x + wx;
    }
    if (min > 0.0f) min = 0.0f;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *neg_min = -min;
        return 0.0f;
    }
    const float range = max - min;
    float iscale = (float)nmax / range;
    float scale = 1.0f / iscale;
    float best_error = 0.0f;
    for (int i = 0; i < n; i++) {
        const float xs = x[i] - min;
        const float v = iscale * xs;
        L[i] = (uint8_t)clampi(nearest_int(v, outside), 0, nmax);
        float diff = scale * (float)L[i];
        diff = diff + min;
        diff = diff - x[i];
        const float sq = diff * diff;
        const float we = w[i] * sq;
        best_error = best_error + we;
    }
    /* nstep >= 1 for both callers, so ggml's early return for nstep < 1 never applies. Once a candidate
     * is accepted, min is its min: later candidates use it in both (max - min) and (x - min). */
    for (int is = 0; is <= nstep; is++) {
        float num = rdelta * (float)is;
        num = rmin + num;
        num = num + (float)nmax;
        const float range_is = max - min;
        iscale = num / range_is;
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; i++) {
            const float xs = x[i] - min;
            const float v = iscale * xs;
            const int l = clampi(nearest_int(v, outside), 0, nmax);
            Laux[i] = (uint8_t)l;
            const float wl = w[i] * (float)l;
            sum_l = sum_l + wl;
            const float wll = wl * (float)l;
            sum_l2 = sum_l2 + wll;
            const float wlx = wl * x[i];
            sum_xl = sum_xl + wlx;
        }
        const float a = sum_w * sum_l2;
        const float b = sum_l * sum_l;
        const float D = a - b;
        if (D > 0.0f) {
            const float s1 = sum_w * sum_xl;
            const float s2 = sum_x * sum_l;
            const float s3 = s1 - s2;
            float this_scale = s3 / D;
            const float m1 = sum_l2 * sum_x;
            const float m2 = sum_l * sum_xl;
            const float m3 = m1 - m2;
            float this_min = m3 / D;
            if (this_min > 0.0f) {
                this_min = 0.0f;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0.0f;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * (float)Laux[i];
                diff = diff + this_min;
                diff = diff - x[i];
                const float sq = diff * diff;
                const float we = w[i] * sq;
                cur_error = cur_error + we;
            }
            if (cur_error < best_error) { /* strict: the earlier candidate wins a tie */
                for (int i = 0; i < n; i++) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

/* Q4_K (nmax 15) and Q5_K (nmax 31): one block of 256 inputs. */
static void quantize_block_q45(qg_ktype t, const float *x, uint8_t *blk, int *outside)
{
    const int nmax = t == QG_Q4_K ? 15 : 31;
    const float rmin = t == QG_Q4_K ? -1.0f : -0.5f;
    const int nstep = t == QG_Q4_K ? 20 : 15;
    uint8_t L[QG_QK_K];
    float scales[8], mins[8], w[32];
    float max_scale = 0.0f, max_min = 0.0f;

    for (int j = 0; j < 8; j++) {
        const float *xj = x + 32 * j;
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; l++) {
            const float sq = xj[l] * xj[l];
            sum_x2 = sum_x2 + sq;
        }
        const float mean = sum_x2 / 32.0f;
        const float av_x = sqrtf(mean);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xj[l]);
        scales[j] = fit_qkx2(32, nmax, xj, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep, outside);
        if (!isfinite(scales[j]) || !isfinite(mins[j])) *outside = 1; /* the fit's sums overflowed */
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }

    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    uint8_t *q = blk + QG_Q4K_SCALES;
    for (int j = 0; j < 8; j++) {
        /* ggml stores nearest_int into a uint8_t first (keeping the low 8 bits), then takes min(63, .) */
        const float vs = inv_scale * scales[j];
        const float vm = inv_min * mins[j];
        uint8_t ls = low8(nearest_int(vs, outside));
        uint8_t lm = low8(nearest_int(vm, outside));
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        if (j < 4) {
            q[j] = ls;
            q[j + 4] = lm;
        } else {
            q[j + 4] = (uint8_t)((ls & 15) | ((lm & 15) << 4));
            q[j - 4] = (uint8_t)(q[j - 4] | ((ls >> 4) << 6));
            q[j] = (uint8_t)(q[j] | ((lm >> 4) << 6));
        }
    }
    const float dv = max_scale / 63.0f;
    const float mv = max_min / 63.0f;
    st_u16(blk + QG_Q4K_D, qg_f32_to_f16(dv));
    st_u16(blk + QG_Q4K_DMIN, qg_f32_to_f16(mv));

    /* Requantize every element against the stored (rounded) scales, by division. A sub-block whose
     * d*sc is zero keeps the codes of the fit. */
    const float d = ld_f16(blk + QG_Q4K_D);
    const float dmin = ld_f16(blk + QG_Q4K_DMIN);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        scale_min_k4(q, j, &sc, &m);
        const float dd = d * (float)sc;
        if (dd == 0.0f) continue;
        const float dm = dmin * (float)m;
        for (int l = 0; l < 32; l++) {
            const float num = x[32 * j + l] + dm;
            const float v = num / dd;
            L[32 * j + l] = (uint8_t)clampi(nearest_int(v, outside), 0, nmax);
        }
    }

    if (t == QG_Q4_K) {
        uint8_t *qs = blk + QG_Q4K_QS;
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    } else {
        uint8_t *qh = blk + QG_Q5K_QH, *qs = blk + QG_Q5K_QS;
        memset(qh, 0, 32);
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
                if (lo > 15) {
                    lo -= 16;
                    qh[l] = (uint8_t)(qh[l] | (1u << (2 * c)));
                }
                if (hi > 15) {
                    hi -= 16;
                    qh[l] = (uint8_t)(qh[l] | (1u << (2 * c + 1)));
                }
                qs[32 * c + l] = (uint8_t)(lo | (hi << 4));
            }
        }
    }
}

/* One pass of the symmetric fit at inverse scale iscale: l = clamp(nearest_int(iscale*x), -nmax, nmax-1),
 * sumlx = sum (x^2*x)*l and suml2 = sum (x^2*l)*l in index order, each product and sum rounded on its
 * own. Stores l + nmax in L when L is not NULL (the first pass keeps its codes, the candidates do not). */
static void qx_sums(int n, int nmax, float iscale, const float *x, uint8_t *L, float *sumlx, float *suml2, int *outside)
{
    float slx = 0.0f, sl2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const float v = iscale * x[i];
        const int l = clampi(nearest_int(v, outside), -nmax, nmax - 1);
        if (L != NULL) L[i] = (uint8_t)(l + nmax);
        const float w = x[i] * x[i];
        const float wx = w * x[i];
        const float wxl = wx * (float)l;
        slx = slx + wxl;
        const float wl = w * (float)l;
        const float wll = wl * (float)l;
        sl2 = sl2 + wll;
    }
    *sumlx = slx;
    *suml2 = sl2;
}

/* Symmetric fit with weights x^2 (ggml make_qx_quants, rmse_type 1, no imatrix): codes L in 0..2*nmax-1
 * (stored value l + nmax, l in -nmax..nmax-1); returns the scale (may be negative). */
static float fit_qx(int n, int nmax, const float *x, uint8_t *L, int *outside)
{
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) { /* strict: the first of equal magnitudes wins */
            amax = ax;
            max = x[i];
        }
    }
    if (amax < 1e-15f) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    float iscale = (float)(-nmax) / max;
    float sumlx, suml2;
    qx_sums(n, nmax, iscale, x, L, &sumlx, &suml2, outside);
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        float num = 0.1f * (float)is;
        num = (float)nmax + num;
        num = -num;
        iscale = num / max;
        qx_sums(n, nmax, iscale, x, NULL, &sumlx, &suml2, outside);
        if (suml2 > 0.0f) {
            const float lhs = sumlx * sumlx;
            const float rhs = best * suml2;
            if (lhs > rhs) { /* strict */
                for (int i = 0; i < n; i++) {
                    const float v = iscale * x[i];
                    L[i] = (uint8_t)(nmax + clampi(nearest_int(v, outside), -nmax, nmax - 1));
                }
                scale = sumlx / suml2;
                best = scale * sumlx;
            }
        }
    }
    return scale;
}

static void quantize_block_q6(const float *x, uint8_t *blk, int *outside)
{
    uint8_t L[QG_QK_K];
    float scales[16];
    float max_scale = 0.0f, max_abs_scale = 0.0f;
    for (int g = 0; g < 16; g++) {
        scales[g] = fit_qx(16, 32, x + 16 * g, L + 16 * g, outside);
        if (!isfinite(scales[g])) *outside = 1; /* the fit's sums overflowed (NaN scales are then skipped) */
        const float a = fabsf(scales[g]);
        if (a > max_abs_scale) { /* strict: first on ties */
            max_abs_scale = a;
            max_scale = scales[g];
        }
    }
    if (max_abs_scale < 1e-15f) {
        memset(blk, 0, QG_Q6K_BYTES); /* d = +0 as well */
        return;
    }
    const float iscale = -128.0f / max_scale;
    const float dv = 1.0f / iscale;
    st_u16(blk + QG_Q6K_D, qg_f32_to_f16(dv));
    for (int g = 0; g < 16; g++) {
        const float v = iscale * scales[g];
        int s = nearest_int(v, outside);
        if (s > 127) s = 127;
        blk[QG_Q6K_SCALES + g] = low8(s); /* stored as int8 */
    }
    const float d = ld_f16(blk + QG_Q6K_D);
    for (int g = 0; g < 16; g++) {
        const float dd = d * (float)as_i8(blk[QG_Q6K_SCALES + g]);
        if (dd == 0.0f) continue;
        for (int l = 0; l < 16; l++) {
            const float v = x[16 * g + l] / dd;
            L[16 * g + l] = (uint8_t)(clampi(nearest_int(v, outside), -32, 31) + 32);
        }
    }
    uint8_t *ql = blk + QG_Q6K_QL, *qh = blk + QG_Q6K_QH;
    for (int h = 0; h < 2; h++) {
        const uint8_t *Lh = L + 128 * h;
        for (int l = 0; l < 32; l++) {
            ql[64 * h + l] = (uint8_t)((Lh[l] & 15) | ((Lh[64 + l] & 15) << 4));
            ql[64 * h + 32 + l] = (uint8_t)((Lh[32 + l] & 15) | ((Lh[96 + l] & 15) << 4));
            qh[32 * h + l] = (uint8_t)((Lh[l] >> 4) | ((Lh[32 + l] >> 4) << 2) | ((Lh[64 + l] >> 4) << 4) |
                                       ((Lh[96 + l] >> 4) << 6));
        }
    }
}

static void quantize_block_q8(const float *x, uint8_t *blk, int *outside)
{
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < QG_QK_K; j++) {
        const float ax = fabsf(x[j]);
        if (ax > amax) { /* strict: with +a and -a both present, the first one sets the sign */
            amax = ax;
            max = x[j];
        }
    }
    if (amax == 0.0f) {
        memset(blk, 0, QG_Q8K_BYTES); /* d = +0, qs = 0, bsums = 0 (ggml leaves bsums unwritten here) */
        return;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < QG_QK_K; j++) {
        const float v = iscale * x[j];
        int q = nearest_int(v, outside);
        if (q > 127) q = 127;
        blk[QG_Q8K_QS + j] = low8(q); /* stored as int8 */
    }
    for (int g = 0; g < 16; g++) {
        int sum = 0;
        for (int l = 0; l < 16; l++) sum += as_i8(blk[QG_Q8K_QS + 16 * g + l]);
        st_u16(blk + QG_Q8K_BSUMS + 2 * g, (uint16_t)((unsigned)sum & 0xFFFFu));
    }
    const float d = 1.0f / iscale;
    st_u32(blk + QG_Q8K_D, qg_f32_bits(d));
}

/* One block; returns 1 when it is inside the quantizer's domain (see qg_kq_quantize_domain_ref). */
static int quantize_block(qg_ktype t, const float *x, uint8_t *blk)
{
    int outside = 0;
    memset(blk, 0, qg_kq_block_bytes(t));
    switch (t) {
    case QG_Q4_K:
    case QG_Q5_K: quantize_block_q45(t, x, blk, &outside); break;
    case QG_Q6_K: quantize_block_q6(x, blk, &outside); break;
    case QG_Q8_K: quantize_block_q8(x, blk, &outside); break;
    }
    for (int i = 0; i < QG_QK_K; i++)
        if (!isfinite(x[i])) outside = 1;
    /* the stored scales: d or dmin not finite (an fp16 overflow) */
    if (t == QG_Q8_K) {
        if (!isfinite(ld_f32(blk + QG_Q8K_D))) outside = 1;
    } else if (t == QG_Q6_K) {
        if (!isfinite(ld_f16(blk + QG_Q6K_D))) outside = 1;
    } else if (!isfinite(ld_f16(blk + QG_Q4K_D)) || !isfinite(ld_f16(blk + QG_Q4K_DMIN))) {
        outside = 1;
    }
    return !outside;
}

int qg_kq_quantize_ref(qg_ktype t, const float *x, size_t rows, size_t cols, uint8_t *blocks, size_t nbytes)
{
    if (!known(t)) return QG_ERR_kq_type_unknown;
    if (x == NULL || blocks == NULL) return QG_ERR_argument_invalid;
    int rc = qg_kq_check_shape(t, rows, cols, nbytes);
    if (rc != QG_ERR_ok) return rc;
    const size_t nblocks = rows * (cols / QG_QK_K), bsz = qg_kq_block_bytes(t);
    for (size_t i = 0; i < nblocks; i++) (void)quantize_block(t, x + i * QG_QK_K, blocks + i * bsz);
    return QG_ERR_ok;
}

int qg_kq_quantize_domain_ref(qg_ktype t, const float *x, size_t rows, size_t cols, uint8_t *blocks, uint8_t *in_domain,
                              size_t *outside)
{
    if (!known(t)) return QG_ERR_kq_type_unknown;
    if (x == NULL || in_domain == NULL) return QG_ERR_argument_invalid;
    size_t nbytes = 0;
    int rc = check_dims(t, rows, cols, &nbytes);
    if (rc != QG_ERR_ok) return rc;
    const size_t nblocks = rows * (cols / QG_QK_K), bsz = qg_kq_block_bytes(t);
    size_t count = 0;
    uint8_t scratch[QG_Q8K_BYTES]; /* the largest block, when the bytes are not wanted */
    for (size_t i = 0; i < nblocks; i++) {
        in_domain[i] = (uint8_t)quantize_block(t, x + i * QG_QK_K, blocks != NULL ? blocks + i * bsz : scratch);
        count += in_domain[i] ? 0 : 1;
    }
    if (outside != NULL) *outside = count;
    return QG_ERR_ok;
}

/* ---- dot with a Q8_K row ----------------------------------------------------------------------- */

int qg_kq_dot_q8k_ref(qg_ktype t, const uint8_t *wrow, const uint8_t *q8row, size_t cols, int32_t *S, int32_t *M,
                      float *result)
{
    if (!known(t)) return QG_ERR_kq_type_unknown;
    if (t == QG_Q8_K) return QG_ERR_unsupported;
    if (wrow == NULL || q8row == NULL || result == NULL) return QG_ERR_argument_invalid;
    size_t expect = 0;
    int rc = check_dims(t, 1, cols, &expect);
    if (rc != QG_ERR_ok) return rc;

    const size_t nb = cols / QG_QK_K, bsz = qg_kq_block_bytes(t);
    float sums[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    float sumf = 0.0f;
    for (size_t i = 0; i < nb; i++) {
        const uint8_t *wb = wrow + i * bsz;
        const uint8_t *yb = q8row + i * QG_Q8K_BYTES;
        const float dy = ld_f32(yb + QG_Q8K_D);
        /* Integer part, exact: |lane| <= 32 * 63 * 31 * 128 < 2^24 (Q4_K/Q5_K) and <= 32 * 128 * 32 * 128
         * = 2^24 (Q6_K), so each lane is also exact as a float32; |S| < 2^28 and |M| < 2^26 fit int32. */
        int32_t lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int32_t Mi = 0;
        float dw;
        if (t == QG_Q6_K) {
            dw = ld_f16(wb + QG_Q6K_D);
            for (int e = 0; e < QG_QK_K; e++) {
                const int32_t sc = as_i8(wb[QG_Q6K_SCALES + e / 16]);
                const int32_t q = q6k_code(wb, e) - 32;
                lane[e % 8] += sc * (q * as_i8(yb[QG_Q8K_QS + e]));
            }
        } else {
            dw = ld_f16(wb + QG_Q4K_D);
            for (int e = 0; e < QG_QK_K; e++) {
                int sc, m;
                scale_min_k4(wb + QG_Q4K_SCALES, e / 32, &sc, &m);
                const int32_t q = t == QG_Q4_K ? q4k_code(wb + QG_Q4K_QS, e) : q5k_code(wb, e);
                lane[e % 8] += sc * (q * as_i8(yb[QG_Q8K_QS + e]));
            }
            for (int s = 0; s < 8; s++) {
                int sc, m;
                scale_min_k4(wb + QG_Q4K_SCALES, s, &sc, &m);
                const int32_t b2 = as_i16(ld_u16(yb + QG_Q8K_BSUMS + 4 * s)) + as_i16(ld_u16(yb + QG_Q8K_BSUMS + 4 * s + 2));
                Mi += m * b2;
            }
        }
        int32_t Si = 0;
        for (int l = 0; l < 8; l++) Si += lane[l];
        if (S != NULL) S[i] = Si;
        if (M != NULL) M[i] = Mi;

        /* Float part, ggml's generic order. */
        const float d = dw * dy;
        for (int l = 0; l < 8; l++) {
            const float p = d * (float)lane[l];
            sums[l] = sums[l] + p;
        }
        if (t != QG_Q6_K) {
            const float dmin = ld_f16(wb + QG_Q4K_DMIN) * dy;
            const float p = dmin * (float)Mi;
            sumf = sumf - p;
        }
    }
    for (int l = 0; l < 8; l++) sumf = sumf + sums[l];
    *result = sumf;
    return QG_ERR_ok;
}

/* ---- fused GEMV with fp16 activations ---------------------------------------------------------- */

int qg_kq_check_gemv(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                     const float *y_f32, const uint16_t *y_f16)
{
    if (!known(t)) return QG_ERR_kq_type_unknown;
    if (w == NULL || x == NULL || (y_f32 == NULL && y_f16 == NULL)) return QG_ERR_argument_invalid;
    int rc = qg_kq_check_shape(t, rows, cols, nbytes);
    if (rc != QG_ERR_ok) return rc;
    if (batch < 1 || batch > QG_KQ_MAX_BATCH) return QG_ERR_kq_batch_out_of_range;
    if (cols > SIZE_MAX / sizeof(uint16_t) / batch || rows > SIZE_MAX / sizeof(float) / batch) return QG_ERR_shape_invalid;
    return QG_ERR_ok;
}

int qg_kq_gemv_ref(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                   float *y_f32, uint16_t *y_f16)
{
    int rc = qg_kq_check_gemv(t, w, nbytes, rows, cols, x, batch, y_f32, y_f16);
    if (rc != QG_ERR_ok) return rc;

    const size_t nb = cols / QG_QK_K, bsz = qg_kq_block_bytes(t);
    float wdq[QG_QK_K];
    float acc[QG_KQ_MAX_BATCH];
    for (size_t m = 0; m < rows; m++) {
        for (size_t b = 0; b < batch; b++) acc[b] = 0.0f;
        for (size_t i = 0; i < nb; i++) {
            dequant_block(t, w + (m * nb + i) * bsz, wdq);
            for (size_t b = 0; b < batch; b++) {
                const uint16_t *xb = x + b * cols + i * QG_QK_K;
                for (int l = 0; l < QG_QK_K; l++) {
                    const float p = wdq[l] * qg_f16_to_f32(xb[l]);
                    acc[b] = acc[b] + p;
                }
            }
        }
        for (size_t b = 0; b < batch; b++) {
            if (y_f32 != NULL) y_f32[b * rows + m] = acc[b];
            if (y_f16 != NULL) y_f16[b * rows + m] = qg_f32_to_f16(acc[b]);
        }
    }
    return QG_ERR_ok;
}
