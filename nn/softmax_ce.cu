/* Softmax cross-entropy on the GPU (see nn/cuda_ops.h; CPU twin nn/softmax_ce.c),
 * torch.nn.functional.cross_entropy with reduction mean.
 *
 * Forward: one block per row (softmax_rows_kernel; 32-256 threads, more for
 * larger vocabularies: a PTB decoder has V = 10000). The threads stride over the
 * row; the max (ties to the lowest index, NaN handled as the CPU's sequential
 * loop does) and the sum of exp in double are combined by a fixed tree in shared
 * memory, so the result is deterministic. Probabilities, the normalization and
 * -log p[target] (in double) are the CPU's expressions; a single thread then adds
 * the N row terms in row order and the host reads one small result (this
 * synchronizes). Probabilities differ from the CPU's by expf's last-bit rounding
 * (CUDA's expf is within 2 ulp, glibc's within 1) and, rarely, by the last bit of
 * 1/sum: the double sum is added in another order than the CPU's.
 * Backward: dlogits = scale * (probs - onehot(target)), OVERWRITTEN, with the
 * CPU's two roundings (scale*p, then - scale): bit-identical given the same probs.
 * Targets outside [0, V) are never used as indices; the kernels record the
 * first such row and the host prints it and exits(1), as the CPU op does.
 *
 * Shape letters: N rows, V classes.
 */
#include <stdio.h>
#include <stdlib.h>

#include "nn/ctx_cuda.h"
#include "nn/cuda_ops.h"

typedef struct {
    double loss;     /* sum over rows of -log p[target] */
    long long hits;  /* rows whose argmax is the target */
    int bad_row;     /* first row with a target outside [0, V), or -1 */
    int bad_value;
} SoftmaxResult;

/* first bad row wins (smallest index): flag holds row + 1, 0 = none */
__device__ static void note_bad(int *flag /*1*/, int row) {
    int old = atomicCAS(&flag[0], 0, row + 1);
    while (old != 0 && old - 1 > row) {
        int prev = atomicCAS(&flag[0], old, row + 1);
        if (prev == old) break;
        old = prev;
    }
}

#define SOFTMAX_MAX_THREADS 256

/* Does (v, vi) come before (mx, arg) in the CPU's scan "mx = x[0]; for v >= 1:
 * if (x[v] > mx) take it"? That scan yields the largest non-NaN value at its
 * lowest index (x[0] NaN aside, handled by the caller); arg < 0 means none yet. */
__device__ static int softmax_max_before(float v, int vi, float mx, int arg) {
    if (vi < 0) return 0;
    return arg < 0 || v > mx || (v == mx && vi < arg);
}

/* blockDim.x: a power of two, at most SOFTMAX_MAX_THREADS */
__global__ static void softmax_rows_kernel(float *probs /*N,V*/, double *rowloss /*N*/, int *rowhit /*N*/,
                                           int *flag /*1*/, const float *logits /*N,V*/, const int *targets /*N*/,
                                           int N, int V) {
    __shared__ float smx[SOFTMAX_MAX_THREADS];
    __shared__ int sarg[SOFTMAX_MAX_THREADS];
    __shared__ double ssum[SOFTMAX_MAX_THREADS];
    const int tid = threadIdx.x, nt = blockDim.x;
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        const float *x = logits + (size_t)n * V;
        float *p = probs + (size_t)n * V;
        /* this thread's values v = tid, tid + nt, ...: increasing, so the first wins ties */
        float mx = 0.0f;
        int arg = -1;
        for (int v = tid; v < V; v += nt) {
            float xv = x[v];
            if (xv == xv && (arg < 0 || xv > mx)) {
                mx = xv;
                arg = v;
            }
        }
        smx[tid] = mx;
        sarg[tid] = arg;
        __syncthreads();
        for (int half = nt / 2; half > 0; half /= 2) {
            if (tid < half && softmax_max_before(smx[tid + half], sarg[tid + half], smx[tid], sarg[tid])) {
                smx[tid] = smx[tid + half];
                sarg[tid] = sarg[tid + half];
            }
            __syncthreads();
        }
        if (x[0] != x[0]) { /* the CPU's scan starts at mx = x[0] = NaN and never moves */
            mx = x[0];
            arg = 0;
        } else {
            mx = smx[0];
            arg = sarg[0];
        }
        double sum = 0.0;
        for (int v = tid; v < V; v += nt) {
            float e = expf(__fsub_rn(x[v], mx));
            p[v] = e;
            sum += e;
        }
        ssum[tid] = sum;
        __syncthreads();
        for (int half = nt / 2; half > 0; half /= 2) {
            if (tid < half) ssum[tid] += ssum[tid + half];
            __syncthreads();
        }
        sum = ssum[0];
        float inv = (float)(1.0 / sum);
        for (int v = tid; v < V; v += nt) p[v] = __fmul_rn(p[v], inv);
        if (tid == 0) {
            int t = targets[n];
            if (t < 0 || t >= V) {
                note_bad(flag, n);
                rowloss[n] = 0.0;
                rowhit[n] = 0;
            } else {
                /* -log softmax(x)[t] = log(sum exp(x - mx)) - (x[t] - mx) */
                rowloss[n] = log(sum) - ((double)x[t] - (double)mx);
                rowhit[n] = arg == t;
            }
        }
        __syncthreads(); /* smx, sarg, ssum are reused by the next row */
    }
}

/* threads per row: 32 up to V = 256, doubling until each thread has <= 8 values */
static int softmax_row_threads(int V) {
    int nt = 32;
    while (nt < SOFTMAX_MAX_THREADS && (long)nt * 8 < V) nt *= 2;
    return nt;
}

/* single thread: sum the row terms in row order */
__global__ static void softmax_sum_kernel(SoftmaxResult *res, const double *rowloss /*N*/, const int *rowhit /*N*/,
                                          const int *flag /*1*/, const int *targets /*N*/, int N) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    double loss = 0.0;
    long long hits = 0;
    for (int n = 0; n < N; n++) {
        loss += rowloss[n];
        hits += rowhit[n];
    }
    res->loss = loss;
    res->hits = hits;
    res->bad_row = flag[0] - 1;
    res->bad_value = flag[0] > 0 ? targets[flag[0] - 1] : 0;
}

/* forward: loss = scale * sum_n -log p[n, t_n], p = softmax(logits)
 * dlogits[n,v] = scale * (p[n,v] - [v == t_n]) */
__global__ static void softmax_backward_kernel(float *dlogits /*N,V*/, int *flag /*1*/, const float *probs /*N,V*/,
                                               const int *targets /*N*/, float scale, int V, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int row = (int)(i / (size_t)V), v = (int)(i % (size_t)V);
        int t = targets[row];
        float d = __fmul_rn(scale, probs[i]);
        if (v == t) d = __fsub_rn(d, scale);
        dlogits[i] = d;
        if (v == 0 && (t < 0 || t >= V)) note_bad(flag, row);
    }
}

static void bad_target(int row, int value, int V) {
    fprintf(stderr, "error: softmax_ce: target[%d] = %d outside [0, %d)\n", row, value, V);
    exit(1);
}

extern "C" float softmax_ce_forward_cuda(float *probs /*N,V*/, long *correct /*host*/, const float *logits /*N,V*/,
                                         const int *targets /*N*/, int N, int V) {
    if (N <= 0 || V <= 0) {
        if (correct) *correct = 0;
        return 0.0f;
    }
    NnCudaCtx *ctx = nn_cuda_ctx();
    double *rowloss = (double *)nn_cuda_scratch(ctx, NN_SCRATCH_SOFTMAX_ROWS, (size_t)N * (sizeof(double) + sizeof(int)));
    int *rowhit = (int *)(rowloss + N);
    SoftmaxResult *dres = (SoftmaxResult *)nn_cuda_scratch(ctx, NN_SCRATCH_SOFTMAX_RESULT, sizeof(SoftmaxResult));
    int *flag = (int *)nn_cuda_scratch(ctx, NN_SCRATCH_FLAG, sizeof(int));
    cudaCheck(cudaMemsetAsync(flag, 0, sizeof(int), 0));
    int blocks = N < 65535 ? N : 65535;
    softmax_rows_kernel<<<blocks, softmax_row_threads(V)>>>(probs, rowloss, rowhit, flag, logits, targets, N, V);
    cudaCheckLast();
    softmax_sum_kernel<<<1, 1>>>(dres, rowloss, rowhit, flag, targets, N);
    cudaCheckLast();
    SoftmaxResult r;
    cudaCheck(cudaMemcpy(&r, dres, sizeof r, cudaMemcpyDeviceToHost));
    if (r.bad_row >= 0) bad_target(r.bad_row, r.bad_value, V);
    if (correct) *correct = (long)r.hits;
    return (float)(r.loss / N);
}

extern "C" void softmax_ce_backward_cuda(float *dlogits /*N,V, overwritten*/, const float *probs /*N,V*/,
                                         const int *targets /*N*/, float scale, int N, int V) {
    if (N <= 0 || V <= 0) return;
    NnCudaCtx *ctx = nn_cuda_ctx();
    int *flag = (int *)nn_cuda_scratch(ctx, NN_SCRATCH_FLAG, sizeof(int));
    cudaCheck(cudaMemsetAsync(flag, 0, sizeof(int), 0));
    size_t n = (size_t)N * V;
    softmax_backward_kernel<<<nn_blocks(n), NN_THREADS>>>(dlogits, flag, probs, targets, scale, V, n);
    cudaCheckLast();
    int bad = 0;
    cudaCheck(cudaMemcpy(&bad, flag, sizeof bad, cudaMemcpyDeviceToHost));
    if (bad > 0) {
        int value = 0;
        cudaCheck(cudaMemcpy(&value, targets + (bad - 1), sizeof value, cudaMemcpyDeviceToHost));
        bad_target(bad - 1, value, V);
    }
}
