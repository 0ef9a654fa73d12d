#include "dist/policy.h"

#include <fnmatch.h>
#include <string.h>

int policy_parse_rule(LayerRule *rule, const char *text, char *err, size_t errlen) {
    const char *eq = strchr(text, '=');
    if (!eq || eq == text) {
        snprintf(err, errlen, "--layer-codec expects PATTERN=CODEC[:key=value,...], got '%s'", text);
        return -1;
    }
    size_t plen = (size_t)(eq - text);
    if (plen >= sizeof rule->pattern) {
        snprintf(err, errlen, "--layer-codec pattern too long: '%s'", text);
        return -1;
    }
    memcpy(rule->pattern, text, plen);
    rule->pattern[plen] = 0;
    char cerr[256];
    if (codec_parse(&rule->spec, eq + 1, cerr, sizeof cerr) != 0) {
        snprintf(err, errlen, "--layer-codec %s: %s", text, cerr);
        return -1;
    }
    return 0;
}

static int is_bias_kind(ParamKind k) { return k == PK_BIAS || k == PK_LSTM_BIAS; }

/* "layer3.2.conv1.weight" -> length of "layer3.2.conv1." (the owning module) */
static size_t module_prefix_len(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot ? (size_t)(dot - name) + 1 : 0;
}

void policy_build(TensorPolicy *out, const PolicyConfig *cfg, const ParamTable *pt) {
    CodecSpec fp32;
    codec_spec_default(&fp32, codec_find("fp32"));
    long minc = cfg->min_compress >= 0 ? cfg->min_compress : 0;
    int terngrad = cfg->global.ops->id == CODEC_TERNGRAD;
    int biases = terngrad || cfg->global.ops->id == CODEC_3LC; /* compressed by their papers */
    int keep_last = cfg->keep_last_fp32 >= 0 ? cfg->keep_last_fp32 : terngrad;
    /* the last layer: the module of the last fc weight in the table */
    int last_fc = -1;
    for (int i = 0; i < pt->n; i++)
        if (pt->t[i].kind == PK_FC_WEIGHT) last_fc = i;
    for (int i = 0; i < pt->n; i++) {
        const ParamInfo *t = &pt->t[i];
        TensorPolicy *p = &out[i];
        p->spec = cfg->global;
        p->compressed = 1;
        p->reason = "codec";
        if (param_kind_is_bn(t->kind)) {
            p->compressed = 0;
            p->reason = "batch-norm";
        } else if (is_bias_kind(t->kind) && !biases) {
            p->compressed = 0;
            p->reason = "bias";
        } else if ((long)t->numel < minc) {
            p->compressed = 0;
            p->reason = "small";
        } else if (keep_last && last_fc >= 0 &&
                   strncmp(t->name, pt->t[last_fc].name, module_prefix_len(pt->t[last_fc].name)) == 0 &&
                   module_prefix_len(t->name) == module_prefix_len(pt->t[last_fc].name)) {
            p->compressed = 0;
            p->reason = "last layer";
        }
        for (int r = 0; r < cfg->nrules; r++)
            if (fnmatch(cfg->rules[r].pattern, t->name, 0) == 0) {
                p->spec = cfg->rules[r].spec;
                p->compressed = 1;
                p->reason = cfg->rules[r].pattern;
            }
        if (p->spec.ops->id == CODEC_FP32) p->compressed = 0;
        if (!p->compressed) p->spec = fp32;
    }
}

void policy_print(FILE *fp, const TensorPolicy *pol, const ParamTable *pt) {
    fprintf(fp, "%-32s %10s  %-40s %s\n", "tensor", "numel", "codec", "why");
    size_t comp = 0, total = 0;
    for (int i = 0; i < pt->n; i++) {
        char spec[160];
        codec_spec_str(spec, sizeof spec, &pol[i].spec);
        fprintf(fp, "%-32s %10zu  %-40s %s\n", pt->t[i].name, pt->t[i].numel, spec, pol[i].reason);
        total += pt->t[i].numel;
        if (pol[i].compressed) comp += pt->t[i].numel;
    }
    fprintf(fp, "%zu of %zu values (%.2f%%) compressed\n", comp, total, total ? 100.0 * comp / total : 0.0);
}

void policy_summary(char *buf, size_t n, const TensorPolicy *pol, const ParamTable *pt) {
    enum { MAXG = 16 };
    char spec[MAXG][160];
    int count[MAXG] = {0}, ng = 0;
    size_t values[MAXG] = {0}, total = 0;
    const char *why[MAXG];
    int whyn[MAXG] = {0}, nw = 0;
    for (int i = 0; i < pt->n; i++) {
        char s[160];
        codec_spec_str(s, sizeof s, &pol[i].spec);
        int g = 0;
        while (g < ng && strcmp(spec[g], s)) g++;
        if (g == ng && ng < MAXG) snprintf(spec[ng++], sizeof spec[0], "%s", s);
        if (g < ng) {
            count[g]++;
            values[g] += pt->t[i].numel;
        }
        total += pt->t[i].numel;
        if (!pol[i].compressed) {
            int k = 0;
            while (k < nw && strcmp(why[k], pol[i].reason)) k++;
            if (k == nw && nw < MAXG) why[nw++] = pol[i].reason;
            if (k < nw) whyn[k]++;
        }
    }
    size_t at = (size_t)snprintf(buf, n, "%d tensors:", pt->n);
    for (int g = 0; g < ng && at < n; g++) {
        at += (size_t)snprintf(buf + at, n - at, "%s %d %s (%.1f%% of values", g ? "," : "", count[g], spec[g],
                               total ? 100.0 * (double)values[g] / (double)total : 0.0);
        if (!strcmp(spec[g], "fp32") && nw)
            for (int k = 0; k < nw && at < n; k++)
                at += (size_t)snprintf(buf + at, n - at, "%s %d %s", k ? "," : ";", whyn[k], why[k]);
        if (at < n) at += (size_t)snprintf(buf + at, n - at, ")");
    }
}

