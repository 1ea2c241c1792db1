/* Internal: the validity checks of an SpQR layer (qg_spqr_validate's rules), split so that the CPU
 * kernels run the O(m + n) ones before their pass and the O(dense words + nnz) ones inside it, on the
 * words they load anyway. The checks only decide valid / not valid; a kernel that finds anything
 * returns qg_spqr_validate's own code (the first failing rule in the spec's order) and writes nothing, so
 * errors are the reference's exactly. Every rule of qg_spqr_validate is covered by exactly one of:
 *   spqr_precheck         arguments, m, n, buffer sizes, row offsets (start, order, end), PTCSR segment
 *                         lengths, the permutation;
 *   the kernel's pass     reserved bits and fragment copies of every dense word, padded column codes of
 *                         the last column tile, outlier columns (spqr_col_ok), PTCSR segment layout
 *                         (spqr_ptcsr_segment_ok).
 */
#ifndef QGOLD_KERNELS_SPQR_CHECKS_H
#define QGOLD_KERNELS_SPQR_CHECKS_H

#include "qgold/spqr.h"

#include <stdint.h>
#include <string.h>

#define QG_SPQR_RESERVED_MASK ((uint64_t)3 << 62)
#define QG_SPQR_FRAGMENT_MASK ((uint64_t)0xFF << 54)

/* 1 when the O(m + n) rules hold (and the pointers the pass dereferences are usable), else 0. */
static inline int spqr_precheck(const qg_spqr_layer *L)
{
    if (L == NULL) return 0;
    if (L->outliers != QG_SPQR_OUTLIERS_NONE && L->outliers != QG_SPQR_OUTLIERS_CSR && L->outliers != QG_SPQR_OUTLIERS_PTCSR) return 0;
    const int has_out = L->outliers != QG_SPQR_OUTLIERS_NONE;
    const size_t m = L->m, n = L->n;
    if (m == 0 || m % QG_SPQR_TILE != 0 || n == 0 || n > QG_SPQR_MAX_N) return 0;
    const size_t RT = m / QG_SPQR_TILE, words = qg_spqr_dense_words(m, n);
    if (L->dense == NULL || words == 0 || L->dense_words != words) return 0;
    if (L->perm != NULL ? L->perm_len != n : L->perm_len != 0) return 0;
    if (has_out) {
        const size_t len = L->outliers == QG_SPQR_OUTLIERS_CSR ? m + 1 : RT + 1;
        const int32_t *ro = L->row_offsets;
        if (ro == NULL || L->row_offsets_len != len || (L->col_vals == NULL && L->nnz > 0)) return 0;
        if (ro[0] != 0) return 0;
        for (size_t i = 0; i + 1 < len; i++)
            if (ro[i + 1] < ro[i]) return 0;
        if ((uint64_t)ro[len - 1] != (uint64_t)L->nnz) return 0;
        if (L->outliers == QG_SPQR_OUTLIERS_PTCSR)
            for (size_t R = 0; R < RT; R++)
                if (((size_t)ro[R + 1] - (size_t)ro[R]) % QG_SPQR_TILE != 0) return 0;
    }
    if (L->perm != NULL) {
        uint64_t seen[QG_SPQR_MAX_N / 64];
        memset(seen, 0, sizeof seen);
        for (size_t i = 0; i < n; i++) {
            const size_t p = L->perm[i];
            if (p >= n || (seen[p / 64] >> (p % 64)) & 1u) return 0;
            seen[p / 64] |= (uint64_t)1 << (p % 64);
        }
    }
    return 1;
}

/* PTCSR tile row R (segment lengths already checked): each row's outliers are leading nonzero slots
 * (no outlier after a padding slot) and the longest row fills every level. 1 when so. */
static inline int spqr_ptcsr_segment_ok(const qg_spqr_layer *L, size_t R)
{
    const size_t base = (size_t)L->row_offsets[R], levels = ((size_t)L->row_offsets[R + 1] - base) / QG_SPQR_TILE;
    size_t longest = 0;
    for (size_t k = 0; k < QG_SPQR_TILE; k++) {
        size_t l = 0;
        while (l < levels && L->col_vals[base + QG_SPQR_TILE * l + k] != 0) l++;
        if (l > longest) longest = l;
        for (size_t j = l; j < levels; j++)
            if (L->col_vals[base + QG_SPQR_TILE * j + k] != 0) return 0;
    }
    return longest == levels;
}

/* Where row 16R + k's outlier words are: col_vals[o] for o = o0, o0 + stride, ... < o1. CSR: the row's
 * own range; PTCSR: every 16th slot of the tile row's segment from slot k (zero words are padding). */
static inline void spqr_row_outliers(const qg_spqr_layer *L, size_t R, int k, size_t *o0, size_t *o1, size_t *stride)
{
    *o0 = *o1 = 0;
    *stride = 1;
    if (L->outliers == QG_SPQR_OUTLIERS_CSR) {
        *o0 = (size_t)L->row_offsets[R * 16 + (size_t)k];
        *o1 = (size_t)L->row_offsets[R * 16 + (size_t)k + 1];
    } else if (L->outliers == QG_SPQR_OUTLIERS_PTCSR) {
        *o0 = (size_t)L->row_offsets[R] + (size_t)k;
        *o1 = (size_t)L->row_offsets[R + 1];
        *stride = 16;
    }
}

/* Codes of the padded columns n % 16 .. 15 of the last column tile: bits 6 + 3 (n % 16) .. 53 (0 when
 * n is a multiple of 16). */
static inline uint64_t spqr_padding_mask(size_t n)
{
    if (n % QG_SPQR_TILE == 0) return 0;
    const unsigned first = 6u + 3u * (unsigned)(n % QG_SPQR_TILE);
    return (((uint64_t)1 << 54) - 1) & ~(((uint64_t)1 << first) - 1);
}

#endif
