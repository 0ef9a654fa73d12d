/* Checking macros for the CUDA libraries, reporting file and line, usable from
 * both CUDA C (.cu, nvcc) and plain C (gcc with -DHAVE_CUDA):
 *   cudaCheck(x)    CUDA runtime (from common/check.h under nvcc, defined here for C)
 *   cublasCheck(x)  cuBLAS
 *   cudnnCheck(x)   cuDNN (only when the build has cuDNN: HAVE_CUDNN)
 *   ncclCheck(x)    NCCL  (only when the build has NCCL: HAVE_NCCL)
 *   cudaCheckLast() the error state after a kernel launch
 * Failure prints the library's error string and where, and exits 1.
 * Include only from code built with HAVE_CUDA. */
#ifndef GC_CUDA_CHECK_H
#define GC_CUDA_CHECK_H

#ifndef HAVE_CUDA
#error "common/cuda_check.h needs a CUDA build (HAVE_CUDA)"
#endif

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>
#include <cublas_v2.h>

#include "common/check.h"

#ifndef __CUDACC__ /* common/check.h defines cudaCheck for nvcc only */
static inline void cuda_check(cudaError_t e, const char *file, int line) {
    if (e != cudaSuccess) {
        fprintf(stderr, "CUDA error: %s at %s:%d\n", cudaGetErrorString(e), file, line);
        exit(1);
    }
}
#define cudaCheck(x) cuda_check((x), __FILE__, __LINE__)
#endif

/* after a kernel launch: launch-configuration errors (and earlier asynchronous ones) */
#define cudaCheckLast() cuda_check(cudaGetLastError(), __FILE__, __LINE__)

static inline void cublas_check(cublasStatus_t s, const char *file, int line) {
    if (s != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cuBLAS error %d (%s) at %s:%d\n", (int)s, cublasGetStatusString(s), file, line);
        exit(1);
    }
}
#define cublasCheck(x) cublas_check((x), __FILE__, __LINE__)

#ifdef HAVE_CUDNN
#include <cudnn.h>
static inline void cudnn_check(cudnnStatus_t s, const char *file, int line) {
    if (s != CUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "cuDNN error %d (%s) at %s:%d\n", (int)s, cudnnGetErrorString(s), file, line);
        exit(1);
    }
}
#define cudnnCheck(x) cudnn_check((x), __FILE__, __LINE__)
#endif

#ifdef HAVE_NCCL
#include <nccl.h>
static inline void nccl_check(ncclResult_t r, const char *file, int line) {
    if (r != ncclSuccess) {
        fprintf(stderr, "NCCL error %d (%s) at %s:%d\n", (int)r, ncclGetErrorString(r), file, line);
        exit(1);
    }
}
#define ncclCheck(x) nccl_check((x), __FILE__, __LINE__)
#endif

#endif
