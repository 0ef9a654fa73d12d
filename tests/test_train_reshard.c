/* Resume on another worker count (docs/DIST.md, Checkpoints: "On another
 * worker count"): a LeNet trained by N local workers, saved, resumed on M
 * (4 -> 3 and 2 -> 4), through the real trainer loop (examples/trainer.c), on
 * synthetic 1x16x16 digits made here, with fp32, sbc (weight deltas and
 * residuals) and dgc (residuals and velocities).
 *   - the resume runs, and says what it did;
 *   - right after it (a resume with no step, saved again by M workers) every
 *     worker's parameters are bit for bit those saved, and so is the shared
 *     optimizer state;
 *   - the rule for what each worker kept of its own: each of the M workers'
 *     residual (and DGC velocity) is the mean of the N saved ones, so the
 *     update still owed, their mean, is kept (a sum would be owed N/M times);
 *   - the resumed run learns on like the run that was not interrupted: after
 *     the remaining steps its test loss is within a loose factor of that run's
 *     and well below the loss it resumed from;
 *   - gcomp on the ring (its tables dropped) and 3lc on the parameter server
 *     resume on 3 workers too;
 *   - a checkpoint whose averaged section lacks a worker is refused. */
#include <math.h>
#include <unistd.h>

#include "common/ckpt.h"
#include "common/rng.h"
#include "examples/image_task.h"
#include "examples/trainer.h"
#include "nn/lenet.h"
#include "tests/test.h"

/* how much brighter the class's block is than the noise (0..255 - it): a
 * task that LeNet learns over the whole run, not in its first steps */
static const int g_bright = 100;

typedef struct {
    ImageData data; /* first: image_data_iter reads it */
    LeNetConfig cfg;
} DigitCtx;

static Model *digit_model(Task *t, int rank, int max_batch) {
    (void)rank;
    return lenet_create(&((DigitCtx *)t->ctx)->cfg, max_batch);
}

/* 1x16x16 images (LeNet's smallest input: about 1/11 of the 28x28 model's
 * multiply-adds, 1/8 of its parameters): class c lights a 3x3 block at one of ten places,
 * shifted right by 0 or 1, on noise */
enum { SIDE = 16, PIX = SIDE * SIDE };
static void digits(ImageSet *s, int n, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->n = n;
    s->C = 1;
    s->H = s->W = SIDE;
    s->num_classes = 10;
    s->x = malloc((size_t)n * PIX);
    s->y = malloc((size_t)n);
    Rng r;
    rng_init(&r, seed, 0);
    for (int i = 0; i < n; i++) {
        int c = (int)rng_below(&r, 10);
        s->y[i] = (uint8_t)c;
        uint8_t *x = s->x + (size_t)i * PIX;
        for (int k = 0; k < PIX; k++) x[k] = (uint8_t)(rng_u64(&r) % (uint64_t)(256 - g_bright));
        int y0 = 1 + 5 * (c / 4), x0 = 4 * (c % 4) + (int)rng_below(&r, 2);
        for (int dy = 0; dy < 3; dy++)
            for (int dx = 0; dx < 3; dx++) x[(y0 + dy) * SIDE + x0 + dx] += (uint8_t)g_bright;
    }
    s->mean[0] = 0.3f;
    s->std[0] = 0.3f;
    snprintf(s->name, sizeof s->name, "digits");
}

static DigitCtx g_ctx;
/* the run's steps, the step of the checkpoint, the learning rate */
static const long g_steps = 120, g_k = 60;
static const double g_lr = 0.02;
static Task g_task;

/* the codec's run on `workers` local workers: steps in all, ending after
 * stop_at (> 0), saving to save, resuming from resume (or NULL) */
static int run(const char *codec, int workers, long stop_at, const char *save, const char *resume) {
    TrainOpts o;
    train_opts_default(&o);
    o.steps = g_steps;
    o.stop_at = stop_at;
    o.batch = 8;
    o.workers = workers;
    o.threads = 2;
    o.lr = g_lr;
    o.eval_every = -1;
    o.print_every = 1000;
    o.quiet = 1;
    o.seed = 5;
    snprintf(o.optim, sizeof o.optim, "sgd:momentum=0.9");
    snprintf(o.schedule, sizeof o.schedule, "constant");
    snprintf(o.backend, sizeof o.backend, "local");
    snprintf(o.save, sizeof o.save, "%s", save);
    if (resume) snprintf(o.resume, sizeof o.resume, "%s", resume);
    char err[256];
    if (dist_parse_codec(&o.dist, codec, err, sizeof err)) {
        printf("codec %s: %s\n", codec, err);
        return -1;
    }
    snprintf(o.codec_text, sizeof o.codec_text, "%s", codec);
    o.dist.dgc_warmup = 0.5;
    int argc = 0;
    char **argv = NULL;
    return train_run(&o, &g_task, &argc, &argv);
}

/* the test set's mean loss under worker 0's parameters in the checkpoint at path */
static double test_loss(const char *path) {
    Ckpt ck;
    char err[512];
    if (ckpt_read(&ck, path, err, sizeof err)) {
        printf("%s\n", err);
        return -1;
    }
    Model *m = lenet_create(&g_ctx.cfg, 100);
    size_t len = 0;
    const void *p = ckpt_find(&ck, "w0.params", &len);
    double sum = -1;
    if (p && len == m->pt.total * sizeof(float)) {
        memcpy(m->params, p, len);
        const ImageSet *s = &g_ctx.data.test;
        float *x = malloc(100 * PIX * sizeof(float));
        int y[100];
        sum = 0;
        for (int b = 0; b < s->n / 100; b++) {
            for (int i = 0; i < 100; i++) {
                for (int k = 0; k < PIX; k++)
                    x[i * PIX + k] = (s->x[(size_t)(b * 100 + i) * PIX + k] / 255.0f - s->mean[0]) / s->std[0];
                y[i] = s->y[b * 100 + i];
            }
            Batch batch = {x, NULL, y, 100, 0};
            BatchStats st;
            model_forward(m, &batch, 0, &st);
            sum += st.loss / (double)(s->n / 100);
        }
        free(x);
    }
    m->ops->free(m);
    ckpt_free(&ck);
    return sum;
}

static const void *section(const Ckpt *ck, const char *fmt, int r, size_t *len) {
    char name[CKPT_NAME_MAX + 8];
    snprintf(name, sizeof name, fmt, r);
    return ckpt_find(ck, name, len);
}

/* a (worker-count-free) section: "w%d.<name>" of every worker of b equals
 * worker 0's of a, bit for bit */
static int as_saved(const Ckpt *a, const Ckpt *b, int mb, const char *fmt) {
    size_t la = 0, lb = 0;
    const void *pa = section(a, fmt, 0, &la);
    if (!pa) return 0;
    for (int r = 0; r < mb; r++) {
        const void *pb = section(b, fmt, r, &lb);
        if (!pb || la != lb || memcmp(pa, pb, la)) return 0;
    }
    return 1;
}

/* every worker of b holds the mean of a's na workers' "fmt" (floats, summed
 * in double); *nonzero counts the values of a's workers that are not 0 */
static int is_mean(const Ckpt *a, int na, const Ckpt *b, int mb, const char *fmt, long *nonzero) {
    size_t len = 0;
    if (!section(a, fmt, 0, &len)) return 0;
    size_t n = len / sizeof(float);
    double *acc = calloc(n, sizeof *acc);
    float v;
    *nonzero = 0;
    int ok = 1;
    for (int r = 0; r < na && ok; r++) {
        size_t l = 0;
        const unsigned char *p = section(a, fmt, r, &l);
        ok = p && l == len;
        for (size_t i = 0; ok && i < n; i++) {
            memcpy(&v, p + i * sizeof v, sizeof v);
            acc[i] += v;
            *nonzero += v != 0;
        }
    }
    for (int r = 0; r < mb && ok; r++) {
        size_t l = 0;
        const unsigned char *p = section(b, fmt, r, &l);
        ok = p && l == len;
        for (size_t i = 0; ok && i < n; i++) {
            memcpy(&v, p + i * sizeof v, sizeof v);
            ok = v == (float)(acc[i] / na);
        }
    }
    free(acc);
    return ok;
}

/* the sum over workers of "fmt", divided by the worker count: the update the
 * error feedback still owes the model */
static double owed(const Ckpt *a, int na, const char *fmt) {
    double s = 0;
    for (int r = 0; r < na; r++) {
        size_t l = 0;
        const unsigned char *p = section(a, fmt, r, &l);
        float v;
        for (size_t i = 0; p && i + sizeof v <= l; i += sizeof v) {
            memcpy(&v, p + i, sizeof v);
            s += v;
        }
    }
    return s / na;
}

static void one(const char *codec, int from, int to) {
    char saved[80], again[80], straight[80], moved[80];
    int pid = (int)getpid();
    snprintf(saved, sizeof saved, "/tmp/gcx_reshard_s_%d.ckpt", pid);
    snprintf(again, sizeof again, "/tmp/gcx_reshard_a_%d.ckpt", pid);
    snprintf(straight, sizeof straight, "/tmp/gcx_reshard_u_%d.ckpt", pid);
    snprintf(moved, sizeof moved, "/tmp/gcx_reshard_m_%d.ckpt", pid);
    const long k = g_k;
    CHECK(run(codec, from, k, saved, NULL) == 0, "%s: %d workers, %ld steps, save", codec, from, k);
    /* resumed and saved again at once: what the M workers start from */
    static char out[1 << 16];
    TestCapture cap;
    test_capture_begin(&cap);
    int rc = run(codec, to, k, again, saved);
    test_capture_end(&cap, out, sizeof out);
    char note[96];
    snprintf(note, sizeof note, "resuming a %d-worker checkpoint on %d workers", from, to);
    CHECK(rc == 0 && strstr(out, note), "%s: %d -> %d: the resume runs and says so (status %d):\n%.3000s", codec, from,
          to, rc, out);
    Ckpt a, b;
    char err[512];
    if (ckpt_read(&a, saved, err, sizeof err) || ckpt_read(&b, again, err, sizeof err)) {
        CHECK(0, "%s", err);
        return;
    }
    CHECK(as_saved(&a, &b, to, "w%d.params"), "%s: %d -> %d: every worker's parameters are those saved, bit for bit",
          codec, from, to);
    if (section(&a, "w%d.opt.momentum_buffer", 0, NULL) && strncmp(codec, "sbc", 3))
        CHECK(as_saved(&a, &b, to, "w%d.opt.momentum_buffer"),
              "%s: %d -> %d: the shared optimizer state is the one saved, bit for bit", codec, from, to);
    CHECK(as_saved(&a, &b, to, "w%d.opt.step"), "%s: %d -> %d: the optimizer's step is kept", codec, from, to);
    const char *mem[] = {"w%d.ex.resid", "w%d.ex.vel"};
    for (int i = 0; i < 2; i++) {
        if (!section(&a, mem[i], 0, NULL)) continue;
        long nz = 0;
        CHECK(is_mean(&a, from, &b, to, mem[i], &nz) && nz > 0,
              "%s: %d -> %d: each worker's %s is the mean of the %d saved (%ld values not 0)", codec, from, to,
              mem[i] + 4, from, nz);
        double before = owed(&a, from, mem[i]), after = owed(&b, to, mem[i]);
        CHECK(fabs(after - before) <= 1e-5 * (fabs(before) + 1e-3),
              "%s: %d -> %d: the update %s still owes is kept (sum / workers: %.9g before, %.9g after)", codec, from,
              to, mem[i] + 4, before, after);
    }
    if (!strncmp(codec, "sbc", 3))
        CHECK(as_saved(&a, &b, to, "w%d.ex.anchor"), "%s: %d -> %d: the anchor is kept", codec, from, to);
    ckpt_free(&a);
    ckpt_free(&b);
    /* learning on: the rest of the run on M workers vs on the N it began on */
    CHECK(run(codec, from, 0, straight, saved) == 0, "%s: the run on %d workers, to its end", codec, from);
    CHECK(run(codec, to, 0, moved, saved) == 0, "%s: resumed on %d workers, to its end", codec, to);
    double l0 = test_loss(saved), lu = test_loss(straight), lm = test_loss(moved);
    printf("%s: %d -> %d: test loss %.4f at step %ld, at step %ld %.4f on %d workers, %.4f on %d\n", codec, from, to,
           l0, k, g_steps, lu, from, lm, to);
    /* loose: M workers see other batches than N would (their shards, a global
     * batch of M x 8), so the two runs differ by more than noise; a resume
     * that lost the model (started over) stays near l0 */
    CHECK(l0 > 0 && lu > 0 && lm > 0 && lm < 0.6 * l0 && lm < 3.0 * lu + 0.15,
          "%s: %d -> %d: the resumed run learns on like the uninterrupted one (test loss %.4f at the resume, %.4f at "
          "the end on %d workers, %.4f on %d)", codec, from, to, l0, lu, from, lm, to);
    unlink(saved);
    unlink(again);
    unlink(straight);
    unlink(moved);
}

int main(void) {
    memset(&g_ctx, 0, sizeof g_ctx);
    digits(&g_ctx.data.train, 2400, 1);
    digits(&g_ctx.data.test, 500, 2);
    g_ctx.data.loaded = 1;
    g_ctx.cfg = lenet_config();
    g_ctx.cfg.seed = 3;
    g_ctx.cfg.in_h = g_ctx.cfg.in_w = SIDE;
    g_task.name = "lenet digits";
    g_task.model_new = digit_model;
    g_task.data_new = image_data_iter;
    g_task.ctx = &g_ctx;
    const char *codecs[] = {"fp32", "sbc:p=0.05", "dgc:density=0.01"};
    for (int c = 0; c < 3; c++) {
        one(codecs[c], 4, 3);
        one(codecs[c], 2, 4);
    }
    /* a codec with state (gcomp's tables on the ring: dropped, rebuilt) and
     * the parameter server (3lc: rank 0's global model and pull residual stay
     * the server's) */
    const struct {
        const char *codec, *said;
    } more[] = {{"gcomp:every=2", "dropped, started afresh: ex.codecs"}, {"3lc", "ex.global, ex.pullres"}};
    for (int c = 0; c < 2; c++) {
        char saved[80], again[80];
        snprintf(saved, sizeof saved, "/tmp/gcx_reshard_s_%d.ckpt", (int)getpid());
        snprintf(again, sizeof again, "/tmp/gcx_reshard_a_%d.ckpt", (int)getpid());
        CHECK(run(more[c].codec, 4, 5, saved, NULL) == 0, "%s: 4 workers, 5 steps, save", more[c].codec);
        static char out[1 << 16];
        TestCapture cap;
        test_capture_begin(&cap);
        int rc = run(more[c].codec, 3, 10, again, saved);
        test_capture_end(&cap, out, sizeof out);
        CHECK(rc == 0 && strstr(out, "resuming a 4-worker checkpoint on 3 workers") && strstr(out, more[c].said),
              "%s: 4 -> 3 workers, 5 more steps, saying \"%s\" (status %d):\n%.3000s", more[c].codec, more[c].said, rc,
              out);
        unlink(saved);
        unlink(again);
    }
    /* an averaged section missing for one saved worker is refused, naming it */
    char saved[80], bad[80], again[80];
    snprintf(saved, sizeof saved, "/tmp/gcx_reshard_s_%d.ckpt", (int)getpid());
    snprintf(bad, sizeof bad, "/tmp/gcx_reshard_b_%d.ckpt", (int)getpid());
    snprintf(again, sizeof again, "/tmp/gcx_reshard_a_%d.ckpt", (int)getpid());
    CHECK(run("dgc:density=0.01", 4, 5, saved, NULL) == 0, "dgc: 4 workers, 5 steps, save");
    Ckpt a;
    char err[512];
    if (ckpt_read(&a, saved, err, sizeof err) == 0) {
        CkptSection *sec = malloc((size_t)a.n * sizeof *sec);
        int n = 0;
        for (int i = 0; i < a.n; i++)
            if (strcmp(a.sec[i].name, "w2.ex.resid")) sec[n++] = a.sec[i];
        CHECK(ckpt_write(bad, sec, n, err, sizeof err) == 0, "%s", err);
        free(sec);
        ckpt_free(&a);
        static char out[1 << 16];
        TestCapture cap;
        test_capture_begin(&cap);
        int rc = run("dgc:density=0.01", 3, 5, again, bad);
        test_capture_end(&cap, out, sizeof out);
        CHECK(rc != 0 && strstr(out, "error: --resume") && strstr(out, "w2.ex.resid is missing"),
              "a 4-worker checkpoint without w2.ex.resid is refused on 3 workers, naming it (status %d):\n%.2000s", rc,
              out);
    } else {
        CHECK(0, "%s", err);
    }
    unlink(saved);
    unlink(bad);
    unlink(again);
    image_data_close(&g_ctx.data);
    TEST_END();
}
