/* What the fuzz targets built with CUDA (HAVE_CUDA: the host emulation's *_emu
 * replays, tests/emulation/build.sh) share, with tests/cuda/test_codec_cuda.c: whether a
 * device is present, a frame uploaded into an allocation of exactly its size (so that a
 * read past its end is caught), a device frame decoded as the exchange decodes one, and
 * the comparison of a device output with the CPU decoder's */
#ifndef GCX_FUZZ_CUDA_H
#define GCX_FUZZ_CUDA_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "compress/codec_cuda.h"

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

/* frame (len bytes of device memory) decoded by g into out (n floats of device memory) as
 * the exchange decodes a bundle's frames: probed, codec_decode_cuda_batched in a batch of
 * its own, flushed, and a verdict the batch deferred read after a wait. Returns the frame's
 * code; *deferred: how many verdicts the batch deferred (0 or 1; the caller checks),
 * *ret: what codec_decode_cuda_batched returned (0 where it deferred the verdict) */
static inline int fz_decode_batched(CodecCuda *g, float *out, size_t n, float weight, int acc, const uint8_t *frame,
                                    size_t len, size_t *deferred, int *ret) {
    CodecProbe pr;
    CodecBatch *b = codec_batch_new();
    codec_cuda_probe_frames(&pr, &frame, &len, 1);
    int rc = *ret = codec_decode_cuda_batched(b, g, out, n, weight, acc, frame, len, &pr);
    *deferred = codec_batch_deferred(b);
    codec_batch_flush(b);
    if (cudaDeviceSynchronize() != cudaSuccess) abort();
    if (*deferred == 1) codec_batch_verdicts(b, &rc);
    codec_batch_free(b);
    return rc;
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
