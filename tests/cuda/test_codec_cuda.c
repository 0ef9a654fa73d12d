/* GPU codecs against their CPU twins (compress/codec_cuda.h vs compress/codec.h).
 *
 * For every codec (defaults and parameter variants), many sizes (0, 1, odd
 * sizes, block and partition edges, > 2^24), input distributions (Gaussian,
 * zeros and -0, all zeros, wide exponent range with denormals, ties, NaN/inf,
 * constant) and seeds:
 *   - encode: the GPU frame equals the CPU frame byte for byte (same length or
 *     the same error code), and so do CodecSide.repr and CodecSide.mask; the
 *     device-payload variant equals the frame's payload; repr aliasing x;
 *     TernGrad scalar sharing; gcomp levels; sparse density overrides; a too
 *     small capacity gives GC_ERR_NOSPACE on both;
 *   - decode: the GPU decoder writes the same floats (bit for bit) as the CPU
 *     decoder, plain and accumulating (out += weight * decoded);
 *   - corrupt frames (truncated, extended, bytes flipped, with the CRC fixed so
 *     the payload decoder sees them): the same error code, and the same output
 *     when both accept;
 *   - batches (CodecBatch): more frames than one launch takes, in one device buffer,
 *     encoded, staged and placed, probed and decoded in batches: the CPU's bytes, lengths,
 *     error codes and floats;
 *   - gcomp across calls: a sequence of encodes with table rebuilds gives the
 *     same frames, and a GPU decoder follows the table state like the CPU's;
 *     mid-sequence the state blobs (codec_cuda_state_save) equal the CPU's, and
 *     the sequence goes on in step with the blobs loaded across (a bad blob:
 *     the CPU's error).
 * Tolerance: none. Every comparison is exact (bits), because the GPU codecs
 * promise byte-identical frames and bit-identical decodes.
 * Skips (one passed check) without CUDA or without a GPU.
 * GCX_CODEC_CUDA_BIG=0 leaves out the > 2^24 case (it takes a few seconds);
 * GCX_CODEC_CUDA_MAXN=N leaves out the sizes above N (quick runs);
 * GCX_CODEC_CUDA_ONLY=NAME runs only the specs that start with NAME (e.g. sbc). */
#include "tests/test.h"

#ifndef HAVE_CUDA
int main(void) {
    printf("built without CUDA: GPU codec parity skipped\n");
    CHECK(1, "skipped");
    TEST_END();
}
#else

#include <math.h>
#include <stdint.h>

#include "common/cuda_check.h"
#include "common/rng.h"
#include "compress/base3.h"
#include "compress/codec.h"
#include "compress/codec_cuda.h"
#include "compress/gcomp.h"
#include "compress/gcomp_state.h"
#include "compress/golomb.h"
#include "tests/cuda/gcomp_edit.h"
#include "tests/fuzz/fuzz_cuda.h"
#include "compress/select.h"

static int shown; /* failures printed in detail */
#define SHOW_MAX 25

static const char *const specs[] = {
    "fp32", "fp16", "int8", "terngrad", "terngrad:c=0", "terngrad:c=1,seed=7", "stoch3", "stoch3:c=2.5", "3lc",
    "3lc:s=1.5", "onebit", "topk", "topk:ratio=0.3", "dgc", "dgc:density=0.02", "dgc:density=0.2",
    "sbc", "sbc:p=0.01", "sbc:p=0.2",
    "gcomp", "gcomp:ntheta=3,chunk=64", "gcomp:ntheta=16,chunk=1000", "gcomp:ntheta=5,chunk=777",
    "ternsum", "ternsum:n=1", "ternsum:n=7", "ternsum:n=300",
};
#define NSPECS ((int)(sizeof specs / sizeof specs[0]))

static const size_t sizes[] = {0,    1,    2,    3,    4,    5,    6,     7,     8,     9,     13,    16,
                               17,   31,   32,   33,   63,   64,   65,    100,   127,   128,   129,   640,
                               1000, 4095, 4096, 4097, 8191, 8192, 8193,  65535, 65536, 65537, 131089, 300001};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))
#define NDIST 7

static const char *dist_name[NDIST] = {"gauss", "zeros", "allzero", "wide", "ties", "nonfinite", "const"};

/* x[n] of distribution d */
static void gen(float *x, size_t n, int d, uint64_t seed) {
    Rng r;
    rng_init(&r, seed, (uint64_t)d);
    static const float tie[7] = {0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f, -0.5f};
    for (size_t i = 0; i < n; i++) {
        switch (d) {
        case 0: x[i] = rng_normal(&r) * 1e-3f; break;
        case 1: {
            float u = rng_uniform(&r);
            x[i] = u < 0.4f ? 0.0f : u < 0.5f ? -0.0f : rng_normal(&r) * 0.01f;
            break;
        }
        case 2: x[i] = 0.0f; break;
        case 3: x[i] = ldexpf(rng_normal(&r), (int)(rng_u64(&r) % 271) - 170); break; /* denormals to 2^100 */
        case 4: x[i] = tie[rng_u64(&r) % 7]; break;
        case 5: x[i] = rng_normal(&r); break;
        default: x[i] = 0.25f; break;
        }
    }
    if (d == 5 && n) { /* a few non-finite values */
        union {
            uint32_t u;
            float f;
        } nan1 = {0x7FC00123u}, nan2 = {0xFFA00001u};
        x[rng_u64(&r) % n] = INFINITY;
        x[rng_u64(&r) % n] = -INFINITY;
        x[rng_u64(&r) % n] = nan1.f;
        x[rng_u64(&r) % n] = nan2.f;
    }
}

static float *dalloc_f(size_t n) {
    float *p = NULL;
    cudaCheck(cudaMalloc((void **)&p, (n ? n : 1) * sizeof(float)));
    return p;
}
static uint8_t *dalloc_b(size_t n) {
    uint8_t *p = NULL;
    cudaCheck(cudaMalloc((void **)&p, n ? n : 1));
    return p;
}
static void up(void *d, const void *h, size_t bytes) {
    if (bytes) cudaCheck(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
}
static void down(void *h, const void *d, size_t bytes) {
    if (bytes) cudaCheck(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

/* first differing byte or -1 */
static long first_diff(const void *a, const void *b, size_t bytes) {
    const uint8_t *p = a, *q = b;
    for (size_t i = 0; i < bytes; i++)
        if (p[i] != q[i]) return (long)i;
    return -1;
}

#define CASEF "%s n=%zu %s seed=%llu"
#define CASEA(spec, n, d, seed) (spec), (n), dist_name[d], (unsigned long long)(seed)

/* one exact comparison; details for the first SHOW_MAX failures */
#define SAME(ok, ...)                                        \
    do {                                                     \
        if (ok) {                                            \
            test_passed_++;                                  \
        } else {                                             \
            test_failed_++;                                  \
            if (shown++ < SHOW_MAX) {                        \
                printf("FAIL %s:%d: ", __FILE__, __LINE__);  \
                printf(__VA_ARGS__);                         \
                printf("\n");                                \
            }                                                \
        }                                                    \
    } while (0)

static int is_sparse(CodecId id) { return id == CODEC_TOPK || id == CODEC_DGC || id == CODEC_SBC; }

/* rewrite the header of a frame whose payload now has plen bytes (CRC included) */
static void refresh(uint8_t *frame, size_t plen) {
    put_u32(frame + 12, (uint32_t)plen);
    put_u32(frame + 16, crc32c(0, frame + CODEC_HEADER_SIZE, plen));
}

/* decode frame[len] on the CPU (fresh decoder) and the GPU (fresh decoder), plain
 * and accumulating, and compare codes and outputs */
static void cmp_decode(const CodecSpec *spec, const char *text, const uint8_t *frame, size_t len, size_t n, int d,
                       uint64_t seed, const char *what) {
    float *oc = malloc((n ? n : 1) * sizeof(float)), *og = malloc((n ? n : 1) * sizeof(float)),
          *init = malloc((n ? n : 1) * sizeof(float));
    float *dout = dalloc_f(n);
    Rng r;
    rng_init(&r, seed ^ 0xABCDEFu, 99);
    for (size_t i = 0; i < n; i++) init[i] = rng_normal(&r);
    for (int acc = 0; acc < 2; acc++) {
        Codec *cd = codec_new(spec);
        CodecCuda *gd = codec_cuda_new(spec);
        memcpy(oc, init, n * sizeof(float));
        up(dout, init, n * sizeof(float));
        float w = -0.375f;
        int rc = acc ? codec_decode_acc(cd, oc, n, w, frame, len) : codec_decode(cd, oc, n, frame, len);
        int rg = acc ? codec_decode_acc_cuda(gd, dout, n, w, frame, len) : codec_decode_cuda(gd, dout, n, frame, len);
        SAME(rc == rg, CASEF " %s %s: decode rc cpu %d gpu %d", CASEA(text, n, d, seed), what, acc ? "acc" : "plain",
             rc, rg);
        down(og, dout, n * sizeof(float));
        /* the frame in device memory, at an offset that is not 8-byte aligned (as in a bundle),
         * decoded by a third decoder, and by a fourth probed and batched as the exchange
         * decodes (codec_decode_cuda_batched; a deferred verdict read after the flush): the
         * same code and the same floats as the host frame's (one frame in three, in one of
         * the two modes, by the frame's length: the decoders after the frame's checks are the
         * host frame's; the rest keeps the test's time). Every crafted payload (what begins
         * "crafted"): a sparse one's probe checks it as the decoder would (gcx_sparse_probe) */
        static unsigned dev_turn;
        if (acc == (int)(len & 1) && (!strncmp(what, "crafted", 7) || dev_turn++ % 3 == 0)) {
            CodecCuda *gv = codec_cuda_new(spec), *gb = codec_cuda_new(spec);
            float *vout = dalloc_f(n), *bout = dalloc_f(n), *ov = malloc((n ? n : 1) * sizeof(float));
            size_t off = 1 + len % 7;
            uint8_t *dframe = dalloc_b(len + off);
            up(dframe + off, frame, len);
            up(vout, init, n * sizeof(float));
            up(bout, init, n * sizeof(float));
            int rv = acc ? codec_decode_acc_cuda_dev(gv, vout, n, w, dframe + off, len)
                         : codec_decode_cuda_dev(gv, vout, n, dframe + off, len);
            down(ov, vout, n * sizeof(float));
            SAME(rv == rg && memcmp(ov, og, n * sizeof(float)) == 0,
                 CASEF " %s %s: device frame: rc %d, floats %s the host frame's (rc %d)", CASEA(text, n, d, seed), what,
                 acc ? "acc" : "plain", rv, memcmp(ov, og, n * sizeof(float)) ? "differ from" : "equal to", rg);
            size_t deferred;
            int ret, rb = fz_decode_batched(gb, bout, n, w, acc, dframe + off, len, &deferred, &ret);
            SAME(deferred == 0 || (deferred == 1 && ret == 0), CASEF " %s %s: batched: %zu verdicts deferred, returned %d",
                 CASEA(text, n, d, seed), what, acc ? "acc" : "plain", deferred, ret);
            down(ov, bout, n * sizeof(float));
            SAME(rb == rg && memcmp(ov, og, n * sizeof(float)) == 0,
                 CASEF " %s %s: batched device frame: rc %d, floats %s the host frame's (rc %d)", CASEA(text, n, d, seed),
                 what, acc ? "acc" : "plain", rb, memcmp(ov, og, n * sizeof(float)) ? "differ from" : "equal to", rg);
            codec_cuda_free(gb);
            cudaCheck(cudaFree(bout));
            codec_cuda_free(gv);
            free(ov);
            cudaCheck(cudaFree(vout));
            cudaCheck(cudaFree(dframe));
        }
        /* a refused frame leaves out untouched, on both */
        if (rc != 0 || rg != 0)
            SAME((rc == 0 || memcmp(oc, init, n * sizeof(float)) == 0) &&
                     (rg == 0 || memcmp(og, init, n * sizeof(float)) == 0),
                 CASEF " %s %s: a refused frame changed out (cpu rc %d: %s, gpu rc %d: %s)", CASEA(text, n, d, seed),
                 what, acc ? "acc" : "plain", rc, rc && memcmp(oc, init, n * sizeof(float)) ? "changed" : "untouched",
                 rg, rg && memcmp(og, init, n * sizeof(float)) ? "changed" : "untouched");
        if (rc == rg) {
            /* NaN payloads: accumulating adds to a NaN, and GPU arithmetic returns the
             * canonical NaN where x86 keeps the operand's payload; and in fp16 a signalling
             * NaN half (corrupted frames only) widens to a quiet NaN on the GPU and in the
             * CPU's F16C path but keeps its payload in the CPU's scalar tail
             * (compress/half.h). There any NaN matches any NaN; elsewhere bits must match. */
            int nan_any = acc || spec->ops->id == CODEC_FP16;
            long at = first_diff(oc, og, n * sizeof(float));
            while (nan_any && at >= 0 && isnan(oc[at / 4]) && isnan(og[at / 4])) {
                long nx = first_diff(oc + at / 4 + 1, og + at / 4 + 1, (n - (size_t)at / 4 - 1) * sizeof(float));
                at = nx < 0 ? -1 : at / 4 * 4 + 4 + nx;
            }
            SAME(at < 0, CASEF " %s %s: decoded floats differ at value %ld: cpu %a gpu %a", CASEA(text, n, d, seed),
                 what, acc ? "acc" : "plain", at / 4, at >= 0 ? oc[at / 4] : 0.0f, at >= 0 ? og[at / 4] : 0.0f);
        }
        codec_free(cd);
        codec_cuda_free(gd);
    }
    free(oc);
    free(og);
    free(init);
    cudaCheck(cudaFree(dout));
}

/* corrupted copies of a valid frame: both decoders agree */
static void cmp_corrupt(const CodecSpec *spec, const char *text, const uint8_t *frame, size_t len, size_t n, int d,
                        uint64_t seed) {
    size_t plen = len - CODEC_HEADER_SIZE;
    uint8_t *m = malloc(len + 16);
    Rng r;
    rng_init(&r, seed, 4242);
    char what[64];
    for (int t = 1; t <= 3 && (size_t)t <= plen; t++) { /* truncated payload */
        memcpy(m, frame, len);
        refresh(m, plen - (size_t)t);
        snprintf(what, sizeof what, "truncated by %d", t);
        cmp_decode(spec, text, m, len - (size_t)t, n, d, seed, what);
    }
    for (int v = 0; v < 2; v++) { /* one byte appended */
        memcpy(m, frame, len);
        m[len] = v ? (uint8_t)rng_u64(&r) : 0;
        refresh(m, plen + 1);
        snprintf(what, sizeof what, "extended by 0x%02x", m[len]);
        cmp_decode(spec, text, m, len + 1, n, d, seed, what);
    }
    for (int k = 0; k < 12 && plen; k++) { /* one byte changed */
        memcpy(m, frame, len);
        size_t at = CODEC_HEADER_SIZE + (size_t)(rng_u64(&r) % plen);
        uint8_t x = (uint8_t)(1u << (rng_u64(&r) % 8));
        if (k >= 8) x = (uint8_t)(rng_u64(&r) | 1);
        m[at] ^= x;
        refresh(m, plen);
        snprintf(what, sizeof what, "byte %zu ^= 0x%02x", at - CODEC_HEADER_SIZE, x);
        cmp_decode(spec, text, m, len, n, d, seed, what);
    }
    if (plen) { /* the last payload byte: gcomp's last chunk, its padding when the mantissas do not fill it */
        memcpy(m, frame, len);
        m[len - 1] ^= 1;
        refresh(m, plen);
        cmp_decode(spec, text, m, len, n, d, seed, "last byte ^= 0x01");
    }
    memcpy(m, frame, len); /* nonzero flags */
    put_u16(m + 6, 0x8000);
    cmp_decode(spec, text, m, len, n, d, seed, "flags 0x8000");
    free(m);
}

/* ---- crafted sparse payloads: the device walks of topk's bitmap, dgc's run entries and
 * sbc's Rice codes against the CPU decoders on payloads no encoder writes (values before
 * or past n, too few or too many entries, skips, stray bytes, bad values, padding bits);
 * rcs[] counts the CPU's return codes, so the caller can see every outcome was reached */

/* a little-endian float that is nonzero and finite, or (bad) +-0, NaN or inf */
static void put_value(uint8_t *p, Rng *r, int bad) {
    static const uint32_t bads[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00001u};
    uint32_t u = bad ? bads[rng_u64(r) % 5] : (((uint32_t)rng_u64(r) & 0xBFFFFFFFu) | 0x00800000u);
    put_u32(p, u);
}

static void crafted_frame(const char *text, uint8_t *frame, size_t plen, size_t n, uint64_t seed, int *rcs) {
    CodecSpec spec;
    char err[256];
    CHECK(codec_parse(&spec, text, err, sizeof err) == 0, "spec %s", text);
    frame_header_write(frame, (uint8_t)spec.ops->id, 0, (uint32_t)n, (uint32_t)plen,
                       crc32c(0, frame + CODEC_HEADER_SIZE, plen));
    Codec *c = codec_new(&spec);
    float *o = malloc((n ? n : 1) * sizeof(float));
    int rc = codec_decode(c, o, n, frame, CODEC_HEADER_SIZE + plen);
    rcs[rc < 0 ? -rc : rc]++;
    codec_free(c);
    free(o);
    cmp_decode(&spec, text, frame, CODEC_HEADER_SIZE + plen, n, 0, seed, "crafted");
}

static void crafted_dgc(size_t n, uint64_t seed, int *rcs) {
    Rng r;
    rng_init(&r, seed, 31);
    size_t k = (size_t)(rng_u64(&r) % 7);
    if (k > n) k = n;
    /* gaps ended: k - 2 .. k + 2; or one short of k with the last at index n - 1 or n,
     * where only skips (n > 65535) give the k entries the length check asks for */
    int edge = rng_u64(&r) % 4 == 0;
    size_t ends = edge ? k - 1 : k + (size_t)(rng_u64(&r) % 5) - 2;
    if ((long)ends < 0) ends = 0;
    uint8_t *f = calloc(1, CODEC_HEADER_SIZE + 4 + 4 * k + 2 * 64 + 1), *p = f + CODEC_HEADER_SIZE;
    put_u32(p, (uint32_t)k);
    int bad = rng_u64(&r) % 16 == 0;
    for (size_t j = 0; j < k; j++) put_value(p + 4 + 4 * j, &r, bad && j == k / 2);
    size_t e = 0, at = 4 + 4 * k;
    uint64_t spread = 2 * (uint64_t)n / (k + 1) + 1, next = 0; /* sometimes past n */
    for (size_t j = 0; j < ends && e < 60; j++) {
        uint64_t gap = rng_u64(&r) % 4 ? rng_u64(&r) % spread : 0, target = n - 1 + rng_u64(&r) % 2;
        if (edge && j + 1 == ends && target >= next) gap = target - next;
        next += gap + 1;
        for (; gap >= 65535 && e < 60; gap -= 65535, e++, at += 2) put_u16(p + at, 0xFFFF);
        put_u16(p + at, (uint16_t)gap), e++, at += 2;
    }
    if (rng_u64(&r) % 8 == 0) put_u16(p + at, 0xFFFF), at += 2; /* a trailing skip */
    if (rng_u64(&r) % 4 == 0) p[at++] = (uint8_t)rng_u64(&r);  /* a stray byte */
    crafted_frame("dgc", f, at, n, seed, rcs);
    free(f);
}

static void crafted_sbc(size_t n, uint64_t seed, int *rcs) {
    Rng r;
    rng_init(&r, seed, 32);
    size_t m = (size_t)(rng_u64(&r) % 9);
    if (m > n) m = n;
    int b = (int)(rng_u64(&r) % 14);
    if (rng_u64(&r) % 16 == 0) b = 31 + (int)(rng_u64(&r) % 2);
    size_t cap = 9 + 8 * 40 + 16;
    uint8_t *f = calloc(1, CODEC_HEADER_SIZE + cap), *p = f + CODEC_HEADER_SIZE;
    put_u32(p, (uint32_t)m);
    if (m || rng_u64(&r) % 8 == 0) put_value(p + 4, &r, rng_u64(&r) % 16 == 0);
    p[8] = (uint8_t)b;
    BitWriter w;
    bw_init(&w, p + 9, cap - 9 - 8);
    size_t codes = m + (size_t)(rng_u64(&r) % 3) - 1; /* m - 1 .. m + 1 */
    uint64_t spread = 2 * (uint64_t)n / (m + 1) + 1;
    for (size_t j = 0; j < codes && j <= m && b < 32; j++) {
        uint64_t gap = rng_u64(&r) % spread;
        if ((gap >> b) > 64) gap = (gap & ((1ull << b) - 1)) | (64ull << b); /* a unary part of at most 64 */
        rice_put(&w, gap, b);
    }
    if (rng_u64(&r) % 4 == 0) bw_put(&w, (uint32_t)rng_u64(&r), 1 + (int)(rng_u64(&r) % 12)); /* stray bits */
    size_t plen = 9 + bw_finish(&w);
    if (rng_u64(&r) % 8 == 0 && plen > 9) plen--; /* cut */
    crafted_frame("sbc", f, plen, n, seed, rcs);
    free(f);
}

/* sbc payloads for the decoder's parallel parse (compress/sparse_cuda.cu rice_positions):
 * up to 300 codes, unary parts of up to 1,500 ones (across many 32-bit words, past the
 * quotient n allows), and a tail of nothing, stray bits, ones to the end (a run the
 * stream cuts), up to 400 random bytes (past the bits the CPU's walk can read), or the
 * last 1 to 3 bytes cut */
static void crafted_sbc_long(size_t n, uint64_t seed, int *rcs) {
    Rng r;
    rng_init(&r, seed, 34);
    size_t m = (size_t)(rng_u64(&r) % 301);
    if (m > n) m = n;
    int b = (int)(rng_u64(&r) % 14);
    if (rng_u64(&r) % 16 == 0) b = 31;
    size_t cap = 9 + (size_t)m * 8 + 4 * 1500 / 8 + 8 + 400;
    uint8_t *f = calloc(1, CODEC_HEADER_SIZE + cap), *p = f + CODEC_HEADER_SIZE;
    put_u32(p, (uint32_t)m);
    if (m) put_value(p + 4, &r, 0);
    p[8] = (uint8_t)b;
    BitWriter w;
    bw_init(&w, p + 9, cap - 9 - 400);
    uint64_t spread = 2 * (uint64_t)n / (m + 1) + 1;
    int longs = 0;
    for (size_t j = 0; j < m; j++) {
        uint64_t gap = rng_u64(&r) % spread;
        if ((gap >> b) > 40) gap = (gap & ((1ull << b) - 1)) | (40ull << b);
        if (longs < 3 && rng_u64(&r) % 64 == 0) { /* a long unary part */
            gap = (gap & ((1ull << b) - 1)) | ((uint64_t)(33 + rng_u64(&r) % 1467) << b);
            longs++;
        }
        rice_put(&w, gap, b);
    }
    int tail = (int)(rng_u64(&r) % 5);
    if (tail == 1) bw_put(&w, (uint32_t)rng_u64(&r), 1 + (int)(rng_u64(&r) % 12));
    size_t plen = 9 + bw_finish(&w);
    if (tail == 2) { /* ones to the end */
        size_t k = 1 + (size_t)(rng_u64(&r) % (rng_u64(&r) % 2 ? 3 : 200));
        if (plen > 9) p[plen - 1] |= (uint8_t)(0xFFu >> (rng_u64(&r) % 8));
        memset(p + plen, 0xFF, k);
        plen += k;
    }
    if (tail == 3) {
        size_t k = 1 + (size_t)(rng_u64(&r) % 400);
        for (size_t i = 0; i < k; i++) p[plen + i] = (uint8_t)rng_u64(&r);
        plen += k;
    }
    if (tail == 4) plen -= plen - 9 < 3 ? plen - 9 : 1 + (size_t)(rng_u64(&r) % 3); /* cut */
    crafted_frame("sbc", f, plen, n, seed, rcs);
    free(f);
}

static int bit_at(const uint8_t *p, uint64_t i) { return (p[i >> 3] >> (7 - (i & 7))) & 1; }
static void bit_set(uint8_t *p, uint64_t i, int v) {
    p[i >> 3] = (uint8_t)((p[i >> 3] & ~(0x80u >> (i & 7))) | (v ? 0x80u >> (i & 7) : 0));
}

/* where the chunk headers of gcomp frame f (len bytes, n values) start in its payload (after
 * the block header and the table section it may carry), its block header into *b; 0 when
 * the frame does not parse */
static size_t gcomp_chunk_headers(GcompBlock *b, const uint8_t *f, int64_t len, size_t n) {
    const uint8_t *pay = f + CODEC_HEADER_SIZE;
    size_t plen = (size_t)len - CODEC_HEADER_SIZE, used = 0;
    HuffCode hc;
    if (len <= 0 || gcomp_block_parse(b, pay, plen, n, get_u16(f + 6)) != 0) return 0;
    if (b->table && gcomp_table_parse(&hc, &used, pay + GCOMP_BLOCK_HDR, plen - GCOMP_BLOCK_HDR, b->ntheta, b->id))
        return 0;
    return GCOMP_BLOCK_HDR + used;
}

/* gcomp frames whose exponent segment is declared d bits shorter or longer than its codes,
 * whose nonzero count is one off, or with a padding bit set (the chunk's bits and the block's total moved with it,
 * the bytes unchanged, the CRC fixed), so that only the codes' path or the count of nonzero
 * exponents says it: the CPU's walk ends off a segment's end, and the GPU's decoder
 * (compress/gcomp_cuda.cu k_gp_dec) must see it too. Data: heavy-tailed values, or
 * (uniform) exponents spread evenly over 8 values, whose near-equal code lengths
 * resynchronise least */
/* frame f (len bytes) copied into m with the 32-bit field at byte `field` of the chunk header
 * at payload byte h set to v, and the chunk's bits and the block's total moved by d so that
 * the sizes agree; decoded by both (cmp_decode) */
static void gcomp_edited(const CodecSpec *spec, const char *text, uint8_t *m, const uint8_t *f, size_t len, size_t n,
                         uint64_t seed, size_t h, int field, uint32_t v, int d, const char *what) {
    memcpy(m, f, len);
    uint8_t *pay = m + CODEC_HEADER_SIZE;
    put_u32(pay + h + field, v);
    put_u32(pay + h + 8, get_u32(pay + h + 8) + (uint32_t)d);
    gcomp_cbits_add(pay, d);
    refresh(m, len - CODEC_HEADER_SIZE);
    cmp_decode(spec, text, m, len, n, 0, seed, what);
}

static void gcomp_shifts(const char *text, size_t n, int uniform, uint64_t seed) {
    CodecSpec spec;
    char err[256];
    CHECK(codec_parse(&spec, text, err, sizeof err) == 0, "spec %s", text);
    Codec *c = codec_new(&spec);
    float *x = malloc(n * sizeof(float));
    Rng r;
    rng_init(&r, seed, 77);
    for (size_t i = 0; i < n; i++)
        x[i] = uniform ? ldexpf(1.0f + (float)(rng_u64(&r) % 1000) / 1000.0f, (int)(rng_u64(&r) % 8) - 20) *
                             (rng_u64(&r) & 1 ? 1.0f : -1.0f)
               : rng_u64(&r) % 10 == 0 ? (rng_u64(&r) & 1 ? -0.0f : 0.0f) /* exponent 0: fewer nonzero, a
                                                                         * sign bit a zero (ZSIGN) */
                                       : 1e-3f * rng_normal(&r) / (0.05f + fabsf(rng_normal(&r)));
    size_t cap = codec_max_frame(c, n);
    uint8_t *f = malloc(cap), *m = malloc(cap);
    int64_t len = codec_encode(c, f, cap, x, n, NULL);
    CHECK(len > 0, "%s n=%zu: encode %lld", text, n, (long long)len);
    const uint8_t *pay = f + CODEC_HEADER_SIZE;
    size_t plen = (size_t)len - CODEC_HEADER_SIZE;
    GcompBlock b;
    size_t at = gcomp_chunk_headers(&b, f, len, n);
    if (at) {
        char what[64];
        static const int ds[] = {1, 2, 3, 5, -1, -2, -3, -4};
        for (uint32_t k = 0; k < b.nch && k < 12; k++)
            for (size_t q = 0; q < sizeof ds / sizeof ds[0]; q++) {
                size_t h = at + (size_t)k * GCOMP_CHUNK_HDR;
                uint32_t count = get_u32(pay + h + 4), ebits = get_u32(pay + h + 12), e2 = ebits - (uint32_t)ds[q];
                if ((e2 + 7) / 8 != (ebits + 7) / 8 || e2 < count) continue; /* the layout would move */
                snprintf(what, sizeof what, "chunk %u's exponent bits %+d", k, -ds[q]);
                gcomp_edited(&spec, text, m, f, (size_t)len, n, seed, h, 12, e2, -ds[q], what);
            }
        for (uint32_t k = 0; k < b.nch && k < 12; k++) /* the nonzero count moved, the mantissas' bits kept */
            for (int d = -1; d <= 1; d += 2) {
                size_t h = at + (size_t)k * GCOMP_CHUNK_HDR;
                uint32_t count = get_u32(pay + h + 4), nnz = get_u32(pay + h + 16), z2 = nnz + (uint32_t)d;
                if ((2 * (uint64_t)z2 + 7) / 8 != (2 * (uint64_t)nnz + 7) / 8 || z2 > count || (d < 0 && nnz == 0))
                    continue;
                snprintf(what, sizeof what, "chunk %u's nonzero count %+d", k, d);
                gcomp_edited(&spec, text, m, f, (size_t)len, n, seed, h, 16, z2, 2 * d, what);
            }
        uint64_t off = at + (uint64_t)b.nch * GCOMP_CHUNK_HDR; /* a padding bit set in each segment */
        for (uint32_t k = 0; k < b.nch; k++) {
            const uint8_t *h = pay + at + (size_t)k * GCOMP_CHUNK_HDR;
            uint64_t bits = get_u32(h + 8), ebits = get_u32(h + 12), nnz = get_u32(h + 16);
            uint64_t seg[3] = {ebits, 2 * nnz, bits - ebits - 2 * nnz};
            for (int q = 0; q < 3; q++) {
                if (k < 12 && seg[q] % 8) {
                    memcpy(m, f, (size_t)len);
                    bit_set(m + CODEC_HEADER_SIZE, 8 * off + seg[q], 1);
                    refresh(m, plen);
                    snprintf(what, sizeof what, "chunk %u's segment %d padded with a 1", k, q);
                    cmp_decode(&spec, text, m, (size_t)len, n, 0, seed, what);
                }
                off += (seg[q] + 7) / 8;
            }
        }
        cmp_decode(&spec, text, f, (size_t)len, n, 0, seed, "unshifted");
    }
    codec_free(c);
    free(x);
    free(f);
    free(m);
}

/* a one-chunk gcomp frame of n normal values but value at_v = v, edited so that its sizes
 * all agree and only one check refuses it (the CPU's code, and the GPU's the same):
 *   v = inf: level 1 on it, its mantissa 6 bits shorter to match (exponent 255 must be at
 *            level 0: Section 5.1's levels apply to finite values);
 *   v = -0:  its sign bit cleared, the frame's only negative zero, so that ZSIGN is set
 *            without one (placed far into the chunk: a thread's run past the first) */
/* frame f (len bytes) decoded from device memory by the CPU decoder cd and the GPU decoder
 * gd, which keep their tables: the same return code, and the same values where it is 0 */
static int gcomp_decode_pair(Codec *cd, CodecCuda *gd, const uint8_t *f, size_t len, size_t n, const char *what) {
    float *oc = calloc(n, sizeof(float)), *og = calloc(n, sizeof(float)), *dout = dalloc_f(n);
    uint8_t *df = dalloc_b(len + 3);
    up(df + 3, f, len); /* at an odd address, as in a bundle */
    int a = codec_decode(cd, oc, n, f, len), b = codec_decode_cuda_dev(gd, dout, n, df + 3, len);
    down(og, dout, n * sizeof(float));
    SAME(a == b && (a || first_diff(oc, og, n * sizeof(float)) < 0), "gcomp tables, %s: cpu %d gpu %d", what, a, b);
    free(oc);
    free(og);
    cudaCheck(cudaFree(dout));
    cudaCheck(cudaFree(df));
    return a;
}

/* A frame that carries a table and fails leaves the decoder's table as it was: frames
 * 0 and 3 of gcomp:every=3 carry one; frame 3 corrupted in its chunks (its CRC made
 * right) fails on the CPU, and then frame 1 (of frame 0's table) still decodes, and the
 * intact frame 3 and frame 4 after it */
static void gcomp_failed_table(void) {
    CodecSpec spec;
    char err[256];
    CHECK(codec_parse(&spec, "gcomp:every=3", err, sizeof err) == 0, "spec gcomp:every=3");
    size_t n = 3000;
    Codec *ce = codec_new(&spec), *cd = codec_new(&spec);
    CodecCuda *gd = codec_cuda_new(&spec);
    size_t cap = codec_max_frame(ce, n);
    uint8_t *fr[5], *m = malloc(cap);
    int64_t ln[5];
    float *x = malloc(n * sizeof(float));
    Rng r;
    rng_init(&r, 5, 79);
    for (int k = 0; k < 5; k++) {
        for (size_t i = 0; i < n; i++) x[i] = rng_normal(&r) * (float)(1 + k);
        fr[k] = malloc(cap);
        ln[k] = codec_encode(ce, fr[k], cap, x, n, NULL);
    }
    gcomp_decode_pair(cd, gd, fr[0], (size_t)ln[0], n, "frame 0");
    gcomp_decode_pair(cd, gd, fr[1], (size_t)ln[1], n, "frame 1");
    int failed = 0;
    for (size_t pos = (size_t)ln[3] - 1; pos > 700 && !failed; pos -= 7) { /* from its last chunk's bits */
        memcpy(m, fr[3], (size_t)ln[3]);
        m[pos] ^= 0x5a;
        refresh(m, (size_t)ln[3] - CODEC_HEADER_SIZE);
        Codec *probe = codec_new(&spec); /* whether the CPU refuses it, from frame 0's table */
        float *o = malloc(n * sizeof(float));
        codec_decode(probe, o, n, fr[0], (size_t)ln[0]);
        failed = codec_decode(probe, o, n, m, (size_t)ln[3]) != 0;
        codec_free(probe);
        free(o);
    }
    CHECK(failed, "gcomp tables: a corrupted frame 3 that the CPU refuses");
    if (failed) {
        CHECK(gcomp_decode_pair(cd, gd, m, (size_t)ln[3], n, "corrupted frame 3") != 0, "the corrupted frame fails");
        gcomp_decode_pair(cd, gd, fr[1], (size_t)ln[1], n, "frame 1 after the failed table");
    }
    gcomp_decode_pair(cd, gd, fr[3], (size_t)ln[3], n, "frame 3");
    gcomp_decode_pair(cd, gd, fr[4], (size_t)ln[4], n, "frame 4");
    for (int k = 0; k < 5; k++) free(fr[k]);
    free(m);
    free(x);
    codec_free(ce);
    codec_free(cd);
    codec_cuda_free(gd);
}

static void gcomp_one_value(size_t n, size_t at_v, float v, const char *what) {
    CodecSpec spec;
    char err[256];
    CHECK(codec_parse(&spec, "gcomp", err, sizeof err) == 0, "spec gcomp");
    float *x = malloc(n * sizeof(float)), *o = malloc(n * sizeof(float));
    Rng r;
    rng_init(&r, 5, 78);
    for (size_t i = 0; i < n; i++) x[i] = 1e-3f * rng_normal(&r);
    x[at_v] = v;
    Codec *c = codec_new(&spec);
    size_t cap = codec_max_frame(c, n);
    uint8_t *f = malloc(cap);
    int64_t len = codec_encode(c, f, cap, x, n, NULL);
    uint8_t *pay = f + CODEC_HEADER_SIZE;
    size_t plen = (size_t)len - CODEC_HEADER_SIZE;
    GcompBlock b;
    size_t at = gcomp_chunk_headers(&b, f, len, n);
    int ok = at && b.nch == 1 && b.table;
    CHECK(ok, "gcomp %s: a one-chunk frame with its table", what);
    if (ok) {
        uint8_t *h = pay + at;
        uint32_t bits = get_u32(h + 8), ebits = get_u32(h + 12), nnz = get_u32(h + 16);
        uint64_t mbits = bits - ebits - 2ull * nnz, off = at + GCOMP_CHUNK_HDR;
        uint64_t L0 = 8 * (off + (ebits + 7) / 8), M0 = L0 + 8 * ((2ull * nnz + 7) / 8), rank = 0, P = 0;
        for (size_t i = 0; i < at_v; i++) { /* the values before it: levels 0, full mantissas */
            uint32_t u, e;
            memcpy(&u, &x[i], 4);
            e = (u >> 23) & 0xFFu;
            rank += e != 0;
            P += e != 0 ? GCOMP_MAN_BITS : (b.zsign ? 1 : 0);
        }
        if (isinf(v)) {
            bit_set(pay, L0 + 2 * rank + 1, 1); /* level 1 */
            uint64_t from = M0 + P + (GCOMP_MAN_BITS - GCOMP_LEVEL_SHIFT), end = M0 + mbits;
            for (uint64_t i = from; i + GCOMP_LEVEL_SHIFT < end; i++)
                bit_set(pay, i, bit_at(pay, i + GCOMP_LEVEL_SHIFT));
            for (uint64_t i = end - GCOMP_LEVEL_SHIFT; i < end; i++) bit_set(pay, i, 0);
            plen = (size_t)(off + (ebits + 7) / 8 + (2ull * nnz + 7) / 8 + (mbits - GCOMP_LEVEL_SHIFT + 7) / 8);
            put_u32(h + 8, bits - GCOMP_LEVEL_SHIFT);
            gcomp_cbits_add(pay, -GCOMP_LEVEL_SHIFT);
        } else {
            CHECK(b.zsign && bit_at(pay, M0 + P) == 1, "gcomp %s: the negative zero's sign bit", what);
            bit_set(pay, M0 + P, 0);
        }
        refresh(f, plen);
        Codec *d = codec_new(&spec);
        int rc = codec_decode(d, o, n, f, CODEC_HEADER_SIZE + plen);
        CHECK(rc == -GC_ERR_CORRUPT, "gcomp %s: the CPU decoder gives %d, not corrupt", what, rc);
        codec_free(d);
        cmp_decode(&spec, "gcomp", f, CODEC_HEADER_SIZE + plen, n, 0, 5, what);
    }
    codec_free(c);
    free(f);
    free(x);
    free(o);
}

/* ZSIGN without a negative zero in frames of several chunks (chunk=64) that carry their
 * table: of 3 chunks (batched, the verdict k_gp_out takes from the chunks' results) and of 8
 * (batched, k_gp_verdict's, the chunk headers checked by k_gp_chunks). The frame is made
 * from three that differ only in the sign bits of two zeros, j and j2 (j's alone negative,
 * both, j2's alone): f0 ^ f1 ^ f2 is f0 with j's sign bit cleared, so that no exponent-0
 * value has its sign bit set; it is checked to differ from f0 in that one bit */
static void gcomp_zsign_cleared(size_t n, size_t j, size_t j2) {
    CodecSpec spec;
    char err[256];
    CHECK(codec_parse(&spec, "gcomp:chunk=64", err, sizeof err) == 0, "spec gcomp:chunk=64");
    float *x = malloc(n * sizeof(float));
    uint8_t *f[3];
    int64_t len[3];
    for (int v = 0; v < 3; v++) {
        Rng r;
        rng_init(&r, 5, 79);
        for (size_t i = 0; i < n; i++) x[i] = i % 5 == 0 ? 0.0f : 1e-3f * rng_normal(&r);
        x[j] = v < 2 ? -0.0f : 0.0f;
        x[j2] = v > 0 ? -0.0f : 0.0f;
        Codec *c = codec_new(&spec);
        size_t cap = codec_max_frame(c, n);
        f[v] = malloc(cap);
        len[v] = codec_encode(c, f[v], cap, x, n, NULL);
        codec_free(c);
    }
    int ok = len[0] > 0 && len[1] == len[0] && len[2] == len[0] && (get_u16(f[0] + 6) & GCOMP_FLAG_ZSIGN) &&
             (get_u16(f[0] + 6) & GCOMP_FLAG_TABLE);
    CHECK(ok, "gcomp ZSIGN cleared, n=%zu: three frames of one length with ZSIGN and a table (%lld %lld %lld)", n,
          (long long)len[0], (long long)len[1], (long long)len[2]);
    if (ok) {
        size_t l = (size_t)len[0], flipped = 0;
        uint8_t *m = malloc(l);
        for (size_t i = 0; i < l; i++) m[i] = f[0][i] ^ f[1][i] ^ f[2][i];
        refresh(m, l - CODEC_HEADER_SIZE);
        for (size_t i = 0; i < l; i++) flipped += i < 16 || i >= 20 ? (size_t)__builtin_popcount(m[i] ^ f[0][i]) : 0;
        CHECK(flipped == 1, "gcomp ZSIGN cleared, n=%zu: %zu bits flipped, not 1 (the CRC aside)", n, flipped);
        Codec *d = codec_new(&spec);
        float *o = malloc(n * sizeof(float));
        int rc = codec_decode(d, o, n, m, l), r0 = codec_decode(d, o, n, f[0], l);
        CHECK(rc == -GC_ERR_CORRUPT && r0 == 0, "gcomp ZSIGN cleared, n=%zu: the CPU decoder gives %d (intact %d)", n,
              rc, r0);
        codec_free(d);
        free(o);
        cmp_decode(&spec, "gcomp:chunk=64", m, l, n, 0, 6, "crafted: ZSIGN without a negative zero");
        free(m);
    }
    for (int v = 0; v < 3; v++) free(f[v]);
    free(x);
}

/* sbc payloads at the edges of the walk's checks (golomb.h rice_get), each with the CPU's
 * code it must give: a run of ones a multiple of 32 long that the end cuts (too long for
 * the quotient n allows, or not), a terminating zero on the last bit before the low bits,
 * runs one below and one above the quotient allowed, and a valid pair of codes */
static void sbc_rice_edges(int *rcs) {
    static const struct {
        uint32_t n, m;
        uint8_t b, nb, bytes[8];
        int want;
    } e[] = {
        {20, 1, 0, 4, {0xFF, 0xFF, 0xFF, 0xFF}, -GC_ERR_CORRUPT},
        {100, 1, 0, 4, {0xFF, 0xFF, 0xFF, 0xFF}, -GC_ERR_TRUNCATED},
        {100, 1, 0, 8, {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, -GC_ERR_TRUNCATED},
        {1, 1, 31, 4, {0xFF, 0xFF, 0xFF, 0xFF}, -GC_ERR_CORRUPT},
        {100, 1, 2, 1, {0xFE}, -GC_ERR_TRUNCATED},
        {9, 1, 0, 2, {0xFF, 0x00}, 0},
        {9, 1, 0, 2, {0xFF, 0x80}, -GC_ERR_CORRUPT},
        {100, 2, 2, 1, {0x96}, 0},
    };
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) {
        uint8_t f[CODEC_HEADER_SIZE + 9 + 8] = {0}, *p = f + CODEC_HEADER_SIZE;
        put_u32(p, e[i].m);
        put_f32(p + 4, 0.5f);
        p[8] = e[i].b;
        memcpy(p + 9, e[i].bytes, e[i].nb);
        int before[GC_ERR_COUNT_];
        memcpy(before, rcs, sizeof before);
        crafted_frame("sbc", f, 9 + (size_t)e[i].nb, e[i].n, 700 + i, rcs);
        int w = e[i].want < 0 ? -e[i].want : 0;
        CHECK(rcs[w] == before[w] + 1, "sbc Rice edge %zu: the CPU's code is not %s", i, gc_strerror(w));
    }
}

static void crafted_topk(size_t n, uint64_t seed, int *rcs) {
    Rng r;
    rng_init(&r, seed, 33);
    size_t bm = (n + 7) / 8, k = 0;
    uint8_t *f = calloc(1, CODEC_HEADER_SIZE + 4 + bm + 4 * n + 8), *p = f + CODEC_HEADER_SIZE;
    uint32_t dens = (uint32_t)(rng_u64(&r) % 4);
    for (size_t i = 0; i < n; i++)
        if (rng_u64(&r) % 8 < dens) p[4 + i / 8] |= (uint8_t)(0x80u >> (i % 8)), k++;
    if ((n & 7) && rng_u64(&r) % 4 == 0) p[4 + bm - 1] |= 1; /* a padding bit */
    size_t kk = k;
    if (rng_u64(&r) % 8 == 0) kk = k + 1;
    else if (rng_u64(&r) % 8 == 0 && k) kk = k - 1;
    put_u32(p, (uint32_t)kk);
    int bad = rng_u64(&r) % 16 == 0;
    for (size_t j = 0; j < kk; j++) put_value(p + 4 + bm + 4 * j, &r, bad && j == kk / 2);
    size_t plen = 4 + bm + 4 * kk;
    if (rng_u64(&r) % 16 == 0) plen++;
    else if (rng_u64(&r) % 16 == 0) plen--;
    crafted_frame("topk", f, plen, n, seed, rcs);
    free(f);
}

/* one case: encode on both, compare frames and side outputs, then decodes */
static void one_case(const char *text, size_t n, int d, uint64_t seed, int corrupt) {
    CodecSpec spec;
    char err[256];
    if (codec_parse(&spec, text, err, sizeof err)) {
        CHECK(0, "spec %s: %s", text, err);
        return;
    }
    CodecId id = spec.ops->id;
    float *x = malloc((n ? n : 1) * sizeof(float));
    gen(x, n, d, seed);
    Codec *c = codec_new(&spec);
    CodecCuda *g = codec_cuda_new(&spec), *g2 = codec_cuda_new(&spec);
    size_t cap = codec_max_frame(c, n);
    CHECK(codec_cuda_max_frame(g, n) == cap, "%s: max frame", text);
    uint8_t *fc = malloc(cap), *fg = malloc(cap), *pay = malloc(cap);
    float *rc_ = malloc((n ? n : 1) * sizeof(float)), *rg = malloc((n ? n : 1) * sizeof(float));
    uint8_t *mc = malloc(n ? n : 1), *mg = malloc(n ? n : 1), *lv = malloc(n ? n : 1);
    float *dx = dalloc_f(n), *drepr = dalloc_f(n);
    uint8_t *dmask = dalloc_b(n), *dlv = dalloc_b(n), *dpay = dalloc_b(cap);
    up(dx, x, n * sizeof(float));
    Rng r;
    rng_init(&r, seed, 7);
    for (size_t i = 0; i < n; i++) lv[i] = (uint8_t)(rng_u64(&r) & 3);
    up(dlv, lv, n);

    CodecSide sc = {0}, sg = {0};
    sc.seed = sg.seed = seed * 1000003u + n;
    sc.repr = rc_;
    sg.repr = drepr;
    if (is_sparse(id)) {
        sc.mask = mc;
        sg.mask = dmask;
    }
    if (id == CODEC_GCOMP && (seed & 1)) {
        sc.levels = lv;
        sg.levels = dlv;
    }
    /* garbage that must be overwritten, or left as it is by a refused frame */
    memset(rc_, 0xFF, (n ? n : 1) * sizeof(float));
    memset(mc, 0xA5, n ? n : 1);
    cudaCheck(cudaMemset(drepr, 0xFF, (n ? n : 1) * sizeof(float)));
    cudaCheck(cudaMemset(dmask, 0xA5, n ? n : 1));
    int64_t lc = codec_encode(c, fc, cap, x, n, &sc);
    int64_t lg = codec_encode_cuda(g, fg, cap, dx, n, &sg);
    SAME(lc == lg, CASEF ": encode length cpu %lld gpu %lld", CASEA(text, n, d, seed), (long long)lc, (long long)lg);
    if (lc < 0 && lc == lg) { /* a refused frame writes neither repr nor mask, on both */
        down(rg, drepr, n * sizeof(float));
        down(mg, dmask, n);
        int cpu_kept = 1, gpu_kept = 1;
        const uint32_t junk = 0xFFFFFFFFu;
        for (size_t i = 0; i < n; i++) {
            cpu_kept &= first_diff(&rc_[i], &junk, 4) < 0 && (!is_sparse(id) || mc[i] == 0xA5);
            gpu_kept &= first_diff(&rg[i], &junk, 4) < 0 && (!is_sparse(id) || mg[i] == 0xA5);
        }
        SAME(cpu_kept && gpu_kept, CASEF ": a refused frame (%lld) left repr and mask as they were: cpu %s, gpu %s",
             CASEA(text, n, d, seed), (long long)lc, cpu_kept ? "yes" : "no", gpu_kept ? "yes" : "no");
    }
    if (lc > 0 && lc == lg) {
        long at = first_diff(fc, fg, (size_t)lc);
        SAME(at < 0, CASEF ": frames differ at byte %ld (payload %ld): cpu %02x gpu %02x", CASEA(text, n, d, seed), at,
             at - CODEC_HEADER_SIZE, at >= 0 ? fc[at] : 0, at >= 0 ? fg[at] : 0);
        down(rg, drepr, n * sizeof(float));
        at = first_diff(rc_, rg, n * sizeof(float));
        SAME(at < 0, CASEF ": repr differs at value %ld: cpu %a gpu %a", CASEA(text, n, d, seed), at / 4,
             at >= 0 ? rc_[at / 4] : 0.0f, at >= 0 ? rg[at / 4] : 0.0f);
        if (is_sparse(id)) {
            down(mg, dmask, n);
            at = first_diff(mc, mg, n);
            SAME(at < 0, CASEF ": mask differs at %ld", CASEA(text, n, d, seed), at);
        }
        /* the device payload variant, from a fresh GPU codec (gcomp state) */
        uint16_t fl = 0xFFFF;
        CodecSide sp = {0};
        sp.seed = sg.seed;
        sp.levels = sg.levels;
        int64_t lp = codec_encode_cuda_payload(g2, dpay, cap, &fl, dx, n, &sp);
        SAME(lp == lc - CODEC_HEADER_SIZE, CASEF ": payload variant length %lld", CASEA(text, n, d, seed),
             (long long)lp);
        if (lp == lc - CODEC_HEADER_SIZE) {
            down(pay, dpay, (size_t)lp);
            SAME(first_diff(pay, fc + CODEC_HEADER_SIZE, (size_t)lp) < 0 && fl == get_u16(fc + 6),
                 CASEF ": payload variant bytes/flags differ", CASEA(text, n, d, seed));
        }
        /* the whole frame in device memory, not 8-byte aligned, from a fresh GPU codec */
        {
            CodecCuda *gv = codec_cuda_new(&spec);
            size_t fo = seed & 1 ? 3 : 0; /* the payload misaligned (staged), or 4-byte aligned (in place) */
            uint8_t *dframe = dalloc_b(cap + 3);
            CodecSide sv = {0};
            sv.seed = sg.seed;
            sv.levels = sg.levels;
            int64_t lv = codec_encode_cuda_dev(gv, dframe + fo, cap, dx, n, &sv);
            SAME(lv == lc, CASEF ": device frame length %lld", CASEA(text, n, d, seed), (long long)lv);
            if (lv == lc) {
                down(pay, dframe + fo, (size_t)lv);
                long at = first_diff(pay, fc, (size_t)lv);
                SAME(at < 0, CASEF ": device frame differs at byte %ld", CASEA(text, n, d, seed), at);
            }
            codec_cuda_free(gv);
            cudaCheck(cudaFree(dframe));
        }
        /* decodes of the (common) frame */
        cmp_decode(&spec, text, fc, (size_t)lc, n, d, seed, "valid");
        if (corrupt) cmp_corrupt(&spec, text, fc, (size_t)lc, n, d, seed);
        /* too small a frame buffer */
        Codec *c3 = codec_new(&spec);
        CodecCuda *g3 = codec_cuda_new(&spec);
        CodecSide s0 = {0};
        s0.seed = sg.seed;
        s0.levels = sc.levels;
        int64_t a = codec_encode(c3, fc, (size_t)lc - 1, x, n, &s0);
        s0.levels = sg.levels;
        int64_t b = codec_encode_cuda(g3, fg, (size_t)lc - 1, dx, n, &s0);
        SAME(a == b && a == -GC_ERR_NOSPACE, CASEF ": cap %lld: cpu %lld gpu %lld", CASEA(text, n, d, seed),
             (long long)lc - 1, (long long)a, (long long)b);
        codec_free(c3);
        codec_cuda_free(g3);
    }
    free(fc);
    free(fg);
    free(pay);
    free(rc_);
    free(rg);
    free(mc);
    free(mg);
    free(lv);
    free(x);
    codec_free(c);
    codec_cuda_free(g);
    codec_cuda_free(g2);
    cudaCheck(cudaFree(dx));
    cudaCheck(cudaFree(drepr));
    cudaCheck(cudaFree(dmask));
    cudaCheck(cudaFree(dlv));
    cudaCheck(cudaFree(dpay));
}

/* side variations: repr aliasing x, scalar sharing, density override, bad levels, local scalar */

/* n values of x (dx: on the device) encoded by fresh codecs of spec, the GPU's given the
 * local statistics local: the CPU's frame, and the return code want where it is not 0 */
static void local_encode(const char *text, const CodecSpec *spec, const float *x, const float *dx, size_t n,
                         uint64_t seed, const float *local, uint8_t *fc, uint8_t *fg, size_t cap, int want) {
    Codec *c2 = codec_new(spec);
    CodecCuda *g2 = codec_cuda_new(spec);
    CodecSide sc = {0}, sg = {0};
    sc.seed = sg.seed = seed;
    sg.local = local;
    int64_t lc = codec_encode(c2, fc, cap, x, n, &sc);
    int64_t lg = codec_encode_cuda(g2, fg, cap, dx, n, &sg);
    SAME(lc == lg && (lc <= 0 || first_diff(fc, fg, (size_t)lc) < 0) && (!want || lc == want),
         "%s: %zu values encoded with their local statistics: cpu %lld gpu %lld", text, n, (long long)lc, (long long)lg);
    codec_free(c2);
    codec_cuda_free(g2);
}

/* codec_local_stats_cuda over NS slices of x at once (more than a table of CODEC_BATCH, one
 * of them empty): each slice's scalar that of codec_local_scalar (terngrad, stoch3), and
 * the frame of an encoder given its statistics (CodecSide.local) the CPU's frame */
#define NS 70
static void local_stats_case(const char *text, const CodecSpec *spec, CodecCuda *g, Codec *c, const float *x,
                             const float *dx, size_t n, uint64_t seed, uint8_t *fc, uint8_t *fg, size_t cap) {
    CodecCuda *gs[NS];
    const float *xs[NS];
    size_t ns[NS], off[NS];
    float loc[2 * NS];
    for (int i = 0; i < NS; i++) {
        off[i] = (size_t)i * n / NS;
        ns[i] = i == 7 ? 0 : (size_t)(i + 1) * n / NS - off[i] + (i % 3 == 0 && (size_t)(i + 1) * n / NS < n);
        gs[i] = g;
        xs[i] = dx + off[i];
    }
    codec_local_stats_cuda(gs, xs, ns, NS, loc);
    int id = spec->ops->id, bad = -1;
    for (int i = 0; i < NS && (id == CODEC_TERNGRAD || id == CODEC_STOCH3); i++) {
        float sl = codec_local_scalar(c, x + off[i], ns[i]);
        if (memcmp(&sl, &loc[2 * i + 1], 4) && !(isnan(sl) && isnan(loc[2 * i + 1])) && bad < 0) bad = i;
    }
    SAME(bad < 0, "%s n=%zu: codec_local_stats_cuda's scalar of slice %d differs from the cpu's", text, n, bad);
    for (int i = 0; i < NS; i += 23)
        local_encode(text, spec, x + off[i], dx + off[i], ns[i], seed, &loc[2 * i], fc, fg, cap, 0);
}
#undef NS

/* the same for tensors of several 65,536-value blocks (the sums' blocks, combined in their
 * order), one of them with a NaN in its third block, which the scalar and the encoder refuse */
static void local_stats_large(const char *text) {
    static const size_t sz[4] = {2 * 65536 + 77, 5, 65536, 3 * 65536 + 1};
    size_t total = 0, at[4];
    for (int i = 0; i < 4; i++) at[i] = total, total += sz[i];
    float *x = malloc(total * sizeof(float)), *dx = dalloc_f(total);
    Rng r;
    rng_init(&r, 4242, 0);
    for (size_t i = 0; i < total; i++) x[i] = rng_normal(&r) * (i % 1000 == 0 ? 40.0f : 1e-2f);
    x[at[3] + 2 * 65536 + 9] = NAN;
    up(dx, x, total * sizeof(float));
    CodecSpec spec;
    char err[128];
    CHECK(codec_parse(&spec, text, err, sizeof err) == 0, "%s: %s", text, err);
    CodecCuda *g = codec_cuda_new(&spec), *gs[4] = {g, g, g, g};
    Codec *c = codec_new(&spec);
    const float *xs[4];
    float loc[8];
    for (int i = 0; i < 4; i++) xs[i] = dx + at[i];
    codec_local_stats_cuda(gs, xs, sz, 4, loc);
    size_t cap = codec_max_frame(c, total);
    uint8_t *fc = malloc(cap), *fg = malloc(cap);
    for (int i = 0; i < 4; i++) {
        if (spec.ops->id == CODEC_TERNGRAD || spec.ops->id == CODEC_STOCH3) {
            float sl = codec_local_scalar(c, x + at[i], sz[i]);
            SAME(!memcmp(&sl, &loc[2 * i + 1], 4) || (isnan(sl) && isnan(loc[2 * i + 1])),
                 "%s: the local scalar of %zu values: cpu %a, codec_local_stats_cuda %a", text, sz[i], sl, loc[2 * i + 1]);
        }
        local_encode(text, &spec, x + at[i], dx + at[i], sz[i], 77, &loc[2 * i], fc, fg, cap, i < 3 ? 0 : -GC_ERR_PARAM);
    }
    codec_free(c);
    codec_cuda_free(g);
    free(x);
    free(fc);
    free(fg);
    cudaCheck(cudaFree(dx));
}

static void side_cases(const char *text, size_t n, int d, uint64_t seed) {
    CodecSpec spec;
    char err[256];
    if (codec_parse(&spec, text, err, sizeof err)) return;
    CodecId id = spec.ops->id;
    float *x = malloc((n ? n : 1) * sizeof(float)), *xg = malloc((n ? n : 1) * sizeof(float));
    gen(x, n, d, seed);
    float *dx = dalloc_f(n);
    Codec *c = codec_new(&spec);
    CodecCuda *g = codec_cuda_new(&spec);
    size_t cap = codec_max_frame(c, n);
    uint8_t *fc = malloc(cap), *fg = malloc(cap);
    /* repr == x */
    {
        up(dx, x, n * sizeof(float));
        float *xc = malloc((n ? n : 1) * sizeof(float));
        memcpy(xc, x, n * sizeof(float));
        CodecSide sc = {0}, sg = {0};
        sc.seed = sg.seed = seed + 11;
        sc.repr = xc;
        sg.repr = dx;
        int64_t lc = codec_encode(c, fc, cap, xc, n, &sc);
        int64_t lg = codec_encode_cuda(g, fg, cap, dx, n, &sg);
        SAME(lc == lg && (lc <= 0 || first_diff(fc, fg, (size_t)lc) < 0), CASEF ": repr aliasing x: frames",
             CASEA(text, n, d, seed));
        down(xg, dx, n * sizeof(float));
        if (lc > 0) SAME(first_diff(xc, xg, n * sizeof(float)) < 0, CASEF ": repr aliasing x: repr", CASEA(text, n, d, seed));
        free(xc);
    }
    up(dx, x, n * sizeof(float));
    if (id == CODEC_TERNSUM) { /* the shared scalar of TernGrad's pull: larger, zero, invalid */
        float shared[3] = {3.0f, 0.0f, -1.0f};
        for (int k = 0; k < 3; k++) {
            CodecSide s = {0};
            s.scalar = &shared[k];
            int64_t lc = codec_encode(c, fc, cap, x, n, &s);
            int64_t lg = codec_encode_cuda(g, fg, cap, dx, n, &s);
            SAME(lc == lg && (lc <= 0 || first_diff(fc, fg, (size_t)lc) < 0),
                 CASEF ": shared scalar %a: cpu %lld gpu %lld", CASEA(text, n, d, seed), shared[k], (long long)lc,
                 (long long)lg);
        }
    }
    if (id == CODEC_TERNGRAD || id == CODEC_STOCH3) {
        float sl = codec_local_scalar(c, x, n), sgl = codec_local_scalar_cuda(g, dx, n);
        uint32_t a, b;
        memcpy(&a, &sl, 4);
        memcpy(&b, &sgl, 4);
        SAME(a == b, CASEF ": local scalar cpu %a gpu %a", CASEA(text, n, d, seed), sl, sgl);
        float shared[3] = {isfinite(sl) ? sl * 1.75f : 1.0f, 0.0f, -1.0f}; /* larger, zero, invalid */
        for (int k = 0; k < 3; k++) {
            Codec *c2 = codec_new(&spec);
            CodecCuda *g2 = codec_cuda_new(&spec);
            CodecSide s = {0};
            s.seed = seed;
            s.scalar = &shared[k];
            int64_t lc = codec_encode(c2, fc, cap, x, n, &s);
            int64_t lg = codec_encode_cuda(g2, fg, cap, dx, n, &s);
            SAME(lc == lg && (lc <= 0 || first_diff(fc, fg, (size_t)lc) < 0),
                 CASEF ": shared scalar %a: cpu %lld gpu %lld", CASEA(text, n, d, seed), shared[k], (long long)lc,
                 (long long)lg);
            codec_free(c2);
            codec_cuda_free(g2);
        }
    } else {
        float sgl = codec_local_scalar_cuda(g, dx, n);
        SAME(isnan(sgl), "%s: local scalar of a non-TernGrad codec is NaN", text);
    }
    if (codec_cuda_local_stats_of(g))
        local_stats_case(text, &spec, g, c, x, dx, n, seed, fc, fg, cap);
    if (is_sparse(id)) {
        double dens[3] = {0.05, 1.0, 1.5}; /* override, everything, invalid */
        for (int k = 0; k < 3; k++) {
            CodecSide s = {0};
            s.density = dens[k];
            int64_t lc = codec_encode(c, fc, cap, x, n, &s);
            int64_t lg = codec_encode_cuda(g, fg, cap, dx, n, &s);
            SAME(lc == lg && (lc <= 0 || first_diff(fc, fg, (size_t)lc) < 0), CASEF ": density %g: cpu %lld gpu %lld",
                 CASEA(text, n, d, seed), dens[k], (long long)lc, (long long)lg);
        }
    }
    if (id == CODEC_GCOMP && n) {
        uint8_t *lv = malloc(n), *dlv = dalloc_b(n);
        memset(lv, 1, n);
        lv[n / 2] = 4; /* not a level */
        up(dlv, lv, n);
        CodecSide sc = {0}, sg = {0};
        sc.levels = lv;
        sg.levels = dlv;
        Codec *c2 = codec_new(&spec);
        CodecCuda *g2 = codec_cuda_new(&spec);
        int64_t lc = codec_encode(c2, fc, cap, x, n, &sc);
        int64_t lg = codec_encode_cuda(g2, fg, cap, dx, n, &sg);
        SAME(lc == lg && lc == -GC_ERR_PARAM, CASEF ": level 4: cpu %lld gpu %lld", CASEA(text, n, d, seed),
             (long long)lc, (long long)lg);
        codec_free(c2);
        codec_cuda_free(g2);
        free(lv);
        cudaCheck(cudaFree(dlv));
    }
    free(x);
    free(xg);
    free(fc);
    free(fg);
    codec_free(c);
    codec_cuda_free(g);
    cudaCheck(cudaFree(dx));
}

/* the device-payload variant into a payload pointer that is not 4-byte aligned (a
 * cudaMalloc'd buffer + 1, 2, 3): the same length, flags and bytes as into an aligned one,
 * and the bytes around it untouched (the kernels store 16- and 32-bit words, which on a GPU
 * fault at a misaligned address; the function stages such a payload) */
static void misaligned_payload(const char *text, size_t n, int d, uint64_t seed) {
    CodecSpec spec;
    char err[256];
    if (codec_parse(&spec, text, err, sizeof err)) {
        CHECK(0, "spec %s: %s", text, err);
        return;
    }
    float *x = malloc((n ? n : 1) * sizeof(float));
    gen(x, n, d, seed);
    float *dx = dalloc_f(n);
    up(dx, x, n * sizeof(float));
    CodecCuda *g0 = codec_cuda_new(&spec);
    size_t cap = codec_cuda_max_frame(g0, n); /* >= max_payload: the direct path if aligned */
    uint8_t *ref = malloc(cap), *got = malloc(cap + 8), *da = dalloc_b(cap), *dm = dalloc_b(cap + 8);
    CodecSide s0 = {0};
    s0.seed = seed;
    uint16_t f0 = 0xFFFF;
    int64_t l0 = codec_encode_cuda_payload(g0, da, cap, &f0, dx, n, &s0);
    if (l0 > 0) down(ref, da, (size_t)l0);
    for (int off = 1; off < 4; off++) {
        CodecCuda *g = codec_cuda_new(&spec); /* fresh: gcomp's table state as g0's was */
        CodecSide s1 = {0};
        s1.seed = seed;
        uint16_t f1 = 0xFFFF;
        cudaCheck(cudaMemset(dm, 0xC3, cap + 8));
        int64_t l1 = codec_encode_cuda_payload(g, dm + off, cap, &f1, dx, n, &s1);
        SAME(l1 == l0 && f1 == f0, "%s n=%zu payload at +%d: length %lld flags %u, aligned %lld flags %u", text, n, off,
             (long long)l1, f1, (long long)l0, f0);
        if (l1 == l0 && l0 > 0) {
            down(got, dm, cap + 8);
            int ok = first_diff(got + off, ref, (size_t)l0) < 0;
            for (size_t i = 0; i < cap + 8; i++)
                if ((i < (size_t)off || i >= (size_t)off + (size_t)l0) && got[i] != 0xC3) ok = 0;
            SAME(ok, "%s n=%zu payload at +%d: bytes differ from the aligned call's (or written outside)", text, n,
                 off);
        }
        codec_cuda_free(g);
    }
    codec_cuda_free(g0);
    free(x);
    free(ref);
    free(got);
    cudaCheck(cudaFree(dx));
    cudaCheck(cudaFree(da));
    cudaCheck(cudaFree(dm));
}

/* an edit of gcomp frame f (len bytes) into m (room for len + GCOMP_CHUNK_HDR)
 * that its CRC does not show (made right): kind 0, chunk k's nonzero count one off (the
 * levels' bytes and the sizes kept in agreement); 1, a padding bit of chunk k's first
 * segment that has one set; 2, a byte of chunk k's exponent codes flipped; 3, chunk k's
 * start one on (its header refused); 4, the payload's last byte cut off; 5, a zero byte
 * appended; 6, an empty chunk's header (count 0, in place) inserted after chunk k's. The
 * frame's length into *mlen; 0 when the frame has no such place */
static int gcomp_hidden_edit(uint8_t *m, size_t *mlen, const uint8_t *f, size_t len, uint32_t k, int kind) {
    memcpy(m, f, len);
    uint8_t *pay = m + CODEC_HEADER_SIZE;
    size_t plen = len - CODEC_HEADER_SIZE;
    *mlen = len;
    if (plen < GCOMP_BLOCK_HDR) return 0;
    GcompBlock bl; /* the chunk headers after the block header and the table a frame carries */
    size_t hs = gcomp_chunk_headers(&bl, f, (int64_t)len, (size_t)((get_u32(pay + 20) | (uint64_t)get_u32(pay + 24) << 32) / 32));
    uint32_t nch = get_u32(pay + 8);
    if (!hs || k >= nch || plen < hs + (size_t)nch * GCOMP_CHUNK_HDR) return 0;
    uint64_t off = hs + (uint64_t)nch * GCOMP_CHUNK_HDR;
    for (uint32_t j = 0; j < k; j++) off += (get_u32(pay + hs + (size_t)j * GCOMP_CHUNK_HDR + 8) + 7) / 8;
    uint8_t *h = pay + hs + (size_t)k * GCOMP_CHUNK_HDR;
    uint64_t bits = get_u32(h + 8), ebits = get_u32(h + 12), nnz = get_u32(h + 16);
    if (kind == 0) {
        if (!gcomp_nnz_off_by_one(pay, h)) return 0;
    } else if (kind == 1) {
        uint64_t seg[3] = {ebits, 2 * nnz, bits - ebits - 2 * nnz}, at = off;
        int q = 0;
        while (q < 3 && seg[q] % 8 == 0) at += seg[q++] / 8;
        if (q == 3) return 0;
        bit_set(pay, 8 * at + seg[q], 1);
    } else if (kind == 2) {
        if (ebits < 8) return 0;
        pay[off + (ebits / 8) / 2] ^= 0x24;
    } else if (kind == 3) {
        put_u32(h, get_u32(h) + 1);
    } else if (kind == 6) {
        uint8_t *e = h + GCOMP_CHUNK_HDR;
        memmove(e + GCOMP_CHUNK_HDR, e, plen - (size_t)(e - pay));
        memset(e, 0, GCOMP_CHUNK_HDR);
        put_u32(e, get_u32(h) + get_u32(h + 4)); /* where the next chunk starts */
        put_u32(pay + 8, nch + 1);
        plen += GCOMP_CHUNK_HDR;
        *mlen = CODEC_HEADER_SIZE + plen;
    } else {
        if (k > 0) return 0; /* once a frame */
        plen = kind == 4 ? plen - 1 : plen + 1;
        if (kind == 5) pay[plen - 1] = 0;
        *mlen = CODEC_HEADER_SIZE + plen;
    }
    refresh(m, plen);
    return 1;
}

/* gcomp's deferred verdicts (codec_decode_cuda_batched, codec_batch_verdicts): frames of 1
 * to 7 chunks and of 313 (more than one tile of k_gp_chunks' scan), one size's with
 * negative zeros (ZSIGN), intact and with hidden edits (gcomp_hidden_edit), and a frame
 * that carries a table, intact and with a hidden edit, probed at once and decoded in one
 * batch (the table-less ones by decoders holding their tables, those with a table by fresh
 * ones), plain and accumulating: each frame's code (its return, or its verdict) the CPU
 * decoder's, every output the CPU's (a refused frame's left as it was), the verdicts
 * deferred exactly for the frames that pass the host's checks (of up to 4 chunks, the
 * chunk headers among them; of more, the device's, k_gp_chunks); the carried table its
 * decoder's after the verdicts only where its frame passed (a table-less frame of its
 * tensor then decodes, else GC_ERR_STATE, as on the CPU); and each frame decoded alone
 * from device memory (codec_decode_cuda_dev, its verdict read at once) gives the same code
 * and output */
static void gcomp_deferred(void) {
    static const struct {
        const char *spec;
        size_t n, chunk;
    } sz[] = {{"gcomp:chunk=1000", 3000, 1000},         {"gcomp:chunk=1000", 700, 1000},
              {"gcomp:chunk=1000", 4000, 1000},         {"gcomp:chunk=1000", 4500, 1000},
              {"gcomp:chunk=1000", 6900, 1000},         {"gcomp:chunk=64,ntheta=3", 20000, 64},
              {"gcomp:chunk=1000", 2999, 1000}};
    enum { S = 7, KINDS = 7, V = 1 + KINDS * 4, T = 2, K = S * V + T, R = 4 };
    CodecSpec spec[S];
    Codec *cd[S];
    CodecCuda *gd[S];
    uint8_t *fr[K], *tf[T];
    size_t len[K], n[K], at[K], xo[K], total = 0, bytes = 0, tl[T];
    int who[K], tabled[K], k = 0, plain_last = -1, nt = 0;
    Rng r;
    rng_init(&r, 9, 31);
    for (int i = 0; i < S; i++) { /* frame 0 carries the table, decoded by both; frame 1 does not */
        char err[256];
        CHECK(codec_parse(&spec[i], sz[i].spec, err, sizeof err) == 0, "spec %s", sz[i].spec);
        Codec *ce = codec_new(&spec[i]);
        cd[i] = codec_new(&spec[i]);
        gd[i] = codec_cuda_new(&spec[i]);
        size_t m = sz[i].n, c = codec_max_frame(ce, m);
        float *x = malloc(m * sizeof(float));
        uint8_t *f = malloc(c);
        float zero = i == 4 ? -0.0f : 0.0f; /* ZSIGN on the frames of 7 chunks */
        for (int step = 0; step < 2; step++) {
            for (size_t j = 0; j < m; j++) x[j] = j % 11 == 0 ? zero : 1e-3f * rng_normal(&r) / (0.1f + fabsf(rng_normal(&r)));
            int64_t l = codec_encode(ce, f, c, x, m, NULL);
            CHECK(l > 0, "gcomp deferred n=%zu: encode %lld", m, (long long)l);
            if (step == 0) {
                gcomp_decode_pair(cd[i], gd[i], f, (size_t)l, m, "deferred's table");
                for (int v = 0; i == S - 1 && v < T; v++) { /* the last size's frame 0 again, and edited */
                    tf[nt] = malloc((size_t)l + GCOMP_CHUNK_HDR);
                    tl[nt] = (size_t)l;
                    if (v == 0) memcpy(tf[nt], f, (size_t)l);
                    if (v == 0 || gcomp_hidden_edit(tf[nt], &tl[nt], f, (size_t)l, 0, 0)) nt++;
                    else free(tf[nt]);
                }
            } else {
                for (int v = 0; v < V; v++) { /* chunks 0, 1, 2 and the last, each kind */
                    uint32_t nch = (uint32_t)((m + sz[i].chunk - 1) / sz[i].chunk), ch = (uint32_t)((v - 1) / KINDS);
                    fr[k] = malloc((size_t)l + GCOMP_CHUNK_HDR);
                    len[k] = (size_t)l;
                    if (v > 0 &&
                        !gcomp_hidden_edit(fr[k], &len[k], f, (size_t)l, ch == 3 ? nch - 1 : ch, (v - 1) % KINDS)) {
                        free(fr[k]);
                        continue;
                    }
                    if (v == 0) memcpy(fr[k], f, (size_t)l);
                    if (v == 0 && i == S - 1) plain_last = k;
                    n[k] = m, who[k] = i, tabled[k] = 0;
                    k++;
                }
            }
        }
        codec_free(ce);
        free(x);
        free(f);
    }
    CHECK(nt == T && plain_last >= 0, "gcomp deferred: %d frames with a table, an intact one without", nt);
    for (int j = 0; j < nt; j++, k++) fr[k] = tf[j], len[k] = tl[j], n[k] = sz[S - 1].n, who[k] = S - 1, tabled[k] = 1;
    for (int i = 0; i < k; i++) {
        at[i] = bytes + (size_t)(i % 3); /* any alignment */
        bytes = at[i] + len[i];
        xo[i] = total;
        total += n[i];
    }
    uint8_t *dbuf = dalloc_b(bytes);
    const uint8_t *frames[K];
    for (int i = 0; i < k; i++) {
        up(dbuf + at[i], fr[i], len[i]);
        frames[i] = dbuf + at[i];
    }
    CodecProbe pr[K];
    codec_cuda_probe_frames(pr, frames, len, (size_t)k);
    float *init = malloc(total * sizeof(float)), *oc = malloc(total * sizeof(float)), *og = malloc(total * sizeof(float));
    float *dout = dalloc_f(total), *dalone = dalloc_f(total), *oa = malloc(total * sizeof(float));
    float *scratch = malloc(sz[S - 1].n * sizeof(float)), *dscratch = dalloc_f(sz[S - 1].n);
    for (size_t j = 0; j < total; j++) init[j] = rng_normal(&r);
    CodecBatch *b = codec_batch_new();
    int failed = 0, deferred = 0;
    /* plain: the frames decoded R times, a flush after each and the verdicts read once, past
     * the 256 the verdicts' arrays first hold (grown with some copied back) */
    for (int acc = 0; acc < 2; acc++) {
        float w = -0.375f;
        int rc[K], rv[R][K], slot[R][K], vr[R * K], settled[K], rounds = acc ? 1 : R;
        CodecCuda *gt[R][K]; /* the fresh decoders of the frames with a table */
        memcpy(oc, init, total * sizeof(float));
        up(dout, init, total * sizeof(float));
        up(dalone, init, total * sizeof(float));
        for (int i = 0; i < k; i++) {
            Codec *c = tabled[i] ? codec_new(&spec[who[i]]) : cd[who[i]];
            CodecCuda *g = tabled[i] ? codec_cuda_new(&spec[who[i]]) : gd[who[i]];
            rc[i] = acc ? codec_decode_acc(c, oc + xo[i], n[i], w, fr[i], len[i])
                        : codec_decode(c, oc + xo[i], n[i], fr[i], len[i]);
            int ra = acc ? codec_decode_acc_cuda_dev(g, dalone + xo[i], n[i], w, frames[i], len[i])
                         : codec_decode_cuda_dev(g, dalone + xo[i], n[i], frames[i], len[i]);
            SAME(ra == rc[i], "gcomp deferred frame %d (n=%zu) alone %s: code cpu %d gpu %d", i, n[i],
                 acc ? "acc" : "plain", rc[i], ra);
            /* a frame with a table: what its decoder holds after it (a table-less frame of its tensor) */
            settled[i] = tabled[i] ? codec_decode(c, scratch, n[plain_last], fr[plain_last], len[plain_last]) : 0;
            if (tabled[i]) {
                codec_free(c);
                codec_cuda_free(g);
            }
        }
        size_t all = 0;
        for (int q = 0; q < rounds; q++) {
            deferred = 0;
            for (int i = 0; i < k; i++) {
                size_t before = codec_batch_deferred(b);
                CodecCuda *g = tabled[i] ? (gt[q][i] = codec_cuda_new(&spec[who[i]])) : gd[who[i]];
                rv[q][i] = codec_decode_cuda_batched(b, g, dout + xo[i], n[i], w, acc, frames[i], len[i], &pr[i]);
                slot[q][i] = codec_batch_deferred(b) > before ? (int)before : -1;
                deferred += slot[q][i] >= 0;
                /* deferred, or refused on the host */
                SAME(slot[q][i] >= 0 ? rv[q][i] == 0 : rv[q][i] != 0,
                     "gcomp deferred frame %d (n=%zu): deferred %s, returned %d", i, n[i],
                     slot[q][i] >= 0 ? "yes" : "no", rv[q][i]);
            }
            codec_batch_flush(b);
            all += (size_t)deferred;
        }
        cudaCheck(cudaDeviceSynchronize());
        SAME(codec_batch_deferred(b) == all, "gcomp deferred: %zu deferred, %zu counted", codec_batch_deferred(b), all);
        CHECK(acc || all > 256, "gcomp deferred: %zu verdicts at once, more than the arrays first hold", all);
        codec_batch_verdicts(b, vr);
        SAME(codec_batch_deferred(b) == 0, "gcomp deferred: none left after the verdicts");
        down(og, dout, total * sizeof(float));
        down(oa, dalone, total * sizeof(float));
        SAME(first_diff(oa, og, total * sizeof(float)) < 0, "gcomp deferred %s: the frames decoded alone and in the batch",
             acc ? "acc" : "plain");
        failed = 0;
        for (int i = 0; i < k; i++) {
            failed += rc[i] != 0;
            for (int q = 0; q < rounds; q++) {
                int g = slot[q][i] >= 0 ? vr[slot[q][i]] : rv[q][i];
                SAME(g == rc[i], "gcomp deferred frame %d (n=%zu, %s) %s, round %d: code cpu %d gpu %d", i, n[i],
                     slot[q][i] >= 0 ? "deferred" : "at once", acc ? "acc" : "plain", q, rc[i], g);
                if (!tabled[i]) continue;
                int h = codec_decode_cuda_dev(gt[q][i], dscratch, n[plain_last], frames[plain_last], len[plain_last]);
                SAME(h == settled[i], "gcomp deferred frame %d (a table, %s) round %d: then a frame without: cpu %d gpu %d",
                     i, rc[i] ? "refused" : "passed", q, settled[i], h);
                codec_cuda_free(gt[q][i]);
            }
            long d = first_diff(oc + xo[i], og + xo[i], n[i] * sizeof(float));
            SAME(d < 0 && (rc[i] == 0 || first_diff(og + xo[i], init + xo[i], n[i] * sizeof(float)) < 0),
                 "gcomp deferred frame %d (n=%zu) %s: output differs from the cpu's at value %ld", i, n[i],
                 acc ? "acc" : "plain", d / 4);
        }
    }
    CHECK(failed >= 4 * S && failed < k - S && deferred >= 4 * S,
          "gcomp deferred: %d of %d frames refused, %d deferred", failed, k, deferred);
    printf("  gcomp deferred: %d frames, %d deferred, %d refused\n", k, deferred, failed);
    codec_batch_free(b);
    for (int i = 0; i < S; i++) {
        codec_free(cd[i]);
        codec_cuda_free(gd[i]);
    }
    for (int i = 0; i < k; i++) free(fr[i]);
    free(init);
    free(oc);
    free(og);
    free(oa);
    free(scratch);
    cudaCheck(cudaFree(dscratch));
    cudaCheck(cudaFree(dout));
    cudaCheck(cudaFree(dalone));
    cudaCheck(cudaFree(dbuf));
}

/* gcomp's state blobs (checkpoints) mid-sequence: the GPU encoder's and decoder's
 * codec_cuda_state_save equal to the CPU's codec_state_save byte for byte; then the
 * CPU encoder's blob loaded into a fresh GPU encoder, the GPU decoder's into a fresh
 * CPU decoder and that one's into a fresh GPU decoder, which replace them (the sequence
 * goes on in step); a blob with a wrong
 * version or one byte short refused by both with the same error */
static void gcomp_state_swap(const char *text, const CodecSpec *spec, Codec **ce, Codec **cd, CodecCuda **ge,
                             CodecCuda **gd) {
    size_t cap = codec_state_max(*ce);
    CHECK(cap > 0 && codec_cuda_state_max(*ge) == cap, "%s: state_max cpu %zu gpu %zu", text, cap,
          codec_cuda_state_max(*ge));
    uint8_t *a = malloc(cap), *b = malloc(cap);
    for (int dir = 0; dir < 2; dir++) {
        int64_t la = codec_state_save(dir ? *cd : *ce, a, cap), lb = codec_cuda_state_save(dir ? *gd : *ge, b, cap);
        CHECK(la > 0 && la == lb && memcmp(a, b, (size_t)la) == 0, "%s: the %s's state blob (cpu %lld gpu %lld bytes)",
              text, dir ? "decoder" : "encoder", (long long)la, (long long)lb);
    }
    int64_t la = codec_state_save(*ce, a, cap), lb = codec_cuda_state_save(*gd, b, cap);
    CodecCuda *g2 = codec_cuda_new(spec);
    Codec *c2 = codec_new(spec);
    int rg = codec_cuda_state_load(g2, a, (size_t)la), rc = codec_state_load(c2, b, (size_t)lb);
    CHECK(rg == 0 && rc == 0, "%s: the cpu encoder's state into a gpu codec (%d), the gpu decoder's into a cpu one (%d)",
          text, rg, rc);
    codec_cuda_free(*ge);
    *ge = g2;
    codec_free(*cd);
    *cd = c2;
    /* and the CPU decoder's into a fresh GPU decoder, whose table the next frames
     * without one decode with */
    la = codec_state_save(*cd, a, cap);
    CodecCuda *g4 = codec_cuda_new(spec);
    rg = codec_cuda_state_load(g4, a, (size_t)la);
    CHECK(la > 0 && rg == 0, "%s: the cpu decoder's state into a gpu codec (%d)", text, rg);
    codec_cuda_free(*gd);
    *gd = g4;
    Codec *c3 = codec_new(spec);
    CodecCuda *g3 = codec_cuda_new(spec);
    a[0] ^= 0x7f;
    rc = codec_state_load(c3, a, (size_t)la);
    rg = codec_cuda_state_load(g3, a, (size_t)la);
    CHECK(rc < 0 && rc == rg, "%s: a blob of another version: cpu %d gpu %d", text, rc, rg);
    a[0] ^= 0x7f;
    rc = codec_state_load(c3, a, (size_t)la - 1);
    rg = codec_cuda_state_load(g3, a, (size_t)la - 1);
    CHECK(rc < 0 && rc == rg, "%s: a blob one byte short: cpu %d gpu %d", text, rc, rg);
    codec_free(c3);
    codec_cuda_free(g3);
    free(a);
    free(b);
}

/* encodes that fail mid-sequence on both encoders (too small a buffer; a level above 3
 * with levels 0..3 elsewhere): the same error, no payload byte, repr or table state
 * changed (the sequence's later frames are compared), no size breakdown */
static void gcomp_refused(const char *text, const CodecSpec *spec, Codec *ce, CodecCuda *ge, const float *x,
                          const float *dx, size_t n, int step) {
    /* the frame's length, from a copy of the CPU encoder (its state blob) */
    size_t smax = codec_state_max(ce), fmax = codec_max_frame(ce, n);
    uint8_t *blob = malloc(smax), *f0 = malloc(fmax);
    Codec *c0 = codec_new(spec);
    int64_t bl = codec_state_save(ce, blob, smax);
    int64_t l0 = bl > 0 && codec_state_load(c0, blob, (size_t)bl) == 0 ? codec_encode(c0, f0, fmax, x, n, NULL) : -1;
    codec_free(c0);
    free(blob);
    free(f0);
    CHECK(l0 > 0, "%s step %d: a copy of the encoder encodes (%lld)", text, step, (long long)l0);
    if (l0 <= 0) return;
    size_t len = (size_t)l0, cap = len + 64;
    uint8_t *fc = malloc(cap), *lv = malloc(n), *dpay = dalloc_b(cap), *dlv = dalloc_b(n),
            *back = malloc(cap);
    float *repr = malloc(n * sizeof(float)), *drepr = dalloc_f(n);
    for (size_t i = 0; i < n; i++) {
        lv[i] = (uint8_t)(i % 4);
        repr[i] = -7.0f;
    }
    lv[n - 1] = 5;
    up(dlv, lv, n);
    for (int how = 0; how < 2; how++) {
        CodecSide sc = {0}, sg = {0};
        if (how) {
            sc.levels = lv;
            sg.levels = dlv;
        }
        sg.repr = drepr;
        up(drepr, repr, n * sizeof(float));
        memset(back, 0xA5, cap);
        up(dpay, back, cap);
        size_t c = how ? cap : len - CODEC_HEADER_SIZE - 1;
        uint16_t fl = 0;
        int64_t a = codec_encode(ce, fc, how ? cap : len - 1, x, n, &sc);
        int64_t b = codec_encode_cuda_payload(ge, dpay, c, &fl, dx, n, &sg);
        int want = how ? -GC_ERR_PARAM : -GC_ERR_NOSPACE;
        GcompParts pg;
        memset(&pg, 0, sizeof pg);
        int pr = codec_cuda_gcomp_parts_last(&pg, ge, 100);
        down(back, dpay, cap);
        float *got = malloc(n * sizeof(float));
        down(got, drepr, n * sizeof(float));
        size_t untouched = 0;
        while (untouched < cap && back[untouched] == 0xA5) untouched++;
        SAME(a == want && b == want && untouched == cap && memcmp(got, repr, n * sizeof(float)) == 0 &&
                 pr == -GC_ERR_STATE,
             "%s step %d, %s: cpu %lld gpu %lld (want %d), payload untouched to %zu of %zu, repr %s, breakdown %d",
             text, step, how ? "a level 5" : "one byte short", (long long)a, (long long)b, want, untouched, cap,
             memcmp(got, repr, n * sizeof(float)) ? "changed" : "kept", pr);
        free(got);
    }
    free(fc);
    free(lv);
    free(back);
    free(repr);
    cudaCheck(cudaFree(dpay));
    cudaCheck(cudaFree(dlv));
    cudaCheck(cudaFree(drepr));
}

/* a tensor whose strided sample (compress/select.h, select_sample_index) overstates it: jr
 * of its sample positions hold 1, the others 0.5, every other value +-0.25, so the sample's
 * threshold (the jr-th largest sample key) leaves jr < k candidates and the selection must
 * start again from every nonzero key (select.c; compress/sparse_cuda.cu gpu_select). The
 * GPU samples above the one-block encoder's 65,535 values (n = 100003); the emulation's
 * blocks take 4,095, so there n = 8193 samples too */
static void sample_too_high(const char *text, double density, size_t n) {
    CodecSpec spec;
    char err[256];
    if (codec_parse(&spec, text, err, sizeof err)) {
        CHECK(0, "%s: %s", text, err);
        return;
    }
    size_t k = select_count(density, n), m = (size_t)ceil((double)n * SELECT_SAMPLE_FRAC);
    if (m < SELECT_MIN_SAMPLE) m = SELECT_MIN_SAMPLE;
    if (m > n) m = n;
    double e = (double)k * (double)m / (double)n, jr = ceil(e + 3.0 * sqrt(e) + 1.0);
    CHECK(n > SELECT_EXACT_MAX && jr < (double)k && jr <= (double)m, "%s n=%zu: a sampled selection, jr %g < k %zu",
          text, n, jr, k);
    float *x = malloc(n * sizeof(float)), *dx = dalloc_f(n);
    for (size_t i = 0; i < n; i++) x[i] = i % 2 ? -0.25f : 0.25f;
    for (size_t j = 0; j < m; j++) x[select_sample_index(n, m, j)] = (double)j < jr ? 1.0f : 0.5f;
    up(dx, x, n * sizeof(float));
    Codec *c = codec_new(&spec);
    CodecCuda *g = codec_cuda_new(&spec);
    size_t cap = codec_max_frame(c, n);
    uint8_t *fc = malloc(cap), *fg = malloc(cap);
    int64_t lc = codec_encode(c, fc, cap, x, n, NULL), lg = codec_encode_cuda(g, fg, cap, dx, n, NULL);
    SAME(lc > 0 && lc == lg && first_diff(fc, fg, (size_t)lc) < 0, "%s n=%zu: the sample's threshold too high: cpu %lld gpu %lld",
         text, n, (long long)lc, (long long)lg);
    codec_free(c);
    codec_cuda_free(g);
    free(x);
    free(fc);
    free(fg);
    cudaCheck(cudaFree(dx));
}

/* sbc's sums (compress/sparse_cuda.cu d_sbc_exact) at the edges of their exact path, CPU
 * against GPU with every value selected (p = 1), zeros elsewhere: (0) a side whose total
 * just reaches 2^53 units of its smallest value, where the CPU's index-order sum rounds
 * twice and the means tie differently; (1) values 2^41 apart, whose shifted mantissa would
 * wrap; (2) denormals alone, (3) denormals with exponents 1 to 3 (their unit is
 * exponent 1's) */
static void sbc_sum_edges(size_t n) {
    CodecSpec spec;
    char err[256];
    if (codec_parse(&spec, "sbc:p=1", err, sizeof err)) {
        CHECK(0, "sbc:p=1: %s", err);
        return;
    }
    float *x = malloc(n * sizeof(float)), *dx = dalloc_f(n);
    for (int c = 0; c < 4; c++) {
        memset(x, 0, n * sizeof(float));
        if (c == 0) {
            x[1] = 0x1.fffffep+29f, x[2] = 0x1.fffffep+28f, x[n / 2] = 0x1.000002p+0f, x[n - 1] = 0x1.000002p+0f;
            x[3] = -0x1.fffffep+29f, x[4] = -0x1.fffffep+28f, x[5] = -1.0f, x[6] = -0x1.000004p+0f;
        } else if (c == 1) {
            x[0] = 1.0f, x[1] = 0x1.000002p+41f, x[2] = -1.0f, x[n - 1] = -0x1.000002p+41f;
        } else {
            for (size_t i = 0; i < n; i++) {
                uint32_t u = (uint32_t)(rng_hash64(900 + (uint64_t)c, i) & 0x807FFFFFu); /* a denormal, either sign */
                if (c == 3 && i % 3 == 0) u |= (uint32_t)(1 + i % 3 + (i / 3) % 3) << 23; /* exponents 1 to 3 */
                memcpy(&x[i], &u, 4);
            }
        }
        up(dx, x, n * sizeof(float));
        Codec *cc = codec_new(&spec);
        CodecCuda *g = codec_cuda_new(&spec);
        size_t cap = codec_max_frame(cc, n);
        uint8_t *fc = malloc(cap), *fg = malloc(cap);
        int64_t lc = codec_encode(cc, fc, cap, x, n, NULL), lg = codec_encode_cuda(g, fg, cap, dx, n, NULL);
        SAME(lc == lg && (lc <= 0 || first_diff(fc, fg, (size_t)lc) < 0), "sbc:p=1 n=%zu sums' edge %d: cpu %lld gpu %lld",
             n, c, (long long)lc, (long long)lg);
        codec_free(cc);
        codec_cuda_free(g);
        free(fc);
        free(fg);
    }
    free(x);
    cudaCheck(cudaFree(dx));
}

#ifdef EMU_HOST_WAITS
/* the emulation counts the waits of an in-place encode of a sampled selection (n above
 * SELECT_EXACT_MAX and above what the one-block encoder takes): at most `most` (the
 * candidates' count with the sample's threshold, the encoder's read, the call's own
 * synchronisation; sbc two selections); *got the count */
static void sampled_waits(const char *text, size_t n, unsigned long long most) {
    CodecSpec spec;
    char err[256];
    if (codec_parse(&spec, text, err, sizeof err)) {
        CHECK(0, "%s: %s", text, err);
        return;
    }
    float *x = malloc(n * sizeof(float)), *dx = dalloc_f(n);
    gen(x, n, 0, 71);
    up(dx, x, n * sizeof(float));
    CodecCuda *g = codec_cuda_new(&spec);
    size_t cap = codec_cuda_max_frame(g, n);
    uint8_t *dpay = dalloc_b(cap);
    uint16_t fl = 0;
    emu_host_waits();
    int64_t l = codec_encode_cuda_payload(g, dpay, cap, &fl, dx, n, NULL);
    unsigned long long w = emu_host_waits();
    CHECK(l > 0 && w <= most, "%s n=%zu: %llu waits for an in-place encode (at most %llu)", text, n, w, most);
    printf("    %-20s n=%zu: %llu waits in place\n", text, n, w);
    codec_cuda_free(g);
    free(x);
    cudaCheck(cudaFree(dx));
    cudaCheck(cudaFree(dpay));
}

static int64_t staged_frame(CodecCuda *g, uint8_t *fg, size_t cap, const float *dx, size_t n, const CodecSide *side,
                            int drop);
/* and of a pass of F such frames staged in one batch (codec_batch_stage, then
 * codec_batch_sizes, codec_batch_place and the flush), one of them with a NaN (refused):
 * at most `most` waits in all, whatever F (the candidates' counts of all of them read at
 * once, then sbc's sums, or the others' lengths), each frame's length and bytes the CPU encoder's; the frames
 * then probed at once and decoded in one batch, every second one added (weight 0.5), one of
 * them edited (topk: a bitmap bit cleared; sbc, 3lc: half its codes made ones; the CRC
 * made right), for 3lc a second one (its first run code a literal 121): at most 2 waits (the
 * probes, the end; a topk, sbc or 3lc payload too large for the probe's check or a block has
 * its verdict deferred, and the edited one's is an error with its output untouched), the outputs the
 * CPU decoder's; then a frame staged and dropped
 * (flushed before codec_batch_sizes: its selection begun, returned), one whose batch is
 * freed unflushed, and one staged after them */
static void staged_waits(const char *text, size_t n, unsigned long long most) {
    enum { F = 5 };
    CodecSpec spec;
    char err[256];
    if (codec_parse(&spec, text, err, sizeof err)) {
        CHECK(0, "%s: %s", text, err);
        return;
    }
    Codec *c = codec_new(&spec);
    CodecCuda *g[F];
    size_t cap = codec_max_frame(c, n);
    float *x = malloc(F * n * sizeof(float)), *dx = dalloc_f(F * n);
    uint8_t *fc = malloc(cap), *fg = malloc(cap), *d = dalloc_b(F * cap);
    for (int i = 0; i < F; i++) {
        gen(x + i * n, n, i % 3, 90 + (uint64_t)i);
        g[i] = codec_cuda_new(&spec);
    }
    x[3 * n + n / 2] = NAN;
    up(dx, x, F * n * sizeof(float));
    CodecBatch *b = codec_batch_new();
    int64_t lens[F];
    emu_host_waits();
    for (int i = 0; i < F; i++) codec_batch_stage(b, g[i], dx + i * n, n, NULL);
    codec_batch_sizes(b, lens);
    for (int i = 0; i < F; i++)
        if (lens[i] > 0) codec_batch_place(b, (size_t)i, d + i * cap);
    codec_batch_flush(b);
    unsigned long long w = emu_host_waits();
    CHECK(w <= most, "%s n=%zu: %llu waits for %d staged frames (at most %llu)", text, n, w, F, most);
    printf("    %-20s n=%zu: %llu waits for %d staged frames\n", text, n, w, F);
    for (int i = 0; i < F; i++) {
        int64_t l = codec_encode(c, fc, cap, x + i * n, n, NULL);
        if (lens[i] > 0) down(fg, d + i * cap, (size_t)lens[i]);
        SAME(l == lens[i] && (l < 0 || first_diff(fc, fg, (size_t)l) < 0),
             "%s n=%zu: staged frame %d of %d: length cpu %lld gpu %lld, or its bytes", text, n, i, F, (long long)l,
             (long long)lens[i]);
        codec_cuda_free(g[i]);
    }
    CHECK(lens[3] == -GC_ERR_PARAM, "%s n=%zu: the staged frame with a NaN: %lld", text, n, (long long)lens[3]);
    {
        const uint8_t *fr[F];
        size_t fl[F];
        int k = 0, at[F], rc[F], vr[F], want[F];
        float *init = malloc(n * sizeof(float)), *oc = malloc(F * n * sizeof(float)), *og = malloc(F * n * sizeof(float));
        float *dout = dalloc_f(F * n);
        for (size_t i = 0; i < n; i++) init[i] = 0.5f;
        for (int i = 0; i < F; i++) {
            if (lens[i] <= 0) continue;
            int short3 = i == 2 && spec.ops->id == CODEC_3LC;
            if (short3 || (i == 1 && spec.ops->id != CODEC_DGC)) { /* edited, the CRC made right */
                down(fg, d + i * cap, (size_t)lens[i]);
                size_t pl = (size_t)lens[i] - CODEC_HEADER_SIZE;
                uint8_t *bm = fg + CODEC_HEADER_SIZE + 4, *e = fg + CODEC_HEADER_SIZE + pl;
                if (short3) { /* 3lc's first run code made a literal 121: too short */
                    while (bm < e && *bm < B3_RUN0) bm++;
                    if (bm < e) *bm = B3_ZERO;
                } else if (spec.ops->id == CODEC_TOPK) { /* a set bit of its bitmap cleared */
                    while (!*bm) bm++;
                    *bm &= (uint8_t)(*bm - 1);
                } else { /* sbc: the second half of its codes all ones (a code past n, or cut off); 3lc: of
                          * its zero-run stream, runs of 14 (past L) */
                    memset(fg + CODEC_HEADER_SIZE + 9 + (pl - 9) / 2, 0xFF, (pl - 9) - (pl - 9) / 2);
                }
                refresh(fg, pl);
                up(d + i * cap, fg, (size_t)lens[i]);
            }
            down(fg, d + i * cap, (size_t)lens[i]);
            Codec *cd = codec_new(&spec);
            memcpy(oc + (size_t)k * n, init, n * sizeof(float));
            want[k] = k & 1 ? codec_decode_acc(cd, oc + (size_t)k * n, n, 0.5f, fg, (size_t)lens[i])
                            : codec_decode(cd, oc + (size_t)k * n, n, fg, (size_t)lens[i]);
            codec_free(cd);
            up(dout + (size_t)k * n, init, n * sizeof(float));
            fr[k] = d + i * cap, fl[k] = (size_t)lens[i], at[k++] = i;
        }
        CodecBatch *bd = codec_batch_new();
        CodecProbe pr[F];
        int deferred = 0;
        for (int i = 0; i < F; i++) g[i] = codec_cuda_new(&spec);
        codec_batch_reserve_deferred(bd, F);
        emu_host_waits();
        codec_cuda_probe_frames(pr, fr, fl, (size_t)k);
        for (int q = 0; q < k; q++) {
            size_t before = codec_batch_deferred(bd);
            rc[q] = codec_decode_cuda_batched(bd, g[at[q]], dout + (size_t)q * n, n, q & 1 ? 0.5f : 1.0f, q & 1, fr[q],
                                              fl[q], &pr[q]);
            vr[q] = codec_batch_deferred(bd) > before ? (int)before : -1;
            deferred += vr[q] >= 0;
        }
        codec_batch_flush(bd);
        cudaCheck(cudaStreamSynchronize(0));
        w = emu_host_waits();
        int got[F];
        codec_batch_verdicts(bd, got);
        CHECK(w <= 2, "%s n=%zu: %llu waits to decode %d frames in a batch (at most 2)", text, n, w, k);
        printf("    %-20s n=%zu: %llu waits to decode %d frames in a batch, %d verdicts deferred (returns %d %d %d %d)\n",
               text, n, w, k, deferred, want[0], want[1], want[2], want[3]);
        down(og, dout, (size_t)k * n * sizeof(float));
        for (int q = 0; q < k; q++) {
            int r = vr[q] >= 0 ? got[vr[q]] : rc[q];
            SAME(r == want[q] && first_diff(oc + (size_t)q * n, og + (size_t)q * n, n * sizeof(float)) < 0,
                 "%s n=%zu: frame %d decoded in a batch: cpu %d gpu %d, or its output", text, n, at[q], want[q], r);
        }
        CHECK(spec.ops->id == CODEC_DGC || want[1] < 0, "%s n=%zu: the edited frame: cpu %d", text, n, want[1]);
        CHECK(spec.ops->id != CODEC_3LC || want[2] < 0, "%s n=%zu: the second edited frame: cpu %d", text, n, want[2]);
        for (int i = 0; i < F; i++) codec_cuda_free(g[i]);
        codec_batch_free(bd);
        free(init);
        free(oc);
        free(og);
        cudaCheck(cudaFree(dout));
    }
    g[0] = codec_cuda_new(&spec); /* a frame staged and flushed before codec_batch_sizes: never read back */
    staged_frame(g[0], fg, cap, dx, n, NULL, 1);
    CodecBatch *bf = codec_batch_new(); /* and one whose batch is freed unflushed */
    codec_batch_stage(bf, g[0], dx, n, NULL);
    codec_batch_free(bf);
    int64_t l = codec_encode(c, fc, cap, x, n, NULL), lg = staged_frame(g[0], fg, cap, dx, n, NULL, 0);
    SAME(l == lg && l > 0 && first_diff(fc, fg, (size_t)l) < 0, "%s n=%zu: a frame staged after one dropped", text, n);
    codec_cuda_free(g[0]);
    codec_batch_free(b);
    codec_free(c);
    free(x);
    free(fc);
    free(fg);
    cudaCheck(cudaFree(dx));
    cudaCheck(cudaFree(d));
}
#endif

/* one frame staged in a batch (codec_batch_stage, codec_batch_sizes, codec_batch_place) into
 * fg (cap bytes, host), as the exchange's bundles take it: its length or GcError. drop: the
 * batch flushed before codec_batch_sizes (the frame never read back) */
static int64_t staged_frame(CodecCuda *g, uint8_t *fg, size_t cap, const float *dx, size_t n, const CodecSide *side,
                            int drop) {
    CodecBatch *b = codec_batch_new();
    uint8_t *d = dalloc_b(cap);
    int64_t len = -1;
    codec_batch_stage(b, g, dx, n, side);
    if (!drop) {
        codec_batch_sizes(b, &len);
        if (len >= 0) codec_batch_place(b, 0, d);
    }
    codec_batch_flush(b);
    if (len > 0) down(fg, d, (size_t)len);
    codec_batch_free(b);
    cudaCheck(cudaFree(d));
    return len;
}

/* gcomp's table schedule across calls: encoders and decoders in step. staged: the GPU
 * encoder's frames staged (their read-backs taken with the batch's, the table committed
 * there), with a staged frame that fails (a level 5) and one never read back among them,
 * which must leave the table schedule as it was */
static void gcomp_sequence(const char *text, int staged) {
    CodecSpec spec;
    char err[256];
    if (codec_parse(&spec, text, err, sizeof err)) {
        CHECK(0, "%s: %s", text, err);
        return;
    }
    Codec *ce = codec_new(&spec), *cd = codec_new(&spec);
    CodecCuda *ge = codec_cuda_new(&spec), *gd = codec_cuda_new(&spec);
    static const size_t ns[] = {5000, 0, 777, 12345, 64, 5000, 0, 30000, 1, 4097, 9000, 2500};
    static const int ds[] = {0, 0, 3, 1, 4, 3, 2, 0, 1, 3, 6, 1};
    for (int step = 0; step < (int)(sizeof ns / sizeof ns[0]); step++) {
        if (step == 6) gcomp_state_swap(text, &spec, &ce, &cd, &ge, &gd); /* a checkpoint and a resume */
        size_t n = ns[step];
        float *x = malloc((n ? n : 1) * sizeof(float)), *oc = malloc((n ? n : 1) * sizeof(float)),
              *og = malloc((n ? n : 1) * sizeof(float));
        gen(x, n, ds[step], 500 + (uint64_t)step);
        float *dx = dalloc_f(n), *dout = dalloc_f(n);
        up(dx, x, n * sizeof(float));
        size_t cap = codec_max_frame(ce, n);
        uint8_t *fc = malloc(cap), *fg = malloc(cap);
        if (n > 0 && step % 3 == 1) gcomp_refused(text, &spec, ce, ge, x, dx, n, step);
        if (staged && n > 0 && step % 3 == 2) { /* a level 5: refused by both, the schedule untouched */
            uint8_t *lv = malloc(n), *dlv = dalloc_b(n);
            for (size_t i = 0; i < n; i++) lv[i] = (uint8_t)(i % 4);
            lv[n - 1] = 5;
            up(dlv, lv, n);
            CodecSide sc = {0}, sg = {0};
            sc.levels = lv;
            sg.levels = dlv;
            int64_t a = codec_encode(ce, fc, cap, x, n, &sc), b = staged_frame(ge, fg, cap, dx, n, &sg, 0);
            SAME(a == -GC_ERR_PARAM && b == a, "%s step %d: a staged frame with a level 5: cpu %lld gpu %lld", text,
                 step, (long long)a, (long long)b);
            free(lv);
            cudaCheck(cudaFree(dlv));
        }
        if (staged && n > 0 && step == 4) staged_frame(ge, fg, cap, dx, n, NULL, 1); /* never read back */
        int64_t lc = codec_encode(ce, fc, cap, x, n, NULL);
        int64_t lg = staged ? staged_frame(ge, fg, cap, dx, n, NULL, 0) : codec_encode_cuda(ge, fg, cap, dx, n, NULL);
        SAME(lc == lg && lc > 0 && first_diff(fc, fg, (size_t)lc) < 0,
             "%s%s step %d n=%zu: frames (cpu %lld gpu %lld)", text, staged ? " staged" : "", step, n, (long long)lc,
             (long long)lg);
        if (lc > 0) { /* the GPU encoder's own size breakdown, as the CPU's frame parses */
            GcompParts pc, pg;
            memset(&pc, 0, sizeof pc);
            memset(&pg, 0, sizeof pg);
            int a = gcomp_frame_parts(&pc, fc, (size_t)lc), b = codec_cuda_gcomp_parts_last(&pg, ge, (size_t)lg);
            SAME(a == 0 && b == 0 && memcmp(&pc, &pg, sizeof pc) == 0,
                 "%s step %d: size breakdown (cpu %d gpu %d; exponent bits %llu | %llu, level 0 %llu | %llu)", text,
                 step, a, b, (unsigned long long)pc.exp_bits, (unsigned long long)pg.exp_bits,
                 (unsigned long long)pc.level[0], (unsigned long long)pg.level[0]);
        }
        if (lc > 0) {
            int a = codec_decode(cd, oc, n, fc, (size_t)lc);
            int b = codec_decode_cuda(gd, dout, n, fc, (size_t)lc);
            down(og, dout, n * sizeof(float));
            SAME(a == b && a == 0 && first_diff(oc, og, n * sizeof(float)) < 0, "%s step %d: decode cpu %d gpu %d", text,
                 step, a, b);
        }
        free(x);
        free(oc);
        free(og);
        free(fc);
        free(fg);
        cudaCheck(cudaFree(dx));
        cudaCheck(cudaFree(dout));
    }
    /* a frame without a table to fresh decoders: both GC_ERR_STATE */
    {
        size_t n = 100;
        float x[100];
        gen(x, n, 0, 77);
        float *dx = dalloc_f(n);
        up(dx, x, sizeof x);
        uint8_t f[4096];
        int64_t lc = codec_encode(ce, f, sizeof f, x, n, NULL);
        Codec *c2 = codec_new(&spec);
        CodecCuda *g2 = codec_cuda_new(&spec);
        float o[100];
        int a = lc > 0 ? codec_decode(c2, o, n, f, (size_t)lc) : -1;
        int b = lc > 0 ? codec_decode_cuda(g2, dx, n, f, (size_t)lc) : -2;
        SAME(a == b, "%s: table-less frame to a fresh decoder: cpu %d gpu %d (flags %u)", text, a, b,
             lc > 0 ? get_u16(f + 6) : 0);
        codec_free(c2);
        codec_cuda_free(g2);
        cudaCheck(cudaFree(dx));
    }
    codec_free(ce);
    codec_free(cd);
    codec_cuda_free(ge);
    codec_cuda_free(gd);
}

/* A batch (codec_encode_cuda_batched, codec_batch_put, codec_decode_cuda_batched,
 * codec_batch_flush) of more frames than one launch takes (CODEC_BATCH), in one device
 * buffer as a bundle holds them (each behind a 12-byte lead, at any alignment): fp32
 * (whose payloads the batch copies) and the dense codecs (whose loops it runs: more than a
 * launch's of them) among the others, sizes from 0 to several CRC blocks. The frames and leads equal the CPU's frames and the leads' bytes, repr equals
 * the CPU's; probed at once (codec_cuda_probe_frames) and decoded in the batch, plain and
 * accumulating, the floats equal the CPU decoder's; a frame with a flipped payload byte is
 * refused with the CPU's code and its output left as it was */
static void batch_frames(void) {
    static const char *const bspecs[] = {"fp32", "fp32",    "3lc", "fp32", "int8", "topk",     "fp32",   "fp16",
                                         "ternsum", "dgc", "sbc", "topk", "dgc",  "terngrad", "stoch3", "onebit"};
    /* frames that fail (GC_ERR_PARAM, a NaN among their values): the first 3lc and topk
     * frames of 1,000 values, dgc's and sbc's first of 70,001 and sbc's first of 1,000 */
    static const struct {
        const char *spec;
        size_t n;
    } fails[] = {{"3lc", 1000}, {"topk", 1000}, {"dgc", 70001}, {"sbc", 1000}, {"sbc", 70001}};
    static const size_t bn[] = {0, 1, 3, 17, 1000, 70001, 5, 64};
    enum { K = 3 * CODEC_BATCH + 11, LEAD = 12 };
    size_t nb_spec = sizeof bspecs / sizeof bspecs[0], nb_n = sizeof bn / sizeof bn[0];
    size_t n[K], at[K], total = 0, bytes = 0;
    int64_t lc[K];
    uint8_t *fc[K];
    CodecSpec spec[K];
    Codec *cc[K];
    char err[256];
    for (int i = 0; i < K; i++) {
        CHECK(codec_parse(&spec[i], bspecs[i % nb_spec], err, sizeof err) == 0, "batch: spec %s", bspecs[i % nb_spec]);
        n[i] = bn[(i * 5 + i / 9) % nb_n];
        total += n[i];
        cc[i] = codec_new(&spec[i]);
        bytes += LEAD + 3 + codec_max_frame(cc[i], n[i]);
    }
    int nan_at[K] = {0};
    for (size_t f = 0; f < sizeof fails / sizeof fails[0]; f++)
        for (int i = 0; i < K; i++)
            if (!strcmp(bspecs[i % nb_spec], fails[f].spec) && n[i] == fails[f].n) {
                nan_at[i] = 1;
                break;
            }
    float *x = malloc(total * sizeof(float)), *rc_ = malloc(total * sizeof(float)), *rg = malloc(total * sizeof(float));
    float *init = malloc(total * sizeof(float)), *oc = malloc(total * sizeof(float)), *og = malloc(total * sizeof(float));
    uint8_t *hb = malloc(bytes), *lead = malloc((size_t)K * LEAD), *mc = calloc(total ? total : 1, 1),
            *mg = malloc(total ? total : 1);
    float *dx = dalloc_f(total), *drepr = dalloc_f(total), *dout = dalloc_f(total);
    uint8_t *dbuf = dalloc_b(bytes);
    Rng r;
    rng_init(&r, 2024, 5);
    for (size_t i = 0; i < (size_t)K * LEAD; i++) lead[i] = (uint8_t)rng_u64(&r);
    for (size_t i = 0; i < total; i++) init[i] = rng_normal(&r);
    CodecBatch *b = codec_batch_new();
    CodecCuda *g[K];
    size_t xo = 0, bo = 0;
    for (int i = 0; i < K; i++, xo += n[i - 1]) {
        gen(x + xo, n[i], (int[]){0, 1, 3}[i % 3], 300 + (uint64_t)i);
        if (nan_at[i]) x[xo + n[i] / 2] = NAN;
        size_t cap = codec_max_frame(cc[i], n[i]);
        at[i] = bo + LEAD + (size_t)(i % 4); /* any alignment */
        bo = at[i] + cap;
        CodecSide sc = {0};
        sc.seed = 77 + (uint64_t)i;
        sc.repr = rc_ + xo;
        sc.mask = mc + xo;
        fc[i] = malloc(cap);
        lc[i] = codec_encode(cc[i], fc[i], cap, x + xo, n[i], &sc);
        g[i] = codec_cuda_new(&spec[i]);
        CodecSide sg = {0};
        sg.seed = sc.seed;
        sg.repr = drepr + xo;
        up(dx + xo, x + xo, n[i] * sizeof(float));
        int64_t l = codec_encode_cuda_batched(b, g[i], dbuf + at[i], cap, dx + xo, n[i], &sg);
        SAME(l == lc[i], "batch frame %d (%s, n=%zu): length %lld, the CPU's %lld", i, bspecs[i % nb_spec], n[i],
             (long long)l, (long long)lc[i]);
        codec_batch_put(b, dbuf + at[i] - LEAD, lead + (size_t)i * LEAD, LEAD);
    }
    codec_batch_flush(b);
    down(hb, dbuf, bytes);
    down(rg, drepr, total * sizeof(float));
    xo = 0;
    for (int i = 0; i < K; xo += n[i], i++) {
        if (lc[i] < 0) continue;
        long d = first_diff(hb + at[i], fc[i], (size_t)lc[i]);
        SAME(d < 0, "batch frame %d (%s, n=%zu): differs from the CPU's at byte %ld", i, bspecs[i % nb_spec], n[i], d);
        SAME(first_diff(hb + at[i] - LEAD, lead + (size_t)i * LEAD, LEAD) < 0, "batch frame %d: its lead", i);
        SAME(first_diff(rg + xo, rc_ + xo, n[i] * sizeof(float)) < 0, "batch frame %d (%s): repr", i,
             bspecs[i % nb_spec]);
    }
    /* one payload byte flipped in the last fp32 frame with values */
    int bad = -1;
    for (int i = 0; i < K; i++)
        if (spec[i].ops->id == CODEC_FP32 && n[i] > 0 && lc[i] > 0) bad = i;
    uint8_t flip = hb[at[bad] + CODEC_HEADER_SIZE] ^ 0x10;
    up(dbuf + at[bad] + CODEC_HEADER_SIZE, &flip, 1);
    const uint8_t *frames[K];
    size_t lens[K];
    CodecProbe *pr = malloc(K * sizeof *pr);
    for (int i = 0; i < K; i++) frames[i] = dbuf + at[i], lens[i] = lc[i] > 0 ? (size_t)lc[i] : 0;
    codec_cuda_probe_frames(pr, frames, lens, K);
    for (int acc = 0; acc < 2; acc++) {
        float w = -0.375f;
        memcpy(oc, init, total * sizeof(float));
        up(dout, init, total * sizeof(float));
        xo = 0;
        for (int i = 0; i < K; xo += n[i], i++) {
            if (lc[i] < 0) continue;
            Codec *c = codec_new(&spec[i]);
            CodecCuda *gd = codec_cuda_new(&spec[i]);
            const uint8_t *f = i == bad ? hb + at[i] : fc[i];
            uint8_t *mine = i == bad ? malloc((size_t)lc[i]) : NULL;
            if (mine) { /* the flipped frame as the device holds it */
                memcpy(mine, fc[i], (size_t)lc[i]);
                mine[CODEC_HEADER_SIZE] = flip;
                f = mine;
            }
            int rc = acc ? codec_decode_acc(c, oc + xo, n[i], w, f, (size_t)lc[i])
                         : codec_decode(c, oc + xo, n[i], f, (size_t)lc[i]);
            int rv = codec_decode_cuda_batched(b, gd, dout + xo, n[i], w, acc, frames[i], lens[i], &pr[i]);
            SAME(rc == rv && (i != bad || rc == -GC_ERR_CHECKSUM),
                 "batch frame %d (%s, n=%zu) %s: decode rc cpu %d gpu %d", i, bspecs[i % nb_spec], n[i],
                 acc ? "acc" : "plain", rc, rv);
            codec_free(c);
            codec_cuda_free(gd); /* the queued copies need the frame and out only */
            free(mine);
        }
        codec_batch_flush(b);
        down(og, dout, total * sizeof(float));
        long d = first_diff(oc, og, total * sizeof(float));
        SAME(d < 0, "batch decode %s: floats differ at value %ld: cpu %a gpu %a", acc ? "acc" : "plain", d / 4,
             d >= 0 ? oc[d / 4] : 0.0f, d >= 0 ? og[d / 4] : 0.0f);
    }
    /* the same frames staged (codec_batch_stage, codec_batch_sizes, codec_batch_place) into a
     * second buffer: the CPU's lengths and error codes, and its bytes where placed */
    uint8_t *dbuf2 = dalloc_b(bytes), *dmask = dalloc_b(total);
    float *drepr2 = dalloc_f(total);
    int64_t *lens2 = malloc(K * sizeof *lens2);
    cudaCheck(cudaMemset(dbuf2, 0, bytes));
    cudaCheck(cudaMemset(dmask, 0, total ? total : 1));
    xo = 0;
    for (int i = 0; i < K; xo += n[i], i++) {
        CodecSide sg = {0};
        sg.seed = 77 + (uint64_t)i;
        sg.repr = drepr2 + xo;
        sg.mask = dmask + xo;
        codec_batch_stage(b, g[i], dx + xo, n[i], &sg);
    }
    codec_batch_sizes(b, lens2);
    int failed = 0;
    for (int i = 0; i < K; i++) {
        SAME(lens2[i] == lc[i], "staged frame %d (%s, n=%zu): length %lld, the CPU's %lld", i, bspecs[i % nb_spec],
             n[i], (long long)lens2[i], (long long)lc[i]);
        if (lens2[i] >= 0) codec_batch_place(b, (size_t)i, dbuf2 + at[i]);
        failed += lc[i] < 0;
    }
    CHECK(failed == 5, "batch: five frames among them fail (%d)", failed);
    codec_batch_flush(b);
    down(hb, dbuf2, bytes);
    down(rg, drepr2, total * sizeof(float));
    down(mg, dmask, total);
    xo = 0;
    for (int i = 0; i < K; xo += n[i], i++) {
        if (lc[i] < 0 || lens2[i] != lc[i]) continue;
        long d = first_diff(hb + at[i], fc[i], (size_t)lc[i]);
        SAME(d < 0, "staged frame %d (%s, n=%zu): differs from the CPU's at byte %ld", i, bspecs[i % nb_spec], n[i],
             d);
        SAME(first_diff(rg + xo, rc_ + xo, n[i] * sizeof(float)) < 0, "staged frame %d (%s): repr", i,
             bspecs[i % nb_spec]);
        SAME(first_diff(mg + xo, mc + xo, n[i]) < 0, "staged frame %d (%s, n=%zu): mask", i, bspecs[i % nb_spec], n[i]);
    }
    free(lens2);
    free(mc);
    free(mg);
    cudaCheck(cudaFree(dmask));
    cudaCheck(cudaFree(dbuf2));
    cudaCheck(cudaFree(drepr2));
    for (int i = 0; i < K; i++) {
        free(fc[i]);
        codec_free(cc[i]);
        codec_cuda_free(g[i]);
    }
    codec_batch_free(b);
    free(pr);
    free(x);
    free(rc_);
    free(rg);
    free(init);
    free(oc);
    free(og);
    free(hb);
    free(lead);
    cudaCheck(cudaFree(dx));
    cudaCheck(cudaFree(drepr));
    cudaCheck(cudaFree(dout));
    cudaCheck(cudaFree(dbuf));
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("no CUDA device: GPU codec parity skipped\n");
        CHECK(1, "skipped");
        TEST_END();
    }
    CHECK(codec_cuda_available(), "codec_cuda_available");
#ifdef EMU_HOST_WAITS
    /* the emulation: every scratch buffer an allocation of its own, whose bounds its page
     * protections see (compress/codec_cuda.cu, gcx_dmalloc); the shared arena is what the
     * exchange's tests run on */
    setenv("GCX_DSCRATCH", "each", 0);
#endif
    const char *maxs = getenv("GCX_CODEC_CUDA_MAXN");
    size_t maxn = maxs ? (size_t)strtoull(maxs, NULL, 10) : (size_t)-1;
    const char *only = getenv("GCX_CODEC_CUDA_ONLY");
    for (int s = 0; s < NSPECS; s++) {
        if (only && strncmp(specs[s], only, strlen(only))) continue;
        int f0 = test_failed_, p0 = test_passed_;
        for (int k = 0; k < NSIZES; k++) {
            size_t n = sizes[k];
            if (n > maxn) continue;
            for (int d = 0; d < NDIST; d++) {
                int seeds = n <= 4097 ? 2 : 1;
                for (int sd = 0; sd < seeds; sd++) {
                    uint64_t seed = 1 + (uint64_t)sd + 10u * (uint64_t)k;
                    one_case(specs[s], n, d, seed, n <= 4097 && sd == 0 && d != 2 && d < 5);
                }
                if (n <= 65537 && (d == 0 || d == 1 || d == 4)) side_cases(specs[s], n, d, 3 + (uint64_t)k);
            }
        }
        printf("  %-28s %6d checks, %d failed\n", specs[s], test_passed_ + test_failed_ - p0 - f0, test_failed_ - f0);
        fflush(stdout);
    }
    {
        int f0 = test_failed_, p0 = test_passed_;
        static const size_t tn[] = {8193, 100003};
        for (int k = 0; k < 2; k++) {
            if (tn[k] > maxn) continue;
            sample_too_high("topk:ratio=0.05", 0.05, tn[k]);
            sample_too_high("dgc:density=0.05", 0.05, tn[k]);
            sample_too_high("sbc:p=0.05", 0.05, tn[k]);
        }
        sbc_sum_edges(64);
        sbc_sum_edges(2000);
        if (maxn >= 70001) sbc_sum_edges(70001);
        else sbc_sum_edges(5000); /* the emulation's general path */
#ifdef EMU_HOST_WAITS
        /* one wait less a selection with the sample's threshold left on the device (4 for
         * topk and dgc, 6 for sbc, when the host read it first) */
        sampled_waits("topk:ratio=0.05", 8193, 3);
        sampled_waits("dgc", 8193, 3);
        sampled_waits("sbc", 8193, 4);
        staged_waits("topk:ratio=0.05", 8193, 2);
        staged_waits("dgc", 8193, 2);
        staged_waits("dgc", 70001, 2);
        staged_waits("topk:ratio=0.5", 70001, 2); /* payloads beyond what the probe checks */
        staged_waits("sbc", 8193, 2); /* the counts, then sbc's sums, which give its lengths */
        staged_waits("sbc:p=0.2", 70001, 2);
        staged_waits("3lc", 8193, 1); /* larger than one block on the emulation: the lengths read at once */
        staged_waits("3lc", 70001, 1);
#endif
        printf("  %-28s %6d checks, %d failed\n", "sampled selections, sbc sums", test_passed_ + test_failed_ - p0 - f0,
               test_failed_ - f0);
        fflush(stdout);
    }
    {
        static const char *const mis_specs[] = {"fp16", "int8", "terngrad", "3lc", "onebit", "topk", "dgc", "sbc", "gcomp",
                                                "ternsum"};
        static const size_t mis_n[] = {1, 33, 1001, 4097};
        int f0 = test_failed_, p0 = test_passed_;
        for (int s = 0; s < (int)(sizeof mis_specs / sizeof mis_specs[0]); s++)
            for (int k = 0; k < (int)(sizeof mis_n / sizeof mis_n[0]); k++)
                misaligned_payload(mis_specs[s], mis_n[k], k & 1 ? 1 : 0, 40 + (uint64_t)k);
        printf("  %-28s %6d checks, %d failed\n", "misaligned payload", test_passed_ + test_failed_ - p0 - f0,
               test_failed_ - f0);
        fflush(stdout);
    }
    {
        int f0 = test_failed_, p0 = test_passed_;
        local_stats_large("terngrad");
        local_stats_large("stoch3");
        local_stats_large("ternsum");
        local_stats_large("int8");
        local_stats_large("onebit");
        printf("  %-28s %6d checks, %d failed\n", "local statistics, large", test_passed_ + test_failed_ - p0 - f0,
               test_failed_ - f0);
        fflush(stdout);
    }
    {
        /* every return code of the CPU decoders reached, with the device's agreeing */
        static const size_t cn[] = {1, 5, 8, 9, 64, 1000, 65535, 65536, 70001, 200003};
        int f0 = test_failed_, p0 = test_passed_;
        int rd[GC_ERR_COUNT_] = {0}, rs[GC_ERR_COUNT_] = {0}, rt[GC_ERR_COUNT_] = {0}, rl[GC_ERR_COUNT_] = {0};
        for (uint64_t t = 0; t < 600; t++) {
            size_t n = cn[t % (sizeof cn / sizeof cn[0])];
            crafted_dgc(n, 500 + t, rd);
            crafted_sbc(n, 500 + t, rs);
            if (t % 2 == 0) crafted_sbc_long(n, 500 + t, rl);
            if (n <= 70001 && t % 2) crafted_topk(n, 500 + t, rt);
        }
        sbc_rice_edges(rl);
        static const int want[] = {GC_OK, GC_ERR_CORRUPT, GC_ERR_TRUNCATED, GC_ERR_OVERSIZED};
        for (int w = 0; w < 4; w++)
            CHECK(rd[want[w]] && rs[want[w]] && rt[want[w]] && rl[want[w]],
                  "crafted frames: CPU code %s reached by dgc %d, sbc %d (long %d), topk %d times", gc_strerror(want[w]),
                  rd[want[w]], rs[want[w]], rl[want[w]], rt[want[w]]);
        printf("  %-28s %6d checks, %d failed (dgc ok/corrupt/truncated/oversized %d/%d/%d/%d, sbc %d/%d/%d/%d, "
               "long sbc %d/%d/%d/%d)\n",
               "crafted sparse payloads", test_passed_ + test_failed_ - p0 - f0, test_failed_ - f0, rd[0],
               rd[GC_ERR_CORRUPT], rd[GC_ERR_TRUNCATED], rd[GC_ERR_OVERSIZED], rs[0], rs[GC_ERR_CORRUPT],
               rs[GC_ERR_TRUNCATED], rs[GC_ERR_OVERSIZED], rl[0], rl[GC_ERR_CORRUPT], rl[GC_ERR_TRUNCATED],
               rl[GC_ERR_OVERSIZED]);
    }
    {
        int f0 = test_failed_, p0 = test_passed_;
        gcomp_shifts("gcomp", 8193, 0, 61);
        gcomp_shifts("gcomp", 8193, 1, 62);
        gcomp_shifts("gcomp:ntheta=3,chunk=64", 1000, 1, 63);
        gcomp_shifts("gcomp:ntheta=5,chunk=777", 4097, 0, 64);
        gcomp_shifts("gcomp:ntheta=16,chunk=1000", 3001, 1, 65);
        gcomp_one_value(100, 37, INFINITY, "infinity at level 1");
        gcomp_one_value(8193, 5000, -0.0f, "ZSIGN without a negative zero");
        gcomp_zsign_cleared(150, 75, 140);
        gcomp_zsign_cleared(450, 300, 5);
        gcomp_failed_table();
        gcomp_deferred();
        printf("  %-28s %6d checks, %d failed\n", "gcomp segment shifts", test_passed_ + test_failed_ - p0 - f0,
               test_failed_ - f0);
        fflush(stdout);
    }
    {
        int f0 = test_failed_, p0 = test_passed_;
        batch_frames();
        printf("  %-28s %6d checks, %d failed\n", "batched frames", test_passed_ + test_failed_ - p0 - f0,
               test_failed_ - f0);
        fflush(stdout);
    }
    { /* the device CRC (crc32c_cuda): lengths around its 1 KiB pieces and 256 KiB blocks, any alignment */
        static const size_t crc_n[] = {0, 1, 7, 8, 1023, 1024, 1025, 4096 + 3, 262143, 262144, 262145, 600001};
        size_t most = 600001 + 8;
        uint8_t *h = malloc(most), *dbuf = dalloc_b(most);
        Rng r;
        rng_init(&r, 31, 0);
        for (size_t i = 0; i < most; i++) h[i] = (uint8_t)rng_u64(&r);
        up(dbuf, h, most);
        int f0 = test_failed_, p0 = test_passed_;
        for (size_t k = 0; k < sizeof crc_n / sizeof crc_n[0]; k++)
            for (size_t off = 0; off < 8; off += 3) {
                uint32_t c0 = off == 3 ? 0xDEADBEEFu : 0;
                uint32_t want = crc32c(c0, h + off, crc_n[k]), got = crc32c_cuda(c0, dbuf + off, crc_n[k]);
                CHECK(got == want, "crc32c_cuda of %zu bytes at offset %zu from 0x%08x: 0x%08x, want 0x%08x", crc_n[k],
                      off, c0, got, want);
            }
        printf("  %-28s %6d checks, %d failed\n", "device crc32c", test_passed_ + test_failed_ - p0 - f0,
               test_failed_ - f0);
        free(h);
        cudaCheck(cudaFree(dbuf));
    }
    for (int staged = 0; staged < 2; staged++) {
        gcomp_sequence("gcomp:ntheta=4,every=2,chunk=100", staged);
        gcomp_sequence("gcomp:every=3,chunk=4096", staged);
        gcomp_sequence("gcomp:ntheta=1,every=1,chunk=64", staged);
    }
    const char *big = getenv("GCX_CODEC_CUDA_BIG");
    if (!big || strcmp(big, "0")) { /* > 2^24 values: index arithmetic past 24 bits, many blocks and chunks */
        size_t n = ((size_t)1 << 24) + 77;
        for (int s = 0; s < codec_count(); s++) {
            int f0 = test_failed_;
            one_case(codec_ops_at(s)->name, n, 0, 1234, 0);
            printf("  big n=%zu %-10s %s\n", n, codec_ops_at(s)->name, test_failed_ > f0 ? "FAILED" : "ok");
            fflush(stdout);
        }
        one_case("3lc", n, 1, 99, 0);
        one_case("onebit", n, 3, 99, 0);
    }
    if (shown > SHOW_MAX) printf("(%d failures not shown)\n", shown - SHOW_MAX);
    TEST_END();
}
#endif
