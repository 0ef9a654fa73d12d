/* The exchange (see exchange.h and docs/DIST.md). */
#include "dist/exchange.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/check.h"
#include "common/rng.h"

/* ------------------------------------------------------------ names ---- */
static const char *const topo_names[TOPO_COUNT] = {"allreduce", "allgather", "ps", "ring"};
static const char *const mem_names[MEM_COUNT] = {"none", "residual", "dgc"};

const char *topology_name(int t) { return t >= 0 && t < TOPO_COUNT ? topo_names[t] : "auto"; }
const char *memory_name(int m) { return m >= 0 && m < MEM_COUNT ? mem_names[m] : "auto"; }
int topology_parse(const char *s) {
    for (int i = 0; i < TOPO_COUNT; i++)
        if (!strcmp(s, topo_names[i])) return i;
    return -1;
}
int memory_parse(const char *s) {
    for (int i = 0; i < MEM_COUNT; i++)
        if (!strcmp(s, mem_names[i])) return i;
    return -1;
}

/* The paper defaults per codec: topology and error-feedback memory.
 *   3lc: ps + residual both ways (3LC sections 2-3, "error accumulation")
 *   gcomp: ring, near-lossless, no memory (GCOMP section 6.2)
 *   terngrad, stoch3: allgather, unbiased, no memory (TernGrad section 3)
 *   dgc: allgather + DGC's memory (momentum correction, masking)
 *   sbc, topk, onebit, int8: allgather + residual (SBC Alg. 1, 1-bit SGD, 3LC's baselines)
 *   fp16: allgather, no memory; fp32: allreduce */
static int default_topology(int codec) {
    switch (codec) {
    case CODEC_FP32: return TOPO_ALLREDUCE;
    case CODEC_3LC: return TOPO_PS;
    case CODEC_GCOMP: return TOPO_RING;
    default: return TOPO_ALLGATHER;
    }
}
static int default_memory(int codec) {
    switch (codec) {
    case CODEC_INT8:
    case CODEC_3LC:
    case CODEC_ONEBIT:
    case CODEC_TOPK:
    case CODEC_SBC: return MEM_RESIDUAL;
    case CODEC_DGC: return MEM_DGC;
    default: return MEM_NONE;
    }
}

/* SBC's p with communication delay: SBC (2) and (3) use 1% (SBC IV-B) */
#define SBC_P_DELAYED 0.01

void dist_config_default(DistConfig *c) {
    memset(c, 0, sizeof *c);
    codec_spec_default(&c->policy.global, codec_find("fp32"));
    c->policy.min_compress = -1;
    c->policy.keep_last_fp32 = -1;
    c->topology = TOPO_AUTO;
    c->memory = MEM_AUTO;
    c->delay = 1;
    c->deltas = -1;
    c->dgc_momentum = 0.9;
    c->dgc_warmup = 4;
    c->scalar_sharing = 1;
}

int dist_parse_codec(DistConfig *c, const char *text, char *err, size_t errlen) {
    char buf[512], rest[512];
    if (strlen(text) >= sizeof buf) {
        snprintf(err, errlen, "--codec value too long");
        return -1;
    }
    strcpy(buf, text);
    char *colon = strchr(buf, ':');
    char *params = colon ? colon + 1 : NULL;
    if (colon) *colon = 0;
    int graddrop = !strcmp(buf, "graddrop");
    snprintf(rest, sizeof rest, "%s", graddrop ? "dgc" : buf);
    size_t at = strlen(rest);
    int first = 1;
    int memory = graddrop ? MEM_RESIDUAL : MEM_AUTO;
    double warmup = graddrop ? 0 : c->dgc_warmup, clip = c->dgc_clip;
    int share = c->scalar_sharing, p_given = 0;
    char *save = NULL;
    for (char *kv = params ? strtok_r(params, ",", &save) : NULL; kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        const char *val = eq ? eq + 1 : "";
        size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);
        char *end = NULL;
        if (klen == 6 && !strncmp(kv, "warmup", 6)) {
            warmup = strtod(val, &end);
            if (end == val || *end || warmup < 0) goto bad;
        } else if (klen == 4 && !strncmp(kv, "clip", 4)) {
            clip = strtod(val, &end);
            if (end == val || *end || clip < 0) goto bad;
        } else if (klen == 5 && !strncmp(kv, "share", 5)) {
            if (strcmp(val, "0") && strcmp(val, "1")) goto bad;
            share = val[0] == '1';
        } else if (klen == 6 && !strncmp(kv, "memory", 6)) {
            memory = memory_parse(val);
            if (memory < 0) goto bad;
        } else {
            p_given |= klen == 1 && kv[0] == 'p';
            at += (size_t)snprintf(rest + at, sizeof rest - at, "%c%s", first ? ':' : ',', kv);
            first = 0;
        }
        continue;
    bad:
        snprintf(err, errlen, "--codec %s: bad value in '%s'", text, kv);
        return -1;
    }
    char cerr[300];
    if (codec_parse(&c->policy.global, rest, cerr, sizeof cerr) != 0) {
        snprintf(err, errlen, "--codec %s: %s", text, cerr);
        return -1;
    }
    c->memory = memory;
    c->dgc_warmup = warmup;
    c->dgc_clip = clip;
    c->scalar_sharing = share;
    c->sbc_p_given = p_given;
    return 0;
}

double dgc_warmup_density(double target, double warmup, double epoch) {
    /* DGC section 4 (dgc.txt l.312): "we rise the sparsity in the warm-up period
     * exponentially: 75%, 93.75%, 98.4375%, 99.6%" then the target 99.9%: four
     * equal stages over the warm-up period (one epoch each for CIFAR's 4 epochs,
     * a quarter epoch each for the language model's 1 epoch, section 5):
     * density 0.25^(1 + k) in stage k = floor(4 epoch / W). */
    if (warmup <= 0 || epoch >= warmup) return target;
    double k = floor(epoch * 4.0 / warmup);
    double d = pow(0.25, 1.0 + k);
    return d > target ? d : target;
}

/* ------------------------------------------------------------ state ---- */
enum { SLOT_PUSH = 0, SLOT_PULL = 1 }; /* allgather/ps encoder slots */
enum { SIDE_PUSH, SIDE_PULL, SIDE_RING };  /* what a frame carries, for side inputs */

struct Exchange {
    DistConfig cfg;
    Comm *comm;
    const ParamTable *pt;
    OptConfig opt;
    int N, rank, T;
    int deltas;
    TensorPolicy *pol;
    int *mem;            /* [T] memory kind of each tensor */
    float *resid, *vel;  /* error feedback (DGC: resid is v, vel is u) */
    float *anchor;       /* deltas: parameters at the last exchange */
    float *work, *agg, *tmp;
    float *repr;
    uint8_t *mask, *levels;
    float *global;       /* ps server: the global model */
    float *pull_resid;   /* ps server: error accumulation of the pulled deltas */
    float *scalars;      /* [T] shared TernGrad scalars */
    int nslots;          /* codec slots per tensor */
    Codec **enc, **dec;  /* [T * nslots] lazily created */
    ByteBuf out, in;
    ByteBuf ckpt;        /* the "codecs" checkpoint section */
    size_t *lens;
    long local_steps;
    int started;
    ExchangeStats st;
    ExchangeTamper tamper;
    void *tamper_arg;
    int failed;
    char err[512];
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *arena(const Exchange *ex) { return param_arena_alloc(ex->pt); }

static void set_err(Exchange *ex, const char *fmt, ...) {
    if (ex->failed) return; /* keep the first */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ex->err, sizeof ex->err, fmt, ap);
    va_end(ap);
    ex->failed = 1;
}

const char *exchange_error(const Exchange *ex) { return ex->err; }
const DistConfig *exchange_config(const Exchange *ex) { return &ex->cfg; }
const TensorPolicy *exchange_policy(const Exchange *ex) { return ex->pol; }
void exchange_set_tamper(Exchange *ex, ExchangeTamper fn, void *arg) {
    ex->tamper = fn;
    ex->tamper_arg = arg;
}

Exchange *exchange_new(const DistConfig *cfg, Comm *comm, const ParamTable *pt, const OptConfig *opt, char *err,
                       size_t errlen) {
    Exchange *ex = callocCheck(1, sizeof *ex);
    ex->cfg = *cfg;
    ex->comm = comm;
    ex->pt = pt;
    ex->opt = *opt;
    ex->N = comm->size;
    ex->rank = comm->rank;
    ex->T = pt->n;
    int codec = cfg->policy.global.ops->id;
    if (ex->cfg.topology == TOPO_AUTO) ex->cfg.topology = default_topology(codec);
    if (ex->cfg.memory == MEM_AUTO) ex->cfg.memory = default_memory(codec);
    ex->deltas = cfg->deltas >= 0 ? cfg->deltas : (codec == CODEC_SBC || cfg->delay > 1);
    /* SBC IV-B: SBC (1) sends 0.1% without delay, SBC (2) and (3) 1% every 10 or
     * 100 steps, so `--codec sbc --delay 10` is SBC (2) unless p= says otherwise */
    if (codec == CODEC_SBC && !cfg->sbc_p_given && cfg->delay > 1)
        codec_param_set(&ex->cfg.policy.global, "p", SBC_P_DELAYED);
    if (cfg->delay < 1) {
        snprintf(err, errlen, "--delay must be >= 1");
        goto fail;
    }
    if (ex->cfg.memory == MEM_DGC && (ex->deltas || ex->cfg.topology == TOPO_RING)) {
        snprintf(err, errlen,
                 "DGC's memory (momentum correction) exchanges gradients every step over allgather or ps; "
                 "it cannot be combined with %s", ex->deltas ? "--delay/weight-delta exchange" : "the ring topology");
        goto fail;
    }
    if (ex->cfg.memory == MEM_DGC && opt->kind != OPT_SGD) {
        snprintf(err, errlen, "DGC's momentum correction replaces SGD momentum; use --optim sgd (or momentum)");
        goto fail;
    }
    if (ex->cfg.topology == TOPO_ALLREDUCE) {
        /* the uncompressed baseline: nothing is encoded */
        for (int r = 0; r < cfg->policy.nrules; r++)
            if (cfg->policy.rules[r].spec.ops->id != CODEC_FP32) {
                snprintf(err, errlen, "the allreduce topology sends fp32 only; --layer-codec needs allgather, ps or ring");
                goto fail;
            }
        if (codec != CODEC_FP32) {
            snprintf(err, errlen, "the allreduce topology sends fp32 only; codec %s needs allgather, ps or ring",
                     cfg->policy.global.ops->name);
            goto fail;
        }
    }
    ex->pol = callocCheck((size_t)ex->T, sizeof *ex->pol);
    policy_build(ex->pol, &ex->cfg.policy, pt);
    ex->mem = callocCheck((size_t)ex->T, sizeof *ex->mem);
    int any_mem = 0, any_dgc = 0;
    for (int t = 0; t < ex->T; t++) {
        ex->mem[t] = ex->pol[t].compressed ? ex->cfg.memory : MEM_NONE;
        any_mem |= ex->mem[t] != MEM_NONE;
        any_dgc |= ex->mem[t] == MEM_DGC;
    }
    if (any_mem) ex->resid = arena(ex);
    if (any_dgc) ex->vel = arena(ex);
    if (ex->deltas) ex->anchor = arena(ex);
    ex->work = arena(ex);
    ex->agg = arena(ex);
    ex->tmp = arena(ex);
    ex->repr = arena(ex);
    ex->mask = callocCheck(pt->total + 64, 1);
    ex->levels = callocCheck(pt->total + 64, 1);
    ex->scalars = callocCheck((size_t)ex->T, sizeof(float));
    if (ex->cfg.topology == TOPO_PS && ex->rank == 0) {
        ex->global = arena(ex);
        ex->pull_resid = arena(ex);
    }
    ex->nslots = 2 * ex->N + 2;
    ex->enc = callocCheck((size_t)ex->T * (size_t)ex->nslots, sizeof(Codec *));
    ex->dec = callocCheck((size_t)ex->T * (size_t)ex->nslots, sizeof(Codec *));
    ex->lens = callocCheck((size_t)ex->N, sizeof(size_t));
    return ex;
fail:
    free(ex);
    return NULL;
}

void exchange_free(Exchange *ex) {
    if (!ex) return;
    for (int i = 0; i < ex->T * ex->nslots; i++) {
        codec_free(ex->enc[i]);
        codec_free(ex->dec[i]);
    }
    free(ex->enc);
    free(ex->dec);
    float *arenas[] = {ex->resid, ex->vel, ex->anchor, ex->work, ex->agg, ex->tmp, ex->repr, ex->global, ex->pull_resid};
    for (size_t i = 0; i < sizeof arenas / sizeof arenas[0]; i++) param_arena_free(arenas[i]);
    free(ex->mask);
    free(ex->levels);
    free(ex->scalars);
    free(ex->pol);
    free(ex->mem);
    free(ex->lens);
    bytebuf_free(&ex->out);
    bytebuf_free(&ex->in);
    bytebuf_free(&ex->ckpt);
    free(ex);
}

static Codec *slot_codec(Exchange *ex, Codec **tab, int t, int slot) {
    Codec **c = &tab[(size_t)t * (size_t)ex->nslots + (size_t)slot];
    if (!*c) *c = codec_new(&ex->pol[t].spec);
    return *c;
}
#define ENC(t, s) slot_codec(ex, ex->enc, (t), (s))
#define DEC(t, s) slot_codec(ex, ex->dec, (t), (s))

void exchange_print(const Exchange *ex, FILE *fp) {
    fprintf(fp, "exchange: %d workers over %s, topology %s, memory %s, exchanging %s", ex->N, ex->comm->ops->name,
            topology_name(ex->cfg.topology), memory_name(ex->cfg.memory), ex->deltas ? "weight deltas" : "gradients");
    if (ex->cfg.delay > 1) fprintf(fp, " every %d local steps", ex->cfg.delay);
    fprintf(fp, "\n");
    if (ex->cfg.memory == MEM_DGC)
        fprintf(fp, "dgc: momentum correction m=%g%s, local clipping %s (x N^-1/2), warm-up %g epochs\n",
                ex->cfg.dgc_momentum, ex->cfg.dgc_nesterov ? " (Nesterov)" : "",
                ex->cfg.dgc_clip > 0 ? "on" : "off", ex->cfg.dgc_warmup);
    policy_print(fp, ex->pol, ex->pt);
}

/* -------------------------------------------------------- bundles ----
 * One message per worker per hop: all of its frames, in tensor order.
 *   "GCXB" | u32 version (1) | u32 step (low 32 bits) | u32 entries
 *   entries: u32 tensor | u32 chunk | u32 frame length | frame
 * (docs/FORMAT.md, "Exchange bundles"). */
#define BUNDLE_HDR 16
#define ENTRY_HDR 12

static void bundle_begin(ByteBuf *b, long step) {
    bytebuf_reserve(b, BUNDLE_HDR);
    memcpy(b->p, "GCXB", 4);
    put_u32(b->p + 4, 1);
    put_u32(b->p + 8, (uint32_t)step);
    put_u32(b->p + 12, 0);
    b->len = BUNDLE_HDR;
}

/* appends one encoded frame; returns 0 or a negative GcError */
static int bundle_add(Exchange *ex, ByteBuf *b, int t, int chunk, Codec *c, const float *x, size_t n,
                      const CodecSide *side) {
    size_t cap = codec_max_frame(c, n);
    bytebuf_reserve(b, b->len + ENTRY_HDR + cap);
    uint8_t *e = b->p + b->len;
    double t0 = now_s();
    int64_t len = codec_encode(c, e + ENTRY_HDR, cap, x, n, side);
    ex->st.codec_s += now_s() - t0;
    if (len < 0) return (int)len;
    put_u32(e, (uint32_t)t);
    put_u32(e + 4, (uint32_t)chunk);
    put_u32(e + 8, (uint32_t)len);
    b->len += ENTRY_HDR + (size_t)len;
    put_u32(b->p + 12, get_u32(b->p + 12) + 1);
    ex->st.raw_up += 4 * (uint64_t)n;
    if (ex->pol[t].compressed) {
        ex->st.comp_raw += 4 * (uint64_t)n;
        ex->st.comp_bytes += ENTRY_HDR + (uint64_t)len;
    }
    return 0;
}

typedef struct {
    const uint8_t *p;
    size_t len, at;
    uint32_t left;
} BundleReader;

static int bundle_open(BundleReader *r, const uint8_t *p, size_t len, long step) {
    r->p = p;
    r->len = len;
    r->at = BUNDLE_HDR;
    if (len < BUNDLE_HDR) return -GC_ERR_TRUNCATED;
    if (memcmp(p, "GCXB", 4) != 0) return -GC_ERR_MAGIC;
    if (get_u32(p + 4) != 1) return -GC_ERR_VERSION;
    if (get_u32(p + 8) != (uint32_t)step) return -GC_ERR_STATE;
    r->left = get_u32(p + 12);
    return 0;
}

/* next entry, which must be (t, chunk) */
static int bundle_next(BundleReader *r, int t, int chunk, const uint8_t **frame, size_t *flen) {
    if (r->left == 0) return -GC_ERR_TRUNCATED;
    if (r->len - r->at < ENTRY_HDR) return -GC_ERR_TRUNCATED;
    const uint8_t *e = r->p + r->at;
    if (get_u32(e) != (uint32_t)t || get_u32(e + 4) != (uint32_t)chunk) return -GC_ERR_CORRUPT;
    size_t len = get_u32(e + 8);
    if (len > r->len - r->at - ENTRY_HDR) return -GC_ERR_TRUNCATED;
    *frame = e + ENTRY_HDR;
    *flen = len;
    r->at += ENTRY_HDR + len;
    r->left--;
    return 0;
}

static int bundle_close(const BundleReader *r) {
    if (r->left != 0) return -GC_ERR_CORRUPT;
    return r->at == r->len ? 0 : -GC_ERR_OVERSIZED;
}

/* ---------------------------------------------------- error feedback ---- */
static size_t t_off(const Exchange *ex, int t) { return ex->pt->t[t].offset; }
static size_t t_n(const Exchange *ex, int t) { return ex->pt->t[t].numel; }

/* x = input + memory (before encoding) for tensor t, range [lo, hi) */
static void memory_in(Exchange *ex, int t, float *x, const float *g, size_t lo, size_t hi) {
    size_t off = t_off(ex, t);
    switch (ex->mem[t]) {
    case MEM_NONE:
        if (x != g)
            for (size_t i = lo; i < hi; i++) x[i] = g[i];
        break;
    case MEM_RESIDUAL: {
        const float *r = ex->resid + off;
        for (size_t i = lo; i < hi; i++) x[i] = g[i] + r[i];
        break;
    }
    case MEM_DGC: {
        /* dgc.txt eq. 7 (momentum correction): u = m u + g, v = v + u;
         * appendix B eq. 10 / Algorithm 4 (Nesterov): u = m (u + g), v = v + u + g */
        float *u = ex->vel + off, *v = ex->resid + off;
        float m = (float)ex->cfg.dgc_momentum;
        if (ex->cfg.dgc_nesterov)
            for (size_t i = lo; i < hi; i++) {
                u[i] = m * (u[i] + g[i]);
                v[i] += u[i] + g[i];
                x[i] = v[i];
            }
        else
            for (size_t i = lo; i < hi; i++) {
                u[i] = m * u[i] + g[i];
                v[i] += u[i];
                x[i] = v[i];
            }
        break;
    }
    }
}

/* memory keeps what the frame did not represent: r = x - repr; DGC also
 * masks the momentum where values were sent (section 3.3, momentum factor
 * masking: "u <- u (.) not mask, v <- v (.) not mask") */
static void memory_out(Exchange *ex, int t, const float *x, size_t lo, size_t hi) {
    size_t off = t_off(ex, t);
    const float *repr = ex->repr + off;
    if (ex->mem[t] == MEM_NONE) return;
    float *r = ex->resid + off;
    for (size_t i = lo; i < hi; i++) r[i] = x[i] - repr[i];
    if (ex->mem[t] == MEM_DGC) {
        float *u = ex->vel + off;
        const uint8_t *mask = ex->mask + off;
        for (size_t i = lo; i < hi; i++)
            if (mask[i]) u[i] = 0.0f;
    }
}

/* GCOMP levels for a model delta d added to parameters p: n bits of d are lost
 * in p + d when |p / d| > 2^n (gcomp.txt section 5.1 with the update written
 * as the delta itself); one guard bit as optim_gcomp_levels. */
static void delta_levels(uint8_t *lv, const float *p, const float *d, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float q = d[i] != 0.0f ? fabsf(p[i] / d[i]) : 0.0f;
        int L = 0;
        while (L < GCOMP_MAX_LEVEL && q > ldexpf(1.0f, GCOMP_BITS_PER_LEVEL * (L + 1) + 1)) L++;
        lv[i] = (uint8_t)L;
    }
}

/* side inputs for encoding x = values [lo, hi) of tensor t */
static void make_side(Exchange *ex, CodecSide *side, int t, int kind, int slot, size_t lo, size_t hi, const float *x,
                      const float *params, const Optim *opt, double lr, double density, long step) {
    memset(side, 0, sizeof *side);
    size_t off = t_off(ex, t);
    uint64_t key = ((uint64_t)(uint32_t)step << 32) ^ ((uint64_t)ex->rank << 24) ^ ((uint64_t)t << 8) ^ (uint64_t)slot;
    side->seed = rng_hash64(ex->cfg.seed ^ 0x9E3779B97F4A7C15ULL, key);
    side->threads = ex->cfg.codec_threads;
    side->repr = ex->repr + off + lo;
    side->mask = ex->mask + off + lo;
    side->density = density;
    const CodecOps *ops = ex->pol[t].spec.ops;
    if (ops->local_scalar && ex->cfg.scalar_sharing && kind == SIDE_PUSH) side->scalar = &ex->scalars[t];
    if (ops->id == CODEC_GCOMP) {
        size_t n = hi - lo;
        uint8_t *lv = ex->levels + off + lo;
        if (!ex->deltas && kind != SIDE_PULL && ex->cfg.topology != TOPO_PS) {
            /* each worker's value (ring: partial sum) enters the averaged
             * gradient the optimizer sees as x/N */
            float *scaled = ex->tmp + off + lo;
            for (size_t i = 0; i < n; i++) scaled[i] = x[i] / (float)ex->N;
            optim_gcomp_levels_at(lv, opt, params + off + lo, scaled, lr, off + lo, n);
        } else if (!ex->deltas && kind == SIDE_PUSH) {
            /* ps push: the global model's optimizer state lives on the server;
             * use the plain-SGD metric theta / (lr g / N) */
            float *d = ex->tmp + off + lo;
            for (size_t i = 0; i < n; i++) d[i] = (float)lr * x[i] / (float)ex->N;
            delta_levels(lv, params + off + lo, d, n);
        } else {
            float *d = ex->tmp + off + lo;
            float scale = kind == SIDE_PULL ? 1.0f : 1.0f / (float)ex->N;
            for (size_t i = 0; i < n; i++) d[i] = x[i] * scale;
            delta_levels(lv, params + off + lo, d, n);
        }
        side->levels = lv;
    }
}

/* ----------------------------------------------------- agreement ---- */
/* Control traffic (error agreement, the network model) is not counted. */
static double control_max(Exchange *ex, double v) {
    uint64_t s = ex->comm->sent, r = ex->comm->received;
    comm_allreduce_f64(ex->comm, &v, 1, COMM_MAX);
    ex->comm->sent = s;
    ex->comm->received = r;
    return v;
}

static int agree(Exchange *ex) {
    double flag = control_max(ex, ex->failed ? 1.0 : 0.0);
    if (flag > 0 && !ex->failed) set_err(ex, "worker %d: stopped because another worker reported a bad frame", ex->rank);
    return flag > 0 ? -GC_ERR_CORRUPT : 0;
}

static void report_frame_error(Exchange *ex, int rc, int t, int chunk, int peer, const char *what) {
    if (chunk >= 0)
        set_err(ex, "worker %d: %s frame for tensor %s (chunk %d) from worker %d: %s", ex->rank, what,
                ex->pt->t[t].name, chunk, peer, gc_strerror(rc));
    else
        set_err(ex, "worker %d: %s frame for tensor %s from worker %d: %s", ex->rank, what, ex->pt->t[t].name, peer,
                gc_strerror(rc));
}

/* ---------------------------------------------------- topologies ---- */
static size_t chunk_lo(size_t n, int N, int c) { return n * (size_t)c / (size_t)N; }

static void tamper(Exchange *ex, long step) {
    if (ex->tamper) ex->tamper(ex->out.p, ex->out.len, ex->rank, step, ex->tamper_arg);
}

/* encode every tensor of x (= memory applied) into ex->out as the push bundle */
static void encode_all(Exchange *ex, const float *x, const float *params, const Optim *opt, double lr, double density,
                      long step) {
    /* TernGrad scalar sharing (terngrad.txt section 3.1): the max over workers
     * of each tensor's scalar, after clipping, so all workers share it */
    if (ex->cfg.scalar_sharing && ex->cfg.topology != TOPO_RING) {
        int any = 0;
        for (int t = 0; t < ex->T; t++)
            if (ex->pol[t].spec.ops->local_scalar) {
                ex->scalars[t] = codec_local_scalar(ENC(t, SLOT_PUSH), x + t_off(ex, t), t_n(ex, t));
                any = 1;
            }
        if (any) comm_allreduce_f32(ex->comm, ex->scalars, (size_t)ex->T, COMM_MAX);
    }
    bundle_begin(&ex->out, step);
    for (int t = 0; t < ex->T; t++) {
        size_t off = t_off(ex, t), n = t_n(ex, t);
        CodecSide side;
        make_side(ex, &side, t, SIDE_PUSH, SLOT_PUSH, 0, n, x + off, params, opt, lr, density, step);
        int rc = bundle_add(ex, &ex->out, t, 0, ENC(t, SLOT_PUSH), x + off, n, &side);
        if (rc) {
            /* keep taking part in the collectives; agree() stops every rank */
            set_err(ex, "worker %d: encoding tensor %s failed: %s", ex->rank, ex->pt->t[t].name, gc_strerror(rc));
            break;
        }
        memory_out(ex, t, x + off, 0, n);
    }
    ex->st.up_bytes += ex->out.len;
}

/* decode a push bundle from src (decoders slot src) and add it to acc */
static void decode_bundle_acc(Exchange *ex, float *acc, const uint8_t *p, size_t len, int src, long step) {
    BundleReader br;
    int rc = bundle_open(&br, p, len, step);
    if (rc) {
        set_err(ex, "worker %d: message from worker %d is not a valid frame bundle: %s", ex->rank, src, gc_strerror(rc));
        return;
    }
    for (int t = 0; t < ex->T; t++) {
        const uint8_t *f;
        size_t flen, off = t_off(ex, t), n = t_n(ex, t);
        rc = bundle_next(&br, t, 0, &f, &flen);
        if (!rc) {
            double t0 = now_s();
            rc = codec_decode_acc(DEC(t, src), acc + off, n, 1.0f, f, flen);
            ex->st.codec_s += now_s() - t0;
        }
        if (rc) {
            report_frame_error(ex, rc, t, -1, src, "bad");
            return;
        }
    }
    rc = bundle_close(&br);
    if (rc) set_err(ex, "worker %d: bundle from worker %d: %s", ex->rank, src, gc_strerror(rc));
}

static void scale_arena(float *a, size_t n, float s) {
    for (size_t i = 0; i < n; i++) a[i] *= s;
}

/* agg = average over workers of decode(encode(x)); x is the memory-applied input */
static int avg_allgather(Exchange *ex, const float *x, const float *params, const Optim *opt, double lr, double density,
                         long step) {
    encode_all(ex, x, params, opt, lr, density, step);
    tamper(ex, step);
    comm_allgatherv(ex->comm, &ex->in, ex->lens, ex->out.p, ex->out.len);
    memset(ex->agg, 0, ex->pt->total * sizeof(float));
    size_t at = 0;
    for (int src = 0; src < ex->N; src++) {
        if (!ex->failed) decode_bundle_acc(ex, ex->agg, ex->in.p + at, ex->lens[src], src, step);
        if (src != ex->rank) ex->st.down_bytes += ex->lens[src];
        at += ex->lens[src];
    }
    scale_arena(ex->agg, ex->pt->total, 1.0f / (float)ex->N);
    return agree(ex);
}

static int avg_allreduce(Exchange *ex, const float *x) {
    memcpy(ex->agg, x, ex->pt->total * sizeof(float));
    comm_allreduce_f32(ex->comm, ex->agg, ex->pt->total, COMM_SUM);
    scale_arena(ex->agg, ex->pt->total, 1.0f / (float)ex->N);
    uint64_t b = ex->N > 1 ? (uint64_t)(2.0 * (ex->N - 1) / ex->N * 4.0 * (double)param_table_count(ex->pt)) : 0;
    ex->st.up_bytes += b;
    ex->st.down_bytes += b;
    ex->st.raw_up += b;
    return 0;
}

/* Ring allreduce with the codec at every hop (gcomp.txt section 6.2, Figure 8).
 * Slots: reduce-scatter chunk c uses slot c, allgather chunk c slot N + c. */
static int avg_ring(Exchange *ex, const float *x, const float *params, const Optim *opt, double lr, long step) {
    int N = ex->N, r = ex->rank, left = (r + N - 1) % N, right = (r + 1) % N;
    float *acc = ex->agg;
    memcpy(acc, x, ex->pt->total * sizeof(float));
    for (int phase = 0; phase < 2; phase++) {
        /* allgather phase: the owner encodes its fully reduced chunk once,
         * replaces it by what the frame represents, and frames are forwarded */
        if (phase == 1) {
            int own = right; /* after the reduce-scatter rank r holds chunk r+1 */
            bundle_begin(&ex->out, step);
            for (int t = 0; t < ex->T && !ex->failed; t++) {
                size_t off = t_off(ex, t), n = t_n(ex, t);
                size_t lo = chunk_lo(n, N, own), hi = chunk_lo(n, N, own + 1);
                if (hi == lo) continue;
                float *v = ex->work + off;
                memory_in(ex, t, v, acc + off, lo, hi);
                CodecSide side;
                make_side(ex, &side, t, SIDE_RING, N + own, lo, hi, v + lo, params, opt, lr, 0, step);
                int rc = bundle_add(ex, &ex->out, t, own, ENC(t, N + own), v + lo, hi - lo, &side);
                if (rc) {
                    set_err(ex, "worker %d: encoding tensor %s failed: %s", ex->rank, ex->pt->t[t].name,
                            gc_strerror(rc));
                    break;
                }
                memory_out(ex, t, v, lo, hi);
                memcpy(acc + off + lo, ex->repr + off + lo, (hi - lo) * sizeof(float));
            }
        }
        for (int s = 0; s < N - 1; s++) {
            int send_c = phase == 0 ? (r - s + 2 * N) % N : 0;
            int recv_c = phase == 0 ? (r - s - 1 + 2 * N) % N : (r - s + 2 * N) % N;
            if (phase == 0) {
                bundle_begin(&ex->out, step);
                for (int t = 0; t < ex->T && !ex->failed; t++) {
                    size_t off = t_off(ex, t), n = t_n(ex, t);
                    size_t lo = chunk_lo(n, N, send_c), hi = chunk_lo(n, N, send_c + 1);
                    if (hi == lo) continue;
                    float *v = ex->work + off;
                    memory_in(ex, t, v, acc + off, lo, hi);
                    CodecSide side;
                    make_side(ex, &side, t, SIDE_RING, send_c, lo, hi, v + lo, params, opt, lr, 0, step);
                    int rc = bundle_add(ex, &ex->out, t, send_c, ENC(t, send_c), v + lo, hi - lo, &side);
                    if (rc) {
                        set_err(ex, "worker %d: encoding tensor %s failed: %s", ex->rank, ex->pt->t[t].name,
                                gc_strerror(rc));
                        break;
                    }
                    memory_out(ex, t, v, lo, hi);
                }
            } else if (s > 0) {
                /* forward what arrived last hop unchanged */
                bytebuf_reserve(&ex->out, ex->in.len);
                memcpy(ex->out.p, ex->in.p, ex->in.len);
                ex->out.len = ex->in.len;
                BundleReader br;
                if (!bundle_open(&br, ex->out.p, ex->out.len, step)) {
                    /* count the forwarded values as sent */
                    for (int t = 0; t < ex->T; t++) {
                        int c = (r - s + 1 + 2 * N) % N;
                        size_t n = t_n(ex, t);
                        ex->st.raw_up += 4 * (uint64_t)(chunk_lo(n, N, c + 1) - chunk_lo(n, N, c));
                    }
                }
            }
            if (s == 0 || phase == 0) tamper(ex, step);
            ex->st.up_bytes += ex->out.len;
            comm_sendrecv(ex->comm, &ex->in, left, ex->out.p, ex->out.len, right);
            ex->st.down_bytes += ex->in.len;
            if (ex->failed) continue; /* keep the ring moving; agree() reports */
            BundleReader br;
            int rc = bundle_open(&br, ex->in.p, ex->in.len, step);
            if (rc) {
                set_err(ex, "worker %d: message from worker %d is not a valid frame bundle: %s", ex->rank, left,
                        gc_strerror(rc));
                continue;
            }
            for (int t = 0; t < ex->T && !rc; t++) {
                size_t off = t_off(ex, t), n = t_n(ex, t);
                size_t lo = chunk_lo(n, N, recv_c), hi = chunk_lo(n, N, recv_c + 1);
                if (hi == lo) continue;
                const uint8_t *f;
                size_t flen;
                rc = bundle_next(&br, t, recv_c, &f, &flen);
                if (!rc) {
                    double t0 = now_s();
                    if (phase == 0) rc = codec_decode_acc(DEC(t, recv_c), acc + off + lo, hi - lo, 1.0f, f, flen);
                    else rc = codec_decode(DEC(t, N + recv_c), acc + off + lo, hi - lo, f, flen);
                    ex->st.codec_s += now_s() - t0;
                }
                if (rc) report_frame_error(ex, rc, t, recv_c, left, "bad");
            }
            if (!rc && (rc = bundle_close(&br)) != 0)
                set_err(ex, "worker %d: bundle from worker %d: %s", ex->rank, left, gc_strerror(rc));
        }
    }
    scale_arena(acc, ex->pt->total, 1.0f / (float)N);
    return agree(ex);
}

/* ------------------------------------------------------- updates ---- */
/* gradient mode: the optimizer on params from the averaged gradient agg */
static void apply_gradient(Exchange *ex, float *params, const float *agg, Optim *opt, double lr) {
    optim_begin_step(opt);
    int t = 0;
    while (t < ex->T) {
        /* runs of tensors with the same treatment, one call each */
        int dgc = ex->mem[t] == MEM_DGC;
        int u = t;
        while (u + 1 < ex->T && (ex->mem[u + 1] == MEM_DGC) == dgc) u++;
        size_t lo = t_off(ex, t), hi = t_off(ex, u) + t_n(ex, u);
        if (dgc) optim_sgd_plain(params + lo, agg + lo, lr, hi - lo); /* DGC: global step is plain SGD */
        else optim_update(opt, params, agg, lr, lo, hi - lo);
        t = u + 1;
    }
}

/* DGC: fold weight decay into the gradient of the DGC tensors and clip this
 * worker's whole gradient locally (dgc.txt section 3.2 "Local Gradient
 * Clipping", appendix C: threshold scaled by N^-1/2). The clip covers the
 * tensors sent uncompressed too (biases, small tensors): the trainer leaves
 * clipping to this function under DGC's memory, and an unclipped bias of a
 * recurrent network diverges. */
static void dgc_prepare(Exchange *ex, float *grads, const float *params) {
    double sq = 0;
    for (int t = 0; t < ex->T; t++) {
        size_t off = t_off(ex, t), n = t_n(ex, t);
        if (ex->mem[t] == MEM_DGC && ex->cfg.weight_decay != 0)
            optim_add_weight_decay(grads + off, params + off, ex->cfg.weight_decay, n);
        for (size_t i = 0; i < n; i++) sq += (double)grads[off + i] * grads[off + i];
    }
    if (ex->cfg.dgc_clip <= 0) return;
    double thr = ex->cfg.dgc_clip / sqrt((double)ex->N), norm = sqrt(sq);
    if (norm <= thr) return;
    float coef = (float)(thr / (norm + 1e-6)); /* as torch.nn.utils.clip_grad_norm_ */
    scale_arena(grads, ex->pt->total, coef);
}

/* ps: push frames to the server, the server averages and updates the global
 * model, then compresses the model delta once and every worker pulls it */
static int ps_exchange(Exchange *ex, float *params, const float *x, Optim *opt, double lr, double density, long step) {
    encode_all(ex, x, params, opt, lr, density, step);
    tamper(ex, step);
    comm_gatherv(ex->comm, &ex->in, ex->lens, ex->out.p, ex->out.len, 0);
    int server = ex->rank == 0;
    size_t total = ex->pt->total;
    if (server) {
        memset(ex->agg, 0, total * sizeof(float));
        size_t at = 0;
        for (int src = 0; src < ex->N; src++) {
            if (!ex->failed) decode_bundle_acc(ex, ex->agg, ex->in.p + at, ex->lens[src], src, step);
            at += ex->lens[src];
        }
        scale_arena(ex->agg, total, 1.0f / (float)ex->N);
    }
    int rc = agree(ex);
    if (rc) return rc;
    if (server) {
        float *before = ex->tmp;
        memcpy(before, ex->global, total * sizeof(float));
        if (ex->deltas) {
            for (size_t i = 0; i < total; i++) ex->global[i] += ex->agg[i];
        } else {
            apply_gradient(ex, ex->global, ex->agg, opt, lr);
        }
        /* the model delta plus the server's error accumulation, encoded once */
        float *d = ex->agg;
        for (size_t i = 0; i < total; i++) d[i] = ex->global[i] - before[i];
        bundle_begin(&ex->out, step);
        for (int t = 0; t < ex->T; t++) {
            size_t off = t_off(ex, t), n = t_n(ex, t);
            if (ex->mem[t] != MEM_NONE)
                for (size_t i = 0; i < n; i++) d[off + i] += ex->pull_resid[off + i];
            CodecSide side;
            make_side(ex, &side, t, SIDE_PULL, SLOT_PULL, 0, n, d + off, ex->global, opt, lr, 0, step);
            rc = bundle_add(ex, &ex->out, t, 0, ENC(t, SLOT_PULL), d + off, n, &side);
            if (rc) {
                set_err(ex, "server: encoding the pull of tensor %s failed: %s", ex->pt->t[t].name, gc_strerror(rc));
                break;
            }
            if (ex->mem[t] != MEM_NONE)
                for (size_t i = 0; i < n; i++) ex->pull_resid[off + i] = d[off + i] - ex->repr[off + i];
        }
        tamper(ex, step);
    }
    rc = agree(ex);
    if (rc) return rc;
    comm_bcast(ex->comm, &ex->out, 0);
    ex->st.down_bytes += ex->out.len;
    /* every worker applies the same pulled delta (to the anchor in delta mode) */
    float *target = ex->deltas ? ex->anchor : params;
    BundleReader br;
    rc = bundle_open(&br, ex->out.p, ex->out.len, step);
    if (rc) set_err(ex, "worker %d: pull from the server is not a valid frame bundle: %s", ex->rank, gc_strerror(rc));
    for (int t = 0; t < ex->T && !ex->failed; t++) {
        const uint8_t *f;
        size_t flen;
        rc = bundle_next(&br, t, 0, &f, &flen);
        if (!rc) {
            double t0 = now_s();
            rc = codec_decode_acc(DEC(t, SLOT_PULL + 2 * ex->N), target + t_off(ex, t), t_n(ex, t), 1.0f, f, flen);
            ex->st.codec_s += now_s() - t0;
        }
        if (rc) report_frame_error(ex, rc, t, -1, 0, "pulled");
    }
    if (!ex->failed && (rc = bundle_close(&br)) != 0)
        set_err(ex, "worker %d: pull bundle: %s", ex->rank, gc_strerror(rc));
    if (ex->deltas && !ex->failed) memcpy(params, ex->anchor, total * sizeof(float));
    return agree(ex);
}

static int hops(const Exchange *ex) {
    switch (ex->cfg.topology) {
    case TOPO_ALLGATHER: return 1;
    case TOPO_PS: return 2;
    default: return 2 * (ex->N - 1);
    }
}

int exchange_step(Exchange *ex, float *params, float *grads, Optim *opt, double lr, double epoch, long step,
                  ExchangeStats *st) {
    memset(&ex->st, 0, sizeof ex->st);
    ex->failed = 0;
    ex->err[0] = 0;
    size_t total = ex->pt->total;
    uint64_t sent0 = ex->comm->sent, recv0 = ex->comm->received;
    int rc = 0;
    double density = 0;
    const CodecOps *g = ex->cfg.policy.global.ops;
    if (g->id == CODEC_DGC || g->id == CODEC_TOPK || g->id == CODEC_SBC) {
        double target = codec_param(&ex->cfg.policy.global, g->id == CODEC_DGC ? "density" : g->id == CODEC_TOPK ? "ratio" : "p");
        density = ex->cfg.memory == MEM_DGC ? dgc_warmup_density(target, ex->cfg.dgc_warmup, epoch) : target;
    }
    ex->st.density = density;
    if (!ex->started && ex->global) memcpy(ex->global, params, total * sizeof(float)); /* the server's model */
    /* the side-input density only overrides the codec when DGC warms up */
    double side_density = ex->cfg.memory == MEM_DGC ? density : 0;

    if (!ex->deltas) {
        if (ex->cfg.memory == MEM_DGC) dgc_prepare(ex, grads, params);
        /* memory: x = g (+ residual, or DGC's corrected accumulation) */
        for (int t = 0; t < ex->T; t++)
            if (ex->cfg.topology != TOPO_RING)
                memory_in(ex, t, ex->work + t_off(ex, t), grads + t_off(ex, t), 0, t_n(ex, t));
        switch (ex->cfg.topology) {
        case TOPO_ALLREDUCE: rc = avg_allreduce(ex, grads); break;
        case TOPO_ALLGATHER: rc = avg_allgather(ex, ex->work, params, opt, lr, side_density, step); break;
        case TOPO_RING: rc = avg_ring(ex, grads, params, opt, lr, step); break;
        case TOPO_PS: rc = ps_exchange(ex, params, ex->work, opt, lr, side_density, step); break;
        }
        if (!rc && ex->cfg.topology != TOPO_PS) apply_gradient(ex, params, ex->agg, opt, lr);
        ex->st.exchanged = 1;
    } else {
        /* SBC Algorithm 1 / federated averaging: local steps, then exchange
         * the weight delta since the last exchange */
        if (!ex->started) memcpy(ex->anchor, params, total * sizeof(float));
        optim_begin_step(opt);
        optim_update(opt, params, grads, lr, 0, total);
        ex->local_steps++;
        if (ex->local_steps % ex->cfg.delay == 0) {
            float *d = grads; /* the gradient is spent: reuse it for the delta */
            for (size_t i = 0; i < total; i++) d[i] = params[i] - ex->anchor[i];
            for (int t = 0; t < ex->T; t++)
                if (ex->cfg.topology != TOPO_RING)
                    memory_in(ex, t, ex->work + t_off(ex, t), d + t_off(ex, t), 0, t_n(ex, t));
            switch (ex->cfg.topology) {
            case TOPO_ALLREDUCE: rc = avg_allreduce(ex, d); break;
            case TOPO_ALLGATHER: rc = avg_allgather(ex, ex->work, ex->anchor, opt, lr, side_density, step); break;
            case TOPO_RING: rc = avg_ring(ex, d, ex->anchor, opt, lr, step); break;
            case TOPO_PS: rc = ps_exchange(ex, params, ex->work, opt, lr, side_density, step); break;
            }
            if (!rc && ex->cfg.topology != TOPO_PS) {
                for (size_t i = 0; i < total; i++) ex->anchor[i] += ex->agg[i];
                memcpy(params, ex->anchor, total * sizeof(float));
            }
            ex->st.exchanged = 1;
        }
    }
    ex->started = 1;
    ex->st.wire_sent = ex->comm->sent - sent0;
    ex->st.wire_received = ex->comm->received - recv0;
    if (ex->st.exchanged && ex->N > 1 && !rc) {
        double mine = (double)(ex->st.wire_sent > ex->st.wire_received ? ex->st.wire_sent : ex->st.wire_received);
        double worst = control_max(ex, mine);
        if (ex->cfg.bandwidth > 0) ex->st.comm_model_s = worst * 8.0 / ex->cfg.bandwidth + hops(ex) * ex->cfg.latency;
    }
    if (st) *st = ex->st;
    return rc;
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
        {"steps", &ex->local_steps, sizeof ex->local_steps},
        {"started", &ex->started, sizeof ex->started},
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
        Codec *c = slot_codec(ex, dir ? ex->dec : ex->enc, (int)t, (int)slot);
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

int exchange_ckpt_load(Exchange *ex, const Ckpt *ck, const char *prefix, char *err, size_t errlen) {
    CkptSection s[10];
    int n = exchange_ckpt_sections(ex, s, 10, "");
    for (int i = 0; i < n; i++) {
        char name[CKPT_NAME_MAX + 16];
        snprintf(name, sizeof name, "%.15s%.31s", prefix, s[i].name);
        if (!strcmp(s[i].name, "codecs")) continue;
        if (ckpt_load(ck, name, (void *)s[i].data, s[i].len, err, errlen)) return -1;
    }
    /* absent when no codec kept state at the save */
    char name[CKPT_NAME_MAX + 16];
    snprintf(name, sizeof name, "%.15scodecs", prefix);
    size_t len = 0;
    const uint8_t *p = ckpt_find(ck, name, &len);
    return p ? codecs_load(ex, p, len, err, errlen) : 0;
}
