/* Top-k selection shared by the sparsifying codecs (topk, dgc, sbc).
 *
 * select_topk() picks the k elements of x[n] with the largest KEY, where the
 * key of a float is an unsigned integer that orders floats the way the codec
 * needs (see SelectKey): |x| for topk and dgc, the positive or the negative
 * values by magnitude for sbc. Elements whose key is 0 (zeros, and for the
 * signed modes the values of the other sign) are never selected.
 *
 * The result is EXACTLY the definition: the min(k, #nonzero keys) elements
 * with the largest keys; ties at the threshold are broken by taking the lowest
 * indices first. Indices come out in increasing order.
 *
 * How (DGC section 5, "sampling to reduce top-k selection time" and
 * hierarchical threshold selection; 3LC section 4.2 "we only sort sampled
 * input values"):
 *   1. tensors of at most SELECT_EXACT_MAX elements: exact selection over all
 *      nonzero keys (the sample would be the whole tensor);
 *   2. otherwise sample m = max(SELECT_MIN_SAMPLE, 0.1% of n) keys, one per
 *      stratum of n/m consecutive elements at an offset from
 *      rng_hash64(SELECT_SEED ^ n, stratum) (select_sample_index), so the
 *      pattern is a pure function of n and every worker and backend selects
 *      the same set; the sample threshold T0 is the j-th largest sample key,
 *      j = the expected rank k*m/n plus a 3-sigma margin, so that a little
 *      more than k elements pass it;
 *   3. one pass over x gathers the candidates, the indices whose key >= T0;
 *      the precise k-th largest key T is computed among them ("a precise
 *      threshold is calculated from the already-selected gradients") and the
 *      result is picked from the candidates: keys > T and the first ties at
 *      T. The candidates are O(k), so this step is cheap and always applied:
 *      a frame holds exactly k values;
 *   4. if the sample threshold was too high (fewer than k candidates), fall
 *      back to exact selection over all nonzero keys (rare; still O(n)).
 * Every k-th-largest search is a radix select on the 32-bit keys with
 * digits of 12, 12 and 8 bits (the first covers sign, exponent and 3 mantissa
 * bits of the float): O(n) worst case, no sort, no data-dependent recursion.
 *
 * Single-threaded (the codecs ignore CodecSide.threads). Scratch memory is
 * allocated per call: O(sample + candidates), about 8 bytes per candidate;
 * the exact path and the fallback take 8 bytes per nonzero value.
 */
#ifndef GC_SELECT_H
#define GC_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "common/errors.h"
#include "common/rng.h"

/* tensors up to this size are selected exactly (no sampling) */
#define SELECT_EXACT_MAX 8192
/* sample size: max(SELECT_MIN_SAMPLE, SELECT_SAMPLE_FRAC * n) (DGC section 5: 0.1% to 1%; the
 * precise second step makes the low end enough, and each sample is a cache miss) */
#define SELECT_MIN_SAMPLE 2048
#define SELECT_SAMPLE_FRAC 0.001
#define SELECT_SEED 0x5E1EC7ED5A3F1E00ULL

typedef enum {
    SELECT_MAG = 0, /* key = |x| (the IEEE bits without the sign): topk, dgc */
    SELECT_POS = 1, /* key = x for x > 0, else 0: sbc's largest values */
    SELECT_NEG = 2, /* key = -x for x < 0, else 0: sbc's smallest values */
} SelectKey;

/* the key of one float; keys order like the magnitudes they stand for (NaN
 * ranks above infinity, -0 and +0 both have key 0) */
static inline uint32_t select_key(float f, SelectKey mode) {
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    uint32_t mag = u & 0x7FFFFFFFu, sign = u >> 31;
    if (mode == SELECT_MAG) return mag;
    if (mode == SELECT_POS) return mag & (sign - 1u); /* branch-free: the sign is random */
    return mag & (0u - sign);
}

/* the j-th of m sample positions in [0, n) (m <= n): one per stratum
 * [j*n/m, (j+1)*n/m), at an offset from rng_hash64(SELECT_SEED ^ n, j) */
static inline size_t select_sample_index(size_t n, size_t m, size_t j) {
    uint64_t lo = (uint64_t)j * n / m, hi = (uint64_t)(j + 1) * n / m;
    return (size_t)(lo + (((rng_hash64(SELECT_SEED ^ (uint64_t)n, j) >> 32) * (hi - lo)) >> 32));
}

typedef struct {
    int sampled;       /* 1 when the sampled path (2-3) gave the result */
    int fallback;      /* 1 when the sample threshold was too high and exact selection ran */
    size_t sample;     /* sample size m (0 on the exact path) */
    size_t candidates; /* elements passing the sample threshold */
    uint32_t thr;      /* key of the k-th selected element (0 when nothing was selected) */
} SelectInfo;

/* Select the top-k keys of x.
 *   idx:  out [k] selected indices, increasing
 *   info: out (optional) how the selection went
 *   x:    in  [n]
 * Returns the number selected, min(k, number of nonzero keys), or
 * -GC_ERR_NOMEM if scratch memory could not be allocated. */
int64_t select_topk(uint32_t *idx, SelectInfo *info, const float *x, size_t n, size_t k, SelectKey mode);

/* k-th largest of a[c] (1 <= k <= c) by radix select; a is scratch (reordered).
 *   above: out number of elements of a strictly greater than the result */
uint32_t select_kth_largest(size_t *above, uint32_t *a, size_t c, size_t k);

/* the number of values a density/ratio/p selects from n: max(1, round(density*n)),
 * capped at n (0 when n == 0) */
size_t select_count(double density, size_t n);

/* mask[i] = 1 for the cnt indices in idx, else 0 (CodecSide.mask); no-op when mask is NULL
 *   mask: out [n]   idx: in [cnt] */
static inline void select_fill_mask(uint8_t *mask, const uint32_t *idx, size_t cnt, size_t n) {
    if (!mask) return;
    __builtin_memset(mask, 0, n);
    for (size_t j = 0; j < cnt; j++) mask[idx[j]] = 1;
}

/* 1 when every selected value is finite (the sparse codecs reject NaN/Inf
 * input; with the MAG key any non-finite value ranks first and is selected)
 *   x: in [n]   idx: in [cnt] */
static inline int select_all_finite(const float *x, const uint32_t *idx, size_t cnt) {
    for (size_t j = 0; j < cnt; j++) {
        uint32_t u;
        __builtin_memcpy(&u, &x[idx[j]], 4);
        if ((u & 0x7F800000u) == 0x7F800000u) return 0;
    }
    return 1;
}

/* the density one encode uses: CodecSide.density when > 0 (DGC's warm-up
 * schedule), else the spec's value. 0, or -GC_ERR_PARAM when above 1. */
static inline int select_density(double *out, double spec, double side) {
    double d = side > 0 ? side : spec;
    if (!(d > 0 && d <= 1)) return -GC_ERR_PARAM;
    *out = d;
    return 0;
}

/* A sparsifying encoder's selection (topk, dgc, sbc): the density of this encode
 * (select_density of the spec's and CodecSide's), k = select_count of it, and the top
 * k of x[n] by mode, every one finite. *idx receives a malloc'd array of their
 * indices (at least 1 entry; the caller frees it; NULL on error), *density the
 * density. Returns their count, or -GC_ERR_PARAM (a density outside (0, 1], a
 * selected value not finite) or -GC_ERR_NOMEM. */
int64_t select_for_encode(uint32_t **idx, double *density, double spec, double side, const float *x, size_t n,
                          SelectKey mode);

#endif
