/* Learning-rate schedules (see lr_sched.h); formulas from torch/optim/lr_scheduler.py 1.13. */
#include "lr_sched.h"

#include <math.h>
#include <string.h>

#include "common/errors.h"
#include "common/units.h"

static const char *const kind_names[LR_KIND_COUNT] = {
    [LR_CONSTANT] = "constant", [LR_MULTISTEP] = "multistep", [LR_COSINE] = "cosine",
    [LR_POLY] = "poly",         [LR_PLATEAU] = "plateau",     [LR_STEP] = "step",
};

const char *lr_kind_name(LrKind k) { return (k >= 0 && k < LR_KIND_COUNT) ? kind_names[k] : "?"; }

#define ERRF(...)                                              \
    do {                                                       \
        if (err && errlen) snprintf(err, errlen, __VA_ARGS__); \
    } while (0)

static void plateau_reset(LrSched *s) {
    s->st.lr = s->base_lr;
    s->st.best = s->mode_max ? -INFINITY : INFINITY; /* torch: mode_worse */
    s->st.num_bad_epochs = 0;
    s->st.cooldown_counter = 0;
    s->st.last_epoch = 0;
}

void lr_sched_default(LrSched *s, LrKind kind, double base_lr) {
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->base_lr = base_lr;
    s->warmup_start = LR_DEFAULT_WARMUP_START;
    s->gamma = LR_DEFAULT_GAMMA;
    s->step_start = -1;
    s->power = LR_DEFAULT_POWER;
    s->factor = LR_DEFAULT_PLATEAU_FACTOR;
    s->patience = LR_DEFAULT_PLATEAU_PATIENCE;
    s->threshold = LR_DEFAULT_PLATEAU_THRESHOLD;
    s->eps = LR_DEFAULT_PLATEAU_EPS;
    plateau_reset(s);
}

int lr_sched_validate(const LrSched *s, char *err, size_t errlen) {
    if (s->kind < 0 || s->kind >= LR_KIND_COUNT) {
        ERRF("unknown schedule kind %d", (int)s->kind);
        return -GC_ERR_PARAM;
    }
    if (!isfinite(s->base_lr) || s->base_lr < 0) {
        ERRF("learning rate must be finite and >= 0 (got %g)", s->base_lr);
        return -GC_ERR_PARAM;
    }
    if (s->warmup < 0) {
        ERRF("warmup must be >= 0 steps");
        return -GC_ERR_PARAM;
    }
    if (!(s->warmup_start >= 0 && s->warmup_start <= 1)) {
        ERRF("warmup_start must be in [0, 1] (a factor of the lr; got %g)", s->warmup_start);
        return -GC_ERR_PARAM;
    }
    if ((s->kind == LR_MULTISTEP || s->kind == LR_STEP) && !(isfinite(s->gamma) && s->gamma > 0)) {
        ERRF("gamma must be > 0 (got %g)", s->gamma);
        return -GC_ERR_PARAM;
    }
    switch (s->kind) {
    case LR_MULTISTEP:
        if (s->n_milestones < 1) {
            ERRF("multistep needs milestones=A+B+... (steps after the warm-up)");
            return -GC_ERR_PARAM;
        }
        for (int i = 0; i < s->n_milestones; i++)
            if (s->milestones[i] < 0 || (i && s->milestones[i] < s->milestones[i - 1])) {
                ERRF("milestones must be >= 0 and non-decreasing");
                return -GC_ERR_PARAM;
            }
        break;
    case LR_STEP:
        if (s->step_size < 1) {
            ERRF("step needs size=N >= 1 (steps between decays)");
            return -GC_ERR_PARAM;
        }
        if (s->step_start < -1) {
            ERRF("start must be >= 0 (the first decayed step; default: size)");
            return -GC_ERR_PARAM;
        }
        break;
    case LR_COSINE:
    case LR_POLY:
        if (s->T < 0) {
            ERRF("T must be >= 1 step (or left out to use the run length)");
            return -GC_ERR_PARAM;
        }
        if (!isfinite(s->eta_min) || s->eta_min < 0) {
            ERRF("eta_min must be finite and >= 0");
            return -GC_ERR_PARAM;
        }
        if (!isfinite(s->power) || s->power < 0) {
            ERRF("power must be finite and >= 0");
            return -GC_ERR_PARAM;
        }
        break;
    case LR_PLATEAU:
        if (!(s->factor >= 0 && s->factor < 1)) {
            ERRF("factor should be < 1.0 and >= 0 (got %g)", s->factor);
            return -GC_ERR_PARAM;
        }
        if (s->patience < 0 || s->cooldown < 0) {
            ERRF("patience and cooldown must be >= 0");
            return -GC_ERR_PARAM;
        }
        if (!isfinite(s->threshold) || !isfinite(s->min_lr) || s->min_lr < 0 || !isfinite(s->eps) || s->eps < 0) {
            ERRF("threshold must be finite; min_lr and eps finite and >= 0");
            return -GC_ERR_PARAM;
        }
        break;
    default: break;
    }
    return 0;
}

/* ----------------------------------------------------------- parsing ---- */

typedef enum { V_DOUBLE, V_LONG, V_MILESTONES, V_MODE, V_TMODE } ValType;
enum { M_CONST = 1 << LR_CONSTANT, M_MULTI = 1 << LR_MULTISTEP, M_COS = 1 << LR_COSINE, M_POLY = 1 << LR_POLY,
       M_PLAT = 1 << LR_PLATEAU, M_STEP = 1 << LR_STEP, M_ALL = (1 << LR_KIND_COUNT) - 1 };

typedef struct {
    const char *key;
    size_t off;
    ValType type;
    int kinds;
    const char *help;
} SchedKey;

static const SchedKey sched_keys[] = {
    {"warmup", offsetof(LrSched, warmup), V_LONG, M_ALL, "linear warm-up steps before the schedule (default 0)"},
    {"warmup_start", offsetof(LrSched, warmup_start), V_DOUBLE, M_ALL, "warm-up factor at step 0 (default 1/3)"},
    {"milestones", offsetof(LrSched, milestones), V_MILESTONES, M_MULTI, "steps A+B+... where lr *= gamma"},
    {"gamma", offsetof(LrSched, gamma), V_DOUBLE, M_MULTI | M_STEP, "multiplicative decay (default 0.1)"},
    {"size", offsetof(LrSched, step_size), V_LONG, M_STEP, "steps between decays"},
    {"start", offsetof(LrSched, step_start), V_LONG, M_STEP, "first decayed step (default: size)"},
    {"T", offsetof(LrSched, T), V_LONG, M_COS | M_POLY, "schedule length in steps (default: run length - warmup)"},
    {"eta_min", offsetof(LrSched, eta_min), V_DOUBLE, M_COS, "cosine floor (default 0)"},
    {"power", offsetof(LrSched, power), V_DOUBLE, M_POLY, "polynomial power (default 1)"},
    {"mode", offsetof(LrSched, mode_max), V_MODE, M_PLAT, "min (loss) or max (accuracy) (default min)"},
    {"threshold_mode", offsetof(LrSched, threshold_abs), V_TMODE, M_PLAT, "rel or abs (default rel)"},
    {"factor", offsetof(LrSched, factor), V_DOUBLE, M_PLAT, "lr *= factor on a plateau (default 0.1)"},
    {"patience", offsetof(LrSched, patience), V_LONG, M_PLAT, "bad observations tolerated (default 10)"},
    {"threshold", offsetof(LrSched, threshold), V_DOUBLE, M_PLAT, "significant improvement (default 1e-4)"},
    {"cooldown", offsetof(LrSched, cooldown), V_LONG, M_PLAT, "observations ignored after a drop (default 0)"},
    {"min_lr", offsetof(LrSched, min_lr), V_DOUBLE, M_PLAT, "lower bound on the lr (default 0)"},
    {"eps", offsetof(LrSched, eps), V_DOUBLE, M_PLAT, "drops smaller than eps are skipped (default 1e-8)"},
};
#define N_SCHED_KEYS ((int)(sizeof sched_keys / sizeof sched_keys[0]))

static int set_key(LrSched *s, const SchedKey *k, const char *val, char *err, size_t errlen) {
    void *dst = (char *)s + k->off;
    switch (k->type) {
    case V_DOUBLE:
        if (parse_double(val, (double *)dst) != 0) goto bad;
        return 0;
    case V_LONG:
        if (parse_long(val, (long *)dst) != 0) goto bad;
        return 0;
    case V_MODE:
        if (!strcmp(val, "min")) *(int *)dst = 0;
        else if (!strcmp(val, "max")) *(int *)dst = 1;
        else goto bad;
        return 0;
    case V_TMODE:
        if (!strcmp(val, "rel")) *(int *)dst = 0;
        else if (!strcmp(val, "abs")) *(int *)dst = 1;
        else goto bad;
        return 0;
    case V_MILESTONES: {
        char buf[512];
        if (strlen(val) >= sizeof buf || !*val) goto bad;
        strcpy(buf, val);
        s->n_milestones = 0;
        char *save = NULL;
        for (char *m = strtok_r(buf, "+", &save); m; m = strtok_r(NULL, "+", &save)) {
            if (s->n_milestones == LR_MAX_MILESTONES) {
                ERRF("at most %d milestones", LR_MAX_MILESTONES);
                return -GC_ERR_PARAM;
            }
            if (parse_long(m, &s->milestones[s->n_milestones]) != 0) goto bad;
            s->n_milestones++;
        }
        if (!s->n_milestones) goto bad;
        return 0;
    }
    }
bad:
    ERRF("bad value '%s' for schedule option '%s'", val, k->key);
    return -GC_ERR_PARAM;
}

int lr_sched_parse(LrSched *s, const char *spec, double base_lr, char *err, size_t errlen) {
    if (!spec || !*spec) {
        ERRF("empty lr schedule (try constant, multistep, step, cosine, poly, plateau)");
        return -GC_ERR_PARAM;
    }
    char buf[1024];
    if (strlen(spec) >= sizeof buf) {
        ERRF("lr schedule spec too long");
        return -GC_ERR_PARAM;
    }
    strcpy(buf, spec);
    char *opts = NULL;
    char *colon = strchr(buf, ':');
    LrKind kind = LR_KIND_COUNT;
    if (colon) {
        *colon = 0;
        opts = colon + 1;
        if (!*opts) {
            ERRF("nothing after ':' in lr schedule '%s'", spec);
            return -GC_ERR_PARAM;
        }
    } else if (strchr(buf, '=')) {
        opts = buf; /* "warmup=5": constant with options */
        kind = LR_CONSTANT;
    }
    if (kind == LR_KIND_COUNT) {
        for (int k = 0; k < LR_KIND_COUNT; k++)
            if (!strcmp(buf, kind_names[k])) kind = (LrKind)k;
        if (kind == LR_KIND_COUNT) {
            ERRF("unknown lr schedule '%s' (constant, multistep, step, cosine, poly, plateau)", buf);
            return -GC_ERR_PARAM;
        }
    }
    lr_sched_default(s, kind, base_lr);
    if (opts) {
        char *save = NULL;
        for (char *kv = strtok_r(opts, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(kv, '=');
            if (!eq) {
                ERRF("schedule option '%s' is not key=value", kv);
                return -GC_ERR_PARAM;
            }
            *eq = 0;
            const SchedKey *k = NULL;
            for (int i = 0; i < N_SCHED_KEYS; i++)
                if (!strcmp(sched_keys[i].key, kv)) k = &sched_keys[i];
            if (!k) {
                ERRF("unknown schedule option '%s' (see --help)", kv);
                return -GC_ERR_PARAM;
            }
            if (!(k->kinds & (1 << kind))) {
                ERRF("option '%s' does not apply to the %s schedule", kv, kind_names[kind]);
                return -GC_ERR_PARAM;
            }
            int rc = set_key(s, k, eq + 1, err, errlen);
            if (rc) return rc;
        }
    }
    plateau_reset(s); /* best depends on mode */
    return lr_sched_validate(s, err, errlen);
}

int lr_sched_set_total(LrSched *s, long total_steps, char *err, size_t errlen) {
    if ((s->kind == LR_COSINE || s->kind == LR_POLY) && s->T == 0) {
        long T = total_steps - s->warmup;
        if (T < 1) {
            ERRF("%s schedule: %ld total steps leave none after the %ld warm-up steps", kind_names[s->kind],
                 total_steps, s->warmup);
            return -GC_ERR_PARAM;
        }
        s->T = T;
    }
    return 0;
}

double lr_sched_lr(const LrSched *s, long t) {
    const double base = s->base_lr;
    if (t < 0) t = 0;
    if (t < s->warmup) /* LinearLR closed form: base (start + (end - start) t / total), end = 1 */
        return base * (s->warmup_start + (1.0 - s->warmup_start) * (double)t / (double)s->warmup);
    t -= s->warmup;
    switch (s->kind) {
    case LR_CONSTANT: return base;
    case LR_MULTISTEP: {
        /* MultiStepLR: at each milestone lr *= gamma ** (times it is listed) */
        double lr = base;
        for (int i = 0; i < s->n_milestones;) {
            int j = i;
            while (j < s->n_milestones && s->milestones[j] == s->milestones[i]) j++;
            if (s->milestones[i] > t) break;
            lr = lr * pow(s->gamma, (double)(j - i));
            i = j;
        }
        return lr;
    }
    case LR_STEP: {
        long start = s->step_start >= 0 ? s->step_start : s->step_size;
        if (t < start) return base;
        return base * pow(s->gamma, (double)(1 + (t - start) / s->step_size));
    }
    case LR_COSINE: {
        if (s->T <= 0) return base;
        double tc = (double)(t < s->T ? t : s->T); /* floor at eta_min after T */
        return s->eta_min + (base - s->eta_min) * (1.0 + cos(M_PI * tc / (double)s->T)) / 2.0;
    }
    case LR_POLY: {
        if (s->T <= 0) return base;
        double tc = (double)(t < s->T ? t : s->T);
        return base * pow(1.0 - tc / (double)s->T, s->power);
    }
    case LR_PLATEAU: return s->st.lr;
    default: return base;
    }
}

int lr_sched_observe(LrSched *s, double metric) {
    if (s->kind != LR_PLATEAU) return 0;
    LrPlateauState *st = &s->st;
    /* ReduceLROnPlateau.step */
    st->last_epoch += 1;
    int better;
    if (!s->mode_max && !s->threshold_abs) better = metric < st->best * (1.0 - s->threshold);
    else if (!s->mode_max) better = metric < st->best - s->threshold;
    else if (!s->threshold_abs) better = metric > st->best * (s->threshold + 1.0);
    else better = metric > st->best + s->threshold;
    if (better) {
        st->best = metric;
        st->num_bad_epochs = 0;
    } else {
        st->num_bad_epochs += 1;
    }
    if (st->cooldown_counter > 0) {
        st->cooldown_counter -= 1;
        st->num_bad_epochs = 0; /* ignore any bad epochs in cooldown */
    }
    if (st->num_bad_epochs > (double)s->patience) {
        /* _reduce_lr */
        double old_lr = st->lr, new_lr = old_lr * s->factor;
        if (new_lr < s->min_lr) new_lr = s->min_lr;
        int reduced = 0;
        if (old_lr - new_lr > s->eps) {
            st->lr = new_lr;
            reduced = 1;
        }
        st->cooldown_counter = (double)s->cooldown;
        st->num_bad_epochs = 0;
        return reduced;
    }
    return 0;
}

int lr_sched_describe(const LrSched *s, char *buf, size_t n) {
    int len = snprintf(buf, n, "%s", lr_kind_name(s->kind));
    char sep = ':';
    char t1[NUM_TEXT_MAX], t2[NUM_TEXT_MAX], t3[NUM_TEXT_MAX], t4[NUM_TEXT_MAX];
#define APPEND(...)                                                  \
    do {                                                             \
        size_t at_ = len < 0 ? 0 : (size_t)len;                      \
        if (at_ < n) len += snprintf(buf + at_, n - at_, __VA_ARGS__); \
        sep = ',';                                                   \
    } while (0)
    switch (s->kind) {
    case LR_MULTISTEP:
        APPEND("%cmilestones=", sep);
        for (int i = 0; i < s->n_milestones; i++) APPEND("%s%ld", i ? "+" : "", s->milestones[i]);
        APPEND("%cgamma=%s", sep, num_text(t1, s->gamma));
        break;
    case LR_STEP:
        APPEND("%csize=%ld,gamma=%s", sep, s->step_size, num_text(t1, s->gamma));
        if (s->step_start >= 0) APPEND("%cstart=%ld", sep, s->step_start);
        break;
    case LR_COSINE:
        if (s->T) APPEND("%cT=%ld", sep, s->T);
        APPEND("%ceta_min=%s", sep, num_text(t1, s->eta_min));
        break;
    case LR_POLY:
        if (s->T) APPEND("%cT=%ld", sep, s->T);
        APPEND("%cpower=%s", sep, num_text(t1, s->power));
        break;
    case LR_PLATEAU:
        APPEND("%cmode=%s,threshold_mode=%s,factor=%s,patience=%ld,threshold=%s,cooldown=%ld,min_lr=%s,eps=%s", sep,
               s->mode_max ? "max" : "min", s->threshold_abs ? "abs" : "rel", num_text(t1, s->factor), s->patience,
               num_text(t2, s->threshold), s->cooldown, num_text(t3, s->min_lr), num_text(t4, s->eps));
        break;
    default: break;
    }
    if (s->warmup) APPEND("%cwarmup=%ld,warmup_start=%s", sep, s->warmup, num_text(t1, s->warmup_start));
#undef APPEND
    return len;
}

void lr_sched_help(FILE *f) {
    fprintf(f, "LR schedules (--schedule KIND[:key=value,...]; torch.optim.lr_scheduler 1.13 formulas):\n"
               "  constant    lr = base\n"
               "  multistep   lr = base * gamma^(milestones passed)            (MultiStepLR)\n"
               "  step        lr = base * gamma^(1 + floor((t-start)/size)) from start (default size:\n"
               "              StepLR); TF PTB / SBC LSTMs: step:size=E,gamma=0.8,start=6E, E steps/epoch\n"
               "  cosine      lr = eta_min + (base-eta_min)(1+cos(pi t/T))/2  (CosineAnnealingLR), then eta_min\n"
               "  poly        lr = base (1 - t/T)^power                        (PolynomialLR)\n"
               "  plateau     lr *= factor when the validation metric stalls  (ReduceLROnPlateau)\n"
               "Steps are optimizer steps (iterations). warmup=W ramps lr linearly from warmup_start*base\n"
               "for W steps, then the schedule starts at its own step 0 (torch SequentialLR), so milestones\n"
               "and T count steps after the warm-up.\n"
               "Options:\n");
    for (int i = 0; i < N_SCHED_KEYS; i++) {
        char kinds[80] = "";
        for (int k = 0; k < LR_KIND_COUNT; k++)
            if (sched_keys[i].kinds & (1 << k)) {
                strcat(kinds, kinds[0] ? "," : "");
                strcat(kinds, kind_names[k]);
            }
        fprintf(f, "  %-15s %s [%s]\n", sched_keys[i].key, sched_keys[i].help,
                sched_keys[i].kinds == M_ALL ? "all" : kinds);
    }
    fprintf(f, "Examples: cosine   multistep:milestones=100+150,gamma=0.1   poly:power=2,warmup=500\n"
               "          plateau:mode=max,patience=5,factor=0.5   warmup=200\n");
}

void lr_sched_ckpt_section(LrSched *s, CkptSection *out, const char *prefix) {
    snprintf(out->name, CKPT_NAME_MAX, "%slr_sched", prefix ? prefix : "");
    out->data = &s->st;
    out->len = sizeof s->st;
}

int lr_sched_ckpt_load(LrSched *s, const Ckpt *ck, const char *prefix, char *err, size_t errlen) {
    char name[CKPT_NAME_MAX + 64];
    snprintf(name, sizeof name, "%slr_sched", prefix ? prefix : "");
    LrPlateauState st;
    if (ckpt_load(ck, name, &st, sizeof st, err, errlen) != 0) return -1;
    if (!isfinite(st.lr) || st.lr < 0 || isnan(st.best) || !(st.num_bad_epochs >= 0) || !(st.cooldown_counter >= 0) ||
        !(st.last_epoch >= 0)) {
        ERRF("checkpoint lr schedule state is corrupt (lr %g, counters %g %g %g)", st.lr, st.num_bad_epochs,
             st.cooldown_counter, st.last_epoch);
        return -1;
    }
    s->st = st;
    return 0;
}
