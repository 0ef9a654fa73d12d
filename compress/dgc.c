/* dgc: the sparsification and encoding of Deep Gradient Compression (Lin et
 * al., ICLR 2018).
 *
 * Section 3.1 / Algorithm 1: send only the gradients above a threshold, the
 * density `density` (default 0.1%: "the target sparsity ratio of 99.9%",
 * sections 4.2 and 5), "The encode() function packs the 32-bit nonzero gradient values
 * and 16-bit run lengths of zeros". Section 5: the threshold comes from a
 * sample of 0.1%-1% of the values, and "if the number of gradients exceeding
 * the threshold is far more than expected, a precise threshold is calculated
 * from the already-selected gradients" (compress/select.h; the precise step is
 * always applied when more than k pass, so a frame holds exactly k values).
 *
 * Momentum correction (3.2), local gradient clipping (3.2), momentum factor
 * masking (3.3) and warm-up (3.3) belong to the distributed layer: the codec
 * reports the selection through CodecSide.mask and takes the warm-up density
 * through CodecSide.density.
 *
 * Selection: exactly the k = max(1, round(density*n)) largest |x|, zeros never
 * selected, ties broken by lowest index; non-finite input gives -GC_ERR_PARAM.
 *
 * Payload (docs/FORMAT.md section 9), little-endian:
 *   offset   size   field
 *   0        4      k: number of values (u32, <= n)
 *   4        4k     values (f32) in increasing index order; finite, nonzero
 *   4+4k     2e     run entries (u16), e >= k:
 *                     r in 0..65534: r zeros, then the next value
 *                     r =  65535   : 65535 zeros and no value (a run longer
 *                                    than 65534 is split: floor(g/65535)
 *                                    entries 65535, then g mod 65535)
 * The first run counts from index 0; zeros after the last value are implied by
 * n and not coded; the payload ends right after the k-th value's entry. No
 * flags. Decode validates everything before writing to out.
 */
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "select.h"

#define DGC_RUN_SKIP 0xFFFFu /* run entry: 65535 zeros, no value */

static const CodecParamDesc dgc_params[] = {
    {"density", 0.001, 1e-7, 1.0, 0, "fraction of largest |values| sent (DGC 3.1, 5: 0.1%)", 0},
};

static size_t dgc_max_payload(const Codec *c, size_t n) {
    (void)c; /* k values + k entries + at most n/65535 skip entries; density may be raised to 1 */
    return 4 + 6 * n + 2 * (n / 65535 + 1);
}

static int dgc_decode(Codec *c, float *out, size_t n, float weight, int accumulate, const uint8_t *payload,
                      size_t len, uint16_t flags);

static int64_t dgc_encode(Codec *c, uint8_t *payload, size_t cap, uint16_t *flags, const float *x, size_t n,
                          const CodecSide *side) {
    *flags = 0;
    double density;
    uint32_t *idx;
    int64_t got = select_for_encode(&idx, &density, c->spec.v[0], side->density, x, n, SELECT_MAG);
    if (got < 0) return got;
    size_t cnt = (size_t)got;
    /* size: one entry per value plus the skip entries of long runs */
    size_t entries = cnt;
    uint64_t prev_end = 0; /* index after the previous value */
    for (size_t j = 0; j < cnt; j++) {
        entries += (size_t)((idx[j] - prev_end) / 65535);
        prev_end = (uint64_t)idx[j] + 1;
    }
    size_t len = 4 + 4 * cnt + 2 * entries;
    if (cap < len) {
        free(idx);
        return -GC_ERR_NOSPACE;
    }
    put_u32(payload, (uint32_t)cnt);
    uint8_t *vals = payload + 4, *runs = payload + 4 + 4 * cnt;
    prev_end = 0;
    for (size_t j = 0; j < cnt; j++) {
        put_f32(vals + 4 * j, x[idx[j]]);
        uint64_t g = idx[j] - prev_end; /* zeros before this value */
        while (g >= 65535) {
            put_u16(runs, DGC_RUN_SKIP);
            runs += 2;
            g -= 65535;
        }
        put_u16(runs, (uint16_t)g);
        runs += 2;
        prev_end = (uint64_t)idx[j] + 1;
    }
    select_fill_mask(side->mask, idx, cnt, n);
    free(idx);
    if (side->repr && dgc_decode(c, side->repr, n, 1.0f, 0, payload, len, 0) != 0) return -GC_ERR_STATE;
    return (int64_t)len;
}

/* Walk the run entries. With out == NULL only validate; else write.
 * Returns 0 or a negative GcError. */
static int dgc_walk(float *out, size_t n, float weight, int accumulate, const uint8_t *payload, size_t len,
                    uint64_t k) {
    const uint8_t *vals = payload + 4;
    size_t p = 4 + 4 * (size_t)k;
    uint64_t pos = 0; /* next index */
    for (uint64_t j = 0; j < k; j++) {
        for (;;) {
            if (p + 2 > len) return -GC_ERR_TRUNCATED;
            uint32_t r = get_u16(payload + p);
            p += 2;
            pos += r;
            if (r != DGC_RUN_SKIP) break;
            if (pos >= n) return -GC_ERR_CORRUPT; /* a skip must leave room for a value */
        }
        if (pos >= n) return -GC_ERR_CORRUPT;
        if (out) {
            float v = get_f32(vals + 4 * j);
            if (accumulate) out[pos] += weight * v;
            else out[pos] = v;
        }
        pos++;
    }
    if (p != len) return -GC_ERR_OVERSIZED;
    return 0;
}

static int dgc_decode(Codec *c, float *out, size_t n, float weight, int accumulate, const uint8_t *payload,
                      size_t len, uint16_t flags) {
    (void)c;
    if (flags) return -GC_ERR_CORRUPT;
    if (len < 4) return -GC_ERR_TRUNCATED;
    uint64_t k = get_u32(payload);
    if (k > n) return -GC_ERR_CORRUPT;
    if ((uint64_t)len < 4 + 6 * k) return -GC_ERR_TRUNCATED; /* each value needs its entry */
    for (uint64_t j = 0; j < k; j++) {
        uint32_t u = get_u32(payload + 4 + 4 * j);
        if ((u & 0x7FFFFFFFu) == 0 || (u & 0x7F800000u) == 0x7F800000u) return -GC_ERR_CORRUPT;
    }
    int rc = dgc_walk(NULL, n, 0, 0, payload, len, k);
    if (rc) return rc;
    if (!accumulate) memset(out, 0, n * sizeof *out);
    return dgc_walk(out, n, weight, accumulate, payload, len, k);
}

const CodecOps codec_dgc_ops = {
    .name = "dgc",
    .id = CODEC_DGC,
    .summary = "DGC top-0.1% sparsification: fp32 values + 16-bit zero runs, sampled threshold",
    .params = dgc_params,
    .nparams = 1,
    .max_payload = dgc_max_payload,
    .encode = dgc_encode,
    .decode = dgc_decode,
};
