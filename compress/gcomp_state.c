/* GCOMP's table section and checkpoint state blob (compress/gcomp_state.h):
 * the one writer and parser of each, for compress/gcomp.c and
 * compress/gcomp_cuda.cu. */
#include "compress/gcomp_state.h"

#include <string.h>

#include "common/crc32c.h"
#include "common/errors.h"
#include "compress/codec.h"

size_t gcomp_table_write(uint8_t *tab, const HuffCode *hc) {
    size_t at = 2;
    for (int s = 0; s < HUFF_NSYM; s++)
        if (hc->len[s]) {
            tab[at++] = (uint8_t)s;
            tab[at++] = hc->len[s];
        }
    put_u16(tab, (uint16_t)hc->ncoded);
    return at;
}

int gcomp_table_parse(HuffCode *hc, size_t *used, const uint8_t *p, size_t len, int ntheta, uint32_t id) {
    if (len < 2) return -GC_ERR_TRUNCATED;
    size_t k = get_u16(p);
    if (k > HUFF_NSYM) return -GC_ERR_CORRUPT;
    if (len - 2 < 2 * k) return -GC_ERR_TRUNCATED;
    uint8_t lens[HUFF_NSYM] = {0};
    int prev = -1;
    for (size_t i = 0; i < k; i++) {
        int s = p[2 + 2 * i], l = p[3 + 2 * i];
        if (s <= prev || l < 1 || l > ntheta) return -GC_ERR_CORRUPT;
        lens[s] = (uint8_t)l;
        prev = s;
    }
    *used = 2 + 2 * k;
    if (crc32c(0, p, *used) != id) return -GC_ERR_CORRUPT;
    return huff_code_build(hc, lens, ntheta);
}

static void put_u64(uint8_t *p, uint64_t v) {
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}
static uint64_t get_u64(const uint8_t *p) { return (uint64_t)get_u32(p) | ((uint64_t)get_u32(p + 4) << 32); }

/* one table of a blob: have byte, and when set n_theta, id, table section.
 * p: [6 + GCOMP_TABLE_MAX] out; returns its length */
static size_t put_table(uint8_t *p, int have, const HuffCode *hc, uint32_t id) {
    p[0] = (uint8_t)(have != 0);
    if (!have) return 1;
    p[1] = (uint8_t)hc->ntheta;
    put_u32(p + 2, id);
    return 6 + gcomp_table_write(p + 6, hc);
}

int64_t gcomp_state_write(uint8_t *buf, size_t cap, const GcompEnc *enc, int dec_have, const HuffCode *dec,
                          uint32_t dec_id) {
    if (cap < GCOMP_STATE_MAX) return -GC_ERR_NOSPACE;
    size_t at = 0;
    buf[at++] = GCOMP_STATE_VERSION;
    at += put_table(buf + at, enc->have, &enc->code, enc->id);
    put_u64(buf + at, enc->since);
    at += 8;
    for (int s = 0; s < HUFF_NSYM; s++, at += 8) put_u64(buf + at, enc->hist[s]);
    at += put_table(buf + at, dec_have, dec, dec_id);
    return (int64_t)at;
}

/* put_table's inverse: *have, and when set the code and its id. p: [len] */
static int get_table(int *have, HuffCode *hc, uint32_t *id, size_t *used, const uint8_t *p, size_t len) {
    if (len < 1) return -GC_ERR_TRUNCATED;
    if (p[0] > 1) return -GC_ERR_CORRUPT;
    *have = p[0];
    *used = 1;
    if (!*have) return 0;
    if (len < 6) return -GC_ERR_TRUNCATED;
    int ntheta = p[1];
    if (ntheta < 1 || ntheta > HUFF_MAX_NTHETA) return -GC_ERR_CORRUPT;
    *id = get_u32(p + 2);
    size_t tl = 0;
    int rc = gcomp_table_parse(hc, &tl, p + 6, len - 6, ntheta, *id);
    *used = 6 + tl;
    return rc;
}

int gcomp_state_parse(GcompStateBlob *b, const uint8_t *buf, size_t len, int ntheta) {
    memset(b, 0, sizeof *b);
    if (len < 1) return -GC_ERR_TRUNCATED;
    if (buf[0] != GCOMP_STATE_VERSION) return -GC_ERR_VERSION;
    size_t at = 1, used = 0;
    int rc = get_table(&b->enc.have, &b->enc.code, &b->enc.id, &used, buf + at, len - at);
    if (rc) return rc;
    if (b->enc.have && b->enc.code.ntheta != ntheta) return -GC_ERR_PARAM;
    at += used;
    if (len - at < 8 + 8 * HUFF_NSYM) return -GC_ERR_TRUNCATED;
    b->enc.since = get_u64(buf + at);
    at += 8;
    for (int s = 0; s < HUFF_NSYM; s++, at += 8) b->enc.hist[s] = get_u64(buf + at);
    rc = get_table(&b->dec_have, &b->dec, &b->dec_id, &used, buf + at, len - at);
    if (rc) return rc;
    if (at + used != len) return -GC_ERR_OVERSIZED;
    return 0;
}

void gcomp_table_plan(GcompTablePlan *p, const GcompEnc *enc, const uint64_t *fh, int ntheta, uint64_t every) {
    p->rebuilt = p->carry = 0;
    if (!enc->have) {
        huff_code_from_weights(&p->fresh, fh, ntheta);
        p->rebuilt = p->carry = 1;
    } else if (enc->since >= every) {
        huff_code_from_weights(&p->fresh, enc->hist, ntheta);
        p->rebuilt = 1;
        p->carry = p->fresh.ntheta != enc->code.ntheta || memcmp(p->fresh.len, enc->code.len, HUFF_NSYM) != 0;
    }
    p->code = p->carry ? &p->fresh : &enc->code;
    p->id = enc->id;
    p->tablen = 0;
    if (p->carry) {
        p->tablen = gcomp_table_write(p->tab, p->code);
        p->id = crc32c(0, p->tab, p->tablen);
    }
}

void gcomp_table_commit(GcompEnc *enc, const GcompTablePlan *p, const uint64_t *fh) {
    if (p->carry) {
        enc->code = p->fresh;
        enc->id = p->id;
        enc->have = 1;
    }
    if (p->rebuilt) {
        memset(enc->hist, 0, sizeof enc->hist);
        enc->since = 0;
    }
    for (int s = 0; s < HUFF_NSYM; s++) enc->hist[s] += fh[s];
    enc->since++;
}

static uint64_t bytes_of(uint64_t bits) { return (bits + 7) >> 3; }

int gcomp_block_parse(GcompBlock *b, const uint8_t *payload, size_t len, size_t n, uint16_t flags) {
    if (flags & ~GCOMP_FLAGS_ALL) return -GC_ERR_CORRUPT;
    if (len < GCOMP_BLOCK_HDR) return -GC_ERR_TRUNCATED;
    const uint8_t *h = payload;
    if (h[0] != GCOMP_MAGIC0 || h[1] != GCOMP_MAGIC1) return -GC_ERR_MAGIC;
    if (h[2] != GCOMP_DTYPE_FP32) return -GC_ERR_CORRUPT;
    b->ntheta = h[3];
    if (b->ntheta < 1 || b->ntheta > HUFF_MAX_NTHETA) return -GC_ERR_CORRUPT;
    b->id = get_u32(h + 4);
    b->nch = get_u32(h + 8);
    b->cbits = get_u64(h + 12);
    if (get_u64(h + 20) != 32ull * n) return -GC_ERR_CORRUPT;
    b->table = (flags & GCOMP_FLAG_TABLE) != 0;
    b->zsign = (flags & GCOMP_FLAG_ZSIGN) != 0;
    if (n == 0) {
        if (flags || b->id || b->nch || b->cbits) return -GC_ERR_CORRUPT;
        return len > GCOMP_BLOCK_HDR ? -GC_ERR_OVERSIZED : 0;
    }
    if (b->nch == 0 || b->nch > n) return -GC_ERR_CORRUPT;
    return 0;
}

int gcomp_chunks_fit(size_t len, size_t at, const GcompBlock *b) {
    return (uint64_t)(len - at) < b->nch * GCOMP_CHUNK_HDR ? -GC_ERR_TRUNCATED : 0;
}

int gcomp_chunks_parse(GcompChunk *ck, const uint8_t *payload, size_t len, size_t at, const GcompBlock *b, size_t n) {
    if (gcomp_chunks_fit(len, at, b)) return -GC_ERR_TRUNCATED;
    uint64_t expect = 0, sumbits = 0, off = at + b->nch * GCOMP_CHUNK_HDR;
    for (uint64_t k = 0; k < b->nch; k++, at += GCOMP_CHUNK_HDR) {
        const uint8_t *q = payload + at;
        uint64_t start = get_u32(q), count = get_u32(q + 4), bits = get_u32(q + 8), ebits = get_u32(q + 12),
                 nnz = get_u32(q + 16);
        if (start != expect || count == 0 || count > n - start || nnz > count) return -GC_ERR_CORRUPT;
        if (ebits < count || ebits > count * (uint64_t)(b->ntheta + HUFF_RAW_BITS)) return -GC_ERR_CORRUPT;
        if (bits < ebits + 2 * nnz) return -GC_ERR_CORRUPT;
        uint64_t mbits = bits - ebits - 2 * nnz;
        if (mbits < (uint64_t)(GCOMP_MAN_BITS - 3 * GCOMP_LEVEL_SHIFT) * nnz ||
            mbits > (uint64_t)GCOMP_MAN_BITS * nnz + (b->zsign ? count - nnz : 0))
            return -GC_ERR_CORRUPT;
        ck[k].start = (uint32_t)start;
        ck[k].count = (uint32_t)count;
        ck[k].nnz = (uint32_t)nnz;
        ck[k].ebits = ebits;
        ck[k].mbits = mbits;
        ck[k].off = off;
        off += bytes_of(ebits) + bytes_of(2 * nnz) + bytes_of(mbits);
        sumbits += bits;
        expect += count;
    }
    if (expect != n || sumbits != b->cbits) return -GC_ERR_CORRUPT;
    if (off > len) return -GC_ERR_TRUNCATED;
    if (off < len) return -GC_ERR_OVERSIZED;
    return 0;
}
