/* Audit runner of the test-only format `tq8`: blocks -> float32, tier exact; invalid cases name
 * their error. */
#include "audit_formats.h"
#include "compare.h"
#include "fixture.h"
#include "guard.h"
#include "kinds.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const qg_kernel *k;
    const qgh_array *blocks;
    size_t rows, cols;
} tq8_ctx;

static int call_tq8(void *vc, void *out)
{
    tq8_ctx *c = vc;
    return c->k->fn.tq8_dequant(c->blocks->data, c->blocks->count, c->rows, c->cols, out);
}

static int run_tq8_dequant(const qg_kernel *k, qgh_file *f, const qgh_case_info *ci, qg_audit_row *row, qg_err *e)
{
    int64_t rows, cols;
    qgh_array blocks, ex;
    int rc = qga_read_dims(f, ci, &rows, &cols, NULL, e);
    if (rc || (rc = qgh_read(f, ci->name, "blocks", QGH_U8, NULL, 1, NULL, &blocks, e))) return rc;
    const size_t n = (size_t)rows * (size_t)cols;
    float *y = malloc(n ? n * 4 : 4);
    tq8_ctx c = {k, &blocks, (size_t)rows, (size_t)cols};
    if (y == NULL) {
        rc = qg_err_set(e, QG_ERR_alloc_failed, "out of memory");
    } else if (strcmp(ci->expect, "invalid") == 0) {
        rc = qga_expect_error(f, ci, call_tq8(&c, y), e);
    } else {
        size_t dims[2] = {(size_t)rows, (size_t)cols};
        if ((rc = qgh_read(f, ci->name, "expected", QGH_U32, "float32", 2, dims, &ex, e)) == QG_ERR_ok) {
            if ((rc = qg_call_guarded(call_tq8, &c, y, n, 4, e)) != QG_ERR_ok) {
                rc = qga_guard_fail(f, ci, rc, e);
            } else {
                qg_exact_report rep;
                if ((rc = qg_compare_exact(QG_ELEM_F32, ex.data, y, n, &rep)) != QG_ERR_ok)
                    qg_err_set(e, rc, "%s: case %s (%s): %s", qgh_name(f), ci->case_id, ci->description, rep.text);
                row->elements += n;
            }
            qgh_array_free(&ex);
        }
    }
    free(y);
    qgh_array_free(&blocks);
    return rc;
}

const qga_kind qga_kind_tq8_dequant = {QG_KIND_TQ8_DEQUANT, "tq8_dequant", run_tq8_dequant, NULL, NULL};
