/* ternsum: the average of n ternary gradients that share one scalar, in 2n+1
 * levels: TernGrad's server-to-worker pull (Wen et al., NeurIPS 2017, section
 * 3.1: "By integrating parameter localization and scalar sharing, the maximum
 * number of levels in g-bar decreases to 2N + 1. As a result, the
 * server-to-worker communication reduces by a factor of 32/log2(1 + 2N)").
 *
 * The exchange sends it from the parameter server with terngrad
 * (dist/exchange.c): the N workers' ternary frames share the scalar s, so
 * their average is (k/N) s with k in [-N, N] for every value, and every worker
 * applies the same average (parameter localization). On its own it is a
 * uniform quantizer with 2n+1 levels:
 *
 *   s          = CodecSide.scalar when given (the shared scalar), else max|x|
 *   L[i]       = round_half_even(x[i] n / s) in double, clamped to [-n, n];
 *                all 0 when s = 0
 *   decoded[i] = (float)(L[i] s / n)       (in double: exact, then rounded once)
 *
 * So the pull of an average of n ternary frames with the shared scalar is
 * lossless: the encoder recovers each value's sum k of ternary values
 * exactly, and the decoded k s / n is within one float rounding of the
 * server's own average (a float sum, whose result depends on the order of
 * its additions).
 *
 * Packing: digits d = L + n in base B = 2n + 1, K of them per 64-bit word,
 * where K is the most with B^K <= 2^64 (n = 4: 20 digits, 3.2 bits per value
 * against log2(9) = 3.17): word w holds values wK ... wK + K - 1 as
 * sum_j d_(wK+j) B^j, the first value in the lowest digit.
 *
 * Payload (docs/FORMAT.md): f32 s | u16 n | u16 0 | ceil(count/K) u64 words,
 * all little-endian; flags 0. The decoder rejects a scalar that is negative,
 * -0, inf or NaN, an n other than the codec's, a nonzero reserved field, a
 * word >= B^K (or B^r for a last word of r values: unused digits are 0), and
 * wrong lengths; on error the output is untouched. The input must be finite:
 * encode returns -GC_ERR_PARAM otherwise (and for a non-finite or negative
 * shared scalar).
 */
#include <math.h>
#include <string.h>

#include "compress/codec.h"
#include "compress/dense.h"

#define TS_HDR 8

static const CodecParamDesc ternsum_params[] = {
    {"n", 4, 1, 32767, 1, "values summed (workers): 2n+1 levels (TernGrad 3.1)", 0},
};

/* K: digits of base B per u64 word: the most with B^K <= 2^64 - 1 (B is odd,
 * so B^K is never 2^64 itself) */
static int ts_digits(uint64_t B) {
    int K = 0;
    for (uint64_t p = 1; p <= UINT64_MAX / B; p *= B) K++;
    return K;
}

/* B^r for r <= K (below 2^64) */
static uint64_t ts_pow(uint64_t B, size_t r) {
    uint64_t p = 1;
    for (size_t j = 0; j < r; j++) p *= B;
    return p;
}

static size_t ts_words(size_t count, int K) { return (count + (size_t)K - 1) / (size_t)K; }

static int ts_n(const Codec *c) { return (int)c->spec.v[0]; }

static size_t ts_max_payload(const Codec *c, size_t count) {
    int n = ts_n(c);
    return TS_HDR + 8 * ts_words(count, ts_digits(2 * (uint64_t)n + 1));
}

/* the level of x: round half to even of x n / s, clamped (s > 0) */
static inline int ts_level(float x, int n, float s) {
    double v = rint((double)x * n / (double)s);
    return v > n ? n : v < -n ? -n : (int)v;
}

static inline float ts_value(int L, float s, int n) { return (float)((double)L * (double)s / (double)n); }

static int64_t ts_encode(Codec *c, uint8_t *payload, size_t cap, uint16_t *flags, const float *x, size_t count,
                         const CodecSide *side) {
    int n = ts_n(c);
    uint64_t B = 2 * (uint64_t)n + 1;
    int K = ts_digits(B);
    size_t words = ts_words(count, K);
    *flags = 0;
    if (cap < TS_HDR + 8 * words) return -GC_ERR_NOSPACE;
    int T = dense_threads(side, count);
    uint32_t mb = dense_absmax_bits(x, count, T);
    if (mb > DENSE_FINITE_MAX) return -GC_ERR_PARAM; /* NaN or inf in the input */
    float s = dense_float(mb);
    if (side->scalar) {
        s = *side->scalar;
        if (!(s >= 0.0f) || isinf(s)) return -GC_ERR_PARAM;
        s = s == 0.0f ? 0.0f : s; /* never -0 */
    }
    put_f32(payload, s);
    put_u16(payload + 4, (uint16_t)n);
    put_u16(payload + 6, 0);
    uint8_t *wp = payload + TS_HDR;
    DENSE_OMP(parallel for num_threads(T) schedule(static) if (T > 1))
    for (size_t w = 0; w < words; w++) {
        size_t lo = w * (size_t)K, hi = lo + (size_t)K < count ? lo + (size_t)K : count;
        uint64_t word = 0;
        for (size_t i = hi; i-- > lo;) { /* the first value in the lowest digit */
            int L = s > 0.0f ? ts_level(x[i], n, s) : 0;
            word = word * B + (uint64_t)(L + n);
            if (side->repr) side->repr[i] = ts_value(L, s, n);
        }
        for (int b = 0; b < 8; b++) wp[8 * w + (size_t)b] = (uint8_t)(word >> (8 * b));
    }
    return (int64_t)(TS_HDR + 8 * words);
}

static uint64_t ts_get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int b = 7; b >= 0; b--) v = v << 8 | p[b];
    return v;
}

static int ts_decode(Codec *c, float *out, size_t count, float weight, int accumulate, const uint8_t *payload,
                     size_t len, uint16_t flags) {
    int n = ts_n(c);
    uint64_t B = 2 * (uint64_t)n + 1;
    int K = ts_digits(B);
    size_t words = ts_words(count, K);
    if (flags) return -GC_ERR_CORRUPT;
    if (len < TS_HDR || (len - TS_HDR) / 8 < words) return -GC_ERR_TRUNCATED;
    if (len - TS_HDR > 8 * words) return -GC_ERR_OVERSIZED;
    uint32_t sb = get_u32(payload);
    if (sb > DENSE_FINITE_MAX) return -GC_ERR_CORRUPT; /* negative, -0, inf or NaN */
    if (get_u16(payload + 4) != n || get_u16(payload + 6) != 0) return -GC_ERR_CORRUPT;
    const uint8_t *wp = payload + TS_HDR;
    /* validate every word before writing anything */
    uint64_t full = ts_pow(B, (size_t)K);
    for (size_t w = 0; w < words; w++) {
        size_t r = w + 1 < words ? (size_t)K : count - w * (size_t)K;
        if (ts_get_u64(wp + 8 * w) >= (r == (size_t)K ? full : ts_pow(B, r))) return -GC_ERR_CORRUPT;
    }
    float s = dense_float(sb);
    for (size_t w = 0; w < words; w++) {
        uint64_t word = ts_get_u64(wp + 8 * w);
        size_t lo = w * (size_t)K, hi = lo + (size_t)K < count ? lo + (size_t)K : count;
        for (size_t i = lo; i < hi; i++) {
            float v = ts_value((int)(word % B) - n, s, n);
            word /= B;
            out[i] = accumulate ? out[i] + weight * v : v;
        }
    }
    return 0;
}

const CodecOps codec_ternsum_ops = {
    .name = "ternsum",
    .id = CODEC_TERNSUM,
    .summary = "average of n ternary gradients sharing a scalar, 2n+1 levels, base-(2n+1) packed: TernGrad's pull "
               "(TernGrad 3.1)",
    .params = ternsum_params,
    .nparams = (int)(sizeof ternsum_params / sizeof ternsum_params[0]),
    .max_payload = ts_max_payload,
    .encode = ts_encode,
    .decode = ts_decode,
};
