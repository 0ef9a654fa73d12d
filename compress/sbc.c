/* sbc: Sparse Binary Compression (Sattler et al. 2018), the compression step.
 *
 * Section II "Sparse Binarization" / Algorithm 2: keep the fraction p biggest
 * and the fraction p smallest values, compute the mean of the remaining
 * positive values (mu+) and of the remaining negative values (mu-); if
 * mu+ >= |mu-| send the positive side as mu+ at its positions, else the
 * negative side as mu- at its positions. Every other value becomes 0 (the
 * caller keeps it in the residual, equation 2).
 * Section II "Optimal Position Encoding" / Algorithm 3: the positions go as
 * gaps, Golomb-coded with M = 2^b*, b* = 1 + floor(log2(log(phi-1)/log(1-p)))
 * (equation 5, compress/golomb.h). Decoding as the supplement's Algorithm 4.
 *
 * p defaults to 0.001: SBC (1), the configuration without communication delay
 * ("no communication delay and a gradient sparsity of 0.1%", section IV-B),
 * which is the one a per-step codec reproduces; SBC (2) and (3) use p = 0.01
 * with 10 / 100 local steps (the delay is the distributed layer's job).
 * CodecSide.density overrides p for one call.
 *
 * Selection (compress/select.h): "the fraction p biggest" is the k = max(1,
 * round(p*n)) largest positive values, "the fraction p smallest" the k most
 * negative values (positives never count as "smallest" and vice versa, so
 * each mean is over values of one sign, as the text says); ties broken by
 * lowest index; zeros are never selected. The means are computed in double
 * over the selected values in increasing index order and rounded to float.
 * Tie mu+ == |mu-| sends the positive side (Algorithm 2's ">=").
 * Non-finite input gives -GC_ERR_PARAM.
 *
 * Payload (docs/FORMAT.md section 9), little-endian:
 *   offset  size  field
 *   0       4     m: number of positions (u32, <= n)
 *   4       4     mu: the value at every position (f32); finite and nonzero
 *                 when m > 0, +0.0 when m == 0
 *   8       1     b: Rice parameter (0..31), M = 2^b
 *   9       ...   m Golomb-Rice codes of d-1, d = position - previous
 *                 position (the first previous position is -1), MSB first;
 *                 zero bits pad the last byte
 * No flags. Decode validates everything before writing to out.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "golomb.h"
#include "select.h"

#define SBC_HEADER 9

static const CodecParamDesc sbc_params[] = {
    {"p", 0.001, 1e-7, 1.0, 0, "fraction of biggest and of smallest values considered (SBC IV-B: SBC (1) 0.1%; trainers with --delay: 1%, SBC (2)/(3))", 0},
};

static size_t sbc_max_payload(const Codec *c, size_t n) {
    (void)c; /* m <= n codes of at most 1+31 bits plus the unary parts (sum of gaps / M <= n) */
    return SBC_HEADER + (33 * (uint64_t)n + 7) / 8;
}

static int sbc_decode(Codec *c, float *out, size_t n, float weight, int accumulate, const uint8_t *payload,
                      size_t len, uint16_t flags);

static double sum_at(const float *x, const uint32_t *idx, size_t cnt) {
    double s = 0;
    for (size_t j = 0; j < cnt; j++) s += (double)x[idx[j]];
    return s;
}

static int64_t sbc_encode(Codec *c, uint8_t *payload, size_t cap, uint16_t *flags, const float *x, size_t n,
                          const CodecSide *side) {
    *flags = 0;
    double p;
    uint32_t *ipos, *ineg = NULL;
    int64_t cp = select_for_encode(&ipos, &p, c->spec.v[0], side->density, x, n, SELECT_POS);
    int64_t cn = cp < 0 ? cp : select_for_encode(&ineg, &p, c->spec.v[0], side->density, x, n, SELECT_NEG);
    if (cp < 0 || cn < 0) {
        free(ipos);
        return cp < 0 ? cp : cn;
    }
    int64_t rc = 0;
    /* Algorithm 2: the two means, keep the side with the larger magnitude */
    double mu_pos = cp ? sum_at(x, ipos, (size_t)cp) / (double)cp : 0.0;
    double mu_neg = cn ? -sum_at(x, ineg, (size_t)cn) / (double)cn : 0.0; /* |mu-| */
    const uint32_t *idx = NULL;
    size_t m = 0;
    float mean = 0.0f;
    if (cp || cn) {
        if (cp && mu_pos >= mu_neg) {
            idx = ipos;
            m = (size_t)cp;
            mean = (float)mu_pos;
        } else {
            idx = ineg;
            m = (size_t)cn;
            mean = -(float)mu_neg;
        }
    }
    if (m && (!isfinite(mean) || mean == 0.0f)) rc = -GC_ERR_PARAM; /* cannot happen for finite input */
    /* Algorithm 3: gaps, Golomb-Rice with the optimal parameter (equation 5) */
    int b = golomb_rice_bits(p);
    uint64_t bits = 0, prev = (uint64_t)-1;
    for (size_t j = 0; j < m; j++) {
        bits += rice_len(idx[j] - prev - 1, b);
        prev = idx[j];
    }
    size_t len = SBC_HEADER + (size_t)((bits + 7) / 8);
    if (!rc && cap < len) rc = -GC_ERR_NOSPACE;
    if (!rc) {
        put_u32(payload, (uint32_t)m);
        put_f32(payload + 4, mean);
        payload[8] = (uint8_t)b;
        BitWriter w;
        bw_init(&w, payload + SBC_HEADER, len - SBC_HEADER);
        prev = (uint64_t)-1;
        for (size_t j = 0; j < m; j++) {
            rice_put(&w, idx[j] - prev - 1, b); /* d - 1, d = I_i - I_{i-1} */
            prev = idx[j];
        }
        if (bw_finish(&w) != len - SBC_HEADER || w.overflow) rc = -GC_ERR_STATE;
        select_fill_mask(side->mask, idx, m, n);
    }
    free(ipos);
    free(ineg);
    if (rc) return rc;
    if (side->repr && sbc_decode(c, side->repr, n, 1.0f, 0, payload, len, 0) != 0) return -GC_ERR_STATE;
    return (int64_t)len;
}

/* Algorithm 4: read m codes; with out == NULL only validate. */
static int sbc_walk(float *out, size_t n, float weight, int accumulate, float mean, int b, uint64_t m,
                    const uint8_t *bits, size_t nbytes) {
    BitReader r;
    br_init(&r, bits, nbytes);
    uint64_t next = 0; /* smallest index the next position may take */
    float add = weight * mean;
    for (uint64_t j = 0; j < m; j++) {
        uint64_t g;
        if (next >= n) return -GC_ERR_CORRUPT; /* no room for another position */
        int rc = rice_get(&g, &r, b, n - 1 - next);
        if (rc) return rc;
        uint64_t pos = next + g;
        if (out) {
            if (accumulate) out[pos] += add;
            else out[pos] = mean;
        }
        next = pos + 1;
    }
    /* only the zero padding of the last byte may remain */
    uint64_t left = br_bits_left(&r);
    if (left >= 8) return -GC_ERR_OVERSIZED;
    if (left && br_peek(&r, (int)left) != 0) return -GC_ERR_CORRUPT;
    return 0;
}

static int sbc_decode(Codec *c, float *out, size_t n, float weight, int accumulate, const uint8_t *payload,
                      size_t len, uint16_t flags) {
    (void)c;
    if (flags) return -GC_ERR_CORRUPT;
    if (len < SBC_HEADER) return -GC_ERR_TRUNCATED;
    uint64_t m = get_u32(payload);
    uint32_t mu_bits = get_u32(payload + 4);
    float mean = get_f32(payload + 4);
    int b = payload[8];
    if (m > n || b > 31) return -GC_ERR_CORRUPT;
    if (m == 0 && mu_bits != 0) return -GC_ERR_CORRUPT;
    if (m > 0 && (!isfinite(mean) || mean == 0.0f)) return -GC_ERR_CORRUPT;
    uint64_t have = 8 * (uint64_t)(len - SBC_HEADER);
    if (m * (uint64_t)(b + 1) > have) return -GC_ERR_TRUNCATED; /* every code takes >= b+1 bits */
    int rc = sbc_walk(NULL, n, 0, 0, mean, b, m, payload + SBC_HEADER, len - SBC_HEADER);
    if (rc) return rc;
    if (!accumulate) memset(out, 0, n * sizeof *out);
    return sbc_walk(out, n, weight, accumulate, mean, b, m, payload + SBC_HEADER, len - SBC_HEADER);
}

const CodecOps codec_sbc_ops = {
    .name = "sbc",
    .id = CODEC_SBC,
    .summary = "sparse binary compression: top-p side as one mean + Golomb-coded positions (SBC)",
    .params = sbc_params,
    .nparams = 1,
    .max_payload = sbc_max_payload,
    .encode = sbc_encode,
    .decode = sbc_decode,
};
