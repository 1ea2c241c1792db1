/* CPU half of qgold bench, the table/JSON emitter, and the driver.
 *
 * CPU figures: BW_read is a multi-threaded streaming read (sum of 64-bit words) of a buffer far beyond
 * the last-level cache; kernels run on all threads over disjoint slices of an equally large buffer, so
 * their efficiency is bytes moved / time / BW_read. Each figure is the median of the repetitions, with
 * the spread (min, max) printed beside it.
 */
#include "bench.h"

#include "qgold/fp16.h"
#include "qgold/kernels_kquants.h"
#include "qgold/registry.h"
#include "qgold/rng.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double qg_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double qg_bench_median(double *v, int n, double *lo, double *hi)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    if (lo) *lo = v[0];
    if (hi) *hi = v[n - 1];
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* JSON pieces are collected and written at the end: {"format", "notes": {...}, "rows": [...]}. */
static int g_json_rows, g_json_notes;
static char *g_rows_buf, *g_notes_buf;
static size_t g_rows_len, g_notes_len;
static FILE *g_rows, *g_notes;

void qg_bench_note(const qg_bench_opts *o, const char *key, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    printf("# %s: %s\n", key, buf);
    if (o->json && g_notes) fprintf(g_notes, "%s\n    \"%s\": \"%s\"", g_json_notes++ ? "," : "", key, buf);
}

void qg_bench_emit(const qg_bench_opts *o, const qg_bench_row *r)
{
    char sp[32] = "-";
    if (r->speedup > 0) snprintf(sp, sizeof sp, "%.2fx", r->speedup);
    printf("%-6s %-12s %-6s %-16s %5d %10.4f %10.4f %10.4f %8.1f %6.3f %-7s %8s %s\n", r->format, r->path, r->backend, r->shape,
           r->batch, 1e3 * r->t_med, 1e3 * r->t_lo, 1e3 * r->t_hi, r->bytes / r->t_med / 1e9, r->eff, r->eff_vs, sp,
           r->speedup > 0 ? r->speedup_vs : "");
    fflush(stdout);
    if (o->json && g_rows) {
        fprintf(g_rows, "%s\n", g_json_rows++ ? "," : "");
        fprintf(g_rows,
                "    {\"format\": \"%s\", \"path\": \"%s\", \"backend\": \"%s\", \"shape\": \"%s\", \"batch\": %d, "
                "\"t_median_ms\": %.6f, \"t_min_ms\": %.6f, \"t_max_ms\": %.6f, \"bytes\": %.0f, \"GBps\": %.3f, "
                "\"eff\": %.4f, \"eff_vs\": \"%s\", \"speedup\": %.4f, \"speedup_vs\": \"%s\"}",
                r->format, r->path, r->backend, r->shape, r->batch, 1e3 * r->t_med, 1e3 * r->t_lo, 1e3 * r->t_hi, r->bytes,
                r->bytes / r->t_med / 1e9, r->eff, r->eff_vs, r->speedup, r->speedup_vs ? r->speedup_vs : "");
    }
}

int qg_bench_parse_shapes(const char *spec, size_t (*out)[2], int max)
{
    int n = 0;
    if (spec == NULL) return 0;
    for (const char *p = spec; *p;) {
        char *end;
        unsigned long r = strtoul(p, &end, 10);
        if (end == p || *end != 'x' || n >= max) return -1;
        p = end + 1;
        unsigned long k = strtoul(p, &end, 10);
        if (end == p || r == 0 || k == 0 || (*end != ',' && *end != '\0')) return -1;
        out[n][0] = r;
        out[n][1] = k;
        n++;
        p = *end ? end + 1 : end;
    }
    return n;
}

int qg_bench_parse_batches(const char *spec, size_t *out, int max)
{
    int n = 0;
    if (spec == NULL) return 0;
    for (const char *p = spec; *p;) {
        char *end;
        unsigned long b = strtoul(p, &end, 10);
        if (end == p || b < 1 || b > 16 || n >= max || (*end != ',' && *end != '\0')) return -1;
        out[n++] = b;
        p = *end ? end + 1 : end;
    }
    return n;
}

/* ---- threads ---- */
typedef struct {
    void (*fn)(void *ctx, size_t lo, size_t hi);
    void *ctx;
    size_t lo, hi;
} slice_job;

static void *run_slice(void *p)
{
    slice_job *j = p;
    j->fn(j->ctx, j->lo, j->hi);
    return NULL;
}

/* Runs fn over [0, n) split into `threads` contiguous slices (aligned to 64 elements). */
static void parallel_for(int threads, size_t n, void (*fn)(void *, size_t, size_t), void *ctx)
{
    pthread_t tid[256];
    slice_job jobs[256];
    if (threads > 256) threads = 256;
    size_t per = ((n / (size_t)threads) + 63) & ~(size_t)63;
    int started = 0;
    for (int t = 0; t < threads; t++) {
        size_t lo = (size_t)t * per, hi = lo + per < n ? lo + per : n;
        if (lo >= n) break;
        jobs[t] = (slice_job){fn, ctx, lo, hi};
        if (pthread_create(&tid[t], NULL, run_slice, &jobs[t]) != 0) {
            run_slice(&jobs[t]);
            tid[t] = 0;
        }
        started = t + 1;
    }
    for (int t = 0; t < started; t++)
        if (tid[t]) pthread_join(tid[t], NULL);
}

typedef struct {
    const uint64_t *buf;
    uint64_t sums[256];
    size_t per;
} read_ctx;

static void read_slice(void *vctx, size_t lo, size_t hi)
{
    read_ctx *c = vctx;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = lo;
    for (; i + 4 <= hi; i += 4) {
        s0 += c->buf[i];
        s1 += c->buf[i + 1];
        s2 += c->buf[i + 2];
        s3 += c->buf[i + 3];
    }
    for (; i < hi; i++) s0 += c->buf[i];
    c->sums[(lo / c->per) & 255] = s0 + s1 + s2 + s3;
}

/* Streaming read bandwidth, bytes/s. */
static double measure_bw_read(const qg_bench_opts *o, int threads, size_t bytes)
{
    size_t n = bytes / 8;
    uint64_t *buf = malloc(n * 8);
    if (buf == NULL) return 0;
    for (size_t i = 0; i < n; i++) buf[i] = i;
    read_ctx c = {buf, {0}, ((n / (size_t)threads) + 63) & ~(size_t)63};
    double t[64];
    int reps = o->reps;
    read_slice(&c, 0, n); /* warm */
    for (int r = 0; r < reps; r++) {
        double t0 = qg_now();
        parallel_for(threads, n, read_slice, &c);
        t[r] = qg_now() - t0;
    }
    free(buf);
    double med = qg_bench_median(t, reps, NULL, NULL);
    return (double)(n * 8) / med;
}

typedef struct {
    const qg_kernel *k;
    const unsigned char *x;
    unsigned char *y;
} conv_ctx;

static void conv_slice(void *vctx, size_t lo, size_t hi)
{
    conv_ctx *c = vctx;
    c->k->fn.convert(c->x + lo * qg_elem_size(c->k->in_elem), c->y + lo * qg_elem_size(c->k->out_elem), hi - lo);
}

static int bench_cpu_convert(const qg_bench_opts *o, int threads, double bw_read)
{
    size_t n = o->quick ? ((size_t)1 << 22) : ((size_t)1 << 27);
    unsigned char *x = malloc(n * 4), *y = malloc(n * 4);
    if (!x || !y) {
        free(x);
        free(y);
        return 1;
    }
    for (size_t i = 0; i < n * 4; i++) x[i] = (unsigned char)(i * 2654435761u >> 13);
    memset(y, 0, n * 4);
    for (size_t i = 0; i < qg_registry_count(); i++) {
        const qg_kernel *k = qg_registry_at(i);
        if (strcmp(k->format, o->format) != 0 || k->backend == QG_BACKEND_CUDA || k->kind != QG_KIND_CONVERT) continue;
        if (o->backend >= 0 && (int)k->backend != o->backend) continue;
        if (!qg_kernel_available(k, NULL, 0)) continue;
        conv_ctx c = {k, x, y};
        double t[64], lo, hi;
        parallel_for(threads, n, conv_slice, &c); /* warm */
        for (int r = 0; r < o->reps; r++) {
            double t0 = qg_now();
            parallel_for(threads, n, conv_slice, &c);
            t[r] = qg_now() - t0;
        }
        qg_bench_row row = {k->format, k->path, qg_backend_name(k->backend), "", 1, 0, 0, 0, 0, 0, "BW_read", 0, ""};
        snprintf(row.shape, sizeof row.shape, "%zu", n);
        row.t_med = qg_bench_median(t, o->reps, &lo, &hi);
        row.t_lo = lo;
        row.t_hi = hi;
        row.bytes = (double)n * (double)(qg_elem_size(k->in_elem) + qg_elem_size(k->out_elem));
        row.eff = row.bytes / row.t_med / bw_read;
        qg_bench_emit(o, &row);
    }
    free(x);
    free(y);
    return 0;
}

/* ---- K-quant GEMV on the CPU ---- */

typedef struct {
    const qg_kernel *k;
    qg_ktype t;
    const uint8_t *w;
    size_t row_bytes, cols, batch;
    const uint16_t *x;
    float *y;
} kq_cpu_ctx;

/* The reference is single-threaded: the harness gives each thread a slice of rows (rows are
 * independent; the slice's outputs land in a per-slice layout, which costs nothing to time). */
static void kq_ref_slice(void *vctx, size_t lo, size_t hi)
{
    kq_cpu_ctx *c = vctx;
    c->k->fn.kq_gemv(c->t, c->w + lo * c->row_bytes, (hi - lo) * c->row_bytes, hi - lo, c->cols, c->x, c->batch, c->y + lo * c->batch,
                     NULL);
}

static double time_kq_cpu(const qg_bench_opts *o, kq_cpu_ctx *c, size_t rows, int threads, double *lo, double *hi)
{
    double t[64];
    for (int r = -1; r < o->reps; r++) { /* r = -1 warms up */
        double t0 = qg_now();
        if (c->k->backend == QG_BACKEND_REF) parallel_for(threads, rows, kq_ref_slice, c);
        else c->k->fn.kq_gemv(c->t, c->w, rows * c->row_bytes, rows, c->cols, c->x, c->batch, c->y, NULL);
        if (r >= 0) t[r] = qg_now() - t0;
    }
    return qg_bench_median(t, o->reps, lo, hi);
}

/* GEMV the way ggml runs it on CPUs: activations quantized once to Q8_K (not timed), then one integer
 * dot per row, rows split across threads. */
typedef struct {
    const qg_kernel *k;
    qg_ktype t;
    const uint8_t *w, *q8;
    size_t row_bytes, cols;
    float *y;
} kq_dot_ctx;

static void kq_dot_slice(void *vctx, size_t lo, size_t hi)
{
    kq_dot_ctx *c = vctx;
    for (size_t r = lo; r < hi; r++) c->k->fn.kq_dot(c->t, c->w + r * c->row_bytes, c->q8, c->cols, NULL, NULL, &c->y[r]);
}

static int bench_cpu_kq(const qg_bench_opts *o, int threads, double bw_read)
{
    const qg_ktype t = (qg_ktype)qg_kq_from_name(o->format);
    const size_t bb = qg_kq_block_bytes(t);
    static const size_t full[][2] = {{4096, 14336}, {14336, 4096}}, quick[][2] = {{256, 4096}};
    size_t custom[16][2], cbatches[16], batches[16] = {1, 16};
    const size_t (*shapes)[2] = o->quick ? quick : full;
    size_t nshapes = o->quick ? 1 : 2, nbatches = 2;
    int ns = qg_bench_parse_shapes(o->shapes, custom, 16), nbt = qg_bench_parse_batches(o->batches, cbatches, 16);
    if (ns > 0) shapes = (const size_t(*)[2])custom, nshapes = (size_t)ns;
    if (nbt > 0) memcpy(batches, cbatches, sizeof cbatches), nbatches = (size_t)nbt;
    qg_set_threads(threads);
    for (size_t si = 0; si < nshapes; si++) {
        const size_t rows = shapes[si][0], cols = shapes[si][1], row_bytes = cols / QG_QK_K * bb;
        uint8_t *w = malloc(rows * row_bytes);
        uint16_t *x = malloc(cols * 16 * 2);
        float *y = malloc(rows * 16 * 4 + 64 * 4096 * 4);
        if (!w || !x || !y) return 1;
        /* Random bytes are valid blocks; scale fields set to ordinary values (see the GPU half). */
        qg_rng r;
        qg_rng_init(&r, 2026);
        for (size_t i = 0; i < rows * row_bytes; i++) w[i] = (uint8_t)qg_rng_bits32(&r);
        for (size_t b = 0; b < rows * row_bytes / bb; b++) {
            uint8_t *blk = w + b * bb;
            if (t == QG_Q6_K) blk[208] = 0x00, blk[209] = 0x1C;
            else if (t == QG_Q8_K) memset(blk, 0, 3), blk[3] = 0x3C;
            else blk[0] = 0x00, blk[1] = 0x1C, blk[2] = 0x00, blk[3] = 0x18;
        }
        for (size_t i = 0; i < cols * 16; i++) x[i] = qg_f32_to_f16(qg_rng_uniform(&r, -1.0f, 1.0f));
        /* ggml-style: Q8_K activations and the integer dot, rows across threads */
        float *xf = malloc(cols * sizeof(float));
        uint8_t *q8 = malloc(cols / QG_QK_K * qg_kq_block_bytes(QG_Q8_K));
        if (xf && q8 && t != QG_Q8_K) {
            for (size_t k = 0; k < cols; k++) xf[k] = qg_f16_to_f32(x[k]);
            qg_kq_quantize_ref(QG_Q8_K, xf, 1, cols, q8, cols / QG_QK_K * qg_kq_block_bytes(QG_Q8_K));
            for (size_t i = 0; i < qg_registry_count(); i++) {
                const qg_kernel *k = qg_registry_at(i);
                if (strcmp(k->format, o->format) || k->kind != QG_KIND_KQ_DOT || !qg_kernel_available(k, NULL, 0)) continue;
                if (o->backend >= 0 && (int)k->backend != o->backend) continue;
                kq_dot_ctx c = {k, t, w, q8, row_bytes, cols, y};
                double tm[64];
                for (int r = -1; r < o->reps; r++) {
                    double t0 = qg_now();
                    parallel_for(threads, rows, kq_dot_slice, &c);
                    if (r >= 0) tm[r] = qg_now() - t0;
                }
                qg_bench_row row = {k->format, "dot_q8k", qg_backend_name(k->backend), "", 1, 0, 0, 0, 0, 0, "BW_read", 0, ""};
                snprintf(row.shape, sizeof row.shape, "%zux%zu", rows, cols);
                row.t_med = qg_bench_median(tm, o->reps, &row.t_lo, &row.t_hi);
                row.bytes = (double)(rows * row_bytes) + (double)(cols / QG_QK_K * qg_kq_block_bytes(QG_Q8_K)) + (double)(rows * 4);
                row.eff = row.bytes / row.t_med / bw_read;
                qg_bench_emit(o, &row);
                /* one core, in cache, ns per 32 weights */
                kq_dot_ctx c1 = {k, t, w, q8, 4096 / QG_QK_K * bb, 4096, y};
                double t1[64];
                for (int r = -1; r < o->reps; r++) {
                    double t0 = qg_now();
                    kq_dot_slice(&c1, 0, 64);
                    if (r >= 0) t1[r] = qg_now() - t0;
                }
                qg_bench_note(o, k->backend == QG_BACKEND_REF ? "one_core_in_cache_ns_per_32w_dot_ref" : "one_core_in_cache_ns_per_32w_dot_simd",
                              "%.3f (%s)", qg_bench_median(t1, o->reps, NULL, NULL) * 1e9 / (64.0 * 4096.0 / 32.0), k->name);
            }
        }
        free(xf);
        free(q8);
        for (size_t i = 0; i < qg_registry_count(); i++) {
            const qg_kernel *k = qg_registry_at(i);
            if (strcmp(k->format, o->format) || k->kind != QG_KIND_KQ_GEMV || k->backend == QG_BACKEND_CUDA) continue;
            if ((o->backend >= 0 && (int)k->backend != o->backend) || !qg_kernel_available(k, NULL, 0)) continue;
            for (size_t bi = 0; bi < nbatches; bi++) {
                kq_cpu_ctx c = {k, t, w, row_bytes, cols, batches[bi], x, y};
                qg_bench_row row = {k->format, "gemv", qg_backend_name(k->backend), "", (int)batches[bi], 0, 0, 0, 0, 0, "BW_read", 0, ""};
                snprintf(row.shape, sizeof row.shape, "%zux%zu", rows, cols);
                row.t_med = time_kq_cpu(o, &c, rows, threads, &row.t_lo, &row.t_hi);
                row.bytes = (double)(rows * row_bytes) + (double)(cols * batches[bi] * 2) + (double)(rows * batches[bi] * 4);
                row.eff = row.bytes / row.t_med / bw_read;
                qg_bench_emit(o, &row);
            }
            /* One core, in cache: 64 rows x 4096 (about 150 KB of Q4_K), batch 1, in ns per 32 weights. */
            {
                kq_cpu_ctx c = {k, t, w, 4096 / QG_QK_K * bb, 4096, 1, x, y};
                double lo, hi;
                qg_set_threads(1);
                double tm = time_kq_cpu(o, &c, 64, 1, &lo, &hi);
                qg_set_threads(threads);
                qg_bench_note(o, k->backend == QG_BACKEND_REF ? "one_core_in_cache_ns_per_32w_ref" : "one_core_in_cache_ns_per_32w_simd",
                              "%.3f (%s)", tm * 1e9 / (64.0 * 4096.0 / 32.0), k->name);
            }
        }
        free(w);
        free(x);
        free(y);
    }
    qg_set_threads(0);
    return 0;
}

int qg_bench_run(const qg_bench_opts *o)
{
    int threads = o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    if (o->json) {
        g_rows = open_memstream(&g_rows_buf, &g_rows_len);
        g_notes = open_memstream(&g_notes_buf, &g_notes_len);
    }
    printf("%-6s %-12s %-6s %-16s %5s %10s %10s %10s %8s %6s %-7s %8s\n", "format", "path", "backend", "shape", "batch", "t_med_ms",
           "t_min_ms", "t_max_ms", "GB/s", "eff", "vs", "speedup");
    int rc = 0;
    int want_cpu = o->backend < 0 || o->backend != QG_BACKEND_CUDA;
    if (want_cpu) {
        double bw = measure_bw_read(o, threads, o->quick ? ((size_t)64 << 20) : ((size_t)1 << 30));
        qg_bench_note(o, "cpu_threads", "%d", threads);
        qg_bench_note(o, "BW_read_GBps", "%.2f", bw / 1e9);
        if (qg_kq_from_name(o->format) >= 0) rc |= bench_cpu_kq(o, threads, bw);
        else if (!strcmp(o->format, "spqr")) rc |= qg_bench_cpu_spqr(o, threads, bw);
        else if (!strcmp(o->format, "rans")) rc |= qg_bench_cpu_rans(o, threads, bw);
        else rc |= bench_cpu_convert(o, threads, bw);
    }
#if QG_HAVE_CUDA
    if (o->backend < 0 || o->backend == QG_BACKEND_CUDA) {
        char why[200];
        if (qg_backend_available(QG_BACKEND_CUDA, why, sizeof why)) rc |= qg_bench_gpu(o);
        else qg_bench_note(o, "gpu", "%s", why);
    }
#endif
    if (o->json && g_rows && g_notes) {
        fclose(g_rows);
        fclose(g_notes);
        fprintf(o->json, "{\n  \"format\": \"%s\",\n  \"quick\": %d,\n  \"reps\": %d,\n  \"notes\": {%s\n  },\n  \"rows\": [%s\n  ]\n}\n",
                o->format, o->quick, o->reps, g_notes_buf, g_rows_buf);
        free(g_rows_buf);
        free(g_notes_buf);
        g_rows = g_notes = NULL;
    }
    return rc;
}
