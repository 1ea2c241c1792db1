/* Registry rows of the INT8 format (included by registry.c, which defines QG_FN and QG_BUILT_*):
 * quantize, dequant and w8a8 are exact on every backend; w8a16 is bounded with float32 accumulation
 * (d = K, float32 or fp16 output). Which kernels exist (0/1 per backend): */
#ifndef QGOLD_REGISTRY_INT8_H
#define QGOLD_REGISTRY_INT8_H

#include "qgold/kernels_int8.h"

#define QG_INT8_REF 1
#define QG_INT8_AVX2 QG_BUILT_AVX2
#define QG_INT8_NEON QG_BUILT_NEON
#define QG_INT8_CUDA QG_HAVE_CUDA

#define QG_INT8_BACKEND_ROWS(be, sfx, built)                                                                    \
    {"int8", "quantize", be, "qg_int8_quantize_" #sfx, QG_KIND_INT8_QUANTIZE, QG_ELEM_F32, QG_ELEM_U8,            \
     QG_NUMERICS_EXACT, QG_NUMERICS_EXACT, {.int8_quantize = QG_FN(built, qg_int8_quantize_##sfx)}},             \
    {"int8", "dequant", be, "qg_int8_dequant_" #sfx, QG_KIND_INT8_DEQUANT, QG_ELEM_U8, QG_ELEM_F32,               \
     QG_NUMERICS_EXACT, QG_NUMERICS_EXACT, {.int8_dequant = QG_FN(built, qg_int8_dequant_##sfx)}},               \
    {"int8", "w8a8", be, "qg_int8_w8a8_" #sfx, QG_KIND_INT8_W8A8, QG_ELEM_U8, QG_ELEM_F32, QG_NUMERICS_EXACT,     \
     QG_NUMERICS_EXACT, {.int8_w8a8 = QG_FN(built, qg_int8_w8a8_##sfx)}},                                        \
    {"int8", "w8a16", be, "qg_int8_w8a16_" #sfx, QG_KIND_INT8_W8A16, QG_ELEM_F16, QG_ELEM_F32,                     \
     QG_NUMERICS_F32ACC_F32OUT, QG_NUMERICS_F32ACC_F16OUT, {.int8_w8a16 = QG_FN(built, qg_int8_w8a16_##sfx)}}

#define QG_INT8_ROWS                                                                                             \
    QG_INT8_BACKEND_ROWS(QG_BACKEND_REF, ref, QG_INT8_REF), QG_INT8_BACKEND_ROWS(QG_BACKEND_AVX2, avx2, QG_INT8_AVX2), \
    QG_INT8_BACKEND_ROWS(QG_BACKEND_NEON, neon, QG_INT8_NEON), QG_INT8_BACKEND_ROWS(QG_BACKEND_CUDA, cuda, QG_INT8_CUDA)

#endif
