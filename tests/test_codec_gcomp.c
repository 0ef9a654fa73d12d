/* GCOMP codec (compress/gcomp.c, compress/huffman.c): golden vectors worked
 * out by hand from the paper's definitions (Li et al., SoCC 2024, Sections
 * 4-6), lossless and truncated round trips, table rebuild schedule, decoder
 * state. Robustness, parallel determinism and sizes: test_codec_gcomp_robust.c. */
#include <stdint.h>

#include "common/rng.h"
#include "compress/codec.h"
#include "compress/gcomp.h"
#include "compress/huffman.h"
#include "tests/test.h"

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static Codec *mk(const char *spec) {
    CodecSpec s;
    char err[256];
    if (codec_parse(&s, spec, err, sizeof err) != 0) {
        printf("FAIL parse %s: %s\n", spec, err);
        exit(1);
    }
    return codec_new(&s);
}

/* expected decode of x at level L, as docs/FORMAT.md section 10 defines it:
 * exponent 0 -> zero of the same sign; exponent 255 -> exact; else the low
 * 6*L mantissa bits cleared (truncation toward zero) */
static uint32_t expect_bits(uint32_t u, int L) {
    uint32_t e = (u >> 23) & 0xFF;
    if (e == 0) return u & 0x80000000u;
    if (e == 0xFF) return u;
    return u & ~((1u << (6 * L)) - 1);
}

/* ---- Huffman code with a length cap and escape (Section 4.3) ---- */
static void test_huffman_golden(void) {
    /* frequencies: symbol 0:50, 126:25, 127:12, 125:8, 128:5, every other 0.
     * Two-queue merge (leaf first on ties): the 251 zero-weight symbols form a
     * subtree Z(0); Z+128(5) -> A(5); A+125(8) -> B(13); 127(12)+B -> C(25);
     * 126(25)+C -> D(50); 0(50)+D -> root. Native lengths: 0:1 126:2 127:3
     * 125:4 128:5, Z at depth 5 so every unseen symbol is longer than 5. */
    uint64_t w[HUFF_NSYM] = {0};
    w[0] = 50, w[126] = 25, w[127] = 12, w[125] = 8, w[128] = 5;
    int len[HUFF_NSYM];
    huff_lengths(len, w, HUFF_NSYM);
    CHECK(len[0] == 1 && len[126] == 2 && len[127] == 3 && len[125] == 4 && len[128] == 5,
          "native lengths 0:%d 126:%d 127:%d 125:%d 128:%d", len[0], len[126], len[127], len[125], len[128]);
    int minz = 99, maxz = 0;
    double kraft = 0;
    for (int s = 0; s < HUFF_NSYM; s++) {
        kraft += ldexp(1.0, -len[s]);
        if (!w[s]) minz = len[s] < minz ? len[s] : minz, maxz = len[s] > maxz ? len[s] : maxz;
    }
    CHECK(minz > 5, "unseen symbols below Z: min length %d (max %d)", minz, maxz);
    CHECK(kraft == 1.0, "native Huffman code is complete (Kraft sum %.17g)", kraft);

    /* n_theta = 3: 0 -> 0, 126 -> 10, 127 -> 110 (canonical). The first overly
     * long code in canonical order is 125's native code 1110; truncated to 3
     * bits it gives the escape 111 (Section 4.3). */
    HuffCode hc;
    huff_code_from_weights(&hc, w, 3);
    CHECK(hc.ncoded == 3 && hc.has_escape && hc.escape == 7, "n_theta=3: %d coded, escape %u", hc.ncoded,
          hc.escape);
    CHECK(hc.len[0] == 1 && hc.code[0] == 0 && hc.len[126] == 2 && hc.code[126] == 2 && hc.len[127] == 3 &&
              hc.code[127] == 6,
          "n_theta=3 codes 0:%u/%d 126:%u/%d 127:%u/%d", hc.code[0], hc.len[0], hc.code[126], hc.len[126],
          hc.code[127], hc.len[127]);
    CHECK(hc.len[125] == 0 && hc.emit[125] == ((7u << 8) | 125) && hc.emit_len[125] == 11,
          "125 escaped: 111 01111101 (n_f = n_theta + n_s = 11 bits)");
    CHECK(hc.emit[128] == ((7u << 8) | 128) && hc.emit_len[128] == 11, "128 escaped");
    CHECK(hc.emit[0] == 0 && hc.emit_len[0] == 1, "0 emits its own code");

    /* n_theta = 8: all five seen symbols keep their codes 0,10,110,1110,11110;
     * the escape is 11111000 = 248 (the first long code, length >= 6 and
     * starting 11111 0..., truncated to 8 bits) */
    huff_code_from_weights(&hc, w, 8);
    CHECK(hc.ncoded == 5 && hc.escape == 248, "n_theta=8: %d coded, escape %u", hc.ncoded, hc.escape);
    CHECK(hc.code[125] == 14 && hc.len[125] == 4 && hc.code[128] == 30 && hc.len[128] == 5, "n_theta=8 long codes");

    /* the paper's Table 1 shape: escape + raw 8-bit exponent, 32 -> 00100000 */
    CHECK((hc.emit[32] & 0xFF) == 32 && (hc.emit[32] >> 8) == 248 && hc.emit_len[32] == 16,
          "escaped 32 = 11111000 00100000");

    /* tie-free uniform weights over all 256 symbols: every length 8, no escape */
    uint64_t u[HUFF_NSYM];
    for (int s = 0; s < HUFF_NSYM; s++) u[s] = 1000;
    huff_code_from_weights(&hc, u, 8);
    CHECK(hc.ncoded == 256 && !hc.has_escape && hc.len[0] == 8 && hc.code[255] == 255, "uniform: fixed 8-bit code");
    huff_code_from_weights(&hc, u, 7);
    CHECK(hc.ncoded == 0 && hc.has_escape && hc.escape == 0 && hc.emit_len[9] == 15,
          "uniform with n_theta=7: every symbol escaped behind 0000000");
}

/* ---- lookup table (Section 4.5, Figure 5: n_theta = 3, 'a' has code 0 so
 * indexes 000..011 all give 'a' with length 1) ---- */
static void test_lut_golden(void) {
    uint8_t len[HUFF_NSYM] = {0};
    len['a'] = 1, len['b'] = 2, len['c'] = 3; /* a=0 b=10 c=110, escape 111 */
    HuffCode hc;
    CHECK(huff_code_build(&hc, len, 3) == 0, "build a/b/c table");
    uint16_t lut[8];
    huff_lut_build(lut, &hc);
    const uint16_t want[8] = {
        'a' | 1 << 8, 'a' | 1 << 8, 'a' | 1 << 8, 'a' | 1 << 8, /* 000 001 010 011 -> a, 1 */
        'b' | 2 << 8, 'b' | 2 << 8,                             /* 100 101 -> b, 2 */
        'c' | 3 << 8,                                           /* 110 -> c, 3 */
        HUFF_LUT_ESC | 3 << 8,                                  /* 111 -> escape, 3 */
    };
    for (int i = 0; i < 8; i++)
        CHECK(lut[i] == want[i], "lut[%d] = sym %u len %u esc %d", i, HUFF_LUT_SYM(lut[i]), HUFF_LUT_LEN(lut[i]),
              !!(lut[i] & HUFF_LUT_ESC));

    /* a table whose long codes span several n_theta-bit prefixes leaves unused
     * indexes, which decode as invalid (length 0): 0 -> 0, escape 10, 11 unused */
    memset(len, 0, sizeof len);
    len[0] = 1;
    CHECK(huff_code_build(&hc, len, 2) == 0 && hc.escape == 2, "single-code table");
    uint16_t lut2[4];
    huff_lut_build(lut2, &hc);
    CHECK(lut2[0] == (1 << 8) && lut2[1] == (1 << 8) && lut2[2] == (HUFF_LUT_ESC | 2 << 8) && lut2[3] == 0,
          "unused index is invalid");

    /* tables a decoder must reject */
    memset(len, 0, sizeof len);
    len['a'] = 1, len['b'] = 2, len['c'] = 3, len['d'] = 3; /* Figure 5's complete 4-symbol code */
    CHECK(huff_code_build(&hc, len, 3) == -GC_ERR_CORRUPT, "complete code with uncoded symbols: no escape room");
    memset(len, 0, sizeof len);
    len[1] = 1, len[2] = 1, len[3] = 2; /* Kraft 5/4 > 1 */
    CHECK(huff_code_build(&hc, len, 3) == -GC_ERR_CORRUPT, "Kraft violation (not prefix-free)");
    memset(len, 0, sizeof len);
    len[1] = 4;
    CHECK(huff_code_build(&hc, len, 3) == -GC_ERR_CORRUPT, "length above n_theta");
    memset(len, 8, sizeof len);
    len[7] = 7; /* all 256 coded, Kraft > 1 */
    CHECK(huff_code_build(&hc, len, 8) == -GC_ERR_CORRUPT, "overfull 256-symbol table");
    memset(len, 8, sizeof len);
    CHECK(huff_code_build(&hc, len, 8) == 0 && !hc.has_escape, "complete 256-symbol table");
    len[7] = 9;
    CHECK(huff_code_build(&hc, len, 9) == -GC_ERR_CORRUPT, "all coded but incomplete");
    CHECK(huff_code_build(&hc, len, 0) == -GC_ERR_CORRUPT && huff_code_build(&hc, len, 17) == -GC_ERR_CORRUPT,
          "n_theta out of range");
}

/* ---- complete small frames, by hand (docs/FORMAT.md section 10) ---- */
static void test_frame_golden(void) {
    Codec *enc = mk("gcomp:ntheta=3,every=1000");
    Codec *dec = mk("gcomp");
    /* x: 1.5 (e127 m 0x400000), 1.75 with 12 low bits set (e127), 0.0,
     * -2.5 with 6 low bits set (e128); levels 0, 2, (ignored), 1.
     * Histogram 127:2 0:1 128:1 -> Huffman: Z(0)+0(1) -> A(1); 128(1)+A -> B(2);
     * 127(2)+B -> root. Lengths 127:1 128:2 0:3 -> canonical 127=0, 128=10,
     * 0=110, escape 111. */
    float x[4] = {1.5f, u2f(0x3FE00FFFu), 0.0f, u2f(0xC020003Fu)};
    uint8_t lv[4] = {0, 2, 3, 1};
    float repr[4], y[4];
    CodecSide side = {.levels = lv, .repr = repr};
    uint8_t frame[512];
    int64_t len = codec_encode(enc, frame, sizeof frame, x, 4, &side);
    uint8_t tab[8] = {3, 0, /* k = 3 (u16) */ 0, 3, 127, 1, 128, 2};
    uint32_t id = crc32c(0, tab, sizeof tab);
    uint8_t want[65] = {
        'G', 'P', 1, 3, /* magic, dtype fp32, n_theta */
        (uint8_t)id, (uint8_t)(id >> 8), (uint8_t)(id >> 16), (uint8_t)(id >> 24), /* table id */
        1, 0, 0, 0,                /* chunks */
        67, 0, 0, 0, 0, 0, 0, 0,   /* compressed bits: 7 + 6 + 54 */
        128, 0, 0, 0, 0, 0, 0, 0,  /* original bits: 4 * 32 */
        3, 0, 0, 3, 127, 1, 128, 2, /* table */
        0, 0, 0, 0, 4, 0, 0, 0, 67, 0, 0, 0, 7, 0, 0, 0, 3, 0, 0, 0, /* chunk: start count bits ebits nnz */
        /* exponents 0 0 110 10 -> 0011010(0) */
        0x34,
        /* levels 00 10 01 -> 001001(00) */
        0x24,
        /* mantissas with sign: 0x400000 (24 bits), 0x600FFF>>12 = 0x600 (12 bits),
         * (1<<23|0x20003F)>>6 = 0x28000 (18 bits) */
        0x40, 0x00, 0x00, 0x60, 0x0A, 0x00, 0x00,
    };
    CHECK(len == CODEC_HEADER_SIZE + 65, "golden frame 1 length %lld", (long long)len);
    CHECK(len > 0 && get_u16(frame + 6) == 1, "frame 1 flags = TABLE");
    int same = len == CODEC_HEADER_SIZE + 65 && memcmp(frame + CODEC_HEADER_SIZE, want, 65) == 0;
    CHECK(same, "golden frame 1 bytes");
    if (!same && len > CODEC_HEADER_SIZE)
        for (int i = 0; i < len - CODEC_HEADER_SIZE && i < 65; i++)
            if (frame[CODEC_HEADER_SIZE + i] != want[i])
                printf("  byte %d: got %02x want %02x\n", i, frame[CODEC_HEADER_SIZE + i], want[i]);
    uint32_t rb[4] = {0x3FC00000u, 0x3FE00000u, 0, 0xC0200000u};
    CHECK(f2u(repr[0]) == rb[0] && f2u(repr[1]) == rb[1] && f2u(repr[2]) == rb[2] && f2u(repr[3]) == rb[3],
          "frame 1 repr: low bits cleared");
    CHECK(codec_decode(dec, y, 4, frame, (size_t)len) == 0 && memcmp(y, repr, sizeof y) == 0, "frame 1 decodes to repr");

    /* frame 2 reuses the table: -0.0 (code 110 + sign bit, flag ZSIGN), 4.0
     * (e129 has no code: escape 111 + raw 10000001), 1.5 (code 0) */
    float x2[3] = {-0.0f, 4.0f, 1.5f};
    uint8_t frame2[512];
    int64_t len2 = codec_encode(enc, frame2, sizeof frame2, x2, 3, NULL);
    uint8_t want2[58] = {
        'G', 'P', 1, 3, (uint8_t)id, (uint8_t)(id >> 8), (uint8_t)(id >> 16), (uint8_t)(id >> 24), 1, 0, 0, 0,
        68, 0, 0, 0, 0, 0, 0, 0,  /* 15 + 4 + 49 */
        96, 0, 0, 0, 0, 0, 0, 0,  /* 3 * 32 */
        0, 0, 0, 0, 3, 0, 0, 0, 68, 0, 0, 0, 15, 0, 0, 0, 2, 0, 0, 0,
        /* exponents 110 111 10000001 0 -> 11011110 0000010(0) */
        0xDE, 0x04,
        /* levels 00 00 */
        0x00,
        /* mantissas: sign of -0 (1), 4.0: 24 zero bits, 1.5: 0x400000 */
        0x80, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00,
    };
    CHECK(len2 == CODEC_HEADER_SIZE + 58, "golden frame 2 length %lld", (long long)len2);
    CHECK(len2 > 0 && get_u16(frame2 + 6) == 2, "frame 2 flags = ZSIGN (no table)");
    same = len2 == CODEC_HEADER_SIZE + 58 && memcmp(frame2 + CODEC_HEADER_SIZE, want2, 58) == 0;
    CHECK(same, "golden frame 2 bytes");
    if (!same && len2 > CODEC_HEADER_SIZE)
        for (int i = 0; i < len2 - CODEC_HEADER_SIZE && i < 58; i++)
            if (frame2[CODEC_HEADER_SIZE + i] != want2[i])
                printf("  byte %d: got %02x want %02x\n", i, frame2[CODEC_HEADER_SIZE + i], want2[i]);
    float y2[3];
    CHECK(codec_decode(dec, y2, 3, frame2, (size_t)len2) == 0 && memcmp(y2, x2, sizeof y2) == 0,
          "frame 2 decodes exactly (-0.0 kept)");
    /* what the two frames spend their bytes on (compress/gcomp.h), worked by hand above */
    GcompParts gp = {0};
    CHECK(gcomp_frame_parts(&gp, frame, (size_t)len) == 0, "parts of frame 1");
    CHECK(gp.values == 4 && gp.zeros == 1 && gp.level[0] == 1 && gp.level[1] == 1 && gp.level[2] == 1 &&
              gp.level[3] == 0 && gp.exp_bits == 7 && gp.level_bits == 6 && gp.man_bits == 54 &&
              gp.bytes == CODEC_HEADER_SIZE + 65,
          "frame 1 parts: 4 values, 1 zero, levels 1/1/1/0, bits 7/6/54, %llu bytes", (unsigned long long)gp.bytes);
    CHECK(gcomp_frame_parts(&gp, frame2, (size_t)len2) == 0, "parts of frame 2");
    CHECK(gp.values == 7 && gp.zeros == 2 && gp.level[0] == 3 && gp.exp_bits == 22 && gp.level_bits == 10 &&
              gp.man_bits == 103 && gp.bytes == 2 * CODEC_HEADER_SIZE + 65 + 58,
          "frames 1 + 2 parts add up");
    /* a cut frame is refused and adds nothing; so is another codec's */
    GcompParts before = gp;
    int refused = 1;
    for (int64_t cut = 0; cut < len; cut++) refused &= gcomp_frame_parts(&gp, frame, (size_t)cut) < 0;
    Codec *other = mk("fp16");
    uint8_t f16[64];
    int64_t l16 = codec_encode(other, f16, sizeof f16, x2, 3, NULL);
    refused &= gcomp_frame_parts(&gp, f16, (size_t)l16) == -GC_ERR_CODEC;
    codec_free(other);
    CHECK(refused && memcmp(&gp, &before, sizeof gp) == 0, "parts: cut frames and other codecs refused, nothing added");
    /* a decoder that never saw frame 1 has no table for frame 2 */
    Codec *fresh = mk("gcomp");
    CHECK(codec_decode(fresh, y2, 3, frame2, (size_t)len2) == -GC_ERR_STATE, "fresh decoder: GC_ERR_STATE");
    codec_free(fresh);
    codec_free(enc);
    codec_free(dec);
}

/* ---- round trips ---- */
static void fill(float *x, size_t n, int kind, Rng *r) {
    for (size_t i = 0; i < n; i++) {
        float v;
        switch (kind) {
        case 0: v = rng_normal(r) * 1e-3f; break;                           /* gradient-like */
        case 1: v = rng_uniform(r) < 0.7f ? 0.0f : rng_normal(r) * 1e-2f; break; /* sparse */
        case 2: v = 0.0f; break;                                           /* all zero */
        case 3: v = 0.125f; break;                                         /* constant */
        case 4: v = (rng_uniform(r) - 0.5f) * 2e4f; break;                 /* wide uniform */
        case 5: v = u2f((uint32_t)rng_u64(r)); break;                      /* every bit pattern: NaN, inf, denormals */
        case 6: v = rng_normal(r) * ldexpf(1.0f, (int)rng_below(r, 200) - 100); break; /* many exponents */
        case 7: { /* specials mixed with normal values */
            const float sp[] = {-0.0f, 0.0f, INFINITY, -INFINITY, NAN, 1e-40f, -1e-45f, 3.4e38f, -1.17549435e-38f};
            v = rng_uniform(r) < 0.5f ? sp[rng_below(r, 9)] : rng_normal(r);
            break;
        }
        default: v = rng_normal(r) * 1e-6f; break; /* shifted distribution */
        }
        x[i] = v;
    }
}

static void test_roundtrip(void) {
    const char *specs[] = {"gcomp", "gcomp:ntheta=3,chunk=64", "gcomp:ntheta=1,every=2,chunk=100",
                           "gcomp:ntheta=16,every=1", "gcomp:ntheta=5,every=3,chunk=333"};
    const size_t sizes[] = {1, 2, 7, 64, 65, 1000, 5000};
    Rng r;
    rng_init(&r, 7, 0);
    size_t maxn = 5000;
    float *x = malloc(maxn * 4), *y = malloc(maxn * 4), *repr = malloc(maxn * 4);
    uint8_t *lv = malloc(maxn);
    for (int si = 0; si < 5; si++) {
        Codec *enc = mk(specs[si]), *dec = mk(specs[si]);
        uint8_t *frame = malloc(codec_max_frame(enc, maxn));
        int bad_lossless = 0, bad_repr = 0, bad_trunc = 0, fails = 0, frames = 0;
        /* a sequence of encodes through one encoder: the table is reused on later
         * distributions, so escapes get exercised */
        for (int kind = 0; kind < 9; kind++)
            for (int zi = 0; zi < 7; zi++) {
                size_t n = sizes[zi];
                fill(x, n, kind, &r);
                for (int trunc = 0; trunc < 2; trunc++) {
                    for (size_t i = 0; i < n; i++) lv[i] = trunc ? (uint8_t)rng_below(&r, 4) : 0;
                    CodecSide side = {.levels = trunc ? lv : NULL, .repr = repr};
                    int64_t len = codec_encode(enc, frame, codec_max_frame(enc, n), x, n, &side);
                    int rc = len > 0 ? codec_decode(dec, y, n, frame, (size_t)len) : (int)len;
                    frames++;
                    if (rc) {
                        if (fails++ < 3) printf("  %s kind %d n %zu: rc %d (%s)\n", specs[si], kind, n, rc, gc_strerror(rc));
                        continue;
                    }
                    for (size_t i = 0; i < n; i++) {
                        uint32_t want = expect_bits(f2u(x[i]), trunc ? lv[i] : 0);
                        if (f2u(y[i]) != f2u(repr[i])) bad_repr++;
                        if (f2u(y[i]) != want) *(trunc ? &bad_trunc : &bad_lossless) += 1;
                    }
                }
            }
        CHECK(fails == 0, "%s: %d of %d frames failed", specs[si], fails, frames);
        CHECK(bad_lossless == 0, "%s: levels 0 bit-exact (denormals -> signed zero): %d mismatches", specs[si],
              bad_lossless);
        CHECK(bad_trunc == 0, "%s: truncated = input with 6*level low mantissa bits cleared: %d mismatches",
              specs[si], bad_trunc);
        CHECK(bad_repr == 0, "%s: repr == decode: %d mismatches", specs[si], bad_repr);
        free(frame);
        codec_free(enc);
        codec_free(dec);
    }
    /* decode-accumulate: out += weight * decoded */
    Codec *enc = mk("gcomp:chunk=64"), *dec = mk("gcomp");
    fill(x, 300, 0, &r);
    uint8_t frame[4096];
    int64_t len = codec_encode(enc, frame, sizeof frame, x, 300, NULL);
    int ok = 1;
    for (size_t i = 0; i < 300; i++) y[i] = (float)i;
    CHECK(codec_decode_acc(dec, y, 300, -0.5f, frame, (size_t)len) == 0, "decode-accumulate");
    for (size_t i = 0; i < 300; i++) ok &= y[i] == (float)i + -0.5f * x[i];
    CHECK(ok, "accumulated values");
    /* empty tensor */
    len = codec_encode(enc, frame, sizeof frame, x, 0, NULL);
    CHECK(len == CODEC_HEADER_SIZE + 28 && codec_decode(dec, y, 0, frame, (size_t)len) == 0, "empty tensor");
    /* bad levels are rejected without touching the state */
    lv[0] = 4;
    CodecSide bad = {.levels = lv};
    CHECK(codec_encode(enc, frame, sizeof frame, x, 300, &bad) == -GC_ERR_PARAM, "level 4 rejected");
    codec_free(enc);
    codec_free(dec);
    free(x), free(y), free(repr), free(lv);
}

/* ---- table schedule (Section 4.4) ---- */
static size_t table_section(uint8_t *out, const uint64_t *hist, int ntheta) {
    HuffCode hc;
    huff_code_from_weights(&hc, hist, ntheta);
    size_t at = 2;
    for (int s = 0; s < 256; s++)
        if (hc.len[s]) out[at++] = (uint8_t)s, out[at++] = hc.len[s];
    put_u16(out, (uint16_t)hc.ncoded);
    return at;
}

static void test_schedule(void) {
    const int K = 3, N = 500;
    Codec *enc = mk("gcomp:every=3,chunk=128"), *dec = mk("gcomp");
    Rng r;
    rng_init(&r, 3, 0);
    float x[500], y[500];
    uint8_t frame[8192];
    uint64_t hist[256] = {0};
    int carried_ok = 1, table_ok = 1, dec_ok = 1;
    for (int t = 0; t < 11; t++) {
        /* the distribution moves every encode, so every rebuild changes the table */
        float scale = ldexpf(1.0f, -3 * t);
        for (int i = 0; i < N; i++) x[i] = rng_normal(&r) * scale;
        int64_t len = codec_encode(enc, frame, sizeof frame, x, N, NULL);
        int carried = len > 0 && (get_u16(frame + 6) & 1);
        int want = t % K == 0;
        if (carried != want) {
            carried_ok = 0;
            printf("  encode %d: carried %d, want %d\n", t, carried, want);
        }
        /* the table built at t = 0 is from x_0 itself; at t = jK from x_{t-K}..x_{t-1} */
        if (want) {
            uint8_t sec[600];
            uint64_t h0[256] = {0};
            for (int i = 0; i < N; i++) h0[(f2u(x[i]) >> 23) & 0xFF]++;
            size_t sl = table_section(sec, t == 0 ? h0 : hist, 8);
            if (memcmp(frame + CODEC_HEADER_SIZE + 28, sec, sl) != 0) table_ok = 0;
            memset(hist, 0, sizeof hist);
        }
        for (int i = 0; i < N; i++) hist[(f2u(x[i]) >> 23) & 0xFF]++;
        dec_ok &= codec_decode(dec, y, N, frame, (size_t)len) == 0 && memcmp(x, y, sizeof x) == 0;
    }
    CHECK(carried_ok, "table carried exactly at encodes 0, K, 2K, ... (K=%d)", K);
    CHECK(table_ok, "rebuilt table = Huffman of the exponents seen since the last rebuild");
    CHECK(dec_ok, "one decoder follows every table change");
    codec_free(enc);

    /* stationary data: the rebuild gives the same table, which is not carried again */
    enc = mk("gcomp:every=2");
    for (int i = 0; i < N; i++) x[i] = rng_normal(&r);
    int carries = 0;
    for (int t = 0; t < 7; t++) {
        int64_t len = codec_encode(enc, frame, sizeof frame, x, N, NULL);
        carries += len > 0 && (get_u16(frame + 6) & 1);
    }
    CHECK(carries == 1, "unchanged table carried once, got %d", carries);
    codec_free(enc);
    codec_free(dec);
}

/* ---- decoder state (Section 4.4: the table travels with the frames) ---- */
static void test_state(void) {
    Codec *enc = mk("gcomp:every=2"), *dec = mk("gcomp"), *late = mk("gcomp");
    float x[256], y[256];
    Rng r;
    rng_init(&r, 5, 0);
    uint8_t f[5][4096];
    int64_t len[5];
    for (int t = 0; t < 5; t++) {
        for (int i = 0; i < 256; i++) x[i] = rng_normal(&r) * ldexpf(1.0f, -10 * t);
        len[t] = codec_encode(enc, f[t], sizeof f[t], x, 256, NULL);
    }
    /* frames 0, 2, 4 carry tables */
    CHECK((get_u16(f[0] + 6) & 1) && !(get_u16(f[1] + 6) & 1) && (get_u16(f[2] + 6) & 1), "table frames 0 and 2");
    CHECK(codec_decode(late, y, 256, f[1], (size_t)len[1]) == -GC_ERR_STATE, "missed table frame -> GC_ERR_STATE");
    for (int t = 0; t < 5; t++) CHECK(codec_decode(dec, y, 256, f[t], (size_t)len[t]) == 0, "in-order decode %d", t);
    /* late decoder joins at frame 2: it can decode 2 and 3, but 1 needs the old table */
    CHECK(codec_decode(late, y, 256, f[2], (size_t)len[2]) == 0, "late decoder loads table at frame 2");
    CHECK(codec_decode(late, y, 256, f[3], (size_t)len[3]) == 0, "late decoder decodes frame 3");
    CHECK(codec_decode(late, y, 256, f[1], (size_t)len[1]) == -GC_ERR_STATE, "stale frame -> GC_ERR_STATE");
    /* a corrupt table frame does not replace the decoder's table */
    Codec *d2 = mk("gcomp");
    CHECK(codec_decode(d2, y, 256, f[0], (size_t)len[0]) == 0, "d2 loads table 0");
    uint8_t bad[4096];
    memcpy(bad, f[2], (size_t)len[2]);
    bad[CODEC_HEADER_SIZE + 8] = 7; /* chunk count: inconsistent */
    put_u32(bad + 16, crc32c(0, bad + CODEC_HEADER_SIZE, (size_t)len[2] - CODEC_HEADER_SIZE));
    CHECK(codec_decode(d2, y, 256, bad, (size_t)len[2]) < 0, "corrupt table frame rejected");
    CHECK(codec_decode(d2, y, 256, f[1], (size_t)len[1]) == 0, "d2 still holds table 0");
    /* one instance may encode and decode: the two tables are separate */
    Codec *both = mk("gcomp");
    uint8_t g[4096];
    int64_t gl = codec_encode(both, g, sizeof g, x, 256, NULL);
    CHECK(codec_decode(both, y, 256, f[3], (size_t)len[3]) == -GC_ERR_STATE, "encoder table is not the decoder's");
    CHECK(codec_decode(both, y, 256, g, (size_t)gl) == 0 && memcmp(x, y, sizeof x) == 0, "self round trip");
    /* a failed encode (no space) leaves the state as it was */
    Codec *e1 = mk("gcomp"), *e2 = mk("gcomp");
    uint8_t a[4096], b[4096];
    CHECK(codec_encode(e1, a, 60, x, 256, NULL) == -GC_ERR_NOSPACE, "small buffer");
    int64_t la = codec_encode(e1, a, sizeof a, x, 256, NULL), lb = codec_encode(e2, b, sizeof b, x, 256, NULL);
    CHECK(la == lb && la > 0 && memcmp(a, b, (size_t)la) == 0, "failed encode left no trace");
    codec_free(e1), codec_free(e2), codec_free(both), codec_free(d2);
    codec_free(enc), codec_free(dec), codec_free(late);
}

/* ---- checkpointed state: a restored codec continues exactly ---- */
static void test_state_checkpoint(void) {
    float x[7][300], y[300];
    Rng r;
    rng_init(&r, 11, 0);
    for (int t = 0; t < 7; t++)
        for (int i = 0; i < 300; i++) x[t][i] = rng_normal(&r) * ldexpf(1.0f, -3 * t);
    /* reference: one encoder, one decoder, 7 frames straight (tables at 0, 2, 4, 6) */
    Codec *enc = mk("gcomp:every=2,chunk=100"), *dec = mk("gcomp");
    uint8_t f[7][4096];
    int64_t len[7];
    for (int t = 0; t < 7; t++) {
        len[t] = codec_encode(enc, f[t], sizeof f[t], x[t], 300, NULL);
        CHECK(len[t] > 0 && codec_decode(dec, y, 300, f[t], (size_t)len[t]) == 0, "straight frame %d", t);
    }
    CHECK(codec_state_max(enc) > 0, "gcomp declares checkpoint state");
    for (int cut = 0; cut <= 6; cut++) {
        Codec *e = mk("gcomp:every=2,chunk=100"), *d = mk("gcomp");
        for (int t = 0; t < cut; t++) {
            uint8_t g[4096];
            int64_t gl = codec_encode(e, g, sizeof g, x[t], 300, NULL);
            CHECK(gl > 0 && codec_decode(d, y, 300, g, (size_t)gl) == 0, "cut %d: frame %d", cut, t);
        }
        uint8_t se[8192], sd[8192];
        int64_t le = codec_state_save(e, se, sizeof se), ld = codec_state_save(d, sd, sizeof sd);
        CHECK(le > 0 && ld > 0 && (size_t)le <= codec_state_max(e), "cut %d: state saved (%lld, %lld bytes)", cut,
              (long long)le, (long long)ld);
        codec_free(e), codec_free(d);
        e = mk("gcomp:every=2,chunk=100"), d = mk("gcomp");
        CHECK(codec_state_load(e, se, (size_t)le) == 0 && codec_state_load(d, sd, (size_t)ld) == 0,
              "cut %d: state restored", cut);
        int same = 1;
        for (int t = cut; t < 7; t++) {
            uint8_t g[4096];
            int64_t gl = codec_encode(e, g, sizeof g, x[t], 300, NULL);
            same &= gl == len[t] && memcmp(g, f[t], (size_t)gl) == 0;
            same &= codec_decode(d, y, 300, f[t], (size_t)len[t]) == 0;
        }
        CHECK(same, "cut %d: restored encoder and decoder continue byte for byte", cut);
        codec_free(e), codec_free(d);
    }
    /* bad blobs: every truncation and trailing byte rejected, flips never crash
     * (ASan build), and a rejected load leaves the codec as it was */
    uint8_t s[8192];
    int64_t ls = codec_state_save(enc, s, sizeof s);
    Codec *e = mk("gcomp:every=2,chunk=100");
    int trunc_ok = 1;
    for (int64_t k = 0; k < ls; k++) trunc_ok &= codec_state_load(e, s, (size_t)k) < 0;
    CHECK(trunc_ok, "every truncated state rejected");
    CHECK(codec_state_load(e, s, (size_t)ls + 1) < 0, "trailing byte rejected");
    s[0] = 9;
    CHECK(codec_state_load(e, s, (size_t)ls) == -GC_ERR_VERSION, "unknown state version rejected");
    s[0] = 1;
    for (int64_t k = 1; k < ls; k++) {
        uint8_t b[8192];
        memcpy(b, s, (size_t)ls);
        b[k] ^= 0x5A;
        (void)codec_state_load(e, b, (size_t)ls);
    }
    Codec *n3 = mk("gcomp:ntheta=3");
    CHECK(codec_state_load(n3, s, (size_t)ls) == -GC_ERR_PARAM, "state of another n_theta rejected");
    uint8_t g[4096];
    int64_t gl = codec_encode(n3, g, sizeof g, x[0], 300, NULL);
    CHECK(gl > 0 && (get_u16(g + 6) & 1), "rejected load left a fresh encoder (it carries a table)");
    Codec *fp = mk("fp32");
    CHECK(codec_state_max(fp) == 0 && codec_state_save(fp, s, sizeof s) == 0, "stateless codec saves nothing");
    CHECK(codec_state_load(fp, s, 4) == -GC_ERR_STATE, "stateless codec refuses a state");
    codec_free(fp), codec_free(n3), codec_free(e), codec_free(enc), codec_free(dec);
}

int main(void) {
    test_huffman_golden();
    test_lut_golden();
    test_frame_golden();
    test_roundtrip();
    test_schedule();
    test_state();
    test_state_checkpoint();
    TEST_END();
}
