/* The GPU LSTM language model (nn/lstm_lm_cuda.h) and its ops (nn/lstm_cuda.cu)
 * against the CPU twins (nn/lstm_lm.h, embedding.h, dropout.h, lstm.h):
 *
 *  - ops: embedding forward and backward (accumulating, repeated tokens, bad
 *    tokens refused without writing), dropout forward/backward/in place for
 *    several p, one LSTM layer forward and backward (parameter gradients
 *    accumulate, dx/dh0/dc0 overwritten, a non-zero initial state)
 *  - models, for untied and tied, 1 and 2 layers, dropout 0 and > 0,
 *    loss_sum_over_time 0 and 1, both inits: the same parameter table and
 *    bit-identical initial parameters (lstm_lm_init_params_cuda too); three
 *    consecutive training batches of one token stream (loss, correct count,
 *    EVERY parameter gradient, the carried (h, c) of every layer after each
 *    forward); an evaluation forward between a training forward and its
 *    backward (its loss and state; the backward still matches); a batch-size
 *    change and reset_state; the checkpoint sections; GPU gradients identical
 *    run to run; backward without a forward gives zeros
 *  - a short training: 30 plain SGD steps on both models from the same seed over
 *    consecutive batches of a learnable stream; the loss of every step and the
 *    final parameters agree, and the loss falls
 *
 * Tolerances, and why. Embedding and dropout are bit-identical (same values,
 * same masks from the same counter-based RNG, same order of additions in the
 * scatter-add). The LSTM is not: cuBLAS sums its GEMMs in other orders than
 * OpenBLAS and CUDA's expf may differ from glibc's in the last bit, so every
 * value carries float rounding (~1e-7 relative per operation). The model is
 * smooth (sigmoid, tanh, softmax: no ReLU kinks, and the dropout masks are
 * identical), so those differences stay at rounding level and every tensor is
 * compared ELEMENT BY ELEMENT, |gpu - cpu| <= rtol |cpu| + afrac max|cpu|:
 *    loss                        rtol 1e-5
 *    LSTM layer outputs, state   rtol 1e-4, afrac 1e-5
 *    gradients (every tensor)    rtol 1e-3, afrac 1e-4, and relative L2 error
 *                                per tensor <= 1e-4
 * The floor afrac * max|cpu| is for elements that are sums with cancellation
 * (their relative error is unbounded while their absolute error is a rounding
 * of the terms). The correct count may differ by one per batch: two logits
 * within rounding of each other can swap the argmax.
 * Training: the trajectories separate by rounding, amplified a little by each
 * step: loss per step within 1e-4 relative, parameters after 30 steps within
 * 1e-4 relative L2 over the arena.
 * Calibration (tests/emulation/nn: this test run with the "GPU" model
 * replaced by a CPU model whose parameters are scaled by 1 + 1e-6 u, u uniform
 * in [-1, 1], i.e. ~16 float roundings): gradient relative L2 <= 2.3e-6 (1/45 of
 * the bound), elements <= 0.014 of their bound, loss < 1e-7 relative,
 * parameters after training 6e-7 apart (the initial perturbation); everything
 * still passes at 1e-5; the state bounds are first crossed at 3e-5, the
 * gradient bounds at 1e-4. A wiring error (wrong buffer, offset, gate order,
 * mask site, missing tied gradient) gives O(1).
 */
#include "tests/test.h"
#include "tests/cuda/test_nn_cuda.h"

#include "common/errors.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/lstm.h"
#include "nn/lstm_lm.h"
#include "nn/lstm_lm_cuda.h"

#define LOSS_RTOL 1e-5f
#define STATE_RTOL 1e-4f
#define STATE_AFRAC 1e-5f
#define GRAD_RTOL 1e-3f
#define GRAD_AFRAC 1e-4f
#define GRAD_L2 1e-4
#define TRAIN_LOSS_RTOL 1e-4
#define TRAIN_PARAM_L2 1e-4

#ifdef HAVE_CUDA

/* ------------------------------------------------------------------ ops ---- */

static void test_embedding_op(void) {
    printf("embedding: N 37 tokens (repeats), V 11, E 13\n");
    const int N = 37, V = 11, E = 13;
    Rng r;
    rng_init(&r, 3, 0);
    int tok[37];
    for (int n = 0; n < N; n++) tok[n] = (int)rng_below(&r, (uint64_t)V);
    tok[5] = tok[6] = tok[30] = 4; /* a token seen several times: its rows add up */
    float *w = rand_normal(&r, (size_t)V * E, 1.0f), *dout = rand_normal(&r, (size_t)N * E, 1.0f);
    float *dw = rand_normal(&r, (size_t)V * E, 1.0f); /* pre-filled: the gradient accumulates */
    float *out = mallocCheck((size_t)N * E * sizeof(float)), *dwc = copy_floats(dw, (size_t)V * E);
    CHECK(embedding_forward(out, tok, w, N, V, E) == 0, "CPU embedding forward");
    CHECK(embedding_backward(dwc, dout, tok, N, V, E) == 0, "CPU embedding backward");
    int *d_tok = dev_upload_int(tok, N);
    float *d_w = dev_upload(w, (size_t)V * E), *d_dout = dev_upload(dout, (size_t)N * E);
    float *d_dw = dev_upload(dw, (size_t)V * E), *d_out = dev_fill((size_t)N * E, 7.0f);
    CHECK(embedding_forward_cuda(d_out, d_tok, d_w, N, V, E) == 0, "GPU embedding forward");
    float *g = dev_download(d_out, (size_t)N * E);
    same_floats("embedding forward", g, out, (size_t)N * E);
    free(g);
    CHECK(embedding_backward_cuda(d_dw, d_dout, d_tok, N, V, E) == 0, "GPU embedding backward");
    CHECK(embedding_backward_cuda(d_dw, d_dout, d_tok, N, V, E) == 0, "GPU embedding backward, twice");
    CHECK(embedding_backward(dwc, dout, tok, N, V, E) == 0, "CPU embedding backward, twice");
    g = dev_download(d_dw, (size_t)V * E);
    same_floats("embedding backward (+=, twice)", g, dwc, (size_t)V * E);
    free(g);
    /* a bad token: -GC_ERR_PARAM and nothing written */
    int badtok[37];
    memcpy(badtok, tok, sizeof badtok);
    badtok[20] = V;
    int *d_bad = dev_upload_int(badtok, N);
    float *d_o2 = dev_fill((size_t)N * E, 7.0f), *d_dw2 = dev_fill((size_t)V * E, 5.0f);
    CHECK(embedding_forward_cuda(d_o2, d_bad, d_w, N, V, E) == -GC_ERR_PARAM, "token V refused (forward)");
    CHECK(embedding_backward_cuda(d_dw2, d_dout, d_bad, N, V, E) == -GC_ERR_PARAM, "token V refused (backward)");
    badtok[20] = -1;
    cudaCheck(cudaMemcpy(d_bad, badtok, sizeof badtok, cudaMemcpyHostToDevice));
    CHECK(embedding_forward_cuda(d_o2, d_bad, d_w, N, V, E) == -GC_ERR_PARAM, "token -1 refused");
    float *o2 = dev_download(d_o2, (size_t)N * E), *dw2 = dev_download(d_dw2, (size_t)V * E);
    int untouched = 1;
    for (size_t i = 0; i < (size_t)N * E; i++) untouched &= o2[i] == 7.0f;
    for (size_t i = 0; i < (size_t)V * E; i++) untouched &= dw2[i] == 5.0f;
    CHECK(untouched, "refused calls write nothing");
    CHECK(embedding_forward_cuda(d_o2, d_tok, d_w, 0, V, E) == 0, "N = 0 is a no-op");
    free(o2), free(dw2), free(w), free(dout), free(dw), free(out), free(dwc);
    void *dev[] = {d_tok, d_bad, d_w, d_dout, d_dw, d_out, d_o2, d_dw2};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) cudaCheck(cudaFree(dev[i]));
}

static void test_dropout_op(void) {
    const size_t n = 100003;
    const float ps[] = {0.0f, 0.3f, 0.65f};
    Rng r;
    rng_init(&r, 4, 0);
    float *x = rand_normal(&r, n, 1.0f), *want = mallocCheck(n * sizeof(float));
    float *d_x = dev_upload(x, n), *d_y = dev_fill(n, 3.0f);
    for (int k = 0; k < 3; k++) {
        const float p = ps[k];
        const uint64_t s = dropout_seed(1234, 5, (uint64_t)k);
        printf("dropout: n %zu, p %.2f\n", n, p);
        char what[64];
        CHECK(dropout_forward(want, x, p, s, n) == 0, "CPU dropout");
        CHECK(dropout_forward_cuda(d_y, d_x, p, s, n) == 0, "GPU dropout forward");
        float *g = dev_download(d_y, n);
        snprintf(what, sizeof what, "dropout forward p %.2f", p);
        same_floats(what, g, want, n);
        free(g);
        /* in place */
        float *d_z = dev_upload(x, n);
        CHECK(dropout_forward_cuda(d_z, d_z, p, s, n) == 0, "GPU dropout in place");
        g = dev_download(d_z, n);
        snprintf(what, sizeof what, "dropout in place p %.2f", p);
        same_floats(what, g, want, n);
        free(g);
        /* backward: the same mask and scale */
        CHECK(dropout_backward(want, x, p, s, n) == 0, "CPU dropout backward");
        CHECK(dropout_backward_cuda(d_z, d_x, p, s, n) == 0, "GPU dropout backward");
        g = dev_download(d_z, n);
        snprintf(what, sizeof what, "dropout backward p %.2f", p);
        same_floats(what, g, want, n);
        free(g);
        cudaCheck(cudaFree(d_z));
    }
    CHECK(dropout_forward_cuda(d_y, d_x, 1.0f, 1, n) == -GC_ERR_PARAM, "p = 1 refused");
    CHECK(dropout_forward_cuda(d_y, d_x, -0.1f, 1, n) == -GC_ERR_PARAM, "p < 0 refused");
    free(x), free(want);
    cudaCheck(cudaFree(d_x));
    cudaCheck(cudaFree(d_y));
}

/* the device array d [n] against the host array want, element by element (close_scaled) */
static void check_dev(const char *what, const float *d, const float *want, size_t n, float rtol, float afrac) {
    float *got = dev_download(d, n);
    close_scaled(what, got, want, n, rtol, afrac);
    free(got);
}

static void test_lstm_op(int T, int N, int In, int H) {
    printf("LSTM layer: T %d, N %d, In %d, H %d, non-zero initial state\n", T, N, In, H);
    const int G = 4 * H;
    const size_t NH = (size_t)N * H, nS = (size_t)(T + 1) * NH, nG = (size_t)T * N * G, nT = (size_t)T * NH,
                 nX = (size_t)T * N * In, nWi = (size_t)G * In, nWh = (size_t)G * H;
    Rng r;
    rng_init(&r, 77 + (uint64_t)H, 0);
    float *x = rand_normal(&r, nX, 1.0f), *w_ih = rand_normal(&r, nWi, 0.4f), *w_hh = rand_normal(&r, nWh, 0.4f);
    float *b_ih = rand_normal(&r, G, 0.3f), *b_hh = rand_normal(&r, G, 0.3f);
    float *hs = rand_normal(&r, nS, 0.5f), *cs = rand_normal(&r, nS, 1.0f); /* slot 0 = initial state */
    float *gates = mallocCheck(nG * sizeof(float)), *tanhc = mallocCheck(nT * sizeof(float));
    float *d_x = dev_upload(x, nX), *d_wih = dev_upload(w_ih, nWi), *d_whh = dev_upload(w_hh, nWh);
    float *d_bih = dev_upload(b_ih, G), *d_bhh = dev_upload(b_hh, G);
    /* outputs pre-filled with garbage: every slot but the initial state is written */
    float *d_hs = dev_fill(nS, 9.0f), *d_cs = dev_fill(nS, 9.0f), *d_gates = dev_fill(nG, 9.0f);
    float *d_tanhc = dev_fill(nT, 9.0f);
    cudaCheck(cudaMemcpy(d_hs, hs, NH * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_cs, cs, NH * sizeof(float), cudaMemcpyHostToDevice));
    lstm_forward(hs, cs, gates, tanhc, x, w_ih, w_hh, b_ih, b_hh, T, N, In, H);
    lstm_forward_cuda(d_hs, d_cs, d_gates, d_tanhc, d_x, d_wih, d_whh, d_bih, d_bhh, T, N, In, H);
    check_dev("lstm hs", d_hs, hs, nS, STATE_RTOL, STATE_AFRAC);
    check_dev("lstm cs", d_cs, cs, nS, STATE_RTOL, STATE_AFRAC);
    check_dev("lstm gates", d_gates, gates, nG, STATE_RTOL, STATE_AFRAC);
    check_dev("lstm tanh(c)", d_tanhc, tanhc, nT, STATE_RTOL, STATE_AFRAC);

    /* backward from the CPU's forward caches on both sides, so only the backward is compared */
    float *d_hs_c = dev_upload(hs, nS), *d_cs_c = dev_upload(cs, nS), *d_gates_c = dev_upload(gates, nG);
    float *d_tanhc_c = dev_upload(tanhc, nT);
    float *dhs = rand_normal(&r, nT, 1.0f), *d_dhs = dev_upload(dhs, nT);
    /* parameter gradients pre-filled: they accumulate */
    float *dwih = rand_normal(&r, nWi, 0.1f), *dwhh = rand_normal(&r, nWh, 0.1f);
    float *dbih = rand_normal(&r, G, 0.1f), *dbhh = rand_normal(&r, G, 0.1f);
    float *d_dwih = dev_upload(dwih, nWi), *d_dwhh = dev_upload(dwhh, nWh);
    float *d_dbih = dev_upload(dbih, G), *d_dbhh = dev_upload(dbhh, G);
    float *dx = mallocCheck(nX * sizeof(float)), *dh0 = mallocCheck(NH * sizeof(float));
    float *dc0 = mallocCheck(NH * sizeof(float)), *dgates = mallocCheck(nG * sizeof(float));
    float *dstate = mallocCheck(2 * NH * sizeof(float));
    /* dx, dh0, dc0 and the scratch pre-filled with garbage: overwritten */
    float *d_dx = dev_fill(nX, 9.0f), *d_dh0 = dev_fill(NH, 9.0f), *d_dc0 = dev_fill(NH, 9.0f);
    float *d_dgates = dev_fill(nG, 9.0f), *d_dstate = dev_fill(2 * NH, 9.0f);
    lstm_backward(dx, dh0, dc0, dwih, dwhh, dbih, dbhh, dgates, dstate, dhs, hs, cs, gates, tanhc, x, w_ih, w_hh, T, N,
                  In, H);
    lstm_backward_cuda(d_dx, d_dh0, d_dc0, d_dwih, d_dwhh, d_dbih, d_dbhh, d_dgates, d_dstate, d_dhs, d_hs_c, d_cs_c,
                       d_gates_c, d_tanhc_c, d_x, d_wih, d_whh, T, N, In, H);
    check_dev("lstm dx", d_dx, dx, nX, GRAD_RTOL, GRAD_AFRAC);
    check_dev("lstm dh0", d_dh0, dh0, NH, GRAD_RTOL, GRAD_AFRAC);
    check_dev("lstm dc0", d_dc0, dc0, NH, GRAD_RTOL, GRAD_AFRAC);
    check_dev("lstm dw_ih (+=)", d_dwih, dwih, nWi, GRAD_RTOL, GRAD_AFRAC);
    check_dev("lstm dw_hh (+=)", d_dwhh, dwhh, nWh, GRAD_RTOL, GRAD_AFRAC);
    check_dev("lstm db_ih (+=)", d_dbih, dbih, G, GRAD_RTOL, GRAD_AFRAC);
    check_dev("lstm db_hh (+=)", d_dbhh, dbhh, G, GRAD_RTOL, GRAD_AFRAC);
    /* NULL dx, dh0, dc0 are skipped (what the model passes); the parameter gradients add up again */
    lstm_backward_cuda(NULL, NULL, NULL, d_dwih, d_dwhh, d_dbih, d_dbhh, d_dgates, d_dstate, d_dhs, d_hs_c, d_cs_c,
                       d_gates_c, d_tanhc_c, d_x, d_wih, d_whh, T, N, In, H);
    lstm_backward(NULL, NULL, NULL, dwih, dwhh, dbih, dbhh, dgates, dstate, dhs, hs, cs, gates, tanhc, x, w_ih, w_hh, T,
                  N, In, H);
    check_dev("lstm dw_ih (+= twice, NULL dx)", d_dwih, dwih, nWi, GRAD_RTOL, GRAD_AFRAC);
    check_dev("lstm dw_hh (+= twice, NULL dx)", d_dwhh, dwhh, nWh, GRAD_RTOL, GRAD_AFRAC);
    float *host[] = {x, w_ih, w_hh, b_ih, b_hh, hs, cs, gates, tanhc, dhs, dwih, dwhh, dbih, dbhh, dx, dh0, dc0,
                     dgates, dstate};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
    float *dev[] = {d_x,    d_wih,  d_whh,  d_bih,  d_bhh, d_hs, d_cs, d_gates, d_tanhc, d_hs_c, d_cs_c, d_gates_c,
                    d_tanhc_c, d_dwih, d_dwhh, d_dbih, d_dbhh, d_dhs, d_dx, d_dh0, d_dc0, d_dgates, d_dstate};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) cudaCheck(cudaFree(dev[i]));
}

/* ---------------------------------------------------------------- models ---- */

/* A token stream with structure (next = 5 * tok + 3 mod V/2 four times in five,
 * else uniform: the lower half of the vocabulary is frequent, and mostly
 * follows from the previous token), cut like the data loader: sequence n of the batch reads the
 * stream from n * (S / N), batch k covers steps k*T .. k*T + T - 1, the target
 * is the next token (time-major: [t * N + n]). */
typedef struct {
    int *s;
    long S;
} Stream;

static Stream stream_make(int V, long S, uint64_t seed) {
    Stream st = {mallocCheck((size_t)S * sizeof(int)), S};
    Rng r;
    rng_init(&r, seed, 0);
    st.s[0] = 0;
    for (long i = 1; i < S; i++)
        st.s[i] = rng_below(&r, 5) ? (5 * st.s[i - 1] + 3) % (V / 2) : (int)rng_below(&r, (uint64_t)V);
    return st;
}

static void stream_batch(const Stream *st, int k, int T, int N, int *tok /*T*N*/, int *tgt /*T*N*/) {
    const long part = st->S / N;
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            long i = n * part + ((long)k * T + t) % (part - 1);
            tok[t * N + n] = st->s[i];
            tgt[t * N + n] = st->s[i + 1];
        }
}

/* the two models have the same table and parameters */
static int check_same_start(const Model *g, const Model *c) {
    int same = g->pt.n == c->pt.n && g->pt.total == c->pt.total && g->nstate == c->nstate;
    for (int i = 0; same && i < c->pt.n; i++)
        same = strcmp(g->pt.t[i].name, c->pt.t[i].name) == 0 && g->pt.t[i].offset == c->pt.t[i].offset &&
               g->pt.t[i].numel == c->pt.t[i].numel && g->pt.t[i].kind == c->pt.t[i].kind;
    CHECK(same, "GPU model has the CPU model's parameter table (%d tensors, %zu floats)", c->pt.n, c->pt.total);
    if (!same) return 0;
    CHECK(memcmp(g->params, c->params, c->pt.total * sizeof(float)) == 0, "initial parameters bit-identical");
    return 1;
}

/* every parameter gradient, element by element and by relative L2 per tensor;
 * one line per tensor when verbose, else a summary */
static void compare_all_grads(const Model *g, const Model *c, int verbose) {
    int bad = 0;
    double worst_l2 = 0, worst_el = 0;
    for (int i = 0; i < c->pt.n; i++) {
        const ParamInfo *t = &c->pt.t[i];
        const float *a = g->grads + t->offset, *b = c->grads + t->offset;
        const double mx = max_abs(b, t->numel), l2 = rel_l2(a, b, t->numel);
        double el = 0; /* worst |a - b| / (rtol |b| + afrac max|b|) */
        for (size_t k = 0; k < t->numel; k++) {
            double d = fabs((double)a[k] - b[k]), lim = GRAD_RTOL * fabs((double)b[k]) + GRAD_AFRAC * mx;
            double q = lim > 0 ? d / lim : (d > 0 ? INFINITY : 0);
            if (!(q <= el)) el = q; /* NaN-safe: a NaN difference becomes the worst */
        }
        if (!(l2 <= worst_l2)) worst_l2 = l2;
        if (!(el <= worst_el)) worst_el = el;
        int ok = l2 <= GRAD_L2 && el <= 1.0;
        bad += !ok;
        if (verbose || !ok)
            printf("  grad %-22s n=%-6zu max|g| %.3e  rel L2 %.3e  worst element %.3f of the bound%s\n", t->name,
                   t->numel, mx, l2, el, ok ? "" : "  FAIL");
    }
    if (!verbose) printf("  gradients: worst rel L2 %.3e, worst element %.3f of the bound\n", worst_l2, worst_el);
    CHECK(bad == 0, "%d of %d gradient tensors beyond (rel L2 %.0e; rtol %.0e + %.0e max|g|)", bad, c->pt.n, GRAD_L2,
          (double)GRAD_RTOL, (double)GRAD_AFRAC);
}

static void compare_state(const Model *g, const Model *c, int L, int H, const char *when) {
    for (int l = 0; l < L; l++) {
        const float *hg, *cg, *hc, *cc;
        int ng = -1, nc = -2;
        CHECK(lstm_lm_carried_state_cuda(g, l, &hg, &cg, &ng) == 0 && lstm_lm_carried_state(c, l, &hc, &cc, &nc) == 0,
              "carried state of layer %d", l);
        CHECK(ng == nc, "%s: carried batch size GPU %d, CPU %d", when, ng, nc);
        if (ng != nc || nc <= 0) continue;
        char what[120];
        snprintf(what, sizeof what, "%s: carried h, layer %d", when, l);
        close_scaled(what, hg, hc, (size_t)nc * H, STATE_RTOL, STATE_AFRAC);
        snprintf(what, sizeof what, "%s: carried c, layer %d", when, l);
        close_scaled(what, cg, cc, (size_t)nc * H, STATE_RTOL, STATE_AFRAC);
    }
}

static void compare_loss(const char *what, float lg, float lc, const BatchStats *sg, const BatchStats *sc) {
    double rel = fabs((double)lg - lc) / fabs((double)lc);
    printf("  %-44s CPU %.7f GPU %.7f rel %.2e, correct %ld / %ld (CPU %ld)\n", what, lc, lg, rel, sg->correct,
           sg->count, sc->correct);
    CHECK(rel <= LOSS_RTOL, "%s: loss GPU %.9g CPU %.9g (rel %.2e)", what, lg, lc, rel);
    CHECK(labs(sg->correct - sc->correct) <= 1 && sg->count == sc->count, "%s: correct %ld of %ld (CPU %ld of %ld)",
          what, sg->correct, sg->count, sc->correct, sc->count);
}

typedef struct {
    const char *name;
    int V, E, H, L, tie;
    float dropout;
    int sum_over_time;
    LstmLmInit init;
    int T, N, max_batch;
} Case;

static void test_model(const Case *k, uint64_t seed) {
    printf("model %s: V %d, E %d, H %d, %d layer(s)%s, dropout %.2f, loss %s, init %s, T %d, batch %d of %d\n", k->name,
           k->V, k->E, k->H, k->L, k->tie ? ", tied" : "", k->dropout, k->sum_over_time ? "summed over time" : "mean",
           k->init == LSTM_LM_INIT_ZAREMBA ? "zaremba" : "pytorch", k->T, k->N, k->max_batch);
    LstmLmConfig cfg = {.vocab = k->V, .emb = k->E, .hidden = k->H, .layers = k->L, .dropout = k->dropout,
                        .tie_weights = k->tie, .forget_bias = 1.0f, .init = k->init, .init_range = 0.3f,
                        .loss_sum_over_time = k->sum_over_time, .seed = seed};
    const int T = k->T, N = k->N, H = k->H, L = k->L, TN = T * N;
    Model *c = lstm_lm_create(&cfg, k->max_batch, T);
    Model *g = lstm_lm_create_cuda(&cfg, k->max_batch, T);
    CHECK(c && g, "create CPU and GPU models");
    if (!c || !g) {
        model_free(c), model_free(g);
        return;
    }
    if (!check_same_start(g, c)) {
        model_free(c), model_free(g);
        return;
    }
    CHECK(strcmp(g->ops->name, "lstm_lm_cuda") == 0 && lstm_lm_config_cuda(g)->hidden == H, "GPU model name, config");
    lstm_lm_set_dropout_seed(c, seed + 100, 7);
    lstm_lm_set_dropout_seed_cuda(g, seed + 100, 7);
    Stream st = stream_make(k->V, 4000, seed + 1);
    int *tok = mallocCheck((size_t)TN * sizeof(int)), *tgt = mallocCheck((size_t)TN * sizeof(int));
    BatchStats sc, sg;
    char what[96];

    /* three consecutive batches: the state carries from one to the next */
    for (int b = 0; b < 3; b++) {
        stream_batch(&st, b, T, N, tok, tgt);
        Batch batch = {.tokens = tok, .y = tgt, .N = N, .T = T};
        float lc = model_forward(c, &batch, 1, &sc), lg = model_forward(g, &batch, 1, &sg);
        snprintf(what, sizeof what, "batch %d: train loss", b);
        compare_loss(what, lg, lc, &sg, &sc);
        snprintf(what, sizeof what, "batch %d", b);
        compare_state(g, c, L, H, what);
        if (b == 1) {
            /* an evaluation forward between a training forward and its backward:
             * own buffers (the backward below still matches), state carried on */
            int *etok = mallocCheck((size_t)TN * sizeof(int)), *etgt = mallocCheck((size_t)TN * sizeof(int));
            stream_batch(&st, 50, T, N, etok, etgt);
            Batch eb = {.tokens = etok, .y = etgt, .N = N, .T = T};
            lc = model_forward(c, &eb, 0, &sc), lg = model_forward(g, &eb, 0, &sg);
            compare_loss("evaluation forward (no dropout)", lg, lc, &sg, &sc);
            compare_state(g, c, L, H, "after the evaluation forward");
            free(etok), free(etgt);
        }
        for (size_t i = 0; i < g->pt.total; i++) g->grads[i] = 1e3f; /* overwritten by backward */
        model_backward(c);
        model_backward(g);
        compare_all_grads(g, c, b == 0);
    }

    /* determinism: the same step again (same masks, same start state) */
    {
        g->ops->reset_state(g);
        lstm_lm_set_dropout_seed_cuda(g, seed + 100, 9);
        stream_batch(&st, 2, T, N, tok, tgt);
        Batch batch = {.tokens = tok, .y = tgt, .N = N, .T = T};
        model_forward(g, &batch, 1, NULL);
        model_backward(g);
        float *g1 = copy_floats(g->grads, g->pt.total);
        g->ops->reset_state(g);
        lstm_lm_set_dropout_seed_cuda(g, seed + 100, 9);
        model_forward(g, &batch, 1, NULL);
        model_backward(g);
        CHECK(!memcmp(g1, g->grads, g->pt.total * sizeof(float)), "GPU gradients identical run to run");
        free(g1);
    }

    /* a batch-size change starts from the zero state; reset_state zeroes it */
    if (N > 1) {
        c->ops->reset_state(c);
        g->ops->reset_state(g);
        stream_batch(&st, 3, T, N, tok, tgt);
        Batch full = {.tokens = tok, .y = tgt, .N = N, .T = T};
        model_forward(c, &full, 1, NULL), model_forward(g, &full, 1, NULL);
        int *tok1 = mallocCheck((size_t)T * sizeof(int)), *tgt1 = mallocCheck((size_t)T * sizeof(int));
        for (int t = 0; t < T; t++) tok1[t] = tok[t * N], tgt1[t] = tgt[t * N];
        Batch one = {.tokens = tok1, .y = tgt1, .N = 1, .T = T};
        float lc = model_forward(c, &one, 1, &sc), lg = model_forward(g, &one, 1, &sg);
        compare_loss("batch size N -> 1 (state restarts)", lg, lc, &sg, &sc);
        compare_state(g, c, L, H, "after the batch-size change");
        model_backward(c), model_backward(g);
        compare_all_grads(g, c, 0);
        free(tok1), free(tgt1);
    }
    g->ops->reset_state(g);
    int n = -1, zero = 1;
    const float *h, *cc;
    lstm_lm_carried_state_cuda(g, L - 1, &h, &cc, &n);
    for (int i = 0; i < k->max_batch * H; i++) zero &= h[i] == 0.0f && cc[i] == 0.0f;
    CHECK(n == 0 && zero, "reset_state zeroes the carried state");
    CHECK(lstm_lm_carried_state_cuda(g, L, NULL, NULL, NULL) == -GC_ERR_PARAM, "bad layer index refused");

    /* checkpoint sections: the CPU model's names and sizes */
    CkptSection s1[8], s2[8];
    int n1 = c->ops->ckpt_sections(c, s1, 8), n2 = g->ops->ckpt_sections(g, s2, 8);
    int same = n1 == n2 && n1 == 4;
    for (int i = 0; same && i < n1; i++) same = !strcmp(s1[i].name, s2[i].name) && s1[i].len == s2[i].len;
    CHECK(same, "checkpoint sections as the CPU model's (%d and %d)", n1, n2);

    /* backward without a pending training forward: zeros */
    for (size_t i = 0; i < g->pt.total; i++) g->grads[i] = 1.0f;
    printf("  backward without a training forward (an error line on stderr is expected):\n");
    fflush(stdout);
    model_backward(g);
    int zeros = 1;
    for (size_t i = 0; i < g->pt.total; i++) zeros &= g->grads[i] == 0.0f;
    CHECK(zeros, "backward without a training forward gives zero gradients");

    /* lstm_lm_init_params_cuda = lstm_lm_init_params */
    lstm_lm_init_params(c, seed + 5);
    lstm_lm_init_params_cuda(g, seed + 5);
    CHECK(!memcmp(g->params, c->params, c->pt.total * sizeof(float)), "lstm_lm_init_params_cuda = lstm_lm_init_params");
    free(tok), free(tgt), free(st.s);
    model_free(c);
    model_free(g);
}

/* ------------------------------------------------------------- training ---- */

static void test_training(const Case *k, float lr, uint64_t seed) {
    const int steps = 30, T = k->T, N = k->N, TN = T * N;
    printf("training %s: %d plain SGD steps (lr %g), V %d, E %d, H %d, %d layers%s, dropout %.2f, T %d, batch %d\n",
           k->name, steps, lr, k->V, k->E, k->H, k->L, k->tie ? ", tied" : "", k->dropout, T, N);
    LstmLmConfig cfg = {.vocab = k->V, .emb = k->E, .hidden = k->H, .layers = k->L, .dropout = k->dropout,
                        .tie_weights = k->tie, .forget_bias = 1.0f, .init = k->init, .init_range = 0.1f,
                        .loss_sum_over_time = k->sum_over_time, .seed = seed};
    Model *c = lstm_lm_create(&cfg, N, T);
    Model *g = lstm_lm_create_cuda(&cfg, N, T);
    CHECK(c && g, "create CPU and GPU models");
    if (!c || !g || !check_same_start(g, c)) {
        model_free(c), model_free(g);
        return;
    }
    Stream st = stream_make(k->V, 20000, seed + 2);
    int *tok = mallocCheck((size_t)TN * sizeof(int)), *tgt = mallocCheck((size_t)TN * sizeof(int));
    double worst = 0, first = 0, last = 0; /* first: loss of step 1; last: mean of the last 5 steps */
    int bad = 0;
    for (int s = 0; s < steps; s++) {
        stream_batch(&st, s, T, N, tok, tgt);
        Batch b = {.tokens = tok, .y = tgt, .N = N, .T = T};
        float lc = model_forward(c, &b, 1, NULL), lg = model_forward(g, &b, 1, NULL);
        model_backward(c);
        model_backward(g);
        for (size_t i = 0; i < c->pt.total; i++) c->params[i] -= lr * c->grads[i];
        for (size_t i = 0; i < g->pt.total; i++) g->params[i] -= lr * g->grads[i];
        double rel = fabs((double)lg - lc) / fabs((double)lc);
        if (!(rel <= worst)) worst = rel;
        if (!(rel <= TRAIN_LOSS_RTOL)) bad++;
        if (s % 5 == 0 || s == steps - 1)
            printf("  step %2d  loss CPU %.6f  GPU %.6f  rel diff %.2e\n", s + 1, lc, lg, rel);
        if (s == 0) first = lc;
        if (s >= steps - 5) last += lc / 5;
    }
    printf("  loss per step: worst relative difference %.2e\n", worst);
    CHECK(bad == 0, "loss per step within %.0e relative (worst %.2e, %d steps beyond)", TRAIN_LOSS_RTOL, worst, bad);
    CHECK(last < 0.9 * first, "the loss went down by 10%% (first step %.4f, mean of the last 5 %.4f), so the "
          "comparison covers real training", first, last);
    double pl2 = rel_l2(g->params, c->params, c->pt.total);
    printf("  parameters after %d steps: relative L2 difference %.3e\n", steps, pl2);
    CHECK(pl2 <= TRAIN_PARAM_L2, "parameters after %d steps: relative L2 difference %.3e > %.0e", steps, pl2,
          TRAIN_PARAM_L2);
    free(tok), free(tgt), free(st.s);
    model_free(c);
    model_free(g);
}

/* device-master mode and the optimizer on the device (compare_device_master) */
static void test_device_master(void) {
    enum { STEPS = 12, T = 6, N = 3 };
    printf("device-master mode: %d Adam steps with the optimizer on the device against the host optimizer\n", STEPS);
    LstmLmConfig cfg = {.vocab = 21, .emb = 10, .hidden = 10, .layers = 2, .dropout = 0.3f, .tie_weights = 1,
                        .forget_bias = 1.0f, .init = LSTM_LM_INIT_PYTORCH, .init_range = 0.1f, .seed = 17};
    Model *h = lstm_lm_create_cuda(&cfg, N, T), *d = lstm_lm_create_cuda(&cfg, N, T);
    Model *cpu = lstm_lm_create(&cfg, N, T);
    CHECK(h && d && cpu, "create two GPU models and a CPU model");
    if (h && d && cpu) {
        Stream st = stream_make(cfg.vocab, 5000, 23);
        int *tok = mallocCheck((size_t)(STEPS + 1) * T * N * sizeof(int));
        int *tgt = mallocCheck((size_t)(STEPS + 1) * T * N * sizeof(int));
        Batch b[STEPS + 1];
        for (int s = 0; s <= STEPS; s++) {
            stream_batch(&st, s, T, N, tok + s * T * N, tgt + s * T * N);
            b[s] = (Batch){.tokens = tok + s * T * N, .y = tgt + s * T * N, .N = N, .T = T};
        }
        OptConfig oc;
        opt_config_default(&oc, OPT_ADAM);
        oc.weight_decay = 0.01;
        compare_device_master(h, d, cpu, b, STEPS, &oc, 1e-2);
        free(tok), free(tgt), free(st.s);
    }
    model_free(h), model_free(d), model_free(cpu);
}

#endif /* HAVE_CUDA */

int main(void) {
    GPU_SKIP_IF_NO_DEVICE(); /* no cuDNN needed */
#ifdef HAVE_CUDA
    LstmLmConfig bad = {.vocab = 10, .emb = 4, .hidden = 6, .layers = 1, .tie_weights = 1, .init_range = 0.1f};
    CHECK(lstm_lm_create_cuda(&bad, 2, 3) == NULL, "tied weights with emb != hidden refused");
    test_embedding_op();
    test_dropout_op();
    test_lstm_op(5, 3, 7, 6);
    test_lstm_op(3, 1, 1, 33);
    const Case cases[] = {
        {"untied-1", 23, 10, 12, 1, 0, 0.0f, 0, LSTM_LM_INIT_ZAREMBA, 6, 4, 5},
        {"untied-2-dropout", 31, 9, 14, 2, 0, 0.3f, 1, LSTM_LM_INIT_PYTORCH, 5, 3, 3},
        {"tied-1-dropout", 19, 16, 16, 1, 1, 0.5f, 0, LSTM_LM_INIT_PYTORCH, 7, 2, 4},
        {"tied-2", 27, 12, 12, 2, 1, 0.0f, 1, LSTM_LM_INIT_ZAREMBA, 4, 5, 5},
        {"tied-2-dropout", 40, 20, 20, 2, 1, 0.65f, 1, LSTM_LM_INIT_PYTORCH, 6, 3, 6},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_model(&cases[i], 100 + i);
    const Case train_untied = {"untied-2, mean loss", 16, 16, 24, 2, 0, 0.0f, 0, LSTM_LM_INIT_ZAREMBA, 8, 4, 4};
    const Case train_tied = {"tied-2-dropout, loss summed over time", 16, 24, 24, 2, 1, 0.2f, 1, LSTM_LM_INIT_PYTORCH,
                             8, 4, 4};
    test_training(&train_untied, 2.0f, 7);
    test_training(&train_tied, 0.25f, 8);
    test_device_master();
    nn_cuda_release();
#endif
    TEST_END();
}
