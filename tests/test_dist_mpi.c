/* The same seed and worker count give bit-identical parameters on the local
 * backend (4 threads) and the MPI backend (mpirun -np 4 of this binary), for
 * every codec with its default topology, after a few real training steps of a
 * tiny ResNet-8 on synthetic images under a cosine learning-rate schedule. The
 * plain allreduce (fp32) path sums in MPI's order and may differ by rounding:
 * it is compared by its relative L2 distance.
 * Then --resume under mpirun: an SBC --delay 2 run saved between two exchanges
 * resumes bit for bit as the uninterrupted local run; a checkpoint where one
 * worker's copy of the exchanged model differs, and one that only worker 1
 * cannot load, are refused on every rank with that worker's message (no rank
 * left waiting in a collective: a timeout catches a hang); and the 4-worker
 * checkpoint resumed by mpirun -np 3 ends as on 3 local workers.
 * Skipped (with a note) when the build has no MPI or mpirun is missing.
 * make test also runs it under AddressSanitizer (tests/lsan_mpi.h). */
#include <math.h>
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
#include "tests/lsan_mpi.h"
#include "tests/test.h"


/* the local backend's worker count (4; 3 for a resume on fewer workers) */
static int g_local_workers = 4;

/* 4 steps of a 4-worker run, saved at the end or at stop_at (> 0), from
 * resume (or NULL); delay > 1: SBC's local steps */
static int run(const char *codec, const char *backend, const char *save, const char *resume, int delay, int stop_at,
               int *argc, char ***argv) {
    TrainOpts o;
    train_opts_default(&o);
    o.steps = 4;
    o.stop_at = stop_at;
    o.batch = 4;
    o.workers = g_local_workers;
    o.threads = !strcmp(backend, "mpi") ? 1 : 4;
    o.lr = 0.05;
    o.print_every = 1000;
    o.quiet = 1;
    o.seed = 5;
    o.eval_every = 0;
    snprintf(o.optim, sizeof o.optim, "sgd:momentum=0.9");
    snprintf(o.schedule, sizeof o.schedule, "cosine"); /* its length: set by every process */
    snprintf(o.backend, sizeof o.backend, "%s", backend);
    if (!strcmp(backend, "mpi")) { /* as --workers 3 on the command line: a note says it is ignored */
        o.workers = 3;
        o.workers_given = 1;
    }
    char err[256];
    if (dist_parse_codec(&o.dist, codec, err, sizeof err)) return -1;
    snprintf(o.codec_text, sizeof o.codec_text, "%s", codec);
    o.dist.delay = delay;
    snprintf(o.save, sizeof o.save, "%s", save);
    if (resume) snprintf(o.resume, sizeof o.resume, "%s", resume);
    return synth_train(&o, 64, 8, 5, argc, argv);
}

/* mpirun -np 4 of this binary in a child mode (args); its exit status (124:
 * the timeout, which catches a hang) and its output in text; the output must
 * hold no AddressSanitizer, LeakSanitizer or UBSan report */
static int mpirun_np(int np, const char *self, const char *args, char *text, size_t cap) {
    char cmd[8192], out[64];
    snprintf(out, sizeof out, "/tmp/gcx_mpi_out_%d.txt", (int)getpid());
    snprintf(cmd, sizeof cmd,
             "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
             "timeout 120 mpirun --oversubscribe -np %d %s %s > %s 2>&1",
             np, self, args, out);
    int rc = system(cmd);
    test_read_text(out, text, cap);
    unlink(out);
    /* a refused resume exits nonzero anyway, so a sanitizer's report in a
     * child (a leak on the error path, say) would pass unseen without this */
    CHECK(!strstr(text, "Sanitizer") && !strstr(text, "runtime error:"),
          "mpirun -np %d %s: no sanitizer report, output:\n%.2000s", np, args, text);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}
static int mpirun4(const char *self, const char *args, char *text, size_t cap) {
    return mpirun_np(4, self, args, text, cap);
}

/* resuming `from` under mpirun, saving to `to`: how many of the 4 ranks
 * failed their run, or -1 when mpirun failed (a hang, a crash, a sanitizer's
 * exit status) or a rank did not report. Each rank prints its run's status
 * and exits 0: a rank that exited nonzero would make mpirun kill the others,
 * and with them the leak check that runs as they exit. */
static int mpi_resume(const char *self, const char *from, const char *to, char *text, size_t cap) {
    char args[256];
    snprintf(args, sizeof args, "--child-resume sbc %s %s", to, from);
    if (mpirun4(self, args, text, cap)) return -1;
    static const char tag[] = "child status "; /* main's --child-resume line */
    int ok = 0, failed = 0;
    for (const char *p = text; (p = strstr(p, tag)); p++) {
        if (p[sizeof tag - 1] == '0') ok++;
        else if (p[sizeof tag - 1] == '1') failed++;
    }
    return ok + failed == 4 ? failed : -1;
}

/* SBC with --delay 2 exchanges after steps 1 and 3 (0-based); a run stopped
 * after 3 steps must exchange at once when it resumes, on every rank. */
static void resume_checks(const char *self, const char *a, const char *b) {
    int argc = 0;
    char **argv = NULL;
    char c[64], bad[64], text[8192];
    snprintf(c, sizeof c, "/tmp/gcx_mpi_resumed_%d.ckpt", (int)getpid());
    snprintf(bad, sizeof bad, "/tmp/gcx_mpi_bad_%d.ckpt", (int)getpid());
    CHECK(run("sbc", "local", a, NULL, 2, 0, &argc, &argv) == 0, "sbc --delay 2: 4 local steps");
    CHECK(run("sbc", "local", b, NULL, 2, 3, &argc, &argv) == 0, "sbc --delay 2: 3 local steps, save");
    int rc = mpi_resume(self, b, c, text, sizeof text);
    CHECK(rc == 0, "mpirun -np 4 --resume after step 3 (status %d), output:\n%.2000s", rc, text);
    Ckpt ca, cb, cc;
    char err[512];
    if (ckpt_read(&ca, a, err, sizeof err)) {
        CHECK(0, "%s", err);
        return;
    }
    if (rc == 0 && !ckpt_read(&cc, c, err, sizeof err)) {
        for (int w = 0; w < 4; w++) {
            char sec[32];
            snprintf(sec, sizeof sec, "w%d.params", w);
            size_t la = 0, lc = 0;
            const void *pa = ckpt_find(&ca, sec, &la), *pc = ckpt_find(&cc, sec, &lc);
            CHECK(pa && pc && la == lc && memcmp(pa, pc, la) == 0,
                  "sbc --delay 2: %s after a resume under MPI bit-identical to the uninterrupted local run", sec);
        }
        ckpt_free(&cc);
    } else {
        CHECK(0, "the resumed run's checkpoint: %s", rc ? "not written" : err);
    }
    ckpt_free(&ca);

    /* worker 2's anchor changed by one bit: every worker loads, but worker 2's
     * copy of the model that the exchange keeps identical differs; then
     * worker 1's anchor removed: only rank 1 fails its load (CRCs rewritten) */
    if (ckpt_read(&cb, b, err, sizeof err)) {
        CHECK(0, "%s", err);
        return;
    }
    CkptSection *s = malloc((size_t)cb.n * sizeof *s);
    uint8_t *flipped = NULL;
    for (int i = 0; i < cb.n; i++) {
        s[i] = cb.sec[i];
        if (!strcmp(s[i].name, "w2.ex.anchor") && s[i].len) {
            flipped = malloc(s[i].len);
            memcpy(flipped, s[i].data, s[i].len);
            flipped[s[i].len / 2] ^= 1;
            s[i].data = flipped;
        }
    }
    CHECK(flipped && ckpt_write(bad, s, cb.n, err, sizeof err) == 0, "w2.ex.anchor changed: %s", err);
    rc = mpi_resume(self, bad, c, text, sizeof text);
    CHECK(rc == 4 && strstr(text, "error: --resume: checkpoint: w2.ex.anchor differs from the copy that 3 of 4 workers hold"),
          "mpirun -np 4 --resume with worker 2's anchor changed by a bit: every rank refused it with its message (%d failed), "
          "output:\n%.2000s", rc, text);
    free(flipped);
    int n = 0;
    for (int i = 0; i < cb.n; i++)
        if (strcmp(cb.sec[i].name, "w1.ex.anchor")) s[n++] = cb.sec[i];
    CHECK(n == cb.n - 1, "w1.ex.anchor in the checkpoint");
    CHECK(ckpt_write(bad, s, n, err, sizeof err) == 0, "%s", err);
    free(s);
    ckpt_free(&cb);
    rc = mpi_resume(self, bad, c, text, sizeof text);
    CHECK(rc == 4 && strstr(text, "error: --resume: checkpoint has no section 'w1.ex.anchor'"),
          "mpirun -np 4 --resume that only worker 1 cannot load: every rank refused it with its message (%d failed), output:\n%.2000s",
          rc, text);
    unlink(bad);
    unlink(c);
}

/* a lost node: the 4-worker checkpoint b (SBC --delay 2, saved after step 3,
 * between two exchanges) resumed by mpirun -np 3 ends with the parameters of
 * the same resume on 3 local workers, bit for bit (docs/DIST.md, Checkpoints:
 * "On another worker count"; one file, read by every rank) */
static void reshard_checks(const char *self, const char *b) {
    int argc = 0;
    char **argv = NULL;
    char lc[64], mc[64], args[256];
    static char text[1 << 16];
    snprintf(lc, sizeof lc, "/tmp/gcx_mpi_3l_%d.ckpt", (int)getpid());
    snprintf(mc, sizeof mc, "/tmp/gcx_mpi_3m_%d.ckpt", (int)getpid());
    g_local_workers = 3;
    CHECK(run("sbc", "local", lc, b, 2, 0, &argc, &argv) == 0, "sbc --delay 2: the 4-worker checkpoint on 3 local workers");
    g_local_workers = 4;
    snprintf(args, sizeof args, "--child-resume sbc %s %s", mc, b);
    int rc = mpirun_np(3, self, args, text, sizeof text);
    int ok = 0;
    for (const char *p = text; (p = strstr(p, "child status 0")); p++) ok++;
    CHECK(rc == 0 && ok == 3 && strstr(text, "resuming a 4-worker checkpoint on 3 workers"),
          "mpirun -np 3 --resume of a 4-worker checkpoint (status %d, %d ranks ran), output:\n%.2000s", rc, ok, text);
    Ckpt cl, cm;
    char err[512];
    if (ckpt_read(&cl, lc, err, sizeof err) || ckpt_read(&cm, mc, err, sizeof err)) {
        CHECK(0, "the resumed runs' checkpoints: %s", err);
        return;
    }
    const char *names[] = {"w0.params", "w1.params", "w2.params", "w0.ex.resid", "w2.ex.resid", "w2.ex.anchor"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t la = 0, lb = 0;
        const void *pa = ckpt_find(&cl, names[i], &la), *pb = ckpt_find(&cm, names[i], &lb);
        CHECK(pa && pb && la == lb && memcmp(pa, pb, la) == 0,
              "4 -> 3 workers: %s on 3 MPI ranks bit-identical to 3 local workers", names[i]);
    }
    CHECK(!ckpt_find(&cm, "w3.params", NULL), "the 3 ranks' checkpoint holds 3 workers");
    ckpt_free(&cl);
    ckpt_free(&cm);
    unlink(lc);
    unlink(mc);
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--child")) return run(argv[2], "mpi", argv[3], NULL, 1, 0, &argc, &argv) ? 1 : 0;
    if (argc == 5 && !strcmp(argv[1], "--child-resume")) {
        printf("child status %d\n", run(argv[2], "mpi", argv[3], argv[4], 2, 0, &argc, &argv) ? 1 : 0);
        return 0;
    }
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
        CHECK(run(name, "local", a, NULL, 1, 0, &argc, &argv) == 0, "%s: local run", name);
        char args[256];
        static char text[1 << 16];
        snprintf(args, sizeof args, "--child %s %s", name, b);
        int rc = mpirun4(self, args, text, sizeof text);
        size_t len = strlen(text);
        CHECK(rc == 0, "%s: mpirun -np 4 run (status %d), the end of its output:\n%s", name, rc,
              text + (len > 2000 ? len - 2000 : 0));
        const char *note = "note: --workers 3 is ignored: the 4 MPI processes are the workers\n", *p = strstr(text, note);
        CHECK(p && !strstr(p + 1, note), "%s: --workers 3 under mpirun -np 4: the note once", name);
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
            /* sections start at any byte offset: floats are read with memcpy */
            const void *pa = ckpt_find(&ca, sec, &la), *pb = ckpt_find(&cb, sec, &lb);
            if (!pa || !pb || la != lb) {
                CHECK(0, "%s: %s missing", name, sec);
                continue;
            }
            if (!strcmp(name, "fp32")) {
                /* the sums differ in their last bits; where that moves a
                 * pre-activation across a ReLU's kink, a few gradients (and so
                 * parameters) differ by more: the relative L2 distance, not
                 * every element, is what rounding bounds */
                double d2 = 0, b2 = 0;
                for (size_t i = 0; i < la / 4; i++) {
                    float x, y;
                    memcpy(&x, (const char *)pa + 4 * i, 4);
                    memcpy(&y, (const char *)pb + 4 * i, 4);
                    d2 += ((double)x - y) * ((double)x - y);
                    b2 += (double)y * y;
                }
                double rel = sqrt(d2 / (b2 > 0 ? b2 : 1));
                CHECK(rel < 1e-5, "fp32 allreduce: %s on local and MPI within rounding (relative L2 distance %.3g)",
                      sec, rel);
            } else {
                CHECK(memcmp(pa, pb, la) == 0, "%s: %s bit-identical on local and MPI", name, sec);
            }
        }
        ckpt_free(&ca);
        ckpt_free(&cb);
    }
    resume_checks(self, a, b);
    reshard_checks(self, b);
    unlink(a);
    unlink(b);
    TEST_END();
}
