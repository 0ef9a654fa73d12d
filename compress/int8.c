/* int8: 8-bit quantization with one scale per tensor, the 3LC paper's "8-bit
 * int" baseline (3LC section 4.2: "255 distinct values, [-127, 127], leaving
 * -128 unused"); error feedback is the caller's (CodecSide.repr).
 *
 *   scale = max|x| / 127                    (float32 division; rounded up to
 *                                            the next float if it is subnormal
 *                                            and below max|x| / 127)
 *   q[i]  = round_half_even(x[i] / scale)   in [-127, 127]; all 0 when scale == 0
 *   decoded[i] = (float)q[i] * scale
 *
 * so |x[i] - decoded[i]| <= scale / 2 (half a level), up to float rounding.
 * Payload (docs/FORMAT.md): f32 scale, then n signed bytes q[i]; flags 0.
 * The decoder rejects a scale that is negative, -0, inf or NaN, or so large
 * that 127 * scale overflows (the encoder rounds such a scale down), and the
 * byte 0x80 (-128), which is not a level.
 *
 * The input must be finite (a NaN or inf gradient has no scale): encode
 * returns -GC_ERR_PARAM otherwise.
 */
#include <math.h>
#include <string.h>

#include "compress/codec.h"
#include "compress/dense.h"

static size_t int8_max_payload(const Codec *c, size_t n) {
    (void)c;
    return 4 + n;
}

/* q: [n] out; x: [n] */
static void int8_quantize(int8_t *q, const float *x, size_t n, float scale) {
    if (scale == 0.0f) {
        memset(q, 0, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float v = rintf(x[i] / scale); /* round half to even (default rounding mode) */
        v = v > 127.0f ? 127.0f : v;  /* cannot happen (x <= 127 * scale), kept as a guard */
        v = v < -127.0f ? -127.0f : v;
        q[i] = (int8_t)(int)v;
    }
}

/* out: [n]; q: [n] */
static void int8_dequantize(float *out, const int8_t *q, size_t n, float scale, float weight, int accumulate) {
    if (!accumulate)
        for (size_t i = 0; i < n; i++) out[i] = (float)q[i] * scale;
    else
        for (size_t i = 0; i < n; i++) out[i] += weight * ((float)q[i] * scale);
}

static int64_t int8_encode(Codec *c, uint8_t *payload, size_t cap, uint16_t *flags, const float *x, size_t n,
                           const CodecSide *side) {
    (void)c;
    *flags = 0;
    if (cap < 4 + n) return -GC_ERR_NOSPACE;
    int T = dense_threads(side, n);
    uint32_t mb = dense_absmax_bits(x, n, T);
    if (mb > DENSE_FINITE_MAX) return -GC_ERR_PARAM; /* NaN or inf in the input */
    float maxabs = dense_float(mb), scale = maxabs / 127.0f;
    /* In the subnormal range max/127 loses precision and may round far below
     * max/127 (even to 0), so max/scale could exceed 127.5: round the scale
     * up there. (For normal scales, max/scale <= 127 * (1 + 2^-24) rounds to 127.) */
    if (scale < 0x1p-126f && (double)scale * 127.0 < (double)maxabs) scale = nextafterf(scale, 1.0f);
    /* Near FLT_MAX, max/127 may round up so far that level 127 (127 * scale)
     * overflows to inf: round the scale down then (max/scale still rounds to 127). */
    if (isinf(127.0f * scale)) scale = nextafterf(scale, 0.0f);
    put_f32(payload, scale);
    int8_t *q = (int8_t *)(void *)(payload + 4);
    if (T <= 1) {
        int8_quantize(q, x, n, scale);
    } else {
        DENSE_OMP(parallel for num_threads(T) schedule(static))
        for (int t = 0; t < T; t++) {
            size_t lo, hi;
            dense_part(&lo, &hi, n, t, T, 64);
            int8_quantize(q + lo, x + lo, hi - lo, scale);
        }
    }
    if (side->repr) int8_dequantize(side->repr, q, n, scale, 1.0f, 0);
    return (int64_t)(4 + n);
}

static int int8_decode(Codec *c, float *out, size_t n, float weight, int accumulate, const uint8_t *payload,
                       size_t len, uint16_t flags) {
    (void)c;
    if (flags) return -GC_ERR_CORRUPT;
    if (len < 4 || len - 4 < n) return -GC_ERR_TRUNCATED;
    if (len - 4 > n) return -GC_ERR_OVERSIZED;
    uint32_t sb = get_u32(payload);
    if (sb > DENSE_FINITE_MAX) return -GC_ERR_CORRUPT; /* negative, -0, inf or NaN scale */
    if (isinf(127.0f * dense_float(sb))) return -GC_ERR_CORRUPT; /* the encoder never makes level 127 overflow */
    const uint8_t *qb = payload + 4;
    uint8_t bad = 0;
    for (size_t i = 0; i < n; i++) bad |= (uint8_t)(qb[i] == 0x80);
    if (bad) return -GC_ERR_CORRUPT; /* -128 is not a level */
    int8_dequantize(out, (const int8_t *)(const void *)qb, n, dense_float(sb), weight, accumulate);
    return 0;
}

const CodecOps codec_int8_ops = {
    .name = "int8",
    .id = CODEC_INT8,
    .summary = "8-bit int, per-tensor scale, levels -127..127 (3LC 4.2 baseline)",
    .max_payload = int8_max_payload,
    .encode = int8_encode,
    .decode = int8_decode,
};
