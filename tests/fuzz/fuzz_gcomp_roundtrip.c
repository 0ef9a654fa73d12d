/* libFuzzer target: GCOMP round trips on arbitrary float bit patterns.
 *
 * Input layout:
 *   byte 0      n_theta = 1 + byte % 16
 *   byte 1      chunk = 64 * (1 + byte % 4)
 *   byte 2      every = 1 + byte % 3; bit 7 set = no levels (NULL)
 *   then 5 bytes per value (at most 4096): float32 little-endian, level byte (& 3)
 * Three frames are encoded (levels rotated each time, so the table is reused
 * or rebuilt), by a 1-thread and a 3-thread encoder, and decoded by one
 * decoder. Aborts unless: both encoders give the same bytes; decode == repr;
 * repr == the input with 6*level low mantissa bits cleared (exponent 0 -> zero
 * of the same sign, exponent 255 exact). Seeds: see fuzz_gcomp.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"

static Codec *rt_codec(int ntheta, int chunk, int every) {
    char text[128], err[128];
    CodecSpec s;
    snprintf(text, sizeof text, "gcomp:ntheta=%d,chunk=%d,every=%d", ntheta, chunk, every);
    if (codec_parse(&s, text, err, sizeof err) != 0) abort();
    return codec_new(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    int ntheta = 1 + data[0] % 16, chunk = 64 * (1 + data[1] % 4), every = 1 + (data[2] & 0x7F) % 3;
    int use_lv = !(data[2] & 0x80);
    size_t n = (size - 3) / 5;
    if (n > 4096) n = 4096;
    float *x = malloc((n + 1) * 4), *repr = malloc((n + 1) * 4), *y = malloc((n + 1) * 4);
    uint8_t *lv = malloc(n + 1), *lv0 = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = get_u32(data + 3 + 5 * i);
        memcpy(&x[i], &u, 4);
        lv0[i] = data[3 + 5 * i + 4] & 3;
    }
    Codec *e1 = rt_codec(ntheta, chunk, every), *e3 = rt_codec(ntheta, chunk, every), *d = rt_codec(8, 64, 1);
    size_t cap = codec_max_frame(e1, n);
    uint8_t *f1 = malloc(cap), *f3 = malloc(cap);
    for (int r = 0; r < 3; r++) {
        for (size_t i = 0; i < n; i++) lv[i] = (uint8_t)((lv0[i] + r) & 3);
        CodecSide s1 = {.levels = use_lv ? lv : NULL, .repr = repr, .threads = 1};
        CodecSide s3 = {.levels = use_lv ? lv : NULL, .threads = 3};
        int64_t l1 = codec_encode(e1, f1, cap, x, n, &s1), l3 = codec_encode(e3, f3, cap, x, n, &s3);
        if (l1 <= 0 || l1 != l3 || memcmp(f1, f3, (size_t)l1) != 0) abort();
        if (codec_decode(d, y, n, f1, (size_t)l1) != 0) abort();
        for (size_t i = 0; i < n; i++) {
            uint32_t u, a, b;
            memcpy(&u, &x[i], 4);
            memcpy(&a, &y[i], 4);
            memcpy(&b, &repr[i], 4);
            uint32_t e = (u >> 23) & 0xFF, L = use_lv ? lv[i] : 0;
            uint32_t want = e == 0 ? u & 0x80000000u : e == 0xFF ? u : u & ~((1u << (6 * L)) - 1);
            if (a != b || a != want) abort();
        }
    }
    codec_free(e1), codec_free(e3), codec_free(d);
    free(f1), free(f3), free(x), free(repr), free(y), free(lv), free(lv0);
    return 0;
}
