/* topk: the "5% sparsification" baseline of 3LC (Lim et al. 2019, section 4.2
 * "Compared Designs"): send the fraction `ratio` of values with the largest
 * magnitude ("we use the magnitude, not relative magnitude"), the threshold
 * found from a sample ("we only sort sampled input values"), positions as a
 * bitmap ("a bitmap to indicate which state changes sparsification has
 * selected, which adds 1 bit per state change"), and the selected values as
 * 32-bit floats. Unsent values are the caller's residual (error feedback lives
 * outside the codec).
 *
 * Selection (compress/select.h): exactly the k = max(1, round(ratio*n)) largest
 * |x|, zeros never selected, ties broken by lowest index; non-finite input is
 * rejected with -GC_ERR_PARAM.
 *
 * Payload (docs/FORMAT.md section 9), little-endian:
 *   offset        size        field
 *   0             4           k: number of values sent (u32, <= n)
 *   4             ceil(n/8)   bitmap: bit i = value i sent; MSB first within
 *                             each byte (value i is bit 7-(i%8) of byte i/8);
 *                             padding bits after bit n-1 are zero
 *   4+ceil(n/8)   4k          the sent values (f32), in increasing index order;
 *                             each finite and nonzero
 * No flags. Decode validates the whole payload before writing to out, so a
 * rejected payload leaves out untouched.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "select.h"

static const CodecParamDesc topk_params[] = {
    {"ratio", 0.05, 1e-7, 1.0, 0, "fraction of largest |values| sent (3LC 4.2: 5% sparsification)", 0},
};

static size_t topk_max_payload(const Codec *c, size_t n) {
    (void)c; /* CodecSide.density may raise the ratio up to 1 for a call */
    return 4 + (n + 7) / 8 + 4 * n;
}

static int topk_decode(Codec *c, float *out, size_t n, float weight, int accumulate, const uint8_t *payload,
                       size_t len, uint16_t flags);

static int64_t topk_encode(Codec *c, uint8_t *payload, size_t cap, uint16_t *flags, const float *x, size_t n,
                           const CodecSide *side) {
    *flags = 0;
    double ratio;
    uint32_t *idx;
    int64_t got = select_for_encode(&idx, &ratio, c->spec.v[0], side->density, x, n, SELECT_MAG);
    if (got < 0) return got;
    size_t cnt = (size_t)got, bm = (n + 7) / 8;
    size_t len = 4 + bm + 4 * cnt;
    if (cap < len) {
        free(idx);
        return -GC_ERR_NOSPACE;
    }
    put_u32(payload, (uint32_t)cnt);
    uint8_t *bitmap = payload + 4, *vals = payload + 4 + bm;
    memset(bitmap, 0, bm);
    for (size_t j = 0; j < cnt; j++) {
        uint32_t i = idx[j];
        bitmap[i >> 3] |= (uint8_t)(0x80u >> (i & 7));
        put_f32(vals + 4 * j, x[i]);
    }
    select_fill_mask(side->mask, idx, cnt, n);
    free(idx);
    /* repr = exactly what decode yields (safe when repr aliases x: the payload is written) */
    if (side->repr && topk_decode(c, side->repr, n, 1.0f, 0, payload, len, 0) != 0) return -GC_ERR_STATE;
    return (int64_t)len;
}

/* 8 bitmap bytes as a big-endian word: bit 63 is value base+0 */
static inline uint64_t load_be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return v;
}

static int topk_decode(Codec *c, float *out, size_t n, float weight, int accumulate, const uint8_t *payload,
                       size_t len, uint16_t flags) {
    (void)c;
    if (flags) return -GC_ERR_CORRUPT;
    if (len < 4) return -GC_ERR_TRUNCATED;
    uint64_t k = get_u32(payload);
    if (k > n) return -GC_ERR_CORRUPT;
    size_t bm = (n + 7) / 8;
    uint64_t need = 4 + (uint64_t)bm + 4 * k;
    if ((uint64_t)len < need) return -GC_ERR_TRUNCATED;
    if ((uint64_t)len > need) return -GC_ERR_OVERSIZED;
    const uint8_t *bitmap = payload + 4, *vals = payload + 4 + bm;
    /* padding bits of the last byte (values n..8*bm-1) must be zero */
    if ((n & 7) && (bitmap[bm - 1] & (0xFFu >> (n & 7)))) return -GC_ERR_CORRUPT;
    uint64_t pop = 0;
    size_t b = 0;
    for (; b + 8 <= bm; b += 8) {
        uint64_t w;
        memcpy(&w, bitmap + b, 8);
        pop += (uint64_t)__builtin_popcountll(w);
    }
    for (; b < bm; b++) pop += (uint64_t)__builtin_popcount(bitmap[b]);
    if (pop != k) return -GC_ERR_CORRUPT;
    for (uint64_t j = 0; j < k; j++) {
        uint32_t u = get_u32(vals + 4 * j);
        if ((u & 0x7FFFFFFFu) == 0 || (u & 0x7F800000u) == 0x7F800000u) return -GC_ERR_CORRUPT;
    }
    /* valid: write */
    if (!accumulate) memset(out, 0, n * sizeof *out);
    size_t j = 0;
    for (b = 0; b < bm; b += 8) {
        uint64_t w;
        if (b + 8 <= bm) {
            w = load_be64(bitmap + b);
        } else {
            w = 0;
            for (size_t i = 0; i < 8; i++) w = (w << 8) | (b + i < bm ? bitmap[b + i] : 0);
        }
        while (w) {
            int lz = __builtin_clzll(w);
            size_t i = 8 * b + (size_t)lz;
            w &= ~(1ULL << (63 - lz));
            float v = get_f32(vals + 4 * j++);
            if (accumulate) out[i] += weight * v;
            else out[i] = v;
        }
    }
    return 0;
}

const CodecOps codec_topk_ops = {
    .name = "topk",
    .id = CODEC_TOPK,
    .summary = "top-k sparsification, bitmap + fp32 values (3LC's 5% sparsification baseline)",
    .params = topk_params,
    .nparams = 1,
    .max_payload = topk_max_payload,
    .encode = topk_encode,
    .decode = topk_decode,
};
