/* Training throughput of the CIFAR ResNet on the GPU (nn/resnet_cuda.h):
 * forward + backward on the GPU, then an SGD-with-momentum update (lr 0.01,
 * momentum 0.9, weight decay 1e-4: torch.optim.SGD, optim/optim.h) on the HOST arenas, which
 * is where the GPU model keeps its parameters for the trainer, the optimizer
 * and the distributed layer. A step therefore includes the parameter and state
 * upload, the gradient download and the host update; the copy time is measured
 * and printed apart. Fixed random batch, fp32 (no TF32 unless --tf32), the same
 * step as bench/resnet_torch.py --device cuda.
 * --device-optim measures the other design: the model in device-master mode
 * (nn/model_cuda.h) and the same SGD as a kernel (optim/optim_cuda.h), so no
 * parameter or gradient crosses to the host (the BN statistics still do).
 *
 *   build/bench/resnet_gpu --depth 20 --batch 128 --steps 50 [--device-optim]
 *
 * Prints per-step statistics and a final line "gcx images/s: <best> (median <m>)". */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/check.h"
#include "common/rng.h"
#include "nn/parallel.h"
#include "nn/resnet.h"
#include "nn/resnet_cuda.h"
#include "nn/summary.h"
#include "bench/bench.h"
#ifdef HAVE_CUDA
#include "common/cuda_check.h"
#include "nn/cuda_ops.h"
#include "nn/model_cuda.h"
#include "optim/optim_cuda.h"
#endif

static void usage(FILE *f) {
    fprintf(f,
            "usage: resnet_gpu [options]\n"
            "  --depth D          ResNet depth, 6n+2 (default 20)\n"
            "  --batch N          batch size (default 128)\n"
            "  --steps S          timed steps (default 50)\n"
            "  --warmup W         untimed steps first (default 5; the first ones choose cuDNN algorithms)\n"
            "  --shortcut A|B     shortcut option (default A)\n"
            "  --tf32             allow TF32 tensor cores (default: strict fp32)\n"
            "  --nondeterministic let cuDNN pick non-deterministic algorithms when faster\n"
            "  --fft-winograd     let cuDNN pick FFT and Winograd convolutions (other rounding; PyTorch's\n"
            "                     cudnn.benchmark may pick them)\n"
            "  --heuristic        rank cuDNN's convolution algorithms by its heuristic (the trainers' default:\n"
            "                     reproducible) instead of timing them (Find; PyTorch's cudnn.benchmark)\n"
            "  --device-optim     parameters stay on the GPU and SGD runs there (default: SGD on the host arenas)\n"
            "  --help\n");
}

int main(int argc, char **argv) {
    int depth = 20, batch = 128, steps = 50, warmup = 5, tf32 = 0, nondet = 0, devopt = 0, fftw = 0, heur = 0;
    ResNetShortcut sc = RESNET_SHORTCUT_A;
    static const struct option opts[] = {{"depth", 1, 0, 'd'},  {"batch", 1, 0, 'b'},    {"steps", 1, 0, 's'},
                                         {"warmup", 1, 0, 'w'}, {"shortcut", 1, 0, 'x'}, {"tf32", 0, 0, 't'},
                                         {"nondeterministic", 0, 0, 'n'}, {"device-optim", 0, 0, 'o'},
                                         {"fft-winograd", 0, 0, 'f'}, {"heuristic", 0, 0, 'u'},
                                         {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int o, idx = 0;
    while ((o = getopt_long(argc, argv, "", opts, &idx)) != -1) {
        int ok = 1;
        switch (o) {
        case 'd': ok = parse_int(optarg, 8, 1202, &depth); break;
        case 'b': ok = parse_int(optarg, 1, 65536, &batch); break;
        case 's': ok = parse_int(optarg, 1, 1000000, &steps); break;
        case 'w': ok = parse_int(optarg, 0, 1000000, &warmup); break;
        case 'x':
            ok = (strcmp(optarg, "A") == 0 || strcmp(optarg, "B") == 0);
            sc = optarg[0] == 'B' ? RESNET_SHORTCUT_B : RESNET_SHORTCUT_A;
            break;
        case 't': tf32 = 1; break;
        case 'n': nondet = 1; break;
        case 'o': devopt = 1; break;
        case 'f': fftw = 1; break;
        case 'u': heur = 1; break;
        case 'h': usage(stdout); return 0;
        default: ok = 0;
        }
        if (!ok) {
            if (o != '?') fprintf(stderr, "resnet_gpu: bad value for --%s: %s\n", opts[idx].name, optarg ? optarg : "");
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "resnet_gpu: unexpected argument %s\n", argv[optind]);
        usage(stderr);
        return 2;
    }
#ifndef HAVE_CUDA
    (void)tf32, (void)nondet, (void)sc, (void)devopt, (void)fftw, (void)heur;
    fprintf(stderr, "resnet_gpu: this build has no CUDA (nvcc not found, or NO_CUDA=1)\n");
    return 1;
#else
    nn_cuda_set_tf32(tf32);
    nn_cuda_set_deterministic(!nondet);
    nn_cuda_set_fft_winograd(fftw);
    nn_cuda_set_conv_search(heur ? NN_CONV_HEURISTIC : NN_CONV_FIND);
    ResNetConfig cfg = resnet_cifar_config(depth);
    cfg.shortcut = sc;
    Model *m = resnet_cifar_create_cuda(&cfg, batch);
    if (!m) return 1;
    model_print_summary(stdout, m, 0);
    struct cudaDeviceProp prop;
    int dev = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));

    size_t nx = (size_t)batch * 3 * 32 * 32;
    float *x = mallocCheck(nx * sizeof(float));
    int *y = mallocCheck((size_t)batch * sizeof(int));
    Rng rng;
    rng_init(&rng, 1, 0);
    for (size_t i = 0; i < nx; i++) x[i] = rng_normal(&rng);
    for (int i = 0; i < batch; i++) y[i] = (int)rng_below(&rng, 10);
    /* torch.optim.SGD(lr 0.01, momentum 0.9, weight_decay 1e-4): optim/optim.h on the
     * host arenas, or its kernels (optim/optim_cuda.h) with --device-optim */
    const double lr = 0.01;
    OptConfig oc;
    opt_config_default(&oc, OPT_SGD);
    oc.momentum = 0.9;
    oc.weight_decay = 1e-4;
    Optim opt;
    float *params = m->params, *grads = m->grads;
    if (devopt) {
        if (optim_init_cuda(&opt, &oc, m->pt.total) || model_cuda_set_device_master(m, 1)) return 1;
        params = model_cuda_device_params(m);
        grads = model_cuda_device_grads(m);
    } else if (optim_init(&opt, &oc, m->pt.total)) {
        return 1;
    }

    Batch b = {.x = x, .y = y, .N = batch};
    double *t = mallocCheck((size_t)steps * sizeof(double));
    double sgd_s = 0, fb_s = 0;
    float loss = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup) model_cuda_copy_stats_reset(m);
        double t0 = mono_seconds();
        loss = model_forward(m, &b, 1, NULL);
        model_backward(m);
        if (devopt) model_cuda_sync(); /* (the host design's gradient download waits for it) */
        double t1 = mono_seconds();
        optim_begin_step(&opt);
        if (devopt) {
            if (optim_update_cuda(&opt, params, grads, lr, 0, m->pt.total)) return 1;
            cudaCheck(cudaDeviceSynchronize());
        } else if (optim_update(&opt, params, grads, lr, 0, m->pt.total)) {
            return 1;
        }
        double t2 = mono_seconds();
        if (s >= warmup) {
            t[s - warmup] = t2 - t0;
            fb_s += t1 - t0;
            sgd_s += t2 - t1;
        }
    }
    double *sorted = mallocCheck((size_t)steps * sizeof(double));
    memcpy(sorted, t, (size_t)steps * sizeof(double));
    qsort(sorted, (size_t)steps, sizeof(double), cmp_double);
    double best = sorted[0], med = sorted[steps / 2];
    const ModelCudaCopyStats *cs = model_cuda_copy_stats(m);
    double copy_s = cs ? (cs->up_s + cs->down_s) / steps : 0.0;
    double mean = (fb_s + sgd_s) / steps;
    printf("gcx ResNet-%d, batch %d, %s, fp32%s%s%s%s: step best %.2f ms, median %.2f ms, loss %.3f\n", depth, batch,
           prop.name, tf32 ? " (TF32 allowed)" : " (no TF32)", nondet ? ", non-deterministic algorithms" : "",
           fftw ? ", FFT/Winograd allowed" : "", devopt ? ", SGD on the device" : "",
           best * 1e3, med * 1e3, loss);
    printf("  per step (mean): forward+backward %.2f ms, of which arena copies %.2f ms (%.1f%%: %.2f MB up, %.2f MB "
           "down); %s SGD %.2f ms",
           1e3 * fb_s / steps, 1e3 * copy_s, mean > 0 ? 100.0 * copy_s / mean : 0.0,
           cs ? cs->up_bytes / 1e6 / steps : 0.0, cs ? cs->down_bytes / 1e6 / steps : 0.0,
           devopt ? "device" : "host", 1e3 * sgd_s / steps);
    if (devopt) printf(" (parameters stay on the GPU)\n");
    else printf(" (%d threads)\n", gc_num_threads());
    printf("gcx images/s: %.1f (median %.1f)\n", batch / best, batch / med);
    if (devopt) {
        model_cuda_set_device_master(m, 0);
        optim_free_cuda(&opt);
    } else {
        optim_free(&opt);
    }
    free(t), free(sorted), free(x), free(y);
    model_free(m);
    nn_cuda_release();
    return 0;
#endif
}
