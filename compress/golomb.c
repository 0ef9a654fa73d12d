/* Golomb and Rice codes (SBC section II, equation 5, Algorithms 3 and 4). See golomb.h. */
#include "golomb.h"

#include <math.h>

#include "common/errors.h"

int golomb_rice_bits(double p) {
    if (!(p > 0.0)) return 31; /* p -> 0: gaps unbounded, largest parameter */
    if (p >= 1.0) return 0;
    const double phi = (1.0 + sqrt(5.0)) / 2.0;
    double ratio = log(phi - 1.0) / log1p(-p); /* both logs negative */
    double b = 1.0 + floor(log2(ratio));
    if (b < 0.0) return 0;
    if (b > 31.0) return 31;
    return (int)b;
}

double golomb_rice_mean_bits(double p, int b) {
    double theta = pow(1.0 - p, ldexp(1.0, b)); /* (1-p)^(2^b) */
    return (double)b + 1.0 / (1.0 - theta);
}

/* c = ceil(log2 M) for M >= 1 */
static int ceil_log2(uint32_t M) {
    int c = 0;
    while (c < 32 && (1ULL << c) < M) c++;
    return c;
}

uint64_t golomb_len(uint64_t v, uint32_t M) {
    int c = ceil_log2(M);
    uint64_t u = (1ULL << c) - M;
    uint64_t r = v % M;
    return v / M + 1 + (uint64_t)(r < u ? c - 1 : c);
}

void golomb_put(BitWriter *w, uint64_t v, uint32_t M) {
    uint64_t q = v / M, r = v % M;
    while (q >= 32) {
        bw_put(w, 0xFFFFFFFFu, 32);
        q -= 32;
    }
    bw_put(w, (uint32_t)(((1ULL << q) - 1) << 1), (int)q + 1);
    int c = ceil_log2(M);
    uint64_t u = (1ULL << c) - M;
    if (r < u) bw_put(w, (uint32_t)r, c - 1);
    else bw_put(w, (uint32_t)(r + u), c);
}

int golomb_get(uint64_t *v, BitReader *r, uint32_t M, uint64_t vmax) {
    if (M == 0) return -GC_ERR_CORRUPT;
    uint64_t q;
    int rc = golomb_get_unary(&q, r, vmax / M);
    if (rc) return rc;
    int c = ceil_log2(M);
    uint64_t u = (1ULL << c) - M;
    uint64_t x = c > 0 ? br_get(r, c - 1) : 0;
    if (c > 0 && x >= u) x = ((x << 1) | br_get(r, 1)) - u;
    if (r->overrun) return -GC_ERR_TRUNCATED;
    uint64_t val = q * M + x;
    if (val > vmax) return -GC_ERR_CORRUPT;
    *v = val;
    return 0;
}
