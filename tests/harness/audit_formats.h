/* Internal to the audit: the helpers (audit_common.c) every per-format runner (audit_<format>.c)
 * shares. A runner checks one fixture case with one kernel, at the kernel's tier, through guarded
 * calls (guard.h), and adds what it compared to `row`; it is reached through its kind's descriptor
 * (kinds.h). */
#ifndef QGOLD_AUDIT_FORMATS_H
#define QGOLD_AUDIT_FORMATS_H

#include "audit.h"
#include "fixture.h"
#include "kinds.h"

#include <stdint.h>

/* An invalid case: `got` must be exactly the error the fixture names (ci->error). */
int qga_expect_error(qgh_file *f, const qgh_case_info *ci, int got, qg_err *e);
/* Prefixes a guarded call's failure with the file and case id. */
int qga_guard_fail(qgh_file *f, const qgh_case_info *ci, int rc, qg_err *e);
/* An int64 case attribute that must lie in [lo, hi] (fixture_attr_invalid otherwise). */
int qga_attr_range(qgh_file *f, const qgh_case_info *ci, const char *attr, int64_t lo, int64_t hi, int64_t *v, qg_err *e);

/* Runs the kernel of `ctx` on column b of its activations alone (batch 1, float32 output of m rows). */
typedef int (*qga_column_fn)(void *ctx, size_t b, void *out);
/* Batch invariance (numerics.md): y holds the float32 output of one call over every column (batch x m);
 * each column computed alone, through guarded calls into yb (m floats), must give the same bits. */
int qga_batch_invariance(qgh_file *f, const qgh_case_info *ci, qga_column_fn alone, void *ctx, const float *y, size_t batch,
                         size_t m, float *yb, qg_err *e);

/* How fixtures store an element type: the HDF5 integer type and the `dtype` attribute (NULL if none). */
void qga_storage_of(qg_elem t, qgh_dtype *dt, const char **logical);
/* The rows / cols / batch attributes (each pointer optional), range-checked. */
int qga_read_dims(qgh_file *f, const qgh_case_info *ci, int64_t *rows, int64_t *cols, int64_t *batch, qg_err *e);

/* The on-the-fly checks of the K-quant kinds (audit_kquants_gen.c), for their descriptors. */
size_t qga_kq_dequant_generated(const qg_kernel *k, int full, qga_generated *out, size_t max);
size_t qga_kq_dot_generated(const qg_kernel *k, int full, qga_generated *out, size_t max);
size_t qga_kq_gemv_generated(const qg_kernel *k, int full, qga_generated *out, size_t max);
/* One K-quant product call (the fused GEMV and the tensor-core gemm take the same arguments): the
 * function and its arguments, float32 output unless f16. qga_kq_product_call is a qg_guarded_fn,
 * qga_kq_product_column a qga_column_fn (column b alone, float32). */
typedef struct {
    qg_kq_gemv_fn fn;
    qg_ktype t;
    const void *w;
    size_t nbytes, rows, cols, batch;
    const uint16_t *x;
    int f16;
} qga_kq_product;
int qga_kq_product_call(void *ctx, void *out);
int qga_kq_product_column(void *ctx, size_t b, void *out);

#endif
