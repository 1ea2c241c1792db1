/* Random W4A16 canonical layouts from the pinned stream (qgold/rng.h) and their exact product, for the
 * INT4 tests and the CLI test data. Codes uniform 0..15, scales fp16 uniform in [2^-8, 2^-2) (the first
 * one an fp16 subnormal, 2^-20), zeros uniform 0..15 when present, g_idx absent, explicit k / g, or a
 * random act-order assignment (k / g through a random permutation of 0..K-1). */
#ifndef QGOLD_INT4_LAYOUTS_H
#define QGOLD_INT4_LAYOUTS_H

#include "qgold/int4.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { QG_INT4_GIDX_NONE = 0, QG_INT4_GIDX_IDENTITY, QG_INT4_GIDX_RANDOM } qg_int4_gidx_kind;

typedef struct {
    uint32_t *qweight;
    uint16_t *scales;
    uint8_t *zeros;
    int32_t *g_idx;
    qg_w4a16 L; /* views the arrays above */
} qg_int4_test_layout;

/* 0, shape_invalid / int_group_invalid for a shape the layout does not allow, or alloc_failed. */
int qg_int4_layout_make(size_t N, size_t K, size_t g, int with_zeros, qg_int4_gidx_kind gk, uint64_t seed,
                        qg_int4_test_layout *t);
void qg_int4_layout_free(qg_int4_test_layout *t);

/* y*[b][n] = sum_k w[n][k] x[b][k] and sum_abs[b][n] = sum_k |w x| in double (each product exact; NaN and
 * inf as double arithmetic gives them), batch x N; x fp16 bits batch x K. */
void qg_int4_exact_product(const qg_w4a16 *L, const uint16_t *x, size_t batch, double *ystar, double *sum_abs);

#endif
