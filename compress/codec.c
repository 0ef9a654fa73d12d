/* Codec registry, spec parsing, the common frame header and CRC-32C. */
#include "codec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"

/* ---- registry: one line per codec; each lives in compress/<name>.c ---- */
extern const CodecOps codec_fp32_ops;
extern const CodecOps codec_fp16_ops;
extern const CodecOps codec_int8_ops;
extern const CodecOps codec_terngrad_ops;
extern const CodecOps codec_stoch3_ops;
extern const CodecOps codec_3lc_ops;
extern const CodecOps codec_onebit_ops;
extern const CodecOps codec_topk_ops;
extern const CodecOps codec_dgc_ops;
extern const CodecOps codec_sbc_ops;
extern const CodecOps codec_gcomp_ops;
extern const CodecOps codec_ternsum_ops;

static const CodecOps *const registry[] = {
    &codec_fp32_ops,
    &codec_fp16_ops,
    &codec_int8_ops,
    &codec_terngrad_ops,
    &codec_stoch3_ops,
    &codec_3lc_ops,
    &codec_onebit_ops,
    &codec_topk_ops,
    &codec_dgc_ops,
    &codec_sbc_ops,
    &codec_gcomp_ops,
    &codec_ternsum_ops,
};
#define NREG ((int)(sizeof registry / sizeof registry[0]))

int codec_count(void) { return NREG; }
const CodecOps *codec_ops_at(int i) { return (i >= 0 && i < NREG) ? registry[i] : NULL; }

const CodecOps *codec_find(const char *name) {
    for (int i = 0; i < NREG; i++)
        if (strcmp(registry[i]->name, name) == 0) return registry[i];
    return NULL;
}

const CodecOps *codec_find_id(int id) {
    for (int i = 0; i < NREG; i++)
        if ((int)registry[i]->id == id) return registry[i];
    return NULL;
}

/* ---- specs ---- */
void codec_spec_default(CodecSpec *spec, const CodecOps *ops) {
    memset(spec, 0, sizeof *spec);
    spec->ops = ops;
    for (int i = 0; i < ops->nparams && i < CODEC_MAX_PARAMS; i++) spec->v[i] = ops->params[i].def;
}

static int param_index(const CodecSpec *spec, const char *key) {
    for (int i = 0; i < spec->ops->nparams; i++)
        if (strcmp(spec->ops->params[i].key, key) == 0) return i;
    fprintf(stderr, "internal error: codec %s has no parameter '%s'\n", spec->ops->name, key);
    abort();
}

double codec_param(const CodecSpec *spec, const char *key) { return spec->v[param_index(spec, key)]; }

void codec_param_set(CodecSpec *spec, const char *key, double value) { spec->v[param_index(spec, key)] = value; }

static void list_names(char *buf, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < NREG && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? ", " : "", registry[i]->name);
}

int codec_parse(CodecSpec *spec, const char *text, char *err, size_t errlen) {
    char buf[512];
    if (!text || strlen(text) >= sizeof buf) {
        snprintf(err, errlen, "codec spec missing or too long");
        return -GC_ERR_PARAM;
    }
    strcpy(buf, text);
    char *colon = strchr(buf, ':');
    if (colon) *colon = 0;
    const CodecOps *ops = codec_find(buf);
    if (!ops) {
        char names[256];
        list_names(names, sizeof names);
        snprintf(err, errlen, "unknown codec '%s' (known: %s)", buf, names);
        return -GC_ERR_PARAM;
    }
    codec_spec_default(spec, ops);
    if (!colon) return 0;
    char *save = NULL;
    for (char *kv = strtok_r(colon + 1, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) {
            snprintf(err, errlen, "codec %s: expected key=value, got '%s'", ops->name, kv);
            return -GC_ERR_PARAM;
        }
        *eq = 0;
        const char *val = eq + 1;
        int idx = -1;
        for (int i = 0; i < ops->nparams; i++)
            if (strcmp(ops->params[i].key, kv) == 0) idx = i;
        if (idx < 0) {
            size_t at = 0;
            char keys[200] = "";
            for (int i = 0; i < ops->nparams && at < sizeof keys; i++)
                at += (size_t)snprintf(keys + at, sizeof keys - at, "%s%s", i ? ", " : "", ops->params[i].key);
            snprintf(err, errlen, "codec %s has no parameter '%s' (it takes: %s)", ops->name, kv,
                     ops->nparams ? keys : "none");
            return -GC_ERR_PARAM;
        }
        const CodecParamDesc *d = &ops->params[idx];
        char *end = NULL;
        double v = strtod(val, &end);
        if (end == val || *end != 0 || !isfinite(v)) {
            snprintf(err, errlen, "codec %s: %s=%s is not a number", ops->name, kv, val);
            return -GC_ERR_PARAM;
        }
        if (d->is_int && v != floor(v)) {
            snprintf(err, errlen, "codec %s: %s must be an integer, got %s", ops->name, kv, val);
            return -GC_ERR_PARAM;
        }
        if (v < d->min || v > d->max || (d->max_open && v == d->max)) {
            snprintf(err, errlen, "codec %s: %s=%s out of range [%g, %g%c", ops->name, kv, val, d->min, d->max,
                     d->max_open ? ')' : ']');
            return -GC_ERR_PARAM;
        }
        spec->v[idx] = v;
    }
    return 0;
}

void codec_spec_str(char *buf, size_t n, const CodecSpec *spec) {
    size_t at = (size_t)snprintf(buf, n, "%s", spec->ops->name);
    for (int i = 0; i < spec->ops->nparams && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%c%s=%.10g", i ? ',' : ':', spec->ops->params[i].key, spec->v[i]);
}

void codec_print_help(FILE *fp) {
    fprintf(fp, "Codecs (--codec NAME[:key=value,...]):\n");
    for (int i = 0; i < NREG; i++) {
        const CodecOps *o = registry[i];
        fprintf(fp, "  %-10s %s\n", o->name, o->summary);
        for (int k = 0; k < o->nparams; k++) {
            const CodecParamDesc *d = &o->params[k];
            fprintf(fp, "      %-8s default %-8g [%g, %g%c  %s\n", d->key, d->def, d->min, d->max,
                    d->max_open ? ')' : ']', d->help);
        }
    }
}

/* ---- instances ---- */
Codec *codec_new(const CodecSpec *spec) {
    Codec *c = callocCheck(1, sizeof *c);
    c->spec = *spec;
    if (spec->ops->state_size) c->state = callocCheck(1, spec->ops->state_size);
    return c;
}

void codec_free(Codec *c) {
    if (!c) return;
    if (c->spec.ops->state_free) c->spec.ops->state_free(c);
    free(c->state);
    free(c);
}

size_t codec_state_max(const Codec *c) { return c->spec.ops->state_save ? c->spec.ops->state_max : 0; }

int64_t codec_state_save(const Codec *c, uint8_t *buf, size_t cap) {
    if (!c->spec.ops->state_save) return 0;
    return c->spec.ops->state_save(c, buf, cap);
}

int codec_state_load(Codec *c, const uint8_t *buf, size_t len) {
    if (!c->spec.ops->state_load) return len ? -GC_ERR_STATE : 0;
    return c->spec.ops->state_load(c, buf, len);
}

size_t codec_max_frame(const Codec *c, size_t n) { return CODEC_HEADER_SIZE + c->spec.ops->max_payload(c, n); }

int64_t codec_encode(Codec *c, uint8_t *frame, size_t cap, const float *x, size_t n, const CodecSide *side) {
    static const CodecSide none;
    if (n > CODEC_MAX_COUNT) return -GC_ERR_PARAM;
    if (cap < CODEC_HEADER_SIZE) return -GC_ERR_NOSPACE;
    uint16_t flags = 0;
    int64_t len = c->spec.ops->encode(c, frame + CODEC_HEADER_SIZE, cap - CODEC_HEADER_SIZE, &flags, x, n,
                                      side ? side : &none);
    if (len < 0) return len;
    if ((uint64_t)len > 0xFFFFFFFFu) return -GC_ERR_NOSPACE;
    frame_header_write(frame, (uint8_t)c->spec.ops->id, flags, (uint32_t)n, (uint32_t)len,
                       crc32c(0, frame + CODEC_HEADER_SIZE, (size_t)len));
    return CODEC_HEADER_SIZE + len;
}

void frame_header_write(uint8_t *h, uint8_t codec, uint16_t flags, uint32_t count, uint32_t len, uint32_t crc) {
    memcpy(h, CODEC_MAGIC, 4);
    h[4] = CODEC_VERSION;
    h[5] = codec;
    put_u16(h + 6, flags);
    put_u32(h + 8, count);
    put_u32(h + 12, len);
    put_u32(h + 16, crc);
}

int frame_header_read(FrameHeader *h, const uint8_t *frame, size_t len) {
    if (len < CODEC_HEADER_SIZE) return -GC_ERR_TRUNCATED;
    if (memcmp(frame, CODEC_MAGIC, 4) != 0) return -GC_ERR_MAGIC;
    h->version = frame[4];
    if (h->version != CODEC_VERSION) return -GC_ERR_VERSION;
    h->codec = frame[5];
    if (!codec_find_id(h->codec)) return -GC_ERR_CODEC;
    h->flags = get_u16(frame + 6);
    h->count = get_u32(frame + 8);
    h->payload_len = get_u32(frame + 12);
    h->crc = get_u32(frame + 16);
    size_t have = len - CODEC_HEADER_SIZE;
    if (have < h->payload_len) return -GC_ERR_TRUNCATED;
    if (have > h->payload_len) return -GC_ERR_OVERSIZED;
    return 0;
}

int frame_header_expect(FrameHeader *h, const uint8_t *frame, size_t len, uint8_t codec, size_t n) {
    int rc = frame_header_read(h, frame, len);
    if (rc) return rc;
    if (h->codec != codec) return -GC_ERR_CODEC;
    if ((size_t)h->count != n) return -GC_ERR_COUNT;
    return 0;
}

static int decode_frame(Codec *c, float *out, size_t n, float weight, int acc, const uint8_t *frame, size_t len) {
    FrameHeader h;
    int rc = frame_header_expect(&h, frame, len, (uint8_t)c->spec.ops->id, n);
    if (rc) return rc;
    if (crc32c(0, frame + CODEC_HEADER_SIZE, h.payload_len) != h.crc) return -GC_ERR_CHECKSUM;
    return c->spec.ops->decode(c, out, n, weight, acc, frame + CODEC_HEADER_SIZE, h.payload_len, h.flags);
}

int codec_decode(Codec *c, float *out, size_t n, const uint8_t *frame, size_t len) {
    return decode_frame(c, out, n, 1.0f, 0, frame, len);
}

int codec_decode_acc(Codec *c, float *out, size_t n, float weight, const uint8_t *frame, size_t len) {
    return decode_frame(c, out, n, weight, 1, frame, len);
}

float codec_local_scalar(const Codec *c, const float *x, size_t n) {
    if (!c->spec.ops->local_scalar) return NAN;
    return c->spec.ops->local_scalar(c, x, n);
}
