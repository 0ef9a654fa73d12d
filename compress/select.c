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

uint32_t select_kth_largest(size_t *above, uint32_t *a, size_t c, size_t k) {
    size_t greater = 0;
    uint32_t prefix = 0;
    /* four levels of 8-bit digits, most significant first; after each level
     * only the elements of the bucket holding the k-th largest remain */
    for (int shift = 24; shift >= 0; shift -= 8) {
        size_t hist[256];
        memset(hist, 0, sizeof hist);
        for (size_t i = 0; i < c; i++) hist[(a[i] >> shift) & 255u]++;
        size_t cum = 0;
        int b = 255;
        for (; b > 0; b--) {
            if (cum + hist[b] >= k) break;
            cum += hist[b];
        }
        greater += cum; /* elements in higher buckets are all larger */
        k -= cum;
        prefix |= (uint32_t)b << shift;
        if (hist[b] != c) {
            size_t w = 0;
            for (size_t i = 0; i < c; i++)
                if (((a[i] >> shift) & 255u) == (uint32_t)b) a[w++] = a[i];
            c = w;
        }
    }
    *above = greater;
    return prefix;
}

/* ---- passes over x, specialised per key mode by inlining ---- */

static inline size_t count_ge(const float *x, size_t n, uint32_t t, SelectKey mode) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += select_key(x[i], mode) >= t;
    return c;
}

/* gather the keys >= t into out; returns how many */
static inline size_t gather_ge(uint32_t *out, const float *x, size_t n, uint32_t t, SelectKey mode) {
    size_t w = 0, i = 0;
    for (; i + 16 <= n; i += 16) {
        int hit = 0;
        for (int j = 0; j < 16; j++) hit |= select_key(x[i + j], mode) >= t;
        if (!hit) continue;
        for (int j = 0; j < 16; j++) {
            uint32_t key = select_key(x[i + j], mode);
            if (key >= t) out[w++] = key;
        }
    }
    for (; i < n; i++) {
        uint32_t key = select_key(x[i], mode);
        if (key >= t) out[w++] = key;
    }
    return w;
}

/* emit every index with key > t and the first q indices with key == t (t >= 1) */
static inline size_t emit(uint32_t *idx, const float *x, size_t n, uint32_t t, size_t q, size_t k, SelectKey mode) {
    size_t cnt = 0, i = 0;
    for (; i + 16 <= n; i += 16) {
        int hit = 0;
        for (int j = 0; j < 16; j++) hit |= select_key(x[i + j], mode) >= t;
        if (!hit) continue;
        for (size_t j = i; j < i + 16; j++) {
            uint32_t key = select_key(x[j], mode);
            if (key > t || (key == t && q > 0)) {
                if (key == t) q--;
                if (cnt < k) idx[cnt++] = (uint32_t)j;
            }
        }
    }
    for (; i < n; i++) {
        uint32_t key = select_key(x[i], mode);
        if (key > t || (key == t && q > 0)) {
            if (key == t) q--;
            if (cnt < k) idx[cnt++] = (uint32_t)i;
        }
    }
    return cnt;
}

#define DISPATCH(call_mag, call_pos, call_neg) \
    (mode == SELECT_MAG ? (call_mag) : mode == SELECT_POS ? (call_pos) : (call_neg))

static size_t count_ge_any(const float *x, size_t n, uint32_t t, SelectKey mode) {
    return DISPATCH(count_ge(x, n, t, SELECT_MAG), count_ge(x, n, t, SELECT_POS), count_ge(x, n, t, SELECT_NEG));
}

static size_t gather_ge_any(uint32_t *out, const float *x, size_t n, uint32_t t, SelectKey mode) {
    return DISPATCH(gather_ge(out, x, n, t, SELECT_MAG), gather_ge(out, x, n, t, SELECT_POS),
                    gather_ge(out, x, n, t, SELECT_NEG));
}

static size_t emit_any(uint32_t *idx, const float *x, size_t n, uint32_t t, size_t q, size_t k, SelectKey mode) {
    return DISPATCH(emit(idx, x, n, t, q, k, SELECT_MAG), emit(idx, x, n, t, q, k, SELECT_POS),
                    emit(idx, x, n, t, q, k, SELECT_NEG));
}

/* Exact threshold over all keys: sets *t and *q (ties at t to take). 0 or -GC_ERR_NOMEM. */
static int exact_threshold(uint32_t *t, size_t *q, const float *x, size_t n, size_t k, SelectKey mode) {
    uint32_t *keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys) return -GC_ERR_NOMEM;
    size_t c = gather_ge_any(keys, x, n, 1, mode); /* the nonzero keys */
    if (c <= k) {
        *t = 1; /* everything nonzero */
        *q = k;
    } else {
        size_t above;
        *t = select_kth_largest(&above, keys, c, k);
        *q = k - above;
    }
    free(keys);
    return 0;
}

int64_t select_topk(uint32_t *idx, SelectInfo *info, const float *x, size_t n, size_t k, SelectKey mode) {
    SelectInfo inf;
    memset(&inf, 0, sizeof inf);
    if (k > n) k = n;
    if (k == 0) {
        if (info) *info = inf;
        return 0;
    }
    uint32_t t = 1;
    size_t q = k;
    int rc = 0;
    if (n <= SELECT_EXACT_MAX) {
        rc = exact_threshold(&t, &q, x, n, k, mode);
    } else {
        /* DGC section 5: estimate the threshold from a sample of 0.1%-1% of the values */
        size_t m = (size_t)ceil((double)n * SELECT_SAMPLE_FRAC);
        if (m < SELECT_MIN_SAMPLE) m = SELECT_MIN_SAMPLE;
        if (m > n) m = n;
        inf.sampled = 1;
        inf.sample = m;
        uint32_t *s = malloc(m * sizeof *s);
        if (!s) return -GC_ERR_NOMEM;
        uint64_t seed = SELECT_SEED ^ (uint64_t)n;
        size_t nz = 0;
        for (size_t j = 0; j < m; j++) {
            /* one sample per stratum [j*n/m, (j+1)*n/m) at a hashed offset */
            uint64_t lo = (uint64_t)j * n / m, hi = (uint64_t)(j + 1) * n / m;
            uint64_t at = lo + rng_hash64(seed, j) % (hi - lo);
            uint32_t key = select_key(x[at], mode);
            if (key) s[nz++] = key;
        }
        /* rank in the sample whose key about k elements of x exceed: k*m/n plus a 3-sigma margin */
        double e = (double)k * (double)m / (double)n;
        double jr = ceil(e + 3.0 * sqrt(e) + 1.0);
        uint32_t t0 = 1;
        if (jr <= (double)nz) {
            size_t above;
            t0 = select_kth_largest(&above, s, nz, (size_t)jr);
        }
        free(s);
        size_t c = count_ge_any(x, n, t0, mode);
        inf.candidates = c;
        if (c < k) {
            if (t0 > 1) { /* sample threshold too high: exact over everything */
                inf.fallback = 1;
                rc = exact_threshold(&t, &q, x, n, k, mode);
            } /* else fewer than k nonzero keys: take them all (t = 1, q = k) */
        } else {
            /* the precise threshold from the already-selected candidates */
            uint32_t *cand = malloc(c * sizeof *cand);
            if (!cand) return -GC_ERR_NOMEM;
            gather_ge_any(cand, x, n, t0, mode);
            size_t above;
            t = select_kth_largest(&above, cand, c, k);
            q = k - above;
            free(cand);
        }
    }
    if (rc) return rc;
    size_t cnt = emit_any(idx, x, n, t, q, k, mode);
    /* the smallest selected key (t itself unless fewer than k were nonzero) */
    inf.thr = cnt == k ? t : 0;
    if (cnt && cnt < k) {
        inf.thr = UINT32_MAX;
        for (size_t i = 0; i < cnt; i++) {
            uint32_t key = select_key(x[idx[i]], mode);
            if (key < inf.thr) inf.thr = key;
        }
    }
    if (info) *info = inf;
    return (int64_t)cnt;
}
