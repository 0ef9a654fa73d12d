/* The device-resident exchange: one data-parallel step with the gradients, the
 * parameters and the optimizer state in device memory (--device cuda).
 *
 * What it covers (exchange_cuda_unsupported says why a run falls outside):
 *   topology   allreduce (the fp32 baseline: nothing is encoded, no memory)
 *   exchanged  gradients every step (no --delay, no weight deltas)
 *   clipping   none (--clip)
 *   backend    local: the workers are threads of one process sharing one GPU
 * Everything else goes through the host exchange (dist/exchange.h) on the
 * model's host arenas, as before.
 *
 * The step, as exchange_step's allreduce path does it on the host:
 *   1. every worker publishes the device address of its gradient arena (an
 *      allgather of one pointer; the local backend's workers share one
 *      address space and one device)
 *   2. each worker sums the N gradient arenas into its own average buffer in
 *      rank order, g0 + g1 + ... + g(N-1), then multiplies by 1/N: the local
 *      backend's allreduce and the exchange's scaling, rounding for rounding,
 *      so the average is bit-identical to the host path's for the same
 *      gradients
 *   3. a barrier (no worker's next backward overwrites a gradient arena a
 *      peer still reads), then the GPU optimizer (optim/optim_cuda.h) updates
 *      the device parameters from the average
 * Nothing is copied between host and device. The byte accounting is the host
 * path's: the allreduce's ring model, 2 (N-1)/N x 4 bytes per value each way.
 *
 * Built with CUDA (HAVE_CUDA); without it exchange_cuda_unsupported says so
 * and exchange_cuda_new returns NULL.
 */
#ifndef GC_EXCHANGE_CUDA_H
#define GC_EXCHANGE_CUDA_H

#include <stddef.h>

#include "dist/comm.h"
#include "dist/exchange.h"
#include "nn/params.h"
#include "optim/optim.h"

typedef struct ExchangeCuda ExchangeCuda;

/* NULL when a run with this resolved configuration (exchange_config) over this
 * Comm can keep its step on the device; otherwise why not, in a few words */
const char *exchange_cuda_unsupported(const DistConfig *cfg, const Comm *comm);
/* for one worker; cfg as above. NULL with a message in err */
ExchangeCuda *exchange_cuda_new(const DistConfig *cfg, Comm *comm, const ParamTable *pt, char *err, size_t errlen);
void exchange_cuda_free(ExchangeCuda *x);
/* One training step after backward, collective over the workers: d_grads
 * (device arena) hold this worker's gradient and are only read; d_params
 * (device arena) are updated by opt, an Optim from optim_init_cuda. Statistics
 * as exchange_step's. Returns 0 (this path has no frame to reject). */
int exchange_cuda_step(ExchangeCuda *x, float *d_params, const float *d_grads, Optim *opt, double lr,
                       ExchangeStats *st);

/* the kernels (dist/exchange_cuda.cu), device arenas of n floats:
 * a[i] = a[i] + b[i], and a[i] = a[i] * s, each one rounding as on the host */
void exchange_cuda_add(float *a, const float *b, size_t n);
void exchange_cuda_scale(float *a, float s, size_t n);

#endif
