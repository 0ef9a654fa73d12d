/* A worker that cannot start while the others can (under mpirun: a node
 * without the dataset, or out of memory) stops every worker, none left
 * waiting in a collective, with status 1 and that worker's reason once:
 * "error: worker 2: ..." (a worker other than 0 names itself). A tiny
 * ResNet-8 on the synthetic images with 3 local workers; the MPI backend
 * runs the same code in one process per worker. */
#include <signal.h>

#include "examples/trainer.h"
#include "tests/synth_task.h"
#include "tests/test.h"

static int g_bad_rank, g_bad_split; /* data_new fails there (-1: nowhere) */
static int g_bad_model;             /* model_new fails on this rank (-1: nowhere) */

static DataIter *picky_data(Task *t, int split, int rank, int world, int batch, uint64_t seed, char *err,
                            size_t errlen) {
    if (rank == g_bad_rank && split == g_bad_split) {
        snprintf(err, errlen, "cannot open /data/on/this/node (split %d)", split);
        return NULL;
    }
    return image_data_iter(t, split, rank, world, batch, seed, err, errlen);
}

static Model *picky_model(Task *t, int rank, int max_batch) {
    if (rank == g_bad_model) {
        fprintf(stderr, "error: worker %d: no memory for the model (made up)\n", rank);
        return NULL;
    }
    return synth_model(t, rank, max_batch);
}

static void on_alarm(int sig) {
    (void)sig;
    static const char m[] = "FAIL: a worker was left waiting (no end after 60 s)\nRESULT 0 1\n";
    if (write(2, m, sizeof m - 1) < 0) _exit(1);
    _exit(1);
}

/* the run with its output in out; its status */
static int run(char *out, size_t outlen) {
    TrainOpts o;
    train_opts_default(&o);
    o.steps = 2;
    o.batch = 8;
    o.workers = 3;
    o.threads = 2;
    o.quiet = 1;
    snprintf(o.backend, sizeof o.backend, "local");
    TestCapture cap;
    test_capture_begin(&cap);
    SynthCtx ctx;
    Task t;
    synth_task(&t, &ctx, 64, 16, 3);
    t.data_new = picky_data;
    t.model_new = picky_model;
    int n = 0;
    char **v = NULL;
    alarm(60);
    int rc = train_run(&o, &t, &n, &v);
    alarm(0);
    image_data_close(&ctx.data);
    test_capture_end(&cap, out, outlen);
    return rc;
}

/* occurrences of s in text */
static int count(const char *text, const char *s) {
    int k = 0;
    for (const char *p = strstr(text, s); p; p = strstr(p + 1, s)) k++;
    return k;
}

int main(void) {
    static char out[1 << 16];
    signal(SIGALRM, on_alarm);
    g_bad_rank = g_bad_split = g_bad_model = -1;
    CHECK(run(out, sizeof out) == 0, "every worker starts: the run ends\n%.1500s", out);
    const struct {
        int rank, split;
        const char *want;
    } cases[] = {{2, SPLIT_TRAIN, "error: worker 2: cannot open /data/on/this/node (split 0)"},
                 {1, SPLIT_TEST, "error: worker 1: cannot open /data/on/this/node (split 2)"},
                 {0, SPLIT_TRAIN, "error: cannot open /data/on/this/node (split 0)"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        g_bad_rank = cases[i].rank;
        g_bad_split = cases[i].split;
        int rc = run(out, sizeof out);
        CHECK(rc == 1 && count(out, "error:") == 1 && strstr(out, cases[i].want),
              "worker %d cannot open split %d: status %d (1), once '%s'\n%.1500s", cases[i].rank, cases[i].split, rc,
              cases[i].want, out);
    }
    g_bad_rank = g_bad_split = -1;
    g_bad_model = 1;
    int rc = run(out, sizeof out);
    CHECK(rc == 1 && count(out, "error:") == 1 && strstr(out, "error: worker 1: no memory for the model"),
          "worker 1 has no model: status %d (1), its own message once\n%.1500s", rc, out);
    TEST_END();
}
