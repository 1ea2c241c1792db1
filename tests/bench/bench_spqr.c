/* qgold bench --format spqr, CPU half: every available CPU SpQR GEMV kernel on layers packed on the fly
 * (3-bit tiles, 1% CSR outliers, a random act-order permutation), all threads, against the BW_read measured
 * in the same run; plus the scalar reference (one thread) on one smaller shape as a comparison row, with
 * the SIMD kernels' speedup over it at that shape.
 *
 * Bytes per call, counted honestly: dense words (8 bytes per row per 16 columns: codes, first-order codes
 * and second-order fragments) + outlier words + row offsets + the permutation + x (fp16) + y (float32).
 * Every kernel call checks the whole layer (the contract), and that is part of the timed call; the time
 * of the reference validator alone over the same layer is reported as a note for comparison.
 */
#include "bench.h"

#include "qgold/errors.h"
#include "qgold/threads.h"
#include "qgold/registry.h"
#include "qgold/spqr.h"
#include "spqr_layers.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_REPS = 64 };

static double layer_bytes(const qg_spqr_layer *L, size_t batch)
{
    return (double)L->dense_words * 8.0 + (double)L->nnz * 4.0 + (double)L->row_offsets_len * 4.0 + (double)L->perm_len * 2.0 +
           (double)(L->n * batch) * 2.0 + (double)(L->m * batch) * 4.0;
}

/* Median seconds per call over o->reps calls after one warm-up call; 0 when a call fails. */
static double time_gemv(const qg_bench_opts *o, const qg_kernel *k, const qg_spqr_layer *L, const uint16_t *x, size_t batch, float *y,
                        double *lo, double *hi)
{
    double t[MAX_REPS];
    const int reps = o->reps < 1 ? 1 : o->reps > MAX_REPS ? MAX_REPS : o->reps;
    for (int r = -1; r < reps; r++) {
        const double t0 = qg_now();
        if (k->fn.spqr_gemv(L, x, batch, y, NULL) != 0) return 0.0;
        if (r >= 0) t[r] = qg_now() - t0;
    }
    return qg_bench_median(t, reps, lo, hi);
}

static int bench_shape(const qg_bench_opts *o, size_t m, size_t n, const size_t *batches, size_t nbatches, int with_ref, int threads,
                       double bw_read)
{
    qg_spqr_layer_opts lo = {m, n, 0.01, QG_SPQR_OUTLIERS_CSR, QG_SPQR_PERM_RANDOM, 2026 + m + n, -1, 0};
    qg_spqr_test_layer t;
    char label[80];
    snprintf(label, sizeof label, "spqr %zux%zu", m, n);
    const int mrc = qg_spqr_layer_make(&lo, &t);
    if (mrc == QG_ERR_alloc_failed) /* the codes are staged one byte each before packing */
        return qg_bench_alloc_error(label, "layer", (double)m * (double)n + 8.0 * (double)qg_spqr_dense_words(m, n));
    if (mrc != QG_ERR_ok) {
        fprintf(stderr, "qgold: bench %s: cannot make the layer: %s\n", label, qg_error_name(mrc));
        return 1;
    }
    uint16_t *x = malloc(QG_SPQR_MAX_BATCH * n * sizeof(uint16_t));
    float *y = malloc(QG_SPQR_MAX_BATCH * m * sizeof(float));
    int rc = 0;
    if (x == NULL || y == NULL) {
        rc = qg_bench_alloc_error(label, "vectors", (double)QG_SPQR_MAX_BATCH * (2.0 * (double)n + 4.0 * (double)m));
        goto out;
    }
    qg_spqr_random_x(7, QG_SPQR_MAX_BATCH, n, x);
    char shape[48];
    snprintf(shape, sizeof shape, "%zux%zu", m, n);

    /* the reference validator alone, for comparison with the kernels' whole calls */
    {
        double tv[MAX_REPS];
        const int reps = o->reps < 1 ? 1 : o->reps > MAX_REPS ? MAX_REPS : o->reps;
        for (int r = 0; r < reps; r++) {
            const double t0 = qg_now();
            if (qg_spqr_validate(&t.L) != 0) rc = 1;
            tv[r] = qg_now() - t0;
        }
        char key[80];
        snprintf(key, sizeof key, "validate_ms_%s", shape);
        qg_bench_note(o, key, "%.3f", qg_bench_median(tv, reps, NULL, NULL) * 1e3);
    }

    /* the reference, one thread, batch 1: the comparison row */
    double t_ref = 0.0;
    if (with_ref) {
        const qg_kernel *k = qg_registry_find("spqr", "gemv", QG_BACKEND_REF);
        if (k != NULL && qg_kernel_available(k, NULL, 0) && (o->backend < 0 || o->backend == QG_BACKEND_REF)) {
            qg_bench_row row = {"spqr", "gemv", "ref", "", 1, 0, 0, 0, 0, 0, "BW_read", 0, ""};
            memcpy(row.shape, shape, sizeof shape);
            row.t_med = t_ref = time_gemv(o, k, &t.L, x, 1, y, &row.t_lo, &row.t_hi);
            if (row.t_med > 0.0) {
                row.bytes = layer_bytes(&t.L, 1);
                row.eff = row.bytes / row.t_med / bw_read;
                qg_bench_emit(o, &row);
            } else {
                rc = 1;
            }
        }
    }

    for (size_t i = 0; i < qg_registry_count(); i++) {
        const qg_kernel *k = qg_registry_at(i);
        if (strcmp(k->format, "spqr") || k->kind != QG_KIND_SPQR_GEMV) continue;
        if (k->backend == QG_BACKEND_REF || k->backend == QG_BACKEND_CUDA || !qg_kernel_available(k, NULL, 0)) continue;
        if (o->backend >= 0 && (int)k->backend != o->backend) continue;
        for (size_t bi = 0; bi < nbatches; bi++) {
            const size_t B = batches[bi];
            if (B < 1 || B > QG_SPQR_MAX_BATCH) continue;
            if (with_ref && B != 1) continue; /* the comparison shape: batch 1 against the reference only */
            qg_bench_row row = {"spqr", "gemv", qg_backend_name(k->backend), "", (int)B, 0, 0, 0, 0, 0, "BW_read", 0, ""};
            memcpy(row.shape, shape, sizeof shape);
            row.t_med = time_gemv(o, k, &t.L, x, B, y, &row.t_lo, &row.t_hi);
            if (row.t_med <= 0.0) {
                rc = 1;
                continue;
            }
            row.bytes = layer_bytes(&t.L, B);
            row.eff = row.bytes / row.t_med / bw_read;
            if (with_ref && t_ref > 0.0) {
                row.speedup = t_ref / row.t_med;
                row.speedup_vs = "ref (1 thread)";
            }
            qg_bench_emit(o, &row);
        }
    }
    (void)threads;
out:
    free(x);
    free(y);
    qg_spqr_layer_free(&t);
    return rc;
}

int qg_bench_cpu_spqr(const qg_bench_opts *o, int threads, double bw_read)
{
    /* bench.md's shapes (out x in); quick: one small shape */
    static const size_t full[][2] = {{4096, 4096}, {4096, 14336}, {14336, 4096}, {8192, 8192}, {28672, 8192}, {8192, 28672}};
    static const size_t quick[][2] = {{256, 4096}};
    size_t custom[16][2], cbatches[16], batches[16] = {1, 16};
    const size_t(*shapes)[2] = o->quick ? quick : full;
    size_t nshapes = o->quick ? 1 : sizeof full / sizeof full[0], nbatches = 2;
    const int ns = qg_bench_parse_shapes(o->shapes, custom, 16), nbt = qg_bench_parse_batches(o->batches, cbatches, 16);
    if (ns < 0 || nbt < 0) return 1;
    if (ns > 0) shapes = (const size_t(*)[2])custom, nshapes = (size_t)ns;
    if (nbt > 0) memcpy(batches, cbatches, sizeof cbatches), nbatches = (size_t)nbt;
    int rc = 0;
    qg_set_threads(threads);
    /* the comparison row: the reference and the kernels at batch 1 on a smaller shape */
    static const size_t one[] = {1};
    qg_bench_note(o, "spqr_ref_threads", "1");
    rc |= bench_shape(o, o->quick ? 64 : 1024, 4096, one, 1, 1, threads, bw_read);
    for (size_t si = 0; si < nshapes; si++) rc |= bench_shape(o, shapes[si][0], shapes[si][1], batches, nbatches, 0, threads, bw_read);
    qg_set_threads(0);
    return rc;
}
