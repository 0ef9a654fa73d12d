/* The codec interface: float tensor <-> self-describing frame of bytes.
 *
 * A codec never touches the network and knows nothing of models. Error
 * feedback is NOT inside a codec: the caller keeps residuals, and every encode
 * can report what the frame actually represents (CodecSide.repr), so the
 * caller computes the residual exactly.
 *
 * Frame = 20-byte common header + codec payload (docs/FORMAT.md):
 *
 *   offset size field
 *   0      4    magic "GCXF"
 *   4      1    version (1)
 *   5      1    codec id (CodecId)
 *   6      2    flags (codec-specific, little-endian)
 *   8      4    element count n (little-endian u32)
 *   12     4    payload length in bytes (little-endian u32)
 *   16     4    CRC-32C of the payload (little-endian u32)
 *   20     ...  payload
 *
 * Each codec is a CodecOps table in its own file (compress/<name>.c) listed in
 * the registry in codec.c. Parameters are declared per codec (CodecParamDesc)
 * and parsed generically from "NAME[:key=value,...]".
 *
 * Return conventions: encode returns the frame length (> 0) or a negative
 * GcError; decode returns 0 or a negative GcError. Decoders never abort and
 * never read or write out of bounds, whatever the input bytes.
 */
#ifndef GC_CODEC_H
#define GC_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/crc32c.h"
#include "common/errors.h"

#define CODEC_MAGIC "GCXF"
#define CODEC_VERSION 1
#define CODEC_HEADER_SIZE 20
#define CODEC_MAX_PARAMS 8
/* largest element count a frame may carry (u32 field) */
#define CODEC_MAX_COUNT 0xFFFFFFFFu

typedef enum {
    CODEC_FP32 = 1,
    CODEC_FP16 = 2,
    CODEC_INT8 = 3,
    CODEC_TERNGRAD = 4,
    CODEC_STOCH3 = 5,
    CODEC_3LC = 6,
    CODEC_ONEBIT = 7,
    CODEC_TOPK = 8,
    CODEC_DGC = 9,
    CODEC_SBC = 10,
    CODEC_GCOMP = 11,
    CODEC_TERNSUM = 12,
} CodecId;

typedef struct {
    const char *key;  /* "s", "c", "ratio", "density", "p", "ntheta", "every", "seed" */
    double def;       /* default, as the paper gives it */
    double min, max;  /* accepted closed range */
    int is_int;       /* value must be an integer */
    const char *help; /* one line, with the paper section */
    int max_open;     /* 1: the range is [min, max), max itself refused (3LC's s < 2) */
} CodecParamDesc;

struct Codec;
typedef struct CodecSpec CodecSpec;

/* Per-call side inputs and outputs. Zero-initialize and set what applies. */
typedef struct {
    /* in: stochastic codecs (terngrad, stoch3): value i uses
     * rng_hash_uniform(seed, i), so any partition or GPU kernel reproduces it */
    uint64_t seed;
    /* in: terngrad/stoch3 shared scalar (scalar sharing, TernGrad 3.1); NULL = own */
    const float *scalar;
    /* in, GPU codecs only (compress/codec_cuda.h): terngrad's, stoch3's or ternsum's local
     * statistics of x as the encoder would compute them, {clip, own scalar}, from
     * codec_local_stats_cuda; NULL = the encoder computes them (a wait for the device) */
    const float *local;
    /* in: gcomp per-value truncation level 0..3 = 0/6/12/18 mantissa bits; NULL = all 0 */
    const uint8_t *levels;
    /* in: dgc/topk/sbc override of the density/ratio/p parameter (DGC warm-up); 0 = spec's */
    double density;
    /* in: threads for chunk/partition-parallel encoders; 0 = OpenMP default */
    int threads;
    /* out (optional): n floats, what the frame represents (= decode of the frame) */
    float *repr;
    /* out (optional): sparsifiers set mask[i] = 1 where value i was sent, else 0 (n bytes) */
    uint8_t *mask;
} CodecSide;

typedef struct {
    const char *name;    /* as in --codec */
    CodecId id;
    const char *summary; /* one line for --help */
    const CodecParamDesc *params;
    int nparams;
    /* bytes of per-instance state (zeroed at codec_new), e.g. GCOMP's Huffman tables */
    size_t state_size;
    /* optional: release anything the state owns */
    void (*state_free)(struct Codec *c);
    /* optional (codecs whose frames depend on earlier encodes, e.g. GCOMP's tables):
     * the state as a self-contained blob for checkpoints. state_save writes at most
     * state_max bytes and returns the length (or a negative GcError); state_load
     * restores it, or returns a negative GcError for a blob that is not a valid
     * state, leaving the codec unchanged */
    size_t state_max;
    int64_t (*state_save)(const struct Codec *c, uint8_t *buf, size_t cap);
    int (*state_load)(struct Codec *c, const uint8_t *buf, size_t len);
    /* worst-case payload bytes for n values */
    size_t (*max_payload)(const struct Codec *c, size_t n);
    /* write the payload; set *flags; return payload length or negative GcError */
    int64_t (*encode)(struct Codec *c, uint8_t *payload, size_t cap, uint16_t *flags, const float *x, size_t n,
                      const CodecSide *side);
    /* out[i] = decoded (accumulate == 0) or out[i] += weight * decoded (accumulate == 1);
     * the header has been validated (magic, version, id, count, length, CRC) */
    int (*decode)(struct Codec *c, float *out, size_t n, float weight, int accumulate, const uint8_t *payload,
                  size_t len, uint16_t flags);
    /* optional (terngrad/stoch3): the scalar this codec would use for x, after clipping,
     * so the caller can share the max over workers (TernGrad 3.1) */
    float (*local_scalar)(const struct Codec *c, const float *x, size_t n);
} CodecOps;

struct CodecSpec {
    const CodecOps *ops;
    double v[CODEC_MAX_PARAMS]; /* parameter values in ops->params order */
};

typedef struct Codec {
    CodecSpec spec;
    void *state; /* ops->state_size zeroed bytes, or NULL */
} Codec;

/* ---- registry and specs ---- */
int codec_count(void);
const CodecOps *codec_ops_at(int i);
const CodecOps *codec_find(const char *name);
const CodecOps *codec_find_id(int id);
/* Parse "NAME[:key=value,...]"; unknown names/keys and out-of-range values give
 * -GC_ERR_PARAM with a message in err. */
int codec_parse(CodecSpec *spec, const char *text, char *err, size_t errlen);
/* the default spec of a codec */
void codec_spec_default(CodecSpec *spec, const CodecOps *ops);
/* value of parameter key (must exist in the codec's list) */
double codec_param(const CodecSpec *spec, const char *key);
/* set a parameter the codec has (aborts on an unknown key, as codec_param) */
void codec_param_set(CodecSpec *spec, const char *key, double value);
/* "NAME:key=value,..." with every parameter */
void codec_spec_str(char *buf, size_t n, const CodecSpec *spec);
/* print every codec with its parameters and defaults (for --help) */
void codec_print_help(FILE *fp);

/* ---- instances ---- */
Codec *codec_new(const CodecSpec *spec);
void codec_free(Codec *c);
/* worst-case frame bytes (header included) for n values */
size_t codec_max_frame(const Codec *c, size_t n);
/* checkpoints of codec state (CodecOps.state_save/state_load): state_max is 0 for
 * codecs without such state; save returns the blob length or a negative GcError;
 * load returns 0 or a negative GcError and leaves the codec unchanged on error */
size_t codec_state_max(const Codec *c);
int64_t codec_state_save(const Codec *c, uint8_t *buf, size_t cap);
int codec_state_load(Codec *c, const uint8_t *buf, size_t len);
/* encode n values into frame (cap bytes); returns frame length or negative GcError */
int64_t codec_encode(Codec *c, uint8_t *frame, size_t cap, const float *x, size_t n, const CodecSide *side);
/* decode a whole frame of exactly len bytes holding n values into out */
int codec_decode(Codec *c, float *out, size_t n, const uint8_t *frame, size_t len);
/* out += weight * decode(frame) */
int codec_decode_acc(Codec *c, float *out, size_t n, float weight, const uint8_t *frame, size_t len);
/* the scalar a terngrad/stoch3 codec would use (TernGrad 3.1), or -GC_ERR_CODEC as NaN for others */
float codec_local_scalar(const Codec *c, const float *x, size_t n);

/* ---- frame header ---- */
typedef struct {
    uint8_t version, codec;
    uint16_t flags;
    uint32_t count, payload_len, crc;
} FrameHeader;
/* parse and validate the header of a frame of len bytes (magic, version, known
 * codec, payload length == len - header); does not check the CRC */
int frame_header_read(FrameHeader *h, const uint8_t *frame, size_t len);
/* frame_header_read, then the frame must be codec's and hold n values (GC_ERR_CODEC,
 * GC_ERR_COUNT): the checks a decoder makes before the CRC (the CPU's and the GPU's) */
int frame_header_expect(FrameHeader *h, const uint8_t *frame, size_t len, uint8_t codec, size_t n);
/* the CODEC_HEADER_SIZE bytes of the header of a frame of codec id with a payload of
 * len bytes whose CRC-32C is crc, into h */
void frame_header_write(uint8_t *h, uint8_t codec, uint16_t flags, uint32_t count, uint32_t len, uint32_t crc);

/* ---- helpers shared by codecs ---- */
static inline void put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline void put_f32(uint8_t *p, float f) { uint32_t u; __builtin_memcpy(&u, &f, 4); put_u32(p, u); }
static inline float get_f32(const uint8_t *p) { uint32_t u = get_u32(p); float f; __builtin_memcpy(&f, &u, 4); return f; }

#endif
