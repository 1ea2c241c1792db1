/* Audit driver. Files are the outer loop (each is opened and schema-checked once, with the manifest),
 * kernels of the file's format the inner loop; a case is run by every kernel whose path it names.
 * Every kernel call is guarded (poison + canaries, run twice: full write, no overrun, determinism). */
#include "audit.h"

#include "compare.h"
#include "fixture.h"
#include "guard.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_names(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

size_t qg_list_fixture_files(const char *golden_dir, const char *format, char names[][256], size_t max)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", golden_dir, format);
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    size_t n = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL && n < max) {
        size_t L = strlen(ent->d_name);
        if (L > 3 && L < 200 && strcmp(ent->d_name + L - 3, ".h5") == 0) snprintf(names[n++], 256, "%s/%s", format, ent->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof names[0], cmp_names);
    return n;
}

/* How fixtures store each element type: the HDF5 integer type and the `dtype` attribute. */
static void storage_of(qg_elem t, qgh_dtype *dt, const char **logical)
{
    *logical = NULL;
    *dt = QGH_U8;
    switch (t) {
    case QG_ELEM_U8: *dt = QGH_U8; break;
    case QG_ELEM_U16: *dt = QGH_U16; break;
    case QG_ELEM_U32: *dt = QGH_U32; break;
    case QG_ELEM_I32: *dt = QGH_I32; break;
    case QG_ELEM_F16: *dt = QGH_U16; *logical = "float16"; break;
    case QG_ELEM_BF16: *dt = QGH_U16; *logical = "bfloat16"; break;
    case QG_ELEM_F32: *dt = QGH_U32; *logical = "float32"; break;
    case QG_ELEM_F64: *dt = QGH_F64; break;
    case QG_ELEM_U64: *dt = QGH_U64; break;
    }
}

typedef struct {
    const qg_kernel *k;
    const void *x;
    size_t n;
} convert_ctx;

static int call_convert(void *ctx, void *out)
{
    convert_ctx *c = ctx;
    return c->k->fn.convert(c->x, out, c->n);
}

/* QG_KIND_CONVERT: datasets x and expected of equal length; tier 1. */
static int run_convert_case(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    qgh_dtype dx, dy;
    const char *lx, *ly;
    qgh_array x, y;
    storage_of(k->in_elem, &dx, &lx);
    storage_of(k->out_elem, &dy, &ly);
    int rc = qgh_read(f, ci->name, "x", dx, lx, 1, NULL, &x, e);
    if (rc != QG_ERR_ok) return rc;
    size_t dims[1] = {x.dims[0]};
    rc = qgh_read(f, ci->name, "expected", dy, ly, 1, dims, &y, e);
    if (rc != QG_ERR_ok) {
        qgh_array_free(&x);
        return rc;
    }
    size_t n = x.count, esz = qg_elem_size(k->out_elem);
    void *got = malloc(n > 0 ? n * esz : 1);
    if (got == NULL) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    } else {
        convert_ctx c = {k, x.data, n};
        rc = qg_call_guarded(call_convert, &c, got, n, esz, e);
        if (rc != QG_ERR_ok) {
            char tmp[sizeof e->msg];
            snprintf(tmp, sizeof tmp, "%s", e->msg);
            qg_err_set(e, rc, "%s: case %s: %s", qgh_name(f), ci->case_id, tmp);
        } else {
            qg_exact_report rep;
            rc = qg_compare_exact(k->out_elem, y.data, got, n, &rep);
            if (rc != QG_ERR_ok) {
                char in[64];
                qg_elem_format(k->in_elem, x.data, rep.index, in, sizeof in);
                qg_err_set(e, rc, "%s: case %s (%s): input %s: %s; fixtures come from generators/regen.py", qgh_name(f),
                           ci->case_id, ci->description, in, rep.text);
            }
            row->elements += n;
        }
    }
    free(got);
    qgh_array_free(&x);
    qgh_array_free(&y);
    return rc;
}

static int run_case(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    switch (k->kind) {
    case QG_KIND_CONVERT:
        if (strcmp(ci->expect, "valid") != 0)
            return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s@expect: conversions have no invalid inputs", qgh_name(f), ci->name);
        return run_convert_case(k, f, ci, row, e);
    }
    return qg_err_set(e, QG_ERR_unsupported, "kernel %s: no audit runner for its kind", k->name);
}

static void init_row(qg_audit_row *row, const qg_kernel *k, const char *file)
{
    memset(row, 0, sizeof *row);
    row->format = k->format;
    row->path = k->path;
    row->backend = qg_backend_name(k->backend);
    row->kernel = k->name;
    row->tier = k->numerics.tier;
    snprintf(row->file, sizeof row->file, "%s", file);
}

static int format_selected(const qg_audit_opts *o, const char *fmt)
{
    return o->format == NULL || strcmp(o->format, fmt) == 0;
}

static void emit(qg_audit_row *row, qg_audit_sink sink, void *ctx, qg_audit_summary *sum)
{
    if (row->verdict == QG_AUDIT_PASS) sum->pass++;
    else if (row->verdict == QG_AUDIT_FAIL) sum->fail++;
    else sum->skip++;
    if (sink) sink(row, ctx);
}

int qg_audit(const qg_audit_opts *o, qg_audit_sink sink, void *ctx, qg_audit_summary *sum_out)
{
    qg_audit_summary sum = {0, 0, 0};
    qg_err e;
    qgh_manifest *m = NULL;
    qg_audit_row row;
    qg_err_clear(&e);
    if (qgh_manifest_load(o->golden_dir, &m, &e) != QG_ERR_ok) {
        memset(&row, 0, sizeof row);
        row.format = row.path = row.backend = row.kernel = "-";
        snprintf(row.file, sizeof row.file, "MANIFEST");
        row.verdict = QG_AUDIT_FAIL;
        snprintf(row.detail, sizeof row.detail, "%s", e.msg);
        emit(&row, sink, ctx, &sum);
        if (sum_out) *sum_out = sum;
        return 1;
    }
    /* Formats in registry order, each once. */
    const size_t nk = qg_registry_count();
    for (size_t i = 0; i < nk; i++) {
        const char *fmt = qg_registry_at(i)->format;
        int seen = 0;
        for (size_t j = 0; j < i; j++) seen |= strcmp(qg_registry_at(j)->format, fmt) == 0;
        if (seen || !format_selected(o, fmt)) continue;

        /* Rows of this format that will run; the others are reported as skipped once. */
        const qg_kernel *run[64];
        size_t nrun = 0;
        size_t cases_of[64] = {0};
        for (size_t j = 0; j < nk; j++) {
            const qg_kernel *k = qg_registry_at(j);
            if (strcmp(k->format, fmt) != 0 || (o->backend >= 0 && (int)k->backend != o->backend)) continue;
            char why[200];
            if (!qg_kernel_available(k, why, sizeof why)) {
                init_row(&row, k, "-");
                row.verdict = QG_AUDIT_SKIP;
                snprintf(row.detail, sizeof row.detail, "%s", why);
                emit(&row, sink, ctx, &sum);
            } else if (nrun < 64) {
                run[nrun++] = k;
            }
        }
        if (nrun == 0) continue;

        static char files[256][256];
        size_t nf = qg_list_fixture_files(o->golden_dir, fmt, files, 256);
        if (nf == 0) {
            memset(&row, 0, sizeof row);
            row.format = fmt;
            row.path = row.backend = row.kernel = "-";
            snprintf(row.file, sizeof row.file, "%s/", fmt);
            row.verdict = QG_AUDIT_FAIL;
            snprintf(row.detail, sizeof row.detail, "%s/%s: no fixture files; regenerate with generators/regen.py", o->golden_dir, fmt);
            emit(&row, sink, ctx, &sum);
            continue;
        }
        for (size_t fi = 0; fi < nf; fi++) {
            qgh_file *f = NULL;
            int rc = qgh_open(o->golden_dir, files[fi], m, &f, &e);
            if (rc == QG_ERR_ok) rc = qgh_lint(f, &e);
            if (rc != QG_ERR_ok) {
                memset(&row, 0, sizeof row);
                row.format = fmt;
                row.path = row.backend = row.kernel = "-";
                snprintf(row.file, sizeof row.file, "%s", files[fi]);
                row.verdict = QG_AUDIT_FAIL;
                snprintf(row.detail, sizeof row.detail, "%s [%s]", e.msg, qg_error_name(rc));
                emit(&row, sink, ctx, &sum);
                qgh_close(f);
                continue;
            }
            for (size_t r = 0; r < nrun; r++) {
                const qg_kernel *k = run[r];
                init_row(&row, k, files[fi]);
                for (size_t c = 0; c < qgh_case_count(f) && row.verdict != QG_AUDIT_FAIL; c++) {
                    qgh_case_info ci;
                    if ((rc = qgh_read_case_info(f, qgh_case_name(f, c), &ci, &e)) == QG_ERR_ok) {
                        if (strcmp(ci.path, k->path) != 0) continue;
                        rc = run_case(k, f, &ci, &row, &e);
                        row.cases++;
                    }
                    if (rc != QG_ERR_ok) {
                        row.verdict = QG_AUDIT_FAIL;
                        snprintf(row.detail, sizeof row.detail, "%s [%s]", e.msg, qg_error_name(rc));
                    }
                }
                if (row.cases == 0 && row.verdict != QG_AUDIT_FAIL) continue; /* file has nothing for this path */
                cases_of[r] += row.cases;
                emit(&row, sink, ctx, &sum);
            }
            qgh_close(f);
        }
        for (size_t r = 0; r < nrun; r++) {
            if (cases_of[r] > 0) continue;
            init_row(&row, run[r], "-");
            row.verdict = QG_AUDIT_FAIL;
            snprintf(row.detail, sizeof row.detail, "no fixture in %s/%s exercises path %s", o->golden_dir, fmt, run[r]->path);
            emit(&row, sink, ctx, &sum);
        }
    }
    qgh_manifest_free(m);
    if (sum_out) *sum_out = sum;
    return sum.fail ? 1 : 0;
}
