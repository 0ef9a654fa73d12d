/* Batch normalization on the GPU through cuDNN (see nn/cuda_ops.h; the CPU twin
 * is nn/batchnorm.c), NCHW, spatial mode (statistics per channel over N*HW
 * values), eps and momentum from nn/constants.h.
 *
 *   y = (x - mean) / sqrt(var + eps) * gamma + beta   [+ res]   [then ReLU]
 *
 * cuDNN does the normalization (cudnnBatchNormalizationForwardTraining with
 * exponentialAverageFactor = GC_BN_MOMENTUM: running = (1 - m)*running + m*batch,
 * unbiased variance for the running estimate as PyTorch; saved mean and inverse
 * std 1/sqrt(var + eps) as the CPU's mean/rstd), a kernel adds the residual and
 * applies the ReLU in place (cuDNN's fused BN_ADD_ACTIVATION needs NHWC half).
 * Backward: a kernel applies the ReLU mask (g = dout * [y > 0], also the
 * residual's gradient), then cudnnBatchNormalizationBackward with the saved
 * statistics; dgamma/dbeta use cuDNN's betaParamDiff = 1, i.e. ACCUMULATE (+=);
 * dinp and dres are OVERWRITTEN.
 *
 * Descriptors per shape (N, C, HW) are cached in the calling thread's context.
 * Shape letters: N batch, C channels, HW = H*W, n = N*C*HW.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/constants.h"
#include "nn/ctx_cuda.h"
#include "nn/cuda_ops.h"

#ifdef HAVE_CUDNN

/* cuDNN rejects a smaller epsilon (BAD_PARAM); 0 in cuDNN 9, 1e-5 in old
 * releases, where the float 1e-5 passed as a double would be just below it */
#ifdef CUDNN_BN_MIN_EPSILON
static_assert((double)GC_BN_EPS >= CUDNN_BN_MIN_EPSILON, "GC_BN_EPS is below this cuDNN's CUDNN_BN_MIN_EPSILON");
#endif

/* out = [relu](out + res) in place; res may be NULL */
__global__ static void add_relu_kernel(float *out /*n*/, const float *res /*n or NULL*/, int relu, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = out[i];
        if (res) v = __fadd_rn(v, res[i]);
        if (relu) v = v > 0.0f ? v : 0.0f;
        out[i] = v;
    }
}

/* forward: y = relu(z)  =>  g = dL/dz = dout * [y > 0]; g may alias dout */
__global__ static void relu_mask_kernel(float *g /*n*/, const float *dout /*n*/, const float *out /*n*/, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        g[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}


typedef struct {
    int N, C, HW;
    cudnnTensorDescriptor_t x;  /* N x C x HW x 1, packed NCHW */
    cudnnTensorDescriptor_t bn; /* 1 x C x 1 x 1 */
} BnPlan;

static thread_local BnPlan *t_bn = NULL;
static thread_local int t_nbn = 0, t_capbn = 0;

static void release_bn(void) {
    for (int i = 0; i < t_nbn; i++) {
        cudnnCheck(cudnnDestroyTensorDescriptor(t_bn[i].x));
        cudnnCheck(cudnnDestroyTensorDescriptor(t_bn[i].bn));
    }
    free(t_bn);
    t_bn = NULL;
    t_nbn = t_capbn = 0;
}

static const BnPlan *bn_plan(int N, int C, int HW) {
    for (int i = 0; i < t_nbn; i++)
        if (t_bn[i].N == N && t_bn[i].C == C && t_bn[i].HW == HW) return &t_bn[i];
    if (N < 1 || C < 1 || HW < 1) {
        fprintf(stderr, "error: batchnorm CUDA: bad shape N=%d C=%d HW=%d\n", N, C, HW);
        exit(1);
    }
    if (t_nbn == t_capbn) {
        t_capbn = t_capbn ? 2 * t_capbn : 32;
        t_bn = (BnPlan *)reallocCheck(t_bn, (size_t)t_capbn * sizeof(BnPlan));
    }
    BnPlan *p = &t_bn[t_nbn++];
    p->N = N, p->C = C, p->HW = HW;
    cudnnCheck(cudnnCreateTensorDescriptor(&p->x));
    cudnnCheck(cudnnCreateTensorDescriptor(&p->bn));
    cudnnCheck(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, HW, 1));
    cudnnCheck(cudnnDeriveBNTensorDescriptor(p->bn, p->x, CUDNN_BATCHNORM_SPATIAL));
    nn_cuda_on_release(release_bn);
    return p;
}

static void add_relu(float *out, const float *res, int relu, size_t n) {
    if (!res && !relu) return;
    add_relu_kernel<<<nn_blocks(n), NN_THREADS>>>(out, res, relu, n);
    cudaCheckLast();
}

extern "C" void batchnorm_forward_train_cuda(float *out /*N,C,HW*/, float *mean /*C, saved for backward*/,
                                             float *rstd /*C, saved: 1/sqrt(var + eps)*/,
                                             float *running_mean /*C, updated*/, float *running_var /*C, updated*/,
                                             const float *inp /*N,C,HW*/, const float *gamma /*C*/,
                                             const float *beta /*C*/, const float *res /*N,C,HW or NULL*/, int relu,
                                             int N, int C, int HW) {
    NnCudaCtx *ctx = nn_cuda_ctx();
    const BnPlan *p = bn_plan(N, C, HW);
    size_t n = (size_t)N * C * HW;
    if (out == inp) { /* in place: normalize from a copy */
        float *tmp = (float *)nn_cuda_scratch(ctx, NN_SCRATCH_BN, n * sizeof(float));
        cudaCheck(cudaMemcpyAsync(tmp, inp, n * sizeof(float), cudaMemcpyDeviceToDevice, 0));
        inp = tmp;
    }
    const float one = 1.0f, zero = 0.0f;
    cudnnCheck(cudnnBatchNormalizationForwardTraining(ctx->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, p->x, inp,
                                                      p->x, out, p->bn, gamma, beta, (double)GC_BN_MOMENTUM,
                                                      running_mean, running_var, (double)GC_BN_EPS, mean, rstd));
    add_relu(out, res, relu, n);
}

extern "C" void batchnorm_forward_eval_cuda(float *out /*N,C,HW*/, const float *inp /*N,C,HW*/,
                                            const float *gamma /*C*/, const float *beta /*C*/,
                                            const float *running_mean /*C*/, const float *running_var /*C*/,
                                            const float *res /*N,C,HW or NULL*/, int relu, int N, int C, int HW) {
    NnCudaCtx *ctx = nn_cuda_ctx();
    const BnPlan *p = bn_plan(N, C, HW);
    size_t n = (size_t)N * C * HW;
    if (out == inp) {
        float *tmp = (float *)nn_cuda_scratch(ctx, NN_SCRATCH_BN, n * sizeof(float));
        cudaCheck(cudaMemcpyAsync(tmp, inp, n * sizeof(float), cudaMemcpyDeviceToDevice, 0));
        inp = tmp;
    }
    const float one = 1.0f, zero = 0.0f;
    cudnnCheck(cudnnBatchNormalizationForwardInference(ctx->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, p->x, inp,
                                                       p->x, out, p->bn, gamma, beta, running_mean, running_var,
                                                       (double)GC_BN_EPS));
    add_relu(out, res, relu, n);
}

extern "C" void batchnorm_backward_cuda(float *dinp /*N,C,HW, overwritten*/,
                                        float *dres /*N,C,HW, overwritten; NULL = skip*/, float *dgamma /*C, +=*/,
                                        float *dbeta /*C, +=*/, const float *dout /*N,C,HW*/,
                                        const float *out /*N,C,HW or NULL (no ReLU)*/, const float *inp /*N,C,HW*/,
                                        const float *mean /*C*/, const float *rstd /*C*/, const float *gamma /*C*/,
                                        int N, int C, int HW) {
    /* forward: z = xhat*gamma + beta [+ res], xhat = (x - mean)*rstd, y = relu(z) or z
     *   g = dL/dz = dout * [y > 0]       (dres = g)
     *   dgamma += sum g*xhat,  dbeta += sum g
     *   dx = gamma*rstd * (g - sum(g)/M - xhat * sum(g*xhat)/M)   (cuDNN) */
    NnCudaCtx *ctx = nn_cuda_ctx();
    const BnPlan *p = bn_plan(N, C, HW);
    size_t n = (size_t)N * C * HW;
    if (dres == dinp) dres = NULL; /* both cannot be kept; dinp wins, as on the CPU */
    /* g: the gradient at z, in a buffer other than dinp (cuDNN reads dy while writing dx) */
    const float *g;
    if (out) {
        float *gb = dres ? dres : (float *)nn_cuda_scratch(ctx, NN_SCRATCH_BN, n * sizeof(float));
        relu_mask_kernel<<<nn_blocks(n), NN_THREADS>>>(gb, dout, out, n);
        cudaCheckLast();
        g = gb;
    } else if (dres) {
        if (dres != dout) cudaCheck(cudaMemcpyAsync(dres, dout, n * sizeof(float), cudaMemcpyDeviceToDevice, 0));
        g = dres;
    } else if (dout == dinp) {
        float *gb = (float *)nn_cuda_scratch(ctx, NN_SCRATCH_BN, n * sizeof(float));
        cudaCheck(cudaMemcpyAsync(gb, dout, n * sizeof(float), cudaMemcpyDeviceToDevice, 0));
        g = gb;
    } else {
        g = dout;
    }
    const float one = 1.0f, zero = 0.0f;
    cudnnCheck(cudnnBatchNormalizationBackward(ctx->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &one, p->x,
                                               inp, p->x, g, p->x, dinp, p->bn, gamma, dgamma, dbeta,
                                               (double)GC_BN_EPS, mean, rstd));
}

#else /* no cuDNN */

static void no_cudnn(void) {
    fprintf(stderr, "error: batchnorm CUDA: this build has no cuDNN (rebuild with cuDNN, or use the CPU model)\n");
    exit(1);
}
extern "C" void batchnorm_forward_train_cuda(float *out, float *mean, float *rstd, float *running_mean,
                                             float *running_var, const float *inp, const float *gamma,
                                             const float *beta, const float *res, int relu, int N, int C, int HW) {
    (void)out, (void)mean, (void)rstd, (void)running_mean, (void)running_var, (void)inp, (void)gamma, (void)beta;
    (void)res, (void)relu, (void)N, (void)C, (void)HW;
    no_cudnn();
}
extern "C" void batchnorm_forward_eval_cuda(float *out, const float *inp, const float *gamma, const float *beta,
                                            const float *running_mean, const float *running_var, const float *res,
                                            int relu, int N, int C, int HW) {
    (void)out, (void)inp, (void)gamma, (void)beta, (void)running_mean, (void)running_var, (void)res, (void)relu;
    (void)N, (void)C, (void)HW;
    no_cudnn();
}
extern "C" void batchnorm_backward_cuda(float *dinp, float *dres, float *dgamma, float *dbeta, const float *dout,
                                        const float *out, const float *inp, const float *mean, const float *rstd,
                                        const float *gamma, int N, int C, int HW) {
    (void)dinp, (void)dres, (void)dgamma, (void)dbeta, (void)dout, (void)out, (void)inp, (void)mean, (void)rstd;
    (void)gamma, (void)N, (void)C, (void)HW;
    no_cudnn();
}

#endif
