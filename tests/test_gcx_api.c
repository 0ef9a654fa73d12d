/* The public C API (lib/gcx.h) on hostile input, for every codec (also run under
 * AddressSanitizer + UBSan, as every test): NULL pointers and short buffers are
 * error returns; a damaged frame (truncated, extended, a flipped bit, a flipped
 * bit with the CRC made to match so the codec's own decoder judges it) is
 * refused or decodes, and a refused frame leaves out untouched (gcx_decode and
 * gcx_decode_acc); gcx_encode's repr is the decoded frame; state blobs, help
 * text truncation, stats against a direct computation, error messages. */
#include "common/crc32c.h"
#include "lib/gcx.h"
#include "tests/test.h"

#define N 3000

static float x[N];

/* a flipped bit at byte at, and the CRC made to match when fix */
static void damage(uint8_t *f, size_t len, size_t at, int bit, int fix) {
    f[at] ^= (uint8_t)(1u << bit);
    if (fix && len >= 20) {
        uint32_t c = crc32c(0, f + 20, len - 20);
        f[16] = (uint8_t)c, f[17] = (uint8_t)(c >> 8), f[18] = (uint8_t)(c >> 16), f[19] = (uint8_t)(c >> 24);
    }
}

/* out[] must be untouched (all 7) after a refused decode */
static int untouched(const float *out, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (out[i] != 7.0f) return 0;
    return 1;
}

static void test_codec(const char *name) {
    char err[256];
    gcx_codec *enc = gcx_codec_new(name, err, sizeof err), *dec = gcx_codec_new(name, err, sizeof err);
    CHECK(enc && dec && err[0] == 0, "%s: new: %s", name, err);
    if (!enc || !dec) return;
    size_t cap = gcx_max_frame(enc, N);
    uint8_t *frame = malloc(cap + 1), *g = malloc(cap + 1);
    float *repr = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N), *out = malloc(sizeof(float) * N);
    int64_t len = gcx_encode(enc, frame, cap, x, N, 5, repr);
    CHECK(len > 20 && (size_t)len <= cap, "%s: encode %lld (%s)", name, (long long)len, gcx_codec_error(enc));
    if (len <= 20) return;
    const char *fname = NULL;
    uint32_t count = 0;
    CHECK(gcx_frame_info(frame, (size_t)len, &fname, &count) == 0 && fname && !strcmp(fname, name) && count == N,
          "%s: frame_info", name);
    CHECK(gcx_decode(dec, y, N, frame, (size_t)len) == 0 && !memcmp(y, repr, sizeof(float) * N),
          "%s: repr is the decoded frame", name);
    /* decode_acc: out += w * decoded */
    for (int i = 0; i < N; i++) out[i] = 1.0f;
    gcx_codec *d2 = gcx_codec_new(name, NULL, 0);
    int ok = gcx_decode_acc(d2, out, N, 0.5f, frame, (size_t)len) == 0;
    for (int i = 0; i < N && ok; i++) ok = out[i] == 1.0f + 0.5f * y[i];
    CHECK(ok, "%s: decode_acc", name);
    gcx_codec_free(d2);

    /* a short frame buffer: NOSPACE, nothing written past cap */
    size_t small = (size_t)len / 2;
    frame[small] = 0xAB;
    gcx_codec *e2 = gcx_codec_new(name, NULL, 0);
    int64_t rc = gcx_encode(e2, frame, small, x, N, 5, NULL);
    CHECK(rc == -GCX_ERR_NOSPACE && frame[small] == 0xAB && strstr(gcx_codec_error(e2), "too small"),
          "%s: short buffer: %lld %s", name, (long long)rc, gcx_codec_error(e2));
    rc = gcx_encode(e2, frame, cap, x, N, 5, NULL); /* the frame again, for what follows */
    CHECK(rc == len, "%s: encode after a refused one", name);
    gcx_codec_free(e2);

    /* damaged frames: refused with out untouched, or decoded (a CRC-matching payload may be valid) */
    int refused = 0, bad_touch = 0, accepted_plain = 0;
    for (int t = 0; t < 400; t++) {
        size_t glen = (size_t)len;
        memcpy(g, frame, (size_t)len);
        int fix = t % 2;
        if (t < 40) glen = (size_t)(t * 7) % (size_t)len; /* truncated */
        else if (t < 50) glen = (size_t)len + 1, g[len] = 0; /* one byte more */
        else damage(g, glen, (size_t)(t * 2654435761u) % glen, t % 8, fix);
        for (int i = 0; i < N; i++) out[i] = 7.0f;
        gcx_codec *d = gcx_codec_new(name, NULL, 0);
        int r1 = gcx_decode(d, out, N, g, glen);
        if (r1) bad_touch += !untouched(out, N);
        for (int i = 0; i < N; i++) out[i] = 7.0f;
        int r2 = gcx_decode_acc(d, out, N, 1.0f, g, glen);
        if (r2) bad_touch += !untouched(out, N);
        refused += r1 != 0;
        accepted_plain += r1 == 0 && (!fix || t < 50) && memcmp(g, frame, (size_t)len) != 0;
        gcx_codec_free(d);
    }
    CHECK(bad_touch == 0, "%s: %d refused decodes wrote to out", name, bad_touch);
    CHECK(accepted_plain == 0, "%s: %d damaged frames without a matching CRC decoded", name, accepted_plain);
    CHECK(refused >= 225, "%s: %d of 400 damaged frames refused", name, refused);

    /* wrong size, another codec's decoder, NULL pointers */
    CHECK(gcx_decode(dec, y, N - 1, frame, (size_t)len) == -GCX_ERR_COUNT &&
              strstr(gcx_codec_error(dec), "holds 3000 values, 2999 were asked for"),
          "%s: wrong n: %s", name, gcx_codec_error(dec));
    gcx_codec *other = gcx_codec_new(strcmp(name, "fp32") ? "fp32" : "fp16", NULL, 0);
    CHECK(gcx_decode(other, y, N, frame, (size_t)len) == -GCX_ERR_CODEC && strstr(gcx_codec_error(other), name),
          "%s: foreign decoder: %s", name, gcx_codec_error(other));
    gcx_codec_free(other);
    CHECK(gcx_decode(dec, NULL, N, frame, (size_t)len) == -GCX_ERR_PARAM, "%s: NULL out", name);
    CHECK(gcx_decode(dec, y, N, NULL, (size_t)len) == -GCX_ERR_PARAM, "%s: NULL frame", name);
    CHECK(gcx_encode(enc, frame, cap, NULL, N, 0, NULL) == -GCX_ERR_PARAM, "%s: NULL x", name);
    CHECK(gcx_encode(enc, NULL, cap, x, N, 0, NULL) == -GCX_ERR_PARAM, "%s: NULL frame", name);
    /* non-finite input */
    float nan[3] = {1.0f, NAN, 2.0f};
    rc = gcx_encode(enc, frame, cap, nan, 3, 0, NULL);
    if (strcmp(name, "fp32") && strcmp(name, "fp16") && strcmp(name, "gcomp")) /* these carry NaN and inf */
        CHECK(rc == -GCX_ERR_PARAM && strstr(gcx_codec_error(enc), "value 1 is NaN"), "%s: NaN: %lld %s", name,
              (long long)rc, gcx_codec_error(enc));
    free(frame);
    free(g);
    free(repr);
    free(y);
    free(out);
    gcx_codec_free(enc);
    gcx_codec_free(dec);
}

static void test_misc(void) {
    char err[256] = "x", buf[8];
    CHECK(gcx_api_version() == GCX_API_VERSION && gcx_version()[0], "versions");
    CHECK(gcx_codec_count() >= 12 && gcx_codec_name(-1) == NULL && gcx_codec_name(gcx_codec_count()) == NULL &&
              gcx_codec_summary(0) && !strcmp(gcx_codec_name(0), "fp32"),
          "codec list");
    CHECK(!gcx_codec_new("sbc:p=5", err, sizeof err) && strstr(err, "out of range"), "bad spec: %s", err);
    CHECK(!gcx_codec_new("nope", err, sizeof err) && strstr(err, "unknown codec 'nope'"), "unknown: %s", err);
    CHECK(!gcx_codec_new(NULL, err, sizeof err) && strstr(err, "NULL"), "NULL spec");
    CHECK(!gcx_codec_new("3lc:s=2", NULL, 0), "bad spec without an err buffer");
    size_t need = gcx_codec_help(NULL, 0);
    char *help = malloc(need + 1);
    CHECK(need > 500 && gcx_codec_help(help, need + 1) == need && strlen(help) == need && strstr(help, "gcomp"),
          "help text of %zu bytes", need);
    CHECK(gcx_codec_help(buf, sizeof buf) == need && strlen(buf) == sizeof buf - 1, "help truncated");
    free(help);
    gcx_codec *c = gcx_codec_new("3lc:s=1.5", NULL, 0);
    CHECK(gcx_codec_spec(c, buf, sizeof buf) == strlen("3lc:s=1.5") && !strcmp(buf, "3lc:s=1"),
          "spec truncated: %s", buf);
    CHECK(!strcmp(gcx_codec_name_of(c), "3lc"), "name_of");
    CHECK(gcx_codec_set_threads(c, -1) == -GCX_ERR_PARAM && gcx_codec_set_threads(c, 2) == 0, "threads");
    CHECK(gcx_max_frame(c, (size_t)1 << 33) == 0, "max_frame of too many values");
    CHECK(gcx_state_max(c) == 0 && gcx_state_save(c, buf, 0) == 0 && gcx_state_load(c, buf, 1) == -GCX_ERR_STATE,
          "stateless codec: no state");
    gcx_codec_free(c);
    gcx_codec_free(NULL);
    CHECK(gcx_encode(NULL, buf, 8, x, 1, 0, NULL) == -GCX_ERR_PARAM && gcx_decode(NULL, x, 1, buf, 8) == -GCX_ERR_PARAM,
          "NULL handle");
    CHECK(strstr(gcx_strerror(-GCX_ERR_CHECKSUM), "checksum") && strstr(gcx_strerror(GCX_ERR_COUNT), "count") &&
              !strcmp(gcx_strerror(999), "unknown error"),
          "strerror");
    CHECK(gcx_frame_info(NULL, 0, NULL, NULL) == -GCX_ERR_PARAM && gcx_frame_info("GCXF", 4, NULL, NULL) ==
                                                                       -GCX_ERR_TRUNCATED,
          "frame_info of nothing");

    /* gcomp's state: save after two frames, load elsewhere, the same third frame; bad blobs refused */
    gcx_codec *a = gcx_codec_new("gcomp:every=2", NULL, 0), *b = gcx_codec_new("gcomp:every=2", NULL, 0);
    size_t cap = gcx_max_frame(a, 1000), smax = gcx_state_max(a);
    uint8_t *f1 = malloc(cap), *f2 = malloc(cap), *blob = malloc(smax);
    gcx_encode(a, f1, cap, x, 1000, 0, NULL);
    gcx_encode(a, f1, cap, x + 1000, 1000, 0, NULL);
    int64_t bl = gcx_state_save(a, blob, smax);
    CHECK(bl > 0 && gcx_state_save(a, blob, smax - 1) == -GCX_ERR_NOSPACE, "state save %lld", (long long)bl);
    CHECK(gcx_state_load(b, blob, 3) < 0 && strstr(gcx_codec_error(b), "does not load"), "a short blob refused");
    CHECK(gcx_state_load(b, blob, (size_t)bl) == 0, "state load");
    int64_t l1 = gcx_encode(a, f1, cap, x + 2000, 1000, 0, NULL), l2 = gcx_encode(b, f2, cap, x + 2000, 1000, 0, NULL);
    CHECK(l1 > 0 && l1 == l2 && !memcmp(f1, f2, (size_t)l1), "the loaded state gives the same frame");
    free(f1);
    free(f2);
    free(blob);
    gcx_codec_free(a);
    gcx_codec_free(b);

    /* stats: 3 frames of 1000, errors as computed here */
    double s[GCX_STAT_COUNT_ + 2];
    s[GCX_STAT_COUNT_] = -1;
    CHECK(gcx_stats("fp16", x, N, 1000, 0, 0, s, GCX_STAT_COUNT_, err, sizeof err) == 0 && err[0] == 0, "stats");
    double maxe = 0, se = 0;
    gcx_codec *f = gcx_codec_new("fp16", NULL, 0);
    float *y = malloc(sizeof(float) * N);
    uint8_t *fr = malloc(gcx_max_frame(f, N));
    int64_t fl = gcx_encode(f, fr, gcx_max_frame(f, N), x, N, 0, NULL);
    gcx_decode(f, y, N, fr, (size_t)fl);
    for (int i = 0; i < N; i++) {
        double e = fabs((double)y[i] - x[i]);
        maxe = e > maxe ? e : maxe;
        se += e * e;
    }
    CHECK(s[GCX_STAT_VALUES] == N && s[GCX_STAT_FRAMES] == 3 && s[GCX_STAT_BYTES] == 3 * (20 + 2000) &&
              s[GCX_STAT_MAX_ERR] == maxe && fabs(s[GCX_STAT_RMS_ERR] - sqrt(se / N)) < 1e-15 &&
              s[GCX_STAT_RATIO] == 32.0 / s[GCX_STAT_BITS_PER_VALUE] && s[GCX_STAT_COUNT_] == -1,
          "stats values: %g frames, %g bytes, max err %g vs %g", s[GCX_STAT_FRAMES], s[GCX_STAT_BYTES],
          s[GCX_STAT_MAX_ERR], maxe);
    free(y);
    free(fr);
    gcx_codec_free(f);
    CHECK(gcx_stats("int8", (float[]){1, NAN}, 2, 0, 0, 0, s, 4, err, sizeof err) == -GCX_ERR_PARAM &&
              strstr(err, "value 1 is NaN"),
          "stats of NaN: %s", err);
    CHECK(gcx_stats("sbc:x=1", x, N, 0, 0, 0, s, 4, err, sizeof err) == -GCX_ERR_PARAM && strstr(err, "'x'"),
          "stats with a bad spec: %s", err);
    CHECK(gcx_stats("sbc", NULL, N, 0, 0, 0, s, 4, err, sizeof err) == -GCX_ERR_PARAM, "stats of NULL");
}

int main(void) {
    for (int i = 0; i < N; i++) x[i] = 0.01f * sinf(0.37f * (float)i) * (float)(1 + i % 7) * (i % 11 ? 1.0f : 0.0f);
    test_misc();
    for (int i = 0; i < gcx_codec_count(); i++) test_codec(gcx_codec_name(i));
    TEST_END();
}
