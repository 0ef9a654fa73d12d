/* Base-3^5 packing and zero-run encoding, as the 3LC paper defines them
 * (Lim, Andersen, Kaminsky, SysML 2019, sections 3.2 and 3.3). Used by the
 * 3lc codec (compress/tlc.c, with zero-run encoding) and by stoch3
 * (compress/terngrad.c, base-3^5 only).
 *
 * Base-3^5 (3LC 3.2). For n trits t[i] in {-1, 0, 1}:
 *   (1) add 1: digit d[i] = t[i] + 1 in {0, 1, 2}
 *   (2)-(3) as a flat uint8 array
 *   (4) pad with zeros (digit 0) to a multiple of 5: L = ceil(n / 5) bytes,
 *       indices n .. 5L-1 are padding and hold digit 0
 *   (5) split the padded array into 5 equal parts P0..P4 of L digits
 *       (P_k[j] = d[k*L + j]) and compute
 *         byte[j] = P0[j]*81 + P1[j]*27 + P2[j]*9 + P3[j]*3 + P4[j]   (0..242)
 * So byte j holds values j, L+j, 2L+j, 3L+j, 4L+j, the first one in the most
 * significant trit. Five all-zero trits give digit 1 everywhere: byte 121.
 * Every byte j < B3_FULL(n, L) = max(n - 4L, 0) has five real values; only
 * the last bytes (at most 5) hold padding digits.
 *
 * Zero-run encoding (3LC 3.3): k consecutive bytes 121 (2 <= k <= 14) are
 * replaced by the single byte 243 + (k - 2). Our encoder is canonical: every
 * maximal run of r bytes 121 becomes floor(r / 14) bytes 255, then a byte
 * 243 + (r%14 - 2) if r%14 >= 2, or a literal 121 if r%14 == 1. Decoders
 * accept any valid run sequence (e.g. 121 121, or 251 251 from a parallel
 * encoder that coalesces only pairs of bytes), since all decode the same.
 */
#ifndef GC_BASE3_H
#define GC_BASE3_H

#include <stddef.h>
#include <stdint.h>

#define B3_ZERO 121       /* five zero trits */
#define B3_MAXLIT 242     /* largest base-3^5 byte */
#define B3_RUN0 243       /* run code for k = 2 */
#define B3_RUNMAX 14      /* longest run one byte codes (byte 255) */

/* bytes for n values */
static inline size_t b3_len(size_t n) { return n / 5 + (n % 5 != 0); }
/* bytes j < b3_full(n, L) hold five real values */
static inline size_t b3_full(size_t n, size_t L) { return n > 4 * L ? n - 4 * L : 0; }

/* emit the canonical code of a run of r >= 1 zero bytes; returns bytes written.
 * dst: [r / 14 + 1] */
static inline size_t b3_emit_run(uint8_t *dst, size_t r) {
    size_t o = 0;
    while (r >= B3_RUNMAX) {
        dst[o++] = (uint8_t)(B3_RUN0 + B3_RUNMAX - 2);
        r -= B3_RUNMAX;
    }
    if (r == 1) dst[o++] = B3_ZERO;
    else if (r >= 2) dst[o++] = (uint8_t)(B3_RUN0 + r - 2);
    return o;
}
/* bytes the canonical code of a run of r takes */
static inline size_t b3_run_bytes(size_t r) { return r / B3_RUNMAX + (r % B3_RUNMAX != 0); }

/* digit k (0 = most significant) of a base-3^5 byte b <= 242 */
static inline uint32_t b3_digit(uint32_t b, int k) {
    static const uint32_t pw[5] = {81, 27, 9, 3, 1};
    return (b / pw[k]) % 3;
}

/* Zero-run encode src[0..len) into dst (dst may equal src: the output never
 * gets ahead of the input). A maximal run that reaches the end of src is not
 * written: its length is returned in *tail_run (0 if src does not end in
 * byte 121), so a caller can extend it across a partition boundary.
 * Returns the bytes written. dst: [len], src: [len] */
static inline size_t b3_zre_body(uint8_t *dst, const uint8_t *src, size_t len, size_t *tail_run) {
    size_t o = 0, i = 0;
    *tail_run = 0;
    while (i < len) {
        uint8_t b = src[i];
        if (b != B3_ZERO) {
            dst[o++] = b;
            i++;
            continue;
        }
        size_t r = 0;
        while (i < len && src[i] == B3_ZERO) {
            r++;
            i++;
        }
        if (i == len) {
            *tail_run = r;
            break;
        }
        o += b3_emit_run(dst + o, r);
    }
    return o;
}

/* Padding check: the digits of byte j (j >= b3_full) that fall past n must
 * be 0 (3LC 3.2 step 4 pads with zeros). Returns 1 if byte b at position j is
 * valid. */
static inline int b3_pad_ok(uint32_t b, size_t j, size_t n, size_t L) {
    for (int k = 0; k < 5; k++)
        if ((size_t)k * L + j >= n && b3_digit(b, k) != 0) return 0;
    return 1;
}

/* one digit stream: o[i] (+)= value of digit (s[i] / div) % 3.
 * o: [cnt], s: [cnt] */
static inline void b3_decode_stream(float *o, const uint8_t *s, size_t cnt, uint32_t div, float m, float weight,
                                    int accumulate) {
    if (!accumulate)
        for (size_t i = 0; i < cnt; i++) o[i] = (float)((int32_t)((s[i] / div) % 3) - 1) * m;
    else
        for (size_t i = 0; i < cnt; i++) o[i] += weight * ((float)((int32_t)((s[i] / div) % 3) - 1) * m);
}

/* Dequantize bytes j in [j0, j1) (all < b3_full, so five real values each):
 * value = (float)(digit - 1) * m, written to out[k*L + j] (accumulate == 0)
 * or added as out += weight * value. Done one digit stream at a time over
 * blocks of 2048 bytes, so each loop has one input and one output stream and
 * vectorizes. out: [5L] (only [n] touched), src: [j1 - j0] bytes <= 242 */
static inline void b3_decode_full(float *out, const uint8_t *src, size_t L, size_t j0, size_t j1, float m,
                                  float weight, int accumulate) {
    for (size_t c = j0; c < j1; c += 2048) {
        size_t cnt = j1 - c < 2048 ? j1 - c : 2048;
        const uint8_t *s = src + (c - j0);
        b3_decode_stream(out + c, s, cnt, 81, m, weight, accumulate);
        b3_decode_stream(out + L + c, s, cnt, 27, m, weight, accumulate);
        b3_decode_stream(out + 2 * L + c, s, cnt, 9, m, weight, accumulate);
        b3_decode_stream(out + 3 * L + c, s, cnt, 3, m, weight, accumulate);
        b3_decode_stream(out + 4 * L + c, s, cnt, 1, m, weight, accumulate);
    }
}

/* same for one byte j >= b3_full (padding digits skipped; checked before) */
static inline void b3_decode_tail(float *out, uint32_t b, size_t j, size_t n, size_t L, float m, float weight,
                                  int accumulate) {
    for (int k = 0; k < 5; k++) {
        size_t i = (size_t)k * L + j;
        if (i >= n) continue;
        float v = (float)((int32_t)b3_digit(b, k) - 1) * m;
        if (accumulate) out[i] += weight * v;
        else out[i] = v;
    }
}

#endif
