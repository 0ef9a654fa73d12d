/* The GCOMP quantization metric of each optimizer (optim_gcomp_levels; GCOMP
 * section 5.1, Table 2, Appendix A), tested as a property of the real update:
 *
 * For every optimizer and many random states and gradients, truncating each
 * gradient value by the level the metric chose must leave the updated
 * parameter within one ulp of the update with the untruncated gradient.
 * States come from running the optimizer itself for a few steps on random
 * gradients (so momentum and moment buffers are consistent with the
 * gradients), parameters and gradients span many orders of magnitude, and
 * several learning rates are used so that all four levels occur often.
 *
 * The test has teeth: one level more than chosen (6 more bits) must break the
 * 1-ulp bound for some values, and the paper's exact thresholds (guard 0) are
 * checked against the paper's own bound (footnote 2: within 2^-22 theta, here
 * measured as at most 2 ulp of the result) and must exceed 1 ulp somewhere. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "common/rng.h"
#include "optim/optim.h"
#include "tests/test.h"

#define N 40000 /* above OPT_PAR_MIN (32768): the parallel loops are tested too */

static int g_finite(float x) { return isfinite(x) && x != 0.0f; }

static double ulp_of(float x) {
    float a = fabsf(x);
    if (!isfinite(a)) return INFINITY;
    return (double)nextafterf(a, INFINITY) - (double)a;
}

typedef struct {
    const char *spec;
    double lr;
    int warm; /* optimizer steps before the tested one */
} Case;

/* lrs chosen per optimizer so that the four levels all occur */
static const Case cases[] = {
    {"sgd", 0.1, 0},
    {"sgd:wd=5e-4", 0.5, 1},
    {"momentum", 0.1, 0}, /* first step: b = d */
    {"sgd:momentum=0.9,dampening=0.3,wd=1e-4", 0.1, 4},
    {"nesterov:wd=5e-4", 0.1, 0},
    {"nesterov:wd=5e-4", 0.05, 5},
    {"adam", 1e-3, 0},
    {"adam", 1e-5, 3},
    {"adam:wd=1e-2,beta1=0.8", 1e-4, 5},
    {"adamw", 1e-3, 2},
    {"adamw:wd=0.1,beta2=0.95", 1e-5, 6},
    {"adagrad", 1e-3, 0},
    {"adagrad:lr_decay=0.05,wd=1e-4,init_acc=0.01", 1e-3, 4},
    {"rmsprop", 1e-4, 0},
    {"rmsprop", 1e-5, 5},
    {"rmsprop:centered=1", 1e-4, 5},
    {"rmsprop:momentum=0.9,wd=1e-4", 1e-5, 4},
    {"rmsprop:centered=1,momentum=0.5,alpha=0.9", 1e-4, 3},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static float theta0[N], scale[N], grads[8][N], gt[N], pA[N], pB[N];
static uint8_t lv[N];

/* Run the warm-up steps on o with gradient set 0..warm-1, parameters in p. */
static void warm_up(Optim *o, float *p, const Case *c) {
    for (int s = 0; s < c->warm; s++) {
        optim_begin_step(o);
        optim_update(o, p, grads[s], c->lr, 0, N);
    }
}

/* max ulp distance of the update with per-value truncation levels lvl (NULL: the ones in lv,
 * plus `extra`) from the untruncated one; counts values beyond 1 ulp and beyond 2 ulp. */
typedef struct {
    double max_ulp;
    long over1, over2, tested;
} Outcome;

static Outcome run_trunc(const Case *c, const OptConfig *cfg, const uint8_t *levels, int extra) {
    Outcome r = {0, 0, 0, 0};
    Optim a, b;
    optim_init(&a, cfg, N);
    optim_init(&b, cfg, N);
    memcpy(pA, theta0, sizeof pA);
    memcpy(pB, theta0, sizeof pB);
    warm_up(&a, pA, c);
    warm_up(&b, pB, c);
    const float *g = grads[c->warm];
    for (int i = 0; i < N; i++) {
        int L = levels[i] + extra;
        gt[i] = L > GCOMP_MAX_LEVEL ? g[i] : gcomp_truncate(g[i], L);
    }
    optim_begin_step(&a);
    optim_begin_step(&b);
    optim_update(&a, pA, g, c->lr, 0, N);
    optim_update(&b, pB, gt, c->lr, 0, N);
    for (int i = 0; i < N; i++) {
        if (levels[i] + extra > GCOMP_MAX_LEVEL) continue;
        r.tested++;
        double u = ulp_of(pA[i]);
        double d = fabs((double)pA[i] - (double)pB[i]) / u;
        if (d > r.max_ulp || d != d) r.max_ulp = d;
        r.over1 += !(d <= 1.0);
        r.over2 += !(d <= 2.0);
    }
    optim_free(&a);
    optim_free(&b);
    return r;
}

int main(void) {
    /* GCX_TEST_SEEDS=K runs K independent random draws (default 1) */
    const char *env = getenv("GCX_TEST_SEEDS");
    int seeds = env ? atoi(env) : 1;
    if (seeds < 1) seeds = 1;
    long hist_total[4] = {0};
    double worst_paper = 0, case_chosen[N_CASES] = {0}, case_paper[N_CASES] = {0};
    int paper_exceeds_1 = 0;
    for (int seed = 0; seed < seeds; seed++) {
    Rng r;
    rng_init(&r, 2024 + (uint64_t)seed, 0);
    /* parameters: log-uniform magnitudes 1e-3..10 (a few exact zeros);
     * gradient scale per value: log-uniform 1e-8..1e-1, constant over the steps
     * (so the optimizer state matches the gradient statistics) */
    for (int i = 0; i < N; i++) {
        theta0[i] = rng_normal(&r) * powf(10.0f, -3.0f + 4.0f * rng_uniform(&r));
        if (i % 997 == 0) theta0[i] = 0.0f;
        scale[i] = powf(10.0f, -8.0f + 7.0f * rng_uniform(&r));
    }
    for (int s = 0; s < 8; s++)
        for (int i = 0; i < N; i++) {
            grads[s][i] = scale[i] * rng_normal(&r);
            if (rng_uniform(&r) < 0.01f) grads[s][i] = 0.0f;
        }

    char err[256];
    for (int k = 0; k < N_CASES; k++) {
        const Case *c = &cases[k];
        OptConfig cfg;
        int rc = opt_config_parse(&cfg, c->spec, err, sizeof err);
        CHECK(rc == 0, "%s: %s", c->spec, err);
        if (rc) continue;
        CHECK(cfg.gcomp_guard_bits == 1, "default guard bits %d", cfg.gcomp_guard_bits);

        /* levels from the state before the tested step */
        Optim o;
        optim_init(&o, &cfg, N);
        memcpy(pA, theta0, sizeof pA);
        warm_up(&o, pA, c);
        float *pre = malloc(sizeof pA);
        memcpy(pre, pA, sizeof pA);
        rc = optim_gcomp_levels(lv, &o, pre, grads[c->warm], c->lr, 0, N);
        CHECK(rc == 0, "optim_gcomp_levels rc %d", rc);
        /* the _at variant on a slice agrees with it */
        uint8_t lv2[100];
        optim_gcomp_levels_at(lv2, &o, pre + 500, grads[c->warm] + 500, c->lr, 500, 100);
        CHECK(!memcmp(lv2, lv + 500, 100), "%s: levels_at disagrees with levels", c->spec);
        /* the whole (parallel, vectorized) range agrees with one-value calls */
        uint8_t *lv3 = malloc(N);
        for (int at = 0; at < N; at++) optim_gcomp_levels(lv3 + at, &o, pre, grads[c->warm], c->lr, (size_t)at, 1);
        long differ = 0;
        for (int i = 0; i < N; i++) differ += lv3[i] != lv[i];
        CHECK(differ == 0, "%s: %ld levels of the whole range differ from one-value calls", c->spec, differ);
        free(lv3);
        optim_free(&o);
        free(pre);

        long hist[4] = {0};
        for (int i = 0; i < N; i++) hist[lv[i]]++;
        for (int L = 0; L < 4; L++) hist_total[L] += hist[L];

        Outcome chosen = run_trunc(c, &cfg, lv, 0);
        Outcome aggressive = run_trunc(c, &cfg, lv, 1);
        /* the paper's rule: guard 0 */
        OptConfig paper = cfg;
        paper.gcomp_guard_bits = 0;
        Optim op;
        optim_init(&op, &paper, N);
        memcpy(pA, theta0, sizeof pA);
        warm_up(&op, pA, c);
        uint8_t *lvp = malloc(N);
        float *delta = malloc(N * sizeof(float));
        optim_gcomp_levels(lvp, &op, pA, grads[c->warm], c->lr, 0, N);
        optim_gcomp_delta(delta, &op, pA, grads[c->warm], c->lr, 0, N);
        optim_free(&op);
        /* paper levels are the thresholds 2^6, 2^12, 2^18 on |delta| (the metric is a quotient, the levels
         * compare products: a value right at a threshold may fall either way); the guarded rule is never
         * more aggressive than the paper's */
        long dis = 0, looser = 0;
        for (int i = 0; i < N; i++) {
            float a = fabsf(delta[i]);
            int L = (a > 0x1p6f) + (a > 0x1p12f) + (a > 0x1p18f), near = 0;
            for (int e = 6; e <= 18; e += 6) near |= fabsf(a / ldexpf(1, e) - 1.0f) < 1e-5f;
            dis += L != lvp[i] && !near && g_finite(grads[c->warm][i]);
            looser += lv[i] > lvp[i];
        }
        CHECK(dis == 0, "%s: %ld paper levels disagree with the delta thresholds", c->spec, dis);
        CHECK(looser == 0, "%s: the guarded rule truncates more than the paper's at %ld values", c->spec, looser);
        Outcome pap = run_trunc(c, &cfg, lvp, 0);
        free(lvp);
        free(delta);

        if (seed == 0 || chosen.over1 || !aggressive.over1)
        printf("%-44s lr=%-6g t=%d  levels %5ld %5ld %5ld %5ld | chosen: max %.3f ulp | +1 level: %5ld of %5ld "
               "> 1 ulp | paper rule: max %.3f ulp\n",
               c->spec, c->lr, c->warm + 1, hist[0], hist[1], hist[2], hist[3], chosen.max_ulp, aggressive.over1,
               aggressive.tested, pap.max_ulp);
        CHECK(chosen.over1 == 0, "%s: %ld values moved more than 1 ulp (max %.3f)", c->spec, chosen.over1,
              chosen.max_ulp);
        CHECK(aggressive.over1 > 0, "%s: one level more than chosen never breaks 1 ulp: the test has no teeth",
              c->spec);
        /* footnote 2 of the paper: within 2^-22 theta (2 ulp). That holds for plain SGD; with a momentum
         * buffer or Adam's moments the truncated gradient can also flip the rounding of b_t, m_t, v_t, which
         * the paper's metric leaves out (a few values in a million land 3..16 ulp away; GCX_TEST_SEEDS=60
         * shows them): only reported there. */
        if (cfg.kind == OPT_SGD && cfg.momentum == 0)
            CHECK(pap.over2 == 0, "%s: paper thresholds moved %ld values more than 2 ulp (max %.3f)", c->spec,
                  pap.over2, pap.max_ulp);
        CHECK(hist[1] + hist[2] + hist[3] > N / 10, "%s: almost nothing truncated", c->spec);
        if (pap.max_ulp > worst_paper) worst_paper = pap.max_ulp;
        if (pap.max_ulp > case_paper[k]) case_paper[k] = pap.max_ulp;
        if (chosen.max_ulp > case_chosen[k]) case_chosen[k] = chosen.max_ulp;
        paper_exceeds_1 += pap.over1 > 0;
    }
    }
    if (seeds > 1)
        for (int k = 0; k < N_CASES; k++)
            printf("worst over %d seeds: %-44s lr=%-6g t=%d  chosen %.3f ulp, paper rule %.3f ulp\n", seeds,
                   cases[k].spec, cases[k].lr, cases[k].warm + 1, case_chosen[k], case_paper[k]);
    printf("%d seed(s) x %d cases x %d values: levels 0/1/2/3 = %ld/%ld/%ld/%ld; paper rule worst %.3f ulp, beyond 1 "
           "ulp in %d of %d cases\n",
           seeds, N_CASES, N, hist_total[0], hist_total[1], hist_total[2], hist_total[3], worst_paper,
           paper_exceeds_1, N_CASES * seeds);
    for (int L = 0; L < 4; L++) CHECK(hist_total[L] > (long)seeds * N_CASES * N / 50, "level %d almost never chosen", L);
    CHECK(paper_exceeds_1 > 0, "the paper's rule never exceeds 1 ulp: the guard bit would be unnecessary");

    /* truncation itself: clears exactly 6*level low bits, toward zero */
    float x = -1.2345678f;
    uint32_t ux, ut;
    for (int L = 0; L <= 3; L++) {
        float t = gcomp_truncate(x, L);
        memcpy(&ux, &x, 4);
        memcpy(&ut, &t, 4);
        CHECK((ut >> (6 * L)) == (ux >> (6 * L)) && (ut & ((1u << (6 * L)) - 1)) == 0 && fabsf(t) <= fabsf(x),
              "gcomp_truncate level %d", L);
    }
    TEST_END();
}
