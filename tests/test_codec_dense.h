/* Helpers shared by the dense codec tests (tests/test_codec_dense*.c): the
 * fixture reader for tests/fixtures/codec_dense.bin (written by
 * tests/ref/codec_dense_fixtures.py, format documented there), codec
 * construction, random vectors and encode/decode wrappers.
 * Header-only; include once per test binary, after tests/test.h. */
#ifndef GC_TEST_CODEC_DENSE_H
#define GC_TEST_CODEC_DENSE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/rng.h"
#include "compress/codec.h"

#define DFX_PATH "tests/fixtures/codec_dense.bin"
#define DFX_HINT "regenerate with: /usr/bin/python3 tests/ref/codec_dense_fixtures.py"

typedef struct {
    char name[64];
    uint32_t dtype; /* 0 float32, 1 int32 */
    size_t numel;
    void *data;
} DfxRec;

typedef struct {
    DfxRec *r;
    uint32_t n;
} Dfx;

static inline void dfx_die(const char *why) {
    fprintf(stderr, "error: fixture %s: %s\n  %s\n", DFX_PATH, why, DFX_HINT);
    printf("RESULT 0 1\n");
    exit(1);
}

static inline Dfx dfx_load(void) {
    Dfx fx = {0};
    FILE *f = fopen(DFX_PATH, "rb");
    if (!f) dfx_die("cannot open (run the test from the repository root)");
    char magic[8];
    uint32_t hdr[2];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "GCXFIXT", 8) != 0) dfx_die("bad magic, expected GCXFIXT");
    if (fread(hdr, 4, 2, f) != 2) dfx_die("truncated header");
    if (hdr[0] != 1) dfx_die("version is not 1");
    fx.n = hdr[1];
    fx.r = callocCheck(fx.n, sizeof *fx.r);
    for (uint32_t i = 0; i < fx.n; i++) {
        DfxRec *r = &fx.r[i];
        uint32_t len, nd, dims[4];
        if (fread(&len, 4, 1, f) != 1 || len >= sizeof r->name) dfx_die("bad record name");
        if (fread(r->name, 1, len, f) != len) dfx_die("truncated name");
        if (fread(&r->dtype, 4, 1, f) != 1 || r->dtype > 1) dfx_die("bad dtype");
        if (fread(&nd, 4, 1, f) != 1 || nd > 4) dfx_die("bad ndim");
        if (nd && fread(dims, 4, nd, f) != nd) dfx_die("truncated dims");
        r->numel = 1;
        for (uint32_t d = 0; d < nd; d++) r->numel *= dims[d];
        r->data = mallocCheck(r->numel * 4 + 4);
        if (fread(r->data, 4, r->numel, f) != r->numel) dfx_die("truncated data");
    }
    if (fgetc(f) != EOF) dfx_die("trailing bytes");
    fclose(f);
    return fx;
}

static inline void dfx_free(Dfx *fx) {
    for (uint32_t i = 0; i < fx->n; i++) free(fx->r[i].data);
    free(fx->r);
}

/* record by name, or NULL */
static inline DfxRec *dfx_find(const Dfx *fx, const char *name) {
    for (uint32_t i = 0; i < fx->n; i++)
        if (strcmp(fx->r[i].name, name) == 0) return &fx->r[i];
    return NULL;
}

static inline uint32_t dense_bits_(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float dense_float_(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline Codec *dense_codec(const char *spec_text) {
    CodecSpec s;
    char err[256];
    if (codec_parse(&s, spec_text, err, sizeof err) != 0) {
        printf("FAIL cannot parse codec spec %s: %s\n", spec_text, err);
        printf("RESULT 0 1\n");
        exit(1);
    }
    return codec_new(&s);
}

/* kind 0 normal, 1 heavy tail, 2 sparse (90% zero), 3 all zero, 4 ties/small ints, 5 tiny (subnormal range)
 * x: [n] */
static inline void dense_fill(float *x, size_t n, uint64_t seed, int kind) {
    Rng r;
    rng_init(&r, seed, (uint64_t)kind);
    for (size_t i = 0; i < n; i++) {
        float g = rng_normal(&r);
        switch (kind) {
        case 0: x[i] = g; break;
        case 1: x[i] = g * expf(2.0f * rng_normal(&r)) * 1e-3f; break;
        case 2: x[i] = rng_uniform(&r) < 0.1f ? g : 0.0f; break;
        case 3: x[i] = 0.0f; break;
        case 4: x[i] = (float)(int)(g * 3.0f) * 0.25f; break;
        default: x[i] = g * 1e-39f; break;
        }
    }
}

/* encode into a fresh exact-size buffer; returns the frame (caller frees) and its length, or NULL + *len < 0 */
static inline uint8_t *dense_encode(Codec *c, const float *x, size_t n, const CodecSide *side, int64_t *len) {
    size_t cap = codec_max_frame(c, n);
    uint8_t *f = mallocCheck(cap);
    *len = codec_encode(c, f, cap, x, n, side);
    if (*len < 0) {
        free(f);
        return NULL;
    }
    return f;
}

#endif
