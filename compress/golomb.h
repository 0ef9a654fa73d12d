/* Golomb codes for the gaps between sparse positions (SBC section II,
 * "Optimal Position Encoding", equation 5, Algorithm 3; decoding as the
 * supplement's Algorithm 4).
 *
 * Golomb code with parameter M >= 1 for an integer v >= 0:
 *   q = v / M in unary: q one-bits then a zero bit,
 *   r = v % M in truncated binary: with c = ceil(log2 M) and u = 2^c - M,
 *       r < u is written in c-1 bits, r >= u as r + u in c bits.
 * With M = 2^b (a Rice code, what SBC's Algorithm 3 writes) the remainder is
 * plain b-bit binary. Bits go MSB first through compress/bitio.h.
 *
 * Example tables (tests/test_codec_sparse.c checks them bit by bit):
 *   v:      0     1     2     3     4      5      6
 *   M=2:    00    01    100   101   1100   1101   11100
 *   M=3:    00    010   011   100   1010   1011   1100
 *   M=4:    000   001   010   011   1000   1001   1010
 */
#ifndef GC_GOLOMB_H
#define GC_GOLOMB_H

#include <stddef.h>
#include <stdint.h>

#include "bitio.h"
#include "common/errors.h"
#include "common/hd.h"

/* SBC equation 5: the optimal Rice parameter for gaps between positions kept
 * with probability p (geometric gaps):
 *   b* = 1 + floor(log2(log(phi - 1) / log(1 - p))),  phi = (1 + sqrt 5) / 2
 * clamped to [0, 31] (b* would be negative for p > ~0.38; p >= 1 gives 0). */
int golomb_rice_bits(double p);

/* SBC equation 5: expected bits per position with Rice parameter b for
 * geometric gaps of success probability p: b + 1 / (1 - (1 - p)^(2^b)) */
double golomb_rice_mean_bits(double p, int b);

/* number of bits golomb_put writes for v with parameter M */
uint64_t golomb_len(uint64_t v, uint32_t M);

/* append the Golomb code of v with parameter M (M >= 1) */
void golomb_put(BitWriter *w, uint64_t v, uint32_t M);

/* read one Golomb code with parameter M (M >= 1); values above vmax are
 * rejected early (so a long unary run cannot loop for long).
 *   v: out the value
 * Returns 0, -GC_ERR_TRUNCATED (ran past the end) or -GC_ERR_CORRUPT (> vmax). */
int golomb_get(uint64_t *v, BitReader *r, uint32_t M, uint64_t vmax);

/* Rice code: Golomb with M = 2^b, 0 <= b <= 31 */
static inline void rice_put(BitWriter *w, uint64_t v, int b) {
    uint64_t q = v >> b;
    while (q >= 32) {
        bw_put(w, 0xFFFFFFFFu, 32);
        q -= 32;
    }
    /* q ones and a zero, then the b low bits of v */
    bw_put(w, (uint32_t)(((1ULL << q) - 1) << 1), (int)q + 1);
    bw_put(w, (uint32_t)(v & ((1ULL << b) - 1)), b);
}

static inline uint64_t rice_len(uint64_t v, int b) { return (v >> b) + 1 + (uint64_t)b; }

/* the unary part: one-bits up to the terminating zero, at most qmax of them (so a
 * long run of ones cannot loop for long) */
GC_HD static inline int golomb_get_unary(uint64_t *q, BitReader *r, uint64_t qmax) {
    uint64_t n = 0;
    for (;;) {
        if (br_bits_left(r) == 0) return -GC_ERR_TRUNCATED;
        uint32_t v = br_peek(r, 32); /* bits past the end read as 0 */
        if (v == 0xFFFFFFFFu) {
            n += 32;
            br_skip(r, 32);
            if (n > qmax) return -GC_ERR_CORRUPT;
            continue;
        }
#ifdef __CUDA_ARCH__
        int ones = __clz(~v);
#else
        int ones = __builtin_clz(~v);
#endif
        n += (uint64_t)ones;
        br_skip(r, ones + 1);
        if (n > qmax) return -GC_ERR_CORRUPT;     /* too large whatever follows */
        if (r->overrun) return -GC_ERR_TRUNCATED; /* the terminating zero lay past the end */
        *q = n;
        return 0;
    }
}

/* read one Rice code with parameter b (0..31), as golomb_get with M = 2^b; host and
 * device (the GPU decoder of sbc walks the same code) */
GC_HD static inline int rice_get(uint64_t *v, BitReader *r, int b, uint64_t vmax) {
    if (b < 0 || b > 31) return -GC_ERR_CORRUPT;
    uint64_t q;
    int rc = golomb_get_unary(&q, r, vmax >> b);
    if (rc) return rc;
    uint64_t x = br_get(r, b);
    if (r->overrun) return -GC_ERR_TRUNCATED;
    uint64_t val = (q << b) | x;
    if (val > vmax) return -GC_ERR_CORRUPT;
    *v = val;
    return 0;
}

#endif
