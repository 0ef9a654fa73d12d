/* Internal to the trainer (examples/trainer.c and the files beside it): what the
 * workers of one process share, what one worker owns, and the functions the
 * files call across. trainer.h is the interface the binaries use.
 *
 *   trainer.c        train_run, each worker's setup, the loop and the step
 *   train_options.c  the command line: flags, validation, --help
 *   train_ckpt.c     --save, --resume (on any worker count), the replica check
 *   train_log.c      --log, --log-layers, the evaluation lines
 */
#ifndef GC_TRAINER_INTERNAL_H
#define GC_TRAINER_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "dist/exchange_cuda.h"
#include "examples/trainer.h"

/* shared by the workers of one process */
typedef struct {
    TrainOpts *o;
    Task *task;
    OptConfig oc;
    LrSched sched;        /* as parsed: each worker runs its own copy */
    FILE *log;
    FILE *layers;         /* --log-layers (rank 0) */
    int log_json;
    int log_failed;       /* a write to --log failed: said once, the log closed, the exit status 1 */
    int log_fresh;        /* the log was empty when opened: it gets the CSV header */
    int stopped;          /* the workers agreed to stop on a SIGINT/SIGTERM after this many steps (0: not) */
    char command[2048];   /* the command line, for the log's first record */
    atomic_int status;    /* exit status: any worker may set it while another reads it (after the workers agreed) */
    LocalGroup *group;
    int threads_per_worker;
} Shared;

/* what one worker (a thread of this process, or the process under mpirun) owns */
typedef struct {
    Shared *sh;
    Comm *comm;
    int rank;
    Model *m;
    Optim opt;
    /* the learning-rate schedule: every worker (thread or process) sets its
     * length, observes the evaluations and loads it, so all have the same */
    LrSched sched;
    Exchange *ex;
    DataIter *train, *eval;
    long step;
    long replicas_checked; /* the step after which replicas_differ last found none (-1: none yet) */
    long saved_step;       /* the step of the last checkpoint this run wrote or resumed from (-1: none) */
    int resumed_untold;    /* the resumed checkpoint's description does not record the topology and memory */
    int saved_workers;     /* the resumed checkpoint's worker count (another than this run's: reshard_checkpoint) */
    char reshard_note[2560]; /* what a resume on another worker count did, for rank 0 to say */
    /* eval scratch */
    float *backup_params, *backup_state;
    float *ema; /* --ema: the moving average of the parameters (NULL: off) */
    /* --device cuda where the step can stay on the GPU (dist/exchange_cuda.h): the device
     * exchange and a GPU optimizer; NULL where the step goes through the host */
    ExchangeCuda *dx;
    Optim dopt;
    float *d_ema;        /* --ema on the device (the master while w->dev; w->ema then stale) */
    int dev;             /* 1 while the device holds the master parameters and optimizer state */
    const char *dev_why; /* --device cuda: why the step goes through the host (NULL: it does not) */
} Worker;

typedef struct {
    double loss, acc, ppl, bpc;
    long count;
} EvalResult;

/* one row of --log: its columns, in order, are train_log.c's table (log_cols) */
typedef struct {
    const char *kind; /* "train", "valid", "test" */
    long step;
    double epoch, loss, acc, ppl, lr, up, down, bits_up, bits_down, ratio, ratio_c, density, compute_s, codec_s, comm_s,
        step_s, total_s, rate, data_s, comp_up, comp_down, comp_raw, wire_max, hops;
    double gcomp_values, gcomp_zeros, gcomp_lv0, gcomp_lv1, gcomp_lv2, gcomp_lv3, gcomp_exp_bits, gcomp_level_bits,
        gcomp_man_bits, gcomp_bytes;
    double h2d, d2h, copy_s;
} LogRow;

/* a worker's run description (the checkpoints' "meta" section, the log's first record) fits */
#define META_MAX 4096 /* 32 rules of 128-byte patterns and their specs fit */

/* ---- train_options.c ---- */
/* --optim with the shorthand flags over it, and --schedule; 0, or -1 after printing the error */
int parse_optim_sched(const TrainOpts *o, OptConfig *oc, LrSched *sched);

/* ---- trainer.c ---- */
/* Collective: whether any worker failed (the lowest one that failed says why) */
int agree_failed(Worker *w, int failed, const char *prefix, const char *err, int name_self);
int ncores(void);

/* ---- train_ckpt.c ---- */
/* this run's description: what a resume must repeat (exchange, form: meta_string_for) */
void meta_string(char *buf, size_t n, const Worker *w, int exchange, int form);
/* Collective: 1 when the workers' copies of what the exchange keeps identical differ */
int replicas_differ(Worker *w, int at_resume);
/* what --save holds now, for messages */
const char *describe_saved(const Worker *w);
/* --save: collective; 0, or -1 (said) */
int save_checkpoint(Worker *w, const char *path);
/* --resume: this worker's state from path; 0, or -1 with a message in err */
int load_checkpoint(Worker *w, const char *path, char *err, size_t errlen);

/* ---- train_log.c ---- */
FILE *log_open(Shared *sh, const char *path, const char *mode);
int log_close(Shared *sh);
void log_run_record(Worker *w, const char *optdesc, const char *sched);
void log_header(Shared *sh);
void log_row(Shared *sh, const LogRow *r);
void layers_rows(Worker *w, long steps);
void fmt_eta(char *buf, size_t n, double s);
void report_eval(Worker *w, const char *split, const EvalResult *e, double epoch, double total_s);

#endif
