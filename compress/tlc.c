/* 3lc: 3-value quantization with sparsity multiplication, base-3^5 encoding
 * and zero-run encoding (Lim, Andersen, Kaminsky, "3LC", SysML 2019, section 3).
 *
 * Quantization (3LC 3.1): m = max|x| * s with s in [1, 2) (float32 product),
 *   q[i] = round(x[i] / m) in {-1, 0, 1}, dequantized as q[i] * m.
 *   round() is TensorFlow's tf.round (the paper's prototype), half to even:
 *   |x/m| = 1/2 gives 0. We evaluate it exactly as q = sign(x) * [2|x| > m]
 *   (2|x| is exact in float), so max|x - q*m| <= m/2 (3LC 3.1).
 *   max|x| = 0 gives m = 0 and all q = 0.
 * Packing: base-3^5 then zero-run encoding, compress/base3.h (3LC 3.2, 3.3).
 * Payload (docs/FORMAT.md): f32 m, then the zero-run-encoded bytes; flags 0.
 *
 * Parallel encoding (3LC 3.3, "parallel version of zero-run encoding"): the
 * L base-3^5 bytes are split into T partitions; each thread packs its
 * partition in place in the payload and zero-run encodes it independently.
 * The paper then coalesces the two bytes at each boundary when their total
 * run is <= 14; that is not byte-identical to the serial encoder when a run
 * crossing a boundary is longer (10|10 would give 251 251, serial 255 247).
 * We coalesce exactly instead: a partition skips the zeros that continue a
 * run from the partition before, and the partition where a run starts emits
 * it whole (its length found from the following partitions' leading-zero
 * counts), so the output equals the serial encoder's for any thread count.
 *
 * The input must be finite and max|x| * s must be finite: encode returns
 * -GC_ERR_PARAM otherwise. The decoder rejects a negative, -0, inf or NaN m, a
 * run that overflows n, a stream that ends early or has bytes left over, and
 * nonzero padding digits. On any error the output is untouched.
 */
#include <stdlib.h>
#include <string.h>

#include "compress/base3.h"
#include "compress/codec.h"
#include "compress/dense.h"

static const CodecParamDesc tlc_params[] = {
    {"s", 1.0, 1.0, 2.0, 0, "sparsity multiplier: m = max|x| * s, 1 <= s < 2, larger is sparser (3LC 3.1)", 1},
};

#define TLC_CHUNK 4096 /* bytes packed at a time by the serial encoder and decoder */

static size_t tlc_max_payload(const Codec *c, size_t n) {
    (void)c;
    return 4 + b3_len(n);
}

/* digit (trit + 1) of value v: 1 + [2v > m] - [2v < -m] */
static inline uint32_t tlc_digit(float v, float m) {
    float v2 = v + v;
    return 1u + (uint32_t)(v2 > m) - (uint32_t)(v2 < -m);
}

/* Base-3^5 bytes j in [j0, j1) of the quantized x into dst[0 .. j1-j0), and
 * optionally repr (what the decoder will give, computed from those bytes as
 * the decoder does) for the values they hold. repr may be x itself (the
 * bytes are packed before repr is written) but must not overlap it otherwise.
 * dst: [j1 - j0], repr: [n] or NULL, x: [n] */
static void tlc_pack(uint8_t *dst, float *repr, const float *x, size_t n, size_t L, size_t j0, size_t j1,
                     float m) {
    size_t full = b3_full(n, L), jf = j1 < full ? j1 : full;
    const float *x0 = x, *x1 = x + L, *x2 = x + 2 * L, *x3 = x + 3 * L, *x4 = x + 4 * L;
    uint8_t *d = dst - j0;
    size_t j = j0;
    for (; j < jf; j++)
        d[j] = (uint8_t)(81 * tlc_digit(x0[j], m) + 27 * tlc_digit(x1[j], m) + 9 * tlc_digit(x2[j], m) +
                         3 * tlc_digit(x3[j], m) + tlc_digit(x4[j], m));
    for (; j < j1; j++) { /* the last bytes: padding digits are 0 (3LC 3.2 step 4) */
        uint32_t b = 0;
        for (int k = 0; k < 5; k++) {
            size_t i = (size_t)k * L + j;
            b = 3 * b + (i < n ? tlc_digit(x[i], m) : 0);
        }
        d[j] = (uint8_t)b;
    }
    if (repr) {
        if (jf > j0) b3_decode_full(repr, dst, L, j0, jf, m, 1.0f, 0);
        for (j = jf > j0 ? jf : j0; j < j1; j++) b3_decode_tail(repr, d[j], j, n, L, m, 1.0f, 0);
    }
}

/* serial: pack TLC_CHUNK bytes at a time on the stack, zero-run encode into z */
static int64_t tlc_encode_serial(uint8_t *z, size_t zcap, float *repr, const float *x, size_t n, size_t L,
                                 float m) {
    uint8_t buf[TLC_CHUNK];
    size_t o = 0, run = 0;
    for (size_t j0 = 0; j0 < L; j0 += TLC_CHUNK) {
        size_t j1 = L - j0 < TLC_CHUNK ? L : j0 + TLC_CHUNK;
        tlc_pack(buf, repr, x, n, L, j0, j1, m);
        size_t len = j1 - j0;
        if (zcap - o >= len + b3_run_bytes(run)) { /* room for the worst case: no checks per byte */
            for (size_t k = 0; k < len; k++) {
                uint8_t b = buf[k];
                if (b == B3_ZERO) {
                    run++;
                    continue;
                }
                if (run) {
                    o += b3_emit_run(z + o, run);
                    run = 0;
                }
                z[o++] = b;
            }
        } else {
            for (size_t k = 0; k < len; k++) {
                uint8_t b = buf[k];
                if (b == B3_ZERO) {
                    run++;
                    continue;
                }
                if (run) {
                    if (zcap - o < b3_run_bytes(run)) return -GC_ERR_NOSPACE;
                    o += b3_emit_run(z + o, run);
                    run = 0;
                }
                if (o >= zcap) return -GC_ERR_NOSPACE;
                z[o++] = b;
            }
        }
    }
    if (run) {
        if (zcap - o < b3_run_bytes(run)) return -GC_ERR_NOSPACE;
        o += b3_emit_run(z + o, run);
    }
    return (int64_t)o;
}

typedef struct {
    size_t a, b;     /* byte partition [a, b) */
    size_t lead;     /* leading bytes 121 */
    size_t skip;     /* leading bytes that continue a run from before */
    size_t body;     /* encoded bytes of the partition, excluding its tail run */
    size_t tail_run; /* length of the run that starts here and reaches the end, with its continuation */
} TlcPart;

/* parallel: needs zcap >= L (packs in place) */
static int64_t tlc_encode_parallel(uint8_t *z, float *repr, const float *x, size_t n, size_t L, float m, int T) {
    TlcPart stackp[64];
    TlcPart *P = T <= 64 ? stackp : (TlcPart *)malloc((size_t)T * sizeof *P);
    if (!P) return -GC_ERR_NOMEM;
    /* phase 1: pack each partition in place, count its leading zero bytes */
    DENSE_OMP(parallel for num_threads(T) schedule(static))
    for (int t = 0; t < T; t++) {
        TlcPart *p = &P[t];
        dense_part(&p->a, &p->b, L, t, T, 64);
        tlc_pack(z + p->a, repr, x, n, L, p->a, p->b, m);
        size_t k = p->a;
        while (k < p->b && z[k] == B3_ZERO) k++;
        p->lead = k - p->a;
    }
    /* boundaries: which leading zeros continue an earlier run, and how far
     * each partition's final run continues into the next ones */
    size_t cont = 0; /* zeros at the start of partitions t+1.. that continue a run reaching them */
    for (int t = T - 1; t >= 0; t--) {
        TlcPart *p = &P[t];
        p->skip = (p->a > 0 && z[p->a - 1] == B3_ZERO) ? p->lead : 0;
        p->tail_run = cont; /* added to the tail run found in phase 2 */
        size_t len = p->b - p->a;
        cont = p->lead == len ? len + cont : p->lead;
    }
    /* phase 2: zero-run encode each partition in place (output never passes input) */
    DENSE_OMP(parallel for num_threads(T) schedule(static))
    for (int t = 0; t < T; t++) {
        TlcPart *p = &P[t];
        size_t from = p->a + p->skip, r;
        p->body = b3_zre_body(z + from, z + from, p->b - from, &r);
        p->tail_run = r ? r + p->tail_run : 0;
    }
    /* phase 3: close the gaps in order; each partition's body sits at the
     * input position of its first byte, which no earlier output can reach */
    size_t o = 0;
    for (int t = 0; t < T; t++) {
        TlcPart *p = &P[t];
        memmove(z + o, z + p->a + p->skip, p->body);
        o += p->body;
        if (p->tail_run) o += b3_emit_run(z + o, p->tail_run);
    }
    if (P != stackp) free(P);
    return (int64_t)o;
}

static int64_t tlc_encode(Codec *c, uint8_t *payload, size_t cap, uint16_t *flags, const float *x, size_t n,
                          const CodecSide *side) {
    *flags = 0;
    if (cap < 4) return -GC_ERR_NOSPACE;
    size_t L = b3_len(n);
    int T = dense_threads(side, n);
    uint32_t mb = dense_absmax_bits(x, n, T);
    if (mb > DENSE_FINITE_MAX) return -GC_ERR_PARAM; /* NaN or inf in the input */
    float m = dense_float(mb) * (float)c->spec.v[0];  /* m = max|x| * s (3LC 3.1) */
    if (dense_bits(m) > DENSE_FINITE_MAX) return -GC_ERR_PARAM;
    put_f32(payload, m);
    int64_t len;
    if (T > 1 && cap - 4 >= L) len = tlc_encode_parallel(payload + 4, side->repr, x, n, L, m, T);
    else len = tlc_encode_serial(payload + 4, cap - 4, side->repr, x, n, L, m);
    return len < 0 ? len : 4 + len;
}

/* Walk the zero-run stream: check it expands to exactly L bytes and that the
 * bytes holding padding have zero padding digits. */
static int tlc_validate(const uint8_t *z, size_t len, size_t n, size_t L) {
    size_t full = b3_full(n, L), j = 0, i = 0;
    for (; i < len && j < L; i++) {
        uint32_t b = z[i];
        if (b >= B3_RUN0) {
            size_t k = b - B3_RUN0 + 2;
            if (k > L - j) return -GC_ERR_CORRUPT; /* run overflows n */
            if (j + k > full) return -GC_ERR_CORRUPT; /* zero trits where padding must be */
            j += k;
        } else {
            if (j >= full && !b3_pad_ok(b, j, n, L)) return -GC_ERR_CORRUPT;
            j++;
        }
    }
    if (j < L) return -GC_ERR_TRUNCATED;
    if (i < len) return -GC_ERR_OVERSIZED;
    return 0;
}

static int tlc_decode(Codec *c, float *out, size_t n, float weight, int accumulate, const uint8_t *payload,
                      size_t len, uint16_t flags) {
    (void)c;
    if (flags) return -GC_ERR_CORRUPT;
    if (len < 4) return -GC_ERR_TRUNCATED;
    uint32_t mb = get_u32(payload);
    if (mb > DENSE_FINITE_MAX) return -GC_ERR_CORRUPT; /* negative, -0, inf or NaN m */
    float m = dense_float(mb);
    size_t L = b3_len(n), full = b3_full(n, L);
    const uint8_t *z = payload + 4;
    size_t zlen = len - 4;
    int rc = tlc_validate(z, zlen, n, L);
    if (rc) return rc;
    /* expand TLC_CHUNK bytes at a time (a run never splits: +14 spare), dequantize */
    uint8_t buf[TLC_CHUNK + B3_RUNMAX];
    size_t i = 0, j0 = 0;
    while (j0 < L) {
        size_t k = 0;
        while (k < TLC_CHUNK && i < zlen) {
            uint8_t b = z[i++];
            if (b < B3_RUN0) {
                buf[k++] = b;
            } else {
                size_t r = (size_t)b - B3_RUN0 + 2;
                memset(buf + k, B3_ZERO, r);
                k += r;
            }
        }
        size_t j1 = j0 + k, jf = j1 < full ? j1 : full;
        if (jf > j0) b3_decode_full(out, buf, L, j0, jf, m, weight, accumulate);
        for (size_t j = jf > j0 ? jf : j0; j < j1; j++)
            b3_decode_tail(out, buf[j - j0], j, n, L, m, weight, accumulate);
        j0 = j1;
    }
    return 0;
}

const CodecOps codec_3lc_ops = {
    .name = "3lc",
    .id = CODEC_3LC,
    .summary = "3LC: 3-value quantization x sparsity multiplier, base-3^5, zero-run encoding (3LC 3)",
    .params = tlc_params,
    .nparams = 1,
    .max_payload = tlc_max_payload,
    .encode = tlc_encode,
    .decode = tlc_decode,
};
