/* terngrad and stoch3: stochastic ternarization with one scalar per tensor.
 *
 * TernGrad (Wen et al., NeurIPS 2017), section 3:
 *   - gradient clipping first (3.3, eq. 21): f(g_i) = g_i if |g_i| <= c*sigma,
 *     else sign(g_i) * c*sigma, sigma the standard deviation of the tensor's
 *     values (population, about their mean, in double); c = 2.5 by default,
 *     c = 0 disables clipping;
 *   - layer-wise scalar (3.1 eq. 2, 3.3): s = max|f(g)| = min(max|g|, c*sigma),
 *     one per tensor;
 *   - ternarize (3.1 eq. 1, 3): out_i = s * sign(g_i) * b_i with
 *     P(b_i = 1) = |f(g_i)| / s, so E[out] = f(g);
 *   - scalar sharing (3.1 eq. 4): the caller may pass s_shared = max over
 *     workers of local_scalar() in CodecSide.scalar; it replaces s (b_i then
 *     has P = |f(g_i)| / s_shared, still unbiased since s_shared >= s).
 * Randomness: b_i = [u_i * s < |f(g_i)|] with u_i = rng_hash_uniform(seed, i)
 *   (24-bit uniform in [0, 1), float32 product), i the value's index in the
 *   tensor, so any partition, thread count or GPU kernel reproduces it. seed =
 *   CodecSide.seed XOR (spec seed * 0x9E3779B97F4A7C15): with the default spec
 *   seed 0 the caller's per-step seed is used as is (compress/dense.h).
 *
 * terngrad packs each value in 2 bits (TernGrad 3.1: "using 2 bits to encode
 * a ternary gradient"): payload = f32 s, then ceil(n/4) bytes, value i in bits
 * 2*(i%4)+1 .. 2*(i%4) of byte i/4 (LSB first); code 0 = 0, 1 = +1, 2 = -1,
 * 3 is invalid; unused codes of the last byte are 0.
 *
 * stoch3 is the 3LC paper's "Stoch 3-value b-3-5" baseline (3LC 4.2): the same
 * quantizer, "without gradient clipping" (so c defaults to 0 here), packed with
 * 3LC's base-3^5 encoding (compress/base3.h, no zero-run encoding): payload =
 * f32 s, then ceil(n/5) bytes, each <= 242.
 *
 * Decoded value: (float)t_i * s with t_i in {-1, 0, 1}. The input must be
 * finite (and a shared scalar finite and >= 0): encode returns -GC_ERR_PARAM
 * otherwise. Decoders reject a negative, -0, inf or NaN s, invalid codes,
 * nonzero padding, and wrong lengths; on error the output is untouched.
 */
#include <math.h>
#include <string.h>

#include "common/rng.h"
#include "compress/base3.h"
#include "compress/codec.h"
#include "compress/dense.h"

/* The random-number loops (five 64-bit multiplies per value) run about 1.5x
 * faster with 512-bit vectors where the target has AVX-512 (gcc otherwise
 * prefers 256-bit ones); the results are identical bit for bit. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512")
#endif

#define SEED_MAX 9007199254740992.0 /* 2^53: every integer below is exact in a double */

static const CodecParamDesc terngrad_params[] = {
    {"c", 2.5, 0.0, 1000.0, 0, "clip at c*sigma before ternarizing, 0 = off (TernGrad 3.3)", 0},
    {"seed", 0.0, 0.0, SEED_MAX, 1, "mixed into the per-call seed: XOR seed*0x9E3779B97F4A7C15", 0},
};
static const CodecParamDesc stoch3_params[] = {
    {"c", 0.0, 0.0, 1000.0, 0, "clip at c*sigma, 0 = off: 3LC's baseline has no clipping (3LC 4.2)", 0},
    {"seed", 0.0, 0.0, SEED_MAX, 1, "mixed into the per-call seed: XOR seed*0x9E3779B97F4A7C15", 0},
};

#define TG_CHUNK 1024 /* values quantized at a time into a stack buffer */

typedef struct {
    float clip; /* |f(g)| = min(|g|, clip) */
    float s;    /* the scalar sent */
    uint64_t seed;
} TgQuant;

/* The local scalar and clip threshold (TernGrad 3.3), or -GC_ERR_PARAM for
 * non-finite input, -GC_ERR_NOMEM. x: [n] */
static int tg_local(float *clip, float *s, const Codec *c, const float *x, size_t n, int T) {
    double cc = c->spec.v[0];
    if (cc <= 0.0 || n == 0) {
        uint32_t mb = dense_absmax_bits(x, n, T);
        if (mb > DENSE_FINITE_MAX) return -GC_ERR_PARAM;
        *clip = dense_float(mb);
        *s = *clip;
        return 0;
    }
    DenseSums m; /* sum, sum of squares and max|x| in one pass */
    int rc = dense_block_sums(&m, x, n, 0, T);
    if (rc) return rc;
    if (m.m > DENSE_FINITE_MAX) return -GC_ERR_PARAM; /* NaN or inf in the input */
    float maxabs = dense_float(m.m);
    double mean = m.a / (double)n, var = m.b / (double)n - mean * mean;
    double sigma = sqrt(var > 0.0 ? var : 0.0);
    float thr = (float)(cc * sigma);
    *clip = thr;
    *s = maxabs < thr ? maxabs : thr; /* max|f(g)| (eq. 21 then eq. 2) */
    return 0;
}

static float tg_local_scalar(const Codec *c, const float *x, size_t n) {
    float clip, s;
    if (tg_local(&clip, &s, c, x, n, 1)) return NAN;
    return s;
}

/* ternary value t in {-1, 0, 1} of x[i] as a small code:
 * returns 0 for 0, 1 for +1, 2 for -1 */
static inline uint32_t tg_code(float v, uint64_t i, const TgQuant *q) {
    float a = fabsf(v);
    a = a < q->clip ? a : q->clip;                         /* |f(g_i)| */
    uint32_t b = rng_hash_uniform(q->seed, i) * q->s < a; /* P(b = 1) = |f(g_i)| / s */
    return b ? (v < 0.0f ? 2u : 1u) : 0u;
}

static inline float tg_value(uint32_t code, float s) {
    return (float)((int32_t)(code & 1u) - (int32_t)(code >> 1)) * s;
}

/* ---- common setup: scalar, seed ---- */
static int tg_prepare(TgQuant *q, const Codec *c, const float *x, size_t n, const CodecSide *side, int T) {
    int rc = tg_local(&q->clip, &q->s, c, x, n, T);
    if (rc) return rc;
    if (side->scalar) { /* scalar sharing (TernGrad 3.1, eq. 4) */
        float sh = *side->scalar;
        if (!(sh >= 0.0f) || dense_bits(sh) > DENSE_FINITE_MAX) return -GC_ERR_PARAM;
        q->s = sh;
    }
    q->seed = dense_seed(side->seed, c->spec.v[1]);
    return 0;
}

/* ================================ terngrad ================================ */

static size_t terngrad_max_payload(const Codec *c, size_t n) {
    (void)c;
    return 4 + n / 4 + (n % 4 != 0);
}

/* bytes [j0, j1) of the 2-bit stream (values 4*j0 .. min(4*j1, n)).
 * dst: [j1 - j0], repr: [n] or NULL, x: [n] */
static void terngrad_pack(uint8_t *dst, float *repr, const float *x, size_t n, size_t j0, size_t j1,
                          const TgQuant *q) {
    uint8_t code[TG_CHUNK];
    for (size_t i0 = 4 * j0; i0 < 4 * j1 && i0 < n; i0 += TG_CHUNK) {
        size_t cnt = n - i0 < TG_CHUNK ? n - i0 : TG_CHUNK;
        if (i0 + cnt > 4 * j1) cnt = 4 * j1 - i0;
        for (size_t k = 0; k < cnt; k++) code[k] = (uint8_t)tg_code(x[i0 + k], i0 + k, q);
        if (repr)
            for (size_t k = 0; k < cnt; k++) repr[i0 + k] = tg_value(code[k], q->s);
        size_t full = cnt / 4;
        uint8_t *d = dst + (i0 / 4 - j0);
        for (size_t b = 0; b < full; b++)
            d[b] = (uint8_t)(code[4 * b] | code[4 * b + 1] << 2 | code[4 * b + 2] << 4 | code[4 * b + 3] << 6);
        if (cnt % 4) { /* the last byte: unused codes stay 0 */
            uint32_t v = 0;
            for (size_t k = 0; k < cnt % 4; k++) v |= (uint32_t)code[4 * full + k] << (2 * k);
            d[full] = (uint8_t)v;
        }
    }
}

static int64_t terngrad_encode(Codec *c, uint8_t *payload, size_t cap, uint16_t *flags, const float *x, size_t n,
                               const CodecSide *side) {
    *flags = 0;
    size_t nb = n / 4 + (n % 4 != 0);
    if (cap < 4 + nb) return -GC_ERR_NOSPACE;
    int T = dense_threads(side, n);
    TgQuant q;
    int rc = tg_prepare(&q, c, x, n, side, T);
    if (rc) return rc;
    put_f32(payload, q.s);
    if (T <= 1) {
        terngrad_pack(payload + 4, side->repr, x, n, 0, nb, &q);
    } else {
        DENSE_OMP(parallel for num_threads(T) schedule(static))
        for (int t = 0; t < T; t++) {
            size_t lo, hi;
            dense_part(&lo, &hi, nb, t, T, 64);
            terngrad_pack(payload + 4 + lo, side->repr, x, n, lo, hi, &q);
        }
    }
    return (int64_t)(4 + nb);
}

static int terngrad_decode(Codec *c, float *out, size_t n, float weight, int accumulate, const uint8_t *payload,
                           size_t len, uint16_t flags) {
    (void)c;
    if (flags) return -GC_ERR_CORRUPT;
    size_t nb = n / 4 + (n % 4 != 0);
    if (len < 4 || len - 4 < nb) return -GC_ERR_TRUNCATED;
    if (len - 4 > nb) return -GC_ERR_OVERSIZED;
    uint32_t sb = get_u32(payload);
    if (sb > DENSE_FINITE_MAX) return -GC_ERR_CORRUPT; /* negative, -0, inf or NaN scalar */
    float s = dense_float(sb);
    const uint8_t *p = payload + 4;
    uint8_t bad = 0;
    for (size_t j = 0; j < nb; j++) bad |= (uint8_t)(p[j] & (p[j] >> 1) & 0x55); /* a code 3 */
    if (bad) return -GC_ERR_CORRUPT;
    if (n % 4 && (p[nb - 1] >> (2 * (n % 4)))) return -GC_ERR_CORRUPT; /* padding codes not 0 */
    size_t full = n / 4;
    if (!accumulate) {
        for (size_t j = 0; j < full; j++)
            for (int k = 0; k < 4; k++) out[4 * j + (size_t)k] = tg_value((uint32_t)(p[j] >> (2 * k)) & 3u, s);
    } else {
        for (size_t j = 0; j < full; j++)
            for (int k = 0; k < 4; k++)
                out[4 * j + (size_t)k] += weight * tg_value((uint32_t)(p[j] >> (2 * k)) & 3u, s);
    }
    for (size_t i = 4 * full; i < n; i++) {
        float v = tg_value((uint32_t)(p[full] >> (2 * (i % 4))) & 3u, s);
        if (accumulate) out[i] += weight * v;
        else out[i] = v;
    }
    return 0;
}

const CodecOps codec_terngrad_ops = {
    .name = "terngrad",
    .id = CODEC_TERNGRAD,
    .summary = "TernGrad: stochastic ternary x layer scalar, clipping at c*sigma, 2-bit packing (TernGrad 3)",
    .params = terngrad_params,
    .nparams = 2,
    .max_payload = terngrad_max_payload,
    .encode = terngrad_encode,
    .decode = terngrad_decode,
    .local_scalar = tg_local_scalar,
};

/* ================================= stoch3 ================================= */

static size_t stoch3_max_payload(const Codec *c, size_t n) {
    (void)c;
    return 4 + b3_len(n);
}

/* base-3^5 digit (t + 1) of value i */
static inline uint32_t stoch3_digit(float v, uint64_t i, const TgQuant *q) {
    uint32_t code = tg_code(v, i, q);
    return code == 1 ? 2u : code == 2 ? 0u : 1u;
}

/* bytes [j0, j1) of the base-3^5 stream, built one digit stream at a time
 * (byte = 3 * byte + digit, most significant first) so each loop reads one
 * contiguous run of x and vectorizes; then repr, from the bytes, as the
 * decoder computes it. dst: [j1 - j0], repr: [n] or NULL (may be x), x: [n] */
static void stoch3_pack(uint8_t *dst, float *repr, const float *x, size_t n, size_t L, size_t j0, size_t j1,
                        const TgQuant *q) {
    size_t full = b3_full(n, L), jf = j1 < full ? j1 : full;
    for (size_t c = j0; c < jf; c += 2048) {
        size_t cnt = jf - c < 2048 ? jf - c : 2048;
        uint8_t *d = dst + (c - j0);
        for (size_t i = 0; i < cnt; i++) d[i] = (uint8_t)stoch3_digit(x[c + i], c + i, q);
        for (size_t k = 1; k < 5; k++) {
            size_t base = k * L + c;
            for (size_t i = 0; i < cnt; i++) d[i] = (uint8_t)(3 * d[i] + stoch3_digit(x[base + i], base + i, q));
        }
    }
    for (size_t j = jf > j0 ? jf : j0; j < j1; j++) { /* padding digits are 0 (3LC 3.2 step 4) */
        uint32_t b = 0;
        for (int k = 0; k < 5; k++) {
            size_t i = (size_t)k * L + j;
            b = 3 * b + (i < n ? stoch3_digit(x[i], i, q) : 0);
        }
        dst[j - j0] = (uint8_t)b;
    }
    if (repr) {
        if (jf > j0) b3_decode_full(repr, dst, L, j0, jf, q->s, 1.0f, 0);
        for (size_t j = jf > j0 ? jf : j0; j < j1; j++) b3_decode_tail(repr, dst[j - j0], j, n, L, q->s, 1.0f, 0);
    }
}

static int64_t stoch3_encode(Codec *c, uint8_t *payload, size_t cap, uint16_t *flags, const float *x, size_t n,
                             const CodecSide *side) {
    *flags = 0;
    size_t L = b3_len(n);
    if (cap < 4 + L) return -GC_ERR_NOSPACE;
    int T = dense_threads(side, n);
    TgQuant q;
    int rc = tg_prepare(&q, c, x, n, side, T);
    if (rc) return rc;
    put_f32(payload, q.s);
    if (T <= 1) {
        stoch3_pack(payload + 4, side->repr, x, n, L, 0, L, &q);
    } else {
        DENSE_OMP(parallel for num_threads(T) schedule(static))
        for (int t = 0; t < T; t++) {
            size_t lo, hi;
            dense_part(&lo, &hi, L, t, T, 64);
            stoch3_pack(payload + 4 + lo, side->repr, x, n, L, lo, hi, &q);
        }
    }
    return (int64_t)(4 + L);
}

static int stoch3_decode(Codec *c, float *out, size_t n, float weight, int accumulate, const uint8_t *payload,
                         size_t len, uint16_t flags) {
    (void)c;
    if (flags) return -GC_ERR_CORRUPT;
    size_t L = b3_len(n), full = b3_full(n, L);
    if (len < 4 || len - 4 < L) return -GC_ERR_TRUNCATED;
    if (len - 4 > L) return -GC_ERR_OVERSIZED;
    uint32_t sb = get_u32(payload);
    if (sb > DENSE_FINITE_MAX) return -GC_ERR_CORRUPT; /* negative, -0, inf or NaN scalar */
    float s = dense_float(sb);
    const uint8_t *p = payload + 4;
    uint8_t bad = 0;
    for (size_t j = 0; j < L; j++) bad |= (uint8_t)(p[j] > B3_MAXLIT); /* no zero-run codes in stoch3 */
    if (bad) return -GC_ERR_CORRUPT;
    for (size_t j = full; j < L; j++)
        if (!b3_pad_ok(p[j], j, n, L)) return -GC_ERR_CORRUPT;
    b3_decode_full(out, p, L, 0, full, s, weight, accumulate);
    for (size_t j = full; j < L; j++) b3_decode_tail(out, p[j], j, n, L, s, weight, accumulate);
    return 0;
}

const CodecOps codec_stoch3_ops = {
    .name = "stoch3",
    .id = CODEC_STOCH3,
    .summary = "stochastic 3-value (TernGrad quantizer) in base-3^5, 1.6 bits/value (3LC 4.2 baseline)",
    .params = stoch3_params,
    .nparams = 2,
    .max_payload = stoch3_max_payload,
    .encode = stoch3_encode,
    .decode = stoch3_decode,
    .local_scalar = tg_local_scalar,
};
