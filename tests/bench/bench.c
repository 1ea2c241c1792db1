/* CPU half of qgold bench, the table/JSON emitter, and the driver.
 *
 * CPU figures: BW_read is a multi-threaded streaming read (sum of 64-bit words) of a buffer far beyond
 * the last-level cache; kernels run on all threads over disjoint slices of an equally large buffer, so
 * their efficiency is bytes moved / time / BW_read. Each figure is the median of the repetitions, with
 * the spread (min, max) printed beside it.
 */
#include "bench.h"

#include "atomic_write.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/threads.h"
#include "qgold/registry.h"
#include "qgold/rng.h"
#include "qgold/spqr.h"

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
static int g_json_rows, g_json_notes, g_nrows;
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
    g_nrows++;
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

/* Decimal digits only (no sign, no spaces), value 1..max; advances *p. */
static int parse_num(const char **p, size_t max, size_t *v)
{
    const char *s = *p;
    size_t n = 0;
    if (*s < '0' || *s > '9') return -1;
    for (; *s >= '0' && *s <= '9'; s++)
        if ((n = n * 10 + (size_t)(*s - '0')) > max) return -1;
    if (n == 0) return -1;
    *v = n;
    *p = s;
    return 0;
}

int qg_bench_parse_shapes(const char *spec, size_t (*out)[2], int max)
{
    int n = 0;
    if (spec == NULL) return 0;
    for (const char *p = spec;;) {
        size_t r, k;
        if (n >= max || parse_num(&p, QG_BENCH_MAX_DIM, &r) || *p++ != 'x' || parse_num(&p, QG_BENCH_MAX_DIM, &k)) return -1;
        out[n][0] = r;
        out[n][1] = k;
        n++;
        if (*p == '\0') return n;
        if (*p++ != ',') return -1;
    }
}

int qg_bench_parse_batches(const char *spec, size_t *out, int max)
{
    int n = 0;
    if (spec == NULL) return 0;
    for (const char *p = spec;;) {
        if (n >= max || parse_num(&p, 16, &out[n])) return -1;
        n++;
        if (*p == '\0') return n;
        if (*p++ != ',') return -1;
    }
}

static int why_ret(int rc, char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return rc;
}

/* The rule a shape of `format` breaks, or NULL (qgold bench --help lists the same rules). */
static const char *shape_rule(const char *format, size_t r, size_t k)
{
    if (qg_kq_from_name(format) >= 0 && k % QG_QK_K != 0) return "K (columns) must be a multiple of 256 (whole K-quant blocks)";
    if (strcmp(format, "spqr") == 0) {
        /* 2^24 rows: the limit of the layer generator the CPU half uses */
        if (r % QG_SPQR_TILE != 0 || r > ((size_t)1 << 24)) return "R (rows) must be a multiple of 16, at most 16777216";
        if (k > QG_SPQR_MAX_N) return "K (columns) must be at most 65536";
    }
    return NULL;
}

/* The rows the bench times (by format and backend); the K-quant dot exists on CPU backends only. */
static int measured(const qg_kernel *k)
{
    switch (k->kind) {
    case QG_KIND_CONVERT:
    case QG_KIND_KQ_GEMV:
    case QG_KIND_SPQR_GEMV:
    case QG_KIND_RANS_DECODE:
    case QG_KIND_RANS_GEMV:
    case QG_KIND_INT8_GEMV: return 1;
    case QG_KIND_KQ_DOT: return k->backend != QG_BACKEND_CUDA;
    default: return 0;
    }
}

int qg_bench_check(const qg_bench_opts *o, char *why, size_t len)
{
    size_t shapes[16][2], batches[16];
    const int ns = qg_bench_parse_shapes(o->shapes, shapes, 16), nb = qg_bench_parse_batches(o->batches, batches, 16);
    if (ns < 0)
        return why_ret(2, why, len, "--shapes takes RxK[,RxK...], at most 16 shapes, R and K in 1..%lu, got '%s'", QG_BENCH_MAX_DIM,
                       o->shapes);
    if (nb < 0) return why_ret(2, why, len, "--batches takes B[,B...], at most 16 batches, B in 1..16, got '%s'", o->batches);
    const int gemv = qg_kq_from_name(o->format) >= 0 || !strcmp(o->format, "spqr") || !strcmp(o->format, "rans");
    if (!gemv && (ns > 0 || nb > 0))
        return why_ret(2, why, len, "--shapes and --batches do not apply to %s (its conversions run over a fixed element count)",
                       o->format);
    for (int i = 0; i < ns; i++) {
        const char *rule = shape_rule(o->format, shapes[i][0], shapes[i][1]);
        if (rule) return why_ret(2, why, len, "%s shape %zux%zu: %s", o->format, shapes[i][0], shapes[i][1], rule);
    }
    if (o->backend < 0) return 0;
    const char *bn = qg_backend_name((qg_backend)o->backend);
    int rows = 0, built = 0, avail = 0;
    char reason[200] = "";
    for (size_t i = 0; i < qg_registry_count(); i++) {
        const qg_kernel *k = qg_registry_at(i);
        if (strcmp(k->format, o->format) != 0 || (int)k->backend != o->backend || !measured(k)) continue;
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

/* The message of a failed allocation: what, for which shape, how many bytes. Returns 1. */
int qg_bench_alloc_error(const char *label, const char *what, double bytes)
{
    fprintf(stderr, "qgold: bench %s: cannot allocate the %s: %.0f bytes\n", label, what, bytes);
    return 1;
}

/* Streaming read bandwidth, bytes/s; 0 when the buffer cannot be allocated. */
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
        return qg_bench_alloc_error(o->format, "conversion buffers", 2.0 * (double)n * 4.0);
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

/* Random bytes are valid blocks; scale fields set to ordinary values (see the GPU half). */
static void fill_kq(qg_ktype t, uint8_t *w, size_t nbytes, qg_rng *r)
{
    const size_t bb = qg_kq_block_bytes(t);
    for (size_t i = 0; i < nbytes; i++) w[i] = (uint8_t)qg_rng_bits32(r);
    for (size_t b = 0; b < nbytes / bb; b++) {
        uint8_t *blk = w + b * bb;
        if (t == QG_Q6_K) blk[208] = 0x00, blk[209] = 0x1C;
        else if (t == QG_Q8_K) memset(blk, 0, 3), blk[3] = 0x3C;
        else blk[0] = 0x00, blk[1] = 0x1C, blk[2] = 0x00, blk[3] = 0x18;
    }
}

/* One core, in cache: 64 rows x 4096 (about 150 KB of Q4_K), batch 1, in ns per 32 weights, on its own
 * buffers whatever the measured shapes are. */
enum { ONE_ROWS = 64, ONE_COLS = 4096 };

static int one_core_kq(const qg_bench_opts *o, qg_ktype t, int threads)
{
    const size_t row_bytes = ONE_COLS / QG_QK_K * qg_kq_block_bytes(t), q8_bytes = ONE_COLS / QG_QK_K * qg_kq_block_bytes(QG_Q8_K);
    uint8_t *w = malloc(ONE_ROWS * row_bytes), *q8 = malloc(q8_bytes);
    uint16_t *x = malloc(ONE_COLS * sizeof *x);
    float *xf = malloc(ONE_COLS * sizeof *xf), *y = malloc(ONE_ROWS * sizeof *y);
    int rc = 0;
    if (!w || !q8 || !x || !xf || !y) {
        rc = qg_bench_alloc_error(o->format, "one-core buffers (64x4096)", (double)(ONE_ROWS * row_bytes + q8_bytes + ONE_COLS * 6 + 256));
        goto out;
    }
    qg_rng r;
    qg_rng_init(&r, 2027);
    fill_kq(t, w, ONE_ROWS * row_bytes, &r);
    for (size_t i = 0; i < ONE_COLS; i++) x[i] = qg_f32_to_f16(qg_rng_uniform(&r, -1.0f, 1.0f));
    for (size_t i = 0; i < ONE_COLS; i++) xf[i] = qg_f16_to_f32(x[i]);
    qg_kq_quantize_ref(QG_Q8_K, xf, 1, ONE_COLS, q8, q8_bytes);
    const double per32 = 1e9 / ((double)ONE_ROWS * ONE_COLS / 32.0);
    qg_set_threads(1);
    for (size_t i = 0; i < qg_registry_count(); i++) {
        const qg_kernel *k = qg_registry_at(i);
        if (strcmp(k->format, o->format) || k->backend == QG_BACKEND_CUDA || !qg_kernel_available(k, NULL, 0)) continue;
        if (o->backend >= 0 && (int)k->backend != o->backend) continue;
        const int ref = k->backend == QG_BACKEND_REF;
        if (k->kind == QG_KIND_KQ_DOT) {
            kq_dot_ctx c = {k, t, w, q8, row_bytes, ONE_COLS, y};
            double tm[64];
            for (int rep = -1; rep < o->reps; rep++) {
                double t0 = qg_now();
                kq_dot_slice(&c, 0, ONE_ROWS);
                if (rep >= 0) tm[rep] = qg_now() - t0;
            }
            qg_bench_note(o, ref ? "one_core_in_cache_ns_per_32w_dot_ref" : "one_core_in_cache_ns_per_32w_dot_simd", "%.3f (%s)",
                          qg_bench_median(tm, o->reps, NULL, NULL) * per32, k->name);
        } else if (k->kind == QG_KIND_KQ_GEMV) {
            kq_cpu_ctx c = {k, t, w, row_bytes, ONE_COLS, 1, x, y};
            double lo, hi;
            const double tm = time_kq_cpu(o, &c, ONE_ROWS, 1, &lo, &hi);
            qg_bench_note(o, ref ? "one_core_in_cache_ns_per_32w_ref" : "one_core_in_cache_ns_per_32w_simd", "%.3f (%s)", tm * per32,
                          k->name);
        }
    }
    qg_set_threads(threads);
out:
    free(w);
    free(q8);
    free(x);
    free(xf);
    free(y);
    return rc;
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
    if (ns < 0 || nbt < 0) return 1;
    if (ns > 0) shapes = (const size_t(*)[2])custom, nshapes = (size_t)ns;
    if (nbt > 0) memcpy(batches, cbatches, sizeof cbatches), nbatches = (size_t)nbt;
    qg_set_threads(threads);
    int rc = 0;
    for (size_t si = 0; si < nshapes && rc == 0; si++) {
        const size_t rows = shapes[si][0], cols = shapes[si][1], row_bytes = cols / QG_QK_K * bb;
        const size_t q8_bytes = cols / QG_QK_K * qg_kq_block_bytes(QG_Q8_K);
        char label[80];
        snprintf(label, sizeof label, "%s %zux%zu", o->format, rows, cols);
        /* The dimensions are at most 2^31 - 1 (qg_bench_check), so no size below overflows. */
        uint8_t *w = malloc(rows * row_bytes), *q8 = malloc(q8_bytes);
        uint16_t *x = malloc(cols * 16 * 2);
        float *y = malloc(rows * 16 * 4), *xf = malloc(cols * sizeof(float));
        if (!w || !x || !y || !xf || !q8) {
            rc = qg_bench_alloc_error(label, "weights and vectors",
                                      (double)rows * row_bytes + (double)q8_bytes + (double)cols * 36 + (double)rows * 64);
            goto next;
        }
        qg_rng r;
        qg_rng_init(&r, 2026);
        fill_kq(t, w, rows * row_bytes, &r);
        for (size_t i = 0; i < cols * 16; i++) x[i] = qg_f32_to_f16(qg_rng_uniform(&r, -1.0f, 1.0f));
        /* ggml-style: Q8_K activations and the integer dot, rows across threads */
        if (t != QG_Q8_K) {
            for (size_t k = 0; k < cols; k++) xf[k] = qg_f16_to_f32(x[k]);
            qg_kq_quantize_ref(QG_Q8_K, xf, 1, cols, q8, q8_bytes);
            for (size_t i = 0; i < qg_registry_count(); i++) {
                const qg_kernel *k = qg_registry_at(i);
                if (strcmp(k->format, o->format) || k->kind != QG_KIND_KQ_DOT || !qg_kernel_available(k, NULL, 0)) continue;
                if (o->backend >= 0 && (int)k->backend != o->backend) continue;
                kq_dot_ctx c = {k, t, w, q8, row_bytes, cols, y};
                double tm[64];
                for (int rep = -1; rep < o->reps; rep++) {
                    double t0 = qg_now();
                    parallel_for(threads, rows, kq_dot_slice, &c);
                    if (rep >= 0) tm[rep] = qg_now() - t0;
                }
                qg_bench_row row = {k->format, "dot_q8k", qg_backend_name(k->backend), "", 1, 0, 0, 0, 0, 0, "BW_read", 0, ""};
                snprintf(row.shape, sizeof row.shape, "%zux%zu", rows, cols);
                row.t_med = qg_bench_median(tm, o->reps, &row.t_lo, &row.t_hi);
                row.bytes = (double)(rows * row_bytes) + (double)q8_bytes + (double)(rows * 4);
                row.eff = row.bytes / row.t_med / bw_read;
                qg_bench_emit(o, &row);
            }
        }
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
        }
    next:
        free(w);
        free(q8);
        free(x);
        free(xf);
        free(y);
    }
    if (rc == 0) rc = one_core_kq(o, t, threads);
    qg_set_threads(0);
    return rc;
}

/* The JSON document replaces o->json only after a run that measured something and failed nowhere;
 * the temporary file is created before the run, so an unwritable path fails first. */
static int json_finish(const qg_bench_opts *o, qg_atomic_file *f, int ok)
{
    if (!ok) {
        qg_atomic_abort(f);
        fprintf(stderr, "qgold: %s not written (the run failed or measured nothing); a previous file there is unchanged\n", o->json);
        return 1;
    }
    fprintf(f->fp, "{\n  \"format\": \"%s\",\n  \"quick\": %d,\n  \"reps\": %d,\n  \"notes\": {%s\n  },\n  \"rows\": [%s\n  ]\n}\n",
            o->format, o->quick, o->reps, g_notes_buf ? g_notes_buf : "", g_rows_buf ? g_rows_buf : "");
    const int e = qg_atomic_commit(f);
    if (e != 0) fprintf(stderr, "qgold: %s: cannot write %s: %s\n", qg_error_name(QG_ERR_io_failed), o->json, strerror(e));
    return e != 0;
}

int qg_bench_run(const qg_bench_opts *o)
{
    int threads = o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    qg_atomic_file jf;
    g_nrows = g_json_rows = g_json_notes = 0;
    if (o->json) {
        const int e = qg_atomic_open(&jf, o->json);
        if (e != 0) {
            fprintf(stderr, "qgold: %s: cannot write %s: %s\n", qg_error_name(QG_ERR_io_failed), o->json, strerror(e));
            return 1;
        }
        g_rows = open_memstream(&g_rows_buf, &g_rows_len);
        g_notes = open_memstream(&g_notes_buf, &g_notes_len);
    }
    printf("%-6s %-12s %-6s %-16s %5s %10s %10s %10s %8s %6s %-7s %8s\n", "format", "path", "backend", "shape", "batch", "t_med_ms",
           "t_min_ms", "t_max_ms", "GB/s", "eff", "vs", "speedup");
    int rc = 0;
    int want_cpu = o->backend < 0 || o->backend != QG_BACKEND_CUDA;
    if (want_cpu) {
        const size_t bw_bytes = o->quick ? ((size_t)64 << 20) : ((size_t)1 << 30);
        double bw = measure_bw_read(o, threads, bw_bytes);
        if (bw <= 0) {
            rc = qg_bench_alloc_error(o->format, "bandwidth buffer", (double)bw_bytes);
        } else {
            qg_bench_note(o, "cpu_threads", "%d", threads);
            qg_bench_note(o, "BW_read_GBps", "%.2f", bw / 1e9);
            if (qg_kq_from_name(o->format) >= 0) rc |= bench_cpu_kq(o, threads, bw);
            else if (!strcmp(o->format, "spqr")) rc |= qg_bench_cpu_spqr(o, threads, bw);
            else if (!strcmp(o->format, "rans")) rc |= qg_bench_cpu_rans(o, threads, bw);
            else rc |= bench_cpu_convert(o, threads, bw);
        }
    }
#if QG_HAVE_CUDA
    if (o->backend < 0 || o->backend == QG_BACKEND_CUDA) {
        char why[200];
        if (qg_backend_available(QG_BACKEND_CUDA, why, sizeof why)) rc |= qg_bench_gpu(o);
        else qg_bench_note(o, "gpu", "%s", why);
    }
#endif
    if (rc == 0 && g_nrows == 0) {
        fprintf(stderr, "qgold: bench measured nothing: no %s kernel%s%s could run here (see qgold list)\n", o->format,
                o->backend >= 0 ? " of backend " : "", o->backend >= 0 ? qg_backend_name((qg_backend)o->backend) : "");
        rc = 1;
    }
    if (g_rows) fclose(g_rows);
    if (g_notes) fclose(g_notes);
    g_rows = g_notes = NULL;
    if (o->json && json_finish(o, &jf, rc == 0)) rc = 1;
    free(g_rows_buf);
    free(g_notes_buf);
    g_rows_buf = g_notes_buf = NULL;
    return rc;
}
