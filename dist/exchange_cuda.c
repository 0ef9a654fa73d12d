/* The device-resident exchange (see dist/exchange_cuda.h): the allreduce,
 * allgather, parameter-server and ring steps of dist/exchange.c (memory_in,
 * encode_all with its shared scalars, encode_pass with make_side's GCOMP levels,
 * average_bundles, avg_allreduce, ps_exchange, avg_ring, apply_gradient,
 * exchange_optimize and exchange_deltas) on device arenas, with the GPU codecs. */
#include "dist/exchange_cuda.h"

#include <math.h>
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
#include "compress/codec_cuda.h"
#include "dist/bundle.h"
#include "dist/comm_nccl.h"
#include "nn/model_cuda.h"
#include "optim/clip.h"
#include "optim/optim_cuda.h"

/* a frame of a bundle being decoded, as its error message names it: tensor t from worker src
 * (the pull: from the server), chunk c of the ring's (else -1) */
typedef struct {
    int t, src, chunk, pull;
} FrameAt;

struct ExchangeCuda {
    DistConfig cfg;
    Exchange *ex;       /* the host exchange: whether the first step has run (exchange_started) */
    Comm *comm;
    const ParamTable *pt;
    const TensorPolicy *pol;
    int N, rank, T;
    int *mem;           /* [T] memory kind (exchange_memory_kind) */
    float *h_resid;     /* the host exchange's residual arena (checkpoints), or NULL */
    float *h_vel;       /* the host exchange's DGC momentum arena (checkpoints), or NULL */
    float *h_anchor;    /* the host exchange's anchor arena (checkpoints), or NULL */
    float *h_global;    /* ps server, model-delta pulls: the host exchange's global model (checkpoints) */
    float *h_pullres;   /* ... and its pull error accumulation (checkpoints); else both NULL */
    float *d_agg;       /* [total] device: the average gradient (weight deltas: the average delta,
                         * and before it a local step's copy of this worker's gradient) */
    float *d_anchor;    /* [total] device: weight deltas: the model at the last exchange (else NULL) */
    float *d_work;      /* [total] device: x = g or the weight delta (+ residual); NULL for allreduce
                         * of gradients */
    /* allgather and ps */
    float *d_resid;     /* [total] device: the residual (DGC: v; NULL without memory) */
    float *d_vel;       /* [total] device: DGC's momentum u (NULL without DGC's memory) */
    float *d_repr;      /* [total] device: what each frame represents */
    uint8_t *d_mask;    /* [total] device: the values a sparsifier sent */
    float *scalars;     /* [T] host: TernGrad's shared scalars (exchange.c's) */
    int *share;         /* [T] tensor t's frames use the shared scalar (exchange_shares_scalar) */
    int share_any;      /* some tensor's do: the scalars are shared before encoding */
    CodecCuda **enc;    /* [T] each tensor's encoder (ps: of the pushes) */
    CodecCuda **dec;    /* [T * N] tensor t's decoder of worker src's frames at t * N + src: one per
                         * worker for a codec with state between steps (gcomp's tables: each
                         * sender's), else src 0's serves every worker (NULL at src > 0) */
    uint8_t *d_levels;  /* [total] device: GCOMP's levels (make_side's), NULL without gcomp */
    uint8_t *heads_all, *d_heads; /* device bundles' headers read at once (exchange_cuda_read_bundles):
                                   * host copies (page-locked, EXCHANGE_HEADS_BYTES(T) bytes a bundle),
                                   * device scratch (EXCHANGE_READ_BYTES(T)), for N bundles (read_ahead) */
    uint8_t *heads;     /* those of the bundle being read: in heads_all */
    uint32_t heads_n, heads_i; /* the entries in heads, the next one to take */
    CodecProbe *probes_all; /* [N T + 1] page-locked: the frames of the entries in heads_all,
                             * probed with them, bundle s's at s T */
    CodecProbe *probes; /* those of the bundle being read: in probes_all */
    uint32_t nprobed;   /* the first nprobed entries' frames have their probe */
    uint32_t *ahead_probed;  /* [N] how many of its entries' frames have their probe */
    const CodecProbe *probe; /* the probe of the frame next_entry found last, or NULL */
    FrameAt *defd;      /* [(N + 1) T] the frames whose verdict the batch deferred (gcomp's, topk's, sbc's, 3lc's), in
                         * the order decoded, until verdicts() reads them */
    int *vrc;           /* [(N + 1) T] their verdicts */
    size_t ndefd, cdefd; /* how many; room for (0 without a codec that defers them) */
    CodecBatch *batch;  /* device bundles: the frames' work launched per pass, not per frame */
    int stage;          /* device bundles with frames of a codec that stages (stages()): the
                         * passes' frames staged (place_frames) */
    int64_t *flen;      /* [T] a pass's frame lengths (negative: none, or its error), */
    int placed;         /* the tensors below it have their frames in the bundle: all but those
                         * from the first that failed on (exchange.c's encode_pass) */
    size_t *fat;        /* [T] their offsets in the bundle */
    double *fsec;       /* [T] and each frame's encoding time */
    size_t *roff, *rn;  /* [T] ranges of tensors for exchange_cuda_ranges (ranges) */
    int *local_at;      /* [T] where a pass's local statistics of tensor t are in local (local_stats),
                         * or -1 */
    float *local;       /* [2T] codec_local_stats_cuda's results */
    int local_ready;    /* share_scalars took them of the push pass's values, which that pass
                         * encodes next */
    CodecCuda **lg;     /* [T] local_stats' arguments to codec_local_stats_cuda */
    const float **lx;
    size_t *ln;
    int coded;          /* a push has been encoded: the codecs' state is the host's to save */
    /* the ring (GCOMP section 6.2) */
    CodecCuda **renc, **rdec; /* [T * 2N] tensor t's encoder and decoder of slot s at t * 2N + s
                               * (chunk c's reduce-scatter frames c, its allgather frames N + c):
                               * one per slot for a codec with state, else slot 0's serves all */
    int quiet_from;     /* the worker whose bundle came without frames (exchange.c's), or -1 */
    /* ps (3LC section 3.1; TernGrad section 3) */
    int grad_pull;      /* the workers pull the averaged gradient (TernGrad), not a model delta (3LC) */
    float *d_global;    /* [total] device: the server's global model (model-delta pulls; else NULL) */
    float *d_pullres;   /* [total] device: the server's error accumulation of the pulled deltas */
    CodecCuda **penc, **pdec; /* [T] the pull's encoder (the server's) and decoder (exchange_pull_spec) */
    ByteBuf out, in;    /* this worker's bundle; everyone's */
    int devb;           /* out and in are device memory (nccl, local), else page-locked host memory */
    /* clipping: the ranges whose sums of squares make the norm (--clip: optim/clip.c's
     * blocks of the arena; DGC's local clipping: each tensor's blocks), device */
    size_t nrange;
    size_t *d_lo, *d_hi;
    double *d_part;     /* [nrange + 1] their sums, and the total */
    double *d_lsum;     /* --log-layers' sums, with frames: [3 * EXCHANGE_LAYER_BLOCKS] scratch, then
                         * [3 * T] each tensor's of a pass (device), */
    double *h_lsum;     /* [3 * T] read back at once (page-locked) */
    /* allreduce */
    float *h_stage;     /* [total] pinned host memory: over a host backend (mpi), the gradient
                         * staged for the Comm's allreduce (else NULL) */
    ByteBuf ptrs;       /* the published gradient addresses, rank order */
    size_t *lens;       /* [N] */
    ExchangeStats st;   /* this step's, from exchange_cuda_step on (exchange_cuda_deltas adds its exchange) */
    uint64_t sent0, recv0; /* the Comm's counters when exchange_cuda_step began */
    double side_density;   /* this step's density for the codecs' side inputs (DGC's warm-up), else 0 */
    int failed;
    char err[512];
};

static size_t t_off(const ExchangeCuda *x, int t) { return x->pt->t[t].offset; }
static int stateful(const ExchangeCuda *x, int t) { return x->pol[t].spec.ops->state_save != NULL; }
/* the ring's codec of tensor t in slot (tab: renc or rdec) */
static CodecCuda *ring_codec(const ExchangeCuda *x, CodecCuda **tab, int t, int slot) {
    return tab[(size_t)t * 2 * (size_t)x->N + (size_t)(stateful(x, t) ? slot : 0)];
}
/* the ring's slots this worker codes with (exchange.c's avg_ring): encoders, the chunks
 * it sends in the reduce-scatter (all but its own, r + 1) and its own chunk's allgather
 * frame; decoders, the chunks it receives (all but r) and the allgather frames of every
 * chunk but its own */
static int ring_slot_used(const ExchangeCuda *x, int decoder, int slot) {
    int N = x->N, own = (x->rank + 1) % N, c = slot % N;
    if (slot < N) return decoder ? c != x->rank : c != own;
    return decoder ? c != own : c == own;
}
/* tensor t's decoder of worker src's frames */
static CodecCuda *dec_of(const ExchangeCuda *x, int t, int src) {
    return x->dec[(size_t)t * (size_t)x->N + (size_t)(stateful(x, t) ? src : 0)];
}
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
    (void)comm; /* frames in device or pinned memory, allreduce staged through pinned memory: any Comm */
    const TensorPolicy *pol = exchange_policy(ex);
    for (int t = 0; t < pt->n; t++) { /* gcomp's GPU twin keeps its state (codec_cuda_state_save) */
        const CodecOps *ops = pol[t].spec.ops;
        if (ops->state_save && ops->id != CODEC_GCOMP) return "a codec whose state between steps has no GPU twin";
    }
    return NULL;
}

/* a codec whose frames are staged (codec_batch_stage): their lengths or checks come back
 * once a pass, not once a frame */
static int stages(int id) {
    return id == CODEC_3LC || id == CODEC_TOPK || id == CODEC_DGC || id == CODEC_SBC || id == CODEC_GCOMP;
}

/* The bundles' memory. Over nccl and local: device memory, where each frame is encoded
 * in place (codec_encode_cuda_dev), which NCCL sends from and receives into (local
 * workers, threads sharing the GPU, copy device to device), and where each frame is
 * decoded (codec_decode_cuda_dev); only headers and a few scalars cross to the host.
 * Otherwise (over mpi, or with GCX_HOST_FRAMES=1): page-locked host memory, each frame
 * copied between the GPU and it once (the encoder's download, each decoder's upload), by
 * DMA, with no pageable staging; the Comm moves them from there. */
static const ByteAlloc pinned = {.alloc = cuda_host_alloc, .free = cuda_host_free};
static void *gpu_bytes_alloc(size_t bytes) {
    void *p = NULL;
    return cudaMalloc(&p, bytes) == cudaSuccess ? p : NULL;
}
static void gpu_bytes_free(void *p) {
    if (p) cudaCheck(cudaFree(p));
}
/* either way (a device-to-device copy, or a test's look from the host), on the calling
 * thread's stream; complete after gpu_bytes_settle, which the local backend calls once
 * after a collective's copies: a peer's next step or NCCL's stream may use the bytes next */
static void gpu_bytes_copy(void *dst, const void *src, size_t bytes) {
    cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}
static void gpu_bytes_settle(void) { cudaCheck(cudaStreamSynchronize(0)); }
static const ByteAlloc on_gpu = {
    .alloc = gpu_bytes_alloc, .free = gpu_bytes_free, .copy = gpu_bytes_copy, .device = 1, .settle = gpu_bytes_settle};

ExchangeCuda *exchange_cuda_new(Exchange *ex, Comm *comm, const ParamTable *pt, char *err, size_t errlen) {
    const char *why = exchange_cuda_unsupported(ex, pt, comm);
    if (why) {
        snprintf(err, errlen, "the step cannot stay on the GPU: %s", why);
        return NULL;
    }
    ExchangeCuda *x = callocCheck(1, sizeof *x);
    x->cfg = *exchange_config(ex);
    x->ex = ex;
    x->comm = comm;
    x->pt = pt;
    x->pol = exchange_policy(ex);
    x->N = comm->size;
    x->rank = comm->rank;
    x->T = pt->n;
    const char *hf = getenv("GCX_HOST_FRAMES");
    x->devb = (!strcmp(comm->ops->name, "nccl") || !strcmp(comm->ops->name, "local")) && !(hf && !strcmp(hf, "1"));
    x->out.mem = x->in.mem = x->devb ? &on_gpu : &pinned;
    x->lens = callocCheck((size_t)x->N, sizeof *x->lens);
    x->mem = callocCheck((size_t)x->T + 1, sizeof *x->mem);
    for (int t = 0; t < x->T; t++) x->mem[t] = exchange_memory_kind(ex, t);
    x->ahead_probed = callocCheck((size_t)x->N, sizeof *x->ahead_probed);
    x->roff = callocCheck((size_t)x->T + 1, sizeof *x->roff); /* every topology's optimizer takes ranges */
    x->rn = callocCheck((size_t)x->T + 1, sizeof *x->rn);
    x->local_at = callocCheck((size_t)x->T + 1, sizeof *x->local_at);
    x->local = callocCheck(2 * (size_t)x->T + 1, sizeof *x->local);
    x->lg = callocCheck((size_t)x->T + 1, sizeof *x->lg);
    x->lx = callocCheck((size_t)x->T + 1, sizeof *x->lx);
    x->ln = callocCheck((size_t)x->T + 1, sizeof *x->ln);
    x->h_resid = exchange_residual(ex);
    x->h_vel = exchange_velocity(ex);
    x->h_anchor = exchange_anchor(ex);
    x->h_global = exchange_global(ex);
    x->h_pullres = exchange_pull_residual(ex);
    x->grad_pull = exchange_grad_pull(ex);
    int frames = x->cfg.topology != TOPO_ALLREDUCE, ps = x->cfg.topology == TOPO_PS;
    size_t bytes = (pt->total ? pt->total : 1) * sizeof(float);
    int bad = cuda_dev_alloc((void **)&x->d_agg, bytes, "the average gradient") ||
              (x->h_anchor && cuda_dev_alloc((void **)&x->d_anchor, bytes, "the model at the last exchange")) ||
              ((x->h_anchor || frames) && cuda_dev_alloc((void **)&x->d_work, bytes, "the exchange's input")) ||
              (x->h_global && cuda_dev_alloc((void **)&x->d_global, bytes, "the server's global model")) ||
              (x->h_pullres && cuda_dev_alloc((void **)&x->d_pullres, bytes, "the server's pull memory"));
    if (!bad && !frames && strcmp(comm->ops->name, "local") && strcmp(comm->ops->name, "nccl"))
        bad = !(x->h_stage = cuda_host_arena_alloc(pt->total));
    if (!bad && frames) {
        bad = cuda_dev_alloc((void **)&x->d_repr, bytes, "what the frames represent") ||
              cuda_dev_alloc((void **)&x->d_lsum, 3 * (EXCHANGE_LAYER_BLOCKS + (size_t)x->T) * sizeof(double),
                             "--log-layers' sums") ||
              !(x->h_lsum = cuda_host_alloc(3 * (size_t)x->T * sizeof(double))) ||
              cuda_dev_alloc((void **)&x->d_mask, bytes / sizeof(float), "the sparsifiers' masks") ||
              cuda_dev_alloc((void **)&x->d_heads, (size_t)x->N * EXCHANGE_READ_BYTES(x->T), "the bundles' headers") ||
              !(x->heads_all = cuda_host_alloc((size_t)x->N * EXCHANGE_HEADS_BYTES(x->T))) || /* copied by DMA */
              !(x->probes_all = cuda_host_alloc(((size_t)x->N * (size_t)x->T + 1) * sizeof(CodecProbe))) ||
              (x->h_resid && cuda_dev_alloc((void **)&x->d_resid, bytes, "the residual")) ||
              (x->h_vel && cuda_dev_alloc((void **)&x->d_vel, bytes, "DGC's momentum"));
        x->enc = callocCheck((size_t)x->T + 1, sizeof *x->enc);
        x->flen = callocCheck((size_t)x->T + 1, sizeof *x->flen);
        x->fat = callocCheck((size_t)x->T + 1, sizeof *x->fat);
        x->fsec = callocCheck((size_t)x->T + 1, sizeof *x->fsec);
        if (x->devb) x->batch = codec_batch_new();
        for (int t = 0; t < x->T && x->devb; t++) /* whose lengths or checks would cost a wait each */
            x->stage |= stages(x->pol[t].spec.ops->id) || (ps && stages(exchange_pull_spec(ex, t)->ops->id));
        if (x->stage) { /* a pass stages at most a frame a tensor: the pushes' codecs, then the pulls' */
            int ids[x->T + 1];
            for (int pull = 0; pull <= ps; pull++) {
                for (int t = 0; t < x->T; t++) ids[t] = pull ? exchange_pull_spec(ex, t)->ops->id : x->pol[t].spec.ops->id;
                codec_batch_reserve(x->batch, ids, (size_t)x->T);
            }
        }
        x->dec = callocCheck((size_t)x->T * (size_t)x->N + 1, sizeof *x->dec);
        x->penc = callocCheck((size_t)x->T + 1, sizeof *x->penc);
        x->pdec = callocCheck((size_t)x->T + 1, sizeof *x->pdec);
        int gcomp = 0, defers = 0; /* defers: a decoder whose verdicts the batch may defer */
        for (int t = 0; t < x->T && !bad; t++) {
            gcomp |= x->pol[t].spec.ops->id == CODEC_GCOMP;
            defers |= codec_cuda_defers(x->pol[t].spec.ops->id);
            bad = !(x->enc[t] = codec_cuda_new(&x->pol[t].spec)) ||
                  (ps && x->rank == 0 && !(x->penc[t] = codec_cuda_new(exchange_pull_spec(ex, t)))) ||
                  (ps && !(x->pdec[t] = codec_cuda_new(exchange_pull_spec(ex, t))));
            for (int src = 0; src < (stateful(x, t) ? x->N : 1) && !bad; src++)
                bad = !(x->dec[(size_t)t * (size_t)x->N + (size_t)src] = codec_cuda_new(&x->pol[t].spec));
        }
        if (!bad && gcomp) bad = cuda_dev_alloc((void **)&x->d_levels, bytes / sizeof(float), "GCOMP's levels");
        for (int t = 0; t < x->T && ps; t++) defers |= codec_cuda_defers(exchange_pull_spec(ex, t)->ops->id);
        if (!bad && defers && x->batch) { /* the N bundles an allgather decodes, a frame a tensor each, at most */
            x->cdefd = ((size_t)x->N + 1) * (size_t)x->T;
            codec_batch_reserve_deferred(x->batch, x->cdefd);
            x->defd = callocCheck(x->cdefd, sizeof *x->defd);
            x->vrc = callocCheck(x->cdefd, sizeof *x->vrc);
        }
        if (x->cfg.topology == TOPO_RING) {
            size_t ns = 2 * (size_t)x->N;
            x->renc = callocCheck((size_t)x->T * ns + 1, sizeof *x->renc);
            x->rdec = callocCheck((size_t)x->T * ns + 1, sizeof *x->rdec);
            for (int t = 0; t < x->T && !bad; t++)
                for (size_t k = 0; k < (stateful(x, t) ? ns : 1) && !bad; k++)
                    bad = !(x->renc[(size_t)t * ns + k] = codec_cuda_new(&x->pol[t].spec)) ||
                          !(x->rdec[(size_t)t * ns + k] = codec_cuda_new(&x->pol[t].spec));
        }
        x->scalars = callocCheck((size_t)x->T + 1, sizeof *x->scalars);
        x->share = callocCheck((size_t)x->T + 1, sizeof *x->share);
        for (int t = 0; t < x->T; t++) {
            x->share[t] = exchange_shares_scalar(ex, t);
            x->share_any |= x->share[t];
        }
    }
    /* the clipping this run does (exchange.c's apply_gradient, dgc_prepare, the delta steps) */
    int dgc_clip = x->cfg.memory == MEM_DGC && x->cfg.dgc_clip > 0;
    if (!bad && (dgc_clip || (x->cfg.clip_norm > 0 && x->cfg.memory != MEM_DGC))) {
        size_t blk = 0;
        x->nrange = 0;
        if (dgc_clip)
            for (int t = 0; t < x->T; t++) x->nrange += clip_blocks(t_n(x, t), &blk);
        else
            x->nrange = clip_blocks(pt->total, &blk);
        size_t *lo = callocCheck(x->nrange + 1, sizeof *lo), *hi = callocCheck(x->nrange + 1, sizeof *hi);
        size_t k = 0;
        for (int t = 0; t < (dgc_clip ? x->T : 1); t++) {
            size_t off = dgc_clip ? t_off(x, t) : 0, n = dgc_clip ? t_n(x, t) : pt->total;
            for (size_t b = 0, nb = clip_blocks(n, &blk); b < nb; b++, k++) {
                lo[k] = off + b * blk;
                hi[k] = off + (b * blk + blk < n ? b * blk + blk : n);
            }
        }
        size_t rb = (x->nrange + 1) * sizeof(size_t);
        bad = cuda_dev_alloc((void **)&x->d_lo, rb, "the clipping's ranges") ||
              cuda_dev_alloc((void **)&x->d_hi, rb, "the clipping's ranges") ||
              cuda_dev_alloc((void **)&x->d_part, (x->nrange + 1) * sizeof(double), "the clipping's sums");
        if (!bad) {
            cudaCheck(cudaMemcpy(x->d_lo, lo, rb, cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(x->d_hi, hi, rb, cudaMemcpyHostToDevice));
        }
        free(lo);
        free(hi);
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
    float *bufs[] = {x->d_agg, x->d_anchor, x->d_work, x->d_resid, x->d_vel, x->d_repr, x->d_global, x->d_pullres};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) cudaCheck(cudaFree(bufs[i]));
    if (x->d_mask) cudaCheck(cudaFree(x->d_mask));
    if (x->d_levels) cudaCheck(cudaFree(x->d_levels));
    if (x->d_heads) cudaCheck(cudaFree(x->d_heads));
    cuda_host_free(x->heads_all);
    cuda_host_free(x->h_lsum);
    cuda_host_free(x->probes_all);
    free(x->ahead_probed);
    cuda_host_arena_free(x->h_stage);
    if (x->d_lo) cudaCheck(cudaFree(x->d_lo));
    if (x->d_hi) cudaCheck(cudaFree(x->d_hi));
    if (x->d_part) cudaCheck(cudaFree(x->d_part));
    if (x->d_lsum) cudaCheck(cudaFree(x->d_lsum));
    for (int t = 0; t < x->T && x->enc; t++) {
        codec_cuda_free(x->enc[t]);
        for (int src = 0; src < x->N; src++) codec_cuda_free(x->dec[(size_t)t * (size_t)x->N + (size_t)src]);
        codec_cuda_free(x->penc[t]);
        codec_cuda_free(x->pdec[t]);
        for (int k = 0; k < 2 * x->N && x->renc; k++) {
            codec_cuda_free(x->renc[(size_t)t * 2 * (size_t)x->N + (size_t)k]);
            codec_cuda_free(x->rdec[(size_t)t * 2 * (size_t)x->N + (size_t)k]);
        }
    }
    free(x->renc);
    free(x->rdec);
    codec_batch_free(x->batch);
    free(x->defd);
    free(x->vrc);
    free(x->flen);
    free(x->fat);
    free(x->fsec);
    free(x->roff);
    free(x->rn);
    free(x->enc);
    free(x->dec);
    free(x->penc);
    free(x->pdec);
    free(x->scalars);
    free(x->local_at);
    free(x->local);
    free(x->lg);
    free(x->lx);
    free(x->ln);
    free(x->share);
    free(x->mem);
    bytebuf_free(&x->out);
    bytebuf_free(&x->in);
    bytebuf_free(&x->ptrs);
    free(x->lens);
    free(x);
}

/* the state of GPU codec g (tensor t, the host's codec `which`: exchange_codec) to
 * the host codec that the checkpoint's "codecs" section saves (to_host), or back.
 * To the host: created there once this run has encoded a push (the host
 * exchange's codecs exist from their first frame on), else only where it exists;
 * back: only where it exists (a checkpoint's state, loaded by exchange_ckpt_load) */
static void codec_state_move(ExchangeCuda *x, CodecCuda *g, int t, int decoder, int slot, int to_host) {
    if (!g || !codec_cuda_state_max(g)) return;
    Codec *c = exchange_codec(x->ex, t, decoder, slot, to_host && x->coded);
    if (!c) return;
    size_t cap = codec_cuda_state_max(g) > codec_state_max(c) ? codec_cuda_state_max(g) : codec_state_max(c);
    uint8_t *buf = mallocCheck(cap);
    int64_t len = to_host ? codec_cuda_state_save(g, buf, cap) : codec_state_save(c, buf, cap);
    int rc = len < 0 ? (int)len : to_host ? codec_state_load(c, buf, (size_t)len) : codec_cuda_state_load(g, buf, (size_t)len);
    if (rc)
        gc_fatal("error: device exchange: the codec state of tensor %s does not move %s: %s\n", x->pt->t[t].name,
                 to_host ? "to the host" : "to the device", gc_strerror(rc));
    free(buf);
    if (!to_host) x->coded = 1;
}

/* every GPU codec's state between the host exchange's codecs and the device:
 * the push encoder, the decoders of every worker's frames (ps: the server's),
 * the server's pull encoder and every worker's pull decoder */
static void codec_states(ExchangeCuda *x, int to_host) {
    if (!x->enc) return;
    int ps = x->cfg.topology == TOPO_PS;
    if (x->renc) { /* the ring: its slots (exchange_codec) */
        for (int t = 0; t < x->T; t++)
            for (int dir = 0; dir < 2; dir++)
                for (int k = 0; k < 2 * x->N; k++)
                    if (stateful(x, t) && ring_slot_used(x, dir, k))
                        codec_state_move(x, ring_codec(x, dir ? x->rdec : x->renc, t, k), t, dir, k, to_host);
        return;
    }
    for (int t = 0; t < x->T; t++) {
        codec_state_move(x, x->enc[t], t, 0, EXCHANGE_SLOT_PUSH, to_host);
        for (int src = 0; src < x->N && stateful(x, t) && (!ps || x->rank == 0); src++)
            codec_state_move(x, x->dec[(size_t)t * (size_t)x->N + (size_t)src], t, 1, src, to_host);
        codec_state_move(x, x->penc[t], t, 0, EXCHANGE_SLOT_PULL, to_host);
        codec_state_move(x, x->pdec[t], t, 1, EXCHANGE_SLOT_PULLED(x->N), to_host);
    }
}

void exchange_cuda_download(ExchangeCuda *x) {
    codec_states(x, 1);
    size_t b = x->pt->total * sizeof(float);
    if (x->d_resid) cudaCheck(cudaMemcpy(x->h_resid, x->d_resid, b, cudaMemcpyDeviceToHost));
    if (x->d_vel) cudaCheck(cudaMemcpy(x->h_vel, x->d_vel, b, cudaMemcpyDeviceToHost));
    if (x->d_anchor) cudaCheck(cudaMemcpy(x->h_anchor, x->d_anchor, b, cudaMemcpyDeviceToHost));
    if (x->d_global) cudaCheck(cudaMemcpy(x->h_global, x->d_global, b, cudaMemcpyDeviceToHost));
    if (x->d_pullres) cudaCheck(cudaMemcpy(x->h_pullres, x->d_pullres, b, cudaMemcpyDeviceToHost));
}

void exchange_cuda_upload(ExchangeCuda *x) {
    codec_states(x, 0);
    size_t b = x->pt->total * sizeof(float);
    if (x->d_resid) cudaCheck(cudaMemcpy(x->d_resid, x->h_resid, b, cudaMemcpyHostToDevice));
    if (x->d_vel) cudaCheck(cudaMemcpy(x->d_vel, x->h_vel, b, cudaMemcpyHostToDevice));
    if (x->d_anchor) cudaCheck(cudaMemcpy(x->d_anchor, x->h_anchor, b, cudaMemcpyHostToDevice));
    if (x->d_global) cudaCheck(cudaMemcpy(x->d_global, x->h_global, b, cudaMemcpyHostToDevice));
    if (x->d_pullres) cudaCheck(cudaMemcpy(x->d_pullres, x->h_pullres, b, cudaMemcpyHostToDevice));
}

/* an allreduce-max of v that is not counted as traffic (exchange.c's control_max) */
static double control_max(Comm *c, double v) {
    comm_allreduce_uncounted(c, &v, 1, COMM_MAX);
    return v;
}

/* every worker stops when one found a bad frame (exchange.c's agree) */
static int agree(ExchangeCuda *x) {
    double flag = control_max(x->comm, x->failed ? 2.0 : x->quiet_from >= 0 ? 1.0 : 0.0);
    if (flag > 0 && !x->failed) {
        if (flag < 2 && x->quiet_from >= 0)
            set_err(x, "worker %d: the bundle from worker %d has no frames, and no worker reported an error", x->rank,
                    x->quiet_from);
        else
            set_err(x, "worker %d: stopped because another worker reported a bad frame", x->rank);
    }
    return flag > 0 ? -GC_ERR_CORRUPT : 0;
}

/* ---- allreduce: d_agg = (g0 + g1 + ... + g(N-1)) * (1/N) of every worker's d_grads
 * (the gradient, or the weight delta). Local workers: every worker's arena read in
 * place on the shared device, summed in rank order; nccl: ncclAllReduce on a device
 * copy (NCCL's order, as the host path's staging); any other backend (mpi): the
 * gradient staged through pinned host memory for the Comm's allreduce, the host
 * path's sums ---- */
static void avg_allreduce(ExchangeCuda *x, const float *d_grads) {
    size_t n = x->pt->total, bytes = n * sizeof(float);
    Comm *c = x->comm;
    /* exchange.c's avg_allreduce accounting */
    uint64_t v = x->N > 1 ? (uint64_t)(2.0 * (x->N - 1) / x->N * 4.0 * (double)param_table_count(x->pt)) : 0;
    x->st.up_bytes += v;
    x->st.down_bytes += v;
    x->st.raw_up += v;
    if (x->h_stage) {
        double t0 = mono_seconds();
        cudaCheck(cudaMemcpy(x->h_stage, d_grads, bytes, cudaMemcpyDeviceToHost));
        double t1 = mono_seconds();
        comm_allreduce_f32(c, x->h_stage, n, COMM_SUM);
        double t2 = mono_seconds();
        cudaCheck(cudaMemcpy(x->d_agg, x->h_stage, bytes, cudaMemcpyHostToDevice));
        x->st.d2h_bytes += bytes;
        x->st.h2d_bytes += bytes;
        x->st.copy_s += (t1 - t0) + (mono_seconds() - t2);
        exchange_cuda_scale(x->d_agg, 1.0f / (float)x->N, n);
        return;
    }
    if (strcmp(c->ops->name, "local") != 0) {
        cudaCheck(cudaMemcpy(x->d_agg, d_grads, bytes, cudaMemcpyDeviceToDevice));
        if (comm_nccl_allreduce_dev(c, x->d_agg, n))
            gc_fatal("error: device exchange: no device allreduce on the %s backend\n", c->ops->name);
        exchange_cuda_scale(x->d_agg, 1.0f / (float)x->N, n);
        return;
    }
    /* this worker's backward has finished before a peer reads its gradients (its own
     * stream: a wait for the whole device would wait for the peers' queued work too) */
    cudaCheck(cudaStreamSynchronize(0));
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
    /* every peer is done reading this worker's gradients before its next backward: each
     * waits for its own reads, then all meet */
    cudaCheck(cudaStreamSynchronize(0));
    comm_barrier(c);
    /* the allreduce's ring model, as the local backend counts it */
    uint64_t b = x->N > 1 ? (uint64_t)(2.0 * (x->N - 1) / x->N * (double)bytes) : 0;
    c->sent += b;
    c->received += b;
}

/* ---- allgather ---- */

/* the values of tensor t in a pass over chunk c of every tensor (the ring's), or over whole
 * tensors (c < 0): how many, and in *lo (if given) the first */
static size_t pass_n(const ExchangeCuda *x, int t, int c, size_t *lo) {
    if (c >= 0) return exchange_ring_chunk(t_n(x, t), x->N, c, lo);
    if (lo) *lo = 0;
    return t_n(x, t);
}

/* which tensors ranges() takes: all, those with memory (any kind but MEM_NONE), those
 * without DGC's, or those whose memory is a given kind (MEM_RESIDUAL, MEM_DGC) */
enum { RANGES_NO_DGC = -3, RANGES_ALL = -2, RANGES_MEMORY = -1 };

static int takes(const ExchangeCuda *x, int t, int mem) {
    switch (mem) {
    case RANGES_ALL: return 1;
    case RANGES_MEMORY: return x->mem[t] != MEM_NONE;
    case RANGES_NO_DGC: return x->mem[t] != MEM_DGC;
    default: return x->mem[t] == mem;
    }
}

/* each tensor's values in a pass over chunk c (c < 0: whole tensors), of the tensors that
 * mem selects and, with coded, that have a frame in the pass (x->flen[t] >= 0), as ranges
 * of the arenas into x->roff, x->rn: how many */
static size_t take_ranges(ExchangeCuda *x, int c, int mem, int coded) {
    size_t k = 0;
    for (int t = 0; t < x->T; t++) {
        size_t lo, n = pass_n(x, t, c, &lo);
        if (takes(x, t, mem) && (!coded || x->flen[t] >= 0) && n) {
            x->roff[k] = t_off(x, t) + lo;
            x->rn[k++] = n;
        }
    }
    return k;
}

/* op of exchange_cuda_ranges over those ranges: a launch for every 32 */
static void ranges(ExchangeCuda *x, int c, int op, float *d, const float *a, const float *b, const uint8_t *mask,
                   int mem, int coded) {
    size_t k = take_ranges(x, c, mem, coded);
    exchange_cuda_ranges(op, d, a, b, mask, x->roff, x->rn, k);
}

/* d_work: g (DGC: clipped by dgc_clip) or the weight delta on entry; x = that
 * (+ residual), or DGC's corrected accumulation after dgc_prepare's weight decay:
 * exchange.c's dgc_prepare and memory_in, whole tensors, a launch for every 32 */
static void memory_in(ExchangeCuda *x, const float *d_params) {
    ranges(x, -1, EXCHANGE_RANGE_ADD, x->d_work, x->d_resid, NULL, NULL, MEM_RESIDUAL, 0);
    size_t k = take_ranges(x, -1, MEM_DGC, 0);
    exchange_cuda_dgc_in(x->d_vel, x->d_resid, x->d_work, x->cfg.weight_decay != 0 ? d_params : NULL,
                         (float)x->cfg.weight_decay,
                         (float)x->cfg.dgc_momentum, x->cfg.dgc_nesterov, x->roff, x->rn, k);
}

/* The local statistics of a pass's values (terngrad's and stoch3's scalar and clipping
 * threshold, max|x| of ternsum and int8, onebit's means: codec_local_stats_cuda) for every
 * tensor whose encoder enc[t] takes them, of v over chunk c (c < 0: whole tensors), tensor
 * t's at x->local + 2 x->local_at[t]: one wait for them all, where each encoder would wait
 * for its own */
static void local_stats(ExchangeCuda *x, CodecCuda *const *enc, const float *v, int c) {
    int k = 0;
    for (int t = 0; t < x->T; t++) {
        size_t lo, n = pass_n(x, t, c, &lo);
        x->local_at[t] = -1;
        if (!n || !codec_cuda_local_stats_of(enc[t])) continue;
        x->lg[k] = enc[t];
        x->lx[k] = v + t_off(x, t) + lo;
        x->ln[k] = n;
        x->local_at[t] = k++;
    }
    if (k) codec_local_stats_cuda(x->lg, x->lx, x->ln, (size_t)k, x->local);
}

/* TernGrad's scalar sharing (TernGrad section 3.1), as exchange.c's encode_all:
 * every tensor's scalar of x on the device (codec_local_scalar_cuda's, all at once), the
 * max over workers by the Comm (T floats, counted as traffic as on the host) */
static void share_scalars(ExchangeCuda *x) {
    if (!x->share_any) return;
    local_stats(x, x->enc, x->d_work, -1);
    x->local_ready = 1;
    for (int t = 0; t < x->T; t++) {
        if (!x->pol[t].spec.ops->local_scalar) continue;
        int id = codec_cuda_spec(x->enc[t])->ops->id;
        x->scalars[t] = !t_n(x, t) ? 0.0f /* codec_local_scalar of nothing */
                        : x->local_at[t] >= 0 && (id == CODEC_TERNGRAD || id == CODEC_STOCH3)
                            ? x->local[2 * x->local_at[t] + 1]
                            : NAN;
    }
    comm_allreduce_f32(x->comm, x->scalars, (size_t)x->T, COMM_MAX);
}

/* GCOMP's levels of tensor t's values v (device) into d_levels: exchange.c's
 * make_side. Gradients over the allgather: the optimizer's metric (GCOMP section
 * 5.1; optim_gcomp_levels_at on the device optimizer's state) of the value as it
 * enters the average, v / N; the parameter server's push: delta_levels of the
 * plain-SGD delta (lr v) / N; weight deltas and the server's pull: delta_levels of
 * v / N (v x 1/N) and v. d_lp: the parameters the delta is added to (device) */
static void gcomp_levels(ExchangeCuda *x, int pull, int t, size_t lo, size_t n, const float *v, const float *d_lp,
                         const Optim *opt, double lr) {
    size_t off = t_off(x, t) + lo; /* values [lo, lo + n) of tensor t; v: its value lo */
    uint8_t *lv = x->d_levels + off;
    int guard = opt ? opt->cfg.gcomp_guard_bits : OPT_DEFAULT_GCOMP_GUARD_BITS;
    int deltas = x->d_anchor != NULL;
    if (!deltas && !pull && x->cfg.topology != TOPO_PS) {
        float *scaled = x->d_repr + off; /* scratch: the frame's repr overwrites it */
        exchange_cuda_div(scaled, v, (float)x->N, n);
        optim_gcomp_levels_at_cuda(lv, opt, d_lp + off, scaled, lr, off, n);
    } else if (!deltas && !pull) {
        exchange_cuda_delta_levels(lv, d_lp + off, v, (float)lr, (float)x->N, guard, n);
    } else {
        exchange_cuda_delta_levels(lv, d_lp + off, v, pull ? 1.0f : 1.0f / (float)x->N, 0.0f, guard, n);
    }
}

/* n bytes (a header: at most CUDA_PUT_MAX) from the host into a bundle (x->out or x->in,
 * wherever they live), and back. Into a device bundle by a kernel, in stream order with the
 * frames' kernels: the bundle is complete once its pass ends (pass_done) */
static void to_bundle(const ExchangeCuda *x, uint8_t *dst, const void *src, size_t n) {
    if (x->devb) cuda_put_bytes(dst, src, n);
    else memcpy(dst, src, n);
}
static void from_bundle(const ExchangeCuda *x, void *dst, const uint8_t *src, size_t n) {
    if (x->devb) cudaCheck(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
    else memcpy(dst, src, n);
}

/* the end of an encoding or decoding pass over a bundle: its one wait for the device. The
 * codecs leave their work in stream order (compress/codec_cuda.h); after this a Comm (NCCL's
 * stream, another worker's thread) may read the bundle just written, or overwrite the one
 * just decoded, and the pass's time (x->st.codec_s) includes its kernels */
static void pass_done(void) { cudaCheck(cudaStreamSynchronize(0)); }

/* b = an empty bundle of step (bundle_begin, wherever b lives) */
static void begin(ExchangeCuda *x, ByteBuf *b, long step) {
    uint8_t h[BUNDLE_HDR];
    bundle_header(h, step, 0);
    bytebuf_reserve(b, BUNDLE_HDR);
    to_bundle(x, b->p, h, BUNDLE_HDR);
    b->len = BUNDLE_HDR;
}

/* the bundle's entry count */
static void set_count(ExchangeCuda *x, ByteBuf *b, uint32_t count) {
    uint8_t c[4];
    put_u32(c, count);
    to_bundle(x, b->p + 12, c, 4);
}

/* the entry header at e of tensor t's frame of chunk c, flen bytes: queued with the frames'
 * work in a device bundle */
static void put_entry(ExchangeCuda *x, uint8_t *e, int t, uint32_t c, int64_t flen) {
    uint8_t h[ENTRY_HDR];
    put_u32(h, (uint32_t)t);
    put_u32(h + 4, c);
    put_u32(h + 8, (uint32_t)flen);
    if (x->devb) codec_batch_put(x->batch, e, h, ENTRY_HDR);
    else memcpy(e, h, ENTRY_HDR);
}

/* tensor t's frame of chunk c (0 for whole tensors) of the m values at v, by enc, as the
 * next entry of b, in place (b has room for its largest frame); the frame's length, or a
 * negative GcError with b unchanged. In a device bundle the frame's header, its entry's
 * and fp32's payload are queued in x->batch: the pass flushes it (end_frames) before any
 * of them, the repr of an fp32 frame included, is read */
static int64_t put_frame(ExchangeCuda *x, ByteBuf *b, int t, uint32_t c, CodecCuda *enc, const float *v, size_t m,
                         const CodecSide *side) {
    uint8_t *e = b->p + b->len;
    size_t cap = codec_cuda_max_frame(enc, m);
    int64_t flen = x->devb ? codec_encode_cuda_batched(x->batch, enc, e + ENTRY_HDR, cap, v, m, side)
                           : codec_encode_cuda(enc, e + ENTRY_HDR, cap, v, m, side);
    if (flen < 0) return flen;
    put_entry(x, e, t, c, flen);
    b->len += ENTRY_HDR + (size_t)flen;
    return flen;
}

/* tensor t's frame of a pass could not be encoded (rc): the step's error. Every worker
 * keeps taking part in the collectives; agree() stops them all */
static void encode_failed(ExchangeCuda *x, int pull, int t, int64_t rc) {
    if (pull)
        set_err(x, "server: encoding the pull of tensor %s failed: %s", x->pt->t[t].name, gc_strerror((int)rc));
    else
        set_err(x, "worker %d: encoding tensor %s failed: %s", x->rank, x->pt->t[t].name, gc_strerror((int)rc));
}

/* a pass of frames (exchange.c's EncPass) */
typedef struct {
    float *x;  /* a push's values (d_work, the memory applied), the server's pull's (d_agg),
                * or the ring's running sums (acc) */
    int pull;  /* the server's pull */
    int chunk; /* the ring: chunk c of every tensor, by the ring's encoders of slot; -1: whole tensors */
    int slot;
    int fold;  /* the ring's allgather: acc takes what its own chunk's frames represent */
} EncPass;

/* a device bundle's staged frames, one per tensor with values in the pass in tensor order,
 * laid out in b as put_frame lays them (entries up to the first frame that failed, whose
 * error is the step's; every frame's length in x->flen): one wait for all their lengths
 * (codec_batch_sizes). Returns the entries */
static uint32_t place_frames(ExchangeCuda *x, ByteBuf *b, const EncPass *p) {
    int64_t lens[x->T + 1];
    codec_batch_sizes(x->batch, lens);
    uint32_t count = 0;
    for (int t = 0, i = 0; t < x->T; t++) {
        if (pass_n(x, t, p->chunk, NULL) == 0) continue;
        int64_t flen = x->flen[t] = lens[i++];
        if (t >= x->placed) continue;
        if (flen < 0) {
            encode_failed(x, p->pull, t, flen);
            x->placed = t;
            continue;
        }
        uint8_t *e = b->p + b->len;
        codec_batch_place(x->batch, (size_t)i - 1, e + ENTRY_HDR);
        put_entry(x, e, t, p->chunk < 0 ? 0 : (uint32_t)p->chunk, flen);
        x->fat[t] = b->len + ENTRY_HDR;
        b->len += ENTRY_HDR + (size_t)flen;
        count++;
    }
    return count;
}

/* a pass's queued frame work launched (device bundles), before its results are read */
static void end_frames(ExchangeCuda *x) {
    if (x->batch) codec_batch_flush(x->batch);
}

/* frame fp of flen bytes (in a bundle), the one next_entry found last (at), decoded by dec
 * into out[n] (acc: added), with its probe where open_bundle made one; a frame whose verdict
 * the batch defers (gcomp's, topk's, sbc's, 3lc's) is noted for verdicts() */
static int get_frame(ExchangeCuda *x, CodecCuda *dec, float *out, size_t n, int acc, const uint8_t *fp, size_t flen,
                     FrameAt at) {
    if (!x->devb)
        return acc ? codec_decode_acc_cuda(dec, out, n, 1.0f, fp, flen) : codec_decode_cuda(dec, out, n, fp, flen);
    if (!x->probe)
        return acc ? codec_decode_acc_cuda_dev(dec, out, n, 1.0f, fp, flen) : codec_decode_cuda_dev(dec, out, n, fp, flen);
    int rc = codec_decode_cuda_batched(x->batch, dec, out, n, 1.0f, acc, fp, flen, x->probe);
    if (codec_batch_deferred(x->batch) > x->ndefd) {
        if (x->ndefd == x->cdefd) {
            fprintf(stderr, "internal error: more deferred frames than reserved at %s:%d\n", __FILE__, __LINE__);
            exit(1);
        }
        x->defd[x->ndefd++] = at;
    }
    return rc;
}

/* the step's error for frame at, which its decoder refused with rc (exchange.c's messages) */
static void frame_err(ExchangeCuda *x, FrameAt at, int rc) {
    const char *name = x->pt->t[at.t].name;
    if (at.chunk >= 0)
        set_err(x, "worker %d: bad frame for tensor %s (chunk %d) from worker %d: %s", x->rank, name, at.chunk, at.src,
                gc_strerror(rc));
    else
        set_err(x, "worker %d: %s frame for tensor %s from worker %d: %s", x->rank, at.pull ? "pulled" : "bad", name,
                at.src, gc_strerror(rc));
}

/* the deferred verdicts of the frames decoded so far, once the caller has flushed the batch
 * and waited: the first frame that failed stops the step with its message (what the frames
 * after it wrote is the failed step's, which no worker uses) */
static void verdicts(ExchangeCuda *x) {
    size_t k = x->ndefd;
    if (!k) return;
    codec_batch_verdicts(x->batch, x->vrc);
    x->ndefd = 0;
    for (size_t i = 0; i < k; i++)
        if (x->vrc[i]) {
            frame_err(x, x->defd[i], x->vrc[i]);
            return;
        }
}

/* before an error found while decoding: the deferred verdicts of the frames before it, which
 * name an earlier failure first */
static void verdicts_now(ExchangeCuda *x) {
    if (!x->ndefd) return;
    end_frames(x);
    pass_done();
    verdicts(x);
}

/* bundle_open and bundle_next on a bundle wherever it lives: the headers of a device
 * bundle are copied to the host to be checked, all in one copy when it is opened
 * (exchange_cuda_bundle_heads), each entry's found there in the order they are taken; with
 * probe (a bundle about to be decoded) the frames of those entries are probed on the device
 * too and come back with them (exchange_cuda_read_bundles: one wait for both), for
 * get_frame */
/* entry i of the headers heads (exchange_cuda_bundle_heads' copy): its ENTRY_HDR bytes,
 * and in *at its offset in the bundle */
static const uint8_t *head_at(const uint8_t *heads, uint32_t i, size_t *at) {
    const uint8_t *h = heads + EXCHANGE_HEADS_TOP + (size_t)i * EXCHANGE_HEAD_BYTES;
    *at = (size_t)((uint64_t)get_u32(h + 4) << 32 | get_u32(h));
    return h + 8;
}
/* entry i of x->heads */
static const uint8_t *head(const ExchangeCuda *x, uint32_t i, size_t *at) { return head_at(x->heads, i, at); }

/* how many of the entries in heads h (of a bundle of len bytes) have their frame inside
 * the bundle (the walk's last may not), those exchange_cuda_read_bundles probed */
static uint32_t frames_inside(const uint8_t *h, size_t len) {
    uint32_t n = get_u32(h + BUNDLE_HDR), k = 0;
    for (; k < n; k++) {
        size_t at, flen = get_u32(head_at(h, k, &at) + 8);
        if (flen > len - at - ENTRY_HDR) break;
    }
    return k;
}

/* the N bundles in x->in, about to be decoded one after the other (average_bundles): the
 * entry headers of all of them and their frames' probes in one wait, where opening each
 * bundle took one; open_bundle's ahead then takes bundle src's from there. Nothing is
 * checked here. Whether it read them (device bundles, two or more) */
static int read_ahead(ExchangeCuda *x) {
    if (!x->devb || x->N < 2) return 0;
    const uint8_t *b[x->N];
    size_t at = 0, hb = EXCHANGE_HEADS_BYTES(x->T);
    for (int s = 0; s < x->N; s++) {
        b[s] = x->in.p + at;
        at += x->lens[s];
    }
    exchange_cuda_read_bundles(x->heads_all, x->probes_all, x->d_heads, b, x->lens, (size_t)x->N, (uint32_t)x->T);
    for (int s = 0; s < x->N; s++) x->ahead_probed[s] = frames_inside(x->heads_all + (size_t)s * hb, x->lens[s]);
    return 1;
}

/* ahead: the index of a bundle read_ahead has read, or -1 */
static int open_bundle(ExchangeCuda *x, BundleReader *br, const uint8_t *p, size_t len, long step, int probe,
                       int ahead) {
    if (!x->devb) return bundle_open(br, p, len, step);
    if (ahead >= 0) {
        x->heads = x->heads_all + (size_t)ahead * EXCHANGE_HEADS_BYTES(x->T);
        x->probes = x->probes_all + (size_t)ahead * (size_t)x->T;
    } else {
        x->heads = x->heads_all;
        x->probes = x->probes_all;
        if (probe) exchange_cuda_read_bundles(x->heads, x->probes, x->d_heads, &p, &len, 1, (uint32_t)x->T);
        else exchange_cuda_bundle_heads(x->heads, x->d_heads, p, len, (uint32_t)x->T);
    }
    x->heads_n = get_u32(x->heads + BUNDLE_HDR);
    x->heads_i = 0;
    x->nprobed = 0;
    int rc = bundle_open(br, x->heads, len, step);
    br->p = p;
    if (rc || !probe) return rc;
    x->nprobed = ahead >= 0 ? x->ahead_probed[ahead] : frames_inside(x->heads, len);
    return 0;
}
static int next_entry(ExchangeCuda *x, BundleReader *br, int t, int chunk, const uint8_t **fp, size_t *flen) {
    x->probe = NULL;
    if (!x->devb) return bundle_next(br, t, chunk, fp, flen);
    int rc = bundle_room(br);
    if (rc) return rc;
    uint8_t e[ENTRY_HDR];
    size_t at = 0;
    const uint8_t *h = x->heads_i < x->heads_n ? head(x, x->heads_i, &at) : NULL;
    if (h && at == br->at) {
        memcpy(e, h, ENTRY_HDR);
        if (x->heads_i < x->nprobed) x->probe = &x->probes[x->heads_i];
        x->heads_i++;
    } else { /* past the walk (more entries than tensors): read it where it lies */
        from_bundle(x, e, br->p + br->at, ENTRY_HDR);
    }
    rc = bundle_take(br, t, chunk, e, fp, flen);
    if (rc) x->probe = NULL;
    return rc;
}

/* a pushed frame of flen bytes, of m values of tensor t, encoded by g, in this step's
 * byte counts, with gcomp's size breakdown of the frame (the encoder's own counts: the
 * frame is not read) */
static void count_push(ExchangeCuda *x, int t, size_t m, const CodecCuda *g, int64_t flen) {
    x->st.raw_up += 4 * (uint64_t)m;
    if (!x->pol[t].compressed) return;
    x->st.comp_raw += 4 * (uint64_t)m;
    x->st.comp_bytes += ENTRY_HDR + (uint64_t)flen;
    if (x->pol[t].spec.ops->id != CODEC_GCOMP) return;
    if (codec_cuda_gcomp_parts_last(&x->st.gcomp, g, (size_t)flen)) {
        fprintf(stderr, "internal error: no size breakdown of tensor %d's gcomp frame at %s:%d\n", t, __FILE__,
                __LINE__);
        exit(1);
    }
}

/* --log-layers (exchange_layer_add) of the frames of a push or a ring hop over chunk c (c < 0:
 * whole tensors), as exchange.c's encode_pass counts them: each frame's sums of the values
 * it encoded (at vals), of what it did not represent (d_repr) and of what a sparsifier sent
 * (d_mask), launched for every frame and read back at once */
static void layer_stats(ExchangeCuda *x, int c, CodecCuda *const *enc, const float *vals) {
    if (!exchange_layer_stats(x->ex)) return;
    double *sums = x->d_lsum + 3 * EXCHANGE_LAYER_BLOCKS;
    for (int t = 0; t < x->T; t++) {
        size_t lo, n = pass_n(x, t, c, &lo), at = t_off(x, t) + lo;
        if (x->flen[t] < 0) continue;
        const uint8_t *mask = exchange_codec_sparse(codec_cuda_spec(enc[t])) ? x->d_mask + at : NULL;
        exchange_cuda_layer_sums(sums + 3 * t, vals + at, x->d_repr + at, mask, n, x->d_lsum);
    }
    cudaCheck(cudaMemcpy(x->h_lsum, sums, 3 * (size_t)x->T * sizeof(double), cudaMemcpyDeviceToHost));
    for (int t = 0; t < x->T; t++) {
        const double *s = x->h_lsum + 3 * t;
        if (x->flen[t] < 0) continue;
        double sent = exchange_codec_sparse(codec_cuda_spec(enc[t])) ? s[2] : -1;
        exchange_layer_add(x->ex, t, (double)(ENTRY_HDR + (uint64_t)x->flen[t]), (double)pass_n(x, t, c, NULL), sent,
                           s[0], s[1], x->fsec[t]);
    }
}

/* one bundle of every tensor's frame of pass p into x->out: exchange.c's encode_pass with
 * make_side's side inputs. A push (p->x = d_work, its memory applied by memory_in) is this
 * worker's, and memory_out follows each frame. The server's pull (p->x = d_agg: the model
 * delta, or with gradient pulls the average) adds the pull memory first and keeps what the
 * frame did not represent there (3LC section 3.1). A ring hop's chunk (exchange.c's
 * SIDE_RING pass) applies the memory per chunk to the running sums p->x (d_work = acc +
 * residual; DGC's memory is refused over the ring by exchange_new), its levels are those of
 * a push (the partial sum as it enters the average, / N), the residual keeps what the frame
 * did not represent, and with fold acc takes what the frame represents. Every frame is
 * encoded, its memory and statistics kept; the bundle holds those before the first that
 * failed, whose error is the step's. A worker that failed already sends an empty bundle
 * (its receivers skip it; agree() stops all) */
static void encode_pass(ExchangeCuda *x, const EncPass *p, const float *d_lp, const Optim *opt, double lr, long step,
                        double density) {
    ByteBuf *b = &x->out;
    int pull = p->pull, c = p->chunk, ring = c >= 0;
    int pull_mem = pull && !x->grad_pull;
    int reuse = x->local_ready && !pull && !ring && p->x == x->d_work; /* share_scalars' statistics */
    x->local_ready = 0;
    begin(x, b, step);
    if (x->failed) {
        pass_done();
        return;
    }
    CodecCuda *enc[x->T + 1];
    size_t cap = BUNDLE_HDR;
    for (int t = 0; t < x->T; t++) {
        enc[t] = ring ? ring_codec(x, x->renc, t, p->slot) : pull ? x->penc[t] : x->enc[t];
        size_t m = pass_n(x, t, c, NULL);
        if (m) cap += ENTRY_HDR + codec_cuda_max_frame(enc[t], m);
    }
    bytebuf_reserve(b, cap);
    double t0 = mono_seconds();
    uint32_t count = 0;
    for (int t = 0; t < x->T; t++) x->flen[t] = -1;
    x->placed = x->T;
    size_t sent = 0;
    /* before the first frame, every tensor's (a frame that fails to encode stops every worker
     * at agree(), and the values are the pass's own): the ring's memory_in on the chunk, the
     * running sums plus the residual; the server's pull memory added to its delta */
    float *vals = ring ? x->d_work : p->x;
    if (ring) {
        ranges(x, c, EXCHANGE_RANGE_COPY, x->d_work, p->x, NULL, NULL, RANGES_ALL, 0);
        ranges(x, c, EXCHANGE_RANGE_ADD, x->d_work, x->d_resid, NULL, NULL, MEM_RESIDUAL, 0);
    }
    if (pull_mem) ranges(x, c, EXCHANGE_RANGE_ADD, vals, x->d_pullres, NULL, NULL, RANGES_MEMORY, 0);
    if (!reuse) local_stats(x, enc, vals, c);
    for (int t = 0; t < x->T; t++) { /* the frames, in tensor order */
        size_t lo, n = pass_n(x, t, c, &lo), at = t_off(x, t) + lo;
        if (n == 0) continue;
        float *v = vals + at;
        CodecSide side;
        memset(&side, 0, sizeof side);
        side.seed = exchange_frame_seed(x->ex, step, t, ring ? p->slot : pull ? EXCHANGE_SLOT_PULL : EXCHANGE_SLOT_PUSH);
        side.repr = x->d_repr + at;
        side.mask = pull ? NULL : x->d_mask + at; /* what this worker sent; not the server's pull */
        side.density = density;
        if (!ring && x->share[t] && (!pull || x->grad_pull)) side.scalar = &x->scalars[t];
        if (x->local_at[t] >= 0) side.local = &x->local[2 * x->local_at[t]];
        if (codec_cuda_spec(enc[t])->ops->id == CODEC_GCOMP) {
            gcomp_levels(x, pull, t, lo, n, v, d_lp, opt, lr);
            side.levels = x->d_levels + at;
        }
        double t1 = mono_seconds();
        if (x->stage) { /* staged: laid out below, once every length is known */
            codec_batch_stage(x->batch, enc[t], v, n, &side);
            x->fsec[t] = mono_seconds() - t1;
            continue;
        }
        x->fat[t] = b->len + ENTRY_HDR;
        int64_t flen = x->flen[t] = put_frame(x, b, t, ring ? (uint32_t)c : 0, enc[t], v, n, &side);
        x->fsec[t] = mono_seconds() - t1;
        if (flen < 0 && t < x->placed) {
            encode_failed(x, pull, t, flen);
            x->placed = t;
            sent = b->len;
        }
        if (flen >= 0 && t < x->placed) count++;
    }
    if (x->placed < x->T && !x->stage) b->len = sent; /* the frames after the failed one are not sent,
                                                       * though their memory and statistics follow */
    if (x->stage) count = place_frames(x, b, p);
    end_frames(x);
    /* what follows each frame, once the frames are complete. The server's error accumulation
     * keeps what the pulled frame did not represent (3LC section 3.1) */
    if (pull_mem) ranges(x, c, EXCHANGE_RANGE_SUB, x->d_pullres, vals, x->d_repr, NULL, RANGES_MEMORY, 1);
    if (!pull) layer_stats(x, c, enc, vals);
    for (int t = 0; t < x->T && !pull; t++) {
        size_t n = pass_n(x, t, c, NULL);
        int64_t flen = x->flen[t];
        if (flen < 0 || t >= x->placed) continue;
        /* the server's pull is everyone's down traffic, not its up; the counting is not the
         * codec's time (t0 moves past it, as the host exchange counts after its timer) */
        double tc = mono_seconds();
        count_push(x, t, n, enc[t], flen);
        t0 += mono_seconds() - tc;
    }
    if (!pull) { /* memory_out: the residual keeps what the frame did not represent; DGC masks its momentum */
        ranges(x, c, EXCHANGE_RANGE_SUB, x->d_resid, vals, x->d_repr, NULL, RANGES_MEMORY, 1);
        ranges(x, c, EXCHANGE_RANGE_MASK_ZERO, x->d_vel, NULL, NULL, x->d_mask, MEM_DGC, 1);
    }
    if (p->fold) ranges(x, c, EXCHANGE_RANGE_COPY, p->x, x->d_repr, NULL, NULL, RANGES_ALL, 1);
    set_count(x, b, count);
    pass_done();
    x->st.codec_s += mono_seconds() - t0;
    if (!pull && !ring) x->st.up_bytes += b->len; /* the ring counts its hops */
    if (!pull) x->coded = 1;
}

/* whether the bundle br (len bytes) has no entries where frames (of chunk c; c < 0: whole
 * tensors) were due: its sender failed this step and says so itself (exchange.c's
 * decode_pass). Noted for agree(), which stops every worker (from: the sender); the caller
 * skips the bundle */
static int quiet_bundle(ExchangeCuda *x, const BundleReader *br, size_t len, int c, int from) {
    int due = 0;
    for (int t = 0; t < x->T && !due; t++)
        due = (c < 0 ? t_n(x, t) : exchange_ring_chunk(t_n(x, t), x->N, c, NULL)) > 0;
    if (!due || br->left != 0 || len != BUNDLE_HDR) return 0;
    if (x->quiet_from < 0) x->quiet_from = from;
    return 1;
}

/* the bundle (bytes, len) from worker src, or the server's pull, decoded by dec into
 * dst (acc: added): exchange.c's decode_pass, with its messages; returns the
 * compressed tensors' entry bytes. Its kernels are complete when it returns with wait set,
 * else after the caller's pass_done (several bundles of one buffer, one wait) */
static uint64_t decode_bundle(ExchangeCuda *x, float *dst, const uint8_t *bytes, size_t len, int src, long step,
                              int acc, int pull, int ahead, int wait) {
    BundleReader br;
    int rc = open_bundle(x, &br, bytes, len, step, 1, ahead);
    if (rc) {
        verdicts_now(x);
        if (pull) set_err(x, "worker %d: pull from the server is not a valid frame bundle: %s", x->rank, gc_strerror(rc));
        else set_err(x, "worker %d: message from worker %d is not a valid frame bundle: %s", x->rank, src, gc_strerror(rc));
        return 0;
    }
    if (quiet_bundle(x, &br, len, -1, pull ? 0 : src)) return 0;
    uint64_t comp = 0;
    double t0 = mono_seconds();
    for (int t = 0; t < x->T; t++) {
        size_t n = t_n(x, t), flen = 0;
        if (n == 0) continue;
        const uint8_t *fp = NULL;
        rc = next_entry(x, &br, t, 0, &fp, &flen);
        if (!rc) {
            if (x->pol[t].compressed) comp += ENTRY_HDR + (uint64_t)flen;
            CodecCuda *dec = pull ? x->pdec[t] : dec_of(x, t, src); /* the pull's, or src's */
            rc = get_frame(x, dec, dst + t_off(x, t), n, acc, fp, flen, (FrameAt){t, src, -1, pull});
        }
        if (rc) {
            end_frames(x);
            pass_done();
            verdicts(x);
            x->st.codec_s += mono_seconds() - t0;
            frame_err(x, (FrameAt){t, src, -1, pull}, rc);
            return comp;
        }
    }
    end_frames(x);
    if (wait) {
        pass_done();
        verdicts(x);
    }
    x->st.codec_s += mono_seconds() - t0;
    rc = bundle_close(&br);
    if (rc) verdicts_now(x);
    if (rc && pull) set_err(x, "worker %d: pull bundle: %s", x->rank, gc_strerror(rc));
    else if (rc) set_err(x, "worker %d: bundle from worker %d: %s", x->rank, src, gc_strerror(rc));
    return comp;
}

/* d_agg = the average of the N bundles gathered in x->in (exchange.c's
 * average_bundles): decoded in rank order, the first overwriting, then x 1/N.
 * down: count the other workers' bundles as received */
static void average_bundles(ExchangeCuda *x, long step, int down) {
    size_t at = 0;
    int ahead = !x->failed && read_ahead(x);
    for (int src = 0; src < x->N; src++) {
        uint64_t comp = 0;
        if (!x->failed)
            comp = decode_bundle(x, x->d_agg, x->in.p + at, x->lens[src], src, step, src > 0, 0, ahead ? src : -1, 0);
        if (down && src != x->rank) {
            x->st.down_bytes += x->lens[src];
            x->st.comp_down += comp;
        }
        at += x->lens[src];
    }
    exchange_cuda_scale(x->d_agg, 1.0f / (float)x->N, x->pt->total);
    double t0 = mono_seconds();
    pass_done(); /* every bundle decoded before the Comm may overwrite x->in */
    verdicts(x);
    x->st.codec_s += mono_seconds() - t0;
}

/* exchange.c's avg_allgather of x in d_work (memory applied): share the scalars,
 * encode, gather, average the N bundles */
static int avg_allgather(ExchangeCuda *x, const float *d_lp, const Optim *opt, double lr, long step, double density) {
    share_scalars(x);
    encode_pass(x, &(EncPass){x->d_work, 0, -1, 0, 0}, d_lp, opt, lr, step, density);
    comm_allgatherv(x->comm, &x->in, x->lens, x->out.p, x->out.len);
    average_bundles(x, step, 1);
    return agree(x);
}

/* ---- the ring (GCOMP section 6.2, Figure 8): exchange.c's avg_ring ---- */

/* the bundle in x->in from worker src (the chunk's sender or, in the allgather phase,
 * its owner), chunk c of every tensor decoded by the ring's decoders of slot into acc
 * (add: added): exchange.c's decode_pass of a chunk, its messages and its skipping of
 * an empty bundle (the sender failed and says so in agree) */
static void decode_ring(ExchangeCuda *x, float *acc, int c, int slot, int src, long step, int add) {
    BundleReader br;
    int rc = open_bundle(x, &br, x->in.p, x->in.len, step, 1, -1);
    if (rc) {
        set_err(x, "worker %d: message from worker %d is not a valid frame bundle: %s", x->rank, src, gc_strerror(rc));
        return;
    }
    if (quiet_bundle(x, &br, x->in.len, c, src)) return;
    double t0 = mono_seconds();
    for (int t = 0; t < x->T; t++) {
        size_t lo, m = exchange_ring_chunk(t_n(x, t), x->N, c, &lo), flen = 0;
        if (m == 0) continue;
        const uint8_t *fp = NULL;
        rc = next_entry(x, &br, t, c, &fp, &flen);
        if (!rc) {
            if (x->pol[t].compressed) x->st.comp_down += ENTRY_HDR + (uint64_t)flen;
            rc = get_frame(x, ring_codec(x, x->rdec, t, slot), acc + t_off(x, t) + lo, m, add, fp, flen,
                           (FrameAt){t, src, c, 0});
        }
        if (rc) {
            end_frames(x);
            pass_done();
            verdicts(x);
            x->st.codec_s += mono_seconds() - t0;
            frame_err(x, (FrameAt){t, src, c, 0}, rc);
            return;
        }
    }
    end_frames(x);
    pass_done();
    verdicts(x);
    x->st.codec_s += mono_seconds() - t0;
    rc = bundle_close(&br);
    if (rc) set_err(x, "worker %d: bundle from worker %d: %s", x->rank, src, gc_strerror(rc));
}

/* exchange_ring_forward wherever the bundles live: x->out := x->in; the raw bytes of
 * chunk c it carries, or 0 when x->in is not a valid bundle of step */
static uint64_t forward(ExchangeCuda *x, long step, int c) {
    if (!x->devb) return exchange_ring_forward(&x->out, &x->in, step, x->pt, x->N, c);
    bytebuf_reserve(&x->out, x->in.len);
    bytebuf_copy(&x->out, x->out.p, x->in.p, x->in.len); /* complete when it returns */
    x->out.len = x->in.len;
    BundleReader br;
    return open_bundle(x, &br, x->out.p, x->out.len, step, 0, -1) ? 0 : exchange_ring_raw(x->pt, x->N, c);
}

/* d_agg = the average of every worker's d_x by the ring with the codec at every hop:
 * a reduce-scatter of N - 1 hops, each worker encoding the running sum of one chunk
 * (with its memory; gcomp's levels on the partial sum, GCOMP section 6.2) for its right
 * neighbour, which adds the decoded frame to its own; then the allgather, each chunk's
 * owner encoding its fully reduced chunk once (acc takes what the frame represents) and
 * the frames forwarded unchanged for N - 1 hops; then x 1/N. Slots: chunk c's
 * reduce-scatter frames c, its allgather frames N + c; the bundles go by the Comm's
 * sendrecv */
static int avg_ring(ExchangeCuda *x, const float *d_x, const float *d_lp, const Optim *opt, double lr, long step) {
    int N = x->N, r = x->rank, left = (r + N - 1) % N, right = (r + 1) % N;
    float *acc = x->d_agg;
    if (acc != d_x) cudaCheck(cudaMemcpy(acc, d_x, x->pt->total * sizeof(float), cudaMemcpyDeviceToDevice));
    for (int phase = 0; phase < 2; phase++) {
        if (phase == 1) /* r holds chunk r + 1 */
            encode_pass(x, &(EncPass){acc, 0, right, N + right, 1}, d_lp, opt, lr, step, 0);
        for (int s = 0; s < N - 1; s++) {
            int send_c = phase == 0 ? (r - s + 2 * N) % N : 0;
            int recv_c = phase == 0 ? (r - s - 1 + 2 * N) % N : (r - s + 2 * N) % N;
            if (phase == 0) {
                encode_pass(x, &(EncPass){acc, 0, send_c, send_c, 0}, d_lp, opt, lr, step, 0);
            } else if (s > 0 && x->failed) {
                begin(x, &x->out, step);
                pass_done();
            } else if (s > 0) { /* forward what arrived last hop unchanged, its values counted as sent */
                x->st.raw_up += forward(x, step, (r - s + 1 + 2 * N) % N);
            }
            x->st.up_bytes += x->out.len;
            comm_sendrecv(x->comm, &x->in, left, x->out.p, x->out.len, right);
            x->st.down_bytes += x->in.len;
            if (x->failed) continue; /* keep the ring moving; agree() reports */
            int origin = phase == 0 ? left : (recv_c + N - 1) % N;
            decode_ring(x, acc, recv_c, phase == 0 ? recv_c : N + recv_c, origin, step, phase == 0);
        }
    }
    exchange_cuda_scale(acc, 1.0f / (float)N, x->pt->total);
    return agree(x);
}

/* --clip on the device arena d (the averaged gradient, or a local step's): optim/clip.c's
 * clip_grad_norm by the L2 norm, its blocks summed in its order */
static void clip_norm(ExchangeCuda *x, float *d) {
    float total = (float)sqrt(exchange_cuda_sumsq(d, x->d_lo, x->d_hi, x->nrange, x->d_part));
    if (!isfinite(total)) return;
    float coef = clip_coef(total, x->cfg.clip_norm);
    if (coef < 1.0f) exchange_cuda_scale(d, coef, x->pt->total);
}

/* DGC's local gradient clipping (DGC section 3.2, appendix C) on this worker's gradient
 * d (device): exchange.c's dgc_prepare, the sums of squares of every tensor's blocks
 * added in tensor and block order, the threshold clip * N^-1/2 */
static void dgc_clip(ExchangeCuda *x, float *d) {
    double sq = exchange_cuda_sumsq(d, x->d_lo, x->d_hi, x->nrange, x->d_part);
    double thr = x->cfg.dgc_clip / sqrt((double)x->N), norm = sqrt(sq);
    if (norm > thr) exchange_cuda_scale(d, (float)(thr / (norm + 1e-6)), x->pt->total);
}

/* the optimizer's update from d_agg (exchange.c's apply_gradient): --clip of d_agg, then
 * DGC's tensors by plain SGD (the momentum lives in the memory), the others by opt, each
 * kind's tensors in a launch for every 32 runs of them */
static void apply_gradient(ExchangeCuda *x, float *d_params, Optim *opt, double lr) {
    if (x->cfg.clip_norm > 0 && x->cfg.memory != MEM_DGC) clip_norm(x, x->d_agg);
    optim_begin_step(opt);
    size_t k = take_ranges(x, -1, MEM_DGC, 0);
    optim_sgd_plain_cuda(d_params, x->d_agg, lr, x->roff, x->rn, k);
    k = take_ranges(x, -1, RANGES_NO_DGC, 0);
    optim_update_cuda_ranges(opt, d_params, x->d_agg, lr, x->roff, x->rn, k);
}

/* exchange.c's ps_exchange of x in d_work (memory applied): push frames to the
 * server (rank 0), which averages them. Model-delta pulls (3LC section 3.1): the
 * server updates its global model (the optimizer; with weight deltas the average
 * delta added), encodes the model delta plus its error accumulation once, and every
 * worker adds the pulled delta to its parameters (to the anchor with weight deltas,
 * which the parameters then become). Gradient pulls (TernGrad section 3, Figure 1):
 * the server encodes the average itself (ternsum, 2N+1 levels with the shared
 * scalars) into every worker's d_agg, on which each runs its optimizer
 * (exchange_cuda_optimize). The global model and the pull memory stay on the device. */
static int ps_exchange(ExchangeCuda *x, float *d_params, Optim *opt, double lr, long step, double density) {
    size_t total = x->pt->total;
    int server = x->rank == 0;
    share_scalars(x);
    encode_pass(x, &(EncPass){x->d_work, 0, -1, 0, 0}, d_params, opt, lr, step, density);
    comm_gatherv(x->comm, &x->in, x->lens, x->out.p, x->out.len, 0);
    if (server) average_bundles(x, step, 0);
    int rc = agree(x);
    if (rc) return rc;
    if (server && !x->grad_pull) {
        float *before = x->d_work; /* the push is encoded: d_work is free */
        cudaCheck(cudaMemcpy(before, x->d_global, total * sizeof(float), cudaMemcpyDeviceToDevice));
        if (x->d_anchor) exchange_cuda_add(x->d_global, x->d_agg, total);
        else apply_gradient(x, x->d_global, opt, lr);
        exchange_cuda_sub(x->d_agg, x->d_global, before, total);
    }
    if (server) encode_pass(x, &(EncPass){x->d_agg, 1, -1, 0, 0}, x->d_global ? x->d_global : d_params, opt, lr, step, 0);
    rc = agree(x);
    if (rc) return rc;
    comm_bcast(x->comm, &x->out, 0);
    x->st.down_bytes += x->out.len;
    float *dst = x->grad_pull ? x->d_agg : x->d_anchor ? x->d_anchor : d_params;
    x->st.comp_down += decode_bundle(x, dst, x->out.p, x->out.len, 0, step, !x->grad_pull, 1, -1, 1);
    if (x->d_anchor && !x->failed)
        cudaCheck(cudaMemcpy(d_params, x->d_anchor, total * sizeof(float), cudaMemcpyDeviceToDevice));
    return agree(x);
}

/* SBC section II's momentum masking after an exchange of weight deltas (exchange.c's
 * sbc_mask_momentum): the local optimizer's momentum zeroed where this worker's SBC
 * frames sent a value (d_mask, written by the encoding) */
static void sbc_mask_momentum(ExchangeCuda *x, Optim *opt) {
    size_t k = 0;
    for (int t = 0; t < x->T; t++)
        if (x->pol[t].spec.ops->id == CODEC_SBC) {
            x->roff[k] = t_off(x, t);
            x->rn[k++] = t_n(x, t);
        }
    optim_mask_momentum_cuda(opt, x->d_mask, x->roff, x->rn, k);
}

/* the step's statistics, as exchange.c's finish: the wire counters since
 * exchange_cuda_step began and, after an exchange, the network model (collective) */
static int finish(ExchangeCuda *x, int rc, ExchangeStats *st) {
    Comm *c = x->comm;
    x->st.wire_sent = c->sent - x->sent0;
    x->st.wire_received = c->received - x->recv0;
    if (x->st.exchanged && x->N > 1 && !rc) {
        double mine = (double)(x->st.wire_sent > x->st.wire_received ? x->st.wire_sent : x->st.wire_received);
        double worst = control_max(c, mine);
        x->st.wire_max = (uint64_t)worst;
        x->st.hops = x->cfg.topology == TOPO_ALLGATHER ? 1 : x->cfg.topology == TOPO_PS ? 2 : 2 * (x->N - 1); /* exchange.c's hops */
        if (x->cfg.bandwidth > 0) x->st.comm_model_s = worst * 8.0 / x->cfg.bandwidth + x->st.hops * x->cfg.latency;
    }
    if (st) *st = x->st;
    return rc;
}

int exchange_cuda_step(ExchangeCuda *x, float *d_params, const float *d_grads, Optim *opt, double lr, double epoch,
                       long step, ExchangeStats *st) {
    memset(&x->st, 0, sizeof x->st);
    x->failed = 0;
    x->quiet_from = -1;
    x->err[0] = 0;
    x->sent0 = x->comm->sent;
    x->recv0 = x->comm->received;
    int rc = 0;
    /* a sparsifier's density (DGC's warm-up), as exchange_step */
    const CodecSpec *g = &x->cfg.policy.global;
    int id = g->ops->id;
    if (id == CODEC_DGC || id == CODEC_TOPK || id == CODEC_SBC) {
        double target = codec_param(g, id == CODEC_DGC ? "density" : id == CODEC_TOPK ? "ratio" : "p");
        x->st.density = x->cfg.memory == MEM_DGC ? dgc_warmup_density(target, x->cfg.dgc_warmup, epoch) : target;
    }
    /* the side-input density only overrides the codec when DGC warms up */
    x->side_density = x->cfg.memory == MEM_DGC ? x->st.density : 0;
    size_t bytes = x->pt->total * sizeof(float);
    if (!exchange_started(x->ex) && x->d_global) /* the server's model */
        cudaCheck(cudaMemcpy(x->d_global, d_params, bytes, cudaMemcpyDeviceToDevice));
    if (!x->d_anchor) {
        if (x->cfg.topology == TOPO_ALLREDUCE) {
            avg_allreduce(x, d_grads);
        } else {
            cudaCheck(cudaMemcpy(x->d_work, d_grads, bytes, cudaMemcpyDeviceToDevice));
            if (x->cfg.memory == MEM_DGC && x->cfg.dgc_clip > 0) dgc_clip(x, x->d_work);
            if (x->cfg.topology == TOPO_RING) { /* the memory per chunk, at every hop (not DGC's: refused) */
                rc = avg_ring(x, x->d_work, d_params, opt, lr, step);
            } else {
                memory_in(x, d_params);
                rc = x->cfg.topology == TOPO_PS ? ps_exchange(x, d_params, opt, lr, step, x->side_density)
                                                : avg_allgather(x, d_params, opt, lr, step, x->side_density);
            }
        }
        x->st.exchanged = 1;
    } else if (!exchange_started(x->ex)) { /* weight deltas: the model before the first local step */
        cudaCheck(cudaMemcpy(x->d_anchor, d_params, bytes, cudaMemcpyDeviceToDevice));
    }
    exchange_set_started(x->ex);
    return finish(x, rc, st);
}

void exchange_cuda_optimize(ExchangeCuda *x, float *d_params, const float *d_grads, Optim *opt, double lr) {
    if (exchange_model_pulled(x->ex)) return; /* the pull was the new model: the server's optimizer made it */
    if (x->d_anchor) /* weight deltas: a local step on this worker's own gradient, copied (--clip scales it) */
        cudaCheck(cudaMemcpy(x->d_agg, d_grads, x->pt->total * sizeof(float), cudaMemcpyDeviceToDevice));
    apply_gradient(x, d_params, opt, lr);
}

int exchange_cuda_deltas(ExchangeCuda *x, float *d_params, Optim *opt, long step, ExchangeStats *st) {
    /* exchange_deltas: after every delay-th local step, the delta since the last exchange,
     * averaged over workers, applied to the anchor, which becomes the model */
    if (!x->d_anchor || (step + 1) % x->cfg.delay != 0) return 0;
    int rc = 0;
    exchange_cuda_sub(x->d_work, d_params, x->d_anchor, x->pt->total);
    if (x->cfg.topology == TOPO_ALLREDUCE) {
        avg_allreduce(x, x->d_work);
    } else if (x->cfg.topology == TOPO_RING) {
        rc = avg_ring(x, x->d_work, x->d_anchor, opt, 0, step);
    } else {
        memory_in(x, d_params);
        rc = x->cfg.topology == TOPO_PS ? ps_exchange(x, d_params, opt, 0, step, x->side_density)
                                        : avg_allgather(x, x->d_anchor, opt, 0, step, x->side_density);
    }
    if (!rc && x->cfg.topology != TOPO_PS) { /* ps: the pulled delta went to the anchor */
        exchange_cuda_add(x->d_anchor, x->d_agg, x->pt->total);
        cudaCheck(cudaMemcpy(d_params, x->d_anchor, x->pt->total * sizeof(float), cudaMemcpyDeviceToDevice));
    }
    if (!rc) sbc_mask_momentum(x, opt);
    x->st.exchanged = 1;
    return finish(x, rc, st);
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

void exchange_cuda_optimize(ExchangeCuda *x, float *d_params, const float *d_grads, Optim *opt, double lr) {
    (void)x;
    (void)d_params;
    (void)d_grads;
    (void)opt;
    (void)lr;
}

int exchange_cuda_deltas(ExchangeCuda *x, float *d_params, Optim *opt, long step, ExchangeStats *st) {
    (void)x;
    (void)d_params;
    (void)opt;
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
