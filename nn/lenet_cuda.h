/* LeNet5-Caffe (nn/lenet.h) on the GPU, as a Model (nn/model.h).
 *
 * Same parameter table, names, offsets and initialization as the CPU model
 * (create takes them from a CPU model of the same config). Host arenas
 * (page-locked) mirrored on the device as for the GPU ResNet (nn/model_cuda.h):
 * forward uploads the parameters, backward OVERWRITES m->grads by downloading
 * the device gradients. Activations are NCHW on the device; the pooled conv2
 * output [N, 50, 4, 4] is already torch's flatten(1) order for fc1.
 * Ops: cuDNN convolutions (with bias), max pooling, cuBLAS fully connected
 * layers, ReLU, softmax cross-entropy (nn/cuda_ops.h).
 * create returns NULL after printing why (bad config, no CUDA/cuDNN/GPU, out of
 * GPU memory).
 */
#ifndef GC_NN_LENET_CUDA_H
#define GC_NN_LENET_CUDA_H

#include <stdint.h>

#include "nn/lenet.h"

Model *lenet_create_cuda(const LeNetConfig *cfg, int max_batch);
/* (re)initialize exactly as lenet_init does for the CPU model */
void lenet_init_cuda(Model *m, uint64_t seed);
/* host copy of the logits [N, num_classes] of the last forward */
const float *lenet_logits_cuda(const Model *m);

#endif
