/* On-the-fly checks of the K-quant kinds, for kernels that come without qgold's own test programs
 * (plugins, `qgold verify`): random bytes as blocks (every header and code value, inf/NaN scales
 * included) and, with --full, large shapes from the pinned stream, each compared with the reference at
 * the kernel's tier through guarded calls. Reached through the kinds' descriptors (kinds.h). */
#include "audit_formats.h"
#include "compare.h"
#include "guard.h"
#include "kinds.h"

#include "qgold/fp16.h"
#include "qgold/kquants.h"
#include "qgold/kquants_layout.h"
#include "qgold/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The pinned stream's seed for the random and large inputs ("plug"). */
#define QGV_SEED 0x706C7567u



static void random_bytes(qg_rng *g, uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(qg_rng_u64(g) >> 56);
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* Weight blocks: random bytes, then (unless random_scales) ordinary scales written over the headers. */
static void make_blocks(qg_rng *g, qg_ktype t, size_t nblocks, int random_scales, uint8_t *w)
{
    const size_t bb = qg_kq_block_bytes(t);
    random_bytes(g, w, nblocks * bb);
    if (random_scales) return;
    for (size_t i = 0; i < nblocks; i++) {
        uint8_t *blk = w + i * bb;
        if (t == QG_Q8_K) {
            uint32_t b = qg_f32_bits(qg_rng_uniform(g, 0.001f, 0.01f));
            put16(blk, (uint16_t)b);
            put16(blk + 2, (uint16_t)(b >> 16));
        } else {
            put16(blk + (t == QG_Q6_K ? QG_Q6K_D : QG_Q4K_D), qg_f32_to_f16(qg_rng_uniform(g, 0.0001f, 0.002f)));
            if (t != QG_Q6_K) put16(blk + QG_Q4K_DMIN, qg_f32_to_f16(qg_rng_uniform(g, 0.0001f, 0.002f)));
        }
    }
}

typedef struct {
    const qg_kernel *k;
    qg_ktype t;
    const uint8_t *w;
    size_t nbytes, rows, cols, batch;
    const uint16_t *x;
    const uint8_t *q8;
    int f16;
} call_ctx;

static int call_dequant(void *vc, void *out)
{
    call_ctx *c = vc;
    if (c->f16) return c->k->fn.kq_dequant.f16(c->t, c->w, c->nbytes, c->rows, c->cols, out);
    return c->k->fn.kq_dequant.f32(c->t, c->w, c->nbytes, c->rows, c->cols, out);
}

static int call_dot(void *vc, void *out)
{
    call_ctx *c = vc;
    int32_t *S = out;
    const size_t nb = c->cols / QG_QK_K;
    return c->k->fn.kq_dot(c->t, c->w, c->q8, c->cols, S, S + nb, (float *)(void *)(S + 2 * nb));
}

static int call_gemv(void *vc, void *out)
{
    call_ctx *c = vc;
    return c->k->fn.kq_gemv(c->t, c->w, c->nbytes, c->rows, c->cols, c->x, c->batch, c->f16 ? NULL : out, c->f16 ? out : NULL);
}

static int gen_dequant_run(const qga_gen_params *g, qg_audit_row *row, qg_err *e)
{
    const qg_ktype t = (qg_ktype)qg_kq_from_name(g->k->format);
    const size_t n = g->rows * g->cols, nbytes = n / QG_QK_K * qg_kq_block_bytes(t);
    uint8_t *w = malloc(nbytes);
    void *ref = malloc(n * 4), *got = malloc(n * 4);
    qg_rng rng;
    qg_rng_init(&rng, QGV_SEED + (uint64_t)t);
    int rc = w && ref && got ? QG_ERR_ok : qg_err_set(e, QG_ERR_alloc_failed, "out of memory (%zu weights)", n);
    for (int r = 0; r < g->rounds && rc == QG_ERR_ok; r++) {
        make_blocks(&rng, t, n / QG_QK_K, g->random_scales, w);
        call_ctx c = {g->k, t, w, nbytes, g->rows, g->cols, 1, NULL, NULL, 0};
        for (int v = 0; v < 2 && rc == QG_ERR_ok; v++) {
            c.f16 = v;
            int rr = v ? qg_kq_dequant_f16_ref(t, w, nbytes, g->rows, g->cols, ref) : qg_kq_dequant_f32_ref(t, w, nbytes, g->rows, g->cols, ref);
            int kr = qg_call_guarded(call_dequant, &c, got, n, v ? 2 : 4, e);
            if (rr != QG_ERR_ok) {
                if (kr == QG_ERR_ok)
                    rc = qg_err_set(e, QG_ERR_mismatch, "round %d (%zux%zu): the reference rejects these blocks (%s), the kernel accepted them", r,
                                    g->rows, g->cols, qg_error_name(rr));
                continue;
            }
            if (kr != QG_ERR_ok) {
                char tmp[sizeof e->msg];
                snprintf(tmp, sizeof tmp, "%s", e->msg);
                rc = qg_err_set(e, kr, "round %d (%zux%zu, %s output): %s", r, g->rows, g->cols, v ? "fp16" : "float32", tmp);
                break;
            }
            qg_exact_report rep;
            if (qg_compare_exact_nan_any(v ? QG_ELEM_F16 : QG_ELEM_F32, ref, got, n, &rep) != QG_ERR_ok)
                rc = qg_err_set(e, QG_ERR_mismatch, "round %d (%zux%zu, %s output): row %zu col %zu: %s", r, g->rows, g->cols,
                                v ? "fp16" : "float32", rep.index / g->cols, rep.index % g->cols, rep.text);
            row->elements += n;
        }
    }
    free(w);
    free(ref);
    free(got);
    return rc;
}

static double read_f32le(const uint8_t *p) { return qg_f32_from_bits((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24); }
static double read_f16le(const uint8_t *p) { return qg_f16_to_f32((qg_f16)(p[0] | p[1] << 8)); }

static int gen_dot_run(const qga_gen_params *g, qg_audit_row *row, qg_err *e)
{
    const qg_ktype t = (qg_ktype)qg_kq_from_name(g->k->format);
    const size_t nb = g->cols / QG_QK_K, bb = qg_kq_block_bytes(t);
    uint8_t *w = malloc(nb * bb), *q8 = malloc(nb * QG_Q8K_BYTES);
    float *x = malloc(g->cols * 4);
    int32_t *ref = malloc((2 * nb + 1) * 4), *got = malloc((2 * nb + 1) * 4);
    qg_rng rng;
    qg_rng_init(&rng, QGV_SEED + 16 + (uint64_t)t);
    int rc = w && q8 && x && ref && got ? QG_ERR_ok : qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    for (int r = 0; r < g->rounds && rc == QG_ERR_ok; r++) {
        make_blocks(&rng, t, nb, g->random_scales, w);
        for (size_t i = 0; i < g->cols; i++) x[i] = qg_rng_uniform(&rng, -1.0f, 1.0f);
        if ((rc = qg_kq_quantize_ref(QG_Q8_K, x, 1, g->cols, q8, nb * QG_Q8K_BYTES)) != QG_ERR_ok) {
            qg_err_set(e, rc, "quantizing the Q8_K activations");
            break;
        }
        float rres;
        int rr = qg_kq_dot_q8k_ref(t, w, q8, g->cols, ref, ref + nb, &rres);
        call_ctx c = {g->k, t, w, nb * bb, 1, g->cols, 1, NULL, q8, 0};
        int kr = qg_call_guarded(call_dot, &c, got, 2 * nb + 1, 4, e);
        if (rr != QG_ERR_ok || kr != QG_ERR_ok) {
            if (rr != QG_ERR_ok && kr == QG_ERR_ok)
                rc = qg_err_set(e, QG_ERR_mismatch, "round %d: the reference rejects this row (%s), the kernel accepted it", r, qg_error_name(rr));
            else if (rr == QG_ERR_ok) {
                char tmp[sizeof e->msg];
                snprintf(tmp, sizeof tmp, "%s", e->msg);
                rc = qg_err_set(e, kr, "round %d (cols %zu): %s", r, g->cols, tmp);
            }
            continue;
        }
        qg_exact_report rep;
        for (int v = 0; v < 2 && rc == QG_ERR_ok; v++)
            if (qg_compare_exact(QG_ELEM_I32, ref + v * nb, got + v * nb, nb, &rep) != QG_ERR_ok)
                rc = qg_err_set(e, QG_ERR_mismatch, "round %d (cols %zu): integer %s of block %zu: %s", r, g->cols, v ? "M" : "S", rep.index,
                                rep.text);
        if (rc != QG_ERR_ok) break;
        /* y* = sum_i dy_i (D_i S_i - Dm_i M_i) in double, as the fixture runner forms it. */
        double ystar = 0, sabs = 0;
        for (size_t i = 0; i < nb; i++) {
            const uint8_t *blk = w + i * bb;
            double D = read_f16le(blk + (t == QG_Q6_K ? QG_Q6K_D : QG_Q4K_D)), Dm = t == QG_Q6_K ? 0 : read_f16le(blk + QG_Q4K_DMIN);
            double dy = read_f32le(q8 + i * QG_Q8K_BYTES + QG_Q8K_D);
            double s1 = D * dy * (double)ref[i], s2 = Dm * dy * (double)ref[nb + i];
            ystar += s1 - s2;
            sabs += fabs(s1) + fabs(s2);
        }
        float res;
        memcpy(&res, got + 2 * nb, 4);
        qg_bound_report br;
        int brc = qg_compare_bounded(&g->k->numerics, (long)g->cols, &ystar, &sabs, NULL, &res, 1, &br);
        if (br.worst_ratio > row->worst_ratio) row->worst_ratio = br.worst_ratio;
        if (brc != QG_ERR_ok) rc = qg_err_set(e, brc, "round %d (cols %zu): dot result: %s", r, g->cols, br.text);
        row->elements += 2 * nb + 1;
    }
    free(w);
    free(q8);
    free(x);
    free(ref);
    free(got);
    return rc;
}

static int gen_gemv_run(const qga_gen_params *g, qg_audit_row *row, qg_err *e)
{
    const qg_ktype t = (qg_ktype)qg_kq_from_name(g->k->format);
    const size_t rows = g->rows, cols = g->cols, B = g->batch, rb = cols / QG_QK_K * qg_kq_block_bytes(t), nbytes = rows * rb;
    uint8_t *w = malloc(nbytes);
    uint16_t *x = malloc(B * cols * 2), *y16 = malloc(B * rows * 2);
    float *wrow = malloc(cols * 4), *y = malloc(B * rows * 4);
    double *ystar = malloc(B * rows * sizeof(double)), *sabs = malloc(B * rows * sizeof(double));
    qg_rng rng;
    qg_rng_init(&rng, QGV_SEED + 32 + (uint64_t)t);
    int rc = w && x && y16 && wrow && y && ystar && sabs ? QG_ERR_ok : qg_err_set(e, QG_ERR_alloc_failed, "out of memory (%zu bytes)", nbytes);
    if (rc == QG_ERR_ok) {
        make_blocks(&rng, t, nbytes / qg_kq_block_bytes(t), 0, w);
        for (size_t i = 0; i < B * cols; i++) x[i] = qg_f32_to_f16(qg_rng_uniform(&rng, -1.0f, 1.0f));
        /* y*: the exactly decoded weights (the reference dequantization, exact in float32) times x, in double. */
        for (size_t r = 0; r < rows && rc == QG_ERR_ok; r++) {
            if ((rc = qg_kq_dequant_f32_ref(t, w + r * rb, rb, 1, cols, wrow)) != QG_ERR_ok) {
                qg_err_set(e, rc, "reference dequantization of row %zu", r);
                break;
            }
            for (size_t b = 0; b < B; b++) {
                double s = 0, sa = 0;
                for (size_t k = 0; k < cols; k++) {
                    double p = (double)wrow[k] * (double)qg_f16_to_f32(x[b * cols + k]);
                    s += p;
                    sa += fabs(p);
                }
                ystar[b * rows + r] = s;
                sabs[b * rows + r] = sa;
            }
        }
    }
    for (int v = 0; v < 2 && rc == QG_ERR_ok; v++) {
        call_ctx c = {g->k, t, w, nbytes, rows, cols, B, x, NULL, v};
        if ((rc = qg_call_guarded(call_gemv, &c, v ? (void *)y16 : (void *)y, B * rows, v ? 2 : 4, e)) != QG_ERR_ok) {
            char tmp[sizeof e->msg];
            snprintf(tmp, sizeof tmp, "%s", e->msg);
            qg_err_set(e, rc, "%zux%zu batch %zu, %s output: %s", rows, cols, B, v ? "fp16" : "float32", tmp);
            break;
        }
        if (v)
            for (size_t i = 0; i < B * rows; i++) y[i] = qg_f16_to_f32(y16[i]);
        qg_bound_report br;
        int brc = qg_compare_bounded(v ? &g->k->numerics_f16 : &g->k->numerics, (long)cols, ystar, sabs, NULL, y, B * rows, &br);
        if (br.worst_ratio > row->worst_ratio) row->worst_ratio = br.worst_ratio;
        if (brc != QG_ERR_ok)
            rc = qg_err_set(e, brc, "%zux%zu batch %zu, %s output [batch][row] = [%zu][%zu]: %s", rows, cols, B, v ? "fp16" : "float32",
                            br.first_failure / rows, br.first_failure % rows, br.text);
        row->elements += B * rows;
    }
    free(w);
    free(x);
    free(y16);
    free(wrow);
    free(y);
    free(ystar);
    free(sabs);
    return rc;
}

/* ---- the driver ---------------------------------------------------------------------------------------- */

static size_t put(qga_generated *out, size_t n, size_t max, const char *label, int large,
                  int (*run)(const qga_gen_params *, qg_audit_row *, qg_err *), qga_gen_params p)
{
    if (n < max) out[n] = (qga_generated){label, large, run, p};
    return n + 1;
}

size_t qga_kq_dequant_generated(const qg_kernel *k, int full, qga_generated *out, size_t max)
{
    size_t n = put(out, 0, max, "random blocks", 0, gen_dequant_run, (qga_gen_params){k, 4, 512, 1, 1, 16});
    if (full) n = put(out, n, max, "full 1024x14336", 1, gen_dequant_run, (qga_gen_params){k, 1024, 14336, 1, 0, 1});
    return n < max ? n : max;
}

size_t qga_kq_dot_generated(const qg_kernel *k, int full, qga_generated *out, size_t max)
{
    size_t n = put(out, 0, max, "random blocks", 0, gen_dot_run, (qga_gen_params){k, 1, 1024, 1, 1, 16});
    if (full) {
        n = put(out, n, max, "full cols 14336", 1, gen_dot_run, (qga_gen_params){k, 1, 14336, 1, 0, 8});
        n = put(out, n, max, "full cols 262144", 1, gen_dot_run, (qga_gen_params){k, 1, 262144, 1, 0, 2});
    }
    return n < max ? n : max;
}

size_t qga_kq_gemv_generated(const qg_kernel *k, int full, qga_generated *out, size_t max)
{
    size_t n = 0;
    if (full) {
        n = put(out, n, max, "full 4096x14336 b1", 1, gen_gemv_run, (qga_gen_params){k, 4096, 14336, 1, 0, 1});
        n = put(out, n, max, "full 4096x14336 b4", 1, gen_gemv_run, (qga_gen_params){k, 4096, 14336, 4, 0, 1});
        n = put(out, n, max, "full 14336x4096 b4", 1, gen_gemv_run, (qga_gen_params){k, 14336, 4096, 4, 0, 1});
    }
    return n < max ? n : max;
}
