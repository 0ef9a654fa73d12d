/* The device-resident exchange: one data-parallel step with the gradients, the
 * parameters, the optimizer state, the error-feedback memories (residual, DGC's
 * momentum and accumulation), the weight-delta anchor and the parameter server's
 * global model and pull memory in device memory
 * (--device cuda). Only encoded frames cross to the host, where the transport
 * needs them, and a few scalars (TernGrad's shared scalars, T floats; a clipping
 * norm's sum of squares, one double).
 *
 * What it covers (exchange_cuda_unsupported says why a run falls outside):
 *   topology   allreduce (the fp32 baseline), or allgather, the parameter
 *              server (ps) or the ring with any codec (fp32, fp16, int8, 3lc,
 *              onebit, topk, dgc, sbc, terngrad and stoch3 with or without the
 *              shared scalar, and gcomp with its state between steps)
 *   memory     none, residual, or DGC's momentum correction (its local
 *              clipping, weight decay folded into the gradient, warm-up density;
 *              not over the ring, which exchange_new refuses)
 *   exchanged  gradients every step, or weight deltas (--delay N, and sbc:
 *              SBC Algorithm 1; fp32 with --delay: federated averaging)
 *   clipping   --clip (of the average; with weight deltas of each local
 *              step's gradient) and DGC's local clipping, the norm on the device
 *   backend    any. allreduce: local (the workers are threads of one process
 *              sharing one GPU) on the device arenas, nccl (one GPU per process)
 *              on a device copy, any other (mpi) staged through pinned host
 *              memory; allgather, ps and the ring: their bundles live in device
 *              memory over nccl and local when every codec decodes on the device
 *              (encoded, sent, received and decoded there), else in page-locked
 *              host memory
 * exchange_cuda_unsupported refuses only a codec with state between steps and no
 * GPU twin of that state (every codec of the registry has one now: gcomp's is
 * codec_cuda_state_save) and a build without CUDA; the trainer adds its own
 * reasons (--log-layers, GCX_HOST_STEP=1). Those runs go through the host
 * exchange (dist/exchange.h) on the model's host arenas, as before.
 *
 * allreduce over nccl: ncclAllReduce on a device copy of the gradient
 * (comm_nccl_allreduce_dev: NCCL's order, as the host path's staged
 * allreduce), then x 1/N.
 * allreduce over a host backend (mpi): the gradient copied into pinned host
 * memory (cudaMallocHost), the Comm's allreduce there (the host path's sums),
 * copied back to the device, then x 1/N; the two copies are the step's
 * (ExchangeStats h2d_bytes, d2h_bytes, copy_s).
 * allreduce over local workers, as exchange_step's allreduce path on the host:
 *   1. every worker publishes the device address of its gradient arena (with
 *      weight deltas: of its delta; an allgather of one pointer; the local
 *      backend's workers share one address space and one device)
 *   2. each worker sums the N gradient arenas into its own average buffer in
 *      rank order, g0 + g1 + ... + g(N-1), then multiplies by 1/N: the local
 *      backend's allreduce and the exchange's scaling, rounding for rounding
 *   3. a barrier (no worker's next backward overwrites a gradient arena a
 *      peer still reads)
 * allgather, as exchange_step's allgather path (memory_in, encode_all,
 * encode_pass, average_bundles) on the host:
 *   1. x = g (+ the residual; DGC: g clipped locally, + weight decay, then
 *      u = m u + g, v += u, x = v) per tensor, on the device
 *   1b. with the shared scalar (TernGrad section 3.1): every tensor's local
 *      scalar of x (codec_local_stats_cuda, on the device, every tensor's at once), the max over
 *      workers by the Comm's allreduce of the T floats (counted as traffic, as
 *      on the host), passed to the GPU codec as its scalar
 *   2. each tensor's frame by its GPU codec (compress/codec_cuda.h: the CPU
 *      codec's bytes for the same input and seed) into the bundle (in device
 *      memory, codec_encode_cuda_dev, or page-locked host memory: above), the
 *      entries and the bundle exactly as encode_pass lays them out; the
 *      residual keeps x - what the frame represents (on the device; DGC:
 *      u = 0 where the frame sent the value)
 *   3. the bundles go to every worker (Comm allgatherv: MPI sends them from host
 *      memory; NCCL and the local workers move device bundles with no host bounce)
 *   4. every bundle decoded in rank order into the average buffer on the
 *      device (the first overwrites, the others accumulate), then x 1/N; a bad
 *      bundle or frame gives exchange_step's message, and every worker stops
 * ps, as exchange_step's ps_exchange (3LC sections 2-3; TernGrad section 3):
 *   1. x as for the allgather (1, 1b), every worker's push bundle encoded as
 *      there (2), gathered to rank 0 (Comm gatherv), which
 *      decodes and averages them as 4 (a bad frame: every worker stops)
 *   2a. model-delta pulls (3LC section 3.1): the server's global model (on the
 *      device, set from the parameters at the first step) takes the server's
 *      GPU optimizer step on the average (with weight deltas: the average delta
 *      added); the model delta + the server's pull memory is encoded once by
 *      the GPU codecs (seed slot of a pull, no mask), the pull memory keeps what
 *      the frame did not represent; the bundle is broadcast (Comm bcast) and
 *      every worker adds the decoded delta to its parameters (with
 *      weight deltas: to the anchor, which the parameters become)
 *   2b. gradient pulls (TernGrad section 3, Figure 1; terngrad with the shared
 *      scalar): the server encodes the average itself (ternsum, 2N+1 levels
 *      with the shared scalars; fp32 for the uncompressed tensors), broadcast;
 *      every worker decodes it and its GPU optimizer steps on it
 *      (exchange_cuda_optimize)
 * gcomp (GCOMP sections 4-5), as exchange.c's make_side: its levels on the device
 * from the same inputs (allgather: optim_gcomp_levels_at_cuda of x / N on the GPU
 * optimizer's state; ps push: delta_levels of (lr x) / N; weight deltas: of x / N;
 * the server's pull: of the model delta; exchange_cuda_delta_levels); its Huffman
 * tables kept in the GPU codecs between steps, one decoder per sending worker (each
 * worker's encoder builds its own tables, as the host's decoder slots).
 * ring (GCOMP section 6.2), as exchange.c's avg_ring: each tensor in N chunks; N - 1
 * reduce-scatter hops, each worker encoding one chunk's running sum with its memory
 * (the residual per chunk; gcomp's levels of the partial sum at every hop) for its
 * right neighbour (Comm sendrecv) and adding the decoded frame from its
 * left one on the device; N - 1 allgather hops, the owner's frame of its reduced
 * chunk (which the running sum becomes) forwarded unchanged; then x 1/N. Slots:
 * chunk c's reduce-scatter frames c, its allgather frames N + c (gcomp: a codec each).
 * then exchange_cuda_optimize: the GPU optimizer (optim/optim_cuda.h) updates
 * the device parameters from the average (--clip'ed first; DGC's tensors: plain
 * SGD, as exchange_optimize; nothing where the pull was the new model).
 * Clipping: the sums of squares of the norm in the host's order on the device
 * (exchange_cuda_sumsq: optim/clip.c's blocks for --clip, DGC's per tensor, one
 * GPU thread each, each summed one value after the other), one double to the
 * host, which decides the factor with the host's expressions; the scaling on
 * the device.
 * weight deltas, as exchange_step, exchange_optimize and exchange_deltas:
 *   every step  the anchor = the parameters before the first step
 *               (exchange_cuda_step); the GPU optimizer steps on a copy of
 *               this worker's own gradient (--clip'ed; exchange_cuda_optimize)
 *   after every delay-th step ((step + 1) % delay == 0, the same on every
 *               worker; exchange_cuda_deltas) x = parameters - anchor on the device, averaged as
 *               above (allgather: with the residual, frames of x; allreduce:
 *               x itself); anchor += the average, parameters = anchor; SBC's
 *               tensors' optimizer momentum zeroed where this worker's frame
 *               sent a value (SBC section II's momentum masking)
 * No tensor is copied between host and device, except the gradient staged for an
 * allreduce over a host backend. The byte accounting is the host path's.
 *
 * Checkpoints: the residual, DGC's momentum, the anchor and the server's global
 * model and pull memory stay in the host exchange's arenas for the checkpoint
 * sections (exchange_ckpt_sections), and the GPU codecs' state (gcomp's tables) in
 * the host exchange's codecs of the same slots (exchange_codec; the "codecs"
 * section): exchange_cuda_download copies them there (codec_cuda_state_save, the
 * CPU codec's blob), exchange_cuda_upload back (after a --resume). Whether the anchor has been set is the host exchange's
 * (exchange_started): the first step marks it.
 *
 * Built with CUDA (HAVE_CUDA); without it exchange_cuda_unsupported says so
 * and exchange_cuda_new returns NULL.
 */
#ifndef GC_EXCHANGE_CUDA_H
#define GC_EXCHANGE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "compress/codec_cuda.h" /* CodecProbe */
#include "dist/comm.h"
#include "dist/exchange.h"
#include "optim/optim.h"

typedef struct ExchangeCuda ExchangeCuda;

/* NULL when a run whose host exchange is ex (resolved configuration and
 * policy) over this Comm can keep its step on the device; otherwise why not,
 * in a few words */
const char *exchange_cuda_unsupported(const Exchange *ex, const ParamTable *pt, const Comm *comm);
/* for one worker, next to its host exchange ex (which keeps the configuration,
 * the policy and the checkpoint arenas). NULL with a message in err */
ExchangeCuda *exchange_cuda_new(Exchange *ex, Comm *comm, const ParamTable *pt, char *err, size_t errlen);
void exchange_cuda_free(ExchangeCuda *x);
/* One training step after backward, as exchange_step, exchange_optimize and
 * exchange_deltas (dist/exchange.h), collective over the workers:
 *     exchange_cuda_step(x, d_params, d_grads, opt, lr, epoch, step, &st);  // the average gradient
 *     exchange_cuda_optimize(x, d_params, d_grads, opt, lr);                // the optimizer on it
 *     exchange_cuda_deltas(x, d_params, opt, step, &st);                    // --delay: the weight deltas
 * d_grads (device arena) hold this worker's gradient and are only read;
 * d_params (device arena) are updated by the exchange or by opt, an Optim from
 * optim_init_cuda. epoch and step as exchange_step's (DGC's warm-up; seeds,
 * bundle headers). Statistics as exchange_step's. The step and the deltas
 * return 0, or a negative GcError with a message in exchange_cuda_error()
 * (every worker returns the error). */
int exchange_cuda_step(ExchangeCuda *x, float *d_params, const float *d_grads, Optim *opt, double lr, double epoch,
                       long step, ExchangeStats *st);
void exchange_cuda_optimize(ExchangeCuda *x, float *d_params, const float *d_grads, Optim *opt, double lr);
int exchange_cuda_deltas(ExchangeCuda *x, float *d_params, Optim *opt, long step, ExchangeStats *st);
const char *exchange_cuda_error(const ExchangeCuda *x);
/* the residual, DGC's momentum, the anchor, the server's global model and pull
 * memory, device -> the host exchange's arenas (before a checkpoint) and back; the
 * GPU codecs' state (gcomp's tables) -> the host exchange's codecs and back */
void exchange_cuda_download(ExchangeCuda *x);
void exchange_cuda_upload(ExchangeCuda *x);

/* the kernels (dist/exchange_cuda.cu), device arenas of n floats, each one
 * rounding as on the host: a[i] = a[i] + b[i]; a[i] = a[i] * s; d[i] = a[i] - b[i] */
void exchange_cuda_add(float *a, const float *b, size_t n);
void exchange_cuda_scale(float *a, float s, size_t n);
void exchange_cuda_sub(float *d, const float *a, const float *b, size_t n);
/* the same over several ranges of the arenas at once, a launch per up to 32 ranges (the
 * tensors of a pass, which a launch each would cost the host a driver call each): range k
 * the values [off[k], off[k] + n[k]) of every arena given, adjacent ranges merged.
 * EXCHANGE_RANGE_ADD d[i] = d[i] + a[i]; EXCHANGE_RANGE_SUB d[i] = a[i] - b[i];
 * EXCHANGE_RANGE_MASK_ZERO d[i] = 0 where mask[i]; EXCHANGE_RANGE_COPY d[i] = a[i].
 * off, n: [k] host */
enum { EXCHANGE_RANGE_ADD, EXCHANGE_RANGE_SUB, EXCHANGE_RANGE_MASK_ZERO, EXCHANGE_RANGE_COPY };
void exchange_cuda_ranges(int op, float *d, const float *a, const float *b, const unsigned char *mask, const size_t *off,
                          const size_t *n, size_t k);
/* the trainers' --ema on the device: ema[i] -= a * (ema[i] - params[i]), the host's
 * roundings (examples/trainer.c, ema_update).  ema, params: [n] device */
void exchange_cuda_ema(float *ema, const float *params, float a, size_t n);
/* DGC's memory_in on the device over k ranges of the arenas (as exchange_cuda_ranges):
 * x (in: g, out: v) plus weight decay wd * p where p is not NULL (exchange.c's dgc_prepare,
 * whose weight decay is not 0), then u, v updated as exchange.c's memory_in.  u, v, x, p:
 * device arenas; off, n: [k] host */
void exchange_cuda_dgc_in(float *u, float *v, float *x, const float *p, float wd, float m, int nesterov,
                          const size_t *off, const size_t *n, size_t k);
/* GCOMP's levels on the device (dist/exchange.c's make_side): d[i] = a[i] / s; and
 * delta_levels of the delta (mul x[i]) / div (div != 0) or x[i] mul (div == 0) added
 * to p: lv[i] the largest L <= 3 with |p[i] / delta| > 2^(6 L + guard), 0 where the
 * delta is 0.  d, a, p, x: [n] floats, lv: [n] bytes, device */
void exchange_cuda_div(float *d, const float *a, float s, size_t n);
void exchange_cuda_delta_levels(unsigned char *lv, const float *p, const float *x, float mul, float div, int guard,
                                size_t n);
/* the sum over k < m of the sums of a[i]^2 over i in [lo[k], hi[k]), as the host sums
 * them: each range's in double, one value after the other, then the ranges' in order
 * (optim/clip.c's blocks of grad_norm; dist/exchange.c's tensors of DGC's clipping).
 * a: device arena; lo, hi: [m] device; part: [m + 1] device scratch. Returns the sum */
double exchange_cuda_sumsq(const float *a, const size_t *lo, const size_t *hi, size_t m, double *part);
#define EXCHANGE_LAYER_BLOCKS 64 /* exchange_cuda_layer_sums' blocks at most */
/* --log-layers on the device: out[0] = the sum of v[i]^2, out[1] of (v[i] - repr[i])^2,
 * out[2] the count of mask[i] != 0 (0 when mask is NULL), each in double, summed in
 * another order than the host's (exchange.c's encode_pass; equal to rounding), left in
 * stream order (the caller reads a pass's sums at once). v, repr: [n] floats, mask: [n]
 * bytes or NULL, out: [3] doubles, part: [3 * EXCHANGE_LAYER_BLOCKS] doubles of scratch,
 * device */
void exchange_cuda_layer_sums(double *out, const float *v, const float *repr, const unsigned char *mask, size_t n,
                              double *part);

/* The headers of a device bundle (dist/bundle.h) read in one copy, so that decoding it
 * waits for the device once for all of them instead of once per entry: the bundle's first
 * min(len, 16) bytes (BUNDLE_HDR), then the entries found by following their chain from
 * offset 16 (12 bytes each, ENTRY_HDR, then the frame length that their bytes 8..11 give),
 * at most max of them; the walk stops where the next header would leave the len bytes, or
 * after a header whose frame would. Nothing is checked: the host reads the copy as it
 * would the bundle (bundle_open, bundle_take), in the same order.
 *   out (host), EXCHANGE_HEADS_BYTES(max) bytes, little-endian: [0, 16) the bundle's
 *   header (zeros past len), u32 at 16 the entries found; entry i at 24 + 24 i: u64 its
 *   offset in the bundle, then its 12 header bytes (4 bytes of padding after them)
 *   scratch: as many bytes of device memory;  bundle: [len] device */
#define EXCHANGE_HEADS_TOP 24
#define EXCHANGE_HEAD_BYTES 24
#define EXCHANGE_HEADS_BYTES(max) (EXCHANGE_HEADS_TOP + (size_t)(max) * EXCHANGE_HEAD_BYTES)
void exchange_cuda_bundle_heads(unsigned char *out, unsigned char *scratch, const unsigned char *bundle, size_t len,
                                uint32_t max);
/* The same for k bundles (bundles[i] of lens[i] bytes; bundle i's headers at
 * out + i EXCHANGE_HEADS_BYTES(max)), and the frames of each bundle's entries that lie
 * inside it (those of bundle_take's entries the walk found; the walk's last may not)
 * probed as codec_cuda_probe_frames probes them (compress/codec_cuda.h
 * codec_cuda_probe_listed: from the walk's list on the device), with one wait for both:
 * bundle i's frame j's probe at probes + i max + j (those past its frames undefined).
 *   probes (host): k max of them; out and probes in page-locked memory for one wait;
 *   scratch: k EXCHANGE_READ_BYTES(max) bytes of device memory, 8-byte aligned */
#define EXCHANGE_READ_BYTES(max) (EXCHANGE_HEADS_BYTES(max) + (size_t)(max) * sizeof(CodecFrameRef) + 8)
void exchange_cuda_read_bundles(unsigned char *out, CodecProbe *probes, unsigned char *scratch,
                                const unsigned char *const *bundles, const size_t *lens, size_t k, uint32_t max);

#endif
