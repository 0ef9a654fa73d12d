/* The ResNets of nn/resnet.h on the GPU, as Models (nn/model.h).
 *
 * Same architectures, parameter table (names, order, offsets), state layout
 * and initialization as the CPU models: create builds the CPU model of the same
 * config once (batch 1) to take its table and initial values, so a CPU and a
 * GPU model made from one config and seed start bit-identical. The arenas
 * (m->params, m->grads, m->state) are host memory as usual (page-locked); the
 * device mirrors them (nn/model_cuda.h): forward uploads params and state,
 * backward downloads the gradients (OVERWRITTEN, as the CPU model), a training
 * forward downloads the updated BN running statistics. Activations live on the
 * device in NCHW; the input batch (NCHW) is copied as is.
 *
 * Ops: cuDNN convolutions and batch norm, cuBLAS for the classifier, CUDA
 * kernels for the rest (nn/cuda_ops.h). The model uses the calling thread's
 * CUDA context on the current device (cudaSetDevice before create when there are
 * several GPUs; use a model from the thread that made it).
 *
 * create returns NULL after printing why when the config is invalid, the build
 * has no CUDA/cuDNN, no GPU is visible, or GPU memory runs out.
 *
 *   ResNetConfig cfg = resnet_cifar_config(20);
 *   Model *m = resnet_cifar_create_cuda(&cfg, 128);
 *   float loss = model_forward(m, &batch, 1, &st);   // batch.x: host NCHW
 *   model_backward(m);                              // m->grads (host) overwritten
 */
#ifndef GC_NN_RESNET_CUDA_H
#define GC_NN_RESNET_CUDA_H

#include <stdint.h>

#include "nn/resnet.h"

Model *resnet_cifar_create_cuda(const ResNetConfig *cfg, int max_batch);
Model *resnet50_create_cuda(const ResNet50Config *cfg, int max_batch);

/* (re)initialize params and state exactly as resnet_init does for the CPU model */
void resnet_init_cuda(Model *m, uint64_t seed);

/* host copy of the logits [N, num_classes] of the last forward */
const float *resnet_logits_cuda(const Model *m);

#endif
