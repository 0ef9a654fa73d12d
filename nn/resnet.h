/* Residual networks as Models (nn/model.h), CPU fp32.
 *
 * ResNet for CIFAR (He et al. 2016, "Deep Residual Learning", section 4.2):
 *   conv3x3(16) - BN - ReLU, then 3 stages of n basic blocks each with widths
 *   16, 32, 64 (feature maps 32, 16, 8; the first block of stages 2 and 3 has
 *   stride 2), global average pooling, a 10-way fully connected layer.
 *   depth = 6n + 2 (20, 32, 44, 56, 110). A basic block is
 *   relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)).
 *   Shortcut when the shape changes: option A (the paper's CIFAR choice,
 *   section 4.2: identity with stride-2 subsampling and zero-padded extra
 *   channels, (Cout - Cin)/2 on each side, no parameters) or option B (1x1
 *   convolution with stride + BN, "downsample.0"/"downsample.1").
 *   Parameters: ResNet-20 0.27M, ResNet-110 1.7M (option A).
 *
 * ResNet-50 (He et al. 2016, Table 1; torchvision layout "v1.5", stride on the
 *   3x3 conv of the bottleneck): conv7x7/2(64) - BN - ReLU - maxpool3x3/2, stages
 *   of 3, 4, 6, 3 bottleneck blocks (1x1 w, 3x3 w, 1x1 4w; w = 64, 128, 256,
 *   512), projection shortcuts where the shape changes, avgpool, fc.
 *   25.6M parameters at 1000 classes.
 *
 * Parameter names are exactly those of the PyTorch state_dict (torchvision
 * naming): "conv1.weight", "bn1.weight", "bn1.bias", "layer1.0.conv1.weight",
 * ..., "layer2.0.downsample.0.weight", ..., "fc.weight", "fc.bias", in
 * named_parameters() order. Model.state holds, for every BN in parameter-table
 * order, running_mean [C] then running_var [C] (as the state_dict, without
 * num_batches_tracked).
 *
 * Initialization (resnet_init): conv weights kaiming_normal_(mode="fan_out",
 * nonlinearity="relu") as torchvision (std = sqrt(2 / (Cout*K*K))); BN gamma 1,
 * beta 0, running mean 0, var 1; fc as PyTorch's nn.Linear default
 * (weight and bias uniform in +-1/sqrt(fan_in)). Seeded from common/rng.h.
 *
 * Usage:
 *   ResNetConfig cfg = resnet_cifar_config(20);   // then adjust fields
 *   Model *m = resnet_cifar_create(&cfg, 128);    // initialized from cfg.seed
 *   resnet_init(m, seed);                         // optional re-initialization
 *   float loss = model_forward(m, &batch, 1, &st); // batch.x is NCHW
 *   model_backward(m);                            // m->grads overwritten
 * Internally activations are CNHW (see nn/conv2d.h); the input is converted once.
 */
#ifndef GC_NN_RESNET_H
#define GC_NN_RESNET_H

#include <stdint.h>
#include <stdio.h>

#include "nn/model.h"

typedef enum { RESNET_SHORTCUT_A = 0, RESNET_SHORTCUT_B = 1 } ResNetShortcut;

typedef struct {
    int depth;               /* 6n + 2 */
    int width;               /* channels of stage 1 (16); stages use width, 2*width, 4*width */
    int num_classes;         /* 10 */
    int in_channels;         /* 3 */
    int in_h, in_w;          /* 32 x 32 */
    ResNetShortcut shortcut; /* A (default) or B */
    uint64_t seed;           /* initialization seed used by create */
} ResNetConfig;

typedef struct {
    int num_classes;  /* 1000 */
    int in_channels;  /* 3 */
    int in_h, in_w;   /* 224 x 224 (any size >= 32 works) */
    int width;        /* base width 64 (stage widths 64, 128, 256, 512; expansion 4) */
    uint64_t seed;
} ResNet50Config;

/* defaults: width 16, 10 classes, 3x32x32 input, option A, seed 0 */
ResNetConfig resnet_cifar_config(int depth);
/* defaults: 1000 classes, 3x224x224, width 64, seed 0 */
ResNet50Config resnet50_config(void);

/* NULL (after printing why) for an invalid config (depth not 6n+2, ...).
 * max_batch: the largest Batch.N forward will be given. */
Model *resnet_cifar_create(const ResNetConfig *cfg, int max_batch);
Model *resnet50_create(const ResNet50Config *cfg, int max_batch);

/* (re)initialize parameters and running statistics of a model made by either
 * create function, deterministically from seed */
void resnet_init(Model *m, uint64_t seed);

/* logits [N, num_classes] of the last forward (row-major) */
const float *resnet_logits(const Model *m);

/* Built-in timers per layer type (for benchmarks): enable (1) resets and starts
 * them, 0 stops; report prints the accumulated time per step over `steps`. */
void resnet_profile(Model *m, int enable);
void resnet_profile_report(const Model *m, FILE *f, int steps);

#endif
