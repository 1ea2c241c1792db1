/* What every format's benchmark shares: the clock, medians, the row table and its JSON, option lists,
 * the CPU thread slices and the streaming-read bandwidth BW_read. Names no format. */
#include "bench.h"

#include "atomic_write.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/registry.h"
#include "qgold/rng.h"
#include "qgold/threads.h"

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

int qg_bench_emit_cpu(const qg_bench_opts *o, qg_bench_row *r, double bw, const char *label, const char *kernel, size_t batch,
                      int err)
{
    if (r->t_med < 0) {
        fprintf(stderr, "qgold: bench %s: %s (batch %zu) failed: %s\n", label, kernel, batch, qg_error_name(err));
        return 1;
    }
    r->eff = r->bytes / r->t_med / bw;
    qg_bench_emit(o, r);
    return 0;
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
        if (n >= max || parse_num(&p, QG_BENCH_MAX_BATCH, &out[n])) return -1;
        n++;
        if (*p == '\0') return n;
        if (*p++ != ',') return -1;
    }
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
void qg_bench_parallel_for(int threads, size_t n, void (*fn)(void *, size_t, size_t), void *ctx)
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
double qg_bench_bw_read(const qg_bench_opts *o, int threads, size_t bytes)
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
        qg_bench_parallel_for(threads, n, read_slice, &c);
        t[r] = qg_now() - t0;
    }
    free(buf);
    double med = qg_bench_median(t, reps, NULL, NULL);
    return (double)(n * 8) / med;
}

/* The JSON document replaces o->json only after a run that measured something and failed nowhere;
 * the temporary file is created before the run, so an unwritable path fails first. */
static int qg_bench_json_finish(const qg_bench_opts *o, qg_atomic_file *f, int ok)
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


int qg_bench_session_begin(const qg_bench_opts *o, qg_atomic_file *jf)
{
    g_nrows = g_json_rows = g_json_notes = 0;
    if (o->json) {
        const int e = qg_atomic_open(jf, o->json);
        if (e != 0) {
            fprintf(stderr, "qgold: %s: cannot write %s: %s\n", qg_error_name(QG_ERR_io_failed), o->json, strerror(e));
            return 1;
        }
        g_rows = open_memstream(&g_rows_buf, &g_rows_len);
        g_notes = open_memstream(&g_notes_buf, &g_notes_len);
    }
    printf("%-6s %-12s %-6s %-16s %5s %10s %10s %10s %8s %6s %-7s %8s\n", "format", "path", "backend", "shape", "batch", "t_med_ms",
           "t_min_ms", "t_max_ms", "GB/s", "eff", "vs", "speedup");
    return 0;
}

int qg_bench_rows_emitted(void) { return g_nrows; }

int qg_bench_session_end(const qg_bench_opts *o, qg_atomic_file *jf, int ok)
{
    if (g_rows) fclose(g_rows);
    if (g_notes) fclose(g_notes);
    g_rows = g_notes = NULL;
    int rc = o->json ? qg_bench_json_finish(o, jf, ok) : 0;
    free(g_rows_buf);
    free(g_notes_buf);
    g_rows_buf = g_notes_buf = NULL;
    return rc;
}

double qg_bench_time_pass(const qg_bench_opts *o, int split, int threads, size_t n, void (*slice)(void *, size_t, size_t),
                          void *ctx, double *lo, double *hi)
{
    double t[64];
    for (int r = -1; r < o->reps; r++) {
        const double t0 = qg_now();
        if (split) qg_bench_parallel_for(threads, n, slice, ctx);
        else slice(ctx, 0, n);
        if (r >= 0) t[r] = qg_now() - t0;
    }
    return qg_bench_median(t, o->reps, lo, hi);
}

int qg_bench_batch_skipped(const char *label, const qg_kernel *k, size_t B, size_t max)
{
    if (B <= max) return 0;
    if (k != NULL)
        printf("# skip: %s %s %s batch %zu: this path takes batches 1..%zu\n", label, k->path, qg_backend_name(k->backend), B, max);
    else
        printf("# skip: %s batch %zu: this path takes batches 1..%zu\n", label, B, max);
    return 1;
}

int qg_bench_plan_make(const qg_bench_opts *o, const size_t (*full)[2], size_t nfull, const size_t (*quick)[2], size_t nquick,
                       qg_bench_plan *p)
{
    const size_t (*std)[2] = o->quick ? quick : full;
    p->nshapes = o->quick ? nquick : nfull;
    for (size_t i = 0; i < p->nshapes; i++) p->shapes[i][0] = std[i][0], p->shapes[i][1] = std[i][1];
    p->batches[0] = 1, p->batches[1] = 16, p->nbatches = 2;
    const int ns = qg_bench_parse_shapes(o->shapes, p->shapes, 16), nbt = qg_bench_parse_batches(o->batches, p->batches, 16);
    if (ns < 0 || nbt < 0) return 1;
    if (ns > 0) p->nshapes = (size_t)ns;
    if (nbt > 0) p->nbatches = (size_t)nbt;
    return 0;
}
