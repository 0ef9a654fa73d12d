/* GC_HD marks a static inline function that both the host compiler and nvcc's device
 * pass compile: the CPU code and a GPU kernel then share one definition (random
 * numbers, bit reading, Rice codes). Plain C outside nvcc. */
#ifndef GC_HD_H
#define GC_HD_H

#ifdef __CUDACC__
#define GC_HD __host__ __device__
#else
#define GC_HD
#endif

#endif
