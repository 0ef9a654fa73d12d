/* Huffman codes with a length cap and an escape code (GCOMP Section 4);
 * see huffman.h for the rules. */
#include "huffman.h"

#include <string.h>

#include "common/errors.h"

/* ---- native Huffman lengths (Section 4.2) ---- */

void huff_lengths(int *len, const uint64_t *w, int nsym) {
    int order[HUFF_NSYM];                   /* leaves sorted by (weight, symbol) */
    uint64_t nw[2 * HUFF_NSYM];             /* node weights: leaves 0..nsym-1, then internal */
    int parent[2 * HUFF_NSYM];
    for (int s = 0; s < nsym; s++) {
        nw[s] = w[s];
        /* insertion sort: stable on symbol, nsym <= 256 */
        int j = s;
        while (j > 0 && w[order[j - 1]] > w[s]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = s;
    }
    /* two-queue merge: leaves in sorted order, internal nodes in creation
     * order (their weights never decrease); a leaf wins a tie */
    int li = 0, ii = nsym, next = nsym;
    for (int m = 0; m < nsym - 1; m++) {
        int pick[2];
        for (int k = 0; k < 2; k++) {
            if (li < nsym && (ii >= next || nw[order[li]] <= nw[ii])) pick[k] = order[li++];
            else pick[k] = ii++;
        }
        nw[next] = nw[pick[0]] + nw[pick[1]];
        parent[pick[0]] = parent[pick[1]] = next;
        next++;
    }
    /* depths: the root (last node) has depth 0; parents come after children */
    int depth[2 * HUFF_NSYM];
    int root = next - 1;
    depth[root] = 0;
    for (int v = root - 1; v >= 0; v--) depth[v] = depth[parent[v]] + 1;
    for (int s = 0; s < nsym; s++) len[s] = depth[s];
}

/* ---- GCOMP code: length cap + escape (Section 4.3) ---- */

int huff_code_build(HuffCode *hc, const uint8_t *len, int ntheta) {
    memset(hc, 0, sizeof *hc);
    if (ntheta < 1 || ntheta > HUFF_MAX_NTHETA) return -GC_ERR_CORRUPT;
    hc->ntheta = ntheta;
    int count[HUFF_MAX_NTHETA + 1] = {0};
    uint64_t kraft = 0; /* in units of 2^-ntheta */
    for (int s = 0; s < HUFF_NSYM; s++) {
        if (len[s] > ntheta) return -GC_ERR_CORRUPT;
        if (len[s] == 0) continue;
        count[len[s]]++;
        hc->ncoded++;
        kraft += 1ull << (ntheta - len[s]);
    }
    uint64_t full = 1ull << ntheta;
    if (kraft > full) return -GC_ERR_CORRUPT;                             /* not prefix-free */
    if (hc->ncoded < HUFF_NSYM && kraft == full) return -GC_ERR_CORRUPT;  /* no room for the escape */
    if (hc->ncoded == HUFF_NSYM && kraft != full) return -GC_ERR_CORRUPT; /* not a Huffman code */
    memcpy(hc->len, len, HUFF_NSYM);
    /* canonical codes: by length, then symbol (RFC 1951 3.2.2 order, MSB-first) */
    uint32_t next[HUFF_MAX_NTHETA + 2];
    uint32_t code = 0;
    for (int l = 1; l <= ntheta; l++) {
        code = (code + (uint32_t)count[l - 1]) << 1;
        next[l] = code;
    }
    for (int s = 0; s < HUFF_NSYM; s++)
        if (len[s]) hc->code[s] = next[len[s]]++;
    /* Section 4.3: the escape is the first overly long code truncated to
     * n_theta bits. Canonical codes fill the n_theta-bit prefixes [0, kraft)
     * in order, and the first long code starts right after them. */
    hc->has_escape = hc->ncoded < HUFF_NSYM;
    hc->escape = hc->has_escape ? (uint32_t)kraft : 0;
    for (int s = 0; s < HUFF_NSYM; s++) {
        if (len[s]) {
            hc->emit[s] = hc->code[s];
            hc->emit_len[s] = len[s];
        } else { /* Eq. (2): n_f = n_theta + n_s bits */
            hc->emit[s] = (hc->escape << HUFF_RAW_BITS) | (uint32_t)s;
            hc->emit_len[s] = (uint8_t)(ntheta + HUFF_RAW_BITS);
        }
    }
    return 0;
}

void huff_code_limit(HuffCode *hc, const int *native_len, int ntheta) {
    uint8_t len[HUFF_NSYM];
    for (int s = 0; s < HUFF_NSYM; s++) len[s] = native_len[s] <= ntheta ? (uint8_t)native_len[s] : 0;
    /* a complete native code minus its long codes always passes the checks */
    huff_code_build(hc, len, ntheta);
}

void huff_code_from_weights(HuffCode *hc, const uint64_t *w, int ntheta) {
    int len[HUFF_NSYM];
    huff_lengths(len, w, HUFF_NSYM);
    huff_code_limit(hc, len, ntheta);
}

/* ---- lookup-table decoding (Section 4.5, Figure 5) ---- */

void huff_lut_build(uint16_t *lut, const HuffCode *hc) {
    int n = hc->ntheta;
    memset(lut, 0, sizeof(uint16_t) << n);
    for (int s = 0; s < HUFF_NSYM; s++) {
        int l = hc->len[s];
        if (!l) continue;
        /* every n-bit index that starts with the code points to (s, l) */
        uint32_t base = hc->code[s] << (n - l), cnt = 1u << (n - l);
        for (uint32_t k = 0; k < cnt; k++) lut[base + k] = (uint16_t)(s | (l << 8));
    }
    if (hc->has_escape) lut[hc->escape] = (uint16_t)(HUFF_LUT_ESC | (uint32_t)(n << 8));
}
