/* GPU optimizers against the CPU's (optim/optim_cuda.h vs optim/optim.h).
 *
 * For every optimizer configuration (SGD plain / weight decay / momentum /
 * dampening / Nesterov, Adam, AdamW, AdaGrad with lr decay and initial
 * accumulator, RMSProp plain / centered / momentum), 10 steps with a changing
 * learning rate and fresh gradients (Gaussian, exact zeros, tiny and large
 * values), the arena updated in several tensor ranges (on even steps in range tables,
 * optim_update_cuda_ranges: 70 pieces, the odd ones in one call and the even in another,
 * or all of them, adjacent, in one):
 *   - parameters and every state arena after each step: bit-identical;
 *   - the GCOMP levels for the coming step (guard 0 = the paper's rule, 1, 2),
 *     whole arena and a slice (optim_gcomp_levels_at): identical;
 *   - the paper's delta: bit-identical (NaN where the CPU has NaN: the GPU's
 *     canonical NaN has another payload than x86's default NaN);
 * plus optim_sgd_plain and optim_mask_momentum over range tables, a table with a range
 * outside the arena refused whole, and state upload/download.
 * Tolerance: none (bits), because the CUDA twins promise bit-identical
 * results: same operations, same roundings, no contraction.
 * Skips (one passed check) without CUDA or without a GPU.
 * Known CPU issue (reported, optim/optim.c is not ours): built with gcc 12
 * -O3 -march=native, the guarded metric's SGD-momentum loop (gcomp_bound, the
 * `omp parallel for simd` path taken for n >= 32768) gives levels that differ
 * from its own scalar expression (and between thread counts); the GPU follows
 * the expression, so "momentum" configs then fail the guard >= 1 level checks.
 * Verified against a host emulation of the kernels: every other check passes. */
#include "tests/test.h"

#ifndef HAVE_CUDA
int main(void) {
    printf("built without CUDA: GPU optimizer parity skipped\n");
    CHECK(1, "skipped");
    TEST_END();
}
#else

#include <stdint.h>

#include "common/cuda_check.h"
#include "common/errors.h"
#include "common/rng.h"
#include "optim/optim.h"
#include "optim/optim_cuda.h"

static const char *const configs[] = {
    "sgd",
    "sgd:wd=0.01",
    "momentum",
    "momentum:dampening=0.3",
    "momentum:wd=5e-4",
    "nesterov",
    "nesterov:wd=5e-4",
    "adam",
    "adam:wd=0.01",
    "adam:beta1=0.5,beta2=0.9,eps=1e-6",
    "adamw",
    "adamw:wd=0.1,beta1=0.8",
    "adagrad",
    "adagrad:lr_decay=0.01,wd=0.001,init_acc=0.1",
    "rmsprop",
    "rmsprop:centered=1",
    "rmsprop:momentum=0.9",
    "rmsprop:centered=1,momentum=0.5,wd=0.01,alpha=0.9",
};
#define NCFG ((int)(sizeof configs / sizeof configs[0]))
#define N 50021
#define STEPS 10

static int shown;
#define SAME(ok, ...)                                       \
    do {                                                    \
        if (ok) {                                           \
            test_passed_++;                                 \
        } else {                                            \
            test_failed_++;                                 \
            if (shown++ < 30) {                             \
                printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                printf(__VA_ARGS__);                        \
                printf("\n");                               \
            }                                               \
        }                                                   \
    } while (0)

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* index of the first float whose bits differ (NaN matches NaN), or -1 */
static long diff_f(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (fbits(a[i]) != fbits(b[i]) && !(isnan(a[i]) && isnan(b[i]))) return (long)i;
    return -1;
}

static float *dnew(size_t n) {
    float *p = NULL;
    cudaCheck(cudaMalloc((void **)&p, n * sizeof(float)));
    return p;
}
static void up(float *d, const float *h, size_t n) { cudaCheck(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice)); }
static void down(float *h, const float *d, size_t n) { cudaCheck(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost)); }

static void gen_grads(float *g, size_t n, Rng *r, int step) {
    float scale = step % 3 == 0 ? 1e-3f : step % 3 == 1 ? 1.0f : 30.0f;
    for (size_t i = 0; i < n; i++) {
        float u = rng_uniform(r);
        if (u < 0.05f) g[i] = 0.0f;
        else if (u < 0.07f) g[i] = rng_normal(r) * 1e-30f;
        else if (u < 0.08f) g[i] = -0.0f;
        else g[i] = rng_normal(r) * scale;
    }
}

/* tensor ranges updated one by one */
static const size_t cuts[] = {0, 1000, 1001, 30000, N};
#define NCUTS 5

/* The arena cut into NPIECES uneven pieces (piece i from piece_off[i], piece_n[i] values
 * long), for the range tables: the even pieces in one call and the odd ones in another
 * take 35 non-adjacent ranges each, so two launches of a table each */
#define NPIECES 70
static size_t piece_off[NPIECES], piece_n[NPIECES];
static void pieces_init(void) {
    size_t at = 0;
    for (int i = 0; i < NPIECES; i++) {
        piece_off[i] = at;
        piece_n[i] = i == NPIECES - 1 ? N - at : (size_t)(i % 5 == 0 ? 1 : 17 * i + 300);
        at += piece_n[i];
    }
}
/* the even (odd = 0) or odd pieces' offsets and lengths into off, n: how many */
static size_t pieces(size_t *off, size_t *n, int odd) {
    size_t k = 0;
    for (int i = odd; i < NPIECES; i += 2) off[k] = piece_off[i], n[k++] = piece_n[i];
    return k;
}

static void compare_state(const Optim *h, const Optim *d, const char *cfg, int step) {
    float *tmp = malloc(N * sizeof(float));
    for (int s = 0; s < h->n_state; s++) {
        down(tmp, d->state[s], N);
        long at = diff_f(h->state[s], tmp, N);
        SAME(at < 0, "%s step %d: state %s differs at %ld: cpu %a gpu %a", cfg, step, h->state_name[s], at,
             at >= 0 ? h->state[s][at] : 0.0f, at >= 0 ? tmp[at] : 0.0f);
    }
    free(tmp);
}

static void run_config(const char *spec) {
    OptConfig cfg;
    char err[256];
    if (opt_config_parse(&cfg, spec, err, sizeof err)) {
        CHECK(0, "%s: %s", spec, err);
        return;
    }
    Optim h, d;
    CHECK(optim_init(&h, &cfg, N) == 0, "%s: optim_init", spec);
    CHECK(optim_init_cuda(&d, &cfg, N) == 0, "%s: optim_init_cuda", spec);
    CHECK(optim_state_count(&d) == optim_state_count(&h), "%s: state count", spec);
    compare_state(&h, &d, spec, 0); /* initial fills (AdaGrad's accumulator) */
    float *p = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float)), *tmp = malloc(N * sizeof(float));
    float *delta = malloc(N * sizeof(float));
    uint8_t *lv = malloc(N), *lvg = malloc(N);
    float *dp = dnew(N), *dg = dnew(N), *ddelta = dnew(N);
    uint8_t *dlv = NULL;
    cudaCheck(cudaMalloc((void **)&dlv, N));
    Rng r;
    rng_init(&r, 2024, 1);
    for (size_t i = 0; i < N; i++) p[i] = i % 97 == 0 ? 0.0f : rng_normal(&r) * 0.1f;
    up(dp, p, N);
    for (int step = 1; step <= STEPS; step++) {
        double lr = 0.01 * step * (step % 2 ? 1.0 : 0.37);
        gen_grads(g, N, &r, step);
        up(dg, g, N);
        /* GCOMP levels and delta for this step (before begin_step) */
        for (int guard = 0; guard <= 2; guard++) {
            h.cfg.gcomp_guard_bits = d.cfg.gcomp_guard_bits = guard;
            int a = optim_gcomp_levels(lv, &h, p, g, lr, 0, N);
            int b = optim_gcomp_levels_cuda(dlv, &d, dp, dg, lr, 0, N);
            cudaCheck(cudaMemcpy(lvg, dlv, N, cudaMemcpyDeviceToHost));
            long at = -1;
            for (size_t i = 0; i < N && at < 0; i++)
                if (lv[i] != lvg[i]) at = (long)i;
            SAME(a == 0 && b == 0 && at < 0, "%s step %d guard %d: levels differ at %ld (cpu %d gpu %d)", spec, step,
                 guard, at, at >= 0 ? lv[at] : 0, at >= 0 ? lvg[at] : 0);
            size_t off = 1001, n = 20000;
            a = optim_gcomp_levels_at(lv, &h, p + off, g + off, lr, off, n);
            b = optim_gcomp_levels_at_cuda(dlv, &d, dp + off, dg + off, lr, off, n);
            cudaCheck(cudaMemcpy(lvg, dlv, n, cudaMemcpyDeviceToHost));
            SAME(a == 0 && b == 0 && memcmp(lv, lvg, n) == 0, "%s step %d guard %d: levels_at differ", spec, step, guard);
        }
        h.cfg.gcomp_guard_bits = d.cfg.gcomp_guard_bits = cfg.gcomp_guard_bits;
        {
            size_t off = 1000, n = N - 1000;
            int a = optim_gcomp_delta(delta, &h, p + off, g + off, lr, off, n);
            int b = optim_gcomp_delta_cuda(ddelta, &d, dp + off, dg + off, lr, off, n);
            down(tmp, ddelta, n);
            long at = diff_f(delta, tmp, n);
            SAME(a == 0 && b == 0 && at < 0, "%s step %d: delta differs at %ld: cpu %a gpu %a", spec, step, at,
                 at >= 0 ? delta[at] : 0.0f, at >= 0 ? tmp[at] : 0.0f);
        }
        optim_begin_step(&h);
        optim_begin_step(&d);
        for (int k = 0; k + 1 < NCUTS; k++) {
            int a = optim_update(&h, p, g, lr, cuts[k], cuts[k + 1] - cuts[k]);
            int b = 0;
            if (step % 2) b = optim_update_cuda(&d, dp, dg, lr, cuts[k], cuts[k + 1] - cuts[k]);
            else if (k == 0 && step % 4) /* even steps: the device's in range tables, the odd pieces first */
                for (int odd = 1; odd >= 0 && !b; odd--) {
                    size_t off[NPIECES], n[NPIECES], m = pieces(off, n, odd);
                    b = optim_update_cuda_ranges(&d, dp, dg, lr, off, n, m);
                }
            else if (k == 0) /* or all of them in one table, adjacent: merged into one range */
                b = optim_update_cuda_ranges(&d, dp, dg, lr, piece_off, piece_n, NPIECES);
            SAME(a == 0 && b == 0, "%s step %d: update rc %d %d", spec, step, a, b);
        }
        down(tmp, dp, N);
        long at = diff_f(p, tmp, N);
        SAME(at < 0, "%s step %d: params differ at %ld: cpu %a gpu %a (grad %a)", spec, step, at,
             at >= 0 ? p[at] : 0.0f, at >= 0 ? tmp[at] : 0.0f, at >= 0 ? g[at] : 0.0f);
        compare_state(&h, &d, spec, step);
    }
    /* errors as the CPU; a table with one range outside the arena updates nothing */
    SAME(optim_update_cuda(&d, dp, dg, 0.1, N - 5, 6) == -GC_ERR_PARAM, "%s: range check", spec);
    {
        size_t off[3] = {0, 100, N - 5}, n[3] = {50, 50, 6};
        down(tmp, dp, N);
        int rc = optim_update_cuda_ranges(&d, dp, dg, 0.1, off, n, 3);
        float *after = malloc(N * sizeof(float));
        down(after, dp, N);
        SAME(rc == -GC_ERR_PARAM && diff_f(tmp, after, N) < 0, "%s: a range table's check (%d)", spec, rc);
        free(after);
    }
    /* download into a fresh host optimizer, upload into a fresh device one: one more step agrees */
    Optim h2, d2;
    optim_init(&h2, &cfg, N);
    optim_init_cuda(&d2, &cfg, N);
    CHECK(optim_cuda_download(&h2, &d) == 0 && optim_get_step(&h2) == optim_get_step(&h), "%s: download", spec);
    int same = 1;
    for (int s = 0; s < h.n_state; s++) same &= diff_f(h.state[s], h2.state[s], N) < 0;
    CHECK(same, "%s: downloaded state equals the CPU state", spec);
    CHECK(optim_cuda_upload(&d2, &h) == 0, "%s: upload", spec);
    float *dp2 = dnew(N);
    up(dp2, p, N);
    optim_begin_step(&h);
    optim_begin_step(&d2);
    optim_update(&h, p, g, 0.05, 0, N);
    optim_update_cuda(&d2, dp2, dg, 0.05, 0, N);
    down(tmp, dp2, N);
    SAME(diff_f(p, tmp, N) < 0, "%s: step after upload", spec);
    compare_state(&h, &d2, spec, STEPS + 1);
    cudaCheck(cudaFree(dp2));
    optim_free(&h2);
    optim_free_cuda(&d2);
    optim_free(&h);
    optim_free_cuda(&d);
    free(p);
    free(g);
    free(tmp);
    free(delta);
    free(lv);
    free(lvg);
    cudaCheck(cudaFree(dp));
    cudaCheck(cudaFree(dg));
    cudaCheck(cudaFree(ddelta));
    cudaCheck(cudaFree(dlv));
}

static void run_helpers(void) {
    float *p = malloc(N * sizeof(float)), *u = malloc(N * sizeof(float)), *tmp = malloc(N * sizeof(float));
    Rng r;
    rng_init(&r, 77, 0);
    for (size_t i = 0; i < N; i++) {
        p[i] = rng_normal(&r);
        u[i] = rng_normal(&r) * 1e-2f;
    }
    float *dp = dnew(N), *du = dnew(N);
    up(dp, p, N);
    up(du, u, N);
    size_t off[NPIECES], n[NPIECES], k = pieces(off, n, 1);
    for (size_t i = 0; i < k; i++) optim_sgd_plain(p + off[i], u + off[i], 0.3, n[i]);
    optim_sgd_plain_cuda(dp, du, 0.3, off, n, k);
    down(tmp, dp, N);
    SAME(diff_f(p, tmp, N) < 0, "optim_sgd_plain over the odd pieces");
    /* the momentum masked over the even pieces, where a value of the mask is set */
    OptConfig cfg;
    opt_config_default(&cfg, OPT_SGD);
    cfg.momentum = 0.9;
    Optim h, d;
    optim_init(&h, &cfg, N);
    optim_init_cuda(&d, &cfg, N);
    uint8_t *mask = malloc(N), *dmask = NULL;
    for (size_t i = 0; i < N; i++) {
        h.state[0][i] = rng_normal(&r);
        mask[i] = rng_uniform(&r) < 0.3f;
    }
    cudaCheck(cudaMalloc((void **)&dmask, N));
    cudaCheck(cudaMemcpy(dmask, mask, N, cudaMemcpyHostToDevice));
    up(d.state[0], h.state[0], N);
    k = pieces(off, n, 0);
    int a = 1;
    for (size_t i = 0; i < k; i++) a &= optim_mask_momentum(&h, mask + off[i], off[i], n[i]);
    int b = optim_mask_momentum_cuda(&d, dmask, off, n, k);
    down(tmp, d.state[0], N);
    SAME(a == 1 && b == 1 && diff_f(h.state[0], tmp, N) < 0, "optim_mask_momentum over the even pieces (%d %d)", a, b);
    optim_free(&h);
    optim_free_cuda(&d);
    free(mask);
    cudaCheck(cudaFree(dmask));
    free(p);
    free(u);
    free(tmp);
    cudaCheck(cudaFree(dp));
    cudaCheck(cudaFree(du));
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("no CUDA device: GPU optimizer parity skipped\n");
        CHECK(1, "skipped");
        TEST_END();
    }
    CHECK(optim_cuda_available(), "optim_cuda_available");
    pieces_init();
    for (int k = 0; k < NCFG; k++) {
        int f0 = test_failed_;
        run_config(configs[k]);
        printf("  %-50s %s\n", configs[k], test_failed_ > f0 ? "FAILED" : "bit-identical");
    }
    run_helpers();
    OptConfig bad;
    opt_config_default(&bad, OPT_ADAM);
    bad.beta1 = 2.0;
    Optim o;
    CHECK(optim_init_cuda(&o, &bad, 10) == -GC_ERR_PARAM, "invalid config rejected");
    TEST_END();
}
#endif
