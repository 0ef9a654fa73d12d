/* GCOMP against an independent reference encoder: tests/ref/codec_gcomp_fixtures.py
 * (Python + PyTorch, written from docs/FORMAT.md section 10 and the paper) encodes
 * two multi-frame sequences (bootstrap table, escapes, rebuilds every K,
 * ZSIGN, denormals, inf/NaN, an empty tensor, several chunks); the C encoder
 * must produce the same payload bytes and flags frame by frame, and decoding
 * must give the reference's expected values. Fixture: tests/fixtures/codec_gcomp.bin. */
#include <stdint.h>

#include "common/check.h"
#include "compress/codec.h"
#include "tests/test.h"

#define FX_PATH "tests/fixtures/codec_gcomp.bin"
#define FX_HINT "regenerate with: /usr/bin/python3 tests/ref/codec_gcomp_fixtures.py"

typedef struct {
    char name[64];
    size_t numel;
    int32_t *data;
} Rec;

static Rec *recs;
static uint32_t nrecs;

static void die(const char *why) {
    printf("FAIL fixture %s: %s (%s)\n", FX_PATH, why, FX_HINT);
    printf("RESULT 0 1\n");
    exit(1);
}

static void load(void) {
    FILE *f = fopen(FX_PATH, "rb");
    if (!f) die("cannot open (run from the repository root)");
    char magic[8];
    uint32_t hdr[2];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "GCXFIXT", 8) != 0) die("bad magic");
    if (fread(hdr, 4, 2, f) != 2 || hdr[0] != 1) die("bad version");
    nrecs = hdr[1];
    recs = callocCheck(nrecs, sizeof *recs);
    for (uint32_t i = 0; i < nrecs; i++) {
        uint32_t len, dtype, nd, dim;
        if (fread(&len, 4, 1, f) != 1 || len >= sizeof recs[i].name) die("bad name");
        if (fread(recs[i].name, 1, len, f) != len) die("truncated name");
        if (fread(&dtype, 4, 1, f) != 1 || dtype != 1 || fread(&nd, 4, 1, f) != 1 || nd != 1) die("bad record");
        if (fread(&dim, 4, 1, f) != 1) die("truncated dims");
        recs[i].numel = dim;
        recs[i].data = mallocCheck(4 * (size_t)dim + 4);
        if (fread(recs[i].data, 4, dim, f) != dim) die("truncated data");
    }
    if (fgetc(f) != EOF) die("trailing bytes");
    fclose(f);
}

static const Rec *find(const char *name, int required) {
    for (uint32_t i = 0; i < nrecs; i++)
        if (strcmp(recs[i].name, name) == 0) return &recs[i];
    if (required) {
        printf("FAIL missing record %s\n", name);
        die("missing record");
    }
    return NULL;
}

static void run_sequence(const char *seq) {
    char name[64], spec[128];
    snprintf(name, sizeof name, "%s.spec", seq);
    const Rec *sp = find(name, 1);
    snprintf(spec, sizeof spec, "gcomp:ntheta=%d,every=%d,chunk=%d", sp->data[0], sp->data[1], sp->data[2]);
    snprintf(name, sizeof name, "%s.frames", seq);
    int frames = find(name, 1)->data[0];
    CodecSpec s;
    char err[256];
    if (codec_parse(&s, spec, err, sizeof err)) die(err);
    Codec *enc = codec_new(&s), *dec = codec_new(&s);
    for (int k = 0; k < frames; k++) {
        snprintf(name, sizeof name, "%s.%d.meta", seq, k);
        const Rec *meta = find(name, 1);
        size_t n = (size_t)meta->data[0];
        int has_lv = meta->data[1], flags = meta->data[2];
        size_t plen = (size_t)meta->data[3];
        snprintf(name, sizeof name, "%s.%d.xb", seq, k);
        const Rec *xb = find(name, 1);
        snprintf(name, sizeof name, "%s.%d.want", seq, k);
        const Rec *want = find(name, 1);
        snprintf(name, sizeof name, "%s.%d.pay", seq, k);
        const Rec *pay = find(name, 1);
        if (xb->numel != n || want->numel != n || pay->numel * 4 < plen) die("inconsistent record sizes");
        float *x = mallocCheck(4 * n + 4), *repr = mallocCheck(4 * n + 4), *y = mallocCheck(4 * n + 4);
        uint8_t *lv = mallocCheck(n + 1);
        memcpy(x, xb->data, 4 * n);
        if (has_lv) {
            snprintf(name, sizeof name, "%s.%d.lv", seq, k);
            const Rec *l = find(name, 1);
            for (size_t i = 0; i < n; i++) lv[i] = (uint8_t)l->data[i];
        }
        CodecSide side = {.levels = has_lv ? lv : NULL, .repr = repr};
        size_t cap = codec_max_frame(enc, n);
        uint8_t *frame = mallocCheck(cap);
        int64_t len = codec_encode(enc, frame, cap, x, n, &side);
        const uint8_t *ref = (const uint8_t *)pay->data;
        int same = len == (int64_t)(CODEC_HEADER_SIZE + plen) && memcmp(frame + CODEC_HEADER_SIZE, ref, plen) == 0;
        CHECK(same, "%s frame %d (n=%zu): payload %lld bytes, reference %zu", seq, k, n,
              (long long)(len - CODEC_HEADER_SIZE), plen);
        if (!same && len > 0) {
            for (size_t i = 0; i < plen && i + CODEC_HEADER_SIZE < (size_t)len; i++)
                if (frame[CODEC_HEADER_SIZE + i] != ref[i]) {
                    printf("  first difference at payload byte %zu: %02x vs %02x\n", i, frame[CODEC_HEADER_SIZE + i],
                           ref[i]);
                    break;
                }
        }
        CHECK(len > 0 && get_u16(frame + 6) == flags, "%s frame %d: flags %d, reference %d", seq, k,
              len > 0 ? get_u16(frame + 6) : -1, flags);
        int rc = len > 0 ? codec_decode(dec, y, n, frame, (size_t)len) : -1;
        CHECK(rc == 0 && memcmp(y, want->data, 4 * n) == 0 && memcmp(repr, want->data, 4 * n) == 0,
              "%s frame %d: decode (rc %d) and repr equal the reference values", seq, k, rc);
        free(frame), free(x), free(repr), free(y), free(lv);
    }
    codec_free(enc);
    codec_free(dec);
}

int main(void) {
    load();
    run_sequence("A");
    run_sequence("B");
    for (uint32_t i = 0; i < nrecs; i++) free(recs[i].data);
    free(recs);
    TEST_END();
}
