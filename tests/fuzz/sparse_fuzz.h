/* Shared body of the fuzz targets of the sparse codecs (fuzz_topk.c,
 * fuzz_dgc.c, fuzz_sbc.c). Each target defines SPARSE_FUZZ_CODEC and includes
 * this file once.
 *
 * The frame CRC would stop a fuzzer at the header, so the input is a codec
 * payload given straight to ops->decode, behind a 3-byte prefix:
 *   byte 0   bit 0: 0 = decode the payload, 1 = round trip (see below)
 *            bit 1: accumulate (out += 0.5 * decoded)
 *            bit 2: pass nonzero flags (must be rejected)
 *            bit 3: round trip on a long tensor: the values tiled (with a
 *                   slowly changing scale) to 8193 + 16 * byte 2 elements, so
 *                   the sampled selection path runs
 *   byte 1-2 decode: n = u16 (little-endian) mod 4097
 *            round trip: byte 1 sets the density, (byte1 + 1) / 256
 *   rest     decode: the payload; round trip: float32 values x (n = rest/4, <= 4096)
 * Properties checked (abort() on violation, which fails the replay test):
 *   decode: returns 0 or a negative GcError; on success, encoding the decoded
 *           vector again (at density = count/n) and decoding that gives the
 *           same vector (the payload was canonical enough to round trip);
 *   round trip: encode succeeds or rejects non-finite input; decode(frame) is
 *           bit-identical to CodecSide.repr; mask[i] == (repr[i] != 0); the
 *           mask is the definition's top-k (count min(k, nonzero keys), every
 *           selected key >= every other key, ties at the threshold taken
 *           lowest index first), for sbc on the side the frame sent.
 * Tests/fuzz/gen_sparse_corpus.c writes the seed corpus. */
#ifndef GC_SPARSE_FUZZ_H
#define GC_SPARSE_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"
#include "compress/select.h"

#define FUZZ_MAX_N 4096

static Codec *fuzz_codec(void) {
    static Codec *c;
    if (!c) {
        CodecSpec s;
        codec_spec_default(&s, codec_find(SPARSE_FUZZ_CODEC));
        c = codec_new(&s);
    }
    return c;
}

static void fuzz_fail(const char *what) {
    fprintf(stderr, "fuzz_%s: property violated: %s\n", SPARSE_FUZZ_CODEC, what);
    abort();
}

/* mask[n] is exactly the top-k of x by key mode (see the header) */
static void fuzz_check_topk(const uint8_t *mask, const float *x, size_t n, size_t k, SelectKey mode) {
    size_t cnt = 0, nz = 0;
    uint32_t lo_sel = UINT32_MAX, hi_rest = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t key = select_key(x[i], mode);
        nz += key != 0;
        if (mask[i]) {
            cnt++;
            if (key == 0) fuzz_fail("a zero key was selected");
            if (key < lo_sel) lo_sel = key;
        } else if (key > hi_rest) {
            hi_rest = key;
        }
    }
    if (cnt != (k < nz ? k : nz)) fuzz_fail("selected count != min(k, nonzero keys)");
    if (cnt && hi_rest > lo_sel) fuzz_fail("an unselected key is larger than a selected one");
    if (cnt && hi_rest == lo_sel) { /* ties at the threshold: the selected ones come first */
        int seen_unselected = 0;
        for (size_t i = 0; i < n; i++) {
            if (select_key(x[i], mode) != lo_sel) continue;
            if (!mask[i]) seen_unselected = 1;
            else if (seen_unselected) fuzz_fail("tie at the threshold not broken by lowest index");
        }
    }
}

/* encode x (n) at density d, check repr/mask against decode; returns frame length or negative */
static int64_t fuzz_roundtrip(Codec *c, const float *x, size_t n, double d, float *dec_out) {
    size_t cap = codec_max_frame(c, n);
    uint8_t *frame = malloc(cap);
    float *repr = malloc((n + 1) * sizeof *repr);
    uint8_t *mask = malloc(n + 1);
    CodecSide side;
    memset(&side, 0, sizeof side);
    side.density = d;
    side.repr = repr;
    side.mask = mask;
    int64_t len = codec_encode(c, frame, cap, x, n, &side);
    if (len == -GC_ERR_PARAM) goto done; /* non-finite input */
    if (len < 0) fuzz_fail("encode failed");
    if (codec_decode(c, dec_out, n, frame, (size_t)len) != 0) fuzz_fail("own frame rejected");
    if (memcmp(dec_out, repr, n * sizeof *repr) != 0) fuzz_fail("repr != decode");
    for (size_t i = 0; i < n; i++)
        if (mask[i] != (repr[i] != 0.0f)) fuzz_fail("mask != nonzeros of repr");
    size_t k = select_count(d > 0 ? d : c->spec.v[0], n);
    if (c->spec.ops->id != CODEC_SBC) {
        fuzz_check_topk(mask, x, n, k, SELECT_MAG);
    } else {
        size_t m = 0;
        float mu = 0;
        for (size_t i = 0; i < n; i++)
            if (mask[i]) {
                m++;
                mu = repr[i];
            }
        if (m) fuzz_check_topk(mask, x, n, k, mu > 0 ? SELECT_POS : SELECT_NEG);
    }
done:
    free(frame);
    free(repr);
    free(mask);
    return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    Codec *c = fuzz_codec();
    int mode = data[0];
    int acc = (mode >> 1) & 1;
    uint16_t flags = (mode & 4) ? (uint16_t)(data[1] | 1) : 0;
    const uint8_t *rest = data + 3;
    size_t rlen = size - 3;
    if (mode & 1) {
        size_t n0 = rlen / 4, n = n0;
        if (n > FUZZ_MAX_N) n = n0 = FUZZ_MAX_N;
        if ((mode & 8) && n0) n = SELECT_EXACT_MAX + 1 + 16 * (size_t)data[2];
        float *x = malloc((n + 1) * sizeof *x), *y = malloc((n + 1) * sizeof *y);
        if (n0) memcpy(x, rest, n0 * sizeof *x);
        for (size_t i = n0; i < n; i++) x[i] = x[i % n0] * (1.0f + (float)(i / n0) * 0x1p-12f);
        fuzz_roundtrip(c, x, n, (data[1] + 1) / 256.0, y);
        free(x);
        free(y);
        return 0;
    }
    size_t n = (size_t)(data[1] | (data[2] << 8)) % (FUZZ_MAX_N + 1);
    float *out = malloc((n + 1) * sizeof *out);
    for (size_t i = 0; i < n; i++) out[i] = 1.0f;
    int rc = c->spec.ops->decode(c, out, n, 0.5f, acc, rest, rlen, flags);
    if (rc > 0 || rc <= -GC_ERR_COUNT_) fuzz_fail("decode returned a value outside the error list");
    if (flags && rc == 0) fuzz_fail("nonzero flags accepted");
    if (rc == 0 && !acc) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) k += out[i] != 0.0f;
        float *y = malloc((n + 1) * sizeof *y);
        if (k && fuzz_roundtrip(c, out, n, (double)k / (double)n, y) < 0) fuzz_fail("decoded vector does not encode");
        if (k && memcmp(y, out, n * sizeof *y) != 0) fuzz_fail("decode(encode(decode(p))) != decode(p)");
        free(y);
    }
    free(out);
    return 0;
}

#endif
