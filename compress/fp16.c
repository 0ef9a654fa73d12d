/* fp16: IEEE 754 half precision, round to nearest even (docs/FORMAT.md).
 *
 * Payload = n little-endian binary16 values, 2n bytes; flags 0. Overflow goes
 * to +-inf, small values to subnormal halves or +-0, NaN stays NaN (quieted),
 * exactly as compress/half.h defines. Any 16-bit pattern decodes (a half can
 * be anything), so the decoder only checks the length and the flags.
 *
 * The hot loops use F16C (vcvtps2ph / vcvtph2ps, 8 values at a time) when the
 * compiler targets it; the scalar half.h functions give identical results and
 * handle the tails and non-F16C builds.
 */
#include <string.h>

#include "compress/codec.h"
#include "compress/dense.h"
#include "compress/half.h"

#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#define FP16_F16C 1
#endif

static size_t fp16_max_payload(const Codec *c, size_t n) {
    (void)c;
    return 2 * n;
}

/* p: [2n] bytes out; x: [n] */
static void fp16_encode_range(uint8_t *p, const float *x, size_t n) {
    size_t i = 0;
#ifdef FP16_F16C
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(void *)(p + 2 * i), h);
    }
#endif
    for (; i < n; i++) put_u16(p + 2 * i, half_from_float(x[i]));
}

/* out: [n]; p: [2n] bytes */
static void fp16_decode_range(float *out, const uint8_t *p, size_t n, float weight, int accumulate) {
    size_t i = 0;
#ifdef FP16_F16C
    if (!accumulate) {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + 2 * i))));
    } else {
        __m256 w = _mm256_set1_ps(weight);
        for (; i + 8 <= n; i += 8) {
            __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + 2 * i)));
            _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(out + i), _mm256_mul_ps(w, v)));
        }
    }
#endif
    if (!accumulate)
        for (; i < n; i++) out[i] = half_to_float(get_u16(p + 2 * i));
    else
        for (; i < n; i++) out[i] += weight * half_to_float(get_u16(p + 2 * i));
}

static int64_t fp16_encode(Codec *c, uint8_t *payload, size_t cap, uint16_t *flags, const float *x, size_t n,
                           const CodecSide *side) {
    (void)c;
    *flags = 0;
    if (cap < 2 * n) return -GC_ERR_NOSPACE;
    int T = dense_threads(side, n);
    if (T <= 1) {
        fp16_encode_range(payload, x, n);
    } else {
        DENSE_OMP(parallel for num_threads(T) schedule(static))
        for (int t = 0; t < T; t++) {
            size_t lo, hi;
            dense_part(&lo, &hi, n, t, T, 64);
            fp16_encode_range(payload + 2 * lo, x + lo, hi - lo);
        }
    }
    if (side->repr) fp16_decode_range(side->repr, payload, n, 1.0f, 0); /* exactly what decode yields */
    return (int64_t)(2 * n);
}

static int fp16_decode(Codec *c, float *out, size_t n, float weight, int accumulate, const uint8_t *payload,
                       size_t len, uint16_t flags) {
    (void)c;
    if (flags) return -GC_ERR_CORRUPT;
    if (n > SIZE_MAX / 2) return -GC_ERR_COUNT;
    if (len != 2 * n) return len < 2 * n ? -GC_ERR_TRUNCATED : -GC_ERR_OVERSIZED;
    fp16_decode_range(out, payload, n, weight, accumulate);
    return 0;
}

const CodecOps codec_fp16_ops = {
    .name = "fp16",
    .id = CODEC_FP16,
    .summary = "IEEE half precision, round to nearest even (16 bits/value baseline)",
    .max_payload = fp16_max_payload,
    .encode = fp16_encode,
    .decode = fp16_decode,
};
