/* Exchange bundles (dist/bundle.h, docs/FORMAT.md section 13). */
#include "dist/bundle.h"

#include <string.h>

#include "common/errors.h"
#include "compress/codec.h"

void bundle_header(uint8_t *h, long step, uint32_t entries) {
    memcpy(h, "GCXB", 4);
    put_u32(h + 4, 1);
    put_u32(h + 8, (uint32_t)step);
    put_u32(h + 12, entries);
}

void bundle_begin(ByteBuf *b, long step) {
    bytebuf_reserve(b, BUNDLE_HDR);
    bundle_header(b->p, step, 0);
    b->len = BUNDLE_HDR;
}

int bundle_open(BundleReader *r, const uint8_t *p, size_t len, long step) {
    r->p = p;
    r->len = len;
    r->at = BUNDLE_HDR;
    if (len < BUNDLE_HDR) return -GC_ERR_TRUNCATED;
    if (memcmp(p, "GCXB", 4) != 0) return -GC_ERR_MAGIC;
    if (get_u32(p + 4) != 1) return -GC_ERR_VERSION;
    if (get_u32(p + 8) != (uint32_t)step) return -GC_ERR_STATE;
    r->left = get_u32(p + 12);
    return 0;
}

int bundle_room(const BundleReader *r) {
    if (r->left == 0) return -GC_ERR_TRUNCATED;
    if (r->len - r->at < ENTRY_HDR) return -GC_ERR_TRUNCATED;
    return 0;
}

int bundle_take(BundleReader *r, int t, int chunk, const uint8_t *e, const uint8_t **frame, size_t *flen) {
    if (get_u32(e) != (uint32_t)t || get_u32(e + 4) != (uint32_t)chunk) return -GC_ERR_CORRUPT;
    size_t len = get_u32(e + 8);
    if (len > r->len - r->at - ENTRY_HDR) return -GC_ERR_TRUNCATED;
    *frame = r->p + r->at + ENTRY_HDR;
    *flen = len;
    r->at += ENTRY_HDR + len;
    r->left--;
    return 0;
}

/* next entry, which must be (t, chunk) */
int bundle_next(BundleReader *r, int t, int chunk, const uint8_t **frame, size_t *flen) {
    int rc = bundle_room(r);
    return rc ? rc : bundle_take(r, t, chunk, r->p + r->at, frame, flen);
}

int bundle_close(const BundleReader *r) {
    if (r->left != 0) return -GC_ERR_CORRUPT;
    return r->at == r->len ? 0 : -GC_ERR_OVERSIZED;
}
