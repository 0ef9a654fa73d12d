/* LeNet5-Caffe against PyTorch (tests/fixtures/nn_lenet.bin, hash weights,
 * batch 3 of 1x28x28): names and order, loss, logits, every gradient (in full
 * up to 30000 values, all by checksum), eval logits; parameter count; the
 * initializer's bounds. Tolerance rtol 1e-4 (floor 5% of that at the tensor's
 * max), checksums 1e-4 of sum|g|: float32 through four layers. */
#include "tests/test.h"
#include "tests/test_nn_fixture.h"
#include "tests/test_nn_models.h"

#include "nn/lenet.h"

int main(void) {
    NnFixture fx = nnfx_load("tests/fixtures/nn_lenet.bin");
    int N = 3;
    LeNetConfig cfg = lenet_config();
    Model *m = lenet_create(&cfg, 8);
    CHECK(m != NULL, "create");
    if (!m) TEST_END();
    size_t count = param_table_count(&m->pt);
    printf("LeNet5-Caffe: %zu parameters, PyTorch %d\n", count, nnfx_i(&fx, "count.lenet", 1)[0]);
    CHECK(count == (size_t)nnfx_i(&fx, "count.lenet", 1)[0], "parameter count");
    static const char *names[] = {"conv1.weight", "conv1.bias", "fc1.weight", "fc2.bias"};
    static const int idx[] = {0, 1, 4, 7};
    for (int i = 0; i < 4; i++)
        CHECK(param_table_find(&m->pt, names[i]) == idx[i], "parameter %s at %d", names[i], idx[i]);
    /* default init: every value within +-1/sqrt(fan_in), and not all zero */
    int ok = 1;
    for (int t = 0; t < m->pt.n; t++) {
        const ParamInfo *p = &m->pt.t[t];
        const ParamInfo *w = p->ndim > 1 ? p : &m->pt.t[t - 1];
        float bound = 1.0f / sqrtf((float)(w->numel / w->shape[0]));
        double ss = 0;
        for (size_t i = 0; i < p->numel; i++) {
            ok &= fabsf(m->params[p->offset + i]) <= bound;
            ss += m->params[p->offset + i] * m->params[p->offset + i];
        }
        ok &= ss > 0;
    }
    CHECK(ok, "init within +-1/sqrt(fan_in)");
    for (int t = 0; t < m->pt.n; t++) CHECK(nnfx_find(&fx, nnfx_key("gsum.", m->pt.t[t].name)) != NULL, "name %s", m->pt.t[t].name);
    nnfx_hash_fill(m);
    const float *x = nnfx_f(&fx, "x", (size_t)N * 28 * 28);
    nnfx_check_train_step(m, &fx, x, nnfx_i(&fx, "y", N), N, 10, lenet_logits, 1e-4f, 0.05f, 1e-4f);
    model_free(m);
    LeNetConfig bad = lenet_config();
    bad.in_h = 8;
    CHECK(lenet_create(&bad, 4) == NULL, "8x8 input rejected");
    nnfx_free(&fx);
    TEST_END();
}
