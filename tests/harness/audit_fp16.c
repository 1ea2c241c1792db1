/* Audit runner of the fp16/bf16 conversions (kind convert): datasets x and expected, tier 1. */
#include "audit_formats.h"
#include "compare.h"
#include "fixture.h"
#include "guard.h"
#include "kinds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int run_convert_case(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    qgh_dtype dx, dy;
    const char *lx, *ly;
    qgh_array x, y;
    qga_storage_of(k->in_elem, &dx, &lx);
    qga_storage_of(k->out_elem, &dy, &ly);
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

static int run_convert(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    if (strcmp(ci->expect, "valid") != 0)
        return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s@expect: conversions have no invalid inputs", qgh_name(f), ci->name);
    return run_convert_case(k, f, ci, row, e);
}

const qga_kind qga_kind_convert = {QG_KIND_CONVERT, "convert", run_convert, NULL, NULL};
