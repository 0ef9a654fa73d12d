/* LeNet5-Caffe on the GPU (see nn/lenet_cuda.h).
 * Activations NCHW on the device; shape letters: N batch, C channels, H,W size.
 * Model-level backward OVERWRITES m->grads (device gradients zeroed first);
 * the ops accumulate into them. */
#include "nn/lenet_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CUDA

#include "common/check.h"
#include "common/cuda_check.h"
#include "nn/conv2d.h"
#include "nn/cuda_ops.h"
#include "nn/model_cuda.h"
#include "nn/pool.h"

enum { C1 = 20, C2 = 50, K = 5, HID = 500 };
enum { P_CONV1_W, P_CONV1_B, P_CONV2_W, P_CONV2_B, P_FC1_W, P_FC1_B, P_FC2_W, P_FC2_B, P_COUNT };
static const char *const pnames[P_COUNT] = {"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                                            "fc1.weight",   "fc1.bias",   "fc2.weight",   "fc2.bias"};

typedef struct {
    CudaMirror mr; /* first: model_cuda_copy_stats finds it here */
    LeNetConfig cfg;
    int in_c, in_h, in_w, classes, max_batch;
    int H1, W1, Q1H, Q1W, H2, W2, Q2H, Q2W, feat;
    int pidx[P_COUNT];  /* parameter indices in the table */
    float *x;           /* device [N, C, H, W] */
    float *c1, *p1;     /* [N, C1, H1, W1], [N, C1, Q1H, Q1W] */
    int *a1;
    float *c2, *p2;     /* [N, C2, H2, W2], [N, C2, Q2H, Q2W] = [N, feat] */
    int *a2;
    float *h;           /* [N, HID] after ReLU */
    float *logits, *probs, *dlogits; /* [N, classes] */
    float *dh, *dp2, *dc2, *dp1, *dc1;
    int *labels;
    float *h_logits;    /* host */
    int lastN, last_train, have_labels;
    int ok;
} LeNetCuda;

static const ModelOps lenet_cuda_ops;

static float *dalloc(LeNetCuda *r, size_t n, const char *what) {
    void *p = NULL;
    if (!r->ok) return NULL;
    if (cuda_dev_alloc(&p, n * sizeof(float), what)) r->ok = 0;
    return (float *)p;
}

static void lenet_cuda_free(Model *m);

Model *lenet_create_cuda(const LeNetConfig *cfg, int max_batch) {
    const char *why = nn_cuda_unavailable();
    if (why) {
        fprintf(stderr, "error: cannot make the GPU LeNet: %s\n", why);
        return NULL;
    }
    Model *twin = lenet_create(cfg, 1); /* validates the config; table and init */
    if (!twin) return NULL;
    if (max_batch < 1) {
        fprintf(stderr, "error: GPU LeNet: max batch %d\n", max_batch);
        model_free(twin);
        return NULL;
    }
    LeNetCuda *r = callocCheck(1, sizeof(LeNetCuda));
    r->ok = 1;
    r->cfg = *cfg;
    r->in_c = cfg->in_channels, r->in_h = cfg->in_h, r->in_w = cfg->in_w, r->classes = cfg->num_classes;
    r->max_batch = max_batch;
    r->H1 = r->in_h - K + 1, r->W1 = r->in_w - K + 1;
    r->Q1H = maxpool2d_out_size(r->H1, 2, 2, 0), r->Q1W = maxpool2d_out_size(r->W1, 2, 2, 0);
    r->H2 = r->Q1H - K + 1, r->W2 = r->Q1W - K + 1;
    r->Q2H = maxpool2d_out_size(r->H2, 2, 2, 0), r->Q2W = maxpool2d_out_size(r->W2, 2, 2, 0);
    r->feat = C2 * r->Q2H * r->Q2W;
    const size_t want[P_COUNT] = {(size_t)C1 * r->in_c * K * K, C1, (size_t)C2 * C1 * K * K, C2,
                                  (size_t)HID * r->feat, HID, (size_t)r->classes * HID, (size_t)r->classes};
    Model *m = callocCheck(1, sizeof(Model));
    m->ops = &lenet_cuda_ops;
    m->impl = r;
    param_table_init(&m->pt);
    for (int i = 0; i < twin->pt.n; i++)
        param_table_add(&m->pt, twin->pt.t[i].name, twin->pt.t[i].kind, twin->pt.t[i].ndim, twin->pt.t[i].shape);
    m->nstate = 0;
    for (int k = 0; k < P_COUNT; k++) {
        r->pidx[k] = param_table_find(&m->pt, pnames[k]);
        if (r->pidx[k] < 0 || m->pt.t[r->pidx[k]].numel != want[k]) {
            fprintf(stderr, "error: GPU LeNet: the CPU model's table %s %s (%zu values expected)\n",
                    r->pidx[k] < 0 ? "has no" : "disagrees about", pnames[k], want[k]);
            r->ok = 0;
            r->pidx[k] = 0;
        }
    }
    if (r->ok && (twin->pt.n != P_COUNT || twin->nstate != 0 || m->pt.total != twin->pt.total)) {
        fprintf(stderr, "error: GPU LeNet: the CPU model has %d tensors and %zu state floats (want %d and 0)\n",
                twin->pt.n, twin->nstate, (int)P_COUNT);
        r->ok = 0;
    }
    if (r->ok) {
        m->params = cuda_host_arena_alloc(m->pt.total);
        m->grads = cuda_host_arena_alloc(m->pt.total);
        if (!m->params || !m->grads) r->ok = 0;
    }
    if (r->ok) {
        memcpy(m->params, twin->params, m->pt.total * sizeof(float));
        if (cuda_mirror_init(&r->mr, m)) r->ok = 0;
    }
    model_free(twin);
    size_t N = (size_t)max_batch;
    size_t nx = (size_t)r->in_c * N * r->in_h * r->in_w, n1 = C1 * N * r->H1 * r->W1,
           q1 = C1 * N * r->Q1H * r->Q1W, n2 = C2 * N * r->H2 * r->W2, q2 = C2 * N * r->Q2H * r->Q2W;
    r->x = dalloc(r, nx, "the input batch");
    r->c1 = dalloc(r, n1, "activations"), r->p1 = dalloc(r, q1, "activations");
    r->c2 = dalloc(r, n2, "activations"), r->p2 = dalloc(r, q2, "activations");
    r->a1 = (int *)dalloc(r, q1, "max-pool indices"), r->a2 = (int *)dalloc(r, q2, "max-pool indices");
    r->h = dalloc(r, N * HID, "activations");
    r->logits = dalloc(r, N * r->classes, "logits"), r->probs = dalloc(r, N * r->classes, "logits");
    r->dlogits = dalloc(r, N * r->classes, "logits");
    r->dh = dalloc(r, N * HID, "gradients"), r->dp2 = dalloc(r, q2, "gradients");
    r->dc2 = dalloc(r, n2, "gradients"), r->dp1 = dalloc(r, q1, "gradients"), r->dc1 = dalloc(r, n1, "gradients");
    r->labels = (int *)dalloc(r, N, "the labels");
    r->h_logits = callocCheck(N * r->classes, sizeof(float));
    if (!r->ok) {
        lenet_cuda_free(m);
        return NULL;
    }
    return m;
}

void lenet_init_cuda(Model *m, uint64_t seed) {
    LeNetCuda *r = m->impl;
    Model *twin = lenet_create(&r->cfg, 1);
    if (!twin) {
        gc_fatal("error: lenet_init_cuda: cannot make the CPU twin\n");
    }
    lenet_init(twin, seed);
    memcpy(m->params, twin->params, m->pt.total * sizeof(float));
    model_free(twin);
}

const float *lenet_logits_cuda(const Model *m) { return ((const LeNetCuda *)m->impl)->h_logits; }

/* device parameter / gradient of tensor k (P_*) */
static float *DP(Model *m, int k) {
    LeNetCuda *r = m->impl;
    return r->mr.d_params + m->pt.t[r->pidx[k]].offset;
}
static float *DG(Model *m, int k) {
    LeNetCuda *r = m->impl;
    return r->mr.d_grads + m->pt.t[r->pidx[k]].offset;
}

static void conv_shape(const LeNetCuda *r, Conv2dShape *s, int N, int which) {
    int rc = which == 1 ? conv2d_shape(s, N, r->in_c, r->in_h, r->in_w, C1, K, K, 1, 0)
                        : conv2d_shape(s, N, C1, r->Q1H, r->Q1W, C2, K, K, 1, 0);
    if (rc != 0) {
        gc_fatal("error: GPU LeNet: impossible convolution shape\n");
    }
}

static float lenet_cuda_forward(Model *m, const Batch *b, int train, BatchStats *st) {
    LeNetCuda *r = m->impl;
    int N = b->N;
    if (N < 1 || N > r->max_batch || !b->x) {
        gc_fatal("error: GPU LeNet forward: batch of %d images (model made for 1..%d)%s\n", N, r->max_batch,
                b->x ? "" : ", no input x");
    }
    if (b->y)
        for (int n = 0; n < N; n++)
            if (b->y[n] < 0 || b->y[n] >= r->classes) {
                gc_fatal("error: softmax_ce: target[%d] = %d outside [0, %d)\n", n, b->y[n], r->classes);
            }
    cuda_mirror_upload(&r->mr, m, 0);
    cudaCheck(cudaMemcpy(r->x, b->x, (size_t)N * r->in_c * r->in_h * r->in_w * sizeof(float),
                         cudaMemcpyHostToDevice));
    Conv2dShape s;
    conv_shape(r, &s, N, 1);
    conv2d_forward_cuda(r->c1, NULL, r->x, DP(m, P_CONV1_W), DP(m, P_CONV1_B), &s);
    maxpool2d_forward_cuda(r->p1, r->a1, r->c1, N * C1, r->H1, r->W1, 2, 2, 0);
    conv_shape(r, &s, N, 2);
    conv2d_forward_cuda(r->c2, NULL, r->p1, DP(m, P_CONV2_W), DP(m, P_CONV2_B), &s);
    maxpool2d_forward_cuda(r->p2, r->a2, r->c2, N * C2, r->H2, r->W2, 2, 2, 0);
    /* p2 [N, C2, Q2H, Q2W] is [N, feat] in torch's flatten order */
    linear_forward_cuda(r->h, r->p2, DP(m, P_FC1_W), DP(m, P_FC1_B), N, r->feat, HID);
    relu_forward_cuda(r->h, r->h, (size_t)N * HID);
    linear_forward_cuda(r->logits, r->h, DP(m, P_FC2_W), DP(m, P_FC2_B), N, HID, r->classes);
    float loss = 0.0f;
    long correct = 0;
    r->have_labels = b->y != NULL;
    if (b->y) {
        cudaCheck(cudaMemcpy(r->labels, b->y, (size_t)N * sizeof(int), cudaMemcpyHostToDevice));
        loss = softmax_ce_forward_cuda(r->probs, &correct, r->logits, r->labels, N, r->classes);
    }
    cudaCheck(cudaMemcpy(r->h_logits, r->logits, (size_t)N * r->classes * sizeof(float), cudaMemcpyDeviceToHost));
    if (st) {
        st->loss = loss;
        st->correct = correct;
        st->count = N;
    }
    r->lastN = N;
    r->last_train = train;
    return loss;
}

static void lenet_cuda_backward(Model *m) {
    LeNetCuda *r = m->impl;
    if (!r->last_train || !r->have_labels || r->lastN < 1) {
        gc_fatal("error: GPU LeNet backward needs a preceding training forward with labels\n");
    }
    int N = r->lastN;
    Conv2dShape s;
    cudaCheck(cudaMemsetAsync(r->mr.d_grads, 0, m->pt.total * sizeof(float), 0));
    softmax_ce_backward_cuda(r->dlogits, r->probs, r->labels, 1.0f / N, N, r->classes);
    linear_backward_cuda(r->dh, DG(m, P_FC2_W), DG(m, P_FC2_B), r->dlogits, r->h, DP(m, P_FC2_W), N, HID,
                         r->classes);
    relu_backward_cuda(r->dh, r->dh, r->h, (size_t)N * HID);
    linear_backward_cuda(r->dp2, DG(m, P_FC1_W), DG(m, P_FC1_B), r->dh, r->p2, DP(m, P_FC1_W), N, r->feat, HID);
    maxpool2d_backward_cuda(r->dc2, r->dp2, r->a2, N * C2, r->H2, r->W2, 2, 2, 0);
    conv_shape(r, &s, N, 2);
    conv2d_backward_cuda(r->dp1, DG(m, P_CONV2_W), DG(m, P_CONV2_B), NULL, r->dc2, r->p1, DP(m, P_CONV2_W), &s);
    maxpool2d_backward_cuda(r->dc1, r->dp1, r->a1, N * C1, r->H1, r->W1, 2, 2, 0);
    conv_shape(r, &s, N, 1);
    conv2d_backward_cuda(NULL, DG(m, P_CONV1_W), DG(m, P_CONV1_B), NULL, r->dc1, r->x, DP(m, P_CONV1_W), &s);
    cuda_mirror_download_grads(&r->mr, m);
}

static void lenet_cuda_free(Model *m) {
    if (!m) return;
    LeNetCuda *r = m->impl;
    if (r) {
        float *dev[] = {r->x,       r->c1,     r->p1,      (float *)r->a1, r->c2,  r->p2,  (float *)r->a2,
                        r->h,       r->logits, r->probs,   r->dlogits,     r->dh,  r->dp2, r->dc2,
                        r->dp1,     r->dc1,    (float *)r->labels};
        for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) cudaCheck(cudaFree(dev[i]));
        cuda_mirror_free(&r->mr);
        free(r->h_logits);
        free(r);
    }
    cuda_model_free_host(m);
}

static const ModelOps lenet_cuda_ops = {.name = "lenet5_cuda",
                                        .forward = lenet_cuda_forward,
                                        .backward = lenet_cuda_backward,
                                        .free = lenet_cuda_free};

#else /* built without CUDA */

Model *lenet_create_cuda(const LeNetConfig *cfg, int max_batch) {
    (void)cfg, (void)max_batch;
    fprintf(stderr, "error: cannot make the GPU LeNet: this build has no CUDA (nvcc was not found, or NO_CUDA=1)\n");
    return NULL;
}

void lenet_init_cuda(Model *m, uint64_t seed) { (void)m, (void)seed; }

const float *lenet_logits_cuda(const Model *m) {
    (void)m;
    return NULL;
}

#endif
