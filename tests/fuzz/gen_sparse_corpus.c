/* Writes the seed corpora of the sparse codec fuzz targets,
 * tests/fuzz/corpus/fuzz_{topk,dgc,sbc}/, in the input layout of sparse_fuzz.h:
 * valid payloads from the real encoders (decode mode, plain, accumulating and
 * with forbidden flags) and float vectors for the round-trip mode.
 *
 * Build and run from the repository root (after `make build/libgcx.a`):
 *   cc -std=c11 -D_GNU_SOURCE -I. -O1 tests/fuzz/gen_sparse_corpus.c build/libgcx.a -lm -lz -fopenmp \
 *      -o build/gen_sparse_corpus && build/gen_sparse_corpus
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/rng.h"
#include "compress/codec.h"

static void fill(float *x, size_t n, int kind, uint64_t seed) {
    Rng r;
    rng_init(&r, seed, (uint64_t)kind);
    for (size_t i = 0; i < n; i++) {
        float g = rng_normal(&r);
        if (kind == 0) x[i] = g;                                   /* normal */
        else if (kind == 1) x[i] = (float)(int)(g * 3.0f) * 0.25f; /* ties and zeros */
        else if (kind == 2) x[i] = g < 0 ? 3.0f * g : g;           /* skewed negative */
        else x[i] = rng_uniform(&r) < 0.02f ? g : 0.0f;            /* mostly zero */
    }
}

static void write_file(const char *dir, const char *name, const uint8_t *prefix, const void *body, size_t len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(prefix, 1, 3, f) != 3 || (len && fwrite(body, 1, len, f) != len)) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
    printf("  %s (%zu bytes)\n", path, len + 3);
}

/* a decode-mode input: the payload of encode(x) at density d */
static void payload_case(const char *dir, const char *codec, const char *name, int mode, size_t n, int kind,
                         double d) {
    CodecSpec s;
    codec_spec_default(&s, codec_find(codec));
    Codec *c = codec_new(&s);
    float *x = malloc((n + 1) * sizeof *x);
    fill(x, n, kind, 42 + n);
    size_t cap = codec_max_frame(c, n);
    uint8_t *frame = malloc(cap);
    CodecSide side;
    memset(&side, 0, sizeof side);
    side.density = d;
    int64_t len = codec_encode(c, frame, cap, x, n, &side);
    if (len < CODEC_HEADER_SIZE) {
        fprintf(stderr, "%s: encode failed (%lld)\n", codec, (long long)len);
        exit(1);
    }
    uint8_t prefix[3] = {(uint8_t)mode, (uint8_t)(n & 0xFF), (uint8_t)(n >> 8)};
    write_file(dir, name, prefix, frame + CODEC_HEADER_SIZE, (size_t)len - CODEC_HEADER_SIZE);
    free(frame);
    free(x);
    codec_free(c);
}

/* a round-trip-mode input: n floats at density (dbyte + 1) / 256 */
static void roundtrip_case(const char *dir, const char *name, size_t n, int kind, uint8_t dbyte, int tile) {
    float *x = malloc((n + 1) * sizeof *x);
    fill(x, n, kind, 7 + n);
    uint8_t prefix[3] = {(uint8_t)(tile ? 9 : 1), dbyte, (uint8_t)(tile ? 40 : 0)};
    write_file(dir, name, prefix, x, n * sizeof *x);
    free(x);
}

int main(void) {
    static const char *codecs[] = {"topk", "dgc", "sbc"};
    mkdir("tests/fuzz/corpus", 0755);
    for (int k = 0; k < 3; k++) {
        char dir[256];
        snprintf(dir, sizeof dir, "tests/fuzz/corpus/fuzz_%s", codecs[k]);
        mkdir(dir, 0755);
        printf("%s\n", dir);
        payload_case(dir, codecs[k], "empty", 0, 0, 0, 0.05);
        payload_case(dir, codecs[k], "one", 0, 1, 0, 0.05);
        payload_case(dir, codecs[k], "n13_normal", 0, 13, 0, 0.2);
        payload_case(dir, codecs[k], "n300_ties", 0, 300, 1, 0.05);
        payload_case(dir, codecs[k], "n300_skewed_acc", 2, 300, 2, 0.03);
        payload_case(dir, codecs[k], "n2000_sparse", 0, 2000, 3, 0.01);
        payload_case(dir, codecs[k], "n13_flags", 4, 13, 0, 0.2);
        roundtrip_case(dir, "rt_n64_normal", 64, 0, 25, 0);
        roundtrip_case(dir, "rt_n200_ties", 200, 1, 127, 0);
        roundtrip_case(dir, "rt_tiled_sampled", 97, 2, 3, 1);
    }
    return 0;
}
