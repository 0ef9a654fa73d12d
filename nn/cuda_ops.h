/* CUDA twins of the image-model ops (nn/conv2d.h, batchnorm.h, activation.h,
 * pool.h, linear.h, softmax_ce.h, layout.h) and of the language-model ops
 * (nn/embedding.h, dropout.h, lstm.h), fp32.
 *
 * Each op keeps the CPU op's name with a `_cuda` suffix, its argument order and
 * its accumulate/overwrite contract; every float/int pointer is a DEVICE pointer
 * unless its comment says "host". Shared constants (BN eps and momentum) come
 * from nn/constants.h, as on the CPU.
 *
 * Layout. cuDNN's natural layout is NCHW, so the GPU image ops and the GPU
 * models (nn/resnet_cuda.h, nn/lenet_cuda.h) keep activations in NCHW
 * (element (n, c, h, w) at ((n*C + c)*H + h)*W + w), where the CPU ops use CNHW.
 * Where the CPU op's sizes cannot describe NCHW the CUDA op takes the finer
 * ones in the same place: batch norm takes (N, C, HW) where the CPU takes
 * (C, M = N*HW, ld). The CPU's padded channel strides (ld, and ldi/ldo of a
 * Conv2dShape) have no NCHW counterpart: GPU tensors are dense and those fields
 * are ignored; global average pooling drops its ld argument. Ops that do not
 * care about the layout (elementwise, max pooling over planes, linear, softmax)
 * take exactly the CPU arguments.
 * swap01_cuda converts between the layouts (NCHW <-> CNHW) like swap01.
 * The parity tests (tests/cuda/test_nn_cuda*.c) run the CPU op in CNHW and
 * compare after converting.
 *
 * Libraries: convolutions and batch normalization go through cuDNN (legacy
 * API), GEMMs through cuBLAS, the rest are plain CUDA kernels. Everything runs
 * on the calling thread's default stream (the build's per-thread default streams,
 * docs/GPU.md "Streams"), so a thread's ops are ordered with each other and with
 * its plain cudaMemcpy calls; a result is ready for the host after any
 * synchronizing copy.
 *
 * Context. Each host thread has its own cuDNN and cuBLAS handles, convolution
 * and batch-norm plans (descriptors + chosen algorithms, made ONCE per shape)
 * and workspace, created on first use on the device current at that time
 * (cudaSetDevice first when there are several). nn_cuda_release frees the
 * calling thread's context.
 *
 * Numerics. By default fp32 is strict (no TF32: cuDNN CUDNN_FMA_MATH, cuBLAS
 * default math) and cuDNN algorithms are chosen among the deterministic ones
 * (the best-ranked deterministic one that fits the workspace limit), so
 * repeated steps give identical results. Find is timed, so another process may
 * choose another algorithm (other rounding); nn_cuda_set_conv_search
 * (NN_CONV_HEURISTIC) ranks by cuDNN's heuristic instead, the same choice in
 * every process on the same GPU and cuDNN version. The FFT and Winograd convolution
 * algorithms are left out: they round differently from a direct sum and can
 * be less precise (frameworks skip Winograd-nonfused for that reason), which
 * the parity tests' tolerances do not allow for. nn_cuda_set_tf32(1) allows
 * TF32 tensor cores; nn_cuda_set_deterministic(0) lets the best-ranked algorithm
 * win; nn_cuda_set_fft_winograd(1) admits FFT and Winograd. The settings apply
 * to plans made afterwards (existing plans are re-made).
 *
 * Shape letters: N batch, C channels, H,W spatial, HW = H*W, OC output
 * channels, P planes, V classes, IN/OUT features; language-model ops: T time
 * steps, N batch (tokens for the embedding), V vocabulary, E embedding size,
 * In input features, H hidden units, n elements.
 */
#ifndef GC_NN_CUDA_OPS_H
#define GC_NN_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "nn/conv2d.h" /* Conv2dShape */

/* ------------------------------------------------------------- context ---- */

/* number of usable CUDA devices; 0 when none (or the driver fails) */
int nn_cuda_device_count(void);
/* NULL when the GPU ops can run here; else a sentence saying why not
 * (no device, built without cuDNN, ...) */
const char *nn_cuda_unavailable(void);
void nn_cuda_set_tf32(int enable);
void nn_cuda_set_deterministic(int enable);
void nn_cuda_set_fft_winograd(int enable);
/* how convolution algorithms are ranked before the filters above pick one */
typedef enum {
    NN_CONV_FIND = 0,     /* cudnnFind*: each algorithm timed on the device (default) */
    NN_CONV_HEURISTIC = 1 /* cudnnGetConvolution*Algorithm_v7: cuDNN's heuristic, no timing,
                             so reproducible across processes (like PyTorch's cudnn.benchmark
                             off); a choice cuDNN refuses at its first call gives way to the next */
} NnConvSearch;
void nn_cuda_set_conv_search(NnConvSearch s);
/* workspace limit for cuDNN algorithm choice, bytes (default 1 GiB) */
void nn_cuda_set_workspace_limit(size_t bytes);
/* free the calling thread's handles, plans and scratch (the next op re-creates them) */
void nn_cuda_release(void);

/* ---------------------------------------------------------- convolution ---- */
/* conv2d_shape (CPU, nn/conv2d.h) makes the shape; only its sizes are used.
 * work: unused (pass NULL): the cuDNN workspace belongs to the cached plan.
 * Gradients: dw and db ACCUMULATE (+=); dinp is OVERWRITTEN. */
void conv2d_forward_cuda(float *out /*N,OC,OH,OW*/, float *work /*unused, NULL*/, const float *inp /*N,C,H,W*/,
                         const float *w /*OC,C,KH,KW*/, const float *b /*OC or NULL*/, const Conv2dShape *s);

void conv2d_backward_cuda(float *dinp /*N,C,H,W, overwritten; NULL = skip*/, float *dw /*OC,C,KH,KW, +=*/,
                          float *db /*OC, +=, NULL = skip*/, float *work /*unused, NULL*/,
                          const float *dout /*N,OC,OH,OW*/, const float *inp /*N,C,H,W*/,
                          const float *w /*OC,C,KH,KW*/, const Conv2dShape *s);
/* the cuDNN algorithms (cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t) the calling
 * thread's plan for this shape uses: forward, backward-data, backward-filter, -1
 * for a direction not chosen yet under the current settings; returns 0, or -1
 * (all -1) when the thread has no plan for the shape */
int nn_cuda_conv_algos(const Conv2dShape *s, int algo[3]);

/* ------------------------------------------------------- batch norm ---- */
/* As nn/batchnorm.h over NCHW: y = (x - mean)/sqrt(var + eps)*gamma + beta [+ res] [ReLU],
 * batch statistics over N*HW values per channel, running statistics updated with
 * momentum GC_BN_MOMENTUM and the unbiased variance. out may alias inp.
 * dgamma, dbeta ACCUMULATE; dinp and dres are OVERWRITTEN; dinp may alias dout,
 * dres may alias dout (not dinp). */
void batchnorm_forward_train_cuda(float *out /*N,C,HW*/, float *mean /*C, saved for backward*/,
                                  float *rstd /*C, saved: 1/sqrt(var + eps)*/, float *running_mean /*C, updated*/,
                                  float *running_var /*C, updated*/, const float *inp /*N,C,HW*/,
                                  const float *gamma /*C*/, const float *beta /*C*/,
                                  const float *res /*N,C,HW or NULL*/, int relu, int N, int C, int HW);

void batchnorm_forward_eval_cuda(float *out /*N,C,HW*/, const float *inp /*N,C,HW*/, const float *gamma /*C*/,
                                 const float *beta /*C*/, const float *running_mean /*C*/,
                                 const float *running_var /*C*/, const float *res /*N,C,HW or NULL*/, int relu,
                                 int N, int C, int HW);

void batchnorm_backward_cuda(float *dinp /*N,C,HW, overwritten*/, float *dres /*N,C,HW, overwritten; NULL = skip*/,
                             float *dgamma /*C, +=*/, float *dbeta /*C, +=*/, const float *dout /*N,C,HW*/,
                             const float *out /*N,C,HW or NULL (no ReLU)*/, const float *inp /*N,C,HW*/,
                             const float *mean /*C*/, const float *rstd /*C*/, const float *gamma /*C*/, int N,
                             int C, int HW);

/* ------------------------------------------------- elementwise, layout ---- */
void relu_forward_cuda(float *out /*n*/, const float *inp /*n*/, size_t n);
void relu_backward_cuda(float *dinp /*n*/, const float *dout /*n*/, const float *out /*n*/, size_t n);
void add_forward_cuda(float *out /*n*/, const float *a /*n*/, const float *b /*n*/, size_t n);
void add_inplace_cuda(float *acc /*n*/, const float *x /*n*/, size_t n);
/* out[b, a, s] = inp[a, b, s] (NCHW <-> CNHW); out must not alias inp */
void swap01_cuda(float *out /*B,A,S*/, const float *inp /*A,B,S*/, int A, int B, int S);

/* ------------------------------------------------------------- pooling ---- */
/* out[n, c] = mean over HW of inp[n, c, :] (NCHW) */
void avgpool_global_forward_cuda(float *out /*N,C*/, const float *inp /*N,C,HW*/, int N, int C, int HW);
void avgpool_global_backward_cuda(float *dinp /*N,C,HW, overwritten*/, const float *dout /*N,C*/, int N, int C,
                                  int HW);
/* max pooling over P planes of H x W (torch.nn.MaxPool2d, ties to the first, NaN propagates);
 * argmax is the index within the plane; maxpool2d_out_size (nn/pool.h) gives OH, OW */
void maxpool2d_forward_cuda(float *out /*P,OH,OW*/, int *argmax /*P,OH,OW*/, const float *inp /*P,H,W*/, int P,
                            int H, int W, int K, int stride, int pad);
void maxpool2d_backward_cuda(float *dinp /*P,H,W, overwritten*/, const float *dout /*P,OH,OW*/,
                             const int *argmax /*P,OH,OW*/, int P, int H, int W, int K, int stride, int pad);

/* ------------------------------------------------- ResNet option A shortcut ---- */
/* (the CPU twins are static in nn/resnet.c) He et al. 2016, section 4.2, option A:
 * identity with stride subsampling and zero-padded channels, lo = (Cout - Cin)/2:
 * out[n, c, oh, ow] = x[n, c - lo, oh*stride, ow*stride] for lo <= c < lo + Cin, else 0 */
void resnet_shortcut_pad_forward_cuda(float *out /*N,Cout,OH,OW*/, const float *x /*N,Cin,H,W*/, int N, int Cin,
                                      int Cout, int H, int W, int OH, int OW, int stride);
/* the adjoint, ACCUMULATED: dx[n, ci, oh*stride, ow*stride] += dout[n, ci + lo, oh, ow] */
void resnet_shortcut_pad_backward_cuda(float *dx /*N,Cin,H,W, +=*/, const float *dout /*N,Cout,OH,OW*/, int N,
                                       int Cin, int Cout, int H, int W, int OH, int OW, int stride);

/* -------------------------------------------------------------- linear ---- */
/* out = inp @ w^T + b through cuBLAS. dw, db ACCUMULATE; dinp is OVERWRITTEN. */
void linear_forward_cuda(float *out /*N,OUT*/, const float *inp /*N,IN*/, const float *w /*OUT,IN*/,
                         const float *b /*OUT or NULL*/, int N, int IN, int OUT);
void linear_backward_cuda(float *dinp /*N,IN, overwritten; NULL = skip*/, float *dw /*OUT,IN, +=*/,
                          float *db /*OUT, +=, NULL = skip*/, const float *dout /*N,OUT*/,
                          const float *inp /*N,IN*/, const float *w /*OUT,IN*/, int N, int IN, int OUT);

/* -------------------------------------------------- softmax cross-entropy ---- */
/* Returns the MEAN loss (host float; synchronizes) and stores the number of rows
 * whose argmax equals the target in *correct (HOST pointer, may be NULL).
 * A target outside [0, V) prints the row and value and exits(1), as the CPU op. */
float softmax_ce_forward_cuda(float *probs /*N,V*/, long *correct /*host*/, const float *logits /*N,V*/,
                              const int *targets /*N*/, int N, int V);
/* dlogits = (probs - onehot(target)) * scale, OVERWRITTEN */
void softmax_ce_backward_cuda(float *dlogits /*N,V*/, const float *probs /*N,V*/, const int *targets /*N*/,
                              float scale, int N, int V);

/* ------------------------------------------------- language-model ops ---- */
/* nn/lstm_cuda.cu. Embedding (nn/embedding.h): out[n] = w[tokens[n]]; dw
 * ACCUMULATES (a scatter-add, deterministic and in the CPU's order: bit-identical
 * to the CPU). Both check every token first (one small synchronizing copy) and
 * return -GC_ERR_PARAM without writing when one lies outside [0, V); 0 on success. */
int embedding_forward_cuda(float *out /*N,E*/, const int *tokens /*N*/, const float *w /*V,E*/, int N, int V, int E);
int embedding_backward_cuda(float *dw /*V,E, +=*/, const float *dout /*N,E*/, const int *tokens /*N*/, int N, int V,
                            int E);

/* Inverted dropout (nn/dropout.h) with the CPU's masks bit for bit (the same
 * counter-based keep_i from s = dropout_seed(seed, step, site), computed on the
 * device). OVERWRITTEN, in place allowed; p outside [0, 1) returns -GC_ERR_PARAM. */
int dropout_forward_cuda(float *out /*n*/, const float *inp /*n*/, float p, uint64_t s, size_t n);
int dropout_backward_cuda(float *dinp /*n*/, const float *dout /*n*/, float p, uint64_t s, size_t n);

/* One LSTM layer, torch.nn.LSTM, gates i, f, g, o (nn/lstm.h: equations, the
 * T+1 state slots, truncated BPTT). hs[0], cs[0] are the initial state (inputs).
 * dw_ih, dw_hh, db_ih, db_hh ACCUMULATE; dx, dh0, dc0 are OVERWRITTEN. */
void lstm_forward_cuda(float *hs /*T+1,N,H*/, float *cs /*T+1,N,H*/,
                       float *gates /*T,N,4H: i,f,g,o after nonlinearity*/, float *tanhc /*T,N,H: tanh(c_t)*/,
                       const float *x /*T,N,In*/, const float *w_ih /*4H,In*/, const float *w_hh /*4H,H*/,
                       const float *b_ih /*4H*/, const float *b_hh /*4H*/, int T, int N, int In, int H);
void lstm_backward_cuda(float *dx /*T,N,In, overwritten; NULL = skip*/, float *dh0 /*N,H, overwritten; NULL = skip*/,
                        float *dc0 /*N,H, overwritten; NULL = skip*/, float *dw_ih /*4H,In, +=*/,
                        float *dw_hh /*4H,H, +=*/, float *db_ih /*4H, +=*/, float *db_hh /*4H, +=*/,
                        float *dgates /*T,N,4H scratch*/, float *dstate /*2,N,H scratch*/,
                        const float *dhs /*T,N,H*/, const float *hs /*T+1,N,H*/, const float *cs /*T+1,N,H*/,
                        const float *gates /*T,N,4H*/, const float *tanhc /*T,N,H*/, const float *x /*T,N,In*/,
                        const float *w_ih /*4H,In*/, const float *w_hh /*4H,H*/, int T, int N, int In, int H);

#ifdef __cplusplus
}
#endif

#endif
