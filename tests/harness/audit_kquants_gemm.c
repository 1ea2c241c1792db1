/* Audit runner of the K-quant `gemm` path (batch 1..64): it runs the GEMV fixture cases of its format
 * (the same products; batch <= 16 there) against the bound of the row's numerics with the path's terms
 * (kq_gemm_bound.h), float32 and fp16 outputs, then batch invariance: each column alone, and each
 * column inside a batch of 64 (the fixture's columns repeated), must give the bits it had in the
 * fixture's batch. */
#include "audit_formats.h"
#include "compare.h"
#include "fixture.h"
#include "guard.h"
#include "kinds.h"
#include "kq_gemm_bound.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/kquants_gemm.h"
#include "qgold/kquants_layout.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rd_u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static double rd_f16(const uint8_t *p) { return qg_f16_to_f32((qg_f16)(p[0] | p[1] << 8)); }

/* m_k of element e of a block (kq_gemm_bound.h) and whether its decode rounds. */
static double term_mag(qg_ktype t, const uint8_t *blk, int e, int *rounds)
{
    if (t == QG_Q4_K || t == QG_Q5_K) {
        const uint8_t *s = blk + QG_Q4K_SCALES, *qs = blk + (t == QG_Q4_K ? QG_Q4K_QS : QG_Q5K_QS);
        const int c = e / 64, l = e % 64, sub = e / 32;
        int q = l < 32 ? (qs[32 * c + l] & 15) : (qs[32 * c + l - 32] >> 4), sc, m;
        if (t == QG_Q5_K) q |= ((blk[QG_Q5K_QH + e % 32] >> sub) & 1) << 4;
        if (sub < 4) {
            sc = s[sub] & 63;
            m = s[sub + 4] & 63;
        } else {
            sc = (s[sub + 4] & 15) | ((s[sub - 4] >> 6) << 4);
            m = (s[sub + 4] >> 4) | ((s[sub] >> 6) << 4);
        }
        *rounds = 1;
        return fabs(rd_f16(blk + QG_Q4K_D) * sc * q) + fabs(rd_f16(blk + QG_Q4K_DMIN) * m);
    }
    if (t == QG_Q6_K) {
        const int h = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
        const int lowb = blk[QG_Q6K_QL + 64 * h + (quarter & 1) * 32 + l];
        const int q = ((quarter < 2 ? lowb & 15 : lowb >> 4) | (((blk[QG_Q6K_QH + 32 * h + l] >> (2 * quarter)) & 3) << 4)) - 32;
        *rounds = 0;
        return fabs(rd_f16(blk + QG_Q6K_D) * (int8_t)blk[QG_Q6K_SCALES + e / 16] * q);
    }
    *rounds = 1;
    return fabs((double)qg_f32_from_bits(rd_u32(blk + QG_Q8K_D)) * (int8_t)blk[QG_Q8K_QS + e]);
}

int qg_kq_gemm_bound_terms(qg_ktype t, const uint8_t *w, size_t rows, size_t cols, const uint16_t *x, size_t batch, double *ystar,
                           double *sum_abs, double *sum_e)
{
    const size_t bb = qg_kq_block_bytes(t), nb = cols / QG_QK_K;
    float *wr = malloc(cols * sizeof *wr);
    double *mag = malloc(cols * sizeof *mag), *err = malloc(cols * sizeof *err), *xd = malloc(batch * cols * sizeof *xd);
    int rc = (wr && mag && err && xd) ? QG_ERR_ok : QG_ERR_alloc_failed;
    for (size_t i = 0; rc == QG_ERR_ok && i < batch * cols; i++) xd[i] = qg_f16_to_f32(x[i]);
    for (size_t r = 0; rc == QG_ERR_ok && r < rows; r++) {
        const uint8_t *row = w + r * nb * bb;
        if ((rc = qg_kq_dequant_f32_ref(t, row, nb * bb, 1, cols, wr)) != QG_ERR_ok) break;
        for (size_t k = 0; k < cols; k++) {
            int rounds;
            mag[k] = term_mag(t, row + (k / QG_QK_K) * bb, (int)(k % QG_QK_K), &rounds);
            err[k] = rounds ? 0x1p-24 * mag[k] + 0x1p-149 : 0.0;
        }
        for (size_t b = 0; b < batch; b++) {
            double ys = 0, sa = 0, se = 0;
            for (size_t k = 0; k < cols; k++) {
                const double xv = xd[b * cols + k];
                ys += (double)wr[k] * xv; /* exact product in double */
                sa += mag[k] * fabs(xv);
                se += err[k] * fabs(xv);
            }
            ystar[b * rows + r] = ys;
            sum_abs[b * rows + r] = sa;
            /* at most K/16 + K/256 float32 scale products, each off by <= 2^-150 where it underflows */
            sum_e[b * rows + r] = se + (double)(cols / 16 + cols / 256) * 0x1p-150;
        }
    }
    free(wr);
    free(mag);
    free(err);
    free(xd);
    return rc;
}


/* Each column of y (batch columns) inside a batch of QG_KQ_GEMM_MAX_BATCH made of the columns repeated. */
static int batch64_invariance(qgh_file *f, const qgh_case_info *ci, const qga_kq_product *c, const float *y, qg_err *e)
{
    const size_t B = QG_KQ_GEMM_MAX_BATCH;
    uint16_t *x64 = malloc(B * c->cols * 2);
    float *y64 = malloc(B * c->rows * 4);
    int rc = (x64 && y64) ? QG_ERR_ok : qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    for (size_t b = 0; rc == QG_ERR_ok && b < B; b++) memcpy(x64 + b * c->cols, c->x + (b % c->batch) * c->cols, c->cols * 2);
    qga_kq_product c64 = *c;
    c64.x = x64;
    c64.batch = B;
    c64.f16 = 0;
    if (rc == QG_ERR_ok && (rc = qg_call_guarded(qga_kq_product_call, &c64, y64, B * c->rows, 4, e)) != QG_ERR_ok) qga_guard_fail(f, ci, rc, e);
    for (size_t b = 0; rc == QG_ERR_ok && b < B; b++)
        if (memcmp(y64 + b * c->rows, y + (b % c->batch) * c->rows, c->rows * 4) != 0)
            rc = qg_err_set(e, QG_ERR_mismatch, "%s: case %s: column %zu of a batch of %zu differs from column %zu of the fixture's batch "
                            "of %zu (batch invariance)", qgh_name(f), ci->case_id, b, B, b % c->batch, c->batch);
    free(x64);
    free(y64);
    return rc;
}

static int run_kq_gemm_case(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    int64_t rows, cols, batch;
    qgh_array w, x;
    int rc = qga_read_dims(f, ci, &rows, &cols, &batch, e);
    if (rc) return rc;
    memset(&x, 0, sizeof x);
    if ((rc = qgh_read(f, ci->name, "blocks", QGH_U8, NULL, 2, NULL, &w, e))) return rc;
    size_t dx[2] = {(size_t)batch, (size_t)cols};
    const size_t ny = (size_t)rows * (size_t)batch;
    float *y = NULL, *yb = NULL;
    uint16_t *y16 = NULL;
    double *ys = NULL, *sa = NULL, *se = NULL;
    if ((rc = qgh_read(f, ci->name, "x", QGH_U16, "float16", 2, dx, &x, e))) goto done;
    qga_kq_product c = {k->fn.kq_gemm, (qg_ktype)qg_kq_from_name(k->format), w.data, w.count, (size_t)rows, (size_t)cols, (size_t)batch, x.data, 0};
    y = malloc((ny ? ny : 1) * 4);
    yb = malloc((size_t)rows * 4 + 4);
    y16 = malloc((ny ? ny : 1) * 2);
    ys = malloc((ny ? ny : 1) * 8);
    sa = malloc((ny ? ny : 1) * 8);
    se = malloc((ny ? ny : 1) * 8);
    if (!y || !yb || !y16 || !ys || !sa || !se) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
        goto done;
    }
    if (strcmp(ci->expect, "invalid") == 0) {
        rc = qga_expect_error(f, ci, qga_kq_product_call(&c, y), e);
        goto done;
    }
    if ((rc = qg_kq_gemm_bound_terms(c.t, w.data, c.rows, c.cols, x.data, c.batch, ys, sa, se)) != QG_ERR_ok) {
        qg_err_set(e, rc, "%s: case %s: bound terms: %s", qgh_name(f), ci->case_id, qg_error_message(rc));
        goto done;
    }
    qg_bound_report br;
    for (int v = 0; v < 2; v++) {
        c.f16 = v;
        if ((rc = qg_call_guarded(qga_kq_product_call, &c, v ? (void *)y16 : (void *)y, ny, v ? 2 : 4, e))) {
            qga_guard_fail(f, ci, rc, e);
            goto done;
        }
        if (v)
            for (size_t i = 0; i < ny; i++) y[i] = qg_f16_to_f32(y16[i]);
        rc = qg_compare_bounded(v ? &k->numerics_f16 : &k->numerics, (long)cols, ys, sa, se, y, ny, &br);
        if (br.worst_ratio > row->worst_ratio) row->worst_ratio = br.worst_ratio;
        if (rc != QG_ERR_ok) {
            qg_err_set(e, rc, "%s: case %s (%s): %s output [batch][row] = [%zu][%zu]: %s", qgh_name(f), ci->case_id, ci->description,
                       v ? "fp16" : "float32", br.first_failure / (size_t)rows, br.first_failure % (size_t)rows, br.text);
            goto done;
        }
    }
    c.f16 = 0;
    if ((rc = qg_call_guarded(qga_kq_product_call, &c, y, ny, 4, e))) {
        qga_guard_fail(f, ci, rc, e);
        goto done;
    }
    if ((rc = qga_batch_invariance(f, ci, qga_kq_product_column, &c, y, (size_t)batch, (size_t)rows, yb, e))) goto done;
    if (batch > 0 && (rc = batch64_invariance(f, ci, &c, y, e))) goto done;
    row->elements += 2 * ny;
done:
    free(y);
    free(yb);
    free(y16);
    free(ys);
    free(sa);
    free(se);
    qgh_array_free(&w);
    qgh_array_free(&x);
    return rc;
}

/* The GEMV fixtures of the format, except an invalid batch (batch 17 is a valid gemm batch). */
static int kq_gemm_shares(const qg_kernel *k, const qgh_case_info *ci)
{
    (void)k;
    return strcmp(ci->path, "gemv") == 0 && strcmp(ci->error, "kq_batch_out_of_range") != 0;
}

const qga_kind qga_kind_kq_gemm = {QG_KIND_KQ_GEMM, "kq_gemm", run_kq_gemm_case, kq_gemm_shares, NULL};
