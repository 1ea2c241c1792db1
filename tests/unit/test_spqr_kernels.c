/* simd.spqr.<backend> / gpu.spqr.cuda / full.spqr.<backend>: one backend's SpQR GEMV (the registry row
 * spqr/gemv/<backend>) on random layers made on the fly from the pinned stream (spqr_layers.h).
 *
 *   values       y_f32 within the bound of the row's numerics, y_f16 within numerics_f16, against the
 *                exact y* with d = qg_spqr_max_terms (n + the longest outlier row); y_f16 is y_f32
 *                rounded once. Shapes m in {16, 32, 48, 256} x n in {1, 15, 16, 17, 33, 100, 4100}, plus
 *                n = 28672 (small m), 40000 and 65536 (m = 16, outliers at columns >= 32768); outliers
 *                none / CSR / PTCSR at densities 0, 1%, 5%, 50%, a fully dense outlier row; permutations
 *                identity / reversed / random; activations with +-0, subnormals, inf and NaN (also at x[0]
 *                under PTCSR padding);
 *   csr = ptcsr  the same outliers as CSR and as PTCSR give bitwise equal outputs (finite x);
 *   batch        column b of every batch 1..16 equals the batch-1 call on that column, bitwise;
 *   outputs      f32-only and f16-only calls equal the combined call;
 *   threads      1, 2, 3 and 7 threads give the same bits;
 *   validation   every invalid layer and argument gets the reference's error, outputs untouched (also with
 *                the fault in the last tile row of a layer split over threads).
 * Every kernel call goes through qg_call_guarded (poisoned outputs, canaries, two runs: full write, no
 * overrun, determinism). No tolerance literal appears here: bounds come from the registry row.
 *
 * usage: test_spqr_kernels BACKEND [full]   (avx2, neon or cuda; exit 77 when BACKEND cannot run here)
 * "full" runs 4096x4096, 11008x4096, 4096x11008 and 8192x28672 at 1% outliers instead.
 */
#include "compare.h"
#include "guard.h"
#include "qg_test.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/threads.h"
#include "qgold/registry.h"
#include "qgold/rng.h"
#include "qgold/spqr.h"
#include "spqr_layers.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { MAXB = QG_SPQR_MAX_BATCH };
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const qg_kernel *g_k;
static const char *g_be_name;
static qg_rng g_rng;

/* What the bounded comparisons saw: a worst ratio of 0, no rounded outputs or no NaN/inf outputs would
 * mean the data did not exercise what the test claims to check. */
static struct {
    double worst_ratio;
    size_t outputs, rounded, nonfinite, layers;
} g_seen;

static void seen(const qg_bound_report *br, const double *ystar, size_t n)
{
    if (br->worst_ratio > g_seen.worst_ratio) g_seen.worst_ratio = br->worst_ratio;
    g_seen.outputs += n;
    g_seen.rounded += br->rounded;
    for (size_t i = 0; i < n; i++) g_seen.nonfinite += !isfinite(ystar[i]);
}

static const char *kind_name(qg_spqr_outlier_kind k) { return k == QG_SPQR_OUTLIERS_CSR ? "csr" : k == QG_SPQR_OUTLIERS_PTCSR ? "ptcsr" : "none"; }
static const char *perm_name(qg_spqr_perm_kind p) { return p == QG_SPQR_PERM_IDENTITY ? "identity" : p == QG_SPQR_PERM_REVERSED ? "reversed" : "random"; }

/* ---- guarded calls --------------------------------------------------------------------------------- */

typedef struct {
    const qg_spqr_layer *L;
    const uint16_t *x;
    size_t batch;
    int outs; /* 1: y_f32, 2: y_f16, 3: both */
} gemv_call;

static int call_gemv(void *vc, void *out)
{
    gemv_call *c = vc;
    const size_t n = c->L->m * c->batch;
    float *y32;
    uint16_t *y16;
    qg_test_gemv_outs(out, n, c->outs, &y32, &y16);
    return g_k->fn.spqr_gemv(c->L, c->x, c->batch, y32, y16);
}

/* A guarded GEMV into y32 (m * batch floats) and y16 (m * batch halves); 0 on success. */
static int run_gemv(const qg_spqr_layer *L, const uint16_t *x, size_t batch, int outs, float *y32, uint16_t *y16, const char *what)
{
    const size_t n = L->m * batch;
    uint16_t *buf = malloc(3 * n * sizeof(uint16_t));
    QG_CHECK(buf != NULL, "allocation");
    if (buf == NULL) return 1;
    gemv_call c = {L, x, batch, outs};
    qg_err e;
    const int rc = qg_call_guarded(call_gemv, &c, buf, 3 * n, sizeof(uint16_t), &e);
    QG_CHECK(rc == QG_ERR_ok, "%s spqr gemv %zux%zu batch %zu (%s): %s", g_be_name, L->m, L->n, batch, what, e.msg);
    if (rc == QG_ERR_ok) {
        if (y32) memcpy(y32, buf, n * sizeof(float));
        if (y16) memcpy(y16, buf + 2 * n, n * sizeof(uint16_t));
    }
    free(buf);
    return rc;
}

/* ---- data ------------------------------------------------------------------------------------------ */

/* Activations from the layer stream, then special values sprinkled in when `special`: +-0, the smallest
 * and largest subnormals, +-inf and NaN (x[0] of column 0 is +inf, so PTCSR padding meets it). */
static void make_x(uint64_t seed, size_t batch, size_t n, int special, uint16_t *x)
{
    qg_spqr_random_x(seed, batch, n, x);
    if (!special) return;
    static const uint16_t k_special[] = {0x0000, 0x8000, 0x0001, 0x83FF, 0x7C00, 0xFC00, 0x7E00, 0xFE01};
    const size_t total = batch * n, count = total / 64 + 2;
    for (size_t i = 0; i < count; i++) x[qg_rng_int_range(&g_rng, total)] = k_special[qg_rng_int_range(&g_rng, COUNT(k_special))];
    x[0] = 0x7C00;
}

/* ---- values ---------------------------------------------------------------------------------------- */

/* y32 and y16 of a batch-B call against y* (bounded), and y16 = RN16(y32). */
static void check_values(const qg_spqr_layer *L, const uint16_t *x, size_t batch, const float *y32, const uint16_t *y16, const char *what)
{
    const size_t m = L->m, n = m * batch;
    const long K = (long)qg_spqr_max_terms(L);
    double *ystar = malloc(n * sizeof(double)), *sabs = malloc(n * sizeof(double));
    uint16_t *want16 = malloc(n * 2);
    float *f16v = malloc(n * sizeof(float));
    QG_CHECK(ystar && sabs && want16 && f16v, "allocation");
    if (!(ystar && sabs && want16 && f16v)) goto out;
    int rc = qg_spqr_exact_product(L, x, batch, ystar, sabs);
    QG_CHECK(rc == QG_ERR_ok, "exact product: %s", qg_error_name(rc));
    if (rc != QG_ERR_ok) goto out;
    qg_bound_report br;
    rc = qg_compare_bounded(&g_k->numerics, K, ystar, sabs, NULL, y32, n, &br);
    seen(&br, ystar, n);
    QG_CHECK(rc == QG_ERR_ok, "%s spqr gemv %zux%zu batch %zu (%s): y_f32 column %zu row %zu: %s (%zu outputs fail)", g_be_name, L->m,
             L->n, batch, what, br.first_failure / m, br.first_failure % m, br.text, br.failures);
    for (size_t i = 0; i < n; i++) {
        want16[i] = qg_f32_to_f16(y32[i]);
        f16v[i] = qg_f16_to_f32(y16[i]);
    }
    qg_exact_report rep;
    rc = qg_compare_exact(QG_ELEM_F16, want16, y16, n, &rep);
    QG_CHECK(rc == QG_ERR_ok, "%s spqr gemv %zux%zu batch %zu (%s): y_f16 is not y_f32 rounded once: column %zu row %zu: %s", g_be_name,
             L->m, L->n, batch, what, rep.index / m, rep.index % m, rep.text);
    rc = qg_compare_bounded(&g_k->numerics_f16, K, ystar, sabs, NULL, f16v, n, &br);
    QG_CHECK(rc == QG_ERR_ok, "%s spqr gemv %zux%zu batch %zu (%s): y_f16 column %zu row %zu: %s (%zu outputs fail)", g_be_name, L->m,
             L->n, batch, what, br.first_failure / m, br.first_failure % m, br.text, br.failures);
out:
    free(ystar);
    free(sabs);
    free(want16);
    free(f16v);
}

/* The layer with its outliers as CSR (the test layer keeps a CSR copy whatever its own kind). */
static qg_spqr_layer as_csr(const qg_spqr_test_layer *t)
{
    qg_spqr_layer L = t->L;
    L.outliers = QG_SPQR_OUTLIERS_CSR;
    L.row_offsets = t->csr_row_offsets;
    L.row_offsets_len = t->L.m + 1;
    L.col_vals = t->csr_col_vals;
    L.nnz = t->csr_nnz;
    return L;
}

/* One layer: values at batch B (special activations or not); for a PTCSR layer with finite
 * activations, the CSR form of the same outliers gives the same bits. */
static void check_layer(const qg_spqr_layer_opts *o, size_t B, int special)
{
    char what[160];
    snprintf(what, sizeof what, "%s outliers, density %g%s, %s perm, seed %llu%s", kind_name(o->outliers), o->density,
             o->dense_row >= 0 ? " + a dense row" : "", perm_name(o->perm), (unsigned long long)o->seed,
             special ? ", special activations" : "");
    qg_spqr_test_layer t;
    int rc = qg_spqr_layer_make(o, &t);
    QG_CHECK(rc == QG_ERR_ok, "layer %zux%zu (%s): %s", o->m, o->n, what, qg_error_name(rc));
    if (rc != QG_ERR_ok) return;
    g_seen.layers++;
    const size_t n = o->m * B;
    uint16_t *x = malloc(B * o->n * 2), *y16 = malloc(n * 2), *z16 = malloc(n * 2);
    float *y32 = malloc(n * 4), *z32 = malloc(n * 4);
    QG_CHECK(x && y16 && z16 && y32 && z32, "allocation");
    if (!(x && y16 && z16 && y32 && z32)) goto out;
    make_x(o->seed ^ 0x5851F42Du, B, o->n, special, x);
    if (run_gemv(&t.L, x, B, 3, y32, y16, what) != 0) goto out;
    check_values(&t.L, x, B, y32, y16, what);
    if (o->outliers == QG_SPQR_OUTLIERS_PTCSR && !special) {
        const qg_spqr_layer C = as_csr(&t);
        if (run_gemv(&C, x, B, 3, z32, z16, what) == 0) {
            QG_CHECK(memcmp(y32, z32, n * 4) == 0 && memcmp(y16, z16, n * 2) == 0,
                     "%s spqr gemv %zux%zu batch %zu (%s): CSR and PTCSR of the same outliers differ", g_be_name, o->m, o->n, B, what);
        }
    }
out:
    free(x);
    free(y16);
    free(z16);
    free(y32);
    free(z32);
    qg_spqr_layer_free(&t);
}

static void test_values(void)
{
    static const size_t ms[] = {16, 32, 48, 256}, ns[] = {1, 15, 16, 17, 33, 100, 4100};
    static const double dens[] = {0.0, 0.01, 0.05, 0.5};
    static const qg_spqr_outlier_kind kinds[] = {QG_SPQR_OUTLIERS_NONE, QG_SPQR_OUTLIERS_CSR, QG_SPQR_OUTLIERS_PTCSR};
    static const qg_spqr_perm_kind perms[] = {QG_SPQR_PERM_IDENTITY, QG_SPQR_PERM_REVERSED, QG_SPQR_PERM_RANDOM};
    uint64_t seed = 1;
    size_t i = 0;
    for (size_t mi = 0; mi < COUNT(ms); mi++)
        for (size_t ni = 0; ni < COUNT(ns); ni++)
            for (size_t ki = 0; ki < COUNT(kinds); ki++)
                for (size_t pi = 0; pi < COUNT(perms); pi++, i++) {
                    const size_t m = ms[mi], n = ns[ni];
                    qg_spqr_layer_opts o = {m, n, dens[i % COUNT(dens)], kinds[ki], perms[pi], seed++, -1, 0};
                    /* every tenth layer has one fully dense outlier row */
                    if (kinds[ki] != QG_SPQR_OUTLIERS_NONE && i % 10 == 3) o.dense_row = (long)((i * 7) % m);
                    const size_t B = m * n > 100000 ? 1 + i % 3 : 1 + i % MAXB;
                    check_layer(&o, B, 0);
                    check_layer(&o, B, 1);
                }
    /* wide layers: n = 28672 (small m), columns >= 32768 */
    static const struct {
        size_t m, n;
        int high;
    } wide[] = {{16, 28672, 0}, {32, 28672, 0}, {16, 40000, 1}, {16, 65536, 1}};
    for (size_t w = 0; w < COUNT(wide); w++)
        for (size_t ki = 1; ki < COUNT(kinds); ki++) {
            qg_spqr_layer_opts o = {wide[w].m, wide[w].n, 0.01, kinds[ki], w % 2 ? QG_SPQR_PERM_RANDOM : QG_SPQR_PERM_REVERSED, seed++,
                                    (long)w, wide[w].high};
            check_layer(&o, 2, 0);
            check_layer(&o, 1, 1);
        }
}

/* ---- batch invariance, output selection, threads ---------------------------------------------------- */

static void test_batch(void)
{
    static const struct {
        size_t m, n;
        qg_spqr_outlier_kind k;
        qg_spqr_perm_kind p;
        int special;
    } cases[] = {{48, 100, QG_SPQR_OUTLIERS_PTCSR, QG_SPQR_PERM_RANDOM, 1},
                 {32, 4100, QG_SPQR_OUTLIERS_CSR, QG_SPQR_PERM_RANDOM, 0},
                 {16, 17, QG_SPQR_OUTLIERS_NONE, QG_SPQR_PERM_REVERSED, 1}};
    for (size_t ci = 0; ci < COUNT(cases); ci++) {
        qg_spqr_layer_opts o = {cases[ci].m, cases[ci].n, 0.05, cases[ci].k, cases[ci].p, 900 + ci, 1, 0};
        qg_spqr_test_layer t;
        int rc = qg_spqr_layer_make(&o, &t);
        QG_CHECK(rc == QG_ERR_ok, "layer: %s", qg_error_name(rc));
        if (rc != QG_ERR_ok) continue;
        const size_t m = o.m, N = MAXB * m;
        uint16_t *x = malloc(MAXB * o.n * 2), *one16 = malloc(N * 2), *y16 = malloc(N * 2), *z16 = malloc(N * 2);
        float *one32 = malloc(N * 4), *y32 = malloc(N * 4), *z32 = malloc(N * 4);
        QG_CHECK(x && one16 && y16 && z16 && one32 && y32 && z32, "allocation");
        if (x && one16 && y16 && z16 && one32 && y32 && z32) {
            make_x(o.seed, MAXB, o.n, cases[ci].special, x);
            int ok = 1;
            for (size_t b = 0; b < MAXB && ok; b++) ok = run_gemv(&t.L, x + b * o.n, 1, 3, one32 + b * m, one16 + b * m, "batch 1") == 0;
            if (ok) check_values(&t.L, x, MAXB, one32, one16, "batch-1 calls");
            for (size_t B = 1; B <= MAXB && ok; B++) {
                if (run_gemv(&t.L, x, B, 3, y32, y16, "batch") != 0) break;
                QG_CHECK(memcmp(one32, y32, B * m * 4) == 0 && memcmp(one16, y16, B * m * 2) == 0,
                         "%s spqr gemv %zux%zu batch %zu: not batch-invariant (a column differs from its batch-1 call)", g_be_name, m,
                         o.n, B);
                /* f32 only and f16 only give the combined call's bits */
                if (B == 1 || B == 5 || B == MAXB) {
                    if (run_gemv(&t.L, x, B, 1, z32, NULL, "f32 only") == 0)
                        QG_CHECK(memcmp(z32, y32, B * m * 4) == 0, "%s batch %zu: f32-only call differs", g_be_name, B);
                    if (run_gemv(&t.L, x, B, 2, NULL, z16, "f16 only") == 0)
                        QG_CHECK(memcmp(z16, y16, B * m * 2) == 0, "%s batch %zu: f16-only call differs", g_be_name, B);
                }
            }
        }
        free(x);
        free(one16);
        free(y16);
        free(z16);
        free(one32);
        free(y32);
        free(z32);
        qg_spqr_layer_free(&t);
    }
}

static void test_threads(void)
{
    static const int threads[] = {2, 3, 7};
    qg_spqr_layer_opts o = {256, 4100, 0.05, QG_SPQR_OUTLIERS_PTCSR, QG_SPQR_PERM_RANDOM, 77, 20, 0};
    qg_spqr_test_layer t;
    int rc = qg_spqr_layer_make(&o, &t);
    QG_CHECK(rc == QG_ERR_ok, "layer: %s", qg_error_name(rc));
    if (rc != QG_ERR_ok) return;
    const size_t B = 4, N = B * o.m;
    uint16_t *x = malloc(B * o.n * 2), *a16 = malloc(N * 2), *b16 = malloc(N * 2);
    float *a32 = malloc(N * 4), *b32 = malloc(N * 4);
    QG_CHECK(x && a16 && b16 && a32 && b32, "allocation");
    if (x && a16 && b16 && a32 && b32) {
        make_x(o.seed, B, o.n, 1, x);
        qg_set_threads(1);
        if (run_gemv(&t.L, x, B, 3, a32, a16, "1 thread") == 0) {
            check_values(&t.L, x, B, a32, a16, "1 thread");
            for (size_t i = 0; i < COUNT(threads); i++) {
                qg_set_threads(threads[i]);
                if (run_gemv(&t.L, x, B, 3, b32, b16, "threads") == 0)
                    QG_CHECK(memcmp(a32, b32, N * 4) == 0 && memcmp(a16, b16, N * 2) == 0,
                             "%s spqr gemv: %d threads differ from 1 thread", g_be_name, threads[i]);
            }
        }
        qg_set_threads(0);
    }
    free(x);
    free(a16);
    free(b16);
    free(a32);
    free(b32);
    qg_spqr_layer_free(&t);
}

/* ---- validation -------------------------------------------------------------------------------------- */

/* The kernel's error equals the reference's (not ok), and neither output was touched. */
static void expect_error(const qg_spqr_layer *L, const uint16_t *x, size_t batch, int null_y32, int null_y16, const char *what)
{
    enum { CAP = 48 * MAXB };
    static float y32[CAP];
    static uint16_t y16[CAP];
    const int want = qg_spqr_gemv_ref(L, x, batch, null_y32 ? NULL : y32, null_y16 ? NULL : y16);
    memset(y32, 0xA5, sizeof y32);
    memset(y16, 0xA5, sizeof y16);
    const int got = g_k->fn.spqr_gemv(L, x, batch, null_y32 ? NULL : y32, null_y16 ? NULL : y16);
    QG_CHECK(want != QG_ERR_ok, "%s: the reference accepts it (test defect)", what);
    QG_CHECK(got == want, "%s spqr gemv (%s): error %d (%s), reference %d (%s)", g_be_name, what, got, qg_error_name(got), want,
             qg_error_name(want));
    QG_CHECK(qg_test_untouched(y32, sizeof y32, 0xA5) && qg_test_untouched(y16, sizeof y16, 0xA5), "%s spqr gemv (%s): wrote output on error", g_be_name,
             what);
}

static void test_validation(void)
{
    qg_spqr_layer_opts o = {48, 40, 0.1, QG_SPQR_OUTLIERS_CSR, QG_SPQR_PERM_RANDOM, 4242, 2, 0};
    qg_spqr_layer_opts op = o;
    op.outliers = QG_SPQR_OUTLIERS_PTCSR;
    qg_spqr_test_layer t, tp;
    int rc = qg_spqr_layer_make(&o, &t);
    QG_CHECK(rc == QG_ERR_ok, "layer: %s", qg_error_name(rc));
    if (rc != QG_ERR_ok) return;
    rc = qg_spqr_layer_make(&op, &tp);
    QG_CHECK(rc == QG_ERR_ok, "layer: %s", qg_error_name(rc));
    if (rc != QG_ERR_ok) {
        qg_spqr_layer_free(&t);
        return;
    }
    const size_t T = qg_spqr_tiles_c(o.n), dw = t.L.dense_words;
    uint16_t x[MAXB * 40];
    qg_spqr_random_x(1, MAXB, o.n, x);
    uint64_t *dense = malloc(dw * 8);
    int32_t *ro = malloc((o.m + 1) * 4), *pro = malloc((o.m / 16 + 1) * 4);
    uint32_t *cv = malloc((t.L.nnz + 1) * 4), *pcv = malloc((tp.L.nnz + 1) * 4);
    uint16_t *perm = malloc(o.n * 2);
    QG_CHECK(dense && ro && pro && cv && pcv && perm, "allocation");
    if (!(dense && ro && pro && cv && pcv && perm)) goto out;
#define FRESH()                                                                  \
    do {                                                                         \
        memcpy(dense, t.L.dense, dw * 8);                                        \
        memcpy(ro, t.L.row_offsets, (o.m + 1) * 4);                              \
        memcpy(cv, t.L.col_vals, t.L.nnz * 4);                                   \
        memcpy(perm, t.L.perm, o.n * 2);                                         \
        memcpy(pro, tp.L.row_offsets, (o.m / 16 + 1) * 4);                      \
        memcpy(pcv, tp.L.col_vals, tp.L.nnz * 4);                                \
        L = t.L;                                                                 \
        L.dense = dense, L.row_offsets = ro, L.col_vals = cv, L.perm = perm;     \
        P = tp.L;                                                                \
        P.dense = dense, P.row_offsets = pro, P.col_vals = pcv, P.perm = perm;   \
    } while (0)
    qg_spqr_layer L, P;
    FRESH();
    /* the fresh copies are valid */
    QG_CHECK(qg_spqr_validate(&L) == QG_ERR_ok && qg_spqr_validate(&P) == QG_ERR_ok, "validation copies invalid (test defect)");

    expect_error(NULL, x, 1, 0, 0, "layer NULL");
    expect_error(&L, NULL, 1, 0, 0, "x NULL");
    expect_error(&L, x, 1, 1, 1, "both outputs NULL");
    expect_error(&L, x, 0, 0, 0, "batch 0");
    expect_error(&L, x, MAXB + 1, 0, 0, "batch 17");
    expect_error(&L, x, 0, 1, 0, "batch 0, f16 only");
    L.m = 40;
    expect_error(&L, x, 1, 0, 0, "m not a multiple of 16");
    FRESH();
    L.n = 0;
    expect_error(&L, x, 1, 0, 0, "n = 0");
    FRESH();
    L.n = QG_SPQR_MAX_N + 1;
    expect_error(&L, x, 1, 0, 0, "n = 65537");
    FRESH();
    L.dense_words = dw - 1;
    expect_error(&L, x, 1, 0, 0, "dense_words short");
    FRESH();
    L.row_offsets_len = o.m;
    expect_error(&L, x, 1, 0, 0, "CSR row_offsets short");
    FRESH();
    L.perm_len = o.n - 1;
    expect_error(&L, x, 1, 0, 0, "perm_len short");
    FRESH();
    dense[(1 * T + 1) * 16 + 5] |= (uint64_t)1 << 62;
    expect_error(&L, x, 1, 0, 0, "bit 62 set");
    FRESH();
    dense[(2 * T + 0) * 16 + 9] ^= (uint64_t)1 << 57; /* row 9 carries byte 4 with row 8 */
    expect_error(&L, x, 1, 0, 0, "fragment copies differ");
    FRESH();
    ro[0] = 1;
    expect_error(&L, x, 1, 0, 0, "row_offsets[0] != 0");
    FRESH();
    ro[5] = ro[6] + 1;
    expect_error(&L, x, 1, 0, 0, "row_offsets decrease");
    FRESH();
    L.nnz = t.L.nnz + 1;
    cv[t.L.nnz] = 1u;
    expect_error(&L, x, 1, 0, 0, "last offset != nnz");
    FRESH();
    if (t.L.nnz > 0) {
        cv[t.L.nnz / 2] = (cv[t.L.nnz / 2] & 0xFFFF0000u) | (uint32_t)o.n;
        expect_error(&L, x, 1, 0, 0, "outlier column >= n");
    }
    FRESH();
    pro[1] += 1;
    pro[2] += 1;
    expect_error(&P, x, 1, 0, 0, "PTCSR segment not a multiple of 16");
    FRESH();
    perm[3] = perm[4];
    expect_error(&L, x, 1, 0, 0, "perm has a duplicate");
    FRESH();
    dense[(0 * T + (T - 1)) * 16 + 3] |= (uint64_t)7 << (6 + 3 * 15); /* column 16(T-1)+15 >= n = 40 */
    expect_error(&L, x, 1, 0, 0, "padded column code nonzero");
    FRESH();
    dense[dw - 1] |= (uint64_t)1 << 63;
    expect_error(&L, x, 0, 0, 0, "batch 0 and bit 63 set: the layer's error first");
    FRESH();
    if (tp.L.nnz > 0) {
        pcv[tp.L.nnz - 1] = (pcv[tp.L.nnz - 1] & 0xFFFF0000u) | 0xFFFFu;
        if (pcv[tp.L.nnz - 1] == 0xFFFFu) pcv[tp.L.nnz - 1] |= 0x3C000000u;
        expect_error(&P, x, 1, 0, 0, "PTCSR outlier column >= n");
    }
    /* an outlier after a padding slot: the shortest row of a tile row gets a word in the last level */
    for (size_t R = 0; R < o.m / 16; R++) {
        const size_t base = (size_t)tp.L.row_offsets[R], levels = ((size_t)tp.L.row_offsets[R + 1] - base) / 16;
        size_t k = 16;
        for (size_t kk = 0; kk < 16 && levels > 1; kk++)
            if (tp.L.col_vals[base + 16 * (levels - 2) + kk] == 0) k = kk;
        if (k == 16) continue;
        FRESH();
        pcv[base + 16 * (levels - 1) + k] = 0x3C000001u;
        expect_error(&P, x, 1, 0, 0, "PTCSR outlier after a padding slot");
        break;
    }
out:
#undef FRESH
    free(dense);
    free(ro);
    free(pro);
    free(cv);
    free(pcv);
    free(perm);
    qg_spqr_layer_free(&t);
    qg_spqr_layer_free(&tp);
}

/* Faults in the last tile row of a layer split over threads: found wherever they are. */
static void test_validation_threads(void)
{
    qg_spqr_layer_opts o = {256, 4100, 0.01, QG_SPQR_OUTLIERS_PTCSR, QG_SPQR_PERM_RANDOM, 4343, -1, 0};
    qg_spqr_test_layer t;
    int rc = qg_spqr_layer_make(&o, &t);
    QG_CHECK(rc == QG_ERR_ok, "layer: %s", qg_error_name(rc));
    if (rc != QG_ERR_ok) return;
    const size_t dw = t.L.dense_words;
    uint64_t *dense = malloc(dw * 8);
    uint16_t *x = malloc(4 * o.n * 2);
    QG_CHECK(dense && x, "allocation");
    if (dense && x) {
        qg_spqr_random_x(3, 4, o.n, x);
        qg_spqr_layer L = t.L;
        L.dense = dense;
        static const int threads[] = {1, 3, 7};
        for (size_t i = 0; i < COUNT(threads); i++) {
            qg_set_threads(threads[i]);
            memcpy(dense, t.L.dense, dw * 8);
            dense[dw - 1] |= (uint64_t)1 << 62;
            expect_error(&L, x, 2, 0, 0, "bit 62 of the last word");
            memcpy(dense, t.L.dense, dw * 8);
            dense[dw - 2] ^= (uint64_t)1 << 61; /* rows 14 and 15 of the last tile disagree */
            expect_error(&L, x, 2, 0, 0, "fragment copies of the last tile differ");
            memcpy(dense, t.L.dense, dw * 8);
            dense[dw - 16] |= (uint64_t)1 << 53; /* code of column 16 (T - 1) + 15 >= n */
            expect_error(&L, x, 2, 0, 0, "padded code in the last tile");
        }
        qg_set_threads(0);
    }
    free(dense);
    free(x);
    qg_spqr_layer_free(&t);
}

/* ---- full: the large shapes --------------------------------------------------------------------------- */

static void test_full(void)
{
    static const size_t shapes[][2] = {{4096, 4096}, {11008, 4096}, {4096, 11008}, {8192, 28672}};
    for (size_t i = 0; i < COUNT(shapes); i++) {
        qg_spqr_layer_opts o = {shapes[i][0], shapes[i][1], 0.01, i % 2 ? QG_SPQR_OUTLIERS_PTCSR : QG_SPQR_OUTLIERS_CSR,
                                QG_SPQR_PERM_RANDOM, 0xF011 + i, 17, 0};
        check_layer(&o, i == 3 ? 1 : 2, 0);
    }
}

int main(int argc, char **argv)
{
    int full = 0, code = 0;
    const int b = qg_test_backend_arg(argc, argv, "test_spqr_kernels", &full, &code);
    if (b < 0) return code;
    char why[200];
    g_be_name = argv[1];
    g_k = qg_registry_find("spqr", "gemv", (qg_backend)b);
    QG_CHECK(g_k && qg_kernel_available(g_k, why, sizeof why), "spqr gemv %s: %s", argv[1], g_k ? why : "no row");
    if (qg_test_failures) return qg_test_end(argv[1]);
    qg_rng_init(&g_rng, full ? 0x5B0F011u : 0x5B0Fu);
    if (full) {
        test_full();
    } else {
        test_validation();
        test_validation_threads();
        test_values();
        test_batch();
        test_threads();
    }
    printf("layers %zu, bounded outputs: %zu (%zu rounded, %zu with y* NaN or inf), worst |y - y*| / bound = %.3g\n", g_seen.layers,
           g_seen.outputs, g_seen.rounded, g_seen.nonfinite, g_seen.worst_ratio);
    QG_CHECK(g_seen.rounded > 0 && g_seen.worst_ratio > 0.0, "no bounded output was ever rounded: the data exercise nothing");
    if (!full) QG_CHECK(g_seen.nonfinite > 0, "no NaN/inf output was exercised");
    return qg_test_end(full ? "full" : argv[1]);
}
