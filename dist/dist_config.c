/* The exchange's configuration (see dist_config.h): names, the --codec parser,
 * and the paper defaults that dist_config_resolve fills in. */
#include "dist/dist_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"

/* ------------------------------------------------------------ names ---- */
static const char *const topo_names[TOPO_COUNT] = {"allreduce", "allgather", "ps", "ring"};
static const char *const mem_names[MEM_COUNT] = {"none", "residual", "dgc"};

const char *topology_name(int t) { return t >= 0 && t < TOPO_COUNT ? topo_names[t] : "auto"; }
const char *memory_name(int m) { return m >= 0 && m < MEM_COUNT ? mem_names[m] : "auto"; }
int topology_parse(const char *s) {
    for (int i = 0; i < TOPO_COUNT; i++)
        if (!strcmp(s, topo_names[i])) return i;
    return -1;
}
int memory_parse(const char *s) {
    for (int i = 0; i < MEM_COUNT; i++)
        if (!strcmp(s, mem_names[i])) return i;
    return -1;
}

/* The paper defaults per codec: topology and error-feedback memory.
 *   3lc: ps + residual both ways (3LC sections 2-3, "error accumulation")
 *   int8, stoch3, onebit, topk: 3LC's baselines (section 4.2), on 3LC's
 *     parameter server, pushes and pulls compressed: ps; stoch3 unbiased
 *     without memory, the others + residual
 *   gcomp: ring, near-lossless, no memory (GCOMP section 6.2)
 *   terngrad: ps, unbiased, no memory (TernGrad section 3, Figure 1: the server
 *     averages the ternary gradients, every worker pulls that average in 2N+1
 *     levels, ternsum, and applies it to its own copy of the model: parameter
 *     localization; see ps_exchange)
 *   dgc: allgather + DGC's memory (momentum correction, masking)
 *   sbc: allgather + residual (SBC Algorithm 1)
 *   fp16: allgather, no memory; fp32: allreduce */
static int default_topology(int codec) {
    switch (codec) {
    case CODEC_FP32: return TOPO_ALLREDUCE;
    case CODEC_3LC:
    case CODEC_INT8:
    case CODEC_STOCH3:
    case CODEC_ONEBIT:
    case CODEC_TOPK:
    case CODEC_TERNGRAD: return TOPO_PS;
    case CODEC_GCOMP: return TOPO_RING;
    default: return TOPO_ALLGATHER;
    }
}
static int default_memory(int codec) {
    switch (codec) {
    case CODEC_INT8:
    case CODEC_3LC:
    case CODEC_ONEBIT:
    case CODEC_TOPK:
    case CODEC_SBC: return MEM_RESIDUAL;
    case CODEC_DGC: return MEM_DGC;
    default: return MEM_NONE;
    }
}

/* SBC's p with communication delay: SBC (2) and (3) use 1% (SBC IV-B) */
#define SBC_P_DELAYED 0.01

void dist_config_default(DistConfig *c) {
    memset(c, 0, sizeof *c);
    codec_spec_default(&c->policy.global, codec_find("fp32"));
    c->policy.min_compress = -1;
    c->policy.keep_last_fp32 = -1;
    c->topology = TOPO_AUTO;
    c->memory = MEM_AUTO;
    c->delay = 1;
    c->deltas = -1;
    c->dgc_momentum = 0.9;
    c->dgc_warmup = 4;
    c->scalar_sharing = -1; /* TernGrad's (section 3.1); not 3LC's stoch3 baseline (3LC section 3) */
}

int dist_parse_codec(DistConfig *c, const char *text, char *err, size_t errlen) {
    char buf[512], rest[512];
    if (strlen(text) >= sizeof buf) {
        snprintf(err, errlen, "--codec value too long");
        return -1;
    }
    strcpy(buf, text);
    char *colon = strchr(buf, ':');
    char *params = colon ? colon + 1 : NULL;
    if (colon) *colon = 0;
    int graddrop = !strcmp(buf, "graddrop");
    snprintf(rest, sizeof rest, "%s", graddrop ? "dgc" : buf);
    size_t at = strlen(rest);
    int first = 1;
    int memory = graddrop ? MEM_RESIDUAL : MEM_AUTO;
    double warmup = graddrop ? 0 : c->dgc_warmup, clip = c->dgc_clip;
    int share = c->scalar_sharing, p_given = 0;
    char *save = NULL;
    for (char *kv = params ? strtok_r(params, ",", &save) : NULL; kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        const char *val = eq ? eq + 1 : "";
        size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);
        char *end = NULL;
        if (klen == 6 && !strncmp(kv, "warmup", 6)) {
            warmup = strtod(val, &end);
            if (end == val || *end || !(warmup >= 0)) goto bad; /* NaN too */
        } else if (klen == 4 && !strncmp(kv, "clip", 4)) {
            clip = strtod(val, &end);
            if (end == val || *end || !(clip >= 0)) goto bad;
        } else if (klen == 5 && !strncmp(kv, "share", 5)) {
            if (strcmp(val, "0") && strcmp(val, "1")) goto bad;
            share = val[0] == '1';
        } else if (klen == 6 && !strncmp(kv, "memory", 6)) {
            memory = memory_parse(val);
            if (memory < 0) goto bad;
        } else {
            p_given |= klen == 1 && kv[0] == 'p';
            at += (size_t)snprintf(rest + at, sizeof rest - at, "%c%s", first ? ':' : ',', kv);
            first = 0;
        }
        continue;
    bad:
        snprintf(err, errlen, "--codec %s: bad value in '%s'", text, kv);
        return -1;
    }
    char cerr[300];
    if (codec_parse(&c->policy.global, rest, cerr, sizeof cerr) != 0) {
        snprintf(err, errlen, "--codec %s: %s", text, cerr);
        return -1;
    }
    c->memory = memory;
    c->dgc_warmup = warmup;
    c->dgc_clip = clip;
    c->scalar_sharing = share;
    c->sbc_p_given = p_given;
    return 0;
}

double dgc_warmup_density(double target, double warmup, double epoch) {
    /* DGC section 3.3 (warm-up training) and 4.1: "we rise the sparsity in the
     * warm-up period as follows: 75%, 93.75%, 98.4375%, 99.6%, 99.9%
     * (exponentially increase till 99.9%)": four equal stages over the warm-up
     * period, then the target (one epoch each for CIFAR's 4 epochs, a quarter
     * epoch each for the language model's 1 epoch, section 4.1):
     * density 0.25^(1 + k) in stage k = floor(4 epoch / W). */
    if (warmup <= 0 || epoch >= warmup) return target;
    double k = floor(epoch * 4.0 / warmup);
    double d = pow(0.25, 1.0 + k);
    return d > target ? d : target;
}

/* The configuration as the exchange runs it (the codec's paper topology and
 * memory, and whether weight deltas are exchanged, where cfg says auto), and
 * the combinations it cannot run: the trainers check before any data is read. */
int dist_config_resolve(DistConfig *c, int opt_kind, char *err, size_t errlen) {
    int codec = c->policy.global.ops->id;
    if (c->topology == TOPO_AUTO) c->topology = default_topology(codec);
    if (c->memory == MEM_AUTO) c->memory = default_memory(codec);
    if (c->deltas < 0) c->deltas = codec == CODEC_SBC || c->delay > 1;
    /* SBC IV-B: SBC (1) sends 0.1% without delay, SBC (2) and (3) 1% every 10 or
     * 100 steps, so `--codec sbc --delay 10` is SBC (2) unless p= says otherwise */
    if (codec == CODEC_SBC && !c->sbc_p_given && c->delay > 1) codec_param_set(&c->policy.global, "p", SBC_P_DELAYED);
    if (c->delay < 1) {
        snprintf(err, errlen, "--delay must be >= 1");
        return -1;
    }
    if (c->memory == MEM_DGC && (c->deltas || c->topology == TOPO_RING)) {
        snprintf(err, errlen,
                 "DGC's memory (momentum correction) exchanges gradients every step over allgather or ps; "
                 "it cannot be combined with %s", c->deltas ? "--delay/weight-delta exchange" : "the ring topology");
        return -1;
    }
    if (c->memory == MEM_DGC && opt_kind != OPT_SGD) {
        snprintf(err, errlen, "DGC's momentum correction replaces SGD momentum; use --optim sgd (or momentum)");
        return -1;
    }
    if (c->topology == TOPO_ALLREDUCE) {
        /* the uncompressed baseline: nothing is encoded */
        for (int r = 0; r < c->policy.nrules; r++)
            if (c->policy.rules[r].spec.ops->id != CODEC_FP32) {
                snprintf(err, errlen, "the allreduce topology sends fp32 only; --layer-codec needs allgather, ps or ring");
                return -1;
            }
        if (codec != CODEC_FP32) {
            snprintf(err, errlen, "the allreduce topology sends fp32 only; codec %s needs allgather, ps or ring",
                     c->policy.global.ops->name);
            return -1;
        }
    }
    return 0;
}
