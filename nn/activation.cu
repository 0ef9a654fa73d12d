/* ReLU and the residual add on the GPU (see nn/cuda_ops.h; CPU twin
 * nn/activation.c). Layout-agnostic (n values); same expressions as the CPU, so
 * results are bit-identical. No parameters; input gradients are OVERWRITTEN.
 * In-place use (out == inp, dinp == dout) is allowed. */
#include "nn/ctx_cuda.h"
#include "nn/cuda_ops.h"

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

__global__ static void relu_forward_kernel(float *out /*n*/, const float *inp /*n*/, size_t n) {
    GRID_STRIDE(i, n) {
        float v = inp[i];
        out[i] = v > 0.0f ? v : 0.0f;
    }
}

/* forward: out = max(inp, 0)  =>  dinp = dout where out > 0, else 0 */
__global__ static void relu_backward_kernel(float *dinp /*n*/, const float *dout /*n*/, const float *out /*n*/,
                                            size_t n) {
    GRID_STRIDE(i, n) dinp[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}

__global__ static void add_forward_kernel(float *out /*n*/, const float *a /*n*/, const float *b /*n*/, size_t n) {
    GRID_STRIDE(i, n) out[i] = __fadd_rn(a[i], b[i]);
}

__global__ static void add_inplace_kernel(float *acc /*n*/, const float *x /*n*/, size_t n) {
    GRID_STRIDE(i, n) acc[i] = __fadd_rn(acc[i], x[i]);
}

extern "C" void relu_forward_cuda(float *out /*n*/, const float *inp /*n*/, size_t n) {
    if (n == 0) return;
    relu_forward_kernel<<<nn_blocks(n), NN_THREADS>>>(out, inp, n);
    cudaCheckLast();
}

extern "C" void relu_backward_cuda(float *dinp /*n*/, const float *dout /*n*/, const float *out /*n*/, size_t n) {
    if (n == 0) return;
    relu_backward_kernel<<<nn_blocks(n), NN_THREADS>>>(dinp, dout, out, n);
    cudaCheckLast();
}

extern "C" void add_forward_cuda(float *out /*n*/, const float *a /*n*/, const float *b /*n*/, size_t n) {
    if (n == 0) return;
    add_forward_kernel<<<nn_blocks(n), NN_THREADS>>>(out, a, b, n);
    cudaCheckLast();
}

extern "C" void add_inplace_cuda(float *acc /*n*/, const float *x /*n*/, size_t n) {
    if (n == 0) return;
    add_inplace_kernel<<<nn_blocks(n), NN_THREADS>>>(acc, x, n);
    cudaCheckLast();
}
