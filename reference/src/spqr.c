/* READ ME FIRST: SpQR inference format, the reference (spec: reference/spec/spqr.md).
 *
 * What the format is. An m x n layer is cut into 16 x 16 tiles. Every (row, 16-column group) is one
 * uint64 word: a 3-bit first-order scale code s_q (bits 0-2), zero code z_q (bits 3-5), sixteen 3-bit
 * weight codes q_j (bits 6+3j), and one byte of the tile's 64-bit second-order word (bits 54-61; row k
 * carries byte k/2, so rows 2b and 2b+1 hold the same byte twice). The second-order word is four fp16
 * statistics s_s, z_s, s_z, z_z. On top of the dense part come additive fp16 outliers (CSR, or PTCSR:
 * one padded segment per tile row) and an optional column permutation applied as a gather.
 *
 * Invariants (all checked by qg_spqr_validate, in this order): m a nonzero multiple of 16; 1 <= n <=
 * 65536; buffer lengths match m, n; bits 62-63 zero; the two copies of each second-order byte equal;
 * row_offsets start at 0, never decrease, end at nnz; outlier columns < n; PTCSR segments are
 * 16 x (longest row) where a row's outliers are its leading nonzero slots; perm is a permutation;
 * codes of padded columns (16t + j >= n) are 0.
 *
 * Why dequantization is exact. Each of the six operations (s_q - s_z, s_s * that, z_q - z_z, z_s * that,
 * q - z, s * that) takes two fp16 operands and is rounded to fp16 on its own (RN16). A float32 +, - or x of
 * two fp16 values, rounded again to fp16, equals the exact value rounded once (fp16.md), so each step is
 * the correctly rounded fp16 result and every implementation that follows the same steps gets the same
 * bits (inf and NaN included; a NaN's sign is the machine's).
 *
 * Why the product's terms are exact. A dense weight and an outlier value are fp16, so are the gathered
 * activations: a product of two fp16 has at most 22 significant bits and a magnitude between 2^-48 and
 * 2^32, hence it is exact in float32. The only roundings of the reference GEMV are the float32 additions,
 * in the pinned order (dense columns ascending, then the row's outliers in storage order), and the final
 * fp16 rounding of the fp16 output.
 */
#include "qgold/spqr.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"

#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if !defined(FLT_EVAL_METHOD) || (FLT_EVAL_METHOD != 0 && FLT_EVAL_METHOD != 16)
#error "the SpQR reference needs float32 expressions evaluated in float32 (FLT_EVAL_METHOD == 0)"
#endif

#define RESERVED_MASK ((uint64_t)3 << 62)

size_t qg_spqr_tiles_c(size_t n)
{
    return n / QG_SPQR_TILE + (n % QG_SPQR_TILE != 0);
}

size_t qg_spqr_dense_words(size_t m, size_t n)
{
    const size_t rt = m / QG_SPQR_TILE, T = qg_spqr_tiles_c(n);
    if (rt != 0 && T > SIZE_MAX / rt) return 0;
    const size_t tiles = rt * T;
    if (tiles > SIZE_MAX / QG_SPQR_TILE) return 0;
    return tiles * QG_SPQR_TILE;
}

uint64_t qg_spqr_second_order(const uint64_t *tile)
{
    uint64_t s = 0;
    for (unsigned b = 0; b < 8; b++) s |= ((tile[2 * b] >> 54) & 0xFFu) << (8 * b);
    return s;
}

/* The fp16 of a 3-bit code (0..7 are exact in fp16). */
static qg_f16 code_f16(unsigned c)
{
    static const qg_f16 tab[8] = {0x0000, 0x3C00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600, 0x4700};
    return tab[c & 7u];
}

void qg_spqr_decode_word(uint64_t word, uint64_t second, size_t count, uint16_t *w)
{
    const qg_f16 s_s = (qg_f16)(second & 0xFFFF), z_s = (qg_f16)((second >> 16) & 0xFFFF);
    const qg_f16 s_z = (qg_f16)((second >> 32) & 0xFFFF), z_z = (qg_f16)((second >> 48) & 0xFFFF);
    const qg_f16 s = qg_rn16_mul(s_s, qg_rn16_sub(code_f16((unsigned)(word & 7u)), s_z));
    const qg_f16 z = qg_rn16_mul(z_s, qg_rn16_sub(code_f16((unsigned)((word >> 3) & 7u)), z_z));
    if (count > QG_SPQR_TILE) count = QG_SPQR_TILE;
    for (size_t j = 0; j < count; j++) {
        const unsigned q = (unsigned)((word >> (6 + 3 * j)) & 7u);
        w[j] = qg_rn16_mul(s, qg_rn16_sub(code_f16(q), z));
    }
}

/* Outlier words of row k of tile row R in a valid PTCSR layer: the leading nonzero slots. */
static size_t ptcsr_row_len(const qg_spqr_layer *L, size_t R, size_t k)
{
    const size_t base = (size_t)L->row_offsets[R], levels = ((size_t)L->row_offsets[R + 1] - base) / QG_SPQR_TILE;
    size_t l = 0;
    while (l < levels && L->col_vals[base + QG_SPQR_TILE * l + k] != 0) l++;
    return l;
}

int qg_spqr_validate(const qg_spqr_layer *L)
{
    if (L == NULL) return QG_ERR_argument_invalid;
    if (L->outliers != QG_SPQR_OUTLIERS_NONE && L->outliers != QG_SPQR_OUTLIERS_CSR && L->outliers != QG_SPQR_OUTLIERS_PTCSR)
        return QG_ERR_argument_invalid;
    const int has_out = L->outliers != QG_SPQR_OUTLIERS_NONE;
    /* A NULL pointer with a nonzero length is a bad call; a NULL with length 0 is judged by the rules. */
    if ((L->dense == NULL && L->dense_words > 0) || (L->perm == NULL && L->perm_len > 0) ||
        (has_out && ((L->row_offsets == NULL && L->row_offsets_len > 0) || (L->col_vals == NULL && L->nnz > 0))))
        return QG_ERR_argument_invalid;

    const size_t m = L->m, n = L->n;
    if (m == 0 || m % QG_SPQR_TILE != 0) return QG_ERR_spqr_rows_not_multiple;
    if (n == 0 || n > QG_SPQR_MAX_N) return QG_ERR_spqr_cols_out_of_range;

    const size_t RT = m / QG_SPQR_TILE, T = qg_spqr_tiles_c(n), words = qg_spqr_dense_words(m, n);
    if (words == 0 || L->dense_words != words) return QG_ERR_spqr_size_mismatch;
    if (has_out && L->row_offsets_len != (L->outliers == QG_SPQR_OUTLIERS_CSR ? m + 1 : RT + 1)) return QG_ERR_spqr_size_mismatch;
    if (L->perm != NULL && L->perm_len != n) return QG_ERR_spqr_size_mismatch;

    for (size_t i = 0; i < words; i++)
        if (L->dense[i] & RESERVED_MASK) return QG_ERR_spqr_reserved_bits;

    for (size_t tile = 0; tile < RT * T; tile++) {
        const uint64_t *d = L->dense + tile * QG_SPQR_TILE;
        for (size_t b = 0; b < 8; b++)
            if (((d[2 * b] ^ d[2 * b + 1]) >> 54) & 0xFFu) return QG_ERR_spqr_fragment_mismatch;
    }

    if (has_out) {
        const int32_t *ro = L->row_offsets;
        const size_t len = L->row_offsets_len;
        if (ro[0] != 0) return QG_ERR_spqr_offsets_not_zero;
        for (size_t i = 0; i + 1 < len; i++)
            if (ro[i + 1] < ro[i]) return QG_ERR_spqr_offsets_decreasing;
        /* ro[0] = 0 and non-decreasing: ro[len-1] >= 0. */
        if ((uint64_t)ro[len - 1] != (uint64_t)L->nnz) return QG_ERR_spqr_offsets_not_nnz;
        for (size_t i = 0; i < L->nnz; i++)
            if ((L->col_vals[i] & 0xFFFFu) >= n) return QG_ERR_spqr_outlier_col_out_of_range;
        if (L->outliers == QG_SPQR_OUTLIERS_PTCSR) {
            for (size_t R = 0; R < RT; R++)
                if (((size_t)ro[R + 1] - (size_t)ro[R]) % QG_SPQR_TILE != 0) return QG_ERR_spqr_ptcsr_segment_not_multiple;
            for (size_t R = 0; R < RT; R++) {
                const size_t base = (size_t)ro[R], levels = ((size_t)ro[R + 1] - base) / QG_SPQR_TILE;
                size_t longest = 0;
                for (size_t k = 0; k < QG_SPQR_TILE; k++) {
                    const size_t len_k = ptcsr_row_len(L, R, k);
                    for (size_t l = len_k; l < levels; l++)
                        if (L->col_vals[base + QG_SPQR_TILE * l + k] != 0) return QG_ERR_spqr_ptcsr_segment_mismatch;
                    if (len_k > longest) longest = len_k;
                }
                if (longest != levels) return QG_ERR_spqr_ptcsr_segment_mismatch;
            }
        }
    }

    if (L->perm != NULL) {
        static const size_t NW = QG_SPQR_MAX_N / 64;
        uint64_t seen[QG_SPQR_MAX_N / 64];
        memset(seen, 0, NW * sizeof seen[0]);
        for (size_t i = 0; i < n; i++) {
            const size_t p = L->perm[i];
            if (p >= n || (seen[p / 64] >> (p % 64)) & 1u) return QG_ERR_spqr_perm_invalid;
            seen[p / 64] |= (uint64_t)1 << (p % 64);
        }
    }

    if (n % QG_SPQR_TILE != 0) {
        /* Codes of columns n % 16 .. 15 of the last tile column: bits 6 + 3 (n % 16) .. 53. */
        const unsigned first = 6u + 3u * (unsigned)(n % QG_SPQR_TILE);
        const uint64_t mask = (((uint64_t)1 << 54) - 1) & ~(((uint64_t)1 << first) - 1);
        for (size_t R = 0; R < RT; R++)
            for (size_t k = 0; k < QG_SPQR_TILE; k++)
                if (L->dense[((R * T) + (T - 1)) * QG_SPQR_TILE + k] & mask) return QG_ERR_spqr_padding_codes_nonzero;
    }
    return QG_ERR_ok;
}

size_t qg_spqr_max_terms(const qg_spqr_layer *L)
{
    size_t most = 0;
    if (L->outliers == QG_SPQR_OUTLIERS_CSR) {
        for (size_t r = 0; r < L->m; r++) {
            const size_t c = (size_t)L->row_offsets[r + 1] - (size_t)L->row_offsets[r];
            if (c > most) most = c;
        }
    } else if (L->outliers == QG_SPQR_OUTLIERS_PTCSR) {
        /* In a valid layer a segment is 16 x its longest row. */
        for (size_t R = 0; R < L->m / QG_SPQR_TILE; R++) {
            const size_t c = ((size_t)L->row_offsets[R + 1] - (size_t)L->row_offsets[R]) / QG_SPQR_TILE;
            if (c > most) most = c;
        }
    }
    return L->n + most;
}

/* Dense weights of output row r (n fp16 values) of a valid layer. */
static void decode_row(const qg_spqr_layer *L, size_t r, uint16_t *w)
{
    const size_t T = qg_spqr_tiles_c(L->n), R = r / QG_SPQR_TILE, k = r % QG_SPQR_TILE;
    for (size_t t = 0; t < T; t++) {
        const uint64_t *tile = L->dense + (R * T + t) * QG_SPQR_TILE;
        const size_t cols = L->n - t * QG_SPQR_TILE;
        qg_spqr_decode_word(tile[k], qg_spqr_second_order(tile), cols < QG_SPQR_TILE ? cols : QG_SPQR_TILE, w + t * QG_SPQR_TILE);
    }
}

int qg_spqr_dequant_ref(const qg_spqr_layer *L, uint16_t *w)
{
    if (w == NULL) return QG_ERR_argument_invalid;
    const int rc = qg_spqr_validate(L);
    if (rc != QG_ERR_ok) return rc;
    for (size_t r = 0; r < L->m; r++) decode_row(L, r, w + r * L->n);
    return QG_ERR_ok;
}

int qg_spqr_gemv_ref(const qg_spqr_layer *L, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16)
{
    if (x == NULL || (y_f32 == NULL && y_f16 == NULL)) return QG_ERR_argument_invalid;
    int rc = qg_spqr_validate(L);
    if (rc != QG_ERR_ok) return rc;
    if (batch < 1 || batch > QG_SPQR_MAX_BATCH) return QG_ERR_spqr_batch_out_of_range;
    const size_t m = L->m, n = L->n;
    float *xp = malloc(batch * n * sizeof *xp);
    float *wf = malloc(n * sizeof *wf);
    uint16_t *wh = malloc(n * sizeof *wh);
    if (xp == NULL || wf == NULL || wh == NULL) {
        rc = QG_ERR_alloc_failed;
        goto done;
    }
    /* Gather: x'[i] = x[perm[i]], per batch column. fp16 -> float32 is exact. */
    for (size_t b = 0; b < batch; b++)
        for (size_t i = 0; i < n; i++) xp[b * n + i] = qg_f16_to_f32(x[b * n + (L->perm ? (size_t)L->perm[i] : i)]);
    for (size_t r = 0; r < m; r++) {
        decode_row(L, r, wh);
        for (size_t j = 0; j < n; j++) wf[j] = qg_f16_to_f32(wh[j]);
        size_t o0 = 0, o1 = 0, stride = 1;
        if (L->outliers == QG_SPQR_OUTLIERS_CSR) {
            o0 = (size_t)L->row_offsets[r];
            o1 = (size_t)L->row_offsets[r + 1];
        } else if (L->outliers == QG_SPQR_OUTLIERS_PTCSR) {
            const size_t R = r / QG_SPQR_TILE;
            o0 = (size_t)L->row_offsets[R] + r % QG_SPQR_TILE;
            o1 = (size_t)L->row_offsets[R + 1];
            stride = QG_SPQR_TILE;
        }
        for (size_t b = 0; b < batch; b++) {
            const float *xb = xp + b * n;
            float acc = 0.0f;
            for (size_t j = 0; j < n; j++) {
                const float p = wf[j] * xb[j]; /* exact: two fp16 */
                acc = acc + p;
            }
            for (size_t o = o0; o < o1; o += stride) {
                const uint32_t cv = L->col_vals[o];
                if (L->outliers == QG_SPQR_OUTLIERS_PTCSR && cv == 0) break; /* padding: nothing after it */
                const float p = qg_f16_to_f32((qg_f16)(cv >> 16)) * xb[cv & 0xFFFFu];
                acc = acc + p;
            }
            if (y_f32) y_f32[b * m + r] = acc;
            if (y_f16) y_f16[b * m + r] = qg_f32_to_f16(acc);
        }
    }
done:
    free(xp);
    free(wf);
    free(wh);
    return rc;
}

int qg_spqr_pack(size_t m, size_t n, const uint8_t *q, const uint8_t *s_q, const uint8_t *z_q, const uint16_t *stats,
                 uint64_t *dense, size_t dense_words)
{
    if (q == NULL || s_q == NULL || z_q == NULL || stats == NULL || dense == NULL) return QG_ERR_argument_invalid;
    if (m == 0 || m % QG_SPQR_TILE != 0) return QG_ERR_spqr_rows_not_multiple;
    if (n == 0 || n > QG_SPQR_MAX_N) return QG_ERR_spqr_cols_out_of_range;
    const size_t words = qg_spqr_dense_words(m, n), T = qg_spqr_tiles_c(n), RT = m / QG_SPQR_TILE;
    if (words == 0 || dense_words != words) return QG_ERR_spqr_size_mismatch;
    /* Codes first: nothing is written when one is out of range. */
    for (size_t i = 0; i < m * n; i++)
        if (q[i] > 7) return QG_ERR_argument_invalid;
    for (size_t i = 0; i < m * T; i++)
        if (s_q[i] > 7 || z_q[i] > 7) return QG_ERR_argument_invalid;
    for (size_t R = 0; R < RT; R++)
        for (size_t t = 0; t < T; t++) {
            const uint16_t *st = stats + (R * T + t) * 4;
            const uint64_t second = (uint64_t)st[0] | (uint64_t)st[1] << 16 | (uint64_t)st[2] << 32 | (uint64_t)st[3] << 48;
            for (size_t k = 0; k < QG_SPQR_TILE; k++) {
                const size_t r = R * QG_SPQR_TILE + k;
                uint64_t wd = (uint64_t)s_q[r * T + t] | (uint64_t)z_q[r * T + t] << 3;
                for (size_t j = 0; j < QG_SPQR_TILE && t * QG_SPQR_TILE + j < n; j++)
                    wd |= (uint64_t)q[r * n + t * QG_SPQR_TILE + j] << (6 + 3 * j);
                wd |= ((second >> (8 * (k / 2))) & 0xFFu) << 54;
                dense[(R * T + t) * QG_SPQR_TILE + k] = wd;
            }
        }
    return QG_ERR_ok;
}

int qg_spqr_csr_to_ptcsr(size_t m, const int32_t *row_offsets, const uint32_t *col_vals, int32_t *pt_row_offsets,
                         uint32_t *pt_col_vals, size_t *pt_nnz)
{
    if (row_offsets == NULL || pt_nnz == NULL || (pt_col_vals != NULL && pt_row_offsets == NULL)) return QG_ERR_argument_invalid;
    if (m == 0 || m % QG_SPQR_TILE != 0) return QG_ERR_spqr_rows_not_multiple;
    if (row_offsets[0] != 0) return QG_ERR_spqr_offsets_not_zero;
    for (size_t r = 0; r < m; r++)
        if (row_offsets[r + 1] < row_offsets[r]) return QG_ERR_spqr_offsets_decreasing;
    const size_t nnz = (size_t)row_offsets[m];
    if (nnz > 0 && col_vals == NULL) return QG_ERR_argument_invalid;
    for (size_t i = 0; i < nnz; i++)
        if (col_vals[i] == 0) return QG_ERR_argument_invalid;
    /* Segment lengths: 16 x the longest row of each tile row; the total must fit int32. */
    size_t total = 0;
    for (size_t R = 0; R < m / QG_SPQR_TILE; R++) {
        size_t longest = 0;
        for (size_t k = 0; k < QG_SPQR_TILE; k++) {
            const size_t r = R * QG_SPQR_TILE + k, c = (size_t)row_offsets[r + 1] - (size_t)row_offsets[r];
            if (c > longest) longest = c;
        }
        total += QG_SPQR_TILE * longest;
        if (total > INT32_MAX) return QG_ERR_argument_invalid;
    }
    if (pt_col_vals == NULL) {
        *pt_nnz = total;
        return QG_ERR_ok;
    }
    if (*pt_nnz < total) return QG_ERR_size_mismatch;
    size_t base = 0;
    pt_row_offsets[0] = 0;
    for (size_t R = 0; R < m / QG_SPQR_TILE; R++) {
        size_t longest = 0;
        for (size_t k = 0; k < QG_SPQR_TILE; k++) {
            const size_t r = R * QG_SPQR_TILE + k, c = (size_t)row_offsets[r + 1] - (size_t)row_offsets[r];
            if (c > longest) longest = c;
        }
        for (size_t k = 0; k < QG_SPQR_TILE; k++) {
            const size_t r = R * QG_SPQR_TILE + k, r0 = (size_t)row_offsets[r], c = (size_t)row_offsets[r + 1] - r0;
            for (size_t l = 0; l < longest; l++) pt_col_vals[base + QG_SPQR_TILE * l + k] = l < c ? col_vals[r0 + l] : 0u;
        }
        base += QG_SPQR_TILE * longest;
        pt_row_offsets[R + 1] = (int32_t)base;
    }
    *pt_nnz = total;
    return QG_ERR_ok;
}
