/* GCOMP codec: output identical for 1..4 threads, every truncation and random
 * corruption rejected without crashing, targeted malformed payloads rejected
 * with the right GC_ERR_*, and compressed size on gradient-like data. */
#include <stdint.h>

#include "common/rng.h"
#include "compress/codec.h"
#include "compress/huffman.h"
#include "tests/test.h"

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
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

/* gradient-like: N(0, sigma), a fraction of exact zeros, a few -0.0 */
static void gradient(float *x, size_t n, float sigma, float zeros, Rng *r) {
    for (size_t i = 0; i < n; i++) {
        float u = rng_uniform(r);
        x[i] = u < zeros ? (u < zeros * 0.01f ? -0.0f : 0.0f) : rng_normal(r) * sigma;
    }
}

static int dec_payload(Codec *d, float *y, size_t n, const uint8_t *frame, size_t len) {
    return d->spec.ops->decode(d, y, n, 1.0f, 0, frame + CODEC_HEADER_SIZE, len - CODEC_HEADER_SIZE,
                               get_u16(frame + 6));
}

/* ---- chunk-parallel output does not depend on the thread count (6.2) ---- */
static void test_threads(void) {
    const size_t n = 50000;
    Rng r;
    rng_init(&r, 11, 0);
    float *x = malloc(n * 4), *y = malloc(n * 4), *repr1 = malloc(n * 4), *repr = malloc(n * 4);
    uint8_t *lv = malloc(n);
    gradient(x, n, 1e-3f, 0.3f, &r);
    for (size_t i = 0; i < n; i++) lv[i] = (uint8_t)rng_below(&r, 4);
    Codec *ref = mk("gcomp:chunk=1024,every=2");
    size_t cap = codec_max_frame(ref, n);
    uint8_t *f1[3], *f = malloc(cap);
    int64_t l1[3];
    for (int t = 0; t < 3; t++) { /* table frame, reuse, rebuild */
        f1[t] = malloc(cap);
        CodecSide s1 = {.levels = lv, .repr = repr1, .threads = 1};
        l1[t] = codec_encode(ref, f1[t], cap, x + t * 100, n - 200, &s1);
    }
    for (int T = 2; T <= 4; T++) {
        Codec *c = mk("gcomp:chunk=1024,every=2");
        int same = 1;
        for (int t = 0; t < 3; t++) {
            CodecSide s = {.levels = lv, .repr = repr, .threads = T};
            int64_t l = codec_encode(c, f, cap, x + t * 100, n - 200, &s);
            same &= l == l1[t] && memcmp(f, f1[t], (size_t)l) == 0;
        }
        same &= memcmp(repr, repr1, (n - 200) * 4) == 0;
        CHECK(same, "%d threads: frames and repr identical to 1 thread (%lld bytes)", T, (long long)l1[0]);
        codec_free(c);
    }
    /* decoding with any thread count gives repr (decode uses the OpenMP default) */
    Codec *d = mk("gcomp");
    int ok = 1;
    for (int t = 0; t < 3; t++) ok &= codec_decode(d, y, n - 200, f1[t], (size_t)l1[t]) == 0;
    CHECK(ok && memcmp(y, repr1, (n - 200) * 4) == 0, "decode of the parallel frames == repr");
    codec_free(d);
    codec_free(ref);
    for (int t = 0; t < 3; t++) free(f1[t]);
    free(f), free(x), free(y), free(repr1), free(repr), free(lv);
}

/* ---- truncation, oversize, random corruption ---- */
static void test_truncation_corruption(void) {
    const size_t n = 300;
    Rng r;
    rng_init(&r, 12, 0);
    float x[300], y[300];
    uint8_t lv[300];
    gradient(x, n, 1e-2f, 0.3f, &r);
    x[5] = 1e30f, x[6] = -3e-39f, x[7] = INFINITY; /* a rare exponent, a denormal, inf */
    for (size_t i = 0; i < n; i++) lv[i] = (uint8_t)rng_below(&r, 4);
    Codec *enc = mk("gcomp:chunk=64,ntheta=4");
    uint8_t f0[4096], f1[4096], buf[4200];
    CodecSide side = {.levels = lv};
    int64_t l0 = codec_encode(enc, f0, sizeof f0, x, n, &side); /* carries the table */
    gradient(x, n, 1e-3f, 0.5f, &r);
    int64_t l1 = codec_encode(enc, f1, sizeof f1, x, n, &side); /* uses it, with escapes */
    CHECK(l0 > 0 && l1 > 0 && (get_u16(f0 + 6) & 1) && !(get_u16(f1 + 6) & 1), "table frame + plain frame");

    /* whole frames: every truncation rejected, every single-bit flip rejected */
    Codec *d = mk("gcomp");
    int trunc_ok = 1, flip_ok = 1;
    for (int64_t k = 0; k < l0; k++) trunc_ok &= codec_decode(d, y, n, f0, (size_t)k) < 0;
    for (int64_t k = 0; k < l0 * 8; k++) {
        f0[k / 8] ^= (uint8_t)(1u << (k % 8));
        flip_ok &= codec_decode(d, y, n, f0, (size_t)l0) < 0;
        f0[k / 8] ^= (uint8_t)(1u << (k % 8));
    }
    CHECK(trunc_ok, "every truncation of a %lld-byte frame rejected", (long long)l0);
    CHECK(flip_ok, "every single-bit flip of the frame rejected");
    CHECK(codec_decode(d, y, n, f0, (size_t)l0) == 0 && codec_decode(d, y, n, f1, (size_t)l1) == 0,
          "intact frames still decode");

    /* payloads (no CRC in the way): every truncation is GC_ERR_TRUNCATED, for
     * a fresh decoder on the table frame and a loaded one on the plain frame */
    int tr0 = 1, tr1 = 1;
    for (int64_t k = CODEC_HEADER_SIZE; k < l0; k++) {
        Codec *fresh = mk("gcomp");
        tr0 &= dec_payload(fresh, y, n, f0, (size_t)k) == -GC_ERR_TRUNCATED;
        codec_free(fresh);
    }
    for (int64_t k = CODEC_HEADER_SIZE; k < l1; k++) tr1 &= dec_payload(d, y, n, f1, (size_t)k) == -GC_ERR_TRUNCATED;
    CHECK(tr0, "every truncated table payload -> GC_ERR_TRUNCATED");
    CHECK(tr1, "every truncated plain payload -> GC_ERR_TRUNCATED");
    memcpy(buf, f1, (size_t)l1);
    buf[l1] = 0;
    CHECK(dec_payload(d, y, n, buf, (size_t)l1 + 1) == -GC_ERR_OVERSIZED, "trailing byte -> GC_ERR_OVERSIZED");

    /* random corruption of payloads: never a crash (ASan run), a clean code or a decode */
    int rejected = 0, accepted = 0, badcode = 0;
    for (int m = 0; m < 3000; m++) {
        const uint8_t *src = m & 1 ? f1 : f0;
        int64_t len = m & 1 ? l1 : l0;
        memcpy(buf, src, (size_t)len);
        int edits = 1 + (int)rng_below(&r, 4);
        for (int e = 0; e < edits; e++) {
            size_t at = CODEC_HEADER_SIZE + rng_below(&r, (uint64_t)len - CODEC_HEADER_SIZE);
            buf[at] ^= (uint8_t)(1 + rng_below(&r, 255));
        }
        Codec *dd = mk("gcomp");
        if (m & 1) dec_payload(dd, y, n, f0, (size_t)l0); /* load the table first */
        int rc = dec_payload(dd, y, n, buf, (size_t)len);
        if (rc == 0) accepted++;
        else if (rc < 0 && rc > -GC_ERR_COUNT_) rejected++;
        else badcode++;
        codec_free(dd);
    }
    printf("  random payload corruption: %d rejected, %d decoded (mantissa/level bits carry no redundancy)\n",
           rejected, accepted);
    CHECK(badcode == 0 && rejected > 1500, "corruptions give valid error codes (%d rejected, %d bad codes)", rejected,
          badcode);
    codec_free(d);
    codec_free(enc);
}

/* ---- a refused frame changes nothing: not out, not the held table ---- */

/* rewrite the header of a frame whose payload now has plen bytes, CRC
 * included, so a hostile payload reaches the decoder */
static void refresh(uint8_t *frame, size_t plen) {
    put_u32(frame + 12, (uint32_t)plen);
    put_u32(frame + 16, crc32c(0, frame + CODEC_HEADER_SIZE, plen));
}

/* where chunk k's data lies in a frame: byte offset (from the frame start)
 * and bit lengths of its exponent, level and mantissa segments */
typedef struct {
    size_t off;
    uint64_t ebits, lbits, mbits;
} ChunkAt;

static uint32_t chunks_of(ChunkAt *at, const uint8_t *frame) {
    const uint8_t *p = frame + CODEC_HEADER_SIZE;
    uint32_t nch = get_u32(p + 8);
    size_t h = 28 + ((get_u16(frame + 6) & 1) ? 2 + 2 * (size_t)get_u16(p + 28) : 0);
    size_t off = CODEC_HEADER_SIZE + h + 20 * (size_t)nch;
    for (uint32_t k = 0; k < nch; k++) {
        const uint8_t *q = p + h + 20 * (size_t)k;
        at[k].ebits = get_u32(q + 12);
        at[k].lbits = 2ull * get_u32(q + 16);
        at[k].mbits = get_u32(q + 8) - at[k].ebits - at[k].lbits;
        at[k].off = off;
        off += (at[k].ebits + 7) / 8 + (at[k].lbits + 7) / 8 + (at[k].mbits + 7) / 8;
    }
    return nch;
}

/* Decodes the hostile frame g with d (plain, then accumulating) into outputs
 * filled with a pattern. When it is refused, both outputs must be the pattern
 * bit for bit, and d must then decode the valid frame `next` exactly as a
 * decoder that never saw g (same code, same floats). Returns -1 if the frame
 * was accepted (a mantissa bit flip is undetectable), else 0 when refused
 * cleanly, plus 1 if an output changed, plus 2 if the state changed. */
typedef struct {
    size_t n;
    float *pat, *y, *want; /* [n] */
    const uint8_t *next;
    size_t next_len;
    int next_rc;
} Probe;

static int refused_clean(Codec *d, const Probe *pr, const uint8_t *g, size_t len) {
    size_t n = pr->n;
    int changed = 0, refused = 0;
    for (int acc = 0; acc < 2; acc++) {
        memcpy(pr->y, pr->pat, n * 4);
        int rc = acc ? codec_decode_acc(d, pr->y, n, 0.5f, g, len) : codec_decode(d, pr->y, n, g, len);
        if (rc == 0) return -1;
        refused++;
        changed |= rc <= -GC_ERR_COUNT_ || memcmp(pr->y, pr->pat, n * 4) != 0;
    }
    /* the state: the next valid frame decodes as on a decoder that never saw g */
    memcpy(pr->y, pr->pat, n * 4);
    int rc = codec_decode(d, pr->y, n, pr->next, pr->next_len);
    int state = rc != pr->next_rc || (rc == 0 && memcmp(pr->y, pr->want, n * 4) != 0);
    return (refused && changed) | state << 1;
}

static void test_refused_untouched(void) {
    for (int big = 0; big < 2; big++) {
        /* small: 79 chunks decoded serially; big: enough values for the
         * OpenMP decode, 69 chunks */
        const size_t n = big ? 70000 : 5000;
        const char *spec = big ? "gcomp:chunk=1024,every=2,ntheta=6" : "gcomp:chunk=64,every=2,ntheta=6";
        Rng r;
        rng_init(&r, 21 + (uint64_t)big, 0);
        float *x = malloc(n * 4), *pat = malloc(n * 4), *y = malloc(n * 4), *want = malloc(n * 4);
        uint8_t *lv = malloc(n);
        for (size_t i = 0; i < n; i++) lv[i] = (uint8_t)rng_below(&r, 4);
        for (size_t i = 0; i < n; i++) pat[i] = (float)(i % 1000) * 0.25f + 1.0f; /* exact under +0.5 v */
        /* four frames (every=2): 0 carries table T1, 1 uses it, 2 carries the
         * rebuilt table T2 (1 has another spread), 3 uses T2 */
        Codec *enc = mk(spec);
        size_t cap = codec_max_frame(enc, n);
        uint8_t *f[4], *g = malloc(cap + 8);
        int64_t l[4];
        const float sigma[4] = {1e-2f, 1e-5f, 1e-3f, 1e-3f};
        for (int t = 0; t < 4; t++) {
            gradient(x, n, sigma[t], 0.3f, &r);
            x[7 + t] = 1e30f; /* a rare exponent: escapes */
            f[t] = malloc(cap);
            CodecSide side = {.levels = lv};
            l[t] = codec_encode(enc, f[t], cap, x, n, &side);
        }
        int tabs = (get_u16(f[0] + 6) & 1) && !(get_u16(f[1] + 6) & 1) && (get_u16(f[2] + 6) & 1) &&
                   !(get_u16(f[3] + 6) & 1);
        CHECK(l[3] > 0 && tabs, "%zu values: frames carry T1, use it, carry T2, use it", n);

        /* each hostile frame (a corrupted copy of f[h]) goes to a decoder that
         * saw the valid frames before f[h]; then the valid frame `next` that
         * needs the table the decoder should hold: for h = 0 (fresh decoder)
         * f[1], which needs T1 (GC_ERR_STATE); for h = 1 f[1] itself (T1);
         * for h = 2 f[3], which needs T2 (GC_ERR_STATE: T1 still held) */
        size_t refused = 0, changed = 0, moved = 0, accepted = 0, late = 0, late_changed = 0;
        ChunkAt *at = malloc(((n + 63) / 64) * sizeof *at);
        for (int h = 0; h < 3; h++) {
            int nx = h == 1 ? 1 : h + 1;
            Codec *ref = mk("gcomp");
            for (int t = 0; t < h; t++) codec_decode(ref, y, n, f[t], (size_t)l[t]);
            memcpy(want, pat, n * 4);
            int next_rc = codec_decode(ref, want, n, f[nx], (size_t)l[nx]);
            codec_free(ref);
            CHECK(next_rc == (h == 1 ? 0 : -GC_ERR_STATE), "%zu values: reference decode of frame %d after %d (%d)", n,
                  nx, h, next_rc);
            Probe pr = {n, pat, y, want, f[nx], (size_t)l[nx], next_rc};
            uint32_t nch = chunks_of(at, f[h]);
            size_t plen = (size_t)l[h] - CODEC_HEADER_SIZE;
            /* one probe: g is ready; a fresh decoder brought to the state before f[h] */
#define PROBE(is_late)                                                                   \
    do {                                                                                 \
        Codec *d = mk("gcomp");                                                          \
        for (int t = 0; t < h; t++) codec_decode(d, y, n, f[t], (size_t)l[t]);           \
        int res = refused_clean(d, &pr, g, CODEC_HEADER_SIZE + glen);                    \
        codec_free(d);                                                                   \
        if (res < 0) accepted++;                                                         \
        else refused++, changed += res & 1, moved += res >> 1, late += (is_late), late_changed += (is_late) && res; \
    } while (0)
            size_t glen;
            /* truncations: at every chunk boundary and inside the last chunk */
            for (uint32_t k = 0; k < nch; k += big ? 7 : 3) {
                memcpy(g, f[h], (size_t)l[h]);
                glen = at[k].off + 1 - CODEC_HEADER_SIZE;
                refresh(g, glen);
                PROBE(0);
            }
            for (int b = 1; b <= 4; b++) {
                memcpy(g, f[h], (size_t)l[h]);
                glen = plen - (size_t)b;
                refresh(g, glen);
                PROBE(0);
            }
            /* in each chunk: its first exponent bit, a padding bit after its
             * mantissas (found only once the whole chunk is decoded), and a
             * random byte; each with every other chunk intact (big: every
             * fifth chunk and the last, the OpenMP decode costs more here) */
            for (uint32_t k = 0; k < nch; k++) {
                if (big && k % 5 && k + 1 < nch) continue;
                const ChunkAt *c = &at[k];
                size_t ms = c->off + (c->ebits + 7) / 8 + (c->lbits + 7) / 8;
                size_t end = ms + (c->mbits + 7) / 8;
                glen = plen;
                memcpy(g, f[h], (size_t)l[h]);
                g[c->off] ^= 0x80;
                refresh(g, plen);
                PROBE(k + 1 == nch);
                if (c->mbits % 8) {
                    memcpy(g, f[h], (size_t)l[h]);
                    g[end - 1] |= 1;
                    refresh(g, plen);
                    PROBE(k + 1 == nch);
                }
                memcpy(g, f[h], (size_t)l[h]);
                g[c->off + rng_below(&r, end - c->off)] ^= (uint8_t)(1 + rng_below(&r, 255));
                refresh(g, plen);
                PROBE(k + 1 == nch);
            }
#undef PROBE
        }
        printf("  %zu values: %zu hostile frames refused (%zu with the last chunk bad), %zu decoded\n", n, refused,
               late, accepted);
        CHECK(refused > 100 && late >= 6, "%zu values: hostile frames refused (%zu, %zu in the last chunk)", n,
              refused, late);
        CHECK(changed == 0, "%zu values: a refused frame leaves out untouched, plain and accumulated (%zu did not, "
              "%zu bad in the last chunk only)", n, changed, late_changed);
        CHECK(moved == 0, "%zu values: a refused frame leaves the held table as it was (%zu did not)", n, moved);
        codec_free(enc);
        for (int t = 0; t < 4; t++) free(f[t]);
        free(at), free(g), free(x), free(pat), free(y), free(want), free(lv);
    }
}

/* ---- hand-made malformed payloads: each rejected with its own code ---- */
typedef struct {
    uint8_t b[256];
    size_t len;
} Buf;

static void put(Buf *p, const void *src, size_t n) {
    memcpy(p->b + p->len, src, n);
    p->len += n;
}
static void put32(Buf *p, uint32_t v) {
    put_u32(p->b + p->len, v);
    p->len += 4;
}
/* block header: magic GP, dtype, ntheta, id, chunks, cbits, obits */
static void block(Buf *p, int ntheta, uint32_t id, uint32_t nch, uint32_t cbits, size_t n) {
    p->len = 0;
    put(p, "GP", 2);
    p->b[p->len++] = 1;
    p->b[p->len++] = (uint8_t)ntheta;
    put32(p, id);
    put32(p, nch);
    put32(p, cbits), put32(p, 0);
    put32(p, (uint32_t)(32 * n)), put32(p, 0);
}
static void chunk(Buf *p, uint32_t start, uint32_t count, uint32_t bits, uint32_t ebits, uint32_t nnz) {
    put32(p, start), put32(p, count), put32(p, bits), put32(p, ebits), put32(p, nnz);
}
static int dec(Codec *d, const Buf *p, size_t n, uint16_t flags) {
    float y[8];
    return d->spec.ops->decode(d, y, n, 1.0f, 0, p->b, p->len, flags);
}

static void test_malformed(void) {
    /* table T: n_theta 2, symbol 127 -> '0', escape '10', index '11' unused */
    uint8_t tab[4] = {1, 0, 127, 1};
    uint32_t id = crc32c(0, tab, 4);
    Codec *d = mk("gcomp");
    Buf p;
    /* a valid one-value frame: 1.5 = code '0', level '00', mantissa 0x400000 */
    block(&p, 2, id, 1, 1 + 2 + 24, 1);
    put(&p, tab, 4);
    chunk(&p, 0, 1, 27, 1, 1);
    put(&p, "\x00\x00\x40\x00\x00", 5);
    CHECK(dec(d, &p, 1, 1) == 0, "hand-made valid frame decodes");
    float y;
    d->spec.ops->decode(d, &y, 1, 1.0f, 0, p.b, p.len, 1);
    CHECK(y == 1.5f, "and gives 1.5 (%g)", y);
    Buf v = p;

    /* block header */
    p = v, p.b[0] = 'X';
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_MAGIC, "block magic");
    p = v, p.b[2] = 2;
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "unknown data type");
    p = v, p.b[3] = 0;
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "n_theta 0");
    p = v, p.b[3] = 17;
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "n_theta 17");
    CHECK(dec(d, &v, 1, 1 | 4) == -GC_ERR_CORRUPT, "unknown flag bit");
    CHECK(dec(d, &v, 2, 1) == -GC_ERR_CORRUPT, "original bits != 32 n");
    p = v, put_u32(p.b + 8, 0);
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "zero chunks for n > 0");
    p = v, put_u32(p.b + 8, 2);
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "more chunks than values");
    p = v, put_u32(p.b + 12, 28);
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "compressed bits do not add up");
    {   /* 2^32 - 1 chunks claimed for as many values, with room for no chunk header: refused
         * as truncated before the decoder allocates anything per chunk (some 200 GB; a
         * decoder that allocated first would end the program here) */
        uint64_t big = 0xFFFFFFFFu;
        p = v, p.len = 28 + 4; /* the block header and the table */
        put_u32(p.b + 8, (uint32_t)big);
        put_u32(p.b + 20, (uint32_t)(32 * big)), put_u32(p.b + 24, (uint32_t)((32 * big) >> 32));
        CHECK(dec(d, &p, (size_t)big, 1) == -GC_ERR_TRUNCATED, "2^32 - 1 chunk headers claimed, none there");
    }

    /* table section */
    p = v, p.b[28] = 2; /* k = 2 but one entry follows, then the chunk header */
    CHECK(dec(d, &p, 1, 1) < 0, "table count too large");
    p = v, put_u16(p.b + 28, 300);
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "table count > 256");
    p = v, p.b[31] = 3;
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "code length > n_theta");
    p = v, p.b[31] = 0;
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "code length 0 listed");
    p = v, put_u32(p.b + 4, id ^ 1);
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "table id != CRC of the table");
    {   /* Kraft violation: 126 -> 0 and 127 -> 1 and 128 -> 1 (n_theta 2) */
        uint8_t t3[8] = {3, 0, 126, 1, 127, 1, 128, 1};
        block(&p, 2, crc32c(0, t3, 8), 1, 27, 1);
        put(&p, t3, 8);
        chunk(&p, 0, 1, 27, 1, 1);
        put(&p, "\x00\x00\x40\x00\x00", 5);
        CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "table not prefix-free (Kraft sum > 1)");
        uint8_t t4[6] = {2, 0, 127, 1, 126, 1}; /* symbols out of order */
        block(&p, 2, crc32c(0, t4, 6), 1, 27, 1);
        put(&p, t4, 6);
        chunk(&p, 0, 1, 27, 1, 1);
        put(&p, "\x00\x00\x40\x00\x00", 5);
        CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "table symbols not increasing");
        uint8_t t5[6] = {2, 0, 126, 1, 127, 1}; /* complete code, no room for the escape */
        block(&p, 2, crc32c(0, t5, 6), 1, 27, 1);
        put(&p, t5, 6);
        chunk(&p, 0, 1, 27, 1, 1);
        put(&p, "\x00\x00\x40\x00\x00", 5);
        CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "no escape room while symbols are uncoded");
    }

    /* chunk headers */
    p = v, put_u32(p.b + 32, 1);
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "chunk start not contiguous");
    p = v, put_u32(p.b + 36, 2);
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "chunk counts do not add up to n");
    p = v, put_u32(p.b + 48, 2);
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "nonzero count > count");
    p = v, put_u32(p.b + 44, 0);
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "exponent bits < count");
    p = v, put_u32(p.b + 40, 26), put_u32(p.b + 12, 26);
    CHECK(dec(d, &p, 1, 1) < 0, "chunk bits one short");

    /* segment contents */
    p = v, p.b[52] = 0x40; /* exponent '0' then a padding bit set */
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "nonzero padding bit (exponent segment)");
    p = v, p.b[53] = 0x20;
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "nonzero padding bit (level segment)");
    p = v, p.b[53] = 0x40; /* level 1: mantissa would be 18 bits, 24 are declared */
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "level inconsistent with the mantissa length");
    p = v, p.b[52] = 0xC0; /* '11': no code starts with it */
    CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "invalid lookup-table index");
    {   /* escape '10' + raw 127, but 127 has its own code */
        block(&p, 2, id, 1, 10 + 2 + 24, 1);
        put(&p, tab, 4);
        chunk(&p, 0, 1, 36, 10, 1);
        put(&p, "\x9F\xC0\x00\x40\x00\x00", 6); /* 10 01111111 (000000) */
        CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "escaped symbol that has a code");
        /* escape + raw 255 (inf) at level 1 */
        block(&p, 2, id, 1, 10 + 2 + 18, 1);
        put(&p, tab, 4);
        chunk(&p, 0, 1, 30, 10, 1);
        put(&p, "\xBF\xC0\x40\x00\x00\x00", 6); /* 10 11111111, level 01, 18 zero bits */
        CHECK(dec(d, &p, 1, 1) == -GC_ERR_CORRUPT, "inf/NaN with a nonzero level");
        /* escape + raw 0: a zero, flag ZSIGN but its sign bit is 0 */
        block(&p, 2, id, 1, 10 + 1, 1);
        put(&p, tab, 4);
        chunk(&p, 0, 1, 11, 10, 0);
        put(&p, "\x80\x00\x00", 3);
        CHECK(dec(d, &p, 1, 1 | 2) == -GC_ERR_CORRUPT, "ZSIGN without a negative zero");
        p.b[p.len - 1] = 0x80;
        CHECK(dec(d, &p, 1, 1 | 2) == 0, "the same with the sign bit set is -0.0");
    }

    /* state: a plain frame needs the table it names */
    Codec *fresh = mk("gcomp");
    block(&p, 2, id, 1, 27, 1);
    chunk(&p, 0, 1, 27, 1, 1);
    put(&p, "\x00\x00\x40\x00\x00", 5);
    CHECK(dec(fresh, &p, 1, 0) == -GC_ERR_STATE, "no table yet -> GC_ERR_STATE");
    CHECK(dec(d, &p, 1, 0) == 0, "decoder holding table T decodes the plain frame");
    p.b[3] = 3;
    CHECK(dec(d, &p, 1, 0) == -GC_ERR_STATE, "n_theta differs from the held table -> GC_ERR_STATE");
    p.b[3] = 2, put_u32(p.b + 4, id + 1);
    CHECK(dec(d, &p, 1, 0) == -GC_ERR_STATE, "other table id -> GC_ERR_STATE");
    /* empty tensor */
    block(&p, 8, 0, 0, 0, 0);
    CHECK(dec(fresh, &p, 0, 0) == 0, "empty payload");
    CHECK(dec(fresh, &p, 0, 1) == -GC_ERR_CORRUPT, "empty payload with a table flag");
    codec_free(fresh);
    codec_free(d);
}

/* ---- compressed size on gradient-like data ---- */
static double entropy(const uint64_t *h, double n) {
    double H = 0;
    for (int s = 0; s < 256; s++)
        if (h[s]) H -= (double)h[s] / n * log2((double)h[s] / n);
    return H;
}

static void test_size(void) {
    const size_t n = 200000;
    Rng r;
    rng_init(&r, 13, 0);
    float *g = malloc(n * 4), *theta = malloc(n * 4);
    uint8_t *lv = malloc(n);
    /* late-training-like gradients (paper Section 3.1: 3-5 orders of magnitude
     * below the parameters, many exact zeros; no -0.0 here, so no sign bits) */
    gradient(g, n, 5e-5f, 0.5f, &r);
    for (size_t i = 0; i < n; i++) g[i] = g[i] == 0 ? 0.0f : g[i];
    for (size_t i = 0; i < n; i++) theta[i] = rng_normal(&r) * 0.05f;
    /* SGD quantization metric (Section 5.1, Table 2, lambda = 0): delta =
     * theta / (eta g); level = largest L with delta > 2^(6L) */
    const float eta = 0.1f;
    int cnt[4] = {0};
    for (size_t i = 0; i < n; i++) {
        double delta = g[i] != 0 ? fabs(theta[i] / (eta * g[i])) : 0;
        lv[i] = delta > 0x1p18 ? 3 : delta > 0x1p12 ? 2 : delta > 0x1p6 ? 1 : 0;
        cnt[lv[i]]++;
    }
    uint64_t h[256] = {0};
    for (size_t i = 0; i < n; i++) h[(f2u(g[i]) >> 23) & 0xFF]++;
    double H = entropy(h, (double)n);
    Codec *c = mk("gcomp");
    size_t cap = codec_max_frame(c, n);
    uint8_t *f = malloc(cap);
    int64_t l0 = codec_encode(c, f, cap, g, n, NULL);
    /* exponent bits: sum of the chunk headers' exponent-segment lengths */
    uint32_t k = get_u16(f + CODEC_HEADER_SIZE + 28), nch = get_u32(f + CODEC_HEADER_SIZE + 8);
    uint64_t ebits = 0;
    for (uint32_t j = 0; j < nch; j++) ebits += get_u32(f + CODEC_HEADER_SIZE + 28 + 2 + 2 * k + 20 * j + 12);
    CodecSide side = {.levels = lv};
    int64_t l1 = codec_encode(c, f, cap, g, n, &side);
    double b0 = 8.0 * (double)(l0 - CODEC_HEADER_SIZE) / (double)n, b1 = 8.0 * (double)(l1 - CODEC_HEADER_SIZE) / (double)n;
    printf("  gradient-like data, n=%zu, 50%% zeros, sigma 5e-5: exponent entropy %.3f bits, coded %.3f bits/value\n",
           n, H, (double)ebits / (double)n);
    printf("  levels 0 (lossless): %.3f bits/value = %.1f%% of fp32\n", b0, 100 * b0 / 32);
    printf("  SGD-metric levels (0:%d 1:%d 2:%d 3:%d): %.3f bits/value = %.1f%% of fp32 (paper: 32.9%% ResNet-50)\n",
           cnt[0], cnt[1], cnt[2], cnt[3], b1, 100 * b1 / 32);
    CHECK((double)ebits / (double)n >= H && (double)ebits / (double)n < H + 1.0,
          "exponent code within Huffman's bound [H, H+1)");
    /* per value: code + (nonzero: 2 + 24 - 6L); everything else is headers */
    double want0 = (double)ebits / (double)n, want1;
    for (size_t i = 0; i < n; i++) want0 += g[i] != 0 ? 26.0 / (double)n : 0;
    want1 = want0;
    for (size_t i = 0; i < n; i++) want1 -= g[i] != 0 ? 6.0 * lv[i] / (double)n : 0;
    CHECK(fabs(b0 - want0) < 0.05 && fabs(b1 - want1) < 0.05, "sizes add up: %.3f vs %.3f, %.3f vs %.3f", b0,
          want0, b1, want1);
    codec_free(c);
    free(f), free(g), free(theta), free(lv);
}

int main(void) {
    test_threads();
    test_truncation_corruption();
    test_refused_untouched();
    test_malformed();
    test_size();
    TEST_END();
}
