/* qgold bench: speed is claimed only from here, always as a ratio to something measured in the same run
 * (reference/spec/bench.md in the project's words: machines are shared and absolute times drift). */
#ifndef QGOLD_BENCH_H
#define QGOLD_BENCH_H

#include <stddef.h>
#include <stdio.h>

#include "atomic_write.h"
#include "qgold/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *format;  /* required */
    int backend;         /* -1: every available backend */
    int quick;           /* small sizes, few repetitions: a smoke test of the harness, not a measurement */
    int reps;            /* repetitions per figure (median reported); >= 7 unless quick */
    int threads;         /* CPU threads; 0 = all online CPUs */
    const char *json;    /* NULL or the path of the JSON document: written at the end of a run that measured
                          * something and failed nowhere, through a temporary file and rename */
    const char *shapes;  /* NULL, or "RxK,RxK,..." replacing the standard shapes */
    const char *batches; /* NULL, or "1,16,..." replacing the standard batches */
} qg_bench_opts;

/* Parses o->shapes / o->batches into arrays (at most `max`); returns the count, 0 when unset, -1 on a
 * malformed list (digits only; dimensions 1..QG_BENCH_MAX_DIM, batches 1..QG_BENCH_MAX_BATCH; each
 * format then holds its batches to its own qg_bench_format.max_batch in qg_bench_check). */
#define QG_BENCH_MAX_DIM 2147483647UL
#define QG_BENCH_MAX_BATCH 4096
int qg_bench_parse_shapes(const char *spec, size_t (*out)[2], int max);
int qg_bench_parse_batches(const char *spec, size_t *out, int max);

/* Checks the options before anything runs: --shapes and --batches against the format's constraints,
 * and that --backend has a kernel of the format built into this binary and able to run here.
 * Returns 0, or 2 (a usage error) or 1 (cannot run here) with the reason in `why`. */
int qg_bench_check(const qg_bench_opts *o, char *why, size_t why_len);

typedef struct {
    const char *format, *path, *backend;
    char shape[48];
    int batch;
    double t_med, t_lo, t_hi; /* seconds per call: median, min, max over repetitions */
    double bytes;             /* bytes one call moves, counted honestly */
    double eff;               /* bytes / t_med / reference bandwidth */
    const char *eff_vs;       /* "BW_read" or "BW_copy" */
    double speedup;           /* t_baseline / t_med, or 0 when there is no baseline */
    const char *speedup_vs;   /* what the baseline is, or "" */
} qg_bench_row;

int qg_bench_run(const qg_bench_opts *o);

/* Shared by the CPU and GPU halves. */
void qg_bench_emit(const qg_bench_opts *o, const qg_bench_row *r);
/* A CPU row's end: a failed timing (r->t_med < 0) is reported on stderr with the kernel's error name and
 * gives 1; else eff = bytes / t_med / bw, the row is printed, and 0. */
int qg_bench_emit_cpu(const qg_bench_opts *o, qg_bench_row *r, double bw, const char *label, const char *kernel, size_t batch,
                      int err);
void qg_bench_note(const qg_bench_opts *o, const char *key, const char *fmt, ...);
double qg_bench_median(double *v, int n, double *lo, double *hi);
double qg_now(void);
/* Prints "qgold: bench LABEL: cannot allocate the WHAT: N bytes" and returns 1. */
int qg_bench_alloc_error(const char *label, const char *what, double bytes);
/* CPU threads: fn over [0, n) split into `threads` contiguous slices (aligned to 64 elements). */
void qg_bench_parallel_for(int threads, size_t n, void (*fn)(void *, size_t, size_t), void *ctx);
/* The shapes and batches a CPU bench runs: `full` (or `quick` under --quick) and batches 1, 16, each
 * replaced by --shapes / --batches when given. 0, or 1 when one of those is malformed. */
typedef struct {
    size_t shapes[16][2];
    size_t nshapes;
    size_t batches[16];
    size_t nbatches;
} qg_bench_plan;
int qg_bench_plan_make(const qg_bench_opts *o, const size_t (*full)[2], size_t nfull, const size_t (*quick)[2], size_t nquick,
                       qg_bench_plan *p);
/* Median seconds per pass over o->reps passes after one warm-up pass; a pass is slice(ctx, 0, n) once, or
 * split over `threads` (qg_bench_parallel_for) when `split` (kernels that do not thread themselves). */
double qg_bench_time_pass(const qg_bench_opts *o, int split, int threads, size_t n, void (*slice)(void *, size_t, size_t),
                          void *ctx, double *lo, double *hi);
/* Multi-threaded streaming read bandwidth of a `bytes` buffer, bytes/s; 0 when it cannot be allocated. */
double qg_bench_bw_read(const qg_bench_opts *o, int threads, size_t bytes);

/* One run: the table header (and the JSON document opened, when o->json), then rows, then the end
 * (JSON written only when ok). */
int qg_bench_session_begin(const qg_bench_opts *o, qg_atomic_file *jf);
int qg_bench_session_end(const qg_bench_opts *o, qg_atomic_file *jf, int ok);
int qg_bench_rows_emitted(void);

/* Benchmarks as data: one entry per format family, in bench_formats.c. The driver (bench.c) finds the
 * entry of --format and calls its halves; it names no format. */
typedef struct {
    int (*matches)(const char *format);
    /* Whether --shapes/--batches apply (GEMV-like products); the rule a shape breaks, or NULL. */
    int takes_shapes;
    const char *(*shape_rule)(const char *format, size_t rows, size_t cols);
    /* Whether a registry row is one this benchmark times. */
    int (*measures)(const qg_kernel *k);
    /* CPU half against BW_read; GPU half against BW_copy (NULL when the format has none). */
    int (*cpu)(const qg_bench_opts *o, int threads, double bw_read);
    int (*gpu)(const qg_bench_opts *o, double bw_copy);
    /* The largest --batches value any of the format's paths takes; a path that takes fewer skips the
     * larger batches and says so (qg_bench_batch_skipped). */
    size_t max_batch;
} qg_bench_format;

/* 1 (after a "# skip" line on stdout naming `label` and the kernel k, if not NULL) when batch B is above
 * `max`, the most that path takes. */
int qg_bench_batch_skipped(const char *label, const qg_kernel *k, size_t B, size_t max);

/* The entry serving `format`, or NULL. */
const qg_bench_format *qg_bench_format_find(const char *format);

/* The halves, each in its own file (bench_<format>.c, bench_gpu_<format>.cu). */
int qg_bench_cpu_fp16(const qg_bench_opts *o, int threads, double bw_read);
int qg_bench_cpu_kquants(const qg_bench_opts *o, int threads, double bw_read);
int qg_bench_cpu_spqr(const qg_bench_opts *o, int threads, double bw_read);
int qg_bench_cpu_rans(const qg_bench_opts *o, int threads, double bw_read);
#if QG_HAVE_CUDA
/* Device notes and BW_copy, once per run. */
int qg_bench_gpu_begin(const qg_bench_opts *o, double *bw_copy);
int qg_bench_gpu_fp16(const qg_bench_opts *o, double bw_copy);
int qg_bench_gpu_kquants(const qg_bench_opts *o, double bw_copy);
int qg_bench_gpu_spqr(const qg_bench_opts *o, double bw_copy);
int qg_bench_gpu_rans(const qg_bench_opts *o, double bw_copy);
#endif

#ifdef __cplusplus
}
#endif
#endif
