/* The device-resident exchange (see dist/exchange_cuda.h): the allreduce and
 * allgather steps of dist/exchange.c (memory_in, encode_pass, average_bundles,
 * avg_allreduce, apply_gradient) on device arenas, with the GPU codecs. */
#include "dist/exchange_cuda.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef HAVE_CUDA

#include <cuda_runtime.h>

#include "common/check.h"
#include "common/clock.h"
#include "common/cuda_check.h"
#include "common/errors.h"
#include "common/rng.h"
#include "compress/codec_cuda.h"
#include "dist/bundle.h"
#include "dist/comm_nccl.h"
#include "nn/model_cuda.h"
#include "optim/optim_cuda.h"

struct ExchangeCuda {
    DistConfig cfg;
    Comm *comm;
    const ParamTable *pt;
    const TensorPolicy *pol;
    int N, rank, T;
    int *mem;           /* [T] memory kind (exchange_memory_kind) */
    float *h_resid;     /* the host exchange's residual arena (checkpoints), or NULL */
    float *h_vel;       /* the host exchange's DGC momentum arena (checkpoints), or NULL */
    float *d_agg;       /* [total] device: the average gradient */
    /* allgather */
    float *d_work;      /* [total] device: x = g (+ residual) */
    float *d_resid;     /* [total] device: the residual (DGC: v; NULL without memory) */
    float *d_vel;       /* [total] device: DGC's momentum u (NULL without DGC's memory) */
    float *d_repr;      /* [total] device: what each frame represents */
    uint8_t *d_mask;    /* [total] device: the values a sparsifier sent */
    CodecCuda **enc, **dec; /* [T] each tensor's encoder and decoder */
    ByteBuf out, in;    /* this worker's bundle; everyone's */
    size_t *at;         /* [T] staged entry offsets in out */
    int64_t *flen;      /* [T] frame lengths, or negative GcError */
    /* allreduce */
    ByteBuf ptrs;       /* the published gradient addresses, rank order */
    size_t *lens;       /* [N] */
    ExchangeStats st;
    int failed;
    char err[512];
};

static size_t t_off(const ExchangeCuda *x, int t) { return x->pt->t[t].offset; }
static size_t t_n(const ExchangeCuda *x, int t) { return x->pt->t[t].numel; }

/* the first error of a step wins (exchange.c's set_err) */
static void set_err(ExchangeCuda *x, const char *fmt, ...) {
    if (x->failed) return;
    x->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->err, sizeof x->err, fmt, ap);
    va_end(ap);
}

const char *exchange_cuda_error(const ExchangeCuda *x) { return x->err; }

const char *exchange_cuda_unsupported(const Exchange *ex, const ParamTable *pt, const Comm *comm) {
    const DistConfig *cfg = exchange_config(ex);
    if (cfg->topology != TOPO_ALLREDUCE && cfg->topology != TOPO_ALLGATHER)
        return cfg->topology == TOPO_PS ? "the parameter server topology" : "the ring topology";
    if (cfg->deltas || cfg->delay != 1) return "weight-delta exchange (--delay, sbc)";
    if (cfg->memory == MEM_DGC && cfg->dgc_clip > 0) return "DGC's local gradient clipping";
    if (cfg->clip_norm > 0) return "--clip";
    /* allgather moves host frames over any Comm; allreduce needs the device arenas reachable */
    if (cfg->topology == TOPO_ALLREDUCE && strcmp(comm->ops->name, "local") && strcmp(comm->ops->name, "nccl"))
        return "fp32's allreduce over this backend (local or nccl only)";
    const TensorPolicy *pol = exchange_policy(ex);
    for (int t = 0; t < pt->n; t++) {
        const CodecOps *ops = pol[t].spec.ops;
        if (ops->state_save) return "a codec that keeps state between steps (gcomp)";
        if (ops->local_scalar) return "a codec with a shared scalar (terngrad, stoch3)";
    }
    return NULL;
}

ExchangeCuda *exchange_cuda_new(Exchange *ex, Comm *comm, const ParamTable *pt, char *err, size_t errlen) {
    const char *why = exchange_cuda_unsupported(ex, pt, comm);
    if (why) {
        snprintf(err, errlen, "the step cannot stay on the GPU: %s", why);
        return NULL;
    }
    ExchangeCuda *x = callocCheck(1, sizeof *x);
    x->cfg = *exchange_config(ex);
    x->comm = comm;
    x->pt = pt;
    x->pol = exchange_policy(ex);
    x->N = comm->size;
    x->rank = comm->rank;
    x->T = pt->n;
    x->lens = callocCheck((size_t)x->N, sizeof *x->lens);
    x->mem = callocCheck((size_t)x->T + 1, sizeof *x->mem);
    for (int t = 0; t < x->T; t++) x->mem[t] = exchange_memory_kind(ex, t);
    x->h_resid = exchange_residual(ex);
    x->h_vel = exchange_velocity(ex);
    size_t bytes = (pt->total ? pt->total : 1) * sizeof(float);
    int bad = cuda_dev_alloc((void **)&x->d_agg, bytes, "the average gradient");
    if (!bad && x->cfg.topology == TOPO_ALLGATHER) {
        bad = cuda_dev_alloc((void **)&x->d_work, bytes, "the exchange's input") ||
              cuda_dev_alloc((void **)&x->d_repr, bytes, "what the frames represent") ||
              cuda_dev_alloc((void **)&x->d_mask, bytes / sizeof(float), "the sparsifiers' masks") ||
              (x->h_resid && cuda_dev_alloc((void **)&x->d_resid, bytes, "the residual")) ||
              (x->h_vel && cuda_dev_alloc((void **)&x->d_vel, bytes, "DGC's momentum"));
        x->enc = callocCheck((size_t)x->T + 1, sizeof *x->enc);
        x->dec = callocCheck((size_t)x->T + 1, sizeof *x->dec);
        for (int t = 0; t < x->T && !bad; t++)
            bad = !(x->enc[t] = codec_cuda_new(&x->pol[t].spec)) || !(x->dec[t] = codec_cuda_new(&x->pol[t].spec));
        x->at = callocCheck((size_t)x->T + 1, sizeof *x->at);
        x->flen = callocCheck((size_t)x->T + 1, sizeof *x->flen);
    }
    if (bad) {
        snprintf(err, errlen, "cannot set up the device exchange (device memory or GPU codecs)");
        exchange_cuda_free(x);
        return NULL;
    }
    exchange_cuda_upload(x); /* the residual (zeros, or a checkpoint's) */
    return x;
}

void exchange_cuda_free(ExchangeCuda *x) {
    if (!x) return;
    float *bufs[] = {x->d_agg, x->d_work, x->d_resid, x->d_vel, x->d_repr};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) cudaCheck(cudaFree(bufs[i]));
    if (x->d_mask) cudaCheck(cudaFree(x->d_mask));
    for (int t = 0; t < x->T && x->enc; t++) {
        codec_cuda_free(x->enc[t]);
        codec_cuda_free(x->dec[t]);
    }
    free(x->enc);
    free(x->dec);
    free(x->at);
    free(x->flen);
    free(x->mem);
    bytebuf_free(&x->out);
    bytebuf_free(&x->in);
    bytebuf_free(&x->ptrs);
    free(x->lens);
    free(x);
}

void exchange_cuda_download(ExchangeCuda *x) {
    size_t b = x->pt->total * sizeof(float);
    if (x->d_resid) cudaCheck(cudaMemcpy(x->h_resid, x->d_resid, b, cudaMemcpyDeviceToHost));
    if (x->d_vel) cudaCheck(cudaMemcpy(x->h_vel, x->d_vel, b, cudaMemcpyDeviceToHost));
}

void exchange_cuda_upload(ExchangeCuda *x) {
    size_t b = x->pt->total * sizeof(float);
    if (x->d_resid) cudaCheck(cudaMemcpy(x->d_resid, x->h_resid, b, cudaMemcpyHostToDevice));
    if (x->d_vel) cudaCheck(cudaMemcpy(x->d_vel, x->h_vel, b, cudaMemcpyHostToDevice));
}

/* an allreduce-max of v that is not counted as traffic (exchange.c's control_max) */
static double control_max(Comm *c, double v) {
    comm_allreduce_uncounted(c, &v, 1, COMM_MAX);
    return v;
}

/* every worker stops when one found a bad frame (exchange.c's agree) */
static int agree(ExchangeCuda *x) {
    double flag = control_max(x->comm, x->failed ? 1.0 : 0.0);
    if (flag > 0 && !x->failed) set_err(x, "worker %d: stopped because another worker reported a bad frame", x->rank);
    return flag > 0 ? -GC_ERR_CORRUPT : 0;
}

/* ---- allreduce: d_agg = (g0 + g1 + ... + g(N-1)) * (1/N). Local workers: every
 * worker's gradient arena read in place on the shared device, summed in rank order;
 * nccl: ncclAllReduce on a device copy (NCCL's order, as the host path's staging) ---- */
static void avg_allreduce(ExchangeCuda *x, const float *d_grads) {
    size_t n = x->pt->total, bytes = n * sizeof(float);
    Comm *c = x->comm;
    /* exchange.c's avg_allreduce accounting */
    uint64_t v = x->N > 1 ? (uint64_t)(2.0 * (x->N - 1) / x->N * 4.0 * (double)param_table_count(x->pt)) : 0;
    x->st.up_bytes += v;
    x->st.down_bytes += v;
    x->st.raw_up += v;
    if (strcmp(c->ops->name, "local") != 0) {
        cudaCheck(cudaMemcpy(x->d_agg, d_grads, bytes, cudaMemcpyDeviceToDevice));
        if (comm_nccl_allreduce_dev(c, x->d_agg, n))
            gc_fatal("error: device exchange: no device allreduce on the %s backend\n", c->ops->name);
        exchange_cuda_scale(x->d_agg, 1.0f / (float)x->N, n);
        return;
    }
    /* this worker's backward has finished before a peer reads its gradients */
    cudaCheck(cudaDeviceSynchronize());
    CommMark mark = comm_uncounted_begin(c); /* addresses, not the exchange's traffic */
    comm_allgatherv(c, &x->ptrs, x->lens, (const uint8_t *)&d_grads, sizeof d_grads);
    comm_uncounted_end(c, mark);
    const float *g[x->N];
    for (int k = 0; k < x->N; k++) {
        if (x->lens[k] != sizeof d_grads) gc_fatal("error: device exchange: worker %d published no address\n", k);
        memcpy(&g[k], x->ptrs.p + (size_t)k * sizeof d_grads, sizeof d_grads);
    }
    cudaCheck(cudaMemcpy(x->d_agg, g[0], bytes, cudaMemcpyDeviceToDevice));
    for (int k = 1; k < x->N; k++) exchange_cuda_add(x->d_agg, g[k], n);
    if (x->N > 1) exchange_cuda_scale(x->d_agg, 1.0f / (float)x->N, n);
    /* every peer is done reading this worker's gradients before its next backward */
    cudaCheck(cudaDeviceSynchronize());
    comm_barrier(c);
    /* the allreduce's ring model, as the local backend counts it */
    uint64_t b = x->N > 1 ? (uint64_t)(2.0 * (x->N - 1) / x->N * (double)bytes) : 0;
    c->sent += b;
    c->received += b;
}

/* ---- allgather ---- */
#define NO_ENTRY INT64_MAX
enum { SLOT_PUSH = 0 }; /* exchange.c's encoder slot of a push, part of the seed */

/* x = g (+ residual), or DGC's corrected accumulation after dgc_prepare's weight
 * decay (no local clipping here): exchange.c's dgc_prepare and memory_in, whole tensors */
static void memory_in(ExchangeCuda *x, const float *d_params, const float *d_grads) {
    cudaCheck(cudaMemcpy(x->d_work, d_grads, x->pt->total * sizeof(float), cudaMemcpyDeviceToDevice));
    for (int t = 0; t < x->T; t++) {
        size_t off = t_off(x, t), n = t_n(x, t);
        if (x->mem[t] == MEM_RESIDUAL) exchange_cuda_add(x->d_work + off, x->d_resid + off, n);
        if (x->mem[t] != MEM_DGC) continue;
        optim_add_weight_decay_cuda(x->d_work + off, d_params + off, x->cfg.weight_decay, n);
        exchange_cuda_dgc_in(x->d_vel + off, x->d_resid + off, x->d_work + off, (float)x->cfg.dgc_momentum,
                             x->cfg.dgc_nesterov, n);
    }
}

/* this worker's bundle of every tensor's frame: exchange.c's encode_pass with
 * make_side's side inputs for a push, and memory_out */
static void encode_all(ExchangeCuda *x, long step, double density) {
    ByteBuf *b = &x->out;
    bundle_begin(b, step);
    size_t cap = BUNDLE_HDR;
    for (int t = 0; t < x->T; t++) {
        x->flen[t] = t_n(x, t) == 0 ? NO_ENTRY : 0;
        if (t_n(x, t) == 0) continue;
        x->at[t] = cap;
        cap += ENTRY_HDR + codec_cuda_max_frame(x->enc[t], t_n(x, t));
    }
    bytebuf_reserve(b, cap);
    double t0 = mono_seconds();
    for (int t = 0; t < x->T; t++) {
        if (x->flen[t] == NO_ENTRY) continue;
        size_t off = t_off(x, t), n = t_n(x, t);
        uint64_t key = ((uint64_t)(uint32_t)step << 32) ^ ((uint64_t)x->rank << 24) ^ ((uint64_t)t << 8) ^
                       (uint64_t)SLOT_PUSH;
        CodecSide side;
        memset(&side, 0, sizeof side);
        side.seed = rng_hash64(x->cfg.seed ^ 0x9E3779B97F4A7C15ULL, key);
        side.repr = x->d_repr + off;
        side.mask = x->d_mask + off;
        side.density = density;
        x->flen[t] = codec_encode_cuda(x->enc[t], b->p + x->at[t] + ENTRY_HDR, codec_cuda_max_frame(x->enc[t], n),
                                       x->d_work + off, n, &side);
        if (x->flen[t] < 0) break;
        /* memory_out: the residual keeps what the frame did not represent; DGC masks its momentum */
        if (x->mem[t] != MEM_NONE) exchange_cuda_sub(x->d_resid + off, x->d_work + off, x->d_repr + off, n);
        if (x->mem[t] == MEM_DGC) exchange_cuda_mask_zero(x->d_vel + off, x->d_mask + off, n);
    }
    x->st.codec_s += mono_seconds() - t0;
    uint32_t count = 0;
    for (int t = 0; t < x->T; t++) {
        if (x->flen[t] == NO_ENTRY) continue;
        if (x->flen[t] < 0) { /* keep taking part in the collectives; agree() stops every worker */
            set_err(x, "worker %d: encoding tensor %s failed: %s", x->rank, x->pt->t[t].name,
                    gc_strerror((int)x->flen[t]));
            break;
        }
        size_t n = t_n(x, t), len = (size_t)x->flen[t];
        uint8_t *e = b->p + b->len;
        memmove(e + ENTRY_HDR, b->p + x->at[t] + ENTRY_HDR, len); /* never to the right */
        put_u32(e, (uint32_t)t);
        put_u32(e + 4, 0);
        put_u32(e + 8, (uint32_t)len);
        b->len += ENTRY_HDR + len;
        count++;
        x->st.raw_up += 4 * (uint64_t)n;
        if (x->pol[t].compressed) {
            x->st.comp_raw += 4 * (uint64_t)n;
            x->st.comp_bytes += ENTRY_HDR + (uint64_t)len;
        }
    }
    put_u32(b->p + 12, count);
    x->st.up_bytes += b->len;
}

/* worker src's bundle (bytes, len) decoded into d_agg (acc: added): exchange.c's
 * decode_pass, with its messages; returns the compressed tensors' entry bytes */
static uint64_t decode_bundle(ExchangeCuda *x, const uint8_t *bytes, size_t len, int src, long step, int acc) {
    BundleReader br;
    int rc = bundle_open(&br, bytes, len, step);
    if (rc) {
        set_err(x, "worker %d: message from worker %d is not a valid frame bundle: %s", x->rank, src, gc_strerror(rc));
        return 0;
    }
    uint64_t comp = 0;
    double t0 = mono_seconds();
    for (int t = 0; t < x->T; t++) {
        size_t n = t_n(x, t), flen = 0;
        if (n == 0) continue;
        const uint8_t *fp = NULL;
        rc = bundle_next(&br, t, 0, &fp, &flen);
        if (!rc) {
            if (x->pol[t].compressed) comp += ENTRY_HDR + (uint64_t)flen;
            float *out = x->d_agg + t_off(x, t);
            rc = acc ? codec_decode_acc_cuda(x->dec[t], out, n, 1.0f, fp, flen)
                     : codec_decode_cuda(x->dec[t], out, n, fp, flen);
        }
        if (rc) {
            x->st.codec_s += mono_seconds() - t0;
            set_err(x, "worker %d: bad frame for tensor %s from worker %d: %s", x->rank, x->pt->t[t].name, src,
                    gc_strerror(rc));
            return comp;
        }
    }
    x->st.codec_s += mono_seconds() - t0;
    rc = bundle_close(&br);
    if (rc) set_err(x, "worker %d: bundle from worker %d: %s", x->rank, src, gc_strerror(rc));
    return comp;
}

/* exchange.c's avg_allgather: encode, gather, average the N bundles */
static int avg_allgather(ExchangeCuda *x, const float *d_params, const float *d_grads, long step, double density) {
    memory_in(x, d_params, d_grads);
    encode_all(x, step, density);
    comm_allgatherv(x->comm, &x->in, x->lens, x->out.p, x->out.len);
    size_t at = 0;
    for (int src = 0; src < x->N; src++) {
        uint64_t comp = 0;
        if (!x->failed) comp = decode_bundle(x, x->in.p + at, x->lens[src], src, step, src > 0);
        if (src != x->rank) {
            x->st.down_bytes += x->lens[src];
            x->st.comp_down += comp;
        }
        at += x->lens[src];
    }
    exchange_cuda_scale(x->d_agg, 1.0f / (float)x->N, x->pt->total);
    return agree(x);
}

/* gradient mode's update (exchange.c's apply_gradient): runs of tensors with the same
 * treatment, DGC's by plain SGD (the momentum lives in the memory), the others by opt */
static void apply_gradient(ExchangeCuda *x, float *d_params, Optim *opt, double lr) {
    optim_begin_step(opt);
    int t = 0;
    while (t < x->T) {
        int dgc = x->mem[t] == MEM_DGC, u = t;
        while (u + 1 < x->T && (x->mem[u + 1] == MEM_DGC) == dgc) u++;
        size_t lo = t_off(x, t), hi = t_off(x, u) + t_n(x, u);
        if (dgc) optim_sgd_plain_cuda(d_params + lo, x->d_agg + lo, lr, hi - lo);
        else optim_update_cuda(opt, d_params, x->d_agg, lr, lo, hi - lo);
        t = u + 1;
    }
}

int exchange_cuda_step(ExchangeCuda *x, float *d_params, const float *d_grads, Optim *opt, double lr, double epoch,
                       long step, ExchangeStats *st) {
    memset(&x->st, 0, sizeof x->st);
    x->failed = 0;
    x->err[0] = 0;
    Comm *c = x->comm;
    uint64_t sent0 = c->sent, recv0 = c->received;
    int rc = 0;
    /* a sparsifier's density (DGC's warm-up), as exchange_step */
    const CodecSpec *g = &x->cfg.policy.global;
    int id = g->ops->id;
    if (id == CODEC_DGC || id == CODEC_TOPK || id == CODEC_SBC) {
        double target = codec_param(g, id == CODEC_DGC ? "density" : id == CODEC_TOPK ? "ratio" : "p");
        x->st.density = x->cfg.memory == MEM_DGC ? dgc_warmup_density(target, x->cfg.dgc_warmup, epoch) : target;
    }
    /* the side-input density only overrides the codec when DGC warms up */
    double side_density = x->cfg.memory == MEM_DGC ? x->st.density : 0;
    if (x->cfg.topology == TOPO_ALLREDUCE) avg_allreduce(x, d_grads);
    else rc = avg_allgather(x, d_params, d_grads, step, side_density);
    if (!rc) apply_gradient(x, d_params, opt, lr);
    x->st.exchanged = 1;
    x->st.wire_sent = c->sent - sent0;
    x->st.wire_received = c->received - recv0;
    if (x->N > 1 && !rc) {
        double mine = (double)(x->st.wire_sent > x->st.wire_received ? x->st.wire_sent : x->st.wire_received);
        double worst = control_max(c, mine);
        x->st.wire_max = (uint64_t)worst;
        x->st.hops = x->cfg.topology == TOPO_ALLGATHER ? 1 : 2 * (x->N - 1);
        if (x->cfg.bandwidth > 0) x->st.comm_model_s = worst * 8.0 / x->cfg.bandwidth + x->st.hops * x->cfg.latency;
    }
    if (st) *st = x->st;
    return rc;
}

#else /* no CUDA */

const char *exchange_cuda_unsupported(const Exchange *ex, const ParamTable *pt, const Comm *comm) {
    (void)ex;
    (void)pt;
    (void)comm;
    return "this build has no CUDA";
}

ExchangeCuda *exchange_cuda_new(Exchange *ex, Comm *comm, const ParamTable *pt, char *err, size_t errlen) {
    (void)ex;
    (void)comm;
    (void)pt;
    snprintf(err, errlen, "this build has no CUDA");
    return NULL;
}

void exchange_cuda_free(ExchangeCuda *x) { (void)x; }

int exchange_cuda_step(ExchangeCuda *x, float *d_params, const float *d_grads, Optim *opt, double lr, double epoch,
                       long step, ExchangeStats *st) {
    (void)epoch;
    (void)x;
    (void)d_params;
    (void)d_grads;
    (void)opt;
    (void)lr;
    (void)step;
    (void)st;
    return -1;
}

const char *exchange_cuda_error(const ExchangeCuda *x) {
    (void)x;
    return "this build has no CUDA";
}

void exchange_cuda_download(ExchangeCuda *x) { (void)x; }
void exchange_cuda_upload(ExchangeCuda *x) { (void)x; }

void exchange_cuda_add(float *a, const float *b, size_t n) {
    (void)a;
    (void)b;
    (void)n;
}

void exchange_cuda_scale(float *a, float s, size_t n) {
    (void)a;
    (void)s;
    (void)n;
}

void exchange_cuda_sub(float *d, const float *a, const float *b, size_t n) {
    (void)d;
    (void)a;
    (void)b;
    (void)n;
}

void exchange_cuda_ema(float *ema, const float *params, float a, size_t n) {
    (void)ema;
    (void)params;
    (void)a;
    (void)n;
}

#endif
