/* LSTM language model (Zaremba et al. 2014 / TensorFlow PTB tutorial /
 * PyTorch word_language_model), as a Model (nn/model.h).
 *
 *   tokens [T,N] -> encoder (embedding [V,E]) -> dropout
 *   -> L stacked LSTM layers (H units), dropout after each layer
 *   -> decoder (linear [V,H] + bias [V]) -> softmax cross-entropy, mean per token
 *
 * Dropout sits on the non-recurrent connections only (Zaremba et al. 2014,
 * section 3): on the embedding output, between layers and on the last layer's
 * output; the recurrent h -> h path is never dropped. Masks are reproducible from
 * (seed, step, site), site 0 = embedding output, l = input of layer l,
 * L = decoder input (nn/dropout.h).
 *
 * Weight tying (Press & Wolf 2016, Inan et al. 2016; used by DGC's PTB model,
 * DGC paper section 4, "Language Modeling"): the decoder weight IS encoder.weight (E must equal H);
 * there is no decoder.weight tensor and its gradient from both uses is summed.
 *
 * Truncated BPTT: the final (h, c) of every layer is carried into the next
 * forward, which starts from it; backward never flows into the previous batch.
 * reset_state zeroes the carried state; so does a forward whose batch size N
 * differs from the previous one. Evaluation forwards (train = 0) carry the state
 * too, and use their own buffers, so they do not disturb a pending backward.
 *
 * Parameter names are those of the PyTorch state_dict of the equivalent
 * module: encoder.weight [V,E] (PK_EMBEDDING), rnn.weight_ih_l{k} [4H,In],
 * rnn.weight_hh_l{k} [4H,H] (PK_LSTM_WEIGHT), rnn.bias_ih_l{k}, rnn.bias_hh_l{k}
 * [4H] (PK_LSTM_BIAS), decoder.weight [V,H] (PK_FC_WEIGHT, untied only),
 * decoder.bias [V] (PK_BIAS). Gate order i, f, g, o as torch.nn.LSTM.
 *
 * The Model's backward OVERWRITES m->grads (zeroes them, then the ops accumulate).
 */
#ifndef GC_NN_LSTM_LM_H
#define GC_NN_LSTM_LM_H

#include <stdint.h>

#include "nn/model.h"

typedef enum {
    /* Zaremba et al. 2014 / TensorFlow PTB tutorial: encoder, LSTM weights,
     * decoder weight and bias ~ U(-init_range, init_range); LSTM biases zero
     * (TF BasicLSTMCell zero-initialises its bias), then the forget-gate block
     * of bias_ih is set to forget_bias. init_range 0.05 "medium", 0.04 "large". */
    LSTM_LM_INIT_ZAREMBA = 0,
    /* PyTorch examples/word_language_model: encoder and decoder weight
     * ~ U(-init_range, init_range) with init_range 0.1, decoder bias zero, every
     * LSTM tensor (weights and biases) ~ U(-1/sqrt(H), 1/sqrt(H)) as
     * torch.nn.LSTM.reset_parameters; when forget_bias != 0 the forget-gate
     * block of bias_ih is set to forget_bias and that of bias_hh to zero. */
    LSTM_LM_INIT_PYTORCH = 1,
} LstmLmInit;

typedef struct {
    int vocab;       /* V */
    int emb;         /* E (== hidden when tie_weights) */
    int hidden;      /* H */
    int layers;      /* L >= 1 */
    float dropout;   /* drop probability in [0, 1) on the non-recurrent connections */
    int tie_weights; /* decoder weight = encoder.weight */
    float forget_bias;
    LstmLmInit init;
    float init_range;
    /* 0: the gradient is that of the per-token MEAN loss (PyTorch
     * word_language_model). 1: the gradient is T times that, i.e. of the loss
     * summed over time steps and averaged over the batch (TensorFlow PTB
     * tutorial: sequence_loss averaged over the batch, reduce_sum over time), so
     * that tutorial's learning rate 1.0 and clip norm 5 apply unchanged.
     * The reported loss is the per-token mean either way. */
    int loss_sum_over_time;
    uint64_t seed; /* parameter init, and the default dropout seed */
} LstmLmConfig;

/* SBC's WordLSTM (Sattler et al. 2018, section IV-A and supplement VII-C "Model
 * Specification"): the
 * TensorFlow PTB tutorial configuration "medium": 2 layers, 650 units, 650-dim
 * embedding, vocabulary 10000, keep_prob 0.5 (dropout 0.5), init_scale 0.05,
 * forget_bias 0.0, untied; loss summed over time. TF medium trains with
 * num_steps 35, batch 20, lr 1.0, max_grad_norm 5; SBC Table III: batch 5,
 * lr 1.0, decay 0.8, 60000 iterations. */
LstmLmConfig lstm_lm_config_sbc_word(void);
/* SBC's CharLSTM: WordLSTM adapted to the 98-symbol Shakespeare vocabulary
 * "by decreasing the size of the embedding": 2 layers of 200 units, embedding
 * 200 (the TF tutorial's embedding equals its hidden size), other settings as
 * WordLSTM (our reading; the paper gives no more detail). */
LstmLmConfig lstm_lm_config_sbc_char(void);
/* DGC's PTB model (Lin et al. 2018, section 4 Experiments, "Language Modeling"): "2-layer LSTM language model
 * architecture with 1500 hidden units per layer (Press & Wolf, 2016), tying the
 * weights of encoder and decoder ... vanilla SGD with gradient clipping, while
 * learning rate decays when no improvement has been made in validation loss",
 * 40 epochs: the PyTorch word_language_model command `--emsize 1500 --nhid 1500
 * --dropout 0.65 --epochs 40 --tied` (Zaremba "large" size), with that example's
 * init (LSTM_LM_INIT_PYTORCH, 0.1) and mean loss (defaults there: lr 20, clip
 * 0.25, bptt 35, batch 20, lr / 4 on a validation plateau). */
LstmLmConfig lstm_lm_config_dgc_ptb(void);

/* The activations of one forward pass (and the backward's scratch), in one
 * allocation of host (CPU model) or device (GPU model, nn/lstm_lm_cuda.c)
 * memory; both models lay it out with the functions below, so the two never
 * differ. Shapes for T steps of N sequences: */
typedef struct {
    float *mem;     /* the one allocation holding every float array below */
    /* host arrays of L pointers each: */
    float **xs;     /* [L]: xs[0] = dropout(embedding) [T,N,E], xs[l] = dropout(h of layer l-1) [T,N,H] */
    float **hs;     /* [L]: [T+1,N,H], slot 0 = initial state */
    float **cs;     /* [L]: [T+1,N,H] */
    float **gates;  /* [L]: [T,N,4H] */
    float **tanhc;  /* [L]: [T,N,H] */
    float *y;       /* [T,N,H] dropout(h of layer L-1), the decoder input */
    float *logits;  /* [T*N,V]; the training backward reuses it for dlogits */
    float *probs;   /* [T*N,V] */
    /* with_backward only: backward scratch */
    float *dgates;  /* [T,N,4H] */
    float *dx;      /* [T,N,max(E,H)] */
    float *dh;      /* [T,N,H] */
    float *dstate;  /* [2,N,H] */
} LstmLmActs;

/* zeroes w, allocates its per-layer pointer arrays and returns how many floats
 * (each array 16-float aligned) the allocation for NB sequences of TT steps needs */
size_t lstm_lm_acts_size(LstmLmActs *w, const LstmLmConfig *c, int NB, int TT, int with_backward);
/* w->mem = mem and every array pointed into it (mem: [lstm_lm_acts_size] floats) */
void lstm_lm_acts_place(LstmLmActs *w, float *mem, const LstmLmConfig *c, int NB, int TT, int with_backward);
/* frees the pointer arrays (not mem) and zeroes w */
void lstm_lm_acts_release(LstmLmActs *w);

/* What the CPU model and its GPU twin (nn/lstm_lm_cuda.c) keep alike, on the
 * host: config and sizes, the tensors' indices in the parameter table, the
 * carried state, the dropout counters and the batch a pending backward needs. */
typedef struct {
    LstmLmConfig cfg;
    int max_batch, max_T;
    int i_enc, i_dec_w, i_dec_b;        /* parameter indices in the table */
    int *i_wih, *i_whh, *i_bih, *i_bhh; /* [L] */
    float *carry_h, *carry_c;           /* [L][max_batch,H] each: h and c carried to the next batch */
    int carry_n;                        /* sequences the carried state holds */
    uint64_t drop_seed, drop_step;
    int have_cache, cache_T, cache_N;   /* the pending backward's batch */
    uint64_t cache_step;
} LstmLmCore;

/* cfg and sizes, drop_seed = cfg->seed, the index arrays and a zeroed carried state */
void lstm_lm_core_init(LstmLmCore *k, const LstmLmConfig *cfg, int max_batch, int max_T);
void lstm_lm_core_free(LstmLmCore *k);
/* layer l's rows of a carried-state array (k->carry_h or k->carry_c): [max_batch,H] */
static inline float *lstm_lm_core_layer(const LstmLmCore *k, float *carry, int l) {
    return carry + (size_t)l * k->max_batch * k->cfg.hidden;
}
/* lstm_lm_carried_state of the model that holds k */
int lstm_lm_core_carried_state(const LstmLmCore *k, int l, const float **h /*N,H*/, const float **c /*N,H*/, int *n);
void lstm_lm_core_reset_state(LstmLmCore *k);
/* a failed forward: prints "error: lstm_lm forward: <fmt>", drops the pending
 * backward of a training forward (a failed evaluation keeps it), zeroes st; NAN */
__attribute__((format(printf, 4, 5))) float lstm_lm_core_fail(LstmLmCore *k, int train, BatchStats *st,
                                                              const char *fmt, ...);
/* the batch's sizes, tokens and targets: 0, or -1 after lstm_lm_core_fail */
int lstm_lm_core_check_batch(LstmLmCore *k, const Batch *b, int train, BatchStats *st);
/* before the forward of a checked batch of N sequences: a training forward drops
 * the pending backward, and a new batch size resets the carried state */
void lstm_lm_core_begin(LstmLmCore *k, int train, int N);
/* after a forward of T steps of N sequences: st gets the loss and hit count; a
 * training forward records its batch for the backward and advances the dropout step */
void lstm_lm_core_end(LstmLmCore *k, int train, int T, int N, float loss, long correct, BatchStats *st);
/* The checkpoint sections of the carried state: the (h, c) of every layer, how
 * many sequences they hold, the dropout step. The CPU and GPU models both use
 * it, so a checkpoint moves between them. out: [cap]; returns the number written */
int lstm_lm_core_ckpt_sections(LstmLmCore *k, CkptSection *out, int cap);

/* 1 when the config and sizes are valid, else 0 after printing why on stderr
 * (lstm_lm_create and the GPU twin, nn/lstm_lm_cuda.h, check with it) */
int lstm_lm_config_valid(const LstmLmConfig *cfg, int max_batch, int max_T);

/* NULL (with a message on stderr) when the config or sizes are invalid.
 * Parameters are initialised from cfg->seed. Activations are sized for batches
 * of up to max_batch sequences of up to max_T steps. */
Model *lstm_lm_create(const LstmLmConfig *cfg, int max_batch, int max_T);

/* (Re)initialise the parameters as cfg->init says, from seed. */
void lstm_lm_init_params(Model *m, uint64_t seed);

/* Dropout masks come from dropout_seed(seed, step, site); step counts training
 * forwards and starts at 0 with seed = cfg->seed. Give each worker its own seed
 * (e.g. seed + rank); set step when resuming. */
void lstm_lm_set_dropout_seed(Model *m, uint64_t seed, uint64_t step);

const LstmLmConfig *lstm_lm_config(const Model *m);
/* logits [T*N, V] (row t*N + n) of the last evaluation forward (train = 0) of
 * the CPU model; NULL before any. For tests comparing with PyTorch. */
const float *lstm_lm_eval_logits(const Model *m);

/* The carried state of layer l: h and c [N,H] each, N = *n (0 when reset);
 * for tests and checkpoints. Returns 0, or -GC_ERR_PARAM for a bad layer. */
int lstm_lm_carried_state(const Model *m, int l, const float **h /*N,H*/, const float **c /*N,H*/, int *n);

#endif
