/* 2-D convolution on the GPU through cuDNN (see nn/cuda_ops.h; the CPU twin is
 * nn/conv2d.c). Activations NCHW, weights [OC, C, KH, KW] (PyTorch's layout,
 * which is cuDNN's NCHW filter format), cross-correlation, groups 1, dilation 1.
 *
 * Gradients: dw and db ACCUMULATE (+=, cuDNN beta = 1); dinp is OVERWRITTEN.
 *
 * A plan per shape (N, C, H, W, OC, KH, KW, stride, pad) holds the tensor,
 * filter and convolution descriptors and the algorithm of each direction,
 * chosen ONCE. The candidates are ranked by cudnnFind* (timed on the device) or,
 * with nn_cuda_set_conv_search(NN_CONV_HEURISTIC), by cuDNN's heuristic
 * (cudnnGetConvolution*Algorithm_v7, no timing); the first is taken that
 * succeeded, is deterministic when nn_cuda_set_deterministic is on, is not FFT
 * or Winograd unless nn_cuda_set_fft_winograd is on, and needs at most the
 * workspace limit as cuDNN's workspace query confirms. The heuristic has not run
 * its candidates, so one that cuDNN refuses at its first call is passed over for
 * the next (see refused). Algorithms run under CUDNN_FMA_MATH (strict fp32)
 * unless TF32 is allowed, where they keep the math type the ranking reported
 * (see pick). Each direction has its own convolution
 * descriptor so the three can use different math types.
 * Plans live in the calling thread's context; the workspace is the context's,
 * grown to the largest a chosen algorithm needs.
 *
 * Shape letters: N batch, C input channels, H,W input, OC output channels,
 * KH,KW kernel, OH,OW output.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "nn/ctx_cuda.h"
#include "nn/cuda_ops.h"

#ifdef HAVE_CUDNN

enum { DIR_FWD, DIR_BWD_DATA, DIR_BWD_FILTER, DIR_N };

typedef struct {
    int key[9]; /* N, C, H, W, OC, KH, KW, stride, pad */
    int generation;
    cudnnTensorDescriptor_t x, y, bias;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv[DIR_N];
    int chosen[DIR_N];
    int skip[DIR_N]; /* qualifying results cuDNN refused at their first call (heuristic) */
    int ran[DIR_N];  /* the chosen algorithm has run once */
    int algo[DIR_N]; /* the chosen cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    size_t ws[DIR_N];
} ConvPlan;

static thread_local ConvPlan **t_plans = NULL;
static thread_local int t_nplans = 0, t_capplans = 0;

static void plan_destroy(ConvPlan *p) {
    cudnnCheck(cudnnDestroyTensorDescriptor(p->x));
    cudnnCheck(cudnnDestroyTensorDescriptor(p->y));
    cudnnCheck(cudnnDestroyTensorDescriptor(p->bias));
    cudnnCheck(cudnnDestroyFilterDescriptor(p->w));
    for (int d = 0; d < DIR_N; d++) cudnnCheck(cudnnDestroyConvolutionDescriptor(p->conv[d]));
    free(p);
}

static void release_plans(void) {
    for (int i = 0; i < t_nplans; i++) plan_destroy(t_plans[i]);
    free(t_plans);
    t_plans = NULL;
    t_nplans = t_capplans = 0;
}

static void shape_key(int key[9], const Conv2dShape *s) {
    key[0] = s->N, key[1] = s->C, key[2] = s->H, key[3] = s->W, key[4] = s->OC;
    key[5] = s->KH, key[6] = s->KW, key[7] = s->stride, key[8] = s->pad;
}

static ConvPlan *get_plan(NnCudaCtx *ctx, const Conv2dShape *s) {
    int key[9];
    shape_key(key, s);
    NnCudaSettings st = nn_cuda_settings();
    for (int i = 0; i < t_nplans; i++) {
        ConvPlan *p = t_plans[i];
        if (memcmp(p->key, key, sizeof key) != 0) continue;
        if (p->generation != st.generation) { /* settings changed: choose the algorithms again */
            for (int d = 0; d < DIR_N; d++) {
                p->chosen[d] = p->skip[d] = p->ran[d] = 0;
                cudnnCheck(cudnnSetConvolutionMathType(p->conv[d], st.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
            }
            p->generation = st.generation;
        }
        return p;
    }
    (void)ctx;
    if (s->N < 1 || s->C < 1 || s->H < 1 || s->W < 1 || s->OC < 1 || s->KH < 1 || s->KW < 1 || s->stride < 1 ||
        s->pad < 0 || s->OH < 1 || s->OW < 1) {
        fprintf(stderr, "error: conv2d CUDA: bad shape N=%d C=%d H=%d W=%d OC=%d K=%dx%d stride %d pad %d\n", s->N,
                s->C, s->H, s->W, s->OC, s->KH, s->KW, s->stride, s->pad);
        exit(1);
    }
    ConvPlan *p = (ConvPlan *)callocCheck(1, sizeof(ConvPlan));
    memcpy(p->key, key, sizeof key);
    p->generation = st.generation;
    cudnnCheck(cudnnCreateTensorDescriptor(&p->x));
    cudnnCheck(cudnnCreateTensorDescriptor(&p->y));
    cudnnCheck(cudnnCreateTensorDescriptor(&p->bias));
    cudnnCheck(cudnnCreateFilterDescriptor(&p->w));
    cudnnCheck(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->N, s->C, s->H, s->W));
    cudnnCheck(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->N, s->OC, s->OH, s->OW));
    cudnnCheck(cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, s->OC, 1, 1));
    cudnnCheck(cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s->OC, s->C, s->KH, s->KW));
    for (int d = 0; d < DIR_N; d++) {
        cudnnCheck(cudnnCreateConvolutionDescriptor(&p->conv[d]));
        cudnnCheck(cudnnSetConvolution2dDescriptor(p->conv[d], s->pad, s->pad, s->stride, s->stride, 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        cudnnCheck(cudnnSetConvolutionMathType(p->conv[d], st.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    }
    /* the shape must agree with cuDNN's own output size */
    int n, c, h, w;
    cudnnCheck(cudnnGetConvolution2dForwardOutputDim(p->conv[DIR_FWD], p->x, p->w, &n, &c, &h, &w));
    if (n != s->N || c != s->OC || h != s->OH || w != s->OW) {
        fprintf(stderr, "error: conv2d CUDA: shape says output %dx%dx%dx%d, cuDNN computes %dx%dx%dx%d\n", s->N,
                s->OC, s->OH, s->OW, n, c, h, w);
        exit(1);
    }
    if (t_nplans == t_capplans) {
        t_capplans = t_capplans ? 2 * t_capplans : 16;
        t_plans = (ConvPlan **)reallocCheck(t_plans, (size_t)t_capplans * sizeof(ConvPlan *));
    }
    t_plans[t_nplans++] = p;
    nn_cuda_on_release(release_plans);
    return p;
}

/* FFT and Winograd: other rounding, possibly less precise (nn/cuda_ops.h) */
static bool transform_algo(cudnnConvolutionFwdAlgo_t a) {
    return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
           a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
static bool transform_algo(cudnnConvolutionBwdDataAlgo_t a) {
    return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
           a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
static bool transform_algo(cudnnConvolutionBwdFilterAlgo_t a) {
    return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
           a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

/* the workspace an algorithm needs under the descriptor's current math type */
static cudnnStatus_t ws_size(NnCudaCtx *ctx, const ConvPlan *p, cudnnConvolutionFwdAlgo_t a, size_t *bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(ctx->cudnn, p->x, p->w, p->conv[DIR_FWD], p->y, a, bytes);
}
static cudnnStatus_t ws_size(NnCudaCtx *ctx, const ConvPlan *p, cudnnConvolutionBwdDataAlgo_t a, size_t *bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(ctx->cudnn, p->w, p->y, p->conv[DIR_BWD_DATA], p->x, a,
                                                        bytes);
}
static cudnnStatus_t ws_size(NnCudaCtx *ctx, const ConvPlan *p, cudnnConvolutionBwdFilterAlgo_t a, size_t *bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx->cudnn, p->x, p->y, p->conv[DIR_BWD_FILTER], p->w, a,
                                                          bytes);
}

/* Index of the ranked result to use, its workspace in *ws; -1 when none
 * qualifies. Results come best first (Find: by time; the heuristic: by
 * expected performance). A result qualifies when it succeeded, is
 * deterministic (when asked), is not FFT/Winograd (unless allowed), and the
 * descriptor's final math type runs it within the workspace limit: cuDNN's
 * workspace query under that math type must succeed, and the workspace is the
 * larger of its answer and the ranking's.
 * Strict fp32 (descriptor CUDNN_FMA_MATH): Find also tries CUDNN_DEFAULT_MATH,
 * which on Ampere and later may mean TF32 tensor cores; such a result runs
 * under CUDNN_FMA_MATH as another kernel (or not at all) and its time is not
 * the fp32 one, so results labelled CUDNN_FMA_MATH come first and the others
 * only when no FMA-labelled one qualifies; tensor-op-only results never. */
enum { DET_ANY, DET_ONLY, NONDET_ONLY };
template <typename Perf>
static int pick(NnCudaCtx *ctx, ConvPlan *p, int d, const Perf *perf, int got, const NnCudaSettings *st, int det,
                int *skip, size_t *ws) {
    for (int pass = 0; pass < (st->tf32 ? 1 : 2); pass++)
        for (int i = 0; i < got; i++) {
            if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
            if (det != DET_ANY && (perf[i].determinism == CUDNN_DETERMINISTIC) != (det == DET_ONLY)) continue;
            if (!st->fft_winograd && transform_algo(perf[i].algo)) continue;
            cudnnMathType_t m = perf[i].mathType;
            if (!st->tf32) {
                if (m != (pass == 0 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH)) continue;
                m = CUDNN_FMA_MATH;
            }
            cudnnCheck(cudnnSetConvolutionMathType(p->conv[d], m));
            size_t need = 0;
            if (ws_size(ctx, p, perf[i].algo, &need) != CUDNN_STATUS_SUCCESS) continue;
            if (need < perf[i].memory) need = perf[i].memory;
            if (need > st->workspace_limit) continue;
            if ((*skip)-- > 0) continue; /* refused before */
            *ws = need;
            return i;
        }
    return -1;
}

static const char *const dir_names[DIR_N] = {"forward", "backward-data", "backward-filter"};

/* the first qualifying result after the p->skip[d] that cuDNN refused; when
 * determinism is asked for and no deterministic one is left, the best ranked
 * other one, with a warning */
template <typename Perf>
static int pick_any(NnCudaCtx *ctx, ConvPlan *p, int d, const Perf *perf, int got, const NnCudaSettings *st,
                    size_t *ws) {
    int skip = p->skip[d];
    int i = pick(ctx, p, d, perf, got, st, st->deterministic ? DET_ONLY : DET_ANY, &skip, ws);
    if (i < 0 && st->deterministic) {
        i = pick(ctx, p, d, perf, got, st, NONDET_ONLY, &skip, ws);
        if (i >= 0)
            fprintf(stderr,
                    "warning: conv2d CUDA: no deterministic cuDNN %s algorithm for N=%d C=%d %dx%d OC=%d K=%d "
                    "stride %d pad %d; using a non-deterministic one (runs may differ in the last bits)\n",
                    dir_names[d], p->key[0], p->key[1], p->key[2], p->key[3], p->key[4], p->key[5], p->key[7],
                    p->key[8]);
    }
    return i;
}

static void no_algo(int d, const ConvPlan *p) {
    fprintf(stderr,
            "error: conv2d CUDA: cuDNN offers no %s algorithm for N=%d C=%d H=%d W=%d OC=%d K=%dx%d stride %d pad %d "
            "within the workspace limit\n",
            dir_names[d], p->key[0], p->key[1], p->key[2], p->key[3], p->key[4], p->key[5], p->key[6], p->key[7],
            p->key[8]);
    exit(1);
}

/* Per direction: its algorithm and result types, cuDNN's maximum result count,
 * the timed search (Find) and the heuristic ranking (_v7, same arguments). */
struct FwdDir {
    typedef cudnnConvolutionFwdAlgo_t Algo;
    typedef cudnnConvolutionFwdAlgoPerf_t Perf;
    enum { D = DIR_FWD };
    static cudnnStatus_t max_count(cudnnHandle_t h, int *n) { return cudnnGetConvolutionForwardAlgorithmMaxCount(h, n); }
    static cudnnStatus_t rank(cudnnHandle_t h, const ConvPlan *p, bool timed, int cap, int *got, Perf *r) {
        return timed ? cudnnFindConvolutionForwardAlgorithm(h, p->x, p->w, p->conv[D], p->y, cap, got, r)
                     : cudnnGetConvolutionForwardAlgorithm_v7(h, p->x, p->w, p->conv[D], p->y, cap, got, r);
    }
};
struct BwdDataDir {
    typedef cudnnConvolutionBwdDataAlgo_t Algo;
    typedef cudnnConvolutionBwdDataAlgoPerf_t Perf;
    enum { D = DIR_BWD_DATA };
    static cudnnStatus_t max_count(cudnnHandle_t h, int *n) {
        return cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, n);
    }
    static cudnnStatus_t rank(cudnnHandle_t h, const ConvPlan *p, bool timed, int cap, int *got, Perf *r) {
        return timed ? cudnnFindConvolutionBackwardDataAlgorithm(h, p->w, p->y, p->conv[D], p->x, cap, got, r)
                     : cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p->w, p->y, p->conv[D], p->x, cap, got, r);
    }
};
struct BwdFilterDir {
    typedef cudnnConvolutionBwdFilterAlgo_t Algo;
    typedef cudnnConvolutionBwdFilterAlgoPerf_t Perf;
    enum { D = DIR_BWD_FILTER };
    static cudnnStatus_t max_count(cudnnHandle_t h, int *n) {
        return cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, n);
    }
    static cudnnStatus_t rank(cudnnHandle_t h, const ConvPlan *p, bool timed, int cap, int *got, Perf *r) {
        return timed ? cudnnFindConvolutionBackwardFilterAlgorithm(h, p->x, p->y, p->conv[D], p->w, cap, got, r)
                     : cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p->x, p->y, p->conv[D], p->w, cap, got, r);
    }
};

/* The ranking (Find: by measured time; heuristic: by cuDNN's expected
 * performance, no timing, so every process makes the same choice) runs under
 * the descriptor's math type (strict fp32: CUDNN_FMA_MATH; TF32 allowed:
 * CUDNN_DEFAULT_MATH); pick leaves the chosen result's math type set on the
 * descriptor. Either may return more results than the enum has algorithms
 * (math-type variants): the array is sized by cuDNN's own maximum. */
template <typename Dir>
static void choose(NnCudaCtx *ctx, ConvPlan *p) {
    const int d = Dir::D;
    if (p->chosen[d]) return;
    NnCudaSettings st = nn_cuda_settings();
    int cap = 0, got = 0;
    cudnnCheck(Dir::max_count(ctx->cudnn, &cap));
    if (cap < 1) cap = 1;
    std::vector<typename Dir::Perf> perf(cap);
    cudnnCheck(Dir::rank(ctx->cudnn, p, st.conv_search != NN_CONV_HEURISTIC, cap, &got, perf.data()));
    int i = pick_any(ctx, p, d, perf.data(), got, &st, &p->ws[d]);
    if (i < 0) no_algo(d, p);
    p->algo[d] = (int)perf[i].algo;
    if (getenv("GCX_CUDNN_VERBOSE"))
        fprintf(stderr, "conv2d CUDA plan N=%d C=%d %dx%d OC=%d K=%d s=%d p=%d %s (%s%s%s): algo %d, workspace %zu\n",
                p->key[0], p->key[1], p->key[2], p->key[3], p->key[4], p->key[5], p->key[7], p->key[8], dir_names[d],
                st.conv_search == NN_CONV_HEURISTIC ? "heuristic" : "find",
                st.deterministic ? "" : ", non-deterministic", st.fft_winograd ? ", FFT/Winograd" : "", p->algo[d],
                p->ws[d]);
    p->chosen[d] = 1;
}

/* After a direction's call: false when it ran. The heuristic ranks algorithms
 * without running them (Find has run every one it reports), so the first call
 * of a heuristic choice may be refused (CUDNN_STATUS_NOT_SUPPORTED*, returned
 * before any work, so nothing was written): then the next qualifying result is
 * chosen and the call repeated (true), as PyTorch does. Any other error, or a
 * refusal of an algorithm that has run or that Find chose, ends the process. */
static bool refused(ConvPlan *p, int d, cudnnStatus_t e) {
    if (e == CUDNN_STATUS_SUCCESS) {
        p->ran[d] = 1;
        return false;
    }
    if (p->ran[d] || nn_cuda_settings().conv_search != NN_CONV_HEURISTIC ||
        (int)e / 1000 * 1000 != (int)CUDNN_STATUS_NOT_SUPPORTED)
        cudnnCheck(e);
    if (getenv("GCX_CUDNN_VERBOSE"))
        fprintf(stderr, "conv2d CUDA: cuDNN refused %s algorithm %d at its first call (%s); taking the next\n",
                dir_names[d], p->algo[d], cudnnGetErrorString(e));
    p->skip[d]++;
    p->chosen[d] = 0;
    return true;
}

extern "C" int nn_cuda_conv_algos(const Conv2dShape *s, int algo[3]) {
    int key[9];
    shape_key(key, s);
    for (int i = 0; i < t_nplans; i++) {
        const ConvPlan *p = t_plans[i];
        if (memcmp(p->key, key, sizeof key) != 0) continue;
        int now = p->generation == nn_cuda_settings().generation; /* else all to be chosen again */
        for (int d = 0; d < DIR_N; d++) algo[d] = now && p->chosen[d] ? p->algo[d] : -1;
        return 0;
    }
    algo[0] = algo[1] = algo[2] = -1;
    return -1;
}

/* one direction's convolution: call(algorithm, workspace, its bytes) with the
 * plan's choice, chosen again while cuDNN refuses it (see refused) */
template <typename Dir, typename Call>
static void run(NnCudaCtx *ctx, ConvPlan *p, Call call) {
    const int d = Dir::D;
    cudnnStatus_t e;
    do {
        choose<Dir>(ctx, p);
        void *ws = p->ws[d] ? nn_cuda_workspace(ctx, p->ws[d]) : NULL;
        e = call((typename Dir::Algo)p->algo[d], ws, p->ws[d]);
    } while (refused(p, d, e));
}

extern "C" void conv2d_forward_cuda(float *out /*N,OC,OH,OW*/, float *work /*unused, NULL*/,
                                    const float *inp /*N,C,H,W*/, const float *w /*OC,C,KH,KW*/,
                                    const float *b /*OC or NULL*/, const Conv2dShape *s) {
    (void)work;
    NnCudaCtx *ctx = nn_cuda_ctx();
    ConvPlan *p = get_plan(ctx, s);
    const float one = 1.0f, zero = 0.0f;
    /* out = conv(inp, w) */
    run<FwdDir>(ctx, p, [&](cudnnConvolutionFwdAlgo_t a, void *ws, size_t n) {
        return cudnnConvolutionForward(ctx->cudnn, &one, p->x, inp, p->w, w, p->conv[DIR_FWD], a, ws, n, &zero, p->y,
                                       out);
    });
    /* out += b (broadcast over N, OH, OW) */
    if (b) cudnnCheck(cudnnAddTensor(ctx->cudnn, &one, p->bias, b, &one, p->y, out));
}

extern "C" void conv2d_backward_cuda(float *dinp /*N,C,H,W, overwritten; NULL = skip*/,
                                     float *dw /*OC,C,KH,KW, +=*/, float *db /*OC, +=, NULL = skip*/,
                                     float *work /*unused, NULL*/, const float *dout /*N,OC,OH,OW*/,
                                     const float *inp /*N,C,H,W*/, const float *w /*OC,C,KH,KW*/,
                                     const Conv2dShape *s) {
    (void)work;
    NnCudaCtx *ctx = nn_cuda_ctx();
    ConvPlan *p = get_plan(ctx, s);
    const float one = 1.0f, zero = 0.0f;
    /* forward: out[n,o,y,x] = sum_{c,i,j} inp[n,c,y*s-p+i,x*s-p+j] * w[o,c,i,j] + b[o] */
    if (dinp) /* dinp[n,c,.,.] = sum_{o,i,j} dout[n,o,.,.] * w[o,c,i,j] (transposed convolution), overwritten */
        run<BwdDataDir>(ctx, p, [&](cudnnConvolutionBwdDataAlgo_t a, void *ws, size_t n) {
            return cudnnConvolutionBackwardData(ctx->cudnn, &one, p->w, w, p->y, dout, p->conv[DIR_BWD_DATA], a, ws,
                                                n, &zero, p->x, dinp);
        });
    /* dw[o,c,i,j] += sum_{n,y,x} dout[n,o,y,x] * inp[n,c,y*s-p+i,x*s-p+j] */
    run<BwdFilterDir>(ctx, p, [&](cudnnConvolutionBwdFilterAlgo_t a, void *ws, size_t n) {
        return cudnnConvolutionBackwardFilter(ctx->cudnn, &one, p->x, inp, p->y, dout, p->conv[DIR_BWD_FILTER], a, ws,
                                              n, &one, p->w, dw);
    });
    /* db[o] += sum_{n,y,x} dout[n,o,y,x] */
    if (db) cudnnCheck(cudnnConvolutionBackwardBias(ctx->cudnn, &one, p->y, dout, &one, p->bias, db));
}

#else /* no cuDNN: the ops exist but refuse to run */

static void no_cudnn(void) {
    fprintf(stderr, "error: conv2d CUDA: this build has no cuDNN (rebuild with cuDNN, or use the CPU model)\n");
    exit(1);
}
extern "C" void conv2d_forward_cuda(float *out, float *work, const float *inp, const float *w, const float *b,
                                    const Conv2dShape *s) {
    (void)out, (void)work, (void)inp, (void)w, (void)b, (void)s;
    no_cudnn();
}
extern "C" void conv2d_backward_cuda(float *dinp, float *dw, float *db, float *work, const float *dout,
                                     const float *inp, const float *w, const Conv2dShape *s) {
    (void)dinp, (void)dw, (void)db, (void)work, (void)dout, (void)inp, (void)w, (void)s;
    no_cudnn();
}
extern "C" int nn_cuda_conv_algos(const Conv2dShape *s, int algo[3]) {
    (void)s;
    algo[0] = algo[1] = algo[2] = -1;
    return -1;
}

#endif
