/* Batch normalization over CNHW activations (see batchnorm.h).
 * Shape letters: C channels, M = N*H*W values per channel (contiguous).
 * dgamma, dbeta ACCUMULATE (+=); dinp, dres are OVERWRITTEN.
 * Channels are split over OpenMP threads; sums are taken in double. */
#include "nn/batchnorm.h"

#include <math.h>
#include <stddef.h>

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

void batchnorm_forward_train(float *out /*C,M*/, float *mean /*C, saved for backward*/,
                             float *rstd /*C, saved: 1/sqrt(var + eps)*/, float *running_mean /*C, updated*/,
                             float *running_var /*C, updated*/, const float *inp /*C,M*/,
                             const float *gamma /*C*/, const float *beta /*C*/, const float *res /*C,M or NULL*/,
                             int relu, int C, int M) {
    OMP_FOR
    for (int c = 0; c < C; c++) {
        const float *x = inp + (size_t)c * M;
        double s = 0.0;
        OMP_SIMD_REDUCE(+ : s)
        for (int i = 0; i < M; i++) s += x[i];
        double mu = s / M;
        /* second pass around the mean: exact enough even when |mean| >> std */
        double q = 0.0;
        float muf = (float)mu;
        OMP_SIMD_REDUCE(+ : q)
        for (int i = 0; i < M; i++) {
            double d = (double)(x[i] - muf);
            q += d * d;
        }
        double dm = mu - muf; /* correction for rounding the mean to float */
        double var = q / M - dm * dm;
        if (var < 0.0) var = 0.0;
        float rs = (float)(1.0 / sqrt(var + GC_BN_EPS));
        mean[c] = (float)mu;
        rstd[c] = rs;
        double unbiased = M > 1 ? var * M / (M - 1) : var;
        running_mean[c] = (1.0f - GC_BN_MOMENTUM) * running_mean[c] + GC_BN_MOMENTUM * (float)mu;
        running_var[c] = (1.0f - GC_BN_MOMENTUM) * running_var[c] + GC_BN_MOMENTUM * (float)unbiased;
        float a = gamma[c] * rs;
        float b = beta[c] - (float)mu * a;
        affine_channel(out + (size_t)c * M, x, res ? res + (size_t)c * M : NULL, a, b, relu, M);
    }
}

void batchnorm_forward_eval(float *out /*C,M*/, const float *inp /*C,M*/, const float *gamma /*C*/,
                            const float *beta /*C*/, const float *running_mean /*C*/,
                            const float *running_var /*C*/, const float *res /*C,M or NULL*/, int relu, int C,
                            int M) {
    OMP_FOR
    for (int c = 0; c < C; c++) {
        float rs = (float)(1.0 / sqrt((double)running_var[c] + GC_BN_EPS));
        float a = gamma[c] * rs;
        float b = beta[c] - running_mean[c] * a;
        affine_channel(out + (size_t)c * M, inp + (size_t)c * M, res ? res + (size_t)c * M : NULL, a, b, relu, M);
    }
}

void batchnorm_backward(float *dinp /*C,M, overwritten*/, float *dres /*C,M, overwritten; NULL = skip*/,
                        float *dgamma /*C, +=*/, float *dbeta /*C, +=*/, const float *dout /*C,M*/,
                        const float *out /*C,M or NULL*/, const float *inp /*C,M*/, const float *mean /*C*/,
                        const float *rstd /*C*/, const float *gamma /*C*/, int C, int M) {
    /* forward: z = xhat*gamma + beta [+ res], xhat = (x - mean)*rstd, y = relu(z) or z
     *   g = dL/dz = dout * [y > 0]       (dres = g)
     *   dgamma += sum g*xhat,  dbeta += sum g
     *   dx = gamma*rstd * (g - sum(g)/M - xhat * sum(g*xhat)/M)   (mean, var depend on x) */
    OMP_FOR
    for (int c = 0; c < C; c++) {
        const size_t off = (size_t)c * M;
        const float *dy = dout + off, *x = inp + off;
        const float *y = out ? out + off : NULL;
        const float mu = mean[c], rs = rstd[c];
        double sg = 0.0, sgx = 0.0;
        if (y) {
            float *dr = dres ? dres + off : NULL;
            OMP_SIMD_REDUCE(+ : sg, sgx)
            for (int i = 0; i < M; i++) {
                float g = y[i] > 0.0f ? dy[i] : 0.0f;
                if (dr) dr[i] = g;
                sg += g;
                sgx += (double)(g * (x[i] - mu));
            }
        } else {
            if (dres)
                for (int i = 0; i < M; i++) dres[off + i] = dy[i];
            OMP_SIMD_REDUCE(+ : sg, sgx)
            for (int i = 0; i < M; i++) {
                sg += dy[i];
                sgx += (double)(dy[i] * (x[i] - mu));
            }
        }
        sgx *= rs; /* sum g*xhat */
        dgamma[c] += (float)sgx;
        dbeta[c] += (float)sg;
        const float k = gamma[c] * rs;
        const float mg = (float)(sg / M), mgx = (float)(sgx / M);
        float *dx = dinp + off;
        if (y)
            for (int i = 0; i < M; i++) {
                float g = y[i] > 0.0f ? dy[i] : 0.0f;
                dx[i] = k * (g - mg - (x[i] - mu) * rs * mgx);
            }
        else
            for (int i = 0; i < M; i++) dx[i] = k * (dy[i] - mg - (x[i] - mu) * rs * mgx);
    }
}
