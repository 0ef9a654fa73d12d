/* Seeded random numbers.
 *
 * Two kinds, both fully determined by (seed, stream or index):
 *  - Rng: a sequential xoshiro256** generator, seeded by splitmix64 from
 *    (seed, stream). Each worker uses stream = its rank, so the same seed and
 *    worker count give the same numbers on every backend.
 *  - rng_hash_*: counter-based numbers, a pure function of (seed, i). Stochastic
 *    codecs use these so that value i gets the same random number whichever
 *    thread, partition or GPU kernel encodes it.
 */
#ifndef GC_RNG_H
#define GC_RNG_H

#include <stdint.h>

#include "common/hd.h"

typedef struct {
    uint64_t s[4];
} Rng;

GC_HD static inline uint64_t rng_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Counter-based: a well-mixed 64-bit value for index i of stream seed. */
GC_HD static inline uint64_t rng_hash64(uint64_t seed, uint64_t i) {
    uint64_t x = seed ^ (i * 0xD1B54A32D192ED03ULL);
    rng_splitmix64(&x);
    return rng_splitmix64(&x);
}

/* Counter-based uniform in [0, 1) with 24 random bits (exact in float). */
GC_HD static inline float rng_hash_uniform(uint64_t seed, uint64_t i) {
    return (float)(rng_hash64(seed, i) >> 40) * (1.0f / 16777216.0f);
}

void rng_init(Rng *r, uint64_t seed, uint64_t stream);
uint64_t rng_u64(Rng *r);
/* uniform in [0, 1) with 24 random bits */
float rng_uniform(Rng *r);
/* uniform integer in [0, n), n > 0, without modulo bias */
uint64_t rng_below(Rng *r, uint64_t n);
/* standard normal (Box-Muller, double precision internally) */
float rng_normal(Rng *r);
/* Fisher-Yates shuffle of an int array */
void rng_shuffle_int(Rng *r, int *a, int n);

#endif
