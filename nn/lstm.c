/* One LSTM layer, torch.nn.LSTM semantics (see lstm.h for the equations).
 * Shape letters: T time steps, N batch, In input features, H hidden units.
 * Parameter gradients ACCUMULATE (+=); dx, dh0, dc0 are OVERWRITTEN.
 *
 * The input projection of all T steps is one GEMM (linear_forward over T*N
 * rows); only the recurrent h_{t-1} @ w_hh^T is done step by step. Likewise
 * the backward does the recurrence step by step and the weight gradients as
 * two GEMMs over all T*N rows at the end. */
#include "nn/lstm.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "nn/constants.h"
#include "nn/linear.h"
#include "nn/parallel.h"

static inline float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

/* tanh through one expf: glibc's tanhf goes through expm1f and took ~20% of a
 * CharLSTM step. Odd series below GC_LSTM_TANH_SERIES_BELOW = 0.05
 * (nn/constants.h; next term 62/2835 x^9 < 1e-13), else 1 - 2 / (e^{2x} + 1),
 * relative error ~1e-6 at worst; saturates cleanly (e^{2x} = inf gives 1,
 * e^{2x} = 0 gives -1). nn/lstm_cuda.cu repeats these expressions. */
static inline float tanhf_(float x) {
    if (fabsf(x) < GC_LSTM_TANH_SERIES_BELOW) {
        const float x2 = x * x;
        return x * (1.0f + x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f + x2 * (-17.0f / 315.0f))));
    }
    return 1.0f - 2.0f / (expf(2.0f * x) + 1.0f);
}

void lstm_forward(float *hs /*T+1,N,H*/, float *cs /*T+1,N,H*/, float *gates /*T,N,4H: i,f,g,o after nonlinearity*/,
                  float *tanhc /*T,N,H: tanh(c_t)*/, const float *x /*T,N,In*/, const float *w_ih /*4H,In*/,
                  const float *w_hh /*4H,H*/, const float *b_ih /*4H*/, const float *b_hh /*4H*/, int T, int N,
                  int In, int H) {
    if (T <= 0 || N <= 0 || H <= 0) return;
    const int G = 4 * H;
    const size_t NH = (size_t)N * H, NG = (size_t)N * G;
    /* a[t] = x_t @ w_ih^T + b_ih for all t at once */
    linear_forward(gates, x, w_ih, b_ih, T * N, In, G);
    for (int t = 0; t < T; t++) {
        float *a = gates + t * NG;
        const float *hprev = hs + t * NH, *cprev = cs + t * NH;
        float *h = hs + (t + 1) * NH, *c = cs + (t + 1) * NH, *tc = tanhc + t * NH;
        /* a[t] += h_{t-1} @ w_hh^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, G, H, 1.0f, hprev, H, w_hh, H, 1.0f, a, G);
#ifdef HAVE_OPENMP
#pragma omp parallel for schedule(static) if (NH > 8192)
#endif
        for (long k = 0; k < (long)NH; k++) {
            const int n = (int)(k / H), j = (int)(k % H);
            float *an = a + (size_t)n * G;
            const float i = sigmoidf_(an[j] + b_hh[j]);
            const float f = sigmoidf_(an[H + j] + b_hh[H + j]);
            const float g = tanhf_(an[2 * H + j] + b_hh[2 * H + j]);
            const float o = sigmoidf_(an[3 * H + j] + b_hh[3 * H + j]);
            const float cn = f * cprev[k] + i * g;
            const float tcn = tanhf_(cn);
            an[j] = i;
            an[H + j] = f;
            an[2 * H + j] = g;
            an[3 * H + j] = o;
            c[k] = cn;
            tc[k] = tcn;
            h[k] = o * tcn;
        }
    }
}

void lstm_backward(float *dx /*T,N,In, overwritten; NULL = skip*/, float *dh0 /*N,H, overwritten; NULL = skip*/,
                   float *dc0 /*N,H, overwritten; NULL = skip*/, float *dw_ih /*4H,In, +=*/, float *dw_hh /*4H,H, +=*/,
                   float *db_ih /*4H, +=*/, float *db_hh /*4H, +=*/, float *dgates /*T,N,4H scratch*/,
                   float *dstate /*2,N,H scratch*/, const float *dhs /*T,N,H*/, const float *hs /*T+1,N,H*/,
                   const float *cs /*T+1,N,H*/, const float *gates /*T,N,4H*/, const float *tanhc /*T,N,H*/,
                   const float *x /*T,N,In*/, const float *w_ih /*4H,In*/, const float *w_hh /*4H,H*/, int T, int N,
                   int In, int H) {
    if (T <= 0 || N <= 0 || H <= 0) return;
    const int G = 4 * H;
    const size_t NH = (size_t)N * H, NG = (size_t)N * G;
    /* dh_next, dc_next: gradient reaching (h_t, c_t) from step t+1; zero at t = T-1
     * (truncated BPTT: the next batch does not send gradient back). */
    float *dhn = dstate, *dcn = dstate + NH;
    memset(dstate, 0, 2 * NH * sizeof(float));
    for (int t = T - 1; t >= 0; t--) {
        const float *act = gates + t * NG, *tc = tanhc + t * NH, *cprev = cs + t * NH, *dh_out = dhs + t * NH;
        float *da = dgates + t * NG;
#ifdef HAVE_OPENMP
#pragma omp parallel for schedule(static) if (NH > 8192)
#endif
        for (long k = 0; k < (long)NH; k++) {
            const int n = (int)(k / H), j = (int)(k % H);
            const float *an = act + (size_t)n * G;
            float *dan = da + (size_t)n * G;
            const float i = an[j], f = an[H + j], g = an[2 * H + j], o = an[3 * H + j];
            /* h_t is used by the output and by step t+1 */
            const float dh = dh_out[k] + dhn[k];
            /* h_t = o * tanh(c_t); c_t = f * c_{t-1} + i * g (and c_t feeds step t+1) */
            const float dc = dcn[k] + dh * o * (1.0f - tc[k] * tc[k]);
            /* i = sigmoid(a_i): di/da_i = i (1 - i); g = tanh(a_g): 1 - g^2 */
            dan[j] = dc * g * i * (1.0f - i);
            dan[H + j] = dc * cprev[k] * f * (1.0f - f);
            dan[2 * H + j] = dc * i * (1.0f - g * g);
            dan[3 * H + j] = dh * tc[k] * o * (1.0f - o);
            dcn[k] = dc * f; /* d c_{t-1} */
        }
        /* a = ... + h_{t-1} @ w_hh^T  =>  dh_{t-1} = da @ w_hh */
        if (t > 0 || dh0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, H, G, 1.0f, da, G, w_hh, H, 0.0f, dhn, H);
    }
    if (dh0) memcpy(dh0, dhn, NH * sizeof(float));
    if (dc0) memcpy(dc0, dcn, NH * sizeof(float));
    /* a = x @ w_ih^T + b_ih + h_prev @ w_hh^T + b_hh over all T*N rows, h_prev = hs[0..T-1]:
     * dw_hh += da^T @ h_prev, db_hh += sum da; dw_ih += da^T @ x, db_ih += sum da, dx = da @ w_ih */
    linear_backward(NULL, dw_hh, db_hh, dgates, hs, w_hh, T * N, H, G);
    linear_backward(dx, dw_ih, db_ih, dgates, x, w_ih, T * N, In, G);
}
