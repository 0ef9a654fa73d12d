/* Kernels of the GPU ResNet (nn/resnet_cuda.c): the option A shortcut
 * (see nn/cuda_ops.h), NCHW. Pure copies and one add per element, bit-identical
 * to the CPU's shortcut_pad_forward/backward in nn/resnet.c.
 * Shape letters: N batch, Cin/Cout channels in/out, H,W input, OH,OW output. */
#include "nn/ctx_cuda.h"
#include "nn/cuda_ops.h"

/* one thread per output element */
__global__ static void pad_forward_kernel(float *out /*N,Cout,OH,OW*/, const float *x /*N,Cin,H,W*/, int Cin,
                                          int Cout, int H, int W, int OH, int OW, int stride, int lo, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int ow = (int)(i % (size_t)OW);
        int oh = (int)((i / (size_t)OW) % (size_t)OH);
        int c = (int)((i / ((size_t)OW * OH)) % (size_t)Cout);
        size_t nn = i / ((size_t)OW * OH * Cout);
        int ci = c - lo;
        out[i] = (ci < 0 || ci >= Cin)
                     ? 0.0f
                     : x[((nn * Cin + ci) * H + (size_t)oh * stride) * W + (size_t)ow * stride];
    }
}

/* one thread per element of dout inside the copied channels; each writes a
 * distinct dx element (stride >= 1), so no two threads collide */
__global__ static void pad_backward_kernel(float *dx /*N,Cin,H,W*/, const float *dout /*N,Cout,OH,OW*/, int Cin,
                                           int Cout, int H, int W, int OH, int OW, int stride, int lo, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int ow = (int)(i % (size_t)OW);
        int oh = (int)((i / (size_t)OW) % (size_t)OH);
        int ci = (int)((i / ((size_t)OW * OH)) % (size_t)Cin);
        size_t nn = i / ((size_t)OW * OH * Cin);
        float *d = &dx[((nn * Cin + ci) * H + (size_t)oh * stride) * W + (size_t)ow * stride];
        *d = __fadd_rn(*d, dout[((nn * Cout + ci + lo) * OH + oh) * OW + ow]);
    }
}

extern "C" void resnet_shortcut_pad_forward_cuda(float *out /*N,Cout,OH,OW*/, const float *x /*N,Cin,H,W*/, int N,
                                                 int Cin, int Cout, int H, int W, int OH, int OW, int stride) {
    size_t n = (size_t)N * Cout * OH * OW;
    if (n == 0) return;
    pad_forward_kernel<<<nn_blocks(n), NN_THREADS>>>(out, x, Cin, Cout, H, W, OH, OW, stride, (Cout - Cin) / 2, n);
    cudaCheckLast();
}

extern "C" void resnet_shortcut_pad_backward_cuda(float *dx /*N,Cin,H,W, +=*/, const float *dout /*N,Cout,OH,OW*/,
                                                  int N, int Cin, int Cout, int H, int W, int OH, int OW,
                                                  int stride) {
    size_t n = (size_t)N * Cin * OH * OW;
    if (n == 0) return;
    pad_backward_kernel<<<nn_blocks(n), NN_THREADS>>>(dx, dout, Cin, Cout, H, W, OH, OW, stride, (Cout - Cin) / 2,
                                                      n);
    cudaCheckLast();
}
