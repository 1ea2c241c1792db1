/* The pinned random stream (spec: reference/spec/rng.md): splitmix64 in counter form and the derived
 * distributions. The Python generators implement the same page independently; golden/rng/ holds both
 * sides to identical bytes. */
#ifndef QGOLD_RNG_H
#define QGOLD_RNG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint64_t seed;
    uint64_t counter; /* index of the next draw */
} qg_rng;

/* out(i) for a seed: any element of a stream without drawing the ones before it. */
uint64_t qg_splitmix64_at(uint64_t seed, uint64_t i);

void qg_rng_init(qg_rng *r, uint64_t seed);
uint64_t qg_rng_u64(qg_rng *r);                        /* u64: 1 draw */
uint32_t qg_rng_bits32(qg_rng *r);                     /* bits32: high half, 1 draw */
float qg_rng_uniform01(qg_rng *r);                     /* uniform01: [0,1), 1 draw */
float qg_rng_uniform(qg_rng *r, float a, float b);     /* uniform: [a,b), 1 draw, a < b */
uint32_t qg_rng_int_range(qg_rng *r, uint64_t n);      /* int_range: [0,n), 1 <= n <= 2^32, 1 draw */
/* permutation: Fisher-Yates from the top, n-1 draws. Returns QG_ERR_argument_invalid for p == NULL
 * with n > 0 or n > 2^32. */
int qg_rng_permutation(qg_rng *r, uint32_t *p, size_t n);

#ifdef __cplusplus
}
#endif
#endif
