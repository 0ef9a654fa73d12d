/* Reference tests of the CPU image ops against PyTorch (tests/fixtures/nn_layers.bin,
 * written by tests/ref/nn_fixtures.py in float64 and stored as float32).
 *
 * Tolerance: rtol 1e-4 with an absolute floor of 1e-4 * 0.05 * max|reference|
 * (NNFX_CLOSE). The reference is exact to float32 storage, so the difference is
 * our own float32 rounding: sums of up to a few hundred products (conv) and
 * batch statistics; 1e-4 is ~1000 ulps of headroom over what we measure
 * (printed per tensor), and the floor only matters for elements that are sums
 * of cancelling terms (gradients near zero).
 *
 * Every op is also checked for its gradient contract: parameter gradients
 * ACCUMULATE (the test pre-fills them with 1.0 and subtracts), input gradients
 * OVERWRITE (pre-filled with garbage). Convolutions run with 1 thread and all
 * threads, with a tiny im2col chunk to cross chunk boundaries, and with the
 * direct 3x3 kernels (nn/conv3x3.h) both on and off, and with padded channel
 * strides (ldi/ldo above the dense size). */
#include "tests/test.h"
#include "tests/test_nn_fixture.h"

#include "nn/activation.h"
#include "nn/batchnorm.h"
#include "nn/conv2d.h"
#include "nn/layout.h"
#include "nn/linear.h"
#include "nn/parallel.h"
#include "nn/pool.h"
#include "nn/softmax_ce.h"

#define RTOL 1e-4f
#define AFRAC 0.05f

static float *falloc(size_t n, float fill) {
    float *p = mallocCheck(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = fill;
    return p;
}

static void sub_one(float *a, size_t n) {
    for (size_t i = 0; i < n; i++) a[i] -= 1.0f;
}

static void test_conv(const NnFixture *fx, int threads, size_t chunk, int direct, int padded) {
    int count = nnfx_i(fx, "conv.count", 1)[0];
#ifdef HAVE_OPENMP
    omp_set_num_threads(threads);
#endif
    conv2d_set_chunk_floats(chunk);
    conv2d_set_direct(direct);
    for (int i = 0; i < count; i++) {
        char p[32], what[96];
        snprintf(p, sizeof p, "conv%d.", i);
        const int *sh = nnfx_i(fx, nnfx_key(p, "shape"), 10);
        int N = sh[0], C = sh[1], H = sh[2], W = sh[3], OC = sh[4], KH = sh[5], KW = sh[6], st = sh[7], pad = sh[8],
            bias = sh[9];
        Conv2dShape s;
        CHECK(conv2d_shape(&s, N, C, H, W, OC, KH, KW, st, pad) == 0, "conv%d shape", i);
        size_t nin = (size_t)N * C * H * W, nout = (size_t)N * OC * s.OH * s.OW, nw = (size_t)OC * C * KH * KW;
        if (padded) { /* channel rows padded: ldi, ldo larger than dense */
            s.ldi += 16 * (size_t)padded;
            s.ldo += 48;
        }
        const float *x = nnfx_f(fx, nnfx_key(p, "x"), nin);
        const float *w = nnfx_f(fx, nnfx_key(p, "w"), nw);
        const float *y = nnfx_f(fx, nnfx_key(p, "y"), nout);
        const float *dy = nnfx_f(fx, nnfx_key(p, "dy"), nout);
        const float *b = bias ? nnfx_f(fx, nnfx_key(p, "b"), OC) : NULL;
        size_t pin = (size_t)C * s.ldi, pout = (size_t)OC * s.ldo;
        float *xc = falloc(pin, 0), *yc = falloc(pout, 7), *yn = falloc(nout, 0), *dyc = falloc(pout, 0);
        float *dxc = falloc(pin, 123.0f), *dxn = falloc(nin, 0), *dw = falloc(nw, 1.0f), *db = falloc(OC, 1.0f);
        float *work = falloc(conv2d_work_floats(&s), 0);
        swap01_ld(xc, x, N, C, H * W, s.ldi, (size_t)C * H * W);
        conv2d_forward(yc, work, xc, w, b, &s);
        swap01_ld(yn, yc, OC, N, s.OH * s.OW, (size_t)OC * s.OH * s.OW, s.ldo);
        snprintf(what, sizeof what, "conv%d %dx%d K%dx%d s%d p%d T%d c%zu%s%s y", i, H, W, KH, KW, st, pad, threads,
                 chunk, direct ? "" : " im2col", padded ? " ld+" : "");
        NNFX_CLOSE(what, yn, y, nout, RTOL, AFRAC);
        swap01_ld(dyc, dy, N, OC, s.OH * s.OW, s.ldo, (size_t)OC * s.OH * s.OW);
        conv2d_backward(dxc, dw, bias ? db : NULL, work, dyc, xc, w, &s);
        swap01_ld(dxn, dxc, C, N, H * W, (size_t)C * H * W, s.ldi);
        what[strlen(what) - 1] = 0;
        NNFX_CLOSE(nnfx_key(what, "dx"), dxn, nnfx_f(fx, nnfx_key(p, "dx"), nin), nin, RTOL, AFRAC);
        sub_one(dw, nw);
        NNFX_CLOSE(nnfx_key(what, "dw (+=)"), dw, nnfx_f(fx, nnfx_key(p, "dw"), nw), nw, RTOL, AFRAC);
        if (bias) {
            sub_one(db, OC);
            NNFX_CLOSE(nnfx_key(what, "db (+=)"), db, nnfx_f(fx, nnfx_key(p, "db"), OC), OC, RTOL, AFRAC);
        }
        free(xc), free(yc), free(yn), free(dyc), free(dxc), free(dxn), free(dw), free(db), free(work);
    }
    conv2d_set_chunk_floats(48 * 1024);
    conv2d_set_direct(1);
#ifdef HAVE_OPENMP
    omp_set_num_threads(omp_get_num_procs());
#endif
}

static void test_conv_bad_shape(void) {
    Conv2dShape s;
    CHECK(conv2d_shape(&s, 1, 1, 2, 2, 1, 5, 5, 1, 0) < 0, "kernel larger than input rejected");
    CHECK(conv2d_shape(&s, 1, 1, 4, 4, 1, 3, 3, 0, 0) < 0, "stride 0 rejected");
    CHECK(conv2d_shape(&s, 0, 1, 4, 4, 1, 3, 3, 1, 0) < 0, "empty batch rejected");
}

static void test_bn(const NnFixture *fx) {
    const int *sh = nnfx_i(fx, "bn.shape", 4);
    int N = sh[0], C = sh[1], HW = sh[2] * sh[3], M = N * HW;
    size_t n = (size_t)C * M;
    const float *x = nnfx_f(fx, "bn.x", n), *g = nnfx_f(fx, "bn.gamma", C), *b = nnfx_f(fx, "bn.beta", C);
    float *xc = falloc(n, 0), *yc = falloc(n, 0), *yn = falloc(n, 0), *dyc = falloc(n, 0), *dxc = falloc(n, 9);
    float *dxn = falloc(n, 0), *rc = falloc(n, 0), *drc = falloc(n, 9), *drn = falloc(n, 0);
    float mean[8], rstd[8], rm[8], rv[8], dg[8], dbt[8];
    swap01(xc, x, N, C, HW);
    for (int fused = 0; fused < 2; fused++) {
        const char *p = fused ? "bnf." : "bn.";
        const float *r = NULL;
        if (fused) {
            swap01(rc, nnfx_f(fx, "bnf.r", n), N, C, HW);
            r = rc;
        }
        memcpy(rm, nnfx_f(fx, "bn.rm0", C), C * sizeof(float));
        memcpy(rv, nnfx_f(fx, "bn.rv0", C), C * sizeof(float));
        batchnorm_forward_train(yc, mean, rstd, rm, rv, xc, g, b, r, fused, C, M, (size_t)M);
        swap01(yn, yc, C, N, HW);
        NNFX_CLOSE(fused ? "bn+res+relu train y" : "bn train y", yn, nnfx_f(fx, nnfx_key(p, "y"), n), n, RTOL, AFRAC);
        NNFX_CLOSE("bn running_mean", rm, nnfx_f(fx, "bn.rm", C), C, RTOL, AFRAC);
        NNFX_CLOSE("bn running_var (unbiased)", rv, nnfx_f(fx, "bn.rv", C), C, RTOL, AFRAC);
        for (int c = 0; c < C; c++) dg[c] = dbt[c] = 1.0f;
        swap01(dyc, nnfx_f(fx, nnfx_key(p, "dy"), n), N, C, HW);
        batchnorm_backward(dxc, fused ? drc : NULL, dg, dbt, dyc, fused ? yc : NULL, xc, mean, rstd, g, C, M, (size_t)M);
        swap01(dxn, dxc, C, N, HW);
        NNFX_CLOSE(fused ? "bn+res+relu dx" : "bn dx", dxn, nnfx_f(fx, nnfx_key(p, "dx"), n), n, RTOL, AFRAC);
        sub_one(dg, C);
        sub_one(dbt, C);
        NNFX_CLOSE("bn dgamma (+=)", dg, nnfx_f(fx, nnfx_key(p, "dgamma"), C), C, RTOL, AFRAC);
        NNFX_CLOSE("bn dbeta (+=)", dbt, nnfx_f(fx, nnfx_key(p, "dbeta"), C), C, RTOL, AFRAC);
        if (fused) {
            swap01(drn, drc, C, N, HW);
            NNFX_CLOSE("bn+res+relu dres", drn, nnfx_f(fx, "bnf.dr", n), n, RTOL, AFRAC);
            /* in-place: dres aliases dout, dinp separate (how the ResNet uses it) */
            float *dxc2 = falloc(n, 5);
            for (int c = 0; c < C; c++) dg[c] = dbt[c] = 0.0f;
            batchnorm_backward(dxc2, dyc, dg, dbt, dyc, yc, xc, mean, rstd, g, C, M, (size_t)M);
            CHECK(memcmp(dxc2, dxc, n * sizeof(float)) == 0 && memcmp(dyc, drc, n * sizeof(float)) == 0,
                  "bn backward with dres == dout gives identical results");
            free(dxc2);
        }
        batchnorm_forward_eval(yc, xc, g, b, rm, rv, r, fused, C, M, (size_t)M);
        swap01(yn, yc, C, N, HW);
        NNFX_CLOSE(fused ? "bn+res+relu eval y" : "bn eval y", yn, nnfx_f(fx, nnfx_key(p, "yeval"), n), n, RTOL,
                   AFRAC);
    }
    /* data with mean 1000 and std 0.5 */
    swap01(xc, nnfx_f(fx, "bnbig.x", n), N, C, HW);
    memcpy(rm, nnfx_f(fx, "bn.rm0", C), C * sizeof(float));
    memcpy(rv, nnfx_f(fx, "bn.rv0", C), C * sizeof(float));
    batchnorm_forward_train(yc, mean, rstd, rm, rv, xc, g, b, NULL, 0, C, M, (size_t)M);
    swap01(yn, yc, C, N, HW);
    /* y = (x - mean)*rstd: x is only known to float precision near 1000
     * (ulp 6e-5, i.e. 1.2e-4 std), so y carries ~2e-4 absolute error */
    NNFX_CLOSE("bn train y, mean 1000 std 0.5", yn, nnfx_f(fx, "bnbig.y", n), n, 1e-3f, 0.5f);
    NNFX_CLOSE("bn running_var, mean 1000", rv, nnfx_f(fx, "bnbig.rv", C), C, RTOL, AFRAC);
    NNFX_CLOSE("bn running_mean, mean 1000", rm, nnfx_f(fx, "bnbig.rm", C), C, RTOL, AFRAC);
    free(xc), free(yc), free(yn), free(dyc), free(dxc), free(dxn), free(rc), free(drc), free(drn);
}

static void test_relu(const NnFixture *fx) {
    size_t n = nnfx_need(fx, "relu.x", 0, 0)->numel;
    float *y = falloc(n, 0), *dx = falloc(n, 3);
    relu_forward(y, nnfx_f(fx, "relu.x", n), n);
    NNFX_CLOSE("relu y", y, nnfx_f(fx, "relu.y", n), n, 0, 0);
    relu_backward(dx, nnfx_f(fx, "relu.dy", n), y, n);
    NNFX_CLOSE("relu dx", dx, nnfx_f(fx, "relu.dx", n), n, 0, 0);
    /* add: out = a + b, exact */
    float *s = falloc(n, 0);
    add_forward(s, nnfx_f(fx, "relu.x", n), nnfx_f(fx, "relu.dy", n), n);
    int ok = 1;
    for (size_t i = 0; i < n; i++) ok &= s[i] == nnfx_f(fx, "relu.x", n)[i] + nnfx_f(fx, "relu.dy", n)[i];
    add_inplace(s, y, n);
    for (size_t i = 0; i < n; i++) ok &= s[i] == (nnfx_f(fx, "relu.x", n)[i] + nnfx_f(fx, "relu.dy", n)[i]) + y[i];
    CHECK(ok, "add_forward / add_inplace exact");
    free(y), free(dx), free(s);
}

static void test_pools(const NnFixture *fx) {
    int count = nnfx_i(fx, "maxpool.count", 1)[0];
    for (int i = 0; i < count; i++) {
        char p[32], what[64];
        snprintf(p, sizeof p, "maxpool%d.", i);
        const int *sh = nnfx_i(fx, nnfx_key(p, "shape"), 7);
        int N = sh[0], C = sh[1], H = sh[2], W = sh[3], K = sh[4], st = sh[5], pad = sh[6];
        int OH = maxpool2d_out_size(H, K, st, pad), OW = maxpool2d_out_size(W, K, st, pad);
        size_t nin = (size_t)N * C * H * W, nout = (size_t)N * C * OH * OW;
        /* planes are independent: run directly on NCHW (P = N*C) */
        float *y = falloc(nout, 0), *dx = falloc(nin, 4);
        int *arg = mallocCheck(nout * sizeof(int));
        maxpool2d_forward(y, arg, nnfx_f(fx, nnfx_key(p, "x"), nin), N * C, H, W, K, st, pad);
        snprintf(what, sizeof what, "maxpool K%d s%d p%d y", K, st, pad);
        NNFX_CLOSE(what, y, nnfx_f(fx, nnfx_key(p, "y"), nout), nout, 0, 0);
        maxpool2d_backward(dx, nnfx_f(fx, nnfx_key(p, "dy"), nout), arg, N * C, H, W, K, st, pad);
        what[strlen(what) - 1] = 0;
        NNFX_CLOSE(nnfx_key(what, "dx"), dx, nnfx_f(fx, nnfx_key(p, "dx"), nin), nin, RTOL, AFRAC);
        free(y), free(dx), free(arg);
    }
    const int *sh = nnfx_i(fx, "avgpool.shape", 4);
    int N = sh[0], C = sh[1], HW = sh[2] * sh[3];
    size_t nin = (size_t)N * C * HW;
    float *xc = falloc(nin, 0), *y = falloc((size_t)N * C, 0), *dxc = falloc(nin, 8), *dxn = falloc(nin, 0);
    swap01(xc, nnfx_f(fx, "avgpool.x", nin), N, C, HW);
    avgpool_global_forward(y, xc, N, C, HW, (size_t)N * HW);
    NNFX_CLOSE("avgpool y", y, nnfx_f(fx, "avgpool.y", (size_t)N * C), (size_t)N * C, RTOL, AFRAC);
    avgpool_global_backward(dxc, nnfx_f(fx, "avgpool.dy", (size_t)N * C), N, C, HW, (size_t)N * HW);
    swap01(dxn, dxc, C, N, HW);
    NNFX_CLOSE("avgpool dx", dxn, nnfx_f(fx, "avgpool.dx", nin), nin, RTOL, AFRAC);
    free(xc), free(y), free(dxc), free(dxn);
}

static void test_linear(const NnFixture *fx) {
    const int *sh = nnfx_i(fx, "linear.shape", 3);
    int N = sh[0], IN = sh[1], OUT = sh[2];
    const float *x = nnfx_f(fx, "linear.x", (size_t)N * IN), *w = nnfx_f(fx, "linear.w", (size_t)OUT * IN);
    float *y = falloc((size_t)N * OUT, 0), *dx = falloc((size_t)N * IN, 6), *dw = falloc((size_t)OUT * IN, 1.0f);
    float *db = falloc(OUT, 1.0f);
    linear_forward(y, x, w, nnfx_f(fx, "linear.b", OUT), N, IN, OUT);
    NNFX_CLOSE("linear y", y, nnfx_f(fx, "linear.y", (size_t)N * OUT), (size_t)N * OUT, RTOL, AFRAC);
    linear_backward(dx, dw, db, nnfx_f(fx, "linear.dy", (size_t)N * OUT), x, w, N, IN, OUT);
    NNFX_CLOSE("linear dx", dx, nnfx_f(fx, "linear.dx", (size_t)N * IN), (size_t)N * IN, RTOL, AFRAC);
    sub_one(dw, (size_t)OUT * IN);
    sub_one(db, OUT);
    NNFX_CLOSE("linear dw (+=)", dw, nnfx_f(fx, "linear.dw", (size_t)OUT * IN), (size_t)OUT * IN, RTOL, AFRAC);
    NNFX_CLOSE("linear db (+=)", db, nnfx_f(fx, "linear.db", OUT), OUT, RTOL, AFRAC);
    /* no bias, no dinp */
    float *y2 = falloc((size_t)N * OUT, 0);
    linear_forward(y2, x, w, NULL, N, IN, OUT);
    for (int i = 0; i < N * OUT; i++) y2[i] += nnfx_f(fx, "linear.b", OUT)[i % OUT];
    NNFX_CLOSE("linear y (no bias) + b", y2, nnfx_f(fx, "linear.y", (size_t)N * OUT), (size_t)N * OUT, RTOL, AFRAC);
    free(y), free(dx), free(dw), free(db), free(y2);
}

static void test_ce(const NnFixture *fx) {
    const int *sh = nnfx_i(fx, "ce.shape", 2);
    int N = sh[0], V = sh[1];
    float *probs = falloc((size_t)N * V, 0), *dz = falloc((size_t)N * V, 2);
    long correct = -1;
    float loss = softmax_ce_forward(probs, &correct, nnfx_f(fx, "ce.z", (size_t)N * V), nnfx_i(fx, "ce.t", N), N, V);
    NNFX_CLOSE("ce loss", &loss, nnfx_f(fx, "ce.loss", 1), 1, RTOL, 0);
    NNFX_CLOSE("ce probs", probs, nnfx_f(fx, "ce.probs", (size_t)N * V), (size_t)N * V, RTOL, AFRAC);
    CHECK(correct == nnfx_i(fx, "ce.correct", 1)[0], "ce correct %ld vs %d", correct, nnfx_i(fx, "ce.correct", 1)[0]);
    softmax_ce_backward(dz, probs, nnfx_i(fx, "ce.t", N), 1.0f / N, N, V);
    NNFX_CLOSE("ce dlogits", dz, nnfx_f(fx, "ce.dz", (size_t)N * V), (size_t)N * V, RTOL, AFRAC);
    /* large logits stay finite */
    float big[4] = {1000.0f, -1000.0f, 999.0f, 0.0f}, pb[4];
    int tb = 2;
    float lb = softmax_ce_forward(pb, NULL, big, &tb, 1, 4);
    CHECK(isfinite(lb) && fabsf(lb - 1.3132616f) < 1e-5f, "ce with logits 1000: loss %g (want log(1+e^-1)+1)", lb);
    free(probs), free(dz);
}

int main(void) {
    NnFixture fx = nnfx_load("tests/fixtures/nn_layers.bin");
    int maxt = gc_num_threads();
    printf("conv2d, %d thread(s):\n", maxt);
    test_conv(&fx, maxt, 48 * 1024, 1, 0);
    printf("conv2d, %d thread(s), im2col + sgemm for every shape:\n", maxt);
    test_conv(&fx, maxt, 48 * 1024, 0, 0);
    printf("conv2d, 1 thread, 1-row chunks:\n");
    test_conv(&fx, 1, 1, 1, 0);
    printf("conv2d, %d thread(s), 1-row chunks, im2col, padded channel rows:\n", maxt > 1 ? maxt : 3);
    test_conv(&fx, maxt > 1 ? maxt : 3, 1, 0, 1);
    printf("conv2d, 3 threads (more than the batch of some shapes), padded channel rows:\n");
    test_conv(&fx, 3, 48 * 1024, 1, 3);
    test_conv_bad_shape();
    printf("batchnorm:\n");
    test_bn(&fx);
    printf("relu / add:\n");
    test_relu(&fx);
    printf("pools:\n");
    test_pools(&fx);
    printf("linear:\n");
    test_linear(&fx);
    printf("softmax cross-entropy:\n");
    test_ce(&fx);
    nnfx_free(&fx);
    TEST_END();
}
