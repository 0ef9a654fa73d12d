/* The LSTM language model (nn/lstm_lm.h) on the GPU, as a Model (nn/model.h).
 *
 * Same parameter table, names, offsets and initialization as the CPU model
 * (create takes them from a CPU model of the same config), and the same
 * behaviour: encoder -> dropout -> L LSTM layers with dropout after each ->
 * decoder -> softmax cross-entropy; dropout on the non-recurrent connections
 * only (Zaremba et al. 2014, section 3) with masks from (seed, step, site)
 * bit-identical to the CPU's; tied weights (Press & Wolf 2016, Inan et al.
 * 2016: the decoder weight IS encoder.weight, gradients summed); truncated BPTT
 * with the (h, c) state carried across forwards, reset by reset_state and by a
 * change of batch size; evaluation forwards with their own buffers;
 * loss_sum_over_time scaling (nn/lstm_lm.h).
 *
 * Host arenas (page-locked) mirrored on the device as for the GPU image models
 * (nn/model_cuda.h): forward uploads the parameters; backward OVERWRITES
 * m->grads by downloading the device gradients. The carried state has the CPU
 * model's layout ([L][max_batch, H] each for h and c) on the host, and every
 * forward uploads it into the first state slot of each layer and downloads
 * each layer's final state (counted in the copy statistics), so checkpoints
 * (ckpt_sections, the same sections as the CPU model) and the trainer's
 * save/restore around evaluation work unchanged, and a checkpoint moves
 * between the CPU and GPU models. In device-master mode (nn/model_cuda.h) the
 * carried state stays on the device like the parameters: the forward copies it
 * on the device, the host copy goes stale, and switching the mode off
 * downloads it (on uploads it).
 * Ops: nn/cuda_ops.h (embedding, dropout, LSTM layer in nn/lstm_cuda.cu;
 * linear and softmax cross-entropy).
 *
 * Built without CUDA, the functions exist: create prints that the build has no
 * CUDA and returns NULL, the others do nothing (or return NULL / an error).
 */
#ifndef GC_NN_LSTM_LM_CUDA_H
#define GC_NN_LSTM_LM_CUDA_H

#include <stdint.h>

#include "nn/lstm_lm.h"

/* as lstm_lm_create; NULL after printing why (bad config, no CUDA or GPU, out
 * of GPU memory). Activations for up to max_batch sequences of up to max_T steps. */
Model *lstm_lm_create_cuda(const LstmLmConfig *cfg, int max_batch, int max_T);

/* (re)initialize exactly as lstm_lm_init_params does for the CPU model */
void lstm_lm_init_params_cuda(Model *m, uint64_t seed);

/* as lstm_lm_set_dropout_seed: masks from dropout_seed(seed, step, site) */
void lstm_lm_set_dropout_seed_cuda(Model *m, uint64_t seed, uint64_t step);

const LstmLmConfig *lstm_lm_config_cuda(const Model *m);

/* as lstm_lm_carried_state: HOST pointers to the carried h and c of layer l
 * [N,H] each, N = *n (0 when reset); stale in device-master mode. 0, or
 * -GC_ERR_PARAM for a bad layer. */
int lstm_lm_carried_state_cuda(const Model *m, int l, const float **h /*N,H*/, const float **c /*N,H*/, int *n);

#endif
