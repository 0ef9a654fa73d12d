/* Statistics of the stochastic codecs terngrad and stoch3 (TernGrad 3.1,
 * eq. 1-3): over 2000 seeds the mean decode of every element is the clipped
 * input f(x_i) within a few standard errors, sqrt(|f| (s - |f|) / N); with a
 * shared scalar too; and seeds behave (same seed, same frame; other seeds,
 * other frames; the spec seed mixes in). */
#include "tests/test.h"

#include "tests/test_codec_dense.h"

#define NSEEDS 2000
#define NV 48

/* f(x) of TernGrad eq. 21 with the codec's own threshold; s the scalar sent */
static void clipped(double *f, const float *x, size_t n, float thr) {
    for (size_t i = 0; i < n; i++) {
        double a = fabs((double)x[i]) < thr ? fabs((double)x[i]) : thr;
        f[i] = x[i] < 0 ? -a : a;
    }
}

static void unbiased(const char *spec, const float *shared) {
    float x[NV];
    Rng r;
    rng_init(&r, 2024, 1);
    for (int i = 0; i < NV; i++) x[i] = rng_normal(&r);
    x[3] = 6.0f;  /* beyond 2.5 sigma: clipped when c > 0 */
    x[17] = -5.0f;
    x[20] = 0.0f;
    Codec *c = dense_codec(spec);
    double c_par = codec_param(&c->spec, "c");
    /* the threshold the codec uses: c * sigma, or max|x| when c = 0 */
    double s1 = 0, s2 = 0, mx = 0;
    for (int i = 0; i < NV; i++) {
        s1 += x[i];
        s2 += (double)x[i] * x[i];
        mx = fabs(x[i]) > mx ? fabs(x[i]) : mx;
    }
    double sig = sqrt(s2 / NV - (s1 / NV) * (s1 / NV));
    float thr = c_par > 0 ? (float)(c_par * sig) : (float)mx;
    double f[NV], sum[NV] = {0};
    clipped(f, x, NV, thr);
    float s = 0;
    for (int k = 0; k < NSEEDS; k++) {
        CodecSide side;
        memset(&side, 0, sizeof side);
        side.seed = (uint64_t)k * 1000003u + 17;
        side.scalar = shared;
        float y[NV];
        int64_t len;
        uint8_t *fr = dense_encode(c, x, NV, &side, &len);
        if (!fr || codec_decode(c, y, NV, fr, (size_t)len) != 0) {
            CHECK(0, "%s encodes and decodes", spec);
            free(fr);
            codec_free(c);
            return;
        }
        s = get_f32(fr + CODEC_HEADER_SIZE);
        for (int i = 0; i < NV; i++) sum[i] += y[i];
        free(fr);
    }
    int bad = 0, beyond3 = 0;
    double worst = 0;
    for (int i = 0; i < NV; i++) {
        double mean = sum[i] / NSEEDS, a = fabs(f[i]);
        double se = sqrt(a * (s - a) / NSEEDS); /* b ~ Bernoulli(a/s): var of s*b = a (s - a) */
        double z = se > 0 ? fabs(mean - f[i]) / se : (fabs(mean - f[i]) > 1e-6 * s ? 1e9 : 0);
        worst = z > worst ? z : worst;
        beyond3 += z > 3;
        if (z > 5) {
            bad++;
            printf("  %s element %d: x=%g f=%g mean %g (z = %.2f)\n", spec, i, x[i], f[i], mean, z);
        }
    }
    printf("  %-16s %s: s=%g, %d seeds, worst |mean - f(x)| = %.2f standard errors, %d of %d beyond 3\n", spec,
           shared ? "shared scalar" : "own scalar", s, NSEEDS, worst, beyond3, NV);
    CHECK(bad == 0 && beyond3 <= 3, "%s%s unbiased: mean decode == clipped input within 5 se (%d beyond 3 se)", spec,
          shared ? " (shared scalar)" : "", beyond3);
    if (c_par > 0) CHECK(f[3] < x[3] && f[17] > x[17], "%s clips the outliers", spec);
    if (shared) CHECK(s == *shared, "%s sends the shared scalar", spec);
    else {
        float want = thr < (float)mx ? thr : (float)mx;
        CHECK(fabsf(s - want) <= 1e-6f * want, "%s sends min(max|x|, c sigma) = %g (got %g)", spec, want, s);
    }
    codec_free(c);
}

static void test_seeds(void) {
    float x[256];
    dense_fill(x, 256, 5, 0);
    const char *specs[4] = {"terngrad", "terngrad:seed=1", "stoch3", "stoch3:seed=1"};
    uint8_t *fr[4][3];
    int64_t len[4][3];
    for (int k = 0; k < 4; k++) {
        Codec *c = dense_codec(specs[k]);
        for (int s = 0; s < 3; s++) {
            CodecSide side;
            memset(&side, 0, sizeof side);
            side.seed = s < 2 ? 7 : 8; /* s = 0 and 1: the same seed */
            fr[k][s] = dense_encode(c, x, 256, &side, &len[k][s]);
        }
        codec_free(c);
        CHECK(len[k][0] == len[k][1] && !memcmp(fr[k][0], fr[k][1], (size_t)len[k][0]), "%s: same seed, same frame",
              specs[k]);
        CHECK(memcmp(fr[k][0], fr[k][2], (size_t)len[k][0]) != 0, "%s: another seed, another frame", specs[k]);
    }
    CHECK(memcmp(fr[0][0], fr[1][0], (size_t)len[0][0]) != 0 && memcmp(fr[2][0], fr[3][0], (size_t)len[2][0]) != 0,
          "the spec seed changes the stream");
    for (int k = 0; k < 4; k++)
        for (int s = 0; s < 3; s++) free(fr[k][s]);
}

int main(void) {
    unbiased("terngrad", NULL);
    unbiased("terngrad:c=0", NULL);
    unbiased("stoch3", NULL);
    unbiased("stoch3:c=2.5", NULL);
    float shared = 9.0f;
    unbiased("terngrad", &shared);
    unbiased("stoch3", &shared);
    test_seeds();
    TEST_END();
}
