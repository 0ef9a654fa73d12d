/* Leading-axes swap on the GPU (see nn/cuda_ops.h; CPU twin nn/layout.c):
 * out[b, a, s] = inp[a, b, s], e.g. NCHW -> CNHW with A=N, B=C, S=H*W.
 * A pure copy, bit-identical to the CPU. out must not alias inp. */
#include "nn/ctx_cuda.h"
#include "nn/cuda_ops.h"

/* one thread per output element; consecutive threads walk s, so both the
 * reads and the writes of a row of S values are coalesced */
__global__ static void swap01_kernel(float *out /*B,A,S*/, const float *inp /*A,B,S*/, int A, int B, int S,
                                     size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t s = i % (size_t)S, t = i / (size_t)S;
        size_t a = t % (size_t)A, b = t / (size_t)A;
        out[i] = inp[(a * (size_t)B + b) * (size_t)S + s];
    }
}

extern "C" void swap01_cuda(float *out /*B,A,S*/, const float *inp /*A,B,S*/, int A, int B, int S) {
    if (A <= 0 || B <= 0 || S <= 0) return;
    size_t n = (size_t)A * B * S;
    swap01_kernel<<<nn_blocks(n), NN_THREADS>>>(out, inp, A, B, S, n);
    cudaCheckLast();
}
