/* Optimizers and the GCOMP metric on the GPU (optim/optim_cuda.h), the CUDA
 * twins of optim/optim.c. Every kernel repeats the CPU loop expression by
 * expression: the CPU build is ISO C and contracts nothing, so each product,
 * quotient, sum and difference is written with the rounding intrinsics
 * (__fmul_rn, __fdiv_rn, __fadd_rn, __fsub_rn, __fsqrt_rn: never fused into an
 * FMA by nvcc), and __fmaf_rn exactly where the CPU calls fmaf. C evaluates
 * a * b * c as (a * b) * c and a + b + c as (a + b) + c; the kernels keep
 * that association. Scalar hyper-parameter arithmetic (bias corrections,
 * 1 - beta, lr / bc1) is host code, the same double expressions as the CPU.
 * Parameter grads are only read; params and the state arenas are overwritten.
 */
extern "C" {
#include "common/errors.h"
#include "optim/optim.h"
}
#include "optim/optim_cuda.h"

#include <math.h>
#include <string.h>

#include "common/cuda_check.h"
#include "common/ranges_cuda.cuh"

#define TPB 256
#define GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n); i += (size_t)gridDim.x * blockDim.x)

static unsigned grid_for(size_t n) {
    size_t b = (n + TPB - 1) / TPB;
    if (b > 65536) b = 65536;
    return b ? (unsigned)b : 1u;
}

/* one rounding each, never contracted */
#define MUL(a, b) __fmul_rn((a), (b))
#define DIV(a, b) __fdiv_rn((a), (b))
#define ADD(a, b) __fadd_rn((a), (b))
#define SUB(a, b) __fsub_rn((a), (b))
#define FMA(a, b, c) __fmaf_rn((a), (b), (c))
#define SQRT(a) __fsqrt_rn(a)

int optim_cuda_available(void) { return 1; }

/* ------------------------------------------------------------- state ---- */

__global__ void k_fill(float *s, size_t n, float v) {
    GRID_STRIDE(i, n) s[i] = v;
}

static float *dstate(size_t n, float fill) {
    size_t m = (n + 15) & ~(size_t)15; /* as the CPU's arenas: whole 64-byte lines */
    float *s = NULL;
    cudaCheck(cudaMalloc((void **)&s, (m ? m : 16) * sizeof(float)));
    if (fill == 0.0f) {
        cudaCheck(cudaMemset(s, 0, (m ? m : 16) * sizeof(float)));
    } else {
        k_fill<<<grid_for(m), TPB>>>(s, m, fill);
        cudaCheckLast();
    }
    return s;
}

int optim_init_cuda(Optim *o, const OptConfig *cfg, size_t n_floats) {
    float fill[OPT_MAX_STATE];
    int rc = optim_layout(o, cfg, n_floats, fill); /* the names, order and fills of optim_init */
    for (int i = 0; !rc && i < o->n_state; i++) o->state[i] = dstate(n_floats, fill[i]);
    if (!rc) cudaCheck(cudaDeviceSynchronize());
    return rc;
}

void optim_free_cuda(Optim *o) {
    for (int i = 0; i < o->n_state; i++)
        if (o->state[i]) cudaCheck(cudaFree(o->state[i]));
    memset(o, 0, sizeof *o);
}

static float *state_by_name(const Optim *o, const char *name) {
    for (int i = 0; i < o->n_state; i++)
        if (!strcmp(o->state_name[i], name)) return o->state[i];
    return NULL;
}

static int same_layout(const Optim *a, const Optim *b) {
    if (a->cfg.kind != b->cfg.kind || a->n != b->n || a->n_state != b->n_state) return 0;
    for (int i = 0; i < a->n_state; i++)
        if (strcmp(a->state_name[i], b->state_name[i])) return 0;
    return 1;
}

int optim_cuda_upload(Optim *dev, const Optim *host) {
    if (!same_layout(dev, host)) {
        fprintf(stderr, "error: optim_cuda_upload: optimizers differ in kind, size or state\n");
        return -GC_ERR_PARAM;
    }
    for (int i = 0; i < dev->n_state; i++)
        if (dev->n) cudaCheck(cudaMemcpy(dev->state[i], host->state[i], dev->n * sizeof(float), cudaMemcpyHostToDevice));
    dev->step = host->step;
    return 0;
}

int optim_cuda_download(Optim *host, const Optim *dev) {
    if (!same_layout(dev, host)) {
        fprintf(stderr, "error: optim_cuda_download: optimizers differ in kind, size or state\n");
        return -GC_ERR_PARAM;
    }
    for (int i = 0; i < dev->n_state; i++)
        if (dev->n) cudaCheck(cudaMemcpy(host->state[i], dev->state[i], dev->n * sizeof(float), cudaMemcpyDeviceToHost));
    host->step = dev->step;
    return 0;
}

/* ------------------------------------------------------------ updates ---- */

typedef struct {
    float wd, mu, damp1, nlr;
    int has_wd, has_mom, nesterov, first;
} SgdK;

/* The updates go over the ranges of a table (common/ranges_cuda.cuh: the runs of tensors
 * an exchange gives the optimizer, in one launch for every 32), i an index into the
 * whole arenas. optim.c update_sgd */
__global__ void k_sgd(RangeTab r, float *p, const float *g, float *buf, SgdK k) {
    RANGE_STRIDE(i, r) {
        if (!k.has_mom) {
            p[i] = k.has_wd ? FMA(FMA(p[i], k.wd, g[i]), k.nlr, p[i]) : FMA(g[i], k.nlr, p[i]);
        } else {
            float d = k.has_wd ? FMA(p[i], k.wd, g[i]) : g[i];
            float b = k.first ? d : FMA(d, k.damp1, MUL(buf[i], k.mu));
            buf[i] = b;
            p[i] = k.nesterov ? FMA(FMA(b, k.mu, d), k.nlr, p[i]) : FMA(b, k.nlr, p[i]);
        }
    }
}

typedef struct {
    float nstep, bc2s, eps, b1, b2, omb1, omb2, wd, decay;
    int adamw, l2;
} AdamK;

/* optim.c update_adam */
__global__ void k_adam(RangeTab r, float *p, const float *g, float *m, float *v, AdamK k) {
    RANGE_STRIDE(i, r) {
        float pi = k.adamw ? MUL(p[i], k.decay) : p[i];
        float d = k.l2 ? FMA(pi, k.wd, g[i]) : g[i];
        float mi = FMA(d, k.omb1, MUL(m[i], k.b1));
        float vi = FMA(MUL(k.omb2, d), d, MUL(v[i], k.b2));
        m[i] = mi;
        v[i] = vi;
        float den = ADD(DIV(SQRT(vi), k.bc2s), k.eps);
        p[i] = ADD(pi, DIV(MUL(k.nstep, mi), den));
    }
}

typedef struct {
    float nclr, eps, wd;
    int has_wd;
} AdagradK;

/* optim.c update_adagrad */
__global__ void k_adagrad(RangeTab r, float *p, const float *g, float *s, AdagradK k) {
    RANGE_STRIDE(i, r) {
        float d = k.has_wd ? FMA(p[i], k.wd, g[i]) : g[i];
        float si = FMA(d, d, s[i]);
        s[i] = si;
        float sd = ADD(SQRT(si), k.eps);
        p[i] = ADD(p[i], DIV(MUL(k.nclr, d), sd));
    }
}

typedef struct {
    float a, oma, eps, wd, mu, nlr;
    int has_wd, has_mom, centered;
} RmsK;

/* optim.c update_rmsprop */
__global__ void k_rmsprop(RangeTab r, float *p, const float *g, float *sq, float *buf, float *ga, RmsK k) {
    RANGE_STRIDE(i, r) {
        float d = k.has_wd ? FMA(p[i], k.wd, g[i]) : g[i];
        float s = FMA(MUL(k.oma, d), d, MUL(sq[i], k.a));
        sq[i] = s;
        float avg;
        if (k.centered) {
            float gi = FMA(d, k.oma, MUL(ga[i], k.a));
            ga[i] = gi;
            avg = SQRT(FMA(-gi, gi, s));
        } else {
            avg = SQRT(s);
        }
        avg = ADD(avg, k.eps);
        if (k.has_mom) {
            float b = ADD(MUL(buf[i], k.mu), DIV(d, avg));
            buf[i] = b;
            p[i] = FMA(b, k.nlr, p[i]);
        } else {
            p[i] = ADD(p[i], DIV(MUL(k.nlr, d), avg));
        }
    }
}

/* 0, or -GC_ERR_PARAM where a range leaves the arena (message on stderr) */
static int ranges_fit(const Optim *o, const char *who, const size_t *off, const size_t *n, size_t k) {
    for (size_t i = 0; i < k; i++)
        if (off[i] > o->n || n[i] > o->n - off[i]) {
            fprintf(stderr, "error: %s range [%zu, %zu) outside the %zu-float arena\n", who, off[i], off[i] + n[i],
                    o->n);
            return -GC_ERR_PARAM;
        }
    return 0;
}

int optim_update_cuda(Optim *o, float *params, const float *grads, double lr, size_t off, size_t n) {
    return optim_update_cuda_ranges(o, params, grads, lr, &off, &n, 1);
}

int optim_update_cuda_ranges(Optim *o, float *p, const float *g, double lr, const size_t *off, const size_t *n,
                             size_t nr) {
    if (o->step < 1) {
        fprintf(stderr, "error: optim_update_cuda before optim_begin_step\n");
        return -GC_ERR_STATE;
    }
    int rc = ranges_fit(o, "optim_update_cuda", off, n, nr);
    if (rc) return rc;
    const OptConfig *c = &o->cfg;
    switch (c->kind) {
    case OPT_SGD: {
        SgdK k;
        k.wd = (float)c->weight_decay;
        k.mu = (float)c->momentum;
        k.damp1 = (float)(1.0 - c->dampening);
        k.nlr = (float)(-lr);
        k.has_wd = c->weight_decay != 0;
        k.has_mom = c->momentum != 0;
        k.nesterov = c->nesterov;
        k.first = o->step == 1;
        float *buf = o->n_state ? o->state[0] : NULL;
        ranges_launch(off, n, nr, [&](const RangeTab &r, unsigned b) { k_sgd<<<b, RANGES_TPB>>>(r, p, g, buf, k); });
        break;
    }
    case OPT_ADAM:
    case OPT_ADAMW: {
        const double t = (double)o->step;
        const double bc1 = 1.0 - pow(c->beta1, t), bc2 = 1.0 - pow(c->beta2, t);
        AdamK k;
        k.adamw = c->kind == OPT_ADAMW;
        k.nstep = (float)(-(lr / bc1));
        k.bc2s = (float)sqrt(bc2);
        k.eps = (float)c->eps;
        k.b1 = (float)c->beta1;
        k.b2 = (float)c->beta2;
        k.omb1 = (float)(1.0 - c->beta1);
        k.omb2 = (float)(1.0 - c->beta2);
        k.wd = (float)c->weight_decay;
        k.decay = (float)(1.0 - lr * c->weight_decay);
        k.l2 = !k.adamw && c->weight_decay != 0;
        float *m = o->state[0], *v = o->state[1];
        ranges_launch(off, n, nr, [&](const RangeTab &r, unsigned b) { k_adam<<<b, RANGES_TPB>>>(r, p, g, m, v, k); });
        break;
    }
    case OPT_ADAGRAD: {
        AdagradK k;
        k.nclr = (float)(-(lr / (1.0 + ((double)o->step - 1.0) * c->lr_decay)));
        k.eps = (float)c->eps;
        k.wd = (float)c->weight_decay;
        k.has_wd = c->weight_decay != 0;
        float *s = o->state[0];
        ranges_launch(off, n, nr, [&](const RangeTab &r, unsigned b) { k_adagrad<<<b, RANGES_TPB>>>(r, p, g, s, k); });
        break;
    }
    case OPT_RMSPROP: {
        RmsK k;
        k.a = (float)c->alpha;
        k.oma = (float)(1.0 - c->alpha);
        k.eps = (float)c->eps;
        k.wd = (float)c->weight_decay;
        k.mu = (float)c->momentum;
        k.nlr = (float)(-lr);
        k.has_wd = c->weight_decay != 0;
        k.has_mom = c->momentum > 0;
        k.centered = c->centered;
        float *sq = o->state[0], *buf = state_by_name(o, "momentum_buffer"), *ga = state_by_name(o, "grad_avg");
        ranges_launch(off, n, nr,
                      [&](const RangeTab &r, unsigned b) { k_rmsprop<<<b, RANGES_TPB>>>(r, p, g, sq, buf, ga, k); });
        break;
    }
    default: return -GC_ERR_PARAM;
    }
    cudaCheckLast();
    return 0;
}

__global__ void k_sgd_plain(RangeTab r, float *p, const float *u, float nlr) {
    RANGE_STRIDE(i, r) p[i] = FMA(u[i], nlr, p[i]);
}

void optim_sgd_plain_cuda(float *params, const float *update, double lr, const size_t *off, const size_t *n,
                          size_t k) {
    float nlr = (float)(-lr);
    ranges_launch(off, n, k, [&](const RangeTab &r, unsigned b) {
        k_sgd_plain<<<b, RANGES_TPB>>>(r, params, update, nlr);
        cudaCheckLast();
    });
}

__global__ void k_mask_zero(RangeTab r, float *m, const uint8_t *mask) {
    RANGE_STRIDE(i, r) if (mask[i]) m[i] = 0.0f;
}

int optim_mask_momentum_cuda(Optim *o, const uint8_t *mask, const size_t *off, const size_t *n, size_t k) {
    float *m = state_by_name(o, "momentum_buffer");
    if (!m) m = state_by_name(o, "exp_avg");
    if (!m) return 0;
    if (ranges_fit(o, "optim_mask_momentum_cuda", off, n, k)) return -GC_ERR_PARAM;
    ranges_launch(off, n, k, [&](const RangeTab &r, unsigned b) {
        k_mask_zero<<<b, RANGES_TPB>>>(r, m, mask);
        cudaCheckLast();
    });
    return 1;
}

/* -------------------------------------------------------------- GCOMP ---- */

/* scalars of both GCOMP rules, computed on the host as optim.c does */
typedef struct {
    int kind, adamw, has_wd, has_mom, first, nesterov, centered, l2;
    /* paper rule */
    float eta, lam, mu, damp1p, opm, ss;
    /* bound rule */
    float gs, bs, wd, damp1, nlr, etab, nstep, ans, nclr, ancl;
    /* shared */
    float s1, s2, s3, bc2s, eps, b1, b2, omb1, omb2, decay, clr, a, oma;
} GcK;

/* the paper's rule (optim.c gcomp_paper): A and cg, then the level or delta */
__global__ void k_gcomp_paper(uint8_t *levels, float *delta, const float *p, const float *g, const float *s0,
                              const float *s1b, const float *bb, const float *gg, size_t n, GcK k) {
    GRID_STRIDE(i, n) {
        float A, cg;
        if (k.kind == OPT_SGD) {
            if (!k.has_mom || (k.first && !k.nesterov)) {
                A = SUB(p[i], MUL(MUL(k.eta, k.lam), p[i]));
                cg = MUL(k.eta, g[i]);
            } else if (k.nesterov) {
                float bi = k.first ? 0.0f : s0[i];
                A = SUB(p[i], MUL(k.eta, ADD(MUL(MUL(k.opm, k.lam), p[i]), MUL(MUL(k.mu, k.mu), bi))));
                cg = MUL(MUL(k.eta, k.opm), g[i]);
            } else {
                A = SUB(p[i], MUL(k.eta, ADD(MUL(k.mu, s0[i]), MUL(MUL(k.damp1p, k.lam), p[i]))));
                cg = MUL(MUL(k.eta, k.damp1p), g[i]);
            }
        } else if (k.kind == OPT_ADAM || k.kind == OPT_ADAMW) {
            float th = k.adamw ? MUL(p[i], k.decay) : p[i];
            float d = k.adamw ? g[i] : ADD(g[i], MUL(k.lam, p[i]));
            float vt = ADD(MUL(s1b[i], k.b2), MUL(MUL(k.omb2, d), d));
            float den = ADD(DIV(SQRT(vt), k.bc2s), k.eps);
            float kk = DIV(k.ss, den);
            A = SUB(th, MUL(kk, ADD(MUL(k.b1, s0[i]), k.adamw ? 0.0f : MUL(MUL(k.omb1, k.lam), p[i]))));
            cg = MUL(MUL(kk, k.omb1), g[i]);
        } else if (k.kind == OPT_ADAGRAD) {
            float d = ADD(g[i], MUL(k.lam, p[i]));
            float kk = DIV(k.clr, ADD(SQRT(ADD(s0[i], MUL(d, d))), k.eps));
            A = SUB(p[i], MUL(MUL(kk, k.lam), p[i]));
            cg = MUL(kk, g[i]);
        } else { /* RMSProp */
            float d = ADD(g[i], MUL(k.lam, p[i]));
            float s = ADD(MUL(s0[i], k.a), MUL(MUL(k.oma, d), d));
            if (k.centered) {
                float gi = ADD(MUL(gg[i], k.a), MUL(k.oma, d));
                s = SUB(s, MUL(gi, gi));
            }
            float kk = DIV(k.eta, ADD(SQRT(fmaxf(s, 0.0f)), k.eps));
            A = SUB(SUB(p[i], MUL(MUL(kk, k.lam), p[i])), k.has_mom ? MUL(MUL(k.eta, k.mu), bb[i]) : 0.0f);
            cg = MUL(kk, g[i]);
        }
        float a_ = fabsf(A), u_ = fabsf(cg);
        if (levels)
            levels[i] = (uint8_t)((a_ > MUL(u_, k.s1)) + (a_ > MUL(u_, k.s2)) + (a_ > MUL(u_, k.s3)));
        else
            delta[i] = DIV(A, cg);
    }
}

#define UB(x) MUL(fabsf(x), 0x1p-23f)

/* the guarded rule (optim.c gcomp_bound): theta_t, alpha, beta, then the level */
__global__ void k_gcomp_bound(uint8_t *levels, const float *p, const float *g, const float *s0, const float *s1b,
                              const float *bbuf, const float *gg, size_t n, GcK k) {
    GRID_STRIDE(i, n) {
        float theta_t, alpha, beta;
        if (k.kind == OPT_SGD) {
            float d = k.has_wd ? FMA(p[i], k.wd, g[i]) : g[i];
            if (!k.has_mom || (k.first && !k.nesterov)) {
                theta_t = FMA(d, k.nlr, p[i]);
                alpha = k.etab;
                beta = k.has_wd ? MUL(k.etab, UB(d)) : 0.0f;
            } else if (!k.nesterov) {
                float bt = FMA(d, k.damp1, MUL(s0[i], k.mu));
                theta_t = FMA(bt, k.nlr, p[i]);
                alpha = MUL(k.etab, k.damp1);
                beta = MUL(k.etab, ADD(k.has_wd ? MUL(k.damp1, UB(d)) : 0.0f, UB(bt)));
            } else {
                float bd = k.has_wd ? UB(d) : 0.0f;
                float bt = k.first ? d : FMA(d, k.damp1, MUL(s0[i], k.mu));
                float bb = k.first ? bd : ADD(bd, UB(bt));
                float q = FMA(bt, k.mu, d);
                theta_t = FMA(q, k.nlr, p[i]);
                alpha = MUL(k.etab, ADD(k.mu, 1.0f));
                beta = MUL(k.etab, ADD(ADD(MUL(k.mu, bb), bd), UB(q)));
            }
        } else if (k.kind == OPT_ADAM || k.kind == OPT_ADAMW) {
            float th = k.adamw ? MUL(p[i], k.decay) : p[i];
            float d = k.l2 ? FMA(th, k.wd, g[i]) : g[i];
            float ad = 1.0f, bd = k.l2 ? UB(d) : 0.0f;
            float mt = FMA(d, k.omb1, MUL(s0[i], k.b1));
            float am = MUL(k.omb1, ad), bm = ADD(MUL(k.omb1, bd), UB(mt));
            float w = MUL(k.omb2, d);
            float aw = MUL(k.omb2, ad), bw = ADD(MUL(k.omb2, bd), UB(w));
            float vt = FMA(w, d, MUL(s1b[i], k.b2));
            float av = ADD(MUL(fabsf(w), ad), MUL(fabsf(d), aw));
            float bv = ADD(ADD(MUL(fabsf(w), bd), MUL(fabsf(d), bw)), UB(vt));
            float sq = SQRT(vt);
            float inv2 = DIV(0.5f, sq);
            float asq = MUL(av, inv2), bsq = ADD(MUL(bv, inv2), UB(sq));
            float qd = DIV(sq, k.bc2s);
            float aqd = DIV(asq, k.bc2s), bqd = ADD(DIV(bsq, k.bc2s), UB(qd));
            float den = ADD(qd, k.eps);
            float aden = aqd, bden = ADD(bqd, UB(den));
            float num = MUL(k.nstep, mt);
            float anum = MUL(k.ans, am), bnum = ADD(MUL(k.ans, bm), UB(num));
            float X = DIV(num, den);
            alpha = ADD(DIV(anum, den), DIV(MUL(fabsf(X), aden), den));
            beta = ADD(ADD(DIV(bnum, den), DIV(MUL(fabsf(X), bden), den)), UB(X));
            theta_t = ADD(th, X);
        } else if (k.kind == OPT_ADAGRAD) {
            float d = k.has_wd ? FMA(p[i], k.wd, g[i]) : g[i];
            float ad = 1.0f, bd = k.has_wd ? UB(d) : 0.0f;
            float st = FMA(d, d, s0[i]);
            float as = MUL(MUL(2.0f, fabsf(d)), ad), bs_ = ADD(MUL(MUL(2.0f, fabsf(d)), bd), UB(st));
            float sq = SQRT(st);
            float inv2 = DIV(0.5f, sq);
            float asq = MUL(as, inv2), bsq = ADD(MUL(bs_, inv2), UB(sq));
            float sd = ADD(sq, k.eps);
            float asd = asq, bsd = ADD(bsq, UB(sd));
            float num = MUL(k.nclr, d);
            float anum = MUL(k.ancl, ad), bnum = ADD(MUL(k.ancl, bd), UB(num));
            float X = DIV(num, sd);
            alpha = ADD(DIV(anum, sd), DIV(MUL(fabsf(X), asd), sd));
            beta = ADD(ADD(DIV(bnum, sd), DIV(MUL(fabsf(X), bsd), sd)), UB(X));
            theta_t = ADD(p[i], X);
        } else { /* RMSProp */
            float d = k.has_wd ? FMA(p[i], k.wd, g[i]) : g[i];
            float ad = 1.0f, bd = k.has_wd ? UB(d) : 0.0f;
            float w = MUL(k.oma, d);
            float aw = MUL(k.oma, ad), bw = ADD(MUL(k.oma, bd), UB(w));
            float s = FMA(w, d, MUL(s0[i], k.a));
            float as = ADD(MUL(fabsf(w), ad), MUL(fabsf(d), aw));
            float bs_ = ADD(ADD(MUL(fabsf(w), bd), MUL(fabsf(d), bw)), UB(s));
            if (k.centered) {
                float gi = FMA(d, k.oma, MUL(gg[i], k.a));
                float agi = MUL(k.oma, ad), bgi = ADD(MUL(k.oma, bd), UB(gi));
                float var = FMA(-gi, gi, s);
                as = ADD(MUL(MUL(2.0f, fabsf(gi)), agi), as);
                bs_ = ADD(ADD(MUL(MUL(2.0f, fabsf(gi)), bgi), bs_), UB(var));
                s = var;
            }
            float r = SQRT(s);
            float inv2 = DIV(0.5f, r);
            float ar = MUL(as, inv2), br = ADD(MUL(bs_, inv2), UB(r));
            float avg = ADD(r, k.eps);
            float aavg = ar, bavg = ADD(br, UB(avg));
            if (k.has_mom) {
                float y = DIV(d, avg);
                float ay = ADD(DIV(ad, avg), DIV(MUL(fabsf(y), aavg), avg));
                float by = ADD(ADD(DIV(bd, avg), DIV(MUL(fabsf(y), bavg), avg)), UB(y));
                float bt = ADD(MUL(bbuf[i], k.mu), y);
                theta_t = FMA(bt, k.nlr, p[i]);
                alpha = MUL(k.etab, ay);
                beta = MUL(k.etab, ADD(by, UB(bt)));
            } else {
                float num = MUL(k.nlr, d);
                float anum = MUL(k.etab, ad), bnum = ADD(MUL(k.etab, bd), UB(num));
                float X = DIV(num, avg);
                alpha = ADD(DIV(anum, avg), DIV(MUL(fabsf(X), aavg), avg));
                beta = ADD(ADD(DIV(bnum, avg), DIV(MUL(fabsf(X), bavg), avg)), UB(X));
                theta_t = ADD(p[i], X);
            }
        }
        float T_ = SUB(fabsf(theta_t), MUL(beta, k.bs)), a_ = MUL(MUL(alpha, fabsf(g[i])), k.gs);
        levels[i] = (uint8_t)((MUL(a_, k.s1) < T_) + (MUL(a_, k.s2) < T_) + (MUL(a_, k.s3) < T_));
    }
}

/* the host-side scalars of step t = o->step + 1 (optim.c gcomp_paper / gcomp_bound) */
static GcK gc_scalars(const Optim *o, double lr) {
    const OptConfig *c = &o->cfg;
    const long t = o->step + 1;
    GcK k;
    memset(&k, 0, sizeof k);
    k.kind = c->kind;
    k.adamw = c->kind == OPT_ADAMW;
    k.has_wd = c->weight_decay != 0;
    k.nesterov = c->nesterov;
    k.centered = c->centered;
    k.first = t == 1;
    k.eta = (float)lr;
    k.lam = (float)c->weight_decay;
    k.mu = (float)c->momentum;
    k.eps = (float)c->eps;
    if (c->kind == OPT_SGD) {
        k.has_mom = c->momentum != 0;
        /* paper rule: 1 - dampening only for plain momentum past the first step */
        k.damp1p = k.has_mom && !k.first && !c->nesterov ? (float)(1.0 - c->dampening) : 1.0f;
        k.opm = 1.0f + k.mu;
        k.damp1 = (float)(1.0 - c->dampening);
    } else if (c->kind == OPT_RMSPROP) {
        k.has_mom = o->n_state > 1 && state_by_name(o, "momentum_buffer") != NULL;
    }
    if (c->kind == OPT_ADAM || c->kind == OPT_ADAMW) {
        const double bc1 = 1.0 - pow(c->beta1, (double)t), bc2 = 1.0 - pow(c->beta2, (double)t);
        k.ss = (float)(lr / bc1);
        k.nstep = (float)(-(lr / bc1));
        k.ans = fabsf(k.nstep);
        k.bc2s = (float)sqrt(bc2);
        k.b1 = (float)c->beta1;
        k.b2 = (float)c->beta2;
        k.omb1 = (float)(1.0 - c->beta1);
        k.omb2 = (float)(1.0 - c->beta2);
        k.decay = (float)(1.0 - lr * c->weight_decay);
        k.l2 = !k.adamw && k.has_wd;
    }
    if (c->kind == OPT_ADAGRAD) {
        k.clr = (float)(lr / (1.0 + ((double)t - 1.0) * c->lr_decay));
        k.nclr = (float)(-(lr / (1.0 + ((double)t - 1.0) * c->lr_decay)));
        k.ancl = fabsf(k.nclr);
    }
    if (c->kind == OPT_RMSPROP) {
        k.a = (float)c->alpha;
        k.oma = (float)(1.0 - c->alpha);
    }
    k.nlr = (float)(-lr);
    k.etab = fabsf(k.nlr);
    k.wd = (float)c->weight_decay;
    k.gs = ldexpf(1.0f, c->gcomp_guard_bits);
    k.bs = ldexpf(1.0f, 23 + c->gcomp_guard_bits);
    k.s1 = ldexpf(1.0f, GCOMP_BITS_PER_LEVEL);
    k.s2 = ldexpf(1.0f, 2 * GCOMP_BITS_PER_LEVEL);
    k.s3 = ldexpf(1.0f, 3 * GCOMP_BITS_PER_LEVEL);
    return k;
}

static int gcomp_run(uint8_t *levels, float *delta, int paper, const Optim *o, const float *p, const float *g,
                     double lr, size_t off, size_t n) {
    if (off > o->n || n > o->n - off) {
        fprintf(stderr, "error: GCOMP metric range [%zu, %zu) outside the %zu-float arena\n", off, off + n, o->n);
        return -GC_ERR_PARAM;
    }
    if (n == 0) return 0;
    if (o->cfg.kind < 0 || o->cfg.kind >= OPT_KIND_COUNT) return -GC_ERR_PARAM;
    GcK k = gc_scalars(o, lr);
    const float *s0 = o->n_state > 0 ? o->state[0] + off : NULL;
    const float *s1b = o->n_state > 1 ? o->state[1] + off : NULL;
    const float *buf = state_by_name(o, "momentum_buffer"), *ga = state_by_name(o, "grad_avg");
    const float *bb = o->cfg.kind == OPT_RMSPROP && buf ? buf + off : NULL;
    const float *gg = ga ? ga + off : NULL;
    if (paper) k_gcomp_paper<<<grid_for(n), TPB>>>(levels, delta, p, g, s0, s1b, bb, gg, n, k);
    else k_gcomp_bound<<<grid_for(n), TPB>>>(levels, p, g, s0, s1b, bb, gg, n, k);
    cudaCheckLast();
    return 0;
}

int optim_gcomp_levels_at_cuda(uint8_t *levels, const Optim *o, const float *params_at, const float *grads_at,
                               double lr, size_t off, size_t n) {
    return gcomp_run(levels, NULL, o->cfg.gcomp_guard_bits == 0, o, params_at, grads_at, lr, off, n);
}

int optim_gcomp_levels_cuda(uint8_t *levels, const Optim *o, const float *params, const float *grads, double lr,
                            size_t off, size_t n) {
    if (off > o->n || n > o->n - off) {
        fprintf(stderr, "error: GCOMP metric range [%zu, %zu) outside the %zu-float arena\n", off, off + n, o->n);
        return -GC_ERR_PARAM;
    }
    return optim_gcomp_levels_at_cuda(levels, o, params + off, grads + off, lr, off, n);
}

int optim_gcomp_delta_cuda(float *delta, const Optim *o, const float *params_at, const float *grads_at, double lr,
                           size_t off, size_t n) {
    return gcomp_run(NULL, delta, 1, o, params_at, grads_at, lr, off, n);
}
