/* Inverted dropout (torch.nn.Dropout in training mode), with masks that are a
 * pure function of a seed, so a run is reproducible and the backward pass
 * regenerates the forward mask instead of storing it.
 *
 *   keep_i = rng_hash_uniform(s, i) >= p          (probability 1 - p)
 *   out_i  = keep_i ? inp_i / (1 - p) : 0         (expectation = inp_i)
 *
 * s = dropout_seed(seed, step, site): the model passes its run seed, its
 * training-step counter and the index of the dropout site (e.g. 0 = embedding
 * output, l = input of LSTM layer l, L = LSTM output), so the mask of any
 * (seed, step, site) can be rebuilt independently of thread count or order.
 * Shape letter: n elements. No parameters. Outputs are OVERWRITTEN and may
 * alias the inputs (in place). p must lie in [0, 1): anything else returns
 * -GC_ERR_PARAM without writing; p = 0 is a plain copy.
 */
#ifndef GC_NN_DROPOUT_H
#define GC_NN_DROPOUT_H

#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"

/* the mask seed of one dropout site at one step (host and device: the CUDA twin,
 * nn/lstm_cuda.cu, draws the same masks from these two functions) */
GC_HD static inline uint64_t dropout_seed(uint64_t seed, uint64_t step, uint64_t site) {
    return rng_hash64(rng_hash64(seed, step) ^ 0x44524F504F555431ULL /* "DROPOUT1" */, site);
}

/* 1 if element i is kept under mask seed s and drop probability p */
GC_HD static inline int dropout_keep(uint64_t s, uint64_t i, float p) { return rng_hash_uniform(s, i) >= p; }

/* out[i] = keep_i ? inp[i] / (1 - p) : 0 */
int dropout_forward(float *out /*n*/, const float *inp /*n*/, float p, uint64_t s, size_t n);

/* dinp[i] = keep_i ? dout[i] / (1 - p) : 0 (the same mask as the forward with the same s) */
int dropout_backward(float *dinp /*n*/, const float *dout /*n*/, float p, uint64_t s, size_t n);

#endif
