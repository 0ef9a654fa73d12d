/* Optimizers over flat float arenas, each matching PyTorch 1.13's update rule
 * (torch/optim/{sgd,adam,adamw,adagrad,rmsprop}.py, the default single-tensor
 * path) operation by operation, and the GCOMP quantization metric of each
 * optimizer's own update rule.
 *
 * Arenas (see nn/params.h): parameters, gradients and every optimizer state
 * buffer share offsets, so tensor t is [t.offset, t.offset + t.numel) in all
 * of them. The optimizer owns its state arenas (64-byte aligned, n_floats
 * each); the caller owns parameters and gradients.
 *
 * One step:
 *     optim_begin_step(&o);                        // step t = t + 1 (Adam bias correction)
 *     optim_update(&o, params, grads, lr, 0, n);   // whole arena at once ...
 *     // ... or once per tensor: optim_update(&o, params, grads, lr, t.offset, t.numel)
 *
 * Parameters are overwritten in place; gradients are only read (weight decay
 * is added to a private copy, as torch's d_p = d_p.add(param, alpha=wd)).
 *
 * Exactness. PyTorch's CPU kernels for float tensors cast every Python scalar
 * to float, fuse `a.add_(b, alpha=s)` into fma(b, s, a) and `a.addcmul_(b, c,
 * value=s)` into fma(s*b, c, a), and compute `a.addcdiv_(b, c, value=s)` as
 * a + (s*b)/c (checked empirically against torch 1.13 on AVX2). The loops
 * below repeat those operations in the same order with the same roundings
 * (explicit fmaf; the build is ISO C, so the compiler contracts nothing else);
 * scalar hyper-parameter arithmetic (bias corrections, 1 - beta, lr / bc1) is
 * done in double as Python does, then cast. The result is bit-identical to
 * torch on every element we have tested, and the same for any thread count
 * (every loop is elementwise).
 *
 * Hyper-parameter defaults are torch's (OPT_DEFAULT_* below); one header so a
 * CUDA twin can never drift.
 */
#ifndef GC_OPTIM_H
#define GC_OPTIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/ckpt.h"

typedef enum {
    OPT_SGD,     /* plain, momentum (dampening), Nesterov: torch.optim.SGD */
    OPT_ADAM,    /* torch.optim.Adam, amsgrad=False */
    OPT_ADAMW,   /* torch.optim.AdamW, amsgrad=False */
    OPT_ADAGRAD, /* torch.optim.Adagrad */
    OPT_RMSPROP, /* torch.optim.RMSprop (centered and momentum options) */
    OPT_KIND_COUNT
} OptKind;

/* torch 1.13 defaults */
#define OPT_DEFAULT_ADAM_BETA1 0.9
#define OPT_DEFAULT_ADAM_BETA2 0.999
#define OPT_DEFAULT_ADAM_EPS 1e-8
#define OPT_DEFAULT_ADAMW_WD 1e-2
#define OPT_DEFAULT_ADAGRAD_EPS 1e-10
#define OPT_DEFAULT_RMSPROP_ALPHA 0.99
#define OPT_DEFAULT_RMSPROP_EPS 1e-8
/* momentum used by the "momentum" and "nesterov" aliases of opt_config_parse */
#define OPT_DEFAULT_MOMENTUM 0.9
/* GCOMP metric: guard bits added to the paper's thresholds (see optim_gcomp_levels) */
#define OPT_DEFAULT_GCOMP_GUARD_BITS 1

typedef struct {
    OptKind kind;
    double weight_decay; /* L2 added to the gradient, d = g + wd*theta (AdamW: decoupled, theta *= 1 - lr*wd) */
    double momentum;     /* SGD, RMSProp (0 = off) */
    double dampening;    /* SGD: b = mu*b + (1 - dampening)*d (not on the first step, as torch) */
    int nesterov;        /* SGD: needs momentum > 0 and dampening == 0 */
    double beta1, beta2; /* Adam, AdamW */
    double eps;          /* Adam, AdamW, AdaGrad, RMSProp */
    double lr_decay;     /* AdaGrad: clr = lr / (1 + (t-1)*lr_decay) */
    double initial_accumulator_value; /* AdaGrad */
    double alpha;        /* RMSProp smoothing constant */
    int centered;        /* RMSProp: normalise by the estimated variance */
    int gcomp_guard_bits; /* GCOMP levels: extra margin bits over the paper's rule (0 = the paper exactly) */
} OptConfig;

#define OPT_MAX_STATE 3

typedef struct {
    OptConfig cfg;
    size_t n;                      /* floats in every state arena */
    long step;                     /* steps begun so far (torch's state['step']) */
    int n_state;                   /* state buffers in use */
    float *state[OPT_MAX_STATE];   /* [n] each, 64-byte aligned */
    const char *state_name[OPT_MAX_STATE];
    int64_t step_le_;              /* scratch for optim_ckpt_sections */
    char desc_[160];               /* scratch for optim_ckpt_sections */
} Optim;

/* one state buffer, for checkpoints */
typedef struct {
    const char *name; /* torch's state key: "momentum_buffer", "exp_avg", "exp_avg_sq", "sum", "square_avg", "grad_avg" */
    float *data;      /* [count] */
    size_t count;
} OptimState;

const char *opt_kind_name(OptKind k);
/* torch defaults for this kind (lr is not part of the config: it comes per step) */
void opt_config_default(OptConfig *c, OptKind kind);
/* torch's constructor checks; 0, or -GC_ERR_PARAM with a message in err */
int opt_config_validate(const OptConfig *c, char *err, size_t errlen);
/* Parse "NAME[:key=value,...]" (see opt_help). 0, or -GC_ERR_PARAM with a message in err. */
int opt_config_parse(OptConfig *c, const char *spec, char *err, size_t errlen);
/* 1 if the spec key (wd, momentum, nesterov, beta1, ...) applies to this kind, else 0 */
int opt_key_applies(OptKind kind, const char *key);
/* canonical spec string that opt_config_parse reads back to the same config */
int opt_config_describe(const OptConfig *c, char *buf, size_t n);
/* --optim help text */
void opt_help(FILE *f);

/* Allocate zeroed (AdaGrad: initial_accumulator_value) state arenas of n_floats.
 * 0, or -GC_ERR_PARAM for an invalid config (message on stderr). */
int optim_init(Optim *o, const OptConfig *cfg, size_t n_floats);
/* What optim_init and optim_init_cuda (optim/optim_cuda.h) share: o zeroed, its
 * config, size, and its states' names, count and initial values (fill[o->n_state]),
 * no arena allocated. 0, or -GC_ERR_PARAM for an invalid config (message on stderr). */
int optim_layout(Optim *o, const OptConfig *cfg, size_t n_floats, float fill[OPT_MAX_STATE]);
void optim_free(Optim *o);
/* step t <- t + 1; call once per optimizer step, before the optim_update calls */
void optim_begin_step(Optim *o);
/* Update params[off, off+n) from grads[off, off+n) and the state at the same
 * offsets, with learning rate lr (double, as torch's param_group['lr']).
 *   params: [n_floats] parameter arena, overwritten in range
 *   grads:  [n_floats] gradient arena, read only
 * 0; -GC_ERR_STATE before the first optim_begin_step; -GC_ERR_PARAM when the
 * range leaves the arena. */
int optim_update(Optim *o, float *params, const float *grads, double lr, size_t off, size_t n);

/* Checkpointing: state buffers by index (0 <= i < optim_state_count) and the step counter. */
int optim_state_count(const Optim *o);
OptimState optim_state(const Optim *o, int i);
long optim_get_step(const Optim *o);
void optim_set_step(Optim *o, long step);
/* Fill sections "<prefix>config" (describe string), "<prefix>step" (int64 LE) and
 * "<prefix><state name>" for common/ckpt.h. Returns the number written (at most
 * 2 + OPT_MAX_STATE), or -GC_ERR_NOSPACE when cap is too small. Pointers stay
 * valid while o is unchanged. */
int optim_ckpt_sections(Optim *o, CkptSection *out, int cap, const char *prefix);
/* Restore step and state from a checkpoint written by optim_ckpt_sections for an
 * optimizer of the same kind and size. 0, or -1 with a message in err. */
int optim_ckpt_load(Optim *o, const Ckpt *ck, const char *prefix, char *err, size_t errlen);

/* Plain SGD for the distributed layer when the exchange already did momentum
 * (DGC's momentum correction, DGC section 3.2): the global step is
 * params -= lr * update, rounded as torch's param.add_(d_p, alpha=-lr).
 *   params: [n] in place;  update: [n] */
void optim_sgd_plain(float *params, const float *update, double lr, size_t n);
/* grads += wd * params (torch's d_p.add(param, alpha=wd)); for schemes that fold
 * weight decay into the gradient before the exchange.
 *   grads: [n] in place;  params: [n] */
void optim_add_weight_decay(float *grads, const float *params, double wd, size_t n);
/* Momentum factor masking (DGC section 3.3, which SBC adopts, SBC section II):
 * zero the momentum of value off + i wherever mask[i] != 0, i < n: SGD's and
 * RMSProp's momentum_buffer, Adam's and AdamW's first moment exp_avg (their
 * momentum; the second moment, a scale, is kept). Returns 1, or 0 where the
 * optimizer has no momentum (plain SGD, AdaGrad, RMSProp without momentum). */
int optim_mask_momentum(Optim *o, const uint8_t *mask, size_t off, size_t n);

/* ---------------------------------------------------------------- GCOMP ----
 * GCOMP (section 5.1, Table 2, Appendix A): a gradient value g may
 * lose the low mantissa bits that the update would discard anyway when it adds
 * the (much smaller) gradient term to the rest of the new parameter. Writing
 * each optimizer's update as
 *     theta_t = A - c*g,   A, c from the state BEFORE the step (theta_{t-1}, b_{t-1}, m_{t-1}, ...)
 * the paper's metric is delta = A / (c*g) (Table 2; e.g. SGD:
 * delta = theta/(eta g) - lambda theta/g), and "if delta > 2^n, at least n bits
 * of the gradient's mantissa would be discarded" (section 5.1). Levels 0, 1, 2, 3
 * truncate 0, 6, 12, 18 mantissa bits (section 5.1, "Multi-Level Quantization").
 *
 * guard = cfg.gcomp_guard_bits selects the rule:
 *   guard = 0: the paper exactly, level = max { L : |delta| > 2^(6L) }. The
 *     truncated update then lands up to 2 ulp away for plain SGD (the
 *     paper's footnote 2: "within 2^-22 theta"). Where the gradient also
 *     feeds a state (momentum b_t, Adam's m_t and v_t: section 5.1's
 *     "limited side-effects"), rounding flips of that state and the
 *     denominator's change push rare values further: up to 16 ulp measured,
 *     a few values per million (tests/test_optim_gcomp.c, GCX_TEST_SEEDS=60).
 *   guard >= 1 (default 1): the same criterion made rigorous so that the
 *     truncated update stays within 1 ulp of the untruncated one (each guard
 *     bit beyond the first halves the budget again). Truncating n bits
 *     changes g by less than |g| 2^(n-23); a first-order error budget of torch's exact float
 *     operation sequence gives, per value, the sensitivity alpha >= |c| of the
 *     new parameter to g (Adam/RMSProp: including the gradient's effect on
 *     m_t, v_t and the denominator) and beta, the shift that rounding flips of
 *     the intermediate values (g + wd*theta, b_t, m_t, v_t, ...) can add once g
 *     changes at all. Then
 *       level = max { L : alpha |g| 2^(6L+guard) + beta 2^(23+guard) < |theta_t| },
 *     i.e. the paper's |delta| > 2^(n+guard) with c -> alpha and the rounding
 *     slack taken from the numerator (theta_t = the untruncated result).
 * The paper's terms are derived for the rules it does not list: the first
 * momentum step (torch initialises b = d, no dampening), centered RMSProp
 * (denominator sqrt(v - gavg^2) + eps), RMSProp with momentum
 * (A = theta - eta mu b - eta lambda theta/avg). optim_gcomp_delta returns the
 * paper's delta in all modes.
 */
#define GCOMP_BITS_PER_LEVEL 6
#define GCOMP_MAX_LEVEL 3

/* Truncation = clearing the low 6*level mantissa bits (toward zero). */
static inline float gcomp_truncate(float g, int level) {
    union {
        float f;
        uint32_t u;
    } x = {g};
    x.u &= ~((1u << (GCOMP_BITS_PER_LEVEL * level)) - 1u);
    return x.f;
}

/* Levels for the NEXT step's gradients: call BEFORE optim_begin_step of the
 * step that will apply them (it uses step t = optim_get_step(o) + 1).
 * grads must be the values the update will see (e.g. already averaged).
 *   levels: [n] out, 0..3 for element off+i
 *   params: [n_floats] parameter arena;  grads: [n_floats] gradient arena
 * 0, or -GC_ERR_PARAM when the range leaves the arena. */
int optim_gcomp_levels(uint8_t *levels, const Optim *o, const float *params, const float *grads, double lr,
                       size_t off, size_t n);
/* Same, for slices held outside the arenas: params_at and grads_at point at
 * element off ([n] each); off locates the optimizer state. */
int optim_gcomp_levels_at(uint8_t *levels, const Optim *o, const float *params_at, const float *grads_at,
                          double lr, size_t off, size_t n);
/* The metric itself, delta = A / (c g), for diagnostics and tests (slice pointers as above).
 *   delta: [n] out */
int optim_gcomp_delta(float *delta, const Optim *o, const float *params_at, const float *grads_at, double lr,
                      size_t off, size_t n);

#endif
