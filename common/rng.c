#include "rng.h"

#include <math.h>

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void rng_init(Rng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (stream * 0xA0761D6478BD642FULL) ^ 0x5851F42D4C957F2DULL;
    for (int i = 0; i < 4; i++) r->s[i] = rng_splitmix64(&x);
}

uint64_t rng_u64(Rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float rng_uniform(Rng *r) { return (float)(rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

uint64_t rng_below(Rng *r, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = rng_u64(r);
    while (x >= limit);
    return x % n;
}

float rng_normal(Rng *r) {
    double u1 = ((rng_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0); /* (0, 1] */
    double u2 = (rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void rng_shuffle_int(Rng *r, int *a, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(r, (uint64_t)i + 1);
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}
