/* The INT8 audit runners (reference/spec/intq.md, fixture schema of golden/int8).
 *
 * quantize: codes and scales bit-exact. dequant: float32 and fp16 outputs bit-exact. w8a8: the int32
 * sums, the float32 and the fp16 outputs bit-exact (memcmp; where the fixture holds a NaN, made by the
 * epilogue from a NaN bias or inf * 0, any NaN matches), then batch invariance (each A row alone gives
 * its row of the batch). w8a16: float32 and fp16 outputs within the row's bound against ystar with
 * chain length K, then batch invariance. Every kernel call is guarded (poison, canaries, two runs).
 *
 * Invalid cases: the kernel must return the fixture's error. The API takes pointers, so a dataset whose
 * length disagrees with the case's shape attributes (B with 4 columns for K = 3, 3 scales for 2 rows)
 * cannot reach a kernel: the runner's own size check answers size_mismatch for it, as a caller must;
 * every other invalid case is passed to the kernel as it is.
 */
#include "audit_formats.h"
#include "kinds.h"

#include "compare.h"
#include "fixture.h"
#include "guard.h"

#include "qgold/fp16.h"
#include "qgold/intq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { DIM_MAX = 1 << 24 };

/* A non-NULL pointer for an empty dataset (K = 0, M = 0): the kernel must see the shape, not a NULL. */
static const uint64_t k_empty[2];
static const void *data_or_empty(const qgh_array *a) { return a->count ? a->data : (const void *)k_empty; }

static int is_invalid(const qgh_case_info *ci) { return strcmp(ci->expect, "invalid") == 0; }

static int ftype_attr(qgh_file *f, const qgh_case_info *ci, const char *attr, int allow_none, int *t, qg_err *e)
{
    char v[32];
    const int rc = qgh_attr_str(f, ci->name, attr, v, sizeof v, e);
    if (rc) return rc;
    if (strcmp(v, "float32") == 0) *t = QG_INT8_F32;
    else if (strcmp(v, "float16") == 0) *t = QG_INT8_F16;
    else if (allow_none && strcmp(v, "none") == 0) *t = -1;
    else
        return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s@%s: \"%s\" is not float32 or float16%s", qgh_name(f), ci->name, attr, v,
                          allow_none ? " or none" : "");
    return QG_ERR_ok;
}

/* A float dataset of type t: uint32 "float32" or uint16 "float16", rank `rank`. */
static int read_ftype(qgh_file *f, const qgh_case_info *ci, const char *name, int t, int rank, qgh_array *a, qg_err *e)
{
    return qgh_read(f, ci->name, name, t == QG_INT8_F16 ? QGH_U16 : QGH_U32, t == QG_INT8_F16 ? "float16" : "float32", rank, NULL, a,
                    e);
}

/* The size_mismatch of an invalid case whose datasets disagree with its attributes, or a fixture error
 * for a valid one. */
static int size_disagrees(qgh_file *f, const qgh_case_info *ci, const char *what, qg_err *e)
{
    if (is_invalid(ci)) return qga_expect_error(f, ci, QG_ERR_size_mismatch, e);
    return qg_err_set(e, QG_ERR_fixture_shape_mismatch, "%s: /%s: %s does not match the case's shape attributes", qgh_name(f), ci->name,
                      what);
}

static int compare(qgh_file *f, const qgh_case_info *ci, qg_elem t, const void *ex, const void *got, size_t n, size_t cols,
                   const char *what, qg_err *e)
{
    qg_exact_report rep;
    const size_t es = qg_elem_size(t);
    int has_nan = 0;
    for (size_t i = 0; i < n && !has_nan && (t == QG_ELEM_F32 || t == QG_ELEM_F16); i++) {
        if (t == QG_ELEM_F32) {
            float v;
            memcpy(&v, (const unsigned char *)ex + 4 * i, 4);
            has_nan = isnan(v);
        } else {
            has_nan = qg_f16_isnan(((const uint16_t *)ex)[i]);
        }
    }
    /* memcmp where no NaN is expected; a NaN made by arithmetic matches any NaN */
    if (!has_nan && memcmp(ex, got, n * es) == 0) return QG_ERR_ok;
    int rc = has_nan ? qg_compare_exact_nan_any(t, ex, got, n, &rep) : qg_compare_exact(t, ex, got, n, &rep);
    if (rc == QG_ERR_ok) return rc;
    return qg_err_set(e, rc, "%s: case %s (%s): %s [%zu][%zu]: %s", qgh_name(f), ci->case_id, ci->description, what, rep.index / cols,
                      rep.index % cols, rep.text);
}

/* ---- quantize / dequant ---- */

static int read_qshape(qgh_file *f, const qgh_case_info *ci, qg_int8_qshape *s, qg_err *e)
{
    int64_t rows, cols, group;
    char g[32];
    int st = 0, rc;
    if ((rc = qga_attr_range(f, ci, "rows", 0, DIM_MAX, &rows, e)) || (rc = qga_attr_range(f, ci, "cols", 0, DIM_MAX, &cols, e)) ||
        (rc = qga_attr_range(f, ci, "group", 0, DIM_MAX, &group, e)) || (rc = ftype_attr(f, ci, "scale_type", 0, &st, e)) ||
        (rc = qgh_attr_str(f, ci->name, "granularity", g, sizeof g, e)))
        return rc;
    memset(s, 0, sizeof *s);
    s->rows = (size_t)rows;
    s->cols = (size_t)cols;
    s->group = (size_t)group;
    s->scale_type = (qg_int8_ftype)st;
    if (strcmp(g, "tensor") == 0) s->gran = QG_INT8_PER_TENSOR;
    else if (strcmp(g, "row") == 0) s->gran = QG_INT8_PER_ROW;
    else if (strcmp(g, "group") == 0) s->gran = QG_INT8_PER_GROUP;
    else
        return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s@granularity: \"%s\" is not tensor, row or group", qgh_name(f), ci->name, g);
    return QG_ERR_ok;
}

/* The scale count the shape implies when its rows, cols and group make sense, else SIZE_MAX (the
 * kernel names the shape's error itself). */
static size_t scale_count(const qg_int8_qshape *s)
{
    const size_t n = qg_int8_num_scales(s);
    return n ? n : SIZE_MAX;
}

typedef struct {
    const qg_kernel *k;
    qg_int8_qshape s;
    const void *x;
    int src;
    size_t sbytes;
    const int8_t *q;
    const void *scales;
} qd_ctx;

/* out = [scales | codes] */
static int call_quantize(void *vc, void *out)
{
    qd_ctx *c = vc;
    return c->k->fn.int8_quantize(&c->s, c->x, (qg_int8_ftype)c->src, (int8_t *)out + c->sbytes, out);
}

static int run_quantize(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    qd_ctx c;
    memset(&c, 0, sizeof c);
    c.k = k;
    qgh_array x, eq, es;
    memset(&x, 0, sizeof x);
    memset(&eq, 0, sizeof eq);
    memset(&es, 0, sizeof es);
    int rc = read_qshape(f, ci, &c.s, e);
    if (rc || (rc = ftype_attr(f, ci, "src_type", 0, &c.src, e)) || (rc = read_ftype(f, ci, "x", c.src, 2, &x, e))) return rc;
    const size_t n = c.s.rows * c.s.cols, ns = scale_count(&c.s);
    if (x.dims[0] != c.s.rows || x.dims[1] != c.s.cols) {
        rc = size_disagrees(f, ci, "x", e);
        goto done;
    }
    c.x = data_or_empty(&x);
    if (is_invalid(ci)) {
        /* outputs sized for the shape when it is valid, else a token buffer the kernel must not touch */
        const size_t bytes = ns == SIZE_MAX ? 16 : ns * 4 + n + 16;
        uint8_t *out = malloc(bytes);
        c.sbytes = ns == SIZE_MAX ? 0 : ns * 4;
        rc = out ? qga_expect_error(f, ci, call_quantize(&c, out), e) : qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
        free(out);
        goto done;
    }
    if (ns == SIZE_MAX) {
        rc = qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s: a valid case with an invalid shape", qgh_name(f), ci->name);
        goto done;
    }
    const size_t dq[2] = {c.s.rows, c.s.cols}, dsc[1] = {ns};
    if ((rc = qgh_read(f, ci->name, "expected_q", QGH_I8, NULL, 2, dq, &eq, e)) ||
        (rc = qgh_read(f, ci->name, "expected_scales", c.s.scale_type == QG_INT8_F16 ? QGH_U16 : QGH_U32,
                       c.s.scale_type == QG_INT8_F16 ? "float16" : "float32", 1, dsc, &es, e)))
        goto done;
    c.sbytes = ns * (c.s.scale_type == QG_INT8_F16 ? 2u : 4u);
    uint8_t *out = malloc(c.sbytes + n);
    if (out == NULL) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
        goto done;
    }
    if ((rc = qg_call_guarded(call_quantize, &c, out, c.sbytes + n, 1, e)) != QG_ERR_ok)
        qga_guard_fail(f, ci, rc, e);
    else if ((rc = compare(f, ci, c.s.scale_type == QG_INT8_F16 ? QG_ELEM_F16 : QG_ELEM_F32, es.data, out, ns, ns, "scale", e)) ==
             QG_ERR_ok)
        rc = compare(f, ci, QG_ELEM_U8, eq.data, out + c.sbytes, n, c.s.cols, "code", e);
    row->elements += n + ns;
    free(out);
done:
    qgh_array_free(&x);
    qgh_array_free(&eq);
    qgh_array_free(&es);
    return rc;
}

/* out = [y32 (n floats) | y16 (n halves)] */
static int call_dequant(void *vc, void *out)
{
    qd_ctx *c = vc;
    const size_t n = c->s.rows * c->s.cols;
    return c->k->fn.int8_dequant(&c->s, c->q, c->scales, out, (uint16_t *)((float *)out + n));
}

static int run_dequant(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    qd_ctx c;
    memset(&c, 0, sizeof c);
    c.k = k;
    qgh_array q, sc, e32, e16;
    memset(&q, 0, sizeof q);
    memset(&sc, 0, sizeof sc);
    memset(&e32, 0, sizeof e32);
    memset(&e16, 0, sizeof e16);
    int rc = read_qshape(f, ci, &c.s, e);
    if (rc || (rc = qgh_read(f, ci->name, "q", QGH_I8, NULL, 2, NULL, &q, e)) ||
        (rc = read_ftype(f, ci, "scales", c.s.scale_type, 1, &sc, e)))
        goto done;
    const size_t n = c.s.rows * c.s.cols, ns = scale_count(&c.s);
    if (q.dims[0] != c.s.rows || q.dims[1] != c.s.cols || (ns != SIZE_MAX && sc.count != ns)) {
        rc = size_disagrees(f, ci, "q or scales", e);
        goto done;
    }
    c.q = data_or_empty(&q);
    c.scales = data_or_empty(&sc);
    if (is_invalid(ci)) {
        float *out = malloc(ns == SIZE_MAX ? 16 : n * 6 + 16);
        rc = out ? qga_expect_error(f, ci, call_dequant(&c, out), e) : qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
        free(out);
        goto done;
    }
    const size_t dy[2] = {c.s.rows, c.s.cols};
    if ((rc = qgh_read(f, ci->name, "expected_f32", QGH_U32, NULL, 2, dy, &e32, e)) ||
        (rc = qgh_read(f, ci->name, "expected_f16", QGH_U16, NULL, 2, dy, &e16, e)))
        goto done;
    uint8_t *out = malloc(n * 6);
    if (out == NULL) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
        goto done;
    }
    if ((rc = qg_call_guarded(call_dequant, &c, out, n * 3, 2, e)) != QG_ERR_ok)
        qga_guard_fail(f, ci, rc, e);
    else if ((rc = compare(f, ci, QG_ELEM_F32, e32.data, out, n, c.s.cols, "float32 output", e)) == QG_ERR_ok)
        rc = compare(f, ci, QG_ELEM_F16, e16.data, out + 4 * n, n, c.s.cols, "fp16 output", e);
    row->elements += 2 * n;
    free(out);
done:
    qgh_array_free(&q);
    qgh_array_free(&sc);
    qgh_array_free(&e32);
    qgh_array_free(&e16);
    return rc;
}

/* ---- W8A8 ---- */

typedef struct {
    const qg_kernel *k;
    qg_int8_w8a8_args p;
} w8a8_ctx;

/* out = [acc (MN int32) | y32 (MN) | y16 (MN halves)] */
static int call_w8a8(void *vc, void *out)
{
    w8a8_ctx *c = vc;
    const size_t mn = c->p.M * c->p.N;
    return c->k->fn.int8_w8a8(&c->p, out, (float *)out + mn, (uint16_t *)((float *)out + 2 * mn));
}

/* Row b of A alone (M = 1, its own sa), float32 output only. */
static int call_w8a8_row(void *vc, size_t b, void *out)
{
    const w8a8_ctx *c = vc;
    qg_int8_w8a8_args p = c->p;
    p.M = 1;
    p.A += b * p.K;
    p.sa += p.sa_len == 1 ? 0 : b;
    p.sa_len = 1;
    return c->k->fn.int8_w8a8(&p, NULL, out, NULL);
}

static int run_w8a8(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    int64_t M, N, K, relu, sal, sbl;
    int bias_t = -1, rc;
    qgh_array A, B, sa, sb, bias, eacc, e32, e16;
    memset(&A, 0, sizeof A);
    memset(&B, 0, sizeof B);
    memset(&sa, 0, sizeof sa);
    memset(&sb, 0, sizeof sb);
    memset(&bias, 0, sizeof bias);
    memset(&eacc, 0, sizeof eacc);
    memset(&e32, 0, sizeof e32);
    memset(&e16, 0, sizeof e16);
    if ((rc = qga_attr_range(f, ci, "M", 0, DIM_MAX, &M, e)) || (rc = qga_attr_range(f, ci, "N", 0, DIM_MAX, &N, e)) ||
        (rc = qga_attr_range(f, ci, "K", 0, DIM_MAX, &K, e)) || (rc = qga_attr_range(f, ci, "relu", 0, 1, &relu, e)) ||
        (rc = qga_attr_range(f, ci, "sa_len", 0, DIM_MAX, &sal, e)) || (rc = qga_attr_range(f, ci, "sb_len", 0, DIM_MAX, &sbl, e)) ||
        (rc = ftype_attr(f, ci, "bias", 1, &bias_t, e)))
        return rc;
    if ((rc = qgh_read(f, ci->name, "A", QGH_I8, NULL, 2, NULL, &A, e)) || (rc = qgh_read(f, ci->name, "B", QGH_I8, NULL, 2, NULL, &B, e)) ||
        (rc = qgh_read(f, ci->name, "sa", QGH_U32, "float32", 1, NULL, &sa, e)) ||
        (rc = qgh_read(f, ci->name, "sb", QGH_U32, "float32", 1, NULL, &sb, e)) ||
        (bias_t >= 0 && (rc = read_ftype(f, ci, "bias", bias_t, 1, &bias, e))))
        goto done;
    const size_t m = (size_t)M, n = (size_t)N, kk = (size_t)K, mn = m * n;
    if (A.dims[0] != m || A.dims[1] != kk || B.dims[0] != n || B.dims[1] != kk || sa.count != (size_t)sal || sb.count != (size_t)sbl ||
        (bias_t >= 0 && bias.count != n)) {
        rc = size_disagrees(f, ci, "A, B, sa, sb or bias", e);
        goto done;
    }
    w8a8_ctx c = {k, {m, n, kk, data_or_empty(&A), data_or_empty(&B), data_or_empty(&sa), sa.count, data_or_empty(&sb), sb.count,
                      bias_t >= 0 ? data_or_empty(&bias) : NULL, bias_t == QG_INT8_F16 ? QG_INT8_F16 : QG_INT8_F32, (int)relu}};
    uint8_t *out = malloc(mn * 10 + 16), *yb = malloc(n * 4 + 16);
    if (out == NULL || yb == NULL) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
        goto out;
    }
    if (is_invalid(ci)) {
        rc = qga_expect_error(f, ci, call_w8a8(&c, out), e);
        goto out;
    }
    const size_t dy[2] = {m, n};
    if ((rc = qgh_read(f, ci->name, "expected_acc", QGH_I32, NULL, 2, dy, &eacc, e)) ||
        (rc = qgh_read(f, ci->name, "expected_f32", QGH_U32, NULL, 2, dy, &e32, e)) ||
        (rc = qgh_read(f, ci->name, "expected_f16", QGH_U16, NULL, 2, dy, &e16, e)))
        goto out;
    if ((rc = qg_call_guarded(call_w8a8, &c, out, mn * 5, 2, e)) != QG_ERR_ok) {
        qga_guard_fail(f, ci, rc, e);
        goto out;
    }
    if ((rc = compare(f, ci, QG_ELEM_I32, eacc.data, out, mn, n, "int32 output", e)) ||
        (rc = compare(f, ci, QG_ELEM_F32, e32.data, out + 4 * mn, mn, n, "float32 output", e)) ||
        (rc = compare(f, ci, QG_ELEM_F16, e16.data, out + 8 * mn, mn, n, "fp16 output", e)))
        goto out;
    /* Batch invariance: every A row alone gives its float32 row of the batch, bitwise. */
    rc = qga_batch_invariance(f, ci, call_w8a8_row, &c, (const float *)(const void *)(out + 4 * mn), m, n, (float *)(void *)yb, e);
    row->elements += 3 * mn;
out:
    free(out);
    free(yb);
done:
    qgh_array_free(&A);
    qgh_array_free(&B);
    qgh_array_free(&sa);
    qgh_array_free(&sb);
    qgh_array_free(&bias);
    qgh_array_free(&eacc);
    qgh_array_free(&e32);
    qgh_array_free(&e16);
    return rc;
}

/* ---- W8A16 ---- */

typedef struct {
    const qg_kernel *k;
    const int8_t *B;
    const void *sb;
    int st;
    size_t N, K, M;
    const uint16_t *X;
} w8a16_ctx;

/* out = [y32 (MN) | y16 (MN halves)] */
static int call_w8a16(void *vc, void *out)
{
    w8a16_ctx *c = vc;
    return c->k->fn.int8_w8a16(c->B, c->sb, (qg_int8_ftype)c->st, c->N, c->K, c->X, c->M, out,
                               (uint16_t *)((float *)out + c->M * c->N));
}

static int call_w8a16_row(void *vc, size_t b, void *out)
{
    const w8a16_ctx *c = vc;
    return c->k->fn.int8_w8a16(c->B, c->sb, (qg_int8_ftype)c->st, c->N, c->K, c->X + b * c->K, 1, out, NULL);
}

static int run_w8a16(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    int64_t M, N, K;
    int st = 0, rc;
    qgh_array B, sb, X, ys, sabs;
    memset(&B, 0, sizeof B);
    memset(&sb, 0, sizeof sb);
    memset(&X, 0, sizeof X);
    memset(&ys, 0, sizeof ys);
    memset(&sabs, 0, sizeof sabs);
    if ((rc = qga_attr_range(f, ci, "M", 0, DIM_MAX, &M, e)) || (rc = qga_attr_range(f, ci, "N", 0, DIM_MAX, &N, e)) ||
        (rc = qga_attr_range(f, ci, "K", 0, DIM_MAX, &K, e)) || (rc = ftype_attr(f, ci, "scale_type", 0, &st, e)))
        return rc;
    if ((rc = qgh_read(f, ci->name, "B", QGH_I8, NULL, 2, NULL, &B, e)) || (rc = read_ftype(f, ci, "sb", st, 1, &sb, e)) ||
        (rc = qgh_read(f, ci->name, "X", QGH_U16, "float16", 2, NULL, &X, e)))
        goto done;
    const size_t m = (size_t)M, n = (size_t)N, kk = (size_t)K, mn = m * n;
    if (B.dims[0] != n || B.dims[1] != kk || sb.count != n || X.dims[0] != m || X.dims[1] != kk) {
        rc = size_disagrees(f, ci, "B, sb or X", e);
        goto done;
    }
    w8a16_ctx c = {k, data_or_empty(&B), data_or_empty(&sb), st, n, kk, m, data_or_empty(&X)};
    float *out = malloc(mn * 6 + 16), *yb = malloc(n * 4 + 16), *y16 = malloc(mn * 4 + 16);
    if (out == NULL || yb == NULL || y16 == NULL) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
        goto out;
    }
    if (is_invalid(ci)) {
        rc = qga_expect_error(f, ci, call_w8a16(&c, out), e);
        goto out;
    }
    const size_t dy[2] = {m, n};
    if ((rc = qgh_read(f, ci->name, "ystar", QGH_F64, NULL, 2, dy, &ys, e)) ||
        (rc = qgh_read(f, ci->name, "sum_abs", QGH_F64, NULL, 2, dy, &sabs, e)))
        goto out;
    if ((rc = qg_call_guarded(call_w8a16, &c, out, mn * 3, 2, e)) != QG_ERR_ok) {
        qga_guard_fail(f, ci, rc, e);
        goto out;
    }
    qg_bound_report br;
    rc = qg_compare_bounded(&k->numerics, (long)kk, ys.data, sabs.data, NULL, out, mn, &br);
    if (br.worst_ratio > row->worst_ratio) row->worst_ratio = br.worst_ratio;
    if (rc) {
        qg_err_set(e, rc, "%s: case %s (%s): float32 output: %s", qgh_name(f), ci->case_id, ci->description, br.text);
        goto out;
    }
    const uint16_t *h = (const uint16_t *)(out + mn);
    for (size_t i = 0; i < mn; i++) y16[i] = qg_f16_to_f32(h[i]);
    rc = qg_compare_bounded(&k->numerics_f16, (long)kk, ys.data, sabs.data, NULL, y16, mn, &br);
    if (br.worst_ratio > row->worst_ratio) row->worst_ratio = br.worst_ratio;
    if (rc) {
        qg_err_set(e, rc, "%s: case %s (%s): fp16 output: %s", qgh_name(f), ci->case_id, ci->description, br.text);
        goto out;
    }
    rc = qga_batch_invariance(f, ci, call_w8a16_row, &c, out, m, n, yb, e);
    row->elements += 2 * mn;
out:
    free(out);
    free(yb);
    free(y16);
done:
    qgh_array_free(&B);
    qgh_array_free(&sb);
    qgh_array_free(&X);
    qgh_array_free(&ys);
    qgh_array_free(&sabs);
    return rc;
}

const qga_kind qga_kind_int8_quantize = {QG_KIND_INT8_QUANTIZE, "int8_quantize", run_quantize, NULL, NULL};
const qga_kind qga_kind_int8_dequant = {QG_KIND_INT8_DEQUANT, "int8_dequant", run_dequant, NULL, NULL};
const qga_kind qga_kind_int8_w8a8 = {QG_KIND_INT8_W8A8, "int8_w8a8", run_w8a8, NULL, NULL};
const qga_kind qga_kind_int8_w8a16 = {QG_KIND_INT8_W8A16, "int8_w8a16", run_w8a16, NULL, NULL};
