/* Audit driver. Files are the outer loop (each is opened and schema-checked once, with the manifest),
 * kernels of the file's format the inner loop; a case is run by every kernel whose path it names or
 * whose kind shares it, through the kind's descriptor (kinds.h): no format is named here.
 * Every kernel call is guarded (poison + canaries, run twice: full write, no overrun, determinism). */
#include "audit.h"
#include "fixture.h"
#include "kinds.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
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

static int check_dir(const char *dir, qg_err *e)
{
    DIR *d = opendir(dir);
    if (d == NULL) return qg_err_set(e, QG_ERR_io_failed, "cannot open golden directory %s: %s", dir, strerror(errno));
    closedir(d);
    return QG_ERR_ok;
}

int qg_audit_check_golden(const qg_audit_opts *o, qg_err *e)
{
    qgh_manifest *m = NULL;
    int rc = check_dir(o->golden_dir, e);
    if (rc == QG_ERR_ok && !o->no_manifest) rc = qgh_manifest_load(o->golden_dir, &m, e);
    qgh_manifest_free(m);
    return rc;
}

int qg_audit(const qg_audit_opts *o, qg_audit_sink sink, void *ctx, qg_audit_summary *sum_out)
{
    qg_audit_summary sum = {0, 0, 0};
    qg_err e;
    qgh_manifest *m = NULL;
    qg_audit_row row;
    qg_err_clear(&e);
    int rc0 = check_dir(o->golden_dir, &e);
    if (rc0 == QG_ERR_ok && !o->no_manifest) rc0 = qgh_manifest_load(o->golden_dir, &m, &e);
    if (rc0 != QG_ERR_ok) {
        memset(&row, 0, sizeof row);
        row.format = row.path = row.backend = row.kernel = "-";
        snprintf(row.file, sizeof row.file, "%s", rc0 == QG_ERR_io_failed ? "-" : "MANIFEST");
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
                        if (!qga_case_applies(k, &ci)) continue;
                        const qga_kind *kd = qga_kind_find(k->kind);
                        rc = kd != NULL ? kd->run_case(k, f, &ci, &row, &e)
                                        : qg_err_set(&e, QG_ERR_unsupported, "kernel %s: no audit runner for its kind", k->name);
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
