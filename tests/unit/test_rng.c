/* unit.rng: properties of the pinned stream that follow from rng.md alone. (Agreement with the Python
 * generator, value for value, is golden.rng.) */
#include "qg_test.h"
#include "qgold/errors.h"
#include "qgold/rng.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

int main(void)
{
    const uint64_t seeds[] = {0, 1, 42, UINT64_C(0xFFFFFFFFFFFFFFFF), UINT64_C(0x0123456789ABCDEF)};
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        qg_rng r;
        qg_rng_init(&r, seeds[s]);
        /* Counter form: the i-th sequential draw is out(i), and each distribution consumes its count. */
        for (uint64_t i = 0; i < 1000; i++) {
            uint64_t want = qg_splitmix64_at(seeds[s], i);
            QG_CHECK(qg_rng_u64(&r) == want, "seed %llu draw %llu", (unsigned long long)seeds[s], (unsigned long long)i);
        }
        QG_CHECK(r.counter == 1000, "counter after 1000 draws is %llu", (unsigned long long)r.counter);
        uint64_t c = r.counter, raw = qg_splitmix64_at(seeds[s], c);
        QG_CHECK(qg_rng_bits32(&r) == (uint32_t)(raw >> 32) && r.counter == c + 1, "bits32 is the high half, one draw");
        raw = qg_splitmix64_at(seeds[s], r.counter);
        float u = qg_rng_uniform01(&r);
        QG_CHECK(u == (float)ldexp((double)(raw >> 40), -24) && u >= 0.0f && u < 1.0f, "uniform01 = (out >> 40) 2^-24");
        for (int i = 0; i < 10000; i++) {
            float v = qg_rng_uniform(&r, -3.0f, 5.0f);
            QG_CHECK(v >= -3.0f && v < 5.0f, "uniform(-3,5) gave %.9g", (double)v);
            uint32_t k = qg_rng_int_range(&r, 10);
            QG_CHECK(k < 10, "int_range(10) gave %u", k);
            QG_CHECK(qg_rng_int_range(&r, 1) == 0, "int_range(1) must be 0");
        }
        /* int_range is floor(out * n / 2^64): check against exact long double arithmetic where it is exact
         * (n a power of two makes it a shift). */
        for (int i = 0; i < 1000; i++) {
            uint64_t o = qg_splitmix64_at(seeds[s], r.counter);
            QG_CHECK(qg_rng_int_range(&r, UINT64_C(1) << 32) == (uint32_t)(o >> 32), "int_range(2^32) is the high half");
            o = qg_splitmix64_at(seeds[s], r.counter);
            QG_CHECK(qg_rng_int_range(&r, 1024) == (uint32_t)(o >> 54), "int_range(1024) is the top 10 bits");
        }
        /* uniform on an interval one ulp wide: rounding reaches b and is clamped below it. */
        for (int i = 0; i < 1000; i++) QG_CHECK(qg_rng_uniform(&r, 1.0f, nextafterf(1.0f, 2.0f)) == 1.0f, "clamp");
        /* Fisher-Yates: a permutation, n-1 draws. */
        static uint32_t p[5000];
        static unsigned char seen[5000];
        size_t n = 1 + (size_t)(seeds[s] % 4999);
        uint64_t before = r.counter;
        QG_CHECK(qg_rng_permutation(&r, p, n) == QG_ERR_ok, "permutation");
        QG_CHECK(r.counter == before + n - 1, "permutation of %zu used %llu draws", n, (unsigned long long)(r.counter - before));
        memset(seen, 0, sizeof seen);
        int ok = 1;
        for (size_t i = 0; i < n; i++) {
            if (p[i] >= n || seen[p[i]]) ok = 0;
            else seen[p[i]] = 1;
        }
        QG_CHECK(ok, "permutation of %zu is not a permutation", n);
    }
    qg_rng r;
    qg_rng_init(&r, 3);
    QG_CHECK(qg_rng_permutation(&r, NULL, 3) == QG_ERR_argument_invalid, "NULL permutation buffer is rejected");
    QG_CHECK(qg_rng_permutation(&r, NULL, 0) == QG_ERR_ok && r.counter == 0, "empty permutation draws nothing");
    return qg_test_end("unit.rng");
}
