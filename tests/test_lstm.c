/* Reference tests of the embedding, the LSTM layer (one and two stacked layers,
 * two consecutive batches with the carried, detached state) and the LSTM
 * language model (untied and tied, loss and every parameter gradient) against
 * PyTorch fixtures written by tests/ref/lstm_fixtures.py (format described
 * there). Plus: the model's parameter table, init, presets, evaluation
 * forwards, the loss-summed-over-time option, bad input, and a finite-
 * difference check of the whole model with dropout on. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/lstm.h"
#include "nn/lstm_lm.h"
#include "tests/test.h"

/* |ours - ref| <= RTOL * |ref| + ATOL_REL * max|ref over the tensor|: relative
 * per element, with an absolute floor scaled to the tensor so that tiny
 * gradients are held to the same relative standard as large ones. */
#define RTOL 1e-4f
#define ATOL_REL 1e-5f

/* ------------------------------------------------------------ fixture reader */
typedef struct {
    char name[96];
    int dtype; /* 0 f32, 1 i32 */
    int ndim, dims[8];
    size_t n;
    void *data;
} Rec;

typedef struct {
    Rec *r;
    int n;
    uint8_t *buf;
} Fixture;

static int fixture_load(Fixture *fx, const char *path) {
    memset(fx, 0, sizeof *fx);
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("cannot open %s: run /usr/bin/python3 tests/ref/lstm_fixtures.py from the repository root\n", path);
        return 0;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    fx->buf = malloc(len > 0 ? (size_t)len : 1);
    if (!fx->buf || fread(fx->buf, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        printf("short read of %s\n", path);
        return 0;
    }
    fclose(f);
    const uint8_t *p = fx->buf, *end = fx->buf + len;
    uint32_t u[2];
    if (len < 16 || memcmp(p, "GCXFIXT\0", 8) != 0) {
        printf("%s: bad magic (expected \"GCXFIXT\\0\"); regenerate with tests/ref/lstm_fixtures.py\n", path);
        return 0;
    }
    memcpy(u, p + 8, 8);
    if (u[0] != 1) {
        printf("%s: fixture version %u, expected 1; regenerate with tests/ref/lstm_fixtures.py\n", path, u[0]);
        return 0;
    }
    fx->n = (int)u[1];
    fx->r = calloc((size_t)fx->n + 1, sizeof(Rec));
    p += 16;
    for (int k = 0; k < fx->n; k++) {
        Rec *r = &fx->r[k];
        uint32_t nl, dt, nd;
        if (end - p < 4) goto trunc;
        memcpy(&nl, p, 4);
        p += 4;
        if (nl >= sizeof r->name || end - p < (long)nl + 8) goto trunc;
        memcpy(r->name, p, nl);
        p += nl;
        memcpy(&dt, p, 4);
        memcpy(&nd, p + 4, 4);
        p += 8;
        if (dt > 1 || nd > 8 || end - p < 4 * (long)nd) goto trunc;
        r->dtype = (int)dt;
        r->ndim = (int)nd;
        r->n = 1;
        for (uint32_t d = 0; d < nd; d++) {
            uint32_t v;
            memcpy(&v, p + 4 * d, 4);
            r->dims[d] = (int)v;
            r->n *= v;
        }
        p += 4 * nd;
        if ((size_t)(end - p) < 4 * r->n) goto trunc;
        r->data = (void *)p;
        p += 4 * r->n;
    }
    return 1;
trunc:
    printf("%s: truncated or corrupt record\n", path);
    return 0;
}

static const Rec *fx_rec(const Fixture *fx, const char *name) {
    for (int k = 0; k < fx->n; k++)
        if (strcmp(fx->r[k].name, name) == 0) return &fx->r[k];
    printf("fixture has no record %s\n", name);
    exit(1);
}
/* float32 data of a record (the file is 4-byte aligned after the header? not
 * guaranteed, so copy to aligned memory kept for the test's lifetime) */
static float *fx_f(const Fixture *fx, const char *name, size_t expect_n) {
    const Rec *r = fx_rec(fx, name);
    if (r->dtype != 0 || (expect_n && r->n != expect_n)) {
        printf("fixture record %s: dtype %d n %zu, expected f32 n %zu\n", name, r->dtype, r->n, expect_n);
        exit(1);
    }
    float *a = malloc(r->n * sizeof(float) + 4);
    memcpy(a, r->data, r->n * sizeof(float));
    return a;
}
static int *fx_i(const Fixture *fx, const char *name, size_t expect_n) {
    const Rec *r = fx_rec(fx, name);
    if (r->dtype != 1 || (expect_n && r->n != expect_n)) {
        printf("fixture record %s: dtype %d n %zu, expected i32 n %zu\n", name, r->dtype, r->n, expect_n);
        exit(1);
    }
    int *a = malloc(r->n * sizeof(int) + 4);
    memcpy(a, r->data, r->n * sizeof(int));
    return a;
}
static void fixture_free(Fixture *fx) {
    free(fx->r);
    free(fx->buf);
}

/* a small pool so tests need not free every fixture array */
static void *pool_[4096];
static int npool_;
static void *keep(void *p) {
    if (npool_ < 4096) pool_[npool_++] = p;
    return p;
}
static void pool_free(void) {
    while (npool_) free(pool_[--npool_]);
}
#define F(name, n) ((float *)keep(fx_f(fx, (name), (n))))
#define I(name, n) ((int *)keep(fx_i(fx, (name), (n))))

static void check_tol(const char *what, const float *a, const float *b, size_t n) {
    float mx = 0;
    for (size_t i = 0; i < n; i++) mx = fmaxf(mx, fabsf(b[i]));
    CHECK(mx > 0 || n == 1, "%s: reference is all zero (a useless comparison)", what);
    CHECK_CLOSE(what, a, b, n, RTOL, ATOL_REL * mx + 1e-30f);
}

/* ------------------------------------------------------------ embedding */
static void test_embedding(const Fixture *fx) {
    printf("embedding\n");
    const int *cfg = I("emb.cfg", 3);
    const int V = cfg[0], E = cfg[1], N = cfg[2];
    const int *tok = I("emb.tokens", (size_t)N);
    const float *w = F("emb.w", (size_t)V * E), *dout = F("emb.dout", (size_t)N * E);
    float *out = keep(calloc((size_t)N * E, sizeof(float))), *dw = keep(calloc((size_t)V * E, sizeof(float)));
    CHECK(embedding_forward(out, tok, w, N, V, E) == 0, "embedding_forward failed");
    check_tol("embedding out", out, F("emb.out", (size_t)N * E), (size_t)N * E);
    CHECK(embedding_backward(dw, dout, tok, N, V, E) == 0, "embedding_backward failed");
    check_tol("embedding dw (scatter-add)", dw, F("emb.dw", (size_t)V * E), (size_t)V * E);
    /* accumulation: a second backward doubles dw */
    embedding_backward(dw, dout, tok, N, V, E);
    float *want2 = F("emb.dw", (size_t)V * E);
    for (int i = 0; i < V * E; i++) want2[i] *= 2;
    check_tol("embedding dw accumulates (+=)", dw, want2, (size_t)V * E);
    /* bad tokens are rejected without writing */
    int badtok[3] = {1, V, 0};
    float sentinel[3 * 4] = {0};
    for (int i = 0; i < 12; i++) sentinel[i] = 42.0f;
    int rc = embedding_forward(sentinel, badtok, w, 3, V, E > 4 ? 4 : E);
    CHECK(rc == -GC_ERR_PARAM && sentinel[0] == 42.0f, "token == V must give -GC_ERR_PARAM, untouched output");
    badtok[1] = -1;
    CHECK(embedding_backward(dw, dout, badtok, 3, V, E) == -GC_ERR_PARAM, "negative token must be rejected");
}

/* ------------------------------------------------------------ LSTM layers */
typedef struct {
    int T, N, In, H;
    float *hs, *cs, *gates, *tanhc, *dgates, *dstate;
} LayerBuf;

static void layer_alloc(LayerBuf *b, int T, int N, int In, int H) {
    b->T = T, b->N = N, b->In = In, b->H = H;
    b->hs = keep(calloc((size_t)(T + 1) * N * H, sizeof(float)));
    b->cs = keep(calloc((size_t)(T + 1) * N * H, sizeof(float)));
    b->gates = keep(calloc((size_t)T * N * 4 * H, sizeof(float)));
    b->tanhc = keep(calloc((size_t)T * N * H, sizeof(float)));
    b->dgates = keep(calloc((size_t)T * N * 4 * H, sizeof(float)));
    b->dstate = keep(calloc((size_t)2 * N * H, sizeof(float)));
}

typedef struct {
    float *wih, *whh, *bih, *bhh;    /* from the fixture */
    float *dwih, *dwhh, *dbih, *dbhh; /* ours */
} LayerW;

static void layer_weights(const Fixture *fx, LayerW *w, const char *prefix, int l, int In, int H) {
    char nm[128];
    snprintf(nm, sizeof nm, "%sweight_ih_l%d", prefix, l);
    w->wih = F(nm, (size_t)4 * H * In);
    snprintf(nm, sizeof nm, "%sweight_hh_l%d", prefix, l);
    w->whh = F(nm, (size_t)4 * H * H);
    snprintf(nm, sizeof nm, "%sbias_ih_l%d", prefix, l);
    w->bih = F(nm, (size_t)4 * H);
    snprintf(nm, sizeof nm, "%sbias_hh_l%d", prefix, l);
    w->bhh = F(nm, (size_t)4 * H);
    w->dwih = keep(calloc((size_t)4 * H * In, sizeof(float)));
    w->dwhh = keep(calloc((size_t)4 * H * H, sizeof(float)));
    w->dbih = keep(calloc((size_t)4 * H, sizeof(float)));
    w->dbhh = keep(calloc((size_t)4 * H, sizeof(float)));
}

static void layer_zero_grads(LayerW *w, int In, int H) {
    memset(w->dwih, 0, (size_t)4 * H * In * sizeof(float));
    memset(w->dwhh, 0, (size_t)4 * H * H * sizeof(float));
    memset(w->dbih, 0, (size_t)4 * H * sizeof(float));
    memset(w->dbhh, 0, (size_t)4 * H * sizeof(float));
}

static void check_layer_grads(const Fixture *fx, const LayerW *w, const char *prefix, int batch, int l, int In,
                              int H) {
    char nm[128], what[128];
    const char *names[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    const float *ours[4] = {w->dwih, w->dwhh, w->dbih, w->dbhh};
    size_t n[4] = {(size_t)4 * H * In, (size_t)4 * H * H, (size_t)4 * H, (size_t)4 * H};
    for (int k = 0; k < 4; k++) {
        snprintf(nm, sizeof nm, "%sg%d.%s_l%d", prefix, batch, names[k], l);
        snprintf(what, sizeof what, "batch %d d%s_l%d", batch, names[k], l);
        check_tol(what, ours[k], F(nm, n[k]), n[k]);
    }
}

/* One layer, two consecutive batches. */
static void test_lstm_layer(const Fixture *fx) {
    printf("lstm layer (1 layer, 2 batches, carried state)\n");
    const int *cfg = I("l1.cfg", 5);
    const int T = cfg[0], N = cfg[1], In = cfg[2], H = cfg[3];
    const size_t NH = (size_t)N * H;
    LayerBuf b;
    layer_alloc(&b, T, N, In, H);
    LayerW w;
    layer_weights(fx, &w, "l1.", 0, In, H);
    float *dx = keep(calloc((size_t)T * N * In, sizeof(float)));
    float *dh0 = keep(calloc(NH, sizeof(float))), *dc0 = keep(calloc(NH, sizeof(float)));

    /* batch 1 from a random initial state */
    memcpy(b.hs, F("l1.h0", NH), NH * sizeof(float));
    memcpy(b.cs, F("l1.c0", NH), NH * sizeof(float));
    const float *x1 = F("l1.x1", (size_t)T * N * In);
    lstm_forward(b.hs, b.cs, b.gates, b.tanhc, x1, w.wih, w.whh, w.bih, w.bhh, T, N, In, H);
    check_tol("batch 1 outputs h_1..h_T", b.hs + NH, F("l1.y1", T * NH), T * NH);
    check_tol("batch 1 final h", b.hs + T * NH, F("l1.hn1", NH), NH);
    check_tol("batch 1 final c", b.cs + T * NH, F("l1.cn1", NH), NH);
    const float *dy1 = F("l1.dy1", T * NH);
    lstm_backward(dx, dh0, dc0, w.dwih, w.dwhh, w.dbih, w.dbhh, b.dgates, b.dstate, dy1, b.hs, b.cs, b.gates, b.tanhc,
                  x1, w.wih, w.whh, T, N, In, H);
    check_layer_grads(fx, &w, "l1.", 1, 0, In, H);
    check_tol("batch 1 dx", dx, F("l1.dx1", (size_t)T * N * In), (size_t)T * N * In);
    check_tol("batch 1 dh0", dh0, F("l1.dh0_1", NH), NH);
    check_tol("batch 1 dc0", dc0, F("l1.dc0_1", NH), NH);

    /* += semantics: a second identical backward doubles the parameter grads, dx is overwritten */
    lstm_backward(dx, NULL, NULL, w.dwih, w.dwhh, w.dbih, w.dbhh, b.dgates, b.dstate, dy1, b.hs, b.cs, b.gates,
                  b.tanhc, x1, w.wih, w.whh, T, N, In, H);
    float *g2x = F("l1.g1.weight_hh_l0", (size_t)4 * H * H);
    for (int i = 0; i < 4 * H * H; i++) g2x[i] *= 2;
    check_tol("dw_hh accumulates (+=)", w.dwhh, g2x, (size_t)4 * H * H);
    check_tol("dx overwritten", dx, F("l1.dx1", (size_t)T * N * In), (size_t)T * N * In);

    /* batch 2 starts from batch 1's final state (detached) */
    layer_zero_grads(&w, In, H);
    memmove(b.hs, b.hs + T * NH, NH * sizeof(float));
    memmove(b.cs, b.cs + T * NH, NH * sizeof(float));
    const float *x2 = F("l1.x2", (size_t)T * N * In);
    lstm_forward(b.hs, b.cs, b.gates, b.tanhc, x2, w.wih, w.whh, w.bih, w.bhh, T, N, In, H);
    check_tol("batch 2 outputs", b.hs + NH, F("l1.y2", T * NH), T * NH);
    check_tol("batch 2 final h", b.hs + T * NH, F("l1.hn2", NH), NH);
    check_tol("batch 2 final c", b.cs + T * NH, F("l1.cn2", NH), NH);
    lstm_backward(dx, NULL, NULL, w.dwih, w.dwhh, w.dbih, w.dbhh, b.dgates, b.dstate, F("l1.dy2", T * NH), b.hs, b.cs,
                  b.gates, b.tanhc, x2, w.wih, w.whh, T, N, In, H);
    check_layer_grads(fx, &w, "l1.", 2, 0, In, H);
    check_tol("batch 2 dx", dx, F("l1.dx2", (size_t)T * N * In), (size_t)T * N * In);
}

/* Two stacked layers (torch.nn.LSTM(num_layers=2)), two batches. */
static void test_lstm_stacked(const Fixture *fx) {
    printf("lstm stacked (2 layers, 2 batches, carried state)\n");
    const int *cfg = I("l2.cfg", 5);
    const int T = cfg[0], N = cfg[1], In = cfg[2], H = cfg[3], L = cfg[4];
    CHECK(L == 2, "fixture l2 should have 2 layers");
    const size_t NH = (size_t)N * H;
    LayerBuf b[2];
    LayerW w[2];
    for (int l = 0; l < 2; l++) {
        layer_alloc(&b[l], T, N, l ? H : In, H);
        layer_weights(fx, &w[l], "l2.", l, l ? H : In, H);
    }
    float *dx0 = keep(calloc((size_t)T * N * In, sizeof(float))), *dx1 = keep(calloc(T * NH, sizeof(float)));
    const float *h0 = F("l2.h0", 2 * NH), *c0 = F("l2.c0", 2 * NH);
    const float *hn1 = F("l2.hn1", 2 * NH), *cn1 = F("l2.cn1", 2 * NH);
    const float *hn2 = F("l2.hn2", 2 * NH), *cn2 = F("l2.cn2", 2 * NH);
    for (int batch = 1; batch <= 2; batch++) {
        char nm[64];
        snprintf(nm, sizeof nm, "l2.x%d", batch);
        const float *x = F(nm, (size_t)T * N * In);
        snprintf(nm, sizeof nm, "l2.dy%d", batch);
        const float *dy = F(nm, T * NH);
        for (int l = 0; l < 2; l++) {
            if (batch == 1) {
                memcpy(b[l].hs, h0 + l * NH, NH * sizeof(float));
                memcpy(b[l].cs, c0 + l * NH, NH * sizeof(float));
            } else { /* carried from batch 1 */
                memmove(b[l].hs, b[l].hs + T * NH, NH * sizeof(float));
                memmove(b[l].cs, b[l].cs + T * NH, NH * sizeof(float));
            }
            lstm_forward(b[l].hs, b[l].cs, b[l].gates, b[l].tanhc, l ? b[0].hs + NH : x, w[l].wih, w[l].whh, w[l].bih,
                         w[l].bhh, T, N, l ? H : In, H);
            layer_zero_grads(&w[l], l ? H : In, H);
        }
        snprintf(nm, sizeof nm, "l2.y%d", batch);
        char what[64];
        snprintf(what, sizeof what, "batch %d top-layer outputs", batch);
        check_tol(what, b[1].hs + NH, F(nm, T * NH), T * NH);
        for (int l = 0; l < 2; l++) {
            snprintf(what, sizeof what, "batch %d final h layer %d", batch, l);
            check_tol(what, b[l].hs + T * NH, (batch == 1 ? hn1 : hn2) + l * NH, NH);
            snprintf(what, sizeof what, "batch %d final c layer %d", batch, l);
            check_tol(what, b[l].cs + T * NH, (batch == 1 ? cn1 : cn2) + l * NH, NH);
        }
        lstm_backward(dx1, NULL, NULL, w[1].dwih, w[1].dwhh, w[1].dbih, w[1].dbhh, b[1].dgates, b[1].dstate, dy,
                      b[1].hs, b[1].cs, b[1].gates, b[1].tanhc, b[0].hs + NH, w[1].wih, w[1].whh, T, N, H, H);
        lstm_backward(dx0, NULL, NULL, w[0].dwih, w[0].dwhh, w[0].dbih, w[0].dbhh, b[0].dgates, b[0].dstate, dx1,
                      b[0].hs, b[0].cs, b[0].gates, b[0].tanhc, x, w[0].wih, w[0].whh, T, N, In, H);
        for (int l = 0; l < 2; l++) check_layer_grads(fx, &w[l], "l2.", batch, l, l ? H : In, H);
        snprintf(nm, sizeof nm, "l2.dx%d", batch);
        snprintf(what, sizeof what, "batch %d dx", batch);
        check_tol(what, dx0, F(nm, (size_t)T * N * In), (size_t)T * N * In);
    }
}

/* ------------------------------------------------------------ language model */
static Model *lm_from_fixture(const Fixture *fx, const char *prefix, int *T_, int *N_, int sum_over_time) {
    char nm[128];
    snprintf(nm, sizeof nm, "%scfg", prefix);
    const int *cfg = I(nm, 7);
    LstmLmConfig c = {.vocab = cfg[0],
                      .emb = cfg[1],
                      .hidden = cfg[2],
                      .layers = cfg[3],
                      .dropout = 0.0f,
                      .tie_weights = cfg[6],
                      .init = LSTM_LM_INIT_ZAREMBA,
                      .init_range = 0.05f,
                      .loss_sum_over_time = sum_over_time,
                      .seed = 7};
    *T_ = cfg[4];
    *N_ = cfg[5];
    Model *m = lstm_lm_create(&c, cfg[5], cfg[4]);
    if (!m) return NULL;
    /* every fixture parameter is a table tensor of the same size, and vice versa */
    size_t plen = strlen(prefix) + 2;
    int nfx = 0;
    for (int k = 0; k < fx->n; k++) {
        const Rec *r = &fx->r[k];
        if (strncmp(r->name, prefix, strlen(prefix)) != 0 || strncmp(r->name + strlen(prefix), "p.", 2) != 0)
            continue;
        nfx++;
        int t = param_table_find(&m->pt, r->name + plen);
        CHECK(t >= 0, "%s: no tensor named %s in the model", prefix, r->name + plen);
        if (t < 0) continue;
        CHECK(m->pt.t[t].numel == r->n, "%s: size %zu, fixture %zu", m->pt.t[t].name, m->pt.t[t].numel, r->n);
        int same_shape = m->pt.t[t].ndim == r->ndim;
        for (int d = 0; same_shape && d < r->ndim; d++) same_shape = m->pt.t[t].shape[d] == r->dims[d];
        CHECK(same_shape, "%s: shape differs from PyTorch's", m->pt.t[t].name);
        if (m->pt.t[t].numel == r->n) memcpy(m->params + m->pt.t[t].offset, r->data, r->n * sizeof(float));
    }
    CHECK(nfx == m->pt.n, "%s: model has %d tensors, PyTorch %d", prefix, m->pt.n, nfx);
    return m;
}

static void check_lm_grads(const Fixture *fx, const Model *m, const char *prefix, int batch, float mul) {
    char nm[160], what[160];
    for (int t = 0; t < m->pt.n; t++) {
        const ParamInfo *p = &m->pt.t[t];
        snprintf(nm, sizeof nm, "%s%d.g.%s", prefix, batch, p->name);
        float *want = F(nm, p->numel);
        for (size_t i = 0; i < p->numel; i++) want[i] *= mul;
        snprintf(what, sizeof what, "%sbatch %d d%s", prefix, batch, p->name);
        check_tol(what, m->grads + p->offset, want, p->numel);
    }
}

static void test_lm(const Fixture *fx, const char *prefix) {
    printf("language model %s\n", prefix);
    int T, N;
    Model *m = lm_from_fixture(fx, prefix, &T, &N, 0);
    CHECK(m != NULL, "lstm_lm_create failed");
    if (!m) return;
    const LstmLmConfig *c = lstm_lm_config(m);
    const int L = c->layers, H = c->hidden;
    CHECK((param_table_find(&m->pt, "decoder.weight") >= 0) == !c->tie_weights,
          "decoder.weight must exist exactly when untied");
    char nm[160], what[160];
    const int *tok[2], *tgt[2];
    for (int k = 0; k < 2; k++) {
        snprintf(nm, sizeof nm, "%s%d.tokens", prefix, k + 1);
        tok[k] = I(nm, (size_t)T * N);
        snprintf(nm, sizeof nm, "%s%d.targets", prefix, k + 1);
        tgt[k] = I(nm, (size_t)T * N);
    }
    m->ops->reset_state(m);
    for (int k = 0; k < 2; k++) {
        Batch b = {.tokens = tok[k], .y = tgt[k], .N = N, .T = T};
        BatchStats st;
        float loss = model_forward(m, &b, 1, &st);
        snprintf(nm, sizeof nm, "%s%d.loss", prefix, k + 1);
        float want = F(nm, 1)[0];
        snprintf(what, sizeof what, "%sbatch %d loss", prefix, k + 1);
        check_tol(what, &loss, &want, 1);
        snprintf(nm, sizeof nm, "%s%d.correct", prefix, k + 1);
        CHECK(st.correct == I(nm, 1)[0] && st.count == (long)T * N && fabs(st.loss - loss) < 1e-6,
              "batch %d stats: correct %ld (PyTorch %d), count %ld", k + 1, st.correct, I(nm, 1)[0], st.count);
        model_backward(m);
        check_lm_grads(fx, m, prefix, k + 1, 1.0f);
        snprintf(nm, sizeof nm, "%s%d.h", prefix, k + 1);
        const float *wh = F(nm, (size_t)L * N * H);
        snprintf(nm, sizeof nm, "%s%d.c", prefix, k + 1);
        const float *wc = F(nm, (size_t)L * N * H);
        for (int l = 0; l < L; l++) {
            const float *h, *cc;
            int n;
            lstm_lm_carried_state(m, l, &h, &cc, &n);
            CHECK(n == N, "carried N %d", n);
            snprintf(what, sizeof what, "%sbatch %d carried h layer %d", prefix, k + 1, l);
            check_tol(what, h, wh + (size_t)l * N * H, (size_t)N * H);
            snprintf(what, sizeof what, "%sbatch %d carried c layer %d", prefix, k + 1, l);
            check_tol(what, cc, wc + (size_t)l * N * H, (size_t)N * H);
        }
    }

    /* evaluation forwards: same losses, carry the state, leave a pending backward intact */
    float want1 = 0, want2 = 0;
    snprintf(nm, sizeof nm, "%s1.loss", prefix);
    want1 = F(nm, 1)[0];
    snprintf(nm, sizeof nm, "%s2.loss", prefix);
    want2 = F(nm, 1)[0];
    Batch b1 = {.tokens = tok[0], .y = tgt[0], .N = N, .T = T}, b2 = {.tokens = tok[1], .y = tgt[1], .N = N, .T = T};
    m->ops->reset_state(m);
    float e1 = model_forward(m, &b1, 0, NULL);
    snprintf(what, sizeof what, "%seval loss batch 1 after reset", prefix);
    check_tol(what, &e1, &want1, 1);
    m->ops->reset_state(m);
    model_forward(m, &b1, 1, NULL);
    float e2 = model_forward(m, &b2, 0, NULL); /* continues from batch 1's state */
    snprintf(what, sizeof what, "%seval loss batch 2 (carried)", prefix);
    check_tol(what, &e2, &want2, 1);
    model_backward(m); /* of the training forward on batch 1 */
    printf("  (backward after an interleaved evaluation forward)\n");
    check_lm_grads(fx, m, prefix, 1, 1.0f);
    model_free(m);

    /* loss summed over time (TF PTB convention): gradients T times the mean's */
    m = lm_from_fixture(fx, prefix, &T, &N, 1);
    m->ops->reset_state(m);
    float l1 = model_forward(m, &b1, 1, NULL);
    CHECK(fabsf(l1 - want1) <= 1e-4f * fabsf(want1), "reported loss stays the per-token mean");
    model_backward(m);
    printf("  (loss_sum_over_time = 1: expecting T x the mean-loss gradients)\n");
    check_lm_grads(fx, m, prefix, 1, (float)T);
    model_free(m);
}

/* ------------------------------------------------------------ table, init, presets */
static void test_table_and_init(void) {
    printf("parameter table, init, presets\n");
    LstmLmConfig c = {.vocab = 50, .emb = 12, .hidden = 16, .layers = 3, .dropout = 0.5f, .tie_weights = 0,
                      .forget_bias = 1.0f, .init = LSTM_LM_INIT_ZAREMBA, .init_range = 0.05f, .seed = 3};
    Model *m = lstm_lm_create(&c, 2, 3);
    CHECK(m != NULL, "create");
    const char *want_names[] = {"encoder.weight",   "rnn.weight_ih_l0", "rnn.weight_hh_l0", "rnn.bias_ih_l0",
                                "rnn.bias_hh_l0",   "rnn.weight_ih_l1", "rnn.weight_hh_l1", "rnn.bias_ih_l1",
                                "rnn.bias_hh_l1",   "rnn.weight_ih_l2", "rnn.weight_hh_l2", "rnn.bias_ih_l2",
                                "rnn.bias_hh_l2",   "decoder.weight",   "decoder.bias"};
    const ParamKind want_kinds[] = {PK_EMBEDDING,   PK_LSTM_WEIGHT, PK_LSTM_WEIGHT, PK_LSTM_BIAS, PK_LSTM_BIAS,
                                    PK_LSTM_WEIGHT, PK_LSTM_WEIGHT, PK_LSTM_BIAS,   PK_LSTM_BIAS, PK_LSTM_WEIGHT,
                                    PK_LSTM_WEIGHT, PK_LSTM_BIAS,   PK_LSTM_BIAS,   PK_FC_WEIGHT, PK_BIAS};
    CHECK(m->pt.n == 15, "3-layer untied model has %d tensors, want 15", m->pt.n);
    for (int t = 0; t < m->pt.n && t < 15; t++)
        CHECK(strcmp(m->pt.t[t].name, want_names[t]) == 0 && m->pt.t[t].kind == want_kinds[t],
              "tensor %d is %s (%s), want %s", t, m->pt.t[t].name, param_kind_name(m->pt.t[t].kind), want_names[t]);
    CHECK(m->pt.t[1].shape[0] == 64 && m->pt.t[1].shape[1] == 12 && m->pt.t[5].shape[1] == 16,
          "weight_ih shapes [4H, In]");
    /* Zaremba init: weights in [-r, r] and spread over it; LSTM biases 0 except the forget block */
    int ok_range = 1, ok_bias = 1;
    float maxabs = 0;
    for (int t = 0; t < m->pt.n; t++) {
        const ParamInfo *p = &m->pt.t[t];
        const float *w = m->params + p->offset;
        for (size_t i = 0; i < p->numel; i++) {
            if (p->kind == PK_LSTM_BIAS) {
                int forget = (int)i >= c.hidden && (int)i < 2 * c.hidden;
                int is_ih = strstr(p->name, "bias_ih") != NULL;
                float want = forget && is_ih ? c.forget_bias : 0.0f;
                if (w[i] != want) ok_bias = 0;
            } else {
                if (fabsf(w[i]) > c.init_range) ok_range = 0;
                if (fabsf(w[i]) > maxabs) maxabs = fabsf(w[i]);
            }
        }
    }
    CHECK(ok_range && maxabs > 0.9f * c.init_range, "Zaremba init U(-r, r): max |w| %g, r %g", maxabs, c.init_range);
    CHECK(ok_bias, "LSTM biases zero except bias_ih forget block = forget_bias");
    /* deterministic from the seed */
    Model *m2 = lstm_lm_create(&c, 1, 1);
    CHECK(memcmp(m->params, m2->params, m->pt.total * sizeof(float)) == 0, "same seed, same parameters");
    lstm_lm_init_params(m2, 4);
    CHECK(memcmp(m->params, m2->params, m->pt.total * sizeof(float)) != 0, "another seed, other parameters");
    model_free(m2);
    model_free(m);

    /* PyTorch word_language_model init, tied */
    c = (LstmLmConfig){.vocab = 40, .emb = 25, .hidden = 25, .layers = 2, .tie_weights = 1, .forget_bias = 0.0f,
                       .init = LSTM_LM_INIT_PYTORCH, .init_range = 0.1f, .seed = 5};
    m = lstm_lm_create(&c, 1, 1);
    CHECK(m && m->pt.n == 10 && param_table_find(&m->pt, "decoder.weight") < 0, "tied: no decoder.weight tensor");
    float bound = 1.0f / sqrtf(25.0f), lstm_max = 0, enc_max = 0;
    int dec_b_zero = 1;
    for (int t = 0; t < m->pt.n; t++) {
        const ParamInfo *p = &m->pt.t[t];
        for (size_t i = 0; i < p->numel; i++) {
            float v = fabsf(m->params[p->offset + i]);
            if (p->kind == PK_LSTM_WEIGHT || p->kind == PK_LSTM_BIAS) lstm_max = fmaxf(lstm_max, v);
            else if (p->kind == PK_EMBEDDING) enc_max = fmaxf(enc_max, v);
            else if (v != 0) dec_b_zero = 0;
        }
    }
    CHECK(lstm_max <= bound && lstm_max > 0.9f * bound, "LSTM ~ U(-1/sqrt(H), 1/sqrt(H)): max %g", lstm_max);
    CHECK(enc_max <= 0.1f && enc_max > 0.09f, "encoder ~ U(-0.1, 0.1): max %g", enc_max);
    CHECK(dec_b_zero, "decoder.bias zero");
    model_free(m);

    /* presets */
    LstmLmConfig w = lstm_lm_config_sbc_word(), ch = lstm_lm_config_sbc_char(), d = lstm_lm_config_dgc_ptb();
    CHECK(w.layers == 2 && w.hidden == 650 && w.emb == 650 && w.vocab == 10000 && w.dropout == 0.5f &&
              !w.tie_weights && w.init == LSTM_LM_INIT_ZAREMBA && w.init_range == 0.05f,
          "SBC WordLSTM = TF PTB medium");
    CHECK(ch.layers == 2 && ch.hidden == 200 && ch.vocab == 98, "SBC CharLSTM");
    CHECK(d.layers == 2 && d.hidden == 1500 && d.emb == 1500 && d.tie_weights && d.dropout == 0.65f,
          "DGC PTB: 2 x 1500, tied, dropout 0.65");
    m = lstm_lm_create(&ch, 1, 1);
    size_t want = 98 * 200 + 2 * (4 * 200 * 200 * 2 + 2 * 800) + 200 * 98 + 98;
    CHECK(m && param_table_count(&m->pt) == want, "CharLSTM has %zu parameters, want %zu",
          m ? param_table_count(&m->pt) : 0, want);
    char buf[32];
    param_count_str(buf, sizeof buf, m ? param_table_count(&m->pt) : 0);
    printf("  CharLSTM parameters: %s\n", buf);
    model_free(m);
    /* the large presets are only checked for size arithmetic (no allocation) */
    printf("  WordLSTM parameters (formula): %.2fM, DGC PTB: %.2fM\n",
           (10000.0 * 650 + 2 * (4.0 * 650 * 1300 + 2 * 2600) + 650.0 * 10000 + 10000) / 1e6,
           (10000.0 * 1500 + 2 * (4.0 * 1500 * 3000 + 2 * 6000) + 10000) / 1e6);
}

/* ------------------------------------------------------------ bad input */
static void test_bad_input(void) {
    printf("bad input (errors expected on stderr)\n");
    LstmLmConfig c = {.vocab = 10, .emb = 4, .hidden = 4, .layers = 1, .init_range = 0.1f};
    LstmLmConfig bad = c;
    bad.tie_weights = 1;
    bad.emb = 5;
    CHECK(lstm_lm_create(&bad, 1, 1) == NULL, "tie with emb != hidden rejected");
    bad = c;
    bad.dropout = 1.0f;
    CHECK(lstm_lm_create(&bad, 1, 1) == NULL, "dropout 1 rejected");
    bad = c;
    bad.layers = 0;
    CHECK(lstm_lm_create(&bad, 1, 1) == NULL, "0 layers rejected");
    CHECK(lstm_lm_create(&c, 0, 1) == NULL, "max_batch 0 rejected");
    CHECK(lstm_lm_create(NULL, 1, 1) == NULL, "NULL config rejected");
    Model *m = lstm_lm_create(&c, 2, 3);
    int tok[6] = {1, 2, 3, 4, 5, 6}, tgt[6] = {2, 3, 4, 5, 6, 7};
    Batch b = {.tokens = tok, .y = tgt, .N = 2, .T = 3};
    BatchStats st;
    CHECK(isfinite(model_forward(m, &b, 1, &st)), "valid batch");
    tok[4] = 10;
    CHECK(isnan(model_forward(m, &b, 1, &st)) && st.count == 0, "token == vocab gives NaN");
    model_backward(m); /* no pending forward: zero grads, no crash */
    int allzero = 1;
    for (size_t i = 0; i < m->pt.total; i++) allzero &= m->grads[i] == 0.0f;
    CHECK(allzero, "backward after a failed forward leaves zero gradients");
    tok[4] = 5;
    tgt[0] = -1;
    CHECK(isnan(model_forward(m, &b, 1, NULL)), "negative target gives NaN");
    tgt[0] = 2;
    b.N = 3;
    CHECK(isnan(model_forward(m, &b, 1, NULL)), "N > max_batch gives NaN");
    b.N = 2;
    b.T = 4;
    CHECK(isnan(model_forward(m, &b, 1, NULL)), "T > max_T gives NaN");
    b.T = 3;
    /* a failed evaluation forward leaves the pending training backward intact */
    CHECK(isfinite(model_forward(m, &b, 1, NULL)), "valid batch again");
    tok[1] = -5;
    CHECK(isnan(model_forward(m, &b, 0, NULL)), "bad token in evaluation gives NaN");
    tok[1] = 2;
    model_backward(m);
    double gn = 0;
    for (size_t i = 0; i < m->pt.total; i++) gn += fabs(m->grads[i]);
    CHECK(gn > 0, "backward still has its training forward after a failed evaluation");
    b.tokens = NULL;
    CHECK(isnan(model_forward(m, &b, 1, NULL)), "missing tokens gives NaN");
    model_free(m);
}

/* ------------------------------------------------------------ carried state */
static void test_carry(void) {
    printf("carried state: reset, continuation, batch-size change\n");
    LstmLmConfig c = {.vocab = 12, .emb = 5, .hidden = 6, .layers = 2, .init = LSTM_LM_INIT_ZAREMBA,
                      .init_range = 0.4f, .seed = 21};
    Model *m = lstm_lm_create(&c, 3, 4);
    int tok[12], tgt[12];
    for (int i = 0; i < 12; i++) tok[i] = (i * 5) % 12, tgt[i] = (i * 7 + 1) % 12;
    Batch b3 = {.tokens = tok, .y = tgt, .N = 3, .T = 4}, b1 = {.tokens = tok, .y = tgt, .N = 1, .T = 4};
    float fresh3 = model_forward(m, &b3, 1, NULL);
    float cont3 = model_forward(m, &b3, 1, NULL);
    CHECK(fresh3 != cont3, "the second batch starts from the carried state (%g vs %g)", fresh3, cont3);
    const float *h;
    int n;
    lstm_lm_carried_state(m, 1, &h, NULL, &n);
    CHECK(n == 3 && h[0] != 0.0f, "a carried state is held after a forward");
    m->ops->reset_state(m);
    lstm_lm_carried_state(m, 1, &h, NULL, &n);
    int zero = n == 0;
    for (int i = 0; i < 3 * 6; i++) zero &= h[i] == 0.0f;
    CHECK(zero, "reset_state zeroes the carried state");
    CHECK(model_forward(m, &b3, 1, NULL) == fresh3, "after reset the first loss again");
    float fresh1 = model_forward(m, &b1, 1, NULL); /* N changes 3 -> 1: starts from zero */
    m->ops->reset_state(m);
    CHECK(model_forward(m, &b1, 1, NULL) == fresh1, "a batch-size change restarts from the zero state");
    CHECK(lstm_lm_carried_state(m, 2, NULL, NULL, NULL) == -GC_ERR_PARAM, "bad layer index rejected");
    model_free(m);
}

/* ------------------------------------------------------------ finite differences with dropout */
static double lm_loss_at(Model *m, const Batch *b, uint64_t step) {
    m->ops->reset_state(m);
    lstm_lm_set_dropout_seed(m, 99, step);
    return model_forward(m, b, 1, NULL);
}

static void test_finite_differences(void) {
    printf("finite differences, dropout 0.3, tied, 2 layers, 2 batches\n");
    LstmLmConfig c = {.vocab = 9, .emb = 6, .hidden = 6, .layers = 2, .dropout = 0.3f, .tie_weights = 1,
                      .forget_bias = 1.0f, .init = LSTM_LM_INIT_ZAREMBA, .init_range = 0.5f, .seed = 11};
    const int T = 4, N = 3;
    Model *m = lstm_lm_create(&c, N, T);
    int tok[12], tgt[12];
    Rng r;
    rng_init(&r, 5, 0);
    for (int i = 0; i < 12; i++) tok[i] = (int)rng_below(&r, 9), tgt[i] = (int)rng_below(&r, 9);
    Batch b = {.tokens = tok, .y = tgt, .N = N, .T = T};
    lm_loss_at(m, &b, 17);
    model_backward(m);
    float *g = malloc(m->pt.total * sizeof(float));
    memcpy(g, m->grads, m->pt.total * sizeof(float));
    /* the same mask again: the same loss; another step: another mask, another loss */
    double la = lm_loss_at(m, &b, 17), lb = lm_loss_at(m, &b, 17), lc = lm_loss_at(m, &b, 18);
    CHECK(la == lb && la != lc, "dropout masks reproducible from (seed, step): %.9g %.9g %.9g", la, lb, lc);
    double maxrel = 0;
    int nchecked = 0, bad = 0;
    for (int t = 0; t < m->pt.n; t++) {
        const ParamInfo *p = &m->pt.t[t];
        for (size_t k = 0; k < p->numel; k += 1 + p->numel / 7) {
            float *w = m->params + p->offset + k, saved = *w;
            const float eps = 1e-2f;
            *w = saved + eps;
            double lp = lm_loss_at(m, &b, 17);
            *w = saved - eps;
            double lmn = lm_loss_at(m, &b, 17);
            *w = saved;
            double num = (lp - lmn) / (2.0 * eps), ana = g[p->offset + k];
            double err = fabs(num - ana) / (fabs(num) + fabs(ana) + 1e-3);
            if (err > maxrel) maxrel = err;
            if (err > 2e-2) {
                bad++;
                printf("  %s[%zu]: numeric %.6g analytic %.6g\n", p->name, k, num, ana);
            }
            nchecked++;
        }
    }
    printf("  %d coordinates, max relative difference %.3e\n", nchecked, maxrel);
    CHECK(bad == 0, "%d of %d coordinates disagree with central differences", bad, nchecked);
    free(g);
    model_free(m);
}

/* ------------------------------------------------------------ it learns */
/* A periodic stream "0 1 2 0 1 3 ...": after "0 1" the next token is 2 or 3
 * depending on what came three steps earlier, so the model must use its
 * recurrent state (carried across batches). Plain SGD on the mean loss. */
static void test_learns(void) {
    printf("learns a sequence that needs memory (SGD, carried state)\n");
    LstmLmConfig c = {.vocab = 4, .emb = 8, .hidden = 16, .layers = 1, .init = LSTM_LM_INIT_ZAREMBA,
                      .init_range = 0.1f, .forget_bias = 1.0f, .seed = 1};
    const int T = 5, N = 4, P = 6, steps = 400;
    static const int pattern[6] = {0, 1, 2, 0, 1, 3};
    Model *m = lstm_lm_create(&c, N, T);
    int tok[20], tgt[20];
    float first = 0, last = 0;
    long correct = 0, count = 0;
    for (int s = 0; s < steps; s++) {
        for (int t = 0; t < T; t++)
            for (int n = 0; n < N; n++) {
                long pos = (long)s * T + t + 5 * n; /* each column its own phase */
                tok[t * N + n] = pattern[pos % P];
                tgt[t * N + n] = pattern[(pos + 1) % P];
            }
        Batch b = {.tokens = tok, .y = tgt, .N = N, .T = T};
        BatchStats st;
        float loss = model_forward(m, &b, 1, &st);
        model_backward(m);
        for (size_t i = 0; i < m->pt.total; i++) m->params[i] -= 1.0f * m->grads[i];
        if (s == 0) first = loss;
        if (s >= steps - 20) last += loss / 20, correct += st.correct, count += st.count;
    }
    printf("  loss %.4f -> %.4f over %d steps; last 20 steps %ld/%ld correct (without memory at most 11/12)\n", first, last,
           steps, correct, count);
    CHECK(last < 0.05f && correct == count, "the model did not learn the sequence: loss %g, %ld/%ld", last, correct,
          count);
    model_free(m);
}

int main(void) {
    Fixture f1, f2;
    const char *dir = getenv("GCX_FIXTURES") ? getenv("GCX_FIXTURES") : "tests/fixtures";
    char path[512];
    snprintf(path, sizeof path, "%s/lstm_layer.bin", dir);
    int ok1 = fixture_load(&f1, path);
    CHECK(ok1, "load %s", path);
    snprintf(path, sizeof path, "%s/lstm_lm.bin", dir);
    int ok2 = fixture_load(&f2, path);
    CHECK(ok2, "load %s", path);
    if (ok1) {
        const Fixture *fx = &f1;
        test_embedding(fx);
        test_lstm_layer(fx);
        test_lstm_stacked(fx);
    }
    if (ok2) {
        test_lm(&f2, "untied.");
        test_lm(&f2, "tied.");
    }
    test_table_and_init();
    test_bad_input();
    test_carry();
    test_finite_differences();
    test_learns();
    pool_free();
    fixture_free(&f1);
    fixture_free(&f2);
    TEST_END();
}
