/* simd.int4.<backend> / full.int4.<backend>: one backend's INT4 kernels (registry rows int4/w4a16_decode,
 * int4/w4a16_gemv and int4/gemm_packed of <backend>) against the reference, on data made on the fly from
 * the pinned stream (int4_layouts.h).
 *
 *   decode       bitwise equal to qg_w4a16_decode_ref: N in {1, 13, 37}, K in {8, 32, 64, 96, 128, 256, 384}
 *                with every allowed g (32, 64, 128, K), zeros present or absent, g_idx absent, identity or
 *                a random act-order assignment;
 *   gemv         y_f32 within the bound of the row's numerics, y_f16 within numerics_f16, against the exact
 *                y* (double); y_f16 is y_f32 rounded once; f32-only and f16-only calls equal the combined
 *                call; activations with +-0, subnormals, and in one column inf and NaN;
 *   batch        column b of batches 1..16 equals the batch-1 call on that column, bitwise;
 *   gemm_packed  acc, f32 and f16 bitwise equal to qg_int4_gemm_packed_ref (a NaN made by a NaN bias matches
 *                any NaN): M in {1, 3, 17}, N in {1, 5, 13}, K in {1, 2, 7, 8, 31, 32, 33, 100, 257}, scales
 *                per tensor / per row, bias none / float32 / fp16 (with NaN and inf), relu on and off;
 *   threads      1, 2, 3 and 4 threads give the same bits (gemv, decode, gemm);
 *   validation   every invalid layout and argument gets the reference's error, outputs untouched.
 * Every kernel call goes through qg_call_guarded (poisoned outputs, canaries, two runs: full write, no
 * overrun, determinism). No tolerance literal appears here: bounds come from the registry row.
 *
 * usage: test_int4_kernels BACKEND [full]   (avx2 or neon; exit 77 when BACKEND cannot run here)
 * "full" runs 4096 x 4096 and 11008 x 4096 (g = 128 and 32, act-order) at batch 1, 7 and 16 instead.
 */
#include "compare.h"
#include "guard.h"
#include "int4_layouts.h"
#include "qg_test.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/int4.h"
#include "qgold/registry.h"
#include "qgold/rng.h"
#include "qgold/threads.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
enum { MAXB = 16 };

static const qg_kernel *g_dec, *g_gemv, *g_gemm;
static const char *g_be;
static struct {
    size_t outputs, rounded, nonfinite;
    double worst;
} g_seen;

/* ---- guarded calls ---- */

typedef struct {
    const qg_w4a16 *L;
    const uint16_t *x;
    size_t batch;
    int outs;
} gemv_call;

static int call_gemv(void *vc, void *out)
{
    gemv_call *c = vc;
    float *y32;
    uint16_t *y16;
    qg_test_gemv_outs(out, c->batch * c->L->N, c->outs, &y32, &y16);
    return g_gemv->fn.int4_w4a16_gemv(c->L, c->x, c->batch * c->L->K, c->batch, y32, y16);
}

/* The kernel's GEMV through a guarded call; y32 / y16 (batch x N) get the results. 0 or the error. */
static int run_gemv(const qg_w4a16 *L, const uint16_t *x, size_t batch, int outs, float *y32, uint16_t *y16, const char *what)
{
    const size_t n = batch * L->N;
    uint16_t *buf = malloc(n * 6);
    if (!buf) return QG_ERR_alloc_failed;
    gemv_call c = {L, x, batch, outs};
    qg_err e = {0};
    const int rc = qg_call_guarded(call_gemv, &c, buf, 3 * n, sizeof(uint16_t), &e);
    if (rc == 0) {
        if (y32) memcpy(y32, buf, n * 4);
        if (y16) memcpy(y16, buf + 2 * n, n * 2);
    }
    QG_CHECK(rc == 0, "%s w4a16 gemv N %zu K %zu g %zu batch %zu (%s): %s %s", g_be, L->N, L->K, L->g, batch, what,
             qg_error_name(rc), e.msg);
    free(buf);
    return rc;
}

typedef struct {
    const qg_w4a16 *L;
} decode_call;

static int call_decode(void *vc, void *out) { return g_dec->fn.int4_w4a16_decode(((decode_call *)vc)->L, out); }

typedef struct {
    const qg_int4_gemm_args *p;
} gemm_call;

/* Output: acc (n int32), f32 (n), f16 (n) in one buffer of 5 n uint16. */
static int call_gemm(void *vc, void *out)
{
    gemm_call *c = vc;
    const size_t n = c->p->M * c->p->N;
    uint16_t *o = out;
    return g_gemm->fn.int4_gemm_packed(c->p, (int32_t *)(void *)o, (float *)(void *)(o + 2 * n), o + 4 * n);
}

/* ---- data ---- */

/* Activations: uniform in [-2, 2) as fp16, with every 17th a subnormal or a signed zero; column `special`
 * (if < batch) holds an inf at k = 1 and a NaN at k = K - 1 (K > 1). */
static void make_x(uint64_t seed, size_t batch, size_t K, size_t special, uint16_t *x)
{
    qg_rng r;
    qg_rng_init(&r, seed);
    for (size_t i = 0; i < batch * K; i++) {
        x[i] = qg_f32_to_f16(qg_rng_uniform(&r, -2.0f, 2.0f));
        if (i % 17 == 5) x[i] = (uint16_t)(qg_rng_int_range(&r, 1024) | (i % 2 ? 0x8000u : 0));
    }
    if (special < batch && K > 1) {
        x[special * K + 1] = 0x7C00;
        x[special * K + K - 1] = 0x7E00;
    }
}

static void check_gemv_values(const qg_w4a16 *L, const uint16_t *x, size_t batch, const float *y32, const uint16_t *y16,
                              const char *what)
{
    const size_t n = batch * L->N;
    double *ys = malloc(n * 8), *sa = malloc(n * 8);
    float *f16v = malloc(n * 4);
    if (!ys || !sa || !f16v) {
        QG_CHECK(0, "allocation");
        free(ys), free(sa), free(f16v);
        return;
    }
    qg_int4_exact_product(L, x, batch, ys, sa);
    qg_bound_report br;
    int rc = qg_compare_bounded(&g_gemv->numerics, (long)L->K, ys, sa, NULL, y32, n, &br);
    QG_CHECK(rc == 0, "%s gemv f32 N %zu K %zu g %zu batch %zu (%s): %s", g_be, L->N, L->K, L->g, batch, what, br.text);
    if (br.worst_ratio > g_seen.worst) g_seen.worst = br.worst_ratio;
    g_seen.outputs += n;
    g_seen.rounded += br.rounded;
    for (size_t i = 0; i < n; i++) {
        g_seen.nonfinite += !isfinite(ys[i]);
        f16v[i] = qg_f16_to_f32(y16[i]);
    }
    rc = qg_compare_bounded(&g_gemv->numerics_f16, (long)L->K, ys, sa, NULL, f16v, n, &br);
    QG_CHECK(rc == 0, "%s gemv f16 N %zu K %zu g %zu batch %zu (%s): %s", g_be, L->N, L->K, L->g, batch, what, br.text);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const uint16_t want = qg_f32_to_f16(y32[i]);
        bad += !(want == y16[i] || (qg_f16_isnan(want) && qg_f16_isnan(y16[i])));
    }
    QG_CHECK(bad == 0, "%s gemv (%s): %zu fp16 outputs are not the float32 output rounded once", g_be, what, bad);
    free(ys), free(sa), free(f16v);
}

/* ---- decode and GEMV over the shape list ---- */

static void test_layouts(void)
{
    static const size_t Ns[] = {1, 13, 37};
    static const size_t Ks[] = {8, 32, 64, 96, 128, 256, 384};
    static const size_t gs[] = {32, 64, 128, 0}; /* 0: g = K */
    static const size_t batches[] = {1, 2, 5, 16};
    uint64_t seed = 0x1A74;
    for (size_t ni = 0; ni < COUNT(Ns); ni++)
        for (size_t ki = 0; ki < COUNT(Ks); ki++)
            for (size_t gi = 0; gi < COUNT(gs); gi++) {
                const size_t N = Ns[ni], K = Ks[ki], g = gs[gi] ? gs[gi] : K;
                if (K % g != 0 || (gs[gi] == K)) continue; /* g = K once, as 0 */
                for (int zk = 0; zk < 2; zk++)
                    for (int gk = 0; gk < 3; gk++) {
                        qg_int4_test_layout t;
                        int rc = qg_int4_layout_make(N, K, g, zk, (qg_int4_gidx_kind)gk, ++seed, &t);
                        QG_CHECK(rc == 0, "layout: %s", qg_error_name(rc));
                        if (rc) continue;
                        char what[96];
                        snprintf(what, sizeof what, "zeros %d g_idx %d", zk, gk);
                        /* decode: bitwise the reference */
                        float *wr = malloc(N * K * 4), *wk = malloc(N * K * 4);
                        if (wr && wk) {
                            rc = qg_w4a16_decode_ref(&t.L, wr);
                            decode_call dc = {&t.L};
                            qg_err e = {0};
                            const int rk = qg_call_guarded(call_decode, &dc, wk, N * K, 4, &e);
                            qg_exact_report er;
                            QG_CHECK(rc == 0 && rk == 0 && qg_compare_exact(QG_ELEM_F32, wr, wk, N * K, &er) == 0,
                                     "%s decode N %zu K %zu g %zu (%s): %s %s %s", g_be, N, K, g, what, qg_error_name(rk),
                                     e.msg, rk == 0 ? er.text : "");
                        }
                        free(wr), free(wk);
                        /* gemv at one batch size per layout, rotating */
                        const size_t B = batches[(ni + ki + gi + (size_t)zk + (size_t)gk) % COUNT(batches)];
                        uint16_t *x = malloc(B * K * 2), *y16 = malloc(B * N * 2);
                        float *y32 = malloc(B * N * 4);
                        if (x && y16 && y32) {
                            make_x(seed, B, K, B > 1 ? 1 : B, x);
                            if (run_gemv(&t.L, x, B, 3, y32, y16, what) == 0) check_gemv_values(&t.L, x, B, y32, y16, what);
                        }
                        free(x), free(y16), free(y32);
                        qg_int4_layout_free(&t);
                    }
            }
}

/* Batch invariance and output selection: every column of batches 1..16 against the batch-1 call. */
static void test_batches(void)
{
    qg_int4_test_layout t;
    int rc = qg_int4_layout_make(37, 384, 128, 1, QG_INT4_GIDX_RANDOM, 99, &t);
    QG_CHECK(rc == 0, "layout");
    if (rc) return;
    const size_t N = 37, K = 384;
    uint16_t x[MAXB * 384], y16[MAXB * 37], a16[37], f16only[MAXB * 37];
    float y32[MAXB * 37], a32[37], f32only[MAXB * 37];
    make_x(100, MAXB, K, 3, x);
    for (size_t B = 1; B <= MAXB; B++) {
        if (run_gemv(&t.L, x, B, 3, y32, y16, "batch") != 0) continue;
        for (size_t b = 0; b < B; b++)
            if (run_gemv(&t.L, x + b * K, 1, 3, a32, a16, "column alone") == 0)
                QG_CHECK(memcmp(a32, y32 + b * N, N * 4) == 0 && memcmp(a16, y16 + b * N, N * 2) == 0,
                         "%s gemv: column %zu of batch %zu differs from the column alone", g_be, b, B);
        if (B == 7 || B == MAXB) {
            check_gemv_values(&t.L, x, B, y32, y16, "batch");
            if (run_gemv(&t.L, x, B, 1, f32only, NULL, "f32 only") == 0)
                QG_CHECK(memcmp(f32only, y32, B * N * 4) == 0, "%s gemv: f32-only call differs", g_be);
            if (run_gemv(&t.L, x, B, 2, NULL, f16only, "f16 only") == 0)
                QG_CHECK(memcmp(f16only, y16, B * N * 2) == 0, "%s gemv: f16-only call differs", g_be);
        }
    }
    qg_int4_layout_free(&t);
}

/* ---- packed GEMM ---- */

static void pack_rows(qg_rng *r, size_t rows, size_t K, uint8_t *p)
{
    const size_t rb = qg_int4_packed_row_bytes(K);
    memset(p, 0, rows * rb);
    for (size_t i = 0; i < rows; i++)
        for (size_t k = 0; k < K; k++) {
            /* mostly uniform codes; every 11th row all -8 (the accumulator's extreme) */
            const unsigned c = i % 11 == 10 ? 8u : qg_rng_int_range(r, 16);
            p[i * rb + k / 2] |= (uint8_t)(c << (4 * (k % 2)));
        }
}

static int run_gemm(const qg_int4_gemm_args *p, uint16_t *buf, const char *what)
{
    const size_t n = p->M * p->N;
    gemm_call c = {p};
    qg_err e = {0};
    const int rc = qg_call_guarded(call_gemm, &c, buf, 5 * n, sizeof(uint16_t), &e);
    QG_CHECK(rc == 0, "%s gemm_packed M %zu N %zu K %zu (%s): %s %s", g_be, p->M, p->N, p->K, what, qg_error_name(rc), e.msg);
    return rc;
}

static void check_gemm(const qg_int4_gemm_args *p, const char *what)
{
    const size_t n = p->M * p->N;
    uint16_t *got = malloc(n * 10);
    int32_t *acc = malloc(n * 4);
    float *y32 = malloc(n * 4);
    uint16_t *y16 = malloc(n * 2);
    if (got && acc && y32 && y16 && run_gemm(p, got, what) == 0) {
        const int rc = qg_int4_gemm_packed_ref(p, acc, y32, y16);
        qg_exact_report er;
        QG_CHECK(rc == 0, "reference: %s", qg_error_name(rc));
        QG_CHECK(qg_compare_exact(QG_ELEM_I32, acc, got, n, &er) == 0, "%s gemm acc M %zu N %zu K %zu (%s): %s", g_be, p->M,
                 p->N, p->K, what, er.text);
        QG_CHECK(qg_compare_exact_nan_any(QG_ELEM_F32, y32, got + 2 * n, n, &er) == 0, "%s gemm f32 M %zu N %zu K %zu (%s): %s",
                 g_be, p->M, p->N, p->K, what, er.text);
        QG_CHECK(qg_compare_exact_nan_any(QG_ELEM_F16, y16, got + 4 * n, n, &er) == 0, "%s gemm f16 M %zu N %zu K %zu (%s): %s",
                 g_be, p->M, p->N, p->K, what, er.text);
    }
    free(got), free(acc), free(y32), free(y16);
}

static void test_gemm(void)
{
    /* N = 70 rows of B and K = 8292 (259 whole 32-code blocks and 4 codes): many threads' ranges and a
     * long row with a partial last block */
    static const size_t Ms[] = {1, 3, 17}, Ns[] = {1, 5, 13, 70}, Ks[] = {1, 2, 7, 8, 31, 32, 33, 100, 257, 8292};
    qg_rng r;
    qg_rng_init(&r, 0x6E33);
    int variant = 0;
    for (size_t mi = 0; mi < COUNT(Ms); mi++)
        for (size_t ni = 0; ni < COUNT(Ns); ni++)
            for (size_t ki = 0; ki < COUNT(Ks); ki++, variant++) {
                const size_t M = Ms[mi], N = Ns[ni], K = Ks[ki], rb = qg_int4_packed_row_bytes(K);
                uint8_t *A = malloc(M * rb), *B = malloc(N * rb);
                float sa[17], sb[70], bf[70];
                uint16_t bh[70];
                if (!A || !B) {
                    QG_CHECK(0, "allocation");
                    free(A), free(B);
                    continue;
                }
                pack_rows(&r, M, K, A);
                pack_rows(&r, N, K, B);
                for (size_t i = 0; i < M; i++) sa[i] = qg_rng_uniform(&r, 0.0f, 0.125f);
                for (size_t i = 0; i < N; i++) {
                    sb[i] = qg_rng_uniform(&r, 0.0f, 0.5f);
                    bf[i] = qg_rng_uniform(&r, -4.0f, 4.0f);
                    bh[i] = qg_f32_to_f16(bf[i]);
                }
                if (N > 2) bf[1] = NAN, bh[2] = 0xFC00;
                const int bias = variant % 3; /* none, float32, fp16 */
                qg_int4_gemm_args p = {M, N, K, A, M * rb, B, N * rb, sa, variant % 2 ? M : 1, sb, variant % 4 < 2 ? N : 1,
                                       bias == 0 ? NULL : bias == 1 ? (const void *)bf : (const void *)bh,
                                       bias == 2 ? QG_INT4_F16 : QG_INT4_F32, (variant / 3) % 2};
                check_gemm(&p, "random");
                free(A), free(B);
            }
}

/* ---- threads ---- */

static void test_threads(void)
{
    static const int threads[] = {2, 3, 4};
    qg_int4_test_layout t;
    int rc = qg_int4_layout_make(515, 1024, 64, 1, QG_INT4_GIDX_RANDOM, 7, &t);
    QG_CHECK(rc == 0, "layout");
    if (rc) return;
    const size_t N = 515, K = 1024, B = 3, rb = qg_int4_packed_row_bytes(1023);
    uint16_t *x = malloc(B * K * 2), *a16 = malloc(B * N * 2), *b16 = malloc(B * N * 2);
    float *a32 = malloc(B * N * 4), *b32 = malloc(B * N * 4), *wa = malloc(N * K * 4), *wb = malloc(N * K * 4);
    uint8_t *A = malloc(9 * rb), *Bm = malloc(300 * rb);
    uint16_t *ga = malloc(9 * 300 * 10), *gb = malloc(9 * 300 * 10);
    if (x && a16 && b16 && a32 && b32 && wa && wb && A && Bm && ga && gb) {
        make_x(8, B, K, 9, x);
        qg_rng r;
        qg_rng_init(&r, 9);
        pack_rows(&r, 9, 1023, A);
        pack_rows(&r, 300, 1023, Bm);
        const float sa = 0.25f, sb = 0.5f;
        qg_int4_gemm_args p = {9, 300, 1023, A, 9 * rb, Bm, 300 * rb, &sa, 1, &sb, 1, NULL, QG_INT4_F32, 0};
        decode_call dc = {&t.L};
        qg_err e = {0};
        qg_set_threads(1);
        int ok = run_gemv(&t.L, x, B, 3, a32, a16, "1 thread") == 0 && qg_call_guarded(call_decode, &dc, wa, N * K, 4, &e) == 0 &&
                 run_gemm(&p, ga, "1 thread") == 0;
        QG_CHECK(ok, "%s: 1-thread runs failed: %s", g_be, e.msg);
        if (ok) {
            check_gemv_values(&t.L, x, B, a32, a16, "1 thread");
            for (size_t i = 0; i < COUNT(threads); i++) {
                qg_set_threads(threads[i]);
                if (run_gemv(&t.L, x, B, 3, b32, b16, "threads") == 0)
                    QG_CHECK(memcmp(a32, b32, B * N * 4) == 0 && memcmp(a16, b16, B * N * 2) == 0,
                             "%s gemv: %d threads differ from 1 thread", g_be, threads[i]);
                rc = qg_call_guarded(call_decode, &dc, wb, N * K, 4, &e);
                QG_CHECK(rc == 0 && memcmp(wa, wb, N * K * 4) == 0, "%s decode: %d threads differ: %s", g_be, threads[i], e.msg);
                if (run_gemm(&p, gb, "threads") == 0)
                    QG_CHECK(memcmp(ga, gb, 9 * 300 * 10) == 0, "%s gemm: %d threads differ from 1 thread", g_be, threads[i]);
            }
        }
        qg_set_threads(0);
    } else {
        QG_CHECK(0, "allocation");
    }
    free(x), free(a16), free(b16), free(a32), free(b32), free(wa), free(wb), free(A), free(Bm), free(ga), free(gb);
    qg_int4_layout_free(&t);
}

/* ---- validation: the reference's error, outputs untouched ---- */

static void expect_same_error(const qg_w4a16 *L, const char *what)
{
    float w[64 * 2];
    uint16_t x[64] = {0};
    float y[2];
    memset(w, 0x5A, sizeof w);
    memset(y, 0x5A, sizeof y);
    const int want = qg_w4a16_validate(L);
    QG_CHECK(want != 0, "%s: the layout is valid", what);
    const int gd = g_dec->fn.int4_w4a16_decode(L, w), gg = g_gemv->fn.int4_w4a16_gemv(L, x, 64, 1, y, NULL);
    QG_CHECK(gd == want && gg == want, "%s %s: decode %s, gemv %s, want %s", g_be, what, qg_error_name(gd), qg_error_name(gg),
             qg_error_name(want));
    QG_CHECK(qg_test_untouched(w, sizeof w, 0x5A) && qg_test_untouched(y, sizeof y, 0x5A), "%s %s: output written", g_be, what);
}

static void test_validation(void)
{
    uint32_t qw[2 * 8] = {0};
    uint16_t sc[2 * 2];
    uint8_t z[2 * 2] = {1, 2, 3, 4};
    int32_t gi[64];
    for (int i = 0; i < 4; i++) sc[i] = qg_f32_to_f16(0.5f);
    for (int k = 0; k < 64; k++) gi[k] = k % 2;
    const qg_w4a16 ok = {2, 64, 32, qw, 16, sc, 4, z, 4, gi, 64};
    QG_CHECK(qg_w4a16_validate(&ok) == 0, "valid base layout");
    qg_w4a16 L = ok;
    z[3] = 16;
    expect_same_error(&L, "zero 16");
    z[3] = 4;
    gi[7] = 0;
    expect_same_error(&L, "unbalanced g_idx");
    gi[7] = 5;
    expect_same_error(&L, "g_idx out of range");
    gi[7] = 1;
    sc[2] = 0x7C00;
    expect_same_error(&L, "inf scale");
    sc[2] = 0xB800;
    expect_same_error(&L, "negative scale");
    sc[2] = qg_f32_to_f16(0.5f);
    L.g = 16;
    expect_same_error(&L, "g = 16");
    L = ok;
    L.K = 60;
    expect_same_error(&L, "K = 60");
    L = ok;
    L.scales_len = 3;
    expect_same_error(&L, "scales length");
    L = ok;
    L.qweight = NULL;
    expect_same_error(&L, "NULL qweight");
    uint16_t x[64] = {0};
    float y[2];
    QG_CHECK(g_gemv->fn.int4_w4a16_gemv(&ok, x, 0, 0, y, NULL) == QG_ERR_batch_invalid, "batch 0");
    QG_CHECK(g_gemv->fn.int4_w4a16_gemv(&ok, x, 64, 1, NULL, NULL) == QG_ERR_argument_invalid, "no output");
    QG_CHECK(g_gemv->fn.int4_w4a16_gemv(&ok, x, 56, 1, y, NULL) == QG_ERR_size_mismatch, "x of K - 8 values");

    /* GEMM: padding, scales, shapes. */
    const uint8_t A[2] = {0x21, 0x13}, B[2] = {0x21, 0x03};
    const float s1 = 1.0f, sinf_ = INFINITY, sneg = -1.0f;
    int32_t acc[1];
    memset(acc, 0x5A, sizeof acc);
    qg_int4_gemm_args p = {1, 1, 3, A, 2, B, 2, &s1, 1, &s1, 1, NULL, QG_INT4_F32, 0};
    QG_CHECK(g_gemm->fn.int4_gemm_packed(&p, acc, NULL, NULL) == QG_ERR_int4_bad_padding, "%s: padding nibble", g_be);
    p.A = B;
    p.sb = &sinf_;
    float yf[1];
    QG_CHECK(g_gemm->fn.int4_gemm_packed(&p, acc, yf, NULL) == QG_ERR_int_nonfinite_input, "%s: inf sb", g_be);
    p.sb = &sneg;
    QG_CHECK(g_gemm->fn.int4_gemm_packed(&p, acc, yf, NULL) == QG_ERR_int_scale_invalid, "%s: negative sb", g_be);
    p.sb = &s1;
    uint8_t *kbig = malloc(65536);
    if (kbig) {
        memset(kbig, 0x88, 65536);
        qg_int4_gemm_args pk = {1, 1, QG_INT4_MAX_K + 1, kbig, 65536, kbig, 65536, &s1, 1, &s1, 1, NULL, QG_INT4_F32, 0};
        QG_CHECK(g_gemm->fn.int4_gemm_packed(&pk, acc, NULL, NULL) == QG_ERR_int_k_too_large, "%s: K too large", g_be);
        free(kbig);
    }
    p.A_len = 1;
    QG_CHECK(g_gemm->fn.int4_gemm_packed(&p, acc, NULL, NULL) == QG_ERR_size_mismatch, "%s: A of 1 byte", g_be);
    p.A_len = 2;
    p.K = 0;
    QG_CHECK(g_gemm->fn.int4_gemm_packed(&p, acc, NULL, NULL) == QG_ERR_shape_invalid, "%s: K = 0", g_be);
    QG_CHECK(qg_test_untouched(acc, sizeof acc, 0x5A), "%s: gemm output written on error", g_be);
}

/* ---- full: large shapes ---- */

static void test_full(void)
{
    static const size_t shapes[][3] = {{4096, 4096, 128}, {11008, 4096, 32}};
    static const size_t batches[] = {1, 7, 16};
    for (size_t s = 0; s < COUNT(shapes); s++) {
        qg_int4_test_layout t;
        const size_t N = shapes[s][0], K = shapes[s][1];
        int rc = qg_int4_layout_make(N, K, shapes[s][2], 1, s ? QG_INT4_GIDX_RANDOM : QG_INT4_GIDX_NONE, 500 + s, &t);
        QG_CHECK(rc == 0, "layout");
        if (rc) continue;
        for (size_t bi = 0; bi < COUNT(batches); bi++) {
            const size_t B = batches[bi];
            uint16_t *x = malloc(B * K * 2), *y16 = malloc(B * N * 2), *a16 = malloc(N * 2);
            float *y32 = malloc(B * N * 4), *a32 = malloc(N * 4);
            if (x && y16 && y32 && a16 && a32) {
                make_x(600 + bi, B, K, B > 1 ? B - 1 : B, x);
                if (run_gemv(&t.L, x, B, 3, y32, y16, "full") == 0) {
                    check_gemv_values(&t.L, x, B, y32, y16, "full");
                    if (run_gemv(&t.L, x + (B - 1) * K, 1, 3, a32, a16, "last column alone") == 0)
                        QG_CHECK(memcmp(a32, y32 + (B - 1) * N, N * 4) == 0, "%s gemv: last column of batch %zu differs", g_be, B);
                }
            }
            free(x), free(y16), free(y32), free(a16), free(a32);
        }
        qg_int4_layout_free(&t);
    }
}

int main(int argc, char **argv)
{
    int full = 0, code = 0;
    const int b = qg_test_backend_arg(argc, argv, "test_int4_kernels", &full, &code);
    if (b < 0) return code;
    g_be = argv[1];
    g_dec = qg_registry_find("int4", "w4a16_decode", (qg_backend)b);
    g_gemv = qg_registry_find("int4", "w4a16_gemv", (qg_backend)b);
    g_gemm = qg_registry_find("int4", "gemm_packed", (qg_backend)b);
    if (!g_dec || !g_gemv || !g_gemm || !qg_kernel_built(g_dec) || !qg_kernel_built(g_gemv) || !qg_kernel_built(g_gemm)) {
        printf("skipped: int4 kernels not built for %s\n", g_be);
        return QG_TEST_SKIP;
    }
    if (full) {
        test_full();
    } else {
        test_layouts();
        test_batches();
        test_gemm();
        test_threads();
        test_validation();
        QG_CHECK(g_seen.rounded > 0 && g_seen.worst > 0.0, "rounding never exercised (worst ratio %g)", g_seen.worst);
        QG_CHECK(g_seen.nonfinite > 0, "no NaN/inf output was exercised");
    }
    printf("%s: %zu bounded outputs, %zu rounded, %zu non-finite, worst |err|/bound %.3g\n", g_be, g_seen.outputs,
           g_seen.rounded, g_seen.nonfinite, g_seen.worst);
    return qg_test_end(full ? "full" : argv[1]);
}
