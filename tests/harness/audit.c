/* Audit driver. Files are the outer loop (each is opened and schema-checked once, with the manifest),
 * kernels of the file's format the inner loop; a case is run by every kernel whose path it names.
 * Every kernel call is guarded (poison + canaries, run twice: full write, no overrun, determinism). */
#include "audit.h"
#include "audit_formats.h"

#include "compare.h"
#include "fixture.h"
#include "guard.h"

#include "qgold/fp16.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_names(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

size_t qg_list_fixture_files(const char *golden_dir, const char *format, char names[][256], size_t max)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", golden_dir, format);
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    size_t n = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL && n < max) {
        size_t L = strlen(ent->d_name);
        if (L > 3 && L < 200 && strcmp(ent->d_name + L - 3, ".h5") == 0) snprintf(names[n++], 256, "%s/%s", format, ent->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof names[0], cmp_names);
    return n;
}

/* How fixtures store each element type: the HDF5 integer type and the `dtype` attribute. */
static void storage_of(qg_elem t, qgh_dtype *dt, const char **logical)
{
    *logical = NULL;
    *dt = QGH_U8;
    switch (t) {
    case QG_ELEM_U8: *dt = QGH_U8; break;
    case QG_ELEM_U16: *dt = QGH_U16; break;
    case QG_ELEM_U32: *dt = QGH_U32; break;
    case QG_ELEM_I32: *dt = QGH_I32; break;
    case QG_ELEM_F16: *dt = QGH_U16; *logical = "float16"; break;
    case QG_ELEM_BF16: *dt = QGH_U16; *logical = "bfloat16"; break;
    case QG_ELEM_F32: *dt = QGH_U32; *logical = "float32"; break;
    case QG_ELEM_F64: *dt = QGH_F64; break;
    case QG_ELEM_U64: *dt = QGH_U64; break;
    }
}

typedef struct {
    const qg_kernel *k;
    const void *x;
    size_t n;
} convert_ctx;

static int call_convert(void *ctx, void *out)
{
    convert_ctx *c = ctx;
    return c->k->fn.convert(c->x, out, c->n);
}

/* QG_KIND_CONVERT: datasets x and expected of equal length; tier 1. */
static int run_convert_case(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    qgh_dtype dx, dy;
    const char *lx, *ly;
    qgh_array x, y;
    storage_of(k->in_elem, &dx, &lx);
    storage_of(k->out_elem, &dy, &ly);
    int rc = qgh_read(f, ci->name, "x", dx, lx, 1, NULL, &x, e);
    if (rc != QG_ERR_ok) return rc;
    size_t dims[1] = {x.dims[0]};
    rc = qgh_read(f, ci->name, "expected", dy, ly, 1, dims, &y, e);
    if (rc != QG_ERR_ok) {
        qgh_array_free(&x);
        return rc;
    }
    size_t n = x.count, esz = qg_elem_size(k->out_elem);
    void *got = malloc(n > 0 ? n * esz : 1);
    if (got == NULL) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    } else {
        convert_ctx c = {k, x.data, n};
        rc = qg_call_guarded(call_convert, &c, got, n, esz, e);
        if (rc != QG_ERR_ok) {
            char tmp[sizeof e->msg];
            snprintf(tmp, sizeof tmp, "%s", e->msg);
            qg_err_set(e, rc, "%s: case %s: %s", qgh_name(f), ci->case_id, tmp);
        } else {
            qg_exact_report rep;
            rc = qg_compare_exact(k->out_elem, y.data, got, n, &rep);
            if (rc != QG_ERR_ok) {
                char in[64];
                qg_elem_format(k->in_elem, x.data, rep.index, in, sizeof in);
                qg_err_set(e, rc, "%s: case %s (%s): input %s: %s; fixtures come from generators/regen.py", qgh_name(f),
                           ci->case_id, ci->description, in, rep.text);
            }
            row->elements += n;
        }
    }
    free(got);
    qgh_array_free(&x);
    qgh_array_free(&y);
    return rc;
}

/* ---- K-quants ---------------------------------------------------------------------------------- */

/* An invalid case: the kernel must return exactly the error the fixture names. */
int qga_expect_error(qgh_file *f, const qgh_case_info *ci, int got, qg_err *e)
{
    int want = qg_error_from_name(ci->error);
    if (got == want) return QG_ERR_ok;
    return qg_err_set(e, QG_ERR_mismatch, "%s: case %s (%s): kernel returned %s, the fixture expects %s", qgh_name(f), ci->case_id,
                      ci->description, qg_error_name(got), ci->error);
}

int qga_attr_range(qgh_file *f, const qgh_case_info *ci, const char *attr, int64_t lo, int64_t hi, int64_t *v, qg_err *e)
{
    int rc = qgh_attr_i64(f, ci->name, attr, v, e);
    if (rc) return rc;
    if (*v < lo || *v > hi)
        return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s@%s = %lld is outside [%lld, %lld]", qgh_name(f), ci->name, attr,
                          (long long)*v, (long long)lo, (long long)hi);
    return QG_ERR_ok;
}

typedef struct {
    qga_column_fn alone;
    void *ctx;
    size_t b;
} column_call;

static int call_column(void *vc, void *out)
{
    column_call *c = vc;
    return c->alone(c->ctx, c->b, out);
}

int qga_batch_invariance(qgh_file *f, const qgh_case_info *ci, qga_column_fn alone, void *ctx, const float *y, size_t batch,
                         size_t m, float *yb, qg_err *e)
{
    for (size_t b = 0; batch > 1 && m > 0 && b < batch; b++) {
        column_call c = {alone, ctx, b};
        const int rc = qg_call_guarded(call_column, &c, yb, m, 4, e);
        if (rc != QG_ERR_ok) return qga_guard_fail(f, ci, rc, e);
        if (memcmp(yb, y + b * m, m * 4) != 0)
            return qg_err_set(e, QG_ERR_mismatch, "%s: case %s: column %zu computed alone differs from the same column in a batch of %zu "
                              "(batch invariance)", qgh_name(f), ci->case_id, b, batch);
    }
    return QG_ERR_ok;
}

static int read_dims(qgh_file *f, const qgh_case_info *ci, int64_t *rows, int64_t *cols, int64_t *batch, qg_err *e)
{
    int rc = QG_ERR_ok;
    if (rows && (rc = qgh_attr_i64(f, ci->name, "rows", rows, e))) return rc;
    if (cols && (rc = qgh_attr_i64(f, ci->name, "cols", cols, e))) return rc;
    if (batch && (rc = qgh_attr_i64(f, ci->name, "batch", batch, e))) return rc;
    if ((rows && (*rows < 1 || *rows > (1 << 24))) || (cols && (*cols < 1 || *cols > (1 << 24))) ||
        (batch && (*batch < 0 || *batch > 4096)))
        return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s: rows/cols/batch attributes out of range", qgh_name(f), ci->name);
    return QG_ERR_ok;
}

int qga_guard_fail(qgh_file *f, const qgh_case_info *ci, int rc, qg_err *e)
{
    char tmp[sizeof e->msg];
    snprintf(tmp, sizeof tmp, "%s", e->msg);
    return qg_err_set(e, rc, "%s: case %s: %s", qgh_name(f), ci->case_id, tmp);
}

typedef struct {
    const qg_kernel *k;
    qg_ktype t;
    const qgh_array *blocks;
    size_t rows, cols;
    int f16;
} kq_deq_ctx;

static int call_kq_dequant(void *vc, void *out)
{
    kq_deq_ctx *c = vc;
    if (c->f16) return c->k->fn.kq_dequant.f16(c->t, c->blocks->data, c->blocks->count, c->rows, c->cols, out);
    return c->k->fn.kq_dequant.f32(c->t, c->blocks->data, c->blocks->count, c->rows, c->cols, out);
}

static int run_kq_dequant_case(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    int64_t rows, cols;
    qgh_array blocks, ex32, ex16;
    int rc = read_dims(f, ci, &rows, &cols, NULL, e);
    if (rc || (rc = qgh_read(f, ci->name, "blocks", QGH_U8, NULL, 2, NULL, &blocks, e))) return rc;
    const size_t n = (size_t)rows * (size_t)cols;
    void *out = malloc(n * 4);
    kq_deq_ctx c = {k, (qg_ktype)qg_kq_from_name(k->format), &blocks, (size_t)rows, (size_t)cols, 0};
    if (out == NULL) {
        qgh_array_free(&blocks);
        return qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    }
    if (strcmp(ci->expect, "invalid") == 0) {
        rc = qga_expect_error(f, ci, call_kq_dequant(&c, out), e);
    } else {
        size_t dims[2] = {(size_t)rows, (size_t)cols};
        const char *names[2] = {"expected_f32", "expected_f16"};
        for (int v = 0; v < 2 && rc == QG_ERR_ok; v++) {
            qgh_array *ex = v ? &ex16 : &ex32;
            if ((rc = qgh_read(f, ci->name, names[v], v ? QGH_U16 : QGH_U32, v ? "float16" : "float32", 2, dims, ex, e))) break;
            c.f16 = v;
            rc = qg_call_guarded(call_kq_dequant, &c, out, n, v ? 2 : 4, e);
            if (rc != QG_ERR_ok) {
                qga_guard_fail(f, ci, rc, e);
            } else {
                qg_exact_report rep;
                /* NaNs here come from arithmetic on inf/NaN scales: their sign is the machine's. */
                rc = qg_compare_exact_nan_any(v ? QG_ELEM_F16 : QG_ELEM_F32, ex->data, out, n, &rep);
                if (rc != QG_ERR_ok)
                    qg_err_set(e, rc, "%s: case %s (%s): %s output, row %zu col %zu: %s; fixtures come from generators/regen.py",
                               qgh_name(f), ci->case_id, ci->description, v ? "fp16" : "float32", rep.index / (size_t)cols,
                               rep.index % (size_t)cols, rep.text);
                row->elements += n;
            }
            qgh_array_free(ex);
        }
    }
    free(out);
    qgh_array_free(&blocks);
    return rc;
}

typedef struct {
    qg_ktype t;
    const qgh_array *x;
    size_t rows, cols;
} kq_q_ctx;

static int call_kq_quantize(void *vc, void *out)
{
    kq_q_ctx *c = vc;
    return qg_kq_quantize_ref(c->t, c->x->data, c->rows, c->cols, out, c->rows * (c->cols / QG_QK_K) * qg_kq_block_bytes(c->t));
}

static int run_kq_quantize_case(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    int64_t rows, cols;
    qgh_array x, ex;
    int rc = read_dims(f, ci, &rows, &cols, NULL, e);
    size_t dims[2] = {(size_t)rows, (size_t)cols};
    if (rc || (rc = qgh_read(f, ci->name, "x", QGH_U32, "float32", 2, dims, &x, e))) return rc;
    kq_q_ctx c = {(qg_ktype)qg_kq_from_name(k->format), &x, (size_t)rows, (size_t)cols};
    size_t nbytes = (size_t)rows * ((size_t)cols / QG_QK_K) * qg_kq_block_bytes(c.t);
    size_t bdims[2] = {(size_t)rows, nbytes / (size_t)rows};
    if ((rc = qgh_read(f, ci->name, "expected_blocks", QGH_U8, NULL, 2, bdims, &ex, e))) {
        qgh_array_free(&x);
        return rc;
    }
    unsigned char *out = malloc(nbytes ? nbytes : 1);
    rc = out ? qg_call_guarded(call_kq_quantize, &c, out, nbytes, 1, e) : QG_ERR_alloc_failed;
    if (rc != QG_ERR_ok) {
        qga_guard_fail(f, ci, rc, e);
    } else {
        qg_exact_report rep;
        rc = qg_compare_exact(QG_ELEM_U8, ex.data, out, nbytes, &rep);
        if (rc != QG_ERR_ok) {
            size_t bb = qg_kq_block_bytes(c.t);
            qg_err_set(e, rc, "%s: case %s (%s): block %zu byte %zu: %s; fixtures come from generators/regen.py", qgh_name(f),
                       ci->case_id, ci->description, rep.index / bb, rep.index % bb, rep.text);
        }
        row->elements += nbytes;
    }
    free(out);
    qgh_array_free(&x);
    qgh_array_free(&ex);
    return rc;
}

/* Block scales read straight from the layout (kquants spec): D and Dm of a weight block, dy of a Q8_K
 * block. Used to form the exact value sum_i dy_i (D_i S_i - Dm_i M_i) the dot is judged against. */
static void kq_scales(qg_ktype t, const unsigned char *blk, double *D, double *Dm)
{
    if (t == QG_Q6_K) {
        *D = qg_f16_to_f32((qg_f16)(blk[208] | blk[209] << 8));
        *Dm = 0;
    } else {
        *D = qg_f16_to_f32((qg_f16)(blk[0] | blk[1] << 8));
        *Dm = qg_f16_to_f32((qg_f16)(blk[2] | blk[3] << 8));
    }
}

typedef struct {
    const qg_kernel *k;
    qg_ktype t;
    const void *w, *q8;
    size_t cols, nb;
} kq_dot_ctx;

/* Output layout for the guard: S[nb], M[nb], result (all 4-byte elements). */
static int call_kq_dot(void *vc, void *out)
{
    kq_dot_ctx *c = vc;
    int32_t *S = out;
    return c->k->fn.kq_dot(c->t, c->w, c->q8, c->cols, S, S + c->nb, (float *)(void *)(S + 2 * c->nb));
}

static int run_kq_dot_case(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    int64_t cols;
    qgh_array w, q8, exS, exM;
    int rc = read_dims(f, ci, NULL, &cols, NULL, e);
    if (rc) return rc;
    const qg_ktype t = (qg_ktype)qg_kq_from_name(k->format);
    const size_t nb = (size_t)cols / QG_QK_K, bb = qg_kq_block_bytes(t);
    size_t d_w[1] = {nb * bb}, d_q[1] = {nb * qg_kq_block_bytes(QG_Q8_K)}, d_s[1] = {nb};
    memset(&w, 0, sizeof w);
    memset(&q8, 0, sizeof q8);
    memset(&exS, 0, sizeof exS);
    memset(&exM, 0, sizeof exM);
    if ((rc = qgh_read(f, ci->name, "blocks", QGH_U8, NULL, 1, d_w, &w, e)) || (rc = qgh_read(f, ci->name, "q8k", QGH_U8, NULL, 1, d_q, &q8, e)) ||
        (rc = qgh_read(f, ci->name, "expected_S", QGH_I32, NULL, 1, d_s, &exS, e)) ||
        (rc = qgh_read(f, ci->name, "expected_M", QGH_I32, NULL, 1, d_s, &exM, e)))
        goto done;
    int32_t *out = malloc((2 * nb + 1) * 4);
    kq_dot_ctx c = {k, t, w.data, q8.data, (size_t)cols, nb};
    rc = out ? qg_call_guarded(call_kq_dot, &c, out, 2 * nb + 1, 4, e) : QG_ERR_alloc_failed;
    if (rc != QG_ERR_ok) {
        qga_guard_fail(f, ci, rc, e);
    } else {
        qg_exact_report rep;
        for (int v = 0; v < 2 && rc == QG_ERR_ok; v++) {
            rc = qg_compare_exact(QG_ELEM_I32, v ? exM.data : exS.data, out + v * nb, nb, &rep);
            if (rc != QG_ERR_ok)
                qg_err_set(e, rc, "%s: case %s (%s): integer %s of block %zu: %s", qgh_name(f), ci->case_id, ci->description,
                           v ? "M" : "S", rep.index, rep.text);
        }
        if (rc == QG_ERR_ok) {
            /* y* = sum_i dy_i (D_i S_i - Dm_i M_i) in double; its |terms| are what roundings scale with. */
            double ystar = 0, sabs = 0;
            for (size_t i = 0; i < nb; i++) {
                double D, Dm, dy = qg_f32_from_bits((uint32_t)((const unsigned char *)q8.data)[i * 292] |
                                                    (uint32_t)((const unsigned char *)q8.data)[i * 292 + 1] << 8 |
                                                    (uint32_t)((const unsigned char *)q8.data)[i * 292 + 2] << 16 |
                                                    (uint32_t)((const unsigned char *)q8.data)[i * 292 + 3] << 24);
                kq_scales(t, (const unsigned char *)w.data + i * bb, &D, &Dm);
                double s1 = D * dy * (double)((int32_t *)exS.data)[i], s2 = Dm * dy * (double)((int32_t *)exM.data)[i];
                ystar += s1 - s2;
                sabs += fabs(s1) + fabs(s2);
            }
            float got;
            memcpy(&got, out + 2 * nb, 4);
            qg_bound_report br;
            rc = qg_compare_bounded(&k->numerics, (long)cols, &ystar, &sabs, NULL, &got, 1, &br);
            if (br.worst_ratio > row->worst_ratio) row->worst_ratio = br.worst_ratio;
            if (rc != QG_ERR_ok) qg_err_set(e, rc, "%s: case %s (%s): dot result: %s", qgh_name(f), ci->case_id, ci->description, br.text);
        }
        row->elements += 2 * nb + 1;
    }
    free(out);
done:
    qgh_array_free(&w);
    qgh_array_free(&q8);
    qgh_array_free(&exS);
    qgh_array_free(&exM);
    return rc;
}

typedef struct {
    const qg_kernel *k;
    qg_ktype t;
    const void *w;
    size_t nbytes, rows, cols, batch;
    const uint16_t *x;
    int f16;
} kq_gemv_ctx;

static int call_kq_gemv(void *vc, void *out)
{
    kq_gemv_ctx *c = vc;
    return c->k->fn.kq_gemv(c->t, c->w, c->nbytes, c->rows, c->cols, c->x, c->batch, c->f16 ? NULL : out, c->f16 ? out : NULL);
}

static int call_kq_gemv_column(void *vc, size_t b, void *out)
{
    kq_gemv_ctx one = *(const kq_gemv_ctx *)vc;
    one.x += b * one.cols;
    one.batch = 1;
    one.f16 = 0;
    return call_kq_gemv(&one, out);
}

static int run_kq_gemv_case(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    int64_t rows, cols, batch;
    qgh_array w, x, ystar, sabs;
    int rc = read_dims(f, ci, &rows, &cols, &batch, e);
    if (rc) return rc;
    memset(&ystar, 0, sizeof ystar);
    memset(&sabs, 0, sizeof sabs);
    memset(&x, 0, sizeof x);
    if ((rc = qgh_read(f, ci->name, "blocks", QGH_U8, NULL, 2, NULL, &w, e))) return rc;
    size_t dx[2] = {(size_t)batch, (size_t)cols};
    if ((rc = qgh_read(f, ci->name, "x", QGH_U16, "float16", 2, dx, &x, e))) goto done;
    const size_t ny = (size_t)rows * (size_t)batch;
    kq_gemv_ctx c = {k, (qg_ktype)qg_kq_from_name(k->format), w.data, w.count, (size_t)rows, (size_t)cols, (size_t)batch, x.data, 0};
    float *y = malloc((ny ? ny : 1) * 4), *yb = malloc((size_t)rows * 4 + 4);
    uint16_t *y16 = malloc((ny ? ny : 1) * 2);
    if (!y || !yb || !y16) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    } else if (strcmp(ci->expect, "invalid") == 0) {
        rc = qga_expect_error(f, ci, call_kq_gemv(&c, y), e);
    } else {
        size_t dy[2] = {(size_t)batch, (size_t)rows};
        if ((rc = qgh_read(f, ci->name, "ystar", QGH_F64, NULL, 2, dy, &ystar, e)) ||
            (rc = qgh_read(f, ci->name, "sum_abs", QGH_F64, NULL, 2, dy, &sabs, e)))
            goto out;
        qg_bound_report br;
        if ((rc = qg_call_guarded(call_kq_gemv, &c, y, ny, 4, e))) {
            qga_guard_fail(f, ci, rc, e);
            goto out;
        }
        rc = qg_compare_bounded(&k->numerics, (long)cols, ystar.data, sabs.data, NULL, y, ny, &br);
        if (br.worst_ratio > row->worst_ratio) row->worst_ratio = br.worst_ratio;
        if (rc != QG_ERR_ok) {
            qg_err_set(e, rc, "%s: case %s (%s): float32 output [batch][row] = [%zu][%zu]: %s", qgh_name(f), ci->case_id,
                       ci->description, br.first_failure / (size_t)rows, br.first_failure % (size_t)rows, br.text);
            goto out;
        }
        c.f16 = 1;
        if ((rc = qg_call_guarded(call_kq_gemv, &c, y16, ny, 2, e))) {
            qga_guard_fail(f, ci, rc, e);
            goto out;
        }
        for (size_t i = 0; i < ny; i++) y[i] = qg_f16_to_f32(y16[i]);
        rc = qg_compare_bounded(&k->numerics_f16, (long)cols, ystar.data, sabs.data, NULL, y, ny, &br);
        if (br.worst_ratio > row->worst_ratio) row->worst_ratio = br.worst_ratio;
        if (rc != QG_ERR_ok) {
            qg_err_set(e, rc, "%s: case %s (%s): fp16 output [batch][row] = [%zu][%zu]: %s", qgh_name(f), ci->case_id, ci->description,
                       br.first_failure / (size_t)rows, br.first_failure % (size_t)rows, br.text);
            goto out;
        }
        /* Batch invariance: each column alone gives the bits it had inside the batch. */
        c.f16 = 0;
        if ((rc = qg_call_guarded(call_kq_gemv, &c, y, ny, 4, e))) goto out;
        if ((rc = qga_batch_invariance(f, ci, call_kq_gemv_column, &c, y, (size_t)batch, (size_t)rows, yb, e))) goto out;
        row->elements += 2 * ny;
    }
out:
    free(y);
    free(yb);
    free(y16);
done:
    qgh_array_free(&w);
    qgh_array_free(&x);
    qgh_array_free(&ystar);
    qgh_array_free(&sabs);
    return rc;
}

static int run_case(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    switch (k->kind) {
    case QG_KIND_CONVERT:
        if (strcmp(ci->expect, "valid") != 0)
            return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s@expect: conversions have no invalid inputs", qgh_name(f), ci->name);
        return run_convert_case(k, f, ci, row, e);
    case QG_KIND_KQ_DEQUANT: return run_kq_dequant_case(k, f, ci, row, e);
    case QG_KIND_KQ_QUANTIZE: return run_kq_quantize_case(k, f, ci, row, e);
    case QG_KIND_KQ_DOT: return run_kq_dot_case(k, f, ci, row, e);
    case QG_KIND_KQ_GEMV: return run_kq_gemv_case(k, f, ci, row, e);
    case QG_KIND_SPQR_DEQUANT:
    case QG_KIND_SPQR_GEMV: return qga_run_spqr_case(k, f, ci, row, e);
    case QG_KIND_RANS_NORMALIZE:
    case QG_KIND_RANS_ENCODE:
    case QG_KIND_RANS_DECODE:
    case QG_KIND_RANS_GEMV:
    case QG_KIND_INT8_GEMV: return qga_run_rans_case(k, f, ci, row, e);
    }
    return qg_err_set(e, QG_ERR_unsupported, "kernel %s: no audit runner for its kind", k->name);
}

static void init_row(qg_audit_row *row, const qg_kernel *k, const char *file)
{
    memset(row, 0, sizeof *row);
    row->format = k->format;
    row->path = k->path;
    row->backend = qg_backend_name(k->backend);
    row->kernel = k->name;
    row->tier = k->numerics.tier;
    snprintf(row->file, sizeof row->file, "%s", file);
}

/* Which cases a kernel runs: those naming its path, plus the cases another path's kernels share with it
 * (reference/spec/fixtures.md): the plain int8 GEMV checks the rANS gemv cases; rANS decoders decode
 * the containers of the encode cases; every rANS reader meets the corrupt corpus; the SpQR dequantizer
 * must reject the invalid gemv layers too. */
static int path_matches(const qg_kernel *k, const qgh_case_info *ci)
{
    if (strcmp(ci->path, k->path) == 0) return 1;
    switch (k->kind) {
    case QG_KIND_INT8_GEMV: return strcmp(ci->path, "gemv") == 0;
    case QG_KIND_RANS_DECODE: return strcmp(ci->path, "encode") == 0 || strcmp(ci->path, "corrupt") == 0;
    case QG_KIND_RANS_GEMV: return strcmp(ci->path, "corrupt") == 0;
    case QG_KIND_SPQR_DEQUANT: return strcmp(ci->path, "gemv") == 0 && strcmp(ci->expect, "invalid") == 0;
    default: return 0;
    }
}

static int format_selected(const qg_audit_opts *o, const char *fmt)
{
    return o->format == NULL || strcmp(o->format, fmt) == 0;
}

static void emit(qg_audit_row *row, qg_audit_sink sink, void *ctx, qg_audit_summary *sum)
{
    if (row->verdict == QG_AUDIT_PASS) sum->pass++;
    else if (row->verdict == QG_AUDIT_FAIL) sum->fail++;
    else sum->skip++;
    if (sink) sink(row, ctx);
}

static int check_dir(const char *dir, qg_err *e)
{
    DIR *d = opendir(dir);
    if (d == NULL) return qg_err_set(e, QG_ERR_io_failed, "cannot open golden directory %s: %s", dir, strerror(errno));
    closedir(d);
    return QG_ERR_ok;
}

int qg_audit_check_golden(const qg_audit_opts *o, qg_err *e)
{
    qgh_manifest *m = NULL;
    int rc = check_dir(o->golden_dir, e);
    if (rc == QG_ERR_ok && !o->no_manifest) rc = qgh_manifest_load(o->golden_dir, &m, e);
    qgh_manifest_free(m);
    return rc;
}

int qg_audit(const qg_audit_opts *o, qg_audit_sink sink, void *ctx, qg_audit_summary *sum_out)
{
    qg_audit_summary sum = {0, 0, 0};
    qg_err e;
    qgh_manifest *m = NULL;
    qg_audit_row row;
    qg_err_clear(&e);
    int rc0 = check_dir(o->golden_dir, &e);
    if (rc0 == QG_ERR_ok && !o->no_manifest) rc0 = qgh_manifest_load(o->golden_dir, &m, &e);
    if (rc0 != QG_ERR_ok) {
        memset(&row, 0, sizeof row);
        row.format = row.path = row.backend = row.kernel = "-";
        snprintf(row.file, sizeof row.file, "%s", rc0 == QG_ERR_io_failed ? "-" : "MANIFEST");
        row.verdict = QG_AUDIT_FAIL;
        snprintf(row.detail, sizeof row.detail, "%s", e.msg);
        emit(&row, sink, ctx, &sum);
        if (sum_out) *sum_out = sum;
        return 1;
    }
    /* Formats in registry order, each once. */
    const size_t nk = qg_registry_count();
    for (size_t i = 0; i < nk; i++) {
        const char *fmt = qg_registry_at(i)->format;
        int seen = 0;
        for (size_t j = 0; j < i; j++) seen |= strcmp(qg_registry_at(j)->format, fmt) == 0;
        if (seen || !format_selected(o, fmt)) continue;

        /* Rows of this format that will run; the others are reported as skipped once. */
        const qg_kernel *run[64];
        size_t nrun = 0;
        size_t cases_of[64] = {0};
        for (size_t j = 0; j < nk; j++) {
            const qg_kernel *k = qg_registry_at(j);
            if (strcmp(k->format, fmt) != 0 || (o->backend >= 0 && (int)k->backend != o->backend)) continue;
            char why[200];
            if (!qg_kernel_available(k, why, sizeof why)) {
                init_row(&row, k, "-");
                row.verdict = QG_AUDIT_SKIP;
                snprintf(row.detail, sizeof row.detail, "%s", why);
                emit(&row, sink, ctx, &sum);
            } else if (nrun < 64) {
                run[nrun++] = k;
            }
        }
        if (nrun == 0) continue;

        static char files[256][256];
        size_t nf = qg_list_fixture_files(o->golden_dir, fmt, files, 256);
        if (nf == 0) {
            memset(&row, 0, sizeof row);
            row.format = fmt;
            row.path = row.backend = row.kernel = "-";
            snprintf(row.file, sizeof row.file, "%s/", fmt);
            row.verdict = QG_AUDIT_FAIL;
            snprintf(row.detail, sizeof row.detail, "%s/%s: no fixture files; regenerate with generators/regen.py", o->golden_dir, fmt);
            emit(&row, sink, ctx, &sum);
            continue;
        }
        for (size_t fi = 0; fi < nf; fi++) {
            qgh_file *f = NULL;
            int rc = qgh_open(o->golden_dir, files[fi], m, &f, &e);
            if (rc == QG_ERR_ok) rc = qgh_lint(f, &e);
            if (rc != QG_ERR_ok) {
                memset(&row, 0, sizeof row);
                row.format = fmt;
                row.path = row.backend = row.kernel = "-";
                snprintf(row.file, sizeof row.file, "%s", files[fi]);
                row.verdict = QG_AUDIT_FAIL;
                snprintf(row.detail, sizeof row.detail, "%s [%s]", e.msg, qg_error_name(rc));
                emit(&row, sink, ctx, &sum);
                qgh_close(f);
                continue;
            }
            for (size_t r = 0; r < nrun; r++) {
                const qg_kernel *k = run[r];
                init_row(&row, k, files[fi]);
                for (size_t c = 0; c < qgh_case_count(f) && row.verdict != QG_AUDIT_FAIL; c++) {
                    qgh_case_info ci;
                    if ((rc = qgh_read_case_info(f, qgh_case_name(f, c), &ci, &e)) == QG_ERR_ok) {
                        if (!path_matches(k, &ci)) continue;
                        rc = run_case(k, f, &ci, &row, &e);
                        row.cases++;
                    }
                    if (rc != QG_ERR_ok) {
                        row.verdict = QG_AUDIT_FAIL;
                        snprintf(row.detail, sizeof row.detail, "%s [%s]", e.msg, qg_error_name(rc));
                    }
                }
                if (row.cases == 0 && row.verdict != QG_AUDIT_FAIL) continue; /* file has nothing for this path */
                cases_of[r] += row.cases;
                emit(&row, sink, ctx, &sum);
            }
            qgh_close(f);
        }
        for (size_t r = 0; r < nrun; r++) {
            if (cases_of[r] > 0) continue;
            init_row(&row, run[r], "-");
            row.verdict = QG_AUDIT_FAIL;
            snprintf(row.detail, sizeof row.detail, "no fixture in %s/%s exercises path %s", o->golden_dir, fmt, run[r]->path);
            emit(&row, sink, ctx, &sum);
        }
    }
    qgh_manifest_free(m);
    if (sum_out) *sum_out = sum;
    return sum.fail ? 1 : 0;
}
