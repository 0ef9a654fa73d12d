/* The training loop and command line shared by train_resnet, train_lenet and
 * train_lstm: one implementation of the CLI (train_options.c), the
 * data-parallel loop over the distributed layer and evaluation (trainer.c,
 * whose step is train_step), progress output and logs (train_log.c), and
 * checkpoints (train_ckpt.c).
 *
 * A binary describes its task (model and data) with a Task and its own flags;
 * everything else (optimizer, schedule, workers, codecs, logging, --save and
 * --resume) comes from here.
 *
 * Batch sizes: --batch is the PER-WORKER batch; the global batch of one step
 * is batch x workers. Every worker trains on its own disjoint shard.
 */
#ifndef GC_TRAINER_H
#define GC_TRAINER_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "datasets/data.h"
#include "dist/exchange.h"
#include "nn/model.h"
#include "optim/lr_sched.h"
#include "optim/optim.h"

/* ---- data for the loop: one iterator per worker and split ---- */
typedef struct DataIter DataIter;
struct DataIter {
    /* next batch: > 0 samples (b filled; pointers owned by the iterator), 0 at the
     * end of an epoch (the next call starts the next epoch), < 0 on error (err set) */
    int (*next)(DataIter *it, Batch *b);
    LoaderPos (*get_pos)(const DataIter *it);
    int (*set_pos)(DataIter *it, const LoaderPos *p); /* 0 or negative with err set */
    void (*free)(DataIter *it);
    long steps_per_epoch;
    long samples_per_step; /* images (N) or tokens (N*T) per full batch, for throughput */
    long pos_per_step;     /* what a full batch adds to LoaderPos.cursor (images: N; tokens: T): a resume
                            * on another worker count places each worker's position at the step with it */
    char err[DATA_ERR_LEN];
    void *impl;
};

enum { SPLIT_TRAIN = 0, SPLIT_VALID = 1, SPLIT_TEST = 2 };

typedef struct Task Task;
struct Task {
    const char *name;   /* "resnet20 on cifar10" */
    int lm;             /* language model: carried state, perplexity */
    int is_char;        /* character model: also bits per character */
    int has_valid;      /* a separate validation split exists (LM) */
    double clip_norm;   /* gradient clipping by global norm before the exchange (0 = off) */
    int cuda;           /* set by train_run from --device: model_new builds the GPU model */
    /* a new model for worker rank, identically initialized on every worker from
     * the run seed (rank seeds only per-worker randomness such as dropout);
     * NULL after printing why */
    Model *(*model_new)(Task *t, int rank, int max_batch);
    /* with cuda: called by each worker's thread after freeing its model, to free what the
     * thread's GPU ops made (nn_cuda_release: cuDNN/cuBLAS handles, plans, workspace);
     * NULL: nothing to free */
    void (*thread_release)(void);
    /* an iterator over split for worker rank of world (batch is per worker);
     * NULL with a message in err */
    DataIter *(*data_new)(Task *t, int split, int rank, int world, int batch, uint64_t seed, char *err,
                          size_t errlen);
    void *ctx;
};

/* ---- options ---- */
/* --timeout's default: longer than any wait of a healthy run (a collective waits for the
 * slowest worker's step, evaluation shard or checkpoint write), short enough to free a
 * cluster's nodes from a job with a stalled rank */
#define TRAIN_DEFAULT_TIMEOUT 900.0
#define TRAIN_MAX_RULES POLICY_MAX_RULES
typedef struct {
    /* training */
    long epochs, steps;   /* steps > 0 overrides epochs */
    long stop_at;         /* > 0: end this run after that step (schedule unchanged) */
    int batch;            /* per worker */
    double lr;
    double ema;      /* --ema D: evaluate an exponential moving average of the parameters (0 = off) */
    double timeout;  /* --timeout: seconds a worker may wait in one collective (0 = forever) */
    char optim[256];      /* optimizer spec */
    double momentum, wd;  /* < 0: not given on the command line */
    int nesterov;         /* -1: not given */
    char schedule[256];
    uint64_t seed;
    int threads;          /* 0 = automatic */
    int eval_every;       /* epochs (0 = only at the end) */
    long print_every;     /* steps */
    char log[1024];
    char log_layers[1024]; /* --log-layers FILE: per-tensor statistics at every progress line */
    char save[1024], resume[1024];
    char export_path[1024]; /* --export FILE.safetensors: the model as PyTorch's state_dict at the end */
    char init_from[1024];   /* --init-from FILE.safetensors: weights (a state_dict) before training */
    int no_steps;           /* --steps 0: no training step (export or evaluate an initial or resumed model) */
    long save_every;      /* steps (0 = only at the end) */
    /* distributed */
    int workers;          /* local threads (under mpirun the processes are the workers) */
    int workers_given;    /* --workers was on the command line */
    char backend[16];     /* "auto", "local", "mpi", "nccl" */
    int cuda;             /* --device cuda */
    int cudnn_find;       /* --cudnn: 2 fast (find over any algorithm), 1 find (convolution algorithms by
                             timing), 0 heuristic; -1: not given (heuristic) */
    DistConfig dist;
    int epochs_flag, steps_flag; /* --epochs, --steps given: --epochs alone overrides a trainer's default steps */
    int memory_flag; /* --memory (-1: not given); it wins over the codec's default and memory= wherever it stands */
    char codec_text[512];
    int quiet;
    int show_policy;  /* --show-policy: the per-tensor table instead of the one-line summary */
} TrainOpts;

/* defaults: the caller then sets task defaults (epochs, batch, lr, ...) */
void train_opts_default(TrainOpts *o);
/* long options of the shared flags; ids >= TRAIN_OPT_BASE */
#define TRAIN_OPT_BASE 1000
extern const struct option train_long_options[];
/* copy the shared options and then the binary's own (terminated by a zero entry) into out */
void train_options_merge(struct option *out, int cap, const struct option *own);
/* handle a shared option; 1 if handled, -1 (message printed) for a bad value, 0 if not ours */
int train_opts_handle(TrainOpts *o, int id, const char *arg);
/* after parsing: consistency checks; 0 or -1 (message printed) */
int train_opts_finish(TrainOpts *o);
/* For a binary's getopt_long loop: the value c was not one of the binary's own
 * options, so it is a shared option ('?' = unknown); handles it or prints the
 * usage hint and exits 2. */
void train_opts_getopt(TrainOpts *o, int c, char **argv);
/* After the loop: no stray arguments, consistent options; exits 2 otherwise. */
void train_opts_done(TrainOpts *o, int argc, char **argv);
/* the shared part of --help */
void train_opts_help(FILE *fp, const TrainOpts *defaults);

/* Run the training. Returns the process exit status (0 on success). Under
 * mpirun (or --backend mpi) this process is one worker; otherwise --workers
 * threads of this process are. */
int train_run(TrainOpts *o, Task *task, int *argc, char ***argv);

/* exits 2 after printing the usage hint (for unknown or malformed options) */
void train_usage_error(const char *prog, const char *fmt, ...);

#endif
