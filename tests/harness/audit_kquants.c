/* Audit runners of the K-quant kinds: dequantization and quantization (tier 1), the Q8_K dot (exact
 * integer partial sums, bounded float result) and the fused GEMV (bounded, batch-invariant). */
#include "audit_formats.h"
#include "compare.h"
#include "fixture.h"
#include "guard.h"
#include "kinds.h"

#include "qgold/fp16.h"
#include "qgold/kquants_layout.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    int rc = qga_read_dims(f, ci, &rows, &cols, NULL, e);
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
    const qg_kernel *k;
    qg_ktype t;
    const qgh_array *x;
    size_t rows, cols;
} kq_q_ctx;

/* The row's own quantizer (the reference for the built-in row, a plugin's for a plugin row). */
static int call_kq_quantize(void *vc, void *out)
{
    kq_q_ctx *c = vc;
    return c->k->fn.kq_quantize(c->t, c->x->data, c->rows, c->cols, out, c->rows * (c->cols / QG_QK_K) * qg_kq_block_bytes(c->t));
}

static int run_kq_quantize_case(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    int64_t rows, cols;
    qgh_array x, ex;
    int rc = qga_read_dims(f, ci, &rows, &cols, NULL, e);
    size_t dims[2] = {(size_t)rows, (size_t)cols};
    if (rc || (rc = qgh_read(f, ci->name, "x", QGH_U32, "float32", 2, dims, &x, e))) return rc;
    kq_q_ctx c = {k, (qg_ktype)qg_kq_from_name(k->format), &x, (size_t)rows, (size_t)cols};
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
        *D = qg_f16_to_f32((qg_f16)(blk[QG_Q6K_D] | blk[QG_Q6K_D + 1] << 8));
        *Dm = 0;
    } else {
        *D = qg_f16_to_f32((qg_f16)(blk[QG_Q4K_D] | blk[QG_Q4K_D + 1] << 8));
        *Dm = qg_f16_to_f32((qg_f16)(blk[QG_Q4K_DMIN] | blk[QG_Q4K_DMIN + 1] << 8));
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
    int rc = qga_read_dims(f, ci, NULL, &cols, NULL, e);
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


static int run_kq_gemv_case(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    int64_t rows, cols, batch;
    qgh_array w, x, ystar, sabs;
    int rc = qga_read_dims(f, ci, &rows, &cols, &batch, e);
    if (rc) return rc;
    memset(&ystar, 0, sizeof ystar);
    memset(&sabs, 0, sizeof sabs);
    memset(&x, 0, sizeof x);
    if ((rc = qgh_read(f, ci->name, "blocks", QGH_U8, NULL, 2, NULL, &w, e))) return rc;
    size_t dx[2] = {(size_t)batch, (size_t)cols};
    if ((rc = qgh_read(f, ci->name, "x", QGH_U16, "float16", 2, dx, &x, e))) goto done;
    const size_t ny = (size_t)rows * (size_t)batch;
    qga_kq_product c = {k->fn.kq_gemv, (qg_ktype)qg_kq_from_name(k->format), w.data, w.count, (size_t)rows, (size_t)cols, (size_t)batch, x.data, 0};
    float *y = malloc((ny ? ny : 1) * 4), *yb = malloc((size_t)rows * 4 + 4);
    uint16_t *y16 = malloc((ny ? ny : 1) * 2);
    if (!y || !yb || !y16) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    } else if (strcmp(ci->expect, "invalid") == 0) {
        rc = qga_expect_error(f, ci, qga_kq_product_call(&c, y), e);
    } else {
        size_t dy[2] = {(size_t)batch, (size_t)rows};
        if ((rc = qgh_read(f, ci->name, "ystar", QGH_F64, NULL, 2, dy, &ystar, e)) ||
            (rc = qgh_read(f, ci->name, "sum_abs", QGH_F64, NULL, 2, dy, &sabs, e)))
            goto out;
        qg_bound_report br;
        if ((rc = qg_call_guarded(qga_kq_product_call, &c, y, ny, 4, e))) {
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
        if ((rc = qg_call_guarded(qga_kq_product_call, &c, y16, ny, 2, e))) {
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
        if ((rc = qg_call_guarded(qga_kq_product_call, &c, y, ny, 4, e))) goto out;
        if ((rc = qga_batch_invariance(f, ci, qga_kq_product_column, &c, y, (size_t)batch, (size_t)rows, yb, e))) goto out;
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

const qga_kind qga_kind_kq_dequant = {QG_KIND_KQ_DEQUANT, "kq_dequant", run_kq_dequant_case, NULL, qga_kq_dequant_generated};
const qga_kind qga_kind_kq_quantize = {QG_KIND_KQ_QUANTIZE, "kq_quantize", run_kq_quantize_case, NULL, NULL};
const qga_kind qga_kind_kq_dot = {QG_KIND_KQ_DOT, "kq_dot", run_kq_dot_case, NULL, qga_kq_dot_generated};
const qga_kind qga_kind_kq_gemv = {QG_KIND_KQ_GEMV, "kq_gemv", run_kq_gemv_case, NULL, qga_kq_gemv_generated};
