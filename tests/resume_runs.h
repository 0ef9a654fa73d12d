/* The trainer loop (examples/trainer.c) run in-process for the resume tests:
 * run() a tiny ResNet-8 on tests/synth_task.h's images, run_lm() a tiny LSTM
 * language model on a made-up token stream; both with 2 local workers, 6 steps
 * in all, ending after stop_at when it is > 0, saving to save, resuming from
 * resume when it is not NULL. They return train_run's status. */
#ifndef GC_TEST_RESUME_RUNS_H
#define GC_TEST_RESUME_RUNS_H

#include "common/rng.h"
#include "examples/image_task.h"
#include "examples/lm_task.h"
#include "examples/trainer.h"
#include "nn/resnet.h"
#include "tests/synth_task.h"

/* the local workers of the next runs (2; another count resumes a checkpoint
 * of 2 on it) */
static int run_workers = 2;

/* what both runs share: 6 steps, run_workers local workers, quiet, the files */
static void resume_opts(TrainOpts *o, int batch, double lr, uint64_t seed, long stop_at, const char *save,
                        const char *resume) {
    train_opts_default(o);
    o->steps = 6;
    o->stop_at = stop_at;
    o->batch = batch;
    o->workers = run_workers;
    o->threads = 2;
    o->lr = lr;
    o->print_every = 1000;
    o->quiet = 1;
    o->seed = seed;
    snprintf(o->backend, sizeof o->backend, "local");
    snprintf(o->save, sizeof o->save, "%s", save);
    if (resume) snprintf(o->resume, sizeof o->resume, "%s", resume);
}

/* a --layer-codec rule for the next runs (NULL: none), and their --ema */
static const char *run_layer_rule;
static double run_ema;

/* run() over the given topology (TOPO_AUTO: the codec's) */
static int run_topology(const char *codec, int topology, int delay, long stop_at, const char *save,
                        const char *resume) {
    TrainOpts o;
    resume_opts(&o, 8, 0.05, 3, stop_at, save, resume);
    snprintf(o.optim, sizeof o.optim, "sgd:momentum=0.9,weight_decay=0.0005");
    snprintf(o.schedule, sizeof o.schedule, "cosine");
    char err[256];
    if (dist_parse_codec(&o.dist, codec, err, sizeof err)) {
        printf("codec %s: %s\n", codec, err);
        return -1;
    }
    snprintf(o.codec_text, sizeof o.codec_text, "%s", codec);
    if (run_layer_rule && policy_parse_rule(&o.dist.policy.rules[o.dist.policy.nrules++], run_layer_rule, err, sizeof err)) {
        printf("--layer-codec %s: %s\n", run_layer_rule, err);
        return -1;
    }
    o.ema = run_ema;
    o.dist.topology = topology;
    o.dist.delay = delay;
    o.dist.dgc_warmup = 1; /* 4 steps per epoch: warm-up ends inside the run */
    return synth_train(&o, 64, 16, 3, NULL, NULL);
}

static int run(const char *codec, int delay, long stop_at, const char *save, const char *resume) {
    return run_topology(codec, TOPO_AUTO, delay, stop_at, save, resume);
}

static int *stream(int n, int V, uint64_t seed) {
    int *s = malloc((size_t)n * sizeof(int));
    Rng r;
    rng_init(&r, seed, 1);
    for (int i = 0; i < n; i++) s[i] = (int)((i % 7 == 0) ? 3 : rng_below(&r, (uint64_t)V));
    return s;
}

static int run_lm(long stop_at, const char *save, const char *resume) {
    TrainOpts o;
    resume_opts(&o, 4, 0.5, 9, stop_at, save, resume);
    snprintf(o.codec_text, sizeof o.codec_text, "fp32");
    LmTask lt;
    memset(&lt, 0, sizeof lt);
    lt.corpus.train = stream(200, 20, 1); /* 5 windows of 5 per epoch per worker */
    lt.corpus.ntrain = 200;
    lt.corpus.valid = stream(60, 20, 2);
    lt.corpus.nvalid = 60;
    lt.cfg = lstm_lm_config_sbc_char();
    lt.cfg.vocab = 20;
    lt.cfg.emb = lt.cfg.hidden = 16;
    lt.cfg.dropout = 0.3f;
    lt.cfg.seed = 9;
    lt.seed = 9;
    lt.bptt = 5;
    Task t = {0};
    t.name = "lstm synthetic";
    t.lm = 1;
    t.has_valid = 1;
    t.clip_norm = 1.0;
    t.model_new = lm_task_model;
    t.data_new = lm_task_data;
    t.ctx = &lt;
    int argc = 0;
    char **argv = NULL;
    int rc = train_run(&o, &t, &argc, &argv);
    free(lt.corpus.train);
    free(lt.corpus.valid);
    return rc;
}

#endif
