/* LSTM language model (see lstm_lm.h).
 * Shape letters: T time steps, N batch, V vocabulary, E embedding size,
 * H hidden units, L layers. Activations are time-major [T, N, ...].
 * The Model backward OVERWRITES m->grads: it zeroes them, then every op
 * accumulates (+=) into them (with tied weights the decoder and the encoder
 * both add into encoder.weight's gradient). */
#include "nn/lstm_lm.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/errors.h"
#include "common/rng.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/lstm.h"
#include "nn/softmax_ce.h"

/* the activations of one forward pass; training and evaluation each own one */
typedef LstmLmActs Workspace;

typedef struct {
    LstmLmCore k; /* config, indices, carried state, dropout, pending backward */
    Workspace train, eval;
    int eval_ready;
    int *cache_tokens, *cache_targets; /* [T*N]: the pending backward's batch */
} LstmLm;

static const ModelOps lstm_lm_ops;

LstmLmConfig lstm_lm_config_sbc_word(void) {
    LstmLmConfig c = {.vocab = 10000,
                      .emb = 650,
                      .hidden = 650,
                      .layers = 2,
                      .dropout = 0.5f,
                      .tie_weights = 0,
                      .forget_bias = 0.0f,
                      .init = LSTM_LM_INIT_ZAREMBA,
                      .init_range = 0.05f,
                      .loss_sum_over_time = 1,
                      .seed = 1234};
    return c;
}

LstmLmConfig lstm_lm_config_sbc_char(void) {
    LstmLmConfig c = lstm_lm_config_sbc_word();
    c.vocab = 98;
    c.emb = 200;
    c.hidden = 200;
    return c;
}

LstmLmConfig lstm_lm_config_dgc_ptb(void) {
    LstmLmConfig c = {.vocab = 10000,
                      .emb = 1500,
                      .hidden = 1500,
                      .layers = 2,
                      .dropout = 0.65f,
                      .tie_weights = 1,
                      .forget_bias = 0.0f,
                      .init = LSTM_LM_INIT_PYTORCH,
                      .init_range = 0.1f,
                      .loss_sum_over_time = 0,
                      .seed = 1234};
    return c;
}

int lstm_lm_config_valid(const LstmLmConfig *c, int max_batch, int max_T) {
    const char *why = NULL;
    if (!c) why = "no config";
    else if (c->vocab < 1) why = "vocab must be >= 1";
    else if (c->emb < 1 || c->hidden < 1) why = "emb and hidden must be >= 1";
    else if (c->layers < 1 || c->layers > 64) why = "layers must be in 1..64";
    else if (!(c->dropout >= 0.0f && c->dropout < 1.0f)) why = "dropout must be in [0, 1)";
    else if (c->tie_weights && c->emb != c->hidden) why = "tied weights need emb == hidden";
    else if (c->init != LSTM_LM_INIT_ZAREMBA && c->init != LSTM_LM_INIT_PYTORCH) why = "unknown init";
    else if (!(c->init_range >= 0.0f) || !isfinite(c->init_range)) why = "init_range must be >= 0";
    else if (!isfinite(c->forget_bias)) why = "forget_bias must be finite";
    else if (max_batch < 1 || max_T < 1) why = "max_batch and max_T must be >= 1";
    else if ((double)max_batch * max_T * ((double)c->vocab + 4.0 * c->hidden) > 4e9)
        why = "max_batch * max_T * (vocab + 4 hidden) too large (over 2^32 floats)";
    else if ((double)4 * c->hidden * ((double)c->emb > c->hidden ? c->emb : c->hidden) > 2e9)
        why = "weights too large";
    if (why) {
        fprintf(stderr, "error: lstm_lm_create: %s\n", why);
        return 0;
    }
    return 1;
}

/* points the arrays of w into mem; returns their size in floats (mem NULL: size only) */
static size_t acts_layout(LstmLmActs *w, float *mem, const LstmLmConfig *c, int NB, int TT, int with_backward) {
    const size_t TN = (size_t)TT * NB, H = (size_t)c->hidden, E = (size_t)c->emb, V = (size_t)c->vocab;
    size_t off = 0;
#define TAKE(ptr, count)                             \
    do {                                             \
        if (mem) (ptr) = mem + off;                  \
        off += ((size_t)(count) + 15) & ~(size_t)15; \
    } while (0)
    for (int l = 0; l < c->layers; l++) {
        TAKE(w->xs[l], TN * (l == 0 ? E : H));
        TAKE(w->hs[l], (TN + NB) * H);
        TAKE(w->cs[l], (TN + NB) * H);
        TAKE(w->gates[l], TN * 4 * H);
        TAKE(w->tanhc[l], TN * H);
    }
    TAKE(w->y, TN * H);
    TAKE(w->logits, TN * V);
    TAKE(w->probs, TN * V);
    if (with_backward) {
        TAKE(w->dgates, TN * 4 * H);
        TAKE(w->dx, TN * (E > H ? E : H));
        TAKE(w->dh, TN * H);
        TAKE(w->dstate, 2 * (size_t)NB * H);
    }
#undef TAKE
    return off;
}

size_t lstm_lm_acts_size(LstmLmActs *w, const LstmLmConfig *c, int NB, int TT, int with_backward) {
    memset(w, 0, sizeof *w);
    w->xs = callocCheck((size_t)c->layers * 5, sizeof(float *));
    w->hs = w->xs + c->layers;
    w->cs = w->hs + c->layers;
    w->gates = w->cs + c->layers;
    w->tanhc = w->gates + c->layers;
    return acts_layout(w, NULL, c, NB, TT, with_backward);
}

void lstm_lm_acts_place(LstmLmActs *w, float *mem, const LstmLmConfig *c, int NB, int TT, int with_backward) {
    w->mem = mem;
    acts_layout(w, mem, c, NB, TT, with_backward);
}

void lstm_lm_acts_release(LstmLmActs *w) {
    free(w->xs);
    memset(w, 0, sizeof *w);
}

static void workspace_alloc(Workspace *w, const LstmLmConfig *c, int NB, int TT, int with_backward) {
    size_t n = lstm_lm_acts_size(w, c, NB, TT, with_backward);
    lstm_lm_acts_place(w, callocCheck(n, sizeof(float)), c, NB, TT, with_backward);
}

static void workspace_free(Workspace *w) {
    free(w->mem);
    lstm_lm_acts_release(w);
}

static void fill_uniform(float *p, size_t n, float r, Rng *rng) {
    for (size_t i = 0; i < n; i++) p[i] = (2.0f * rng_uniform(rng) - 1.0f) * r;
}

void lstm_lm_init_params(Model *m, uint64_t seed) {
    LstmLm *lm = m->impl;
    const LstmLmConfig *c = &lm->k.cfg;
    const int H = c->hidden;
    Rng rng;
    rng_init(&rng, seed, 0x4C53544DULL /* "LSTM" */);
    memset(m->params, 0, m->pt.total * sizeof(float));
    /* tensors in table order, so the stream of random numbers is fixed */
    for (int k = 0; k < m->pt.n; k++) {
        const ParamInfo *p = &m->pt.t[k];
        float *w = m->params + p->offset;
        if (c->init == LSTM_LM_INIT_ZAREMBA) {
            /* Zaremba et al. 2014 section 4: "initialized uniformly in [-0.05, 0.05]"
             * (medium), [-0.04, 0.04] (large); LSTM biases zero as TF BasicLSTMCell */
            if (p->kind != PK_LSTM_BIAS) fill_uniform(w, p->numel, c->init_range, &rng);
        } else {
            if (p->kind == PK_LSTM_WEIGHT || p->kind == PK_LSTM_BIAS)
                fill_uniform(w, p->numel, 1.0f / sqrtf((float)H), &rng); /* torch.nn.LSTM default */
            else if (k == lm->k.i_dec_b)
                ; /* word_language_model: decoder.bias zero */
            else
                fill_uniform(w, p->numel, c->init_range, &rng); /* encoder, decoder weight */
        }
    }
    if (c->init == LSTM_LM_INIT_ZAREMBA || c->forget_bias != 0.0f) {
        for (int l = 0; l < c->layers; l++) {
            float *bih = m->params + m->pt.t[lm->k.i_bih[l]].offset, *bhh = m->params + m->pt.t[lm->k.i_bhh[l]].offset;
            for (int j = H; j < 2 * H; j++) { /* forget gate block [H, 2H) */
                bih[j] = c->forget_bias;
                bhh[j] = 0.0f;
            }
        }
    }
}

Model *lstm_lm_create(const LstmLmConfig *cfg, int max_batch, int max_T) {
    if (!lstm_lm_config_valid(cfg, max_batch, max_T)) return NULL;
    Model *m = callocCheck(1, sizeof *m);
    LstmLm *lm = callocCheck(1, sizeof *lm);
    m->ops = &lstm_lm_ops;
    m->impl = lm;
    lstm_lm_core_init(&lm->k, cfg, max_batch, max_T);
    const int V = cfg->vocab, E = cfg->emb, H = cfg->hidden, L = cfg->layers;

    param_table_init(&m->pt);
    char name[PARAM_NAME_MAX];
    lm->k.i_enc = param_table_add(&m->pt, "encoder.weight", PK_EMBEDDING, 2, (int[]){V, E});
    for (int l = 0; l < L; l++) {
        int in = l == 0 ? E : H;
        snprintf(name, sizeof name, "rnn.weight_ih_l%d", l);
        lm->k.i_wih[l] = param_table_add(&m->pt, name, PK_LSTM_WEIGHT, 2, (int[]){4 * H, in});
        snprintf(name, sizeof name, "rnn.weight_hh_l%d", l);
        lm->k.i_whh[l] = param_table_add(&m->pt, name, PK_LSTM_WEIGHT, 2, (int[]){4 * H, H});
        snprintf(name, sizeof name, "rnn.bias_ih_l%d", l);
        lm->k.i_bih[l] = param_table_add(&m->pt, name, PK_LSTM_BIAS, 1, (int[]){4 * H});
        snprintf(name, sizeof name, "rnn.bias_hh_l%d", l);
        lm->k.i_bhh[l] = param_table_add(&m->pt, name, PK_LSTM_BIAS, 1, (int[]){4 * H});
    }
    lm->k.i_dec_w = cfg->tie_weights ? lm->k.i_enc
                                   : param_table_add(&m->pt, "decoder.weight", PK_FC_WEIGHT, 2, (int[]){V, H});
    lm->k.i_dec_b = param_table_add(&m->pt, "decoder.bias", PK_BIAS, 1, (int[]){V});
    m->params = param_arena_alloc(&m->pt);
    m->grads = param_arena_alloc(&m->pt);
    m->state = NULL;
    m->nstate = 0;

    workspace_alloc(&lm->train, cfg, max_batch, max_T, 1);
    lm->cache_tokens = mallocCheck(2 * (size_t)max_batch * max_T * sizeof(int));
    lm->cache_targets = lm->cache_tokens + (size_t)max_batch * max_T;
    lstm_lm_init_params(m, cfg->seed);
    return m;
}

void lstm_lm_set_dropout_seed(Model *m, uint64_t seed, uint64_t step) {
    LstmLm *lm = m->impl;
    lm->k.drop_seed = seed;
    lm->k.drop_step = step;
}

const LstmLmConfig *lstm_lm_config(const Model *m) { return &((const LstmLm *)m->impl)->k.cfg; }

int lstm_lm_carried_state(const Model *m, int l, const float **h /*N,H*/, const float **c /*N,H*/, int *n) {
    return lstm_lm_core_carried_state(&((const LstmLm *)m->impl)->k, l, h, c, n);
}

const float *lstm_lm_eval_logits(const Model *m) {
    const LstmLm *lm = m->impl;
    return lm->eval_ready ? lm->eval.logits : NULL;
}

static void lstm_lm_reset_state(Model *m) { lstm_lm_core_reset_state(&((LstmLm *)m->impl)->k); }

static float lstm_lm_forward(Model *m, const Batch *b, int train, BatchStats *st) {
    LstmLm *lm = m->impl;
    const LstmLmConfig *c = &lm->k.cfg;
    const int V = c->vocab, E = c->emb, H = c->hidden, L = c->layers;
    if (lstm_lm_core_check_batch(&lm->k, b, train, st)) return NAN;
    const int N = b->N, T = b->T, TN = T * N;
    if (!train && !lm->eval_ready) {
        workspace_alloc(&lm->eval, c, lm->k.max_batch, lm->k.max_T, 0);
        lm->eval_ready = 1;
    }
    Workspace *w = train ? &lm->train : &lm->eval;
    lstm_lm_core_begin(&lm->k, train, N);
    const float p = train ? c->dropout : 0.0f;
    const uint64_t step = lm->k.drop_step;
    const float *P = m->params;
    const size_t NH = (size_t)N * H;

    embedding_forward(w->xs[0], b->tokens, P + m->pt.t[lm->k.i_enc].offset, TN, V, E);
    dropout_forward(w->xs[0], w->xs[0], p, dropout_seed(lm->k.drop_seed, step, 0), (size_t)TN * E);
    for (int l = 0; l < L; l++) {
        float *ch = lstm_lm_core_layer(&lm->k, lm->k.carry_h, l), *cc = lstm_lm_core_layer(&lm->k, lm->k.carry_c, l);
        memcpy(w->hs[l], ch, NH * sizeof(float));
        memcpy(w->cs[l], cc, NH * sizeof(float));
        lstm_forward(w->hs[l], w->cs[l], w->gates[l], w->tanhc[l], w->xs[l], P + m->pt.t[lm->k.i_wih[l]].offset,
                     P + m->pt.t[lm->k.i_whh[l]].offset, P + m->pt.t[lm->k.i_bih[l]].offset,
                     P + m->pt.t[lm->k.i_bhh[l]].offset, T, N, l == 0 ? E : H, H);
        /* truncated BPTT: the next batch starts from this batch's final state */
        memcpy(ch, w->hs[l] + (size_t)T * NH, NH * sizeof(float));
        memcpy(cc, w->cs[l] + (size_t)T * NH, NH * sizeof(float));
        float *next = l + 1 < L ? w->xs[l + 1] : w->y;
        dropout_forward(next, w->hs[l] + NH, p, dropout_seed(lm->k.drop_seed, step, (uint64_t)l + 1), (size_t)TN * H);
    }
    linear_forward(w->logits, w->y, P + m->pt.t[lm->k.i_dec_w].offset, P + m->pt.t[lm->k.i_dec_b].offset, TN, H, V);
    long correct = 0;
    float loss = softmax_ce_forward(w->probs, &correct, w->logits, b->y, TN, V);
    if (train) {
        memcpy(lm->cache_tokens, b->tokens, (size_t)TN * sizeof(int));
        memcpy(lm->cache_targets, b->y, (size_t)TN * sizeof(int));
    }
    lstm_lm_core_end(&lm->k, train, T, N, loss, correct, st);
    return loss;
}

static void lstm_lm_backward(Model *m) {
    LstmLm *lm = m->impl;
    const LstmLmConfig *c = &lm->k.cfg;
    const int V = c->vocab, E = c->emb, H = c->hidden, L = c->layers;
    memset(m->grads, 0, m->pt.total * sizeof(float));
    if (!lm->k.have_cache) {
        fprintf(stderr, "error: lstm_lm backward without a preceding successful training forward; "
                        "gradients set to zero\n");
        return;
    }
    lm->k.have_cache = 0; /* the backward reuses the logits buffer for dlogits */
    Workspace *w = &lm->train;
    const int T = lm->k.cache_T, N = lm->k.cache_N, TN = T * N;
    const float p = c->dropout;
    const uint64_t step = lm->k.cache_step;
    const float *P = m->params;
    float *G = m->grads;
#define OFF(idx) (m->pt.t[(idx)].offset)

    /* loss = scale * sum over tokens of -log softmax(logits)[target] */
    const float scale = c->loss_sum_over_time ? 1.0f / (float)N : 1.0f / (float)TN;
    float *dlogits = w->logits;
    softmax_ce_backward(dlogits, w->probs, lm->cache_targets, scale, TN, V);
    /* logits = y @ dec_w^T + dec_b (dec_w is encoder.weight when tied: its grad adds up) */
    linear_backward(w->dh, G + OFF(lm->k.i_dec_w), G + OFF(lm->k.i_dec_b), dlogits, w->y, P + OFF(lm->k.i_dec_w), TN, H,
                    V);
    /* y = dropout(h of layer L-1) */
    dropout_backward(w->dh, w->dh, p, dropout_seed(lm->k.drop_seed, step, (uint64_t)L), (size_t)TN * H);
    for (int l = L - 1; l >= 0; l--) {
        const int in = l == 0 ? E : H;
        /* hs[l][1..T] = lstm(xs[l]) from the carried state (no gradient into it) */
        lstm_backward(w->dx, NULL, NULL, G + OFF(lm->k.i_wih[l]), G + OFF(lm->k.i_whh[l]), G + OFF(lm->k.i_bih[l]),
                      G + OFF(lm->k.i_bhh[l]), w->dgates, w->dstate, w->dh, w->hs[l], w->cs[l], w->gates[l],
                      w->tanhc[l], w->xs[l], P + OFF(lm->k.i_wih[l]), P + OFF(lm->k.i_whh[l]), T, N, in, H);
        if (l > 0) /* xs[l] = dropout(h of layer l-1) */
            dropout_backward(w->dh, w->dx, p, dropout_seed(lm->k.drop_seed, step, (uint64_t)l), (size_t)TN * H);
    }
    /* xs[0] = dropout(embedding(tokens)) */
    dropout_backward(w->dx, w->dx, p, dropout_seed(lm->k.drop_seed, step, 0), (size_t)TN * E);
    embedding_backward(G + OFF(lm->k.i_enc), w->dx, lm->cache_tokens, TN, V, E);
#undef OFF
}

static void lstm_lm_free(Model *m) {
    if (!m) return;
    LstmLm *lm = m->impl;
    if (lm) {
        workspace_free(&lm->train);
        if (lm->eval_ready) workspace_free(&lm->eval);
        lstm_lm_core_free(&lm->k);
        free(lm->cache_tokens);
        free(lm);
    }
    param_arena_free(m->params);
    param_arena_free(m->grads);
    param_table_free(&m->pt);
    free(m);
}

/* ---- LstmLmCore: shared with the GPU model (nn/lstm_lm_cuda.c) ---- */

void lstm_lm_core_init(LstmLmCore *k, const LstmLmConfig *cfg, int max_batch, int max_T) {
    memset(k, 0, sizeof *k);
    k->cfg = *cfg;
    k->max_batch = max_batch;
    k->max_T = max_T;
    const int L = cfg->layers;
    k->i_wih = mallocCheck(4 * (size_t)L * sizeof(int));
    k->i_whh = k->i_wih + L;
    k->i_bih = k->i_whh + L;
    k->i_bhh = k->i_bih + L;
    k->carry_h = callocCheck((size_t)L * max_batch * cfg->hidden, sizeof(float));
    k->carry_c = callocCheck((size_t)L * max_batch * cfg->hidden, sizeof(float));
    k->drop_seed = cfg->seed;
}

void lstm_lm_core_free(LstmLmCore *k) {
    free(k->carry_h);
    free(k->carry_c);
    free(k->i_wih);
    memset(k, 0, sizeof *k);
}

int lstm_lm_core_carried_state(const LstmLmCore *k, int l, const float **h /*N,H*/, const float **c /*N,H*/, int *n) {
    if (l < 0 || l >= k->cfg.layers) return -GC_ERR_PARAM;
    if (h) *h = lstm_lm_core_layer(k, k->carry_h, l);
    if (c) *c = lstm_lm_core_layer(k, k->carry_c, l);
    if (n) *n = k->carry_n;
    return 0;
}

void lstm_lm_core_reset_state(LstmLmCore *k) {
    size_t n = (size_t)k->cfg.layers * k->max_batch * k->cfg.hidden;
    memset(k->carry_h, 0, n * sizeof(float));
    memset(k->carry_c, 0, n * sizeof(float));
    k->carry_n = 0;
}

float lstm_lm_core_fail(LstmLmCore *k, int train, BatchStats *st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error: lstm_lm forward: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (train) k->have_cache = 0; /* a failed evaluation keeps a pending backward */
    if (st) memset(st, 0, sizeof *st);
    return NAN;
}

int lstm_lm_core_check_batch(LstmLmCore *k, const Batch *b, int train, BatchStats *st) {
    const int V = k->cfg.vocab;
    if (!b || !b->tokens || !b->y) return lstm_lm_core_fail(k, train, st, "batch without tokens or targets"), -1;
    const int N = b->N, T = b->T;
    if (N < 1 || N > k->max_batch)
        return lstm_lm_core_fail(k, train, st, "batch size %d outside 1..%d", N, k->max_batch), -1;
    if (T < 1 || T > k->max_T)
        return lstm_lm_core_fail(k, train, st, "sequence length %d outside 1..%d", T, k->max_T), -1;
    int bad = embedding_check_tokens(b->tokens, T * N, V);
    if (bad >= 0)
        return lstm_lm_core_fail(k, train, st, "token %d at %d outside [0, %d)", b->tokens[bad], bad, V), -1;
    bad = embedding_check_tokens(b->y, T * N, V);
    if (bad >= 0) return lstm_lm_core_fail(k, train, st, "target %d at %d outside [0, %d)", b->y[bad], bad, V), -1;
    return 0;
}

void lstm_lm_core_begin(LstmLmCore *k, int train, int N) {
    if (train) k->have_cache = 0;
    if (N != k->carry_n) { /* a new batch size cannot continue the old state */
        lstm_lm_core_reset_state(k);
        k->carry_n = N;
    }
}

void lstm_lm_core_end(LstmLmCore *k, int train, int T, int N, float loss, long correct, BatchStats *st) {
    if (st) {
        st->loss = loss;
        st->correct = correct;
        st->count = T * N;
    }
    if (train) {
        k->have_cache = 1;
        k->cache_T = T;
        k->cache_N = N;
        k->cache_step = k->drop_step;
        k->drop_step++;
    }
}

int lstm_lm_core_ckpt_sections(LstmLmCore *k, CkptSection *out, int cap) {
    const size_t carry_bytes = (size_t)k->cfg.layers * k->max_batch * k->cfg.hidden * sizeof(float);
    const struct {
        const char *name;
        void *p;
        size_t len;
    } s[] = {{"carry_h", k->carry_h, carry_bytes},
             {"carry_c", k->carry_c, carry_bytes},
             {"carry_n", &k->carry_n, sizeof k->carry_n},
             {"drop_step", &k->drop_step, sizeof k->drop_step}};
    int n = 0;
    for (size_t i = 0; i < sizeof s / sizeof s[0] && n < cap; i++, n++) {
        snprintf(out[n].name, CKPT_NAME_MAX, "%s", s[i].name);
        out[n].data = s[i].p;
        out[n].len = s[i].len;
    }
    return n;
}

/* the carried (h, c) of every layer, how many sequences it holds, and the
 * dropout step: what an exact resume needs beyond the parameters */
static int lstm_lm_ckpt_sections(Model *m, CkptSection *out, int cap) {
    return lstm_lm_core_ckpt_sections(&((LstmLm *)m->impl)->k, out, cap);
}

static const ModelOps lstm_lm_ops = {
    .name = "lstm_lm",
    .forward = lstm_lm_forward,
    .backward = lstm_lm_backward,
    .reset_state = lstm_lm_reset_state,
    .ckpt_sections = lstm_lm_ckpt_sections,
    .free = lstm_lm_free,
};
