/* The registry table and backend availability.
 *
 * Every (format, path, backend) has a row, also where the backend is not compiled into this build: the
 * row then has no function and `qgold list` says why. Kernels are reached through adapters with the
 * kind's generic signature, so no call goes through a function pointer of a mismatched type.
 */
#include "qgold/registry.h"

#include "qgold/cpu_features.h"
#include "qgold/errors.h"
#include "qgold/fp16.h"
#include "qgold/kernels_fp16.h"
#include "qgold/kernels_kquants.h"
#include "qgold/kernels_rans.h"
#include "qgold/kernels_spqr.h"
#include "registry_int8.h"
#include "registry_int4.h"
#include "registry_kquants_gemm.h"
#include "registry_kq_q8k.h"
/* qgold:row-headers-end */
#if QG_HAVE_CUDA
#include "qgold/cuda.h"
#endif

#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(_M_X64)
#define QG_BUILT_AVX2 1
#else
#define QG_BUILT_AVX2 0
#endif
#if defined(__aarch64__)
#define QG_BUILT_NEON 1
#else
#define QG_BUILT_NEON 0
#endif
#ifndef QG_HAVE_CUDA
#define QG_HAVE_CUDA 0
#endif

/* Adapters: one per (path, backend) to the convert signature. */
#define QG_CONVERT_ADAPTER(fn, tin, tout) \
    static int adapt_##fn(const void *x, void *y, size_t n) { return fn((const tin *)x, (tout *)y, n); }
#define QG_FP16_ADAPTERS(sfx)                                           \
    QG_CONVERT_ADAPTER(qg_fp16_f32_to_f16_##sfx, uint32_t, qg_f16)      \
    QG_CONVERT_ADAPTER(qg_fp16_f16_to_f32_##sfx, qg_f16, uint32_t)      \
    QG_CONVERT_ADAPTER(qg_fp16_f32_to_bf16_##sfx, uint32_t, qg_bf16)    \
    QG_CONVERT_ADAPTER(qg_fp16_bf16_to_f32_##sfx, qg_bf16, uint32_t)

QG_FP16_ADAPTERS(ref)
#if QG_BUILT_AVX2
QG_FP16_ADAPTERS(avx2)
#endif
#if QG_BUILT_NEON
QG_FP16_ADAPTERS(neon)
#endif
#if QG_HAVE_CUDA
QG_FP16_ADAPTERS(cuda)
#endif

#define QG_FP16_ROW(path, be, sfx, built, tin, tout)                                                 \
    {"fp16", #path, be, "qg_fp16_" #path "_" #sfx, QG_KIND_CONVERT, tin, tout, QG_NUMERICS_EXACT,    \
     QG_NUMERICS_EXACT, {.convert = QG_FN_##built(adapt_qg_fp16_##path##_##sfx)}}
/* QG_FN_1(f) is f; QG_FN_0(f) is NULL without naming f (it does not exist in this build). */
#define QG_FN_1(f) f
#define QG_FN_0(f) NULL
/* QG_FN(built, f): the same, with `built` macro-expanded first. */
#define QG_FN(built, f) QG_FN_I(built, f)
#define QG_FN_I(built, f) QG_FN_##built(f)
#define QG_FP16_ROWS(be, sfx, built)                                         \
    QG_FP16_ROW(f32_to_f16, be, sfx, built, QG_ELEM_F32, QG_ELEM_F16),       \
    QG_FP16_ROW(f16_to_f32, be, sfx, built, QG_ELEM_F16, QG_ELEM_F32),       \
    QG_FP16_ROW(f32_to_bf16, be, sfx, built, QG_ELEM_F32, QG_ELEM_BF16),     \
    QG_FP16_ROW(bf16_to_f32, be, sfx, built, QG_ELEM_BF16, QG_ELEM_F32)
/* K-quant rows: the functions take the type as their first argument, so no adapters are needed.
 * Which optimized K-quant paths exist (0/1 per backend): */
#define QG_KQ_AVX2 QG_BUILT_AVX2
#define QG_KQ_NEON QG_BUILT_NEON
#define QG_KQ_DEQUANT_ROW(fmt, be, sfx, built)                                                           \
    {#fmt, "dequant", be, "qg_kq_dequant_" #sfx, QG_KIND_KQ_DEQUANT, QG_ELEM_U8, QG_ELEM_F32, QG_NUMERICS_EXACT, \
     QG_NUMERICS_EXACT, {.kq_dequant = {QG_FN(built, qg_kq_dequant_f32_##sfx), QG_FN(built, qg_kq_dequant_f16_##sfx)}}}
#define QG_KQ_GEMV_ROW(fmt, be, sfx, built)                                                              \
    {#fmt, "gemv", be, "qg_kq_gemv_" #sfx, QG_KIND_KQ_GEMV, QG_ELEM_F16, QG_ELEM_F32, QG_NUMERICS_F32ACC_F32OUT, \
     QG_NUMERICS_F32ACC_F16OUT, {.kq_gemv = QG_FN(built, qg_kq_gemv_##sfx)}}
/* The dot's float result is judged against sum_i dy (D S_i - Dm M_i) with d = K (safe for every
 * evaluation order of the per-block products and the block sum). */
#define QG_KQ_DOT_ROW(fmt, be, sfx, built)                                                               \
    {#fmt, "dot_q8k", be, "qg_kq_dot_q8k_" #sfx, QG_KIND_KQ_DOT, QG_ELEM_U8, QG_ELEM_F32, QG_NUMERICS_F32ACC_F32OUT, \
     QG_NUMERICS_F32ACC_F32OUT, {.kq_dot = QG_FN(built, qg_kq_dot_q8k_##sfx)}}
#define QG_KQ_QUANTIZE_ROW(fmt)                                                                          \
    {#fmt, "quantize", QG_BACKEND_REF, "qg_kq_quantize_ref", QG_KIND_KQ_QUANTIZE, QG_ELEM_F32, QG_ELEM_U8, \
     QG_NUMERICS_EXACT, QG_NUMERICS_EXACT, {.kq_quantize = qg_kq_quantize_ref}}
#define QG_KQ_ROWS(fmt, dot)                                                                             \
    QG_KQ_DEQUANT_ROW(fmt, QG_BACKEND_REF, ref, 1), QG_KQ_DEQUANT_ROW(fmt, QG_BACKEND_AVX2, avx2, QG_KQ_AVX2), \
    QG_KQ_DEQUANT_ROW(fmt, QG_BACKEND_NEON, neon, QG_KQ_NEON), QG_KQ_DEQUANT_ROW(fmt, QG_BACKEND_CUDA, cuda, QG_HAVE_CUDA), \
    QG_KQ_QUANTIZE_ROW(fmt),                                                                             \
    QG_KQ_GEMV_ROW(fmt, QG_BACKEND_REF, ref, 1), QG_KQ_GEMV_ROW(fmt, QG_BACKEND_AVX2, avx2, QG_KQ_AVX2),    \
    QG_KQ_GEMV_ROW(fmt, QG_BACKEND_NEON, neon, QG_KQ_NEON), QG_KQ_GEMV_ROW(fmt, QG_BACKEND_CUDA, cuda, QG_HAVE_CUDA) dot
#define QG_KQ_DOTS(fmt)                                                                                  \
    , QG_KQ_DOT_ROW(fmt, QG_BACKEND_REF, ref, 1), QG_KQ_DOT_ROW(fmt, QG_BACKEND_AVX2, avx2, QG_KQ_AVX2),   \
    QG_KQ_DOT_ROW(fmt, QG_BACKEND_NEON, neon, QG_KQ_NEON)

/* SpQR rows: the dense dequantization (exact) and the GEMV (bounded; the audit takes d from the
 * layer: n plus the longest outlier row). Which kernels exist (0/1 per backend): */
#define QG_SPQR_REF 1
#define QG_SPQR_AVX2 QG_BUILT_AVX2
#define QG_SPQR_NEON QG_BUILT_NEON
#define QG_SPQR_CUDA QG_HAVE_CUDA
#define QG_SPQR_GEMV_ROW_N(be, sfx, built, nm32, nm16)                                                   \
    {"spqr", "gemv", be, "qg_spqr_gemv_" #sfx, QG_KIND_SPQR_GEMV, QG_ELEM_F16, QG_ELEM_F32, nm32, nm16,       \
     {.spqr_gemv = QG_FN(built, qg_spqr_gemv_##sfx)}}
#define QG_SPQR_GEMV_ROW(be, sfx, built) QG_SPQR_GEMV_ROW_N(be, sfx, built, QG_NUMERICS_F32ACC_F32OUT, QG_NUMERICS_F32ACC_F16OUT)
/* The CUDA GEMV's dense part runs on tensor cores (fp16 weights as decoded, e_k = 0): u_acc = QG_MMA_U_ACC,
 * d = n + longest outlier row as for the others (kernels/cuda/spqr.cu, reference/spec/numerics.md). */
#define QG_SPQR_ROWS                                                                                     \
    {"spqr", "dequant", QG_BACKEND_REF, "qg_spqr_dequant_ref", QG_KIND_SPQR_DEQUANT, QG_ELEM_U64, QG_ELEM_F16,   \
     QG_NUMERICS_EXACT, QG_NUMERICS_EXACT, {.spqr_dequant = QG_FN(QG_SPQR_REF, qg_spqr_dequant_ref)}},   \
    QG_SPQR_GEMV_ROW(QG_BACKEND_REF, ref, QG_SPQR_REF), QG_SPQR_GEMV_ROW(QG_BACKEND_AVX2, avx2, QG_SPQR_AVX2), \
    QG_SPQR_GEMV_ROW(QG_BACKEND_NEON, neon, QG_SPQR_NEON), QG_SPQR_GEMV_ROW_N(QG_BACKEND_CUDA, cuda, QG_SPQR_CUDA, QG_NUMERICS_MMA_F32OUT, QG_NUMERICS_MMA_F16OUT)

/* rANS rows: normalization and encoding (reference only), decoding, the fused product and the plain
 * int8 GEMV baseline; all exact. Which kernels exist (0/1 per backend): */
#define QG_RANS_REF 1
#define QG_RANS_AVX2 QG_BUILT_AVX2
#define QG_RANS_NEON QG_BUILT_NEON
#define QG_RANS_CUDA QG_HAVE_CUDA
#define QG_RANS_BACKEND_ROWS(be, sfx, built)                                                             \
    {"rans", "decode", be, "qg_rans_decode_" #sfx, QG_KIND_RANS_DECODE, QG_ELEM_U8, QG_ELEM_U8, QG_NUMERICS_EXACT, \
     QG_NUMERICS_EXACT, {.rans_decode = QG_FN(built, qg_rans_decode_##sfx)}},                           \
    {"rans", "gemv", be, "qg_rans_gemv_" #sfx, QG_KIND_RANS_GEMV, QG_ELEM_F16, QG_ELEM_F32, QG_NUMERICS_EXACT,      \
     QG_NUMERICS_EXACT, {.rans_gemv = QG_FN(built, qg_rans_gemv_##sfx)}},                               \
    {"rans", "int8_gemv", be, "qg_int8_gemv_" #sfx, QG_KIND_INT8_GEMV, QG_ELEM_F16, QG_ELEM_F32, QG_NUMERICS_EXACT, \
     QG_NUMERICS_EXACT, {.int8_gemv = QG_FN(built, qg_int8_gemv_##sfx)}}
#define QG_RANS_ROWS                                                                                     \
    {"rans", "normalize", QG_BACKEND_REF, "qg_rans_normalize", QG_KIND_RANS_NORMALIZE, QG_ELEM_U64, QG_ELEM_U16, \
     QG_NUMERICS_EXACT, QG_NUMERICS_EXACT, {.rans_normalize = QG_FN(QG_RANS_REF, qg_rans_normalize)}},   \
    {"rans", "encode", QG_BACKEND_REF, "qg_rans_encode", QG_KIND_RANS_ENCODE, QG_ELEM_U8, QG_ELEM_U8,       \
     QG_NUMERICS_EXACT, QG_NUMERICS_EXACT, {.rans_encode = QG_FN(QG_RANS_REF, qg_rans_encode)}},         \
    QG_RANS_BACKEND_ROWS(QG_BACKEND_REF, ref, QG_RANS_REF), QG_RANS_BACKEND_ROWS(QG_BACKEND_AVX2, avx2, QG_RANS_AVX2), \
    QG_RANS_BACKEND_ROWS(QG_BACKEND_NEON, neon, QG_RANS_NEON), QG_RANS_BACKEND_ROWS(QG_BACKEND_CUDA, cuda, QG_RANS_CUDA)

/* `built` goes through one more macro level so QG_BUILT_* expand to 0/1 before pasting. */
static const qg_kernel k_rows[] = {
    QG_FP16_ROWS(QG_BACKEND_REF, ref, 1),
    QG_FP16_ROWS(QG_BACKEND_AVX2, avx2, QG_BUILT_AVX2),
    QG_FP16_ROWS(QG_BACKEND_NEON, neon, QG_BUILT_NEON),
    QG_FP16_ROWS(QG_BACKEND_CUDA, cuda, QG_HAVE_CUDA),
    QG_KQ_ROWS(q4_k, QG_KQ_DOTS(q4_k)),
    QG_KQ_ROWS(q5_k, QG_KQ_DOTS(q5_k)),
    QG_KQ_ROWS(q6_k, QG_KQ_DOTS(q6_k)),
    QG_KQ_ROWS(q8_k, ),
    QG_SPQR_ROWS,
    QG_RANS_ROWS,
    QG_INT8_ROWS,
    QG_INT4_ROWS,
    QG_KQ_GEMM_ROWS,
    QG_KQ_Q8K_ROWS,
    /* qgold:rows-end */
};

size_t qg_registry_count(void) { return sizeof k_rows / sizeof k_rows[0]; }

const qg_kernel *qg_registry_at(size_t i) { return i < qg_registry_count() ? &k_rows[i] : NULL; }

const qg_kernel *qg_registry_find(const char *format, const char *path, qg_backend b)
{
    for (size_t i = 0; i < qg_registry_count(); i++)
        if (k_rows[i].backend == b && strcmp(k_rows[i].format, format) == 0 && strcmp(k_rows[i].path, path) == 0)
            return &k_rows[i];
    return NULL;
}

static const char *const k_backend_names[QG_BACKEND_COUNT] = {"ref", "avx2", "neon", "cuda"};

const char *qg_backend_name(qg_backend b) { return (unsigned)b < QG_BACKEND_COUNT ? k_backend_names[b] : "?"; }

int qg_backend_from_name(const char *name)
{
    for (int b = 0; b < QG_BACKEND_COUNT; b++)
        if (name != NULL && strcmp(name, k_backend_names[b]) == 0) return b;
    return -1;
}

size_t qg_elem_size(qg_elem e)
{
    switch (e) {
    case QG_ELEM_U8: return 1;
    case QG_ELEM_U16: case QG_ELEM_F16: case QG_ELEM_BF16: return 2;
    case QG_ELEM_U32: case QG_ELEM_F32: case QG_ELEM_I32: return 4;
    case QG_ELEM_F64: case QG_ELEM_U64: return 8;
    }
    return 0;
}

const char *qg_elem_name(qg_elem e)
{
    switch (e) {
    case QG_ELEM_U8: return "uint8";
    case QG_ELEM_U16: return "uint16";
    case QG_ELEM_U32: return "uint32";
    case QG_ELEM_F16: return "float16";
    case QG_ELEM_BF16: return "bfloat16";
    case QG_ELEM_F32: return "float32";
    case QG_ELEM_F64: return "float64";
    case QG_ELEM_I32: return "int32";
    case QG_ELEM_U64: return "uint64";
    }
    return "?";
}

static int say(char *why, size_t len, const char *msg)
{
    if (why != NULL && len > 0) snprintf(why, len, "%s", msg);
    return 0;
}

/* A SIMD backend is usable when compiled for this architecture, present in the CPU, and not excluded
 * by QG_FORCE_ISA (which names the one CPU ISA tests want; "scalar" leaves only the reference). */
static int cpu_simd_available(const char *isa, int built, unsigned feature, char *why, size_t len)
{
    char buf[160];
    const char *forced = qg_forced_isa();
    if (!built) {
        snprintf(buf, sizeof buf, "not compiled: %s kernels exist only in %s builds", isa,
                 strcmp(isa, "avx2") == 0 ? "x86-64" : "aarch64");
        return say(why, len, buf);
    }
    if (!(qg_cpu_features() & feature)) {
        return say(why, len, strcmp(isa, "avx2") == 0 ? "CPU lacks AVX2+F16C+FMA or the OS does not save YMM state"
                                                     : "CPU lacks Advanced SIMD (HWCAP_ASIMD)");
    }
    if (qg_forced_isa_error(buf, sizeof buf) != NULL) return say(why, len, buf);
    if (forced[0] != '\0' && strcmp(forced, isa) != 0) {
        snprintf(buf, sizeof buf, "excluded by QG_FORCE_ISA=%s", forced);
        return say(why, len, buf);
    }
    return 1;
}

int qg_backend_available(qg_backend b, char *why, size_t why_len)
{
    switch (b) {
    case QG_BACKEND_REF: return 1;
    case QG_BACKEND_AVX2: return cpu_simd_available("avx2", QG_BUILT_AVX2, QG_CPU_AVX2, why, why_len);
    case QG_BACKEND_NEON: return cpu_simd_available("neon", QG_BUILT_NEON, QG_CPU_NEON, why, why_len);
    case QG_BACKEND_CUDA:
#if QG_HAVE_CUDA
        return qg_cuda_device_count(why, why_len) > 0;
#else
        return say(why, why_len, "not compiled: this build has no CUDA (configure where nvcc is found)");
#endif
    default: return say(why, why_len, "unknown backend");
    }
}

int qg_kernel_built(const qg_kernel *k) { return k != NULL && k->fn.any != NULL; }

int qg_kernel_available(const qg_kernel *k, char *why, size_t why_len)
{
    if (k == NULL) return say(why, why_len, "no such kernel");
    if (!qg_backend_available(k->backend, why, why_len)) return 0;
    if (!qg_kernel_built(k)) return say(why, why_len, "no kernel for this path on this backend yet");
    return 1;
}

const qg_kernel *qg_select_cpu(const char *format, const char *path, int *fell_back)
{
    static const qg_backend order[] = {QG_BACKEND_AVX2, QG_BACKEND_NEON};
    int had_simd_row = 0;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const qg_kernel *k = qg_registry_find(format, path, order[i]);
        if (k == NULL) continue;
        if (qg_kernel_built(k)) had_simd_row = 1;
        if (qg_kernel_available(k, NULL, 0)) {
            if (fell_back) *fell_back = 0;
            return k;
        }
    }
    if (fell_back) *fell_back = had_simd_row;
    return qg_registry_find(format, path, QG_BACKEND_REF);
}
