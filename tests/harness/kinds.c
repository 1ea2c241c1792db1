/* The table of kernel kinds. Each runner file (audit_<format>.c) exports its descriptors; a new kind
 * is one X(...) line here. */
#include "kinds.h"

#include <string.h>

/* X(descriptor) for every kind, in registry order of their formats. */
#define QGA_KINDS(X)       \
    X(qga_kind_convert)     \
    X(qga_kind_kq_dequant)  \
    X(qga_kind_kq_quantize) \
    X(qga_kind_kq_dot)      \
    X(qga_kind_kq_gemv)     \
    X(qga_kind_kq_gemm)     \
    X(qga_kind_kq_gemv_q8k) \
    X(qga_kind_spqr_dequant) \
    X(qga_kind_spqr_gemv)   \
    X(qga_kind_rans_normalize) \
    X(qga_kind_rans_encode) \
    X(qga_kind_rans_decode) \
    X(qga_kind_rans_gemv)   \
    X(qga_kind_int8_gemv)   \
    X(qga_kind_int8_quantize) \
    X(qga_kind_int8_dequant) \
    X(qga_kind_int8_w8a8)   \
    X(qga_kind_int8_w8a16) \
    X(qga_kind_int4_quantize) \
    X(qga_kind_int4_dequant) \
    X(qga_kind_int4_gemm_packed) \
    X(qga_kind_int4_w4a16_decode) \
    X(qga_kind_int4_w4a16_gemv) \
    X(qga_kind_int4_import_gptq) \
    X(qga_kind_int4_import_awq) \
    /* qgold:kinds-end */

#define QGA_DECLARE(d) extern const qga_kind d;
QGA_KINDS(QGA_DECLARE)
#define QGA_ENTRY(d) &d,
static const qga_kind *const k_kinds[] = {QGA_KINDS(QGA_ENTRY)};

const qga_kind *qga_kind_find(qg_kind kind)
{
    for (size_t i = 0; i < sizeof k_kinds / sizeof k_kinds[0]; i++)
        if (k_kinds[i]->kind == kind) return k_kinds[i];
    return NULL;
}

int qga_case_applies(const qg_kernel *k, const qgh_case_info *ci)
{
    if (strcmp(ci->path, k->path) == 0) return 1;
    const qga_kind *d = qga_kind_find(k->kind);
    return d != NULL && d->shares != NULL && d->shares(k, ci);
}
