/* gpu.int4_cuda.*: the CUDA W4A16 GEMM on tensor cores (kernels/cuda/int4.cu), one mode per ctest:
 *
 *   repack     the GPU repack into the tc16 layout equals, word for word, the host reference repack
 *              below (written from the layout description in qgold/kernels_int4_cuda.h): odd N, K = 8,
 *              K not a multiple of 64, every group size, zeros present and absent, act-order;
 *   gemm       y_f32 and y_f16 within the bound of the kernel's declaration (qg_w4a16_cuda_numerics:
 *              u_acc = QG_MMA_U_ACC, d = its chain) against y* = the exact product in double of the reference's
 *              exactly decoded weights, for M in {1, 2, 4, 8, 16, 17, 64, 256, 1024} (and 4096 once),
 *              g in {32, 64, 128, K}, act-order on and off, K = 8, odd N, splits longer than the weight
 *              prefetch (4096 x 4096, 2048 x 8192); every call guarded (poisoned
 *              outputs, canaries, two runs that must agree bit for bit); batch invariance: rows computed
 *              alone (M = 1) equal, bitwise, the same rows inside the batch;
 *   splitk     shapes with S >= 3 splits: y_f32 equals, bitwise, the split partials (read back from the
 *              GPU's workspace) added on the host in the pinned order 0, 1, .., S-1 in float32; the data
 *              is checked to make the reversed order give other bits (so a reversed reduction fails);
 *   workspace  the device API with one workspace, sized for the largest M and zeroed once, serving calls
 *              of M = 64, 1, 33, 17, 16, 64, 2, 40 in that order (split-K turnstiles, act-order; the
 *              pre-ordered x of M > 16 in the wgxq1 ctest): every call's rows equal, bitwise, the same rows
 *              of the host API's M = 64 product (outputs poisoned before each call);
 *   errors     invalid layouts and arguments: their named errors, outputs untouched;
 *   decode     qg_w4a16_decode_cuda equals qg_w4a16_decode_ref bit for bit (the repack shapes);
 *   packed     qg_int4_gemm_packed_cuda equals qg_int4_gemm_packed_ref bit for bit (int32 sums, float32 and
 *              fp16 epilogue outputs; bias none / float32 / fp16, relu, per-row and per-tensor scales, odd
 *              K, the int32 extreme: all -8 x -8 at K = 131071);
 *   hash       prints a hash of the outputs of a fixed product (for `processes`);
 *   processes  runs this program's `hash` mode in two child processes and compares with its own hash.
 * Exit 77 without a GPU (1 with QG_REQUIRE_GPU=1).
 */
#define _POSIX_C_SOURCE 200809L /* popen, pclose */
#include "compare.h"
#include "guard.h"
#include "qg_test.h"
#include "qgold/cuda.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/int4.h"
#include "qgold/kernels_int4_cuda.h"
#include "qgold/rng.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- random layouts ---- */

typedef struct {
    qg_w4a16 L;
    uint32_t *q;
    uint16_t *s;
    uint8_t *z;
    int32_t *gi;
} layout;

static void layout_free(layout *l)
{
    free(l->q);
    free(l->s);
    free(l->z);
    free(l->gi);
    memset(l, 0, sizeof *l);
}

/* Codes uniform 0..15; scales fp16 with random mantissa, exponents 2^-9..2^-3 (a few subnormal-free
 * orders of magnitude); zeros uniform 0..15 or absent; g_idx a shuffled valid assignment. */
static int layout_make(layout *l, size_t N, size_t K, size_t g, int zeros, int act, uint64_t seed)
{
    memset(l, 0, sizeof *l);
    const size_t G = K / g;
    qg_rng r;
    qg_rng_init(&r, seed);
    l->q = malloc(N * (K / 8) * 4);
    l->s = malloc(N * G * 2);
    l->z = zeros ? malloc(N * G) : NULL;
    l->gi = act ? malloc(K * 4) : NULL;
    if (l->q == NULL || l->s == NULL || (zeros && l->z == NULL) || (act && l->gi == NULL)) return 1;
    for (size_t i = 0; i < N * (K / 8); i++) l->q[i] = qg_rng_bits32(&r);
    for (size_t i = 0; i < N * G; i++) {
        const float v = ldexpf(1.0f + (float)qg_rng_int_range(&r, 1024) / 1024.0f, -9 + (int)qg_rng_int_range(&r, 7));
        l->s[i] = qg_f32_to_f16(v);
    }
    if (zeros)
        for (size_t i = 0; i < N * G; i++) l->z[i] = (uint8_t)qg_rng_int_range(&r, 16);
    if (act) {
        uint32_t *p = malloc(K * 4);
        if (p == NULL || qg_rng_permutation(&r, p, K) != 0) {
            free(p);
            return 1;
        }
        for (size_t k = 0; k < K; k++) l->gi[k] = (int32_t)(p[k] / g); /* every group exactly g columns */
        free(p);
    }
    l->L = (qg_w4a16){N, K, g, l->q, N * (K / 8), l->s, N * G, l->z, zeros ? N * G : 0, l->gi, act ? K : 0};
    return 0;
}

/* fp16 activations in [-2, 2) with random mantissas, a few exact zeros. */
static uint16_t *acts_make(size_t M, size_t K, uint64_t seed)
{
    uint16_t *x = malloc(M * K * 2);
    if (x == NULL) return NULL;
    qg_rng r;
    qg_rng_init(&r, seed);
    for (size_t i = 0; i < M * K; i++) x[i] = qg_rng_int_range(&r, 64) == 0 ? 0 : qg_f32_to_f16(qg_rng_uniform(&r, -2.0f, 2.0f));
    return x;
}

/* Layouts of the repack and decode checks: odd N, K = 8, K not a multiple of 64, every g, zeros, act-order. */
static const size_t g_layout_shapes[][5] = {
    /* N, K, g, zeros, act */
    {1, 8, 8, 0, 0},      {13, 8, 8, 1, 1},     {37, 96, 32, 1, 0},    {37, 96, 32, 1, 1}, {17, 192, 64, 0, 1},
    {16, 256, 128, 1, 0}, {33, 256, 128, 0, 1}, {257, 520, 520, 1, 0}, {5, 520, 520, 0, 1}, {64, 4096, 128, 1, 1},
};

/* ---- host reference repack (layout of qgold/kernels_int4_cuda.h, written from its description) ---- */

static void repack_ref(const qg_w4a16 *L, const qg_w4a16_tc_shape *s, uint32_t *qw, uint32_t *sz, int32_t *perm)
{
    const size_t K = L->K, N = L->N, KC = s->Kp / 64;
    /* act-order: columns of group 0 in ascending k, then group 1, ... */
    if (L->g_idx != NULL) {
        size_t at = 0;
        for (size_t grp = 0; grp < s->G; grp++)
            for (size_t k = 0; k < K; k++)
                if ((size_t)L->g_idx[k] == grp) perm[at++] = (int32_t)k;
    }
    for (size_t nt = 0; nt < s->Np / 16; nt++)
        for (size_t c = 0; c < KC; c++)
            for (size_t lane = 0; lane < 32; lane++)
                for (size_t j = 0; j < 4; j++) {
                    const size_t gr = lane / 4, t = lane % 4;
                    uint32_t word = 0;
                    for (size_t p = 0; p < 8; p++) {
                        const size_t e = 2 * (p % 4) + p / 4;
                        const size_t n = nt * 16 + gr + 8 * ((e / 2) % 2);
                        const size_t kp = c * 64 + 32 * (j / 2) + 8 * t + 4 * (j % 2) + 2 * (e / 4) + e % 2;
                        if (n >= N || kp >= K) continue;
                        const size_t k = L->g_idx ? (size_t)perm[kp] : kp;
                        word |= qg_w4a16_code(L, n, k) << (4 * p);
                    }
                    qw[((nt * KC + c) * 32 + lane) * 4 + j] = word;
                }
    for (size_t grp = 0; grp < s->G; grp++)
        for (size_t n = 0; n < s->Np; n++) {
            uint32_t sc = 0, z = QG_INT4_SYM_ZERO;
            if (n < N) {
                sc = L->scales[n * s->G + grp];
                if (L->zeros) z = L->zeros[n * s->G + grp];
            }
            sz[grp * s->Np + n] = sc | ((0x6400u + z) << 16);
        }
}

static void test_repack(void)
{
    const size_t(*shapes)[5] = g_layout_shapes;
    for (size_t i = 0; i < COUNT(g_layout_shapes); i++) {
        const size_t N = shapes[i][0], K = shapes[i][1], g = shapes[i][2];
        layout l;
        qg_w4a16_tc_shape s;
        QG_CHECK(layout_make(&l, N, K, g, (int)shapes[i][3], (int)shapes[i][4], 100 + i) == 0, "allocation");
        int rc = qg_w4a16_tc_shape_of(N, K, g, &s);
        QG_CHECK(rc == QG_ERR_ok, "shape %zux%zu g %zu: %s", N, K, g, qg_error_name(rc));
        uint32_t *qw = malloc(s.qw_words * 4), *sz = malloc(s.sz_words * 4), *qw_ref = malloc(s.qw_words * 4),
                 *sz_ref = malloc(s.sz_words * 4);
        int32_t *perm = malloc(K * 4), *perm_ref = malloc(K * 4);
        QG_CHECK(qw && sz && qw_ref && sz_ref && perm && perm_ref, "allocation");
        if (rc == QG_ERR_ok && qw && sz && qw_ref && sz_ref && perm && perm_ref) {
            memset(qw, 0xA5, s.qw_words * 4);
            memset(sz, 0xA5, s.sz_words * 4);
            rc = qg_w4a16_repack_cuda(&l.L, qw, sz, perm);
            QG_CHECK(rc == QG_ERR_ok, "repack %zux%zu: %s %s", N, K, qg_error_name(rc), qg_cuda_last_error());
            repack_ref(&l.L, &s, qw_ref, sz_ref, perm_ref);
            qg_exact_report er;
            if (rc == QG_ERR_ok) {
                QG_CHECK(qg_compare_exact(QG_ELEM_U32, qw_ref, qw, s.qw_words, &er) == 0, "qw %zux%zu g %zu act %zu: %s", N, K, g,
                         shapes[i][4], er.text);
                QG_CHECK(qg_compare_exact(QG_ELEM_U32, sz_ref, sz, s.sz_words, &er) == 0, "sz %zux%zu g %zu: %s", N, K, g, er.text);
                if (shapes[i][4])
                    QG_CHECK(qg_compare_exact(QG_ELEM_I32, perm_ref, perm, K, &er) == 0, "perm %zux%zu: %s", N, K, er.text);
            }
        }
        free(qw), free(sz), free(qw_ref), free(sz_ref), free(perm), free(perm_ref);
        layout_free(&l);
    }
}

/* ---- decode and packed int4 x int4: bit for bit against the reference ---- */

static void test_decode(void)
{
    for (size_t i = 0; i < COUNT(g_layout_shapes); i++) {
        const size_t N = g_layout_shapes[i][0], K = g_layout_shapes[i][1], g = g_layout_shapes[i][2];
        layout l;
        QG_CHECK(layout_make(&l, N, K, g, (int)g_layout_shapes[i][3], (int)g_layout_shapes[i][4], 300 + i) == 0, "allocation");
        float *w = malloc(N * K * 4), *wr = malloc(N * K * 4);
        QG_CHECK(w && wr, "allocation");
        if (w && wr) {
            memset(w, 0xA5, N * K * 4);
            int rc = qg_w4a16_decode_cuda(&l.L, w);
            QG_CHECK(rc == QG_ERR_ok, "decode %zux%zu: %s %s", N, K, qg_error_name(rc), qg_cuda_last_error());
            QG_CHECK(qg_w4a16_decode_ref(&l.L, wr) == QG_ERR_ok, "reference decode");
            qg_exact_report er;
            if (rc == QG_ERR_ok)
                QG_CHECK(qg_compare_exact(QG_ELEM_F32, wr, w, N * K, &er) == 0, "decode %zux%zu g %zu: %s", N, K, g, er.text);
        }
        free(w), free(wr);
        layout_free(&l);
    }
}

static void packed_case(size_t M, size_t N, size_t K, int bias_kind, int relu, int per_row, int extreme, uint64_t seed)
{
    qg_rng r;
    qg_rng_init(&r, seed);
    const size_t rb = qg_int4_packed_row_bytes(K), no = M * N;
    uint8_t *A = malloc(M * rb), *B = malloc(N * rb);
    float *sa = malloc(M * 4), *sb = malloc(N * 4), *bf = malloc(N * 4), *y32 = malloc(no * 4), *r32 = malloc(no * 4);
    uint16_t *bh = malloc(N * 2), *y16 = malloc(no * 2), *r16 = malloc(no * 2);
    int32_t *acc = malloc(no * 4), *racc = malloc(no * 4);
    QG_CHECK(A && B && sa && sb && bf && y32 && r32 && bh && y16 && r16 && acc && racc, "allocation");
    if (A && B && sa && sb && bf && y32 && r32 && bh && y16 && r16 && acc && racc) {
        for (size_t i = 0; i < M * rb; i++) A[i] = extreme ? 0x88 : (uint8_t)qg_rng_bits32(&r);
        for (size_t i = 0; i < N * rb; i++) B[i] = extreme ? 0x88 : (uint8_t)qg_rng_bits32(&r);
        if (K & 1) {
            for (size_t m = 0; m < M; m++) A[m * rb + rb - 1] &= 0x0F;
            for (size_t n = 0; n < N; n++) B[n * rb + rb - 1] &= 0x0F;
        }
        for (size_t i = 0; i < M; i++) sa[i] = qg_rng_uniform(&r, 0.001f, 0.1f);
        for (size_t i = 0; i < N; i++) {
            sb[i] = qg_rng_uniform(&r, 0.001f, 0.1f);
            bf[i] = qg_rng_uniform(&r, -1.0f, 1.0f);
            bh[i] = qg_f32_to_f16(bf[i]);
        }
        if (bias_kind == 1) bf[0] = NAN;
        const qg_int4_gemm_args p = {.M = M,
                                     .N = N,
                                     .K = K,
                                     .A = A,
                                     .A_len = M * rb,
                                     .B = B,
                                     .B_len = N * rb,
                                     .sa = sa,
                                     .sa_len = per_row ? M : 1,
                                     .sb = sb,
                                     .sb_len = per_row ? N : 1,
                                     .bias = bias_kind == 0 ? NULL : bias_kind == 1 ? (const void *)bf : (const void *)bh,
                                     .bias_type = bias_kind == 2 ? QG_INT4_F16 : QG_INT4_F32,
                                     .relu = relu};
        memset(acc, 0xA5, no * 4), memset(y32, 0xA5, no * 4), memset(y16, 0xA5, no * 2);
        int rc = qg_int4_gemm_packed_cuda(&p, acc, y32, y16);
        QG_CHECK(rc == QG_ERR_ok, "packed %zux%zux%zu: %s %s", M, N, K, qg_error_name(rc), qg_cuda_last_error());
        QG_CHECK(qg_int4_gemm_packed_ref(&p, racc, r32, r16) == QG_ERR_ok, "reference packed");
        qg_exact_report er;
        if (rc == QG_ERR_ok) {
            QG_CHECK(qg_compare_exact(QG_ELEM_I32, racc, acc, no, &er) == 0, "packed %zux%zux%zu acc: %s", M, N, K, er.text);
            QG_CHECK(qg_compare_exact_nan_any(QG_ELEM_F32, r32, y32, no, &er) == 0, "packed %zux%zux%zu bias %d relu %d y_f32: %s", M, N,
                     K, bias_kind, relu, er.text);
            QG_CHECK(qg_compare_exact_nan_any(QG_ELEM_F16, r16, y16, no, &er) == 0, "packed %zux%zux%zu bias %d relu %d y_f16: %s", M, N,
                     K, bias_kind, relu, er.text);
        }
    }
    free(A), free(B), free(sa), free(sb), free(bf), free(y32), free(r32), free(bh), free(y16), free(r16), free(acc), free(racc);
}

static void test_packed(void)
{
    static const size_t shapes[][3] = {{1, 1, 1}, {1, 13, 8}, {13, 37, 257}, {37, 13, 131}, {64, 64, 128}, {17, 100, 1000}, {2, 3, 4097}};
    uint64_t seed = 500;
    for (size_t i = 0; i < COUNT(shapes); i++)
        for (int bias = 0; bias < 3; bias++)
            packed_case(shapes[i][0], shapes[i][1], shapes[i][2], bias, (int)((i + (size_t)bias) & 1), (int)(i & 1), 0, seed++);
    packed_case(2, 3, QG_INT4_MAX_K, 0, 0, 1, 1, seed++); /* acc = 64 K, the int32 extreme */
}

/* ---- guarded GEMM calls ---- */

typedef struct {
    const qg_w4a16 *L;
    const uint16_t *x;
    size_t M;
} call_ctx;

static int call_fn(void *vctx, void *out)
{
    call_ctx *c = vctx;
    const size_t n = c->L->N * c->M;
    return qg_w4a16_gemm_cuda(c->L, c->x, c->M * c->L->K, c->M, (float *)out, (uint16_t *)((char *)out + n * 4));
}

/* y32 and y16 (M x N) of one guarded call (two runs that must agree; full write; canaries). */
static int gemm_guarded(const qg_w4a16 *L, const uint16_t *x, size_t M, float *y32, uint16_t *y16)
{
    const size_t n = L->N * M;
    unsigned char *buf = malloc(n * 6);
    if (buf == NULL) return QG_ERR_alloc_failed;
    call_ctx c = {L, x, M};
    qg_err e;
    const int rc = qg_call_guarded(call_fn, &c, buf, n * 6, 1, &e);
    QG_CHECK(rc == QG_ERR_ok, "cuda w4a16 %zux%zu g %zu M %zu: %s (%s)", L->N, L->K, L->g, M, e.msg, qg_cuda_last_error());
    if (rc == QG_ERR_ok) {
        memcpy(y32, buf, n * 4);
        memcpy(y16, buf + n * 4, n * 2);
    }
    free(buf);
    return rc;
}

/* y* and sum|w x| in double from the reference's exact float32 decode. */
static int exact_product(const qg_w4a16 *L, const uint16_t *x, size_t M, double *ys, double *sa)
{
    float *w = malloc(L->N * L->K * sizeof(float));
    double *xd = malloc(M * L->K * sizeof(double));
    if (w == NULL || xd == NULL) {
        free(w), free(xd);
        return QG_ERR_alloc_failed;
    }
    int rc = qg_w4a16_decode_ref(L, w);
    for (size_t i = 0; i < M * L->K; i++) xd[i] = qg_f16_to_f32(x[i]);
    for (size_t m = 0; m < M && rc == QG_ERR_ok; m++)
        for (size_t n = 0; n < L->N; n++) {
            double a = 0, b = 0;
            const float *wr = w + n * L->K;
            const double *xr = xd + m * L->K;
            for (size_t k = 0; k < L->K; k++) {
                const double p = (double)wr[k] * xr[k]; /* exact: 24 x 11 bits */
                a += p;
                b += fabs(p);
            }
            ys[m * L->N + n] = a;
            sa[m * L->N + n] = b;
        }
    free(w), free(xd);
    return rc;
}

static double g_worst32, g_worst16;
static size_t g_rounded;

static void gemm_case(size_t N, size_t K, size_t g, int zeros, int act, size_t M, uint64_t seed)
{
    layout l;
    QG_CHECK(layout_make(&l, N, K, g, zeros, act, seed) == 0, "allocation");
    uint16_t *x = acts_make(M, K, seed ^ 0x55);
    const size_t n = M * N;
    float *y32 = malloc(n * 4), *f16v = malloc(n * 4), *r32 = malloc(N * 4);
    uint16_t *y16 = malloc(n * 2), *r16 = malloc(N * 2);
    double *ys = malloc(n * 8), *sa = malloc(n * 8);
    QG_CHECK(x && y32 && f16v && r32 && y16 && r16 && ys && sa, "allocation");
    if (x && y32 && f16v && r32 && y16 && r16 && ys && sa && gemm_guarded(&l.L, x, M, y32, y16) == QG_ERR_ok) {
        int rc = exact_product(&l.L, x, M, ys, sa);
        QG_CHECK(rc == QG_ERR_ok, "exact product: %s", qg_error_name(rc));
        const qg_numerics nm32 = qg_w4a16_cuda_numerics(N, K, g, 0), nm16 = qg_w4a16_cuda_numerics(N, K, g, 1);
        qg_bound_report br;
        rc = qg_compare_bounded(&nm32, (long)K, ys, sa, NULL, y32, n, &br);
        QG_CHECK(rc == QG_ERR_ok, "%zux%zu g %zu act %d M %zu y_f32 output %zu: %s (%zu fail)", N, K, g, act, M, br.first_failure,
                 br.text, br.failures);
        if (br.worst_ratio > g_worst32) g_worst32 = br.worst_ratio;
        g_rounded += br.rounded;
        for (size_t i = 0; i < n; i++) f16v[i] = qg_f16_to_f32(y16[i]);
        rc = qg_compare_bounded(&nm16, (long)K, ys, sa, NULL, f16v, n, &br);
        QG_CHECK(rc == QG_ERR_ok, "%zux%zu g %zu act %d M %zu y_f16 output %zu: %s (%zu fail)", N, K, g, act, M, br.first_failure,
                 br.text, br.failures);
        if (br.worst_ratio > g_worst16) g_worst16 = br.worst_ratio;
        /* batch invariance: rows alone (M = 1) against the same rows inside this call */
        const size_t rows[] = {0, 1, 7, 8, 16, M / 2, M - 1};
        for (size_t ri = 0; ri < COUNT(rows) && M > 1; ri++) {
            const size_t m = rows[ri];
            if (m >= M || (ri > 0 && m == rows[ri - 1])) continue;
            if (gemm_guarded(&l.L, x + m * K, 1, r32, r16) != QG_ERR_ok) continue;
            qg_exact_report er;
            QG_CHECK(qg_compare_exact(QG_ELEM_F32, y32 + m * N, r32, N, &er) == 0, "%zux%zu g %zu M %zu: row %zu alone differs (f32): %s",
                     N, K, g, M, m, er.text);
            QG_CHECK(qg_compare_exact(QG_ELEM_F16, y16 + m * N, r16, N, &er) == 0, "%zux%zu g %zu M %zu: row %zu alone differs (f16): %s",
                     N, K, g, M, m, er.text);
        }
    }
    free(x), free(y32), free(f16v), free(r32), free(y16), free(r16), free(ys), free(sa);
    layout_free(&l);
}

static void test_gemm(void)
{
    static const size_t Ms[] = {1, 2, 4, 8, 16, 17, 64, 256, 1024};
    static const size_t gs[] = {32, 64, 128, 512};
    uint64_t seed = 1000;
    for (size_t mi = 0; mi < COUNT(Ms); mi++) {
        const size_t M = Ms[mi];
        for (size_t gi = 0; gi < COUNT(gs); gi++)
            for (int act = 0; act < 2; act++) gemm_case(257, 512, gs[gi], (int)((gi + act) & 1), act, M, seed++);
        gemm_case(13, 8, 8, 1, (int)(mi & 1), M, seed++);       /* K = 8: one half-filled k-tile */
        gemm_case(40, 2056, 2056, 0, 0, M, seed++);             /* g = K, K not a multiple of 16 */
        gemm_case(31, 4096, 128, 1, (int)(~mi & 1), M, seed++); /* S = 16 splits */
        /* g = 128 at M <= 16: two ring groups of two whole groups each (the paired chains), then a ring
         * group of two chunks, one group (one chain) */
        gemm_case(200, 640, 128, (int)(mi & 1), (int)(mi & 1), M, seed++);
        /* g = 64: one ring group as two pairs of groups, then one chunk alone */
        gemm_case(200, 320, 64, (int)(~mi & 1), (int)(mi & 1), M, seed++);
    }
    gemm_case(24, 192, 64, 1, 1, 4096, seed++);
    /* 16 x 19 = 304 CTAs of 128 x 64: more than SMs, so the two-CTA SEQ configuration (the M >= 64 calls
     * above have fewer CTAs than SMs and run the one-CTA one) */
    gemm_case(2432, 256, 128, 1, 0, 1024, seed++);
    /* long splits (8 chunks of 64 columns each): the weight prefetch ring refills (depth 4 for M <= 16, 2 above) */
    static const size_t Ml[] = {1, 16, 64};
    for (size_t i = 0; i < COUNT(Ml); i++) gemm_case(4096, 4096, 128, 1, 1, Ml[i], seed++);
    gemm_case(2048, 8192, 32, 0, 0, 1, seed++);
    gemm_case(2048, 8192, 32, 1, 0, 17, seed++);
    printf("w4a16 cuda: worst |y - y*| / bound %.3g (float32 output), %.3g (fp16 output); %zu outputs rounded\n", g_worst32, g_worst16,
           g_rounded);
    QG_CHECK(g_rounded > 0, "no output was ever rounded: the bound was not exercised");
}

/* ---- split-K: the pinned reduction order, bit for bit ---- */

static void test_splitk(void)
{
    static const size_t shapes[][4] = {{31, 4096, 128, 1}, {64, 2048, 32, 0}, {100, 14336, 128, 1}, {48, 1024, 1024, 1}};
    static const size_t Ms[] = {1, 16, 33};
    size_t differ_total = 0;
    for (size_t i = 0; i < COUNT(shapes); i++) {
        const size_t N = shapes[i][0], K = shapes[i][1], g = shapes[i][2];
        const int S = qg_w4a16_cuda_splits(N, K);
        QG_CHECK(S >= 3, "%zux%zu: %d splits; the pinned-order check needs >= 3 (2 partials add the same either way)", N, K, S);
        for (size_t mi = 0; mi < COUNT(Ms); mi++) {
            const size_t M = Ms[mi], n = M * N;
            layout l;
            QG_CHECK(layout_make(&l, N, K, g, (int)shapes[i][3], (int)(mi & 1), 7000 + 10 * i + mi) == 0, "allocation");
            uint16_t *x = acts_make(M, K, 9000 + 10 * i + mi);
            float *y = malloc(n * 4), *y2 = malloc(n * 4), *part = malloc((size_t)S * n * 4);
            QG_CHECK(x && y && y2 && part, "allocation");
            if (x && y && y2 && part) {
                int rc = qg_w4a16_gemm_cuda_partials(&l.L, x, M * K, M, y, part);
                QG_CHECK(rc == QG_ERR_ok, "partials %zux%zu M %zu: %s %s", N, K, M, qg_error_name(rc), qg_cuda_last_error());
                if (rc == QG_ERR_ok) {
                    size_t mism = 0, differ = 0, first = n;
                    float first_expected = 0.0f;
                    for (size_t j = 0; j < n; j++) {
                        volatile float v = part[j], r = part[(size_t)(S - 1) * n + j];
                        for (int s = 1; s < S; s++) v = v + part[(size_t)s * n + j];
                        for (int s = S - 2; s >= 0; s--) r = r + part[(size_t)s * n + j];
                        if (qg_f32_bits(v) != qg_f32_bits(y[j])) {
                            if (mism++ == 0) first = j, first_expected = v;
                        }
                        if (qg_f32_bits(v) != qg_f32_bits(r)) differ++;
                    }
                    QG_CHECK(mism == 0, "%zux%zu M %zu S %d: %zu outputs differ from the pinned order 0..S-1 of the partials; first %zu: got %a, pinned order %a",
                             N, K, M, S, mism, first, first < n ? (double)y[first] : 0.0, (double)first_expected);
                    differ_total += differ;
                    /* the plain call: same bits as the partials run (determinism across calls) */
                    rc = qg_w4a16_gemm_cuda(&l.L, x, M * K, M, y2, NULL);
                    qg_exact_report er;
                    QG_CHECK(rc == QG_ERR_ok && qg_compare_exact(QG_ELEM_F32, y, y2, n, &er) == 0, "%zux%zu M %zu: second call differs: %s",
                             N, K, M, rc == QG_ERR_ok ? er.text : qg_error_name(rc));
                }
            }
            free(x), free(y), free(y2), free(part);
            layout_free(&l);
        }
    }
    printf("split-K: %zu outputs whose reversed-order sum has other bits (the mutant's footprint)\n", differ_total);
    QG_CHECK(differ_total > 0, "no output distinguishes the pinned order from the reversed one: the check has no power");
}

/* ---- one workspace for calls of any M ---- */

static void test_workspace(void)
{
    const size_t N = 100, K = 14336, g = 128, Mmax = 64;
    /* calls in this order on one workspace: (M, forced split count; 0 = the pinned S). The S = 1 calls
     * of this act-order layout write x' into the workspace and count nothing: they must not land on
     * the counters of the S > 1 calls that follow. Their own rows are compared with the first S = 1
     * call's (M = 64). */
    static const size_t Ms[] = {64, 64, 1, 33, 17, 16, 64, 2, 40, 40, 64};
    static const int Ss[] = {0, 1, 0, 1, 0, 1, 0, 0, 1, 0, 0};
    const int S = qg_w4a16_cuda_splits(N, K);
    QG_CHECK(S > 1, "%zux%zu: %d splits; the turnstile check needs S > 1", N, K, S);
    layout l;
    QG_CHECK(layout_make(&l, N, K, g, 1, 1, 5150) == 0, "allocation");
    uint16_t *x = acts_make(Mmax, K, 5151);
    float *yref = malloc(Mmax * N * 4), *y = malloc(Mmax * N * 4), *y1 = malloc(Mmax * N * 4);
    qg_w4a16_cuda_weights w;
    memset(&w, 0, sizeof w);
    void *dx = NULL, *dws = NULL, *dy = NULL;
    int rc = x && yref && y && y1 ? qg_w4a16_gemm_cuda(&l.L, x, Mmax * K, Mmax, yref, NULL) : QG_ERR_alloc_failed;
    QG_CHECK(rc == QG_ERR_ok, "host API M %zu: %s %s", Mmax, qg_error_name(rc), qg_cuda_last_error());
    if (rc == QG_ERR_ok) rc = qg_w4a16_cuda_upload(&l.L, &w);
    QG_CHECK(rc == QG_ERR_ok, "upload: %s %s", qg_error_name(rc), qg_cuda_last_error());
    const size_t wsb = rc == QG_ERR_ok ? qg_w4a16_cuda_workspace_bytes(&w, Mmax, 0) : 0;
    if (rc == QG_ERR_ok && (qg_cuda_alloc(&dx, Mmax * K * 2) != 0 || qg_cuda_alloc(&dws, wsb) != 0 || qg_cuda_alloc(&dy, Mmax * N * 4) != 0 ||
                            qg_cuda_to_device(dx, x, Mmax * K * 2) != 0 || qg_cuda_fill(dws, 0, wsb) != 0))
        rc = QG_ERR_device_failed;
    int have_y1 = 0;
    for (size_t i = 0; rc == QG_ERR_ok && i < COUNT(Ms); i++) {
        const size_t M = Ms[i];
        rc = qg_cuda_fill(dy, 0xFF, Mmax * N * 4) == 0 ? QG_ERR_ok : QG_ERR_device_failed; /* NaN: a call that writes nothing fails */
        if (rc == QG_ERR_ok) rc = qg_w4a16_gemm_cuda_async(&w, dx, M, Ss[i], dws, (float *)dy, NULL, NULL);
        if (rc == QG_ERR_ok && qg_cuda_to_host(y, dy, M * N * 4) != 0) rc = QG_ERR_device_failed;
        QG_CHECK(rc == QG_ERR_ok, "call %zu (M %zu, splits %d): %s %s", i, M, Ss[i], qg_error_name(rc), qg_cuda_last_error());
        if (rc != QG_ERR_ok) break;
        if (Ss[i] == 1 && !have_y1) { /* the first S = 1 call (M = Mmax) is the S = 1 calls' reference */
            memcpy(y1, y, Mmax * N * 4);
            have_y1 = 1;
            continue;
        }
        qg_exact_report er;
        QG_CHECK(qg_compare_exact(QG_ELEM_F32, y, Ss[i] == 1 ? y1 : yref, M * N, &er) == 0,
                 "call %zu (M %zu, splits %d, one workspace): rows differ from the M = %zu product: %s", i, M, Ss[i], Mmax, er.text);
    }
    qg_w4a16_cuda_free(&w);
    qg_cuda_free(dx), qg_cuda_free(dws), qg_cuda_free(dy);
    free(x), free(yref), free(y), free(y1);
    layout_free(&l);
}

/* ---- errors ---- */

typedef struct {
    const char *what;
    qg_w4a16 L;
    const uint16_t *x;
    size_t x_len, M;
    int expect;
} err_case;

static void test_errors(void)
{
    layout l;
    QG_CHECK(layout_make(&l, 16, 64, 32, 1, 1, 42) == 0, "allocation");
    uint16_t *x = acts_make(2, 64, 43);
    float y[32];
    uint16_t y16[32];
    const unsigned char poison = 0x7B;
    err_case cases[10];
    size_t nc = 0;
    qg_w4a16 b = l.L;
    b.g = 16;
    cases[nc++] = (err_case){"group size 16", b, x, 128, 2, QG_ERR_int_group_invalid};
    b = l.L;
    b.K = 60;
    cases[nc++] = (err_case){"K not a multiple of 8", b, x, 128, 2, QG_ERR_shape_invalid};
    b = l.L;
    b.qweight = NULL;
    cases[nc++] = (err_case){"NULL qweight", b, x, 128, 2, QG_ERR_argument_invalid};
    cases[nc++] = (err_case){"NULL x", l.L, NULL, 128, 2, QG_ERR_argument_invalid};
    cases[nc++] = (err_case){"M = 0", l.L, x, 0, 0, QG_ERR_batch_invalid};
    uint8_t zbad[32];
    memcpy(zbad, l.z, 32);
    zbad[5] = 16;
    b = l.L;
    b.zeros = zbad;
    cases[nc++] = (err_case){"zero 16", b, x, 128, 2, QG_ERR_int4_zero_out_of_range};
    uint16_t sbad[32];
    memcpy(sbad, l.s, sizeof sbad);
    sbad[9] = 0xBC00; /* -1.0 */
    b = l.L;
    b.scales = sbad;
    cases[nc++] = (err_case){"negative scale", b, x, 128, 2, QG_ERR_int_scale_invalid};
    int32_t gbad[64];
    memcpy(gbad, l.gi, sizeof gbad);
    gbad[3] = gbad[3] == 0 ? 1 : 0; /* one group now holds g + 1 columns */
    b = l.L;
    b.g_idx = gbad;
    cases[nc++] = (err_case){"g_idx not a valid assignment", b, x, 128, 2, QG_ERR_int4_g_idx_invalid};
    cases[nc++] = (err_case){"x_len not M * K", l.L, x, 127, 2, QG_ERR_size_mismatch};
    for (size_t i = 0; i < nc; i++) {
        memset(y, poison, sizeof y);
        memset(y16, poison, sizeof y16);
        const int rc = qg_w4a16_gemm_cuda(&cases[i].L, cases[i].x, cases[i].x_len, cases[i].M, y, y16);
        QG_CHECK(rc == cases[i].expect, "%s: got %s, expected %s", cases[i].what, qg_error_name(rc), qg_error_name(cases[i].expect));
        QG_CHECK(qg_test_untouched(y, sizeof y, poison) && qg_test_untouched(y16, sizeof y16, poison), "%s: output touched",
                 cases[i].what);
    }
    QG_CHECK(qg_w4a16_gemm_cuda(&l.L, x, 128, 2, NULL, NULL) == QG_ERR_argument_invalid, "no output requested");
    free(x);
    layout_free(&l);
}

/* ---- across processes ---- */

static uint64_t fnv1a(const void *p, size_t n, uint64_t h)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001B3ull;
    return h;
}

static int hash_product(uint64_t *h)
{
    /* act-order, zeros, S > 1 and M spanning several m-tiles */
    const size_t N = 300, K = 4096, M = 40;
    layout l;
    if (layout_make(&l, N, K, 128, 1, 1, 31337) != 0) return 1;
    uint16_t *x = acts_make(M, K, 31338);
    float *y = malloc(M * N * 4);
    uint16_t *y16 = malloc(M * N * 2);
    int rc = x && y && y16 ? qg_w4a16_gemm_cuda(&l.L, x, M * K, M, y, y16) : QG_ERR_alloc_failed;
    if (rc == QG_ERR_ok) *h = fnv1a(y16, M * N * 2, fnv1a(y, M * N * 4, 0xCBF29CE484222325ull));
    free(x), free(y), free(y16);
    layout_free(&l);
    return rc;
}

static void test_processes(const char *self)
{
    uint64_t mine = 0;
    QG_CHECK(hash_product(&mine) == QG_ERR_ok, "product failed: %s", qg_cuda_last_error());
    for (int i = 0; i < 2; i++) {
        char cmd[4200], line[128] = "";
        snprintf(cmd, sizeof cmd, "'%s' hash", self);
        FILE *p = popen(cmd, "r");
        QG_CHECK(p != NULL, "cannot run %s", cmd);
        if (p == NULL) continue;
        unsigned long long theirs = 0;
        int got = 0;
        while (fgets(line, sizeof line, p) != NULL)
            if (sscanf(line, "hash %llx", &theirs) == 1) got = 1;
        const int st = pclose(p);
        QG_CHECK(st == 0 && got, "child %d: status %d, hash line %s", i, st, got ? "read" : "missing");
        if (got) QG_CHECK(theirs == mine, "child %d hash %016llx, this process %016llx", i, theirs, (unsigned long long)mine);
    }
}

int main(int argc, char **argv)
{
    static const char *modes[] = {"repack", "gemm", "splitk", "errors", "hash", "processes", "decode", "packed", "workspace"};
    int mode = -1;
    for (size_t i = 0; argc == 2 && i < COUNT(modes); i++)
        if (strcmp(argv[1], modes[i]) == 0) mode = (int)i;
    if (mode < 0) {
        fprintf(stderr, "usage: %s repack|gemm|splitk|errors|hash|processes|decode|packed|workspace\n", argv[0]);
        return 2;
    }
    char why[200];
    if (qg_cuda_device_count(why, sizeof why) <= 0) return qg_test_no_gpu(why);
    char dev[256];
    qg_cuda_describe(dev, sizeof dev);
    if (mode == 4) {
        uint64_t h = 0;
        const int rc = hash_product(&h);
        if (rc != QG_ERR_ok) {
            fprintf(stderr, "hash: %s %s\n", qg_error_name(rc), qg_cuda_last_error());
            return 1;
        }
        printf("hash %016llx\n", (unsigned long long)h);
        return 0;
    }
    printf("device: %s\n", dev);
    switch (mode) {
    case 0: test_repack(); break;
    case 1: test_gemm(); break;
    case 2: test_splitk(); break;
    case 3: test_errors(); break;
    case 5: test_processes(argv[0]); break;
    case 6: test_decode(); break;
    case 8: test_workspace(); break;
    default: test_packed(); break;
    }
    return qg_test_end(argv[1]);
}
