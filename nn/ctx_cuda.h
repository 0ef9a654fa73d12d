/* Internal to the nn/ CUDA files (nvcc only): the per-thread context behind
 * nn/cuda_ops.h (library handles, workspace, scratch, settings) and small
 * launch helpers. */
#ifndef GC_NN_CTX_CUDA_H
#define GC_NN_CTX_CUDA_H

#ifndef __CUDACC__
#error "nn/ctx_cuda.h is for the CUDA sources of nn/"
#endif

#include <stddef.h>

#include "common/cuda_check.h"

/* scratch slots: each op uses its own slots, valid until the op returns */
enum { NN_SCRATCH_BN = 0, NN_SCRATCH_SOFTMAX_ROWS, NN_SCRATCH_SOFTMAX_RESULT, NN_SCRATCH_FLAG, NN_SCRATCH_COUNT };

typedef struct {
    int device;                 /* device the handles were made on */
    cublasHandle_t cublas;
    int cublas_tf32;            /* math mode currently set on the cuBLAS handle */
#ifdef HAVE_CUDNN
    cudnnHandle_t cudnn;
#endif
    void *work;                 /* cuDNN workspace shared by all plans (one stream) */
    size_t work_bytes;
    void *scratch[NN_SCRATCH_COUNT];
    size_t scratch_bytes[NN_SCRATCH_COUNT];
} NnCudaCtx;

/* settings (process-wide); plans remember the generation they were made under */
typedef struct {
    int tf32;
    int deterministic;
    size_t workspace_limit;
    int generation;
    int fft_winograd; /* FFT and Winograd convolution algorithms allowed */
    int conv_search;  /* NnConvSearch */
} NnCudaSettings;

/* this thread's context (created on first use; exits with a message if the
 * current device differs from the one it was made on) */
NnCudaCtx *nn_cuda_ctx(void);
NnCudaSettings nn_cuda_settings(void);
/* a device buffer of at least `bytes` for the cuDNN workspace (grown, never shrunk) */
void *nn_cuda_workspace(NnCudaCtx *ctx, size_t bytes);
/* a device scratch buffer of at least `bytes` in slot k (contents not kept when it grows) */
void *nn_cuda_scratch(NnCudaCtx *ctx, int k, size_t bytes);
/* per-file plan caches register a release hook, called by nn_cuda_release */
void nn_cuda_on_release(void (*fn)(void));

/* launch geometry for grid-stride loops over n items */
#define NN_THREADS 256
static inline unsigned nn_blocks(size_t n) {
    size_t b = (n + NN_THREADS - 1) / NN_THREADS;
    if (b > 65535u * 16u) b = 65535u * 16u;
    return (unsigned)(b ? b : 1);
}

#endif
