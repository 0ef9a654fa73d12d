/* GPU parity of every image op in nn/cuda_ops.h against its CPU twin, forward
 * and backward, on random inputs of several shapes. The CPU ops run in their
 * CNHW layout; GPU results (NCHW) are converted with the CPU swap01 and compared
 * in the CPU's layout. Each check prints max|diff|, max relative difference and
 * how many elements are bit-identical.
 *
 * Tolerances (|gpu - cpu| <= rtol*|cpu| + afrac*max|cpu|), and why:
 *  - ReLU, add, layout swap, pooling, softmax backward: EXACT. The kernels run
 *    the CPU's expressions in the CPU's order with IEEE-rounded operations
 *    (__fadd_rn/__fmul_rn: nvcc may not contract them into FMAs).
 *  - softmax forward: rtol 1e-6 (probabilities) / 1e-6 (loss): CUDA expf is
 *    within 2 ulp, glibc's within 1; the sums are in double on both sides.
 *  - convolutions (cuDNN): rtol 1e-4, afrac 1e-5 forward; 1e-4 / 1e-4 for the
 *    gradients: float sums of C*K*K (forward, data gradient) or N*OH*OW (weight
 *    gradient) products in another order than the CPU's im2col+sgemm; ~1e-6 is
 *    typical, the rest is headroom for long sums. afrac covers elements that
 *    cancel to ~0.
 *  - batch norm (cuDNN): statistics in float on the GPU against double on the
 *    CPU: forward rtol 1e-4, afrac 1e-5; mean/rstd/running stats 1e-5 relative
 *    with afrac 1e-5; backward rtol 1e-4, afrac 1e-4 (dx is a difference of
 *    three terms of similar size).
 *  - linear (cuBLAS sgemm): rtol 1e-5, afrac 1e-5 (sums of IN or N products);
 *    db exact (same order as the CPU).
 *  - ResNet option A shortcut (nn/resnet.c keeps its CPU twin static): EXACT
 *    against the plain loops of the definition here.
 * Gradient contracts: parameter gradients are pre-filled with 0.5 and must
 * ACCUMULATE; input gradients are pre-filled with garbage and must be OVERWRITTEN. */
#include "tests/test.h"
#include "tests/cuda/test_nn_cuda.h"

#include "nn/activation.h"
#include "nn/batchnorm.h"
#include "nn/conv2d.h"
#include "nn/layout.h"
#include "nn/linear.h"
#include "nn/pool.h"
#include "nn/softmax_ce.h"

#ifdef HAVE_CUDA

/* NCHW [N, C, HW] -> CNHW [C, N, HW] and back (host) */
static float *to_cnhw(const float *x, int N, int C, int HW) {
    float *y = mallocCheck((size_t)N * C * HW * sizeof(float) + 1);
    swap01(y, x, N, C, HW);
    return y;
}
static float *to_nchw(const float *x, int N, int C, int HW) {
    float *y = mallocCheck((size_t)N * C * HW * sizeof(float) + 1);
    swap01(y, x, C, N, HW);
    return y;
}

/* ------------------------------------------------------------ elementwise ---- */

static void test_elementwise(Rng *r) {
    printf("elementwise (relu, add, add_inplace): exact\n");
    const size_t sizes[] = {1, 7, 1000, 100003};
    for (int k = 0; k < 4; k++) {
        size_t n = sizes[k];
        float *a = rand_normal(r, n, 1.0f), *b = rand_normal(r, n, 2.0f), *g = rand_normal(r, n, 1.0f);
        if (n > 3) a[1] = 0.0f, a[2] = -0.0f; /* the ReLU boundary */
        float *da = dev_upload(a, n), *db = dev_upload(b, n), *dg = dev_upload(g, n), *dout = dev_fill(n, 7.0f);
        float *ref = mallocCheck(n * sizeof(float)), *ref2 = mallocCheck(n * sizeof(float));
        char what[64];

        relu_forward(ref, a, n);
        relu_forward_cuda(dout, da, n);
        float *got = dev_download(dout, n);
        snprintf(what, sizeof what, "relu forward n=%zu", n);
        same_floats(what, got, ref, n);
        free(got);

        relu_backward(ref2, g, ref, n); /* dinp = dout * [out > 0] */
        float *dgi = dev_fill(n, 7.0f);
        relu_backward_cuda(dgi, dg, dout, n);
        got = dev_download(dgi, n);
        snprintf(what, sizeof what, "relu backward n=%zu", n);
        same_floats(what, got, ref2, n);
        free(got);
        /* in place: dinp == dout */
        relu_backward_cuda(dg, dg, dout, n);
        got = dev_download(dg, n);
        snprintf(what, sizeof what, "relu backward in place n=%zu", n);
        same_floats(what, got, ref2, n);
        free(got);

        add_forward(ref, a, b, n);
        add_forward_cuda(dout, da, db, n);
        got = dev_download(dout, n);
        snprintf(what, sizeof what, "add forward n=%zu", n);
        same_floats(what, got, ref, n);
        free(got);

        memcpy(ref2, a, n * sizeof(float));
        add_inplace(ref2, b, n);
        add_inplace_cuda(da, db, n);
        got = dev_download(da, n);
        snprintf(what, sizeof what, "add_inplace n=%zu", n);
        same_floats(what, got, ref2, n);
        free(got);

        cudaCheck(cudaFree(da)), cudaCheck(cudaFree(db)), cudaCheck(cudaFree(dg)), cudaCheck(cudaFree(dout));
        cudaCheck(cudaFree(dgi));
        free(a), free(b), free(g), free(ref), free(ref2);
    }
    /* n = 0 is a no-op */
    relu_forward_cuda(NULL, NULL, 0);
    add_inplace_cuda(NULL, NULL, 0);
    cudaCheck(cudaDeviceSynchronize());
    CHECK(1, "n = 0 launches nothing");
}

static void test_swap01(Rng *r) {
    printf("swap01: exact\n");
    const int shapes[][3] = {{1, 1, 1}, {2, 3, 5}, {128, 3, 1024}, {7, 16, 64}, {3, 5, 1}};
    for (int k = 0; k < 5; k++) {
        int A = shapes[k][0], B = shapes[k][1], S = shapes[k][2];
        size_t n = (size_t)A * B * S;
        float *x = rand_normal(r, n, 1.0f), *ref = mallocCheck(n * sizeof(float));
        swap01(ref, x, A, B, S);
        float *dx = dev_upload(x, n), *dy = dev_fill(n, 9.0f), *dz = dev_fill(n, 9.0f);
        swap01_cuda(dy, dx, A, B, S);
        float *got = dev_download(dy, n);
        char what[64];
        snprintf(what, sizeof what, "swap01 %dx%dx%d", A, B, S);
        same_floats(what, got, ref, n);
        swap01_cuda(dz, dy, B, A, S); /* back */
        float *back = dev_download(dz, n);
        snprintf(what, sizeof what, "swap01 round trip %dx%dx%d", A, B, S);
        same_floats(what, back, x, n);
        free(x), free(ref), free(got), free(back);
        cudaCheck(cudaFree(dx)), cudaCheck(cudaFree(dy)), cudaCheck(cudaFree(dz));
    }
}

/* --------------------------------------------------------------- pooling ---- */

static void test_avgpool(Rng *r) {
    printf("global average pooling: exact\n");
    const int shapes[][3] = {{2, 3, 1}, {4, 16, 64}, {128, 64, 64}, {3, 2048, 49}};
    for (int k = 0; k < 4; k++) {
        int N = shapes[k][0], C = shapes[k][1], HW = shapes[k][2];
        size_t n = (size_t)N * C * HW, nc = (size_t)N * C;
        float *x = rand_normal(r, n, 1.0f), *xc = to_cnhw(x, N, C, HW);
        float *ref = mallocCheck(nc * sizeof(float));
        avgpool_global_forward(ref, xc, N, C, HW, (size_t)N * HW);
        float *dx = dev_upload(x, n), *dout = dev_fill(nc, 3.0f);
        avgpool_global_forward_cuda(dout, dx, N, C, HW);
        float *got = dev_download(dout, nc);
        char what[80];
        snprintf(what, sizeof what, "avgpool forward N=%d C=%d HW=%d", N, C, HW);
        same_floats(what, got, ref, nc);

        float *g = rand_normal(r, nc, 1.0f), *refd = mallocCheck(n * sizeof(float));
        avgpool_global_backward(refd, g, N, C, HW, (size_t)N * HW); /* CNHW, dense */
        float *dg = dev_upload(g, nc), *ddx = dev_fill(n, 5.0f);
        avgpool_global_backward_cuda(ddx, dg, N, C, HW);
        float *gotd = dev_download(ddx, n), *gotc = to_cnhw(gotd, N, C, HW);
        snprintf(what, sizeof what, "avgpool backward N=%d C=%d HW=%d", N, C, HW);
        same_floats(what, gotc, refd, n);
        free(x), free(xc), free(ref), free(got), free(g), free(refd), free(gotd), free(gotc);
        cudaCheck(cudaFree(dx)), cudaCheck(cudaFree(dout)), cudaCheck(cudaFree(dg)), cudaCheck(cudaFree(ddx));
    }
}

static void test_maxpool(Rng *r) {
    printf("max pooling: exact (values on a coarse grid, so windows have ties)\n");
    /* P, H, W, K, stride, pad */
    const int shapes[][6] = {{6, 8, 8, 2, 2, 0},   {5, 9, 7, 2, 2, 0},  {4, 12, 12, 3, 2, 1},
                             {3, 11, 13, 3, 2, 1}, {2, 10, 10, 3, 1, 1}, {64, 112, 112, 3, 2, 1},
                             {3, 5, 5, 5, 1, 2},   {2, 24, 24, 2, 2, 0}};
    for (int k = 0; k < 8; k++) {
        int P = shapes[k][0], H = shapes[k][1], W = shapes[k][2], K = shapes[k][3], st = shapes[k][4],
            pad = shapes[k][5];
        int OH = maxpool2d_out_size(H, K, st, pad), OW = maxpool2d_out_size(W, K, st, pad);
        size_t n = (size_t)P * H * W, no = (size_t)P * OH * OW;
        float *x = mallocCheck(n * sizeof(float));
        for (size_t i = 0; i < n; i++) x[i] = (float)((int)rng_below(r, 9) - 4); /* ties */
        float *ref = mallocCheck(no * sizeof(float));
        int *refa = mallocCheck(no * sizeof(int));
        maxpool2d_forward(ref, refa, x, P, H, W, K, st, pad);
        float *dx = dev_upload(x, n), *dout = dev_fill(no, 1e3f);
        int *darg = NULL;
        cudaCheck(cudaMalloc((void **)&darg, no * sizeof(int)));
        maxpool2d_forward_cuda(dout, darg, dx, P, H, W, K, st, pad);
        float *got = dev_download(dout, no);
        int *gota = dev_download_int(darg, no);
        char what[96];
        snprintf(what, sizeof what, "maxpool fwd P=%d %dx%d K=%d s=%d p=%d", P, H, W, K, st, pad);
        same_floats(what, got, ref, no);
        CHECK(memcmp(gota, refa, no * sizeof(int)) == 0, "%s: argmax identical", what);

        float *g = rand_normal(r, no, 1.0f), *refd = mallocCheck(n * sizeof(float));
        maxpool2d_backward(refd, g, refa, P, H, W, K, st, pad);
        float *dg = dev_upload(g, no), *ddx = dev_fill(n, 5.0f);
        maxpool2d_backward_cuda(ddx, dg, darg, P, H, W, K, st, pad);
        float *gotd = dev_download(ddx, n);
        snprintf(what, sizeof what, "maxpool bwd P=%d %dx%d K=%d s=%d p=%d", P, H, W, K, st, pad);
        same_floats(what, gotd, refd, n);
        free(x), free(ref), free(refa), free(got), free(gota), free(g), free(refd), free(gotd);
        cudaCheck(cudaFree(dx)), cudaCheck(cudaFree(dout)), cudaCheck(cudaFree(darg)), cudaCheck(cudaFree(dg));
        cudaCheck(cudaFree(ddx));
    }
    /* NaN propagates and wins its window, as the CPU */
    float x[16];
    for (int i = 0; i < 16; i++) x[i] = (float)i;
    x[5] = NAN;
    float ref[4], got[4];
    int refa[4], gota[4];
    maxpool2d_forward(ref, refa, x, 1, 4, 4, 2, 2, 0);
    float *dx = dev_upload(x, 16), *dout = dev_fill(4, 0.0f);
    int *darg = NULL;
    cudaCheck(cudaMalloc((void **)&darg, 4 * sizeof(int)));
    maxpool2d_forward_cuda(dout, darg, dx, 1, 4, 4, 2, 2, 0);
    cudaCheck(cudaMemcpy(got, dout, sizeof got, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(gota, darg, sizeof gota, cudaMemcpyDeviceToHost));
    CHECK(isnan(got[0]) && isnan(ref[0]) && gota[0] == refa[0] && got[3] == ref[3] && gota[3] == refa[3],
          "maxpool NaN: got %g (arg %d), CPU %g (arg %d)", got[0], gota[0], ref[0], refa[0]);
    cudaCheck(cudaFree(dx)), cudaCheck(cudaFree(dout)), cudaCheck(cudaFree(darg));
}

/* ----------------------------------------------------------- convolution ---- */

typedef struct {
    int N, C, H, W, OC, K, stride, pad, bias;
} ConvCase;

/* tolerances of test_conv: rtol, afrac of the forward, afrac of the gradients */
typedef struct {
    float rtol, afrac_fwd, afrac_grad;
} ConvTol;
#define CONV_TOL_STRICT {1e-4f, 1e-5f, 1e-4f}
static ConvTol conv_tol = CONV_TOL_STRICT;

static void test_conv(Rng *r) {
    printf("conv2d (cuDNN): forward rtol %g afrac %g, gradients rtol %g afrac %g\n", conv_tol.rtol,
           conv_tol.afrac_fwd, conv_tol.rtol, conv_tol.afrac_grad);
    const ConvCase cases[] = {
        {2, 3, 8, 8, 4, 3, 1, 1, 0},     {3, 5, 9, 7, 6, 3, 2, 1, 1},    {2, 4, 8, 8, 8, 1, 2, 0, 0},
        {4, 1, 28, 28, 20, 5, 1, 0, 1},  {4, 20, 12, 12, 50, 5, 1, 0, 1}, {2, 16, 16, 16, 32, 3, 2, 1, 0},
        {2, 3, 23, 19, 8, 7, 2, 3, 0},   {8, 16, 32, 32, 16, 3, 1, 1, 0}, {2, 64, 14, 14, 256, 1, 1, 0, 0},
        {1, 2, 5, 5, 3, 5, 1, 2, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const ConvCase *c = &cases[k];
        Conv2dShape s;
        int rc = conv2d_shape(&s, c->N, c->C, c->H, c->W, c->OC, c->K, c->K, c->stride, c->pad);
        CHECK(rc == 0, "conv2d_shape");
        if (rc) continue;
        size_t nx = (size_t)c->N * c->C * c->H * c->W, ny = (size_t)c->N * c->OC * s.OH * s.OW;
        size_t nw = (size_t)c->OC * c->C * c->K * c->K;
        float *x = rand_normal(r, nx, 1.0f), *w = rand_normal(r, nw, 1.0f / sqrtf((float)(c->C * c->K * c->K)));
        float *b = c->bias ? rand_normal(r, c->OC, 0.5f) : NULL;
        float *g = rand_normal(r, ny, 1.0f);
        /* CPU in CNHW */
        float *xc = to_cnhw(x, c->N, c->C, c->H * c->W), *gc = to_cnhw(g, c->N, c->OC, s.OH * s.OW);
        float *work = mallocCheck((conv2d_work_floats(&s) + 1) * sizeof(float));
        float *yc = mallocCheck(ny * sizeof(float));
        conv2d_forward(yc, work, xc, w, b, &s);
        float *dxc = mallocCheck(nx * sizeof(float)), *dw = mallocCheck(nw * sizeof(float));
        float *dbias = mallocCheck((size_t)c->OC * sizeof(float));
        for (size_t i = 0; i < nw; i++) dw[i] = 0.5f;
        for (int i = 0; i < c->OC; i++) dbias[i] = 0.5f;
        conv2d_backward(dxc, dw, c->bias ? dbias : NULL, work, gc, xc, w, &s);
        /* GPU in NCHW */
        float *d_x = dev_upload(x, nx), *d_w = dev_upload(w, nw), *d_b = b ? dev_upload(b, c->OC) : NULL;
        float *d_y = dev_fill(ny, 1e3f), *d_g = dev_upload(g, ny), *d_dx = dev_fill(nx, 1e3f);
        float *d_dw = dev_fill(nw, 0.5f), *d_db = dev_fill(c->OC, 0.5f);
        conv2d_forward_cuda(d_y, NULL, d_x, d_w, d_b, &s);
        conv2d_backward_cuda(d_dx, d_dw, c->bias ? d_db : NULL, NULL, d_g, d_x, d_w, &s);
        float *y = dev_download(d_y, ny), *yg = to_cnhw(y, c->N, c->OC, s.OH * s.OW);
        float *dx = dev_download(d_dx, nx), *dxg = to_cnhw(dx, c->N, c->C, c->H * c->W);
        float *dwg = dev_download(d_dw, nw), *dbg = dev_download(d_db, c->OC);
        char what[128];
        snprintf(what, sizeof what, "conv N=%d C=%d %dx%d OC=%d K=%d s=%d p=%d%s fwd", c->N, c->C, c->H, c->W, c->OC,
                 c->K, c->stride, c->pad, c->bias ? " bias" : "");
        close_scaled(what, yg, yc, ny, conv_tol.rtol, conv_tol.afrac_fwd);
        snprintf(what, sizeof what, "  dinp");
        close_scaled(what, dxg, dxc, nx, conv_tol.rtol, conv_tol.afrac_grad);
        snprintf(what, sizeof what, "  dw (+= 0.5)");
        close_scaled(what, dwg, dw, nw, conv_tol.rtol, conv_tol.afrac_grad);
        if (c->bias) close_scaled("  db (+= 0.5)", dbg, dbias, c->OC, conv_tol.rtol, conv_tol.afrac_grad);
        else {
            int untouched = 1;
            for (int i = 0; i < c->OC; i++) untouched &= dbg[i] == 0.5f;
            CHECK(untouched, "db NULL: bias gradient buffer untouched");
        }
        /* second call: dw accumulates again; dinp = NULL skips the data gradient */
        cudaCheck(cudaMemset(d_dx, 0, nx * sizeof(float)));
        conv2d_backward_cuda(NULL, d_dw, NULL, NULL, d_g, d_x, d_w, &s);
        float *dw2 = dev_download(d_dw, nw), *dx2 = dev_download(d_dx, nx);
        for (size_t i = 0; i < nw; i++) dw[i] = 2.0f * (dw[i] - 0.5f) + 0.5f;
        close_scaled("  dw twice (accumulates)", dw2, dw, nw, conv_tol.rtol, conv_tol.afrac_grad);
        CHECK(max_abs(dx2, nx) == 0.0f, "dinp NULL: input gradient untouched");
        free(x), free(w), free(b), free(g), free(xc), free(gc), free(work), free(yc), free(dxc), free(dw);
        free(dbias), free(y), free(yg), free(dx), free(dxg), free(dwg), free(dbg), free(dw2), free(dx2);
        cudaCheck(cudaFree(d_x)), cudaCheck(cudaFree(d_w)), cudaCheck(cudaFree(d_b)), cudaCheck(cudaFree(d_y));
        cudaCheck(cudaFree(d_g)), cudaCheck(cudaFree(d_dx)), cudaCheck(cudaFree(d_dw)), cudaCheck(cudaFree(d_db));
    }
}

/* The algorithms a fresh plan (after nn_cuda_release) chooses for one shape,
 * `rounds` times, with a forward and a backward pass each: under the heuristic
 * ranking always the same, since nothing is timed; under Find they may vary
 * (timing noise; the emulation models it), which is printed, not checked. The
 * forward output must be bit-identical whenever the algorithms are. */
static void test_conv_choice(Rng *r, NnConvSearch search, int rounds) {
    Conv2dShape s;
    CHECK(conv2d_shape(&s, 4, 16, 16, 16, 16, 3, 3, 1, 1) == 0, "conv2d_shape");
    size_t nx = (size_t)4 * 16 * 16 * 16, nw = (size_t)16 * 16 * 9;
    float *x = rand_normal(r, nx, 1.0f), *w = rand_normal(r, nw, 0.1f);
    nn_cuda_set_conv_search(search);
    int first[3] = {-1, -1, -1}, same = 1;
    float *y0 = NULL;
    for (int k = 0; k < rounds; k++) {
        nn_cuda_release();
        float *d_x = dev_upload(x, nx), *d_w = dev_upload(w, nw), *d_y = dev_fill(nx, 0.0f);
        float *d_dx = dev_fill(nx, 0.0f), *d_dw = dev_fill(nw, 0.0f);
        conv2d_forward_cuda(d_y, NULL, d_x, d_w, NULL, &s);
        conv2d_backward_cuda(d_dx, d_dw, NULL, NULL, d_y, d_x, d_w, &s);
        int a[3];
        CHECK(nn_cuda_conv_algos(&s, a) == 0 && a[0] >= 0 && a[1] >= 0 && a[2] >= 0,
              "the plan reports its three algorithms (%d %d %d)", a[0], a[1], a[2]);
        float *y = dev_download(d_y, nx);
        if (k == 0) {
            memcpy(first, a, sizeof first);
            y0 = y;
        } else {
            int eq = !memcmp(a, first, sizeof first);
            same &= eq;
            /* one check per plan, so the count does not follow Find's timing noise */
            CHECK(!eq || !memcmp(y, y0, nx * sizeof(float)), "same algorithms, bit-identical forward output");
            free(y);
        }
        cudaCheck(cudaFree(d_x)), cudaCheck(cudaFree(d_w)), cudaCheck(cudaFree(d_y));
        cudaCheck(cudaFree(d_dx)), cudaCheck(cudaFree(d_dw));
    }
    if (search == NN_CONV_HEURISTIC)
        CHECK(same, "heuristic ranking: the same algorithms in %d fresh plans (first %d %d %d)", rounds, first[0],
              first[1], first[2]);
    printf("conv algorithm choice (%s): %d fresh plans, %s (first: fwd %d, bwd-data %d, bwd-filter %d)\n",
           search == NN_CONV_HEURISTIC ? "heuristic" : "find", rounds,
           same ? "always the same" : "they differ", first[0], first[1], first[2]);
    nn_cuda_set_conv_search(NN_CONV_FIND);
    free(x), free(w), free(y0);
}

/* ------------------------------------------------------------ batch norm ---- */

typedef struct {
    int N, C, HW, res, relu;
} BnCase;

static void test_batchnorm(Rng *r) {
    printf("batch norm (cuDNN): forward rtol 1e-4 afrac 1e-5, statistics 1e-5, backward rtol 1e-4 afrac 1e-4\n");
    const BnCase cases[] = {{4, 3, 25, 0, 0},   {2, 16, 64, 0, 1},   {8, 5, 1, 1, 1},
                            {32, 16, 256, 1, 1}, {3, 64, 49, 1, 0},  {128, 16, 1024, 0, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const BnCase *c = &cases[k];
        int N = c->N, C = c->C, HW = c->HW, M = N * HW;
        size_t n = (size_t)N * C * HW;
        /* x with a per-channel offset and scale, so mean and variance matter */
        float *x = rand_normal(r, n, 1.0f);
        for (int nn = 0; nn < N; nn++)
            for (int cc = 0; cc < C; cc++)
                for (int i = 0; i < HW; i++) {
                    float *v = &x[((size_t)nn * C + cc) * HW + i];
                    *v = *v * (0.5f + 0.1f * (cc % 7)) + 0.3f * (cc % 5) - 0.6f;
                }
        float *gam = rand_normal(r, C, 0.3f), *bet = rand_normal(r, C, 0.3f);
        for (int i = 0; i < C; i++) gam[i] += 1.0f;
        float *res = c->res ? rand_normal(r, n, 1.0f) : NULL;
        float *rm = rand_normal(r, C, 0.1f), *rv = mallocCheck(C * sizeof(float));
        for (int i = 0; i < C; i++) rv[i] = 1.0f + 0.1f * (i % 3);
        float *g = rand_normal(r, n, 1.0f);

        /* CPU (CNHW) */
        float *xc = to_cnhw(x, N, C, HW), *resc = res ? to_cnhw(res, N, C, HW) : NULL, *gc = to_cnhw(g, N, C, HW);
        float *yc = mallocCheck(n * sizeof(float)), *mean = mallocCheck(C * sizeof(float));
        float *rstd = mallocCheck(C * sizeof(float));
        float *rm_c = copy_floats(rm, C), *rv_c = copy_floats(rv, C);
        batchnorm_forward_train(yc, mean, rstd, rm_c, rv_c, xc, gam, bet, resc, c->relu, C, M, (size_t)M);
        float *dxc = mallocCheck(n * sizeof(float)), *dresc = mallocCheck(n * sizeof(float));
        float *dgam = mallocCheck(C * sizeof(float)), *dbet = mallocCheck(C * sizeof(float));
        for (int i = 0; i < C; i++) dgam[i] = dbet[i] = 0.5f;
        batchnorm_backward(dxc, c->res ? dresc : NULL, dgam, dbet, gc, c->relu ? yc : NULL, xc, mean, rstd, gam, C,
                           M, (size_t)M);
        float *yec = mallocCheck(n * sizeof(float));
        batchnorm_forward_eval(yec, xc, gam, bet, rm_c, rv_c, resc, c->relu, C, M, (size_t)M);

        /* GPU (NCHW) */
        float *d_x = dev_upload(x, n), *d_gam = dev_upload(gam, C), *d_bet = dev_upload(bet, C);
        float *d_res = res ? dev_upload(res, n) : NULL, *d_rm = dev_upload(rm, C), *d_rv = dev_upload(rv, C);
        float *d_y = dev_fill(n, 1e3f), *d_mean = dev_fill(C, 1e3f), *d_rstd = dev_fill(C, 1e3f);
        float *d_g = dev_upload(g, n), *d_dx = dev_fill(n, 1e3f), *d_dres = dev_fill(n, 1e3f);
        float *d_dgam = dev_fill(C, 0.5f), *d_dbet = dev_fill(C, 0.5f), *d_ye = dev_fill(n, 1e3f);
        batchnorm_forward_train_cuda(d_y, d_mean, d_rstd, d_rm, d_rv, d_x, d_gam, d_bet, d_res, c->relu, N, C, HW);
        /* the backward gets the CPU's forward output for its ReLU mask: outputs within
         * rounding of 0 would otherwise flip the mask of single elements */
        float *yn = to_nchw(yc, N, C, HW), *d_yc = dev_upload(yn, n);
        free(yn);
        batchnorm_backward_cuda(d_dx, c->res ? d_dres : NULL, d_dgam, d_dbet, d_g, c->relu ? d_yc : NULL, d_x, d_mean,
                                d_rstd, d_gam, N, C, HW);
        batchnorm_forward_eval_cuda(d_ye, d_x, d_gam, d_bet, d_rm, d_rv, d_res, c->relu, N, C, HW);

        char what[128];
        snprintf(what, sizeof what, "bn N=%d C=%d HW=%d%s%s train fwd", N, C, HW, c->res ? " +res" : "",
                 c->relu ? " relu" : "");
        float *t = dev_download(d_y, n), *tc = to_cnhw(t, N, C, HW);
        close_scaled(what, tc, yc, n, 1e-4f, 1e-5f);
        free(t), free(tc);
        t = dev_download(d_mean, C);
        close_scaled("  saved mean", t, mean, C, 1e-5f, 1e-5f);
        free(t);
        t = dev_download(d_rstd, C);
        close_scaled("  saved rstd", t, rstd, C, 1e-5f, 1e-5f);
        free(t);
        t = dev_download(d_rm, C);
        close_scaled("  running mean", t, rm_c, C, 1e-5f, 1e-5f);
        free(t);
        t = dev_download(d_rv, C);
        close_scaled("  running var (unbiased)", t, rv_c, C, 1e-5f, 1e-5f);
        free(t);
        t = dev_download(d_dx, n), tc = to_cnhw(t, N, C, HW);
        close_scaled("  dinp", tc, dxc, n, 1e-4f, 1e-4f);
        free(t), free(tc);
        if (c->res) {
            t = dev_download(d_dres, n), tc = to_cnhw(t, N, C, HW);
            same_floats("  dres", tc, dresc, n);
            free(t), free(tc);
        }
        t = dev_download(d_dgam, C);
        close_scaled("  dgamma (+= 0.5)", t, dgam, C, 1e-4f, 1e-4f);
        free(t);
        t = dev_download(d_dbet, C);
        close_scaled("  dbeta (+= 0.5)", t, dbet, C, 1e-4f, 1e-4f);
        free(t);
        t = dev_download(d_ye, n), tc = to_cnhw(t, N, C, HW);
        close_scaled("  eval fwd (updated running stats)", tc, yec, n, 1e-4f, 1e-5f);
        free(t), free(tc);

        /* aliasing allowed by the contract: dinp == dout, and dres == dout (the ResNet block tail) */
        float *d_g2 = dev_upload(g, n);
        batchnorm_backward_cuda(d_g2, NULL, d_dgam, d_dbet, d_g2, c->relu ? d_yc : NULL, d_x, d_mean, d_rstd, d_gam,
                                N, C, HW);
        t = dev_download(d_g2, n), tc = to_cnhw(t, N, C, HW);
        close_scaled("  dinp aliasing dout", tc, dxc, n, 1e-4f, 1e-4f);
        free(t), free(tc);
        cudaCheck(cudaMemcpy(d_g2, g, n * sizeof(float), cudaMemcpyHostToDevice));
        batchnorm_backward_cuda(d_dx, d_g2, d_dgam, d_dbet, d_g2, c->relu ? d_yc : NULL, d_x, d_mean, d_rstd, d_gam,
                                N, C, HW);
        if (c->res) {
            t = dev_download(d_g2, n), tc = to_cnhw(t, N, C, HW);
            same_floats("  dres aliasing dout", tc, dresc, n);
            free(t), free(tc);
        }
        t = dev_download(d_dx, n), tc = to_cnhw(t, N, C, HW);
        close_scaled("  dinp with dres aliasing dout", tc, dxc, n, 1e-4f, 1e-4f);
        free(t), free(tc);
        /* out == inp in the training forward (running stats move again: compare only the output) */
        float *d_x2 = dev_upload(x, n);
        batchnorm_forward_train_cuda(d_x2, d_mean, d_rstd, d_rm, d_rv, d_x2, d_gam, d_bet, d_res, c->relu, N, C, HW);
        t = dev_download(d_x2, n), tc = to_cnhw(t, N, C, HW);
        close_scaled("  train fwd in place", tc, yc, n, 1e-4f, 1e-5f);
        free(t), free(tc);

        free(x), free(gam), free(bet), free(res), free(rm), free(rv), free(g), free(xc), free(resc), free(gc);
        free(yc), free(mean), free(rstd), free(rm_c), free(rv_c), free(dxc), free(dresc), free(dgam), free(dbet);
        free(yec);
        float *dev[] = {d_x, d_gam, d_bet, d_res, d_rm, d_rv, d_y, d_mean, d_rstd, d_g, d_dx, d_dres, d_dgam, d_dbet,
                        d_ye, d_g2, d_x2, d_yc};
        for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) cudaCheck(cudaFree(dev[i]));
    }
}

/* ------------------------------------------------------ option A shortcut ---- */

static void test_shortcut(Rng *r) {
    printf("ResNet option A shortcut (subsample + zero-padded channels): exact\n");
    /* N, Cin, Cout, H, W, stride */
    const int cases[][6] = {{2, 16, 32, 32, 32, 2}, {3, 5, 9, 7, 7, 2}, {2, 4, 4, 6, 6, 1}, {1, 32, 64, 9, 8, 2}};
    for (int k = 0; k < 4; k++) {
        int N = cases[k][0], Cin = cases[k][1], Cout = cases[k][2], H = cases[k][3], W = cases[k][4],
            st = cases[k][5];
        int OH = (H - 1) / st + 1, OW = (W - 1) / st + 1, lo = (Cout - Cin) / 2; /* a 3x3 pad-1 conv's output */
        size_t nx = (size_t)N * Cin * H * W, no = (size_t)N * Cout * OH * OW;
        float *x = rand_normal(r, nx, 1.0f), *g = rand_normal(r, no, 1.0f), *dx0 = rand_normal(r, nx, 1.0f);
        float *ref = mallocCheck(no * sizeof(float)), *refd = copy_floats(dx0, nx);
        for (int n = 0; n < N; n++)
            for (int c = 0; c < Cout; c++)
                for (int oh = 0; oh < OH; oh++)
                    for (int ow = 0; ow < OW; ow++) {
                        int ci = c - lo;
                        size_t o = (((size_t)n * Cout + c) * OH + oh) * OW + ow;
                        size_t i = (((size_t)n * Cin + ci) * H + (size_t)oh * st) * W + (size_t)ow * st;
                        ref[o] = (ci < 0 || ci >= Cin) ? 0.0f : x[i];
                        if (ci >= 0 && ci < Cin) refd[i] += g[o];
                    }
        float *d_x = dev_upload(x, nx), *d_o = dev_fill(no, 1e3f), *d_g = dev_upload(g, no), *d_dx = dev_upload(dx0, nx);
        resnet_shortcut_pad_forward_cuda(d_o, d_x, N, Cin, Cout, H, W, OH, OW, st);
        resnet_shortcut_pad_backward_cuda(d_dx, d_g, N, Cin, Cout, H, W, OH, OW, st);
        char what[96];
        snprintf(what, sizeof what, "shortcut A N=%d %d->%d %dx%d s=%d fwd", N, Cin, Cout, H, W, st);
        float *t = dev_download(d_o, no);
        same_floats(what, t, ref, no);
        free(t);
        t = dev_download(d_dx, nx);
        same_floats("  backward (accumulates)", t, refd, nx);
        free(t);
        free(x), free(g), free(dx0), free(ref), free(refd);
        cudaCheck(cudaFree(d_x)), cudaCheck(cudaFree(d_o)), cudaCheck(cudaFree(d_g)), cudaCheck(cudaFree(d_dx));
    }
}

/* ---------------------------------------------------------------- linear ---- */

static void test_linear(Rng *r) {
    printf("linear (cuBLAS): rtol 1e-5 afrac 1e-5; db exact\n");
    const int cases[][4] = {{4, 7, 3, 1}, {128, 64, 10, 1}, {5, 800, 500, 1}, {3, 2048, 1000, 0}, {1, 1, 1, 1}};
    for (int k = 0; k < 5; k++) {
        int N = cases[k][0], IN = cases[k][1], OUT = cases[k][2], bias = cases[k][3];
        size_t ni = (size_t)N * IN, no = (size_t)N * OUT, nw = (size_t)OUT * IN;
        float *x = rand_normal(r, ni, 1.0f), *w = rand_normal(r, nw, 1.0f / sqrtf((float)IN));
        float *b = bias ? rand_normal(r, OUT, 0.5f) : NULL, *g = rand_normal(r, no, 1.0f);
        float *y = mallocCheck(no * sizeof(float)), *dx = mallocCheck(ni * sizeof(float));
        float *dw = mallocCheck(nw * sizeof(float)), *db = mallocCheck(OUT * sizeof(float));
        for (size_t i = 0; i < nw; i++) dw[i] = 0.5f;
        for (int i = 0; i < OUT; i++) db[i] = 0.5f;
        linear_forward(y, x, w, b, N, IN, OUT);
        linear_backward(dx, dw, bias ? db : NULL, g, x, w, N, IN, OUT);
        float *d_x = dev_upload(x, ni), *d_w = dev_upload(w, nw), *d_b = b ? dev_upload(b, OUT) : NULL;
        float *d_g = dev_upload(g, no), *d_y = dev_fill(no, 1e3f), *d_dx = dev_fill(ni, 1e3f);
        float *d_dw = dev_fill(nw, 0.5f), *d_db = dev_fill(OUT, 0.5f);
        linear_forward_cuda(d_y, d_x, d_w, d_b, N, IN, OUT);
        linear_backward_cuda(d_dx, d_dw, bias ? d_db : NULL, d_g, d_x, d_w, N, IN, OUT);
        char what[96];
        snprintf(what, sizeof what, "linear N=%d IN=%d OUT=%d%s fwd", N, IN, OUT, bias ? " bias" : "");
        float *t = dev_download(d_y, no);
        close_scaled(what, t, y, no, 1e-5f, 1e-5f);
        free(t);
        t = dev_download(d_dx, ni);
        close_scaled("  dinp", t, dx, ni, 1e-5f, 1e-5f);
        free(t);
        t = dev_download(d_dw, nw);
        close_scaled("  dw (+= 0.5)", t, dw, nw, 1e-5f, 1e-5f);
        free(t);
        t = dev_download(d_db, OUT);
        if (bias) same_floats("  db (+= 0.5)", t, db, OUT);
        else {
            int untouched = 1;
            for (int i = 0; i < OUT; i++) untouched &= t[i] == 0.5f;
            CHECK(untouched, "db NULL: untouched");
        }
        free(t);
        /* dinp NULL: only dw accumulates again */
        cudaCheck(cudaMemset(d_dx, 0, ni * sizeof(float)));
        linear_backward_cuda(NULL, d_dw, NULL, d_g, d_x, d_w, N, IN, OUT);
        t = dev_download(d_dx, ni);
        CHECK(max_abs(t, ni) == 0.0f, "dinp NULL: untouched");
        free(t);
        t = dev_download(d_dw, nw);
        for (size_t i = 0; i < nw; i++) dw[i] = 2.0f * (dw[i] - 0.5f) + 0.5f;
        close_scaled("  dw twice (accumulates)", t, dw, nw, 1e-5f, 1e-5f);
        free(t);
        free(x), free(w), free(b), free(g), free(y), free(dx), free(dw), free(db);
        float *dev[] = {d_x, d_w, d_b, d_g, d_y, d_dx, d_dw, d_db};
        for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) cudaCheck(cudaFree(dev[i]));
    }
}

/* --------------------------------------------------------------- softmax ---- */

/* got and want with NaN in the same places (checked; the GPU's NaN bit
 * patterns are canonical, the CPU's are not), the rest compared close (exact = 0)
 * or bit for bit (exact = 1) */
static void compare_nan_aware(const char *what, const float *got, const float *want, size_t n, int exact) {
    size_t nan_differ = 0;
    float *g = mallocCheck(n * sizeof(float)), *w = mallocCheck(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        nan_differ += isnan(got[i]) != isnan(want[i]);
        g[i] = isnan(got[i]) ? 0.0f : got[i];
        w[i] = isnan(want[i]) ? 0.0f : want[i];
    }
    CHECK(nan_differ == 0, "%s: %zu elements NaN on one device only", what, nan_differ);
    if (exact) same_floats(what, g, w, n);
    else close_scaled(what, g, w, n, 1e-6f, 1e-7f);
    free(g), free(w);
}

static void test_softmax(Rng *r) {
    printf("softmax cross-entropy: forward rtol 1e-6, correct count equal, backward exact\n");
    /* V from 1 to a word model's vocabulary: one block per row, 32 to 256 threads */
    const int cases[][2] = {{16, 10}, {7, 1000}, {128, 10}, {1, 1}, {33, 3}, {9, 64}, {5, 257}, {20, 10000}, {3, 70001}};
    const int ncases = sizeof cases / sizeof cases[0];
    for (int k = 0; k <= ncases; k++) {
        /* the last case: rows whose max the CPU's sequential scan decides in special ways */
        int special = k == ncases;
        int N = special ? 6 : cases[k][0], V = special ? 300 : cases[k][1];
        size_t n = (size_t)N * V;
        float *x = rand_normal(r, n, 3.0f);
        int *y = mallocCheck(N * sizeof(int));
        for (int i = 0; i < N; i++) y[i] = (int)rng_below(r, (uint64_t)V);
        if (!special && N > 2 && V > 2) { /* a tie for the max: argmax goes to the lowest index */
            x[V + 1] = x[V + 2] = 50.0f;
            y[1] = 1;
        }
        if (!special && V > 300) { /* ties far apart (other threads): the lowest index wins */
            x[2 * V + 299] = x[2 * V + 7] = x[2 * V + V - 1] = 60.0f;
            y[2] = 7;
        }
        if (special) {
            x[0] = NAN, y[0] = 0; /* NaN first: the scan never moves, argmax 0 */
            x[V + 3] = NAN, x[V + 200] = 40.0f, y[1] = 200; /* NaN later: skipped */
            for (int v = 0; v < V; v++) x[2 * V + v] = (v % 2) ? 0.0f : -0.0f; /* all zero: argmax 0 */
            y[2] = 0;
            x[3 * V + 150] = INFINITY, y[3] = 150; /* +inf: argmax there, probabilities NaN */
            for (int v = 0; v < V; v++) x[4 * V + v] = -INFINITY; /* all -inf: argmax 0, NaN */
            y[4] = 1;
            x[5 * V + 100] = x[5 * V + 299] = x[5 * V + 33] = 1e30f, y[5] = 33; /* ties in other threads */
        }
        float *p = mallocCheck(n * sizeof(float)), *d = mallocCheck(n * sizeof(float));
        long correct = -1, gcorrect = -1;
        float loss = softmax_ce_forward(p, &correct, x, y, N, V);
        softmax_ce_backward(d, p, y, 1.0f / N, N, V);
        float *d_x = dev_upload(x, n), *d_p = dev_fill(n, 1e3f), *d_d = dev_fill(n, 1e3f);
        int *d_y = dev_upload_int(y, N);
        float gloss = softmax_ce_forward_cuda(d_p, &gcorrect, d_x, d_y, N, V);
        char what[96];
        snprintf(what, sizeof what, "softmax N=%d V=%d%s loss", N, V, special ? " (NaN, inf, ties)" : "");
        if (special) CHECK(isnan(gloss) && isnan(loss), "%s: GPU %g, CPU %g (both NaN)", what, gloss, loss);
        else close_scaled(what, &gloss, &loss, 1, 1e-6f, 0.0f);
        CHECK(gcorrect == correct, "correct: GPU %ld, CPU %ld", gcorrect, correct);
        if (special) CHECK(correct == 5, "special rows: CPU correct %ld, expected 5", correct);
        float *t = dev_download(d_p, n);
        compare_nan_aware("  probs", t, p, n, 0);
        free(t);
        /* backward from the CPU's probabilities: exact */
        float *d_pc = dev_upload(p, n);
        softmax_ce_backward_cuda(d_d, d_pc, d_y, 1.0f / N, N, V);
        t = dev_download(d_d, n);
        compare_nan_aware("  dlogits (from the same probs)", t, d, n, 1);
        free(t);
        softmax_ce_forward_cuda(d_p, NULL, d_x, d_y, N, V); /* correct may be NULL */
        free(x), free(y), free(p), free(d);
        cudaCheck(cudaFree(d_x)), cudaCheck(cudaFree(d_p)), cudaCheck(cudaFree(d_d)), cudaCheck(cudaFree(d_y));
        cudaCheck(cudaFree(d_pc));
    }
}

/* GCX_TEST_OPS=name,name... runs only those sections (default: all). The
 * sections without cuDNN need only a device, so they also run in a build
 * without cuDNN (and on tests/emulation). */
static const struct {
    const char *name;
    void (*fn)(Rng *);
    int cudnn;
} sections[] = {
    {"elementwise", test_elementwise, 0}, {"swap01", test_swap01, 0},   {"avgpool", test_avgpool, 0},
    {"maxpool", test_maxpool, 0},         {"shortcut", test_shortcut, 0}, {"linear", test_linear, 0},
    {"softmax", test_softmax, 0},         {"conv", test_conv, 1},         {"batchnorm", test_batchnorm, 1},
};
enum { NSECTIONS = sizeof sections / sizeof sections[0] };

static int selected(const char *only, const char *name) {
    if (!only || !*only) return 1;
    size_t len = strlen(name);
    for (const char *p = only; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == len && strncmp(p, name, n) == 0) return 1;
        p += n + (e != NULL);
    }
    return 0;
}
#endif /* HAVE_CUDA */

int main(void) {
#ifdef HAVE_CUDA
    const char *only = getenv("GCX_TEST_OPS");
    int any = 0, cudnn = 0;
    for (int i = 0; i < NSECTIONS; i++)
        if (selected(only, sections[i].name)) any = 1, cudnn |= sections[i].cudnn;
    if (!any) {
        fprintf(stderr, "GCX_TEST_OPS=%s names no section; sections:", only);
        for (int i = 0; i < NSECTIONS; i++) fprintf(stderr, " %s", sections[i].name);
        fprintf(stderr, "\n");
        return 2;
    }
    if (cudnn) GPU_SKIP_IF_NONE();
    else GPU_SKIP_IF_NO_DEVICE();
    Rng r;
    rng_init(&r, 1234, 0);
    for (int i = 0; i < NSECTIONS; i++)
        if (selected(only, sections[i].name)) sections[i].fn(&r);
    if (selected(only, "conv")) {
        /* the same ops again after the settings change re-make the plans */
        nn_cuda_set_deterministic(0);
        printf("again with non-deterministic cuDNN algorithms allowed\n");
        test_conv(&r);
        nn_cuda_set_deterministic(1);
        /* FFT and Winograd admitted: another rounding (and on the emulation,
         * operands rounded to 10 mantissa bits), so looser tolerances: this
         * checks that such plans are made and run, not their precision */
        nn_cuda_set_fft_winograd(1);
        conv_tol = (ConvTol){1e-2f, 3e-3f, 3e-3f};
        printf("again with FFT and Winograd algorithms allowed\n");
        test_conv(&r);
        conv_tol = (ConvTol)CONV_TOL_STRICT;
        nn_cuda_set_fft_winograd(0);
        /* the heuristic ranking: the parity again, and the same choice in fresh plans */
        nn_cuda_set_conv_search(NN_CONV_HEURISTIC);
        printf("again with cuDNN's heuristic ranking\n");
        test_conv(&r);
        test_conv_choice(&r, NN_CONV_FIND, 8);
        test_conv_choice(&r, NN_CONV_HEURISTIC, 8);
    }
    nn_cuda_release();
    cudaCheck(cudaDeviceSynchronize());
#else
    GPU_SKIP_IF_NONE();
#endif
    TEST_END();
}
