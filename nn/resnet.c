/* ResNet for CIFAR and ResNet-50 (see resnet.h).
 *
 * Activations are CNHW: [C, N, H, W], each channel row padded to a stride ld
 * (act_ld: a multiple of 16 floats that is not a multiple of 4 KiB, so the
 * channels of one position do not all fall into the same cache sets).
 * Shape letters: N batch, C channels, H,W spatial size, OC output channels,
 * M = N*H*W values per channel, ld the channel stride.
 * Model-level backward OVERWRITES m->grads (zeroed first); the ops below it
 * accumulate.
 *
 * Building block: a ConvBN unit = conv (no bias) -> BN [-> + residual] [-> ReLU].
 * It stores its conv output c (BN backward needs it) and its output y (the next
 * unit's input, and the ReLU mask). A block's backward uses four rotating
 * gradient buffers of the largest activation size.
 */
#include "nn/resnet.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/check.h"
#include "common/clock.h"
#include "common/rng.h"
#include "nn/batchnorm.h"
#include "nn/conv2d.h"
#include "nn/layout.h"
#include "nn/linear.h"
#include "nn/parallel.h"
#include "nn/pool.h"
#include "nn/softmax_ce.h"

typedef struct {
    int w, g, b;      /* parameter indices: conv weight, bn gamma, bn beta */
    size_t rm, rv;    /* running mean / var offsets in Model.state */
    int C, OC, K, stride, pad;
    int H, W, OH, OW; /* per-image input and output size */
    size_t ldi, ldo;  /* channel strides of its input and output */
    int relu;
    float *c, *y;     /* [OC, ldo]: conv output, unit output */
    float *mean, *rstd; /* [OC] batch statistics saved for backward */
} ConvBN;

enum { SC_IDENTITY, SC_PAD, SC_PROJ };

typedef struct {
    ConvBN cb[3];
    int ncb;       /* 2 basic, 3 bottleneck */
    int sc;        /* SC_* */
    ConvBN ds;     /* projection shortcut (SC_PROJ) */
    int Cin, Cout, H, W, OH, OW, stride;
    float *x;      /* block input (not owned) */
} Block;

typedef struct {
    int is50;
    int num_classes, in_c, in_h, in_w;
    int max_batch;
    ConvBN stem;
    int pool;            /* ResNet-50: 3x3/2 max pool after the stem */
    int PH, PW;          /* pooled size */
    float *pool_out;     /* [64, ldp] */
    int *pool_arg;
    Block *blocks;
    int nblocks;
    int fc_w, fc_b, feat, FH, FW; /* fc indices, its input features, final map size */
    float *x;            /* input, CNHW [in_c, ldx] */
    size_t ldx, ldp, ldf; /* channel strides: input, pool output, final feature map */
    float *pooled;       /* [N, feat] */
    float *dpooled;      /* [N, feat] */
    float *logits, *probs, *dlogits; /* [N, classes] */
    int *labels;
    float *gbuf[4];      /* gradient scratch, max activation size each */
    float *sc;           /* option A shortcut scratch */
    size_t maxact;
    float *work;         /* conv scratch */
    size_t work_floats;
    int lastN, last_train, have_labels;
    int profiling;
    double prof[8];
} ResNet;

enum { PR_CONV_F, PR_CONV_B, PR_BN_F, PR_BN_B, PR_OTHER_F, PR_OTHER_B, PR_N };
static const char *const prof_names[PR_N] = {"conv forward",     "conv backward",  "bn(+add+relu) forward",
                                             "bn(+relu) backward", "other forward", "other backward"};

/* time the statement into bucket k when profiling */
#define TIMED(r, k, stmt)                                  \
    do {                                                   \
        double t0_ = (r)->profiling ? mono_seconds() : 0.0;        \
        stmt;                                              \
        if ((r)->profiling) (r)->prof[k] += mono_seconds() - t0_;  \
    } while (0)

/* ------------------------------------------------------------ building ---- */

typedef struct {
    ParamTable *pt;
    size_t nstate;
    size_t maxact;
    int max_batch;
} Builder;

/* channel stride for rows of p values */
static size_t act_ld(size_t p) {
    size_t ld = (p + 15) & ~(size_t)15;
    if (ld % 1024 == 0) ld += 16;
    return ld;
}

static int add_param(Builder *bd, const char *name, ParamKind kind, int ndim, int d0, int d1, int d2, int d3) {
    int shape[4] = {d0, d1, d2, d3};
    return param_table_add(bd->pt, name, kind, ndim, shape);
}

/* registers "<pre>conv<i>.weight", "<pre>bn<i>.weight/.bias" (or custom names) */
static void convbn_make(ConvBN *u, Builder *bd, const char *convname, const char *bnname, int C, int OC, int K,
                        int stride, int pad, int H, int W, int relu) {
    char name[PARAM_NAME_MAX];
    memset(u, 0, sizeof *u);
    u->C = C, u->OC = OC, u->K = K, u->stride = stride, u->pad = pad, u->H = H, u->W = W, u->relu = relu;
    u->OH = (H + 2 * pad - K) / stride + 1;
    u->OW = (W + 2 * pad - K) / stride + 1;
    u->ldi = act_ld((size_t)bd->max_batch * H * W);
    u->ldo = act_ld((size_t)bd->max_batch * u->OH * u->OW);
    snprintf(name, sizeof name, "%s.weight", convname);
    u->w = add_param(bd, name, PK_CONV_WEIGHT, 4, OC, C, K, K);
    snprintf(name, sizeof name, "%s.weight", bnname);
    u->g = add_param(bd, name, PK_BN_WEIGHT, 1, OC, 0, 0, 0);
    snprintf(name, sizeof name, "%s.bias", bnname);
    u->b = add_param(bd, name, PK_BN_BIAS, 1, OC, 0, 0, 0);
    u->rm = bd->nstate;
    u->rv = bd->nstate + OC;
    bd->nstate += 2 * (size_t)OC;
    size_t act = (size_t)OC * u->ldo;
    if (act > bd->maxact) bd->maxact = act;
}

static void convbn_alloc(ConvBN *u, int max_batch) {
    (void)max_batch;
    size_t act = (size_t)u->OC * u->ldo;
    u->c = callocCheck(act, sizeof(float));
    u->y = callocCheck(act, sizeof(float));
    u->mean = mallocCheck((size_t)u->OC * sizeof(float));
    u->rstd = mallocCheck((size_t)u->OC * sizeof(float));
}

static void convbn_free(ConvBN *u) {
    free(u->c), free(u->y), free(u->mean), free(u->rstd);
}

static Block *add_block(ResNet *r) {
    r->blocks = reallocCheck(r->blocks, (size_t)(r->nblocks + 1) * sizeof(Block));
    Block *b = &r->blocks[r->nblocks++];
    memset(b, 0, sizeof *b);
    return b;
}

static void fc_make(ResNet *r, Builder *bd, int feat) {
    r->feat = feat;
    r->fc_w = add_param(bd, "fc.weight", PK_FC_WEIGHT, 2, r->num_classes, feat, 0, 0);
    r->fc_b = add_param(bd, "fc.bias", PK_BIAS, 1, r->num_classes, 0, 0, 0);
}

static const ModelOps resnet_cifar_ops, resnet50_ops;

static Model *finish(ResNet *r, Builder *bd, ParamTable *pt, const ModelOps *ops, uint64_t seed) {
    int N = r->max_batch;
    convbn_alloc(&r->stem, N);
    for (int i = 0; i < r->nblocks; i++) {
        Block *b = &r->blocks[i];
        for (int k = 0; k < b->ncb; k++) convbn_alloc(&b->cb[k], N);
        if (b->sc == SC_PROJ) convbn_alloc(&b->ds, N);
    }
    r->maxact = bd->maxact;
    r->ldx = act_ld((size_t)N * r->in_h * r->in_w);
    size_t xin = (size_t)r->in_c * r->ldx;
    if (xin > r->maxact) r->maxact = xin;
    if (r->pool) {
        r->ldp = act_ld((size_t)N * r->PH * r->PW);
        size_t np = (size_t)r->stem.OC * r->ldp;
        r->pool_out = callocCheck(np, sizeof(float));
        r->pool_arg = callocCheck(np, sizeof(int));
        if (np > r->maxact) r->maxact = np;
    }
    r->ldf = act_ld((size_t)N * r->FH * r->FW);
    r->x = callocCheck(xin, sizeof(float));
    r->pooled = mallocCheck((size_t)N * r->feat * sizeof(float));
    r->dpooled = mallocCheck((size_t)N * r->feat * sizeof(float));
    size_t nl = (size_t)N * r->num_classes;
    r->logits = callocCheck(nl, sizeof(float));
    r->probs = mallocCheck(nl * sizeof(float));
    r->dlogits = mallocCheck(nl * sizeof(float));
    r->labels = mallocCheck((size_t)N * sizeof(int));
    for (int k = 0; k < 4; k++) r->gbuf[k] = callocCheck(r->maxact, sizeof(float));
    r->sc = callocCheck(r->maxact, sizeof(float));

    Model *m = callocCheck(1, sizeof(Model));
    m->ops = ops;
    m->pt = *pt;
    m->params = param_arena_alloc(&m->pt);
    m->grads = param_arena_alloc(&m->pt);
    m->nstate = bd->nstate;
    m->state = callocCheck(m->nstate ? m->nstate : 1, sizeof(float));
    m->impl = r;
    resnet_init(m, seed);
    return m;
}

ResNetConfig resnet_cifar_config(int depth) {
    ResNetConfig c = {.depth = depth, .width = 16, .num_classes = 10, .in_channels = 3, .in_h = 32, .in_w = 32,
                      .shortcut = RESNET_SHORTCUT_A, .seed = 0};
    return c;
}

ResNet50Config resnet50_config(void) {
    ResNet50Config c = {.num_classes = 1000, .in_channels = 3, .in_h = 224, .in_w = 224, .width = 64, .seed = 0};
    return c;
}

Model *resnet_cifar_create(const ResNetConfig *cfg, int max_batch) {
    if (cfg->depth < 8 || (cfg->depth - 2) % 6 != 0) {
        fprintf(stderr, "error: ResNet depth %d is not 6n+2 with n >= 1 (20, 32, 44, 56, 110, ...)\n", cfg->depth);
        return NULL;
    }
    if (cfg->width < 1 || cfg->num_classes < 1 || cfg->in_channels < 1 || cfg->in_h < 4 || cfg->in_w < 4 ||
        max_batch < 1 || (cfg->shortcut != RESNET_SHORTCUT_A && cfg->shortcut != RESNET_SHORTCUT_B)) {
        fprintf(stderr, "error: bad ResNet config (width %d, classes %d, input %dx%dx%d, shortcut %d, max batch %d)\n",
                cfg->width, cfg->num_classes, cfg->in_channels, cfg->in_h, cfg->in_w, (int)cfg->shortcut, max_batch);
        return NULL;
    }
    int n = (cfg->depth - 2) / 6;
    ResNet *r = callocCheck(1, sizeof(ResNet));
    r->num_classes = cfg->num_classes, r->in_c = cfg->in_channels, r->in_h = cfg->in_h, r->in_w = cfg->in_w;
    r->max_batch = max_batch;
    ParamTable pt;
    param_table_init(&pt);
    Builder bd = {.pt = &pt, .max_batch = max_batch};
    convbn_make(&r->stem, &bd, "conv1", "bn1", cfg->in_channels, cfg->width, 3, 1, 1, cfg->in_h, cfg->in_w, 1);
    int C = cfg->width, H = r->stem.OH, W = r->stem.OW;
    for (int s = 0; s < 3; s++) {
        int OC = cfg->width << s;
        for (int i = 0; i < n; i++) {
            int stride = (s > 0 && i == 0) ? 2 : 1;
            Block *b = add_block(r);
            char cn[48], bn[48];
            b->Cin = C, b->Cout = OC, b->H = H, b->W = W, b->stride = stride, b->ncb = 2;
            snprintf(cn, sizeof cn, "layer%d.%d.conv1", s + 1, i);
            snprintf(bn, sizeof bn, "layer%d.%d.bn1", s + 1, i);
            convbn_make(&b->cb[0], &bd, cn, bn, C, OC, 3, stride, 1, H, W, 1);
            snprintf(cn, sizeof cn, "layer%d.%d.conv2", s + 1, i);
            snprintf(bn, sizeof bn, "layer%d.%d.bn2", s + 1, i);
            convbn_make(&b->cb[1], &bd, cn, bn, OC, OC, 3, 1, 1, b->cb[0].OH, b->cb[0].OW, 1);
            b->OH = b->cb[1].OH, b->OW = b->cb[1].OW;
            if (stride == 1 && C == OC) b->sc = SC_IDENTITY;
            else if (cfg->shortcut == RESNET_SHORTCUT_A) b->sc = SC_PAD;
            else {
                b->sc = SC_PROJ;
                snprintf(cn, sizeof cn, "layer%d.%d.downsample.0", s + 1, i);
                snprintf(bn, sizeof bn, "layer%d.%d.downsample.1", s + 1, i);
                convbn_make(&b->ds, &bd, cn, bn, C, OC, 1, stride, 0, H, W, 0);
            }
            C = OC, H = b->OH, W = b->OW;
        }
    }
    r->FH = H, r->FW = W;
    fc_make(r, &bd, C);
    return finish(r, &bd, &pt, &resnet_cifar_ops, cfg->seed);
}

Model *resnet50_create(const ResNet50Config *cfg, int max_batch) {
    if (cfg->num_classes < 1 || cfg->in_channels < 1 || cfg->in_h < 32 || cfg->in_w < 32 || cfg->width < 1 ||
        max_batch < 1) {
        fprintf(stderr, "error: bad ResNet-50 config (classes %d, input %dx%dx%d (>= 32x32), width %d, max batch %d)\n",
                cfg->num_classes, cfg->in_channels, cfg->in_h, cfg->in_w, cfg->width, max_batch);
        return NULL;
    }
    static const int nblk[4] = {3, 4, 6, 3};
    ResNet *r = callocCheck(1, sizeof(ResNet));
    r->is50 = 1;
    r->num_classes = cfg->num_classes, r->in_c = cfg->in_channels, r->in_h = cfg->in_h, r->in_w = cfg->in_w;
    r->max_batch = max_batch;
    ParamTable pt;
    param_table_init(&pt);
    Builder bd = {.pt = &pt, .max_batch = max_batch};
    convbn_make(&r->stem, &bd, "conv1", "bn1", cfg->in_channels, cfg->width, 7, 2, 3, cfg->in_h, cfg->in_w, 1);
    r->pool = 1;
    r->PH = maxpool2d_out_size(r->stem.OH, 3, 2, 1);
    r->PW = maxpool2d_out_size(r->stem.OW, 3, 2, 1);
    int C = cfg->width, H = r->PH, W = r->PW;
    for (int s = 0; s < 4; s++) {
        int w = cfg->width << s, OC = 4 * w;
        for (int i = 0; i < nblk[s]; i++) {
            int stride = (s > 0 && i == 0) ? 2 : 1;
            Block *b = add_block(r);
            char cn[48], bn[48];
            b->Cin = C, b->Cout = OC, b->H = H, b->W = W, b->stride = stride, b->ncb = 3;
            snprintf(cn, sizeof cn, "layer%d.%d.conv1", s + 1, i);
            snprintf(bn, sizeof bn, "layer%d.%d.bn1", s + 1, i);
            convbn_make(&b->cb[0], &bd, cn, bn, C, w, 1, 1, 0, H, W, 1);
            snprintf(cn, sizeof cn, "layer%d.%d.conv2", s + 1, i);
            snprintf(bn, sizeof bn, "layer%d.%d.bn2", s + 1, i);
            convbn_make(&b->cb[1], &bd, cn, bn, w, w, 3, stride, 1, H, W, 1);
            snprintf(cn, sizeof cn, "layer%d.%d.conv3", s + 1, i);
            snprintf(bn, sizeof bn, "layer%d.%d.bn3", s + 1, i);
            convbn_make(&b->cb[2], &bd, cn, bn, w, OC, 1, 1, 0, b->cb[1].OH, b->cb[1].OW, 1);
            b->OH = b->cb[2].OH, b->OW = b->cb[2].OW;
            if (stride == 1 && C == OC) b->sc = SC_IDENTITY;
            else {
                b->sc = SC_PROJ;
                snprintf(cn, sizeof cn, "layer%d.%d.downsample.0", s + 1, i);
                snprintf(bn, sizeof bn, "layer%d.%d.downsample.1", s + 1, i);
                convbn_make(&b->ds, &bd, cn, bn, C, OC, 1, stride, 0, H, W, 0);
            }
            C = OC, H = b->OH, W = b->OW;
        }
    }
    r->FH = H, r->FW = W;
    size_t stem_act = (size_t)r->stem.OC * max_batch * r->stem.OH * r->stem.OW;
    if (stem_act > bd.maxact) bd.maxact = stem_act;
    fc_make(r, &bd, C);
    return finish(r, &bd, &pt, &resnet50_ops, cfg->seed);
}

static void reset_var(Model *m, const ConvBN *u) {
    for (int k = 0; k < u->OC; k++) m->state[u->rv + k] = 1.0f;
}

void resnet_init(Model *m, uint64_t seed) {
    Rng rng;
    rng_init(&rng, seed, 0);
    const ParamTable *pt = &m->pt;
    for (int i = 0; i < pt->n; i++) {
        const ParamInfo *t = &pt->t[i];
        float *p = m->params + t->offset;
        switch (t->kind) {
        case PK_CONV_WEIGHT: { /* kaiming_normal_(mode="fan_out", nonlinearity="relu") */
            double fan_out = (double)t->shape[0] * t->shape[2] * t->shape[3];
            float std = (float)sqrt(2.0 / fan_out);
            for (size_t k = 0; k < t->numel; k++) p[k] = std * rng_normal(&rng);
            break;
        }
        case PK_BN_WEIGHT:
            for (size_t k = 0; k < t->numel; k++) p[k] = 1.0f;
            break;
        case PK_BN_BIAS:
            memset(p, 0, t->numel * sizeof(float));
            break;
        case PK_FC_WEIGHT: { /* nn.Linear: kaiming_uniform_(a=sqrt(5)) = U(+-1/sqrt(fan_in)) */
            float bound = (float)(1.0 / sqrt((double)t->shape[1]));
            for (size_t k = 0; k < t->numel; k++) p[k] = bound * (2.0f * rng_uniform(&rng) - 1.0f);
            break;
        }
        default: { /* fc bias: U(+-1/sqrt(fan_in)) of the weight before it */
            int fan_in = (i > 0 && pt->t[i - 1].kind == PK_FC_WEIGHT) ? pt->t[i - 1].shape[1] : 1;
            float bound = (float)(1.0 / sqrt((double)fan_in));
            for (size_t k = 0; k < t->numel; k++) p[k] = bound * (2.0f * rng_uniform(&rng) - 1.0f);
            break;
        }
        }
    }
    /* running mean 0, running var 1: the state is [mean C][var C] per BN */
    ResNet *r = m->impl;
    for (size_t k = 0; k < m->nstate; k++) m->state[k] = 0.0f;
    reset_var(m, &r->stem);
    for (int b = 0; b < r->nblocks; b++) {
        Block *bl = &r->blocks[b];
        for (int j = 0; j < bl->ncb; j++) reset_var(m, &bl->cb[j]);
        if (bl->sc == SC_PROJ) reset_var(m, &bl->ds);
    }
}

const float *resnet_logits(const Model *m) { return ((const ResNet *)m->impl)->logits; }

void resnet_profile(Model *m, int enable) {
    ResNet *r = m->impl;
    if (enable) memset(r->prof, 0, sizeof r->prof);
    r->profiling = enable;
}

void resnet_profile_report(const Model *m, FILE *f, int steps) {
    const ResNet *r = m->impl;
    double tot = 0;
    for (int k = 0; k < PR_N; k++) tot += r->prof[k];
    if (steps < 1) steps = 1;
    fprintf(f, "time per step by layer type (ms, share of the model's forward+backward):\n");
    for (int k = 0; k < PR_N; k++)
        fprintf(f, "  %-24s %8.2f  %5.1f%%\n", prof_names[k], 1e3 * r->prof[k] / steps,
                tot > 0 ? 100.0 * r->prof[k] / tot : 0.0);
    fprintf(f, "  %-24s %8.2f\n", "total", 1e3 * tot / steps);
}

/* ------------------------------------------------------------- forward ---- */

static void ensure_work(ResNet *r, const Conv2dShape *s) {
    size_t need = conv2d_work_floats(s);
    if (need > r->work_floats) {
        free(r->work);
        r->work = mallocCheck(need * sizeof(float));
        r->work_floats = need;
    }
}

static void convbn_shape(Conv2dShape *s, const ConvBN *u, int N) {
    if (conv2d_shape(s, N, u->C, u->H, u->W, u->OC, u->K, u->K, u->stride, u->pad) != 0) {
        gc_fatal("error: ResNet: impossible convolution shape (input too small?)\n");
    }
    s->ldi = u->ldi;
    s->ldo = u->ldo;
}

/* y = [relu](bn(conv(x)) [+ res]) */
static void convbn_forward(ResNet *r, Model *m, ConvBN *u, const float *x /*C,ldi*/,
                           const float *res /*OC,ldo or NULL*/, int N, int train) {
    Conv2dShape s;
    convbn_shape(&s, u, N);
    ensure_work(r, &s);
    TIMED(r, PR_CONV_F, conv2d_forward(u->c, r->work, x, m->params + m->pt.t[u->w].offset, NULL, &s));
    double t0 = r->profiling ? mono_seconds() : 0.0;
    const float *g = m->params + m->pt.t[u->g].offset, *b = m->params + m->pt.t[u->b].offset;
    int M = N * u->OH * u->OW;
    if (train)
        batchnorm_forward_train(u->y, u->mean, u->rstd, m->state + u->rm, m->state + u->rv, u->c, g, b, res, u->relu,
                                u->OC, M, u->ldo);
    else
        batchnorm_forward_eval(u->y, u->c, g, b, m->state + u->rm, m->state + u->rv, res, u->relu, u->OC, M,
                               u->ldo);
    if (r->profiling) r->prof[PR_BN_F] += mono_seconds() - t0;
}

/* option A: out[c, n, oh, ow] = x[c - lo, n, oh*stride, ow*stride] for lo <= c < lo + Cin, else 0 */
static void shortcut_pad_forward(float *out /*Cout,ldo*/, const float *x /*Cin,ldi*/, const Block *b, int N) {
    int lo = (b->Cout - b->Cin) / 2;
    size_t plane = (size_t)N * b->OH * b->OW;
    const size_t ldi = b->cb[0].ldi, ldo = b->cb[b->ncb - 1].ldo;
    OMP_FOR_DYN
    for (int c = 0; c < b->Cout; c++) {
        float *o = out + (size_t)c * ldo;
        int ci = c - lo;
        if (ci < 0 || ci >= b->Cin) {
            memset(o, 0, plane * sizeof(float));
            continue;
        }
        for (int n = 0; n < N; n++)
            for (int oh = 0; oh < b->OH; oh++) {
                const float *src = x + (size_t)ci * ldi + ((size_t)n * b->H + (size_t)oh * b->stride) * b->W;
                float *dst = o + ((size_t)n * b->OH + oh) * b->OW;
                for (int ow = 0; ow < b->OW; ow++) dst[ow] = src[(size_t)ow * b->stride];
            }
    }
}

/* adjoint of shortcut_pad_forward, accumulated: dx[ci, n, oh*s, ow*s] += dout[ci + lo, n, oh, ow] */
static void shortcut_pad_backward(float *dx /*Cin,ldi, +=*/, const float *dout /*Cout,ldo*/, const Block *b,
                                  int N) {
    int lo = (b->Cout - b->Cin) / 2;
    const size_t ldi = b->cb[0].ldi, ldo = b->cb[b->ncb - 1].ldo;
    OMP_FOR_DYN
    for (int ci = 0; ci < b->Cin; ci++)
        for (int n = 0; n < N; n++)
            for (int oh = 0; oh < b->OH; oh++) {
                float *dst = dx + (size_t)ci * ldi + ((size_t)n * b->H + (size_t)oh * b->stride) * b->W;
                const float *src = dout + (size_t)(ci + lo) * ldo + ((size_t)n * b->OH + oh) * b->OW;
                for (int ow = 0; ow < b->OW; ow++) dst[(size_t)ow * b->stride] += src[ow];
            }
}

static void block_forward(ResNet *r, Model *m, Block *b, float *x, int N, int train) {
    b->x = x;
    const float *res;
    if (b->sc == SC_IDENTITY) res = x;
    else if (b->sc == SC_PAD) {
        TIMED(r, PR_OTHER_F, shortcut_pad_forward(r->sc, x, b, N));
        res = r->sc;
    } else {
        convbn_forward(r, m, &b->ds, x, NULL, N, train);
        res = b->ds.y;
    }
    const float *in = x;
    for (int k = 0; k < b->ncb; k++) {
        convbn_forward(r, m, &b->cb[k], in, k == b->ncb - 1 ? res : NULL, N, train);
        in = b->cb[k].y;
    }
}

static float resnet_forward(Model *m, const Batch *bt, int train, BatchStats *st) {
    ResNet *r = m->impl;
    int N = bt->N;
    if (N < 1 || N > r->max_batch || !bt->x) {
        gc_fatal("error: ResNet forward: batch of %d images (model made for 1..%d)%s\n", N, r->max_batch,
                bt->x ? "" : ", no input x");
    }
    /* NCHW -> CNHW */
    TIMED(r, PR_OTHER_F,
          swap01_ld(r->x, bt->x, N, r->in_c, r->in_h * r->in_w, r->ldx, (size_t)r->in_c * r->in_h * r->in_w));
    convbn_forward(r, m, &r->stem, r->x, NULL, N, train);
    float *cur = r->stem.y;
    if (r->pool) {
        for (int c = 0; c < r->stem.OC; c++)
            maxpool2d_forward(r->pool_out + c * r->ldp, r->pool_arg + c * r->ldp, r->stem.y + c * r->stem.ldo, N,
                              r->stem.OH, r->stem.OW, 3, 2, 1);
        cur = r->pool_out;
    }
    for (int i = 0; i < r->nblocks; i++) {
        block_forward(r, m, &r->blocks[i], cur, N, train);
        cur = r->blocks[i].cb[r->blocks[i].ncb - 1].y;
    }
    double t0 = r->profiling ? mono_seconds() : 0.0;
    avgpool_global_forward(r->pooled, cur, N, r->feat, r->FH * r->FW, r->ldf);
    linear_forward(r->logits, r->pooled, m->params + m->pt.t[r->fc_w].offset, m->params + m->pt.t[r->fc_b].offset, N,
                   r->feat, r->num_classes);
    float loss = 0.0f;
    long correct = 0;
    r->have_labels = bt->y != NULL;
    if (bt->y) {
        memcpy(r->labels, bt->y, (size_t)N * sizeof(int));
        loss = softmax_ce_forward(r->probs, &correct, r->logits, r->labels, N, r->num_classes);
    }
    if (r->profiling) r->prof[PR_OTHER_F] += mono_seconds() - t0;
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

/* acc[c*ld + i] += x[c*ld + i] for i < M */
static void add_rows(float *acc /*C,ld*/, const float *x /*C,ld*/, int C, int M, size_t ld) {
    OMP_FOR_DYN
    for (int c = 0; c < C; c++) {
        float *a = acc + (size_t)c * ld;
        const float *b = x + (size_t)c * ld;
        for (int i = 0; i < M; i++) a[i] += b[i];
    }
}

/* dy (in *dyp) -> dx (into dx, OVERWRITTEN; NULL = skip). Uses tmp as scratch.
 * If dres is non-NULL the gradient w.r.t. the residual input is left there
 * (it may be the same buffer as dy). dy is destroyed. */
static void convbn_backward(ResNet *r, Model *m, ConvBN *u, float *dx /*C,ldi*/, float *dres /*OC,ldo*/,
                            float *dy /*OC,ldo*/, float *tmp /*OC,ldo*/, const float *x /*C,ldi*/, int N) {
    int M = N * u->OH * u->OW;
    float *g = m->params + m->pt.t[u->g].offset;
    float *dc = dres ? tmp : dy; /* BN backward may write dinp over dout, but not when dres also does */
    TIMED(r, PR_BN_B,
          batchnorm_backward(dc, dres, m->grads + m->pt.t[u->g].offset, m->grads + m->pt.t[u->b].offset, dy,
                             u->relu ? u->y : NULL, u->c, u->mean, u->rstd, g, u->OC, M, u->ldo));
    Conv2dShape s;
    convbn_shape(&s, u, N);
    ensure_work(r, &s);
    TIMED(r, PR_CONV_B,
          conv2d_backward(dx, m->grads + m->pt.t[u->w].offset, NULL, r->work, dc, x,
                          m->params + m->pt.t[u->w].offset, &s));
}

/* dY in P (destroyed) -> dX in Q (overwritten); R, S scratch */
static void block_backward(ResNet *r, Model *m, Block *b, float *Q, float *P, float *R, float *S, int N) {
    int L = b->ncb - 1;
    /* last unit: z = bn(conv(in)) + res, y = relu(z): dres = dz (kept in P) */
    const float *in_last = L > 0 ? b->cb[L - 1].y : b->x;
    convbn_backward(r, m, &b->cb[L], S, P, P, R, in_last, N);
    /* S holds d(input of last unit); walk down the remaining units */
    float *cur = S, *other = R;
    for (int k = L - 1; k >= 0; k--) {
        const float *in = k > 0 ? b->cb[k - 1].y : b->x;
        float *dst = k == 0 ? Q : other;
        convbn_backward(r, m, &b->cb[k], dst, NULL, cur, NULL, in, N);
        other = cur;
        cur = dst;
    }
    (void)other;
    /* now Q = d(block input) through the main path; add the shortcut path */
    if (b->sc == SC_IDENTITY) TIMED(r, PR_OTHER_B, add_rows(Q, P, b->Cin, N * b->H * b->W, b->cb[0].ldi));
    else if (b->sc == SC_PAD) TIMED(r, PR_OTHER_B, shortcut_pad_backward(Q, P, b, N));
    else {
        /* projection: res = bn(conv1x1(x)); its gradient is P; R and S are free now */
        convbn_backward(r, m, &b->ds, S, NULL, P, NULL, b->x, N);
        add_rows(Q, S, b->Cin, N * b->H * b->W, b->cb[0].ldi);
    }
}

static void resnet_backward(Model *m) {
    ResNet *r = m->impl;
    if (!r->last_train || !r->have_labels || r->lastN < 1) {
        gc_fatal("error: ResNet backward needs a preceding training forward with labels\n");
    }
    int N = r->lastN;
    double t0 = r->profiling ? mono_seconds() : 0.0;
    memset(m->grads, 0, m->pt.total * sizeof(float));
    softmax_ce_backward(r->dlogits, r->probs, r->labels, 1.0f / N, N, r->num_classes);
    linear_backward(r->dpooled, m->grads + m->pt.t[r->fc_w].offset, m->grads + m->pt.t[r->fc_b].offset, r->dlogits,
                    r->pooled, m->params + m->pt.t[r->fc_w].offset, N, r->feat, r->num_classes);
    float *P = r->gbuf[0], *Q = r->gbuf[1], *R = r->gbuf[2], *S = r->gbuf[3];
    avgpool_global_backward(P, r->dpooled, N, r->feat, r->FH * r->FW, r->ldf);
    if (r->profiling) r->prof[PR_OTHER_B] += mono_seconds() - t0;
    for (int i = r->nblocks - 1; i >= 0; i--) {
        block_backward(r, m, &r->blocks[i], Q, P, R, S, N);
        float *t = P;
        P = Q;
        Q = t;
    }
    /* P = d(stem output, or pool output) */
    if (r->pool) {
        for (int c = 0; c < r->stem.OC; c++)
            maxpool2d_backward(Q + c * r->stem.ldo, P + c * r->ldp, r->pool_arg + c * r->ldp, N, r->stem.OH,
                               r->stem.OW, 3, 2, 1);
        float *t = P;
        P = Q;
        Q = t;
    }
    convbn_backward(r, m, &r->stem, NULL, NULL, P, NULL, r->x, N);
}

static void resnet_free(Model *m) {
    if (!m) return;
    ResNet *r = m->impl;
    if (r) {
        convbn_free(&r->stem);
        for (int i = 0; i < r->nblocks; i++) {
            Block *b = &r->blocks[i];
            for (int k = 0; k < b->ncb; k++) convbn_free(&b->cb[k]);
            if (b->sc == SC_PROJ) convbn_free(&b->ds);
        }
        free(r->blocks);
        free(r->pool_out), free(r->pool_arg), free(r->x), free(r->pooled), free(r->dpooled);
        free(r->logits), free(r->probs), free(r->dlogits), free(r->labels), free(r->sc), free(r->work);
        for (int k = 0; k < 4; k++) free(r->gbuf[k]);
        free(r);
    }
    param_arena_free(m->params);
    param_arena_free(m->grads);
    free(m->state);
    param_table_free(&m->pt);
    free(m);
}

static const ModelOps resnet_cifar_ops = {
    .name = "resnet_cifar", .forward = resnet_forward, .backward = resnet_backward, .free = resnet_free};
static const ModelOps resnet50_ops = {
    .name = "resnet50", .forward = resnet_forward, .backward = resnet_backward, .free = resnet_free};
