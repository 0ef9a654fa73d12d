/* host emulation: the CUDA runtime subset used by nn/ (emu_cuda.h + more) */
#ifndef EMU_CUDA_RUNTIME_H
#define EMU_CUDA_RUNTIME_H
#ifdef __cplusplus
#define __host__
#define __device__
#endif
#include "../emu_cuda.h"
#undef cudaCheck
#undef cudaCheckLast
struct cudaDeviceProp { char name[256]; int major, minor; };
static inline cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d) { (void)d; strcpy(p->name, "host emulation"); p->major = 9; p->minor = 0; return 0; }
static inline const char *cudaGetErrorString(cudaError_t e) { (void)e; return "emulated error"; }
static inline cudaError_t cudaMallocHost(void **p, size_t n) { *p = malloc(n ? n : 1); return *p ? 0 : 2; }
static inline cudaError_t cudaFreeHost(void *p) { free(p); return 0; }
static inline cudaError_t cudaMemGetInfo(size_t *f, size_t *t) { *f = *t = 0; return 0; }
#ifdef __cplusplus
template <class T> static inline T atomicMin(T *p, T v) { T o = *p; *p = o < v ? o : v; return o; }
template <class T> static inline T atomicCAS(T *p, T cmp, T v) { T o = *p; if (o == cmp) *p = v; return o; }
#endif
#endif
