/* unit.int8.ref: the INT8 reference (qgold/intq.h) on hand-checked cases.
 *
 *   quantize    ties to even (v / s = k + 0.5, both signs), saturation to 127 / -128 through a rounded
 *               fp16 scale, zero blocks (s = 0, codes 0), -0.0, per tensor / row / group, fp16 sources,
 *               fp16 scale at the fp16 maximum and overflowing to inf (rejected), a scale that underflows;
 *   dequant     RN32(q s) against the exact product rounded once (double), fp16 as RN16 of that float32;
 *   w8a8        the int32 sum, the accumulator extreme at K = 131071 (all -128), int -> float rounding
 *               (2^24 + 1, 2^24 + 3), the epilogue order (sb then sa) against an independent double
 *               formulation on random values, relu at -0.0 and NaN, bias NaN / inf / fp16, inf * 0, fp16
 *               output overflow;
 *   w8a16       small sums by hand, fp16 and float32 scales;
 *   errors      every validation rule returns its name and leaves the outputs untouched.
 * Expected values are derived in the comments, or computed by an independent route (double arithmetic
 * whose products are exact), never copied from the function under test.
 */
#include "qg_test.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/intq.h"
#include "qgold/rng.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint32_t fbits(float f) { return qg_f32_bits(f); }

static int quantize(size_t rows, size_t cols, qg_int8_gran g, size_t group, qg_int8_ftype st, const void *x,
                    qg_int8_ftype src, int8_t *q, void *scales)
{
    const qg_int8_qshape s = {rows, cols, g, group, st};
    return qg_int8_quantize_ref(&s, x, src, q, scales);
}

static void test_quantize_ties(void)
{
    /* amax 127 -> s = 127 / 127 = 1 exactly: v / s = v, so the codes are rne(v) */
    const float x[10] = {127.0f, 2.5f, 3.5f, -2.5f, -3.5f, 0.5f, -0.5f, 1.5f, 126.5f, -126.5f};
    const int8_t want[10] = {127, 2, 4, -2, -4, 0, 0, 2, 126, -126};
    int8_t q[10];
    float s = -1.0f;
    QG_CHECK(quantize(1, 10, QG_INT8_PER_ROW, 0, QG_INT8_F32, x, QG_INT8_F32, q, &s) == QG_ERR_ok, "ties");
    QG_CHECK(s == 1.0f, "scale %g", s);
    for (int i = 0; i < 10; i++) QG_CHECK(q[i] == want[i], "tie %d: x %g -> %d, want %d", i, x[i], q[i], want[i]);

    /* amax 254 -> s = 2: 5 / 2 = 2.5 -> 2, 7 / 2 = 3.5 -> 4, -5 / 2 -> -2 */
    const float y[4] = {254.0f, 5.0f, 7.0f, -5.0f};
    const int8_t wy[4] = {127, 2, 4, -2};
    QG_CHECK(quantize(1, 4, QG_INT8_PER_TENSOR, 0, QG_INT8_F32, y, QG_INT8_F32, q, &s) == QG_ERR_ok && s == 2.0f, "s 2");
    for (int i = 0; i < 4; i++) QG_CHECK(q[i] == wy[i], "tie s=2 %d: %d", i, q[i]);
}

static void test_quantize_saturation(void)
{
    /* amax = 175 * 2^-24 (exact); s = amax / 127 = 1.378 * 2^-24 rounds in fp16 (subnormal quantum 2^-24)
     * to 2^-24 = bits 0x0001. Codes with that scale: 175 -> 127 (saturated), -175 -> -128 (saturated),
     * 100.5 -> 100 (tie to even), 101.5 -> 102, -100.5 -> -100. */
    const float u = 0x1p-24f;
    const float x[5] = {175 * u, -175 * u, 100.5f * u, 101.5f * u, -100.5f * u};
    const int8_t want[5] = {127, -128, 100, 102, -100};
    int8_t q[5];
    uint16_t s16 = 0xFFFF;
    QG_CHECK(quantize(1, 5, QG_INT8_PER_ROW, 0, QG_INT8_F16, x, QG_INT8_F32, q, &s16) == QG_ERR_ok, "sat");
    QG_CHECK(s16 == 0x0001, "fp16 scale 0x%04x", s16);
    for (int i = 0; i < 5; i++) QG_CHECK(q[i] == want[i], "sat %d: %d want %d", i, q[i], want[i]);

    /* The same values with a float32 scale: s = 175u / 127, and 175u / s = 127 (no saturation needed),
     * -175u / s = -127: a float32 scale never reaches -128. */
    float s = 0;
    QG_CHECK(quantize(1, 2, QG_INT8_PER_ROW, 0, QG_INT8_F32, x, QG_INT8_F32, q, &s) == QG_ERR_ok, "f32");
    QG_CHECK(q[0] == 127 && q[1] == -127, "f32 codes %d %d", q[0], q[1]);
    QG_CHECK(s == 175 * u / 127.0f, "f32 scale");
}

static void test_quantize_zero_and_groups(void)
{
    /* 2 rows x 64, groups of 32: row 0 = {zeros and -0 | 127, -63.5, 1, 0.5, zeros}, row 1 = {-127, zeros
     * | zeros}. */
    float x[128];
    memset(x, 0, sizeof x);
    x[1] = x[33 + 64] = -0.0f;
    x[32] = 127.0f, x[33] = -63.5f, x[34] = 1.0f, x[35] = 0.5f, x[64] = -127.0f;
    int8_t q[128];
    float s[4];
    memset(q, 0x55, sizeof q);
    QG_CHECK(quantize(2, 64, QG_INT8_PER_GROUP, 32, QG_INT8_F32, x, QG_INT8_F32, q, s) == QG_ERR_ok, "groups");
    /* group scales: 0, 1, 1, 0; codes: -63.5 -> -64 (tie to even), 0.5 -> 0 */
    QG_CHECK(s[0] == 0.0f && s[1] == 1.0f && s[2] == 1.0f && s[3] == 0.0f, "group scales %g %g %g %g", s[0], s[1], s[2], s[3]);
    QG_CHECK(fbits(s[0]) == 0 && fbits(s[3]) == 0, "zero scales are +0");
    for (int i = 0; i < 128; i++) {
        const int want = i == 32 ? 127 : i == 33 ? -64 : i == 34 ? 1 : i == 64 ? -127 : 0;
        QG_CHECK(q[i] == want, "group code %d: %d want %d", i, q[i], want);
    }

    /* per tensor over the same data: amax 127, s = 1 */
    float st = 0;
    QG_CHECK(quantize(2, 64, QG_INT8_PER_TENSOR, 0, QG_INT8_F32, x, QG_INT8_F32, q, &st) == QG_ERR_ok && st == 1.0f, "tensor");
    QG_CHECK(q[64] == -127 && q[33] == -64, "tensor codes");

    /* fp16 source: 0x5BF0 = 254.0, 0x4500 = 5.0, 0xC500 = -5.0: s = 2, codes 127, 2, -2 */
    const uint16_t h[3] = {0x5BF0, 0x4500, 0xC500};
    uint16_t s16;
    QG_CHECK(quantize(1, 3, QG_INT8_PER_ROW, 0, QG_INT8_F16, h, QG_INT8_F16, q, &s16) == QG_ERR_ok, "fp16 src");
    QG_CHECK(s16 == 0x4000 && q[0] == 127 && q[1] == 2 && q[2] == -2, "fp16 src: s 0x%04x q %d %d %d", s16, q[0], q[1], q[2]);

    /* the smallest float32 subnormal: amax / 127 underflows to +0, so every code is 0 */
    const float tiny[2] = {0x1p-149f, -0x1p-149f};
    QG_CHECK(quantize(1, 2, QG_INT8_PER_ROW, 0, QG_INT8_F32, tiny, QG_INT8_F32, q, &st) == QG_ERR_ok, "tiny");
    QG_CHECK(st == 0.0f && q[0] == 0 && q[1] == 0, "tiny: s %g q %d %d", st, q[0], q[1]);
}

static void test_quantize_fp16_scale_limits(void)
{
    int8_t q[2] = {0x11, 0x11};
    uint16_t s16 = 0x1234;
    /* amax = 65504 * 127 = 8319008 (exact): s = 65504, the fp16 maximum 0x7BFF */
    const float ok[2] = {8319008.0f, -1.0f};
    QG_CHECK(quantize(1, 2, QG_INT8_PER_ROW, 0, QG_INT8_F16, ok, QG_INT8_F32, q, &s16) == QG_ERR_ok && s16 == 0x7BFF,
             "fp16 max scale 0x%04x", s16);
    QG_CHECK(q[0] == 127 && q[1] == 0, "codes %d %d", q[0], q[1]);
    /* amax = 65520 * 127: s = 65520 rounds to inf in fp16: rejected, nothing written */
    const float big[2] = {8321040.0f, 1.0f};
    q[0] = q[1] = 0x11;
    s16 = 0x1234;
    QG_CHECK(quantize(1, 2, QG_INT8_PER_ROW, 0, QG_INT8_F16, big, QG_INT8_F32, q, &s16) == QG_ERR_int_scale_invalid, "fp16 inf");
    QG_CHECK(s16 == 0x1234 && q[0] == 0x11 && q[1] == 0x11, "untouched");
    /* the same amax with a float32 scale is fine */
    float s;
    QG_CHECK(quantize(1, 2, QG_INT8_PER_ROW, 0, QG_INT8_F32, big, QG_INT8_F32, q, &s) == QG_ERR_ok && s == 65520.0f, "f32");
}

static void test_quantize_errors(void)
{
    int8_t q[8];
    float s[8];
    const float good[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    float bad[8];
    memcpy(bad, good, sizeof bad);
    bad[5] = NAN;
    memset(q, 0x33, sizeof q);
    QG_CHECK(quantize(2, 4, QG_INT8_PER_ROW, 0, QG_INT8_F32, bad, QG_INT8_F32, q, s) == QG_ERR_int_nonfinite_input, "nan");
    QG_CHECK(qg_test_untouched(q, sizeof q, 0x33), "nan: codes untouched");
    bad[5] = -INFINITY;
    QG_CHECK(quantize(2, 4, QG_INT8_PER_ROW, 0, QG_INT8_F32, bad, QG_INT8_F32, q, s) == QG_ERR_int_nonfinite_input, "inf");
    const uint16_t hbad[2] = {0x3C00, 0x7C00};
    QG_CHECK(quantize(1, 2, QG_INT8_PER_ROW, 0, QG_INT8_F32, hbad, QG_INT8_F16, q, s) == QG_ERR_int_nonfinite_input, "fp16 inf");
    QG_CHECK(quantize(2, 4, QG_INT8_PER_GROUP, 4, QG_INT8_F32, good, QG_INT8_F32, q, s) == QG_ERR_int_group_invalid, "g 4");
    QG_CHECK(quantize(2, 4, QG_INT8_PER_GROUP, 0, QG_INT8_F32, good, QG_INT8_F32, q, s) == QG_ERR_int_group_invalid, "g 0");
    QG_CHECK(quantize(1, 96, QG_INT8_PER_GROUP, 64, QG_INT8_F32, good, QG_INT8_F32, q, s) == QG_ERR_int_group_invalid, "64 | 96");
    QG_CHECK(quantize(1, 96, QG_INT8_PER_GROUP, 48, QG_INT8_F32, good, QG_INT8_F32, q, s) == QG_ERR_int_group_invalid, "48");
    QG_CHECK(quantize(0, 4, QG_INT8_PER_ROW, 0, QG_INT8_F32, good, QG_INT8_F32, q, s) == QG_ERR_shape_invalid, "rows 0");
    QG_CHECK(quantize(2, 0, QG_INT8_PER_ROW, 0, QG_INT8_F32, good, QG_INT8_F32, q, s) == QG_ERR_shape_invalid, "cols 0");
    QG_CHECK(quantize(2, 4, (qg_int8_gran)7, 0, QG_INT8_F32, good, QG_INT8_F32, q, s) == QG_ERR_shape_invalid, "gran");
    QG_CHECK(quantize(2, 4, QG_INT8_PER_ROW, 0, QG_INT8_F32, good, QG_INT8_F32, q, NULL) == QG_ERR_int_scale_invalid, "NULL s");
    QG_CHECK(quantize(2, 4, QG_INT8_PER_ROW, 0, QG_INT8_F32, NULL, QG_INT8_F32, q, s) == QG_ERR_argument_invalid, "NULL x");
    QG_CHECK(quantize(2, 4, QG_INT8_PER_ROW, 0, QG_INT8_F32, good, QG_INT8_F32, NULL, s) == QG_ERR_argument_invalid, "NULL q");
    QG_CHECK(qg_int8_quantize_ref(NULL, good, QG_INT8_F32, q, s) == QG_ERR_argument_invalid, "NULL shape");
    const qg_int8_qshape g = {3, 256, QG_INT8_PER_GROUP, 128, QG_INT8_F16};
    QG_CHECK(qg_int8_num_scales(&g) == 6, "6 group scales");
    const qg_int8_qshape bg = {3, 96, QG_INT8_PER_GROUP, 128, QG_INT8_F16};
    QG_CHECK(qg_int8_num_scales(&bg) == 0 && qg_int8_qshape_check(&bg) == QG_ERR_int_group_invalid, "bad group");
}

static void test_dequant(void)
{
    /* y = RN32(q s): a product of an 8-bit integer and a float32 is exact in double, so (float) of the
     * double product is the float32 product rounded once. */
    qg_rng r;
    qg_rng_init(&r, 0x18);
    int8_t q[256];
    for (int i = 0; i < 256; i++) q[i] = (int8_t)(i - 128);
    float s[4];
    for (int b = 0; b < 4; b++) s[b] = qg_rng_uniform(&r, 0.0f, 1.0f) * 0x1p-3f;
    s[3] = 0x1.fffffep127f / 200.0f; /* large, and q s stays finite since |q| <= 128 */
    const qg_int8_qshape sh = {4, 64, QG_INT8_PER_ROW, 0, QG_INT8_F32};
    float y[256];
    uint16_t h[256];
    QG_CHECK(qg_int8_dequant_ref(&sh, q, s, y, h) == QG_ERR_ok, "dequant");
    for (int i = 0; i < 256; i++) {
        const float want = (float)((double)q[i] * (double)s[i / 64]);
        QG_CHECK(fbits(y[i]) == fbits(want), "dequant %d: %a want %a", i, y[i], want);
        QG_CHECK(h[i] == qg_f32_to_f16(want), "dequant f16 %d", i);
    }
    /* fp16 scale 0x3555 (0.33325195): q = 3 -> 0.99975586 exact in float32; its fp16 is 0x3BFF
     * (1 - 2^-11 = 0.99951172) or 0x3C00: the float32 value is 1 - 2^-12 + ..., see below */
    const uint16_t s16 = 0x3555;
    const int8_t q3[2] = {3, -128};
    const qg_int8_qshape sh16 = {1, 2, QG_INT8_PER_TENSOR, 0, QG_INT8_F16};
    QG_CHECK(qg_int8_dequant_ref(&sh16, q3, &s16, y, h) == QG_ERR_ok, "f16 scale");
    /* 0x3555 = 1.3330078125 * 2^-2 = 0.333251953125; x3 = 0.999755859375 = 1 - 2^-12 (exact);
     * RN16: halfway between 0x3BFF (1 - 2^-11) and 0x3C00 (1): ties to even -> 0x3C00. */
    QG_CHECK(y[0] == 0.999755859375f && h[0] == 0x3C00, "x3: %a 0x%04x", y[0], h[0]);
    /* -128 * 0.333251953125 = -42.65625 exact; fp16 0xD155 */
    QG_CHECK(y[1] == -42.65625f && h[1] == 0xD155, "x-128: %a 0x%04x", y[1], h[1]);
    /* only one output requested */
    QG_CHECK(qg_int8_dequant_ref(&sh16, q3, &s16, NULL, h) == QG_ERR_ok && h[0] == 0x3C00, "f16 only");
    /* errors: negative, NaN, inf, NULL scales; no output */
    float bad = -1.0f;
    memset(y, 0x44, 8);
    const qg_int8_qshape sh1 = {1, 2, QG_INT8_PER_TENSOR, 0, QG_INT8_F32};
    QG_CHECK(qg_int8_dequant_ref(&sh1, q3, &bad, y, NULL) == QG_ERR_int_scale_invalid, "neg");
    bad = NAN;
    QG_CHECK(qg_int8_dequant_ref(&sh1, q3, &bad, y, NULL) == QG_ERR_int_scale_invalid, "nan");
    bad = INFINITY;
    QG_CHECK(qg_int8_dequant_ref(&sh1, q3, &bad, y, NULL) == QG_ERR_int_scale_invalid, "inf");
    QG_CHECK(qg_int8_dequant_ref(&sh1, q3, NULL, y, NULL) == QG_ERR_int_scale_invalid, "NULL");
    QG_CHECK(qg_test_untouched(y, 8, 0x44), "untouched");
    QG_CHECK(qg_int8_dequant_ref(&sh1, q3, s, NULL, NULL) == QG_ERR_argument_invalid, "no output");
    QG_CHECK(qg_int8_dequant_ref(&sh1, NULL, s, y, NULL) == QG_ERR_argument_invalid, "NULL q");
    const uint16_t s16inf = 0x7C00;
    QG_CHECK(qg_int8_dequant_ref(&sh16, q3, &s16inf, y, NULL) == QG_ERR_int_scale_invalid, "fp16 inf scale");
    /* -0.0 is not negative: q -> q * -0 */
    const float nz = -0.0f;
    QG_CHECK(qg_int8_dequant_ref(&sh1, q3, &nz, y, NULL) == QG_ERR_ok && fbits(y[0]) == 0x80000000u && fbits(y[1]) == 0,
             "-0 scale");
}

static qg_int8_w8a8_args args(size_t M, size_t N, size_t K, const int8_t *A, const int8_t *B, const float *sa, size_t sal,
                              const float *sb, size_t sbl)
{
    qg_int8_w8a8_args p = {M, N, K, A, B, sa, sal, sb, sbl, NULL, QG_INT8_F32, 0};
    return p;
}

/* RN32(RN32((float) acc * sb) * sa) through double: for |acc| < 2^29 the products have at most 53 bits. */
static float epilogue_double(int32_t acc, float sa, float sb)
{
    const float a = (float)(double)acc;
    const float t = (float)((double)a * (double)sb);
    return (float)((double)t * (double)sa);
}

static void test_w8a8_basic(void)
{
    /* A = [[1, 2, 3], [-1, 0, 127]], B = [[4, 5, 6], [-128, -128, -128]]:
     * acc = [[4 + 10 + 18, -128 (1 + 2 + 3)], [-4 + 762, 128 - 16256]] = [[32, -768], [758, -16128]] */
    const int8_t A[6] = {1, 2, 3, -1, 0, 127}, B[6] = {4, 5, 6, -128, -128, -128};
    const int32_t want[4] = {32, -768, 758, -16128};
    int32_t acc[4];
    qg_int8_w8a8_args p = args(2, 2, 3, A, B, NULL, 0, NULL, 0);
    QG_CHECK(qg_int8_w8a8_ref(&p, acc, NULL, NULL) == QG_ERR_ok, "acc only, no scales");
    for (int i = 0; i < 4; i++) QG_CHECK(acc[i] == want[i], "acc %d: %d", i, acc[i]);
    /* sa = [0.5, 2], sb = 0.25 (scalar): y = acc * 0.25 * sa: [4, -96, 379, -8064]; fp16 379 =
     * 1.48046875 * 2^8 -> 0x5C00 | 492 = 0x5DEC, -8064 = -1.96875 * 2^12 -> 0xEC00 | 992 = 0xEFE0 */
    const float sa[2] = {0.5f, 2.0f}, sb = 0.25f;
    float y[4];
    uint16_t h[4];
    p = args(2, 2, 3, A, B, sa, 2, &sb, 1);
    QG_CHECK(qg_int8_w8a8_ref(&p, NULL, y, h) == QG_ERR_ok, "scaled");
    QG_CHECK(y[0] == 4.0f && y[1] == -96.0f && y[2] == 379.0f && y[3] == -8064.0f, "y %g %g %g %g", y[0], y[1], y[2], y[3]);
    QG_CHECK(h[0] == 0x4400 && h[1] == 0xD600 && h[2] == 0x5DEC && h[3] == 0xEFE0, "h %04x %04x %04x %04x", h[0], h[1], h[2], h[3]);
    /* bias float32 [1, 100], relu: [5, 4, 380, relu(-7964) = +0] */
    const float bias[2] = {1.0f, 100.0f};
    p.bias = bias;
    p.relu = 1;
    QG_CHECK(qg_int8_w8a8_ref(&p, NULL, y, NULL) == QG_ERR_ok, "bias relu");
    QG_CHECK(y[0] == 5.0f && y[1] == 4.0f && y[2] == 380.0f && fbits(y[3]) == 0, "bias relu %g %g %g %g", y[0], y[1], y[2], y[3]);
    /* bias fp16 [0x3C00 = 1, 0x5640 = 100] gives the same */
    const uint16_t bias16[2] = {0x3C00, 0x5640};
    p.bias = bias16;
    p.bias_type = QG_INT8_F16;
    float y2[4];
    QG_CHECK(qg_int8_w8a8_ref(&p, NULL, y2, NULL) == QG_ERR_ok && memcmp(y, y2, sizeof y) == 0, "fp16 bias");
}

static void test_w8a8_extremes(void)
{
    /* K = 131071, all -128: acc = 131071 * 16384 = 2^31 - 2^14 = 2147467264 (17 significant bits: exact
     * in float32). With sa = sb = 1 the float32 output is that value. */
    const size_t K = QG_INT8_MAX_K;
    int8_t *A = malloc(K + 1), *B = malloc(K + 1);
    if (A == NULL || B == NULL) {
        QG_CHECK(0, "alloc");
        free(A);
        free(B);
        return;
    }
    memset(A, 0x80, K + 1);
    memset(B, 0x80, K + 1);
    int32_t acc;
    float y, one = 1.0f;
    qg_int8_w8a8_args p = args(1, 1, K, A, B, &one, 1, &one, 1);
    QG_CHECK(qg_int8_w8a8_ref(&p, &acc, &y, NULL) == QG_ERR_ok, "K max");
    QG_CHECK(acc == 2147467264, "acc %d", acc);
    QG_CHECK(y == 2147467264.0f, "y %a", y);
    /* A = -128, B = 127: acc = -131071 * 16256 = -2130690176 */
    memset(B, 0x7F, K);
    QG_CHECK(qg_int8_w8a8_ref(&p, &acc, NULL, NULL) == QG_ERR_ok && acc == -2130690176, "acc %d", acc);
    /* K = 131072: rejected */
    p.K = K + 1;
    QG_CHECK(qg_int8_w8a8_ref(&p, &acc, NULL, NULL) == QG_ERR_int_k_too_large, "K + 1");
    /* int -> float rounding: 1024 products of -128 x -128 = 2^24, plus 1 x 1: acc = 2^24 + 1, a tie
     * between 2^24 and 2^24 + 2: to even, 2^24. Plus 3 (three 1 x 1): 2^24 + 3 -> 2^24 + 4. */
    memset(A, 0x80, 1027);
    memset(B, 0x80, 1027);
    A[1024] = B[1024] = 1;
    A[1025] = B[1025] = 0;
    A[1026] = B[1026] = 0;
    p.K = 1027;
    QG_CHECK(qg_int8_w8a8_ref(&p, &acc, &y, NULL) == QG_ERR_ok && acc == 16777217 && y == 16777216.0f, "2^24+1: %d %a", acc, y);
    A[1025] = B[1025] = A[1026] = B[1026] = 1;
    QG_CHECK(qg_int8_w8a8_ref(&p, &acc, &y, NULL) == QG_ERR_ok && acc == 16777219 && y == 16777220.0f, "2^24+3: %d %a", acc, y);
    free(A);
    free(B);
}

static void test_w8a8_order(void)
{
    /* Random accumulators and scales: the reference equals the double formulation of sb-then-sa, and
     * the other order (sa first) differs somewhere, so the test can see the order. */
    qg_rng r;
    qg_rng_init(&r, 0x8a8);
    int differs = 0;
    for (int i = 0; i < 2000; i++) {
        const int32_t acc = (int32_t)qg_rng_int_range(&r, 1u << 28) - (1 << 27);
        const float sa = qg_rng_uniform(&r, 0.0f, 1.0f), sb = qg_rng_uniform(&r, 0.0f, 0x1p-10f);
        const float got = qg_int8_epilogue(acc, sa, sb, NULL, QG_INT8_F32, 0);
        const float want = epilogue_double(acc, sa, sb);
        QG_CHECK(fbits(got) == fbits(want), "epilogue %d: acc %d sa %a sb %a: %a want %a", i, acc, sa, sb, got, want);
        differs += fbits(want) != fbits(epilogue_double(acc, sb, sa));
    }
    QG_CHECK(differs > 0, "the scale order never mattered on the data");
}

static void test_w8a8_specials(void)
{
    const int8_t A[1] = {-1}, B[4] = {1, 2, 3, 4};
    /* acc = -1 x [1..4] = [-1, -2, -3, -4]; sb tiny and sa tiny: -1 * 2^-100 * 2^-100 underflows to
     * -0.0; relu maps it to +0.0 */
    float sa = 0x1p-100f, sb = 0x1p-100f, y[4];
    uint16_t h[4];
    qg_int8_w8a8_args p = args(1, 4, 1, A, B, &sa, 1, &sb, 1);
    QG_CHECK(qg_int8_w8a8_ref(&p, NULL, y, h) == QG_ERR_ok && fbits(y[0]) == 0x80000000u && h[0] == 0x8000, "-0");
    p.relu = 1;
    QG_CHECK(qg_int8_w8a8_ref(&p, NULL, y, h) == QG_ERR_ok && fbits(y[0]) == 0 && h[0] == 0, "relu -0 -> +0");
    /* bias NaN / +inf / -inf / 1 with relu: NaN stays NaN, +inf, -inf -> +0, 1 */
    const float bias[4] = {NAN, INFINITY, -INFINITY, 1.0f};
    p.bias = bias;
    QG_CHECK(qg_int8_w8a8_ref(&p, NULL, y, h) == QG_ERR_ok, "bias specials");
    QG_CHECK(isnan(y[0]) && qg_f16_isnan(h[0]), "NaN bias + relu: NaN");
    QG_CHECK(y[1] == INFINITY && h[1] == 0x7C00, "+inf");
    QG_CHECK(fbits(y[2]) == 0 && h[2] == 0, "relu(-inf) = +0");
    QG_CHECK(y[3] == 1.0f && h[3] == 0x3C00, "1");
    p.relu = 0;
    QG_CHECK(qg_int8_w8a8_ref(&p, NULL, y, h) == QG_ERR_ok && isnan(y[0]) && y[2] == -INFINITY && h[2] == 0xFC00, "no relu");
    /* inf * 0: sb = 2^127, acc = -4 -> -2^129 = -inf; sa = 0 -> NaN; relu keeps it */
    sb = 0x1p127f;
    sa = 0.0f;
    p.bias = NULL;
    p.relu = 1;
    QG_CHECK(qg_int8_w8a8_ref(&p, NULL, y, h) == QG_ERR_ok, "inf*0");
    QG_CHECK(isnan(y[3]) && qg_f16_isnan(h[3]), "inf * 0 -> NaN: %a", y[3]);
    QG_CHECK(fbits(y[0]) == 0, "-2^127 * 0 = -0, relu +0: %a", y[0]);
    /* fp16 output overflow: acc = -4, sb = 16380, sa = 1: -65520 -> -inf in fp16, finite float32 */
    sb = 16380.0f;
    sa = 1.0f;
    p.relu = 0;
    QG_CHECK(qg_int8_w8a8_ref(&p, NULL, y, h) == QG_ERR_ok && y[3] == -65520.0f && h[3] == 0xFC00, "fp16 overflow 0x%04x", h[3]);
    /* -65504 stays finite: acc = -4, sb = 16376 */
    sb = 16376.0f;
    QG_CHECK(qg_int8_w8a8_ref(&p, NULL, y, h) == QG_ERR_ok && h[3] == 0xFBFF, "fp16 max 0x%04x", h[3]);
}

static void test_w8a8_errors(void)
{
    const int8_t A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {1, 1, 1, 1, 1, 1};
    float sa[3] = {1, 1, 1}, sb[2] = {1, 1}, y[6];
    int32_t acc[6];
    memset(y, 0x66, sizeof y);
    memset(acc, 0x66, sizeof acc);
    qg_int8_w8a8_args p = args(3, 2, 2, A, B, sa, 3, sb, 2);
    QG_CHECK(qg_int8_w8a8_ref(&p, acc, y, NULL) == QG_ERR_ok, "valid");
    memset(y, 0x66, sizeof y);
    memset(acc, 0x66, sizeof acc);
    sa[1] = NAN;
    QG_CHECK(qg_int8_w8a8_ref(&p, acc, y, NULL) == QG_ERR_int_nonfinite_input, "sa NaN");
    sa[1] = 1;
    sb[1] = INFINITY;
    QG_CHECK(qg_int8_w8a8_ref(&p, acc, y, NULL) == QG_ERR_int_nonfinite_input, "sb inf");
    sb[1] = -2.0f;
    QG_CHECK(qg_int8_w8a8_ref(&p, acc, y, NULL) == QG_ERR_int_scale_invalid, "sb negative");
    sb[1] = 1;
    p.sa = NULL;
    QG_CHECK(qg_int8_w8a8_ref(&p, acc, y, NULL) == QG_ERR_int_scale_invalid, "sa NULL");
    p.sa = sa;
    p.sb_len = 3;
    QG_CHECK(qg_int8_w8a8_ref(&p, acc, y, NULL) == QG_ERR_size_mismatch, "sb_len");
    p.sb_len = 2;
    p.sa_len = 2;
    QG_CHECK(qg_int8_w8a8_ref(&p, acc, y, NULL) == QG_ERR_size_mismatch, "sa_len");
    p.sa_len = 3;
    p.M = 0;
    QG_CHECK(qg_int8_w8a8_ref(&p, acc, y, NULL) == QG_ERR_shape_invalid, "M 0");
    p.M = 3;
    p.K = 0;
    QG_CHECK(qg_int8_w8a8_ref(&p, acc, y, NULL) == QG_ERR_shape_invalid, "K 0");
    p.K = 2;
    p.A = NULL;
    QG_CHECK(qg_int8_w8a8_ref(&p, acc, y, NULL) == QG_ERR_argument_invalid, "A NULL");
    p.A = A;
    QG_CHECK(qg_int8_w8a8_ref(&p, NULL, NULL, NULL) == QG_ERR_argument_invalid, "no output");
    p.relu = 2;
    QG_CHECK(qg_int8_w8a8_ref(&p, acc, y, NULL) == QG_ERR_argument_invalid, "relu 2");
    p.relu = 0;
    p.K = 131072;
    QG_CHECK(qg_int8_w8a8_ref(&p, acc, y, NULL) == QG_ERR_int_k_too_large, "K");
    QG_CHECK(qg_test_untouched(y, sizeof y, 0x66) && qg_test_untouched(acc, sizeof acc, 0x66), "outputs untouched");
}

static void test_w8a16(void)
{
    /* B = [[3, 4], [1, -2]], X = [[0.5, 0.25], [1, 0.5]], sb fp16 [2, 0.5]:
     * y[0] = [(1.5 + 1) * 2, (0.5 - 0.5) * 0.5] = [5, 0]; y[1] = [(3 + 2) * 2, (1 - 1) * 0.5] = [10, 0] */
    const int8_t B[4] = {3, 4, 1, -2};
    const uint16_t X[4] = {0x3800, 0x3400, 0x3C00, 0x3800}, sb16[2] = {0x4000, 0x3800};
    float y[4];
    uint16_t h[4];
    QG_CHECK(qg_int8_w8a16_ref(B, sb16, QG_INT8_F16, 2, 2, X, 2, y, h) == QG_ERR_ok, "w8a16");
    QG_CHECK(y[0] == 5.0f && y[1] == 0.0f && y[2] == 10.0f && y[3] == 0.0f, "y %g %g %g %g", y[0], y[1], y[2], y[3]);
    QG_CHECK(h[0] == 0x4500 && h[2] == 0x4900, "h");
    const float sb[2] = {2.0f, 0.5f};
    float y2[4];
    QG_CHECK(qg_int8_w8a16_ref(B, sb, QG_INT8_F32, 2, 2, X, 2, y2, NULL) == QG_ERR_ok && memcmp(y, y2, sizeof y) == 0, "f32 sb");
    /* errors */
    const float bad[2] = {1.0f, NAN}, neg[2] = {1.0f, -1.0f};
    memset(y, 0x77, sizeof y);
    QG_CHECK(qg_int8_w8a16_ref(B, bad, QG_INT8_F32, 2, 2, X, 2, y, NULL) == QG_ERR_int_nonfinite_input, "sb NaN");
    QG_CHECK(qg_int8_w8a16_ref(B, neg, QG_INT8_F32, 2, 2, X, 2, y, NULL) == QG_ERR_int_scale_invalid, "sb negative");
    QG_CHECK(qg_int8_w8a16_ref(B, NULL, QG_INT8_F32, 2, 2, X, 2, y, NULL) == QG_ERR_int_scale_invalid, "sb NULL");
    QG_CHECK(qg_int8_w8a16_ref(B, sb, QG_INT8_F32, 2, 2, X, 0, y, NULL) == QG_ERR_shape_invalid, "M 0");
    QG_CHECK(qg_int8_w8a16_ref(B, sb, QG_INT8_F32, 0, 2, X, 2, y, NULL) == QG_ERR_shape_invalid, "N 0");
    QG_CHECK(qg_int8_w8a16_ref(NULL, sb, QG_INT8_F32, 2, 2, X, 2, y, NULL) == QG_ERR_argument_invalid, "B NULL");
    QG_CHECK(qg_int8_w8a16_ref(B, sb, QG_INT8_F32, 2, 2, X, 2, NULL, NULL) == QG_ERR_argument_invalid, "no output");
    QG_CHECK(qg_test_untouched(y, sizeof y, 0x77), "untouched");
    /* NaN activation: NaN output */
    const uint16_t Xn[2] = {0x7E00, 0x3C00};
    QG_CHECK(qg_int8_w8a16_ref(B, sb, QG_INT8_F32, 2, 2, Xn, 1, y, NULL) == QG_ERR_ok && isnan(y[0]) && isnan(y[1]), "NaN x");
}

int main(void)
{
    test_quantize_ties();
    test_quantize_saturation();
    test_quantize_zero_and_groups();
    test_quantize_fp16_scale_limits();
    test_quantize_errors();
    test_dequant();
    test_w8a8_basic();
    test_w8a8_extremes();
    test_w8a8_order();
    test_w8a8_specials();
    test_w8a8_errors();
    test_w8a16();
    return qg_test_end("unit.int8.ref");
}
