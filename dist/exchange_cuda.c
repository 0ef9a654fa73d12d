/* The device-resident exchange (see dist/exchange_cuda.h): the fp32 allreduce
 * step of dist/exchange.c (avg_allreduce, apply_gradient) on device arenas. */
#include "dist/exchange_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CUDA

#include <cuda_runtime.h>

#include "common/check.h"
#include "common/cuda_check.h"
#include "nn/model_cuda.h"
#include "optim/optim_cuda.h"

struct ExchangeCuda {
    DistConfig cfg;
    Comm *comm;
    const ParamTable *pt;
    int N, rank;
    float *d_agg;   /* [pt->total] device: the average gradient */
    ByteBuf ptrs;   /* the published gradient addresses, rank order */
    size_t *lens;   /* [N] */
};

const char *exchange_cuda_unsupported(const DistConfig *cfg, const Comm *comm) {
    if (cfg->topology != TOPO_ALLREDUCE) return "a codec (only fp32 over the allreduce topology stays on the GPU)";
    if (cfg->deltas || cfg->delay != 1) return "--delay (weight-delta exchange)";
    if (cfg->clip_norm > 0) return "--clip";
    if (strcmp(comm->ops->name, "local") != 0) return "the backend (only local workers sharing the GPU)";
    return NULL;
}

ExchangeCuda *exchange_cuda_new(const DistConfig *cfg, Comm *comm, const ParamTable *pt, char *err, size_t errlen) {
    const char *why = exchange_cuda_unsupported(cfg, comm);
    if (why) {
        snprintf(err, errlen, "the step cannot stay on the GPU: %s", why);
        return NULL;
    }
    ExchangeCuda *x = callocCheck(1, sizeof *x);
    x->cfg = *cfg;
    x->comm = comm;
    x->pt = pt;
    x->N = comm->size;
    x->rank = comm->rank;
    x->lens = callocCheck((size_t)x->N, sizeof *x->lens);
    if (cuda_dev_alloc((void **)&x->d_agg, (pt->total ? pt->total : 1) * sizeof(float), "the average gradient")) {
        snprintf(err, errlen, "cannot allocate the device exchange's buffer");
        exchange_cuda_free(x);
        return NULL;
    }
    return x;
}

void exchange_cuda_free(ExchangeCuda *x) {
    if (!x) return;
    if (x->d_agg) cudaCheck(cudaFree(x->d_agg));
    bytebuf_free(&x->ptrs);
    free(x->lens);
    free(x);
}

/* an allreduce-max of v that is not counted as traffic (exchange.c's control_max) */
static double control_max(Comm *c, double v) {
    uint64_t s = c->sent, r = c->received;
    comm_allreduce_f64(c, &v, 1, COMM_MAX);
    c->sent = s;
    c->received = r;
    return v;
}

/* d_agg = (g0 + g1 + ... + g(N-1)) * (1/N), every worker's gradient arena read
 * in place on the shared device */
static void average(ExchangeCuda *x, const float *d_grads) {
    size_t n = x->pt->total, bytes = n * sizeof(float);
    Comm *c = x->comm;
    /* this worker's backward has finished before a peer reads its gradients */
    cudaCheck(cudaDeviceSynchronize());
    uint64_t s0 = c->sent, r0 = c->received;
    comm_allgatherv(c, &x->ptrs, x->lens, (const uint8_t *)&d_grads, sizeof d_grads);
    c->sent = s0;
    c->received = r0;
    const float *g[x->N];
    for (int k = 0; k < x->N; k++) {
        if (x->lens[k] != sizeof d_grads) gc_fatal("error: device exchange: worker %d published no address\n", k);
        memcpy(&g[k], x->ptrs.p + (size_t)k * sizeof d_grads, sizeof d_grads);
    }
    cudaCheck(cudaMemcpy(x->d_agg, g[0], bytes, cudaMemcpyDeviceToDevice));
    for (int k = 1; k < x->N; k++) exchange_cuda_add(x->d_agg, g[k], n);
    if (x->N > 1) exchange_cuda_scale(x->d_agg, 1.0f / (float)x->N, n);
    /* every peer is done reading this worker's gradients before its next backward */
    cudaCheck(cudaDeviceSynchronize());
    comm_barrier(c);
    /* the allreduce's ring model, as the local backend counts it */
    uint64_t b = x->N > 1 ? (uint64_t)(2.0 * (x->N - 1) / x->N * (double)bytes) : 0;
    c->sent += b;
    c->received += b;
}

int exchange_cuda_step(ExchangeCuda *x, float *d_params, const float *d_grads, Optim *opt, double lr,
                       ExchangeStats *st) {
    ExchangeStats s;
    memset(&s, 0, sizeof s);
    Comm *c = x->comm;
    uint64_t sent0 = c->sent, recv0 = c->received;
    average(x, d_grads);
    /* exchange.c's avg_allreduce accounting */
    uint64_t b = x->N > 1 ? (uint64_t)(2.0 * (x->N - 1) / x->N * 4.0 * (double)param_table_count(x->pt)) : 0;
    s.up_bytes = s.down_bytes = s.raw_up = b;
    /* apply_gradient: the optimizer on the average, one call over the arena */
    optim_begin_step(opt);
    optim_update_cuda(opt, d_params, x->d_agg, lr, 0, x->pt->total);
    s.exchanged = 1;
    s.wire_sent = c->sent - sent0;
    s.wire_received = c->received - recv0;
    if (x->N > 1) {
        double mine = (double)(s.wire_sent > s.wire_received ? s.wire_sent : s.wire_received);
        double worst = control_max(c, mine);
        s.wire_max = (uint64_t)worst;
        s.hops = 2 * (x->N - 1);
        if (x->cfg.bandwidth > 0) s.comm_model_s = worst * 8.0 / x->cfg.bandwidth + s.hops * x->cfg.latency;
    }
    if (st) *st = s;
    return 0;
}

#else /* no CUDA */

const char *exchange_cuda_unsupported(const DistConfig *cfg, const Comm *comm) {
    (void)cfg;
    (void)comm;
    return "this build has no CUDA";
}

ExchangeCuda *exchange_cuda_new(const DistConfig *cfg, Comm *comm, const ParamTable *pt, char *err, size_t errlen) {
    (void)cfg;
    (void)comm;
    (void)pt;
    snprintf(err, errlen, "this build has no CUDA");
    return NULL;
}

void exchange_cuda_free(ExchangeCuda *x) { (void)x; }

int exchange_cuda_step(ExchangeCuda *x, float *d_params, const float *d_grads, Optim *opt, double lr,
                       ExchangeStats *st) {
    (void)x;
    (void)d_params;
    (void)d_grads;
    (void)opt;
    (void)lr;
    (void)st;
    return -1;
}

void exchange_cuda_add(float *a, const float *b, size_t n) {
    (void)a;
    (void)b;
    (void)n;
}

void exchange_cuda_scale(float *a, float s, size_t n) {
    (void)a;
    (void)s;
    (void)n;
}

#endif
