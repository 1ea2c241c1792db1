/* Random W4A16 layouts and their exact product (int4_layouts.h). */
#include "int4_layouts.h"

#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int qg_int4_layout_make(size_t N, size_t K, size_t g, int with_zeros, qg_int4_gidx_kind gk, uint64_t seed,
                        qg_int4_test_layout *t)
{
    memset(t, 0, sizeof *t);
    if (N == 0 || K == 0 || K % 8 != 0 || N > ((size_t)1 << 24) || K > ((size_t)1 << 24)) return QG_ERR_shape_invalid;
    if (g == 0 || K % g != 0 || (g != 32 && g != 64 && g != 128 && g != K)) return QG_ERR_int_group_invalid;
    const size_t G = K / g;
    qg_rng r;
    qg_rng_init(&r, seed);
    t->qweight = malloc(N * (K / 8) * sizeof *t->qweight);
    t->scales = malloc(N * G * sizeof *t->scales);
    t->zeros = with_zeros ? malloc(N * G) : NULL;
    t->g_idx = gk != QG_INT4_GIDX_NONE ? malloc(K * sizeof *t->g_idx) : NULL;
    uint32_t *perm = gk == QG_INT4_GIDX_RANDOM ? malloc(K * sizeof *perm) : NULL;
    if (!t->qweight || !t->scales || (with_zeros && !t->zeros) || (gk != QG_INT4_GIDX_NONE && !t->g_idx) ||
        (gk == QG_INT4_GIDX_RANDOM && !perm)) {
        free(perm);
        qg_int4_layout_free(t);
        return QG_ERR_alloc_failed;
    }
    for (size_t i = 0; i < N * (K / 8); i++) t->qweight[i] = qg_rng_bits32(&r);
    for (size_t i = 0; i < N * G; i++) t->scales[i] = qg_f32_to_f16(qg_rng_uniform(&r, 0x1p-8f, 0x1p-2f));
    t->scales[0] = qg_f32_to_f16(0x1p-20f);
    if (with_zeros)
        for (size_t i = 0; i < N * G; i++) t->zeros[i] = (uint8_t)qg_rng_int_range(&r, 16);
    if (gk == QG_INT4_GIDX_IDENTITY)
        for (size_t k = 0; k < K; k++) t->g_idx[k] = (int32_t)(k / g);
    if (gk == QG_INT4_GIDX_RANDOM) {
        qg_rng_permutation(&r, perm, K);
        for (size_t k = 0; k < K; k++) t->g_idx[perm[k]] = (int32_t)(k / g);
        free(perm);
    }
    qg_w4a16 L = {N, K, g, t->qweight, N * (K / 8), t->scales, N * G, t->zeros, with_zeros ? N * G : 0,
                  t->g_idx, t->g_idx ? K : 0};
    t->L = L;
    return 0;
}

void qg_int4_layout_free(qg_int4_test_layout *t)
{
    free(t->qweight);
    free(t->scales);
    free(t->zeros);
    free(t->g_idx);
    memset(t, 0, sizeof *t);
}

void qg_int4_exact_product(const qg_w4a16 *L, const uint16_t *x, size_t batch, double *ystar, double *sum_abs)
{
    const size_t G = L->K / L->g;
    for (size_t b = 0; b < batch; b++)
        for (size_t n = 0; n < L->N; n++) {
            double s = 0.0, a = 0.0;
            for (size_t k = 0; k < L->K; k++) {
                const size_t j = qg_w4a16_group(L, k);
                const int z = L->zeros ? L->zeros[n * G + j] : QG_INT4_SYM_ZERO;
                const double w = (double)((int)qg_w4a16_code(L, n, k) - z) * (double)qg_f16_to_f32(L->scales[n * G + j]);
                const double p = w * (double)qg_f16_to_f32(x[b * L->K + k]);
                s += p;
                a += fabs(p);
            }
            ystar[b * L->N + n] = s;
            sum_abs[b * L->N + n] = a;
        }
}
