/* Dropout (nn/dropout.h) and its use in the LSTM language model: mask
 * statistics, inverted scaling, the backward reusing the forward mask,
 * determinism from (seed, step, site) whatever the thread count, and
 * independence of masks across steps, sites and neighbouring elements. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_OPENMP
#include <omp.h>
#endif

#include "common/errors.h"
#include "common/rng.h"
#include "nn/dropout.h"
#include "nn/lstm_lm.h"
#include "tests/test.h"

#define NE (1 << 20)

/* |observed - expected| within 5 standard deviations of a mean of n Bernoulli(q) */
static int within_5_sigma(double observed, double q, double n) {
    return fabs(observed - q) <= 5.0 * sqrt(q * (1.0 - q) / n);
}

static void test_statistics(float p) {
    printf("dropout p = %.2f\n", p);
    float *x = malloc(NE * sizeof(float)), *y = malloc(NE * sizeof(float));
    Rng r;
    rng_init(&r, 1, 0);
    for (int i = 0; i < NE; i++) x[i] = 2.0f * rng_uniform(&r) - 1.0f + 1e-3f;
    const uint64_t s = dropout_seed(42, 7, 1);
    CHECK(dropout_forward(y, x, p, s, NE) == 0, "forward");
    const float scale = 1.0f / (1.0f - p);
    long kept = 0, pairs = 0, bad_scale = 0, bad_mask = 0;
    double sum_x = 0, sum_y = 0;
    for (int i = 0; i < NE; i++) {
        int k = y[i] != 0.0f;
        kept += k;
        if (k && y[i] != x[i] * scale) bad_scale++;
        if (k != dropout_keep(s, (uint64_t)i, p)) bad_mask++;
        if (i && k && y[i - 1] != 0.0f) pairs++;
        sum_x += x[i];
        sum_y += y[i];
    }
    double frac = (double)kept / NE;
    printf("  kept fraction %.5f (expected %.5f), neighbour pairs kept %.5f (expected %.5f)\n", frac, 1.0 - p,
           (double)pairs / (NE - 1), (1.0 - p) * (1.0 - p));
    CHECK(within_5_sigma(frac, 1.0 - p, NE), "kept fraction %.5f, expected %.5f", frac, 1.0 - p);
    CHECK(within_5_sigma((double)pairs / (NE - 1), (1.0 - p) * (1.0 - p), NE - 1),
          "neighbouring elements look dependent");
    CHECK(bad_scale == 0, "%ld kept values are not x / (1 - p)", bad_scale);
    CHECK(bad_mask == 0, "%ld elements disagree with dropout_keep", bad_mask);
    /* inverted dropout keeps the expectation: E[y] = E[x] (sum over n: sd ~ sqrt(n p/(1-p)) * rms(x)) */
    double sd = sqrt((double)NE * p / (1.0 - p) / 3.0);
    CHECK(fabs(sum_y - sum_x) < 5 * sd, "sum y %.1f vs sum x %.1f (5 sd = %.1f)", sum_y, sum_x, 5 * sd);

    /* backward: the same mask, the same scale */
    float *dy = malloc(NE * sizeof(float)), *dx = malloc(NE * sizeof(float));
    for (int i = 0; i < NE; i++) dy[i] = 1.0f + (float)(i % 7);
    CHECK(dropout_backward(dx, dy, p, s, NE) == 0, "backward");
    long bad_bwd = 0;
    for (int i = 0; i < NE; i++)
        if (dx[i] != (y[i] != 0.0f ? dy[i] * scale : 0.0f)) bad_bwd++;
    CHECK(bad_bwd == 0, "%ld backward elements disagree with the forward mask", bad_bwd);

    /* determinism: same seed -> bit-identical, in place too, and with 1 thread */
    float *z = malloc(NE * sizeof(float));
    memcpy(z, x, NE * sizeof(float));
    dropout_forward(z, z, p, s, NE);
    CHECK(memcmp(z, y, NE * sizeof(float)) == 0, "in-place forward equals out-of-place");
#ifdef HAVE_OPENMP
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    dropout_forward(z, x, p, s, NE);
    omp_set_num_threads(nt > 1 ? nt : 2);
    CHECK(memcmp(z, y, NE * sizeof(float)) == 0, "one thread gives the same mask as %d", nt);
    omp_set_num_threads(nt);
#endif
    /* other step, other site, other seed: independent masks (agreement p^2 + (1-p)^2) */
    const uint64_t others[3] = {dropout_seed(42, 8, 1), dropout_seed(42, 7, 2), dropout_seed(43, 7, 1)};
    const char *what[3] = {"next step", "next site", "next seed"};
    for (int k = 0; k < 3; k++) {
        long agree = 0;
        for (int i = 0; i < NE; i++) agree += dropout_keep(others[k], (uint64_t)i, p) == (y[i] != 0.0f);
        double q = p * p + (1.0 - p) * (1.0 - p);
        CHECK(within_5_sigma((double)agree / NE, q, NE), "%s: mask agreement %.5f, independent would be %.5f",
              what[k], (double)agree / NE, q);
    }
    free(x), free(y), free(z), free(dx), free(dy);
}

static void test_edge_cases(void) {
    printf("dropout edge cases\n");
    float x[5] = {1, -2, 3, -4, 5}, y[5];
    CHECK(dropout_forward(y, x, 0.0f, 1, 5) == 0 && memcmp(x, y, sizeof x) == 0, "p = 0 copies");
    float keep[5] = {9, 9, 9, 9, 9};
    CHECK(dropout_forward(keep, x, 1.0f, 1, 5) == -GC_ERR_PARAM && keep[0] == 9, "p = 1 rejected, untouched");
    CHECK(dropout_forward(keep, x, -0.1f, 1, 5) == -GC_ERR_PARAM, "p < 0 rejected");
    CHECK(dropout_backward(keep, x, NAN, 1, 5) == -GC_ERR_PARAM && keep[4] == 9, "p NaN rejected");
    CHECK(dropout_forward(y, x, 0.5f, 1, 0) == 0, "n = 0 is fine");
}

/* The language model: reproducible from the seed, masks vary with the step,
 * no dropout in evaluation. */
static void test_lm_dropout(void) {
    printf("language model dropout\n");
    LstmLmConfig c = {.vocab = 30, .emb = 16, .hidden = 16, .layers = 2, .dropout = 0.5f, .tie_weights = 1,
                      .init = LSTM_LM_INIT_ZAREMBA, .init_range = 0.3f, .seed = 9};
    const int T = 6, N = 4;
    int tok[24], tgt[24];
    for (int i = 0; i < 24; i++) tok[i] = (i * 7) % 30, tgt[i] = (i * 11 + 3) % 30;
    Batch b = {.tokens = tok, .y = tgt, .N = N, .T = T};
    Model *a = lstm_lm_create(&c, N, T), *bb = lstm_lm_create(&c, N, T);
    LstmLmConfig c0 = c;
    c0.dropout = 0.0f;
    Model *nodrop = lstm_lm_create(&c0, N, T);
    float la[3], lb[3];
    for (int k = 0; k < 3; k++) {
        la[k] = model_forward(a, &b, 1, NULL);
        a->ops->reset_state(a);
        lb[k] = model_forward(bb, &b, 1, NULL);
        bb->ops->reset_state(bb);
    }
    CHECK(la[0] == lb[0] && la[1] == lb[1] && la[2] == lb[2], "same seed: identical training losses");
    CHECK(la[0] != la[1] && la[1] != la[2], "the mask changes with the step: %g %g %g", la[0], la[1], la[2]);
    model_backward(a);
    model_backward(bb);
    CHECK(memcmp(a->grads, bb->grads, a->pt.total * sizeof(float)) == 0, "same seed: identical gradients");
    /* a worker with its own dropout seed */
    lstm_lm_set_dropout_seed(bb, 10, 0);
    float other = model_forward(bb, &b, 1, NULL);
    bb->ops->reset_state(bb);
    lstm_lm_set_dropout_seed(bb, 9, 0);
    float again = model_forward(bb, &b, 1, NULL);
    bb->ops->reset_state(bb);
    CHECK(other != la[0] && again == la[0], "dropout seed: %g (seed 10) vs %g, back to seed 9 step 0: %g", other,
          la[0], again);
    /* evaluation: no dropout (same as the dropout-0 model with the same parameters) */
    float e = model_forward(a, &b, 0, NULL), e0 = model_forward(nodrop, &b, 0, NULL);
    CHECK(e == e0, "evaluation ignores dropout: %g vs %g", e, e0);
    CHECK(e != la[0], "training with dropout differs from evaluation");
    model_free(a);
    model_free(bb);
    model_free(nodrop);
}

int main(void) {
    test_statistics(0.5f);
    test_statistics(0.65f);
    test_statistics(0.1f);
    test_edge_cases();
    test_lm_dropout();
    TEST_END();
}
