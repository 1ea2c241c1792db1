/* READ ME FIRST: fp16 / bf16 reference (spec: reference/spec/fp16.md).
 *
 * Everything here is integer arithmetic on bit patterns, so the result cannot depend on the compiler,
 * the FPU mode (flush-to-zero, rounding mode) or FMA contraction. Three facts carry the code:
 *   1. A float32 value is sig * 2^(e-150) with sig = 1.f (24 bits) for biased exponent e >= 1.
 *   2. fp16 normals have 11-bit significands: converting keeps the top 11 bits and rounds on the 13
 *      dropped bits; fp16 subnormals are integer multiples of 2^-24, so the target is sig >> shift
 *      with shift = 126 - e, rounded on the dropped bits.
 *   3. Round to nearest even: round up when the dropped part is above half, or exactly half and the
 *      kept part is odd. A carry out of the fraction correctly increments the exponent.
 */
#include "qgold/fp16.h"

#include "qgold/errors.h"

#include <string.h>

uint32_t qg_f32_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

float qg_f32_from_bits(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* Round sig >> shift to nearest even (1 <= shift <= 31). */
static uint32_t shift_rne(uint32_t sig, unsigned shift)
{
    uint32_t kept = sig >> shift;
    uint32_t dropped = sig & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (dropped > half || (dropped == half && (kept & 1u))) kept += 1u;
    return kept;
}

qg_f16 qg_f32bits_to_f16(uint32_t x)
{
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t mag = x & 0x7FFFFFFFu;
    const uint32_t e = mag >> 23;
    const uint32_t frac = mag & 0x7FFFFFu;

    if (mag > 0x7F800000u) /* NaN: quiet it, keep the high payload bits (never becomes inf) */
        return (qg_f16)(sign | 0x7E00u | (frac >> 13));
    /* 65520 = 0x477FF000 is the midpoint between 65504 (largest fp16) and 2^16; RNE sends it and
     * everything above to infinity (65504 has an odd significand, 2^16 the even one). */
    if (mag >= 0x477FF000u) return (qg_f16)(sign | 0x7C00u);
    if (e >= 113) { /* >= 2^-14: fp16 normal. Rebias 127 -> 15, drop 13 fraction bits. */
        uint32_t h = ((e - 112u) << 10) | (frac >> 13);
        uint32_t dropped = frac & 0x1FFFu;
        if (dropped > 0x1000u || (dropped == 0x1000u && (h & 1u))) h += 1u;
        return (qg_f16)(sign | h);
    }
    /* Below 2^-14: the result is a multiple of 2^-24 (subnormal or zero, or the smallest normal
     * after a carry). value = sig * 2^(e-150), target units 2^-24, so shift = 126 - e. Anything below
     * 2^-25 (e < 102) is under half the smallest subnormal and rounds to zero; e = 0 (float32
     * subnormals, < 2^-126) too. */
    if (e < 102) return (qg_f16)sign;
    return (qg_f16)(sign | shift_rne(frac | 0x800000u, 126u - e));
}

uint32_t qg_f16_to_f32bits(qg_f16 h)
{
    const uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    const uint32_t e = ((uint32_t)h >> 10) & 0x1Fu;
    uint32_t f = (uint32_t)h & 0x3FFu;

    if (e == 31) return sign | 0x7F800000u | (f << 13); /* inf, or NaN with its payload */
    if (e != 0) return sign | ((e + 112u) << 23) | (f << 13);
    if (f == 0) return sign;
    /* Subnormal f * 2^-24: normalize. Start at the exponent of 2^-14 (biased 113) and shift the
     * leading one into the implicit position (bit 10). */
    uint32_t e32 = 113u;
    while ((f & 0x400u) == 0) {
        f <<= 1;
        e32 -= 1u;
    }
    return sign | (e32 << 23) | ((f & 0x3FFu) << 13);
}

qg_bf16 qg_f32bits_to_bf16(uint32_t x)
{
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: set the quiet bit so a low-only payload survives */
        return (qg_bf16)((x >> 16) | 0x0040u);
    /* Adding 0x7FFF + (kept lsb) carries into the kept half exactly when the dropped half is above
     * 0x8000, or equal to it with an odd kept half: round to nearest even. Overflow lands on inf. */
    uint32_t lsb = (x >> 16) & 1u;
    return (qg_bf16)((x + 0x7FFFu + lsb) >> 16);
}

uint32_t qg_bf16_to_f32bits(qg_bf16 h) { return (uint32_t)h << 16; }

qg_f16 qg_f32_to_f16(float x) { return qg_f32bits_to_f16(qg_f32_bits(x)); }
float qg_f16_to_f32(qg_f16 h) { return qg_f32_from_bits(qg_f16_to_f32bits(h)); }
qg_bf16 qg_f32_to_bf16(float x) { return qg_f32bits_to_bf16(qg_f32_bits(x)); }
float qg_bf16_to_f32(qg_bf16 h) { return qg_f32_from_bits(qg_bf16_to_f32bits(h)); }

int qg_f16_isnan(qg_f16 h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x03FFu) != 0; }
int qg_bf16_isnan(qg_bf16 h) { return (h & 0x7F80u) == 0x7F80u && (h & 0x007Fu) != 0; }

/* Each op: exact inputs in float32, one float32 operation, one rounding to fp16. The float32 step is
 * a separate statement so no contraction or excess precision can merge it with anything else. */
qg_f16 qg_rn16_add(qg_f16 a, qg_f16 b)
{
    float s = qg_f16_to_f32(a) + qg_f16_to_f32(b);
    return qg_f32_to_f16(s);
}

qg_f16 qg_rn16_sub(qg_f16 a, qg_f16 b)
{
    float s = qg_f16_to_f32(a) - qg_f16_to_f32(b);
    return qg_f32_to_f16(s);
}

qg_f16 qg_rn16_mul(qg_f16 a, qg_f16 b)
{
    float p = qg_f16_to_f32(a) * qg_f16_to_f32(b);
    return qg_f32_to_f16(p);
}

int qg_fp16_f32_to_f16_ref(const uint32_t *x, qg_f16 *y, size_t n)
{
    if (n > 0 && (x == NULL || y == NULL)) return QG_ERR_argument_invalid;
    for (size_t i = 0; i < n; i++) y[i] = qg_f32bits_to_f16(x[i]);
    return QG_ERR_ok;
}

int qg_fp16_f16_to_f32_ref(const qg_f16 *x, uint32_t *y, size_t n)
{
    if (n > 0 && (x == NULL || y == NULL)) return QG_ERR_argument_invalid;
    for (size_t i = 0; i < n; i++) y[i] = qg_f16_to_f32bits(x[i]);
    return QG_ERR_ok;
}

int qg_fp16_f32_to_bf16_ref(const uint32_t *x, qg_bf16 *y, size_t n)
{
    if (n > 0 && (x == NULL || y == NULL)) return QG_ERR_argument_invalid;
    for (size_t i = 0; i < n; i++) y[i] = qg_f32bits_to_bf16(x[i]);
    return QG_ERR_ok;
}

int qg_fp16_bf16_to_f32_ref(const qg_bf16 *x, uint32_t *y, size_t n)
{
    if (n > 0 && (x == NULL || y == NULL)) return QG_ERR_argument_invalid;
    for (size_t i = 0; i < n; i++) y[i] = qg_bf16_to_f32bits(x[i]);
    return QG_ERR_ok;
}
