/* LeNet5-Caffe, the MNIST model of SBC (Sattler et al. 2018, section 5) and
 * Caffe's examples/mnist/lenet.prototxt, as a Model (nn/model.h), CPU fp32:
 *
 *   conv 5x5, 20 (bias) - max pool 2x2/2 - conv 5x5, 50 (bias) - max pool 2x2/2
 *   - fc 800 -> 500 - ReLU - fc 500 -> 10
 *
 * for a 1x28x28 input (431,080 parameters). Parameter names as the PyTorch
 * state_dict of the equivalent nn.Module: "conv1.weight", "conv1.bias",
 * "conv2.weight", "conv2.bias", "fc1.weight", "fc1.bias", "fc2.weight",
 * "fc2.bias". No non-trainable state (nstate = 0).
 * Initialization (lenet_init): PyTorch's defaults for nn.Conv2d / nn.Linear:
 * weights and biases uniform in +-1/sqrt(fan_in), seeded from common/rng.h.
 * Model-level backward OVERWRITES m->grads.
 */
#ifndef GC_NN_LENET_H
#define GC_NN_LENET_H

#include <stdint.h>

#include "nn/model.h"

typedef struct {
    int num_classes;  /* 10 */
    int in_channels;  /* 1 */
    int in_h, in_w;   /* 28 x 28 (>= 16 x 16) */
    uint64_t seed;    /* initialization seed used by create */
} LeNetConfig;

LeNetConfig lenet_config(void);
/* NULL (after printing why) for an invalid config */
Model *lenet_create(const LeNetConfig *cfg, int max_batch);
void lenet_init(Model *m, uint64_t seed);
/* logits [N, num_classes] of the last forward */
const float *lenet_logits(const Model *m);

#endif
