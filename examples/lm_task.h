/* Language-model data and models for the trainers: the LSTM LM (one dropout
 * stream per worker; the GPU model of nn/lstm_lm_cuda.h when the trainer asks
 * for --device cuda) over contiguous token streams split across workers
 * (SBC section IV-A), behind the trainer's DataIter. */
#ifndef GC_LM_TASK_H
#define GC_LM_TASK_H

#include "datasets/text.h"
#include "examples/trainer.h"
#include "nn/lstm_lm.h"

typedef struct {
    TextCorpus corpus;
    LstmLmConfig cfg;
    int bptt;
    uint64_t seed;
    char name[128];
} LmTask;

/* Task.model_new and Task.data_new for language models (Task.ctx = LmTask *) */
Model *lm_task_model(Task *t, int rank, int max_batch);
DataIter *lm_task_data(Task *t, int split, int rank, int world, int batch, uint64_t seed, char *err, size_t errlen);

#endif
