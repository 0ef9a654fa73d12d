/* The ResNets on the GPU (see nn/resnet_cuda.h).
 *
 * Activations are NCHW on the device: [N, C, H, W]. Shape letters: N batch,
 * C channels, H,W spatial size, OC output channels, HW = H*W.
 * Model-level backward OVERWRITES m->grads (the device gradients are zeroed
 * first); the ops below it accumulate.
 *
 * The structure mirrors nn/resnet.c: a ConvBN unit = conv (no bias) -> BN
 * [-> + residual] [-> ReLU] keeps its conv output c (BN backward needs it) and
 * its output y (the next unit's input and the ReLU mask); blocks of 2 (basic) or
 * 3 (bottleneck) units with an identity, option A (zero-padded subsampling) or
 * projection (1x1 conv + BN) shortcut. Parameters are found by name in the CPU
 * model's table, so the GPU model can never disagree with it about names,
 * shapes or offsets; BN running statistics sit in the state arena in table
 * order, [mean C][var C] per BN (nn/resnet.h).
 *
 * Backward uses four gradient buffers of the largest activation: P (gradient
 * of a block's output, then of the residual sum), Q (gradient of the block's
 * input), R and S (within the block). A unit's backward masks dy in place with
 * the ReLU (leaving the residual's gradient there), lets BN write dc into R and
 * the convolution write dx where asked.
 */
#include "nn/resnet_cuda.h"

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

typedef struct {
    int w, g, b;      /* parameter indices: conv weight, bn gamma, bn beta */
    size_t rm, rv;    /* running mean / var offsets in the state arena */
    int C, OC, K, stride, pad;
    int H, W, OH, OW; /* per-image input and output size */
    int relu;
    float *c, *y;     /* device [N, OC, OH, OW]: conv output, unit output */
    float *mean, *rstd; /* device [OC]: batch statistics saved for backward */
} CUnit;

enum { SC_IDENTITY, SC_PAD, SC_PROJ };

typedef struct {
    CUnit cb[3];
    int ncb;     /* 2 basic, 3 bottleneck */
    int sc;      /* SC_* */
    CUnit ds;    /* projection shortcut (SC_PROJ) */
    int Cin, Cout, H, W, OH, OW, stride;
    const float *x; /* block input (device, not owned) */
} CBlock;

typedef struct {
    CudaMirror mr; /* first: model_cuda_copy_stats finds it here */
    int is50;
    ResNetConfig cfg;
    ResNet50Config cfg50;
    int num_classes, in_c, in_h, in_w, max_batch;
    CUnit stem;
    int pool, PH, PW;     /* ResNet-50: 3x3/2 max pool after the stem */
    float *pool_out;      /* device [N, 64, PH, PW] */
    int *pool_arg;
    CBlock *blocks;
    int nblocks;
    int fc_w, fc_b, feat, FH, FW;
    float *x;             /* device input [N, C, H, W] */
    int *labels;          /* device [N] */
    float *pooled, *dpooled;            /* device [N, feat] */
    float *logits, *probs, *dlogits;    /* device [N, classes] */
    float *h_logits;      /* host copy of the last logits */
    float *gbuf[4];       /* device gradient buffers, maxact each */
    float *sc;            /* device option A shortcut output */
    size_t maxact;
    int lastN, last_train, have_labels;
    int ok;               /* every allocation succeeded */
} ResNetCuda;

static const ModelOps resnet_cifar_cuda_ops, resnet50_cuda_ops;

/* ------------------------------------------------------------ building ---- */

static float *dalloc(ResNetCuda *r, size_t n, const char *what) {
    void *p = NULL;
    if (!r->ok) return NULL;
    if (cuda_dev_alloc(&p, n * sizeof(float), what)) r->ok = 0;
    return (float *)p;
}

/* state offset of the running mean of the BN whose gamma is tensor g: BNs in table order, [mean C][var C] */
static size_t bn_state_offset(const ParamTable *pt, int g) {
    size_t off = 0;
    for (int i = 0; i < g; i++)
        if (pt->t[i].kind == PK_BN_WEIGHT) off += 2 * pt->t[i].numel;
    return off;
}

/* index of "<prefix>.<suffix>" with the expected kind and numel, or -1 after printing */
static int find_param(const ParamTable *pt, const char *prefix, const char *suffix, ParamKind kind, size_t numel) {
    char name[PARAM_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s.%s", prefix, suffix);
    int i = param_table_find(pt, name);
    if (i < 0 || pt->t[i].kind != kind || pt->t[i].numel != numel) {
        fprintf(stderr, "error: GPU ResNet: the CPU model's table %s %s (kind %s, %zu values expected)\n",
                i < 0 ? "has no" : "disagrees about", name, param_kind_name(kind), numel);
        return -1;
    }
    return i;
}

static void unit_make(ResNetCuda *r, const ParamTable *pt, CUnit *u, const char *conv, const char *bn, int C, int OC,
                      int K, int stride, int pad, int H, int W, int relu, size_t *used) {
    memset(u, 0, sizeof *u);
    u->C = C, u->OC = OC, u->K = K, u->stride = stride, u->pad = pad, u->H = H, u->W = W, u->relu = relu;
    u->OH = (H + 2 * pad - K) / stride + 1;
    u->OW = (W + 2 * pad - K) / stride + 1;
    u->w = find_param(pt, conv, "weight", PK_CONV_WEIGHT, (size_t)OC * C * K * K);
    u->g = find_param(pt, bn, "weight", PK_BN_WEIGHT, (size_t)OC);
    u->b = find_param(pt, bn, "bias", PK_BN_BIAS, (size_t)OC);
    if (u->w < 0 || u->g < 0 || u->b < 0) {
        r->ok = 0;
        return;
    }
    *used += pt->t[u->w].numel + pt->t[u->g].numel + pt->t[u->b].numel;
    u->rm = bn_state_offset(pt, u->g);
    u->rv = u->rm + (size_t)OC;
    size_t act = (size_t)OC * r->max_batch * u->OH * u->OW;
    if (act > r->maxact) r->maxact = act;
    u->c = dalloc(r, act, "activations");
    u->y = dalloc(r, act, "activations");
    u->mean = dalloc(r, (size_t)OC, "batch-norm statistics");
    u->rstd = dalloc(r, (size_t)OC, "batch-norm statistics");
}

static void unit_free(CUnit *u) {
    cudaCheck(cudaFree(u->c));
    cudaCheck(cudaFree(u->y));
    cudaCheck(cudaFree(u->mean));
    cudaCheck(cudaFree(u->rstd));
}

static CBlock *add_block(ResNetCuda *r) {
    r->blocks = reallocCheck(r->blocks, (size_t)(r->nblocks + 1) * sizeof(CBlock));
    CBlock *b = &r->blocks[r->nblocks++];
    memset(b, 0, sizeof *b);
    return b;
}

static void resnet_cuda_free(Model *m);

/* Takes the CPU twin's table, params and state into a new GPU model m whose
 * impl r has its units made; allocates the rest. NULL (twin freed) on failure. */
static Model *finish(ResNetCuda *r, Model *twin, size_t used, const ModelOps *ops) {
    Model *m = callocCheck(1, sizeof(Model));
    m->ops = ops;
    m->impl = r;
    param_table_init(&m->pt);
    for (int i = 0; i < twin->pt.n; i++) {
        const ParamInfo *t = &twin->pt.t[i];
        param_table_add(&m->pt, t->name, t->kind, t->ndim, t->shape);
    }
    m->nstate = twin->nstate;
    int N = r->max_batch;
    if (r->ok) {
        /* the GPU units must use every parameter exactly once, and the offsets must agree */
        size_t fc = twin->pt.t[r->fc_w].numel + twin->pt.t[r->fc_b].numel;
        if (used + fc != param_table_count(&twin->pt) || m->pt.total != twin->pt.total) {
            fprintf(stderr, "error: GPU ResNet: uses %zu of the CPU model's %zu parameters\n", used + fc,
                    param_table_count(&twin->pt));
            r->ok = 0;
        }
        for (int i = 0; r->ok && i < m->pt.n; i++)
            if (m->pt.t[i].offset != twin->pt.t[i].offset) {
                fprintf(stderr, "error: GPU ResNet: offset of %s differs from the CPU model's\n", m->pt.t[i].name);
                r->ok = 0;
            }
    }
    if (r->ok) {
        m->params = cuda_host_arena_alloc(m->pt.total);
        m->grads = cuda_host_arena_alloc(m->pt.total);
        m->state = cuda_host_arena_alloc(m->nstate);
        if (!m->params || !m->grads || !m->state) r->ok = 0;
    }
    if (r->ok) {
        memcpy(m->params, twin->params, m->pt.total * sizeof(float));
        memcpy(m->state, twin->state, m->nstate * sizeof(float));
        if (cuda_mirror_init(&r->mr, m)) r->ok = 0;
    }
    model_free(twin);
    size_t xin = (size_t)r->in_c * N * r->in_h * r->in_w;
    if (xin > r->maxact) r->maxact = xin;
    if (r->pool) {
        size_t np = (size_t)r->stem.OC * N * r->PH * r->PW;
        r->pool_out = dalloc(r, np, "activations");
        r->pool_arg = (int *)dalloc(r, np, "max-pool indices"); /* int and float have the same size */
    }
    r->x = dalloc(r, xin, "the input batch");
    r->labels = (int *)dalloc(r, (size_t)N, "the labels");
    r->pooled = dalloc(r, (size_t)N * r->feat, "activations");
    r->dpooled = dalloc(r, (size_t)N * r->feat, "gradients");
    size_t nl = (size_t)N * r->num_classes;
    r->logits = dalloc(r, nl, "logits");
    r->probs = dalloc(r, nl, "logits");
    r->dlogits = dalloc(r, nl, "logits");
    for (int k = 0; k < 4; k++) r->gbuf[k] = dalloc(r, r->maxact, "gradient buffers");
    r->sc = dalloc(r, r->maxact, "the shortcut");
    r->h_logits = callocCheck(nl, sizeof(float));
    if (!r->ok) {
        resnet_cuda_free(m);
        return NULL;
    }
    return m;
}

static int gpu_ready(const char *what) {
    const char *why = nn_cuda_unavailable();
    if (why) {
        fprintf(stderr, "error: cannot make the GPU %s: %s\n", what, why);
        return 0;
    }
    return 1;
}

Model *resnet_cifar_create_cuda(const ResNetConfig *cfg, int max_batch) {
    if (!gpu_ready("ResNet")) return NULL;
    Model *twin = resnet_cifar_create(cfg, 1); /* validates the config; table, init */
    if (!twin) return NULL;
    int n = (cfg->depth - 2) / 6;
    ResNetCuda *r = callocCheck(1, sizeof(ResNetCuda));
    r->ok = 1;
    r->cfg = *cfg;
    r->num_classes = cfg->num_classes, r->in_c = cfg->in_channels, r->in_h = cfg->in_h, r->in_w = cfg->in_w;
    r->max_batch = max_batch;
    const ParamTable *pt = &twin->pt;
    size_t used = 0;
    unit_make(r, pt, &r->stem, "conv1", "bn1", cfg->in_channels, cfg->width, 3, 1, 1, cfg->in_h, cfg->in_w, 1, &used);
    int C = cfg->width, H = r->stem.OH, W = r->stem.OW;
    for (int s = 0; s < 3; s++) {
        int OC = cfg->width << s;
        for (int i = 0; i < n; i++) {
            int stride = (s > 0 && i == 0) ? 2 : 1;
            CBlock *b = add_block(r);
            char cn[48], bn[48];
            b->Cin = C, b->Cout = OC, b->H = H, b->W = W, b->stride = stride, b->ncb = 2;
            snprintf(cn, sizeof cn, "layer%d.%d.conv1", s + 1, i);
            snprintf(bn, sizeof bn, "layer%d.%d.bn1", s + 1, i);
            unit_make(r, pt, &b->cb[0], cn, bn, C, OC, 3, stride, 1, H, W, 1, &used);
            snprintf(cn, sizeof cn, "layer%d.%d.conv2", s + 1, i);
            snprintf(bn, sizeof bn, "layer%d.%d.bn2", s + 1, i);
            unit_make(r, pt, &b->cb[1], cn, bn, OC, OC, 3, 1, 1, b->cb[0].OH, b->cb[0].OW, 1, &used);
            b->OH = b->cb[1].OH, b->OW = b->cb[1].OW;
            if (stride == 1 && C == OC) b->sc = SC_IDENTITY;
            else if (cfg->shortcut == RESNET_SHORTCUT_A) b->sc = SC_PAD;
            else {
                b->sc = SC_PROJ;
                snprintf(cn, sizeof cn, "layer%d.%d.downsample.0", s + 1, i);
                snprintf(bn, sizeof bn, "layer%d.%d.downsample.1", s + 1, i);
                unit_make(r, pt, &b->ds, cn, bn, C, OC, 1, stride, 0, H, W, 0, &used);
            }
            C = OC, H = b->OH, W = b->OW;
        }
    }
    r->FH = H, r->FW = W, r->feat = C;
    r->fc_w = find_param(pt, "fc", "weight", PK_FC_WEIGHT, (size_t)r->num_classes * C);
    r->fc_b = find_param(pt, "fc", "bias", PK_BIAS, (size_t)r->num_classes);
    if (r->fc_w < 0 || r->fc_b < 0) r->ok = 0, r->fc_w = r->fc_b = 0;
    return finish(r, twin, used, &resnet_cifar_cuda_ops);
}

Model *resnet50_create_cuda(const ResNet50Config *cfg, int max_batch) {
    if (!gpu_ready("ResNet-50")) return NULL;
    Model *twin = resnet50_create(cfg, 1);
    if (!twin) return NULL;
    static const int nblk[4] = {3, 4, 6, 3};
    ResNetCuda *r = callocCheck(1, sizeof(ResNetCuda));
    r->ok = 1;
    r->is50 = 1;
    r->cfg50 = *cfg;
    r->num_classes = cfg->num_classes, r->in_c = cfg->in_channels, r->in_h = cfg->in_h, r->in_w = cfg->in_w;
    r->max_batch = max_batch;
    const ParamTable *pt = &twin->pt;
    size_t used = 0;
    unit_make(r, pt, &r->stem, "conv1", "bn1", cfg->in_channels, cfg->width, 7, 2, 3, cfg->in_h, cfg->in_w, 1, &used);
    r->pool = 1;
    r->PH = maxpool2d_out_size(r->stem.OH, 3, 2, 1);
    r->PW = maxpool2d_out_size(r->stem.OW, 3, 2, 1);
    int C = cfg->width, H = r->PH, W = r->PW;
    for (int s = 0; s < 4; s++) {
        int w = cfg->width << s, OC = 4 * w;
        for (int i = 0; i < nblk[s]; i++) {
            int stride = (s > 0 && i == 0) ? 2 : 1;
            CBlock *b = add_block(r);
            char cn[48], bn[48];
            b->Cin = C, b->Cout = OC, b->H = H, b->W = W, b->stride = stride, b->ncb = 3;
            snprintf(cn, sizeof cn, "layer%d.%d.conv1", s + 1, i);
            snprintf(bn, sizeof bn, "layer%d.%d.bn1", s + 1, i);
            unit_make(r, pt, &b->cb[0], cn, bn, C, w, 1, 1, 0, H, W, 1, &used);
            snprintf(cn, sizeof cn, "layer%d.%d.conv2", s + 1, i);
            snprintf(bn, sizeof bn, "layer%d.%d.bn2", s + 1, i);
            unit_make(r, pt, &b->cb[1], cn, bn, w, w, 3, stride, 1, H, W, 1, &used);
            snprintf(cn, sizeof cn, "layer%d.%d.conv3", s + 1, i);
            snprintf(bn, sizeof bn, "layer%d.%d.bn3", s + 1, i);
            unit_make(r, pt, &b->cb[2], cn, bn, w, OC, 1, 1, 0, b->cb[1].OH, b->cb[1].OW, 1, &used);
            b->OH = b->cb[2].OH, b->OW = b->cb[2].OW;
            if (stride == 1 && C == OC) b->sc = SC_IDENTITY;
            else {
                b->sc = SC_PROJ;
                snprintf(cn, sizeof cn, "layer%d.%d.downsample.0", s + 1, i);
                snprintf(bn, sizeof bn, "layer%d.%d.downsample.1", s + 1, i);
                unit_make(r, pt, &b->ds, cn, bn, C, OC, 1, stride, 0, H, W, 0, &used);
            }
            C = OC, H = b->OH, W = b->OW;
        }
    }
    r->FH = H, r->FW = W, r->feat = C;
    r->fc_w = find_param(pt, "fc", "weight", PK_FC_WEIGHT, (size_t)r->num_classes * C);
    r->fc_b = find_param(pt, "fc", "bias", PK_BIAS, (size_t)r->num_classes);
    if (r->fc_w < 0 || r->fc_b < 0) r->ok = 0, r->fc_w = r->fc_b = 0;
    return finish(r, twin, used, &resnet50_cuda_ops);
}

void resnet_init_cuda(Model *m, uint64_t seed) {
    ResNetCuda *r = m->impl;
    Model *twin = r->is50 ? resnet50_create(&r->cfg50, 1) : resnet_cifar_create(&r->cfg, 1);
    if (!twin) {
        gc_fatal("error: resnet_init_cuda: cannot make the CPU twin\n");
    }
    resnet_init(twin, seed);
    memcpy(m->params, twin->params, m->pt.total * sizeof(float));
    memcpy(m->state, twin->state, m->nstate * sizeof(float));
    model_free(twin);
}

const float *resnet_logits_cuda(const Model *m) { return ((const ResNetCuda *)m->impl)->h_logits; }

/* ------------------------------------------------------------- forward ---- */

#define DP(m, r, i) ((r)->mr.d_params + (m)->pt.t[i].offset)
#define DG(m, r, i) ((r)->mr.d_grads + (m)->pt.t[i].offset)

static void unit_shape(Conv2dShape *s, const CUnit *u, int N) {
    if (conv2d_shape(s, N, u->C, u->H, u->W, u->OC, u->K, u->K, u->stride, u->pad) != 0) {
        gc_fatal("error: GPU ResNet: impossible convolution shape (input too small?)\n");
    }
}

/* y = [relu](bn(conv(x)) [+ res]) */
static void unit_forward(Model *m, ResNetCuda *r, CUnit *u, const float *x /*N,C,H,W*/,
                         const float *res /*N,OC,OH,OW or NULL*/, int N, int train) {
    Conv2dShape s;
    unit_shape(&s, u, N);
    conv2d_forward_cuda(u->c, NULL, x, DP(m, r, u->w), NULL, &s);
    const float *g = DP(m, r, u->g), *b = DP(m, r, u->b);
    float *rm = r->mr.d_state + u->rm, *rv = r->mr.d_state + u->rv;
    int HW = u->OH * u->OW;
    if (train)
        batchnorm_forward_train_cuda(u->y, u->mean, u->rstd, rm, rv, u->c, g, b, res, u->relu, N, u->OC, HW);
    else
        batchnorm_forward_eval_cuda(u->y, u->c, g, b, rm, rv, res, u->relu, N, u->OC, HW);
}

static void block_forward(Model *m, ResNetCuda *r, CBlock *b, const float *x, int N, int train) {
    b->x = x;
    const float *res;
    if (b->sc == SC_IDENTITY) res = x;
    else if (b->sc == SC_PAD) {
        resnet_shortcut_pad_forward_cuda(r->sc, x, N, b->Cin, b->Cout, b->H, b->W, b->OH, b->OW, b->stride);
        res = r->sc;
    } else {
        unit_forward(m, r, &b->ds, x, NULL, N, train);
        res = b->ds.y;
    }
    const float *in = x;
    for (int k = 0; k < b->ncb; k++) {
        unit_forward(m, r, &b->cb[k], in, k == b->ncb - 1 ? res : NULL, N, train);
        in = b->cb[k].y;
    }
}

static float resnet_cuda_forward(Model *m, const Batch *bt, int train, BatchStats *st) {
    ResNetCuda *r = m->impl;
    int N = bt->N;
    if (N < 1 || N > r->max_batch || !bt->x) {
        gc_fatal("error: GPU ResNet forward: batch of %d images (model made for 1..%d)%s\n", N, r->max_batch,
                bt->x ? "" : ", no input x");
    }
    if (bt->y)
        for (int n = 0; n < N; n++)
            if (bt->y[n] < 0 || bt->y[n] >= r->num_classes) {
                gc_fatal("error: softmax_ce: target[%d] = %d outside [0, %d)\n", n, bt->y[n], r->num_classes);
            }
    /* the host arenas are the master copy */
    cuda_mirror_upload(&r->mr, m, 1);
    cudaCheck(cudaMemcpy(r->x, bt->x, (size_t)N * r->in_c * r->in_h * r->in_w * sizeof(float),
                         cudaMemcpyHostToDevice));
    unit_forward(m, r, &r->stem, r->x, NULL, N, train);
    const float *cur = r->stem.y;
    if (r->pool) {
        maxpool2d_forward_cuda(r->pool_out, r->pool_arg, r->stem.y, N * r->stem.OC, r->stem.OH, r->stem.OW, 3, 2, 1);
        cur = r->pool_out;
    }
    for (int i = 0; i < r->nblocks; i++) {
        block_forward(m, r, &r->blocks[i], cur, N, train);
        cur = r->blocks[i].cb[r->blocks[i].ncb - 1].y;
    }
    avgpool_global_forward_cuda(r->pooled, cur, N, r->feat, r->FH * r->FW);
    linear_forward_cuda(r->logits, r->pooled, DP(m, r, r->fc_w), DP(m, r, r->fc_b), N, r->feat, r->num_classes);
    float loss = 0.0f;
    long correct = 0;
    r->have_labels = bt->y != NULL;
    if (bt->y) {
        cudaCheck(cudaMemcpy(r->labels, bt->y, (size_t)N * sizeof(int), cudaMemcpyHostToDevice));
        loss = softmax_ce_forward_cuda(r->probs, &correct, r->logits, r->labels, N, r->num_classes);
    }
    cudaCheck(cudaMemcpy(r->h_logits, r->logits, (size_t)N * r->num_classes * sizeof(float),
                         cudaMemcpyDeviceToHost));
    if (train) cuda_mirror_download_state(&r->mr, m);
    if (st) {
        st->loss = loss;
        st->correct = correct;
        st->count = N;
    }
    r->lastN = N;
    r->last_train = train;
    return loss;
}

/* ------------------------------------------------------------ backward ---- */

/* dy (destroyed: the ReLU mask is applied in place, leaving dL/dz for a
 * residual) -> dx (OVERWRITTEN; NULL = skip), weight/BN gradients accumulate.
 * tmp receives dc (the conv output's gradient); it must differ from dy and dx. */
static void unit_backward(Model *m, ResNetCuda *r, CUnit *u, float *dx /*N,C,H,W*/, float *dy /*N,OC,OH,OW*/,
                          float *tmp, const float *x /*N,C,H,W*/, int N) {
    batchnorm_backward_cuda(tmp, u->relu ? dy : NULL, DG(m, r, u->g), DG(m, r, u->b), dy, u->relu ? u->y : NULL,
                            u->c, u->mean, u->rstd, DP(m, r, u->g), N, u->OC, u->OH * u->OW);
    Conv2dShape s;
    unit_shape(&s, u, N);
    conv2d_backward_cuda(dx, DG(m, r, u->w), NULL, NULL, tmp, x, DP(m, r, u->w), &s);
}

/* dY in P (destroyed) -> dX in Q (overwritten); R, S scratch */
static void block_backward(Model *m, ResNetCuda *r, CBlock *b, float *Q, float *P, float *R, float *S, int N) {
    int L = b->ncb - 1;
    /* last unit: z = bn(conv(in)) + res, y = relu(z): P becomes dz = the residual's gradient */
    unit_backward(m, r, &b->cb[L], S, P, R, L > 0 ? b->cb[L - 1].y : b->x, N);
    /* S holds d(input of the last unit) = d(output of unit L-1); walk down */
    for (int k = L - 1; k >= 0; k--)
        unit_backward(m, r, &b->cb[k], k == 0 ? Q : S, S, R, k > 0 ? b->cb[k - 1].y : b->x, N);
    /* Q = d(block input) through the main path; add the shortcut path */
    size_t nin = (size_t)N * b->Cin * b->H * b->W;
    if (b->sc == SC_IDENTITY) add_inplace_cuda(Q, P, nin);
    else if (b->sc == SC_PAD)
        resnet_shortcut_pad_backward_cuda(Q, P, N, b->Cin, b->Cout, b->H, b->W, b->OH, b->OW, b->stride);
    else {
        /* projection: res = bn(conv1x1(x)), no ReLU: P is read, not changed */
        unit_backward(m, r, &b->ds, S, P, R, b->x, N);
        add_inplace_cuda(Q, S, nin);
    }
}

static void resnet_cuda_backward(Model *m) {
    ResNetCuda *r = m->impl;
    if (!r->last_train || !r->have_labels || r->lastN < 1) {
        gc_fatal("error: GPU ResNet backward needs a preceding training forward with labels\n");
    }
    int N = r->lastN;
    cudaCheck(cudaMemsetAsync(r->mr.d_grads, 0, m->pt.total * sizeof(float), 0));
    softmax_ce_backward_cuda(r->dlogits, r->probs, r->labels, 1.0f / N, N, r->num_classes);
    linear_backward_cuda(r->dpooled, DG(m, r, r->fc_w), DG(m, r, r->fc_b), r->dlogits, r->pooled,
                         DP(m, r, r->fc_w), N, r->feat, r->num_classes);
    float *P = r->gbuf[0], *Q = r->gbuf[1], *R = r->gbuf[2], *S = r->gbuf[3];
    avgpool_global_backward_cuda(P, r->dpooled, N, r->feat, r->FH * r->FW);
    for (int i = r->nblocks - 1; i >= 0; i--) {
        block_backward(m, r, &r->blocks[i], Q, P, R, S, N);
        float *t = P;
        P = Q;
        Q = t;
    }
    /* P = d(stem output, or pool output) */
    if (r->pool) {
        maxpool2d_backward_cuda(Q, P, r->pool_arg, N * r->stem.OC, r->stem.OH, r->stem.OW, 3, 2, 1);
        float *t = P;
        P = Q;
        Q = t;
    }
    unit_backward(m, r, &r->stem, NULL, P, R, r->x, N);
    cuda_mirror_download_grads(&r->mr, m);
}

static void resnet_cuda_free(Model *m) {
    if (!m) return;
    ResNetCuda *r = m->impl;
    if (r) {
        unit_free(&r->stem);
        for (int i = 0; i < r->nblocks; i++) {
            CBlock *b = &r->blocks[i];
            for (int k = 0; k < b->ncb; k++) unit_free(&b->cb[k]);
            if (b->sc == SC_PROJ) unit_free(&b->ds);
        }
        free(r->blocks);
        float *dev[] = {r->pool_out, (float *)r->pool_arg, r->x, (float *)r->labels, r->pooled, r->dpooled,
                        r->logits, r->probs, r->dlogits, r->gbuf[0], r->gbuf[1], r->gbuf[2], r->gbuf[3], r->sc};
        for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) cudaCheck(cudaFree(dev[i]));
        cuda_mirror_free(&r->mr);
        free(r->h_logits);
        free(r);
    }
    cuda_model_free_host(m);
}

static const ModelOps resnet_cifar_cuda_ops = {.name = "resnet_cifar_cuda",
                                               .forward = resnet_cuda_forward,
                                               .backward = resnet_cuda_backward,
                                               .free = resnet_cuda_free};
static const ModelOps resnet50_cuda_ops = {.name = "resnet50_cuda",
                                           .forward = resnet_cuda_forward,
                                           .backward = resnet_cuda_backward,
                                           .free = resnet_cuda_free};

#else /* built without CUDA: the entry points exist and say so */

#include "nn/model.h"

Model *resnet_cifar_create_cuda(const ResNetConfig *cfg, int max_batch) {
    (void)cfg, (void)max_batch;
    fprintf(stderr, "error: cannot make the GPU ResNet: this build has no CUDA (nvcc was not found, or NO_CUDA=1)\n");
    return NULL;
}

Model *resnet50_create_cuda(const ResNet50Config *cfg, int max_batch) {
    (void)cfg, (void)max_batch;
    fprintf(stderr, "error: cannot make the GPU ResNet-50: this build has no CUDA (nvcc was not found, or NO_CUDA=1)\n");
    return NULL;
}

void resnet_init_cuda(Model *m, uint64_t seed) { (void)m, (void)seed; }

const float *resnet_logits_cuda(const Model *m) {
    (void)m;
    return NULL;
}

#endif
