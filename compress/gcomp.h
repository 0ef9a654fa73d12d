/* What the bytes of a GCOMP frame are spent on (docs/FORMAT.md section 10),
 * for the size breakdown GCOMP's section 7 discusses: how many values were
 * pruned as zeros (section 5.2), how many were kept at each truncation level
 * (section 5.1), and the bits of each segment against the headers. */
#ifndef GC_GCOMP_H
#define GC_GCOMP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t values;     /* values coded */
    uint64_t zeros;      /* of them with exponent 0 (zero or denormal): the exponent code alone */
    uint64_t level[4];   /* the others by truncation level: 0, 6, 12, 18 mantissa bits dropped */
    uint64_t exp_bits;   /* exponent segments (Huffman codes and escapes) */
    uint64_t level_bits; /* level segments: 2 bits per nonzero value */
    uint64_t man_bits;   /* mantissa segments (with the sign; ZSIGN sign bits) */
    uint64_t bytes;      /* the whole frame: what the segments leave is headers (frame, block,
                            chunks), the table when carried, and padding */
} GcompParts;

/* Adds the parts of one whole gcomp frame (common header included) of len
 * bytes to p. The frame is read only as far as its headers say, within len;
 * returns 0, or a negative GcError for a frame that is not gcomp or whose
 * headers do not fit in len (p is then unchanged). */
int gcomp_frame_parts(GcompParts *p, const uint8_t *frame, size_t len);

/* The same with the level segments counted elsewhere: frame holds the frame's headers
 * (common header, block header, table section, chunk headers) and len is the whole
 * frame's length; level(ctx, off, nnz) is called for each chunk's level segment (nnz
 * 2-bit levels at byte off of the payload) as its header is read, and p->level is left
 * to the caller, whose counts count only when this returns 0 (the GPU's size breakdown
 * of a frame in device memory, compress/codec_cuda.h) */
typedef void (*GcompLevelSegment)(void *ctx, uint64_t off, uint64_t nnz);
int gcomp_frame_parts_headers(GcompParts *p, const uint8_t *frame, size_t len, GcompLevelSegment level, void *ctx);

#endif
