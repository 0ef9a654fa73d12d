/* --resume from a damaged checkpoint whose CRC is valid (written by a bug, or
 * by hand): every section of a real checkpoint (ResNet-8 with 2 local workers
 * under codecs that keep exchange state, and the LSTM language model) is in
 * turn filled with 0xff, 0x00, 0x7f, random bytes or NaN floats, cut by a
 * byte, grown by a byte, or removed, and the file rewritten with a valid CRC.
 * Each resume must either run to its end (status 0) or stop with status 1
 * and an "error:" line that names what is wrong; it must never crash, hang or
 * read out of bounds (make test runs this file under ASan + UBSan as well);
 * a section of the wrong size, or a missing one, must be refused (but for the
 * exceptions in must_refuse), and so must any change to what the exchange
 * keeps identical on every worker (the parameters, or SBC's anchor, and the
 * optimizer state where every worker runs the optimizer alike). The same
 * damages of dgc's, sbc's and the LSTM's checkpoints resumed on 3 workers
 * (docs/DIST.md, On another worker count) as well, where the codecs' states
 * and the data positions are not read.
 * Ends with the number of damaged files that loaded, per kind of damage;
 * SHOW_LOADED=1 lists them on stderr. (Other float arenas take any value; a step
 * past the end runs no step; a cut optimizer description is accepted, since
 * hyper-parameters may change on resume.) */
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "common/ckpt.h"
#include "tests/resume_runs.h"
#include "tests/test.h"

enum { M_FF, M_ZERO, M_7F, M_RANDOM, M_NAN, M_SHORT, M_LONG, M_GONE, M_N };
static const char *mut_name[M_N] = {"0xff", "0x00", "0x7f", "random", "nan", "short", "long", "gone"};

/* writes base with section k damaged by m to path; 0 when that damage applies */
static int write_mutant(const Ckpt *base, int k, int m, const char *path, Rng *r) {
    const CkptSection *s = &base->sec[k];
    if ((m == M_NAN && s->len % 4) || (m == M_SHORT && s->len == 0)) return -1;
    CkptSection *out = malloc(((size_t)base->n + 1) * sizeof *out);
    uint8_t *b = malloc(s->len + 1);
    memcpy(out, base->sec, (size_t)base->n * sizeof *out);
    if (s->len) memcpy(b, s->data, s->len);
    size_t len = s->len;
    switch (m) {
    case M_FF: memset(b, 0xff, len); break;
    case M_ZERO: memset(b, 0, len); break;
    case M_7F: memset(b, 0x7f, len); break;
    case M_RANDOM:
        for (size_t i = 0; i < len; i++) b[i] = (uint8_t)rng_u64(r);
        break;
    case M_NAN:
        for (size_t i = 0; i < len; i += 4) memcpy(b + i, &(uint32_t){0x7fc00000u}, 4);
        break;
    case M_SHORT: len--; break;
    case M_LONG: b[len++] = 0; break;
    default: break;
    }
    out[k].data = b;
    out[k].len = len;
    int n = base->n;
    if (m == M_GONE) memmove(out + k, out + k + 1, (size_t)(--n - k) * sizeof *out);
    char err[512];
    int rc = ckpt_write(path, out, n, err, sizeof err);
    if (rc) printf("cannot write %s: %s\n", path, err);
    free(b);
    free(out);
    return rc;
}

/* A resume that never ends (a damaged step counter) or dies (a crash, an
 * ASan or UBSan report) fails the test, naming the damage and showing the
 * end of that run's output, which is otherwise in a log file. */
static int g_stdout = -1;
static char g_case[160];
static TestCapture g_cap; /* the running resume's output */
static void say(const char *s) {
    if (write(g_stdout, s, strlen(s)) < 0) _exit(1);
}
static void died(const char *why) {
    say("FAIL: ");
    say(why);
    say(" during ");
    say(g_case);
    say("the end of its output:\n");
    int fd = open(g_cap.path, O_RDONLY);
    static char tail[3000];
    off_t end = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
    if (end > 0 && lseek(fd, end > (off_t)sizeof tail ? end - (off_t)sizeof tail : 0, SEEK_SET) >= 0) {
        ssize_t n = read(fd, tail, sizeof tail - 1);
        tail[n > 0 ? n : 0] = 0;
        say(tail);
    }
    say("\n");
    _exit(1);
}
static void on_alarm(int sig) {
    (void)sig;
    died("no end after 120 s");
}
static void on_signal(int sig) { died(sig == SIGSEGV ? "SIGSEGV" : sig == SIGABRT ? "SIGABRT" : "a fatal signal"); }
static void on_sanitizer(void) { died("a sanitizer report"); }
/* in ASan / UBSan builds only (a weak reference elsewhere) */
void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

/* runs resume() with stdout and stderr in g_cap's file; its status, the output in text */
static int quiet_run(int (*resume)(const char *), const char *path, char *text, size_t cap) {
    test_capture_begin(&g_cap);
    g_stdout = g_cap.out;
    alarm(120);
    int rc = resume(path);
    alarm(0);
    g_stdout = 1;
    test_capture_end(&g_cap, text, cap);
    return rc;
}

/* damage a valid CRC cannot hide: a section of the wrong size or none at all
 * is refused, except a cut, grown or missing optimizer description (its
 * hyper-parameters may change on resume) and a trailing NUL after the run
 * description */
/* the sections every worker holds identically (exchange_replicas), separated
 * by spaces, or "" */
static const char *g_replica;

/* name is one of the words of list */
static int listed(const char *list, const char *name) {
    size_t L = strlen(name);
    for (const char *p = strstr(list, name); p; p = strstr(p + 1, name))
        if ((p == list || p[-1] == ' ') && (p[L] == ' ' || p[L] == 0)) return 1;
    return 0;
}

/* the resumes run on 3 workers, not the 2 that saved (docs/DIST.md, On another
 * worker count), which read neither the codecs' states nor the data positions */
static int g_reshard;

static int must_refuse(const char *section, int m) {
    size_t L = strlen(section);
    if (g_reshard && ((L >= 10 && !strcmp(section + L - 10, ".ex.codecs")) || (L >= 5 && !strcmp(section + L - 5, ".data"))))
        return 0;
    /* "w<k>." and a replica's name: every change to it (none of these
     * damages leaves such a section as it was) */
    if (!strncmp(section, "w", 1) && strchr(section, '.') && listed(g_replica, strchr(section, '.') + 1)) return 1;
    if (m != M_SHORT && m != M_LONG && m != M_GONE) return 0;
    if (L >= 10 && !strcmp(section + L - 10, "opt.config")) return 0;
    return !(m == M_LONG && !strcmp(section, "meta"));
}

static const char *g_codec;
static int g_delay;
static char g_scratch[64];
static int resume_resnet(const char *path) { return run(g_codec, g_delay, 4, g_scratch, path); }
static int resume_lm(const char *path) { return run_lm(4, g_scratch, path); }
/* the same on 3 workers */
static int on3(int (*resume)(const char *), const char *path) {
    run_workers = 3;
    int rc = resume(path);
    run_workers = 2;
    return rc;
}
static int resume_resnet3(const char *path) { return on3(resume_resnet, path); }
static int resume_lm3(const char *path) { return on3(resume_lm, path); }

static int loaded[M_N], tried[M_N];

/* every damage of every section of the checkpoint at good; how many loaded */
static int damage_all(const char *what, const char *good, int (*resume)(const char *)) {
    Ckpt base;
    char err[512], mutant[64];
    static char text[1 << 16];
    snprintf(mutant, sizeof mutant, "/tmp/gcx_corrupt_m_%d.ckpt", (int)getpid());
    if (ckpt_read(&base, good, err, sizeof err)) {
        CHECK(0, "%s: %s", what, err);
        return 0;
    }
    Rng r;
    rng_init(&r, 77, 0);
    int silent = 0, runs = 0, wrong = 0, loads = 0;
    for (int k = 0; k < base.n; k++)
        for (int m = 0; m < M_N; m++) {
            if (write_mutant(&base, k, m, mutant, &r)) continue;
            snprintf(g_case, sizeof g_case, "%s: section %s damaged (%s)\n", what, base.sec[k].name, mut_name[m]);
            int rc = quiet_run(resume, mutant, text, sizeof text);
            runs++;
            tried[m]++;
            if (rc == 0) {
                if (getenv("SHOW_LOADED")) fprintf(stderr, "loaded: %s", g_case);
                loaded[m]++;
                loads++;
                if (must_refuse(base.sec[k].name, m)) {
                    wrong++;
                    printf("%s: section %s damaged (%s) loaded; expected a refusal\n", what, base.sec[k].name,
                           mut_name[m]);
                }
                continue;
            }
            /* refused: an error line, on whichever worker found the damage */
            if (!strstr(text, "error:")) {
                silent++;
                printf("%s: section %s damaged (%s): status %d, output:\n%.2000s\n", what, base.sec[k].name,
                       mut_name[m], rc, text);
            }
        }
    CHECK(silent == 0, "%s: %d damaged checkpoints (%d sections), each loaded or refused with an error line (%d not)",
          what, runs, base.n, silent);
    CHECK(wrong == 0, "%s: every section of the wrong size, every missing one and every changed replica refused (%d loaded)",
          what, wrong);
    ckpt_free(&base);
    unlink(mutant);
    return loads;
}

int main(void) {
    g_stdout = 1;
    signal(SIGALRM, on_alarm);
    if (__sanitizer_set_death_callback) {
        __sanitizer_set_death_callback(on_sanitizer); /* after the sanitizer's own report */
    } else {
        signal(SIGSEGV, on_signal);
        signal(SIGBUS, on_signal);
        signal(SIGFPE, on_signal);
        signal(SIGABRT, on_signal);
    }
    char good[64];
    snprintf(good, sizeof good, "/tmp/gcx_corrupt_%d.ckpt", (int)getpid());
    snprintf(g_scratch, sizeof g_scratch, "/tmp/gcx_corrupt_s_%d.ckpt", (int)getpid());
    /* exchange state: 3lc's residuals on the parameter server, dgc's velocity,
     * sbc's anchor, gcomp's codec tables */
    const struct {
        const char *codec;
        int delay;
        const char *replica; /* ps, allgather and ring keep these identical */
    } cases[] = {{"3lc", 1, "params"}, /* on ps only the server's optimizer runs */
                 {"dgc:density=0.01", 1, "params opt.step opt.momentum_buffer"},
                 {"sbc:p=0.01", 2, "ex.anchor"}, /* each worker's optimizer steps on its own gradient */
                 {"gcomp:every=2", 1, "params opt.step opt.momentum_buffer"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        g_codec = cases[c].codec;
        g_delay = cases[c].delay;
        g_replica = cases[c].replica;
        CHECK(run(g_codec, g_delay, 3, good, NULL) == 0, "%s: 3 steps, save", g_codec);
        CHECK(run(g_codec, g_delay, 4, g_scratch, good) == 0, "%s: the undamaged checkpoint resumes", g_codec);
        damage_all(g_codec, good, resume_resnet);
        if (!strncmp(g_codec, "dgc", 3) || !strncmp(g_codec, "sbc", 3)) { /* and on 3 workers */
            char what[80];
            snprintf(what, sizeof what, "%s on 3 workers", g_codec);
            CHECK(resume_resnet3(good) == 0, "%s: the undamaged checkpoint resumes", what);
            g_reshard = 1; /* must_refuse's exceptions, while damage_all judges */
            int n = damage_all(what, good, resume_resnet3);
            g_reshard = 0;
            CHECK(n > 0, "%s: the damaged checkpoints that a resume cannot judge load (%d)", what, n);
        }
    }
    g_replica = ""; /* fp32's allreduce: MPI and NCCL need not sum alike on every rank */
    CHECK(run_lm(3, good, NULL) == 0, "lstm: 3 steps, save");
    CHECK(run_lm(4, g_scratch, good) == 0, "lstm: the undamaged checkpoint resumes");
    damage_all("lstm", good, resume_lm);
    CHECK(resume_lm3(good) == 0, "lstm on 3 workers: the undamaged checkpoint resumes");
    g_reshard = 1;
    int n = damage_all("lstm on 3 workers", good, resume_lm3);
    g_reshard = 0;
    CHECK(n > 0, "lstm on 3 workers: the damaged checkpoints that a resume cannot judge load (%d)", n);
    for (int m = 0; m < M_N; m++) printf("%-6s damage: %3d of %3d files loaded\n", mut_name[m], loaded[m], tried[m]);
    unlink(good);
    unlink(g_scratch);
    TEST_END();
}
