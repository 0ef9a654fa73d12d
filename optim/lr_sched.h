/* Learning-rate schedules, matching torch.optim.lr_scheduler 1.13.
 *
 *   constant                       lr = base
 *   multistep:milestones=A+B+..,gamma=G
 *                                  lr = base * G^(number of milestones <= t)      (MultiStepLR)
 *   step:size=N,gamma=G,start=S    lr = base for t < S, then base * G^(1 + floor((t - S) / N));
 *                                  S defaults to N, which is StepLR (base * G^floor(t / N)). The
 *                                  TensorFlow PTB tutorial's decay (SBC's LSTMs): 0.8 per epoch
 *                                  from epoch 6 on is step:size=E,gamma=0.8,start=6E (E steps/epoch)
 *   cosine:T=N,eta_min=E           lr = E + (base - E) (1 + cos(pi t / N)) / 2    (CosineAnnealingLR
 *                                  closed form), held at E after N steps
 *   poly:power=P,T=N               lr = base (1 - min(t, N)/N)^P                  (PolynomialLR)
 *   plateau:mode=..,factor=..,...  ReduceLROnPlateau: lr drops by factor when the metric given to
 *                                  lr_sched_observe has not improved for patience observations
 *
 * Any of them takes warmup=W (and warmup_start=S, default 1/3 as torch's LinearLR): for t < W,
 * lr = base (S + (1 - S) t / W); the schedule's own clock starts when the warm-up ends, so at
 * step t >= W it is evaluated at t - W (torch's SequentialLR([LinearLR, main], milestones=[W])).
 * Milestones and T therefore count steps AFTER the warm-up. A step is whatever the training
 * loop counts (iterations, usually); cosine and poly without T= take T = total - W from
 * lr_sched_set_total.
 *
 * The plateau schedule has state (current lr, best metric, counters) that a checkpoint keeps:
 * lr_sched_ckpt_section / lr_sched_ckpt_load, or the LrPlateauState struct directly.
 */
#ifndef GC_LR_SCHED_H
#define GC_LR_SCHED_H

#include <stddef.h>
#include <stdio.h>

#include "common/ckpt.h"

typedef enum { LR_CONSTANT, LR_MULTISTEP, LR_COSINE, LR_POLY, LR_PLATEAU, LR_STEP, LR_KIND_COUNT } LrKind;

#define LR_MAX_MILESTONES 32
/* torch defaults */
#define LR_DEFAULT_WARMUP_START (1.0 / 3.0)
#define LR_DEFAULT_GAMMA 0.1
#define LR_DEFAULT_POWER 1.0
#define LR_DEFAULT_PLATEAU_FACTOR 0.1
#define LR_DEFAULT_PLATEAU_PATIENCE 10
#define LR_DEFAULT_PLATEAU_THRESHOLD 1e-4
#define LR_DEFAULT_PLATEAU_EPS 1e-8

/* Plateau state (all doubles so it is one flat little-endian record in a checkpoint). */
typedef struct {
    double lr;               /* current lr of the plateau schedule */
    double best;             /* best metric so far (+inf / -inf before the first) */
    double num_bad_epochs;   /* observations without improvement */
    double cooldown_counter; /* observations left in cooldown */
    double last_epoch;       /* observations so far */
} LrPlateauState;

typedef struct {
    LrKind kind;
    double base_lr;
    long warmup;         /* linear warm-up steps (0 = none) */
    double warmup_start; /* warm-up factor at step 0 */
    /* multistep */
    int n_milestones;
    long milestones[LR_MAX_MILESTONES]; /* non-decreasing; repeats multiply again, as torch */
    double gamma;        /* multistep, step */
    /* step */
    long step_size;      /* N >= 1 */
    long step_start;     /* first decayed step S; -1 = step_size */
    /* cosine, poly */
    long T;         /* steps of the schedule after warm-up; 0 = not set yet */
    double eta_min; /* cosine floor */
    double power;   /* poly */
    /* plateau */
    int mode_max;      /* 0: metric should decrease (loss), 1: increase (accuracy) */
    int threshold_abs; /* 0: relative threshold, 1: absolute */
    double factor, threshold, min_lr, eps;
    long patience, cooldown;
    LrPlateauState st;
} LrSched;

const char *lr_kind_name(LrKind k);
/* torch defaults for kind (plateau state reset to base_lr) */
void lr_sched_default(LrSched *s, LrKind kind, double base_lr);
/* "KIND[:key=value,...]" (see lr_sched_help); also accepts a bare "warmup=N[,...]" (constant).
 * 0, or -GC_ERR_PARAM with a message in err. */
int lr_sched_parse(LrSched *s, const char *spec, double base_lr, char *err, size_t errlen);
/* the checks lr_sched_parse applies; 0 or -GC_ERR_PARAM with a message */
int lr_sched_validate(const LrSched *s, char *err, size_t errlen);
/* For cosine/poly without T=: T = total_steps - warmup. 0, or -GC_ERR_PARAM (message in err)
 * when that leaves no steps. Harmless for the other kinds. */
int lr_sched_set_total(LrSched *s, long total_steps, char *err, size_t errlen);
/* learning rate to use at step t (0-based). Cosine/poly with T unset use base_lr. */
double lr_sched_lr(const LrSched *s, long t);
/* plateau: give the monitored metric (once per evaluation); returns 1 when the lr was
 * reduced, else 0. Other kinds ignore it and return 0. */
int lr_sched_observe(LrSched *s, double metric);
/* canonical spec (parses back to the same schedule) */
int lr_sched_describe(const LrSched *s, char *buf, size_t n);
/* --lr-schedule help text */
void lr_sched_help(FILE *f);
/* plateau state as a checkpoint section "<prefix>lr_sched" (sizeof(LrPlateauState) bytes) */
void lr_sched_ckpt_section(LrSched *s, CkptSection *out, const char *prefix);
/* restore it; 0, or -1 with a message in err (a missing section is an error) */
int lr_sched_ckpt_load(LrSched *s, const Ckpt *ck, const char *prefix, char *err, size_t errlen);

#endif
