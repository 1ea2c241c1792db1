/* qgold bench, the driver: checks the options, measures the reference bandwidths once, and runs the
 * halves of the --format's entry in the benchmark table (bench_formats.c). It names no format.
 *
 * CPU figures: BW_read is a multi-threaded streaming read (sum of 64-bit words) of a buffer far beyond
 * the last-level cache; kernels run on all threads over disjoint slices of an equally large buffer, so
 * their efficiency is bytes moved / time / BW_read. Each figure is the median of the repetitions, with
 * the spread (min, max) printed beside it.
 */
#include "bench.h"

#include "qgold/registry.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int why_ret(int rc, char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return rc;
}

int qg_bench_check(const qg_bench_opts *o, char *why, size_t len)
{
    size_t shapes[16][2], batches[16];
    const int ns = qg_bench_parse_shapes(o->shapes, shapes, 16), nb = qg_bench_parse_batches(o->batches, batches, 16);
    if (ns < 0)
        return why_ret(2, why, len, "--shapes takes RxK[,RxK...], at most 16 shapes, R and K in 1..%lu, got '%s'", QG_BENCH_MAX_DIM,
                       o->shapes);
    if (nb < 0)
        return why_ret(2, why, len, "--batches takes B[,B...], at most 16 batches, B in 1..%d, got '%s'", QG_BENCH_MAX_BATCH, o->batches);
    const qg_bench_format *bf = qg_bench_format_find(o->format);
    if (bf == NULL) return why_ret(2, why, len, "format %s has no benchmark (see qgold list)", o->format);
    for (int i = 0; i < nb; i++)
        if (batches[i] > bf->max_batch && bf->takes_shapes)
            return why_ret(2, why, len, "%s takes batches 1..%zu, got %zu", o->format, bf->max_batch, batches[i]);
    if (!bf->takes_shapes && (ns > 0 || nb > 0))
        return why_ret(2, why, len, "--shapes and --batches do not apply to %s (its conversions run over a fixed element count)",
                       o->format);
    for (int i = 0; i < ns; i++) {
        const char *rule = bf->shape_rule ? bf->shape_rule(o->format, shapes[i][0], shapes[i][1]) : NULL;
        if (rule) return why_ret(2, why, len, "%s shape %zux%zu: %s", o->format, shapes[i][0], shapes[i][1], rule);
    }
    if (o->backend < 0) return 0;
    const char *bn = qg_backend_name((qg_backend)o->backend);
    int rows = 0, built = 0, avail = 0;
    char reason[200] = "";
    for (size_t i = 0; i < qg_registry_count(); i++) {
        const qg_kernel *k = qg_registry_at(i);
        if (strcmp(k->format, o->format) != 0 || (int)k->backend != o->backend || !bf->measures(k)) continue;
        rows++;
        built += qg_kernel_built(k);
        if (qg_kernel_available(k, reason[0] ? NULL : reason, sizeof reason)) avail++;
    }
#if !QG_HAVE_CUDA
    if (o->backend == QG_BACKEND_CUDA) built = 0; /* the GPU half is not compiled in either */
#endif
    if (rows == 0) return why_ret(2, why, len, "format %s has no %s kernel to measure (see qgold list)", o->format, bn);
    if (built == 0) return why_ret(2, why, len, "backend %s is not built in this binary (see qgold list)", bn);
    if (avail == 0) return why_ret(1, why, len, "backend %s cannot run here: %s", bn, reason);
    return 0;
}


int qg_bench_run(const qg_bench_opts *o)
{
    const qg_bench_format *bf = qg_bench_format_find(o->format);
    if (bf == NULL) {
        fprintf(stderr, "qgold: format %s has no benchmark (see qgold list)\n", o->format);
        return 2;
    }
    int threads = o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    qg_atomic_file jf;
    if (qg_bench_session_begin(o, &jf)) return 1;
    int rc = 0;
    if (o->backend != QG_BACKEND_CUDA && bf->cpu != NULL) {
        const size_t bw_bytes = o->quick ? ((size_t)64 << 20) : ((size_t)1 << 30);
        const double bw = qg_bench_bw_read(o, threads, bw_bytes);
        if (bw <= 0) {
            rc = qg_bench_alloc_error(o->format, "bandwidth buffer", (double)bw_bytes);
        } else {
            qg_bench_note(o, "cpu_threads", "%d", threads);
            qg_bench_note(o, "BW_read_GBps", "%.2f", bw / 1e9);
            rc |= bf->cpu(o, threads, bw);
        }
    }
#if QG_HAVE_CUDA
    if ((o->backend < 0 || o->backend == QG_BACKEND_CUDA) && bf->gpu != NULL) {
        char why[200];
        double bw = 0;
        if (!qg_backend_available(QG_BACKEND_CUDA, why, sizeof why)) qg_bench_note(o, "gpu", "%s", why);
        else if (qg_bench_gpu_begin(o, &bw) != 0) rc = 1;
        else rc |= bf->gpu(o, bw);
    }
#endif
    if (rc == 0 && qg_bench_rows_emitted() == 0) {
        fprintf(stderr, "qgold: bench measured nothing: no %s kernel%s%s could run here (see qgold list)\n", o->format,
                o->backend >= 0 ? " of backend " : "", o->backend >= 0 ? qg_backend_name((qg_backend)o->backend) : "");
        rc = 1;
    }
    if (qg_bench_session_end(o, &jf, rc == 0)) rc = 1;
    return rc;
}
