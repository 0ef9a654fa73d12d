/* The shared training loop (see trainer.h): train_run starts the workers;
 * each worker sets up (worker_main) and runs the loop, whose step is
 * train_step. The command line is in train_options.c, checkpoints and the
 * replica check in train_ckpt.c, the logs in train_log.c
 * (trainer_internal.h). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_OPENMP
#include <omp.h>
#endif

#include "common/check.h"
#include "common/ckpt.h"
#include "common/clock.h"
#include "common/units.h"
#include "dist/comm_nccl.h"
#include "examples/trainer_internal.h"
#include "nn/state_dict.h"
#ifdef HAVE_CUDA
#include "nn/cuda_ops.h"
#include <cuda_runtime.h>

#include "common/cuda_check.h"
#include "nn/model_cuda.h"
#include "optim/optim_cuda.h"
#endif

/* The device-resident step: while w->dev, the parameters, the optimizer state and
 * the exchange's residual live on the GPU (the model in device-master mode, nn/model_cuda.h) and the host
 * copies are stale; they are brought to the host for what reads them there (an
 * evaluation, a checkpoint, the end of the run) and back after. */
static void dev_to_host(Worker *w) {
#ifdef HAVE_CUDA
    if (!w->dev) return;
    model_cuda_set_device_master(w->m, 0);
    optim_cuda_download(&w->opt, &w->dopt);
    exchange_cuda_download(w->dx);
    if (w->d_ema) cudaCheck(cudaMemcpy(w->ema, w->d_ema, w->m->pt.total * sizeof(float), cudaMemcpyDeviceToHost));
    w->dev = 0;
#else
    (void)w;
#endif
}

static void dev_from_host(Worker *w) {
#ifdef HAVE_CUDA
    if (!w->dx || w->dev) return;
    model_cuda_set_device_master(w->m, 1);
    optim_cuda_upload(&w->dopt, &w->opt);
    exchange_cuda_upload(w->dx);
    if (w->ema && !w->d_ema && cuda_dev_alloc((void **)&w->d_ema, w->m->pt.total * sizeof(float), "the --ema average"))
        gc_fatal("error: --ema on the GPU: no device memory\n");
    if (w->d_ema) cudaCheck(cudaMemcpy(w->d_ema, w->ema, w->m->pt.total * sizeof(float), cudaMemcpyHostToDevice));
    w->dev = 1;
#else
    (void)w;
#endif
}

/* Collective: whether any worker failed. The lowest worker that failed says
 * why ("<prefix>: <err>"; nothing when err is "": it has said it), with
 * name_self naming itself unless it is worker 0: under mpirun a node may lack
 * what the others have (the dataset). */
int agree_failed(Worker *w, int failed, const char *prefix, const char *err, int name_self) {
    int world = w->comm->size;
    double f = failed ? world - w->rank : 0;
    comm_allreduce_uncounted(w->comm, &f, 1, COMM_MAX);
    if (failed && f == world - w->rank && err[0]) {
        if (name_self && w->rank) fprintf(stderr, "%s: worker %d: %s\n", prefix, w->rank, err);
        else fprintf(stderr, "%s: %s\n", prefix, err);
    }
    return f > 0;
}

/* --ema D: TernGrad section 4 evaluates "the exponential moving average of
 * parameters ... exponential decay of 0.9999" (TensorFlow's
 * ExponentialMovingAverage with the global step as num_updates: the decay is
 * min(D, (1 + t) / (10 + t)) after step t); batch-norm statistics are running
 * averages already and are used as they are */
static float ema_rate(double decay, long t) {
    double d = (1.0 + (double)t) / (10.0 + (double)t);
    return (float)(1.0 - (d < decay ? d : decay));
}

static void ema_update(float *ema, const float *params, size_t n, double decay, long t) {
    const float a = ema_rate(decay, t);
    for (size_t i = 0; i < n; i++) ema[i] -= a * (ema[i] - params[i]);
}

/* A GPU model's copy counters (nn/model_cuda.h); zeros for a CPU model */
typedef struct {
    double h2d, d2h, s;
} ModelCopies;

static ModelCopies model_copies(const Model *m) {
    ModelCopies c = {0, 0, 0};
#ifdef HAVE_CUDA
    const ModelCudaCopyStats *cs = model_cuda_copy_stats(m);
    if (cs) {
        c.h2d = (double)cs->up_bytes;
        c.d2h = (double)cs->down_bytes;
        c.s = cs->up_s + cs->down_s;
    }
#else
    (void)m;
#endif
    return c;
}

/* ----------------------------------------------------------- evaluate ---- */
/* every worker evaluates its shard of split with rank 0's model (parameters
 * and batch-norm statistics), and the sums are combined */
static int evaluate(Worker *w, DataIter *it, EvalResult *res) {
    Model *m = w->m;
    size_t np = m->pt.total, ns = m->nstate;
    CommMark mark = comm_uncounted_begin(w->comm); /* evaluation is not the exchange's traffic */
    memcpy(w->backup_params, m->params, np * sizeof(float));
    if (ns) memcpy(w->backup_state, m->state, ns * sizeof(float));
    ByteBuf b = {0};
    bytebuf_reserve(&b, (np + ns) * sizeof(float));
    b.len = (np + ns) * sizeof(float);
    if (w->rank == 0) {
        memcpy(b.p, w->ema ? w->ema : m->params, np * sizeof(float)); /* --ema: the averaged parameters */
        if (ns) memcpy(b.p + np * sizeof(float), m->state, ns * sizeof(float));
    }
    comm_bcast(w->comm, &b, 0);
    memcpy(m->params, b.p, np * sizeof(float));
    if (ns) memcpy(m->state, b.p + np * sizeof(float), ns * sizeof(float));
    bytebuf_free(&b);
    /* training state beyond params/state (an LSTM's carried hidden state) is
     * kept aside so evaluating never changes what training continues from */
    CkptSection extra[8];
    int nextra = m->ops->ckpt_sections ? m->ops->ckpt_sections(m, extra, 8) : 0;
    size_t extra_bytes = 0;
    for (int i = 0; i < nextra; i++) extra_bytes += extra[i].len;
    uint8_t *keep = mallocCheck(extra_bytes + 1), *at = keep;
    for (int i = 0; i < nextra; i++, at += extra[i - 1].len) memcpy(at, extra[i].data, extra[i].len);
    if (m->ops->reset_state) m->ops->reset_state(m);
    double sums[4] = {0, 0, 0, 0}; /* loss * count, correct, count, error */
    Batch batch;
    int n;
    while ((n = it->next(it, &batch)) > 0) {
        BatchStats st;
        model_forward(m, &batch, 0, &st);
        sums[0] += st.loss * (double)st.count;
        sums[1] += (double)st.correct;
        sums[2] += (double)st.count;
    }
    if (n < 0) {
        fprintf(stderr, "error: worker %d: evaluation data: %s\n", w->rank, it->err);
        sums[3] = 1;
    }
    comm_allreduce_f64(w->comm, sums, 4, COMM_SUM);
    memcpy(m->params, w->backup_params, np * sizeof(float));
    if (ns) memcpy(m->state, w->backup_state, ns * sizeof(float));
    at = keep;
    for (int i = 0; i < nextra; i++, at += extra[i - 1].len) memcpy((void *)extra[i].data, at, extra[i].len);
    free(keep);
    comm_uncounted_end(w->comm, mark);
    if (sums[3] > 0) return -1;
    res->count = (long)sums[2];
    res->loss = sums[2] > 0 ? sums[0] / sums[2] : NAN;
    res->acc = sums[2] > 0 ? sums[1] / sums[2] : NAN;
    res->ppl = exp(res->loss);
    res->bpc = res->loss / log(2.0);
    return 0;
}

/* ------------------------------------------------------- graceful stop ----
 * The first SIGINT or SIGTERM (Ctrl-C; what a batch scheduler sends before
 * preempting) lets the workers finish the step they are in, agree on it, save
 * --save and exit with status 128 + the signal; a second one exits at once,
 * removing a checkpoint that was being written (no temporary file is left). */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) {
    if (stop_signal) {
        ckpt_remove_partial();
        _exit(128 + sig);
    }
    stop_signal = sig;
    static const char msg[] = "\nsignal: stopping after this step (and saving --save if given); "
                              "a second signal stops at once\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
}

static void install_stop_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* --------------------------------------------------------------- step ---- */
/* What one step of one worker measured. After each step the workers sum it
 * (step_stats_allreduce, not counted as traffic), and the loop sums it over
 * the steps between two progress lines; the means go to the progress line and
 * --log. Doubles only: the sums run over it as an array. */
typedef struct {
    double loss;                 /* the batch's mean loss */
    double correct, count;       /* predictions right, and samples (or tokens) in all */
    double data_s, compute_s;    /* seconds fetching the batch; in forward and backward */
    /* the exchange (ExchangeStats, dist/exchange.h) */
    double codec_s, comm_model_s;
    double up_bytes, down_bytes, raw_up;     /* raw_up: the fp32 size of what went up */
    double comp_raw, comp_bytes, comp_down;  /* the compressed tensors alone */
    double wire_max, hops, density;
    /* what the gcomp frames spent their bytes on (GcompParts, compress/gcomp.h) */
    double gcomp_values, gcomp_zeros, gcomp_level[4], gcomp_exp_bits, gcomp_level_bits, gcomp_man_bits,
        gcomp_bytes;
    double h2d, d2h, copy_s;     /* a GPU model's copies (ModelCopies) */
    double stop;                 /* a SIGINT or SIGTERM arrived (the sum: on any worker) */
} StepStats;

#define STEP_STATS_N (sizeof(StepStats) / sizeof(double))
_Static_assert(sizeof(StepStats) == STEP_STATS_N * sizeof(double), "StepStats holds doubles only");

/* the sum over all workers, in place (statistics: not counted as traffic) */
static void step_stats_allreduce(Comm *comm, StepStats *s) {
    comm_allreduce_uncounted(comm, (double *)s, STEP_STATS_N, COMM_SUM);
}

static void step_stats_add(StepStats *acc, const StepStats *s) {
    double *a = (double *)acc;
    const double *b = (const double *)s;
    for (size_t i = 0; i < STEP_STATS_N; i++) a[i] += b[i];
}

/* this worker's next batch, past the end of an epoch (where an LSTM's carried
 * state restarts); 0, or -1 (said) */
static int next_batch(Worker *w, Batch *batch) {
    int n = w->train->next(w->train, batch);
    if (n == 0) {
        if (w->m->ops->reset_state) w->m->ops->reset_state(w->m);
        n = w->train->next(w->train, batch);
    }
    if (n < 0) fprintf(stderr, "error: worker %d: training data: %s\n", w->rank, w->train->err);
    return n < 0 ? -1 : 0;
}

/* Collective, before the exchange, so that no worker waits alone in it: whether
 * any worker failed (its data) or its loss is not finite; sets the exit status
 * then */
static int step_failed(Worker *w, int failed, float loss, double lr) {
    double flags[2] = {failed, !isfinite(loss)};
    comm_allreduce_uncounted(w->comm, flags, 2, COMM_MAX);
    if (flags[1] > 0 && flags[0] == 0 && w->rank == 0) {
        const TrainOpts *o = w->sh->o;
        fprintf(stderr, "error: the loss became %s at step %ld (epoch %.2f, lr %g); the run stops here%s%s%s%s. "
                "Try a lower --lr or a warm-up (--schedule ...,warmup=N)\n", isnan(loss) ? "NaN" : "infinite",
                w->step, (double)w->step / (double)w->train->steps_per_epoch, lr, o->save[0] ? "; --save " : "",
                o->save[0] ? o->save : "", o->save[0] ? " keeps " : "", o->save[0] ? describe_saved(w) : "");
    }
    if (flags[0] > 0 || flags[1] > 0) w->sh->status = 1;
    return flags[0] > 0 || flags[1] > 0;
}

/* an exchange's return code: 0, or -1 with its message said and the exit status set */
static int exchange_said(Worker *w, int rc) {
    if (rc) {
        fprintf(stderr, "error: %s\n", w->dev ? exchange_cuda_error(w->dx) : exchange_error(w->ex));
        w->sh->status = 1;
    }
    return rc ? -1 : 0;
}

/* The exchange (dist/exchange.h): averages the gradients over the workers (with
 * --delay nothing yet: average_deltas follows the optimizer; on a parameter
 * server with model-delta pulls, 3LC's, the pulled model is the new one); on
 * the GPU while the step stays there (dist/exchange_cuda.h). 0, or -1 (said). */
static int exchange(Worker *w, double lr, ExchangeStats *xs) {
    double epoch = (double)w->step / (double)w->train->steps_per_epoch; /* DGC's warm-up */
#ifdef HAVE_CUDA
    if (w->dev)
        return exchange_said(w, exchange_cuda_step(w->dx, model_cuda_device_params(w->m), model_cuda_device_grads(w->m),
                                                   &w->dopt, lr, epoch, w->step, xs));
#endif
    return exchange_said(w, exchange_step(w->ex, w->m->params, w->m->grads, &w->opt, lr, epoch, w->step, xs));
}

/* The optimizer (optim/optim.h) on the average that the exchange left: --clip,
 * then optim_update (DGC's tensors: plain SGD, their momentum in the exchange's
 * memory); with --delay a local step on this worker's own gradient; nothing
 * where the exchange pulled the new model (exchange_model_pulled) */
static void optimizer_step(Worker *w, double lr) {
#ifdef HAVE_CUDA
    if (w->dev) {
        exchange_cuda_optimize(w->dx, model_cuda_device_params(w->m), model_cuda_device_grads(w->m), &w->dopt, lr);
        return;
    }
#endif
    exchange_optimize(w->ex, w->m->params, w->m->grads, &w->opt, lr);
}

/* --delay N (and sbc): after every N-th local step the weight deltas averaged
 * over the workers, every model restarting from the average (exchange_deltas);
 * else nothing. 0, or -1 (said). */
static int average_deltas(Worker *w, ExchangeStats *xs) {
#ifdef HAVE_CUDA
    if (w->dev)
        return exchange_said(w, exchange_cuda_deltas(w->dx, model_cuda_device_params(w->m), &w->dopt, w->step, xs));
#endif
    return exchange_said(w, exchange_deltas(w->ex, w->m->params, w->m->grads, &w->opt, w->step, xs));
}

/* --ema: the moving average after step w->step */
static void ema_after_step(Worker *w) {
    if (!w->ema) return;
#ifdef HAVE_CUDA
    if (w->dev) {
        exchange_cuda_ema(w->d_ema, model_cuda_device_params(w->m), ema_rate(w->sh->o->ema, w->step), w->m->pt.total);
        return;
    }
#endif
    ema_update(w->ema, w->m->params, w->m->pt.total, w->sh->o->ema, w->step);
}

/* One training step of this worker: forward and backward on its batch, then,
 * once every worker knows that none failed, the exchange, the optimizer and
 * (--delay) the exchange of the weight deltas. s: what it measured. 0, or -1
 * with the exit status set, on every worker alike. */
static int train_step(Worker *w, StepStats *s) {
    w->comm->step = w->step; /* for a stall's message */
    ModelCopies c0 = model_copies(w->m);
    double td = mono_seconds();
    Batch batch;
    int failed = next_batch(w, &batch);
    double t0 = mono_seconds();
    BatchStats bs = {0};
    float loss = failed ? 0 : model_forward(w->m, &batch, 1, &bs); /* the loss, keeping activations */
    if (!failed && isfinite(loss)) model_backward(w->m);         /* gradients into m->grads */
#ifdef HAVE_CUDA
    if (w->dev) model_cuda_sync(); /* the backward's kernels finished: counted here, not in the exchange */
#endif
    double t1 = mono_seconds();
    double lr = lr_sched_lr(&w->sched, w->step);
    if (step_failed(w, failed, loss, lr)) return -1;             /* all stop together */
    ExchangeStats xs;
    if (exchange(w, lr, &xs)) return -1;                         /* the gradients averaged over the workers */
    optimizer_step(w, lr);                                       /* the optimizer on the average */
    if (average_deltas(w, &xs)) return -1;                       /* --delay: every N-th step, the weight deltas */
    w->step++;
    ModelCopies c1 = model_copies(w->m);
    ema_after_step(w);

    const GcompParts *gp = &xs.gcomp;
    *s = (StepStats){
        .loss = bs.loss, .correct = (double)bs.correct, .count = (double)bs.count,
        .data_s = t0 - td, .compute_s = t1 - t0,
        .codec_s = xs.codec_s, .comm_model_s = xs.comm_model_s,
        .up_bytes = (double)xs.up_bytes, .down_bytes = (double)xs.down_bytes, .raw_up = (double)xs.raw_up,
        .comp_raw = (double)xs.comp_raw, .comp_bytes = (double)xs.comp_bytes, .comp_down = (double)xs.comp_down,
        .wire_max = (double)xs.wire_max, .hops = xs.hops, .density = xs.density,
        .gcomp_values = (double)gp->values, .gcomp_zeros = (double)gp->zeros,
        .gcomp_level = {(double)gp->level[0], (double)gp->level[1], (double)gp->level[2], (double)gp->level[3]},
        .gcomp_exp_bits = (double)gp->exp_bits, .gcomp_level_bits = (double)gp->level_bits,
        .gcomp_man_bits = (double)gp->man_bits, .gcomp_bytes = (double)gp->bytes,
        .h2d = c1.h2d - c0.h2d + (double)xs.h2d_bytes, .d2h = c1.d2h - c0.d2h + (double)xs.d2h_bytes,
        .copy_s = c1.s - c0.s + xs.copy_s,
        .stop = stop_signal != 0,
    };
    return 0;
}

/* --------------------------------------------------------------- loop ---- */
/* the clocks of the run, and the statistics since the last progress line */
typedef struct {
    long step0;       /* after a --resume, this process's first step */
    long total, stop; /* the schedule's steps; the last step of this run */
    double t_start, t_last, t_eval; /* t_eval: seconds spent evaluating */
    double ema_step;  /* seconds per step, smoothed (the ETA) */
    StepStats sum;    /* over the workers and the steps since the last progress line */
    long steps;
} Progress;

/* rank 0: the progress line and the --log row, with the means per worker and step
 * since the last line (t_now: the time after this step) */
static void progress_line(Worker *w, Progress *p, double t_now) {
    Task *task = w->sh->task;
    long spe = w->train->steps_per_epoch;
    const StepStats *S = &p->sum;
    double dt = (t_now - p->t_last) / (double)p->steps;
    p->ema_step = p->ema_step > 0 ? 0.7 * p->ema_step + 0.3 * dt : dt;
    double per = (double)w->comm->size * p->steps; /* means per worker and step */
    double lr = lr_sched_lr(&w->sched, w->step - 1); /* the last step's */
    double mean_loss = S->loss / per;
    double acc = S->count > 0 ? S->correct / S->count : 0;
    double up = S->up_bytes / per, down = S->down_bytes / per;
    double ratio = up > 0 ? S->raw_up / per / up : 0;
    double rate = S->count / (double)p->steps / dt; /* images or tokens per second */
    char eta[32], ub[32], db[32];
    fmt_eta(eta, sizeof eta, p->ema_step * (double)(p->stop - w->step));
    format_bytes(ub, sizeof ub, up);
    format_bytes(db, sizeof db, down);
    if (up == 0 && down == 0) {
        snprintf(ub, sizeof ub, "-");
        snprintf(db, sizeof db, "-");
    }
    /* a sparsifier's density (DGC's warm-up: 25% ... 0.1%), so its ratio reads right */
    char dens[40] = "";
    if (S->density / per > 0) snprintf(dens, sizeof dens, " at %.3g%% density", 100 * (S->density / per));
    printf("step %6ld/%ld ep %6.2f | loss %.4f %s %6.2f%s | lr %.4g | up %s down %s /step x%.1f%s | "
           "%.0f ms/step %.0f %s/s | eta %s\n",
           w->step, p->total, (double)w->step / spe, mean_loss, task->lm ? "ppl" : "acc",
           task->lm ? exp(mean_loss) : 100 * acc, task->lm ? "" : "%", lr, ub, db, ratio, dens, 1e3 * dt, rate,
           task->lm ? "tok" : "img", eta);
    fflush(stdout);
    double nvalues = (double)param_table_count(&w->m->pt);
    LogRow r = {
        .kind = "train", .step = w->step, .epoch = (double)w->step / spe, .loss = mean_loss, .acc = acc,
        .ppl = exp(mean_loss), .lr = lr, .up = up, .down = down, .bits_up = 8 * up / nvalues,
        .bits_down = 8 * down / nvalues, .ratio = ratio,
        .ratio_c = S->comp_bytes > 0 ? S->comp_raw / S->comp_bytes : 0, .density = S->density / per,
        .compute_s = S->compute_s / per, .codec_s = S->codec_s / per, .comm_s = S->comm_model_s / per,
        .step_s = dt, .total_s = t_now - p->t_start, .rate = rate, .data_s = S->data_s / per,
        .comp_up = S->comp_bytes / per, .comp_down = S->comp_down / per, .comp_raw = S->comp_raw / per,
        .wire_max = S->wire_max / per, .hops = S->hops / per,
        .gcomp_values = S->gcomp_values / per, .gcomp_zeros = S->gcomp_zeros / per,
        .gcomp_lv0 = S->gcomp_level[0] / per, .gcomp_lv1 = S->gcomp_level[1] / per,
        .gcomp_lv2 = S->gcomp_level[2] / per, .gcomp_lv3 = S->gcomp_level[3] / per,
        .gcomp_exp_bits = S->gcomp_exp_bits / per, .gcomp_level_bits = S->gcomp_level_bits / per,
        .gcomp_man_bits = S->gcomp_man_bits / per, .gcomp_bytes = S->gcomp_bytes / per,
        .h2d = S->h2d / per, .d2h = S->d2h / per, .copy_s = S->copy_s / per,
    };
    layers_rows(w, p->steps);
    log_row(w->sh, &r);
}

/* at the end of an epoch: the replica check and an evaluation (with the model
 * on the host); 0, or -1 with the exit status set */
static int evaluate_epoch(Worker *w, Progress *p) {
    Task *task = w->sh->task;
    long spe = w->train->steps_per_epoch;
    EvalResult e;
    double te = mono_seconds();
    dev_to_host(w);
    if (replicas_differ(w, 0) || evaluate(w, w->eval, &e)) {
        w->sh->status = 1;
        return -1;
    }
    dev_from_host(w);
    p->t_eval += mono_seconds() - te;
    report_eval(w, task->has_valid ? "valid" : "test", &e, (double)w->step / spe, mono_seconds() - p->t_start);
    if (w->rank == 0)
        printf("epoch %ld: %.1f s training (%.1f s per epoch so far), %.1f s evaluating in total\n", w->step / spe,
               mono_seconds() - p->t_start - p->t_eval,
               (mono_seconds() - p->t_start - p->t_eval) * spe / (double)w->step, p->t_eval);
    lr_sched_observe(&w->sched, e.loss); /* the same loss on every worker */
    p->t_last = mono_seconds();
    return 0;
}

/* --save-every: a checkpoint (with the model on the host); 0, or -1 with the exit status set */
static int save_now(Worker *w) {
    dev_to_host(w);
    if (save_checkpoint(w, w->sh->o->save)) {
        w->sh->status = 1;
        return -1;
    }
    dev_from_host(w);
    return 0;
}

/* The loop: steps until p->stop, with progress lines, evaluations at the ends
 * of epochs and checkpoints. Returns 1 when a signal stopped it (every worker
 * after the same step), else 0 (the exit status says whether it failed). */
static int train_loop(Worker *w, Progress *p) {
    const TrainOpts *o = w->sh->o;
    long spe = w->train->steps_per_epoch;
    while (w->step < p->stop) {
        StepStats s;
        if (train_step(w, &s)) return 0;
        step_stats_allreduce(w->comm, &s);
        step_stats_add(&p->sum, &s);
        p->steps++;
        double t_now = mono_seconds();
        int epoch_end = w->step % spe == 0;
        /* the first step of this process is shown too: the first seconds are not silent */
        int print = w->step % o->print_every == 0 || w->step == p->stop || epoch_end || w->step == p->step0 + 1;
        if (print) {
            if (w->rank == 0) progress_line(w, p, t_now);
            p->t_last = t_now;
            memset(&p->sum, 0, sizeof p->sum);
            p->steps = 0;
        }
        if (epoch_end && o->eval_every > 0 && (w->step / spe) % o->eval_every == 0 && w->step < p->stop &&
            evaluate_epoch(w, p))
            return 0;
        if (o->save[0] && o->save_every > 0 && w->step % o->save_every == 0 && w->step < p->stop && save_now(w))
            return 0;
        /* a SIGINT/SIGTERM on any worker: all stop after this same step (it is in the
         * statistics every worker sums) */
        if (s.stop > 0 && w->step < p->stop) {
            if (w->rank == 0 || !w->sh->group) w->sh->stopped = (int)w->step; /* once per process */
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------- worker ---- */
/* What one worker owns, made alike on every worker: the model, the optimizer, the
 * exchange (with --device cuda, its device twin where the step can stay there),
 * the data, rank 0's logs; then every worker starts from rank 0's parameters
 * (--init-from's), or from --resume. *total: the schedule's steps. 0, or -1 with
 * the exit status set (every worker alike). */
static int worker_setup(Worker *w, long *total) {
    Shared *sh = w->sh;
    TrainOpts *o = sh->o;
    Task *task = sh->task;
    Comm *comm = w->comm;
    int world = comm->size;
    char err[2048]; /* a resume's two run descriptions fit */
    int fail = 0;
#ifdef HAVE_OPENMP
    omp_set_num_threads(sh->threads_per_worker);
#endif
    w->m = task->model_new(task, w->rank, o->batch);
    if (!w->m) fail = 1;
    if (!fail && optim_init(&w->opt, &sh->oc, w->m->pt.total)) fail = 1;
    DistConfig dc = o->dist;
    dc.seed = o->seed;
    dc.dgc_momentum = sh->oc.momentum;
    dc.dgc_nesterov = sh->oc.nesterov;
    dc.weight_decay = sh->oc.weight_decay;
    if (task->clip_norm > 0 && dc.dgc_clip == 0) dc.dgc_clip = task->clip_norm;
    dc.clip_norm = task->clip_norm; /* the exchange clips where the method does (exchange.h) */
    err[0] = 0; /* why, where the model and the optimizer have not said it */
    if (!fail && !(w->ex = exchange_new(&dc, comm, &w->m->pt, &sh->oc, err, sizeof err))) fail = 1;
#ifdef HAVE_CUDA
    if (!fail && o->cuda) { /* the same decision on every worker */
        const char *host = getenv("GCX_HOST_STEP");
        w->dev_why = host && host[0] && strcmp(host, "0") ? "GCX_HOST_STEP is set"
                                                          : exchange_cuda_unsupported(w->ex, &w->m->pt, comm);
        if (!w->dev_why) {
            if (optim_init_cuda(&w->dopt, &sh->oc, w->m->pt.total)) fail = 1;
            else if (!(w->dx = exchange_cuda_new(w->ex, comm, &w->m->pt, err, sizeof err))) {
                optim_free_cuda(&w->dopt);
                fail = 1;
            }
        }
    }
#endif
    if (!fail && !(w->train = task->data_new(task, SPLIT_TRAIN, w->rank, world, o->batch, o->seed, err, sizeof err)))
        fail = 1;
    int eval_split = task->has_valid ? SPLIT_VALID : SPLIT_TEST;
    if (!fail && !(w->eval = task->data_new(task, eval_split, w->rank, world, o->batch, o->seed, err, sizeof err)))
        fail = 1;
    /* a resumed run appends to its --log (a refused resume leaves it as it was) */
    if (!fail && w->rank == 0 && o->log[0] && !(sh->log = log_open(sh, o->log, o->resume[0] ? "a" : "w"))) {
        snprintf(err, sizeof err, "cannot write --log %s: %s", o->log, strerror(errno));
        fail = 1;
    }
    if (!fail && w->rank == 0 && o->log_layers[0]) { /* worker 0's frames, per tensor */
        if (!(sh->layers = fopen(o->log_layers, o->resume[0] ? "a" : "w"))) {
            snprintf(err, sizeof err, "cannot write --log-layers %s: %s", o->log_layers, strerror(errno));
            fail = 1;
        } else {
            if (fseek(sh->layers, 0, SEEK_END) != 0 || ftell(sh->layers) <= 0)
                fprintf(sh->layers, "step,tensor,numel,codec,frames_per_step,bytes_per_step,ratio,density,rel_error,"
                        "codec_ms_per_step\n");
            exchange_track_layers(w->ex, 1);
        }
    }
    /* --init-from: every worker reads the file (before the broadcast below, so the
     * parameters then agree however the file is read; the state is read alike) */
    int init_failed = !fail && o->init_from[0] && model_import_safetensors(w->m, o->init_from, err, sizeof err);
    if (agree_failed(w, fail, "error", err, 1) || agree_failed(w, init_failed, "error: --init-from", err, 1)) {
        sh->status = 1;
        return -1;
    }
    /* every worker starts from rank 0's model */
    {
        ByteBuf b = {0};
        size_t bytes = w->m->pt.total * sizeof(float);
        bytebuf_reserve(&b, bytes);
        b.len = bytes;
        if (w->rank == 0) memcpy(b.p, w->m->params, bytes);
        comm_bcast(comm, &b, 0);
        memcpy(w->m->params, b.p, bytes);
        bytebuf_free(&b);
    }
    w->backup_params = param_arena_alloc(&w->m->pt);
    if (o->ema > 0) { /* from the initial parameters; a resume loads its own */
        w->ema = param_arena_alloc(&w->m->pt);
        memcpy(w->ema, w->m->params, w->m->pt.total * sizeof(float));
    }
    w->backup_state = callocCheck(w->m->nstate + 1, sizeof(float));
    long spe = w->train->steps_per_epoch;
    if (spe <= 0) {
        if (w->rank == 0) fprintf(stderr, "error: the training set gives no full batch of %d per worker\n", o->batch);
        sh->status = 1;
        return -1;
    }
    *total = o->steps > 0 ? o->steps : o->epochs * spe;
    if (agree_failed(w, lr_sched_set_total(&w->sched, *total, err, sizeof err) != 0, "error: --schedule", err, 0)) {
        sh->status = 1;
        return -1;
    }
    if (o->resume[0]) {
        /* damage to one worker's sections shows on that worker only (its
         * message names the section, w<k>.) */
        int failed = load_checkpoint(w, o->resume, err, sizeof err) != 0;
        if (agree_failed(w, failed, "error: --resume", err, 0) || replicas_differ(w, 1)) {
            sh->status = 1;
            return -1;
        }
    }
    comm_barrier(comm);
    return 0;
}

/* rank 0: what runs (model, data, optimizer, exchange, device), and the log's first records */
static void print_run(Worker *w, long total) {
    Shared *sh = w->sh;
    const TrainOpts *o = sh->o;
    const Task *task = sh->task;
    int world = w->comm->size;
    long spe = w->train->steps_per_epoch;
    char pc[32], optdesc[200], sched[300];
    param_count_str(pc, sizeof pc, param_table_count(&w->m->pt));
    opt_config_describe(&sh->oc, optdesc, sizeof optdesc);
    lr_sched_describe(&w->sched, sched, sizeof sched);
    printf("model: %s, %s parameters (%zu) in %d tensors\n", task->name, pc, param_table_count(&w->m->pt),
           w->m->pt.n);
    printf("data: %ld steps per epoch, batch %d per worker x %d workers = %d global\n", spe, o->batch, world,
           o->batch * world);
    printf("optimizer: %s, lr %g, schedule %s, %ld steps%s\n", optdesc, o->lr, sched, total,
           w->step ? " (resumed)" : "");
    if (w->step) printf("resumed from %s at step %ld\n", o->resume, w->step);
    if (o->resume[0] && w->saved_workers != world) printf("%s\n", w->reshard_note);
    if (o->resume[0] && !strcmp(o->resume, o->save)) w->saved_step = w->step;
    if (!o->quiet) exchange_print(w->ex, stdout, o->show_policy);
    else {
        const DistConfig *c = exchange_config(w->ex);
        char spec[200];
        codec_spec_str(spec, sizeof spec, &c->policy.global);
        printf("exchange: %d workers, codec %s, topology %s, memory %s\n", world, spec,
               topology_name(c->topology), memory_name(c->memory));
    }
    if (o->cuda)
        printf("device: %s%s\n", w->dx ? "the step stays on the GPU (parameters, gradients, optimizer state, residuals)"
                                      : "the step goes through the host: ", w->dx ? "" : w->dev_why);
    fflush(stdout);
    log_run_record(w, optdesc, sched);
    log_header(sh);
}

/* After the loop, with the model on the host. Stopped by a signal: the checkpoint
 * to resume from, no evaluation. Else the replica check, the final evaluation,
 * --save and --export. */
static void finish_run(Worker *w, Progress *p, int stopped) {
    Shared *sh = w->sh;
    const TrainOpts *o = sh->o;
    Task *task = sh->task;
    int world = w->comm->size;
    long spe = w->train->steps_per_epoch, total = p->total;
    char err[2048];
    if (stopped && sh->status == 0) {
        /* the state after the last whole step, for --resume; no evaluation */
        if (o->save[0] && !(o->save_every > 0 && w->step % o->save_every == 0)) {
            if (save_checkpoint(w, o->save)) sh->status = 1;
        }
        if (w->rank == 0 && sh->status == 0)
        {
            if (o->save[0])
                fprintf(stderr, "stopped by a signal after step %ld of %ld; saved %s: continue with the same command "
                        "and --resume %s\n", w->step, total, o->save, o->save);
            else
                fprintf(stderr, "stopped by a signal after step %ld of %ld; nothing saved (no --save)\n", w->step, total);
        }
        return;
    }
    if (sh->status == 0 && replicas_differ(w, 0)) sh->status = 1;
    if (sh->status == 0) {
        EvalResult e;
        double t_train = mono_seconds() - p->t_start - p->t_eval, te = mono_seconds();
        if (o->eval_every >= 0) { /* -1: never */
            if (evaluate(w, w->eval, &e) == 0) {
                report_eval(w, task->has_valid ? "valid" : "test", &e, (double)w->step / spe, mono_seconds() - p->t_start);
                if (task->has_valid) {
                    char why[sizeof err + 32];
                    DataIter *test = task->data_new(task, SPLIT_TEST, w->rank, world, o->batch, o->seed, err, sizeof err);
                    snprintf(why, sizeof why, "no test evaluation: %s", test ? "" : err);
                    /* a corpus may have no test split: a note, on every worker alike */
                    if (!agree_failed(w, !test, "note", why, 1)) {
                        if (evaluate(w, test, &e) == 0) report_eval(w, "test", &e, (double)w->step / spe, mono_seconds() - p->t_start);
                        else sh->status = 1;
                    }
                    if (test) test->free(test);
                }
            } else {
                sh->status = 1;
            }
        }
        p->t_eval += mono_seconds() - te;
        if (w->rank == 0) {
            long ran = w->step - p->step0 > 0 ? w->step - p->step0 : 1;
            if (p->step0 > 0)
                printf("done: step %ld; %ld steps since the resume in %.1f s of training (%.3f s/step, %.1f s per epoch) "
                       "+ %.1f s evaluating\n", w->step, w->step - p->step0, t_train, t_train / (double)ran,
                       t_train * spe / (double)ran, p->t_eval);
            else
                printf("done: %ld steps in %.1f s of training (%.3f s/step, %.1f s per epoch) + %.1f s evaluating\n",
                       w->step, t_train, t_train / (double)ran, t_train * spe / (double)ran, p->t_eval);
        }
        if (o->save[0]) {
            if (save_checkpoint(w, o->save)) sh->status = 1;
            else if (w->rank == 0) printf("saved %s\n", o->save);
        }
        /* every worker holds the same parameters and statistics (replicas_differ above) */
        if (o->export_path[0] && w->rank == 0) {
            if (model_export_safetensors(w->m, o->export_path, w->step, task->name, err, sizeof err)) {
                fprintf(stderr, "error: --export: %s\n", err);
                sh->status = 1;
            } else {
                printf("exported %s (PyTorch state_dict, safetensors)\n", o->export_path);
            }
        }
    }
}

static void worker_free(Worker *w) {
    Shared *sh = w->sh;
    const TrainOpts *o = sh->o;
    Task *task = sh->task;
    if (w->rank == 0 && sh->layers && fclose(sh->layers) != 0) {
        fprintf(stderr, "error: writing --log-layers %s failed at the end\n", o->log_layers);
        sh->log_failed = 1;
    }
    if (w->rank == 0) sh->layers = NULL;
    if (w->train) w->train->free(w->train);
    if (w->eval) w->eval->free(w->eval);
#ifdef HAVE_CUDA
    if (w->dx) { /* before the host exchange, whose policy and arenas it points at */
        exchange_cuda_free(w->dx);
        optim_free_cuda(&w->dopt);
    }
    if (w->d_ema) cudaCheck(cudaFree(w->d_ema));
#endif
    exchange_free(w->ex);
    if (w->m) optim_free(&w->opt);
    model_free(w->m);
    if (task->cuda && task->thread_release) task->thread_release();
    param_arena_free(w->backup_params);
    if (w->ema) param_arena_free(w->ema);
    free(w->backup_state);
}

/* One worker (a thread of this process, or the process under mpirun): setup, the
 * loop, the end of the run. */
static void worker_main(Shared *sh, Comm *comm) {
    Worker W = {.sh = sh, .comm = comm, .rank = comm->rank, .sched = sh->sched, .replicas_checked = -1,
                .saved_step = -1};
    Worker *w = &W;
    comm->timeout = sh->o->timeout;
    Progress p = {0};
    if (worker_setup(w, &p.total) == 0) {
        const TrainOpts *o = sh->o;
        if (w->rank == 0) print_run(w, p.total);
        dev_from_host(w); /* after a --resume: the loaded parameters and optimizer state */
        p.step0 = w->step;
        p.stop = o->stop_at > 0 && o->stop_at < p.total ? o->stop_at : p.total;
        if (o->no_steps) p.stop = w->step; /* --steps 0: the model as it starts (initialized, --init-from, --resume) */
        p.t_start = p.t_last = mono_seconds();
        int stopped = train_loop(w, &p); /* 1: a signal stopped it */
        dev_to_host(w); /* what follows reads the host's parameters and optimizer state */
        finish_run(w, &p, stopped);
    }
    worker_free(w);
}

static void local_entry(int rank, void *arg) {
    Shared *sh = arg;
    Comm *c = comm_local_new(sh->group, rank);
    worker_main(sh, c);
    comm_free(c);
}

int ncores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int train_run(TrainOpts *o, Task *task, int *argc, char ***argv) {
    Shared sh = {0};
    install_stop_handlers();
    for (int i = 0, at = 0; i < *argc && at < (int)sizeof sh.command - 1; i++)
        at += snprintf(sh.command + at, sizeof sh.command - (size_t)at, "%s%s", i ? " " : "", (*argv)[i]);
    sh.o = o;
    sh.task = task;
    if (parse_optim_sched(o, &sh.oc, &sh.sched)) return 2;
    task->cuda = o->cuda;
#ifdef HAVE_CUDA
    /* said once here, rather than by every worker's model */
    if (o->cuda && nn_cuda_device_count() < 1) {
        fprintf(stderr, "error: --device cuda: no CUDA device is visible (cudaGetDeviceCount reports none or fails)\n");
        return 1;
    }
    /* heuristic by default: every process (a resume, each rank and worker) then
     * chooses the same convolution algorithms, so runs repeat bit for bit; fast: Find
     * over every algorithm, non-deterministic and FFT/Winograd ones too */
    if (o->cuda) {
        nn_cuda_set_conv_search(o->cudnn_find > 0 ? NN_CONV_FIND : NN_CONV_HEURISTIC);
        nn_cuda_set_deterministic(o->cudnn_find != 2);
        nn_cuda_set_fft_winograd(o->cudnn_find == 2);
    }
#endif
    int use_nccl = !strcmp(o->backend, "nccl");
    int use_mpi = use_nccl || !strcmp(o->backend, "mpi") || (!strcmp(o->backend, "auto") && comm_mpi_launched());
    if (o->log[0]) {
        size_t l = strlen(o->log);
        sh.log_json = l > 6 && !strcmp(o->log + l - 6, ".jsonl");
    }
    int status;
    if (use_mpi) {
        if (!comm_mpi_available() || (use_nccl && !comm_nccl_available())) {
            fprintf(stderr, "error: this build has no %s backend; rebuild with %s installed (make deps; make)\n",
                    use_nccl ? "NCCL" : "MPI", use_nccl ? "CUDA, NCCL and MPI" : "MPI");
            return 1;
        }
        Comm *c = use_nccl ? comm_nccl_new(argc, argv) : comm_mpi_new(argc, argv);
        if (o->workers_given && o->workers != c->size && c->rank == 0)
            fprintf(stderr, "note: --workers %d is ignored: the %d MPI processes are the workers\n",
                    o->workers, c->size);
        const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        int local = ls ? atoi(ls) : 1;
        sh.threads_per_worker = o->threads ? o->threads : (ncores() / (local > 0 ? local : 1));
        if (sh.threads_per_worker < 1) sh.threads_per_worker = 1;
        worker_main(&sh, c);
        double f = sh.status || sh.log_failed || (sh.log && log_close(&sh));
        comm_allreduce_f64(c, &f, 1, COMM_MAX);
        status = f > 0 ? 1 : 0;
        if (!status && sh.stopped) status = 128 + (stop_signal ? stop_signal : SIGTERM);
        comm_free(c);
        comm_mpi_finalize();
    } else {
        int threads = o->threads ? o->threads : ncores();
        sh.threads_per_worker = threads / o->workers > 0 ? threads / o->workers : 1;
        sh.group = comm_local_group_new(o->workers);
        comm_local_run(o->workers, local_entry, &sh);
        comm_local_group_free(sh.group);
        status = sh.status || sh.log_failed || (sh.log && log_close(&sh));
        if (!status && sh.stopped) status = 128 + stop_signal;
    }
    return status;
}
