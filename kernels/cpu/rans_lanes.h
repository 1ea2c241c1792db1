/* Internal: the parts of the optimized rANS kernels (qgold/kernels_rans.h) that are the same on every
 * CPU ISA: argument and container validation, the slot table, per-warp predictor undo, the padding and
 * checksum checks, the tile driver with its thread split and error order, and the final combination of
 * tile partials. Plain C, static inline; an ISA file includes it after defining
 *
 *   static int rl_decode_warp(const uint32_t *tab, const uint8_t *init, const uint8_t *words, uint32_t nwords,
 *                             const uint8_t *limit, uint8_t *S, uint32_t *used, int *final_ok);
 *       decodes one warp (32 lanes, 256 steps) into S[t * 32 + l] (column-major: step t = tile column,
 *       l = lane in the warp = row); `words` is the warp's stream of nwords little-endian uint16, `limit`
 *       the end of readable memory after it. Returns 0, or QG_ERR_rans_truncated when some step needed
 *       more words than the stream holds; else sets *used (words taken) and *final_ok (every final state
 *       is exactly L);
 *   optionally, with RL_HAVE_WARP2 defined, static int rl_decode_warp2(...): warps w and w + 1 in lockstep
 *       (same outputs per warp, init = warp w's states followed by warp w + 1's); any truncation makes
 *       it return rans_truncated, and the two are then decoded one by one;
 *   static void rl_prefix_col(uint8_t *col, uint8_t carry);
 *       col[l] = carry + col[0] + ... + col[l] (mod 256) over the 32 bytes of one column;
 *   static void rl_block_product(const uint8_t *S, const float *xf, size_t batch, float *p, size_t pstride);
 *       for the 32 rows l of a column-major block S (int8 codes): p[b * pstride + l] = the float32 sum over
 *       c = 0..255 ascending of (float)S[c][l] * xf[c * batch + b], starting from 0.0f;
 *   static void rl_transpose_out(const uint8_t *S, uint8_t *dst, size_t stride, size_t rows, size_t cols);
 *       dst[l * stride + c] = S[c * 32 + l] for l < rows, c < cols;
 *   static void rl_transpose_in(const uint8_t *src, size_t stride, size_t rows, size_t cols, uint8_t *S);
 *       S[c * 32 + l] = src[l * stride + c] for l < rows, c < cols, and 0 elsewhere (256 x 32);
 *   static void rl_convert_x(const uint16_t *x, size_t K, size_t batch, size_t ncols, float *xf);
 *       activations to float32 (exact), xf[c * batch + b] = x[b * K + c], zero for K <= c < ncols;
 *   static uint16_t rl_f16(float y);
 *       float32 -> fp16 bits, round to nearest even.
 *
 * Lane l of warp w is tile row 32w + l and decode step t is tile column t (spec: "Coder"), so one warp
 * yields a 32-row x 256-column block in column-major order: exactly what a product vectorized across
 * rows consumes. The predictors are undone on that layout, warp after warp:
 *   up:       b[r][c] = e[r][c] + b[r-1][c]: a prefix sum down each column, carried from the last row
 *             of the previous warp (0 above the tile);
 *   left:     b[r][c] = e[r][c] + b[r][c-1]: column c += column c-1;
 *   gradient: with d[r][c] = b[r][c] - b[r][c-1], e[r][c] = d[r][c] - d[r-1][c], so d is the up-undo of e
 *             and b the left-undo of d (all mod 256, neighbours outside the tile 0).
 * The Adler-32 of the row-major tile is computed without visiting it in row-major order: after n = 65536
 * bytes d_k (k = 256 r + c), a = 1 + sum d_k and b = n + sum (n - k) d_k (mod 65521), and
 * sum (n - k) d_k = n S0 - 256 Sr - Sc with S0 = sum d, Sr = sum r d, Sc = sum c d, which per-row
 * (lane) sums give in any order.
 *
 * Error order per tile (the reference's): warps in order, each decoded whole: a read past its words
 * (truncated), then words left over (trailing_data), then its final states (corrupt); then nonzero
 * payload padding or bytes outside the matrix (corrupt), then the checksum. Over tiles: the error of
 * the lowest failing tile index, whichever thread found it.
 *
 * GEMV outputs: the fused kernel stores each tile's partials p_j and then forms y = (0 + p_0 + p_1 + ...)
 * * scale per (row, batch column), ascending j, so the split of tiles over threads changes nothing. A
 * NaN output is written as the quiet NaN 0x7FC00000 (fp16 0x7E00): which of several NaNs a float sum
 * ends in depends on the operand order inside each instruction, which the compiler picks per call
 * site, so only a canonical NaN keeps batch and thread invariance bitwise (NaN compares as any NaN).
 */
#ifndef QGOLD_RANS_LANES_H
#define QGOLD_RANS_LANES_H

#include "qgold/errors.h"
#include "qgold/rans.h"

#include "threads.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { RL_T = QG_RANS_TILE, RL_WARPS = 8, RL_LANES = 32, RL_BLOCK = RL_T * RL_LANES };

static inline uint32_t rl_ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Slot table: entry = symbol | bias << 8 | (freq - 1) << 20 (freq 1..4096, bias = slot - cum < freq). */
static inline void rl_build_table(const uint16_t freq[256], uint32_t tab[QG_RANS_M_SCALE])
{
    uint32_t cum = 0;
    for (uint32_t s = 0; s < 256; s++) {
        const uint32_t f = freq[s];
        for (uint32_t k = 0; k < f; k++) tab[cum + k] = s | (k << 8) | ((f - 1) << 20);
        cum += f;
    }
}

/* Portable one-warp decoder, written as the spec reads (the ISA files may replace it). */
static inline int rl_decode_warp_scalar(const uint32_t *tab, const uint8_t *init, const uint8_t *words, uint32_t nwords,
                                        uint8_t *S, uint32_t *used, int *final_ok)
{
    uint32_t x[RL_LANES];
    for (int l = 0; l < RL_LANES; l++) x[l] = rl_ld32(init + 4 * l);
    uint32_t ptr = 0;
    for (int t = 0; t < RL_T; t++) {
        for (int l = 0; l < RL_LANES; l++) {
            const uint32_t e = tab[x[l] & (QG_RANS_M_SCALE - 1)];
            S[t * RL_LANES + l] = (uint8_t)e;
            x[l] = ((e >> 20) + 1) * (x[l] >> QG_RANS_SCALE_BITS) + ((e >> 8) & 0xFFF);
        }
        for (int l = 0; l < RL_LANES; l++) { /* lower lane first */
            if (x[l] >= QG_RANS_L) continue;
            if (ptr >= nwords) return QG_ERR_rans_truncated;
            x[l] = (x[l] << 16) | (uint32_t)(words[2 * ptr] | (words[2 * ptr + 1] << 8));
            ptr++;
        }
    }
    int ok = 1;
    for (int l = 0; l < RL_LANES; l++) ok &= x[l] == QG_RANS_L;
    *used = ptr;
    *final_ok = ok;
    return QG_ERR_ok;
}

/* ---- validation ---------------------------------------------------------------------------------- */

/* The reference's argument checks for the container readers, then the structural check. */
static inline int rl_check_decode(const uint8_t *buf, size_t len, const uint8_t *w, size_t w_len, qg_rans_header *h)
{
    int rc = qg_rans_check(buf, len, h);
    if (rc != QG_ERR_ok) return rc;
    if ((uint64_t)h->M * h->K != (uint64_t)w_len) return QG_ERR_rans_size_mismatch;
    if (w == NULL && w_len > 0) return QG_ERR_argument_invalid;
    return QG_ERR_ok;
}

static inline int rl_check_gemv(const uint8_t *buf, size_t len, const uint16_t *x, size_t batch, const float *y_f32,
                                const uint16_t *y_f16, qg_rans_header *h)
{
    if (batch < 1 || batch > QG_RANS_MAX_BATCH) return QG_ERR_rans_batch_out_of_range;
    if (x == NULL || (y_f32 == NULL && y_f16 == NULL)) return QG_ERR_argument_invalid;
    return qg_rans_check(buf, len, h);
}

static inline int rl_check_int8(const uint8_t *w, const float *scales, size_t M, size_t K, const uint16_t *x, size_t batch,
                                const float *y_f32, const uint16_t *y_f16)
{
    if (batch < 1 || batch > QG_RANS_MAX_BATCH) return QG_ERR_rans_batch_out_of_range;
    if (x == NULL || (y_f32 == NULL && y_f16 == NULL)) return QG_ERR_argument_invalid;
    if ((M > 0 && K > 0 && w == NULL) || (M > 0 && scales == NULL)) return QG_ERR_argument_invalid;
    return QG_ERR_ok;
}

/* ---- per-warp post-processing -------------------------------------------------------------------- */

/* Undoes the tile's predictor on warp block S; upc[c] carries the up-undone last row of the previous
 * warp (zero for warp 0). */
static inline void rl_unpredict(uint8_t *S, int mode, uint8_t *upc)
{
    if (mode == 2 || mode == 3) {
        for (int c = 0; c < RL_T; c++) {
            rl_prefix_col(S + c * RL_LANES, upc[c]);
            upc[c] = S[c * RL_LANES + RL_LANES - 1];
        }
    }
    if (mode == 1 || mode == 3) {
        for (int c = 1; c < RL_T; c++)
            for (int l = 0; l < RL_LANES; l++) S[c * RL_LANES + l] = (uint8_t)(S[c * RL_LANES + l] + S[(c - 1) * RL_LANES + l]);
    }
}

/* Whether every byte of warp block S outside rows_valid x cols_valid (lane l is row row0 + l) is 0. */
static inline int rl_padding_zero(const uint8_t *S, uint32_t row0, uint32_t rows_valid, uint32_t cols_valid)
{
    uint8_t acc = 0;
    const uint32_t lv = rows_valid > row0 ? (rows_valid - row0 < RL_LANES ? rows_valid - row0 : RL_LANES) : 0;
    if (lv < RL_LANES)
        for (uint32_t c = 0; c < cols_valid; c++)
            for (uint32_t l = lv; l < RL_LANES; l++) acc |= S[c * RL_LANES + l];
    for (uint32_t c = cols_valid; c < RL_T; c++)
        for (int l = 0; l < RL_LANES; l++) acc |= S[c * RL_LANES + l];
    return acc == 0;
}

typedef struct {
    uint64_t s0, sr, sc; /* sum d, sum r d, sum c d over the tile */
} rl_adler;

static inline void rl_adler_warp(rl_adler *a, const uint8_t *S, uint32_t row0)
{
    uint32_t rs[RL_LANES] = {0}, ws[RL_LANES] = {0}; /* per lane: sum d (< 2^16), sum c d (< 2^24) */
    for (uint32_t c = 0; c < RL_T; c++)
        for (int l = 0; l < RL_LANES; l++) {
            rs[l] += S[c * RL_LANES + l];
            ws[l] += c * S[c * RL_LANES + l];
        }
    for (int l = 0; l < RL_LANES; l++) {
        a->s0 += rs[l];
        a->sr += (uint64_t)(row0 + (uint32_t)l) * rs[l];
        a->sc += ws[l];
    }
}

static inline uint32_t rl_adler_value(const rl_adler *a)
{
    const uint64_t n = (uint64_t)RL_T * RL_T, mod = 65521;
    const uint64_t A = (1 + a->s0) % mod, B = (n + n * a->s0 - 256 * a->sr - a->sc) % mod;
    return (uint32_t)((B << 16) | A);
}

/* ---- the tile driver ----------------------------------------------------------------------------- */

enum { RL_OUT_DECODE = 0, RL_OUT_GEMV = 1 };

typedef struct {
    const uint8_t *buf;
    size_t len;
    qg_rans_header h;
    uint32_t tab[QG_RANS_M_SCALE];
    int out;           /* RL_OUT_* */
    uint8_t *w;        /* decode: M x K */
    const float *xf;   /* gemv: (tiles_c * 256) x batch, column c at xf[c * batch] (zero past K) */
    size_t batch;
    float *part;       /* gemv: per tile, batch x 256 partials */
    _Atomic uint64_t first_err; /* tile index << 16 | error; UINT64_MAX: none */
} rl_job;

static inline void rl_note_error(rl_job *j, size_t tile, int err)
{
    const uint64_t key = ((uint64_t)tile << 16) | (uint64_t)err;
    uint64_t cur = atomic_load(&j->first_err);
    while (key < cur && !atomic_compare_exchange_weak(&j->first_err, &cur, key)) {
    }
}

/* Decodes tile `index` warp by warp (two at a time where the ISA file has rl_decode_warp2), checking
 * everything, and hands each warp block to the output. S holds two warp blocks. */
static inline int rl_tile(rl_job *j, size_t index, uint8_t *S)
{
    const qg_rans_header *h = &j->h;
    qg_rans_tile_meta m;
    qg_rans_tile_meta_at(j->buf, h, index, &m);
    const uint8_t *pay = j->buf + m.data_offset, *limit = pay + m.data_size;
    const uint8_t *words = pay + QG_RANS_PAYLOAD_FIXED;
    const uint32_t ti = (uint32_t)(index / h->tiles_c), tj = (uint32_t)(index % h->tiles_c);
    const uint32_t rows_valid = h->M - RL_T * ti < RL_T ? h->M - RL_T * ti : RL_T;
    const uint32_t cols_valid = h->K - RL_T * tj < RL_T ? h->K - RL_T * tj : RL_T;
    const int check = (h->flags & 1) != 0;
    uint8_t upc[RL_T] = {0};
    rl_adler ad = {0, 0, 0};
    int pad_ok = 1;
    uint32_t start = 0;
    for (uint32_t w = 0; w < RL_WARPS; w += 2) {
        /* warp_end validated: start <= mid <= end <= total */
        const uint32_t mid = rl_ld32(pay + 4 * RL_T + 4 * w), end = rl_ld32(pay + 4 * RL_T + 4 * w + 4);
        uint32_t used[2] = {0, 0};
        int final_ok[2] = {0, 0}, paired = 0;
#ifdef RL_HAVE_WARP2
        paired = rl_decode_warp2(j->tab, pay + 4 * RL_LANES * w, words + 2 * (size_t)start, mid - start, words + 2 * (size_t)mid,
                                 end - mid, limit, S, S + RL_BLOCK, used, final_ok) == QG_ERR_ok;
#endif
        for (uint32_t k = 0; k < 2; k++) {
            const uint32_t ww = w + k, s0 = k ? mid : start, e0 = k ? end : mid, row0 = RL_LANES * ww;
            uint8_t *B = S + k * RL_BLOCK;
            if (!paired) { /* one warp at a time: the reference's order of errors */
                int rc = rl_decode_warp(j->tab, pay + 4 * RL_LANES * ww, words + 2 * (size_t)s0, e0 - s0, limit, B, &used[k], &final_ok[k]);
                if (rc != QG_ERR_ok) return rc;
            }
            if (used[k] != e0 - s0) return QG_ERR_rans_trailing_data;
            if (!final_ok[k]) return QG_ERR_rans_corrupt;
            rl_unpredict(B, m.predictor, upc);
            pad_ok &= rl_padding_zero(B, row0, rows_valid, cols_valid);
            if (check) rl_adler_warp(&ad, B, row0);
            if (j->out == RL_OUT_DECODE) {
                if (row0 < rows_valid) {
                    const uint32_t nr = rows_valid - row0 < RL_LANES ? rows_valid - row0 : RL_LANES;
                    rl_transpose_out(B, j->w + ((size_t)RL_T * ti + row0) * h->K + (size_t)RL_T * tj, h->K, nr, cols_valid);
                }
            } else {
                rl_block_product(B, j->xf + (size_t)RL_T * tj * j->batch, j->batch, j->part + index * j->batch * RL_T + row0, RL_T);
            }
        }
        start = end;
    }
    for (const uint8_t *q = words + 2 * (size_t)start; q < limit; q++) pad_ok &= *q == 0; /* payload padding */
    if (!pad_ok) return QG_ERR_rans_corrupt;
    if (check && rl_adler_value(&ad) != m.checksum) return QG_ERR_rans_checksum;
    return QG_ERR_ok;
}

static void rl_tile_range(void *vj, size_t begin, size_t end)
{
    rl_job *j = vj;
    uint8_t *S = aligned_alloc(64, 2 * RL_BLOCK); /* two warp blocks */
    if (S == NULL) {
        rl_note_error(j, begin, QG_ERR_alloc_failed);
        return;
    }
    for (size_t i = begin; i < end; i++) {
        if ((atomic_load(&j->first_err) >> 16) < i) break; /* a lower tile already failed */
        int rc = rl_tile(j, i, S);
        if (rc != QG_ERR_ok) {
            rl_note_error(j, i, rc);
            break;
        }
    }
    free(S);
}

/* Runs every tile of the checked container over the threads; the lowest failing tile's error. */
static inline int rl_run_tiles(rl_job *j)
{
    const size_t n = (size_t)j->h.tiles_r * j->h.tiles_c;
    atomic_store(&j->first_err, UINT64_MAX);
    rl_build_table(j->h.freq, j->tab);
    qg_parallel_for(n, 1, 1, rl_tile_range, j);
    const uint64_t e = atomic_load(&j->first_err);
    return e == UINT64_MAX ? QG_ERR_ok : (int)(e & 0xFFFF);
}

/* ---- the entry points (each ISA file wraps these under its own names) ------------------------------ */

static inline int rl_decode(const uint8_t *buf, size_t len, uint8_t *w, size_t w_len)
{
    rl_job *j = malloc(sizeof *j);
    if (j == NULL) return QG_ERR_alloc_failed;
    int rc = rl_check_decode(buf, len, w, w_len, &j->h);
    if (rc == QG_ERR_ok) {
        j->buf = buf;
        j->len = len;
        j->out = RL_OUT_DECODE;
        j->w = w;
        rc = rl_run_tiles(j);
    }
    free(j);
    return rc;
}

typedef struct {
    const float *part, *scales;
    size_t M, tiles_c, batch;
    float *y_f32;
    uint16_t *y_f16;
} rl_combine;

/* The canonical quiet NaN for any NaN (see the top of the file). */
static inline float rl_canon(float y)
{
    if (y == y) return y;
    const uint32_t q = 0x7FC00000u;
    memcpy(&y, &q, sizeof y);
    return y;
}

/* y = (0 + p_0 + p_1 + ...) * scale, ascending tile column, per (row, batch column). */
static inline float rl_output(const float *part, size_t tiles_c, size_t batch, size_t r, size_t b, float scale, size_t tile0)
{
    float t = 0.0f;
    for (size_t jj = 0; jj < tiles_c; jj++) t += part[(tile0 + jj) * batch * RL_T + b * RL_T + (r % RL_T)];
    return rl_canon(t * scale);
}

static void rl_combine_range(void *vc, size_t begin, size_t end)
{
    const rl_combine *c = vc;
    for (size_t r = begin; r < end; r++) {
        const size_t tile0 = r / RL_T * c->tiles_c;
        for (size_t b = 0; b < c->batch; b++) {
            const float y = rl_output(c->part, c->tiles_c, c->batch, r, b, c->scales[r], tile0);
            if (c->y_f32) c->y_f32[b * c->M + r] = y;
            if (c->y_f16) c->y_f16[b * c->M + r] = rl_f16(y);
        }
    }
}

static inline int rl_gemv(const uint8_t *buf, size_t len, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16)
{
    rl_job *j = malloc(sizeof *j);
    if (j == NULL) return QG_ERR_alloc_failed;
    int rc = rl_check_gemv(buf, len, x, batch, y_f32, y_f16, &j->h);
    float *xf = NULL, *part = NULL, *scales = NULL;
    if (rc == QG_ERR_ok && j->h.M > 0) {
        const size_t M = j->h.M, ncols = (size_t)j->h.tiles_c * RL_T, ntiles = (size_t)j->h.tiles_r * j->h.tiles_c;
        xf = aligned_alloc(64, (ncols * batch * sizeof(float) + 63) / 64 * 64 + 64);
        part = aligned_alloc(64, (ntiles * batch * RL_T * sizeof(float) + 63) / 64 * 64 + 64);
        scales = malloc(M * sizeof(float));
        if (xf == NULL || part == NULL || scales == NULL) rc = QG_ERR_alloc_failed;
        if (rc == QG_ERR_ok) rc = qg_rans_scales(buf, len, scales, M);
        if (rc == QG_ERR_ok) {
            rl_convert_x(x, j->h.K, batch, ncols, xf);
            j->buf = buf;
            j->len = len;
            j->out = RL_OUT_GEMV;
            j->xf = xf;
            j->batch = batch;
            j->part = part;
            rc = rl_run_tiles(j);
        }
        if (rc == QG_ERR_ok) {
            rl_combine c = {part, scales, M, j->h.tiles_c, batch, y_f32, y_f16};
            qg_parallel_for(M, 1, 4096, rl_combine_range, &c);
        }
    }
    free(xf);
    free(part);
    free(scales);
    free(j);
    return rc;
}

/* ---- the plain int8 GEMV: 32-row blocks, each tile column transposed to the fused layout ---------- */

typedef struct {
    const uint8_t *w;
    const float *scales;
    size_t M, K, batch;
    const float *xf;
    float *y_f32;
    uint16_t *y_f16;
    atomic_int err;
} rl_int8_job;

static void rl_int8_range(void *vj, size_t begin, size_t end)
{
    rl_int8_job *j = vj;
    uint8_t *S = aligned_alloc(64, RL_BLOCK);
    float *p = aligned_alloc(64, RL_LANES * QG_RANS_MAX_BATCH * sizeof(float));
    float *t = aligned_alloc(64, RL_LANES * QG_RANS_MAX_BATCH * sizeof(float));
    if (S && p && t) {
        const size_t B = j->batch, tiles_c = (j->K + RL_T - 1) / RL_T;
        for (size_t blk = begin; blk < end; blk++) {
            const size_t r0 = blk * RL_LANES, nr = j->M - r0 < RL_LANES ? j->M - r0 : RL_LANES;
            for (size_t i = 0; i < RL_LANES * B; i++) t[i] = 0.0f;
            for (size_t tj = 0; tj < tiles_c; tj++) {
                const size_t c0 = tj * RL_T, nc = j->K - c0 < RL_T ? j->K - c0 : RL_T;
                rl_transpose_in(j->w + r0 * j->K + c0, j->K, nr, nc, S);
                rl_block_product(S, j->xf + c0 * B, B, p, RL_LANES);
                for (size_t i = 0; i < RL_LANES * B; i++) t[i] += p[i];
            }
            for (size_t l = 0; l < nr; l++)
                for (size_t b = 0; b < B; b++) {
                    const float y = rl_canon(t[b * RL_LANES + l] * j->scales[r0 + l]);
                    if (j->y_f32) j->y_f32[b * j->M + r0 + l] = y;
                    if (j->y_f16) j->y_f16[b * j->M + r0 + l] = rl_f16(y);
                }
        }
    } else {
        atomic_store(&j->err, QG_ERR_alloc_failed);
    }
    free(S);
    free(p);
    free(t);
}

static inline int rl_int8_gemv(const uint8_t *w, const float *scales, size_t M, size_t K, const uint16_t *x, size_t batch,
                               float *y_f32, uint16_t *y_f16)
{
    int rc = rl_check_int8(w, scales, M, K, x, batch, y_f32, y_f16);
    if (rc != QG_ERR_ok || M == 0) return rc;
    const size_t ncols = (K + RL_T - 1) / RL_T * RL_T;
    float *xf = aligned_alloc(64, (ncols * batch * sizeof(float) + 63) / 64 * 64 + 64);
    if (xf == NULL) return QG_ERR_alloc_failed;
    rl_convert_x(x, K, batch, ncols, xf);
    rl_int8_job j = {w, scales, M, K, batch, xf, y_f32, y_f16, QG_ERR_ok};
    qg_parallel_for((M + RL_LANES - 1) / RL_LANES, 1, 1, rl_int8_range, &j);
    free(xf);
    return atomic_load(&j.err);
}

#endif
