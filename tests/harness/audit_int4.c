/* Audit runners of the INT4 kinds (reference/spec/intq.md, fixture schema for int4).
 *
 * quantize, dequant, gemm_packed, w4a16_decode, import_gptq, import_awq: exact (bit for bit; the scaled
 * GEMM outputs let a NaN match any NaN, since a NaN made by the epilogue carries the machine's sign).
 * w4a16_gemv: bounded against the fixture's y* with the row's numerics (float32 output) and numerics_f16
 * (fp16 output), chain length K, then batch invariance. Every valid call is guarded (poisoned outputs,
 * canaries, two runs); an invalid case must return exactly the fixture's error. Buffer lengths passed to
 * the kernels are the datasets' own element counts, so a short dataset is the kernel's size_mismatch.
 */
#include "audit_formats.h"
#include "compare.h"
#include "fixture.h"
#include "guard.h"
#include "kinds.h"

#include "qgold/fp16.h"
#include "qgold/int4.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Caller buffers of invalid cases are capped (their attributes may claim anything). */
enum { CAP = 1 << 24, MAXARR = 12 };

/* Arrays of one case, freed together. */
typedef struct {
    qgh_array a[MAXARR];
    int n;
} arrays;

static qgh_array *arr_new(arrays *s)
{
    qgh_array *a = &s->a[s->n++];
    memset(a, 0, sizeof *a);
    return a;
}
static void arrays_free(arrays *s)
{
    for (int i = 0; i < s->n; i++) qgh_array_free(&s->a[i]);
    s->n = 0;
}

/* A non-NULL pointer for an empty dataset (the kernels reject NULL before looking at shapes). */
static const void *data_or_dummy(const qgh_array *a)
{
    static const uint64_t dummy[2] = {0, 0};
    return a->data && a->count ? a->data : (const void *)dummy;
}

static int is_invalid(const qgh_case_info *ci) { return strcmp(ci->expect, "invalid") == 0; }

static int mismatch(qgh_file *f, const qgh_case_info *ci, const char *what, size_t cols, const qg_exact_report *rep, qg_err *e)
{
    return qg_err_set(e, QG_ERR_mismatch, "%s: case %s (%s): %s [%zu][%zu]: %s; fixtures come from generators/regen.py",
                      qgh_name(f), ci->case_id, ci->description, what, rep->index / (cols ? cols : 1), rep->index % (cols ? cols : 1),
                      rep->text);
}

static int compare_exact(qgh_file *f, const qgh_case_info *ci, qg_elem t, int nan_any, const void *ex, const void *got, size_t n,
                         size_t cols, const char *what, qg_err *e)
{
    qg_exact_report rep;
    const int rc = nan_any ? qg_compare_exact_nan_any(t, ex, got, n, &rep) : qg_compare_exact(t, ex, got, n, &rep);
    return rc ? mismatch(f, ci, what, cols, &rep, e) : 0;
}

static int read_ftype(qgh_file *f, const qgh_case_info *ci, const char *attr, qg_int4_ftype *t, qg_err *e)
{
    char s[32];
    int rc = qgh_attr_str(f, ci->name, attr, s, sizeof s, e);
    if (rc) return rc;
    if (strcmp(s, "float32") == 0) *t = QG_INT4_F32;
    else if (strcmp(s, "float16") == 0) *t = QG_INT4_F16;
    else return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s@%s = %s (float32 or float16)", qgh_name(f), ci->name, attr, s);
    return 0;
}

/* Reads a float dataset of type t (float32 bits as uint32, or fp16 bits as uint16). */
static int read_float(qgh_file *f, const qgh_case_info *ci, const char *name, qg_int4_ftype t, int rank, const size_t *dims,
                      qgh_array *out, qg_err *e)
{
    return t == QG_INT4_F16 ? qgh_read(f, ci->name, name, QGH_U16, "float16", rank, dims, out, e)
                            : qgh_read(f, ci->name, name, QGH_U32, "float32", rank, dims, out, e);
}

/* ---- quantize / dequant ---- */

static int read_qshape(qgh_file *f, const qgh_case_info *ci, qg_int4_qshape *s, qg_int4_ftype *src, qg_err *e)
{
    int64_t rows, cols, group;
    char gran[16];
    int rc = qga_read_dims(f, ci, &rows, &cols, NULL, e);
    if (rc || (rc = qga_attr_range(f, ci, "group", 0, 1 << 24, &group, e)) ||
        (rc = qgh_attr_str(f, ci->name, "granularity", gran, sizeof gran, e)) ||
        (rc = read_ftype(f, ci, "scale_type", &s->scale_type, e)) || (rc = read_ftype(f, ci, "src_type", src, e)))
        return rc;
    s->rows = (size_t)rows, s->cols = (size_t)cols, s->group = (size_t)group;
    if (strcmp(gran, "tensor") == 0) s->gran = QG_INT4_PER_TENSOR;
    else if (strcmp(gran, "row") == 0) s->gran = QG_INT4_PER_ROW;
    else if (strcmp(gran, "group") == 0) s->gran = QG_INT4_PER_GROUP;
    else return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s@granularity = %s", qgh_name(f), ci->name, gran);
    if (s->rows * s->cols > CAP) return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s: rows x cols too large", qgh_name(f), ci->name);
    return 0;
}

/* The scale count of a shape as the schema defines it, also for shapes the kernel must reject. */
static size_t schema_scales(const qg_int4_qshape *s)
{
    if (s->gran == QG_INT4_PER_TENSOR) return 1;
    if (s->gran == QG_INT4_PER_ROW) return s->rows;
    return s->group ? s->rows * (s->cols / s->group) + 1 : 1;
}

typedef struct {
    const qg_kernel *k;
    const qg_int4_qshape *s;
    const void *x, *q, *scales;
    qg_int4_ftype src;
    size_t n, S;
    int outs; /* dequant: 1 f32, 2 f16 */
} q_ctx;

/* quantize output: the S scales (4 or 2 bytes each), then the n codes: no padding in between. */
static size_t scale_bytes(const q_ctx *c) { return c->S * (c->s->scale_type == QG_INT4_F16 ? 2 : 4); }

static int call_quantize(void *vc, void *out)
{
    q_ctx *c = vc;
    return c->k->fn.int4_quantize(c->s, c->x, c->src, (int8_t *)out + scale_bytes(c), out);
}

static int call_dequant(void *vc, void *out)
{
    q_ctx *c = vc;
    return c->k->fn.int4_dequant(c->s, c->q, c->scales, c->outs == 1 ? out : NULL, c->outs == 2 ? out : NULL);
}

static int run_quantize(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    qg_int4_qshape s;
    qg_int4_ftype src;
    arrays A = {0};
    int rc = read_qshape(f, ci, &s, &src, e);
    if (rc) return rc;
    qgh_array *x = arr_new(&A), *eq = arr_new(&A), *es = arr_new(&A);
    if ((rc = read_float(f, ci, "x", src, 2, NULL, x, e))) goto done;
    const size_t n = s.rows * s.cols, S = schema_scales(&s);
    uint8_t *out = malloc(4 * S + n);
    if (!out) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
        goto done;
    }
    q_ctx c = {k, &s, data_or_dummy(x), NULL, NULL, src, n, S, 0};
    /* The kernels take no lengths: x must hold rows x cols values (an invalid case's error is about its
     * values or its shape attributes, never about a short dataset). */
    if (x->count != n) {
        rc = qg_err_set(e, QG_ERR_fixture_shape_mismatch, "%s: /%s/x: %zu values, rows x cols = %zu", qgh_name(f), ci->name, x->count, n);
    } else if (is_invalid(ci)) {
        rc = qga_expect_error(f, ci, call_quantize(&c, out), e);
    } else if ((rc = qgh_read(f, ci->name, "expected_q", QGH_I8, NULL, 2, NULL, eq, e)) ||
               (rc = read_float(f, ci, "expected_scales", s.scale_type, 1, NULL, es, e))) {
    } else if (eq->count != n || es->count != qg_int4_num_scales(&s)) {
        rc = qg_err_set(e, QG_ERR_fixture_shape_mismatch, "%s: /%s: expected_q or expected_scales do not match the shape", qgh_name(f), ci->name);
    } else if ((c.S = es->count, rc = qg_call_guarded(call_quantize, &c, out, scale_bytes(&c) + n, 1, e))) {
        qga_guard_fail(f, ci, rc, e);
    } else if (!(rc = compare_exact(f, ci, QG_ELEM_U8, 0, eq->data, out + scale_bytes(&c), n, s.cols, "code", e))) {
        rc = compare_exact(f, ci, s.scale_type == QG_INT4_F16 ? QG_ELEM_F16 : QG_ELEM_F32, 0, es->data, out, es->count, es->count,
                           "scale", e);
        row->elements += n + es->count;
    }
    free(out);
done:
    arrays_free(&A);
    return rc;
}

static int run_dequant(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    qg_int4_qshape s;
    qg_int4_ftype src;
    arrays A = {0};
    int rc = read_qshape(f, ci, &s, &src, e);
    if (rc) return rc;
    qgh_array *q = arr_new(&A), *sc = arr_new(&A), *e32 = arr_new(&A), *e16 = arr_new(&A);
    if ((rc = qgh_read(f, ci->name, "q", QGH_I8, NULL, 2, NULL, q, e)) || (rc = read_float(f, ci, "scales", s.scale_type, 1, NULL, sc, e)))
        goto done;
    const size_t n = s.rows * s.cols;
    float *out = malloc(4 * n + 4);
    if (!out) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
        goto done;
    }
    q_ctx c = {k, &s, NULL, data_or_dummy(q), data_or_dummy(sc), src, n, sc->count, 1};
    /* The kernels take no lengths: for a shape they accept, q and scales must match it. */
    const int sizes_ok = q->count == n && (qg_int4_qshape_check(&s) != 0 || sc->count == qg_int4_num_scales(&s));
    if (!sizes_ok) {
        rc = qg_err_set(e, QG_ERR_fixture_shape_mismatch, "%s: /%s: q or scales do not match the shape", qgh_name(f), ci->name);
    } else if (is_invalid(ci)) {
        rc = qga_expect_error(f, ci, call_dequant(&c, out), e);
    } else if ((rc = qgh_read(f, ci->name, "expected_f32", QGH_U32, "float32", 2, NULL, e32, e)) ||
               (rc = qgh_read(f, ci->name, "expected_f16", QGH_U16, "float16", 2, NULL, e16, e))) {
    } else if (e32->count != n || e16->count != n) {
        rc = qg_err_set(e, QG_ERR_fixture_shape_mismatch, "%s: /%s: expected outputs do not match the shape", qgh_name(f), ci->name);
    } else {
        for (int v = 1; v <= 2 && !rc; v++) {
            c.outs = v;
            if ((rc = qg_call_guarded(call_dequant, &c, out, n, v == 1 ? 4 : 2, e))) qga_guard_fail(f, ci, rc, e);
            else rc = compare_exact(f, ci, v == 1 ? QG_ELEM_F32 : QG_ELEM_F16, 0, v == 1 ? e32->data : e16->data, out, n, s.cols,
                                    v == 1 ? "float32 output" : "fp16 output", e);
            row->elements += n;
        }
    }
    free(out);
done:
    arrays_free(&A);
    return rc;
}

/* ---- packed GEMM ---- */

typedef struct {
    const qg_kernel *k;
    const qg_int4_gemm_args *p;
} gemm_ctx;

/* Output: acc (n int32), f32 (n), f16 (n). */
static int call_gemm(void *vc, void *out)
{
    gemm_ctx *c = vc;
    const size_t n = c->p->M * c->p->N;
    uint8_t *o = out;
    return c->k->fn.int4_gemm_packed(c->p, (int32_t *)(void *)o, (float *)(void *)(o + 4 * n), (uint16_t *)(void *)(o + 8 * n));
}

static int run_gemm(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    int64_t M, N, K, relu, sal, sbl;
    char bias[16];
    arrays A = {0};
    int rc;
    if ((rc = qga_attr_range(f, ci, "M", 0, 1 << 20, &M, e)) || (rc = qga_attr_range(f, ci, "N", 0, 1 << 20, &N, e)) ||
        (rc = qga_attr_range(f, ci, "K", 0, 1 << 24, &K, e)) || (rc = qga_attr_range(f, ci, "relu", 0, 1, &relu, e)) ||
        (rc = qga_attr_range(f, ci, "sa_len", 0, 1 << 20, &sal, e)) || (rc = qga_attr_range(f, ci, "sb_len", 0, 1 << 20, &sbl, e)) ||
        (rc = qgh_attr_str(f, ci->name, "bias", bias, sizeof bias, e)))
        return rc;
    qg_int4_ftype bt = QG_INT4_F32;
    if (strcmp(bias, "float16") == 0) bt = QG_INT4_F16;
    else if (strcmp(bias, "float32") != 0 && strcmp(bias, "none") != 0)
        return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s@bias = %s", qgh_name(f), ci->name, bias);
    qgh_array *a = arr_new(&A), *b = arr_new(&A), *sa = arr_new(&A), *sb = arr_new(&A), *bi = arr_new(&A);
    qgh_array *eacc = arr_new(&A), *e32 = arr_new(&A), *e16 = arr_new(&A);
    if ((rc = qgh_read(f, ci->name, "A_packed", QGH_U8, NULL, 2, NULL, a, e)) ||
        (rc = qgh_read(f, ci->name, "B_packed", QGH_U8, NULL, 2, NULL, b, e)) ||
        (rc = qgh_read(f, ci->name, "sa", QGH_U32, "float32", 1, NULL, sa, e)) ||
        (rc = qgh_read(f, ci->name, "sb", QGH_U32, "float32", 1, NULL, sb, e)) ||
        (strcmp(bias, "none") != 0 && (rc = read_float(f, ci, "bias", bt, 1, NULL, bi, e))))
        goto done;
    const size_t n = (size_t)M * (size_t)N;
    if (n > CAP) {
        rc = qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s: M x N too large", qgh_name(f), ci->name);
        goto done;
    }
    qg_int4_gemm_args p = {(size_t)M, (size_t)N, (size_t)K, data_or_dummy(a), a->count, data_or_dummy(b), b->count,
                           data_or_dummy(sa), sa->count, data_or_dummy(sb), sb->count,
                           strcmp(bias, "none") == 0 ? NULL : data_or_dummy(bi), bt, (int)relu};
    if ((size_t)sal != sa->count || (size_t)sbl != sb->count || (p.bias && bi->count != (size_t)N)) {
        if (!is_invalid(ci)) {
            rc = qg_err_set(e, QG_ERR_fixture_shape_mismatch, "%s: /%s: sa, sb or bias do not match sa_len, sb_len, N", qgh_name(f), ci->name);
            goto done;
        }
    }
    uint8_t *out = malloc(10 * n + 16);
    if (!out) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
        goto done;
    }
    gemm_ctx c = {k, &p};
    if (is_invalid(ci)) {
        rc = qga_expect_error(f, ci, call_gemm(&c, out), e);
    } else if ((rc = qgh_read(f, ci->name, "expected_acc", QGH_I32, NULL, 2, NULL, eacc, e)) ||
               (rc = qgh_read(f, ci->name, "expected_f32", QGH_U32, "float32", 2, NULL, e32, e)) ||
               (rc = qgh_read(f, ci->name, "expected_f16", QGH_U16, "float16", 2, NULL, e16, e))) {
    } else if (eacc->count != n || e32->count != n || e16->count != n) {
        rc = qg_err_set(e, QG_ERR_fixture_shape_mismatch, "%s: /%s: expected outputs are not M x N", qgh_name(f), ci->name);
    } else if ((rc = qg_call_guarded(call_gemm, &c, out, 10 * n, 1, e))) {
        qga_guard_fail(f, ci, rc, e);
    } else if (!(rc = compare_exact(f, ci, QG_ELEM_I32, 0, eacc->data, out, n, p.N, "int32 output", e)) &&
               !(rc = compare_exact(f, ci, QG_ELEM_F32, 1, e32->data, out + 4 * n, n, p.N, "float32 output", e))) {
        rc = compare_exact(f, ci, QG_ELEM_F16, 1, e16->data, out + 8 * n, n, p.N, "fp16 output", e);
        row->elements += 3 * n;
    }
    free(out);
done:
    arrays_free(&A);
    return rc;
}

/* ---- W4A16 layout, decode and GEMV ---- */

/* Reads the layout of a case (attributes N, K, g, has_zeros, has_g_idx and the four datasets); the
 * lengths are the datasets' counts. */
static int read_layout(qgh_file *f, const qgh_case_info *ci, arrays *A, qg_w4a16 *L, qg_err *e)
{
    int64_t N, K, g, hz, hg;
    int rc;
    if ((rc = qga_attr_range(f, ci, "N", 0, 1 << 24, &N, e)) || (rc = qga_attr_range(f, ci, "K", 0, 1 << 24, &K, e)) ||
        (rc = qga_attr_range(f, ci, "g", 0, 1 << 24, &g, e)) || (rc = qga_attr_range(f, ci, "has_zeros", 0, 1, &hz, e)) ||
        (rc = qga_attr_range(f, ci, "has_g_idx", 0, 1, &hg, e)))
        return rc;
    qgh_array *qw = arr_new(A), *sc = arr_new(A), *z = arr_new(A), *gi = arr_new(A);
    if ((rc = qgh_read(f, ci->name, "qweight", QGH_U32, NULL, 2, NULL, qw, e)) ||
        (rc = qgh_read(f, ci->name, "scales", QGH_U16, "float16", 2, NULL, sc, e)) ||
        (hz && (rc = qgh_read(f, ci->name, "zeros", QGH_U8, NULL, 2, NULL, z, e))) ||
        (hg && (rc = qgh_read(f, ci->name, "g_idx", QGH_I32, NULL, 1, NULL, gi, e))))
        return rc;
    if ((size_t)N * (size_t)K > CAP)
        return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s: N x K too large", qgh_name(f), ci->name);
    qg_w4a16 l = {(size_t)N, (size_t)K, (size_t)g, data_or_dummy(qw), qw->count, data_or_dummy(sc), sc->count,
                  hz ? data_or_dummy(z) : NULL, z->count, hg ? data_or_dummy(gi) : NULL, gi->count};
    *L = l;
    return 0;
}

typedef struct {
    const qg_kernel *k;
    const qg_w4a16 *L;
    const uint16_t *x;
    size_t x_len, batch;
    int f16;
} w_ctx;

static int call_decode(void *vc, void *out)
{
    w_ctx *c = vc;
    return c->k->fn.int4_w4a16_decode(c->L, out);
}

static int call_gemv(void *vc, void *out)
{
    w_ctx *c = vc;
    return c->k->fn.int4_w4a16_gemv(c->L, c->x, c->x_len, c->batch, c->f16 ? NULL : out, c->f16 ? out : NULL);
}

static int call_gemv_column(void *vc, size_t b, void *out)
{
    w_ctx one = *(const w_ctx *)vc;
    one.x += b * one.L->K;
    one.x_len = one.L->K;
    one.batch = 1;
    one.f16 = 0;
    return call_gemv(&one, out);
}

static int run_decode(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    arrays A = {0};
    qg_w4a16 L;
    int rc = read_layout(f, ci, &A, &L, e);
    if (rc) goto done;
    const size_t n = L.N * L.K;
    float *out = malloc(4 * n + 4);
    qgh_array *ex = arr_new(&A);
    w_ctx c = {k, &L, NULL, 0, 0, 0};
    if (!out) rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    else if (is_invalid(ci)) rc = qga_expect_error(f, ci, call_decode(&c, out), e);
    else if ((rc = qgh_read(f, ci->name, "expected_w", QGH_U32, "float32", 2, NULL, ex, e))) {
    } else if (ex->count != n) {
        rc = qg_err_set(e, QG_ERR_fixture_shape_mismatch, "%s: /%s/expected_w is not N x K", qgh_name(f), ci->name);
    } else if ((rc = qg_call_guarded(call_decode, &c, out, n, 4, e))) {
        qga_guard_fail(f, ci, rc, e);
    } else {
        rc = compare_exact(f, ci, QG_ELEM_F32, 0, ex->data, out, n, L.K, "decoded weight", e);
        row->elements += n;
    }
    free(out);
done:
    arrays_free(&A);
    return rc;
}

static int run_gemv(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    arrays A = {0};
    qg_w4a16 L;
    int64_t batch;
    float *y = NULL, *yb = NULL, *y16f = NULL;
    uint16_t *y16 = NULL;
    int rc = read_layout(f, ci, &A, &L, e);
    if (rc || (rc = qga_attr_range(f, ci, "batch", 0, 4096, &batch, e))) goto done;
    qgh_array *x = arr_new(&A), *ys = arr_new(&A), *sa = arr_new(&A);
    if ((rc = qgh_read(f, ci->name, "x", QGH_U16, "float16", 2, NULL, x, e))) goto done;
    const size_t B = (size_t)batch, ny = B * L.N;
    if (ny > CAP) {
        rc = qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s: batch x N too large", qgh_name(f), ci->name);
        goto done;
    }
    y = malloc(4 * ny + 4), yb = malloc(4 * L.N + 4), y16f = malloc(4 * ny + 4);
    y16 = malloc(2 * ny + 2);
    w_ctx c = {k, &L, data_or_dummy(x), x->count, B, 0};
    if (!y || !yb || !y16 || !y16f) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
        goto done;
    }
    if (is_invalid(ci)) {
        rc = qga_expect_error(f, ci, call_gemv(&c, y), e);
        goto done;
    }
    if ((rc = qgh_read(f, ci->name, "ystar", QGH_F64, NULL, 2, NULL, ys, e)) ||
        (rc = qgh_read(f, ci->name, "sum_abs", QGH_F64, NULL, 2, NULL, sa, e)))
        goto done;
    if (ys->count != ny || sa->count != ny || x->count != B * L.K) {
        rc = qg_err_set(e, QG_ERR_fixture_shape_mismatch, "%s: /%s: x, ystar or sum_abs do not match batch, N, K", qgh_name(f), ci->name);
        goto done;
    }
    qg_bound_report br;
    if ((rc = qg_call_guarded(call_gemv, &c, y, ny, 4, e))) {
        qga_guard_fail(f, ci, rc, e);
        goto done;
    }
    if ((rc = qg_compare_bounded(&k->numerics, (long)L.K, ys->data, sa->data, NULL, y, ny, &br))) {
        qg_err_set(e, rc, "%s: case %s (%s): float32 output: %s", qgh_name(f), ci->case_id, ci->description, br.text);
        goto done;
    }
    if (br.worst_ratio > row->worst_ratio) row->worst_ratio = br.worst_ratio;
    c.f16 = 1;
    if ((rc = qg_call_guarded(call_gemv, &c, y16, ny, 2, e))) {
        qga_guard_fail(f, ci, rc, e);
        goto done;
    }
    for (size_t i = 0; i < ny; i++) y16f[i] = qg_f16_to_f32(y16[i]);
    if ((rc = qg_compare_bounded(&k->numerics_f16, (long)L.K, ys->data, sa->data, NULL, y16f, ny, &br))) {
        qg_err_set(e, rc, "%s: case %s (%s): fp16 output: %s", qgh_name(f), ci->case_id, ci->description, br.text);
        goto done;
    }
    if (br.worst_ratio > row->worst_ratio) row->worst_ratio = br.worst_ratio;
    c.f16 = 0;
    if ((rc = qga_batch_invariance(f, ci, call_gemv_column, &c, y, B, L.N, yb, e))) goto done;
    row->elements += 2 * ny;
done:
    free(y), free(yb), free(y16), free(y16f);
    arrays_free(&A);
    return rc;
}

/* ---- importers ---- */

typedef struct {
    const qg_kernel *k;
    const qg_gptq_src *gptq;
    const qg_awq_src *awq;
    size_t N, K, G, gi; /* gi: g_idx entries written (0 or K) */
} imp_ctx;

/* Output layout (bytes): qweight N*K/8 words, g_idx gi words, scales N*G fp16, zeros N*G. */
static size_t imp_bytes(const imp_ctx *c) { return 4 * (c->N * (c->K / 8) + c->gi) + 3 * c->N * c->G; }

static int call_import(void *vc, void *out)
{
    imp_ctx *c = vc;
    uint8_t *o = out;
    const size_t qw = 4 * c->N * (c->K / 8), gi = 4 * c->gi;
    qg_w4a16_out w = {(uint32_t *)(void *)o, (uint16_t *)(void *)(o + qw + gi), o + qw + gi + 2 * c->N * c->G,
                      c->gi ? (int32_t *)(void *)(o + qw) : NULL};
    return c->gptq ? c->k->fn.int4_import_gptq(c->gptq, &w) : c->k->fn.int4_import_awq(c->awq, &w);
}

static int run_import(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    const int gptq = k->kind == QG_KIND_INT4_IMPORT_GPTQ;
    int64_t N, K, g, hg, version = 0;
    arrays A = {0};
    int rc;
    if ((rc = qga_attr_range(f, ci, "N", 0, 1 << 24, &N, e)) || (rc = qga_attr_range(f, ci, "K", 0, 1 << 24, &K, e)) ||
        (rc = qga_attr_range(f, ci, "g", 0, 1 << 24, &g, e)) || (rc = qga_attr_range(f, ci, "has_g_idx", 0, 1, &hg, e)) ||
        (gptq && (rc = qga_attr_range(f, ci, "version", 0, 16, &version, e))))
        return rc;
    if ((size_t)N * (size_t)K > CAP) return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s: N x K too large", qgh_name(f), ci->name);
    qgh_array *qw = arr_new(&A), *qz = arr_new(&A), *sc = arr_new(&A), *gi = arr_new(&A);
    qgh_array *eqw = arr_new(&A), *esc = arr_new(&A), *ez = arr_new(&A), *egi = arr_new(&A);
    uint8_t *out = NULL;
    if ((rc = qgh_read(f, ci->name, "src_qweight", QGH_I32, NULL, 2, NULL, qw, e)) ||
        (rc = qgh_read(f, ci->name, "src_qzeros", QGH_I32, NULL, 2, NULL, qz, e)) ||
        (rc = qgh_read(f, ci->name, "src_scales", QGH_U16, "float16", 2, NULL, sc, e)) ||
        (gptq && hg && (rc = qgh_read(f, ci->name, "src_g_idx", QGH_I32, NULL, 1, NULL, gi, e))))
        goto done;
    const size_t G = g > 0 && K % g == 0 ? (size_t)(K / g) : 1;
    qg_gptq_src gs = {(size_t)N, (size_t)K, (size_t)g, (int)version, data_or_dummy(qw), qw->count, data_or_dummy(qz), qz->count,
                      data_or_dummy(sc), sc->count, gptq && hg ? data_or_dummy(gi) : NULL, gi->count};
    qg_awq_src as = {(size_t)N, (size_t)K, (size_t)g, data_or_dummy(qw), qw->count, data_or_dummy(qz), qz->count,
                     data_or_dummy(sc), sc->count};
    imp_ctx c = {k, gptq ? &gs : NULL, gptq ? NULL : &as, (size_t)N, (size_t)K, G, gptq && hg ? (size_t)K : 0};
    out = malloc(imp_bytes(&c) + 16);
    if (!out) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
        goto done;
    }
    if (is_invalid(ci)) {
        rc = qga_expect_error(f, ci, call_import(&c, out), e);
        goto done;
    }
    if ((rc = qgh_read(f, ci->name, "qweight", QGH_U32, NULL, 2, NULL, eqw, e)) ||
        (rc = qgh_read(f, ci->name, "scales", QGH_U16, "float16", 2, NULL, esc, e)) ||
        (rc = qgh_read(f, ci->name, "zeros", QGH_U8, NULL, 2, NULL, ez, e)) ||
        (c.gi && (rc = qgh_read(f, ci->name, "g_idx", QGH_I32, NULL, 1, NULL, egi, e))))
        goto done;
    const size_t nq = c.N * (c.K / 8), ng = c.N * c.G;
    if (eqw->count != nq || esc->count != ng || ez->count != ng || (c.gi && egi->count != c.K)) {
        rc = qg_err_set(e, QG_ERR_fixture_shape_mismatch, "%s: /%s: expected canonical arrays do not match N, K, g", qgh_name(f), ci->name);
        goto done;
    }
    if ((rc = qg_call_guarded(call_import, &c, out, imp_bytes(&c), 1, e))) {
        qga_guard_fail(f, ci, rc, e);
        goto done;
    }
    const size_t gib = 4 * c.gi;
    if ((rc = compare_exact(f, ci, QG_ELEM_U32, 0, eqw->data, out, nq, c.K / 8, "qweight word", e)) ||
        (c.gi && (rc = compare_exact(f, ci, QG_ELEM_I32, 0, egi->data, out + 4 * nq, c.K, c.K, "g_idx", e))) ||
        (rc = compare_exact(f, ci, QG_ELEM_U16, 0, esc->data, out + 4 * nq + gib, ng, c.G, "scale", e)) ||
        (rc = compare_exact(f, ci, QG_ELEM_U8, 0, ez->data, out + 4 * nq + gib + 2 * ng, ng, c.G, "zero", e)))
        goto done;
    row->elements += nq + 2 * ng + c.gi;
done:
    free(out);
    arrays_free(&A);
    return rc;
}

const qga_kind qga_kind_int4_quantize = {QG_KIND_INT4_QUANTIZE, "int4_quantize", run_quantize, NULL, NULL};
const qga_kind qga_kind_int4_dequant = {QG_KIND_INT4_DEQUANT, "int4_dequant", run_dequant, NULL, NULL};
const qga_kind qga_kind_int4_gemm_packed = {QG_KIND_INT4_GEMM_PACKED, "int4_gemm_packed", run_gemm, NULL, NULL};
const qga_kind qga_kind_int4_w4a16_decode = {QG_KIND_INT4_W4A16_DECODE, "int4_w4a16_decode", run_decode, NULL, NULL};
const qga_kind qga_kind_int4_w4a16_gemv = {QG_KIND_INT4_W4A16_GEMV, "int4_w4a16_gemv", run_gemv, NULL, NULL};
const qga_kind qga_kind_int4_import_gptq = {QG_KIND_INT4_IMPORT_GPTQ, "int4_import_gptq", run_import, NULL, NULL};
const qga_kind qga_kind_int4_import_awq = {QG_KIND_INT4_IMPORT_AWQ, "int4_import_awq", run_import, NULL, NULL};
