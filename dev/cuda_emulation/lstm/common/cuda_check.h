/* host emulation of common/cuda_check.h */
#ifndef GC_CUDA_CHECK_H
#define GC_CUDA_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include "common/check.h"
#ifndef cudaCheck
#define cudaCheck(x) do { if ((x) != 0) { fprintf(stderr, "emu cuda error %s:%d\n", __FILE__, __LINE__); exit(1); } } while (0)
#endif
#define cudaCheckLast() ((void)0)
#define cublasCheck(x) do { if ((x) != 0) { fprintf(stderr, "emu cublas error %s:%d\n", __FILE__, __LINE__); exit(1); } } while (0)
#endif
