/* unit.fp16: the reference conversions checked against the *definition* of round-to-nearest-even,
 * evaluated exactly in double (every fp16, bf16 and float32 value, and every midpoint between
 * neighbouring fp16/bf16 values, is exact in double). Independent of the bit tricks in fp16.c. */
#include "qg_test.h"
#include "qgold/fp16.h"
#include "qgold/rng.h"

#include <math.h>
#include <stdint.h>

/* Value of a finite fp16 / bf16 pattern in double, from the field definitions. */
static double f16_value(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, f = h & 1023;
    double v = e == 0 ? ldexp(f, -24) : ldexp(1024 + f, e - 25);
    return s ? -v : v;
}

static double bf16_value(uint16_t h)
{
    int s = h >> 15, e = (h >> 7) & 255, f = h & 127;
    double v = e == 0 ? ldexp(f, -133) : ldexp(128 + f, e - 134);
    return s ? -v : v;
}

/* Checks that h is the round-to-nearest-even image of the finite value x among the non-negative
 * patterns 0..max_finite (by magnitude; the sign must match x's), with overflow to inf above the
 * midpoint between max_finite and the next power of two. */
static int is_rne(double x, int x_negative, uint16_t h, uint16_t sign_bit, uint16_t max_finite, uint16_t inf,
                  double (*value)(uint16_t), double beyond)
{
    double a = fabs(x);
    if ((h & sign_bit) != (x_negative ? sign_bit : 0)) return 0;
    uint16_t m = h & (uint16_t)~sign_bit;
    double top = value(max_finite), mid_over = (top + beyond) / 2;
    if (a > mid_over || (a == mid_over && (max_finite & 1))) return m == inf;
    if (m > max_finite) return 0;
    double v = value(m);
    double lo = m > 0 ? value((uint16_t)(m - 1)) : -1.0;
    double hi = m < max_finite ? value((uint16_t)(m + 1)) : beyond;
    double d = fabs(a - v);
    if (m > 0 && fabs(a - lo) < d) return 0;
    if (fabs(a - hi) < d) return 0;
    if (m > 0 && fabs(a - lo) == d && (m & 1)) return 0;  /* tie: must pick the even one */
    if (fabs(a - hi) == d && (m & 1)) return 0;
    return 1;
}

static int f16_ok(double x, int neg, uint16_t h) { return is_rne(x, neg, h, 0x8000, 0x7BFF, 0x7C00, f16_value, 65536.0); }
static int bf16_ok(double x, int neg, uint16_t h) { return is_rne(x, neg, h, 0x8000, 0x7F7F, 0x7F80, bf16_value, ldexp(1, 128)); }

static void check_f32(uint32_t b)
{
    float x = qg_f32_from_bits(b);
    int neg = (int)(b >> 31);
    uint16_t h = qg_f32bits_to_f16(b), g = qg_f32bits_to_bf16(b);
    if (isnan(x)) {
        QG_CHECK(qg_f16_isnan(h) && (h >> 15) == (unsigned)neg, "f16(%08x) = %04x is not a NaN of the same sign", b, h);
        QG_CHECK(qg_bf16_isnan(g) && (g >> 15) == (unsigned)neg, "bf16(%08x) = %04x is not a NaN of the same sign", b, g);
    } else if (isinf(x)) {
        QG_CHECK(h == (neg ? 0xFC00 : 0x7C00), "f16(%08x) = %04x, expected inf", b, h);
        QG_CHECK(g == (neg ? 0xFF80 : 0x7F80), "bf16(%08x) = %04x, expected inf", b, g);
    } else {
        QG_CHECK(f16_ok(x, neg, h), "f16(%08x = %.9g) = %04x is not the RNE image", b, (double)x, h);
        QG_CHECK(bf16_ok(x, neg, g), "bf16(%08x = %.9g) = %04x is not the RNE image", b, (double)x, g);
    }
}

int main(void)
{
    /* Every fp16 / bf16 pattern widens exactly and narrows back to itself (NaNs: stay NaN, same sign). */
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t w = qg_f16_to_f32bits((uint16_t)h), wb = qg_bf16_to_f32bits((uint16_t)h);
        float f = qg_f32_from_bits(w);
        if (qg_f16_isnan((uint16_t)h)) {
            QG_CHECK(isnan(f) && (signbit(f) != 0) == (int)(h >> 15), "f16 NaN %04x widened to %08x", h, w);
        } else {
            QG_CHECK((double)f == ((h & 0x7C00) == 0x7C00 ? ((h >> 15) ? -INFINITY : INFINITY) : f16_value((uint16_t)h)),
                     "f16 %04x widened to %.9g", h, (double)f);
            QG_CHECK(qg_f32bits_to_f16(w) == h, "f16 %04x does not round-trip", h);
        }
        if (qg_bf16_isnan((uint16_t)h)) {
            QG_CHECK(qg_bf16_isnan(qg_f32bits_to_bf16(wb)), "bf16 NaN %04x lost", h);
        } else {
            QG_CHECK(qg_f32bits_to_bf16(wb) == h, "bf16 %04x does not round-trip", h);
            if ((h & 0x7F80) != 0x7F80) QG_CHECK((double)qg_f32_from_bits(wb) == bf16_value((uint16_t)h), "bf16 %04x value", h);
        }
    }

    /* Every midpoint between neighbouring fp16 values, and its float32 neighbours, both signs. */
    for (uint32_t h = 0; h < 0x7BFF + 1; h++) {
        double lo = f16_value((uint16_t)h), hi = h < 0x7BFF ? f16_value((uint16_t)(h + 1)) : 65536.0;
        uint32_t m = qg_f32_bits((float)((lo + hi) / 2)); /* exact: 12 significant bits */
        for (int s = 0; s < 2; s++)
            for (int dlt = -1; dlt <= 1; dlt++) check_f32((s ? 0x80000000u : 0) | (uint32_t)((int64_t)m + dlt));
    }
    /* Same for bf16 (midpoints are float32 values with the low half 0x8000). */
    for (uint32_t h = 0; h < 0x7F80; h++) {
        uint32_t m = (h << 16) | 0x8000u;
        for (int s = 0; s < 2; s++)
            for (int dlt = -1; dlt <= 1; dlt++) check_f32((s ? 0x80000000u : 0) | (uint32_t)((int64_t)m + dlt));
    }
    /* A stratified sweep of float32 bit patterns (every 4099th, a prime stride) and a random sample. */
    for (uint64_t b = 0; b < UINT64_C(0x100000000); b += 4099) check_f32((uint32_t)b);
    qg_rng r;
    qg_rng_init(&r, 20261121);
    for (int i = 0; i < 1000000; i++) check_f32(qg_rng_bits32(&r));

    /* Named edges of fp16.md. */
    QG_CHECK(qg_f32_to_f16(65504.0f) == 0x7BFF, "65504");
    QG_CHECK(qg_f32_to_f16(nextafterf(65520.0f, 0.0f)) == 0x7BFF, "just below 65520");
    QG_CHECK(qg_f32_to_f16(65520.0f) == 0x7C00, "65520 is a tie to 2^16 = inf");
    QG_CHECK(qg_f32_to_f16(-65520.0f) == 0xFC00, "-65520");
    QG_CHECK(qg_f32_to_f16(0x1p-25f) == 0x0000, "2^-25 ties to 0");
    QG_CHECK(qg_f32_to_f16(nextafterf(0x1p-25f, 1.0f)) == 0x0001, "above 2^-25 rounds to 2^-24");
    QG_CHECK(qg_f32_to_f16(-0.0f) == 0x8000, "-0 keeps its sign");
    QG_CHECK(qg_f32bits_to_f16(0x7F800001u) != 0x7C00 && qg_f16_isnan(qg_f32bits_to_f16(0x7F800001u)), "low-payload NaN");
    QG_CHECK(qg_bf16_isnan(qg_f32bits_to_bf16(0xFF800001u)) && (qg_f32bits_to_bf16(0xFF800001u) >> 15), "low-payload -NaN to bf16");
    QG_CHECK(qg_f32bits_to_bf16(0x7F7F8000u) == 0x7F80, "largest bf16 midpoint rounds to inf");

    /* RN16 ops equal the correctly rounded result of the exact operation (exact in double). */
    for (int i = 0; i < 300000; i++) {
        uint16_t a = (uint16_t)qg_rng_bits32(&r), b = (uint16_t)qg_rng_bits32(&r);
        if (qg_f16_isnan(a) || qg_f16_isnan(b) || (a & 0x7C00) == 0x7C00 || (b & 0x7C00) == 0x7C00) continue;
        double x = f16_value(a), y = f16_value(b);
        double ops[3] = {x + y, x - y, x * y};
        uint16_t got[3] = {qg_rn16_add(a, b), qg_rn16_sub(a, b), qg_rn16_mul(a, b)};
        for (int k = 0; k < 3; k++) {
            int neg = signbit(ops[k]) != 0;
            if (ops[k] == 0) continue; /* the sign of an exact zero sum follows IEEE rules, not RNE */
            QG_CHECK(f16_ok(ops[k], neg, got[k]), "RN16 op %d of %04x, %04x gave %04x, exact %.17g", k, a, b, got[k], ops[k]);
        }
    }
    return qg_test_end("unit.fp16");
}
