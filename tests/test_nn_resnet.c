/* ResNet models against PyTorch (fixtures from tests/ref/nn_fixtures.py):
 *  - ResNet-8 (n = 1) at width 8, option A and option B shortcuts, PyTorch's
 *    own initial weights (BN affine perturbed), batch 4 of 3x16x16: train-mode
 *    loss, logits, EVERY parameter gradient in full, running statistics, then
 *    eval-mode logits. Tolerance rtol 1e-4 with a floor of 10% of that at the
 *    tensor's max magnitude: float32 through 8 conv/BN layers; measured errors
 *    are printed and sit around 1e-6 relative. The floor is for BN's parameter
 *    gradients and running means: sums over N*H*W values that cancel, whose
 *    error scales with the terms, not with the sum; the largest need measured
 *    was 4.4% with -O3 -march=native and 2.5% at -O0 (with 5%, builds at -O0
 *    or -O1 failed here before batchnorm.c's float blocks were cut to 64).
 *  - ResNet-50 (torchvision v1.5 layout) at 10 classes, batch 2 of 3x64x64 with
 *    hash weights (each bottleneck's bn3 gamma small, which keeps 50 layers well
 *    conditioned: with gamma ~ 1 PyTorch's own float32 gradients differ from
 *    float64 by 1e-3..3e-2, so no float32 code could be checked tightly):
 *    logits, loss, every gradient by two checksums (sum(g*h) with h a hash
 *    vector, and sum|g|; tolerance 1e-4 of sum|g|), small gradients in full
 *    (rtol 1e-4), running statistics, eval logits.
 *  - parameter counts of the full-size models against PyTorch's.
 *  - the model's gradients are bit-identical run to run and with 1 thread and
 *    with all threads (the ops split work into items independent of the
 *    thread count). */
#include "tests/test.h"
#include "tests/test_nn_fixture.h"
#include "tests/test_nn_models.h"

#include "nn/parallel.h"
#include "nn/resnet.h"
#include "nn/summary.h"

/* model_print_summary output contains want */
static void check_summary(const Model *m, const char *want) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    model_print_summary(f, m, 1);
    fclose(f);
    CHECK(buf && strstr(buf, want) != NULL, "summary mentions %s", want);
    if (buf) {
        char *end = strrchr(buf, '\n');
        if (end) *end = 0;
        end = strrchr(buf, '\n');
        printf("  summary: %s\n", end ? end + 1 : buf);
    }
    free(buf);
}

static void test_cifar(const char *path, int max_extra, int counts_too) {
    NnFixture fx = nnfx_load(path);
    const int *c = nnfx_i(&fx, "cfg", 8);
    ResNetConfig cfg = resnet_cifar_config(c[0]);
    cfg.width = c[1], cfg.num_classes = c[2], cfg.in_channels = c[3], cfg.in_h = c[4], cfg.in_w = c[5];
    cfg.shortcut = c[6] ? RESNET_SHORTCUT_B : RESNET_SHORTCUT_A;
    int N = c[7];
    printf("%s: ResNet-%d width %d option %c, batch %d of %dx%dx%d (max batch %d)\n", path, cfg.depth, cfg.width,
           c[6] ? 'B' : 'A', N, cfg.in_channels, cfg.in_h, cfg.in_w, N + max_extra);
    Model *m = resnet_cifar_create(&cfg, N + max_extra);
    CHECK(m != NULL, "create");
    if (!m) return;
    nnfx_load_params(m, &fx);
    const float *x = nnfx_f(&fx, "x", (size_t)N * cfg.in_channels * cfg.in_h * cfg.in_w);
    const int *y = nnfx_i(&fx, "y", N);
    nnfx_check_train_step(m, &fx, x, y, N, cfg.num_classes, resnet_logits, 1e-4f, 0.1f, 1e-4f);

    /* determinism and thread independence of a full step */
    float *g1 = mallocCheck(m->pt.total * sizeof(float));
    Batch b = {.x = x, .y = y, .N = N};
    nnfx_load_params(m, &fx);
    model_forward(m, &b, 1, NULL);
    model_backward(m);
    memcpy(g1, m->grads, m->pt.total * sizeof(float));
    model_forward(m, &b, 1, NULL);
    model_backward(m);
    CHECK(memcmp(g1, m->grads, m->pt.total * sizeof(float)) == 0, "two identical steps give bit-identical gradients");
#ifdef HAVE_OPENMP
    int T = omp_get_max_threads();
    omp_set_num_threads(1);
    model_forward(m, &b, 1, NULL);
    model_backward(m);
    omp_set_num_threads(T);
    NNFX_CLOSE("gradients, 1 thread vs all threads", m->grads, g1, m->pt.total, 1e-5f, 0.01f);
    /* work is split into items whose partial sums are added in item order */
    CHECK(memcmp(m->grads, g1, m->pt.total * sizeof(float)) == 0,
          "gradients bit-identical with 1 thread and with %d threads", T);
#endif
    free(g1);

    if (!counts_too) {
        model_free(m);
        nnfx_free(&fx);
        return;
    }
    /* parameter counts of the full-size models */
    static const struct {
        const char *key;
        int depth;
        ResNetShortcut sc;
    } counts[] = {{"count.resnet20A", 20, RESNET_SHORTCUT_A},
                  {"count.resnet56A", 56, RESNET_SHORTCUT_A},
                  {"count.resnet110A", 110, RESNET_SHORTCUT_A},
                  {"count.resnet20B", 20, RESNET_SHORTCUT_B}};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        ResNetConfig fc = resnet_cifar_config(counts[i].depth);
        fc.shortcut = counts[i].sc;
        Model *f = resnet_cifar_create(&fc, 1);
        size_t got = param_table_count(&f->pt);
        int want = nnfx_i(&fx, counts[i].key, 1)[0];
        char s[32];
        param_count_str(s, sizeof s, got);
        printf("  ResNet-%d option %c: %zu parameters (%s), PyTorch %d\n", counts[i].depth,
               counts[i].sc == RESNET_SHORTCUT_A ? 'A' : 'B', got, s, want);
        CHECK(got == (size_t)want, "%s", counts[i].key);
        if (counts[i].depth == 20 && counts[i].sc == RESNET_SHORTCUT_A) check_summary(f, "(0.27M)");
        if (counts[i].depth == 110) check_summary(f, "(1.73M)");
        model_free(f);
    }
    model_free(m);
    nnfx_free(&fx);
}

static void test_resnet50(void) {
    NnFixture fx = nnfx_load("tests/fixtures/nn_resnet50.bin");
    const int *c = nnfx_i(&fx, "cfg", 6);
    ResNet50Config cfg = resnet50_config();
    cfg.num_classes = c[0], cfg.in_channels = c[1], cfg.in_h = c[2], cfg.in_w = c[3], cfg.width = c[4];
    int N = c[5];
    printf("ResNet-50, %d classes, batch %d of %dx%dx%d, hash weights\n", cfg.num_classes, N, cfg.in_channels,
           cfg.in_h, cfg.in_w);
    Model *m = resnet50_create(&cfg, N);
    CHECK(m != NULL, "create resnet50");
    if (!m) return;
    nnfx_hash_fill(m);
    size_t nx = (size_t)N * cfg.in_channels * cfg.in_h * cfg.in_w;
    float *x = mallocCheck(nx * sizeof(float));
    for (size_t i = 0; i < nx; i++) x[i] = nnfx_hash_uniform(999u, (uint32_t)i);
    /* names and order against the fixture's gsum.<name> sequence */
    int k = 0, ok = 1;
    for (int i = 0; i < fx.n && ok; i++)
        if (strncmp(fx.t[i].name, "gsum.", 5) == 0) ok = k < m->pt.n && strcmp(fx.t[i].name + 5, m->pt.t[k++].name) == 0;
    CHECK(ok && k == m->pt.n, "ResNet-50 parameter names and order match torchvision (%d tensors)", k);
    nnfx_check_train_step(m, &fx, x, nnfx_i(&fx, "y", N), N, cfg.num_classes, resnet_logits, 1e-4f, 0.1f, 1e-4f);
    free(x);
    model_free(m);

    ResNet50Config full = resnet50_config();
    Model *f = resnet50_create(&full, 1);
    size_t got = param_table_count(&f->pt);
    char s[32];
    param_count_str(s, sizeof s, got);
    int want = nnfx_i(&fx, "count.resnet50", 1)[0];
    printf("  ResNet-50 (1000 classes): %zu parameters (%s), PyTorch %d\n", got, s, want);
    CHECK(got == (size_t)want, "ResNet-50 parameter count");
    check_summary(f, "(25.6M)");
    model_free(f);
    nnfx_free(&fx);
}

static void test_bad_configs(void) {
    ResNetConfig c = resnet_cifar_config(21);
    CHECK(resnet_cifar_create(&c, 4) == NULL, "depth 21 rejected");
    c = resnet_cifar_config(20);
    CHECK(resnet_cifar_create(&c, 0) == NULL, "max batch 0 rejected");
    ResNet50Config r = resnet50_config();
    r.in_h = 16;
    CHECK(resnet50_create(&r, 1) == NULL, "ResNet-50 input 16x16 rejected");
}

int main(void) {
    test_cifar("tests/fixtures/nn_resnet8a.bin", 0, 1);
    test_cifar("tests/fixtures/nn_resnet8b.bin", 3, 0);
    test_resnet50();
    test_bad_configs();
    TEST_END();
}
