/* simd.int8.<backend> / full.int8.<backend>: one backend's INT8 rows (int8/{quantize,dequant,w8a8,w8a16})
 * against the reference rows on random data from the pinned stream, shapes with the odd sizes 1, 13, 37,
 * 257 (and 64, 1000, 4099 where a vector loop and its tail both matter).
 *
 *   quantize   codes and scales bit-exact: per tensor / row / group, float32 and fp16 sources and scales;
 *              rows of random values, zeros, exact ties (v / s = k + 0.5), subnormals, huge values;
 *   dequant    float32 and fp16 outputs bit-exact;
 *   w8a8       int32, float32 and fp16 outputs bit-exact (a NaN made by the epilogue matches any NaN):
 *              per-tensor / per-token sa, per-tensor / per-channel sb, bias none / float32 / fp16 with NaN
 *              and inf entries, relu on and off, all -128 rows (accumulator extremes), outputs requested
 *              one at a time equal the combined call;
 *   w8a16      float32 and fp16 outputs within the bound of the row's numerics against y* (double), fp16
 *              and float32 scales, NaN / inf activations; the fp16 output is the float32 output rounded;
 *   batch      row m of a W8A8 / W8A16 product computed alone equals the same row inside M rows, bitwise;
 *   threads    1, 2, 3 and 4 threads give the same bits for every kernel;
 *   errors     invalid shapes, scales and pointers get the reference's error, outputs untouched.
 * Every call goes through qg_call_guarded (poisoned outputs, canaries, two runs: full write, no overrun,
 * determinism). No tolerance literal: bounds come from the registry row (compare.h qg_bound).
 *
 * usage: test_int8_kernels BACKEND [full]   (avx2, neon or cuda; exit 77 when BACKEND cannot run here)
 * "full" adds the accumulator extreme K = 131071 and a 1024 x 4096 x 4096 W8A8.
 */
#include "compare.h"
#include "guard.h"
#include "qg_test.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/intq.h"
#include "qgold/registry.h"
#include "qgold/rng.h"
#include "qgold/threads.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const qg_kernel *g_k[4], *g_ref[4]; /* quantize, dequant, w8a8, w8a16 */
static qg_rng g_rng;
static struct {
    size_t exact_outputs, bounded_outputs, rounded, nonfinite, nan_epilogue;
    double worst_ratio;
} g_seen;

enum { K_QUANT = 0, K_DEQ, K_W8A8, K_W8A16 };

static float urand(float a, float b) { return qg_rng_uniform(&g_rng, a, b); }
static uint32_t irand(uint32_t n) { return qg_rng_int_range(&g_rng, n); }

/* ---- quantize ---- */

typedef struct {
    const qg_kernel *k;
    qg_int8_qshape s;
    const void *x;
    qg_int8_ftype src;
    size_t nsc, n;
} quant_call;

static size_t scale_bytes(const quant_call *c) { return c->nsc * (c->s.scale_type == QG_INT8_F16 ? 2u : 4u); }
static size_t quant_bytes(const quant_call *c) { return scale_bytes(c) + c->n; }

/* out = [scales (float32 or fp16) | codes (n bytes)] */
static int call_quant(void *vc, void *out)
{
    quant_call *c = vc;
    return c->k->fn.int8_quantize(&c->s, c->x, c->src, (int8_t *)out + scale_bytes(c), out);
}

/* One row of source values of a given flavour (as float32; converted to fp16 by the caller if needed). */
static void fill_row(float *x, size_t n, int flavour)
{
    const float a = urand(0.0f, 1.0f) * (float)(1 + irand(1000));
    for (size_t i = 0; i < n; i++) {
        switch (flavour) {
        case 0: x[i] = urand(-a, a); break;
        case 1: x[i] = irand(2) ? 0.0f : -0.0f; break;
        case 2: x[i] = i == 0 ? 127.0f : (float)((int)irand(254) - 127) + 0.5f; break; /* s = 1: ties */
        case 3: x[i] = urand(-1.0f, 1.0f) * 0x1p-140f; break;                            /* subnormal */
        default: x[i] = urand(-1.0f, 1.0f) * 0x1p100f; break;                             /* huge */
        }
    }
}

static void check_quant_threads(quant_call *c, const uint8_t *want, const char *what);

static void test_quantize_case(size_t rows, size_t cols, qg_int8_gran g, size_t group, qg_int8_ftype src, qg_int8_ftype st)
{
    const size_t n = rows * cols;
    float *xf = malloc(n * 4);
    uint16_t *xh = malloc(n * 2);
    for (size_t r = 0; r < rows; r++) fill_row(xf + r * cols, cols, (int)irand(st == QG_INT8_F16 || src == QG_INT8_F16 ? 3 : 5));
    for (size_t i = 0; i < n; i++) xh[i] = qg_f32_to_f16(xf[i]);
    quant_call c = {g_k[K_QUANT], {rows, cols, g, group, st}, src == QG_INT8_F16 ? (void *)xh : (void *)xf, src, 0, n};
    c.nsc = qg_int8_num_scales(&c.s);
    const size_t bytes = quant_bytes(&c);
    uint8_t *want = malloc(bytes), *got = malloc(bytes);
    memset(want, 0, bytes);
    qg_err e = {0};
    quant_call r = c;
    r.k = g_ref[K_QUANT];
    const int rr = call_quant(&r, want);
    const int rk = qg_call_guarded(call_quant, &c, got, bytes, 1, &e);
    char what[160];
    snprintf(what, sizeof what, "quantize %zux%zu gran %d group %zu src %d scale %d", rows, cols, (int)g, group, (int)src, (int)st);
    QG_CHECK(rr == rk, "%s: reference %s, kernel %s (%s)", what, qg_error_name(rr), qg_error_name(rk), e.msg);
    if (rr == QG_ERR_ok && rk == QG_ERR_ok) {
        qg_exact_report rep;
        QG_CHECK(qg_compare_exact(QG_ELEM_U8, want, got, bytes, &rep) == QG_ERR_ok, "%s: %s (bytes: scales then codes)", what, rep.text);
        g_seen.exact_outputs += n;
        check_quant_threads(&c, want, what);
    }
    free(xf);
    free(xh);
    free(want);
    free(got);
}

/* Thread counts 1..4: the same bytes (plain calls; the guarded one above proved full write). */
static void check_quant_threads(quant_call *c, const uint8_t *want, const char *what)
{
    const size_t bytes = quant_bytes(c);
    uint8_t *got = malloc(bytes);
    for (int t = 1; t <= 4; t++) {
        qg_set_threads(t);
        memset(got, 0, bytes);
        const int rc = call_quant(c, got);
        QG_CHECK(rc == QG_ERR_ok && memcmp(got, want, bytes) == 0, "%s: %d threads differ", what, t);
    }
    qg_set_threads(0);
    free(got);
}

static void test_quantize(int full)
{
    static const size_t dims[] = {1, 13, 37, 257};
    static const size_t cols_set[] = {1, 13, 37, 64, 257, 384, 1000};
    for (size_t i = 0; i < COUNT(dims); i++)
        for (size_t j = 0; j < COUNT(cols_set); j++)
            for (int src = 0; src < 2; src++)
                for (int st = 0; st < 2; st++) {
                    const size_t rows = dims[i], cols = cols_set[j];
                    test_quantize_case(rows, cols, QG_INT8_PER_TENSOR, 0, (qg_int8_ftype)src, (qg_int8_ftype)st);
                    test_quantize_case(rows, cols, QG_INT8_PER_ROW, 0, (qg_int8_ftype)src, (qg_int8_ftype)st);
                    for (size_t g = 32; g <= 128; g *= 2)
                        if (cols % g == 0) test_quantize_case(rows, cols, QG_INT8_PER_GROUP, g, (qg_int8_ftype)src, (qg_int8_ftype)st);
                }
    if (full) test_quantize_case(1024, 4096, QG_INT8_PER_ROW, 0, QG_INT8_F32, QG_INT8_F16);
}

/* ---- dequant ---- */

typedef struct {
    const qg_kernel *k;
    qg_int8_qshape s;
    const int8_t *q;
    const void *sc;
    size_t n;
    int outs; /* 1: f32, 2: f16, 3: both */
} deq_call;

/* out = [y32 (n floats) | y16 (n halves)] */
static int call_deq(void *vc, void *out)
{
    deq_call *c = vc;
    float *y32;
    uint16_t *y16;
    qg_test_gemv_outs(out, c->n, c->outs, &y32, &y16);
    return c->k->fn.int8_dequant(&c->s, c->q, c->sc, y32, y16);
}

static void test_dequant_case(size_t rows, size_t cols, qg_int8_gran g, size_t group, qg_int8_ftype st)
{
    const size_t n = rows * cols;
    deq_call c = {g_k[K_DEQ], {rows, cols, g, group, st}, NULL, NULL, n, 3};
    const size_t ns = qg_int8_num_scales(&c.s);
    int8_t *q = malloc(n);
    float *s32 = malloc(ns * 4);
    uint16_t *s16 = malloc(ns * 2);
    for (size_t i = 0; i < n; i++) q[i] = (int8_t)((int)irand(256) - 128);
    for (size_t b = 0; b < ns; b++) {
        s32[b] = irand(8) == 0 ? 0.0f : urand(0.0f, 1.0f) * (irand(2) ? 0x1p-10f : 600.0f); /* fp16 overflow for big q s */
        s16[b] = qg_f32_to_f16(s32[b]);
    }
    c.q = q;
    c.sc = st == QG_INT8_F16 ? (const void *)s16 : (const void *)s32;
    uint16_t *want = malloc(n * 6), *got = malloc(n * 6);
    deq_call r = c;
    r.k = g_ref[K_DEQ];
    qg_err e = {0};
    QG_CHECK(call_deq(&r, want) == QG_ERR_ok, "reference dequant");
    const int rc = qg_call_guarded(call_deq, &c, got, n * 3, 2, &e);
    QG_CHECK(rc == QG_ERR_ok, "dequant %zux%zu: %s", rows, cols, e.msg);
    qg_exact_report rep;
    if (rc == QG_ERR_ok) {
        QG_CHECK(qg_compare_exact(QG_ELEM_F32, want, got, n, &rep) == QG_ERR_ok, "dequant %zux%zu f32: %s", rows, cols, rep.text);
        QG_CHECK(qg_compare_exact(QG_ELEM_F16, want + 2 * n, got + 2 * n, n, &rep) == QG_ERR_ok, "dequant f16: %s", rep.text);
        g_seen.exact_outputs += 2 * n;
    }
    for (int t = 1; t <= 4; t += 3) {
        qg_set_threads(t);
        for (int outs = 1; outs <= 2; outs++) {
            c.outs = outs;
            memset(got, 0, n * 6);
            QG_CHECK(call_deq(&c, got) == QG_ERR_ok, "dequant outs %d", outs);
            if (outs == 1) QG_CHECK(memcmp(got, want, n * 4) == 0, "dequant f32 alone, %d threads", t);
            if (outs == 2) QG_CHECK(memcmp(got + 2 * n, want + 2 * n, n * 2) == 0, "dequant f16 alone, %d threads", t);
        }
    }
    qg_set_threads(0);
    free(q);
    free(s32);
    free(s16);
    free(want);
    free(got);
}

static void test_dequant(void)
{
    static const size_t dims[] = {1, 13, 37, 257};
    static const size_t cols_set[] = {1, 13, 64, 257, 384, 1000};
    for (size_t i = 0; i < COUNT(dims); i++)
        for (size_t j = 0; j < COUNT(cols_set); j++)
            for (int st = 0; st < 2; st++) {
                test_dequant_case(dims[i], cols_set[j], QG_INT8_PER_TENSOR, 0, (qg_int8_ftype)st);
                test_dequant_case(dims[i], cols_set[j], QG_INT8_PER_ROW, 0, (qg_int8_ftype)st);
                for (size_t g = 32; g <= 128; g *= 2)
                    if (cols_set[j] % g == 0) test_dequant_case(dims[i], cols_set[j], QG_INT8_PER_GROUP, g, (qg_int8_ftype)st);
            }
}

/* ---- W8A8 ---- */

typedef struct {
    const qg_kernel *k;
    qg_int8_w8a8_args p;
    int outs; /* 1: acc, 2: f32, 4: f16 */
} gemm_call;

/* out = [acc (MN int32) | y32 (MN) | y16 (MN halves)] */
static int call_gemm(void *vc, void *out)
{
    gemm_call *c = vc;
    const size_t mn = c->p.M * c->p.N;
    int32_t *acc = out;
    float *y32 = (float *)out + mn;
    uint16_t *y16 = (uint16_t *)(y32 + mn);
    if (!(c->outs & 1)) memset(acc, 0, mn * 4), acc = NULL;
    if (!(c->outs & 2)) memset(y32, 0, mn * 4), y32 = NULL;
    if (!(c->outs & 4)) memset(y16, 0, mn * 2), y16 = NULL;
    return c->k->fn.int8_w8a8(&c->p, acc, y32, y16);
}

static int compare_gemm(const uint8_t *want, const uint8_t *got, size_t mn, const char *what)
{
    qg_exact_report rep;
    int bad = 0;
    if (qg_compare_exact(QG_ELEM_I32, want, got, mn, &rep) != QG_ERR_ok) {
        QG_CHECK(0, "%s: int32: %s", what, rep.text);
        bad = 1;
    }
    if (qg_compare_exact_nan_any(QG_ELEM_F32, want + 4 * mn, got + 4 * mn, mn, &rep) != QG_ERR_ok) {
        QG_CHECK(0, "%s: float32: %s", what, rep.text);
        bad = 1;
    }
    if (qg_compare_exact_nan_any(QG_ELEM_F16, want + 8 * mn, got + 8 * mn, mn, &rep) != QG_ERR_ok) {
        QG_CHECK(0, "%s: fp16: %s", what, rep.text);
        bad = 1;
    }
    QG_CHECK(!bad, "%s: every output matches", what);
    return bad;
}

static void test_w8a8_case(size_t M, size_t N, size_t K, int sa_vec, int sb_vec, int bias, int relu, int extreme)
{
    const size_t mn = M * N;
    int8_t *A = malloc(M * K), *B = malloc(N * K);
    float *sa = malloc(M * 4), *sb = malloc(N * 4), *b32 = malloc(N * 4);
    uint16_t *b16 = malloc(N * 2);
    for (size_t i = 0; i < M * K; i++) A[i] = (int8_t)((int)irand(256) - 128);
    for (size_t i = 0; i < N * K; i++) B[i] = (int8_t)((int)irand(256) - 128);
    if (extreme) { /* row 0 of A and of B all -128: the largest sum K 2^14 */
        memset(A, 0x80, K);
        memset(B, 0x80, K);
    }
    for (size_t m = 0; m < M; m++) sa[m] = urand(0.0f, 1.0f) * 0x1p-6f;
    for (size_t n = 0; n < N; n++) sb[n] = urand(0.0f, 1.0f) * 0x1p-4f;
    for (size_t n = 0; n < N; n++) {
        b32[n] = urand(-4.0f, 4.0f);
        if (irand(16) == 0) b32[n] = NAN;
        if (irand(16) == 0) b32[n] = irand(2) ? INFINITY : -INFINITY;
        b16[n] = qg_f32_to_f16(b32[n]);
    }
    if (N > 2 && M > 1) sb[1] = 0x1p127f, sa[1] = 0.0f; /* (float) acc * 2^127 may be inf, then * 0: NaN */
    gemm_call c = {g_k[K_W8A8], {M, N, K, A, B, sa, sa_vec ? M : 1, sb, sb_vec ? N : 1, NULL, QG_INT8_F32, relu}, 7};
    if (bias == 1) c.p.bias = b32;
    if (bias == 2) c.p.bias = b16, c.p.bias_type = QG_INT8_F16;
    uint8_t *want = malloc(mn * 10), *got = malloc(mn * 10);
    gemm_call r = c;
    r.k = g_ref[K_W8A8];
    char what[160];
    snprintf(what, sizeof what, "w8a8 M %zu N %zu K %zu sa %d sb %d bias %d relu %d", M, N, K, sa_vec, sb_vec, bias, relu);
    QG_CHECK(call_gemm(&r, want) == QG_ERR_ok, "%s: reference", what);
    qg_err e = {0};
    const int rc = qg_call_guarded(call_gemm, &c, got, mn * 5, 2, &e);
    QG_CHECK(rc == QG_ERR_ok, "%s: %s", what, e.msg);
    if (rc == QG_ERR_ok && !compare_gemm(want, got, mn, what)) {
        g_seen.exact_outputs += 3 * mn;
        for (size_t i = 0; i < mn; i++) g_seen.nan_epilogue += isnan(((const float *)(const void *)(want + 4 * mn))[i]);
    }
    /* one output at a time, and every thread count */
    for (int t = 1; t <= 4; t++) {
        qg_set_threads(t);
        memset(got, 0, mn * 10);
        char tw[200];
        snprintf(tw, sizeof tw, "%s, %d threads", what, t);
        QG_CHECK(call_gemm(&c, got) == QG_ERR_ok && compare_gemm(want, got, mn, tw) == 0, "%s", tw);
    }
    qg_set_threads(0);
    for (int outs = 1; outs <= 4; outs *= 2) {
        c.outs = outs;
        memset(got, 0, mn * 10);
        QG_CHECK(call_gemm(&c, got) == QG_ERR_ok, "%s: outs %d", what, outs);
        const size_t off = outs == 1 ? 0 : outs == 2 ? 4 * mn : 8 * mn, len = outs == 4 ? 2 * mn : 4 * mn;
        qg_exact_report rep;
        QG_CHECK(qg_compare_exact_nan_any(outs == 1 ? QG_ELEM_I32 : outs == 2 ? QG_ELEM_F32 : QG_ELEM_F16, want + off, got + off,
                                          len / (outs == 4 ? 2 : 4), &rep) == QG_ERR_ok,
                 "%s: output %d alone: %s", what, outs, rep.text);
    }
    /* batch invariance: each A row alone (M = 1, its own sa) gives the bits of its row in the batch */
    c.outs = 7;
    uint8_t *one = malloc(N * 10);
    for (size_t m = 0; m < M; m += (M > 4 ? M / 3 : 1)) {
        gemm_call c1 = c;
        c1.p.M = 1;
        c1.p.A = A + m * K;
        c1.p.sa = sa + (sa_vec ? m : 0);
        c1.p.sa_len = 1;
        QG_CHECK(call_gemm(&c1, one) == QG_ERR_ok, "%s: row %zu alone", what, m);
        qg_exact_report rep;
        QG_CHECK(memcmp(one, want + 4 * m * N, 4 * N) == 0 &&
                     qg_compare_exact_nan_any(QG_ELEM_F32, want + 4 * mn + 4 * m * N, one + 4 * N, N, &rep) == QG_ERR_ok,
                 "%s: row %zu alone differs from the batch (batch invariance)", what, m);
    }
    free(one);
    free(A);
    free(B);
    free(sa);
    free(sb);
    free(b32);
    free(b16);
    free(want);
    free(got);
}

static void test_w8a8(int full)
{
    static const size_t dims[] = {1, 13, 37, 257};
    static const size_t ks[] = {1, 13, 37, 64, 257, 1000};
    for (size_t i = 0; i < COUNT(dims); i++)
        for (size_t j = 0; j < COUNT(dims); j++)
            for (size_t l = 0; l < COUNT(ks); l++) {
                const int v = (int)irand(16);
                test_w8a8_case(dims[i], dims[j], ks[l], v & 1, (v >> 1) & 1, (int)irand(3), (v >> 3) & 1, l == 4);
            }
    /* every option combination on one shape */
    for (int v = 0; v < 24; v++) test_w8a8_case(13, 37, 100, v & 1, (v >> 1) & 1, (v >> 2) % 3, v >= 12, 1);
    test_w8a8_case(3, 5, 4099, 1, 1, 1, 1, 1);
    if (full) {
        test_w8a8_case(2, 9, QG_INT8_MAX_K, 1, 1, 1, 0, 1);
        test_w8a8_case(1024, 4096, 4096, 1, 1, 2, 1, 0);
    }
}

/* ---- W8A16 ---- */

typedef struct {
    const qg_kernel *k;
    const int8_t *B;
    const void *sb;
    qg_int8_ftype st;
    size_t N, K;
    const uint16_t *X;
    size_t M;
} gemv_call;

/* out = [y32 (MN) | y16 (MN halves)] */
static int call_gemv(void *vc, void *out)
{
    gemv_call *c = vc;
    const size_t mn = c->M * c->N;
    return c->k->fn.int8_w8a16(c->B, c->sb, c->st, c->N, c->K, c->X, c->M, out, (uint16_t *)((float *)out + mn));
}

static void test_w8a16_case(size_t M, size_t N, size_t K, qg_int8_ftype st)
{
    const size_t mn = M * N;
    int8_t *B = malloc(N * K);
    float *s32 = malloc(N * 4);
    uint16_t *s16 = malloc(N * 2), *X = malloc(M * K * 2);
    for (size_t i = 0; i < N * K; i++) B[i] = (int8_t)((int)irand(256) - 128);
    for (size_t n = 0; n < N; n++) {
        s32[n] = urand(0.0f, 1.0f) * 0x1p-7f;
        s16[n] = qg_f32_to_f16(s32[n]);
        if (st == QG_INT8_F16) s32[n] = qg_f16_to_f32(s16[n]);
    }
    for (size_t i = 0; i < M * K; i++) X[i] = qg_f32_to_f16(urand(-2.0f, 2.0f));
    if (M > 2 && K > 3) { /* specials in row 1: NaN, and inf */
        X[1 * K + 1] = 0x7E00;
        X[2 * K + 2] = 0x7C00;
    }
    gemv_call c = {g_k[K_W8A16], B, st == QG_INT8_F16 ? (const void *)s16 : (const void *)s32, st, N, K, X, M};
    float *got = malloc(mn * 6), *ref = malloc(mn * 6), *one = malloc(N * 6);
    double *ystar = malloc(mn * 8), *sabs = malloc(mn * 8);
    /* y* = sb sum_k B x in double; sum_abs = |sb| sum |B x| (each product exact in double) */
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < N; n++) {
            double s = 0, a = 0;
            for (size_t k = 0; k < K; k++) {
                const double p = (double)B[n * K + k] * (double)qg_f16_to_f32(X[m * K + k]);
                s += p;
                a += fabs(p);
            }
            ystar[m * N + n] = (double)s32[n] * s;
            sabs[m * N + n] = (double)s32[n] * a;
        }
    char what[128];
    snprintf(what, sizeof what, "w8a16 M %zu N %zu K %zu scale %s", M, N, K, st == QG_INT8_F16 ? "fp16" : "f32");
    qg_err e = {0};
    const int rc = qg_call_guarded(call_gemv, &c, got, mn * 3, 2, &e);
    QG_CHECK(rc == QG_ERR_ok, "%s: %s", what, e.msg);
    if (rc == QG_ERR_ok) {
        qg_bound_report br;
        QG_CHECK(qg_compare_bounded(&g_k[K_W8A16]->numerics, (long)K, ystar, sabs, NULL, got, mn, &br) == QG_ERR_ok, "%s: f32: %s",
                 what, br.text);
        if (br.worst_ratio > g_seen.worst_ratio) g_seen.worst_ratio = br.worst_ratio;
        g_seen.rounded += br.rounded;
        g_seen.bounded_outputs += mn;
        float *y16 = malloc(mn * 4);
        const uint16_t *h = (const uint16_t *)(got + mn);
        for (size_t i = 0; i < mn; i++) y16[i] = qg_f16_to_f32(h[i]);
        QG_CHECK(qg_compare_bounded(&g_k[K_W8A16]->numerics_f16, (long)K, ystar, sabs, NULL, y16, mn, &br) == QG_ERR_ok,
                 "%s: f16: %s", what, br.text);
        for (size_t i = 0; i < mn; i++) {
            QG_CHECK(h[i] == qg_f32_to_f16(got[i]) || (qg_f16_isnan(h[i]) && isnan(got[i])), "%s: fp16 output %zu is not RN16 of the float32", what, i);
            g_seen.nonfinite += !isfinite(ystar[i]);
        }
        free(y16);
        /* the reference meets the same bound (its order is a valid order) */
        gemv_call r = c;
        r.k = g_ref[K_W8A16];
        QG_CHECK(call_gemv(&r, ref) == QG_ERR_ok &&
                     qg_compare_bounded(&g_ref[K_W8A16]->numerics, (long)K, ystar, sabs, NULL, ref, mn, &br) == QG_ERR_ok,
                 "%s: reference: %s", what, br.text);
    }
    for (int t = 1; t <= 4; t++) {
        qg_set_threads(t);
        QG_CHECK(call_gemv(&c, ref) == QG_ERR_ok && memcmp(ref, got, mn * 6) == 0, "%s: %d threads differ", what, t);
    }
    qg_set_threads(0);
    for (size_t m = 0; m < M; m++) {
        gemv_call c1 = c;
        c1.M = 1;
        c1.X = X + m * K;
        QG_CHECK(call_gemv(&c1, one) == QG_ERR_ok && memcmp(one, got + m * N, N * 4) == 0, "%s: row %zu alone differs (batch invariance)",
                 what, m);
    }
    free(B);
    free(s32);
    free(s16);
    free(X);
    free(got);
    free(ref);
    free(one);
    free(ystar);
    free(sabs);
}

static void test_w8a16(int full)
{
    static const size_t dims[] = {1, 13, 37, 257};
    static const size_t ms[] = {1, 2, 3, 7, 16};
    for (size_t i = 0; i < COUNT(ms); i++)
        for (size_t j = 0; j < COUNT(dims); j++)
            for (size_t l = 0; l < COUNT(dims); l++)
                for (int st = 0; st < 2; st++) test_w8a16_case(ms[i], dims[j], dims[l], (qg_int8_ftype)st);
    test_w8a16_case(4, 37, 4099, QG_INT8_F32);
    if (full) test_w8a16_case(1, 4096, 11008, QG_INT8_F16);
}

/* ---- errors: the reference's code, outputs untouched ---- */

static void expect_same(int got, int want, const void *out, size_t bytes, const char *what)
{
    QG_CHECK(got == want, "%s: kernel %s, reference %s", what, qg_error_name(got), qg_error_name(want));
    QG_CHECK(want != QG_ERR_ok, "%s: the reference accepted an invalid input", what);
    QG_CHECK(qg_test_untouched(out, bytes, 0xEE), "%s: output written on an error", what);
}

static void test_errors(void)
{
    float x[64], s[16], y[64];
    int8_t q[64];
    for (int i = 0; i < 64; i++) x[i] = (float)i - 30.0f, q[i] = (int8_t)i;
    for (int i = 0; i < 16; i++) s[i] = 0.5f;
    const qg_kernel *k = g_k[K_QUANT], *r = g_ref[K_QUANT];
    struct {
        qg_int8_qshape s;
        int bad; /* 0 none, 1 NaN at the end, 2 NULL scales, 3 huge for an fp16 scale */
    } qc[] = {{{4, 16, QG_INT8_PER_GROUP, 8, QG_INT8_F32}, 0}, {{4, 16, QG_INT8_PER_GROUP, 0, QG_INT8_F32}, 0},
              {{0, 16, QG_INT8_PER_ROW, 0, QG_INT8_F32}, 0},   {{4, 16, QG_INT8_PER_ROW, 0, QG_INT8_F32}, 1},
              {{4, 16, QG_INT8_PER_TENSOR, 0, QG_INT8_F32}, 1}, {{4, 16, QG_INT8_PER_ROW, 0, QG_INT8_F32}, 2},
              {{2, 32, QG_INT8_PER_GROUP, 32, QG_INT8_F16}, 3}};
    for (size_t i = 0; i < COUNT(qc); i++) {
        float xb[64];
        memcpy(xb, x, sizeof xb);
        if (qc[i].bad == 1) xb[63] = NAN;
        if (qc[i].bad == 3) xb[40] = 1e30f;
        uint8_t out[64 + 64];
        memset(out, 0xEE, sizeof out);
        void *sc = qc[i].bad == 2 ? NULL : (void *)(out + 64);
        const int want = r->fn.int8_quantize(&qc[i].s, xb, QG_INT8_F32, q, qc[i].bad == 2 ? NULL : s);
        const int got = k->fn.int8_quantize(&qc[i].s, xb, QG_INT8_F32, (int8_t *)out, sc);
        char what[64];
        snprintf(what, sizeof what, "quantize error case %zu", i);
        expect_same(got, want, out, sizeof out, what);
    }
    /* dequant: negative, NaN, inf scale, bad group, no output */
    const qg_int8_qshape sh = {4, 16, QG_INT8_PER_ROW, 0, QG_INT8_F32};
    const float bads[3] = {-1.0f, NAN, INFINITY};
    for (int i = 0; i < 3; i++) {
        float sb[4] = {1, 1, 1, 1};
        sb[3] = bads[i];
        memset(y, 0xEE, sizeof y);
        expect_same(g_k[K_DEQ]->fn.int8_dequant(&sh, q, sb, y, NULL), g_ref[K_DEQ]->fn.int8_dequant(&sh, q, sb, y, NULL), y, sizeof y,
                    "dequant bad scale");
    }
    memset(y, 0xEE, sizeof y);
    expect_same(g_k[K_DEQ]->fn.int8_dequant(&sh, q, NULL, y, NULL), QG_ERR_int_scale_invalid, y, sizeof y, "dequant NULL scales");
    /* w8a8: NaN / inf / negative / NULL scales, bad lengths, K too large, zero dims */
    int8_t A[64], B[64];
    memset(A, 1, sizeof A);
    memset(B, 1, sizeof B);
    for (int i = 0; i < 10; i++) {
        float sa[4] = {1, 1, 1, 1}, sbv[4] = {1, 1, 1, 1};
        qg_int8_w8a8_args p = {4, 4, 16, A, B, sa, 4, sbv, 4, NULL, QG_INT8_F32, 0};
        switch (i) {
        case 0: sa[2] = NAN; break;
        case 1: sbv[3] = INFINITY; break;
        case 2: sbv[0] = -1.0f; break;
        case 3: p.sa = NULL; break;
        case 4: p.sb_len = 3; break;
        case 5: p.K = QG_INT8_MAX_K + 1; break;
        case 6: p.N = 0; break;
        case 7: p.B = NULL; break;
        case 8: p.relu = 5; break;
        default: p.bias = sa, p.bias_type = (qg_int8_ftype)9; break;
        }
        memset(y, 0xEE, sizeof y);
        char what[64];
        snprintf(what, sizeof what, "w8a8 error case %d", i);
        expect_same(g_k[K_W8A8]->fn.int8_w8a8(&p, NULL, y, NULL), g_ref[K_W8A8]->fn.int8_w8a8(&p, NULL, y, NULL), y, sizeof y, what);
    }
    /* w8a16 */
    const uint16_t X[64] = {0};
    for (int i = 0; i < 5; i++) {
        float sb[4] = {1, 1, 1, 1};
        const void *sp = sb;
        size_t M = 2, N = 4;
        switch (i) {
        case 0: sb[1] = NAN; break;
        case 1: sb[1] = -0.5f; break;
        case 2: sp = NULL; break;
        case 3: M = 0; break;
        default: N = 0; break;
        }
        memset(y, 0xEE, sizeof y);
        char what[64];
        snprintf(what, sizeof what, "w8a16 error case %d", i);
        expect_same(g_k[K_W8A16]->fn.int8_w8a16(B, sp, QG_INT8_F32, N, 8, X, M, y, NULL),
                    g_ref[K_W8A16]->fn.int8_w8a16(B, sp, QG_INT8_F32, N, 8, X, M, y, NULL), y, sizeof y, what);
    }
}

int main(int argc, char **argv)
{
    int full = 0, code = 0;
    const int b = qg_test_backend_arg(argc, argv, "test_int8_kernels", &full, &code);
    if (b < 0) return code;
    static const char *const paths[4] = {"quantize", "dequant", "w8a8", "w8a16"};
    char why[200];
    for (int i = 0; i < 4; i++) {
        g_k[i] = qg_registry_find("int8", paths[i], (qg_backend)b);
        g_ref[i] = qg_registry_find("int8", paths[i], QG_BACKEND_REF);
        QG_CHECK(g_k[i] && g_ref[i] && qg_kernel_available(g_k[i], why, sizeof why), "int8 %s %s: %s", paths[i], argv[1],
                 g_k[i] ? why : "no row");
    }
    if (qg_test_failures) return qg_test_end(argv[1]);
    qg_rng_init(&g_rng, full ? 0x1A78F011u : 0x1A78u);
    test_errors();
    test_quantize(full);
    test_dequant();
    test_w8a8(full);
    test_w8a16(full);
    printf("exact outputs %zu (%zu NaN from the epilogue), bounded outputs %zu (%zu rounded, %zu with y* NaN or inf), worst "
           "|y - y*| / bound = %.3g\n",
           g_seen.exact_outputs, g_seen.nan_epilogue, g_seen.bounded_outputs, g_seen.rounded, g_seen.nonfinite, g_seen.worst_ratio);
    QG_CHECK(g_seen.rounded > 0 && g_seen.worst_ratio > 0.0, "no bounded output was ever rounded: the data exercise nothing");
    QG_CHECK(g_seen.nonfinite > 0 && g_seen.nan_epilogue > 0, "no NaN/inf output was exercised");
    return qg_test_end(full ? "full" : argv[1]);
}
