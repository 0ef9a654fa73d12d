/* The exchange's checkpoint sections (see exchange.h): what it keeps identical
 * on every worker (exchange_replicas), its state on this worker and the codecs'
 * state, loading them back, and what a resume on another worker count takes of
 * each (docs/DIST.md, Checkpoints). */
#include <stdlib.h>
#include <string.h>

#include "dist/exchange_internal.h"

int exchange_replicas(const Exchange *ex, float *params, Optim *opt, CkptSection *out, int cap) {
    if (ex->cfg.topology == TOPO_ALLREDUCE || cap < 1) return 0;
    int anchor = ex->deltas && ex->started, k = 0;
    snprintf(out[k].name, CKPT_NAME_MAX, "%s", anchor ? "ex.anchor" : "params");
    out[k].data = anchor ? ex->anchor : params;
    out[k++].len = ex->pt->total * sizeof(float);
    if (ex->deltas || (ex->cfg.topology == TOPO_PS && !ex->grad_pull)) return k;
    CkptSection s[2 + OPT_MAX_STATE];
    int m = optim_ckpt_sections(opt, s, 2 + OPT_MAX_STATE, "opt.");
    for (int i = 0; i < m && k < cap; i++)
        if (strcmp(s[i].name, "opt.config")) out[k++] = s[i]; /* hyper-parameters may change on resume */
    return k;
}

/* ---------------------------------------------------- checkpoints ---- */
/* The "codecs" section: the state of every codec instance that keeps some
 * (GCOMP's Huffman tables, docs/FORMAT.md section 13), so a resumed run codes
 * exactly as an uninterrupted one. u32 record count, then per record:
 * u32 tensor, u32 slot, u32 direction (0 encoder, 1 decoder), u32 length, blob. */
#define CK_REC_HDR 16

static void codecs_blob(Exchange *ex) {
    size_t cap = 4;
    for (int dir = 0; dir < 2; dir++)
        for (size_t i = 0; i < (size_t)ex->T * (size_t)ex->nslots; i++) {
            Codec *c = (dir ? ex->dec : ex->enc)[i];
            if (c && codec_state_max(c)) cap += CK_REC_HDR + codec_state_max(c);
        }
    bytebuf_reserve(&ex->ckpt, cap);
    uint8_t *p = ex->ckpt.p;
    size_t at = 4;
    uint32_t count = 0;
    for (int dir = 0; dir < 2; dir++)
        for (size_t i = 0; i < (size_t)ex->T * (size_t)ex->nslots; i++) {
            Codec *c = (dir ? ex->dec : ex->enc)[i];
            if (!c || !codec_state_max(c)) continue;
            int64_t len = codec_state_save(c, p + at + CK_REC_HDR, codec_state_max(c));
            if (len < 0) { /* a codec's state_max is its own bound: a bug, not an input error */
                fprintf(stderr, "fatal: codec state of tensor %zu exceeds its bound\n", i / (size_t)ex->nslots);
                abort();
            }
            put_u32(p + at, (uint32_t)(i / (size_t)ex->nslots));
            put_u32(p + at + 4, (uint32_t)(i % (size_t)ex->nslots));
            put_u32(p + at + 8, (uint32_t)dir);
            put_u32(p + at + 12, (uint32_t)len);
            at += CK_REC_HDR + (size_t)len;
            count++;
        }
    put_u32(p, count);
    ex->ckpt.len = count ? at : 0;
}

int exchange_ckpt_sections(Exchange *ex, CkptSection *out, int cap, const char *prefix) {
    codecs_blob(ex);
    struct {
        const char *name;
        void *p;
        size_t bytes;
    } s[] = {
        {"resid", ex->resid, ex->resid ? ex->pt->total * 4 : 0},
        {"vel", ex->vel, ex->vel ? ex->pt->total * 4 : 0},
        {"anchor", ex->anchor, ex->anchor ? ex->pt->total * 4 : 0},
        {"global", ex->global, ex->global ? ex->pt->total * 4 : 0},
        {"pullres", ex->pull_resid, ex->pull_resid ? ex->pt->total * 4 : 0},
        {"codecs", ex->ckpt.len ? ex->ckpt.p : NULL, ex->ckpt.len},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof s / sizeof s[0] && n < cap; i++) {
        if (!s[i].p) continue;
        snprintf(out[n].name, CKPT_NAME_MAX, "%s%s", prefix, s[i].name);
        out[n].data = s[i].p;
        out[n].len = s[i].bytes;
        n++;
    }
    return n;
}

static int codecs_load(Exchange *ex, const uint8_t *p, size_t len, char *err, size_t errlen) {
    if (len < 4) goto bad;
    uint32_t count = get_u32(p);
    size_t at = 4;
    for (uint32_t r = 0; r < count; r++) {
        if (len - at < CK_REC_HDR) goto bad;
        uint32_t t = get_u32(p + at), slot = get_u32(p + at + 4), dir = get_u32(p + at + 8),
                 l = get_u32(p + at + 12);
        at += CK_REC_HDR;
        if (t >= (uint32_t)ex->T || slot >= (uint32_t)ex->nslots || dir > 1 || l > len - at) goto bad;
        Codec *c = exchange_slot_codec(ex, dir ? ex->dec : ex->enc, (int)t, (int)slot);
        int rc = codec_state_load(c, p + at, l);
        if (rc) {
            snprintf(err, errlen, "checkpoint: codec state of tensor %s (%s) does not fit this run's codec: %s",
                     ex->pt->t[t].name, dir ? "decoder" : "encoder", gc_strerror(rc));
            return -1;
        }
        at += l;
    }
    if (at == len) return 0;
bad:
    snprintf(err, errlen, "checkpoint: the exchange's codecs section is malformed");
    return -1;
}

int exchange_ckpt_load(Exchange *ex, const Ckpt *ck, const char *prefix, long step, int saved_workers, char *err,
                       size_t errlen) {
    CkptSection s[10];
    int n = exchange_ckpt_sections(ex, s, 10, "");
    for (int i = 0; i < n; i++) {
        char name[CKPT_NAME_MAX + 16];
        snprintf(name, sizeof name, "%.15s%.31s", prefix, s[i].name);
        if (!strcmp(s[i].name, "codecs")) continue;
        if (ckpt_load(ck, name, (void *)s[i].data, s[i].len, err, errlen)) return -1;
    }
    /* the first exchange_step copies the parameters into the anchor and the
     * server's model; after a step they come from the checkpoint */
    ex->started = step > 0;
    /* absent when no codec kept state at the save: before the first exchange,
     * or when no tensor's codec keeps state */
    if (saved_workers != ex->N) return 0; /* the codecs start afresh (exchange_ckpt_take) */
    char name[CKPT_NAME_MAX + 16];
    snprintf(name, sizeof name, "%.15scodecs", prefix);
    size_t len = 0;
    const uint8_t *p = ckpt_find(ck, name, &len);
    if (p) return codecs_load(ex, p, len, err, errlen);
    long exchanges = ex->deltas ? step / ex->cfg.delay : step;
    for (int t = 0; t < ex->T && exchanges > 0; t++)
        if (ex->pol[t].spec.ops->state_save) {
            snprintf(err, errlen, "checkpoint has no section '%s', which this run's codec %s keeps after an exchange",
                     name, ex->pol[t].spec.ops->name);
            return -1;
        }
    return 0;
}

CkptTake exchange_ckpt_take(const Exchange *ex, const char *name) {
    if (!strcmp(name, "params")) return ex->deltas ? CKPT_TAKE_MEAN : CKPT_TAKE_W0;
    if (!strncmp(name, "opt.", 4)) {
        if (!strcmp(name, "opt.config") || !strcmp(name, "opt.step")) return CKPT_TAKE_W0;
        /* with weight deltas each worker's optimizer steps on its own gradient
         * between exchanges; else every worker's is the same (or the server's) */
        return ex->deltas ? CKPT_TAKE_MEAN : CKPT_TAKE_W0;
    }
    if (!strncmp(name, "ex.", 3)) {
        if (!strcmp(name, "ex.resid") || !strcmp(name, "ex.vel")) return CKPT_TAKE_MEAN;
        if (!strcmp(name, "ex.codecs")) return CKPT_TAKE_NONE;
        return CKPT_TAKE_W0; /* ex.anchor (shared), ex.global and ex.pullres (the server's) */
    }
    return CKPT_TAKE_OTHER;
}

int exchange_ckpt_server_only(const char *name) { return !strcmp(name, "ex.global") || !strcmp(name, "ex.pullres"); }
