/* Batch normalization over CNHW activations (see batchnorm.h).
 * Shape letters: C channels, M = N*H*W values per channel (contiguous), ld the
 * channel stride (>= M).
 * dgamma, dbeta ACCUMULATE (+=); dinp, dres are OVERWRITTEN.
 * Channels are split over OpenMP threads; sums are taken in double. */
#include "nn/batchnorm.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "nn/constants.h"
#include "nn/parallel.h"

/* y = a*x + b [+ r] [ReLU] over one channel */
static void affine_channel(float *y /*M*/, const float *x /*M*/, const float *r /*M or NULL*/, float a, float b,
                           int relu, int M) {
    if (r) {
        if (relu)
            for (int i = 0; i < M; i++) {
                float v = a * x[i] + b + r[i];
                y[i] = v > 0.0f ? v : 0.0f;
            }
        else
            for (int i = 0; i < M; i++) y[i] = a * x[i] + b + r[i];
    } else {
        if (relu)
            for (int i = 0; i < M; i++) {
                float v = a * x[i] + b;
                y[i] = v > 0.0f ? v : 0.0f;
            }
        else
            for (int i = 0; i < M; i++) y[i] = a * x[i] + b;
    }
}

/* Sums over one channel in float blocks of BLK values, added into double
 * between blocks: vectorized (SIMD lanes of a few terms each), and accurate to
 * ~1e-7 relative for any M also where the block is one serial float sum (-O0,
 * -O1: no vectorization; with 1024-value blocks, test_nn_resnet failed there). */
#define BLK 64

/* Mean and biased variance of one channel in ONE pass: sums of d = x - x[0]
 * and d*d (shifting by a sample keeps the cancellation in var = E[d^2] -
 * E[d]^2 small: the shift is within a few standard deviations of the mean). */
static void stats_channel(double *mean /*out*/, double *var /*out*/, const float *x /*M*/, int M) {
    const float k = x[0];
    double s1 = 0.0, s2 = 0.0;
    for (int i0 = 0; i0 < M; i0 += BLK) {
        int n = M - i0 < BLK ? M - i0 : BLK;
        const float *p = x + i0;
        float a = 0.0f, b = 0.0f;
        OMP_SIMD_REDUCE(+ : a, b)
        for (int i = 0; i < n; i++) {
            float d = p[i] - k;
            a += d;
            b += d * d;
        }
        s1 += a;
        s2 += b;
    }
    double m1 = s1 / M;
    double v = s2 / M - m1 * m1;
    *mean = k + m1;
    *var = v > 0.0 ? v : 0.0;
}

void batchnorm_forward_train(float *out /*C,ld*/, float *mean /*C, saved for backward*/,
                             float *rstd /*C, saved: 1/sqrt(var + eps)*/, float *running_mean /*C, updated*/,
                             float *running_var /*C, updated*/, const float *inp /*C,ld*/,
                             const float *gamma /*C*/, const float *beta /*C*/, const float *res /*C,ld or NULL*/,
                             int relu, int C, int M, size_t ld) {
    OMP_FOR_DYN
    for (int c = 0; c < C; c++) {
        const float *x = inp + (size_t)c * ld;
        double mu, var;
        stats_channel(&mu, &var, x, M);
        float muf = (float)mu;
        float rs = (float)(1.0 / sqrt(var + GC_BN_EPS));
        mean[c] = muf;
        rstd[c] = rs;
        double unbiased = M > 1 ? var * M / (M - 1) : var;
        running_mean[c] = (1.0f - GC_BN_MOMENTUM) * running_mean[c] + GC_BN_MOMENTUM * muf;
        running_var[c] = (1.0f - GC_BN_MOMENTUM) * running_var[c] + GC_BN_MOMENTUM * (float)unbiased;
        float a = gamma[c] * rs;
        float b = beta[c] - muf * a;
        affine_channel(out + (size_t)c * ld, x, res ? res + (size_t)c * ld : NULL, a, b, relu, M);
    }
}

void batchnorm_forward_eval(float *out /*C,ld*/, const float *inp /*C,ld*/, const float *gamma /*C*/,
                            const float *beta /*C*/, const float *running_mean /*C*/,
                            const float *running_var /*C*/, const float *res /*C,ld or NULL*/, int relu, int C,
                            int M, size_t ld) {
    OMP_FOR_DYN
    for (int c = 0; c < C; c++) {
        float rs = (float)(1.0 / sqrt((double)running_var[c] + GC_BN_EPS));
        float a = gamma[c] * rs;
        float b = beta[c] - running_mean[c] * a;
        affine_channel(out + (size_t)c * ld, inp + (size_t)c * ld, res ? res + (size_t)c * ld : NULL, a, b, relu,
                       M);
    }
}

void batchnorm_backward(float *dinp /*C,ld, overwritten*/, float *dres /*C,ld, overwritten; NULL = skip*/,
                        float *dgamma /*C, +=*/, float *dbeta /*C, +=*/, const float *dout /*C,ld*/,
                        const float *out /*C,ld or NULL*/, const float *inp /*C,ld*/, const float *mean /*C*/,
                        const float *rstd /*C*/, const float *gamma /*C*/, int C, int M,
                        size_t ld) {
    /* forward: z = xhat*gamma + beta [+ res], xhat = (x - mean)*rstd, y = relu(z) or z
     *   g = dL/dz = dout * [y > 0]       (dres = g)
     *   dgamma += sum g*xhat,  dbeta += sum g
     *   dx = gamma*rstd * (g - sum(g)/M - xhat * sum(g*xhat)/M)   (mean, var depend on x) */
    OMP_FOR_DYN
    for (int c = 0; c < C; c++) {
        const size_t off = (size_t)c * ld;
        const float *dy = dout + off, *x = inp + off;
        const float *y = out ? out + off : NULL;
        float *dr = dres ? dres + off : NULL;
        const float mu = mean[c], rs = rstd[c];
        double sg = 0.0, sgx = 0.0;
        for (int i0 = 0; i0 < M; i0 += BLK) {
            int n = M - i0 < BLK ? M - i0 : BLK;
            const float *pdy = dy + i0, *px = x + i0;
            float a = 0.0f, b = 0.0f;
            if (y) {
                const float *py = y + i0;
                if (dr) {
                    float *pdr = dr + i0;
                    OMP_SIMD_REDUCE(+ : a, b)
                    for (int i = 0; i < n; i++) {
                        float g = py[i] > 0.0f ? pdy[i] : 0.0f;
                        pdr[i] = g;
                        a += g;
                        b += g * (px[i] - mu);
                    }
                } else {
                    OMP_SIMD_REDUCE(+ : a, b)
                    for (int i = 0; i < n; i++) {
                        float g = py[i] > 0.0f ? pdy[i] : 0.0f;
                        a += g;
                        b += g * (px[i] - mu);
                    }
                }
            } else {
                if (dr) memmove(dr + i0, pdy, sizeof(float) * n);
                OMP_SIMD_REDUCE(+ : a, b)
                for (int i = 0; i < n; i++) {
                    a += pdy[i];
                    b += pdy[i] * (px[i] - mu);
                }
            }
            sg += a;
            sgx += b;
        }
        sgx *= rs; /* sum g*xhat */
        dgamma[c] += (float)sgx;
        dbeta[c] += (float)sg;
        /* dx = k*g - k*mg + k*rs*mgx*mu - (k*rs*mgx)*x = k*g + (c0 - c1*x) */
        const float k = gamma[c] * rs;
        const float mg = (float)(sg / M), mgx = (float)(sgx / M);
        const float c1 = k * rs * mgx, c0 = -k * mg + c1 * mu;
        float *dx = dinp + off;
        if (y && !dr) {
            for (int i = 0; i < M; i++) {
                float g = y[i] > 0.0f ? dy[i] : 0.0f;
                dx[i] = k * g + (c0 - c1 * x[i]);
            }
        } else {
            /* g is dr (already masked) when dres was asked for, else plain dout */
            const float *gg = dr ? dr : dy;
            for (int i = 0; i < M; i++) dx[i] = k * gg[i] + (c0 - c1 * x[i]);
        }
    }
}
