/* Optimized INT8 kernels. Same signatures, validation and errors as the reference (qgold/intq.h); every
 * kernel validates with the shared qg_int8_*_check functions before writing anything.
 *   quantize, dequant, w8a8 (int32, float32, fp16 outputs): bit-exact with the reference.
 *   w8a16: bounded (float32 accumulation in a kernel-specific but fixed order, chain length <= K).
 * CPU kernels split their work over qg_threads() threads; every output element is computed by the same
 * code whatever the split, so results do not depend on the thread count nor on M (batch invariance). */
#ifndef QGOLD_KERNELS_INT8_H
#define QGOLD_KERNELS_INT8_H

#include "qgold/intq.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QG_INT8_DECLARE_BACKEND(sfx)                                                                          \
    int qg_int8_quantize_##sfx(const qg_int8_qshape *s, const void *x, qg_int8_ftype src_type, int8_t *q,       \
                               void *scales);                                                                  \
    int qg_int8_dequant_##sfx(const qg_int8_qshape *s, const int8_t *q, const void *scales, float *y_f32,       \
                              uint16_t *y_f16);                                                                \
    int qg_int8_w8a8_##sfx(const qg_int8_w8a8_args *p, int32_t *acc, float *y_f32, uint16_t *y_f16);           \
    int qg_int8_w8a16_##sfx(const int8_t *B, const void *sb, qg_int8_ftype sb_type, size_t N, size_t K,         \
                            const uint16_t *X, size_t M, float *y_f32, uint16_t *y_f16);

/* qg_int8_{quantize,dequant,w8a8,w8a16}_avx2 (x86-64, AVX2 + F16C; W8A8 uses AVX512-VNNI vpdpbusd on
 * ymm registers when the CPU has it), _neon (aarch64; sdot when the CPU has the dot-product extension),
 * _cuda (host pointers: validate, copy in, run, copy out). */
QG_INT8_DECLARE_BACKEND(avx2)
QG_INT8_DECLARE_BACKEND(neon)
QG_INT8_DECLARE_BACKEND(cuda)

#ifdef __cplusplus
}
#endif
#endif
