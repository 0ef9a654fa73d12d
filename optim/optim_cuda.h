/* Optimizers and the GCOMP metric on the GPU: the update rules of optim/optim.c
 * (torch 1.13's, operation by operation) over device arenas, bit-identical to
 * the CPU (every product and sum rounded separately or fused exactly where the
 * CPU calls fmaf; IEEE division and square root).
 *
 * An Optim initialized by optim_init_cuda has the same configuration, step
 * counter, state names and state order as one from optim_init, but its state
 * arenas o->state[i] are DEVICE memory ([n_floats] each, same fills).
 * optim_begin_step, optim_get_step, optim_set_step, optim_state_count work on
 * it unchanged; the checkpoint functions of optim.h need host memory: copy the
 * state with optim_cuda_download first (and back with optim_cuda_upload).
 *
 * The functions keep the signatures of their CPU twins with device pointers
 * for params, grads, update, levels and delta. They run on the calling thread's
 * default stream and return when the kernels are queued (a later cudaMemcpy on
 * that stream sees the results). Parameter grads are only read; params and state
 * are overwritten in range, as on the CPU.
 *
 * Only built with CUDA (HAVE_CUDA); without it optim_cuda_available() is 0 and
 * optim_init_cuda fails with -GC_ERR_PARAM and a message.
 */
#ifndef GC_OPTIM_CUDA_H
#define GC_OPTIM_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "optim/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this build has the GPU optimizers */
int optim_cuda_available(void);
/* device state arenas of n_floats (AdaGrad: filled with initial_accumulator_value).
 * 0, or -GC_ERR_PARAM for an invalid config (message on stderr) */
int optim_init_cuda(Optim *o, const OptConfig *cfg, size_t n_floats);
void optim_free_cuda(Optim *o);
/* optim_update on the device.  params: [n_floats] device, grads: [n_floats] device */
int optim_update_cuda(Optim *o, float *params, const float *grads, double lr, size_t off, size_t n);
/* the same over k ranges [off[i], off[i] + n[i]) at once, as k calls of optim_update_cuda
 * in one step would update them, in a launch for every 32 ranges (an exchange's runs of
 * tensors of one kind).  off, n: [k] host */
int optim_update_cuda_ranges(Optim *o, float *params, const float *grads, double lr, const size_t *off,
                             const size_t *n, size_t k);
/* optim_gcomp_levels on the device.  levels: [n] device out; params, grads: [n_floats] device */
int optim_gcomp_levels_cuda(uint8_t *levels, const Optim *o, const float *params, const float *grads, double lr,
                            size_t off, size_t n);
/* optim_gcomp_levels_at on the device.  levels: [n]; params_at, grads_at: [n] device slices at element off */
int optim_gcomp_levels_at_cuda(uint8_t *levels, const Optim *o, const float *params_at, const float *grads_at,
                               double lr, size_t off, size_t n);
/* optim_gcomp_delta on the device.  delta: [n] device out */
int optim_gcomp_delta_cuda(float *delta, const Optim *o, const float *params_at, const float *grads_at, double lr,
                           size_t off, size_t n);
/* params -= lr * update over k ranges [off[i], off[i] + n[i]), as optim_sgd_plain on each.
 * params, update: device arenas; off, n: [k] host */
void optim_sgd_plain_cuda(float *params, const float *update, double lr, const size_t *off, const size_t *n,
                          size_t k);
/* optim_mask_momentum on the device over k ranges: the momentum (momentum_buffer, or
 * Adam's exp_avg) of value j zeroed where mask[j] != 0, j in [off[i], off[i] + n[i]).
 * mask: [n_floats] device bytes; off, n: [k] host. 1, 0 where the optimizer has no
 * momentum, or -GC_ERR_PARAM where a range leaves the arena */
int optim_mask_momentum_cuda(Optim *o, const uint8_t *mask, const size_t *off, const size_t *n, size_t k);
/* copy the step counter and every state arena between a host Optim (optim_init)
 * and a device one (optim_init_cuda) of the same kind, state layout and size.
 * 0, or -GC_ERR_PARAM when they do not match */
int optim_cuda_upload(Optim *dev, const Optim *host);
int optim_cuda_download(Optim *host, const Optim *dev);

#ifdef __cplusplus
}
#endif

#endif
