/* Helpers shared by the sparse codec tests (tests/test_codec_sparse*.c):
 * brute-force selection by full sort, codec construction, random vectors. */
#ifndef GC_TEST_CODEC_SPARSE_H
#define GC_TEST_CODEC_SPARSE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "compress/codec.h"
#include "compress/select.h"

typedef struct {
    uint32_t key, i;
} KeyIdx;

static inline int cmp_keyidx(const void *a, const void *b) {
    const KeyIdx *p = a, *q = b;
    if (p->key != q->key) return p->key > q->key ? -1 : 1; /* larger key first */
    return p->i < q->i ? -1 : (p->i > q->i); /* then lower index */
}

static inline int cmp_u32(const void *a, const void *b) {
    uint32_t p = *(const uint32_t *)a, q = *(const uint32_t *)b;
    return p < q ? -1 : (p > q);
}

/* The nonzero keys of x sorted by the definition's order: larger key first,
 * ties by lower index.  a: out [n]; returns how many */
static inline size_t brute_sort(KeyIdx *a, const float *x, size_t n, SelectKey mode) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t key = select_key(x[i], mode);
        if (key) a[c++] = (KeyIdx){key, (uint32_t)i};
    }
    qsort(a, c, sizeof *a, cmp_keyidx);
    return c;
}

/* the first min(k, c) of a sorted list, in increasing index order.  idx: out [k] */
static inline size_t brute_take(uint32_t *idx, const KeyIdx *a, size_t c, size_t k) {
    size_t m = c < k ? c : k;
    for (size_t j = 0; j < m; j++) idx[j] = a[j].i;
    qsort(idx, m, sizeof *idx, cmp_u32);
    return m;
}

/* The definition by full sort: the min(k, #nonzero keys) largest keys, ties by
 * lowest index, returned in increasing index order.
 *   idx: out [k]; returns the count */
static inline size_t brute_topk(uint32_t *idx, const float *x, size_t n, size_t k, SelectKey mode) {
    KeyIdx *a = malloc((n ? n : 1) * sizeof *a);
    size_t m = brute_take(idx, a, brute_sort(a, x, n, mode), k);
    free(a);
    return m;
}

static inline Codec *make_codec(const char *spec_text) {
    CodecSpec s;
    char err[256];
    if (codec_parse(&s, spec_text, err, sizeof err) != 0) {
        printf("FAIL cannot parse codec spec %s: %s\n", spec_text, err);
        exit(1);
    }
    return codec_new(&s);
}

/* fill x with a mix that has ties, zeros, both signs and a heavy tail */
static inline void fill_vector(float *x, size_t n, uint64_t seed, int kind) {
    Rng r;
    rng_init(&r, seed, (uint64_t)kind);
    for (size_t i = 0; i < n; i++) {
        float g = rng_normal(&r);
        switch (kind) {
        case 0: x[i] = g; break;                                       /* normal */
        case 1: x[i] = g * expf(2.0f * rng_normal(&r)); break;        /* heavy tail */
        case 2: x[i] = (float)(int)(g * 3.0f) * 0.25f; break;         /* many ties and zeros */
        case 3: x[i] = rng_uniform(&r) < 0.01f ? g : 0.0f; break;     /* 1% nonzero */
        case 4: x[i] = 0.0f; break;                                    /* all zero */
        case 5: x[i] = 1.0f; break;                                    /* all equal */
        case 6: x[i] = g < 0 ? 2.0f * g : 0.5f * g; break;            /* skewed */
        default: x[i] = (i % 7 == 3) ? -g : 0.0f; break;               /* strided */
        }
    }
}

#endif
