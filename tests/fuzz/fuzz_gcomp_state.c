/* libFuzzer target: loading a GCOMP codec's checkpointed state (the blob of
 * compress/gcomp_state.h, docs/FORMAT.md section 10, Checkpointed state). The
 * input is the state blob. Three readers of it are run and must agree:
 *  - gcomp_state_parse, the one parser of the blob, directly: it returns 0 or
 *    one of the errors docs/FORMAT.md names (GC_ERR_PARAM only for an encoder
 *    table of another n_theta); a blob it accepts is canonical
 *    (gcomp_state_write of what it parsed gives the same bytes back) and holds
 *    what the format says (fz_accepted_ok: n_theta, ids; cut at a field's
 *    edge, one byte longer, of another version, with a bad have byte or
 *    n_theta, refused with the error for each);
 *  - codec_state_load (compress/gcomp.c) into a codec that holds state already
 *    (both tables and counts, loaded from a primed codec's blob): it returns
 *    what the parser returned; a refused load leaves the state as it was (its
 *    blob unchanged), an accepted one saves back to the input. The loaded codec
 *    then encodes a tensor and decodes its own frame, which must succeed when
 *    the frame carries its table or the loaded decoder table is the encoder's
 *    (so a loaded table, and its lookup table, is a working one);
 *  - built with CUDA (HAVE_CUDA: the GPU build, and the host emulation's
 *    fuzz_gcomp_state_emu, tests/emulation/build.sh) and a device present:
 *    codec_cuda_state_load (compress/gcomp_cuda.cu) into a GPU codec holding
 *    the same state: the same return code, the same state afterwards (its
 *    blob), and after an accepted load the frame and the decode of the CPU
 *    codec (the same bytes, the same return code, the same values).
 * Everything must stay in bounds (ASan/UBSan).
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

#include "common/crc32c.h"
#include "common/errors.h"
#include "common/rng.h"
#include "compress/codec.h"
#include "compress/gcomp_state.h"
#if defined(HAVE_CUDA) && !defined(GCOMP_STATE_GEN_CORPUS)
#include <cuda_runtime.h>

#include "compress/codec_cuda.h"
#include "tests/fuzz/fuzz_cuda.h"
#define FZ_GPU 1
#endif

#define FZ_N 300
#define FZ_SPEC "gcomp:every=2,chunk=100"

static Codec *fz_codec_spec(const char *text) {
    CodecSpec s;
    char err[128];
    if (codec_parse(&s, text, err, sizeof err) != 0) abort();
    return codec_new(&s);
}
static Codec *fz_codec(void) { return fz_codec_spec(FZ_SPEC); }

static void fz_tensor(float *x, int variant) {
    Rng r;
    rng_init(&r, 7, (uint64_t)variant);
    for (int i = 0; i < FZ_N; i++) x[i] = rng_uniform(&r) < 0.2f ? 0.0f : rng_normal(&r) * ldexpf(1.0f, -3 * variant);
}

#ifndef GCOMP_STATE_GEN_CORPUS
/* the state every load starts from: a codec that encoded tensor 5 and decoded
 * its own frame (an encoder table, counts, a decoder table) */
static uint8_t fz_prime[GCOMP_STATE_MAX];
static size_t fz_prime_len;

static void fz_prime_init(void) {
    if (fz_prime_len) return;
    Codec *c = fz_codec();
    float x[FZ_N], y[FZ_N];
    fz_tensor(x, 5);
    uint8_t *frame = malloc(codec_max_frame(c, FZ_N));
    int64_t fl = codec_encode(c, frame, codec_max_frame(c, FZ_N), x, FZ_N, NULL);
    if (fl < 0 || codec_decode(c, y, FZ_N, frame, (size_t)fl) != 0) abort();
    int64_t n = codec_state_save(c, fz_prime, sizeof fz_prime);
    if (n <= 0) abort();
    fz_prime_len = (size_t)n;
    free(frame);
    codec_free(c);
}

#ifdef FZ_GPU
/* the GPU loader against the CPU's: rc the CPU load's return code; frame (fl
 * bytes, or a negative GcError), drc and y what the CPU codec encoded, and
 * decoding that frame gave, after an accepted load */
static void fz_gpu_check(const uint8_t *data, size_t size, int rc, const uint8_t *frame, int64_t fl, int drc,
                         const float *y) {
    CodecSpec s;
    char err[128];
    if (codec_parse(&s, FZ_SPEC, err, sizeof err) != 0) abort();
    CodecCuda *g = codec_cuda_new(&s);
    uint8_t a[GCOMP_STATE_MAX];
    if (!g || codec_cuda_state_load(g, fz_prime, fz_prime_len) != 0) abort();
    int rg = codec_cuda_state_load(g, data, size);
    if (rg != rc) abort(); /* accepted or refused alike, with the same error */
    int64_t n = codec_cuda_state_save(g, a, sizeof a);
    if (rg != 0 && (n != (int64_t)fz_prime_len || memcmp(a, fz_prime, fz_prime_len) != 0)) abort(); /* changed */
    if (rg == 0) {
        if (n != (int64_t)size || memcmp(a, data, size) != 0) abort();
        float x[FZ_N], yg[FZ_N], *dx, *dy;
        fz_tensor(x, 1);
        if (cudaMalloc((void **)&dx, sizeof x) != cudaSuccess || cudaMalloc((void **)&dy, sizeof x) != cudaSuccess ||
            cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice) != cudaSuccess)
            abort();
        size_t cap = codec_cuda_max_frame(g, FZ_N);
        uint8_t *fg = malloc(cap);
        int64_t gl = codec_encode_cuda(g, fg, cap, dx, FZ_N, NULL);
        if (gl != fl || (fl > 0 && memcmp(fg, frame, (size_t)fl) != 0)) abort(); /* not the CPU's frame */
        if (fl > 0) {
            int gd = codec_decode_cuda(g, dy, FZ_N, fg, (size_t)gl);
            if (gd != drc) abort();
            if (gd == 0 && (cudaMemcpy(yg, dy, sizeof yg, cudaMemcpyDeviceToHost) != cudaSuccess ||
                            memcmp(yg, y, sizeof yg) != 0))
                abort();
        }
        free(fg);
        cudaFree(dx);
        cudaFree(dy);
    }
    codec_cuda_free(g);
}
#endif

/* what docs/FORMAT.md says of a blob the parser accepted (b, data[size]): an
 * encoder table of the codec's n_theta, a decoder table of n_theta 1..16, each
 * id the CRC-32C of its table section; and of blobs made from it: cut at any
 * field's edge it is truncated, one byte longer oversized, of another version
 * refused as such, a have byte of 2 or an n_theta of 0 or 17 corrupt. Returns
 * 0 when all hold */
static int fz_accepted_ok(const GcompStateBlob *b, const uint8_t *data, size_t size, int ntheta) {
    uint8_t tab[GCOMP_TABLE_MAX];
    size_t el = b->enc.have ? gcomp_table_write(tab, &b->enc.code) : 0;
    if (b->enc.have && (b->enc.code.ntheta != ntheta || crc32c(0, tab, el) != b->enc.id)) return 1;
    size_t dl = b->dec_have ? gcomp_table_write(tab, &b->dec) : 0;
    if (b->dec_have && (b->dec.ntheta < 1 || b->dec.ntheta > HUFF_MAX_NTHETA || crc32c(0, tab, dl) != b->dec_id))
        return 1;
    /* field edges: the encoder's have byte, its table; since; the counts; the
     * decoder's have byte, its table */
    size_t e = 1 + (b->enc.have ? 6 + el : 1), h = e + 8 + 8 * HUFF_NSYM;
    size_t cuts[] = {0, 1, 2, 6, e - 1, e, e + 7, e + 8, h - 1, h, h + 1, h + 6, size - 1};
    uint8_t *v = malloc(size + 1);
    GcompStateBlob t;
    memcpy(v, data, size);
    v[size] = 0;
    int bad = gcomp_state_parse(&t, v, size + 1, ntheta) != -GC_ERR_OVERSIZED;
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++)
        if (cuts[k] < size) bad |= gcomp_state_parse(&t, v, cuts[k], ntheta) != -GC_ERR_TRUNCATED;
    v[0] ^= 0x80;
    bad |= gcomp_state_parse(&t, v, size, ntheta) != -GC_ERR_VERSION;
    v[0] ^= 0x80;
    size_t have[2] = {1, h}, nth[2] = {2, h + 1};
    for (int k = 0; k < 2; k++) {
        uint8_t keep = v[have[k]];
        v[have[k]] = 2;
        bad |= gcomp_state_parse(&t, v, size, ntheta) != -GC_ERR_CORRUPT;
        v[have[k]] = keep;
        if (keep != 1) continue;
        keep = v[nth[k]];
        v[nth[k]] = 0;
        bad |= gcomp_state_parse(&t, v, size, ntheta) != -GC_ERR_CORRUPT;
        v[nth[k]] = HUFF_MAX_NTHETA + 1;
        bad |= gcomp_state_parse(&t, v, size, ntheta) != -GC_ERR_CORRUPT;
        bad |= gcomp_state_parse(&t, v, have[k] + 6, ntheta) != -GC_ERR_CORRUPT; /* before its table is read */
        v[nth[k]] = keep;
    }
    free(v);
    return bad;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_prime_init();
    Codec *c = fz_codec();
    int ntheta = (int)codec_param(&c->spec, "ntheta");
    GcompStateBlob b;
    int rp = gcomp_state_parse(&b, data, size, ntheta);
    if (rp != 0 && rp != -GC_ERR_TRUNCATED && rp != -GC_ERR_VERSION && rp != -GC_ERR_CORRUPT &&
        rp != -GC_ERR_PARAM && rp != -GC_ERR_OVERSIZED)
        abort();
    if (rp == -GC_ERR_PARAM && !(size > 2 && data[1] == 1 && data[2] != ntheta)) abort();
    uint8_t back[GCOMP_STATE_MAX];
    if (rp == 0) {
        int64_t n = gcomp_state_write(back, sizeof back, &b.enc, b.dec_have, &b.dec, b.dec_id);
        if (n != (int64_t)size || memcmp(back, data, size) != 0) abort(); /* not canonical */
        if (fz_accepted_ok(&b, data, size, ntheta)) abort();
    }
    if (codec_state_load(c, fz_prime, fz_prime_len) != 0) abort();
    int rc = codec_state_load(c, data, size);
    if (rc != rp) abort(); /* the loader decides otherwise than the parser */
    int64_t n = codec_state_save(c, back, sizeof back);
    if (rc != 0 && (n != (int64_t)fz_prime_len || memcmp(back, fz_prime, fz_prime_len) != 0)) abort(); /* changed */
    float x[FZ_N], y[FZ_N];
    uint8_t *frame = NULL;
    int64_t fl = -1;
    int drc = 0;
    if (rc == 0) {
        if (n != (int64_t)size || memcmp(back, data, size) != 0) abort();
        fz_tensor(x, 1);
        frame = malloc(codec_max_frame(c, FZ_N));
        fl = codec_encode(c, frame, codec_max_frame(c, FZ_N), x, FZ_N, NULL);
        if (fl < 0) abort();
        drc = codec_decode(c, y, FZ_N, frame, (size_t)fl);
        int own = b.dec_have && b.enc.have && b.dec_id == b.enc.id && b.dec.ntheta == b.enc.code.ntheta;
        if (((get_u16(frame + 6) & 1) || own) && drc != 0) abort(); /* a loaded table that does not work */
    }
#ifdef FZ_GPU
    if (fz_have_device()) fz_gpu_check(data, size, rc, frame, fl, drc, y);
#endif
    free(frame);
    codec_free(c);
    return 0;
}
#endif

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
    Codec *enc = fz_codec(), *dec = fz_codec(), *both = fz_codec();
    Codec *enc12 = fz_codec_spec(FZ_SPEC ",ntheta=12"), *dec12 = fz_codec_spec(FZ_SPEC ",ntheta=12");
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
        /* both tables, the same one: a table-less frame of the loaded encoder decodes
         * with the loaded decoder table */
        fl = codec_encode(both, frame, sizeof frame, x, FZ_N, NULL);
        if (fl < 0 || codec_decode(both, y, FZ_N, frame, (size_t)fl) != 0) abort();
        snprintf(name, sizeof name, "both%d.bin", t);
        seed(name, both);
    }
    /* n_theta 12 (the fuzzed codec's is 8): an encoder table is refused (GC_ERR_PARAM),
     * a decoder table taken */
    fz_tensor(x, 0);
    int64_t fl = codec_encode(enc12, frame, sizeof frame, x, FZ_N, NULL);
    if (fl < 0 || codec_decode(dec12, y, FZ_N, frame, (size_t)fl) != 0) abort();
    seed("enc0_ntheta12.bin", enc12);
    seed("dec0_ntheta12.bin", dec12);
    codec_free(enc);
    codec_free(dec);
    codec_free(both);
    codec_free(enc12);
    codec_free(dec12);
    return 0;
}
#endif
