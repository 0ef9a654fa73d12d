/* Host emulation of the cuDNN calls of nn/ (see cudnn.h): reference loops on the
 * tracked device memory of emu_device.c, written from cuDNN's documented
 * semantics (not from gcx's CPU ops, which the tests compare against):
 *
 *   convolution: cross-correlation, NCHW, any padding and stride, dilation 1,
 *     groups 1; y = alpha*conv(x, w) + beta*y (y not read when beta = 0); the
 *     backward passes likewise with their own alpha/beta; sums in float (fmaf)
 *     in an order of their own;
 *   batch norm (spatial): statistics per channel over N*H*W; running
 *     mean/var = (1 - factor)*running + factor*batch, the running variance
 *     unbiased (M/(M-1)); saved inverse std 1/sqrt(var + eps); backward with the
 *     saved statistics (or recomputed when both are NULL), alpha/beta for the
 *     data and the parameter gradients; sums in float in their own order.
 *
 * EMU_CUDNN_DOUBLE=1 makes every sum above double (rounded once): a second
 * rounding pattern, to tell a training run's rounding drift from a real
 * difference.
 *
 * Checks that stop the run (abort with a message): a descriptor not set or not
 * matching the others (channels, output size, BN shape), a tensor that is not
 * device memory or whose allocation is smaller than its descriptor says, an
 * output overlapping an input, a workspace smaller than the algorithm needs,
 * an algorithm the ranking calls did not offer for that direction, a tensor-core-
 * only algorithm run under CUDNN_FMA_MATH, epsilon below CUDNN_BN_MIN_EPSILON
 * (0 in cuDNN 9) or a factor outside [0, 1]. The Find calls offer results
 * that exercise the caller's choice (see offers(): tensor-op-only, FFT and
 * Winograd, non-deterministic, huge workspace, NOT_SUPPORTED, and results
 * labelled CUDNN_DEFAULT_MATH that need another workspace, or cannot run at
 * all, under CUDNN_FMA_MATH, as the workspace queries
 * cudnnGetConvolution*WorkspaceSize say). FFT and Winograd compute with their
 * operands rounded to 10 mantissa bits, so a parity test whose code picks one
 * by mistake fails. The forward algorithms with an odd enum value sum the input
 * channels in reverse order (real algorithms differ in their order of summation),
 * so which algorithm ran shows in the last bits. Find models timing noise: two
 * forward algorithms close in time trade places in its ranking at random (a bit
 * per call from the process id and a call counter), so processes, and threads
 * with their own plans, can choose differently, as on a GPU. The heuristic
 * ranking (cudnnGetConvolution*Algorithm_v7) offers the same results in a fixed
 * order of its own, time -1, led by a forward algorithm (DIRECT) that it has not
 * run: the workspace query accepts it, the convolution refuses it with
 * CUDNN_STATUS_NOT_SUPPORTED (nothing written), so the caller must pass it over.
 * The workspace is overwritten with garbage after each use. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_runtime.h"
#include "cudnn.h"

struct EmuCudnn { int magic; };
struct EmuTensor { int set, n, c, h, w; };
struct EmuFilter { int set, k, c, h, w; };
struct EmuConv { int set, pad_h, pad_w, u, v; cudnnMathType_t math; };

#define MAGIC 0x6364

static void fail(const char *fn, const char *msg) {
    fprintf(stderr, "emu cuDNN %s: %s\n", fn, msg);
    abort();
}

const char *cudnnGetErrorString(cudnnStatus_t s) {
    return s == CUDNN_STATUS_SUCCESS ? "CUDNN_STATUS_SUCCESS"
           : s == CUDNN_STATUS_NOT_SUPPORTED ? "CUDNN_STATUS_NOT_SUPPORTED (emulated)"
                                             : "CUDNN_STATUS_BAD_PARAM (emulated)";
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *h) {
    *h = calloc(1, sizeof(struct EmuCudnn));
    (*h)->magic = MAGIC;
    return CUDNN_STATUS_SUCCESS;
}
static void check_handle(cudnnHandle_t h, const char *fn) {
    if (!h || h->magic != MAGIC) fail(fn, "handle not created (or destroyed)");
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t h) {
    check_handle(h, "cudnnDestroy");
    h->magic = 0;
    free(h);
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, void *s) {
    (void)s;
    check_handle(h, "cudnnSetStream");
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d) {
    *d = calloc(1, sizeof(struct EmuTensor));
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) { free(d); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f, cudnnDataType_t t, int n,
                                         int c, int h, int w) {
    if (f != CUDNN_TENSOR_NCHW || t != CUDNN_DATA_FLOAT || n < 1 || c < 1 || h < 1 || w < 1)
        return CUDNN_STATUS_BAD_PARAM;
    d->set = 1, d->n = n, d->c = c, d->h = h, d->w = w;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d) {
    *d = calloc(1, sizeof(struct EmuFilter));
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) { free(d); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t, cudnnTensorFormat_t f, int k,
                                         int c, int h, int w) {
    if (f != CUDNN_TENSOR_NCHW || t != CUDNN_DATA_FLOAT || k < 1 || c < 1 || h < 1 || w < 1)
        return CUDNN_STATUS_BAD_PARAM;
    d->set = 1, d->k = k, d->c = c, d->h = h, d->w = w;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d) {
    *d = calloc(1, sizeof(struct EmuConv));
    (*d)->math = CUDNN_DEFAULT_MATH;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) { free(d); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u, int v,
                                              int dil_h, int dil_w, cudnnConvolutionMode_t mode, cudnnDataType_t t) {
    if (pad_h < 0 || pad_w < 0 || u < 1 || v < 1 || t != CUDNN_DATA_FLOAT) return CUDNN_STATUS_BAD_PARAM;
    if (dil_h != 1 || dil_w != 1 || mode != CUDNN_CROSS_CORRELATION) return CUDNN_STATUS_NOT_SUPPORTED; /* not emulated */
    d->set = 1, d->pad_h = pad_h, d->pad_w = pad_w, d->u = u, d->v = v;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m) {
    if (m != CUDNN_DEFAULT_MATH && m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
        m != CUDNN_FMA_MATH)
        return CUDNN_STATUS_BAD_PARAM;
    d->math = m;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- convolution shapes ---- */

typedef struct { int N, C, H, W, K, KH, KW, OH, OW, ph, pw, u, v; } Shape;

static Shape conv_shape(const char *fn, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
                        const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t y) {
    if (!x || !x->set || !w || !w->set || !conv || !conv->set || (y && !y->set)) fail(fn, "descriptor not set");
    Shape s = {x->n, x->c, x->h, x->w, w->k, w->h, w->w, 0, 0, conv->pad_h, conv->pad_w, conv->u, conv->v};
    if (w->c != x->c) fail(fn, "filter channels differ from the input's");
    s.OH = (s.H + 2 * s.ph - s.KH) / s.u + 1;
    s.OW = (s.W + 2 * s.pw - s.KW) / s.v + 1;
    if (s.H + 2 * s.ph < s.KH || s.W + 2 * s.pw < s.KW) fail(fn, "kernel larger than the padded input");
    if (y && (y->n != s.N || y->c != s.K || y->h != s.OH || y->w != s.OW)) {
        fprintf(stderr, "emu cuDNN %s: output descriptor %dx%dx%dx%d, the convolution gives %dx%dx%dx%d\n", fn, y->n,
                y->c, y->h, y->w, s.N, s.K, s.OH, s.OW);
        abort();
    }
    return s;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t d,
                                                    const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
                                                    int *n, int *c, int *h, int *wo) {
    Shape s = conv_shape("cudnnGetConvolution2dForwardOutputDim", x, w, d, NULL);
    *n = s.N, *c = s.K, *h = s.OH, *wo = s.OW;
    return CUDNN_STATUS_SUCCESS;
}

static size_t nx(const Shape *s) { return (size_t)s->N * s->C * s->H * s->W; }
static size_t ny(const Shape *s) { return (size_t)s->N * s->K * s->OH * s->OW; }
static size_t nw(const Shape *s) { return (size_t)s->K * s->C * s->KH * s->KW; }

/* ---- the algorithms Find offers (per direction), and what each needs ---- */

enum { D_FWD, D_BWD_DATA, D_BWD_FILTER };
/* memory: the workspace Find reports (measured under the math type it labels
 * the result with); fma_memory: what the algorithm needs when run under
 * CUDNN_FMA_MATH, FMA_NO when it cannot run so (cuDNN: NOT_SUPPORTED);
 * lossy: an FFT or Winograd algorithm, computed with each operand rounded to
 * 10 mantissa bits, a model of their other rounding */
typedef struct {
    int algo;
    cudnnStatus_t status;
    size_t memory;
    cudnnDeterminism_t det;
    cudnnMathType_t math;
    size_t fma_memory;
    int lossy;
} Offer;
#define HUGE_WS ((size_t)4 << 30)
#define FMA_NO SIZE_MAX
#define NOFFERS 6

/* Sorted "by time". Forward: every fp32 result is labelled CUDNN_DEFAULT_MATH
 * (Find also tries the default math, which may mean TF32), one of them cannot
 * run under CUDNN_FMA_MATH and another needs more workspace there than Find
 * reported. Backward-data: the only deterministic fp32 result is labelled
 * default. Backward-filter: FMA-labelled results. Each direction also offers a
 * tensor-op-only Winograd, an FFT (lossy; backward-data also a small FFT
 * tiling), a non-deterministic result (backward), one beyond any sensible
 * workspace limit (4 GiB), and a NOT_SUPPORTED entry. */
static int offers(int dir, const Shape *s, Offer o[NOFFERS]) {
    size_t im2col = (size_t)s->C * s->KH * s->KW * s->OH * s->OW * sizeof(float);
    const cudnnDeterminism_t DET = CUDNN_DETERMINISTIC, NDET = CUDNN_NON_DETERMINISTIC;
    const cudnnMathType_t FMA = CUDNN_FMA_MATH, DEF = CUDNN_DEFAULT_MATH, TOP = CUDNN_TENSOR_OP_MATH;
    if (dir == D_FWD) {
        o[0] = (Offer){CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, 0, 4096, DET, TOP, FMA_NO, 1};
        o[1] = (Offer){CUDNN_CONVOLUTION_FWD_ALGO_FFT, 0, 8192, DET, FMA, 8192, 1};
        o[2] = (Offer){CUDNN_CONVOLUTION_FWD_ALGO_GEMM, 0, 0, DET, DEF, FMA_NO, 0};
        o[3] = (Offer){CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, 0, im2col / 2, DET, DEF, im2col, 0};
        o[4] = (Offer){CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, 0, 0, DET, DEF, 0, 0};
        o[5] = (Offer){CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, CUDNN_STATUS_NOT_SUPPORTED, 0, DET, FMA, 0, 0};
    } else if (dir == D_BWD_DATA) {
        o[0] = (Offer){CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, 0, 4096, DET, TOP, FMA_NO, 1};
        o[1] = (Offer){CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, 0, 0, NDET, FMA, 0, 0};
        o[2] = (Offer){CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, 0, HUGE_WS, DET, FMA, HUGE_WS, 1};
        o[3] = (Offer){CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, 0, 8192, DET, FMA, 8192, 1};
        o[4] = (Offer){CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, 0, 0, DET, DEF, 256, 0};
        o[5] = (Offer){CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, CUDNN_STATUS_NOT_SUPPORTED, 0, DET, FMA, 0, 1};
    } else {
        o[0] = (Offer){CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, 0, 1024, NDET, FMA, 1024, 0};
        o[1] = (Offer){CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, 0, 4096, DET, TOP, FMA_NO, 1};
        o[2] = (Offer){CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, 0, HUGE_WS, DET, FMA, HUGE_WS, 1};
        o[3] = (Offer){CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, 0, nw(s) * sizeof(float), DET, FMA,
                       nw(s) * sizeof(float), 0};
        o[4] = (Offer){CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, 0, 0, NDET, FMA, 0, 0};
        o[5] = (Offer){CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, CUDNN_STATUS_NOT_SUPPORTED, 0, DET, FMA, 0, 1};
    }
    return NOFFERS;
}

/* the offer of algo that succeeded, or NULL */
static const Offer *find_offer(const Offer o[NOFFERS], int k, int algo) {
    for (int i = 0; i < k; i++)
        if (o[i].algo == algo && o[i].status == CUDNN_STATUS_SUCCESS) return &o[i];
    return NULL;
}

/* the workspace the offer needs under math type m; FMA_NO when it cannot run */
static size_t offer_ws(const Offer *o, cudnnMathType_t m) { return m == CUDNN_FMA_MATH ? o->fma_memory : o->memory; }

/* Find's timing noise: one pseudo-random bit per call, from the process id and a
 * call counter; when set, forward offers 3 and 4 (both usable under strict fp32,
 * the first one odd) trade places */
static unsigned noise_calls;
static int timing_noise(void) {
    uint32_t x = (uint32_t)getpid() * 2654435761u + __atomic_fetch_add(&noise_calls, 1, __ATOMIC_RELAXED) * 40503u;
    x ^= x >> 15, x *= 2246822519u, x ^= x >> 13;
    return (int)(x & 1);
}
static void swap_offers(Offer *a, Offer *b) {
    Offer t = *a;
    *a = *b, *b = t;
}

/* The heuristic's untried forward result: DIRECT, which Find reports as
 * NOT_SUPPORTED (offer 5), ranked first as usable; the workspace query accepts
 * it and the convolution refuses it */
static int phantom(int dir, int algo) { return dir == D_FWD && algo == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT; }
static void heuristic_phantom_first(Offer o[NOFFERS]) {
    Offer ph = {CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, CUDNN_STATUS_SUCCESS, 0, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH, 0, 0};
    memmove(&o[1], &o[0], (NOFFERS - 1) * sizeof o[0]); /* drops offer 5, Find's DIRECT */
    o[0] = ph;
}

/* timed: Find (noisy order, times), else the heuristic (offers 3 and 4 always
 * traded, the phantom first, time -1) */
#define FIND_BODY(fn, dir, timed)                                                                                    \
    Offer o[NOFFERS];                                                                                                \
    int k = offers(dir, &s, o);                                                                                      \
    if (requested < 1) fail(fn, "requested < 1");                                                                    \
    if (dir == D_FWD && (!(timed) || timing_noise())) swap_offers(&o[3], &o[4]);                                     \
    if (dir == D_FWD && !(timed)) heuristic_phantom_first(o);                                                        \
    if (k > requested) k = requested;                                                                                \
    for (int i = 0; i < k; i++) {                                                                                    \
        memset(&perf[i], 0, sizeof perf[i]);                                                                         \
        perf[i].algo = o[i].algo;                                                                                    \
        perf[i].status = o[i].status;                                                                                \
        perf[i].time = o[i].status || !(timed) ? -1.0f : 0.01f * (float)(i + 1);                                     \
        perf[i].memory = o[i].memory;                                                                                \
        perf[i].determinism = o[i].det;                                                                              \
        perf[i].mathType = o[i].math;                                                                                \
    }                                                                                                                \
    *returned = k;                                                                                                   \
    return CUDNN_STATUS_SUCCESS;

/* more than the offers, as cuDNN's maximum covers every algorithm and math variant */
#define MAX_COUNT_BODY(fn)                                                                                           \
    check_handle(h, fn);                                                                                             \
    *count = NOFFERS + 2;                                                                                            \
    return CUDNN_STATUS_SUCCESS;
cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t h, int *count) {
    MAX_COUNT_BODY("cudnnGetConvolutionForwardAlgorithmMaxCount")
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t h, int *count) {
    MAX_COUNT_BODY("cudnnGetConvolutionBackwardDataAlgorithmMaxCount")
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t h, int *count) {
    MAX_COUNT_BODY("cudnnGetConvolutionBackwardFilterAlgorithmMaxCount")
}

/* Find (timed) and the heuristic ranking (_v7) share one body per direction */
static cudnnStatus_t rank_fwd(const char *fn, int timed, cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                              const cudnnFilterDescriptor_t w, const cudnnConvolutionDescriptor_t conv,
                              const cudnnTensorDescriptor_t y, int requested, int *returned,
                              cudnnConvolutionFwdAlgoPerf_t *perf) {
    check_handle(h, fn);
    Shape s = conv_shape(fn, x, w, conv, y);
    FIND_BODY(fn, D_FWD, timed)
}
static cudnnStatus_t rank_bwd_data(const char *fn, int timed, cudnnHandle_t h, const cudnnFilterDescriptor_t w,
                                   const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t conv,
                                   const cudnnTensorDescriptor_t dx, int requested, int *returned,
                                   cudnnConvolutionBwdDataAlgoPerf_t *perf) {
    check_handle(h, fn);
    Shape s = conv_shape(fn, dx, w, conv, dy);
    FIND_BODY(fn, D_BWD_DATA, timed)
}
static cudnnStatus_t rank_bwd_filter(const char *fn, int timed, cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                     const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t conv,
                                     const cudnnFilterDescriptor_t dw, int requested, int *returned,
                                     cudnnConvolutionBwdFilterAlgoPerf_t *perf) {
    check_handle(h, fn);
    Shape s = conv_shape(fn, x, dw, conv, dy);
    FIND_BODY(fn, D_BWD_FILTER, timed)
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                   const cudnnFilterDescriptor_t w,
                                                   const cudnnConvolutionDescriptor_t conv,
                                                   const cudnnTensorDescriptor_t y, int requested, int *returned,
                                                   cudnnConvolutionFwdAlgoPerf_t *perf) {
    return rank_fwd("cudnnFindConvolutionForwardAlgorithm", 1, h, x, w, conv, y, requested, returned, perf);
}
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                     const cudnnFilterDescriptor_t w,
                                                     const cudnnConvolutionDescriptor_t conv,
                                                     const cudnnTensorDescriptor_t y, int requested, int *returned,
                                                     cudnnConvolutionFwdAlgoPerf_t *perf) {
    return rank_fwd("cudnnGetConvolutionForwardAlgorithm_v7", 0, h, x, w, conv, y, requested, returned, perf);
}
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(cudnnHandle_t h, const cudnnFilterDescriptor_t w,
                                                        const cudnnTensorDescriptor_t dy,
                                                        const cudnnConvolutionDescriptor_t conv,
                                                        const cudnnTensorDescriptor_t dx, int requested,
                                                        int *returned, cudnnConvolutionBwdDataAlgoPerf_t *perf) {
    return rank_bwd_data("cudnnFindConvolutionBackwardDataAlgorithm", 1, h, w, dy, conv, dx, requested, returned,
                         perf);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t h, const cudnnFilterDescriptor_t w,
                                                          const cudnnTensorDescriptor_t dy,
                                                          const cudnnConvolutionDescriptor_t conv,
                                                          const cudnnTensorDescriptor_t dx, int requested,
                                                          int *returned, cudnnConvolutionBwdDataAlgoPerf_t *perf) {
    return rank_bwd_data("cudnnGetConvolutionBackwardDataAlgorithm_v7", 0, h, w, dy, conv, dx, requested, returned,
                         perf);
}
cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                          const cudnnTensorDescriptor_t dy,
                                                          const cudnnConvolutionDescriptor_t conv,
                                                          const cudnnFilterDescriptor_t dw, int requested,
                                                          int *returned, cudnnConvolutionBwdFilterAlgoPerf_t *perf) {
    return rank_bwd_filter("cudnnFindConvolutionBackwardFilterAlgorithm", 1, h, x, dy, conv, dw, requested,
                           returned, perf);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                            const cudnnTensorDescriptor_t dy,
                                                            const cudnnConvolutionDescriptor_t conv,
                                                            const cudnnFilterDescriptor_t dw, int requested,
                                                            int *returned, cudnnConvolutionBwdFilterAlgoPerf_t *perf) {
    return rank_bwd_filter("cudnnGetConvolutionBackwardFilterAlgorithm_v7", 0, h, x, dy, conv, dw, requested,
                           returned, perf);
}

/* the algorithm was offered and runs under the descriptor's math type; the
 * workspace suffices. Returns 1 for a lossy (FFT/Winograd) algorithm, -1 for the
 * heuristic's phantom (the call refuses it). */
static int check_algo(const char *fn, int dir, const Shape *s, int algo, const cudnnConvolutionDescriptor_t conv,
                      void *ws, size_t ws_bytes) {
    if (phantom(dir, algo)) return -1; /* refused: CUDNN_STATUS_NOT_SUPPORTED */
    Offer o[NOFFERS];
    int k = offers(dir, s, o);
    const Offer *f = find_offer(o, k, algo);
    if (!f) fail(fn, "algorithm not among those the ranking calls offer");
    size_t need = offer_ws(f, conv->math);
    if (need == FMA_NO) fail(fn, "an algorithm that cannot run under CUDNN_FMA_MATH run so (cuDNN: NOT_SUPPORTED)");
    if (ws_bytes < need) {
        fprintf(stderr, "emu cuDNN %s: algorithm %d needs %zu workspace bytes under math type %d, given %zu\n", fn,
                algo, need, (int)conv->math, ws_bytes);
        abort();
    }
    if (ws_bytes) emu_dev_span(ws, ws_bytes, "the workspace");
    return f->lossy;
}

/* an operand of a lossy algorithm: rounded to nearest at 10 mantissa bits (not under
 * ASan, like row_mac, so that it inlines there; the callers under ASan call it) */
__attribute__((no_sanitize_address)) static inline float operand(float v, int lossy) {
    if (!lossy || !isfinite(v)) return v;
    uint32_t u;
    memcpy(&u, &v, 4);
    u = (u + 0x1000u) & ~0x1FFFu;
    memcpy(&v, &u, 4);
    return v;
}

/* cudnnGetConvolution*WorkspaceSize: what algo needs under the descriptor's math type */
static cudnnStatus_t ws_query(const char *fn, cudnnHandle_t h, int dir, const Shape *s,
                              const cudnnConvolutionDescriptor_t conv, int algo, size_t *bytes) {
    check_handle(h, fn);
    if (!bytes) fail(fn, "NULL size");
    if (phantom(dir, algo)) {
        *bytes = 0;
        return CUDNN_STATUS_SUCCESS;
    }
    Offer o[NOFFERS];
    const Offer *f = find_offer(o, offers(dir, s, o), algo);
    if (!f || offer_ws(f, conv->math) == FMA_NO) return CUDNN_STATUS_NOT_SUPPORTED;
    *bytes = offer_ws(f, conv->math);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                      const cudnnFilterDescriptor_t w,
                                                      const cudnnConvolutionDescriptor_t conv,
                                                      const cudnnTensorDescriptor_t y, cudnnConvolutionFwdAlgo_t algo,
                                                      size_t *bytes) {
    const char *fn = "cudnnGetConvolutionForwardWorkspaceSize";
    Shape s = conv_shape(fn, x, w, conv, y);
    return ws_query(fn, h, D_FWD, &s, conv, (int)algo, bytes);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t h, const cudnnFilterDescriptor_t w,
                                                           const cudnnTensorDescriptor_t dy,
                                                           const cudnnConvolutionDescriptor_t conv,
                                                           const cudnnTensorDescriptor_t dx,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes) {
    const char *fn = "cudnnGetConvolutionBackwardDataWorkspaceSize";
    Shape s = conv_shape(fn, dx, w, conv, dy);
    return ws_query(fn, h, D_BWD_DATA, &s, conv, (int)algo, bytes);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                             const cudnnTensorDescriptor_t dy,
                                                             const cudnnConvolutionDescriptor_t conv,
                                                             const cudnnFilterDescriptor_t dw,
                                                             cudnnConvolutionBwdFilterAlgo_t algo, size_t *bytes) {
    const char *fn = "cudnnGetConvolutionBackwardFilterWorkspaceSize";
    Shape s = conv_shape(fn, x, dw, conv, dy);
    return ws_query(fn, h, D_BWD_FILTER, &s, conv, (int)algo, bytes);
}

static void scribble(void *ws, size_t bytes) {
    if (ws && bytes) memset(ws, 0x7F, bytes); /* 0x7F7F7F7F: a large float */
}

static int overlaps(const void *a, size_t an, const void *b, size_t bn) {
    const char *p = a, *q = b;
    return a && b && p < q + bn && q < p + an;
}

/* EMU_CUDNN_DOUBLE=1: sums in double (see the top) */
static int acc_double = -1;
static int use_double(void) {
    if (acc_double < 0) acc_double = getenv("EMU_CUDNN_DOUBLE") && atoi(getenv("EMU_CUDNN_DOUBLE"));
    return acc_double;
}
static inline double mac(double acc, float a, float b, int dbl) {
    return dbl ? acc + (double)a * b : (double)fmaf(a, b, (float)acc);
}

/* the loops below give every output the terms of its sum in the order the comments
 * name; they run many outputs' sums side by side, in float (af) or in double (ad) */

/* per tap j of a kernel row, the outputs ox of a row whose input ix = ox * v - pw + j
 * lies in the row [0, W): [lo[j], hi[j]) (empty when the tap reaches none) */
static void tap_ranges(const Shape *s, int *lo, int *hi) {
    for (int j = 0; j < s->KW; j++) {
        int off = j - s->pw, v = s->v;
        int a = off >= 0 ? 0 : (-off + v - 1) / v, b = s->W - off <= 0 ? 0 : (s->W - off + v - 1) / v;
        lo[j] = a, hi[j] = b < s->OW ? b : s->OW;
        if (hi[j] < lo[j]) hi[j] = lo[j];
    }
}

/* acc[t * astep] += x[t * xstep] * wv for t < m: one more term of m sums (in double as
 * mac() adds). Not under AddressSanitizer, whose check of every load tripled the
 * emulation's convolution time. What that gives up: ASan's report to the byte of a read
 * past a device tensor's end inside its allocation's last page (emu_device.c poisons
 * those bytes) and of a row overrun. What still holds: each call checks that every
 * tensor's whole extent lies in its allocation (emu_dev_span) and opens only those
 * allocations (EMU_DEV_OPEN), so a read beyond them faults; the index ranges are
 * tap_ranges', and dev/emu_conv.sh checks the outputs bit for bit on odd shapes. */
__attribute__((no_sanitize_address)) static void row_mac(float *restrict af, double *restrict ad, int astep,
                                                        const float *restrict x, int xstep, int m, float wv,
                                                        int lossy, int dbl) {
    if (dbl)
        for (int t = 0; t < m; t++) ad[t * astep] += (double)operand(x[(size_t)t * xstep], lossy) * wv;
    else if (!lossy && astep == 1 && xstep == 1)
        for (int t = 0; t < m; t++) af[t] = fmaf(x[t], wv, af[t]);
    else
        for (int t = 0; t < m; t++) af[t * astep] = fmaf(operand(x[(size_t)t * xstep], lossy), wv, af[t * astep]);
}

static float blend(float alpha, float v, float beta, const float *old) {
    return beta == 0.0f ? alpha * v : alpha * v + beta * *old;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd,
                                      const void *xv, const cudnnFilterDescriptor_t wd, const void *wv,
                                      const cudnnConvolutionDescriptor_t conv, cudnnConvolutionFwdAlgo_t algo,
                                      void *ws, size_t ws_bytes, const void *beta, const cudnnTensorDescriptor_t yd,
                                      void *yv) {
    const char *fn = "cudnnConvolutionForward";
    check_handle(h, fn);
    Shape s = conv_shape(fn, xd, wd, conv, yd);
    int lossy = check_algo(fn, D_FWD, &s, algo, conv, ws, ws_bytes);
    if (lossy < 0) return CUDNN_STATUS_NOT_SUPPORTED;
    const float *x = xv, *w = wv;
    float *y = yv, a = *(const float *)alpha, b = *(const float *)beta;
    emu_dev_span(x, nx(&s) * 4, "x"), emu_dev_span(w, nw(&s) * 4, "w"), emu_dev_span(y, ny(&s) * 4, "y");
    if (overlaps(y, ny(&s) * 4, x, nx(&s) * 4) || overlaps(y, ny(&s) * 4, w, nw(&s) * 4)) fail(fn, "y overlaps x or w");
    int dbl = use_double(), rev = (int)algo & 1;
    EMU_DEV_OPEN(x, w, y, ws);
    /* each output sums over (c, i, j) in that order (c from the last channel down
     * for an odd algorithm); a row of outputs at a time, those of [lo[j], hi[j]) for
     * tap j (ix = ox * v - pw + j inside the row) */
    int lo[s.KW], hi[s.KW];
    tap_ranges(&s, lo, hi);
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < s.N; n++)
        for (int k = 0; k < s.K; k++) {
            float af[s.OW]; /* a row: at most a few thousand values */
            double ad[s.OW];
            for (int oy = 0; oy < s.OH; oy++) {
                for (int ox = 0; ox < s.OW; ox++) af[ox] = 0.0f, ad[ox] = 0.0;
                for (int cc = 0; cc < s.C; cc++)
                    for (int i = 0, c = rev ? s.C - 1 - cc : cc; i < s.KH; i++) {
                        int iy = oy * s.u - s.ph + i;
                        if (iy < 0 || iy >= s.H) continue;
                        const float *xr = &x[(((size_t)n * s.C + c) * s.H + iy) * s.W];
                        for (int j = 0; j < s.KW; j++) {
                            if (hi[j] == lo[j]) continue; /* the tap reaches no input of the row */
                            float wv = operand(w[(((size_t)k * s.C + c) * s.KH + i) * s.KW + j], lossy);
                            row_mac(af + lo[j], ad + lo[j], 1, xr + lo[j] * s.v - s.pw + j, s.v, hi[j] - lo[j], wv,
                                    lossy, dbl);
                        }
                    }
                for (int ox = 0; ox < s.OW; ox++) {
                    float *o = &y[(((size_t)n * s.K + k) * s.OH + oy) * s.OW + ox];
                    *o = blend(a, dbl ? (float)ad[ox] : af[ox], b, o);
                }
            }
        }
    scribble(ws, ws_bytes);
    emu_dev_close();
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha, const cudnnFilterDescriptor_t wd,
                                           const void *wv, const cudnnTensorDescriptor_t dyd, const void *dyv,
                                           const cudnnConvolutionDescriptor_t conv,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *ws, size_t ws_bytes,
                                           const void *beta, const cudnnTensorDescriptor_t dxd, void *dxv) {
    const char *fn = "cudnnConvolutionBackwardData";
    check_handle(h, fn);
    Shape s = conv_shape(fn, dxd, wd, conv, dyd);
    int lossy = check_algo(fn, D_BWD_DATA, &s, algo, conv, ws, ws_bytes);
    if (lossy < 0) return CUDNN_STATUS_NOT_SUPPORTED;
    const float *w = wv, *dy = dyv;
    float *dx = dxv, a = *(const float *)alpha, b = *(const float *)beta;
    emu_dev_span(dx, nx(&s) * 4, "dx"), emu_dev_span(w, nw(&s) * 4, "w"), emu_dev_span(dy, ny(&s) * 4, "dy");
    if (overlaps(dx, nx(&s) * 4, dy, ny(&s) * 4) || overlaps(dx, nx(&s) * 4, w, nw(&s) * 4))
        fail(fn, "dx overlaps dy or w");
    int dbl = use_double();
    EMU_DEV_OPEN(dx, w, dy, ws);
    /* gather form: dx[n,c,iy,ix] = sum over (k,i,j) with oy*u - ph + i = iy, ox*v - pw + j = ix */
    /* each output sums over (k, i, j) in that order; a row of outputs at a time, tap j
     * reaching those of ix = ox * v - pw + j for ox in [lo[j], hi[j]) */
    int lo[s.KW], hi[s.KW];
    tap_ranges(&s, lo, hi);
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < s.N; n++)
        for (int c = 0; c < s.C; c++) {
            float af[s.W];
            double ad[s.W];
            for (int iy = 0; iy < s.H; iy++) {
                for (int ix = 0; ix < s.W; ix++) af[ix] = 0.0f, ad[ix] = 0.0;
                for (int k = 0; k < s.K; k++)
                    for (int i = 0; i < s.KH; i++) {
                        int t = iy + s.ph - i;
                        if (t < 0 || t % s.u) continue;
                        int oy = t / s.u;
                        if (oy >= s.OH) continue;
                        const float *dyr = &dy[(((size_t)n * s.K + k) * s.OH + oy) * s.OW];
                        for (int j = 0; j < s.KW; j++) {
                            if (hi[j] == lo[j]) continue; /* the tap reaches no output of the row */
                            float wv = operand(w[(((size_t)k * s.C + c) * s.KH + i) * s.KW + j], lossy);
                            int ix = lo[j] * s.v - s.pw + j;
                            row_mac(af + ix, ad + ix, s.v, dyr + lo[j], 1, hi[j] - lo[j], wv, lossy, dbl);
                        }
                    }
                for (int ix = 0; ix < s.W; ix++) {
                    float *o = &dx[(((size_t)n * s.C + c) * s.H + iy) * s.W + ix];
                    *o = blend(a, dbl ? (float)ad[ix] : af[ix], b, o);
                }
            }
        }
    scribble(ws, ws_bytes);
    emu_dev_close();
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd,
                                             const void *xv, const cudnnTensorDescriptor_t dyd, const void *dyv,
                                             const cudnnConvolutionDescriptor_t conv,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *ws, size_t ws_bytes,
                                             const void *beta, const cudnnFilterDescriptor_t dwd, void *dwv) {
    const char *fn = "cudnnConvolutionBackwardFilter";
    check_handle(h, fn);
    Shape s = conv_shape(fn, xd, dwd, conv, dyd);
    int lossy = check_algo(fn, D_BWD_FILTER, &s, algo, conv, ws, ws_bytes);
    if (lossy < 0) return CUDNN_STATUS_NOT_SUPPORTED;
    const float *x = xv, *dy = dyv;
    float *dw = dwv, a = *(const float *)alpha, b = *(const float *)beta;
    emu_dev_span(x, nx(&s) * 4, "x"), emu_dev_span(dw, nw(&s) * 4, "dw"), emu_dev_span(dy, ny(&s) * 4, "dy");
    if (overlaps(dw, nw(&s) * 4, dy, ny(&s) * 4) || overlaps(dw, nw(&s) * 4, x, nx(&s) * 4))
        fail(fn, "dw overlaps x or dy");
    int dbl = use_double();
    EMU_DEV_OPEN(x, dw, dy, ws);
    /* each output dw[k,c,i,j] sums over (n, oy, ox) in that order; the K outputs of one
     * (c, i, j) at a time, from dy laid out as [n, oy, ox, k] */
    size_t plane = (size_t)s.OH * s.OW;
    float *dyt = malloc(ny(&s) * sizeof *dyt);
    if (!dyt) fail(fn, "out of host memory");
    for (int n = 0; n < s.N; n++)
        for (int k = 0; k < s.K; k++)
            for (size_t p = 0; p < plane; p++)
                dyt[((size_t)n * plane + p) * s.K + k] = operand(dy[((size_t)n * s.K + k) * plane + p], lossy);
    int lo[s.KW], hi[s.KW]; /* the outputs ox whose ix = ox * v - pw + j lies in the row */
    tap_ranges(&s, lo, hi);
#pragma omp parallel for collapse(3) schedule(static)
    for (int c = 0; c < s.C; c++)
        for (int i = 0; i < s.KH; i++)
            for (int j = 0; j < s.KW; j++) {
                float af[s.K];
                double ad[s.K];
                for (int k = 0; k < s.K; k++) af[k] = 0.0f, ad[k] = 0.0;
                for (int n = 0; n < s.N; n++)
                    for (int oy = 0; oy < s.OH; oy++) {
                        int iy = oy * s.u - s.ph + i;
                        if (iy < 0 || iy >= s.H) continue;
                        const float *xr = &x[(((size_t)n * s.C + c) * s.H + iy) * s.W];
                        for (int ox = lo[j]; ox < hi[j]; ox++)
                            row_mac(af, ad, 1, &dyt[((size_t)n * plane + (size_t)oy * s.OW + ox) * s.K], 1, s.K,
                                    operand(xr[ox * s.v - s.pw + j], lossy), 0, dbl);
                    }
                for (int k = 0; k < s.K; k++) {
                    float *o = &dw[(((size_t)k * s.C + c) * s.KH + i) * s.KW + j];
                    *o = blend(a, dbl ? (float)ad[k] : af[k], b, o);
                }
            }
    free(dyt);
    scribble(ws, ws_bytes);
    emu_dev_close();
    return CUDNN_STATUS_SUCCESS;
}

static size_t numel(const cudnnTensorDescriptor_t d) { return (size_t)d->n * d->c * d->h * d->w; }

cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t dyd,
                                           const void *dyv, const void *beta, const cudnnTensorDescriptor_t dbd,
                                           void *dbv) {
    const char *fn = "cudnnConvolutionBackwardBias";
    check_handle(h, fn);
    if (!dyd || !dyd->set || !dbd || !dbd->set) fail(fn, "descriptor not set");
    if (dbd->n != 1 || dbd->c != dyd->c || dbd->h != 1 || dbd->w != 1) fail(fn, "db must be 1 x C x 1 x 1 of dy's C");
    const float *dy = dyv;
    float *db = dbv, a = *(const float *)alpha, b = *(const float *)beta;
    emu_dev_span(dy, numel(dyd) * 4, "dy"), emu_dev_span(db, (size_t)dbd->c * 4, "db");
    if (overlaps(db, (size_t)dbd->c * 4, dy, numel(dyd) * 4)) fail(fn, "db overlaps dy");
    int dbl = use_double();
    EMU_DEV_OPEN(dy, db);
    size_t hw = (size_t)dyd->h * dyd->w;
    for (int c = 0; c < dyd->c; c++) {
        double acc = 0.0;
        for (int n = 0; n < dyd->n; n++)
            for (size_t i = 0; i < hw; i++) acc = mac(acc, dy[((size_t)n * dyd->c + c) * hw + i], 1.0f, dbl);
        db[c] = blend(a, (float)acc, b, &db[c]);
    }
    emu_dev_close();
    return CUDNN_STATUS_SUCCESS;
}

/* C = alpha*A + beta*C, A broadcast along every dimension where it is 1 */
cudnnStatus_t cudnnAddTensor(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t ad, const void *Av,
                             const void *beta, const cudnnTensorDescriptor_t cd, void *Cv) {
    const char *fn = "cudnnAddTensor";
    check_handle(h, fn);
    if (!ad || !ad->set || !cd || !cd->set) fail(fn, "descriptor not set");
    if ((ad->n != 1 && ad->n != cd->n) || (ad->c != 1 && ad->c != cd->c) || (ad->h != 1 && ad->h != cd->h) ||
        (ad->w != 1 && ad->w != cd->w))
        fail(fn, "A does not broadcast to C");
    const float *A = Av;
    float *C = Cv, a = *(const float *)alpha, b = *(const float *)beta;
    emu_dev_span(A, numel(ad) * 4, "A"), emu_dev_span(C, numel(cd) * 4, "C");
    if (overlaps(C, numel(cd) * 4, A, numel(ad) * 4)) fail(fn, "C overlaps A");
    EMU_DEV_OPEN(A, C);
    for (int n = 0; n < cd->n; n++)
        for (int c = 0; c < cd->c; c++)
            for (int y = 0; y < cd->h; y++)
                for (int x = 0; x < cd->w; x++) {
                    float av = A[(((size_t)(ad->n == 1 ? 0 : n) * ad->c + (ad->c == 1 ? 0 : c)) * ad->h +
                                  (ad->h == 1 ? 0 : y)) * ad->w + (ad->w == 1 ? 0 : x)];
                    float *o = &C[(((size_t)n * cd->c + c) * cd->h + y) * cd->w + x];
                    *o = blend(a, av, b, o);
                }
    emu_dev_close();
    return CUDNN_STATUS_SUCCESS;
}

/* ---- batch normalization (spatial) ---- */

cudnnStatus_t cudnnDeriveBNTensorDescriptor(cudnnTensorDescriptor_t bn, const cudnnTensorDescriptor_t x,
                                            cudnnBatchNormMode_t mode) {
    if (!x || !x->set) fail("cudnnDeriveBNTensorDescriptor", "x descriptor not set");
    if (mode != CUDNN_BATCHNORM_SPATIAL) return CUDNN_STATUS_NOT_SUPPORTED; /* not emulated */
    bn->set = 1, bn->n = 1, bn->c = x->c, bn->h = 1, bn->w = 1;
    return CUDNN_STATUS_SUCCESS;
}

typedef struct { int N, C; size_t HW, n; } Bn;

static Bn bn_shape(const char *fn, cudnnBatchNormMode_t mode, const cudnnTensorDescriptor_t x,
                   const cudnnTensorDescriptor_t y, const cudnnTensorDescriptor_t bn, double eps) {
    if (mode != CUDNN_BATCHNORM_SPATIAL) fail(fn, "only the spatial mode is emulated");
    if (!x || !x->set || !y || !y->set || !bn || !bn->set) fail(fn, "descriptor not set");
    if (y->n != x->n || y->c != x->c || y->h != x->h || y->w != x->w) fail(fn, "x and y descriptors differ");
    if (bn->n != 1 || bn->c != x->c || bn->h != 1 || bn->w != 1) fail(fn, "BN descriptor is not 1 x C x 1 x 1");
    if (!(eps >= 0.0)) fail(fn, "epsilon below CUDNN_BN_MIN_EPSILON (0)");
    Bn s = {x->n, x->c, (size_t)x->h * x->w, 0};
    s.n = (size_t)s.N * s.C * s.HW;
    return s;
}

#define AT(p, s, nn, c, i) (p)[((size_t)(nn) * (s).C + (c)) * (s).HW + (i)]

/* the batch mean and biased variance of channel c: sums in float, or in double with
 * EMU_CUDNN_DOUBLE=1 */
static void stats(const float *x, Bn s, int c, double *mean, double *var, int dbl) {
    double m = 0.0, v = 0.0;
    for (int n = 0; n < s.N; n++)
        for (size_t i = 0; i < s.HW; i++) m = dbl ? m + AT(x, s, n, c, i) : (float)m + AT(x, s, n, c, i);
    m = dbl ? m / ((double)s.N * s.HW) : (float)m / (float)((double)s.N * s.HW);
    for (int n = 0; n < s.N; n++)
        for (size_t i = 0; i < s.HW; i++) {
            double d = AT(x, s, n, c, i) - m;
            v = dbl ? v + d * d : (double)fmaf((float)d, (float)d, (float)v);
        }
    *mean = m, *var = dbl ? v / ((double)s.N * s.HW) : (float)v / (float)((double)s.N * s.HW);
}

cudnnStatus_t cudnnBatchNormalizationForwardTraining(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha, const void *beta, const cudnnTensorDescriptor_t xd,
    const void *xv, const cudnnTensorDescriptor_t yd, void *yv, const cudnnTensorDescriptor_t bnd, const void *scale,
    const void *bias, double factor, void *running_mean, void *running_var, double eps, void *save_mean,
    void *save_inv_var) {
    const char *fn = "cudnnBatchNormalizationForwardTraining";
    check_handle(h, fn);
    Bn s = bn_shape(fn, mode, xd, yd, bnd, eps);
    if (!(factor >= 0.0 && factor <= 1.0)) fail(fn, "exponentialAverageFactor outside [0, 1]");
    if (!running_mean != !running_var) fail(fn, "running mean and variance: both or neither");
    if (!save_mean != !save_inv_var) fail(fn, "saved mean and inverse variance: both or neither");
    if ((size_t)s.N * s.HW < 2) return CUDNN_STATUS_BAD_PARAM; /* no unbiased variance from one value */
    const float *x = xv, *g = scale, *be = bias;
    float *y = yv, *rm = running_mean, *rv = running_var, *sm = save_mean, *si = save_inv_var;
    float a = *(const float *)alpha, b = *(const float *)beta;
    size_t cb = (size_t)s.C * 4;
    emu_dev_span(x, s.n * 4, "x"), emu_dev_span(y, s.n * 4, "y"), emu_dev_span(g, cb, "bnScale");
    emu_dev_span(be, cb, "bnBias");
    if (rm) emu_dev_span(rm, cb, "running mean"), emu_dev_span(rv, cb, "running variance");
    if (sm) emu_dev_span(sm, cb, "saved mean"), emu_dev_span(si, cb, "saved inverse variance");
    if (x != (const float *)y && overlaps(y, s.n * 4, x, s.n * 4)) fail(fn, "y partly overlaps x");
    int dbl = use_double();
    EMU_DEV_OPEN(x, y, g, be, rm, rv, sm, si);
#pragma omp parallel for schedule(static)
    for (int c = 0; c < s.C; c++) {
        double m, v;
        stats(x, s, c, &m, &v, dbl);
        double inv = 1.0 / sqrt(v + eps);
        if (rm) {
            double M = (double)s.N * s.HW;
            rm[c] = (float)((1.0 - factor) * rm[c] + factor * m);
            rv[c] = (float)((1.0 - factor) * rv[c] + factor * v * M / (M - 1.0));
        }
        if (sm) sm[c] = (float)m, si[c] = (float)inv;
        for (int n = 0; n < s.N; n++)
            for (size_t i = 0; i < s.HW; i++) {
                float *o = &AT(y, s, n, c, i);
                float v1 = (float)((AT(x, s, n, c, i) - m) * inv * g[c] + be[c]);
                *o = blend(a, v1, b, o);
            }
    }
    emu_dev_close();
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBatchNormalizationForwardInference(cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha,
                                                      const void *beta, const cudnnTensorDescriptor_t xd,
                                                      const void *xv, const cudnnTensorDescriptor_t yd, void *yv,
                                                      const cudnnTensorDescriptor_t bnd, const void *scale,
                                                      const void *bias, const void *mean, const void *var,
                                                      double eps) {
    const char *fn = "cudnnBatchNormalizationForwardInference";
    check_handle(h, fn);
    Bn s = bn_shape(fn, mode, xd, yd, bnd, eps);
    const float *x = xv, *g = scale, *be = bias, *rm = mean, *rv = var;
    float *y = yv, a = *(const float *)alpha, b = *(const float *)beta;
    size_t cb = (size_t)s.C * 4;
    emu_dev_span(x, s.n * 4, "x"), emu_dev_span(y, s.n * 4, "y"), emu_dev_span(g, cb, "bnScale");
    emu_dev_span(be, cb, "bnBias"), emu_dev_span(rm, cb, "estimated mean"), emu_dev_span(rv, cb, "estimated variance");
    if (x != (const float *)y && overlaps(y, s.n * 4, x, s.n * 4)) fail(fn, "y partly overlaps x");
    EMU_DEV_OPEN(x, y, g, be, rm, rv);
    for (int c = 0; c < s.C; c++) {
        double inv = 1.0 / sqrt((double)rv[c] + eps);
        for (int n = 0; n < s.N; n++)
            for (size_t i = 0; i < s.HW; i++) {
                float *o = &AT(y, s, n, c, i);
                float v1 = (float)((AT(x, s, n, c, i) - (double)rm[c]) * inv * g[c] + be[c]);
                *o = blend(a, v1, b, o);
            }
    }
    emu_dev_close();
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBatchNormalizationBackward(cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha_data,
                                              const void *beta_data, const void *alpha_param,
                                              const void *beta_param, const cudnnTensorDescriptor_t xd,
                                              const void *xv, const cudnnTensorDescriptor_t dyd, const void *dyv,
                                              const cudnnTensorDescriptor_t dxd, void *dxv,
                                              const cudnnTensorDescriptor_t bnd, const void *scale, void *dscale,
                                              void *dbias, double eps, const void *saved_mean,
                                              const void *saved_inv_var) {
    const char *fn = "cudnnBatchNormalizationBackward";
    check_handle(h, fn);
    Bn s = bn_shape(fn, mode, xd, dyd, bnd, eps);
    bn_shape(fn, mode, xd, dxd, bnd, eps);
    if (!saved_mean != !saved_inv_var) fail(fn, "saved mean and inverse variance: both or neither");
    const float *x = xv, *dy = dyv, *g = scale, *sm = saved_mean, *si = saved_inv_var;
    float *dx = dxv, *dg = dscale, *db = dbias;
    float ad = *(const float *)alpha_data, bd = *(const float *)beta_data;
    float ap = *(const float *)alpha_param, bp = *(const float *)beta_param;
    size_t cb = (size_t)s.C * 4;
    emu_dev_span(x, s.n * 4, "x"), emu_dev_span(dy, s.n * 4, "dy"), emu_dev_span(dx, s.n * 4, "dx");
    emu_dev_span(g, cb, "bnScale"), emu_dev_span(dg, cb, "dBnScaleResult"), emu_dev_span(db, cb, "dBnBiasResult");
    if (sm) emu_dev_span(sm, cb, "saved mean"), emu_dev_span(si, cb, "saved inverse variance");
    if (overlaps(dx, s.n * 4, dy, s.n * 4) || overlaps(dx, s.n * 4, x, s.n * 4)) fail(fn, "dx overlaps dy or x");
    int dbl = use_double();
    EMU_DEV_OPEN(x, dy, dx, g, dg, db, sm, si);
#pragma omp parallel for schedule(static)
    for (int c = 0; c < s.C; c++) {
        double m, inv;
        if (sm) {
            m = sm[c], inv = si[c];
        } else {
            double v;
            stats(x, s, c, &m, &v, dbl);
            inv = 1.0 / sqrt(v + eps);
        }
        double sg = 0.0, sgx = 0.0, M = (double)s.N * s.HW;
        for (int n = 0; n < s.N; n++)
            for (size_t i = 0; i < s.HW; i++) {
                double gi = AT(dy, s, n, c, i), xh = (AT(x, s, n, c, i) - m) * inv;
                sg = dbl ? sg + gi : (float)sg + (float)gi;
                sgx = dbl ? sgx + gi * xh : fmaf((float)gi, (float)xh, (float)sgx);
            }
        for (int n = 0; n < s.N; n++)
            for (size_t i = 0; i < s.HW; i++) {
                double xh = (AT(x, s, n, c, i) - m) * inv;
                double v1 = g[c] * inv * (AT(dy, s, n, c, i) - sg / M - xh * sgx / M);
                float *o = &AT(dx, s, n, c, i);
                *o = blend(ad, (float)v1, bd, o);
            }
        dg[c] = blend(ap, (float)sgx, bp, &dg[c]);
        db[c] = blend(ap, (float)sg, bp, &db[c]);
    }
    emu_dev_close();
    return CUDNN_STATUS_SUCCESS;
}
