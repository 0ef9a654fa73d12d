/* The LSTM language model on the GPU (see nn/lstm_lm_cuda.h; CPU twin nn/lstm_lm.c,
 * whose forward and backward this file follows line for line with the CUDA ops).
 * Shape letters: T time steps, N batch, V vocabulary, E embedding size,
 * H hidden units, L layers. Activations are time-major [T, N, ...] device arrays.
 * The Model backward OVERWRITES m->grads: it zeroes the device gradients, every
 * op accumulates (+=) into them (with tied weights the decoder and the encoder
 * both add into encoder.weight's gradient), and they are downloaded. */
#include "nn/lstm_lm_cuda.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"

#ifdef HAVE_CUDA

#include "common/check.h"
#include "common/clock.h"
#include "common/cuda_check.h"
#include "nn/cuda_ops.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/model_cuda.h"

/* the device activations of one forward pass (the CPU model's layout,
 * nn/lstm_lm.h) and the batch; training and evaluation each own one */
typedef struct {
    LstmLmActs a;  /* a.mem is device memory, the pointer arrays are host arrays of device pointers */
    int *tokens;   /* [T*N] device copies of the batch */
    int *targets;  /* [T*N] */
} Workspace;

typedef struct {
    CudaMirror mr; /* first: model_cuda_copy_stats finds it here */
    LstmLmCore k;  /* the CPU model's: config, indices, carried state (host), dropout, pending
                      backward (whose tokens and targets stay in train.tokens/targets) */
    float *d_carry_h, *d_carry_c; /* the carried state on the device, k.carry_h/c's layout: the
                                     master in device-master mode (k's copy is stale then) */
    Workspace train, eval;
    int eval_ready;
} LstmLmCuda;

static const ModelOps lstm_lm_cuda_ops;

/* 0, or -1 after printing what failed (GPU memory) */
static int workspace_alloc(Workspace *w, const LstmLmConfig *c, int NB, int TT, int with_backward, const char *what) {
    memset(w, 0, sizeof *w);
    size_t n = lstm_lm_acts_size(&w->a, c, NB, TT, with_backward), ntok = (size_t)NB * TT;
    float *mem = NULL;
    if (cuda_dev_alloc((void **)&mem, n * sizeof(float), what) ||
        cuda_dev_alloc((void **)&w->tokens, ntok * sizeof(int), "the token batch") ||
        cuda_dev_alloc((void **)&w->targets, ntok * sizeof(int), "the target batch")) {
        w->a.mem = mem;
        return -1;
    }
    lstm_lm_acts_place(&w->a, mem, c, NB, TT, with_backward);
    return 0;
}

static void workspace_free(Workspace *w) {
    cudaCheck(cudaFree(w->a.mem));
    cudaCheck(cudaFree(w->tokens));
    cudaCheck(cudaFree(w->targets));
    lstm_lm_acts_release(&w->a);
    memset(w, 0, sizeof *w);
}

static void lstm_lm_cuda_free(Model *m);

/* The carried state. On the host path every forward uploads it into the first
 * state slot of each layer and downloads the layer's final state (counted in
 * the mirror's copy statistics, as the parameters' copies are). In
 * device-master mode it stays in d_carry_h/c and the forward copies it on the
 * device; switching the mode off downloads it into k.carry_h/c (for a
 * checkpoint, an evaluation's save and restore), switching it on uploads it. */
static size_t carry_floats(const LstmLmCuda *lm) { return (size_t)lm->k.cfg.layers * lm->k.max_batch * lm->k.cfg.hidden; }

static void carry_follow_master(Model *m, int on) {
    LstmLmCuda *lm = m->impl;
    const size_t b = carry_floats(lm) * sizeof(float);
    if (on) {
        cudaCheck(cudaMemcpy(lm->d_carry_h, lm->k.carry_h, b, cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(lm->d_carry_c, lm->k.carry_c, b, cudaMemcpyHostToDevice));
    } else {
        cudaCheck(cudaMemcpy(lm->k.carry_h, lm->d_carry_h, b, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(lm->k.carry_c, lm->d_carry_c, b, cudaMemcpyDeviceToHost));
    }
}

static void carry_zero_device(LstmLmCuda *lm) {
    const size_t b = carry_floats(lm) * sizeof(float);
    cudaCheck(cudaMemsetAsync(lm->d_carry_h, 0, b, 0));
    cudaCheck(cudaMemsetAsync(lm->d_carry_c, 0, b, 0));
}

/* n floats between a layer's state slot (device) and the carried state: from
 * it into the slot (in = 1) or from the slot into it (in = 0). In device-master
 * mode the carried state is dev (a copy on the device), else host (a counted copy). */
static void carry_copy(LstmLmCuda *lm, int in, float *slot, float *host, float *dev, size_t n) {
    const size_t b = n * sizeof(float);
    if (lm->mr.device_master) {
        cudaCheck(cudaMemcpyAsync(in ? slot : dev, in ? dev : slot, b, cudaMemcpyDeviceToDevice, 0));
        return;
    }
    double t0 = mono_seconds();
    cudaCheck(cudaMemcpy(in ? slot : host, in ? host : slot, b, in ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost));
    double dt = mono_seconds() - t0;
    ModelCudaCopyStats *cs = &lm->mr.stats;
    if (in) cs->uploads++, cs->up_bytes += b, cs->up_s += dt;
    else cs->downloads++, cs->down_bytes += b, cs->down_s += dt;
}

/* index of the tensor `name` in m's table, checked to hold `numel` values; -1 after printing */
static int find_tensor(const Model *m, const char *name, size_t numel) {
    int k = param_table_find(&m->pt, name);
    if (k < 0 || m->pt.t[k].numel != numel) {
        fprintf(stderr, "error: GPU LSTM LM: the CPU model's table %s %s (%zu values expected)\n",
                k < 0 ? "has no" : "disagrees about", name, numel);
        return -1;
    }
    return k;
}

Model *lstm_lm_create_cuda(const LstmLmConfig *cfg, int max_batch, int max_T) {
    if (nn_cuda_device_count() < 1) {
        fprintf(stderr, "error: cannot make the GPU LSTM LM: no CUDA device is visible "
                        "(cudaGetDeviceCount reports none or fails)\n");
        return NULL;
    }
    if (!lstm_lm_config_valid(cfg, max_batch, max_T)) return NULL;
    Model *twin = lstm_lm_create(cfg, 1, 1); /* table, names, offsets and initial values */
    if (!twin) return NULL;
    const int V = cfg->vocab, E = cfg->emb, H = cfg->hidden, L = cfg->layers;
    LstmLmCuda *lm = callocCheck(1, sizeof *lm);
    lstm_lm_core_init(&lm->k, cfg, max_batch, max_T);
    Model *m = callocCheck(1, sizeof(Model));
    m->ops = &lstm_lm_cuda_ops;
    m->impl = lm;
    param_table_init(&m->pt);
    for (int i = 0; i < twin->pt.n; i++)
        param_table_add(&m->pt, twin->pt.t[i].name, twin->pt.t[i].kind, twin->pt.t[i].ndim, twin->pt.t[i].shape);
    m->state = NULL;
    m->nstate = 0;

    /* units find their tensors by name in the CPU model's table */
    int ok = 1;
    char name[PARAM_NAME_MAX];
    lm->k.i_enc = find_tensor(m, "encoder.weight", (size_t)V * E);
    ok &= lm->k.i_enc >= 0;
    for (int l = 0; l < L; l++) {
        const size_t in = l == 0 ? (size_t)E : (size_t)H;
        snprintf(name, sizeof name, "rnn.weight_ih_l%d", l);
        ok &= (lm->k.i_wih[l] = find_tensor(m, name, 4 * (size_t)H * in)) >= 0;
        snprintf(name, sizeof name, "rnn.weight_hh_l%d", l);
        ok &= (lm->k.i_whh[l] = find_tensor(m, name, 4 * (size_t)H * H)) >= 0;
        snprintf(name, sizeof name, "rnn.bias_ih_l%d", l);
        ok &= (lm->k.i_bih[l] = find_tensor(m, name, 4 * (size_t)H)) >= 0;
        snprintf(name, sizeof name, "rnn.bias_hh_l%d", l);
        ok &= (lm->k.i_bhh[l] = find_tensor(m, name, 4 * (size_t)H)) >= 0;
    }
    if (cfg->tie_weights) {
        lm->k.i_dec_w = lm->k.i_enc; /* the decoder weight IS encoder.weight */
        if (param_table_find(&m->pt, "decoder.weight") >= 0) {
            fprintf(stderr, "error: GPU LSTM LM: the tied CPU model has a decoder.weight\n");
            ok = 0;
        }
    } else {
        lm->k.i_dec_w = find_tensor(m, "decoder.weight", (size_t)V * H);
        ok &= lm->k.i_dec_w >= 0;
    }
    lm->k.i_dec_b = find_tensor(m, "decoder.bias", (size_t)V);
    ok &= lm->k.i_dec_b >= 0;
    const int want_n = 4 * L + (cfg->tie_weights ? 2 : 3); /* encoder, 4 per layer, [decoder.weight,] decoder.bias */
    if (ok && (twin->pt.n != want_n || twin->nstate != 0 || m->pt.total != twin->pt.total)) {
        fprintf(stderr, "error: GPU LSTM LM: the CPU model has %d tensors and %zu state floats (want %d and 0)\n",
                twin->pt.n, twin->nstate, want_n);
        ok = 0;
    }
    if (ok) {
        m->params = cuda_host_arena_alloc(m->pt.total);
        m->grads = cuda_host_arena_alloc(m->pt.total);
        ok = m->params && m->grads;
    }
    if (ok) {
        memcpy(m->params, twin->params, m->pt.total * sizeof(float));
        ok = cuda_mirror_init(&lm->mr, m) == 0;
        lm->mr.follow_master = carry_follow_master;
    }
    const size_t carry_bytes = carry_floats(lm) * sizeof(float);
    if (ok) ok = cuda_dev_alloc((void **)&lm->d_carry_h, carry_bytes, "the carried state") == 0 &&
                 cuda_dev_alloc((void **)&lm->d_carry_c, carry_bytes, "the carried state") == 0;
    model_free(twin);
    if (ok) ok = workspace_alloc(&lm->train, cfg, max_batch, max_T, 1, "the training activations") == 0;
    if (!ok) {
        lstm_lm_cuda_free(m);
        return NULL;
    }
    return m;
}

void lstm_lm_init_params_cuda(Model *m, uint64_t seed) {
    LstmLmCuda *lm = m->impl;
    Model *twin = lstm_lm_create(&lm->k.cfg, 1, 1);
    if (!twin) {
        gc_fatal("error: lstm_lm_init_params_cuda: cannot make the CPU twin\n");
    }
    lstm_lm_init_params(twin, seed);
    memcpy(m->params, twin->params, m->pt.total * sizeof(float));
    model_free(twin);
}

void lstm_lm_set_dropout_seed_cuda(Model *m, uint64_t seed, uint64_t step) {
    LstmLmCuda *lm = m->impl;
    lm->k.drop_seed = seed;
    lm->k.drop_step = step;
}

const LstmLmConfig *lstm_lm_config_cuda(const Model *m) { return &((const LstmLmCuda *)m->impl)->k.cfg; }

int lstm_lm_carried_state_cuda(const Model *m, int l, const float **h /*N,H*/, const float **c /*N,H*/, int *n) {
    return lstm_lm_core_carried_state(&((const LstmLmCuda *)m->impl)->k, l, h, c, n);
}

static void lstm_lm_cuda_reset_state(Model *m) {
    LstmLmCuda *lm = m->impl;
    lstm_lm_core_reset_state(&lm->k);
    carry_zero_device(lm);
}

/* device parameter / gradient of tensor k */
static float *DP(Model *m, int k) { return ((LstmLmCuda *)m->impl)->mr.d_params + m->pt.t[k].offset; }
static float *DG(Model *m, int k) { return ((LstmLmCuda *)m->impl)->mr.d_grads + m->pt.t[k].offset; }

/* the ops below were given tokens checked on the host: a failure is a bug here */
static void must(int rc, const char *what) {
    if (rc != 0) {
        gc_fatal("internal error: GPU LSTM LM: %s failed (%d)\n", what, rc);
    }
}

static float lstm_lm_cuda_forward(Model *m, const Batch *b, int train, BatchStats *st) {
    LstmLmCuda *lm = m->impl;
    const LstmLmConfig *c = &lm->k.cfg;
    const int V = c->vocab, E = c->emb, H = c->hidden, L = c->layers;
    if (lstm_lm_core_check_batch(&lm->k, b, train, st)) return NAN;
    const int N = b->N, T = b->T, TN = T * N;
    if (!train && !lm->eval_ready) {
        if (workspace_alloc(&lm->eval, c, lm->k.max_batch, lm->k.max_T, 0, "the evaluation activations")) {
            workspace_free(&lm->eval);
            return lstm_lm_core_fail(&lm->k, train, st, "out of GPU memory for the evaluation activations");
        }
        lm->eval_ready = 1;
    }
    Workspace *w = train ? &lm->train : &lm->eval;
    const int carried_n = lm->k.carry_n;
    lstm_lm_core_begin(&lm->k, train, N);
    if (lm->k.carry_n != carried_n) carry_zero_device(lm); /* a new batch size: the state was reset */
    const float p = train ? c->dropout : 0.0f;
    const uint64_t step = lm->k.drop_step;
    const size_t NH = (size_t)N * H;

    cuda_mirror_upload(&lm->mr, m, 0);
    cudaCheck(cudaMemcpy(w->tokens, b->tokens, (size_t)TN * sizeof(int), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(w->targets, b->y, (size_t)TN * sizeof(int), cudaMemcpyHostToDevice));

    must(embedding_forward_cuda(w->a.xs[0], w->tokens, DP(m, lm->k.i_enc), TN, V, E), "embedding_forward_cuda");
    must(dropout_forward_cuda(w->a.xs[0], w->a.xs[0], p, dropout_seed(lm->k.drop_seed, step, 0), (size_t)TN * E),
         "dropout_forward_cuda");
    for (int l = 0; l < L; l++) {
        float *ch = lstm_lm_core_layer(&lm->k, lm->k.carry_h, l), *cc = lstm_lm_core_layer(&lm->k, lm->k.carry_c, l);
        float *dch = lstm_lm_core_layer(&lm->k, lm->d_carry_h, l), *dcc = lstm_lm_core_layer(&lm->k, lm->d_carry_c, l);
        /* slot 0 = the carried state */
        carry_copy(lm, 1, w->a.hs[l], ch, dch, NH);
        carry_copy(lm, 1, w->a.cs[l], cc, dcc, NH);
        lstm_forward_cuda(w->a.hs[l], w->a.cs[l], w->a.gates[l], w->a.tanhc[l], w->a.xs[l], DP(m, lm->k.i_wih[l]),
                          DP(m, lm->k.i_whh[l]), DP(m, lm->k.i_bih[l]), DP(m, lm->k.i_bhh[l]), T, N, l == 0 ? E : H, H);
        /* truncated BPTT: the next batch starts from this batch's final state (slot T) */
        carry_copy(lm, 0, w->a.hs[l] + (size_t)T * NH, ch, dch, NH);
        carry_copy(lm, 0, w->a.cs[l] + (size_t)T * NH, cc, dcc, NH);
        float *next = l + 1 < L ? w->a.xs[l + 1] : w->a.y;
        must(dropout_forward_cuda(next, w->a.hs[l] + NH, p, dropout_seed(lm->k.drop_seed, step, (uint64_t)l + 1),
                                  (size_t)TN * H),
             "dropout_forward_cuda");
    }
    linear_forward_cuda(w->a.logits, w->a.y, DP(m, lm->k.i_dec_w), DP(m, lm->k.i_dec_b), TN, H, V);
    long correct = 0;
    float loss = softmax_ce_forward_cuda(w->a.probs, &correct, w->a.logits, w->targets, TN, V);
    lstm_lm_core_end(&lm->k, train, T, N, loss, correct, st);
    return loss;
}

static void lstm_lm_cuda_backward(Model *m) {
    LstmLmCuda *lm = m->impl;
    const LstmLmConfig *c = &lm->k.cfg;
    const int V = c->vocab, E = c->emb, H = c->hidden, L = c->layers;
    if (!lm->k.have_cache) {
        memset(m->grads, 0, m->pt.total * sizeof(float));
        fprintf(stderr, "error: lstm_lm backward without a preceding successful training forward; "
                        "gradients set to zero\n");
        return;
    }
    lm->k.have_cache = 0; /* the backward reuses the logits buffer for dlogits */
    Workspace *w = &lm->train;
    const int T = lm->k.cache_T, N = lm->k.cache_N, TN = T * N;
    const float p = c->dropout;
    const uint64_t step = lm->k.cache_step;
    cudaCheck(cudaMemsetAsync(lm->mr.d_grads, 0, m->pt.total * sizeof(float), 0));

    /* loss = scale * sum over tokens of -log softmax(logits)[target] */
    const float scale = c->loss_sum_over_time ? 1.0f / (float)N : 1.0f / (float)TN;
    float *dlogits = w->a.logits;
    softmax_ce_backward_cuda(dlogits, w->a.probs, w->targets, scale, TN, V);
    /* logits = y @ dec_w^T + dec_b (dec_w is encoder.weight when tied: its grad adds up) */
    linear_backward_cuda(w->a.dh, DG(m, lm->k.i_dec_w), DG(m, lm->k.i_dec_b), dlogits, w->a.y, DP(m, lm->k.i_dec_w), TN, H, V);
    /* y = dropout(h of layer L-1) */
    must(dropout_backward_cuda(w->a.dh, w->a.dh, p, dropout_seed(lm->k.drop_seed, step, (uint64_t)L), (size_t)TN * H),
         "dropout_backward_cuda");
    for (int l = L - 1; l >= 0; l--) {
        const int in = l == 0 ? E : H;
        /* hs[l][1..T] = lstm(xs[l]) from the carried state (no gradient into it) */
        lstm_backward_cuda(w->a.dx, NULL, NULL, DG(m, lm->k.i_wih[l]), DG(m, lm->k.i_whh[l]), DG(m, lm->k.i_bih[l]),
                           DG(m, lm->k.i_bhh[l]), w->a.dgates, w->a.dstate, w->a.dh, w->a.hs[l], w->a.cs[l], w->a.gates[l],
                           w->a.tanhc[l], w->a.xs[l], DP(m, lm->k.i_wih[l]), DP(m, lm->k.i_whh[l]), T, N, in, H);
        if (l > 0) /* xs[l] = dropout(h of layer l-1) */
            must(dropout_backward_cuda(w->a.dh, w->a.dx, p, dropout_seed(lm->k.drop_seed, step, (uint64_t)l),
                                       (size_t)TN * H),
                 "dropout_backward_cuda");
    }
    /* xs[0] = dropout(embedding(tokens)) */
    must(dropout_backward_cuda(w->a.dx, w->a.dx, p, dropout_seed(lm->k.drop_seed, step, 0), (size_t)TN * E),
         "dropout_backward_cuda");
    must(embedding_backward_cuda(DG(m, lm->k.i_enc), w->a.dx, w->tokens, TN, V, E), "embedding_backward_cuda");
    cuda_mirror_download_grads(&lm->mr, m);
}

static void lstm_lm_cuda_free(Model *m) {
    if (!m) return;
    LstmLmCuda *lm = m->impl;
    if (lm) {
        if (lm->train.a.xs) workspace_free(&lm->train);
        if (lm->eval_ready) workspace_free(&lm->eval);
        cuda_mirror_free(&lm->mr);
        cudaCheck(cudaFree(lm->d_carry_h));
        cudaCheck(cudaFree(lm->d_carry_c));
        lstm_lm_core_free(&lm->k);
        free(lm);
    }
    cuda_model_free_host(m);
}

/* the CPU model's sections (nn/lstm_lm.c), host memory: a checkpoint moves
 * between the CPU and GPU models */
static int lstm_lm_cuda_ckpt_sections(Model *m, CkptSection *out, int cap) {
    return lstm_lm_core_ckpt_sections(&((LstmLmCuda *)m->impl)->k, out, cap);
}

static const ModelOps lstm_lm_cuda_ops = {
    .name = "lstm_lm_cuda",
    .forward = lstm_lm_cuda_forward,
    .backward = lstm_lm_cuda_backward,
    .reset_state = lstm_lm_cuda_reset_state,
    .ckpt_sections = lstm_lm_cuda_ckpt_sections,
    .free = lstm_lm_cuda_free,
};

#else /* built without CUDA */

Model *lstm_lm_create_cuda(const LstmLmConfig *cfg, int max_batch, int max_T) {
    (void)cfg, (void)max_batch, (void)max_T;
    fprintf(stderr,
            "error: cannot make the GPU LSTM LM: this build has no CUDA (nvcc was not found, or NO_CUDA=1)\n");
    return NULL;
}

void lstm_lm_init_params_cuda(Model *m, uint64_t seed) { (void)m, (void)seed; }

void lstm_lm_set_dropout_seed_cuda(Model *m, uint64_t seed, uint64_t step) { (void)m, (void)seed, (void)step; }

const LstmLmConfig *lstm_lm_config_cuda(const Model *m) {
    (void)m;
    return NULL;
}

int lstm_lm_carried_state_cuda(const Model *m, int l, const float **h /*N,H*/, const float **c /*N,H*/, int *n) {
    (void)m, (void)l, (void)h, (void)c, (void)n;
    return -GC_ERR_PARAM;
}

#endif
