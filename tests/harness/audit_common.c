/* Helpers every audit runner shares: element storage, expected errors, attribute ranges, batch
 * invariance, guarded-call failures. No format is named here. */
#include "audit_formats.h"
#include "compare.h"
#include "fixture.h"
#include "guard.h"
#include "kinds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How fixtures store each element type: the HDF5 integer type and the `dtype` attribute. */
void qga_storage_of(qg_elem t, qgh_dtype *dt, const char **logical)
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

/* An invalid case: the kernel must return exactly the error the fixture names. */
int qga_expect_error(qgh_file *f, const qgh_case_info *ci, int got, qg_err *e)
{
    int want = qg_error_from_name(ci->error);
    if (got == want) return QG_ERR_ok;
    return qg_err_set(e, QG_ERR_mismatch, "%s: case %s (%s): kernel returned %s, the fixture expects %s", qgh_name(f), ci->case_id,
                      ci->description, qg_error_name(got), ci->error);
}

int qga_attr_range(qgh_file *f, const qgh_case_info *ci, const char *attr, int64_t lo, int64_t hi, int64_t *v, qg_err *e)
{
    int rc = qgh_attr_i64(f, ci->name, attr, v, e);
    if (rc) return rc;
    if (*v < lo || *v > hi)
        return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s@%s = %lld is outside [%lld, %lld]", qgh_name(f), ci->name, attr,
                          (long long)*v, (long long)lo, (long long)hi);
    return QG_ERR_ok;
}

typedef struct {
    qga_column_fn alone;
    void *ctx;
    size_t b;
} column_call;

static int call_column(void *vc, void *out)
{
    column_call *c = vc;
    return c->alone(c->ctx, c->b, out);
}

int qga_batch_invariance(qgh_file *f, const qgh_case_info *ci, qga_column_fn alone, void *ctx, const float *y, size_t batch,
                         size_t m, float *yb, qg_err *e)
{
    for (size_t b = 0; batch > 1 && m > 0 && b < batch; b++) {
        column_call c = {alone, ctx, b};
        const int rc = qg_call_guarded(call_column, &c, yb, m, 4, e);
        if (rc != QG_ERR_ok) return qga_guard_fail(f, ci, rc, e);
        if (memcmp(yb, y + b * m, m * 4) != 0)
            return qg_err_set(e, QG_ERR_mismatch, "%s: case %s: column %zu computed alone differs from the same column in a batch of %zu "
                              "(batch invariance)", qgh_name(f), ci->case_id, b, batch);
    }
    return QG_ERR_ok;
}

int qga_read_dims(qgh_file *f, const qgh_case_info *ci, int64_t *rows, int64_t *cols, int64_t *batch, qg_err *e)
{
    int rc = QG_ERR_ok;
    if (rows && (rc = qgh_attr_i64(f, ci->name, "rows", rows, e))) return rc;
    if (cols && (rc = qgh_attr_i64(f, ci->name, "cols", cols, e))) return rc;
    if (batch && (rc = qgh_attr_i64(f, ci->name, "batch", batch, e))) return rc;
    if ((rows && (*rows < 1 || *rows > (1 << 24))) || (cols && (*cols < 1 || *cols > (1 << 24))) ||
        (batch && (*batch < 0 || *batch > 4096)))
        return qg_err_set(e, QG_ERR_fixture_attr_invalid, "%s: /%s: rows/cols/batch attributes out of range", qgh_name(f), ci->name);
    return QG_ERR_ok;
}

int qga_guard_fail(qgh_file *f, const qgh_case_info *ci, int rc, qg_err *e)
{
    char tmp[sizeof e->msg];
    snprintf(tmp, sizeof tmp, "%s", e->msg);
    return qg_err_set(e, rc, "%s: case %s: %s", qgh_name(f), ci->case_id, tmp);
}

int qga_kq_product_call(void *vc, void *out)
{
    const qga_kq_product *c = vc;
    return c->fn(c->t, c->w, c->nbytes, c->rows, c->cols, c->x, c->batch, c->f16 ? NULL : out, c->f16 ? out : NULL);
}

int qga_kq_product_column(void *vc, size_t b, void *out)
{
    qga_kq_product one = *(const qga_kq_product *)vc;
    one.x += b * one.cols;
    one.batch = 1;
    one.f16 = 0;
    return qga_kq_product_call(&one, out);
}
