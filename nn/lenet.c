/* LeNet5-Caffe (see lenet.h).
 * Activations are CNHW inside; shape letters: N batch, C channels, H,W size.
 * Model-level backward OVERWRITES m->grads; the ops accumulate into it. */
#include "nn/lenet.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/rng.h"
#include "nn/activation.h"
#include "nn/conv2d.h"
#include "nn/layout.h"
#include "nn/linear.h"
#include "nn/pool.h"
#include "nn/softmax_ce.h"

enum { C1 = 20, C2 = 50, K = 5, HID = 500 };
enum { P_CONV1_W, P_CONV1_B, P_CONV2_W, P_CONV2_B, P_FC1_W, P_FC1_B, P_FC2_W, P_FC2_B };

typedef struct {
    int in_c, in_h, in_w, classes, max_batch;
    int H1, W1, Q1H, Q1W, H2, W2, Q2H, Q2W, feat; /* conv1 out, pool1 out, conv2 out, pool2 out, fc1 in */
    float *x;           /* [C, N, H, W] input */
    float *c1, *p1;     /* [C1, N, H1, W1], [C1, N, Q1H, Q1W] */
    int *a1;
    float *c2, *p2;     /* [C2, N, H2, W2], [C2, N, Q2H, Q2W] */
    int *a2;
    float *flat;        /* [N, feat] (NCHW flatten, as torch's x.flatten(1)) */
    float *h;           /* [N, HID] after ReLU */
    float *logits, *probs, *dlogits; /* [N, classes] */
    float *dh, *dflat, *dp2, *dc2, *dp1, *dc1;
    int *labels;
    float *work;
    size_t work_floats;
    int lastN, last_train, have_labels;
} LeNet;

static const ModelOps lenet_ops;

LeNetConfig lenet_config(void) {
    LeNetConfig c = {.num_classes = 10, .in_channels = 1, .in_h = 28, .in_w = 28, .seed = 0};
    return c;
}

static float *fa(size_t n) { return mallocCheck((n ? n : 1) * sizeof(float)); }

Model *lenet_create(const LeNetConfig *cfg, int max_batch) {
    if (cfg->num_classes < 1 || cfg->in_channels < 1 || cfg->in_h < 16 || cfg->in_w < 16 || max_batch < 1) {
        fprintf(stderr, "error: bad LeNet config (classes %d, input %dx%dx%d (>= 16x16), max batch %d)\n",
                cfg->num_classes, cfg->in_channels, cfg->in_h, cfg->in_w, max_batch);
        return NULL;
    }
    LeNet *r = callocCheck(1, sizeof(LeNet));
    r->in_c = cfg->in_channels, r->in_h = cfg->in_h, r->in_w = cfg->in_w, r->classes = cfg->num_classes;
    r->max_batch = max_batch;
    r->H1 = r->in_h - K + 1, r->W1 = r->in_w - K + 1;
    r->Q1H = maxpool2d_out_size(r->H1, 2, 2, 0), r->Q1W = maxpool2d_out_size(r->W1, 2, 2, 0);
    r->H2 = r->Q1H - K + 1, r->W2 = r->Q1W - K + 1;
    r->Q2H = maxpool2d_out_size(r->H2, 2, 2, 0), r->Q2W = maxpool2d_out_size(r->W2, 2, 2, 0);
    r->feat = C2 * r->Q2H * r->Q2W;
    size_t N = (size_t)max_batch;
    size_t nx = (size_t)r->in_c * N * r->in_h * r->in_w, n1 = C1 * N * r->H1 * r->W1,
           q1 = C1 * N * r->Q1H * r->Q1W, n2 = C2 * N * r->H2 * r->W2, q2 = C2 * N * r->Q2H * r->Q2W;
    r->x = fa(nx), r->c1 = fa(n1), r->p1 = fa(q1), r->c2 = fa(n2), r->p2 = fa(q2);
    r->a1 = mallocCheck(q1 * sizeof(int)), r->a2 = mallocCheck(q2 * sizeof(int));
    r->flat = fa(N * r->feat), r->h = fa(N * HID);
    r->logits = callocCheck(N * r->classes, sizeof(float)), r->probs = fa(N * r->classes);
    r->dlogits = fa(N * r->classes);
    r->dh = fa(N * HID), r->dflat = fa(N * r->feat), r->dp2 = fa(q2), r->dc2 = fa(n2), r->dp1 = fa(q1);
    r->dc1 = fa(n1);
    r->labels = mallocCheck(N * sizeof(int));

    Model *m = callocCheck(1, sizeof(Model));
    m->ops = &lenet_ops;
    param_table_init(&m->pt);
    int s1[4] = {C1, r->in_c, K, K}, b1[1] = {C1}, s2[4] = {C2, C1, K, K}, b2[1] = {C2};
    int f1[2] = {HID, r->feat}, fb1[1] = {HID}, f2[2] = {r->classes, HID}, fb2[1] = {r->classes};
    param_table_add(&m->pt, "conv1.weight", PK_CONV_WEIGHT, 4, s1);
    param_table_add(&m->pt, "conv1.bias", PK_BIAS, 1, b1);
    param_table_add(&m->pt, "conv2.weight", PK_CONV_WEIGHT, 4, s2);
    param_table_add(&m->pt, "conv2.bias", PK_BIAS, 1, b2);
    param_table_add(&m->pt, "fc1.weight", PK_FC_WEIGHT, 2, f1);
    param_table_add(&m->pt, "fc1.bias", PK_BIAS, 1, fb1);
    param_table_add(&m->pt, "fc2.weight", PK_FC_WEIGHT, 2, f2);
    param_table_add(&m->pt, "fc2.bias", PK_BIAS, 1, fb2);
    m->params = param_arena_alloc(&m->pt);
    m->grads = param_arena_alloc(&m->pt);
    m->state = NULL;
    m->nstate = 0;
    m->impl = r;
    lenet_init(m, cfg->seed);
    return m;
}

void lenet_init(Model *m, uint64_t seed) {
    Rng rng;
    rng_init(&rng, seed, 0);
    for (int i = 0; i < m->pt.n; i++) {
        const ParamInfo *t = &m->pt.t[i];
        /* a bias takes the fan-in of the weight before it */
        const ParamInfo *w = t->ndim > 1 ? t : &m->pt.t[i - 1];
        size_t fan_in = w->numel / (size_t)w->shape[0];
        float bound = (float)(1.0 / sqrt((double)fan_in));
        float *p = m->params + t->offset;
        for (size_t k = 0; k < t->numel; k++) p[k] = bound * (2.0f * rng_uniform(&rng) - 1.0f);
    }
}

const float *lenet_logits(const Model *m) { return ((const LeNet *)m->impl)->logits; }

static float *P(Model *m, int i) { return m->params + m->pt.t[i].offset; }
static float *G(Model *m, int i) { return m->grads + m->pt.t[i].offset; }

static void conv_shape(LeNet *r, Conv2dShape *s, int N, int which) {
    int rc = which == 1 ? conv2d_shape(s, N, r->in_c, r->in_h, r->in_w, C1, K, K, 1, 0)
                        : conv2d_shape(s, N, C1, r->Q1H, r->Q1W, C2, K, K, 1, 0);
    if (rc != 0) {
        gc_fatal("error: LeNet: impossible convolution shape\n");
    }
    size_t need = conv2d_work_floats(s);
    if (need > r->work_floats) {
        free(r->work);
        r->work = fa(need);
        r->work_floats = need;
    }
}

static float lenet_forward(Model *m, const Batch *b, int train, BatchStats *st) {
    LeNet *r = m->impl;
    int N = b->N;
    if (N < 1 || N > r->max_batch || !b->x) {
        gc_fatal("error: LeNet forward: batch of %d images (model made for 1..%d)%s\n", N, r->max_batch,
                b->x ? "" : ", no input x");
    }
    Conv2dShape s;
    swap01(r->x, b->x, N, r->in_c, r->in_h * r->in_w);
    conv_shape(r, &s, N, 1);
    conv2d_forward(r->c1, r->work, r->x, P(m, P_CONV1_W), P(m, P_CONV1_B), &s);
    maxpool2d_forward(r->p1, r->a1, r->c1, C1 * N, r->H1, r->W1, 2, 2, 0);
    conv_shape(r, &s, N, 2);
    conv2d_forward(r->c2, r->work, r->p1, P(m, P_CONV2_W), P(m, P_CONV2_B), &s);
    maxpool2d_forward(r->p2, r->a2, r->c2, C2 * N, r->H2, r->W2, 2, 2, 0);
    /* [C2, N, Q2H*Q2W] -> [N, C2*Q2H*Q2W] */
    swap01(r->flat, r->p2, C2, N, r->Q2H * r->Q2W);
    linear_forward(r->h, r->flat, P(m, P_FC1_W), P(m, P_FC1_B), N, r->feat, HID);
    relu_forward(r->h, r->h, (size_t)N * HID);
    linear_forward(r->logits, r->h, P(m, P_FC2_W), P(m, P_FC2_B), N, HID, r->classes);
    float loss = 0.0f;
    long correct = 0;
    r->have_labels = b->y != NULL;
    if (b->y) {
        memcpy(r->labels, b->y, (size_t)N * sizeof(int));
        loss = softmax_ce_forward(r->probs, &correct, r->logits, r->labels, N, r->classes);
    }
    if (st) {
        st->loss = loss;
        st->correct = correct;
        st->count = N;
    }
    r->lastN = N;
    r->last_train = train;
    return loss;
}

static void lenet_backward(Model *m) {
    LeNet *r = m->impl;
    if (!r->last_train || !r->have_labels || r->lastN < 1) {
        gc_fatal("error: LeNet backward needs a preceding training forward with labels\n");
    }
    int N = r->lastN;
    Conv2dShape s;
    memset(m->grads, 0, m->pt.total * sizeof(float));
    softmax_ce_backward(r->dlogits, r->probs, r->labels, 1.0f / N, N, r->classes);
    linear_backward(r->dh, G(m, P_FC2_W), G(m, P_FC2_B), r->dlogits, r->h, P(m, P_FC2_W), N, HID, r->classes);
    relu_backward(r->dh, r->dh, r->h, (size_t)N * HID);
    linear_backward(r->dflat, G(m, P_FC1_W), G(m, P_FC1_B), r->dh, r->flat, P(m, P_FC1_W), N, r->feat, HID);
    swap01(r->dp2, r->dflat, N, C2, r->Q2H * r->Q2W);
    maxpool2d_backward(r->dc2, r->dp2, r->a2, C2 * N, r->H2, r->W2, 2, 2, 0);
    conv_shape(r, &s, N, 2);
    conv2d_backward(r->dp1, G(m, P_CONV2_W), G(m, P_CONV2_B), r->work, r->dc2, r->p1, P(m, P_CONV2_W), &s);
    maxpool2d_backward(r->dc1, r->dp1, r->a1, C1 * N, r->H1, r->W1, 2, 2, 0);
    conv_shape(r, &s, N, 1);
    conv2d_backward(NULL, G(m, P_CONV1_W), G(m, P_CONV1_B), r->work, r->dc1, r->x, P(m, P_CONV1_W), &s);
}

static void lenet_free(Model *m) {
    if (!m) return;
    LeNet *r = m->impl;
    if (r) {
        free(r->x), free(r->c1), free(r->p1), free(r->a1), free(r->c2), free(r->p2), free(r->a2), free(r->flat);
        free(r->h), free(r->logits), free(r->probs), free(r->dlogits), free(r->dh), free(r->dflat), free(r->dp2);
        free(r->dc2), free(r->dp1), free(r->dc1), free(r->labels), free(r->work);
        free(r);
    }
    param_arena_free(m->params);
    param_arena_free(m->grads);
    param_table_free(&m->pt);
    free(m);
}

static const ModelOps lenet_ops = {
    .name = "lenet5", .forward = lenet_forward, .backward = lenet_backward, .free = lenet_free};
