/* Fuzz target: SpQR layers, valid or broken in one chosen way, through the validator, the reference GEMV
 * and the CPU kernel dispatch picks (AVX2 or NEON where present).
 *
 * The input bytes choose the shape (m = 16..64, n = 1..300), the outlier layout, the permutation, the
 * batch, one fault to inject and the layer's contents (codes, statistics, outlier columns and values,
 * activations, any fp16 bits). Every buffer is allocated at exactly its length, so a read past a layer
 * array is caught by ASan. Oracles (a violation aborts):
 *   - a layer built without a fault validates; a layer with a fault does not;
 *   - the reference GEMV and the CPU kernel return qg_spqr_validate's error (or the batch error);
 *   - on success, an output is NaN in the kernel exactly where it is NaN in the reference (a NaN term or
 *     inf - inf makes every summation order NaN, and finite sums of these sizes cannot overflow float32).
 */
#include "qgold/errors.h"
#include "qgold/registry.h"
#include "qgold/spqr.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond)
{
    if (!cond) abort();
}

/* The input as an endless byte stream (zeros when empty). */
typedef struct {
    const uint8_t *p;
    size_t n, i;
} stream;

static unsigned next8(stream *s) { return s->n ? s->p[s->i++ % s->n] : 0u; }
static unsigned next16(stream *s) { return next8(s) | (next8(s) << 8); }

enum {
    F_NONE = 0, F_RESERVED, F_FRAGMENT, F_PADCODE, F_OFFSET0, F_DECREASING, F_NNZ, F_COLUMN, F_PERMDUP,
    F_DENSE_SHORT, F_BATCH, F_PTCSR_LEVEL, F_COUNT
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8) return 0;
    stream s = {data, size, 0};
    const size_t m = 16 * (1 + next8(&s) % 4), n = 1 + next16(&s) % 300;
    const unsigned b3 = next8(&s);
    const qg_spqr_outlier_kind kind = (qg_spqr_outlier_kind)(b3 % 3);
    const int has_perm = (b3 >> 2) & 1;
    size_t batch = 1 + ((b3 >> 3) & 15);
    /* Faults are drawn only where the layer can carry them (F_NONE otherwise). */
    int fault = (int)(next8(&s) % (2 * F_COUNT));
    if (fault >= F_COUNT) fault = F_NONE;
    const unsigned density = next8(&s); /* outliers per row: density % 8, and one dense row when >= 250 */
    const size_t T = qg_spqr_tiles_c(n), words = qg_spqr_dense_words(m, n);

    /* Dense part through the packer: random codes, first-order codes and fp16 statistics (any bits). */
    uint8_t *q = malloc(m * n), *sq = malloc(m * T), *zq = malloc(m * T);
    uint16_t *st = malloc((m / 16) * T * 4 * sizeof *st);
    uint64_t *dense = malloc(words * sizeof *dense);
    require(q && sq && zq && st && dense);
    for (size_t i = 0; i < m * n; i++) q[i] = (uint8_t)(next8(&s) & 7);
    for (size_t i = 0; i < m * T; i++) sq[i] = (uint8_t)(next8(&s) & 7), zq[i] = (uint8_t)(next8(&s) & 7);
    for (size_t i = 0; i < (m / 16) * T * 4; i++) st[i] = (uint16_t)next16(&s);
    require(qg_spqr_pack(m, n, q, sq, zq, st, dense, words) == QG_ERR_ok);

    /* CSR outliers: up to 7 per row (n in one row when density >= 250), nonzero words only so the
     * PTCSR form keeps them all. */
    int32_t *ro = malloc((m + 1) * sizeof *ro);
    const size_t cap = m * 7 + n;
    uint32_t *cv = malloc(cap * sizeof *cv);
    require(ro && cv);
    size_t nnz = 0;
    ro[0] = 0;
    for (size_t r = 0; r < m; r++) {
        const size_t cnt = density >= 250 && r == 1 ? n : density % 8;
        for (size_t k = 0; k < cnt; k++) {
            uint32_t w = (uint32_t)(next16(&s) % n) | ((uint32_t)next16(&s) << 16);
            if (w == 0) w = 0x3C000000u | (uint32_t)(n - 1); /* 1.0 at column n - 1 */
            cv[nnz++] = w;
        }
        ro[r + 1] = (int32_t)nnz;
    }
    int32_t *pro = NULL;
    uint32_t *pcv = NULL;
    size_t pnnz = 0;
    if (kind == QG_SPQR_OUTLIERS_PTCSR) {
        pro = malloc((m / 16 + 1) * sizeof *pro);
        require(pro != NULL);
        require(qg_spqr_csr_to_ptcsr(m, ro, cv, pro, NULL, &pnnz) == QG_ERR_ok);
        pcv = malloc((pnnz ? pnnz : 1) * sizeof *pcv);
        require(pcv != NULL);
        require(qg_spqr_csr_to_ptcsr(m, ro, cv, pro, pcv, &pnnz) == QG_ERR_ok);
    }
    uint16_t *perm = NULL;
    if (has_perm) {
        perm = malloc(n * sizeof *perm);
        require(perm != NULL);
        for (size_t i = 0; i < n; i++) perm[i] = (uint16_t)i;
        for (size_t i = n; i > 1; i--) { /* Fisher-Yates from the byte stream */
            const size_t j = next16(&s) % i;
            const uint16_t t = perm[i - 1];
            perm[i - 1] = perm[j];
            perm[j] = t;
        }
    }

    /* One fault, where the layer has the part it breaks. */
    size_t dense_words = words;
    int32_t *offs = kind == QG_SPQR_OUTLIERS_PTCSR ? pro : ro;
    uint32_t *vals = kind == QG_SPQR_OUTLIERS_PTCSR ? pcv : cv;
    const size_t nvals = kind == QG_SPQR_OUTLIERS_PTCSR ? pnnz : nnz, noffs = kind == QG_SPQR_OUTLIERS_PTCSR ? m / 16 + 1 : m + 1;
    const size_t at = next16(&s);
    switch (fault) {
    case F_RESERVED: dense[at % words] |= (uint64_t)1 << (62 + (at & 1)); break;
    case F_FRAGMENT: dense[at % words] ^= (uint64_t)1 << (54 + at % 8); break;
    case F_PADCODE:
        if (n % 16) dense[(at % (m / 16)) * T * 16 + (T - 1) * 16 + at % 16] |= (uint64_t)1 << (6 + 3 * (n % 16));
        else fault = F_NONE;
        break;
    case F_OFFSET0:
        if (kind != QG_SPQR_OUTLIERS_NONE) offs[0] = 1;
        else fault = F_NONE;
        break;
    case F_DECREASING:
        if (kind != QG_SPQR_OUTLIERS_NONE && offs[noffs - 1] > 0) offs[1 + at % (noffs - 1)] = -1;
        else fault = F_NONE;
        break;
    case F_NNZ:
        if (kind != QG_SPQR_OUTLIERS_NONE && nvals > 0) offs[noffs - 1] -= 1;
        else fault = F_NONE;
        break;
    case F_COLUMN:
        if (kind != QG_SPQR_OUTLIERS_NONE && nvals > 0 && vals[at % nvals] != 0)
            vals[at % nvals] = (vals[at % nvals] & 0xFFFF0000u) | (uint32_t)(n + at % (65536 - n));
        else fault = F_NONE;
        break;
    case F_PERMDUP:
        if (has_perm && n > 1) perm[at % n] = perm[(at + 1) % n];
        else fault = F_NONE;
        break;
    case F_DENSE_SHORT: dense_words = words - 1; break; /* the array is one word longer than claimed */
    case F_BATCH: batch = at & 1 ? 17 : 0; break;
    case F_PTCSR_LEVEL:
        /* A whole trailing level of padding: the segment is longer than its longest row. */
        if (kind == QG_SPQR_OUTLIERS_PTCSR) {
            uint32_t *grown = malloc((pnnz + 16) * sizeof *grown);
            require(grown != NULL);
            memcpy(grown, pcv, pnnz * sizeof *grown);
            memset(grown + pnnz, 0, 16 * sizeof *grown);
            free(pcv);
            pcv = vals = grown;
            pro[m / 16] += 16;
            pnnz += 16;
        } else {
            fault = F_NONE;
        }
        break;
    default: break;
    }
    const size_t nv_final = kind == QG_SPQR_OUTLIERS_PTCSR ? pnnz : nnz;
    const qg_spqr_layer L = {m, n, dense, dense_words, kind,
                             kind == QG_SPQR_OUTLIERS_NONE ? NULL : offs, kind == QG_SPQR_OUTLIERS_NONE ? 0 : noffs,
                             kind == QG_SPQR_OUTLIERS_NONE ? NULL : vals, kind == QG_SPQR_OUTLIERS_NONE ? 0 : nv_final,
                             perm, has_perm ? n : 0};

    const int v = qg_spqr_validate(&L);
    if (fault == F_NONE || fault == F_BATCH) require(v == QG_ERR_ok);
    else require(v != QG_ERR_ok);
    const int want = v != QG_ERR_ok ? v : (batch < 1 || batch > QG_SPQR_MAX_BATCH) ? QG_ERR_spqr_batch_out_of_range : QG_ERR_ok;

    const size_t xb = batch ? batch : 1, ny = m * xb;
    uint16_t *x = malloc(xb * n * sizeof *x);
    float *yr = malloc(ny * sizeof *yr), *yk = malloc(ny * sizeof *yk);
    require(x && yr && yk);
    for (size_t i = 0; i < xb * n; i++) x[i] = (uint16_t)next16(&s);
    require(qg_spqr_gemv_ref(&L, x, batch, yr, NULL) == want);
    const qg_kernel *k = qg_select_cpu("spqr", "gemv", NULL);
    if (k != NULL && k->backend != QG_BACKEND_REF && qg_kernel_available(k, NULL, 0)) {
        require(k->fn.spqr_gemv(&L, x, batch, yk, NULL) == want);
        if (want == QG_ERR_ok)
            for (size_t i = 0; i < ny; i++) require((yr[i] != yr[i]) == (yk[i] != yk[i]));
    }
    free(q), free(sq), free(zq), free(st), free(dense), free(ro), free(cv), free(pro), free(pcv), free(perm);
    free(x), free(yr), free(yk);
    return 0;
}
