/* READ ME FIRST: INT4, the reference (spec: reference/spec/intq.md; arithmetic: shared intq.md
 * sections 1 and 3). The formulas are in qgold/int4.h; this file follows them step by step.
 *
 * Why quantization is pinned. Each step is one IEEE float32 operation (|v|, max, amax / 7, v / s) or an
 * integer operation (round half to even, clamp). The code divides by s, never multiplies by 1/s (that
 * rounds twice and can move a code across a half-way point).
 *
 * Why the packed product is exact. Every term is in [-64, 64]; with K <= 131071 the int32 sum is exact
 * whatever the order. The epilogue is a fixed sequence of float32 roundings.
 *
 * Why W4A16 decode is exact. q - z is an integer in [-15, 15] (5 bits), s an fp16 value (11 significant
 * bits): the product has at most 15 significant bits and a magnitude between 2^-24 and 15 * 65504, so it
 * is exact in float32. The GEMV's products w * x (x fp16) have up to 26 significant bits and are rounded
 * to float32; the sum is float32 in index order. Kernels may reorder it: they are judged by the bound.
 *
 * Importers only move bits: GPTQ transposes K/8 x N words into N x K/8 (the nibble order along K is
 * already the canonical one), AWQ undoes the column interleave [0, 2, 4, 6, 1, 3, 5, 7].
 */
#include "qgold/int4.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if !defined(FLT_EVAL_METHOD) || (FLT_EVAL_METHOD != 0 && FLT_EVAL_METHOD != 16)
#error "the INT4 reference needs float32 expressions evaluated in float32 (FLT_EVAL_METHOD == 0)"
#endif

/* ---------------------------------------------------------------- quantize / dequantize */

int qg_int4_qshape_check(const qg_int4_qshape *s)
{
    if (!s) return QG_ERR_argument_invalid;
    if (s->rows == 0 || s->cols == 0 || s->cols > SIZE_MAX / s->rows) return QG_ERR_shape_invalid;
    if (s->scale_type != QG_INT4_F32 && s->scale_type != QG_INT4_F16) return QG_ERR_shape_invalid;
    switch (s->gran) {
    case QG_INT4_PER_TENSOR:
    case QG_INT4_PER_ROW: return 0;
    case QG_INT4_PER_GROUP:
        if (s->group == 0 || s->cols % s->group != 0) return QG_ERR_int_group_invalid;
        return 0;
    }
    return QG_ERR_shape_invalid;
}

size_t qg_int4_num_scales(const qg_int4_qshape *s)
{
    if (qg_int4_qshape_check(s) != 0) return 0;
    switch (s->gran) {
    case QG_INT4_PER_TENSOR: return 1;
    case QG_INT4_PER_ROW: return s->rows;
    case QG_INT4_PER_GROUP: return s->rows * (s->cols / s->group);
    }
    return 0;
}

/* Elements covered by one scale, in row-major order (a tensor scale covers everything). */
static size_t block_len(const qg_int4_qshape *s)
{
    return s->gran == QG_INT4_PER_TENSOR ? s->rows * s->cols : s->gran == QG_INT4_PER_ROW ? s->cols : s->group;
}

static float load_f(const void *p, qg_int4_ftype t, size_t i)
{
    return t == QG_INT4_F16 ? qg_f16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

/* sat(rne(v / s)) for s > 0 finite and v finite. rintf rounds half to even in the default mode; the
 * clamp happens on the float so that no out-of-range conversion occurs. */
static int8_t quantize_value(float v, float s)
{
    float r = rintf(v / s);
    if (r > (float)QG_INT4_QMAX) r = (float)QG_INT4_QMAX;
    if (r < (float)QG_INT4_QMIN) r = (float)QG_INT4_QMIN;
    return (int8_t)r;
}

int qg_int4_quantize_ref(const qg_int4_qshape *s, const void *x, qg_int4_ftype src_type, int8_t *q, void *scales)
{
    if (!s || !x || !q) return QG_ERR_argument_invalid;
    int rc = qg_int4_qshape_check(s);
    if (rc) return rc;
    if (src_type != QG_INT4_F32 && src_type != QG_INT4_F16) return QG_ERR_argument_invalid;
    if (!scales) return QG_ERR_int_scale_invalid;
    const size_t total = s->rows * s->cols, bl = block_len(s), nb = total / bl;
    /* Validate everything first: no output is touched on an error. */
    for (size_t i = 0; i < total; i++)
        if (!isfinite(load_f(x, src_type, i))) return QG_ERR_int_nonfinite_input;
    if (s->scale_type == QG_INT4_F16) {
        for (size_t b = 0; b < nb; b++) {
            float amax = 0.0f;
            for (size_t i = b * bl; i < (b + 1) * bl; i++) amax = fmaxf(amax, fabsf(load_f(x, src_type, i)));
            if (isinf(qg_f16_to_f32(qg_f32_to_f16(amax / (float)QG_INT4_QMAX)))) return QG_ERR_int_scale_invalid;
        }
    }
    for (size_t b = 0; b < nb; b++) {
        float amax = 0.0f;
        for (size_t i = b * bl; i < (b + 1) * bl; i++) amax = fmaxf(amax, fabsf(load_f(x, src_type, i)));
        float sc = amax == 0.0f ? 0.0f : amax / (float)QG_INT4_QMAX;
        if (s->scale_type == QG_INT4_F16) {
            uint16_t h = qg_f32_to_f16(sc);
            ((uint16_t *)scales)[b] = h;
            sc = qg_f16_to_f32(h); /* the codes are computed with the stored fp16 scale */
        } else {
            ((float *)scales)[b] = sc;
        }
        for (size_t i = b * bl; i < (b + 1) * bl; i++) q[i] = sc == 0.0f ? 0 : quantize_value(load_f(x, src_type, i), sc);
    }
    return 0;
}

/* A dequantization scale must be finite and not negative (-0.0 compares equal to 0 and is allowed). */
static int scale_ok(float s) { return isfinite(s) && !(s < 0.0f); }

int qg_int4_dequant_ref(const qg_int4_qshape *s, const int8_t *q, const void *scales, float *y_f32, uint16_t *y_f16)
{
    if (!s || !q || (!y_f32 && !y_f16)) return QG_ERR_argument_invalid;
    int rc = qg_int4_qshape_check(s);
    if (rc) return rc;
    if (!scales) return QG_ERR_int_scale_invalid;
    const size_t total = s->rows * s->cols, bl = block_len(s), nb = total / bl;
    for (size_t i = 0; i < total; i++)
        if (q[i] < QG_INT4_QMIN || q[i] > QG_INT4_QMAX) return QG_ERR_argument_invalid;
    for (size_t b = 0; b < nb; b++)
        if (!scale_ok(load_f(scales, s->scale_type, b))) return QG_ERR_int_scale_invalid;
    for (size_t i = 0; i < total; i++) {
        const float v = (float)q[i] * load_f(scales, s->scale_type, i / bl); /* RN32, one rounding */
        if (y_f32) y_f32[i] = v;
        if (y_f16) y_f16[i] = qg_f32_to_f16(v);
    }
    return 0;
}

/* ---------------------------------------------------------------- packed int4 x int4 GEMM */

float qg_int4_epilogue(int32_t acc, float sa, float sb, const void *bias_n, qg_int4_ftype bias_type, int relu)
{
    float t = (float)acc * sb; /* (float) acc rounds to nearest even, then one rounding per operation */
    t = t * sa;
    if (bias_n) t = t + (bias_type == QG_INT4_F16 ? qg_f16_to_f32(*(const uint16_t *)bias_n) : *(const float *)bias_n);
    if (relu && !isnan(t)) t = t > 0.0f ? t : 0.0f; /* -0.0 and negatives become +0.0 */
    return t;
}

void qg_int4_gemm_store(const qg_int4_gemm_args *p, size_t m, size_t n, int32_t s, int32_t *acc, float *y_f32, uint16_t *y_f16)
{
    const size_t o = m * p->N + n;
    if (acc) acc[o] = s;
    if (y_f32 || y_f16) {
        const void *bias_n = NULL;
        if (p->bias)
            bias_n = p->bias_type == QG_INT4_F16 ? (const void *)((const uint16_t *)p->bias + n) : (const void *)((const float *)p->bias + n);
        const float t = qg_int4_epilogue(s, p->sa[p->sa_len == 1 ? 0 : m], p->sb[p->sb_len == 1 ? 0 : n], bias_n, p->bias_type, p->relu);
        if (y_f32) y_f32[o] = t;
        if (y_f16) y_f16[o] = qg_f32_to_f16(t);
    }
}

static int product_scales_ok(const float *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(s[i])) return QG_ERR_int_nonfinite_input;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0.0f) return QG_ERR_int_scale_invalid;
    return 0;
}

int qg_int4_gemm_check(const qg_int4_gemm_args *p, const int32_t *acc, const float *y_f32, const uint16_t *y_f16)
{
    if (!p || !p->A || !p->B || (!acc && !y_f32 && !y_f16)) return QG_ERR_argument_invalid;
    if (p->M == 0 || p->N == 0 || p->K == 0) return QG_ERR_shape_invalid;
    const size_t rb = qg_int4_packed_row_bytes(p->K);
    if (p->M > SIZE_MAX / rb || p->N > SIZE_MAX / rb || p->N > SIZE_MAX / p->M) return QG_ERR_shape_invalid;
    if (p->A_len != p->M * rb || p->B_len != p->N * rb) return QG_ERR_size_mismatch;
    if (p->K > QG_INT4_MAX_K) return QG_ERR_int_k_too_large;
    const int scaled = y_f32 || y_f16;
    if (scaled) {
        if (!p->sa || !p->sb) return QG_ERR_int_scale_invalid;
        if ((p->sa_len != 1 && p->sa_len != p->M) || (p->sb_len != 1 && p->sb_len != p->N)) return QG_ERR_shape_invalid;
        if (p->bias && p->bias_type != QG_INT4_F32 && p->bias_type != QG_INT4_F16) return QG_ERR_argument_invalid;
        if (p->relu != 0 && p->relu != 1) return QG_ERR_argument_invalid;
        int rc = product_scales_ok(p->sa, p->sa_len);
        if (!rc) rc = product_scales_ok(p->sb, p->sb_len);
        if (rc) return rc;
    }
    if (p->K & 1) { /* the high nibble of the last byte of every row is padding */
        for (size_t m = 0; m < p->M; m++)
            if (p->A[m * rb + rb - 1] & 0xF0u) return QG_ERR_int4_bad_padding;
        for (size_t n = 0; n < p->N; n++)
            if (p->B[n * rb + rb - 1] & 0xF0u) return QG_ERR_int4_bad_padding;
    }
    return 0;
}

int qg_int4_gemm_packed_ref(const qg_int4_gemm_args *p, int32_t *acc, float *y_f32, uint16_t *y_f16)
{
    int rc = qg_int4_gemm_check(p, acc, y_f32, y_f16);
    if (rc) return rc;
    const size_t rb = qg_int4_packed_row_bytes(p->K);
    for (size_t m = 0; m < p->M; m++) {
        const uint8_t *a = p->A + m * rb;
        for (size_t n = 0; n < p->N; n++) {
            const uint8_t *b = p->B + n * rb;
            int32_t s = 0;
            for (size_t k = 0; k < p->K; k++) s += qg_int4_packed_get(a, k) * qg_int4_packed_get(b, k);
            qg_int4_gemm_store(p, m, n, s, acc, y_f32, y_f16);
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- W4A16 canonical layout */

static int group_size_allowed(size_t g, size_t K) { return g == 32 || g == 64 || g == 128 || g == K; }

/* Shapes and group size of a layout (shared with the importers). */
static int w4a16_shape(size_t N, size_t K, size_t g)
{
    if (N == 0 || K == 0 || K % 8 != 0) return QG_ERR_shape_invalid;
    if (K > (size_t)INT32_MAX || N > SIZE_MAX / K) return QG_ERR_shape_invalid;
    if (!group_size_allowed(g, K) || K % g != 0) return QG_ERR_int_group_invalid;
    return 0;
}

static int fp16_scale_ok(uint16_t h) { return scale_ok(qg_f16_to_f32(h)); }

/* g_idx is a valid assignment when each entry is a group 0..G-1 and each group holds g columns (a
 * permutation of the plain k / g assignment, as act-order checkpoints store it). */
static int g_idx_check(const int32_t *g_idx, size_t K, size_t g)
{
    const size_t G = K / g;
    for (size_t k = 0; k < K; k++)
        if (g_idx[k] < 0 || (size_t)g_idx[k] >= G) return QG_ERR_int4_g_idx_invalid;
    /* Group sizes counted in windows of 512 groups with a fixed array (no allocation to fail). */
    size_t counts[512];
    for (size_t base = 0; base < G; base += 512) {
        const size_t span = G - base < 512 ? G - base : 512;
        memset(counts, 0, sizeof counts);
        for (size_t k = 0; k < K; k++) {
            const size_t j = (size_t)g_idx[k];
            if (j >= base && j < base + span) counts[j - base]++;
        }
        for (size_t j = 0; j < span; j++)
            if (counts[j] != g) return QG_ERR_int4_g_idx_invalid;
    }
    return 0;
}

int qg_w4a16_validate(const qg_w4a16 *L)
{
    if (!L || !L->qweight || !L->scales) return QG_ERR_argument_invalid;
    int rc = w4a16_shape(L->N, L->K, L->g);
    if (rc) return rc;
    const size_t G = L->K / L->g;
    if (L->qweight_len != L->N * (L->K / 8) || L->scales_len != L->N * G) return QG_ERR_size_mismatch;
    if (L->zeros && L->zeros_len != L->N * G) return QG_ERR_size_mismatch;
    if (L->g_idx && L->g_idx_len != L->K) return QG_ERR_size_mismatch;
    for (size_t i = 0; i < L->scales_len; i++)
        if (!fp16_scale_ok(L->scales[i])) return QG_ERR_int_scale_invalid;
    if (L->zeros)
        for (size_t i = 0; i < L->zeros_len; i++)
            if (L->zeros[i] > 15) return QG_ERR_int4_zero_out_of_range;
    if (L->g_idx) return g_idx_check(L->g_idx, L->K, L->g);
    return 0;
}

int qg_w4a16_decode_ref(const qg_w4a16 *L, float *w)
{
    if (!w) return QG_ERR_argument_invalid;
    int rc = qg_w4a16_validate(L);
    if (rc) return rc;
    const size_t G = L->K / L->g;
    for (size_t n = 0; n < L->N; n++)
        for (size_t k = 0; k < L->K; k++) {
            const size_t j = qg_w4a16_group(L, k);
            const int z = L->zeros ? L->zeros[n * G + j] : QG_INT4_SYM_ZERO;
            w[n * L->K + k] = (float)((int)qg_w4a16_code(L, n, k) - z) * qg_f16_to_f32(L->scales[n * G + j]);
        }
    return 0;
}

int qg_w4a16_gemv_ref(const qg_w4a16 *L, const uint16_t *x, size_t x_len, size_t batch, float *y_f32, uint16_t *y_f16)
{
    if (!x || (!y_f32 && !y_f16)) return QG_ERR_argument_invalid;
    int rc = qg_w4a16_validate(L);
    if (rc) return rc;
    if (batch == 0 || batch > SIZE_MAX / L->K || batch > SIZE_MAX / L->N) return QG_ERR_batch_invalid;
    if (x_len != batch * L->K) return QG_ERR_size_mismatch;
    const size_t G = L->K / L->g;
    for (size_t b = 0; b < batch; b++)
        for (size_t n = 0; n < L->N; n++) {
            float acc = 0.0f;
            for (size_t k = 0; k < L->K; k++) {
                const size_t j = qg_w4a16_group(L, k);
                const int z = L->zeros ? L->zeros[n * G + j] : QG_INT4_SYM_ZERO;
                const float w = (float)((int)qg_w4a16_code(L, n, k) - z) * qg_f16_to_f32(L->scales[n * G + j]);
                const float p = w * qg_f16_to_f32(x[b * L->K + k]);
                acc = acc + p;
            }
            if (y_f32) y_f32[b * L->N + n] = acc;
            if (y_f16) y_f16[b * L->N + n] = qg_f32_to_f16(acc);
        }
    return 0;
}

/* ---------------------------------------------------------------- importers */

#ifdef QG_MUTATION_INT4_AWQ_ORDER
/* Mutant: the interleave read as plain order (what a loader that forgets AWQ's packing does). */
const unsigned char qg_awq_order[8] = {0, 1, 2, 3, 4, 5, 6, 7};
#else
const unsigned char qg_awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
#endif

static unsigned nibble(int32_t word, unsigned j) { return ((uint32_t)word >> (4 * j)) & 0xFu; }

/* Checks shared by both importers: pointers, shapes (N a multiple of 8: zeros are packed along N),
 * buffer lengths, fp16 scales. */
static int import_common(size_t N, size_t K, size_t g, const void *qw, const void *qz, const uint16_t *sc,
                         size_t qw_len, size_t qz_len, size_t sc_len, size_t qw_want, const qg_w4a16_out *out)
{
    if (!qw || !qz || !sc || !out || !out->qweight || !out->scales || !out->zeros) return QG_ERR_argument_invalid;
    int rc = w4a16_shape(N, K, g);
    if (rc) return rc;
    if (N % 8 != 0) return QG_ERR_shape_invalid;
    const size_t G = K / g;
    if (qw_len != qw_want || qz_len != G * (N / 8) || sc_len != G * N) return QG_ERR_size_mismatch;
    for (size_t i = 0; i < sc_len; i++)
        if (!fp16_scale_ok(sc[i])) return QG_ERR_int_scale_invalid;
    return 0;
}

int qg_int4_import_gptq_ref(const qg_gptq_src *src, const qg_w4a16_out *out)
{
    if (!src) return QG_ERR_argument_invalid;
    const size_t N = src->N, K = src->K, g = src->g;
    int rc = import_common(N, K, g, src->qweight, src->qzeros, src->scales, src->qweight_len, src->qzeros_len,
                           src->scales_len, (K / 8) * N, out);
    if (rc) return rc;
    if (src->version != 1 && src->version != 2) return QG_ERR_argument_invalid;
    const size_t G = K / g;
    if (src->g_idx) {
        if (!out->g_idx) return QG_ERR_argument_invalid;
        if (src->g_idx_len != K) return QG_ERR_size_mismatch;
        rc = g_idx_check(src->g_idx, K, g);
        if (rc) return rc;
    }
    /* v1 stores zero - 1: a stored 15 would mean 16, outside the 4-bit range. */
    if (src->version == 1)
        for (size_t j = 0; j < G; j++)
            for (size_t n = 0; n < N; n++)
                if (nibble(src->qzeros[j * (N / 8) + n / 8], n % 8) == 15) return QG_ERR_int4_zero_out_of_range;
    /* qweight: word (i, n) of the K/8 x N source is word (n, i) of the canonical N x K/8 array, and
     * nibble j of both holds k = 8i + j. */
    for (size_t n = 0; n < N; n++)
        for (size_t i = 0; i < K / 8; i++) out->qweight[n * (K / 8) + i] = (uint32_t)src->qweight[i * N + n];
    for (size_t n = 0; n < N; n++)
        for (size_t j = 0; j < G; j++) {
            out->scales[n * G + j] = src->scales[j * N + n];
            const unsigned z = nibble(src->qzeros[j * (N / 8) + n / 8], n % 8);
            out->zeros[n * G + j] = (uint8_t)(src->version == 1 ? z + 1 : z);
        }
    if (src->g_idx) memcpy(out->g_idx, src->g_idx, K * sizeof *src->g_idx);
    return 0;
}

int qg_int4_import_awq_ref(const qg_awq_src *src, const qg_w4a16_out *out)
{
    if (!src) return QG_ERR_argument_invalid;
    const size_t N = src->N, K = src->K, g = src->g;
    int rc = import_common(N, K, g, src->qweight, src->qzeros, src->scales, src->qweight_len, src->qzeros_len,
                           src->scales_len, K * (N / 8), out);
    if (rc) return rc;
    const size_t G = K / g;
    /* Column 8w + order[j] sits in nibble j of word w: invert the order once. */
    unsigned slot[8];
    for (unsigned j = 0; j < 8; j++) slot[qg_awq_order[j]] = j;
    for (size_t n = 0; n < N; n++) {
        const size_t w = n / 8;
        const unsigned j = slot[n % 8];
        for (size_t i = 0; i < K / 8; i++) {
            uint32_t word = 0;
            for (unsigned e = 0; e < 8; e++) word |= (uint32_t)nibble(src->qweight[(8 * i + e) * (N / 8) + w], j) << (4 * e);
            out->qweight[n * (K / 8) + i] = word;
        }
        for (size_t gj = 0; gj < G; gj++) {
            out->scales[n * G + gj] = src->scales[gj * N + n];
            out->zeros[n * G + gj] = (uint8_t)nibble(src->qzeros[gj * (N / 8) + w], j);
        }
    }
    return 0;
}
