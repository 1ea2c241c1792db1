/* INT4 reference on hand-checked cases: quantization ties and saturation, nibble order and sign extension
 * of packed int4, odd-K padding, the epilogue, W4A16 decode (nibble order, symmetric and explicit zeros,
 * act-order g_idx with a permutation), GPTQ v1 vs v2 zeros, the AWQ interleave, every error name with
 * outputs untouched, and the GEMV within its bound of the exact product. */
#include "compare.h"
#include "qg_test.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/int4.h"
#include "qgold/registry.h"
#include "qgold/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint16_t h(float v) { return qg_f32_to_f16(v); }
static uint32_t bits(float v) { return qg_f32_bits(v); }

static void test_quantize(void)
{
    /* s = 7 / 7 = 1: ties 3.5 -> 4, -2.5 -> -2, 0.5 -> 0 (half to even), -3.5 -> -4. */
    const float x[8] = {3.5f, -2.5f, 0.5f, 7.0f, -3.5f, 1.5f, -0.0f, 6.9f};
    int8_t q[8];
    float s[2];
    qg_int4_qshape sh = {2, 4, QG_INT4_PER_ROW, 0, QG_INT4_F32};
    int rc = qg_int4_quantize_ref(&sh, x, QG_INT4_F32, q, s);
    QG_CHECK(rc == 0, "%s", qg_error_name(rc));
    const int8_t want[8] = {4, -2, 0, 7, -4, 2, 0, 7};
    /* row 1: amax 6.9, s = 6.9 / 7; -3.5 / s = -3.5507 -> -4; 1.5 / s = 1.5217 -> 2; 6.9 / s = 7 */
    QG_CHECK(memcmp(q, want, 8) == 0, "codes %d %d %d %d | %d %d %d %d", q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]);
    QG_CHECK(bits(s[0]) == bits(1.0f) && bits(s[1]) == bits(6.9f / 7.0f), "scales %a %a", s[0], s[1]);

    /* Groups of 2 and a zero group: amax 0 gives scale 0 and codes 0. */
    const float xg[4] = {0.0f, -0.0f, -1.0f, 0.25f};
    qg_int4_qshape gs = {1, 4, QG_INT4_PER_GROUP, 2, QG_INT4_F32};
    rc = qg_int4_quantize_ref(&gs, xg, QG_INT4_F32, q, s);
    QG_CHECK(rc == 0 && q[0] == 0 && q[1] == 0 && s[0] == 0.0f, "zero group: %s %d %d %a", qg_error_name(rc), q[0], q[1], s[0]);
    /* s = 1/7; -1 / s = -7 exactly? 1/7 rounds, so -1 / RN(1/7) = -7.0000003 -> -7; 0.25 / s = 1.75 -> 2 */
    QG_CHECK(q[2] == -7 && q[3] == 2, "group 2: %d %d", q[2], q[3]);

    /* fp16 scale at the subnormal floor: amax = 9.8 * 2^-24, s = 1.4 * 2^-24 rounds to 2^-24 in fp16, and
     * the codes use it: -9.8 -> -10 saturates to -8, 4.9 -> 5. */
    const float xs[2] = {-9.8f * 0x1p-24f, 4.9f * 0x1p-24f};
    uint16_t s16[1];
    qg_int4_qshape hs = {1, 2, QG_INT4_PER_TENSOR, 0, QG_INT4_F16};
    rc = qg_int4_quantize_ref(&hs, xs, QG_INT4_F32, q, s16);
    QG_CHECK(rc == 0 && s16[0] == 0x0001 && q[0] == -8 && q[1] == 5, "subnormal scale: %s %04x %d %d", qg_error_name(rc),
             s16[0], q[0], q[1]);

    /* fp16 input. */
    const uint16_t xh[2] = {h(-7.0f), h(3.5f)};
    rc = qg_int4_quantize_ref(&hs, xh, QG_INT4_F16, q, s16);
    QG_CHECK(rc == 0 && s16[0] == h(1.0f) && q[0] == -7 && q[1] == 4, "fp16 input: %d %d", q[0], q[1]);

    /* Errors, outputs untouched. */
    int8_t qp[4];
    memset(qp, 0x5A, sizeof qp);
    const float bad[4] = {1.0f, NAN, 0.0f, 0.0f};
    QG_CHECK(qg_int4_quantize_ref(&gs, bad, QG_INT4_F32, qp, s) == QG_ERR_int_nonfinite_input, "NaN input");
    const float big[2] = {7.0f * 65536.0f, 0.0f};
    QG_CHECK(qg_int4_quantize_ref(&hs, big, QG_INT4_F32, qp, s16) == QG_ERR_int_scale_invalid, "fp16 scale overflows to inf");
    qg_int4_qshape g3 = {1, 4, QG_INT4_PER_GROUP, 3, QG_INT4_F32};
    QG_CHECK(qg_int4_quantize_ref(&g3, xg, QG_INT4_F32, qp, s) == QG_ERR_int_group_invalid, "group 3 of 4");
    qg_int4_qshape z = {0, 4, QG_INT4_PER_ROW, 0, QG_INT4_F32};
    QG_CHECK(qg_int4_quantize_ref(&z, xg, QG_INT4_F32, qp, s) == QG_ERR_shape_invalid, "rows 0");
    QG_CHECK(qg_int4_quantize_ref(&gs, xg, QG_INT4_F32, qp, NULL) == QG_ERR_int_scale_invalid, "NULL scales");
    QG_CHECK(qg_int4_quantize_ref(&gs, NULL, QG_INT4_F32, qp, s) == QG_ERR_argument_invalid, "NULL x");
    QG_CHECK(qg_test_untouched(qp, sizeof qp, 0x5A), "output written on error");
}

static void test_dequant(void)
{
    const int8_t q[4] = {-8, 7, 0, -1};
    const float s[2] = {0.5f, 3.0f};
    float y[4];
    uint16_t y16[4];
    qg_int4_qshape sh = {2, 2, QG_INT4_PER_ROW, 0, QG_INT4_F32};
    int rc = qg_int4_dequant_ref(&sh, q, s, y, y16);
    QG_CHECK(rc == 0 && y[0] == -4.0f && y[1] == 3.5f && bits(y[2]) == 0 && y[3] == -3.0f, "dequant %a %a %a %a", y[0],
             y[1], y[2], y[3]);
    QG_CHECK(y16[0] == h(-4.0f) && y16[1] == h(3.5f) && y16[3] == h(-3.0f), "fp16 out");
    /* fp16 output is RN16 of the float32 value: 7 * 10000.5 = 70003.5 rounds to inf in fp16. */
    const float sb[2] = {10000.5f, 1.0f};
    rc = qg_int4_dequant_ref(&sh, q, sb, y, y16);
    QG_CHECK(rc == 0 && y[1] == 70003.5f && y16[1] == 0x7C00, "overflow to inf %a %04x", y[1], y16[1]);
    /* fp16 scales. */
    const uint16_t s16[1] = {h(0.25f)};
    qg_int4_qshape th = {2, 2, QG_INT4_PER_TENSOR, 0, QG_INT4_F16};
    rc = qg_int4_dequant_ref(&th, q, s16, y, NULL);
    QG_CHECK(rc == 0 && y[0] == -2.0f && y[1] == 1.75f, "fp16 scale");

    float yp[4];
    memset(yp, 0x5A, sizeof yp);
    const float neg[2] = {-0.5f, 1.0f}, inf[2] = {INFINITY, 1.0f}, nan[2] = {1.0f, NAN};
    QG_CHECK(qg_int4_dequant_ref(&sh, q, neg, yp, NULL) == QG_ERR_int_scale_invalid, "negative scale");
    QG_CHECK(qg_int4_dequant_ref(&sh, q, inf, yp, NULL) == QG_ERR_int_scale_invalid, "inf scale");
    QG_CHECK(qg_int4_dequant_ref(&sh, q, nan, yp, NULL) == QG_ERR_int_scale_invalid, "NaN scale");
    const int8_t q8[4] = {8, 0, 0, 0};
    QG_CHECK(qg_int4_dequant_ref(&sh, q8, s, yp, NULL) == QG_ERR_argument_invalid, "code 8 is not int4");
    QG_CHECK(qg_int4_dequant_ref(&sh, q, s, NULL, NULL) == QG_ERR_argument_invalid, "no output");
    QG_CHECK(qg_test_untouched(yp, sizeof yp, 0x5A), "output written on error");
}

static void test_gemm_packed(void)
{
    /* K = 3: A row = elements {1, -8, 7}: byte 0 = 0x81 (low nibble element 0 = 1, high nibble element 1
     * = 0x8 = -8), byte 1 = 0x07 (element 2 = 7, padding high nibble 0). B rows: {-1, 2, 3}: 0x2F, 0x03;
     * {-8, -8, -8}: 0x88, 0x08. acc = 1*-1 + -8*2 + 7*3 = 4 and 1*-8 + -8*-8 + 7*-8 = 0. */
    const uint8_t A[2] = {0x81, 0x07};
    const uint8_t B[4] = {0x2F, 0x03, 0x88, 0x08};
    const float sa[1] = {2.0f}, sb[2] = {0.75f, 1.0f};
    const uint16_t bias[2] = {h(-4.0f), h(-1.0f)};
    qg_int4_gemm_args p = {1, 2, 3, A, 2, B, 4, sa, 1, sb, 2, bias, QG_INT4_F16, 0};
    int32_t acc[2];
    float y[2];
    uint16_t y16[2];
    int rc = qg_int4_gemm_packed_ref(&p, acc, y, y16);
    QG_CHECK(rc == 0 && acc[0] == 4 && acc[1] == 0, "acc %d %d (%s)", acc[0], acc[1], qg_error_name(rc));
    /* y0 = 4 * 0.75 * 2 - 4 = 2; y1 = 0 * 1 * 2 - 1 = -1 */
    QG_CHECK(y[0] == 2.0f && y[1] == -1.0f && y16[0] == h(2.0f) && y16[1] == h(-1.0f), "y %a %a", y[0], y[1]);
    p.relu = 1;
    rc = qg_int4_gemm_packed_ref(&p, NULL, y, NULL);
    QG_CHECK(rc == 0 && y[0] == 2.0f && bits(y[1]) == 0, "relu gives +0.0 for -1: %a", y[1]);
    /* relu(-0.0) is +0.0; relu(NaN) stays NaN. */
    QG_CHECK(bits(qg_int4_epilogue(0, -1.0f, 1.0f, NULL, QG_INT4_F32, 1)) == 0, "relu -0.0");
    const float bnan = NAN;
    QG_CHECK(isnan(qg_int4_epilogue(3, 1.0f, 1.0f, &bnan, QG_INT4_F32, 1)), "NaN bias under relu");
    /* (float) acc rounds to nearest even, then each multiplication once: 2^24 + 1 -> 2^24. */
    QG_CHECK(qg_int4_epilogue(16777217, 1.0f, 1.0f, NULL, QG_INT4_F32, 0) == 16777216.0f, "acc conversion");

    /* Only the int32 output: scales not needed. */
    qg_int4_gemm_args pa = {1, 2, 3, A, 2, B, 4, NULL, 0, NULL, 0, NULL, QG_INT4_F32, 0};
    QG_CHECK(qg_int4_gemm_packed_ref(&pa, acc, NULL, NULL) == 0 && acc[0] == 4, "acc only");

    /* Errors, outputs untouched. */
    int32_t ap[2];
    memset(ap, 0x5A, sizeof ap);
    const uint8_t Abad[2] = {0x81, 0x17}; /* padding nibble 1 */
    qg_int4_gemm_args pb = pa;
    pb.A = Abad;
    QG_CHECK(qg_int4_gemm_packed_ref(&pb, ap, NULL, NULL) == QG_ERR_int4_bad_padding, "padding in A");
    const uint8_t Bbad[4] = {0x2F, 0x03, 0x88, 0x88};
    pb = pa;
    pb.B = Bbad;
    QG_CHECK(qg_int4_gemm_packed_ref(&pb, ap, NULL, NULL) == QG_ERR_int4_bad_padding, "padding in B");
    /* The same bytes with K = 4 are valid: the high nibbles are element 3 (A: 1, B row 1: -8), so
     * acc = {4 + 1 * 0, 0 + 1 * -8}. */
    pb.A = Abad;
    pb.K = 4;
    QG_CHECK(qg_int4_gemm_packed_ref(&pb, ap, NULL, NULL) == 0 && ap[0] == 4 && ap[1] == -8, "K = 4: %d %d", ap[0], ap[1]);
    memset(ap, 0x5A, sizeof ap);
    pb = p;
    const float sinf_[1] = {INFINITY}, sneg[1] = {-1.0f};
    pb.sa = sinf_;
    QG_CHECK(qg_int4_gemm_packed_ref(&pb, ap, y, NULL) == QG_ERR_int_nonfinite_input, "inf sa");
    pb.sa = sneg;
    QG_CHECK(qg_int4_gemm_packed_ref(&pb, ap, y, NULL) == QG_ERR_int_scale_invalid, "negative sa");
    pb.sa = NULL;
    QG_CHECK(qg_int4_gemm_packed_ref(&pb, ap, y, NULL) == QG_ERR_int_scale_invalid, "NULL sa");
    pb = p;
    pb.sb_len = 3;
    QG_CHECK(qg_int4_gemm_packed_ref(&pb, ap, y, NULL) == QG_ERR_shape_invalid, "sb_len 3");
    pb = p;
    pb.B_len = 3;
    QG_CHECK(qg_int4_gemm_packed_ref(&pb, ap, NULL, NULL) == QG_ERR_size_mismatch, "B of 3 bytes");
    pb = p;
    pb.N = 0;
    QG_CHECK(qg_int4_gemm_packed_ref(&pb, ap, NULL, NULL) == QG_ERR_shape_invalid, "N = 0");
    /* K = 131072, every code -8: one more than the exact int32 limit of the contract. */
    uint8_t *kbig = malloc(2 * 65536);
    if (kbig) {
        memset(kbig, 0x88, 2 * 65536);
        qg_int4_gemm_args pk = {1, 2, QG_INT4_MAX_K + 1, kbig, 65536, kbig, 2 * 65536, NULL, 0, NULL, 0, NULL, QG_INT4_F32, 0};
        QG_CHECK(qg_int4_gemm_packed_ref(&pk, ap, NULL, NULL) == QG_ERR_int_k_too_large, "K > 131071");
        free(kbig);
    }
    QG_CHECK(qg_int4_gemm_packed_ref(&pa, NULL, NULL, NULL) == QG_ERR_argument_invalid, "no output");
    QG_CHECK(qg_test_untouched(ap, sizeof ap, 0x5A), "output written on error");

    /* Extremes: K = 131071, all -8 x -8: acc = 64 * 131071 = 8388544, exact. */
    const size_t K = QG_INT4_MAX_K, rb = qg_int4_packed_row_bytes(K);
    uint8_t *big = malloc(rb);
    if (big) {
        memset(big, 0x88, rb);
        big[rb - 1] = 0x08;
        qg_int4_gemm_args pe = {1, 1, K, big, rb, big, rb, NULL, 0, NULL, 0, NULL, QG_INT4_F32, 0};
        int32_t a1 = 0;
        QG_CHECK(qg_int4_gemm_packed_ref(&pe, &a1, NULL, NULL) == 0 && a1 == 64 * (int32_t)K, "extreme acc %d", a1);
        free(big);
    }
}

/* ---- W4A16 ---- */

static void test_decode(void)
{
    /* N = 2, K = 8, g = K: word 0x76543210 holds codes 0..7 for k = 0..7 (nibble j = element j). Row 0
     * symmetric (z = 8), s = 0.5: w = (k - 8) / 2; row 1: word 0xF..., z = 3, s = -0.0 is allowed. */
    const uint32_t qw[2] = {0x76543210u, 0xFEDCBA98u};
    const uint16_t sc[2] = {h(0.5f), h(2.0f)};
    qg_w4a16 L = {2, 8, 8, qw, 2, sc, 2, NULL, 0, NULL, 0};
    float w[16];
    int rc = qg_w4a16_decode_ref(&L, w);
    QG_CHECK(rc == 0, "%s", qg_error_name(rc));
    for (int k = 0; k < 8; k++) {
        QG_CHECK(w[k] == (float)(k - 8) * 0.5f, "row 0 k %d: %a", k, w[k]);
        QG_CHECK(w[8 + k] == (float)(k + 8 - 8) * 2.0f, "row 1 k %d: %a", k, w[8 + k]);
    }
    const uint8_t zz[2] = {8, 15};
    L.zeros = zz;
    L.zeros_len = 2;
    rc = qg_w4a16_decode_ref(&L, w);
    QG_CHECK(rc == 0 && w[8] == (8.0f - 15.0f) * 2.0f && w[15] == 0.0f, "explicit zeros %a %a", w[8], w[15]);

    /* Act-order: K = 64, g = 32; g_idx[k] = k % 2 (each group 32 columns); scales 1 and 4; codes all
     * 9, z = 8: w[k] = 1 or 4 by parity. The identity-free assignment must be followed, not k / g. */
    uint32_t qa[8];
    for (int i = 0; i < 8; i++) qa[i] = 0x99999999u;
    const uint16_t sa[2] = {h(1.0f), h(4.0f)};
    int32_t gi[64];
    for (int k = 0; k < 64; k++) gi[k] = k % 2;
    qg_w4a16 A = {1, 64, 32, qa, 8, sa, 2, NULL, 0, gi, 64};
    float wa[64];
    rc = qg_w4a16_decode_ref(&A, wa);
    QG_CHECK(rc == 0, "act-order %s", qg_error_name(rc));
    int ok = 1;
    for (int k = 0; k < 64; k++) ok &= wa[k] == (k % 2 ? 4.0f : 1.0f);
    QG_CHECK(ok, "act-order groups not followed");

    /* Errors, outputs untouched. */
    float wp[64];
    memset(wp, 0x5A, sizeof wp);
    qg_w4a16 B = A;
    gi[5] = 2;
    QG_CHECK(qg_w4a16_decode_ref(&B, wp) == QG_ERR_int4_g_idx_invalid, "g_idx 2 of G = 2");
    gi[5] = 0; /* group 0 now holds 33 columns, group 1 31 */
    QG_CHECK(qg_w4a16_decode_ref(&B, wp) == QG_ERR_int4_g_idx_invalid, "unbalanced g_idx");
    gi[5] = -1;
    QG_CHECK(qg_w4a16_decode_ref(&B, wp) == QG_ERR_int4_g_idx_invalid, "negative g_idx");
    gi[5] = 1;
    B.g_idx_len = 63;
    QG_CHECK(qg_w4a16_decode_ref(&B, wp) == QG_ERR_size_mismatch, "g_idx length");
    B = A;
    B.g = 16;
    QG_CHECK(qg_w4a16_decode_ref(&B, wp) == QG_ERR_int_group_invalid, "g = 16");
    B.g = 128;
    QG_CHECK(qg_w4a16_decode_ref(&B, wp) == QG_ERR_int_group_invalid, "g = 128 > K");
    B = L;
    B.K = 12;
    B.g = 12;
    QG_CHECK(qg_w4a16_decode_ref(&B, wp) == QG_ERR_shape_invalid, "K = 12 not a multiple of 8");
    B = L;
    B.N = 0;
    QG_CHECK(qg_w4a16_decode_ref(&B, wp) == QG_ERR_shape_invalid, "N = 0");
    B = L;
    B.qweight_len = 3;
    QG_CHECK(qg_w4a16_decode_ref(&B, wp) == QG_ERR_size_mismatch, "qweight length");
    const uint8_t z16[2] = {16, 0};
    B.qweight_len = 2;
    B.zeros = z16;
    QG_CHECK(qg_w4a16_decode_ref(&B, wp) == QG_ERR_int4_zero_out_of_range, "zero 16");
    const uint16_t sinf_[2] = {0x7C00, h(1.0f)}, snan[2] = {h(1.0f), 0x7E00}, sneg[2] = {h(-1.0f), h(1.0f)};
    B = L;
    B.scales = sinf_;
    QG_CHECK(qg_w4a16_decode_ref(&B, wp) == QG_ERR_int_scale_invalid, "inf scale");
    B.scales = snan;
    QG_CHECK(qg_w4a16_decode_ref(&B, wp) == QG_ERR_int_scale_invalid, "NaN scale");
    B.scales = sneg;
    QG_CHECK(qg_w4a16_decode_ref(&B, wp) == QG_ERR_int_scale_invalid, "negative scale");
    B = L;
    B.qweight = NULL;
    QG_CHECK(qg_w4a16_decode_ref(&B, wp) == QG_ERR_argument_invalid, "NULL qweight");
    QG_CHECK(qg_w4a16_gemv_ref(&L, (const uint16_t *)sc, 0, 0, wp, NULL) == QG_ERR_batch_invalid, "batch 0");
    QG_CHECK(qg_w4a16_gemv_ref(&L, (const uint16_t *)sc, 7, 1, wp, NULL) == QG_ERR_size_mismatch, "x of 7 values, K = 8");
    QG_CHECK(qg_test_untouched(wp, sizeof wp, 0x5A), "output written on error");
}

/* A random canonical layout from the pinned stream (codes, zeros, scales in [2^-8, 2^-2), act-order). */
typedef struct {
    size_t N, K, g, G;
    uint32_t *qw;
    uint16_t *sc;
    uint8_t *z;
    int32_t *gi;
} rand_layout;

static int rand_layout_make(rand_layout *r, size_t N, size_t K, size_t g, int zeros, int act, uint64_t seed)
{
    qg_rng rng;
    qg_rng_init(&rng, seed);
    r->N = N, r->K = K, r->g = g, r->G = K / g;
    r->qw = malloc(N * K / 8 * 4);
    r->sc = malloc(N * r->G * 2);
    r->z = zeros ? malloc(N * r->G) : NULL;
    r->gi = act ? malloc(K * 4) : NULL;
    if (!r->qw || !r->sc || (zeros && !r->z) || (act && !r->gi)) return -1;
    for (size_t i = 0; i < N * K / 8; i++) r->qw[i] = qg_rng_bits32(&rng);
    for (size_t i = 0; i < N * r->G; i++) r->sc[i] = h(qg_rng_uniform(&rng, 0x1p-8f, 0x1p-2f));
    if (zeros)
        for (size_t i = 0; i < N * r->G; i++) r->z[i] = (uint8_t)qg_rng_int_range(&rng, 16);
    if (act) {
        uint32_t *p = malloc(K * 4);
        if (!p) return -1;
        qg_rng_permutation(&rng, p, K);
        for (size_t k = 0; k < K; k++) r->gi[p[k]] = (int32_t)(k / g);
        free(p);
    }
    return 0;
}

static void rand_layout_free(rand_layout *r)
{
    free(r->qw), free(r->sc), free(r->z), free(r->gi);
}

static qg_w4a16 rand_layout_view(const rand_layout *r)
{
    qg_w4a16 L = {r->N, r->K, r->g, r->qw, r->N * r->K / 8, r->sc, r->N * r->G, r->z, r->z ? r->N * r->G : 0,
                  r->gi, r->gi ? r->K : 0};
    return L;
}

static unsigned code_of(const rand_layout *r, size_t n, size_t k) { return (r->qw[n * (r->K / 8) + k / 8] >> (4 * (k % 8))) & 15; }

/* GPTQ as the checkpoints store it, written from the layout description: qweight [K/8][N] packed along K,
 * qzeros [G][N/8] packed along N, code j at bits 4j; v1 stores zero - 1. */
static void pack_gptq(const rand_layout *r, int version, int32_t *qw, int32_t *qz, uint16_t *sc)
{
    for (size_t i = 0; i < r->K / 8; i++)
        for (size_t n = 0; n < r->N; n++) {
            uint32_t w = 0;
            for (unsigned j = 0; j < 8; j++) w |= code_of(r, n, 8 * i + j) << (4 * j);
            qw[i * r->N + n] = (int32_t)w;
        }
    for (size_t gj = 0; gj < r->G; gj++)
        for (size_t c = 0; c < r->N / 8; c++) {
            uint32_t w = 0;
            for (unsigned j = 0; j < 8; j++) {
                unsigned zv = r->z[(8 * c + j) * r->G + gj];
                w |= (uint32_t)(version == 1 ? zv - 1 : zv) << (4 * j);
            }
            qz[gj * (r->N / 8) + c] = (int32_t)w;
        }
    for (size_t gj = 0; gj < r->G; gj++)
        for (size_t n = 0; n < r->N; n++) sc[gj * r->N + n] = r->sc[n * r->G + gj];
}

/* AWQ: qweight [K][N/8] packed along N, nibble j of word c holding column 8c + order[j] (order written out
 * here from the layout description, not taken from the library). */
static void pack_awq(const rand_layout *r, int32_t *qw, int32_t *qz, uint16_t *sc)
{
    static const unsigned order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    for (size_t k = 0; k < r->K; k++)
        for (size_t c = 0; c < r->N / 8; c++) {
            uint32_t w = 0;
            for (unsigned j = 0; j < 8; j++) w |= code_of(r, 8 * c + order[j], k) << (4 * j);
            qw[k * (r->N / 8) + c] = (int32_t)w;
        }
    for (size_t gj = 0; gj < r->G; gj++)
        for (size_t c = 0; c < r->N / 8; c++) {
            uint32_t w = 0;
            for (unsigned j = 0; j < 8; j++) w |= (uint32_t)r->z[(8 * c + order[j]) * r->G + gj] << (4 * j);
            qz[gj * (r->N / 8) + c] = (int32_t)w;
        }
    for (size_t gj = 0; gj < r->G; gj++)
        for (size_t n = 0; n < r->N; n++) sc[gj * r->N + n] = r->sc[n * r->G + gj];
}

static void test_import_hand(void)
{
    /* AWQ, N = 8, K = 8, g = 8: every source word 0x76543210 puts value j into column order[j], so
     * column n holds the code j with order[j] = n: columns 0..7 get 0, 4, 1, 5, 2, 6, 3, 7. */
    int32_t qw[8], qz[1] = {0x76543210};
    uint16_t sc[8];
    for (int i = 0; i < 8; i++) qw[i] = 0x76543210, sc[i] = h(1.0f);
    uint32_t oq[8];
    uint16_t os[8];
    uint8_t oz[8];
    qg_w4a16_out out = {oq, os, oz, NULL};
    qg_awq_src a = {8, 8, 8, qw, 8, qz, 1, sc, 8};
    int rc = qg_int4_import_awq_ref(&a, &out);
    QG_CHECK(rc == 0, "awq %s", qg_error_name(rc));
    const unsigned col[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    for (int n = 0; n < 8; n++) {
        QG_CHECK(oq[n] == col[n] * 0x11111111u, "awq column %d: %08x", n, oq[n]);
        QG_CHECK(oz[n] == col[n], "awq zero %d: %u", n, oz[n]);
    }

    /* GPTQ, same source words read as K/8 x N: column n gets word 0x76543210 (k = 0..7 -> codes 0..7);
     * zeros word 0x76543210: column n stores n; v1 adds one, v2 keeps it; a stored 15 in v1 is 16. */
    qg_gptq_src gq = {8, 8, 8, 1, qw, 8, qz, 1, sc, 8, NULL, 0};
    rc = qg_int4_import_gptq_ref(&gq, &out);
    QG_CHECK(rc == 0, "gptq v1 %s", qg_error_name(rc));
    for (int n = 0; n < 8; n++) QG_CHECK(oq[n] == 0x76543210u && oz[n] == n + 1, "gptq v1 column %d: %08x z %u", n, oq[n], oz[n]);
    gq.version = 2;
    rc = qg_int4_import_gptq_ref(&gq, &out);
    for (int n = 0; n < 8; n++) QG_CHECK(rc == 0 && oz[n] == n, "gptq v2 zero %d: %u", n, oz[n]);
    /* Symmetric checkpoints: v1 stores 7, v2 stores 8; both mean z = 8. */
    int32_t z7 = 0x77777777, z8 = (int32_t)0x88888888u;
    gq.qzeros = &z8;
    rc = qg_int4_import_gptq_ref(&gq, &out);
    QG_CHECK(rc == 0 && oz[3] == 8, "v2 symmetric");
    gq.version = 1;
    gq.qzeros = &z7;
    rc = qg_int4_import_gptq_ref(&gq, &out);
    QG_CHECK(rc == 0 && oz[3] == 8, "v1 symmetric");

    /* Errors, outputs untouched. */
    uint32_t pq[8];
    memset(pq, 0x5A, sizeof pq);
    qg_w4a16_out po = {pq, os, oz, NULL};
    int32_t zf = (int32_t)0xF0000000u;
    gq.qzeros = &zf;
    QG_CHECK(qg_int4_import_gptq_ref(&gq, &po) == QG_ERR_int4_zero_out_of_range, "v1 stored 15");
    gq.qzeros = qz;
    gq.version = 3;
    QG_CHECK(qg_int4_import_gptq_ref(&gq, &po) == QG_ERR_argument_invalid, "version 3");
    gq.version = 2;
    gq.N = 12;
    QG_CHECK(qg_int4_import_gptq_ref(&gq, &po) == QG_ERR_shape_invalid, "N = 12");
    gq.N = 8;
    gq.qweight_len = 7;
    QG_CHECK(qg_int4_import_gptq_ref(&gq, &po) == QG_ERR_size_mismatch, "qweight length");
    gq.qweight_len = 8;
    gq.g = 4;
    QG_CHECK(qg_int4_import_gptq_ref(&gq, &po) == QG_ERR_int_group_invalid, "g = 4");
    gq.g = 8;
    int32_t gi[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    gq.g_idx = gi;
    gq.g_idx_len = 8;
    int32_t ogi[8];
    po.g_idx = ogi;
    QG_CHECK(qg_int4_import_gptq_ref(&gq, &po) == QG_ERR_int4_g_idx_invalid, "g_idx 1 of G = 1");
    gq.g_idx = NULL;
    uint16_t sbad[8];
    memcpy(sbad, sc, sizeof sbad);
    sbad[6] = 0xFC00;
    gq.scales = sbad;
    QG_CHECK(qg_int4_import_gptq_ref(&gq, &po) == QG_ERR_int_scale_invalid, "-inf scale");
    a.scales = sbad;
    QG_CHECK(qg_int4_import_awq_ref(&a, &po) == QG_ERR_int_scale_invalid, "awq -inf scale");
    a.scales = sc;
    a.qzeros_len = 2;
    QG_CHECK(qg_int4_import_awq_ref(&a, &po) == QG_ERR_size_mismatch, "awq qzeros length");
    QG_CHECK(qg_test_untouched(pq, sizeof pq, 0x5A), "output written on error");
}

/* Random layouts of every group size through both packers and back: bit-exact round trips. */
static void test_import_roundtrip(void)
{
    static const size_t shapes[][3] = {{8, 32, 32}, {24, 64, 32}, {16, 256, 64}, {8, 384, 128}, {40, 96, 96}, {8, 8, 8}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const size_t N = shapes[s][0], K = shapes[s][1], g = shapes[s][2];
        for (int act = 0; act < 2; act++) {
            rand_layout r;
            if (rand_layout_make(&r, N, K, g, 1, act, 1000 + s * 2 + (size_t)act) != 0) {
                QG_CHECK(0, "alloc");
                rand_layout_free(&r);
                continue;
            }
            /* v1 cannot store a zero of 0 (it would be -1): use zeros 1..15 for it. */
            for (size_t i = 0; i < N * r.G; i++)
                if (r.z[i] == 0) r.z[i] = 1;
            const size_t G = r.G;
            int32_t *qw = malloc(N * K / 8 * 4), *qz = malloc(G * N / 8 * 4), *ogi = malloc(K * 4);
            uint16_t *sc = malloc(G * N * 2), *os = malloc(G * N * 2);
            uint32_t *oq = malloc(N * K / 8 * 4);
            uint8_t *oz = malloc(G * N);
            if (qw && qz && ogi && sc && os && oq && oz) {
                qg_w4a16_out out = {oq, os, oz, ogi};
                for (int v = 1; v <= 2; v++) {
                    pack_gptq(&r, v, qw, qz, sc);
                    qg_gptq_src src = {N, K, g, v, qw, N * K / 8, qz, G * N / 8, sc, G * N, r.gi, r.gi ? K : 0};
                    int rc = qg_int4_import_gptq_ref(&src, &out);
                    QG_CHECK(rc == 0 && memcmp(oq, r.qw, N * K / 2) == 0 && memcmp(os, r.sc, G * N * 2) == 0 &&
                                 memcmp(oz, r.z, G * N) == 0 && (!act || memcmp(ogi, r.gi, K * 4) == 0),
                             "gptq v%d round trip N %zu K %zu g %zu act %d: %s", v, N, K, g, act, qg_error_name(rc));
                }
                if (!act) {
                    int32_t *aw = malloc(K * N / 8 * 4);
                    if (aw) {
                        pack_awq(&r, aw, qz, sc);
                        qg_awq_src src = {N, K, g, aw, K * N / 8, qz, G * N / 8, sc, G * N};
                        int rc = qg_int4_import_awq_ref(&src, &out);
                        QG_CHECK(rc == 0 && memcmp(oq, r.qw, N * K / 2) == 0 && memcmp(os, r.sc, G * N * 2) == 0 &&
                                     memcmp(oz, r.z, G * N) == 0,
                                 "awq round trip N %zu K %zu g %zu: %s", N, K, g, qg_error_name(rc));
                        free(aw);
                    }
                }
            } else {
                QG_CHECK(0, "alloc");
            }
            free(qw), free(qz), free(ogi), free(sc), free(os), free(oq), free(oz);
            rand_layout_free(&r);
        }
    }
}

/* The GEMV: bitwise the index-order float32 loop written here; within the bound of the exact product. */
static void test_gemv(void)
{
    const size_t N = 13, K = 256, g = 64, B = 3;
    rand_layout r;
    if (rand_layout_make(&r, N, K, g, 1, 1, 77) != 0) {
        QG_CHECK(0, "alloc");
        rand_layout_free(&r);
        return;
    }
    qg_w4a16 L = rand_layout_view(&r);
    uint16_t x[3 * 256];
    qg_rng rng;
    qg_rng_init(&rng, 78);
    for (size_t i = 0; i < B * K; i++) x[i] = h(qg_rng_uniform(&rng, -2.0f, 2.0f));
    float w[13 * 256], y[3 * 13];
    uint16_t y16[3 * 13];
    int rc = qg_w4a16_decode_ref(&L, w);
    rc |= qg_w4a16_gemv_ref(&L, x, B * K, B, y, y16);
    QG_CHECK(rc == 0, "gemv %s", qg_error_name(rc));
    double ys[3 * 13], sa[3 * 13];
    size_t same = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t n = 0; n < N; n++) {
            float acc = 0.0f;
            double e = 0.0, a = 0.0;
            for (size_t k = 0; k < K; k++) {
                const size_t gj = (size_t)r.gi[k];
                const double wd = ((double)code_of(&r, n, k) - r.z[n * r.G + gj]) * qg_f16_to_f32(r.sc[n * r.G + gj]);
                QG_CHECK(wd == (double)w[n * K + k], "decode not exact at %zu %zu", n, k);
                acc = acc + (float)wd * qg_f16_to_f32(x[b * K + k]);
                e += wd * qg_f16_to_f32(x[b * K + k]);
                a += fabs(wd * qg_f16_to_f32(x[b * K + k]));
            }
            same += bits(acc) == bits(y[b * N + n]);
            QG_CHECK(y16[b * N + n] == h(y[b * N + n]), "fp16 output is RN16 of the float32 sum");
            ys[b * N + n] = e, sa[b * N + n] = a;
        }
    QG_CHECK(same == B * N, "index-order sum differs at %zu outputs", B * N - same);
    const qg_numerics nm = QG_NUMERICS_F32ACC_F32OUT;
    qg_bound_report br;
    rc = qg_compare_bounded(&nm, (long)K, ys, sa, NULL, y, B * N, &br);
    QG_CHECK(rc == 0 && br.rounded > 0, "bound: %s (rounded %zu)", br.text, br.rounded);
    rand_layout_free(&r);
}

int main(void)
{
    test_quantize();
    test_dequant();
    test_gemm_packed();
    test_decode();
    test_import_hand();
    test_import_roundtrip();
    test_gemv();
    return qg_test_end("test_int4_ref");
}
