/* The SpQR audit runner (fixtures.md, section SpQR).
 *
 * dequant cases: the dense part dequantized, tier 1 (NaNs made by arithmetic match any NaN).
 * gemv cases: float32 and fp16 outputs, each judged by the kernel's registered numerics against the
 * fixture's y* and sum|terms| with d = n + the longest outlier row (qg_spqr_max_terms), then batch
 * invariance (each column alone gives the bits it had in the batch).
 * Invalid cases (path gemv, expect = "invalid"): every SpQR kernel, the dequantizer included, must
 * return the named error (a case whose only fault is the GEMV batch has a valid layer: the dequantizer must
 * accept it). Their layers may be inconsistent on purpose, so the layer is passed exactly as stored
 * (lengths from the datasets) and only the output buffers are sized from the attributes.
 */
#include "audit_formats.h"
#include "kinds.h"

#include "compare.h"
#include "fixture.h"
#include "guard.h"

#include "qgold/fp16.h"
#include "qgold/spqr.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    qgh_array dense, ro, cv, perm;
    qg_spqr_layer L;
    int64_t m, n;
} spqr_case_layer;

static void layer_free(spqr_case_layer *c)
{
    qgh_array_free(&c->dense);
    qgh_array_free(&c->ro);
    qgh_array_free(&c->cv);
    qgh_array_free(&c->perm);
}

/* Reads the layer of a case. A present dataset of length 0 still yields a non-NULL pointer, so that
 * "given but empty" is told from "absent" (the kernel sees a length mismatch, not a missing array). */
static int layer_read(qgh_file *f, const qgh_case_info *ci, spqr_case_layer *c, qg_err *e)
{
    static const uint64_t empty[1] = {0};
    char kind[16];
    int64_t has_perm;
    memset(c, 0, sizeof *c);
    int rc;
    if ((rc = qga_attr_range(f, ci, "m", 0, (int64_t)1 << 24, &c->m, e)) || (rc = qga_attr_range(f, ci, "n", 0, (int64_t)1 << 20, &c->n, e)) ||
        (rc = qga_attr_range(f, ci, "has_perm", 0, 1, &has_perm, e)) || (rc = qgh_attr_str(f, ci->name, "outliers", kind, sizeof kind, e)))
        return rc;
    qg_spqr_outlier_kind ok;
    if (strcmp(kind, "none") == 0) ok = QG_SPQR_OUTLIERS_NONE;
    else if (strcmp(kind, "csr") == 0) ok = QG_SPQR_OUTLIERS_CSR;
    else if (strcmp(kind, "ptcsr") == 0) ok = QG_SPQR_OUTLIERS_PTCSR;
    else return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s@outliers = \"%s\": expected none, csr or ptcsr", qgh_name(f), ci->name, kind);
    if ((rc = qgh_read(f, ci->name, "dense", QGH_U64, NULL, 1, NULL, &c->dense, e))) return rc;
    if (ok != QG_SPQR_OUTLIERS_NONE && ((rc = qgh_read(f, ci->name, "row_offsets", QGH_I32, NULL, 1, NULL, &c->ro, e)) ||
                                        (rc = qgh_read(f, ci->name, "col_vals", QGH_U32, NULL, 1, NULL, &c->cv, e))))
        goto fail;
    if (has_perm && (rc = qgh_read(f, ci->name, "perm", QGH_U16, NULL, 1, NULL, &c->perm, e))) goto fail;
    c->L.m = (size_t)c->m;
    c->L.n = (size_t)c->n;
    c->L.dense = c->dense.count ? c->dense.data : (const void *)empty;
    c->L.dense_words = c->dense.count;
    c->L.outliers = ok;
    if (ok != QG_SPQR_OUTLIERS_NONE) {
        c->L.row_offsets = c->ro.count ? c->ro.data : (const void *)empty;
        c->L.row_offsets_len = c->ro.count;
        c->L.col_vals = c->cv.count ? c->cv.data : NULL;
        c->L.nnz = c->cv.count;
    }
    if (has_perm) {
        c->L.perm = c->perm.count ? c->perm.data : (const void *)empty;
        c->L.perm_len = c->perm.count;
    }
    return QG_ERR_ok;
fail:
    layer_free(c);
    return rc;
}

typedef struct {
    const qg_kernel *k;
    const qg_spqr_layer *L;
    const uint16_t *x;
    size_t batch;
    int f16;
} spqr_ctx;

static int call_deq(void *vc, void *out)
{
    spqr_ctx *c = vc;
    return c->k->fn.spqr_dequant(c->L, out);
}

static int call_gemv(void *vc, void *out)
{
    spqr_ctx *c = vc;
    return c->k->fn.spqr_gemv(c->L, c->x, c->batch, c->f16 ? NULL : out, c->f16 ? out : NULL);
}

static int call_gemv_column(void *vc, size_t b, void *out)
{
    spqr_ctx one = *(const spqr_ctx *)vc;
    one.x += b * one.L->n;
    one.batch = 1;
    one.f16 = 0;
    return call_gemv(&one, out);
}

/* An invalid layer: the kernel must name the fixture's error. Outputs are sized from m, n and batch in
 * case a faulty kernel accepts the layer and writes. */
static int run_invalid(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, spqr_case_layer *c, qg_err *e)
{
    int64_t batch = 1;
    qgh_array x;
    memset(&x, 0, sizeof x);
    int rc = QG_ERR_ok;
    if (k->kind == QG_KIND_SPQR_GEMV) {
        if ((rc = qga_attr_range(f, ci, "batch", 0, 64, &batch, e))) return rc;
        if ((rc = qgh_read(f, ci->name, "x", QGH_U16, "float16", 2, NULL, &x, e))) return rc;
    }
    const size_t need_x = (size_t)batch * (size_t)c->n, need_y = k->kind == QG_KIND_SPQR_GEMV ? (size_t)batch * (size_t)c->m : (size_t)c->m * (size_t)c->n;
    if (need_y > ((size_t)1 << 27)) {
        rc = qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s: m x n too large for an invalid case", qgh_name(f), ci->name);
        goto done;
    }
    uint16_t *xb = calloc(need_x + 1, 2);
    float *y = malloc(need_y * 4 + 4);
    if (!xb || !y) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    } else {
        if (x.data != NULL) memcpy(xb, x.data, (x.count < need_x ? x.count : need_x) * 2);
        spqr_ctx cc = {k, &c->L, xb, (size_t)batch, 0};
        if (k->kind == QG_KIND_SPQR_DEQUANT && qg_error_from_name(ci->error) == QG_ERR_spqr_batch_out_of_range) {
            /* Only the batch is wrong: the layer is valid and the dequantizer (no batch) must accept it. */
            const int got = call_deq(&cc, y);
            if (got != QG_ERR_ok)
                rc = qg_err_set(e, QG_ERR_mismatch, "%s: case %s (%s): the layer is valid (only the GEMV batch is not) but the "
                                "dequantizer returned %s", qgh_name(f), ci->case_id, ci->description, qg_error_name(got));
        } else {
            rc = qga_expect_error(f, ci, k->kind == QG_KIND_SPQR_GEMV ? call_gemv(&cc, y) : call_deq(&cc, y), e);
        }
    }
    free(xb);
    free(y);
done:
    qgh_array_free(&x);
    return rc;
}

static int run_dequant(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, spqr_case_layer *c, qg_audit_row *row, qg_err *e)
{
    qgh_array ex;
    const size_t m = (size_t)c->m, n = (size_t)c->n, dims[2] = {m, n};
    int rc = qgh_read(f, ci->name, "expected_w", QGH_U16, "float16", 2, dims, &ex, e);
    if (rc) return rc;
    uint16_t *w = malloc(m * n * 2 + 2);
    spqr_ctx cc = {k, &c->L, NULL, 0, 0};
    rc = w ? qg_call_guarded(call_deq, &cc, w, m * n, 2, e) : qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    if (rc != QG_ERR_ok) {
        if (w) qga_guard_fail(f, ci, rc, e);
    } else {
        qg_exact_report rep;
        /* NaNs of a dequantization come from arithmetic on inf/NaN statistics: their sign is the machine's. */
        rc = qg_compare_exact_nan_any(QG_ELEM_F16, ex.data, w, m * n, &rep);
        if (rc != QG_ERR_ok)
            qg_err_set(e, rc, "%s: case %s (%s): weight row %zu col %zu (permuted column space): %s; fixtures come from "
                       "generators/regen.py", qgh_name(f), ci->case_id, ci->description, rep.index / n, rep.index % n, rep.text);
        row->elements += m * n;
    }
    free(w);
    qgh_array_free(&ex);
    return rc;
}

static int run_gemv(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, spqr_case_layer *c, qg_audit_row *row, qg_err *e)
{
    int64_t batch;
    qgh_array x, ystar, sabs;
    memset(&x, 0, sizeof x);
    memset(&ystar, 0, sizeof ystar);
    memset(&sabs, 0, sizeof sabs);
    int rc = qga_attr_range(f, ci, "batch", 1, QG_SPQR_MAX_BATCH, &batch, e);
    if (rc) return rc;
    const size_t m = (size_t)c->m, n = (size_t)c->n, B = (size_t)batch, ny = B * m;
    const size_t dx[2] = {B, n}, dy[2] = {B, m};
    if ((rc = qgh_read(f, ci->name, "x", QGH_U16, "float16", 2, dx, &x, e)) || (rc = qgh_read(f, ci->name, "ystar", QGH_F64, NULL, 2, dy, &ystar, e)) ||
        (rc = qgh_read(f, ci->name, "sum_abs", QGH_F64, NULL, 2, dy, &sabs, e)))
        goto done;
    float *y = malloc(ny * 4 + 4), *yb = malloc(m * 4 + 4);
    uint16_t *y16 = malloc(ny * 2 + 2);
    spqr_ctx cc = {k, &c->L, x.data, B, 0};
    qg_bound_report br;
    long K = 0;
    if (!y || !yb || !y16) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
        goto out;
    }
    /* d comes from the layer, which a valid case must hold (max_terms trusts it). */
    if ((rc = qg_spqr_validate(&c->L)) != QG_ERR_ok) {
        rc = qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: case %s: a valid case's layer fails validation (%s)", qgh_name(f), ci->case_id,
                        qg_error_name(rc));
        goto out;
    }
    K = (long)qg_spqr_max_terms(&c->L);
    if ((rc = qg_call_guarded(call_gemv, &cc, y, ny, 4, e))) {
        qga_guard_fail(f, ci, rc, e);
        goto out;
    }
    rc = qg_compare_bounded(&k->numerics, K, ystar.data, sabs.data, NULL, y, ny, &br);
    if (br.worst_ratio > row->worst_ratio) row->worst_ratio = br.worst_ratio;
    if (rc != QG_ERR_ok) {
        qg_err_set(e, rc, "%s: case %s (%s): float32 output [batch][row] = [%zu][%zu] (d = %ld): %s", qgh_name(f), ci->case_id,
                   ci->description, br.first_failure / m, br.first_failure % m, K, br.text);
        goto out;
    }
    cc.f16 = 1;
    if ((rc = qg_call_guarded(call_gemv, &cc, y16, ny, 2, e))) {
        qga_guard_fail(f, ci, rc, e);
        goto out;
    }
    for (size_t i = 0; i < ny; i++) y[i] = qg_f16_to_f32(y16[i]);
    rc = qg_compare_bounded(&k->numerics_f16, K, ystar.data, sabs.data, NULL, y, ny, &br);
    if (br.worst_ratio > row->worst_ratio) row->worst_ratio = br.worst_ratio;
    if (rc != QG_ERR_ok) {
        qg_err_set(e, rc, "%s: case %s (%s): fp16 output [batch][row] = [%zu][%zu] (d = %ld): %s", qgh_name(f), ci->case_id, ci->description,
                   br.first_failure / m, br.first_failure % m, K, br.text);
        goto out;
    }
    /* Batch invariance: each column alone gives the bits it had inside the batch. */
    cc.f16 = 0;
    if ((rc = qg_call_guarded(call_gemv, &cc, y, ny, 4, e))) {
        qga_guard_fail(f, ci, rc, e);
        goto out;
    }
    if ((rc = qga_batch_invariance(f, ci, call_gemv_column, &cc, y, B, m, yb, e))) goto out;
    row->elements += 2 * ny;
out:
    free(y);
    free(yb);
    free(y16);
done:
    qgh_array_free(&x);
    qgh_array_free(&ystar);
    qgh_array_free(&sabs);
    return rc;
}

static int run_spqr_case(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    spqr_case_layer c;
    int rc = layer_read(f, ci, &c, e);
    if (rc) return rc;
    if (strcmp(ci->expect, "invalid") == 0) rc = run_invalid(k, f, ci, &c, e);
    else if (strcmp(ci->expect, "valid") != 0)
        rc = qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s@expect = \"%s\"", qgh_name(f), ci->name, ci->expect);
    else if (strcmp(ci->path, "dequant") == 0 && k->kind == QG_KIND_SPQR_DEQUANT) rc = run_dequant(k, f, ci, &c, row, e);
    else if (strcmp(ci->path, "gemv") == 0 && k->kind == QG_KIND_SPQR_GEMV) rc = run_gemv(k, f, ci, &c, row, e);
    else rc = qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s: path %s is not run by kernel %s", qgh_name(f), ci->name, ci->path, k->name);
    layer_free(&c);
    return rc;
}

/* The dequantizer must also reject the invalid gemv layers (reference/spec/fixtures.md). */
static int shares_dequant(const qg_kernel *k, const qgh_case_info *ci)
{
    (void)k;
    return strcmp(ci->path, "gemv") == 0 && strcmp(ci->expect, "invalid") == 0;
}

const qga_kind qga_kind_spqr_dequant = {QG_KIND_SPQR_DEQUANT, "spqr_dequant", run_spqr_case, shares_dequant, NULL};
const qga_kind qga_kind_spqr_gemv = {QG_KIND_SPQR_GEMV, "spqr_gemv", run_spqr_case, NULL, NULL};
