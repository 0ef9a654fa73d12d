/* Helpers shared by the GPU parity tests of the nn/ ops and models
 * (tests/cuda/test_nn_cuda*.c, test_resnet_cuda.c). Include after tests/test.h.
 *
 * GPU_SKIP_IF_NONE() ends the test cleanly (one passed check and a note) when
 * the build has no CUDA or the machine has no usable GPU, so `make test-cuda`
 * reports instead of crashing there. GPU_SKIP_IF_NO_DEVICE() is the same for
 * code that needs no cuDNN (the LSTM language model): it skips only without a
 * device. */
#ifndef GC_TEST_NN_CUDA_H
#define GC_TEST_NN_CUDA_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/rng.h"
#include "nn/model.h"

#ifndef HAVE_CUDA
#define GPU_SKIP_IF_NONE()                                                            \
    do {                                                                              \
        printf("note: built without CUDA (no nvcc); GPU parity tests skipped\n");    \
        CHECK(1, "skipped");                                                          \
        TEST_END();                                                                   \
    } while (0)
#define GPU_SKIP_IF_NO_DEVICE() GPU_SKIP_IF_NONE()
#else
#include "common/cuda_check.h"
#include "nn/cuda_ops.h"

#define GPU_SKIP_IF_NONE() GPU_SKIP_WHEN_(nn_cuda_unavailable())
#define GPU_SKIP_IF_NO_DEVICE() \
    GPU_SKIP_WHEN_(nn_cuda_device_count() < 1 ? "no CUDA device is visible (cudaGetDeviceCount reports none or fails)" : NULL)
#define GPU_SKIP_WHEN_(why)                                                           \
    do {                                                                              \
        const char *why_ = (why);                                                     \
        if (why_) {                                                                   \
            printf("note: %s; GPU parity tests skipped\n", why_);                     \
            CHECK(1, "skipped");                                                      \
            TEST_END();                                                               \
        }                                                                             \
        struct cudaDeviceProp prop_;                                                  \
        int dev_ = 0;                                                                 \
        cudaCheck(cudaGetDevice(&dev_));                                              \
        cudaCheck(cudaGetDeviceProperties(&prop_, dev_));                             \
        printf("GPU %d: %s, compute capability %d.%d\n", dev_, prop_.name, prop_.major, prop_.minor); \
    } while (0)

/* device copy of n host floats (n may be 0) */
static inline float *dev_upload(const float *h, size_t n) {
    float *d = NULL;
    cudaCheck(cudaMalloc((void **)&d, (n ? n : 1) * sizeof(float)));
    if (n) cudaCheck(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}
static inline int *dev_upload_int(const int *h, size_t n) {
    int *d = NULL;
    cudaCheck(cudaMalloc((void **)&d, (n ? n : 1) * sizeof(int)));
    if (n) cudaCheck(cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice));
    return d;
}
/* device buffer of n floats filled with the value v (a "garbage" marker for overwrite checks) */
static inline float *dev_fill(size_t n, float v) {
    float *h = mallocCheck((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = v;
    float *d = dev_upload(h, n);
    free(h);
    return d;
}
/* new host array with the device contents */
static inline float *dev_download(const float *d, size_t n) {
    float *h = mallocCheck((n ? n : 1) * sizeof(float));
    if (n) cudaCheck(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}
static inline int *dev_download_int(const int *d, size_t n) {
    int *h = mallocCheck((n ? n : 1) * sizeof(int));
    if (n) cudaCheck(cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost));
    return h;
}
#endif

/* n normal values times scale */
static inline float *rand_normal(Rng *r, size_t n, float scale) {
    float *h = mallocCheck((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = scale * rng_normal(r);
    return h;
}

static inline float *copy_floats(const float *a, size_t n) {
    float *h = mallocCheck((n ? n : 1) * sizeof(float));
    memcpy(h, a, n * sizeof(float));
    return h;
}

static inline float max_abs(const float *a, size_t n) {
    float m = 0.0f;
    for (size_t i = 0; i < n; i++)
        if (fabsf(a[i]) > m) m = fabsf(a[i]);
    return m;
}

/* |got - want| <= rtol*|want| + afrac*max|want| element by element; prints the
 * max differences and how many elements are bit-identical */
static inline int close_scaled(const char *what, const float *got, const float *want, size_t n, float rtol,
                               float afrac) {
    size_t same = 0;
    for (size_t i = 0; i < n; i++) same += memcmp(&got[i], &want[i], sizeof(float)) == 0;
    char label[200];
    snprintf(label, sizeof label, "%.120s [%zu/%zu identical]", what, same, n);
    return CHECK_CLOSE(label, got, want, n, rtol, afrac * max_abs(want, n));
}

/* exact equality (bit patterns) of n floats */
static inline int same_floats(const char *what, const float *got, const float *want, size_t n) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
            if (!bad) first = i;
            bad++;
        }
    printf("  %-40s n=%-8zu %s\n", what, n, bad ? "DIFFERENT" : "bit-identical");
    CHECK(bad == 0, "%s: %zu of %zu differ; first at %zu: got %.9g want %.9g", what, bad, n, first,
          bad ? got[first] : 0.0f, bad ? want[first] : 0.0f);
    return bad == 0;
}

/* ||a - b|| / ||b|| (||a - b|| when b is 0) */
static inline double rel_l2(const float *a, const float *b, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)a[i] - b[i];
        d += e * e;
        s += (double)b[i] * b[i];
    }
    return s > 0 ? sqrt(d / s) : sqrt(d);
}

/* Every parameter gradient of model g against model c (same table). Tensors
 * whose name starts with `tight` (e.g. the classifier, after the last ReLU) are
 * compared element by element (rtol, afrac as close_scaled); the others by
 * relative L2 error <= l2tol. Why not element by element everywhere: an
 * activation within rounding of 0 may take the other side of a ReLU on one
 * device; one such element changes a weight gradient that sums M = N*OH*OW
 * products by ~1/sqrt(M) of its norm, and the changed input gradient spreads
 * to every layer below. Two CPU runs whose weights differ by 1e-5 relative
 * show per-tensor relative L2 differences up to 1.6e-2 in ResNet-20 (batch 8)
 * for this reason, while a wiring error (a missing residual path, a wrong
 * buffer or offset) gives O(1). */
static inline void compare_grads(const Model *g, const Model *c, double l2tol, const char *tight, float rtol,
                                 float afrac) {
    double worst = 0, sum = 0;
    const char *worst_name = "";
    int bad = 0, nl2 = 0;
    for (int i = 0; i < c->pt.n; i++) {
        const ParamInfo *t = &c->pt.t[i];
        const float *a = g->grads + t->offset, *b = c->grads + t->offset;
        if (tight && strncmp(t->name, tight, strlen(tight)) == 0) {
            char what[96];
            snprintf(what, sizeof what, "grad %s", t->name);
            close_scaled(what, a, b, t->numel, rtol, afrac);
            continue;
        }
        double e = rel_l2(a, b, t->numel);
        nl2++, sum += e;
        if (e > worst) worst = e, worst_name = t->name;
        if (!(e <= l2tol)) {
            bad++;
            printf("  grad %-36s relative L2 error %.3e > %.1e\n", t->name, e, l2tol);
        }
    }
    printf("  gradients of %d tensors: relative L2 error mean %.3e, worst %.3e (%s)\n", nl2, nl2 ? sum / nl2 : 0.0,
           worst, worst_name);
    CHECK(bad == 0, "%d of %d gradient tensors beyond relative L2 error %.1e", bad, nl2, l2tol);
}

#ifdef HAVE_CUDA
#include "nn/model_cuda.h"
#include "optim/optim.h"
#include "optim/optim_cuda.h"

/* Device-master mode (nn/model_cuda.h) with the optimizer on the device
 * (optim/optim_cuda.h): model d trains that way on the nb batches while model h,
 * the same GPU model from the same start, trains through the host arenas with
 * optim_update. The optimizer kernels are bit-identical to the CPU
 * (tests/cuda/test_optim_cuda.c) and the GPU models are deterministic, so every
 * loss, the final parameters and gradients must be bit-identical, while no
 * parameter or gradient crosses to the host in d. batches[nb] is used once more
 * after the mode is switched off (the host copy is the master again). */
static inline void compare_device_master(Model *h, Model *d, Model *cpu, const Batch *batches /*nb+1*/, int nb,
                                         const OptConfig *oc, double lr) {
    CHECK(model_cuda_set_device_master(cpu, 1) == -1, "device-master mode refused for a CPU model");
    CHECK(model_cuda_device_params(cpu) == NULL && model_cuda_device_grads(cpu) == NULL,
          "no device arenas for a CPU model");
    Optim oh, od;
    const size_t n = h->pt.total;
    int ok = optim_init(&oh, oc, n) == 0 && optim_init_cuda(&od, oc, n) == 0;
    CHECK(ok, "host and device optimizers");
    if (!ok) return;
    CHECK(model_cuda_set_device_master(d, 1) == 0, "device-master mode on");
    float *dp = model_cuda_device_params(d), *dg = model_cuda_device_grads(d);
    CHECK(dp && dg, "device arenas");
    memset(d->params, 0, n * sizeof(float)); /* stale on purpose: must not be uploaded now */
    model_cuda_copy_stats_reset(d);
    size_t state_up = 0; /* the state (BN running statistics) is still copied */
    int same = 0;
    for (int s = 0; s < nb; s++) {
        float lh = model_forward(h, &batches[s], 1, NULL), ld = model_forward(d, &batches[s], 1, NULL);
        model_backward(h);
        model_backward(d);
        optim_begin_step(&oh);
        optim_begin_step(&od);
        int rh = optim_update(&oh, h->params, h->grads, lr, 0, n);
        int rd = optim_update_cuda(&od, dp, dg, lr, 0, n);
        CHECK(rh == 0 && rd == 0, "step %d: optim_update %d, optim_update_cuda %d", s + 1, rh, rd);
        same += memcmp(&lh, &ld, sizeof lh) == 0;
        state_up += d->nstate * sizeof(float);
        if (s == 0 || s == nb - 1) printf("  step %2d  loss host optimizer %.7f  device optimizer %.7f\n", s + 1, lh, ld);
    }
    CHECK(same == nb, "losses bit-identical at %d of %d steps", same, nb);
    const ModelCudaCopyStats *cs = model_cuda_copy_stats(d);
    CHECK(cs && cs->up_bytes == state_up && cs->down_bytes == state_up,
          "only the state crosses in device-master mode (%zu bytes up, %zu down; state %zu)", cs ? cs->up_bytes : 0,
          cs ? cs->down_bytes : 0, state_up);
    CHECK(model_cuda_set_device_master(d, 0) == 0, "device-master mode off");
    same_floats("parameters after the steps (downloaded when switched off)", d->params, h->params, n);
    same_floats("gradients of the last step (downloaded when switched off)", d->grads, h->grads, n);
    float lh = model_forward(h, &batches[nb], 1, NULL), ld = model_forward(d, &batches[nb], 1, NULL);
    CHECK(memcmp(&lh, &ld, sizeof lh) == 0, "after switching off: same loss (%.7f, %.7f)", lh, ld);
    optim_free(&oh);
    optim_free_cuda(&od);
}
#endif

#endif
