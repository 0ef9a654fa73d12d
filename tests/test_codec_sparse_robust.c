/* Sparse codec decoders (topk, dgc, sbc) on hostile input: every truncation of
 * a valid payload, trailing bytes, each field made inconsistent on purpose
 * (with the error code the format prescribes), random corruption of payloads
 * (no crash, no out-of-bounds: this binary also runs under ASan + UBSan) and
 * of whole frames (the CRC rejects it). */
#include <math.h>
#include <stdio.h>

#include "tests/test.h"
#include "tests/test_codec_sparse.h"

typedef struct {
    uint8_t *buf; /* payload */
    size_t len, n;
} Payload;

static Payload make_payload(Codec *c, const float *x, size_t n, double density) {
    size_t cap = codec_max_frame(c, n);
    uint8_t *frame = malloc(cap);
    CodecSide side;
    memset(&side, 0, sizeof side);
    side.density = density;
    int64_t len = codec_encode(c, frame, cap, x, n, &side);
    Payload p = {NULL, 0, n};
    if (len >= CODEC_HEADER_SIZE) {
        p.len = (size_t)len - CODEC_HEADER_SIZE;
        p.buf = malloc(p.len + 16);
        memcpy(p.buf, frame + CODEC_HEADER_SIZE, p.len);
    }
    free(frame);
    return p;
}

/* decode a payload of len bytes from an exact-size heap copy (ASan sees any overread) */
static int dec(Codec *c, const uint8_t *buf, size_t len, size_t n, uint16_t flags, float *out, int acc) {
    uint8_t *copy = malloc(len ? len : 1);
    memcpy(copy, buf, len);
    int rc = c->spec.ops->decode(c, out, n, 0.5f, acc, copy, len, flags);
    free(copy);
    return rc;
}

static void test_truncations_and_trailing(Codec *c, const Payload *p, const char *what) {
    float *out = malloc((p->n + 1) * 4);
    CHECK(dec(c, p->buf, p->len, p->n, 0, out, 0) == 0, "%s: valid payload decodes", what);
    int bad = 0;
    for (size_t l = 0; l < p->len; l++) {
        int rc = dec(c, p->buf, l, p->n, 0, out, l & 1);
        if (rc != -GC_ERR_TRUNCATED && bad++ < 3) printf("  %s: truncation to %zu of %zu gave %d\n", what, l, p->len, rc);
    }
    CHECK(bad == 0, "%s: all %zu truncations give TRUNCATED", what, p->len);
    uint8_t *ext = malloc(p->len + 2);
    memcpy(ext, p->buf, p->len);
    ext[p->len] = 0;
    ext[p->len + 1] = 0xFF;
    int r1 = dec(c, ext, p->len + 1, p->n, 0, out, 0), r2 = dec(c, ext, p->len + 2, p->n, 0, out, 0);
    CHECK(r1 == -GC_ERR_OVERSIZED && r2 == -GC_ERR_OVERSIZED, "%s: trailing bytes give OVERSIZED (%d %d)", what, r1, r2);
    CHECK(dec(c, p->buf, p->len, p->n, 1, out, 0) == -GC_ERR_CORRUPT, "%s: nonzero flags rejected", what);
    free(ext);
    free(out);
}

static void test_random_corruption(Codec *c, const Payload *p, const char *what, uint64_t seed) {
    Rng r;
    rng_init(&r, seed, 0);
    float *out = malloc((p->n + 1) * 4);
    uint8_t *m = malloc(p->len + 16);
    int accepted = 0, trials = 400;
    for (int t = 0; t < trials; t++) {
        size_t len = p->len;
        memcpy(m, p->buf, len);
        int edits = 1 + (int)rng_below(&r, 3);
        for (int e = 0; e < edits && len; e++) {
            if (rng_below(&r, 2)) m[rng_below(&r, len)] ^= (uint8_t)(1u << rng_below(&r, 8));
            else m[rng_below(&r, len)] = (uint8_t)rng_u64(&r);
        }
        int rc = dec(c, m, len, p->n, 0, out, t & 1);
        accepted += rc == 0;
        if (rc > 0 || rc <= -GC_ERR_COUNT_) CHECK(0, "%s: decode returned %d", what, rc);
    }
    printf("  %-28s %d of %d random payload corruptions still decode (value bits)\n", what, accepted, trials);
    /* through the frame, the CRC catches every corruption of the payload */
    size_t cap = codec_max_frame(c, p->n);
    uint8_t *frame = malloc(cap + 1);
    memcpy(frame, CODEC_MAGIC, 4);
    frame[4] = CODEC_VERSION;
    frame[5] = (uint8_t)c->spec.ops->id;
    put_u16(frame + 6, 0);
    put_u32(frame + 8, (uint32_t)p->n);
    put_u32(frame + 12, (uint32_t)p->len);
    put_u32(frame + 16, crc32c(0, p->buf, p->len));
    memcpy(frame + CODEC_HEADER_SIZE, p->buf, p->len);
    CHECK(codec_decode(c, out, p->n, frame, CODEC_HEADER_SIZE + p->len) == 0, "%s: frame decodes", what);
    int caught = 0;
    for (int t = 0; t < 100 && p->len; t++) {
        size_t at = CODEC_HEADER_SIZE + rng_below(&r, p->len);
        uint8_t flip = (uint8_t)(1u << rng_below(&r, 8));
        frame[at] ^= flip;
        caught += codec_decode(c, out, p->n, frame, CODEC_HEADER_SIZE + p->len) == -GC_ERR_CHECKSUM;
        frame[at] ^= flip;
    }
    CHECK(!p->len || caught == 100, "%s: CRC rejects %d of 100 corrupted frames", what, caught);
    free(frame);
    free(m);
    free(out);
}

/* write a field, decode, expect code */
static void expect(Codec *c, const uint8_t *buf, size_t len, size_t n, int want, const char *what) {
    float *out = malloc((n + 1) * 4);
    for (size_t i = 0; i < n; i++) out[i] = 3.0f;
    int rc = dec(c, buf, len, n, 0, out, 0);
    int untouched = 1;
    for (size_t i = 0; i < n && want != 0; i++) untouched &= out[i] == 3.0f;
    CHECK(rc == want && untouched, "%s: got %d (%s) want %d (%s)%s", what, rc, gc_strerror(rc), want,
          gc_strerror(want), untouched ? "" : ", and out was written");
    free(out);
}

static void put_f32_bits(uint8_t *p, uint32_t u) { put_u32(p, u); }

static void test_fields_topk(void) {
    Codec *c = make_codec("topk:ratio=0.3");
    float x[10] = {0.1f, -3, 0, 2, 0.5f, -0.2f, 0, 4, 1, -1}; /* payload: k=3, bitmap 51 00, 3 values */
    Payload p = make_payload(c, x, 10, 0);
    uint8_t b[64];
    memcpy(b, p.buf, p.len);
    put_u32(b, 11);
    expect(c, b, p.len, 10, -GC_ERR_CORRUPT, "topk count > n");
    memcpy(b, p.buf, p.len);
    put_u32(b, 2);
    expect(c, b, p.len - 4, 10, -GC_ERR_CORRUPT, "topk popcount 3 != count 2");
    memcpy(b, p.buf, p.len);
    b[4] ^= 0x80; /* a fourth bit: popcount 4 */
    expect(c, b, p.len, 10, -GC_ERR_CORRUPT, "topk bitmap bit added");
    memcpy(b, p.buf, p.len);
    b[5] |= 0x20; /* bit of index 10: padding */
    b[4] &= (uint8_t)~0x01; /* keep popcount 3 */
    expect(c, b, p.len, 10, -GC_ERR_CORRUPT, "topk padding bit set");
    memcpy(b, p.buf, p.len);
    put_f32_bits(b + 6, 0x80000000u);
    expect(c, b, p.len, 10, -GC_ERR_CORRUPT, "topk value -0");
    put_f32_bits(b + 6, 0x7FC00000u);
    expect(c, b, p.len, 10, -GC_ERR_CORRUPT, "topk value NaN");
    put_f32_bits(b + 6, 0xFF800000u);
    expect(c, b, p.len, 10, -GC_ERR_CORRUPT, "topk value -inf");
    expect(c, p.buf, p.len, 17, -GC_ERR_TRUNCATED, "topk payload for n=10 read as n=17 (3-byte bitmap)");
    free(p.buf);
    codec_free(c);
}

static void test_fields_dgc(void) {
    Codec *c = make_codec("dgc");
    size_t n = 70000;
    float *x = calloc(n, 4);
    x[2] = 1.5f;
    x[3] = -2.0f;
    x[65540] = 3.0f;
    x[69999] = -0.25f;
    Payload p = make_payload(c, x, n, 4.0 / 70000.0);
    /* payload: 4 | 4 values | 02 00, 00 00, FF FF 01 00, 6A 11 */
    size_t runs = 4 + 16;
    uint8_t b[64];
    memcpy(b, p.buf, p.len);
    put_u32(b, 70001);
    expect(c, b, p.len, n, -GC_ERR_CORRUPT, "dgc count > n");
    memcpy(b, p.buf, p.len);
    put_u16(b + runs + 8, 0x116B); /* last value at 70000 == n */
    expect(c, b, p.len, n, -GC_ERR_CORRUPT, "dgc position n");
    put_u16(b + runs + 8, 0xFFFE);
    expect(c, b, p.len, n, -GC_ERR_CORRUPT, "dgc position far past n");
    memcpy(b, p.buf, p.len);
    put_u16(b + runs + 8, 0xFFFF); /* skip where the last value's run was: past n */
    expect(c, b, p.len, n, -GC_ERR_CORRUPT, "dgc last entry a skip past n");
    memcpy(b, p.buf, p.len);
    put_u16(b + runs + 0, 0xFFFF); /* first run a skip: 65535 + 0 -> the values shift, the payload ends early */
    expect(c, b, p.len, n, -GC_ERR_CORRUPT, "dgc skip shifts the last value past n");
    memcpy(b, p.buf, p.len);
    put_u32(b, 3); /* 3 values: the 4 bytes of the 4th value are read as runs 00 00 80 BE ... */
    expect(c, b, p.len, n, -GC_ERR_OVERSIZED, "dgc count 3 of 4");
    memcpy(b, p.buf, p.len);
    put_u16(b + runs + 6, 0xFFFF); /* second skip: 2*65535 + 4 > n */
    expect(c, b, p.len, n, -GC_ERR_CORRUPT, "dgc skips past n");
    memcpy(b, p.buf, p.len);
    put_u16(b + p.len, 0xFFFF);
    expect(c, b, p.len + 2, n, -GC_ERR_OVERSIZED, "dgc trailing skip entry");
    memcpy(b, p.buf, p.len);
    put_f32_bits(b + 8, 0);
    expect(c, b, p.len, n, -GC_ERR_CORRUPT, "dgc value +0");
    put_f32_bits(b + 8, 0xFFC00001u);
    expect(c, b, p.len, n, -GC_ERR_CORRUPT, "dgc value NaN");
    expect(c, p.buf, p.len, 69999, -GC_ERR_CORRUPT, "dgc frame of n=70000 read with n=69999");
    free(p.buf);
    free(x);
    codec_free(c);
}

static void test_fields_sbc(void) {
    Codec *c = make_codec("sbc:p=0.1");
    float x[20];
    for (int i = 0; i < 20; i++) x[i] = i % 2 ? 0.01f : -0.01f;
    x[4] = -1.0f;
    x[7] = 2.0f;
    x[12] = -3.0f;
    x[13] = 1.0f;
    Payload p = make_payload(c, x, 20, 0); /* 02 00 00 00 | -2.0 | 03 | 0x47 */
    uint8_t b[64];
    memcpy(b, p.buf, p.len);
    put_u32(b, 21);
    expect(c, b, p.len, 20, -GC_ERR_CORRUPT, "sbc count > n");
    memcpy(b, p.buf, p.len);
    put_u32(b, 3);
    expect(c, b, p.len, 20, -GC_ERR_TRUNCATED, "sbc count 3, two codes");
    memcpy(b, p.buf, p.len);
    put_f32_bits(b + 4, 0x7FC00000u);
    expect(c, b, p.len, 20, -GC_ERR_CORRUPT, "sbc NaN mean");
    put_f32_bits(b + 4, 0x7F800000u);
    expect(c, b, p.len, 20, -GC_ERR_CORRUPT, "sbc infinite mean");
    put_f32_bits(b + 4, 0);
    expect(c, b, p.len, 20, -GC_ERR_CORRUPT, "sbc zero mean with positions");
    memcpy(b, p.buf, p.len);
    b[8] = 32;
    expect(c, b, p.len, 20, -GC_ERR_CORRUPT, "sbc Rice parameter 32");
    memcpy(b, p.buf, p.len);
    b[9] = 0x4B; /* 0100 | 10111 (+ 7 bits of padding): second gap 15, position 20 == n */
    b[10] = 0x80;
    expect(c, b, p.len + 1, 20, -GC_ERR_CORRUPT, "sbc position n");
    b[10] = 0x00; /* 0100 | 1011 0|000 0000: second gap 14 -> position 19, valid */
    expect(c, b, p.len + 1, 20, 0, "sbc position n-1");
    memcpy(b, p.buf, p.len);
    b[9] = 0xFF; /* unary runs off the end */
    expect(c, b, p.len, 20, -GC_ERR_CORRUPT, "sbc unary quotient past n");
    memcpy(b, p.buf, p.len);
    b[8] = 2; /* b = 2: 010|001|11 -> two codes + padding 11 */
    expect(c, b, p.len, 20, -GC_ERR_CORRUPT, "sbc nonzero padding");
    memcpy(b, p.buf, p.len);
    put_u32(b, 1); /* one code 0100, then 0111 as padding? it is >= 4 bits of nonzero padding */
    expect(c, b, p.len, 20, -GC_ERR_CORRUPT, "sbc fewer codes than bits");
    memcpy(b, p.buf, p.len);
    put_u32(b, 0);
    put_f32_bits(b + 4, 0);
    expect(c, b, 9, 20, 0, "sbc empty payload decodes");
    put_f32_bits(b + 4, 0x3F800000u);
    expect(c, b, 9, 20, -GC_ERR_CORRUPT, "sbc nonzero mean without positions");
    put_f32_bits(b + 4, 0);
    expect(c, b, 10, 20, -GC_ERR_OVERSIZED, "sbc empty payload plus a byte");
    free(p.buf);
    codec_free(c);
}

int main(void) {
    static const char *specs[] = {"topk", "dgc", "sbc", "topk:ratio=0.5", "dgc:density=0.02", "sbc:p=0.02"};
    static const size_t ns[] = {0, 1, 13, 300, 70000};
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        Codec *c = make_codec(specs[s]);
        for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
            size_t n = ns[a];
            float *x = malloc((n + 1) * 4);
            for (int kind = 0; kind < 8; kind += (n > 1000 ? (kind == 6 ? 1 : 3) : 1)) {
                fill_vector(x, n, 77 + a, kind);
                if (kind == 7 && n == 70000) { /* long zero runs for dgc's skip entries */
                    memset(x, 0, n * 4);
                    x[1] = 1;
                    x[68000] = -2;
                    x[68001] = 3;
                }
                Payload p = make_payload(c, x, n, 0);
                char what[96];
                snprintf(what, sizeof what, "%s n=%zu kind=%d", specs[s], n, kind);
                CHECK(p.buf != NULL, "%s: encodes", what);
                if (!p.buf) continue;
                if (p.len < 20000) test_truncations_and_trailing(c, &p, what);
                if (kind == 0 || kind == 7) test_random_corruption(c, &p, what, 1000 + s * 10 + a);
                free(p.buf);
            }
            free(x);
        }
        codec_free(c);
    }
    test_fields_topk();
    test_fields_dgc();
    test_fields_sbc();
    TEST_END();
}
