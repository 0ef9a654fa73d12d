/* LR schedule specs: parsing, validation, describe round trips, help text,
 * set_total, warm-up edges, plateau checkpoint round trip. (Values against
 * torch are in tests/test_optim.c.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/ckpt.h"
#include "common/errors.h"
#include "optim/lr_sched.h"
#include "tests/test.h"

static void test_parse_errors(void) {
    static const char *bad[] = {
        "",
        "cosin",
        "cosine:",
        "cosine:T",
        "cosine:T=abc",
        "cosine:T=-5",
        "cosine:gamma=0.1",          /* not a cosine option */
        "multistep",                 /* milestones required */
        "multistep:milestones=",     /* empty */
        "multistep:milestones=10+x", /* junk */
        "multistep:milestones=20+10", /* decreasing */
        "multistep:milestones=10,gamma=0",
        "multistep:milestones=10,gamma=-1",
        "step",                       /* size required */
        "step:size=0",
        "step:size=10,start=-2",
        "step:size=10,gamma=0",
        "step:milestones=10",         /* not a step option */
        "cosine:size=10",             /* not a cosine option */
        "poly:power=-1",
        "plateau:mode=up",
        "plateau:threshold_mode=pct",
        "plateau:factor=1",
        "plateau:factor=1.5",
        "plateau:patience=-1",
        "plateau:min_lr=-1",
        "plateau:eps=-1",
        "constant:warmup=-3",
        "constant:warmup_start=1.5",
        "warmup=5,frob=1",
        "cosine:eta_min=inf",
        "multistep:milestones=1+2+3+4+5+6+7+8+9+10+11+12+13+14+15+16+17+18+19+20+21+22+23+24+25+26+27+28+29+30+31+32+33",
    };
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        LrSched s;
        err[0] = 0;
        int rc = lr_sched_parse(&s, bad[i], 0.1, err, sizeof err);
        CHECK(rc == -GC_ERR_PARAM && err[0], "spec '%s' accepted (rc %d)", bad[i], rc);
    }
    LrSched s;
    CHECK(lr_sched_parse(&s, "constant", -0.1, err, sizeof err) == -GC_ERR_PARAM, "negative base lr accepted");
    CHECK(lr_sched_parse(&s, "constant", NAN, err, sizeof err) == -GC_ERR_PARAM, "NaN base lr accepted");
}

static void test_round_trip(void) {
    static const char *good[] = {"constant",
                                 "warmup=7",
                                 "multistep:milestones=100+150,gamma=0.1",
                                 "multistep:milestones=5+5+9,gamma=0.5,warmup=3,warmup_start=0.25",
                                 "step:size=30",
                                 "step:size=929,gamma=0.8,start=5574,warmup=20",
                                 "cosine",
                                 "cosine:T=1000,eta_min=1e-5,warmup=50",
                                 "poly:power=2",
                                 "poly:power=0.9,T=300",
                                 "plateau",
                                 "plateau:mode=max,threshold_mode=abs,factor=0.5,patience=3,threshold=0.01,cooldown=2,"
                                 "min_lr=1e-4,eps=1e-9,warmup=10"};
    char err[256], d[512];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        LrSched a, b;
        int rc = lr_sched_parse(&a, good[i], 0.3, err, sizeof err);
        CHECK(rc == 0, "'%s' rejected: %s", good[i], err);
        lr_sched_describe(&a, d, sizeof d);
        int rc2 = lr_sched_parse(&b, d, 0.3, err, sizeof err);
        CHECK(rc2 == 0 && !memcmp(&a, &b, sizeof a), "'%s' -> '%s' does not round-trip (%s)", good[i], d, err);
        /* the schedules are pure functions of the step */
        int same = 1;
        for (long t = 0; t < 400; t += 7) same &= lr_sched_lr(&a, t) == lr_sched_lr(&b, t);
        CHECK(same, "'%s' and its description give different lrs", good[i]);
    }
}

static void test_step(void) {
    char err[256];
    LrSched a, b;
    /* without start, step is StepLR = multistep at every multiple of size
     * (multistep is checked against torch in tests/test_optim.c) */
    CHECK(lr_sched_parse(&a, "step:size=7,gamma=0.5", 0.2, err, sizeof err) == 0, "step: %s", err);
    CHECK(lr_sched_parse(&b, "multistep:milestones=7+14+21+28+35+42+49+56+63+70,gamma=0.5", 0.2, err, sizeof err) == 0,
          "multistep: %s", err);
    int same = 1;
    for (long t = 0; t < 77; t++) same &= lr_sched_lr(&a, t) == lr_sched_lr(&b, t);
    CHECK(same, "step:size=7 equals multistep at 7, 14, ... for 77 steps");
    /* the TensorFlow PTB tutorial's decay with E = 10 steps per epoch: lr = 1.0 * 0.8^max(i + 1 - 6, 0)
     * in epoch i (0-based), i.e. constant for epochs 0..5, then x 0.8 per epoch */
    CHECK(lr_sched_parse(&a, "step:size=10,gamma=0.8,start=60", 1.0, err, sizeof err) == 0, "tf step: %s", err);
    int ok = 1;
    for (long t = 0; t < 200; t++) {
        long i = t / 10, k = i + 1 - 6 > 0 ? i + 1 - 6 : 0;
        ok &= fabs(lr_sched_lr(&a, t) - pow(0.8, (double)k)) < 1e-15;
    }
    CHECK(ok, "step with start reproduces lr_decay = 0.8^max(i + 1 - 6, 0) per epoch i");
}

static void test_values(void) {
    char err[256];
    LrSched s;
    /* warm-up: linear from start*base to base, then the schedule's own step 0 */
    lr_sched_parse(&s, "multistep:milestones=4,gamma=0.5,warmup=4,warmup_start=0", 1.0, err, sizeof err);
    double want[] = {0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5};
    int ok = 1;
    for (int t = 0; t < 10; t++) ok &= fabs(lr_sched_lr(&s, t) - want[t]) < 1e-15;
    CHECK(ok, "warm-up then multistep values");
    CHECK(lr_sched_lr(&s, -5) == 0.0, "negative step clamps to step 0");

    /* cosine/poly without T take it from the run length, minus the warm-up */
    lr_sched_parse(&s, "cosine:warmup=10,eta_min=0.01", 0.5, err, sizeof err);
    CHECK(lr_sched_lr(&s, 50) == 0.5, "cosine with T unset uses base lr");
    CHECK(lr_sched_set_total(&s, 110, err, sizeof err) == 0 && s.T == 100, "set_total: T = %ld", s.T);
    CHECK(fabs(lr_sched_lr(&s, 10) - 0.5) < 1e-15 && fabs(lr_sched_lr(&s, 60) - 0.255) < 1e-12 &&
              fabs(lr_sched_lr(&s, 110) - 0.01) < 1e-15,
          "cosine after set_total: %.17g %.17g %.17g", lr_sched_lr(&s, 10), lr_sched_lr(&s, 60),
          lr_sched_lr(&s, 110));
    CHECK(lr_sched_lr(&s, 100000) == lr_sched_lr(&s, 110), "cosine holds eta_min after T");
    LrSched s2;
    lr_sched_parse(&s2, "cosine:warmup=10", 0.5, err, sizeof err);
    CHECK(lr_sched_set_total(&s2, 10, err, sizeof err) == -GC_ERR_PARAM, "set_total with no steps left accepted");
    lr_sched_parse(&s2, "cosine:T=20", 0.5, err, sizeof err);
    CHECK(lr_sched_set_total(&s2, 1000, err, sizeof err) == 0 && s2.T == 20, "set_total overrode an explicit T");
    lr_sched_parse(&s2, "poly:power=1", 2.0, err, sizeof err);
    lr_sched_set_total(&s2, 8, err, sizeof err);
    CHECK(lr_sched_lr(&s2, 2) == 1.5 && lr_sched_lr(&s2, 8) == 0.0 && lr_sched_lr(&s2, 20) == 0.0, "poly values");
    /* non-plateau schedules ignore observations */
    CHECK(lr_sched_observe(&s2, 1.0) == 0, "poly reacted to a metric");
}

static void test_plateau_state(void) {
    char err[256], path[64];
    snprintf(path, sizeof path, "/tmp/gcx_test_sched_%d.ckpt", (int)getpid());
    LrSched a, b;
    lr_sched_parse(&a, "plateau:patience=1,factor=0.5,cooldown=1", 1.0, err, sizeof err);
    double m[] = {5, 4, 4, 4, 4, 3.9, 3.9};
    for (int i = 0; i < 7; i++) lr_sched_observe(&a, m[i]);
    CHECK(a.st.lr < 1.0, "scripted plateau never dropped");
    CkptSection sec;
    lr_sched_ckpt_section(&a, &sec, "sched.");
    CHECK(!strcmp(sec.name, "sched.lr_sched") && sec.len == sizeof(LrPlateauState), "section %s", sec.name);
    CHECK(ckpt_write(path, &sec, 1, err, sizeof err) == 0, "ckpt_write: %s", err);
    Ckpt ck;
    CHECK(ckpt_read(&ck, path, err, sizeof err) == 0, "ckpt_read: %s", err);
    lr_sched_parse(&b, "plateau:patience=1,factor=0.5,cooldown=1", 1.0, err, sizeof err);
    CHECK(lr_sched_ckpt_load(&b, &ck, "sched.", err, sizeof err) == 0, "load: %s", err);
    CHECK(lr_sched_ckpt_load(&b, &ck, "other.", err, sizeof err) != 0, "missing section accepted");
    ckpt_free(&ck);
    /* both continue identically */
    double more[] = {3.9, 3.9, 3.0, 3.0, 3.0, 3.0};
    int same = 1;
    for (int i = 0; i < 6; i++) {
        int ra = lr_sched_observe(&a, more[i]), rb = lr_sched_observe(&b, more[i]);
        same &= ra == rb && lr_sched_lr(&a, 0) == lr_sched_lr(&b, 0);
    }
    CHECK(same && !memcmp(&a.st, &b.st, sizeof a.st), "restored plateau diverges");
    /* a corrupt state is refused */
    LrPlateauState bad = a.st;
    bad.lr = NAN;
    CkptSection bs = {"sched.lr_sched", &bad, sizeof bad};
    ckpt_write(path, &bs, 1, err, sizeof err);
    ckpt_read(&ck, path, err, sizeof err);
    err[0] = 0;
    CHECK(lr_sched_ckpt_load(&b, &ck, "sched.", err, sizeof err) != 0 && err[0], "corrupt plateau state accepted");
    ckpt_free(&ck);
    unlink(path);
}

static void test_help(void) {
    char *txt = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&txt, &len);
    lr_sched_help(f);
    fclose(f);
    int all = 1;
    for (int k = 0; k < LR_KIND_COUNT; k++) all &= strstr(txt, lr_kind_name((LrKind)k)) != NULL;
    static const char *keys[] = {"warmup", "milestones", "gamma", "eta_min", "power", "patience", "cooldown", "min_lr"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) all &= strstr(txt, keys[i]) != NULL;
    CHECK(all, "help text misses a schedule or option:\n%s", txt);
    free(txt);
}

int main(void) {
    test_parse_errors();
    test_round_trip();
    test_step();
    test_values();
    test_plateau_state();
    test_help();
    TEST_END();
}
