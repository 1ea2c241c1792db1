/* READ ME FIRST: the pinned stream (spec: reference/spec/rng.md).
 *
 * splitmix64 in counter form: out(i) is a pure function of (seed, i), all arithmetic mod 2^64 (C's
 * uint64_t wraps exactly so). Each distribution consumes a fixed number of draws, never a data-dependent
 * rejection loop, so an independent implementation stays in step draw for draw.
 */
#include "qgold/rng.h"

#include "qgold/errors.h"

#include <math.h>

uint64_t qg_splitmix64_at(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1u) * UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

void qg_rng_init(qg_rng *r, uint64_t seed)
{
    r->seed = seed;
    r->counter = 0;
}

uint64_t qg_rng_u64(qg_rng *r) { return qg_splitmix64_at(r->seed, r->counter++); }

uint32_t qg_rng_bits32(qg_rng *r) { return (uint32_t)(qg_rng_u64(r) >> 32); }

float qg_rng_uniform01(qg_rng *r)
{
    /* 24 random bits times 2^-24: exact in float32, the largest value is 1 - 2^-24. */
    return (float)(qg_rng_u64(r) >> 40) * 0x1p-24f;
}

float qg_rng_uniform(qg_rng *r, float a, float b)
{
    float u = qg_rng_uniform01(r);
    float t = b - a; /* each line one float32 rounding: the build uses -ffp-contract=off */
    float p = t * u;
    float v = a + p;
    if (v >= b) v = nextafterf(b, -INFINITY); /* rounding may reach b; [a,b) is half-open */
    return v;
}

uint32_t qg_rng_int_range(qg_rng *r, uint64_t n)
{
    /* floor(out * n / 2^64) for n <= 2^32 without a 128-bit type: with out = hi*2^32 + lo,
     * out*n / 2^64 = (hi*n + lo*n / 2^32) / 2^32, and the floor may be taken on the inner quotient
     * first. hi*n <= 2^64 - 2^32 and (lo*n) >> 32 < 2^32, so the sum does not wrap. */
    uint64_t x = qg_rng_u64(r);
    uint64_t hi = x >> 32, lo = x & 0xFFFFFFFFu;
    uint64_t mid = hi * n + ((lo * n) >> 32);
    return (uint32_t)(mid >> 32);
}

int qg_rng_permutation(qg_rng *r, uint32_t *p, size_t n)
{
    if ((n > 0 && p == NULL) || (uint64_t)n > UINT64_C(0x100000000)) return QG_ERR_argument_invalid;
    for (size_t k = 0; k < n; k++) p[k] = (uint32_t)k;
    for (size_t i = n; i-- > 1;) {
        size_t j = qg_rng_int_range(r, (uint64_t)i + 1u);
        uint32_t t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    return QG_ERR_ok;
}
