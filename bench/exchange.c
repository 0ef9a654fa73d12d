/* Host time of the exchange (dist/exchange.c) per training step: error feedback,
 * encoding, the local backend's collectives, decoding, aggregation and the optimizer,
 * for a real model's parameter table and gradient-like values, without the forward
 * and backward passes. What the trainers spend outside the model, on the CPU and, with
 * --device cuda, next to every GPU step.
 *
 *   build/bench/exchange                                   # ResNet-110, 1 worker, the paper codecs
 *   build/bench/exchange --depth 20 --workers 4 --codec 3lc --codec dgc --steps 20
 *   build/bench/exchange --arch resnet50 --codec dgc       # 161 tensors, 25.6M values
 *
 * Per codec it prints the median over the timed steps of the whole step after backward
 * (exchange_step, exchange_optimize, exchange_deltas) and of its codec part
 * (ExchangeStats.codec_s), in ms, and the bytes up per worker.
 *
 *   build/bench/exchange --device cuda --codec 3lc --codec dgc --codec sbc
 *
 * times the device-resident exchange instead (dist/exchange_cuda.h: exchange_cuda_step,
 * exchange_cuda_optimize, exchange_cuda_deltas, the gradients and parameters in device
 * memory, the local workers sharing one GPU), each step ending when its work on the device
 * has: what a GPU trainer's step spends after its backward (docs/GPU.md). On the host
 * emulation (tests/emulation/nn/build.sh: exchange_emu) it adds the waits for the device
 * and the operations issued to it per step and worker, which only the emulation counts. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/check.h"
#include "common/rng.h"
#include "dist/exchange.h"
#include "nn/resnet.h"
#include "bench/bench.h"
#ifdef HAVE_CUDA
#include "dist/exchange_cuda.h"
#include "nn/cuda_ops.h"
#include "nn/model_cuda.h"
#include "optim/optim_cuda.h"
#include <cuda_runtime.h>
#endif
#ifdef HAVE_OPENMP
#include <omp.h>
#endif

#define MAXW 16
#define MAXSTEPS 1000

/* the host emulation's counts of the calling thread's waits for the device and of the
 * operations it issued, since the last call (tests/emulation/nn/emu_device.c); absent on a GPU */
extern unsigned long long emu_host_waits(void) __attribute__((weak));
extern unsigned long long emu_device_ops(void) __attribute__((weak));
/* and, with EMU_COUNTS=1, its table of operations by kind and waits by caller, printed at
 * exit: cleared at the first timed step, so that it holds the timed steps' (and the
 * benchmark's own upload of each step's gradients, a copy and a wait) */
extern void emu_counts_reset(void) __attribute__((weak));

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
    const ParamTable *pt;
    const float *init;
    const char *codec;
    int steps, warmup, threads, dev;
    double step_s[MAXW][MAXSTEPS], codec_s[MAXW][MAXSTEPS];
    double waits[MAXW], ops[MAXW]; /* each worker's, summed over the timed steps (emulation) */
    double up_bytes;
    int failed;
    char err[512];
} Job;

static LocalGroup *group;

/* gradient-like values of worker r at step s: heavy-tailed, about 1e-3 */
static void make_grad(float *g, size_t n, int r, long s) {
    Rng rng;
    rng_init(&rng, 99 + (uint64_t)s, (uint64_t)r);
    for (size_t i = 0; i < n; i++) {
        float z = rng_normal(&rng);
        g[i] = 1e-3f * z * (1.0f + 0.3f * z * z);
    }
}

/* the device side of a worker (--device cuda): its exchange and arenas */
typedef struct {
    struct ExchangeCuda *x;
    float *params, *grads;
} Dev;

/* 0, or -1 with the reason in err where the step cannot stay on the device (the same on
 * every worker); a device that fails one worker stops the program */
static int dev_init(Dev *d, Exchange *ex, Comm *comm, const ParamTable *pt, const OptConfig *oc, Optim *opt,
                    const float *init, char *err, size_t errlen) {
#ifdef HAVE_CUDA
    const char *why = exchange_cuda_unsupported(ex, pt, comm);
    if (why) {
        snprintf(err, errlen, "the step cannot stay on the GPU: %s", why);
        return -1;
    }
    size_t bytes = pt->total * sizeof(float);
    const char *what = NULL;
    if (optim_init_cuda(opt, oc, pt->total)) what = "the GPU optimizer could not be set up";
    else if (cuda_dev_alloc((void **)&d->params, bytes, "parameters") ||
             cuda_dev_alloc((void **)&d->grads, bytes, "gradients"))
        what = "out of device memory";
    else if (cudaMemcpy(d->params, init, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
        what = "cannot copy the parameters to the GPU";
    else if (!(d->x = exchange_cuda_new(ex, comm, pt, err, errlen))) what = err;
    if (what) {
        fprintf(stderr, "exchange: worker %d: %s\n", comm->rank, what);
        exit(1);
    }
    return 0;
#else
    (void)d, (void)ex, (void)comm, (void)pt, (void)oc, (void)opt, (void)init;
    snprintf(err, errlen, "this build has no CUDA (nvcc not found, or NO_CUDA=1)");
    return -1;
#endif
}

/* the gradient g to the device, finished before the step's clock starts */
static void dev_grads(Dev *d, const float *g, size_t n) {
#ifdef HAVE_CUDA
    if (cudaMemcpy(d->grads, g, n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess) {
        fprintf(stderr, "exchange: cannot copy the gradients to the GPU\n");
        exit(1);
    }
    model_cuda_sync();
#else
    (void)d, (void)g, (void)n;
#endif
}

/* one step on the device, ended when its kernels have: 0 or a GcError, message in err */
static int dev_step(Dev *d, Optim *opt, long s, ExchangeStats *st, char *err, size_t errlen) {
#ifdef HAVE_CUDA
    int rc = exchange_cuda_step(d->x, d->params, d->grads, opt, 0.1, 1.0, s, st);
    if (!rc) exchange_cuda_optimize(d->x, d->params, d->grads, opt, 0.1);
    if (!rc) rc = exchange_cuda_deltas(d->x, d->params, opt, s, st);
    model_cuda_sync();
    if (rc) snprintf(err, errlen, "%s", exchange_cuda_error(d->x));
    return rc;
#else
    (void)d, (void)opt, (void)s, (void)st, (void)err, (void)errlen;
    return -1;
#endif
}

static void dev_free(Dev *d) {
#ifdef HAVE_CUDA
    if (d->x) exchange_cuda_free(d->x);
    cudaFree(d->params);
    cudaFree(d->grads);
#endif
    (void)d;
}

static void fail(Job *j, int rank, const char *msg) {
    if (rank == 0) {
        snprintf(j->err, sizeof j->err, "%s", msg);
        j->failed = 1;
    }
}

static void worker(int rank, void *arg) {
    Job *j = arg;
#ifdef HAVE_OPENMP
    if (j->threads > 0) omp_set_num_threads(j->threads);
#endif
    Comm *comm = comm_local_new(group, rank);
    DistConfig cfg;
    dist_config_default(&cfg);
    char err[512];
    OptConfig oc;
    opt_config_default(&oc, OPT_SGD);
    oc.momentum = 0.9;
    oc.weight_decay = 1e-4;
    Optim opt = {0};
    Exchange *ex = NULL;
    Dev dev = {0};
    if (dist_parse_codec(&cfg, j->codec, err, sizeof err) == 0) {
        cfg.seed = 1;
        cfg.dgc_momentum = oc.momentum;
        cfg.weight_decay = oc.weight_decay;
        cfg.dgc_warmup = 0; /* the target density from the first step */
        ex = exchange_new(&cfg, comm, j->pt, &oc, err, sizeof err);
    }
    if (ex && j->dev && dev_init(&dev, ex, comm, j->pt, &oc, &opt, j->init, err, sizeof err)) {
        exchange_free(ex);
        ex = NULL;
    }
    if (!ex) {
        fail(j, rank, err);
        comm_free(comm);
        return;
    }
    if (!j->dev) optim_init(&opt, &oc, j->pt->total);
    float *params = param_arena_alloc(j->pt), *g = param_arena_alloc(j->pt);
    memcpy(params, j->init, j->pt->total * sizeof(float));
    for (int s = 0; s < j->warmup + j->steps; s++) {
        make_grad(g, j->pt->total, rank, s);
        if (j->dev) dev_grads(&dev, g, j->pt->total);
        ExchangeStats st;
        if (s == j->warmup && emu_counts_reset) {
            comm_barrier(comm); /* every worker's upload done */
            if (rank == 0) emu_counts_reset();
        }
        comm_barrier(comm); /* every worker starts the step together */
        if (emu_host_waits) emu_host_waits(), emu_device_ops(); /* counted from here */
        double t0 = mono_seconds();
        int rc;
        if (j->dev) rc = dev_step(&dev, &opt, s, &st, err, sizeof err);
        else {
            rc = exchange_step(ex, params, g, &opt, 0.1, 1.0, s, &st);
            if (!rc) exchange_optimize(ex, params, g, &opt, 0.1);
            if (!rc) rc = exchange_deltas(ex, params, g, &opt, s, &st);
            if (rc) snprintf(err, sizeof err, "%s", exchange_error(ex));
        }
        double t1 = mono_seconds();
        if (rc) {
            fail(j, rank, err);
            break;
        }
        if (s >= j->warmup) {
            j->step_s[rank][s - j->warmup] = t1 - t0;
            j->codec_s[rank][s - j->warmup] = st.codec_s;
            if (rank == 0) j->up_bytes = (double)st.up_bytes;
            if (emu_host_waits) j->waits[rank] += (double)emu_host_waits(), j->ops[rank] += (double)emu_device_ops();
        }
    }
    param_arena_free(params);
    param_arena_free(g);
#ifdef HAVE_CUDA
    if (j->dev) optim_free_cuda(&opt);
    else
#endif
        optim_free(&opt);
    dev_free(&dev);
    exchange_free(ex);
    comm_free(comm);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: exchange [options]\n"
            "  --arch A       resnet (the CIFAR ResNet of --depth; default) or resnet50 (ImageNet\n"
            "                 layout, 25.6M values, tensors of up to 2.4M): whose parameter table is used\n"
            "  --depth D      CIFAR ResNet depth 6n+2 (default 110)\n"
            "  --workers N    local worker threads (default 1, at most %d)\n"
            "  --codec SPEC   a --codec value of the trainers; repeat for several (default: fp32,\n"
            "                 fp16, int8, terngrad, 3lc, onebit, topk, dgc, sbc, gcomp)\n"
            "  --steps S      timed steps (default 10, at most %d)\n"
            "  --warmup W     untimed steps first (default 2)\n"
            "  --threads T    OpenMP threads per worker (default: the OpenMP default)\n"
            "  --device D     cpu (default): the host exchange; cuda: the device-resident one\n"
            "                 (dist/exchange_cuda.h), the workers sharing one GPU\n"
            "  --help\n",
            MAXW, MAXSTEPS);
}

int main(int argc, char **argv) {
    int depth = 110, workers = 1, steps = 10, warmup = 2, threads = 0, ncodecs = 0, dev = 0, arch50 = 0;
    const char *codecs[64];
    static const struct option opts[] = {{"depth", required_argument, 0, 'd'},  {"workers", required_argument, 0, 'w'},
                                         {"codec", required_argument, 0, 'c'},  {"steps", required_argument, 0, 's'},
                                         {"warmup", required_argument, 0, 'u'}, {"threads", required_argument, 0, 't'},
                                         {"device", required_argument, 0, 'D'}, {"arch", required_argument, 0, 'a'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int ok = 1;
        switch (o) {
        case 'd': ok = parse_int(optarg, 8, 1202, &depth) && (depth - 2) % 6 == 0; break;
        case 'w': ok = parse_int(optarg, 1, MAXW, &workers); break;
        case 'c':
            if (ncodecs < 64) codecs[ncodecs++] = optarg;
            break;
        case 's': ok = parse_int(optarg, 1, MAXSTEPS, &steps); break;
        case 'u': ok = parse_int(optarg, 0, 1000, &warmup); break;
        case 't': ok = parse_int(optarg, 1, 1024, &threads); break;
        case 'a':
            ok = !strcmp(optarg, "resnet") || !strcmp(optarg, "resnet50");
            arch50 = !strcmp(optarg, "resnet50");
            break;
        case 'D':
            ok = !strcmp(optarg, "cpu") || !strcmp(optarg, "cuda");
            dev = !strcmp(optarg, "cuda");
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (!ok) {
            const char *name = "?";
            for (const struct option *q = opts; q->name; q++)
                if (q->val == o) name = q->name;
            fprintf(stderr, "exchange: bad value '%s' for --%s (see --help)\n", optarg, name);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "exchange: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
#ifdef HAVE_CUDA
    if (dev && nn_cuda_device_count() < 1) {
        fprintf(stderr, "exchange: --device cuda: no CUDA device is visible (cudaGetDeviceCount reports none or fails)\n");
        return 1;
    }
#endif
    static const char *def[] = {"fp32", "fp16", "int8", "terngrad", "3lc", "onebit", "topk", "dgc", "sbc", "gcomp"};
    if (ncodecs == 0)
        for (size_t i = 0; i < sizeof def / sizeof def[0]; i++) codecs[ncodecs++] = def[i];

    ResNetConfig rc = resnet_cifar_config(depth);
    ResNet50Config rc50 = resnet50_config();
    Model *m = arch50 ? resnet50_create(&rc50, 1) : resnet_cifar_create(&rc, 1);
    const ParamTable *pt = &m->pt;
    printf("exchange: ResNet-%d%s, %zu values in %d tensors, %d worker%s, %d steps (median), %s, threads %d\n",
           arch50 ? 50 : depth, arch50 ? " (ImageNet)" : "", param_table_count(pt), pt->n, workers, workers > 1 ? "s" : "", steps,
           dev ? "device-resident (--device cuda)" : "host exchange",
#ifdef HAVE_OPENMP
           threads > 0 ? threads : omp_get_max_threads()
#else
           1
#endif
    );
    int counted = dev && emu_host_waits; /* the host emulation counts what a GPU cannot */
    printf("%-24s %10s %10s %12s%s\n", "codec", "step ms", "codec ms", "up bytes",
           counted ? "   waits/step    ops/step" : "");
    int status = 0;
    for (int c = 0; c < ncodecs; c++) {
        Job *j = callocCheck(1, sizeof *j);
        j->pt = pt;
        j->init = m->params;
        j->codec = codecs[c];
        j->steps = steps;
        j->warmup = warmup;
        j->threads = threads;
        j->dev = dev;
        group = comm_local_group_new(workers);
        comm_local_run(workers, worker, j);
        comm_local_group_free(group);
        if (j->failed) {
            fprintf(stderr, "exchange: --codec %s: %s\n", codecs[c], j->err);
            status = 1;
        } else {
            /* a step lasts as long as its slowest worker */
            double st[MAXSTEPS], cs[MAXSTEPS];
            for (int s = 0; s < steps; s++) {
                st[s] = cs[s] = 0;
                for (int w = 0; w < workers; w++) {
                    if (j->step_s[w][s] > st[s]) st[s] = j->step_s[w][s];
                    if (j->codec_s[w][s] > cs[s]) cs[s] = j->codec_s[w][s];
                }
            }
            printf("%-24s %10.2f %10.2f %12.0f", codecs[c], 1e3 * median(st, steps), 1e3 * median(cs, steps),
                   j->up_bytes);
            if (counted) { /* per step of one worker, the mean over the workers */
                double w = 0, o = 0;
                for (int r = 0; r < workers; r++) w += j->waits[r], o += j->ops[r];
                printf(" %13.1f %11.1f", w / (workers * steps), o / (workers * steps));
            }
            printf("\n");
        }
        fflush(stdout);
        free(j);
    }
    model_free(m);
    return status;
}
