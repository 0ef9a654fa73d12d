/* host emulation of common/cuda_check.h: the checks are expressions, as there */
#ifndef GC_CUDA_CHECK_H
#define GC_CUDA_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include "common/check.h"
static inline void emu_check_(int bad, const char *what, const char *file, int line) {
    if (bad) {
        fprintf(stderr, "emu %s error %s:%d\n", what, file, line);
        exit(1);
    }
}
#ifndef cudaCheck
#define cudaCheck(x) emu_check_((x) != 0, "cuda", __FILE__, __LINE__)
#endif
#define cudaCheckLast() ((void)0)
#define cublasCheck(x) emu_check_((x) != 0, "cublas", __FILE__, __LINE__)
#ifdef HAVE_CUDNN
#include <cudnn.h>
static inline void emu_cudnn_check_(cudnnStatus_t s, const char *file, int line) {
    if (s != CUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "cuDNN error %d (%s) at %s:%d\n", (int)s, cudnnGetErrorString(s), file, line);
        exit(1);
    }
}
#define cudnnCheck(x) emu_cudnn_check_((x), __FILE__, __LINE__)
#endif
#endif
