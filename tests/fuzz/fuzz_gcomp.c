/* libFuzzer target: the GCOMP payload decoder (compress/gcomp.c), called
 * directly through ops->decode so the frame CRC does not stop the fuzzer.
 *
 * Input layout:
 *   byte 0      mode: bit 0 = decoder pre-loaded with a table (else empty),
 *               bit 1 = accumulate, bit 2 = which pre-loaded table
 *               (0: "gcomp:chunk=64", n_theta 8; 1: n_theta 3, so escapes)
 *   bytes 1-2   n, little-endian, taken modulo 4097 (n <= 4096)
 *   bytes 3-4   frame flags, little-endian
 *   bytes 5..   the payload
 * The decoder must return 0 or a negative GcError, never touch memory out
 * of bounds (ASan/UBSan), and leave the output as it was when it refuses.
 * The same payload is decoded twice, so a table it carries is committed and
 * then used. The payload, behind a valid common
 * header, also goes through gcomp_frame_parts (the size breakdown), which must
 * stay within it whatever its headers claim.
 * Built with CUDA (HAVE_CUDA: the host emulation's fuzz_gcomp_emu,
 * tests/emulation/build.sh) and a device present, that frame (its CRC right) is
 * also decoded twice from device memory of exactly its size by GPU decoders
 * pre-loaded as the CPU's (fz_gpu_check): one frame at a time, and batched with
 * the verdict deferred (where frames of more than 4 chunks have their chunk
 * headers checked on the device); the return codes and outputs must be those of
 * the CPU decoder's codec_decode of the frame.
 *
 * The seed corpus tests/fuzz/corpus/fuzz_gcomp/ (and fuzz_gcomp_roundtrip/)
 * is written by this file built with -DGCOMP_GEN_CORPUS, from the root:
 *   cc -std=c11 -D_GNU_SOURCE -I. -O1 -DGCOMP_GEN_CORPUS tests/fuzz/fuzz_gcomp.c build/libgcx.a -lm -lz \
 *      -fopenmp -o build/gen_gcomp_corpus && build/gen_gcomp_corpus
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "compress/codec.h"
#include "compress/gcomp.h"

#define FZ_PREFIX 5
#define FZ_MAXN 4096

static const char *const fz_specs[2] = {"gcomp:chunk=64", "gcomp:ntheta=3,chunk=64,every=1000"};

static void fz_spec(CodecSpec *s, int v) {
    char err[128];
    if (codec_parse(s, fz_specs[v & 1], err, sizeof err) != 0) abort();
}
static Codec *fz_codec(int v) {
    CodecSpec s;
    fz_spec(&s, v);
    return codec_new(&s);
}

/* a gradient-like tensor with specials: zeros, -0.0, a denormal, inf, NaN */
static void fz_tensor(float *x, size_t n, int variant) {
    Rng r;
    rng_init(&r, 99, (uint64_t)variant);
    for (size_t i = 0; i < n; i++) {
        float u = rng_uniform(&r);
        x[i] = u < 0.3f ? 0.0f : rng_normal(&r) * ldexpf(1.0f, -(int)(4 * variant));
    }
    if (n > 8) {
        x[1] = -0.0f;
        x[2] = 1e-40f;
        x[3] = INFINITY;
        x[4] = NAN;
        x[5] = 3e38f;
    }
}

/* the encoder whose first frame (tensor variant 0, 200 values) pre-loads
 * decoders; its later frames are the plain-frame seeds */
static int64_t fz_first_frame(Codec *enc, uint8_t *frame, size_t cap) {
    float x[200];
    fz_tensor(x, 200, 0);
    return codec_encode(enc, frame, cap, x, 200, NULL);
}

/* the pre-loading frame of table v into frame[4096]: its length */
static size_t fz_preload_frame(uint8_t *frame, int v) {
    Codec *enc = fz_codec(v);
    int64_t fl = fz_first_frame(enc, frame, 4096);
    if (fl < 0) abort();
    codec_free(enc);
    return (size_t)fl;
}

/* a decoder of table v, pre-loaded with it (pre) */
static Codec *fz_decoder(int v, int pre) {
    Codec *dec = fz_codec(v);
    uint8_t frame[4096];
    float tmp[200];
    if (pre && codec_decode(dec, tmp, 200, frame, fz_preload_frame(frame, v)) != 0) abort();
    return dec;
}

#if defined(HAVE_CUDA) && !defined(GCOMP_GEN_CORPUS)
#include "compress/codec_cuda.h"
#include "tests/fuzz/fuzz_cuda.h"

/* fz_decoder's on the device, pre-loaded from device memory */
static CodecCuda *fz_gpu_decoder(int v, int pre) {
    CodecSpec s;
    fz_spec(&s, v);
    CodecCuda *g = codec_cuda_new(&s);
    if (!g) abort();
    if (pre) {
        uint8_t frame[4096];
        size_t fl = fz_preload_frame(frame, v);
        uint8_t *d = fz_upload(frame, fl);
        float *dy = NULL;
        if (cudaMalloc((void **)&dy, 200 * sizeof(float)) != cudaSuccess || codec_decode_cuda_dev(g, dy, 200, d, fl) != 0)
            abort();
        cudaFree(dy);
        cudaFree(d);
    }
    return g;
}

/* The frame (the payload behind a common header with its CRC) decoded twice from
 * device memory by GPU decoders pre-loaded as the CPU's: one frame at a time
 * (codec_decode_cuda_dev), and probed and batched with its verdict deferred
 * (codec_decode_cuda_batched, codec_batch_verdicts: the chunk headers of more than 4
 * chunks checked on the device, k_gp_chunks), against the CPU decoder's codec_decode
 * of the same frame: the same return codes, the same outputs (a refused frame's left
 * as they were) */
static void fz_gpu_check(int mode, size_t n, const uint8_t *frame, size_t flen) {
    int v = (mode >> 2) & 1, acc = (mode >> 1) & 1;
    Codec *c = fz_decoder(v, mode & 1);
    CodecCuda *ga = fz_gpu_decoder(v, mode & 1), *gb = fz_gpu_decoder(v, mode & 1);
    uint8_t *d = fz_upload(frame, flen);
    float *out = malloc((n + 1) * sizeof *out), *da = NULL, *db = NULL;
    for (size_t i = 0; i < n; i++) out[i] = (float)i * 0.25f - 7.0f;
    if (cudaMalloc((void **)&da, (n + 1) * sizeof *out) != cudaSuccess ||
        cudaMalloc((void **)&db, (n + 1) * sizeof *out) != cudaSuccess)
        abort();
    cudaMemcpy(da, out, n * sizeof *out, cudaMemcpyHostToDevice);
    cudaMemcpy(db, out, n * sizeof *out, cudaMemcpyHostToDevice);
    for (int rep = 0; rep < 2; rep++) {
        int rc = acc ? codec_decode_acc(c, out, n, 0.5f, frame, flen) : codec_decode(c, out, n, frame, flen);
        int ra = acc ? codec_decode_acc_cuda_dev(ga, da, n, 0.5f, d, flen) : codec_decode_cuda_dev(ga, da, n, d, flen);
        size_t deferred;
        int ret, rb = fz_decode_batched(gb, db, n, 0.5f, acc, d, flen, &deferred, &ret);
        if (deferred > 1 || (deferred && ret != 0)) abort();
        if (ra != rc || rb != rc || !fz_same_floats(da, out, n) || !fz_same_floats(db, out, n)) abort();
    }
    cudaFree(da);
    cudaFree(db);
    cudaFree(d);
    free(out);
    codec_cuda_free(ga);
    codec_cuda_free(gb);
    codec_free(c);
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
#ifdef EMU_HOST_WAITS
    /* the emulation: each GPU scratch buffer an allocation of its own, whose bounds its page
     * protections see (compress/codec_cuda.cu, gcx_dmalloc) */
    setenv("GCX_DSCRATCH", "each", 0);
#endif
    if (size < FZ_PREFIX) return 0;
    int mode = data[0];
    size_t n = get_u16(data + 1) % (FZ_MAXN + 1);
    uint16_t flags = get_u16(data + 3);
    const uint8_t *payload = data + FZ_PREFIX;
    size_t len = size - FZ_PREFIX;
    Codec *dec = fz_decoder((mode >> 2) & 1, mode & 1);
    float *out = malloc((n + 1) * sizeof *out), *was = malloc((n + 1) * sizeof *out);
    for (size_t i = 0; i < n; i++) out[i] = (float)i * 0.25f - 7.0f;
    for (int rep = 0; rep < 2; rep++) {
        memcpy(was, out, n * sizeof *out);
        int rc = dec->spec.ops->decode(dec, out, n, 0.5f, (mode >> 1) & 1, payload, len, flags);
        if (rc > 0 || rc <= -GC_ERR_COUNT_) abort();
        if (rc < 0 && memcmp(out, was, n * sizeof *out) != 0) abort(); /* a refused payload wrote out */
    }
    free(out);
    free(was);
    codec_free(dec);
    uint8_t *frame = malloc(CODEC_HEADER_SIZE + len + 1);
    memcpy(frame, CODEC_MAGIC, 4);
    frame[4] = CODEC_VERSION;
    frame[5] = CODEC_GCOMP;
    put_u16(frame + 6, flags);
    put_u32(frame + 8, (uint32_t)n);
    put_u32(frame + 12, (uint32_t)len);
    if (len) memcpy(frame + CODEC_HEADER_SIZE, payload, len);
    put_u32(frame + 16, crc32c(0, payload, len));
    GcompParts gp = {0};
    int rc = gcomp_frame_parts(&gp, frame, CODEC_HEADER_SIZE + len);
    if (rc > 0 || rc <= -GC_ERR_COUNT_ || (rc == 0 && gp.bytes != CODEC_HEADER_SIZE + len)) abort();
#ifdef HAVE_CUDA
    if (fz_have_device()) fz_gpu_check(mode, n, frame, CODEC_HEADER_SIZE + len);
#endif
    free(frame);
    return 0;
}

#ifdef GCOMP_GEN_CORPUS
#include <sys/stat.h>

static void write_seed(const char *dir, const char *name, const uint8_t *prefix, size_t plen, const uint8_t *body,
                       size_t blen) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(prefix, 1, plen, f) != plen || (blen && fwrite(body, 1, blen, f) != blen)) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
    printf("  %s (%zu bytes)\n", path, plen + blen);
}

/* a decode seed: prefix (mode, n, flags) + the payload of a frame */
static void decode_seed(const char *name, int mode, size_t n, const uint8_t *frame, int64_t fl) {
    if (fl < CODEC_HEADER_SIZE) {
        fprintf(stderr, "encode failed for %s\n", name);
        exit(1);
    }
    uint8_t pre[FZ_PREFIX] = {(uint8_t)mode, (uint8_t)n, (uint8_t)(n >> 8), frame[6], frame[7]};
    write_seed("tests/fuzz/corpus/fuzz_gcomp", name, pre, FZ_PREFIX, frame + CODEC_HEADER_SIZE,
               (size_t)fl - CODEC_HEADER_SIZE);
}

int main(void) {
    mkdir("tests/fuzz/corpus", 0755);
    mkdir("tests/fuzz/corpus/fuzz_gcomp", 0755);
    mkdir("tests/fuzz/corpus/fuzz_gcomp_roundtrip", 0755);
    uint8_t frame[8192];
    float x[300], big[450];
    uint8_t lv[300];
    for (int v = 0; v < 2; v++) {
        char name[64];
        Codec *enc = fz_codec(v);
        int64_t fl = fz_first_frame(enc, frame, sizeof frame);
        snprintf(name, sizeof name, "table_v%d.bin", v);
        decode_seed(name, v << 2, 200, frame, fl); /* empty decoder, frame carries the table */
        /* later frames of the same encoder: decoded by a pre-loaded decoder */
        fz_tensor(x, 150, 1);
        for (int i = 0; i < 150; i++) lv[i] = (uint8_t)(i % 4);
        CodecSide side = {.levels = lv};
        fl = codec_encode(enc, frame, sizeof frame, x, 150, &side);
        snprintf(name, sizeof name, "plain_levels_v%d.bin", v);
        decode_seed(name, (v << 2) | 1, 150, frame, fl);
        fz_tensor(x, 70, 2);
        fl = codec_encode(enc, frame, sizeof frame, x, 70, NULL);
        snprintf(name, sizeof name, "plain_acc_v%d.bin", v);
        decode_seed(name, (v << 2) | 3, 70, frame, fl);
        /* more than 4 chunks (their headers checked on the device by the GPU decoder) */
        fz_tensor(big, 400, 3);
        fl = codec_encode(enc, frame, sizeof frame, big, 400, NULL);
        snprintf(name, sizeof name, "plain_chunks_v%d.bin", v);
        decode_seed(name, (v << 2) | 1 | (v << 1), 400, frame, fl);
        codec_free(enc);
        enc = fz_codec(v);
        fz_tensor(big, 450, 4);
        fl = codec_encode(enc, frame, sizeof frame, big, 450, NULL);
        snprintf(name, sizeof name, "table_chunks_v%d.bin", v);
        decode_seed(name, v << 2, 450, frame, fl);
        codec_free(enc);
    }
    Codec *enc = fz_codec(0);
    int64_t fl = codec_encode(enc, frame, sizeof frame, x, 0, NULL);
    decode_seed("empty.bin", 0, 0, frame, fl);
    x[0] = -1.5f;
    fl = codec_encode(enc, frame, sizeof frame, x, 1, NULL);
    decode_seed("one.bin", 0, 1, frame, fl);
    codec_free(enc);

    /* round-trip seeds (layout in fuzz_gcomp_roundtrip.c): 3 parameter bytes,
     * then 5 bytes per value (float32 little-endian + level byte) */
    for (int k = 0; k < 3; k++) {
        uint8_t body[5 * 64];
        size_t n = k == 0 ? 64 : k == 1 ? 20 : 1;
        fz_tensor(x, n, k);
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            put_u32(body + 5 * i, u);
            body[5 * i + 4] = (uint8_t)(i % 5);
        }
        uint8_t pre[3] = {(uint8_t)(k * 5 + 2), (uint8_t)k, (uint8_t)(k + 1)};
        char name[64];
        snprintf(name, sizeof name, "rt%d.bin", k);
        write_seed("tests/fuzz/corpus/fuzz_gcomp_roundtrip", name, pre, 3, body, 5 * n);
    }
    return 0;
}
#endif
