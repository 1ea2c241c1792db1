/* The registry: one row per (format, path, backend), with the kernel and its numerics declaration.
 *
 * Tests, the audit and the CLI iterate this table, so a kernel gets coverage by having a row. The
 * numerics declaration is the only place a kernel's accuracy is stated; the tier-2 bound of
 * numerics (reference/spec/numerics.md) is computed from it, never from a literal in a test.
 */
#ifndef QGOLD_REGISTRY_H
#define QGOLD_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "qgold/intq.h"
#include "qgold/int4.h"
#include "qgold/kquants.h"
#include "qgold/rans.h"
#include "qgold/spqr.h"
/* qgold:includes-end */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    QG_BACKEND_REF = 0, /* the plain-C reference: always available */
    QG_BACKEND_AVX2,    /* x86-64 with AVX2 + F16C + FMA, chosen at run time */
    QG_BACKEND_NEON,    /* aarch64 Advanced SIMD */
    QG_BACKEND_CUDA,    /* an NVIDIA GPU */
    QG_BACKEND_COUNT
} qg_backend;

typedef enum {
    QG_TIER_EXACT = 1,   /* bit-exact against the reference / fixture */
    QG_TIER_BOUNDED = 2, /* within the rigorous bound of numerics.md section 3 */
} qg_tier;

/* Element types of kernel inputs and outputs; they decide how comparisons treat NaN. */
typedef enum {
    QG_ELEM_U8 = 1,
    QG_ELEM_U16,
    QG_ELEM_U32,
    QG_ELEM_F16,  /* fp16 bits in uint16 */
    QG_ELEM_BF16, /* bf16 bits in uint16 */
    QG_ELEM_F32,  /* float32 (bits in uint32 where exactness matters) */
    QG_ELEM_F64,
    QG_ELEM_I32,
    QG_ELEM_U64,
} qg_elem;

size_t qg_elem_size(qg_elem e);
const char *qg_elem_name(qg_elem e);

/* Numerics declaration (numerics.md section 3):
 *   |y_hat - y*| <= u_out |y*| + (1 + u_out)(gamma_d(u_acc) sum|w x| + sum e|x|) + eta
 * d is the longest rounding chain of a product: the reduction length K unless the kernel declares a
 * shorter chain (d_fixed > 0, e.g. a tree or split-K reduction). Exact kernels leave the rest 0. */
typedef struct {
    qg_tier tier;
    double u_acc;        /* accumulator unit roundoff: 2^-24 float32, 2^-11 fp16 */
    long d_fixed;        /* 0: d = K */
    double u_out;        /* output rounding: 2^-24 float32 output, 2^-11 fp16 output */
    double eta;          /* absolute underflow floor: 2^-149 float32 output, 2^-24 fp16 output */
    int nondeterministic; /* 1 only for kernels using float atomics; then judged by the bound only */
    double out_overflow;  /* magnitude from which the output format rounds to inf (65520 for fp16);
                           * 0: an infinite output for a finite y* is always wrong */
} qg_numerics;

#define QG_NUMERICS_EXACT {QG_TIER_EXACT, 0.0, 0, 0.0, 0.0, 0, 0.0}
/* float32 accumulation over the whole reduction (d = K), float32 / fp16 outputs. float32 rounds to
 * inf from the midpoint between FLT_MAX and 2^128. */
#define QG_NUMERICS_F32ACC_F32OUT {QG_TIER_BOUNDED, 0x1p-24, 0, 0x1p-24, 0x1p-149, 0, 0x1.ffffffp127}
#define QG_NUMERICS_F32ACC_F16OUT {QG_TIER_BOUNDED, 0x1p-24, 0, 0x1p-11, 0x1p-24, 0, 65520.0}
/* One fp16 tensor-core block (mma.sync m16n8k16, float32 accumulator) adds its products into c within
 * QG_MMA_U_ACC (|c| + sum |p|) (reference/spec/numerics.md, "Tensor-core accumulation"). The shared
 * model's 2 units of 2^-23 (2^-22) was exceeded on an H100 (3.46 units measured by gpu.tc_probe.cuda),
 * so qgold declares 4 units; the probe fails above this value. */
#define QG_MMA_U_ACC 0x1p-21
/* float32 accumulation on tensor cores (u_acc = QG_MMA_U_ACC, d = K), float32 / fp16 outputs */
#define QG_NUMERICS_MMA_F32OUT {QG_TIER_BOUNDED, QG_MMA_U_ACC, 0, 0x1p-24, 0x1p-149, 0, 0x1.ffffffp127}
#define QG_NUMERICS_MMA_F16OUT {QG_TIER_BOUNDED, QG_MMA_U_ACC, 0, 0x1p-11, 0x1p-24, 0, 65520.0}

/* Kernel kinds: each kind has one C signature and one audit runner. */
typedef enum {
    QG_KIND_CONVERT = 1, /* y[i] = f(x[i]), n elements */
    QG_KIND_KQ_DEQUANT,  /* K-quant blocks -> float32 and fp16 (exact) */
    QG_KIND_KQ_QUANTIZE, /* float32 -> K-quant blocks (exact, reference algorithm) */
    QG_KIND_KQ_DOT,      /* weight row . Q8_K row: exact integers S, M; bounded float result */
    QG_KIND_KQ_GEMV,     /* fused dequant + GEMV, fp16 activations, batch 1..16 (bounded) */
    QG_KIND_SPQR_DEQUANT, /* SpQR layer -> dense fp16 weights (exact) */
    QG_KIND_SPQR_GEMV,   /* SpQR dense + outliers + permutation GEMV, batch 1..16 (bounded, d = n + row nnz) */
    QG_KIND_RANS_NORMALIZE, /* histogram -> 12-bit frequency table (exact) */
    QG_KIND_RANS_ENCODE, /* W, scales, predictor requests -> container bytes (exact) */
    QG_KIND_RANS_DECODE, /* container -> W bytes (exact) */
    QG_KIND_RANS_GEMV,   /* fused decode + dequant + GEMV, pinned order (exact) */
    QG_KIND_INT8_GEMV,   /* plain int8 W8A16 GEMV with the fused product's order (exact) */
    QG_KIND_INT8_QUANTIZE = 600, /* float32/fp16 -> int8 codes + scales, per tensor/row/group (exact) */
    QG_KIND_INT8_DEQUANT,        /* int8 codes + scales -> float32 and fp16 (exact) */
    QG_KIND_INT8_W8A8,           /* int8 x int8 GEMM: int32 sums and the pinned epilogue (exact) */
    QG_KIND_INT8_W8A16,          /* int8 weights x fp16 activations (bounded, d = K) */
    QG_KIND_INT4_QUANTIZE = 650,   /* float32/fp16 -> int4 codes + scales, per tensor/row/group (exact) */
    QG_KIND_INT4_DEQUANT = 651,    /* int4 codes + scales -> float32 and fp16 (exact) */
    QG_KIND_INT4_GEMM_PACKED = 652, /* packed int4 x int4 GEMM: int32 sums and the pinned epilogue (exact) */
    QG_KIND_INT4_W4A16_DECODE = 653, /* W4A16 canonical layout -> float32 weights (exact) */
    QG_KIND_INT4_W4A16_GEMV = 654, /* W4A16 x fp16 activations, any batch (bounded, d = K) */
    QG_KIND_INT4_IMPORT_GPTQ = 655, /* GPTQ checkpoint tensors -> canonical layout (exact) */
    QG_KIND_INT4_IMPORT_AWQ = 656, /* AWQ checkpoint tensors -> canonical layout (exact) */
    QG_KIND_KQ_GEMM = 280, /* K-quant x fp16 activations, batch 1..64, tensor cores (bounded; numerics.md) */
    QG_KIND_KQ_GEMV_Q8K = 281, /* K-quant x Q8_K-quantized activations, batch 1..16: integer dots (bounded as the dot) */
    /* qgold:kinds-end */
} qg_kind;

typedef int (*qg_convert_fn)(const void *x, void *y, size_t n);
typedef int (*qg_kq_dequant_f32_fn)(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, float *y);
typedef int (*qg_kq_dequant_f16_fn)(qg_ktype t, const uint8_t *blocks, size_t nbytes, size_t rows, size_t cols, uint16_t *y);
typedef int (*qg_kq_quantize_fn)(qg_ktype t, const float *x, size_t rows, size_t cols, uint8_t *blocks, size_t nbytes);
typedef int (*qg_kq_dot_fn)(qg_ktype t, const uint8_t *wrow, const uint8_t *q8row, size_t cols, int32_t *S, int32_t *M, float *result);
typedef int (*qg_kq_gemv_fn)(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x,
                             size_t batch, float *y_f32, uint16_t *y_f16);
/* The K-quant gemm path: qg_kq_gemv_fn's arguments with batch 1..64 (qgold/kquants_gemm.h). */
typedef int (*qg_kq_gemm_fn)(qg_ktype t, const uint8_t *w, size_t nbytes, size_t rows, size_t cols, const uint16_t *x,
                             size_t batch, float *y_f32, uint16_t *y_f16);
typedef int (*qg_spqr_dequant_fn)(const qg_spqr_layer *L, uint16_t *w);
typedef int (*qg_spqr_gemv_fn)(const qg_spqr_layer *L, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16);
typedef int (*qg_rans_normalize_fn)(const uint64_t counts[256], uint16_t freq[256]);
typedef int (*qg_rans_encode_fn)(const uint8_t *w, const float *scales, uint32_t M, uint32_t K, const uint8_t *modes,
                                 int checksums, uint8_t **out, size_t *out_len);
typedef int (*qg_rans_decode_fn)(const uint8_t *buf, size_t len, uint8_t *w, size_t w_len);
typedef int (*qg_rans_gemv_fn)(const uint8_t *buf, size_t len, const uint16_t *x, size_t batch, float *y_f32, uint16_t *y_f16);
typedef int (*qg_int8_quantize_fn)(const qg_int8_qshape *s, const void *x, qg_int8_ftype src_type, int8_t *q, void *scales);
typedef int (*qg_int8_dequant_fn)(const qg_int8_qshape *s, const int8_t *q, const void *scales, float *y_f32, uint16_t *y_f16);
typedef int (*qg_int8_w8a8_fn)(const qg_int8_w8a8_args *p, int32_t *acc, float *y_f32, uint16_t *y_f16);
typedef int (*qg_int8_w8a16_fn)(const int8_t *B, const void *sb, qg_int8_ftype sb_type, size_t N, size_t K, const uint16_t *X,
                                size_t M, float *y_f32, uint16_t *y_f16);
typedef int (*qg_int8_gemv_fn)(const uint8_t *w, const float *scales, size_t M, size_t K, const uint16_t *x, size_t batch,
                               float *y_f32, uint16_t *y_f16);
typedef int (*qg_int4_quantize_fn)(const qg_int4_qshape *s, const void *x, qg_int4_ftype src_type, int8_t *q, void *scales);
typedef int (*qg_int4_dequant_fn)(const qg_int4_qshape *s, const int8_t *q, const void *scales, float *y_f32, uint16_t *y_f16);
typedef int (*qg_int4_gemm_packed_fn)(const qg_int4_gemm_args *p, int32_t *acc, float *y_f32, uint16_t *y_f16);
typedef int (*qg_w4a16_decode_fn)(const qg_w4a16 *L, float *w);
typedef int (*qg_w4a16_gemv_fn)(const qg_w4a16 *L, const uint16_t *x, size_t x_len, size_t batch, float *y_f32,
                                uint16_t *y_f16);
typedef int (*qg_int4_import_gptq_fn)(const qg_gptq_src *src, const qg_w4a16_out *out);
typedef int (*qg_int4_import_awq_fn)(const qg_awq_src *src, const qg_w4a16_out *out);

/* qgold:fn-types-end */
typedef struct qg_kernel {
    const char *format;  /* "fp16" */
    const char *path;    /* "f32_to_f16" */
    qg_backend backend;
    const char *name;    /* the C symbol: qg_<format>_<op>_<backend> */
    qg_kind kind;
    qg_elem in_elem, out_elem;
    qg_numerics numerics;     /* float32 output (or the only output) */
    qg_numerics numerics_f16; /* fp16 output, where the kernel has one */
    /* The kernel, through the member of its kind; `any` aliases whichever member is set (the first
     * function of a struct member), so "is it built" needs no switch on the kind. A kind whose
     * struct member holds several functions sets all or none of them. */
    union {
        void (*any)(void);
        qg_convert_fn convert;
        struct {
            qg_kq_dequant_f32_fn f32;
            qg_kq_dequant_f16_fn f16;
        } kq_dequant;
        qg_kq_quantize_fn kq_quantize;
        qg_kq_dot_fn kq_dot;
        qg_kq_gemv_fn kq_gemv;
        qg_kq_gemm_fn kq_gemm;
        qg_spqr_dequant_fn spqr_dequant;
        qg_spqr_gemv_fn spqr_gemv;
        qg_rans_normalize_fn rans_normalize;
        qg_rans_encode_fn rans_encode;
        qg_rans_decode_fn rans_decode;
        qg_rans_gemv_fn rans_gemv;
        qg_int8_gemv_fn int8_gemv;
        qg_int8_quantize_fn int8_quantize;
        qg_int8_dequant_fn int8_dequant;
        qg_int8_w8a8_fn int8_w8a8;
        qg_int8_w8a16_fn int8_w8a16;
        qg_int4_quantize_fn int4_quantize;
        qg_int4_dequant_fn int4_dequant;
        qg_int4_gemm_packed_fn int4_gemm_packed;
        qg_w4a16_decode_fn int4_w4a16_decode;
        qg_w4a16_gemv_fn int4_w4a16_gemv;
        qg_int4_import_gptq_fn int4_import_gptq;
        qg_int4_import_awq_fn int4_import_awq;
        /* qgold:fn-members-end */
    } fn;
} qg_kernel;

/* Whether the row's function (for its kind) is compiled into this build. */
int qg_kernel_built(const qg_kernel *k);

size_t qg_registry_count(void);
const qg_kernel *qg_registry_at(size_t i);
/* NULL when there is no such row. */
const qg_kernel *qg_registry_find(const char *format, const char *path, qg_backend b);

const char *qg_backend_name(qg_backend b);
/* Backend from name ("ref", "avx2", "neon", "cuda"); -1 when unknown. */
int qg_backend_from_name(const char *name);

/* Whether a backend can run here. When not, `why` (if non-NULL) gets a one-line reason: not compiled
 * for this architecture, CPU lacks the feature, excluded by QG_FORCE_ISA, no CUDA device, ... */
int qg_backend_available(qg_backend b, char *why, size_t why_len);

/* Whether this row can run here: its backend is available and its kernel was compiled in. */
int qg_kernel_available(const qg_kernel *k, char *why, size_t why_len);

/* The CPU kernel dispatch would run for (format, path): the best available SIMD row, else the
 * reference (`fell_back` set to 1 when a SIMD row exists but cannot run here). */
const qg_kernel *qg_select_cpu(const char *format, const char *path, int *fell_back);

#ifdef __cplusplus
}
#endif
#endif
