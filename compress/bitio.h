/* Bit-level writer and reader, MSB first: the first bit written is bit 7 of
 * byte 0. This order lets a decoder peek the next k bits as an integer whose
 * high bit is the first bit of a code (Huffman lookup tables, Golomb unary
 * prefixes).
 *
 * The writer never writes past cap: once full it sets overflow and drops bits.
 * The reader never reads past len: peeks beyond the end see zero bits, and a
 * consume beyond the end sets overrun, which decoders turn into
 * GC_ERR_TRUNCATED/GC_ERR_CORRUPT. Both are static inline for speed; the reader is
 * also compiled for the device (GC_HD), where the GPU decoders walk Rice codes. */
#ifndef GC_BITIO_H
#define GC_BITIO_H

#include <stddef.h>
#include <stdint.h>

#include "common/hd.h"

typedef struct {
    uint8_t *buf;
    size_t cap;      /* bytes */
    size_t pos;      /* bytes flushed */
    uint64_t acc;    /* pending bits, right-aligned */
    int nacc;        /* number of pending bits (< 8 after a flush) */
    int overflow;
} BitWriter;

static inline void bw_init(BitWriter *w, uint8_t *buf, size_t cap) {
    w->buf = buf;
    w->cap = cap;
    w->pos = 0;
    w->acc = 0;
    w->nacc = 0;
    w->overflow = 0;
}

/* append the low nbits of v (0 <= nbits <= 32), most significant first */
static inline void bw_put(BitWriter *w, uint32_t v, int nbits) {
    if (nbits == 0) return;
    w->acc = (w->acc << nbits) | ((uint64_t)v & ((1ULL << nbits) - 1));
    w->nacc += nbits;
    while (w->nacc >= 8) {
        w->nacc -= 8;
        if (w->pos < w->cap) w->buf[w->pos++] = (uint8_t)(w->acc >> w->nacc);
        else w->overflow = 1;
    }
    w->acc &= (1ULL << w->nacc) - 1;
}

/* flush a partial byte, zero-padded at the bottom; returns total bytes */
static inline size_t bw_finish(BitWriter *w) {
    if (w->nacc > 0) {
        if (w->pos < w->cap) w->buf[w->pos++] = (uint8_t)(w->acc << (8 - w->nacc));
        else w->overflow = 1;
        w->nacc = 0;
        w->acc = 0;
    }
    return w->pos;
}

static inline uint64_t bw_bits(const BitWriter *w) { return (uint64_t)w->pos * 8 + (uint64_t)w->nacc; }

typedef struct {
    const uint8_t *buf;
    size_t len;      /* bytes */
    uint64_t bitpos; /* next bit to consume */
    int overrun;
} BitReader;

GC_HD static inline void br_init(BitReader *r, const uint8_t *buf, size_t len) {
    r->buf = buf;
    r->len = len;
    r->bitpos = 0;
    r->overrun = 0;
}

GC_HD static inline uint64_t br_bits_left(const BitReader *r) {
    uint64_t total = (uint64_t)r->len * 8;
    return r->bitpos >= total ? 0 : total - r->bitpos;
}

/* next nbits (0..32) without consuming; bits past the end read as 0 */
GC_HD static inline uint32_t br_peek(const BitReader *r, int nbits) {
    if (nbits == 0) return 0;
    size_t byte = (size_t)(r->bitpos >> 3);
    int off = (int)(r->bitpos & 7);
    uint64_t v = 0;
    /* gather 8 bytes starting at byte (zero past the end) */
    if (byte + 8 <= r->len) {
        for (int i = 0; i < 8; i++) v = (v << 8) | r->buf[byte + i];
    } else {
        for (int i = 0; i < 8; i++) v = (v << 8) | (byte + i < r->len ? r->buf[byte + i] : 0);
    }
    return (uint32_t)((v << off) >> (64 - nbits));
}

GC_HD static inline void br_skip(BitReader *r, int nbits) {
    r->bitpos += (uint64_t)nbits;
    if (r->bitpos > (uint64_t)r->len * 8) r->overrun = 1;
}

GC_HD static inline uint32_t br_get(BitReader *r, int nbits) {
    uint32_t v = br_peek(r, nbits);
    br_skip(r, nbits);
    return v;
}

#endif
