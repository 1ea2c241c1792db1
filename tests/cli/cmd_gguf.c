/* qgold gguf: real model files through the same kernel tables (spec: ../shared/specs/gguf.md).
 *
 *   info FILE      key-values, tensors and a per-type summary
 *   check FILE     container rules, then every covered tensor streamed in chunks of whole rows: the
 *                  per-block rule, the reference's decoded bits against every backend's, and with --gemv
 *                  each GEMV kernel against the float64 sum within the kernel's declared bound
 *   dequant, extract   one tensor to float32 values or to its raw bytes
 *
 * Memory stays bounded whatever the file size: the header is parsed through a 64 KiB window and tensor
 * data are read a chunk of whole rows at a time (at most k_chunk_elems elements, or one row when a row
 * is longer), with float32 buffers for one chunk.
 */
#include "cli.h"
#include "cmds.h"
#include "compare.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/gguf.h"
#include "qgold/kquants.h"
#include "qgold/registry.h"
#include "qgold/rng.h"
#include "qgold/threads.h"

#include <pthread.h>

#include <fnmatch.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *k_usage_gguf =
    "usage: qgold gguf info FILE\n"
    "       qgold gguf check FILE [--backend B] [--tensor GLOB] [--gemv] [--json OUT]\n"
    "       qgold gguf dequant FILE --tensor NAME --out values.f32\n"
    "       qgold gguf extract FILE --tensor NAME --out blocks.bin\n"
    "\n"
    "GGUF model files (versions 2 and 3). Every container rule of the spec is checked first; a violation\n"
    "is named with the byte offset where it was found (gguf_tensor_overlap, gguf_offset_misaligned, ...).\n"
    "  info      key-values (long arrays summarized), tensors (name, type, shape, bytes, offset) and a\n"
    "            per-type summary\n"
    "  check     streams every tensor of a covered type (F32, F16, BF16, Q4_K, Q5_K, Q6_K, Q8_K) in chunks\n"
    "            of whole rows: K-quant blocks with a non-finite d or dmin are named (gguf_block_nonfinite,\n"
    "            tensor and block index); each chunk is decoded by the reference and by every backend\n"
    "            available here, which must give identical bits; other types are listed as skipped\n"
    "    --backend B   compare only backend B (ref, avx2, neon, cuda) with the reference; one not built\n"
    "                  into this binary is a usage error (2), one built but unable to run here a failure (1)\n"
    "    --tensor GLOB only tensors whose name matches GLOB (fnmatch; none matching is a failure)\n"
    "    --gemv        also run every available K-quant GEMV on activations from the pinned stream\n"
    "                  (seed printed) against the float64 sum, within each kernel's declared bound\n"
    "    --json OUT    also write the per-tensor results as JSON\n"
    "            A progress line (tensor i of n, GB/s) is shown when stderr is a terminal.\n"
    "  dequant   one covered tensor to float32 values (raw little-endian, row-major) by the reference\n"
    "  extract   one tensor's bytes as stored (for K-quants: the blocks `qgold dequant` reads; the rows\n"
    "            and cols to give it are printed)\n" QG_EXIT_STATUS;

/* Elements per chunk: 4 Mi float32 values = 16 MiB per decoded buffer. */
static const uint64_t k_chunk_elems = (uint64_t)1 << 22;
/* The pinned stream's seed of the GEMV activations (tensor i uses seed + i). */
static const uint64_t k_gemv_seed = 0x67677566u; /* "fugg" */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int open_or_report(qg_gguf *g, const char *path)
{
    int rc = qg_gguf_open_file(g, path);
    if (rc != 0) fprintf(stderr, "qgold: %s: %s: %s\n", qg_error_name(rc), path, g->msg);
    return rc;
}

static void shape_text(const qg_gguf_tensor *t, char *buf, size_t len)
{
    buf[0] = '\0';
    for (uint32_t d = 0; d < t->n_dims; d++) {
        size_t n = strlen(buf);
        snprintf(buf + n, len - n, "%s%llu", d ? " x " : "", (unsigned long long)t->ne[d]);
    }
}

static const char *type_name(uint32_t id)
{
    const qg_ggml_type *ty = qg_ggml_type_of(id);
    return ty ? ty->name : "?";
}

/* ---- info ---------------------------------------------------------------------------------------- */

static int gguf_info(const char *path)
{
    qg_gguf g;
    if (open_or_report(&g, path) != 0) return 1;
    printf("%s: GGUF version %u, %llu key-values, %llu tensors, alignment %llu, data at byte %llu, %llu bytes\n", path, g.version,
           (unsigned long long)g.n_kv, (unsigned long long)g.n_tensors, (unsigned long long)g.alignment, (unsigned long long)g.data_start,
           (unsigned long long)g.file_size);
    printf("\nkey-values:\n");
    for (uint64_t i = 0; i < g.n_kv; i++) {
        const qg_gguf_kv *kv = &g.kv[i];
        if (kv->type == QG_GGUF_ARRAY)
            printf("  %-40s array[%llu x %s] %s\n", kv->key, (unsigned long long)kv->len, qg_gguf_vtype_name(kv->elem_type), kv->preview);
        else if (kv->type == QG_GGUF_STRING)
            printf("  %-40s string \"%s\"%s\n", kv->key, kv->preview, kv->len >= sizeof kv->preview ? "..." : "");
        else
            printf("  %-40s %s %s\n", kv->key, qg_gguf_vtype_name(kv->type), kv->preview);
    }
    printf("\ntensors:\n  %-40s %-8s %-28s %14s %14s\n", "name", "type", "shape", "bytes", "offset");
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const qg_gguf_tensor *t = &g.tensors[i];
        char shape[96];
        shape_text(t, shape, sizeof shape);
        printf("  %-40s %-8s %-28s %14llu %14llu\n", t->name, type_name(t->type), shape, (unsigned long long)t->nbytes,
               (unsigned long long)t->offset);
    }
    printf("\nper type:\n  %-8s %8s %16s  %s\n", "type", "tensors", "bytes", "check");
    for (uint32_t id = 0; id < 256; id++) {
        uint64_t n = 0, bytes = 0;
        for (uint64_t i = 0; i < g.n_tensors; i++)
            if (g.tensors[i].type == id) n++, bytes += g.tensors[i].nbytes;
        if (n) printf("  %-8s %8llu %16llu  %s\n", type_name(id), (unsigned long long)n, (unsigned long long)bytes, qg_ggml_type_covered(id) ? "checked" : "skipped");
    }
    qg_gguf_close(&g);
    return 0;
}

/* ---- check --------------------------------------------------------------------------------------- */

typedef struct {
    const char *path, *backend, *glob, *json;
    int gemv;
    int only_backend; /* -1: all */
    size_t threads;   /* the check's own threads (the kernels then run single-threaded inside them) */
} check_opts;

typedef struct {
    const qg_kernel *k;
} backend_row;

typedef struct {
    char status[8];   /* "ok", "FAIL", "skipped" */
    char detail[400]; /* first failure or why skipped */
    char backends[96];
} tensor_result;

/* The rows of (format, path) that run here, except the reference's own row unless asked for. */
static size_t rows_for(const char *format, const char *path, qg_kind kind, int only, backend_row *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < qg_registry_count(); i++) {
        const qg_kernel *k = qg_registry_at(i);
        if (k->kind != kind || strcmp(k->format, format) != 0 || strcmp(k->path, path) != 0) continue;
        if (only >= 0 ? (int)k->backend != only : k->backend == QG_BACKEND_REF && kind != QG_KIND_KQ_GEMV) continue;
        if (!qg_kernel_available(k, NULL, 0)) continue;
        if (n < cap) out[n++].k = k;
    }
    return n;
}

/* A failure of tensor t (the first is kept in r->detail; later ones only counted by the caller). */
static void tensor_fail(tensor_result *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void tensor_fail(tensor_result *r, const char *fmt, ...)
{
    if (strcmp(r->status, "FAIL") == 0) return;
    snprintf(r->status, sizeof r->status, "FAIL");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->detail, sizeof r->detail, fmt, ap);
    va_end(ap);
}

typedef struct {
    uint8_t *raw;
    float *ref;
    uint16_t *x;
    double *ystar, *sum_abs;
    float *y;
    size_t raw_cap, val_cap, row_cap, x_cap;
} buffers;

static int ensure(void **p, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    void *q = realloc(*p, need ? need : 1);
    if (q == NULL) return -1;
    *p = q;
    *cap = need;
    return 0;
}

/* The GEMV of one chunk (nrows rows at row0) on every GEMV row, against y* summed in double. */
static void check_gemv(const qg_gguf_tensor *t, qg_ktype kt, const backend_row *gv, size_t ngv, buffers *b, size_t nrows, uint64_t row0,
                       uint64_t seed, tensor_result *r)
{
    const size_t cols = (size_t)t->ne[0];
    for (size_t m = 0; m < nrows; m++) {
        double s = 0, sa = 0;
        const float *w = b->ref + m * cols;
        for (size_t k = 0; k < cols; k++) {
            const double p = (double)w[k] * (double)qg_f16_to_f32(b->x[k]); /* exact: 24 + 11 bits */
            s += p;
            sa += p < 0 ? -p : p;
        }
        b->ystar[m] = s;
        b->sum_abs[m] = sa;
    }
    for (size_t i = 0; i < ngv; i++) {
        const qg_kernel *k = gv[i].k;
        int rc = k->fn.kq_gemv(kt, b->raw, nrows * (size_t)t->row_bytes, nrows, cols, b->x, 1, b->y, NULL);
        if (rc != 0) {
            tensor_fail(r, "%s: %s failed on rows %llu..%llu: %s", qg_error_name(rc), k->name, (unsigned long long)row0,
                        (unsigned long long)(row0 + nrows - 1), qg_error_message(rc));
            continue;
        }
        qg_bound_report br;
        rc = qg_compare_bounded(&k->numerics, (long)cols, b->ystar, b->sum_abs, NULL, b->y, nrows, &br);
        if (rc != 0)
            tensor_fail(r, "%s: %s GEMV (seed %llu) row %llu: %s", qg_error_name(rc), k->name, (unsigned long long)seed,
                        (unsigned long long)(row0 + br.first_failure), br.text);
    }
}

/* One chunk of rows is split over threads by rows; each thread walks its rows in pieces of about
 * k_piece_elems elements: the reference decodes a piece into the chunk's buffer (the GEMV reads it
 * later), every backend decodes the same piece into the thread's own poisoned buffer, and the two are
 * compared while both are still in cache. The decoded values are 7 times the bytes of a Q4_K row, so
 * keeping them cache-sized is what makes the check run near memory speed; the bits do not depend on the
 * split (every decode is row-local and exact). */
static const size_t k_piece_elems = (size_t)1 << 15;

static int ref_decode(uint32_t type, const uint8_t *raw, size_t rows, size_t cols, size_t row_bytes, float *y)
{
    const size_t n = rows * cols;
    switch (type) {
    case QG_GGML_F32: memcpy(y, raw, n * sizeof(float)); return 0;
    case QG_GGML_F16: return qg_fp16_f16_to_f32_ref((const qg_f16 *)(const void *)raw, (uint32_t *)(void *)y, n);
    case QG_GGML_BF16: return qg_fp16_bf16_to_f32_ref((const qg_bf16 *)(const void *)raw, (uint32_t *)(void *)y, n);
    default: return qg_kq_dequant_f32_ref((qg_ktype)(type - QG_GGML_Q4_K), raw, rows * row_bytes, rows, cols, y);
    }
}

typedef struct {
    /* the piece of work */
    uint32_t type;
    const uint8_t *raw; /* the chunk's first row */
    size_t r0, r1, cols, row_bytes;
    float *ref;         /* the chunk's reference output (row 0 of the chunk) */
    const backend_row *be;
    size_t nbe;
    float *got;         /* this thread's piece buffer */
    /* the outcome: the first failure (in row order) */
    size_t fail_row;    /* SIZE_MAX: none */
    char detail[400];
} chunk_job;

static void job_fail(chunk_job *j, size_t row, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void job_fail(chunk_job *j, size_t row, const char *fmt, ...)
{
    if (j->fail_row != SIZE_MAX) return;
    j->fail_row = row;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->detail, sizeof j->detail, fmt, ap);
    va_end(ap);
}

static void *chunk_worker(void *p)
{
    chunk_job *j = p;
    const int kquant = j->type >= QG_GGML_Q4_K && j->type <= QG_GGML_Q8_K;
    const qg_ktype kt = kquant ? (qg_ktype)(j->type - QG_GGML_Q4_K) : QG_Q4_K;
    const size_t per = j->cols >= k_piece_elems ? 1 : k_piece_elems / j->cols;
    for (size_t r = j->r0; r < j->r1 && j->fail_row == SIZE_MAX; r += per) {
        const size_t n = j->r1 - r < per ? j->r1 - r : per, nval = n * j->cols, nbytes = n * j->row_bytes;
        const uint8_t *raw = j->raw + r * j->row_bytes;
        float *ref = j->ref + r * j->cols;
        int rc = ref_decode(j->type, raw, n, j->cols, j->row_bytes, ref);
        if (rc != 0) {
            job_fail(j, r, "%s: reference decode: %s", qg_error_name(rc), qg_error_message(rc));
            break;
        }
        for (size_t i = 0; i < j->nbe; i++) {
            const qg_kernel *k = j->be[i].k;
            memset(j->got, 0xA5, nval * sizeof(float)); /* poison: an unwritten element shows as a mismatch */
            rc = kquant ? k->fn.kq_dequant.f32(kt, raw, nbytes, n, j->cols, j->got) : k->fn.convert(raw, j->got, nval);
            if (rc != 0) {
                job_fail(j, r, "%s: %s: %s", qg_error_name(rc), k->name, qg_error_message(rc));
                continue;
            }
            if (memcmp(ref, j->got, nval * sizeof(float)) == 0) continue; /* identical bits: the common case */
            qg_exact_report er;
            /* NaNs made by arithmetic (inf * 0 from an infinite scale) have a machine-chosen sign */
            rc = kquant ? qg_compare_exact_nan_any(QG_ELEM_F32, ref, j->got, nval, &er) : qg_compare_exact(QG_ELEM_F32, ref, j->got, nval, &er);
            if (rc != 0)
                job_fail(j, r + er.index / j->cols, "%s: %s differs from the reference at column %zu (%zu of the %zu values decoded with it): %s",
                         qg_error_name(rc), k->name, er.index % j->cols, er.mismatches, nval, er.text);
        }
    }
    return NULL;
}

enum { MAX_THREADS = 64 };

/* One covered tensor, streamed. Returns the bytes read. */
static uint64_t check_tensor(qg_gguf *g, const qg_gguf_tensor *t, uint64_t index, const check_opts *o, buffers *b, tensor_result *r,
                             double t0, uint64_t done_before, uint64_t total_bytes, size_t ntensors, int tty)
{
    const size_t nthreads = o->threads;
    snprintf(r->status, sizeof r->status, "ok");
    r->detail[0] = r->backends[0] = '\0';
    const int kquant = t->type >= QG_GGML_Q4_K && t->type <= QG_GGML_Q8_K;
    const qg_ktype kt = kquant ? (qg_ktype)(t->type - QG_GGML_Q4_K) : QG_Q4_K;
    backend_row rows[QG_BACKEND_COUNT * 2], gv[QG_BACKEND_COUNT * 2];
    size_t nrows_be = 0, ngv = 0;
    if (kquant) nrows_be = rows_for(qg_kq_name(kt), "dequant", QG_KIND_KQ_DEQUANT, o->only_backend, rows, QG_BACKEND_COUNT * 2);
    else if (t->type == QG_GGML_F16) nrows_be = rows_for("fp16", "f16_to_f32", QG_KIND_CONVERT, o->only_backend, rows, QG_BACKEND_COUNT * 2);
    else if (t->type == QG_GGML_BF16) nrows_be = rows_for("fp16", "bf16_to_f32", QG_KIND_CONVERT, o->only_backend, rows, QG_BACKEND_COUNT * 2);
    if (o->gemv && kquant) ngv = rows_for(qg_kq_name(kt), "gemv", QG_KIND_KQ_GEMV, o->only_backend, gv, QG_BACKEND_COUNT * 2);
    for (size_t i = 0; i < nrows_be; i++) {
        size_t n = strlen(r->backends);
        snprintf(r->backends + n, sizeof r->backends - n, "%s%s", n ? "," : "", qg_backend_name(rows[i].k->backend));
    }
    if (ngv) {
        size_t n = strlen(r->backends);
        snprintf(r->backends + n, sizeof r->backends - n, "%sgemv:", n ? " " : "");
        for (size_t i = 0; i < ngv; i++) {
            n = strlen(r->backends);
            snprintf(r->backends + n, sizeof r->backends - n, "%s%s", i ? "," : "", qg_backend_name(gv[i].k->backend));
        }
    }
    const uint64_t cols = t->ne[0];
    uint64_t per = cols >= k_chunk_elems ? 1 : k_chunk_elems / cols;
    if (per > t->rows) per = t->rows;
    /* per * cols <= max(k_chunk_elems, cols) and cols * 4 <= file bytes * 4 / ... : sizes below fit size_t on 64-bit
     * hosts; checked anyway for 32-bit ones */
    size_t raw_need, val_need;
    if (per * t->row_bytes > SIZE_MAX || qgc_mul_size((size_t)(per * cols), sizeof(float), &val_need) != 0) {
        tensor_fail(r, "%s: a row of %llu elements does not fit this machine's size_t", qg_error_name(QG_ERR_alloc_failed), (unsigned long long)cols);
        return 0;
    }
    raw_need = (size_t)(per * t->row_bytes);
    if (ensure((void **)&b->raw, &b->raw_cap, raw_need) || ensure((void **)&b->ref, &b->val_cap, val_need)) {
        tensor_fail(r, "%s: %zu bytes for a chunk of %s", qg_error_name(QG_ERR_alloc_failed), val_need, t->name);
        return 0;
    }
    /* per-thread piece buffers: at most one row or k_piece_elems values */
    const size_t piece = (size_t)(cols > k_piece_elems ? cols : k_piece_elems) * sizeof(float);
    float *pieces[MAX_THREADS] = {0};
    for (size_t i = 0; i < nthreads; i++)
        if ((pieces[i] = malloc(piece)) == NULL) {
            for (size_t k = 0; k < i; k++) free(pieces[k]);
            tensor_fail(r, "%s: %zu bytes for a piece of %s", qg_error_name(QG_ERR_alloc_failed), piece, t->name);
            return 0;
        }
    const uint64_t seed = k_gemv_seed + index;
    if (ngv) {
        size_t xn = 0, yn = 0;
        if (qgc_mul_size((size_t)cols, 2, &xn) || ensure((void **)&b->x, &b->x_cap, xn) || qgc_mul_size((size_t)per, 8, &yn) ||
            ensure((void **)&b->ystar, &b->row_cap, yn) || !(b->sum_abs = realloc(b->sum_abs, yn)) || !(b->y = realloc(b->y, yn))) {
            tensor_fail(r, "%s: no memory for the GEMV of %s", qg_error_name(QG_ERR_alloc_failed), t->name);
            for (size_t k = 0; k < nthreads; k++) free(pieces[k]);
            return 0;
        }
        qg_rng rng;
        qg_rng_init(&rng, seed);
        for (uint64_t k = 0; k < cols; k++) b->x[k] = qg_f32_to_f16(qg_rng_uniform(&rng, -1.0f, 1.0f));
    }
    const qg_ggml_type *ty = qg_ggml_type_of(t->type);
    const uint64_t blocks_per_row = cols / ty->block_elems;
    uint64_t bad_blocks = 0, first_bad = 0, mismatches = 0, done = 0;
    double last_shown = 0;
    for (uint64_t row0 = 0; row0 < t->rows; row0 += per) {
        const uint64_t n = t->rows - row0 < per ? t->rows - row0 : per;
        const size_t nbytes = (size_t)(n * t->row_bytes);
        int rc = qg_gguf_read_rows(g, t, row0, n, b->raw);
        if (rc != 0) {
            tensor_fail(r, "%s: %s", qg_error_name(rc), g->msg);
            break;
        }
        done += nbytes;
        if (kquant) {
            uint64_t first = 0, count = 0;
            qg_gguf_nonfinite_blocks(t->type, b->raw, n * blocks_per_row, &first, &count);
            if (count && bad_blocks == 0) first_bad = row0 * blocks_per_row + first;
            bad_blocks += count;
        }
        /* the chunk's rows over the threads, each with its own piece buffer */
        size_t nt = nthreads < (size_t)n ? nthreads : (size_t)n;
        chunk_job jobs[MAX_THREADS];
        pthread_t th[MAX_THREADS];
        int started[MAX_THREADS] = {0};
        for (size_t i = 0; i < nt; i++) {
            jobs[i] = (chunk_job){t->type, b->raw, (size_t)n * i / nt, (size_t)n * (i + 1) / nt, (size_t)cols, (size_t)t->row_bytes,
                                  b->ref, rows, nrows_be, pieces[i], SIZE_MAX, ""};
            if (i > 0) started[i] = pthread_create(&th[i], NULL, chunk_worker, &jobs[i]) == 0;
        }
        chunk_worker(&jobs[0]);
        for (size_t i = 1; i < nt; i++) {
            if (started[i]) pthread_join(th[i], NULL);
            else chunk_worker(&jobs[i]); /* no thread: do its rows here */
        }
        int chunk_failed = 0;
        for (size_t i = 0; i < nt; i++) {
            if (jobs[i].fail_row == SIZE_MAX) continue;
            tensor_fail(r, "row %llu: %s", (unsigned long long)(row0 + jobs[i].fail_row), jobs[i].detail);
            chunk_failed = 1;
            break; /* jobs are in row order: the first is the earliest row */
        }
        mismatches += (uint64_t)chunk_failed;
        if (ngv) check_gemv(t, kt, gv, ngv, b, (size_t)n, row0, seed, r);
        if (tty) {
            const double el = now_s() - t0;
            if (el - last_shown > 0.2 || row0 + n == t->rows) {
                last_shown = el;
                fprintf(stderr, "\r\033[Ktensor %zu of %zu  %.40s  %5.1f%%  %.2f GB/s", (size_t)index + 1, ntensors, t->name,
                        total_bytes ? 100.0 * (double)(done_before + done) / (double)total_bytes : 100.0,
                        el > 0 ? (double)(done_before + done) / el * 1e-9 : 0.0);
            }
        }
    }
    if (bad_blocks)
        tensor_fail(r, "%s: block %llu (row %llu, block %llu of the row) has a non-finite d or dmin; %llu of %llu blocks",
                    qg_error_name(QG_ERR_gguf_block_nonfinite), (unsigned long long)first_bad, (unsigned long long)(first_bad / blocks_per_row),
                    (unsigned long long)(first_bad % blocks_per_row), (unsigned long long)bad_blocks,
                    (unsigned long long)(t->rows * blocks_per_row));
    (void)mismatches;
    for (size_t k = 0; k < nthreads; k++) free(pieces[k]);
    return done;
}

static void json_result(FILE *fp, const qg_gguf_tensor *t, const tensor_result *r, int first)
{
    fprintf(fp, "%s\n    {\"name\": ", first ? "" : ",");
    qgc_json_str(fp, t->name);
    fprintf(fp, ", \"type\": ");
    qgc_json_str(fp, type_name(t->type));
    fprintf(fp, ", \"shape\": [");
    for (uint32_t d = 0; d < t->n_dims; d++) fprintf(fp, "%s%llu", d ? ", " : "", (unsigned long long)t->ne[d]);
    fprintf(fp, "], \"bytes\": %llu, \"offset\": %llu, \"status\": ", (unsigned long long)t->nbytes, (unsigned long long)t->offset);
    qgc_json_str(fp, r->status);
    fprintf(fp, ", \"backends\": ");
    qgc_json_str(fp, r->backends);
    fprintf(fp, ", \"detail\": ");
    qgc_json_str(fp, r->detail);
    fprintf(fp, "}");
}

static int gguf_check(const check_opts *o)
{
    qg_gguf g;
    FILE *js = NULL;
    char *jbuf = NULL;
    size_t jlen = 0;
    if (o->json && (js = open_memstream(&jbuf, &jlen)) == NULL) {
        fprintf(stderr, "qgold: %s: no memory for the JSON report\n", qg_error_name(QG_ERR_alloc_failed));
        return 1;
    }
    int rc = open_or_report(&g, o->path);
    if (js) {
        fprintf(js, "{\n  \"file\": ");
        qgc_json_str(js, o->path);
        fprintf(js, ",\n  \"container\": ");
        qgc_json_str(js, rc ? qg_error_name(rc) : "ok");
        fprintf(js, ",\n  \"container_detail\": ");
        qgc_json_str(js, rc ? g.msg : "");
        fprintf(js, ",\n  \"tensors\": [");
    }
    uint64_t checked = 0, skipped = 0, failed = 0, total = 0, done = 0;
    size_t selected = 0;
    double t0 = now_s();
    check_opts oo = *o;
    o = &oo;
    oo.threads = (size_t)qg_threads();
    if (oo.threads < 1) oo.threads = 1;
    if (oo.threads > MAX_THREADS) oo.threads = MAX_THREADS;
    qg_set_threads(1);
    if (rc == 0) {
        printf("%s: GGUF version %u, %llu tensors, %llu key-values: container OK\n", o->path, g.version, (unsigned long long)g.n_tensors,
               (unsigned long long)g.n_kv);
        for (uint64_t i = 0; i < g.n_tensors; i++)
            if (!o->glob || fnmatch(o->glob, g.tensors[i].name, 0) == 0) {
                selected++;
                if (qg_ggml_type_covered(g.tensors[i].type)) total += g.tensors[i].nbytes;
            }
        if (selected == 0) {
            fprintf(stderr, "qgold: no tensor of %s matches --tensor %s\n", o->path, o->glob ? o->glob : "*");
            failed = o->glob != NULL;
        }
        buffers b;
        memset(&b, 0, sizeof b);
        const int tty = isatty(STDERR_FILENO);
        size_t shown = 0;
        int first_json = 1;
        char skipped_types[200] = "";
        for (uint64_t i = 0; i < g.n_tensors; i++) {
            const qg_gguf_tensor *t = &g.tensors[i];
            if (o->glob && fnmatch(o->glob, t->name, 0) != 0) continue;
            tensor_result r;
            memset(&r, 0, sizeof r);
            char shape[96];
            shape_text(t, shape, sizeof shape);
            if (!qg_ggml_type_covered(t->type)) {
                snprintf(r.status, sizeof r.status, "skipped");
                snprintf(r.detail, sizeof r.detail, "type %s is not covered", type_name(t->type));
                skipped++;
                if (!strstr(skipped_types, type_name(t->type)) && strlen(skipped_types) + 12 < sizeof skipped_types) {
                    strcat(skipped_types, skipped_types[0] ? ", " : "");
                    strcat(skipped_types, type_name(t->type));
                }
            } else {
                done += check_tensor(&g, t, shown, o, &b, &r, t0, done, total, selected, tty);
                checked++;
                if (strcmp(r.status, "ok") != 0) failed++;
            }
            shown++;
            if (tty) fprintf(stderr, "\r\033[K");
            printf("%-7s %-40s %-6s %-24s %12llu  %s%s%s\n", r.status, t->name, type_name(t->type), shape, (unsigned long long)t->nbytes,
                   r.detail[0] ? r.detail : "", r.detail[0] && r.backends[0] ? "  " : "", r.backends[0] ? r.backends : "");
            if (js) json_result(js, t, &r, first_json);
            first_json = 0;
        }
        free(b.raw);
        free(b.ref);
        free(b.x);
        free(b.ystar);
        free(b.sum_abs);
        free(b.y);
        const double el = now_s() - t0;
        printf("qgold gguf check: %llu tensors checked, %llu failed, %llu skipped%s%s%s; %llu bytes in %.2f s (%.2f GB/s)\n",
               (unsigned long long)checked, (unsigned long long)failed, (unsigned long long)skipped, skipped ? " (" : "", skipped_types,
               skipped ? ")" : "", (unsigned long long)done, el, el > 0 ? (double)done / el * 1e-9 : 0.0);
        if (js)
            fprintf(js, "\n  ],\n  \"checked\": %llu,\n  \"failed\": %llu,\n  \"skipped\": %llu,\n  \"bytes\": %llu,\n  \"seconds\": %.6f\n}\n",
                    (unsigned long long)checked, (unsigned long long)failed, (unsigned long long)skipped, (unsigned long long)done, el);
        qg_gguf_close(&g);
    } else if (js) {
        fprintf(js, "\n  ]\n}\n");
    }
    qg_set_threads(0);
    int out = rc != 0 || failed != 0;
    if (js) {
        fclose(js);
        if (qgc_write_output(o->json, jbuf, jlen) != 0) out = 1;
        free(jbuf);
    }
    return out;
}

/* ---- dequant and extract ------------------------------------------------------------------------- */

static int gguf_one(const char *path, const char *name, const char *out, int dequant)
{
    qg_gguf g;
    if (open_or_report(&g, path) != 0) return 1;
    const qg_gguf_tensor *t = qg_gguf_find(&g, name);
    int rc = 1;
    if (t == NULL) {
        fprintf(stderr, "qgold: %s has no tensor named '%s' (qgold gguf info lists them)\n", path, name);
    } else if (dequant && !qg_ggml_type_covered(t->type)) {
        fprintf(stderr, "qgold: %s: tensor '%s' has type %s, which qgold does not decode (F32, F16, BF16, Q4_K, Q5_K, Q6_K, Q8_K)\n",
                qg_error_name(QG_ERR_unsupported), name, type_name(t->type));
    } else if (t->nbytes > SIZE_MAX || (dequant && t->nelem > SIZE_MAX / sizeof(float))) {
        fprintf(stderr, "qgold: %s: tensor '%s' does not fit this machine's memory\n", qg_error_name(QG_ERR_alloc_failed), name);
    } else {
        uint8_t *raw = malloc(t->nbytes ? (size_t)t->nbytes : 1);
        float *y = dequant ? malloc((size_t)t->nelem * sizeof(float)) : NULL;
        int e = raw == NULL || (dequant && y == NULL) ? QG_ERR_alloc_failed : qg_gguf_read_rows(&g, t, 0, t->rows, raw);
        if (e == 0 && dequant) {
            const size_t n = (size_t)t->nelem;
            if (t->type == QG_GGML_F32) memcpy(y, raw, n * sizeof(float));
            else if (t->type == QG_GGML_F16) e = qg_fp16_f16_to_f32_ref((const qg_f16 *)(void *)raw, (uint32_t *)(void *)y, n);
            else if (t->type == QG_GGML_BF16) e = qg_fp16_bf16_to_f32_ref((const qg_bf16 *)(void *)raw, (uint32_t *)(void *)y, n);
            else e = qg_kq_dequant_f32_ref((qg_ktype)(t->type - QG_GGML_Q4_K), raw, (size_t)t->nbytes, (size_t)t->rows, (size_t)t->ne[0], y);
        }
        if (e != 0) {
            fprintf(stderr, "qgold: %s: tensor '%s': %s\n", qg_error_name(e), name, e == QG_ERR_io_failed ? g.msg : qg_error_message(e));
        } else if (qgc_write_output(out, dequant ? (const void *)y : raw, dequant ? (size_t)t->nelem * sizeof(float) : (size_t)t->nbytes) == 0) {
            rc = 0;
            if (dequant)
                printf("qgold: %s (%s, %llu x %llu) -> %llu float32 values in %s\n", name, type_name(t->type), (unsigned long long)t->rows,
                       (unsigned long long)t->ne[0], (unsigned long long)t->nelem, out);
            else
                printf("qgold: %s (%s) -> %llu bytes in %s: rows %llu, cols %llu%s%s%s\n", name, type_name(t->type), (unsigned long long)t->nbytes,
                       out, (unsigned long long)t->rows, (unsigned long long)t->ne[0],
                       t->type >= QG_GGML_Q4_K && t->type <= QG_GGML_Q8_K ? " (qgold dequant --format " : "",
                       t->type >= QG_GGML_Q4_K && t->type <= QG_GGML_Q8_K ? qg_kq_name((qg_ktype)(t->type - QG_GGML_Q4_K)) : "",
                       t->type >= QG_GGML_Q4_K && t->type <= QG_GGML_Q8_K ? " --rows R --cols K)" : "");
        }
        free(raw);
        free(y);
    }
    qg_gguf_close(&g);
    return rc;
}

/* ---- arguments ----------------------------------------------------------------------------------- */

int qgc_cmd_gguf(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("%s", k_usage_gguf);
            return 0;
        }
    if (argc < 1) return qgc_usage_error(k_usage_gguf, "%s", "a subcommand is required: info, check, dequant or extract");
    const char *sub = argv[0];
    const int is_info = strcmp(sub, "info") == 0, is_check = strcmp(sub, "check") == 0, is_dequant = strcmp(sub, "dequant") == 0,
              is_extract = strcmp(sub, "extract") == 0;
    if (!is_info && !is_check && !is_dequant && !is_extract)
        return qgc_usage_error(k_usage_gguf, "unknown gguf subcommand '%s' (info, check, dequant, extract)", sub);
    check_opts o;
    memset(&o, 0, sizeof o);
    o.only_backend = -1;
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (is_check && strcmp(a, "--gemv") == 0) {
            o.gemv = 1;
            continue;
        }
        const int takes = strcmp(a, "--tensor") == 0 || (is_check && (strcmp(a, "--backend") == 0 || strcmp(a, "--json") == 0)) ||
                          ((is_dequant || is_extract) && strcmp(a, "--out") == 0);
        if (takes) {
            if (i + 1 >= argc) return qgc_usage_error(k_usage_gguf, "option %s needs a value", a);
            const char *v = argv[++i];
            if (strcmp(a, "--tensor") == 0) o.glob = v;
            else if (strcmp(a, "--backend") == 0) o.backend = v;
            else if (strcmp(a, "--json") == 0) o.json = v;
            else out = v;
            continue;
        }
        if (a[0] == '-' && a[1] != '\0') return qgc_usage_error(k_usage_gguf, "unexpected argument '%s' for gguf %s", a, sub);
        if (o.path) return qgc_usage_error(k_usage_gguf, "one FILE only (got '%s' and '%s')", o.path, a);
        o.path = a;
    }
    if (o.path == NULL) return qgc_usage_error(k_usage_gguf, "gguf %s needs a FILE", sub);
    if (is_info) {
        if (o.glob) return qgc_usage_error(k_usage_gguf, "%s", "gguf info takes no --tensor");
        return gguf_info(o.path);
    }
    if (is_check) {
        if (o.backend) {
            o.only_backend = qg_backend_from_name(o.backend);
            if (o.only_backend < 0) return qgc_usage_error(k_usage_gguf, "unknown backend '%s' (ref, avx2, neon, cuda)", o.backend);
            int built = 0;
            for (size_t i = 0; i < qg_registry_count(); i++)
                built |= (int)qg_registry_at(i)->backend == o.only_backend && qg_kernel_built(qg_registry_at(i));
            if (!built) return qgc_usage_error(k_usage_gguf, "backend %s is not built into this binary", o.backend);
            char why[200];
            if (!qg_backend_available((qg_backend)o.only_backend, why, sizeof why)) {
                fprintf(stderr, "qgold: %s: backend %s cannot run here: %s\n", qg_error_name(QG_ERR_backend_unavailable), o.backend, why);
                return 1;
            }
        }
        if (o.json && qgc_same_file(o.path, o.json)) return qgc_refuse_same_file(k_usage_gguf, "FILE", o.path, o.json);
        return gguf_check(&o);
    }
    if (o.glob == NULL || out == NULL) return qgc_usage_error(k_usage_gguf, "gguf %s needs --tensor NAME and --out FILE", sub);
    if (qgc_same_file(o.path, out)) return qgc_refuse_same_file(k_usage_gguf, "FILE", o.path, out);
    return gguf_one(o.path, o.glob, out, is_dequant);
}
