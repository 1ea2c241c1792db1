/* READ ME FIRST: INT8 symmetric quantization and integer products, the reference
 * (spec: reference/spec/intq.md; arithmetic of shared/specs/intq.md sections 1 and 2).
 *
 * Quantization. A block (the tensor, a row, or a group of `group` consecutive elements of a row) has
 * amax = max |v|; its scale is s = amax / 127, one IEEE float32 division, or 0 when amax is 0. An fp16
 * scale is RN16(s) and the codes are then computed with that fp16 value, so dequantization reproduces
 * exactly what was stored. A code is q = sat(rne(v / s)): one IEEE division (never v * (1/s), which
 * rounds twice), rounded to the nearest integer with ties to even, clamped to [-128, 127]. When s is 0
 * (amax 0, or amax / 127 underflowing to 0 in float32 or fp16) every code is 0.
 *
 * Dequantization is one rounding, RN32((float) q * s); the fp16 output rounds that float32 again (the
 * pinned two roundings), so no implementation may compute q * s directly in fp16.
 *
 * W8A8. The integer sum acc = sum_k A[m][k] B[n][k] is exact in int32 for K <= 131071, because
 * |A B| <= 128 * 128 = 2^14 and 131071 * 2^14 = 2^31 - 2^14 < 2^31; its order is therefore free. The
 * epilogue is a fixed chain of float32 roundings (sb first, then sa, then bias, then relu), which makes
 * every scaled output bit-exact. ReLU keeps a NaN (a comparison `t > 0` alone would turn it into 0) and
 * maps -0.0 to +0.0.
 *
 * W8A16. B[n][k] * X[m][k] is exact in float32 (at most 8 + 11 significant bits, magnitudes 2^-24 *
 * 1 .. 2^7 * 65504), so the only roundings are the K - 1 float32 additions, in index order, and the one
 * multiplication by sb[n] after the sum: each term sees at most K roundings, the chain length the
 * bounded tier declares.
 */
#include "qgold/intq.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if !defined(FLT_EVAL_METHOD) || (FLT_EVAL_METHOD != 0 && FLT_EVAL_METHOD != 16)
#error "the INT8 reference needs float32 expressions evaluated in float32 (FLT_EVAL_METHOD == 0)"
#endif

/* ---- shapes ---- */

int qg_int8_qshape_check(const qg_int8_qshape *s)
{
    if (s == NULL) return QG_ERR_argument_invalid;
    if (s->rows == 0 || s->cols == 0 || s->rows > SIZE_MAX / s->cols) return QG_ERR_shape_invalid;
    if (s->scale_type != QG_INT8_F32 && s->scale_type != QG_INT8_F16) return QG_ERR_shape_invalid;
    switch (s->gran) {
    case QG_INT8_PER_TENSOR:
    case QG_INT8_PER_ROW: return QG_ERR_ok;
    case QG_INT8_PER_GROUP:
        if ((s->group != 32 && s->group != 64 && s->group != 128) || s->cols % s->group != 0)
            return QG_ERR_int_group_invalid;
        return QG_ERR_ok;
    }
    return QG_ERR_shape_invalid;
}

size_t qg_int8_num_scales(const qg_int8_qshape *s)
{
    if (qg_int8_qshape_check(s) != QG_ERR_ok) return 0;
    switch (s->gran) {
    case QG_INT8_PER_TENSOR: return 1;
    case QG_INT8_PER_ROW: return s->rows;
    case QG_INT8_PER_GROUP: return s->rows * (s->cols / s->group);
    }
    return 0;
}

/* Elements per block and blocks per row: a block is `len` consecutive elements (one whole row when per
 * row; the whole tensor, viewed as one row, when per tensor). */
static void block_geometry(const qg_int8_qshape *s, size_t *len, size_t *count)
{
    switch (s->gran) {
    case QG_INT8_PER_TENSOR: *len = s->rows * s->cols; *count = 1; return;
    case QG_INT8_PER_ROW: *len = s->cols; *count = s->rows; return;
    case QG_INT8_PER_GROUP: *len = s->group; *count = s->rows * (s->cols / s->group); return;
    }
    *len = 0;
    *count = 0;
}

static float load_f(const void *p, qg_int8_ftype t, size_t i)
{
    if (t == QG_INT8_F16) return qg_f16_to_f32(((const uint16_t *)p)[i]);
    float v;
    memcpy(&v, (const unsigned char *)p + i * sizeof(float), sizeof v);
    return v;
}

static void store_f(void *p, qg_int8_ftype t, size_t i, float v)
{
    if (t == QG_INT8_F16)
        ((uint16_t *)p)[i] = qg_f32_to_f16(v);
    else
        memcpy((unsigned char *)p + i * sizeof(float), &v, sizeof v);
}

/* ---- scalar steps ---- */

int8_t qg_int8_quantize_value(float v, float s)
{
    const float r = rintf(v / s); /* default rounding mode: to nearest, ties to even */
    if (r >= 127.0f) return 127;
    if (r <= -128.0f) return -128;
    return (int8_t)r;
}

float qg_int8_epilogue(int32_t acc, float sa, float sb, const void *bias_n, qg_int8_ftype bias_type, int relu)
{
    float t = (float)acc; /* rounds to nearest even above 2^24 */
    t = t * sb;
    t = t * sa;
    if (bias_n != NULL) {
        const float b = load_f(bias_n, bias_type, 0);
        t = t + b;
    }
    if (relu && !isnan(t)) t = t > 0.0f ? t : 0.0f;
    return t;
}

/* ---- validation (shared by every backend) ---- */

int qg_int8_quantize_check(const qg_int8_qshape *s, const void *x, qg_int8_ftype src_type, const int8_t *q,
                           const void *scales)
{
    if (s == NULL || x == NULL || q == NULL) return QG_ERR_argument_invalid;
    const int st = qg_int8_qshape_check(s);
    if (st != QG_ERR_ok) return st;
    if (src_type != QG_INT8_F32 && src_type != QG_INT8_F16) return QG_ERR_argument_invalid;
    if (scales == NULL) return QG_ERR_int_scale_invalid;
    return QG_ERR_ok;
}

int qg_int8_scale_of(float amax, qg_int8_ftype scale_type, float *s)
{
    float sc = amax == 0.0f ? 0.0f : amax / (float)QG_INT8_QMAX;
    if (scale_type == QG_INT8_F16) {
        sc = qg_f16_to_f32(qg_f32_to_f16(sc));
        if (isinf(sc)) return QG_ERR_int_scale_invalid;
    }
    *s = sc;
    return QG_ERR_ok;
}

int qg_int8_dequant_check(const qg_int8_qshape *s, const int8_t *q, const void *scales, const float *y_f32,
                          const uint16_t *y_f16)
{
    if (s == NULL || q == NULL || (y_f32 == NULL && y_f16 == NULL)) return QG_ERR_argument_invalid;
    const int st = qg_int8_qshape_check(s);
    if (st != QG_ERR_ok) return st;
    if (scales == NULL) return QG_ERR_int_scale_invalid;
    const size_t count = qg_int8_num_scales(s);
    for (size_t b = 0; b < count; b++) {
        const float sc = load_f(scales, s->scale_type, b);
        if (!isfinite(sc) || sc < 0.0f) return QG_ERR_int_scale_invalid;
    }
    return QG_ERR_ok;
}

/* Product scales: finite (int_nonfinite_input) and not negative (int_scale_invalid). */
static int check_product_scales(const void *sc, qg_int8_ftype t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(load_f(sc, t, i))) return QG_ERR_int_nonfinite_input;
    for (size_t i = 0; i < n; i++)
        if (load_f(sc, t, i) < 0.0f) return QG_ERR_int_scale_invalid;
    return QG_ERR_ok;
}

static int dims_invalid(size_t M, size_t N, size_t K)
{
    return M == 0 || N == 0 || K == 0 || M > SIZE_MAX / K || N > SIZE_MAX / K || M > SIZE_MAX / N;
}

int qg_int8_w8a8_check(const qg_int8_w8a8_args *p, const int32_t *acc, const float *y_f32, const uint16_t *y_f16)
{
    if (p == NULL || p->A == NULL || p->B == NULL || (acc == NULL && y_f32 == NULL && y_f16 == NULL))
        return QG_ERR_argument_invalid;
    const size_t M = p->M, N = p->N;
    if (dims_invalid(M, N, p->K)) return QG_ERR_shape_invalid;
    const int scaled = y_f32 != NULL || y_f16 != NULL;
    if (scaled) {
        if ((p->sa_len != 1 && p->sa_len != M) || (p->sb_len != 1 && p->sb_len != N)) return QG_ERR_size_mismatch;
        if (p->bias != NULL && p->bias_type != QG_INT8_F32 && p->bias_type != QG_INT8_F16)
            return QG_ERR_argument_invalid;
        if (p->relu != 0 && p->relu != 1) return QG_ERR_argument_invalid;
    }
    if (p->K > QG_INT8_MAX_K) return QG_ERR_int_k_too_large;
    if (scaled) {
        if (p->sa == NULL || p->sb == NULL) return QG_ERR_int_scale_invalid;
        const int st = check_product_scales(p->sa, QG_INT8_F32, p->sa_len);
        if (st != QG_ERR_ok) return st;
        return check_product_scales(p->sb, QG_INT8_F32, p->sb_len);
    }
    return QG_ERR_ok;
}

int qg_int8_w8a16_check(const int8_t *B, const void *sb, qg_int8_ftype sb_type, size_t N, size_t K, const uint16_t *X,
                        size_t M, const float *y_f32, const uint16_t *y_f16)
{
    if (B == NULL || X == NULL || (y_f32 == NULL && y_f16 == NULL)) return QG_ERR_argument_invalid;
    if (sb_type != QG_INT8_F32 && sb_type != QG_INT8_F16) return QG_ERR_argument_invalid;
    if (dims_invalid(M, N, K)) return QG_ERR_shape_invalid;
    if (sb == NULL) return QG_ERR_int_scale_invalid;
    return check_product_scales(sb, sb_type, N);
}

/* ---- quantize / dequantize ---- */

int qg_int8_quantize_ref(const qg_int8_qshape *s, const void *x, qg_int8_ftype src_type, int8_t *q, void *scales)
{
    int st = qg_int8_quantize_check(s, x, src_type, q, scales);
    if (st != QG_ERR_ok) return st;
    const size_t n = s->rows * s->cols;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(load_f(x, src_type, i))) return QG_ERR_int_nonfinite_input;

    size_t len, count;
    block_geometry(s, &len, &count);
    /* Two passes: every scale first, so that an fp16 scale overflowing to inf is rejected before any
     * output is written. */
    for (int write = 0; write <= 1; write++) {
        for (size_t b = 0; b < count; b++) {
            float amax = 0.0f, sc;
            for (size_t i = 0; i < len; i++) {
                const float a = fabsf(load_f(x, src_type, b * len + i));
                if (a > amax) amax = a;
            }
            if ((st = qg_int8_scale_of(amax, s->scale_type, &sc)) != QG_ERR_ok) return st;
            if (!write) continue;
            store_f(scales, s->scale_type, b, sc);
            for (size_t i = 0; i < len; i++)
                q[b * len + i] = sc == 0.0f ? 0 : qg_int8_quantize_value(load_f(x, src_type, b * len + i), sc);
        }
    }
    return QG_ERR_ok;
}

int qg_int8_dequant_ref(const qg_int8_qshape *s, const int8_t *q, const void *scales, float *y_f32, uint16_t *y_f16)
{
    const int st = qg_int8_dequant_check(s, q, scales, y_f32, y_f16);
    if (st != QG_ERR_ok) return st;
    size_t len, count;
    block_geometry(s, &len, &count);
    for (size_t b = 0; b < count; b++) {
        const float sc = load_f(scales, s->scale_type, b);
        for (size_t i = 0; i < len; i++) {
            const size_t j = b * len + i;
            const float y = (float)q[j] * sc; /* one rounding */
            if (y_f32 != NULL) y_f32[j] = y;
            if (y_f16 != NULL) y_f16[j] = qg_f32_to_f16(y); /* the second, pinned rounding */
        }
    }
    return QG_ERR_ok;
}

/* ---- products ---- */

int qg_int8_w8a8_ref(const qg_int8_w8a8_args *p, int32_t *acc, float *y_f32, uint16_t *y_f16)
{
    const int st = qg_int8_w8a8_check(p, acc, y_f32, y_f16);
    if (st != QG_ERR_ok) return st;
    const size_t M = p->M, N = p->N, K = p->K;
    const int scaled = y_f32 != NULL || y_f16 != NULL;
    for (size_t m = 0; m < M; m++) {
        const int8_t *a = p->A + m * K;
        for (size_t n = 0; n < N; n++) {
            const int8_t *b = p->B + n * K;
            int32_t s = 0; /* exact: |s| <= K * 2^14 < 2^31 */
            for (size_t k = 0; k < K; k++) s += (int32_t)a[k] * (int32_t)b[k];
            const size_t o = m * N + n;
            if (acc != NULL) acc[o] = s;
            if (!scaled) continue;
            const void *bias_n = NULL;
            if (p->bias != NULL)
                bias_n = (const unsigned char *)p->bias + n * (p->bias_type == QG_INT8_F16 ? 2u : 4u);
            const float t = qg_int8_epilogue(s, p->sa[p->sa_len == 1 ? 0 : m], p->sb[p->sb_len == 1 ? 0 : n], bias_n,
                                             p->bias_type, p->relu);
            if (y_f32 != NULL) y_f32[o] = t;
            if (y_f16 != NULL) y_f16[o] = qg_f32_to_f16(t);
        }
    }
    return QG_ERR_ok;
}

int qg_int8_w8a16_ref(const int8_t *B, const void *sb, qg_int8_ftype sb_type, size_t N, size_t K, const uint16_t *X,
                      size_t M, float *y_f32, uint16_t *y_f16)
{
    const int st = qg_int8_w8a16_check(B, sb, sb_type, N, K, X, M, y_f32, y_f16);
    if (st != QG_ERR_ok) return st;
    for (size_t m = 0; m < M; m++) {
        const uint16_t *x = X + m * K;
        for (size_t n = 0; n < N; n++) {
            const int8_t *b = B + n * K;
            float s = (float)b[0] * qg_f16_to_f32(x[0]); /* exact product */
            for (size_t k = 1; k < K; k++) s = s + (float)b[k] * qg_f16_to_f32(x[k]);
            const float y = load_f(sb, sb_type, n) * s;
            if (y_f32 != NULL) y_f32[m * N + n] = y;
            if (y_f16 != NULL) y_f16[m * N + n] = qg_f32_to_f16(y);
        }
    }
    return QG_ERR_ok;
}
