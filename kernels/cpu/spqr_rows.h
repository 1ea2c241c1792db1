/* Internal: the parts of the optimized SpQR GEMV (qgold/kernels_spqr.h) that are the same on every CPU
 * ISA: validation, the activation gather, the tile-row driver with its chunking, register blocking and
 * thread split, the outliers, and the output writes. Plain C, static inline; an ISA file includes
 * spqr_tiles.h, defines
 *
 *   typedef ... spqr_v8;  spqr_v8 spqr_v8_zero(void);
 *       an 8-lane float32 accumulator (lane l: column 8v + l of vector v of a row);
 *   float spqr_hsum(spqr_v8 a);
 *       t_l = a_l + a_{l+4} (l = 0..3), then (t_0 + t_2) + (t_1 + t_3);
 *   typedef ... spqr_faults;  spqr_faults spqr_faults_zero(void), spqr_faults_or(spqr_faults, spqr_faults);
 *   int spqr_faults_any(spqr_faults f);
 *   spqr_faults spqr_tile_faults(const uint64_t *w, uint64_t pad);
 *       the dense rules of one tile (16 words), nonzero when broken: reserved bits 62-63 of every word,
 *       the fragment copies of rows 2b and 2b + 1 equal, and (pad != 0: the last column tile, pad =
 *       spqr_padding_mask) padded codes 0;
 *   void spqr_dequant_tile(const uint64_t *w, size_t valid, float *wb, size_t col0);
 *       the 16 x 16 weights of one tile into wb (row k at wb + k * CCOLS + col0, 32-byte aligned), the
 *       spec's fp16 values as float32; columns >= valid get +0;
 *   void spqr_sweep(const float *wb, size_t nv, const spqr_ctx *c, size_t c0, int k0, int RK, size_t b0,
 *                   int G, spqr_v8 acc[TILE][MAXB]);
 *       rows k0..k0+RK-1 of wb against batch columns b0..b0+G-1 over nv 8-column vectors from column c0
 *       of x': for v = 0..nv-1 in order, acc[k][b] = fma(w_k[8v..8v+7], x'_b[c0 + 8v ..], acc[k][b]);
 *   float spqr_add_outlier(float y, uint32_t cv, const float *xb);
 *       fma(value, xb[column], y) rounded once, for the outlier word cv;
 *   float spqr_f16(uint16_t h);  uint16_t spqr_to_f16(float y);
 *       fp16 -> float32 (exact), float32 -> fp16 rounded to nearest even;
 *   void spqr_convert_x(const uint16_t *x, size_t n, float *d);
 *       d[i] = x[i] as float32 for i < n (d 32-byte aligned);
 *   optionally, with SPQR_HAVE_GATHER_PERM defined, its own
 *   void spqr_gather_perm(const uint16_t *x, const uint16_t *perm, size_t n, float *d);
 *
 * then includes this file.
 *
 * Validation (spqr_checks.h): the O(m + n) rules before the pass, the per-word and per-outlier rules
 * inside it on the words it loads anyway (reserved bits, fragment copies, padded codes, outlier columns,
 * PTCSR segment layout), so the layer is read once. Results go to a private buffer and reach the
 * caller's outputs only when every check passed; otherwise the call returns qg_spqr_validate's code, so
 * the error is the reference's and nothing is written.
 *
 * Product float order (the same for every batch size, thread count and chunking, so outputs are batch-
 * and thread-invariant): for output (r, b) one 8-lane float32 accumulator A starts at +0; for each
 * 8-column vector v = 0, 1, ... of the (permuted, padded) row, A = fma(w[8v..8v+7], x'_b[8v..8v+7], A).
 * Then y = spqr_hsum(A), then for each outlier of the row in storage order y = fma(v, x'_b[c], y)
 * (PTCSR 0 words skipped, so CSR and PTCSR built from the same outliers give the same bits). The fp16
 * output is that float32 rounded once. A NaN result is written as the quiet NaN 0x7FC00000 (fp16
 * 0x7E00): which NaN a sum ends in depends on operand order inside each instruction, which the
 * compiler picks per call site, so only a canonical NaN keeps the invariances.
 *
 * Execution: x is gathered through perm into float32 x'_b (once per call). Tile rows are split over
 * qg_threads() threads. A tile row is walked in chunks of CHUNK column tiles: the chunk's 16 x 16*CHUNK
 * weights are dequantized into a float buffer, then swept by register blocks of rows x batch columns
 * whose accumulators live in a per-tile-row buffer between chunks.
 */
#ifndef QGOLD_SPQR_ROWS_H
#define QGOLD_SPQR_ROWS_H

#include "spqr_tiles.h"
#include "threads.h"

#include <stdlib.h>
#include <string.h>

#ifndef SPQR_HAVE_GATHER_PERM
/* x'[i] = x[perm[i]] (a gather), fp16 -> float32 exact. */
static inline void spqr_gather_perm(const uint16_t *x, const uint16_t *perm, size_t n, float *d)
{
    for (size_t i = 0; i < n; i++) d[i] = spqr_f16(x[perm[i]]);
}
#endif

static inline void spqr_put_y(const spqr_ctx *c, size_t r, size_t b, float y)
{
    if (y != y) { /* the canonical quiet NaN: see the top of the file */
        const uint32_t qnan = 0x7FC00000u;
        memcpy(&y, &qnan, 4);
    }
    c->y[b * c->L->m + r] = y;
}

static void spqr_tile_row(const spqr_ctx *c, size_t R, float *wb, spqr_v8 acc[TILE][MAXB])
{
    const qg_spqr_layer *L = c->L;
    const size_t T = c->T, B = c->batch, n = L->n;
    for (int k = 0; k < TILE; k++)
        for (size_t b = 0; b < B; b++) acc[k][b] = spqr_v8_zero();
    const uint64_t pad = spqr_padding_mask(n);
    spqr_faults faults = spqr_faults_zero();
    for (size_t t0 = 0; t0 < T; t0 += CHUNK) {
        const size_t t1 = T - t0 < CHUNK ? T : t0 + CHUNK, nv = 2 * (t1 - t0), c0 = t0 * TILE;
        for (size_t t = t0; t < t1; t++) {
            const size_t valid = n - t * TILE < TILE ? n - t * TILE : TILE;
            const uint64_t *w = L->dense + (R * T + t) * TILE;
            faults = spqr_faults_or(faults, spqr_tile_faults(w, t == T - 1 ? pad : 0));
            spqr_dequant_tile(w, valid, wb, (t - t0) * TILE);
        }
        /* Register blocks: 4 rows x 2 columns, 8 rows x 1 column. */
        size_t b = 0;
        for (; b + 2 <= B; b += 2)
            for (int k = 0; k < TILE; k += 4) spqr_sweep(wb, nv, c, c0, k, 4, b, 2, acc);
        if (b < B)
            for (int k = 0; k < TILE; k += 8) spqr_sweep(wb, nv, c, c0, k, 8, b, 1, acc);
    }
    int bad = spqr_faults_any(faults);
    if (L->outliers == QG_SPQR_OUTLIERS_PTCSR && !spqr_ptcsr_segment_ok(L, R)) bad = 1;
    for (int k = 0; k < TILE; k++) {
        const size_t r = R * TILE + (size_t)k;
        size_t o0, o1, stride;
        spqr_row_outliers(L, R, k, &o0, &o1, &stride);
        for (size_t b = 0; b < B; b++) {
            const float *xb = c->xp + b * c->npad;
            float y = spqr_hsum(acc[k][b]);
            for (size_t o = o0; o < o1; o += stride) {
                const uint32_t cv = L->col_vals[o];
                if (L->outliers == QG_SPQR_OUTLIERS_PTCSR && cv == 0) continue; /* padding: contributes nothing */
                if ((cv & 0xFFFFu) >= n) {
                    bad = 1; /* a column >= n: the call fails, x' is not read there */
                    continue;
                }
                y = spqr_add_outlier(y, cv, xb);
            }
            spqr_put_y(c, r, b, y);
        }
    }
    c->bad[R] = (uint8_t)bad;
}

static void spqr_gemv_range(void *vc, size_t R0, size_t R1)
{
    const spqr_ctx *c = vc;
    _Alignas(32) float wb[TILE * CCOLS];
    spqr_v8 acc[TILE][MAXB];
    for (size_t R = R0; R < R1; R++) spqr_tile_row(c, R, wb, acc);
}

/* qg_spqr_gemv_*. */
static inline int spqr_gemv(const qg_spqr_layer *L, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16)
{
    if (x == NULL || (y_f32 == NULL && y_f16 == NULL)) return QG_ERR_argument_invalid;
    /* Validation (spqr_checks.h): the cheap rules now, the per-word ones inside the pass; whatever fails,
     * the error returned is qg_spqr_validate's, and the outputs are written only after the pass. */
    if (!spqr_precheck(L)) {
        const int rc = qg_spqr_validate(L);
        if (rc != QG_ERR_ok) return rc;
        if (!spqr_precheck(L)) return QG_ERR_argument_invalid; /* not reached: the rules are the same */
    }
    if (batch < 1 || batch > QG_SPQR_MAX_BATCH) {
        const int rc = qg_spqr_validate(L);
        return rc != QG_ERR_ok ? rc : QG_ERR_spqr_batch_out_of_range;
    }

    const size_t m = L->m, n = L->n, T = qg_spqr_tiles_c(n), npad = T * TILE, RT = m / TILE;
    float *xp = aligned_alloc(32, batch * npad * sizeof(float));
    float *y = malloc(batch * m * sizeof(float));
    uint8_t *bad = malloc(RT);
    if (xp == NULL || y == NULL || bad == NULL) {
        free(xp);
        free(y);
        free(bad);
        return QG_ERR_alloc_failed;
    }
    /* Gather (x'_b[i] = x_b[perm[i]], fp16 -> float32 exact); padded columns +0. */
    for (size_t b = 0; b < batch; b++) {
        const uint16_t *xb = x + b * n;
        float *d = xp + b * npad;
        if (L->perm == NULL) spqr_convert_x(xb, n, d);
        else spqr_gather_perm(xb, L->perm, n, d);
        for (size_t i = n; i < npad; i++) d[i] = 0.0f;
    }
    spqr_ctx c = {L, batch, T, npad, xp, y, bad};
    /* At least about 2^18 weight x column products per thread, so small calls stay on one thread. */
    const size_t per_tile_row = TILE * npad * batch, min_rows = ((size_t)1 << 18) / per_tile_row + 1;
    qg_parallel_for(RT, 1, min_rows, spqr_gemv_range, &c);
    int rc = QG_ERR_ok;
    for (size_t R = 0; R < RT && rc == QG_ERR_ok; R++)
        if (bad[R]) rc = qg_spqr_validate(L);
    if (rc == QG_ERR_ok) {
        const size_t N = batch * m;
        if (y_f32 != NULL) memcpy(y_f32, y, N * sizeof(float));
        if (y_f16 != NULL)
            for (size_t i = 0; i < N; i++) y_f16[i] = spqr_to_f16(y[i]);
    }
    free(xp);
    free(y);
    free(bad);
    return rc;
}

#endif
