/* Registry rows of the INT4 format (included by registry.c, which defines QG_FN and QG_BUILT_*):
 * quantize, dequant and the GPTQ / AWQ importers are reference-only and exact; w4a16_decode and
 * gemm_packed are exact on every backend; w4a16_gemv is bounded with float32 accumulation (d = K,
 * float32 or fp16 output; on CUDA the tensor-core model). Which kernels exist (0/1 per backend): */
#ifndef QGOLD_REGISTRY_INT4_H
#define QGOLD_REGISTRY_INT4_H

#include "qgold/kernels_int4.h"

#define QG_INT4_REF 1
#define QG_INT4_AVX2 QG_BUILT_AVX2
#define QG_INT4_NEON QG_BUILT_NEON
#if QG_HAVE_CUDA
#include "qgold/kernels_int4_cuda.h"
#endif
#define QG_INT4_CUDA QG_HAVE_CUDA
/* The CUDA W4A16 product runs on tensor cores: u_acc is the mma block model (QG_MMA_U_ACC, numerics
 * "W4A16 on tensor cores", QG_NUMERICS_MMA_*); d = K covers its chain (group blocks + scale + group + split adds <= K). */
#define QG_INT4_BACKEND_ROWS(be, sfx, built, n32, n16)                                                                     \
    {"int4", "gemm_packed", be, "qg_int4_gemm_packed_" #sfx, QG_KIND_INT4_GEMM_PACKED, QG_ELEM_U8, QG_ELEM_F32,   \
     QG_NUMERICS_EXACT, QG_NUMERICS_EXACT, {.int4_gemm_packed = QG_FN(built, qg_int4_gemm_packed_##sfx)}},        \
    {"int4", "w4a16_decode", be, "qg_w4a16_decode_" #sfx, QG_KIND_INT4_W4A16_DECODE, QG_ELEM_U32, QG_ELEM_F32,     \
     QG_NUMERICS_EXACT, QG_NUMERICS_EXACT, {.int4_w4a16_decode = QG_FN(built, qg_w4a16_decode_##sfx)}},           \
    {"int4", "w4a16_gemv", be, "qg_w4a16_gemv_" #sfx, QG_KIND_INT4_W4A16_GEMV, QG_ELEM_F16, QG_ELEM_F32,           \
     n32, n16, {.int4_w4a16_gemv = QG_FN(built, qg_w4a16_gemv_##sfx)}}

#define QG_INT4_ROWS                                                                                              \
    {"int4", "quantize", QG_BACKEND_REF, "qg_int4_quantize_ref", QG_KIND_INT4_QUANTIZE, QG_ELEM_F32, QG_ELEM_U8,   \
     QG_NUMERICS_EXACT, QG_NUMERICS_EXACT, {.int4_quantize = QG_FN(QG_INT4_REF, qg_int4_quantize_ref)}},           \
    {"int4", "dequant", QG_BACKEND_REF, "qg_int4_dequant_ref", QG_KIND_INT4_DEQUANT, QG_ELEM_U8, QG_ELEM_F32,      \
     QG_NUMERICS_EXACT, QG_NUMERICS_EXACT, {.int4_dequant = QG_FN(QG_INT4_REF, qg_int4_dequant_ref)}},             \
    {"int4", "import_gptq", QG_BACKEND_REF, "qg_int4_import_gptq_ref", QG_KIND_INT4_IMPORT_GPTQ, QG_ELEM_U32,      \
     QG_ELEM_U32, QG_NUMERICS_EXACT, QG_NUMERICS_EXACT, {.int4_import_gptq = QG_FN(QG_INT4_REF, qg_int4_import_gptq_ref)}}, \
    {"int4", "import_awq", QG_BACKEND_REF, "qg_int4_import_awq_ref", QG_KIND_INT4_IMPORT_AWQ, QG_ELEM_U32,         \
     QG_ELEM_U32, QG_NUMERICS_EXACT, QG_NUMERICS_EXACT, {.int4_import_awq = QG_FN(QG_INT4_REF, qg_int4_import_awq_ref)}}, \
    QG_INT4_BACKEND_ROWS(QG_BACKEND_REF, ref, QG_INT4_REF, QG_NUMERICS_F32ACC_F32OUT, QG_NUMERICS_F32ACC_F16OUT),      \
    QG_INT4_BACKEND_ROWS(QG_BACKEND_AVX2, avx2, QG_INT4_AVX2, QG_NUMERICS_F32ACC_F32OUT, QG_NUMERICS_F32ACC_F16OUT),   \
    QG_INT4_BACKEND_ROWS(QG_BACKEND_NEON, neon, QG_INT4_NEON, QG_NUMERICS_F32ACC_F32OUT, QG_NUMERICS_F32ACC_F16OUT),   \
    QG_INT4_BACKEND_ROWS(QG_BACKEND_CUDA, cuda, QG_INT4_CUDA, QG_NUMERICS_MMA_F32OUT, QG_NUMERICS_MMA_F16OUT)

#endif
