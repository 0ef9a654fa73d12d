/* fp32: the uncompressed baseline. Payload = n little-endian IEEE-754 floats. */
#include <string.h>

#include "codec.h"

static size_t fp32_max_payload(const Codec *c, size_t n) {
    (void)c;
    return 4 * n;
}

static int64_t fp32_encode(Codec *c, uint8_t *payload, size_t cap, uint16_t *flags, const float *x, size_t n,
                           const CodecSide *side) {
    (void)c;
    (void)flags;
    if (cap < 4 * n) return -GC_ERR_NOSPACE;
    memcpy(payload, x, 4 * n); /* little-endian hosts only (checked in codec tests) */
    if (side->repr && side->repr != x) memcpy(side->repr, x, 4 * n);
    return (int64_t)(4 * n);
}

static int fp32_decode(Codec *c, float *out, size_t n, float weight, int accumulate, const uint8_t *payload,
                       size_t len, uint16_t flags) {
    (void)c;
    if (flags) return -GC_ERR_CORRUPT;
    if (len != 4 * n) return len < 4 * n ? -GC_ERR_TRUNCATED : -GC_ERR_OVERSIZED;
    if (!accumulate) {
        memcpy(out, payload, 4 * n);
        return 0;
    }
    const float *v = (const float *)(const void *)payload;
    for (size_t i = 0; i < n; i++) {
        float f;
        memcpy(&f, v + i, 4);
        out[i] += weight * f;
    }
    return 0;
}

const CodecOps codec_fp32_ops = {
    .name = "fp32",
    .id = CODEC_FP32,
    .summary = "no compression: raw float32 (the baseline of every paper)",
    .max_payload = fp32_max_payload,
    .encode = fp32_encode,
    .decode = fp32_decode,
};
