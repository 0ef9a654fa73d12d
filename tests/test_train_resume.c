/* Resume is exact: k steps, --save, --resume, k more steps gives the same
 * parameters, bit for bit, as 2k uninterrupted steps. Through the real trainer
 * loop (examples/trainer.c), with a tiny ResNet-8 on a synthetic image set made
 * here, 2 local workers, across an epoch boundary and an evaluation, for codecs
 * whose exchange keeps state (3lc on the parameter server with both residuals,
 * dgc's velocity and warm-up, sbc's weight-delta anchor and --delay, gcomp's
 * Huffman tables rebuilt every 2 encodes on the ring), and an
 * LSTM language model (carried hidden state, dropout stream, clipping). */
#include <unistd.h>

#include "common/ckpt.h"
#include "common/rng.h"
#include "examples/image_task.h"
#include "examples/lm_task.h"
#include "examples/trainer.h"
#include "nn/resnet.h"
#include "tests/synth_task.h"
#include "tests/test.h"


static int run(const char *codec, int delay, long stop_at, const char *save, const char *resume) {
    TrainOpts o;
    train_opts_default(&o);
    o.steps = 6;
    o.stop_at = stop_at;
    o.batch = 8;
    o.workers = 2;
    o.threads = 2;
    o.lr = 0.05;
    o.print_every = 1000;
    o.quiet = 1;
    o.seed = 3;
    snprintf(o.optim, sizeof o.optim, "sgd:momentum=0.9,weight_decay=0.0005");
    snprintf(o.schedule, sizeof o.schedule, "cosine");
    snprintf(o.backend, sizeof o.backend, "local");
    char err[256];
    if (dist_parse_codec(&o.dist, codec, err, sizeof err)) {
        printf("codec %s: %s\n", codec, err);
        return -1;
    }
    snprintf(o.codec_text, sizeof o.codec_text, "%s", codec);
    o.dist.delay = delay;
    o.dist.dgc_warmup = 1; /* 4 steps per epoch: warm-up ends inside the run */
    snprintf(o.save, sizeof o.save, "%s", save);
    if (resume) snprintf(o.resume, sizeof o.resume, "%s", resume);
    SynthCtx c;
    Task t;
    synth_task(&t, &c, 64, 16, 3);
    int argc = 0;
    char **argv = NULL;
    int rc = train_run(&o, &t, &argc, &argv);
    image_data_close(&c.data);
    return rc;
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
    train_opts_default(&o);
    o.steps = 6;
    o.stop_at = stop_at;
    o.batch = 4;
    o.workers = 2;
    o.threads = 2;
    o.lr = 0.5;
    o.print_every = 1000;
    o.quiet = 1;
    o.seed = 9;
    snprintf(o.backend, sizeof o.backend, "local");
    snprintf(o.codec_text, sizeof o.codec_text, "fp32");
    snprintf(o.save, sizeof o.save, "%s", save);
    if (resume) snprintf(o.resume, sizeof o.resume, "%s", resume);
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

static int same_section(const Ckpt *a, const Ckpt *b, const char *name) {
    size_t la = 0, lb = 0;
    const void *pa = ckpt_find(a, name, &la), *pb = ckpt_find(b, name, &lb);
    return pa && pb && la == lb && memcmp(pa, pb, la) == 0;
}

int main(void) {
    const struct {
        const char *codec;
        int delay;
    } cases[] = {{"fp32", 1}, {"3lc", 1}, {"dgc:density=0.01", 1}, {"sbc:p=0.01", 2}, {"gcomp:every=2", 1}};
    char a[64], b[64];
    snprintf(a, sizeof a, "/tmp/gcx_resume_a_%d.ckpt", (int)getpid());
    snprintf(b, sizeof b, "/tmp/gcx_resume_b_%d.ckpt", (int)getpid());
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *codec = cases[k].codec;
        CHECK(run(codec, cases[k].delay, 0, a, NULL) == 0, "%s: 6 straight steps", codec);
        CHECK(run(codec, cases[k].delay, 3, b, NULL) == 0, "%s: 3 steps, save", codec);
        CHECK(run(codec, cases[k].delay, 0, b, b) == 0, "%s: resume, 3 more steps", codec);
        Ckpt ca, cb;
        char err[512];
        CHECK(ckpt_read(&ca, a, err, sizeof err) == 0, "%s", err);
        CHECK(ckpt_read(&cb, b, err, sizeof err) == 0, "%s", err);
        const char *names[] = {"step", "w0.params", "w1.params", "w0.state", "w1.state", "w0.opt.momentum_buffer",
                               "w0.ex.resid", "w1.ex.resid", "w0.ex.vel", "w0.ex.global", "w0.ex.pullres", "w1.ex.anchor", "w0.ex.codecs", "w1.ex.codecs"};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            if (!ckpt_find(&ca, names[i], NULL)) continue; /* not every codec keeps every state */
            CHECK(same_section(&ca, &cb, names[i]), "%s: %s bit-identical after resume", codec, names[i]);
        }
        ckpt_free(&ca);
        ckpt_free(&cb);
    }
    /* the LSTM LM: its carried state and dropout step are part of the checkpoint */
    CHECK(run_lm(0, a, NULL) == 0, "lstm: 6 straight steps");
    CHECK(run_lm(3, b, NULL) == 0, "lstm: 3 steps, save");
    CHECK(run_lm(0, b, b) == 0, "lstm: resume, 3 more steps");
    {
        Ckpt ca, cb;
        char err[512];
        CHECK(ckpt_read(&ca, a, err, sizeof err) == 0 && ckpt_read(&cb, b, err, sizeof err) == 0, "%s", err);
        const char *names[] = {"w0.params", "w1.params", "w0.m.carry_h", "w1.m.carry_c", "w0.m.drop_step"};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            CHECK(same_section(&ca, &cb, names[i]), "lstm: %s bit-identical after resume", names[i]);
        ckpt_free(&ca);
        ckpt_free(&cb);
    }
    /* resuming with another configuration is refused with both descriptions */
    CHECK(run("fp32", 1, 0, b, a) != 0, "resume under another codec is refused");
    unlink(a);
    unlink(b);
    TEST_END();
}
