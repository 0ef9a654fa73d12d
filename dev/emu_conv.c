/* The emulated cuDNN's convolutions (tests/emulation/nn/emu_cudnn.c): their time, and a
 * hash of every output, per shape, direction and algorithm, so that a faster version of
 * the reference loops can be shown to give the same bits as the one before it.
 *
 *   sh dev/emu_conv.sh          builds this against the current emu_cudnn.c and runs it
 *
 * Each line: shape, direction, algorithm, the output's FNV-1a hash, milliseconds of CPU time. The
 * shapes are ResNet's and LeNet's and some odd ones (stride 2 without padding, 1x1 stride 2,
 * non-square, padding 2); beta = 0 and beta = 0.5 (the output is read); EMU_CUDNN_DOUBLE=1
 * gives the double sums. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_runtime.h"
#include "cudnn.h"

#define CK(x)                                                                            \
    do {                                                                                 \
        int e_ = (int)(x);                                                               \
        if (e_) { fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, e_); exit(1); } \
    } while (0)

typedef struct { int n, c, h, w, k, kh, kw, pad, stride; } Conv;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static uint32_t rng = 12345;
static float frand(void) {
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xFFFF) / 32768.0f - 1.0f + (float)(rng >> 24) * 1e-7f;
}

static float *dev_random(size_t n) {
    float *h = malloc(n * 4), *d;
    for (size_t i = 0; i < n; i++) h[i] = frand();
    CK(cudaMalloc((void **)&d, n * 4));
    CK(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

static uint32_t dev_hash(const float *d, size_t n) {
    unsigned char *h = malloc(n * 4);
    CK(cudaMemcpy(h, d, n * 4, cudaMemcpyDeviceToHost));
    uint32_t x = 2166136261u;
    for (size_t i = 0; i < n * 4; i++) x = (x ^ h[i]) * 16777619u;
    free(h);
    return x;
}

enum { FWD, BWD_DATA, BWD_FILTER };
static const char *DIR[] = {"fwd", "bwd-data", "bwd-filter"};

/* runs direction dir with algorithm algo (skipped when the emulation does not offer it or its
 * workspace is huge); prints the hash of the output and the time */
static double run(cudnnHandle_t h, const Conv *s, int dir, int algo, float beta, cudnnTensorDescriptor_t xd,
                  cudnnFilterDescriptor_t wd, cudnnConvolutionDescriptor_t cd, cudnnTensorDescriptor_t yd,
                  float *x, float *w, float *y, size_t ny, size_t nx, size_t nw) {
    size_t ws = 0;
    cudnnStatus_t st;
    if (dir == FWD) st = cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, algo, &ws);
    else if (dir == BWD_DATA) st = cudnnGetConvolutionBackwardDataWorkspaceSize(h, wd, yd, cd, xd, algo, &ws);
    else st = cudnnGetConvolutionBackwardFilterWorkspaceSize(h, xd, yd, cd, wd, algo, &ws);
    if (st != CUDNN_STATUS_SUCCESS || ws > ((size_t)64 << 20)) return 0;
    void *wsp = NULL;
    if (ws) CK(cudaMalloc(&wsp, ws));
    size_t nout = dir == FWD ? ny : dir == BWD_DATA ? nx : nw;
    float *out = dev_random(nout), one = 1.0f;
    double t0 = now_ms();
    if (dir == FWD) st = cudnnConvolutionForward(h, &one, xd, x, wd, w, cd, algo, wsp, ws, &beta, yd, out);
    else if (dir == BWD_DATA)
        st = cudnnConvolutionBackwardData(h, &one, wd, w, yd, y, cd, algo, wsp, ws, &beta, xd, out);
    else st = cudnnConvolutionBackwardFilter(h, &one, xd, x, yd, y, cd, algo, wsp, ws, &beta, wd, out);
    double ms = now_ms() - t0;
    if (st == CUDNN_STATUS_SUCCESS)
        printf("N=%d C=%d %dx%d K=%d %dx%d p=%d s=%d beta=%g %-10s algo %d: %08x %8.2f ms\n", s->n, s->c, s->h, s->w,
               s->k, s->kh, s->kw, s->pad, s->stride, beta, DIR[dir], algo, dev_hash(out, nout), ms);
    CK(cudaFree(out));
    if (wsp) CK(cudaFree(wsp));
    return st == CUDNN_STATUS_SUCCESS ? ms : 0;
}

int main(void) {
    const Conv shapes[] = {
        {8, 3, 32, 32, 16, 3, 3, 1, 1},  {8, 16, 32, 32, 16, 3, 3, 1, 1}, {8, 16, 32, 32, 32, 3, 3, 1, 2},
        {8, 32, 16, 16, 32, 3, 3, 1, 1}, {8, 16, 32, 32, 32, 1, 1, 0, 2}, {8, 3, 32, 32, 20, 5, 5, 0, 1},
        {8, 20, 14, 14, 50, 5, 5, 0, 1}, {3, 5, 9, 13, 7, 3, 3, 0, 2},    {2, 4, 11, 7, 6, 5, 3, 2, 1},
        {2, 3, 6, 6, 4, 3, 3, 1, 3},
    };
    cudnnHandle_t h;
    CK(cudnnCreate(&h));
    double total[3] = {0, 0, 0};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const Conv *s = &shapes[i];
        cudnnTensorDescriptor_t xd, yd;
        cudnnFilterDescriptor_t wd;
        cudnnConvolutionDescriptor_t cd;
        CK(cudnnCreateTensorDescriptor(&xd));
        CK(cudnnCreateTensorDescriptor(&yd));
        CK(cudnnCreateFilterDescriptor(&wd));
        CK(cudnnCreateConvolutionDescriptor(&cd));
        CK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->n, s->c, s->h, s->w));
        CK(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s->k, s->c, s->kh, s->kw));
        CK(cudnnSetConvolution2dDescriptor(cd, s->pad, s->pad, s->stride, s->stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                           CUDNN_DATA_FLOAT));
        int n, c, oh, ow;
        CK(cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &n, &c, &oh, &ow));
        CK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, oh, ow));
        size_t nx = (size_t)s->n * s->c * s->h * s->w, nw = (size_t)s->k * s->c * s->kh * s->kw;
        size_t ny = (size_t)n * c * oh * ow;
        float *x = dev_random(nx), *w = dev_random(nw), *y = dev_random(ny);
        for (int dir = 0; dir < 3; dir++)
            for (int algo = 0; algo < 8; algo++)
                for (int b = 0; b < 2; b++)
                    total[dir] += run(h, s, dir, algo, b ? 0.5f : 0.0f, xd, wd, cd, yd, x, w, y, ny, nx, nw);
        CK(cudaFree(x));
        CK(cudaFree(w));
        CK(cudaFree(y));
        cudnnDestroyTensorDescriptor(xd);
        cudnnDestroyTensorDescriptor(yd);
        cudnnDestroyFilterDescriptor(wd);
        cudnnDestroyConvolutionDescriptor(cd);
    }
    printf("total ms: fwd %.1f bwd-data %.1f bwd-filter %.1f\n", total[0], total[1], total[2]);
    cudnnDestroy(h);
    return 0;
}
