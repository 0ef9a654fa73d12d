/* The device-resident exchange (dist/exchange_cuda.h) against the host
 * exchange (dist/exchange.h) on the local backend, 3 worker threads sharing
 * one GPU, a small synthetic parameter table, 3 steps (5 with --delay 2):
 *   - every outgoing bundle (the frames and their entries) byte-identical to
 *     the host exchange's, per worker and exchange (fp16, int8, 3lc, onebit,
 *     topk over allgather, with no memory or a residual; dgc with DGC's memory,
 *     plain and Nesterov, its warm-up density and weight decay folded in;
 *     terngrad and stoch3 with the scalar shared over workers and without;
 *     weight deltas with --delay 2: sbc with its residual and momentum
 *     masking, fp32 and int8 over allgather; --clip of the average, of each
 *     local step's gradient with --delay 2, and DGC's local clipping, each
 *     with a threshold below the gradients' norm); over the parameter server
 *     (ps) every worker's push and the server's pull: 3lc, int8 and topk with
 *     model-delta pulls (3LC section 3.1: the server's optimizer on its global
 *     model, the delta encoded once with its error accumulation), terngrad
 *     with TernGrad's gradient pull (ternsum, 2N+1 levels) and without the
 *     shared scalar (a model-delta pull), 3lc and int8 with --delay 2 (the
 *     average delta added to the global model, the pull into the anchor),
 *     int8 with --clip (of the average, on the server); gcomp (rebuilding
 *     its Huffman tables every 2nd encode) over allgather and ps, every step
 *     and with --delay 2, and with the device exchange downloaded, freed and
 *     made anew before step 2 (a checkpoint and a --resume: the codecs' state
 *     back from the host exchange's codecs);
 *   - after the steps: the parameters, the optimizer state and the residual
 *     (downloaded into the host exchange's checkpoint arena; DGC: also its
 *     momentum; weight deltas: also the anchor; ps: also the server's global
 *     model and its pull memory) bit-identical; the codecs' state (the
 *     checkpoint's "codecs" section: gcomp's tables) byte-identical;
 *     fp32 over allreduce likewise (no bundles there), every step (also with
 *     --clip) and with --delay 2 (federated averaging), on the device arenas
 *     and staged through pinned host memory (the local backend's collectives
 *     under another name, as the device exchange treats mpi: the gradient
 *     down, the Comm's allreduce, the sum up, both copies in the statistics);
 *   - the statistics of the last step (bytes up and down, compressed bytes,
 *     wire bytes, hops; with --delay 2 a step without an exchange) equal;
 *   - a corrupted bundle from worker 1 at step 1 (allgather, and ps: its push;
 *     int8, fp32, 3lc, gcomp),
 *     and a corrupted pull from the server at step 1: every worker stops, with
 *     the host exchange's message for the same corruption, word for word; also
 *     for a gcomp frame whose chunk the CRC does not show corrupted (the
 *     device's verdict on it deferred to the pass's wait), pushed, pulled and
 *     over the ring, and for a 3lc frame whose zero-run stream it does not
 *     show (the probe's check, and, in a table whose fourth tensor is larger
 *     than 3lc's one-block coder takes, the device's deferred verdict), pushed
 *     and pulled; either followed by a frame whose CRC shows its corruption
 *     (the earlier, deferred failure the one named);
 *   - the ring (GCOMP section 6.2): every bundle a worker originates (the
 *     reduce-scatter's chunks of partial sums with their memory, its own
 *     chunk's allgather frame) byte-identical, fp32, int8 with its residual
 *     and gcomp (its levels at every hop, its tables per slot), gcomp across
 *     the exchange made anew and with --delay 2, int8 with --delay 2; a
 *     corrupted hop (gcomp, int8) stops every worker with the host's message
 *     (the worker that read it names it, the others say they stopped).
 * Skips (one passed check) without CUDA or without a GPU; runs on the host
 * emulation (tests/emulation/nn/build.sh). */
#include "tests/test.h"

#ifndef HAVE_CUDA
int main(void) {
    printf("built without CUDA: device exchange parity skipped\n");
    CHECK(1, "skipped");
    TEST_END();
}
#else

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_check.h"
#include "common/rng.h"
#include "compress/base3.h"
#include "compress/codec.h" /* get_u32 */
#include "common/crc32c.h"
#include "compress/gcomp_state.h"
#include "dist/bundle.h"
#include "tests/cuda/gcomp_edit.h"
#include "dist/exchange.h"
#include "dist/exchange_cuda.h"
#include "optim/optim.h"
#include "optim/optim_cuda.h"
#include "tests/tamper_comm.h"

#define W 3
#define STEPS 5        /* at most */
#define MAXB 65536 /* bytes of a bundle kept per worker and step */
#define NT 6       /* the table's tensors (build_table) */

static ParamTable pt;
static int big_table; /* pt's fourth tensor is build_table's big one */
/* big: the fourth tensor of 49,152 values, above what 3lc's one-block coder takes */
static void build_table(int big) {
    big_table = big;
    param_table_init(&pt);
    int s1[4] = {30, 10, 3, 3}, s2[1] = {16}, s3[4] = {20, 25, 2, 5}, s4[2] = {10, 200}, s5[1] = {10};
    int s3big[4] = {64, 64, 3, 4};
    param_table_add(&pt, "conv1.weight", PK_CONV_WEIGHT, 4, s1); /* 2700 */
    param_table_add(&pt, "bn1.weight", PK_BN_WEIGHT, 1, s2);
    param_table_add(&pt, "bn1.bias", PK_BN_BIAS, 1, s2);
    param_table_add(&pt, "layer1.0.conv1.weight", PK_CONV_WEIGHT, 4, big ? s3big : s3); /* 5000 */
    param_table_add(&pt, "fc.weight", PK_FC_WEIGHT, 2, s4);               /* 2000 */
    param_table_add(&pt, "fc.bias", PK_BIAS, 1, s5);
}

/* gradient of worker r at step s: heavy-ish tailed values */
static void make_grad(float *g, int r, long s) {
    Rng rng;
    rng_init(&rng, 1234 + (uint64_t)s, (uint64_t)r);
    for (int t = 0; t < pt.n; t++)
        for (size_t i = 0; i < pt.t[t].numel; i++) {
            float z = rng_normal(&rng);
            g[pt.t[t].offset + i] = 0.01f * z * (1.0f + z * z);
        }
}

/* what one run (host or device) leaves per worker */
typedef struct {
    const char *codec;
    int topology, device, tamper;
    float *params[W], *resid[W], *state[W], *vel[W], *anchor[W], *global[W], *pullres[W];
    uint8_t *bundle[W][STEPS], *pull[STEPS]; /* ps: the server's pull, its second bundle of a step */
    size_t blen[W][STEPS], plen[STEPS];
    int nb[W][STEPS]; /* bundles a worker sent in a step */
    uint64_t hash[W][STEPS]; /* FNV-1a over all of them, in order (the ring: every hop but the forwarded) */
    ExchangeStats st[W];
    int rc[W], nstate, started[W];
    char err[W][512];
    uint8_t *codecs[W]; /* the checkpoint's "codecs" section (gcomp's tables), clen[k] bytes */
    size_t clen[W];
    unsigned long long sent;     /* bytes of every bundle sent, all workers and steps */
    LayerStats layers[W][NT];           /* --log-layers' statistics of the whole run */
    unsigned long long pageable[W];     /* emulation: bytes the steps copied between the GPU and pageable host memory */
    unsigned long long pageable_max[W]; /* ... the largest such copy's */
    unsigned long long waits[W];        /* emulation: times the steps waited for the device */
    unsigned long long ops[W];          /* emulation: operations the steps issued to the device */
    unsigned long long barriers[W];     /* emulation: waits for the whole device after the first exchange */
    int exchanges[W];                   /* device steps that exchanged */
} Run;

static LocalGroup *group;
static int nesterov; /* DGC's Nesterov variant for the next runs */
static int delay = 1; /* --delay of the next runs */
static int steps = 3; /* their steps (<= STEPS) */
static int nan_t;     /* the tensor of nan_frame's NaN */
static double clip;   /* --clip of the next runs (0: off) */
static int staged;    /* the next runs' Comm is not named "local": allreduce stages through the host */
static int recreate;  /* the device runs' exchange downloaded, freed and made anew (uploading the
                       * residual and the codecs' state from the host exchange) before step 2 */

/* bundle b (len bytes) with a frame edited so that its CRC does not show it (the CRC made
 * right): the second gcomp frame without a table, its first chunk's nonzero count one off
 * (the levels' bytes and the sizes kept in agreement), which a frame only decoding its
 * chunk refuses (the device's verdict, which it defers); or, in a bundle without one,
 * 3lc's frame of the most values, the last byte of its zero-run stream a run of 14 (a
 * literal where it was a run), which then no longer expands to the frame's base-3 bytes
 * (the bundle's probe checks it where the frame takes 3lc's one-block coder; the device's
 * verdict, deferred, for a larger one: build_table(1)). later: and the bundle's last frame
 * after it with a payload byte flipped, which its CRC shows (an error the host finds,
 * after the deferred one) */
static void crc_hidden_edit(uint8_t *b, size_t len, int later) {
    int seen = 0;
    uint8_t *edited = NULL, *last = NULL, *tlc = NULL;
    size_t last_len = 0, tlc_len = 0;
    for (size_t at = BUNDLE_HDR; at + ENTRY_HDR <= len;) {
        size_t flen = get_u32(b + at + 8);
        uint8_t *f = b + at + ENTRY_HDR, *pay = f + CODEC_HEADER_SIZE, *h = pay + GCOMP_BLOCK_HDR;
        at += ENTRY_HDR + flen;
        if (at <= len) last = f, last_len = flen;
        if (at <= len && flen > CODEC_HEADER_SIZE + 4 && f[5] == CODEC_3LC && (!tlc || get_u32(f + 8) > get_u32(tlc + 8)))
            tlc = f, tlc_len = flen;
        if (edited || at > len || flen < CODEC_HEADER_SIZE + GCOMP_BLOCK_HDR + GCOMP_CHUNK_HDR ||
            f[5] != CODEC_GCOMP || (get_u16(f + 6) & GCOMP_FLAG_TABLE) || seen++ == 0)
            continue;
        if (!gcomp_nnz_off_by_one(pay, h)) continue;
        put_u32(f + 16, crc32c(0, pay, flen - CODEC_HEADER_SIZE));
        edited = f;
    }
    if (!edited && tlc) {
        uint8_t *z = tlc + tlc_len - 1;
        *z = *z >= B3_RUN0 ? 0 : B3_RUN0 + B3_RUNMAX - 2;
        put_u32(tlc + 16, crc32c(0, tlc + CODEC_HEADER_SIZE, tlc_len - CODEC_HEADER_SIZE));
        edited = tlc;
    }
    if (later && edited && last != edited && last_len > CODEC_HEADER_SIZE) last[last_len - 1] ^= 0x5A;
}

/* keeps each outgoing bundle (a worker's push, then on the ps server its pull);
 * corrupts, at step 1, worker 1's push (tamper 1, as test_dist_exchange) or the
 * server's pull (tamper 2) when asked, or edits a gcomp or 3lc frame of either so that its
 * CRC does not show it (tamper 4 and 5: crc_hidden_edit), and a later frame so that it does
 * (tamper 6, worker 1's push) */
static void keep_fn(uint8_t *b, size_t len, int rank, long step, void *arg) {
    Run *r = arg;
    __atomic_add_fetch(&r->sent, (unsigned long long)len, __ATOMIC_RELAXED);
    if (step >= STEPS) return;
    int k = r->nb[rank][step]++;
    uint64_t h = r->hash[rank][step] ^ 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    r->hash[rank][step] = h;
    if (step == 1 && len > 200 && ((r->tamper == 1 && rank == 1 && k == 0) || (r->tamper == 2 && rank == 0 && k == 1)))
        b[len / 2 + 7] ^= 0x5A;
    if (step == 1 && (((r->tamper == 4 || r->tamper == 6) && rank == 1 && k == 0) || (r->tamper == 5 && rank == 0 && k == 1)))
        crc_hidden_edit(b, len, r->tamper == 6);
    if (len > MAXB || k > 1) return;
    memcpy(k ? r->pull[step] : r->bundle[rank][step], b, len);
    *(k ? &r->plen[step] : &r->blen[rank][step]) = len;
}

/* page-locked memory for the tamper Comm's look at the device bundles, which is not the
 * exchange's traffic through pageable memory */
static void *pinned_alloc(size_t n) {
    void *p = NULL;
    return cudaMallocHost(&p, n) == cudaSuccess ? p : NULL;
}
static void pinned_free(void *p) { cudaFreeHost(p); }
static const ByteAlloc pinned = {.alloc = pinned_alloc, .free = pinned_free};

static void worker(int rank, void *arg) {
    Run *r = arg;
    Comm *comm = tamper_comm_new(comm_local_new(group, rank), keep_fn, r); /* sees the bundles */
    tamper_comm_host_memory(comm, &pinned);
    if (staged) tc_of(comm)->ops.name = "staged"; /* a host backend's path (mpi's) */
    DistConfig cfg;
    dist_config_default(&cfg);
    char err[512];
    CHECK(dist_parse_codec(&cfg, r->codec, err, sizeof err) == 0, "%s: codec: %s", r->codec, err);
    cfg.topology = r->topology;
    cfg.delay = delay;
    cfg.clip_norm = clip;
    cfg.seed = 7;
    cfg.bandwidth = 1e8;
    cfg.latency = 5e-4;
    OptConfig oc;
    opt_config_default(&oc, OPT_SGD);
    oc.momentum = 0.9;
    oc.weight_decay = 1e-3;
    cfg.weight_decay = oc.weight_decay; /* DGC folds it into the gradient (the trainers' setting) */
    cfg.dgc_nesterov = nesterov;
    Exchange *ex = exchange_new(&cfg, comm, &pt, &oc, err, sizeof err);
    CHECK(ex != NULL, "%s: exchange_new: %s", r->codec, err);
    exchange_track_layers(ex, 1); /* --log-layers: the host's encodes or the device exchange's */
    Optim opt;
    optim_init(&opt, &oc, pt.total);
    float *params = r->params[rank], *g = param_arena_alloc(&pt);
    for (int t = 0; t < pt.n; t++) /* the padding between tensors stays zero (nn/params.h) */
        for (size_t i = pt.t[t].offset; i < pt.t[t].offset + pt.t[t].numel; i++)
            params[i] = 0.01f * (float)((i * 7919) % 201) - 1.0f;
    ExchangeCuda *dx = NULL;
    Optim dopt;
    float *dp = NULL, *dg = NULL;
    if (r->device) {
        dx = exchange_cuda_new(ex, comm, &pt, err, sizeof err);
        CHECK(dx != NULL, "%s: exchange_cuda_new: %s", r->codec, err);
        CHECK(optim_init_cuda(&dopt, &oc, pt.total) == 0, "optim_init_cuda");
        cudaCheck(cudaMalloc((void **)&dp, pt.total * sizeof(float)));
        cudaCheck(cudaMalloc((void **)&dg, pt.total * sizeof(float)));
        cudaCheck(cudaMemcpy(dp, params, pt.total * sizeof(float), cudaMemcpyHostToDevice));
    }
    for (long s = 0; s < steps && (!r->device || dx); s++) {
        if (dx && recreate && s == 2) { /* what a checkpoint and a --resume do with it */
            exchange_cuda_download(dx);
            exchange_cuda_free(dx);
            dx = exchange_cuda_new(ex, comm, &pt, err, sizeof err);
            CHECK(dx != NULL, "%s: exchange_cuda_new again: %s", r->codec, err);
            if (!dx) break;
        }
        make_grad(g, rank, s);
        if (r->tamper == 3 && rank == 0 && s == 1) g[pt.t[nan_t].offset + 7] = NAN; /* a frame that fails */
        int rc;
        if (r->device) {
            cudaCheck(cudaMemcpy(dg, g, pt.total * sizeof(float), cudaMemcpyHostToDevice));
            unsigned long long pb = 0, pmax = 0;
#ifdef EMU_PAGEABLE_COPIES
            emu_pageable_copies(&pb, &pmax); /* from here */
#endif
#ifdef EMU_HOST_WAITS
            emu_host_waits();
            emu_device_ops();
            emu_device_barriers();
#endif
            rc = exchange_cuda_step(dx, dp, dg, &dopt, 0.1, (double)s, s, &r->st[rank]);
            if (!rc) exchange_cuda_optimize(dx, dp, dg, &dopt, 0.1);
            if (!rc) rc = exchange_cuda_deltas(dx, dp, &dopt, s, &r->st[rank]);
#ifdef EMU_PAGEABLE_COPIES
            emu_pageable_copies(&pb, &pmax);
#endif
#ifdef EMU_HOST_WAITS
            r->waits[rank] += emu_host_waits();
            r->ops[rank] += emu_device_ops();
            r->barriers[rank] += r->exchanges[rank] ? emu_device_barriers() : 0;
#endif
            r->exchanges[rank] += r->st[rank].exchanged;
            r->pageable[rank] += pb;
            if (pmax > r->pageable_max[rank]) r->pageable_max[rank] = pmax;
            if (rc) snprintf(r->err[rank], sizeof r->err[rank], "%s", exchange_cuda_error(dx));
        } else {
            rc = exchange_step(ex, params, g, &opt, 0.1, (double)s, s, &r->st[rank]);
            if (!rc) exchange_optimize(ex, params, g, &opt, 0.1);
            if (!rc) rc = exchange_deltas(ex, params, g, &opt, s, &r->st[rank]);
            if (rc) snprintf(r->err[rank], sizeof r->err[rank], "%s", exchange_error(ex));
        }
        r->rc[rank] = rc;
        if (rc) break;
    }
    if (dx) {
        cudaCheck(cudaMemcpy(params, dp, pt.total * sizeof(float), cudaMemcpyDeviceToHost));
        optim_cuda_download(&opt, &dopt);
        exchange_cuda_download(dx);
    }
    /* the optimizer's state and the residual, as the checkpoint sees them */
    r->nstate = optim_state_count(&opt);
    for (int i = 0; i < r->nstate && i < 1; i++) {
        OptimState os = optim_state(&opt, i);
        memcpy(r->state[rank], os.data, os.count * sizeof(float));
    }
    float *res = exchange_residual(ex), *vel = exchange_velocity(ex), *anchor = exchange_anchor(ex);
    float *global = exchange_global(ex), *pullres = exchange_pull_residual(ex);
    if (global) memcpy(r->global[rank], global, pt.total * sizeof(float));
    if (pullres) memcpy(r->pullres[rank], pullres, pt.total * sizeof(float));
    if (res) memcpy(r->resid[rank], res, pt.total * sizeof(float));
    if (vel) memcpy(r->vel[rank], vel, pt.total * sizeof(float));
    if (anchor) memcpy(r->anchor[rank], anchor, pt.total * sizeof(float));
    r->started[rank] = exchange_started(ex);
    memcpy(r->layers[rank], exchange_layer_stats(ex), NT * sizeof(LayerStats));
    CkptSection cs[10];
    int ncs = exchange_ckpt_sections(ex, cs, 10, "");
    for (int i = 0; i < ncs; i++)
        if (!strcmp(cs[i].name, "codecs")) {
            r->codecs[rank] = malloc(cs[i].len);
            memcpy(r->codecs[rank], cs[i].data, cs[i].len);
            r->clen[rank] = cs[i].len;
        }
    if (dx) {
        exchange_cuda_free(dx);
        optim_free_cuda(&dopt);
        cudaCheck(cudaFree(dp));
        cudaCheck(cudaFree(dg));
    }
    param_arena_free(g);
    optim_free(&opt);
    exchange_free(ex);
    comm_free(comm);
}

static void run_go(Run *r, const char *codec, int topology, int device, int tamper) {
    memset(r, 0, sizeof *r);
    r->codec = codec;
    r->topology = topology;
    r->device = device;
    r->tamper = tamper;
    for (int k = 0; k < W; k++) {
        r->params[k] = param_arena_alloc(&pt);
        r->resid[k] = param_arena_alloc(&pt);
        r->state[k] = param_arena_alloc(&pt);
        r->vel[k] = param_arena_alloc(&pt);
        r->anchor[k] = param_arena_alloc(&pt);
        r->global[k] = param_arena_alloc(&pt);
        r->pullres[k] = param_arena_alloc(&pt);
        for (int s = 0; s < STEPS; s++) r->bundle[k][s] = calloc(MAXB, 1);
    }
    for (int s = 0; s < STEPS; s++) r->pull[s] = calloc(MAXB, 1);
    group = comm_local_group_new(W);
    comm_local_run(W, worker, r);
    comm_local_group_free(group);
}

static void run_free(Run *r) {
    for (int k = 0; k < W; k++) {
        param_arena_free(r->params[k]);
        param_arena_free(r->resid[k]);
        param_arena_free(r->state[k]);
        param_arena_free(r->vel[k]);
        param_arena_free(r->anchor[k]);
        param_arena_free(r->global[k]);
        param_arena_free(r->pullres[k]);
        for (int s = 0; s < STEPS; s++) free(r->bundle[k][s]);
        free(r->codecs[k]);
    }
    for (int s = 0; s < STEPS; s++) free(r->pull[s]);
}

static unsigned long long sum_u64(const unsigned long long *v) {
    unsigned long long s = 0;
    for (int k = 0; k < W; k++) s += v[k];
    return s;
}
static unsigned long long max_u64(const unsigned long long *v) {
    unsigned long long m = 0;
    for (int k = 0; k < W; k++) m = v[k] > m ? v[k] : m;
    return m;
}

/* the GPU codec copies nothing between the device and the host but its frame and the
 * frame's header words and scalars */
static int frames_only(const char *codec) {
    static const char *const only[] = {"fp32", "fp16", "int8", "3lc", "onebit", "terngrad", "stoch3", "topk", "dgc", "sbc"};
    for (size_t i = 0; i < sizeof only / sizeof only[0]; i++)
        if (!strncmp(codec, only[i], strlen(only[i]))) return 1;
    return 0;
}

/* the frames worker k encodes or decodes in an exchange of every tensor (allgather, ps, ring:
 * every tensor has values in every chunk here) */
static int frame_passes(int topology, int k) {
    if (topology == TOPO_ALLGATHER) return NT * (1 + W); /* its push, everyone's decoded */
    if (topology == TOPO_PS) return k == 0 ? NT * (W + 3) : 2 * NT; /* the server: W pushes in, its pull out */
    if (topology == TOPO_RING) return NT * (3 * W - 2); /* W - 1 hops of partial sums out and in, its own
                                                          * chunk out once and W - 1 chunks in */
    return 0;
}

/* sums of the same values in another order (the device's tree against the host's loop) */
static int close_rel(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(a) + 1e-30; }

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

/* worker k's count (waits for the device, operations issued) per frame pass over its
 * exchanges; -1 where not counted */
static double per_pass(const Run *d, const unsigned long long *count, int topology, int k) {
    int passes = frame_passes(topology, k) * d->exchanges[k];
    return passes > 0 ? (double)count[k] / passes : -1;
}

static void compare(const char *codec, int topology) {
    double worst = -1, worst_ops = -1; /* the most waits and operations per frame pass of a worker */
    Run h, d;
    run_go(&h, codec, topology, 0, 0);
    run_go(&d, codec, topology, 1, 0);
    const char *name = topology_name(topology);
    for (int k = 0; k < W; k++) {
        CHECK(h.rc[k] == 0 && d.rc[k] == 0, "%s %s worker %d: both runs succeed (%s | %s)", codec, name, k, h.err[k],
              d.err[k]);
        for (int s = 0; s < steps && topology != TOPO_ALLREDUCE; s++) {
            int exchanged = (s + 1) % delay == 0; /* no bundle between exchanges */
            CHECK((h.blen[k][s] > 0) == exchanged && h.blen[k][s] == d.blen[k][s] &&
                      memcmp(h.bundle[k][s], d.bundle[k][s], h.blen[k][s]) == 0,
                  "%s %s delay %d worker %d step %d: the bundle is byte-identical (%zu | %zu bytes)", codec, name,
                  delay, k, s, h.blen[k][s], d.blen[k][s]);
            CHECK(h.nb[k][s] == d.nb[k][s] && h.hash[k][s] == d.hash[k][s],
                  "%s %s delay %d worker %d step %d: all %d bundles it sent byte-identical (%d on the device)", codec,
                  name, delay, k, s, h.nb[k][s], d.nb[k][s]);
        }
        for (int s = 0; s < steps && topology == TOPO_PS && k == 0; s++) {
            int exchanged = (s + 1) % delay == 0;
            CHECK((h.plen[s] > 0) == exchanged && h.plen[s] == d.plen[s] && memcmp(h.pull[s], d.pull[s], h.plen[s]) == 0,
                  "%s %s delay %d step %d: the server's pull is byte-identical (%zu | %zu bytes)", codec, name, delay, s,
                  h.plen[s], d.plen[s]);
        }
        CHECK(same_bits(h.global[k], d.global[k], pt.total) && same_bits(h.pullres[k], d.pullres[k], pt.total),
              "%s %s worker %d: the server's global model and pull memory bit-identical", codec, name, k);
        CHECK(same_bits(h.params[k], d.params[k], pt.total), "%s %s worker %d: parameters bit-identical", codec, name,
              k);
        CHECK(same_bits(h.state[k], d.state[k], pt.total), "%s %s worker %d: momentum bit-identical", codec, name, k);
        CHECK(same_bits(h.resid[k], d.resid[k], pt.total), "%s %s worker %d: residual bit-identical", codec, name, k);
        CHECK(same_bits(h.vel[k], d.vel[k], pt.total), "%s %s worker %d: DGC's momentum bit-identical", codec, name, k);
        int stateful = strncmp(codec, "gcomp", 5) == 0;
        CHECK(h.clen[k] == d.clen[k] && (h.clen[k] > 0) == stateful &&
                  (!h.clen[k] || memcmp(h.codecs[k], d.codecs[k], h.clen[k]) == 0),
              "%s %s worker %d: the codecs' state (checkpoint section) byte-identical (%zu | %zu bytes)", codec, name,
              k, h.clen[k], d.clen[k]);
        CHECK(same_bits(h.anchor[k], d.anchor[k], pt.total) && h.started[k] && d.started[k],
              "%s %s worker %d: the anchor bit-identical, the exchange started", codec, name, k);
        for (int t = 0; t < NT; t++) {
            const LayerStats *x = &h.layers[k][t], *y = &d.layers[k][t];
            CHECK(x->frames == y->frames && x->bytes == y->bytes && x->values == y->values && x->sent == y->sent &&
                      close_rel(x->sq_in, y->sq_in) && close_rel(x->sq_err, y->sq_err),
                  "%s %s worker %d %s: --log-layers' statistics (frames %g | %g, bytes %g | %g, sent %g | %g, "
                  "sq_in %.12g | %.12g, sq_err %.12g | %.12g)",
                  codec, name, k, pt.t[t].name, x->frames, y->frames, x->bytes, y->bytes, x->sent, y->sent, x->sq_in,
                  y->sq_in, x->sq_err, y->sq_err);
        }
        const ExchangeStats *a = &h.st[k], *b = &d.st[k];
        CHECK(a->up_bytes == b->up_bytes && a->down_bytes == b->down_bytes && a->raw_up == b->raw_up &&
                  a->comp_raw == b->comp_raw && a->comp_bytes == b->comp_bytes && a->comp_down == b->comp_down &&
                  a->wire_sent == b->wire_sent && a->wire_received == b->wire_received && a->wire_max == b->wire_max &&
                  a->hops == b->hops && a->exchanged == b->exchanged && a->density == b->density &&
                  memcmp(&a->gcomp, &b->gcomp, sizeof a->gcomp) == 0,
              "%s %s worker %d: the step's statistics equal (up %llu | %llu, down %llu | %llu, wire max %llu | %llu, "
              "gcomp's size breakdown %s)",
              codec, name, k, (unsigned long long)a->up_bytes, (unsigned long long)b->up_bytes,
              (unsigned long long)a->down_bytes, (unsigned long long)b->down_bytes, (unsigned long long)a->wire_max,
              (unsigned long long)b->wire_max, memcmp(&a->gcomp, &b->gcomp, sizeof a->gcomp) ? "differs" : "equal");
#ifdef EMU_PAGEABLE_COPIES
        /* the frames stay in device memory or cross by DMA to page-locked bundles: a
         * codec with no host-side working arrays copies only header words and scalars
         * through pageable memory (gcomp's per-chunk sums and tables do go through it) */
        CHECK(!frames_only(codec) || d.pageable_max[k] <= 64,
              "%s %s worker %d: no frame copied through pageable host memory (largest pageable copy %llu bytes)",
              codec, name, k, d.pageable_max[k]);
#endif
#ifdef EMU_HOST_WAITS
        /* the framing (a frame's header and CRC written on the device; a bundle's entry
         * headers read in one copy, and its frames' headers, CRCs and edge bytes in one)
         * leaves fp32, 3lc and the other dense codecs at most 1.25 waits for the device per
         * frame encoded or decoded (their scalars' sums taken for a pass's tensors at once,
         * codec_local_stats_cuda, and their payloads checked with the bundle's probes: int8
         * waited 1.26 to 1.60 times, terngrad 1.10 to 1.36, when each frame waited for its own)
         * (a 3lc frame of up to 8 KiB waits for nothing of its own: its length comes back
         * with the pass's, its stream is checked with the bundle's probes), the bundles' ends,
         * the test's Comm and --log-layers' sums (read once a pass) included; at each wait a
         * GPU idles until the host launches the next small kernel. The code that waited for
         * each 3lc frame and each frame's --log-layers sums gives 1.33 (ps) and 1.74 (ring)
         * for 3lc and 1.46 for fp32 over the ring. The sparsifiers at most 1.0: their
         * decoders' checks made with the bundle's probes, their frames of up to
         * 65,535 values encoded by one kernel and staged, their lengths read
         * with the pass's (1.51 to 2.28 when each waited for its own checks, 1.15 for sbc
         * and 1.19 for topk over the server when their selections waited for their
         * candidates' count). gcomp at most 1.55: none of its own to encode with a table
         * (staged: the table schedule on the host knows the frame's code before its
         * histogram is taken, the layout made on the device, the size breakdown counted by
         * the encoder, its read-back taken with the pass's), none to decode a frame without
         * a table (its headers in the bundle's probe, or checked on the device; its chunks'
         * checks decide on the device whether the output is written, their verdict read
         * with the pass's), one for a frame with a table (its headers and table copied down;
         * the table its decoder's once the verdicts are read); 1.63 to 1.64 over the ring
         * when a frame with a table waited for its chunks' results, 1.51 to 1.96 when every
         * decode did, 1.93 when each decode copied its headers down too, 2.10 when each
         * encode read its own back, 2.10 to 2.29 when such a table took two uploads of its own, 4.93
         * when the encoder read its histograms, sizes and checks one after the other and the
         * breakdown was read from each frame */
        /* no step after the first that exchanged waits for the whole device (an allocation, a free, a
         * cudaDeviceSynchronize), which would make the workers sharing the GPU wait for each
         * other's queued work: the local allreduce of --delay's deltas waited twice a step
         * when it synchronized the device; recreating the exchange (a --resume) allocates */
        CHECK(recreate || d.barriers[k] == 0, "%s %s worker %d: %llu waits for the whole device after the first exchange",
              codec, name, k, d.barriers[k]);
        double per = per_pass(&d, d.waits, topology, k), ops = per_pass(&d, d.ops, topology, k);
        int sparse = !strncmp(codec, "topk", 4) || !strncmp(codec, "dgc", 3) || !strcmp(codec, "sbc");
        int gcomp = !strncmp(codec, "gcomp", 5);
        double most = sparse ? 1.0 : gcomp ? 1.55 : 1.25;
        CHECK(per < 0 || per <= most,
              "%s %s worker %d: %.2f waits for the device per frame pass (at most %.2f)", codec, name, k, per, most);
        /* and issues at most 3 operations to the device per frame pass with fp32, 4.3 with 3lc,
         * 4 with the other dense codecs and 4 with the sparsifiers (launches, copies, CUB calls, stream-ordered allocations):
         * the frames' CRCs, headers, entry headers and fp32's copies launched for a whole pass
         * (CodecBatch), the residual over ranges of tensors, 3lc's and the sparsifiers'
         * small frames encoded and decoded by one launch a batch,
         * scratch from the thread's arena; the code that launched these per frame gives 7.3
         * and 21.4 here, the sparsifiers' selections by several kernels 8.0 to 11.7, and
         * their decoders' kernels a frame 3.7 to 5.0, 3lc's decoders a launch a frame 4.5
         * (the parameter server with --delay 2); the other dense codecs at most 4, their loops
         * and headers queued in the batch and launched CODEC_BATCH frames at once (4.4 when
         * each frame's loop and header took a launch each); gcomp at most 8 (9.1 to 13.0
         * with its encoder's separate uploads and reads); 3lc at most 5 where a tensor is
         * larger than its one-block coder takes (its general coder: six launches and CUB
         * calls to encode, four to decode; 4.4 over the parameter server) */
        double most_ops = !strcmp(codec, "fp32") ? 3.0
                          : sparse               ? 4.0
                          : gcomp                ? 8.0
                          : !strcmp(codec, "3lc") ? (big_table ? 5.0 : 4.3)
                                                 : 4.0;
        CHECK(ops < 0 || ops <= most_ops,
              "%s %s worker %d: %.1f device operations per frame pass (at most %.1f)", codec, name, k, ops, most_ops);
        if (per > worst) worst = per;
        if (ops > worst_ops) worst_ops = ops;
#endif
        uint64_t copied = staged && b->exchanged ? pt.total * sizeof(float) : 0;
        CHECK(a->h2d_bytes == 0 && a->d2h_bytes == 0 && b->h2d_bytes == copied && b->d2h_bytes == copied,
              "%s %s worker %d: the device exchange's copies (%llu up, %llu down; %llu expected)", codec, name, k,
              (unsigned long long)b->h2d_bytes, (unsigned long long)b->d2h_bytes, (unsigned long long)copied);
    }
    char waits[96] = "";
    if (worst >= 0)
        snprintf(waits, sizeof waits, "; %.2f waits and %.1f device operations per frame pass", worst, worst_ops);
    printf("  %-8s %-9s%s%s%s%s%s %s (bundles %llu bytes; pageable copies %llu bytes, largest %llu%s)\n", codec, name,
           nesterov ? " (Nesterov)" : "", delay > 1 ? " --delay 2" : "",
           clip > 0 ? " --clip 1" : "", staged ? " staged" : "", recreate ? " recreated" : "",
           test_failed_ ? "(failures so far)" : "bit-identical", d.sent, sum_u64(d.pageable), max_u64(d.pageable_max),
           waits);
    run_free(&h);
    run_free(&d);
}

/* exchange_cuda_read_bundles on the k bundles d[k] of lens[k] bytes, against
 * exchange_cuda_bundle_heads on each and codec_cuda_probe_frames on the frames inside it
 * (frames[i] of them): the same headers, and the same probes byte for byte */
static int read_bundles_same(uint8_t *const *d, const size_t *lens, const uint32_t *frames, size_t k, uint32_t maxe) {
    size_t hb = EXCHANGE_HEADS_BYTES(maxe);
    uint8_t *heads = malloc(k * hb), *one = malloc(hb), *scratch = NULL;
    CodecProbe *pr = malloc(k * maxe * sizeof *pr + 1), want[16];
    cudaCheck(cudaMalloc((void **)&scratch, k * EXCHANGE_READ_BYTES(maxe)));
    exchange_cuda_read_bundles(heads, pr, scratch, (const uint8_t *const *)d, lens, k, maxe);
    int ok = maxe <= 16;
    for (size_t i = 0; i < k && ok; i++) {
        exchange_cuda_bundle_heads(one, scratch, d[i], lens[i], maxe);
        uint32_t n = get_u32(one + 16);
        ok &= n <= maxe && !memcmp(one, heads + i * hb, 20); /* the bytes written: no padding */
        for (uint32_t j = 0; j < n && ok; j++) {
            size_t at = EXCHANGE_HEADS_TOP + (size_t)j * EXCHANGE_HEAD_BYTES;
            ok &= !memcmp(one + at, heads + i * hb + at, 20);
        }
        const uint8_t *fr[16];
        size_t fl[16];
        for (uint32_t j = 0; j < frames[i]; j++) {
            const uint8_t *h = one + EXCHANGE_HEADS_TOP + (size_t)j * EXCHANGE_HEAD_BYTES;
            fr[j] = d[i] + ((uint64_t)get_u32(h + 4) << 32 | get_u32(h)) + ENTRY_HDR;
            fl[j] = get_u32(h + 8 + 8);
        }
        codec_cuda_probe_frames(want, fr, fl, frames[i]);
        ok &= !memcmp(want, pr + i * maxe, frames[i] * sizeof *pr);
    }
    cudaCheck(cudaFree(scratch));
    free(heads);
    free(one);
    free(pr);
    return ok;
}

/* exchange_cuda_bundle_heads on bundles from a peer (outside bytes): well-formed, with
 * frame lengths past the end, truncated anywhere, random bytes; against the chain of
 * entries the host reader (dist/bundle.c bundle_take) follows, entry for entry, the device
 * copy exactly the bundle's bytes so that a read past them leaves the allocation; and
 * exchange_cuda_read_bundles on each and on all of them at once (more than a launch's
 * groups), and on bundles of frames over several CRC spans, against the headers and
 * codec_cuda_probe_frames on the frames inside */
static void bundle_heads_check(void) {
    enum { MAXE = 6, CASES = 400 };
    Rng r;
    rng_init(&r, 77, 0);
    uint8_t *out = malloc(EXCHANGE_HEADS_BYTES(MAXE)), *scratch = NULL, *all[CASES];
    size_t lens[CASES];
    uint32_t inside[CASES];
    cudaCheck(cudaMalloc((void **)&scratch, EXCHANGE_HEADS_BYTES(MAXE)));
    int f0 = test_failed_, p0 = test_passed_;
    for (int c = 0; c < CASES; c++) {
        uint8_t b[512];
        size_t len = 16;
        for (size_t i = 0; i < 16; i++) b[i] = (uint8_t)rng_u64(&r);
        int ne = (int)(rng_u64(&r) % (MAXE + 3));
        for (int e = 0; e < ne && len + 12 <= sizeof b; e++) {
            uint64_t u = rng_u64(&r);
            uint32_t flen = u % 4 == 0 ? (uint32_t)(u >> 8) : (uint32_t)((u >> 8) % 40); /* some past the end */
            for (int i = 0; i < 8; i++) b[len + i] = (uint8_t)rng_u64(&r);
            for (int i = 0; i < 4; i++) b[len + 8 + i] = (uint8_t)(flen >> (8 * i));
            len += 12;
            for (uint32_t i = 0; i < flen && len < sizeof b; i++) b[len++] = (uint8_t)rng_u64(&r);
        }
        if (c % 3 == 0) len = (size_t)(rng_u64(&r) % (len + 1)); /* cut anywhere */
        uint8_t *d = NULL;
        cudaCheck(cudaMalloc((void **)&d, len ? len : 1));
        if (len) cudaCheck(cudaMemcpy(d, b, len, cudaMemcpyHostToDevice));
        exchange_cuda_bundle_heads(out, scratch, d, len, MAXE);
        all[c] = d;
        lens[c] = len;
        inside[c] = 0;
        /* the host's chain: bundle_take's bounds */
        uint32_t n = 0;
        int ok = !memcmp(out, b, len < 16 ? len : 16);
        for (size_t i = len; i < 16; i++) ok &= out[i] == 0;
        for (size_t at = 16; n < MAXE && at <= len && len - at >= 12; n++) {
            const uint8_t *h = out + EXCHANGE_HEADS_TOP + (size_t)n * EXCHANGE_HEAD_BYTES;
            ok &= n < get_u32(out + 16) && ((uint64_t)get_u32(h + 4) << 32 | get_u32(h)) == at && !memcmp(h + 8, b + at, 12);
            size_t flen = get_u32(b + at + 8);
            if (flen > len - at - 12) {
                n++;
                break;
            }
            at += 12 + flen;
            inside[c] = n + 1;
        }
        ok &= get_u32(out + 16) == n;
        CHECK(ok, "bundle heads, case %d (%zu bytes, %d entries written): the device walk differs from the host's "
                  "(%u entries, device %u)", c, len, ne, n, get_u32(out + 16));
        CHECK(read_bundles_same(&all[c], &lens[c], &inside[c], 1, MAXE),
              "read bundles, case %d (%zu bytes, %u frames inside): the headers or probes differ", c, len, inside[c]);
    }
    CHECK(read_bundles_same(all, lens, inside, CASES, MAXE),
          "read bundles, all %d at once: the headers or probes differ", CASES);
    for (int c = 0; c < CASES; c++) cudaCheck(cudaFree(all[c]));
    { /* frames whose payloads take several CRC spans (256 KiB each with blocks of 256
       * threads), exact multiples among them, in bundles read one and three at once */
        enum { NB = 3, NP = 7 };
        static const size_t pls[NP] = {262143, 262144, 262145, 524288, 524309, 0, 5};
        uint8_t *bd[NB];
        size_t bl[NB];
        uint32_t bi[NB];
        for (int q = 0; q < NB; q++) {
            size_t cap = 16;
            for (int i = 0; i < NP; i++) cap += 12 + 20 + pls[i];
            uint8_t *h = malloc(cap);
            size_t len = 16;
            for (size_t i = 0; i < 16; i++) h[i] = (uint8_t)rng_u64(&r);
            for (bi[q] = 0; bi[q] < MAXE; bi[q]++) {
                size_t flen = 20 + pls[(bi[q] + (uint32_t)q) % NP];
                for (int i = 0; i < 8; i++) h[len + i] = (uint8_t)rng_u64(&r);
                for (int i = 0; i < 4; i++) h[len + 8 + i] = (uint8_t)(flen >> (8 * i));
                len += 12;
                for (size_t i = 0; i < flen; i++) h[len++] = (uint8_t)rng_u64(&r);
            }
            bl[q] = len;
            cudaCheck(cudaMalloc((void **)&bd[q], len));
            cudaCheck(cudaMemcpy(bd[q], h, len, cudaMemcpyHostToDevice));
            free(h);
            CHECK(read_bundles_same(&bd[q], &bl[q], &bi[q], 1, MAXE),
                  "read bundles of payloads over several spans, bundle %d: the headers or probes differ", q);
        }
        CHECK(read_bundles_same(bd, bl, bi, NB, MAXE),
              "read bundles of payloads over several spans, %d at once: the headers or probes differ", NB);
        for (int q = 0; q < NB; q++) cudaCheck(cudaFree(bd[q]));
    }
    printf("  bundle heads of %d bundles (malformed, truncated): %d checks, %d failed\n", CASES,
           test_passed_ + test_failed_ - p0 - f0, test_failed_ - f0);
    cudaCheck(cudaFree(scratch));
    free(out);
}

static void corrupt(const char *codec, int topology, int tamper) {
    Run h, d;
    run_go(&h, codec, topology, 0, tamper);
    run_go(&d, codec, topology, 1, tamper);
    for (int k = 0; k < W; k++) {
        CHECK(h.rc[k] != 0 && d.rc[k] == h.rc[k], "%s worker %d: stops on the corrupt bundle (%d | %d)", codec, k,
              h.rc[k], d.rc[k]);
        CHECK(h.err[k][0] && !strcmp(h.err[k], d.err[k]), "%s worker %d: the host's message ('%s' | '%s')", codec, k,
              h.err[k], d.err[k]);
    }
    printf("  corrupt %s %s%s%s: '%s' / '%s'\n", codec, topology_name(topology), tamper == 2 || tamper == 5 ? " pull" : "",
           tamper == 6 ? " (its CRC made right, a later frame's wrong)" : tamper >= 4 ? " (its CRC made right)" : "",
           d.err[0],
           d.err[1]);
    run_free(&h);
    run_free(&d);
}

/* worker 0's gradient with a NaN at step 1 in tensor t (conv1.weight, the first, or
 * layer1.0.conv1.weight, the fourth, after three frames that encode), which the codec refuses to encode: both
 * exchanges stop with the host's message, and what the failed step left (residual,
 * parameters, the server's model and pull memory, --log-layers' statistics of the frames
 * encoded after the failed one) is the same */
static void nan_frame(const char *codec, int topology, int t) {
    nan_t = t;
    Run h, d;
    run_go(&h, codec, topology, 0, 3);
    run_go(&d, codec, topology, 1, 3);
    const char *name = topology_name(topology);
    for (int k = 0; k < W; k++) {
        CHECK(h.rc[k] != 0 && d.rc[k] == h.rc[k], "%s %s worker %d: a frame fails (%d | %d)", codec, name, k, h.rc[k],
              d.rc[k]);
        CHECK(h.err[k][0] && !strcmp(h.err[k], d.err[k]), "%s %s worker %d: the host's message ('%s' | '%s')", codec,
              name, k, h.err[k], d.err[k]);
        CHECK(same_bits(h.resid[k], d.resid[k], pt.total) && same_bits(h.params[k], d.params[k], pt.total) &&
                  same_bits(h.global[k], d.global[k], pt.total) && same_bits(h.pullres[k], d.pullres[k], pt.total),
              "%s %s worker %d: the residual, parameters, global model and pull memory bit-identical after it", codec,
              name, k);
        for (int t = 0; t < NT; t++) {
            const LayerStats *a = &h.layers[k][t], *b = &d.layers[k][t];
            CHECK(a->frames == b->frames && a->bytes == b->bytes && close_rel(a->sq_in, b->sq_in) &&
                      close_rel(a->sq_err, b->sq_err),
                  "%s %s worker %d %s: --log-layers' statistics after it (frames %g | %g, bytes %g | %g, sq_err %.9g | "
                  "%.9g)", codec, name, k, pt.t[t].name, a->frames, b->frames, a->bytes, b->bytes, a->sq_err, b->sq_err);
        }
    }
    printf("  failing frame %s %s in %s: '%s'\n", codec, name, pt.t[t].name, d.err[0]);
    run_free(&h);
    run_free(&d);
}

/* The local backend's copies between the workers' device memory wait once a collective
 * (ByteAlloc.settle, dist/comm_local.c): W workers allgather a device buffer into device
 * memory and each overwrites what it published as soon as the collective returns, as a
 * next step would; a peer's copy still running then would read the new bytes. On the
 * emulation, whose streams' check stops a run where another stream's copy may still read
 * memory that is written, a collective without the settle fails here */
static void dev_copy(void *d, const void *src, size_t n) { cudaCheck(cudaMemcpy(d, src, n, cudaMemcpyDefault)); }
static void dev_settle(void) { cudaCheck(cudaStreamSynchronize(0)); }
static void *dev_alloc(size_t n) {
    void *p = NULL;
    return cudaMalloc(&p, n) == cudaSuccess ? p : NULL;
}
static void dev_free(void *p) {
    if (p) cudaCheck(cudaFree(p));
}
static const ByteAlloc settled = {
    .alloc = dev_alloc, .free = dev_free, .copy = dev_copy, .device = 1, .settle = dev_settle};
static int settle_ok[W];
static void settle_worker(int rank, void *arg) {
    (void)arg;
    enum { B = 4096 };
    Comm *c = comm_local_new(group, rank);
    uint8_t *mine = dev_alloc(B), h[W * B];
    cudaCheck(cudaMemset(mine, rank + 1, B));
    cudaCheck(cudaStreamSynchronize(0));
    ByteBuf out = {0};
    out.mem = &settled;
    size_t lens[W];
    for (int round = 0; round < 3; round++) {
        comm_allgatherv(c, &out, lens, mine, B);
        cudaCheck(cudaMemset(mine, 0xEE, B)); /* at once: the next step's bytes */
        cudaCheck(cudaMemcpy(h, out.p, sizeof h, cudaMemcpyDeviceToHost));
        int ok = out.len == sizeof h;
        for (size_t i = 0; i < sizeof h && ok; i++) ok = h[i] == (round ? 0xEE : (uint8_t)(i / B + 1));
        settle_ok[rank] += ok;
        comm_barrier(c); /* every peer has read mine before it is published again */
    }
    bytebuf_free(&out);
    dev_free(mine);
    comm_free(c);
}
static void settle_check(void) {
    group = comm_local_group_new(W);
    comm_local_run(W, settle_worker, NULL);
    comm_local_group_free(group);
    for (int k = 0; k < W; k++)
        CHECK(settle_ok[k] == 3, "local allgather of device memory, worker %d: %d of 3 rounds gathered every byte", k,
              settle_ok[k]);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* the lines so far, should a run crash */
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("no CUDA device: device exchange parity skipped\n");
        CHECK(1, "skipped");
        TEST_END();
    }
    build_table(0);
    CHECK(pt.n == NT, "the table has NT tensors");
    settle_check();
    bundle_heads_check();
    compare("fp32", TOPO_ALLREDUCE);
    const char *codecs[] = {"fp16", "int8", "3lc", "onebit", "topk:ratio=0.05", "fp32"};
    for (size_t i = 0; i < sizeof codecs / sizeof codecs[0]; i++) compare(codecs[i], TOPO_ALLGATHER);
    compare("dgc", TOPO_ALLGATHER); /* DGC's memory: momentum correction, masking, warm-up density */
    nesterov = 1;
    compare("dgc", TOPO_ALLGATHER);
    nesterov = 0;
    /* TernGrad's scalar sharing (terngrad by default, stoch3 with share=1), and without */
    const char *scalar[] = {"terngrad", "stoch3:share=1", "stoch3", "terngrad:share=0"};
    for (size_t i = 0; i < sizeof scalar / sizeof scalar[0]; i++) compare(scalar[i], TOPO_ALLGATHER);
    /* weight deltas: SBC Algorithm 1 (its residual, momentum masking), federated averaging */
    delay = 2;
    steps = 5; /* exchanges after steps 1 and 3, then a local step */
    compare("sbc", TOPO_ALLGATHER);
    compare("fp32", TOPO_ALLGATHER);
    compare("int8", TOPO_ALLGATHER);
    compare("fp32", TOPO_ALLREDUCE);
    /* each local step's gradient clipped (a worker's gradient's norm is about 4.6) */
    clip = 1;
    compare("sbc", TOPO_ALLGATHER);
    delay = 1;
    steps = 3;
    /* the average clipped (its norm is about 2.7), and DGC's local clipping at 1 x 3^-1/2 */
    compare("int8", TOPO_ALLGATHER);
    compare("fp32", TOPO_ALLREDUCE);
    clip = 0;
    compare("dgc:clip=1", TOPO_ALLGATHER);
    /* fp32's allreduce over a host backend: staged through pinned host memory */
    staged = 1;
    compare("fp32", TOPO_ALLREDUCE);
    delay = 2;
    steps = 5;
    compare("fp32", TOPO_ALLREDUCE);
    delay = 1;
    steps = 3;
    staged = 0;
    /* the parameter server: model-delta pulls (3LC section 3.1) with 3lc (its default s),
     * int8 and topk; TernGrad's gradient pull (ternsum) and, without the shared scalar,
     * terngrad's model-delta pull; the average clipped on the server; weight deltas */
    const char *ps[] = {"3lc", "int8", "topk:ratio=0.05", "terngrad", "terngrad:share=0"};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) compare(ps[i], TOPO_PS);
    clip = 1;
    compare("int8", TOPO_PS);
    clip = 0;
    delay = 2;
    steps = 5;
    compare("3lc", TOPO_PS);
    compare("int8", TOPO_PS);
    delay = 1;
    steps = 3;
    corrupt("int8", TOPO_ALLGATHER, 1);
    nan_frame("3lc", TOPO_ALLGATHER, 0); /* staged frames */
    nan_frame("3lc", TOPO_PS, 0);
    nan_frame("int8", TOPO_ALLGATHER, 0); /* frames encoded in place */
    nan_frame("dgc", TOPO_ALLGATHER, 0);  /* staged: its length read with the pass's */
    nan_frame("dgc", TOPO_ALLGATHER, 3);
    nan_frame("sbc", TOPO_ALLGATHER, 0);
    nan_frame("topk:ratio=0.05", TOPO_PS, 0);
    nan_frame("topk:ratio=0.05", TOPO_PS, 3);
    nan_frame("3lc", TOPO_RING, 0);       /* worker 0's first hop: the chunks after it encoded, not sent */
    nan_frame("int8", TOPO_RING, 0);
    corrupt("fp32", TOPO_ALLGATHER, 1);
    corrupt("3lc", TOPO_PS, 1);
    corrupt("3lc", TOPO_PS, 2);
    corrupt("terngrad", TOPO_PS, 2);
    /* GCOMP (its state between steps: the Huffman tables, rebuilt every 2nd encode here
     * so they change and travel within the run; its levels from the device optimizer's
     * state, or delta_levels on the parameter server and with weight deltas) */
    compare("gcomp:every=2", TOPO_ALLGATHER);
    compare("gcomp:every=2", TOPO_PS);
    steps = 5;
    recreate = 1;
    compare("gcomp:every=2", TOPO_ALLGATHER);
    compare("gcomp:every=2", TOPO_PS);
    recreate = 0;
    delay = 2;
    compare("gcomp:every=2", TOPO_ALLGATHER);
    compare("gcomp:every=2", TOPO_PS);
    delay = 1;
    steps = 3;
    corrupt("gcomp", TOPO_ALLGATHER, 1);
    corrupt("gcomp", TOPO_PS, 2);
    corrupt("gcomp", TOPO_ALLGATHER, 4); /* refused by the chunks' checks: the verdict the device defers */
    corrupt("gcomp", TOPO_PS, 4);
    corrupt("gcomp", TOPO_PS, 5);
    corrupt("gcomp", TOPO_ALLGATHER, 6); /* the deferred failure reported, not the later frame's */
    corrupt("3lc", TOPO_PS, 4);          /* refused by the zero-run stream's check (the probe's) */
    /* the ring (GCOMP section 6.2): chunks, the codec at every hop on the partial sums
     * with the memory per chunk; gcomp's levels at every hop, its tables per slot */
    compare("fp32", TOPO_RING);
    compare("int8", TOPO_RING);
    compare("3lc", TOPO_RING); /* staged frames, a chunk's */
    compare("gcomp:every=2", TOPO_RING);
    steps = 5;
    recreate = 1;
    compare("gcomp:every=2", TOPO_RING);
    recreate = 0;
    delay = 2;
    compare("gcomp:every=2", TOPO_RING);
    compare("int8", TOPO_RING);
    delay = 1;
    steps = 3;
    corrupt("gcomp", TOPO_RING, 1);
    corrupt("gcomp", TOPO_RING, 4);
    corrupt("int8", TOPO_RING, 1);
    /* 3lc's general coder (a tensor above the one-block coder's 40,960 values): its frames
     * staged, and a stream its CRC does not show corrupted refused by the device's deferred
     * verdict, pushed and pulled, and before a frame whose CRC shows its corruption */
    param_table_free(&pt);
    build_table(1);
    compare("3lc", TOPO_PS);
    corrupt("3lc", TOPO_PS, 4);
    corrupt("3lc", TOPO_PS, 5);
    corrupt("3lc", TOPO_ALLGATHER, 6);
    param_table_free(&pt);
    TEST_END();
}
#endif
