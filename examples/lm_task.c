#include "examples/lm_task.h"

#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "nn/lstm_lm_cuda.h"

Model *lm_task_model(Task *t, int rank, int max_batch) {
    LmTask *lt = t->ctx;
    /* identical parameters everywhere, a dropout stream per worker */
    const uint64_t drop_seed = lt->seed * 1000003ULL + (uint64_t)rank + 1;
    if (t->cuda) {
        Model *m = lstm_lm_create_cuda(&lt->cfg, max_batch, lt->bptt);
        if (m) lstm_lm_set_dropout_seed_cuda(m, drop_seed, 0);
        return m;
    }
    Model *m = lstm_lm_create(&lt->cfg, max_batch, lt->bptt);
    if (m) lstm_lm_set_dropout_seed(m, drop_seed, 0);
    return m;
}

typedef struct {
    LmLoader l;
    int *tokens, *y;
} LmIter;

static int lm_next(DataIter *it, Batch *b) {
    LmIter *li = it->impl;
    int T = lm_loader_next(&li->l, li->tokens, li->y);
    if (T < 0) {
        snprintf(it->err, sizeof it->err, "%s", li->l.err);
        return T;
    }
    memset(b, 0, sizeof *b);
    b->tokens = li->tokens;
    b->y = li->y;
    b->N = li->l.B;
    b->T = T;
    return T;
}
static LoaderPos lm_get_pos(const DataIter *it) { return lm_loader_get_pos(&((LmIter *)it->impl)->l); }
static int lm_set_pos(DataIter *it, const LoaderPos *p) {
    LmIter *li = it->impl;
    int rc = lm_loader_set_pos(&li->l, p);
    if (rc) snprintf(it->err, sizeof it->err, "%s", li->l.err);
    return rc;
}
static void lm_free(DataIter *it) {
    LmIter *li = it->impl;
    lm_loader_free(&li->l);
    free(li->tokens);
    free(li->y);
    free(li);
    free(it);
}

DataIter *lm_task_data(Task *t, int split, int rank, int world, int batch, uint64_t seed, char *err, size_t errlen) {
    (void)seed;
    LmTask *lt = t->ctx;
    const int *stream = split == SPLIT_TRAIN ? lt->corpus.train : split == SPLIT_VALID ? lt->corpus.valid : lt->corpus.test;
    int64_t n = split == SPLIT_TRAIN ? lt->corpus.ntrain : split == SPLIT_VALID ? lt->corpus.nvalid : lt->corpus.ntest;
    if (!stream || n < 2) {
        snprintf(err, errlen, "the %s split is empty", split == SPLIT_TEST ? "test" : split == SPLIT_VALID ? "validation" : "training");
        return NULL;
    }
    LmIter *li = callocCheck(1, sizeof *li);
    /* training: one contiguous part per worker (SBC IV-A); evaluation: each
     * worker evaluates its contiguous part of the split */
    if (lm_loader_init(&li->l, stream, n, batch, lt->bptt, rank, world, err, errlen)) {
        free(li);
        return NULL;
    }
    li->tokens = mallocCheck((size_t)batch * (size_t)lt->bptt * sizeof(int));
    li->y = mallocCheck((size_t)batch * (size_t)lt->bptt * sizeof(int));
    DataIter *it = callocCheck(1, sizeof *it);
    it->next = lm_next;
    it->get_pos = lm_get_pos;
    it->set_pos = lm_set_pos;
    it->free = lm_free;
    it->steps_per_epoch = (long)li->l.steps_per_epoch;
    it->samples_per_step = (long)batch * lt->bptt;
    it->pos_per_step = lt->bptt;
    it->impl = li;
    return it;
}

