/* What GCOMP's CPU codec (compress/gcomp.c) and GPU codec (compress/gcomp_cuda.cu)
 * share, so that their frames and their blobs are the same bytes and their decoders
 * refuse the same frames (docs/FORMAT.md section 10: Layout, Checkpointed state): the
 * frame's layout and the decoder's checks of its block and chunk headers; the Huffman
 * table section and the checkpoint state blob, one writer and one parser of each; and
 * the encoder's table schedule (when to rebuild, when a frame carries its table).
 *
 * Table section (in a frame when it carries its table, and in a state blob):
 *   u16 k, then k (symbol, length) pairs in increasing symbol order;
 *   its id is the CRC-32C of those bytes.
 *
 * State blob, little-endian:
 *   u8 version (GCOMP_STATE_VERSION)
 *   u8 encoder has a table; if so: u8 n_theta, u32 id, table section
 *   u64 encodes since the last rebuild, 256 x u64 exponent counts
 *   u8 decoder has a table; if so: u8 n_theta, u32 id, table section
 *
 * gcomp_state_parse reads and checks a whole blob into a GcompStateBlob and
 * writes nothing else, so a loader commits only a blob that passed every
 * check; gcomp_state_write is its inverse. */
#ifndef GC_GCOMP_STATE_H
#define GC_GCOMP_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "compress/huffman.h"

/* The frame's layout (docs/FORMAT.md section 10, Layout) */
#define GCOMP_MAGIC0 'G'
#define GCOMP_MAGIC1 'P'
#define GCOMP_DTYPE_FP32 1
#define GCOMP_BLOCK_HDR 28
#define GCOMP_CHUNK_HDR 20
#define GCOMP_FLAG_TABLE 0x1u /* the frame carries its Huffman table */
#define GCOMP_FLAG_ZSIGN 0x2u /* exponent-0 values carry a sign bit */
#define GCOMP_FLAGS_ALL (GCOMP_FLAG_TABLE | GCOMP_FLAG_ZSIGN)
#define GCOMP_MAN_BITS 24    /* sign + 23 mantissa bits */
#define GCOMP_LEVEL_SHIFT 6  /* level L truncates 6*L bits (Section 5.1) */

#define GCOMP_TABLE_MAX (2 + 2 * HUFF_NSYM)
#define GCOMP_STATE_VERSION 1
#define GCOMP_STATE_MAX (1 + 2 * (1 + 1 + 4 + GCOMP_TABLE_MAX) + 8 + 8 * HUFF_NSYM)

/* hc's table section. tab: [GCOMP_TABLE_MAX] out; returns its length */
size_t gcomp_table_write(uint8_t *tab, const HuffCode *hc);

/* a table section -> the code, checked as a frame's decoder checks it: symbols
 * increasing, lengths 1..ntheta, CRC-32C equal to id, a valid code
 * (huff_code_build). Returns 0, -GC_ERR_TRUNCATED or -GC_ERR_CORRUPT.
 * hc: out; *used: the section's bytes (on 0); p: [len] */
int gcomp_table_parse(HuffCode *hc, size_t *used, const uint8_t *p, size_t len, int ntheta, uint32_t id);

/* A frame's block header, as its decoder reads it */
typedef struct {
    int ntheta;     /* the table's n_theta */
    uint32_t id;    /* the table's id */
    uint64_t nch;   /* chunks; 0 only for n = 0, when the frame is complete */
    uint64_t cbits; /* the chunks' bits */
    int table;      /* flag TABLE: a table section follows the block header */
    int zsign;      /* flag ZSIGN */
} GcompBlock;

/* One chunk (Section 6.1, Figure 7): from its header when decoding (start .. off);
 * levsum and neg0 are the encoder's */
typedef struct {
    uint32_t start, count, nnz; /* nnz: values with a nonzero exponent */
    uint64_t ebits, mbits;      /* exponent and mantissa segment bits */
    uint64_t off;               /* byte offset of the chunk data in the payload */
    uint64_t levsum;            /* encoder: sum of applied levels */
    int neg0;                   /* encoder: a zero/denormal with its sign bit set */
} GcompChunk;

/* the block header of a frame of n values (payload [len], the frame header's flags):
 * magic, type, n_theta, size and flags checked. Returns 0, -GC_ERR_CORRUPT,
 * -GC_ERR_TRUNCATED, -GC_ERR_MAGIC or -GC_ERR_OVERSIZED (bytes after an empty frame) */
int gcomp_block_parse(GcompBlock *b, const uint8_t *payload, size_t len, size_t n, uint16_t flags);

/* whether the b->nch chunk headers fit in payload [len] from at: 0 or -GC_ERR_TRUNCATED
 * (checked before a decoder allocates anything per chunk) */
int gcomp_chunks_fit(size_t len, size_t at, const GcompBlock *b);
/* the b->nch chunk headers at payload + at (after the table section, if any), checked
 * against each other, n, the block's bits and n_theta, and the payload's length, into
 * ck[b->nch] (start, count, nnz, ebits, mbits, off). Returns 0, -GC_ERR_CORRUPT,
 * -GC_ERR_TRUNCATED or -GC_ERR_OVERSIZED; ck is then written only in part */
int gcomp_chunks_parse(GcompChunk *ck, const uint8_t *payload, size_t len, size_t at, const GcompBlock *b, size_t n);

/* An encoder's state: its table, the exponent counts and encodes since the
 * last rebuild (GCOMP Section 4.4); the CPU and the GPU codec each hold one.
 * code and id mean something only when have; code.ntheta is its n_theta. */
typedef struct {
    int have;
    uint32_t id;
    HuffCode code;
    uint64_t since;           /* encodes since the last rebuild */
    uint64_t hist[HUFF_NSYM]; /* exponent counts since the last rebuild */
} GcompEnc;

/* One encode's table (GCOMP Section 4.4), decided before the frame is written and
 * committed to the encoder only once the frame is complete: bootstrap from this
 * tensor's exponent counts when the encoder has no table, else rebuild every K
 * encodes from the counts since the last rebuild, and carry the table in the frame
 * when it changes. */
typedef struct {
    int rebuilt;                  /* the counts since the last rebuild start again */
    int carry;                    /* the frame carries a new table: fresh, its section tab */
    HuffCode fresh;
    const HuffCode *code;         /* the table this frame codes with (fresh, or the encoder's) */
    uint32_t id;                  /* its id */
    uint8_t tab[GCOMP_TABLE_MAX]; /* when carry: its table section, tablen bytes */
    size_t tablen;
} GcompTablePlan;

/* the plan for an encode whose exponent counts are fh[HUFF_NSYM], with n_theta ntheta
 * and a rebuild every `every` encodes; p->code points into p or enc, which must stay */
void gcomp_table_plan(GcompTablePlan *p, const GcompEnc *enc, const uint64_t *fh, int ntheta, uint64_t every);
/* after the frame is complete: the new table (if carried), the counts and the encode */
void gcomp_table_commit(GcompEnc *enc, const GcompTablePlan *p, const uint64_t *fh);

/* What a blob holds, the state a resumed run needs to code exactly as an
 * uninterrupted one: the encoder's state and the decoder's current table (dec
 * and dec_id mean something only when dec_have). */
typedef struct {
    GcompEnc enc;
    int dec_have;
    uint32_t dec_id;
    HuffCode dec;
} GcompStateBlob;

/* the blob of an encoder and a decoder table (dec, dec_id read only when
 * dec_have). buf: [cap] out; returns its length, or -GC_ERR_NOSPACE when
 * cap < GCOMP_STATE_MAX */
int64_t gcomp_state_write(uint8_t *buf, size_t cap, const GcompEnc *enc, int dec_have, const HuffCode *dec,
                          uint32_t dec_id);

/* a whole blob -> b, for a codec whose n_theta is ntheta. Returns 0 or, for
 * the first problem met in blob order: -GC_ERR_TRUNCATED (shorter than its
 * fields), -GC_ERR_VERSION, -GC_ERR_CORRUPT (a have byte above 1, an n_theta
 * outside 1..HUFF_MAX_NTHETA, a table gcomp_table_parse refuses),
 * -GC_ERR_PARAM (an encoder table whose n_theta is not ntheta), or
 * -GC_ERR_OVERSIZED (bytes past the decoder's table). b is filled only as far
 * as the parse went: the caller uses it only on 0 (then a table it does not
 * hold is zeros).
 * b: out; buf: [len] */
int gcomp_state_parse(GcompStateBlob *b, const uint8_t *buf, size_t len, int ntheta);

#endif
