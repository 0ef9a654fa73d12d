/* Huffman codes over a byte alphabet with a maximum code length n_theta and an
 * escape code, as GCOMP uses them for float exponents (Li et al., SoCC 2024,
 * Section 4).
 *
 *  - huff_lengths: native Huffman code lengths (Section 4.2), every symbol of
 *    the alphabet in the tree, weights may be 0. Deterministic: leaves are
 *    ordered by (weight, symbol); the two-queue merge takes a leaf before an
 *    internal node of equal weight.
 *  - huff_code_limit: the GCOMP code (Section 4.3): symbols whose native code
 *    is longer than n_theta lose their code; the codes that remain are
 *    canonical (sorted by length, then symbol, MSB-first); the escape code is
 *    the first encountered overly long code (in that canonical order)
 *    truncated to n_theta bits. For canonical codes that truncation equals
 *    S = sum over kept codes of 2^(n_theta - len), so the escape is S written
 *    on n_theta bits. An escaped symbol is sent as escape + its raw 8 bits.
 *  - huff_code_build: the same code rebuilt from the kept lengths alone (what a
 *    decoder receives), validating them: lengths 1..n_theta, Kraft sum <= 1,
 *    an escape exactly when some symbol has no code.
 *  - huff_lut_build: the 2^n_theta-entry decoding lookup table (Section 4.5,
 *    Figure 5): the index is the next n_theta bits of the stream; the entry
 *    gives the symbol and the true code length.
 *
 * Shape letters: S = HUFF_NSYM symbols, L = 2^n_theta lookup entries. */
#ifndef GC_HUFFMAN_H
#define GC_HUFFMAN_H

#include <stdint.h>

#define HUFF_NSYM 256
#define HUFF_MAX_NTHETA 16
#define HUFF_RAW_BITS 8 /* n_s: bits of a raw (escaped) symbol */

typedef struct {
    int ntheta;                /* maximum code length n_theta */
    int ncoded;                /* symbols that have their own code */
    int has_escape;            /* 1 when some symbol has no code (ncoded < S) */
    uint32_t escape;           /* the n_theta-bit escape code (when has_escape) */
    uint8_t len[HUFF_NSYM];    /* code length 1..n_theta, 0 = escaped */
    uint32_t code[HUFF_NSYM];  /* canonical code, right-aligned (when len > 0) */
    /* what an encoder emits for each symbol: its code, or escape + raw 8 bits */
    uint32_t emit[HUFF_NSYM];  /* right-aligned bit pattern */
    uint8_t emit_len[HUFF_NSYM];
} HuffCode;

/* lookup-table entry: symbol in bits 0..7, code length in bits 8..12 (0 =
 * invalid index: no code starts with these bits), bit 13 = escape */
#define HUFF_LUT_SYM(e) ((e) & 0xFFu)
#define HUFF_LUT_LEN(e) (((e) >> 8) & 0x1Fu)
#define HUFF_LUT_ESC 0x2000u

/* len[s] = native Huffman code length of symbol s (>= 1; up to nsym - 1).
 * len: [nsym] out; w: [nsym] weights; 2 <= nsym <= HUFF_NSYM */
void huff_lengths(int *len, const uint64_t *w, int nsym);

/* the GCOMP code for full native lengths (Section 4.3).
 * hc: out; native_len: [S] native Huffman lengths (a complete prefix code) */
void huff_code_limit(HuffCode *hc, const int *native_len, int ntheta);

/* huff_lengths + huff_code_limit. hc: out; w: [S] symbol frequencies */
void huff_code_from_weights(HuffCode *hc, const uint64_t *w, int ntheta);

/* rebuild the code from the kept lengths; 0 or -GC_ERR_CORRUPT (a length above
 * n_theta, Kraft sum > 1 i.e. not prefix-free, no room for the escape while a
 * symbol is uncoded, or an incomplete code with every symbol coded).
 * hc: out; len: [S] lengths, 0 = escaped */
int huff_code_build(HuffCode *hc, const uint8_t *len, int ntheta);

/* fill the decoding table (Section 4.5). lut: [1 << hc->ntheta] out */
void huff_lut_build(uint16_t *lut, const HuffCode *hc);

#endif
