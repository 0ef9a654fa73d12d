/* Dense codecs: parallel encoders byte-identical to the serial ones (3LC's
 * parallel zero-run encoding with partition boundaries inside zero runs),
 * every truncation of a valid frame and payload rejected, random corruption
 * never crashes, each impossible field rejected with the right error, and a
 * failed decode leaves the output untouched. */
#include "tests/test.h"

#include "compress/base3.h"
#include "tests/test_codec_dense.h"

static const char *const DENSE[] = {"fp16", "int8", "terngrad", "stoch3", "3lc", "onebit", "3lc:s=1.9",
                                    "terngrad:c=0"};
#define NDENSE 8

/* ------------------------------------------------- parallel == serial --- */

/* x with zero runs whose lengths vary widely, so that 64-byte partition
 * boundaries fall inside runs, at their ends and between them.
 * x: [n] */
static void fill_runs(float *x, size_t n, uint64_t seed, int mode) {
    Rng r;
    rng_init(&r, seed, 77);
    memset(x, 0, 4 * n);
    if (mode == 0) return; /* all zero: every partition is one run */
    size_t i = 0;
    while (i < n) {
        /* a run of zero bytes of 0..4000 bytes (x5 values), then a few nonzeros */
        size_t gap = mode == 1 ? (size_t)rng_below(&r, 4000) * 5 : (size_t)rng_below(&r, 90);
        i += gap;
        for (int k = 0; k < 1 + (int)rng_below(&r, 3) && i < n; k++, i++) x[i] = rng_normal(&r);
    }
}

static void test_parallel_identical(void) {
    /* the encoders use at most one thread per 65536 values: sizes up to 8 x that */
    static const size_t sizes[] = {65536 * 3 + 1, 65536 * 8 + 2};
    static const int threads[] = {2, 3, 8};
    size_t nmax = 65536 * 8 + 2;
    float *x = mallocCheck(4 * nmax), *r1 = mallocCheck(4 * nmax), *r2 = mallocCheck(4 * nmax);
    for (int d = 0; d < NDENSE; d++) {
        Codec *c = dense_codec(DENSE[d]);
        int full = strncmp(DENSE[d], "3lc", 3) == 0; /* the codec with the interesting parallel form */
        int cases = 0, same = 0;
        for (int si = 0; si < (full ? 2 : 1); si++)
            for (int mode = full ? 0 : 2; mode < 4; mode++) {
                size_t n = sizes[si];
                if (mode < 3) fill_runs(x, n, (uint64_t)(si * 10 + mode), mode);
                else dense_fill(x, n, (uint64_t)si, 1);
                CodecSide side;
                memset(&side, 0, sizeof side);
                side.seed = 12345;
                side.threads = 1;
                side.repr = r1;
                int64_t l1;
                uint8_t *f1 = dense_encode(c, x, n, &side, &l1);
                for (int ti = 0; ti < (full ? 3 : 1); ti++) {
                    side.threads = threads[ti];
                    side.repr = r2;
                    int64_t l2;
                    uint8_t *f2 = dense_encode(c, x, n, &side, &l2);
                    int ok = f1 && f2 && l1 == l2 && memcmp(f1, f2, (size_t)l1) == 0 && memcmp(r1, r2, 4 * n) == 0;
                    if (!ok)
                        printf("  %s n=%zu mode %d threads %d: frame %lld vs serial %lld bytes\n", DENSE[d], n, mode,
                               threads[ti], (long long)l2, (long long)l1);
                    cases++;
                    same += ok;
                    free(f2);
                }
                free(f1);
            }
        CHECK(same == cases, "%s: %d/%d parallel encodings byte-identical to serial (frame and repr)", DENSE[d],
              same, cases);
        codec_free(c);
    }
    free(x), free(r1), free(r2);
}

/* The 3lc parallel encoder against a straightforward serial model: pack all
 * bytes, then the canonical zero-run encoding (runs 121 split greedily). */
static void test_3lc_model(void) {
    size_t n = 65536 * 4 + 3;
    float *x = mallocCheck(4 * n);
    int ok_all = 1;
    for (int mode = 0; mode < 3; mode++) {
        fill_runs(x, n, 99 + (uint64_t)mode, mode);
        size_t L = b3_len(n);
        float mx = 0;
        for (size_t i = 0; i < n; i++) mx = fabsf(x[i]) > mx ? fabsf(x[i]) : mx;
        uint8_t *bytes = mallocCheck(L), *want = mallocCheck(4 + L);
        for (size_t j = 0; j < L; j++) {
            int b = 0;
            for (int k = 0; k < 5; k++) {
                size_t i = (size_t)k * L + j;
                int q = i >= n ? -1 : (2 * fabsf(x[i]) > mx ? (x[i] > 0 ? 1 : -1) : 0);
                b = 3 * b + q + 1;
            }
            bytes[j] = (uint8_t)b;
        }
        put_f32(want, mx);
        size_t o = 4;
        for (size_t j = 0; j < L;) {
            if (bytes[j] != 121) {
                want[o++] = bytes[j++];
                continue;
            }
            size_t r = 0;
            while (j < L && bytes[j] == 121) r++, j++;
            while (r >= 14) want[o++] = 255, r -= 14;
            if (r == 1) want[o++] = 121;
            else if (r >= 2) want[o++] = (uint8_t)(243 + r - 2);
        }
        Codec *c = dense_codec("3lc");
        CodecSide side;
        memset(&side, 0, sizeof side);
        side.threads = 4;
        int64_t len;
        uint8_t *f = dense_encode(c, x, n, &side, &len);
        int ok = f && (size_t)len == CODEC_HEADER_SIZE + o && memcmp(f + CODEC_HEADER_SIZE, want, o) == 0;
        if (!ok) printf("  mode %d: %lld bytes, model %zu\n", mode, (long long)len, CODEC_HEADER_SIZE + o);
        ok_all &= ok;
        free(f), free(bytes), free(want);
        codec_free(c);
    }
    CHECK(ok_all, "3lc 4-thread encoding == serial model (pack, then greedy zero runs)");
    free(x);
}

/* ------------------------------------------------ truncation, corruption --- */

static void test_truncation_corruption(void) {
    static const size_t sizes[] = {0, 1, 4, 5, 9, 64, 333};
    Rng rng;
    rng_init(&rng, 4242, 0);
    for (int d = 0; d < NDENSE; d++) {
        Codec *c = dense_codec(DENSE[d]);
        size_t frame_trunc_bad = 0, payload_trunc_bad = 0, crc_bad = 0, crashes_none = 0, tried = 0;
        for (int si = 0; si < 7; si++)
            for (int kind = 0; kind < 3; kind++) {
                size_t n = sizes[si];
                float *x = mallocCheck(4 * n + 4), *y = mallocCheck(4 * n + 4);
                dense_fill(x, n, 31 + (uint64_t)si, kind == 2 ? 2 : kind);
                int64_t len;
                uint8_t *f = dense_encode(c, x, n, NULL, &len);
                if (!f) {
                    CHECK(0, "%s n=%zu encodes", DENSE[d], n);
                    free(x), free(y);
                    continue;
                }
                /* every strict prefix of the frame is rejected */
                for (int64_t k = 0; k < len; k++) {
                    uint8_t *t = mallocCheck((size_t)k + 1);
                    memcpy(t, f, (size_t)k);
                    if (codec_decode(c, y, n, t, (size_t)k) >= 0) frame_trunc_bad++;
                    free(t);
                }
                /* every strict prefix of the payload is rejected by the decoder itself */
                const uint8_t *p = f + CODEC_HEADER_SIZE;
                size_t plen = (size_t)len - CODEC_HEADER_SIZE;
                for (size_t k = 0; k < plen; k++) {
                    uint8_t *t = mallocCheck(k + 1);
                    memcpy(t, p, k);
                    int rc = c->spec.ops->decode(c, y, n, 1.0f, 0, t, k, 0);
                    if (rc >= 0) {
                        payload_trunc_bad++;
                        printf("  %s n=%zu: payload prefix %zu of %zu accepted\n", DENSE[d], n, k, plen);
                    }
                    free(t);
                }
                /* random corruption of the frame: the CRC catches it */
                uint8_t *g = mallocCheck((size_t)len);
                for (int m = 0; m < 20 && plen; m++) {
                    memcpy(g, f, (size_t)len);
                    size_t at = CODEC_HEADER_SIZE + rng_below(&rng, plen);
                    g[at] ^= (uint8_t)(1 + rng_below(&rng, 255));
                    if (codec_decode(c, y, n, g, (size_t)len) != -GC_ERR_CHECKSUM) crc_bad++;
                }
                /* random corruption of the payload, CRC bypassed: any result but a crash */
                for (int m = 0; m < 50 && plen; m++) {
                    memcpy(g, f, (size_t)len);
                    int edits = 1 + (int)rng_below(&rng, 3);
                    for (int e = 0; e < edits; e++) g[CODEC_HEADER_SIZE + rng_below(&rng, plen)] = (uint8_t)rng_u64(&rng);
                    int rc = c->spec.ops->decode(c, y, n, 1.0f, 0, g + CODEC_HEADER_SIZE, plen, 0);
                    crashes_none += rc <= 0;
                    tried++;
                }
                free(g), free(f), free(x), free(y);
            }
        CHECK(frame_trunc_bad == 0, "%s: every truncated frame rejected (%zu accepted)", DENSE[d], frame_trunc_bad);
        CHECK(payload_trunc_bad == 0, "%s: every truncated payload rejected (%zu accepted)", DENSE[d],
              payload_trunc_bad);
        CHECK(crc_bad == 0, "%s: corrupted frames fail the CRC (%zu not)", DENSE[d], crc_bad);
        CHECK(crashes_none == tried, "%s: %zu corrupted payloads decoded or rejected cleanly", DENSE[d], tried);
        codec_free(c);
    }
}

/* --------------------------------------------- specific impossible fields --- */

/* decode payload p (len bytes) for n values with spec; the output must stay untouched on error */
static int dec(const char *spec, size_t n, const uint8_t *p, size_t len, uint16_t flags) {
    Codec *c = dense_codec(spec);
    float *out = mallocCheck(4 * n + 4);
    for (size_t i = 0; i < n; i++) out[i] = 42.0f;
    int rc = c->spec.ops->decode(c, out, n, 1.0f, 1, p, len, flags);
    if (rc < 0)
        for (size_t i = 0; i < n; i++)
            if (out[i] != 42.0f) {
                printf("  %s: output changed by a failed decode\n", spec);
                rc = 12345;
                break;
            }
    free(out);
    codec_free(c);
    return rc;
}

static void test_impossible_fields(void) {
    const uint8_t one[4] = {0x00, 0x00, 0x80, 0x3F}, nan[4] = {0x00, 0x00, 0xC0, 0x7F},
                  inf[4] = {0x00, 0x00, 0x80, 0x7F}, neg[4] = {0x00, 0x00, 0x80, 0xBF}, mzero[4] = {0, 0, 0, 0x80};
    const uint8_t *badscale[4] = {nan, inf, neg, mzero};
    uint8_t p[64];
    /* flags: no dense codec defines a flag bit */
    for (int d = 0; d < 6; d++) {
        Codec *c = dense_codec(DENSE[d]);
        float x[10] = {1, -2, 3, 0, 0, 0, 0.5f, 0, 0, 1};
        int64_t len;
        uint8_t *f = dense_encode(c, x, 10, NULL, &len);
        for (int bit = 0; bit < 16; bit++)
            CHECK(dec(DENSE[d], 10, f + CODEC_HEADER_SIZE, (size_t)len - CODEC_HEADER_SIZE, (uint16_t)(1u << bit)) ==
                      -GC_ERR_CORRUPT,
                  "%s: flag bit %d rejected", DENSE[d], bit);
        /* one byte too many */
        uint8_t *g = mallocCheck((size_t)len + 1);
        memcpy(g, f, (size_t)len);
        g[len] = 0;
        CHECK(dec(DENSE[d], 10, g + CODEC_HEADER_SIZE, (size_t)len - CODEC_HEADER_SIZE + 1, 0) == -GC_ERR_OVERSIZED,
              "%s: trailing byte rejected as OVERSIZED", DENSE[d]);
        /* the scale field(s): NaN, inf, negative, -0 */
        if (strcmp(DENSE[d], "fp16") != 0)
            for (int b = 0; b < 4; b++) {
                memcpy(g, f, (size_t)len);
                memcpy(g + CODEC_HEADER_SIZE, badscale[b], 4);
                CHECK(dec(DENSE[d], 10, g + CODEC_HEADER_SIZE, (size_t)len - CODEC_HEADER_SIZE, 0) == -GC_ERR_CORRUPT,
                      "%s: scale %02x%02x%02x%02x rejected", DENSE[d], badscale[b][3], badscale[b][2], badscale[b][1],
                      badscale[b][0]);
            }
        free(g), free(f);
        codec_free(c);
    }
    /* int8: -128 is not a level */
    memcpy(p, one, 4);
    p[4] = 1, p[5] = 0x80, p[6] = 0x7F;
    CHECK(dec("int8", 3, p, 7, 0) == -GC_ERR_CORRUPT, "int8: byte -128 rejected");
    p[5] = 0x81;
    CHECK(dec("int8", 3, p, 7, 0) == 0, "int8: byte -127 accepted");
    /* 3lc: runs that overflow n, runs over the padding byte, padding digits, the stream ending early */
    memcpy(p, one, 4);
    p[4] = 255; /* 14 zero bytes */
    CHECK(dec("3lc", 65, p, 5, 0) == -GC_ERR_CORRUPT, "3lc: run of 14 bytes for 13 rejected (overflow)");
    CHECK(dec("3lc", 70, p, 5, 0) == 0, "3lc: run of 14 bytes for n=70 accepted");
    CHECK(dec("3lc", 69, p, 5, 0) == -GC_ERR_CORRUPT, "3lc: zero run over a padded byte rejected");
    /* n = 69: L = 14, bytes 0..12 full, byte 13 holds values 13, 27, 41, 55 and one padding digit (P4) */
    p[4] = 254, p[5] = 117; /* 13 zero bytes, then digits 1 1 1 0 | pad 0 */
    CHECK(dec("3lc", 69, p, 6, 0) == 0, "3lc: 13 zero bytes + padded byte 117 accepted (n=69)");
    CHECK(dec("3lc", 68, p, 6, 0) == -GC_ERR_CORRUPT, "3lc: n=68: the run covers padded byte 12, rejected");
    p[5] = 118; /* padding digit 1 */
    CHECK(dec("3lc", 69, p, 6, 0) == -GC_ERR_CORRUPT, "3lc: padding digit 1 rejected");
    CHECK(dec("3lc", 69, p, 5, 0) == -GC_ERR_TRUNCATED, "3lc: stream ending before n is TRUNCATED");
    p[5] = 117, p[6] = 121;
    CHECK(dec("3lc", 69, p, 7, 0) == -GC_ERR_OVERSIZED, "3lc: bytes after the last value are OVERSIZED");
    /* n = 6: L = 2, values 6..9 are padding: byte 0 holds 0, 2, 4 + padding in P3 and P4 */
    p[4] = 120, p[5] = 117; /* 1 1 1 1 0: P3 digit 1 */
    CHECK(dec("3lc", 6, p, 6, 0) == -GC_ERR_CORRUPT, "3lc: padding digit in partition 3 rejected (n=6)");
    CHECK(dec("3lc", 8, p, 6, 0) == 0, "3lc: the same bytes valid for n=8");
    /* stoch3: no run codes, same padding rule */
    memcpy(p, one, 4);
    p[4] = 243;
    CHECK(dec("stoch3", 5, p, 5, 0) == -GC_ERR_CORRUPT, "stoch3: byte 243 rejected (no zero runs)");
    p[4] = 242;
    CHECK(dec("stoch3", 5, p, 5, 0) == 0, "stoch3: byte 242 accepted");
    p[4] = 1; /* 0 0 0 0 1 -> last digit is padding for n=4 */
    CHECK(dec("stoch3", 4, p, 5, 0) == -GC_ERR_CORRUPT, "stoch3: padding digit rejected");
    /* terngrad: code 3, padding codes */
    memcpy(p, one, 4);
    p[4] = 0x03 << 4;
    CHECK(dec("terngrad", 4, p, 5, 0) == -GC_ERR_CORRUPT, "terngrad: code 3 rejected");
    p[4] = 0x01 << 6;
    CHECK(dec("terngrad", 3, p, 5, 0) == -GC_ERR_CORRUPT, "terngrad: nonzero padding code rejected");
    CHECK(dec("terngrad", 4, p, 5, 0) == 0, "terngrad: same byte valid for n=4");
    /* onebit: padding bits, pos < 0, neg > 0 */
    memcpy(p, one, 4);
    memcpy(p + 4, neg, 4);
    p[8] = 0x80;
    CHECK(dec("onebit", 7, p, 9, 0) == -GC_ERR_CORRUPT, "onebit: padding bit rejected");
    CHECK(dec("onebit", 8, p, 9, 0) == 0, "onebit: same byte valid for n=8");
    memcpy(p + 4, one, 4);
    CHECK(dec("onebit", 8, p, 9, 0) == -GC_ERR_CORRUPT, "onebit: positive 'negative mean' rejected");
    memcpy(p + 4, mzero, 4);
    CHECK(dec("onebit", 8, p, 9, 0) == 0, "onebit: -0 negative mean accepted");
    memcpy(p, neg, 4);
    CHECK(dec("onebit", 8, p, 9, 0) == -GC_ERR_CORRUPT, "onebit: negative 'non-negative mean' rejected");
    /* fp16 accepts every bit pattern of the right length */
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(0xF0 + i);
    CHECK(dec("fp16", 4, p, 8, 0) == 0 && dec("fp16", 4, p, 7, 0) == -GC_ERR_TRUNCATED &&
              dec("fp16", 3, p, 8, 0) == -GC_ERR_OVERSIZED,
          "fp16: length checks");
}

#include <time.h>
static double secs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void) {
    double t0 = secs();
    test_parallel_identical();
    double t1 = secs();
    test_3lc_model();
    double t2 = secs();
    test_truncation_corruption();
    double t3 = secs();
    test_impossible_fields();
    printf("  times: parallel %.2fs, 3lc model %.2fs, truncation/corruption %.2fs\n", t1 - t0, t2 - t1, t3 - t2);
    TEST_END();
}
