/* The body shared by the dense codec fuzz targets (fuzz_fp16.c, fuzz_int8.c,
 * fuzz_terngrad.c, fuzz_stoch3.c, fuzz_3lc.c, fuzz_onebit.c, fuzz_ternsum.c). Each defines
 * FUZZ_CODEC (a codec spec) and includes this file.
 *
 * The frame CRC would stop a fuzzer at the header, so the input goes to the
 * codec's own decoder as a payload:
 *   byte 0-1  n = u16 % 4097 (values to decode)
 *   byte 2    bit 0: accumulate (out += w * decoded, w = 0.5)
 *             bit 1: nonzero flags (1 << (byte 3 & 15)), which must be rejected
 *   byte 3    flag selector; also the seed of the round trip
 *   byte 4..  the payload
 * Properties checked (abort() on violation, so libFuzzer reports a crash):
 *   - decode returns 0 or a negative GcError, never reads or writes out of
 *     bounds (ASan), and leaves the output untouched when it fails;
 *   - nonzero flags are rejected;
 *   - 3lc (s = 1), fp16 and ternsum: decode -> encode -> decode gives the same
 *     values (ternsum: when the decoded values keep their levels, i.e. the
 *     frame's scalar is max|decoded|);
 *   - round trip of the payload bytes read as floats (non-finite ones set to 0,
 *     at most 4096): encode, decode, repr == decode bit for bit, and the
 *     codec's bound (fp16: the correctly rounded half; int8: half a level;
 *     3lc: m/2; terngrad/stoch3: 0 or +-s with the sign of x; onebit: the
 *     mean of x's side; ternsum: half a level, s / 2n).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"
#include "compress/half.h"

static Codec *fuzz_codec(void) {
    static Codec *c;
    if (!c) {
        CodecSpec s;
        char err[256];
        if (codec_parse(&s, FUZZ_CODEC, err, sizeof err) != 0) abort();
        c = codec_new(&s);
    }
    return c;
}

static uint32_t fz_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static int fz_same(float a, float b) { return fz_bits(a) == fz_bits(b) || (isnan(a) && isnan(b)); }

static void fuzz_decode(Codec *c, const uint8_t *data, size_t size) {
    size_t n = get_u16(data) % 4097;
    int acc = data[2] & 1;
    uint16_t flags = (data[2] & 2) ? (uint16_t)(1u << (data[3] & 15)) : 0;
    const uint8_t *p = data + 4;
    size_t len = size - 4;
    float *out = malloc(4 * n + 4);
    for (size_t i = 0; i < n; i++) out[i] = 42.0f;
    int rc = c->spec.ops->decode(c, out, n, 0.5f, acc, p, len, flags);
    if (rc > 0) abort();
    if (flags && rc == 0) abort(); /* no dense codec defines a flag */
    if (rc < 0)
        for (size_t i = 0; i < n; i++)
            if (fz_bits(out[i]) != fz_bits(42.0f)) abort(); /* a failed decode wrote */
    int again = !strcmp(FUZZ_CODEC, "3lc") || !strcmp(FUZZ_CODEC, "fp16");
    if (!strcmp(FUZZ_CODEC, "ternsum") && rc == 0 && n > 0) {
        /* re-encoding uses max|decoded| as its scalar: the same levels when that is the frame's */
        float m = 0;
        for (size_t i = 0; i < n; i++) m = fabsf(out[i]) > m ? fabsf(out[i]) : m;
        again = m == get_f32(p) && isfinite(4.0f * m);
    }
    if (rc == 0 && !acc && again) {
        /* idempotence: the decoded values are exactly representable, so they re-encode to themselves */
        size_t cap = codec_max_frame(c, n);
        uint8_t *f = malloc(cap);
        float *y = malloc(4 * n + 4);
        int64_t fl = codec_encode(c, f, cap, out, n, NULL);
        if (fl < 0 || codec_decode(c, y, n, f, (size_t)fl) != 0) abort();
        for (size_t i = 0; i < n; i++) {
            int ok = !strcmp(FUZZ_CODEC, "fp16") ? fz_same(y[i], out[i]) : y[i] == out[i];
            if (!ok) abort();
        }
        free(f);
        free(y);
    }
    free(out);
}

static void fuzz_roundtrip(Codec *c, const uint8_t *data, size_t size) {
    size_t n = (size - 4) / 4;
    if (n > 4096) n = 4096;
    float *x = malloc(4 * n + 4), *y = malloc(4 * n + 4), *r = malloc(4 * n + 4);
    int keep_nonfinite = !strcmp(FUZZ_CODEC, "fp16");
    for (size_t i = 0; i < n; i++) {
        float v = get_f32(data + 4 + 4 * i);
        x[i] = keep_nonfinite || isfinite(v) ? v : 0.0f;
    }
    CodecSide side;
    memset(&side, 0, sizeof side);
    side.seed = data[3];
    side.threads = 1;
    side.repr = r;
    size_t cap = codec_max_frame(c, n);
    uint8_t *f = malloc(cap);
    int64_t fl = codec_encode(c, f, cap, x, n, &side);
    if (fl == -GC_ERR_PARAM) goto done; /* e.g. 3lc: max|x| * s overflows */
    if (fl < 0) abort();
    if (codec_decode(c, y, n, f, (size_t)fl) != 0) abort();
    if (n && memcmp(y, r, 4 * n) != 0) abort(); /* repr == decode */
    const uint8_t *p = f + CODEC_HEADER_SIZE;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)x[i] - (double)y[i]);
        int ok;
        if (!strcmp(FUZZ_CODEC, "fp16")) {
            ok = fz_same(y[i], half_to_float(half_from_float(x[i])));
        } else if (!strcmp(FUZZ_CODEC, "int8")) {
            ok = e <= (double)get_f32(p) * (0.5 + 1e-5); /* half a level, + rounding of q * scale */
        } else if (!strncmp(FUZZ_CODEC, "3lc", 3)) {
            float m = get_f32(p);
            ok = e <= 0.5 * (double)m && (y[i] == 0 || fabsf(y[i]) == m);
        } else if (!strcmp(FUZZ_CODEC, "ternsum")) {
            ok = e <= (double)get_f32(p) / (2.0 * get_u16(p + 4)) * (1 + 1e-5) + 1e-45;
        } else if (!strcmp(FUZZ_CODEC, "onebit")) {
            ok = y[i] == (x[i] >= 0 ? get_f32(p) : get_f32(p + 4));
        } else {
            float s = get_f32(p);
            ok = y[i] == 0 || (fabsf(y[i]) == s && (y[i] > 0) == (x[i] > 0));
        }
        if (!ok) abort();
    }
done:
    free(f);
    free(x);
    free(y);
    free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    Codec *c = fuzz_codec();
    fuzz_decode(c, data, size);
    fuzz_roundtrip(c, data, size);
    return 0;
}
