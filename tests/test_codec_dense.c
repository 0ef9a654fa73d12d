/* Dense codecs (fp16, int8, terngrad, stoch3, 3lc, onebit): payloads against
 * the PyTorch reference (tests/fixtures/codec_dense.bin), golden byte vectors
 * worked out by hand from the papers' definitions, round-trip bounds,
 * repr == decode, decode-accumulate, shared scalars and bad input. */
#include "tests/test.h"

#include <float.h>

#include "compress/half.h"
#include "tests/test_codec_dense.h"

static const char *const DENSE[] = {"fp16", "int8", "terngrad", "stoch3", "3lc", "onebit"};
#define NDENSE 6

/* ------------------------------------------------------------ fixtures --- */

static void test_fp16_fixture(const Dfx *fx) {
    DfxRec *rx = dfx_find(fx, "fp16.x"), *rh = dfx_find(fx, "fp16.h");
    if (!rx || !rh || rx->numel != rh->numel) {
        CHECK(0, "fixture has fp16.x and fp16.h of equal size");
        return;
    }
    size_t n = rx->numel;
    const float *x = rx->data;
    const int32_t *h = rh->data;
    Codec *c = dense_codec("fp16");
    int64_t len;
    uint8_t *f = dense_encode(c, x, n, NULL, &len);
    size_t bad = 0, badscalar = 0, baddec = 0;
    float *y = mallocCheck(4 * n);
    CHECK(f && codec_decode(c, y, n, f, (size_t)len) == 0, "fp16 fixture encodes and decodes");
    for (size_t i = 0; f && i < n; i++) {
        uint16_t got = get_u16(f + CODEC_HEADER_SIZE + 2 * i);
        if (got != (uint16_t)h[i]) {
            if (bad++ < 5) printf("  fp16 x=%.9g (0x%08x): got 0x%04x, torch 0x%04x\n", x[i], dense_bits_(x[i]), got, (uint16_t)h[i]);
        }
        if (half_from_float(x[i]) != (uint16_t)h[i]) badscalar++;
        /* decode: the half's value by its definition, in double */
        uint16_t hv = (uint16_t)h[i];
        int e = (hv >> 10) & 31, m = hv & 1023;
        double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
        if (hv & 0x8000) v = -v;
        if ((float)v != y[i] || signbit(y[i]) != signbit((float)v)) baddec++;
    }
    CHECK(bad == 0, "fp16 codec == torch .half() on %zu values (%zu differ)", n, bad);
    CHECK(badscalar == 0, "fp16 scalar half_from_float == torch (%zu differ)", badscalar);
    CHECK(baddec == 0, "fp16 decode == value of the half by definition (%zu differ)", baddec);
    printf("  fp16 fixture: %zu values, all bit-exact\n", n);
    free(y);
    free(f);
    codec_free(c);
}

/* payloads of int8, 3lc, terngrad, stoch3, onebit against the reference */
static void test_payload_fixtures(const Dfx *fx, const char *name) {
    int cases = 0, exact = 0;
    for (int k = 0;; k++) {
        char key[64];
        snprintf(key, sizeof key, "%s.%d.v", name, k);
        DfxRec *rv = dfx_find(fx, key);
        if (!rv) break;
        snprintf(key, sizeof key, "%s.%d.p", name, k);
        DfxRec *rp = dfx_find(fx, key);
        snprintf(key, sizeof key, "%s.%d.pay", name, k);
        DfxRec *ry = dfx_find(fx, key);
        const int32_t *v = rv->data;
        snprintf(key, sizeof key, "vec.%d", v[0]);
        DfxRec *rx = dfx_find(fx, key);
        if (!rp || !ry || !rx) {
            CHECK(0, "fixture case %s.%d complete", name, k);
            continue;
        }
        const float *x = rx->data, *p = rp->data;
        size_t n = rx->numel, want_len = (size_t)v[1];
        const uint8_t *want = ry->data;
        char spec[128];
        CodecSide side;
        memset(&side, 0, sizeof side);
        float shared = 0;
        int stochastic = 0;
        if (!strcmp(name, "3lc")) {
            snprintf(spec, sizeof spec, "3lc:s=%.9g", p[0]);
        } else if (!strcmp(name, "terngrad") || !strcmp(name, "stoch3")) {
            snprintf(spec, sizeof spec, "%s:c=%.9g", name, p[0]);
            side.seed = (uint64_t)p[1] + ((uint64_t)p[2] << 24);
            if (p[3] >= 0) {
                shared = p[3];
                side.scalar = &shared;
            }
            stochastic = 1;
        } else {
            snprintf(spec, sizeof spec, "%s", name);
        }
        Codec *c = dense_codec(spec);
        float *repr = mallocCheck(4 * n + 4);
        side.repr = repr;
        int64_t len;
        uint8_t *f = dense_encode(c, x, n, &side, &len);
        cases++;
        if (!f) {
            CHECK(0, "%s case %d (n=%zu) encodes: %s", spec, k, n, gc_strerror((int)len));
            free(repr);
            codec_free(c);
            continue;
        }
        const uint8_t *got = f + CODEC_HEADER_SIZE;
        size_t got_len = (size_t)len - CODEC_HEADER_SIZE;
        int same = got_len == want_len && memcmp(got, want, want_len) == 0;
        if (!same && stochastic && got_len == want_len) {
            /* sigma is summed in a different order than torch's: allow the
             * scalar to differ in the last bits, require the codes exact */
            float gs = get_f32(got), ws = get_f32(want);
            same = fabsf(gs - ws) <= 1e-6f * fabsf(ws) && memcmp(got + 4, want + 4, want_len - 4) == 0;
            if (same) printf("  %s case %d: scalar %.9g vs torch %.9g (codes exact)\n", spec, k, gs, ws);
        } else if (!same && !strcmp(name, "onebit") && got_len == want_len) {
            float gp = get_f32(got), wp = get_f32(want), gn = get_f32(got + 4), wn = get_f32(want + 4);
            same = fabsf(gp - wp) <= 1e-6f * fabsf(wp) && fabsf(gn - wn) <= 1e-6f * fabsf(wn) &&
                   memcmp(got + 8, want + 8, want_len - 8) == 0;
        }
        if (!same) {
            size_t at = 0;
            while (at < got_len && at < want_len && got[at] == want[at]) at++;
            printf("  %s case %d n=%zu: payload %zu bytes, torch %zu; first difference at byte %zu\n", spec, k, n,
                   got_len, want_len, at);
        }
        exact += same;
        CHECK(same, "%s case %d (n=%zu) payload == PyTorch reference", spec, k, n);
        float *y = mallocCheck(4 * n + 4);
        CHECK(codec_decode(c, y, n, f, (size_t)len) == 0 && memcmp(y, repr, 4 * n) == 0,
              "%s case %d: repr == decode, bit for bit", spec, k);
        free(y);
        free(f);
        free(repr);
        codec_free(c);
    }
    CHECK(cases > 0, "fixture has %s cases", name);
    printf("  %-8s %d fixture cases, %d match the PyTorch reference\n", name, cases, exact);
}

/* -------------------------------------------------------------- golden --- */

/* encode x with spec (seed 0, threads 1) and compare the payload with want */
static void golden(const char *spec, const float *x, size_t n, const uint8_t *want, size_t want_len,
                   const char *what) {
    Codec *c = dense_codec(spec);
    CodecSide side;
    memset(&side, 0, sizeof side);
    side.threads = 1;
    int64_t len;
    uint8_t *f = dense_encode(c, x, n, &side, &len);
    int ok = f && (size_t)len == CODEC_HEADER_SIZE + want_len && memcmp(f + CODEC_HEADER_SIZE, want, want_len) == 0;
    if (!ok && f) {
        printf("  %s: got", what);
        for (int64_t i = CODEC_HEADER_SIZE; i < len; i++) printf(" %02x", f[i]);
        printf("\n  %s: want", what);
        for (size_t i = 0; i < want_len; i++) printf(" %02x", want[i]);
        printf("\n");
    }
    CHECK(ok, "golden %s", what);
    /* and the hand-made payload decodes back through the frame */
    if (f) {
        float *y = mallocCheck(4 * n + 4);
        CHECK(codec_decode(c, y, n, f, (size_t)len) == 0, "golden %s decodes", what);
        free(y);
    }
    free(f);
    codec_free(c);
}

/* decode a hand-made payload with the codec's decoder; returns rc */
static int decode_payload(const char *spec, float *out, size_t n, const uint8_t *p, size_t len, uint16_t flags) {
    Codec *c = dense_codec(spec);
    int rc = c->spec.ops->decode(c, out, n, 1.0f, 0, p, len, flags);
    codec_free(c);
    return rc;
}

static void test_golden(void) {
    /* 3LC 3.2: trits -1 0 1 1 0 -> digits 0 1 2 2 1 -> 0*81 + 1*27 + 2*9 + 2*3 + 1 = 52; m = max|x| * 1 = 1.0 */
    {
        float x[5] = {-1, 0, 1, 1, 0};
        uint8_t want[] = {0x00, 0x00, 0x80, 0x3F, 52};
        golden("3lc", x, 5, want, sizeof want, "3lc base-3^5 of one group (-1 0 1 1 0 -> 52)");
    }
    /* 3LC 3.2 step 5: n = 10, L = 2, P_k = values 2k, 2k+1: byte j holds values j, 2+j, 4+j, 6+j, 8+j
     * x0 = 1, x9 = -1: byte0 = d(x0) d(x2) d(x4) d(x6) d(x8) = 2 1 1 1 1 = 162+27+9+3+1 = 202
     *                  byte1 = d(x1) d(x3) d(x5) d(x7) d(x9) = 1 1 1 1 0 = 81+27+9+3+0 = 120 */
    {
        float x[10] = {1, 0, 0, 0, 0, 0, 0, 0, 0, -1};
        uint8_t want[] = {0x00, 0x00, 0x80, 0x3F, 202, 120};
        golden("3lc", x, 10, want, sizeof want, "3lc five-partition layout (n=10)");
    }
    /* 3LC 3.2 step 4: n = 3 zeros, padded with two digits 0: 1 1 1 0 0 = 81+27+9 = 117; m = 0 */
    {
        float x[3] = {0, 0, 0};
        uint8_t want[] = {0, 0, 0, 0, 117};
        golden("3lc", x, 3, want, sizeof want, "3lc zero padding of a partial group (n=3 -> 117)");
    }
    /* 3LC 3.3: n = 100, L = 20, x0 = 1: byte0 = 2 1 1 1 1 = 202, bytes 1..19 are 121 (19 of them):
     * 14 -> 255, 5 -> 243 + 3 = 246 */
    {
        float x[100] = {1};
        uint8_t want[] = {0x00, 0x00, 0x80, 0x3F, 202, 255, 246};
        golden("3lc", x, 100, want, sizeof want, "3lc zero run of 19 -> 255 246");
    }
    /* a run of 15 -> 255 121 (a single 121 stays literal); a run of 2 -> 243; a run of 14 -> 255 */
    {
        float x[80] = {1};
        uint8_t want[] = {0x00, 0x00, 0x80, 0x3F, 202, 255, 121};
        golden("3lc", x, 80, want, sizeof want, "3lc zero run of 15 -> 255 121");
        float y[15] = {1};
        uint8_t want2[] = {0x00, 0x00, 0x80, 0x3F, 202, 243};
        golden("3lc", y, 15, want2, sizeof want2, "3lc zero run of 2 -> 243");
        float z[75] = {1};
        uint8_t want3[] = {0x00, 0x00, 0x80, 0x3F, 202, 255};
        golden("3lc", z, 75, want3, sizeof want3, "3lc zero run of 14 -> 255");
        float w[10] = {1};
        uint8_t want4[] = {0x00, 0x00, 0x80, 0x3F, 202, 121};
        golden("3lc", w, 10, want4, sizeof want4, "3lc zero run of 1 -> 121");
    }
    /* sparsity multiplier: s = 1.5, x = (1, 0.7, 0.75, -0.76): m = 1.5, m/2 = 0.75:
     * 1 -> 1, 0.7 -> 0, 0.75 -> 0 (a tie rounds to even), -0.76 -> -1; n=4 padded:
     * digits 2 1 1 0 | pad 0 = 162+27+9+0+0 = 198; m = 1.5 = 0x3FC00000 */
    {
        float x[4] = {1, 0.7f, 0.75f, -0.76f};
        uint8_t want[] = {0x00, 0x00, 0xC0, 0x3F, 198};
        golden("3lc:s=1.5", x, 4, want, sizeof want, "3lc s=1.5 rounds at m/2, ties to 0");
    }
    /* the decoder accepts non-canonical zero runs: 121 121 and 251 251 decode like 243 and 255 249 */
    {
        uint8_t a[] = {0x00, 0x00, 0x80, 0x3F, 202, 121, 121};
        uint8_t b[] = {0x00, 0x00, 0x80, 0x3F, 202, 243};
        float ya[15], yb[15];
        CHECK(decode_payload("3lc", ya, 15, a, sizeof a, 0) == 0 && decode_payload("3lc", yb, 15, b, sizeof b, 0) == 0 &&
                  memcmp(ya, yb, sizeof ya) == 0 && ya[0] == 1.0f && ya[1] == 0.0f,
              "3lc decoder: 121 121 == 243");
        uint8_t c2[] = {0x00, 0x00, 0x80, 0x3F, 202, 251, 251};          /* 10 + 10 */
        uint8_t d2[] = {0x00, 0x00, 0x80, 0x3F, 202, 255, 247};          /* 14 + 6 */
        float yc[105], yd[105];
        CHECK(decode_payload("3lc", yc, 105, c2, sizeof c2, 0) == 0 &&
                  decode_payload("3lc", yd, 105, d2, sizeof d2, 0) == 0 && memcmp(yc, yd, sizeof yc) == 0,
              "3lc decoder: 251 251 == 255 247 (paper's parallel coalescing accepted)");
    }
    /* TernGrad 2-bit packing: |x| = s everywhere gives P(b=1) = 1; codes 1 2 0 1 | 2 = +1 -1 0 +1 | -1:
     * byte0 = 1 | 2<<2 | 0<<4 | 1<<6 = 0x49, byte1 = 2 (unused codes 0); s = 1 */
    {
        float x[5] = {1, -1, 0, 1, -1};
        uint8_t want[] = {0x00, 0x00, 0x80, 0x3F, 0x49, 0x02};
        golden("terngrad:c=0", x, 5, want, sizeof want, "terngrad 2-bit layout");
        /* stoch3: digits 2 0 1 2 0 -> 162 + 0 + 9 + 6 + 0 = 177 */
        uint8_t want3[] = {0x00, 0x00, 0x80, 0x3F, 177};
        golden("stoch3", x, 5, want3, sizeof want3, "stoch3 base-3^5 layout");
    }
    /* TernGrad 3.3 clipping: x = (3, -1, 1, -1, 1, -1, 1, -1): mean 0.25, E[x^2] = 16/8 = 2,
     * sigma = sqrt(2 - 0.0625) = 1.3919; c = 0.5 -> thr = 0.69597 < 1 = min|x|: every |f(x)| = thr = s,
     * so every b = 1: codes 1 2 1 2 | 1 2 1 2 = 0x99 0x99, s = (float)(0.5 * sigma) */
    {
        float x[8] = {3, -1, 1, -1, 1, -1, 1, -1};
        float s = (float)(0.5 * sqrt(2.0 - 0.0625));
        uint8_t want[6];
        put_f32(want, s);
        want[4] = 0x99;
        want[5] = 0x99;
        golden("terngrad:c=0.5", x, 8, want, sizeof want, "terngrad clipping at c*sigma");
    }
    /* 1-bit: x >= 0 -> 1, LSB first: 1 -2 3 -4 0 -0 5 -6 | 7 -> bits 1 0 1 0 1 1 1 0 = 0x75, then 0x01;
     * pos = (1+3+0+0+5+7)/6, neg = (-2-4-6)/3 = -4 */
    {
        float x[9] = {1, -2, 3, -4, 0, -0.0f, 5, -6, 7};
        uint8_t want[10];
        put_f32(want, (float)(16.0 / 6.0));
        put_f32(want + 4, -4.0f);
        want[8] = 0x75;
        want[9] = 0x01;
        golden("onebit", x, 9, want, sizeof want, "onebit layout and means");
    }
    /* int8: max 127 -> scale 1; -63.5 ties to even -64 (0xC0); 0.5 -> 0; 1.5 -> 2; -127 -> 0x81 */
    {
        float x[5] = {127, -63.5f, 0.5f, 1.5f, -127};
        uint8_t want[] = {0x00, 0x00, 0x80, 0x3F, 0x7F, 0xC0, 0x00, 0x02, 0x81};
        golden("int8", x, 5, want, sizeof want, "int8 scale and round half to even");
    }
    /* fp16: 1 -> 3C00, -2 -> C000, 65504 -> 7BFF, 65520 -> 7C00 (inf), 2^-24 -> 0001,
     * 2^-25 -> 0000 (tie to even), 3*2^-25 -> 0002 (tie to even), 1 + 2^-11 -> 3C00 (tie to even) */
    {
        float x[8] = {1, -2, 65504, 65520, 0x1p-24f, 0x1p-25f, 0x3p-25f, 1.0f + 0x1p-11f};
        uint8_t want[] = {0x00, 0x3C, 0x00, 0xC0, 0xFF, 0x7B, 0x00, 0x7C,
                          0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x3C};
        golden("fp16", x, 8, want, sizeof want, "fp16 rounding and overflow");
    }
}

/* -------------------------------------------------------- round trips --- */

static void test_roundtrip(void) {
    static const size_t sizes[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000, 4099, 20483, 100003};
    int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    for (int d = 0; d < NDENSE; d++) {
        Codec *c = dense_codec(DENSE[d]);
        const char *nm = DENSE[d];
        size_t fails = 0, checks = 0;
        double worst = 0;
        for (int si = 0; si < nsizes; si++)
            for (int kind = 0; kind < 6; kind++) {
                size_t n = sizes[si];
                float *x = mallocCheck(4 * n + 4), *y = mallocCheck(4 * n + 4), *r = mallocCheck(4 * n + 4);
                dense_fill(x, n, 1000 + (uint64_t)si, kind);
                CodecSide side;
                memset(&side, 0, sizeof side);
                side.repr = r;
                side.seed = (uint64_t)si * 7 + (uint64_t)kind;
                int64_t len;
                uint8_t *f = dense_encode(c, x, n, &side, &len);
                checks++;
                if (!f || codec_decode(c, y, n, f, (size_t)len) != 0) {
                    fails++;
                    printf("  %s n=%zu kind %d: encode/decode failed (%s)\n", nm, n, kind,
                           f ? "decode" : gc_strerror((int)len));
                    free(x), free(y), free(r), free(f);
                    continue;
                }
                if (memcmp(y, r, 4 * n) != 0) {
                    fails++;
                    printf("  %s n=%zu kind %d: repr != decode\n", nm, n, kind);
                }
                const uint8_t *p = f + CODEC_HEADER_SIZE;
                for (size_t i = 0; i < n; i++) {
                    double e = fabs((double)x[i] - (double)y[i]), bound;
                    int ok = 1;
                    if (!strcmp(nm, "fp16")) {
                        ok = dense_bits_(y[i]) == dense_bits_(half_to_float(half_from_float(x[i])));
                        bound = 0;
                    } else if (!strcmp(nm, "int8")) {
                        bound = (double)get_f32(p) * (0.5 + 1e-5); /* half a level, + rounding of q * scale */
                        ok = e <= bound;
                    } else if (!strcmp(nm, "3lc")) {
                        float m = get_f32(p);
                        bound = m * 0.5; /* 3LC 3.1: max|Tin - Tout| <= m/2 */
                        ok = e <= bound && (y[i] == 0 || fabsf(y[i]) == m);
                    } else if (!strcmp(nm, "onebit")) {
                        float pos = get_f32(p), neg = get_f32(p + 4);
                        ok = y[i] == (x[i] >= 0 ? pos : neg);
                        bound = 0;
                    } else { /* terngrad, stoch3: 0 or +-s with the sign of x */
                        float s = get_f32(p);
                        ok = y[i] == 0 || (fabsf(y[i]) == s && (y[i] > 0) == (x[i] > 0));
                        bound = 0;
                    }
                    if (bound > 0 && e / bound > worst) worst = e / bound;
                    if (!ok) {
                        if (fails < 5)
                            printf("  %s n=%zu kind %d: value %zu: x=%.9g decoded %.9g\n", nm, n, kind, i, x[i], y[i]);
                        fails++;
                        break;
                    }
                }
                free(x), free(y), free(r), free(f);
            }
        CHECK(fails == 0, "%s round trips within bounds, repr == decode (%zu failures)", nm, fails);
        printf("  %-8s %zu round trips ok%s", nm, checks, worst > 0 ? "" : "\n");
        if (worst > 0) printf(", worst error / bound = %.4f\n", worst);
        codec_free(c);
    }
}

/* repr may be the input buffer itself (in-place error feedback) */
static void test_repr_inplace(void) {
    size_t n = 70001;
    float *x = mallocCheck(4 * n), *a = mallocCheck(4 * n), *b = mallocCheck(4 * n);
    for (int d = 0; d < NDENSE; d++) {
        Codec *c = dense_codec(DENSE[d]);
        dense_fill(x, n, 5, 1);
        memcpy(a, x, 4 * n);
        CodecSide side;
        memset(&side, 0, sizeof side);
        side.seed = 3;
        side.repr = b;
        int64_t l1, l2;
        uint8_t *f1 = dense_encode(c, x, n, &side, &l1);
        side.repr = a; /* == the input */
        uint8_t *f2 = dense_encode(c, a, n, &side, &l2);
        CHECK(f1 && f2 && l1 == l2 && memcmp(f1, f2, (size_t)l1) == 0 && memcmp(a, b, 4 * n) == 0,
              "%s: repr == x (in place) gives the same frame and repr", DENSE[d]);
        free(f1), free(f2);
        codec_free(c);
    }
    free(x), free(a), free(b);
}

/* out += w * decode */
static void test_accumulate(void) {
    size_t n = 1237;
    float *x = mallocCheck(4 * n), *y = mallocCheck(4 * n), *acc = mallocCheck(4 * n), *want = mallocCheck(4 * n);
    dense_fill(x, n, 9, 0);
    for (int d = 0; d < NDENSE; d++) {
        Codec *c = dense_codec(DENSE[d]);
        int64_t len;
        uint8_t *f = dense_encode(c, x, n, NULL, &len);
        int ok = f && codec_decode(c, y, n, f, (size_t)len) == 0;
        for (size_t i = 0; i < n; i++) acc[i] = want[i] = 0.25f * (float)i;
        for (size_t i = 0; i < n; i++) want[i] += -0.75f * y[i];
        ok = ok && codec_decode_acc(c, acc, n, -0.75f, f, (size_t)len) == 0 && memcmp(acc, want, 4 * n) == 0;
        CHECK(ok, "%s: decode_acc(w) == out + w * decode", DENSE[d]);
        free(f);
        codec_free(c);
    }
    free(x), free(y), free(acc), free(want);
}

/* ------------------------------------------------- scalars, bad input --- */

static void test_scalar(void) {
    size_t n = 5000;
    float *x = mallocCheck(4 * n), *y = mallocCheck(4 * n);
    dense_fill(x, n, 11, 1);
    const char *names[2] = {"terngrad", "stoch3"};
    for (int k = 0; k < 2; k++) {
        Codec *c = dense_codec(names[k]);
        float ls = codec_local_scalar(c, x, n);
        int64_t len;
        uint8_t *f = dense_encode(c, x, n, NULL, &len);
        CHECK(f && get_f32(f + CODEC_HEADER_SIZE) == ls, "%s: local_scalar == the scalar sent (%g)", names[k], ls);
        free(f);
        float shared = 3.0f * ls;
        CodecSide side;
        memset(&side, 0, sizeof side);
        side.scalar = &shared;
        f = dense_encode(c, x, n, &side, &len);
        int ok = f && get_f32(f + CODEC_HEADER_SIZE) == shared && codec_decode(c, y, n, f, (size_t)len) == 0;
        for (size_t i = 0; ok && i < n; i++) ok = y[i] == 0 || fabsf(y[i]) == shared;
        CHECK(ok, "%s: a shared scalar (TernGrad 3.1) replaces the local one", names[k]);
        free(f);
        float bad[3] = {NAN, INFINITY, -1.0f};
        for (int b = 0; b < 3; b++) {
            side.scalar = &bad[b];
            f = dense_encode(c, x, n, &side, &len);
            CHECK(!f && len == -GC_ERR_PARAM, "%s: shared scalar %g rejected", names[k], bad[b]);
            free(f);
        }
        codec_free(c);
    }
    /* TernGrad 3.3: with c = 2.5 the scalar is min(max|x|, 2.5 sigma) */
    {
        Codec *c = dense_codec("terngrad");
        double s1 = 0, s2 = 0, mx = 0;
        for (size_t i = 0; i < n; i++) {
            s1 += x[i];
            s2 += (double)x[i] * x[i];
            mx = fabs(x[i]) > mx ? fabs(x[i]) : mx;
        }
        double sig = sqrt(s2 / (double)n - (s1 / (double)n) * (s1 / (double)n));
        float want = (float)fmin(mx, (double)(float)(2.5 * sig));
        float got = codec_local_scalar(c, x, n);
        CHECK(fabsf(got - want) <= 1e-6f * want && got < (float)mx, "terngrad c=2.5 scalar %g == min(max, 2.5 sigma) %g (max %g)",
              got, want, mx);
        codec_free(c);
        c = dense_codec("3lc");
        CHECK(isnan(codec_local_scalar(c, x, 4)), "local_scalar of a codec without one is NaN");
        codec_free(c);
    }
    free(x), free(y);
}

static void test_bad_input(void) {
    float x[16];
    for (int i = 0; i < 16; i++) x[i] = (float)i - 7.5f;
    uint8_t frame[256];
    for (int d = 0; d < NDENSE; d++) {
        Codec *c = dense_codec(DENSE[d]);
        for (int b = 0; b < 3; b++) {
            float v[3] = {NAN, INFINITY, -INFINITY};
            x[5] = v[b];
            int64_t len = codec_encode(c, frame, sizeof frame, x, 16, NULL);
            if (!strcmp(DENSE[d], "fp16")) {
                float y[16];
                int ok = len > 0 && codec_decode(c, y, 16, frame, (size_t)len) == 0;
                ok = ok && (b == 0 ? isnan(y[5]) : y[5] == v[b]);
                CHECK(ok, "fp16 carries %g through", v[b]);
            } else {
                CHECK(len == -GC_ERR_PARAM, "%s: non-finite input %g rejected (%lld)", DENSE[d], v[b], (long long)len);
            }
        }
        x[5] = -2.5f;
        /* output buffer too small: NOSPACE, never a write past cap */
        size_t need = codec_max_frame(c, 16);
        for (size_t cap = 0; cap < need; cap++) {
            uint8_t *small = mallocCheck(cap ? cap : 1);
            int64_t len = codec_encode(c, small, cap, x, 16, NULL);
            if (len > 0) CHECK(!strcmp(DENSE[d], "3lc"), "%s fits in %zu < max bytes", DENSE[d], cap);
            else CHECK(len == -GC_ERR_NOSPACE, "%s: cap %zu gives NOSPACE (%lld)", DENSE[d], cap, (long long)len);
            free(small);
        }
        codec_free(c);
    }
    /* int8 with a subnormal scale: max/127 = 1.496 * 2^-149 would round to 2^-149 and put max at
     * level 190; the scale is rounded up instead, so every value stays within half a level */
    {
        float t[3] = {190 * 0x1p-149f, -3 * 0x1p-149f, 12 * 0x1p-149f}, y[3];
        Codec *c = dense_codec("int8");
        int64_t len;
        uint8_t *f = dense_encode(c, t, 3, NULL, &len);
        int ok = f && codec_decode(c, y, 3, f, (size_t)len) == 0;
        float sc = ok ? get_f32(f + CODEC_HEADER_SIZE) : 0;
        for (int i = 0; ok && i < 3; i++) ok = fabs((double)t[i] - y[i]) <= 0.5 * sc;
        CHECK(ok && sc == 2 * 0x1p-149f, "int8: subnormal scale rounded up (scale %g), errors within half a level",
              sc);
        free(f);
        float u[1] = {12 * 0x1p-149f}; /* max/127 rounds to 0 */
        f = dense_encode(c, u, 1, NULL, &len);
        ok = f && codec_decode(c, y, 1, f, (size_t)len) == 0 && y[0] == u[0];
        CHECK(ok, "int8: a scale that would underflow to 0 becomes the smallest subnormal");
        free(f);
        codec_free(c);
    }
    /* int8 near FLT_MAX: 127 * scale must stay finite (found by fuzz_int8) */
    {
        float t[2] = {-FLT_MAX, 1.0f}, y[2];
        Codec *c = dense_codec("int8");
        int64_t len;
        uint8_t *f = dense_encode(c, t, 2, NULL, &len);
        int ok = f && codec_decode(c, y, 2, f, (size_t)len) == 0 && isfinite(y[0]) &&
                 fabs((double)y[0] - t[0]) <= 0.5 * get_f32(f + CODEC_HEADER_SIZE);
        CHECK(ok, "int8: max|x| = FLT_MAX decodes to a finite value within half a level (%g)", ok ? y[0] : 0.0f);
        if (f) {
            put_f32(f + CODEC_HEADER_SIZE, FLT_MAX / 100); /* 127 * scale overflows: impossible */
            CHECK(c->spec.ops->decode(c, y, 2, 1, 0, f + CODEC_HEADER_SIZE, (size_t)len - CODEC_HEADER_SIZE, 0) ==
                      -GC_ERR_CORRUPT,
                  "int8: a scale whose level 127 overflows is rejected");
        }
        free(f);
        codec_free(c);
    }
    /* fp16 NaN keeps its sign and gets the quiet bit, like vcvtps2ph */
    CHECK(half_from_float(dense_float_(0x7F800001u)) == 0x7E00 && half_from_float(dense_float_(0xFFC00000u)) == 0xFE00 &&
              half_from_float(dense_float_(0x7FFFE000u)) == 0x7FFF,
          "fp16 NaN: quiet bit set, sign and top payload bits kept");
    /* 3lc: a compressed input fits a buffer far below the worst case (threads asked for, but the
     * parallel path packs in place and needs the worst case: the serial path with checks runs) */
    {
        Codec *c = dense_codec("3lc");
        size_t n = 200000, L = 40000;
        float *z = callocCheck(n, 4);
        z[7] = 1;
        size_t want = 4 + 1 + 1 + (L - 2 + 13) / 14; /* m, run of 7 (1 byte), 202-ish, the long run */
        uint8_t *small = mallocCheck(CODEC_HEADER_SIZE + want);
        CodecSide side;
        memset(&side, 0, sizeof side);
        side.threads = 4;
        int64_t len = codec_encode(c, small, CODEC_HEADER_SIZE + want, z, n, &side);
        CHECK(len == (int64_t)(CODEC_HEADER_SIZE + want), "3lc sparse tensor fits exactly %zu bytes (%lld)",
              CODEC_HEADER_SIZE + want, (long long)len);
        len = codec_encode(c, small, CODEC_HEADER_SIZE + want - 1, z, n, &side);
        CHECK(len == -GC_ERR_NOSPACE, "3lc: one byte less gives NOSPACE");
        free(small);
        free(z);
        codec_free(c);
    }
}

static void test_help(void) {
    /* every dense codec is registered, documented and parses with its defaults */
    for (int d = 0; d < NDENSE; d++) {
        const CodecOps *o = codec_find(DENSE[d]);
        CHECK(o && o->summary && o->decode && o->encode && o->max_payload, "%s registered", DENSE[d]);
    }
    CodecSpec s;
    char err[256];
    CHECK(codec_parse(&s, "3lc:s=2", err, sizeof err) == -GC_ERR_PARAM, "3lc s=2 rejected (s in [1, 2))");
    CHECK(codec_parse(&s, "3lc:s=0.9", err, sizeof err) == -GC_ERR_PARAM, "3lc s<1 rejected");
    CHECK(codec_parse(&s, "terngrad:c=-1", err, sizeof err) == -GC_ERR_PARAM, "terngrad c<0 rejected");
    CHECK(codec_parse(&s, "terngrad:seed=1.5", err, sizeof err) == -GC_ERR_PARAM, "terngrad seed must be integer");
    CHECK(codec_parse(&s, "terngrad", err, sizeof err) == 0 && codec_param(&s, "c") == 2.5, "terngrad c = 2.5 default");
    CHECK(codec_parse(&s, "stoch3", err, sizeof err) == 0 && codec_param(&s, "c") == 0, "stoch3: no clipping default");
}

int main(void) {
    Dfx fx = dfx_load();
    test_fp16_fixture(&fx);
    test_payload_fixtures(&fx, "int8");
    test_payload_fixtures(&fx, "3lc");
    test_payload_fixtures(&fx, "terngrad");
    test_payload_fixtures(&fx, "stoch3");
    test_payload_fixtures(&fx, "onebit");
    dfx_free(&fx);
    test_golden();
    test_roundtrip();
    test_repr_inplace();
    test_accumulate();
    test_scalar();
    test_bad_input();
    test_help();
    TEST_END();
}
