/* The exchange: one data-parallel step of the distributed layer.
 *
 * For each tensor of the parameter table the policy (dist/policy.h) picks a
 * codec; the error-feedback memory adds what was not sent before; the codec
 * encodes a frame; the topology moves frames between workers; peers decode and
 * aggregate; the memory keeps what the frame did not represent; then the
 * optimizer steps on the average (docs/DIST.md has the whole story and the
 * byte accounting).
 *
 * Three roles stay apart: codecs (compress/) know nothing of networks, the
 * memory knows nothing of frames, and the topology (this file + dist/comm.h)
 * never looks inside a frame.
 *
 * Topologies
 *   allreduce  uncompressed sum over a Comm allreduce (the baseline)
 *   allgather  every worker's frames go to every worker; each decodes all of
 *              them in rank order and averages (identical result everywhere)
 *   ps         parameter server: workers push frames to rank 0 (also a
 *              worker), which averages them. 3LC (sections 2-3) and its
 *              baselines: the server applies the optimizer to the global
 *              model, compresses the model delta ONCE with its own
 *              error-accumulation buffer and broadcasts that frame; every
 *              worker applies the same pulled delta to its model. TernGrad
 *              (section 3, Figure 1): the server broadcasts the average
 *              itself, 2N+1 levels with the shared scalars (codec ternsum),
 *              and every worker applies the optimizer to its own model
 *   ring       ring allreduce (reduce-scatter, then allgather) with the codec
 *              applied at every hop to the partial sums (GCOMP section 6.2)
 *
 * What is exchanged
 *   gradients  (default) every step (exchange_step); then the optimizer runs
 *              on the average (exchange_optimize; DGC tensors: plain SGD, the
 *              momentum lives in the memory)
 *   deltas     with --delay N (and always for sbc, SBC Algorithm 1): every
 *              worker runs N local optimizer steps (exchange_optimize on its
 *              own gradient), then exchanges its weight delta since the last
 *              exchange (exchange_deltas); the average delta is applied to
 *              the shared model (federated averaging with --codec fp32)
 */
#ifndef GC_EXCHANGE_H
#define GC_EXCHANGE_H

#include <stdint.h>
#include <stdio.h>

#include "compress/gcomp.h"
#include "dist/comm.h"
#include "dist/dist_config.h"
#include "dist/policy.h"
#include "nn/params.h"
#include "optim/optim.h"


typedef struct {
    int exchanged;        /* 1 when this step exchanged (delay) */
    uint64_t up_bytes;    /* bytes of frames this worker sent (one copy; ring: all hops) */
    uint64_t down_bytes;  /* bytes of frames this worker received */
    uint64_t raw_up;      /* fp32 bytes of the values in those up frames (4 per value) */
    uint64_t comp_raw, comp_bytes; /* the same for the compressed tensors alone: 4 x values, and
                                      bytes of their frames (headers included) this worker encoded */
    uint64_t comp_down;   /* bytes of the compressed tensors' frames (headers included) among down_bytes:
                             what is left of down_bytes is uncompressed tensors and bundle headers */
    uint64_t wire_sent, wire_received; /* on this rank's link, per the Comm's accounting */
    double codec_s;       /* seconds in the encoding and decoding passes (wall time; with each
                             tensor's side inputs and error-feedback update) */
    double comm_model_s;  /* modeled network time of the exchange (same on all ranks) */
    uint64_t wire_max;    /* the network model's input: the largest of any rank's bytes sent or
                             received this step (same on all ranks; 0 without an exchange) */
    int hops;             /* the model's message hops this step (0 without an exchange), so that
                             wire_max x 8 / B + hops x latency models any bandwidth B afterwards */
    double density;       /* sparsifier density used this step (DGC warm-up), 0 if none */
    uint64_t h2d_bytes, d2h_bytes; /* the device-resident exchange's copies between host and
                                      device memory (fp32's allreduce over a host backend stages
                                      the gradient); 0 on the host exchange */
    double copy_s;        /* the seconds those copies took */
    GcompParts gcomp;     /* what this worker's gcomp frames spent their bytes on (up frames) */
} ExchangeStats;

typedef struct Exchange Exchange;

/* Per-tensor statistics of what this worker encoded (exchange_track_layers;
 * the trainers' --log-layers), summed over the encodes since the last reset */
typedef struct {
    double frames;  /* encodes (ring: every chunk of every hop) */
    double bytes;   /* their frame bytes, entry headers included */
    double values;  /* the values they carried */
    double sent;    /* of those, the values a sparsifier sent (its mask); -1: a dense codec */
    double sq_in;   /* sum of x^2 over the values (x: what the codec was given, memory included) */
    double sq_err;  /* sum of (x - what the frame represents)^2 */
    double seconds; /* encoding time */
} LayerStats;

/* Creates the exchange for one worker. opt is this worker's optimizer (on the
 * parameter server, rank 0's optimizer is the server's). Prints nothing.
 * NULL with a message on an impossible configuration. */
Exchange *exchange_new(const DistConfig *cfg, Comm *comm, const ParamTable *pt, const OptConfig *opt, char *err,
                       size_t errlen);
void exchange_free(Exchange *ex);
/* the resolved configuration and per-tensor policy */
const DistConfig *exchange_config(const Exchange *ex);
const TensorPolicy *exchange_policy(const Exchange *ex);
/* the memory kind of tensor t (MEM_NONE for a tensor sent uncompressed), and the
 * error-feedback arena (resid, [pt->total]; NULL without memory) that the
 * checkpoint sections save: the device-resident exchange (dist/exchange_cuda.h)
 * keeps its residual on the device and copies it here for a checkpoint */
int exchange_memory_kind(const Exchange *ex, int t);
float *exchange_residual(Exchange *ex);
/* DGC's momentum (vel, [pt->total]; NULL without DGC's memory), likewise */
float *exchange_velocity(Exchange *ex);
/* with weight deltas, the model at the last exchange (anchor, [pt->total]; NULL
 * when gradients are exchanged), likewise ("ex.anchor") */
float *exchange_anchor(Exchange *ex);
/* 1 once a step has run (or a checkpoint after step > 0 was loaded): the anchor
 * holds the model at the last exchange. The device-resident exchange, which steps
 * in place of exchange_step, marks it started after its first step */
int exchange_started(const Exchange *ex);
/* the parameter server (TOPO_PS): 1 when the workers pull the averaged gradient
 * (TernGrad's ternsum), 0 when they pull the server's model delta (3LC) */
int exchange_grad_pull(const Exchange *ex);
/* the codec of tensor t's pull frames on the parameter server: with gradient
 * pulls ternsum (2N+1 levels) or fp32, else the policy's */
const CodecSpec *exchange_pull_spec(const Exchange *ex, int t);
/* the seed of this worker's frame of tensor t in codec slot `slot` (below) at step:
 * what the host and the device exchange give every encode, so their frames match */
uint64_t exchange_frame_seed(const Exchange *ex, long step, int t, int slot);
/* The ring (GCOMP section 6.2), as the host and the device exchange run it: chunk c
 * (0..N-1) of a tensor of n values among N workers. Returns its values; *lo (when not
 * NULL) receives its first */
size_t exchange_ring_chunk(size_t n, int N, int c, size_t *lo);
/* the raw bytes (4 per value) of chunk c of every tensor of pt */
uint64_t exchange_ring_raw(const ParamTable *pt, int N, int c);
/* an allgather hop's forward: out := the bundle that arrived (in) unchanged; returns
 * the raw bytes of chunk c (exchange_ring_raw) that it carries, which the forwarder
 * counts as sent, or 0 when in is not a valid bundle of step */
uint64_t exchange_ring_forward(ByteBuf *out, const ByteBuf *in, long step, const ParamTable *pt, int N, int c);
/* rank 0 of a parameter server with model-delta pulls: the global model and the
 * error accumulation of the pulled deltas ([pt->total]; NULL elsewhere), likewise
 * ("ex.global", "ex.pullres") */
float *exchange_global(Exchange *ex);
float *exchange_pull_residual(Exchange *ex);
void exchange_set_started(Exchange *ex);
/* 1 when tensor t's frames use the scalar shared over workers (TernGrad section
 * 3.1: the allreduce-max of every worker's scalar; terngrad by default, stoch3
 * with share=1) */
int exchange_shares_scalar(const Exchange *ex, int t);
/* the host codec instance of tensor t in one slot, whose state (gcomp's tables)
 * the "codecs" checkpoint section saves; the device-resident exchange copies its
 * GPU codecs' state here for a checkpoint and back after a --resume. decoder: 0
 * the encoders, 1 the decoders. Slots (N workers): the encoder of this worker's
 * push or allgather frames EXCHANGE_SLOT_PUSH, the server's pull encoder
 * EXCHANGE_SLOT_PULL, the decoder of worker src's frames src, the pull's decoder
 * EXCHANGE_SLOT_PULLED(N); the ring: chunk c's reduce-scatter frames c, its
 * allgather frames N + c (encoder and decoder). create: make it when this run has
 * not used it yet (else NULL then); NULL for a slot out of range */
enum { EXCHANGE_SLOT_PUSH = 0, EXCHANGE_SLOT_PULL = 1 };
#define EXCHANGE_SLOT_PULLED(N) (2 * (N) + 1)
Codec *exchange_codec(Exchange *ex, int t, int decoder, int slot, int create);
/* human summary: topology, memory, what is exchanged, and the per-tensor policy as a
 * table (table = 1) or one line (rank 0 prints it) */
void exchange_print(const Exchange *ex, FILE *fp, int table);

/* One training step after backward is three calls, the optimizer between them
 * (examples/trainer.c: train_step):
 *     exchange_step(ex, params, grads, opt, lr, epoch, step, &st);  // the average gradient
 *     exchange_optimize(ex, params, grads, opt, lr);                // the optimizer on it
 *     exchange_deltas(ex, params, grads, opt, step, &st);           // --delay: the weight deltas
 * (each call after a failed one is skipped; every rank fails alike).
 *
 * exchange_step: grads (arena, may be modified) hold this worker's gradient.
 * With gradients exchanged it averages them over the workers into the
 * exchange (error feedback, DGC's local clipping, weight decay and momentum
 * correction applied on the way); on a parameter server with model-delta pulls
 * (exchange_model_pulled) it runs the whole protocol, the server's optimizer
 * on its global model included, and params (arena) are the pulled new model.
 * With weight deltas it only notes the model before the first local step.
 * opt is read for GCOMP's levels (and is the server's optimizer on rank 0 of
 * a parameter server). epoch is fractional (DGC warm-up). step counts the
 * training steps before this one (0, 1, 2, ..., the same on every worker,
 * continued after a resume): it seeds the stochastic codecs, and with --delay
 * N the workers exchange after the steps where (step + 1) % N == 0. Returns
 * 0, or a negative GcError with a message in exchange_error() naming the
 * tensor and the peer; every rank returns the error (no rank is left
 * waiting). st: this step's statistics (exchange_deltas completes them). */
int exchange_step(Exchange *ex, float *params, float *grads, Optim *opt, double lr, double epoch, long step,
                  ExchangeStats *st);
/* 1 on a parameter server whose workers pull the server's model delta (3LC
 * section 3.1): exchange_step made the new model, and exchange_optimize does
 * nothing (the server's optimizer ran on the global model) */
int exchange_model_pulled(const Exchange *ex);
/* The optimizer's step on params after exchange_step: on the averaged
 * gradient (gradient mode; TernGrad's parameter server: the pulled average),
 * or with weight deltas on this worker's own gradient grads (a local step);
 * --clip'ed first, in place (DGC clips locally in exchange_step instead);
 * DGC's tensors by plain SGD (optim_sgd_plain: their momentum is the
 * exchange's memory), every other tensor by opt (optim_update). Nothing where
 * exchange_model_pulled. */
void exchange_optimize(Exchange *ex, float *params, float *grads, Optim *opt, double lr);
/* With weight deltas (--delay N, and always for sbc: SBC Algorithm 1), after
 * the optimizer's step of every N-th step ((step + 1) % N == 0): grads (spent)
 * take the delta params - anchor, which is averaged over the workers; the
 * anchor moves by the average and params become it; SBC's tensors' momentum
 * in opt is zeroed where this worker's frames sent a value (SBC section II's
 * momentum masking). Other steps, and gradient mode: nothing (0, st left as
 * exchange_step wrote it). Returns and fails as exchange_step. */
int exchange_deltas(Exchange *ex, float *params, float *grads, Optim *opt, long step, ExchangeStats *st);
const char *exchange_error(const Exchange *ex);

/* The checkpoint sections (names without the worker prefix) that the exchange
 * keeps bit-identical on every worker, every worker applying the same decoded
 * values: the model at the last exchange ("ex.anchor") with weight deltas
 * after the first step, else "params"; and, where every worker
 * runs the optimizer on the same averaged gradient (gradient mode over
 * allgather, ring, or TernGrad's parameter server; on 3LC's only the server's
 * optimizer runs; with weight deltas each worker's optimizer steps on its own gradient), the
 * optimizer's step and state ("opt.step", "opt.<state>"). None under the
 * allreduce topology, whose sums the communicator library (MPI, NCCL) need
 * not order alike on every rank. The count (at most cap, which 2 +
 * OPT_MAX_STATE always covers). */
int exchange_replicas(const Exchange *ex, float *params, Optim *opt, CkptSection *out, int cap);

/* Checkpoint sections of the exchange's state on this worker (residuals,
 * velocities, anchors, the server's global model); pointers stay valid while ex
 * lives. Returns the count (<= cap). */
int exchange_ckpt_sections(Exchange *ex, CkptSection *out, int cap, const char *prefix);
/* Loads them back (names prefix + the names above) for a checkpoint taken after
 * step (>= 0) training steps by saved_workers workers; refuses, with a
 * message, a missing or malformed codec state that this run's codecs would
 * have kept. With saved_workers other than this run's count, ck holds what
 * exchange_ckpt_take made of the saved workers' sections, and the codecs
 * start afresh (no codec state is loaded or required). */
int exchange_ckpt_load(Exchange *ex, const Ckpt *ck, const char *prefix, long step, int saved_workers, char *err,
                       size_t errlen);

/* Resuming on another worker count (docs/DIST.md, Checkpoints: "On another
 * worker count"): what each of this run's M workers takes of the sections that
 * the N workers of the checkpoint saved. name is a worker's section without
 * its "w<r>." prefix: "params", "opt.<name>" (optim_ckpt_sections) or
 * "ex.<name>" (exchange_ckpt_sections).
 *   CKPT_TAKE_W0    worker 0's: what the exchange keeps identical on every
 *                   worker (the model, the anchor, the optimizer state where
 *                   every worker runs it on the same average), the parameter
 *                   server's state (rank 0 stays the server), counters
 *   CKPT_TAKE_MEAN  the mean over the N workers (float arrays): the state
 *                   whose contributions the exchange averages over workers:
 *                   error-feedback residuals and DGC's velocity and
 *                   accumulation, and with weight deltas (--delay, sbc) each
 *                   worker's model and optimizer state between exchanges. The
 *                   exchange applies (1/N) x the sum of what N workers send,
 *                   so what is still owed to the model is the MEAN of their
 *                   residuals; giving each of the M workers that mean keeps it
 *                   (a sum would be applied N/M times over)
 *   CKPT_TAKE_NONE  nothing: the codecs' state (GCOMP's Huffman tables, one
 *                   per peer or ring chunk) starts afresh, as at step 0
 *   CKPT_TAKE_OTHER not the exchange's or the optimizer's: the caller's rule */
typedef enum { CKPT_TAKE_W0, CKPT_TAKE_MEAN, CKPT_TAKE_NONE, CKPT_TAKE_OTHER } CkptTake;
CkptTake exchange_ckpt_take(const Exchange *ex, const char *name);
/* 1 for the sections that only rank 0, the parameter server, saves
 * ("ex.global", "ex.pullres"); every other is every worker's */
int exchange_ckpt_server_only(const char *name);

/* Turns the per-tensor statistics on (they cost an extra pass over each tensor's
 * values); exchange_layer_stats gives the [T] sums since the last reset. The
 * server's pull is not counted (it is everyone's down traffic). */
void exchange_track_layers(Exchange *ex, int on);
const LayerStats *exchange_layer_stats(const Exchange *ex);
void exchange_layer_stats_reset(Exchange *ex);
/* one encode of tensor t added to those statistics when they are tracked (the host's
 * encodes and the device exchange's): its frame's bytes (entry header included), its
 * values, of those the values a sparsifier sent (-1: a dense codec), the sums of x^2
 * and of (x - what the frame represents)^2, the seconds it took */
void exchange_layer_add(Exchange *ex, int t, double bytes, double values, double sent, double sq_in, double sq_err,
                        double seconds);
/* 1 for a codec that sends some of the values (topk, dgc, sbc): its statistics count them */
int exchange_codec_sparse(const CodecSpec *spec);

#endif
