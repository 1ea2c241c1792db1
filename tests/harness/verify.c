/* The verify driver (verify.h): plugin kernels through the audit runners, every case in its own
 * process. */
#include "verify.h"

#include "audit_formats.h"
#include "compare.h"
#include "fixture.h"
#include "guard.h"
#include "sha256.h"
#include "kinds.h"

#include "qgold/fp16.h"
#include "qgold/kquants.h"
#include "qgold/kquants_layout.h"
#include "qgold/rng.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The pinned stream's seed for the random and large inputs ("plug"). */
#define QGV_SEED 0x706C7567u

/* ---- isolation ------------------------------------------------------------------------------------- */

typedef struct {
    int rc;
    size_t elements;
    double worst_ratio;
    unsigned char hash[32];
    uint64_t calls;
    char msg[1024];
} child_report;

typedef enum { ISO_REPORTED, ISO_SIGNAL, ISO_NO_REPORT, ISO_TIMEOUT, ISO_SYSTEM } iso_status;

typedef struct {
    iso_status status;
    int sig;        /* ISO_SIGNAL */
    int exit_code;  /* ISO_NO_REPORT */
    child_report r; /* ISO_REPORTED */
} iso_result;

typedef int (*qgv_job)(void *ctx, qg_audit_row *row, qg_err *e);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        c += w;
        n -= (size_t)w;
    }
}

static const char *sig_name(int s)
{
    switch (s) {
    case SIGSEGV: return "SIGSEGV (segmentation fault)";
    case SIGBUS: return "SIGBUS (bus error)";
    case SIGABRT: return "SIGABRT (abort: an assertion, or the C library found the heap corrupted)";
    case SIGFPE: return "SIGFPE (arithmetic exception)";
    case SIGILL: return "SIGILL (illegal instruction: an instruction this CPU lacks?)";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    default: return "a signal";
    }
}

/* Runs job(ctx) with kernel k active in a forked child; its report comes back through a pipe. The
 * child never returns into the caller: it leaves with _exit, so no buffered output or atexit handler of
 * the parent runs twice. */
static void run_isolated(const qgp_kernel *k, qgv_job job, void *ctx, double timeout_s, iso_result *out)
{
    memset(out, 0, sizeof *out);
    int fd[2];
    if (pipe(fd) != 0) {
        out->status = ISO_SYSTEM;
        snprintf(out->r.msg, sizeof out->r.msg, "pipe: %s", strerror(errno));
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        out->status = ISO_SYSTEM;
        snprintf(out->r.msg, sizeof out->r.msg, "fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return;
    }
    if (pid == 0) {
        close(fd[0]);
        /* A crash is reported by its signal; a core file of each would only fill the disk. */
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        child_report r;
        qg_audit_row row;
        qg_err e;
        memset(&r, 0, sizeof r);
        memset(&row, 0, sizeof row);
        qg_err_clear(&e);
        qgp_activate(k);
        qgp_hash_reset();
        r.rc = job(ctx, &row, &e);
        qgp_hash_final(r.hash, &r.calls);
        r.elements = row.elements;
        r.worst_ratio = row.worst_ratio;
        if (r.rc != QG_ERR_ok) snprintf(r.msg, sizeof r.msg, "%s", e.msg);
        write_all(fd[1], &r, sizeof r);
        close(fd[1]);
        _exit(0);
    }
    close(fd[1]);
    size_t got = 0;
    const double deadline = now_s() + timeout_s;
    int timed_out = 0;
    for (;;) {
        double left = deadline - now_s();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd p = {fd[0], POLLIN, 0};
        int pr = poll(&p, 1, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR) continue;
        if (pr == 0) {
            timed_out = 1;
            break;
        }
        ssize_t n = read(fd[0], (char *)&out->r + got, sizeof out->r - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
        if (got == sizeof out->r) break;
    }
    close(fd[0]);
    int st = 0;
    if (timed_out) {
        kill(pid, SIGKILL);
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
        out->status = ISO_TIMEOUT;
        return;
    }
    /* The report is in (or the pipe closed): the child is leaving; give it the rest of the limit. */
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) break;
        if (now_s() > deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
            if (got != sizeof out->r) {
                out->status = ISO_TIMEOUT;
                return;
            }
            break;
        }
        usleep(1000);
    }
    if (got == sizeof out->r) {
        out->status = ISO_REPORTED;
    } else if (WIFSIGNALED(st)) {
        out->status = ISO_SIGNAL;
        out->sig = WTERMSIG(st);
    } else {
        out->status = ISO_NO_REPORT;
        out->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
}

/* The error of an isolated run as one message; 0 when the job itself passed. `what` names the case. */
static int iso_error(const iso_result *r, const qgp_plugin *p, const qgp_kernel *k, const char *what, double timeout_s, qg_err *e)
{
    switch (r->status) {
    case ISO_REPORTED:
        if (r->r.rc == QG_ERR_ok) return QG_ERR_ok;
        return qg_err_set(e, r->r.rc, "plugin %s, kernel %s: %s", p->name, k->name, r->r.msg);
    case ISO_SIGNAL:
        return qg_err_set(e, QG_ERR_plugin_case_crashed, "plugin %s, kernel %s: %s: the kernel's process was killed by %s", p->name, k->name,
                          what, sig_name(r->sig));
    case ISO_NO_REPORT:
        return qg_err_set(e, QG_ERR_plugin_case_crashed,
                          "plugin %s, kernel %s: %s: the kernel's process exited with status %d without a report (a sanitizer "
                          "report or the plugin's own exit; see stderr)",
                          p->name, k->name, what, r->exit_code);
    case ISO_TIMEOUT:
        return qg_err_set(e, QG_ERR_plugin_case_timeout, "plugin %s, kernel %s: %s: no result within the time limit of %g s (killed)",
                          p->name, k->name, what, timeout_s);
    default:
        return qg_err_set(e, QG_ERR_io_failed, "plugin %s, kernel %s: %s: cannot isolate the case: %s", p->name, k->name, what, r->r.msg);
    }
}

/* One check in isolation, then (unless `once`) again in a second process; both must give the same
 * output hash. Counts into row; returns 0 or the first error. */
static int run_checked(const qgp_plugin *p, const qgp_kernel *k, qgv_job job, void *ctx, const char *what, double timeout_s,
                       int once, qg_audit_row *row, qg_err *e)
{
    iso_result a, b;
    run_isolated(k, job, ctx, timeout_s, &a);
    int rc = iso_error(&a, p, k, what, timeout_s, e);
    if (rc != QG_ERR_ok) return rc;
    row->elements += a.r.elements;
    if (a.r.worst_ratio > row->worst_ratio) row->worst_ratio = a.r.worst_ratio;
    if (once || a.r.calls == 0) return QG_ERR_ok;
    run_isolated(k, job, ctx, timeout_s, &b);
    if ((rc = iso_error(&b, p, k, what, timeout_s, e)) != QG_ERR_ok) return rc;
    if (b.r.calls != a.r.calls || memcmp(a.r.hash, b.r.hash, 32) != 0) {
        char ha[65], hb[65];
        qg_sha256_hex(a.r.hash, ha);
        qg_sha256_hex(b.r.hash, hb);
        return qg_err_set(e, QG_ERR_plugin_nondeterministic_process,
                          "plugin %s, kernel %s: %s: two processes gave different outputs: SHA-256 of %llu outputs %.16s..., of %llu "
                          "outputs %.16s... (each process alone was deterministic)",
                          p->name, k->name, what, (unsigned long long)a.r.calls, ha, (unsigned long long)b.r.calls, hb);
    }
    return QG_ERR_ok;
}

/* ---- fixture cases ----------------------------------------------------------------------------------- */

typedef struct {
    const qgp_kernel *k;
    qgh_file *f;
    const qgh_case_info *ci;
} case_ctx;

static int job_case(void *vc, qg_audit_row *row, qg_err *e)
{
    case_ctx *c = vc;
    const qga_kind *kd = qga_kind_find(c->k->row.kind);
    if (kd == NULL) return qg_err_set(e, QG_ERR_unsupported, "no audit runner for kind %d", (int)c->k->row.kind);
    return kd->run_case(&c->k->row, c->f, c->ci, row, e);
}

/* ---- random bytes and large shapes (K-quant kinds) --------------------------------------------------- */

typedef struct {
    const qgp_kernel *k;
    size_t rows, cols, batch;
    int random_scales; /* 1: every byte random (scales may be inf/NaN); 0: ordinary d/dmin as in real models */
    int rounds;
} gen_ctx;

static void random_bytes(qg_rng *g, uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(qg_rng_u64(g) >> 56);
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* Weight blocks: random bytes, then (unless random_scales) ordinary scales written over the headers. */
static void make_blocks(qg_rng *g, qg_ktype t, size_t nblocks, int random_scales, uint8_t *w)
{
    const size_t bb = qg_kq_block_bytes(t);
    random_bytes(g, w, nblocks * bb);
    if (random_scales) return;
    for (size_t i = 0; i < nblocks; i++) {
        uint8_t *blk = w + i * bb;
        if (t == QG_Q8_K) {
            uint32_t b = qg_f32_bits(qg_rng_uniform(g, 0.001f, 0.01f));
            put16(blk, (uint16_t)b);
            put16(blk + 2, (uint16_t)(b >> 16));
        } else {
            put16(blk + (t == QG_Q6_K ? QG_Q6K_D : QG_Q4K_D), qg_f32_to_f16(qg_rng_uniform(g, 0.0001f, 0.002f)));
            if (t != QG_Q6_K) put16(blk + QG_Q4K_DMIN, qg_f32_to_f16(qg_rng_uniform(g, 0.0001f, 0.002f)));
        }
    }
}

typedef struct {
    const qg_kernel *k;
    qg_ktype t;
    const uint8_t *w;
    size_t nbytes, rows, cols, batch;
    const uint16_t *x;
    const uint8_t *q8;
    int f16;
} call_ctx;

static int call_dequant(void *vc, void *out)
{
    call_ctx *c = vc;
    if (c->f16) return c->k->fn.kq_dequant.f16(c->t, c->w, c->nbytes, c->rows, c->cols, out);
    return c->k->fn.kq_dequant.f32(c->t, c->w, c->nbytes, c->rows, c->cols, out);
}

static int call_dot(void *vc, void *out)
{
    call_ctx *c = vc;
    int32_t *S = out;
    const size_t nb = c->cols / QG_QK_K;
    return c->k->fn.kq_dot(c->t, c->w, c->q8, c->cols, S, S + nb, (float *)(void *)(S + 2 * nb));
}

static int call_gemv(void *vc, void *out)
{
    call_ctx *c = vc;
    return c->k->fn.kq_gemv(c->t, c->w, c->nbytes, c->rows, c->cols, c->x, c->batch, c->f16 ? NULL : out, c->f16 ? out : NULL);
}

static int job_dequant(void *vc, qg_audit_row *row, qg_err *e)
{
    gen_ctx *g = vc;
    const qg_ktype t = (qg_ktype)qg_kq_from_name(g->k->format);
    const size_t n = g->rows * g->cols, nbytes = n / QG_QK_K * qg_kq_block_bytes(t);
    uint8_t *w = malloc(nbytes);
    void *ref = malloc(n * 4), *got = malloc(n * 4);
    qg_rng rng;
    qg_rng_init(&rng, QGV_SEED + (uint64_t)t);
    int rc = w && ref && got ? QG_ERR_ok : qg_err_set(e, QG_ERR_alloc_failed, "out of memory (%zu weights)", n);
    for (int r = 0; r < g->rounds && rc == QG_ERR_ok; r++) {
        make_blocks(&rng, t, n / QG_QK_K, g->random_scales, w);
        call_ctx c = {&g->k->row, t, w, nbytes, g->rows, g->cols, 1, NULL, NULL, 0};
        for (int v = 0; v < 2 && rc == QG_ERR_ok; v++) {
            c.f16 = v;
            int rr = v ? qg_kq_dequant_f16_ref(t, w, nbytes, g->rows, g->cols, ref) : qg_kq_dequant_f32_ref(t, w, nbytes, g->rows, g->cols, ref);
            int kr = qg_call_guarded(call_dequant, &c, got, n, v ? 2 : 4, e);
            if (rr != QG_ERR_ok) {
                if (kr == QG_ERR_ok)
                    rc = qg_err_set(e, QG_ERR_mismatch, "round %d (%zux%zu): the reference rejects these blocks (%s), the kernel accepted them", r,
                                    g->rows, g->cols, qg_error_name(rr));
                continue;
            }
            if (kr != QG_ERR_ok) {
                char tmp[sizeof e->msg];
                snprintf(tmp, sizeof tmp, "%s", e->msg);
                rc = qg_err_set(e, kr, "round %d (%zux%zu, %s output): %s", r, g->rows, g->cols, v ? "fp16" : "float32", tmp);
                break;
            }
            qg_exact_report rep;
            if (qg_compare_exact_nan_any(v ? QG_ELEM_F16 : QG_ELEM_F32, ref, got, n, &rep) != QG_ERR_ok)
                rc = qg_err_set(e, QG_ERR_mismatch, "round %d (%zux%zu, %s output): row %zu col %zu: %s", r, g->rows, g->cols,
                                v ? "fp16" : "float32", rep.index / g->cols, rep.index % g->cols, rep.text);
            row->elements += n;
        }
    }
    free(w);
    free(ref);
    free(got);
    return rc;
}

static double read_f32le(const uint8_t *p) { return qg_f32_from_bits((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24); }
static double read_f16le(const uint8_t *p) { return qg_f16_to_f32((qg_f16)(p[0] | p[1] << 8)); }

static int job_dot(void *vc, qg_audit_row *row, qg_err *e)
{
    gen_ctx *g = vc;
    const qg_ktype t = (qg_ktype)qg_kq_from_name(g->k->format);
    const size_t nb = g->cols / QG_QK_K, bb = qg_kq_block_bytes(t);
    uint8_t *w = malloc(nb * bb), *q8 = malloc(nb * QG_Q8K_BYTES);
    float *x = malloc(g->cols * 4);
    int32_t *ref = malloc((2 * nb + 1) * 4), *got = malloc((2 * nb + 1) * 4);
    qg_rng rng;
    qg_rng_init(&rng, QGV_SEED + 16 + (uint64_t)t);
    int rc = w && q8 && x && ref && got ? QG_ERR_ok : qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    for (int r = 0; r < g->rounds && rc == QG_ERR_ok; r++) {
        make_blocks(&rng, t, nb, g->random_scales, w);
        for (size_t i = 0; i < g->cols; i++) x[i] = qg_rng_uniform(&rng, -1.0f, 1.0f);
        if ((rc = qg_kq_quantize_ref(QG_Q8_K, x, 1, g->cols, q8, nb * QG_Q8K_BYTES)) != QG_ERR_ok) {
            qg_err_set(e, rc, "quantizing the Q8_K activations");
            break;
        }
        float rres;
        int rr = qg_kq_dot_q8k_ref(t, w, q8, g->cols, ref, ref + nb, &rres);
        call_ctx c = {&g->k->row, t, w, nb * bb, 1, g->cols, 1, NULL, q8, 0};
        int kr = qg_call_guarded(call_dot, &c, got, 2 * nb + 1, 4, e);
        if (rr != QG_ERR_ok || kr != QG_ERR_ok) {
            if (rr != QG_ERR_ok && kr == QG_ERR_ok)
                rc = qg_err_set(e, QG_ERR_mismatch, "round %d: the reference rejects this row (%s), the kernel accepted it", r, qg_error_name(rr));
            else if (rr == QG_ERR_ok) {
                char tmp[sizeof e->msg];
                snprintf(tmp, sizeof tmp, "%s", e->msg);
                rc = qg_err_set(e, kr, "round %d (cols %zu): %s", r, g->cols, tmp);
            }
            continue;
        }
        qg_exact_report rep;
        for (int v = 0; v < 2 && rc == QG_ERR_ok; v++)
            if (qg_compare_exact(QG_ELEM_I32, ref + v * nb, got + v * nb, nb, &rep) != QG_ERR_ok)
                rc = qg_err_set(e, QG_ERR_mismatch, "round %d (cols %zu): integer %s of block %zu: %s", r, g->cols, v ? "M" : "S", rep.index,
                                rep.text);
        if (rc != QG_ERR_ok) break;
        /* y* = sum_i dy_i (D_i S_i - Dm_i M_i) in double, as the fixture runner forms it. */
        double ystar = 0, sabs = 0;
        for (size_t i = 0; i < nb; i++) {
            const uint8_t *blk = w + i * bb;
            double D = read_f16le(blk + (t == QG_Q6_K ? QG_Q6K_D : QG_Q4K_D)), Dm = t == QG_Q6_K ? 0 : read_f16le(blk + QG_Q4K_DMIN);
            double dy = read_f32le(q8 + i * QG_Q8K_BYTES + QG_Q8K_D);
            double s1 = D * dy * (double)ref[i], s2 = Dm * dy * (double)ref[nb + i];
            ystar += s1 - s2;
            sabs += fabs(s1) + fabs(s2);
        }
        float res;
        memcpy(&res, got + 2 * nb, 4);
        qg_bound_report br;
        int brc = qg_compare_bounded(&g->k->row.numerics, (long)g->cols, &ystar, &sabs, NULL, &res, 1, &br);
        if (br.worst_ratio > row->worst_ratio) row->worst_ratio = br.worst_ratio;
        if (brc != QG_ERR_ok) rc = qg_err_set(e, brc, "round %d (cols %zu): dot result: %s", r, g->cols, br.text);
        row->elements += 2 * nb + 1;
    }
    free(w);
    free(q8);
    free(x);
    free(ref);
    free(got);
    return rc;
}

static int job_gemv(void *vc, qg_audit_row *row, qg_err *e)
{
    gen_ctx *g = vc;
    const qg_ktype t = (qg_ktype)qg_kq_from_name(g->k->format);
    const size_t rows = g->rows, cols = g->cols, B = g->batch, rb = cols / QG_QK_K * qg_kq_block_bytes(t), nbytes = rows * rb;
    uint8_t *w = malloc(nbytes);
    uint16_t *x = malloc(B * cols * 2), *y16 = malloc(B * rows * 2);
    float *wrow = malloc(cols * 4), *y = malloc(B * rows * 4);
    double *ystar = malloc(B * rows * sizeof(double)), *sabs = malloc(B * rows * sizeof(double));
    qg_rng rng;
    qg_rng_init(&rng, QGV_SEED + 32 + (uint64_t)t);
    int rc = w && x && y16 && wrow && y && ystar && sabs ? QG_ERR_ok : qg_err_set(e, QG_ERR_alloc_failed, "out of memory (%zu bytes)", nbytes);
    if (rc == QG_ERR_ok) {
        make_blocks(&rng, t, nbytes / qg_kq_block_bytes(t), 0, w);
        for (size_t i = 0; i < B * cols; i++) x[i] = qg_f32_to_f16(qg_rng_uniform(&rng, -1.0f, 1.0f));
        /* y*: the exactly decoded weights (the reference dequantization, exact in float32) times x, in double. */
        for (size_t r = 0; r < rows && rc == QG_ERR_ok; r++) {
            if ((rc = qg_kq_dequant_f32_ref(t, w + r * rb, rb, 1, cols, wrow)) != QG_ERR_ok) {
                qg_err_set(e, rc, "reference dequantization of row %zu", r);
                break;
            }
            for (size_t b = 0; b < B; b++) {
                double s = 0, sa = 0;
                for (size_t k = 0; k < cols; k++) {
                    double p = (double)wrow[k] * (double)qg_f16_to_f32(x[b * cols + k]);
                    s += p;
                    sa += fabs(p);
                }
                ystar[b * rows + r] = s;
                sabs[b * rows + r] = sa;
            }
        }
    }
    for (int v = 0; v < 2 && rc == QG_ERR_ok; v++) {
        call_ctx c = {&g->k->row, t, w, nbytes, rows, cols, B, x, NULL, v};
        if ((rc = qg_call_guarded(call_gemv, &c, v ? (void *)y16 : (void *)y, B * rows, v ? 2 : 4, e)) != QG_ERR_ok) {
            char tmp[sizeof e->msg];
            snprintf(tmp, sizeof tmp, "%s", e->msg);
            qg_err_set(e, rc, "%zux%zu batch %zu, %s output: %s", rows, cols, B, v ? "fp16" : "float32", tmp);
            break;
        }
        if (v)
            for (size_t i = 0; i < B * rows; i++) y[i] = qg_f16_to_f32(y16[i]);
        qg_bound_report br;
        int brc = qg_compare_bounded(v ? &g->k->row.numerics_f16 : &g->k->row.numerics, (long)cols, ystar, sabs, NULL, y, B * rows, &br);
        if (br.worst_ratio > row->worst_ratio) row->worst_ratio = br.worst_ratio;
        if (brc != QG_ERR_ok)
            rc = qg_err_set(e, brc, "%zux%zu batch %zu, %s output [batch][row] = [%zu][%zu]: %s", rows, cols, B, v ? "fp16" : "float32",
                            br.first_failure / rows, br.first_failure % rows, br.text);
        row->elements += B * rows;
    }
    free(w);
    free(x);
    free(y16);
    free(wrow);
    free(y);
    free(ystar);
    free(sabs);
    return rc;
}

/* ---- the driver ---------------------------------------------------------------------------------------- */

static void init_row(qg_audit_row *row, const qgp_kernel *k, const char *file)
{
    memset(row, 0, sizeof *row);
    row->format = k->format;
    row->path = k->path;
    row->backend = k->cuda ? "cuda" : "cpu";
    row->kernel = k->name;
    row->tier = k->row.numerics.tier;
    snprintf(row->file, sizeof row->file, "%s", file);
}

static void emit(qg_audit_row *row, qg_audit_sink sink, void *ctx, qg_audit_summary *sum)
{
    if (row->verdict == QG_AUDIT_PASS) sum->pass++;
    else if (row->verdict == QG_AUDIT_FAIL) sum->fail++;
    else sum->skip++;
    if (sink) sink(row, ctx);
}

/* Records a failed check in the row: the first failure's message is the detail; later ones are counted. */
static void row_fail(qg_audit_row *row, size_t *nfail, int rc, const qg_err *e)
{
    if ((*nfail)++ == 0) {
        row->verdict = QG_AUDIT_FAIL;
        snprintf(row->detail, sizeof row->detail, "%s [%s]", e->msg, qg_error_name(rc));
    }
}

static void row_close(qg_audit_row *row, size_t nfail)
{
    if (nfail > 1) {
        size_t L = strlen(row->detail);
        snprintf(row->detail + L, sizeof row->detail - L, " (and %zu more failing cases)", nfail - 1);
    }
}

static int selected(const qgv_opts *o, const qgp_kernel *k)
{
    if (o->format && strcmp(o->format, k->format) != 0) return 0;
    if (o->path && strcmp(o->path, k->path) != 0) return 0;
    if (o->backend && (int)k->desc->backend != o->backend) return 0;
    return 1;
}

/* Random bytes as blocks, and with `full` the large shapes, for the K-quant kinds. */
static void run_generated(const qgv_opts *o, const qgp_plugin *p, const qgp_kernel *k, qg_audit_sink sink, void *ctx,
                          qg_audit_summary *sum)
{
    typedef struct {
        const char *label;
        qgv_job job;
        gen_ctx g;
        int large;
    } gen;
    gen list[8];
    size_t n = 0;
    switch (k->row.kind) {
    case QG_KIND_KQ_DEQUANT:
        list[n++] = (gen){"random blocks", job_dequant, {k, 4, 512, 1, 1, 16}, 0};
        if (o->full) list[n++] = (gen){"full 1024x14336", job_dequant, {k, 1024, 14336, 1, 0, 1}, 1};
        break;
    case QG_KIND_KQ_DOT:
        list[n++] = (gen){"random blocks", job_dot, {k, 1, 1024, 1, 1, 16}, 0};
        if (o->full) {
            list[n++] = (gen){"full cols 14336", job_dot, {k, 1, 14336, 1, 0, 8}, 1};
            list[n++] = (gen){"full cols 262144", job_dot, {k, 1, 262144, 1, 0, 2}, 1};
        }
        break;
    case QG_KIND_KQ_GEMV:
        if (o->full) {
            list[n++] = (gen){"full 4096x14336 b1", job_gemv, {k, 4096, 14336, 1, 0, 1}, 1};
            list[n++] = (gen){"full 4096x14336 b4", job_gemv, {k, 4096, 14336, 4, 0, 1}, 1};
            list[n++] = (gen){"full 14336x4096 b4", job_gemv, {k, 14336, 4096, 4, 0, 1}, 1};
        }
        break;
    default: break;
    }
    for (size_t i = 0; i < n; i++) {
        qg_audit_row row;
        qg_err e;
        size_t nfail = 0;
        init_row(&row, k, list[i].label);
        double limit = list[i].large ? 20 * o->timeout_s : o->timeout_s;
        int rc = run_checked(p, k, list[i].job, &list[i].g, list[i].label, limit, list[i].large, &row, &e);
        row.cases = 1;
        if (rc != QG_ERR_ok) row_fail(&row, &nfail, rc, &e);
        emit(&row, sink, ctx, sum);
    }
}

int qgv_verify(const qgv_opts *o, const qgp_plugin *p, qg_audit_sink sink, void *ctx, qg_audit_summary *sum_out)
{
    qg_audit_summary sum = {0, 0, 0};
    qg_audit_row row;
    qg_err e;
    qgh_manifest *m = NULL;
    qg_err_clear(&e);
    qg_audit_opts ao = {o->golden_dir, NULL, -1, o->no_manifest};
    int rc = qg_audit_check_golden(&ao, &e);
    if (rc == QG_ERR_ok && !o->no_manifest) rc = qgh_manifest_load(o->golden_dir, &m, &e);
    if (rc != QG_ERR_ok) {
        memset(&row, 0, sizeof row);
        row.format = row.path = row.backend = row.kernel = "-";
        snprintf(row.file, sizeof row.file, "MANIFEST");
        row.verdict = QG_AUDIT_FAIL;
        snprintf(row.detail, sizeof row.detail, "%s [%s]", e.msg, qg_error_name(rc));
        emit(&row, sink, ctx, &sum);
        if (sum_out) *sum_out = sum;
        return 1;
    }
    static char files[256][256];
    for (size_t ki = 0; ki < p->n; ki++) {
        const qgp_kernel *k = &p->k[ki];
        if (!selected(o, k)) continue;
        if (k->cuda) {
            init_row(&row, k, "-");
            row.verdict = QG_AUDIT_SKIP;
            snprintf(row.detail, sizeof row.detail, "CUDA plugin kernels are loaded and validated, but this qgold does not run them yet "
                                                    "(device buffers and streams for plugins: reference/spec/plugin.md, status)");
            emit(&row, sink, ctx, &sum);
            continue;
        }
        size_t nf = qg_list_fixture_files(o->golden_dir, k->format, files, 256), cases_total = 0;
        for (size_t fi = 0; fi < nf; fi++) {
            qgh_file *f = NULL;
            rc = qgh_open(o->golden_dir, files[fi], m, &f, &e);
            if (rc == QG_ERR_ok) rc = qgh_lint(f, &e);
            if (rc != QG_ERR_ok) {
                init_row(&row, k, files[fi]);
                row.verdict = QG_AUDIT_FAIL;
                snprintf(row.detail, sizeof row.detail, "%s [%s]", e.msg, qg_error_name(rc));
                emit(&row, sink, ctx, &sum);
                qgh_close(f);
                continue;
            }
            init_row(&row, k, files[fi]);
            size_t nfail = 0;
            for (size_t c = 0; c < qgh_case_count(f); c++) {
                qgh_case_info ci;
                if ((rc = qgh_read_case_info(f, qgh_case_name(f, c), &ci, &e)) != QG_ERR_ok) {
                    row_fail(&row, &nfail, rc, &e);
                    continue;
                }
                if (!qga_case_applies(&k->row, &ci)) continue;
                case_ctx cc = {k, f, &ci};
                char what[300];
                snprintf(what, sizeof what, "%s: case %s", qgh_name(f), ci.case_id);
                rc = run_checked(p, k, job_case, &cc, what, o->timeout_s, 0, &row, &e);
                row.cases++;
                if (rc != QG_ERR_ok) row_fail(&row, &nfail, rc, &e);
            }
            qgh_close(f);
            if (row.cases == 0 && nfail == 0) continue;
            cases_total += row.cases;
            row_close(&row, nfail);
            emit(&row, sink, ctx, &sum);
        }
        if (cases_total == 0) {
            init_row(&row, k, "-");
            row.verdict = QG_AUDIT_FAIL;
            snprintf(row.detail, sizeof row.detail, "no fixture in %s/%s exercises path %s", o->golden_dir, k->format, k->path);
            emit(&row, sink, ctx, &sum);
        }
        run_generated(o, p, k, sink, ctx, &sum);
    }
    qgh_manifest_free(m);
    if (sum_out) *sum_out = sum;
    return sum.fail ? 1 : 0;
}

/* ---- loading in a child first ------------------------------------------------------------------------- */

typedef struct {
    const char *file;
} load_ctx;

static int job_load(void *vc, qg_audit_row *row, qg_err *e)
{
    (void)row;
    /* The plugin's own messages are printed once, by the load in the parent that follows. */
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, STDERR_FILENO);
    qgp_plugin *p = NULL;
    int rc = qgp_load(((load_ctx *)vc)->file, &p, e);
    qgp_unload(p);
    return rc;
}

int qgv_load_isolated(const char *file, double timeout_s, qgp_plugin **out, qg_err *e)
{
    *out = NULL;
    load_ctx lc = {file};
    iso_result r;
    run_isolated(NULL, job_load, &lc, timeout_s, &r);
    switch (r.status) {
    case ISO_REPORTED: break; /* loaded or refused without harm: the load below says which, with the plugin's messages */
    case ISO_SIGNAL:
        return qg_err_set(e, QG_ERR_plugin_entry_failed, "%s: loading the plugin (its constructors or %s) was killed by %s", file,
                          QGOLD_PLUGIN_ENTRY_SYMBOL, sig_name(r.sig));
    case ISO_NO_REPORT:
        return qg_err_set(e, QG_ERR_plugin_entry_failed, "%s: loading the plugin exited the process with status %d", file, r.exit_code);
    case ISO_TIMEOUT:
        return qg_err_set(e, QG_ERR_plugin_entry_failed, "%s: loading the plugin did not finish within %g s", file, timeout_s);
    default:
        return qg_err_set(e, QG_ERR_io_failed, "%s: %s", file, r.r.msg);
    }
    return qgp_load(file, out, e);
}
