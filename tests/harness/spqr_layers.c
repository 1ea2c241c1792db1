/* Random SpQR layers and their exact products (spqr_layers.h).
 *
 * Recipe (one qg_rng stream seeded with opts.seed, draws in this order):
 *   1. weight codes: rows r = 0..m-1, columns j = 0..n-1 (row-major): q = int_range(8); the padded
 *      columns of a partial last tile are not drawn and get code 0;
 *   2. first-order codes: rows r, tile columns t (row-major): s_q = int_range(8), then z_q = int_range(8);
 *   3. second-order statistics: tiles (R, t) in memory order, each rounded to fp16:
 *      s_s = uniform(-1/16, 1/16), z_s = uniform(1/4, 3/2), s_z = uniform(-1, 8), z_z = uniform(-1, 8);
 *   4. outliers (kind not NONE): rows r, columns c ascending: u = uniform01; the position holds an
 *      outlier when u < density or r == dense_row, and then draws its value
 *      fp16(uniform(-4, 4)) (a value that rounds to +-0 becomes 1.0, so no word is 0 and PTCSR can hold
 *      every outlier); with high_cols the row then gets one more outlier: column
 *      32768 + int_range(n - 32768), value as above;
 *   5. perm RANDOM: qg_rng_permutation over n (n - 1 draws).
 * The outliers are built as CSR (each row's words in ascending column order, the high column last) and
 * converted with qg_spqr_csr_to_ptcsr for PTCSR; the dense words come from qg_spqr_pack.
 */
#include "spqr_layers.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void qg_spqr_layer_free(qg_spqr_test_layer *t)
{
    if (t == NULL) return;
    free(t->dense);
    if (t->row_offsets != t->csr_row_offsets) free(t->row_offsets);
    if (t->col_vals != t->csr_col_vals) free(t->col_vals);
    free(t->csr_row_offsets);
    free(t->csr_col_vals);
    free(t->perm);
    memset(t, 0, sizeof *t);
}

static uint16_t outlier_value(qg_rng *r)
{
    uint16_t v = qg_f32_to_f16(qg_rng_uniform(r, -4.0f, 4.0f));
    return (v & 0x7FFFu) == 0 ? 0x3C00u : v;
}

int qg_spqr_layer_make(const qg_spqr_layer_opts *o, qg_spqr_test_layer *out)
{
    if (out == NULL) return QG_ERR_argument_invalid;
    memset(out, 0, sizeof *out);
    if (o == NULL || o->m == 0 || o->m % QG_SPQR_TILE != 0 || o->n == 0 || o->n > QG_SPQR_MAX_N || !(o->density >= 0.0) ||
        o->density > 1.0 || (o->high_cols && o->n <= 32768) || o->dense_row >= (long)o->m || o->dense_row < -1 ||
        o->m > ((size_t)1 << 24))
        return QG_ERR_argument_invalid;
    const size_t m = o->m, n = o->n, T = qg_spqr_tiles_c(n), RT = m / QG_SPQR_TILE;
    const size_t words = qg_spqr_dense_words(m, n);
    int rc = QG_ERR_alloc_failed;
    qg_rng r;
    qg_rng_init(&r, o->seed);
    uint8_t *q = malloc(m * n), *sq = malloc(m * T), *zq = malloc(m * T);
    uint16_t *st = malloc(RT * T * 4 * sizeof *st);
    uint32_t *pm = NULL;
    out->dense = malloc(words * sizeof *out->dense);
    if (!q || !sq || !zq || !st || !out->dense) goto fail;

    for (size_t i = 0; i < m * n; i++) q[i] = (uint8_t)qg_rng_int_range(&r, 8);
    for (size_t i = 0; i < m * T; i++) {
        sq[i] = (uint8_t)qg_rng_int_range(&r, 8);
        zq[i] = (uint8_t)qg_rng_int_range(&r, 8);
    }
    for (size_t i = 0; i < RT * T; i++) {
        st[4 * i + 0] = qg_f32_to_f16(qg_rng_uniform(&r, -0.0625f, 0.0625f));
        st[4 * i + 1] = qg_f32_to_f16(qg_rng_uniform(&r, 0.25f, 1.5f));
        st[4 * i + 2] = qg_f32_to_f16(qg_rng_uniform(&r, -1.0f, 8.0f));
        st[4 * i + 3] = qg_f32_to_f16(qg_rng_uniform(&r, -1.0f, 8.0f));
    }
    if ((rc = qg_spqr_pack(m, n, q, sq, zq, st, out->dense, words)) != QG_ERR_ok) goto fail;
    rc = QG_ERR_alloc_failed;

    if (o->outliers != QG_SPQR_OUTLIERS_NONE) {
        size_t cap = 1024, nnz = 0;
        out->csr_row_offsets = malloc((m + 1) * sizeof *out->csr_row_offsets);
        out->csr_col_vals = malloc(cap * sizeof *out->csr_col_vals);
        if (!out->csr_row_offsets || !out->csr_col_vals) goto fail;
        out->csr_row_offsets[0] = 0;
        for (size_t row = 0; row < m; row++) {
            for (size_t c = 0; c <= n; c++) {
                uint32_t word;
                if (c < n) {
                    const float u = qg_rng_uniform01(&r);
                    if (!(u < o->density || (long)row == o->dense_row)) continue;
                    word = (uint32_t)c | (uint32_t)outlier_value(&r) << 16;
                } else {
                    if (!o->high_cols) continue;
                    const uint32_t col = 32768u + qg_rng_int_range(&r, n - 32768);
                    word = col | (uint32_t)outlier_value(&r) << 16;
                }
                if (nnz == cap) {
                    uint32_t *g = realloc(out->csr_col_vals, 2 * cap * sizeof *g);
                    if (!g) goto fail;
                    out->csr_col_vals = g;
                    cap *= 2;
                }
                out->csr_col_vals[nnz++] = word;
            }
            if (nnz > INT32_MAX) {
                rc = QG_ERR_argument_invalid;
                goto fail;
            }
            out->csr_row_offsets[row + 1] = (int32_t)nnz;
        }
        out->csr_nnz = nnz;
        if (o->outliers == QG_SPQR_OUTLIERS_CSR) {
            out->row_offsets = out->csr_row_offsets;
            out->col_vals = out->csr_col_vals;
            out->L.row_offsets_len = m + 1;
            out->L.nnz = nnz;
        } else {
            size_t pn = 0;
            if ((rc = qg_spqr_csr_to_ptcsr(m, out->csr_row_offsets, out->csr_col_vals, NULL, NULL, &pn))) goto fail;
            rc = QG_ERR_alloc_failed;
            out->row_offsets = malloc((RT + 1) * sizeof *out->row_offsets);
            out->col_vals = malloc((pn ? pn : 1) * sizeof *out->col_vals);
            if (!out->row_offsets || !out->col_vals) goto fail;
            if ((rc = qg_spqr_csr_to_ptcsr(m, out->csr_row_offsets, out->csr_col_vals, out->row_offsets, out->col_vals, &pn))) goto fail;
            out->L.row_offsets_len = RT + 1;
            out->L.nnz = pn;
        }
    }

    if (o->perm != QG_SPQR_PERM_IDENTITY) {
        out->perm = malloc(n * sizeof *out->perm);
        if (!out->perm) goto fail;
        if (o->perm == QG_SPQR_PERM_REVERSED) {
            for (size_t i = 0; i < n; i++) out->perm[i] = (uint16_t)(n - 1 - i);
        } else {
            if (!(pm = malloc(n * sizeof *pm))) goto fail;
            if ((rc = qg_rng_permutation(&r, pm, n))) goto fail;
            for (size_t i = 0; i < n; i++) out->perm[i] = (uint16_t)pm[i];
        }
    }

    out->L.m = m;
    out->L.n = n;
    out->L.dense = out->dense;
    out->L.dense_words = words;
    out->L.outliers = o->outliers;
    out->L.row_offsets = out->row_offsets;
    out->L.col_vals = out->col_vals;
    out->L.perm = out->perm;
    out->L.perm_len = out->perm ? n : 0;
    rc = qg_spqr_validate(&out->L);
    if (rc != QG_ERR_ok) goto fail;
    free(q);
    free(sq);
    free(zq);
    free(st);
    free(pm);
    return QG_ERR_ok;
fail:
    free(q);
    free(sq);
    free(zq);
    free(st);
    free(pm);
    qg_spqr_layer_free(out);
    return rc;
}

void qg_spqr_random_x(uint64_t seed, size_t batch, size_t n, uint16_t *x)
{
    qg_rng r;
    qg_rng_init(&r, seed);
    for (size_t i = 0; i < batch * n; i++) x[i] = qg_f32_to_f16(qg_rng_uniform(&r, -1.0f, 1.0f));
}

/* ---- exact sums: an expansion of non-overlapping doubles (error-free two-sums), rounded once ---- */

enum { EXP_MAX = 64 }; /* non-overlapping doubles span at most 2098 / 53 < 40 partials */

typedef struct {
    double p[EXP_MAX]; /* increasing magnitude, non-overlapping; their exact sum is the running sum */
    int n;
    int nan, pinf, ninf;
} expansion;

static void exp_add(expansion *e, double x)
{
    if (isnan(x)) {
        e->nan = 1;
        return;
    }
    if (isinf(x)) {
        if (x > 0) e->pinf = 1;
        else e->ninf = 1;
        return;
    }
    if (x == 0.0) return;
    int k = 0;
    for (int i = 0; i < e->n; i++) {
        double y = e->p[i];
        if (fabs(x) < fabs(y)) {
            const double t = x;
            x = y;
            y = t;
        }
        const double hi = x + y, lo = y - (hi - x); /* hi + lo == x + y exactly (|x| >= |y|) */
        if (lo != 0.0 && k < EXP_MAX - 1) e->p[k++] = lo;
        x = hi;
    }
    e->p[k++] = x;
    e->n = k;
}

/* The exact sum rounded to nearest-even double. */
static double exp_round(const expansion *e)
{
    if (e->nan || (e->pinf && e->ninf)) return NAN;
    if (e->pinf) return INFINITY;
    if (e->ninf) return -INFINITY;
    int i = e->n;
    if (i == 0) return 0.0;
    double hi = e->p[--i], lo = 0.0;
    while (i > 0) {
        const double x = hi, y = e->p[--i];
        hi = x + y;
        lo = y - (hi - x);
        if (lo != 0.0) break;
    }
    /* hi + lo was rounded half-even from the top pair; when what lies below has lo's sign, the tie was
     * not a tie: move hi one step toward lo when 2 lo lands exactly on hi's rounding boundary. */
    if (i > 0 && ((lo < 0 && e->p[i - 1] < 0) || (lo > 0 && e->p[i - 1] > 0))) {
        const double y = lo * 2, x = hi + y;
        if (y == x - hi) hi = x;
    }
    return hi;
}

int qg_spqr_exact_product(const qg_spqr_layer *L, const uint16_t *x, size_t batch, double *ystar, double *sum_abs)
{
    if (x == NULL || ystar == NULL || sum_abs == NULL || batch == 0) return QG_ERR_argument_invalid;
    int rc = qg_spqr_validate(L);
    if (rc != QG_ERR_ok) return rc;
    const size_t m = L->m, n = L->n, T = qg_spqr_tiles_c(n);
    double *xp = malloc(batch * n * sizeof *xp), *w = malloc(n * sizeof *w);
    uint16_t *wh = malloc(n * sizeof *wh);
    if (!xp || !w || !wh) {
        rc = QG_ERR_alloc_failed;
        goto done;
    }
    for (size_t b = 0; b < batch; b++)
        for (size_t i = 0; i < n; i++) xp[b * n + i] = qg_f16_to_f32(x[b * n + (L->perm ? (size_t)L->perm[i] : i)]);
    for (size_t r = 0; r < m; r++) {
        const size_t R = r / QG_SPQR_TILE, k = r % QG_SPQR_TILE;
        for (size_t t = 0; t < T; t++) {
            const uint64_t *tile = L->dense + (R * T + t) * QG_SPQR_TILE;
            const size_t cols = n - t * QG_SPQR_TILE;
            qg_spqr_decode_word(tile[k], qg_spqr_second_order(tile), cols < QG_SPQR_TILE ? cols : QG_SPQR_TILE, wh + t * QG_SPQR_TILE);
        }
        for (size_t j = 0; j < n; j++) w[j] = qg_f16_to_f32(wh[j]);
        size_t o0 = 0, o1 = 0, stride = 1;
        if (L->outliers == QG_SPQR_OUTLIERS_CSR) {
            o0 = (size_t)L->row_offsets[r];
            o1 = (size_t)L->row_offsets[r + 1];
        } else if (L->outliers == QG_SPQR_OUTLIERS_PTCSR) {
            o0 = (size_t)L->row_offsets[R] + k;
            o1 = (size_t)L->row_offsets[R + 1];
            stride = QG_SPQR_TILE;
        }
        for (size_t b = 0; b < batch; b++) {
            const double *xb = xp + b * n;
            expansion s, a;
            memset(&s, 0, sizeof s);
            memset(&a, 0, sizeof a);
            for (size_t j = 0; j < n; j++) {
                const double p = w[j] * xb[j]; /* two fp16: exact in double */
                exp_add(&s, p);
                exp_add(&a, fabs(p));
            }
            for (size_t o = o0; o < o1; o += stride) {
                const uint32_t cv = L->col_vals[o];
                if (L->outliers == QG_SPQR_OUTLIERS_PTCSR && cv == 0) continue; /* padding: no term */
                const double p = (double)qg_f16_to_f32((qg_f16)(cv >> 16)) * xb[cv & 0xFFFFu];
                exp_add(&s, p);
                exp_add(&a, fabs(p));
            }
            ystar[b * m + r] = exp_round(&s);
            sum_abs[b * m + r] = exp_round(&a);
        }
    }
done:
    free(xp);
    free(w);
    free(wh);
    return rc;
}
