/* The trainer's check that the workers still hold one model: before every
 * evaluation, every --save and at the end of the run, the workers compare
 * the CRC-32C of what the exchange keeps bit-identical on all of them
 * (exchange_replicas). A tiny
 * ResNet-8 on the synthetic images with 3 local workers:
 *  - runs over every topology (allreduce, allgather, ps, ring, and weight
 *    deltas with --delay) with evaluations and saves end without a false alarm
 *  - a fault that changes one parameter of worker 1 after its backward pass
 *    (as damaged memory would) stops the run at the next save, evaluation or
 *    the end of the run with an error naming worker 1 and the section, status
 *    1, and the last checkpoint kept as it was (not overwritten by the
 *    diverged model)
 *  - a --save at the end that cannot be written ends the run with status 1 */
#include "common/ckpt.h"
#include "examples/trainer.h"
#include "tests/synth_task.h"
#include "tests/test.h"

#define WORKERS 3
#define FAULT_RANK 1

static ModelOps g_faulty;
static void (*g_backward)(Model *m);
static int g_fault_at, g_calls; /* the fault after backward call g_fault_at (1-based; 0 = none) */

static void faulty_backward(Model *m) {
    g_backward(m);
    if (++g_calls == g_fault_at) m->params[0] += 1e-3f;
}

static Model *faulty_model(Task *t, int rank, int max_batch) {
    Model *m = synth_model(t, rank, max_batch);
    if (m && rank == FAULT_RANK) {
        g_faulty = *m->ops;
        g_backward = m->ops->backward;
        g_faulty.backward = faulty_backward;
        m->ops = &g_faulty;
    }
    return m;
}

typedef struct {
    const char *codec;
    int topology, delay;
    long save_every; /* 0: --save at the end only */
    int fault_at;
} Case;

/* the run (with --save save unless NULL) with its output (stdout and
 * stderr) in out; its status */
static int run(const Case *c, const char *save, char *out, size_t outlen) {
    TrainOpts o;
    train_opts_default(&o);
    o.steps = 6; /* 64 images, 8 per worker, 3 workers: 2 steps per epoch */
    o.batch = 8;
    o.workers = WORKERS;
    o.threads = 2;
    o.lr = 0.05;
    o.eval_every = 1;
    o.print_every = 1000;
    o.quiet = 1;
    o.seed = 4;
    snprintf(o.optim, sizeof o.optim, "sgd:momentum=0.9,weight_decay=0.0005");
    snprintf(o.backend, sizeof o.backend, "local");
    char perr[256];
    if (dist_parse_codec(&o.dist, c->codec, perr, sizeof perr)) {
        snprintf(out, outlen, "%s", perr);
        return -1;
    }
    snprintf(o.codec_text, sizeof o.codec_text, "%s", c->codec);
    o.dist.topology = c->topology;
    o.dist.delay = c->delay;
    if (save) {
        snprintf(o.save, sizeof o.save, "%s", save);
        o.save_every = c->save_every;
    }
    g_fault_at = c->fault_at;
    g_calls = 0;
    TestCapture cap;
    test_capture_begin(&cap);
    SynthCtx ctx;
    Task t;
    synth_task(&t, &ctx, 64, 16, 3);
    t.model_new = faulty_model;
    int n = 0;
    char **v = NULL;
    int rc = train_run(&o, &t, &n, &v);
    image_data_close(&ctx.data);
    test_capture_end(&cap, out, outlen);
    return rc;
}

/* the step recorded in the checkpoint at path, or -1 */
static long saved_step(const char *path) {
    Ckpt ck;
    char err[256];
    int64_t step = -1;
    if (ckpt_read(&ck, path, err, sizeof err)) return -1;
    if (ckpt_load(&ck, "step", &step, sizeof step, err, sizeof err)) step = -1;
    ckpt_free(&ck);
    return (long)step;
}

int main(void) {
    char save[64];
    static char err[1 << 16];
    snprintf(save, sizeof save, "/tmp/gcx_replicas_%d.ckpt", (int)getpid());
    /* no false alarm: evaluations after steps 2, 4 and 6, saves after 2, 4 and 6 */
    const Case clean[] = {{"fp32", TOPO_ALLREDUCE, 1, 2, 0},        {"dgc:density=0.05", TOPO_ALLGATHER, 1, 2, 0},
                          {"3lc", TOPO_PS, 1, 2, 0},                {"gcomp", TOPO_RING, 1, 2, 0},
                          {"terngrad", TOPO_ALLGATHER, 1, 2, 0},    {"sbc:p=0.05", TOPO_ALLGATHER, 2, 2, 0},
                          {"sbc:p=0.05", TOPO_PS, 3, 2, 0}};
    for (size_t i = 0; i < sizeof clean / sizeof clean[0]; i++) {
        const Case *c = &clean[i];
        int rc = run(c, save, err, sizeof err);
        CHECK(rc == 0 && !strstr(err, "error:"), "%s over %s, --delay %d: runs to its end (status %d)\n%.1500s",
              c->codec, topology_name(c->topology), c->delay, rc, err);
        CHECK(saved_step(save) == 6, "%s over %s: saved after step 6", c->codec, topology_name(c->topology));
    }
    /* worker 1's parameter changed in step 3 (backward call 3): the save after
     * step 3 (no evaluation there) refuses, and the checkpoint after step 2 stays */
    Case c = {"dgc:density=0.05", TOPO_ALLGATHER, 1, 1, 3};
    unlink(save);
    int rc = run(&c, save, err, sizeof err);
    CHECK(rc == 1, "dgc over allgather, worker 1 damaged in step 3: status %d", rc);
    CHECK(strstr(err, "error: step 3: w1.params differs from the copy that 2 of 3 workers hold") != NULL,
          "the save names step 3, worker 1 and its parameters:\n%.1500s", err);
    CHECK(saved_step(save) == 2, "the checkpoint after step 2 is kept (step %ld)", saved_step(save));
    /* on the parameter server, caught by the evaluation after step 2 (no --save) */
    c = (Case){"3lc", TOPO_PS, 1, 0, 1};
    rc = run(&c, NULL, err, sizeof err);
    CHECK(rc == 1, "3lc over ps, worker 1 damaged in step 1: status %d", rc);
    CHECK(strstr(err, "error: step 2: w1.params differs from the copy that 2 of 3 workers hold") != NULL,
          "the evaluation names step 2, worker 1 and its parameters:\n%.1500s", err);
    /* damaged in step 5, after the last evaluation: caught at the end, and the
     * --save at the end does not write the drifted model */
    c = (Case){"gcomp", TOPO_RING, 1, 0, 5};
    unlink(save);
    rc = run(&c, save, err, sizeof err);
    CHECK(rc == 1, "gcomp over ring, worker 1 damaged in step 5: status %d", rc);
    CHECK(strstr(err, "error: step 6: w1.params differs from the copy that 2 of 3 workers hold") != NULL,
          "the end of the run names step 6, worker 1 and its parameters:\n%.1500s", err);
    CHECK(saved_step(save) == -1, "no checkpoint written (step %ld)", saved_step(save));
    rc = run(&c, NULL, err, sizeof err);
    CHECK(rc == 1 && strstr(err, "error: step 6: w1.params differs"), "the same without --save: status %d\n%.1500s",
          rc, err);
    /* under allreduce nothing is compared (the sum is the library's): the run ends */
    c = (Case){"fp32", TOPO_ALLREDUCE, 1, 0, 1};
    rc = run(&c, NULL, err, sizeof err);
    CHECK(rc == 0, "fp32 over allreduce, worker 1 damaged: not compared, status %d", rc);
    /* a --save at the end that cannot be written: status 1 */
    c = (Case){"fp32", TOPO_ALLREDUCE, 1, 0, 0};
    rc = run(&c, "/nonexistent/gcx/x.ckpt", err, sizeof err);
    CHECK(rc == 1 && strstr(err, "error: cannot create /nonexistent/gcx/x.ckpt"),
          "a --save that cannot be written ends with status 1 (%d) and says why:\n%.1500s", rc, err);
    unlink(save);
    TEST_END();
}
