/* simd.rans.<backend> / gpu.rans.cuda / full.rans.<backend>: the optimized rANS kernels of one backend
 * (registry rows "rans" decode, gemv, int8_gemv) against the reference, on containers made on the fly
 * by the reference encoder from matrices drawn from the pinned stream.
 *
 *   decode      bitwise equal to qg_rans_decode_ref (and to the encoded matrix) for random bytes,
 *               low-entropy (Laplacian-like) codes, smooth codes, all-same tiles (0x00, 0x7F, 0x80, 0xFF),
 *               M, K in {1, 255, 256, 257, 512, 1000}, every predictor and auto, checksums on and off;
 *   gemv        bitwise equal to qg_rans_gemv_ref (any NaN matches any NaN) for batch 1..16, with fp16
 *               extremes (+-0, subnormals, 65504, +-inf, NaN) in the activations and special row scales;
 *   int8_gemv   bitwise equal to qg_int8_gemv_ref and to the fused product on the same matrix;
 *   invariance  every column of a batch-B call equals a batch-1 call on that column; f32-only and
 *               f16-only calls equal the combined one; 1, 2, 3 and 7 threads give the same bits;
 *   corruption  flipped bits and words in payloads, moved warp boundaries (truncated / trailing words),
 *               broken initial states, nonzero padding, broken checksums, truncated files, several
 *               failing tiles at once: exactly the reference's error, for every thread count; with
 *               checksums, payload damage is resealed (container CRC recomputed) so that it reaches
 *               the tile rules, and header damage and cut files meet the container checksum first;
 *   arguments   the reference's error for bad arguments, outputs untouched.
 * Every successful kernel call goes through qg_call_guarded (poisoned outputs, canaries, two runs).
 *
 * usage: test_rans_kernels BACKEND [full]   (exit 77 when BACKEND cannot run here)
 * "full" runs 4096 x 4096 and 8192 x 8192 instead.
 */
#include "compare.h"
#include "guard.h"
#include "qg_test.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/threads.h"
#include "qgold/rans.h"
#include "qgold/registry.h"
#include "qgold/rng.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
enum { MAXB = QG_RANS_MAX_BATCH };

static qg_rng g_rng;
static const char *g_be_name;
static const qg_kernel *g_dec, *g_gemv, *g_int8;
static size_t g_outputs, g_nonfinite; /* GEMV outputs compared, and how many were inf or NaN */

/* ---- data ------------------------------------------------------------------------------------------ */

typedef enum { W_RANDOM, W_LOWENT, W_SMOOTH, W_SAME } wkind;
static const char *wkind_name(wkind k)
{
    return k == W_RANDOM ? "random bytes" : k == W_LOWENT ? "low-entropy" : k == W_SMOOTH ? "smooth" : "all-same";
}

/* A Laplacian-like int8: sign times a geometric magnitude (about 4.5 bits of entropy), clamped. */
static uint8_t laplace8(void)
{
    uint32_t m = 0;
    while (m < 127 && qg_rng_int_range(&g_rng, 8) < 6) m++;
    if (qg_rng_int_range(&g_rng, 64) == 0) m = 127 + qg_rng_int_range(&g_rng, 2); /* now and then an extreme */
    const int v = qg_rng_int_range(&g_rng, 2) ? -(int)m : (int)(m > 127 ? 127 : m);
    return (uint8_t)(v < -128 ? -128 : v);
}

static void make_w(wkind k, uint8_t same, size_t M, size_t K, uint8_t *w)
{
    for (size_t r = 0; r < M; r++)
        for (size_t c = 0; c < K; c++) {
            uint8_t v;
            switch (k) {
            case W_RANDOM: v = (uint8_t)(qg_rng_bits32(&g_rng) >> 24); break;
            case W_LOWENT: v = laplace8(); break;
            case W_SMOOTH: v = (uint8_t)((3 * r + 5 * c) / 7 + qg_rng_int_range(&g_rng, 3)); break;
            default: v = same; break;
            }
            w[r * K + c] = v;
        }
}

/* Row scales: ordinary magnitudes, and in some rows +-0, +-inf, NaN, a subnormal, the largest float. */
static void make_scales(size_t M, float *s)
{
    static const uint32_t sp[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x00000001u, 0x7F7FFFFFu};
    for (size_t r = 0; r < M; r++) {
        s[r] = qg_rng_uniform(&g_rng, -0.02f, 0.02f);
        if (qg_rng_int_range(&g_rng, 16) == 0) s[r] = qg_f32_from_bits(sp[qg_rng_int_range(&g_rng, COUNT(sp))]);
    }
}

/* Activations in [-1, 1); with `special` about one in 24 is an fp16 extreme. */
static void make_x(uint16_t *x, size_t n, int special)
{
    static const uint16_t sp[] = {0x0000, 0x8000, 0x0001, 0x83FF, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFE01};
    for (size_t i = 0; i < n; i++) {
        x[i] = qg_f32_to_f16(qg_rng_uniform(&g_rng, -1.0f, 1.0f));
        if (special && qg_rng_int_range(&g_rng, 24) == 0) x[i] = sp[qg_rng_int_range(&g_rng, COUNT(sp))];
    }
}

/* ---- guarded calls ---------------------------------------------------------------------------------- */

typedef struct {
    const uint8_t *buf;
    size_t len, w_len;
} dec_call;

static int call_dec(void *vc, void *out)
{
    const dec_call *c = vc;
    return g_dec->fn.rans_decode(c->buf, c->len, out, c->w_len);
}

/* GEMV output as uint16 elements: y_f32[n] (two each) | y_f16[n]; outs 3 both, 1 f32 only, 2 f16 only. */
typedef struct {
    int int8;
    const uint8_t *buf, *w;
    size_t len;
    const float *scales;
    size_t M, K;
    const uint16_t *x;
    size_t batch;
    int outs;
} gemv_call;

static int call_gemv(void *vc, void *out)
{
    const gemv_call *c = vc;
    const size_t n = c->M * c->batch;
    float *y32;
    uint16_t *y16;
    qg_test_gemv_outs(out, n, c->outs, &y32, &y16);
    if (c->int8) return g_int8->fn.int8_gemv(c->w, c->scales, c->M, c->K, c->x, c->batch, y32, y16);
    return g_gemv->fn.rans_gemv(c->buf, c->len, c->x, c->batch, y32, y16);
}

/* A guarded GEMV (fused, or int8 when int8 is set); y32 (M * batch floats) and y16 get the outputs. */
static int run_gemv(int int8, const uint8_t *buf, size_t len, const uint8_t *w, const float *scales, size_t M, size_t K,
                    const uint16_t *x, size_t batch, int outs, float *y32, uint16_t *y16, const char *what)
{
    const size_t n = M * batch;
    uint16_t *o = malloc(3 * n * sizeof(uint16_t) + 8);
    QG_CHECK(o != NULL, "allocation");
    if (o == NULL) return 1;
    gemv_call c = {int8, buf, w, len, scales, M, K, x, batch, outs};
    qg_err e;
    int rc = qg_call_guarded(call_gemv, &c, o, 3 * n, sizeof(uint16_t), &e);
    QG_CHECK(rc == QG_ERR_ok, "%s %s %zux%zu batch %zu (%s): %s", g_be_name, int8 ? "int8_gemv" : "gemv", M, K, batch, what, e.msg);
    if (rc == QG_ERR_ok) {
        memcpy(y32, o, n * sizeof(float));
        memcpy(y16, o + 2 * n, n * sizeof(uint16_t));
    }
    free(o);
    return rc;
}

static int same_outputs(const float *a32, const uint16_t *a16, const float *b32, const uint16_t *b16, size_t n, qg_exact_report *rep)
{
    if (qg_compare_exact_nan_any(QG_ELEM_F32, a32, b32, n, rep) != QG_ERR_ok) return 0;
    return qg_compare_exact_nan_any(QG_ELEM_F16, a16, b16, n, rep) == QG_ERR_ok;
}

/* ---- one container: decode, fused GEMV, int8 GEMV, invariances -------------------------------------- */

static const size_t k_all_batches[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const size_t k_some_batches[] = {1, 4, 9, 16};
static const size_t k_few_batches[] = {1, 5, 16};
enum { BATCHES_FEW = 0, BATCHES_SOME = 1, BATCHES_ALL = 2 };

static void check_container(const uint8_t *buf, size_t len, const uint8_t *w, const float *scales, size_t M, size_t K, int all_batches,
                            const char *what)
{
    qg_exact_report rep;
    qg_err e;
    /* decode */
    uint8_t *want = malloc(M * K + 1), *got = malloc(M * K + 1);
    QG_CHECK(want && got, "allocation");
    if (want && got) {
        int rr = qg_rans_decode_ref(buf, len, want, M * K);
        QG_CHECK(rr == QG_ERR_ok && (M * K == 0 || memcmp(want, w, M * K) == 0), "reference decode of %s: %s", what, qg_error_name(rr));
        if (M * K > 0) {
            dec_call c = {buf, len, M * K};
            int rc = qg_call_guarded(call_dec, &c, got, M * K, 1, &e);
            QG_CHECK(rc == QG_ERR_ok, "%s decode %zux%zu (%s): %s", g_be_name, M, K, what, e.msg);
            if (rc == QG_ERR_ok)
                QG_CHECK(qg_compare_exact(QG_ELEM_U8, want, got, M * K, &rep) == QG_ERR_ok, "%s decode %zux%zu (%s): row %zu col %zu: %s",
                         g_be_name, M, K, what, rep.index / K, rep.index % K, rep.text);
        } else {
            int rc = g_dec->fn.rans_decode(buf, len, got, 0);
            QG_CHECK(rc == QG_ERR_ok, "%s decode of the empty container %zux%zu: %s", g_be_name, M, K, qg_error_name(rc));
        }
    }
    free(want);
    free(got);
    if (M == 0) return;
    /* GEMV, batch 1..16 */
    const size_t n = M * MAXB;
    uint16_t *x = malloc((K * MAXB + 1) * 2), *r16 = malloc(n * 2), *g16 = malloc(n * 2), *i16 = malloc(n * 2), *b16 = malloc(M * 2);
    float *r32 = malloc(n * 4), *g32 = malloc(n * 4), *i32 = malloc(n * 4), *b32 = malloc(M * 4);
    QG_CHECK(x && r16 && g16 && i16 && b16 && r32 && g32 && i32 && b32, "allocation");
    if (x && r16 && g16 && i16 && b16 && r32 && g32 && i32 && b32) {
        make_x(x, K * MAXB, 0); /* fp16 extremes in every fourth activation column */
        for (size_t b = 3; b < MAXB; b += 4) make_x(x + b * K, K, 1);
        const size_t *bs = all_batches == BATCHES_ALL ? k_all_batches : all_batches == BATCHES_SOME ? k_some_batches : k_few_batches;
        const size_t nb = all_batches == BATCHES_ALL    ? COUNT(k_all_batches)
                          : all_batches == BATCHES_SOME ? COUNT(k_some_batches)
                                                        : COUNT(k_few_batches);
        for (size_t bi = 0; bi < nb; bi++) {
            const size_t B = bs[bi], nn = M * B;
            int rr = qg_rans_gemv_ref(buf, len, x, B, r32, r16);
            QG_CHECK(rr == QG_ERR_ok, "reference gemv (%s): %s", what, qg_error_name(rr));
            if (rr != QG_ERR_ok) continue;
            if (run_gemv(0, buf, len, NULL, NULL, M, K, x, B, 3, g32, g16, what) != 0) continue;
            QG_CHECK(same_outputs(r32, r16, g32, g16, nn, &rep), "%s gemv %zux%zu batch %zu (%s): output %zu (row %zu, column %zu): %s",
                     g_be_name, M, K, B, what, rep.index, rep.index % M, rep.index / M, rep.text);
            g_outputs += nn;
            for (size_t i = 0; i < nn; i++) g_nonfinite += !(r32[i] - r32[i] == 0.0f);
            /* int8 GEMV on the matrix itself: the fused product's bits, and (first and last batch) the
             * reference's own int8 GEMV */
            if (run_gemv(1, NULL, 0, w, scales, M, K, x, B, 3, i32, i16, what) != 0) continue;
            QG_CHECK(same_outputs(g32, g16, i32, i16, nn, &rep), "%s int8_gemv %zux%zu batch %zu (%s): vs the fused product, %s", g_be_name,
                     M, K, B, what, rep.text);
            if (bi == 0 || B == MAXB) {
                rr = qg_int8_gemv_ref(w, scales, M, K, x, B, r32, r16);
                QG_CHECK(rr == QG_ERR_ok, "reference int8 gemv (%s): %s", what, qg_error_name(rr));
                QG_CHECK(same_outputs(r32, r16, i32, i16, nn, &rep), "%s int8_gemv %zux%zu batch %zu (%s): vs reference, %s", g_be_name, M,
                         K, B, what, rep.text);
            }
            /* batch invariance: column b equals a batch-1 call on x_b */
            if (B > 1) {
                const size_t b = qg_rng_int_range(&g_rng, (uint64_t)B);
                if (run_gemv(0, buf, len, NULL, NULL, M, K, x + b * K, 1, 3, b32, b16, "batch 1") == 0)
                    QG_CHECK(memcmp(b32, g32 + b * M, M * 4) == 0 && memcmp(b16, g16 + b * M, M * 2) == 0,
                             "%s gemv %zux%zu (%s): column %zu of batch %zu differs from batch 1", g_be_name, M, K, what, b, B);
                if (run_gemv(1, NULL, 0, w, scales, M, K, x + b * K, 1, 3, b32, b16, "batch 1") == 0)
                    QG_CHECK(memcmp(b32, i32 + b * M, M * 4) == 0 && memcmp(b16, i16 + b * M, M * 2) == 0,
                             "%s int8_gemv %zux%zu (%s): column %zu of batch %zu differs from batch 1", g_be_name, M, K, what, b, B);
            }
            /* one output at a time gives the same bits */
            if (B == 2 || B == 9) {
                for (int outs = 1; outs <= 2; outs++) {
                    if (run_gemv(0, buf, len, NULL, NULL, M, K, x, B, outs, r32, r16, "one output") != 0) continue;
                    QG_CHECK(outs == 1 ? memcmp(r32, g32, nn * 4) == 0 : memcmp(r16, g16, nn * 2) == 0,
                             "%s gemv %zux%zu batch %zu (%s): the %s-only call differs", g_be_name, M, K, B, what, outs == 1 ? "f32" : "f16");
                }
            }
        }
    }
    free(x);
    free(r16);
    free(g16);
    free(i16);
    free(b16);
    free(r32);
    free(g32);
    free(i32);
    free(b32);
}

/* Encodes w with one mode for every tile (0..3, or QG_RANS_AUTO) and checks the container. */
static void encode_and_check(const uint8_t *w, size_t M, size_t K, int mode, int checksums, int all_batches, const char *kind)
{
    float *scales = malloc((M + 1) * sizeof(float));
    const size_t nt = (M + 255) / 256 * ((K + 255) / 256);
    uint8_t *modes = malloc(nt + 1), *buf = NULL;
    size_t len = 0;
    QG_CHECK(scales && modes, "allocation");
    if (scales && modes) {
        make_scales(M, scales);
        memset(modes, mode, nt + 1);
        int rc = qg_rans_encode(w, scales, (uint32_t)M, (uint32_t)K, modes, checksums, &buf, &len);
        QG_CHECK(rc == QG_ERR_ok, "reference encoder %zux%zu: %s", M, K, qg_error_name(rc));
        if (rc == QG_ERR_ok) {
            char what[128];
            static const char *const names[] = {"none", "left", "up", "gradient"};
            snprintf(what, sizeof what, "%s, predictor %s, checksums %s", kind, mode == QG_RANS_AUTO ? "auto" : names[mode],
                     checksums ? "on" : "off");
            check_container(buf, len, w, scales, M, K, all_batches, what);
        }
    }
    free(buf);
    free(scales);
    free(modes);
}

static const size_t k_dims[] = {1, 255, 256, 257, 512, 1000};

static void test_shapes(void)
{
    /* every (M, K): data kind, mode and checksums cycle so that each appears with every size */
    size_t cyc = 0;
    for (size_t mi = 0; mi < COUNT(k_dims); mi++)
        for (size_t ki = 0; ki < COUNT(k_dims); ki++, cyc++) {
            const size_t M = k_dims[mi], K = k_dims[ki];
            uint8_t *w = malloc(M * K);
            QG_CHECK(w != NULL, "allocation");
            if (w == NULL) continue;
            const wkind kind = (wkind)(cyc % 3);
            make_w(kind, 0, M, K, w);
            const int mode = (int)(cyc % 5) == 4 ? QG_RANS_AUTO : (int)(cyc % 5);
            encode_and_check(w, M, K, mode, (int)(cyc / 5 % 2), M * K <= 256 * 257 ? BATCHES_ALL : BATCHES_SOME, wkind_name(kind));
            free(w);
        }
    /* every predictor and auto, checksums on and off, every data kind, on two shapes with edges */
    static const size_t shapes[][2] = {{257, 600}, {300, 255}};
    for (size_t si = 0; si < COUNT(shapes); si++) {
        const size_t M = shapes[si][0], K = shapes[si][1];
        uint8_t *w = malloc(M * K);
        if (w == NULL) continue;
        for (int kind = W_RANDOM; kind <= W_SMOOTH; kind++) {
            make_w((wkind)kind, 0, M, K, w);
            for (int mode = 0; mode <= 4; mode++)
                for (int cs = 0; cs < 2; cs++)
                    encode_and_check(w, M, K, mode == 4 ? QG_RANS_AUTO : mode, cs, BATCHES_FEW, wkind_name((wkind)kind));
        }
        /* all-same tiles (zero words, every state 2^15) and extremes at warp edges */
        static const uint8_t same[] = {0x00, 0x7F, 0x80, 0xFF};
        for (size_t s = 0; s < COUNT(same); s++) {
            make_w(W_SAME, same[s], M, K, w);
            encode_and_check(w, M, K, (int)s, (int)(s & 1), 0, "all-same");
        }
        make_w(W_LOWENT, 0, M, K, w);
        for (size_t r = 0; r < M; r++) {
            if (r % 32 == 31 || r % 32 == 0) w[r * K + (K - 1)] = (uint8_t)(r & 1 ? 0x80 : 0x7F);
            if (r % 32 == 31 && K > 255) w[r * K + 255] = 0x80;
        }
        encode_and_check(w, M, K, QG_RANS_AUTO, 1, 0, "extremes at lane 31/32 and column 255");
        free(w);
    }
    /* empty containers */
    static const size_t empty[][2] = {{0, 0}, {0, 300}, {300, 0}};
    for (size_t i = 0; i < COUNT(empty); i++) encode_and_check(NULL, empty[i][0], empty[i][1], QG_RANS_AUTO, 0, 0, "empty");
}

/* ---- threads ------------------------------------------------------------------------------------------ */

static void test_threads(void)
{
    const size_t M = 1000, K = 1300, B = 3;
    uint8_t *w = malloc(M * K), *buf = NULL, *d[4] = {0};
    float *scales = malloc(M * 4), *y32[4] = {0}, *z32[4] = {0};
    uint16_t *x = malloc(K * B * 2), *y16[4] = {0}, *z16[4] = {0};
    size_t len = 0;
    static const int threads[4] = {1, 2, 3, 7};
    int ok = w && scales && x;
    for (int i = 0; i < 4 && ok; i++) {
        d[i] = malloc(M * K);
        y32[i] = malloc(M * B * 4), z32[i] = malloc(M * B * 4);
        y16[i] = malloc(M * B * 2), z16[i] = malloc(M * B * 2);
        ok = d[i] && y32[i] && z32[i] && y16[i] && z16[i];
    }
    QG_CHECK(ok, "allocation");
    if (ok) {
        make_w(W_LOWENT, 0, M, K, w);
        make_scales(M, scales);
        make_x(x, K * B, 1);
        ok = qg_rans_encode(w, scales, (uint32_t)M, (uint32_t)K, NULL, 1, &buf, &len) == QG_ERR_ok;
        QG_CHECK(ok, "reference encoder");
    }
    for (int i = 0; i < 4 && ok; i++) {
        qg_set_threads(threads[i]);
        qg_err e;
        dec_call c = {buf, len, M * K};
        QG_CHECK(qg_call_guarded(call_dec, &c, d[i], M * K, 1, &e) == QG_ERR_ok, "%s decode, %d threads: %s", g_be_name, threads[i], e.msg);
        run_gemv(0, buf, len, NULL, NULL, M, K, x, B, 3, y32[i], y16[i], "threads");
        run_gemv(1, NULL, 0, w, scales, M, K, x, B, 3, z32[i], z16[i], "threads");
        if (i > 0) {
            QG_CHECK(memcmp(d[0], d[i], M * K) == 0, "%s decode: %d threads differ from 1", g_be_name, threads[i]);
            QG_CHECK(memcmp(y32[0], y32[i], M * B * 4) == 0 && memcmp(y16[0], y16[i], M * B * 2) == 0, "%s gemv: %d threads differ from 1",
                     g_be_name, threads[i]);
            QG_CHECK(memcmp(z32[0], z32[i], M * B * 4) == 0 && memcmp(z16[0], z16[i], M * B * 2) == 0,
                     "%s int8_gemv: %d threads differ from 1", g_be_name, threads[i]);
        }
    }
    qg_set_threads(0);
    for (int i = 0; i < 4; i++) {
        free(d[i]);
        free(y32[i]);
        free(z32[i]);
        free(y16[i]);
        free(z16[i]);
    }
    free(w);
    free(buf);
    free(scales);
    free(x);
}

/* ---- corrupted containers -------------------------------------------------------------------------- */

static uint32_t ld32(const uint8_t *p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24); }
static uint64_t ld64(const uint8_t *p) { return (uint64_t)ld32(p) | ((uint64_t)ld32(p + 4) << 32); }
static void st32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Tile `t`'s payload offset and word count. */
static uint64_t payload_of(const uint8_t *buf, size_t t, uint32_t *nwords)
{
    const uint64_t meta = ld64(buf + 40) + 32 * (uint64_t)t, off = ld64(buf + meta);
    *nwords = ld32(buf + off + 1024 + 28);
    return off;
}

/* The kernel's decode and GEMV errors on a damaged container equal the reference's, with 1, 2, 3 and 7
 * threads; returns the reference's decode error. */
static int check_errors(const uint8_t *buf, size_t len, size_t M, size_t K, const uint16_t *x, const char *what)
{
    uint8_t *w = malloc(M * K + 1);
    float *y = malloc(M * 2 * 4 + 4);
    uint16_t *y16 = malloc(M * 2 * 2 + 2);
    int rr = -1;
    if (w && y && y16) {
        rr = qg_rans_decode_ref(buf, len, w, M * K);
        const int rg = qg_rans_gemv_ref(buf, len, x, 2, y, y16);
        static const int threads[] = {1, 2, 3, 7};
        for (size_t i = 0; i < COUNT(threads); i++) {
            qg_set_threads(threads[i]);
            const int rk = g_dec->fn.rans_decode(buf, len, w, M * K);
            QG_CHECK(rk == rr, "%s decode (%s), %d threads: returned %s, the reference %s", g_be_name, what, threads[i], qg_error_name(rk),
                     qg_error_name(rr));
            const int gk = g_gemv->fn.rans_gemv(buf, len, x, 2, y, y16);
            QG_CHECK(gk == rg, "%s gemv (%s), %d threads: returned %s, the reference %s", g_be_name, what, threads[i], qg_error_name(gk),
                     qg_error_name(rg));
        }
        qg_set_threads(0);
    }
    free(w);
    free(y);
    free(y16);
    return rr;
}

static void test_corrupt(void)
{
    const size_t M = 600, K = 520; /* 3 x 3 tiles, the last row and column partial */
    uint8_t *w = malloc(M * K), *good[2] = {NULL, NULL}, *bad = NULL;
    float *scales = malloc(M * 4);
    uint16_t *x = malloc(K * 2 * 2);
    size_t len[2] = {0, 0};
    QG_CHECK(w && scales && x, "allocation");
    if (!(w && scales && x)) goto out;
    make_w(W_LOWENT, 0, M, K, w);
    make_scales(M, scales);
    make_x(x, K * 2, 0);
    for (int cs = 0; cs < 2; cs++)
        QG_CHECK(qg_rans_encode(w, scales, (uint32_t)M, (uint32_t)K, NULL, cs, &good[cs], &len[cs]) == QG_ERR_ok, "encode");
    if (!good[0] || !good[1]) goto out;
    bad = malloc(len[0] > len[1] ? len[0] : len[1]);
    if (bad == NULL) goto out;
    size_t seen[16] = {0}; /* how often each error came out, so the corpus provably reaches them */
    const size_t nt = 9;
    for (int cs = 0; cs < 2; cs++) {
        const uint8_t *g = good[cs];
        const size_t L = len[cs];
        char what[160];
        for (int trial = 0; trial < 96; trial++) {
            memcpy(bad, g, L);
            const size_t t = qg_rng_int_range(&g_rng, nt);
            uint32_t nw;
            const uint64_t off = payload_of(bad, t, &nw);
            const int kind = trial % 8;
            size_t blen = L;
            switch (kind) {
            case 0: /* one bit of one word */
            case 1: {
                const uint32_t i = qg_rng_int_range(&g_rng, nw);
                bad[off + 1056 + 2 * i + qg_rng_int_range(&g_rng, 2)] ^= (uint8_t)(1u << qg_rng_int_range(&g_rng, 8));
                snprintf(what, sizeof what, "checksums %d, tile %zu, bit flip in word %u", cs, t, i);
                break;
            }
            case 2: { /* a whole word replaced */
                const uint32_t i = qg_rng_int_range(&g_rng, nw);
                bad[off + 1056 + 2 * i] = (uint8_t)qg_rng_bits32(&g_rng);
                bad[off + 1056 + 2 * i + 1] = (uint8_t)qg_rng_bits32(&g_rng);
                snprintf(what, sizeof what, "checksums %d, tile %zu, word %u replaced", cs, t, i);
                break;
            }
            case 3: { /* a warp boundary moved: one warp short (truncated), the next with a word too many */
                const uint32_t wp = qg_rng_int_range(&g_rng, 7);
                uint8_t *we = bad + off + 1024 + 4 * wp;
                const uint32_t prev = wp > 0 ? ld32(we - 4) : 0, e = ld32(we), nx = ld32(we + 4);
                const int down = qg_rng_int_range(&g_rng, 2);
                if (down && e > prev) st32(we, e - 1);
                else if (!down && e < nx) st32(we, e + 1);
                snprintf(what, sizeof what, "checksums %d, tile %zu, warp_end[%u] %s", cs, t, wp, down ? "- 1" : "+ 1");
                break;
            }
            case 4: { /* an initial state changed, inside or outside [2^15, 2^31) */
                const uint32_t l = qg_rng_int_range(&g_rng, 256);
                const uint32_t v = qg_rng_int_range(&g_rng, 4) == 0 ? qg_rng_bits32(&g_rng)
                                                                    : (ld32(bad + off + 4 * l) ^ (1u << qg_rng_int_range(&g_rng, 15)));
                st32(bad + off + 4 * l, v);
                snprintf(what, sizeof what, "checksums %d, tile %zu, init_state[%u] = 0x%08x", cs, t, l, v);
                break;
            }
            case 5: { /* checksum field, or nonzero payload padding */
                const uint64_t meta = ld64(bad + 40) + 32 * (uint64_t)t;
                const uint64_t size = ld64(bad + meta + 8), end = 1056 + 2 * (uint64_t)nw;
                if (cs && qg_rng_int_range(&g_rng, 2)) {
                    bad[meta + 16 + qg_rng_int_range(&g_rng, 4)] ^= 0x10;
                    snprintf(what, sizeof what, "checksums %d, tile %zu, checksum field", cs, t);
                } else if (end < size) {
                    bad[off + end + qg_rng_int_range(&g_rng, (uint32_t)(size - end))] = 0x01;
                    snprintf(what, sizeof what, "checksums %d, tile %zu, nonzero padding", cs, t);
                } else {
                    bad[off + 1056] ^= 0x80;
                    snprintf(what, sizeof what, "checksums %d, tile %zu, first word", cs, t);
                }
                break;
            }
            case 6: { /* several tiles broken in different ways: the lowest tile's error wins */
                for (size_t k = 0; k < 3; k++) {
                    const size_t tt = qg_rng_int_range(&g_rng, nt);
                    uint32_t nw2;
                    const uint64_t o2 = payload_of(bad, tt, &nw2);
                    if (k == 0 && nw2 > 0) bad[o2 + 1056 + 2 * qg_rng_int_range(&g_rng, nw2)] ^= 0x04;
                    else if (k == 1) st32(bad + o2 + 1024, ld32(bad + o2 + 1024) + (ld32(bad + o2 + 1024) < ld32(bad + o2 + 1028) ? 1 : 0));
                    else st32(bad + o2 + 4 * qg_rng_int_range(&g_rng, 256), QG_RANS_L + 1);
                }
                snprintf(what, sizeof what, "checksums %d, three tiles damaged", cs);
                break;
            }
            default: { /* the file cut short or one byte of the header/table/metadata changed */
                if (qg_rng_int_range(&g_rng, 2)) {
                    blen = L - 1 - qg_rng_int_range(&g_rng, 64);
                    snprintf(what, sizeof what, "checksums %d, file cut to %zu bytes", cs, blen);
                } else { /* the 64-byte header itself half of the time, else anywhere up to the scales */
                    const uint32_t span = qg_rng_int_range(&g_rng, 2) ? 64u : (uint32_t)(576 + 32 * nt);
                    const uint32_t at = qg_rng_int_range(&g_rng, span);
                    bad[at] ^= (uint8_t)(1u << qg_rng_int_range(&g_rng, 8));
                    snprintf(what, sizeof what, "checksums %d, header byte %u flipped", cs, at);
                }
                break;
            }
            }
            /* Payload damage of a checksummed container, resealed, reaches the kernels' own tile checks;
             * left as is, every such file stops at the container checksum in qg_rans_check. */
            if (cs && kind != 7) (void)qg_rans_seal(bad, blen);
            const int rr = check_errors(bad, blen, M, K, x, what);
            if (rr >= 400 && rr < 416) seen[rr - 400]++;
        }
    }
    /* byte-swapped magic */
    memcpy(bad, good[0], len[0]);
    memcpy(bad, "SNAR", 4);
    QG_CHECK(check_errors(bad, len[0], M, K, x, "magic SNAR") == QG_ERR_rans_bad_magic, "SNAR is not rans_bad_magic");
    /* the corpus reached every decode-time error (and the structural ones) */
    static const int need[] = {QG_ERR_rans_bad_header,       QG_ERR_rans_bad_tile_meta,       QG_ERR_rans_bad_state,
                               QG_ERR_rans_truncated,        QG_ERR_rans_trailing_data,       QG_ERR_rans_corrupt,
                               QG_ERR_rans_checksum,         QG_ERR_rans_container_checksum, QG_ERR_rans_container_truncated};
    printf("corruption corpus (reference decode errors):");
    for (int i = 0; i < 16; i++)
        if (seen[i]) printf(" %s %zu", qg_error_name(400 + i), seen[i]);
    printf("\n");
    for (size_t i = 0; i < COUNT(need); i++)
        QG_CHECK(seen[need[i] - 400] > 0, "the corruption corpus never produced %s", qg_error_name(need[i]));
out:
    free(w);
    free(scales);
    free(x);
    free(good[0]);
    free(good[1]);
    free(bad);
}

/* ---- arguments ---------------------------------------------------------------------------------------- */

static void test_arguments(void)
{
    const size_t M = 40, K = 300;
    static uint8_t w[40 * 300], out[40 * 300];
    static float scales[40], y[40 * 17];
    static uint16_t x[300 * 17], y16[40 * 17];
    make_w(W_LOWENT, 0, M, K, w);
    make_scales(M, scales);
    make_x(x, K * 17, 0);
    uint8_t *buf = NULL;
    size_t len = 0;
    QG_CHECK(qg_rans_encode(w, scales, M, K, NULL, 1, &buf, &len) == QG_ERR_ok, "encode");
    if (buf == NULL) return;
    typedef struct {
        const uint8_t *buf;
        size_t len, w_len, batch;
        int null_w, null_x, null_y, null_y16, null_scales;
        const char *what;
    } acase;
    const acase cases[] = {
        {buf, len, M * K, 1, 0, 0, 0, 0, 0, "valid"},
        {buf, len, M * K, 16, 0, 0, 1, 0, 0, "valid, f16 output only"},
        {buf, len, M * K, 7, 0, 0, 0, 1, 0, "valid, f32 output only"},
        {NULL, len, M * K, 1, 0, 0, 0, 0, 0, "NULL container"},
        {NULL, 0, M * K, 1, 0, 0, 0, 0, 0, "NULL container of length 0"},
        {buf, 3, M * K, 1, 0, 0, 0, 0, 0, "3 bytes"},
        {buf, 63, M * K, 1, 0, 0, 0, 0, 0, "63 bytes"},
        {buf, len + 16, M * K, 1, 0, 0, 0, 0, 0, "16 bytes too long"},
        {buf, len, M * K - 1, 1, 0, 0, 0, 0, 0, "w_len one short"},
        {buf, len, M * K + 1, 1, 0, 0, 0, 0, 0, "w_len one too many"},
        {buf, len, M * K, 1, 1, 0, 0, 0, 0, "NULL weights"},
        {buf, len, M * K, 1, 0, 0, 0, 0, 1, "NULL scales"},
        {buf, len, M * K, 1, 0, 1, 0, 0, 0, "NULL activations"},
        {buf, len, M * K, 1, 0, 0, 1, 1, 0, "NULL outputs"},
        {buf, len, M * K, 0, 0, 0, 0, 0, 0, "batch 0"},
        {buf, len, M * K, 17, 0, 0, 0, 0, 0, "batch 17"},
        {NULL, 0, M * K, 17, 0, 1, 1, 1, 0, "everything wrong"},
    };
    for (size_t i = 0; i < COUNT(cases); i++) {
        const acase *c = &cases[i];
        uint8_t *wo = c->null_w ? NULL : out;
        const uint8_t *wi = c->null_w ? NULL : w;
        const uint16_t *xi = c->null_x ? NULL : x;
        const float *si = c->null_scales ? NULL : scales;
        float *yo = c->null_y ? NULL : y;
        uint16_t *yo16 = c->null_y16 ? NULL : y16;
        memset(out, 0x5C, sizeof out);
        int rr = qg_rans_decode_ref(c->buf, c->len, wo, c->w_len);
        memset(out, 0x5C, sizeof out);
        int rk = g_dec->fn.rans_decode(c->buf, c->len, wo, c->w_len);
        QG_CHECK(rk == rr, "%s decode (%s): returned %s, the reference %s", g_be_name, c->what, qg_error_name(rk), qg_error_name(rr));
        if (rr != QG_ERR_ok) QG_CHECK(qg_test_untouched(out, sizeof out, 0x5C), "%s decode (%s): output written on error", g_be_name, c->what);
        memset(y, 0x5C, sizeof y);
        memset(y16, 0x5C, sizeof y16);
        rr = qg_rans_gemv_ref(c->buf, c->len, xi, c->batch, yo, yo16);
        memset(y, 0x5C, sizeof y);
        memset(y16, 0x5C, sizeof y16);
        rk = g_gemv->fn.rans_gemv(c->buf, c->len, xi, c->batch, yo, yo16);
        QG_CHECK(rk == rr, "%s gemv (%s): returned %s, the reference %s", g_be_name, c->what, qg_error_name(rk), qg_error_name(rr));
        if (rr != QG_ERR_ok)
            QG_CHECK(qg_test_untouched(y, sizeof y, 0x5C) && qg_test_untouched(y16, sizeof y16, 0x5C), "%s gemv (%s): output written on error", g_be_name, c->what);
        memset(y, 0x5C, sizeof y);
        memset(y16, 0x5C, sizeof y16);
        rr = qg_int8_gemv_ref(wi, si, M, K, xi, c->batch, yo, yo16);
        memset(y, 0x5C, sizeof y);
        memset(y16, 0x5C, sizeof y16);
        rk = g_int8->fn.int8_gemv(wi, si, M, K, xi, c->batch, yo, yo16);
        QG_CHECK(rk == rr, "%s int8_gemv (%s): returned %s, the reference %s", g_be_name, c->what, qg_error_name(rk), qg_error_name(rr));
        if (rr != QG_ERR_ok)
            QG_CHECK(qg_test_untouched(y, sizeof y, 0x5C) && qg_test_untouched(y16, sizeof y16, 0x5C), "%s int8_gemv (%s): output written on error", g_be_name,
                     c->what);
    }
    /* int8 GEMV with an empty reduction: y = 0 * scale */
    {
        float r32[40], g32[40];
        uint16_t r16[40], g16[40];
        const int rr = qg_int8_gemv_ref(w, scales, M, 0, x, 1, r32, r16), rk = g_int8->fn.int8_gemv(w, scales, M, 0, x, 1, g32, g16);
        qg_exact_report rep;
        QG_CHECK(rk == rr && (rr != QG_ERR_ok || same_outputs(r32, r16, g32, g16, M, &rep)), "%s int8_gemv with K = 0", g_be_name);
    }
    free(buf);
}

/* ---- large shapes (label full) ------------------------------------------------------------------------ */

static void test_full(void)
{
    static const size_t dims[] = {4096, 8192};
    for (size_t i = 0; i < COUNT(dims); i++) {
        const size_t M = dims[i], K = dims[i];
        uint8_t *w = malloc(M * K);
        QG_CHECK(w != NULL, "allocation");
        if (w == NULL) continue;
        make_w(W_LOWENT, 0, M, K, w);
        encode_and_check(w, M, K, QG_RANS_AUTO, i == 0, BATCHES_FEW, "large, low-entropy");
        if (i == 0) { /* one thread gives the same bits as all of them */
            float *scales = malloc(M * 4), *a32 = malloc(M * 4), *b32 = malloc(M * 4);
            uint16_t *x = malloc(K * 2), *a16 = malloc(M * 2), *b16 = malloc(M * 2);
            uint8_t *buf = NULL;
            size_t len = 0;
            if (scales && a32 && b32 && x && a16 && b16) {
                make_scales(M, scales);
                make_x(x, K, 1);
                if (qg_rans_encode(w, scales, (uint32_t)M, (uint32_t)K, NULL, 0, &buf, &len) == QG_ERR_ok &&
                    run_gemv(0, buf, len, NULL, NULL, M, K, x, 1, 3, a32, a16, "large") == 0) {
                    qg_set_threads(1);
                    if (run_gemv(0, buf, len, NULL, NULL, M, K, x, 1, 3, b32, b16, "large, 1 thread") == 0)
                        QG_CHECK(memcmp(a32, b32, M * 4) == 0 && memcmp(a16, b16, M * 2) == 0, "%s gemv %zux%zu: 1 thread differs from %d",
                                 g_be_name, M, K, qg_threads());
                    qg_set_threads(0);
                }
            }
            free(scales);
            free(a32);
            free(b32);
            free(x);
            free(a16);
            free(b16);
            free(buf);
        }
        free(w);
    }
}

int main(int argc, char **argv)
{
    int full = 0, code = 0;
    const int b = qg_test_backend_arg(argc, argv, "test_rans_kernels", &full, &code);
    if (b < 0) return code;
    char why[200];
    g_be_name = argv[1];
    g_dec = qg_registry_find("rans", "decode", (qg_backend)b);
    g_gemv = qg_registry_find("rans", "gemv", (qg_backend)b);
    g_int8 = qg_registry_find("rans", "int8_gemv", (qg_backend)b);
    QG_CHECK(g_dec && qg_kernel_available(g_dec, why, sizeof why), "rans decode %s: %s", argv[1], g_dec ? why : "no row");
    QG_CHECK(g_gemv && qg_kernel_available(g_gemv, why, sizeof why), "rans gemv %s: %s", argv[1], g_gemv ? why : "no row");
    QG_CHECK(g_int8 && qg_kernel_available(g_int8, why, sizeof why), "rans int8_gemv %s: %s", argv[1], g_int8 ? why : "no row");
    if (qg_test_failures) return qg_test_end(argv[1]);
    qg_rng_init(&g_rng, full ? 0x52414E53F011u : 0x52414E53u);
    if (full) {
        test_full();
    } else {
        test_arguments();
        test_shapes();
        test_threads();
        test_corrupt();
        printf("gemv outputs compared: %zu, of them inf or NaN: %zu\n", g_outputs, g_nonfinite);
        QG_CHECK(g_nonfinite > 0 && g_nonfinite < g_outputs, "the fp16 extremes never (or always) made an inf/NaN output");
    }
    return qg_test_end(full ? "full" : argv[1]);
}
