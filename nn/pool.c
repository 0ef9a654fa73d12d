/* Global average pooling and max pooling (see pool.h).
 * No parameters; input gradients are OVERWRITTEN. */
#include "nn/pool.h"

#include <float.h>
#include <string.h>

#include "nn/parallel.h"

void avgpool_global_forward(float *out /*N,C*/, const float *inp /*C,ld*/, int N, int C, int HW, size_t ld) {
    const float inv = 1.0f / HW;
    OMP_FOR2
    for (int c = 0; c < C; c++)
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)c * ld + (size_t)n * HW;
            float s = 0.0f;
            for (int i = 0; i < HW; i++) s += x[i];
            out[(size_t)n * C + c] = s * inv;
        }
}

void avgpool_global_backward(float *dinp /*C,ld, overwritten*/, const float *dout /*N,C*/, int N, int C, int HW,
                             size_t ld) {
    /* forward: out[n,c] = (1/HW) sum_i inp[c,n,i]  =>  dinp[c,n,i] = dout[n,c] / HW
     * (only the N*HW values of each channel row are written) */
    const float inv = 1.0f / HW;
    OMP_FOR2
    for (int c = 0; c < C; c++)
        for (int n = 0; n < N; n++) {
            float g = dout[(size_t)n * C + c] * inv;
            float *d = dinp + (size_t)c * ld + (size_t)n * HW;
            for (int i = 0; i < HW; i++) d[i] = g;
        }
}

int maxpool2d_out_size(int H, int K, int stride, int pad) { return (H + 2 * pad - K) / stride + 1; }

void maxpool2d_forward(float *out /*P,OH,OW*/, int *argmax /*P,OH,OW*/, const float *inp /*P,H,W*/, int P, int H,
                       int W, int K, int stride, int pad) {
    const int OH = maxpool2d_out_size(H, K, stride, pad), OW = maxpool2d_out_size(W, K, stride, pad);
    OMP_FOR
    for (int p = 0; p < P; p++) {
        const float *x = inp + (size_t)p * H * W;
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                float best = -FLT_MAX;
                int arg = -1;
                for (int kh = 0; kh < K; kh++) {
                    int ih = oh * stride - pad + kh;
                    if (ih < 0 || ih >= H) continue;
                    for (int kw = 0; kw < K; kw++) {
                        int iw = ow * stride - pad + kw;
                        if (iw < 0 || iw >= W) continue;
                        float v = x[ih * W + iw];
                        if (arg < 0 || v > best || v != v) { /* NaN propagates, as torch */
                            best = v;
                            arg = ih * W + iw;
                            if (v != v) goto done;
                        }
                    }
                }
            done:;
                size_t o = ((size_t)p * OH + oh) * OW + ow;
                out[o] = best;
                argmax[o] = arg;
            }
    }
}

void maxpool2d_backward(float *dinp /*P,H,W, overwritten*/, const float *dout /*P,OH,OW*/,
                        const int *argmax /*P,OH,OW*/, int P, int H, int W, int K, int stride, int pad) {
    /* forward: out[p,o] = inp[p, argmax[p,o]]  =>  dinp[p, argmax[p,o]] += dout[p,o] */
    const int OH = maxpool2d_out_size(H, K, stride, pad), OW = maxpool2d_out_size(W, K, stride, pad);
    OMP_FOR
    for (int p = 0; p < P; p++) {
        float *d = dinp + (size_t)p * H * W;
        memset(d, 0, sizeof(float) * H * W);
        const float *g = dout + (size_t)p * OH * OW;
        const int *a = argmax + (size_t)p * OH * OW;
        for (int o = 0; o < OH * OW; o++)
            if (a[o] >= 0) d[a[o]] += g[o];
    }
}
