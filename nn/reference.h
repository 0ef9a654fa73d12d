/* The plain versions of the fast CPU ops: direct loops, no im2col, no blocking, no
 * vector tricks, sums in double; the same signatures (less the scratch) and the same
 * layouts as nn/conv2d.h and nn/batchnorm.h, which the tests check against these
 * (tests/test_nn_reference.c), as llm.c keeps matmul_forward_naive beside
 * matmul_forward. Read these first: they are the definitions.
 *
 * Activations are CNHW: element (c, n, h, w) at c*ld + (n*H + h)*W + w, ld the
 * channel stride (N*H*W when dense). Weights [OC, C, KH, KW] as PyTorch.
 * Gradients: dw, db, dgamma, dbeta ACCUMULATE (+=); dinp, dres are OVERWRITTEN.
 * Shape letters: N batch, C input channels, H,W input size, OC output channels,
 * KH,KW kernel, OH,OW output size, M = N*H*W values per channel. */
#ifndef GC_NN_REFERENCE_H
#define GC_NN_REFERENCE_H

#include <stddef.h>

#include "nn/conv2d.h"

/* out[oc, n, oh, ow] = b[oc] + sum over c, kh, kw of
 *     w[oc, c, kh, kw] * inp[c, n, oh*stride - pad + kh, ow*stride - pad + kw]
 * (terms outside the input are zero: the padding) */
void conv2d_forward_naive(float *out /*OC,ldo*/, const float *inp /*C,ldi*/, const float *w /*OC,C,KH,KW*/,
                          const float *b /*OC or NULL*/, const Conv2dShape *s);

/* the derivatives of that sum: dinp[c, n, ih, iw] = sum of w * dout over the outputs
 * that read it; dw[oc, c, kh, kw] += sum over n, oh, ow of dout * inp; db[oc] += sum of dout */
void conv2d_backward_naive(float *dinp /*C,ldi or NULL*/, float *dw /*OC,C,KH,KW*/, float *db /*OC or NULL*/,
                           const float *dout /*OC,ldo*/, const float *inp /*C,ldi*/, const float *w /*OC,C,KH,KW*/,
                           const Conv2dShape *s);

/* training batch norm: mean and biased variance of each channel's M values,
 *   out = (x - mean) / sqrt(var + eps) * gamma + beta   [+ res]   [ReLU]
 * running statistics updated as PyTorch (momentum 0.1, the unbiased variance) */
void batchnorm_forward_train_naive(float *out /*C,ld*/, float *mean /*C*/, float *rstd /*C*/,
                                   float *running_mean /*C*/, float *running_var /*C*/, const float *inp /*C,ld*/,
                                   const float *gamma /*C*/, const float *beta /*C*/, const float *res /*C,ld or NULL*/,
                                   int relu, int C, int M, size_t ld);

/* with y = out before [res and] ReLU and xhat = (x - mean) * rstd, g = dout masked by the ReLU:
 *   dres = g, dbeta += sum g, dgamma += sum g * xhat,
 *   dinp = gamma * rstd * (g - mean(g) - xhat * mean(g * xhat)) */
void batchnorm_backward_naive(float *dinp /*C,ld*/, float *dres /*C,ld or NULL*/, float *dgamma /*C*/,
                              float *dbeta /*C*/, const float *dout /*C,ld*/, const float *out /*C,ld or NULL*/,
                              const float *inp /*C,ld*/, const float *mean /*C*/, const float *rstd /*C*/,
                              const float *gamma /*C*/, int C, int M, size_t ld);

#endif
