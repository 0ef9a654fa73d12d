/* The fast CPU convolution and batch norm (nn/conv2d.c with im2col, the 1x1 path and the
 * direct 3x3 kernels; nn/batchnorm.c with its one-pass blocked sums and the fused
 * residual and ReLU) against the plain loops of nn/reference.c, over shapes that reach
 * every path: kernels 1, 3 and 5, strides 1 and 2, padding 0 to 2, odd sizes, padded
 * channel strides; forward and backward, to 1e-4 relative of the largest value (batch
 * norm's means: of the largest mean + standard deviation). */
#include <stdlib.h>

#include "common/rng.h"
#include "nn/batchnorm.h"
#include "nn/conv2d.h"
#include "nn/reference.h"
#include "tests/test.h"

static float *rnd(size_t n, Rng *r) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = rng_normal(r);
    return x;
}

static float *zeros(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

/* |a - b| <= tol * max|b| over n values */
static int close_to(const float *a, const float *b, size_t n, double tol, double *worst) {
    double m = 0, d = 0;
    for (size_t i = 0; i < n; i++) {
        m = fabs(b[i]) > m ? fabs(b[i]) : m;
        d = fabs((double)a[i] - b[i]) > d ? fabs((double)a[i] - b[i]) : d;
    }
    *worst = m > 0 ? d / m : d;
    return d <= tol * (m > 0 ? m : 1);
}

/* |a - b| <= bound over n values; *worst: the largest |a - b| */
static int within(const float *a, const float *b, size_t n, double bound, double *worst) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    *worst = d;
    return d <= bound;
}

static void conv_case(int N, int C, int H, int W, int OC, int K, int stride, int pad, int extra_ld, int direct,
                      Rng *r) {
    Conv2dShape s;
    if (conv2d_shape(&s, N, C, H, W, OC, K, K, stride, pad)) return;
    s.ldi += (size_t)extra_ld;
    s.ldo += (size_t)extra_ld;
    conv2d_set_direct(direct);
    size_t ni = (size_t)C * s.ldi, no = (size_t)OC * s.ldo, nw = (size_t)OC * C * K * K;
    float *x = rnd(ni, r), *w = rnd(nw, r), *b = rnd((size_t)OC, r), *dout = rnd(no, r);
    float *y = zeros(no), *yr = zeros(no), *work = zeros(conv2d_work_floats(&s));
    float *dx = zeros(ni), *dxr = zeros(ni), *dw = zeros(nw), *dwr = zeros(nw), *db = zeros((size_t)OC),
          *dbr = zeros((size_t)OC);
    conv2d_forward(y, work, x, w, b, &s);
    conv2d_forward_naive(yr, x, w, b, &s);
    conv2d_backward(dx, dw, db, work, dout, x, w, &s);
    conv2d_backward_naive(dxr, dwr, dbr, dout, x, w, &s);
    double e[4];
    /* compare only the values of each channel row (the padding past N*H*W is not written) */
    int ok = 1;
    for (int c = 0; c < OC; c++) {
        double t;
        ok &= close_to(y + c * s.ldo, yr + c * s.ldo, (size_t)N * s.OH * s.OW, 1e-4, &t);
    }
    close_to(y, yr, (size_t)N * s.OH * s.OW, 1, &e[0]);
    int okd = 1;
    for (int c = 0; c < C; c++) {
        double t;
        okd &= close_to(dx + c * s.ldi, dxr + c * s.ldi, (size_t)N * H * W, 1e-4, &t);
    }
    close_to(dx, dxr, (size_t)N * H * W, 1, &e[1]);
    CHECK(ok && okd && close_to(dw, dwr, nw, 1e-4, &e[2]) && close_to(db, dbr, (size_t)OC, 1e-4, &e[3]),
          "conv N%d C%d %dx%d OC%d k%d s%d p%d ld+%d direct %d: forward %.2g, dinp %.2g, dw %.2g, db %.2g", N, C, H,
          W, OC, K, stride, pad, extra_ld, direct, e[0], e[1], e[2], e[3]);
    free(x), free(w), free(b), free(dout), free(y), free(yr), free(work);
    free(dx), free(dxr), free(dw), free(dwr), free(db), free(dbr);
}

static void bn_case(int C, int M, int extra_ld, int with_res, int relu, Rng *r) {
    size_t ld = (size_t)M + (size_t)extra_ld, n = (size_t)C * ld;
    float *x = rnd(n, r), *res = with_res ? rnd(n, r) : NULL, *dout = rnd(n, r);
    float *g = rnd((size_t)C, r), *b = rnd((size_t)C, r);
    for (int c = 0; c < C; c++) x[c * ld] += 3.0f; /* a shifted channel start: the one-pass sums' shift */
    float *y = zeros(n), *yr = zeros(n), *mean = zeros((size_t)C), *meanr = zeros((size_t)C), *rs = zeros((size_t)C),
          *rsr = zeros((size_t)C), *rm = zeros((size_t)C), *rmr = zeros((size_t)C), *rv = zeros((size_t)C),
          *rvr = zeros((size_t)C);
    for (int c = 0; c < C; c++) rv[c] = rvr[c] = 1.0f;
    batchnorm_forward_train(y, mean, rs, rm, rv, x, g, b, res, relu, C, M, ld);
    batchnorm_forward_train_naive(yr, meanr, rsr, rmr, rvr, x, g, b, res, relu, C, M, ld);
    float *dx = zeros(n), *dxr = zeros(n), *dr = zeros(n), *drr = zeros(n), *dg = zeros((size_t)C),
          *dgr = zeros((size_t)C), *dbt = zeros((size_t)C), *dbtr = zeros((size_t)C);
    batchnorm_backward(dx, with_res ? dr : NULL, dg, dbt, dout, relu ? y : NULL, x, mean, rs, g, C, M, ld);
    batchnorm_backward_naive(dxr, with_res ? drr : NULL, dgr, dbtr, dout, relu ? yr : NULL, x, meanr, rsr, g, C, M,
                             ld);
    int ok = 1;
    double e[6] = {0};
    for (int c = 0; c < C; c++) {
        double t;
        ok &= close_to(y + c * ld, yr + c * ld, (size_t)M, 1e-4, &t);
        e[0] = t > e[0] ? t : e[0];
        ok &= close_to(dx + c * ld, dxr + c * ld, (size_t)M, 1e-3, &t);
        e[1] = t > e[1] ? t : e[1];
        if (with_res) ok &= close_to(dr + c * ld, drr + c * ld, (size_t)M, 1e-6, &t);
    }
    /* a mean near zero of values near 3 is known to the data's scale, not to its own size:
     * the means and running means are compared relative to the largest |mean| + std */
    double scale = 0;
    for (int c = 0; c < C; c++) scale = fmax(scale, fabs(meanr[c]) + 1.0 / rsr[c]);
    ok &= within(mean, meanr, (size_t)C, 1e-5 * scale, &e[2]) && close_to(rs, rsr, (size_t)C, 1e-5, &e[3]);
    ok &= within(rm, rmr, (size_t)C, 1e-5 * scale, &e[4]) && close_to(rv, rvr, (size_t)C, 1e-5, &e[5]);
    double t1, t2;
    ok &= close_to(dg, dgr, (size_t)C, 1e-4, &t1) && close_to(dbt, dbtr, (size_t)C, 1e-4, &t2);
    CHECK(ok, "batch norm C%d M%d ld+%d res %d relu %d: out %.2g, dinp %.2g, mean %.2g abs, rstd %.2g, running %.2g abs %.2g, "
          "dgamma %.2g, dbeta %.2g", C, M, extra_ld, with_res, relu, e[0], e[1], e[2], e[3], e[4], e[5], t1, t2);
    free(x), free(res), free(dout), free(g), free(b), free(y), free(yr), free(mean), free(meanr), free(rs), free(rsr);
    free(rm), free(rmr), free(rv), free(rvr), free(dx), free(dxr), free(dr), free(drr), free(dg), free(dgr);
    free(dbt), free(dbtr);
}

int main(void) {
    Rng r;
    rng_init(&r, 11, 0);
    /* 3x3 stride 1 pad 1 with H*W a multiple of 16 reaches the direct kernels (where the build
     * has AVX-512), 1x1 stride 1 the no-im2col path, the rest im2col */
    conv_case(2, 16, 8, 8, 16, 3, 1, 1, 0, 1, &r);
    conv_case(2, 16, 8, 8, 16, 3, 1, 1, 0, 0, &r);
    conv_case(3, 5, 8, 4, 7, 3, 1, 1, 32, 1, &r);
    conv_case(2, 8, 7, 9, 6, 1, 1, 0, 0, 1, &r);
    conv_case(2, 8, 7, 9, 6, 1, 2, 0, 0, 1, &r);
    conv_case(1, 3, 11, 13, 4, 5, 2, 2, 0, 1, &r);
    conv_case(2, 4, 9, 9, 8, 3, 2, 1, 16, 1, &r);
    conv_case(1, 1, 28, 28, 20, 5, 1, 0, 0, 1, &r);
    conv_case(4, 6, 5, 5, 3, 3, 1, 0, 0, 1, &r);
    bn_case(4, 128, 0, 0, 0, &r);
    bn_case(3, 1000, 24, 1, 1, &r);
    bn_case(5, 7, 0, 0, 1, &r);
    bn_case(2, 4096, 0, 1, 0, &r);
    conv2d_set_direct(1);
    TEST_END();
}
