/* Audit runner of the K-quant GEMV with Q8_K activations (qgold/kquants_q8k_gemv.h): the GEMV fixtures
 * of the format (the same weights and fp16 activations; invalid cases must fail with the fixture's
 * error) and on-the-fly shapes. Each output is judged at the row's declared numerics against
 *   y* = sum_i dy_i (D_i S_i - Dm_i M_i)
 * formed in double from the exact integers S_i, M_i of the reference dot with the activations quantized
 * by the reference Q8_K quantizer (what the path computes), with sum |terms| as the magnitude the
 * roundings scale with; then each column alone must give the bits it had in the batch. */
#include "audit_formats.h"
#include "compare.h"
#include "fixture.h"
#include "guard.h"
#include "kinds.h"

#include "qgold/fp16.h"
#include "qgold/kquants_layout.h"
#include "qgold/kquants_q8k_gemv.h"
#include "qgold/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double ld_f32le(const uint8_t *p)
{
    return qg_f32_from_bits((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}
static double ld_f16le(const uint8_t *p) { return qg_f16_to_f32((qg_f16)(p[0] | p[1] << 8)); }

/* Code e of a weight block as used by the dot, with its group scale: Q4_K/Q5_K q in 0..31 and the
 * 6-bit sc of its sub-block of 32; Q6_K q - 32 and the int8 scale of its group of 16 (layout: the
 * kquants spec). */
static int q8k_code(qg_ktype t, const uint8_t *blk, int e, int *sc)
{
    if (t == QG_Q6_K) {
        const int h = e / 128, r = e % 128, qt = r / 32, l = r % 32;
        const uint8_t lb = blk[QG_Q6K_QL + 64 * h + 32 * (qt & 1) + l];
        const int lo = qt < 2 ? lb & 15 : lb >> 4, hb = (blk[QG_Q6K_QH + 32 * h + l] >> (2 * qt)) & 3;
        *sc = (int8_t)blk[QG_Q6K_SCALES + e / 16];
        return (lo | hb << 4) - 32;
    }
    const uint8_t *q = blk + QG_Q4K_SCALES;
    const int s = e / 32, j = e / 64, hi = (e % 64) >= 32, l = e % 32;
    *sc = s < 4 ? q[s] & 63 : (q[s + 4] & 15) | ((q[s - 4] >> 6) << 4);
    const uint8_t b = blk[(t == QG_Q5_K ? QG_Q5K_QS : QG_Q4K_QS) + 32 * j + l];
    int c = hi ? b >> 4 : b & 15;
    if (t == QG_Q5_K) c |= ((blk[QG_Q5K_QH + l] >> (2 * j + hi)) & 1) << 4;
    return c;
}

/* y* of every output [b][m] from the reference quantizer and the reference dot's integers, and
 * sum |w x| over the integer products the float part scales: sum_e |D dy sc_e q_e q8_e| + |Dm dy M_i|
 * per block (a bound on every partial integer sum a backend may scale: whole S_i or lanes of it); special[b][m] = 1 where a block of row m has a d or dmin that is inf or NaN. Such an output
 * has no finite value to approximate, and where the NaN or inf arises depends on how a backend splits
 * S_i before scaling it (the reference scales 8 partial lanes, inf*0 = NaN in a zero lane; the CPU
 * kernels scale S_i whole): the output must then be non-finite, which one is not judged. */
static int q8k_ystar(qg_ktype t, const uint8_t *w, size_t rows, size_t cols, const uint16_t *x, size_t batch, double *ystar,
                     double *sabs, unsigned char *special, qg_err *e)
{
    const size_t nb = cols / QG_QK_K, qb = nb * QG_Q8K_BYTES, bb = qg_kq_block_bytes(t);
    float *xf = malloc(cols * sizeof *xf);
    uint8_t *q8 = malloc(batch * qb);
    int32_t *S = malloc(2 * nb * sizeof *S);
    int rc = xf && q8 && S ? qg_kq_q8k_activations(x, batch, cols, xf, q8) : QG_ERR_alloc_failed;
    if (rc != QG_ERR_ok) rc = qg_err_set(e, rc, "Q8_K activations: %s", qg_error_name(rc));
    for (size_t b = 0; b < batch && rc == QG_ERR_ok; b++) {
        for (size_t m = 0; m < rows && rc == QG_ERR_ok; m++) {
            float res;
            const uint8_t *wr = w + m * nb * bb, *yr = q8 + b * qb;
            if ((rc = qg_kq_dot_q8k_ref(t, wr, yr, cols, S, S + nb, &res)) != QG_ERR_ok) {
                rc = qg_err_set(e, rc, "reference dot: %s", qg_error_name(rc));
                break;
            }
            double ys = 0, sa = 0;
            special[b * rows + m] = 0;
            for (size_t i = 0; i < nb; i++) {
                const uint8_t *blk = wr + i * bb;
                const double dy = ld_f32le(yr + i * QG_Q8K_BYTES + QG_Q8K_D);
                const double D = ld_f16le(blk + (t == QG_Q6_K ? QG_Q6K_D : QG_Q4K_D)), Dm = t == QG_Q6_K ? 0.0 : ld_f16le(blk + QG_Q4K_DMIN);
                const double s1 = D * dy * (double)S[i], s2 = Dm * dy * (double)S[nb + i];
                if (!isfinite(D) || !isfinite(Dm)) special[b * rows + m] = 1;
                ys += s1 - s2;
                double mag = 0;
                for (int el = 0; el < QG_QK_K; el++) {
                    int sc;
                    const int q = q8k_code(t, blk, el, &sc);
                    mag += fabs((double)sc * q * (int8_t)yr[i * QG_Q8K_BYTES + QG_Q8K_QS + el]);
                }
                sa += fabs(D * dy) * mag + fabs(s2);
            }
            ystar[b * rows + m] = ys;
            sabs[b * rows + m] = sa;
        }
    }
    free(xf);
    free(q8);
    free(S);
    return rc;
}

/* Runs kernel k on (w, x) and judges its float32 and fp16 outputs and its batch invariance; `where`
 * names the input in messages. */
static int q8k_judge(const qg_kernel *k, qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x,
                     size_t batch, const char *where, qg_audit_row *row, qg_err *e)
{
    const size_t ny = rows * batch;
    double *ystar = malloc(ny * sizeof *ystar), *sabs = malloc(ny * sizeof *sabs), *yst = malloc(ny * sizeof *yst);
    unsigned char *special = malloc(ny);
    float *y = malloc(ny * 4), *yb = malloc(rows * 4 + 4);
    uint16_t *y16 = malloc(ny * 2);
    qga_kq_product c = {k->fn.kq_gemv, t, w, nbytes, rows, cols, batch, x, 0};
    int rc = ystar && sabs && yst && special && y && yb && y16 ? QG_ERR_ok : qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    if (rc == QG_ERR_ok) rc = q8k_ystar(t, w, rows, cols, x, batch, ystar, sabs, special, e);
    for (int v = 0; v < 2 && rc == QG_ERR_ok; v++) {
        c.f16 = v;
        char tmp[sizeof e->msg];
        if ((rc = qg_call_guarded(qga_kq_product_call, &c, v ? (void *)y16 : (void *)y, ny, v ? 2 : 4, e)) != QG_ERR_ok) {
            snprintf(tmp, sizeof tmp, "%s", e->msg);
            rc = qg_err_set(e, rc, "%s: %s", where, tmp);
            break;
        }
        if (v)
            for (size_t i = 0; i < ny; i++) y[i] = qg_f16_to_f32(y16[i]);
        for (size_t i = 0; i < ny && rc == QG_ERR_ok; i++) {
            yst[i] = ystar[i];
            if (!special[i]) continue;
            if (isfinite(y[i]))
                rc = qg_err_set(e, QG_ERR_bound_exceeded, "%s: %s output [batch][row] = [%zu][%zu] = %g is finite, but its row has an "
                                "inf or NaN scale", where, v ? "fp16" : "float32", i / rows, i % rows, (double)y[i]);
            yst[i] = y[i]; /* any inf or NaN */
        }
        if (rc != QG_ERR_ok) break;
        qg_bound_report br;
        rc = qg_compare_bounded(v ? &k->numerics_f16 : &k->numerics, (long)cols, yst, sabs, NULL, y, ny, &br);
        if (br.worst_ratio > row->worst_ratio) row->worst_ratio = br.worst_ratio;
        if (rc != QG_ERR_ok)
            qg_err_set(e, rc, "%s: %s output [batch][row] = [%zu][%zu]: %s", where, v ? "fp16" : "float32", br.first_failure / rows,
                       br.first_failure % rows, br.text);
        row->elements += ny;
    }
    /* Batch invariance: each column alone gives the bits it had inside the batch. */
    c.f16 = 0;
    if (rc == QG_ERR_ok && (rc = qg_call_guarded(qga_kq_product_call, &c, y, ny, 4, e)) == QG_ERR_ok) {
        for (size_t b = 0; batch > 1 && b < batch && rc == QG_ERR_ok; b++) {
            if ((rc = qga_kq_product_column(&c, b, yb)) != QG_ERR_ok) {
                qg_err_set(e, rc, "%s: column %zu alone: %s", where, b, qg_error_name(rc));
            } else if (memcmp(yb, y + b * rows, rows * 4) != 0) {
                rc = qg_err_set(e, QG_ERR_mismatch, "%s: column %zu computed alone differs from the same column in a batch of %zu "
                                "(batch invariance)", where, b, batch);
            }
        }
    }
    free(ystar);
    free(sabs);
    free(yst);
    free(special);
    free(y);
    free(yb);
    free(y16);
    return rc;
}

static int run_q8k_case(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    int64_t rows, cols, batch;
    qgh_array w, x;
    int rc = qga_read_dims(f, ci, &rows, &cols, &batch, e);
    if (rc) return rc;
    memset(&x, 0, sizeof x);
    if ((rc = qgh_read(f, ci->name, "blocks", QGH_U8, NULL, 2, NULL, &w, e))) return rc;
    size_t dx[2] = {(size_t)batch, (size_t)cols};
    const qg_ktype t = (qg_ktype)qg_kq_from_name(k->format);
    if ((rc = qgh_read(f, ci->name, "x", QGH_U16, "float16", 2, dx, &x, e)) == QG_ERR_ok) {
        if (strcmp(ci->expect, "invalid") == 0) {
            const size_t ny = (size_t)rows * (size_t)batch;
            float *y = malloc((ny ? ny : 1) * 4);
            qga_kq_product c = {k->fn.kq_gemv, t, w.data, w.count, (size_t)rows, (size_t)cols, (size_t)batch, x.data, 0};
            rc = y ? qga_expect_error(f, ci, qga_kq_product_call(&c, y), e) : qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
            free(y);
        } else {
            char where[160];
            snprintf(where, sizeof where, "%s: case %s (%s)", qgh_name(f), ci->case_id, ci->description);
            rc = q8k_judge(k, t, w.data, w.count, (size_t)rows, (size_t)cols, x.data, (size_t)batch, where, row, e);
        }
    }
    qgh_array_free(&w);
    qgh_array_free(&x);
    return rc;
}

/* The GEMV fixtures of the format (its weights and activations). */
static int q8k_shares(const qg_kernel *k, const qgh_case_info *ci)
{
    (void)k;
    return strcmp(ci->path, "gemv") == 0;
}

/* On the fly: random codes with ordinary scales (d, dmin in [1e-4, 2e-3]) or every byte random (inf/NaN
 * scales included), activations uniform in [-1, 1] from the pinned stream. */
static int q8k_gen_run(const qga_gen_params *g, qg_audit_row *row, qg_err *e)
{
    const qg_ktype t = (qg_ktype)qg_kq_from_name(g->k->format);
    const size_t bb = qg_kq_block_bytes(t), nblk = g->rows * (g->cols / QG_QK_K), nbytes = nblk * bb;
    uint8_t *w = malloc(nbytes);
    uint16_t *x = malloc(g->batch * g->cols * 2);
    qg_rng rng;
    qg_rng_init(&rng, 0x71386Bu + (uint64_t)t);
    int rc = w && x ? QG_ERR_ok : qg_err_set(e, QG_ERR_alloc_failed, "out of memory (%zux%zu)", g->rows, g->cols);
    for (int r = 0; r < g->rounds && rc == QG_ERR_ok; r++) {
        for (size_t i = 0; i < nbytes; i++) w[i] = (uint8_t)(qg_rng_u64(&rng) >> 56);
        for (size_t i = 0; i < nblk && !g->random_scales; i++) {
            uint8_t *blk = w + i * bb;
            const qg_f16 d = qg_f32_to_f16(qg_rng_uniform(&rng, 0.0001f, 0.002f)), dm = qg_f32_to_f16(qg_rng_uniform(&rng, 0.0001f, 0.002f));
            const size_t od = t == QG_Q6_K ? QG_Q6K_D : QG_Q4K_D;
            blk[od] = (uint8_t)d, blk[od + 1] = (uint8_t)(d >> 8);
            if (t != QG_Q6_K) blk[QG_Q4K_DMIN] = (uint8_t)dm, blk[QG_Q4K_DMIN + 1] = (uint8_t)(dm >> 8);
        }
        for (size_t i = 0; i < g->batch * g->cols; i++) x[i] = qg_f32_to_f16(qg_rng_uniform(&rng, -1.0f, 1.0f));
        char where[96];
        snprintf(where, sizeof where, "round %d (%zux%zu b%zu%s)", r, g->rows, g->cols, g->batch, g->random_scales ? ", random scales" : "");
        rc = q8k_judge(g->k, t, w, nbytes, g->rows, g->cols, x, g->batch, where, row, e);
    }
    free(w);
    free(x);
    return rc;
}

static size_t q8k_generated(const qg_kernel *k, int full, qga_generated *out, size_t max)
{
    const qga_generated all[] = {
        {"random codes 64x1024 b1", 0, q8k_gen_run, {k, 64, 1024, 1, 0, 2}},
        {"random codes 37x2048 b5", 0, q8k_gen_run, {k, 37, 2048, 5, 0, 1}},
        {"random bytes 16x512 b3", 0, q8k_gen_run, {k, 16, 512, 3, 1, 4}},
        {"full 4096x14336 b1", 1, q8k_gen_run, {k, 4096, 14336, 1, 0, 1}},
        {"full 14336x4096 b4", 1, q8k_gen_run, {k, 14336, 4096, 4, 0, 1}},
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0] && n < max; i++)
        if (full || !all[i].large) out[n++] = all[i];
    return n;
}

const qga_kind qga_kind_kq_gemv_q8k = {QG_KIND_KQ_GEMV_Q8K, "kq_gemv_q8k", run_q8k_case, q8k_shares, q8k_generated};
