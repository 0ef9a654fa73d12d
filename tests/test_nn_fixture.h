/* Reader for the nn reference fixtures written by tests/ref/nn_fixtures.py
 * (format documented there: magic "GCXNNFX\0", version 1, named float32/int32
 * tensors), plus the helpers the nn tests share: the hash weights that the
 * script also computes, layout conversion and a tolerance check.
 * Header-only; include once per test binary, after tests/test.h. */
#ifndef GC_TEST_NN_FIXTURE_H
#define GC_TEST_NN_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"

#define NNFX_MAGIC "GCXNNFX"
#define NNFX_VERSION 1u
#define NNFX_HINT "regenerate with: /usr/bin/python3 tests/ref/nn_fixtures.py"

typedef struct {
    char name[96];
    int dtype; /* 0 float32, 1 int32 */
    int ndim;
    int dims[8];
    size_t numel;
    void *data;
} NnTensor;

typedef struct {
    NnTensor *t;
    int n;
    const char *path;
} NnFixture;

static void nnfx_die(const char *path, const char *why) {
    fprintf(stderr, "error: fixture %s: %s\n  %s\n", path, why, NNFX_HINT);
    exit(1);
}

static NnFixture nnfx_load(const char *path) {
    NnFixture fx = {0};
    fx.path = path;
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "error: cannot open fixture %s (run the test from the repository root)\n  %s\n", path,
                NNFX_HINT);
        exit(1);
    }
    char magic[8];
    uint32_t hdr[2];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, NNFX_MAGIC, 8) != 0) nnfx_die(path, "bad magic, expected GCXNNFX");
    if (fread(hdr, 4, 2, f) != 2) nnfx_die(path, "truncated header");
    if (hdr[0] != NNFX_VERSION) {
        fprintf(stderr, "error: fixture %s has version %u, expected %u\n  %s\n", path, hdr[0], NNFX_VERSION,
                NNFX_HINT);
        exit(1);
    }
    fx.n = (int)hdr[1];
    fx.t = callocCheck((size_t)fx.n, sizeof(NnTensor));
    for (int i = 0; i < fx.n; i++) {
        NnTensor *t = &fx.t[i];
        uint16_t len;
        uint8_t dt[2];
        if (fread(&len, 2, 1, f) != 1 || len >= sizeof t->name) nnfx_die(path, "bad tensor name");
        if (fread(t->name, 1, len, f) != len) nnfx_die(path, "truncated name");
        if (fread(dt, 1, 2, f) != 2 || dt[0] > 1 || dt[1] > 8) nnfx_die(path, "bad dtype/ndim");
        t->dtype = dt[0];
        t->ndim = dt[1];
        if (t->ndim && fread(t->dims, 4, (size_t)t->ndim, f) != (size_t)t->ndim) nnfx_die(path, "truncated dims");
        t->numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->dims[d] < 0) nnfx_die(path, "negative dim");
            t->numel *= (size_t)t->dims[d];
        }
        t->data = mallocCheck(t->numel * 4);
        if (fread(t->data, 4, t->numel, f) != t->numel) nnfx_die(path, "truncated data");
    }
    if (fgetc(f) != EOF) nnfx_die(path, "trailing bytes");
    fclose(f);
    return fx;
}

static void nnfx_free(NnFixture *fx) {
    for (int i = 0; i < fx->n; i++) free(fx->t[i].data);
    free(fx->t);
    fx->t = NULL;
    fx->n = 0;
}

static NnTensor *nnfx_find(const NnFixture *fx, const char *name) {
    for (int i = 0; i < fx->n; i++)
        if (strcmp(fx->t[i].name, name) == 0) return &fx->t[i];
    return NULL;
}

static NnTensor *nnfx_need(const NnFixture *fx, const char *name, int dtype, size_t numel) {
    NnTensor *t = nnfx_find(fx, name);
    if (!t) {
        fprintf(stderr, "error: fixture %s has no tensor '%s'\n  %s\n", fx->path, name, NNFX_HINT);
        exit(1);
    }
    if (t->dtype != dtype || (numel && t->numel != numel)) {
        fprintf(stderr, "error: fixture %s: tensor '%s' has dtype %d and %zu values, expected dtype %d and %zu\n",
                fx->path, name, t->dtype, t->numel, dtype, numel);
        exit(1);
    }
    return t;
}

/* float tensor by name; numel 0 = any size */
static float *nnfx_f(const NnFixture *fx, const char *name, size_t numel) {
    return (float *)nnfx_need(fx, name, 0, numel)->data;
}
static int *nnfx_i(const NnFixture *fx, const char *name, size_t numel) {
    return (int *)nnfx_need(fx, name, 1, numel)->data;
}
/* name built with printf-style prefix + key */
static inline const char *nnfx_key(const char *prefix, const char *key) {
    static char buf[4][128];
    static int k;
    k = (k + 1) & 3;
    snprintf(buf[k], sizeof buf[k], "%s%s", prefix, key);
    return buf[k];
}

/* ---- hash weights: the twin of hash_uniform / hash_fill in nn_fixtures.py ---- */
static inline float nnfx_hash_uniform(uint32_t seed, uint32_t i) {
    uint32_t x = i * 0x9E3779B1u + seed * 0x85EBCA77u;
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return (float)(x >> 8) / 8388608.0f - 1.0f;
}

/* ---- comparison: |got - want| <= rtol * (|want| + max|want| * afrac) ----
 * afrac scales the absolute floor by the tensor's largest magnitude, so
 * elements near zero that are sums of large cancelling terms are judged
 * against the size of the tensor, not their own size. */
static int nnfx_close(const char *what, const float *got, const float *want, size_t n, float rtol, float afrac,
                      const char *file, int line) {
    float mx = 0.0f;
    for (size_t i = 0; i < n; i++)
        if (fabsf(want[i]) > mx) mx = fabsf(want[i]);
    return check_close_(what, got, want, n, rtol, rtol * afrac * mx, file, line);
}
#define NNFX_CLOSE(what, got, want, n, rtol, afrac) nnfx_close((what), (got), (want), (n), (rtol), (afrac), __FILE__, __LINE__)

#endif
