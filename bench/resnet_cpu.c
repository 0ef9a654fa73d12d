/* Training throughput of the CIFAR ResNet on the CPU (nn/resnet.c): forward,
 * backward and an SGD-with-momentum update per step, on a fixed random batch,
 * the same step as bench/resnet_torch.py.
 *
 *   build/bench/resnet_cpu --depth 20 --batch 128 --threads 2 --steps 20
 *
 * Prints per-step statistics and a final line "gcx images/s: <best> (median <m>)";
 * --profile adds the time per layer type (conv forward / backward, batch norm,
 * the rest) from the model's built-in timers. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/check.h"
#include "common/rng.h"
#include "nn/conv2d.h"
#include "nn/parallel.h"
#include "nn/resnet.h"
#include "nn/summary.h"
#include "bench/bench.h"

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: resnet_cpu [options]\n"
            "  --depth D      ResNet depth, 6n+2 (default 20)\n"
            "  --batch N      batch size (default 128)\n"
            "  --threads T    OpenMP threads (default: all)\n"
            "  --steps S      timed steps (default 20)\n"
            "  --warmup W     untimed steps first (default 3)\n"
            "  --chunk F      im2col chunk target in floats (default: library default)\n"
            "  --shortcut A|B shortcut option (default A)\n"
            "  --profile      print time per layer type\n"
            "  --help\n");
}

int main(int argc, char **argv) {
    int depth = 20, batch = 128, threads = 0, steps = 20, warmup = 3, chunk = 0, profile = 0;
    ResNetShortcut sc = RESNET_SHORTCUT_A;
    static const struct option opts[] = {{"depth", 1, 0, 'd'},   {"batch", 1, 0, 'b'},  {"threads", 1, 0, 't'},
                                         {"steps", 1, 0, 's'},   {"warmup", 1, 0, 'w'}, {"chunk", 1, 0, 'c'},
                                         {"shortcut", 1, 0, 'x'}, {"profile", 0, 0, 'p'}, {"help", 0, 0, 'h'},
                                         {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int ok = 1;
        switch (o) {
        case 'd': ok = parse_int(optarg, 8, 1202, &depth); break;
        case 'b': ok = parse_int(optarg, 1, 65536, &batch); break;
        case 't': ok = parse_int(optarg, 1, 1024, &threads); break;
        case 's': ok = parse_int(optarg, 1, 1000000, &steps); break;
        case 'w': ok = parse_int(optarg, 0, 1000000, &warmup); break;
        case 'c': ok = parse_int(optarg, 1, 1 << 30, &chunk); break;
        case 'x':
            ok = (strcmp(optarg, "A") == 0 || strcmp(optarg, "B") == 0);
            sc = optarg[0] == 'B' ? RESNET_SHORTCUT_B : RESNET_SHORTCUT_A;
            break;
        case 'p': profile = 1; break;
        case 'h': usage(stdout); return 0;
        default: ok = 0;
        }
        if (!ok) {
            if (o != '?') fprintf(stderr, "resnet_cpu: bad value for --%s: %s\n", opts[0].name, optarg ? optarg : "");
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "resnet_cpu: unexpected argument %s\n", argv[optind]);
        usage(stderr);
        return 2;
    }
#ifdef HAVE_OPENMP
    if (threads) omp_set_num_threads(threads);
#endif
    threads = gc_num_threads();
    if (chunk) conv2d_set_chunk_floats((size_t)chunk);

    ResNetConfig cfg = resnet_cifar_config(depth);
    cfg.shortcut = sc;
    Model *m = resnet_cifar_create(&cfg, batch);
    if (!m) return 2;
    model_print_summary(stdout, m, 0);

    size_t nx = (size_t)batch * 3 * 32 * 32;
    float *x = mallocCheck(nx * sizeof(float));
    int *y = mallocCheck((size_t)batch * sizeof(int));
    Rng rng;
    rng_init(&rng, 1, 0);
    for (size_t i = 0; i < nx; i++) x[i] = rng_normal(&rng);
    for (int i = 0; i < batch; i++) y[i] = (int)rng_below(&rng, 10);
    float *mom = callocCheck(m->pt.total, sizeof(float));
    const float lr = 0.01f, mu = 0.9f, wd = 1e-4f;

    Batch b = {.x = x, .y = y, .N = batch};
    double *t = mallocCheck((size_t)steps * sizeof(double));
    double *tc = mallocCheck((size_t)steps * sizeof(double));
    float loss = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup && profile) resnet_profile(m, 1);
        double t0 = mono_seconds(), c0 = cpu_now();
        loss = model_forward(m, &b, 1, NULL);
        model_backward(m);
        /* SGD with momentum and weight decay, as torch.optim.SGD */
        float *p = m->params, *g = m->grads;
        size_t n = m->pt.total;
        OMP_FOR
        for (size_t i = 0; i < n; i++) {
            float d = g[i] + wd * p[i];
            mom[i] = mu * mom[i] + d;
            p[i] -= lr * mom[i];
        }
        double dt = mono_seconds() - t0;
        if (s >= warmup) t[s - warmup] = dt, tc[s - warmup] = cpu_now() - c0;
    }
    double *sorted = mallocCheck((size_t)steps * sizeof(double));
    memcpy(sorted, t, (size_t)steps * sizeof(double));
    qsort(sorted, (size_t)steps, sizeof(double), cmp_double);
    double best = sorted[0], med = sorted[steps / 2];
    qsort(tc, (size_t)steps, sizeof(double), cmp_double);
    printf("gcx ResNet-%d, batch %d, %d threads: step best %.1f ms, median %.1f ms (CPU time best %.1f ms), loss "
           "%.3f\n",
           depth, batch, threads, best * 1e3, med * 1e3, tc[0] * 1e3, loss);
    if (profile) resnet_profile_report(m, stdout, steps);
    printf("gcx images/s: %.1f (median %.1f)\n", batch / best, batch / med);
    free(t), free(tc), free(sorted), free(x), free(y), free(mom);
    model_free(m);
    return 0;
}
