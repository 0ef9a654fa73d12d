/* The language-model ops on the GPU (see nn/cuda_ops.h): the CUDA twins of
 * nn/embedding.c, nn/dropout.c and nn/lstm.c, with the CPU signatures and
 * contracts, every pointer a DEVICE pointer.
 *
 *   embedding   gather forward; the backward scatter-add runs one thread per
 *               column e, adding the rows n = 0..N-1 in order, exactly the CPU's
 *               loop: deterministic and bit-identical to the CPU given the same
 *               dout (no atomics). dw ACCUMULATES (+=).
 *   dropout     the CPU's masks, bit for bit: dropout_keep(s, i, p) of
 *               nn/dropout.h is __host__ __device__, the scale 1/(1-p) is the
 *               host's float, the product one IEEE multiply. Outputs OVERWRITTEN,
 *               in place allowed.
 *   lstm        torch.nn.LSTM, gates i, f, g, o (equations in nn/lstm.h). The
 *               GEMMs through cuBLAS (nn/linear.cu, and the per-step recurrent
 *               product on the context's handle), the gate nonlinearities and
 *               the cell update in one pointwise kernel per step, forward and
 *               backward. w_ih, w_hh, b_ih, b_hh gradients ACCUMULATE (+=);
 *               dx, dh0, dc0 are OVERWRITTEN.
 *
 * Numerics. The pointwise kernels repeat nn/lstm.c's expressions in its order
 * with IEEE-rounded __fadd_rn/__fmul_rn/__fdiv_rn, so nvcc contracts nothing
 * into FMAs (the CPU build, ISO C, contracts nothing either). They still differ
 * from the CPU in the last bit where expf does (CUDA's expf is within 2 ulp,
 * glibc's within 1), and the GEMMs sum in other orders than OpenBLAS: the LSTM
 * agrees with the CPU to float rounding, not bit for bit (tolerances in
 * tests/cuda/test_lstm_lm_cuda.c).
 *
 * Shape letters: T time steps, N batch (for the embedding: N tokens),
 * V vocabulary, E embedding size, In input features, H hidden units, G = 4H;
 * n elements (dropout).
 */
#include <stdint.h>

#include "common/errors.h"
#include "nn/constants.h"
#include "nn/ctx_cuda.h"
#include "nn/cuda_ops.h"
#include "nn/dropout.h"

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* ------------------------------------------------------------ embedding ---- */

/* *first = the smallest n with tokens[n] outside [0, V); stays N when all are valid */
__global__ static void check_tokens_kernel(int *first /*1*/, const int *tokens /*N*/, int N, int V) {
    GRID_STRIDE(n, (size_t)N) {
        int tok = tokens[n];
        if (tok < 0 || tok >= V) atomicMin(first, (int)n);
    }
}

/* out[n, e] = w[tokens[n], e] */
__global__ static void embedding_forward_kernel(float *out /*N,E*/, const int *tokens /*N*/, const float *w /*V,E*/,
                                                int E, size_t total /*N*E*/) {
    GRID_STRIDE(i, total) {
        size_t n = i / (size_t)E, e = i % (size_t)E;
        out[i] = w[(size_t)tokens[n] * E + e];
    }
}

/* forward: out[n, e] = w[tokens[n], e]
 * => dw[v, e] += sum over n with tokens[n] == v of dout[n, e], n in increasing
 * order. Thread e owns column e of every row of dw, so no two threads touch the
 * same element (no atomics), and each element receives its terms in the CPU's
 * order (nn/embedding.c parallelises over columns the same way). */
__global__ static void embedding_backward_kernel(float *dw /*V,E, +=*/, const float *dout /*N,E*/,
                                                 const int *tokens /*N*/, int N, int E) {
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < E; e += gridDim.x * blockDim.x)
        for (int n = 0; n < N; n++) {
            size_t at = (size_t)tokens[n] * E + e;
            dw[at] = __fadd_rn(dw[at], dout[(size_t)n * E + e]);
        }
}

/* 1 when every token lies in [0, V), else 0 (the callers then return -GC_ERR_PARAM
 * without writing, as the CPU ops); synchronizes */
static int tokens_valid(const int *tokens /*N*/, int N, int V) {
    NnCudaCtx *ctx = nn_cuda_ctx();
    int *first = (int *)nn_cuda_scratch(ctx, NN_SCRATCH_FLAG, sizeof(int));
    cudaCheck(cudaMemcpy(first, &N, sizeof(int), cudaMemcpyHostToDevice));
    check_tokens_kernel<<<nn_blocks((size_t)N), NN_THREADS>>>(first, tokens, N, V);
    cudaCheckLast();
    int got = N;
    cudaCheck(cudaMemcpy(&got, first, sizeof(int), cudaMemcpyDeviceToHost));
    return got == N;
}

extern "C" int embedding_forward_cuda(float *out /*N,E*/, const int *tokens /*N*/, const float *w /*V,E*/, int N,
                                      int V, int E) {
    if (N < 0 || V <= 0 || E <= 0) return -GC_ERR_PARAM;
    if (N == 0) return 0;
    if (!tokens_valid(tokens, N, V)) return -GC_ERR_PARAM;
    size_t total = (size_t)N * E;
    embedding_forward_kernel<<<nn_blocks(total), NN_THREADS>>>(out, tokens, w, E, total);
    cudaCheckLast();
    return 0;
}

extern "C" int embedding_backward_cuda(float *dw /*V,E, +=*/, const float *dout /*N,E*/, const int *tokens /*N*/,
                                       int N, int V, int E) {
    if (N < 0 || V <= 0 || E <= 0) return -GC_ERR_PARAM;
    if (N == 0) return 0;
    if (!tokens_valid(tokens, N, V)) return -GC_ERR_PARAM;
    embedding_backward_kernel<<<(E + NN_THREADS - 1) / NN_THREADS, NN_THREADS>>>(dw, dout, tokens, N, E);
    cudaCheckLast();
    return 0;
}

/* -------------------------------------------------------------- dropout ---- */

/* out[i] = keep_i ? inp[i] * scale : 0, scale = 1/(1-p) (the forward and, with
 * the same s, the backward: dinp[i] = keep_i * dout[i] / (1 - p)) */
__global__ static void dropout_kernel(float *out /*n*/, const float *inp /*n*/, float p, float scale, uint64_t s,
                                      size_t n) {
    GRID_STRIDE(i, n) out[i] = dropout_keep(s, (uint64_t)i, p) ? __fmul_rn(inp[i], scale) : 0.0f;
}

static int dropout_apply_cuda(float *out /*n*/, const float *inp /*n*/, float p, uint64_t s, size_t n) {
    if (!(p >= 0.0f && p < 1.0f)) return -GC_ERR_PARAM;
    if (n == 0) return 0;
    if (p == 0.0f) {
        if (out != inp) cudaCheck(cudaMemcpy(out, inp, n * sizeof(float), cudaMemcpyDeviceToDevice));
        return 0;
    }
    const float scale = 1.0f / (1.0f - p); /* the CPU's float expression (nn/dropout.c) */
    dropout_kernel<<<nn_blocks(n), NN_THREADS>>>(out, inp, p, scale, s, n);
    cudaCheckLast();
    return 0;
}

extern "C" int dropout_forward_cuda(float *out /*n*/, const float *inp /*n*/, float p, uint64_t s, size_t n) {
    return dropout_apply_cuda(out, inp, p, s, n);
}

extern "C" int dropout_backward_cuda(float *dinp /*n*/, const float *dout /*n*/, float p, uint64_t s, size_t n) {
    /* forward: out[i] = keep_i * inp[i] / (1 - p)  =>  dinp[i] = keep_i * dout[i] / (1 - p) */
    return dropout_apply_cuda(dinp, dout, p, s, n);
}

/* ----------------------------------------------------------------- LSTM ---- */

/* nn/lstm.c's sigmoidf_: 1 / (1 + expf(-x)) */
__device__ static inline float sigmoid_dev(float x) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x))); }

/* nn/lstm.c's tanhf_: below GC_LSTM_TANH_SERIES_BELOW
 *   x * (1 + x2 * (-1/3 + x2 * (2/15 + x2 * (-17/315)))),  x2 = x * x
 * else 1 - 2 / (expf(2x) + 1) */
__device__ static inline float tanh_dev(float x) {
    if (fabsf(x) < GC_LSTM_TANH_SERIES_BELOW) {
        const float x2 = __fmul_rn(x, x);
        float p = __fadd_rn(2.0f / 15.0f, __fmul_rn(x2, -17.0f / 315.0f));
        p = __fadd_rn(-1.0f / 3.0f, __fmul_rn(x2, p));
        p = __fadd_rn(1.0f, __fmul_rn(x2, p));
        return __fmul_rn(x, p);
    }
    return __fsub_rn(1.0f, __fdiv_rn(2.0f, __fadd_rn(expf(__fmul_rn(2.0f, x)), 1.0f)));
}

/* One time step of the cell, one thread per (n, j), k = n*H + j:
 *   a already holds x_t @ w_ih^T + b_ih + h_{t-1} @ w_hh^T; adds b_hh and
 *   i = sigmoid(a_i)  f = sigmoid(a_f)  g = tanh(a_g)  o = sigmoid(a_o)
 *   c_t = f * c_{t-1} + i * g      h_t = o * tanh(c_t)
 * and stores i, f, g, o over a (the backward's cache), c_t, tanh(c_t), h_t.
 * Thread k reads and writes only a[n, j + {0,1,2,3}H] and element k of the
 * state arrays: no two threads share an element. */
__global__ static void lstm_cell_forward_kernel(float *a /*N,4H*/, float *h /*N,H*/, float *c /*N,H*/,
                                                float *tc /*N,H*/, const float *cprev /*N,H*/,
                                                const float *b_hh /*4H*/, int H, size_t NH) {
    GRID_STRIDE(k, NH) {
        const size_t n = k / (size_t)H;
        const int j = (int)(k % (size_t)H);
        float *an = a + n * 4 * (size_t)H;
        const float i = sigmoid_dev(__fadd_rn(an[j], b_hh[j]));
        const float f = sigmoid_dev(__fadd_rn(an[H + j], b_hh[H + j]));
        const float g = tanh_dev(__fadd_rn(an[2 * H + j], b_hh[2 * H + j]));
        const float o = sigmoid_dev(__fadd_rn(an[3 * H + j], b_hh[3 * H + j]));
        const float cn = __fadd_rn(__fmul_rn(f, cprev[k]), __fmul_rn(i, g));
        const float tcn = tanh_dev(cn);
        an[j] = i;
        an[H + j] = f;
        an[2 * H + j] = g;
        an[3 * H + j] = o;
        c[k] = cn;
        tc[k] = tcn;
        h[k] = __fmul_rn(o, tcn);
    }
}

/* One time step backward, one thread per (n, j), as nn/lstm.c:
 *   dh = dh_out + dhn                       h_t feeds the output and step t+1
 *   forward h_t = o * tanh(c_t), c_t = f * c_{t-1} + i * g (c_t also feeds step t+1):
 *   dc = dcn + dh * o * (1 - tanh(c_t)^2)
 *   forward i = sigmoid(a_i) (di/da_i = i (1 - i)), g = tanh(a_g) (1 - g^2):
 *   da_i = dc * g * i * (1 - i)       da_f = dc * c_{t-1} * f * (1 - f)
 *   da_g = dc * i * (1 - g^2)         da_o = dh * tanh(c_t) * o * (1 - o)
 *   dcn = dc * f                       (the gradient reaching c_{t-1})
 * dhn is only read here; the caller then overwrites it with da @ w_hh. */
__global__ static void lstm_cell_backward_kernel(float *da /*N,4H*/, float *dcn /*N,H*/, const float *act /*N,4H*/,
                                                 const float *tc /*N,H*/, const float *cprev /*N,H*/,
                                                 const float *dh_out /*N,H*/, const float *dhn /*N,H*/, int H,
                                                 size_t NH) {
    GRID_STRIDE(k, NH) {
        const size_t n = k / (size_t)H;
        const int j = (int)(k % (size_t)H);
        const float *an = act + n * 4 * (size_t)H;
        float *dan = da + n * 4 * (size_t)H;
        const float i = an[j], f = an[H + j], g = an[2 * H + j], o = an[3 * H + j];
        const float t = tc[k];
        const float dh = __fadd_rn(dh_out[k], dhn[k]);
        const float dc = __fadd_rn(dcn[k], __fmul_rn(__fmul_rn(dh, o), __fsub_rn(1.0f, __fmul_rn(t, t))));
        dan[j] = __fmul_rn(__fmul_rn(__fmul_rn(dc, g), i), __fsub_rn(1.0f, i));
        dan[H + j] = __fmul_rn(__fmul_rn(__fmul_rn(dc, cprev[k]), f), __fsub_rn(1.0f, f));
        dan[2 * H + j] = __fmul_rn(__fmul_rn(dc, i), __fsub_rn(1.0f, __fmul_rn(g, g)));
        dan[3 * H + j] = __fmul_rn(__fmul_rn(__fmul_rn(dh, t), o), __fsub_rn(1.0f, o));
        dcn[k] = __fmul_rn(dc, f);
    }
}

extern "C" void lstm_forward_cuda(float *hs /*T+1,N,H*/, float *cs /*T+1,N,H*/,
                                  float *gates /*T,N,4H: i,f,g,o after nonlinearity*/, float *tanhc /*T,N,H*/,
                                  const float *x /*T,N,In*/, const float *w_ih /*4H,In*/, const float *w_hh /*4H,H*/,
                                  const float *b_ih /*4H*/, const float *b_hh /*4H*/, int T, int N, int In, int H) {
    if (T <= 0 || N <= 0 || H <= 0) return;
    NnCudaCtx *ctx = nn_cuda_ctx();
    const int G = 4 * H;
    const size_t NH = (size_t)N * H, NG = (size_t)N * G;
    const float one = 1.0f;
    /* a[t] = x_t @ w_ih^T + b_ih for all t at once */
    linear_forward_cuda(gates, x, w_ih, b_ih, T * N, In, G);
    for (int t = 0; t < T; t++) {
        float *a = gates + t * NG;
        const float *hprev = hs + t * NH, *cprev = cs + t * NH;
        /* a[t] += h_{t-1} @ w_hh^T: row-major a[N,G] += hprev[N,H] @ w_hh[G,H]^T;
         * column-major (as nn/linear.cu): a^T[G,N] += (w_hh as [H,G])^T @ (hprev as [H,N]) */
        cublasCheck(cublasSgemm(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, G, N, H, &one, w_hh, H, hprev, H, &one, a, G));
        lstm_cell_forward_kernel<<<nn_blocks(NH), NN_THREADS>>>(a, hs + (t + 1) * NH, cs + (t + 1) * NH,
                                                                tanhc + t * NH, cprev, b_hh, H, NH);
        cudaCheckLast();
    }
}

extern "C" void lstm_backward_cuda(float *dx /*T,N,In, overwritten; NULL = skip*/,
                                   float *dh0 /*N,H, overwritten; NULL = skip*/,
                                   float *dc0 /*N,H, overwritten; NULL = skip*/, float *dw_ih /*4H,In, +=*/,
                                   float *dw_hh /*4H,H, +=*/, float *db_ih /*4H, +=*/, float *db_hh /*4H, +=*/,
                                   float *dgates /*T,N,4H scratch*/, float *dstate /*2,N,H scratch*/,
                                   const float *dhs /*T,N,H*/, const float *hs /*T+1,N,H*/,
                                   const float *cs /*T+1,N,H*/, const float *gates /*T,N,4H*/,
                                   const float *tanhc /*T,N,H*/, const float *x /*T,N,In*/,
                                   const float *w_ih /*4H,In*/, const float *w_hh /*4H,H*/, int T, int N, int In,
                                   int H) {
    if (T <= 0 || N <= 0 || H <= 0) return;
    NnCudaCtx *ctx = nn_cuda_ctx();
    const int G = 4 * H;
    const size_t NH = (size_t)N * H, NG = (size_t)N * G;
    const float one = 1.0f, zero = 0.0f;
    /* dh_next, dc_next: gradient reaching (h_t, c_t) from step t+1; zero at t = T-1
     * (truncated BPTT: the next batch does not send gradient back). */
    float *dhn = dstate, *dcn = dstate + NH;
    cudaCheck(cudaMemsetAsync(dstate, 0, 2 * NH * sizeof(float), 0));
    for (int t = T - 1; t >= 0; t--) {
        float *da = dgates + t * NG;
        lstm_cell_backward_kernel<<<nn_blocks(NH), NN_THREADS>>>(da, dcn, gates + t * NG, tanhc + t * NH,
                                                                 cs + t * NH, dhs + t * NH, dhn, H, NH);
        cudaCheckLast();
        /* a = ... + h_{t-1} @ w_hh^T  =>  dh_{t-1} = da @ w_hh: row-major dhn[N,H] = da[N,G] @ w_hh[G,H];
         * column-major (as nn/linear.cu's dinp): dhn^T[H,N] = (w_hh as [H,G]) @ (da as [G,N]).
         * The kernel above has read dhn before this overwrites it (same stream, in order). */
        if (t > 0 || dh0)
            cublasCheck(cublasSgemm(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, H, N, G, &one, w_hh, H, da, G, &zero, dhn,
                                    H));
    }
    if (dh0) cudaCheck(cudaMemcpyAsync(dh0, dhn, NH * sizeof(float), cudaMemcpyDeviceToDevice, 0));
    if (dc0) cudaCheck(cudaMemcpyAsync(dc0, dcn, NH * sizeof(float), cudaMemcpyDeviceToDevice, 0));
    /* a = x @ w_ih^T + b_ih + h_prev @ w_hh^T + b_hh over all T*N rows, h_prev = hs[0..T-1]:
     * dw_hh += da^T @ h_prev, db_hh += sum da; dw_ih += da^T @ x, db_ih += sum da, dx = da @ w_ih */
    linear_backward_cuda(NULL, dw_hh, db_hh, dgates, hs, w_hh, T * N, H, G);
    linear_backward_cuda(dx, dw_ih, db_ih, dgates, x, w_ih, T * N, In, G);
}
