/* qgold verify --plugin: a plugin's kernels judged like qgold's own (tests/harness/verify.h). */
#include "atomic_write.h"
#include "bench.h"
#include "bench_plugin.h"
#include "cli.h"
#include "cmds.h"
#include "plugin_load.h"
#include "verify.h"

#include "qgold/fp16.h"
#include "qgold/kquants.h"
#include "qgold/rng.h"
#include "qgold/threads.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *k_usage_verify =
    "usage: qgold verify --plugin PATH.so [--format F] [--path P] [--backend cpu|cuda] [--full] [--timeout S]\n"
    "                    [--golden DIR] [--no-manifest] [--json FILE] [--junit FILE]\n"
    "\n"
    "Loads a kernel plugin (the ABI of qgold/plugin.h) and judges each of its kernels exactly as qgold audit\n"
    "judges qgold's own: every golden fixture case of the kernel's format and path at the path's tier,\n"
    "poisoned outputs and canaries, determinism (twice in one process and once more in another, compared\n"
    "by hash), batch invariance, the invalid-input corpus (an error status, never a crash), and for the\n"
    "K-quant kinds random bytes as blocks against the reference. Every case runs in its own process with a\n"
    "time limit: a crash or a hang fails that case, names it and the signal, and the next case runs.\n"
    "CUDA kernels get device copies of every buffer (outputs canary-guarded and poisoned) and a stream; a\n"
    "device error (an illegal address) fails the case with CUDA's message. Without a CUDA device (or in a\n"
    "qgold built without CUDA) their rows are SKIP with the reason; QG_REQUIRE_GPU=1 makes a missing device\n"
    "a failure.\n"
    "One table row per kernel and fixture file (or generated check), as in qgold audit.\n"
    "  --plugin PATH   the shared library (a name without '/' is taken from the current directory)\n"
    "  --format F, --path P, --backend cpu|cuda   only the plugin's kernels of that format, path, backend\n"
    "  --full          also large shapes made from the pinned stream, against the reference\n"
    "  --timeout S     seconds per case, 1..3600 (default 30; large shapes get 20 times as long)\n"
    "  --golden DIR, --no-manifest   as for qgold audit\n"
    "  --json FILE     also write the rows as JSON to FILE\n"
    "  --junit FILE    also write a JUnit XML report to FILE (one testcase per row)\n"
    "  --bench         after a verification without failures, time the plugin's verified kernels as\n"
    "                  qgold bench --plugin does: each CPU dequant, dot and GEMV kernel beside qgold's own CPU\n"
    "                  kernel of the same format and path, same data, same run, on one thread and on all\n"
    "                  (median of 7; efficiency against BW_read measured in the run); each CUDA dequant and\n"
    "                  GEMV kernel on device pointers beside qgold's own CUDA GEMV and cuBLAS fp16 (against\n"
    "                  BW_copy); the plugin runs in this process for timing\n"
    "Exit status: 0 every row passes (skips allowed), 1 a failure, a plugin that cannot be loaded or is\n"
    "refused (its error name is printed), nothing verified; 2 wrong arguments.\n";

typedef struct {
    sink_ctx table;
    FILE *junit;
    const char *plugin;
    const char *last_kernel;
    const qgp_plugin *p;
    unsigned char passed[QGP_MAX_KERNELS], failed[QGP_MAX_KERNELS]; /* per kernel: a PASS row, a FAIL row */
} verify_sink;

static void xml_str(FILE *fp, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '<') fputs("&lt;", fp);
        else if (c == '>') fputs("&gt;", fp);
        else if (c == '&') fputs("&amp;", fp);
        else if (c == '"') fputs("&quot;", fp);
        else if (c < 0x20 && c != '\n' && c != '\t') fprintf(fp, "&#x%x;", c);
        else fputc(c, fp);
    }
}

static void verify_row(const qg_audit_row *r, void *vctx)
{
    verify_sink *v = vctx;
    if (v->last_kernel == NULL || strcmp(v->last_kernel, r->kernel) != 0) {
        printf("kernel %s (plugin %s):\n", r->kernel, v->plugin);
        v->last_kernel = r->kernel;
    }
    qgc_print_row(r, &v->table);
    for (size_t i = 0; i < v->p->n; i++)
        if (strcmp(v->p->k[i].name, r->kernel) == 0) {
            if (r->verdict == QG_AUDIT_PASS) v->passed[i] = 1;
            if (r->verdict == QG_AUDIT_FAIL) v->failed[i] = 1;
        }
    if (v->junit != NULL) {
        fprintf(v->junit, "  <testcase classname=\"");
        xml_str(v->junit, v->plugin);
        fputc('.', v->junit);
        xml_str(v->junit, r->kernel);
        fprintf(v->junit, "\" name=\"");
        xml_str(v->junit, r->file);
        fprintf(v->junit, "\">");
        if (r->verdict == QG_AUDIT_FAIL) {
            fprintf(v->junit, "<failure message=\"");
            xml_str(v->junit, r->detail);
            fprintf(v->junit, "\"/>");
        } else if (r->verdict == QG_AUDIT_SKIP) {
            fprintf(v->junit, "<skipped message=\"");
            xml_str(v->junit, r->detail);
            fprintf(v->junit, "\"/>");
        }
        fprintf(v->junit, "</testcase>\n");
    }
}

static int open_out(qg_atomic_file *f, const char *path)
{
    int e = qg_atomic_open(f, path);
    if (e != 0) fprintf(stderr, "qgold: %s: cannot write %s: %s\n", qg_error_name(QG_ERR_io_failed), path, strerror(e));
    return e;
}

/* ---- timing: `qgold verify --bench` and `qgold bench --plugin` -------------------------------------
 * The plugin's kernels beside qgold's own, same data, same run (bench spec: medians, efficiency against
 * a bandwidth of the same run). CPU: 4096 x 14336 weights (a 7B-class projection), on one thread and on
 * all, against BW_read. CUDA (bench_gpu_plugin.cu): on device pointers, beside qgold's own CUDA kernel and
 * cuBLAS fp16, against BW_copy. --quick: small shapes, 3 repetitions. ---- */

enum { QGV_BENCH_ROWS = 4096, QGV_BENCH_COLS = 14336, QGV_BENCH_QUICK_ROWS = 256, QGV_BENCH_QUICK_COLS = 4096, QGV_BENCH_MAX_REPS = 63 };

typedef struct {
    const qgp_kernel *pk;     /* the plugin kernel, called directly (no trampoline) */
    const qg_kernel *own;     /* or qgold's own */
    qg_ktype t;
    const uint8_t *w, *q8;
    const uint16_t *x;
    size_t rows, rb, cols;
    float *y;                 /* dequant: rows x cols; dot, gemv: rows */
    int failed;
} bench_ctx;

static void bench_slice(void *vc, size_t lo, size_t hi)
{
    bench_ctx *c = vc;
    const qgold_plugin_kernel *d = c->pk ? c->pk->desc : NULL;
    const size_t rows = hi - lo, nb = c->cols / 256;
    void *ws = NULL;
    if (d && d->workspace_bytes) {
        size_t n = d->workspace_bytes(d->user, c->pk->row.kind == QG_KIND_KQ_DOT ? 1 : rows, c->cols, 1);
        ws = n ? malloc(n) : NULL;
        if (n && !ws) {
            c->failed = 1;
            return;
        }
    }
    int rc = 0;
    switch (c->pk ? c->pk->row.kind : c->own->kind) {
    case QG_KIND_KQ_DEQUANT:
        rc = d ? d->fn.kq_dequant_f32(d->user, c->w + lo * c->rb, rows * c->rb, rows, c->cols, c->y + lo * c->cols, ws, NULL)
               : c->own->fn.kq_dequant.f32(c->t, c->w + lo * c->rb, rows * c->rb, rows, c->cols, c->y + lo * c->cols);
        break;
    case QG_KIND_KQ_GEMV:
        rc = d ? d->fn.kq_gemv(d->user, c->w + lo * c->rb, rows * c->rb, rows, c->cols, c->x, 1, c->y + lo, NULL, ws, NULL)
               : c->own->fn.kq_gemv(c->t, c->w + lo * c->rb, rows * c->rb, rows, c->cols, c->x, 1, c->y + lo, NULL);
        break;
    default: { /* dot: one call per weight row against the one Q8_K row */
        int32_t *S = malloc(nb * 8);
        const int result_only = d && (d->flags & QGOLD_PLUGIN_DOT_RESULT_ONLY);
        for (size_t r = lo; r < hi && rc == 0 && S; r++)
            rc = d ? d->fn.kq_dot(d->user, c->w + r * c->rb, c->q8, c->cols, result_only ? NULL : S, result_only ? NULL : S + nb, c->y + r, ws, NULL)
                   : c->own->fn.kq_dot(c->t, c->w + r * c->rb, c->q8, c->cols, S, S + nb, c->y + r);
        if (S == NULL) rc = 1;
        free(S);
    }
    }
    free(ws);
    if (rc != 0) c->failed = 1;
}

/* Median seconds of `reps` calls over all rows with `threads` threads; <0 when a call failed. */
static double bench_time(bench_ctx *c, int threads, int reps, double *lo, double *hi)
{
    double t[QGV_BENCH_MAX_REPS];
    c->failed = 0;
    qg_bench_parallel_for(threads, c->rows, bench_slice, c); /* warm */
    for (int r = 0; r < reps; r++) {
        double t0 = qg_now();
        qg_bench_parallel_for(threads, c->rows, bench_slice, c);
        t[r] = qg_now() - t0;
    }
    return c->failed ? -1 : qg_bench_median(t, reps, lo, hi);
}

/* Whether kernel k is one this run times: selected as it was verified, of a timed kind, and verified with
 * at least one passing row and no failing one (ok[i]). */
static int bench_selected(const qgp_plugin *p, size_t i, const qgv_opts *o, const unsigned char *ok, int cuda)
{
    const qgp_kernel *k = &p->k[i];
    const qg_kind kind = k->row.kind;
    if (!ok[i] || k->cuda != cuda) return 0;
    if ((o->format && strcmp(o->format, k->format) != 0) || (o->path && strcmp(o->path, k->path) != 0)) return 0;
    if (o->backend && (int)k->desc->backend != o->backend) return 0;
    if (cuda) return kind == QG_KIND_KQ_DEQUANT || kind == QG_KIND_KQ_GEMV;
    return kind == QG_KIND_KQ_DEQUANT || kind == QG_KIND_KQ_DOT || kind == QG_KIND_KQ_GEMV;
}

/* The CPU rows: each selected CPU kernel beside qgold's own CPU kernel, on 1 and on all threads. */
static int bench_cpu(const qgp_plugin *p, const qgv_opts *o, const qg_bench_opts *bo, const unsigned char *verified)
{
    const int all = (int)sysconf(_SC_NPROCESSORS_ONLN) > 0 ? (int)sysconf(_SC_NPROCESSORS_ONLN) : 1;
    const int thread_counts[2] = {1, all};
    const size_t rows = bo->quick ? QGV_BENCH_QUICK_ROWS : QGV_BENCH_ROWS, cols = bo->quick ? QGV_BENCH_QUICK_COLS : QGV_BENCH_COLS;
    int ok = 1, any = 0;
    for (size_t i = 0; i < p->n; i++) any |= bench_selected(p, i, o, verified, 0);
    if (!any) return 1;
    qg_set_threads(1); /* qgold's own kernels run on the bench's threads only */
    double bw[2];
    for (int ti = 0; ti < 2; ti++) bw[ti] = qg_bench_bw_read(bo, thread_counts[ti], bo->quick ? (size_t)64 << 20 : (size_t)256 << 20);
    for (size_t i = 0; i < p->n; i++) {
        if (!bench_selected(p, i, o, verified, 0)) continue;
        const qgp_kernel *k = &p->k[i];
        const qg_kind kind = k->row.kind;
        int fell_back = 0;
        const qg_kernel *own = qg_select_cpu(k->format, k->path, &fell_back);
        const qg_ktype t = (qg_ktype)qg_kq_from_name(k->format);
        const size_t rb = cols / 256 * qg_kq_block_bytes(t), nbytes = rows * rb;
        const size_t ny = kind == QG_KIND_KQ_DEQUANT ? rows * cols : rows;
        uint8_t *w = malloc(nbytes), *q8 = malloc(cols / 256 * 292);
        uint16_t *x = malloc(cols * 2);
        float *y = malloc(ny * 4), *xf = malloc(cols * 4);
        if (!w || !q8 || !x || !y || !xf || own == NULL) {
            fprintf(stderr, "qgold: bench %s: %s\n", k->name, own ? "out of memory" : "qgold has no CPU kernel of this format and path");
            ok = 0;
        } else {
            /* Ordinary blocks: quantized from uniform values by the reference quantizer; Q8_K activations likewise. */
            qg_rng g;
            qg_rng_init(&g, 0x62656E63u);
            float *row = malloc(cols * 4);
            for (size_t r = 0; r < rows && row; r++) {
                for (size_t c = 0; c < cols; c++) row[c] = qg_rng_uniform(&g, -1.0f, 1.0f);
                qg_kq_quantize_ref(t, row, 1, cols, w + r * rb, rb);
            }
            for (size_t c = 0; c < cols; c++) {
                xf[c] = qg_rng_uniform(&g, -1.0f, 1.0f);
                x[c] = qg_f32_to_f16(xf[c]);
            }
            qg_kq_quantize_ref(QG_Q8_K, xf, 1, cols, q8, cols / 256 * 292);
            free(row);
            const double bytes = (double)nbytes + (kind == QG_KIND_KQ_DEQUANT ? (double)ny * 4 : 0);
            for (int ti = 0; ti < 2; ti++) {
                bench_ctx own_c = {NULL, own, t, w, q8, x, rows, rb, cols, y, 0}, pl_c = {k, NULL, t, w, q8, x, rows, rb, cols, y, 0};
                qg_bench_row r;
                double lo, hi, t_own = bench_time(&own_c, thread_counts[ti], bo->reps, &lo, &hi);
                memset(&r, 0, sizeof r);
                r.format = k->format, r.path = k->path, r.batch = 1, r.bytes = bytes, r.eff_vs = "BW_read", r.speedup_vs = "";
                snprintf(r.shape, sizeof r.shape, "%zux%zu %dt", rows, cols, thread_counts[ti]);
                if (t_own > 0) {
                    r.backend = qg_backend_name(own->backend), r.t_med = t_own, r.t_lo = lo, r.t_hi = hi, r.eff = bytes / t_own / bw[ti];
                    qg_bench_emit(bo, &r);
                }
                double t_pl = bench_time(&pl_c, thread_counts[ti], bo->reps, &lo, &hi);
                if (t_pl < 0 || t_own < 0) {
                    fprintf(stderr, "qgold: bench %s: a call failed\n", t_pl < 0 ? k->name : own->name);
                    ok = 0;
                    continue;
                }
                r.backend = "plugin", r.t_med = t_pl, r.t_lo = lo, r.t_hi = hi, r.eff = bytes / t_pl / bw[ti];
                r.speedup = t_own / t_pl, r.speedup_vs = own->name;
                qg_bench_emit(bo, &r);
            }
        }
        free(w);
        free(q8);
        free(x);
        free(y);
        free(xf);
    }
    qg_set_threads(0);
    printf("CPU plugin rows: speedup = qgold's median / the plugin's (above 1: the plugin is faster); BW_read %.1f GB/s (1 thread), "
           "%.1f GB/s (%d threads)\n", bw[0] / 1e9, bw[1] / 1e9, all);
    return ok ? 0 : 2;
}

/* The CUDA rows. CUDA is first initialised here, after every forked verification child has finished. */
static int bench_cuda(const qgp_plugin *p, const qgv_opts *o, const qg_bench_opts *bo, const unsigned char *verified)
{
    int any = 0;
    for (size_t i = 0; i < p->n; i++) any |= bench_selected(p, i, o, verified, 1);
    if (!any) return 1;
#if QG_HAVE_CUDA
    double bw_copy = 0;
    if (qg_bench_gpu_begin(bo, &bw_copy) != 0) return 2;
    int ok = 1;
    for (size_t i = 0; i < p->n; i++)
        if (bench_selected(p, i, o, verified, 1) && qg_bench_gpu_plugin(bo, p->k[i].desc, bw_copy) != 0) ok = 0;
    printf("CUDA plugin rows: GEMV speedup = qgold's own median / the plugin's (qgold's own row: cuBLAS fp16's / qgold's); "
           "efficiency against BW_copy %.1f GB/s\n", bw_copy / 1e9);
    return ok ? 0 : 2;
#else
    (void)bo;
    printf("CUDA plugin kernels: not timed (this qgold was built without CUDA)\n");
    return 1;
#endif
}

/* Times the verified kernels of p; 0 when something was timed and nothing failed. */
static int plugin_bench(const qgp_plugin *p, const qgv_opts *o, const qg_bench_opts *bo_in, const unsigned char *verified)
{
    qg_bench_opts bo = *bo_in;
    qg_atomic_file jf;
    if (bo.format == NULL) bo.format = "plugin";
    if (bo.reps > QGV_BENCH_MAX_REPS) bo.reps = QGV_BENCH_MAX_REPS;
    printf("\nqgold bench --plugin: plugin %s beside qgold's own kernels, same data, same run%s\n", p->name,
           bo.quick ? " (--quick: small shapes, a smoke test, not a measurement)" : "");
    if (qg_bench_session_begin(&bo, &jf) != 0) return 1;
    qg_bench_note(&bo, "plugin", "%s %s (%s)", p->name, p->version, p->file);
    const int cpu = bench_cpu(p, o, &bo, verified), cuda = bench_cuda(p, o, &bo, verified);
    /* each half: 0 timed, 1 nothing of its kind, 2 failed */
    const int ok = cpu != 2 && cuda != 2 && qg_bench_rows_emitted() > 0;
    if (cpu == 1 && cuda == 1) fprintf(stderr, "qgold: bench --plugin: no verified dequant, dot or GEMV kernel of the plugin to time\n");
    if (qg_bench_session_end(&bo, &jf, ok) != 0) return 1;
    return ok ? 0 : 1;
}

/* Loads and verifies the plugin (the table, --json, --junit), then, with bo, times its verified kernels. */
static int verify_plugin(const char *plugin, qgv_opts *op, const char *json_path, const char *junit_path, const qg_bench_opts *bo)
{
    qgv_opts o = *op;
    char golden[4096];
    const int bench = bo != NULL;
    if (o.golden_dir == NULL) {
        if (qgc_find_golden(golden, sizeof golden) != 0) return 1;
        o.golden_dir = golden;
    }
    qg_err e;
    qg_err_clear(&e);
    qgp_plugin *p = NULL;
    int rc = qgv_load_isolated(plugin, o.timeout_s, &p, &e);
    if (rc != QG_ERR_ok) {
        fprintf(stderr, "qgold: %s: %s\n", qg_error_name(rc), e.msg);
        return 1;
    }
    verify_sink v;
    memset(&v, 0, sizeof v);
    v.table.first = 1, v.plugin = p->name, v.p = p;
    qg_atomic_file jf, xf;
    if (json_path != NULL) {
        if (open_out(&jf, json_path) != 0) {
            qgp_unload(p);
            return 1;
        }
        v.table.json = jf.fp;
    }
    if (junit_path != NULL) {
        if (open_out(&xf, junit_path) != 0) {
            if (json_path) qg_atomic_abort(&jf);
            qgp_unload(p);
            return 1;
        }
        v.junit = xf.fp;
    }
    printf("qgold verify: plugin %s%s%s (%s, ABI %u), %zu kernel%s; golden %s; manifest: %s\n", p->name, p->version[0] ? " " : "", p->version,
           plugin, p->abi, p->n, p->n == 1 ? "" : "s", o.golden_dir, o.no_manifest ? "not checked (--no-manifest)" : "checked");
    qgc_table_header();
    if (v.table.json != NULL) {
        fprintf(v.table.json, "{\n  \"plugin\": ");
        qgc_json_str(v.table.json, p->name);
        fprintf(v.table.json, ",\n  \"plugin_version\": ");
        qgc_json_str(v.table.json, p->version);
        fprintf(v.table.json, ",\n  \"plugin_file\": ");
        qgc_json_str(v.table.json, plugin);
        fprintf(v.table.json, ",\n  \"abi\": %u,\n  \"golden\": ", p->abi);
        qgc_json_str(v.table.json, o.golden_dir);
        fprintf(v.table.json, ",\n  \"manifest\": \"%s\",\n  \"full\": %s,\n  \"rows\": [", o.no_manifest ? "not checked" : "checked",
                o.full ? "true" : "false");
    }
    /* The JUnit header needs the counts: the cases go to a buffer first. */
    char *cases = NULL;
    size_t cases_len = 0;
    FILE *junit_file = v.junit;
    if (junit_file != NULL) v.junit = open_memstream(&cases, &cases_len);
    qg_audit_summary s;
    rc = qgv_verify(&o, p, verify_row, &v, &s);
    printf("\n%zu passed, %zu failed, %zu skipped\n", s.pass, s.fail, s.skip);
    int out_rc = 0;
    if (v.table.json != NULL) {
        fprintf(v.table.json, "\n  ],\n  \"passed\": %zu, \"failed\": %zu, \"skipped\": %zu\n}\n", s.pass, s.fail, s.skip);
        int werr = qg_atomic_commit(&jf);
        if (werr != 0) fprintf(stderr, "qgold: %s: cannot write %s: %s\n", qg_error_name(QG_ERR_io_failed), json_path, strerror(werr)), out_rc = 1;
    }
    if (junit_file != NULL) {
        if (v.junit != NULL) fclose(v.junit);
        fprintf(junit_file, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"qgold verify ");
        xml_str(junit_file, p->name);
        fprintf(junit_file, "\" tests=\"%zu\" failures=\"%zu\" skipped=\"%zu\">\n", s.pass + s.fail + s.skip, s.fail, s.skip);
        if (cases != NULL) fwrite(cases, 1, cases_len, junit_file);
        fprintf(junit_file, "</testsuite>\n");
        free(cases);
        int werr = qg_atomic_commit(&xf);
        if (werr != 0) fprintf(stderr, "qgold: %s: cannot write %s: %s\n", qg_error_name(QG_ERR_io_failed), junit_path, strerror(werr)), out_rc = 1;
    }
    unsigned char verified[QGP_MAX_KERNELS];
    for (size_t i = 0; i < p->n; i++) verified[i] = v.passed[i] && !v.failed[i];
    if (bench && s.fail == 0 && s.pass > 0) out_rc |= plugin_bench(p, &o, bo, verified);
    else if (bench && s.fail == 0) printf("\nqgold bench --plugin: nothing timed (nothing was verified: no kernel ran)\n");
    else if (bench) printf("\nqgold bench --plugin: nothing timed (the verification did not pass: no kernel of a failing plugin is timed)\n");
    qgp_unload(p);
    if (s.pass == 0 && s.fail == 0) {
        fprintf(stderr, "qgold: nothing was verified (no kernel of the plugin matches the selection, or all were skipped)\n");
        return 1;
    }
    return rc || out_rc ? 1 : 0;
}

int qgc_cmd_verify(int argc, char **argv)
{
    qgv_opts o = {NULL, NULL, NULL, 0, 0, 0, 30.0};
    const char *plugin = NULL, *json_path = NULL, *junit_path = NULL;
    int bench = 0;
    const qg_bench_opts bo = {NULL, -1, 0, 7, 0, NULL, NULL, NULL};
    static const char *const with_value[] = {"--plugin", "--format", "--path", "--backend", "--timeout", "--golden", "--json", "--junit", NULL};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("%s", k_usage_verify);
            return 0;
        }
        if (qgc_takes_value(a, with_value) && i + 1 >= argc) return qgc_usage_error(k_usage_verify, "option %s needs a value", a);
        if (strcmp(a, "--plugin") == 0) {
            plugin = argv[++i];
        } else if (strcmp(a, "--format") == 0) {
            o.format = argv[++i];
            if (!qgc_format_known(o.format)) return qgc_usage_error(k_usage_verify, "unknown format '%s' (see qgold list)", o.format);
        } else if (strcmp(a, "--path") == 0) {
            o.path = argv[++i];
        } else if (strcmp(a, "--backend") == 0) {
            const char *b = argv[++i];
            if (strcmp(b, "cpu") == 0) o.backend = QGOLD_PLUGIN_CPU;
            else if (strcmp(b, "cuda") == 0) o.backend = QGOLD_PLUGIN_CUDA;
            else return qgc_usage_error(k_usage_verify, "unknown plugin backend '%s' (cpu, cuda)", b);
        } else if (strcmp(a, "--timeout") == 0) {
            uint64_t t;
            if (qgc_parse_uint(argv[++i], 1, 3600, &t) != 0) return qgc_bad_number(k_usage_verify, a, argv[i], 1, 3600);
            o.timeout_s = (double)t;
        } else if (strcmp(a, "--golden") == 0) {
            o.golden_dir = argv[++i];
        } else if (strcmp(a, "--json") == 0) {
            json_path = argv[++i];
        } else if (strcmp(a, "--junit") == 0) {
            junit_path = argv[++i];
        } else if (strcmp(a, "--bench") == 0) {
            bench = 1;
        } else if (strcmp(a, "--full") == 0) {
            o.full = 1;
        } else if (strcmp(a, "--no-manifest") == 0) {
            o.no_manifest = 1;
        } else {
            return qgc_usage_error(k_usage_verify, "unexpected argument '%s'", a);
        }
    }
    if (plugin == NULL) return qgc_usage_error(k_usage_verify, "--plugin PATH.so is required");
    return verify_plugin(plugin, &o, json_path, junit_path, bench ? &bo : NULL);
}

int qgc_bench_plugin(const char *plugin, const qg_bench_opts *bo)
{
    qgv_opts o = {NULL, bo->format, NULL, 0, 0, 0, 30.0};
    return verify_plugin(plugin, &o, NULL, NULL, bo);
}
