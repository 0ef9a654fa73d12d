/* What the fuzz targets built with CUDA (HAVE_CUDA: the host emulation's *_emu
 * replays, tests/emulation/build.sh) share: whether a device is present, a frame
 * uploaded into an allocation of exactly its size (so that a read past its end is
 * caught), and the comparison of a device output with the CPU decoder's */
#ifndef GCX_FUZZ_CUDA_H
#define GCX_FUZZ_CUDA_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

static inline int fz_have_device(void) {
    static int have = -1;
    if (have < 0) {
        int k = 0;
        have = cudaGetDeviceCount(&k) == cudaSuccess && k > 0;
    }
    return have;
}

/* g[size] in device memory of exactly its size (one byte when empty) */
static inline uint8_t *fz_upload(const uint8_t *g, size_t size) {
    uint8_t *d = NULL;
    if (cudaMalloc((void **)&d, size ? size : 1) != cudaSuccess) abort();
    if (size && cudaMemcpy(d, g, size, cudaMemcpyHostToDevice) != cudaSuccess) abort();
    return d;
}

/* n floats of device memory dev against want: the same bits, or both a NaN */
static inline int fz_same_floats(const float *dev, const float *want, size_t n) {
    float *back = malloc(4 * n + 4);
    if (n && cudaMemcpy(back, dev, 4 * n, cudaMemcpyDeviceToHost) != cudaSuccess) abort();
    int same = 1;
    for (size_t i = 0; i < n && same; i++)
        same = memcmp(&back[i], &want[i], 4) == 0 || (isnan(back[i]) && isnan(want[i]));
    free(back);
    return same;
}

#endif
