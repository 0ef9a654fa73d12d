/* The same seed and worker count give bit-identical parameters on the local
 * backend (4 threads) and the MPI backend (mpirun -np 4 of this binary), for
 * every codec with its default topology, after a few real training steps of a
 * tiny ResNet-8 on synthetic images. The plain allreduce (fp32) path sums in
 * MPI's order and may differ by rounding: it is compared with a tolerance.
 * Then a --resume whose workers disagree on SBC's local step count is refused
 * with a message under mpirun (it hung there before the load checked it).
 * Skipped (with a note) when the build has no MPI or mpirun is missing. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/ckpt.h"
#include "common/rng.h"
#include "dist/comm.h"
#include "examples/image_task.h"
#include "examples/trainer.h"
#include "nn/resnet.h"
#include "tests/synth_task.h"
#include "tests/test.h"


/* resume (or NULL) with delay > 1: SBC's local steps, 2 steps then a stop */
static int run(const char *codec, const char *backend, const char *save, const char *resume, int delay, int *argc,
               char ***argv) {
    TrainOpts o;
    train_opts_default(&o);
    o.steps = 4;
    if (delay > 1 && !resume) o.stop_at = 2;
    o.batch = 4;
    o.workers = 4;
    o.threads = !strcmp(backend, "mpi") ? 1 : 4;
    o.lr = 0.05;
    o.print_every = 1000;
    o.quiet = 1;
    o.seed = 5;
    o.eval_every = 0;
    snprintf(o.optim, sizeof o.optim, "sgd:momentum=0.9");
    snprintf(o.backend, sizeof o.backend, "%s", backend);
    char err[256];
    if (dist_parse_codec(&o.dist, codec, err, sizeof err)) return -1;
    snprintf(o.codec_text, sizeof o.codec_text, "%s", codec);
    o.dist.delay = delay;
    snprintf(o.save, sizeof o.save, "%s", save);
    if (resume) snprintf(o.resume, sizeof o.resume, "%s", resume);
    SynthCtx c;
    Task t;
    synth_task(&t, &c, 64, 8, 5);
    int rc = train_run(&o, &t, argc, argv);
    image_data_close(&c.data);
    return rc;
}

/* A checkpoint whose workers disagree on SBC's local step count (one
 * worker's counter damaged, the CRC valid) must be refused on every rank
 * under mpirun, with a message, instead of leaving ranks in different
 * collectives (a hang: the timeout catches it). */
static void damaged_resume(const char *self, const char *good, const char *bad) {
    int argc = 0;
    char **argv = NULL;
    CHECK(run("sbc", "local", good, NULL, 2, &argc, &argv) == 0, "sbc --delay 2: 2 local steps, save");
    Ckpt ck;
    char err[512];
    if (ckpt_read(&ck, good, err, sizeof err)) {
        CHECK(0, "%s", err);
        return;
    }
    size_t len = 0;
    const void *p = ckpt_find(&ck, "w1.ex.steps", &len);
    CHECK(p && len == sizeof(long), "w1.ex.steps in the checkpoint");
    long steps = 0;
    if (p && len == sizeof steps) memcpy(&steps, p, len);
    steps++;
    CkptSection *s = malloc((size_t)ck.n * sizeof *s);
    memcpy(s, ck.sec, (size_t)ck.n * sizeof *s);
    for (int i = 0; i < ck.n; i++)
        if (!strcmp(s[i].name, "w1.ex.steps")) s[i].data = &steps;
    CHECK(ckpt_write(bad, s, ck.n, err, sizeof err) == 0, "%s", err);
    free(s);
    ckpt_free(&ck);
    char cmd[8192], out[64];
    snprintf(out, sizeof out, "/tmp/gcx_mpi_resume_%d.txt", (int)getpid());
    snprintf(cmd, sizeof cmd,
             "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
             "timeout 120 mpirun --oversubscribe -np 4 %s --child-resume sbc %s %s > %s 2>&1",
             self, good, bad, out);
    int rc = system(cmd);
    FILE *f = fopen(out, "r");
    char text[8192] = "";
    if (f) {
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = 0;
        fclose(f);
    }
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) != 0 && WEXITSTATUS(rc) != 124 &&
              strstr(text, "error: --resume: checkpoint: the exchange's counters (w1.ex.steps 3, started 1) do not match its step 2"),
          "mpirun -np 4 --resume from workers that disagree: refused with a message (status %d), output:\n%.2000s",
          WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, text);
    unlink(out);
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--child")) return run(argv[2], "mpi", argv[3], NULL, 1, &argc, &argv) ? 1 : 0;
    if (argc == 5 && !strcmp(argv[1], "--child-resume"))
        return run(argv[2], "mpi", argv[3], argv[4], 2, &argc, &argv) ? 1 : 0;
    if (!comm_mpi_available() || system("command -v mpirun >/dev/null 2>&1") != 0) {
        printf("MPI backend not built or mpirun missing: local-vs-MPI comparison skipped\n");
        CHECK(1, "skipped");
        TEST_END();
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        CHECK(0, "cannot find own path");
        TEST_END();
    }
    self[n] = 0;
    char a[64], b[64];
    snprintf(a, sizeof a, "/tmp/gcx_mpi_local_%d.ckpt", (int)getpid());
    snprintf(b, sizeof b, "/tmp/gcx_mpi_mpi_%d.ckpt", (int)getpid());
    for (int k = 0; k < codec_count(); k++) {
        const char *name = codec_ops_at(k)->name;
        CHECK(run(name, "local", a, NULL, 1, &argc, &argv) == 0, "%s: local run", name);
        char cmd[8192];
        snprintf(cmd, sizeof cmd,
                 "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
                 "mpirun --oversubscribe -np 4 %s --child %s %s > /tmp/gcx_mpi_out_%d.txt 2>&1",
                 self, name, b, (int)getpid());
        int rc = system(cmd);
        if (rc != 0) {
            char show[128];
            snprintf(show, sizeof show, "tail -20 /tmp/gcx_mpi_out_%d.txt", (int)getpid());
            if (system(show)) {}
        }
        CHECK(rc == 0, "%s: mpirun -np 4 run", name);
        Ckpt ca, cb;
        char err[512];
        if (ckpt_read(&ca, a, err, sizeof err) || ckpt_read(&cb, b, err, sizeof err)) {
            CHECK(0, "%s: checkpoints: %s", name, err);
            continue;
        }
        for (int w = 0; w < 4; w++) {
            char sec[32];
            snprintf(sec, sizeof sec, "w%d.params", w);
            size_t la = 0, lb = 0;
            const float *pa = ckpt_find(&ca, sec, &la), *pb = ckpt_find(&cb, sec, &lb);
            if (!pa || !pb || la != lb) {
                CHECK(0, "%s: %s missing", name, sec);
                continue;
            }
            if (!strcmp(name, "fp32")) {
                char what[64];
                snprintf(what, sizeof what, "fp32 allreduce local vs mpi %s", sec);
                CHECK_CLOSE(what, pa, pb, la / 4, 1e-4f, 1e-6f);
            } else {
                CHECK(memcmp(pa, pb, la) == 0, "%s: %s bit-identical on local and MPI", name, sec);
            }
        }
        ckpt_free(&ca);
        ckpt_free(&cb);
    }
    damaged_resume(self, a, b);
    unlink(a);
    unlink(b);
    char rm[96];
    snprintf(rm, sizeof rm, "rm -f /tmp/gcx_mpi_out_%d.txt", (int)getpid());
    if (system(rm)) {}
    TEST_END();
}
