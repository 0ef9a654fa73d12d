/* gcx.h: the public C API of libgcx, the gradient codecs of gcx.
 *
 * Build and install (from the repository root):
 *
 *   make lib                          build/lib/libgcx.so (CPU only: no CUDA, no MPI)
 *   make install PREFIX=/usr/local    lib/libgcx.so*, include/gcx.h, lib/pkgconfig/gcx.pc
 *   cc app.c $(pkg-config --cflags --libs gcx)
 *
 * A codec turns n float32 values into one self-describing frame of bytes and
 * back. The codecs and their specs are those of the trainers' --codec and of
 * the gcx tool: "NAME[:key=value,...]", e.g. "sbc:p=0.01", "3lc:s=1.0",
 * "terngrad", "gcomp:every=4"; gcx_codec_help() lists them all. A frame is a
 * 20-byte header (magic "GCXF", version, codec id, flags, count, payload
 * length, CRC-32C) and the payload (docs/FORMAT.md). gcx_encode() of the
 * same values, spec and seed gives the same bytes as frame k of
 * `gcx encode --seed S` (which encodes frame k with seed S + k, all frames of
 * a file with one codec instance).
 *
 *   what                         function
 *   the codec list               gcx_codec_count, gcx_codec_name, gcx_codec_summary, gcx_codec_help
 *   an instance from a spec      gcx_codec_new, gcx_codec_free, gcx_codec_spec, gcx_codec_name_of
 *   encode                       gcx_max_frame, gcx_encode
 *   decode                       gcx_decode, gcx_decode_acc, gcx_frame_info
 *   codec state (checkpoints)    gcx_state_max, gcx_state_save, gcx_state_load
 *   what a codec costs           gcx_stats (as `gcx stats`)
 *   errors                       gcx_strerror, gcx_codec_error
 *   versions                     gcx_version, gcx_api_version
 *
 * Conventions:
 *  - Every function that can fail returns 0 (or a length) on success and a
 *    negative GCX_ERR_* code on failure; gcx_strerror() names the code, and
 *    gcx_codec_error() gives the last failure of a handle in words (which
 *    value, which size). Bad input (a corrupt or truncated frame, a wrong
 *    size, non-finite values, NULL pointers) is an error return, never a
 *    crash. Only running out of memory inside a codec ends the process.
 *  - Buffers are passed with their sizes: frames in bytes, values as counts
 *    of float32.
 *  - Error feedback is not inside a codec: the caller keeps the residual
 *    x - repr, where repr is what the frame represents (gcx_encode's repr
 *    output, equal to gcx_decode of the frame).
 *  - A handle holds the codec's state. Codecs whose frames depend on earlier
 *    frames (gcomp rebuilds its Huffman tables every `every` frames) need
 *    one handle that encodes the frames in order and another that decodes
 *    them in the same order; the other codecs are stateless. A handle is
 *    not safe to use from two threads at once; separate handles are.
 *  - Stochastic codecs (terngrad, stoch3) draw value i's rounding from
 *    (seed, i) alone, so the seed given to gcx_encode fixes the frame.
 */
#ifndef GCX_H
#define GCX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GCX_API __attribute__((visibility("default")))
#else
#define GCX_API
#endif

/* the version of this interface; grows only when functions are added */
#define GCX_API_VERSION 1

/* error codes (returned negated); the values never change */
enum {
    GCX_OK = 0,
    GCX_ERR_TRUNCATED = 1, /* input truncated: fewer bytes than the format needs */
    GCX_ERR_MAGIC = 2,     /* bad magic number (not a gcx frame) */
    GCX_ERR_VERSION = 3,   /* unsupported format version */
    GCX_ERR_CODEC = 4,     /* unknown codec id, or a frame of another codec */
    GCX_ERR_CHECKSUM = 5,  /* checksum mismatch: payload corrupted */
    GCX_ERR_CORRUPT = 6,   /* corrupt payload: a field holds an impossible value */
    GCX_ERR_OVERSIZED = 7, /* input longer than declared (trailing bytes) */
    GCX_ERR_COUNT = 8,     /* element count does not match what the caller expects */
    GCX_ERR_PARAM = 9,     /* invalid argument: spec, NULL pointer, non-finite value */
    GCX_ERR_NOSPACE = 10,  /* output buffer too small */
    GCX_ERR_NOMEM = 11,    /* out of memory */
    GCX_ERR_STATE = 12,    /* codec state missing or out of step */
    GCX_ERR_IO = 13,       /* I/O error */
};

/* the message of an error code (either sign); "unknown error" for others */
GCX_API const char *gcx_strerror(int code);
/* GCX_API_VERSION of the library loaded (compare with the header's) */
GCX_API int gcx_api_version(void);
/* the version of gcx the library was built from (git describe), e.g. "cb505df" */
GCX_API const char *gcx_version(void);

/* ---- the codec list ---- */

/* number of codecs */
GCX_API int gcx_codec_count(void);
/* name of codec i (0 <= i < gcx_codec_count()), as in specs; NULL out of range */
GCX_API const char *gcx_codec_name(int i);
/* one line on codec i (the paper, what it does); NULL out of range */
GCX_API const char *gcx_codec_summary(int i);
/* every codec with its parameters, defaults and ranges, as `gcx --help` prints
 * them, into buf (cap bytes, NUL-terminated, truncated if short); returns the
 * length of the whole text (without the NUL), as snprintf does */
GCX_API size_t gcx_codec_help(char *buf, size_t cap);

/* ---- instances ---- */

typedef struct gcx_codec gcx_codec; /* opaque */

/* a codec instance for spec "NAME[:key=value,...]"; NULL on a bad spec, with
 * the reason in err (errlen bytes, may be NULL/0): unknown codec or key, a
 * value out of range */
GCX_API gcx_codec *gcx_codec_new(const char *spec, char *err, size_t errlen);
/* release an instance (NULL is fine) */
GCX_API void gcx_codec_free(gcx_codec *c);
/* the instance's full spec with every parameter, "sbc:p=0.01" (as the .gcf
 * header of `gcx encode` stores it), into buf; returns its length as snprintf */
GCX_API size_t gcx_codec_spec(const gcx_codec *c, char *buf, size_t cap);
/* the codec's name, "sbc" */
GCX_API const char *gcx_codec_name_of(const gcx_codec *c);
/* the last failure of this handle in words ("" after a success) */
GCX_API const char *gcx_codec_error(const gcx_codec *c);
/* encoder threads for the chunk-parallel codecs: 0 = the OpenMP default
 * (the initial setting), at most 1024. The frame bytes do not depend on it. */
GCX_API int gcx_codec_set_threads(gcx_codec *c, int threads);

/* ---- encode ---- */

/* the most bytes a frame of n values can take (header included); 0 when n is
 * more than a frame can hold (2^32 - 1 values) */
GCX_API size_t gcx_max_frame(const gcx_codec *c, size_t n);
/* encode x (n floats) into frame (cap bytes; gcx_max_frame(c, n) is always
 * enough) with the stochastic codecs' seed; repr (n floats, or NULL) receives
 * what the frame represents. Returns the frame length (> 0) or a negative
 * GCX_ERR_*: NOSPACE when cap is short (nothing written past cap), PARAM for a
 * NaN or infinity in x (gcx_codec_error names the value) except with fp32,
 * fp16 and gcomp, which carry them. Advances the state of stateful codecs
 * (gcomp). */
GCX_API int64_t gcx_encode(gcx_codec *c, void *frame, size_t cap, const float *x, size_t n, uint64_t seed,
                           float *repr);

/* ---- decode ---- */

/* check frame's header (len bytes: magic, version, known codec, payload length
 * = len - 20, CRC) and report its codec name and value count (either pointer
 * may be NULL); 0 or a negative GCX_ERR_* */
GCX_API int gcx_frame_info(const void *frame, size_t len, const char **codec_name, uint32_t *count);
/* decode frame (exactly len bytes) holding n values into out (n floats).
 * Returns 0 or a negative GCX_ERR_*: CODEC for a frame of another codec, COUNT
 * when the frame holds other than n values, TRUNCATED / OVERSIZED / CHECKSUM /
 * CORRUPT for damaged frames. The frame is validated before out is written:
 * on error out is unchanged. */
GCX_API int gcx_decode(gcx_codec *c, float *out, size_t n, const void *frame, size_t len);
/* as gcx_decode, but out[i] += weight * decoded[i] (aggregation of workers' frames) */
GCX_API int gcx_decode_acc(gcx_codec *c, float *out, size_t n, float weight, const void *frame, size_t len);

/* ---- codec state, for checkpoints (gcomp's tables; 0 bytes for the others) ---- */

/* the most bytes gcx_state_save writes; 0 for a stateless codec */
GCX_API size_t gcx_state_max(const gcx_codec *c);
/* the state as a self-contained blob in buf (cap bytes); returns its length or a negative GCX_ERR_* */
GCX_API int64_t gcx_state_save(const gcx_codec *c, void *buf, size_t cap);
/* restore a blob of gcx_state_save; 0, or a negative GCX_ERR_* with the handle unchanged */
GCX_API int gcx_state_load(gcx_codec *c, const void *buf, size_t len);

/* ---- what a codec costs, as `gcx stats` ---- */

/* indices of gcx_stats' results */
enum {
    GCX_STAT_VALUES = 0,    /* n */
    GCX_STAT_FRAMES,        /* frames: ceil(n / frame_values) */
    GCX_STAT_BYTES,         /* bytes of all frames, headers included */
    GCX_STAT_BITS_PER_VALUE, /* 8 bytes / n */
    GCX_STAT_RATIO,         /* 32 / bits per value */
    GCX_STAT_MAX_ERR,       /* max |decoded - x| */
    GCX_STAT_RMS_ERR,       /* sqrt(mean (decoded - x)^2) */
    GCX_STAT_REL_RMS,       /* sqrt(sum (decoded - x)^2 / sum x^2); 0 when x is all zero */
    GCX_STAT_RMS,           /* sqrt(mean x^2) */
    GCX_STAT_ENC_SECONDS,   /* wall-clock encode time, one run */
    GCX_STAT_DEC_SECONDS,   /* wall-clock decode time, one run */
    GCX_STAT_COUNT_         /* number of results */
};
/* encode x (n floats) in frames of frame_values values (0 = 2^24, as gcx's
 * default) with one instance, frame k with seed + k, decode them with another,
 * and write min(nout, GCX_STAT_COUNT_) results to out. Returns 0 or a negative
 * GCX_ERR_* with the reason in err (errlen bytes, may be NULL/0). */
GCX_API int gcx_stats(const char *spec, const float *x, size_t n, size_t frame_values, uint64_t seed,
                      int threads, double *out, size_t nout, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
