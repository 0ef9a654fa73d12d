/* Exchange bundles: one message per worker per hop, all of its frames in tensor
 * order (docs/FORMAT.md section 13):
 *   "GCXB" | u32 version (1) | u32 step (low 32 bits) | u32 entries
 *   entries: u32 tensor | u32 chunk | u32 frame length | frame
 * The reader takes the entries in the order the receiver expects them and
 * never reads outside the bundle; a bundle from a peer is outside bytes, so
 * tests/fuzz/fuzz_bundle.c fuzzes it. */
#ifndef GC_BUNDLE_H
#define GC_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#include "dist/comm.h"

#define BUNDLE_HDR 16
#define ENTRY_HDR 12

/* b = an empty bundle of step (entries are appended by the caller: ENTRY_HDR
 * bytes u32 tensor, u32 chunk, u32 length, then the frame; the count at offset
 * 12 is set by the caller) */
void bundle_begin(ByteBuf *b, long step);
/* the BUNDLE_HDR bytes of a bundle header into h */
void bundle_header(uint8_t *h, long step, uint32_t entries);

typedef struct {
    const uint8_t *p;
    size_t len, at;
    uint32_t left;
} BundleReader;

/* 0, or a negative GcError: too short, bad magic or version, another step. Reads only
 * the first BUNDLE_HDR bytes of p (and none when len is shorter) */
int bundle_open(BundleReader *r, const uint8_t *p, size_t len, long step);
/* the next entry, which must be tensor t's chunk (0 for whole tensors): its
 * frame and length; 0 or a negative GcError */
int bundle_next(BundleReader *r, int t, int chunk, const uint8_t **frame, size_t *flen);
/* bundle_next in two halves, for a bundle the caller cannot read in place (the device
 * exchange's, in GPU memory, dist/exchange_cuda.c): bundle_room says whether another
 * entry's header fits (0 or a negative GcError); bundle_take checks e, a copy of the
 * ENTRY_HDR bytes at r->p + r->at, and moves on as bundle_next does */
int bundle_room(const BundleReader *r);
int bundle_take(BundleReader *r, int t, int chunk, const uint8_t *e, const uint8_t **frame, size_t *flen);
/* after the last expected entry: 0, or a negative GcError for entries left over
 * or bytes after them */
int bundle_close(const BundleReader *r);

#endif
