/* simd.kquants.<backend> / full.kquants.<backend>: the optimized K-quant kernels of one CPU backend
 * against the reference, on inputs made on the fly from the pinned stream.
 *
 *   dequant (f32, f16)  memcmp-exact (NaN rule of qg_compare_exact) on random bytes read as blocks (d and
 *                       dmin left random, inf/NaN included), on blocks with special d/dmin, and on
 *                       quantized smooth data;
 *   dot with Q8_K       S and M exact per block; the float result within the bound of the registry row's
 *                       numerics against sum_i (dy D S_i - dy Dm M_i) in double;
 *   GEMV                within the bound (f32: numerics, f16: numerics_f16) of y* = sum W x in double from
 *                       the reference's dequantized weights; the fp16 output is the float32 output rounded
 *                       once; batch invariance (every column of a batch-B call equals a batch-1 call on
 *                       that column, bitwise); f32-only / f16-only calls equal the combined call;
 *   threads             results with 1, 2, 3 and 5 threads bitwise equal;
 *   alignment           weights at byte offsets 1 and 2 (and activations at an odd element offset) give
 *                       the same bits;
 *   validation          the reference's error codes for bad arguments, outputs untouched.
 * Every kernel call goes through qg_call_guarded (poisoned outputs, canaries, two runs). No tolerance
 * literal appears here: bounds come from qg_bound with the registry row's declaration.
 *
 * usage: test_kq_kernels BACKEND [full]   (exit 77 when BACKEND cannot run here)
 * "full" runs the large shapes 4096x14336, 14336x4096 and 8192x28672 instead.
 */
#include "compare.h"
#include "guard.h"
#include "qg_test.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/threads.h"
#include "qgold/kquants.h"
#include "qgold/registry.h"
#include "qgold/rng.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { QK = QG_QK_K, MAXB = QG_KQ_MAX_BATCH, Q8K_BYTES = 292 };

static const qg_ktype k_types[4] = {QG_Q4_K, QG_Q5_K, QG_Q6_K, QG_Q8_K};
static const size_t k_rows[] = {1, 2, 3, 7, 8, 9, 17};
static const size_t k_cols[] = {256, 768, 14336};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static qg_rng g_rng;
static qg_backend g_be;
static const char *g_be_name;

/* What the bounded comparisons saw, printed at the end: a worst ratio of 0, no rounded outputs or no
 * NaN/inf outputs would mean the data did not exercise what the test claims to check. */
static struct {
    double worst_ratio;
    size_t outputs, rounded, nonfinite;
} g_seen;

static void seen(const qg_bound_report *br, const double *ystar, size_t n)
{
    if (br->worst_ratio > g_seen.worst_ratio) g_seen.worst_ratio = br->worst_ratio;
    g_seen.outputs += n;
    g_seen.rounded += br->rounded;
    for (size_t i = 0; i < n; i++) g_seen.nonfinite += !isfinite(ystar[i]);
}

/* The backend's rows, per type (dot: Q4_K..Q6_K only). */
static const qg_kernel *g_deq[4], *g_dot[4], *g_gemv[4];

/* ---- data ----------------------------------------------------------------------------------------- */

typedef enum {
    DATA_RAW,    /* every byte random: d, dmin (Q8_K: float32 d) anything, inf/NaN included */
    DATA_MIXED,  /* random codes and scales; d/dmin finite (any exponent), except in some blocks of the
                  * even rows: inf, NaN, +-0, subnormal, max */
    DATA_SMOOTH, /* smooth rows quantized by the reference quantizer */
} data_mode;

static const char *mode_name(data_mode m) { return m == DATA_RAW ? "random-bytes" : m == DATA_MIXED ? "mixed-scales" : "smooth"; }

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xFF);
    p[1] = (uint8_t)(v >> 8);
}

static void put_f32(uint8_t *p, float f)
{
    uint32_t b = qg_f32_bits(f);
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)((b >> (8 * i)) & 0xFF);
}

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static float get_f32(const uint8_t *p)
{
    return qg_f32_from_bits((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24));
}

static void random_bytes(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(qg_rng_bits32(&g_rng) >> 24);
}

static const uint16_t k_special16[] = {0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x0000, 0x8000, 0x0001, 0x83FF, 0x7BFF, 0xFBFF};

/* A random finite fp16 (any finite exponent). */
static uint16_t finite16(void)
{
    uint16_t h = (uint16_t)(qg_rng_bits32(&g_rng) >> 16);
    return (h & 0x7C00) == 0x7C00 ? (uint16_t)(h ^ 0x4000) : h;
}

/* Q8_K's float32 d: a moderate magnitude (so no float32 sum of products can overflow where the double y*
 * does not), or with `special` one of +-0, a subnormal, +-inf, NaN. */
static float q8_scale(int special)
{
    static const uint32_t sp[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u};
    if (special) return qg_f32_from_bits(sp[qg_rng_int_range(&g_rng, COUNT(sp))]);
    const float m = qg_rng_uniform(&g_rng, -2.0f, 2.0f);
    return ldexpf(m, (int)qg_rng_int_range(&g_rng, 24) - 18);
}

/* Smooth rows with some noise, as weights or activations to quantize. */
static void smooth(float *x, size_t rows, size_t cols)
{
    for (size_t r = 0; r < rows; r++) {
        const float ph = 0.37f * (float)r, amp = 0.5f + (float)(r % 5) * 0.3f;
        for (size_t k = 0; k < cols; k++) {
            const float s = sinf(0.013f * (float)k + ph) * cosf(0.0007f * (float)k);
            x[r * cols + k] = amp * s + qg_rng_uniform(&g_rng, -0.05f, 0.05f);
        }
    }
}

/* rows x cols weights of type t in `mode` into w (nbytes). */
static void make_blocks(qg_ktype t, data_mode mode, size_t rows, size_t cols, uint8_t *w)
{
    const size_t bsz = qg_kq_block_bytes(t), nb = rows * (cols / QK), nbytes = nb * bsz;
    if (mode == DATA_SMOOTH) {
        float *x = malloc(rows * cols * sizeof(float));
        QG_CHECK(x != NULL, "allocation");
        if (x == NULL) return;
        smooth(x, rows, cols);
        QG_CHECK(qg_kq_quantize_ref(t, x, rows, cols, w, nbytes) == QG_ERR_ok, "reference quantizer");
        free(x);
        return;
    }
    random_bytes(w, nbytes);
    if (mode == DATA_RAW) return;
    for (size_t i = 0; i < nb; i++) {
        uint8_t *blk = w + i * bsz;
        /* special scales in one block in 8 of the even rows only, so odd rows stay finite */
        const uint32_t pick = (i / (cols / QK)) % 2 == 0 ? qg_rng_int_range(&g_rng, 8) : 8;
        if (t == QG_Q8_K) {
            put_f32(blk, q8_scale(pick == 0));
        } else if (t == QG_Q6_K) {
            put16(blk + 208, pick == 0 ? k_special16[qg_rng_int_range(&g_rng, COUNT(k_special16))] : finite16());
        } else {
            put16(blk, pick == 0 ? k_special16[qg_rng_int_range(&g_rng, COUNT(k_special16))] : finite16());
            put16(blk + 2, pick == 1 ? k_special16[qg_rng_int_range(&g_rng, COUNT(k_special16))] : finite16());
        }
    }
}

/* n fp16 activations in [-1, 1); with `special`, about one in 32 is +-0, a subnormal, +-inf or NaN. */
static void make_x(uint16_t *x, size_t n, int special)
{
    static const uint16_t sp[] = {0x0000, 0x8000, 0x0001, 0x83FF, 0x7C00, 0xFC00, 0x7E00, 0xFE00};
    for (size_t i = 0; i < n; i++) {
        x[i] = qg_f32_to_f16(qg_rng_uniform(&g_rng, -1.0f, 1.0f));
        if (special && qg_rng_int_range(&g_rng, 32) == 0) x[i] = sp[qg_rng_int_range(&g_rng, COUNT(sp))];
    }
}

/* A Q8_K activation row of cols elements: quantized smooth data, or random bytes with a chosen d. */
static void make_q8(data_mode mode, size_t cols, uint8_t *q8)
{
    if (mode == DATA_SMOOTH) {
        float *x = malloc(cols * sizeof(float));
        QG_CHECK(x != NULL, "allocation");
        if (x == NULL) return;
        smooth(x, 1, cols);
        QG_CHECK(qg_kq_quantize_ref(QG_Q8_K, x, 1, cols, q8, cols / QK * Q8K_BYTES) == QG_ERR_ok, "reference quantizer (q8_k)");
        free(x);
        return;
    }
    random_bytes(q8, cols / QK * Q8K_BYTES);
    for (size_t i = 0; i < cols / QK; i++) put_f32(q8 + i * Q8K_BYTES, q8_scale(qg_rng_int_range(&g_rng, 8) == 0));
}

/* ---- guarded call wrappers ------------------------------------------------------------------------- */

typedef struct {
    const qg_kernel *k;
    qg_ktype t;
    const uint8_t *w;
    size_t nbytes, rows, cols;
    int f16;
} deq_call;

static int call_deq(void *vc, void *out)
{
    deq_call *c = vc;
    return c->f16 ? c->k->fn.kq_dequant.f16(c->t, c->w, c->nbytes, c->rows, c->cols, out)
                  : c->k->fn.kq_dequant.f32(c->t, c->w, c->nbytes, c->rows, c->cols, out);
}

/* Dot output, as uint32 elements: S[nb] | M[nb] | result. `which` 0: both, 1: S only, 2: M only, 3: none. */
typedef struct {
    const qg_kernel *k;
    qg_ktype t;
    const uint8_t *w, *q8;
    size_t cols;
    int which;
} dot_call;

static int call_dot(void *vc, void *out)
{
    dot_call *c = vc;
    const size_t nb = c->cols / QK;
    uint32_t *o = out;
    int32_t *S = (int32_t *)o, *M = (int32_t *)(o + nb);
    if (c->which == 2 || c->which == 3) {
        S = NULL;
        memset(o, 0, nb * 4);
    }
    if (c->which == 1 || c->which == 3) {
        M = NULL;
        memset(o + nb, 0, nb * 4);
    }
    return c->k->fn.kq_dot(c->t, c->w, c->q8, c->cols, S, M, (float *)(o + 2 * nb));
}

/* GEMV output, as uint16 elements: y_f32[rows*batch] (two elements each) | y_f16[rows*batch].
 * outs: 3 both, 1 f32 only (the f16 part zeroed), 2 f16 only (the f32 part zeroed). */
typedef struct {
    const qg_kernel *k;
    qg_ktype t;
    const uint8_t *w;
    size_t nbytes, rows, cols;
    const uint16_t *x;
    size_t batch;
    int outs;
} gemv_call;

static int call_gemv(void *vc, void *out)
{
    gemv_call *c = vc;
    const size_t n = c->rows * c->batch;
    float *y32;
    uint16_t *y16;
    qg_test_gemv_outs(out, n, c->outs, &y32, &y16);
    return c->k->fn.kq_gemv(c->t, c->w, c->nbytes, c->rows, c->cols, c->x, c->batch, y32, y16);
}

/* A guarded GEMV; y32 (n floats) and y16 (n halves) receive the outputs. Returns 0 on success. */
static int run_gemv(const qg_kernel *k, qg_ktype t, const uint8_t *w, size_t rows, size_t cols, const uint16_t *x, size_t batch,
                    int outs, float *y32, uint16_t *y16, const char *what)
{
    const size_t n = rows * batch, nbytes = rows * (cols / QK) * qg_kq_block_bytes(t);
    uint16_t *buf = malloc(3 * n * sizeof(uint16_t));
    QG_CHECK(buf != NULL, "allocation");
    if (buf == NULL) return 1;
    gemv_call c = {k, t, w, nbytes, rows, cols, x, batch, outs};
    qg_err e;
    int rc = qg_call_guarded(call_gemv, &c, buf, 3 * n, sizeof(uint16_t), &e);
    QG_CHECK(rc == QG_ERR_ok, "%s %s gemv %zux%zu batch %zu (%s): %s", qg_kq_name(t), g_be_name, rows, cols, batch, what, e.msg);
    if (rc == QG_ERR_ok) {
        memcpy(y32, buf, n * sizeof(float));
        memcpy(y16, buf + 2 * n, n * sizeof(uint16_t));
    }
    free(buf);
    return rc;
}

/* ---- dequantization -------------------------------------------------------------------------------- */

static void check_dequant(qg_ktype t, const uint8_t *w, size_t rows, size_t cols, const char *what)
{
    const qg_kernel *k = g_deq[t];
    const size_t n = rows * cols, nbytes = rows * (cols / QK) * qg_kq_block_bytes(t);
    float *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    uint16_t *want16 = malloc(n * 2), *got16 = malloc(n * 2);
    QG_CHECK(want && got && want16 && got16, "allocation");
    if (want && got && want16 && got16) {
        QG_CHECK(qg_kq_dequant_f32_ref(t, w, nbytes, rows, cols, want) == QG_ERR_ok, "reference dequant");
        QG_CHECK(qg_kq_dequant_f16_ref(t, w, nbytes, rows, cols, want16) == QG_ERR_ok, "reference dequant f16");
        qg_err e;
        qg_exact_report rep;
        for (int f16 = 0; f16 < 2; f16++) {
            deq_call c = {k, t, w, nbytes, rows, cols, f16};
            const char *path = f16 ? "dequant_f16" : "dequant_f32";
            int rc = qg_call_guarded(call_deq, &c, f16 ? (void *)got16 : (void *)got, n, f16 ? 2 : 4, &e);
            QG_CHECK(rc == QG_ERR_ok, "%s %s %s rows=%zu cols=%zu (%s): %s", qg_kq_name(t), g_be_name, path, rows, cols, what, e.msg);
            if (rc != QG_ERR_ok) continue;
            /* NaNs made by inf/NaN scales carry the machine's sign (numerics.md): any NaN matches. */
            rc = f16 ? qg_compare_exact_nan_any(QG_ELEM_F16, want16, got16, n, &rep) : qg_compare_exact_nan_any(QG_ELEM_F32, want, got, n, &rep);
            QG_CHECK(rc == QG_ERR_ok, "%s %s %s rows=%zu cols=%zu (%s): row %zu col %zu: %s", qg_kq_name(t), g_be_name, path, rows, cols,
                     what, rep.index / cols, rep.index % cols, rep.text);
        }
    }
    free(want);
    free(got);
    free(want16);
    free(got16);
}

static void test_dequant(void)
{
    for (int ti = 0; ti < 4; ti++) {
        const qg_ktype t = k_types[ti];
        for (size_t ri = 0; ri < COUNT(k_rows); ri++) {
            for (size_t ci = 0; ci < COUNT(k_cols); ci++) {
                const size_t rows = k_rows[ri], cols = k_cols[ci];
                uint8_t *w = malloc(rows * (cols / QK) * qg_kq_block_bytes(t));
                QG_CHECK(w != NULL, "allocation");
                if (w == NULL) continue;
                for (int mode = DATA_RAW; mode <= DATA_SMOOTH; mode++) {
                    make_blocks(t, (data_mode)mode, rows, cols, w);
                    check_dequant(t, w, rows, cols, mode_name((data_mode)mode));
                }
                free(w);
            }
        }
    }
}

/* ---- dot ------------------------------------------------------------------------------------------- */

static void check_dot(qg_ktype t, const uint8_t *w, const uint8_t *q8, size_t cols, const char *what)
{
    const qg_kernel *k = g_dot[t];
    const size_t nb = cols / QK, bsz = qg_kq_block_bytes(t);
    int32_t *S = malloc(nb * 4), *M = malloc(nb * 4);
    uint32_t *out = malloc((2 * nb + 1) * 4), *out2 = malloc((2 * nb + 1) * 4);
    QG_CHECK(S && M && out && out2, "allocation");
    if (S && M && out && out2) {
        float ref_result;
        QG_CHECK(qg_kq_dot_q8k_ref(t, w, q8, cols, S, M, &ref_result) == QG_ERR_ok, "reference dot");
        dot_call c = {k, t, w, q8, cols, 0};
        qg_err e;
        qg_exact_report rep;
        int rc = qg_call_guarded(call_dot, &c, out, 2 * nb + 1, 4, &e);
        QG_CHECK(rc == QG_ERR_ok, "%s %s dot_q8k cols=%zu (%s): %s", qg_kq_name(t), g_be_name, cols, what, e.msg);
        if (rc == QG_ERR_ok) {
            QG_CHECK(qg_compare_exact(QG_ELEM_I32, S, out, nb, &rep) == QG_ERR_ok, "%s %s dot_q8k cols=%zu (%s): S, block %s",
                     qg_kq_name(t), g_be_name, cols, what, rep.text);
            QG_CHECK(qg_compare_exact(QG_ELEM_I32, M, out + nb, nb, &rep) == QG_ERR_ok, "%s %s dot_q8k cols=%zu (%s): M, block %s",
                     qg_kq_name(t), g_be_name, cols, what, rep.text);
            /* y* = sum_i (dy D S_i - dy Dm M_i) in double, each product formed with all its factors */
            double ystar = 0.0, sabs = 0.0;
            for (size_t i = 0; i < nb; i++) {
                const uint8_t *wb = w + i * bsz;
                const double dy = get_f32(q8 + i * Q8K_BYTES);
                const double D = qg_f16_to_f32(get16(wb + (t == QG_Q6_K ? 208 : 0)));
                const double ts = dy * D * (double)S[i];
                double tm = 0.0;
                if (t != QG_Q6_K) tm = dy * (double)qg_f16_to_f32(get16(wb + 2)) * (double)M[i];
                ystar += ts - tm;
                sabs += fabs(ts) + fabs(tm);
            }
            float res;
            memcpy(&res, out + 2 * nb, 4);
            qg_bound_report br;
            rc = qg_compare_bounded(&k->numerics, (long)cols, &ystar, &sabs, NULL, &res, 1, &br);
            seen(&br, &ystar, 1);
            QG_CHECK(rc == QG_ERR_ok, "%s %s dot_q8k cols=%zu (%s): result %s", qg_kq_name(t), g_be_name, cols, what, br.text);
            /* S and/or M NULL: the same result bits, the other outputs the same */
            for (int which = 1; which <= 3; which++) {
                dot_call c2 = {k, t, w, q8, cols, which};
                rc = qg_call_guarded(call_dot, &c2, out2, 2 * nb + 1, 4, &e);
                QG_CHECK(rc == QG_ERR_ok, "%s %s dot_q8k cols=%zu (%s) with NULL outputs (%d): %s", qg_kq_name(t), g_be_name, cols, what,
                         which, e.msg);
                if (rc != QG_ERR_ok) continue;
                int same = memcmp(out + 2 * nb, out2 + 2 * nb, 4) == 0;
                if (which == 1) same = same && memcmp(out, out2, nb * 4) == 0;
                if (which == 2) same = same && memcmp(out + nb, out2 + nb, nb * 4) == 0;
                QG_CHECK(same, "%s %s dot_q8k cols=%zu (%s): a call with S/M NULL (%d) gives different bits", qg_kq_name(t), g_be_name, cols,
                         what, which);
            }
        }
    }
    free(S);
    free(M);
    free(out);
    free(out2);
}

static void test_dot(void)
{
    if (g_dot[0] == NULL) return; /* a backend without the Q8_K dot path (CUDA) */
    for (int ti = 0; ti < 3; ti++) {
        const qg_ktype t = k_types[ti];
        for (size_t ci = 0; ci < COUNT(k_cols); ci++) {
            const size_t cols = k_cols[ci], rows = 9;
            uint8_t *w = malloc(rows * (cols / QK) * qg_kq_block_bytes(t)), *q8 = malloc(cols / QK * Q8K_BYTES);
            QG_CHECK(w && q8, "allocation");
            if (w && q8) {
                for (int mode = DATA_RAW; mode <= DATA_SMOOTH; mode++) {
                    make_blocks(t, (data_mode)mode, rows, cols, w);
                    make_q8((data_mode)mode, cols, q8);
                    for (size_t r = 0; r < rows; r++) {
                        char what[64];
                        snprintf(what, sizeof what, "%s, weight row %zu", mode_name((data_mode)mode), r);
                        check_dot(t, w + r * (cols / QK) * qg_kq_block_bytes(t), q8, cols, what);
                    }
                }
            }
            free(w);
            free(q8);
        }
    }
}

/* ---- GEMV ------------------------------------------------------------------------------------------ */

/* y* and sum|w x| in double for `batch` columns, from the reference's dequantized weights. Row by row,
 * so large shapes need only one row of float32 weights. */
static int gemv_exact(qg_ktype t, const uint8_t *w, size_t rows, size_t cols, const uint16_t *x, size_t batch, double *ystar,
                      double *sabs)
{
    const size_t rb = (cols / QK) * qg_kq_block_bytes(t);
    float *W = malloc(cols * sizeof(float)), *xf = malloc(batch * cols * sizeof(float));
    if (W == NULL || xf == NULL) {
        free(W);
        free(xf);
        return 1;
    }
    for (size_t i = 0; i < batch * cols; i++) xf[i] = qg_f16_to_f32(x[i]);
    for (size_t m = 0; m < rows; m++) {
        QG_CHECK(qg_kq_dequant_f32_ref(t, w + m * rb, rb, 1, cols, W) == QG_ERR_ok, "reference dequant");
        for (size_t b = 0; b < batch; b++) {
            const float *xb = xf + b * cols;
            double s = 0.0, a = 0.0;
            for (size_t k = 0; k < cols; k++) {
                const double p = (double)W[k] * (double)xb[k];
                s += p;
                a += fabs(p);
            }
            ystar[b * rows + m] = s;
            sabs[b * rows + m] = a;
        }
    }
    free(W);
    free(xf);
    return 0;
}

/* y32 against the bound; y16 is y32 rounded once, and (bound16) within the fp16 bound. */
static void check_gemv_values(const qg_kernel *k, qg_ktype t, size_t rows, size_t cols, size_t batch, const double *ystar,
                              const double *sabs, const float *y32, const uint16_t *y16, int bound16, const char *what)
{
    const size_t n = rows * batch;
    qg_bound_report br;
    int rc = qg_compare_bounded(&k->numerics, (long)cols, ystar, sabs, NULL, y32, n, &br);
    seen(&br, ystar, n);
    QG_CHECK(rc == QG_ERR_ok, "%s %s gemv %zux%zu batch %zu (%s): y_f32 column %zu row %zu: %s (%zu outputs fail)", qg_kq_name(t),
             g_be_name, rows, cols, batch, what, br.first_failure / rows, br.first_failure % rows, br.text, br.failures);
    uint16_t *want16 = malloc(n * 2);
    float *f16v = malloc(n * sizeof(float));
    QG_CHECK(want16 && f16v, "allocation");
    if (want16 && f16v) {
        for (size_t i = 0; i < n; i++) want16[i] = qg_f32_to_f16(y32[i]);
        qg_exact_report rep;
        rc = qg_compare_exact(QG_ELEM_F16, want16, y16, n, &rep);
        QG_CHECK(rc == QG_ERR_ok, "%s %s gemv %zux%zu batch %zu (%s): y_f16 is not y_f32 rounded once: column %zu row %zu: %s",
                 qg_kq_name(t), g_be_name, rows, cols, batch, what, rep.index / rows, rep.index % rows, rep.text);
        if (bound16) {
            for (size_t i = 0; i < n; i++) f16v[i] = qg_f16_to_f32(y16[i]);
            rc = qg_compare_bounded(&k->numerics_f16, (long)cols, ystar, sabs, NULL, f16v, n, &br);
            QG_CHECK(rc == QG_ERR_ok, "%s %s gemv %zux%zu batch %zu (%s): y_f16 column %zu row %zu: %s", qg_kq_name(t), g_be_name, rows,
                     cols, batch, what, br.first_failure / rows, br.first_failure % rows, br.text);
        }
    }
    free(want16);
    free(f16v);
}

/* One weight matrix against 16 activation columns: batch-1 calls per column (bounded), then every batch
 * in `batches` (each column bitwise equal to its batch-1 call, and bounded). */
static void check_gemv_shape(qg_ktype t, size_t rows, size_t cols, data_mode mode, int xspecial, const size_t *batches, size_t nbatches)
{
    const qg_kernel *k = g_gemv[t];
    const size_t nbytes = rows * (cols / QK) * qg_kq_block_bytes(t), n16 = MAXB * rows;
    uint8_t *w = malloc(nbytes);
    uint16_t *x = malloc(MAXB * cols * 2), *one16 = malloc(n16 * 2), *y16 = malloc(n16 * 2), *z16 = malloc(n16 * 2);
    float *one32 = malloc(n16 * 4), *y32 = malloc(n16 * 4), *z32 = malloc(n16 * 4);
    double *ystar = malloc(n16 * sizeof(double)), *sabs = malloc(n16 * sizeof(double));
    char what[96];
    snprintf(what, sizeof what, "%s weights%s", mode_name(mode), xspecial ? ", special activations" : "");
    QG_CHECK(w && x && one16 && y16 && z16 && one32 && y32 && z32 && ystar && sabs, "allocation");
    if (!(w && x && one16 && y16 && z16 && one32 && y32 && z32 && ystar && sabs)) goto out;
    make_blocks(t, mode, rows, cols, w);
    make_x(x, MAXB * cols, xspecial);
    if (gemv_exact(t, w, rows, cols, x, MAXB, ystar, sabs) != 0) goto out;
    const int bound16 = mode == DATA_SMOOTH && !xspecial;

    /* batch 1, column by column */
    for (size_t b = 0; b < MAXB; b++) {
        if (run_gemv(k, t, w, rows, cols, x + b * cols, 1, 3, one32 + b * rows, one16 + b * rows, what) != 0) goto out;
    }
    char w1[128];
    snprintf(w1, sizeof w1, "%s, batch-1 calls", what);
    check_gemv_values(k, t, rows, cols, MAXB, ystar, sabs, one32, one16, bound16, w1);

    for (size_t bi = 0; bi < nbatches; bi++) {
        const size_t B = batches[bi], n = B * rows;
        if (run_gemv(k, t, w, rows, cols, x, B, 3, y32, y16, what) != 0) continue;
        qg_exact_report rep;
        int rc = qg_compare_exact(QG_ELEM_F32, one32, y32, n, &rep);
        QG_CHECK(rc == QG_ERR_ok, "%s %s gemv %zux%zu batch %zu (%s): not batch-invariant: column %zu row %zu differs from the batch-1 call: %s",
                 qg_kq_name(t), g_be_name, rows, cols, B, what, rep.index / rows, rep.index % rows, rep.text);
        rc = qg_compare_exact(QG_ELEM_F16, one16, y16, n, &rep);
        QG_CHECK(rc == QG_ERR_ok, "%s %s gemv %zux%zu batch %zu (%s): y_f16 not batch-invariant: column %zu row %zu: %s", qg_kq_name(t),
                 g_be_name, rows, cols, B, what, rep.index / rows, rep.index % rows, rep.text);
        check_gemv_values(k, t, rows, cols, B, ystar, sabs, y32, y16, bound16, what);
        if (bi + 1 == nbatches) { /* the f32-only and f16-only calls write the same bits */
            if (run_gemv(k, t, w, rows, cols, x, B, 1, z32, z16, what) == 0)
                QG_CHECK(memcmp(z32, y32, n * 4) == 0, "%s %s gemv %zux%zu batch %zu (%s): y_f32-only call differs", qg_kq_name(t),
                         g_be_name, rows, cols, B, what);
            if (run_gemv(k, t, w, rows, cols, x, B, 2, z32, z16, what) == 0)
                QG_CHECK(memcmp(z16, y16, n * 2) == 0, "%s %s gemv %zux%zu batch %zu (%s): y_f16-only call differs", qg_kq_name(t),
                         g_be_name, rows, cols, B, what);
        }
    }
out:
    free(w);
    free(x);
    free(one16);
    free(y16);
    free(z16);
    free(one32);
    free(y32);
    free(z32);
    free(ystar);
    free(sabs);
}

static void test_gemv(void)
{
    static const size_t all[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    static const size_t some[] = {2, 3, 4, 5, 8, 9, 16};
    for (int ti = 0; ti < 4; ti++) {
        const qg_ktype t = k_types[ti];
        for (size_t ri = 0; ri < COUNT(k_rows); ri++) {
            for (size_t ci = 0; ci < COUNT(k_cols); ci++) {
                const size_t rows = k_rows[ri], cols = k_cols[ci];
                /* every batch on smooth data; mixed scales (inf/NaN d, special activations) on a subset */
                check_gemv_shape(t, rows, cols, DATA_SMOOTH, 0, all, COUNT(all));
                check_gemv_shape(t, rows, cols, DATA_MIXED, (ri + ci) % 2 == 0, some, COUNT(some));
            }
        }
    }
}

/* ---- threads and alignment ------------------------------------------------------------------------- */

static void test_threads(void)
{
    static const int threads[] = {2, 3, 5};
    static const size_t batches[] = {1, 3, 16};
    const size_t rows = 301, cols = 4096;
    for (int ti = 0; ti < 4; ti++) {
        const qg_ktype t = k_types[ti];
        const size_t nbytes = rows * (cols / QK) * qg_kq_block_bytes(t), n = MAXB * rows;
        uint8_t *w = malloc(nbytes);
        uint16_t *x = malloc(MAXB * cols * 2), *a16 = malloc(n * 2), *b16 = malloc(n * 2);
        float *a32 = malloc(n * 4), *b32 = malloc(n * 4);
        QG_CHECK(w && x && a16 && b16 && a32 && b32, "allocation");
        if (w && x && a16 && b16 && a32 && b32) {
            make_blocks(t, DATA_MIXED, rows, cols, w);
            make_x(x, MAXB * cols, 1);
            for (size_t bi = 0; bi < COUNT(batches); bi++) {
                const size_t B = batches[bi];
                qg_set_threads(1);
                if (run_gemv(g_gemv[t], t, w, rows, cols, x, B, 3, a32, a16, "1 thread") != 0) continue;
                for (size_t th = 0; th < COUNT(threads); th++) {
                    qg_set_threads(threads[th]);
                    char what[32];
                    snprintf(what, sizeof what, "%d threads", threads[th]);
                    if (run_gemv(g_gemv[t], t, w, rows, cols, x, B, 3, b32, b16, what) != 0) continue;
                    qg_exact_report rep;
                    QG_CHECK(qg_compare_exact(QG_ELEM_F32, a32, b32, B * rows, &rep) == QG_ERR_ok &&
                                 memcmp(a16, b16, B * rows * 2) == 0,
                             "%s %s gemv %zux%zu batch %zu: %d threads differ from 1 thread: column %zu row %zu: %s", qg_kq_name(t), g_be_name,
                             rows, cols, B, threads[th], rep.index / rows, rep.index % rows, rep.text);
                }
            }
            /* dequantization split over threads: still exact */
            free(w);
            const size_t drows = 1200;
            w = malloc(drows * (cols / QK) * qg_kq_block_bytes(t));
            QG_CHECK(w != NULL, "allocation");
            if (w != NULL) {
                make_blocks(t, DATA_RAW, drows, cols, w);
                for (size_t th = 0; th < COUNT(threads); th++) {
                    qg_set_threads(threads[th]);
                    char what[32];
                    snprintf(what, sizeof what, "%d threads", threads[th]);
                    check_dequant(t, w, drows, cols, what);
                }
            }
        }
        qg_set_threads(0);
        free(w);
        free(x);
        free(a16);
        free(b16);
        free(a32);
        free(b32);
    }
}

/* Weights at byte offsets 1 and 2 from an aligned buffer (Q6_K rows are only 2-byte aligned in real
 * files), activations at an odd element offset: the same bits as the aligned call. */
static void test_alignment(void)
{
    const size_t rows = 9, cols = 768;
    for (int ti = 0; ti < 4; ti++) {
        const qg_ktype t = k_types[ti];
        const size_t nbytes = rows * (cols / QK) * qg_kq_block_bytes(t), n = 4 * rows;
        uint8_t *w = malloc(nbytes), *wo = malloc(nbytes + 64), *q8 = malloc(cols / QK * Q8K_BYTES + 64);
        uint16_t *x = malloc((4 * cols + 1) * 2), *a16 = malloc(n * 2), *b16 = malloc(n * 2);
        float *a32 = malloc(n * 4), *b32 = malloc(n * 4);
        QG_CHECK(w && wo && q8 && x && a16 && b16 && a32 && b32, "allocation");
        if (w && wo && q8 && x && a16 && b16 && a32 && b32) {
            make_blocks(t, DATA_MIXED, rows, cols, w);
            make_x(x + 1, 4 * cols, 0);
            for (size_t off = 1; off <= 2; off++) {
                uint8_t *wm = wo + off;
                memcpy(wm, w, nbytes);
                char what[64];
                snprintf(what, sizeof what, "weights at byte offset %zu", off);
                check_dequant(t, wm, rows, cols, what);
                for (size_t B = 1; B <= 4; B += 3) {
                    const uint16_t *xa = x + 1; /* odd element offset: 2 bytes past an aligned address */
                    if (run_gemv(g_gemv[t], t, w, rows, cols, xa, B, 3, a32, a16, "aligned") != 0) continue;
                    if (run_gemv(g_gemv[t], t, wm, rows, cols, xa, B, 3, b32, b16, what) != 0) continue;
                    QG_CHECK(memcmp(a32, b32, B * rows * 4) == 0 && memcmp(a16, b16, B * rows * 2) == 0,
                             "%s %s gemv %zux%zu batch %zu: %s gives different bits", qg_kq_name(t), g_be_name, rows, cols, B, what);
                }
                if (t != QG_Q8_K && g_dot[t] != NULL) {
                    uint8_t *q8m = q8 + off;
                    make_q8(DATA_MIXED, cols, q8m);
                    for (size_t r = 0; r < rows; r++) {
                        char w2[96];
                        snprintf(w2, sizeof w2, "%s, Q8_K row at offset %zu, weight row %zu", what, off, r);
                        check_dot(t, wm + r * (cols / QK) * qg_kq_block_bytes(t), q8m, cols, w2);
                    }
                }
            }
        }
        free(w);
        free(wo);
        free(q8);
        free(x);
        free(a16);
        free(b16);
        free(a32);
        free(b32);
    }
}

/* ---- validation ------------------------------------------------------------------------------------ */

static void test_validation(void)
{
    enum { NBLK = 8, MAXOUT = 4096 };
    static uint8_t w[NBLK * Q8K_BYTES], q8[NBLK * Q8K_BYTES];
    static uint16_t x[MAXB * 1024], y16[MAXOUT];
    static float y[MAXOUT], res;
    static int32_t S[NBLK], M[NBLK];
    random_bytes(w, sizeof w);
    random_bytes(q8, sizeof q8);
    enum { NULL_W = 1, NULL_X = 2, NULL_Y = 4, NULL_Y16 = 8 };
    typedef struct {
        int t;
        size_t rows, cols;
        long nbytes_delta;
        size_t batch;
        int nulls;
        const char *what;
    } vcase;
    const size_t huge = SIZE_MAX / 256 * 256;
    const vcase cases[] = {
        {QG_Q4_K, 2, 512, 0, 3, 0, "valid"},
        {QG_Q8_K, 1, 1024, 0, 16, NULL_Y16, "valid, f32 output only"},
        {QG_Q6_K, 2, 256, 0, 1, NULL_Y, "valid, f16 output only (dot: no result)"},
        {7, 1, 256, 0, 1, 0, "unknown type 7"},
        {-1, 1, 256, 0, 1, 0, "unknown type -1"},
        {QG_Q4_K, 1, 256, 0, 1, NULL_W, "NULL weights"},
        {QG_Q5_K, 1, 256, 0, 1, NULL_X, "NULL activations / Q8_K row"},
        {QG_Q6_K, 1, 256, 0, 1, NULL_Y | NULL_Y16, "NULL outputs"},
        {QG_Q6_K, 1, 0, 0, 1, 0, "cols 0"},
        {QG_Q6_K, 1, 4544, 0, 1, 0, "cols 4544"},
        {QG_Q5_K, 1, 896, 0, 1, 0, "cols 896"},
        {QG_Q4_K, 0, 256, 0, 1, 0, "rows 0"},
        {QG_Q5_K, 2, 256, 1, 1, 0, "nbytes one too many"},
        {QG_Q6_K, 2, 256, -1, 1, 0, "nbytes one too few"},
        {QG_Q4_K, huge, 256, 0, 1, 0, "rows * cols overflows"},
        {QG_Q4_K, 1, huge, 0, 1, 0, "cols * 4 overflows"},
        {QG_Q4_K, 2, 512, 0, 0, 0, "batch 0"},
        {QG_Q8_K, 2, 512, 0, 17, 0, "batch 17"},
        {QG_Q8_K, 1, 256, 0, 1, 0, "Q8_K weights (dot: unsupported)"},
    };
    for (size_t i = 0; i < COUNT(cases); i++) {
        const vcase *c = &cases[i];
        const qg_ktype t = (qg_ktype)c->t;
        const int tk = c->t >= 0 && c->t < 4 ? c->t : 0; /* a row whose function takes the bad type */
        const int fits = c->rows <= 2 && c->cols <= 1024;
        const size_t bsz = qg_kq_block_bytes(t);
        const size_t nbytes = fits ? (size_t)((long)(c->rows * (c->cols / QK) * bsz) + c->nbytes_delta) : 1234;
        const uint8_t *wi = c->nulls & NULL_W ? NULL : w;
        const uint16_t *xi = c->nulls & NULL_X ? NULL : x;
        const uint8_t *q8i = c->nulls & NULL_X ? NULL : q8;
        float *yo = c->nulls & NULL_Y ? NULL : y;
        uint16_t *yo16 = c->nulls & NULL_Y16 ? NULL : y16;
        int rr, rk;
        /* dequant f32 (output NULL when either output is) and f16 */
        float *yd = (c->nulls & (NULL_Y | NULL_Y16)) == (NULL_Y | NULL_Y16) ? NULL : y;
        memset(y, 0x5C, sizeof y);
        rr = qg_kq_dequant_f32_ref(t, wi, nbytes, c->rows, c->cols, yd);
        memset(y, 0x5C, sizeof y);
        rk = g_deq[tk]->fn.kq_dequant.f32(t, wi, nbytes, c->rows, c->cols, yd);
        QG_CHECK(rk == rr, "%s dequant_f32 (%s): returned %d (%s), the reference %d (%s)", g_be_name, c->what, rk, qg_error_name(rk), rr,
                 qg_error_name(rr));
        if (rr != QG_ERR_ok) QG_CHECK(qg_test_untouched(y, sizeof y, 0x5C), "%s dequant_f32 (%s): output written on error", g_be_name, c->what);
        uint16_t *yd16 = yd == NULL ? NULL : y16;
        memset(y16, 0x5C, sizeof y16);
        rr = qg_kq_dequant_f16_ref(t, wi, nbytes, c->rows, c->cols, yd16);
        memset(y16, 0x5C, sizeof y16);
        rk = g_deq[tk]->fn.kq_dequant.f16(t, wi, nbytes, c->rows, c->cols, yd16);
        QG_CHECK(rk == rr, "%s dequant_f16 (%s): returned %d (%s), the reference %d (%s)", g_be_name, c->what, rk, qg_error_name(rk), rr,
                 qg_error_name(rr));
        if (rr != QG_ERR_ok) QG_CHECK(qg_test_untouched(y16, sizeof y16, 0x5C), "%s dequant_f16 (%s): output written on error", g_be_name, c->what);
        /* GEMV */
        memset(y, 0x5C, sizeof y);
        memset(y16, 0x5C, sizeof y16);
        rr = qg_kq_gemv_ref(t, wi, nbytes, c->rows, c->cols, xi, c->batch, yo, yo16);
        memset(y, 0x5C, sizeof y);
        memset(y16, 0x5C, sizeof y16);
        rk = g_gemv[tk]->fn.kq_gemv(t, wi, nbytes, c->rows, c->cols, xi, c->batch, yo, yo16);
        QG_CHECK(rk == rr, "%s gemv (%s): returned %d (%s), the reference %d (%s)", g_be_name, c->what, rk, qg_error_name(rk), rr,
                 qg_error_name(rr));
        if (rr != QG_ERR_ok)
            QG_CHECK(qg_test_untouched(y, sizeof y, 0x5C) && qg_test_untouched(y16, sizeof y16, 0x5C), "%s gemv (%s): output written on error", g_be_name, c->what);
        /* dot: one row of cols (rows, nbytes and batch do not apply); result NULL for NULL_Y */
        if ((c->cols <= NBLK * QK || !fits) && g_dot[tk < 3 ? tk : 0] != NULL) {
            float *ro = c->nulls & NULL_Y ? NULL : &res;
            memset(S, 0x5C, sizeof S);
            memset(M, 0x5C, sizeof M);
            memset(&res, 0x5C, sizeof res);
            rr = qg_kq_dot_q8k_ref(t, wi, q8i, c->cols, S, M, ro);
            memset(S, 0x5C, sizeof S);
            memset(M, 0x5C, sizeof M);
            memset(&res, 0x5C, sizeof res);
            rk = g_dot[tk < 3 ? tk : 0]->fn.kq_dot(t, wi, q8i, c->cols, S, M, ro);
            QG_CHECK(rk == rr, "%s dot_q8k (%s): returned %d (%s), the reference %d (%s)", g_be_name, c->what, rk, qg_error_name(rk), rr,
                     qg_error_name(rr));
            if (rr != QG_ERR_ok)
                QG_CHECK(qg_test_untouched(S, sizeof S, 0x5C) && qg_test_untouched(M, sizeof M, 0x5C) && qg_test_untouched(&res, sizeof res, 0x5C),
                         "%s dot_q8k (%s): output written on error", g_be_name, c->what);
        }
    }
}

/* ---- large shapes (label full) --------------------------------------------------------------------- */

/* Random codes and scale bytes with ordinary d/dmin (as in real models), made on the fly. */
static void make_large(qg_ktype t, size_t rows, size_t cols, uint8_t *w)
{
    const size_t bsz = qg_kq_block_bytes(t), nb = rows * (cols / QK);
    random_bytes(w, nb * bsz);
    for (size_t i = 0; i < nb; i++) {
        uint8_t *blk = w + i * bsz;
        if (t == QG_Q8_K) put_f32(blk, qg_rng_uniform(&g_rng, 0.001f, 0.01f));
        else put16(blk + (t == QG_Q6_K ? 208 : 0), qg_f32_to_f16(qg_rng_uniform(&g_rng, 0.0001f, 0.002f)));
        if (t == QG_Q4_K || t == QG_Q5_K) put16(blk + 2, qg_f32_to_f16(qg_rng_uniform(&g_rng, 0.0001f, 0.002f)));
    }
}

static void test_full(void)
{
    static const size_t shapes[][2] = {{4096, 14336}, {14336, 4096}, {8192, 28672}};
    static const size_t batches[] = {1, 4};
    for (int ti = 0; ti < 4; ti++) {
        const qg_ktype t = k_types[ti];
        for (size_t si = 0; si < COUNT(shapes); si++) {
            const size_t rows = shapes[si][0], cols = shapes[si][1];
            if ((t == QG_Q5_K || t == QG_Q8_K) && si == 2) continue; /* the largest shape for Q4_K and Q6_K */
            const size_t nbytes = rows * (cols / QK) * qg_kq_block_bytes(t), n = 4 * rows;
            uint8_t *w = malloc(nbytes);
            uint16_t *x = malloc(4 * cols * 2), *y16 = malloc(n * 2), *z16 = malloc(n * 2);
            float *y32 = malloc(n * 4), *z32 = malloc(n * 4);
            double *ystar = malloc(n * sizeof(double)), *sabs = malloc(n * sizeof(double));
            QG_CHECK(w && x && y16 && z16 && y32 && z32 && ystar && sabs, "allocation (%zu bytes of weights)", nbytes);
            if (w && x && y16 && z16 && y32 && z32 && ystar && sabs) {
                make_large(t, rows, cols, w);
                make_x(x, 4 * cols, 0);
                if (gemv_exact(t, w, rows, cols, x, 4, ystar, sabs) == 0) {
                    for (size_t bi = 0; bi < COUNT(batches); bi++) {
                        const size_t B = batches[bi];
                        if (run_gemv(g_gemv[t], t, w, rows, cols, x, B, 3, y32, y16, "large") != 0) continue;
                        /* y* of the first B columns: the layout is column-major, so a prefix */
                        check_gemv_values(g_gemv[t], t, rows, cols, B, ystar, sabs, y32, y16, 1, "large");
                        if (B == 1 && si == 0) { /* one thread gives the same bits */
                            qg_set_threads(1);
                            if (run_gemv(g_gemv[t], t, w, rows, cols, x, B, 3, z32, z16, "large, 1 thread") == 0)
                                QG_CHECK(memcmp(y32, z32, rows * 4) == 0, "%s %s gemv %zux%zu: 1 thread differs from %d", qg_kq_name(t),
                                         g_be_name, rows, cols, qg_threads());
                            qg_set_threads(0);
                        }
                    }
                }
                /* dequantization of the whole matrix, exact */
                if (si == 1) check_dequant(t, w, rows, cols, "large");
            }
            free(w);
            free(x);
            free(y16);
            free(z16);
            free(y32);
            free(z32);
            free(ystar);
            free(sabs);
        }
    }
}

int main(int argc, char **argv)
{
    int full = 0, code = 0;
    const int b = qg_test_backend_arg(argc, argv, "test_kq_kernels", &full, &code);
    if (b < 0) return code;
    char why[200];
    g_be = (qg_backend)b;
    g_be_name = argv[1];
    for (int ti = 0; ti < 4; ti++) {
        const char *f = qg_kq_name(k_types[ti]);
        g_deq[ti] = qg_registry_find(f, "dequant", g_be);
        g_gemv[ti] = qg_registry_find(f, "gemv", g_be);
        /* The GPU has no Q8_K dot path (its GEMV takes fp16 activations directly). */
        g_dot[ti] = ti < 3 && g_be != QG_BACKEND_CUDA ? qg_registry_find(f, "dot_q8k", g_be) : NULL;
        QG_CHECK(g_deq[ti] && qg_kernel_available(g_deq[ti], why, sizeof why), "%s dequant %s: %s", f, argv[1], g_deq[ti] ? why : "no row");
        QG_CHECK(g_gemv[ti] && qg_kernel_available(g_gemv[ti], why, sizeof why), "%s gemv %s: %s", f, argv[1], g_gemv[ti] ? why : "no row");
        if (ti < 3 && g_be != QG_BACKEND_CUDA)
            QG_CHECK(g_dot[ti] && qg_kernel_available(g_dot[ti], why, sizeof why), "%s dot_q8k %s: %s", f, argv[1], g_dot[ti] ? why : "no row");
    }
    if (qg_test_failures) return qg_test_end(argv[1]);
    qg_rng_init(&g_rng, full ? 0x4B51F011u : 0x4B51u);
    if (full) {
        test_full();
    } else {
        test_validation();
        test_dequant();
        test_dot();
        test_gemv();
        test_threads();
        test_alignment();
    }
    printf("bounded outputs: %zu (%zu rounded, %zu with y* NaN or inf), worst |y - y*| / bound = %.3g\n", g_seen.outputs, g_seen.rounded,
           g_seen.nonfinite, g_seen.worst_ratio);
    QG_CHECK(g_seen.rounded > 0 && g_seen.worst_ratio > 0.0, "no bounded output was ever rounded: the data exercise nothing");
    if (!full) QG_CHECK(g_seen.nonfinite > 0, "no NaN/inf output was exercised");
    return qg_test_end(full ? "full" : argv[1]);
}
