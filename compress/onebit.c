/* onebit: 1-bit quantization with minimum squared quantization error, the
 * 3LC paper's "MQE 1-bit int" baseline (3LC 3.1 "Squared quantization error
 * minimization" and 4.2, after Seide et al. 2014, 1-bit SGD): every value
 * becomes one bit, 1 for the non-negative values (x >= 0, -0 included) and 0
 * for the negative ones, and each bit value is dequantized by its own
 * reconstruction value: the mean of the non-negative values (pos) and the
 * mean of the negative values (neg). Those means minimize the squared error
 * for this split. Error feedback is the caller's (CodecSide.repr).
 *
 *   pos = sum(x >= 0) / count(x >= 0)   (0 when there are none)
 *   neg = sum(x < 0) / count(x < 0)     (0 when there are none)
 * summed in double in fixed blocks (compress/dense.h), rounded to float: the
 * result does not depend on the thread count.
 *
 * Payload (docs/FORMAT.md): f32 pos, f32 neg, then ceil(n/8) bytes, value i
 * in bit i%8 of byte i/8 (LSB first), unused bits of the last byte 0; flags 0.
 * The decoder rejects pos that is negative (or -0), inf or NaN, neg that is
 * positive, inf or NaN, nonzero padding bits and wrong lengths.
 * The input must be finite: encode returns -GC_ERR_PARAM otherwise.
 */
#include <math.h>
#include <string.h>

#include "compress/codec.h"
#include "compress/dense.h"

static size_t onebit_max_payload(const Codec *c, size_t n) {
    (void)c;
    return 8 + n / 8 + (n % 8 != 0);
}

/* bits of values [8*j0, min(8*j1, n)) into dst[0 .. j1-j0); optionally repr.
 * dst: [j1 - j0], repr: [n] or NULL, x: [n] */
static void onebit_pack(uint8_t *dst, float *repr, const float *x, size_t n, size_t j0, size_t j1, float pos,
                        float neg) {
    size_t full = n / 8, jf = j1 < full ? j1 : full;
    for (size_t j = j0; j < jf; j++) {
        const float *v = x + 8 * j;
        uint32_t b = 0;
        for (int k = 0; k < 8; k++) b |= (uint32_t)(v[k] >= 0.0f) << k;
        dst[j - j0] = (uint8_t)b;
    }
    if (j1 > full && n % 8) { /* the last, partial byte: unused bits 0 */
        uint32_t b = 0;
        for (size_t i = 8 * full; i < n; i++) b |= (uint32_t)(x[i] >= 0.0f) << (i % 8);
        dst[full - j0] = (uint8_t)b;
    }
    if (repr) {
        size_t hi = 8 * j1 < n ? 8 * j1 : n;
        for (size_t i = 8 * j0; i < hi; i++) repr[i] = x[i] >= 0.0f ? pos : neg;
    }
}

static int64_t onebit_encode(Codec *c, uint8_t *payload, size_t cap, uint16_t *flags, const float *x, size_t n,
                             const CodecSide *side) {
    (void)c;
    *flags = 0;
    size_t nb = n / 8 + (n % 8 != 0);
    if (cap < 8 + nb) return -GC_ERR_NOSPACE;
    int T = dense_threads(side, n);
    DenseSums s;
    int rc = dense_block_sums(&s, x, n, 1, T);
    if (rc) return rc;
    if (!isfinite(s.a) || !isfinite(s.b)) return -GC_ERR_PARAM; /* NaN or inf in the input */
    double cpos = s.c, cneg = (double)n - s.c;
    float pos = cpos > 0 ? (float)(s.a / cpos) : 0.0f;
    float neg = cneg > 0 ? (float)(s.b / cneg) : 0.0f;
    put_f32(payload, pos);
    put_f32(payload + 4, neg);
    if (T <= 1) {
        onebit_pack(payload + 8, side->repr, x, n, 0, nb, pos, neg);
    } else {
        DENSE_OMP(parallel for num_threads(T) schedule(static))
        for (int t = 0; t < T; t++) {
            size_t lo, hi;
            dense_part(&lo, &hi, nb, t, T, 64);
            onebit_pack(payload + 8 + lo, side->repr, x, n, lo, hi, pos, neg);
        }
    }
    return (int64_t)(8 + nb);
}

static int onebit_decode(Codec *c, float *out, size_t n, float weight, int accumulate, const uint8_t *payload,
                         size_t len, uint16_t flags) {
    (void)c;
    if (flags) return -GC_ERR_CORRUPT;
    size_t nb = n / 8 + (n % 8 != 0);
    if (len < 8 || len - 8 < nb) return -GC_ERR_TRUNCATED;
    if (len - 8 > nb) return -GC_ERR_OVERSIZED;
    uint32_t pb = get_u32(payload), qb = get_u32(payload + 4);
    if (pb > DENSE_FINITE_MAX) return -GC_ERR_CORRUPT;                            /* pos < 0, -0, inf, NaN */
    if (qb != 0 && (qb < 0x80000000u || qb > 0x80000000u + DENSE_FINITE_MAX)) return -GC_ERR_CORRUPT; /* neg */
    float pos = dense_float(pb), neg = dense_float(qb);
    const uint8_t *p = payload + 8;
    if (n % 8 && (p[nb - 1] >> (n % 8))) return -GC_ERR_CORRUPT; /* padding bits not 0 */
    size_t full = n / 8;
    if (!accumulate) {
        for (size_t j = 0; j < full; j++)
            for (int k = 0; k < 8; k++) out[8 * j + (size_t)k] = (p[j] >> k) & 1 ? pos : neg;
    } else {
        for (size_t j = 0; j < full; j++)
            for (int k = 0; k < 8; k++) out[8 * j + (size_t)k] += weight * ((p[j] >> k) & 1 ? pos : neg);
    }
    for (size_t i = 8 * full; i < n; i++) {
        float v = (p[full] >> (i % 8)) & 1 ? pos : neg;
        if (accumulate) out[i] += weight * v;
        else out[i] = v;
    }
    return 0;
}

const CodecOps codec_onebit_ops = {
    .name = "onebit",
    .id = CODEC_ONEBIT,
    .summary = "1-bit SGD with min. squared error: sign bit, means of >=0 and <0 (3LC 4.2 MQE 1-bit)",
    .max_payload = onebit_max_payload,
    .encode = onebit_encode,
    .decode = onebit_decode,
};
