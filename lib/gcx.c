/* libgcx: the public C API (lib/gcx.h) over the codecs of compress/.
 *
 *   gcx.h                      here, over compress/codec.h
 *   gcx_codec_count/name/...   codec_count, codec_ops_at
 *   gcx_codec_help             codec_print_help into a memory stream
 *   gcx_codec_new / free       codec_parse + codec_new / codec_free
 *   gcx_codec_spec             codec_spec_str
 *   gcx_max_frame              codec_max_frame
 *   gcx_encode                 codec_encode, CodecSide {seed, threads, repr}
 *   gcx_frame_info             frame_header_read + the CRC
 *   gcx_decode / decode_acc    codec_decode / codec_decode_acc
 *   gcx_state_*                codec_state_*
 *   gcx_stats                  the loop of `gcx stats` (examples/gcx.c stats_cmd)
 *   gcx_strerror               gc_strerror (GCX_ERR_* = GcError, checked below)
 *
 * Every entry point checks its pointers and sizes, then calls the codec; the
 * message of the last failure stays in the handle.
 *
 * gcx_decode promises an untouched out on error. The codecs validate a whole
 * frame before writing, except gcomp, whose chunks are decoded in parallel
 * straight into out and can fail part way (a bit stream that runs out inside a
 * chunk): its frames are decoded into the handle's scratch copy of out, which
 * replaces out only on success (the same arithmetic, out[i] + weight * v).
 */
#include "lib/gcx.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compress/codec.h"
#include "gcx_version.h"

/* the public codes are the internal ones */
#define SAME(e) ((int)GCX_ERR_##e == (int)GC_ERR_##e)
_Static_assert(SAME(TRUNCATED) && SAME(MAGIC) && SAME(VERSION) && SAME(CODEC) && SAME(CHECKSUM) && SAME(CORRUPT) &&
                   SAME(OVERSIZED) && SAME(COUNT) && SAME(PARAM) && SAME(NOSPACE) && SAME(NOMEM) && SAME(STATE) &&
                   SAME(IO) && (int)GC_ERR_COUNT_ == (int)GCX_ERR_IO + 1,
               "lib/gcx.h's error codes follow common/errors.h");
#undef SAME

#define GCX_GCF_MAX_FRAME (1u << 24) /* gcx's default values per frame */

struct gcx_codec {
    Codec *codec;
    int threads;
    float *scratch; /* gcomp's decode target, scratch_n floats */
    size_t scratch_n;
    char err[256];
};

/* records the message of a failure in the handle and returns code */
static int fail(gcx_codec *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(gcx_codec *c, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return code;
}

static void put_err(char *err, size_t errlen, const char *msg) {
    if (err && errlen) snprintf(err, errlen, "%s", msg);
}

/* index of the first NaN or infinity in x[0, n), or n */
static size_t first_nonfinite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return n;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *gcx_strerror(int code) { return gc_strerror(code); }
int gcx_api_version(void) { return GCX_API_VERSION; }
const char *gcx_version(void) { return GCX_VERSION; }

/* ---- the codec list ---- */

int gcx_codec_count(void) { return codec_count(); }

const char *gcx_codec_name(int i) {
    const CodecOps *o = codec_ops_at(i);
    return o ? o->name : NULL;
}

const char *gcx_codec_summary(int i) {
    const CodecOps *o = codec_ops_at(i);
    return o ? o->summary : NULL;
}

size_t gcx_codec_help(char *buf, size_t cap) {
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    if (!fp) {
        if (buf && cap) buf[0] = 0;
        return 0;
    }
    codec_print_help(fp);
    fclose(fp);
    if (buf && cap) snprintf(buf, cap, "%s", text);
    free(text);
    return len;
}

/* ---- instances ---- */

gcx_codec *gcx_codec_new(const char *spec, char *err, size_t errlen) {
    if (!spec) {
        put_err(err, errlen, "codec spec is NULL");
        return NULL;
    }
    CodecSpec s;
    char msg[256];
    if (codec_parse(&s, spec, msg, sizeof msg) != 0) {
        put_err(err, errlen, msg);
        return NULL;
    }
    gcx_codec *c = calloc(1, sizeof *c);
    if (!c) {
        put_err(err, errlen, gc_strerror(GC_ERR_NOMEM));
        return NULL;
    }
    c->codec = codec_new(&s);
    put_err(err, errlen, "");
    return c;
}

void gcx_codec_free(gcx_codec *c) {
    if (!c) return;
    codec_free(c->codec);
    free(c->scratch);
    free(c);
}

size_t gcx_codec_spec(const gcx_codec *c, char *buf, size_t cap) {
    char s[1024];
    if (!c) s[0] = 0;
    else codec_spec_str(s, sizeof s, &c->codec->spec);
    if (buf && cap) snprintf(buf, cap, "%s", s);
    return strlen(s);
}

const char *gcx_codec_name_of(const gcx_codec *c) { return c ? c->codec->spec.ops->name : NULL; }

const char *gcx_codec_error(const gcx_codec *c) { return c ? c->err : "no codec (NULL handle)"; }

int gcx_codec_set_threads(gcx_codec *c, int threads) {
    if (!c) return -GC_ERR_PARAM;
    if (threads < 0 || threads > 1024) return fail(c, -GC_ERR_PARAM, "threads %d not in [0, 1024]", threads);
    c->threads = threads;
    c->err[0] = 0;
    return 0;
}

/* ---- encode ---- */

size_t gcx_max_frame(const gcx_codec *c, size_t n) {
    if (!c || n > CODEC_MAX_COUNT) return 0;
    return codec_max_frame(c->codec, n);
}

int64_t gcx_encode(gcx_codec *c, void *frame, size_t cap, const float *x, size_t n, uint64_t seed, float *repr) {
    if (!c) return -GC_ERR_PARAM;
    if (!frame || (!x && n)) return fail(c, -GC_ERR_PARAM, "gcx_encode: frame or x is NULL");
    if (n > CODEC_MAX_COUNT) return fail(c, -GC_ERR_PARAM, "gcx_encode: %zu values, a frame holds at most %u", n,
                                         CODEC_MAX_COUNT);
    CodecSide side;
    memset(&side, 0, sizeof side);
    side.seed = seed;
    side.threads = c->threads;
    side.repr = repr;
    int64_t len = codec_encode(c->codec, frame, cap, x, n, &side);
    if (len >= 0) {
        c->err[0] = 0;
        return len;
    }
    size_t bad = first_nonfinite(x, n);
    if (bad < n)
        return fail(c, (int)len, "value %zu is %s; codec %s takes finite values", bad, isnan(x[bad]) ? "NaN" : "infinite",
                    c->codec->spec.ops->name);
    if (len == -GC_ERR_NOSPACE)
        return fail(c, (int)len, "frame buffer of %zu bytes is too small (gcx_max_frame: %zu)", cap,
                    codec_max_frame(c->codec, n));
    return fail(c, (int)len, "codec %s cannot encode %zu values: %s", c->codec->spec.ops->name, n,
                gc_strerror((int)len));
}

/* ---- decode ---- */

int gcx_frame_info(const void *frame, size_t len, const char **codec_name, uint32_t *count) {
    if (!frame) return -GC_ERR_PARAM;
    FrameHeader h;
    int rc = frame_header_read(&h, frame, len);
    if (rc) return rc;
    if (crc32c(0, (const uint8_t *)frame + CODEC_HEADER_SIZE, h.payload_len) != h.crc) return -GC_ERR_CHECKSUM;
    if (codec_name) *codec_name = codec_find_id(h.codec)->name;
    if (count) *count = h.count;
    return 0;
}

/* the failure of a decode in words: what the header says against what was asked */
static int decode_fail(gcx_codec *c, int rc, size_t n, const void *frame, size_t len) {
    FrameHeader h;
    const char *name = c->codec->spec.ops->name;
    if (frame_header_read(&h, frame, len) == 0) {
        const char *fname = codec_find_id(h.codec)->name;
        if (rc == -GC_ERR_CODEC)
            return fail(c, rc, "the frame is of codec %s, this decoder is %s", fname, name);
        if (rc == -GC_ERR_COUNT)
            return fail(c, rc, "the frame holds %u values, %zu were asked for", h.count, n);
    }
    return fail(c, rc, "%s frame of %zu bytes does not decode: %s", name, len, gc_strerror(rc));
}

static int decode(gcx_codec *c, float *out, size_t n, float weight, int acc, const void *frame, size_t len) {
    if (!c) return -GC_ERR_PARAM;
    if (!frame || (!out && n)) return fail(c, -GC_ERR_PARAM, "gcx_decode: frame or out is NULL");
    float *to = out;
    if (c->codec->spec.ops->id == CODEC_GCOMP && n) {
        if (c->scratch_n < n) {
            float *s = malloc(n * sizeof *s);
            if (!s) return fail(c, -GC_ERR_NOMEM, "gcx_decode: out of memory for %zu values", n);
            free(c->scratch);
            c->scratch = s;
            c->scratch_n = n;
        }
        to = c->scratch;
        if (acc) memcpy(to, out, n * sizeof *to);
    }
    int rc = acc ? codec_decode_acc(c->codec, to, n, weight, frame, len) : codec_decode(c->codec, to, n, frame, len);
    if (rc) return decode_fail(c, rc, n, frame, len);
    if (to != out) memcpy(out, to, n * sizeof *out);
    c->err[0] = 0;
    return 0;
}

int gcx_decode(gcx_codec *c, float *out, size_t n, const void *frame, size_t len) {
    return decode(c, out, n, 1.0f, 0, frame, len);
}

int gcx_decode_acc(gcx_codec *c, float *out, size_t n, float weight, const void *frame, size_t len) {
    return decode(c, out, n, weight, 1, frame, len);
}

/* ---- codec state ---- */

size_t gcx_state_max(const gcx_codec *c) { return c ? codec_state_max(c->codec) : 0; }

int64_t gcx_state_save(const gcx_codec *c, void *buf, size_t cap) {
    if (!c || (!buf && cap)) return -GC_ERR_PARAM;
    if (cap < codec_state_max(c->codec)) return -GC_ERR_NOSPACE;
    return codec_state_save(c->codec, buf, cap);
}

int gcx_state_load(gcx_codec *c, const void *buf, size_t len) {
    if (!c) return -GC_ERR_PARAM;
    if (!buf && len) return fail(c, -GC_ERR_PARAM, "gcx_state_load: buf is NULL");
    int rc = codec_state_load(c->codec, buf, len);
    if (rc) return fail(c, rc, "codec %s: the state blob of %zu bytes does not load: %s", c->codec->spec.ops->name,
                        len, gc_strerror(rc));
    c->err[0] = 0;
    return 0;
}

/* ---- stats ---- */

int gcx_stats(const char *spec, const float *x, size_t n, size_t frame_values, uint64_t seed, int threads,
              double *out, size_t nout, char *err, size_t errlen) {
    if (!x && n) {
        put_err(err, errlen, "gcx_stats: x is NULL");
        return -GC_ERR_PARAM;
    }
    if (!out && nout) {
        put_err(err, errlen, "gcx_stats: out is NULL");
        return -GC_ERR_PARAM;
    }
    size_t F = frame_values ? frame_values : GCX_GCF_MAX_FRAME;
    if (F > CODEC_MAX_COUNT) {
        put_err(err, errlen, "gcx_stats: frame_values is more than a frame holds");
        return -GC_ERR_PARAM;
    }
    gcx_codec *enc = gcx_codec_new(spec, err, errlen);
    if (!enc) return -GC_ERR_PARAM;
    gcx_codec *dec = gcx_codec_new(spec, err, errlen);
    if (!dec) {
        gcx_codec_free(enc);
        return -GC_ERR_NOMEM;
    }
    int rc = gcx_codec_set_threads(enc, threads);
    size_t fm = n < F ? n : F;
    size_t cap = gcx_max_frame(enc, fm);
    uint8_t *frame = malloc(cap ? cap : 1);
    float *y = malloc(4 * n + 4);
    if (rc == 0 && (!frame || !y)) rc = fail(enc, -GC_ERR_NOMEM, "gcx_stats: out of memory for %zu values", n);
    double tenc = 0, tdec = 0;
    uint64_t bytes = 0, frames = 0;
    for (size_t at = 0, k = 0; at < n && rc == 0; at += F, k++) {
        size_t m = n - at < F ? n - at : F;
        double t0 = now();
        int64_t len = gcx_encode(enc, frame, cap, x + at, m, seed + k, NULL);
        double t1 = now();
        if (len < 0) {
            rc = (int)len;
            break;
        }
        rc = gcx_decode(dec, y + at, m, frame, (size_t)len);
        tdec += now() - t1;
        tenc += t1 - t0;
        bytes += (uint64_t)len;
        frames++;
    }
    if (rc) {
        put_err(err, errlen, enc->err[0] ? enc->err : dec->err);
    } else {
        double maxe = 0, se = 0, sx = 0;
        for (size_t i = 0; i < n; i++) {
            double e = fabs((double)y[i] - (double)x[i]);
            if (e > maxe || e != e) maxe = e;
            se += e * e;
            sx += (double)x[i] * x[i];
        }
        double bpv = n ? 8.0 * (double)bytes / (double)n : 0;
        double r[GCX_STAT_COUNT_];
        r[GCX_STAT_VALUES] = (double)n;
        r[GCX_STAT_FRAMES] = (double)frames;
        r[GCX_STAT_BYTES] = (double)bytes;
        r[GCX_STAT_BITS_PER_VALUE] = bpv;
        r[GCX_STAT_RATIO] = bpv > 0 ? 32.0 / bpv : 0.0;
        r[GCX_STAT_MAX_ERR] = maxe;
        r[GCX_STAT_RMS_ERR] = n ? sqrt(se / (double)n) : 0.0;
        r[GCX_STAT_REL_RMS] = sx > 0 ? sqrt(se / sx) : 0.0;
        r[GCX_STAT_RMS] = n ? sqrt(sx / (double)n) : 0.0;
        r[GCX_STAT_ENC_SECONDS] = tenc;
        r[GCX_STAT_DEC_SECONDS] = tdec;
        for (size_t i = 0; i < nout && i < GCX_STAT_COUNT_; i++) out[i] = r[i];
        put_err(err, errlen, "");
    }
    free(frame);
    free(y);
    gcx_codec_free(enc);
    gcx_codec_free(dec);
    return rc;
}
