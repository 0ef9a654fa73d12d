/* Plain versions of the fast CPU ops (see reference.h): loops straight from the
 * definitions, sums in double. Slow on purpose; the tests check the fast ops
 * against these. */
#include "nn/reference.h"

#include <math.h>
#include <string.h>

#include "nn/constants.h"

void conv2d_forward_naive(float *out, const float *inp, const float *w, const float *b, const Conv2dShape *s) {
    for (int oc = 0; oc < s->OC; oc++)
        for (int n = 0; n < s->N; n++)
            for (int oh = 0; oh < s->OH; oh++)
                for (int ow = 0; ow < s->OW; ow++) {
                    double sum = b ? b[oc] : 0.0;
                    for (int c = 0; c < s->C; c++)
                        for (int kh = 0; kh < s->KH; kh++)
                            for (int kw = 0; kw < s->KW; kw++) {
                                int ih = oh * s->stride - s->pad + kh, iw = ow * s->stride - s->pad + kw;
                                if (ih < 0 || ih >= s->H || iw < 0 || iw >= s->W) continue; /* padding */
                                sum += (double)w[((oc * s->C + c) * s->KH + kh) * s->KW + kw] *
                                       inp[c * s->ldi + ((size_t)n * s->H + ih) * s->W + iw];
                            }
                    out[oc * s->ldo + ((size_t)n * s->OH + oh) * s->OW + ow] = (float)sum;
                }
}

void conv2d_backward_naive(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                           const Conv2dShape *s) {
    if (dinp)
        for (int c = 0; c < s->C; c++)
            for (int n = 0; n < s->N; n++)
                for (int ih = 0; ih < s->H; ih++)
                    for (int iw = 0; iw < s->W; iw++) {
                        /* every output that read inp[c, n, ih, iw]: oh*stride - pad + kh == ih */
                        double sum = 0.0;
                        for (int oc = 0; oc < s->OC; oc++)
                            for (int kh = 0; kh < s->KH; kh++)
                                for (int kw = 0; kw < s->KW; kw++) {
                                    int th = ih + s->pad - kh, tw = iw + s->pad - kw;
                                    if (th < 0 || tw < 0 || th % s->stride || tw % s->stride) continue;
                                    int oh = th / s->stride, ow = tw / s->stride;
                                    if (oh >= s->OH || ow >= s->OW) continue;
                                    sum += (double)w[((oc * s->C + c) * s->KH + kh) * s->KW + kw] *
                                           dout[oc * s->ldo + ((size_t)n * s->OH + oh) * s->OW + ow];
                                }
                        dinp[c * s->ldi + ((size_t)n * s->H + ih) * s->W + iw] = (float)sum;
                    }
    for (int oc = 0; oc < s->OC; oc++) {
        for (int c = 0; c < s->C; c++)
            for (int kh = 0; kh < s->KH; kh++)
                for (int kw = 0; kw < s->KW; kw++) {
                    double sum = 0.0;
                    for (int n = 0; n < s->N; n++)
                        for (int oh = 0; oh < s->OH; oh++)
                            for (int ow = 0; ow < s->OW; ow++) {
                                int ih = oh * s->stride - s->pad + kh, iw = ow * s->stride - s->pad + kw;
                                if (ih < 0 || ih >= s->H || iw < 0 || iw >= s->W) continue;
                                sum += (double)dout[oc * s->ldo + ((size_t)n * s->OH + oh) * s->OW + ow] *
                                       inp[c * s->ldi + ((size_t)n * s->H + ih) * s->W + iw];
                            }
                    dw[((oc * s->C + c) * s->KH + kh) * s->KW + kw] += (float)sum;
                }
        if (db) {
            double sum = 0.0;
            for (size_t i = 0; i < (size_t)s->N * s->OH * s->OW; i++) sum += dout[oc * s->ldo + i];
            db[oc] += (float)sum;
        }
    }
}

void batchnorm_forward_train_naive(float *out, float *mean, float *rstd, float *running_mean, float *running_var,
                                   const float *inp, const float *gamma, const float *beta, const float *res, int relu,
                                   int C, int M, size_t ld) {
    for (int c = 0; c < C; c++) {
        const float *x = inp + c * ld;
        double mu = 0.0, var = 0.0;
        for (int i = 0; i < M; i++) mu += x[i];
        mu /= M;
        for (int i = 0; i < M; i++) var += ((double)x[i] - mu) * ((double)x[i] - mu);
        var /= M; /* biased: what normalizes */
        double r = 1.0 / sqrt(var + (double)GC_BN_EPS);
        mean[c] = (float)mu;
        rstd[c] = (float)r;
        running_mean[c] = (float)((1.0 - GC_BN_MOMENTUM) * running_mean[c] + GC_BN_MOMENTUM * mu);
        running_var[c] = (float)((1.0 - GC_BN_MOMENTUM) * running_var[c] +
                                 GC_BN_MOMENTUM * (M > 1 ? var * M / (M - 1) : var)); /* unbiased */
        for (int i = 0; i < M; i++) {
            double y = ((double)x[i] - mu) * r * gamma[c] + beta[c];
            if (res) y += res[c * ld + i];
            if (relu && y < 0) y = 0;
            out[c * ld + i] = (float)y;
        }
    }
}

void batchnorm_backward_naive(float *dinp, float *dres, float *dgamma, float *dbeta, const float *dout,
                              const float *out, const float *inp, const float *mean, const float *rstd,
                              const float *gamma, int C, int M, size_t ld) {
    for (int c = 0; c < C; c++) {
        const float *x = inp + c * ld, *dy = dout + c * ld;
        double sg = 0.0, sgx = 0.0;
        for (int i = 0; i < M; i++) {
            double g = out && out[c * ld + i] <= 0.0f ? 0.0 : dy[i]; /* the ReLU's mask: y > 0 */
            double xhat = ((double)x[i] - mean[c]) * rstd[c];
            sg += g;
            sgx += g * xhat;
        }
        dbeta[c] += (float)sg;
        dgamma[c] += (float)sgx;
        for (int i = 0; i < M; i++) {
            double g = out && out[c * ld + i] <= 0.0f ? 0.0 : dy[i];
            double xhat = ((double)x[i] - mean[c]) * rstd[c];
            if (dres) dres[c * ld + i] = (float)g;
            dinp[c * ld + i] = (float)((double)gamma[c] * rstd[c] * (g - sg / M - xhat * sgx / M));
        }
    }
}
