/* gpu.int8_extra.cuda: every INT8 CUDA path against the reference (qgold/intq.h), on shapes drawn from the
 * pinned random stream.
 *   quantize: per tensor / row / group, float32 and fp16 sources, float32 and fp16 scales; blocks of
 *     the warp path (<= 512 elements), the CTA path (<= 65536) and the two-pass path (longer), aligned
 *     and odd lengths; round-half-even ties (a block with amax 127, so s = 1, and values k + 0.5), zero
 *     blocks, fp16 scales that underflow: codes and scales compared bit for bit. NaN / inf input and
 *     fp16 scale overflow: the reference's error, outputs untouched.
 *   dequant: float32 and fp16 outputs, bit for bit.
 *   w8a8: M in {1, 2, 13, 16, 17, 64, 129, 300, 1000, 4096} with odd and aligned N, K (dp4a and
 *     tensor-core paths, 16-byte and byte-wise loads, both CTA tilings, the TMA kernel with several
 *     tiles per CTA), K = 131071 at M = N = 1 with the extreme
 *     accumulator (-128 * -128 everywhere), per-tensor and per-row scales, bias none / float32 / fp16,
 *     ReLU on and off: int32 sums, float32 and fp16 outputs compared with memcmp (a case with a NaN and an
 *     inf in the bias uses the NaN-any rule of the spec); K = 131072 is int_k_too_large.
 *   w8a16: batch 1..17, float32 and fp16 scales: each output within the registry row's bound against a
 *     float64 sum computed here; every column of a batch-16 call equals its own batch-1 call bitwise
 *     (batch invariance).
 * Every kernel call goes through qg_call_guarded (poisoned outputs, canaries, two runs: full write, no
 * overrun, run-to-run determinism). Exit 77 without a GPU (1 under QG_REQUIRE_GPU=1).
 */
#include "compare.h"
#include "guard.h"
#include "qg_test.h"
#include "qgold/cuda.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/intq.h"
#include "qgold/kernels_int8.h"
#include "qgold/registry.h"
#include "qgold/rng.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static qg_rng g_rng;

static void *xmalloc(size_t n)
{
    void *p = malloc(n > 0 ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static int8_t rand_i8(void) { return (int8_t)((int)qg_rng_int_range(&g_rng, 256) - 128); }

static float fbits(uint32_t b) { return qg_f32_from_bits(b); }

/* ---------------------------------------------------------------------------------------------- */
/* quantize / dequant                                                                             */

typedef struct {
    const qg_int8_qshape *s;
    const void *x;
    qg_int8_ftype src;
} quant_ctx;

static int quant_call(void *vc, void *out)
{
    quant_ctx *c = vc;
    const size_t n = c->s->rows * c->s->cols;
    return qg_int8_quantize_cuda(c->s, c->x, c->src, (int8_t *)out, (unsigned char *)out + n);
}

typedef struct {
    const qg_int8_qshape *s;
    const int8_t *q;
    const void *scales;
} deq_ctx;

static int deq_call(void *vc, void *out)
{
    deq_ctx *c = vc;
    const size_t n = c->s->rows * c->s->cols;
    return qg_int8_dequant_cuda(c->s, c->q, c->scales, (float *)out, (uint16_t *)((unsigned char *)out + 4 * n));
}

/* Fills x (n values of src) with block-varying magnitudes; `special` adds ties, zero blocks and tiny
 * blocks where the block geometry allows. */
static void fill_quant_input(void *x, qg_int8_ftype src, size_t len, size_t count)
{
    for (size_t b = 0; b < count; b++) {
        const int kind = (int)qg_rng_int_range(&g_rng, 8);
        const float mag = kind == 0 ? 0.0f : kind == 1 ? 1e-6f : kind == 2 ? 127.0f : ldexpf(1.0f, (int)qg_rng_int_range(&g_rng, 20) - 10);
        for (size_t i = 0; i < len; i++) {
            float v;
            if (kind == 2) /* s = 127 / 127 = 1: halves are exact ties, rounded to even */
                v = i == 0 ? 127.0f : (float)((int)qg_rng_int_range(&g_rng, 254) - 127) + (qg_rng_int_range(&g_rng, 2) ? 0.5f : 0.0f);
            else
                v = qg_rng_uniform(&g_rng, -mag, mag);
            if (src == QG_INT8_F16)
                ((uint16_t *)x)[b * len + i] = qg_f32_to_f16(v);
            else
                ((float *)x)[b * len + i] = v;
        }
    }
}

static void geometry(const qg_int8_qshape *s, size_t *len, size_t *count)
{
    *count = qg_int8_num_scales(s); /* 0 for a shape the reference refuses */
    *len = *count ? s->rows * s->cols / *count : 0;
}

static void test_quant_case(size_t rows, size_t cols, qg_int8_gran gran, size_t group, qg_int8_ftype src, qg_int8_ftype st)
{
    qg_int8_qshape s = {rows, cols, gran, group, st};
    char what[160];
    snprintf(what, sizeof what, "%zux%zu gran %d group %zu src %s scale %s", rows, cols, (int)gran, group, src ? "f16" : "f32",
             st ? "f16" : "f32");
    size_t len, count;
    geometry(&s, &len, &count);
    QG_CHECK(count > 0, "%s: a shape the reference refuses", what);
    if (count == 0) return;
    const size_t n = rows * cols, ssz = st == QG_INT8_F16 ? 2 : 4, xsz = src == QG_INT8_F16 ? 2 : 4;
    void *x = xmalloc(n * xsz);
    fill_quant_input(x, src, len, count);
    int8_t *qr = xmalloc(n);
    void *sr = xmalloc(count * ssz);
    const int rr = qg_int8_quantize_ref(&s, x, src, qr, sr);
    unsigned char *out = xmalloc(n + count * ssz);
    quant_ctx c = {&s, x, src};
    qg_err e;
    const int rc = qg_call_guarded(quant_call, &c, out, n + count * ssz, 1, &e);
    QG_CHECK(rc == rr, "quantize %s: cuda %s, reference %s (%s)", what, qg_error_name(rc), qg_error_name(rr), e.msg);
    if (rc == QG_ERR_ok && rr == QG_ERR_ok) {
        qg_exact_report rep;
        QG_CHECK(memcmp(out, qr, n) == 0, "quantize %s: codes differ", what);
        QG_CHECK(qg_compare_exact(st == QG_INT8_F16 ? QG_ELEM_F16 : QG_ELEM_F32, sr, out + n, count, &rep) == 0,
                 "quantize %s: scales: %s", what, rep.text);
        /* dequantize what was produced: float32 and fp16 outputs */
        float *y32r = xmalloc(n * 4);
        uint16_t *y16r = xmalloc(n * 2);
        QG_CHECK(qg_int8_dequant_ref(&s, qr, sr, y32r, y16r) == QG_ERR_ok, "dequant ref %s", what);
        unsigned char *dout = xmalloc(n * 6);
        deq_ctx d = {&s, qr, sr};
        const int dr = qg_call_guarded(deq_call, &d, dout, n * 6, 1, &e);
        QG_CHECK(dr == QG_ERR_ok, "dequant %s: %s (%s)", what, qg_error_name(dr), e.msg);
        if (dr == QG_ERR_ok) {
            QG_CHECK(memcmp(dout, y32r, n * 4) == 0, "dequant %s: float32 outputs differ", what);
            QG_CHECK(memcmp(dout + n * 4, y16r, n * 2) == 0, "dequant %s: fp16 outputs differ", what);
        }
        free(y32r), free(y16r), free(dout);
    }
    free(x), free(qr), free(sr), free(out);
}

/* Value errors: the reference's code and untouched outputs. */
static void test_quant_errors(void)
{
    const size_t rows = 3, cols = 70000; /* per tensor: the two-pass path; per row: the CTA path */
    const size_t n = rows * cols;
    float *x = xmalloc(n * 4);
    int8_t *q = xmalloc(n);
    float sc[3];
    for (int kind = 0; kind < 3; kind++) {
        for (int g = 0; g < 2; g++) {
            for (size_t i = 0; i < n; i++) x[i] = qg_rng_uniform(&g_rng, -1.0f, 1.0f);
            qg_int8_ftype st = QG_INT8_F32;
            if (kind == 0) x[n - 5] = fbits(0x7FC00000u);                   /* NaN */
            if (kind == 1) x[cols + 7] = -fbits(0x7F800000u);               /* -inf */
            if (kind == 2) x[2 * cols + 1] = 1e10f, st = QG_INT8_F16;      /* fp16 scale = inf */
            qg_int8_qshape s = {rows, cols, g ? QG_INT8_PER_ROW : QG_INT8_PER_TENSOR, 0, st};
            memset(q, 0x77, n);
            memset(sc, 0x77, sizeof sc);
            const int rr = qg_int8_quantize_ref(&s, x, QG_INT8_F32, q, sc);
            const int rc = qg_int8_quantize_cuda(&s, x, QG_INT8_F32, q, sc);
            QG_CHECK(rr != QG_ERR_ok && rc == rr, "quantize error kind %d gran %d: cuda %s, reference %s", kind, g, qg_error_name(rc),
                     qg_error_name(rr));
            QG_CHECK(qg_test_untouched(q, n, 0x77) && qg_test_untouched(sc, sizeof sc, 0x77), "quantize error kind %d: outputs written",
                     kind);
        }
    }
    /* argument checks shared with the reference */
    qg_int8_qshape bad = {4, 10, QG_INT8_PER_GROUP, 3, QG_INT8_F32};
    QG_CHECK(qg_int8_quantize_cuda(&bad, x, QG_INT8_F32, q, sc) == QG_ERR_int_group_invalid, "group 3 of 10 accepted");
    qg_int8_qshape ok = {4, 10, QG_INT8_PER_ROW, 0, QG_INT8_F32};
    QG_CHECK(qg_int8_quantize_cuda(&ok, x, QG_INT8_F32, q, NULL) == QG_ERR_int_scale_invalid, "NULL scales accepted");
    const float neg = -1.0f;
    qg_int8_qshape one = {1, 10, QG_INT8_PER_TENSOR, 0, QG_INT8_F32};
    float y[10];
    QG_CHECK(qg_int8_dequant_cuda(&one, q, &neg, y, NULL) == QG_ERR_int_scale_invalid, "negative dequant scale accepted");
    free(x), free(q);
}

static void test_quantize(void)
{
    static const qg_int8_ftype types[2] = {QG_INT8_F32, QG_INT8_F16};
    for (int si = 0; si < 2; si++)
        for (int ti = 0; ti < 2; ti++) {
            const qg_int8_ftype src = types[si], st = types[ti];
            test_quant_case(37, 13, QG_INT8_PER_ROW, 0, src, st);       /* warp path, odd */
            test_quant_case(64, 512, QG_INT8_PER_ROW, 0, src, st);      /* warp path, vector loads */
            test_quant_case(17, 4096, QG_INT8_PER_ROW, 0, src, st);     /* CTA path, vector loads */
            test_quant_case(5, 1001, QG_INT8_PER_ROW, 0, src, st);      /* CTA path, odd */
            test_quant_case(3, 70001, QG_INT8_PER_ROW, 0, src, st);     /* two-pass, odd */
            test_quant_case(2, 131072, QG_INT8_PER_ROW, 0, src, st);    /* two-pass, vector loads */
            test_quant_case(257, 400, QG_INT8_PER_TENSOR, 0, src, st);  /* two-pass over the tensor */
            test_quant_case(13, 13, QG_INT8_PER_TENSOR, 0, src, st);    /* one small block */
            test_quant_case(33, 256, QG_INT8_PER_GROUP, 32, src, st);   /* groups */
            test_quant_case(9, 192, QG_INT8_PER_GROUP, 64, src, st);    /* groups of 64 */
            test_quant_case(4, 4096, QG_INT8_PER_GROUP, 128, src, st);  /* the largest group */
        }
    test_quant_errors();
}

/* ---------------------------------------------------------------------------------------------- */
/* w8a8                                                                                           */

typedef struct {
    const qg_int8_w8a8_args *p;
    int scaled;
} w8a8_ctx;

/* Guarded output: acc (M N int32) | y32 (M N float) | y16 (M N fp16). */
static int w8a8_call(void *vc, void *out)
{
    w8a8_ctx *c = vc;
    const size_t mn = c->p->M * c->p->N;
    unsigned char *o = out;
    if (!c->scaled) return qg_int8_w8a8_cuda(c->p, (int32_t *)o, NULL, NULL);
    return qg_int8_w8a8_cuda(c->p, (int32_t *)o, (float *)(o + 4 * mn), (uint16_t *)(o + 8 * mn));
}

static void test_w8a8_case(size_t M, size_t N, size_t K, int extreme, int per_row, int bias_kind, int relu, int nan_bias)
{
    char what[160];
    snprintf(what, sizeof what, "M %zu N %zu K %zu per_row %d bias %d relu %d%s", M, N, K, per_row, bias_kind, relu,
             nan_bias ? " nan-bias" : "");
    int8_t *A = xmalloc(M * K), *B = xmalloc(N * K);
    for (size_t i = 0; i < M * K; i++) A[i] = extreme ? -128 : rand_i8();
    for (size_t i = 0; i < N * K; i++) B[i] = extreme ? -128 : rand_i8();
    const size_t sal = per_row ? M : 1, sbl = per_row ? N : 1;
    float *sa = xmalloc(sal * 4), *sb = xmalloc(sbl * 4);
    for (size_t i = 0; i < sal; i++) sa[i] = ldexpf(qg_rng_uniform(&g_rng, 0.5f, 1.0f), -(int)qg_rng_int_range(&g_rng, 12));
    for (size_t i = 0; i < sbl; i++) sb[i] = ldexpf(qg_rng_uniform(&g_rng, 0.5f, 1.0f), -(int)qg_rng_int_range(&g_rng, 12));
    void *bias = NULL;
    if (bias_kind == 1) {
        float *b = xmalloc(N * 4);
        for (size_t i = 0; i < N; i++) b[i] = qg_rng_uniform(&g_rng, -64.0f, 64.0f);
        if (nan_bias) b[0] = fbits(0x7FC00000u), b[N - 1] = -fbits(0x7F800000u);
        bias = b;
    } else if (bias_kind == 2) {
        uint16_t *b = xmalloc(N * 2);
        for (size_t i = 0; i < N; i++) b[i] = qg_f32_to_f16(qg_rng_uniform(&g_rng, -64.0f, 64.0f));
        if (nan_bias) b[0] = 0x7E00u, b[N - 1] = 0xFC00u;
        bias = b;
    }
    qg_int8_w8a8_args p = {M, N, K, A, B, sa, sal, sb, sbl, bias, bias_kind == 2 ? QG_INT8_F16 : QG_INT8_F32, relu};
    const size_t mn = M * N;
    int32_t *acc = xmalloc(mn * 4);
    float *y32 = xmalloc(mn * 4);
    uint16_t *y16 = xmalloc(mn * 2);
    QG_CHECK(qg_int8_w8a8_ref(&p, acc, y32, y16) == QG_ERR_ok, "w8a8 ref %s", what);
    unsigned char *out = xmalloc(mn * 10);
    w8a8_ctx c = {&p, 1};
    qg_err e;
    int rc = qg_call_guarded(w8a8_call, &c, out, mn * 10, 1, &e);
    QG_CHECK(rc == QG_ERR_ok, "w8a8 %s: %s (%s)", what, qg_error_name(rc), e.msg);
    if (rc == QG_ERR_ok) {
        QG_CHECK(memcmp(out, acc, mn * 4) == 0, "w8a8 %s: int32 sums differ", what);
        if (!nan_bias) {
            QG_CHECK(memcmp(out + 4 * mn, y32, mn * 4) == 0, "w8a8 %s: float32 outputs differ", what);
            QG_CHECK(memcmp(out + 8 * mn, y16, mn * 2) == 0, "w8a8 %s: fp16 outputs differ", what);
        } else {
            qg_exact_report r;
            QG_CHECK(qg_compare_exact_nan_any(QG_ELEM_F32, y32, out + 4 * mn, mn, &r) == 0, "w8a8 %s: float32: %s", what, r.text);
            QG_CHECK(qg_compare_exact_nan_any(QG_ELEM_F16, y16, out + 8 * mn, mn, &r) == 0, "w8a8 %s: fp16: %s", what, r.text);
        }
    }
    /* the raw int32 output alone (no scales read) */
    qg_int8_w8a8_args praw = p;
    praw.sa = praw.sb = NULL;
    c.p = &praw;
    c.scaled = 0;
    rc = qg_call_guarded(w8a8_call, &c, out, mn * 4, 1, &e);
    QG_CHECK(rc == QG_ERR_ok && memcmp(out, acc, mn * 4) == 0, "w8a8 %s int32 only: %s (%s)", what, qg_error_name(rc), e.msg);
    free(A), free(B), free(sa), free(sb), free(bias), free(acc), free(y32), free(y16), free(out);
}

static void test_w8a8(void)
{
    /* (M, N, K): every M of the contract; odd N and K (byte-wise loads) and K % 16 == 0 (16-byte and
     * cp.async loads); 4096 x 640 and 1024 x 2100 select the 128 x 128 tiles, the others 64 x 64 */
    static const size_t shapes[][3] = {{1, 37, 13},    {1, 257, 4096}, {2, 33, 77},     {2, 64, 64},    {13, 100, 255},
                                       {13, 65, 512},  {16, 129, 301}, {16, 256, 1024}, {17, 65, 37},   {17, 64, 96},
                                       {64, 129, 257}, {64, 256, 640}, {129, 257, 300}, {129, 130, 128}, {4096, 37, 13},
                                       {4096, 640, 64}, {200, 1000, 16}, {1024, 2100, 40},
                                       /* more 128 x 256 tiles than SMs (the TMA kernel's CTAs take
                                        * several tiles; the stage ring wraps across tiles), partial
                                        * tiles in M, N and K, K over many ring turns */
                                       {1000, 4100, 272}, {4096, 2560, 48}, {300, 600, 4144}};
    for (size_t i = 0; i < COUNT(shapes); i++) {
        const int per_row = (int)(i % 2), bias_kind = (int)(i % 3), relu = (int)((i / 2) % 2);
        test_w8a8_case(shapes[i][0], shapes[i][1], shapes[i][2], 0, per_row, bias_kind, relu, 0);
        test_w8a8_case(shapes[i][0], shapes[i][1], shapes[i][2], 0, !per_row, 2 - bias_kind, !relu, 0);
    }
    test_w8a8_case(17, 33, 64, 0, 1, 1, 1, 1); /* NaN and -inf in the bias, tensor cores */
    test_w8a8_case(3, 33, 64, 0, 1, 2, 0, 1);  /* the same on the dp4a path */
    /* the accumulator extreme: K = 131071 products of -128 * -128 = 2^31 - 2^14 */
    test_w8a8_case(1, 1, QG_INT8_MAX_K, 1, 0, 0, 0, 0);
    test_w8a8_case(1, 1, QG_INT8_MAX_K, 0, 1, 1, 1, 0);
    test_w8a8_case(20, 3, QG_INT8_MAX_K, 1, 1, 1, 0, 0);
    /* errors: the reference's code, outputs untouched */
    {
        const size_t K = QG_INT8_MAX_K + 1;
        int8_t *A = xmalloc(K), *B = xmalloc(K);
        memset(A, 1, K), memset(B, 1, K);
        const float one = 1.0f, neg = -1.0f, inf = fbits(0x7F800000u);
        qg_int8_w8a8_args p = {1, 1, K, A, B, &one, 1, &one, 1, NULL, QG_INT8_F32, 0};
        int32_t acc = 0x77777777;
        float y = 0.0f;
        QG_CHECK(qg_int8_w8a8_cuda(&p, &acc, &y, NULL) == QG_ERR_int_k_too_large && acc == 0x77777777, "K = 131072 accepted");
        p.K = 16;
        p.sb = &neg;
        QG_CHECK(qg_int8_w8a8_cuda(&p, &acc, &y, NULL) == qg_int8_w8a8_ref(&p, &acc, &y, NULL) && acc == 0x77777777,
                 "negative sb: not the reference's error");
        p.sb = &inf;
        QG_CHECK(qg_int8_w8a8_cuda(&p, &acc, &y, NULL) == QG_ERR_int_nonfinite_input && acc == 0x77777777, "infinite sb accepted");
        p.sb = NULL;
        QG_CHECK(qg_int8_w8a8_cuda(&p, &acc, &y, NULL) == QG_ERR_int_scale_invalid, "NULL sb accepted");
        QG_CHECK(qg_int8_w8a8_cuda(&p, &acc, NULL, NULL) == QG_ERR_ok && acc == 16, "int32 only with NULL scales: %d", (int)acc);
        free(A), free(B);
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* w8a16                                                                                          */

typedef struct {
    const int8_t *B;
    const void *sb;
    qg_int8_ftype st;
    size_t N, K;
    const uint16_t *X;
    size_t M;
} w8a16_ctx;

static int w8a16_call(void *vc, void *out)
{
    w8a16_ctx *c = vc;
    const size_t mn = c->M * c->N;
    return qg_int8_w8a16_cuda(c->B, c->sb, c->st, c->N, c->K, c->X, c->M, (float *)out, (uint16_t *)((unsigned char *)out + 4 * mn));
}

static const qg_kernel *g_w8a16;
static double g_worst;

/* y32 / y16 (M x N) from one guarded call; 0 on success. */
static int w8a16_run(const w8a16_ctx *c, float *y32, uint16_t *y16, const char *what)
{
    const size_t mn = c->M * c->N;
    unsigned char *out = xmalloc(mn * 6);
    qg_err e;
    const int rc = qg_call_guarded(w8a16_call, (void *)c, out, mn * 6, 1, &e);
    QG_CHECK(rc == QG_ERR_ok, "w8a16 %s: %s (%s)", what, qg_error_name(rc), e.msg);
    if (rc == QG_ERR_ok) memcpy(y32, out, mn * 4), memcpy(y16, out + 4 * mn, mn * 2);
    free(out);
    return rc;
}

static void test_w8a16_case(size_t N, size_t K, size_t M, qg_int8_ftype st)
{
    char what[128];
    snprintf(what, sizeof what, "N %zu K %zu batch %zu scale %s", N, K, M, st ? "f16" : "f32");
    int8_t *B = xmalloc(N * K);
    for (size_t i = 0; i < N * K; i++) B[i] = rand_i8();
    void *sb = xmalloc(N * 4);
    for (size_t n = 0; n < N; n++) {
        const float v = ldexpf(qg_rng_uniform(&g_rng, 0.5f, 1.0f), -6 - (int)qg_rng_int_range(&g_rng, 4));
        if (st == QG_INT8_F16)
            ((uint16_t *)sb)[n] = qg_f32_to_f16(v);
        else
            ((float *)sb)[n] = v;
    }
    uint16_t *X = xmalloc(M * K * 2);
    for (size_t i = 0; i < M * K; i++) X[i] = qg_f32_to_f16(qg_rng_uniform(&g_rng, -4.0f, 4.0f));
    const size_t mn = M * N;
    float *y32 = xmalloc(mn * 4);
    uint16_t *y16 = xmalloc(mn * 2);
    w8a16_ctx c = {B, sb, st, N, K, X, M};
    if (w8a16_run(&c, y32, y16, what) == QG_ERR_ok) {
        /* float64 sums: sb * B * X has at most 24 + 8 + 11 significant bits, exact in a double */
        double *ystar = xmalloc(mn * 8), *sabs = xmalloc(mn * 8);
        float *y16f = xmalloc(mn * 4);
        for (size_t m = 0; m < M; m++)
            for (size_t n = 0; n < N; n++) {
                const double s = st == QG_INT8_F16 ? (double)qg_f16_to_f32(((uint16_t *)sb)[n]) : (double)((float *)sb)[n];
                double acc = 0.0, aa = 0.0;
                for (size_t k = 0; k < K; k++) {
                    const double t = s * (double)B[n * K + k] * (double)qg_f16_to_f32(X[m * K + k]);
                    acc += t;
                    aa += fabs(t);
                }
                ystar[m * N + n] = acc, sabs[m * N + n] = aa;
                y16f[m * N + n] = qg_f16_to_f32(y16[m * N + n]);
            }
        qg_bound_report r;
        QG_CHECK(qg_compare_bounded(&g_w8a16->numerics, (long)K, ystar, sabs, NULL, y32, mn, &r) == 0, "w8a16 %s float32: %s", what, r.text);
        if (r.worst_ratio > g_worst) g_worst = r.worst_ratio;
        QG_CHECK(qg_compare_bounded(&g_w8a16->numerics_f16, (long)K, ystar, sabs, NULL, y16f, mn, &r) == 0, "w8a16 %s fp16: %s", what,
                 r.text);
        /* batch invariance: every column alone, bitwise */
        for (size_t m = 0; m < M && M > 1; m++) {
            float one32[4096];
            uint16_t one16[4096];
            w8a16_ctx c1 = {B, sb, st, N, K, X + m * K, 1};
            if (N <= 4096 && w8a16_run(&c1, one32, one16, what) == QG_ERR_ok) {
                QG_CHECK(memcmp(one32, y32 + m * N, N * 4) == 0, "w8a16 %s: column %zu alone differs from the batch (float32)", what, m);
                QG_CHECK(memcmp(one16, y16 + m * N, N * 2) == 0, "w8a16 %s: column %zu alone differs from the batch (fp16)", what, m);
            }
        }
        free(ystar), free(sabs), free(y16f);
    }
    free(B), free(sb), free(X), free(y32), free(y16);
}

static void test_w8a16(void)
{
    g_w8a16 = qg_registry_find("int8", "w8a16", QG_BACKEND_CUDA);
    QG_CHECK(g_w8a16 != NULL, "no registry row int8/w8a16/cuda (its numerics declare the bound)");
    if (g_w8a16 == NULL) return;
    static const size_t shapes[][2] = {{37, 13}, {64, 4096}, {257, 1000}, {33, 17}, {129, 512}, {5, 8191}};
    static const size_t batches[] = {1, 2, 3, 8, 13, 16, 17};
    for (size_t i = 0; i < COUNT(shapes); i++)
        for (size_t b = 0; b < COUNT(batches); b++)
            test_w8a16_case(shapes[i][0], shapes[i][1], batches[b], (i + b) % 2 ? QG_INT8_F16 : QG_INT8_F32);
    printf("w8a16: worst |y - y*| / bound (float32 output) %.3g\n", g_worst);
    /* a negative scale: the reference's error */
    int8_t B[4] = {1, 2, 3, 4};
    const float neg[1] = {-1.0f};
    uint16_t X[4] = {0x3C00, 0x3C00, 0x3C00, 0x3C00};
    float y = 7.0f;
    QG_CHECK(qg_int8_w8a16_cuda(B, neg, QG_INT8_F32, 1, 4, X, 1, &y, NULL) == QG_ERR_int_scale_invalid && y == 7.0f,
             "negative w8a16 scale accepted");
}

int main(void)
{
    char why[200];
    if (qg_cuda_device_count(why, sizeof why) == 0) return qg_test_no_gpu(why);
    qg_rng_init(&g_rng, 0x1A78C0DAull);
    test_quantize();
    test_w8a8();
    test_w8a16();
    return qg_test_end("gpu.int8_extra.cuda");
}
