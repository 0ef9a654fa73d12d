/* Fully connected layer (see linear.h).
 * Shape letters: N rows, IN input features, OUT output features.
 * Parameter gradients dw, db ACCUMULATE (+=); the input gradient dinp is OVERWRITTEN. */
#include "nn/linear.h"

#include <cblas.h>

#include "nn/parallel.h"

void linear_forward(float *out /*N,OUT*/, const float *inp /*N,IN*/, const float *w /*OUT,IN*/,
                    const float *b /*OUT or NULL*/, int N, int IN, int OUT) {
    if (N <= 0 || OUT <= 0) return;
    float beta = 0.0f;
    if (b) {
        OMP_FOR
        for (int n = 0; n < N; n++)
            for (int o = 0; o < OUT; o++) out[(size_t)n * OUT + o] = b[o];
        beta = 1.0f;
    }
    /* out[N,OUT] (+)= inp[N,IN] @ w[OUT,IN]^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OUT, IN, 1.0f, inp, IN, w, IN, beta, out, OUT);
}

void linear_backward(float *dinp /*N,IN, overwritten; NULL = skip*/, float *dw /*OUT,IN, +=*/,
                     float *db /*OUT, +=, NULL = skip*/, const float *dout /*N,OUT*/,
                     const float *inp /*N,IN*/, const float *w /*OUT,IN*/, int N, int IN, int OUT) {
    if (N <= 0 || OUT <= 0) return;
    /* forward: out[n,o] = sum_i inp[n,i] * w[o,i] + b[o] */
    if (dinp) /* dinp[n,i] = sum_o dout[n,o] * w[o,i] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, IN, OUT, 1.0f, dout, OUT, w, IN, 0.0f, dinp, IN);
    /* dw[o,i] += sum_n dout[n,o] * inp[n,i] */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OUT, IN, N, 1.0f, dout, OUT, inp, IN, 1.0f, dw, IN);
    if (db) { /* db[o] += sum_n dout[n,o] */
        OMP_FOR
        for (int o = 0; o < OUT; o++) {
            float s = 0.0f;
            for (int n = 0; n < N; n++) s += dout[(size_t)n * OUT + o];
            db[o] += s;
        }
    }
}
