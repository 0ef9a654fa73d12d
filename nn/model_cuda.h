/* The host/device mirror behind the GPU models (nn/resnet_cuda.h, nn/lenet_cuda.h).
 *
 * A GPU model is a normal Model (nn/model.h): its parameter table, parameter,
 * gradient and state arenas are HOST memory with the CPU model's names, offsets
 * and initialization, so the trainer, the optimizers, checkpoints and the
 * distributed layer use it unchanged. The host arenas are page-locked
 * (cudaMallocHost) so copies run at full PCIe/NVLink speed. The model keeps
 * device copies of the three arenas:
 *   forward   uploads params and state (the host copy is the master: an
 *             optimizer step, a checkpoint load or an averaging step may have
 *             changed it) and the batch; a training forward downloads the
 *             updated BN running statistics at its end
 *   backward  zeroes the device gradients, runs, downloads the gradients
 * CudaMirror counts the bytes and the host time spent in these copies
 * (model_cuda_copy_stats), so the benchmark can report their share of a step.
 *
 * Device-master mode (model_cuda_set_device_master) turns the parameter copies
 * off for a caller that keeps training on the device (optim/optim_cuda.h on
 * model_cuda_device_params / _grads): the forward no longer uploads the
 * parameters and the backward no longer downloads the gradients, so m->params
 * and m->grads go stale until the mode is switched off, which downloads both.
 * The state (BN running statistics) is copied as before. A model's own
 * training state may follow the mode (CudaMirror.follow_master: the LSTM's
 * carried state stays on the device and goes stale on the host likewise).
 * Built only with CUDA (HAVE_CUDA).
 */
#ifndef GC_NN_MODEL_CUDA_H
#define GC_NN_MODEL_CUDA_H

#include <stddef.h>

#include "nn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double up_s, down_s;      /* host wall time in the copies (they synchronize) */
    size_t up_bytes, down_bytes;
    long uploads, downloads;  /* number of arena transfers */
} ModelCudaCopyStats;

typedef struct {
    float *d_params, *d_grads, *d_state; /* device arenas, same offsets as the host ones */
    size_t total, nstate;
    int device_master; /* 1: d_params is the master; params not uploaded, grads not downloaded */
    ModelCudaCopyStats stats;
    /* optional: a model's own state that follows the mode (the LSTM's carried
     * state): called by model_cuda_set_device_master after the parameters'
     * copies, on = 1 to upload it, 0 to download it */
    void (*follow_master)(Model *m, int on);
} CudaMirror;

/* device allocation of `bytes` (zeroed); 0, or -1 after printing what failed */
int cuda_dev_alloc(void **p, size_t bytes, const char *what);
/* page-locked host memory of `bytes` (at least 1; not zeroed); NULL after printing on
 * failure. cuda_host_free takes NULL. */
void *cuda_host_alloc(size_t bytes);
void cuda_host_free(void *p);
/* the end of a GPU model's free: its page-locked host arenas (params, grads, state),
 * its table and the Model itself */
void cuda_model_free_host(Model *m);
/* page-locked, zeroed host arena of n floats (at least 1); NULL after printing on failure */
float *cuda_host_arena_alloc(size_t n);
void cuda_host_arena_free(float *p);

/* allocates the device arenas for m (m->pt.total, m->nstate); 0 or -1 */
int cuda_mirror_init(CudaMirror *mr, const Model *m);
/* params (skipped in device-master mode) and state (when with_state) host -> device */
void cuda_mirror_upload(CudaMirror *mr, const Model *m, int with_state);
/* device gradients -> m->grads (skipped in device-master mode) */
void cuda_mirror_download_grads(CudaMirror *mr, Model *m);
/* device state -> m->state */
void cuda_mirror_download_state(CudaMirror *mr, Model *m);
void cuda_mirror_free(CudaMirror *mr);

/* waits until this thread's queued device work (its per-thread stream) is done: a step's
 * timing, so that forward and backward are counted where they run, not in whatever
 * synchronizes next */
void model_cuda_sync(void);

/* copy statistics of a GPU model made by this library (NULL for other models) */
const ModelCudaCopyStats *model_cuda_copy_stats(const Model *m);
void model_cuda_copy_stats_reset(Model *m);

/* Device-master mode of a GPU model made by this library (see above). Switching
 * on uploads m->params; switching off downloads the device parameters and the
 * last gradients into m->params and m->grads. 0, or -1 (with a message) for a
 * model that is not such a GPU model. */
int model_cuda_set_device_master(Model *m, int on);
/* the device arenas of such a model (same offsets as m->params, m->grads), or NULL */
float *model_cuda_device_params(Model *m);
float *model_cuda_device_grads(Model *m);

#ifdef __cplusplus
}
#endif

#endif
