/* Host emulation of the cuDNN 9 legacy-API subset used by nn/ (conv2d.cu,
 * batchnorm.cu, cuda_ctx.cu): same names, argument orders and enum values as
 * cudnn_ops_v9.h / cudnn_cnn_v9.h / cudnn_graph_v9.h. emu_cudnn.c computes each
 * call with plain loops on tracked device memory (cuda_runtime.h) and checks
 * what the real library would reject or silently get wrong: descriptor shapes
 * against each other, host pointers, aliasing cuDNN forbids, the workspace size
 * an algorithm needs, the math type, epsilon. */
#ifndef EMU_CUDNN_H
#define EMU_CUDNN_H
#include <stddef.h>

typedef enum {
    CUDNN_STATUS_SUCCESS = 0,
    CUDNN_STATUS_NOT_INITIALIZED = 1001,
    CUDNN_STATUS_BAD_PARAM = 2000,
    CUDNN_STATUS_NOT_SUPPORTED = 3000,
} cudnnStatus_t;
typedef enum { CUDNN_DATA_FLOAT = 0 } cudnnDataType_t;
typedef enum { CUDNN_TENSOR_NCHW = 0 } cudnnTensorFormat_t;
typedef enum { CUDNN_CONVOLUTION = 0, CUDNN_CROSS_CORRELATION = 1 } cudnnConvolutionMode_t;
typedef enum {
    CUDNN_DEFAULT_MATH = 0,
    CUDNN_TENSOR_OP_MATH = 1,
    CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2,
    CUDNN_FMA_MATH = 3,
} cudnnMathType_t;
typedef enum { CUDNN_NON_DETERMINISTIC = 0, CUDNN_DETERMINISTIC = 1 } cudnnDeterminism_t;
typedef enum { CUDNN_BATCHNORM_PER_ACTIVATION = 0, CUDNN_BATCHNORM_SPATIAL = 1 } cudnnBatchNormMode_t;
typedef enum {
    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM = 0,
    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM = 1,
    CUDNN_CONVOLUTION_FWD_ALGO_GEMM = 2,
    CUDNN_CONVOLUTION_FWD_ALGO_DIRECT = 3,
    CUDNN_CONVOLUTION_FWD_ALGO_FFT = 4,
    CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING = 5,
    CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD = 6,
    CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED = 7,
    CUDNN_CONVOLUTION_FWD_ALGO_COUNT = 8
} cudnnConvolutionFwdAlgo_t;
typedef enum {
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 = 0,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 = 1,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT = 2,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3 = 3,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD = 4,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED = 5,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING = 6,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT = 7
} cudnnConvolutionBwdFilterAlgo_t;
typedef enum {
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 = 0,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 = 1,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT = 2,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING = 3,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD = 4,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED = 5,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT = 6
} cudnnConvolutionBwdDataAlgo_t;

#define EMU_PERF(name, algo_t)                                                                                       \
    typedef struct {                                                                                                 \
        algo_t algo;                                                                                                 \
        cudnnStatus_t status;                                                                                        \
        float time;                                                                                                  \
        size_t memory;                                                                                               \
        cudnnDeterminism_t determinism;                                                                              \
        cudnnMathType_t mathType;                                                                                    \
        int reserved[3];                                                                                             \
    } name;
EMU_PERF(cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t)
EMU_PERF(cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t)
EMU_PERF(cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t)
#undef EMU_PERF

typedef struct EmuCudnn *cudnnHandle_t;
typedef struct EmuTensor *cudnnTensorDescriptor_t;
typedef struct EmuFilter *cudnnFilterDescriptor_t;
typedef struct EmuConv *cudnnConvolutionDescriptor_t;

#ifdef __cplusplus
extern "C" {
#endif
const char *cudnnGetErrorString(cudnnStatus_t s);
cudnnStatus_t cudnnCreate(cudnnHandle_t *h);
cudnnStatus_t cudnnDestroy(cudnnHandle_t h);
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, void *stream);
cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d);
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d);
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f, cudnnDataType_t t, int n,
                                         int c, int h, int w);
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d);
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d);
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t, cudnnTensorFormat_t f, int k,
                                         int c, int h, int w);
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d);
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d);
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u, int v,
                                              int dil_h, int dil_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t t);
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m);
cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t d,
                                                    const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
                                                    int *n, int *c, int *h, int *wo);
/* Find's maximum number of results, at least as many as it ever returns */
cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t h, int *count);
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t h, int *count);
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t h, int *count);
cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                   const cudnnFilterDescriptor_t w,
                                                   const cudnnConvolutionDescriptor_t conv,
                                                   const cudnnTensorDescriptor_t y, int requested, int *returned,
                                                   cudnnConvolutionFwdAlgoPerf_t *perf);
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(cudnnHandle_t h, const cudnnFilterDescriptor_t w,
                                                        const cudnnTensorDescriptor_t dy,
                                                        const cudnnConvolutionDescriptor_t conv,
                                                        const cudnnTensorDescriptor_t dx, int requested,
                                                        int *returned, cudnnConvolutionBwdDataAlgoPerf_t *perf);
cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                          const cudnnTensorDescriptor_t dy,
                                                          const cudnnConvolutionDescriptor_t conv,
                                                          const cudnnFilterDescriptor_t dw, int requested,
                                                          int *returned, cudnnConvolutionBwdFilterAlgoPerf_t *perf);
/* the heuristic ranking: the same arguments and results as Find, no timing */
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                     const cudnnFilterDescriptor_t w,
                                                     const cudnnConvolutionDescriptor_t conv,
                                                     const cudnnTensorDescriptor_t y, int requested, int *returned,
                                                     cudnnConvolutionFwdAlgoPerf_t *perf);
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t h, const cudnnFilterDescriptor_t w,
                                                          const cudnnTensorDescriptor_t dy,
                                                          const cudnnConvolutionDescriptor_t conv,
                                                          const cudnnTensorDescriptor_t dx, int requested,
                                                          int *returned, cudnnConvolutionBwdDataAlgoPerf_t *perf);
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                            const cudnnTensorDescriptor_t dy,
                                                            const cudnnConvolutionDescriptor_t conv,
                                                            const cudnnFilterDescriptor_t dw, int requested,
                                                            int *returned, cudnnConvolutionBwdFilterAlgoPerf_t *perf);
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                      const cudnnFilterDescriptor_t w,
                                                      const cudnnConvolutionDescriptor_t conv,
                                                      const cudnnTensorDescriptor_t y, cudnnConvolutionFwdAlgo_t algo,
                                                      size_t *bytes);
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t h, const cudnnFilterDescriptor_t w,
                                                           const cudnnTensorDescriptor_t dy,
                                                           const cudnnConvolutionDescriptor_t conv,
                                                           const cudnnTensorDescriptor_t dx,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes);
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                             const cudnnTensorDescriptor_t dy,
                                                             const cudnnConvolutionDescriptor_t conv,
                                                             const cudnnFilterDescriptor_t dw,
                                                             cudnnConvolutionBwdFilterAlgo_t algo, size_t *bytes);
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd,
                                      const void *x, const cudnnFilterDescriptor_t wd, const void *w,
                                      const cudnnConvolutionDescriptor_t conv, cudnnConvolutionFwdAlgo_t algo,
                                      void *ws, size_t ws_bytes, const void *beta, const cudnnTensorDescriptor_t yd,
                                      void *y);
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha, const cudnnFilterDescriptor_t wd,
                                           const void *w, const cudnnTensorDescriptor_t dyd, const void *dy,
                                           const cudnnConvolutionDescriptor_t conv,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *ws, size_t ws_bytes,
                                           const void *beta, const cudnnTensorDescriptor_t dxd, void *dx);
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd,
                                             const void *x, const cudnnTensorDescriptor_t dyd, const void *dy,
                                             const cudnnConvolutionDescriptor_t conv,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *ws, size_t ws_bytes,
                                             const void *beta, const cudnnFilterDescriptor_t dwd, void *dw);
cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t dyd,
                                           const void *dy, const void *beta, const cudnnTensorDescriptor_t dbd,
                                           void *db);
cudnnStatus_t cudnnAddTensor(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t ad, const void *A,
                             const void *beta, const cudnnTensorDescriptor_t cd, void *C);
cudnnStatus_t cudnnDeriveBNTensorDescriptor(cudnnTensorDescriptor_t bn, const cudnnTensorDescriptor_t x,
                                            cudnnBatchNormMode_t mode);
cudnnStatus_t cudnnBatchNormalizationForwardTraining(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha, const void *beta, const cudnnTensorDescriptor_t xd,
    const void *x, const cudnnTensorDescriptor_t yd, void *y, const cudnnTensorDescriptor_t bnd, const void *scale,
    const void *bias, double factor, void *running_mean, void *running_var, double eps, void *save_mean,
    void *save_inv_var);
cudnnStatus_t cudnnBatchNormalizationForwardInference(cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha,
                                                      const void *beta, const cudnnTensorDescriptor_t xd,
                                                      const void *x, const cudnnTensorDescriptor_t yd, void *y,
                                                      const cudnnTensorDescriptor_t bnd, const void *scale,
                                                      const void *bias, const void *mean, const void *var,
                                                      double eps);
cudnnStatus_t cudnnBatchNormalizationBackward(cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha_data,
                                              const void *beta_data, const void *alpha_param,
                                              const void *beta_param, const cudnnTensorDescriptor_t xd,
                                              const void *x, const cudnnTensorDescriptor_t dyd, const void *dy,
                                              const cudnnTensorDescriptor_t dxd, void *dx,
                                              const cudnnTensorDescriptor_t bnd, const void *scale, void *dscale,
                                              void *dbias, double eps, const void *saved_mean,
                                              const void *saved_inv_var);
#ifdef __cplusplus
}
#endif
#endif
