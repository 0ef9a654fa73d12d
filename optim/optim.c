/* Optimizers (torch 1.13 single-tensor update rules) and the GCOMP metric.
 * See optim.h for the contract. Every loop is elementwise: OpenMP splits it
 * statically and vectorizes it, and the result does not depend on the thread
 * count. Parameters are overwritten; gradients are read only.
 * (The loops with sqrtf vectorize only under -fno-math-errno, which the
 * Makefile does not pass; they still run, one element at a time.) */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/errors.h"
#include "common/units.h"

/* below this many elements a loop runs on the calling thread */
#define OPT_PAR_MIN 32768

#ifdef HAVE_OPENMP
/* no "simd" clause: gcc 12 with AVX-512 miscompiled the SGD-momentum GCOMP
 * bound under "parallel for simd" (levels disagreed with the scalar formula for
 * n >= 32768); -O3 vectorizes these loops anyway */
#define OPT_PFOR _Pragma("omp parallel for schedule(static) if(n >= OPT_PAR_MIN)")
#else
#define OPT_PFOR
#endif

static const char *const kind_names[OPT_KIND_COUNT] = {
    [OPT_SGD] = "sgd", [OPT_ADAM] = "adam", [OPT_ADAMW] = "adamw", [OPT_ADAGRAD] = "adagrad", [OPT_RMSPROP] = "rmsprop",
};

const char *opt_kind_name(OptKind k) { return (k >= 0 && k < OPT_KIND_COUNT) ? kind_names[k] : "?"; }

void opt_config_default(OptConfig *c, OptKind kind) {
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->gcomp_guard_bits = OPT_DEFAULT_GCOMP_GUARD_BITS;
    switch (kind) {
    case OPT_ADAMW:
        c->weight_decay = OPT_DEFAULT_ADAMW_WD;
        /* fall through */
    case OPT_ADAM:
        c->beta1 = OPT_DEFAULT_ADAM_BETA1;
        c->beta2 = OPT_DEFAULT_ADAM_BETA2;
        c->eps = OPT_DEFAULT_ADAM_EPS;
        break;
    case OPT_ADAGRAD: c->eps = OPT_DEFAULT_ADAGRAD_EPS; break;
    case OPT_RMSPROP:
        c->alpha = OPT_DEFAULT_RMSPROP_ALPHA;
        c->eps = OPT_DEFAULT_RMSPROP_EPS;
        break;
    default: break;
    }
}

/* ------------------------------------------------------------ parsing ---- */

enum { K_SGD = 1 << OPT_SGD, K_ADAM = 1 << OPT_ADAM, K_ADAMW = 1 << OPT_ADAMW, K_ADAGRAD = 1 << OPT_ADAGRAD,
       K_RMSPROP = 1 << OPT_RMSPROP, K_ALL = (1 << OPT_KIND_COUNT) - 1 };

typedef struct {
    const char *key;
    size_t off;
    int is_int;
    int kinds;
    const char *help;
} OptKey;

static const OptKey opt_keys[] = {
    {"wd", offsetof(OptConfig, weight_decay), 0, K_ALL, "weight decay (AdamW: decoupled; default 0, AdamW 1e-2)"},
    {"momentum", offsetof(OptConfig, momentum), 0, K_SGD | K_RMSPROP, "momentum factor (default 0)"},
    {"dampening", offsetof(OptConfig, dampening), 0, K_SGD, "momentum dampening (default 0)"},
    {"nesterov", offsetof(OptConfig, nesterov), 1, K_SGD, "1 = Nesterov momentum (needs momentum>0, dampening=0)"},
    {"beta1", offsetof(OptConfig, beta1), 0, K_ADAM | K_ADAMW, "first-moment decay (default 0.9)"},
    {"beta2", offsetof(OptConfig, beta2), 0, K_ADAM | K_ADAMW, "second-moment decay (default 0.999)"},
    {"eps", offsetof(OptConfig, eps), 0, K_ADAM | K_ADAMW | K_ADAGRAD | K_RMSPROP,
     "denominator epsilon (Adam/AdamW/RMSProp 1e-8, AdaGrad 1e-10)"},
    {"lr_decay", offsetof(OptConfig, lr_decay), 0, K_ADAGRAD, "AdaGrad lr decay (default 0)"},
    {"init_acc", offsetof(OptConfig, initial_accumulator_value), 0, K_ADAGRAD,
     "AdaGrad initial accumulator value (default 0)"},
    {"alpha", offsetof(OptConfig, alpha), 0, K_RMSPROP, "RMSProp smoothing constant (default 0.99)"},
    {"centered", offsetof(OptConfig, centered), 1, K_RMSPROP, "1 = centered RMSProp"},
    {"guard", offsetof(OptConfig, gcomp_guard_bits), 1, K_ALL,
     "GCOMP metric guard bits (default 1 = within 1 ulp; 0 = the paper's thresholds)"},
};
#define N_OPT_KEYS ((int)(sizeof opt_keys / sizeof opt_keys[0]))

#define ERRF(...)                                                \
    do {                                                         \
        if (err && errlen) snprintf(err, errlen, __VA_ARGS__);   \
    } while (0)

int opt_config_validate(const OptConfig *c, char *err, size_t errlen) {
    if (c->kind < 0 || c->kind >= OPT_KIND_COUNT) {
        ERRF("unknown optimizer kind %d", (int)c->kind);
        return -GC_ERR_PARAM;
    }
    const double *dv[] = {&c->weight_decay, &c->momentum, &c->dampening, &c->beta1, &c->beta2,
                          &c->eps,          &c->lr_decay, &c->initial_accumulator_value, &c->alpha};
    for (size_t i = 0; i < sizeof dv / sizeof dv[0]; i++)
        if (!isfinite(*dv[i])) {
            ERRF("optimizer hyper-parameters must be finite");
            return -GC_ERR_PARAM;
        }
    /* the checks of torch's constructors */
    if (c->weight_decay < 0) {
        ERRF("invalid weight_decay value: %g (must be >= 0)", c->weight_decay);
        return -GC_ERR_PARAM;
    }
    if (c->momentum < 0) {
        ERRF("invalid momentum value: %g (must be >= 0)", c->momentum);
        return -GC_ERR_PARAM;
    }
    if (c->eps < 0) {
        ERRF("invalid epsilon value: %g (must be >= 0)", c->eps);
        return -GC_ERR_PARAM;
    }
    if (c->gcomp_guard_bits < 0 || c->gcomp_guard_bits > 8) {
        ERRF("invalid GCOMP guard bits: %d (0..8)", c->gcomp_guard_bits);
        return -GC_ERR_PARAM;
    }
    switch (c->kind) {
    case OPT_SGD:
        if (c->nesterov && (c->momentum <= 0 || c->dampening != 0)) {
            ERRF("Nesterov momentum requires a momentum and zero dampening");
            return -GC_ERR_PARAM;
        }
        break;
    case OPT_ADAM:
    case OPT_ADAMW:
        if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1)) {
            ERRF("invalid beta parameters: (%g, %g) (each in [0, 1))", c->beta1, c->beta2);
            return -GC_ERR_PARAM;
        }
        break;
    case OPT_ADAGRAD:
        if (c->lr_decay < 0 || c->initial_accumulator_value < 0) {
            ERRF("invalid AdaGrad lr_decay %g or initial accumulator %g (must be >= 0)", c->lr_decay,
                 c->initial_accumulator_value);
            return -GC_ERR_PARAM;
        }
        break;
    case OPT_RMSPROP:
        if (c->alpha < 0) {
            ERRF("invalid alpha value: %g (must be >= 0)", c->alpha);
            return -GC_ERR_PARAM;
        }
        break;
    default: break;
    }
    return 0;
}

static const OptKey *opt_key_find(const char *key) {
    for (int i = 0; i < N_OPT_KEYS; i++)
        if (!strcmp(opt_keys[i].key, key)) return &opt_keys[i];
    return NULL;
}

int opt_key_applies(OptKind kind, const char *key) {
    const OptKey *k = opt_key_find(key);
    return k && (k->kinds & (1 << kind)) != 0;
}

int opt_config_parse(OptConfig *c, const char *spec, char *err, size_t errlen) {
    if (!spec || !*spec) {
        ERRF("empty optimizer spec (try sgd, momentum, nesterov, adam, adamw, adagrad, rmsprop)");
        return -GC_ERR_PARAM;
    }
    char buf[512];
    if (strlen(spec) >= sizeof buf) {
        ERRF("optimizer spec too long");
        return -GC_ERR_PARAM;
    }
    strcpy(buf, spec);
    char *colon = strchr(buf, ':');
    if (colon) *colon = 0;
    const char *name = buf;
    if (!strcmp(name, "sgd")) opt_config_default(c, OPT_SGD);
    else if (!strcmp(name, "momentum")) {
        opt_config_default(c, OPT_SGD);
        c->momentum = OPT_DEFAULT_MOMENTUM;
    } else if (!strcmp(name, "nesterov")) {
        opt_config_default(c, OPT_SGD);
        c->momentum = OPT_DEFAULT_MOMENTUM;
        c->nesterov = 1;
    } else if (!strcmp(name, "adam")) opt_config_default(c, OPT_ADAM);
    else if (!strcmp(name, "adamw")) opt_config_default(c, OPT_ADAMW);
    else if (!strcmp(name, "adagrad")) opt_config_default(c, OPT_ADAGRAD);
    else if (!strcmp(name, "rmsprop")) opt_config_default(c, OPT_RMSPROP);
    else {
        ERRF("unknown optimizer '%s' (sgd, momentum, nesterov, adam, adamw, adagrad, rmsprop)", name);
        return -GC_ERR_PARAM;
    }
    if (colon && !colon[1]) {
        ERRF("nothing after ':' in optimizer spec '%s'", spec);
        return -GC_ERR_PARAM;
    }
    if (colon) {
        char *save = NULL;
        for (char *kv = strtok_r(colon + 1, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(kv, '=');
            if (!eq) {
                ERRF("optimizer option '%s' is not key=value", kv);
                return -GC_ERR_PARAM;
            }
            *eq = 0;
            const char *key = kv, *val = eq + 1;
            if (!strcmp(key, "weight_decay")) key = "wd";
            const OptKey *k = opt_key_find(key);
            if (!k) {
                ERRF("unknown optimizer option '%s' (see --help)", key);
                return -GC_ERR_PARAM;
            }
            if (!(k->kinds & (1 << c->kind))) {
                ERRF("option '%s' does not apply to %s", key, opt_kind_name(c->kind));
                return -GC_ERR_PARAM;
            }
            if (k->is_int) {
                long v;
                if (parse_long(val, &v) != 0 || v < 0 || v > 1000) {
                    ERRF("bad value '%s' for optimizer option '%s'", val, key);
                    return -GC_ERR_PARAM;
                }
                *(int *)((char *)c + k->off) = (int)v;
            } else {
                double v;
                if (parse_double(val, &v) != 0) {
                    ERRF("bad value '%s' for optimizer option '%s'", val, key);
                    return -GC_ERR_PARAM;
                }
                *(double *)((char *)c + k->off) = v;
            }
        }
    }
    return opt_config_validate(c, err, errlen);
}

int opt_config_describe(const OptConfig *c, char *buf, size_t n) {
    int len = snprintf(buf, n, "%s", opt_kind_name(c->kind));
    char sep = ':';
    for (int i = 0; i < N_OPT_KEYS; i++) {
        const OptKey *k = &opt_keys[i];
        if (!(k->kinds & (1 << c->kind))) continue;
        size_t at = len < 0 ? 0 : (size_t)len;
        if (at >= n) break;
        if (k->is_int)
            len += snprintf(buf + at, n - at, "%c%s=%d", sep, k->key, *(const int *)((const char *)c + k->off));
        else
        {
            char t[NUM_TEXT_MAX];
            len += snprintf(buf + at, n - at, "%c%s=%s", sep, k->key,
                            num_text(t, *(const double *)((const char *)c + k->off)));
        }
        sep = ',';
    }
    return len;
}

void opt_help(FILE *f) {
    fprintf(f, "Optimizers (--optim NAME[:key=value,...]; update rules of torch.optim 1.13):\n"
               "  sgd        plain SGD (with momentum= and nesterov=1 it is torch's SGD)\n"
               "  momentum   sgd with momentum=%g\n"
               "  nesterov   sgd with momentum=%g, nesterov=1\n"
               "  adam       Adam (amsgrad off)\n"
               "  adamw      AdamW (decoupled weight decay)\n"
               "  adagrad    AdaGrad\n"
               "  rmsprop    RMSProp (centered=1, momentum= options)\n"
               "Options:\n",
            OPT_DEFAULT_MOMENTUM, OPT_DEFAULT_MOMENTUM);
    for (int i = 0; i < N_OPT_KEYS; i++) {
        char kinds[80] = "";
        for (int k = 0; k < OPT_KIND_COUNT; k++)
            if (opt_keys[i].kinds & (1 << k)) {
                strcat(kinds, kinds[0] ? "," : "");
                strcat(kinds, kind_names[k]);
            }
        fprintf(f, "  %-10s %s [%s]\n", opt_keys[i].key, opt_keys[i].help,
                opt_keys[i].kinds == K_ALL ? "all" : kinds);
    }
    fprintf(f, "Example: --optim nesterov:momentum=0.9,wd=5e-4   --optim adamw:wd=0.05\n");
}

/* ------------------------------------------------------------- state ---- */

static float *alloc_state(size_t n, float fill) {
    size_t bytes = ((n + 15) & ~(size_t)15) * sizeof(float);
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) {
        gc_fatal("error: out of memory allocating a %zu-byte optimizer state arena\n", bytes);
    }
    float *s = p;
    size_t m = bytes / sizeof(float);
    for (size_t i = 0; i < m; i++) s[i] = fill;
    return s;
}

int optim_layout(Optim *o, const OptConfig *cfg, size_t n_floats, float fill[OPT_MAX_STATE]) {
    memset(o, 0, sizeof *o);
    char err[256];
    int rc = opt_config_validate(cfg, err, sizeof err);
    if (rc) {
        fprintf(stderr, "error: optimizer: %s\n", err);
        return rc;
    }
    o->cfg = *cfg;
    o->n = n_floats;
    const OptConfig *c = cfg;
#define ADD_STATE(nm, f)                      \
    do {                                      \
        o->state_name[o->n_state] = (nm);     \
        fill[o->n_state++] = (f);             \
    } while (0)
    switch (c->kind) {
    case OPT_SGD:
        if (c->momentum != 0) ADD_STATE("momentum_buffer", 0.0f);
        break;
    case OPT_ADAM:
    case OPT_ADAMW:
        ADD_STATE("exp_avg", 0.0f);
        ADD_STATE("exp_avg_sq", 0.0f);
        break;
    case OPT_ADAGRAD: ADD_STATE("sum", (float)c->initial_accumulator_value); break;
    case OPT_RMSPROP:
        ADD_STATE("square_avg", 0.0f);
        if (c->momentum > 0) ADD_STATE("momentum_buffer", 0.0f);
        if (c->centered) ADD_STATE("grad_avg", 0.0f);
        break;
    default: break;
    }
#undef ADD_STATE
    return 0;
}

int optim_init(Optim *o, const OptConfig *cfg, size_t n_floats) {
    float fill[OPT_MAX_STATE];
    int rc = optim_layout(o, cfg, n_floats, fill);
    for (int i = 0; !rc && i < o->n_state; i++) o->state[i] = alloc_state(n_floats, fill[i]);
    return rc;
}

void optim_free(Optim *o) {
    for (int i = 0; i < o->n_state; i++) free(o->state[i]);
    memset(o, 0, sizeof *o);
}

void optim_begin_step(Optim *o) { o->step++; }

int optim_state_count(const Optim *o) { return o->n_state; }

OptimState optim_state(const Optim *o, int i) {
    OptimState s = {NULL, NULL, 0};
    if (i >= 0 && i < o->n_state) {
        s.name = o->state_name[i];
        s.data = o->state[i];
        s.count = o->n;
    }
    return s;
}

long optim_get_step(const Optim *o) { return o->step; }
void optim_set_step(Optim *o, long step) { o->step = step; }

static float *state_by_name(const Optim *o, const char *name) {
    for (int i = 0; i < o->n_state; i++)
        if (!strcmp(o->state_name[i], name)) return o->state[i];
    return NULL;
}

int optim_mask_momentum(Optim *o, const uint8_t *mask, size_t off, size_t n) {
    float *m = state_by_name(o, "momentum_buffer");
    if (!m) m = state_by_name(o, "exp_avg");
    if (!m) return 0;
    m += off;
    for (size_t i = 0; i < n; i++)
        if (mask[i]) m[i] = 0.0f;
    return 1;
}

int optim_ckpt_sections(Optim *o, CkptSection *out, int cap, const char *prefix) {
    if (!prefix) prefix = "";
    if (cap < 2 + o->n_state) return -GC_ERR_NOSPACE;
    int k = 0;
    opt_config_describe(&o->cfg, o->desc_, sizeof o->desc_);
    snprintf(out[k].name, CKPT_NAME_MAX, "%sconfig", prefix);
    out[k].data = o->desc_;
    out[k++].len = strlen(o->desc_);
    o->step_le_ = (int64_t)o->step; /* the project's files are little-endian */
    snprintf(out[k].name, CKPT_NAME_MAX, "%sstep", prefix);
    out[k].data = &o->step_le_;
    out[k++].len = sizeof o->step_le_;
    for (int i = 0; i < o->n_state; i++) {
        snprintf(out[k].name, CKPT_NAME_MAX, "%s%s", prefix, o->state_name[i]);
        out[k].data = o->state[i];
        out[k++].len = o->n * sizeof(float);
    }
    return k;
}

int optim_ckpt_load(Optim *o, const Ckpt *ck, const char *prefix, char *err, size_t errlen) {
    if (!prefix) prefix = "";
    char name[CKPT_NAME_MAX + 64];
    snprintf(name, sizeof name, "%sconfig", prefix);
    size_t len = 0;
    const char *desc = ckpt_find(ck, name, &len);
    if (desc) {
        /* the kind must match; hyper-parameters may change on resume */
        size_t kl = strlen(opt_kind_name(o->cfg.kind));
        if (len < kl || memcmp(desc, opt_kind_name(o->cfg.kind), kl) != 0 || (len > kl && desc[kl] != ':')) {
            ERRF("checkpoint optimizer is '%.*s', expected %s (hint: resume with the same --optim)",
                 (int)(len > 100 ? 100 : len), desc, opt_kind_name(o->cfg.kind));
            return -1;
        }
    }
    int64_t step;
    snprintf(name, sizeof name, "%sstep", prefix);
    if (ckpt_load(ck, name, &step, sizeof step, err, errlen) != 0) return -1;
    if (step < 0) {
        ERRF("checkpoint optimizer step %lld is negative", (long long)step);
        return -1;
    }
    for (int i = 0; i < o->n_state; i++) {
        snprintf(name, sizeof name, "%s%s", prefix, o->state_name[i]);
        if (ckpt_load(ck, name, o->state[i], o->n * sizeof(float), err, errlen) != 0) return -1;
    }
    o->step = (long)step;
    return 0;
}

/* ------------------------------------------------------------ updates ---- */

/* torch: SGD (sgd.py _single_tensor_sgd)
 *   d_p = g.add(p, alpha=wd)                       if wd != 0
 *   buf = clone(d_p) (first step) | buf.mul_(mu).add_(d_p, alpha=1-dampening)
 *   d_p = d_p.add(buf, alpha=mu) (nesterov) | buf
 *   p.add_(d_p, alpha=-lr) */
static void update_sgd(const Optim *o, float *restrict p, const float *restrict g, float *restrict buf, double lr,
                       size_t n) {
    const OptConfig *c = &o->cfg;
    const float wd = (float)c->weight_decay, mu = (float)c->momentum, damp1 = (float)(1.0 - c->dampening);
    const float nlr = (float)(-lr);
    const int has_wd = c->weight_decay != 0, has_mom = c->momentum != 0, first = o->step == 1;
    if (!has_mom) {
        if (has_wd) {
            OPT_PFOR
            for (size_t i = 0; i < n; i++) p[i] = fmaf(fmaf(p[i], wd, g[i]), nlr, p[i]);
        } else {
            OPT_PFOR
            for (size_t i = 0; i < n; i++) p[i] = fmaf(g[i], nlr, p[i]);
        }
    } else if (c->nesterov) {
        OPT_PFOR
        for (size_t i = 0; i < n; i++) {
            float d = has_wd ? fmaf(p[i], wd, g[i]) : g[i];
            float b = first ? d : fmaf(d, damp1, buf[i] * mu);
            buf[i] = b;
            p[i] = fmaf(fmaf(b, mu, d), nlr, p[i]);
        }
    } else {
        OPT_PFOR
        for (size_t i = 0; i < n; i++) {
            float d = has_wd ? fmaf(p[i], wd, g[i]) : g[i];
            float b = first ? d : fmaf(d, damp1, buf[i] * mu);
            buf[i] = b;
            p[i] = fmaf(b, nlr, p[i]);
        }
    }
}

/* torch: Adam / AdamW (adam.py, adamw.py; capturable=False, amsgrad=False)
 *   AdamW: p.mul_(1 - lr*wd);  Adam: grad = g.add(p, alpha=wd) if wd != 0
 *   m.mul_(b1).add_(grad, alpha=1-b1)
 *   v.mul_(b2).addcmul_(grad, grad, value=1-b2)
 *   bc1 = 1 - b1**t; bc2 = 1 - b2**t; step_size = lr/bc1       (double)
 *   denom = (v.sqrt() / sqrt(bc2)).add_(eps)
 *   p.addcdiv_(m, denom, value=-step_size) */
static void update_adam(const Optim *o, float *restrict p, const float *restrict g, float *restrict m,
                        float *restrict v, double lr, size_t n) {
    const OptConfig *c = &o->cfg;
    const int adamw = c->kind == OPT_ADAMW;
    const double t = (double)o->step;
    const double bc1 = 1.0 - pow(c->beta1, t), bc2 = 1.0 - pow(c->beta2, t);
    const float nstep = (float)(-(lr / bc1)), bc2s = (float)sqrt(bc2), eps = (float)c->eps;
    const float b1 = (float)c->beta1, b2 = (float)c->beta2, omb1 = (float)(1.0 - c->beta1),
                omb2 = (float)(1.0 - c->beta2);
    const float wd = (float)c->weight_decay, decay = (float)(1.0 - lr * c->weight_decay);
    const int l2 = !adamw && c->weight_decay != 0;
    OPT_PFOR
    for (size_t i = 0; i < n; i++) {
        float pi = adamw ? p[i] * decay : p[i];
        float d = l2 ? fmaf(pi, wd, g[i]) : g[i];
        float mi = fmaf(d, omb1, m[i] * b1);
        float vi = fmaf(omb2 * d, d, v[i] * b2);
        m[i] = mi;
        v[i] = vi;
        float den = sqrtf(vi) / bc2s + eps;
        p[i] = pi + (nstep * mi) / den;
    }
}

/* torch: Adagrad (adagrad.py, dense)
 *   grad = g.add(p, alpha=wd) if wd != 0
 *   clr = lr / (1 + (t-1)*lr_decay)                (double)
 *   sum.addcmul_(grad, grad, value=1)
 *   std = sum.sqrt().add_(eps)
 *   p.addcdiv_(grad, std, value=-clr) */
static void update_adagrad(const Optim *o, float *restrict p, const float *restrict g, float *restrict s, double lr,
                           size_t n) {
    const OptConfig *c = &o->cfg;
    const float nclr = (float)(-(lr / (1.0 + ((double)o->step - 1.0) * c->lr_decay)));
    const float eps = (float)c->eps, wd = (float)c->weight_decay;
    const int has_wd = c->weight_decay != 0;
    OPT_PFOR
    for (size_t i = 0; i < n; i++) {
        float d = has_wd ? fmaf(p[i], wd, g[i]) : g[i];
        float si = fmaf(d, d, s[i]);
        s[i] = si;
        float std = sqrtf(si) + eps;
        p[i] = p[i] + (nclr * d) / std;
    }
}

/* torch: RMSprop (rmsprop.py)
 *   grad = g.add(p, alpha=wd) if wd != 0
 *   sq.mul_(alpha).addcmul_(grad, grad, value=1-alpha)
 *   centered: gavg.mul_(alpha).add_(grad, alpha=1-alpha); avg = sq.addcmul(gavg, gavg, value=-1).sqrt_()
 *   else avg = sq.sqrt();  avg = avg.add_(eps)
 *   momentum > 0: buf.mul_(mu).addcdiv_(grad, avg); p.add_(buf, alpha=-lr)
 *   else p.addcdiv_(grad, avg, value=-lr) */
static void update_rmsprop(const Optim *o, float *restrict p, const float *restrict g, float *restrict sq,
                           float *restrict buf, float *restrict ga, double lr, size_t n) {
    const OptConfig *c = &o->cfg;
    const float a = (float)c->alpha, oma = (float)(1.0 - c->alpha), eps = (float)c->eps;
    const float wd = (float)c->weight_decay, mu = (float)c->momentum, nlr = (float)(-lr);
    const int has_wd = c->weight_decay != 0, has_mom = c->momentum > 0, centered = c->centered;
    OPT_PFOR
    for (size_t i = 0; i < n; i++) {
        float d = has_wd ? fmaf(p[i], wd, g[i]) : g[i];
        float s = fmaf(oma * d, d, sq[i] * a);
        sq[i] = s;
        float avg;
        if (centered) {
            float gi = fmaf(d, oma, ga[i] * a);
            ga[i] = gi;
            avg = sqrtf(fmaf(-gi, gi, s));
        } else {
            avg = sqrtf(s);
        }
        avg = avg + eps;
        if (has_mom) {
            float b = buf[i] * mu + d / avg;
            buf[i] = b;
            p[i] = fmaf(b, nlr, p[i]);
        } else {
            p[i] = p[i] + (nlr * d) / avg;
        }
    }
}

int optim_update(Optim *o, float *params, const float *grads, double lr, size_t off, size_t n) {
    if (o->step < 1) {
        fprintf(stderr, "error: optim_update before optim_begin_step\n");
        return -GC_ERR_STATE;
    }
    if (off > o->n || n > o->n - off) {
        fprintf(stderr, "error: optim_update range [%zu, %zu) outside the %zu-float arena\n", off, off + n, o->n);
        return -GC_ERR_PARAM;
    }
    if (n == 0) return 0;
    float *p = params + off;
    const float *g = grads + off;
    switch (o->cfg.kind) {
    case OPT_SGD: update_sgd(o, p, g, o->n_state ? o->state[0] + off : NULL, lr, n); break;
    case OPT_ADAM:
    case OPT_ADAMW: update_adam(o, p, g, o->state[0] + off, o->state[1] + off, lr, n); break;
    case OPT_ADAGRAD: update_adagrad(o, p, g, o->state[0] + off, lr, n); break;
    case OPT_RMSPROP: {
        float *buf = state_by_name(o, "momentum_buffer"), *ga = state_by_name(o, "grad_avg");
        update_rmsprop(o, p, g, o->state[0] + off, buf ? buf + off : NULL, ga ? ga + off : NULL, lr, n);
        break;
    }
    default: return -GC_ERR_PARAM;
    }
    return 0;
}

void optim_sgd_plain(float *params, const float *update, double lr, size_t n) {
    const float nlr = (float)(-lr);
    float *restrict p = params;
    const float *restrict u = update;
    OPT_PFOR
    for (size_t i = 0; i < n; i++) p[i] = fmaf(u[i], nlr, p[i]);
}

void optim_add_weight_decay(float *grads, const float *params, double wd, size_t n) {
    if (wd == 0) return;
    const float w = (float)wd;
    float *restrict g = grads;
    const float *restrict p = params;
    OPT_PFOR
    for (size_t i = 0; i < n; i++) g[i] = fmaf(p[i], w, g[i]);
}

/* -------------------------------------------------------------- GCOMP ---- */

/* The paper's rule. For every element, theta_t = A - c*g (Table 2 / Appendix A
 * of GCOMP written for torch's exact rule); writes delta = A/(c g) or the
 * level max{L : |A| > |c g| 2^(6L)} (section 5.1). */
static int gcomp_paper(uint8_t *levels, float *delta, const Optim *o, const float *params_at, const float *grads_at,
                     double lr, size_t off, size_t n) {
    if (off > o->n || n > o->n - off) {
        fprintf(stderr, "error: GCOMP metric range [%zu, %zu) outside the %zu-float arena\n", off, off + n, o->n);
        return -GC_ERR_PARAM;
    }
    if (n == 0) return 0;
    const OptConfig *c = &o->cfg;
    const float *restrict p = params_at;
    const float *restrict g = grads_at;
    const long t = o->step + 1; /* the step these gradients will be applied in */
    const float s1 = ldexpf(1.0f, GCOMP_BITS_PER_LEVEL), s2 = ldexpf(1.0f, 2 * GCOMP_BITS_PER_LEVEL),
                s3 = ldexpf(1.0f, 3 * GCOMP_BITS_PER_LEVEL);
    const float eta = (float)lr, lam = (float)c->weight_decay, mu = (float)c->momentum;
    const float *restrict s0 = o->n_state > 0 ? o->state[0] + off : NULL;
    const float *restrict s1b = o->n_state > 1 ? o->state[1] + off : NULL;

    /* Each case defines A and cg for element i, then EMIT stores the result. */
#define EMIT                                                                           \
    do {                                                                               \
        float a_ = fabsf(A), u_ = fabsf(cg);                                           \
        if (levels)                                                                    \
            levels[i] = (uint8_t)((a_ > u_ * s1) + (a_ > u_ * s2) + (a_ > u_ * s3));   \
        else                                                                           \
            delta[i] = A / cg;                                                         \
    } while (0)

    switch (c->kind) {
    case OPT_SGD: {
        /* Table 2 SGD:      delta = theta/(eta g) - lambda theta/g
         * Appendix A.1:     delta = (theta - eta mu b - eta (1-tau) lambda theta) / (eta (1-tau) g)
         * Appendix A.2:     delta = ((1 - eta lambda (1+mu)) theta - eta mu^2 b) / (eta (1+mu) g)
         * First momentum step (b = d, torch): as plain SGD. */
        const int has_mom = c->momentum != 0, first = t == 1;
        const float damp1 = has_mom && !first && !c->nesterov ? (float)(1.0 - c->dampening) : 1.0f;
        const float *restrict b = s0;
        if (!has_mom || (first && !c->nesterov)) {
            OPT_PFOR
            for (size_t i = 0; i < n; i++) {
                float A = p[i] - eta * lam * p[i], cg = eta * g[i];
                EMIT;
            }
        } else if (c->nesterov) {
            const float opm = 1.0f + mu;
            OPT_PFOR
            for (size_t i = 0; i < n; i++) {
                float bi = first ? 0.0f : b[i];
                float A = p[i] - eta * (opm * lam * p[i] + mu * mu * bi), cg = eta * opm * g[i];
                EMIT;
            }
        } else {
            OPT_PFOR
            for (size_t i = 0; i < n; i++) {
                float A = p[i] - eta * (mu * b[i] + damp1 * lam * p[i]), cg = eta * damp1 * g[i];
                EMIT;
            }
        }
        break;
    }
    case OPT_ADAM:
    case OPT_ADAMW: {
        /* Appendix A.5 (Adam): delta = (theta D - eta b1 m - eta (1-b1) lambda theta) / (eta (1-b1) g)
         * Appendix A.6 (AdamW): delta = (theta (1 - eta lambda) D - eta b1 m) / (eta (1-b1) g)
         * with D = (sqrt(v_t)/sqrt(bc2) + eps) (1 - b1^t), i.e. torch's denom times bc1. */
        const int adamw = c->kind == OPT_ADAMW;
        const double bc1 = 1.0 - pow(c->beta1, (double)t), bc2 = 1.0 - pow(c->beta2, (double)t);
        const float ss = (float)(lr / bc1), bc2s = (float)sqrt(bc2), eps = (float)c->eps;
        const float b1 = (float)c->beta1, b2 = (float)c->beta2, omb1 = (float)(1.0 - c->beta1),
                    omb2 = (float)(1.0 - c->beta2), decay = (float)(1.0 - lr * c->weight_decay);
        const float *restrict m = s0, *restrict v = s1b;
        OPT_PFOR
        for (size_t i = 0; i < n; i++) {
            float th = adamw ? p[i] * decay : p[i];
            float d = adamw ? g[i] : g[i] + lam * p[i];
            float vt = v[i] * b2 + omb2 * d * d;
            float den = sqrtf(vt) / bc2s + eps;
            float k = ss / den;
            float A = th - k * (b1 * m[i] + (adamw ? 0.0f : omb1 * lam * p[i])), cg = k * omb1 * g[i];
            EMIT;
        }
        break;
    }
    case OPT_ADAGRAD: {
        /* Appendix A.3: delta = (theta (sqrt(r_t) + eps) - clr lambda theta) / (clr g), clr = lr/(1+(t-1) lr_decay) */
        const float clr = (float)(lr / (1.0 + ((double)t - 1.0) * c->lr_decay)), eps = (float)c->eps;
        const float *restrict r = s0;
        OPT_PFOR
        for (size_t i = 0; i < n; i++) {
            float d = g[i] + lam * p[i];
            float k = clr / (sqrtf(r[i] + d * d) + eps);
            float A = p[i] - k * lam * p[i], cg = k * g[i];
            EMIT;
        }
        break;
    }
    case OPT_RMSPROP: {
        /* Appendix A.4: delta = (theta (sqrt(v_t) + eps) - eta lambda theta) / (eta g); with momentum
         * (derived as A.1): A = theta - eta mu buf - eta lambda theta / avg; centered: avg = sqrt(v_t - gavg_t^2) + eps */
        const float a = (float)c->alpha, oma = (float)(1.0 - c->alpha), eps = (float)c->eps;
        const float *restrict sq = s0;
        const float *buf = state_by_name(o, "momentum_buffer"), *ga = state_by_name(o, "grad_avg");
        const float *restrict bb = buf ? buf + off : NULL, *restrict gg = ga ? ga + off : NULL;
        const int centered = c->centered, has_mom = bb != NULL;
        OPT_PFOR
        for (size_t i = 0; i < n; i++) {
            float d = g[i] + lam * p[i];
            float s = sq[i] * a + oma * d * d;
            if (centered) {
                float gi = gg[i] * a + oma * d;
                s = s - gi * gi;
            }
            float k = eta / (sqrtf(fmaxf(s, 0.0f)) + eps);
            float A = p[i] - k * lam * p[i] - (has_mom ? eta * mu * bb[i] : 0.0f), cg = k * g[i];
            EMIT;
        }
        break;
    }
    default: return -GC_ERR_PARAM;
    }
#undef EMIT
    return 0;
}

/* The guarded rule (guard >= 1; see optim.h). For every element: theta_t, the
 * untruncated result computed with torch's operation sequence (as in the
 * update functions above), alpha = a bound on |d theta_t / d g| and beta = a
 * bound on the shift rounding flips can add, both propagated through every
 * rounded operation that depends on g: a rounded op y = fl(f(x..)) passes on
 * |df/dx| (alpha, beta) of its inputs and adds UB(y) = |y| 2^-23 >= ulp(y) to
 * beta. Level L is safe when alpha |g| 2^(6L-23) + beta < |theta_t| 2^(-23-guard)
 * (<= ulp(theta_t) / 2^(guard-1)). */
#define UB(x) (fabsf(x) * 0x1p-23f)

static int gcomp_bound(uint8_t *levels, const Optim *o, const float *params_at, const float *grads_at, double lr,
                       size_t off, size_t n) {
    const OptConfig *c = &o->cfg;
    const float *restrict p = params_at;
    const float *restrict g = grads_at;
    const long t = o->step + 1;
    const int guard = c->gcomp_guard_bits;
    const float gs = ldexpf(1.0f, guard), bs = ldexpf(1.0f, 23 + guard);
    const float L1 = ldexpf(1.0f, GCOMP_BITS_PER_LEVEL), L2 = ldexpf(1.0f, 2 * GCOMP_BITS_PER_LEVEL),
                L3 = ldexpf(1.0f, 3 * GCOMP_BITS_PER_LEVEL);
    const float wd = (float)c->weight_decay;
    const int has_wd = c->weight_decay != 0;
    const float *restrict s0 = o->n_state > 0 ? o->state[0] + off : NULL;
    const float *restrict s1b = o->n_state > 1 ? o->state[1] + off : NULL;

    /* needs theta_t (float), alpha, beta (float) for element i */
#define EMIT_BOUND                                                                  \
    do {                                                                            \
        float T_ = fabsf(theta_t) - beta * bs, a_ = alpha * fabsf(g[i]) * gs;       \
        levels[i] = (uint8_t)((a_ * L1 < T_) + (a_ * L2 < T_) + (a_ * L3 < T_));    \
    } while (0)

    switch (c->kind) {
    case OPT_SGD: {
        const float mu = (float)c->momentum, damp1 = (float)(1.0 - c->dampening), nlr = (float)(-lr);
        const float eta = fabsf(nlr);
        const int has_mom = c->momentum != 0, first = t == 1, nest = c->nesterov;
        const float *restrict b = s0;
        /* d = fl(theta wd + g): alpha_d = 1, beta_d = UB(d) with weight decay (0 without) */
        if (!has_mom || (first && !nest)) {
            /* theta_t = fl(theta - lr d)  (a first momentum step has b_t = d) */
            OPT_PFOR
            for (size_t i = 0; i < n; i++) {
                float d = has_wd ? fmaf(p[i], wd, g[i]) : g[i];
                float theta_t = fmaf(d, nlr, p[i]);
                float alpha = eta, beta = has_wd ? eta * UB(d) : 0.0f;
                EMIT_BOUND;
            }
        } else if (!nest) {
            /* b_t = fl(d damp1 + fl(b mu)); theta_t = fl(theta - lr b_t) */
            OPT_PFOR
            for (size_t i = 0; i < n; i++) {
                float d = has_wd ? fmaf(p[i], wd, g[i]) : g[i];
                float bt = fmaf(d, damp1, b[i] * mu);
                float theta_t = fmaf(bt, nlr, p[i]);
                float alpha = eta * damp1, beta = eta * ((has_wd ? damp1 * UB(d) : 0.0f) + UB(bt));
                EMIT_BOUND;
            }
        } else {
            /* b_t = d (first) | fl(d + fl(b mu)); q = fl(b_t mu + d); theta_t = fl(theta - lr q) */
            OPT_PFOR
            for (size_t i = 0; i < n; i++) {
                float d = has_wd ? fmaf(p[i], wd, g[i]) : g[i];
                float bd = has_wd ? UB(d) : 0.0f;
                float bt = first ? d : fmaf(d, damp1, b[i] * mu);
                float bb = first ? bd : bd + UB(bt);
                float q = fmaf(bt, mu, d);
                float theta_t = fmaf(q, nlr, p[i]);
                float alpha = eta * (mu + 1.0f), beta = eta * (mu * bb + bd + UB(q));
                EMIT_BOUND;
            }
        }
        break;
    }
    case OPT_ADAM:
    case OPT_ADAMW: {
        const int adamw = c->kind == OPT_ADAMW;
        const double bc1 = 1.0 - pow(c->beta1, (double)t), bc2 = 1.0 - pow(c->beta2, (double)t);
        const float nstep = (float)(-(lr / bc1)), bc2s = (float)sqrt(bc2), eps = (float)c->eps;
        const float b1 = (float)c->beta1, b2 = (float)c->beta2, omb1 = (float)(1.0 - c->beta1),
                    omb2 = (float)(1.0 - c->beta2), decay = (float)(1.0 - lr * c->weight_decay);
        const float ans = fabsf(nstep);
        const int l2 = !adamw && has_wd;
        const float *restrict m = s0, *restrict v = s1b;
        OPT_PFOR
        for (size_t i = 0; i < n; i++) {
            float th = adamw ? p[i] * decay : p[i];
            float d = l2 ? fmaf(th, wd, g[i]) : g[i];
            float ad = 1.0f, bd = l2 ? UB(d) : 0.0f;
            /* m_t = fl(d omb1 + fl(m b1)) */
            float mt = fmaf(d, omb1, m[i] * b1);
            float am = omb1 * ad, bm = omb1 * bd + UB(mt);
            /* w = fl(omb2 d); v_t = fl(w d + fl(v b2)) */
            float w = omb2 * d;
            float aw = omb2 * ad, bw = omb2 * bd + UB(w);
            float vt = fmaf(w, d, v[i] * b2);
            float av = fabsf(w) * ad + fabsf(d) * aw, bv = fabsf(w) * bd + fabsf(d) * bw + UB(vt);
            /* sq = fl(sqrt(v_t)): |d sqrt| <= dv / (2 sq) */
            float sq = sqrtf(vt);
            float inv2 = 0.5f / sq;
            float asq = av * inv2, bsq = bv * inv2 + UB(sq);
            /* den = fl(fl(sq / bc2s) + eps) */
            float qd = sq / bc2s;
            float aqd = asq / bc2s, bqd = bsq / bc2s + UB(qd);
            float den = qd + eps;
            float aden = aqd, bden = bqd + UB(den);
            /* X = fl(fl(nstep m_t) / den) */
            float num = nstep * mt;
            float anum = ans * am, bnum = ans * bm + UB(num);
            float X = num / den;
            float alpha = anum / den + fabsf(X) * aden / den;
            float beta = bnum / den + fabsf(X) * bden / den + UB(X);
            float theta_t = th + X;
            EMIT_BOUND;
        }
        break;
    }
    case OPT_ADAGRAD: {
        const float nclr = (float)(-(lr / (1.0 + ((double)t - 1.0) * c->lr_decay))), eps = (float)c->eps;
        const float ancl = fabsf(nclr);
        const float *restrict r = s0;
        OPT_PFOR
        for (size_t i = 0; i < n; i++) {
            float d = has_wd ? fmaf(p[i], wd, g[i]) : g[i];
            float ad = 1.0f, bd = has_wd ? UB(d) : 0.0f;
            /* s_t = fl(d d + s) */
            float st = fmaf(d, d, r[i]);
            float as = 2.0f * fabsf(d) * ad, bs_ = 2.0f * fabsf(d) * bd + UB(st);
            float sq = sqrtf(st);
            float inv2 = 0.5f / sq;
            float asq = as * inv2, bsq = bs_ * inv2 + UB(sq);
            float sd = sq + eps;
            float asd = asq, bsd = bsq + UB(sd);
            float num = nclr * d;
            float anum = ancl * ad, bnum = ancl * bd + UB(num);
            float X = num / sd;
            float alpha = anum / sd + fabsf(X) * asd / sd;
            float beta = bnum / sd + fabsf(X) * bsd / sd + UB(X);
            float theta_t = p[i] + X;
            EMIT_BOUND;
        }
        break;
    }
    case OPT_RMSPROP: {
        const float a = (float)c->alpha, oma = (float)(1.0 - c->alpha), eps = (float)c->eps;
        const float mu = (float)c->momentum, nlr = (float)(-lr), eta = fabsf(nlr);
        const float *restrict sqv = s0;
        const float *buf = state_by_name(o, "momentum_buffer"), *ga = state_by_name(o, "grad_avg");
        const float *restrict bb = buf ? buf + off : NULL, *restrict gg = ga ? ga + off : NULL;
        const int centered = c->centered, has_mom = bb != NULL;
        OPT_PFOR
        for (size_t i = 0; i < n; i++) {
            float d = has_wd ? fmaf(p[i], wd, g[i]) : g[i];
            float ad = 1.0f, bd = has_wd ? UB(d) : 0.0f;
            /* w = fl(oma d); s = fl(w d + fl(sq a)) */
            float w = oma * d;
            float aw = oma * ad, bw = oma * bd + UB(w);
            float s = fmaf(w, d, sqv[i] * a);
            float as = fabsf(w) * ad + fabsf(d) * aw, bs_ = fabsf(w) * bd + fabsf(d) * bw + UB(s);
            if (centered) {
                /* gi = fl(d oma + fl(ga a)); s = fl(-gi gi + s) */
                float gi = fmaf(d, oma, gg[i] * a);
                float agi = oma * ad, bgi = oma * bd + UB(gi);
                float var = fmaf(-gi, gi, s);
                as = 2.0f * fabsf(gi) * agi + as;
                bs_ = 2.0f * fabsf(gi) * bgi + bs_ + UB(var);
                s = var;
            }
            float r = sqrtf(s);
            float inv2 = 0.5f / r;
            float ar = as * inv2, br = bs_ * inv2 + UB(r);
            float avg = r + eps;
            float aavg = ar, bavg = br + UB(avg);
            float theta_t, alpha, beta;
            if (has_mom) {
                /* y = fl(d / avg); b = fl(fl(buf mu) + y); theta_t = fl(theta - lr b) */
                float y = d / avg;
                float ay = ad / avg + fabsf(y) * aavg / avg, by = bd / avg + fabsf(y) * bavg / avg + UB(y);
                float bt = bb[i] * mu + y;
                theta_t = fmaf(bt, nlr, p[i]);
                alpha = eta * ay;
                beta = eta * (by + UB(bt));
            } else {
                /* X = fl(fl(-lr d) / avg) */
                float num = nlr * d;
                float anum = eta * ad, bnum = eta * bd + UB(num);
                float X = num / avg;
                alpha = anum / avg + fabsf(X) * aavg / avg;
                beta = bnum / avg + fabsf(X) * bavg / avg + UB(X);
                theta_t = p[i] + X;
            }
            EMIT_BOUND;
        }
        break;
    }
    default: return -GC_ERR_PARAM;
    }
#undef EMIT_BOUND
    return 0;
}
#undef UB

static int gcomp_levels_run(uint8_t *levels, const Optim *o, const float *params_at, const float *grads_at, double lr,
                            size_t off, size_t n) {
    if (off > o->n || n > o->n - off) {
        fprintf(stderr, "error: GCOMP metric range [%zu, %zu) outside the %zu-float arena\n", off, off + n, o->n);
        return -GC_ERR_PARAM;
    }
    if (n == 0) return 0;
    if (o->cfg.gcomp_guard_bits == 0) return gcomp_paper(levels, NULL, o, params_at, grads_at, lr, off, n);
    return gcomp_bound(levels, o, params_at, grads_at, lr, off, n);
}

int optim_gcomp_levels_at(uint8_t *levels, const Optim *o, const float *params_at, const float *grads_at, double lr,
                          size_t off, size_t n) {
    return gcomp_levels_run(levels, o, params_at, grads_at, lr, off, n);
}

int optim_gcomp_levels(uint8_t *levels, const Optim *o, const float *params, const float *grads, double lr,
                       size_t off, size_t n) {
    if (off > o->n || n > o->n - off) {
        fprintf(stderr, "error: GCOMP metric range [%zu, %zu) outside the %zu-float arena\n", off, off + n, o->n);
        return -GC_ERR_PARAM;
    }
    return gcomp_levels_run(levels, o, params + off, grads + off, lr, off, n);
}

int optim_gcomp_delta(float *delta, const Optim *o, const float *params_at, const float *grads_at, double lr,
                      size_t off, size_t n) {
    return gcomp_paper(NULL, delta, o, params_at, grads_at, lr, off, n);
}
