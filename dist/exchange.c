/* The exchange (see exchange.h and docs/DIST.md). */
#include "dist/exchange_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/check.h"
#include "common/clock.h"
#include "common/rng.h"
#include "dist/bundle.h"
#include "optim/clip.h"
#ifdef HAVE_OPENMP
#include <omp.h>
#endif

/* ------------------------------------------------------------ state ----
 * struct Exchange: dist/exchange_internal.h */
static float *arena(const Exchange *ex) { return param_arena_alloc(ex->pt); }
static size_t t_off(const Exchange *ex, int t) { return ex->pt->t[t].offset; }
static size_t t_n(const Exchange *ex, int t) { return ex->pt->t[t].numel; }

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
int exchange_memory_kind(const Exchange *ex, int t) { return ex->mem[t]; }
float *exchange_residual(Exchange *ex) { return ex->resid; }
float *exchange_velocity(Exchange *ex) { return ex->vel; }
float *exchange_anchor(Exchange *ex) { return ex->anchor; }
int exchange_started(const Exchange *ex) { return ex->started; }
void exchange_set_started(Exchange *ex) { ex->started = 1; }
int exchange_grad_pull(const Exchange *ex) { return ex->grad_pull; }
const CodecSpec *exchange_pull_spec(const Exchange *ex, int t) {
    return ex->grad_pull ? &ex->pull_spec[t] : &ex->pol[t].spec;
}
uint64_t exchange_frame_seed(const Exchange *ex, long step, int t, int slot) {
    uint64_t key = ((uint64_t)(uint32_t)step << 32) ^ ((uint64_t)ex->rank << 24) ^ ((uint64_t)t << 8) ^ (uint64_t)slot;
    return rng_hash64(ex->cfg.seed ^ 0x9E3779B97F4A7C15ULL, key);
}
float *exchange_global(Exchange *ex) { return ex->global; }
float *exchange_pull_residual(Exchange *ex) { return ex->pull_resid; }
void exchange_track_layers(Exchange *ex, int on) {
    if (on && !ex->layers) ex->layers = callocCheck((size_t)ex->T, sizeof *ex->layers);
    if (!on) {
        free(ex->layers);
        ex->layers = NULL;
    }
}
const LayerStats *exchange_layer_stats(const Exchange *ex) { return ex->layers; }
void exchange_layer_stats_reset(Exchange *ex) {
    if (ex->layers) memset(ex->layers, 0, (size_t)ex->T * sizeof *ex->layers);
}
void exchange_layer_add(Exchange *ex, int t, double bytes, double values, double sent, double sq_in, double sq_err,
                        double seconds) {
    if (!ex->layers) return;
    LayerStats *ls = &ex->layers[t]; /* each tensor's own slot: no other thread writes it */
    ls->seconds += seconds;
    ls->frames += 1;
    ls->bytes += bytes;
    ls->values += values;
    ls->sq_in += sq_in;
    ls->sq_err += sq_err;
    if (sent >= 0) ls->sent = (ls->sent < 0 ? 0 : ls->sent) + sent;
    else if (ls->sent == 0) ls->sent = -1;
}
int exchange_codec_sparse(const CodecSpec *spec) {
    int id = spec->ops->id;
    return id == CODEC_TOPK || id == CODEC_DGC || id == CODEC_SBC;
}

/* TernGrad's scalar sharing (TernGrad section 3.1) for tensor t: by default
 * for terngrad only; 3LC's stoch3 baseline quantizes with each worker's own
 * scalar (3LC section 3 counts synchronizing it as a cost of TernGrad's design) */
static int shares_scalar(const Exchange *ex, int t) {
    const CodecOps *ops = ex->pol[t].spec.ops;
    if (!ops->local_scalar || ex->cfg.scalar_sharing == 0) return 0;
    return ex->cfg.scalar_sharing > 0 || ops->id == CODEC_TERNGRAD;
}

int exchange_shares_scalar(const Exchange *ex, int t) { return shares_scalar(ex, t); }

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
    if (dist_config_resolve(&ex->cfg, opt->kind, err, errlen)) goto fail;
    ex->deltas = ex->cfg.deltas;
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
    /* TernGrad's parameter server (section 3, Figure 1) sends back the average of the
     * ternary gradients, which with scalar sharing has 2N+1 levels (3.1), and every
     * worker updates its own model with it; 3LC's (and its baselines') runs the
     * optimizer on the global model and compresses the model delta (3LC 3.1). */
    ex->grad_pull = ex->cfg.topology == TOPO_PS && !ex->deltas && codec == CODEC_TERNGRAD && cfg->scalar_sharing != 0;
    if (ex->grad_pull) {
        ex->pull_spec = callocCheck((size_t)ex->T, sizeof *ex->pull_spec);
        for (int t = 0; t < ex->T; t++) {
            int tern = ex->pol[t].compressed && shares_scalar(ex, t);
            codec_spec_default(&ex->pull_spec[t], codec_find_id(tern ? CODEC_TERNSUM : CODEC_FP32));
            if (tern) codec_param_set(&ex->pull_spec[t], "n", ex->N);
        }
    } else if (ex->cfg.topology == TOPO_PS && ex->rank == 0) {
        ex->global = arena(ex);
        ex->pull_resid = arena(ex);
    }
    ex->nslots = 2 * ex->N + 2;
    ex->enc = callocCheck((size_t)ex->T * (size_t)ex->nslots, sizeof(Codec *));
    ex->dec = callocCheck((size_t)ex->T * (size_t)ex->nslots, sizeof(Codec *));
    ex->lens = callocCheck((size_t)ex->N, sizeof(size_t));
    ex->order = callocCheck((size_t)ex->T, sizeof *ex->order);
    ex->at = callocCheck((size_t)ex->T, sizeof *ex->at);
    ex->flen = callocCheck((size_t)ex->T, sizeof *ex->flen);
    ex->fp = callocCheck((size_t)ex->T, sizeof *ex->fp);
    ex->sq_at = callocCheck((size_t)ex->T + 1, sizeof *ex->sq_at);
    for (int t = 0; t < ex->T; t++) {
        size_t blk;
        ex->sq_at[t + 1] = ex->sq_at[t] + clip_blocks(t_n(ex, t), &blk);
    }
    ex->sq = callocCheck(ex->sq_at[ex->T] + 1, sizeof *ex->sq);
    /* largest first (insertion sort: stable, T is a few hundred) */
    for (int t = 0; t < ex->T; t++) {
        int k = t;
        while (k > 0 && t_n(ex, ex->order[k - 1]) < t_n(ex, t)) {
            ex->order[k] = ex->order[k - 1];
            k--;
        }
        ex->order[k] = t;
    }
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
    free(ex->pull_spec);
    free(ex->layers);
    free(ex->mem);
    free(ex->lens);
    free(ex->order);
    free(ex->at);
    free(ex->flen);
    free(ex->fp);
    free(ex->sq);
    free(ex->sq_at);
    bytebuf_free(&ex->out);
    bytebuf_free(&ex->in);
    bytebuf_free(&ex->ckpt);
    free(ex);
}

Codec *exchange_slot_codec(Exchange *ex, Codec **tab, int t, int slot) {
    Codec **c = &tab[(size_t)t * (size_t)ex->nslots + (size_t)slot];
    int pull = ex->grad_pull && slot == (tab == ex->enc ? SLOT_PULL : SLOT_PULL + 2 * ex->N);
    if (!*c) *c = codec_new(pull ? &ex->pull_spec[t] : &ex->pol[t].spec);
    return *c;
}

Codec *exchange_codec(Exchange *ex, int t, int decoder, int slot, int create) {
    Codec **tab = decoder ? ex->dec : ex->enc;
    if (t < 0 || t >= ex->T || slot < 0 || slot >= ex->nslots) return NULL;
    if (!create && !tab[(size_t)t * (size_t)ex->nslots + (size_t)slot]) return NULL;
    return exchange_slot_codec(ex, tab, t, slot);
}
#define ENC(t, s) exchange_slot_codec(ex, ex->enc, (t), (s))
#define DEC(t, s) exchange_slot_codec(ex, ex->dec, (t), (s))

void exchange_print(const Exchange *ex, FILE *fp, int table) {
    fprintf(fp, "exchange: %d workers over %s, topology %s, memory %s, exchanging %s", ex->N, ex->comm->ops->name,
            topology_name(ex->cfg.topology), memory_name(ex->cfg.memory), ex->deltas ? "weight deltas" : "gradients");
    if (ex->cfg.delay > 1) fprintf(fp, " every %d local steps", ex->cfg.delay);
    if (ex->cfg.topology == TOPO_PS)
        fprintf(fp, "; workers pull %s", ex->grad_pull ? "the averaged gradient (TernGrad: 2N+1 levels, ternsum)"
                                                       : "the server's compressed model delta");
    fprintf(fp, "\n");
    if (ex->cfg.memory == MEM_DGC)
        fprintf(fp, "dgc: momentum correction m=%g%s, local clipping %s (x N^-1/2), warm-up %g epochs\n",
                ex->cfg.dgc_momentum, ex->cfg.dgc_nesterov ? " (Nesterov)" : "",
                ex->cfg.dgc_clip > 0 ? "on" : "off", ex->cfg.dgc_warmup);
    if (table) {
        policy_print(fp, ex->pol, ex->pt);
    } else {
        char sum[600];
        policy_summary(sum, sizeof sum, ex->pol, ex->pt);
        fprintf(fp, "policy: %s (--show-policy: the table)\n", sum);
    }
}

/* ---------------------------------------------------- error feedback ---- */
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
        /* DGC eq. 7 (momentum correction): u = m u + g, v = v + u;
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

/* memory_in over a whole tensor of g (arg) into ex->work: a tensor_loop pass */
static void memory_in_tensor(Exchange *ex, int t, void *g) {
    memory_in(ex, t, ex->work + t_off(ex, t), (const float *)g + t_off(ex, t), 0, t_n(ex, t));
}

/* GCOMP levels for a model delta d added to parameters p: n bits of d are lost
 * in p + d when |p / d| > 2^n (GCOMP section 5.1 with the update written
 * as the delta itself), with the optimizer's guard bits added to n (guard=0:
 * the paper's rule). */
static void delta_levels(uint8_t *lv, const float *p, const float *d, size_t n, int guard) {
    for (size_t i = 0; i < n; i++) {
        float q = d[i] != 0.0f ? fabsf(p[i] / d[i]) : 0.0f;
        int L = 0;
        while (L < GCOMP_MAX_LEVEL && q > ldexpf(1.0f, GCOMP_BITS_PER_LEVEL * (L + 1) + guard)) L++;
        lv[i] = (uint8_t)L;
    }
}

/* side inputs for encoding x = values [lo, hi) of tensor t */
static void make_side(Exchange *ex, CodecSide *side, int t, int kind, int slot, size_t lo, size_t hi, const float *x,
                      const float *params, const Optim *opt, double lr, double density, long step) {
    memset(side, 0, sizeof *side);
    size_t off = t_off(ex, t);
    side->seed = exchange_frame_seed(ex, step, t, slot);
    side->threads = ex->cfg.codec_threads;
    side->repr = ex->repr + off + lo;
    side->mask = kind == SIDE_PULL ? NULL : ex->mask + off + lo; /* what this worker sent; not the server's pull */
    side->density = density;
    const CodecOps *ops = ex->pol[t].spec.ops;
    if (shares_scalar(ex, t) && (kind == SIDE_PUSH || ex->grad_pull)) side->scalar = &ex->scalars[t];
    if (ops->id == CODEC_GCOMP) {
        size_t n = hi - lo;
        uint8_t *lv = ex->levels + off + lo;
        int guard = opt ? opt->cfg.gcomp_guard_bits : OPT_DEFAULT_GCOMP_GUARD_BITS;
        if (!ex->deltas && kind != SIDE_PULL && ex->cfg.topology != TOPO_PS) {
            /* each worker's value (ring: partial sum) enters the averaged
             * gradient the optimizer sees as x/N */
            float *scaled = ex->tmp + off + lo;
            for (size_t i = 0; i < n; i++) scaled[i] = x[i] / (float)ex->N;
            optim_gcomp_levels_at(lv, opt, params + off + lo, scaled, lr, off + lo, n);
        } else if (!ex->deltas && kind == SIDE_PUSH) {
            /* ps push: the global model's optimizer state lives on the server;
             * use the plain-SGD metric theta / (lr g / N) for every optimizer (an
             * approximation for the others: docs/DIST.md) */
            float *d = ex->tmp + off + lo;
            for (size_t i = 0; i < n; i++) d[i] = (float)lr * x[i] / (float)ex->N;
            delta_levels(lv, params + off + lo, d, n, guard);
        } else {
            float *d = ex->tmp + off + lo;
            float scale = kind == SIDE_PULL ? 1.0f : 1.0f / (float)ex->N;
            for (size_t i = 0; i < n; i++) d[i] = x[i] * scale;
            delta_levels(lv, params + off + lo, d, n, guard);
        }
        side->levels = lv;
    }
}

/* ----------------------------------------------------- agreement ---- */
/* Control traffic (error agreement, the network model) is not counted. */
static double control_max(Exchange *ex, double v) {
    comm_allreduce_uncounted(ex->comm, &v, 1, COMM_MAX);
    return v;
}

/* The end of every exchange: all workers learn whether any failed, and all stop
 * if one did. A worker that failed sends empty bundles for the rest of the step
 * (encode_pass), which its receivers skip (decode_pass) rather than blame it
 * for a frame it never sent. An empty bundle from a worker that reports no
 * error is itself the fault, and its receivers name it. */
static int agree(Exchange *ex) {
    double flag = control_max(ex, ex->failed ? 2.0 : ex->quiet_from >= 0 ? 1.0 : 0.0);
    if (flag > 0 && !ex->failed) {
        if (flag < 2 && ex->quiet_from >= 0)
            set_err(ex, "worker %d: the bundle from worker %d has no frames, and no worker reported an error",
                    ex->rank, ex->quiet_from);
        else
            set_err(ex, "worker %d: stopped because another worker reported a bad frame", ex->rank);
    }
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
size_t exchange_ring_chunk(size_t n, int N, int c, size_t *lo) {
    size_t a = n * (size_t)c / (size_t)N, b = n * (size_t)(c + 1) / (size_t)N;
    if (lo) *lo = a;
    return b - a;
}

uint64_t exchange_ring_forward(ByteBuf *out, const ByteBuf *in, long step, const ParamTable *pt, int N, int c) {
    bytebuf_reserve(out, in->len);
    memcpy(out->p, in->p, in->len);
    out->len = in->len;
    BundleReader br;
    return bundle_open(&br, out->p, out->len, step) ? 0 : exchange_ring_raw(pt, N, c);
}

uint64_t exchange_ring_raw(const ParamTable *pt, int N, int c) {
    uint64_t raw = 0;
    for (int t = 0; t < pt->n; t++) raw += 4 * (uint64_t)exchange_ring_chunk(pt->t[t].numel, N, c, NULL);
    return raw;
}

/* ------------------------------------------------ tensor-parallel passes ----
 * The exchange's host work is per tensor (error feedback, side inputs, one frame
 * each), and a model has hundreds of tensors, most of them small: ResNet-110 has
 * 329, none over 37k values, too small for the codecs' own threads. So each pass
 * runs over the tensors in parallel: the large ones first, one at a time with every
 * thread inside (the codecs' own partitions), then the rest one tensor per thread.
 * Each tensor has its own codec instances, residuals and output range, and frames
 * do not depend on the threads, so the results are those of a sequential loop;
 * errors are reported for the first failing tensor in tensor order. */
typedef void (*TensorFn)(Exchange *ex, int t, void *arg);

static void tensor_loop(Exchange *ex, TensorFn fn, void *arg) {
    int nth = 1;
#ifdef HAVE_OPENMP
    nth = ex->cfg.codec_threads > 0 ? ex->cfg.codec_threads : omp_get_max_threads();
#endif
    /* large: at least a thread's share of the values, and enough to split */
    size_t share = ex->pt->total / (size_t)(nth > 0 ? nth : 1);
    int k = 0;
    while (k < ex->T && nth > 1 && t_n(ex, ex->order[k]) >= share && t_n(ex, ex->order[k]) >= ((size_t)1 << 17))
        fn(ex, ex->order[k++], arg);
    int first = k;
#ifdef HAVE_OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(nth) if (nth > 1 && ex->T - first > 1)
#endif
    for (int i = first; i < ex->T; i++) fn(ex, ex->order[i], arg);
}

/* elementwise loops over whole arenas */
#ifdef HAVE_OPENMP
#define ARENA_PRAGMA_(x) _Pragma(#x)
#define ARENA_PFOR(n) ARENA_PRAGMA_(omp parallel for schedule(static) if ((n) >= ((size_t)1 << 16)))
#else
#define ARENA_PFOR(n)
#endif

static void scale_arena(float *a, size_t n, float s) {
    ARENA_PFOR(n)
    for (size_t i = 0; i < n; i++) a[i] *= s;
}

/* a += b */
static void add_arena(float *a, const float *b, size_t n) {
    ARENA_PFOR(n)
    for (size_t i = 0; i < n; i++) a[i] += b[i];
}

/* d = a - b */
static void sub_arena(float *d, const float *a, const float *b, size_t n) {
    ARENA_PFOR(n)
    for (size_t i = 0; i < n; i++) d[i] = a[i] - b[i];
}

/* ---- encoding: one bundle of frames, one per tensor (or per tensor chunk) ----
 * Each tensor's frame is encoded at its own place in the bundle buffer (offsets
 * from the worst-case frame sizes), then the frames are moved together in
 * tensor order. */
#define NO_ENTRY INT64_MAX

typedef struct {
    int kind;           /* SIDE_PUSH, SIDE_PULL, SIDE_RING */
    int chunk;          /* ring: the chunk of every tensor that is encoded; -1: whole tensors */
    int slot;           /* encoder slot */
    int fold;           /* ring allgather phase: x takes what the frame represents */
    float *x;           /* push, pull: the values to encode; ring: the running sums */
    const float *params;
    const Optim *opt;
    double lr, density;
    long step;
    ByteBuf *out;
} EncPass;

static void pass_range(const Exchange *ex, int t, int chunk, size_t *lo, size_t *hi) {
    size_t n = t_n(ex, t);
    *lo = 0;
    *hi = chunk < 0 ? n : exchange_ring_chunk(n, ex->N, chunk, lo);
    *hi += *lo;
}

static void enc_tensor(Exchange *ex, int t, void *arg) {
    const EncPass *p = arg;
    if (ex->flen[t] == NO_ENTRY) return;
    size_t off = t_off(ex, t), lo, hi;
    pass_range(ex, t, p->chunk, &lo, &hi);
    float *v = p->x + off;
    if (p->kind == SIDE_RING) {
        v = ex->work + off;
        memory_in(ex, t, v, p->x + off, lo, hi);
    } else if (p->kind == SIDE_PULL && !ex->grad_pull && ex->mem[t] != MEM_NONE) {
        /* the model delta plus the server's error accumulation (3LC section 3.1) */
        const float *pr = ex->pull_resid + off;
        for (size_t i = lo; i < hi; i++) v[i] += pr[i];
    }
    CodecSide side;
    make_side(ex, &side, t, p->kind, p->slot, lo, hi, v + lo, p->params, p->opt, p->lr, p->density, p->step);
    Codec *c = ENC(t, p->slot); /* created before the pass */
    uint8_t *e = p->out->p + ex->at[t];
    double t0 = ex->layers ? mono_seconds() : 0;
    ex->flen[t] = codec_encode(c, e + ENTRY_HDR, codec_max_frame(c, hi - lo), v + lo, hi - lo, &side);
    if (ex->flen[t] < 0) return;
    if (ex->layers && p->kind != SIDE_PULL) {
        double seconds = mono_seconds() - t0;
        const float *repr = ex->repr + off;
        double in = 0, err = 0, sent = -1;
        for (size_t i = lo; i < hi; i++) {
            double d = (double)v[i] - (double)repr[i];
            in += (double)v[i] * v[i];
            err += d * d;
        }
        if (exchange_codec_sparse(&c->spec)) {
            size_t k = 0;
            for (size_t i = 0; i < hi - lo; i++) k += side.mask[i] != 0;
            sent = (double)k;
        }
        exchange_layer_add(ex, t, (double)(ENTRY_HDR + ex->flen[t]), (double)(hi - lo), sent, in, err, seconds);
    }
    if (p->kind == SIDE_PULL) {
        if (!ex->grad_pull && ex->mem[t] != MEM_NONE) {
            const float *repr = ex->repr + off;
            float *pr = ex->pull_resid + off;
            for (size_t i = lo; i < hi; i++) pr[i] = v[i] - repr[i];
        }
    } else {
        memory_out(ex, t, v, lo, hi);
    }
    if (p->fold) memcpy(p->x + off + lo, ex->repr + off + lo, (hi - lo) * sizeof(float));
}

/* Encodes the pass into p->out as one bundle; 0, or -1 with the error set.
 * Tensors with nothing in the chunk have no entry. */
static int encode_pass(Exchange *ex, const EncPass *p) {
    ByteBuf *b = p->out;
    bundle_begin(b, p->step);
    if (ex->failed) return -1; /* an empty bundle keeps the others going; agree() stops them */
    size_t cap = BUNDLE_HDR;
    for (int t = 0; t < ex->T; t++) {
        size_t lo, hi;
        pass_range(ex, t, p->chunk, &lo, &hi);
        ex->flen[t] = hi == lo ? NO_ENTRY : 0;
        if (hi == lo) continue;
        ex->at[t] = cap;
        cap += ENTRY_HDR + codec_max_frame(ENC(t, p->slot), hi - lo);
    }
    bytebuf_reserve(b, cap);
    double t0 = mono_seconds();
    tensor_loop(ex, enc_tensor, (void *)p);
    ex->st.codec_s += mono_seconds() - t0;
    uint32_t count = 0;
    for (int t = 0; t < ex->T; t++) {
        if (ex->flen[t] == NO_ENTRY) continue;
        if (ex->flen[t] < 0) {
            /* keep taking part in the collectives; agree() stops every rank */
            if (p->kind == SIDE_PULL) /* the server's */
                set_err(ex, "server: encoding the pull of tensor %s failed: %s", ex->pt->t[t].name,
                        gc_strerror((int)ex->flen[t]));
            else
                set_err(ex, "worker %d: encoding tensor %s failed: %s", ex->rank, ex->pt->t[t].name,
                        gc_strerror((int)ex->flen[t]));
            break;
        }
        size_t lo, hi, len = (size_t)ex->flen[t];
        pass_range(ex, t, p->chunk, &lo, &hi);
        uint8_t *e = b->p + b->len;
        memmove(e + ENTRY_HDR, b->p + ex->at[t] + ENTRY_HDR, len); /* never to the right */
        put_u32(e, (uint32_t)t);
        put_u32(e + 4, (uint32_t)(p->chunk < 0 ? 0 : p->chunk));
        put_u32(e + 8, (uint32_t)len);
        b->len += ENTRY_HDR + len;
        count++;
        if (p->kind == SIDE_PULL) continue; /* the server's pull is everyone's down traffic, not its up */
        ex->st.raw_up += 4 * (uint64_t)(hi - lo);
        if (ex->pol[t].compressed) {
            ex->st.comp_raw += 4 * (uint64_t)(hi - lo);
            ex->st.comp_bytes += ENTRY_HDR + (uint64_t)len;
            if (ex->pol[t].spec.ops->id == CODEC_GCOMP) gcomp_frame_parts(&ex->st.gcomp, e + ENTRY_HDR, len);
        }
    }
    put_u32(b->p + 12, count);
    return ex->failed ? -1 : 0;
}

/* ---- decoding: a bundle from peer src, one frame per tensor (or chunk) ---- */
typedef struct {
    float *dst;
    int chunk; /* -1: whole tensors */
    int slot;  /* decoder slot */
    int acc;   /* dst += decode (else dst = decode) */
} DecPass;

static void dec_tensor(Exchange *ex, int t, void *arg) {
    const DecPass *p = arg;
    if (!ex->fp[t]) return; /* no entry, a bad one, or not reached */
    size_t lo, hi;
    pass_range(ex, t, p->chunk, &lo, &hi);
    float *out = p->dst + t_off(ex, t) + lo;
    Codec *c = DEC(t, p->slot);
    size_t len = (size_t)ex->flen[t];
    int rc = p->acc ? codec_decode_acc(c, out, hi - lo, 1.0f, ex->fp[t], len) : codec_decode(c, out, hi - lo, ex->fp[t], len);
    if (rc) ex->flen[t] = rc;
}

/* Decodes the bundle (bytes, len) from worker src into p->dst. pull: the server's
 * pull (for the messages). Sets the error on a bad bundle or frame. */
static void decode_pass(Exchange *ex, const DecPass *p, const uint8_t *bytes, size_t len, int src, long step, int pull) {
    ex->dec_comp = 0;
    BundleReader br;
    int rc = bundle_open(&br, bytes, len, step);
    if (rc) {
        if (pull) set_err(ex, "worker %d: pull from the server is not a valid frame bundle: %s", ex->rank, gc_strerror(rc));
        else set_err(ex, "worker %d: message from worker %d is not a valid frame bundle: %s", ex->rank, src, gc_strerror(rc));
        return;
    }
    /* no entries where frames were due: the sender failed this step and says so
     * itself (encode_pass); skipped here, agree() stops every worker */
    int due = 0;
    for (int t = 0; t < ex->T && !due; t++) {
        size_t lo, hi;
        pass_range(ex, t, p->chunk, &lo, &hi);
        due = hi > lo;
    }
    if (due && br.left == 0 && len == BUNDLE_HDR) {
        if (ex->quiet_from < 0) ex->quiet_from = pull ? 0 : src;
        return;
    }
    /* index the entries (and create the decoders) in order; a bad entry ends it */
    int bad = -1;
    for (int t = 0; t < ex->T; t++) {
        size_t lo, hi, flen = 0;
        pass_range(ex, t, p->chunk, &lo, &hi);
        ex->fp[t] = NULL;
        ex->flen[t] = 0;
        if (hi == lo || bad >= 0) continue;
        rc = bundle_next(&br, t, p->chunk < 0 ? 0 : p->chunk, &ex->fp[t], &flen);
        if (rc) {
            bad = t;
            ex->flen[t] = rc;
            continue;
        }
        ex->flen[t] = (int64_t)flen;
        if (ex->pol[t].compressed) ex->dec_comp += ENTRY_HDR + (uint64_t)flen;
        DEC(t, p->slot);
    }
    double t0 = mono_seconds();
    tensor_loop(ex, dec_tensor, (void *)p);
    ex->st.codec_s += mono_seconds() - t0;
    for (int t = 0; t < ex->T; t++)
        if (ex->flen[t] < 0) {
            report_frame_error(ex, (int)ex->flen[t], t, p->chunk, pull ? 0 : src, pull ? "pulled" : "bad");
            return;
        }
    rc = bundle_close(&br);
    if (rc) {
        if (pull) set_err(ex, "worker %d: pull bundle: %s", ex->rank, gc_strerror(rc));
        else set_err(ex, "worker %d: bundle from worker %d: %s", ex->rank, src, gc_strerror(rc));
    }
}

/* TernGrad's scalar of tensor t of x (arg): a tensor_loop pass */
static void scalar_tensor(Exchange *ex, int t, void *x) {
    if (ex->pol[t].spec.ops->local_scalar)
        ex->scalars[t] = codec_local_scalar(ENC(t, SLOT_PUSH), (const float *)x + t_off(ex, t), t_n(ex, t));
}

/* encode every tensor of x (= memory applied) into ex->out as the push bundle */
static void encode_all(Exchange *ex, float *x, const float *params, const Optim *opt, double lr, double density,
                      long step) {
    /* TernGrad scalar sharing (TernGrad section 3.1): the max over workers
     * of each tensor's scalar, after clipping, so all workers share it */
    if (ex->cfg.scalar_sharing != 0 && ex->cfg.topology != TOPO_RING) {
        int any = 0;
        for (int t = 0; t < ex->T; t++)
            if (shares_scalar(ex, t)) {
                ENC(t, SLOT_PUSH); /* created here, in order, not in the pass */
                any = 1;
            }
        if (any) {
            tensor_loop(ex, scalar_tensor, x);
            comm_allreduce_f32(ex->comm, ex->scalars, (size_t)ex->T, COMM_MAX);
        }
    }
    EncPass p = {SIDE_PUSH, -1, SLOT_PUSH, 0, x, params, opt, lr, density, step, &ex->out};
    encode_pass(ex, &p);
    ex->st.up_bytes += ex->out.len;
}

/* agg = average over workers of decode(encode(x)); x is the memory-applied input */
/* ex->agg = the average of the N bundles gathered in ex->in (lengths ex->lens):
 * the first decoded over agg's old contents, the others added (no zero fill
 * first; a bundle that fails leaves agg unused, as agree() then stops the step).
 * down: count the other workers' bundles as received. */
static void average_bundles(Exchange *ex, long step, int down) {
    size_t at = 0;
    for (int src = 0; src < ex->N; src++) {
        DecPass dp = {ex->agg, -1, src, src > 0};
        ex->dec_comp = 0;
        if (!ex->failed) decode_pass(ex, &dp, ex->in.p + at, ex->lens[src], src, step, 0);
        if (down && src != ex->rank) {
            ex->st.down_bytes += ex->lens[src];
            ex->st.comp_down += ex->dec_comp;
        }
        at += ex->lens[src];
    }
    scale_arena(ex->agg, ex->pt->total, 1.0f / (float)ex->N);
}

static int avg_allgather(Exchange *ex, float *x, const float *params, const Optim *opt, double lr, double density,
                         long step) {
    encode_all(ex, x, params, opt, lr, density, step);
    comm_allgatherv(ex->comm, &ex->in, ex->lens, ex->out.p, ex->out.len);
    average_bundles(ex, step, 1);
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

/* Ring allreduce with the codec at every hop (GCOMP section 6.2, Figure 8).
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
            EncPass p = {SIDE_RING, own, N + own, 1, acc, params, opt, lr, 0, step, &ex->out};
            encode_pass(ex, &p);
        }
        for (int s = 0; s < N - 1; s++) {
            int send_c = phase == 0 ? (r - s + 2 * N) % N : 0;
            int recv_c = phase == 0 ? (r - s - 1 + 2 * N) % N : (r - s + 2 * N) % N;
            if (phase == 0) {
                EncPass p = {SIDE_RING, send_c, send_c, 0, acc, params, opt, lr, 0, step, &ex->out};
                encode_pass(ex, &p);
            } else if (s > 0 && ex->failed) {
                bundle_begin(&ex->out, step); /* not a frame it could not read: an empty bundle, as encode_pass */
            } else if (s > 0) { /* forward what arrived last hop unchanged, its values counted as sent */
                ex->st.raw_up += exchange_ring_forward(&ex->out, &ex->in, step, ex->pt, N, (r - s + 1 + 2 * N) % N);
            }
            ex->st.up_bytes += ex->out.len;
            comm_sendrecv(ex->comm, &ex->in, left, ex->out.p, ex->out.len, right);
            ex->st.down_bytes += ex->in.len;
            if (ex->failed) continue; /* keep the ring moving; agree() reports */
            /* the allgather phase's frames come from chunk recv_c's owner, forwarded unchanged */
            int origin = phase == 0 ? left : (recv_c + N - 1) % N;
            DecPass dp = {acc, recv_c, phase == 0 ? recv_c : N + recv_c, phase == 0};
            decode_pass(ex, &dp, ex->in.p, ex->in.len, origin, step, 0);
            ex->st.comp_down += ex->dec_comp;
        }
    }
    scale_arena(acc, ex->pt->total, 1.0f / (float)N);
    return agree(ex);
}

/* ------------------------------------------------------- updates ---- */
/* the optimizer on params from the gradient g (the average, or with weight
 * deltas this worker's own; --clip'ed first, in place): exchange_optimize, and
 * the parameter server's step on its global model */
static void apply_gradient(Exchange *ex, float *params, float *g, Optim *opt, double lr) {
    if (ex->cfg.clip_norm > 0 && ex->cfg.memory != MEM_DGC) clip_grad_norm(g, ex->pt->total, ex->cfg.clip_norm, 2.0);
    optim_begin_step(opt);
    int t = 0;
    while (t < ex->T) {
        /* runs of tensors with the same treatment, one call each */
        int dgc = ex->mem[t] == MEM_DGC;
        int u = t;
        while (u + 1 < ex->T && (ex->mem[u + 1] == MEM_DGC) == dgc) u++;
        size_t lo = t_off(ex, t), hi = t_off(ex, u) + t_n(ex, u);
        if (dgc) optim_sgd_plain(params + lo, g + lo, lr, hi - lo); /* DGC: global step is plain SGD */
        else optim_update(opt, params, g, lr, lo, hi - lo);
        t = u + 1;
    }
}

/* DGC: clip this worker's whole gradient locally (DGC section 3.2 "Local
 * Gradient Clipping", appendix C: threshold scaled by N^-1/2), then fold weight
 * decay into the gradient of the DGC tensors so that it takes part in the
 * momentum correction. The clip acts on the gradient G, as Algorithm 3 (lines
 * 8-9) does before U = mU + G, and as the trainer clips before the optimizer's
 * weight decay in the other runs; the paper does not mention weight decay. The
 * clip covers the tensors sent uncompressed too (biases, small tensors): the
 * trainer leaves clipping to this function under DGC's memory, and an unclipped
 * bias of a recurrent network diverges. */
/* tensor t's sums of squares, a block at a time (the blocks depend on the size only,
 * so a device sums the same values in the same order, one thread a block) */
static void dgc_sq_tensor(Exchange *ex, int t, void *grads) {
    const float *g = (const float *)grads + t_off(ex, t);
    size_t n = t_n(ex, t), blk, nblk = clip_blocks(n, &blk);
    for (size_t b = 0; b < nblk; b++) {
        double sq = 0;
        for (size_t i = b * blk; i < n && i < (b + 1) * blk; i++) sq += (double)g[i] * g[i];
        ex->sq[ex->sq_at[t] + b] = sq;
    }
}

typedef struct {
    float *grads;
    const float *params;
} DgcPass;

static void dgc_decay_tensor(Exchange *ex, int t, void *arg) {
    const DgcPass *p = arg;
    size_t off = t_off(ex, t);
    if (ex->mem[t] == MEM_DGC) optim_add_weight_decay(p->grads + off, p->params + off, ex->cfg.weight_decay, t_n(ex, t));
}

static void dgc_prepare(Exchange *ex, float *grads, const float *params) {
    if (ex->cfg.dgc_clip > 0) {
        tensor_loop(ex, dgc_sq_tensor, grads);
        double sq = 0; /* the blocks' sums added in tensor and block order: the same on any thread count */
        for (size_t k = 0; k < ex->sq_at[ex->T]; k++) sq += ex->sq[k];
        double thr = ex->cfg.dgc_clip / sqrt((double)ex->N), norm = sqrt(sq);
        if (norm > thr) scale_arena(grads, ex->pt->total, (float)(thr / (norm + 1e-6))); /* as torch.nn.utils.clip_grad_norm_ */
    }
    if (ex->cfg.weight_decay != 0) {
        DgcPass p = {grads, params};
        tensor_loop(ex, dgc_decay_tensor, &p);
    }
}

/* ps: push frames to the server, which averages them. Model-delta pulls (3LC
 * section 3.1, and its baselines): the server updates the global model (its
 * optimizer, part of the protocol), then compresses the model delta once with
 * its error accumulation and every worker pulls it. Gradient pulls (TernGrad
 * section 3, Figure 1): the server sends the average itself (ternsum: 2N+1
 * levels with the shared scalars, losslessly) into every worker's ex->agg, on
 * which each runs its optimizer (parameter localization: exchange_optimize). */
static int ps_exchange(Exchange *ex, float *params, float *x, Optim *opt, double lr, double density, long step) {
    encode_all(ex, x, params, opt, lr, density, step);
    comm_gatherv(ex->comm, &ex->in, ex->lens, ex->out.p, ex->out.len, 0);
    int server = ex->rank == 0;
    size_t total = ex->pt->total;
    if (server) average_bundles(ex, step, 0);
    int rc = agree(ex);
    if (rc) return rc;
    if (ex->grad_pull) {
        if (server) {
            EncPass p = {SIDE_PULL, -1, SLOT_PULL, 0, ex->agg, params, opt, lr, 0, step, &ex->out};
            encode_pass(ex, &p);
                }
        rc = agree(ex);
        if (rc) return rc;
        comm_bcast(ex->comm, &ex->out, 0);
        ex->st.down_bytes += ex->out.len;
        DecPass dp = {ex->agg, -1, SLOT_PULL + 2 * ex->N, 0};
        decode_pass(ex, &dp, ex->out.p, ex->out.len, 0, step, 1);
        ex->st.comp_down += ex->dec_comp;
        return agree(ex);
    }
    if (server) {
        float *before = ex->tmp;
        memcpy(before, ex->global, total * sizeof(float));
        if (ex->deltas) add_arena(ex->global, ex->agg, total);
        else apply_gradient(ex, ex->global, ex->agg, opt, lr);
        /* the model delta plus the server's error accumulation, encoded once */
        float *d = ex->agg;
        sub_arena(d, ex->global, before, total);
        EncPass p = {SIDE_PULL, -1, SLOT_PULL, 0, d, ex->global, opt, lr, 0, step, &ex->out};
        encode_pass(ex, &p);
        }
    rc = agree(ex);
    if (rc) return rc;
    comm_bcast(ex->comm, &ex->out, 0);
    ex->st.down_bytes += ex->out.len;
    /* every worker applies the same pulled delta (to the anchor in delta mode) */
    DecPass dp = {ex->deltas ? ex->anchor : params, -1, SLOT_PULL + 2 * ex->N, 1};
    decode_pass(ex, &dp, ex->out.p, ex->out.len, 0, step, 1);
    ex->st.comp_down += ex->dec_comp;
    if (ex->deltas && !ex->failed) memcpy(params, ex->anchor, total * sizeof(float));
    return agree(ex);
}

/* SBC section II: "We adopt momentum masking" (Lin et al.'s momentum factor
 * masking, DGC section 3.3): after an exchange, the local optimizer's momentum
 * is zeroed where this worker's SBC frames sent a value (ex->mask, written by
 * the push encoding) */
static void sbc_mask_momentum(Exchange *ex, Optim *opt) {
    for (int t = 0; t < ex->T; t++)
        if (ex->pol[t].spec.ops->id == CODEC_SBC) {
            size_t off = t_off(ex, t);
            optim_mask_momentum(opt, ex->mask + off, off, t_n(ex, t));
        }
}

static int hops(const Exchange *ex) {
    switch (ex->cfg.topology) {
    case TOPO_ALLGATHER: return 1;
    case TOPO_PS: return 2;
    default: return 2 * (ex->N - 1);
    }
}

/* the step's statistics: the wire counters since exchange_step began and, after an
 * exchange, the network model (a collective: every worker calls it alike) */
static int finish(Exchange *ex, int rc, ExchangeStats *st) {
    ex->st.wire_sent = ex->comm->sent - ex->sent0;
    ex->st.wire_received = ex->comm->received - ex->recv0;
    if (ex->st.exchanged && ex->N > 1 && !rc) {
        double mine = (double)(ex->st.wire_sent > ex->st.wire_received ? ex->st.wire_sent : ex->st.wire_received);
        double worst = control_max(ex, mine);
        ex->st.wire_max = (uint64_t)worst;
        ex->st.hops = hops(ex);
        if (ex->cfg.bandwidth > 0) ex->st.comm_model_s = worst * 8.0 / ex->cfg.bandwidth + hops(ex) * ex->cfg.latency;
    }
    if (st) *st = ex->st;
    return rc;
}

int exchange_step(Exchange *ex, float *params, float *grads, Optim *opt, double lr, double epoch, long step,
                  ExchangeStats *st) {
    memset(&ex->st, 0, sizeof ex->st);
    ex->failed = 0;
    ex->quiet_from = -1;
    ex->err[0] = 0;
    size_t total = ex->pt->total;
    ex->sent0 = ex->comm->sent;
    ex->recv0 = ex->comm->received;
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
    ex->side_density = ex->cfg.memory == MEM_DGC ? density : 0;

    if (!ex->deltas) {
        if (ex->cfg.memory == MEM_DGC) dgc_prepare(ex, grads, params);
        /* memory: x = g (+ residual, or DGC's corrected accumulation); the ring
         * applies it per chunk */
        if (ex->cfg.topology != TOPO_RING && ex->cfg.topology != TOPO_ALLREDUCE) /* allreduce: fp32, no memory */
            tensor_loop(ex, memory_in_tensor, grads);
        switch (ex->cfg.topology) {
        case TOPO_ALLREDUCE: rc = avg_allreduce(ex, grads); break;
        case TOPO_ALLGATHER: rc = avg_allgather(ex, ex->work, params, opt, lr, ex->side_density, step); break;
        case TOPO_RING: rc = avg_ring(ex, grads, params, opt, lr, step); break;
        case TOPO_PS: rc = ps_exchange(ex, params, ex->work, opt, lr, ex->side_density, step); break;
        }
        ex->st.exchanged = 1;
    } else if (!ex->started) {
        memcpy(ex->anchor, params, total * sizeof(float)); /* weight deltas: the model before the first local step */
    }
    ex->started = 1;
    return finish(ex, rc, st);
}

int exchange_model_pulled(const Exchange *ex) { return ex->cfg.topology == TOPO_PS && !ex->grad_pull && !ex->deltas; }

void exchange_optimize(Exchange *ex, float *params, float *grads, Optim *opt, double lr) {
    if (exchange_model_pulled(ex)) return; /* the pull was the new model: the server's optimizer made it */
    apply_gradient(ex, params, ex->deltas ? grads : ex->agg, opt, lr);
}

int exchange_deltas(Exchange *ex, float *params, float *grads, Optim *opt, long step, ExchangeStats *st) {
    /* the exchange after every delay-th step follows from the global step,
     * the same on every worker (no counter of its own that could differ) */
    if (!ex->deltas || (step + 1) % ex->cfg.delay != 0) return 0;
    size_t total = ex->pt->total;
    int rc = 0;
    double lr = 0; /* the side inputs of weight deltas use no learning rate */
    float *d = grads; /* the gradient is spent: reuse it for the delta */
    sub_arena(d, params, ex->anchor, total);
    if (ex->cfg.topology != TOPO_RING && ex->cfg.topology != TOPO_ALLREDUCE) tensor_loop(ex, memory_in_tensor, d);
    switch (ex->cfg.topology) {
    case TOPO_ALLREDUCE: rc = avg_allreduce(ex, d); break;
    case TOPO_ALLGATHER: rc = avg_allgather(ex, ex->work, ex->anchor, opt, lr, ex->side_density, step); break;
    case TOPO_RING: rc = avg_ring(ex, d, ex->anchor, opt, lr, step); break;
    case TOPO_PS: rc = ps_exchange(ex, params, ex->work, opt, lr, ex->side_density, step); break;
    }
    if (!rc && ex->cfg.topology != TOPO_PS) {
        add_arena(ex->anchor, ex->agg, total);
        memcpy(params, ex->anchor, total * sizeof(float));
    }
    if (!rc) sbc_mask_momentum(ex, opt);
    ex->st.exchanged = 1;
    return finish(ex, rc, st);
}
