/* Top-k selection for the sparsifying codecs: sampled threshold, then a
 * precise threshold among the candidates (DGC section 5). See select.h. */
#include "select.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "common/rng.h"

size_t select_count(double density, size_t n) {
    if (n == 0) return 0;
    double v = density * (double)n;
    if (!(v >= 1.0)) return 1; /* also NaN */
    if (v >= (double)n) return n;
    size_t k = (size_t)llround(v);
    return k < 1 ? 1 : (k > n ? n : k);
}

/* digit layout of the radix select: bits 31..20 (sign, exponent and 3
 * mantissa bits of a float key, so the first level already separates values
 * of different magnitude), 19..8, 7..0 */
static const int rs_shift[3] = {20, 8, 0}, rs_width[3] = {12, 12, 8};

/* one level: histogram of the digit at level over a[c], find the bucket of the
 * k-th largest; returns the bucket, updates *k (rank inside the bucket) and
 * *greater (elements in higher buckets), *in (elements in the bucket) */
static uint32_t rs_level(size_t *k, size_t *greater, size_t *in, const uint32_t *a, size_t c, int level) {
    uint32_t hist[4096];
    int sh = rs_shift[level], nb = 1 << rs_width[level];
    uint32_t dm = (uint32_t)nb - 1;
    memset(hist, 0, (size_t)nb * sizeof hist[0]);
    for (size_t i = 0; i < c; i++) hist[(a[i] >> sh) & dm]++;
    size_t cum = 0;
    int b = nb - 1;
    for (; b > 0; b--) {
        if (cum + hist[b] >= *k) break;
        cum += hist[b];
    }
    *greater += cum; /* elements in higher buckets are all larger */
    *k -= cum;
    *in = hist[b];
    return (uint32_t)b;
}

/* keep the elements of src[c] whose digit at level is b (branch-free); dst may be src */
static size_t rs_keep(uint32_t *dst, const uint32_t *src, size_t c, int level, uint32_t b) {
    int sh = rs_shift[level];
    uint32_t dm = (1u << rs_width[level]) - 1;
    size_t n = 0;
    for (size_t i = 0; i < c; i++) {
        uint32_t v = src[i];
        dst[n] = v;
        n += ((v >> sh) & dm) == b;
    }
    return n;
}

/* levels from `level` on, in place on a[c] */
static uint32_t rs_rest(size_t *above, uint32_t *a, size_t c, size_t k, int level, uint32_t prefix, size_t greater) {
    for (; level < 3; level++) {
        size_t in;
        uint32_t b = rs_level(&k, &greater, &in, a, c, level);
        prefix |= b << rs_shift[level];
        if (in != c) c = rs_keep(a, a, c, level, b);
    }
    *above = greater;
    return prefix;
}

uint32_t select_kth_largest(size_t *above, uint32_t *a, size_t c, size_t k) {
    return rs_rest(above, a, c, k, 0, 0, 0);
}

/* The same on a read-only a[c]: the first level runs on a, then only its
 * bucket is copied to scratch (usually a small part of a). Sets *nomem when
 * the scratch cannot be allocated. */
static uint32_t kth_largest_const(size_t *above, int *nomem, const uint32_t *a, size_t c, size_t k) {
    size_t greater = 0, in;
    uint32_t b = rs_level(&k, &greater, &in, a, c, 0);
    uint32_t *s = malloc((in ? in : 1) * sizeof *s);
    if (!s) {
        *nomem = 1;
        return 0;
    }
    size_t w = 0;
    for (size_t i = 0; i < c; i++) /* branchy: most elements are not in the bucket */
        if (((a[i] >> rs_shift[0]) & ((1u << rs_width[0]) - 1)) == b) s[w++] = a[i];
    uint32_t t = rs_rest(above, s, w, k, 1, b << rs_shift[0], greater);
    free(s);
    return t;
}

/* ---- the one pass over x, specialised per key mode by inlining ---- */

/* Indices i (increasing) with key(x[i]) >= t, and their keys. Writes at most
 * cap of them to pos/keys and returns how many there are in all (more than
 * cap: the lists are partial). Blocks of 16 with no candidate are skipped
 * after one vectorised test; inside a hit block the writes are branch-free. */
static inline size_t gather_ge(uint32_t *pos, uint32_t *keys, size_t cap, const float *x, size_t n, uint32_t t,
                               SelectKey mode, int dense) {
    size_t w = 0, i = 0;
    for (; i + 16 <= n; i += 16) {
        if (!dense) { /* sparse candidates: most blocks have none */
            int hit = 0;
            for (int j = 0; j < 16; j++) hit |= select_key(x[i + j], mode) >= t;
            if (!hit) continue;
        }
        if (w + 16 <= cap) {
            for (int j = 0; j < 16; j++) {
                uint32_t key = select_key(x[i + j], mode);
                pos[w] = (uint32_t)(i + j);
                keys[w] = key;
                w += key >= t;
            }
        } else {
            for (int j = 0; j < 16; j++) {
                uint32_t key = select_key(x[i + j], mode);
                if (key >= t) {
                    if (w < cap) {
                        pos[w] = (uint32_t)(i + j);
                        keys[w] = key;
                    }
                    w++;
                }
            }
        }
    }
    for (; i < n; i++) {
        uint32_t key = select_key(x[i], mode);
        if (key >= t) {
            if (w < cap) {
                pos[w] = (uint32_t)i;
                keys[w] = key;
            }
            w++;
        }
    }
    return w;
}

static size_t gather_ge_any(uint32_t *pos, uint32_t *keys, size_t cap, const float *x, size_t n, uint32_t t,
                            SelectKey mode) {
    /* above ~1/8 candidates nearly every block of 16 holds one: skip the skip test */
    int dense = (double)cap > (double)n / 8.0;
    if (mode == SELECT_MAG) return gather_ge(pos, keys, cap, x, n, t, SELECT_MAG, dense);
    if (mode == SELECT_POS) return gather_ge(pos, keys, cap, x, n, t, SELECT_POS, dense);
    return gather_ge(pos, keys, cap, x, n, t, SELECT_NEG, dense);
}

/* The candidates: every index with key >= t, in increasing order, and their
 * keys, in one fresh buffer of 2 * count entries (pos, then keys); cap is a
 * first guess of their number. NULL when out of memory. */
static uint32_t *candidates(size_t *count, const float *x, size_t n, uint32_t t, SelectKey mode, size_t cap) {
    if (cap > n) cap = n;
    uint32_t *buf = malloc((2 * cap + 1) * sizeof *buf);
    if (!buf) return NULL;
    size_t c = gather_ge_any(buf, buf + cap, cap, x, n, t, mode);
    if (c > cap) { /* the guess was short: once more with the exact size */
        free(buf);
        cap = c;
        buf = malloc((2 * cap + 1) * sizeof *buf);
        if (!buf) return NULL;
        gather_ge_any(buf, buf + cap, cap, x, n, t, mode);
    } else if (c < cap) {
        memmove(buf + c, buf + cap, c * sizeof *buf); /* keys right after the c positions */
    }
    *count = c;
    return buf;
}

/* From the candidates (pos[c], then keys[c]; all keys >= the final threshold
 * among them) pick the top k: every key > T and the first q keys == T.
 *   idx: out [k]. Returns the count, or (size_t)-1 when out of memory. */
static size_t pick(uint32_t *idx, SelectInfo *inf, uint32_t *cand, size_t c, size_t k) {
    const uint32_t *pos = cand, *keys = cand + c;
    if (c <= k) { /* all of them */
        memcpy(idx, pos, c * sizeof *idx);
        uint32_t lo = UINT32_MAX;
        for (size_t j = 0; j < c; j++) lo = keys[j] < lo ? keys[j] : lo;
        inf->thr = c ? lo : 0;
        return c;
    }
    size_t above;
    int nomem = 0;
    uint32_t t = kth_largest_const(&above, &nomem, keys, c, k);
    if (nomem) return (size_t)-1;
    size_t q = k - above, cnt = 0; /* ties at t to take, lowest indices first */
    for (size_t j = 0; j < c && cnt < k; j++) {
        uint32_t key = keys[j];
        int eq = (key == t) & (q > 0);
        idx[cnt] = pos[j];
        cnt += (key > t) | eq;
        q -= (size_t)eq;
    }
    inf->thr = t;
    return cnt;
}

int64_t select_topk(uint32_t *idx, SelectInfo *info, const float *x, size_t n, size_t k, SelectKey mode) {
    SelectInfo inf;
    memset(&inf, 0, sizeof inf);
    if (k > n) k = n;
    uint32_t t0 = 1;     /* candidates: keys >= t0; 1 = every nonzero key */
    size_t guess = n;    /* expected number of candidates */
    if (k > 0 && n > SELECT_EXACT_MAX) {
        /* DGC section 5: estimate the threshold from a sample of 0.1%-1% of the values */
        size_t m = (size_t)ceil((double)n * SELECT_SAMPLE_FRAC);
        if (m < SELECT_MIN_SAMPLE) m = SELECT_MIN_SAMPLE;
        if (m > n) m = n;
        inf.sampled = 1;
        inf.sample = m;
        uint32_t *s = malloc(m * sizeof *s);
        if (!s) return -GC_ERR_NOMEM;
        size_t nz = 0;
        for (size_t j = 0; j < m; j++) {
            uint32_t key = select_key(x[select_sample_index(n, m, j)], mode);
            s[nz] = key;
            nz += key != 0;
        }
        /* rank in the sample whose key about k elements of x exceed: k*m/n plus a 3-sigma margin */
        double e = (double)k * (double)m / (double)n;
        double jr = ceil(e + 3.0 * sqrt(e) + 1.0);
        if (jr <= (double)nz) {
            size_t above;
            t0 = select_kth_largest(&above, s, nz, (size_t)jr);
            guess = (size_t)(jr * (double)n / (double)m * 1.25) + 1024;
        } else {
            guess = (size_t)((double)nz * (double)n / (double)m * 1.25) + 1024;
        }
        free(s);
    }
    size_t c = 0;
    uint32_t *pos = k > 0 ? candidates(&c, x, n, t0, mode, guess) : NULL;
    if (k > 0 && !pos) return -GC_ERR_NOMEM;
    inf.candidates = c;
    if (c < k && t0 > 1) {
        /* the sample threshold was too high: exact selection over every nonzero key */
        inf.fallback = 1;
        free(pos);
        pos = candidates(&c, x, n, 1, mode, n);
        if (!pos) return -GC_ERR_NOMEM;
    }
    size_t cnt = k > 0 ? pick(idx, &inf, pos, c, k) : 0;
    free(pos);
    if (cnt == (size_t)-1) return -GC_ERR_NOMEM;
    if (info) *info = inf;
    return (int64_t)cnt;
}

int64_t select_for_encode(uint32_t **idx, double *density, double spec, double side, const float *x, size_t n,
                          SelectKey mode) {
    *idx = NULL;
    if (select_density(density, spec, side)) return -GC_ERR_PARAM;
    size_t k = select_count(*density, n);
    uint32_t *ix = malloc((k ? k : 1) * sizeof *ix);
    if (!ix) return -GC_ERR_NOMEM;
    int64_t got = select_topk(ix, NULL, x, n, k, mode);
    if (got >= 0 && !select_all_finite(x, ix, (size_t)got)) got = -GC_ERR_PARAM;
    if (got < 0) {
        free(ix);
        return got;
    }
    *idx = ix;
    return got;
}
