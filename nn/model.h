/* The model interface shared by ResNet, LeNet and the LSTM language models, so
 * one training loop, one checkpoint format and one distributed layer serve all.
 *
 * A model owns:
 *   pt      the parameter table (nn/params.h)
 *   params  the parameter arena (pt.total floats)
 *   grads   the gradient arena, same offsets; backward OVERWRITES it
 *   state   non-trainable buffers (batch-norm running mean/var, ...), nstate floats;
 *           checkpointed with the model, never exchanged between workers
 * and its activations, sized for a maximum batch given at creation.
 */
#ifndef GC_MODEL_H
#define GC_MODEL_H

#include <stdint.h>

#include "common/ckpt.h"
#include "nn/params.h"

/* One minibatch. Image models use x (N*C*H*W floats, NCHW) and y (N labels).
 * Language models use tokens (T*N ints, time-major: tokens[t*N + n]) and
 * y (T*N targets, same layout). */
typedef struct {
    const float *x;
    const int *tokens;
    const int *y;
    int N; /* batch size */
    int T; /* sequence length (language models), else 0 */
} Batch;

typedef struct {
    double loss;  /* mean loss over the batch (per token for language models) */
    long correct; /* number of argmax predictions equal to the label */
    long count;   /* number of predictions (N, or N*T) */
} BatchStats;

typedef struct Model Model;

typedef struct {
    const char *name;
    /* forward pass; train = 1 uses batch statistics / dropout, 0 = evaluation.
     * Returns the mean loss and fills st (may be NULL). Keeps what backward needs. */
    float (*forward)(Model *m, const Batch *b, int train, BatchStats *st);
    /* backward of the last training forward; overwrites m->grads */
    void (*backward)(Model *m);
    /* language models: reset the carried hidden state (start of an epoch / evaluation);
     * NULL for a model that carries nothing between batches */
    void (*reset_state)(Model *m);
    /* optional: training state beyond params and state that a checkpoint must
     * keep for an exact resume (an LSTM's carried hidden state and dropout
     * step); fills up to cap sections pointing into the model, returns the count */
    int (*ckpt_sections)(Model *m, CkptSection *out, int cap);
    void (*free)(Model *m);
} ModelOps;

struct Model {
    const ModelOps *ops;
    ParamTable pt;
    float *params;
    float *grads;
    float *state;
    size_t nstate;
    void *impl;
};

static inline float model_forward(Model *m, const Batch *b, int train, BatchStats *st) {
    return m->ops->forward(m, b, train, st);
}
static inline void model_backward(Model *m) { m->ops->backward(m); }
static inline void model_free(Model *m) {
    if (m && m->ops) m->ops->free(m);
}

#endif
