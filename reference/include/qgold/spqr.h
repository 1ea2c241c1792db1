/* SpQR inference format: the reference (spec: reference/spec/spqr.md).
 *
 * A layer of m output rows and n input columns is
 *   - dense: one uint64 word per (row, 16-column group), memory order ((R * T) + t) * 16 + k with
 *     R = tile row, t = tile column, k = row in the tile, T = ceil(n / 16): 3-bit codes, first-order
 *     scale/zero codes and one byte of the tile's second-order word (bits 54-61);
 *   - optional fp16 outliers, CSR (row_offsets int32[m + 1]) or PTCSR (row_offsets int32[m/16 + 1], padded
 *     tile-row segments), each word = column (bits 0-15) | fp16 value bits (bits 16-31), additive;
 *   - an optional column permutation perm uint16[n] (gather: x'[i] = x[perm[i]]).
 * Dense codes and outlier columns index the permuted activations x'. Output rows are not permuted.
 *
 * Every function validates the whole layer first (qg_spqr_validate) and writes nothing on an error.
 */
#ifndef QGOLD_SPQR_H
#define QGOLD_SPQR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { QG_SPQR_TILE = 16, QG_SPQR_MAX_N = 65536, QG_SPQR_MAX_BATCH = 16 };

typedef enum {
    QG_SPQR_OUTLIERS_NONE = 0,
    QG_SPQR_OUTLIERS_CSR = 1,
    QG_SPQR_OUTLIERS_PTCSR = 2,
} qg_spqr_outlier_kind;

/* A layer as it sits in memory. Nothing is owned. */
typedef struct {
    size_t m, n;                    /* output rows, input columns */
    const uint64_t *dense;          /* dense_words = (m / 16) * ceil(n / 16) * 16 */
    size_t dense_words;
    qg_spqr_outlier_kind outliers;  /* NONE: row_offsets and col_vals are ignored */
    const int32_t *row_offsets;     /* CSR: m + 1 entries; PTCSR: m / 16 + 1 */
    size_t row_offsets_len;
    const uint32_t *col_vals;       /* row_offsets[last] words (may be 0, then col_vals may be NULL) */
    size_t nnz;                     /* length of col_vals */
    const uint16_t *perm;           /* NULL: identity */
    size_t perm_len;                /* n when perm is given, else 0 */
} qg_spqr_layer;

/* ceil(n / 16) and (m / 16) * ceil(n / 16) * 16; 0 on overflow. */
size_t qg_spqr_tiles_c(size_t n);
size_t qg_spqr_dense_words(size_t m, size_t n);

/* Checks every rule of the spec, in the order of its validation list, and returns the first that
 * fails: spqr_rows_not_multiple, spqr_cols_out_of_range, spqr_size_mismatch, spqr_reserved_bits,
 * spqr_fragment_mismatch, spqr_offsets_not_zero, spqr_offsets_decreasing, spqr_offsets_not_nnz,
 * spqr_outlier_col_out_of_range, spqr_ptcsr_segment_not_multiple, spqr_ptcsr_segment_mismatch,
 * spqr_perm_invalid, spqr_padding_codes_nonzero. NULL pointers: argument_invalid. */
int qg_spqr_validate(const qg_spqr_layer *L);

/* The longest chain of terms one output sums: n + the most outlier words of any row (PTCSR padding
 * excluded). The tier-2 bound uses it as d. Assumes a valid layer. */
size_t qg_spqr_max_terms(const qg_spqr_layer *L);

/* Dense part only, dequantized bit-exactly: w[r * n + j] (fp16 bits) multiplies x'[j]. Outliers are
 * not added (they are additive terms of the product, summed in its precision). */
int qg_spqr_dequant_ref(const qg_spqr_layer *L, uint16_t *w);

/* y[b * m + r] = sum_j w[r][j] x'_b[j] + sum over row r's outliers v x'_b[c], x_b = x + b * n (fp16 bits,
 * original column order), batch 1..16. float32 accumulation in index order (dense j ascending, then the
 * outliers in storage order; PTCSR padding skipped); y_f32 and/or y_f16 (either may be NULL, not both);
 * the fp16 output is the float32 sum rounded once. */
int qg_spqr_gemv_ref(const qg_spqr_layer *L, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16);

/* Building blocks of the dequantization (total functions, no validation; for tests and kernels).
 * The tile's second-order word from its 16 dense words (byte b from row 2b), and the fp16 weights of
 * the first `count` (<= 16) columns of one dense word given its tile's second-order word. */
uint64_t qg_spqr_second_order(const uint64_t *tile_words);
void qg_spqr_decode_word(uint64_t word, uint64_t second_order, size_t count, uint16_t *w);

/* ---- packer: codes, statistics, outliers, permutation -> the format (tests, benchmarks) ---- */

/* q: m * n codes 0..7 (row-major, permuted column space); s_q, z_q: m * T first-order codes 0..7
 * (row-major, one per (row, tile column)); stats: (m / 16) * T * 4 fp16 bits per tile, in the order
 * s_s, z_s, s_z, z_z (tile (R, t) at ((R * T) + t) * 4). Writes dense_words words. */
int qg_spqr_pack(size_t m, size_t n, const uint8_t *q, const uint8_t *s_q, const uint8_t *z_q, const uint16_t *stats,
                 uint64_t *dense, size_t dense_words);

/* CSR -> PTCSR with the same outliers in the same per-row order (the l-th outlier of row 16R + k goes
 * to slot base + 16 l + k). pt_row_offsets gets m/16 + 1 entries; pt_col_vals needs *pt_nnz words:
 * call with pt_col_vals NULL to learn *pt_nnz (pt_row_offsets may then be NULL); with
 * pt_col_vals given, *pt_nnz is its capacity on entry (QG_ERR_size_mismatch when too small) and the
 * words written on return. A CSR word 0 (column 0, value +0) cannot be told from
 * padding in PTCSR: argument_invalid. */
int qg_spqr_csr_to_ptcsr(size_t m, const int32_t *row_offsets, const uint32_t *col_vals, int32_t *pt_row_offsets,
                         uint32_t *pt_col_vals, size_t *pt_nnz);

#ifdef __cplusplus
}
#endif
#endif
