/* Writes the seed corpora of the dense codec fuzz targets,
 * tests/fuzz/corpus/fuzz_{fp16,int8,terngrad,stoch3,3lc,onebit,ternsum}/ in the input
 * layout of tests/fuzz/fuzz_dense.h (valid payloads from the real encoders:
 * plain, accumulating, with a forbidden flag; their bytes double as floats for
 * the round-trip half), and tests/fuzz/corpus/fuzz_frame/: two valid frames of
 * every registered codec and a larger 3lc one.
 *
 * Build and run from the repository root (after `make build/libgcx.a`):
 *   cc -std=c11 -D_GNU_SOURCE -I. -O1 tests/fuzz/gen_dense_corpus.c build/libgcx.a -lm -lz -fopenmp \
 *      -o build/gen_dense_corpus && build/gen_dense_corpus
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/rng.h"
#include "compress/codec.h"

/* kind 0 normal, 1 heavy tail, 2 mostly zero (long zero runs), 3 ties and zeros. x: [n] */
static void fill(float *x, size_t n, int kind, uint64_t seed) {
    Rng r;
    rng_init(&r, seed, (uint64_t)kind);
    for (size_t i = 0; i < n; i++) {
        float g = rng_normal(&r);
        if (kind == 0) x[i] = g;
        else if (kind == 1) x[i] = g * expf(2.0f * rng_normal(&r));
        else if (kind == 2) x[i] = rng_uniform(&r) < 0.01f ? g : 0.0f;
        else x[i] = (float)(int)(g * 3.0f) * 0.25f;
    }
}

static void put_file(const char *dir, const char *name, const uint8_t *p, size_t len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "gen_dense_corpus: cannot write %s\n", path);
        exit(1);
    }
}

static void codec_corpus(const char *name) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/fuzz_%s", name);
    mkdir(dir, 0755);
    CodecSpec s;
    char err[256];
    if (codec_parse(&s, name, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    Codec *c = codec_new(&s);
    static const size_t sizes[] = {0, 1, 5, 7, 64, 333, 2000};
    int files = 0;
    for (int si = 0; si < 7; si++)
        for (int kind = 0; kind < 4; kind++) {
            size_t n = sizes[si];
            if (n == 2000 && kind != 2) continue; /* long sparse vectors only */
            if (n <= 1 && kind) continue;
            float *x = malloc(4 * n + 4);
            fill(x, n, kind, 100 + (uint64_t)si);
            size_t cap = codec_max_frame(c, n);
            uint8_t *f = malloc(cap), *in = malloc(cap + 4);
            CodecSide side;
            memset(&side, 0, sizeof side);
            side.seed = (uint64_t)si;
            int64_t len = codec_encode(c, f, cap, x, n, &side);
            if (len < 0) {
                fprintf(stderr, "%s: encode failed\n", name);
                exit(1);
            }
            size_t plen = (size_t)len - CODEC_HEADER_SIZE;
            put_u16(in, (uint16_t)n);
            in[2] = (uint8_t)(files % 3 == 1 ? 1 : files % 7 == 3 ? 2 : 0); /* some accumulate, some flags */
            in[3] = (uint8_t)(si * 5 + kind);
            memcpy(in + 4, f + CODEC_HEADER_SIZE, plen);
            char fname[64];
            snprintf(fname, sizeof fname, "n%zu_k%d.bin", n, kind);
            put_file(dir, fname, in, plen + 4);
            files++;
            free(x), free(f), free(in);
        }
    codec_free(c);
    printf("wrote %d files in %s\n", files, dir);
}

/* one valid frame of codec o's of n values of kind into dir as fname */
static void frame_file(const char *dir, const char *fname, const CodecOps *o, size_t n, int kind, uint64_t seed) {
    CodecSpec s;
    codec_spec_default(&s, o);
    float *x = malloc(n * sizeof(float));
    fill(x, n, kind, seed);
    Codec *c = codec_new(&s);
    size_t cap = codec_max_frame(c, n);
    uint8_t *f = malloc(cap);
    int64_t len = codec_encode(c, f, cap, x, n, NULL);
    codec_free(c);
    if (len < 0) {
        fprintf(stderr, "%s: encode failed\n", o->name);
        exit(1);
    }
    put_file(dir, fname, f, (size_t)len);
    free(f);
    free(x);
}

/* two frames of every codec (37 normal values, 200 mostly zero), and a 3lc frame of 3,000
 * mostly zero values: a short zero-run stream of 600 base-3 bytes, which the GPU decoder
 * takes a block for on a GPU and its general kernels (their verdict deferred in a batch)
 * on the host emulation's blocks of 64 threads */
static void frame_corpus(void) {
    const char *dir = "tests/fuzz/corpus/fuzz_frame";
    mkdir(dir, 0755);
    int files = 0;
    for (int k = 0; k < codec_count(); k++) {
        const CodecOps *o = codec_ops_at(k);
        for (int v = 0; v < 2; v++) {
            size_t n = v ? 200 : 37;
            char fname[64];
            snprintf(fname, sizeof fname, "%s_n%zu.frame", o->name, n);
            frame_file(dir, fname, o, n, v ? 2 : 0, 7 + (uint64_t)k);
            files++;
        }
        if (o->id == CODEC_3LC) {
            frame_file(dir, "3lc_n3000.frame", o, 3000, 2, 7 + (uint64_t)k);
            files++;
        }
    }
    printf("wrote %d files in %s\n", files, dir);
}

int main(void) {
    mkdir("tests/fuzz/corpus", 0755);
    static const char *const names[] = {"fp16", "int8", "terngrad", "stoch3", "3lc", "onebit", "ternsum"};
    for (int i = 0; i < 7; i++) codec_corpus(names[i]);
    frame_corpus();
    return 0;
}
