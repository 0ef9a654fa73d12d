/* 2-D batch normalization (torch.nn.BatchNorm2d, affine, track_running_stats),
 * fp32, CPU, over CNHW activations: channel c's M = N*H*W values are contiguous
 * at [c*ld, c*ld + M) (ld >= M: the channel stride, M when dense).
 *
 *   y = (x - mean) / sqrt(var + eps) * gamma + beta   [+ res]   [then ReLU]
 *
 * Training uses the batch mean and the biased batch variance, and updates
 *   running_mean = (1 - momentum) * running_mean + momentum * mean
 *   running_var  = (1 - momentum) * running_var  + momentum * var * M / (M - 1)
 * (unbiased, exactly as PyTorch); evaluation uses the running statistics.
 * eps and momentum come from nn/constants.h (1e-5, 0.1).
 * The optional residual input res and the optional ReLU fuse the ResNet block
 * tail "relu(bn(x) + shortcut)" into one pass.
 *
 * Gradients: dgamma and dbeta ACCUMULATE (+=); dinp and dres are OVERWRITTEN.
 * Shape letters: C channels, M = N*H*W values per channel, ld channel stride.
 */
#ifndef GC_NN_BATCHNORM_H
#define GC_NN_BATCHNORM_H

#include <stddef.h>

void batchnorm_forward_train(float *out /*C,ld*/, float *mean /*C, saved for backward*/,
                             float *rstd /*C, saved: 1/sqrt(var + eps)*/, float *running_mean /*C, updated*/,
                             float *running_var /*C, updated*/, const float *inp /*C,ld*/,
                             const float *gamma /*C*/, const float *beta /*C*/, const float *res /*C,ld or NULL*/,
                             int relu, int C, int M, size_t ld);

void batchnorm_forward_eval(float *out /*C,ld*/, const float *inp /*C,ld*/, const float *gamma /*C*/,
                            const float *beta /*C*/, const float *running_mean /*C*/,
                            const float *running_var /*C*/, const float *res /*C,ld or NULL*/, int relu, int C,
                            int M, size_t ld);

/* Backward of a TRAINING forward. out is the forward output (needed only when
 * relu was on, for its mask; pass NULL otherwise). dres (optional) receives the
 * gradient w.r.t. res, i.e. dout after the ReLU mask. dinp may alias dout. */
void batchnorm_backward(float *dinp /*C,ld, overwritten*/, float *dres /*C,ld, overwritten; NULL = skip*/,
                        float *dgamma /*C, +=*/, float *dbeta /*C, +=*/, const float *dout /*C,ld*/,
                        const float *out /*C,ld or NULL*/, const float *inp /*C,ld*/, const float *mean /*C*/,
                        const float *rstd /*C*/, const float *gamma /*C*/, int C, int M,
                        size_t ld);

#endif
