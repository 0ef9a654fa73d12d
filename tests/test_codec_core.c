/* Codec core: registry, spec parsing, frame header validation, CRC-32C, bit I/O,
 * and for every codec: a refused frame leaves the output untouched. */
#include "common/rng.h"
#include "compress/bitio.h"
#include "compress/codec.h"
#include "tests/test.h"

static void test_crc(void) {
    /* CRC-32C check value from RFC 3720 / the Castagnoli definition */
    CHECK(crc32c(0, "123456789", 9) == 0xE3069283u, "crc32c check value");
    uint8_t zeros[32] = {0};
    CHECK(crc32c(0, zeros, 32) == 0x8A9136AAu, "crc32c of 32 zero bytes (RFC 3720 B.4)");
    uint8_t ones[32];
    memset(ones, 0xFF, 32);
    CHECK(crc32c(0, ones, 32) == 0x62A8AB43u, "crc32c of 32 0xFF bytes (RFC 3720 B.4)");
    /* incremental == one shot */
    uint32_t a = crc32c(crc32c(0, "12345", 5), "6789", 4);
    CHECK(a == 0xE3069283u, "crc32c incremental");
    /* the tables (the fallback) against what crc32c runs here (the crc32 instruction on
     * x86): every length to 40 at every alignment to 8, then long random pieces */
    CHECK(crc32c_sw(0, "123456789", 9) == 0xE3069283u, "crc32c_sw check value");
    static uint8_t buf[5000];
    Rng r;
    rng_init(&r, 11, 0);
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)rng_u64(&r);
    int bad = 0;
    for (size_t at = 0; at < 8; at++)
        for (size_t len = 0; len <= 40; len++) bad += crc32c(0x1234u, buf + at, len) != crc32c_sw(0x1234u, buf + at, len);
    for (int t = 0; t < 50; t++) {
        size_t at = (size_t)(rng_u64(&r) % 64), len = (size_t)(rng_u64(&r) % (sizeof buf - 64));
        uint32_t c0 = (uint32_t)rng_u64(&r);
        bad += crc32c(c0, buf + at, len) != crc32c_sw(c0, buf + at, len);
    }
    CHECK(bad == 0, "crc32c and its tables differ in %d of 378 cases", bad);
}

/* a CRC in pieces, each from register 0, folded with the zero-byte operators
 * (common/crc32c.h): the GPU's CRC of a frame (compress/codec_cuda.cu) is computed so */
static void test_crc_pieces(void) {
    static uint8_t buf[70000];
    Rng r;
    rng_init(&r, 5, 0);
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)rng_u64(&r);
    for (int trial = 0; trial < 60; trial++) {
        size_t len = trial < 3 ? (size_t)trial : (size_t)(rng_u64(&r) % sizeof buf);
        size_t piece = 1 + (size_t)(rng_u64(&r) % (trial & 1 ? 64 : 9000));
        uint32_t c0 = trial % 3 ? (uint32_t)rng_u64(&r) : 0, s = 0, op[32];
        for (size_t at = 0; at < len; at += piece) {
            size_t k = len - at < piece ? len - at : piece;
            crc32c_zeros_op(op, k);
            s = crc32c_apply_op(op, s) ^ crc32c_raw(buf + at, k);
        }
        uint32_t got = ~(crc32c_zeros(~c0, len) ^ s), want = crc32c(c0, buf, len);
        CHECK(got == want, "crc32c of %zu bytes in pieces of %zu from 0x%08x: 0x%08x, whole 0x%08x", len, piece, c0,
              got, want);
    }
    uint8_t pad[40] = {0};
    memcpy(pad + 9, "123456789", 9);
    CHECK(crc32c_raw(pad, 18) == crc32c_raw("123456789", 9), "zero bytes in front do not change the register from 0");
}

static void test_bitio(void) {
    uint8_t buf[8];
    BitWriter w;
    bw_init(&w, buf, sizeof buf);
    bw_put(&w, 1, 1);    /* 1 */
    bw_put(&w, 0, 2);    /* 00 */
    bw_put(&w, 0x1F, 5); /* 11111 -> byte 0 = 1001 1111 = 0x9F */
    bw_put(&w, 0x5, 3);  /* 101 -> byte 1 = 101x xxxx, padded = 0xA0 */
    size_t n = bw_finish(&w);
    CHECK(n == 2 && buf[0] == 0x9F && buf[1] == 0xA0, "bit writer layout: %zu %02x %02x", n, buf[0], buf[1]);
    BitReader r;
    br_init(&r, buf, n);
    CHECK(br_get(&r, 1) == 1 && br_get(&r, 2) == 0 && br_get(&r, 5) == 0x1F && br_get(&r, 3) == 5,
          "bit reader reads back");
    CHECK(!r.overrun, "no overrun within bounds");
    br_get(&r, 6);
    CHECK(r.overrun, "overrun past the end is flagged");
    bw_init(&w, buf, 1);
    bw_put(&w, 0xFFFF, 16);
    CHECK(w.overflow, "writer overflow is flagged");
}

static void test_parse(void) {
    CodecSpec s;
    char err[256];
    CHECK(codec_parse(&s, "fp32", err, sizeof err) == 0 && s.ops == codec_find("fp32"), "parse fp32");
    CHECK(codec_parse(&s, "nosuch", err, sizeof err) == -GC_ERR_PARAM, "unknown codec rejected");
    CHECK(strstr(err, "nosuch") != NULL, "error names the codec: %s", err);
    CHECK(codec_parse(&s, "fp32:x=1", err, sizeof err) == -GC_ERR_PARAM, "unknown key rejected");
    CHECK(codec_parse(&s, "fp32:", err, sizeof err) == 0, "empty parameter list accepted");
    for (int i = 0; i < codec_count(); i++) {
        const CodecOps *o = codec_ops_at(i);
        char text[256], back[256];
        codec_spec_default(&s, o);
        codec_spec_str(text, sizeof text, &s);
        CodecSpec s2;
        int rc = codec_parse(&s2, text, err, sizeof err);
        codec_spec_str(back, sizeof back, &s2);
        CHECK(rc == 0 && strcmp(text, back) == 0, "spec round trip %s -> %s (%s)", text, back, rc ? err : "");
        CHECK(codec_find_id(o->id) == o, "id lookup %s", o->name);
        for (int k = 0; k < o->nparams; k++) {
            char bad[128];
            snprintf(bad, sizeof bad, "%s:%s=%.17g", o->name, o->params[k].key,
                     o->params[k].max + 1.5 + fabs(o->params[k].max) * 1e-9);
            CHECK(codec_parse(&s2, bad, err, sizeof err) == -GC_ERR_PARAM, "out of range rejected: %s", bad);
            if (o->params[k].max_open) { /* [min, max): max itself is refused, and the message says so */
                snprintf(bad, sizeof bad, "%s:%s=%.17g", o->name, o->params[k].key, o->params[k].max);
                char want[64];
                snprintf(want, sizeof want, "out of range [%g, %g)", o->params[k].min, o->params[k].max);
                CHECK(codec_parse(&s2, bad, err, sizeof err) == -GC_ERR_PARAM && strstr(err, want),
                      "the open bound rejected: %s (%s)", bad, err);
            }
            snprintf(bad, sizeof bad, "%s:%s=abc", o->name, o->params[k].key);
            CHECK(codec_parse(&s2, bad, err, sizeof err) == -GC_ERR_PARAM, "non-number rejected: %s", bad);
        }
    }
}

static void test_frame(void) {
    CodecSpec s;
    char err[128];
    codec_parse(&s, "fp32", err, sizeof err);
    Codec *c = codec_new(&s);
    float x[5] = {1, -2, 3.5f, 0, 1e-30f}, y[5];
    uint8_t frame[64];
    int64_t len = codec_encode(c, frame, sizeof frame, x, 5, NULL);
    CHECK(len == CODEC_HEADER_SIZE + 20, "fp32 frame length %lld", (long long)len);
    CHECK(memcmp(frame, "GCXF", 4) == 0 && frame[4] == 1 && frame[5] == CODEC_FP32, "header bytes");
    CHECK(codec_decode(c, y, 5, frame, (size_t)len) == 0 && memcmp(x, y, sizeof x) == 0, "fp32 exact round trip");
    float acc[5] = {1, 1, 1, 1, 1};
    CHECK(codec_decode_acc(c, acc, 5, 0.5f, frame, (size_t)len) == 0 && acc[1] == 0.0f && acc[2] == 2.75f,
          "decode-accumulate");
    CHECK(codec_decode(c, y, 4, frame, (size_t)len) == -GC_ERR_COUNT, "count mismatch");
    CHECK(codec_encode(c, frame, 30, x, 5, NULL) == -GC_ERR_NOSPACE, "small buffer");
    for (size_t k = 0; k < (size_t)len; k++)
        CHECK(codec_decode(c, y, 5, frame, k) < 0, "truncation to %zu rejected", k);
    uint8_t big[65];
    memcpy(big, frame, (size_t)len);
    big[len] = 0;
    CHECK(codec_decode(c, y, 5, big, (size_t)len + 1) == -GC_ERR_OVERSIZED, "trailing byte rejected");
    for (size_t k = 0; k < (size_t)len; k++) {
        frame[k] ^= 0x10;
        CHECK(codec_decode(c, y, 5, frame, (size_t)len) < 0, "bit flip at byte %zu rejected", k);
        frame[k] ^= 0x10;
    }
    codec_free(c);
}

/* Every codec, through the public decode and decode-accumulate: a hostile frame
 * (a valid frame truncated, extended or with bytes changed, its CRC recomputed
 * so the payload reaches the decoder) that is refused leaves every bit of the
 * output as it was. The decoder has seen a valid frame first (stateful codecs:
 * gcomp's held table). Sizes cross gcomp's 64-value minimum chunk and the
 * sparse codecs' several kept values. */
static void refresh(uint8_t *frame, size_t plen) {
    put_u32(frame + 12, (uint32_t)plen);
    put_u32(frame + 16, crc32c(0, frame + CODEC_HEADER_SIZE, plen));
}

static void test_refused_untouched(void) {
    static const char *const extra[] = {"gcomp:chunk=64", "3lc:s=1.9"};
    const size_t n = 3000;
    Rng r;
    rng_init(&r, 77, 0);
    float *x = malloc(n * 4), *pat = malloc(n * 4), *y = malloc(n * 4);
    for (size_t i = 0; i < n; i++) pat[i] = (float)(i % 97) * 0.125f - 3.0f;
    for (int k = 0; k < codec_count() + 2; k++) {
        CodecSpec s;
        char err[128];
        if (k < codec_count()) codec_spec_default(&s, codec_ops_at(k));
        else codec_parse(&s, extra[k - codec_count()], err, sizeof err);
        char name[256];
        codec_spec_str(name, sizeof name, &s);
        Codec *enc = codec_new(&s), *dec = codec_new(&s);
        size_t cap = codec_max_frame(enc, n);
        uint8_t *f = malloc(cap), *g = malloc(cap + 8);
        for (size_t i = 0; i < n; i++) x[i] = rng_uniform(&r) < 0.2f ? 0.0f : rng_normal(&r) * 1e-2f;
        CodecSide side = {.seed = 5};
        int64_t l0 = codec_encode(enc, f, cap, x, n, &side); /* the first frame: seen by dec */
        int ok = l0 > 0 && codec_decode(dec, y, n, f, (size_t)l0) == 0;
        for (size_t i = 0; i < n; i++) x[i] = rng_uniform(&r) < 0.2f ? 0.0f : rng_normal(&r) * 1e-3f;
        int64_t len = codec_encode(enc, f, cap, x, n, &side);
        CHECK(ok && len > 0, "%s: encodes and decodes", name);
        if (!ok || len <= 0) goto next;
        size_t plen = (size_t)len - CODEC_HEADER_SIZE, refused = 0, changed = 0;
        for (int m = 0; m < 400; m++) {
            memcpy(g, f, (size_t)len);
            size_t glen = plen;
            if (m < 8) /* truncated at the end or to a random length, or extended */
                glen = m < 3 ? plen - 1 - (size_t)m : m < 6 ? rng_below(&r, plen) : plen + 1;
            else /* 1..3 bytes changed anywhere, or in the last 16 (the last values) */
                for (int e = 0, edits = 1 + (int)rng_below(&r, 3); e < edits; e++) {
                    size_t at = m & 1 ? rng_below(&r, plen) : plen - 1 - rng_below(&r, plen < 16 ? plen : 16);
                    g[CODEC_HEADER_SIZE + at] ^= (uint8_t)(1 + rng_below(&r, 255));
                }
            if (glen > plen) g[CODEC_HEADER_SIZE + plen] = 0;
            refresh(g, glen);
            for (int acc = 0; acc < 2; acc++) {
                memcpy(y, pat, n * 4);
                int rc = acc ? codec_decode_acc(dec, y, n, 0.5f, g, CODEC_HEADER_SIZE + glen)
                             : codec_decode(dec, y, n, g, CODEC_HEADER_SIZE + glen);
                if (rc == 0) continue;
                refused++;
                changed += memcmp(y, pat, n * 4) != 0;
            }
        }
        printf("  %-40s %3zu of 800 hostile decodes refused\n", name, refused);
        CHECK(refused > 0 && changed == 0, "%s: a refused frame leaves out untouched (%zu refused, %zu changed it)",
              name, refused, changed);
    next:
        codec_free(enc);
        codec_free(dec);
        free(f), free(g);
    }
    free(x), free(pat), free(y);
}

int main(void) {
    test_crc();
    test_crc_pieces();
    test_bitio();
    test_parse();
    test_frame();
    test_refused_untouched();
    TEST_END();
}
