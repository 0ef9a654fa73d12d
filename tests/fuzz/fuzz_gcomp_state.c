/* libFuzzer target: loading a GCOMP codec's checkpointed state
 * (codec_state_load, compress/gcomp.c; layout in docs/FORMAT.md section 10,
 * Checkpointed state). The input is the state blob.
 *
 * A load must return 0 or a negative GcError and never touch memory out of
 * bounds (ASan/UBSan). An accepted blob is canonical: saving the loaded state
 * gives the same bytes back. The loaded codec then encodes a tensor and decodes
 * its own frame when that frame carries a table (both must succeed), so a
 * loaded table is a working one.
 *
 * The seed corpus tests/fuzz/corpus/fuzz_gcomp_state/ is written by this file
 * built with -DGCOMP_STATE_GEN_CORPUS, from the root:
 *   cc -std=c11 -D_GNU_SOURCE -I. -O1 -DGCOMP_STATE_GEN_CORPUS tests/fuzz/fuzz_gcomp_state.c build/libgcx.a \
 *      -lm -lz -fopenmp -o build/gen_gcomp_state_corpus && build/gen_gcomp_state_corpus
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "compress/codec.h"

#define FZ_N 300

static Codec *fz_codec(void) {
    CodecSpec s;
    char err[128];
    if (codec_parse(&s, "gcomp:every=2,chunk=100", err, sizeof err) != 0) abort();
    return codec_new(&s);
}

static void fz_tensor(float *x, int variant) {
    Rng r;
    rng_init(&r, 7, (uint64_t)variant);
    for (int i = 0; i < FZ_N; i++) x[i] = rng_uniform(&r) < 0.2f ? 0.0f : rng_normal(&r) * ldexpf(1.0f, -3 * variant);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Codec *c = fz_codec();
    int rc = codec_state_load(c, data, size);
    if (rc > 0 || rc <= -GC_ERR_COUNT_) abort();
    if (rc == 0) {
        uint8_t *back = malloc(codec_state_max(c));
        int64_t n = codec_state_save(c, back, codec_state_max(c));
        if (n != (int64_t)size || memcmp(back, data, size) != 0) abort(); /* not canonical */
        free(back);
        float x[FZ_N], y[FZ_N];
        fz_tensor(x, 1);
        uint8_t *frame = malloc(codec_max_frame(c, FZ_N));
        int64_t fl = codec_encode(c, frame, codec_max_frame(c, FZ_N), x, FZ_N, NULL);
        if (fl < 0) abort();
        if ((get_u16(frame + 6) & 1) && codec_decode(c, y, FZ_N, frame, (size_t)fl) != 0) abort();
        free(frame);
    }
    codec_free(c);
    return 0;
}

#ifdef GCOMP_STATE_GEN_CORPUS
#include <sys/stat.h>

static void seed(const char *name, const Codec *c) {
    uint8_t buf[8192];
    int64_t n = codec_state_save(c, buf, sizeof buf);
    char path[256];
    snprintf(path, sizeof path, "tests/fuzz/corpus/fuzz_gcomp_state/%s", name);
    FILE *f = fopen(path, "wb");
    if (n <= 0 || !f || fwrite(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
    printf("  %s (%lld bytes)\n", path, (long long)n);
}

int main(void) {
    mkdir("tests/fuzz/corpus", 0755);
    mkdir("tests/fuzz/corpus/fuzz_gcomp_state", 0755);
    Codec *enc = fz_codec(), *dec = fz_codec();
    seed("fresh.bin", enc); /* no tables */
    float x[FZ_N], y[FZ_N];
    uint8_t frame[8192];
    for (int t = 0; t < 3; t++) {
        fz_tensor(x, t);
        int64_t fl = codec_encode(enc, frame, sizeof frame, x, FZ_N, NULL);
        if (fl < 0 || codec_decode(dec, y, FZ_N, frame, (size_t)fl) != 0) abort();
        char name[32];
        snprintf(name, sizeof name, "enc%d.bin", t);
        seed(name, enc); /* encoder table, counts */
        snprintf(name, sizeof name, "dec%d.bin", t);
        seed(name, dec); /* decoder table */
    }
    codec_free(enc);
    codec_free(dec);
    return 0;
}
#endif
