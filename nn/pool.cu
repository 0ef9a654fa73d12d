/* Global average pooling and max pooling on the GPU (see nn/cuda_ops.h; CPU
 * twin nn/pool.c). No parameters; input gradients are OVERWRITTEN.
 *
 * Each output is computed by one thread with the CPU's loop and rounding
 * order, so results are bit-identical to the CPU op (the CPU sums a plane in
 * index order in float; max pooling's ties go to the first, NaN propagates).
 * Max-pooling backward gathers instead of scattering: each input element sums,
 * in output order, the gradients of the outputs whose argmax it is (the CPU
 * adds them into a zeroed plane in the same order), so no atomics are needed.
 *
 * Shape letters: N batch, C channels, HW = H*W, P planes, OH,OW output size.
 */
#include <float.h>

#include "nn/ctx_cuda.h"
#include "nn/cuda_ops.h"
extern "C" {
#include "nn/pool.h" /* maxpool2d_out_size, the CPU definition of the output size */
}

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* out[n, c] = (sum_i inp[n, c, i]) * (1/HW), one thread per (n, c) */
__global__ static void avgpool_forward_kernel(float *out /*N,C*/, const float *inp /*N,C,HW*/, int HW, float inv,
                                              size_t NC) {
    GRID_STRIDE(k, NC) {
        const float *x = inp + k * (size_t)HW;
        float s = 0.0f;
        for (int i = 0; i < HW; i++) s = __fadd_rn(s, x[i]);
        out[k] = __fmul_rn(s, inv);
    }
}

/* forward: out[n,c] = (1/HW) sum_i inp[n,c,i]  =>  dinp[n,c,i] = dout[n,c] / HW */
__global__ static void avgpool_backward_kernel(float *dinp /*N,C,HW*/, const float *dout /*N,C*/, int HW, float inv,
                                               size_t n) {
    GRID_STRIDE(i, n) dinp[i] = __fmul_rn(dout[i / (size_t)HW], inv);
}

extern "C" void avgpool_global_forward_cuda(float *out /*N,C*/, const float *inp /*N,C,HW*/, int N, int C, int HW) {
    if (N <= 0 || C <= 0 || HW <= 0) return;
    size_t NC = (size_t)N * C;
    avgpool_forward_kernel<<<nn_blocks(NC), NN_THREADS>>>(out, inp, HW, 1.0f / HW, NC);
    cudaCheckLast();
}

extern "C" void avgpool_global_backward_cuda(float *dinp /*N,C,HW, overwritten*/, const float *dout /*N,C*/, int N,
                                             int C, int HW) {
    if (N <= 0 || C <= 0 || HW <= 0) return;
    size_t n = (size_t)N * C * HW;
    avgpool_backward_kernel<<<nn_blocks(n), NN_THREADS>>>(dinp, dout, HW, 1.0f / HW, n);
    cudaCheckLast();
}

/* one thread per output (p, oh, ow): the CPU's window loop */
__global__ static void maxpool_forward_kernel(float *out /*P,OH,OW*/, int *argmax /*P,OH,OW*/,
                                              const float *inp /*P,H,W*/, int H, int W, int OH, int OW, int K,
                                              int stride, int pad, size_t n) {
    GRID_STRIDE(o, n) {
        int ow = (int)(o % (size_t)OW);
        int oh = (int)((o / (size_t)OW) % (size_t)OH);
        size_t p = o / ((size_t)OW * OH);
        const float *x = inp + p * (size_t)H * W;
        float best = -FLT_MAX;
        int arg = -1;
        for (int kh = 0; kh < K && !(arg >= 0 && best != best); kh++) {
            int ih = oh * stride - pad + kh;
            if (ih < 0 || ih >= H) continue;
            for (int kw = 0; kw < K; kw++) {
                int iw = ow * stride - pad + kw;
                if (iw < 0 || iw >= W) continue;
                float v = x[ih * W + iw];
                if (arg < 0 || v > best || v != v) { /* NaN propagates, as torch */
                    best = v;
                    arg = ih * W + iw;
                    if (v != v) break;
                }
            }
        }
        out[o] = best;
        argmax[o] = arg;
    }
}

/* forward: out[p,o] = inp[p, argmax[p,o]]  =>  dinp[p,i] = sum over o with argmax[p,o] == i of dout[p,o].
 * Outputs whose window holds input (ih, iw): oh*stride - pad <= ih <= oh*stride - pad + K - 1. */
__global__ static void maxpool_backward_kernel(float *dinp /*P,H,W*/, const float *dout /*P,OH,OW*/,
                                               const int *argmax /*P,OH,OW*/, int H, int W, int OH, int OW, int K,
                                               int stride, int pad, size_t n) {
    GRID_STRIDE(i, n) {
        int iw = (int)(i % (size_t)W);
        int ih = (int)((i / (size_t)W) % (size_t)H);
        size_t p = i / ((size_t)W * H);
        int idx = ih * W + iw;
        int lo_h = ih + pad - K + 1, lo_w = iw + pad - K + 1;
        int oh0 = lo_h <= 0 ? 0 : (lo_h + stride - 1) / stride;
        int ow0 = lo_w <= 0 ? 0 : (lo_w + stride - 1) / stride;
        int oh1 = (ih + pad) / stride, ow1 = (iw + pad) / stride;
        if (oh1 > OH - 1) oh1 = OH - 1;
        if (ow1 > OW - 1) ow1 = OW - 1;
        const float *g = dout + p * (size_t)OH * OW;
        const int *a = argmax + p * (size_t)OH * OW;
        float s = 0.0f;
        for (int oh = oh0; oh <= oh1; oh++)
            for (int ow = ow0; ow <= ow1; ow++) {
                int o = oh * OW + ow;
                if (a[o] == idx) s = __fadd_rn(s, g[o]);
            }
        dinp[i] = s;
    }
}

extern "C" void maxpool2d_forward_cuda(float *out /*P,OH,OW*/, int *argmax /*P,OH,OW*/, const float *inp /*P,H,W*/,
                                       int P, int H, int W, int K, int stride, int pad) {
    const int OH = maxpool2d_out_size(H, K, stride, pad), OW = maxpool2d_out_size(W, K, stride, pad);
    if (P <= 0 || OH <= 0 || OW <= 0) return;
    size_t n = (size_t)P * OH * OW;
    maxpool_forward_kernel<<<nn_blocks(n), NN_THREADS>>>(out, argmax, inp, H, W, OH, OW, K, stride, pad, n);
    cudaCheckLast();
}

extern "C" void maxpool2d_backward_cuda(float *dinp /*P,H,W, overwritten*/, const float *dout /*P,OH,OW*/,
                                        const int *argmax /*P,OH,OW*/, int P, int H, int W, int K, int stride,
                                        int pad) {
    const int OH = maxpool2d_out_size(H, K, stride, pad), OW = maxpool2d_out_size(W, K, stride, pad);
    if (P <= 0 || H <= 0 || W <= 0) return;
    size_t n = (size_t)P * H * W;
    if (OH <= 0 || OW <= 0) {
        cudaCheck(cudaMemsetAsync(dinp, 0, n * sizeof(float), 0));
        return;
    }
    maxpool_backward_kernel<<<nn_blocks(n), NN_THREADS>>>(dinp, dout, argmax, H, W, OH, OW, K, stride, pad, n);
    cudaCheckLast();
}
