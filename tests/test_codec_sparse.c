/* Sparsifying codecs topk, dgc, sbc: selection against the definition (full
 * sort, and PyTorch's topk in tests/fixtures/codec_sparse.bin), Golomb code
 * tables, golden payloads worked out by hand from the papers' definitions,
 * round trips, repr == decode, mask == nonzeros, density override. */
#include <math.h>
#include <stdio.h>

#include "compress/golomb.h"
#include "tests/test.h"
#include "tests/test_codec_sparse.h"

/* ------------------------------------------------------------ selection -- */

static void test_select_count(void) {
    CHECK(select_count(0.05, 1000) == 50, "5%% of 1000");
    CHECK(select_count(0.001, 10) == 1, "at least one");
    CHECK(select_count(0.001, 0) == 0, "none of nothing");
    CHECK(select_count(1.0, 17) == 17, "all");
    CHECK(select_count(0.5, 3) == 2, "round half away from zero: 1.5 -> 2");
    CHECK(select_count(0.3, 10) == 3, "0.3*10 -> 3 despite 0.3 being inexact");
    CHECK(select_count(0.001, 12345) == 12, "12.345 -> 12");
}

static void test_kth_largest(void) {
    Rng r;
    rng_init(&r, 7, 0);
    for (int trial = 0; trial < 50; trial++) {
        size_t c = 1 + rng_below(&r, 3000);
        uint32_t *a = malloc(c * 4), *s = malloc(c * 4);
        uint32_t range = trial % 3 == 0 ? 5 : (trial % 3 == 1 ? 70000 : 0xFFFFFFFFu);
        for (size_t i = 0; i < c; i++) a[i] = s[i] = 1 + (uint32_t)rng_below(&r, range);
        qsort(s, c, 4, cmp_u32);
        size_t k = 1 + rng_below(&r, c), above;
        uint32_t t = select_kth_largest(&above, a, c, k);
        size_t want_above = 0;
        for (size_t i = 0; i < c; i++) want_above += s[i] > s[c - k];
        CHECK(t == s[c - k] && above == want_above, "radix select c=%zu k=%zu: %u (above %zu) want %u (%zu)", c, k,
              t, above, s[c - k], want_above);
        free(a);
        free(s);
    }
}

static void test_select_matches_sort(void) {
    static const size_t ns[] = {1, 5, 100, 3000, 8192, 8193, 50000, 200000};
    static const double ds[] = {0.001, 0.01, 0.05, 0.3, 1.0};
    int bad = 0, runs = 0, sampled = 0, fallbacks = 0;
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
        size_t n = ns[a];
        float *x = malloc(n * 4);
        uint32_t *got = malloc(n * 4), *want = malloc(n * 4);
        KeyIdx *sorted = malloc(n * sizeof *sorted);
        for (int kind = 0; kind < 8; kind++) {
            if (n == 200000 && kind % 3) continue; /* keep the test short */
            fill_vector(x, n, 100 + a, kind);
            for (int mode = 0; mode < 3; mode++) {
                size_t c = brute_sort(sorted, x, n, (SelectKey)mode);
                for (size_t d = 0; d < sizeof ds / sizeof ds[0]; d++) {
                    size_t k = select_count(ds[d], n);
                    SelectInfo info;
                    int64_t got_c = select_topk(got, &info, x, n, k, (SelectKey)mode);
                    size_t wc = brute_take(want, sorted, c, k);
                    runs++;
                    sampled += info.sampled;
                    fallbacks += info.fallback;
                    if (got_c != (int64_t)wc || memcmp(got, want, wc * 4) != 0) {
                        if (bad++ < 5)
                            printf("  mismatch n=%zu kind=%d d=%g mode=%d: got %lld want %zu (sampled %d fallback %d)\n",
                                   n, kind, ds[d], mode, (long long)got_c, wc, info.sampled, info.fallback);
                    }
                }
            }
        }
        free(x);
        free(got);
        free(want);
        free(sorted);
    }
    CHECK(bad == 0, "selection == full-sort definition in %d of %d runs", runs - bad, runs);
    CHECK(sampled > 100, "the sampled path ran (%d runs)", sampled);
    /* the 3-sigma margin on the sample rank makes a too-high sample threshold rare */
    CHECK(fallbacks * 50 <= sampled, "sample threshold too high in %d of %d sampled runs", fallbacks, sampled);
}

/* put large values exactly where the sample looks: the sample threshold is then
 * far too high, the exact fallback must run, and the answer is still the definition */
static void test_select_fallback(void) {
    size_t n = 100000;
    float *x = malloc(n * 4);
    uint32_t *got = malloc(n * 4), *want = malloc(n * 4);
    for (size_t i = 0; i < n; i++) x[i] = 0.001f * (float)(i % 1000 + 1);
    size_t m = (size_t)ceil((double)n * SELECT_SAMPLE_FRAC);
    if (m < SELECT_MIN_SAMPLE) m = SELECT_MIN_SAMPLE;
    for (size_t j = 0; j < m; j++) {
        size_t at = select_sample_index(n, m, j);
        CHECK(at >= j * n / m && at < (j + 1) * n / m, "sample %zu lies in its stratum", j);
        x[at] = 100.0f + (float)j;
    }
    size_t k = 2000; /* > 2*expected sample hits, < m: threshold from the planted values */
    SelectInfo info;
    int64_t c = select_topk(got, &info, x, n, k, SELECT_MAG);
    size_t wc = brute_topk(want, x, n, k, SELECT_MAG);
    CHECK(info.sampled && info.fallback, "adversarial input triggers the fallback (sampled %d fallback %d cand %zu)",
          info.sampled, info.fallback, info.candidates);
    CHECK(c == (int64_t)wc && memcmp(got, want, wc * 4) == 0, "fallback selection == definition");
    free(x);
    free(got);
    free(want);
}

/* -------------------------------------------------------------- golomb -- */

static void bits_to_str(char *s, const uint8_t *buf, uint64_t nbits) {
    for (uint64_t i = 0; i < nbits; i++) s[i] = (buf[i >> 3] >> (7 - (i & 7))) & 1 ? '1' : '0';
    s[nbits] = 0;
}

static void test_golomb_tables(void) {
    /* hand-made from the definition in golomb.h (unary quotient, truncated binary remainder) */
    static const char *table[3][7] = {
        {"00", "01", "100", "101", "1100", "1101", "11100"}, /* M = 2 (Rice b = 1) */
        {"00", "010", "011", "100", "1010", "1011", "1100"}, /* M = 3 */
        {"000", "001", "010", "011", "1000", "1001", "1010"}, /* M = 4 (Rice b = 2) */
    };
    static const uint32_t Ms[3] = {2, 3, 4};
    for (int t = 0; t < 3; t++) {
        for (uint64_t v = 0; v < 7; v++) {
            uint8_t buf[8] = {0};
            BitWriter w;
            bw_init(&w, buf, sizeof buf);
            golomb_put(&w, v, Ms[t]);
            uint64_t nb = bw_bits(&w);
            char s[65];
            bw_finish(&w);
            bits_to_str(s, buf, nb);
            CHECK(strcmp(s, table[t][v]) == 0 && golomb_len(v, Ms[t]) == nb, "golomb M=%u v=%llu: %s want %s",
                  Ms[t], (unsigned long long)v, s, table[t][v]);
            if (Ms[t] != 3) {
                uint8_t buf2[8] = {0};
                bw_init(&w, buf2, sizeof buf2);
                rice_put(&w, v, Ms[t] == 2 ? 1 : 2);
                CHECK(bw_bits(&w) == nb && (bw_finish(&w), memcmp(buf, buf2, 8) == 0), "rice == golomb M=%u v=%llu",
                      Ms[t], (unsigned long long)v);
            }
        }
    }
    /* all seven codes of each table back to back decode in order */
    for (int t = 0; t < 3; t++) {
        uint8_t buf[16] = {0};
        BitWriter w;
        bw_init(&w, buf, sizeof buf);
        for (uint64_t v = 0; v < 7; v++) golomb_put(&w, v, Ms[t]);
        size_t len = bw_finish(&w);
        BitReader r;
        br_init(&r, buf, len);
        int ok = 1;
        for (uint64_t v = 0; v < 7; v++) {
            uint64_t got;
            ok &= golomb_get(&got, &r, Ms[t], 1000) == 0 && got == v;
        }
        CHECK(ok, "golomb M=%u table decodes back", Ms[t]);
    }
}

static void test_golomb_roundtrip(void) {
    Rng r;
    rng_init(&r, 11, 0);
    static const uint32_t Ms[] = {1, 2, 3, 5, 7, 64, 100, 1000, 65536, 0x7FFFFFFFu};
    for (size_t t = 0; t < sizeof Ms / sizeof Ms[0]; t++) {
        enum { N = 300 };
        uint64_t v[N];
        size_t cap = 1 << 16;
        uint8_t *buf = calloc(cap, 1);
        BitWriter w;
        bw_init(&w, buf, cap);
        uint64_t bits = 0;
        for (int i = 0; i < N; i++) {
            v[i] = rng_below(&r, (uint64_t)Ms[t] * 20);
            golomb_put(&w, v[i], Ms[t]);
            bits += golomb_len(v[i], Ms[t]);
        }
        CHECK(bw_bits(&w) == bits && !w.overflow, "golomb_len sums to what was written (M=%u)", Ms[t]);
        size_t len = bw_finish(&w);
        BitReader rd;
        br_init(&rd, buf, len);
        int ok = 1;
        for (int i = 0; i < N; i++) {
            uint64_t g;
            ok &= golomb_get(&g, &rd, Ms[t], UINT64_MAX / 2) == 0 && g == v[i];
        }
        CHECK(ok, "golomb M=%u round trip", Ms[t]);
        /* a value above vmax is rejected, a cut stream is truncated */
        br_init(&rd, buf, len);
        uint64_t g;
        int rc = golomb_get(&g, &rd, Ms[t], v[0] ? v[0] - 1 : 0);
        CHECK(v[0] == 0 || rc == -GC_ERR_CORRUPT, "value above vmax rejected (M=%u)", Ms[t]);
        br_init(&rd, buf, 0);
        CHECK(golomb_get(&g, &rd, Ms[t], UINT64_MAX) == -GC_ERR_TRUNCATED, "empty stream is truncated");
        free(buf);
    }
    for (int b = 0; b <= 31; b += 3) {
        uint8_t buf[4096] = {0};
        BitWriter w;
        bw_init(&w, buf, sizeof buf);
        uint64_t v[50];
        for (int i = 0; i < 50; i++) {
            v[i] = rng_below(&r, (1ULL << b) * 9 + 1);
            rice_put(&w, v[i], b);
        }
        size_t len = bw_finish(&w);
        BitReader rd;
        br_init(&rd, buf, len);
        int ok = 1;
        for (int i = 0; i < 50; i++) {
            uint64_t g;
            ok &= rice_get(&g, &rd, b, UINT64_MAX / 2) == 0 && g == v[i];
        }
        CHECK(ok && !w.overflow, "rice b=%d round trip", b);
    }
}

static void test_golomb_parameter(void) {
    /* SBC equation 5 by hand: log(phi-1) = -0.481212; e.g. p = 0.01: -0.481212 / log(0.99)
     * = 47.88, log2 = 5.58, b* = 1 + 5 = 6 */
    CHECK(golomb_rice_bits(0.01) == 6, "b*(0.01) = 6, got %d", golomb_rice_bits(0.01));
    CHECK(golomb_rice_bits(0.001) == 9, "b*(0.001) = 9 (ratio 480.97), got %d", golomb_rice_bits(0.001));
    CHECK(golomb_rice_bits(0.1) == 3, "b*(0.1) = 3 (ratio 4.567), got %d", golomb_rice_bits(0.1));
    CHECK(golomb_rice_bits(0.05) == 4, "b*(0.05) = 4 (ratio 9.38), got %d", golomb_rice_bits(0.05));
    CHECK(golomb_rice_bits(0.5) == 0 && golomb_rice_bits(1.0) == 0, "b* clamps at 0 for dense masks");
    /* b* minimises the expected length (Kiely's optimality), and the expected
     * length matches what a random mask actually costs */
    static const double ps[] = {0.3, 0.05, 0.01, 0.001, 0.0001};
    for (size_t t = 0; t < sizeof ps / sizeof ps[0]; t++) {
        double p = ps[t];
        int b = golomb_rice_bits(p);
        double e = golomb_rice_mean_bits(p, b);
        CHECK(e <= golomb_rice_mean_bits(p, b + 1) && (b == 0 || e <= golomb_rice_mean_bits(p, b - 1)),
              "b*=%d is the best Rice parameter for p=%g", b, p);
        Rng r;
        rng_init(&r, 5, t);
        uint64_t bits = 0, cnt = 0, prev = (uint64_t)-1;
        for (uint64_t i = 0, draws = p < 0.001 ? 3000000 : 1000000; i < draws; i++)
            if (rng_uniform(&r) < p) {
                bits += rice_len(i - prev - 1, b);
                prev = i;
                cnt++;
            }
        double meas = (double)bits / (double)cnt;
        CHECK(fabs(meas - e) < 0.05 * e, "p=%g b=%d: measured %.3f bits/position, equation 5 says %.3f", p, b, meas, e);
    }
}

/* -------------------------------------------------------------- golden -- */

static int64_t encode_with(Codec *c, uint8_t *frame, size_t cap, const float *x, size_t n, double density,
                           float *repr, uint8_t *mask) {
    CodecSide side;
    memset(&side, 0, sizeof side);
    side.density = density;
    side.repr = repr;
    side.mask = mask;
    return codec_encode(c, frame, cap, x, n, &side);
}

static void check_payload(const char *what, const uint8_t *frame, int64_t len, const uint8_t *want, size_t wlen) {
    int ok = len == (int64_t)(CODEC_HEADER_SIZE + wlen) && memcmp(frame + CODEC_HEADER_SIZE, want, wlen) == 0;
    CHECK(ok, "%s: golden payload (len %lld want %zu)", what, (long long)len - CODEC_HEADER_SIZE, wlen);
    if (!ok && len > CODEC_HEADER_SIZE) {
        printf("    got ");
        for (int64_t i = CODEC_HEADER_SIZE; i < len && i < CODEC_HEADER_SIZE + 48; i++) printf("%02x ", frame[i]);
        printf("\n");
    }
}

static void test_golden_topk(void) {
    /* 3 of 10 by magnitude: 4 (i7), -3 (i1), 2 (i3). Bitmap MSB first:
     * byte 0 = bits i0..i7 = 0 1 0 1 0 0 0 1 = 0x51, byte 1 = i8, i9 + padding = 0x00 */
    float x[10] = {0.1f, -3, 0, 2, 0.5f, -0.2f, 0, 4, 1, -1};
    static const uint8_t want[] = {3, 0, 0, 0, 0x51, 0x00, 0x00, 0x00, 0x40, 0xC0, /* -3 = 0xC0400000 */
                                   0x00, 0x00, 0x00, 0x40,                         /*  2 = 0x40000000 */
                                   0x00, 0x00, 0x80, 0x40};                        /*  4 = 0x40800000 */
    Codec *c = make_codec("topk:ratio=0.3");
    uint8_t frame[256];
    int64_t len = encode_with(c, frame, sizeof frame, x, 10, 0, NULL, NULL);
    check_payload("topk 3 of 10", frame, len, want, sizeof want);
    CHECK(frame[5] == CODEC_TOPK && get_u16(frame + 6) == 0 && get_u32(frame + 8) == 10, "topk header");
    codec_free(c);
}

static void test_golden_dgc(void) {
    /* n = 70000: values at 2, 3, 65540, 69999. Runs of zeros before each:
     * 2 -> 02 00; 0 -> 00 00; 65536 = 65535 + 1 -> FF FF 01 00; 69999-65541 = 4458 = 0x116A -> 6A 11 */
    size_t n = 70000;
    float *x = calloc(n, 4);
    x[2] = 1.5f;
    x[3] = -2.0f;
    x[65540] = 3.0f;
    x[69999] = -0.25f;
    static const uint8_t want[] = {4, 0, 0, 0, 0x00, 0x00, 0xC0, 0x3F, /* 1.5 */
                                   0x00, 0x00, 0x00, 0xC0,             /* -2 */
                                   0x00, 0x00, 0x40, 0x40,             /* 3 */
                                   0x00, 0x00, 0x80, 0xBE,             /* -0.25 */
                                   0x02, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0x01, 0x00, 0x6A, 0x11};
    Codec *c = make_codec("dgc");
    size_t cap = codec_max_frame(c, n);
    uint8_t *frame = malloc(cap);
    int64_t len = encode_with(c, frame, cap, x, n, 4.0 / 70000.0, NULL, NULL);
    check_payload("dgc runs with one skip entry", frame, len, want, sizeof want);
    /* exactly 65535 zeros -> FF FF 00 00; 65534 zeros -> FE FF */
    size_t n2 = 65537;
    memset(x, 0, n2 * 4);
    x[65535] = 1.0f;
    x[65536] = 2.0f;
    static const uint8_t want2[] = {2,    0,    0,    0,    0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00,
                                    0x40, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00};
    len = encode_with(c, frame, cap, x, n2, 2.0 / 65537.0, NULL, NULL);
    check_payload("dgc run of exactly 65535", frame, len, want2, sizeof want2);
    x[65535] = 0.0f;
    x[65534] = 1.0f;
    static const uint8_t want3[] = {2,    0,    0,    0,    0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00,
                                    0x40, 0xFE, 0xFF, 0x01, 0x00};
    len = encode_with(c, frame, cap, x, n2, 2.0 / 65537.0, NULL, NULL);
    check_payload("dgc run of 65534 and 1", frame, len, want3, sizeof want3);
    free(frame);
    free(x);
    codec_free(c);
}

static void test_golden_sbc(void) {
    /* p = 0.1 of 20 -> k = 2. Biggest: 2 (i7), 1 (i13): mu+ = 1.5. Smallest: -3 (i12), -1 (i4):
     * |mu-| = 2 > 1.5 -> negative side, mean -2 at 4 and 12. b* = 3 (p = 0.1).
     * gaps d-1: 4 - (-1) - 1 = 4 -> 0|100; 12 - 4 - 1 = 7 -> 0|111; bits 01000111 = 0x47 */
    float x[20];
    for (int i = 0; i < 20; i++) x[i] = i % 2 ? 0.01f : -0.01f;
    x[1] = 0.5f;
    x[4] = -1.0f;
    x[7] = 2.0f;
    x[12] = -3.0f;
    x[13] = 1.0f;
    x[18] = -0.5f;
    static const uint8_t want[] = {2, 0, 0, 0, 0x00, 0x00, 0x00, 0xC0, 3, 0x47};
    Codec *c = make_codec("sbc:p=0.1");
    uint8_t frame[256];
    float repr[20];
    uint8_t mask[20];
    int64_t len = encode_with(c, frame, sizeof frame, x, 20, 0, repr, mask);
    check_payload("sbc negative side", frame, len, want, sizeof want);
    int ok = 1;
    for (int i = 0; i < 20; i++) ok &= repr[i] == ((i == 4 || i == 12) ? -2.0f : 0.0f) && mask[i] == (i == 4 || i == 12);
    CHECK(ok, "sbc repr and mask");
    codec_free(c);

    /* n = 100, p = 0.01 -> k = 1, b* = 6 (M = 64). 5 at i90 beats -4 at i3 -> positive side.
     * d-1 = 90 = 1*64 + 26 -> 10|011010 = 0x9A */
    float y[100] = {0};
    y[90] = 5.0f;
    y[3] = -4.0f;
    static const uint8_t want2[] = {1, 0, 0, 0, 0x00, 0x00, 0xA0, 0x40, 6, 0x9A};
    c = make_codec("sbc:p=0.01");
    len = encode_with(c, frame, sizeof frame, y, 100, 0, NULL, NULL);
    check_payload("sbc positive side with a unary quotient", frame, len, want2, sizeof want2);
    /* a tie mu+ == |mu-| keeps the positive side (Algorithm 2: mu+ >= mu-) */
    y[90] = 4.0f;
    static const uint8_t want3[] = {1, 0, 0, 0, 0x00, 0x00, 0x80, 0x40, 6, 0x9A};
    len = encode_with(c, frame, sizeof frame, y, 100, 0, NULL, NULL);
    check_payload("sbc tie -> positive", frame, len, want3, sizeof want3);
    /* all zero: nothing sent, mean +0 */
    memset(y, 0, sizeof y);
    static const uint8_t want4[] = {0, 0, 0, 0, 0, 0, 0, 0, 6};
    len = encode_with(c, frame, sizeof frame, y, 100, 0, NULL, NULL);
    check_payload("sbc all zero", frame, len, want4, sizeof want4);
    codec_free(c);
}

/* ---------------------------------------------------- round trips, side -- */

/* encode x with codec spec at density d; check decode == repr, mask == selection == the definition,
 * values exact (topk/dgc) or the exact mean (sbc), accumulate mode; returns the payload length */
static int64_t roundtrip(const char *spec, const float *x, size_t n, double d, const uint32_t *ref_idx, size_t ref_cnt,
                         const float *ref_mean, int verbose) {
    Codec *c = make_codec(spec);
    int is_sbc = c->spec.ops->id == CODEC_SBC;
    double dens = d > 0 ? d : c->spec.v[0];
    size_t k = select_count(dens, n);
    size_t cap = codec_max_frame(c, n);
    uint8_t *frame = malloc(cap), *mask = malloc(n + 1);
    float *repr = malloc((n + 1) * 4), *out = malloc((n + 1) * 4), *acc = malloc((n + 1) * 4);
    uint32_t *want = malloc((k + 1) * 4), *want2 = malloc((k + 1) * 4);
    int64_t len = encode_with(c, frame, cap, x, n, d, repr, mask);
    int ok = len > 0;
    /* the definition: topk/dgc by |x|; sbc the side with the larger mean */
    size_t wc;
    float mean = 0;
    if (ref_idx) {
        memcpy(want, ref_idx, ref_cnt * 4);
        wc = ref_cnt;
    } else if (!is_sbc) {
        wc = brute_topk(want, x, n, k, SELECT_MAG);
    } else {
        size_t cp = brute_topk(want, x, n, k, SELECT_POS), cn = brute_topk(want2, x, n, k, SELECT_NEG);
        double sp = 0, sn = 0;
        for (size_t j = 0; j < cp; j++) sp += x[want[j]];
        for (size_t j = 0; j < cn; j++) sn -= x[want2[j]];
        double mp = cp ? sp / (double)cp : 0, mn = cn ? sn / (double)cn : 0;
        if (cp && mp >= mn) {
            wc = cp;
            mean = (float)mp;
        } else {
            memcpy(want, want2, cn * 4);
            wc = cn;
            mean = -(float)mn;
        }
    }
    if (ref_mean) mean = *ref_mean;
    size_t nmask = 0, bad_sel = 0, bad_val = 0;
    size_t j = 0;
    for (size_t i = 0; i < n && ok; i++) {
        int sel = j < wc && want[j] == i;
        if (sel) j++;
        nmask += mask[i];
        if (mask[i] != sel) bad_sel++;
        float v = sel ? (is_sbc ? mean : x[i]) : 0.0f;
        if (memcmp(&repr[i], &v, 4) != 0 && !(is_sbc && sel && fabsf(repr[i] - v) <= 1e-7f * fabsf(v))) bad_val++;
    }
    ok &= bad_sel == 0 && bad_val == 0 && nmask == wc;
    int rc = ok ? codec_decode(c, out, n, frame, (size_t)len) : -1;
    ok &= rc == 0 && memcmp(out, repr, n * 4) == 0;
    /* out += 0.5 * decoded */
    for (size_t i = 0; i < n; i++) acc[i] = (float)(i % 5);
    rc = ok ? codec_decode_acc(c, acc, n, 0.5f, frame, (size_t)len) : -1;
    for (size_t i = 0; i < n && ok; i++) {
        float w = (float)(i % 5) + 0.5f * repr[i];
        ok &= memcmp(&acc[i], &w, 4) == 0;
    }
    ok &= rc == 0;
    CHECK(ok, "%s n=%zu d=%g: len %lld, %zu selected want %zu, %zu mask / %zu value mismatches", spec, n, d,
          (long long)len, nmask, wc, bad_sel, bad_val);
    if (verbose)
        printf("  %-14s n=%-7zu density %-6g k=%-6zu payload %7lld B = %.2f bits/value\n", spec, n, dens, wc,
               (long long)len - CODEC_HEADER_SIZE, 8.0 * (double)(len - CODEC_HEADER_SIZE) / (double)(n ? n : 1));
    free(frame);
    free(mask);
    free(repr);
    free(out);
    free(acc);
    free(want);
    free(want2);
    codec_free(c);
    return len;
}

static void test_roundtrips(void) {
    static const size_t ns[] = {0, 1, 7, 100, 5000, 70000};
    static const char *specs[] = {"topk", "dgc", "sbc", "topk:ratio=0.2", "dgc:density=0.01", "sbc:p=0.01"};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
        size_t n = ns[a];
        float *x = malloc((n + 1) * 4);
        for (int kind = 0; kind < 8; kind++) {
            fill_vector(x, n, 300 + a, kind);
            for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++)
                roundtrip(specs[s], x, n, 0, NULL, 0, NULL, n == 70000 && kind == 1 && s < 3);
        }
        /* CodecSide.density overrides the spec (DGC warm-up: 25% ... 0.1%) */
        fill_vector(x, n, 400 + a, 0);
        roundtrip("dgc", x, n, 0.25, NULL, 0, NULL, 0);
        roundtrip("topk", x, n, 0.0625, NULL, 0, NULL, 0);
        roundtrip("sbc", x, n, 0.3, NULL, 0, NULL, 0);
        free(x);
    }
}

static void test_side_cases(void) {
    size_t n = 1000;
    float x[1000], y[1000];
    fill_vector(x, n, 9, 0);
    static const char *names[] = {"topk", "dgc", "sbc"};
    for (int s = 0; s < 3; s++) {
        Codec *c = make_codec(names[s]);
        size_t cap = codec_max_frame(c, n);
        uint8_t *frame = malloc(cap), *frame2 = malloc(cap);
        CodecSide side;
        memset(&side, 0, sizeof side);
        /* deterministic: the same input gives the same frame */
        int64_t l1 = codec_encode(c, frame, cap, x, n, &side), l2 = codec_encode(c, frame2, cap, x, n, &side);
        CHECK(l1 > 0 && l1 == l2 && memcmp(frame, frame2, (size_t)l1) == 0, "%s is deterministic", names[s]);
        /* repr may alias the input (in-place residual) */
        memcpy(y, x, sizeof x);
        side.repr = y;
        int64_t l3 = codec_encode(c, frame2, cap, y, n, &side);
        float z[1000];
        CHECK(l3 == l1 && memcmp(frame, frame2, (size_t)l1) == 0 && codec_decode(c, z, n, frame, (size_t)l1) == 0 &&
                  memcmp(z, y, sizeof z) == 0,
              "%s with repr == x", names[s]);
        side.repr = NULL;
        /* too small a buffer */
        CHECK(codec_encode(c, frame2, (size_t)l1 - 1, x, n, &side) == -GC_ERR_NOSPACE, "%s NOSPACE", names[s]);
        /* density above 1 */
        side.density = 1.5;
        CHECK(codec_encode(c, frame2, cap, x, n, &side) == -GC_ERR_PARAM, "%s density > 1 rejected", names[s]);
        side.density = 0;
        /* non-finite input is rejected, wherever it is */
        static const float bad[3] = {NAN, INFINITY, -INFINITY};
        for (int b = 0; b < 3; b++) {
            memcpy(y, x, sizeof x);
            y[517] = bad[b];
            CHECK(codec_encode(c, frame2, cap, y, n, &side) == -GC_ERR_PARAM, "%s rejects %g input", names[s], bad[b]);
            y[517] = -bad[b];
            CHECK(codec_encode(c, frame2, cap, y, n, &side) == -GC_ERR_PARAM, "%s rejects %g input", names[s], -bad[b]);
        }
        /* a rejected payload leaves out untouched */
        for (size_t i = 0; i < n; i++) z[i] = 7.0f;
        frame[CODEC_HEADER_SIZE] ^= 0x40; /* count field: k + 64 */
        put_u32(frame + 16, crc32c(0, frame + CODEC_HEADER_SIZE, (size_t)l1 - CODEC_HEADER_SIZE));
        int rc = codec_decode(c, z, n, frame, (size_t)l1);
        int same = 1;
        for (size_t i = 0; i < n; i++) same &= z[i] == 7.0f;
        CHECK(rc < 0 && same, "%s: rejected frame (%d) leaves out untouched", names[s], rc);
        free(frame);
        free(frame2);
        codec_free(c);
    }
}

/* --------------------------------------------------- PyTorch reference -- */

typedef struct {
    char name[32];
    uint32_t dtype, n;
    void *data;
} Rec;

static int load_fixture(Rec *recs, int maxrec, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char magic[8];
    uint32_t hdr[2];
    int nrec = -1;
    if (fread(magic, 1, 8, f) == 8 && memcmp(magic, "GCXFIXT\0", 8) == 0 && fread(hdr, 4, 2, f) == 2 && hdr[0] == 1 &&
        (int)hdr[1] <= maxrec) {
        nrec = (int)hdr[1];
        for (int r = 0; r < nrec; r++) {
            uint32_t nl, dt, nd, dims[8], cnt = 1;
            if (fread(&nl, 4, 1, f) != 1 || nl >= sizeof recs[r].name || fread(recs[r].name, 1, nl, f) != nl ||
                fread(&dt, 4, 1, f) != 1 || fread(&nd, 4, 1, f) != 1 || nd > 8 || fread(dims, 4, nd, f) != nd) {
                nrec = -1;
                break;
            }
            recs[r].name[nl] = 0;
            for (uint32_t d = 0; d < nd; d++) cnt *= dims[d];
            recs[r].dtype = dt;
            recs[r].n = cnt;
            recs[r].data = malloc((size_t)cnt * 4 + 4);
            if (fread(recs[r].data, 4, cnt, f) != cnt) {
                nrec = -1;
                break;
            }
        }
    }
    fclose(f);
    return nrec;
}

static Rec *find_rec(Rec *recs, int nrec, const char *name) {
    for (int r = 0; r < nrec; r++)
        if (strcmp(recs[r].name, name) == 0) return &recs[r];
    return NULL;
}

static void test_pytorch_reference(void) {
    enum { MAXREC = 64 };
    Rec recs[MAXREC];
    const char *path = "tests/fixtures/codec_sparse.bin";
    int nrec = load_fixture(recs, MAXREC, path);
    CHECK(nrec > 0, "read %s (make it with /usr/bin/python3 tests/ref/codec_sparse_fixtures.py)", path);
    if (nrec <= 0) return;
    int cases = 0;
    for (int c = 0;; c++) {
        char nm[6][32];
        static const char *base[6] = {"x", "dens", "topk", "dgc", "sbc", "sbcmean"};
        Rec *r[6];
        for (int i = 0; i < 6; i++) {
            snprintf(nm[i], sizeof nm[i], "%s.%d", base[i], c);
            r[i] = find_rec(recs, nrec, nm[i]);
        }
        if (!r[0]) break;
        if (!r[1] || !r[2] || !r[3] || !r[4] || !r[5]) {
            CHECK(0, "fixture case %d incomplete", c);
            break;
        }
        const float *x = r[0]->data, *dens = r[1]->data;
        size_t n = r[0]->n;
        char spec[64];
        snprintf(spec, sizeof spec, "topk:ratio=%.9g", (double)dens[0]);
        roundtrip(spec, x, n, 0, r[2]->data, r[2]->n, NULL, 0);
        snprintf(spec, sizeof spec, "dgc:density=%.9g", (double)dens[1]);
        roundtrip(spec, x, n, 0, r[3]->data, r[3]->n, NULL, 0);
        snprintf(spec, sizeof spec, "sbc:p=%.9g", (double)dens[2]);
        roundtrip(spec, x, n, 0, r[4]->data, r[4]->n, r[5]->data, 0);
        cases++;
    }
    CHECK(cases >= 3, "%d PyTorch reference cases", cases);
    for (int r = 0; r < nrec; r++) free(recs[r].data);
}

int main(void) {
    test_select_count();
    test_kth_largest();
    test_select_matches_sort();
    test_select_fallback();
    test_golomb_tables();
    test_golomb_roundtrip();
    test_golomb_parameter();
    test_golden_topk();
    test_golden_dgc();
    test_golden_sbc();
    test_roundtrips();
    test_side_cases();
    test_pytorch_reference();
    TEST_END();
}
