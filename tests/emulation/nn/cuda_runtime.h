/* Host emulation of the CUDA runtime subset used by nn/ (../emu_cuda.h plus what
 * the models and tests call). Device memory is tracked: cudaMalloc maps its own
 * pages, kept inaccessible (PROT_NONE) except while a kernel, a copy, a memset,
 * a GEMM or a cuDNN call runs, so host code that touches device memory crashes;
 * copies check that their kind matches where the pointers live; kernel launches
 * (transform.py), the GEMM and cuDNN check that every pointer argument is device
 * memory. */
#ifndef EMU_CUDA_RUNTIME_H
#define EMU_CUDA_RUNTIME_H
#ifdef __cplusplus
#define __host__
#define __device__
#endif
/* ../emu_cuda.h's untracked memory functions, renamed out of the way */
#define cudaMalloc emu_untracked_cudaMalloc
#define cudaMallocAsync emu_untracked_cudaMallocAsync
#define cudaFree emu_untracked_cudaFree
#define cudaFreeAsync emu_untracked_cudaFreeAsync
#define cudaMemset emu_untracked_cudaMemset
#define cudaMemsetAsync emu_untracked_cudaMemsetAsync
#define cudaMemcpy emu_untracked_cudaMemcpy
#define cudaMemcpyAsync emu_untracked_cudaMemcpyAsync
#define cudaStreamSynchronize emu_untracked_cudaStreamSynchronize
#define cudaDeviceSynchronize emu_untracked_cudaDeviceSynchronize
#include "../emu_cuda.h"
#undef cudaMalloc
#undef cudaMallocAsync
#undef cudaFree
#undef cudaFreeAsync
#undef cudaMemset
#undef cudaMemsetAsync
#undef cudaMemcpy
#undef cudaMemcpyAsync
#undef cudaStreamSynchronize
#undef cudaDeviceSynchronize
#undef cudaCheck
#undef cudaCheckLast

#ifdef __cplusplus
extern "C" {
#endif
/* emu_device.c */
cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemset(void *p, int v, size_t n);
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k);
int emu_is_dev(const void *p);       /* p lies inside a live device allocation, or at its end */
void emu_dev_check(const void *p, const char *what); /* NULL or device memory, else abort */
void emu_dev_span(const void *p, size_t bytes, const char *what); /* [p, p+bytes) inside one allocation */
void emu_dev_open(void);             /* every device page readable and writable */
/* only the allocations holding p[0..k) (NULL entries skipped) readable and writable */
void emu_dev_open_ptrs(const void *const *p, int k);
void emu_dev_close(void);            /* device pages inaccessible again (closes either open) */
/* emu_dev_open_ptrs for an operation emu_stream_use has recorded already (the fake NCCL's) */
void emu_dev_open_used(const void *const *p, int k);
/* a kernel's launch: emu_dev_open_ptrs, each allocation read (w[i] 0) or written (1) */
void emu_dev_open_kernel(const char *name, const void *const *p, const char *w, int k);
/* pinned host memory: malloc's, remembered, so that cudaMemcpy can tell it from pageable */
cudaError_t cudaMallocHost(void **p, size_t n);
cudaError_t cudaFreeHost(void *p);
/* the bytes cudaMemcpy moved between the device and pageable host memory (not
 * cudaMallocHost's) in the calling thread since its last call here, and the largest such
 * copy's (both then start again from 0): on a GPU such a copy goes through the driver's
 * staging buffer and blocks the host */
void emu_pageable_copies(unsigned long long *bytes, unsigned long long *largest);
#define EMU_PAGEABLE_COPIES 1
/* cudaMemcpyAsync: as cudaMemcpy, a host wait only through pageable memory */
cudaError_t emu_memcpy_async(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaDeviceSynchronize(void);
/* the times the calling thread has waited for the device since its last call here (then
 * 0 again): on a GPU each is a round trip that leaves the device idle until the host
 * launches more. Counted: cudaStreamSynchronize, cudaDeviceSynchronize, a cudaMemcpy
 * between host and device, a cudaMemcpyAsync between the device and pageable host memory */
unsigned long long emu_host_waits(void);
#define EMU_HOST_WAITS 1
/* the operations the calling thread has issued to the device since its last call here
 * (then 0 again): kernel launches, CUB calls, copies, memsets, and the stream-ordered
 * allocations and frees (cudaMallocAsync, cudaFreeAsync). On a GPU each costs the host a
 * driver call of a microsecond or more whatever its size */
unsigned long long emu_device_ops(void);
void emu_count_op(const char *what); /* what: its kind, for EMU_COUNTS (emu_device.c) */
/* the calls the calling thread has made since its last call here (then 0 again) that wait
 * for the whole device, every other host thread's stream included, on a GPU: cudaMalloc,
 * cudaFree, cudaMallocHost, cudaFreeHost and cudaDeviceSynchronize. With workers sharing a
 * GPU, each makes every worker wait for the others' queued work */
unsigned long long emu_device_barriers(void);
#define EMU_DEVICE_BARRIERS 1
cudaError_t emu_malloc_async(void **p, size_t n); /* cudaMallocAsync's, not such a wait */
cudaError_t emu_free_async(void *p, cudaStream_t s);
/* an NCCL call's operand p on stream s (the fake NCCL's): written (w) or read */
void emu_stream_use(const void *p, int w, cudaStream_t s);
void emu_counts_reset(void);
#ifdef __cplusplus
}
#endif
/* emu_dev_open_ptrs over the listed pointers: an operation's operands (NULL ones skipped) */
#define EMU_DEV_OPEN(...)                                                                                            \
    do {                                                                                                             \
        const void *emu_q_[] = {__VA_ARGS__};                                                                        \
        emu_dev_open_ptrs(emu_q_, (int)(sizeof emu_q_ / sizeof emu_q_[0]));                                          \
    } while (0)
static inline cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s) { (void)s; return emu_malloc_async(p, n); }
static inline cudaError_t cudaFreeAsync(void *p, cudaStream_t s) { return emu_free_async(p, s); }
static inline cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) { (void)s; return cudaMemset(p, v, n); }
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st) {
    return emu_memcpy_async(d, s, n, k, st);
}

static inline const char *cudaGetErrorString(cudaError_t e) { (void)e; return "emulated error"; }
static inline cudaError_t cudaMemGetInfo(size_t *f, size_t *t) { *f = *t = 0; return 0; }

#ifdef __cplusplus
#include <string.h>
#include <type_traits>
#include <vector>
template <class T> static inline T atomicMin(T *p, T v) { emu_atomic_at(p, "atomicMin"); T o = *p; *p = o < v ? o : v; return o; }
template <class T> static inline T atomicCAS(T *p, T cmp, T v) { emu_atomic_at(p, "atomicCAS"); T o = *p; if (o == cmp) *p = v; return o; }
/* kernel arguments: pointers must be device memory (or NULL); the launch opens the
 * allocations they point into, and only those. A struct passed by value (a batch's table
 * of frames) may hold device pointers too: each of its pointer-aligned words that points
 * into a device allocation opens it (a conservative scan: a word that only looks like a
 * device address opens one allocation more, never fewer). What the kernel does there, for
 * the streams' ordering (emu_device.c): through a parameter that points to const it
 * reads, through any other pointer, and a struct's, it may write */
template <class P> struct emu_reads { static const bool value = false; };
template <class T> struct emu_reads<const T *> { static const bool value = true; };
static inline void emu_arg_add(std::vector<const void *> &v, std::vector<char> &w, bool write, const void *p) {
    emu_dev_check(p, "a kernel argument");
    v.push_back(p);
    w.push_back(write);
}
template <class T>
static inline typename std::enable_if<std::is_class<T>::value>::type emu_arg_add(std::vector<const void *> &v,
                                                                                 std::vector<char> &w, bool,
                                                                                 const T &a) {
    const unsigned char *b = (const unsigned char *)&a;
    for (size_t i = 0; i + sizeof(void *) <= sizeof(T); i += alignof(void *)) {
        const void *q;
        memcpy(&q, b + i, sizeof q);
        if (q && emu_is_dev(q)) v.push_back(q), w.push_back(1);
    }
}
template <class T>
static inline typename std::enable_if<!std::is_pointer<T>::value && !std::is_class<T>::value>::type
emu_arg_add(std::vector<const void *> &, std::vector<char> &, bool, T) {}
/* a CUB call's arguments (cub/cub.cuh), each counted as written */
template <class... A> static inline void emu_open_args(A... a) {
    std::vector<const void *> p;
    std::vector<char> w;
    (emu_arg_add(p, w, true, a), ...);
    emu_dev_open_ptrs(p.data(), (int)p.size());
}
/* kernel f's launch with arguments a (transform.py) */
template <class... P, class... A> static inline void emu_open_kernel(const char *name, void (*f)(P...), A... a) {
    (void)f;
    std::vector<const void *> p;
    std::vector<char> w;
    (emu_arg_add(p, w, !emu_reads<P>::value, a), ...);
    emu_dev_open_kernel(name, p.data(), w.data(), (int)p.size());
}
#endif
#endif
