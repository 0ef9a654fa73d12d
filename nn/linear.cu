/* Fully connected layer on the GPU through cuBLAS (see nn/cuda_ops.h; CPU twin
 * nn/linear.c): out = inp @ w^T + b, weights [OUT, IN] as PyTorch.
 * Parameter gradients dw, db ACCUMULATE (+=); dinp is OVERWRITTEN.
 *
 * cuBLAS is column-major: a row-major [R, C] matrix is, to cuBLAS, its
 * transpose [C, R] with leading dimension C. So every row-major product
 * Z = X @ Y is issued as the column-major product Z^T = Y^T @ X^T.
 * db is a column sum done by one thread per output in row order (the CPU's
 * order: bit-identical). Strict fp32 unless nn_cuda_set_tf32(1).
 *
 * Shape letters: N rows, IN input features, OUT output features.
 */
#include "nn/ctx_cuda.h"
#include "nn/cuda_ops.h"

/* out[n, o] = b[o] */
__global__ static void bias_fill_kernel(float *out /*N,OUT*/, const float *b /*OUT*/, int OUT, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = b[i % (size_t)OUT];
}

/* db[o] += sum_n dout[n, o] */
__global__ static void bias_grad_kernel(float *db /*OUT*/, const float *dout /*N,OUT*/, int N, int OUT) {
    for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < OUT; o += gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int n = 0; n < N; n++) s = __fadd_rn(s, dout[(size_t)n * OUT + o]);
        db[o] = __fadd_rn(db[o], s);
    }
}

extern "C" void linear_forward_cuda(float *out /*N,OUT*/, const float *inp /*N,IN*/, const float *w /*OUT,IN*/,
                                    const float *b /*OUT or NULL*/, int N, int IN, int OUT) {
    if (N <= 0 || OUT <= 0) return;
    NnCudaCtx *ctx = nn_cuda_ctx();
    float one = 1.0f, beta = 0.0f;
    if (b) {
        size_t n = (size_t)N * OUT;
        bias_fill_kernel<<<nn_blocks(n), NN_THREADS>>>(out, b, OUT, n);
        cudaCheckLast();
        beta = 1.0f;
    }
    if (IN <= 0) { /* empty product: out = b or 0 */
        if (!b) cudaCheck(cudaMemsetAsync(out, 0, (size_t)N * OUT * sizeof(float), 0));
        return;
    }
    /* row-major out[N,OUT] (+)= inp[N,IN] @ w[OUT,IN]^T;
     * column-major: out^T[OUT,N] (+)= (w as [IN,OUT])^T @ (inp as [IN,N]) */
    cublasCheck(cublasSgemm(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, OUT, N, IN, &one, w, IN, inp, IN, &beta, out, OUT));
}

extern "C" void linear_backward_cuda(float *dinp /*N,IN, overwritten; NULL = skip*/, float *dw /*OUT,IN, +=*/,
                                     float *db /*OUT, +=, NULL = skip*/, const float *dout /*N,OUT*/,
                                     const float *inp /*N,IN*/, const float *w /*OUT,IN*/, int N, int IN, int OUT) {
    if (N <= 0 || OUT <= 0) return;
    NnCudaCtx *ctx = nn_cuda_ctx();
    float one = 1.0f, zero = 0.0f;
    /* forward: out[n,o] = sum_i inp[n,i] * w[o,i] + b[o] */
    if (IN > 0) {
        /* dinp[N,IN] = dout[N,OUT] @ w[OUT,IN]; column-major: dinp^T[IN,N] = (w as [IN,OUT]) @ (dout as [OUT,N]) */
        if (dinp)
            cublasCheck(cublasSgemm(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, IN, N, OUT, &one, w, IN, dout, OUT, &zero,
                                    dinp, IN));
        /* dw[OUT,IN] += dout^T @ inp; column-major: dw^T[IN,OUT] += (inp as [IN,N]) @ (dout as [OUT,N])^T */
        cublasCheck(
            cublasSgemm(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_T, IN, OUT, N, &one, inp, IN, dout, OUT, &one, dw, IN));
    }
    if (db) {
        bias_grad_kernel<<<(OUT + NN_THREADS - 1) / NN_THREADS, NN_THREADS>>>(db, dout, N, OUT);
        cudaCheckLast();
    }
}
