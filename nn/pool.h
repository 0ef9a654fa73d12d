/* Pooling: global average pooling and 2-D max pooling, fp32, CPU.
 * No parameters; input gradients are OVERWRITTEN.
 *
 * Global average pooling reads CNHW activations and writes [N, C] rows, ready
 * for the classifier (torch: adaptive_avg_pool2d(x, 1).flatten(1)).
 * Max pooling works on P independent planes of H x W (P = C*N in CNHW, or N*C
 * in NCHW: the layout does not matter), as torch.nn.MaxPool2d with ceil_mode
 * False, dilation 1, padding counted as -inf. It stores the argmax (index within
 * the plane) of every output for the backward pass; ties go to the first.
 */
#ifndef GC_NN_POOL_H
#define GC_NN_POOL_H

#include <stddef.h>

/* out[n, c] = mean over HW of inp[c*ld + n*HW + :]   (ld >= N*HW: channel stride) */
void avgpool_global_forward(float *out /*N,C*/, const float *inp /*C,ld*/, int N, int C, int HW, size_t ld);
void avgpool_global_backward(float *dinp /*C,ld, overwritten*/, const float *dout /*N,C*/, int N, int C, int HW,
                             size_t ld);

/* output size along one axis: (H + 2*pad - K) / stride + 1 */
int maxpool2d_out_size(int H, int K, int stride, int pad);
void maxpool2d_forward(float *out /*P,OH,OW*/, int *argmax /*P,OH,OW*/, const float *inp /*P,H,W*/, int P, int H,
                       int W, int K, int stride, int pad);
void maxpool2d_backward(float *dinp /*P,H,W, overwritten*/, const float *dout /*P,OH,OW*/,
                        const int *argmax /*P,OH,OW*/, int P, int H, int W, int K, int stride, int pad);

#endif
