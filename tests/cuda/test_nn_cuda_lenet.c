/* The GPU LeNet5-Caffe (nn/lenet_cuda.h) against the CPU model (nn/lenet.h):
 * same table and bit-identical initial parameters from one config and seed
 * (and lenet_init_cuda = lenet_init); one training step on a batch of 16
 * (of a model made for 20) of 1x28x28: loss, logits, correct count, every
 * parameter gradient; evaluation logits; run-to-run determinism of the GPU
 * gradients; a 3-channel 32x32 variant.
 *
 * Tolerances: loss rtol 1e-5; logits rtol 1e-4, floor 1e-4 of max|logits|:
 * four layers of float sums (cuDNN and cuBLAS in other orders than im2col +
 * OpenBLAS), ~1e-6 relative typical. Gradients: fc2 (after the last ReLU)
 * element by element, rtol 1e-4 with a floor of 1e-4 of max|g|; the others by
 * relative L2 error <= 1e-2, because a value within rounding of 0 (ReLU) or of
 * a tie (max pooling) may go the other way on one device and move the
 * gradients around it (see compare_grads in test_nn_cuda.h). */
#include "tests/test.h"
#include "tests/cuda/test_nn_cuda.h"

#include "nn/lenet.h"
#include "nn/lenet_cuda.h"

#ifdef HAVE_CUDA
static void run(int C, int HW, int N, int max_batch, uint64_t seed) {
    LeNetConfig cfg = lenet_config();
    cfg.in_channels = C, cfg.in_h = cfg.in_w = HW, cfg.seed = seed;
    printf("LeNet %dx%dx%d, batch %d (max %d)\n", C, HW, HW, N, max_batch);
    Model *c = lenet_create(&cfg, max_batch);
    Model *g = lenet_create_cuda(&cfg, max_batch);
    CHECK(c && g, "create CPU and GPU LeNet");
    if (!c || !g) return;
    int same = g->pt.n == c->pt.n && g->pt.total == c->pt.total && g->nstate == 0;
    for (int i = 0; same && i < c->pt.n; i++)
        same = !strcmp(g->pt.t[i].name, c->pt.t[i].name) && g->pt.t[i].offset == c->pt.t[i].offset;
    CHECK(same, "same parameter table");
    CHECK(same && !memcmp(g->params, c->params, c->pt.total * sizeof(float)), "initial parameters bit-identical");
    Rng r;
    rng_init(&r, seed + 1, 0);
    size_t nx = (size_t)N * C * HW * HW;
    float *x = rand_normal(&r, nx, 1.0f);
    int *y = mallocCheck((size_t)N * sizeof(int));
    for (int n = 0; n < N; n++) y[n] = (int)rng_below(&r, 10);
    Batch b = {.x = x, .y = y, .N = N};
    BatchStats sc, sg;
    float lc = model_forward(c, &b, 1, &sc), lg = model_forward(g, &b, 1, &sg);
    close_scaled("train loss", &lg, &lc, 1, 1e-5f, 0.0f);
    close_scaled("train logits", lenet_logits_cuda(g), lenet_logits(c), (size_t)N * 10, 1e-4f, 1e-4f);
    CHECK(sg.correct == sc.correct && sg.count == N, "correct %ld (CPU %ld)", sg.correct, sc.correct);
    for (size_t i = 0; i < g->pt.total; i++) g->grads[i] = 1e3f;
    model_backward(c);
    model_backward(g);
    compare_grads(g, c, 1e-2, "fc2.", 1e-4f, 1e-4f);
    float *g1 = copy_floats(g->grads, g->pt.total);
    model_forward(g, &b, 1, NULL);
    model_backward(g);
    CHECK(!memcmp(g1, g->grads, g->pt.total * sizeof(float)), "GPU gradients deterministic run to run");
    free(g1);
    model_forward(c, &b, 0, NULL);
    model_forward(g, &b, 0, NULL);
    close_scaled("eval logits", lenet_logits_cuda(g), lenet_logits(c), (size_t)N * 10, 1e-4f, 1e-4f);
    lenet_init(c, seed + 9);
    lenet_init_cuda(g, seed + 9);
    CHECK(!memcmp(g->params, c->params, c->pt.total * sizeof(float)), "lenet_init_cuda = lenet_init");
    free(x), free(y);
    model_free(c);
    model_free(g);
}
#endif

int main(void) {
    GPU_SKIP_IF_NONE();
#ifdef HAVE_CUDA
    LeNetConfig bad = lenet_config();
    bad.in_h = 8;
    CHECK(lenet_create_cuda(&bad, 4) == NULL, "8x8 input refused");
    run(1, 28, 16, 20, 1);
    run(3, 32, 5, 5, 2);
    nn_cuda_release();
#endif
    TEST_END();
}
