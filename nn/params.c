#include "params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"

static const char *const kind_names[PK_KIND_COUNT] = {
    [PK_CONV_WEIGHT] = "conv_weight", [PK_FC_WEIGHT] = "fc_weight",     [PK_BIAS] = "bias",
    [PK_BN_WEIGHT] = "bn_weight",     [PK_BN_BIAS] = "bn_bias",         [PK_EMBEDDING] = "embedding",
    [PK_LSTM_WEIGHT] = "lstm_weight", [PK_LSTM_BIAS] = "lstm_bias",
};

const char *param_kind_name(ParamKind k) { return (k >= 0 && k < PK_KIND_COUNT) ? kind_names[k] : "?"; }

int param_kind_is_bn(ParamKind k) { return k == PK_BN_WEIGHT || k == PK_BN_BIAS; }

void param_table_init(ParamTable *pt) { memset(pt, 0, sizeof *pt); }

void param_table_free(ParamTable *pt) {
    free(pt->t);
    memset(pt, 0, sizeof *pt);
}

int param_table_add(ParamTable *pt, const char *name, ParamKind kind, int ndim, const int *shape) {
    if (ndim < 1 || ndim > PARAM_MAX_DIMS) {
        gc_fatal("error: tensor %s has %d dims (1..%d allowed)\n", name, ndim, PARAM_MAX_DIMS);
    }
    if (strlen(name) >= PARAM_NAME_MAX) {
        gc_fatal("error: tensor name too long: %s\n", name);
    }
    if (pt->n == pt->cap) {
        pt->cap = pt->cap ? 2 * pt->cap : 32;
        pt->t = reallocCheck(pt->t, (size_t)pt->cap * sizeof *pt->t);
    }
    ParamInfo *p = &pt->t[pt->n];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->kind = kind;
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->numel *= (size_t)shape[i];
    }
    p->offset = (pt->total + 15) & ~(size_t)15;
    pt->total = p->offset + p->numel;
    return pt->n++;
}

int param_table_find(const ParamTable *pt, const char *name) {
    for (int i = 0; i < pt->n; i++)
        if (strcmp(pt->t[i].name, name) == 0) return i;
    return -1;
}

size_t param_table_count(const ParamTable *pt) {
    size_t c = 0;
    for (int i = 0; i < pt->n; i++) c += pt->t[i].numel;
    return c;
}

float *param_arena_alloc(const ParamTable *pt) {
    size_t bytes = ((pt->total + 15) & ~(size_t)15) * sizeof(float);
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) {
        gc_fatal("error: out of memory allocating a %zu-byte arena\n", bytes);
    }
    memset(p, 0, bytes ? bytes : 64);
    return p;
}

void param_arena_free(float *arena) { free(arena); }

void param_count_str(char *buf, size_t n, size_t count) {
    if (count >= 1000000) snprintf(buf, n, "%.2fM", count / 1e6);
    else if (count >= 1000) snprintf(buf, n, "%.1fK", count / 1e3);
    else snprintf(buf, n, "%zu", count);
}
