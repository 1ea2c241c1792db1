/* Registry rows of the test-only format `tq8` (included by registry.c): dequant, exact. */
#ifndef QGOLD_REGISTRY_TQ8_H
#define QGOLD_REGISTRY_TQ8_H

#include "qgold/kernels_tq8.h"
#include "qgold/tq8.h"

#define QG_TQ8_ROW(be, sfx, built)                                                                      \
    {"tq8", "dequant", be, "qg_tq8_dequant_" #sfx, QG_KIND_TQ8_DEQUANT, QG_ELEM_U8, QG_ELEM_F32,         \
     QG_NUMERICS_EXACT, QG_NUMERICS_EXACT, {.tq8_dequant = QG_FN(built, qg_tq8_dequant_##sfx)}}
#define QG_TQ8_ROWS QG_TQ8_ROW(QG_BACKEND_REF, ref, 1), QG_TQ8_ROW(QG_BACKEND_AVX2, avx2, QG_BUILT_AVX2)

#endif
