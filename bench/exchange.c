/* Host time of the exchange (dist/exchange.c) per training step: error feedback,
 * encoding, the local backend's collectives, decoding, aggregation and the optimizer,
 * for a real model's parameter table and gradient-like values, without the forward
 * and backward passes. What the trainers spend outside the model, on the CPU and, with
 * --device cuda, next to every GPU step.
 *
 *   build/bench/exchange                                   # ResNet-110, 1 worker, the paper codecs
 *   build/bench/exchange --depth 20 --workers 4 --codec 3lc --codec dgc --steps 20
 *
 * Per codec it prints the median over the timed steps of the whole step after backward
 * (exchange_step, exchange_optimize, exchange_deltas) and of its codec part
 * (ExchangeStats.codec_s), in ms, and the bytes up per worker. */
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
#ifdef HAVE_OPENMP
#include <omp.h>
#endif

#define MAXW 16
#define MAXSTEPS 1000

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
    const ParamTable *pt;
    const float *init;
    const char *codec;
    int steps, warmup, threads;
    double step_s[MAXW][MAXSTEPS], codec_s[MAXW][MAXSTEPS];
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
    Optim opt;
    Exchange *ex = NULL;
    if (dist_parse_codec(&cfg, j->codec, err, sizeof err) == 0) {
        cfg.seed = 1;
        cfg.dgc_momentum = oc.momentum;
        cfg.weight_decay = oc.weight_decay;
        cfg.dgc_warmup = 0; /* the target density from the first step */
        ex = exchange_new(&cfg, comm, j->pt, &oc, err, sizeof err);
    }
    if (!ex) {
        if (rank == 0) {
            snprintf(j->err, sizeof j->err, "%s", err);
            j->failed = 1;
        }
        comm_free(comm);
        return;
    }
    optim_init(&opt, &oc, j->pt->total);
    float *params = param_arena_alloc(j->pt), *g = param_arena_alloc(j->pt);
    memcpy(params, j->init, j->pt->total * sizeof(float));
    for (int s = 0; s < j->warmup + j->steps; s++) {
        make_grad(g, j->pt->total, rank, s);
        ExchangeStats st;
        comm_barrier(comm); /* every worker starts the step together */
        double t0 = mono_seconds();
        int rc = exchange_step(ex, params, g, &opt, 0.1, 1.0, s, &st);
        if (!rc) exchange_optimize(ex, params, g, &opt, 0.1);
        if (!rc) rc = exchange_deltas(ex, params, g, &opt, s, &st);
        double t1 = mono_seconds();
        if (rc) {
            if (rank == 0) {
                snprintf(j->err, sizeof j->err, "%s", exchange_error(ex));
                j->failed = 1;
            }
            break;
        }
        if (s >= j->warmup) {
            j->step_s[rank][s - j->warmup] = t1 - t0;
            j->codec_s[rank][s - j->warmup] = st.codec_s;
            if (rank == 0) j->up_bytes = (double)st.up_bytes;
        }
    }
    param_arena_free(params);
    param_arena_free(g);
    optim_free(&opt);
    exchange_free(ex);
    comm_free(comm);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: exchange [options]\n"
            "  --depth D      CIFAR ResNet depth 6n+2 whose parameter table is used (default 110)\n"
            "  --workers N    local worker threads (default 1, at most %d)\n"
            "  --codec SPEC   a --codec value of the trainers; repeat for several (default: fp32,\n"
            "                 fp16, int8, terngrad, 3lc, onebit, topk, dgc, sbc, gcomp)\n"
            "  --steps S      timed steps (default 10, at most %d)\n"
            "  --warmup W     untimed steps first (default 2)\n"
            "  --threads T    OpenMP threads per worker (default: the OpenMP default)\n"
            "  --help\n",
            MAXW, MAXSTEPS);
}

int main(int argc, char **argv) {
    int depth = 110, workers = 1, steps = 10, warmup = 2, threads = 0, ncodecs = 0;
    const char *codecs[64];
    static const struct option opts[] = {{"depth", required_argument, 0, 'd'},  {"workers", required_argument, 0, 'w'},
                                         {"codec", required_argument, 0, 'c'},  {"steps", required_argument, 0, 's'},
                                         {"warmup", required_argument, 0, 'u'}, {"threads", required_argument, 0, 't'},
                                         {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
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
    static const char *def[] = {"fp32", "fp16", "int8", "terngrad", "3lc", "onebit", "topk", "dgc", "sbc", "gcomp"};
    if (ncodecs == 0)
        for (size_t i = 0; i < sizeof def / sizeof def[0]; i++) codecs[ncodecs++] = def[i];

    ResNetConfig rc = resnet_cifar_config(depth);
    Model *m = resnet_cifar_create(&rc, 1);
    const ParamTable *pt = &m->pt;
    printf("exchange: ResNet-%d, %zu values in %d tensors, %d worker%s, %d steps (median), threads %d\n", depth,
           param_table_count(pt), pt->n, workers, workers > 1 ? "s" : "", steps,
#ifdef HAVE_OPENMP
           threads > 0 ? threads : omp_get_max_threads()
#else
           1
#endif
    );
    printf("%-24s %10s %10s %12s\n", "codec", "step ms", "codec ms", "up bytes");
    int status = 0;
    for (int c = 0; c < ncodecs; c++) {
        Job *j = callocCheck(1, sizeof *j);
        j->pt = pt;
        j->init = m->params;
        j->codec = codecs[c];
        j->steps = steps;
        j->warmup = warmup;
        j->threads = threads;
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
            printf("%-24s %10.2f %10.2f %12.0f\n", codecs[c], 1e3 * median(st, steps), 1e3 * median(cs, steps),
                   j->up_bytes);
        }
        fflush(stdout);
        free(j);
    }
    model_free(m);
    return status;
}
