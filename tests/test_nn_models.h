/* Shared checks of whole image models against a PyTorch fixture (see
 * tests/ref/nn_fixtures.py, train_step_tensors): parameter names and order,
 * train-mode loss/logits/accuracy, every parameter gradient (full, or as two
 * checksums), running statistics, and eval-mode logits afterwards.
 * Include after tests/test.h and tests/test_nn_fixture.h. */
#ifndef GC_TEST_NN_MODELS_H
#define GC_TEST_NN_MODELS_H

#include "nn/model.h"

/* Parameter t of the table gets the hash weights of nn_fixtures.py hash_fill
 * (weights v/sqrt(fan_in), BN gamma 1 + v/4 or v/4 for a bottleneck's bn3, biases v/8). */
static inline void nnfx_hash_fill(Model *m) {
    for (int t = 0; t < m->pt.n; t++) {
        const ParamInfo *p = &m->pt.t[t];
        float *w = m->params + p->offset;
        if (p->ndim > 1) {
            size_t fan_in = p->numel / (size_t)p->shape[0];
            float s = (float)(1.0 / sqrt((double)fan_in));
            for (size_t i = 0; i < p->numel; i++) w[i] = nnfx_hash_uniform((uint32_t)t, (uint32_t)i) * s;
        } else if (p->kind == PK_BN_WEIGHT && strlen(p->name) >= 10 &&
                   strcmp(p->name + strlen(p->name) - 10, "bn3.weight") == 0) {
            for (size_t i = 0; i < p->numel; i++) w[i] = nnfx_hash_uniform((uint32_t)t, (uint32_t)i) * 0.25f;
        } else if (p->kind == PK_BN_WEIGHT) {
            for (size_t i = 0; i < p->numel; i++) w[i] = 1.0f + nnfx_hash_uniform((uint32_t)t, (uint32_t)i) * 0.25f;
        } else {
            for (size_t i = 0; i < p->numel; i++) w[i] = nnfx_hash_uniform((uint32_t)t, (uint32_t)i) * 0.125f;
        }
    }
}

/* load "param.<name>" tensors into the arena; checks names, order and sizes */
static inline void nnfx_load_params(Model *m, const NnFixture *fx) {
    int k = 0, ok = 1;
    for (int i = 0; i < fx->n; i++) {
        const NnTensor *t = &fx->t[i];
        if (strncmp(t->name, "param.", 6) != 0) continue;
        if (k >= m->pt.n || strcmp(m->pt.t[k].name, t->name + 6) != 0 || m->pt.t[k].numel != t->numel) {
            printf("  parameter %d: fixture has %s (%zu values), model has %s\n", k, t->name + 6, t->numel,
                   k < m->pt.n ? m->pt.t[k].name : "(none)");
            ok = 0;
            break;
        }
        memcpy(m->params + m->pt.t[k].offset, t->data, t->numel * sizeof(float));
        k++;
    }
    CHECK(ok && k == m->pt.n, "parameter names, order and sizes match PyTorch's named_parameters (%d of %d)", k,
          m->pt.n);
}

/* offset of "<bn>.running_mean" in m->state: BNs in table order, [mean C][var C] */
static inline long nnfx_state_offset(const Model *m, const char *bn_prefix, int var) {
    size_t off = 0;
    char want[PARAM_NAME_MAX + 16];
    snprintf(want, sizeof want, "%s.weight", bn_prefix);
    for (int i = 0; i < m->pt.n; i++)
        if (m->pt.t[i].kind == PK_BN_WEIGHT) {
            if (strcmp(m->pt.t[i].name, want) == 0) return (long)(off + (var ? m->pt.t[i].numel : 0));
            off += 2 * m->pt.t[i].numel;
        }
    return -1;
}

/* Run one train step on the fixture's batch and compare everything it holds.
 * logits_fn returns the model's logits [N, classes]. */
static inline void nnfx_check_train_step(Model *m, const NnFixture *fx, const float *x, const int *y, int N, int classes,
                                  const float *(*logits_fn)(const Model *), float rtol, float afrac, float cstol) {
    Batch b = {.x = x, .y = y, .N = N};
    BatchStats st;
    float loss = model_forward(m, &b, 1, &st);
    NNFX_CLOSE("train loss", &loss, nnfx_f(fx, "loss", 1), 1, rtol, 0);
    NNFX_CLOSE("train logits", logits_fn(m), nnfx_f(fx, "logits", (size_t)N * classes), (size_t)N * classes, rtol,
               afrac);
    CHECK(st.correct == nnfx_i(fx, "correct", 1)[0] && st.count == N && fabs(st.loss - loss) < 1e-12,
          "batch stats: correct %ld (want %d), count %ld", st.correct, nnfx_i(fx, "correct", 1)[0], st.count);
    /* garbage in the gradient arena must not matter: backward overwrites */
    for (size_t i = 0; i < m->pt.total; i++) m->grads[i] = 1e3f;
    model_backward(m);
    int nfull = 0, nsum = 0;
    double worst_cs = 0;
    for (int t = 0; t < m->pt.n; t++) {
        const ParamInfo *p = &m->pt.t[t];
        const float *g = m->grads + p->offset;
        char key[PARAM_NAME_MAX + 16];
        snprintf(key, sizeof key, "grad.%s", p->name);
        if (nnfx_find(fx, key)) {
            NNFX_CLOSE(key, g, nnfx_f(fx, key, p->numel), p->numel, rtol, afrac);
            nfull++;
        }
        snprintf(key, sizeof key, "gsum.%s", p->name);
        if (nnfx_find(fx, key)) {
            const float *ref = nnfx_f(fx, key, 2);
            double dot = 0, l1 = 0;
            for (size_t i = 0; i < p->numel; i++) {
                dot += (double)g[i] * nnfx_hash_uniform(1000u + (uint32_t)t, (uint32_t)i);
                l1 += fabs((double)g[i]);
            }
            double e1 = fabs(dot - ref[0]) / (ref[1] + 1e-30), e2 = fabs(l1 - ref[1]) / (ref[1] + 1e-30);
            if (e1 > worst_cs) worst_cs = e1;
            if (e2 > worst_cs) worst_cs = e2;
            CHECK(e1 <= cstol && e2 <= cstol, "%s checksums: sum(g*h) %.9g want %.9g, sum|g| %.9g want %.9g", key, dot,
                  ref[0], l1, ref[1]);
            nsum++;
        }
    }
    printf("  %d gradients compared in full, %d by checksum (worst checksum error %.3e of sum|g|)\n", nfull, nsum,
           worst_cs);
    CHECK(nfull + nsum > 0 && (nsum == 0 || nsum == m->pt.n), "every gradient covered (%d full, %d checksums, %d tensors)",
          nfull, nsum, m->pt.n);
    /* running statistics after the step */
    int nst = 0;
    for (int i = 0; i < fx->n; i++) {
        const NnTensor *t = &fx->t[i];
        size_t L = strlen(t->name);
        if (strncmp(t->name, "state.", 6) != 0) continue;
        int var = L > 12 && strcmp(t->name + L - 12, ".running_var") == 0;
        char bn[PARAM_NAME_MAX];
        size_t plen = L - 6 - (var ? 12 : 13);
        snprintf(bn, sizeof bn, "%.*s", (int)plen, t->name + 6);
        long off = nnfx_state_offset(m, bn, var);
        CHECK(off >= 0, "state %s found", t->name);
        if (off < 0) continue;
        nst++;
        if (nst <= 4 || i == fx->n - 1)
            NNFX_CLOSE(t->name, m->state + off, (const float *)t->data, t->numel, rtol, afrac);
        else { /* quiet for the rest, still checked */
            float mx = 0;
            const float *w = t->data;
            int bad = 0;
            for (size_t k = 0; k < t->numel; k++) mx = fabsf(w[k]) > mx ? fabsf(w[k]) : mx;
            for (size_t k = 0; k < t->numel; k++)
                bad += !(fabsf(m->state[off + k] - w[k]) <= rtol * (fabsf(w[k]) + afrac * mx));
            CHECK(!bad, "%s: %d values out of tolerance", t->name, bad);
        }
    }
    printf("  %d running-statistics tensors compared\n", nst);
    /* eval mode with the updated running statistics */
    float eloss = model_forward(m, &b, 0, NULL);
    (void)eloss;
    NNFX_CLOSE("eval logits", logits_fn(m), nnfx_f(fx, "eval_logits", (size_t)N * classes), (size_t)N * classes,
               rtol, afrac);
}

#endif
