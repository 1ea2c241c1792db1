/* gpu.spqr_extra.cuda: CUDA-only SpQR GEMV checks on the shapes that select the GPU kernel's other work
 * splits and staging paths, which the backend-generic test (test_spqr_kernels.c) does not reach:
 *   - tall layers: 16896 rows (4 tile rows per block, 2 warps per tile row) and 33792 rows (8 tile rows
 *     per block, one warp per tile row, no cross-warp sum);
 *   - batch 16 at n = 65536 (outlier columns >= 32768; activations gathered from global memory and
 *     staged in chunks), n = 4100 (n % 16 != 0) and n = 48 (n = 16 mod 32);
 *   - long outlier rows (more than 1024 outliers in a CSR row, or in a PTCSR tile row's segment / 16),
 *     which the whole block sums with a fixed-order reduction instead of the row's slots: 33792 x 1100
 *     at 94% density (counts around the threshold, long and short rows mixed inside one block) in both
 *     layouts; 256 x 8192 at 1% plus one dense row at batch 16; 1024 x 30000 PTCSR at 5% plus one dense
 *     row at batch 5.
 * For each: y_f32 and y_f16 within the registry row's bound against the exact product; every column of
 * the batch call equals its own batch-1 call, bitwise; a PTCSR layer equals its CSR form, bitwise.
 * Calls go through qg_call_guarded (poisoned outputs, canaries, two runs). Exit 77 without a GPU.
 */
#include "compare.h"
#include "guard.h"
#include "qg_test.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/registry.h"
#include "qgold/spqr.h"
#include "spqr_layers.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const qg_kernel *g_k;
static double g_worst;
static size_t g_rounded;

typedef struct {
    const qg_spqr_layer *L;
    const uint16_t *x;
    size_t batch;
} call_ctx;

/* Guarded output: y32 (m * batch floats) followed by y16 (m * batch halves) in one buffer. */
static int call_fn(void *vctx, void *out)
{
    call_ctx *c = vctx;
    const size_t n = c->L->m * c->batch;
    return g_k->fn.spqr_gemv(c->L, c->x, c->batch, (float *)out, (uint16_t *)((char *)out + n * 4));
}

static int run(const qg_spqr_layer *L, const uint16_t *x, size_t batch, float *y32, uint16_t *y16, const char *what)
{
    const size_t n = L->m * batch;
    unsigned char *buf = malloc(n * 6);
    QG_CHECK(buf != NULL, "allocation");
    if (buf == NULL) return 1;
    call_ctx c = {L, x, batch};
    qg_err e;
    const int rc = qg_call_guarded(call_fn, &c, buf, n * 6, 1, &e);
    QG_CHECK(rc == QG_ERR_ok, "cuda spqr gemv %zux%zu batch %zu (%s): %s", L->m, L->n, batch, what, e.msg);
    if (rc == QG_ERR_ok) {
        memcpy(y32, buf, n * 4);
        memcpy(y16, buf + n * 4, n * 2);
    }
    free(buf);
    return rc;
}

static void check_bound(const qg_spqr_layer *L, const uint16_t *x, size_t batch, const float *y32, const uint16_t *y16, const char *what)
{
    const size_t n = L->m * batch;
    const long K = (long)qg_spqr_max_terms(L);
    double *ystar = malloc(n * sizeof(double)), *sabs = malloc(n * sizeof(double));
    float *f16v = malloc(n * sizeof(float));
    QG_CHECK(ystar && sabs && f16v, "allocation");
    if (ystar && sabs && f16v) {
        int rc = qg_spqr_exact_product(L, x, batch, ystar, sabs);
        QG_CHECK(rc == QG_ERR_ok, "exact product: %s", qg_error_name(rc));
        if (rc == QG_ERR_ok) {
            qg_bound_report br;
            rc = qg_compare_bounded(&g_k->numerics, K, ystar, sabs, NULL, y32, n, &br);
            QG_CHECK(rc == QG_ERR_ok, "cuda spqr %zux%zu batch %zu (%s): y_f32 output %zu: %s (%zu fail)", L->m, L->n, batch, what,
                     br.first_failure, br.text, br.failures);
            if (br.worst_ratio > g_worst) g_worst = br.worst_ratio;
            g_rounded += br.rounded;
            for (size_t i = 0; i < n; i++) f16v[i] = qg_f16_to_f32(y16[i]);
            rc = qg_compare_bounded(&g_k->numerics_f16, K, ystar, sabs, NULL, f16v, n, &br);
            QG_CHECK(rc == QG_ERR_ok, "cuda spqr %zux%zu batch %zu (%s): y_f16 output %zu: %s (%zu fail)", L->m, L->n, batch, what,
                     br.first_failure, br.text, br.failures);
        }
    }
    free(ystar);
    free(sabs);
    free(f16v);
}

static void check(const qg_spqr_layer_opts *o, size_t B, const char *what)
{
    qg_spqr_test_layer t;
    int rc = qg_spqr_layer_make(o, &t);
    QG_CHECK(rc == QG_ERR_ok, "layer %zux%zu (%s): %s", o->m, o->n, what, qg_error_name(rc));
    if (rc != QG_ERR_ok) return;
    const size_t m = o->m, N = m * B;
    uint16_t *x = malloc(B * o->n * 2), *y16 = malloc(N * 2), *z16 = malloc(N * 2);
    float *y32 = malloc(N * 4), *z32 = malloc(N * 4);
    QG_CHECK(x && y16 && z16 && y32 && z32, "allocation");
    if (x && y16 && z16 && y32 && z32) {
        qg_spqr_random_x(o->seed ^ 0xA5A5u, B, o->n, x);
        if (run(&t.L, x, B, y32, y16, what) == 0) {
            check_bound(&t.L, x, B, y32, y16, what);
            /* batch invariance: each column alone */
            for (size_t b = 0; b < B; b++) {
                if (run(&t.L, x + b * o->n, 1, z32 + b * m, z16 + b * m, what) != 0) break;
                QG_CHECK(memcmp(z32 + b * m, y32 + b * m, m * 4) == 0 && memcmp(z16 + b * m, y16 + b * m, m * 2) == 0,
                         "cuda spqr %zux%zu (%s): column %zu of batch %zu differs from its batch-1 call", m, o->n, what, b, B);
            }
            if (o->outliers == QG_SPQR_OUTLIERS_PTCSR) {
                qg_spqr_layer C = t.L;
                C.outliers = QG_SPQR_OUTLIERS_CSR;
                C.row_offsets = t.csr_row_offsets;
                C.row_offsets_len = m + 1;
                C.col_vals = t.csr_col_vals;
                C.nnz = t.csr_nnz;
                if (run(&C, x, B, z32, z16, what) == 0)
                    QG_CHECK(memcmp(y32, z32, N * 4) == 0 && memcmp(y16, z16, N * 2) == 0,
                             "cuda spqr %zux%zu batch %zu (%s): CSR and PTCSR of the same outliers differ", m, o->n, B, what);
            }
        }
    }
    free(x);
    free(y16);
    free(z16);
    free(y32);
    free(z32);
    qg_spqr_layer_free(&t);
}

int main(void)
{
    char why[200];
    if (!qg_backend_available(QG_BACKEND_CUDA, why, sizeof why)) return qg_test_no_gpu(why);
    g_k = qg_registry_find("spqr", "gemv", QG_BACKEND_CUDA);
    QG_CHECK(g_k && qg_kernel_available(g_k, why, sizeof why), "spqr gemv cuda: %s", g_k ? why : "no row");
    if (qg_test_failures) return qg_test_end("gpu.spqr_extra.cuda");
    static const struct {
        size_t m, n;
        double density;
        qg_spqr_outlier_kind k;
        qg_spqr_perm_kind p;
        long dense_row;
        int high;
        size_t batch;
        uint64_t seed;
        const char *what;
    } cases[] = {
        {16896, 100, 0.05, QG_SPQR_OUTLIERS_PTCSR, QG_SPQR_PERM_RANDOM, 7, 0, 3, 4200, "4 tile rows per block"},
        {33792, 33, 0.05, QG_SPQR_OUTLIERS_CSR, QG_SPQR_PERM_REVERSED, 100, 0, 2, 4201, "8 tile rows per block"},
        {33792, 48, 0.05, QG_SPQR_OUTLIERS_PTCSR, QG_SPQR_PERM_RANDOM, -1, 0, 1, 4202, "8 tile rows per block, n = 16 mod 32"},
        {16, 65536, 0.01, QG_SPQR_OUTLIERS_PTCSR, QG_SPQR_PERM_RANDOM, 3, 1, 16, 4203, "n = 65536 at batch 16, columns >= 32768"},
        {64, 4100, 0.05, QG_SPQR_OUTLIERS_CSR, QG_SPQR_PERM_RANDOM, 5, 0, 16, 4204, "n = 4100 at batch 16"},
        {48, 48, 0.5, QG_SPQR_OUTLIERS_PTCSR, QG_SPQR_PERM_REVERSED, 0, 0, 16, 4205, "n = 48 at batch 16"},
        {33792, 1100, 0.94, QG_SPQR_OUTLIERS_CSR, QG_SPQR_PERM_RANDOM, -1, 0, 2, 5300, "CSR rows around the long threshold"},
        {33792, 1100, 0.94, QG_SPQR_OUTLIERS_PTCSR, QG_SPQR_PERM_RANDOM, -1, 0, 2, 5301, "PTCSR tile rows around the long threshold"},
        {256, 8192, 0.01, QG_SPQR_OUTLIERS_CSR, QG_SPQR_PERM_RANDOM, 5, 0, 16, 5302, "one dense CSR row at batch 16"},
        {1024, 30000, 0.05, QG_SPQR_OUTLIERS_PTCSR, QG_SPQR_PERM_REVERSED, 17, 0, 5, 5303, "one dense PTCSR row at batch 5"},
    };
    for (size_t i = 0; i < COUNT(cases); i++) {
        const qg_spqr_layer_opts o = {cases[i].m, cases[i].n, cases[i].density, cases[i].k, cases[i].p, cases[i].seed, cases[i].dense_row,
                                      cases[i].high};
        check(&o, cases[i].batch, cases[i].what);
    }
    printf("worst |y - y*| / bound = %.3g, %zu rounded outputs\n", g_worst, g_rounded);
    QG_CHECK(g_rounded > 0 && g_worst > 0.0, "no bounded output was ever rounded: the data exercise nothing");
    return qg_test_end("gpu.spqr_extra.cuda");
}
