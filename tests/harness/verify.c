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
#if QG_HAVE_CUDA
#include "qgold/cuda.h"
#endif

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
#if QG_HAVE_CUDA
        /* A device error's own words (the failed call and CUDA's message, e.g. an illegal address). */
        if (r.rc == QG_ERR_device_failed && qg_cuda_last_error()[0] != '\0') {
            size_t L = strlen(r.msg);
            snprintf(r.msg + L, sizeof r.msg - L, " (CUDA: %s)", qg_cuda_last_error());
        }
#endif
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

static int job_generated(void *vc, qg_audit_row *row, qg_err *e)
{
    const qga_generated *g = vc;
    return g->run(&g->params, row, e);
}

/* The kind's on-the-fly checks (random bytes as blocks; with `full` the large shapes), each isolated. */
static void run_generated(const qgv_opts *o, const qgp_plugin *p, const qgp_kernel *k, qg_audit_sink sink, void *ctx,
                          qg_audit_summary *sum)
{
    const qga_kind *kd = qga_kind_find(k->row.kind);
    qga_generated list[8];
    const size_t n = kd != NULL && kd->generated != NULL ? kd->generated(&k->row, o->full, list, 8) : 0;
    for (size_t i = 0; i < n; i++) {
        qg_audit_row row;
        qg_err e;
        size_t nfail = 0;
        init_row(&row, k, list[i].label);
        double limit = list[i].large ? 20 * o->timeout_s : o->timeout_s;
        int rc = run_checked(p, k, job_generated, &list[i], list[i].label, limit, list[i].large, &row, &e);
        row.cases = 1;
        if (rc != QG_ERR_ok) row_fail(&row, &nfail, rc, &e);
        emit(&row, sink, ctx, sum);
    }
}

/* ---- CUDA plugin kernels ------------------------------------------------------------------------------
 * The CUDA runtime is first touched inside a child: a process that has initialised CUDA cannot fork a
 * child that uses it, so this process (the parent of every case) never calls it. The device check is a
 * child of its own, once per verify; each case's child then initialises CUDA afresh. */

static int job_device(void *vc, qg_audit_row *row, qg_err *e)
{
    (void)vc, (void)row;
#if QG_HAVE_CUDA
    char why[200] = "";
    if (qg_cuda_device_count(why, sizeof why) > 0) return QG_ERR_ok;
    return qg_err_set(e, QG_ERR_backend_unavailable, "%s", why);
#else
    return qg_err_set(e, QG_ERR_unsupported, "this qgold was built without CUDA (configure where nvcc is found)");
#endif
}

/* Whether CUDA kernels can run here; when not, emits the kernel's SKIP row (a FAIL row under
 * QG_REQUIRE_GPU=1 when the build has CUDA but no device answers) and returns 0. */
static int cuda_usable(const qgv_opts *o, qg_audit_row *row, const qgp_kernel *k, qg_audit_sink sink, void *ctx, qg_audit_summary *sum)
{
    static int checked, usable;
    static char why[300];
    if (!checked) {
        iso_result r;
        run_isolated(NULL, job_device, NULL, o->timeout_s, &r);
        checked = 1;
        usable = r.status == ISO_REPORTED && r.r.rc == QG_ERR_ok;
        if (r.status == ISO_REPORTED && !usable) snprintf(why, sizeof why, "%s", r.r.msg);
        else if (r.status == ISO_SIGNAL) snprintf(why, sizeof why, "the CUDA device check was killed by %s", sig_name(r.sig));
        else if (r.status != ISO_REPORTED) snprintf(why, sizeof why, "the CUDA device check did not report (status %d) within %g s", (int)r.status, o->timeout_s);
    }
    if (usable) return 1;
    init_row(row, k, "-");
    const char *req = getenv("QG_REQUIRE_GPU");
#if QG_HAVE_CUDA
    const int required = req != NULL && req[0] == '1';
#else
    const int required = 0; /* a build without CUDA is not a GPU machine's build */
    (void)req;
#endif
    row->verdict = required ? QG_AUDIT_FAIL : QG_AUDIT_SKIP;
    snprintf(row->detail, sizeof row->detail, "CUDA plugin kernel not run: %s%s", why,
             required ? " (QG_REQUIRE_GPU=1: a GPU is required) [backend_unavailable]" : "");
    emit(row, sink, ctx, sum);
    return 0;
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
        if (k->cuda && !cuda_usable(o, &row, k, sink, ctx, &sum)) continue;
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
