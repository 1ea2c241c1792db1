/* Random SpQR layers built on the fly from the pinned RNG, and the exact product they must approximate.
 *
 * For kernel tests: make a layer (qg_spqr_layer_make), run a kernel on layer.L, compare its output with
 * qg_spqr_exact_product at the kernel's registry numerics with K = qg_spqr_max_terms(&layer.L).
 * The recipe of the random stream is in spqr_layers.c; the same options and seed give the same layer on
 * every machine.
 */
#ifndef QGOLD_SPQR_LAYERS_H
#define QGOLD_SPQR_LAYERS_H

#include "qgold/spqr.h"

#include <stddef.h>
#include <stdint.h>

typedef enum {
    QG_SPQR_PERM_IDENTITY = 0, /* perm = NULL */
    QG_SPQR_PERM_REVERSED = 1, /* perm[i] = n - 1 - i */
    QG_SPQR_PERM_RANDOM = 2,   /* qg_rng_permutation */
} qg_spqr_perm_kind;

typedef struct {
    size_t m, n;                   /* m a nonzero multiple of 16, n in 1..65536 */
    double density;                /* probability that a (row, column) position holds an outlier, 0..1 */
    qg_spqr_outlier_kind outliers; /* NONE ignores density */
    qg_spqr_perm_kind perm;
    uint64_t seed;
    long dense_row;                /* >= 0: this row holds an outlier in every column (nnz of the row = n);
                                    * -1: none (0 means row 0, so set -1 explicitly) */
    int high_cols;                 /* 1: every row also gets an outlier at a column >= 32768 (needs n > 32768) */
} qg_spqr_layer_opts;

typedef struct {
    qg_spqr_layer L;         /* points into the buffers below */
    uint64_t *dense;
    int32_t *row_offsets;    /* of L's outlier kind (CSR or PTCSR); NULL for NONE */
    uint32_t *col_vals;
    uint16_t *perm;          /* NULL for identity */
    int32_t *csr_row_offsets; /* the same outliers as CSR (m + 1), whatever L's kind; NULL for NONE */
    uint32_t *csr_col_vals;
    size_t csr_nnz;
} qg_spqr_test_layer;

/* Builds a valid layer; 0 or an error (argument_invalid for impossible options, alloc_failed). On error
 * *out holds nothing to free (it is zeroed). */
int qg_spqr_layer_make(const qg_spqr_layer_opts *o, qg_spqr_test_layer *out);
void qg_spqr_layer_free(qg_spqr_test_layer *t);

/* batch x n fp16 activations, uniform in [-1, 1) rounded to fp16, from their own stream (seed). */
void qg_spqr_random_x(uint64_t seed, size_t batch, size_t n, uint16_t *x);

/* The fixture quantities of every output (fixtures.md, SpQR gemv): ystar[b * m + r] the exact sum of the
 * dense fp16 weights times x'_b plus every outlier times x'_b, correctly rounded to double; sum_abs the
 * exact sum of the terms' magnitudes, correctly rounded. Both are summed exactly (an error-free expansion
 * of two-sums, rounded once at the end), so y* carries at most a half ulp of double, which the bound's
 * gamma_K(2^-53) S term covers. Non-finite: a NaN term, or +inf and -inf terms together, give NaN; else an
 * infinite term gives that infinity (sum_abs then +inf). The layer must be valid (checked:
 * its error is returned); x is batch x n fp16 in original column order; batch >= 1. */
int qg_spqr_exact_product(const qg_spqr_layer *L, const uint16_t *x, size_t batch, double *ystar, double *sum_abs);

#endif
