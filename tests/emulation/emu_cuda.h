/* Host emulation of the CUDA subset used by compress/ (.cu files): every block's threads
 * are cooperative fibers; __syncthreads is a barrier of the block, a warp intrinsic one
 * of the lanes its mask names. */
#ifndef EMU_CUDA_H
#define EMU_CUDA_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#ifdef __cplusplus
#include <functional>
#include <type_traits>
#endif

typedef int cudaError_t;
#define cudaSuccess 0
typedef void *cudaStream_t;
/* the calling thread's default stream (the emulation runs every operation when it is
 * called, on any stream: it cannot show what streams running at once would do) */
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaStreamLegacy ((cudaStream_t)0x1)
typedef void *cudaMemPool_t;
/* cudaMemcpyDefault: the direction from where the pointers live (unified addressing) */
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice, cudaMemcpyDefault };
enum cudaMemPoolAttr { cudaMemPoolAttrReleaseThreshold };
static inline cudaError_t cudaMalloc(void **p, size_t n) { *p = malloc(n ? n : 1); memset(*p, 0xA5, n ? n : 1); return 0; }
static inline cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s) { (void)s; return cudaMalloc(p, n); }
static inline cudaError_t cudaFree(void *p) { free(p); return 0; }
static inline cudaError_t cudaFreeAsync(void *p, cudaStream_t s) { (void)s; free(p); return 0; }
static inline cudaError_t cudaMemset(void *p, int v, size_t n) { memset(p, v, n); return 0; }
static inline cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) { (void)s; memset(p, v, n); return 0; }
/* EMU_COUNT_COPIES (the NCCL tests): the bytes copied between host and device, in
 * emu_host_copy_bytes (the device is host memory here, so cudaMemcpyDefault, whose
 * direction comes from the pointers, counts as such a copy) */
#ifdef EMU_COUNT_COPIES
extern unsigned long long emu_host_copy_bytes;
#define EMU_COUNT_COPY(k, n) (emu_host_copy_bytes += (k) != cudaMemcpyDeviceToDevice ? (n) : 0)
#else
#define EMU_COUNT_COPY(k, n) ((void)(k), (void)(n))
#endif
/* EMU_MEMMOVE: how a copy moves the bytes (the NCCL tests': opening tracked device memory) */
#ifndef EMU_MEMMOVE
#define EMU_MEMMOVE memmove
#endif
static inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k) { EMU_COUNT_COPY(k, n); EMU_MEMMOVE(d, s, n); return 0; }
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st) { EMU_COUNT_COPY(k, n); (void)st; EMU_MEMMOVE(d, s, n); return 0; }
/* the tracked runtime's record of the host's waits (nn/emu_device.c), where it is linked in:
 * code built on this header (dist/comm_nccl.c in train_resnet_nccl_emu) waits too */
#define EMU_ALL_STREAMS ((cudaStream_t)-1) /* emu_stream_waited's: every stream */
void emu_stream_waited(cudaStream_t s) __attribute__((weak));
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (emu_stream_waited) emu_stream_waited(s);
    return 0;
}
static inline cudaError_t cudaDeviceSynchronize(void) {
    if (emu_stream_waited) emu_stream_waited(EMU_ALL_STREAMS);
    return 0;
}
static inline cudaError_t cudaGetDevice(int *d) { *d = 0; return 0; }
#ifndef EMU_DEVICE_COUNT
#define EMU_DEVICE_COUNT 1
#endif
static inline cudaError_t cudaGetDeviceCount(int *c) { *c = EMU_DEVICE_COUNT; return 0; }
static inline cudaError_t cudaGetLastError(void) { return 0; }
static inline cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *p, int d) { (void)d; *p = 0; return 0; }
static inline cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t p, enum cudaMemPoolAttr a, void *v) { (void)p; (void)a; (void)v; return 0; }
struct cudaDeviceProp { char name[256]; int major, minor; };
static inline cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d) {
    (void)d; strcpy(p->name, "host emulation"); p->major = 9; p->minor = 0; return 0;
}
#define cudaCheck(x) do { if ((x) != 0) { fprintf(stderr, "emu cuda error %s:%d\n", __FILE__, __LINE__); exit(1); } } while (0)
#define cudaCheckLast()

#ifdef __cplusplus
struct EmuDim { unsigned x, y, z; };
extern EmuDim blockIdx, threadIdx, blockDim, gridDim;
void emu_launch(size_t grid, size_t block, std::function<void()> fn, const char *name = nullptr);
extern "C" void emu_count_op(const char *what); /* an operation issued to the device, of kind what (nn/emu_device.c) */
void __syncthreads();
void emu_warp_sync(unsigned mask, const char *op); /* emu_sched.cpp: waits for the lanes of mask at op */
extern uint64_t emu_slot[1024];
#define __global__ static
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
/* __shared__ variables are static (one copy, which every block's threads share as they
 * run one block at a time) in a section of their own, emu_shared: emu_launch fills the
 * whole section with garbage before each block (emu_sched.cpp), so a kernel that reads
 * shared memory it has not written in that block gets garbage, as on a GPU, and not the
 * zeros of a static or what the previous block left. */
#define __shared__ static __attribute__((section("emu_shared")))
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline float __double2float_rn(double a) { return (float)a; }
static inline uint32_t __float_as_uint(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline int __popc(uint32_t v) { return __builtin_popcount(v); }
static inline int __ffs(uint32_t v) { return __builtin_ffs((int)v); }
static inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
static inline int __clz(int v) { return v ? __builtin_clz((unsigned)v) : 32; }
static inline int __clzll(long long v) { return v ? __builtin_clzll((unsigned long long)v) : 64; }
static inline uint32_t __brev(uint32_t v) { uint32_t r = 0; for (int i = 0; i < 32; i++) r |= ((v >> i) & 1u) << (31 - i); return r; }
static inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {
    uint64_t v = ((uint64_t)y << 32) | x; uint32_t r = 0;
    for (int i = 0; i < 4; i++) { uint32_t sel = (s >> (4 * i)) & 7; r |= (uint32_t)((v >> (8 * sel)) & 0xFF) << (8 * i); }
    return r;
}
/* atomics need a naturally aligned address (a GPU stops the kernel with "misaligned
 * address"; x86 would not mind): checked */
template <class T> static inline T *emu_atomic_at(T *p, const char *op) {
    if ((uintptr_t)p % sizeof(T)) {
        fprintf(stderr, "emu: %s on %p, not aligned to its %zu-byte type (misaligned address on a GPU)\n", op,
                (void *)p, sizeof(T));
        abort();
    }
    return p;
}
template <class T> static inline T atomicOr(T *p, T v) { emu_atomic_at(p, "atomicOr"); T o = *p; *p = o | v; return o; }
template <class T> static inline T atomicAnd(T *p, T v) { emu_atomic_at(p, "atomicAnd"); T o = *p; *p = o & v; return o; }
template <class T> static inline T atomicAdd(T *p, T v) { emu_atomic_at(p, "atomicAdd"); T o = *p; *p = o + v; return o; }
template <class T> static inline T atomicMax(T *p, T v) { emu_atomic_at(p, "atomicMax"); T o = *p; *p = o > v ? o : v; return o; }
/* warp ops: the lanes a mask names meet at a barrier of their own (emu_sched.cpp). A named
 * lane that has returned stops the run at once (stricter than CUDA, which leaves exited
 * lanes out of every *_sync call and makes only a shuffle's read from one undefined). A
 * named lane that calls another intrinsic or with another mask, or waits at a
 * __syncthreads, stops it once nothing else in the block can move (a lane may first call
 * with another mask, and join later, as on a GPU). Each passes its name (__func__) to
 * emu_warp_mask and emu_warp_sync. The mask must name the calling lane and no lane past the end of the
 * block (a last warp of fewer than 32 threads), which on a GPU is undefined. A shuffle
 * from a lane outside the mask gives an undefined value: all-ones bits here. */
static inline void emu_warp_mask(unsigned m, const char *op) {
    unsigned t = threadIdx.x, w0 = t & ~31u, lanes = blockDim.x - w0 < 32 ? blockDim.x - w0 : 32;
    unsigned have = lanes == 32 ? 0xFFFFFFFFu : (1u << lanes) - 1;
    if (!(m >> (t - w0) & 1) || (m & ~have)) {
        fprintf(stderr, "emu: %s in thread %u of a %u-thread block: mask 0x%08X, but the warp's lanes are 0x%08X%s\n",
                op, t, blockDim.x, m, have, m >> (t - w0) & 1 ? "" : " (and the calling lane is not in the mask)");
        abort();
    }
}
template <class T> static inline T __shfl_down_sync(unsigned m, T v, int o) {
    emu_warp_mask(m, __func__); unsigned t = threadIdx.x; uint64_t w = 0; memcpy(&w, &v, sizeof v); emu_slot[t] = w; emu_warp_sync(m, __func__);
    T r = v; unsigned lane = t & 31;
    if (lane + o < 32) { if (m >> (lane + o) & 1) memcpy(&r, &emu_slot[t + o], sizeof r); else memset(&r, 0xFF, sizeof r); }
    emu_warp_sync(m, __func__); return r;
}
static inline int __any_sync(unsigned m, int p) {
    emu_warp_mask(m, __func__); unsigned t = threadIdx.x; emu_slot[t] = p != 0; emu_warp_sync(m, __func__);
    int r = 0; unsigned w0 = t & ~31u; for (unsigned k = 0; k < 32; k++) if (m >> k & 1) r |= (int)emu_slot[w0 + k];
    emu_warp_sync(m, __func__); return r;
}
static inline unsigned __match_any_sync(unsigned m, uint32_t v) {
    emu_warp_mask(m, __func__); unsigned t = threadIdx.x; emu_slot[t] = v; emu_warp_sync(m, __func__);
    unsigned r = 0, w0 = t & ~31u; for (unsigned k = 0; k < 32; k++) if (m >> k & 1 && (uint32_t)emu_slot[w0 + k] == v) r |= 1u << k;
    emu_warp_sync(m, __func__); return r;
}
#endif
#endif
