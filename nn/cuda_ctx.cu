/* Per-thread CUDA context of the nn/ GPU ops (see nn/cuda_ops.h, nn/ctx_cuda.h):
 * cuBLAS and cuDNN handles bound to the thread's default stream, the cuDNN
 * workspace, scratch buffers, and the process-wide numeric settings. */
#include <stdio.h>
#include <stdlib.h>

#include "nn/ctx_cuda.h"
#include "nn/cuda_ops.h"

static NnCudaSettings g_settings = {0, 1, (size_t)1 << 30, 0, 0, NN_CONV_FIND};
static thread_local NnCudaCtx *t_ctx = NULL;

#define MAX_HOOKS 8
static thread_local void (*t_hooks[MAX_HOOKS])(void);
static thread_local int t_nhooks = 0;

extern "C" int nn_cuda_device_count(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* reset the last-error state so later calls start clean */
        return 0;
    }
    return n;
}

extern "C" const char *nn_cuda_unavailable(void) {
#ifndef HAVE_CUDNN
    return "this build has no cuDNN (the GPU convolutions and batch norm need it)";
#else
    if (nn_cuda_device_count() < 1) return "no CUDA device is visible (cudaGetDeviceCount reports none or fails)";
    return NULL;
#endif
}

extern "C" void nn_cuda_set_tf32(int enable) {
    g_settings.tf32 = enable != 0;
    g_settings.generation++;
}

extern "C" void nn_cuda_set_deterministic(int enable) {
    g_settings.deterministic = enable != 0;
    g_settings.generation++;
}

extern "C" void nn_cuda_set_fft_winograd(int enable) {
    g_settings.fft_winograd = enable != 0;
    g_settings.generation++;
}

extern "C" void nn_cuda_set_conv_search(NnConvSearch s) {
    g_settings.conv_search = s;
    g_settings.generation++;
}

extern "C" void nn_cuda_set_workspace_limit(size_t bytes) {
    g_settings.workspace_limit = bytes;
    g_settings.generation++;
}

NnCudaSettings nn_cuda_settings(void) { return g_settings; }

NnCudaCtx *nn_cuda_ctx(void) {
    int dev = 0;
    cudaCheck(cudaGetDevice(&dev));
    NnCudaCtx *c = t_ctx;
    if (c) {
        if (c->device != dev) {
            fprintf(stderr,
                    "error: nn CUDA ops: this thread's context was made on device %d but device %d is current; "
                    "call nn_cuda_release() before switching devices\n",
                    c->device, dev);
            exit(1);
        }
    } else {
        c = (NnCudaCtx *)callocCheck(1, sizeof(NnCudaCtx));
        c->device = dev;
        cublasCheck(cublasCreate(&c->cublas));
        cublasCheck(cublasSetStream(c->cublas, cudaStreamPerThread)); /* this thread's stream (Makefile) */
        cublasCheck(cublasSetPointerMode(c->cublas, CUBLAS_POINTER_MODE_HOST));
        cublasCheck(cublasSetMathMode(c->cublas, CUBLAS_DEFAULT_MATH));
        c->cublas_tf32 = 0;
#ifdef HAVE_CUDNN
        cudnnCheck(cudnnCreate(&c->cudnn));
        cudnnCheck(cudnnSetStream(c->cudnn, cudaStreamPerThread));
#endif
        t_ctx = c;
    }
    /* keep cuBLAS's math mode in step with the TF32 setting */
    if (c->cublas_tf32 != g_settings.tf32) {
        cublasCheck(cublasSetMathMode(c->cublas, g_settings.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
        c->cublas_tf32 = g_settings.tf32;
    }
    return c;
}

void *nn_cuda_workspace(NnCudaCtx *ctx, size_t bytes) {
    if (bytes > ctx->work_bytes) {
        /* no queued op may still use the old buffer (cudaFree only "may" synchronize) */
        cudaCheck(cudaStreamSynchronize(0));
        cudaCheck(cudaFree(ctx->work));
        ctx->work = NULL;
        cudaError_t e = cudaMalloc(&ctx->work, bytes);
        if (e != cudaSuccess) {
            fprintf(stderr, "error: cannot allocate a %zu-byte cuDNN workspace on the GPU: %s\n", bytes,
                    cudaGetErrorString(e));
            exit(1);
        }
        ctx->work_bytes = bytes;
    }
    return ctx->work;
}

void *nn_cuda_scratch(NnCudaCtx *ctx, int k, size_t bytes) {
    if (k < 0 || k >= NN_SCRATCH_COUNT) {
        fprintf(stderr, "error: nn_cuda_scratch: bad slot %d\n", k);
        exit(1);
    }
    if (bytes == 0) bytes = 16;
    if (bytes > ctx->scratch_bytes[k]) {
        cudaCheck(cudaStreamSynchronize(0)); /* as in nn_cuda_workspace */
        cudaCheck(cudaFree(ctx->scratch[k]));
        ctx->scratch[k] = NULL;
        cudaError_t e = cudaMalloc(&ctx->scratch[k], bytes);
        if (e != cudaSuccess) {
            fprintf(stderr, "error: cannot allocate %zu bytes of GPU scratch: %s\n", bytes, cudaGetErrorString(e));
            exit(1);
        }
        ctx->scratch_bytes[k] = bytes;
    }
    return ctx->scratch[k];
}

void nn_cuda_on_release(void (*fn)(void)) {
    for (int i = 0; i < t_nhooks; i++)
        if (t_hooks[i] == fn) return;
    if (t_nhooks == MAX_HOOKS) {
        fprintf(stderr, "error: nn_cuda_on_release: too many hooks\n");
        exit(1);
    }
    t_hooks[t_nhooks++] = fn;
}

extern "C" void nn_cuda_release(void) {
    for (int i = 0; i < t_nhooks; i++) t_hooks[i]();
    t_nhooks = 0;
    NnCudaCtx *c = t_ctx;
    if (!c) return;
    cudaCheck(cudaDeviceSynchronize());
    cublasCheck(cublasDestroy(c->cublas));
#ifdef HAVE_CUDNN
    cudnnCheck(cudnnDestroy(c->cudnn));
#endif
    cudaCheck(cudaFree(c->work));
    for (int k = 0; k < NN_SCRATCH_COUNT; k++) cudaCheck(cudaFree(c->scratch[k]));
    free(c);
    t_ctx = NULL;
}
