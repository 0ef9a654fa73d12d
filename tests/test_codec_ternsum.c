/* ternsum (compress/ternsum.c): TernGrad's pull of the average of n ternary
 * gradients in 2n+1 levels (TernGrad section 3.1). Golden frames worked by
 * hand from docs/FORMAT.md section 14, the digits per word for several n,
 * the exactness that the exchange relies on (the pull keeps the sum of the
 * ternary values of every position), round-trip bounds
 * on arbitrary input, accumulation, and every rejection of the decoder. */
#include <stdint.h>
#include <string.h>

#include "common/rng.h"
#include "compress/codec.h"
#include "tests/test.h"

static Codec *mk(const char *spec) {
    CodecSpec s;
    char err[256];
    if (codec_parse(&s, spec, err, sizeof err)) {
        printf("bad spec %s: %s\n", spec, err);
        exit(1);
    }
    return codec_new(&s);
}

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* payload of one frame against want; the frame then decodes to dec */
static void golden(const char *spec, const float *x, size_t n, const float *scalar, const uint8_t *want,
                   size_t want_len, const float *dec, const char *what) {
    Codec *c = mk(spec);
    uint8_t f[256];
    float repr[64], y[64];
    CodecSide side = {.scalar = scalar, .repr = repr};
    int64_t len = codec_encode(c, f, sizeof f, x, n, &side);
    int same = len == (int64_t)(CODEC_HEADER_SIZE + want_len) && !memcmp(f + CODEC_HEADER_SIZE, want, want_len);
    CHECK(same, "golden %s: %lld bytes", what, (long long)len);
    if (!same && len > CODEC_HEADER_SIZE)
        for (int64_t i = 0; i < len - CODEC_HEADER_SIZE; i++) printf(" %02x", f[CODEC_HEADER_SIZE + i]);
    CHECK(codec_decode(c, y, n, f, (size_t)(len > 0 ? len : 0)) == 0, "golden %s decodes", what);
    int ok = 1;
    for (size_t i = 0; i < n; i++) ok &= bits(y[i]) == bits(dec[i]) && bits(repr[i]) == bits(dec[i]);
    CHECK(ok, "golden %s: decoded values and repr", what);
    codec_free(c);
}

static void test_golden(void) {
    {
        /* n = 2, base 5, shared scalar 1: levels rint(2x) = 1 -2 0 2, digits 3 0 2 4,
         * word 3 + 0*5 + 2*25 + 4*125 = 553 = 0x229 */
        const float x[4] = {0.5f, -1.0f, 0.0f, 1.0f}, s = 1.0f;
        const uint8_t want[16] = {0x00, 0x00, 0x80, 0x3f, 2, 0, 0, 0, 0x29, 0x02, 0, 0, 0, 0, 0, 0};
        golden("ternsum:n=2", x, 4, &s, want, sizeof want, x, "n=2 with a shared scalar");
    }
    {
        /* n = 4, base 9, s = max|x| = 3: levels rint(4x/3) = 4 -2 1, digits 8 2 5,
         * word 8 + 2*9 + 5*81 = 431 = 0x1af; decoded (L*3)/4 */
        const float x[3] = {3.0f, -1.5f, 0.8f}, dec[3] = {3.0f, -1.5f, 0.75f};
        const uint8_t want[16] = {0x00, 0x00, 0x40, 0x40, 4, 0, 0, 0, 0xaf, 0x01, 0, 0, 0, 0, 0, 0};
        golden("ternsum", x, 3, NULL, want, sizeof want, dec, "n=4, scalar max|x|, 0.8 -> 0.75");
    }
    {
        /* n = 1 (3 levels), 40 digits per word: 41 values take two words; the
         * second holds value 40 alone. x = 1 0 0 ... 0 -1: digits 2 1 1 ... 1 0,
         * word 0 = 2 + sum_{j=1}^{39} 3^j = 2 + (3^40 - 3)/2, word 1 = 0 */
        float x[41];
        for (int i = 0; i < 41; i++) x[i] = 0.0f;
        x[0] = 1.0f;
        x[40] = -1.0f;
        uint64_t p40 = 1;
        for (int j = 0; j < 40; j++) p40 *= 3;
        uint64_t w0 = 2 + (p40 - 3) / 2;
        uint8_t want[24] = {0x00, 0x00, 0x80, 0x3f, 1, 0, 0, 0};
        for (int b = 0; b < 8; b++) want[8 + b] = (uint8_t)(w0 >> (8 * b));
        golden("ternsum:n=1", x, 41, NULL, want, sizeof want, x, "n=1: 40 digits per word, a last word of one");
    }
}

/* bytes per frame: 8 + 8 ceil(count / K), K the digits per word */
static void test_sizes(void) {
    const int ns[] = {1, 2, 4, 8, 16, 32767};
    const int K[] = {40, 27, 20, 15, 12, 4}; /* 3^40, 5^27, 9^20, 17^15, 33^12, 65535^4 < 2^64 < B^(K+1) */
    for (int i = 0; i < 6; i++) {
        char spec[64];
        snprintf(spec, sizeof spec, "ternsum:n=%d", ns[i]);
        Codec *c = mk(spec);
        float x[100] = {0};
        uint8_t f[1024];
        CodecSide side = {0};
        int64_t len = codec_encode(c, f, sizeof f, x, 100, &side);
        size_t want = CODEC_HEADER_SIZE + 8 + 8 * ((100 + (size_t)K[i] - 1) / (size_t)K[i]);
        CHECK(len == (int64_t)want && codec_max_frame(c, 100) == want, "n=%d: %d digits per word, %lld bytes for 100",
              ns[i], K[i], (long long)len);
        codec_free(c);
    }
}

/* The exchange's parameter server averages N ternary frames that share the
 * scalar s: decode the first, add the others (codec_decode_acc, weight 1),
 * multiply by 1/N. For scalars whose average stays a normal float the pull is
 * lossless: the encoder recovers each value's
 * sum k of ternary values exactly, for every combination and a range of
 * scalars, and decodes it to k s / N rounded once; that differs from the server's own
 * float average by at most one rounding (the order of its additions shows:
 * (s + s) + s - s is not always 2s in floats). */
static void test_exact_average(void) {
    Rng r;
    rng_init(&r, 5, 0);
    int bad = 0, far = 0, cases = 0;
    for (int N = 1; N <= 4; N++) {
        int combos = 1;
        for (int k = 0; k < N; k++) combos *= 3;
        for (int trial = 0; trial < 300; trial++) {
            float s = ldexpf(1.0f + rng_uniform(&r), (int)rng_below(&r, 200) - 120);
            if (trial == 0) s = 0x1.fffffep+127f / 4; /* large: N s stays finite */
            if (trial == 1) s = 0x1p-122f; /* small: s / N is still a normal float (below, the server's
                                              float average itself loses the sum, not the pull) */
            float avg[81], exact[81];
            for (int c = 0; c < combos; c++) {
                int code = c, k = 0;
                float a = 0;
                for (int w = 0; w < N; w++, code /= 3) {
                    float t = (float)(code % 3 - 1) * s;
                    a = w == 0 ? t : a + 1.0f * t;
                    k += code % 3 - 1;
                }
                avg[c] = a * (1.0f / (float)N);
                exact[c] = (float)((double)k * s / N);
            }
            char spec[32];
            snprintf(spec, sizeof spec, "ternsum:n=%d", N);
            Codec *c = mk(spec);
            uint8_t f[1024];
            float y[81];
            CodecSide side = {.scalar = &s};
            int64_t len = codec_encode(c, f, sizeof f, avg, (size_t)combos, &side);
            if (len < 0 || codec_decode(c, y, (size_t)combos, f, (size_t)len) != 0) bad += combos;
            else
                for (int k = 0; k < combos; k++) {
                    bad += bits(y[k]) != bits(exact[k]);
                    uint32_t d = bits(y[k]) > bits(avg[k]) ? bits(y[k]) - bits(avg[k]) : bits(avg[k]) - bits(y[k]);
                    far += d > 1;
                }
            cases += combos;
            codec_free(c);
        }
    }
    CHECK(bad == 0, "the pull of an average of N <= 4 ternary frames keeps every sum: %d of %d values differ", bad,
          cases);
    CHECK(far == 0, "and is within one float step of the server's own average: %d of %d further", far, cases);
}

/* arbitrary input: within half a level of x (s / 2n, plus the float rounding of
 * the level arithmetic), repr == decode, accumulation */
static void test_roundtrip(void) {
    Rng r;
    rng_init(&r, 9, 1);
    const int ns[] = {1, 3, 4, 7, 64};
    for (int i = 0; i < 5; i++) {
        char spec[32];
        snprintf(spec, sizeof spec, "ternsum:n=%d", ns[i]);
        Codec *c = mk(spec);
        size_t n = 1000 + 37 * (size_t)i;
        float x[1200], y[1200], repr[1200], acc[1200];
        for (size_t k = 0; k < n; k++) x[k] = rng_normal(&r) * 1e-3f;
        uint8_t f[16384];
        CodecSide side = {.repr = repr};
        int64_t len = codec_encode(c, f, sizeof f, x, n, &side);
        CHECK(len > 0 && codec_decode(c, y, n, f, (size_t)len) == 0, "n=%d round trip", ns[i]);
        float s = get_f32(f + CODEC_HEADER_SIZE);
        double worst = 0;
        int same = 1;
        for (size_t k = 0; k < n; k++) {
            double e = fabs((double)x[k] - y[k]);
            worst = e > worst ? e : worst;
            same &= bits(y[k]) == bits(repr[k]);
            acc[k] = 1.0f;
        }
        CHECK(worst <= s / (2.0 * ns[i]) * (1 + 1e-5) && same, "n=%d: max error %g <= s/2n = %g, repr == decode",
              ns[i], worst, s / (2.0 * ns[i]));
        CHECK(codec_decode_acc(c, acc, n, 0.5f, f, (size_t)len) == 0, "n=%d accumulate", ns[i]);
        int ok = 1;
        for (size_t k = 0; k < n; k++) ok &= acc[k] == 1.0f + 0.5f * y[k];
        CHECK(ok, "n=%d: out += 0.5 x decoded", ns[i]);
        codec_free(c);
    }
}

/* every rejection of docs/FORMAT.md section 14, and bad encoder input */
static void test_bad(void) {
    Codec *c = mk("ternsum"), *c8 = mk("ternsum:n=8");
    float x[25], y[25];
    for (int i = 0; i < 25; i++) y[i] = 7.0f;
    for (int i = 0; i < 25; i++) x[i] = (float)(i % 9 - 4);
    uint8_t f[256], g[256];
    CodecSide side = {0};
    int64_t len = codec_encode(c, f, sizeof f, x, 25, &side); /* two words: 20 + 5 values */
    CHECK(len == CODEC_HEADER_SIZE + 8 + 16, "25 values in two words (%lld bytes)", (long long)len);
    const Codec *dc = c;
    const uint8_t *p = f + CODEC_HEADER_SIZE;
    size_t pl = (size_t)len - CODEC_HEADER_SIZE;
#define DEC(buf, l, fl) dc->spec.ops->decode((Codec *)dc, y, 25, 1.0f, 0, (buf), (l), (fl))
    CHECK(DEC(p, pl, 0) == 0, "the frame decodes");
    CHECK(DEC(p, pl, 1) == -GC_ERR_CORRUPT, "a flag");
    CHECK(DEC(p, pl - 1, 0) == -GC_ERR_TRUNCATED && DEC(p, 7, 0) == -GC_ERR_TRUNCATED, "short payloads");
    memcpy(g, p, pl);
    g[pl] = 0;
    CHECK(DEC(g, pl + 1, 0) == -GC_ERR_OVERSIZED, "a trailing byte");
    const uint32_t badscal[] = {0xBF800000u, 0x80000000u, 0x7F800000u, 0x7FC00000u};
    for (int i = 0; i < 4; i++) {
        memcpy(g, p, pl);
        put_u32(g, badscal[i]);
        CHECK(DEC(g, pl, 0) == -GC_ERR_CORRUPT, "scalar %08x", badscal[i]);
    }
    memcpy(g, p, pl);
    put_u16(g + 4, 8);
    CHECK(DEC(g, pl, 0) == -GC_ERR_CORRUPT, "a frame of n=8 to an n=4 decoder");
    CHECK(c8->spec.ops->decode(c8, y, 25, 1.0f, 0, p, pl, 0) == -GC_ERR_CORRUPT, "a frame of n=4 to an n=8 decoder");
    memcpy(g, p, pl);
    put_u16(g + 6, 1);
    CHECK(DEC(g, pl, 0) == -GC_ERR_CORRUPT, "reserved field");
    uint64_t p20 = 1, p5 = 1;
    for (int j = 0; j < 20; j++) p20 *= 9;
    for (int j = 0; j < 5; j++) p5 *= 9;
    const uint64_t w0[] = {p20, UINT64_MAX}, w1[] = {p5, p5 + 1000};
    for (int i = 0; i < 2; i++) {
        memcpy(g, p, pl);
        for (int b = 0; b < 8; b++) g[8 + b] = (uint8_t)(w0[i] >> (8 * b));
        CHECK(DEC(g, pl, 0) == -GC_ERR_CORRUPT, "a full word >= 9^20 (%llu)", (unsigned long long)w0[i]);
        memcpy(g, p, pl);
        for (int b = 0; b < 8; b++) g[16 + b] = (uint8_t)(w1[i] >> (8 * b));
        CHECK(DEC(g, pl, 0) == -GC_ERR_CORRUPT, "a last word of 5 digits >= 9^5 (%llu)", (unsigned long long)w1[i]);
    }
    int untouched = 1;
    for (int i = 0; i < 25; i++) y[i] = 7.0f;
    memcpy(g, p, pl);
    for (int b = 0; b < 8; b++) g[16 + b] = (uint8_t)(p5 >> (8 * b));
    DEC(g, pl, 0);
    for (int i = 0; i < 25; i++) untouched &= y[i] == 7.0f;
    CHECK(untouched, "a rejected frame writes nothing (the bad word is the last)");
#undef DEC
    float nanx[3] = {1.0f, NAN, 0.0f}, infs = INFINITY, negs = -1.0f;
    CHECK(codec_encode(c, f, sizeof f, nanx, 3, &side) == -GC_ERR_PARAM, "NaN input");
    CodecSide s1 = {.scalar = &infs}, s2 = {.scalar = &negs};
    CHECK(codec_encode(c, f, sizeof f, x, 3, &s1) == -GC_ERR_PARAM && codec_encode(c, f, sizeof f, x, 3, &s2) ==
                                                                          -GC_ERR_PARAM,
          "an infinite or negative shared scalar");
    CHECK(codec_encode(c, f, CODEC_HEADER_SIZE + 8 + 8, x, 25, &side) == -GC_ERR_NOSPACE, "too small a buffer");
    codec_free(c);
    codec_free(c8);
}

int main(void) {
    test_golden();
    test_sizes();
    test_exact_average();
    test_roundtrip();
    test_bad();
    TEST_END();
}
