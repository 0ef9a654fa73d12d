/* Direct ("implicit GEMM") 3x3, stride-1, pad-1 convolution over CNHW
 * activations with AVX-512 kernels: no im2col buffer. conv2d_forward/backward
 * (nn/conv2d.h) route eligible shapes here; callers use conv2d.
 *
 * Idea: in CNHW a channel of the whole batch is one row of P = N*H*W values
 * (rows ldi / ldo apart, see Conv2dShape),
 * and tap (kh, kw) of the kernel reads that row shifted by
 * (kh-1)*W + (kw-1), with the lanes that fall outside the image masked to zero.
 * When H*W is a multiple of 16, every 16-lane vector lies inside one image, so
 * the masks depend only on (tap, vector position in the image) and come from a
 * small table. Then
 *   forward   out[oc, p] = sum_{c,t} w[oc,c,t] * in[c, p + sh_t] * valid_t(p)
 *   data grad din[c, q] = sum_{oc,t} w[oc,c,8-t] * dout[oc, q + sh_t] * valid_t(q)
 *             (the same kernel with flipped, transposed weights)
 *   weight grad dw[oc,c,t] += sum_p dout[oc, p] * in[c, p + sh_t] * valid_t(p)
 * Register tiles: 8 output channels x 48 positions (forward), 3 output
 * channels x 9 taps with 16-lane partial sums (weight gradient). Vectors with
 * no row border need only two column masks; on small images (mostly border
 * vectors) the weight gradient first packs the masked taps of a channel.
 * Threads take blocks of positions on demand; the weight gradient is summed
 * per work item and the items added in order (thread-count independent).
 *
 * Gradients: dw and db ACCUMULATE (+=); dinp is OVERWRITTEN (as conv2d). */
#ifndef GC_NN_CONV3X3_H
#define GC_NN_CONV3X3_H

#include <stddef.h>

#include "nn/conv2d.h"

/* 1 when this build has the kernels and the shape qualifies:
 * 3x3, stride 1, pad 1, H*W a multiple of 16 */
int conv3x3_ok(const Conv2dShape *s);
/* floats of scratch the routines below need */
size_t conv3x3_work_floats(const Conv2dShape *s);

void conv3x3_forward(float *out /*OC,ldo*/, float *work /*conv3x3_work_floats*/, const float *inp /*C,ldi*/,
                     const float *w /*OC,C,3,3*/, const float *b /*OC or NULL*/, const Conv2dShape *s);
void conv3x3_backward(float *dinp /*C,ldi, overwritten; NULL = skip*/, float *dw /*OC,C,3,3, +=*/,
                      float *db /*OC, +=, NULL = skip*/, float *work /*conv3x3_work_floats*/,
                      const float *dout /*OC,ldo*/,
                      const float *inp /*C,ldi*/, const float *w /*OC,C,3,3*/, const Conv2dShape *s);

#endif
