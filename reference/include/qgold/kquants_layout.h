/* The byte layout of the GGUF K-quant blocks Q4_K, Q5_K, Q6_K, Q8_K (spec: reference/spec/kquants.md).
 *
 * One block covers QG_QK_K = 256 elements. Offsets are in bytes from the block's start; multi-byte fields
 * are little-endian and unaligned (a Q6_K block may start at any even offset, a Q8_K float anywhere).
 * Every implementation (reference, CPU kernels, CUDA kernels) takes its offsets from here; the asserts
 * below tie each field's offset and size to the next field and the block size, and each size to the
 * element count. Plain integer macros, so the header serves C, C++ and CUDA alike.
 */
#ifndef QGOLD_KQUANTS_LAYOUT_H
#define QGOLD_KQUANTS_LAYOUT_H

#include "qgold/kquants.h" /* QG_QK_K */

/* Q4_K, 144 bytes: fp16 d, fp16 dmin, 8 packed 6-bit scales and mins, 4-bit codes (two per byte). */
#define QG_Q4K_BYTES 144
#define QG_Q4K_D 0
#define QG_Q4K_DMIN 2
#define QG_Q4K_SCALES 4
#define QG_Q4K_SCALES_BYTES 12
#define QG_Q4K_QS 16
#define QG_Q4K_QS_BYTES 128

/* Q5_K, 176 bytes: the Q4_K header, the fifth code bit of each element (qh), then the low 4 bits (qs). */
#define QG_Q5K_BYTES 176
#define QG_Q5K_D 0
#define QG_Q5K_DMIN 2
#define QG_Q5K_SCALES 4
#define QG_Q5K_SCALES_BYTES 12
#define QG_Q5K_QH 16
#define QG_Q5K_QH_BYTES 32
#define QG_Q5K_QS 48
#define QG_Q5K_QS_BYTES 128

/* Q6_K, 210 bytes: low 4 code bits (ql), high 2 bits (qh), 16 int8 group scales, fp16 d last. */
#define QG_Q6K_BYTES 210
#define QG_Q6K_QL 0
#define QG_Q6K_QL_BYTES 128
#define QG_Q6K_QH 128
#define QG_Q6K_QH_BYTES 64
#define QG_Q6K_SCALES 192
#define QG_Q6K_SCALES_BYTES 16
#define QG_Q6K_D 208

/* Q8_K, 292 bytes: float32 d, 256 int8 codes, 16 int16 sums of 16 codes each. */
#define QG_Q8K_BYTES 292
#define QG_Q8K_D 0
#define QG_Q8K_QS 4
#define QG_Q8K_QS_BYTES 256
#define QG_Q8K_BSUMS 260
#define QG_Q8K_BSUMS_BYTES 32

#ifdef __cplusplus
#define QG_KQ_LAYOUT_ASSERT(e, m) static_assert(e, m)
#else
#define QG_KQ_LAYOUT_ASSERT(e, m) _Static_assert(e, m)
#endif

/* Fields back to back: offset + size == next offset, the last one ending at the block size. */
QG_KQ_LAYOUT_ASSERT(QG_Q4K_D == 0 && QG_Q4K_D + 2 == QG_Q4K_DMIN && QG_Q4K_DMIN + 2 == QG_Q4K_SCALES, "Q4_K header");
QG_KQ_LAYOUT_ASSERT(QG_Q4K_SCALES + QG_Q4K_SCALES_BYTES == QG_Q4K_QS, "Q4_K scales");
QG_KQ_LAYOUT_ASSERT(QG_Q4K_QS + QG_Q4K_QS_BYTES == QG_Q4K_BYTES, "Q4_K qs");
QG_KQ_LAYOUT_ASSERT(QG_Q5K_D == 0 && QG_Q5K_D + 2 == QG_Q5K_DMIN && QG_Q5K_DMIN + 2 == QG_Q5K_SCALES, "Q5_K header");
QG_KQ_LAYOUT_ASSERT(QG_Q5K_SCALES + QG_Q5K_SCALES_BYTES == QG_Q5K_QH, "Q5_K scales");
QG_KQ_LAYOUT_ASSERT(QG_Q5K_QH + QG_Q5K_QH_BYTES == QG_Q5K_QS, "Q5_K qh");
QG_KQ_LAYOUT_ASSERT(QG_Q5K_QS + QG_Q5K_QS_BYTES == QG_Q5K_BYTES, "Q5_K qs");
QG_KQ_LAYOUT_ASSERT(QG_Q6K_QL == 0 && QG_Q6K_QL + QG_Q6K_QL_BYTES == QG_Q6K_QH, "Q6_K ql");
QG_KQ_LAYOUT_ASSERT(QG_Q6K_QH + QG_Q6K_QH_BYTES == QG_Q6K_SCALES, "Q6_K qh");
QG_KQ_LAYOUT_ASSERT(QG_Q6K_SCALES + QG_Q6K_SCALES_BYTES == QG_Q6K_D, "Q6_K scales");
QG_KQ_LAYOUT_ASSERT(QG_Q6K_D + 2 == QG_Q6K_BYTES, "Q6_K d");
QG_KQ_LAYOUT_ASSERT(QG_Q8K_D == 0 && QG_Q8K_D + 4 == QG_Q8K_QS, "Q8_K d");
QG_KQ_LAYOUT_ASSERT(QG_Q8K_QS + QG_Q8K_QS_BYTES == QG_Q8K_BSUMS, "Q8_K qs");
QG_KQ_LAYOUT_ASSERT(QG_Q8K_BSUMS + QG_Q8K_BSUMS_BYTES == QG_Q8K_BYTES, "Q8_K bsums");

/* Q4_K and Q5_K share their header, so code decoding both reads d, dmin and scales at one offset. */
QG_KQ_LAYOUT_ASSERT(QG_Q4K_D == QG_Q5K_D && QG_Q4K_DMIN == QG_Q5K_DMIN && QG_Q4K_SCALES == QG_Q5K_SCALES &&
                        QG_Q4K_SCALES_BYTES == QG_Q5K_SCALES_BYTES,
                    "Q4_K/Q5_K header");

/* Sizes from the element count: 8 sub-blocks x (6-bit scale + 6-bit min); 4 bits a code in qs and ql,
 * 1 bit in Q5_K's qh, 2 bits in Q6_K's qh; one int8 scale per 16 Q6_K elements; one int16 sum per 16
 * Q8_K codes. */
QG_KQ_LAYOUT_ASSERT(QG_Q4K_SCALES_BYTES * 8 == (QG_QK_K / 32) * 12, "Q4_K scales size");
QG_KQ_LAYOUT_ASSERT(QG_Q4K_QS_BYTES * 2 == QG_QK_K && QG_Q5K_QS_BYTES * 2 == QG_QK_K, "Q4_K/Q5_K qs size");
QG_KQ_LAYOUT_ASSERT(QG_Q5K_QH_BYTES * 8 == QG_QK_K, "Q5_K qh size");
QG_KQ_LAYOUT_ASSERT(QG_Q6K_QL_BYTES * 2 == QG_QK_K && QG_Q6K_QH_BYTES * 4 == QG_QK_K, "Q6_K code size");
QG_KQ_LAYOUT_ASSERT(QG_Q6K_SCALES_BYTES * 16 == QG_QK_K, "Q6_K scales size");
QG_KQ_LAYOUT_ASSERT(QG_Q8K_QS_BYTES == QG_QK_K && QG_Q8K_BSUMS_BYTES == 2 * (QG_QK_K / 16), "Q8_K sizes");

#undef QG_KQ_LAYOUT_ASSERT

#endif
