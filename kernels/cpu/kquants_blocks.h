/* Internal: the scalar helpers that the optimized CPU K-quant kernels (qgold/kernels_kquants.h) share
 * on every ISA, on top of the block layout of qgold/kquants_layout.h: little-endian loads, the
 * 6-bit scale/min unpacking of Q4_K/Q5_K, the argument checks of dequantization, and the names of the
 * three ways a weight is formed from its code. An ISA file includes it first, defines its primitives on
 * top of it, then includes kquants_rows.h (the drivers).
 */
#ifndef QGOLD_KQUANTS_BLOCKS_H
#define QGOLD_KQUANTS_BLOCKS_H

#include "qgold/errors.h"
#include "qgold/kernels_kquants.h"
#include "qgold/kquants_layout.h"

#include <stdint.h>
#include <string.h>

#define QG_INLINE static inline __attribute__((always_inline))

enum { QK = QG_QK_K };

/* How a weight vector is formed from its codes q with the group factors a (and b):
 *   OP_FMS  Q4_K/Q5_K  a*q - b rounded once (a*q is exact);
 *   OP_MS   Q4_K/Q5_K  (a*q) - b as two operations, when d or dmin is inf/NaN: only the reference's own
 *                      operation sequence reproduces the NaN it ends in, sign included;
 *   OP_MUL  Q6_K/Q8_K  a*q. */
enum { OP_FMS = 0, OP_MS = 1, OP_MUL = 2 };

/* GEMV: batch columns per register group (two accumulators each). */
enum { MAXG = 4 };

/* log2 of the vectors (of 8 elements) sharing one factor a: 32 elements, 16 elements, the whole block. */
static inline int kq_scale_shift(qg_ktype t) { return t == QG_Q6_K ? 1 : (t == QG_Q8_K ? 5 : 2); }

/* ---- validation (the reference's checks, in its order) ------------------------------------------- */

static inline int kq_known(qg_ktype t) { return (unsigned)t <= (unsigned)QG_Q8_K; }

static inline int kq_dequant_args(qg_ktype t, const void *blocks, size_t nbytes, size_t rows, size_t cols, const void *y)
{
    if (!kq_known(t)) return QG_ERR_kq_type_unknown;
    if (blocks == NULL || y == NULL) return QG_ERR_argument_invalid;
    return qg_kq_check_shape(t, rows, cols, nbytes);
}

/* A float result with a NaN written as the quiet NaN 0x7FC00000 (fp16 0x7E00): which NaN a float sum
 * ends in depends on the operand order the compiler picks inside each instruction, so only the
 * canonical one keeps outputs the same bits across code paths, batch sizes and thread counts. */
static inline float kq_canon_nan(float r)
{
    if (r != r) {
        const uint32_t q = 0x7FC00000u;
        memcpy(&r, &q, 4);
    }
    return r;
}

/* ---- block bytes --------------------------------------------------------------------------------- */

static inline uint16_t kq_ld16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static inline uint32_t kq_ld32(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint32_t v;
    memcpy(&v, p, 4); /* little-endian, as the format */
    return v;
#else
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
#endif
}

/* The 6-bit scales and mins of Q4_K/Q5_K, sc[0..7] and m[0..7] as bytes of two 64-bit words:
 * j < 4 from the low 6 bits of bytes j and j+4; j >= 4 from the nibbles of byte j+4 plus the top two
 * bits of bytes j-4 (sc) and j (m). */
static inline void kq_unpack_scales(const uint8_t *q, uint64_t *sc, uint64_t *m)
{
    const uint32_t u0 = kq_ld32(q), u1 = kq_ld32(q + 4), u2 = kq_ld32(q + 8);
    const uint32_t lo6 = 0x3F3F3F3Fu, nib = 0x0F0F0F0Fu, top2 = 0x30303030u;
    *sc = (uint64_t)(u0 & lo6) | ((uint64_t)((u2 & nib) | ((u0 >> 2) & top2)) << 32);
    *m = (uint64_t)(u1 & lo6) | ((uint64_t)(((u2 >> 4) & nib) | ((u1 >> 2) & top2)) << 32);
}

#endif
